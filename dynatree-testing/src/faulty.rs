//! [`Faulty`]: fault injection for any [`Storage`], DynamoDB Local included.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use dynatree::{
    BatchGetOutput, Billing, Condition, Error, ErrorKind, IndexPage, IndexQuery, IndexSpec, Item,
    Key, Page, Query, Result, Storage, TableDescription, TransactAction, WriteRequest,
};

use crate::Fault;

/// Wraps any backend and makes chosen requests fail, before or after they are applied, so
/// crash-safety tests run against the real service too. [`FakeTable`](crate::FakeTable) has
/// the same faults built in (and unprocessed batches, which this wrapper does not simulate).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree_testing::{FakeTable, Fault, Faulty};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// let table = Faulty::new(FakeTable::new());
/// let tree = Tree::new(&table);
/// tree.create_table().await?;
/// table.inject(0, Fault::Fail); // the next request fails
/// assert!(tree.put(["a"], &V { v: 1 }).await.is_err());
/// tree.put(["a"], &V { v: 1 }).await?; // and the same call again succeeds
/// assert!(table.requests() > 3);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Faulty<S> {
    inner: S,
    count: AtomicU64,
    faults: Mutex<BTreeMap<u64, Fault>>,
}

impl<S: Storage> Faulty<S> {
    /// `inner`, with no faults yet.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            count: AtomicU64::new(0),
            faults: Mutex::new(BTreeMap::new()),
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Makes request number `nth` (0-based, counted from now) suffer `fault`
    /// (`Throttle`, `Fail` or `FailAfterApply`).
    pub fn inject(&self, nth: u64, fault: Fault) {
        let at = self.requests() + nth;
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(at, fault);
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    fn begin(&self, op: &str) -> Result<bool> {
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        let fault = self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&n);
        match fault {
            Some(Fault::Throttle) => Err(Error::new(
                ErrorKind::Throttled,
                format!("injected throttle on {op}"),
            )),
            Some(Fault::Fail) => Err(Error::new(
                ErrorKind::Backend,
                format!("injected failure of {op}"),
            )),
            Some(Fault::FailAfterApply) => Ok(true),
            _ => Ok(false),
        }
    }

    fn end<T>(lost: bool, op: &str, r: Result<T>) -> Result<T> {
        match r {
            Ok(_) if lost => Err(Error::new(
                ErrorKind::Backend,
                format!("injected lost response of {op} (it was applied)"),
            )),
            other => other,
        }
    }
}

macro_rules! faulty {
    ($self:ident, $op:literal, $call:expr) => {{
        let lost = $self.begin($op)?;
        let r = $call.await;
        Self::end(lost, $op, r)
    }};
}

impl<S: Storage> Storage for Faulty<S> {
    async fn get_item(&self, key: &Key, consistent: bool) -> Result<Option<Item>> {
        faulty!(self, "GetItem", self.inner.get_item(key, consistent))
    }
    async fn put_item(&self, item: Item, condition: Condition) -> Result<()> {
        faulty!(self, "PutItem", self.inner.put_item(item, condition))
    }
    async fn delete_item(&self, key: &Key, condition: Condition) -> Result<()> {
        faulty!(self, "DeleteItem", self.inner.delete_item(key, condition))
    }
    async fn query_page(&self, query: &Query, start: Option<Key>) -> Result<Page> {
        faulty!(self, "Query", self.inner.query_page(query, start))
    }
    async fn scan_page(&self, limit: Option<u32>, start: Option<Key>) -> Result<Page> {
        faulty!(self, "Scan", self.inner.scan_page(limit, start))
    }
    async fn batch_get(&self, keys: Vec<Key>, consistent: bool) -> Result<BatchGetOutput> {
        faulty!(self, "BatchGetItem", self.inner.batch_get(keys, consistent))
    }
    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>> {
        faulty!(self, "BatchWriteItem", self.inner.batch_write(requests))
    }
    async fn transact_write(&self, actions: Vec<TransactAction>) -> Result<()> {
        faulty!(
            self,
            "TransactWriteItems",
            self.inner.transact_write(actions)
        )
    }
    async fn create_table(&self, billing: Billing, indexes: &[IndexSpec]) -> Result<bool> {
        faulty!(
            self,
            "CreateTable",
            self.inner.create_table(billing, indexes)
        )
    }
    async fn add_index(&self, billing: Billing, index: &IndexSpec) -> Result<()> {
        faulty!(self, "UpdateTable", self.inner.add_index(billing, index))
    }
    async fn query_index_page(&self, query: &IndexQuery, start: Option<Item>) -> Result<IndexPage> {
        faulty!(self, "Query", self.inner.query_index_page(query, start))
    }
    async fn describe_table(&self) -> Result<Option<TableDescription>> {
        faulty!(self, "DescribeTable", self.inner.describe_table())
    }
}
