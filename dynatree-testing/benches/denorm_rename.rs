//! Renaming a source with 10,000 denormalized copies below it: one forum, 100 threads
//! of 100 posts, every post copying the forum's name (`#[dynatree(from = Forum::name)]`).
//! Propagated inline (the rename's put copies before it returns) and from the table's stream
//! (`Propagation::Stream`: the put only stamps its version; the stream's records are applied
//! with `Tree::apply_changes`, on DynamoDB Local by the polling `StreamConsumer`).
//!
//! Requests by operation and write units from the metered `FakeTable` (deterministic); seconds
//! on the fake and on DynamoDB Local. Run:
//! `cargo bench -p dynatree-testing --bench denorm_rename`.
//!
//! Knobs: `DYNATREE_DENORM_POSTS=<n>` posts in all (default 10000, 100 per thread);
//! `DYNATREE_DENORM_LOCAL=0` skips DynamoDB Local.

use std::time::Instant;

use dynatree::changes::{StreamConsumer, latest_stream_arn};
use dynatree::storage::Storage;
use dynatree::{Hierarchical, Tree, denorm::Propagation};
use dynatree_testing::{DynamoDbLocal, FakeTable};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}", parent = Forum)]
struct Thread {
    forum: String,
    thread: String,
    title: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}", parent = Thread)]
struct Post {
    forum: String,
    thread: String,
    post: String,
    body: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

const PER_THREAD: usize = 100;

fn forum(name: &str) -> Forum {
    Forum {
        forum: "f".into(),
        name: name.into(),
    }
}

fn posts_wanted() -> usize {
    match std::env::var("DYNATREE_DENORM_POSTS") {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("DYNATREE_DENORM_POSTS must be a number of posts, not {v:?}");
            std::process::exit(2)
        }),
        Err(_) => 10_000,
    }
}

/// A tree that propagates `propagation`-wise, inline up to any size (no background work).
fn tree<S: Storage + 'static>(storage: S, propagation: Propagation) -> Tree {
    Tree::builder(storage)
        .denormalized::<Post>()
        .propagation(propagation)
        .inline_limit(usize::MAX)
        .build()
        .unwrap()
}

/// The forum ("Rust"), its threads and `n` posts (copies filled), with batch writes: inline, so
/// that the copies are filled as they are written.
async fn populate(tree: &Tree, n: usize) {
    tree.repo::<Forum>().put(&forum("Rust")).await.unwrap();
    let threads: Vec<Thread> = (0..n.div_ceil(PER_THREAD))
        .map(|t| Thread {
            forum: "f".into(),
            thread: format!("t{t:03}"),
            title: format!("thread {t}"),
        })
        .collect();
    tree.repo::<Thread>().put_all(&threads).await.unwrap();
    let posts: Vec<Post> = (0..n)
        .map(|i| Post {
            forum: "f".into(),
            thread: format!("t{:03}", i / PER_THREAD),
            post: format!("p{:03}", i % PER_THREAD),
            body: "x".repeat(100),
            forum_name: None,
        })
        .collect();
    for chunk in posts.chunks(1_000) {
        tree.repo::<Post>().put_all(chunk).await.unwrap();
    }
}

/// Every post holds `name`: read back with BatchGetItem (not measured).
async fn check(tree: &Tree, n: usize, name: &str) {
    let keys: Vec<PostKey> = (0..n)
        .map(|i| PostKey {
            forum: "f".into(),
            thread: format!("t{:03}", i / PER_THREAD),
            post: format!("p{:03}", i % PER_THREAD),
        })
        .collect();
    let mut stale = 0;
    for chunk in keys.chunks(1_000) {
        for p in tree.repo::<Post>().get_many(chunk).await.unwrap() {
            let p = p.expect("every post exists");
            if p.forum_name.as_deref() != Some(name) {
                stale += 1;
            }
        }
    }
    assert_eq!(stale, 0, "{stale} of {n} posts do not hold {name:?}");
}

fn by_operation(m: &dynatree_testing::Metrics) -> String {
    m.requests_by_operation()
        .iter()
        .map(|(op, n)| format!("{n} {op}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn row(backend: &str, way: &str, step: &str, m: Option<&dynatree_testing::Metrics>, secs: f64) {
    match m {
        Some(m) => println!(
            "| {backend} | {way} | {step} | {} | {} | {} | {} | {secs:.2} |",
            m.total_requests(),
            by_operation(m),
            m.write_units(),
            m.read_units()
        ),
        None => println!("| {backend} | {way} | {step} | (as above) | | | | {secs:.2} |"),
    }
}

async fn fake(n: usize) {
    // Inline: the rename's put walks the forum's subtree and writes every copy.
    let table = FakeTable::new();
    let t = tree(table.clone(), Propagation::Inline);
    t.create_table().await.unwrap();
    populate(&t, n).await;
    table.reset_metrics();
    let start = Instant::now();
    t.repo::<Forum>().put(&forum("Rust 2")).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    row(
        "FakeTable",
        "inline",
        "rename (put + propagation)",
        Some(&table.metrics()),
        secs,
    );
    check(&t, n, "Rust 2").await;

    // Stream: populated inline, then the stream enabled (it holds only what follows).
    let table = FakeTable::new();
    let t = tree(table.clone(), Propagation::Inline);
    t.create_table().await.unwrap();
    populate(&t, n).await;
    table.enable_stream().await.unwrap();
    let t = tree(table.clone(), Propagation::Stream);
    let mut reader = table.stream_reader();
    table.reset_metrics();
    let start = Instant::now();
    t.repo::<Forum>().put(&forum("Rust 2")).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    row(
        "FakeTable",
        "stream",
        "rename (put)",
        Some(&table.metrics()),
        secs,
    );
    // What the processor does with the rename's record, then with the records of its own
    // copies (they come back on the stream); batches of 1000 like GetRecords.
    let mut delivered = 0;
    for round in ["the rename's records", "the copies' own records"] {
        // Round 1 applies what the rename wrote; round 2 what round 1 wrote, to the end.
        let until = match round {
            "the rename's records" => table.stream_records().len(),
            _ => usize::MAX,
        };
        table.reset_metrics();
        let start = Instant::now();
        let mut records = 0;
        while delivered < until {
            let batch = reader.next_batch(1_000.min(until - delivered));
            if batch.is_empty() {
                break;
            }
            delivered += batch.len();
            records += batch.len();
            t.apply_changes(&batch).await.into_result().unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        row(
            "FakeTable",
            "stream",
            &format!("apply_changes: {round} ({records})"),
            Some(&table.metrics()),
            secs,
        );
    }
    assert!(reader.next_batch(1).is_empty(), "records left unapplied");
    check(&t, n, "Rust 2").await;
}

fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    use aws_sdk_dynamodbstreams::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_dynamodbstreams::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "dynatree", "dynatree", None, None, "bench",
        ))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

async fn local(n: usize) {
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "DynamoDB Local could not start: {e}\n(set DYNATREE_DENORM_LOCAL=0 to skip it)"
            );
            std::process::exit(1);
        }
    };
    // Inline.
    let t = tree(local.fresh_table(), Propagation::Inline);
    t.create_table().await.unwrap();
    let start = Instant::now();
    populate(&t, n).await;
    eprintln!(
        "(wrote {n} posts to DynamoDB Local in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    t.repo::<Forum>().put(&forum("Rust 2")).await.unwrap();
    row(
        "DynamoDB Local",
        "inline",
        "rename (put + propagation)",
        None,
        start.elapsed().as_secs_f64(),
    );
    check(&t, n, "Rust 2").await;

    // Stream: populated inline, then the stream enabled; the consumer reads it.
    let table = local.fresh_table();
    let t = tree(table.clone(), Propagation::Inline);
    t.create_table().await.unwrap();
    let start = Instant::now();
    populate(&t, n).await;
    eprintln!(
        "(wrote {n} posts to DynamoDB Local in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    table.enable_stream().await.unwrap();
    let t = tree(table.clone(), Propagation::Stream);
    let arn = latest_stream_arn(&table).await.unwrap();
    let mut consumer =
        StreamConsumer::new(t.clone(), streams_client(&local.endpoint()), arn, "bench").unwrap();
    let start = Instant::now();
    t.repo::<Forum>().put(&forum("Rust 2")).await.unwrap();
    row(
        "DynamoDB Local",
        "stream",
        "rename (put)",
        None,
        start.elapsed().as_secs_f64(),
    );
    let start = Instant::now();
    let (mut applied, mut polls) = (0, 0);
    loop {
        let report = consumer.poll_once().await.unwrap();
        polls += 1;
        let k = report.into_result().unwrap();
        applied += k;
        if k == 0 {
            break;
        }
    }
    row(
        "DynamoDB Local",
        "stream",
        &format!("StreamConsumer: {polls} polls, {applied} changes"),
        None,
        start.elapsed().as_secs_f64(),
    );
    check(&t, n, "Rust 2").await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = posts_wanted();
    println!("Renaming a forum above {n} posts that copy its name ({PER_THREAD} per thread).\n");
    println!("| backend | way | step | requests | by operation | WCU | RCU | seconds |");
    println!("|---|---|---|---|---|---|---|---|");
    fake(n).await;
    if std::env::var("DYNATREE_DENORM_LOCAL").is_ok_and(|v| v == "0") {
        eprintln!("(DynamoDB Local skipped: DYNATREE_DENORM_LOCAL=0)");
        return;
    }
    local(n).await;
}
