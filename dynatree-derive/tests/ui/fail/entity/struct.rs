use dynatree::{Entity, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

#[derive(Entity)]
struct Wrapper {
    link: Link,
}

fn main() {}
