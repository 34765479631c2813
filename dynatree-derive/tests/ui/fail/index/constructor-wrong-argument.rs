use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

fn main() {
    let _ = User::index_by_email(&42);
}
