use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    #[dynatree(version)]
    v: u64,
    #[dynatree(version)]
    w: u64,
}

fn main() {}
