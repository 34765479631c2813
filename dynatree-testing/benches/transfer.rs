//! Export and import: a round trip of N objects (default 100,000) and N/100 links.
//! The tree: `/Accounts/a0000 … /Accounts/a0999` (N/100 accounts), each with 99 items
//! `/Accounts/aK/Items/iJJ` (about 120 bytes of attributes of several types), and one link
//! per account `/ByName/nK → /Accounts/aK`.
//!
//! Steps, each timed: load the tree with an import (records built in memory, batches of
//! 1,000), export it (`Tree::export` of the root, to JSON Lines in memory), import the lines
//! into a second, empty table, export that one, and check that the two exports are the same,
//! line for line. Requests by operation and capacity units come from the metered `FakeTable`
//! (deterministic, the same requests DynamoDB receives); seconds from the fake and from
//! DynamoDB Local. Run:
//! `cargo bench -p dynatree-testing --bench transfer`.
//!
//! Knobs: `DYNATREE_TRANSFER_OBJECTS=<n>` objects (default 100000, rounded down to a multiple
//! of 100); `DYNATREE_TRANSFER_LOCAL=0` skips DynamoDB Local.

use std::time::Instant;

use dynatree::storage::Storage;
use dynatree::transfer::Record;
use dynatree::{Path, Tree, storage::Item, storage::Value};
use dynatree_testing::{DynamoDbLocal, FakeTable, Metrics};
use futures::TryStreamExt;

const PER_ACCOUNT: usize = 100;
const BATCH: usize = 1_000;

fn objects_wanted() -> usize {
    let n = match std::env::var("DYNATREE_TRANSFER_OBJECTS") {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("DYNATREE_TRANSFER_OBJECTS must be a number of objects, not {v:?}");
            std::process::exit(2)
        }),
        Err(_) => 100_000,
    };
    (n / PER_ACCOUNT).max(1) * PER_ACCOUNT
}

fn path(c: &[&str]) -> Path {
    Path::new(c.iter().copied()).unwrap()
}

/// The records of the tree, in the order an export returns them.
fn records(n: usize) -> Vec<Record> {
    let accounts = n / PER_ACCOUNT;
    let mut out = Vec::with_capacity(n + accounts);
    for k in 0..accounts {
        let a = format!("a{k:04}");
        let mut item = Item::new();
        item.insert("name", Value::S(format!("Account {k}")));
        item.insert("plan", Value::S("pro".into()));
        out.push(Record::Object {
            path: path(&["Accounts", &a]),
            item,
            expires: None,
        });
        for j in 1..PER_ACCOUNT {
            let mut item = Item::new();
            item.insert("title", Value::S(format!("item {j} of account {k}")));
            item.insert("price", Value::N(format!("{j}.25")));
            item.insert("tags", Value::Ss(vec!["new".into(), format!("t{}", j % 7)]));
            item.insert(
                "raw",
                Value::B(vec![(k % 256) as u8, (j % 256) as u8, 0, 255]),
            );
            item.insert("done", Value::Bool(j % 2 == 0));
            item.insert(
                "dims",
                Value::L(vec![Value::N("3".into()), Value::N("4.5".into())]),
            );
            out.push(Record::Object {
                path: path(&["Accounts", &a, "Items", &format!("i{j:02}")]),
                item,
                expires: None,
            });
        }
    }
    for k in 0..accounts {
        out.push(Record::Link {
            path: path(&["ByName", &format!("n{k:04}")]),
            target: path(&["Accounts", &format!("a{k:04}")]),
        });
    }
    out
}

fn by_operation(m: &Metrics) -> String {
    m.requests_by_operation()
        .iter()
        .map(|(op, n)| format!("{n} {op}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn row(backend: &str, step: &str, records: usize, m: Option<&Metrics>, secs: f64) {
    let rate = records as f64 / secs;
    match m {
        Some(m) => println!(
            "| {backend} | {step} | {records} | {} | {} | {:.0} | {:.0} | {secs:.2} | {rate:.0} |",
            m.total_requests(),
            by_operation(m),
            m.write_units(),
            m.read_units()
        ),
        None => println!(
            "| {backend} | {step} | {records} | (as above) | | | | {secs:.2} | {rate:.0} |"
        ),
    }
}

async fn export_lines(tree: &Tree) -> Vec<String> {
    tree.export(Path::root())
        .map_ok(|r| r.to_json_line())
        .try_collect()
        .await
        .unwrap()
}

/// A set's members in a fixed order: DynamoDB keeps no order in a set, so two exports of the
/// same tree may list them differently.
fn sorted_sets(v: &mut Value) {
    match v {
        Value::Ss(s) | Value::Ns(s) => s.sort(),
        Value::Bs(s) => s.sort(),
        Value::L(l) => l.iter_mut().for_each(sorted_sets),
        Value::M(m) => m.values_mut().for_each(sorted_sets),
        _ => {}
    }
}

/// The lines as records with their sets sorted, for comparing two exports.
fn canonical(lines: &[String]) -> Vec<Record> {
    lines
        .iter()
        .map(|l| match Record::from_json_line(l).unwrap() {
            Record::Object {
                path,
                item,
                expires,
            } => {
                let item = item
                    .into_iter()
                    .map(|(k, mut v)| {
                        sorted_sets(&mut v);
                        (k, v)
                    })
                    .collect();
                Record::Object {
                    path,
                    item,
                    expires,
                }
            }
            link => link,
        })
        .collect()
}

async fn import_lines(tree: &Tree, lines: &[String]) {
    let stream = futures::stream::iter(lines.iter().map(|l| Record::from_json_line(l)));
    tree.import(stream).batch(BATCH).run().await.unwrap();
}

/// The round trip on two tables; `meter` resets and reads the metrics of each step (the fake).
async fn round_trip<S: Storage + Clone + 'static>(
    backend: &str,
    tables: [S; 2],
    n: usize,
    meter: Option<[FakeTable; 2]>,
) {
    let [a, b] = tables;
    let b_table = b.clone();
    let (a, b) = (Tree::new(a), Tree::new(b));
    a.create_table().await.unwrap();
    b.create_table().await.unwrap();
    let built = records(n);
    let total = built.len();
    let expected: Vec<String> = built.iter().map(Record::to_json_line).collect();
    let metrics = |i: usize| meter.as_ref().map(|m| m[i].metrics());
    let reset = |i: usize| {
        if let Some(m) = &meter {
            m[i].reset_metrics();
        }
    };

    reset(0);
    let start = Instant::now();
    a.import(futures::stream::iter(built.into_iter().map(Ok)))
        .batch(BATCH)
        .run()
        .await
        .unwrap();
    row(
        backend,
        "load (import of built records)",
        total,
        metrics(0).as_ref(),
        start.elapsed().as_secs_f64(),
    );

    reset(0);
    let start = Instant::now();
    let exported = export_lines(&a).await;
    row(
        backend,
        "export to JSON Lines",
        total,
        metrics(0).as_ref(),
        start.elapsed().as_secs_f64(),
    );
    assert_eq!(exported.len(), total);
    let exported_records = canonical(&exported);
    assert!(
        exported_records == canonical(&expected),
        "the export differs from what was loaded"
    );

    reset(1);
    let start = Instant::now();
    import_lines(&b, &exported).await;
    row(
        backend,
        "import of the export (empty table)",
        total,
        metrics(1).as_ref(),
        start.elapsed().as_secs_f64(),
    );

    reset(1);
    let start = Instant::now();
    let again = export_lines(&b).await;
    row(
        backend,
        "export of the copy",
        total,
        metrics(1).as_ref(),
        start.elapsed().as_secs_f64(),
    );
    assert!(
        canonical(&again) == exported_records,
        "the copy's export differs from the original's"
    );

    // Idempotence at scale: the same import again changes nothing (a new handle: cold cache).
    let b2 = Tree::new(b_table);
    reset(1);
    let start = Instant::now();
    import_lines(&b2, &exported).await;
    row(
        backend,
        "same import again (new handle)",
        total,
        metrics(1).as_ref(),
        start.elapsed().as_secs_f64(),
    );
    let third = export_lines(&b).await;
    assert!(
        canonical(&third) == exported_records,
        "a second import changed the tree"
    );
    eprintln!(
        "({backend}: the two exports and the re-import's export are identical, {total} lines)"
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = objects_wanted();
    println!(
        "Round trip of {n} objects and {} links through JSON Lines (batches of {BATCH}).\n",
        n / PER_ACCOUNT
    );
    println!(
        "| backend | step | records | requests | by operation | WCU | RCU | seconds | records/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let fakes = [FakeTable::new(), FakeTable::new()];
    round_trip("FakeTable", fakes.clone(), n, Some(fakes)).await;
    if std::env::var("DYNATREE_TRANSFER_LOCAL").is_ok_and(|v| v == "0") {
        eprintln!("(DynamoDB Local skipped: DYNATREE_TRANSFER_LOCAL=0)");
        return;
    }
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "DynamoDB Local could not start: {e}\n(set DYNATREE_TRANSFER_LOCAL=0 to skip it)"
            );
            std::process::exit(1);
        }
    };
    round_trip(
        "DynamoDB Local",
        [local.fresh_table(), local.fresh_table()],
        n,
        None,
    )
    .await;
}
