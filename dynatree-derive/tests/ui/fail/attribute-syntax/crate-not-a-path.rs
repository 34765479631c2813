use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}", crate = "not a path")]
struct Account {
    id: String,
    name: String,
}

fn main() {}
