//! Move, copy and delete of a subtree on DynamoDB Local, with one request of a phase at a time,
//! with 16 reads in flight (`TreeBuilder::subtree_reads_in_flight`) and with 16 reads and 16
//! transactions in flight (`TreeBuilder::subtree_transactions_in_flight`, the default), side
//! by side in one run.
//!
//! The tree: a root `src` with 10 children, each with `(N - 1) / 10 - 1` children (about N
//! nodes, each a small object), written with 32 puts in flight (not timed). On a fresh table
//! for each setting: `copy_subtree(src, copy)`, `move_subtree(src, moved)`,
//! `delete_subtree(moved)`, each timed on this machine's clock, with the requests the
//! operation sent (the same with reads in flight: only their order changes; with
//! transactions in flight, plus the intent's lanes and the unlocks level by level). Run:
//! `cargo bench -p dynatree-testing --bench subtree`.
//!
//! Knob: `DYNATREE_SUBTREE_NODES=<n>` (default 10000). DynamoDB Local is one JVM on this
//! machine's cores, so the speed-up here is bounded by its CPU, not by the service's latency
//! (the same operations under the model of the service are in the `service_model` bench).

use std::time::Instant;

use dynatree::Tree;
use dynatree_testing::{DynamoDbLocal, Faulty};
use futures::StreamExt;

#[derive(serde::Serialize, serde::Deserialize, Clone)]
struct V {
    v: u32,
}

async fn build(tree: &Tree, nodes: usize) -> usize {
    let per = (nodes.max(21) - 1) / 10 - 1;
    tree.put(["src"], &V { v: 0 }).await.expect("root");
    let paths: Vec<Vec<String>> = (0..10)
        .flat_map(|c| {
            std::iter::once(vec!["src".to_owned(), format!("c{c}")]).chain(
                (0..per).map(move |g| vec!["src".to_owned(), format!("c{c}"), format!("g{g}")]),
            )
        })
        .collect();
    // Each child before its children: a level at a time.
    for level in [2, 3] {
        futures::stream::iter(paths.iter().filter(|p| p.len() == level))
            .for_each_concurrent(32, |p| async move {
                tree.put(p.clone(), &V { v: 1 }).await.expect("put");
            })
            .await;
    }
    1 + 10 * (per + 1)
}

/// Each operation's seconds and requests, on a fresh table, with `reads` reads and
/// `transactions` transactions of a phase in flight.
async fn run(
    local: &DynamoDbLocal,
    nodes: usize,
    reads: usize,
    transactions: usize,
) -> (usize, Vec<(&'static str, f64, u64)>) {
    let counting = Faulty::new(local.fresh_table());
    let tree = Tree::builder(counting.clone())
        .subtree_reads_in_flight(reads)
        .subtree_transactions_in_flight(transactions)
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    let count = build(&tree, nodes).await;
    let mut out = Vec::new();
    for name in ["copy_subtree", "move_subtree", "delete_subtree"] {
        let before = counting.requests();
        let started = Instant::now();
        match name {
            "copy_subtree" => drop(tree.copy_subtree(["src"], ["copy"]).await.expect("copy")),
            "move_subtree" => drop(tree.move_subtree(["src"], ["moved"]).await.expect("move")),
            _ => drop(tree.delete_subtree(["moved"]).await.expect("delete")),
        }
        out.push((
            name,
            started.elapsed().as_secs_f64(),
            counting.requests() - before,
        ));
    }
    (count, out)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let nodes = std::env::var("DYNATREE_SUBTREE_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000usize);
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("DynamoDB Local could not start: {e}");
            std::process::exit(1);
        }
    };
    let (count, one) = run(&local, nodes, 1, 1).await;
    let (_, reads) = run(&local, nodes, 16, 1).await;
    let (_, both) = run(&local, nodes, 16, 16).await;
    println!("DynamoDB Local, {count} nodes:\n");
    println!(
        "| operation | one at a time: s | 16 reads: s | 16 + 16 (default): s | speed-up of the default | requests |"
    );
    println!("|---|---|---|---|---|---|");
    for (((name, s1, r1), (_, sr, rr)), (_, sb, rb)) in one.into_iter().zip(reads).zip(both) {
        println!(
            "| {name} | {s1:.1} | {sr:.1} | {sb:.1} | {:.1}x | {r1} / {rr} / {rb} |",
            s1 / sb
        );
    }
}
