use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    #[serde(skip)]
    id: String,
    name: String,
}

fn main() {}
