//! [`FakeTable`]: an in-memory table with DynamoDB's semantics, metering and fault injection.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use dynatree::storage::{
    BatchGetOutput, Comparison, Condition, IndexPage, IndexQuery, IndexSpec, Key,
    MAX_HASH_KEY_BYTES, MAX_PROJECTION_NAMES, MAX_RANGE_KEY_BYTES, Op, Page, Query, Request,
    Response, ScanSegment, Storage, TRANSACT_MAX_BYTES, TableDescription, TableStatus,
    TransactAction, UpdateAction, WriteRequest,
};
use dynatree::{
    Error, ErrorKind, Result, error::CancellationReason, storage::Billing, storage::Item,
    storage::MAX_ITEM_BYTES, storage::Value,
};

use crate::fault::{Fault, FaultPlan, FaultRule};
use crate::stream::StreamLog;

/// DynamoDB's 1 MB page limit for Query and Scan.
pub const PAGE_BYTES: usize = 1024 * 1024;
const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// How long DynamoDB remembers a transaction's client request token.
const TOKEN_LIFETIME: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// An in-memory DynamoDB table for tests: no AWS, no network, deterministic.
///
/// It behaves like the real service where dynatree (and your code) can tell: keys in UTF-8 byte
/// order, 1 MB query pages (smaller on request, see [`FakeTable::set_page_bytes`]), every limit
/// (key bytes, 400 KB items, 25/100-item batches, 100-action and 4 MB transactions, no two
/// actions on one item) refused with the error kind DynamoDB gives, conditions, atomic
/// transactions with per-action cancellation reasons, and a table that must be created first.
///
/// It refuses what DynamoDB refuses, with the same error kind: numbers DynamoDB cannot store
/// (NaN, infinities, more than 38 significant digits, magnitudes outside 1E-130 to
/// 9.99…E+125), empty sets and sets with duplicates, empty or over-64 KB attribute names and
/// map keys, index key attributes that are empty, too long or not strings, range conditions on
/// empty or oversized values, `between` with reversed bounds, start keys outside the range
/// condition. Numbers are stored in DynamoDB's canonical form (`"1.50"` reads back `"1.5"`).
/// `tests/local/differential.rs` checks all this against DynamoDB Local with random requests. Where
/// DynamoDB Local 3.3.1 answers in its own way, the fake follows it, documented here:
///
/// - Inside TransactWriteItems, an oversized table key and an index key of another scalar
///   type (`N` or `B` for an `S` attribute) cancel the transaction with a `ValidationError`
///   reason for that action; every other invalid input refuses the whole request
///   ([`ErrorKind::Validation`]).
/// - Two actions on one item are refused ([`ErrorKind::Validation`]) when the second one's
///   condition holds (conditions are evaluated in order, each seeing the earlier actions); a
///   failed condition cancels the transaction instead.
/// - A start key must lie inside the range condition, and the bound the query reads towards
///   is exclusive ([`RangeCondition::accepts_start`](dynatree::storage::RangeCondition::accepts_start));
///   a page that ends on that bound names no last key. A start key has no size limit.
/// - A query's hash key over 2048 bytes is no error; it matches nothing.
/// - Inside TransactWriteItems, an update of a key attribute cancels the transaction with a
///   `ValidationError` reason for that action; anything else wrong with an update (two
///   actions on one attribute, an operand of the wrong type, an attribute of another type in
///   the item, a result over 400 KB) refuses the whole request. (Local then lists only the
///   failing action's reason; the fake gives one per action, as DynamoDB documents.)
/// - UpdateItem without actions is valid: it creates an absent item with just its key.
/// - A TransactWriteItems request is refused over 4 MB
///   ([`TRANSACT_MAX_BYTES`](dynatree::storage::TRANSACT_MAX_BYTES)) of
///   [`TransactAction::payload_size`]: the items put, the keys of the other actions and the
///   actions' expressions, not what the actions find stored.
/// - A projection ([`Storage::get_item_projected`], [`Storage::batch_get_projected`],
///   [`IndexQuery::projection`](dynatree::storage::IndexQuery::projection)) returns the named
///   attributes an item has (an item with none of them is an empty item; BatchGetItem and
///   Query return it too), adds no key attributes, and is metered (and paged) by the whole
///   item, as DynamoDB documents. A name given twice, an empty name and more than
///   [`MAX_PROJECTION_NAMES`] names are refused (Local names two different paths when it
///   reports the overlap; the fake names the repeated one).
///
/// Two quirks of DynamoDB Local the fake does not copy: Local fails with `InternalFailure` on
/// attribute names of about 40,000 bytes and more (the service takes names up to 65,535 bytes),
/// and returns numbers nested in lists and maps as they were sent.
///
/// It also **meters** every request by DynamoDB's published capacity rules
/// ([`FakeTable::metrics`]) and **injects faults** by operation and key
/// ([`FakeTable::inject_rule`]), so your tests can assert what a code path costs and how it
/// survives throttling or lost responses. Opt-in, its eventually consistent reads can be
/// **stale** ([`FakeTable::set_read_lag`]), so your tests catch code that reads its own writes
/// without asking for consistency.
///
/// Clones share one table, so keep a clone to inspect it after handing one to a [`Tree`](dynatree::Tree).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree_testing::FakeTable;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
///
/// #[derive(serde::Serialize)]
/// struct Doc { title: String }
/// tree.put(["a", "b", "c"], &Doc { title: "hello".into() }).await?;
///
/// table.reset_metrics();
/// tree.put(["a", "b", "c"], &Doc { title: "again".into() }).await?;
/// let m = table.metrics();
/// assert_eq!(m.total_requests(), 1); // one TransactWriteItems, whatever the depth
/// assert_eq!(m.writes_to("¦"), 0); // the root partition is not written again
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct FakeTable {
    inner: Arc<Mutex<Inner>>,
    faults: Arc<FaultPlan>,
}

#[derive(Debug, Default)]
struct Inner {
    table: Option<TableState>,
    metrics: Metrics,
    page_bytes: Option<usize>,
    /// How many of the latest write requests eventually consistent reads may miss (0: every
    /// read is strongly consistent).
    lag: usize,
    /// The undo log of the latest write requests, oldest first, at most `lag` of them: for
    /// each, the rows it changed with their values before it.
    log: VecDeque<Vec<(Key, Option<Item>)>>,
    /// While [`FakeTable::metered`] runs: the units each request consumed, by partition.
    ledger: Option<Vec<Consumed>>,
}

/// Units one request consumed in one partition (`hash: None`: across partitions, a Scan or a
/// secondary index), recorded for the service model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Consumed {
    pub(crate) hash: Option<String>,
    pub(crate) read: f64,
    pub(crate) write: f64,
}

#[derive(Debug)]
struct TableState {
    hash_name: String,
    range_name: String,
    billing: Billing,
    indexes: Vec<IndexSpec>,
    /// An index added by UpdateTable, reported `Creating` by the next DescribeTable (then
    /// active), as DynamoDB builds indexes in the background.
    building: Option<String>,
    rows: BTreeMap<String, BTreeMap<String, Item>>,
    /// With a read lag: the rows changed by the current request and their old values, moved
    /// to the undo log when the next request begins.
    journal: Option<Vec<(Key, Option<Item>)>>,
    /// The time-to-live attribute, once enabled.
    ttl: Option<String>,
    /// Whether the table's stream is enabled (view type `NEW_AND_OLD_IMAGES`).
    stream: bool,
    /// The stream's records, once enabled (see [`crate::stream`]).
    stream_log: StreamLog,
    /// Client request tokens of the transactions that succeeded, with their actions and when
    /// they ran (forgotten after [`TOKEN_LIFETIME`]).
    tokens: HashMap<String, (Vec<TransactAction>, tokio::time::Instant)>,
}

/// What a [`FakeTable`] has served: requests per operation, capacity units, writes per
/// partition key. All counts are deterministic.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// tree.put(["a"], &V { v: 1 }).await?;
/// table.reset_metrics();
/// let _: Option<serde_json::Value> = tree.get(["a"]).await?;
/// let m = table.metrics();
/// assert_eq!(m.requests("GetItem"), 1);
/// assert_eq!(m.read_units(), 0.5); // eventually consistent, under 4 KB
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    requests: BTreeMap<&'static str, u64>,
    read_units: f64,
    write_units: f64,
    partition_writes: BTreeMap<String, u64>,
}

impl Metrics {
    /// Requests of one operation (`"GetItem"`, `"TransactWriteItems"`, …), failed ones included.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// assert_eq!(m.requests("PutItem"), 2);
    /// assert_eq!(m.requests("GetItem"), 1);
    /// assert_eq!(m.requests("Query"), 0);
    /// # Ok(()) }
    /// ```
    pub fn requests(&self, operation: &str) -> u64 {
        self.requests.get(operation).copied().unwrap_or(0)
    }

    /// Requests of every operation.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// assert_eq!(m.total_requests(), 3);
    /// # Ok(()) }
    /// ```
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Requests per operation.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// let ops: Vec<(&str, u64)> = m.requests_by_operation().iter().map(|(op, n)| (*op, *n)).collect();
    /// assert_eq!(ops, [("GetItem", 1), ("PutItem", 2)]);
    /// # Ok(()) }
    /// ```
    pub fn requests_by_operation(&self) -> &BTreeMap<&'static str, u64> {
        &self.requests
    }

    /// Read capacity units consumed: 1 per 4 KB strongly consistent, half that eventually
    /// consistent, twice that in transactions; a Query or Scan sums its items' sizes first.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// assert_eq!(m.read_units(), 1.0); // one strongly consistent read under 4 KB
    /// table.get_item(&Key::new("h", "a"), false).await?;
    /// assert_eq!(table.metrics().read_units(), 1.5); // eventually consistent: half
    /// # Ok(()) }
    /// ```
    pub fn read_units(&self) -> f64 {
        self.read_units
    }

    /// Write capacity units consumed: 1 per 1 KB of the larger of the old and new item, twice
    /// that in transactions (condition checks included).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// assert_eq!(m.write_units(), 2.0); // two puts under 1 KB
    /// # Ok(()) }
    /// ```
    pub fn write_units(&self) -> f64 {
        self.write_units
    }

    /// Item writes (puts and deletes) that went to partition key `hash`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// assert_eq!(m.writes_to("h"), 2);
    /// assert_eq!(m.writes_to("other"), 0);
    /// # Ok(()) }
    /// ```
    pub fn writes_to(&self, hash: &str) -> u64 {
        self.partition_writes.get(hash).copied().unwrap_or(0)
    }

    /// Item writes per partition key.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.reset_metrics();
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.get_item(&Key::new("h", "a"), true).await?;
    /// let m = table.metrics();
    /// assert_eq!(m.partition_writes().get("h"), Some(&2));
    /// assert_eq!(m.partition_writes().len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn partition_writes(&self) -> &BTreeMap<String, u64> {
        &self.partition_writes
    }
}

fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent { units } else { units / 2.0 }
}

fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

fn validation(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Validation, msg)
}

/// Refuses a projection as DynamoDB refuses it (names sent as `#p0,#p1,…`): too long an
/// expression, an empty name, a name given twice.
fn check_projection(names: &[String]) -> Result<()> {
    if names.len() > MAX_PROJECTION_NAMES {
        return Err(validation(format!(
            "invalid ProjectionExpression: expression size has exceeded the maximum allowed size \
             ({} names, at most {MAX_PROJECTION_NAMES} fit in 4 KB)",
            names.len()
        )));
    }
    let mut seen = HashSet::new();
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(validation(format!(
                "ExpressionAttributeNames contains invalid value: empty attribute name for key #p{i}"
            )));
        }
        if !seen.insert(name.as_str()) {
            return Err(validation(format!(
                "invalid ProjectionExpression: two document paths overlap with each other; \
                 path one: [{name}], path two: [{name}]"
            )));
        }
    }
    Ok(())
}

/// The named top-level attributes `item` has (every attribute if `names` is empty).
fn project(item: Item, names: &[String]) -> Item {
    if names.is_empty() {
        return item;
    }
    let mut out = Item::new();
    for name in names {
        if let Some(v) = item.get(name) {
            out.insert(name.clone(), v.clone());
        }
    }
    out
}

impl FakeTable {
    /// A fake account with no table yet: call [`Tree::create_table`](dynatree::Tree::create_table)
    /// (or [`Storage::create_table`]) first, as with DynamoDB.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// assert!(table.describe_table().await?.is_none()); // no table yet
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// assert!(table.describe_table().await?.is_some_and(|d| d.has_tree_schema()));
    /// # Ok(()) }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake whose table already exists with another key schema (for testing that a tree
    /// refuses it).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::with_schema("id", "sort");
    /// let description = table.describe_table().await?.expect("the table exists");
    /// assert_eq!(description.hash_key.0, "id");
    /// assert!(!description.has_tree_schema());
    /// # Ok(()) }
    /// ```
    pub fn with_schema(hash_key: &str, range_key: &str) -> Self {
        let fake = Self::new();
        fake.lock().table = Some(TableState {
            hash_name: hash_key.to_owned(),
            range_name: range_key.to_owned(),
            billing: Billing::OnDemand,
            indexes: Vec::new(),
            building: None,
            rows: BTreeMap::new(),
            journal: None,
            ttl: None,
            stream: false,
            stream_log: StreamLog::default(),
            tokens: HashMap::new(),
        });
        fake
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not poison every later assertion.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the table has served since it was made or [`reset_metrics`](Self::reset_metrics).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// let before = table.metrics();
    /// table.put_item(Key::new("h", "r").into_item(), Condition::Always).await?;
    /// let after = table.metrics();
    /// assert_eq!(after.total_requests(), before.total_requests() + 1); // `before` is a snapshot
    /// assert_eq!(after.requests("PutItem"), 1);
    /// assert_eq!(after.write_units(), 1.0); // one small item
    /// # Ok(()) }
    /// ```
    pub fn metrics(&self) -> Metrics {
        self.lock().metrics.clone()
    }

    /// Zeroes the metrics. Faults placed by request number ([`inject`](Self::inject)) are
    /// removed too, as their numbering restarts; rules placed by
    /// [`inject_rule`](Self::inject_rule) and [`inject_always`](Self::inject_always) stay.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// assert_eq!(table.metrics().requests("CreateTable"), 1);
    /// table.reset_metrics();
    /// assert_eq!(table.metrics().total_requests(), 0);
    /// assert_eq!(table.metrics(), Default::default());
    /// # Ok(()) }
    /// ```
    pub fn reset_metrics(&self) {
        let mut inner = self.lock();
        inner.metrics = Metrics::default();
        self.faults.clear_numbered();
    }

    /// Makes request number `nth` (0-based, counted from now, whatever its operation) fail
    /// with `fault`. This depends on the exact requests dynatree sends; prefer
    /// [`inject_rule`](Self::inject_rule), which matches requests by operation and key.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{Fault, FakeTable};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject(0, Fault::Fail);
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// assert!(tree.put(["a"], &V { v: 1 }).await.is_err());
    /// tree.put(["a"], &V { v: 1 }).await?; // the next request is fine
    /// # Ok(()) }
    /// ```
    pub fn inject(&self, nth: u64, fault: Fault) {
        self.faults.inject_nth(nth, fault);
    }

    /// Makes every request fail with `fault` until [`clear_faults`](Self::clear_faults):
    /// `inject_rule(FaultRule::new(fault).always())`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{Fault, FakeTable};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_always(Fault::Fail);
    /// assert!(tree.get::<V>(["a"]).await.is_err());
    /// assert!(tree.get::<V>(["a"]).await.is_err());
    /// # Ok(()) }
    /// ```
    pub fn inject_always(&self, fault: Fault) {
        self.faults.add(FaultRule::new(fault).always());
    }

    /// Injects a fault where `rule` says: by operation, key or hash-key prefix, on the n-th
    /// matching request, once, n times or always. See [`FaultRule`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{Fault, FaultRule, FakeTable, Op};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::GetItem).always());
    /// tree.put(["a"], &V { v: 1 }).await?; // writes are untouched
    /// assert!(tree.get::<V>(["a"]).await.unwrap_err().is_throttled());
    /// # Ok(()) }
    /// ```
    pub fn inject_rule(&self, rule: FaultRule) {
        self.faults.add(rule);
    }

    /// Removes every injected fault (the log of [`fired`](Self::fired) faults stays).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{Fault, FakeTable};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_always(Fault::Fail);
    /// table.clear_faults();
    /// assert!(tree.get::<V>(["a"]).await.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn clear_faults(&self) {
        self.faults.clear();
    }

    /// The faults that fired so far, in order, with the operation they struck (for
    /// assertions that a fault was really exercised).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{Fault, FaultRule, FakeTable, Op};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::TransactWriteItems));
    /// tree.put(["a"], &V { v: 1 }).await?; // retried after the throttle
    /// assert_eq!(table.fired(), [(Op::TransactWriteItems, Fault::Throttle)]);
    /// # Ok(()) }
    /// ```
    pub fn fired(&self) -> Vec<(Op, Fault)> {
        self.faults.fired()
    }

    /// The table's fault plan (shared by its clones).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::{Fault, FakeTable};
    /// let table = FakeTable::new();
    /// table.inject(0, Fault::Fail);
    /// assert!(table.plan().is_armed());
    /// ```
    pub fn plan(&self) -> &FaultPlan {
        &self.faults
    }

    /// A fake whose eventually consistent reads lag `writes` write requests behind:
    /// `FakeTable::new()` then [`set_read_lag(writes)`](Self::set_read_lag).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// let table = FakeTable::eventually_consistent(1);
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// tree.put(["a"], &V { v: 1 }).await?;
    /// assert_eq!(tree.get::<V>(["a"]).await?, None); // not replicated yet
    /// table.settle();
    /// assert_eq!(tree.get::<V>(["a"]).await?, Some(V { v: 1 }));
    /// # Ok(()) }
    /// ```
    pub fn eventually_consistent(writes: usize) -> Self {
        let fake = Self::new();
        fake.set_read_lag(writes);
        fake
    }

    /// Opt-in eventual consistency: reads that are not strongly consistent see the table as it
    /// was before the latest `writes` write requests (PutItem, DeleteItem, BatchWriteItem and
    /// TransactWriteItems that changed something; a batch or transaction shows all at once).
    /// Such reads are GetItem, BatchGetItem and Query with `consistent = false`, every Scan
    /// (dynatree never asks a Scan for consistency) and every index Query (DynamoDB's global
    /// secondary indexes are only eventually consistent). Strongly consistent reads and the
    /// conditions of writes always see the latest state. 0 (the default) turns it off.
    ///
    /// The choice is deterministic, always the oldest state within the lag, so a test that
    /// passes once passes every time; [`settle`](Self::settle) makes everything visible, as
    /// replication catching up. Cheap: the table keeps only the old values of the rows the last
    /// `writes` requests changed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage}; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.set_read_lag(2);
    /// let key = Key::new("h", "r");
    /// table.put_item(key.clone().into_item(), Condition::Always).await?;
    /// assert_eq!(table.get_item(&key, false).await?, None); // stale
    /// assert!(table.get_item(&key, true).await?.is_some()); // consistent: the latest
    /// table.put_item(Key::new("h", "s").into_item(), Condition::Always).await?;
    /// assert_eq!(table.get_item(&key, false).await?, None); // still within the lag of 2
    /// table.put_item(Key::new("h", "t").into_item(), Condition::Always).await?;
    /// assert!(table.get_item(&key, false).await?.is_some()); // 3 writes ago: visible
    /// # Ok(()) }
    /// ```
    pub fn set_read_lag(&self, writes: usize) {
        let mut inner = self.lock();
        inner.lag = writes;
        while inner.log.len() > writes {
            inner.log.pop_front();
        }
        if writes == 0
            && let Some(t) = inner.table.as_mut()
        {
            t.journal = None;
        }
    }

    /// Makes every write visible to eventually consistent reads (replication caught up); the
    /// lag applies again to later writes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage}; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::eventually_consistent(5);
    /// Tree::new(table.clone()).create_table().await?;
    /// let key = Key::new("h", "r");
    /// table.put_item(key.clone().into_item(), Condition::Always).await?;
    /// assert_eq!(table.get_item(&key, false).await?, None);
    /// table.settle();
    /// assert!(table.get_item(&key, false).await?.is_some());
    /// # Ok(()) }
    /// ```
    pub fn settle(&self) {
        let mut inner = self.lock();
        inner.log.clear();
        if let Some(j) = inner.table.as_mut().and_then(|t| t.journal.as_mut()) {
            j.clear();
        }
    }

    /// Sets the Query/Scan page size in bytes (default 1 MB, as DynamoDB), to test pagination
    /// without megabytes of data.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// use dynatree::storage::Query;
    ///
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// for r in ["a", "b", "c"] {
    ///     table.put_item(Key::new("h", r).into_item(), Condition::Always).await?;
    /// }
    /// table.set_page_bytes(1); // every page stops after its first item
    /// let page = table.query_page(&Query::new("h"), None).await?;
    /// assert_eq!(page.items.len(), 1);
    /// assert_eq!(page.last_key, Some(Key::new("h", "a")));
    /// # Ok(()) }
    /// ```
    pub fn set_page_bytes(&self, bytes: usize) {
        self.lock().page_bytes = Some(bytes.max(1));
    }

    /// Runs DynamoDB's time-to-live process now: deletes every item whose time-to-live
    /// attribute ([`Storage::enable_ttl`]) is a number of epoch seconds below
    /// `now_epoch_seconds`, and returns how many it deleted. Items whose attribute is missing
    /// or not a number are kept; nothing happens while time to live is not enabled. Like
    /// DynamoDB's background deletions, it is not a request: not metered, no faults.
    ///
    /// DynamoDB deletes expired items some time (typically within days) after they expire,
    /// so an expired item may still be read until then: call this where your test wants the
    /// deletion to have happened.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Tree, storage::Value};
    /// # use dynatree::storage::{Condition, Key, Storage}; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_ttl("expires").await?;
    /// for (r, expires) in [("a", Value::N("100".into())), ("b", Value::N("300".into())), ("c", Value::S("100".into()))] {
    ///     let mut item = Key::new("h", r).into_item();
    ///     item.insert("expires", expires);
    ///     table.put_item(item, Condition::Always).await?;
    /// }
    /// table.reset_metrics();
    /// assert_eq!(table.expire_ttl(200), 1); // "a"; "c" is not a number
    /// assert_eq!(table.metrics().total_requests(), 0);
    /// assert_eq!(table.rows().len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn expire_ttl(&self, now_epoch_seconds: u64) -> usize {
        let mut inner = self.lock();
        let Some(t) = inner.table.as_mut() else {
            return 0;
        };
        let Some(attr) = t.ttl.clone() else {
            return 0;
        };
        let expired = Condition::compare(
            attr,
            Comparison::Lt,
            Value::N(now_epoch_seconds.to_string()),
        );
        let keys: Vec<Key> = t
            .rows
            .values()
            .flat_map(BTreeMap::values)
            .filter(|item| expired.eval(Some(item)))
            .filter_map(Key::from_item)
            .collect();
        for k in &keys {
            t.delete(k);
        }
        keys.len()
    }

    /// Every row, in key order (hash, then range).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("g", "z").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// let keys: Vec<Key> = table.rows().iter().filter_map(Key::from_item).collect();
    /// assert_eq!(keys, [Key::new("g", "z"), Key::new("h", "a"), Key::new("h", "b")]);
    /// # Ok(()) }
    /// ```
    pub fn rows(&self) -> Vec<Item> {
        self.lock()
            .table
            .as_ref()
            .map(|t| t.rows.values().flat_map(|r| r.values().cloned()).collect())
            .unwrap_or_default()
    }

    /// Runs `f` (requests to this table) and returns what they consumed, by partition: the
    /// service model's metering. Requests of other callers in the meantime are counted too.
    pub(crate) async fn metered<F: std::future::Future>(&self, f: F) -> (F::Output, Vec<Consumed>) {
        self.lock().ledger = Some(Vec::new());
        let out = f.await;
        let consumed = self.lock().ledger.take().unwrap_or_default();
        (out, consumed)
    }

    /// Runs `f` on the stream's log (empty without a table), not as a request.
    pub(crate) fn with_stream_log<R>(&self, f: impl FnOnce(&StreamLog) -> R) -> R {
        let inner = self.lock();
        match inner.table.as_ref() {
            Some(t) => f(&t.stream_log),
            None => f(&StreamLog::default()),
        }
    }

    /// Runs `f` on the stream's log of the table (nothing without one), not as a request.
    pub(crate) fn with_stream_log_mut(&self, f: impl FnOnce(&mut StreamLog)) {
        let mut inner = self.lock();
        if let Some(t) = inner.table.as_mut() {
            f(&mut t.stream_log);
        }
    }

    /// Starts a request of operation `op` touching `keys`: counts it, moves the previous
    /// request's changes to the undo log, and returns the fault it must suffer, if any.
    fn begin(&self, inner: &mut Inner, op: Op, keys: &[Key]) -> Result<Option<Fault>> {
        *inner.metrics.requests.entry(op.name()).or_default() += 1;
        if let Some(t) = inner.table.as_mut() {
            if inner.lag == 0 {
                t.journal = None;
            } else {
                let changes = std::mem::take(t.journal.get_or_insert_with(Vec::new));
                if !changes.is_empty() {
                    inner.log.push_back(changes);
                    while inner.log.len() > inner.lag {
                        inner.log.pop_front();
                    }
                }
            }
        }
        match self.faults.on_request(op, keys) {
            Some(Fault::Throttle) => Err(Error::new(
                ErrorKind::Throttled,
                format!("injected throttle on {op}"),
            )),
            Some(Fault::Fail) => Err(Error::new(
                ErrorKind::Backend,
                format!("injected failure of {op}"),
            )),
            Some(Fault::InternalError) => Err(crate::fault::internal_error(op)),
            Some(Fault::Conflict) => match op {
                Op::TransactWriteItems | Op::TransactGetItems => {
                    Err(conflict_cancellation(keys.len()))
                }
                Op::PutItem | Op::DeleteItem | Op::UpdateItem => Err(Error::new(
                    ErrorKind::Conflict,
                    format!("injected transaction conflict on {op}"),
                )
                .with_service_code("TransactionConflictException")),
                _ => Ok(None),
            },
            other => Ok(other),
        }
    }

    fn finish<T>(fault: Option<&Fault>, op: &str, value: T) -> Result<T> {
        if fault == Some(&Fault::FailAfterApply) {
            return Err(Error::new(
                ErrorKind::Backend,
                format!("injected lost response of {op} (it was applied)"),
            ));
        }
        Ok(value)
    }
}

/// A transaction of `actions` actions cancelled because another transaction was changing the
/// item of its first action.
pub(crate) fn conflict_cancellation(actions: usize) -> Error {
    let reasons = std::iter::once(CancellationReason::new("TransactionConflict", None))
        .chain(std::iter::repeat_with(CancellationReason::none))
        .take(actions.max(1))
        .collect();
    Error::transaction_canceled(reasons)
}

/// Eventually consistent views: the rows as they were before the writes in the undo log.
impl Inner {
    /// The stale value of `key` if a logged write changed it (`Some(None)`: it did not exist).
    fn stale_get(&self, key: &Key) -> Option<Option<Item>> {
        self.log
            .iter()
            .flatten()
            .find(|(k, _)| k == key)
            .map(|(_, old)| old.clone())
    }

    /// The stale values of every row the logged writes changed, the oldest value of each.
    fn stale_changes(&self, hash: Option<&str>) -> BTreeMap<Key, Option<Item>> {
        let mut changes = BTreeMap::new();
        for (k, old) in self.log.iter().flatten() {
            if hash.is_none_or(|h| h == k.hash) {
                changes.entry(k.clone()).or_insert_with(|| old.clone());
            }
        }
        changes
    }

    /// The stale rows of the table (of one partition, with `hash`), when they differ from the
    /// latest.
    fn stale_rows(&self, hash: Option<&str>) -> Option<BTreeMap<String, BTreeMap<String, Item>>> {
        let t = self.table.as_ref()?;
        let changes = self.stale_changes(hash);
        if changes.is_empty() {
            return None;
        }
        let mut rows = match hash {
            Some(h) => t
                .rows
                .get_key_value(h)
                .map(|(h, part)| BTreeMap::from([(h.clone(), part.clone())]))
                .unwrap_or_default(),
            None => t.rows.clone(),
        };
        for (k, old) in changes {
            match old {
                Some(item) => {
                    rows.entry(k.hash).or_default().insert(k.range, item);
                }
                None => {
                    if let Some(part) = rows.get_mut(&k.hash) {
                        part.remove(&k.range);
                        if part.is_empty() {
                            rows.remove(&k.hash);
                        }
                    }
                }
            }
        }
        Some(rows)
    }
}

impl Inner {
    fn table(&mut self) -> Result<&mut TableState> {
        self.table.as_mut().ok_or_else(|| {
            Error::new(
                ErrorKind::TableNotFound,
                "requested resource not found: table does not exist",
            )
        })
    }

    /// Records units consumed for [`FakeTable::metered`] (the metrics are kept apart).
    fn consumed(&mut self, hash: Option<&str>, read: f64, write: f64) {
        if let Some(ledger) = &mut self.ledger {
            ledger.push(Consumed {
                hash: hash.map(str::to_owned),
                read,
                write,
            });
        }
    }

    fn note_write(&mut self, hash: &str, units: f64) {
        self.consumed(Some(hash), 0.0, units);
        self.metrics.write_units += units;
        *self
            .metrics
            .partition_writes
            .entry(hash.to_owned())
            .or_default() += 1;
    }
}

impl TableState {
    fn check_key(&self, key: &Key) -> Result<()> {
        match self.check_key_parts(key)? {
            Some(problem) => Err(validation(problem)),
            None => Ok(()),
        }
    }

    /// Checks a key: an empty value is an error of the whole request; an oversized one is
    /// returned apart, because inside TransactWriteItems DynamoDB reports it as the action's
    /// cancellation reason (`ValidationError`) instead. The hash key is checked before the
    /// range key, and the first problem found ends the check: an oversized hash key with an
    /// empty range key cancels the transaction rather than refusing it (DynamoDB Local 3.3.1).
    fn check_key_parts(&self, key: &Key) -> Result<Option<String>> {
        for (name, v, max) in [
            (&self.hash_name, &key.hash, MAX_HASH_KEY_BYTES),
            (&self.range_name, &key.range, MAX_RANGE_KEY_BYTES),
        ] {
            if v.is_empty() {
                return Err(validation(format!(
                    "one or more parameter values are not valid: the attribute value for key attribute `{name}` cannot be an empty string"
                )));
            }
            if v.len() > max {
                return Ok(Some(format!(
                    "hash primary key values must be under {MAX_HASH_KEY_BYTES} bytes, and range primary key values must be under {MAX_RANGE_KEY_BYTES} bytes ({} and {} bytes given)",
                    key.hash.len(),
                    key.range.len()
                )));
            }
        }
        Ok(None)
    }

    fn check_item(&self, item: &Item) -> Result<Key> {
        match self.check_item_parts(item)? {
            (_, Some(problem)) => Err(validation(problem)),
            (key, None) => Ok(key),
        }
    }

    /// Checks an item as DynamoDB does: its key, its size, every name and value
    /// ([`Item::check`]: numbers, sets, map keys), and its index key attributes (strings of 1
    /// to 2048 bytes for an index hash key, 1 to 1024 for a range key). Returns apart the
    /// problems DynamoDB reports per action inside a transaction (an oversized table key, an
    /// index key of another scalar type) rather than refusing the whole request.
    fn check_item_parts(&self, item: &Item) -> Result<(Key, Option<String>)> {
        let key = match (item.get(&self.hash_name), item.get(&self.range_name)) {
            (Some(Value::S(h)), Some(Value::S(r))) => Key::new(h.clone(), r.clone()),
            (Some(_), Some(_)) => {
                return Err(validation(
                    "one or more parameter values were invalid: type mismatch for key",
                ));
            }
            _ => {
                return Err(validation(format!(
                    "one of the required keys was not given a value: `{}` and `{}` (type S)",
                    self.hash_name, self.range_name
                )));
            }
        };
        let late = self.check_key_parts(&key)?;
        item.check().map_err(|e| validation(e.to_string()))?;
        let size = item.size();
        if size > MAX_ITEM_BYTES {
            return Err(validation(format!(
                "item size has exceeded the maximum allowed size ({size} > {MAX_ITEM_BYTES} bytes)"
            )));
        }
        if late.is_some() {
            // An oversized table key is reported before any index key problem.
            return Ok((key, late));
        }
        let index_keys = || {
            self.indexes.iter().flat_map(|ix| {
                [
                    Some((ix, &ix.hash_attr, MAX_HASH_KEY_BYTES)),
                    ix.range_attr.as_ref().map(|a| (ix, a, MAX_RANGE_KEY_BYTES)),
                ]
                .into_iter()
                .flatten()
            })
        };
        // Index keys are checked in order (each index's hash key, then its range key); the
        // first problem found is the one reported. An index key of another scalar type is
        // reported per action inside a transaction (DynamoDB Local 3.3.1).
        for (ix, attr, max) in index_keys() {
            match item.get(attr) {
                None => {}
                Some(Value::N(_) | Value::B(_)) => {
                    return Ok((
                        key,
                        Some(format!(
                            "one or more parameter values were invalid: type mismatch for index key `{attr}` of index {}",
                            ix.name
                        )),
                    ));
                }
                Some(Value::S(v)) if v.is_empty() => {
                    return Err(validation(format!(
                        "one or more parameter values are not valid: a value specified for a secondary index key is not supported: the attribute value for a key attribute cannot contain an empty string value (index {}, key {attr})",
                        ix.name
                    )));
                }
                Some(Value::S(v)) if v.len() > max => {
                    return Err(validation(format!(
                        "one or more parameter values were invalid: size limit exceeded: index key `{attr}` of index {} is {} bytes (at most {max})",
                        ix.name,
                        v.len()
                    )));
                }
                Some(Value::S(_)) => {}
                Some(_) => {
                    return Err(validation(format!(
                        "invalid attribute value type for index key `{attr}` of index {}",
                        ix.name
                    )));
                }
            }
        }
        Ok((key, late))
    }

    fn get(&self, key: &Key) -> Option<&Item> {
        self.rows.get(&key.hash)?.get(&key.range)
    }

    fn put(&mut self, key: Key, item: Item) -> Option<Item> {
        let journal_key = self.journal.is_some().then(|| key.clone());
        let stream_key = self.stream.then(|| key.clone());
        let old = self
            .rows
            .entry(key.hash)
            .or_default()
            .insert(key.range, item.normalized());
        if let (Some(journal), Some(key)) = (self.journal.as_mut(), journal_key) {
            journal.push((key, old.clone()));
        }
        if let Some(key) = stream_key {
            // A put that changes nothing writes no stream record (`record` checks).
            let new = self.get(&key).cloned();
            self.stream_log.record(key, old.clone(), new);
        }
        old
    }

    fn delete(&mut self, key: &Key) -> Option<Item> {
        let part = self.rows.get_mut(&key.hash)?;
        let old = part.remove(&key.range);
        if part.is_empty() {
            self.rows.remove(&key.hash);
        }
        if let (Some(journal), Some(item)) = (self.journal.as_mut(), &old) {
            journal.push((key.clone(), Some(item.clone())));
        }
        if self.stream && old.is_some() {
            self.stream_log.record(key.clone(), old.clone(), None);
        }
        old
    }
}

/// DynamoDB checks a condition's names and values like an item's (`ExpressionAttributeNames`,
/// `ExpressionAttributeValues`), and its operand types ([`Condition::check`]).
fn check_condition(condition: &Condition) -> Result<()> {
    condition
        .check()
        .map_err(|e| validation(format!("invalid condition expression: {e}")))
}

/// DynamoDB checks an update expression before it reads the item
/// ([`UpdateAction::check_all`]).
fn check_update(actions: &[UpdateAction]) -> Result<()> {
    UpdateAction::check_all(actions)
        .map_err(|e| validation(format!("invalid update expression: {e}")))
}

fn condition_failed() -> Error {
    Error::new(ErrorKind::ConditionFailed, "the conditional request failed")
}

impl FakeTable {
    /// TransactWriteItems, with a client request token if given.
    async fn transact(&self, actions: Vec<TransactAction>, token: Option<&str>) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let touched: Vec<Key> = actions.iter().filter_map(TransactAction::key).collect();
        let fault = self.begin(&mut inner, Op::TransactWriteItems, &touched)?;
        let t = inner.table()?;
        if actions.is_empty() || actions.len() > dynatree::storage::TRANSACT_MAX {
            return Err(validation(format!(
                "member must have length between 1 and {}: {} actions",
                dynatree::storage::TRANSACT_MAX,
                actions.len()
            )));
        }
        let mut seen = HashSet::new();
        let mut total = 0;
        let mut keys = Vec::with_capacity(actions.len());
        // Problems DynamoDB reports as an action's cancellation reason rather than refusing
        // the request: an oversized key, an index key of another scalar type.
        let mut late = Vec::with_capacity(actions.len());
        for a in &actions {
            total += a.payload_size();
            let (key, problem) = match a {
                TransactAction::Put { item, condition } => {
                    check_condition(condition)?;
                    t.check_item_parts(item)?
                }
                TransactAction::Delete { key, condition }
                | TransactAction::ConditionCheck { key, condition } => {
                    check_condition(condition)?;
                    (key.clone(), t.check_key_parts(key)?)
                }
                TransactAction::Update {
                    key,
                    actions,
                    condition,
                } => {
                    if actions.is_empty() {
                        return Err(Error::new(
                            ErrorKind::InvalidArgument,
                            "an update inside a transaction needs at least one action (TransactWriteItems requires an update expression)",
                        ));
                    }
                    check_condition(condition)?;
                    // Inside a transaction DynamoDB (Local 3.3.1) reports an update of a key
                    // attribute as the action's cancellation reason; everything else wrong
                    // with an update expression refuses the request.
                    let is_key = |a: &&UpdateAction| {
                        a.name() == t.hash_name.as_str() || a.name() == t.range_name.as_str()
                    };
                    let others: Vec<UpdateAction> =
                        actions.iter().filter(|a| !is_key(a)).cloned().collect();
                    check_update(&others)?;
                    let late = t.check_key_parts(key)?.or_else(|| {
                        actions.iter().find(is_key).map(|a| {
                            format!(
                                "one or more parameter values were invalid: cannot update attribute {}: this attribute is part of the key",
                                a.name()
                            )
                        })
                    });
                    (key.clone(), late)
                }
            };
            keys.push(key);
            late.push(problem);
        }
        if total > TRANSACT_MAX_BYTES {
            return Err(validation(format!(
                "Transaction payload size cannot exceed 4MB. Payload Size: {total}"
            )));
        }
        let now = tokio::time::Instant::now();
        if let Some(token) = token {
            let len = token.chars().count();
            if !(1..=36).contains(&len) {
                return Err(validation(format!(
                    "1 validation error detected: value at 'clientRequestToken' failed to satisfy constraint: member must have length between 1 and 36 ({len} characters)"
                )));
            }
            t.tokens
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < TOKEN_LIFETIME);
            if let Some((seen, _)) = t.tokens.get(token) {
                if *seen == actions {
                    // Already applied: success, nothing applied again.
                    return Self::finish(fault.as_ref(), "TransactWriteItems", ());
                }
                return Err(validation(
                    "the request uses the same client token as a previous, but non-identical request",
                )
                .with_service_code("IdempotentParameterMismatchException"));
            }
        }
        let remembered = token.map(|tk| (tk.to_owned(), actions.clone()));
        // Conditions are evaluated in order, each against the item as the earlier actions of
        // this transaction left it. That only matters for two actions on one item, which
        // DynamoDB refuses. DynamoDB Local 3.3.1 refuses it when it meets an action whose
        // condition holds on an item an earlier action with a holding condition targeted;
        // actions whose condition fails do not count, and cancel the transaction.
        let mut reasons = Vec::with_capacity(actions.len());
        let mut overlay: HashMap<&Key, Option<Item>> = HashMap::new();
        // The item each update leaves, by action.
        let mut updated: Vec<Option<Item>> = vec![None; actions.len()];
        for (i, ((a, k), problem)) in actions.iter().zip(&keys).zip(late).enumerate() {
            if let Some(problem) = problem {
                reasons.push(CancellationReason::new("ValidationError", Some(problem)));
                continue;
            }
            let cond = match a {
                TransactAction::Put { condition, .. }
                | TransactAction::Delete { condition, .. }
                | TransactAction::ConditionCheck { condition, .. }
                | TransactAction::Update { condition, .. } => condition,
            };
            let current = match overlay.get(k) {
                Some(v) => v.as_ref(),
                None => t.get(k),
            };
            if cond.eval(current) {
                if !seen.insert(k.clone()) {
                    return Err(validation(
                        "transaction request cannot include multiple operations on one item",
                    ));
                }
                match a {
                    TransactAction::Put { item, .. } => {
                        overlay.insert(k, Some(item.clone()));
                    }
                    TransactAction::Delete { .. } => {
                        overlay.insert(k, None);
                    }
                    TransactAction::ConditionCheck { .. } => {}
                    TransactAction::Update { actions, .. } => {
                        // What the update meets in the item (an attribute of another type, a
                        // result over 400 KB) refuses the whole request (DynamoDB Local 3.3.1).
                        let new = UpdateAction::apply(k, current, actions)
                            .map_err(|e| validation(format!("invalid update: {e}")))?;
                        t.check_item(&new)?;
                        overlay.insert(k, Some(new.clone()));
                        updated[i] = Some(new);
                    }
                }
                reasons.push(CancellationReason::none());
            } else {
                reasons.push(CancellationReason::new(
                    "ConditionalCheckFailed",
                    Some("The conditional request failed".to_owned()),
                ));
            }
        }
        drop(overlay);
        // Capacity: every action twice its single-item cost, condition checks included.
        let mut writes = Vec::new();
        let mut units = 0.0;
        let mut checked = Vec::new();
        let mut updated_sizes = updated
            .iter()
            .zip(&actions)
            .filter(|(_, a)| matches!(a, TransactAction::Update { .. }))
            .map(|(u, _)| u.as_ref().map(Item::size));
        for (a, k) in actions.iter().zip(&keys) {
            let old = t.get(k).map_or(0, Item::size);
            match a {
                TransactAction::Put { item, .. } => {
                    let u = 2.0 * write_units(item.size().max(old));
                    writes.push((k.hash.clone(), u));
                }
                TransactAction::Delete { .. } => {
                    writes.push((k.hash.clone(), 2.0 * write_units(old)))
                }
                TransactAction::ConditionCheck { .. } => {
                    units += 2.0 * write_units(old);
                    checked.push((k.hash.clone(), 2.0 * write_units(old)));
                }
                TransactAction::Update { .. } => {
                    let new = updated_sizes.next().flatten().unwrap_or(0);
                    writes.push((k.hash.clone(), 2.0 * write_units(new.max(old))));
                }
            }
        }
        if reasons.iter().any(CancellationReason::is_failure) {
            inner.metrics.write_units += units + writes.iter().map(|(_, u)| u).sum::<f64>();
            for (hash, u) in checked.iter().chain(&writes) {
                inner.consumed(Some(hash), 0.0, *u);
            }
            return Err(Error::transaction_canceled(reasons));
        }
        for ((a, k), new) in actions.into_iter().zip(keys).zip(updated) {
            match a {
                TransactAction::Put { item, .. } => {
                    t.put(k, item);
                }
                TransactAction::Delete { .. } => {
                    t.delete(&k);
                }
                TransactAction::ConditionCheck { .. } => {}
                TransactAction::Update { .. } => {
                    if let Some(new) = new {
                        t.put(k, new);
                    }
                }
            }
        }
        if let Some((token, actions)) = remembered {
            t.tokens.insert(token, (actions, now));
        }
        inner.metrics.write_units += units;
        for (hash, u) in checked {
            inner.consumed(Some(&hash), 0.0, u);
        }
        for (hash, u) in writes {
            inner.note_write(&hash, u);
        }
        Self::finish(fault.as_ref(), "TransactWriteItems", ())
    }
}

impl FakeTable {
    /// GetItem, projected unless `projection` is empty; metered by the whole item.
    async fn get(
        &self,
        key: &Key,
        consistent: bool,
        projection: &[String],
    ) -> Result<Option<Item>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::GetItem, std::slice::from_ref(key))?;
        let stale = if consistent {
            None
        } else {
            inner.stale_get(key)
        };
        let t = inner.table()?;
        t.check_key(key)?;
        check_projection(projection)?;
        let item = stale.unwrap_or_else(|| t.get(key).cloned());
        let units = read_units(item.as_ref().map_or(0, Item::size), consistent);
        inner.metrics.read_units += units;
        inner.consumed(Some(&key.hash), units, 0.0);
        let item = item.map(|item| project(item, projection));
        Self::finish(fault.as_ref(), "GetItem", item)
    }

    /// BatchGetItem, projected unless `projection` is empty; each item found is metered (and
    /// counted towards the 16 MB cap) by its whole size.
    async fn batch(
        &self,
        keys: Vec<Key>,
        consistent: bool,
        projection: &[String],
    ) -> Result<BatchGetOutput> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::BatchGetItem, &keys)?;
        let stale = if consistent {
            BTreeMap::new()
        } else {
            inner.stale_changes(None)
        };
        let t = inner.table()?;
        if keys.is_empty() || keys.len() > dynatree::storage::BATCH_GET_MAX {
            return Err(validation(format!(
                "too many items requested for the BatchGetItem call: {} (1 to {} allowed)",
                keys.len(),
                dynatree::storage::BATCH_GET_MAX
            )));
        }
        let mut seen = HashSet::new();
        for k in &keys {
            t.check_key(k)?;
            if !seen.insert(k) {
                return Err(validation("provided list of item keys contains duplicates"));
            }
        }
        check_projection(projection)?;
        let processed = match fault {
            Some(Fault::Unprocessed { processed }) => processed.min(keys.len()),
            _ => keys.len(),
        };
        let mut out = BatchGetOutput::default();
        let mut units = 0.0;
        let mut read = Vec::new();
        let mut bytes = 0;
        for (i, k) in keys.into_iter().enumerate() {
            if i >= processed {
                out.unprocessed.push(k);
                continue;
            }
            // Only items found are billed (as DynamoDB Local reports), each rounded up alone.
            let found = match stale.get(&k) {
                Some(old) => old.clone(),
                None => t.get(&k).cloned(),
            };
            let Some(item) = found else {
                continue;
            };
            bytes += item.size();
            if bytes > BATCH_BYTES {
                out.unprocessed.push(k);
                continue;
            }
            units += read_units(item.size(), consistent);
            read.push((k.hash.clone(), read_units(item.size(), consistent)));
            out.items.push(project(item, projection));
        }
        inner.metrics.read_units += units;
        for (hash, u) in read {
            inner.consumed(Some(&hash), u, 0.0);
        }
        Self::finish(fault.as_ref(), "BatchGetItem", out)
    }
}

impl Storage for FakeTable {
    async fn send(&self, request: Request) -> Result<Response> {
        let none = &[][..];
        Ok(match request {
            Request::GetItem {
                key,
                consistent,
                projection,
            } => Response::Item(
                self.get(&key, consistent, projection.as_deref().unwrap_or(none))
                    .await?,
            ),
            Request::PutItem { item, condition } => {
                self.put_item(item, condition).await?;
                Response::Done
            }
            Request::DeleteItem { key, condition } => {
                self.delete_item(&key, condition).await?;
                Response::Done
            }
            Request::UpdateItem {
                key,
                actions,
                condition,
            } => Response::Updated(self.update_item(&key, actions, condition).await?),
            Request::Query { query, start } => {
                Response::Page(self.query_page(&query, start).await?)
            }
            Request::Scan {
                segment,
                limit,
                start,
            } => {
                let segment = segment.unwrap_or_else(ScanSegment::whole);
                Response::Page(self.scan_segment_page(segment, limit, start).await?)
            }
            Request::QueryIndex { query, start } => {
                Response::IndexPage(self.query_index_page(&query, start).await?)
            }
            Request::BatchGet {
                keys,
                consistent,
                projection,
            } => Response::BatchGet(
                self.batch(keys, consistent, projection.as_deref().unwrap_or(none))
                    .await?,
            ),
            Request::BatchWrite { requests } => {
                Response::Unprocessed(self.batch_write(requests).await?)
            }
            Request::TransactGet { keys } => Response::Items(self.transact_get(keys).await?),
            Request::TransactWrite { actions, token } => {
                self.transact(actions, token.as_deref()).await?;
                Response::Done
            }
            Request::CreateTable { billing, indexes } => {
                Response::Created(self.create_table(billing, &indexes).await?)
            }
            Request::AddIndex { billing, index } => {
                self.add_index(billing, &index).await?;
                Response::Done
            }
            Request::DescribeTable => Response::Table(self.describe_table().await?),
            Request::EnableTtl { attribute } => {
                self.enable_ttl(&attribute).await?;
                Response::Done
            }
            Request::TtlAttribute => Response::TtlAttribute(self.ttl_attribute().await?),
            Request::EnableStream => {
                self.enable_stream().await?;
                Response::Done
            }
            Request::StreamShards => Response::Shards(self.describe_stream().await?),
            Request::StreamRecords {
                shard,
                position,
                limit,
            } => Response::Records(self.get_records(&shard, &position, limit).await?),
        })
    }
}

/// Each request, as [`Storage::send`] dispatches it.
impl FakeTable {
    async fn put_item(&self, item: Item, condition: Condition) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::PutItem, Key::from_item(&item).as_slice())?;
        let t = inner.table()?;
        let key = t.check_item(&item)?;
        check_condition(&condition)?;
        let old = t.get(&key);
        let units = write_units(item.size().max(old.map_or(0, Item::size)));
        let ok = condition.eval(old);
        if ok {
            t.put(key.clone(), item);
        }
        inner.note_write(&key.hash, units);
        if !ok {
            return Err(condition_failed());
        }
        Self::finish(fault.as_ref(), "PutItem", ())
    }

    async fn delete_item(&self, key: &Key, condition: Condition) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::DeleteItem, std::slice::from_ref(key))?;
        let t = inner.table()?;
        t.check_key(key)?;
        check_condition(&condition)?;
        let old = t.get(key);
        let units = write_units(old.map_or(0, Item::size));
        let ok = condition.eval(old);
        if ok {
            t.delete(key);
        }
        inner.note_write(&key.hash, units);
        if !ok {
            return Err(condition_failed());
        }
        Self::finish(fault.as_ref(), "DeleteItem", ())
    }

    async fn query_page(&self, query: &Query, start: Option<Key>) -> Result<Page> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::Query, &[Key::new(query.hash.clone(), "")])?;
        let page_bytes = inner.page_bytes.unwrap_or(PAGE_BYTES);
        let stale = if query.consistent {
            None
        } else {
            inner.stale_rows(Some(&query.hash))
        };
        let t = inner.table()?;
        // An empty hash key, a limit of 0, a range condition on an empty or oversized value or
        // with reversed bounds. (A hash key over 2048 bytes is no error: it matches nothing.)
        query.check().map_err(|e| validation(e.to_string()))?;
        if let Some(s) = &start {
            // No size limit: DynamoDB Local 3.3.1 takes a 1025-byte range key as a start key.
            if s.hash.is_empty() || s.range.is_empty() {
                return Err(validation(
                    "the provided starting key is invalid: a key attribute value cannot be an empty string",
                ));
            }
            if !query.accepts_start(s) {
                return Err(validation(
                    "the provided starting key does not match the range key predicate",
                ));
            }
        }
        let empty = BTreeMap::new();
        let part = stale
            .as_ref()
            .map_or_else(|| t.rows.get(&query.hash), |rows| rows.get(&query.hash))
            .unwrap_or(&empty);
        let mut rows: Box<dyn Iterator<Item = (&String, &Item)>> = if query.forward {
            Box::new(part.iter())
        } else {
            Box::new(part.iter().rev())
        };
        if let Some(s) = &start {
            let after = s.range.clone();
            let forward = query.forward;
            rows = Box::new(rows.skip_while(
                move |(r, _)| {
                    if forward { **r <= after } else { **r >= after }
                },
            ));
        }
        // The key condition selects the items a query reads: items outside it are neither
        // returned nor counted towards the limit (unlike a filter).
        let range = query.range.clone();
        rows = Box::new(rows.filter(move |(r, _)| range.as_ref().is_none_or(|c| c.matches(r))));
        let (items, last_key, bytes) = paginate(
            rows.map(|(_, item)| item),
            |_| true,
            query.limit,
            page_bytes,
            &t.hash_name,
            &t.range_name,
        );
        // A page that ends on the condition's far bound names no last key (DynamoDB Local
        // 3.3.1): it would refuse that key as a start key, and nothing can follow it.
        let last_key = last_key.filter(|k| query.accepts_start(k));
        inner.metrics.read_units += read_units(bytes, query.consistent);
        inner.consumed(Some(&query.hash), read_units(bytes, query.consistent), 0.0);
        Self::finish(fault.as_ref(), "Query", Page { items, last_key })
    }

    async fn scan_segment_page(
        &self,
        segment: ScanSegment,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> Result<Page> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::Scan, &[])?;
        let page_bytes = inner.page_bytes.unwrap_or(PAGE_BYTES);
        let stale = inner.stale_rows(None);
        let t = inner.table()?;
        if let Some(s) = &start
            && (s.hash.is_empty() || s.range.is_empty())
        {
            return Err(validation(
                "the provided starting key is invalid: a key attribute value cannot be an empty string",
            ));
        }
        let rows = stale
            .as_ref()
            .unwrap_or(&t.rows)
            .iter()
            .filter(|(h, _)| segment.holds(h))
            .flat_map(|(h, part)| part.iter().map(move |(r, item)| ((h, r), item)))
            .skip_while(|((h, r), _)| {
                start.as_ref().is_some_and(|s| {
                    (h.as_str(), r.as_str()) <= (s.hash.as_str(), s.range.as_str())
                })
            })
            .map(|(_, item)| item);
        let (items, last_key, bytes) = paginate(
            rows,
            |_| true,
            limit,
            page_bytes,
            &t.hash_name,
            &t.range_name,
        );
        inner.metrics.read_units += read_units(bytes, false);
        inner.consumed(None, read_units(bytes, false), 0.0);
        Self::finish(fault.as_ref(), "Scan", Page { items, last_key })
    }

    async fn transact_get(&self, keys: Vec<Key>) -> Result<Vec<Option<Item>>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::TransactGetItems, &keys)?;
        let t = inner.table()?;
        if keys.is_empty() || keys.len() > dynatree::storage::TRANSACT_MAX {
            return Err(validation(format!(
                "1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to {} and greater than or equal to 1",
                dynatree::storage::TRANSACT_MAX
            )));
        }
        for (i, k) in keys.iter().enumerate() {
            t.check_key(k)?;
            if keys[..i].contains(k) {
                return Err(validation(
                    "Transaction request cannot include multiple operations on one item",
                ));
            }
        }
        // One serializable snapshot: the table is locked for the whole request.
        let items: Vec<Option<Item>> = keys.iter().map(|k| t.get(k).cloned()).collect();
        let bytes: usize = items.iter().flatten().map(Item::size).sum();
        if bytes > 4 * 1024 * 1024 {
            return Err(validation(
                "Transaction size exceeded: the items read are over 4 MB together",
            ));
        }
        // Transactional reads: two units per 4 KB of each item.
        let units: f64 = items
            .iter()
            .map(|i| 2.0 * read_units(i.as_ref().map_or(0, Item::size), true))
            .sum();
        inner.metrics.read_units += units;
        for (k, i) in keys.iter().zip(&items) {
            let u = 2.0 * read_units(i.as_ref().map_or(0, Item::size), true);
            inner.consumed(Some(&k.hash), u, 0.0);
        }
        Self::finish(fault.as_ref(), "TransactGetItems", items)
    }

    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let touched: Vec<Key> = requests
            .iter()
            .filter_map(|r| match r {
                WriteRequest::Put(item) => Key::from_item(item),
                WriteRequest::Delete(k) => Some(k.clone()),
            })
            .collect();
        let fault = self.begin(&mut inner, Op::BatchWriteItem, &touched)?;
        let t = inner.table()?;
        if requests.is_empty() || requests.len() > dynatree::storage::BATCH_WRITE_MAX {
            return Err(validation(format!(
                "too many items in the BatchWriteItem request: {} (1 to {} allowed)",
                requests.len(),
                dynatree::storage::BATCH_WRITE_MAX
            )));
        }
        // Validate everything first: a batch with one invalid request writes nothing.
        let mut seen = HashSet::new();
        let mut total = 0;
        let mut keys = Vec::with_capacity(requests.len());
        for r in &requests {
            let key = match r {
                WriteRequest::Put(item) => {
                    total += item.size();
                    t.check_item(item)?
                }
                WriteRequest::Delete(k) => {
                    t.check_key(k)?;
                    k.clone()
                }
            };
            if !seen.insert(key.clone()) {
                return Err(validation("provided list of item keys contains duplicates"));
            }
            keys.push(key);
        }
        if total > BATCH_BYTES {
            return Err(validation(
                "item collection size of the batch exceeds 16 MB",
            ));
        }
        let processed = match fault {
            Some(Fault::Unprocessed { processed }) => processed.min(requests.len()),
            _ => requests.len(),
        };
        let mut unprocessed = Vec::new();
        let mut writes = Vec::new();
        for (i, (r, key)) in requests.into_iter().zip(keys).enumerate() {
            if i >= processed {
                unprocessed.push(r);
                continue;
            }
            let old = t.get(&key).map_or(0, Item::size);
            match r {
                WriteRequest::Put(item) => {
                    writes.push((key.hash.clone(), write_units(item.size().max(old))));
                    t.put(key, item);
                }
                WriteRequest::Delete(k) => {
                    writes.push((k.hash.clone(), write_units(old)));
                    t.delete(&k);
                }
            }
        }
        for (hash, units) in writes {
            inner.note_write(&hash, units);
        }
        Self::finish(fault.as_ref(), "BatchWriteItem", unprocessed)
    }

    async fn create_table(&self, billing: Billing, indexes: &[IndexSpec]) -> Result<bool> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::CreateTable, &[])?;
        if inner.table.is_some() {
            return Ok(false);
        }
        if indexes.len() > 20 {
            return Err(validation(
                "a table takes at most 20 global secondary indexes",
            ));
        }
        for index in indexes {
            check_index_name(&index.name)?;
        }
        inner.table = Some(TableState {
            hash_name: dynatree::storage::HASH_KEY.to_owned(),
            range_name: dynatree::storage::RANGE_KEY.to_owned(),
            billing,
            indexes: indexes.to_vec(),
            building: None,
            rows: BTreeMap::new(),
            journal: None,
            ttl: None,
            stream: false,
            stream_log: StreamLog::default(),
            tokens: HashMap::new(),
        });
        Self::finish(fault.as_ref(), "CreateTable", true)
    }

    async fn add_index(&self, _billing: Billing, index: &IndexSpec) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::UpdateTable, &[])?;
        check_index_name(&index.name)?;
        let t = inner.table()?;
        if t.building.is_some() {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                "only 1 online index can be created or deleted simultaneously per table",
            ));
        }
        if t.indexes.iter().any(|i| i.name == index.name) {
            return Err(validation(format!(
                "attempting to create an index which already exists: {}",
                index.name
            )));
        }
        t.indexes.push(index.clone());
        t.building = Some(index.name.clone());
        Self::finish(fault.as_ref(), "UpdateTable", ())
    }

    async fn query_index_page(&self, query: &IndexQuery, start: Option<Item>) -> Result<IndexPage> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::Query, &[])?;
        let page_bytes = inner.page_bytes.unwrap_or(PAGE_BYTES);
        // Global secondary indexes are only eventually consistent.
        let stale = inner.stale_rows(None);
        let t = inner.table()?;
        let Some(spec) = t
            .indexes
            .iter()
            .find(|i| i.name == query.index.name)
            .cloned()
        else {
            return Err(validation(format!(
                "the table does not have the specified index: {}",
                query.index.name
            )));
        };
        if query.limit == Some(0) {
            return Err(validation("limit must be at least 1"));
        }
        if query.hash.is_empty() {
            return Err(validation(
                "one or more parameter values are not valid: the index hash key value cannot be empty",
            ));
        }
        if let Some(r) = &query.range {
            r.check().map_err(|e| validation(e.to_string()))?;
        }
        let projection = query.projection.as_deref().unwrap_or_default();
        check_projection(projection)?;
        // The index is sparse: only items with its key attributes (strings) are in it. Order:
        // the index range key, then the table key.
        let sort_key = |item: &Item| -> (String, String, String) {
            let r = spec
                .range_attr
                .as_ref()
                .and_then(|a| item.get_s(a))
                .unwrap_or_default()
                .to_owned();
            (
                r,
                item.get_s(&t.hash_name).unwrap_or_default().to_owned(),
                item.get_s(&t.range_name).unwrap_or_default().to_owned(),
            )
        };
        let mut hits: Vec<&Item> = stale
            .as_ref()
            .unwrap_or(&t.rows)
            .values()
            .flat_map(BTreeMap::values)
            .filter(|item| item.get_s(&spec.hash_attr) == Some(query.hash.as_str()))
            .filter(|item| {
                spec.range_attr
                    .as_ref()
                    .is_none_or(|a| item.get_s(a).is_some())
            })
            .filter(|item| match (&query.range, &spec.range_attr) {
                (Some(c), Some(a)) => item.get_s(a).is_some_and(|r| c.matches(r)),
                _ => true,
            })
            .collect();
        hits.sort_by_key(|i| sort_key(i));
        if !query.forward {
            hits.reverse();
        }
        if let Some(start) = &start {
            let after = sort_key(start);
            hits.retain(|i| {
                if query.forward {
                    sort_key(i) > after
                } else {
                    sort_key(i) < after
                }
            });
        }
        let mut items = Vec::new();
        let mut bytes = 0;
        let mut last = None;
        for (n, item) in hits.iter().enumerate() {
            // Metered and paged by the whole item; the last key comes from the whole item too.
            bytes += item.size();
            items.push(project((*item).clone(), projection));
            let evaluated = u32::try_from(n + 1).unwrap_or(u32::MAX);
            if query.limit.is_some_and(|l| evaluated >= l) || bytes >= page_bytes {
                let mut k = Key::from_item(item).map(Key::into_item).unwrap_or_default();
                for a in std::iter::once(&spec.hash_attr).chain(spec.range_attr.as_ref()) {
                    if let Some(v) = item.get(a) {
                        k.insert(a.clone(), v.clone());
                    }
                }
                last = Some(k);
                break;
            }
        }
        inner.metrics.read_units += read_units(bytes, false);
        inner.consumed(None, read_units(bytes, false), 0.0);
        Self::finish(fault.as_ref(), "Query", IndexPage { items, last })
    }

    async fn describe_table(&self) -> Result<Option<TableDescription>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::DescribeTable, &[])?;
        let desc = inner.table.as_mut().map(|t| {
            // The index being built shows `Creating` once, then it is done.
            let building = t.building.take();
            TableDescription {
                status: TableStatus::Active,
                hash_key: (t.hash_name.clone(), "S".to_owned()),
                range_key: Some((t.range_name.clone(), "S".to_owned())),
                billing: t.billing,
                indexes: t
                    .indexes
                    .iter()
                    .map(|i| {
                        let st = if building.as_ref() == Some(&i.name) {
                            TableStatus::Creating
                        } else {
                            TableStatus::Active
                        };
                        (i.name.clone(), st)
                    })
                    .collect(),
            }
        });
        Self::finish(fault.as_ref(), "DescribeTable", desc)
    }

    async fn update_item(
        &self,
        key: &Key,
        actions: Vec<UpdateAction>,
        condition: Condition,
    ) -> Result<Item> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::UpdateItem, std::slice::from_ref(key))?;
        let t = inner.table()?;
        t.check_key(key)?;
        check_update(&actions)?;
        check_condition(&condition)?;
        let old = t.get(key);
        if !condition.eval(old) {
            let units = write_units(old.map_or(0, Item::size));
            inner.note_write(&key.hash, units);
            return Err(condition_failed());
        }
        let new = UpdateAction::apply(key, old, &actions)
            .map_err(|e| validation(format!("invalid update: {e}")))?;
        t.check_item(&new)?;
        let units = write_units(new.size().max(old.map_or(0, Item::size)));
        let new = new.normalized();
        t.put(key.clone(), new.clone());
        inner.note_write(&key.hash, units);
        Self::finish(fault.as_ref(), "UpdateItem", new)
    }

    async fn enable_ttl(&self, attribute: &str) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::UpdateTimeToLive, &[])?;
        let t = inner.table()?;
        if attribute.is_empty() || attribute.len() > 255 {
            return Err(validation(format!(
                "the time-to-live attribute name must have length between 1 and 255 ({} bytes)",
                attribute.len()
            )));
        }
        match &t.ttl {
            Some(a) if a != attribute => {
                return Err(validation("TimeToLive is already enabled"));
            }
            _ => t.ttl = Some(attribute.to_owned()),
        }
        Self::finish(fault.as_ref(), "UpdateTimeToLive", ())
    }

    async fn enable_stream(&self) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::UpdateTable, &[])?;
        let t = inner.table()?;
        if !t.stream {
            // A new stream starts with one shard.
            t.stream_log.split(1);
        }
        t.stream = true;
        Self::finish(fault.as_ref(), "UpdateTable", ())
    }

    async fn describe_stream(&self) -> Result<Vec<dynatree::storage::StreamShard>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::DescribeStream, &[])?;
        let t = inner.table()?;
        if !t.stream {
            return Err(no_stream());
        }
        let shards = t.stream_log.shards();
        Self::finish(fault.as_ref(), "DescribeStream", shards)
    }

    async fn get_records(
        &self,
        shard: &str,
        position: &dynatree::storage::StreamPosition,
        limit: u32,
    ) -> Result<dynatree::storage::StreamPage> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::GetRecords, &[])?;
        let t = inner.table()?;
        if !t.stream {
            return Err(no_stream());
        }
        let page = t.stream_log.page(shard, position, limit)?;
        Self::finish(fault.as_ref(), "GetRecords", page)
    }

    async fn ttl_attribute(&self) -> Result<Option<String>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, Op::DescribeTimeToLive, &[])?;
        let ttl = inner.table()?.ttl.clone();
        Self::finish(fault.as_ref(), "DescribeTimeToLive", ttl)
    }
}

/// A read of the stream of a table without one.
fn no_stream() -> Error {
    Error::new(ErrorKind::NotFound, "table has no stream")
}

/// Takes items until `limit` items were evaluated or `page_bytes` were read (the item that
/// crosses the limit is still returned, as DynamoDB does). Returns the matching items, the last
/// evaluated key if the page was cut, and the bytes read.
fn paginate<'a>(
    rows: impl Iterator<Item = &'a Item>,
    keep: impl Fn(&Item) -> bool,
    limit: Option<u32>,
    page_bytes: usize,
    hash_name: &str,
    range_name: &str,
) -> (Vec<Item>, Option<Key>, usize) {
    let mut items = Vec::new();
    let mut bytes = 0;
    let mut last_key = None;
    for (i, item) in rows.enumerate() {
        bytes += item.size();
        let evaluated = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if keep(item) {
            items.push(item.clone());
        }
        // Like DynamoDB, a page that stops at its limit names its last key even when nothing
        // follows; the next request then returns an empty last page.
        if limit.is_some_and(|l| evaluated >= l) || bytes >= page_bytes {
            last_key = Some(Key::new(
                item.get_s(hash_name).unwrap_or_default(),
                item.get_s(range_name).unwrap_or_default(),
            ));
            break;
        }
    }
    (items, last_key, bytes)
}

/// DynamoDB's rule for index names: 3 to 255 characters of `a-z A-Z 0-9 _ - .`.
fn check_index_name(name: &str) -> Result<()> {
    let ok = (3..=255).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(validation(format!(
            "index name `{name}`: 3 to 255 characters of a-z, A-Z, 0-9, '_', '-', '.'"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: &str) -> Value {
        Value::N(v.into())
    }

    async fn table() -> FakeTable {
        let t = FakeTable::new();
        t.create_table(Billing::OnDemand, &[]).await.unwrap();
        t
    }

    fn add(key: &Key, by: &str) -> Vec<TransactAction> {
        vec![TransactAction::Update {
            key: key.clone(),
            actions: vec![UpdateAction::Add("n".into(), n(by))],
            condition: Condition::Always,
        }]
    }

    #[tokio::test]
    async fn update_item_is_one_metered_write() {
        let t = table().await;
        let k = Key::new("h", "r");
        t.reset_metrics();
        let item = t
            .update_item(
                &k,
                vec![UpdateAction::Add("n".into(), n("1"))],
                Condition::Always,
            )
            .await
            .unwrap();
        assert_eq!(item.get("n"), Some(&n("1")));
        let m = t.metrics();
        assert_eq!(m.requests("UpdateItem"), 1);
        assert_eq!(m.write_units(), 1.0);
        assert_eq!(m.writes_to("h"), 1);
        // A failed condition is still a metered request.
        let e = t
            .update_item(
                &k,
                vec![UpdateAction::Remove("n".into())],
                Condition::NotExists,
            )
            .await
            .unwrap_err();
        assert!(e.is_condition_failed());
        assert_eq!(t.metrics().requests("UpdateItem"), 2);
        // No action inside a transaction: refused before anything is read.
        let e = t
            .transact_write(vec![TransactAction::Update {
                key: k.clone(),
                actions: vec![],
                condition: Condition::Always,
            }])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(t.metrics().write_units(), 2.0);
        // An update that makes an index key of another type is refused.
        let ix = FakeTable::new();
        ix.create_table(Billing::OnDemand, &[IndexSpec::new("by_ix", "ixh", None)])
            .await
            .unwrap();
        let e = ix
            .update_item(
                &k,
                vec![UpdateAction::Set("ixh".into(), n("1"))],
                Condition::Always,
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Validation);
        assert!(ix.rows().is_empty());
    }

    #[tokio::test]
    async fn transact_update_is_metered_twice_and_all_or_nothing() {
        let t = table().await;
        let k = Key::new("h", "r");
        t.reset_metrics();
        t.transact_write(add(&k, "1")).await.unwrap();
        assert_eq!(t.metrics().write_units(), 2.0);
        let mut both = add(&k, "1");
        both.push(TransactAction::Update {
            key: Key::new("h", "s"),
            actions: vec![UpdateAction::Append("n".into(), Value::L(vec![]))],
            condition: Condition::Always,
        });
        both.push(TransactAction::Update {
            key: Key::new("h", "t"),
            actions: vec![UpdateAction::Set("v".into(), n("1"))],
            condition: Condition::Exists,
        });
        let e = t.transact_write(both).await.unwrap_err();
        let codes: Vec<&str> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
        assert_eq!(codes, ["None", "None", "ConditionalCheckFailed"]);
        assert_eq!(t.rows().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_remembered_ten_minutes() {
        let t = table().await;
        let k = Key::new("h", "r");
        let count = || t.rows()[0].get("n").cloned();
        // A lost response: the retry with the same token is not applied again.
        t.inject(0, Fault::FailAfterApply);
        assert!(
            t.transact_write_idempotent(add(&k, "1"), "tok")
                .await
                .is_err()
        );
        t.transact_write_idempotent(add(&k, "1"), "tok")
            .await
            .unwrap();
        assert_eq!(count(), Some(n("1")));
        tokio::time::advance(std::time::Duration::from_secs(9 * 60)).await;
        t.transact_write_idempotent(add(&k, "1"), "tok")
            .await
            .unwrap();
        assert_eq!(count(), Some(n("1")));
        tokio::time::advance(std::time::Duration::from_secs(61)).await;
        // Forgotten: applied again, and the token is free for other actions.
        t.transact_write_idempotent(add(&k, "1"), "tok")
            .await
            .unwrap();
        assert_eq!(count(), Some(n("2")));
        let e = t
            .transact_write_idempotent(add(&k, "5"), "tok")
            .await
            .unwrap_err();
        assert_eq!(
            e.service_code(),
            Some("IdempotentParameterMismatchException")
        );
    }

    #[tokio::test]
    async fn ttl_expiry_keeps_non_numbers_and_live_items() {
        let t = table().await;
        assert_eq!(t.expire_ttl(u64::MAX), 0); // not enabled
        t.enable_ttl("exp").await.unwrap();
        for (r, v) in [
            ("a", Some(n("99.5"))),
            ("b", Some(n("100"))),
            ("c", Some(Value::S("1".into()))),
            ("d", None),
            ("e", Some(n("-1"))),
        ] {
            let mut item = Key::new("h", r).into_item();
            if let Some(v) = v {
                item.insert("exp", v);
            }
            t.put_item(item, Condition::Always).await.unwrap();
        }
        t.reset_metrics();
        assert_eq!(t.expire_ttl(100), 2);
        let left: Vec<String> = t
            .rows()
            .iter()
            .map(|i| i.get_s("Child").unwrap().to_owned())
            .collect();
        assert_eq!(left, ["b", "c", "d"]);
        assert_eq!(t.metrics(), Metrics::default());
    }
}
