//! The integrity checker from outside: tables corrupted on purpose with raw storage
//! writes, one class at a time and all together, checked, repaired and checked again; the
//! Scan's options (segments, page size, read rate, progress), dry runs, a table written with
//! the Go library's algorithm, and repairs while other tasks keep writing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dynatree::check::{CheckPart, Class, Phase, Progress, Report};
use dynatree::storage::{Key, Request, Response, Storage};
use dynatree::{Hierarchical, RetryPolicy, Tree, storage::Item, storage::Value};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::common::*;

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

const LEASE: Duration = Duration::from_millis(300);

fn fast() -> RetryPolicy {
    RetryPolicy::new(8, Duration::from_millis(1), Duration::from_millis(10))
}

async fn setup() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    (table, tree)
}

/// Every row of the fake, sorted by key.
fn snapshot(table: &FakeTable) -> Vec<Item> {
    let mut rows = table.rows();
    rows.sort_by_key(Key::from_item);
    rows
}

// ---- raw writes, as another program (or the Go library) would do them ----

/// The Go library's link: a put of the attribute `¦` naming the target.
async fn go_link<S: Storage>(table: &S, path: &[&str], target: &[&str]) {
    go_put(table, path, &[("¦", s(&sc_key(target)))]).await;
}

async fn descendants(tree: &Tree, path: &str) -> Vec<String> {
    let items: Vec<_> = tree
        .descendants(p(path))
        .items()
        .try_collect()
        .await
        .unwrap();
    let mut v: Vec<String> = items.iter().map(|d| d.path.escaped()).collect();
    v.sort();
    v
}

/// Check, repair, check: the first report must be `want`, the repair must fix exactly the
/// repairable ones and leave the others, and the second check must find only what was left.
/// Returns the second report.
async fn check_repair_check(tree: &Tree, table: &FakeTable, want: &[(Class, &str)]) -> Report {
    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), expect(want), "first check:\n{report}");
    let fixable: Vec<(Class, &str)> = want
        .iter()
        .copied()
        .filter(|(c, _)| c.repairable())
        .collect();
    let human: Vec<(Class, &str)> = want
        .iter()
        .copied()
        .filter(|(c, _)| !c.repairable())
        .collect();
    let before = snapshot(table);
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(
        listed(repaired.fixed()),
        expect(&fixable),
        "fixed:\n{repaired}"
    );
    let left: Vec<_> = repaired.left().iter().map(|(v, _)| v.clone()).collect();
    assert_eq!(listed(&left), expect(&human), "left:\n{repaired}");
    if fixable.is_empty() {
        assert_eq!(
            snapshot(table),
            before,
            "repair wrote although nothing was repairable"
        );
    }
    let again = tree.check().run().await.unwrap();
    assert_eq!(found(&again), expect(&human), "second check:\n{again}");
    again
}

// ---- one class at a time ----

/// An object row without its listing rows (a Go put that failed after its object row).
#[tokio::test]
async fn unreachable_object_is_relinked() {
    let (table, tree) = setup().await;
    tree.put(["x", "a"], &V { v: 1 }).await.unwrap();
    raw_put(&table, object_key(&["x", "y", "z"]), &[("v", n(7))]).await;
    check_repair_check(&tree, &table, &[(Class::Unreachable, "/x/y/z")]).await;
    assert_eq!(list(&tree, "/x").await, ["a", "y"]);
    assert_eq!(list(&tree, "/x/y").await, ["z"]);
    assert_eq!(get(&tree, "/x/y/z").await, Some(V { v: 7 }));
    assert_eq!(descendants(&tree, "/x").await, ["/x/a", "/x/y/z"]);
}

/// Go's Delete of a node with children (REFERENCE §2 defect 4): the node's listing row goes,
/// its subtree's rows stay, cut off from the root.
#[tokio::test]
async fn go_delete_of_a_node_with_children_is_relinked() {
    let (table, tree) = setup().await;
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    tree.put(["a", "b", "c"], &V { v: 2 }).await.unwrap();
    tree.put(["a", "b", "c", "d"], &V { v: 3 }).await.unwrap();
    go_delete(&table, &["a", "b"]).await;
    check_repair_check(
        &tree,
        &table,
        &[
            (Class::BrokenClosure, "/a/b/c"),
            // Seen from the listings, /a names nothing any more.
            (Class::EmptyListing, "/a"),
        ],
    )
    .await;
    assert_eq!(get(&tree, "/a/b").await, None);
    assert_eq!(get(&tree, "/a/b/c").await, Some(V { v: 2 }));
    assert_eq!(list(&tree, "/a").await, ["b"]);
    assert_eq!(list(&tree, "/a/b").await, ["c"]);
    assert_eq!(descendants(&tree, "/").await, ["/a/b/c", "/a/b/c/d"]);
}

/// A listing row deleted in the middle of a chain.
#[tokio::test]
async fn broken_closure_is_recreated() {
    let (table, tree) = setup().await;
    tree.put(["p", "q", "r", "s"], &V { v: 1 }).await.unwrap();
    tree.put(["p", "o"], &V { v: 0 }).await.unwrap();
    raw_delete(&table, listing_key(&["p", "q"])).await;
    check_repair_check(&tree, &table, &[(Class::BrokenClosure, "/p/q/r")]).await;
    assert_eq!(list(&tree, "/p").await, ["o", "q"]);
    assert_eq!(get(&tree, "/p/q/r/s").await, Some(V { v: 1 }));
    assert_eq!(descendants(&tree, "/p").await, ["/p/o", "/p/q/r/s"]);
}

/// Go's Delete leaves the listing rows above the deleted object: they name nothing.
#[tokio::test]
async fn empty_listings_left_by_go_delete_are_removed() {
    let (table, tree) = setup().await;
    tree.put(["e", "f", "g"], &V { v: 1 }).await.unwrap();
    tree.put(["k"], &V { v: 2 }).await.unwrap();
    go_delete(&table, &["e", "f", "g"]).await;
    check_repair_check(&tree, &table, &[(Class::EmptyListing, "/e/f")]).await;
    assert_eq!(list(&tree, "/").await, ["k"]);
    assert!(list(&tree, "/e").await.is_empty());
    assert_eq!(
        snapshot(&table)
            .iter()
            .filter_map(Key::from_item)
            .collect::<Vec<_>>(),
        [listing_key(&["k"]), object_key(&["k"])]
    );
}

/// A removal mark whose remover died: taken off; a live mark is not a violation.
#[tokio::test]
async fn expired_mark_is_released_and_live_mark_is_not_reported() {
    let (table, tree) = setup().await;
    tree.put(["m", "n"], &V { v: 1 }).await.unwrap();
    tree.put(["m", "live"], &V { v: 2 }).await.unwrap();
    raw_set(&table, listing_key(&["m", "n"]), "¦deleting", s("1:abcdef")).await;
    let far = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64)
        + 3_600_000;
    raw_set(
        &table,
        listing_key(&["m", "live"]),
        "¦deleting",
        s(&format!("{far}:abcdef")),
    )
    .await;
    check_repair_check(&tree, &table, &[(Class::ExpiredMark, "/m/n")]).await;
    let row = table
        .get_item(&listing_key(&["m", "n"]), true)
        .await
        .unwrap()
        .unwrap();
    assert!(!row.contains("¦deleting"), "{row:?}");
    // Writable again below it.
    tree.put(["m", "n", "o"], &V { v: 3 }).await.unwrap();
    assert_eq!(get(&tree, "/m/n").await, Some(V { v: 1 }));
    assert_eq!(
        descendants(&tree, "/m").await,
        ["/m/live", "/m/n", "/m/n/o"]
    );
}

/// A move that failed part-way, whose owner's lease ran out: finished or rolled back.
#[tokio::test]
async fn abandoned_intent_is_finished() {
    let (table, tree) = setup().await;
    tree.put(["org", "eng", "alice"], &V { v: 1 })
        .await
        .unwrap();
    tree.put(["org", "eng", "bob"], &V { v: 2 }).await.unwrap();
    table.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .nth(1),
    );
    assert!(
        tree.move_subtree(["org", "eng"], ["org", "tech"])
            .await
            .is_err()
    );
    table.clear_faults();
    let pending = tree.pending().await.unwrap();
    assert_eq!(pending.len(), 1);
    let id = pending[0].id.clone();
    tokio::time::sleep(LEASE * 2).await;
    let report = tree.check().run().await.unwrap();
    let want = format!("¦¦intents|{id}");
    check_repair_check(&tree, &table, &[(Class::AbandonedIntent, want.as_str())]).await;
    assert!(report.in_progress() == 0);
    assert!(tree.pending().await.unwrap().is_empty());
    // Finished (a move that is not refused is carried out).
    assert_eq!(get(&tree, "/org/tech/alice").await, Some(V { v: 1 }));
    assert_eq!(get(&tree, "/org/tech/bob").await, Some(V { v: 2 }));
    assert_eq!(get(&tree, "/org/eng/alice").await, None);
    assert_eq!(list(&tree, "/org").await, ["tech"]);
    // Writable again everywhere (no lock left).
    tree.put(["org", "eng", "carol"], &V { v: 3 })
        .await
        .unwrap();
    tree.put(["org", "tech", "dave"], &V { v: 4 })
        .await
        .unwrap();
}

/// A move lock whose operation is not recorded: released.
#[tokio::test]
async fn lock_without_intent_is_released() {
    let (table, tree) = setup().await;
    tree.put(["l", "k"], &V { v: 1 }).await.unwrap();
    raw_set(
        &table,
        listing_key(&["l", "k"]),
        "¦moving",
        s("01JNOSUCHINTENT"),
    )
    .await;
    // Locked: a put below is refused before the repair.
    let err = tree.put(["l", "k", "x"], &V { v: 2 }).await.unwrap_err();
    assert_eq!(err.kind(), dynatree::ErrorKind::Locked, "{err}");
    check_repair_check(&tree, &table, &[(Class::LockWithoutIntent, "/l/k")]).await;
    let row = table
        .get_item(&listing_key(&["l", "k"]), true)
        .await
        .unwrap()
        .unwrap();
    assert!(!row.contains("¦moving"), "{row:?}");
    tree.put(["l", "k", "x"], &V { v: 2 }).await.unwrap();
    assert_eq!(descendants(&tree, "/l").await, ["/l/k", "/l/k/x"]);
}

/// The release of a stale lock is a transaction; one cancelled for a conflict with another
/// transaction is sent again, not reported as "recorded again".
#[tokio::test]
async fn lock_release_survives_a_transaction_conflict() {
    let (table, tree) = setup().await;
    tree.put(["l", "k"], &V { v: 1 }).await.unwrap();
    raw_set(
        &table,
        listing_key(&["l", "k"]),
        "¦moving",
        s("01JNOSUCHINTENT"),
    )
    .await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(
        found(&report),
        expect(&[(Class::LockWithoutIntent, "/l/k")]),
        "{report}"
    );
    table.inject_rule(FaultRule::new(Fault::Conflict).operation(Op::TransactWriteItems));
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(
        table.fired(),
        [(Op::TransactWriteItems, Fault::Conflict)],
        "the conflict was injected"
    );
    assert_eq!(
        listed(repaired.fixed()),
        expect(&[(Class::LockWithoutIntent, "/l/k")]),
        "{repaired}"
    );
    assert!(repaired.left().is_empty(), "{repaired}");
    let row = table
        .get_item(&listing_key(&["l", "k"]), true)
        .await
        .unwrap()
        .unwrap();
    assert!(!row.contains("¦moving"), "{row:?}");
    tree.put(["l", "k", "x"], &V { v: 2 }).await.unwrap();
}

/// A link to nothing: reported, left for a human, nothing written.
#[tokio::test]
async fn dangling_link_is_left() {
    let (table, tree) = setup().await;
    tree.put(["t"], &V { v: 1 }).await.unwrap();
    tree.put_link(["ok"], ["t"]).await.unwrap();
    tree.put_link(["dl"], ["nowhere", "x"]).await.unwrap();
    go_link(&table, &["dl2"], &["ok", "gone"]).await;
    check_repair_check(
        &tree,
        &table,
        &[(Class::DanglingLink, "/dl"), (Class::DanglingLink, "/dl2")],
    )
    .await;
    assert_eq!(tree.read_link(["dl"]).await.unwrap(), p("/nowhere/x"));
    assert_eq!(get(&tree, "/ok").await, Some(V { v: 1 }));
}

/// Links that lead back to themselves (the Go library follows them forever).
#[tokio::test]
async fn link_cycle_is_left() {
    let (table, tree) = setup().await;
    go_link(&table, &["c1"], &["c2"]).await;
    go_link(&table, &["c2"], &["c1"]).await;
    go_link(&table, &["self"], &["self"]).await;
    go_link(&table, &["into"], &["c1"]).await;
    check_repair_check(
        &tree,
        &table,
        &[
            (Class::LinkCycle, "/c1"),
            (Class::LinkCycle, "/c2"),
            (Class::LinkCycle, "/self"),
            (Class::LinkCycle, "/into"),
        ],
    )
    .await;
}

/// Rows that are not rows of the layout.
#[tokio::test]
async fn unparsable_rows_are_left() {
    let (table, tree) = setup().await;
    tree.put(["u"], &V { v: 1 }).await.unwrap();
    // What the Go library writes for Put(["u", "a¦b"]).
    raw_put(&table, Key::new("¦u¦", "a¦b"), &[]).await;
    raw_put(&table, Key::new("x", "y"), &[("v", n(1))]).await;
    raw_put(&table, Key::new("¦u¦¦v", "¦"), &[]).await;
    check_repair_check(
        &tree,
        &table,
        &[
            (Class::Unparsable, "x|y"),
            (Class::Unparsable, "¦u¦|a¦b"),
            (Class::Unparsable, "¦u¦¦v|¦"),
        ],
    )
    .await;
    assert_eq!(get(&tree, "/u").await, Some(V { v: 1 }));
}

/// A tree without a cache of what was written (every put takes the guarded path).
fn fresh(table: &FakeTable) -> Tree {
    Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .build()
        .unwrap()
}

/// A removal mark and a lock of a type the runtime never writes (numbers): a put under the
/// marked row gives up (`Conflict`), one under the locked row is refused (`Locked`), and no
/// remover takes either off. Reported as malformed, removed by the repair, then the puts work.
#[tokio::test]
async fn malformed_mark_and_lock_are_removed() {
    let (table, tree) = setup().await;
    tree.put(["m", "k"], &V { v: 1 }).await.unwrap();
    tree.put(["l", "k"], &V { v: 2 }).await.unwrap();
    raw_set(&table, listing_key(&["m", "k"]), "¦deleting", n(5)).await;
    raw_set(&table, listing_key(&["l", "k"]), "¦moving", n(7)).await;
    let err = fresh(&table)
        .put(["m", "k", "x"], &V { v: 3 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), dynatree::ErrorKind::Conflict, "{err}");
    let err = fresh(&table)
        .put(["l", "k", "x"], &V { v: 4 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), dynatree::ErrorKind::Locked, "{err}");

    let report = check_repair_check(
        &tree,
        &table,
        &[(Class::Malformed, "/l/k"), (Class::Malformed, "/m/k")],
    )
    .await;
    assert!(report.is_healthy(), "{report}");
    for (path, attr) in [(["m", "k"], "¦deleting"), (["l", "k"], "¦moving")] {
        let row = table
            .get_item(&listing_key(&path), true)
            .await
            .unwrap()
            .unwrap();
        assert!(!row.contains(attr), "{row:?}");
    }
    fresh(&table)
        .put(["m", "k", "x"], &V { v: 3 })
        .await
        .unwrap();
    fresh(&table)
        .put(["l", "k", "x"], &V { v: 4 })
        .await
        .unwrap();
    assert_eq!(
        descendants(&tree, "/").await,
        ["/l/k", "/l/k/x", "/m/k", "/m/k/x"]
    );
    assert!(tree.check().run().await.unwrap().is_healthy());
}

/// Each malformed attribute is named in the report, and what the check says of it.
#[tokio::test]
async fn malformed_attributes_are_described() {
    let (table, tree) = setup().await;
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    raw_set(&table, listing_key(&["a"]), "¦moving", Value::Bool(true)).await;
    raw_set(&table, object_key(&["a"]), "¦held", n(3)).await;
    let report = tree.check().run().await.unwrap();
    let said: Vec<String> = report
        .violations()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(said.len(), 2, "{report}");
    assert!(
        said.iter()
            .any(|v| v
                .starts_with("malformed /a: `¦moving` is a boolean (BOOL), not a string: a lock")),
        "{report}"
    );
    assert!(
        said.iter()
            .any(|v| v.starts_with("malformed /a: `¦held` is a number (N), not a string: a hold")),
        "{report}"
    );
    assert!(
        report
            .violations()
            .iter()
            .all(|v| v.key() == &listing_key(&["a"]) || v.key() == &object_key(&["a"]))
    );
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.fixed().len(), 2, "{repaired}");
    assert_eq!(get(&tree, "/a").await, Some(V { v: 1 }));
    assert!(tree.check().run().await.unwrap().is_healthy());
}

/// A lock or hold whose number spells the id of a recorded operation is that operation's to
/// release: left, with why.
#[tokio::test]
async fn malformed_lock_of_a_recorded_operation_is_kept() {
    let (table, tree) = setup().await;
    tree.put(["l", "k"], &V { v: 1 }).await.unwrap();
    raw_set(&table, listing_key(&["l", "k"]), "¦moving", n(42)).await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), expect(&[(Class::Malformed, "/l/k")]));
    raw_put(&table, Key::new("¦¦intents", "42"), &[("x", s("y"))]).await;
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.left().len(), 1, "{repaired}");
    assert!(repaired.left()[0].1.contains("42"), "{repaired}");
    let row = table
        .get_item(&listing_key(&["l", "k"]), true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get("¦moving"), Some(&n(42)));
}

fn denormalized(table: &FakeTable) -> Tree {
    Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .denormalized::<Thread>()
        .build()
        .unwrap()
}

/// Versions that are not numbers: a source's (`¦sv`: every write of the source fails its
/// condition), a tombstone's (writing the removed source again fails), a copy's (`¦dv.<field>`:
/// the copy is never brought up to date). Reported as malformed; the repair removes them (and
/// the tombstone row), then refreshes the stale copy; the writes then work.
#[tokio::test]
async fn malformed_versions_are_removed() {
    let table = FakeTable::new();
    let tree = denormalized(&table);
    tree.create_table().await.unwrap();
    let forums = tree.repo::<Forum>();
    let threads = tree.repo::<Thread>();
    for f in ["f", "g", "h"] {
        forums.put(&forum(f, "One")).await.unwrap();
        threads.put(&thread(f)).await.unwrap();
    }
    forums.delete(&forum("g", "").key()).await.unwrap();
    let tombstone = Key::new(sc_key(&["Forums", "g"]), "¦sv");
    assert!(table.get_item(&tombstone, true).await.unwrap().is_some());
    raw_set(&table, object_key(&["Forums", "f"]), "¦sv", s("x")).await;
    raw_set(&table, tombstone.clone(), "¦sv", s("x")).await;
    let copy = object_key(&["Forums", "h", "Threads", "t"]);
    raw_set(&table, copy.clone(), "¦dv.forum_name", s("x")).await;

    let other = denormalized(&table);
    assert!(other.repo::<Forum>().put(&forum("f", "Two")).await.is_err());
    assert!(other.repo::<Forum>().put(&forum("g", "Two")).await.is_err());
    other.repo::<Forum>().put(&forum("h", "Two")).await.unwrap();
    let read = threads.get(&thread("h").key()).await.unwrap().unwrap();
    assert_eq!(read.forum_name, "One", "the copy is not brought up to date");

    let report = tree.check().grace(Duration::ZERO).run().await.unwrap();
    // The failed writes of `g` may leave their propagation intent (finished by the repair).
    let (intents, rest): (Vec<_>, Vec<_>) = found(&report)
        .into_iter()
        .partition(|(c, _)| *c == Class::AbandonedIntent);
    assert!(intents.len() <= 1, "{report}");
    assert_eq!(
        rest,
        expect(&[
            (Class::StaleCopy, "/Forums/h/Threads/t"),
            (Class::Malformed, "/Forums/f"),
            (Class::Malformed, "/Forums/g"),
            (Class::Malformed, "/Forums/h/Threads/t"),
        ]),
        "{report}"
    );
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(
        repaired.fixed().len(),
        report.violations().len(),
        "{repaired}"
    );
    assert!(repaired.left().is_empty(), "{repaired}");
    assert!(table.get_item(&tombstone, true).await.unwrap().is_none());
    let again = tree.check().grace(Duration::ZERO).run().await.unwrap();
    assert!(again.is_healthy(), "{again}");
    let read = threads.get(&thread("h").key()).await.unwrap().unwrap();
    assert_eq!(read.forum_name, "Two");

    let other = denormalized(&table);
    other
        .repo::<Forum>()
        .put(&forum("f", "Three"))
        .await
        .unwrap();
    other
        .repo::<Forum>()
        .put(&forum("g", "Three"))
        .await
        .unwrap();
    other
        .repo::<Forum>()
        .put(&forum("h", "Three"))
        .await
        .unwrap();
    for f in ["f", "g", "h"] {
        let read = threads.get(&thread(f).key()).await.unwrap().unwrap();
        assert_eq!(read.forum_name, "Three", "{f}");
    }
    assert!(tree.check().run().await.unwrap().is_healthy());
}

/// A link row whose target is a number (another program wrote it): no link and no object of
/// any type, so reads of it and lists of values of its directory fail. Reported as
/// unparsable and left: which target it should have is a human's decision.
#[tokio::test]
async fn link_whose_target_is_not_a_string_is_left() {
    let (table, tree) = setup().await;
    tree.put(["d", "x"], &V { v: 1 }).await.unwrap();
    go_put(&table, &["d", "l"], &[("¦", n(5))]).await;
    assert!(tree.get::<V>(p("/d/l")).await.is_err());
    let values: dynatree::Result<Vec<dynatree::Entry<V>>> =
        tree.list_items(p("/d")).try_collect().await;
    assert!(values.is_err(), "{values:?}");
    assert_eq!(
        tree.read_link(p("/d/l")).await.unwrap_err().kind(),
        dynatree::ErrorKind::NotALink
    );
    let report = check_repair_check(&tree, &table, &[(Class::Unparsable, "/d/l")]).await;
    assert!(
        report.violations()[0]
            .detail()
            .contains("is a number (N), not a string"),
        "{report}"
    );
    assert_eq!(get(&tree, "/d/x").await, Some(V { v: 1 }));
}

/// Values past their expiry that DynamoDB has not deleted yet: typed and raw.
#[tokio::test]
async fn expired_values_are_deleted() {
    let (table, tree) = setup().await;
    let sessions = tree.repo::<Session>();
    let old = Session {
        id: "old".into(),
        user: "u".into(),
        expires: 1,
    };
    let new = Session {
        id: "new".into(),
        user: "u".into(),
        expires: 4_000_000_000,
    };
    sessions.put(&old).await.unwrap();
    sessions.put(&new).await.unwrap();
    go_put(
        &table,
        &["raw", "a", "b"],
        &[("v", n(1)), ("¦ttl", n(1000))],
    )
    .await;
    check_repair_check(
        &tree,
        &table,
        &[
            (Class::Expired, "/Sessions/old"),
            (Class::Expired, "/raw/a/b"),
        ],
    )
    .await;
    assert_eq!(sessions.get(&old.key()).await.unwrap(), None);
    assert_eq!(sessions.get(&new.key()).await.unwrap(), Some(new));
    assert_eq!(list(&tree, "/").await, ["Sessions"]);
    assert_eq!(list(&tree, "/Sessions").await, ["new"]);
    assert!(
        table
            .get_item(&object_key(&["Sessions", "old"]), true)
            .await
            .unwrap()
            .is_none()
    );
}

/// Objects without the path-index attributes: written by the Go library, or re-put by it.
#[tokio::test]
async fn missing_index_attributes_are_written() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .path_index(1)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    tree.put(["a", "c"], &V { v: 2 }).await.unwrap();
    go_put(&table, &["a", "d", "e"], &[("v", n(3))]).await;
    // A Go re-put of /a/c: the whole row replaced.
    go_put(&table, &["a", "c"], &[("v", n(20))]).await;
    table.settle();
    assert_eq!(descendants(&tree, "/a").await, ["/a/b"]);
    check_repair_check(
        &tree,
        &table,
        &[
            (Class::MissingIndex, "/a/c"),
            (Class::MissingIndex, "/a/d/e"),
        ],
    )
    .await;
    table.settle();
    assert_eq!(descendants(&tree, "/a").await, ["/a/b", "/a/c", "/a/d/e"]);
    assert_eq!(get(&tree, "/a/c").await, Some(V { v: 20 }));
}

/// A source overwritten by the Go library (whole row replaced, versions gone): its copies are
/// stale until repaired.
#[tokio::test]
async fn stale_copies_are_refreshed() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let forum = Forum {
        forum: "f".into(),
        name: "Rust".into(),
    };
    tree.repo::<Forum>().put(&forum).await.unwrap();
    let thread = Thread {
        forum: "f".into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: String::new(),
    };
    tree.repo::<Thread>().put(&thread).await.unwrap();
    let post = Post {
        forum: "f".into(),
        thread: "t".into(),
        post: "p".into(),
        thread_title: None,
        forum_name: None,
    };
    tree.repo::<Post>().put(&post).await.unwrap();
    assert!(tree.check().run().await.unwrap().is_healthy());
    // The Go library renames the forum.
    go_put(
        &table,
        &["Forums", "f"],
        &[("forum", s("f")), ("name", s("Rust users"))],
    )
    .await;
    check_repair_check(
        &tree,
        &table,
        // The post copies the thread's copy, which is still as it was: only the thread is
        // stale; its repair propagates down the chain.
        &[(Class::StaleCopy, "/Forums/f/Threads/t")],
    )
    .await;
    let t = tree
        .repo::<Thread>()
        .get(&thread.key())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.forum_name, "Rust users");
    let read = tree.repo::<Post>().get(&post.key()).await.unwrap().unwrap();
    assert_eq!(read.forum_name.as_deref(), Some("Rust users"));
    assert_eq!(read.thread_title.as_deref(), Some("Hello"));
    assert_eq!(
        tree.repo::<Forum>()
            .get(&forum.key())
            .await
            .unwrap()
            .unwrap()
            .name,
        "Rust users"
    );
}

// ---- all together ----

async fn full_tree(table: &FakeTable) -> Tree {
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .path_index(1)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Every class in one table (a path-indexed tree with denormalized types): returns what a
/// check must find. Rows written raw lack the path-index attributes, so they are also
/// `MissingIndex` where they are objects that stay.
async fn corrupt_everything(table: &FakeTable, tree: &Tree) -> Vec<(Class, String)> {
    // Healthy data around the damage.
    for i in 0..5 {
        tree.put(["ok", &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    // Unreachable (raw object without listing rows).
    raw_put(table, object_key(&["un", "a", "b"]), &[("v", n(1))]).await;
    // Go Delete of a node with children: broken closure below, empty listing above.
    tree.put(["gd", "b"], &V { v: 1 }).await.unwrap();
    tree.put(["gd", "b", "c"], &V { v: 2 }).await.unwrap();
    go_delete(table, &["gd", "b"]).await;
    // Empty listing left by Go's Delete of a leaf.
    tree.put(["el", "f", "g"], &V { v: 1 }).await.unwrap();
    tree.put(["el", "h"], &V { v: 1 }).await.unwrap();
    go_delete(table, &["el", "f", "g"]).await;
    // Expired mark, lock without intent.
    tree.put(["mk", "n"], &V { v: 1 }).await.unwrap();
    raw_set(table, listing_key(&["mk", "n"]), "¦deleting", s("5:00ff")).await;
    tree.put(["lk", "k"], &V { v: 1 }).await.unwrap();
    raw_set(table, listing_key(&["lk", "k"]), "¦moving", s("01NOINTENT")).await;
    // Abandoned intent: a move that failed part-way.
    tree.put(["org", "eng", "alice"], &V { v: 1 })
        .await
        .unwrap();
    table.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .nth(1),
    );
    assert!(
        tree.move_subtree(["org", "eng"], ["org", "tech"])
            .await
            .is_err()
    );
    table.clear_faults();
    let pending = tree.pending().await.unwrap();
    assert_eq!(pending.len(), 1);
    let intent = format!("¦¦intents|{}", pending[0].id);
    // Dangling link and a cycle (links written by the runtime carry their index attributes).
    tree.put_link(["dl"], ["nowhere"]).await.unwrap();
    // (Links made by the runtime, then pointed at each other raw, keeping their index
    // attributes: Go-written links lacking them are a case of their own, below.)
    tree.put_link(["cy", "a"], ["ok", "n0"]).await.unwrap();
    tree.put_link(["cy", "b"], ["ok", "n0"]).await.unwrap();
    raw_set(table, object_key(&["cy", "a"]), "¦", s("¦cy¦b")).await;
    raw_set(table, object_key(&["cy", "b"]), "¦", s("¦cy¦a")).await;
    // Unparsable rows.
    tree.put(["up"], &V { v: 1 }).await.unwrap();
    raw_put(table, Key::new("¦up¦", "a¦b"), &[]).await;
    raw_put(table, Key::new("x", "y"), &[]).await;
    // Expired: typed and raw.
    tree.repo::<Session>()
        .put(&Session {
            id: "old".into(),
            user: "u".into(),
            expires: 1,
        })
        .await
        .unwrap();
    go_put(table, &["ttl", "raw"], &[("v", n(1)), ("¦ttl", n(1000))]).await;
    // Missing index: a Go put and a Go re-put.
    go_put(table, &["gp", "new"], &[("v", n(5))]).await;
    tree.put(["gp", "old"], &V { v: 6 }).await.unwrap();
    go_put(table, &["gp", "old"], &[("v", n(60))]).await;
    // Stale copy: the forum renamed by Go.
    tree.repo::<Forum>()
        .put(&Forum {
            forum: "f".into(),
            name: "Rust".into(),
        })
        .await
        .unwrap();
    tree.repo::<Thread>()
        .put(&Thread {
            forum: "f".into(),
            thread: "t".into(),
            title: "Hello".into(),
            forum_name: String::new(),
        })
        .await
        .unwrap();
    go_put(
        table,
        &["Forums", "f"],
        &[("forum", s("f")), ("name", s("Rust users"))],
    )
    .await;
    tokio::time::sleep(LEASE * 2).await;
    table.settle();
    let mut want = expect(&[
        (Class::Unreachable, "/un/a/b"),
        (Class::MissingIndex, "/un/a/b"),
        (Class::BrokenClosure, "/gd/b/c"),
        (Class::EmptyListing, "/gd"),
        (Class::EmptyListing, "/el/f"),
        (Class::ExpiredMark, "/mk/n"),
        (Class::AbandonedIntent, intent.as_str()),
        (Class::LockWithoutIntent, "/lk/k"),
        (Class::DanglingLink, "/dl"),
        (Class::LinkCycle, "/cy/a"),
        (Class::LinkCycle, "/cy/b"),
        (Class::Unparsable, "x|y"),
        (Class::Unparsable, "¦up¦|a¦b"),
        (Class::Expired, "/Sessions/old"),
        (Class::Expired, "/ttl/raw"),
        (Class::MissingIndex, "/gp/new"),
        (Class::MissingIndex, "/gp/old"),
        (Class::MissingIndex, "/Forums/f"),
        (Class::StaleCopy, "/Forums/f/Threads/t"),
    ]);
    want.sort();
    want
}

#[tokio::test]
async fn every_class_at_once_is_repaired() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let want = corrupt_everything(&table, &tree).await;
    let want: Vec<(Class, &str)> = want.iter().map(|(c, s)| (*c, s.as_str())).collect();
    let human: Vec<(Class, &str)> = want
        .iter()
        .copied()
        .filter(|(c, _)| !c.repairable())
        .collect();
    let again = check_repair_check(&tree, &table, &want).await;
    // What is left for humans stays as it was, and a second repair writes nothing.
    let before = snapshot(&table);
    let repaired = tree.repair(&again).run().await.unwrap();
    assert!(repaired.fixed().is_empty(), "{repaired}");
    assert_eq!(repaired.left().len(), human.len());
    assert_eq!(snapshot(&table), before);
    // The tree reads right.
    table.settle();
    assert_eq!(get(&tree, "/un/a/b").await, Some(V { v: 1 }));
    assert_eq!(get(&tree, "/gd/b/c").await, Some(V { v: 2 }));
    assert_eq!(list(&tree, "/gd/b").await, ["c"]);
    assert_eq!(list(&tree, "/el").await, ["h"]);
    assert_eq!(get(&tree, "/org/tech/alice").await, Some(V { v: 1 }));
    assert_eq!(get(&tree, "/gp/old").await, Some(V { v: 60 }));
    assert!(tree.pending().await.unwrap().is_empty());
    let t = tree
        .repo::<Thread>()
        .get(&dynatree::Hierarchical::key(&Thread {
            forum: "f".into(),
            thread: "t".into(),
            title: String::new(),
            forum_name: String::new(),
        }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.forum_name, "Rust users");
    let root = list(&tree, "/").await;
    assert_eq!(
        root,
        // (/Sessions held only the expired session: pruned with it.)
        [
            "Forums", "cy", "dl", "el", "gd", "gp", "lk", "mk", "ok", "org", "un", "up"
        ]
    );
    assert_eq!(descendants(&tree, "/gp").await, ["/gp/new", "/gp/old"]);
    assert_eq!(descendants(&tree, "/un").await, ["/un/a/b"]);
    assert_eq!(descendants(&tree, "/gd").await, ["/gd/b/c"]);
}

/// 1, 3 and 16 segments, and pages of 2 rows: the same report.
#[tokio::test]
async fn segments_and_page_size_give_the_same_report() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let want = corrupt_everything(&table, &tree).await;
    let one = tree.check().run().await.unwrap();
    assert_eq!(found(&one), want);
    for segments in [1, 3, 16] {
        for page in [None, Some(2), Some(1)] {
            let mut check = tree.check().segments(segments);
            if let Some(page) = page {
                check = check.page_size(page);
            }
            let r = check.run().await.unwrap();
            assert_eq!(found(&r), want, "segments {segments}, page {page:?}");
            // Same order too, as documented.
            assert_eq!(
                r.violations(),
                one.violations(),
                "segments {segments}, page {page:?}"
            );
            assert_eq!(r.rows(), one.rows(), "segments {segments}, page {page:?}");
            if let Some(page) = page {
                assert!(
                    r.pages() >= one.rows().div_ceil(page as u64),
                    "segments {segments}, page {page}: {} pages",
                    r.pages()
                );
            }
        }
    }
    assert!(tree.check().segments(0).run().await.is_err());
    assert!(tree.check().page_size(0).run().await.is_err());
    assert!(tree.check().read_units_per_second(0.0).run().await.is_err());
    assert!(
        tree.check()
            .read_units_per_second(f64::NAN)
            .run()
            .await
            .is_err()
    );
    assert!(tree.check().segments(1_000_001).run().await.is_err());
    let scope = tree.scope(["ok"]).unwrap();
    assert!(scope.check().run().await.is_err());
    assert!(scope.repair(&one).run().await.is_err());
}

/// A check split into parts (each saved as JSON and loaded again) and merged reports what
/// one check of the same segments does, with the same rows, read units and pages.
#[tokio::test]
async fn a_check_split_into_parts_reports_what_one_check_does() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let want = corrupt_everything(&table, &tree).await;
    let whole = tree.check().segments(8).page_size(3).run().await.unwrap();
    assert_eq!(found(&whole), want);
    // (first, end) of each part's segments.
    let splits: [&[(u32, u32)]; 3] = [
        &[(0, 8)],
        &[(5, 8), (0, 3), (3, 5)],
        &[
            (0, 1),
            (1, 2),
            (2, 3),
            (3, 4),
            (4, 5),
            (5, 6),
            (6, 7),
            (7, 8),
        ],
    ];
    for split in splits {
        let mut parts = Vec::new();
        for &(first, end) in split {
            let range = first..end;
            let part = tree
                .check()
                .segments(8)
                .page_size(3)
                .part(range.clone())
                .run_part()
                .await
                .unwrap();
            assert!(part.is_complete());
            assert_eq!(part.segments(), range);
            let saved = serde_json::to_string(&part).unwrap();
            parts.push(serde_json::from_str::<CheckPart>(&saved).unwrap());
        }
        let merged = tree.check().merge(parts).await.unwrap();
        assert_eq!(merged.violations(), whole.violations(), "{split:?}");
        assert_eq!(merged.rows(), whole.rows(), "{split:?}");
        assert_eq!(merged.read_units(), whole.read_units(), "{split:?}");
        assert_eq!(merged.pages(), whole.pages(), "{split:?}");
        // The merged report repairs as the whole one does (a dry run: nothing written).
        let before = snapshot(&table);
        let dry = tree.repair(&merged).dry_run(true).run().await.unwrap();
        assert_eq!(
            dry.fixed().len(),
            whole
                .violations()
                .iter()
                .filter(|v| v.class().repairable())
                .count()
        );
        assert_eq!(snapshot(&table), before);
    }
}

/// A check of 4 segments run as 3 parts, each saved as JSON.
async fn saved_parts(tree: &Tree) -> Vec<String> {
    let mut parts = Vec::new();
    for range in [0..1, 1..3, 3..4] {
        let part = tree
            .check()
            .segments(4)
            .part(range)
            .run_part()
            .await
            .unwrap();
        parts.push(serde_json::to_string(&part).unwrap());
    }
    parts
}

/// The saved `parts`, read back one at a time.
fn loaded(parts: &[String]) -> impl Iterator<Item = CheckPart> + '_ {
    parts
        .iter()
        .map(|p| serde_json::from_str::<CheckPart>(p).unwrap())
}

/// The reports of buckets 0 to `n` of depth `depth` of the merge of the saved `parts`.
async fn bucket_reports(
    tree: &Tree,
    parts: &[String],
    n: u32,
    depth: usize,
    grace: Duration,
) -> Vec<Report> {
    let mut reports = Vec::new();
    for i in 0..n {
        let check = tree.check().grace(grace).bucket(i, n).bucket_depth(depth);
        reports.push(check.merge(loaded(parts)).await.unwrap());
    }
    reports
}

/// Merged by buckets (each merger keeping the facts of the paths whose first component falls
/// in its bucket), the reports hold between them exactly the violations of one check, each in
/// one bucket: every class at once, plus links whose chains cross buckets (fine ones, a
/// dangling one, a cycle, one longer than the tree follows), judged by reading their chains.
/// Buckets by the first 2 or 3 components give the same. Repairs of each bucket by its own
/// worker leave a healthy table.
#[tokio::test]
async fn a_merge_split_into_buckets_reports_what_one_check_does() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let mut want = corrupt_everything(&table, &tree).await;
    // Chains across top-level names (so across buckets).
    for (link, target) in [
        (vec!["hop1"], vec!["hop2"]),
        (vec!["hop2"], vec!["ok", "n1"]),
        (vec!["far"], vec!["hop1"]),
        (vec!["lost"], vec!["hop2x", "nothing"]),
        (vec!["ring1"], vec!["ring2"]),
        (vec!["ring2"], vec!["ring1"]),
    ] {
        tree.put_link(link, target).await.unwrap();
    }
    for i in 0..9 {
        tree.put_link([format!("chain{i}")], [format!("chain{}", i + 1)])
            .await
            .unwrap();
    }
    tree.put(["chain9"], &V { v: 9 }).await.unwrap();
    want.extend(expect(&[
        (Class::DanglingLink, "/lost"),
        (Class::LinkCycle, "/ring1"),
        (Class::LinkCycle, "/ring2"),
        (Class::LinkCycle, "/chain0"),
    ]));
    want.sort();
    let whole = tree.check().segments(4).run().await.unwrap();
    assert_eq!(found(&whole), want, "{whole}");
    let parts = saved_parts(&tree).await;
    for (n, depth) in [(1, 1), (3, 1), (8, 1), (3, 2), (5, 3)] {
        let mut union = Vec::new();
        let reports = bucket_reports(&tree, &parts, n, depth, Duration::from_secs(1)).await;
        for (i, report) in (0..n).zip(reports) {
            assert_eq!(report.rows(), whole.rows(), "bucket {i} of {n}");
            assert_eq!(report.read_units(), whole.read_units(), "bucket {i} of {n}");
            if depth == 1 {
                for v in report.violations() {
                    assert!(
                        v.path()
                            .and_then(|p| p.components().first())
                            .is_none_or(|c| dynatree::transfer::part_of(c, n) == i),
                        "{v} in bucket {i} of {n}"
                    );
                }
            }
            union.extend(report.violations().iter().cloned());
        }
        union.sort_by(|a, b| (a.class(), a.key()).cmp(&(b.class(), b.key())));
        let mut all = whole.violations().to_vec();
        all.sort_by(|a, b| (a.class(), a.key()).cmp(&(b.class(), b.key())));
        assert_eq!(union, all, "{n} buckets of depth {depth}");
    }
    let err = tree
        .check()
        .bucket(0, 2)
        .bucket_depth(0)
        .merge(loaded(&parts))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), dynatree::ErrorKind::InvalidArgument, "{err}");
    // Outside a merge, or out of range, a bucket is refused.
    let err = tree.check().bucket(0, 2).run().await.unwrap_err();
    assert_eq!(err.kind(), dynatree::ErrorKind::InvalidArgument, "{err}");
    let err = tree
        .check()
        .bucket(2, 2)
        .merge(loaded(&parts))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), dynatree::ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("bucket 2 of 2"), "{err}");
    // Three workers, each merging and repairing its own bucket.
    for i in 0..3 {
        let report = tree
            .check()
            .bucket(i, 3)
            .merge(loaded(&parts))
            .await
            .unwrap();
        tree.repair(&report).part(i, 3).run().await.unwrap();
    }
    let again = tree.check().run().await.unwrap();
    assert!(
        again.violations().iter().all(|v| !v.class().repairable()),
        "{again}"
    );
}

/// Buckets of a merge on a table with a link index (stale entries, links without their
/// entries, links to targets above the bucket depth), link chains through top-level links
/// and expired objects, and an orphan lane row: the buckets' reports hold one check's
/// violations between them, and their stale entries add up to the check's.
#[tokio::test]
async fn buckets_of_a_merge_with_a_link_index_report_what_one_check_does() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .path_index(1)
        .link_index(2)
        .subtree_transactions_in_flight(4)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    corrupt_everything(&table, &tree).await;
    tree.put(["top"], &V { v: 1 }).await.unwrap();
    tree.put(["a", "x", "y"], &V { v: 1 }).await.unwrap();
    tree.put(["b", "x", "y"], &V { v: 2 }).await.unwrap();
    tree.put_link(["s", "l1"], ["top"]).await.unwrap();
    tree.put_link(["s", "l2"], ["a", "x", "y"]).await.unwrap();
    tree.put_link(["s", "l2"], ["b", "x", "y"]).await.unwrap();
    tree.put_link(["t", "l3"], ["a", "x", "y"]).await.unwrap();
    tree.delete(["t", "l3"]).await.unwrap();
    tree.put_link(["t", "l4"], ["top"]).await.unwrap();
    tree.put(["t", "l4"], &V { v: 4 }).await.unwrap();
    tree.put_link(["tl"], ["a", "x"]).await.unwrap();
    tree.put_link(["tl"], ["a"]).await.unwrap();
    tree.put_link(["q"], ["c", "x"]).await.unwrap();
    tree.put_link(["c", "x"], ["top2"]).await.unwrap();
    tree.put_link(["r", "x"], ["top3"]).await.unwrap();
    tree.put_link(["top3"], ["b", "x", "y"]).await.unwrap();
    go_link(&table, &["g", "l"], &["a", "x", "y"]).await;
    go_link(&table, &["gl"], &["b"]).await;
    go_put(&table, &["e", "x"], &[("v", n(1)), ("¦ttl", n(1000))]).await;
    tree.put_link(["h", "l"], ["e", "x"]).await.unwrap();
    tree.put_link(["hh"], ["h", "l"]).await.unwrap();
    tree.put_link(["hh2", "z"], ["e", "x", "deeper"])
        .await
        .unwrap();
    raw_put(&table, Key::new("¦¦intents", "01ORPHAN¦1"), &[]).await;
    table.settle();
    let zero = Duration::ZERO;
    let whole = tree.check().grace(zero).segments(4).run().await.unwrap();
    let mut want: Vec<String> = whole.violations().iter().map(|v| v.to_string()).collect();
    want.sort();
    assert_eq!(whole.stale_entries(), 6, "{whole}");
    let parts = saved_parts(&tree).await;
    for (n, depth) in [(1, 1), (3, 1), (8, 1), (3, 2), (5, 3), (4, 4)] {
        let mut union = Vec::new();
        let mut stale = 0;
        for report in bucket_reports(&tree, &parts, n, depth, zero).await {
            stale += report.stale_entries();
            union.extend(report.violations().iter().map(|v| v.to_string()));
        }
        union.sort();
        assert_eq!(union, want, "{n} buckets of depth {depth}");
        assert_eq!(stale, whole.stale_entries(), "{n} buckets of depth {depth}");
    }
}

/// A storage whose every request takes 10 ms (of tokio's clock, paused in the test).
struct Slow(FakeTable);

impl Storage for Slow {
    async fn send(&self, request: Request) -> dynatree::Result<Response> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.0.send(request).await
    }
}

/// A part with a time limit stops between pages and goes on, after a round trip through
/// JSON, from where each segment stopped: the merge is the whole check's.
#[tokio::test(start_paused = true)]
async fn a_part_stopped_by_its_time_limit_resumes_where_it_stopped() {
    let table = FakeTable::new();
    let setup = full_tree(&table).await;
    let want = corrupt_everything(&table, &setup).await;
    let tree = Tree::builder(Slow(table.clone()))
        .retry_policy(fast())
        .removal_lease(LEASE)
        .path_index(1)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .verify_table(false)
        .build()
        .unwrap();
    let whole = tree.check().segments(4).page_size(1).run().await.unwrap();
    assert_eq!(found(&whole), want);

    let nothing = tree
        .check()
        .segments(4)
        .part(0..2)
        .time_limit(Duration::ZERO)
        .run_part()
        .await
        .unwrap();
    assert!(!nothing.is_complete());
    assert_eq!((nothing.rows(), nothing.pages()), (0, 0));

    // Pages of 1 row, 10 ms each: 3 pages per segment within 25 ms.
    let mut first = tree
        .check()
        .segments(4)
        .page_size(1)
        .part(0..2)
        .time_limit(Duration::from_millis(25))
        .run_part()
        .await
        .unwrap();
    assert_eq!(first.pages(), 6, "two segments, 3 pages each");
    let mut runs = 1;
    let mut pages = 0;
    while !first.is_complete() {
        // At most 3 pages per segment and run; every run goes on.
        assert!(
            first.pages() > pages && first.pages() <= pages + 6,
            "{} pages after {pages}",
            first.pages()
        );
        pages = first.pages();
        let saved = serde_json::to_string(&first).unwrap();
        let loaded: CheckPart = serde_json::from_str(&saved).unwrap();
        first = tree
            .check()
            .page_size(1)
            .time_limit(Duration::from_millis(25))
            .resume(loaded)
            .run_part()
            .await
            .unwrap();
        runs += 1;
    }
    assert!(
        runs > 2,
        "the part took {runs} runs of {} rows",
        whole.rows()
    );
    let second = tree
        .check()
        .segments(4)
        .page_size(1)
        .part(2..4)
        .run_part()
        .await
        .unwrap();
    let merged = tree.check().merge([first, second]).await.unwrap();
    assert_eq!(merged.violations(), whole.violations());
    assert_eq!(merged.rows(), whole.rows());
    assert_eq!(merged.pages(), whole.pages());
}

/// Parts that do not make one whole check are refused before any read.
#[tokio::test]
async fn parts_that_are_not_one_check_are_refused() {
    let (table, tree) = healthy_table(20).await;
    let part = |range: std::ops::Range<u32>, total: u32| {
        let tree = tree.clone();
        async move {
            tree.check()
                .segments(total)
                .part(range)
                .run_part()
                .await
                .unwrap()
        }
    };
    let refused = |e: dynatree::Error, says: &str| {
        assert_eq!(e.kind(), dynatree::ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(says), "{e} (expected: {says})");
    };
    let requests = table.metrics().total_requests();
    refused(tree.check().merge([]).await.unwrap_err(), "no check parts");
    // A part's options are for run_part, not for one whole check.
    refused(
        tree.check().segments(2).part(0..1).run().await.unwrap_err(),
        "run by run_part",
    );
    refused(
        tree.check().merge([part(0..2, 4).await]).await.unwrap_err(),
        "no check part scanned segments 2..4 of 4",
    );
    refused(
        tree.check()
            .merge([part(0..3, 4).await, part(2..4, 4).await])
            .await
            .unwrap_err(),
        "check parts overlap",
    );
    refused(
        tree.check().merge([part(1..4, 4).await]).await.unwrap_err(),
        "no check part scanned segments 0..1 of 4",
    );
    refused(
        tree.check()
            .merge([part(0..2, 4).await, part(1..3, 3).await])
            .await
            .unwrap_err(),
        "different Scans",
    );
    let unfinished = tree
        .check()
        .segments(2)
        .part(0..1)
        .time_limit(Duration::ZERO)
        .run_part()
        .await
        .unwrap();
    refused(
        tree.check()
            .merge([unfinished.clone(), part(1..2, 2).await])
            .await
            .unwrap_err(),
        "not finished",
    );
    for (range, total) in [(2..2, 4), (3..5, 4)] {
        refused(
            tree.check()
                .segments(total)
                .part(range)
                .run_part()
                .await
                .unwrap_err(),
            "are not a part of",
        );
    }
    // Another reserved character, another format version: refused on resume and merge.
    let other = Tree::builder(table.clone()).reserved('|').build().unwrap();
    refused(
        other
            .check()
            .resume(unfinished.clone())
            .run_part()
            .await
            .unwrap_err(),
        "reserved character",
    );
    let mut saved: serde_json::Value = serde_json::to_value(&unfinished).unwrap();
    saved["version"] = serde_json::json!(99);
    let future: CheckPart = serde_json::from_value(saved).unwrap();
    refused(
        tree.check().resume(future).run_part().await.unwrap_err(),
        "not a check part of this version",
    );
    // Scans ran for the parts; the refusals themselves sent nothing more than them.
    assert!(table.metrics().total_requests() > requests);
    let before = table.metrics().total_requests();
    refused(tree.check().merge([]).await.unwrap_err(), "no check parts");
    assert_eq!(table.metrics().total_requests(), before);
}

async fn healthy_table(rows: u32) -> (FakeTable, Tree) {
    let (table, tree) = setup().await;
    for i in 0..rows {
        tree.put(["h", &format!("d{}", i % 7), &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    (table, tree)
}

/// A healthy table: the read units of the report are those the table metered.
#[tokio::test]
async fn read_units_are_those_the_table_metered() {
    let (table, tree) = healthy_table(300).await;
    // Make the rows bigger so pages span several 4 KB units.
    for i in 0..40 {
        tree.put(
            ["big", &format!("b{i}")],
            &serde_json::json!({ "pad": "x".repeat(3000) }),
        )
        .await
        .unwrap();
    }
    for segments in [1, 3, 16] {
        for page in [None, Some(7)] {
            table.reset_metrics();
            let mut check = tree.check().segments(segments);
            if let Some(page) = page {
                check = check.page_size(page);
            }
            let r = check.run().await.unwrap();
            assert!(r.is_healthy(), "{r}");
            let m = table.metrics();
            assert_eq!(
                r.read_units(),
                m.read_units(),
                "segments {segments}, page {page:?}"
            );
            assert_eq!(r.confirm_read_units(), 0.0);
            assert_eq!(
                r.pages(),
                m.requests("Scan"),
                "segments {segments}, page {page:?}"
            );
            assert_eq!(m.total_requests(), m.requests("Scan"), "{m:?}");
            assert_eq!(r.rows() as usize, table.rows().len());
        }
    }
}

/// A read budget spaces the pages out: the check takes at least units / rate.
#[tokio::test]
async fn read_rate_limits_the_scan() {
    let (_table, tree) = healthy_table(200).await;
    let fast_run = tree.check().page_size(10).run().await.unwrap();
    let units = fast_run.read_units();
    assert!(units >= 10.0, "{units}");
    let rate = units / 0.6; // 0.6 s at this rate
    for segments in [1, 4] {
        let started = Instant::now();
        let r = tree
            .check()
            .segments(segments)
            .page_size(10)
            .read_units_per_second(rate)
            .run()
            .await
            .unwrap();
        let took = started.elapsed().as_secs_f64();
        assert!(r.is_healthy());
        let floor = (r.read_units() / rate) * 0.9;
        assert!(
            took >= floor,
            "segments {segments}: {took} s for {} units at {rate}/s",
            r.read_units()
        );
        assert!(took < 5.0, "{took}");
    }
}

/// The progress callback: phases in order, counts and units never going back, the Scan's
/// count ending at the rows read.
#[tokio::test]
async fn progress_is_monotonic() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let _ = corrupt_everything(&table, &tree).await;
    for segments in [1, 3, 16] {
        let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
        let log = Arc::clone(&seen);
        let r = tree
            .check()
            .segments(segments)
            .page_size(3)
            .on_progress(move |p| log.lock().unwrap().push(p.clone()))
            .run()
            .await
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert!(!seen.is_empty());
        let scans: Vec<&Progress> = seen.iter().filter(|p| p.phase == Phase::Scan).collect();
        let confirms: Vec<&Progress> = seen.iter().filter(|p| p.phase == Phase::Confirm).collect();
        assert_eq!(scans.len() as u64, r.pages(), "one per page");
        let first_confirm = seen.iter().position(|p| p.phase == Phase::Confirm).unwrap();
        assert!(
            seen[first_confirm..]
                .iter()
                .all(|p| p.phase == Phase::Confirm)
        );
        for w in seen.windows(2) {
            assert!(w[1].read_units >= w[0].read_units, "{w:?}");
            if w[0].phase == w[1].phase {
                assert!(w[1].done >= w[0].done, "{w:?}");
                assert!(w[1].segments_done >= w[0].segments_done, "{w:?}");
            }
        }
        for p in &seen {
            assert_eq!(p.segments, segments, "{p:?}");
            assert!(p.segments_done <= p.segments, "{p:?}");
        }
        let last_scan = scans.last().unwrap();
        assert_eq!(last_scan.done, r.rows());
        assert_eq!(last_scan.segments_done, segments);
        assert_eq!(last_scan.read_units, r.read_units());
        assert!(scans.iter().all(|p| p.total.is_none()));
        let last = confirms.last().unwrap();
        assert_eq!(last.total, Some(last.done));
        assert_eq!(last.read_units, r.read_units() + r.confirm_read_units());
        // Repair's progress: one per violation, done counting up to the total.
        let rp: Arc<Mutex<Vec<Progress>>> = Arc::default();
        let log = Arc::clone(&rp);
        tree.repair(&r)
            .dry_run(true)
            .on_progress(move |p| log.lock().unwrap().push(p.clone()))
            .run()
            .await
            .unwrap();
        let rp = rp.lock().unwrap().clone();
        assert_eq!(rp.len(), r.violations().len());
        for (i, p) in rp.iter().enumerate() {
            assert_eq!(p.phase, Phase::Repair);
            assert_eq!(p.done, i as u64 + 1);
            assert_eq!(p.total, Some(r.violations().len() as u64));
        }
    }
}

/// A dry run writes nothing and lists what a repair would fix.
#[tokio::test]
async fn dry_run_writes_nothing() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let want = corrupt_everything(&table, &tree).await;
    let report = tree.check().run().await.unwrap();
    let before = snapshot(&table);
    table.reset_metrics();
    let dry = tree.repair(&report).dry_run(true).run().await.unwrap();
    assert!(dry.is_dry_run());
    assert_eq!(snapshot(&table), before);
    assert_eq!(table.metrics().write_units(), 0.0);
    let fixable: Vec<_> = want
        .iter()
        .filter(|(c, _)| c.repairable())
        .cloned()
        .collect();
    assert_eq!(listed(dry.fixed()), fixable);
    assert!(dry.to_string().contains("would fix"), "{dry}");
    assert_eq!(found(&tree.check().run().await.unwrap()), want);
    // The real repair fixes the same list.
    let real = tree.repair(&report).run().await.unwrap();
    assert_eq!(listed(real.fixed()), fixable, "{real}");
}

/// A table written with the Go library's algorithm, defects included, checked and repaired to
/// healthy.
#[tokio::test]
async fn go_written_table_is_repaired_to_healthy() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .path_index(2)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    // The README's example and more, written as the Go library writes.
    go_put(
        &table,
        &["Accounts", "123456", "Links", "xyzpdq"],
        &[("LinkTarget", s("http://example.com/"))],
    )
    .await;
    go_put(
        &table,
        &["Accounts", "123456"],
        &[("Name", s("alice")), ("Note", Value::Null)],
    )
    .await;
    go_put(&table, &["Accounts", "777"], &[("Name", s("bob"))]).await;
    go_put(
        &table,
        &["Accounts", "777", "Links", "a"],
        &[("LinkTarget", s("x"))],
    )
    .await;
    go_put(
        &table,
        &["Accounts", "777", "Links", "b"],
        &[("LinkTarget", s("y"))],
    )
    .await;
    go_put(
        &table,
        &["Accounts", "888", "Links", "c"],
        &[("LinkTarget", s("z"))],
    )
    .await;
    go_link(
        &table,
        &["AccountsByEmail", "alice@example.com"],
        &["Accounts", "123456"],
    )
    .await;
    go_link(
        &table,
        &["AccountsByEmail", "bob@example.com"],
        &["Accounts", "777"],
    )
    .await;
    // Defect 4: Delete of a node with children.
    go_delete(&table, &["Accounts", "777"]).await;
    // Its Delete leaves empty listing rows.
    go_delete(&table, &["Accounts", "888", "Links", "c"]).await;
    // Defect 3: a one-component delete targets `¦¦`: a no-op.
    raw_delete(&table, Key::new("¦¦", "Accounts")).await;
    // A dangling link: its target deleted by Go.
    go_link(
        &table,
        &["AccountsByEmail", "gone@example.com"],
        &["Accounts", "999"],
    )
    .await;
    let report = tree.check().run().await.unwrap();
    let want = expect(&[
        (Class::BrokenClosure, "/Accounts/777/Links"),
        (Class::EmptyListing, "/Accounts/888/Links"),
        (Class::DanglingLink, "/AccountsByEmail/bob@example.com"),
        (Class::DanglingLink, "/AccountsByEmail/gone@example.com"),
        (Class::MissingIndex, "/Accounts/123456"),
        (Class::MissingIndex, "/Accounts/123456/Links/xyzpdq"),
        (Class::MissingIndex, "/Accounts/777/Links/a"),
        (Class::MissingIndex, "/Accounts/777/Links/b"),
        (Class::MissingIndex, "/AccountsByEmail/alice@example.com"),
        (Class::MissingIndex, "/AccountsByEmail/bob@example.com"),
        (Class::MissingIndex, "/AccountsByEmail/gone@example.com"),
    ]);
    assert_eq!(found(&report), want, "{report}");
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.left().len(), 2, "{repaired}");
    // A human points the links somewhere (here: deletes them), and the table is healthy.
    tree.delete(["AccountsByEmail", "bob@example.com"])
        .await
        .unwrap();
    tree.delete(["AccountsByEmail", "gone@example.com"])
        .await
        .unwrap();
    let after = tree.check().run().await.unwrap();
    assert!(after.is_healthy(), "{after}");
    table.settle();
    assert_eq!(list(&tree, "/Accounts").await, ["123456", "777"]);
    assert_eq!(list(&tree, "/Accounts/777/Links").await, ["a", "b"]);
    assert_eq!(
        descendants(&tree, "/Accounts/777").await,
        ["/Accounts/777/Links/a", "/Accounts/777/Links/b"]
    );
    assert_eq!(
        descendants(&tree, "/Accounts/123456").await,
        ["/Accounts/123456/Links/xyzpdq"]
    );
    let name: serde_json::Value = tree
        .get(["AccountsByEmail", "alice@example.com"])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(name["Name"], "alice");
}

/// Links carry the path-index attributes when the runtime writes them (so `descendants`
/// finds them); a link written by the Go library lacks them and is invisible to the index:
/// the check must report it and the repair write them.
#[tokio::test]
async fn go_written_links_lack_the_path_index() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .path_index(1)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put(["t"], &V { v: 1 }).await.unwrap();
    tree.put_link(["a", "l1"], ["t"]).await.unwrap();
    let row = table
        .get_item(&object_key(&["a", "l1"]), true)
        .await
        .unwrap()
        .unwrap();
    assert!(row.contains("¦pix.h") && row.contains("¦pix.r"), "{row:?}");
    go_link(&table, &["a", "l2"], &["t"]).await;
    table.settle();
    // Only the runtime's link is in the index.
    assert_eq!(descendants(&tree, "/a").await, ["/a/l1"]);
    check_repair_check(&tree, &table, &[(Class::MissingIndex, "/a/l2")]).await;
    table.settle();
    assert_eq!(descendants(&tree, "/a").await, ["/a/l1", "/a/l2"]);
}

// ---- edge cases ----

/// An expired object that still has children: the object goes, its subtree stays reachable.
#[tokio::test]
async fn expired_object_with_children_keeps_its_subtree() {
    let (table, tree) = setup().await;
    go_put(&table, &["ex"], &[("v", n(1)), ("¦ttl", n(5))]).await;
    tree.put(["ex", "c"], &V { v: 2 }).await.unwrap();
    check_repair_check(&tree, &table, &[(Class::Expired, "/ex")]).await;
    assert_eq!(get(&tree, "/ex").await, None);
    assert_eq!(list(&tree, "/").await, ["ex"]);
    assert_eq!(list(&tree, "/ex").await, ["c"]);
    assert_eq!(get(&tree, "/ex/c").await, Some(V { v: 2 }));
}

/// An expired object without its listing rows is only `Expired`, and goes without leaving rows.
#[tokio::test]
async fn expired_and_unreachable_is_deleted_without_relinking() {
    let (table, tree) = setup().await;
    raw_put(
        &table,
        object_key(&["gone", "x"]),
        &[("v", n(1)), ("¦ttl", n(5))],
    )
    .await;
    check_repair_check(&tree, &table, &[(Class::Expired, "/gone/x")]).await;
    assert!(table.rows().is_empty(), "{:?}", table.rows());
}

/// Components holding `/` and `%`: the violations' paths are escaped, the repair reaches the
/// right rows.
#[tokio::test]
async fn escaped_components_are_repaired() {
    let (table, tree) = setup().await;
    raw_put(&table, object_key(&["a/b", "100%"]), &[("v", n(1))]).await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(
        found(&report),
        expect(&[(Class::Unreachable, "/a%2Fb/100%25")])
    );
    assert_eq!(
        report.violations()[0].path().unwrap().components(),
        ["a/b".to_owned(), "100%".to_owned()]
    );
    tree.repair(&report).run().await.unwrap();
    assert!(tree.check().run().await.unwrap().is_healthy());
    assert_eq!(
        tree.get::<V>(["a/b", "100%"]).await.unwrap(),
        Some(V { v: 1 })
    );
    assert_eq!(list(&tree, "/").await, ["a/b"]);
}

/// A link row without its listing rows is unreachable like an object.
#[tokio::test]
async fn unreachable_link_is_relinked() {
    let (table, tree) = setup().await;
    tree.put(["t"], &V { v: 1 }).await.unwrap();
    raw_put(&table, object_key(&["by", "l"]), &[("¦", s("¦t"))]).await;
    check_repair_check(&tree, &table, &[(Class::Unreachable, "/by/l")]).await;
    assert_eq!(list(&tree, "/by").await, ["l"]);
    assert_eq!(get(&tree, "/by/l").await, Some(V { v: 1 }));
}

/// A link to an expired value dangles; a chain longer than the tree follows is a cycle.
#[tokio::test]
async fn links_to_expired_values_and_long_chains() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .max_link_hops(3)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put(["end"], &V { v: 1 }).await.unwrap();
    go_put(&table, &["old"], &[("v", n(1)), ("¦ttl", n(5))]).await;
    tree.put_link(["to-old"], ["old"]).await.unwrap();
    // l0 -> l1 -> l2 -> l3 -> l4 -> end: 5 hops from l0, more than 3.
    for i in 0..5 {
        let next = if i == 4 {
            "end".to_owned()
        } else {
            format!("l{}", i + 1)
        };
        tree.put_link([format!("l{i}")], [next]).await.unwrap();
    }
    // What reads see agrees: l2 reaches the end in 3 hops, l1 does not (a chain too long,
    // not a link to nothing).
    assert_eq!(get(&tree, "/l2").await, Some(V { v: 1 }));
    let err = tree.get::<V>(["l1"]).await.unwrap_err();
    eprintln!("reading /l1: {:?} {err}", err.kind());
    assert!(tree.get::<V>(["l0"]).await.is_err());
    let report = tree.check().run().await.unwrap();
    assert_eq!(
        found(&report),
        expect(&[
            (Class::Expired, "/old"),
            (Class::DanglingLink, "/to-old"),
            (Class::LinkCycle, "/l0"),
            (Class::LinkCycle, "/l1"),
        ]),
        "{report}"
    );
}

/// An intent record that does not parse.
#[tokio::test]
async fn unparsable_intent_is_left() {
    let (table, tree) = setup().await;
    raw_put(&table, Key::new("¦¦intents", "junk"), &[("what", s("no"))]).await;
    check_repair_check(&tree, &table, &[(Class::Unparsable, "¦¦intents|junk")]).await;
}

/// A Go Delete of a stale copy's source: the optional copies below are cleared by the repair.
#[tokio::test]
async fn copies_of_a_source_deleted_by_go_are_cleared() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let thread = Thread {
        forum: "f".into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: String::new(),
    };
    tree.repo::<Thread>().put(&thread).await.unwrap();
    let post = Post {
        forum: "f".into(),
        thread: "t".into(),
        post: "p".into(),
        thread_title: None,
        forum_name: None,
    };
    tree.repo::<Post>().put(&post).await.unwrap();
    let read = tree.repo::<Post>().get(&post.key()).await.unwrap().unwrap();
    assert_eq!(read.thread_title.as_deref(), Some("Hello"));
    // Go deletes the thread row (its listing row stays: the posts are below it).
    raw_delete(&table, object_key(&["Forums", "f", "Threads", "t"])).await;
    check_repair_check(
        &tree,
        &table,
        // One violation per copy: `thread_title` and `forum_name`.
        &[
            (Class::StaleCopy, "/Forums/f/Threads/t/Posts/p"),
            (Class::StaleCopy, "/Forums/f/Threads/t/Posts/p"),
        ],
    )
    .await;
    let read = tree.repo::<Post>().get(&post.key()).await.unwrap().unwrap();
    assert_eq!(read.thread_title, None);
}

/// A delete of a subtree that failed part-way, abandoned: finished by the repair.
#[tokio::test]
async fn abandoned_subtree_deletion_is_finished() {
    let (table, tree) = setup().await;
    for i in 0..4 {
        tree.put(["d", "s", &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    tree.put(["d", "keep"], &V { v: 9 }).await.unwrap();
    table.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .nth(1),
    );
    assert!(tree.delete_subtree(["d", "s"]).await.is_err());
    table.clear_faults();
    let pending = tree.pending().await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let want = format!("¦¦intents|{}", pending[0].id);
    tokio::time::sleep(LEASE * 2).await;
    check_repair_check(&tree, &table, &[(Class::AbandonedIntent, want.as_str())]).await;
    assert_eq!(list(&tree, "/d").await, ["keep"]);
    assert_eq!(descendants(&tree, "/d").await, ["/d/keep"]);
}

// ---- a report repaired after the table changed (what concurrent writers do) ----

/// An empty listing row that a writer fills before the repair runs stays.
#[tokio::test]
async fn empty_listing_filled_before_the_repair_stays() {
    let (table, tree) = setup().await;
    tree.put(["e", "f", "g"], &V { v: 1 }).await.unwrap();
    go_delete(&table, &["e", "f", "g"]).await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), expect(&[(Class::EmptyListing, "/e/f")]));
    tree.put(["e", "f", "h"], &V { v: 2 }).await.unwrap();
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.fixed().len(), 1, "{repaired}");
    assert_eq!(get(&tree, "/e/f/h").await, Some(V { v: 2 }));
    assert_eq!(list(&tree, "/e/f").await, ["h"]);
    assert!(tree.check().run().await.unwrap().is_healthy());
}

/// An unreachable object deleted before the repair: no listing rows are made for it.
#[tokio::test]
async fn unreachable_object_deleted_before_the_repair_is_not_relinked() {
    let (table, tree) = setup().await;
    raw_put(&table, object_key(&["x", "y"]), &[("v", n(1))]).await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), expect(&[(Class::Unreachable, "/x/y")]));
    raw_delete(&table, object_key(&["x", "y"])).await;
    tree.repair(&report).run().await.unwrap();
    assert!(table.rows().is_empty(), "{:?}", table.rows());
}

/// An expired mark replaced by a live one (a new remover) before the repair: the live mark
/// stays.
#[tokio::test]
async fn a_new_mark_is_not_released() {
    let (table, tree) = setup().await;
    tree.put(["m", "n"], &V { v: 1 }).await.unwrap();
    raw_set(&table, listing_key(&["m", "n"]), "¦deleting", s("5:aa")).await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), expect(&[(Class::ExpiredMark, "/m/n")]));
    let live = format!("{}:bb", now_ms() + 3_600_000);
    raw_set(&table, listing_key(&["m", "n"]), "¦deleting", s(&live)).await;
    tree.repair(&report).run().await.unwrap();
    let row = table
        .get_item(&listing_key(&["m", "n"]), true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get_s("¦deleting"), Some(live.as_str()));
}

/// An expired value put again with a later expiry before the repair: it stays.
#[tokio::test]
async fn a_value_put_again_before_the_repair_stays() {
    let (table, tree) = setup().await;
    let sessions = tree.repo::<Session>();
    let mut s1 = Session {
        id: "s".into(),
        user: "u".into(),
        expires: 1,
    };
    sessions.put(&s1).await.unwrap();
    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), expect(&[(Class::Expired, "/Sessions/s")]));
    s1.expires = 4_000_000_000;
    sessions.put(&s1).await.unwrap();
    tree.repair(&report).run().await.unwrap();
    assert_eq!(sessions.get(&s1.key()).await.unwrap(), Some(s1));
    assert!(tree.check().run().await.unwrap().is_healthy());
    let _ = &table;
}

/// A lock whose intent is recorded after the check (an operation that started meanwhile):
/// not released.
#[tokio::test]
async fn a_lock_whose_operation_starts_meanwhile_is_kept() {
    let (table, tree) = setup().await;
    tree.put(["l", "k"], &V { v: 1 }).await.unwrap();
    raw_set(&table, listing_key(&["l", "k"]), "¦moving", s("OP1")).await;
    let report = tree.check().run().await.unwrap();
    assert_eq!(
        found(&report),
        expect(&[(Class::LockWithoutIntent, "/l/k")])
    );
    raw_put(&table, Key::new("¦¦intents", "OP1"), &[("x", s("y"))]).await;
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.left().len(), 1, "{repaired}");
    let row = table
        .get_item(&listing_key(&["l", "k"]), true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get_s("¦moving"), Some("OP1"));
}

// ---- repair while others write ----

/// What a writer knows of one path: the value its last acknowledged write left, or nothing
/// known (a write that failed may or may not have happened).
#[derive(Debug, Clone, PartialEq)]
enum Known {
    Value(u32),
    Absent,
    Unknown,
}

const NAMES: [&[&str]; 11] = [
    &["k0"],
    &["e", "z"],
    &["k1"],
    &["k2"],
    &["k1", "z"],
    &["d", "x"],
    &["d", "y", "z"],
    &["u", "x"],
    &["u", "v"],
    &["g", "y"],
    &["g", "h", "i"],
];

fn wpath(w: usize, rel: &[&str]) -> Vec<String> {
    let mut v = vec!["w".to_owned(), format!("{w}")];
    v.extend(rel.iter().map(|s| s.to_string()));
    v
}

async fn writer(tree: Tree, w: usize, seed: u64, ops: usize) -> BTreeMap<Vec<String>, Known> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut known: BTreeMap<Vec<String>, Known> = BTreeMap::new();
    for i in 0..ops {
        let rel = NAMES[rng.usize(..NAMES.len())];
        let path = wpath(w, rel);
        let v = (seed as u32) * 1000 + i as u32;
        let outcome = if rng.u8(..4) == 0 {
            tree.delete(path.clone()).await.map(|_| Known::Absent)
        } else {
            tree.put(path.clone(), &V { v })
                .await
                .map(|_| Known::Value(v))
        };
        known.insert(path, outcome.unwrap_or(Known::Unknown));
        if rng.bool() {
            tokio::task::yield_now().await;
        }
    }
    known
}

/// Moves /w/m/a to /w/m/b and back; returns where its objects should be (or none if a move
/// failed: then they must be all at one of the two).
async fn mover(tree: Tree, rounds: usize) -> Option<&'static str> {
    let mut at = "a";
    for _ in 0..rounds {
        let to = if at == "a" { "b" } else { "a" };
        match tree.move_subtree(["w", "m", at], ["w", "m", to]).await {
            Ok(_) => at = to,
            Err(_) => return None,
        }
        tokio::task::yield_now().await;
    }
    Some(at)
}

async fn concurrent_round(seed: u64) {
    let (table, tree) = setup().await;
    for w in 0..3 {
        for rel in NAMES.iter().filter(|r| r[0] != "e") {
            tree.put(wpath(w, rel), &V { v: 1 }).await.unwrap();
        }
    }
    for i in 0..5 {
        tree.put(["w", "m", "a", &format!("o{i}")], &V { v: i })
            .await
            .unwrap();
    }
    // Damage in the writers' subtrees.
    tree.put(["w", "0", "e", "f"], &V { v: 1 }).await.unwrap();
    go_delete(&table, &["w", "0", "e", "f"]).await; // empty listing /w/0/e
    go_delete(&table, &["w", "1", "g"]).await; // no object there: the listing row of /w/1/g
    raw_put(&table, object_key(&["w", "2", "u", "q"]), &[("v", n(5))]).await; // unreachable
    raw_set(
        &table,
        listing_key(&["w", "0", "k1"]),
        "¦deleting",
        s("5:ab"),
    )
    .await;
    raw_set(&table, listing_key(&["w", "1", "k1"]), "¦moving", s("NOOP")).await;
    raw_delete(&table, listing_key(&["w", "2", "d"])).await; // broken closure below
    go_put(&table, &["w", "2", "go"], &[("v", n(1))]).await; // a Go put: healthy here
    let report = tree.check().run().await.unwrap();
    assert_eq!(
        found(&report),
        expect(&[
            (Class::Unreachable, "/w/2/u/q"),
            (Class::BrokenClosure, "/w/1/g/h"),
            (Class::BrokenClosure, "/w/1/g/y"),
            (Class::BrokenClosure, "/w/2/d/x"),
            (Class::BrokenClosure, "/w/2/d/y"),
            (Class::EmptyListing, "/w/0/e"),
            (Class::ExpiredMark, "/w/0/k1"),
            (Class::LockWithoutIntent, "/w/1/k1"),
        ]),
        "seed {seed}:\n{report}"
    );
    let tasks: Vec<_> = (0..3)
        .map(|w| tokio::spawn(writer(tree.clone(), w, seed * 10 + w as u64, 40)))
        .collect();
    let moving = tokio::spawn(mover(tree.clone(), 6));
    // Repairs, and checks and repairs again, while they write.
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(
        repaired.fixed().len() + repaired.left().len(),
        report.violations().len()
    );
    for _ in 0..2 {
        let r = tree.check().run().await.unwrap();
        tree.repair(&r).run().await.unwrap();
    }
    let mut known = BTreeMap::new();
    for t in tasks {
        known.extend(t.await.unwrap());
    }
    let at = moving.await.unwrap();
    let unknown = known.values().filter(|k| **k == Known::Unknown).count();
    eprintln!(
        "seed {seed}: {} paths, {unknown} unknown, mover {at:?}, repaired {}/{}",
        known.len(),
        repaired.fixed().len(),
        repaired.left().len()
    );
    assert!(
        unknown * 2 < known.len(),
        "seed {seed}: most writes failed: {known:?}"
    );
    // Every acknowledged put is readable and listed; every acknowledged delete stays deleted.
    for (path, k) in &known {
        let read: Option<V> = tree.get(path.clone()).await.unwrap();
        let (name, parent) = path.split_last().unwrap();
        let names: Vec<String> = tree.list(parent.to_vec()).try_collect().await.unwrap();
        match k {
            Known::Value(v) => {
                assert_eq!(read, Some(V { v: *v }), "seed {seed}: {path:?}");
                assert!(
                    names.contains(name),
                    "seed {seed}: {path:?} not listed in {names:?}"
                );
            }
            Known::Absent => assert_eq!(read, None, "seed {seed}: {path:?}"),
            Known::Unknown => {}
        }
    }
    // The mover's objects are all together, where the last move put them.
    let a: Vec<String> = descendants(&tree, "/w/m/a").await;
    let b: Vec<String> = descendants(&tree, "/w/m/b").await;
    match at {
        Some("a") => assert_eq!((a.len(), b.len()), (5, 0), "seed {seed}"),
        Some(_) => assert_eq!((a.len(), b.len()), (0, 5), "seed {seed}"),
        None => assert!(a.len() + b.len() == 5, "seed {seed}: {a:?} {b:?}"),
    }
    // Nothing unreachable; a last check and repair leave the table healthy.
    tokio::time::sleep(LEASE * 2).await;
    let last = tree.check().run().await.unwrap();
    for class in [Class::Unreachable, Class::BrokenClosure] {
        assert_eq!(last.of(class).count(), 0, "seed {seed}:\n{last}");
    }
    tree.repair(&last).run().await.unwrap();
    let healthy = tree.check().run().await.unwrap();
    assert!(healthy.is_healthy(), "seed {seed}:\n{healthy}");
    // Every object is reachable from the root (descendants walks the listings).
    let mut objects: Vec<String> = table
        .rows()
        .iter()
        .filter_map(Key::from_item)
        .filter(|k| k.range == "¦")
        .map(|k| k.hash.replace('¦', "/"))
        .collect();
    objects.sort();
    assert_eq!(descendants(&tree, "/").await, objects, "seed {seed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_while_others_write() {
    for seed in 1..=12 {
        concurrent_round(seed).await;
    }
}

/// A corrupted table: the read units of the Scan and of the confirming reads are those the
/// table metered (a check on a provisioned table must report what it spent).
#[tokio::test]
async fn confirm_read_units_are_those_the_table_metered() {
    let table = FakeTable::new();
    let tree = full_tree(&table).await;
    let _ = corrupt_everything(&table, &tree).await;
    table.reset_metrics();
    let r = tree.check().run().await.unwrap();
    let m = table.metrics();
    assert_eq!(
        (r.read_units(), r.read_units() + r.confirm_read_units()),
        (r.read_units(), m.read_units()),
        "{m:?}"
    );
}

// ---- secondary indexes written through scopes ----

/// A short link of one account, stored through the account's scope
/// (`tree.scope(["Accounts", owner])`).
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Links/{short}", index(name = "by_target", hash = target))]
struct ShortLink {
    short: String,
    owner: String,
    target: String,
}

/// The same links as the whole tree stores them, in the same index: a row of either type
/// reads as the other (at `Accounts/a/Links/x`, `ShortLink` through the scope `Accounts/a`).
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(
    path = "Accounts/{owner}/Links/{short}",
    index(name = "by_target", hash = target)
)]
struct AccountLink {
    owner: String,
    short: String,
    target: String,
}

fn short_link(owner: &str, short: &str, target: &str) -> ShortLink {
    ShortLink {
        short: short.into(),
        owner: owner.into(),
        target: target.into(),
    }
}

fn indexed_tree(table: &FakeTable) -> Tree {
    Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .indexes_of::<ShortLink>()
        .indexes_of::<AccountLink>()
        .build()
        .unwrap()
}

/// `ShortLink`s found by target through `tree` (a scope or the whole tree), sorted by name.
async fn short_links_to(tree: &Tree, target: &str) -> Vec<String> {
    let found: Vec<ShortLink> = tree
        .repo::<ShortLink>()
        .index(ShortLink::index_by_target(target))
        .items()
        .try_collect()
        .await
        .unwrap();
    let mut names: Vec<String> = found.into_iter().map(|l| l.short).collect();
    names.sort();
    names
}

/// Typed writes through scopes store index hashes with the scope's root; the whole tree's
/// without. A table written both ways is healthy, the repair writes nothing, and index queries
/// through each scope still find its values (also a value moved inside its scope, off its
/// template's path). The scoped rows under `Accounts/a` also read as
/// `AccountLink` of the whole tree (same index name, another template): the check must not
/// hold them to that type's values (overwriting them would hide them from their scope).
#[tokio::test]
async fn indexes_written_through_scopes_are_healthy() {
    let table = FakeTable::new();
    let tree = indexed_tree(&table);
    tree.create_table().await.unwrap();
    let target = "https://example.com";
    let account = tree.scope(["Accounts", "a"]).unwrap();
    account
        .repo::<ShortLink>()
        .put(&short_link("a", "x", target))
        .await
        .unwrap();
    account
        .repo::<ShortLink>()
        .put_all(&[short_link("a", "y", target), short_link("a", "z", target)])
        .await
        .unwrap();
    let tenant = tree.scope(["Tenants", "t1"]).unwrap();
    tenant
        .repo::<ShortLink>()
        .put(&short_link("t1", "x", target))
        .await
        .unwrap();
    let nested = tenant.scope(["Accounts", "b"]).unwrap();
    nested
        .repo::<ShortLink>()
        .put(&short_link("b", "n", target))
        .await
        .unwrap();
    tree.repo::<ShortLink>()
        .put(&short_link("-", "w", target))
        .await
        .unwrap();
    tree.repo::<AccountLink>()
        .put(&AccountLink {
            owner: "a".into(),
            short: "v".into(),
            target: target.into(),
        })
        .await
        .unwrap();
    // Moved inside its scope, off the template's path: still the scope's (its query finds it).
    account
        .move_subtree(["Links", "z"], ["Old", "Links", "z"])
        .await
        .unwrap();

    let report = check_repair_check(&tree, &table, &[]).await;
    assert!(report.is_healthy(), "{report}");
    table.settle();
    assert_eq!(short_links_to(&account, target).await, ["x", "y", "z"]);
    assert_eq!(short_links_to(&tenant, target).await, ["x"]);
    assert_eq!(short_links_to(&nested, target).await, ["n"]);
    assert_eq!(short_links_to(&tree, target).await, ["w"]);
    let whole: Vec<AccountLink> = tree
        .repo::<AccountLink>()
        .index(AccountLink::index_by_target(target))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        whole.iter().map(|l| l.short.as_str()).collect::<Vec<_>>(),
        ["v"]
    );
}

/// Index values a scope wrote that no longer fit the row: a whole-tree move of a tenant (moves
/// copy secondary index attributes as they are, so the moved rows keep the old tenant's root
/// and no scope's query finds them), and a value changed by another program. Reported, and
/// repaired with the values of the scope the row's path is in.
#[tokio::test]
async fn stale_index_values_of_scoped_rows_are_rewritten_for_their_scope() {
    let table = FakeTable::new();
    let tree = indexed_tree(&table);
    tree.create_table().await.unwrap();
    let target = "https://example.com";
    let (t1, t2, t9) = (
        tree.scope(["Tenants", "t1"]).unwrap(),
        tree.scope(["Tenants", "t2"]).unwrap(),
        tree.scope(["Tenants", "t9"]).unwrap(),
    );
    t1.repo::<ShortLink>()
        .put(&short_link("t1", "x", target))
        .await
        .unwrap();
    t2.repo::<ShortLink>()
        .put(&short_link("t2", "y", "https://old.example.com"))
        .await
        .unwrap();
    tree.move_subtree(["Tenants", "t1"], ["Tenants", "t9"])
        .await
        .unwrap();
    raw_set(
        &table,
        object_key(&["Tenants", "t2", "Links", "y"]),
        "target",
        s("https://new.example.com"),
    )
    .await;
    table.settle();
    assert!(short_links_to(&t9, target).await.is_empty());
    assert!(
        short_links_to(&t2, "https://new.example.com")
            .await
            .is_empty()
    );

    check_repair_check(
        &tree,
        &table,
        &[
            (Class::MissingIndex, "/Tenants/t2/Links/y"),
            (Class::MissingIndex, "/Tenants/t9/Links/x"),
        ],
    )
    .await;
    table.settle();
    assert_eq!(short_links_to(&t9, target).await, ["x"]);
    assert!(short_links_to(&t1, target).await.is_empty());
    assert_eq!(short_links_to(&t2, "https://new.example.com").await, ["y"]);
    assert!(
        short_links_to(&t2, "https://old.example.com")
            .await
            .is_empty()
    );
}

/// A row below a registered type's template that holds no index value of that type is not
/// held to the values of a scope: the check cannot tell a value written through a scope whose
/// index attributes were erased (here by a Go re-put) from a row of another type that merely
/// reads as it (here an untyped whole-tree put), and a table written without scopes must not
/// be reported. Such a row is indexed again by a typed write through its scope.
#[tokio::test]
async fn rows_below_a_template_without_its_index_values_are_not_judged() {
    let table = FakeTable::new();
    let tree = indexed_tree(&table);
    tree.create_table().await.unwrap();
    let target = "https://example.com";
    tree.put(["Groups", "g", "Links", "x"], &short_link("g", "x", target))
        .await
        .unwrap();
    let tenant = tree.scope(["Tenants", "t1"]).unwrap();
    let erased = short_link("t1", "e", target);
    tenant.repo::<ShortLink>().put(&erased).await.unwrap();
    go_put(
        &table,
        &["Tenants", "t1", "Links", "e"],
        &[("short", s("e")), ("owner", s("t1")), ("target", s(target))],
    )
    .await;
    check_repair_check(&tree, &table, &[]).await;
    table.settle();
    assert!(short_links_to(&tenant, target).await.is_empty());
    tenant.repo::<ShortLink>().put(&erased).await.unwrap();
    table.settle();
    assert_eq!(short_links_to(&tenant, target).await, ["e"]);
    assert!(tree.check().run().await.unwrap().is_healthy());
}

/// The lane rows of a move (its transactions in flight at once) belong to its record: a check
/// of a move stopped partway reports the record, and no lane. Once another program deletes
/// the record, each lane is a `LockWithoutIntent` without a path, and the repair deletes it,
/// as it releases the move's locks.
#[tokio::test]
async fn lanes_whose_record_another_program_deleted_are_reported_and_deleted() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .subtree_transactions_in_flight(4)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    for i in 0..120 {
        tree.put(["s", &format!("o{i:03}")], &V { v: i })
            .await
            .unwrap();
    }
    // The move stops for good partway (nor can it roll back): its record and lanes stay.
    table.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .key_prefix("¦d¦")
            .nth(2)
            .always(),
    );
    tree.move_subtree(["s"], ["d"]).await.unwrap_err();
    table.clear_faults();
    let lanes = || {
        table
            .rows()
            .into_iter()
            .filter_map(|r| Key::from_item(&r))
            .filter(|k| k.hash == "¦¦intents" && k.range.contains('¦'))
            .collect::<Vec<Key>>()
    };
    let live = lanes();
    assert!(live.len() > 1, "the move has lanes: {live:?}");
    // Its owner gave up: the record is an abandoned intent, and its lanes are no violation.
    let report = tree.check().run().await.unwrap();
    let classes: Vec<Class> = report.violations().iter().map(|v| v.class()).collect();
    assert_eq!(classes, [Class::AbandonedIntent], "{report}");

    let id = live[0].range.split('¦').next().unwrap().to_owned();
    raw_delete(&table, Key::new("¦¦intents", id.clone())).await;
    let report = tree.check().run().await.unwrap();
    let orphans: Vec<String> = report
        .of(Class::LockWithoutIntent)
        .filter(|v| v.path().is_none())
        .map(|v| v.key().range.clone())
        .collect();
    let mut want: Vec<String> = live.iter().map(|k| k.range.clone()).collect();
    want.sort();
    assert_eq!(orphans, want, "{report}");
    assert!(
        report.to_string().contains(&format!(
            "a lane row of operation {id}, which is not recorded"
        )),
        "{report}"
    );
    let dry = tree.repair(&report).dry_run(true).run().await.unwrap();
    assert_eq!(dry.fixed().len(), report.violations().len(), "{dry}");
    assert_eq!(lanes(), live, "a dry run deletes nothing");
    let repaired = tree.repair(&report).run().await.unwrap();
    assert!(repaired.left().is_empty(), "{repaired}");
    assert!(lanes().is_empty());
    let again = tree.check().run().await.unwrap();
    assert_eq!(again.of(Class::LockWithoutIntent).count(), 0, "{again}");
}
