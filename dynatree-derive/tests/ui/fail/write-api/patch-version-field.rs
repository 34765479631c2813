use dynatree::{Hierarchical, Patch};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    #[dynatree(version)]
    version: u64,
}

fn main() {
    let key = AccountKey { id: "a".into() };
    let _ = Patch::<Account>::new(&key).add(Account::FIELDS.version, 1u64);
}
