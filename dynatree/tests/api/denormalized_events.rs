//! Denormalized fields and the events of REFERENCE §4 beyond a source's own writes: a subtree
//! moved under another parent, a source removed (optional copies cleared), a propagation cut
//! short by a failure (finished by `resume`), transactions and untyped puts of sources, and
//! fan-outs beyond the inline limit (in the background).

use dynatree::{Hierarchical, Tree};
use dynatree_testing::{FakeTable, Fault, FaultRule, Faulty, Op};
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
    forum_name: Option<String>,
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

fn forum(id: &str, name: &str) -> Forum {
    Forum {
        forum: id.into(),
        name: name.into(),
    }
}

fn thread(f: &str, t: &str, title: &str) -> Thread {
    Thread {
        forum: f.into(),
        thread: t.into(),
        title: title.into(),
        forum_name: None,
    }
}

fn post(f: &str, t: &str, p: &str) -> Post {
    Post {
        forum: f.into(),
        thread: t.into(),
        post: p.into(),
        thread_title: None,
        forum_name: None,
    }
}

async fn tree_on<S: dynatree::storage::Storage + 'static>(storage: S) -> Tree {
    let tree = Tree::builder(storage)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree
}

/// Forum `f` ("Rust") with thread `t` ("Hello") and posts p0..n; forum `g` ("Go").
async fn populate(tree: &Tree, posts: usize) {
    tree.repo::<Forum>().put(&forum("f", "Rust")).await.unwrap();
    tree.repo::<Forum>().put(&forum("g", "Go")).await.unwrap();
    tree.repo::<Thread>()
        .put(&thread("f", "t", "Hello"))
        .await
        .unwrap();
    for i in 0..posts {
        tree.repo::<Post>()
            .put(&post("f", "t", &format!("p{i}")))
            .await
            .unwrap();
    }
}

async fn posts_of(tree: &Tree, f: &str, t: &str, n: usize) -> Vec<Post> {
    let mut out = Vec::new();
    for i in 0..n {
        let key = post(f, t, &format!("p{i}")).key();
        out.push(
            tree.repo::<Post>()
                .read(&key)
                .consistent(true)
                .await
                .unwrap()
                .expect("the post"),
        );
    }
    out
}

async fn thread_at(tree: &Tree, f: &str, t: &str) -> Thread {
    tree.repo::<Thread>()
        .read(&thread(f, t, "").key())
        .consistent(true)
        .await
        .unwrap()
        .expect("the thread")
}

#[tokio::test]
async fn a_moved_subtree_copies_from_its_new_ancestors() {
    let tree = tree_on(FakeTable::new()).await;
    populate(&tree, 3).await;
    tree.move_subtree(
        ["Forums", "f", "Threads", "t"],
        ["Forums", "g", "Threads", "t"],
    )
    .await
    .unwrap();
    assert_eq!(
        thread_at(&tree, "g", "t").await.forum_name.as_deref(),
        Some("Go")
    );
    for p in posts_of(&tree, "g", "t", 3).await {
        assert_eq!(p.forum_name.as_deref(), Some("Go"), "{p:?}");
        assert_eq!(p.thread_title.as_deref(), Some("Hello"), "{p:?}");
    }
    // The old parent's renames no longer reach it; the new parent's do, although the new
    // parent's version is older than the copies the moved rows held.
    tree.repo::<Forum>()
        .put(&forum("f", "Rust 2"))
        .await
        .unwrap();
    tree.repo::<Forum>().put(&forum("g", "Go 2")).await.unwrap();
    for p in posts_of(&tree, "g", "t", 3).await {
        assert_eq!(p.forum_name.as_deref(), Some("Go 2"), "{p:?}");
    }
    assert!(tree.pending().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_removed_source_clears_optional_copies_and_a_new_one_fills_them() {
    let tree = tree_on(FakeTable::new()).await;
    populate(&tree, 2).await;
    // The forum's object goes; its node stays (it has children).
    tree.repo::<Forum>()
        .delete(&forum("f", "").key())
        .await
        .unwrap();
    assert_eq!(thread_at(&tree, "f", "t").await.forum_name, None);
    for p in posts_of(&tree, "f", "t", 2).await {
        assert_eq!(p.forum_name, None, "{p:?}");
        assert_eq!(p.thread_title.as_deref(), Some("Hello"), "{p:?}");
    }
    tree.repo::<Forum>()
        .put(&forum("f", "Rust again"))
        .await
        .unwrap();
    for p in posts_of(&tree, "f", "t", 2).await {
        assert_eq!(p.forum_name.as_deref(), Some("Rust again"), "{p:?}");
    }
    // The untyped delete does the same.
    tree.delete(["Forums", "f"]).await.unwrap();
    assert_eq!(thread_at(&tree, "f", "t").await.forum_name, None);
    assert!(tree.pending().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_propagation_cut_short_is_finished_by_resume() {
    let table = Faulty::new(FakeTable::new());
    let tree = tree_on(table.clone()).await;
    populate(&tree, 3).await;
    // The second copy fails: the rename is committed, some copies are not written.
    table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::UpdateItem).nth(1));
    let e = tree
        .repo::<Forum>()
        .put(&forum("f", "Rust 2"))
        .await
        .unwrap_err();
    assert!(!e.is_invalid_input(), "{e}");
    let pending = tree.pending().await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].op, "propagate");
    assert_eq!(pending[0].from.to_string(), "/Forums/f");
    let stale = posts_of(&tree, "f", "t", 3)
        .await
        .into_iter()
        .filter(|p| p.forum_name.as_deref() != Some("Rust 2"))
        .count();
    assert!(stale > 0);
    // A tree that does not know the target types refuses to finish it (and keeps it).
    let e = Tree::new(table.clone()).resume().await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert_eq!(tree.pending().await.unwrap().len(), 1);
    tree.resume().await.unwrap();
    assert!(tree.pending().await.unwrap().is_empty());
    assert_eq!(
        thread_at(&tree, "f", "t").await.forum_name.as_deref(),
        Some("Rust 2")
    );
    for p in posts_of(&tree, "f", "t", 3).await {
        assert_eq!(p.forum_name.as_deref(), Some("Rust 2"), "{p:?}");
    }
}

#[tokio::test]
async fn transactions_and_untyped_puts_propagate() {
    let tree = tree_on(FakeTable::new()).await;
    populate(&tree, 2).await;
    let mut tx = tree.transaction();
    tx.put(&forum("f", "Rust (tx)"))
        .put(&thread("f", "u", "New thread"));
    tx.commit().await.unwrap();
    assert_eq!(
        thread_at(&tree, "f", "u").await.forum_name.as_deref(),
        Some("Rust (tx)")
    );
    for p in posts_of(&tree, "f", "t", 2).await {
        assert_eq!(p.forum_name.as_deref(), Some("Rust (tx)"), "{p:?}");
    }
    // A patch of a source in a transaction.
    let mut tx = tree.transaction();
    tx.patch(
        dynatree::Patch::new(&thread("f", "t", "").key()).set(Thread::FIELDS.title, "Renamed"),
    );
    tx.commit().await.unwrap();
    for p in posts_of(&tree, "f", "t", 2).await {
        assert_eq!(p.thread_title.as_deref(), Some("Renamed"), "{p:?}");
    }
    // An untyped put at a source's path is a source write too.
    tree.put(["Forums", "f"], &forum("f", "Rust (untyped)"))
        .await
        .unwrap();
    for p in posts_of(&tree, "f", "t", 2).await {
        assert_eq!(p.forum_name.as_deref(), Some("Rust (untyped)"), "{p:?}");
    }
    assert!(tree.pending().await.unwrap().is_empty());
}

#[tokio::test]
async fn fan_outs_beyond_the_inline_limit_run_in_the_background() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .inline_limit(2)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    populate(&tree, 5).await;
    tree.repo::<Forum>()
        .put(&forum("f", "Rust 2"))
        .await
        .unwrap();
    // Returned before the copies: the intent says the work is under way.
    let mut rounds = 0;
    while !tree.pending().await.unwrap().is_empty() {
        rounds += 1;
        assert!(rounds < 10_000, "the background propagation did not finish");
        tokio::task::yield_now().await;
    }
    for p in posts_of(&tree, "f", "t", 5).await {
        assert_eq!(p.forum_name.as_deref(), Some("Rust 2"), "{p:?}");
    }
}

/// Applies every record of `reader` (and those the processor's own writes add), in batches.
async fn apply_all(tree: &Tree, reader: &mut dynatree_testing::FakeStream) -> usize {
    let mut n = 0;
    loop {
        let batch = reader.next_batch(7);
        if batch.is_empty() {
            return n;
        }
        n += tree.apply_changes(&batch).await.into_result().unwrap();
    }
}

#[tokio::test]
async fn the_stream_processor_fills_propagates_refills_and_clears() {
    for seed in 0..8 {
        let table = FakeTable::new();
        let tree = Tree::builder(table.clone())
            .denormalized::<Thread>()
            .denormalized::<Post>()
            .propagation(dynatree::denorm::Propagation::Stream)
            .build()
            .unwrap();
        tree.create_table().await.unwrap();
        // Redelivered, duplicated and delayed batches (seeded), and none.
        let faults = if seed == 0 {
            dynatree_testing::StreamFaults::new(0)
        } else {
            dynatree_testing::StreamFaults::all(seed)
        };
        let mut reader = table.stream_reader().with_faults(faults);
        populate(&tree, 3).await;
        // The writes copied nothing and recorded no intent: the stream does the work.
        assert_eq!(thread_at(&tree, "f", "t").await.forum_name, None);
        assert!(tree.pending().await.unwrap().is_empty());
        assert!(apply_all(&tree, &mut reader).await > 0);
        for p in posts_of(&tree, "f", "t", 3).await {
            assert_eq!(p.forum_name.as_deref(), Some("Rust"), "seed {seed}: {p:?}");
            assert_eq!(
                p.thread_title.as_deref(),
                Some("Hello"),
                "seed {seed}: {p:?}"
            );
        }
        // A rename, twice in a row (the processor sees both records, maybe late or twice).
        tree.repo::<Forum>()
            .put(&forum("f", "Rust 2"))
            .await
            .unwrap();
        tree.repo::<Forum>()
            .put(&forum("f", "Rust 3"))
            .await
            .unwrap();
        apply_all(&tree, &mut reader).await;
        for p in posts_of(&tree, "f", "t", 3).await {
            assert_eq!(
                p.forum_name.as_deref(),
                Some("Rust 3"),
                "seed {seed}: {p:?}"
            );
        }
        // A move under another forum: the moved rows are new rows, filled from the records.
        tree.move_subtree(
            ["Forums", "f", "Threads", "t"],
            ["Forums", "g", "Threads", "t"],
        )
        .await
        .unwrap();
        apply_all(&tree, &mut reader).await;
        for p in posts_of(&tree, "g", "t", 3).await {
            assert_eq!(p.forum_name.as_deref(), Some("Go"), "seed {seed}: {p:?}");
        }
        // The source removed: optional copies cleared.
        tree.repo::<Forum>()
            .delete(&forum("g", "").key())
            .await
            .unwrap();
        apply_all(&tree, &mut reader).await;
        assert_eq!(
            thread_at(&tree, "g", "t").await.forum_name,
            None,
            "seed {seed}"
        );
        for p in posts_of(&tree, "g", "t", 3).await {
            assert_eq!(p.forum_name, None, "seed {seed}: {p:?}");
        }
        // Everything again from the start (a consumer that lost its checkpoints): no copy
        // moves backwards.
        let mut again = table.stream_reader();
        apply_all(&tree, &mut again).await;
        assert_eq!(
            thread_at(&tree, "g", "t").await.forum_name,
            None,
            "seed {seed}"
        );
        for p in posts_of(&tree, "g", "t", 3).await {
            assert_eq!(p.forum_name, None, "seed {seed}: {p:?}");
            assert_eq!(
                p.thread_title.as_deref(),
                Some("Hello"),
                "seed {seed}: {p:?}"
            );
        }
    }
}
