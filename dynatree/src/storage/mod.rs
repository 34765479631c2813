//! The backend interface, for those who write or wrap a backend: the [`Storage`] trait (one
//! DynamoDB table with a string hash key `Key` and a string range key `Child`, spoken to in
//! dynatree's own types), its requests and pages, raw keys, and batch helpers. Applications
//! only need [`Tree`](crate::Tree) and a backend.
//!
//! Two backends implement it: [`DynamoDbTable`](crate::DynamoDbTable) (feature `dynamodb`) and
//! `dynatree_testing::FakeTable`. Both give DynamoDB's semantics: UTF-8 byte order of keys, 1 MB
//! query pages, 25/100-item batches with partial results, atomic transactions with per-action
//! cancellation reasons.

#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use crate::batch::{BATCH_GET_MAX, BATCH_WRITE_MAX, TRANSACT_MAX, get_all, write_all};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
pub use crate::layout::{HASH_KEY, MAX_HASH_KEY_BYTES, MAX_RANGE_KEY_BYTES, RANGE_KEY};

/// The primary key of one row: the `Key` (hash) and `Child` (range) strings.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Key;
///
/// let k = Key::new("¦Accounts¦", "123456");
/// let item = k.clone().into_item();
/// assert_eq!(Key::from_item(&item), Some(k));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The hash key (`Key` attribute).
    pub hash: String,
    /// The range key (`Child` attribute).
    pub range: String,
}

impl Key {
    /// A key from its two strings.
    pub fn new(hash: impl Into<String>, range: impl Into<String>) -> Self {
        Self {
            hash: hash.into(),
            range: range.into(),
        }
    }

    /// An item holding just this key.
    pub fn into_item(self) -> Item {
        let mut item = Item::new();
        item.insert(HASH_KEY, Value::S(self.hash));
        item.insert(RANGE_KEY, Value::S(self.range));
        item
    }

    /// The key of an item, if it has both key attributes as strings.
    pub fn from_item(item: &Item) -> Option<Self> {
        Some(Self::new(item.get_s(HASH_KEY)?, item.get_s(RANGE_KEY)?))
    }
}

/// A condition on the current state of one item, evaluated atomically with a write.
///
/// # Examples
///
/// ```
/// use dynatree::{Item, Value};
/// use dynatree::storage::Condition;
///
/// let mut item = Item::new();
/// item.insert("v", Value::N("1".into()));
/// assert!(Condition::Exists.eval(Some(&item)));
/// assert!(Condition::NotExists.eval(None));
/// assert!(Condition::equals("v", Value::N("1".into())).eval(Some(&item)));
/// assert!(!Condition::attr_exists("w").eval(Some(&item)));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum Condition {
    /// No condition.
    #[default]
    Always,
    /// The item exists.
    Exists,
    /// The item does not exist.
    NotExists,
    /// The item exists and has this attribute.
    AttrExists(String),
    /// The item does not exist or lacks this attribute.
    AttrNotExists(String),
    /// The item has this attribute with exactly this value.
    Equals(String, Value),
    /// All of these hold.
    And(Vec<Condition>),
    /// At least one of these holds.
    Or(Vec<Condition>),
}

impl Condition {
    /// [`Condition::AttrExists`].
    pub fn attr_exists(name: impl Into<String>) -> Self {
        Self::AttrExists(name.into())
    }

    /// [`Condition::AttrNotExists`].
    pub fn attr_not_exists(name: impl Into<String>) -> Self {
        Self::AttrNotExists(name.into())
    }

    /// [`Condition::Equals`].
    pub fn equals(name: impl Into<String>, value: Value) -> Self {
        Self::Equals(name.into(), value)
    }

    /// Evaluates the condition against the item's current state (`None`: absent). Values
    /// compare as DynamoDB compares them: numbers by value, sets regardless of order.
    pub fn eval(&self, item: Option<&Item>) -> bool {
        match self {
            Condition::Always => true,
            Condition::Exists => item.is_some(),
            Condition::NotExists => item.is_none(),
            Condition::AttrExists(n) => item.is_some_and(|i| i.contains(n)),
            Condition::AttrNotExists(n) => !item.is_some_and(|i| i.contains(n)),
            Condition::Equals(n, v) => item.and_then(|i| i.get(n)).is_some_and(|x| x.same_as(v)),
            Condition::And(cs) => cs.iter().all(|c| c.eval(item)),
            Condition::Or(cs) => cs.iter().any(|c| c.eval(item)),
        }
    }

    /// Whether this is [`Condition::Always`].
    pub fn is_always(&self) -> bool {
        matches!(self, Condition::Always)
    }
}

/// A condition on the range key (`Child`) of a query.
///
/// # Examples
///
/// ```
/// use dynatree::storage::RangeCondition;
///
/// assert!(RangeCondition::BeginsWith("2026-".into()).matches("2026-11-21"));
/// assert!(RangeCondition::Between("b".into(), "d".into()).matches("c"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeCondition {
    /// `Child = v`
    Eq(String),
    /// `Child < v`
    Lt(String),
    /// `Child <= v`
    Le(String),
    /// `Child > v`
    Gt(String),
    /// `Child >= v`
    Ge(String),
    /// `Child BETWEEN a AND b` (both inclusive)
    Between(String, String),
    /// `begins_with(Child, v)`
    BeginsWith(String),
}

impl RangeCondition {
    /// Whether `range` satisfies the condition, comparing UTF-8 bytes as DynamoDB does.
    pub fn matches(&self, range: &str) -> bool {
        let r = range.as_bytes();
        match self {
            RangeCondition::Eq(v) => r == v.as_bytes(),
            RangeCondition::Lt(v) => r < v.as_bytes(),
            RangeCondition::Le(v) => r <= v.as_bytes(),
            RangeCondition::Gt(v) => r > v.as_bytes(),
            RangeCondition::Ge(v) => r >= v.as_bytes(),
            RangeCondition::Between(a, b) => r >= a.as_bytes() && r <= b.as_bytes(),
            RangeCondition::BeginsWith(v) => r.starts_with(v.as_bytes()),
        }
    }

    /// The values the condition compares with.
    fn values(&self) -> impl Iterator<Item = &str> {
        let (a, b) = match self {
            RangeCondition::Eq(v)
            | RangeCondition::Lt(v)
            | RangeCondition::Le(v)
            | RangeCondition::Gt(v)
            | RangeCondition::Ge(v)
            | RangeCondition::BeginsWith(v) => (v, None),
            RangeCondition::Between(a, b) => (a, Some(b)),
        };
        std::iter::once(a.as_str()).chain(b.map(String::as_str))
    }

    /// Checks the condition as DynamoDB does before it runs a query: every value is a valid
    /// sort key value (1 to [`MAX_RANGE_KEY_BYTES`] bytes; so `begins_with("")` is refused),
    /// and `Between`'s lower bound is not above its upper bound.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::RangeCondition;
    ///
    /// assert!(RangeCondition::Between("a".into(), "b".into()).check().is_ok());
    /// let e = RangeCondition::Between("b".into(), "a".into()).check().unwrap_err();
    /// assert_eq!(e.kind(), dynatree::ErrorKind::InvalidArgument);
    /// assert!(RangeCondition::BeginsWith(String::new()).check().is_err());
    /// ```
    pub fn check(&self) -> Result<()> {
        for v in self.values() {
            if v.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "a range key condition cannot compare with an empty string",
                ));
            }
            if v.len() > MAX_RANGE_KEY_BYTES {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "a range key condition value is {} bytes, over DynamoDB's {MAX_RANGE_KEY_BYTES}-byte sort key limit",
                        v.len()
                    ),
                ));
            }
        }
        if let RangeCondition::Between(a, b) = self
            && a.as_bytes() > b.as_bytes()
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "`between` needs its lower bound at or below its upper bound",
            ));
        }
        Ok(())
    }

    /// Whether DynamoDB takes a start key (`ExclusiveStartKey`) whose range key is `start` for
    /// a query with this condition, read `forward` or backward.
    ///
    /// DynamoDB (as DynamoDB Local 3.3.1 answers) wants the start key inside the condition,
    /// with one twist: the bound the query reads towards is exclusive even when the condition
    /// includes it. Reading forward, `Le("c")` takes start keys below `"c"`, and `Ge("c")`
    /// those from `"c"` on; reading backward it is the other way round. `Eq(v)` takes `v`
    /// and `BeginsWith(p)` any key starting with `p`. A start key at an included far bound
    /// (the last page ended on it) has nothing after it.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::RangeCondition;
    ///
    /// let le = RangeCondition::Le("c".into());
    /// assert!(le.accepts_start("b", true));
    /// assert!(!le.accepts_start("c", true)); // nothing can follow "c" anyway
    /// assert!(le.accepts_start("c", false));
    /// assert!(!RangeCondition::Ge("c".into()).accepts_start("b", true));
    /// ```
    pub fn accepts_start(&self, start: &str, forward: bool) -> bool {
        let s = start.as_bytes();
        match self {
            RangeCondition::Eq(v) => s == v.as_bytes(),
            RangeCondition::BeginsWith(p) => s.starts_with(p.as_bytes()),
            RangeCondition::Gt(v) => s > v.as_bytes(),
            RangeCondition::Lt(v) => s < v.as_bytes(),
            RangeCondition::Ge(v) => {
                if forward {
                    s >= v.as_bytes()
                } else {
                    s > v.as_bytes()
                }
            }
            RangeCondition::Le(v) => {
                if forward {
                    s < v.as_bytes()
                } else {
                    s <= v.as_bytes()
                }
            }
            RangeCondition::Between(a, b) => {
                if forward {
                    s >= a.as_bytes() && s < b.as_bytes()
                } else {
                    s > a.as_bytes() && s <= b.as_bytes()
                }
            }
        }
    }
}

/// One Query: an exact hash key, an optional range condition, order, limit and consistency.
///
/// # Examples
///
/// ```
/// use dynatree::storage::{Query, RangeCondition};
///
/// let q = Query::new("¦Accounts¦")
///     .with_range(RangeCondition::BeginsWith("12".into()))
///     .with_limit(10)
///     .descending();
/// assert_eq!(q.hash, "¦Accounts¦");
/// assert!(!q.forward);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Query {
    /// The hash key to read.
    pub hash: String,
    /// An optional condition on `Child`.
    pub range: Option<RangeCondition>,
    /// Ascending (`true`, the default) or descending order of `Child`.
    pub forward: bool,
    /// The most items one page evaluates (DynamoDB's `Limit`); pages also stop at 1 MB.
    pub limit: Option<u32>,
    /// Strongly consistent (`true`) or eventually consistent read.
    pub consistent: bool,
}

impl Query {
    /// A query of every item under `hash`, ascending, eventually consistent.
    pub fn new(hash: impl Into<String>) -> Self {
        Self {
            hash: hash.into(),
            range: None,
            forward: true,
            limit: None,
            consistent: false,
        }
    }

    /// Adds a range condition.
    pub fn with_range(mut self, range: RangeCondition) -> Self {
        self.range = Some(range);
        self
    }

    /// Sets the page limit.
    pub fn with_limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Descending order.
    pub fn descending(mut self) -> Self {
        self.forward = false;
        self
    }

    /// Strongly consistent reads.
    pub fn consistent(mut self, consistent: bool) -> Self {
        self.consistent = consistent;
        self
    }

    /// Checks the query as DynamoDB does: a non-empty hash key, a valid range condition (see
    /// [`RangeCondition::check`]), a limit of at least 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Query, RangeCondition};
    ///
    /// assert!(Query::new("h").check().is_ok());
    /// assert!(Query::new("").check().is_err());
    /// assert!(Query::new("h").with_range(RangeCondition::BeginsWith(String::new())).check().is_err());
    /// ```
    pub fn check(&self) -> Result<()> {
        if self.hash.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the hash key value of a query cannot be empty",
            ));
        }
        if self.limit == Some(0) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a query limit must be at least 1",
            ));
        }
        self.range.as_ref().map_or(Ok(()), RangeCondition::check)
    }

    /// Whether DynamoDB takes `start` as this query's `ExclusiveStartKey`: its hash key is the
    /// query's, its range key is not empty, and the range condition takes it (see
    /// [`RangeCondition::accepts_start`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Key, Query, RangeCondition};
    ///
    /// let q = Query::new("h").with_range(RangeCondition::Ge("b".into()));
    /// assert!(q.accepts_start(&Key::new("h", "c")));
    /// assert!(!q.accepts_start(&Key::new("h", "a")));
    /// assert!(!q.accepts_start(&Key::new("other", "c")));
    /// ```
    pub fn accepts_start(&self, start: &Key) -> bool {
        start.hash == self.hash
            && !start.range.is_empty()
            && self
                .range
                .as_ref()
                .is_none_or(|c| c.accepts_start(&start.range, self.forward))
    }
}

/// One page of a Query or Scan.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Condition, Key, Query, Storage}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// for r in ["a", "b", "c"] {
///     table.put_item(Key::new("h", r).into_item(), Condition::Always).await?;
/// }
/// let page = table.query_page(&Query::new("h").with_limit(2), None).await?;
/// assert_eq!(page.items.len(), 2);
/// let rest = table.query_page(&Query::new("h"), page.last_key).await?;
/// assert_eq!(rest.items.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    /// The items of this page, in key order.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last page.
    pub last_key: Option<Key>,
}

/// One request of a BatchWriteItem (see [`storage::write_all`](crate::batch::write_all)).
///
/// # Examples
///
/// ```
/// use dynatree::storage::{Key, WriteRequest};
///
/// let put = WriteRequest::Put(Key::new("h", "r").into_item());
/// let delete = WriteRequest::Delete(Key::new("h", "r"));
/// assert_ne!(put, delete);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum WriteRequest {
    /// Put (replace) an item.
    Put(Item),
    /// Delete the item with this key.
    Delete(Key),
}

/// What a BatchGetItem returned: the items found and the keys DynamoDB left unprocessed.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Key, Storage}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// let out = table.batch_get(vec![Key::new("h", "missing")], true).await?;
/// assert!(out.items.is_empty() && out.unprocessed.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchGetOutput {
    /// Items found, in no particular order.
    pub items: Vec<Item>,
    /// Keys to send again.
    pub unprocessed: Vec<Key>,
}

/// One action of a TransactWriteItems.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Condition, Key, Storage, TransactAction}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let table = FakeTable::new(); Tree::new(table.clone()).create_table().await?;
/// let err = table
///     .transact_write(vec![
///         TransactAction::Put { item: Key::new("a", "1").into_item(), condition: Condition::Always },
///         TransactAction::ConditionCheck { key: Key::new("b", "1"), condition: Condition::Exists },
///     ])
///     .await
///     .unwrap_err();
/// assert_eq!(err.cancellation_reasons()[1].code(), "ConditionalCheckFailed");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum TransactAction {
    /// Put an item if the condition holds.
    Put {
        /// The whole item, key included.
        item: Item,
        /// Evaluated against the current item.
        condition: Condition,
    },
    /// Delete an item if the condition holds.
    Delete {
        /// The item's key.
        key: Key,
        /// Evaluated against the current item.
        condition: Condition,
    },
    /// Only check a condition on an item.
    ConditionCheck {
        /// The item's key.
        key: Key,
        /// Evaluated against the current item.
        condition: Condition,
    },
}

impl TransactAction {
    /// The key the action targets.
    pub fn key(&self) -> Option<Key> {
        match self {
            TransactAction::Put { item, .. } => Key::from_item(item),
            TransactAction::Delete { key, .. } | TransactAction::ConditionCheck { key, .. } => {
                Some(key.clone())
            }
        }
    }
}

/// A global secondary index: its name and its key attributes (strings), projecting every
/// attribute.
///
/// # Examples
///
/// ```
/// use dynatree::storage::IndexSpec;
///
/// let ix = IndexSpec::new("by_email", "¦ix.by_email.h", None);
/// assert_eq!(ix.name, "by_email");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexSpec {
    /// The index name.
    pub name: String,
    /// The index's hash key attribute.
    pub hash_attr: String,
    /// The index's range key attribute, if any.
    pub range_attr: Option<String>,
}

impl IndexSpec {
    /// An index definition.
    pub fn new(
        name: impl Into<String>,
        hash_attr: impl Into<String>,
        range_attr: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            hash_attr: hash_attr.into(),
            range_attr,
        }
    }
}

/// A Query on a global secondary index (always eventually consistent, as DynamoDB requires).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexQuery {
    /// The index.
    pub index: IndexSpec,
    /// The hash key value to read.
    pub hash: String,
    /// An optional condition on the index's range key.
    pub range: Option<RangeCondition>,
    /// Ascending (`true`) or descending order of the index's range key.
    pub forward: bool,
    /// The most items one page evaluates.
    pub limit: Option<u32>,
}

/// One page of an index query; `last` is DynamoDB's `LastEvaluatedKey` (table and index keys).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexPage {
    /// The items of this page.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last page.
    pub last: Option<Item>,
}

/// How a table is billed when dynatree creates it.
///
/// # Examples
///
/// ```
/// use dynatree::{Billing, Tree};
/// use dynatree_testing::FakeTable;
///
/// let tree = Tree::builder(FakeTable::new())
///     .billing(Billing::Provisioned { read: 5, write: 5 })
///     .build()?;
/// # let _ = tree;
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Billing {
    /// On-demand (pay per request); the default.
    #[default]
    OnDemand,
    /// Provisioned read and write capacity units.
    Provisioned {
        /// Read capacity units.
        read: u64,
        /// Write capacity units.
        write: u64,
    },
}

/// A table's status, as DescribeTable reports it.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree;
/// # use dynatree::storage::{Storage, TableStatus}; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// Tree::new(table.clone()).create_table().await?;
/// assert_eq!(table.describe_table().await?.unwrap().status, TableStatus::Active);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableStatus {
    /// Being created.
    Creating,
    /// Ready for use.
    Active,
    /// Any other status (updating, deleting, archived, …).
    Other,
}

/// What DescribeTable says about a table: its status, key schema and billing mode.
///
/// # Examples
///
/// ```
/// use dynatree::Billing;
/// use dynatree::storage::{TableDescription, TableStatus};
///
/// let d = TableDescription {
///     status: TableStatus::Active,
///     hash_key: ("Key".into(), "S".into()),
///     range_key: Some(("Child".into(), "S".into())),
///     billing: Billing::OnDemand,
///     indexes: vec![],
/// };
/// assert!(d.has_tree_schema());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDescription {
    /// The table's status.
    pub status: TableStatus,
    /// Hash key attribute name and scalar type (`"S"`, `"N"`, `"B"`).
    pub hash_key: (String, String),
    /// Range key attribute name and type, if the table has one.
    pub range_key: Option<(String, String)>,
    /// How the table is billed.
    pub billing: Billing,
    /// Its global secondary indexes and their status.
    pub indexes: Vec<(String, TableStatus)>,
}

impl TableDescription {
    /// Whether the key schema is the one a tree needs: `Key` (S) hash, `Child` (S) range.
    pub fn has_tree_schema(&self) -> bool {
        self.hash_key == (HASH_KEY.to_owned(), "S".to_owned())
            && self.range_key == Some((RANGE_KEY.to_owned(), "S".to_owned()))
    }
}

/// One DynamoDB table with hash key `Key` (S) and range key `Child` (S).
///
/// Implementations give DynamoDB's semantics and limits, and map failures to [`ErrorKind`]s:
/// [`ConditionFailed`](ErrorKind::ConditionFailed),
/// [`TransactionCanceled`](ErrorKind::TransactionCanceled) with reasons,
/// [`Throttled`](ErrorKind::Throttled), [`Validation`](ErrorKind::Validation),
/// [`TableNotFound`](ErrorKind::TableNotFound), [`Backend`](ErrorKind::Backend).
///
/// # Cancel safety
///
/// Dropping a write's future may or may not have applied the write: the request may have been
/// sent and received. Reads are cancel safe.
///
/// # Examples
///
/// A shared reference or an `Arc` of a table is a table too, so several trees can share one:
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// let table = FakeTable::new();
/// let a = Tree::new(table.clone());
/// let b = Tree::builder(table.clone()).reserved('|').build()?;
/// # let _ = (a, b);
/// # Ok::<(), dynatree::Error>(())
/// ```
///
/// A function generic over the backend:
///
/// ```
/// use dynatree::Result;
/// use dynatree::storage::{Key, Storage};
///
/// async fn exists<S: Storage>(table: &S, key: &Key) -> Result<bool> {
///     Ok(table.get_item(key, true).await?.is_some())
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a dynatree storage backend",
    note = "use `dynatree::DynamoDbTable` or `dynatree_testing::FakeTable`"
)]
pub trait Storage: Send + Sync {
    /// GetItem.
    fn get_item(
        &self,
        key: &Key,
        consistent: bool,
    ) -> impl Future<Output = Result<Option<Item>>> + Send;

    /// PutItem with a condition ([`ErrorKind::ConditionFailed`] when it does not hold).
    fn put_item(&self, item: Item, condition: Condition)
    -> impl Future<Output = Result<()>> + Send;

    /// DeleteItem with a condition ([`ErrorKind::ConditionFailed`] when it does not hold).
    fn delete_item(
        &self,
        key: &Key,
        condition: Condition,
    ) -> impl Future<Output = Result<()>> + Send;

    /// One page of a Query, starting after `start`.
    fn query_page(
        &self,
        query: &Query,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send;

    /// One page of a Scan of the whole table, starting after `start`.
    fn scan_page(
        &self,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send;

    /// BatchGetItem of at most 100 keys; returns the items found and unprocessed keys.
    fn batch_get(
        &self,
        keys: Vec<Key>,
        consistent: bool,
    ) -> impl Future<Output = Result<BatchGetOutput>> + Send;

    /// BatchWriteItem of at most 25 requests; returns the unprocessed requests.
    fn batch_write(
        &self,
        requests: Vec<WriteRequest>,
    ) -> impl Future<Output = Result<Vec<WriteRequest>>> + Send;

    /// TransactWriteItems of at most 100 actions, no two on one item, atomically.
    fn transact_write(
        &self,
        actions: Vec<TransactAction>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// CreateTable with the tree schema and these global secondary indexes. `Ok(false)` if the
    /// table already exists (the caller then checks its schema with
    /// [`describe_table`](Storage::describe_table)).
    fn create_table(
        &self,
        billing: Billing,
        indexes: &[IndexSpec],
    ) -> impl Future<Output = Result<bool>> + Send;

    /// UpdateTable: adds a global secondary index to an existing table.
    fn add_index(
        &self,
        billing: Billing,
        index: &IndexSpec,
    ) -> impl Future<Output = Result<()>> + Send;

    /// One page of a Query on a global secondary index, starting after `start`.
    fn query_index_page(
        &self,
        query: &IndexQuery,
        start: Option<Item>,
    ) -> impl Future<Output = Result<IndexPage>> + Send;

    /// DescribeTable; `None` if the table does not exist.
    fn describe_table(&self) -> impl Future<Output = Result<Option<TableDescription>>> + Send;
}

/// Forwards every method to `**self`.
macro_rules! forward_storage {
    ($($target:ty),*) => {$(
        impl<S: Storage + ?Sized> Storage for $target {
            fn get_item(&self, key: &Key, consistent: bool)
                -> impl Future<Output = Result<Option<Item>>> + Send {
                (**self).get_item(key, consistent)
            }
            fn put_item(&self, item: Item, condition: Condition)
                -> impl Future<Output = Result<()>> + Send {
                (**self).put_item(item, condition)
            }
            fn delete_item(&self, key: &Key, condition: Condition)
                -> impl Future<Output = Result<()>> + Send {
                (**self).delete_item(key, condition)
            }
            fn query_page(&self, query: &Query, start: Option<Key>)
                -> impl Future<Output = Result<Page>> + Send {
                (**self).query_page(query, start)
            }
            fn scan_page(&self, limit: Option<u32>, start: Option<Key>)
                -> impl Future<Output = Result<Page>> + Send {
                (**self).scan_page(limit, start)
            }
            fn batch_get(&self, keys: Vec<Key>, consistent: bool)
                -> impl Future<Output = Result<BatchGetOutput>> + Send {
                (**self).batch_get(keys, consistent)
            }
            fn batch_write(&self, requests: Vec<WriteRequest>)
                -> impl Future<Output = Result<Vec<WriteRequest>>> + Send {
                (**self).batch_write(requests)
            }
            fn transact_write(&self, actions: Vec<TransactAction>)
                -> impl Future<Output = Result<()>> + Send {
                (**self).transact_write(actions)
            }
            fn create_table(&self, billing: Billing, indexes: &[IndexSpec])
                -> impl Future<Output = Result<bool>> + Send {
                (**self).create_table(billing, indexes)
            }
            fn add_index(&self, billing: Billing, index: &IndexSpec)
                -> impl Future<Output = Result<()>> + Send {
                (**self).add_index(billing, index)
            }
            fn query_index_page(&self, query: &IndexQuery, start: Option<Item>)
                -> impl Future<Output = Result<IndexPage>> + Send {
                (**self).query_index_page(query, start)
            }
            fn describe_table(&self)
                -> impl Future<Output = Result<Option<TableDescription>>> + Send {
                (**self).describe_table()
            }
        }
    )*};
}

// A shared reference or an `Arc` of a table is a table: several trees (or a tree and your own
// code) can use one backend.
forward_storage!(&S, std::sync::Arc<S>);

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// [`Storage`] with boxed futures, so that it can be a trait object.
trait ErasedStorage: Send + Sync + 'static {
    fn get_item<'a>(&'a self, key: &'a Key, consistent: bool) -> BoxFuture<'a, Option<Item>>;
    fn put_item(&self, item: Item, condition: Condition) -> BoxFuture<'_, ()>;
    fn delete_item<'a>(&'a self, key: &'a Key, condition: Condition) -> BoxFuture<'a, ()>;
    fn query_page<'a>(&'a self, query: &'a Query, start: Option<Key>) -> BoxFuture<'a, Page>;
    fn scan_page(&self, limit: Option<u32>, start: Option<Key>) -> BoxFuture<'_, Page>;
    fn batch_get(&self, keys: Vec<Key>, consistent: bool) -> BoxFuture<'_, BatchGetOutput>;
    fn batch_write(&self, requests: Vec<WriteRequest>) -> BoxFuture<'_, Vec<WriteRequest>>;
    fn transact_write(&self, actions: Vec<TransactAction>) -> BoxFuture<'_, ()>;
    fn create_table<'a>(
        &'a self,
        billing: Billing,
        indexes: &'a [IndexSpec],
    ) -> BoxFuture<'a, bool>;
    fn add_index<'a>(&'a self, billing: Billing, index: &'a IndexSpec) -> BoxFuture<'a, ()>;
    fn query_index_page<'a>(
        &'a self,
        query: &'a IndexQuery,
        start: Option<Item>,
    ) -> BoxFuture<'a, IndexPage>;
    fn describe_table(&self) -> BoxFuture<'_, Option<TableDescription>>;
    fn as_any(&self) -> &dyn Any;
}

impl<S: Storage + 'static> ErasedStorage for S {
    fn get_item<'a>(&'a self, key: &'a Key, consistent: bool) -> BoxFuture<'a, Option<Item>> {
        Box::pin(Storage::get_item(self, key, consistent))
    }
    fn put_item(&self, item: Item, condition: Condition) -> BoxFuture<'_, ()> {
        Box::pin(Storage::put_item(self, item, condition))
    }
    fn delete_item<'a>(&'a self, key: &'a Key, condition: Condition) -> BoxFuture<'a, ()> {
        Box::pin(Storage::delete_item(self, key, condition))
    }
    fn query_page<'a>(&'a self, query: &'a Query, start: Option<Key>) -> BoxFuture<'a, Page> {
        Box::pin(Storage::query_page(self, query, start))
    }
    fn scan_page(&self, limit: Option<u32>, start: Option<Key>) -> BoxFuture<'_, Page> {
        Box::pin(Storage::scan_page(self, limit, start))
    }
    fn batch_get(&self, keys: Vec<Key>, consistent: bool) -> BoxFuture<'_, BatchGetOutput> {
        Box::pin(Storage::batch_get(self, keys, consistent))
    }
    fn batch_write(&self, requests: Vec<WriteRequest>) -> BoxFuture<'_, Vec<WriteRequest>> {
        Box::pin(Storage::batch_write(self, requests))
    }
    fn transact_write(&self, actions: Vec<TransactAction>) -> BoxFuture<'_, ()> {
        Box::pin(Storage::transact_write(self, actions))
    }
    fn create_table<'a>(
        &'a self,
        billing: Billing,
        indexes: &'a [IndexSpec],
    ) -> BoxFuture<'a, bool> {
        Box::pin(Storage::create_table(self, billing, indexes))
    }
    fn add_index<'a>(&'a self, billing: Billing, index: &'a IndexSpec) -> BoxFuture<'a, ()> {
        Box::pin(Storage::add_index(self, billing, index))
    }
    fn query_index_page<'a>(
        &'a self,
        query: &'a IndexQuery,
        start: Option<Item>,
    ) -> BoxFuture<'a, IndexPage> {
        Box::pin(Storage::query_index_page(self, query, start))
    }
    fn describe_table(&self) -> BoxFuture<'_, Option<TableDescription>> {
        Box::pin(Storage::describe_table(self))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Any [`Storage`] behind one type: what a [`Tree`](crate::Tree) holds unless you ask for
/// static dispatch. Cloning it is cloning an `Arc`.
///
/// [`downcast_ref`](SharedStorage::downcast_ref) gets the concrete backend back (for example a
/// test's `FakeTable`, to read its metrics).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree::storage::SharedStorage;
/// use dynatree_testing::FakeTable;
///
/// let tree = Tree::new(FakeTable::new());
/// let shared: &SharedStorage = tree.storage();
/// assert!(shared.downcast_ref::<FakeTable>().is_some());
/// // Wrapping a `SharedStorage` again does not nest it.
/// let again = SharedStorage::new(shared.clone());
/// assert!(again.downcast_ref::<FakeTable>().is_some());
/// ```
#[derive(Clone)]
pub struct SharedStorage(Arc<dyn ErasedStorage>);

impl SharedStorage {
    /// Erases the type of `storage`.
    pub fn new<S: Storage + 'static>(storage: S) -> Self {
        match (&storage as &dyn Any).downcast_ref::<SharedStorage>() {
            Some(shared) => shared.clone(),
            None => Self(Arc::new(storage)),
        }
    }

    /// The backend, if it is an `S`.
    pub fn downcast_ref<S: Storage + 'static>(&self) -> Option<&S> {
        self.0.as_any().downcast_ref::<S>()
    }
}

impl fmt::Debug for SharedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedStorage").finish_non_exhaustive()
    }
}

// Each method forwards to the boxed future of the erased backend; spelled as `async move`
// blocks so that each borrowed argument keeps its own lifetime.
#[allow(clippy::manual_async_fn)]
impl Storage for SharedStorage {
    fn get_item(
        &self,
        key: &Key,
        consistent: bool,
    ) -> impl Future<Output = Result<Option<Item>>> + Send {
        async move { self.0.get_item(key, consistent).await }
    }
    fn put_item(
        &self,
        item: Item,
        condition: Condition,
    ) -> impl Future<Output = Result<()>> + Send {
        async move { self.0.put_item(item, condition).await }
    }
    fn delete_item(
        &self,
        key: &Key,
        condition: Condition,
    ) -> impl Future<Output = Result<()>> + Send {
        async move { self.0.delete_item(key, condition).await }
    }
    fn query_page(
        &self,
        query: &Query,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send {
        async move { self.0.query_page(query, start).await }
    }
    fn scan_page(
        &self,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> impl Future<Output = Result<Page>> + Send {
        async move { self.0.scan_page(limit, start).await }
    }
    fn batch_get(
        &self,
        keys: Vec<Key>,
        consistent: bool,
    ) -> impl Future<Output = Result<BatchGetOutput>> + Send {
        async move { self.0.batch_get(keys, consistent).await }
    }
    fn batch_write(
        &self,
        requests: Vec<WriteRequest>,
    ) -> impl Future<Output = Result<Vec<WriteRequest>>> + Send {
        async move { self.0.batch_write(requests).await }
    }
    fn transact_write(
        &self,
        actions: Vec<TransactAction>,
    ) -> impl Future<Output = Result<()>> + Send {
        async move { self.0.transact_write(actions).await }
    }
    fn create_table(
        &self,
        billing: Billing,
        indexes: &[IndexSpec],
    ) -> impl Future<Output = Result<bool>> + Send {
        async move { self.0.create_table(billing, indexes).await }
    }
    fn add_index(
        &self,
        billing: Billing,
        index: &IndexSpec,
    ) -> impl Future<Output = Result<()>> + Send {
        async move { self.0.add_index(billing, index).await }
    }
    fn query_index_page(
        &self,
        query: &IndexQuery,
        start: Option<Item>,
    ) -> impl Future<Output = Result<IndexPage>> + Send {
        async move { self.0.query_index_page(query, start).await }
    }
    fn describe_table(&self) -> impl Future<Output = Result<Option<TableDescription>>> + Send {
        async move { self.0.describe_table().await }
    }
}

/// Turns a missing-key invariant into an error rather than a panic.
#[cfg(feature = "dynamodb")]
pub(crate) fn key_of(item: &Item) -> Result<Key> {
    Key::from_item(item).ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            "row without string `Key` and `Child` attributes",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_conditions_compare_bytes() {
        // "Z" < "a" < "¦" in UTF-8 byte order.
        assert!(RangeCondition::Lt("a".into()).matches("Z"));
        assert!(RangeCondition::Gt("a".into()).matches("¦"));
        assert!(RangeCondition::Between("b".into(), "d".into()).matches("c"));
        assert!(RangeCondition::BeginsWith("ab".into()).matches("abc"));
    }
}
