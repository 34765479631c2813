use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]

struct Account {
    id: String,
    name: String,
}

fn main() {}
