use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts//{missing}/Links", colour = "red")]
struct Account {
    id: String,
    #[serde(rename = "Key")]
    key: String,
    #[dynatree(version)]
    v: String,
}

fn main() {}
