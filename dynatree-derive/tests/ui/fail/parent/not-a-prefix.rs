use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{account_id}/Links/{short}", parent = Account)]
struct Link {
    account_id: String,
    short: String,
}

fn main() {}
