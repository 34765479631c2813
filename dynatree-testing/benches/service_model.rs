//! Every user operation under the model of the service (`dynatree_testing::service`), against
//! the Go library dynamotree's request plan and the raw floor, on virtual time: the figures are
//! the service's latencies and limits, not this machine's CPU, and the same on every run.
//!
//! Ways: dynatree (`Tree`, default), dynatree with `fenced_puts`, the Go plan (every put one
//! BatchWriteItem of all d+1 rows, a get one GetItem, a list one Query) and the raw floor (one
//! PutItem per put into the parent's partition, one GetItem, one Query). Objects: N (default
//! 1,000) small ones at depth 1 (`{a}-{n}`), 4 (`Accounts/{a}/Links/{n}`) and 20 (16 more
//! components before `Links`), over 50 accounts. Per way, depth and number in flight (1, 16,
//! 64), on a fresh table: the N new names (the first 50 are each the first under a new
//! account), the same N again (overwrites), the N again from a new handle (a process that has
//! not seen them), gets, and one listing per parent. Reported: p50 and p99 of each operation's
//! latency, write and read units per operation, throttled requests.
//!
//! Then the wide directory: 64 and 256 writers adding new names to one directory for 10 s of
//! service time: names a second (one partition's ceiling), and the same directory sharded 2,
//! 4, 8 and 16 ways (`TreeBuilder::sharded`). Then subtree operations of 1,000
//! and 10,000 nodes (a root with 10 children of 100, or of 1,000): `move_subtree`,
//! `copy_subtree`, `delete_subtree`, in service time, with one request of a phase at a time,
//! with 16 reads in flight (`TreeBuilder::subtree_reads_in_flight`) and with 16 reads and 16
//! transactions in flight (`TreeBuilder::subtree_transactions_in_flight`, the default), side
//! by side. Last, a move that rewrites one link into its source on a table of 10,000 and
//! 1,000,000 other rows, with and without the link index.
//!
//! Run: `cargo bench -p dynatree-testing --bench service_model`. Knobs:
//! `DYNATREE_MODEL_OBJECTS` (default 1000), `DYNATREE_MODEL_SEED` (default 1),
//! `DYNATREE_MODEL_SUBTREES` (largest subtree, default 10000), `DYNATREE_MODEL_LINK_ROWS`
//! (largest table the link lookups run on, default 1000000).
// Fenced puts are deprecated; what they still do is measured and tested until they go.
#![allow(deprecated)]

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use std::time::Duration;

use dynatree::storage::{Condition, Key, Query, Storage, Value, write_all};
use dynatree::{RetryPolicy, Tree};
use dynatree_testing::FakeTable;
use dynatree_testing::service::{ServiceModel, ServiceTable};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

const DEPTHS: [usize; 3] = [1, 4, 20];
const IN_FLIGHT: [usize; 3] = [1, 16, 64];
const ACCOUNTS: usize = 50;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Link {
    url: String,
    v: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    Dynatree,
    Fenced,
    Go,
    Raw,
}

const WAYS: [Way; 4] = [Way::Dynatree, Way::Fenced, Way::Go, Way::Raw];

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn model() -> ServiceModel {
    ServiceModel::published().seed(knob("DYNATREE_MODEL_SEED", 1))
}

/// The parent of object `i` at `depth`, and its name.
fn parent_and_name(depth: usize, i: usize) -> (Vec<String>, String) {
    let a = i % ACCOUNTS;
    match depth {
        1 => (Vec::new(), format!("{a}-{i}")),
        _ => {
            let mut p = vec!["Accounts".to_owned(), a.to_string()];
            p.extend((0..depth - 4).map(|k| format!("p{k}")));
            p.push("Links".to_owned());
            (p, format!("n{i}"))
        }
    }
}

fn full_path(depth: usize, i: usize) -> Vec<String> {
    let (mut p, n) = parent_and_name(depth, i);
    p.push(n);
    p
}

fn attrs(i: usize, v: u32) -> dynatree::storage::Item {
    let mut item = dynatree::storage::Item::new();
    item.insert("url", Value::S(format!("https://example.com/{i}")));
    item.insert("v", Value::N(v.to_string()));
    item
}

fn raw_hash(parent: &[String]) -> String {
    format!("/{}", parent.join("/"))
}

fn go_listing_hash(parent: &[String]) -> String {
    let mut h = String::from("¦");
    for c in parent {
        h.push_str(c);
        h.push('¦');
    }
    h
}

/// Patient retries: a throttled request waits as an SDK client would.
fn patient() -> RetryPolicy {
    RetryPolicy::new(50, Duration::from_millis(25), Duration::from_secs(2))
}

fn tree_on(table: &ServiceTable, way: Way) -> Tree {
    Tree::builder(table.clone())
        .fenced_puts(way == Way::Fenced)
        .retry_policy(patient())
        .build()
        .expect("tree")
}

struct Ctx {
    way: Way,
    table: ServiceTable,
    tree: Tree,
}

impl Ctx {
    async fn new(way: Way) -> Ctx {
        let table = ServiceTable::new(FakeTable::new(), model());
        let tree = tree_on(&table, way);
        tree.create_table().await.expect("table");
        tree.verify().await.expect("verify");
        Ctx { way, table, tree }
    }

    /// dynatree with the directories `Accounts/{a}/Links` sharded `shards` ways.
    async fn sharded(shards: u32) -> Ctx {
        let table = ServiceTable::new(FakeTable::new(), model());
        let tree = Tree::builder(table.clone())
            .sharded("Accounts/{a}/Links", shards)
            .retry_policy(patient())
            .build()
            .expect("tree");
        tree.create_table().await.expect("table");
        tree.verify().await.expect("verify");
        Ctx {
            way: Way::Dynatree,
            table,
            tree,
        }
    }

    async fn put(&self, tree: &Tree, depth: usize, i: usize, v: u32) {
        let path = full_path(depth, i);
        match self.way {
            Way::Dynatree | Way::Fenced => {
                let l = Link {
                    url: format!("https://example.com/{i}"),
                    v,
                };
                tree.put(path, &l).await.expect("put");
            }
            Way::Go => {
                let rows = fixtures::go_rows(&path, &attrs(i, v));
                write_all(&self.table, rows, &patient())
                    .await
                    .expect("batch");
            }
            Way::Raw => {
                let (parent, name) = parent_and_name(depth, i);
                let mut item = Key::new(raw_hash(&parent), name).into_item();
                for (name, value) in attrs(i, v).iter() {
                    item.insert(name, value.clone());
                }
                put_retrying(&self.table, item).await;
            }
        }
    }

    async fn get(&self, depth: usize, i: usize) {
        match self.way {
            Way::Dynatree | Way::Fenced => {
                let got: Option<Link> = self.tree.get(full_path(depth, i)).await.expect("get");
                assert!(got.is_some());
            }
            Way::Go => {
                let path = full_path(depth, i);
                let h = go_listing_hash(&path);
                let key = Key::new(h.trim_end_matches('¦'), "¦");
                assert!(
                    self.table
                        .get_item(&key, false)
                        .await
                        .expect("get")
                        .is_some()
                );
            }
            Way::Raw => {
                let (parent, name) = parent_and_name(depth, i);
                let key = Key::new(raw_hash(&parent), name);
                assert!(
                    self.table
                        .get_item(&key, false)
                        .await
                        .expect("get")
                        .is_some()
                );
            }
        }
    }

    async fn list(&self, parent: &[String]) -> usize {
        match self.way {
            Way::Dynatree | Way::Fenced => {
                let names: Vec<String> = self
                    .tree
                    .list(parent.to_vec())
                    .try_collect()
                    .await
                    .expect("list");
                names.len()
            }
            Way::Go | Way::Raw => {
                let hash = if self.way == Way::Go {
                    go_listing_hash(parent)
                } else {
                    raw_hash(parent)
                };
                let q = Query::new(hash);
                let mut n = 0;
                let mut start = None;
                loop {
                    let page = self
                        .table
                        .query_page(&q, start.take())
                        .await
                        .expect("query");
                    n += page.items.len();
                    match page.last_key {
                        Some(k) => start = Some(k),
                        None => return n,
                    }
                }
            }
        }
    }
}

async fn put_retrying(table: &ServiceTable, item: dynatree::storage::Item) {
    let mut wait = Duration::from_millis(25);
    loop {
        match table.put_item(item.clone(), Condition::Always).await {
            Ok(()) => return,
            Err(e) if e.kind() == dynatree::ErrorKind::Throttled => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => panic!("put: {e}"),
        }
    }
}

/// Latencies of a phase, and the units per operation it consumed.
#[derive(Debug, Clone, Default)]
struct Phase {
    latencies: Vec<Duration>,
    wcu: f64,
    rcu: f64,
    throttled: u64,
}

impl Phase {
    fn pct(&self, p: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort();
        if l.is_empty() {
            return 0.0;
        }
        l[((l.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0
    }
}

/// Runs `op(i)` for every `i` in `items`, `in_flight` at a time, timing each.
async fn timed<F, Fut>(ctx: &Ctx, items: Vec<usize>, in_flight: usize, op: F) -> Phase
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let before = ctx.table.fake().metrics();
    let throttled = ctx.table.stats().throttled();
    let n = items.len().max(1) as f64;
    let latencies: Vec<Duration> = futures::stream::iter(items)
        .map(|i| {
            let fut = op(i);
            async move {
                let started = Instant::now();
                fut.await;
                started.elapsed()
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let after = ctx.table.fake().metrics();
    Phase {
        latencies,
        wcu: (after.write_units() - before.write_units()) / n,
        rcu: (after.read_units() - before.read_units()) / n,
        throttled: ctx.table.stats().throttled() - throttled,
    }
}

/// The phases of one way at one depth and number in flight.
async fn run(
    way: Way,
    depth: usize,
    in_flight: usize,
    objects: usize,
) -> Vec<(&'static str, Phase)> {
    let ctx = Ctx::new(way).await;
    let all: Vec<usize> = (0..objects).collect();
    let mut out = Vec::new();
    // The first put under each account (a new parent), one at a time in order.
    let tree = ctx.tree.clone();
    let firsts: Vec<usize> = (0..ACCOUNTS.min(objects)).collect();
    let first = timed(&ctx, firsts.clone(), in_flight, |i| {
        ctx.put(&tree, depth, i, 0)
    })
    .await;
    let rest: Vec<usize> = (ACCOUNTS.min(objects)..objects).collect();
    let new = timed(&ctx, rest, in_flight, |i| ctx.put(&tree, depth, i, 0)).await;
    let over = timed(&ctx, all.clone(), in_flight, |i| {
        ctx.put(&tree, depth, i, 1)
    })
    .await;
    let cold_tree = tree_on(&ctx.table, way);
    cold_tree.verify().await.expect("verify");
    let cold = timed(&ctx, all.clone(), in_flight, |i| {
        ctx.put(&cold_tree, depth, i, 2)
    })
    .await;
    let get = timed(&ctx, all, in_flight, |i| ctx.get(depth, i)).await;
    let parents: Vec<Vec<String>> = {
        let mut p: Vec<Vec<String>> = (0..ACCOUNTS.min(objects))
            .map(|i| parent_and_name(depth, i).0)
            .collect();
        p.dedup();
        p
    };
    let idx: Vec<usize> = (0..parents.len()).collect();
    let list = timed(&ctx, idx, in_flight, |i| {
        let p = parents[i].clone();
        let ctx = &ctx;
        async move {
            assert!(ctx.list(&p).await > 0);
        }
    })
    .await;
    out.push(("first put under a new parent", first));
    out.push(("put of a new name", new));
    out.push(("overwrite (same process)", over));
    out.push(("overwrite (a process that has not seen it)", cold));
    out.push(("get", get));
    out.push(("list one parent", list));
    out
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
        .block_on(f)
}

fn way_name(w: Way) -> &'static str {
    match w {
        Way::Dynatree => "dynatree",
        Way::Fenced => "fenced",
        Way::Go => "Go plan",
        Way::Raw => "raw floor",
    }
}

/// Names a second 64 or 256 writers add to one directory in `secs` of service time, and the
/// throttled requests; with `shards`, the directory sharded that many ways (dynatree only).
async fn wide(way: Way, shards: Option<u32>, writers: usize, secs: u64) -> (f64, u64) {
    let ctx = match shards {
        None => Ctx::new(way).await,
        Some(n) => Ctx::sharded(n).await,
    };
    let tree = ctx.tree.clone();
    // The directory exists first (depth 4: `Accounts/0/Links`).
    ctx.put(&tree, 4, 0, 0).await;
    let started = Instant::now();
    let stop = started + Duration::from_secs(secs);
    let done = std::sync::atomic::AtomicUsize::new(0);
    futures::stream::iter(0..writers)
        .for_each_concurrent(writers, |w| {
            let (ctx, tree, done) = (&ctx, &tree, &done);
            async move {
                let mut k = 0;
                while Instant::now() < stop {
                    // Object numbers of account 0 only: one directory.
                    let i = ACCOUNTS * (1 + w + writers * k);
                    ctx.put(tree, 4, i, 0).await;
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    k += 1;
                }
            }
        })
        .await;
    let n = done.load(std::sync::atomic::Ordering::Relaxed) as f64;
    (
        n / started.elapsed().as_secs_f64(),
        ctx.table.stats().throttled(),
    )
}

/// A subtree operation's service time (s), requests and write units.
type Cost = (&'static str, f64, u64, f64);

/// A root with 10 children, each with `(n - 1) / 10 - 1` children (about n nodes, each an
/// object), moved, copied and deleted by a tree keeping `reads` reads and `transactions`
/// transactions of a phase in flight; returns the node count and each operation's cost.
async fn subtree(nodes: usize, reads: usize, transactions: usize) -> (usize, Vec<Cost>) {
    let ctx = Ctx::new(Way::Dynatree).await;
    let tree = &Tree::builder(ctx.table.clone())
        .retry_policy(patient())
        .subtree_reads_in_flight(reads)
        .subtree_transactions_in_flight(transactions)
        .build()
        .expect("tree");
    let per = (nodes - 1) / 10 - 1;
    let v = Link {
        url: "u".into(),
        v: 0,
    };
    tree.put(["src"], &v).await.expect("root");
    for c in 0..10 {
        tree.put(["src".to_owned(), format!("c{c}")], &v)
            .await
            .expect("child");
        futures::stream::iter(0..per)
            .for_each_concurrent(64, |g| {
                let v = v.clone();
                async move {
                    let path = ["src".to_owned(), format!("c{c}"), format!("g{g}")];
                    tree.put(path, &v).await.expect("grandchild");
                }
            })
            .await;
    }
    let mut out = Vec::new();
    let mut op = async |name: &'static str, f: std::pin::Pin<Box<dyn Future<Output = ()> + '_>>| {
        let before = ctx.table.stats().requests();
        let units = ctx.table.fake().metrics().write_units();
        let started = Instant::now();
        f.await;
        out.push((
            name,
            started.elapsed().as_secs_f64(),
            ctx.table.stats().requests() - before,
            ctx.table.fake().metrics().write_units() - units,
        ));
    };
    op(
        "copy_subtree",
        Box::pin(async {
            tree.copy_subtree(["src"], ["copy"]).await.expect("copy");
        }),
    )
    .await;
    op(
        "move_subtree",
        Box::pin(async {
            tree.move_subtree(["src"], ["moved"]).await.expect("move");
        }),
    )
    .await;
    op(
        "delete_subtree",
        Box::pin(async {
            tree.delete_subtree(["moved"]).await.expect("delete");
        }),
    )
    .await;
    (1 + 10 * (per + 1), out)
}

/// A table of `rows` rows (objects `Other/o{i}` with their listing rows, written straight into
/// the fake table) plus `Accounts/1/Files/f` and a link `Shortcuts/s` to it; then, under the
/// model, the move of `Accounts/1/Files` with `LinkPolicy::Rewrite`, by a tree with a link
/// index of depth 2 or without one. Returns the move's service time, requests and read units.
async fn links_into(rows: usize, indexed: bool) -> (f64, u64, f64) {
    let table = ServiceTable::new(FakeTable::new(), model());
    let mut builder = Tree::builder(table.clone()).retry_policy(patient());
    if indexed {
        builder = builder.link_index(2);
    }
    let tree = builder.build().expect("tree");
    tree.create_table().await.expect("table");
    let sc = dynatree::storage::DEFAULT_RESERVED;
    let fake = table.fake();
    fake.put_item(
        Key::new(sc.to_string(), "Other").into_item(),
        Condition::Always,
    )
    .await
    .expect("row");
    for i in 0..rows / 2 {
        fake.put_item(
            Key::new(format!("{sc}Other{sc}"), format!("o{i}")).into_item(),
            Condition::Always,
        )
        .await
        .expect("row");
        let mut object = Key::new(format!("{sc}Other{sc}o{i}"), sc.to_string()).into_item();
        object.insert("url", Value::S(format!("https://example.com/{i}")));
        fake.put_item(object, Condition::Always).await.expect("row");
    }
    let v = Link {
        url: "u".into(),
        v: 0,
    };
    tree.put(["Accounts", "1", "Files", "f"], &v)
        .await
        .expect("put");
    tree.put_link(["Shortcuts", "s"], ["Accounts", "1", "Files", "f"])
        .await
        .expect("link");
    let before = table.stats().requests();
    let units = fake.metrics().read_units();
    let started = Instant::now();
    let report = tree
        .move_subtree_with(
            ["Accounts", "1", "Files"],
            ["Accounts", "1", "Old"],
            dynatree::ops::LinkPolicy::Rewrite,
        )
        .await
        .expect("move");
    assert_eq!(report.links.len(), 1);
    (
        started.elapsed().as_secs_f64(),
        table.stats().requests() - before,
        fake.metrics().read_units() - units,
    )
}

fn main() {
    let objects = knob("DYNATREE_MODEL_OBJECTS", 1000) as usize;
    println!(
        "Under the service model (published latencies, 1,000 WCU / 3,000 RCU per partition), \
         {objects} objects over {ACCOUNTS} accounts, seed {}.\n",
        knob("DYNATREE_MODEL_SEED", 1)
    );
    println!(
        "| operation | depth | in flight | way | p50 ms | p99 ms | WCU/op | RCU/op | throttled |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for depth in DEPTHS {
        for in_flight in IN_FLIGHT {
            let runs: Vec<(Way, Vec<(&str, Phase)>)> = WAYS
                .iter()
                .map(|&w| (w, block_on(run(w, depth, in_flight, objects))))
                .collect();
            for p in 0..runs[0].1.len() {
                for (w, phases) in &runs {
                    let (name, ph) = &phases[p];
                    println!(
                        "| {name} | {depth} | {in_flight} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {} |",
                        way_name(*w),
                        ph.pct(0.5),
                        ph.pct(0.99),
                        ph.wcu,
                        ph.rcu,
                        ph.throttled
                    );
                }
            }
        }
    }
    println!("\nOne directory, new names for 10 s of service time:\n");
    println!("| writers | way | names/s | throttled requests |");
    println!("|---|---|---|---|");
    for writers in [64, 256] {
        for w in WAYS {
            let (rate, throttled) = block_on(wide(w, None, writers, 10));
            println!("| {writers} | {} | {rate:.0} | {throttled} |", way_name(w));
        }
        for shards in [2, 4, 8, 16] {
            let (rate, throttled) = block_on(wide(Way::Dynatree, Some(shards), writers, 10));
            println!("| {writers} | dynatree, {shards} shards | {rate:.0} | {throttled} |");
        }
    }
    println!(
        "\nSubtree operations (dynatree), service time, requests and write units: one request \
         of a phase at a time; 16 reads in flight, transactions one at a time; 16 reads and 16 \
         transactions in flight (the default):\n"
    );
    println!(
        "| nodes | operation | one at a time: s | 16 reads: s | 16 + 16 (default): s | speed-up of the default | requests | WCU |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let largest = knob("DYNATREE_MODEL_SUBTREES", 10_000) as usize;
    for nodes in [1_000, 10_000].into_iter().filter(|n| *n <= largest) {
        let (count, one) = block_on(subtree(nodes, 1, 1));
        let (_, reads) = block_on(subtree(nodes, 16, 1));
        let (_, both) = block_on(subtree(nodes, 16, 16));
        for (((name, s1, r1, w1), (_, sr, rr, wr)), (_, sb, rb, wb)) in
            one.into_iter().zip(reads).zip(both)
        {
            println!(
                "| {count} | {name} | {s1:.1} | {sr:.1} | {sb:.1} | {:.1}x | {r1} / {rr} / {rb} | {w1:.0} / {wr:.0} / {wb:.0} |",
                s1 / sb
            );
        }
    }
    println!(
        "\nA move of one object that one link points at, with `LinkPolicy::Rewrite`, on a table \
         of N other rows: without and with the link index (`TreeBuilder::link_index(2)`):\n"
    );
    println!(
        "| rows | without: s | with: s | speed-up | requests without / with | read units without / with |"
    );
    println!("|---|---|---|---|---|---|");
    let largest = knob("DYNATREE_MODEL_LINK_ROWS", 1_000_000) as usize;
    for rows in [10_000, 1_000_000].into_iter().filter(|n| *n <= largest) {
        let (s0, r0, u0) = block_on(links_into(rows, false));
        let (s1, r1, u1) = block_on(links_into(rows, true));
        println!(
            "| {rows} | {s0:.3} | {s1:.3} | {:.0}x | {r0} / {r1} | {u0:.1} / {u1:.1} |",
            s0 / s1
        );
    }
}
