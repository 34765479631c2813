use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_mail", hash = mail))]
struct User {
    id: String,
    email: String,
    score: f64,
}

fn main() {}
