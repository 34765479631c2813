use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_team", hash = team, range = joined))]
struct User {
    id: String,
    team: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    joined: String,
}

fn main() {}
