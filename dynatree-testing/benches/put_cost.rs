//! What a put costs: dynatree's transactional write path against the Go library dynamotree's
//! algorithm (every put writes all d+1 rows with BatchWriteItem), at depths 1, 4 and 20.
//!
//! Request and capacity counts come from the metered `FakeTable` (deterministic); timings from
//! the fake and from DynamoDB Local (sequential puts, one client). Run:
//! `cargo bench -p dynatree-testing --bench put_cost`.

use std::time::Instant;

use dynatree::storage::{Storage, WriteRequest};
use dynatree::{RetryPolicy, Tree, storage};
use dynatree_testing::{DynamoDbLocal, FakeTable};
use fixtures::V;

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

const DEPTHS: [usize; 3] = [1, 4, 20];

fn path(depth: usize, leaf: usize) -> Vec<String> {
    let mut p: Vec<String> = (0..depth.saturating_sub(1))
        .map(|i| format!("c{i}"))
        .collect();
    p.push(format!("leaf{leaf}"));
    p
}

/// The rows dynamotree's Put writes for `path`: every listing row, then the object row.
fn go_rows(path: &[String], v: u32) -> Vec<WriteRequest> {
    let mut attrs = dynatree::storage::Item::new();
    attrs.insert("v", dynatree::storage::Value::N(v.to_string()));
    fixtures::go_rows(path, &attrs)
}

async fn go_put<S: Storage + 'static>(s: &S, path: &[String], v: u32) {
    storage::write_all(s, go_rows(path, v), &RetryPolicy::default())
        .await
        .expect("go put");
}

async fn counts() {
    println!("## Cost of one put of a small object whose ancestors exist (metered FakeTable)\n");
    println!(
        "| depth | dynatree requests | dynatree WCU | dynatree writes to `¦` | Go requests | Go WCU | Go writes to `¦` |"
    );
    println!("|---|---|---|---|---|---|---|");
    for depth in DEPTHS {
        let fake = FakeTable::new();
        let tree = Tree::new(fake.clone());
        tree.create_table().await.unwrap();
        tree.put(path(depth, 0), &V { v: 0 }).await.unwrap();
        fake.reset_metrics();
        tree.put(path(depth, 0), &V { v: 1 }).await.unwrap();
        let ours = fake.metrics();

        let go = FakeTable::new();
        Tree::new(go.clone()).create_table().await.unwrap();
        go_put(&go, &path(depth, 0), 0).await;
        go.reset_metrics();
        go_put(&go, &path(depth, 0), 1).await;
        let theirs = go.metrics();
        println!(
            "| {depth} | {} | {} | {} | {} | {} | {} |",
            ours.total_requests(),
            ours.write_units(),
            ours.writes_to("¦"),
            theirs.total_requests(),
            theirs.write_units(),
            theirs.writes_to("¦"),
        );
    }
    println!();
}

async fn timed<S: Storage + Clone + 'static>(label: &str, make: impl Fn() -> S, n: usize) {
    println!(
        "## Sequential puts per second, {label}\n\n{n} puts per cell to 50 leaves in turn under \
         existing ancestors (the first 50 create names, the rest replace objects), after an \
         untimed warm-up of the same size.\n"
    );
    // Warm-up (JIT of DynamoDB Local, connection pool, allocator).
    let warm = Tree::new(make());
    warm.create_table().await.unwrap();
    for i in 0..n {
        warm.put(path(4, i % 50), &V { v: 1 }).await.unwrap();
        go_put(warm.storage(), &path(4, i % 50), 1).await;
    }
    println!("| depth | dynatree puts/s | Go algorithm puts/s |");
    println!("|---|---|---|");
    for depth in DEPTHS {
        let tree = Tree::new(make());
        tree.create_table().await.unwrap();
        tree.put(path(depth, 0), &V { v: 0 }).await.unwrap();
        // Updates of existing objects: the steady state of most applications.
        let start = Instant::now();
        for i in 0..n {
            tree.put(path(depth, i % 50), &V { v: 1 }).await.unwrap();
        }
        let ours = n as f64 / start.elapsed().as_secs_f64();

        let go = make();
        Tree::new(go.clone()).create_table().await.unwrap();
        let start = Instant::now();
        for i in 0..n {
            go_put(&go, &path(depth, i % 50), 1).await;
        }
        let theirs = n as f64 / start.elapsed().as_secs_f64();
        println!("| {depth} | {ours:.0} | {theirs:.0} |");
    }
    println!();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    counts().await;
    timed("in-memory FakeTable", FakeTable::new, 20_000).await;
    match DynamoDbLocal::start() {
        Ok(local) => timed("DynamoDB Local 3.3.1", || local.fresh_table(), 300).await,
        Err(e) => {
            eprintln!("DynamoDB Local could not start: {e}");
            std::process::exit(1);
        }
    }
}
