use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = Accounts)]
struct Account {
    id: String,
    name: String,
}

fn main() {}
