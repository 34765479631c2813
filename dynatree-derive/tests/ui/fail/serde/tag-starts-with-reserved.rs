use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}", reserved = "|")]
#[serde(tag = "|type")]
struct Account {
    id: String,
}

fn main() {}
