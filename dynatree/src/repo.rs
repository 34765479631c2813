//! [`Repository`]: typed access to the values of one [`Hierarchical`] type in a tree.

use std::marker::PhantomData;

use futures::{Stream, StreamExt, TryStreamExt};

use crate::error::{Error, ErrorKind, Result};
use crate::hierarchical::Hierarchical;
use crate::item::{Item, Value};
use crate::segment::KeySegment;
use crate::storage::{Condition, Key, Query, RangeCondition, Storage};
use crate::stream::query_pages;
use crate::tree::Tree;

/// Typed access to the values of `T` in a tree: `tree.repo::<T>()`.
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
/// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
/// struct Link { account_id: String, short: String, target: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let links = tree.repo::<Link>();
/// let link = Link { account_id: "a1".into(), short: "xyz".into(), target: "https://example.com".into() };
/// links.create(&link).await?;
/// assert!(links.create(&link).await.unwrap_err().is_already_exists());
/// assert_eq!(links.get(&link.key()).await?, Some(link.clone()));
///
/// let all: Vec<Link> = links.list(&LinkCollection { account_id: "a1".into() }).try_collect().await?;
/// assert_eq!(all, [link]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Repository<'t, T, S> {
    tree: &'t Tree<S>,
    _type: PhantomData<fn() -> T>,
}

impl<S: Storage> Tree<S> {
    /// Typed access to the values of `T`.
    pub fn repo<T: Hierarchical>(&self) -> Repository<'_, T, S> {
        Repository {
            tree: self,
            _type: PhantomData,
        }
    }
}

impl<'t, T: Hierarchical, S: Storage> Repository<'t, T, S> {
    fn check_reserved(&self) -> Result<()> {
        if T::RESERVED == self.tree.reserved() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidDelimiter,
                format!(
                    "`{}` was checked against the reserved character {:?}, the tree uses {:?}",
                    std::any::type_name::<T>(),
                    T::RESERVED,
                    self.tree.reserved()
                ),
            ))
        }
    }

    fn row(&self, value: &T) -> Result<(crate::Path, Item)> {
        self.check_reserved()?;
        let path = T::key_path(&value.key())?;
        let mut row = self.tree.object_row_for(&path, value)?;
        let sc = self.tree.reserved();
        for key in value.index_keys() {
            let def = T::INDEXES
                .iter()
                .find(|d| d.name() == key.index())
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidAttribute,
                        "index key of an undeclared index",
                    )
                })?;
            let spec = def.spec(sc);
            let hash = index_hash::<T>(sc, key.hash());
            check_index_value(&hash, crate::MAX_HASH_KEY_BYTES, def.name())?;
            row.insert(spec.hash_attr, Value::S(hash));
            if let (Some(attr), Some(r)) = (spec.range_attr, key.range()) {
                check_index_value(r, crate::MAX_RANGE_KEY_BYTES, def.name())?;
                row.insert(attr, Value::S(r.to_owned()));
            }
        }
        crate::layout::check_item_size(&row)?;
        Ok((path, row))
    }

    /// Stores `value` at its path, replacing what is there.
    ///
    /// # Errors
    ///
    /// As [`Tree::put`].
    ///
    /// # Cancel safety
    ///
    /// As [`Tree::put`].
    pub async fn put(&self, value: &T) -> Result<()> {
        let (path, row) = self.row(value)?;
        self.tree.write_object(&path, row, &Condition::Always).await
    }

    /// Stores `value` only if nothing is at its path yet.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] if an object (or link) is there; as [`Tree::put`].
    ///
    /// # Cancel safety
    ///
    /// As [`Tree::put`]: after a dropped call, a repeated `create` may report
    /// `AlreadyExists` for the value the first call wrote.
    pub async fn create(&self, value: &T) -> Result<()> {
        let (path, row) = self.row(value)?;
        match self
            .tree
            .write_object(&path, row, &Condition::NotExists)
            .await
        {
            Err(e) if e.kind() == ErrorKind::ConditionFailed => Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("something is already at {path}"),
            )
            .with_source(e)),
            other => other,
        }
    }

    /// Replaces the stored value with `value`, which must exist. With a `#[dynatree(version)]`
    /// field this is an optimistic update: it succeeds only if the stored version equals
    /// `value`'s, and then stores and sets the version + 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ConditionFailed`] if nothing is stored or the stored version differs (a
    /// concurrent update won); [`ErrorKind::InvalidValue`] if the version is `u64::MAX`
    /// (nothing is sent); as [`Tree::put`].
    ///
    /// # Cancel safety
    ///
    /// As [`Tree::put`]; `value`'s version is only changed on success.
    pub async fn update(&self, value: &mut T) -> Result<()> {
        let condition = match (T::VERSION_FIELD, value.version()) {
            (Some(field), Some(v)) => Condition::equals(field, Value::N(v.to_string())),
            _ => Condition::Exists,
        };
        let current = value.version();
        if let Some(v) = current {
            let next = v.checked_add(1).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidValue,
                    format!("the version field is at its maximum ({v}) and cannot be incremented"),
                )
            })?;
            value.set_version(next);
        }
        let result = match self.row(value) {
            Ok((path, row)) => self.tree.write_object(&path, row, &condition).await,
            Err(e) => Err(e),
        };
        if result.is_err()
            && let Some(v) = current
        {
            value.set_version(v);
        }
        result
    }

    /// The value at `key`, following links; `None` if nothing is there.
    ///
    /// # Errors
    ///
    /// As [`Tree::get`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn get(&self, key: &T::Key) -> Result<Option<T>> {
        self.check_reserved()?;
        self.tree.get(T::key_path(key)?).await
    }

    /// The ancestor of type `A` of the value at `key` (e.g. a link's account): the prefix of
    /// `key`'s path with as many components as `A`'s template, read as an `A`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree}; use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Accounts/{id}")]
    /// struct Account { id: String, name: String }
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}", parent = Account)]
    /// struct Link { account_id: String, short: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let alice = Account { id: "1".into(), name: "Alice".into() };
    /// tree.repo::<Account>().put(&alice).await?;
    /// let key = LinkKey { account_id: "1".into(), short: "x".into() };
    /// assert_eq!(tree.repo::<Link>().ancestor::<Account>(&key).await?, Some(alice));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if the prefix does not match `A`'s template; as
    /// [`Tree::get`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn ancestor<A: Hierarchical>(&self, key: &T::Key) -> Result<Option<A>> {
        self.check_reserved()?;
        let path = T::key_path(key)?;
        let depth = A::TEMPLATE.split('/').count();
        if depth >= path.len() {
            return Err(Error::invalid_path(format!(
                "`{}` is not above `{}`",
                A::TEMPLATE,
                T::TEMPLATE
            )));
        }
        let prefix = path.prefix(depth);
        A::key_from_path(&prefix)?;
        self.tree.get(prefix).await
    }

    /// Deletes the value at `key`.
    ///
    /// # Errors
    ///
    /// As [`Tree::delete`].
    ///
    /// # Cancel safety
    ///
    /// As [`Tree::delete`].
    pub async fn delete(&self, key: &T::Key) -> Result<()> {
        self.check_reserved()?;
        self.tree.delete(T::key_path(key)?).await
    }

    /// Every value of a collection, in key order, lazily.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn list(&self, collection: &T::Collection) -> impl Stream<Item = Result<T>> + Send + 't {
        self.query(collection).items()
    }

    /// A query on a collection: range conditions on the last placeholder, order, limits,
    /// resumption. It compiles to a DynamoDB key condition on `Child`.
    pub fn query(&self, collection: &T::Collection) -> TypedQuery<'t, T, S> {
        TypedQuery {
            tree: self.tree,
            collection: collection.clone(),
            range: Ok(None),
            forward: true,
            limit: None,
            page_size: None,
            start_after: None,
            consistent: false,
        }
    }
}

/// The stored hash value of an index key: the type's template, the reserved character, the
/// encoded value. Types sharing an index name never see each other's values.
fn index_hash<T: Hierarchical>(sc: char, encoded: &str) -> String {
    format!("{}{sc}{encoded}", T::TEMPLATE)
}

fn check_index_value(v: &str, max: usize, index: &str) -> Result<()> {
    if v.is_empty() || v.len() > max {
        return Err(Error::new(
            ErrorKind::InvalidAttribute,
            format!(
                "the key of index `{index}` is {} bytes; DynamoDB takes 1 to {max}",
                v.len()
            ),
        ));
    }
    Ok(())
}

impl<'t, T: Hierarchical, S: Storage> Repository<'t, T, S> {
    /// A query on one of `T`'s secondary indexes, for the hash value in `key` (built by the
    /// derive's `T::index_<name>(..)` functions). Index reads are eventually consistent.
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
    /// #[dynatree(path = "Accounts/{id}", index(name = "by_email", hash = email))]
    /// struct Account { id: String, email: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).indexes_of::<Account>().build()?;
    /// tree.create_table().await?; // creates the index too
    /// let accounts = tree.repo::<Account>();
    /// let alice = Account { id: "1".into(), email: "alice@example.com".into() };
    /// accounts.put(&alice).await?;
    /// let found: Vec<Account> = accounts
    ///     .index(Account::index_by_email(&"alice@example.com".to_owned()))
    ///     .items()
    ///     .try_collect()
    ///     .await?;
    /// assert_eq!(found, [alice]);
    /// # Ok(()) }
    /// ```
    pub fn index(&self, key: crate::IndexKey) -> IndexQueryBuilder<'t, T, S> {
        IndexQueryBuilder {
            tree: self.tree,
            key,
            range: Ok(None),
            forward: true,
            limit: None,
            _type: PhantomData,
        }
    }
}

/// A query on a secondary index, built by [`Repository::index`]; see its example.
#[derive(Debug)]
#[must_use = "a query does nothing until `items()` is polled"]
pub struct IndexQueryBuilder<'t, T, S> {
    tree: &'t Tree<S>,
    key: crate::IndexKey,
    range: Result<Option<RangeCondition>>,
    forward: bool,
    limit: Option<usize>,
    _type: PhantomData<fn() -> T>,
}

impl<'t, T: Hierarchical, S: Storage> IndexQueryBuilder<'t, T, S> {
    fn with(mut self, range: RangeCondition) -> Self {
        self.range = one_range(self.range, range);
        self
    }

    /// Index range key at least `v` (encoded like the range field).
    pub fn ge(self, v: &impl KeySegment) -> Self {
        self.with(RangeCondition::Ge(v.encode()))
    }

    /// Index range key at most `v`.
    pub fn le(self, v: &impl KeySegment) -> Self {
        self.with(RangeCondition::Le(v.encode()))
    }

    /// Index range key from `low` to `high`, both included.
    pub fn between<K: KeySegment>(self, low: &K, high: &K) -> Self {
        self.with(RangeCondition::Between(low.encode(), high.encode()))
    }

    /// Index range key whose encoding starts with `prefix`.
    pub fn begins_with(self, prefix: impl Into<String>) -> Self {
        self.with(RangeCondition::BeginsWith(prefix.into()))
    }

    /// Descending order of the index range key.
    pub fn descending(mut self) -> Self {
        self.forward = false;
        self
    }

    /// At most `n` values in all.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// The values, lazily, one Query per page.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> impl Stream<Item = Result<T>> + Send + Unpin + 't {
        let tree = self.tree;
        let setup = (|| {
            let range = self.range?;
            if let Some(r) = &range {
                r.check()?;
            }
            let def = T::INDEXES
                .iter()
                .find(|d| d.name() == self.key.index())
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Validation,
                        format!(
                            "`{}` declares no index `{}`",
                            std::any::type_name::<T>(),
                            self.key.index()
                        ),
                    )
                })?;
            let sc = tree.reserved();
            Ok(crate::IndexQuery {
                index: def.spec(sc),
                hash: index_hash::<T>(sc, self.key.hash()),
                range,
                forward: self.forward,
                limit: self
                    .limit
                    .map(|l| u32::try_from(l.max(1)).unwrap_or(u32::MAX)),
            })
        })();
        let limit = self.limit.unwrap_or(usize::MAX);
        let stream = match setup {
            Ok(query) => {
                futures::stream::try_unfold((Some(None::<Item>), limit), move |(state, left)| {
                    let query = query.clone();
                    async move {
                        let (Some(start), true) = (state, left > 0) else {
                            return Ok(None);
                        };
                        let page = tree.storage().query_index_page(&query, start).await?;
                        let mut items = page
                            .items
                            .into_iter()
                            .map(|i| tree.to_value::<T>(i))
                            .collect::<Result<Vec<T>>>()?;
                        items.truncate(left);
                        let left = left - items.len();
                        // A page that ended on the condition's far bound has nothing after
                        // it, and DynamoDB refuses that key as a start key.
                        let next = page
                            .last
                            .filter(|last| match (&query.range, &query.index.range_attr) {
                                (Some(r), Some(a)) => last
                                    .get_s(a)
                                    .is_some_and(|v| r.accepts_start(v, query.forward)),
                                _ => true,
                            })
                            .map(Some);
                        Ok(Some((items, (next, left))))
                    }
                })
                .map_ok(|items| futures::stream::iter(items.into_iter().map(Ok)))
                .try_flatten()
                .left_stream()
            }
            Err(e) => futures::stream::once(async move { Err(e) }).right_stream(),
        };
        Box::pin(stream)
    }
}

/// Adds a range condition to a query that takes only one.
fn one_range(
    current: Result<Option<RangeCondition>>,
    range: RangeCondition,
) -> Result<Option<RangeCondition>> {
    match current {
        Ok(None) => Ok(Some(range)),
        Ok(Some(_)) => Err(Error::new(
            ErrorKind::Validation,
            "a query takes one range condition",
        )),
        Err(e) => Err(e),
    }
}

/// Where a query stopped: pass it to [`TypedQuery::start_after`] to continue.
///
/// # Examples
///
/// ```
/// let c = dynatree::Cursor::new("0000000042");
/// assert_eq!(c.as_str(), "0000000042");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor(String);

impl Cursor {
    /// A cursor at the encoded last component `s` (what [`Cursor::as_str`] returned).
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The encoded last component.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One page of a typed query.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedPage<T> {
    /// The values of this page.
    pub items: Vec<T>,
    /// Where to continue; `None` after the last page.
    pub cursor: Option<Cursor>,
}

/// A typed query on a collection, built by [`Repository::query`].
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
#[derive(Debug)]
#[must_use = "a query does nothing until `items()` or `pages()` is polled"]
pub struct TypedQuery<'t, T: Hierarchical, S> {
    tree: &'t Tree<S>,
    collection: T::Collection,
    range: Result<Option<RangeCondition>>,
    forward: bool,
    limit: Option<usize>,
    page_size: Option<u32>,
    start_after: Option<Cursor>,
    consistent: bool,
}

impl<'t, T: Hierarchical, S: Storage> TypedQuery<'t, T, S> {
    fn with(mut self, range: RangeCondition) -> Self {
        self.range = one_range(self.range, range);
        self
    }

    /// Last component equal to `v`.
    pub fn eq(self, v: &T::Last) -> Self
    where
        T::Last: KeySegment,
    {
        self.with(RangeCondition::Eq(v.encode()))
    }

    /// Last component below `v`.
    pub fn lt(self, v: &T::Last) -> Self
    where
        T::Last: KeySegment,
    {
        self.with(RangeCondition::Lt(v.encode()))
    }

    /// Last component at most `v`.
    pub fn le(self, v: &T::Last) -> Self
    where
        T::Last: KeySegment,
    {
        self.with(RangeCondition::Le(v.encode()))
    }

    /// Last component above `v`.
    pub fn gt(self, v: &T::Last) -> Self
    where
        T::Last: KeySegment,
    {
        self.with(RangeCondition::Gt(v.encode()))
    }

    /// Last component at least `v`.
    pub fn ge(self, v: &T::Last) -> Self
    where
        T::Last: KeySegment,
    {
        self.with(RangeCondition::Ge(v.encode()))
    }

    /// Last component from `low` to `high`, both included.
    pub fn between(self, low: &T::Last, high: &T::Last) -> Self
    where
        T::Last: KeySegment,
    {
        self.with(RangeCondition::Between(low.encode(), high.encode()))
    }

    /// Last component whose encoding starts with `prefix` (for strings, a string prefix; for
    /// dates, `"2026-11"` selects a month).
    pub fn begins_with(self, prefix: impl Into<String>) -> Self {
        self.with(RangeCondition::BeginsWith(prefix.into()))
    }

    /// Descending order of the last component.
    pub fn descending(mut self) -> Self {
        self.forward = false;
        self
    }

    /// At most `n` values in all.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// At most `n` names per DynamoDB request.
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = Some(n.max(1));
        self
    }

    /// Continue after a cursor from an earlier page.
    pub fn start_after(mut self, cursor: Cursor) -> Self {
        self.start_after = Some(cursor);
        self
    }

    /// Strongly consistent reads.
    pub fn consistent(mut self, yes: bool) -> Self {
        self.consistent = yes;
        self
    }

    /// The values, page by page, with a cursor after each page.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn pages(self) -> impl Stream<Item = Result<TypedPage<T>>> + Send + Unpin + 't {
        let tree = self.tree;
        let setup = (|| {
            let range = self.range?;
            if T::RESERVED != tree.reserved() {
                return Err(Error::new(
                    ErrorKind::InvalidDelimiter,
                    "the type was checked against another reserved character than the tree's",
                ));
            }
            if let Some(r) = &range {
                r.check()?;
            }
            let prefix = T::collection_path(&self.collection)?;
            let mut query = tree.listing_query_for(&prefix)?;
            query.range = range;
            query.forward = self.forward;
            query.consistent = self.consistent;
            let cap = self
                .limit
                .map(|l| u32::try_from(l.max(1)).unwrap_or(u32::MAX));
            query.limit = match (self.page_size, cap) {
                (Some(p), Some(c)) => Some(p.min(c)),
                (p, c) => p.or(c),
            };
            let start = match self.start_after {
                None => None,
                Some(c) => {
                    let start = Key::new(query.hash.clone(), c.0);
                    if !query.accepts_start(&start) {
                        // A cursor at the condition's far bound (the last page ended on it) has
                        // nothing after it; one outside the condition is the caller's mistake.
                        if start.range.is_empty()
                            || !query
                                .range
                                .as_ref()
                                .is_some_and(|r| r.matches(&start.range))
                        {
                            return Err(Error::new(
                                ErrorKind::Validation,
                                format!(
                                    "the cursor {:?} is outside the query's range condition",
                                    start.range
                                ),
                            ));
                        }
                        return Ok(None);
                    }
                    Some(start)
                }
            };
            Ok(Some((prefix, query, start)))
        })();
        let limit = self.limit;
        Box::pin(match setup {
            Ok(Some((prefix, query, start))) => {
                typed_pages::<T, S>(tree, prefix, query, start, limit).left_stream()
            }
            // Ok(None): the cursor is at the end; send nothing.
            other => futures::stream::iter(other.err().map(Err)).right_stream(),
        })
    }

    /// The values, lazily.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> impl Stream<Item = Result<T>> + Send + Unpin + 't {
        self.pages()
            .map_ok(|p| futures::stream::iter(p.items.into_iter().map(Ok)))
            .try_flatten()
    }
}

fn typed_pages<'t, T: Hierarchical, S: Storage>(
    tree: &'t Tree<S>,
    prefix: crate::Path,
    query: Query,
    start: Option<Key>,
    limit: Option<usize>,
) -> impl Stream<Item = Result<TypedPage<T>>> + Send + 't {
    let pages = query_pages(tree.storage(), query, start);
    futures::stream::try_unfold(
        (Box::pin(pages), limit.unwrap_or(usize::MAX)),
        move |(mut pages, left)| {
            let prefix = prefix.clone();
            async move {
                if left == 0 {
                    return Ok(None);
                }
                let Some(page) = pages.try_next().await? else {
                    return Ok(None);
                };
                let last_name = page.last_key.as_ref().map(|k| Cursor(k.range.clone()));
                let entries = tree.entries_for::<T>(&prefix, page.items).await?;
                let mut items: Vec<T> = entries.into_iter().filter_map(|e| e.value).collect();
                items.truncate(left);
                let left = left - items.len();
                let cursor = if left == 0 { None } else { last_name };
                Ok(Some((TypedPage { items, cursor }, (pages, left))))
            }
        },
    )
}
