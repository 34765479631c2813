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
//! Last, a move of one object that one link points at (`LinkPolicy::Rewrite`) on a table of
//! other rows, without and with the link index (`TreeBuilder::link_index(2)`): the median of 5
//! moves of each, and their requests.
//!
//! Knobs: `DYNATREE_SUBTREE_NODES=<n>` (default 10000; 0 skips the subtree operations),
//! `DYNATREE_SUBTREE_LINK_ROWS=<n>` (the other rows of the link table, default 20000; 0 skips
//! it). DynamoDB Local is one JVM on this machine's cores, so the speed-up here is bounded by
//! its CPU, not by the service's latency (the same operations under the model of the service
//! are in the `service_model` bench).

use std::time::Instant;

use dynatree::transfer::Record;
use dynatree::{Path, Tree};
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

/// On a fresh table of `rows` other objects (`Other/o{i}`, imported) plus
/// `Accounts/1/Files/f` and a link `Shortcuts/s` to it: 5 moves of the object's directory
/// (each to a new name, rewriting the link), by a tree with a link index of depth 2 or
/// without one. The median seconds of a move, and the requests of one.
async fn links_into(local: &DynamoDbLocal, rows: usize, indexed: bool) -> (f64, u64) {
    let counting = Faulty::new(local.fresh_table());
    let mut builder = Tree::builder(counting.clone());
    if indexed {
        builder = builder.link_index(2);
    }
    let tree = builder.build().expect("tree");
    tree.create_table().await.expect("table");
    let filler = (0..rows).map(|i| {
        Ok(Record::Object {
            path: Path::new(["Other", &format!("o{i}")]).expect("path"),
            item: dynatree::storage::Item::new(),
            expires: None,
        })
    });
    tree.import(futures::stream::iter(filler))
        .run()
        .await
        .expect("filler");
    tree.put(["Accounts", "1", "F0", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put_link(["Shortcuts", "s"], ["Accounts", "1", "F0", "f"])
        .await
        .expect("link");
    let mut times = Vec::new();
    let mut requests = 0;
    for i in 0..5 {
        let before = counting.requests();
        let started = Instant::now();
        let report = tree
            .move_subtree_with(
                ["Accounts", "1", &format!("F{i}")],
                ["Accounts", "1", &format!("F{}", i + 1)],
                dynatree::ops::LinkPolicy::Rewrite,
            )
            .await
            .expect("move");
        times.push(started.elapsed().as_secs_f64());
        assert_eq!(report.links.len(), 1, "the link is rewritten");
        requests = counting.requests() - before;
    }
    times.sort_by(f64::total_cmp);
    (times[2], requests)
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let nodes = knob("DYNATREE_SUBTREE_NODES", 10_000);
    let link_rows = knob("DYNATREE_SUBTREE_LINK_ROWS", 20_000);
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("DynamoDB Local could not start: {e}");
            std::process::exit(1);
        }
    };
    if link_rows > 0 {
        let (s0, r0) = links_into(&local, link_rows, false).await;
        let (s1, r1) = links_into(&local, link_rows, true).await;
        println!(
            "DynamoDB Local, a move rewriting one link on a table of {link_rows} other objects \
             (median of 5 moves):\n"
        );
        println!("| link index | s | requests |");
        println!("|---|---|---|");
        println!("| without | {s0:.3} | {r0} |");
        println!("| with (depth 2) | {s1:.3} | {r1} |");
        println!("\n{:.1}x faster with the index\n", s0 / s1);
    }
    if nodes == 0 {
        return;
    }
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
