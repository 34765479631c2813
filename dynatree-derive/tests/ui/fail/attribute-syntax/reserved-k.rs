use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}", reserved = "K")]
struct Account {
    id: String,
    name: String,
}

fn main() {}
