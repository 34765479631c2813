use dynatree::{Entity, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", reserved = "|")]
struct User {
    id: String,
}

#[derive(Entity)]
enum Anything {
    Link(Link),
    User(User),
}

fn main() {}
