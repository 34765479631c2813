use dynatree::{Entity, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

struct Plain {
    text: String,
}

#[derive(Entity)]
enum AccountItem {
    Link(Link),
    Plain(Plain),
}

fn main() {}
