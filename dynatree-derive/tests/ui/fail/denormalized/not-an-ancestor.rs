use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Users/{user}")]
struct User {
    user: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    #[dynatree(from = User::name)]
    author_name: String,
}

fn main() {}
