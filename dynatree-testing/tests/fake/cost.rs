//! Request and capacity-unit counts, asserted through the metered fake (deterministic), and
//! recovery from injected faults.

use std::time::Duration;

use crate::fixtures::V;
use dynatree::storage::{Key, WriteRequest};
use dynatree::{ErrorKind, RetryPolicy, Tree, storage};
use dynatree_testing::conformance::assert_invariants;
use dynatree_testing::{FakeTable, Fault};
use futures::{StreamExt, TryStreamExt};

use crate::fixtures;

fn fast() -> RetryPolicy {
    RetryPolicy::new(6, Duration::from_millis(1), Duration::from_millis(5))
}

async fn setup() -> (FakeTable, Tree) {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone())
        .retry_policy(fast())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    (fake, tree)
}

fn path(depth: usize) -> Vec<String> {
    (0..depth).map(|i| format!("c{i}")).collect()
}

/// Depth 1, 4, 20 and 60: a put whose ancestors exist costs one request and the same write
/// units whatever the depth, and never writes the root partition. An overwrite of an object
/// is one PutItem (1 unit), from this process and from one that has not seen it.
#[tokio::test]
async fn put_with_existing_ancestors_costs_one_request_at_any_depth() {
    for depth in [1, 4, 20, 60] {
        let (fake, tree) = setup().await;
        tree.put(path(depth), &V { v: 0 }).await.unwrap();
        // Warm cache: this process wrote the object.
        fake.reset_metrics();
        tree.put(path(depth), &V { v: 1 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!(m.total_requests(), 1, "depth {depth}: {m:?}");
        assert_eq!(m.requests("PutItem"), 1);
        assert_eq!(m.writes_to("¦"), 0, "depth {depth}");
        assert_eq!(m.write_units(), 1.0, "depth {depth}");
        // Cold cache: another process (a new Tree) puts to the same path.
        let cold = Tree::new(fake.clone());
        // Its one table check (a DescribeTable, once per process) is not part of the put.
        cold.verify().await.unwrap();
        fake.reset_metrics();
        cold.put(path(depth), &V { v: 2 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!(m.total_requests(), 1, "cold, depth {depth}: {m:?}");
        assert_eq!((m.requests("PutItem"), m.write_units()), (1, 1.0));
        assert_eq!(m.writes_to("¦"), 0);
        // ...and so is the next overwrite from that process.
        fake.reset_metrics();
        cold.put(path(depth), &V { v: 3 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!((m.requests("PutItem"), m.write_units()), (1, 1.0));
    }
}

/// A new name under a known parent is one request; the root partition is written only when a
/// new top-level name appears.
#[tokio::test]
async fn root_partition_is_written_only_for_new_top_level_names() {
    let (fake, tree) = setup().await;
    tree.put(["Accounts", "1", "Links", "a"], &V { v: 1 })
        .await
        .unwrap();
    assert_eq!(fake.metrics().writes_to("¦"), 1);
    fake.reset_metrics();
    for i in 0..20 {
        tree.put(["Accounts", "1", "Links", &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    let m = fake.metrics();
    assert_eq!(m.total_requests(), 20, "{m:?}");
    assert_eq!(m.writes_to("¦"), 0);
    assert_eq!(m.writes_to("¦Accounts¦1¦Links¦"), 20);
    tree.put(["Other"], &V { v: 0 }).await.unwrap();
    assert_eq!(fake.metrics().writes_to("¦"), 1);
}

/// The first put of a path by a process that knows nothing: a failed overwrite (one PutItem,
/// since the process cannot tell a new name from another process's object), then for a deep
/// path one BatchGetItem and one transaction, for a top-level name one transaction (its
/// listing row and the object).
#[tokio::test]
async fn first_put_of_a_new_path() {
    for depth in [1, 4, 20] {
        let (fake, tree) = setup().await;
        fake.reset_metrics();
        tree.put(path(depth), &V { v: 0 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!(m.requests("PutItem"), 1, "depth {depth}");
        assert_eq!(m.requests("TransactWriteItems"), 1, "depth {depth}");
        if depth == 1 {
            assert_eq!(m.total_requests(), 2);
            // The failed PutItem (1) and the transaction (2 rows, 2 units each).
            assert_eq!(m.write_units(), 5.0);
        } else {
            assert_eq!(m.requests("BatchGetItem"), 1);
            assert_eq!(m.total_requests(), 3);
        }
        assert_eq!(m.writes_to("¦"), 1);
    }
}

#[tokio::test]
async fn early_stop_sends_no_further_pages() {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone()).page_size(2).build().unwrap();
    tree.create_table().await.unwrap();
    for i in 0..9 {
        tree.put(["d", &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    fake.reset_metrics();
    let stream = tree.list(["d"]);
    assert_eq!(fake.metrics().total_requests(), 0, "lazy: nothing sent yet");
    let first: Vec<String> = stream.take(3).try_collect().await.unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(fake.metrics().requests("Query"), 2);
    fake.reset_metrics();
    let all: Vec<String> = tree.list(["d"]).try_collect().await.unwrap();
    assert_eq!(all.len(), 9);
    // 5 pages of up to 2, the last one cut at its limit, then an empty one.
    assert_eq!(fake.metrics().requests("Query"), 5);
}

#[tokio::test]
async fn list_items_uses_batch_gets_not_one_get_per_child() {
    let (fake, tree) = setup().await;
    for i in 0..250 {
        tree.put(["d", &format!("{i:03}")], &V { v: i })
            .await
            .unwrap();
    }
    fake.reset_metrics();
    let entries: Vec<dynatree::Entry<V>> = tree.list_items(["d"]).try_collect().await.unwrap();
    assert_eq!(entries.len(), 250);
    let m = fake.metrics();
    assert_eq!(m.requests("Query"), 1);
    assert_eq!(m.requests("BatchGetItem"), 3);
    assert_eq!(m.requests("GetItem"), 0);
}

#[tokio::test]
async fn unprocessed_batch_items_are_retried() {
    let (fake, tree) = setup().await;
    let rows: Vec<WriteRequest> = (0..30)
        .map(|i| WriteRequest::Put(Key::new("h", format!("{i:02}")).into_item()))
        .collect();
    fake.inject(0, Fault::Unprocessed { processed: 10 });
    fake.inject(1, Fault::Throttle);
    storage::write_all(tree.storage(), rows, &fast())
        .await
        .unwrap();
    assert_eq!(fake.rows().len(), 30);
    let keys: Vec<Key> = (0..30).map(|i| Key::new("h", format!("{i:02}"))).collect();
    fake.inject(0, Fault::Unprocessed { processed: 3 });
    let found = storage::get_all(tree.storage(), keys, true, &fast())
        .await
        .unwrap();
    assert_eq!(found.len(), 30);
}

#[tokio::test]
async fn batch_gives_up_with_a_count_of_what_was_not_written() {
    let (fake, tree) = setup().await;
    fake.inject_always(Fault::Unprocessed { processed: 0 });
    let rows: Vec<WriteRequest> = (0..60)
        .map(|i| WriteRequest::Put(Key::new("g", format!("{i:02}")).into_item()))
        .collect();
    let e = storage::write_all(tree.storage(), rows, &fast())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unprocessed);
    assert_eq!(e.unprocessed_count(), 60);
    assert_eq!(
        e.to_string(),
        "batch items left unprocessed: 60 write requests left unprocessed after every retry"
    );
    // Nothing was written: the first chunk was tried max_attempts times, the rest never sent.
    assert_eq!(fake.metrics().requests("BatchWriteItem"), 6);
    assert!(fake.rows().is_empty());
}

#[tokio::test]
async fn throttled_put_is_retried() {
    let (fake, tree) = setup().await;
    fake.inject(0, Fault::Throttle);
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    assert_eq!(tree.get::<V>(["a", "b"]).await.unwrap(), Some(V { v: 1 }));
}

/// A failure at every request index of a put, then the same call again: the object is there
/// and every row keeps the invariants. Likewise for delete.
#[tokio::test]
async fn every_failure_point_of_put_and_delete_recovers_on_retry() {
    let target = ["x", "y", "z", "w"];
    for fault in [Fault::Fail, Fault::FailAfterApply] {
        for at in 0..12 {
            let (fake, tree) = setup().await;
            tree.put(["x", "other"], &V { v: 0 }).await.unwrap();
            fake.reset_metrics();
            fake.inject(at, fault.clone());
            let first = tree.put(target, &V { v: 7 }).await;
            fake.clear_faults();
            assert_invariants(&tree).await;
            if first.is_err() {
                tree.put(target, &V { v: 7 }).await.unwrap();
            }
            assert_eq!(tree.get::<V>(target).await.unwrap(), Some(V { v: 7 }));
            assert_invariants(&tree).await;

            fake.reset_metrics();
            fake.inject(at, fault.clone());
            let first = tree.delete(target).await;
            fake.clear_faults();
            assert_invariants(&tree).await;
            if first.is_err() {
                tree.delete(target).await.unwrap();
            }
            assert_eq!(tree.get::<V>(target).await.unwrap(), None);
            let names: Vec<String> = tree.list(["x"]).try_collect().await.unwrap();
            assert_eq!(names, ["other"], "{fault:?} at request {at}");
            assert_invariants(&tree).await;
        }
    }
}

/// A delete that died after marking a listing row: writers wait for the lease, then take the
/// mark off; a repeated delete takes it over and finishes.
#[tokio::test]
async fn an_abandoned_removal_mark_expires() {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone())
        .removal_lease(Duration::from_millis(50))
        .retry_policy(RetryPolicy::new(
            20,
            Duration::from_millis(5),
            Duration::from_millis(20),
        ))
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    // Request 0 of delete is the transaction that deletes the object and marks L(a/b). Every
    // request after it fails, the remover's two attempts to take its mark off included: as if
    // the process had died right after marking.
    for n in 1..=3 {
        fake.inject(n, Fault::Fail);
    }
    assert!(tree.delete(["a", "b"]).await.is_err());
    let marked = fake
        .rows()
        .into_iter()
        .any(|r| r.names().any(|n| n == "¦deleting"));
    assert!(marked, "the listing row is marked");
    // A writer under the marked row waits until the mark expires, then succeeds.
    tree.put(["a", "b"], &V { v: 2 }).await.unwrap();
    assert_eq!(tree.get::<V>(["a", "b"]).await.unwrap(), Some(V { v: 2 }));
    assert_invariants(&tree).await;
    assert!(
        !fake
            .rows()
            .iter()
            .any(|r| r.names().any(|n| n == "¦deleting")),
        "the expired mark was taken off"
    );
}

/// Ancestors of a node at depth 10: one BatchGetItem.
#[tokio::test]
async fn ancestors_of_depth_10_cost_one_request() {
    let (fake, tree) = setup().await;
    for depth in 1..=10 {
        tree.put(
            path(depth),
            &V {
                v: u32::try_from(depth).unwrap(),
            },
        )
        .await
        .unwrap();
    }
    fake.reset_metrics();
    let got: Vec<(dynatree::Path, V)> = tree.ancestors(path(10)).await.unwrap();
    assert_eq!(got.len(), 9);
    assert_eq!(fake.metrics().total_requests(), 1);
    assert_eq!(fake.metrics().requests("BatchGetItem"), 1);
}

/// Descendants of a tenant of 10,000 objects in 110 directories: the walk needs a Query per
/// node; the path index one Query per 1 MB page.
#[tokio::test]
async fn descendants_of_ten_thousand_nodes() {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone())
        .path_index(1)
        .retry_policy(fast())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    for a in 0..10 {
        for b in 0..10 {
            for c in 0..100 {
                tree.put(
                    [
                        "tenant",
                        &format!("d{a}"),
                        &format!("e{b}"),
                        &format!("f{c:03}"),
                    ],
                    &V { v: c },
                )
                .await
                .unwrap();
            }
        }
    }
    fake.reset_metrics();
    let walked: Vec<dynatree::Descendant> = tree
        .descendants(["tenant"])
        .strategy(dynatree::Strategy::Walk)
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(walked.len(), 10_000);
    let walk = fake.metrics();
    // One listing Query per node (10 + 100 directories + 10,000 leaves + the prefix); one
    // BatchGetItem per 100 names of each directory.
    assert_eq!(walk.requests("Query"), 1 + 10 + 100 + 10_000);
    assert_eq!(walk.requests("BatchGetItem"), 1 + 10 + 100);
    fake.reset_metrics();
    let indexed: Vec<dynatree::Descendant> = tree
        .descendants(["tenant"])
        .strategy(dynatree::Strategy::PathIndex)
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(indexed.len(), 10_000);
    let index = fake.metrics();
    assert_eq!(index.total_requests(), index.requests("Query"));
    assert!(index.requests("Query") <= 3, "{index:?}");
    println!(
        "descendants of 10,000 objects: walk {} Query + {} BatchGetItem ({} RCU); path index {} Query ({} RCU)",
        walk.requests("Query"),
        walk.requests("BatchGetItem"),
        walk.read_units(),
        index.requests("Query"),
        index.read_units()
    );
}

/// A failure at every request index of delete_subtree, then the same call again: the subtree
/// is gone, its sibling stays, the invariants hold.
#[tokio::test]
async fn every_failure_point_of_delete_subtree_recovers_on_retry() {
    for fault in [Fault::Fail, Fault::FailAfterApply] {
        for at in 0..30 {
            let (fake, tree) = setup().await;
            for p in [
                &["o", "a", "x"][..],
                &["o", "a", "y", "z"],
                &["o", "a"],
                &["o", "b"],
            ] {
                tree.put(p, &V { v: 0 }).await.unwrap();
            }
            fake.reset_metrics();
            fake.inject(at, fault.clone());
            let first = tree.delete_subtree(["o", "a"]).await;
            fake.clear_faults();
            assert_invariants(&tree).await;
            if first.is_err() {
                tree.delete_subtree(["o", "a"]).await.unwrap();
            }
            let names: Vec<String> = tree.list(["o"]).try_collect().await.unwrap();
            assert_eq!(names, ["b"], "{fault:?} at request {at}");
            assert_invariants(&tree).await;
        }
    }
}

/// The objects of a tree, as (path, value), from a raw scan (intent records left out).
async fn snapshot(fake: &FakeTable) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = fake
        .rows()
        .into_iter()
        .filter(|r| r.get_s("Child") == Some("¦"))
        .filter(|r| !r.get_s("Key").unwrap_or_default().starts_with("¦¦"))
        .map(|r| {
            let v = match r.get("v") {
                Some(dynatree::storage::Value::N(n)) => n.parse().unwrap(),
                _ => 0,
            };
            (r.get_s("Key").unwrap().to_owned(), v)
        })
        .collect();
    out.sort();
    out
}

async fn build_org(tree: &Tree) {
    build_org_of(tree, 4).await;
}

/// `teams` teams × 5 groups × 10 people under `org/eng`, the team and group nodes (4 teams:
/// 224 nodes, 205 objects under `org/eng`), `org/sales/x` and a link into the subtree.
async fn build_org_of(tree: &Tree, teams: u32) {
    tree.put(["org", "eng"], &V { v: 1 }).await.unwrap();
    for t in 0..teams {
        tree.put(["org", "eng", &format!("t{t}")], &V { v: t })
            .await
            .unwrap();
        for g in 0..5u32 {
            for p in 0..10u32 {
                tree.put(
                    [
                        "org",
                        "eng",
                        &format!("t{t}"),
                        &format!("g{g}"),
                        &format!("p{p}"),
                    ],
                    &V {
                        v: 100 * t + 10 * g + p,
                    },
                )
                .await
                .unwrap();
            }
        }
    }
    tree.put(["org", "sales", "x"], &V { v: 9 }).await.unwrap();
    tree.put_link(["people", "p"], ["org", "eng", "t1", "g2", "p3"])
        .await
        .unwrap();
}

/// A subtree operation whose every failure point is tried.
#[derive(Clone, Copy, Debug)]
enum Subtree {
    Move,
    Copy,
}

impl Subtree {
    async fn run(self, tree: &Tree) -> dynatree::Result<()> {
        match self {
            Subtree::Move => tree.move_subtree(["org", "eng"], ["org", "tech"]).await,
            Subtree::Copy => tree.copy_subtree(["org", "eng"], ["org", "tech"]).await,
        }
        .map(drop)
    }

    /// The error a second call may meet when the first completed all but its reply: nothing
    /// left at a move's source, a copy's destination taken.
    fn done_already(self, e: &dynatree::Error) -> bool {
        match self {
            Subtree::Move => e.is_not_found(),
            Subtree::Copy => e.kind() == ErrorKind::AlreadyExists,
        }
    }
}

/// A failure (before or after it applies) at every request index of `op` on `org/eng` with 2
/// teams (113 nodes, 103 objects; its level of 100 people takes two transactions to lock),
/// then `resume` from another process (every other index) and the same call again: the tree
/// equals the model of the completed operation, with nothing lost or duplicated and no lock or
/// hold left at either end.
async fn every_failure_point_recovers(op: Subtree) {
    // The model: the same tree, the operation run without faults.
    let (model_fake, model) = setup().await;
    build_org_of(&model, 2).await;
    model_fake.reset_metrics();
    op.run(&model).await.unwrap();
    let requests = model_fake.metrics().total_requests();
    assert!(requests > 30, "{requests}");
    let expected = snapshot(&model_fake).await;
    assert_eq!(
        expected
            .iter()
            .filter(|(k, _)| k.starts_with("¦org¦tech"))
            .count(),
        103
    );

    for fault in [Fault::Fail, Fault::FailAfterApply] {
        for at in 0..requests {
            let (fake, tree) = setup().await;
            build_org_of(&tree, 2).await;
            fake.reset_metrics();
            fake.inject(at, fault.clone());
            let first = op.run(&tree).await;
            fake.clear_faults();
            assert_invariants(&tree).await;
            if first.is_err() {
                if at % 2 == 0 {
                    // Another process finishes what was recorded...
                    let other = Tree::builder(fake.clone())
                        .retry_policy(fast())
                        .build()
                        .unwrap();
                    assert!(other.resume().await.unwrap().len() <= 1);
                }
                // ...and the same call again finishes (or starts) the rest.
                match op.run(&tree).await {
                    Ok(()) => {}
                    Err(e) if op.done_already(&e) => {}
                    Err(e) => panic!("{op:?}: {fault:?} at request {at}: {e:?}"),
                }
            }
            assert!(tree.pending().await.unwrap().is_empty());
            let got = snapshot(&fake).await;
            if got != expected {
                let missing: Vec<_> = expected
                    .iter()
                    .filter(|x| !got.contains(x))
                    .take(3)
                    .collect();
                let extra: Vec<_> = got
                    .iter()
                    .filter(|x| !expected.contains(x))
                    .take(3)
                    .collect();
                panic!(
                    "{op:?}: {fault:?} at request {at}: {} objects, expected {}; missing {missing:?}, extra {extra:?}",
                    got.len(),
                    expected.len()
                );
            }
            let bookkeeping: Vec<_> = fake
                .rows()
                .into_iter()
                .filter(|r| r.contains("¦moving") || r.contains("¦held"))
                .collect();
            assert!(
                bookkeeping.is_empty(),
                "{op:?}: {fault:?} at request {at}: {bookkeeping:?}"
            );
            assert_invariants(&tree).await;
        }
    }
}

#[tokio::test]
async fn every_failure_point_of_a_move_recovers_with_resume() {
    every_failure_point_recovers(Subtree::Move).await;
}

#[tokio::test]
async fn every_failure_point_of_a_copy_recovers_with_resume() {
    every_failure_point_recovers(Subtree::Copy).await;
}

/// While a subtree is locked by a move, writers under it are refused with `Locked`, not lost;
/// after `resume`, writes succeed again.
#[tokio::test]
async fn writers_under_a_moving_subtree_are_refused() {
    // Stop the move at each request in turn until a deep row is locked and nothing is copied.
    for at in 0..400 {
        let (fake, tree) = setup().await;
        build_org(&tree).await;
        fake.reset_metrics();
        fake.inject(at, Fault::Fail);
        let r = tree.move_subtree(["org", "eng"], ["org", "tech"]).await;
        fake.clear_faults();
        let rows = fake.rows();
        let deep_locked = rows.iter().any(|row| {
            row.get_s("Key") == Some("¦org¦eng¦t0¦g0¦")
                && row.get_s("Child") == Some("p0")
                && row.contains("¦moving")
        });
        let copied = rows
            .iter()
            .any(|row| row.get_s("Key").is_some_and(|k| k.starts_with("¦org¦tech")));
        // The objects are held too (after the whole source is locked, before anything is
        // copied): until then an overwrite of an existing object, one PutItem, still lands
        // in the source, and is copied.
        let deep_held = rows
            .iter()
            .any(|row| row.get_s("Key") == Some("¦org¦eng¦t0¦g0¦p0") && row.contains("¦held"));
        if r.is_err() && deep_locked && deep_held && !copied {
            let e = tree
                .put(["org", "eng", "t0", "g0", "p0"], &V { v: 7 })
                .await
                .unwrap_err();
            assert!(e.is_locked(), "{e:?}");
            let e = tree
                .put(["org", "eng", "new"], &V { v: 7 })
                .await
                .unwrap_err();
            assert!(e.is_locked(), "{e:?}");
            let e = tree.delete(["org", "eng", "t0"]).await.unwrap_err();
            assert!(e.is_locked(), "{e:?}");
            assert_eq!(tree.pending().await.unwrap().len(), 1);
            tree.resume().await.unwrap();
            tree.put(["org", "eng", "new"], &V { v: 7 }).await.unwrap();
            assert_eq!(
                tree.get::<V>(["org", "tech", "t0", "g0", "p0"])
                    .await
                    .unwrap(),
                Some(V { v: 0 })
            );
            assert_invariants(&tree).await;
            return;
        }
    }
    panic!("the move never stopped with its subtree locked and held and nothing copied");
}

/// A move of 1,000 objects (1,111 nodes): requests, by operation.
#[tokio::test]
async fn move_of_a_thousand_nodes() {
    let (fake, tree) = setup().await;
    for a in 0..10 {
        for b in 0..10 {
            for c in 0..10 {
                tree.put(
                    ["src", &format!("a{a}"), &format!("b{b}"), &format!("c{c}")],
                    &V { v: c },
                )
                .await
                .unwrap();
            }
        }
    }
    fake.reset_metrics();
    let report = tree
        .move_subtree_with(["src"], ["dst"], dynatree::ops::LinkPolicy::Ignore)
        .await
        .unwrap();
    assert_eq!(report.objects, 1_000);
    assert_eq!(report.nodes, 1_111);
    let m = fake.metrics();
    println!(
        "move of 1,000 objects / 1,111 nodes: {:?}, {} WCU, {} RCU",
        m.requests_by_operation(),
        m.write_units(),
        m.read_units()
    );
    // One consistent listing Query per node; transactions of up to 99 actions (plus the check
    // that this call still owns the intent) for the source locks (1,111), the holds on its
    // objects (1,000), the copies under the destination, locked and held (2,111), the deletes
    // (2,222), the release of the destination's holds (1,000) and its unlocks (1,111), chunked
    // per level; one BatchGetItem per 100 nodes to validate the move, one to copy and one to
    // release, and to hold one per 100 of each slice of 198 (a level is held in slices, each
    // reported: one more read for the level of 1,000). The levels of 100 and 1,000 are wider
    // than one transaction, so their transactions go out together on lanes of the intent:
    // two transactions write them (3 lanes for the level of 100, then 16), one deletes them
    // with the record at the end (instead of a DeleteItem), and the unlocks go level by level
    // (15 transactions instead of 12, which crossed levels).
    assert_eq!(
        m.requests("Query"),
        1 + 1_111,
        "pending(), then one per node"
    );
    assert_eq!(
        m.requests("TransactWriteItems"),
        115,
        "{:?}",
        m.requests_by_operation()
    );
    assert_eq!(
        m.requests("BatchGetItem"),
        52,
        "{:?}",
        m.requests_by_operation()
    );
    let names: Vec<String> = tree
        .list(dynatree::Path::root())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(names, ["dst"]);
}

/// A subtree of `fan` children per node, `depth` levels below its root `src`, an object at
/// every node; one leaf is a link to another node of the subtree. Returns its node count.
async fn fan_out(tree: &Tree, fan: usize, depth: usize) -> usize {
    let mut level = vec![vec!["src".to_owned()]];
    let mut nodes = 0;
    for d in 0..=depth {
        let mut next = Vec::new();
        for p in &level {
            if d == depth && p.iter().skip(1).all(|c| c.ends_with('0')) {
                // The first leaf: a link into the subtree.
                tree.put_link(p.clone(), ["src", "n1"]).await.unwrap();
            } else {
                tree.put(p.clone(), &V { v: d as u32 }).await.unwrap();
            }
            nodes += 1;
            for c in 0..fan {
                let mut child = p.clone();
                child.push(format!("n{c}"));
                next.push(child);
            }
        }
        level = next;
    }
    nodes
}

/// What a move, copy or subtree deletion of `src` sends, on a fresh table holding
/// [`fan_out`]`(fan, depth)`: its node count and the metrics of the operation alone.
async fn measure_subtree_op(
    op: &str,
    fan: usize,
    depth: usize,
) -> (usize, dynatree_testing::Metrics) {
    use dynatree::ops::LinkPolicy;
    let (fake, tree) = setup().await;
    let nodes = fan_out(&tree, fan, depth).await;
    fake.reset_metrics();
    match op {
        "move" => {
            let r = tree
                .move_subtree_with(["src"], ["dst"], LinkPolicy::Ignore)
                .await
                .unwrap();
            assert_eq!(r.nodes, nodes);
        }
        "move rewrite" => {
            tree.move_subtree_with(["src"], ["dst"], LinkPolicy::Rewrite)
                .await
                .unwrap();
        }
        "copy" => {
            let r = tree.copy_subtree(["src"], ["dst"]).await.unwrap();
            assert_eq!(r.nodes, nodes);
        }
        "copy report" | "copy rewrite" => {
            let policy = if op == "copy report" {
                LinkPolicy::Report
            } else {
                LinkPolicy::Rewrite
            };
            let r = tree
                .copy_subtree_with(["src"], ["dst"], policy)
                .await
                .unwrap();
            assert_eq!(r.links.len(), 1);
        }
        "delete" => {
            assert_eq!(tree.delete_subtree(["src"]).await.unwrap(), nodes);
        }
        other => panic!("no operation {other}"),
    }
    let m = fake.metrics();
    println!(
        "{op} of {nodes} nodes: {:?}, {} RCU, {} WCU",
        m.requests_by_operation(),
        m.read_units(),
        m.write_units()
    );
    assert_invariants(&tree).await;
    (nodes, m)
}

/// A copy of 111 nodes lists each node of its source once (one consistent Query each, the
/// lock walk), whatever its link policy, and lists nothing else but the recorded intents
/// (one Query, to join the same call if it is recorded): the phases after the lock walk reuse
/// the nodes it found.
#[tokio::test]
async fn a_copy_lists_each_node_once() {
    for op in ["copy", "copy report", "copy rewrite"] {
        let (nodes, m) = measure_subtree_op(op, 10, 2).await;
        assert_eq!(nodes, 111);
        assert_eq!(
            m.requests("Query"),
            1 + nodes as u64,
            "{op}: {:?}",
            m.requests_by_operation()
        );
    }
}

/// A move of 111 nodes lists each node of its source once, whatever its link policy (links
/// into the source are looked up by Scan, not by listing).
#[tokio::test]
async fn a_move_lists_each_node_once() {
    for op in ["move", "move rewrite"] {
        let (nodes, m) = measure_subtree_op(op, 10, 2).await;
        assert_eq!(
            m.requests("Query"),
            1 + nodes as u64,
            "{op}: {:?}",
            m.requests_by_operation()
        );
    }
}

/// A subtree deletion of 111 nodes lists each node once.
#[tokio::test]
async fn a_subtree_deletion_lists_each_node_once() {
    let (nodes, m) = measure_subtree_op("delete", 10, 2).await;
    assert_eq!(
        m.requests("Query"),
        1 + nodes as u64,
        "{:?}",
        m.requests_by_operation()
    );
}

/// A small typed object for the batch figures: 10 accounts × 100 links.
#[derive(dynatree::Hierarchical, Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[dynatree(path = "Accounts/{account}/Links/{name}")]
struct Link {
    account: String,
    name: String,
    target: String,
}

fn thousand_links(target: &str) -> Vec<Link> {
    (0..10)
        .flat_map(|a| {
            (0..100).map(move |n| Link {
                account: format!("a{a}"),
                name: format!("n{n:03}"),
                target: format!("https://example.com/{target}/{a}/{n}"),
            })
        })
        .collect()
}

/// How the 1,000 links are written in [`put_all_per_thousand_items`].
#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    PutAll,
    PutLoop,
    Go,
}

/// Writes `links` one way; the Go algorithm is dynamotree's `Put` once per link (all 5 rows
/// of each, unconditionally, in one BatchWriteItem: the Go library has no batch put).
async fn write_links(way: Way, tree: &Tree, links: &[Link]) {
    match way {
        Way::PutAll => tree.repo::<Link>().put_all(links).await.unwrap(),
        Way::PutLoop => {
            let repo = tree.repo::<Link>();
            for l in links {
                repo.put(l).await.unwrap();
            }
        }
        Way::Go => {
            for l in links {
                let path = ["Accounts", &l.account, "Links", &l.name].map(str::to_owned);
                let attrs = dynatree::storage::Item::from_serialize(l).unwrap();
                storage::write_all(tree.storage(), fixtures::go_rows(&path, &attrs), &fast())
                    .await
                    .unwrap();
            }
        }
    }
}

/// The metrics of one way on a fresh metered fake: 1,000 new links, then the same 1,000
/// overwritten by the same tree (its cache of known listing rows warm), then again by a new
/// tree on the same table (another process: cold cache).
async fn measure(way: Way) -> [dynatree_testing::Metrics; 3] {
    let (fake, tree) = setup().await;
    fake.reset_metrics();
    write_links(way, &tree, &thousand_links("first")).await;
    let new = fake.metrics();
    fake.reset_metrics();
    write_links(way, &tree, &thousand_links("second")).await;
    let warm = fake.metrics();
    let other = Tree::builder(fake.clone())
        .retry_policy(fast())
        .build()
        .unwrap();
    let links = thousand_links("third");
    // Its one table check (a DescribeTable, once per process) is not part of the writes.
    other.verify().await.unwrap();
    fake.reset_metrics();
    write_links(way, &other, &links).await;
    let cold = fake.metrics();
    // Every way leaves the same 1,000 objects, reachable, and no other row.
    let keys: Vec<LinkKey> = links.iter().map(dynatree::Hierarchical::key).collect();
    let got = tree.repo::<Link>().get_many(&keys).await.unwrap();
    let got: Vec<Link> = got.into_iter().map(Option::unwrap).collect();
    assert_eq!(got, links, "{way:?}");
    assert_eq!(fake.rows().len(), 1 + 10 + 10 + 1_000 + 1_000, "{way:?}");
    assert_invariants(&tree).await;
    [new, warm, cold]
}

/// 1,000 small objects at `Accounts/{a}/Links/{n}` over 10 accounts, written by `put_all`, by a
/// loop of `put` and by the Go library's algorithm, each on a fresh metered fake: requests by
/// operation and write units, exact (the fake is deterministic). `--nocapture` prints the
/// table of BENCHMARKS.md.
#[tokio::test]
async fn put_all_per_thousand_items() {
    let cases = ["new", "overwrite, same tree", "overwrite, new tree"];
    let ways = [Way::PutAll, Way::PutLoop, Way::Go];
    let mut got = Vec::new();
    for way in ways {
        got.push(measure(way).await);
    }
    println!("| case | way | requests | by operation | WCU |");
    println!("|---|---|---|---|---|");
    for (c, case) in cases.iter().enumerate() {
        for (w, way) in ways.iter().enumerate() {
            let m = &got[w][c];
            println!(
                "| {case} | {way:?} | {} | {:?} | {} |",
                m.total_requests(),
                m.requests_by_operation(),
                m.write_units()
            );
        }
    }
    // (BatchGetItem, TransactWriteItems, BatchWriteItem, PutItem, WCU), per case, per way.
    type Counts = (u64, u64, u64, u64, f64);
    let expected: [[Counts; 3]; 3] = [
        // put_all: the 1,021 listing rows of the batch read once (11 BatchGetItem; none when
        // this tree has seen them all), the 21 ancestors created in one transaction, then 50
        // objects per transaction (each with its listing row put or checked, plus one check
        // per parent in the transaction).
        [
            (11, 22, 0, 0, 4102.0),
            (0, 20, 0, 0, 4000.0),
            (11, 20, 0, 0, 4000.0),
        ],
        // A loop of put: one transaction per new object (the first link of each account
        // creates the account's rows in it, checked against `Accounts`, which the tree knows;
        // only the very first put, which knows nothing, sends a failed overwrite and a
        // BatchGetItem); an overwrite is one PutItem, from this tree and from one that has
        // not seen the objects.
        [
            (1, 1_000, 0, 1, 6041.0),
            (0, 0, 0, 1_000, 1000.0),
            (0, 0, 0, 1_000, 1000.0),
        ],
        // Go: one BatchWriteItem of the 5 rows per object, every time.
        [
            (0, 0, 1_000, 0, 5000.0),
            (0, 0, 1_000, 0, 5000.0),
            (0, 0, 1_000, 0, 5000.0),
        ],
    ];
    for (w, way) in ways.iter().enumerate() {
        for (c, case) in cases.iter().enumerate() {
            let m = &got[w][c];
            let (bg, tx, bw, put, wcu) = expected[w][c];
            let seen = (
                m.requests("BatchGetItem"),
                m.requests("TransactWriteItems"),
                m.requests("BatchWriteItem"),
                m.requests("PutItem"),
                m.write_units(),
            );
            assert_eq!(seen, (bg, tx, bw, put, wcu), "{way:?}, {case}");
            assert_eq!(m.total_requests(), bg + tx + bw + put, "{way:?}, {case}");
        }
    }
    // Far fewer requests than one put (or one Go put) per item: 30x and more.
    for c in 0..cases.len() {
        let batch = got[0][c].total_requests();
        assert!(batch * 30 < got[1][c].total_requests(), "{}", cases[c]);
        assert!(batch * 30 < got[2][c].total_requests(), "{}", cases[c]);
    }
}
