//! Reads with a per-call choice: [`Read`] (consistency, projection).

use crate::tree::read;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;

use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::hierarchical::Hierarchical;
use crate::item::struct_fields;
use crate::repo::Repository;
use crate::storage::{SharedStorage, Storage};

/// One read of a value by key, with a per-call choice of consistency and of the fields read.
/// Built by [`Repository::read`]; `.await` it (or call [`send`](Read::send)).
///
/// [`project`](Read::project) reads the value as a smaller type `P`: only the attributes `P`'s
/// fields are stored under are requested (a DynamoDB ProjectionExpression), which saves the
/// bytes of the others on the wire. DynamoDB bills a read by the whole item's size either way.
///
/// # Examples
///
/// ```
/// use dynatree::{Hierarchical, Tree};
/// use dynatree_testing::FakeTable;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Docs/{id}")]
/// struct Doc { id: String, title: String, body: String }
///
/// /// What a listing page shows: no body.
/// #[derive(Deserialize, Debug, PartialEq)]
/// struct Title { title: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let docs = tree.repo::<Doc>();
/// let doc = Doc { id: "d".into(), title: "Hello".into(), body: "x".repeat(10_000) };
/// docs.put(&doc).await?;
///
/// // Read-your-writes, whatever the tree's default.
/// assert_eq!(docs.read(&doc.key()).consistent(true).await?, Some(doc.clone()));
/// // Only the title crosses the network.
/// let title = docs.read(&doc.key()).project::<Title>().await?;
/// assert_eq!(title, Some(Title { title: "Hello".into() }));
/// # Ok(()) }
/// ```
#[must_use = "a read does nothing until it is awaited"]
pub struct Read<T: Hierarchical, S = SharedStorage, P = T> {
    repo: Repository<T, S>,
    key: T::Key,
    consistent: Option<bool>,
    projection: Option<&'static [&'static str]>,
    _marker: PhantomData<fn() -> P>,
}

impl<T: Hierarchical, S, P> fmt::Debug for Read<T, S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Read")
            .field("key", &self.key)
            .field("consistent", &self.consistent)
            .field("projection", &self.projection)
            .finish_non_exhaustive()
    }
}

impl<T: Hierarchical, S: Storage + 'static> Repository<T, S> {
    /// A read of the value at `key` with per-call options (see [`Read`]); `repo.read(&key).await`
    /// is [`get`](Repository::get).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String, title: String, body: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let docs = tree.repo::<Doc>();
    /// let doc = Doc { id: "d".into(), title: "Hello".into(), body: "…".into() };
    /// docs.put(&doc).await?;
    /// assert_eq!(docs.read(&doc.key()).await?, Some(doc.clone())); // as `get`
    /// assert_eq!(docs.read(&DocKey { id: "other".into() }).await?, None);
    /// # Ok(()) }
    /// ```
    pub fn read(&self, key: &T::Key) -> Read<T, S, T> {
        Read {
            repo: self.clone(),
            key: key.clone(),
            consistent: None,
            projection: None,
            _marker: PhantomData,
        }
    }
}

impl<T: Hierarchical, S: Storage + 'static, P: DeserializeOwned + Send + 'static> Read<T, S, P> {
    /// A strongly consistent read (`true`: it sees every write acknowledged before it; twice
    /// the read units) or an eventually consistent one (`false`); default: the tree's setting.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String, title: String, body: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// // A fake whose eventually consistent reads lag one write behind.
    /// let table = FakeTable::eventually_consistent(1);
    /// let tree = Tree::new(table.clone());
    /// # tree.create_table().await?;
    /// let docs = tree.repo::<Doc>();
    /// let doc = Doc { id: "d".into(), title: "Hello".into(), body: "…".into() };
    /// docs.put(&doc).await?;
    /// assert_eq!(docs.read(&doc.key()).consistent(false).await?, None); // not replicated yet
    /// assert_eq!(docs.read(&doc.key()).consistent(true).await?, Some(doc));
    /// # Ok(()) }
    /// ```
    pub fn consistent(mut self, yes: bool) -> Self {
        self.consistent = Some(yes);
        self
    }

    /// Reads the value as `Q`, requesting only the attributes of `Q`'s fields (serde's names
    /// for them). `Q` is usually a struct with some of `T`'s fields; a `Q` that is not a
    /// struct with named fields (a map, a struct with `#[serde(flatten)]`) reads every
    /// attribute.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String, title: String, body: String }
    ///
    /// #[derive(Deserialize, Debug, PartialEq)]
    /// struct Title { title: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let docs = tree.repo::<Doc>();
    /// let doc = Doc { id: "d".into(), title: "Hello".into(), body: "x".repeat(10_000) };
    /// docs.put(&doc).await?;
    /// let title = docs.read(&doc.key()).project::<Title>().await?;
    /// assert_eq!(title, Some(Title { title: "Hello".into() }));
    /// # Ok(()) }
    /// ```
    pub fn project<Q: DeserializeOwned + Send + 'static>(self) -> Read<T, S, Q> {
        Read {
            repo: self.repo,
            key: self.key,
            consistent: self.consistent,
            projection: struct_fields::<Q>(),
            _marker: PhantomData,
        }
    }

    /// Sends the read: the value, links followed; `None` if nothing is there (or it expired).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String, title: String, body: String }
    ///
    /// #[derive(Deserialize, Debug)]
    /// struct Summary { summary: String } // not a field of `Doc`
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let docs = tree.repo::<Doc>();
    /// let doc = Doc { id: "d".into(), title: "Hello".into(), body: "…".into() };
    /// docs.put(&doc).await?;
    /// assert_eq!(docs.read(&doc.key()).send().await?, Some(doc.clone())); // as `.await`
    /// let err = docs.read(&doc.key()).project::<Summary>().send().await.unwrap_err();
    /// assert_eq!(err.kind(), dynatree::ErrorKind::Serialization);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Repository::get`]; [`ErrorKind::Serialization`](crate::ErrorKind::Serialization)
    /// if the attributes read do not fit `P`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn send(self) -> Result<Option<P>> {
        crate::retry::call(self.repo.tree().cx.inner.config.retry, async move {
            self.repo.check_reserved()?;
            let tree = self.repo.tree();
            let path = tree.enter(T::key_path(&self.key)?)?;
            tree.cx.layout().check_object_path(&path)?;
            let read = read::read_opts(&tree.cx, self.consistent, self.projection);
            let span =
                tracing::debug_span!("dynatree.read", path = %path, consistent = read.consistent);
            tracing::Instrument::instrument(
                async {
                    match read::resolve_with(&tree.cx, &path, &read).await? {
                        Some(item) => tree.cx.to_value(item).map(Some),
                        None => Ok(None),
                    }
                },
                span,
            )
            .await
        })
        .await
    }
}

impl<T: Hierarchical, S: Storage + 'static, P: DeserializeOwned + Send + 'static> IntoFuture
    for Read<T, S, P>
{
    type Output = Result<Option<P>>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Option<P>>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}
