//! A request to a table as a value ([`Request`]) and its answer ([`Response`]): what a
//! [`Storage`](super::Storage) implements once, in [`send`](super::Storage::send), so that a
//! layer around a table (retries, fault injection, a simulator's scheduler) is one function
//! over every kind of request instead of one method per kind.

use std::fmt;

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;

use super::{
    BatchGetOutput, Billing, Condition, IndexPage, IndexQuery, IndexSpec, Key, Page, Query,
    ScanSegment, TableDescription, TransactAction, UpdateAction, WriteRequest,
};

/// A DynamoDB operation, as [`Request::op`] names it. A Query on the table and a Query on a
/// secondary index are both [`Op::Query`], as in DynamoDB.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Op;
///
/// assert_eq!(Op::BatchWriteItem.name(), "BatchWriteItem");
/// assert_eq!(Op::Query.to_string(), "Query");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Op {
    /// GetItem.
    GetItem,
    /// PutItem.
    PutItem,
    /// DeleteItem.
    DeleteItem,
    /// Query, on the table or on a secondary index.
    Query,
    /// Scan.
    Scan,
    /// BatchGetItem.
    BatchGetItem,
    /// BatchWriteItem.
    BatchWriteItem,
    /// TransactWriteItems.
    TransactWriteItems,
    /// TransactGetItems.
    TransactGetItems,
    /// CreateTable.
    CreateTable,
    /// UpdateTable (adding an index, turning the stream on).
    UpdateTable,
    /// DescribeTable.
    DescribeTable,
    /// UpdateItem.
    UpdateItem,
    /// UpdateTimeToLive.
    UpdateTimeToLive,
    /// DescribeTimeToLive.
    DescribeTimeToLive,
    /// DescribeStream (DynamoDB Streams).
    DescribeStream,
    /// GetRecords (DynamoDB Streams; with the GetShardIterator it needs).
    GetRecords,
}

impl Op {
    /// The operation's name in DynamoDB's API (`"GetItem"`, `"TransactWriteItems"`, …).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(dynatree::storage::Op::GetItem.name(), "GetItem");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Op::GetItem => "GetItem",
            Op::PutItem => "PutItem",
            Op::DeleteItem => "DeleteItem",
            Op::Query => "Query",
            Op::Scan => "Scan",
            Op::BatchGetItem => "BatchGetItem",
            Op::BatchWriteItem => "BatchWriteItem",
            Op::TransactWriteItems => "TransactWriteItems",
            Op::TransactGetItems => "TransactGetItems",
            Op::CreateTable => "CreateTable",
            Op::UpdateTable => "UpdateTable",
            Op::DescribeTable => "DescribeTable",
            Op::UpdateItem => "UpdateItem",
            Op::UpdateTimeToLive => "UpdateTimeToLive",
            Op::DescribeTimeToLive => "DescribeTimeToLive",
            Op::DescribeStream => "DescribeStream",
            Op::GetRecords => "GetRecords",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One request to a table: each typed method of [`Storage`](super::Storage) builds one and
/// passes it to [`send`](super::Storage::send).
///
/// # Examples
///
/// A layer that counts the items each request names, around any table:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use dynatree::Result;
/// use dynatree::storage::{Key, Request, Response, Storage};
///
/// struct Counting<S> { inner: S, keys: AtomicUsize }
///
/// impl<S: Storage> Storage for Counting<S> {
///     async fn send(&self, request: Request) -> Result<Response> {
///         self.keys.fetch_add(request.keys().len(), Ordering::Relaxed);
///         self.inner.send(request).await
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<()> {
/// let table = Counting { inner: dynatree_testing::FakeTable::new(), keys: AtomicUsize::new(0) };
/// table.create_table(Default::default(), &[]).await?;
/// table.get_item(&Key::new("h", "r"), true).await?;
/// assert_eq!(table.keys.load(Ordering::Relaxed), 1);
/// # Ok(()) }
/// ```
///
/// The enum is exhaustive on purpose: a backend matches every kind, so a kind added in a
/// later version is a compile error in the backend, not a request it fails at run time.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// GetItem, of the attributes in `projection` or of the whole item.
    GetItem {
        /// The item's key.
        key: Key,
        /// A strongly consistent read.
        consistent: bool,
        /// The attributes to read (`None`: all).
        projection: Option<Vec<String>>,
    },
    /// PutItem with a condition.
    PutItem {
        /// The whole item, its key included.
        item: Item,
        /// What must hold of the item already there.
        condition: Condition,
    },
    /// DeleteItem with a condition.
    DeleteItem {
        /// The item's key.
        key: Key,
        /// What must hold of the item.
        condition: Condition,
    },
    /// UpdateItem with a condition; answered with the item after the update.
    UpdateItem {
        /// The item's key.
        key: Key,
        /// The changes, applied together.
        actions: Vec<UpdateAction>,
        /// What must hold of the item before.
        condition: Condition,
    },
    /// One page of a Query of the table.
    Query {
        /// The partition and range to read.
        query: Query,
        /// The last key of the page before.
        start: Option<Key>,
    },
    /// One page of a Scan of the table, or of one segment of a parallel Scan.
    Scan {
        /// The segment (`None`: the whole table).
        segment: Option<ScanSegment>,
        /// At most this many items.
        limit: Option<u32>,
        /// The last key of the page before.
        start: Option<Key>,
    },
    /// One page of a Query of a secondary index.
    QueryIndex {
        /// The index, partition and range to read.
        query: IndexQuery,
        /// The last evaluated key of the page before.
        start: Option<Item>,
    },
    /// BatchGetItem (at most [`BATCH_GET_MAX`](super::BATCH_GET_MAX) keys).
    BatchGet {
        /// The keys to read.
        keys: Vec<Key>,
        /// Strongly consistent reads.
        consistent: bool,
        /// The attributes to read (`None`: all).
        projection: Option<Vec<String>>,
    },
    /// BatchWriteItem (at most [`BATCH_WRITE_MAX`](super::BATCH_WRITE_MAX) requests).
    BatchWrite {
        /// The puts and deletes.
        requests: Vec<WriteRequest>,
    },
    /// TransactGetItems.
    TransactGet {
        /// The keys to read together.
        keys: Vec<Key>,
    },
    /// TransactWriteItems, with an idempotency token or without.
    TransactWrite {
        /// The actions, applied all or none.
        actions: Vec<TransactAction>,
        /// `ClientRequestToken`: the same token with the same actions within ten minutes is
        /// applied once.
        token: Option<String>,
    },
    /// CreateTable with the tree's schema; answered with whether it was created.
    CreateTable {
        /// The billing mode.
        billing: Billing,
        /// Global secondary indexes to create with it.
        indexes: Vec<IndexSpec>,
    },
    /// UpdateTable adding a global secondary index.
    AddIndex {
        /// The billing mode of the table.
        billing: Billing,
        /// The index.
        index: IndexSpec,
    },
    /// DescribeTable; answered with `None` when there is no such table.
    DescribeTable,
    /// UpdateTimeToLive turning expiry on for `attribute`.
    EnableTtl {
        /// The attribute holding each item's expiry.
        attribute: String,
    },
    /// DescribeTimeToLive; answered with the expiry attribute, if any.
    TtlAttribute,
    /// UpdateTable turning the stream on (new and old images).
    EnableStream,
    /// DescribeStream of the table's latest stream: every shard (every page); answered with
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) when the table has no stream.
    StreamShards,
    /// One page of one shard's records (GetShardIterator when `position` is not a
    /// continuation, then GetRecords).
    StreamRecords {
        /// The shard's id.
        shard: String,
        /// Where to read from.
        position: super::StreamPosition,
        /// At most this many records (1 to 1,000).
        limit: u32,
    },
}

impl Request {
    /// The DynamoDB operation this request is.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Op, Request};
    ///
    /// assert_eq!(Request::DescribeTable.op(), Op::DescribeTable);
    /// ```
    pub fn op(&self) -> Op {
        match self {
            Request::GetItem { .. } => Op::GetItem,
            Request::PutItem { .. } => Op::PutItem,
            Request::DeleteItem { .. } => Op::DeleteItem,
            Request::UpdateItem { .. } => Op::UpdateItem,
            Request::Query { .. } | Request::QueryIndex { .. } => Op::Query,
            Request::Scan { .. } => Op::Scan,
            Request::BatchGet { .. } => Op::BatchGetItem,
            Request::BatchWrite { .. } => Op::BatchWriteItem,
            Request::TransactGet { .. } => Op::TransactGetItems,
            Request::TransactWrite { .. } => Op::TransactWriteItems,
            Request::CreateTable { .. } => Op::CreateTable,
            Request::AddIndex { .. } | Request::EnableStream => Op::UpdateTable,
            Request::DescribeTable => Op::DescribeTable,
            Request::EnableTtl { .. } => Op::UpdateTimeToLive,
            Request::TtlAttribute => Op::DescribeTimeToLive,
            Request::StreamShards => Op::DescribeStream,
            Request::StreamRecords { .. } => Op::GetRecords,
        }
    }

    /// Whether the request only reads: resending it cannot change the table.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Condition, Key, Request};
    ///
    /// assert!(Request::DescribeTable.is_read());
    /// let delete = Request::DeleteItem { key: Key::new("a", "b"), condition: Condition::Always };
    /// assert!(!delete.is_read());
    /// ```
    pub fn is_read(&self) -> bool {
        match self {
            Request::GetItem { .. }
            | Request::Query { .. }
            | Request::QueryIndex { .. }
            | Request::Scan { .. }
            | Request::BatchGet { .. }
            | Request::TransactGet { .. }
            | Request::DescribeTable
            | Request::TtlAttribute
            | Request::StreamShards
            | Request::StreamRecords { .. } => true,
            Request::PutItem { .. }
            | Request::DeleteItem { .. }
            | Request::UpdateItem { .. }
            | Request::BatchWrite { .. }
            | Request::TransactWrite { .. }
            | Request::CreateTable { .. }
            | Request::AddIndex { .. }
            | Request::EnableTtl { .. }
            | Request::EnableStream => false,
        }
    }

    /// The keys of the items this request names, in its order: a Query names its
    /// partition (with an empty range key); a Scan, an index query and a table's request name
    /// none.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Condition, Key, Request};
    ///
    /// let r = Request::DeleteItem { key: Key::new("a", "b"), condition: Condition::Always };
    /// assert_eq!(r.keys(), [Key::new("a", "b")]);
    /// ```
    pub fn keys(&self) -> Vec<Key> {
        match self {
            Request::GetItem { key, .. }
            | Request::DeleteItem { key, .. }
            | Request::UpdateItem { key, .. } => vec![key.clone()],
            Request::PutItem { item, .. } => Key::from_item(item).into_iter().collect(),
            Request::Query { query, .. } => vec![Key::new(query.hash.clone(), "")],
            Request::BatchGet { keys, .. } | Request::TransactGet { keys } => keys.clone(),
            Request::BatchWrite { requests } => requests
                .iter()
                .filter_map(|r| match r {
                    WriteRequest::Put(item) => Key::from_item(item),
                    WriteRequest::Delete(k) => Some(k.clone()),
                })
                .collect(),
            Request::TransactWrite { actions, .. } => {
                actions.iter().filter_map(TransactAction::key).collect()
            }
            Request::Scan { .. }
            | Request::QueryIndex { .. }
            | Request::CreateTable { .. }
            | Request::AddIndex { .. }
            | Request::DescribeTable
            | Request::EnableTtl { .. }
            | Request::TtlAttribute
            | Request::EnableStream
            | Request::StreamShards
            | Request::StreamRecords { .. } => Vec::new(),
        }
    }

    /// Whether this request may change the table's items (a layer that schedules writes
    /// apart from reads asks this).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Request;
    ///
    /// assert!(!Request::DescribeTable.writes());
    /// assert!(Request::BatchWrite { requests: vec![] }.writes());
    /// ```
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Request::PutItem { .. }
                | Request::DeleteItem { .. }
                | Request::UpdateItem { .. }
                | Request::BatchWrite { .. }
                | Request::TransactWrite { .. }
        )
    }

    /// For a batch request, keeps its first `n` entries and returns the rest: what a layer
    /// that leaves part of a batch unprocessed sends on. Other requests are kept whole and
    /// return `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Key, Request, Response, Unprocessed};
    ///
    /// let mut r = Request::BatchGet {
    ///     keys: vec![Key::new("a", ""), Key::new("b", "")],
    ///     consistent: true,
    ///     projection: None,
    /// };
    /// let rest = r.split_batch(1).unwrap();
    /// assert_eq!(r.keys(), [Key::new("a", "")]);
    /// let answer = rest.add_to(Response::BatchGet(Default::default()));
    /// match answer {
    ///     Response::BatchGet(out) => assert_eq!(out.unprocessed, [Key::new("b", "")]),
    ///     _ => unreachable!(),
    /// }
    /// ```
    pub fn split_batch(&mut self, n: usize) -> Option<Unprocessed> {
        match self {
            Request::BatchGet { keys, .. } => {
                Some(Unprocessed::Keys(keys.split_off(n.min(keys.len()))))
            }
            Request::BatchWrite { requests } => Some(Unprocessed::Writes(
                requests.split_off(n.min(requests.len())),
            )),
            _ => None,
        }
    }

    /// The number of entries of a batch request (`None` for the other kinds).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Request;
    ///
    /// assert_eq!(Request::BatchWrite { requests: vec![] }.batch_len(), Some(0));
    /// assert_eq!(Request::EnableStream.batch_len(), None);
    /// ```
    pub fn batch_len(&self) -> Option<usize> {
        match self {
            Request::BatchGet { keys, .. } => Some(keys.len()),
            Request::BatchWrite { requests } => Some(requests.len()),
            _ => None,
        }
    }
}

/// The part of a batch a layer holds back ([`Request::split_batch`]), to add to the answer as
/// unprocessed.
#[derive(Debug, Clone, PartialEq)]
pub enum Unprocessed {
    /// Keys of a BatchGetItem.
    Keys(Vec<Key>),
    /// Requests of a BatchWriteItem.
    Writes(Vec<WriteRequest>),
}

impl Unprocessed {
    /// Whether nothing was held back.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(dynatree::storage::Unprocessed::Keys(vec![]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        match self {
            Unprocessed::Keys(k) => k.is_empty(),
            Unprocessed::Writes(w) => w.is_empty(),
        }
    }

    /// The answer of the batch sent on, with these entries added to its unprocessed ones;
    /// any other answer is returned as it is.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Response, Unprocessed};
    ///
    /// let r = Unprocessed::Writes(vec![]).add_to(Response::Unprocessed(vec![]));
    /// assert_eq!(r, Response::Unprocessed(vec![]));
    /// ```
    pub fn add_to(self, response: Response) -> Response {
        match (self, response) {
            (Unprocessed::Keys(keys), Response::BatchGet(mut out)) => {
                out.unprocessed.extend(keys);
                Response::BatchGet(out)
            }
            (Unprocessed::Writes(rest), Response::Unprocessed(mut left)) => {
                left.extend(rest);
                Response::Unprocessed(left)
            }
            (_, other) => other,
        }
    }

    /// The answer a batch that processed none of its entries gets.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Key, Response, Unprocessed};
    ///
    /// let r = Unprocessed::Keys(vec![Key::new("a", "")]).into_response();
    /// assert!(matches!(r, Response::BatchGet(out) if out.unprocessed.len() == 1));
    /// ```
    pub fn into_response(self) -> Response {
        match self {
            Unprocessed::Keys(keys) => Response::BatchGet(BatchGetOutput {
                unprocessed: keys,
                ..BatchGetOutput::default()
            }),
            Unprocessed::Writes(rest) => Response::Unprocessed(rest),
        }
    }
}

/// The answer to a [`Request`], by kind.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Response;
///
/// assert_eq!(Response::Done, Response::Done);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Response {
    /// A write that returns nothing was applied (PutItem, DeleteItem, TransactWriteItems,
    /// UpdateTable, UpdateTimeToLive).
    Done,
    /// GetItem: the item, if there is one.
    Item(Option<Item>),
    /// UpdateItem: the item after the update.
    Updated(Item),
    /// A page of a Query or a Scan.
    Page(Page),
    /// A page of a Query of an index.
    IndexPage(IndexPage),
    /// BatchGetItem.
    BatchGet(BatchGetOutput),
    /// BatchWriteItem: the requests left unprocessed.
    Unprocessed(Vec<WriteRequest>),
    /// TransactGetItems: each key's item, in order.
    Items(Vec<Option<Item>>),
    /// CreateTable: whether the table was created (`false`: it was there).
    Created(bool),
    /// DescribeTable.
    Table(Option<TableDescription>),
    /// DescribeTimeToLive.
    TtlAttribute(Option<String>),
    /// DescribeStream: the stream's shards.
    Shards(Vec<super::StreamShard>),
    /// GetRecords: one page of a shard's records.
    Records(super::StreamPage),
}

impl Response {
    fn kind(&self) -> &'static str {
        match self {
            Response::Done => "done",
            Response::Item(_) => "an item",
            Response::Updated(_) => "an updated item",
            Response::Page(_) => "a page",
            Response::IndexPage(_) => "an index page",
            Response::BatchGet(_) => "a batch of items",
            Response::Unprocessed(_) => "unprocessed writes",
            Response::Items(_) => "items",
            Response::Created(_) => "a created table",
            Response::Table(_) => "a table description",
            Response::TtlAttribute(_) => "an expiry attribute",
            Response::Shards(_) => "stream shards",
            Response::Records(_) => "stream records",
        }
    }
}

/// A backend or layer answered `op` with the wrong kind of response: its defect, reported as a
/// typed error rather than a panic.
fn mismatch(op: Op, got: &Response) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!("a {op} answered with {}", got.kind()),
    )
}

/// The answer to a request of `op`, unpacked as its kind (each typed method of `Storage`
/// names the operation it sent, so a wrong answer names it too).
macro_rules! unpack {
    ($($fn:ident: $pat:pat => $out:expr => $ty:ty;)*) => {
        impl Response {
            $(
                pub(crate) fn $fn(self, op: Op) -> Result<$ty> {
                    match self {
                        $pat => Ok($out),
                        other => Err(mismatch(op, &other)),
                    }
                }
            )*
        }
    };
}

unpack! {
    into_item: Response::Item(i) => i => Option<Item>;
    into_done: Response::Done => () => ();
    into_updated: Response::Updated(i) => i => Item;
    into_page: Response::Page(p) => p => Page;
    into_index_page: Response::IndexPage(p) => p => IndexPage;
    into_batch_get: Response::BatchGet(o) => o => BatchGetOutput;
    into_unprocessed: Response::Unprocessed(u) => u => Vec<WriteRequest>;
    into_items: Response::Items(i) => i => Vec<Option<Item>>;
    into_created: Response::Created(c) => c => bool;
    into_table: Response::Table(t) => t => Option<TableDescription>;
    into_ttl_attribute: Response::TtlAttribute(a) => a => Option<String>;
    into_shards: Response::Shards(s) => s => Vec<super::StreamShard>;
    into_records: Response::Records(p) => p => super::StreamPage;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_of_the_wrong_kind_is_a_backend_error() {
        let e = Response::Done.into_item(Op::GetItem).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Backend);
        assert_eq!(
            e.to_string(),
            "storage backend error: a GetItem answered with done"
        );
        assert_eq!(Response::Item(None).into_item(Op::GetItem).unwrap(), None);
    }

    #[test]
    fn a_split_batch_adds_what_it_held_back_to_the_answer() {
        let w = |h: &str| WriteRequest::Delete(Key::new(h, ""));
        let mut r = Request::BatchWrite {
            requests: vec![w("a"), w("b"), w("c")],
        };
        let rest = r.split_batch(1).unwrap();
        assert_eq!(r.batch_len(), Some(1));
        let answer = rest.add_to(Response::Unprocessed(vec![w("a")]));
        assert_eq!(answer, Response::Unprocessed(vec![w("a"), w("b"), w("c")]));
        assert!(Request::DescribeTable.split_batch(0).is_none());
    }

    #[test]
    fn every_request_names_its_operation_and_keys() {
        let q = Request::Query {
            query: Query::new("p"),
            start: None,
        };
        assert_eq!((q.op(), q.keys()), (Op::Query, vec![Key::new("p", "")]));
        assert_eq!(Request::EnableStream.op(), Op::UpdateTable);
        assert!(Request::TtlAttribute.keys().is_empty());
    }
}
