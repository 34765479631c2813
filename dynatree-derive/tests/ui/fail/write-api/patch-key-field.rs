use dynatree::{Hierarchical, Patch};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    name: String,
}

fn main() {
    let key = AccountKey { id: "a".into() };
    let _ = Patch::<Account>::new(&key).set(Account::FIELDS.id, "b");
}
