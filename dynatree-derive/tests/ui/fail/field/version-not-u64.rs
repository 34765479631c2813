use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    #[dynatree(version)]
    v: i32,
}

fn main() {}
