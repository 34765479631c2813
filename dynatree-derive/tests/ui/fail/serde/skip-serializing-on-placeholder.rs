use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account_id}/Links/{short}")]
struct Link {
    account_id: String,
    #[serde(skip_serializing)]
    short: String,
    target: String,
}

fn main() {}
