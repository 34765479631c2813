//! The `forum` examples' model (shared by `forum.rs` and `forum_lambda.rs`): forums, threads,
//! posts and comments, and the tree that knows every type holding copies. A processor of the
//! table's stream must register the same types as the writers.

use dynatree::{Hierarchical, Tree, denorm::Propagation};
use serde::{Deserialize, Serialize};

/// A forum: its name is copied to everything below it.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
pub struct Forum {
    pub forum: String,
    pub name: String,
}

/// A thread shows its forum's name.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}", parent = Forum)]
pub struct Thread {
    pub forum: String,
    pub thread: String,
    pub title: String,
    #[dynatree(from = Forum::name)]
    pub forum_name: Option<String>,
}

/// A post shows its forum's name and its thread's title.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}", parent = Thread)]
pub struct Post {
    pub forum: String,
    pub thread: String,
    pub post: String,
    pub body: String,
    #[dynatree(from = Forum::name)]
    pub forum_name: Option<String>,
    #[dynatree(from = Thread::title)]
    pub thread_title: Option<String>,
}

/// A comment copies the forum's name directly, and the thread's title through its post's copy
/// (a chain: a copy can be a source too).
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(
    path = "Forums/{forum}/Threads/{thread}/Posts/{post}/Comments/{comment}",
    parent = Post
)]
pub struct Comment {
    pub forum: String,
    pub thread: String,
    pub post: String,
    pub comment: String,
    pub text: String,
    #[dynatree(from = Forum::name)]
    pub forum_name: Option<String>,
    #[dynatree(from = Post::thread_title)]
    pub thread_title: Option<String>,
}

/// The tree, with every type that holds copies registered (a writer of a forum must know that
/// comments copy its name).
pub fn tree<S: dynatree::storage::Storage + 'static>(
    storage: S,
    propagation: Propagation,
) -> dynatree::Result<Tree> {
    Tree::builder(storage)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .denormalized::<Comment>()
        .propagation(propagation)
        .build()
}
