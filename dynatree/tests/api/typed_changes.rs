//! Typed changes (`watch::decode`): stream records of the fake table decoded as what happened
//! to the objects of a type or an enum of types: created, updated, deleted, moved (one event
//! per object, recognised by the attributes a move writes), propagated refreshes marked;
//! listing rows, intents and every other bookkeeping row never appear.

use dynatree::entity::Unknown;
use dynatree::ops::OnChildren;
use dynatree::storage::Storage;
use dynatree::watch::{self, Change};
use dynatree::{Entity, Tree};
use dynatree_testing::FakeTable;

use crate::common::{Forum, ForumKey, Thread, forum, thread};

#[derive(Entity, Debug, Clone, PartialEq)]
enum ForumItem {
    Forum(Forum),
    Thread(Thread),
    #[dynatree(other)]
    Other(Unknown),
}

async fn tree() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .denormalized::<Thread>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    table.enable_stream().await.unwrap();
    (table, tree)
}

/// The changes of the records from the `from`th on, one line each.
fn changes(table: &FakeTable, from: usize) -> Vec<String> {
    table.stream_records()[from..]
        .iter()
        .filter_map(|r| watch::decode::<ForumItem>(r).unwrap())
        .map(|c| {
            let what = match c.value() {
                Some(ForumItem::Forum(f)) => format!("forum {}", f.name),
                Some(ForumItem::Thread(t)) => format!("thread {} in {}", t.title, t.forum_name),
                Some(ForumItem::Other(_)) => "other".to_owned(),
                None => String::new(),
            };
            let p = c.info().propagated;
            match c {
                Change::Created { path, .. } => format!("created {path}: {what}"),
                Change::Updated { path, .. } if p => format!("refreshed {path}: {what}"),
                Change::Updated { path, .. } => format!("updated {path}: {what}"),
                Change::Deleted { path, .. } => format!("deleted {path}"),
                Change::Moved { from, to, .. } => format!("moved {from} to {to}: {what}"),
                _ => unreachable!("a change this test does not know"),
            }
        })
        .collect()
}

#[tokio::test]
async fn writes_are_created_updated_and_deleted_and_bookkeeping_never_appears() {
    let (table, tree) = tree().await;
    tree.repo::<Forum>().put(&forum("f", "Rust")).await.unwrap();
    tree.repo::<Thread>().put(&thread("f")).await.unwrap();
    let mut t = thread("f");
    t.title = "Hello again".into();
    tree.repo::<Thread>().put(&t).await.unwrap();
    tree.delete(["Forums", "f", "Threads", "t"]).await.unwrap();
    let records = table.stream_records();
    assert!(records.len() > 4, "listing rows and bookkeeping too");
    assert_eq!(
        changes(&table, 0),
        [
            "created /Forums/f: forum Rust",
            "created /Forums/f/Threads/t: thread Hello in Rust",
            "updated /Forums/f/Threads/t: thread Hello again in Rust",
            "deleted /Forums/f/Threads/t",
        ]
    );
    // Every record is decoded with its own sequence number.
    let seqs: Vec<String> = records
        .iter()
        .filter_map(|r| watch::decode::<ForumItem>(r).unwrap())
        .map(|c| c.info().sequence_number.clone())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn a_source_change_propagates_as_refreshes_of_its_copies() {
    let (table, tree) = tree().await;
    tree.repo::<Forum>().put(&forum("f", "Rust")).await.unwrap();
    tree.repo::<Thread>().put(&thread("f")).await.unwrap();
    let start = table.stream_records().len();
    tree.repo::<Forum>()
        .put(&forum("f", "Rust users"))
        .await
        .unwrap();
    assert_eq!(
        changes(&table, start),
        [
            "updated /Forums/f: forum Rust users",
            "refreshed /Forums/f/Threads/t: thread Hello in Rust users",
        ]
    );
}

#[tokio::test]
async fn a_move_is_one_moved_change_per_object() {
    let (table, tree) = tree().await;
    tree.repo::<Forum>().put(&forum("a", "A")).await.unwrap();
    tree.repo::<Forum>().put(&forum("b", "B")).await.unwrap();
    let mut t = thread("a");
    for name in ["t1", "t2", "t3"] {
        t.thread = name.into();
        tree.repo::<Thread>().put(&t).await.unwrap();
    }
    let start = table.stream_records().len();
    tree.move_subtree(["Forums", "a"], ["Forums", "c"])
        .await
        .unwrap();
    let seen = changes(&table, start);
    let mut moved: Vec<&String> = seen.iter().filter(|c| c.starts_with("moved")).collect();
    moved.sort();
    assert_eq!(
        moved,
        [
            "moved /Forums/a to /Forums/c: forum A",
            "moved /Forums/a/Threads/t1 to /Forums/c/Threads/t1: thread Hello in A",
            "moved /Forums/a/Threads/t2 to /Forums/c/Threads/t2: thread Hello in A",
            "moved /Forums/a/Threads/t3 to /Forums/c/Threads/t3: thread Hello in A",
        ]
    );
    assert!(
        seen.iter()
            .all(|c| c.starts_with("moved") || c.starts_with("refreshed")),
        "no deletion or creation: {seen:?}"
    );
    // The holds and their release, the locks and the intent are bookkeeping.
    let records = table.stream_records().len() - start;
    assert!(records > 4 * 3, "{records} records for 4 changes");

    // Re-parenting moves the children up: moved too.
    let start = table.stream_records().len();
    tree.put(["Forums", "c", "Threads"], &serde_json::json!({ "k": 1 }))
        .await
        .unwrap();
    tree.delete_node(["Forums", "c", "Threads"], OnChildren::Reparent)
        .await
        .unwrap();
    let seen = changes(&table, start);
    assert!(seen.contains(&"created /Forums/c/Threads: other".to_owned()));
    assert!(seen.contains(&"deleted /Forums/c/Threads".to_owned()));
    let moved = seen.iter().filter(|c| c.starts_with("moved")).count();
    assert_eq!(moved, 3, "{seen:?}");
}

#[tokio::test]
async fn a_copy_creates_and_a_subtree_deletion_deletes() {
    let (table, tree) = tree().await;
    tree.repo::<Forum>().put(&forum("a", "A")).await.unwrap();
    tree.repo::<Thread>().put(&thread("a")).await.unwrap();
    let start = table.stream_records().len();
    tree.copy_subtree(["Forums", "a"], ["Forums", "b"])
        .await
        .unwrap();
    let mut seen = changes(&table, start);
    seen.sort();
    assert_eq!(
        seen,
        [
            "created /Forums/b/Threads/t: thread Hello in A",
            "created /Forums/b: forum A",
        ]
    );
    let start = table.stream_records().len();
    tree.delete_subtree(["Forums", "b"]).await.unwrap();
    let mut seen = changes(&table, start);
    seen.sort();
    assert_eq!(seen, ["deleted /Forums/b", "deleted /Forums/b/Threads/t"]);
}

#[tokio::test]
async fn a_move_out_of_a_types_paths_is_a_deletion_for_that_type() {
    let (table, tree) = tree().await;
    tree.repo::<Thread>().put(&thread("a")).await.unwrap();
    let start = table.stream_records().len();
    tree.move_subtree(["Forums", "a", "Threads", "t"], ["Archive", "t"])
        .await
        .unwrap();
    let threads: Vec<Change<Thread>> = table.stream_records()[start..]
        .iter()
        .filter_map(|r| watch::decode::<Thread>(r).unwrap())
        .collect();
    assert!(
        matches!(&threads[..], [Change::Deleted { path, .. }] if path.to_string() == "/Forums/a/Threads/t"),
        "{threads:?}"
    );
    // For an enum with an `other` variant it is a move.
    let seen = changes(&table, start);
    assert_eq!(seen, ["moved /Forums/a/Threads/t to /Archive/t: other"]);
}

#[tokio::test]
async fn links_are_no_objects() {
    let (table, tree) = tree().await;
    tree.repo::<Forum>().put(&forum("a", "A")).await.unwrap();
    let start = table.stream_records().len();
    tree.put_link(["Forums", "l"], ["Forums", "a"])
        .await
        .unwrap();
    assert!(changes(&table, start).is_empty());
    // A link written over an object: the object is gone.
    tree.put_link(["Forums", "a"], ["Forums", "l2"])
        .await
        .unwrap();
    assert_eq!(changes(&table, start), ["deleted /Forums/a"]);
}

#[tokio::test]
async fn a_transactions_writes_carry_its_identity_and_later_writes_do_not() {
    let (table, tree) = tree().await;
    tree.repo::<Forum>().put(&forum("a", "A")).await.unwrap();
    let start = table.stream_records().len();
    let mut tx = tree.transaction();
    tx.put(&forum("b", "B"))
        .put(&forum("c", "C"))
        .delete::<Forum>(&ForumKey { forum: "a".into() })
        .idempotency_token("batch-7");
    tx.commit().await.unwrap();
    let mut anonymous = tree.transaction();
    anonymous.put(&forum("d", "D"));
    anonymous.commit().await.unwrap();
    tree.repo::<Forum>().put(&forum("b", "B2")).await.unwrap();

    let decoded: Vec<Change<Forum>> = table.stream_records()[start..]
        .iter()
        .filter_map(|r| watch::decode::<Forum>(r).unwrap())
        .collect();
    let tagged: Vec<(String, Option<String>)> = decoded
        .iter()
        .map(|c| (c.path().to_string(), c.info().transaction.clone()))
        .collect();
    let token = Some("batch-7".to_owned());
    assert_eq!(tagged[0..3].len(), 3);
    assert!(tagged.contains(&("/Forums/b".into(), token.clone())));
    assert!(tagged.contains(&("/Forums/c".into(), token.clone())));
    assert!(
        tagged.contains(&("/Forums/a".into(), None)),
        "a deletion carries no identity"
    );
    let d = tagged.iter().find(|(p, _)| p == "/Forums/d").unwrap();
    assert!(
        d.1.as_ref().is_some_and(|id| id.len() == 32),
        "an id of its own: {d:?}"
    );
    assert_eq!(
        tagged.last().unwrap(),
        &("/Forums/b".to_owned(), None),
        "a later put outside a transaction"
    );
    // The identity is bookkeeping: reads never see it.
    let b = tree
        .repo::<Forum>()
        .get(&ForumKey { forum: "c".into() })
        .await
        .unwrap();
    assert_eq!(b, Some(forum("c", "C")));
}
