use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{v}")]
struct Account {
    #[dynatree(version)]
    v: u64,
}

fn main() {}
