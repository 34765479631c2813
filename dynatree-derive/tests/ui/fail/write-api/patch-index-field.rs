use dynatree::{Hierarchical, Patch};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

fn main() {
    let key = UserKey { id: "a".into() };
    let _ = Patch::<User>::new(&key).set(User::FIELDS.email, "x@example.com");
}
