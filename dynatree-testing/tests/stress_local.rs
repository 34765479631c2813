//! Several OS processes on one DynamoDB Local table, in real time, while the test kills some
//! of them (`SIGKILL`) and stops others for a while (`SIGSTOP`, then `SIGCONT`). Each process
//! appends every call it makes to a log of its own (invocation before the request, result
//! after), on the machine's clock; a killed process leaves calls without a result, which count
//! as unknown. At the end a fresh process runs `resume()`; the table must satisfy every
//! invariant, and the histories of all processes together must be linearizable, checked per
//! key as Porcupine does (single-object calls on distinct keys commute), with the subtree
//! that `delete_subtree` and `move_subtree` act on checked as one part.
//!
//! The worker is this same test binary, started again with `DYNATREE_STRESS_WORKER` set (the
//! test `stress_worker` does nothing otherwise). If DynamoDB Local cannot start, the test
//! fails saying what is missing.
//!
//! Budget: `DYNATREE_STRESS_WORKERS` processes at a time (default 3), `DYNATREE_STRESS_CALLS`
//! calls per process (default 40), `DYNATREE_STRESS_KILLS` and `DYNATREE_STRESS_PAUSES`
//! (default 3 each).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, Write};
use std::path::{Path as FsPath, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dynatree::{DynamoDbTable, ErrorKind, Tree, ops::LinkPolicy};
use dynatree_testing::DynamoDbLocal;
use dynatree_testing::sim::{Call, Model, Observed, check_history, check_rows};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct V {
    v: u32,
}

/// The keys of single-object calls; each is its own part of the history.
const KEYS: [[&str; 2]; 3] = [["s", "k0"], ["s", "k1"], ["s", "k2"]];
/// The subtree calls: puts below `t`, deletions of `t`, moves of `t/a` to `t/b` and back.
const SUBTREE: [[&str; 3]; 2] = [["t", "a", "x"], ["t", "a", "y"]];

/// One line of a worker's log.
#[derive(Serialize, Deserialize, Debug, Clone)]
struct Line {
    process: usize,
    seq: usize,
    /// `None`: the invocation; `Some`: the result.
    result: Option<String>,
    op: Op,
    at: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
enum Op {
    Put(Vec<String>, u32),
    Get(Vec<String>),
    Delete(Vec<String>),
    DeleteSubtree(Vec<String>),
    Move(Vec<String>, Vec<String>),
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

fn strs<const N: usize>(p: [&str; N]) -> Vec<String> {
    p.iter().map(|s| (*s).to_owned()).collect()
}

/// The worker: `DYNATREE_STRESS_WORKER=<process>` with the endpoint, table and log file.
#[test]
fn stress_worker() {
    let Ok(process) = std::env::var("DYNATREE_STRESS_WORKER") else {
        return; // only a worker when the stress test starts it
    };
    let process: usize = process.parse().expect("a process number");
    let endpoint = std::env::var("DYNATREE_STRESS_ENDPOINT").expect("endpoint");
    let table = std::env::var("DYNATREE_STRESS_TABLE").expect("table");
    let log = std::env::var("DYNATREE_STRESS_LOG").expect("log file");
    let calls = env_num("DYNATREE_STRESS_CALLS", 40);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(work(process, &endpoint, &table, &log, calls));
}

async fn work(process: usize, endpoint: &str, table: &str, log: &str, calls: usize) {
    let tree = Tree::builder(DynamoDbTable::new(
        dynatree_testing::client_for(endpoint),
        table,
    ))
    .removal_lease(Duration::from_secs(2))
    .build()
    .expect("valid settings");
    let mut out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("the log file");
    let mut write = |line: &Line| {
        let mut s = serde_json::to_string(line).expect("a log line");
        s.push('\n');
        out.write_all(s.as_bytes()).expect("log written");
        out.flush().expect("log flushed");
    };
    fastrand::seed(0x5eed ^ process as u64);
    for seq in 0..calls {
        let key = strs(KEYS[fastrand::usize(..KEYS.len())]);
        let value = u32::try_from(process * 1000 + seq).unwrap_or(u32::MAX);
        let op = match fastrand::u8(..10) {
            0..=2 => Op::Put(key, value),
            3..=5 => Op::Get(key),
            6 => Op::Delete(key),
            7 => Op::Put(strs(SUBTREE[fastrand::usize(..SUBTREE.len())]), value),
            8 => Op::DeleteSubtree(strs(["t"])),
            _ => {
                if fastrand::bool() {
                    Op::Move(strs(["t", "a"]), strs(["t", "b"]))
                } else {
                    Op::Move(strs(["t", "b"]), strs(["t", "a"]))
                }
            }
        };
        write(&Line {
            process,
            seq,
            result: None,
            op: op.clone(),
            at: now_ns(),
        });
        let result = match &op {
            Op::Put(p, v) => show(tree.put(p.clone(), &V { v: *v }).await),
            Op::Get(p) => show(tree.get::<V>(p.clone()).await),
            Op::Delete(p) => show(tree.delete(p.clone()).await),
            // The model's value is `()`: the count of deleted objects is not compared.
            Op::DeleteSubtree(p) => show(tree.delete_subtree(p.clone()).await.map(|_| ())),
            Op::Move(a, b) => show(tree.move_subtree(a.clone(), b.clone()).await.map(|_| ())),
        };
        write(&Line {
            process,
            seq,
            result: Some(result),
            op,
            at: now_ns(),
        });
    }
}

fn show<T: std::fmt::Debug>(r: dynatree::Result<T>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("err {:?}", e.kind()),
    }
}

fn kind_of(name: &str) -> ErrorKind {
    use ErrorKind as K;
    [
        K::InvalidPath,
        K::InvalidAttribute,
        K::InvalidReserved,
        K::ItemTooLarge,
        K::InvalidValue,
        K::InvalidArgument,
        K::Serialization,
        K::NotFound,
        K::NotALink,
        K::LinkLoop,
        K::OutOfScope,
        K::ConditionFailed,
        K::AlreadyExists,
        K::Locked,
        K::HasChildren,
        K::TransactionCanceled,
        K::Conflict,
        K::TakenOver,
        K::Unfinished,
        K::Throttled,
        K::LimitExceeded,
        K::Unprocessed,
        K::Validation,
        K::TableNotFound,
        K::TableMismatch,
        K::Backend,
    ]
    .into_iter()
    .find(|k| format!("{k:?}") == name)
    .unwrap_or_else(|| panic!("a worker logged an error kind this test does not know: {name}"))
}

/// The call a pair of log lines records (the result line missing: unknown).
fn call_of(inv: &Line, res: Option<&Line>) -> Call {
    let observed = match res.and_then(|r| r.result.as_deref()) {
        None => Observed::Unknown,
        Some(r) => match r.split_once(' ') {
            Some(("ok", v)) => Observed::Ok(v.to_owned()),
            Some(("err", k)) => Observed::Err(kind_of(k)),
            _ => panic!("a result line this test cannot read: {r}"),
        },
    };
    let name = format!("{:?}", inv.op);
    let returned = res.map(|r| r.at);
    match inv.op.clone() {
        Op::Put(p, v) => Call::new(inv.process, name, inv.at, returned, observed, move |m| {
            m.put(p.clone(), &V { v })
        }),
        Op::Get(p) => Call::new(inv.process, name, inv.at, returned, observed, move |m| {
            m.read::<V>(p.clone())
        }),
        Op::Delete(p) => Call::new(inv.process, name, inv.at, returned, observed, move |m| {
            m.delete(p.clone())
        }),
        Op::DeleteSubtree(p) => {
            Call::new(inv.process, name, inv.at, returned, observed, move |m| {
                m.delete_subtree(p.clone())
            })
        }
        Op::Move(a, b) => Call::new(inv.process, name, inv.at, returned, observed, move |m| {
            m.move_subtree(a.clone(), b.clone(), LinkPolicy::Report)
        }),
    }
}

/// The part of the history a call belongs to: its key, or the subtree `t`.
fn part(op: &Op) -> String {
    match op {
        Op::Put(p, _) | Op::Get(p) | Op::Delete(p) | Op::DeleteSubtree(p) | Op::Move(p, _) => {
            if p[0] == "t" {
                "t".to_owned()
            } else {
                p.join("/")
            }
        }
    }
}

fn spawn(process: usize, endpoint: &str, table: &str, log: &FsPath) -> Child {
    Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "stress_worker",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DYNATREE_STRESS_WORKER", process.to_string())
        .env("DYNATREE_STRESS_ENDPOINT", endpoint)
        .env("DYNATREE_STRESS_TABLE", table)
        .env("DYNATREE_STRESS_LOG", log)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("a worker process")
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill(1)");
    assert!(status.success(), "kill {sig} {} failed", child.id());
}

#[test]
fn processes_killed_and_paused_leave_a_linearizable_history() {
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => panic!("DynamoDB Local is required for this test: {e}"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let table = local.fresh_table();
    let name = table.table_name().to_owned();
    let tree = Tree::new(table);
    rt.block_on(tree.create_table()).expect("table created");
    let dir = tempdir();
    let workers = env_num("DYNATREE_STRESS_WORKERS", 3);
    let mut kills = env_num("DYNATREE_STRESS_KILLS", 3);
    let mut pauses = env_num("DYNATREE_STRESS_PAUSES", 3);
    let (total_kills, total_pauses) = (kills, pauses);
    let started = Instant::now();
    let mut next = 0;
    let endpoint = local.endpoint();
    // Starts the next worker process, each with its own log.
    let start = |next: &mut usize| {
        let child = spawn(*next, &endpoint, &name, &dir.join(format!("p{next}")));
        *next += 1;
        child
    };
    let mut running: Vec<Child> = (0..workers).map(|_| start(&mut next)).collect();
    fastrand::seed(7);
    while !running.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the stress run did not finish in 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(200 + fastrand::u64(..600)));
        running.retain_mut(|c| c.try_wait().expect("wait").is_none());
        if running.is_empty() {
            break;
        }
        let i = fastrand::usize(..running.len());
        if kills > 0 && fastrand::bool() {
            kills -= 1;
            let mut c = running.swap_remove(i);
            signal(&c, "-KILL");
            let _ = c.wait();
            // A new process takes the dead one's place (and its unfinished operations, if it
            // runs into them).
            running.push(start(&mut next));
        } else if pauses > 0 {
            pauses -= 1;
            let c = &running[i];
            signal(c, "-STOP");
            std::thread::sleep(Duration::from_millis(500 + fastrand::u64(..2500)));
            signal(c, "-CONT");
        }
    }
    let ran_for = started.elapsed();

    // Recovery, then the table's invariants.
    rt.block_on(async {
        tokio::time::sleep(Duration::from_secs(3)).await; // the 2 s leases of the dead
        tree.resume().await
    })
    .expect("resume after the run");
    let rows: Vec<dynatree::storage::Item> = rt
        .block_on(futures::TryStreamExt::try_collect(tree.scan()))
        .expect("scan");
    let violations = check_rows(&rows, tree.reserved());
    assert!(violations.is_empty(), "invariants broken: {violations:?}");
    let actual = Model::from_rows(&rows, tree.reserved());

    // The histories, split per key (and the subtree `t` as one part).
    let mut lines: Vec<Line> = Vec::new();
    for p in 0..next {
        let path = dir.join(format!("p{p}"));
        let Ok(f) = fs::File::open(&path) else {
            continue;
        };
        for l in std::io::BufReader::new(f).lines() {
            let l = l.expect("a log line");
            // A line cut by a kill is the invocation's: it has no result line either.
            if let Ok(line) = serde_json::from_str::<Line>(&l) {
                lines.push(line);
            }
        }
    }
    let mut invocations: BTreeMap<(usize, usize), Line> = BTreeMap::new();
    let mut results: BTreeMap<(usize, usize), Line> = BTreeMap::new();
    for l in lines {
        let k = (l.process, l.seq);
        if l.result.is_some() {
            results.insert(k, l);
        } else {
            invocations.insert(k, l);
        }
    }
    let mut parts: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    let mut unknown = 0;
    for (k, inv) in &invocations {
        let res = results.get(k);
        unknown += usize::from(res.is_none());
        parts
            .entry(part(&inv.op))
            .or_default()
            .push(call_of(inv, res));
    }
    let total: usize = parts.values().map(Vec::len).sum();
    let mut failures = Vec::new();
    for (name, calls) in &parts {
        // The part of the end state this part of the history covers.
        let mut end = actual.clone();
        end.retain(|p| (name == "t" && p[0] == "t") || p.join("/") == *name);
        if let Err(e) = check_history(
            &Model::default(),
            calls,
            &end,
            &[ErrorKind::Locked, ErrorKind::Conflict],
        ) {
            failures.push(format!("part {name}: {e}"));
        }
    }
    eprintln!(
        "stress: {next} processes ({workers} at a time), {} killed, {} paused, {total} calls \
         ({unknown} unknown) in {ran_for:.1?}, {} parts checked",
        total_kills - kills,
        total_pauses - pauses,
        parts.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(total >= workers, "the workers made no calls");
    let _ = fs::remove_dir_all(&dir);
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dynatree-stress-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}
