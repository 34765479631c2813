use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct Stored {
    id: String,
}

impl From<Account> for Stored {
    fn from(a: Account) -> Self {
        Stored { id: a.id }
    }
}

#[derive(Hierarchical, Clone, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
#[serde(into = "Stored")]
struct Account {
    id: String,
}

fn main() {}
