//! How late a watch hands a change: the time from a put's acknowledgement to the change
//! coming out of `Tree::watch`, p50 and p99, on the fake table (its stream split in 4 shards)
//! and on DynamoDB Local (DynamoDB Streams' API), with the watch's default wait between empty
//! reads (250 ms) and a short one (25 ms); and the stream requests the watch sent per 1,000
//! changes. A writer puts one object every 5 ms while the watcher runs beside it on the same
//! runtime. Run: `cargo bench -p dynatree-testing --bench watch_lag`
//! (`DYNATREE_WATCH_WRITES` sets the number of puts per run, 1,000 by default).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dynatree::storage::{Op, Request, Response, Storage};
use dynatree::{DynamoDbTable, Hierarchical, Result, Tree};
use dynatree_testing::{DynamoDbLocal, FakeTable};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
    target: String,
}

fn writes() -> usize {
    std::env::var("DYNATREE_WATCH_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}

/// Counts the stream requests that pass through it.
struct Counting<S> {
    inner: S,
    stream_requests: Arc<AtomicU64>,
}

impl<S: Storage> Storage for Counting<S> {
    async fn send(&self, request: Request) -> Result<Response> {
        if matches!(request.op(), Op::DescribeStream | Op::GetRecords) {
            self.stream_requests.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.send(request).await
    }
}

struct Run {
    p50: Duration,
    p99: Duration,
    max: Duration,
    requests_per_1000: f64,
}

async fn run<S: Storage + 'static>(
    table: S,
    split: Option<&FakeTable>,
    idle: Duration,
    n: usize,
) -> Run {
    let counter = Arc::new(AtomicU64::new(0));
    let tree = Tree::new(Counting {
        inner: table,
        stream_requests: counter.clone(),
    });
    tree.create_table().await.expect("a table");
    tree.storage().enable_stream().await.expect("a stream");
    if let Some(fake) = split {
        // Four shards, as a table with some traffic has.
        fake.split_stream(4);
    }
    let mut watch = tree.watch::<Link>(["Accounts"]).idle(idle);
    watch.start().await.expect("a position");
    counter.store(0, Ordering::Relaxed);
    let acked: Arc<std::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
    let writer = {
        let (tree, acked) = (tree.clone(), acked.clone());
        tokio::spawn(async move {
            let links = tree.repo::<Link>();
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            for i in 0..n {
                tick.tick().await;
                let short = format!("l{i:05}");
                links
                    .put(&Link {
                        account: format!("a{}", i % 16),
                        short: short.clone(),
                        target: "https://example.com".into(),
                    })
                    .await
                    .expect("a put");
                acked.lock().expect("lock").insert(short, Instant::now());
            }
        })
    };
    let mut lags = Vec::with_capacity(n);
    while lags.len() < n {
        let change = watch
            .next()
            .await
            .expect("a watch does not end")
            .expect("a change");
        let seen = Instant::now();
        let short = change.value().expect("a value").short.clone();
        // The put's acknowledgement may be recorded just after the change is seen.
        let at = loop {
            if let Some(at) = acked.lock().expect("lock").get(&short).copied() {
                break at;
            }
            tokio::task::yield_now().await;
        };
        lags.push(seen.saturating_duration_since(at));
    }
    writer.await.expect("the writer");
    lags.sort();
    let pick = |q: f64| lags[((lags.len() as f64 * q) as usize).min(lags.len() - 1)];
    Run {
        p50: pick(0.50),
        p99: pick(0.99),
        max: *lags.last().expect("lags"),
        requests_per_1000: counter.load(Ordering::Relaxed) as f64 * 1000.0 / n as f64,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn report(backend: &str, idle: Duration, r: &Run) {
    println!(
        "| {backend} | {} | {} | {} | {} | {:.0} |",
        idle.as_millis(),
        ms(r.p50),
        ms(r.p99),
        ms(r.max),
        r.requests_per_1000
    );
}

fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    use aws_sdk_dynamodbstreams::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_dynamodbstreams::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "bench"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

fn main() {
    let n = writes();
    let local = DynamoDbLocal::start().unwrap_or_else(|e| panic!("DynamoDB Local: {e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    println!("{n} puts, one every 5 ms; lag from each put's acknowledgement to its change");
    println!();
    println!(
        "| backend | idle ms | p50 ms | p99 ms | max ms | stream requests per 1,000 changes |"
    );
    println!("|---|---|---|---|---|---|");
    rt.block_on(async {
        for idle in [Duration::from_millis(250), Duration::from_millis(25)] {
            let fake = FakeTable::new();
            let r = run(fake.clone(), Some(&fake), idle, n).await;
            report("fake (4 shards)", idle, &r);
            let table: DynamoDbTable = local
                .fresh_table()
                .with_streams(streams_client(&local.endpoint()));
            let r = run(table, None, idle, n).await;
            report("DynamoDB Local", idle, &r);
        }
    });
}
