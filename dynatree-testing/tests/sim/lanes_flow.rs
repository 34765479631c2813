//! The lanes' flow control (throttled transactions halve the lanes in use, each landed one
//! adds one back), throttling as DynamoDB reports it for transactions, the call's retry
//! budget with lanes, and the order of a level's transactions spread across its parents'
//! partitions.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dynatree::error::CancellationReason;
use dynatree::storage::Request;
use dynatree::{Error, RetryPolicy};
use dynatree_testing::service::{ServiceModel, ServiceTable};

use crate::acts::*;

/// How the layer reports a throttled TransactWriteItems.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Shape {
    /// As the service model does: `ErrorKind::Throttled`.
    Model,
    /// As DynamoDB does for a transaction whose item's partition is over its capacity:
    /// `TransactionCanceledException` with `ThrottlingError` reasons (what `DynamoDbTable`
    /// turns into `ErrorKind::TransactionCanceled`).
    DynamoDb,
}

#[derive(Default)]
struct Counters {
    in_flight: AtomicUsize,
    /// Transactions in flight at the start of each transaction (itself included), once a
    /// first throttled answer came back.
    after_throttle: Mutex<Vec<usize>>,
    throttled_seen: AtomicBool,
    tx_sent: AtomicUsize,
    tx_throttled: AtomicUsize,
    /// Throttle every transaction checking a lane row from now on.
    throttle_lanes: AtomicBool,
    /// Applied transactions, in the order applied.
    applied: Mutex<Vec<Vec<TransactAction>>>,
}

#[derive(Clone)]
struct Watch<S> {
    inner: S,
    shape: Shape,
    c: Arc<Counters>,
}

fn checks_lane(actions: &[TransactAction]) -> bool {
    let intents = format!("{SC}{SC}intents");
    actions.iter().any(|a| {
        matches!(a, TransactAction::ConditionCheck { key, .. }
            if key.hash == intents && key.range.contains(SC))
    })
}

impl<S: Storage + Clone + Send + Sync + 'static> Storage for Watch<S> {
    async fn send(&self, request: Request) -> dynatree::Result<dynatree::storage::Response> {
        let Request::TransactWrite { actions, .. } = &request else {
            return self.inner.send(request).await;
        };
        let actions = actions.clone();
        let c = &self.c;
        c.tx_sent.fetch_add(1, Ordering::SeqCst);
        let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        if c.throttled_seen.load(Ordering::SeqCst) {
            c.after_throttle.lock().unwrap().push(now);
        }
        let out = if c.throttle_lanes.load(Ordering::SeqCst) && checks_lane(&actions) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(Error::new(ErrorKind::Throttled, "throttled"))
        } else {
            self.inner.send(request).await
        };
        c.in_flight.fetch_sub(1, Ordering::SeqCst);
        match out {
            Err(e) if e.kind() == ErrorKind::Throttled => {
                c.tx_throttled.fetch_add(1, Ordering::SeqCst);
                c.throttled_seen.store(true, Ordering::SeqCst);
                match self.shape {
                    Shape::Model => Err(e),
                    Shape::DynamoDb => Err(Error::transaction_canceled(
                        actions
                            .iter()
                            .map(|_| CancellationReason::new("ThrottlingError", None))
                            .collect(),
                    )),
                }
            }
            Ok(r) => {
                c.applied.lock().unwrap().push(actions);
                Ok(r)
            }
            other => other,
        }
    }
}

/// A directory `d` with `n` children (each an object), on a fake table; a tree for the
/// operation on `Watch(ServiceTable(published))` over the same fake.
async fn hot_directory(
    n: usize,
    shape: Shape,
    policy: RetryPolicy,
    in_flight: usize,
) -> (Tree, FakeTable, ServiceTable, Arc<Counters>) {
    let fake = FakeTable::new();
    let setup = Tree::new(fake.clone());
    setup.create_table().await.unwrap();
    setup.put(["d"], &V { v: 0 }).await.unwrap();
    for i in 0..n {
        setup
            .put(["d".to_owned(), format!("n{i:05}")], &V { v: 1 })
            .await
            .unwrap();
    }
    let service = ServiceTable::new(fake.clone(), ServiceModel::published().seed(5));
    let c = Arc::new(Counters::default());
    let tree = Tree::builder(Watch {
        inner: service.clone(),
        shape,
        c: c.clone(),
    })
    .retry_policy(policy)
    .subtree_transactions_in_flight(in_flight)
    .build()
    .unwrap();
    (tree, fake, service, c)
}

fn mean(v: &[usize]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().sum::<usize>() as f64 / v.len() as f64
}

/// A move of a hot directory (3,000 children: every lock, copy and delete of a level in one
/// partition), default retry policy, under the published model: it finishes, and the tree
/// checks clean. Returns (throttled transactions, transactions sent, mean in flight at a
/// start after the first throttle).
async fn hot_move(shape: Shape, policy: RetryPolicy, in_flight: usize) -> (usize, usize, f64) {
    let (tree, fake, _service, c) = hot_directory(3000, shape, policy, in_flight).await;
    let out = tree.move_subtree(["d"], ["m"]).await;
    let throttled = c.tx_throttled.load(Ordering::SeqCst);
    let sent = c.tx_sent.load(Ordering::SeqCst);
    let after = mean(&c.after_throttle.lock().unwrap());
    eprintln!(
        "{shape:?} ({in_flight} in flight): {out:?}; {throttled} of {sent} transactions throttled; mean in flight after the first throttle {after:.2}"
    );
    out.unwrap_or_else(|e| panic!("{shape:?}: the move of a hot directory failed: {e}"));
    let names: Vec<String> =
        futures::TryStreamExt::try_collect(Tree::new(fake.clone()).list(["m"]))
            .await
            .unwrap();
    assert_eq!(names.len(), 3000);
    (throttled, sent, after)
}

fn patient() -> RetryPolicy {
    RetryPolicy::new(100, Duration::from_millis(25), Duration::from_secs(2))
}

/// A move of a hot directory (3,000 children in one partition) with the default retry
/// policy under the published model: the throttled transactions of a wave wait for their turn
/// instead of spending the call's budget together, so it finishes.
#[tokio::test(start_paused = true)]
async fn a_hot_directory_move_finishes_with_the_default_policy_under_the_published_model() {
    let (throttled, _, _) = hot_move(Shape::Model, RetryPolicy::default(), 16).await;
    assert!(
        throttled > 0,
        "the partition was never throttled: no test of flow control"
    );
}

/// The flow control must react to a throttled transaction as DynamoDB reports it
/// (`TransactionCanceledException` with `ThrottlingError` reasons: "insufficient provisioned
/// capacity for the transaction"; `DynamoDbTable` makes it `ErrorKind::TransactionCanceled`,
/// see `dynatree/tests/api/dynamodb_errors.rs`) as it does to the model's `Throttled`. Were
/// it counted as landed, the hot partition would be throttled about 1.6 times as often.
#[tokio::test(start_paused = true)]
async fn flow_control_follows_throttling_as_dynamodb_reports_it_for_transactions() {
    let (t_model, _, _) = hot_move(Shape::Model, patient(), 16).await;
    let (t_dynamo, _, _) = hot_move(Shape::DynamoDb, patient(), 16).await;
    assert!(
        t_dynamo <= t_model * 5 / 4,
        "DynamoDB-shaped throttling: {t_dynamo} throttled tries against {t_model} with the \
         model's Throttled: the flow control does not see it"
    );
}

/// A move whose every lane transaction is throttled from the first one on (no transaction
/// with lanes lands: no progress) stops within its budget: the first wave plus the policy's
/// retries (and the rollback's few), not 16 chunks times the policy.
#[tokio::test(start_paused = true)]
async fn a_move_whose_lane_transactions_never_land_stops_within_its_budget() {
    let fake = FakeTable::new();
    let setup = Tree::new(fake.clone());
    setup.create_table().await.unwrap();
    setup.put(["d"], &V { v: 0 }).await.unwrap();
    for i in 0..800 {
        setup
            .put(["d".to_owned(), format!("n{i:04}")], &V { v: 1 })
            .await
            .unwrap();
    }
    let c = Arc::new(Counters::default());
    c.throttle_lanes.store(true, Ordering::SeqCst);
    let tree = Tree::builder(Watch {
        inner: fake.clone(),
        shape: Shape::Model,
        c: c.clone(),
    })
    .build()
    .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(600), tree.move_subtree(["d"], ["m"]))
        .await
        .expect("the call never ended");
    let throttled = c.tx_throttled.load(Ordering::SeqCst);
    eprintln!("{out:?}: {throttled} throttled lane transactions");
    assert!(out.is_err(), "{out:?}");
    // 800 nodes: 17 transactions a lock level, 16 in flight; the policy's 9 retries.
    assert!(
        throttled <= 17 + 9 + 10,
        "{throttled} throttled lane transactions"
    );
}

/// With lanes, the level's transactions go in turns across partitions; the protocol's orders
/// must stay: unlocks parent before child, deletes child before parent. A root with 3
/// children of 70 (two levels wider than one transaction), copied, then the copy deleted.
#[tokio::test(start_paused = true)]
async fn spread_keeps_unlocks_top_down_and_deletes_bottom_up() {
    let fake = FakeTable::new();
    let setup = Tree::new(fake.clone());
    setup.create_table().await.unwrap();
    let mut all: Vec<P> = vec![p(&["r"])];
    setup.put(["r"], &V { v: 0 }).await.unwrap();
    for c in 0..3 {
        let child = vec!["r".to_owned(), format!("c{c}")];
        setup.put(child.clone(), &V { v: 0 }).await.unwrap();
        all.push(child.clone());
        for g in 0..70 {
            let mut gc = child.clone();
            gc.push(format!("g{g:02}"));
            setup.put(gc.clone(), &V { v: 0 }).await.unwrap();
            all.push(gc);
        }
    }
    let c = Arc::new(Counters::default());
    let tree = Tree::builder(Watch {
        inner: fake.clone(),
        shape: Shape::Model,
        c: c.clone(),
    })
    .build()
    .unwrap();
    tree.copy_subtree(["r"], ["k"]).await.unwrap();
    let applied = std::mem::take(&mut *c.applied.lock().unwrap());
    // Unlocks: a Put of a listing row without the lock attribute.
    let by_key = |root: &str| -> std::collections::HashMap<Key, P> {
        all.iter()
            .map(|q| {
                let mut q = q.clone();
                q[0] = root.to_owned();
                (listing_key(&q), q)
            })
            .collect()
    };
    let moving = format!("{SC}moving");
    for root in ["r", "k"] {
        let keys = by_key(root);
        let mut unlocked: Vec<P> = Vec::new();
        let mut first_copy: Option<P> = None;
        for tx in &applied {
            for a in tx {
                if let TransactAction::Put { item, .. } = a
                    && let Some(k) = Key::from_item(item)
                    && let Some(q) = keys.get(&k)
                {
                    let locked = item
                        .iter()
                        .any(|(name, _)| name.contains(&moving) || name.ends_with("moving"));
                    if locked {
                        first_copy.get_or_insert(q.clone());
                    } else {
                        unlocked.push(q.clone());
                    }
                }
            }
        }
        if root == "k" {
            assert_eq!(
                first_copy.as_deref(),
                Some(&p(&["k"])[..]),
                "the destination root is copied first"
            );
        }
        assert_eq!(
            unlocked.len(),
            all.len(),
            "{root}: every row unlocked once: {unlocked:?}"
        );
        for (i, q) in unlocked.iter().enumerate() {
            if q.len() > 1 {
                let parent = &q[..q.len() - 1];
                assert!(
                    unlocked[..i].iter().any(|u| u.as_slice() == parent),
                    "{root}: {q:?} unlocked before its parent"
                );
            }
        }
    }
    tree.delete_subtree(["k"]).await.unwrap();
    let applied = std::mem::take(&mut *c.applied.lock().unwrap());
    let keys = by_key("k");
    let mut deleted: Vec<P> = Vec::new();
    for tx in &applied {
        for a in tx {
            if let TransactAction::Delete { key, .. } = a
                && let Some(q) = keys.get(key)
            {
                deleted.push(q.clone());
            }
        }
    }
    assert_eq!(deleted.len(), all.len(), "every row deleted once");
    for (i, q) in deleted.iter().enumerate() {
        assert!(
            !deleted[i + 1..]
                .iter()
                .any(|d| d.len() > q.len() && d.starts_with(q)),
            "{q:?} deleted before a descendant"
        );
    }
}
