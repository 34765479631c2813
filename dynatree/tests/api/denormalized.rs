//! Denormalized ancestor fields, propagated inline: fill on write, propagation of a
//! source change through a chain, optional targets cleared, versions that never go back.

use dynatree::{Hierarchical, Patch, Tree};
use dynatree_testing::FakeTable;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = Forum::name)]
    forum_name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}")]
struct Post {
    forum: String,
    thread: String,
    post: String,
    #[dynatree(from = Thread::title)]
    thread_title: Option<String>,
    #[dynatree(from = Thread::forum_name)]
    forum_name: Option<String>,
}

fn forum(name: &str) -> Forum {
    Forum {
        forum: "f".into(),
        name: name.into(),
    }
}

fn thread(title: &str) -> Thread {
    Thread {
        forum: "f".into(),
        thread: "t".into(),
        title: title.into(),
        forum_name: String::new(),
    }
}

fn post(id: &str) -> Post {
    Post {
        forum: "f".into(),
        thread: "t".into(),
        post: id.into(),
        thread_title: None,
        forum_name: None,
    }
}

async fn setup() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    (table, tree)
}

#[tokio::test]
async fn targets_are_filled_on_write_and_follow_their_sources() {
    let (_table, tree) = setup().await;
    let (forums, threads, posts) = (
        tree.repo::<Forum>(),
        tree.repo::<Thread>(),
        tree.repo::<Post>(),
    );
    // A post under a thread that does not exist yet: its optional copies are empty.
    posts.put(&post("p0")).await.unwrap();
    let p0 = posts.get(&post("p0").key()).await.unwrap().unwrap();
    assert_eq!((p0.thread_title, p0.forum_name), (None, None));

    forums.put(&forum("Rust")).await.unwrap();
    // What the caller passes for a copy is replaced by the source's value.
    threads.put(&thread("Hello")).await.unwrap();
    let t = threads.get(&thread("").key()).await.unwrap().unwrap();
    assert_eq!(t.forum_name, "Rust");
    // Writing the thread (a source for posts) copies its fields down, through the chain.
    let p0 = posts.get(&post("p0").key()).await.unwrap().unwrap();
    assert_eq!(p0.thread_title.as_deref(), Some("Hello"));
    assert_eq!(p0.forum_name.as_deref(), Some("Rust"));
    posts.put(&post("p1")).await.unwrap();
    let p1 = posts.get(&post("p1").key()).await.unwrap().unwrap();
    assert_eq!(
        (p1.thread_title.as_deref(), p1.forum_name.as_deref()),
        (Some("Hello"), Some("Rust"))
    );

    // Renaming the forum reaches the thread and, through it, every post.
    forums.put(&forum("Rust users")).await.unwrap();
    assert_eq!(
        threads
            .get(&thread("").key())
            .await
            .unwrap()
            .unwrap()
            .forum_name,
        "Rust users"
    );
    for id in ["p0", "p1"] {
        let p = posts.get(&post(id).key()).await.unwrap().unwrap();
        assert_eq!(p.forum_name.as_deref(), Some("Rust users"), "{id}");
        assert_eq!(p.thread_title.as_deref(), Some("Hello"), "{id}");
    }

    // A patch of a source field propagates too.
    forums
        .patch(Patch::new(&forum("").key()).set(Forum::FIELDS.name, "Rustaceans"))
        .await
        .unwrap();
    let p = posts.get(&post("p1").key()).await.unwrap().unwrap();
    assert_eq!(p.forum_name.as_deref(), Some("Rustaceans"));
    // Bookkeeping (versions) never shows in the values.
    let raw: std::collections::BTreeMap<String, serde_json::Value> = tree
        .get(["Forums", "f", "Threads", "t", "Posts", "p1"])
        .await
        .unwrap()
        .unwrap();
    assert!(raw.keys().all(|n| !n.starts_with('¦')), "{raw:?}");
}

#[tokio::test]
async fn a_rename_costs_one_update_per_copy() {
    let (table, tree) = setup().await;
    tree.repo::<Forum>().put(&forum("Rust")).await.unwrap();
    tree.repo::<Thread>().put(&thread("Hello")).await.unwrap();
    for i in 0..3 {
        tree.repo::<Post>()
            .put(&post(&format!("p{i}")))
            .await
            .unwrap();
    }
    table.reset_metrics();
    tree.repo::<Forum>().put(&forum("Rust 2")).await.unwrap();
    let m = table.metrics();
    // The forum's put, then the walk below it (one consistent Query per level above the
    // posts, the deepest target type: 4; one BatchGetItem per level), then one conditional
    // UpdateItem per copy that changes: the thread's copy of the forum's name (which also
    // records when that copy changed, `SC cv.forum_name`, as posts copy it further) and each
    // post's copy of it. The posts' copies of the thread's title are untouched: no request.
    assert_eq!(m.requests("UpdateItem"), 4, "{m:?}");
    assert_eq!(m.requests("Query"), 4, "{m:?}");
    assert_eq!(m.requests("TransactWriteItems"), 1, "{m:?}");
    // The intent that makes the propagation survive a crash: written before the put, deleted
    // when every copy is written.
    assert_eq!(m.requests("PutItem"), 1, "{m:?}");
    assert_eq!(m.requests("DeleteItem"), 1, "{m:?}");
    assert!(tree.pending().await.unwrap().is_empty());
}

/// The propagation reads consistently: a target written just before a rename is found by the
/// rename's walk even where eventually consistent reads still miss it.
#[tokio::test]
async fn propagation_sees_a_target_written_just_before() {
    let table = FakeTable::eventually_consistent(1_000);
    let tree = Tree::builder(table.clone())
        .denormalized::<Thread>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    table.settle();
    tree.repo::<Forum>().put(&forum("Rust")).await.unwrap();
    tree.repo::<Thread>().put(&thread("Hello")).await.unwrap();
    tree.repo::<Forum>().put(&forum("Rust 2")).await.unwrap();
    let t = tree
        .repo::<Thread>()
        .read(&thread("").key())
        .consistent(true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.forum_name, "Rust 2");
}

/// What a put of a target costs against the same put without copies (both under existing
/// ancestors, warm cache): the fill's BatchGetItem before the write and its re-read after.
#[tokio::test]
async fn cost_of_a_put_with_and_without_copies() {
    #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    #[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}")]
    struct PlainPost {
        forum: String,
        thread: String,
        post: String,
    }
    let (table, tree) = setup().await;
    tree.repo::<Forum>().put(&forum("Rust")).await.unwrap();
    tree.repo::<Thread>().put(&thread("Hello")).await.unwrap();
    tree.repo::<Post>().put(&post("p0")).await.unwrap();
    let plain = PlainPost {
        forum: "f".into(),
        thread: "t".into(),
        post: "p0".into(),
    };
    table.reset_metrics();
    tree.repo::<PlainPost>().put(&plain).await.unwrap();
    let without = table.metrics();
    table.reset_metrics();
    tree.repo::<Post>().put(&post("p0")).await.unwrap();
    let with = table.metrics();
    // Without copies, an overwrite of an object this tree wrote: one PutItem, 1 unit.
    assert_eq!(without.total_requests(), 1, "{without:?}");
    assert_eq!(without.requests("PutItem"), 1);
    assert_eq!(without.write_units(), 1.0);
    // With copies: one BatchGetItem to fill them (the post's two copies come from one source,
    // the thread), then a transaction: the object's put, the check of its listing row and a
    // check that the thread is as it was read (else read and fill again); it cannot be a bare
    // PutItem, which could not check the source. A condition check in a transaction is billed
    // like a write of its item: 2 write units each, 6 in all.
    assert_eq!(with.requests("TransactWriteItems"), 1, "{with:?}");
    assert_eq!(with.requests("BatchGetItem"), 1, "{with:?}");
    assert_eq!(with.total_requests(), 2, "{with:?}");
    assert_eq!(with.write_units(), 6.0);
    assert_eq!(with.read_units(), 1.0);
}
