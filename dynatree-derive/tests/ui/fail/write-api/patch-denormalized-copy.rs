use dynatree::{Hierarchical, Patch};
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
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

fn main() {
    let key = ThreadKey { forum: "f".into(), thread: "t".into() };
    let _ = Patch::<Thread>::new(&key).set(Thread::FIELDS.forum_name, "mine");
}
