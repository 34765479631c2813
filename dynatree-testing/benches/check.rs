//! The integrity check: `Tree::check()` of a healthy tree of N rows (default
//! 100,000), with 1, 4 and 8 Scan segments, on the metered `FakeTable` and on DynamoDB Local,
//! then once with a read-capacity budget (`read_units_per_second`) on each.
//!
//! The tree: accounts `/Accounts/a0000 …` (N/100 of them), each with 48 objects under a few
//! levels: the account, 29 items `/Accounts/aK/Items/iJJ`, 2 folders `/Accounts/aK/Folders/fF`
//! and 8 files in each, `/Accounts/aK/Folders/fF/Files/gG` (about 100 bytes of attributes of
//! several types each). With their listing rows that is exactly 100 rows per account, plus the
//! root's listing row of `Accounts`. Loaded with `Tree::import` (batches of 1,000; not timed).
//!
//! On the fake, the report's read units must equal the units the fake metered for the Scan
//! (the same requests DynamoDB receives, by DynamoDB's rules); on both backends the report must
//! be healthy and count every row. The budgeted run must keep its average under the rate,
//! give or take one page. A split run scans 8 segments as 4 parts at once (as 4 workers would),
//! saves each as JSON, and merges them: the same rows and read units; then merges them again
//! as 4 buckets (`Check::bucket`, as 4 mergers would), each reading the parts one at a time,
//! and prints each merge's peak of heap allocated beyond what it started with (a counting
//! allocator). Run:
//! `cargo bench -p dynatree-testing --bench check`.
//!
//! Knobs: `DYNATREE_CHECK_ROWS=<n>` rows (default 100000, rounded down to a multiple of 100);
//! `DYNATREE_CHECK_RATE=<units per second>` for the budgeted run (default: a fifth of the
//! check's read units, so that it takes about 5 s); `DYNATREE_CHECK_LOCAL=0` skips DynamoDB
//! Local.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use dynatree::check::Report;
use dynatree::storage::Storage;
use dynatree::transfer::Record;
use dynatree::{Path, Tree, storage::Item, storage::Value};
use dynatree_testing::{DynamoDbLocal, FakeTable};

/// The system allocator, counting the bytes allocated now and their peak.
#[global_allocator]
static PEAK_ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// Runs `f` and returns its result and the peak of heap it allocated beyond what was
/// allocated when it started.
async fn peak_of<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let base = PEAK_ALLOC.current_usage();
    PEAK_ALLOC.reset_peak_usage();
    let out = f.await;
    (out, PEAK_ALLOC.peak_usage().saturating_sub(base))
}

/// Rows of one account (see the module docs).
const ROWS_PER_ACCOUNT: usize = 100;
const ITEMS: usize = 29;
const FOLDERS: usize = 2;
const FILES: usize = 8;
const SEGMENTS: [u32; 3] = [1, 4, 8];
/// Segments of the budgeted run.
const BUDGET_SEGMENTS: u32 = 4;

fn knob(name: &str) -> Option<f64> {
    std::env::var(name).ok().map(|v| {
        v.parse().unwrap_or_else(|_| {
            eprintln!("{name} must be a number, not {v:?}");
            std::process::exit(2)
        })
    })
}

fn accounts_wanted() -> usize {
    let rows = knob("DYNATREE_CHECK_ROWS").map_or(100_000, |n| n as usize);
    (rows / ROWS_PER_ACCOUNT).max(1)
}

fn path(c: &[&str]) -> Path {
    Path::new(c.iter().copied()).unwrap()
}

fn object(p: Path, item: Item) -> Record {
    Record::Object {
        path: p,
        item,
        expires: None,
    }
}

/// The records of the tree.
fn records(accounts: usize) -> Vec<Record> {
    let mut out = Vec::with_capacity(accounts * (1 + ITEMS + FOLDERS * (1 + FILES)));
    for k in 0..accounts {
        let a = format!("a{k:04}");
        let mut item = Item::new();
        item.insert("name", Value::S(format!("Account {k}")));
        item.insert("plan", Value::S("pro".into()));
        item.insert("seats", Value::N(format!("{}", k % 50 + 1)));
        out.push(object(path(&["Accounts", &a]), item));
        for j in 0..ITEMS {
            let mut item = Item::new();
            item.insert("title", Value::S(format!("item {j} of account {k}")));
            item.insert("price", Value::N(format!("{j}.25")));
            item.insert("tags", Value::Ss(vec!["new".into(), format!("t{}", j % 7)]));
            item.insert(
                "raw",
                Value::B(vec![(k % 256) as u8, (j % 256) as u8, 0, 255]),
            );
            item.insert("done", Value::Bool(j % 2 == 0));
            out.push(object(
                path(&["Accounts", &a, "Items", &format!("i{j:02}")]),
                item,
            ));
        }
        for f in 0..FOLDERS {
            let folder = format!("f{f}");
            let mut item = Item::new();
            item.insert("name", Value::S(format!("folder {f}")));
            item.insert("shared", Value::Bool(f == 0));
            out.push(object(path(&["Accounts", &a, "Folders", &folder]), item));
            for g in 0..FILES {
                let mut item = Item::new();
                item.insert("name", Value::S(format!("file {g}.txt")));
                item.insert("size", Value::N(format!("{}", 1024 * (g + 1))));
                item.insert("url", Value::S(format!("s3://bucket/{a}/{folder}/{g}.txt")));
                item.insert(
                    "dims",
                    Value::L(vec![Value::N("3".into()), Value::N("4.5".into())]),
                );
                out.push(object(
                    path(&[
                        "Accounts",
                        &a,
                        "Folders",
                        &folder,
                        "Files",
                        &format!("g{g}"),
                    ]),
                    item,
                ));
            }
        }
    }
    out
}

async fn load(tree: &Tree, accounts: usize) {
    tree.create_table().await.unwrap();
    let built = records(accounts);
    let n = built.len();
    let start = Instant::now();
    tree.import(futures::stream::iter(built.into_iter().map(Ok)))
        .batch(1_000)
        .run()
        .await
        .unwrap();
    eprintln!(
        "(loaded {n} objects in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
}

/// One check, with the number of progress callbacks and the largest read units of one page
/// (the units between two Scan progress reports).
async fn check(tree: &Tree, segments: u32, rate: Option<f64>) -> (Report, u64, f64) {
    let seen = Arc::new(Mutex::new((0u64, 0.0f64, 0.0f64)));
    let log = Arc::clone(&seen);
    let mut c = tree.check().segments(segments).on_progress(move |p| {
        let mut s = log.lock().unwrap();
        s.0 += 1;
        s.2 = s.2.max(p.read_units - s.1);
        s.1 = p.read_units;
    });
    if let Some(r) = rate {
        c = c.read_units_per_second(r);
    }
    let report = c.run().await.unwrap();
    let (calls, _, max_page) = *seen.lock().unwrap();
    (report, calls, max_page)
}

fn row(backend: &str, run: &str, report: &Report, metered: Option<f64>) {
    let secs = report.elapsed().as_secs_f64();
    println!(
        "| {backend} | {run} | {} | {} | {} | {} | {} | {secs:.2} | {:.0} | {:.0} |",
        report.rows(),
        report.pages(),
        report.read_units(),
        report.confirm_read_units(),
        metered.map_or("(not metered)".to_owned(), |m| m.to_string()),
        report.rows() as f64 / secs,
        report.read_units() / secs,
    );
}

/// The checks of one table: 1, 4 and 8 segments, then the budgeted run.
async fn checks<S: Storage + Clone + 'static>(
    backend: &str,
    table: S,
    accounts: usize,
    meter: Option<FakeTable>,
    rate: Option<f64>,
) {
    let tree = Tree::new(table);
    load(&tree, accounts).await;
    let rows = (accounts * ROWS_PER_ACCOUNT + 1) as u64;
    let mut first: Option<(f64, u64)> = None;
    let checked = |report: &Report| {
        assert!(report.is_healthy(), "{backend}: {report}");
        assert_eq!(report.rows(), rows, "{backend}: rows scanned");
        assert_eq!(
            report.confirm_read_units(),
            0.0,
            "{backend}: nothing to confirm"
        );
    };
    for segments in SEGMENTS {
        if let Some(m) = &meter {
            m.reset_metrics();
        }
        let (report, calls, _) = check(&tree, segments, None).await;
        checked(&report);
        assert!(calls >= report.pages(), "a progress report per page");
        let metered = meter.as_ref().map(|m| m.metrics().read_units());
        if let Some(m) = metered {
            assert_eq!(
                report.read_units(),
                m,
                "{backend}, {segments} segments: the report's read units and the metered ones"
            );
            assert_eq!(
                meter.as_ref().unwrap().metrics().requests("Scan"),
                report.pages(),
                "{backend}: one Scan request per page"
            );
        }
        // The same units whatever the segments, give or take each page's rounding up to 4 KB.
        let (u, p) = *first.get_or_insert((report.read_units(), report.pages()));
        assert!(
            (report.read_units() - u).abs() <= 0.5 * (report.pages() + p) as f64,
            "{backend}: {} units with {segments} segments, {u} with 1",
            report.read_units()
        );
        row(
            backend,
            &format!("{segments} segment{}", if segments == 1 { "" } else { "s" }),
            &report,
            metered,
        );
    }
    split(backend, &tree, rows, meter.as_ref()).await;
    let units = first.map_or(0.0, |(u, _)| u);
    let rate = rate.unwrap_or_else(|| (units / 5.0).round().max(1.0));
    if let Some(m) = &meter {
        m.reset_metrics();
    }
    let (report, _, max_page) = check(&tree, BUDGET_SEGMENTS, Some(rate)).await;
    checked(&report);
    let metered = meter.as_ref().map(|m| m.metrics().read_units());
    if let Some(m) = metered {
        assert_eq!(report.read_units(), m, "{backend}, budgeted: read units");
    }
    row(
        backend,
        &format!("{BUDGET_SEGMENTS} segments, budget {rate} units/s"),
        &report,
        metered,
    );
    let secs = report.elapsed().as_secs_f64();
    let average = report.read_units() / secs;
    let allowed = rate + max_page / secs;
    eprintln!(
        "({backend}: budget {rate} units/s: {:.1} units/s on average over {secs:.2} s, \
         largest page {max_page} units; allowed {allowed:.1})",
        average
    );
    assert!(
        average <= allowed,
        "{backend}: {average:.1} units/s on average, over the budget of {rate} (+ one page of {max_page})"
    );
}

/// The check split into `SPLIT_PARTS` parts of `SPLIT_SEGMENTS` segments, each run as its own
/// worker at once and saved as JSON, then merged: the same rows and read units as one check.
/// Prints the parts' size on disk per row and the merge's time.
async fn split<S: Storage + Clone + 'static>(
    backend: &str,
    tree: &Tree<S>,
    rows: u64,
    meter: Option<&FakeTable>,
) {
    const SPLIT_SEGMENTS: u32 = 8;
    const SPLIT_PARTS: u32 = 4;
    if let Some(m) = meter {
        m.reset_metrics();
    }
    let started = Instant::now();
    let per = SPLIT_SEGMENTS / SPLIT_PARTS;
    let workers = (0..SPLIT_PARTS).map(|i| {
        let tree = tree.clone();
        tokio::spawn(async move {
            let part = tree
                .check()
                .segments(SPLIT_SEGMENTS)
                .part(i * per..(i + 1) * per)
                .run_part()
                .await
                .unwrap();
            serde_json::to_vec(&part).unwrap()
        })
    });
    let saved: Vec<Vec<u8>> = futures::future::try_join_all(workers).await.unwrap();
    let scanned = started.elapsed();
    let bytes: usize = saved.iter().map(Vec::len).sum();
    let merge_start = Instant::now();
    let load = || {
        saved
            .iter()
            .map(|b| serde_json::from_slice::<dynatree::check::CheckPart>(b).unwrap())
    };
    let (report, whole_peak) = peak_of(async { tree.check().merge(load()).await.unwrap() }).await;
    let merged = merge_start.elapsed();
    let mb = |b: usize| b as f64 / 1e6;
    eprintln!(
        "({backend}: the merge's peak heap {:.1} MB ({:.0} bytes per row) in {:.2} s)",
        mb(whole_peak),
        whole_peak as f64 / rows as f64,
        merged.as_secs_f64(),
    );
    // The same merge as 4 buckets, one after the other here (4 mergers on 4 machines), by
    // the top-level name (every row is under `Accounts`: one bucket holds them all) and by
    // the first 2 components (by account).
    for depth in [1, 2] {
        let mut bucket_peaks = Vec::new();
        let mut bucket_times = Vec::new();
        for i in 0..SPLIT_PARTS {
            let started = Instant::now();
            let (bucket, peak) = peak_of(async {
                tree.check()
                    .bucket(i, SPLIT_PARTS)
                    .bucket_depth(depth)
                    .merge(load())
                    .await
                    .unwrap()
            })
            .await;
            assert!(bucket.is_healthy(), "{backend}: bucket {i}: {bucket}");
            assert_eq!(bucket.rows(), rows, "{backend}: bucket {i}'s rows");
            bucket_peaks.push(peak);
            bucket_times.push(started.elapsed().as_secs_f64());
        }
        let peaks: Vec<String> = bucket_peaks
            .iter()
            .map(|p| format!("{:.1}", mb(*p)))
            .collect();
        let times: Vec<String> = bucket_times.iter().map(|t| format!("{t:.2}")).collect();
        eprintln!(
            "({backend}: as {SPLIT_PARTS} buckets of depth {depth}, each reading the parts one at a time: peak heap {} MB, in {} s)",
            peaks.join(" / "),
            times.join(" / "),
        );
    }
    assert!(report.is_healthy(), "{backend}: {report}");
    assert_eq!(report.rows(), rows, "{backend}: rows of the merged parts");
    if let Some(m) = meter {
        assert_eq!(
            report.read_units(),
            m.metrics().read_units(),
            "{backend}: the merged report's read units and the metered ones"
        );
    }
    row(
        backend,
        &format!("{SPLIT_SEGMENTS} segments in {SPLIT_PARTS} parts, merged"),
        &report,
        meter.map(|m| m.metrics().read_units()),
    );
    eprintln!(
        "({backend}: {SPLIT_PARTS} parts scanned in {:.2} s, saved as {bytes} bytes of JSON \
         ({:.0} bytes per row), loaded and merged in {:.2} s)",
        scanned.as_secs_f64(),
        bytes as f64 / rows as f64,
        merged.as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let accounts = accounts_wanted();
    let rate = knob("DYNATREE_CHECK_RATE");
    if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        eprintln!("DYNATREE_CHECK_RATE must be a positive number of units per second");
        std::process::exit(2)
    }
    println!(
        "Tree::check() of a healthy tree of {} rows ({accounts} accounts x {} objects).\n",
        accounts * ROWS_PER_ACCOUNT + 1,
        1 + ITEMS + FOLDERS * (1 + FILES)
    );
    println!(
        "| backend | run | rows | pages | RCU (report) | RCU to confirm | RCU (metered) | seconds | rows/s | RCU/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let fake = FakeTable::new();
    checks("FakeTable", fake.clone(), accounts, Some(fake), rate).await;
    if std::env::var("DYNATREE_CHECK_LOCAL").is_ok_and(|v| v == "0") {
        eprintln!("(DynamoDB Local skipped: DYNATREE_CHECK_LOCAL=0)");
        return;
    }
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "DynamoDB Local could not start: {e}\n(set DYNATREE_CHECK_LOCAL=0 to skip it)"
            );
            std::process::exit(1);
        }
    };
    checks("DynamoDB Local", local.fresh_table(), accounts, None, rate).await;
}
