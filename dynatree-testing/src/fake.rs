//! [`FakeTable`]: an in-memory table with DynamoDB's semantics, metering and fault injection.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use dynatree::{
    BatchGetOutput, Billing, CancellationReason, Condition, Error, ErrorKind, IndexPage,
    IndexQuery, IndexSpec, Item, Key, MAX_HASH_KEY_BYTES, MAX_ITEM_BYTES, MAX_RANGE_KEY_BYTES,
    Page, Query, Result, Storage, TableDescription, TableStatus, TransactAction, Value,
    WriteRequest,
};

/// DynamoDB's 1 MB page limit for Query and Scan.
pub const PAGE_BYTES: usize = 1024 * 1024;
const BATCH_BYTES: usize = 16 * 1024 * 1024;
const TRANSACT_BYTES: usize = 4 * 1024 * 1024;

/// An in-memory DynamoDB table for tests: no AWS, no network, deterministic.
///
/// It behaves like the real service where dynatree (and your code) can tell: keys in UTF-8 byte
/// order, 1 MB query pages (smaller on request, see [`FakeTable::set_page_bytes`]), every limit
/// (key bytes, 400 KB items, 25/100-item batches, 100-action and 4 MB transactions, no two
/// actions on one item) refused with the error kind DynamoDB gives, conditions, atomic
/// transactions with per-action cancellation reasons, and a table that must be created first.
///
/// It also **meters** every request by DynamoDB's published capacity rules
/// ([`FakeTable::metrics`]) and **injects faults** ([`FakeTable::inject`]), so your tests can
/// assert what a code path costs and how it survives throttling or lost responses.
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
}

#[derive(Debug, Default)]
struct Inner {
    table: Option<TableState>,
    metrics: Metrics,
    faults: BTreeMap<u64, Fault>,
    always: Option<Fault>,
    page_bytes: Option<usize>,
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
}

/// A failure to inject into a request of a [`FakeTable`].
///
/// # Examples
///
/// ```
/// # use dynatree::{batch, Key, RetryPolicy, Tree, WriteRequest};
/// # use dynatree_testing::{FakeTable, Fault};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// # Tree::new(&table).create_table().await?;
/// table.inject_always(Fault::Unprocessed { processed: 0 });
/// let rows = vec![WriteRequest::Put(Key::new("h", "r").into_item())];
/// let err = batch::write_all(&table, rows, &RetryPolicy::default()).await.unwrap_err();
/// assert_eq!(err.unprocessed_count(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The request is throttled ([`ErrorKind::Throttled`]); nothing is applied.
    Throttle,
    /// The request fails ([`ErrorKind::Backend`]); nothing is applied.
    Fail,
    /// The request is applied, then its response is lost ([`ErrorKind::Backend`]): the
    /// "timed out, but it happened" case.
    FailAfterApply,
    /// For BatchGetItem and BatchWriteItem: only the first `processed` items are processed, the
    /// rest come back unprocessed. Other requests run normally.
    Unprocessed {
        /// How many items are processed.
        processed: usize,
    },
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
/// let tree = Tree::new(&table);
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
    pub fn requests(&self, operation: &str) -> u64 {
        self.requests.get(operation).copied().unwrap_or(0)
    }

    /// Requests of every operation.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Requests per operation.
    pub fn requests_by_operation(&self) -> &BTreeMap<&'static str, u64> {
        &self.requests
    }

    /// Read capacity units consumed: 1 per 4 KB strongly consistent, half that eventually
    /// consistent, twice that in transactions; a Query or Scan sums its items' sizes first.
    pub fn read_units(&self) -> f64 {
        self.read_units
    }

    /// Write capacity units consumed: 1 per 1 KB of the larger of the old and new item, twice
    /// that in transactions (condition checks included).
    pub fn write_units(&self) -> f64 {
        self.write_units
    }

    /// Item writes (puts and deletes) that went to partition key `hash`.
    pub fn writes_to(&self, hash: &str) -> u64 {
        self.partition_writes.get(hash).copied().unwrap_or(0)
    }

    /// Item writes per partition key.
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

impl FakeTable {
    /// A fake account with no table yet: call [`Tree::create_table`](dynatree::Tree::create_table)
    /// (or [`Storage::create_table`]) first, as with DynamoDB.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake whose table already exists with another key schema (for testing that a tree
    /// refuses it).
    pub fn with_schema(hash_key: &str, range_key: &str) -> Self {
        let fake = Self::new();
        fake.lock().table = Some(TableState {
            hash_name: hash_key.to_owned(),
            range_name: range_key.to_owned(),
            billing: Billing::OnDemand,
            indexes: Vec::new(),
            building: None,
            rows: BTreeMap::new(),
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
    pub fn metrics(&self) -> Metrics {
        self.lock().metrics.clone()
    }

    /// Zeroes the metrics (request numbering for [`inject`](Self::inject) restarts too).
    pub fn reset_metrics(&self) {
        let mut inner = self.lock();
        inner.metrics = Metrics::default();
        inner.faults.clear();
    }

    /// Makes request number `nth` (0-based, counted from now) fail with `fault`.
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
        let mut inner = self.lock();
        let at = inner.metrics.total_requests() + nth;
        inner.faults.insert(at, fault);
    }

    /// Makes every request fail with `fault` until [`clear_faults`](Self::clear_faults).
    pub fn inject_always(&self, fault: Fault) {
        self.lock().always = Some(fault);
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        let mut inner = self.lock();
        inner.faults.clear();
        inner.always = None;
    }

    /// Sets the Query/Scan page size in bytes (default 1 MB, as DynamoDB), to test pagination
    /// without megabytes of data.
    pub fn set_page_bytes(&self, bytes: usize) {
        self.lock().page_bytes = Some(bytes.max(1));
    }

    /// Every row, in key order (hash, then range).
    pub fn rows(&self) -> Vec<Item> {
        self.lock()
            .table
            .as_ref()
            .map(|t| t.rows.values().flat_map(|r| r.values().cloned()).collect())
            .unwrap_or_default()
    }

    /// Starts a request: counts it, and returns the fault it must suffer, if any.
    fn begin(&self, inner: &mut Inner, op: &'static str) -> Result<Option<Fault>> {
        let n = inner.metrics.total_requests();
        *inner.metrics.requests.entry(op).or_default() += 1;
        let fault = inner.faults.remove(&n).or_else(|| inner.always.clone());
        match fault {
            Some(Fault::Throttle) => Err(Error::new(
                ErrorKind::Throttled,
                format!("injected throttle on {op}"),
            )),
            Some(Fault::Fail) => Err(Error::new(
                ErrorKind::Backend,
                format!("injected failure of {op}"),
            )),
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

impl Inner {
    fn table(&mut self) -> Result<&mut TableState> {
        self.table.as_mut().ok_or_else(|| {
            Error::new(
                ErrorKind::TableNotFound,
                "requested resource not found: table does not exist",
            )
        })
    }

    fn note_write(&mut self, hash: &str, units: f64) {
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
                return Err(validation(format!(
                    "one or more parameter values are not valid: key attribute `{name}` is {} bytes, over the {max}-byte limit",
                    v.len()
                )));
            }
        }
        Ok(())
    }

    fn key_of(&self, item: &Item) -> Result<Key> {
        let h = item.get(&self.hash_name);
        let r = item.get(&self.range_name);
        match (h, r) {
            (Some(Value::S(h)), Some(Value::S(r))) => {
                let key = Key::new(h.clone(), r.clone());
                self.check_key(&key)?;
                Ok(key)
            }
            _ => Err(validation(format!(
                "one or more parameter values were invalid: missing the key `{}` or `{}` (type S) in the item",
                self.hash_name, self.range_name
            ))),
        }
    }

    fn check_item(&self, item: &Item) -> Result<Key> {
        let key = self.key_of(item)?;
        let size = item.size();
        if size > MAX_ITEM_BYTES {
            return Err(validation(format!(
                "item size has exceeded the maximum allowed size ({size} > {MAX_ITEM_BYTES} bytes)"
            )));
        }
        for (name, v) in item.iter() {
            check_value(name, v)?;
        }
        Ok(key)
    }

    fn get(&self, key: &Key) -> Option<&Item> {
        self.rows.get(&key.hash)?.get(&key.range)
    }

    fn put(&mut self, key: Key, item: Item) -> Option<Item> {
        self.rows
            .entry(key.hash)
            .or_default()
            .insert(key.range, item)
    }

    fn delete(&mut self, key: &Key) -> Option<Item> {
        let part = self.rows.get_mut(&key.hash)?;
        let old = part.remove(&key.range);
        if part.is_empty() {
            self.rows.remove(&key.hash);
        }
        old
    }
}

/// DynamoDB refuses empty sets and empty names anywhere in an item.
fn check_value(name: &str, v: &Value) -> Result<()> {
    let empty_set = match v {
        Value::Ss(s) => s.is_empty(),
        Value::Ns(s) => s.is_empty(),
        Value::Bs(s) => s.is_empty(),
        Value::L(l) => return l.iter().try_for_each(|v| check_value(name, v)),
        Value::M(m) => return m.iter().try_for_each(|(k, v)| check_value(k, v)),
        _ => false,
    };
    if empty_set {
        return Err(validation(format!(
            "one or more parameter values were invalid: an empty set is not allowed (`{name}`)"
        )));
    }
    Ok(())
}

fn condition_failed() -> Error {
    Error::new(ErrorKind::ConditionFailed, "the conditional request failed")
}

impl Storage for FakeTable {
    async fn get_item(&self, key: &Key, consistent: bool) -> Result<Option<Item>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "GetItem")?;
        let t = inner.table()?;
        t.check_key(key)?;
        let item = t.get(key).cloned();
        inner.metrics.read_units += read_units(item.as_ref().map_or(0, Item::size), consistent);
        Self::finish(fault.as_ref(), "GetItem", item)
    }

    async fn put_item(&self, item: Item, condition: Condition) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "PutItem")?;
        let t = inner.table()?;
        let key = t.check_item(&item)?;
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
        let fault = self.begin(&mut inner, "DeleteItem")?;
        let t = inner.table()?;
        t.check_key(key)?;
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
        let fault = self.begin(&mut inner, "Query")?;
        let page_bytes = inner.page_bytes.unwrap_or(PAGE_BYTES);
        let t = inner.table()?;
        if query.hash.is_empty() {
            return Err(validation(
                "one or more parameter values are not valid: the hash key value cannot be empty",
            ));
        }
        if query.limit == Some(0) {
            return Err(validation("limit must be at least 1"));
        }
        if let Some(s) = &start {
            t.check_key(s)?;
        }
        let empty = BTreeMap::new();
        let part = t.rows.get(&query.hash).unwrap_or(&empty);
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
        let (items, last_key, bytes) = paginate(
            rows.map(|(_, item)| item),
            |item| {
                item.get_s(&t.range_name)
                    .is_some_and(|r| query.range.as_ref().is_none_or(|c| c.matches(r)))
            },
            query.limit,
            page_bytes,
            &t.hash_name,
            &t.range_name,
        );
        inner.metrics.read_units += read_units(bytes, query.consistent);
        Self::finish(fault.as_ref(), "Query", Page { items, last_key })
    }

    async fn scan_page(&self, limit: Option<u32>, start: Option<Key>) -> Result<Page> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "Scan")?;
        let page_bytes = inner.page_bytes.unwrap_or(PAGE_BYTES);
        let t = inner.table()?;
        let rows = t
            .rows
            .iter()
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
        Self::finish(fault.as_ref(), "Scan", Page { items, last_key })
    }

    async fn batch_get(&self, keys: Vec<Key>, consistent: bool) -> Result<BatchGetOutput> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "BatchGetItem")?;
        let t = inner.table()?;
        if keys.is_empty() || keys.len() > dynatree::BATCH_GET_MAX {
            return Err(validation(format!(
                "too many items requested for the BatchGetItem call: {} (1 to {} allowed)",
                keys.len(),
                dynatree::BATCH_GET_MAX
            )));
        }
        let mut seen = HashSet::new();
        for k in &keys {
            t.check_key(k)?;
            if !seen.insert(k) {
                return Err(validation("provided list of item keys contains duplicates"));
            }
        }
        let processed = match fault {
            Some(Fault::Unprocessed { processed }) => processed.min(keys.len()),
            _ => keys.len(),
        };
        let mut out = BatchGetOutput::default();
        let mut units = 0.0;
        let mut bytes = 0;
        for (i, k) in keys.into_iter().enumerate() {
            if i >= processed {
                out.unprocessed.push(k);
                continue;
            }
            // Only items found are billed (as DynamoDB Local reports), each rounded up alone.
            let Some(item) = t.get(&k).cloned() else {
                continue;
            };
            bytes += item.size();
            if bytes > BATCH_BYTES {
                out.unprocessed.push(k);
                continue;
            }
            units += read_units(item.size(), consistent);
            out.items.push(item);
        }
        inner.metrics.read_units += units;
        Self::finish(fault.as_ref(), "BatchGetItem", out)
    }

    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "BatchWriteItem")?;
        let t = inner.table()?;
        if requests.is_empty() || requests.len() > dynatree::BATCH_WRITE_MAX {
            return Err(validation(format!(
                "too many items in the BatchWriteItem request: {} (1 to {} allowed)",
                requests.len(),
                dynatree::BATCH_WRITE_MAX
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

    async fn transact_write(&self, actions: Vec<TransactAction>) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "TransactWriteItems")?;
        let t = inner.table()?;
        if actions.is_empty() || actions.len() > dynatree::TRANSACT_MAX {
            return Err(validation(format!(
                "member must have length between 1 and {}: {} actions",
                dynatree::TRANSACT_MAX,
                actions.len()
            )));
        }
        let mut seen = HashSet::new();
        let mut total = 0;
        let mut keys = Vec::with_capacity(actions.len());
        for a in &actions {
            let key = match a {
                TransactAction::Put { item, .. } => {
                    total += item.size();
                    t.check_item(item)?
                }
                TransactAction::Delete { key, .. } | TransactAction::ConditionCheck { key, .. } => {
                    t.check_key(key)?;
                    key.clone()
                }
            };
            if !seen.insert(key.clone()) {
                return Err(validation(
                    "transaction request cannot include multiple operations on one item",
                ));
            }
            keys.push(key);
        }
        if total > TRANSACT_BYTES {
            return Err(validation("transaction size exceeds 4 MB"));
        }
        let reasons: Vec<CancellationReason> = actions
            .iter()
            .zip(&keys)
            .map(|(a, k)| {
                let cond = match a {
                    TransactAction::Put { condition, .. }
                    | TransactAction::Delete { condition, .. }
                    | TransactAction::ConditionCheck { condition, .. } => condition,
                };
                if cond.eval(t.get(k)) {
                    CancellationReason::none()
                } else {
                    CancellationReason::new(
                        "ConditionalCheckFailed",
                        Some("The conditional request failed".to_owned()),
                    )
                }
            })
            .collect();
        // Capacity: every action twice its single-item cost, condition checks included.
        let mut writes = Vec::new();
        let mut units = 0.0;
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
                TransactAction::ConditionCheck { .. } => units += 2.0 * write_units(old),
            }
        }
        if reasons.iter().any(CancellationReason::is_failure) {
            inner.metrics.write_units += units + writes.iter().map(|(_, u)| u).sum::<f64>();
            return Err(Error::transaction_canceled(reasons));
        }
        for (a, k) in actions.into_iter().zip(keys) {
            match a {
                TransactAction::Put { item, .. } => {
                    t.put(k, item);
                }
                TransactAction::Delete { .. } => {
                    t.delete(&k);
                }
                TransactAction::ConditionCheck { .. } => {}
            }
        }
        inner.metrics.write_units += units;
        for (hash, u) in writes {
            inner.note_write(&hash, u);
        }
        Self::finish(fault.as_ref(), "TransactWriteItems", ())
    }

    async fn create_table(&self, billing: Billing, indexes: &[IndexSpec]) -> Result<bool> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "CreateTable")?;
        if inner.table.is_some() {
            return Ok(false);
        }
        if indexes.len() > 20 {
            return Err(validation(
                "a table takes at most 20 global secondary indexes",
            ));
        }
        inner.table = Some(TableState {
            hash_name: dynatree::HASH_KEY.to_owned(),
            range_name: dynatree::RANGE_KEY.to_owned(),
            billing,
            indexes: indexes.to_vec(),
            building: None,
            rows: BTreeMap::new(),
        });
        Self::finish(fault.as_ref(), "CreateTable", true)
    }

    async fn add_index(&self, _billing: Billing, index: &IndexSpec) -> Result<()> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "UpdateTable")?;
        let t = inner.table()?;
        if t.building.is_some() {
            return Err(Error::new(
                ErrorKind::Throttled,
                "limit exceeded: only 1 online index can be created or deleted simultaneously per table",
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
        let fault = self.begin(&mut inner, "Query")?;
        let page_bytes = inner.page_bytes.unwrap_or(PAGE_BYTES);
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
        let mut hits: Vec<&Item> = t
            .rows
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
            bytes += item.size();
            items.push((*item).clone());
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
        Self::finish(fault.as_ref(), "Query", IndexPage { items, last })
    }

    async fn describe_table(&self) -> Result<Option<TableDescription>> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        let fault = self.begin(&mut inner, "DescribeTable")?;
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
