use dynatree::{Hierarchical, Patch};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    name: String,
    balance: i64,
}

fn main() {
    let key = AccountKey { id: "a".into() };
    let f = Account::FIELDS;
    // Adding to a text, removing a field that is not optional, a value of another type.
    let _ = Patch::<Account>::new(&key).add(f.name, "x");
    let _ = Patch::<Account>::new(&key).remove(f.balance);
    let _ = Patch::<Account>::new(&key).set(f.balance, "ten");
    let _ = f.balance.eq("ten");
}
