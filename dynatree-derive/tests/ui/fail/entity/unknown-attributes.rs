use dynatree::{Entity, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

#[derive(Entity)]
#[dynatree(path = "Accounts/{account}")]
enum AccountItem {
    #[dynatree(fallback)]
    Link(Link),
}

fn main() {}
