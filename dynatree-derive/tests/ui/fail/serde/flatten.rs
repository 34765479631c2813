use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Meta {
    created: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    #[serde(flatten)]
    meta: Meta,
}

fn main() {}
