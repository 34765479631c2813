use dynatree::{Entity, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/{section}/{name}")]
struct Page {
    account: String,
    section: String,
    name: String,
}

#[derive(Entity)]
enum AccountItem {
    Link(Link),
    Page(Page),
}

fn main() {}
