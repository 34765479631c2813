//! Static against type-erased storage: the default `Tree` (a `SharedStorage`, one boxed future
//! per backend call) against `Tree<FakeTable>` from `TreeBuilder::build_static` (no boxing), on
//! the in-memory fake, where dynatree's own CPU time is all there is to measure.
//!
//! Each round times every operation on both trees, one after the other, alternating which goes
//! first; the table shows the median and the best of the rounds after an untimed warm-up round
//! (the best round is the one least disturbed by other processes). Run:
//! `cargo bench -p dynatree-testing --bench dispatch`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use dynatree::Tree;
use dynatree::storage::Storage;
use dynatree_testing::FakeTable;
use fixtures::V;
use futures::TryStreamExt;

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

/// Operations per timed cell.
const OPS: usize = 20_000;
/// Timed rounds (after one untimed warm-up round).
const ROUNDS: usize = 6;
/// Children of the listed directory.
const LISTED: usize = 100;
/// Objects that the overwrite and get cells cycle through.
const LEAVES: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    PutOverwrite,
    PutNew,
    Get,
    List,
}

const OPS_TIMED: [(Op, &str); 4] = [
    (Op::PutOverwrite, "put, overwrite"),
    (Op::PutNew, "put, new name"),
    (Op::Get, "get"),
    (Op::List, "list of 100 names"),
];

/// The names the cells use, formatted once so that no cell times `format!`.
struct Names {
    leaves: Vec<String>,
    fresh: Vec<Vec<String>>,
}

impl Names {
    fn new() -> Self {
        Self {
            leaves: (0..LEAVES).map(|i| format!("l{i:02}")).collect(),
            // One set of new names per round, warm-up included.
            fresh: (0..=ROUNDS)
                .map(|r| (0..OPS).map(|i| format!("r{r}-{i:05}")).collect())
                .collect(),
        }
    }
}

async fn prepare<S: Storage + 'static>(tree: &Tree<S>, names: &Names) {
    tree.create_table().await.unwrap();
    for (i, leaf) in names.leaves.iter().enumerate() {
        tree.put(["objects", leaf.as_str()], &V { v: i as u32 })
            .await
            .unwrap();
    }
    for i in 0..LISTED {
        tree.put(["listed", &format!("c{i:03}")], &V { v: i as u32 })
            .await
            .unwrap();
    }
    tree.put(["fresh", "first"], &V { v: 0 }).await.unwrap();
}

/// Runs one cell: `OPS` operations of `op`; returns the elapsed time.
async fn cell<S: Storage + 'static>(
    tree: &Tree<S>,
    op: Op,
    names: &Names,
    round: usize,
) -> Duration {
    let start = Instant::now();
    match op {
        Op::PutOverwrite => {
            for i in 0..OPS {
                let leaf = names.leaves[i % LEAVES].as_str();
                tree.put(["objects", leaf], &V { v: i as u32 })
                    .await
                    .unwrap();
            }
        }
        Op::PutNew => {
            for name in &names.fresh[round] {
                tree.put(["fresh", name.as_str()], &V { v: 1 })
                    .await
                    .unwrap();
            }
        }
        Op::Get => {
            for i in 0..OPS {
                let leaf = names.leaves[i % LEAVES].as_str();
                let got: Option<V> = tree.get(["objects", leaf]).await.unwrap();
                black_box(got);
            }
        }
        Op::List => {
            for _ in 0..OPS {
                let listed: Vec<String> = tree.list(["listed"]).try_collect().await.unwrap();
                assert_eq!(listed.len(), LISTED);
                black_box(listed);
            }
        }
    }
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    let n = times.len();
    if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2
    }
}

fn micros_per_op(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6 / OPS as f64
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let names = Names::new();
    let erased: Tree = Tree::new(FakeTable::new());
    let fixed: Tree<FakeTable> = Tree::builder(FakeTable::new()).build_static().unwrap();
    prepare(&erased, &names).await;
    prepare(&fixed, &names).await;

    let mut erased_times: Vec<Vec<Duration>> = vec![Vec::new(); OPS_TIMED.len()];
    let mut fixed_times: Vec<Vec<Duration>> = vec![Vec::new(); OPS_TIMED.len()];
    // Round 0 warms up (allocator, caches of known listing rows) and is not recorded.
    for round in 0..=ROUNDS {
        for (k, (op, _)) in OPS_TIMED.iter().enumerate() {
            let (e, f) = if round % 2 == 0 {
                let e = cell(&erased, *op, &names, round).await;
                let f = cell(&fixed, *op, &names, round).await;
                (e, f)
            } else {
                let f = cell(&fixed, *op, &names, round).await;
                let e = cell(&erased, *op, &names, round).await;
                (e, f)
            };
            if round > 0 {
                erased_times[k].push(e);
                fixed_times[k].push(f);
            }
        }
    }

    println!(
        "{OPS} operations per cell, {ROUNDS} interleaved rounds after a warm-up round; median \
         and best round; one current-thread runtime.\n"
    );
    println!(
        "| operation | erased `Tree` µs/op | static `Tree<FakeTable>` µs/op | static / erased time | \
         erased best | static best | static / erased, best |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (k, (_, label)) in OPS_TIMED.iter().enumerate() {
        let best = |t: &[Duration]| t.iter().min().copied().unwrap_or_default();
        let (e, f) = (
            median(erased_times[k].clone()),
            median(fixed_times[k].clone()),
        );
        let (eb, fb) = (best(&erased_times[k]), best(&fixed_times[k]));
        println!(
            "| {label} | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} | {:.3} |",
            micros_per_op(e),
            micros_per_op(f),
            f.as_secs_f64() / e.as_secs_f64(),
            micros_per_op(eb),
            micros_per_op(fb),
            fb.as_secs_f64() / eb.as_secs_f64(),
        );
    }
}
