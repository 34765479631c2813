//! Fenced puts (`TreeBuilder::fenced_puts`): prices asserted on the metered fake, what a fence
//! looks like, and that every reader, the checker, exports and the other protocols treat a fence
//! as no object. Races are explored by the simulator (`DYNATREE_SIM_FENCED=1` runs the whole
//! simulator suite in this mode; the `fences` modules of the `sim` test binary have the
//! scenarios named in the consistency docs).
// Fenced puts are deprecated; what they still do is measured and tested until they go.
#![allow(deprecated)]

use std::time::Duration;

use crate::fixtures::V;
use dynatree::storage::Key;
use dynatree::{Hierarchical, RetryPolicy, Tree, storage::Item};
use dynatree_testing::FakeTable;
use dynatree_testing::conformance::assert_invariants;
use dynatree_testing::sim::check_rows;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

/// A typed value under `a`.
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "a/{id}")]
struct Entry {
    id: String,
    v: u32,
}

fn fast() -> RetryPolicy {
    RetryPolicy::new(6, Duration::from_millis(1), Duration::from_millis(5))
}

async fn fenced(table: &FakeTable) -> Tree {
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .fenced_puts(true)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree
}

fn path(depth: usize) -> Vec<String> {
    (0..depth).map(|i| format!("c{i}")).collect()
}

fn row(table: &FakeTable, hash: &str, range: &str) -> Option<Item> {
    table
        .rows()
        .into_iter()
        .find(|r| Key::from_item(r) == Some(Key::new(hash, range)))
}

async fn clean(table: &FakeTable, tree: &Tree) {
    assert_eq!(check_rows(&table.rows(), '¦'), []);
    assert_invariants(tree).await;
    let report = tree.check().run().await.unwrap();
    assert!(report.is_healthy(), "{report}");
}

/// The prices of the mode, by DynamoDB's rules as the fake meters them: an overwrite 1 unit,
/// a new top-level name 2 (two PutItems), a new name under a known parent 5 (a transaction of
/// its listing row and a check of the parent's, then the object's PutItem) at any depth: never
/// more than the Go library's (depth + 1 units).
#[tokio::test]
async fn prices_at_depths_1_4_20() {
    for depth in [1usize, 4, 20] {
        let table = FakeTable::new();
        let tree = fenced(&table).await;
        // A sibling first, so that the parent is known (depth > 1).
        let mut sibling = path(depth);
        *sibling.last_mut().unwrap() = "sibling".into();
        tree.put(sibling, &V { v: 0 }).await.unwrap();

        table.reset_metrics();
        tree.put(path(depth), &V { v: 1 }).await.unwrap();
        let m = table.metrics();
        let go = (depth + 1) as f64;
        if depth == 1 {
            assert_eq!(m.requests("PutItem"), 2, "{m:?}");
            assert_eq!(m.total_requests(), 2, "{m:?}");
            assert_eq!(m.write_units(), 2.0, "{m:?}");
        } else {
            assert_eq!(m.requests("TransactWriteItems"), 1, "depth {depth}: {m:?}");
            assert_eq!(m.requests("PutItem"), 1, "depth {depth}: {m:?}");
            assert_eq!(m.total_requests(), 2, "depth {depth}: {m:?}");
            assert_eq!(m.write_units(), 5.0, "depth {depth}: {m:?}");
        }
        assert!(
            m.write_units() <= go,
            "depth {depth}: {} > {go}",
            m.write_units()
        );

        table.reset_metrics();
        tree.put(path(depth), &V { v: 2 }).await.unwrap();
        let m = table.metrics();
        assert_eq!(m.total_requests(), 1, "overwrite, depth {depth}: {m:?}");
        assert_eq!(m.write_units(), 1.0, "overwrite, depth {depth}: {m:?}");
        assert_eq!(
            tree.get::<V>(path(depth)).await.unwrap(),
            Some(V { v: 2 }),
            "depth {depth}"
        );
        clean(&table, &tree).await;
    }
}

/// A deleted object leaves a fence at its key: one row with `¦fence` and `¦ttl` an hour
/// ahead (the table's time-to-live deletes it), no user attribute. dynatree's readers, the
/// checker and exports see nothing there; the Go library's `Get` would see an empty object
/// (documented on `fenced_puts`).
#[tokio::test]
async fn a_delete_leaves_a_fence_no_reader_sees() {
    let table = FakeTable::new();
    let tree = fenced(&table).await;
    let entry = |id: &str, v| Entry { id: id.into(), v };
    tree.put(["a", "b"], &entry("b", 1)).await.unwrap();
    tree.put(["a", "c"], &entry("c", 2)).await.unwrap();
    tree.delete(["a", "b"]).await.unwrap();

    let fence = row(&table, "¦a¦b", "¦").expect("a fence row at the object key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let Some(dynatree::storage::Value::N(expiry)) = fence.get("¦fence") else {
        panic!("no expiry: {fence:?}")
    };
    let expiry: u64 = expiry.parse().unwrap();
    assert!((now + 3500..=now + 3700).contains(&expiry), "{fence:?}");
    assert_eq!(fence.get("¦ttl"), fence.get("¦fence"));
    assert_eq!(fence.names().count(), 4, "{fence:?}");
    assert!(row(&table, "¦a¦", "b").is_none(), "its listing row is gone");

    assert_eq!(tree.get::<Entry>(["a", "b"]).await.unwrap(), None);
    let names: Vec<String> = tree.list(["a"]).try_collect().await.unwrap();
    assert_eq!(names, ["c"]);
    let repo = tree.repo::<Entry>();
    let key = |id: &str| EntryKey { id: id.into() };
    let many = repo.get_many([&key("b"), &key("c")]).await.unwrap();
    assert_eq!(
        many,
        [
            None,
            Some(Entry {
                id: "c".into(),
                v: 2
            })
        ]
    );
    // A projected read asks for the fence mark too: nothing there either.
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct OnlyV {
        v: u32,
    }
    assert_eq!(repo.read(&key("b")).project::<OnlyV>().await.unwrap(), None);
    assert_eq!(
        repo.read(&key("c")).project::<OnlyV>().await.unwrap(),
        Some(OnlyV { v: 2 })
    );
    let exported: Vec<_> = tree
        .export(dynatree::Path::root())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(exported.len(), 1, "{exported:?}");
    clean(&table, &tree).await;

    // A create over the fence succeeds (nothing is there), and is listed again.
    repo.create(&entry("b", 3)).await.unwrap();
    assert_eq!(repo.get(&key("b")).await.unwrap(), Some(entry("b", 3)));
    let names: Vec<String> = tree.list(["a"]).try_collect().await.unwrap();
    assert_eq!(names, ["b", "c"]);
    clean(&table, &tree).await;
}

/// A process that wrote a path, then another that deleted it: the first one's next put of it
/// (one PutItem, trusting what it saw) meets the fence and takes the guarded path, which
/// creates the listing rows again: the object is reachable.
#[tokio::test]
async fn a_stale_writer_meets_the_fence() {
    let table = FakeTable::new();
    let a = fenced(&table).await;
    let b = fenced(&table).await;
    a.put(["x", "y"], &V { v: 1 }).await.unwrap();
    b.delete(["x", "y"]).await.unwrap();
    assert!(row(&table, "¦", "x").is_none(), "pruned");

    table.reset_metrics();
    a.put(["x", "y"], &V { v: 2 }).await.unwrap();
    let m = table.metrics();
    assert_eq!(
        m.requests("PutItem"),
        1,
        "the PutItem that met the fence: {m:?}"
    );
    assert!(m.requests("TransactWriteItems") >= 1, "{m:?}");
    assert_eq!(b.get::<V>(["x", "y"]).await.unwrap(), Some(V { v: 2 }));
    clean(&table, &a).await;
}

/// A removal of an emptied listing row leaves a fence too, and keeps the row when an object
/// appears at its key: a delete of a path whose object is already gone, with children.
#[tokio::test]
async fn removals_keep_rows_that_name_an_object() {
    let table = FakeTable::new();
    let tree = fenced(&table).await;
    tree.put(["d"], &V { v: 1 }).await.unwrap();
    tree.put(["d", "e"], &V { v: 2 }).await.unwrap();
    tree.delete(["d"]).await.unwrap();
    // d has a child: its listing row stays; its object row is a fence.
    assert!(row(&table, "¦", "d").is_some());
    assert_eq!(tree.get::<V>(["d"]).await.unwrap(), None);
    tree.delete(["d", "e"]).await.unwrap();
    // Pruned: d names nothing now.
    assert!(row(&table, "¦", "d").is_none());
    let names: Vec<String> = tree
        .list(dynatree::Path::root())
        .try_collect()
        .await
        .unwrap();
    assert!(names.is_empty(), "{names:?}");
    tree.put(["d"], &V { v: 3 }).await.unwrap();
    assert_eq!(tree.get::<V>(["d"]).await.unwrap(), Some(V { v: 3 }));
    clean(&table, &tree).await;
}

/// Moves, copies and subtree deletions in the mode: nodes without an object are fenced while
/// the subtree is held (so that a PutItem trusting an earlier look cannot land there between
/// the copy and the delete), and the source is fenced when it goes; no hold is left.
#[tokio::test]
async fn moves_copies_and_subtree_deletes() {
    let table = FakeTable::new();
    let tree = fenced(&table).await;
    tree.put(["s", "x"], &V { v: 1 }).await.unwrap();
    tree.put(["s", "dir", "z"], &V { v: 2 }).await.unwrap();
    tree.copy_subtree(["s"], ["c"]).await.unwrap();
    // The copy's source keeps no fence where it had no object.
    assert!(row(&table, "¦s¦dir", "¦").is_none());
    tree.move_subtree(["s"], ["m"]).await.unwrap();
    assert_eq!(
        tree.get::<V>(["m", "dir", "z"]).await.unwrap(),
        Some(V { v: 2 })
    );
    assert_eq!(tree.get::<V>(["c", "x"]).await.unwrap(), Some(V { v: 1 }));
    assert_eq!(tree.get::<V>(["s", "x"]).await.unwrap(), None);
    assert!(row(&table, "¦s¦x", "¦").is_some_and(|r| r.contains("¦fence")));
    tree.delete_subtree(["c"]).await.unwrap();
    assert_eq!(tree.get::<V>(["c", "x"]).await.unwrap(), None);
    let names: Vec<String> = tree
        .list(dynatree::Path::root())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(names, ["m"]);
    clean(&table, &tree).await;
    // Writing under the moved-away source again.
    tree.put(["s", "x"], &V { v: 5 }).await.unwrap();
    assert_eq!(tree.get::<V>(["s", "x"]).await.unwrap(), Some(V { v: 5 }));
    clean(&table, &tree).await;
}

/// A fence is no object for `read_link` either: a deleted link and a deleted object both read
/// as nothing there (`NotFound`), not as an object that is no link.
#[tokio::test]
async fn read_link_of_a_fence_is_not_found() {
    let table = FakeTable::new();
    let tree = fenced(&table).await;
    tree.put(["t"], &V { v: 1 }).await.unwrap();
    tree.put_link(["l"], ["t"]).await.unwrap();
    tree.put(["o"], &V { v: 2 }).await.unwrap();
    tree.delete(["l"]).await.unwrap();
    tree.delete(["o"]).await.unwrap();
    for name in ["l", "o"] {
        let key = format!("¦{name}");
        assert!(
            row(&table, &key, "¦").is_some_and(|r| r.contains("¦fence")),
            "a fence at {key}"
        );
        let e = tree.read_link([name]).await.unwrap_err();
        assert_eq!(e.kind(), dynatree::ErrorKind::NotFound, "{name}: {e}");
    }
    assert_eq!(
        tree.read_link(["t"]).await.unwrap_err().kind(),
        dynatree::ErrorKind::NotALink
    );
    tree.put_link(["l"], ["t"]).await.unwrap();
    assert_eq!(
        tree.read_link(["l"]).await.unwrap(),
        dynatree::Path::new(["t"]).unwrap()
    );
    clean(&table, &tree).await;
}

/// A node that never held an object gets a fence only when its listing row goes: a delete of
/// it while it keeps a child removes nothing and leaves no row at its object key; when its last
/// child goes and it is pruned, its object key gets the fence every removal of a listing row
/// leaves (a PutItem trusting an earlier look at the row may be under way; documented on
/// `fenced_puts`), which the Go library's `Get` reads as an empty object and dynatree as
/// nothing.
#[tokio::test]
async fn a_node_without_an_object_is_fenced_only_when_its_listing_row_goes() {
    let table = FakeTable::new();
    let tree = fenced(&table).await;
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    tree.delete(["a"]).await.unwrap();
    assert!(
        row(&table, "¦a", "¦").is_none(),
        "no fence where no object was"
    );
    assert!(row(&table, "¦", "a").is_some(), "a keeps its child");
    let names: Vec<String> = tree.list(["a"]).try_collect().await.unwrap();
    assert_eq!(names, ["b"]);
    clean(&table, &tree).await;

    tree.delete(["a", "b"]).await.unwrap();
    assert!(row(&table, "¦", "a").is_none(), "pruned");
    let fence = row(&table, "¦a", "¦").expect("the prune's fence at a's object key");
    assert!(
        fence.contains("¦fence") && fence.contains("¦ttl"),
        "{fence:?}"
    );
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), None);
    assert_eq!(
        tree.read_link(["a"]).await.unwrap_err().kind(),
        dynatree::ErrorKind::NotFound
    );
    clean(&table, &tree).await;
}

/// A link into a subtree moved without rewriting its links leads to the fence the move left at
/// the old path: dynatree reads nothing through it and `check` reports it dangling; the Go
/// library's `Get` through it reads the fence as an empty object (documented on
/// `fenced_puts`). A move with `LinkPolicy::Rewrite` points it at the new path.
#[tokio::test]
async fn a_link_into_a_moved_subtree_leads_to_a_fence() {
    let table = FakeTable::new();
    let tree = fenced(&table).await;
    tree.put(["s", "x"], &V { v: 1 }).await.unwrap();
    tree.put_link(["l"], ["s", "x"]).await.unwrap();
    let report = tree.move_subtree(["s"], ["m"]).await.unwrap();
    assert_eq!(report.links.len(), 1, "{report:?}");
    assert_eq!(
        tree.read_link(["l"]).await.unwrap(),
        dynatree::Path::new(["s", "x"]).unwrap()
    );
    assert!(row(&table, "¦s¦x", "¦").is_some_and(|r| r.contains("¦fence")));
    assert_eq!(tree.get::<V>(["l"]).await.unwrap(), None);
    let found = tree.check().run().await.unwrap();
    let classes: Vec<String> = found.violations().iter().map(ToString::to_string).collect();
    assert_eq!(classes.len(), 1, "{found}");
    assert!(classes[0].starts_with("dangling-link /l"), "{found}");

    tree.put_link(["l"], ["m", "x"]).await.unwrap();
    tree.move_subtree_with(["m"], ["n"], dynatree::ops::LinkPolicy::Rewrite)
        .await
        .unwrap();
    assert_eq!(
        tree.read_link(["l"]).await.unwrap(),
        dynatree::Path::new(["n", "x"]).unwrap()
    );
    assert_eq!(tree.get::<V>(["l"]).await.unwrap(), Some(V { v: 1 }));
    clean(&table, &tree).await;
}
