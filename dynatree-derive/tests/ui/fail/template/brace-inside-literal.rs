use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/x{id}")]
struct Account {
    id: String,
    name: String,
}

fn main() {}
