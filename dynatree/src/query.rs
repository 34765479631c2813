//! The typed query builders: a parent's children of one type, and the secondary indexes.

use crate::tree::{Tree, read};
use std::fmt;
use std::marker::PhantomData;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;

use crate::cursor::{Cursor, TypedPage, another_query, cursor_outside, fingerprint, one_range};
use crate::error::{Error, ErrorKind, Result};
use crate::hierarchical::{Hierarchical, IndexKey};
use crate::item::{Item, Value};
use crate::layout::{HASH_KEY, RANGE_KEY};
use crate::path::Path;
use crate::segment::{AsKeySegment, KeySegment};
use crate::storage::{IndexQuery, Key, Query, RangeCondition, SharedStorage, Storage};
use crate::stream::index_pages;

/// The settings every query builder shares.
#[derive(Debug)]
pub(crate) struct Shape {
    range: Result<Option<RangeCondition>>,
    forward: bool,
    limit: Option<usize>,
    page_size: Option<u32>,
    start_after: Option<Cursor>,
    consistent: Option<bool>,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            range: Ok(None),
            forward: true,
            limit: None,
            page_size: None,
            start_after: None,
            consistent: None,
        }
    }
}

impl Shape {
    fn with(&mut self, range: RangeCondition) {
        let current = std::mem::replace(&mut self.range, Ok(None));
        self.range = one_range(current, range);
    }

    /// The checked range condition.
    fn range(&mut self) -> Result<Option<RangeCondition>> {
        let range = std::mem::replace(&mut self.range, Ok(None))?;
        if let Some(r) = &range {
            r.check()?;
        }
        Ok(range)
    }

    /// DynamoDB's `Limit` for each request: the page size, capped by the total limit.
    fn request_limit(&self) -> Option<u32> {
        let cap = self
            .limit
            .map(|l| u32::try_from(l.max(1)).unwrap_or(u32::MAX));
        match (self.page_size, cap) {
            (Some(p), Some(c)) => Some(p.min(c)),
            (p, c) => p.or(c),
        }
    }
}

/// The setup of the examples of the methods both query builders share (doc text): five orders
/// of one shop, by one customer, and `days`, which collects the days of a stream of orders.
macro_rules! query_doc_setup {
    () => {
        r#"# use dynatree::{Hierarchical, Tree};
# use dynatree_testing::FakeTable;
# use futures::TryStreamExt;
# use serde::{Deserialize, Serialize};
use futures::stream::BoxStream;

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Shops/{shop}/Orders/{day}", index(name = "by_customer", hash = customer, range = day))]
struct Order { shop: String, day: String, customer: String }

/// The days of a stream of orders.
async fn days(orders: BoxStream<'static, dynatree::Result<Order>>) -> dynatree::Result<Vec<String>> {
    orders.map_ok(|o| o.day).try_collect().await
}

# #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
# let tree = Tree::builder(FakeTable::new()).indexes_of::<Order>().build()?;
# tree.create_table().await?;
let orders = tree.repo::<Order>();
for day in ["01-30", "02-01", "02-02", "02-03", "03-01"] {
    orders.put(&Order { shop: "s".into(), day: day.into(), customer: "c".into() }).await?;
}
// The orders of shop "s", by the last key; those of customer "c", by the index's range key;
// the children of `/Shops/s/Orders` decoded as entities, by name.
let shop = || orders.query(&OrderCollection { shop: "s".into() });
let customer = || orders.index(Order::index_by_customer("c"));
let children = || tree.entities::<Order>().query(["Shops", "s", "Orders"]);
"#
    };
}

/// `pages_as` and `items_as` (projections) of a query builder with a `pages_read`;
/// `$pages_example` and `$items_example`: the code of their doc examples.
macro_rules! projection_vocabulary {
    ($pages_example:literal, $items_example:literal) => {
        /// The values read as `P`, page by page: only the attributes of `P`'s fields are
        /// requested from DynamoDB (see [`Read::project`](crate::Read::project); a read is
        /// billed by the whole item either way).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = $pages_example]
        /// ```
        ///
        /// # Errors
        ///
        /// As `pages`, with values that do not fit `P`.
        ///
        /// # Cancel safety
        ///
        /// Cancel safe.
        pub fn pages_as<P: DeserializeOwned + Send + 'static>(
            self,
        ) -> BoxStream<'static, Result<TypedPage<P>>> {
            self.pages_read(Some(crate::item::struct_fields::<P>()))
        }

        /// The values read as `P`, lazily (see `pages_as`).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = $items_example]
        /// ```
        ///
        /// # Errors
        ///
        /// As `pages_as`.
        ///
        /// # Cancel safety
        ///
        /// Cancel safe.
        pub fn items_as<P: DeserializeOwned + Send + 'static>(
            self,
        ) -> BoxStream<'static, Result<P>> {
            flatten(self.pages_as())
        }
    };
}

/// The builder methods every query shares (order, limits, resumption).
macro_rules! shared_vocabulary {
    () => {
        /// Descending order (default ascending).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// assert_eq!(days(shop().descending().items()).await?, ["03-01", "02-03", "02-02", "02-01", "01-30"]);
        /// assert_eq!(days(customer().descending().items()).await?, ["03-01", "02-03", "02-02", "02-01", "01-30"]);
        /// assert_eq!(days(children().descending().items()).await?, ["03-01", "02-03", "02-02", "02-01", "01-30"]);
        /// # Ok(()) }
        /// ```
        pub fn descending(mut self) -> Self {
            self.shape.forward = false;
            self
        }

        /// At most `n` values in all.
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// assert_eq!(days(shop().limit(2).items()).await?, ["01-30", "02-01"]);
        /// assert_eq!(days(customer().descending().limit(2).items()).await?, ["03-01", "02-03"]);
        /// assert_eq!(days(children().descending().limit(2).items()).await?, ["03-01", "02-03"]);
        /// # Ok(()) }
        /// ```
        pub fn limit(mut self, n: usize) -> Self {
            self.shape.limit = Some(n);
            self
        }

        /// At most `n` rows per DynamoDB request (its `Limit`; default: 1 MB pages).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let pages: Vec<_> = shop().page_size(2).pages().try_collect().await?;
        /// assert_eq!(pages.iter().map(|p| p.items.len()).collect::<Vec<_>>(), [2, 2, 1]);
        /// let pages: Vec<_> = customer().page_size(2).pages().try_collect().await?;
        /// assert_eq!(pages.iter().map(|p| p.items.len()).collect::<Vec<_>>(), [2, 2, 1]);
        /// let pages: Vec<_> = children().page_size(2).pages().try_collect().await?;
        /// assert_eq!(pages.iter().map(|p| p.items.len()).collect::<Vec<_>>(), [2, 2, 1]);
        /// # Ok(()) }
        /// ```
        pub fn page_size(mut self, n: u32) -> Self {
            self.shape.page_size = Some(n.max(1));
            self
        }

        /// Continues after the page that returned `cursor` (see [`Cursor`]). A cursor this
        /// query cannot have returned (another query's, or a position that is empty, over
        /// DynamoDB's key limits or outside the query's range condition) makes the stream
        /// yield [`ErrorKind::InvalidArgument`], with nothing sent.
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let first = shop().page_size(2).pages().try_next().await?.expect("a page");
        /// let rest = days(shop().start_after(first.cursor.expect("more follow")).items()).await?;
        /// assert_eq!(rest, ["02-02", "02-03", "03-01"]);
        /// let first = customer().page_size(2).pages().try_next().await?.expect("a page");
        /// let rest = days(customer().start_after(first.cursor.expect("more follow")).items()).await?;
        /// assert_eq!(rest, ["02-02", "02-03", "03-01"]);
        /// let first = children().page_size(2).pages().try_next().await?.expect("a page");
        /// let rest = days(children().start_after(first.cursor.expect("more follow")).items()).await?;
        /// assert_eq!(rest, ["02-02", "02-03", "03-01"]);
        /// # Ok(()) }
        /// ```
        pub fn start_after(mut self, cursor: Cursor) -> Self {
            self.shape.start_after = Some(cursor);
            self
        }
    };
}

/// The range methods, on values of type `$v`.
macro_rules! range_vocabulary {
    ($v:ty, $enc:path, $what:literal) => {
        #[doc = concat!($what, " equal to `v`.")]
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let day = "02-02".to_owned();
        /// assert_eq!(days(shop().eq(&day).items()).await?, ["02-02"]);
        /// assert_eq!(days(customer().eq(&day).items()).await?, ["02-02"]);
        /// assert_eq!(days(children().eq(&day).items()).await?, ["02-02"]);
        /// # Ok(()) }
        /// ```
        pub fn eq(mut self, v: &$v) -> Self {
            self.shape.with(RangeCondition::Eq($enc(v)));
            self
        }

        #[doc = concat!($what, " below `v`.")]
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let day = "02-02".to_owned();
        /// assert_eq!(days(shop().lt(&day).items()).await?, ["01-30", "02-01"]);
        /// assert_eq!(days(customer().lt(&day).items()).await?, ["01-30", "02-01"]);
        /// assert_eq!(days(children().lt(&day).items()).await?, ["01-30", "02-01"]);
        /// # Ok(()) }
        /// ```
        pub fn lt(mut self, v: &$v) -> Self {
            self.shape.with(RangeCondition::Lt($enc(v)));
            self
        }

        #[doc = concat!($what, " at most `v`.")]
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let day = "02-02".to_owned();
        /// assert_eq!(days(shop().le(&day).items()).await?, ["01-30", "02-01", "02-02"]);
        /// assert_eq!(days(customer().le(&day).items()).await?, ["01-30", "02-01", "02-02"]);
        /// assert_eq!(days(children().le(&day).items()).await?, ["01-30", "02-01", "02-02"]);
        /// # Ok(()) }
        /// ```
        pub fn le(mut self, v: &$v) -> Self {
            self.shape.with(RangeCondition::Le($enc(v)));
            self
        }

        #[doc = concat!($what, " above `v`.")]
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let day = "02-02".to_owned();
        /// assert_eq!(days(shop().gt(&day).items()).await?, ["02-03", "03-01"]);
        /// assert_eq!(days(customer().gt(&day).items()).await?, ["02-03", "03-01"]);
        /// assert_eq!(days(children().gt(&day).items()).await?, ["02-03", "03-01"]);
        /// # Ok(()) }
        /// ```
        pub fn gt(mut self, v: &$v) -> Self {
            self.shape.with(RangeCondition::Gt($enc(v)));
            self
        }

        #[doc = concat!($what, " at least `v`.")]
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let day = "02-02".to_owned();
        /// assert_eq!(days(shop().ge(&day).items()).await?, ["02-02", "02-03", "03-01"]);
        /// assert_eq!(days(customer().ge(&day).items()).await?, ["02-02", "02-03", "03-01"]);
        /// assert_eq!(days(children().ge(&day).items()).await?, ["02-02", "02-03", "03-01"]);
        /// # Ok(()) }
        /// ```
        pub fn ge(mut self, v: &$v) -> Self {
            self.shape.with(RangeCondition::Ge($enc(v)));
            self
        }

        #[doc = concat!($what, " from `low` to `high`, both included.")]
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let (low, high) = ("02-01".to_owned(), "02-03".to_owned());
        /// assert_eq!(days(shop().between(&low, &high).items()).await?, ["02-01", "02-02", "02-03"]);
        /// assert_eq!(days(customer().between(&low, &high).items()).await?, ["02-01", "02-02", "02-03"]);
        /// assert_eq!(days(children().between(&low, &high).items()).await?, ["02-01", "02-02", "02-03"]);
        /// # Ok(()) }
        /// ```
        pub fn between(mut self, low: &$v, high: &$v) -> Self {
            self.shape
                .with(RangeCondition::Between($enc(low), $enc(high)));
            self
        }

        #[doc = concat!($what, " whose stored form starts with `prefix`'s: for strings, a string")]
        /// prefix. Numbers are stored zero-padded to a fixed width and dates in ISO order, so
        /// on them this selects by leading digits, rarely what you want: use `between`.
        ///
        /// # Examples
        ///
        /// ```
        #[doc = query_doc_setup!()]
        /// let february = "02-".to_owned();
        /// assert_eq!(days(shop().begins_with(&february).items()).await?, ["02-01", "02-02", "02-03"]);
        /// assert_eq!(days(customer().begins_with(&february).items()).await?, ["02-01", "02-02", "02-03"]);
        /// assert_eq!(days(children().begins_with(&february).items()).await?, ["02-01", "02-02", "02-03"]);
        /// # Ok(()) }
        /// ```
        pub fn begins_with(mut self, prefix: &$v) -> Self {
            self.shape.with(RangeCondition::BeginsWith($enc(prefix)));
            self
        }
    };
}

/// A typed query on a collection, built by [`Repository::query`]: range conditions on the last
/// placeholder, order, limits, pages and cursors. It compiles to one DynamoDB Query on the
/// collection's listing rows per page, plus one BatchGetItem for the objects of each page.
///
/// # Examples
///
/// ```
/// use dynatree::{Hierarchical, Tree};
/// use dynatree_testing::FakeTable;
/// use futures::TryStreamExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
/// struct Reading { sensor: String, at: u64, value: f64 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let readings = tree.repo::<Reading>();
/// for at in [5, 10, 20, 40] {
///     readings.put(&Reading { sensor: "s1".into(), at, value: 1.0 }).await?;
/// }
/// let s1 = ReadingCollection { sensor: "s1".into() };
/// let recent: Vec<Reading> = readings.query(&s1).ge(&10).descending().limit(2).items().try_collect().await?;
/// assert_eq!(recent.iter().map(|r| r.at).collect::<Vec<_>>(), [40, 20]);
/// # Ok(()) }
/// ```
///
/// [`Repository::query`]: crate::Repository::query
#[must_use = "a query does nothing until `items()` or `pages()` is polled"]
pub struct TypedQuery<T: Hierarchical, S = SharedStorage> {
    pub(crate) tree: Tree<S>,
    pub(crate) collection: T::Collection,
    pub(crate) shape: Shape,
}

impl<T: Hierarchical, S: fmt::Debug> fmt::Debug for TypedQuery<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedQuery")
            .field("type", &std::any::type_name::<T>())
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl<T: Hierarchical, S: Storage + 'static> TypedQuery<T, S>
where
    T::Last: KeySegment,
{
    range_vocabulary!(
        (impl AsKeySegment<T::Last> + ?Sized),
        AsKeySegment::encode_segment,
        "Last component"
    );
}

impl<T: Hierarchical, S: Storage + 'static> TypedQuery<T, S> {
    shared_vocabulary!();

    /// Strongly consistent reads (default: the tree's setting).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
    /// struct Reading { sensor: String, at: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// // A fake whose eventually consistent reads lag one write behind.
    /// let tree = Tree::new(FakeTable::eventually_consistent(1));
    /// # tree.create_table().await?;
    /// let readings = tree.repo::<Reading>();
    /// readings.put(&Reading { sensor: "s1".into(), at: 1 }).await?;
    /// let s1 = ReadingCollection { sensor: "s1".into() };
    /// let stale: Vec<Reading> = readings.query(&s1).consistent(false).items().try_collect().await?;
    /// assert!(stale.is_empty()); // not replicated yet
    /// let fresh: Vec<Reading> = readings.query(&s1).consistent(true).items().try_collect().await?;
    /// assert_eq!(fresh.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn consistent(mut self, yes: bool) -> Self {
        self.shape.consistent = Some(yes);
        self
    }

    /// The values, page by page, each with the cursor after it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
    /// struct Reading { sensor: String, at: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let readings = tree.repo::<Reading>();
    /// for at in 1..=5 {
    ///     readings.put(&Reading { sensor: "s1".into(), at }).await?;
    /// }
    /// let s1 = ReadingCollection { sensor: "s1".into() };
    /// let pages: Vec<_> = readings.query(&s1).page_size(2).pages().try_collect().await?;
    /// let ats: Vec<Vec<u64>> = pages.iter().map(|p| p.items.iter().map(|r| r.at).collect()).collect();
    /// assert_eq!(ats, [vec![1, 2], vec![3, 4], vec![5]]);
    /// assert!(pages[0].cursor.is_some() && pages[2].cursor.is_none());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The stream yields one error and ends, with nothing sent, on two range conditions or one
    /// DynamoDB would refuse ([`ErrorKind::InvalidArgument`], [`ErrorKind::InvalidPath`]), a
    /// cursor this query cannot have returned (see [`Cursor`]; [`ErrorKind::InvalidArgument`]),
    /// a type checked against another reserved character ([`ErrorKind::InvalidReserved`]);
    /// later, on backend errors and values that do not fit `T`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn pages(self) -> BoxStream<'static, Result<TypedPage<T>>> {
        self.pages_read(None)
    }

    projection_vocabulary!(
        r#"use dynatree::{Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Docs/{id}")]
struct Doc { id: String, title: String, body: String }

#[derive(Deserialize, Debug, PartialEq)]
struct Title { title: String }

# #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
let tree = Tree::new(FakeTable::new());
tree.create_table().await?;
let docs = tree.repo::<Doc>();
for id in ["a", "b", "c"] {
    docs.put(&Doc { id: id.into(), title: id.to_uppercase(), body: "…".into() }).await?;
}
let pages: Vec<_> = docs.query(&DocCollection {}).page_size(2).pages_as::<Title>().try_collect().await?;
assert_eq!(pages[0].items, [Title { title: "A".into() }, Title { title: "B".into() }]);
assert_eq!(pages[1].items, [Title { title: "C".into() }]);
# Ok(()) }
"#,
        r#"use dynatree::{Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Docs/{id}")]
struct Doc { id: String, title: String, body: String }

#[derive(Deserialize, Debug, PartialEq)]
struct Title { title: String }

# #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
let tree = Tree::new(FakeTable::new());
tree.create_table().await?;
let docs = tree.repo::<Doc>();
docs.put(&Doc { id: "a".into(), title: "A".into(), body: "…".into() }).await?;
let titles: Vec<Title> = docs.query(&DocCollection {}).items_as::<Title>().try_collect().await?;
assert_eq!(titles, [Title { title: "A".into() }]);
# Ok(()) }
"#
    );

    /// `projection`: `None` for `T` itself (every attribute); `Some(fields)` for another type
    /// (`Some(None)`: one that is not a struct, every attribute).
    fn pages_read<P: DeserializeOwned + Send + 'static>(
        mut self,
        projection: Option<Option<&'static [&'static str]>>,
    ) -> BoxStream<'static, Result<TypedPage<P>>> {
        let tree = self.tree.clone();
        let read = read::read_opts(&tree.cx, self.shape.consistent, projection.flatten());
        let prefix = if T::RESERVED != tree.reserved() {
            Err(Error::new(
                ErrorKind::InvalidReserved,
                "the type was checked against another reserved character than the tree's",
            ))
        } else {
            T::collection_path(&self.collection)
        };
        children_pages(tree, prefix, &mut self.shape, read, |cx, _, item| {
            cx.to_value(item).map(Some)
        })
    }

    /// The values, lazily.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
    /// struct Reading { sensor: String, at: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let readings = tree.repo::<Reading>();
    /// for at in 1..=5 {
    ///     readings.put(&Reading { sensor: "s1".into(), at }).await?;
    /// }
    /// let s1 = ReadingCollection { sensor: "s1".into() };
    /// let all: Vec<Reading> = readings.query(&s1).items().try_collect().await?;
    /// assert_eq!(all.iter().map(|r| r.at).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`pages`](TypedQuery::pages).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> BoxStream<'static, Result<T>> {
        flatten(self.pages())
    }
}

fn flatten<T: Send + 'static>(
    pages: BoxStream<'static, Result<TypedPage<T>>>,
) -> BoxStream<'static, Result<T>> {
    Box::pin(
        pages
            .map_ok(|p| futures::stream::iter(p.items.into_iter().map(Ok)))
            .try_flatten(),
    )
}

/// How the object row of a child becomes a value: from the tree's context, the child's
/// absolute path and its row (`None`: the child is skipped).
pub(crate) type Decode<S, T> = fn(&crate::tree::Ctx<S>, &Path, Item) -> Result<Option<T>>;

/// The children of the collection at `prefix` (relative to `tree`'s scope), page by page as
/// `shape` says, each page one Query (per shard) and one BatchGetItem of its objects, decoded
/// by `decode`; the cursors of a collection query.
pub(crate) fn children_pages<T: Send + 'static, S: Storage + 'static>(
    tree: Tree<S>,
    prefix: Result<Path>,
    shape: &mut Shape,
    read: crate::tree::ReadOpts,
    decode: Decode<S, T>,
) -> BoxStream<'static, Result<TypedPage<T>>> {
    let setup = (|| {
        let range = shape.range()?;
        let prefix = tree.enter(prefix?)?;
        let mut query = tree.cx.listing_query_for(&prefix)?;
        query.range = range;
        query.forward = shape.forward;
        if let Some(c) = shape.consistent {
            query.consistent = c;
        }
        query.limit = shape.request_limit();
        let fp = fingerprint(
            "collection",
            &[&query.hash],
            query.range.as_ref(),
            query.forward,
        );
        let start = match shape.start_after.take() {
            None => None,
            Some(c) => match c.parts_for(fp)? {
                [range] => {
                    check_position(range, query.range.as_ref(), tree.reserved())?;
                    let start = Key::new(query.hash.clone(), range.clone());
                    // A cursor at the condition's far bound (the last page ended on it)
                    // has nothing after it.
                    if !query.accepts_start(&start) {
                        return Ok(None);
                    }
                    Some(start)
                }
                _ => return Err(another_query()),
            },
        };
        Ok(Some((prefix, query, start, fp)))
    })();
    let limit = shape.limit;
    Box::pin(match setup {
        Ok(Some((prefix, query, start, fp))) => {
            typed_pages(tree, prefix, query, start, limit, fp, read, decode).left_stream()
        }
        // Ok(None): the cursor is at the end; send nothing.
        other => futures::stream::iter(other.err().map(Err)).right_stream(),
    })
}

#[allow(clippy::too_many_arguments)]
fn typed_pages<T: Send + 'static, S: Storage + 'static>(
    tree: Tree<S>,
    prefix: Path,
    query: Query,
    start: Option<Key>,
    limit: Option<usize>,
    fp: u64,
    read: crate::tree::ReadOpts,
    decode: Decode<S, T>,
) -> impl Stream<Item = Result<TypedPage<T>>> + Send + 'static {
    let pages = tree
        .cx
        .listing_pages(&prefix, query, start.map(|k| k.range));
    futures::stream::try_unfold(
        (pages, limit.unwrap_or(usize::MAX)),
        move |(mut pages, left)| {
            let prefix = prefix.clone();
            let tree = tree.clone();
            let read = read.clone();
            async move {
                if left == 0 {
                    return Ok(None);
                }
                let Some(page) = pages.try_next().await? else {
                    return Ok(None);
                };
                let last = page
                    .last_key
                    .as_ref()
                    .map(|k| Cursor::new(fp, vec![k.range.clone()]));
                let children =
                    read::objects_of_children(&tree.cx, &prefix, page.items, &read).await?;
                let mut items = Vec::with_capacity(children.len());
                for (path, row) in children {
                    if let Some(value) = row.map(|r| decode(&tree.cx, &path, r)).transpose()? {
                        items.extend(value);
                    }
                }
                items.truncate(left);
                let left = left - items.len();
                let cursor = if left == 0 { None } else { last };
                Ok(Some((TypedPage { items, cursor }, (pages, left))))
            }
        },
    )
}

/// A query on a secondary index, built by [`Repository::index`]; see its example. Range
/// methods apply to the index's range field; index reads are eventually consistent (DynamoDB
/// has no other kind on a global secondary index).
///
/// [`Repository::index`]: crate::Repository::index
#[must_use = "a query does nothing until `items()` or `pages()` is polled"]
pub struct IndexQueryBuilder<T, S = SharedStorage> {
    pub(crate) tree: Tree<S>,
    pub(crate) key: IndexKey,
    pub(crate) shape: Shape,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T, S: fmt::Debug> fmt::Debug for IndexQueryBuilder<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexQueryBuilder")
            .field("type", &std::any::type_name::<T>())
            .field("key", &self.key)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl<T: Hierarchical, S: Storage + 'static> IndexQueryBuilder<T, S> {
    range_vocabulary!(impl KeySegment, KeySegment::encode, "Index range key");
    shared_vocabulary!();

    /// The values, page by page, each with the cursor after it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Users/{id}", index(name = "by_team", hash = team))]
    /// struct User { id: String, team: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).indexes_of::<User>().build()?;
    /// # tree.create_table().await?;
    /// let users = tree.repo::<User>();
    /// for id in ["u1", "u2", "u3"] {
    ///     users.put(&User { id: id.into(), team: "t".into() }).await?;
    /// }
    /// let pages: Vec<_> = users.index(User::index_by_team("t")).page_size(2).pages().try_collect().await?;
    /// assert_eq!(pages.iter().map(|p| p.items.len()).collect::<Vec<_>>(), [2, 1]);
    /// assert!(pages[0].cursor.is_some());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`TypedQuery::pages`]; [`ErrorKind::InvalidArgument`] if `T` declares no such index;
    /// [`ErrorKind::InvalidValue`] if the hash value or a range condition's value contains the
    /// reserved character (no stored index value does: writes refuse it).
    ///
    /// Through a [scope](Tree::scope), only items under the scope's root come out, whatever
    /// the table holds.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn pages(self) -> BoxStream<'static, Result<TypedPage<T>>> {
        self.pages_read(None)
    }

    projection_vocabulary!(
        r#"use dynatree::{Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Users/{id}", index(name = "by_team", hash = team))]
struct User { id: String, team: String, bio: String }

#[derive(Deserialize, Debug, PartialEq)]
struct Id { id: String }

# #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
let tree = Tree::builder(FakeTable::new()).indexes_of::<User>().build()?;
tree.create_table().await?;
let users = tree.repo::<User>();
for id in ["u1", "u2", "u3"] {
    users.put(&User { id: id.into(), team: "t".into(), bio: "…".into() }).await?;
}
let pages: Vec<_> = users.index(User::index_by_team("t")).page_size(2).pages_as::<Id>().try_collect().await?;
let sizes: Vec<usize> = pages.iter().map(|p| p.items.len()).collect();
assert_eq!(sizes, [2, 1]);
# Ok(()) }
"#,
        r#"use dynatree::{Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User { id: String, email: String, bio: String }

#[derive(Deserialize, Debug, PartialEq)]
struct Id { id: String }

# #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
let tree = Tree::builder(FakeTable::new()).indexes_of::<User>().build()?;
tree.create_table().await?;
let users = tree.repo::<User>();
users.put(&User { id: "u1".into(), email: "a@example.com".into(), bio: "…".into() }).await?;
let ids: Vec<Id> = users.index(User::index_by_email("a@example.com")).items_as().try_collect().await?;
assert_eq!(ids, [Id { id: "u1".into() }]);
# Ok(()) }
"#
    );

    fn pages_read<P: DeserializeOwned + Send + 'static>(
        mut self,
        projection: Option<Option<&'static [&'static str]>>,
    ) -> BoxStream<'static, Result<TypedPage<P>>> {
        let tree = self.tree.clone();
        // The table's and the index's keys are always read: the page's cursor is built from
        // the last item.
        let mut projection: Vec<String> =
            read::read_opts(&tree.cx, None, projection.flatten()).projection;
        let setup = (|| {
            let range = self.shape.range()?;
            let sc = tree.reserved();
            let def = T::INDEXES
                .iter()
                .find(|d| d.name() == self.key.index())
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "`{}` declares no index `{}`",
                            std::any::type_name::<T>(),
                            self.key.index()
                        ),
                    )
                })?;
            // No stored index key value has the reserved character (see
            // `index::refuse_reserved_in_index_value`): a query for one is refused the same way.
            crate::index::refuse_reserved_in_index_value(self.key.hash(), sc, def.name())?;
            for v in range.iter().flat_map(condition_values) {
                crate::index::refuse_reserved_in_index_value(v, sc, def.name())?;
            }
            let query = IndexQuery {
                index: def.spec(sc),
                // A scope's root is part of the hash: see `Layout::index_hash`.
                hash: tree.cx.index_hash(T::TEMPLATE, self.key.hash()),
                range,
                forward: self.shape.forward,
                limit: self.shape.request_limit(),
                projection: None,
            };
            let mut query = query;
            if !projection.is_empty() {
                projection.push(query.index.hash_attr.clone());
                projection.extend(query.index.range_attr.clone());
                query.projection = Some(std::mem::take(&mut projection));
            }
            let fp = fingerprint(
                "index",
                &[&query.index.name, &query.hash],
                query.range.as_ref(),
                query.forward,
            );
            // `Some(None)`: from the start; `None`: the cursor is at the end, send nothing.
            let start = match self.shape.start_after.take() {
                None => Some(None),
                Some(c) => index_start(&tree, &query, c.parts_for(fp)?)?.map(Some),
            };
            Ok((query, start, fp))
        })();
        let limit = self.shape.limit.unwrap_or(usize::MAX);
        let stream = match setup {
            Ok((query, start, fp)) => {
                // `None`: the cursor is at the end, nothing is sent.
                let pages =
                    start.map(|start| Box::pin(index_pages(tree.cx.io(), query.clone(), start)));
                futures::stream::try_unfold((pages, limit), move |(pages, left)| {
                    let query = query.clone();
                    let tree = tree.clone();
                    async move {
                        let (Some(mut pages), true) = (pages, left > 0) else {
                            return Ok(None);
                        };
                        let Some(page) = pages.try_next().await? else {
                            return Ok(None);
                        };
                        let now = crate::expiry::now_secs();
                        // Through a scope, only rows under its root: the index hash keeps
                        // scopes apart, and this keeps them apart whatever the table holds.
                        let mut items = page
                            .items
                            .into_iter()
                            .filter(|i| {
                                !tree.cx.layout().is_absent(i, now) && tree.cx.row_in_scope(i)
                            })
                            .map(|i| tree.cx.to_value::<P>(i))
                            .collect::<Result<Vec<P>>>()?;
                        items.truncate(left);
                        let left = left - items.len();
                        // The stream follows `last` only where the query can start from it.
                        let next = page.last.filter(|last| query.accepts_start(last));
                        let cursor = match (&next, left) {
                            (Some(last), 1..) => Some(index_cursor(&query, last, fp)),
                            _ => None,
                        };
                        let pages = next.is_some().then_some(pages);
                        Ok(Some((TypedPage { items, cursor }, (pages, left))))
                    }
                })
                .left_stream()
            }
            Err(e) => futures::stream::once(async move { Err(e) }).right_stream(),
        };
        Box::pin(stream)
    }

    /// The values, lazily, one Query per page.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Users/{id}", index(name = "by_team", hash = team))]
    /// struct User { id: String, team: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).indexes_of::<User>().build()?;
    /// # tree.create_table().await?;
    /// let users = tree.repo::<User>();
    /// for id in ["u1", "u2", "u3"] {
    ///     users.put(&User { id: id.into(), team: "t".into() }).await?;
    /// }
    /// let team: Vec<User> = users.index(User::index_by_team("t")).items().try_collect().await?;
    /// assert_eq!(team.len(), 3);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`pages`](IndexQueryBuilder::pages).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> BoxStream<'static, Result<T>> {
        flatten(self.pages())
    }
}

/// The key attributes of an index query's last item, in a fixed order.
fn index_key_attrs(query: &IndexQuery) -> Vec<&str> {
    let mut attrs = vec![HASH_KEY, RANGE_KEY, query.index.hash_attr.as_str()];
    attrs.extend(query.index.range_attr.as_deref());
    attrs
}

fn index_cursor(query: &IndexQuery, last: &Item, fp: u64) -> Cursor {
    let parts = index_key_attrs(query)
        .into_iter()
        .map(|a| last.get_s(a).unwrap_or_default().to_owned())
        .collect();
    Cursor::new(fp, parts)
}

/// The start key of an index query from a cursor's `parts` (see [`index_cursor`]): an object
/// row of the tree (under the scope's root, if any) in the query's partition, at an index
/// range value the query could have returned. `None` for a cursor at the condition's far
/// bound: nothing follows it.
fn index_start<S>(tree: &Tree<S>, query: &IndexQuery, parts: &[String]) -> Result<Option<Item>> {
    let attrs = index_key_attrs(query);
    let (Some([key, child, hash]), range) = (parts.get(..3), parts.get(3)) else {
        return Err(another_query());
    };
    if attrs.len() != parts.len() || *hash != query.hash {
        return Err(another_query());
    }
    let layout = tree.cx.layout();
    let object = layout
        .decode_target(key)
        .ok()
        .filter(|path| tree.cx.in_scope(path) && path.len() > tree.cx.floor());
    if object.is_none() || child != layout.link_attr() {
        return Err(cursor_outside(
            "the cursor's position is not an object row of the query's tree",
        ));
    }
    if let Some(range) = range {
        check_position(range, query.range.as_ref(), layout.reserved())?;
        if query
            .range
            .as_ref()
            .is_some_and(|c| !c.accepts_start(range, query.forward))
        {
            return Ok(None);
        }
    }
    let mut item = Item::new();
    for (a, v) in attrs.into_iter().zip(parts) {
        item.insert(a, Value::S(v.clone()));
    }
    Ok(Some(item))
}

/// Checks the range key value `position` of a cursor: what a query with the range condition
/// `range` could have returned (not empty, within DynamoDB's sort key limit, without the
/// reserved character `sc`, which no listed name or index value has, and satisfying the
/// condition).
fn check_position(position: &str, range: Option<&RangeCondition>, sc: char) -> Result<()> {
    if position.is_empty() {
        return Err(cursor_outside("the cursor's position is empty"));
    }
    if position.len() > crate::storage::MAX_RANGE_KEY_BYTES {
        return Err(cursor_outside(format!(
            "the cursor's position is {} bytes, over DynamoDB's {}-byte sort key limit",
            position.len(),
            crate::storage::MAX_RANGE_KEY_BYTES
        )));
    }
    if position.contains(sc) {
        return Err(cursor_outside(format!(
            "the cursor's position contains the reserved character {sc:?}"
        )));
    }
    if range.is_some_and(|r| !r.matches(position)) {
        return Err(cursor_outside(
            "the cursor's position is outside the query's range condition",
        ));
    }
    Ok(())
}

/// The values a range condition compares with.
fn condition_values(range: &RangeCondition) -> Vec<&str> {
    match range {
        RangeCondition::Eq(v)
        | RangeCondition::Lt(v)
        | RangeCondition::Le(v)
        | RangeCondition::Gt(v)
        | RangeCondition::Ge(v)
        | RangeCondition::BeginsWith(v) => vec![v],
        RangeCondition::Between(a, b) => vec![a, b],
    }
}

/// A query of the children of one parent, each decoded as the [`Entity`](crate::Entity) `E`
/// (one [`Hierarchical`] type, or an enum of them), built by
/// [`Entities::query`](crate::entity::Entities::query). Range methods apply to the
/// children's names (the last component of their paths, as written); the request plan is
/// that of [`TypedQuery`]: per page, one Query of the parent's listing (one per shard of a
/// sharded directory) and one BatchGetItem of the objects.
///
/// # Examples
///
/// ```
/// use dynatree::{Entity, Hierarchical, Tree};
/// use dynatree_testing::FakeTable;
/// use futures::TryStreamExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Accounts/{account}/Links/{short}")]
/// struct Link { account: String, short: String }
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
/// #[dynatree(path = "Accounts/{account}/Profiles/{name}")]
/// struct Profile { account: String, name: String }
///
/// #[derive(Entity, Debug, PartialEq)]
/// enum AccountItem { Link(Link), Profile(Profile) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// for short in ["a", "b", "c"] {
///     tree.repo::<Link>().put(&Link { account: "1".into(), short: short.into() }).await?;
/// }
/// let items = tree.entities::<AccountItem>();
/// let after_a: Vec<AccountItem> = items.query(["Accounts", "1", "Links"]).gt("a").items().try_collect().await?;
/// assert_eq!(after_a.len(), 2);
/// # Ok(()) }
/// ```
#[must_use = "a query does nothing until `items()` or `pages()` is polled"]
pub struct EntityQuery<E, S = SharedStorage> {
    pub(crate) tree: Tree<S>,
    pub(crate) parent: Result<Path>,
    pub(crate) shape: Shape,
    pub(crate) _type: PhantomData<fn() -> E>,
}

impl<E, S: fmt::Debug> fmt::Debug for EntityQuery<E, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntityQuery")
            .field("type", &std::any::type_name::<E>())
            .field("parent", &self.parent)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

/// A child's name as a range condition compares it: as written.
fn name_of(name: &(impl AsRef<str> + ?Sized)) -> String {
    name.as_ref().to_owned()
}

impl<E: crate::Entity, S: Storage + 'static> EntityQuery<E, S> {
    range_vocabulary!((impl AsRef<str> + ?Sized), name_of, "Name");
    shared_vocabulary!();

    /// Strongly consistent reads (default: the tree's setting).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
    /// struct Reading { sensor: String, at: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// // A fake whose eventually consistent reads lag one write behind.
    /// let tree = Tree::new(FakeTable::eventually_consistent(1));
    /// # tree.create_table().await?;
    /// tree.repo::<Reading>().put(&Reading { sensor: "s1".into(), at: 1 }).await?;
    /// let readings = || tree.entities::<Reading>().query(["Sensors", "s1", "Readings"]);
    /// let stale: Vec<Reading> = readings().consistent(false).items().try_collect().await?;
    /// assert!(stale.is_empty()); // not replicated yet
    /// let fresh: Vec<Reading> = readings().consistent(true).items().try_collect().await?;
    /// assert_eq!(fresh.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn consistent(mut self, yes: bool) -> Self {
        self.shape.consistent = Some(yes);
        self
    }

    /// The children decoded as `E`, page by page, each page with the cursor after it. A
    /// child is skipped when it has no object, or when its path matches no template of `E`
    /// and `E` has no `#[dynatree(other)]` variant; so a page may hold fewer values than its
    /// size, and may be empty while more follow.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
    /// struct Reading { sensor: String, at: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for at in 1..=5 {
    ///     tree.repo::<Reading>().put(&Reading { sensor: "s1".into(), at }).await?;
    /// }
    /// let query = tree.entities::<Reading>().query(["Sensors", "s1", "Readings"]);
    /// let pages: Vec<_> = query.page_size(2).pages().try_collect().await?;
    /// assert_eq!(pages.iter().map(|p| p.items.len()).collect::<Vec<_>>(), [2, 2, 1]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The stream yields one error and ends, with nothing sent, on an invalid parent
    /// ([`ErrorKind::InvalidPath`]), two range conditions or one DynamoDB would refuse
    /// ([`ErrorKind::InvalidArgument`]), a cursor this query cannot have returned (see
    /// [`Cursor`]), an entity checked against another reserved character
    /// ([`ErrorKind::InvalidReserved`]); later, on backend errors, link loops, and objects
    /// whose path matches a template of `E` but whose attributes do not fit its type
    /// ([`ErrorKind::Serialization`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn pages(mut self) -> BoxStream<'static, Result<TypedPage<E>>> {
        let tree = self.tree.clone();
        let read = read::read_opts(&tree.cx, self.shape.consistent, None);
        let parent = tree.check_entity_reserved(E::RESERVED).and(self.parent);
        children_pages(tree, parent, &mut self.shape, read, |_, path, row| {
            E::decode(path, row)
        })
    }

    /// The children decoded as `E`, lazily; see [`pages`](EntityQuery::pages).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
    /// struct Reading { sensor: String, at: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for at in [10, 2, 7] {
    ///     tree.repo::<Reading>().put(&Reading { sensor: "s1".into(), at }).await?;
    /// }
    /// let query = tree.entities::<Reading>().query(["Sensors", "s1", "Readings"]);
    /// let all: Vec<Reading> = query.items().try_collect().await?;
    /// assert_eq!(all.len(), 3);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`pages`](EntityQuery::pages).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> BoxStream<'static, Result<E>> {
        flatten(self.pages())
    }
}
