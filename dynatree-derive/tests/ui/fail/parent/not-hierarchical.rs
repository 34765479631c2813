use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

struct Plain;

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}", parent = Plain)]
struct Account {
    id: String,
    name: String,
}

fn main() {}
