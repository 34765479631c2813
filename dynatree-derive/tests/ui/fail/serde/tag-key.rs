use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
#[serde(tag = "Key")]
struct Account {
    id: String,
}

fn main() {}
