//! [`Repository`]: typed access to the values of one [`Hierarchical`] type in a tree.

use crate::tree::{Tree, denorm, many, txn};
use std::marker::PhantomData;

use crate::error::{Error, ErrorKind, Result};
use crate::hierarchical::Hierarchical;
use crate::index::index_attributes;
use crate::item::{Item, Value};
use crate::layout::at_version;
use crate::path::Path;
use crate::query::{IndexQueryBuilder, Shape, TypedQuery};
use crate::retry::Backoff;
use crate::storage::{Condition, SharedStorage, Storage};

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
///
/// A repository owns a clone of its tree (cheap): keep it in your state, move it into tasks.
pub struct Repository<T, S = SharedStorage> {
    tree: Tree<S>,
    _type: PhantomData<fn() -> T>,
}

impl<T, S> Clone for Repository<T, S> {
    fn clone(&self) -> Self {
        Self {
            tree: self.tree.clone(),
            _type: PhantomData,
        }
    }
}

impl<T, S: std::fmt::Debug> std::fmt::Debug for Repository<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("type", &std::any::type_name::<T>())
            .field("tree", &self.tree)
            .finish()
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// Typed access to the values of `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// links.put(&link).await?;
    /// assert_eq!(links.get(&link.key()).await?, Some(link));
    /// # Ok(()) }
    /// ```
    pub fn repo<T: Hierarchical>(&self) -> Repository<T, S> {
        denorm::register_targets(&self.cx, crate::denorm::TypeInfo::of::<T>());
        Repository {
            tree: self.clone(),
            _type: PhantomData,
        }
    }
}

impl<T: Hierarchical, S: Storage + 'static> Repository<T, S> {
    /// The tree this repository reads and writes.
    pub(crate) fn tree(&self) -> &Tree<S> {
        &self.tree
    }

    /// Writes `row` at `path` keeping the invariants, its denormalized fields filled from its
    /// ancestors before and checked again after, and (for a source) its copies propagated.
    pub(crate) async fn write_row(
        &self,
        path: &Path,
        mut row: Item,
        condition: &Condition,
    ) -> Result<()> {
        let ty = crate::denorm::TypeInfo::of::<T>();
        let guard = denorm::before_source_write(&self.tree.cx, ty, path).await?;
        // Copies filled from the sources as read, and the write conditional on the sources
        // being unchanged (a source written in between: read and fill again).
        let mut backoff = Backoff::new(self.tree.cx.config_retry());
        loop {
            let written = match denorm::fill_checked(&self.tree.cx, ty, path, &mut row).await {
                Ok(checks) => {
                    denorm::write_fenced_checked(&self.tree.cx, path, &mut row, condition, &checks)
                        .await
                }
                Err(e) => Err(e),
            };
            match written {
                Ok(true) => break,
                Ok(false) => {
                    if backoff.retry().await {
                        continue;
                    }
                    let e = Error::new(
                        ErrorKind::Conflict,
                        format!("the sources of {path}'s denormalized fields kept changing"),
                    );
                    denorm::source_write_failed(&self.tree.cx, guard, &e).await;
                    return Err(e);
                }
                Err(e) => {
                    denorm::source_write_failed(&self.tree.cx, guard, &e).await;
                    return Err(e);
                }
            }
        }
        // A source that is a target too may have had its copies refreshed after its write:
        // propagate what is stored, not this row.
        let written = T::DENORMALIZED.is_empty().then_some(&row);
        denorm::after_source_write(&self.tree.cx, guard, path, written).await
    }

    /// What follows a write of `row` at `path` (a value of `T`, not a source): its copies
    /// checked again (see [`write_row`](Repository::write_row)).
    pub(crate) async fn after_write(&self, path: &Path, row: &Item) -> Result<()> {
        denorm::recheck_targets(&self.tree.cx, crate::denorm::TypeInfo::of::<T>(), path, row).await
    }

    pub(crate) fn check_reserved(&self) -> Result<()> {
        if T::RESERVED == self.tree.reserved() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidReserved,
                format!(
                    "`{}` was checked against the reserved character {:?}, the tree uses {:?}",
                    std::any::type_name::<T>(),
                    T::RESERVED,
                    self.tree.reserved()
                ),
            ))
        }
    }

    pub(crate) fn row(&self, value: &T) -> Result<(crate::Path, Item)> {
        self.check_reserved()?;
        // Through a scope: the absolute path under its root.
        let path = self.tree.enter(T::key_path(&value.key())?)?;
        let mut row = self.tree.cx.object_row_for(&path, value)?;
        let hash_of = |encoded: &str| self.tree.cx.index_hash(T::TEMPLATE, encoded);
        for (name, v) in index_attributes(value, self.tree.reserved(), hash_of)? {
            row.insert(name, v);
        }
        denorm::stamp_source(&self.tree.cx, crate::denorm::TypeInfo::of::<T>(), &mut row);
        if let Some(expires) = value.expires_at() {
            row.insert(
                self.tree.cx.layout().ttl_attr(),
                Value::N(expires.to_string()),
            );
        }
        crate::layout::check_item_size(&row)?;
        Ok((path, row))
    }

    /// Stores `value` at its path, replacing what is there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// links.put(&link).await?;
    /// let moved = Link { target: "https://b".into(), ..link.clone() };
    /// links.put(&moved).await?; // replaces
    /// assert_eq!(links.get(&link.key()).await?, Some(moved));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Tree::put`].
    ///
    /// # Cancel safety
    ///
    /// As [`Tree::put`].
    pub async fn put(&self, value: &T) -> Result<()> {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            let (path, row) = self.row(value)?;
            self.write_row(&path, row, &Condition::Always).await
        })
        .await
    }

    /// Stores every value of `values`, replacing what is at their paths, at batch cost: the
    /// listing rows of the whole batch are read once (deduplicated), missing ancestors are
    /// created once, and each transaction writes up to 50 objects (each with the check, or
    /// the creation, of its own listing row), where [`put`](Repository::put) sends one
    /// transaction per object. The invariants are those of `put`: no object is written where
    /// its listing row is missing, being removed or locked.
    ///
    /// Not atomic: each transaction commits on its own. Values whose transaction lost a race
    /// with a concurrent removal are written again one by one.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let batch: Vec<Link> = (0..100)
    ///     .map(|i| Link { account_id: "a1".into(), short: format!("{i:03}"), target: "https://example.com".into() })
    ///     .collect();
    /// table.reset_metrics();
    /// links.put_all(&batch).await?;
    /// // The 103 listing rows read in 2 BatchGetItem, the 3 ancestors created in one
    /// // transaction, the 100 objects (each with its listing row) in 3: 6 requests, where
    /// // 100 puts send 100 transactions and more.
    /// assert_eq!(table.metrics().requests("BatchGetItem"), 2);
    /// assert_eq!(table.metrics().requests("TransactWriteItems"), 4);
    /// assert_eq!(table.metrics().total_requests(), 6);
    /// let keys: Vec<LinkKey> = batch.iter().map(|l| l.key()).collect();
    /// assert_eq!(links.get_many(&keys).await?.len(), 100);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`put`](Repository::put), checked for every value before anything is sent;
    /// [`ErrorKind::InvalidArgument`] if two values have one path. After a backend error, the
    /// values written so far stay written.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may have written any subset of the values (each reachable); calling
    /// `put_all` again completes it.
    pub async fn put_all<'v, I>(&self, values: I) -> Result<()>
    where
        I: IntoIterator<Item = &'v T>,
    {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            let rows = values
                .into_iter()
                .map(|v| self.row(v))
                .collect::<Result<Vec<_>>>()?;
            if denorm::is_source(&self.tree.cx, T::TEMPLATE) {
                // Each source write is fenced by its version: one at a time (see `write_row`).
                for (path, row) in rows {
                    self.write_row(&path, row, &Condition::Always).await?;
                }
                return Ok(());
            }
            let mut rows = rows;
            let ty = crate::denorm::TypeInfo::of::<T>();
            // Targets: intents on their sources first, so that copies a failure or a crash leaves
            // stale between the write and its re-read are brought up to date by `resume`.
            let guards =
                denorm::record_refresh(&self.tree.cx, ty, rows.iter().map(|(p, _)| p)).await?;
            let result = async {
                for (path, row) in &mut rows {
                    denorm::fill_targets(&self.tree.cx, ty, path, row).await?;
                }
                many::write_objects(&self.tree.cx, rows.clone()).await?;
                for (path, row) in &rows {
                    self.after_write(path, row).await?;
                }
                Ok(())
            }
            .await;
            denorm::end_refresh(&self.tree.cx, guards, result.is_err()).await;
            result
        })
        .await
    }

    /// The values at `keys`, in the order of `keys`, `None` where nothing is: one BatchGetItem
    /// per 100 distinct keys (unprocessed keys sent again under the retry policy), plus one
    /// per round of links to follow.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{id}")]
    /// struct Account { id: String, name: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let alice = Account { id: "1".into(), name: "Alice".into() };
    /// accounts.put(&alice).await?;
    /// let keys = [AccountKey { id: "2".into() }, alice.key(), alice.key()];
    /// assert_eq!(accounts.get_many(&keys).await?, [None, Some(alice.clone()), Some(alice)]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`get`](Repository::get), checked for every key before anything is sent;
    /// [`ErrorKind::Unprocessed`] if keys stayed unprocessed after every retry.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn get_many<'k, I>(&self, keys: I) -> Result<Vec<Option<T>>>
    where
        I: IntoIterator<Item = &'k T::Key>,
    {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            self.check_reserved()?;
            let paths = keys
                .into_iter()
                .map(|k| self.tree.enter(T::key_path(k)?))
                .collect::<Result<Vec<_>>>()?;
            many::read_many(&self.tree.cx, &paths)
                .await?
                .into_iter()
                .map(|item| item.map(|i| self.tree.cx.to_value(i)).transpose())
                .collect()
        })
        .await
    }

    /// Stores `value` only if nothing is at its path yet.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// links.create(&link).await?;
    /// let other = Link { target: "https://b".into(), ..link.clone() };
    /// assert!(links.create(&other).await.unwrap_err().is_already_exists());
    /// assert_eq!(links.get(&link.key()).await?, Some(link));
    /// # Ok(()) }
    /// ```
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
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            let (path, row) = self.row(value)?;
            match self
                .write_row(
                    &path,
                    row,
                    &txn::live_if(&self.tree.cx, T::TTL_FIELD.is_some(), Condition::NotExists),
                )
                .await
            {
                Err(e) if e.kind() == ErrorKind::ConditionFailed => Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!("something is already at {path}"),
                )
                .with_source(e)),
                other => other,
            }
        })
        .await
    }

    /// Replaces the stored value with `value`, which must exist. With a `#[dynatree(version)]`
    /// field this is an optimistic update: it succeeds only if the stored version equals
    /// `value`'s, and then stores and sets the version + 1.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String, text: String, #[dynatree(version)] version: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let docs = tree.repo::<Doc>();
    /// docs.put(&Doc { id: "d".into(), text: "v1".into(), version: 1 }).await?;
    /// let mut mine = docs.get(&DocKey { id: "d".into() }).await?.unwrap();
    /// let mut theirs = mine.clone();
    /// mine.text = "mine".into();
    /// docs.update(&mut mine).await?;
    /// assert_eq!(mine.version, 2);
    /// // A concurrent editor who read version 1 loses, and keeps its version.
    /// theirs.text = "theirs".into();
    /// assert!(docs.update(&mut theirs).await.unwrap_err().is_condition_failed());
    /// assert_eq!(theirs.version, 1);
    /// # Ok(()) }
    /// ```
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
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            let condition = match (T::VERSION_FIELD, value.version()) {
                (Some(field), Some(v)) => at_version(field, v),
                _ => Condition::Exists,
            };
            let current = value.version();
            if let Some(v) = current {
                let next = v.checked_add(1).ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidValue,
                        format!(
                            "the version field is at its maximum ({v}) and cannot be incremented"
                        ),
                    )
                })?;
                value.set_version(next);
            }
            let result = match self.row(value) {
                Ok((path, row)) => {
                    let condition = txn::live_if(&self.tree.cx, T::TTL_FIELD.is_some(), condition);
                    self.write_row(&path, row, &condition).await
                }
                Err(e) => Err(e),
            };
            if result.is_err()
                && let Some(v) = current
            {
                value.set_version(v);
            }
            result
        })
        .await
    }

    /// The value at `key`, following links; `None` if nothing is there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// assert_eq!(links.get(&link.key()).await?, None);
    /// links.put(&link).await?;
    /// assert_eq!(links.get(&link.key()).await?, Some(link));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Tree::get`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn get(&self, key: &T::Key) -> Result<Option<T>> {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            self.check_reserved()?;
            self.tree.get(T::key_path(key)?).await
        })
        .await
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
        crate::retry::call(self.tree.cx.inner.config.retry, async {
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
        })
        .await
    }

    /// Deletes the value at `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// links.put(&link).await?;
    /// links.delete(&link.key()).await?;
    /// assert_eq!(links.get(&link.key()).await?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Tree::delete`].
    ///
    /// # Cancel safety
    ///
    /// As [`Tree::delete`].
    pub async fn delete(&self, key: &T::Key) -> Result<()> {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            self.check_reserved()?;
            self.tree.delete(T::key_path(key)?).await
        })
        .await
    }

    /// Every value of a collection, in key order, lazily.
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::TryStreamExt;
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// for short in ["b", "a", "c"] {
    ///     links.put(&Link { short: short.into(), ..link.clone() }).await?;
    /// }
    /// let all: Vec<Link> = links.list(&LinkCollection { account_id: "a1".into() }).try_collect().await?;
    /// assert_eq!(all.iter().map(|l| l.short.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn list(
        &self,
        collection: &T::Collection,
    ) -> futures::stream::BoxStream<'static, Result<T>> {
        self.query(collection).items()
    }

    /// A query on a collection: range conditions on the last placeholder, order, limits,
    /// resumption. It compiles to a DynamoDB key condition on `Child`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::TryStreamExt;
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Accounts/{account_id}/Links/{short}")]
    /// struct Link { account_id: String, short: String, target: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let links = tree.repo::<Link>();
    /// let link = Link { account_id: "a1".into(), short: "x".into(), target: "https://a".into() };
    /// for short in ["a", "b", "c", "d"] {
    ///     links.put(&Link { short: short.into(), ..link.clone() }).await?;
    /// }
    /// let a1 = LinkCollection { account_id: "a1".into() };
    /// let last_two: Vec<Link> = links.query(&a1).gt("a").descending().limit(2).items().try_collect().await?;
    /// assert_eq!(last_two.iter().map(|l| l.short.as_str()).collect::<Vec<_>>(), ["d", "c"]);
    /// # Ok(()) }
    /// ```
    pub fn query(&self, collection: &T::Collection) -> TypedQuery<T, S> {
        TypedQuery {
            tree: self.tree.clone(),
            collection: collection.clone(),
            shape: Shape::default(),
        }
    }
}

impl<T: Hierarchical, S: Storage + 'static> Repository<T, S> {
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
    pub fn index(&self, key: crate::keys::IndexKey) -> IndexQueryBuilder<T, S> {
        IndexQueryBuilder {
            tree: self.tree.clone(),
            key,
            shape: Shape::default(),
            _type: PhantomData,
        }
    }
}
