use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Stored {
    id: String,
}

impl From<Stored> for Account {
    fn from(s: Stored) -> Self {
        Account { id: s.id }
    }
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
#[serde(from = "Stored")]
struct Account {
    id: String,
}

fn main() {}
