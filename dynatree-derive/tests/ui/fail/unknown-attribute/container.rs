use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}", paht = "x")]
struct Account {
    id: String,
    name: String,
}

fn main() {}
