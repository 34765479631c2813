//! The put, get and list comparison of `BENCHMARKS.md`, reproduced in one run on DynamoDB Local: dynatree (`Tree` through
//! `DynamoDbTable`; by default, and with `TreeBuilder::fenced_puts`), the Go library dynamotree's algorithm (every put writes all d+1 rows with one
//! BatchWriteItem, a get is one GetItem of the object row, a list one Query of the listing rows)
//! and the raw-SDK minimum (one PutItem per put, one GetItem per get, one Query per list, objects
//! stored at `Key = parent`, `Child = name`), side by side, at depths 1, 4 and 20.
//!
//! The objects: N (default 2,000) small objects (`{url, v}`, about 60 bytes) at
//! `Accounts/{a}/Links/{n}` over A (default 50) accounts; depth 20 pads the path with 16
//! components between the account and `Links` (`Accounts/{a}/p0/…/p15/Links/{n}`), depth 1 is
//! one component `{a}-{n}` under the root. Object i goes to account `i mod A`, so the first A
//! puts of a phase are the first under their account.
//!
//! Every round gives each implementation, at each depth, a fresh table (and dynatree a fresh
//! `Tree`, shared by all in-flight operations) and runs, in this order: put of N new names
//! sequentially, the same N names again (overwrite), N other new names with 16 in flight (under
//! accounts that now exist), those again with 16 in flight (overwrite), get of the first N
//! sequentially, of the second N with 16 in flight, and list: every parent's names (4,000 names
//! by default; at depth 1 one listing of the root, else one per account), `DYNATREE_PUT_LIST_PASSES`
//! times. Implementations run in a rotating order (round r uses the r-th of the 6 orders), so
//! that noise from other processes falls on all of them; the table reports medians of the
//! rounds and the ratios of the medians. Process CPU (client: this process, `/proc/self/stat`;
//! server: the DynamoDB Local JVM, `/proc/<pid>/stat`; utime + stime at 100 ticks per second)
//! is reported per operation.
//!
//! The price per put by DynamoDB's published rules (1 write unit per KB, twice that in
//! transactions, condition checks included) comes from the metered `FakeTable` running the same
//! sequential puts (deterministic).
//!
//! Then the HTTP client: dynatree's overwrite puts (depth 4) with 16, 64 and 256 in flight, and
//! the raw SDK's for comparison, with the TCP connections to DynamoDB Local counted from
//! `/proc/net/tcp` (sampled every 5 ms; a connection closed since leaves a TIME_WAIT entry, so
//! every connection opened is seen), and whether a `DynamoDbTable` built from an application's
//! client shares its connection pool. Run:
//! `cargo bench -p dynatree-testing --bench put_compare`.
//!
//! Knobs: `DYNATREE_PUT_OBJECTS=<n>` objects per phase (default 2000);
//! `DYNATREE_PUT_ACCOUNTS=<n>` (default 50); `DYNATREE_PUT_ROUNDS=<n>` (default 5);
//! `DYNATREE_PUT_LIST_PASSES=<n>` listings of every parent per round (default 3);
//! `DYNATREE_PUT_HTTP_PUTS=<n>` puts per in-flight level in the HTTP section (default 4000);
//! `DYNATREE_PUT_LOCAL=0` prints only the fake's prices.
// Fenced puts are deprecated; what they still do is measured and tested until they go.
#![allow(deprecated)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest as SdkWrite};
use dynatree::storage::{Condition, Key, Storage, WriteRequest};
use dynatree::{DynamoDbTable, RetryPolicy, Tree, storage, storage::Item, storage::Value};
use dynatree_testing::{DynamoDbLocal, FakeTable, client_for};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

const DEPTHS: [usize; 3] = [1, 4, 20];
const SC: &str = "¦";
const IN_FLIGHT: usize = 16;
const HTTP_IN_FLIGHT: [usize; 3] = [16, 64, 256];
/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux).
const TICKS: f64 = 100.0;

/// The small object every implementation stores.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Link {
    url: String,
    v: u32,
}

fn link(account: usize, name: &str, v: u32) -> Link {
    Link {
        url: format!("https://example.com/{account}/{name}"),
        v,
    }
}

struct Knobs {
    objects: usize,
    accounts: usize,
    rounds: usize,
    list_passes: usize,
    http_puts: usize,
    local: bool,
}

fn knob(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("{name} must be a whole number, not {v:?}");
            std::process::exit(2)
        }),
        Err(_) => default,
    }
}

impl Knobs {
    fn from_env() -> Self {
        Self {
            objects: knob("DYNATREE_PUT_OBJECTS", 2_000).max(1),
            accounts: knob("DYNATREE_PUT_ACCOUNTS", 50).max(1),
            rounds: knob("DYNATREE_PUT_ROUNDS", 5).max(1),
            list_passes: knob("DYNATREE_PUT_LIST_PASSES", 3).max(1),
            http_puts: knob("DYNATREE_PUT_HTTP_PUTS", 4_000).max(1),
            local: knob("DYNATREE_PUT_LOCAL", 1) != 0,
        }
    }
}

// ---- paths ----

/// One object of a phase's set: its account and name.
#[derive(Clone)]
struct Obj {
    account: usize,
    name: String,
}

/// The `n` objects of set `set` (0: the sequential phases, 1: the concurrent ones).
fn objects(set: usize, n: usize, accounts: usize) -> Vec<Obj> {
    (0..n)
        .map(|i| Obj {
            account: i % accounts,
            name: format!("n{set}-{:05}", i / accounts),
        })
        .collect()
}

/// The parent of an object: the components before its name.
fn parent(depth: usize, account: usize) -> Vec<String> {
    let a = format!("a{account:03}");
    match depth {
        0 | 1 => vec![],
        2 => vec!["Accounts".into()],
        3 => vec!["Accounts".into(), a],
        d => {
            let mut p = vec!["Accounts".to_owned(), a];
            p.extend((0..d - 4).map(|k| format!("p{k}")));
            p.push("Links".into());
            p
        }
    }
}

/// The last component of an object's path (depths 1 and 2 carry the account in it).
fn leaf(depth: usize, o: &Obj) -> String {
    if depth <= 2 {
        format!("a{:03}-{}", o.account, o.name)
    } else {
        o.name.clone()
    }
}

fn full_path(depth: usize, o: &Obj) -> Vec<String> {
    let mut p = parent(depth, o.account);
    p.push(leaf(depth, o));
    p
}

/// The distinct parents of the objects at a depth, with how many names each holds.
fn parents(depth: usize, objs: &[Obj]) -> BTreeMap<Vec<String>, usize> {
    let mut out = BTreeMap::new();
    for o in objs {
        *out.entry(parent(depth, o.account)).or_insert(0) += 1;
    }
    out
}

/// The Go library's keys: `¦k0¦…¦` for the listing of a parent, `¦k0¦…¦kn` for an object.
fn go_listing_hash(parent: &[String]) -> String {
    let mut h = String::from(SC);
    for c in parent {
        h.push_str(c);
        h.push_str(SC);
    }
    h
}

fn go_object_hash(path: &[String]) -> String {
    let h = go_listing_hash(path);
    h[..h.len() - SC.len()].to_owned()
}

/// The raw minimum's partition key of a parent's children.
fn raw_hash(parent: &[String]) -> String {
    format!("/{}", parent.join("/"))
}

/// The rows dynamotree's Put writes: every listing row, then the object row.
fn go_items(path: &[String], l: &Link) -> Vec<Item> {
    let mut out: Vec<Item> = (0..path.len())
        .map(|i| Key::new(go_listing_hash(&path[..i]), path[i].clone()).into_item())
        .collect();
    let mut obj = Key::new(go_object_hash(path), SC).into_item();
    obj.insert("url", Value::S(l.url.clone()));
    obj.insert("v", Value::N(l.v.to_string()));
    out.push(obj);
    out
}

fn raw_item(depth: usize, o: &Obj, l: &Link) -> Item {
    let mut item = Key::new(raw_hash(&parent(depth, o.account)), leaf(depth, o)).into_item();
    item.insert("url", Value::S(l.url.clone()));
    item.insert("v", Value::N(l.v.to_string()));
    item
}

fn to_sdk(item: Item) -> HashMap<String, AttributeValue> {
    item.into_iter()
        .map(|(k, v)| {
            let av = match v {
                Value::S(s) => AttributeValue::S(s),
                Value::N(n) => AttributeValue::N(n),
                other => panic!("unexpected value {other:?}"),
            };
            (k, av)
        })
        .collect()
}

fn sdk_key(hash: String, range: String) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("Key".to_owned(), AttributeValue::S(hash)),
        ("Child".to_owned(), AttributeValue::S(range)),
    ])
}

fn link_from_sdk(item: &HashMap<String, AttributeValue>) -> Link {
    let url = item.get("url").and_then(|v| v.as_s().ok()).expect("url");
    let v = item
        .get("v")
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .expect("v");
    Link {
        url: url.clone(),
        v,
    }
}

// ---- the three implementations on DynamoDB Local ----

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Dynatree,
    /// dynatree with `TreeBuilder::fenced_puts`.
    Fenced,
    Go,
    Raw,
    /// The raw SDK sending dynatree's conditional overwrite (the HTTP section only).
    RawConditional,
}

const KINDS: [Kind; 4] = [Kind::Dynatree, Kind::Fenced, Kind::Go, Kind::Raw];

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Dynatree => "dynatree",
            Kind::Fenced => "dynatree fenced",
            Kind::Go => "Go algorithm",
            Kind::Raw => "raw SDK",
            Kind::RawConditional => "raw SDK, dynatree's condition",
        }
    }
}

enum Imp {
    Dynatree(Tree),
    Go(Client, String),
    Raw(Client, String),
    /// The raw SDK's PutItem with the condition dynatree's overwrite sends (the object is
    /// there, no fence, no hold), without the consumed capacity as dynatree sends it when no
    /// subscriber records its spans: the request the guarantees need, without dynatree.
    RawConditional(Client, String),
}

impl Imp {
    async fn put(&self, depth: usize, o: &Obj, v: u32) {
        let l = link(o.account, &o.name, v);
        match self {
            Imp::Dynatree(tree) => tree
                .put(full_path(depth, o), &l)
                .await
                .expect("dynatree put"),
            Imp::Go(c, table) => {
                let reqs: Vec<SdkWrite> = go_items(&full_path(depth, o), &l)
                    .into_iter()
                    .map(|item| {
                        SdkWrite::builder()
                            .put_request(
                                PutRequest::builder()
                                    .set_item(Some(to_sdk(item)))
                                    .build()
                                    .expect("put request"),
                            )
                            .build()
                    })
                    .collect();
                let mut pending = HashMap::from([(table.clone(), reqs)]);
                loop {
                    let out = c
                        .batch_write_item()
                        .set_request_items(Some(pending))
                        .send()
                        .await
                        .expect("BatchWriteItem");
                    match out.unprocessed_items {
                        Some(u) if !u.is_empty() => pending = u,
                        _ => break,
                    }
                }
            }
            Imp::Raw(c, table) => {
                c.put_item()
                    .table_name(table)
                    .set_item(Some(to_sdk(raw_item(depth, o, &l))))
                    .send()
                    .await
                    .expect("PutItem");
            }
            Imp::RawConditional(c, table) => {
                c.put_item()
                    .table_name(table)
                    .set_item(Some(to_sdk(raw_item(depth, o, &l))))
                    .condition_expression(
                        "attribute_exists(#k) AND attribute_not_exists(#f) AND attribute_not_exists(#h)",
                    )
                    .expression_attribute_names("#k", "Key")
                    .expression_attribute_names("#f", format!("{SC}fence"))
                    .expression_attribute_names("#h", format!("{SC}held"))
                    .send()
                    .await
                    .expect("conditional PutItem");
            }
        }
    }

    async fn get(&self, depth: usize, o: &Obj) -> Link {
        match self {
            Imp::Dynatree(tree) => tree
                .get::<Link>(full_path(depth, o))
                .await
                .expect("dynatree get")
                .expect("object"),
            Imp::Go(c, table) | Imp::Raw(c, table) | Imp::RawConditional(c, table) => {
                let key = if matches!(self, Imp::Go(..)) {
                    sdk_key(go_object_hash(&full_path(depth, o)), SC.to_owned())
                } else {
                    sdk_key(raw_hash(&parent(depth, o.account)), leaf(depth, o))
                };
                let out = c
                    .get_item()
                    .table_name(table)
                    .set_key(Some(key))
                    .send()
                    .await
                    .expect("GetItem");
                link_from_sdk(out.item().expect("object"))
            }
        }
    }

    /// The names under `parent`, counted.
    async fn list(&self, parent: &[String]) -> usize {
        match self {
            Imp::Dynatree(tree) => tree
                .list(parent)
                .try_fold(0usize, |n, _| async move { Ok(n + 1) })
                .await
                .expect("dynatree list"),
            Imp::Go(c, table) | Imp::Raw(c, table) | Imp::RawConditional(c, table) => {
                let (hash, project) = if matches!(self, Imp::Go(..)) {
                    (go_listing_hash(parent), false)
                } else {
                    (raw_hash(parent), true)
                };
                let mut n = 0;
                let mut start = None;
                loop {
                    let mut q = c
                        .query()
                        .table_name(table)
                        .key_condition_expression("#k = :h")
                        .expression_attribute_names("#k", "Key")
                        .expression_attribute_values(":h", AttributeValue::S(hash.clone()))
                        .set_exclusive_start_key(start);
                    if project {
                        q = q
                            .projection_expression("#c")
                            .expression_attribute_names("#c", "Child");
                    }
                    let out = q.send().await.expect("Query");
                    n += out
                        .items()
                        .iter()
                        .filter(|i| i.get("Child").and_then(|c| c.as_s().ok()).is_some())
                        .count();
                    start = out.last_evaluated_key;
                    if start.is_none() {
                        break;
                    }
                }
                n
            }
        }
    }
}

// ---- CPU and connections ----

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    // After the command: state (field 3), …, utime (14), stime (15).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / TICKS
}

/// The pid of the DynamoDB Local JVM listening on `port` (its command line names the port).
fn server_pid(port: u16) -> Option<String> {
    let port = port.to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let is_local = args.iter().any(|a| a.ends_with(b"DynamoDBLocal.jar"))
            && args
                .windows(2)
                .any(|w| w[0] == b"-port" && w[1] == port.as_bytes());
        is_local.then_some(pid)
    })
}

/// The TCP connections to the server port, from both ends' entries in `/proc/net/tcp`:
/// (client ports of every connection seen in any state, client-side entries ESTABLISHED now).
fn connections(server: u16) -> (Vec<u16>, usize) {
    let mut ports = Vec::new();
    let mut established = 0;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 {
                continue;
            }
            let port = |a: &str| {
                a.rsplit_once(':')
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                    .unwrap_or(0)
            };
            let (local, remote) = (port(f[1]), port(f[2]));
            if remote == server {
                ports.push(local);
                if f[3] == "01" {
                    established += 1;
                }
            } else if local == server && remote != 0 {
                ports.push(remote);
            }
        }
    }
    (ports, established)
}

/// Samples the connections to the server every 5 ms on a thread of its own, and keeps that
/// thread's own CPU time, which the client's CPU per put leaves out (reading `/proc/net/tcp`
/// costs more with every socket open or in TIME_WAIT; it is the bench's, not the client's).
struct ConnWatch {
    state: Arc<Mutex<(BTreeSet<u16>, usize, f64)>>,
    stop: Arc<AtomicBool>,
}

impl ConnWatch {
    fn start(server: u16) -> Self {
        let state = Arc::new(Mutex::new((BTreeSet::new(), 0usize, 0.0)));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (Arc::clone(&state), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                let (ports, est) = connections(server);
                let mut g = s.lock().unwrap();
                g.0.extend(ports);
                g.1 = g.1.max(est);
                g.2 = cpu_seconds("thread-self");
                drop(g);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self { state, stop }
    }

    /// Connections seen so far, and resets the peak of established ones.
    fn mark(&self) -> usize {
        let mut g = self.state.lock().unwrap();
        g.1 = 0;
        g.0.len()
    }

    /// Waits (up to 5 s) until no connection to the server is established: the pools of the
    /// clients dropped before have closed theirs.
    async fn wait_idle(&self, server: u16) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while connections(server).1 > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The watching thread's CPU seconds so far.
    fn cpu(&self) -> f64 {
        self.state.lock().unwrap().2
    }

    /// (connections seen so far, peak established since the last mark).
    fn read(&self) -> (usize, usize) {
        std::thread::sleep(Duration::from_millis(20));
        let g = self.state.lock().unwrap();
        (g.0.len(), g.1)
    }
}

impl Drop for ConnWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---- DynamoDB Local ----

const OPS: [&str; 7] = [
    "put, sequential, new names",
    "put, sequential, overwrite",
    "put, 16 in flight, new names",
    "put, 16 in flight, overwrite",
    "get, sequential",
    "get, 16 in flight",
    "list (names/s)",
];

/// One phase's measurement: operations per second, client and server CPU per operation (µs).
#[derive(Clone, Copy)]
struct Sample {
    rate: f64,
    client_us: f64,
    server_us: f64,
}

struct Meter<'a> {
    server_pid: Option<&'a str>,
    /// A connection watcher running meanwhile, whose CPU is not the client's.
    watch: Option<&'a ConnWatch>,
}

impl Meter<'_> {
    async fn run<F: Future<Output = usize>>(&self, f: F) -> Sample {
        let watcher = || self.watch.map_or(0.0, ConnWatch::cpu);
        let (c0, s0) = (
            cpu_seconds("self") - watcher(),
            self.server_pid.map_or(0.0, cpu_seconds),
        );
        let start = Instant::now();
        let n = f.await as f64;
        let secs = start.elapsed().as_secs_f64();
        let (c1, s1) = (
            cpu_seconds("self") - watcher(),
            self.server_pid.map_or(0.0, cpu_seconds),
        );
        Sample {
            rate: n / secs,
            client_us: (c1 - c0) * 1e6 / n,
            server_us: (s1 - s0) * 1e6 / n,
        }
    }
}

static TABLES: AtomicU64 = AtomicU64::new(0);

fn table_name() -> String {
    format!(
        "put-compare-{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::Relaxed)
    )
}

/// A client of the server with the SDK's retries off, so that `DynamoDbTable::new` keeps it
/// (and its connection pool) as it is.
fn client_without_retries(endpoint: &str) -> Client {
    let c = client_for(endpoint);
    Client::from_conf(
        c.config()
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build(),
    )
}

async fn create(client: &Client, fenced: bool) -> (Tree, String) {
    let name = table_name();
    let tree = Tree::builder(DynamoDbTable::new(client.clone(), name.clone()))
        .fenced_puts(fenced)
        .build()
        .expect("tree");
    tree.create_table().await.expect("create table");
    (tree, name)
}

async fn seq_puts(imp: &Imp, depth: usize, set: &[Obj], v: u32) -> usize {
    for o in set {
        imp.put(depth, o, v).await;
    }
    set.len()
}

async fn conc_puts(imp: &Imp, depth: usize, set: &[Obj], v: u32, flight: usize) -> usize {
    futures::stream::iter(set)
        .map(|o| imp.put(depth, o, v))
        .buffer_unordered(flight)
        .count()
        .await
}

/// One round of one implementation at one depth, on a fresh table: the seven phases.
async fn cell(kind: Kind, client: &Client, depth: usize, k: &Knobs, m: &Meter<'_>) -> [Sample; 7] {
    let (tree, name) = create(client, kind == Kind::Fenced).await;
    let imp = match kind {
        Kind::Dynatree | Kind::Fenced => Imp::Dynatree(tree),
        Kind::Go => Imp::Go(client.clone(), name.clone()),
        Kind::Raw => Imp::Raw(client.clone(), name.clone()),
        Kind::RawConditional => Imp::RawConditional(client.clone(), name.clone()),
    };
    let (s0, s1) = (
        objects(0, k.objects, k.accounts),
        objects(1, k.objects, k.accounts),
    );
    let imp = &imp;
    let put_seq_new = m.run(seq_puts(imp, depth, &s0, 1)).await;
    let put_seq_over = m.run(seq_puts(imp, depth, &s0, 2)).await;
    let put_conc_new = m.run(conc_puts(imp, depth, &s1, 1, IN_FLIGHT)).await;
    let put_conc_over = m.run(conc_puts(imp, depth, &s1, 2, IN_FLIGHT)).await;
    let get_seq = m
        .run(async {
            for o in &s0 {
                assert_eq!(imp.get(depth, o).await.v, 2);
            }
            s0.len()
        })
        .await;
    let get_conc = m
        .run(
            futures::stream::iter(&s1)
                .map(|o| async move { assert_eq!(imp.get(depth, o).await.v, 2) })
                .buffer_unordered(IN_FLIGHT)
                .count(),
        )
        .await;
    let mut all = s0.clone();
    all.extend_from_slice(&s1);
    let dirs = parents(depth, &all);
    let list = m
        .run(async {
            let mut names = 0;
            for _ in 0..k.list_passes {
                for (p, expected) in &dirs {
                    let n = imp.list(p).await;
                    assert_eq!(n, *expected, "names under {p:?}");
                    names += n;
                }
            }
            names
        })
        .await;
    client
        .delete_table()
        .table_name(&name)
        .send()
        .await
        .expect("delete table");
    [
        put_seq_new,
        put_seq_over,
        put_conc_new,
        put_conc_over,
        get_seq,
        get_conc,
        list,
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The order of the implementations in round `round`: rotated by the round, reversed on odd
/// rounds, so that each runs first, last and in between.
fn order(round: usize) -> [Kind; 4] {
    let mut o = KINDS;
    o.rotate_left(round % KINDS.len());
    if round % 2 == 1 {
        o.reverse();
    }
    o
}

async fn compare(local: &DynamoDbLocal, k: &Knobs, server: Option<&str>) {
    let endpoint = local.endpoint();
    let clients: BTreeMap<Kind, Client> = KINDS
        .iter()
        .map(|&kind| (kind, client_without_retries(&endpoint)))
        .collect();
    let m = Meter {
        server_pid: server,
        watch: None,
    };
    // Warm-up, not recorded: the JVM's JIT, the connection pools.
    let warm = Knobs {
        objects: k.objects.min(500),
        list_passes: 1,
        ..*k
    };
    let start = Instant::now();
    for kind in KINDS {
        cell(kind, &clients[&kind], 4, &warm, &m).await;
    }
    eprintln!("(warm-up: {:.1} s)", start.elapsed().as_secs_f64());
    let mut samples: BTreeMap<(usize, usize, Kind), Vec<Sample>> = BTreeMap::new();
    for round in 0..k.rounds {
        let start = Instant::now();
        for depth in DEPTHS {
            for kind in order(round) {
                let got = cell(kind, &clients[&kind], depth, k, &m).await;
                for (op, s) in got.into_iter().enumerate() {
                    samples.entry((op, depth, kind)).or_default().push(s);
                }
            }
        }
        eprintln!(
            "(round {} of {}: {:.1} s)",
            round + 1,
            k.rounds,
            start.elapsed().as_secs_f64()
        );
    }
    let med = |op: usize, depth: usize, kind: Kind, f: fn(&Sample) -> f64| {
        median(samples[&(op, depth, kind)].iter().map(f).collect())
    };
    println!(
        "## Throughput on DynamoDB Local: medians of {} rounds in rotating order\n\n\
         {} objects per phase over {} accounts; list: every parent listed {} times per round.\n",
        k.rounds, k.objects, k.accounts, k.list_passes
    );
    println!(
        "| operation | depth | dynatree ops/s | fenced ops/s | Go algorithm ops/s | raw SDK ops/s | dynatree / Go | fenced / Go | dynatree / raw SDK | fenced / raw SDK |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (op, label) in OPS.iter().enumerate() {
        for depth in DEPTHS {
            let r = |kind| med(op, depth, kind, |s| s.rate);
            let (d, f, g, raw) = (
                r(Kind::Dynatree),
                r(Kind::Fenced),
                r(Kind::Go),
                r(Kind::Raw),
            );
            println!(
                "| {label} | {depth} | {d:.0} | {f:.0} | {g:.0} | {raw:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
                d / g,
                f / g,
                d / raw,
                f / raw
            );
        }
    }
    println!(
        "\nSpread of dynatree / Go and dynatree / raw SDK over the rounds (min-max of each round's ratio):\n"
    );
    println!(
        "| operation | depth | dynatree / Go | fenced / Go | dynatree / raw SDK | fenced / raw SDK |"
    );
    println!("|---|---|---|---|---|---|");
    for (op, label) in OPS.iter().enumerate() {
        for depth in DEPTHS {
            let ratios = |ours: Kind, other: Kind| {
                let d = &samples[&(op, depth, ours)];
                let o = &samples[&(op, depth, other)];
                let v: Vec<f64> = d.iter().zip(o).map(|(a, b)| a.rate / b.rate).collect();
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{lo:.2}-{hi:.2}")
            };
            println!(
                "| {label} | {depth} | {} | {} | {} | {} |",
                ratios(Kind::Dynatree, Kind::Go),
                ratios(Kind::Fenced, Kind::Go),
                ratios(Kind::Dynatree, Kind::Raw),
                ratios(Kind::Fenced, Kind::Raw)
            );
        }
    }
    println!(
        "\n## CPU per operation (µs, medians): this process (client) and the DynamoDB Local JVM (server)\n\n\
         Process CPU from `/proc/<pid>/stat` (10 ms ticks); a list operation is one name.\n"
    );
    println!(
        "| operation | depth | client dynatree | client fenced | client Go | client raw | server dynatree | server fenced | server Go | server raw |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (op, label) in OPS.iter().enumerate() {
        for depth in DEPTHS {
            let c = |kind| med(op, depth, kind, |s| s.client_us);
            let s = |kind| med(op, depth, kind, |s| s.server_us);
            println!(
                "| {label} | {depth} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                c(Kind::Dynatree),
                c(Kind::Fenced),
                c(Kind::Go),
                c(Kind::Raw),
                s(Kind::Dynatree),
                s(Kind::Fenced),
                s(Kind::Go),
                s(Kind::Raw)
            );
        }
    }
    println!();
}

// ---- the HTTP client ----

async fn http(local: &DynamoDbLocal, k: &Knobs, server: Option<&str>, port: u16) {
    let endpoint = local.endpoint();
    let watch = ConnWatch::start(port);
    let m = Meter {
        server_pid: server,
        watch: Some(&watch),
    };
    println!(
        "## HTTP client: overwrite puts at depth 4 with more in flight\n\n\
         {} puts per cell (to {} objects under existing accounts, each written once before); \
         connections to DynamoDB Local counted from `/proc/net/tcp`.\n",
        k.http_puts,
        k.objects.min(k.http_puts)
    );
    println!(
        "| implementation | in flight | puts/s | connections opened | peak established | client µs/put | server µs/put |"
    );
    println!("|---|---|---|---|---|---|---|");
    for kind in [Kind::Dynatree, Kind::Raw, Kind::RawConditional] {
        watch.wait_idle(port).await;
        let client = client_without_retries(&endpoint);
        let (tree, name) = create(&client, false).await;
        let imp = match kind {
            Kind::Dynatree => Imp::Dynatree(tree),
            Kind::RawConditional => Imp::RawConditional(client.clone(), name.clone()),
            _ => Imp::Raw(client.clone(), name.clone()),
        };
        let objs = objects(0, k.objects.min(k.http_puts), k.accounts);
        // Written once before: by the tree itself (it then knows them), by a plain PutItem
        // for the raw SDK (the conditional one needs them there).
        let first = match &imp {
            Imp::Dynatree(_) => &imp,
            _ => &Imp::Raw(client.clone(), name.clone()),
        };
        for o in &objs {
            first.put(4, o, 0).await;
        }
        for (round, flight) in HTTP_IN_FLIGHT.into_iter().enumerate() {
            let before = watch.mark();
            let imp = &imp;
            let objs = &objs;
            let s = m
                .run(
                    futures::stream::iter(0..k.http_puts)
                        .map(|i| imp.put(4, &objs[i % objs.len()], round as u32 + 1))
                        .buffer_unordered(flight)
                        .count(),
                )
                .await;
            let (after, peak) = watch.read();
            println!(
                "| {} | {flight} | {:.0} | {} | {peak} | {:.0} | {:.0} |",
                kind.label(),
                s.rate,
                after - before,
                s.client_us,
                s.server_us
            );
        }
        client
            .delete_table()
            .table_name(&name)
            .send()
            .await
            .expect("delete table");
    }

    // Does a table built from an application's client share its connections? The table and
    // its object are made through another client, dropped before the count starts.
    println!(
        "\nConnection pool shared between an application's client and \
         `DynamoDbTable::new(client.clone(), …)`: connections established after 20 sequential \
         GetItems through the client, then after 20 `Tree::get`s through the table:\n"
    );
    println!("| the application's client | after the client's gets | after the tree's gets |");
    println!("|---|---|---|");
    let obj = Obj {
        account: 0,
        name: "x".into(),
    };
    for (label, client) in [
        (
            "`client_for` (SDK default retries: `DynamoDbTable::new` rebuilds the client)",
            client_for(&endpoint),
        ),
        (
            "the same with `RetryConfig::disabled()` (`DynamoDbTable::new` keeps it)",
            client_without_retries(&endpoint),
        ),
    ] {
        let admin = client_without_retries(&endpoint);
        let (admin_tree, name) = create(&admin, false).await;
        admin_tree
            .put(full_path(4, &obj), &link(0, "x", 0))
            .await
            .expect("put");
        drop(admin_tree);
        drop(admin);
        watch.wait_idle(port).await;
        let tree = Tree::new(DynamoDbTable::new(client.clone(), name.clone()));
        for _ in 0..20 {
            client
                .get_item()
                .table_name(&name)
                .set_key(Some(sdk_key(
                    go_object_hash(&full_path(4, &obj)),
                    SC.into(),
                )))
                .send()
                .await
                .expect("GetItem");
        }
        let by_client = connections(port).1;
        for _ in 0..20 {
            tree.get::<Link>(full_path(4, &obj))
                .await
                .expect("get")
                .expect("object");
        }
        let by_tree = connections(port).1;
        println!("| {label} | {by_client} | {by_tree} |");
        client
            .delete_table()
            .table_name(&name)
            .send()
            .await
            .expect("delete table");
    }
    println!();
}

// ---- prices on the metered fake ----

/// Requests by operation and write units of the puts of one phase.
struct Price {
    puts: usize,
    requests: BTreeMap<&'static str, u64>,
    wcu: f64,
}

impl Price {
    fn requests(&self) -> String {
        let n = self.puts as f64;
        self.requests
            .iter()
            .filter(|(op, _)| **op != "CreateTable" && **op != "DescribeTable")
            .map(|(op, c)| format!("{} {op}", trim(*c as f64 / n)))
            .collect::<Vec<_>>()
            .join(" + ")
    }

    fn wcu(&self) -> String {
        trim(self.wcu / self.puts as f64)
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

async fn fake_phase(
    kind: Kind,
    fake: &FakeTable,
    tree: &Tree,
    depth: usize,
    set: &[Obj],
    v: u32,
) -> Price {
    fake.reset_metrics();
    for o in set {
        let l = link(o.account, &o.name, v);
        match kind {
            Kind::Dynatree | Kind::Fenced => tree.put(full_path(depth, o), &l).await.expect("put"),
            Kind::Go => {
                let rows = go_items(&full_path(depth, o), &l)
                    .into_iter()
                    .map(WriteRequest::Put)
                    .collect();
                storage::write_all(fake, rows, &RetryPolicy::default())
                    .await
                    .expect("go put");
            }
            // The conditional variant is measured on DynamoDB Local only (the HTTP section).
            Kind::Raw | Kind::RawConditional => fake
                .put_item(raw_item(depth, o, &l), Condition::Always)
                .await
                .expect("raw put"),
        }
    }
    let m = fake.metrics();
    Price {
        puts: set.len(),
        requests: m.requests_by_operation().clone(),
        wcu: m.write_units(),
    }
}

async fn prices(k: &Knobs) {
    println!(
        "## Price per put by DynamoDB's published rules (metered FakeTable, deterministic)\n\n\
         The sequential puts of a round: {n} new names over {a} accounts (the first {a}: the first \
         under their account; the rest: new names under a known parent), then the same names \
         again (overwrite). Requests and write units (1 per KB, 2 per KB in a transaction, \
         condition checks included) per put.\n",
        n = k.objects,
        a = k.accounts.min(k.objects)
    );
    println!(
        "| depth | put | dynatree requests | dynatree WCU | fenced requests | fenced WCU | Go requests | Go WCU | raw SDK requests | raw SDK WCU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let set = objects(0, k.objects, k.accounts);
    let firsts = k.accounts.min(set.len());
    for depth in DEPTHS {
        let mut cols: Vec<Vec<Price>> = Vec::new();
        for kind in KINDS {
            let fake = FakeTable::new();
            let tree = Tree::builder(fake.clone())
                .fenced_puts(kind == Kind::Fenced)
                .build()
                .expect("tree");
            tree.create_table().await.unwrap();
            cols.push(vec![
                fake_phase(kind, &fake, &tree, depth, &set[..firsts], 1).await,
                fake_phase(kind, &fake, &tree, depth, &set[firsts..], 1).await,
                fake_phase(kind, &fake, &tree, depth, &set, 2).await,
            ]);
        }
        for (i, label) in [
            "new, first under its account",
            "new, known parent",
            "overwrite",
        ]
        .iter()
        .enumerate()
        {
            if cols[0][i].puts == 0 {
                continue;
            }
            let cells: Vec<String> = cols
                .iter()
                .map(|c| format!("{} | {}", c[i].requests(), c[i].wcu()))
                .collect();
            println!("| {depth} | {label} | {} |", cells.join(" | "));
        }
    }
    println!();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let k = Knobs::from_env();
    prices(&k).await;
    if !k.local {
        return;
    }
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("DynamoDB Local could not start: {e}");
            std::process::exit(1);
        }
    };
    let port: u16 = local
        .endpoint()
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("port");
    let server = server_pid(port);
    if server.is_none() {
        eprintln!("(the DynamoDB Local process was not found: server CPU reads 0)");
    }
    let start = Instant::now();
    compare(&local, &k, server.as_deref()).await;
    http(&local, &k, server.as_deref(), port).await;
    eprintln!(
        "(DynamoDB Local part: {:.1} s)",
        start.elapsed().as_secs_f64()
    );
}
