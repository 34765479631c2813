use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
#[serde(rename_all = "PascalCase")]
struct Account {
    id: String,
    key: String,
}

fn main() {}
