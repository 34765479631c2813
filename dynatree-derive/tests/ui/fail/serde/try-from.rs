use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Stored {
    id: String,
}

impl TryFrom<Stored> for Account {
    type Error = String;
    fn try_from(s: Stored) -> Result<Self, String> {
        Ok(Account { id: s.id })
    }
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
#[serde(try_from = "Stored")]
struct Account {
    id: String,
}

fn main() {}
