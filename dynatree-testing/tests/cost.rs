//! Request and capacity-unit counts, asserted through the metered fake (deterministic), and
//! recovery from injected faults.

use std::time::Duration;

use dynatree::{ErrorKind, Key, RetryPolicy, Tree, WriteRequest, batch};
use dynatree_testing::conformance::{V, assert_invariants};
use dynatree_testing::{FakeTable, Fault};
use futures::{StreamExt, TryStreamExt};

fn fast() -> RetryPolicy {
    RetryPolicy::new(6, Duration::from_millis(1), Duration::from_millis(5))
}

async fn setup() -> (FakeTable, Tree<FakeTable>) {
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
/// units whatever the depth, and never writes the root partition.
#[tokio::test]
async fn put_with_existing_ancestors_costs_one_request_at_any_depth() {
    let mut units = Vec::new();
    for depth in [1, 4, 20, 60] {
        let (fake, tree) = setup().await;
        tree.put(path(depth), &V { v: 0 }).await.unwrap();
        // Warm cache: this process has seen the rows.
        fake.reset_metrics();
        tree.put(path(depth), &V { v: 1 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!(m.total_requests(), 1, "depth {depth}: {m:?}");
        assert_eq!(m.requests("TransactWriteItems"), 1);
        assert_eq!(m.writes_to("¦"), 0, "depth {depth}");
        units.push(m.write_units());
        // Cold cache: another process (a new Tree) puts to the same path.
        let cold = Tree::new(fake.clone());
        fake.reset_metrics();
        cold.put(path(depth), &V { v: 2 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!(m.total_requests(), 1, "cold, depth {depth}: {m:?}");
        assert_eq!(m.writes_to("¦"), 0);
        assert_eq!(m.write_units(), units[0]);
    }
    // 2 units for the object put + 2 for the condition check, both transactional.
    assert_eq!(units, [4.0, 4.0, 4.0, 4.0]);
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

/// The first put of a deep path: a failed optimistic check, one BatchGetItem, one transaction.
#[tokio::test]
async fn first_put_of_a_new_path() {
    for depth in [1, 4, 20] {
        let (fake, tree) = setup().await;
        fake.reset_metrics();
        tree.put(path(depth), &V { v: 0 }).await.unwrap();
        let m = fake.metrics();
        assert_eq!(m.requests("TransactWriteItems"), 2, "depth {depth}");
        assert_eq!(m.requests("BatchGetItem"), 1);
        assert_eq!(m.total_requests(), 3);
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
    batch::write_all(tree.storage(), rows, &fast())
        .await
        .unwrap();
    assert_eq!(fake.rows().len(), 30);
    let keys: Vec<Key> = (0..30).map(|i| Key::new("h", format!("{i:02}"))).collect();
    fake.inject(0, Fault::Unprocessed { processed: 3 });
    let found = batch::get_all(tree.storage(), keys, true, &fast())
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
    let e = batch::write_all(tree.storage(), rows, &fast())
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
    // Request 0 of delete is the transaction that deletes the object and marks L(a/b); the
    // response is lost and the "process" stops there.
    fake.inject(1, Fault::Fail);
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
