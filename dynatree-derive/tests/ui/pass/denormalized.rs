use dynatree::{denorm::Denormalized, Hierarchical};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}")]
#[serde(rename_all = "camelCase")]
struct Post {
    forum: String,
    thread: String,
    post: String,
    #[dynatree(from = Forum::name)]
    forum_name: String,
}

// A chain: a comment copies the post's copy; an optional target.
#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}/Comments/{comment}")]
struct Comment {
    forum: String,
    thread: String,
    post: String,
    comment: String,
    #[dynatree(from = Post::forum_name)]
    forum_name: Option<String>,
}

fn main() {
    assert_eq!(
        Post::DENORMALIZED,
        &[Denormalized::new("forumName", "Forums/{forum}", "name", false)]
    );
    assert_eq!(
        Comment::DENORMALIZED,
        &[Denormalized::new(
            "forum_name",
            "Forums/{forum}/Threads/{thread}/Posts/{post}",
            "forumName",
            true
        )]
    );
    assert!(Forum::DENORMALIZED.is_empty());
}
