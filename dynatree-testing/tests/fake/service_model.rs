//! The service model (`dynatree_testing::service`): latencies drawn to the published figures,
//! partitions that throttle as the service's do, and the same figures on every run. All on
//! paused time: minutes of service time in milliseconds.

use std::error::Error as _;
use std::time::Duration;

use dynatree::storage::{Condition, Key, Storage, TransactAction};
use dynatree::{ErrorKind, RetryPolicy, Tree};
use dynatree_testing::service::{ServiceModel, ServiceTable, ThrottlingReason};
use dynatree_testing::{FakeTable, Op};
use futures::{StreamExt, TryStreamExt};
use tokio::time::Instant;

#[derive(serde::Serialize)]
struct V {
    v: u32,
}

async fn table(model: ServiceModel) -> ServiceTable {
    let table = ServiceTable::new(FakeTable::new(), model);
    Tree::new(table.clone()).create_table().await.unwrap();
    table.reset_stats();
    table
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// 2,000 sequential PutItems: their median and 99th percentile within 10% of the figures the
/// model was fitted to; a two-item transaction's median about three times a PutItem's.
#[tokio::test(start_paused = true)]
async fn latencies_follow_the_published_percentiles() {
    let table = table(ServiceModel::published().seed(11)).await;
    let mut puts = Vec::new();
    for i in 0..2000 {
        let started = Instant::now();
        table
            .put_item(
                Key::new(format!("h{i}"), "r").into_item(),
                Condition::Always,
            )
            .await
            .unwrap();
        puts.push(started.elapsed());
    }
    puts.sort();
    let (p50, p99) = (percentile(&puts, 0.5), percentile(&puts, 0.99));
    assert!((p50.as_secs_f64() / 0.00755 - 1.0).abs() < 0.1, "{p50:?}");
    assert!((p99.as_secs_f64() / 0.0162 - 1.0).abs() < 0.1, "{p99:?}");
    let mut txs = Vec::new();
    for i in 0..500 {
        let started = Instant::now();
        let put = |r: &str| TransactAction::Put {
            item: Key::new(format!("t{i}"), r).into_item(),
            condition: Condition::Always,
        };
        table
            .transact_write(vec![put("a"), put("b")])
            .await
            .unwrap();
        txs.push(started.elapsed());
    }
    txs.sort();
    let ratio = percentile(&txs, 0.5).as_secs_f64() / p50.as_secs_f64();
    assert!(
        (2.8..3.6).contains(&ratio),
        "transaction / PutItem at p50: {ratio}"
    );
    let stats = table.stats();
    assert_eq!(stats.requests_of(Op::PutItem), 2000);
    assert_eq!(stats.requests_of(Op::TransactWriteItems), 500);
    assert_eq!(stats.throttled(), 0);
}

/// The same seed and workload give the same times to the nanosecond; another seed does not.
#[tokio::test(start_paused = true)]
async fn a_seed_gives_the_same_figures_every_run() {
    async fn run(seed: u64) -> (Duration, Duration) {
        let table = table(ServiceModel::published().seed(seed)).await;
        let tree = Tree::new(table.clone());
        let started = Instant::now();
        futures::stream::iter(0..200)
            .for_each_concurrent(16, |i| {
                let tree = tree.clone();
                async move {
                    let path = ["a".to_owned(), format!("n{}", i % 50)];
                    tree.put(path, &V { v: i }).await.unwrap();
                }
            })
            .await;
        (started.elapsed(), table.stats().busy())
    }
    let first = run(5).await;
    assert_eq!(first, run(5).await);
    assert_ne!(first, run(6).await);
}

/// One partition takes at most its write units a second: 64 writers putting into one
/// partition key are throttled with the hot-partition reason, and what got through stays
/// under 1,000 units a second (plus the burst of one second); the same writers spread over
/// many keys are never throttled.
#[tokio::test(start_paused = true)]
async fn a_hot_partition_throttles_at_its_write_units() {
    let table = table(ServiceModel::published()).await;
    let started = Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    futures::stream::iter(0..64)
        .for_each_concurrent(64, |w| {
            let (table, done) = (&table, &done);
            async move {
                let mut i = 0;
                while started.elapsed() < Duration::from_secs(10) {
                    let item = Key::new("hot", format!("{w}-{i}")).into_item();
                    match table.put_item(item, Condition::Always).await {
                        Ok(()) => {
                            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            i += 1;
                        }
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::Throttled);
                            let reason = e.source().unwrap().downcast_ref::<ThrottlingReason>();
                            let reason = reason.unwrap();
                            assert_eq!(reason.reason(), "TableWriteKeyRangeThroughputExceeded");
                            assert_eq!(reason.resource(), "hot");
                        }
                    }
                }
            }
        })
        .await;
    let secs = started.elapsed().as_secs_f64();
    let written = done.load(std::sync::atomic::Ordering::Relaxed);
    // Every write that succeeded is in the table, every throttled one is not.
    assert_eq!(table.fake().rows().len() as u64, written);
    let per_second = written as f64 / secs;
    assert!(
        per_second <= 1000.0 + 1000.0 / secs + 64.0 / secs,
        "{per_second}/s"
    );
    assert!(
        per_second > 900.0,
        "{per_second}/s: the partition is not kept busy"
    );
    let stats = table.stats();
    assert!(stats.throttled_for("TableWriteKeyRangeThroughputExceeded") > 0);

    // Spread over 64 partition keys: 64 writers at ~130 puts a second each, never throttled.
    let spread = self::table(ServiceModel::published()).await;
    let started = Instant::now();
    futures::stream::iter(0..64)
        .for_each_concurrent(64, |w| {
            let spread = &spread;
            async move {
                for i in 0..200 {
                    let item = Key::new(format!("k{w}"), format!("{i}")).into_item();
                    spread.put_item(item, Condition::Always).await.unwrap();
                }
            }
        })
        .await;
    assert_eq!(spread.stats().throttled(), 0);
    let per_second = 64.0 * 200.0 / started.elapsed().as_secs_f64();
    assert!(per_second > 5000.0, "{per_second}/s");
}

/// Reads have their own units: a partition serves 3,000 strongly consistent reads of small
/// items a second, and a throttled read names the read reason.
#[tokio::test(start_paused = true)]
async fn a_hot_partition_throttles_reads_at_its_read_units() {
    let table = table(ServiceModel::published().partition_read_units(100.0)).await;
    table
        .put_item(Key::new("hot", "r").into_item(), Condition::Always)
        .await
        .unwrap();
    let hot = Key::new("hot", "r");
    let mut throttled = 0;
    let started = Instant::now();
    let mut reads = 0;
    while started.elapsed() < Duration::from_secs(5) {
        let got = futures::future::join_all((0..32).map(|_| table.get_item(&hot, true))).await;
        for g in got {
            match g {
                Ok(Some(_)) => reads += 1,
                Ok(None) => panic!("the item is there"),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Throttled);
                    throttled += 1;
                }
            }
        }
    }
    let per_second = f64::from(reads) / started.elapsed().as_secs_f64();
    assert!(
        per_second <= 100.0 + 100.0 / 5.0 + 32.0 / 5.0,
        "{per_second}/s"
    );
    assert!(throttled > 0);
    assert_eq!(
        table
            .stats()
            .throttled_for("TableReadKeyRangeThroughputExceeded"),
        throttled
    );
}

/// A table-wide limit throttles writes spread over many partitions, with the table reason.
#[tokio::test(start_paused = true)]
async fn a_table_limit_throttles_with_the_table_reason() {
    let model = ServiceModel::published().table_write_units(50.0);
    let table = table(model).await;
    let mut reasons = std::collections::BTreeSet::new();
    // 300 s of burst at 50 units a second: 15,000 units first, then 50 a second.
    for round in 0..600 {
        let got = futures::future::join_all((0..64).map(|w| {
            let item = Key::new(format!("k{round}-{w}"), "r").into_item();
            table.put_item(item, Condition::Always)
        }))
        .await;
        for e in got.into_iter().filter_map(Result::err) {
            let r = e
                .source()
                .unwrap()
                .downcast_ref::<ThrottlingReason>()
                .unwrap();
            reasons.insert((r.reason(), r.resource().to_owned()));
        }
    }
    assert_eq!(
        reasons.into_iter().collect::<Vec<_>>(),
        [(
            "TableWriteProvisionedThroughputExceeded",
            "table".to_owned()
        )]
    );
}

/// A tree on the model retries a throttled request as on the service and succeeds once the
/// partition refills: 500 puts into one directory from 64 callers all land.
#[tokio::test(start_paused = true)]
async fn a_tree_on_a_throttling_partition_retries_until_its_puts_land() {
    let table = table(ServiceModel::published().partition_write_units(200.0)).await;
    let tree = Tree::builder(table.clone())
        .retry_policy(RetryPolicy::new(
            100,
            Duration::from_millis(20),
            Duration::from_secs(2),
        ))
        .build()
        .unwrap();
    tree.put(["dir"], &V { v: 0 }).await.unwrap();
    futures::stream::iter(0..500)
        .for_each_concurrent(64, |i| {
            let tree = tree.clone();
            async move {
                let path = ["dir".to_owned(), format!("n{i}")];
                tree.put(path, &V { v: i }).await.unwrap();
            }
        })
        .await;
    let names: Vec<String> = tree.list(["dir"]).try_collect().await.unwrap();
    assert_eq!(names.len(), 500);
    assert!(table.stats().throttled() > 0);
}

/// A subtree operation sends the requests of a phase concurrently (its reads, and its
/// transactions on the lanes of its intent): on a tree of 1,001 objects (a root, 10 children,
/// 99 grandchildren each) a move, a copy and a subtree deletion each take at most a fifth of
/// the summed latencies of their requests, and send the requests they send one at a time,
/// plus the lanes' (one transaction writes them, one deletes them with the intent record
/// instead of a DeleteItem) and the unlocks level by level.
#[tokio::test(start_paused = true)]
async fn subtree_operations_send_their_requests_concurrently() {
    let table = table(ServiceModel::published().seed(3)).await;
    let tree = Tree::new(table.clone());
    tree.put(["r"], &V { v: 0 }).await.unwrap();
    let mut paths = Vec::new();
    for c in 0..10 {
        paths.push(vec!["r".to_owned(), format!("c{c}")]);
        for g in 0..99 {
            paths.push(vec!["r".to_owned(), format!("c{c}"), format!("g{g:02}")]);
        }
    }
    // Children first (their puts create the grandchildren's parents' rows).
    for depth in [2, 3] {
        futures::stream::iter(paths.iter().filter(|p| p.len() == depth))
            .for_each_concurrent(16, |p| {
                let tree = tree.clone();
                async move { tree.put(p.clone(), &V { v: 1 }).await.unwrap() }
            })
            .await;
    }
    let ops = [
        Op::GetItem,
        Op::Query,
        Op::BatchGetItem,
        Op::TransactWriteItems,
        Op::UpdateItem,
        Op::PutItem,
        Op::DeleteItem,
        Op::Scan,
    ];
    // (elapsed, busy, requests by kind) of one operation.
    async fn measure<F: std::future::Future>(
        table: &ServiceTable,
        ops: &[Op],
        f: F,
    ) -> (Duration, Duration, Vec<u64>) {
        table.reset_stats();
        let started = Instant::now();
        f.await;
        let elapsed = started.elapsed();
        let stats = table.stats();
        let counts = ops.iter().map(|&op| stats.requests_of(op)).collect();
        (elapsed, stats.busy(), counts)
    }
    let moved = measure(&table, &ops, async {
        tree.move_subtree(["r"], ["m"]).await.unwrap();
    })
    .await;
    let copied = measure(&table, &ops, async {
        tree.copy_subtree(["m"], ["c"]).await.unwrap();
    })
    .await;
    let deleted = measure(&table, &ops, async {
        assert_eq!(tree.delete_subtree(["c"]).await.unwrap(), 1001);
    })
    .await;
    for (name, (elapsed, busy, counts)) in
        [("move", &moved), ("copy", &copied), ("delete", &deleted)]
    {
        eprintln!("{name}: {elapsed:?} elapsed, {busy:?} busy, {ops:?} = {counts:?}");
    }
    // What each sends, by kind.
    // [GetItem, Query, BatchGetItem, TransactWriteItems, UpdateItem, PutItem, DeleteItem, Scan]
    assert_eq!(moved.2, [3, 1002, 47, 105, 0, 4, 0, 1], "move");
    assert_eq!(copied.2, [3, 1002, 58, 115, 0, 3, 0, 0], "copy");
    assert_eq!(deleted.2, [1, 1002, 12, 37, 0, 2, 0, 0], "delete");
    for (name, (elapsed, busy, _), times) in [
        ("move", moved, 5),
        ("copy", copied, 5),
        ("delete", deleted, 5),
    ] {
        assert!(
            elapsed * times <= busy,
            "{name}: {elapsed:?} elapsed for {busy:?} of requests"
        );
    }
}
