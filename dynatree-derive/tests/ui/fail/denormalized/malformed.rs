use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    // Not `Type::field`.
    #[dynatree(from = name)]
    a: String,
    // Its own type.
    #[dynatree(from = Thread::title)]
    b: String,
    title: String,
    // Skipped by serde.
    #[serde(skip)]
    #[dynatree(from = Forum::name)]
    c: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}/Posts/{post}")]
struct Post {
    // A key field.
    #[dynatree(from = Forum::forum)]
    forum: String,
    post: String,
}

fn main() {}
