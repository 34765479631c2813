use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account_id}")]
#[serde(rename_all = "camelCase")]
struct Account {
    account_id: String,
    display_name: String,
    #[dynatree(version)]
    row_version: u64,
}

fn main() {}
