use dynatree::{Entity, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

#[derive(Entity)]
enum AccountItem {
    Link(Link),
    #[dynatree(other)]
    Other(String),
}

fn main() {}
