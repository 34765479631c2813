use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email, sort = id))]
struct User {
    id: String,
    email: String,
    score: f64,
}

fn main() {}
