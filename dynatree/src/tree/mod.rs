//! [`Tree`]: the untyped tree API over any [`Storage`].

pub(crate) mod clock;
pub(crate) mod denorm;
mod expire;
pub(crate) mod guard;
mod intent;
mod many;
mod moves;
mod ops;
mod read;
mod removal;
pub mod scope;
mod txn;
mod write;

pub(crate) use denorm::script_versions;
pub use intent::{Operation, Phase};
pub use moves::{Intent, LinkPolicy, MoveReport, OnChildren};
pub use ops::{Descendant, Descendants, PATH_INDEX, Strategy};
pub(crate) use read::ReadOpts;
pub(crate) use txn::Op as TxOp;

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use serde::{Serialize, de::DeserializeOwned};
use tracing::Instrument;

use crate::denorm::Propagation;
use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::layout::{DEFAULT_RESERVED, HASH_KEY, Layout, RANGE_KEY};
use crate::path::{IntoPath, Path};
use crate::retry::RetryPolicy;
use crate::storage::{
    Billing, IndexSettings, Key, Query, SharedStorage, Storage, TableSettings, TableStatus,
};
use crate::stream::{query_pages, scan_pages};

/// A tree of objects, links and listings in one DynamoDB table, in the dynamotree layout.
///
/// Every call validates every path it is given and every attribute it writes; invalid input is
/// a typed error and nothing is sent. See [`consistency`](crate::consistency) for the invariants
/// writes keep (every object reachable by listing from the root, even under concurrency).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree_testing::FakeTable;
/// use futures::TryStreamExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, PartialEq, Debug)]
/// struct Link { target: String }
///
/// # tokio_test();
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn tokio_test() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let link = Link { target: "https://example.com/".into() };
/// tree.put(["Accounts", "123456", "Links", "xyzpdq"], &link).await?;
/// assert_eq!(tree.get(["Accounts", "123456", "Links", "xyzpdq"]).await?, Some(link));
/// let names: Vec<String> = tree.list(["Accounts", "123456"]).try_collect().await?;
/// assert_eq!(names, ["Links"]);
/// # Ok(()) }
/// ```
///
/// # A handle
///
/// A `Tree` is a cheap [`Clone`] (an `Arc` of shared state: the backend, the settings and the
/// cache of listing rows known to exist) and `Send + Sync + 'static`: clone it into spawned
/// tasks, request handlers and repositories. Its streams and builders own what they need.
///
/// `Tree` without a parameter holds its backend as a [`SharedStorage`] (type-erased, one boxed
/// future per request). [`TreeBuilder::build_static`] keeps the backend's type instead
/// (`Tree<FakeTable>`, `Tree<DynamoDbTable>`) for static dispatch; BENCHMARKS.md compares them.
///
/// ```
/// use dynatree::Tree;
/// use dynatree_testing::FakeTable;
///
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let task = tokio::spawn({
///     let tree = tree.clone();
///     async move { tree.put(["a"], &V { v: 1 }).await }
/// });
/// task.await.expect("task")?;
/// # Ok(()) }
/// ```
///
/// [`DynamoDbTable`]: crate::DynamoDbTable
pub struct Tree<S = SharedStorage> {
    pub(crate) inner: Arc<Inner<S>>,
    /// The absolute root of a scoped tree ([`Tree::scope`]); `None` for the whole table.
    root: Option<Arc<Path>>,
    /// Whether the public methods take and return paths relative to `root` (a scope as the
    /// caller sees it), or absolute ones (the same scope as its own operations run it, still
    /// confined to `root`: see [`scope`]).
    relative: bool,
    /// Told how far subtree operations run through this handle have come
    /// ([`Tree::on_progress`]).
    observer: Option<Observer>,
}

/// A callback of [`Tree::on_progress`].
type Observer = Arc<dyn Fn(&OpProgress) + Send + Sync>;

/// How far a subtree operation ([`Tree::move_subtree`], [`Tree::copy_subtree`],
/// [`Tree::delete_subtree`], and those [`Tree::resume`] finishes) has come: given to the
/// callback of [`Tree::on_progress`] while the source is walked, after each node, and in every
/// phase after each slice of a level (a few transactions' worth of nodes), so that a level of
/// thousands of nodes does not look hung.
///
/// # Examples
///
/// See [`Tree::on_progress`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpProgress {
    /// The operation: a move, a copy or a subtree deletion.
    pub op: Operation,
    /// Its phase: [`Lock`](Phase::Lock) (walking and locking the source: the total is not
    /// known yet; then, with the total known, holding its objects), [`Copy`](Phase::Copy)
    /// (writing the destination), [`Delete`](Phase::Delete) (removing the source) or
    /// [`Unlock`](Phase::Unlock) (releasing the holds on objects, then the locks on listing
    /// rows: `total` counts both).
    pub phase: Phase,
    /// Nodes (listing entries) done in this phase (or its step) so far.
    pub done: u64,
    /// Nodes the phase has in all, once known.
    pub total: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct Inner<S> {
    pub(crate) storage: S,
    pub(crate) layout: Layout,
    pub(crate) config: Config,
    pub(crate) known: KnownRows,
    /// The target types of denormalized fields this tree propagates to.
    pub(crate) targets: denorm::Targets,
    /// Set once the table has been checked ([`Tree::verify`]): before the first request, or
    /// by [`Tree::create_table`].
    pub(crate) verified: tokio::sync::OnceCell<()>,
}

impl<S> Clone for Tree<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            root: self.root.clone(),
            relative: self.relative,
            observer: self.observer.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Tree<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tree")
            .field("storage", &self.inner.storage)
            .field("scope", &self.root.as_deref())
            .field("reserved", &self.inner.layout.reserved())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) max_link_hops: usize,
    pub(crate) consistent_reads: bool,
    pub(crate) retry: RetryPolicy,
    pub(crate) billing: Billing,
    pub(crate) lease: Duration,
    pub(crate) page_size: Option<u32>,
    pub(crate) table_wait: Duration,
    pub(crate) indexes: Vec<crate::keys::IndexDef>,
    /// Types with secondary indexes registered on the builder: their template, how their
    /// index attributes follow from a row, and which scopes a row's index values name (for the
    /// checker and imports).
    pub(crate) indexed: Vec<(&'static str, IndexAttrsFn, IndexRootsFn)>,
    pub(crate) path_index: Option<usize>,
    pub(crate) time_to_live: bool,
    /// Target types of denormalized fields registered on the builder.
    pub(crate) denormalized: Vec<(&'static str, &'static [crate::denorm::Denormalized])>,
    pub(crate) propagation: Propagation,
    /// Sources with more targets below them than this propagate in the background.
    pub(crate) inline_limit: usize,
    /// Fenced puts: removals leave fence rows, new names are plain PutItems.
    pub(crate) fenced_puts: bool,
    /// Whether the table is checked (DescribeTable) before the tree's first request.
    pub(crate) verify_table: bool,
    /// The templates of the types registered for each secondary index: (index, template).
    pub(crate) index_templates: Vec<(&'static str, &'static str)>,
}

/// The secondary-index attributes a row of one type should have, written through the scope
/// rooted at the given components (see `index::expected_index_attributes`).
type IndexAttrsFn =
    fn(&Layout, &[String], &Item) -> Result<Option<Vec<(String, crate::item::Value)>>>;

/// The scope roots a row's stored index values of one type name (see `index::indexed_roots`).
type IndexRootsFn = fn(&Layout, &Item) -> Vec<Path>;

impl Default for Config {
    fn default() -> Self {
        Self {
            max_link_hops: 8,
            consistent_reads: false,
            retry: RetryPolicy::default(),
            billing: Billing::OnDemand,
            lease: Duration::from_secs(30),
            page_size: None,
            table_wait: Duration::from_secs(300),
            indexes: Vec::new(),
            indexed: Vec::new(),
            path_index: None,
            time_to_live: false,
            denormalized: Vec::new(),
            propagation: Propagation::Inline,
            inline_limit: 1_000,
            fenced_puts: crate::__private::fenced_puts_default(),
            verify_table: true,
            index_templates: Vec::new(),
        }
    }
}

/// Builds a [`Tree`] with non-default settings.
///
/// # Examples
///
/// ```
/// use dynatree::{ErrorKind, Tree};
/// use dynatree_testing::FakeTable;
///
/// let tree = Tree::builder(FakeTable::new()).reserved('X').max_link_hops(4).build()?;
/// assert_eq!(tree.reserved(), 'X');
///
/// let err = Tree::builder(FakeTable::new()).reserved('K').build().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidReserved);
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug)]
#[must_use]
pub struct TreeBuilder<S> {
    storage: S,
    reserved: char,
    config: Config,
}

impl<S: Storage + 'static> TreeBuilder<S> {
    /// The reserved character (default `¦`). Components and attribute names may not contain
    /// it; `K` and `C` are refused because they start the key attribute names.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::builder(FakeTable::new()).reserved('|').build()?;
    /// assert_eq!(tree.reserved(), '|');
    /// // `K` and `C` start the key attribute names: refused.
    /// let err = Tree::builder(FakeTable::new()).reserved('C').build().unwrap_err();
    /// assert_eq!(err.kind(), dynatree::ErrorKind::InvalidReserved);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn reserved(mut self, c: char) -> Self {
        self.reserved = c;
        self
    }

    /// How many links `get` follows before it fails with [`ErrorKind::LinkLoop`] (default 8).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).max_link_hops(1).build()?;
    /// tree.create_table().await?;
    /// tree.put(["target"], &V { v: 1 }).await?;
    /// tree.put_link(["one"], ["target"]).await?;
    /// tree.put_link(["two"], ["one"]).await?;
    /// assert_eq!(tree.get(["one"]).await?, Some(V { v: 1 })); // one hop
    /// let err = tree.get::<V>(["two"]).await.unwrap_err(); // two hops
    /// assert_eq!(err.kind(), dynatree::ErrorKind::LinkLoop);
    /// # Ok(()) }
    /// ```
    pub fn max_link_hops(mut self, hops: usize) -> Self {
        self.config.max_link_hops = hops;
        self
    }

    /// Strongly consistent reads for `get`, `list` and `list_items` (default: eventually
    /// consistent, half the read cost). Writes always use consistent reads where they need them.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// // A fake whose eventually consistent reads lag one write behind.
    /// let table = FakeTable::eventually_consistent(1);
    /// let tree = Tree::builder(table.clone()).consistent_reads(true).build()?;
    /// tree.create_table().await?;
    /// tree.put(["a"], &V { v: 1 }).await?;
    /// assert_eq!(tree.get(["a"]).await?, Some(V { v: 1 })); // read-your-writes
    /// # Ok(()) }
    /// ```
    pub fn consistent_reads(mut self, yes: bool) -> Self {
        self.config.consistent_reads = yes;
        self
    }

    /// The retry policy for unprocessed batch items, throttling and lost races.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{RetryPolicy, Tree};
    /// # use dynatree_testing::{Fault, FaultRule, FakeTable, Op};
    /// # use std::time::Duration;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let policy = RetryPolicy::new(3, Duration::from_millis(1), Duration::from_millis(5));
    /// let tree = Tree::builder(table.clone()).retry_policy(policy).build()?;
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::GetItem).always());
    /// table.reset_metrics();
    /// assert!(tree.get::<V>(["a"]).await.unwrap_err().is_throttled());
    /// assert_eq!(table.metrics().requests("GetItem"), 3); // tried 3 times in all
    /// # Ok(()) }
    /// ```
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.config.retry = policy;
        self
    }

    /// Billing mode used by [`Tree::create_table`] (default on-demand).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{storage::Billing, Tree};
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let billing = Billing::Provisioned { read: 5, write: 5 };
    /// Tree::builder(table.clone()).billing(billing).build()?.create_table().await?;
    /// assert_eq!(table.describe_table().await?.expect("a table").billing, billing);
    /// # Ok(()) }
    /// ```
    pub fn billing(mut self, billing: Billing) -> Self {
        self.config.billing = billing;
        self
    }

    /// How long a listing row marked for removal blocks writers before they may take the mark
    /// off (default 30 s), and how long the owner of a move, copy or subtree deletion holds it
    /// without renewing (renewed at half-time) before a [`Tree::resume`] elsewhere may take it
    /// over. Only matters when a process dies or stalls mid-way.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::builder(FakeTable::new()).removal_lease(Duration::from_secs(5)).build()?;
    /// assert!(format!("{tree:?}").contains("lease: 5s"));
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn removal_lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// The page size (DynamoDB `Limit`) of listing queries; default none (1 MB pages).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone()).page_size(2).build()?;
    /// tree.create_table().await?;
    /// for name in ["a", "b", "c", "d", "e"] {
    ///     tree.put(["dir", name], &V { v: 0 }).await?;
    /// }
    /// table.reset_metrics();
    /// let names: Vec<String> = tree.list(["dir"]).try_collect().await?;
    /// assert_eq!(names.len(), 5);
    /// assert_eq!(table.metrics().requests("Query"), 3); // pages of 2, 2 and 1
    /// # Ok(()) }
    /// ```
    pub fn page_size(mut self, n: u32) -> Self {
        self.config.page_size = Some(n.max(1));
        self
    }

    /// Propagates to `T`'s denormalized fields (`#[dynatree(from = ..)]`): writes of their
    /// sources then copy the new values to every `T` below them. A tree also registers `T`
    /// when [`Tree::repo`] is first called for it; register here when other code may write the
    /// sources first.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Forums/{forum}")]
    /// struct Forum { forum: String, name: String }
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Forums/{forum}/Threads/{thread}")]
    /// struct Thread { forum: String, thread: String, #[dynatree(from = Forum::name)] forum_name: Option<String> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).denormalized::<Thread>().build()?;
    /// tree.create_table().await?;
    /// let forum = Forum { forum: "f".into(), name: "Rust".into() };
    /// tree.repo::<Forum>().put(&forum).await?;
    /// let thread = Thread { forum: "f".into(), thread: "t".into(), forum_name: None };
    /// tree.repo::<Thread>().put(&thread).await?;
    /// tree.repo::<Forum>().put(&Forum { name: "Rust users".into(), ..forum }).await?;
    /// let read = tree.repo::<Thread>().get(&thread.key()).await?.unwrap();
    /// assert_eq!(read.forum_name.as_deref(), Some("Rust users"));
    /// # Ok(()) }
    /// ```
    pub fn denormalized<T: crate::Hierarchical>(mut self) -> Self {
        if !T::DENORMALIZED.is_empty()
            && !self
                .config
                .denormalized
                .iter()
                .any(|(t, _)| *t == T::TEMPLATE)
        {
            self.config
                .denormalized
                .push((T::TEMPLATE, T::DENORMALIZED));
        }
        self
    }

    /// Registers the secondary indexes of `T`, so that [`Tree::create_table`] creates them (or
    /// adds them to an existing table) and waits until they are active.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::storage::Storage;
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Hierarchical, Serialize, Deserialize)]
    /// #[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
    /// struct User { id: String, email: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::builder(table.clone()).indexes_of::<User>().build()?.create_table().await?;
    /// assert_eq!(table.describe_table().await?.expect("a table").indexes.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn indexes_of<T: crate::Hierarchical>(mut self) -> Self {
        if !T::INDEXES.is_empty() && !self.config.indexed.iter().any(|(t, ..)| *t == T::TEMPLATE) {
            self.config.indexed.push((
                T::TEMPLATE,
                crate::index::expected_index_attributes::<T>,
                crate::index::indexed_roots::<T>,
            ));
        }
        for ix in T::INDEXES {
            if !self.config.indexes.iter().any(|d| d.name() == ix.name()) {
                self.config.indexes.push(*ix);
            }
            if !self
                .config
                .index_templates
                .contains(&(ix.name(), T::TEMPLATE))
            {
                self.config.index_templates.push((ix.name(), T::TEMPLATE));
            }
        }
        self
    }

    /// Declares secondary index `def` without a type (what
    /// [`indexes_of`](TreeBuilder::indexes_of) does for a type's indexes), so that
    /// [`Tree::create_table`] creates it: for tools that create tables for programs whose
    /// types they do not know, like the `dynatree` command line. Values are indexed by typed
    /// writes of the types that declare it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{keys::IndexDef, Tree};
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone())
    ///     .index(IndexDef::new("by_email", false))
    ///     .build()?;
    /// tree.create_table().await?;
    /// let indexes = table.describe_table().await?.expect("a table").indexes;
    /// assert_eq!(indexes[0].0, "by_email");
    /// # Ok(()) }
    /// ```
    pub fn index(mut self, def: crate::keys::IndexDef) -> Self {
        if !self.config.indexes.iter().any(|d| d.name() == def.name()) {
            self.config.indexes.push(def);
        }
        self
    }

    /// Whether the tree checks its table before its first request (default: yes): one
    /// DescribeTable, once per tree (and its clones and scopes), refusing a table this tree
    /// cannot use with [`ErrorKind::TableMismatch`] before anything is written (see
    /// [`Tree::verify`]). Turn it off only for a role that may not call DescribeTable (the
    /// policies of [`iam`](crate::iam) allow it) and a table you know is right.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// let tree = Tree::builder(table.clone()).verify_table(false).build()?;
    /// # #[derive(serde::Deserialize)] struct V { v: u8 }
    /// table.reset_metrics();
    /// assert!(tree.get::<V>(["a"]).await?.is_none());
    /// assert_eq!(table.metrics().requests("DescribeTable"), 0);
    /// # Ok(()) }
    /// ```
    pub fn verify_table(mut self, verify: bool) -> Self {
        self.config.verify_table = verify;
        self
    }

    /// Keeps a path index: every object row also carries its first `depth` components (the
    /// index's hash key) and its full path (range key), in a global secondary index named
    /// [`PATH_INDEX`] that [`Tree::create_table`] creates. Then [`Tree::descendants`] of any
    /// prefix with at least `depth` components is one paged Query, however many directories
    /// it spans. Choose `depth` so that one index partition is one tenant (e.g. 2 for
    /// `Accounts/{id}/…`), not the whole tree. Index reads are eventually consistent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone()).path_index(1).build()?;
    /// tree.create_table().await?; // with the index
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d", "e", "f"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// table.reset_metrics();
    /// let all: Vec<_> = tree.descendants(["a"]).items().try_collect().await?;
    /// assert_eq!(all.len(), 3);
    /// assert_eq!(table.metrics().total_requests(), 1); // one Query, however deep
    /// # Ok(()) }
    /// ```
    pub fn path_index(mut self, depth: usize) -> Self {
        self.config.path_index = Some(depth.max(1));
        self
    }

    /// Whether [`Tree::create_table`] enables DynamoDB's time to live on the expiry attribute
    /// that `#[dynatree(ttl)]` fields are copied to (default: no). See
    /// [`Expiry`](crate::Expiry) and the [`expiry` notes](crate::Expiry#time-to-live).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::builder(table.clone()).time_to_live(true).build()?.create_table().await?;
    /// use dynatree::storage::Storage;
    /// assert_eq!(table.ttl_attribute().await?.as_deref(), Some("¦ttl"));
    /// # Ok(()) }
    /// ```
    pub fn time_to_live(mut self, enable: bool) -> Self {
        self.config.time_to_live = enable;
        self
    }

    /// Who propagates denormalized fields: the writes themselves (the default) or the
    /// table's stream; see [`Propagation`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{denorm::Propagation, Tree};
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone()).propagation(Propagation::Stream).build()?;
    /// tree.create_table().await?; // enables the stream
    /// # Ok(()) }
    /// ```
    pub fn propagation(mut self, propagation: Propagation) -> Self {
        self.config.propagation = propagation;
        self
    }

    /// Inline propagation copies a source to at most this many targets before the write
    /// returns (default 1,000); a source with more targets below it is propagated by a task in
    /// the background, recorded as an intent first so that [`Tree::resume`] finishes it if the
    /// process stops.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// let tree = Tree::builder(FakeTable::new()).inline_limit(10_000).build()?;
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn inline_limit(mut self, targets: usize) -> Self {
        self.config.inline_limit = targets;
        self
    }

    /// Fenced puts (default off): a put is plain PutItems, never a transaction, at the price
    /// the Go library pays or less: an overwrite 1 write unit per KB, a new top-level name 2,
    /// a new name under a known parent 5 (a 2-item transaction creating its listing row, then
    /// the object's PutItem), at any depth.
    ///
    /// The price: every removal of a listing row leaves a **fence row** at the object's key
    /// (`SC fence` and `SC ttl` = an expiry one hour later; the table's time-to-live deletes
    /// it), so that a process that verified the listing row less than 30 seconds earlier can
    /// write the object with one PutItem conditional on no fence (the argument is in
    /// [`consistency`](crate::consistency), "Fenced puts"). dynatree's readers, checks,
    /// exports and streams treat a fence as no object; **the Go library's `Get` returns it as
    /// an empty object** until it is deleted. Every dynatree process writing the table must use
    /// the same mode.
    ///
    /// Precisely, the Go library's `Get` then returns an empty object at:
    /// - a deleted path, and every old path of a moved or deleted subtree;
    /// - a path that **never held an object** whose listing row went: a directory pruned when
    ///   its last child was deleted (`put a/b`, `delete a/b` leaves a fence at `a`), a
    ///   [`delete_node`](Tree::delete_node) of a childless node without an object, the nodes of
    ///   a moved or deleted subtree that only had children. This fence is needed as much as the
    ///   others: a listing row that names nothing is what a put of a new name leaves between
    ///   its two requests, and whoever removes the row cannot tell whether such a put is under
    ///   way. A [`delete`](Tree::delete) of a path without an object whose node keeps its
    ///   children writes none (the listing row stays);
    /// - the target of a link into a deleted path, or into a subtree moved without
    ///   [`LinkPolicy::Rewrite`] (or by a `Rewrite` move until its rewrite): Go follows the
    ///   link to the fence; dynatree reads nothing there, and [`Tree::check`] reports the link
    ///   as dangling.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone()).fenced_puts(true).build()?;
    /// tree.create_table().await?;
    /// let before = table.metrics().write_units();
    /// tree.put(["a"], &V { v: 1 }).await?; // its listing row, then the object
    /// assert_eq!(table.metrics().write_units() - before, 2.0);
    /// tree.delete(["a"]).await?; // leaves a fence, which no reader sees
    /// assert_eq!(tree.get::<V>(["a"]).await?, None);
    /// # Ok(()) }
    /// ```
    pub fn fenced_puts(mut self, on: bool) -> Self {
        self.config.fenced_puts = on;
        self
    }

    /// How long [`Tree::create_table`] waits for the table to become active (default 5 min).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{ErrorKind, Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # use std::time::Duration;
    /// # #[derive(Hierarchical, Serialize, Deserialize)]
    /// # #[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
    /// # struct User { id: String, email: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// // Adding an index to the table takes a while: no wait is not enough.
    /// let impatient = Tree::builder(table.clone()).indexes_of::<User>().table_wait(Duration::ZERO).build()?;
    /// assert_eq!(impatient.create_table().await.unwrap_err().kind(), ErrorKind::Backend);
    /// let patient = Tree::builder(table.clone()).indexes_of::<User>().table_wait(Duration::from_secs(60)).build()?;
    /// patient.create_table().await?;
    /// # Ok(()) }
    /// ```
    pub fn table_wait(mut self, wait: Duration) -> Self {
        self.config.table_wait = wait;
        self
    }

    /// The tree.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, Tree};
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree: Tree = Tree::builder(FakeTable::new()).max_link_hops(2).build()?;
    /// assert_eq!(tree.reserved(), '¦');
    /// let err = Tree::builder(FakeTable::new()).reserved('K').build().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidReserved);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidReserved`] if the reserved character cannot be used.
    pub fn build(self) -> Result<Tree> {
        Ok(Tree::from_parts(
            SharedStorage::new(self.storage),
            Layout::new(self.reserved)?,
            self.config,
        ))
    }

    /// The tree, keeping the backend's type: `Tree<S>` calls the backend without boxing its
    /// futures. Everything else is the same as [`build`](TreeBuilder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree: Tree<FakeTable> = Tree::builder(FakeTable::new()).build_static()?;
    /// assert_eq!(tree.storage().metrics().total_requests(), 0);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`build`](TreeBuilder::build).
    pub fn build_static(self) -> Result<Tree<S>> {
        Ok(Tree::from_parts(
            self.storage,
            Layout::new(self.reserved)?,
            self.config,
        ))
    }
}

/// One child of a listing with its object, as [`Tree::list_items`] yields it (see its example).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<T> {
    /// The child's name (its last path component).
    pub name: String,
    /// The child's object, links followed; `None` for a name that only has children (or a
    /// link whose target is missing).
    pub value: Option<T>,
}

impl Tree {
    /// A tree with the default settings (reserved character `¦`) over any backend, held as a
    /// [`SharedStorage`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::new(FakeTable::new());
    /// assert_eq!(tree.reserved(), '¦');
    /// ```
    pub fn new<S: Storage + 'static>(storage: S) -> Tree {
        Tree::from_parts(
            SharedStorage::new(storage),
            Layout::new(DEFAULT_RESERVED).expect("the default reserved character is valid"),
            Config::default(),
        )
    }

    /// A builder for a tree with other settings ([`TreeBuilder::build`] gives a `Tree`,
    /// [`TreeBuilder::build_static`] a `Tree<S>`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::builder(FakeTable::new()).reserved('|').build()?;
    /// assert_eq!(tree.reserved(), '|');
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn builder<S: Storage + 'static>(storage: S) -> TreeBuilder<S> {
        TreeBuilder {
            storage,
            reserved: DEFAULT_RESERVED,
            config: Config::default(),
        }
    }
}

/// A transaction cancelled only because another transaction was in flight on its items (no
/// condition failed): sending it again is safe.
pub(crate) fn conflict_only(e: &Error) -> bool {
    let reasons = e.cancellation_reasons();
    e.kind() == ErrorKind::TransactionCanceled
        && reasons.iter().any(|r| r.code() == "TransactionConflict")
        && !reasons
            .iter()
            .any(crate::error::CancellationReason::is_condition_failed)
}

/// The tree's backend as its operations see it: an owned handle (streams keep it) that sends
/// every single request under the tree's [`RetryPolicy`], resending it while DynamoDB throttles
/// it or refuses it for a transaction in flight on its item (`TransactionConflictException`:
/// nothing was applied). A transaction cancelled for a conflict is not resent here: its caller
/// looks at the rows again. That is the only retry loop around a request (the SDK's own retries are off, see
/// [`DynamoDbTable`](crate::DynamoDbTable)); batch requests are passed through because their
/// callers ([`get_all`], [`write_all`](crate::storage::write_all)) run the same budget over
/// throttling and unprocessed items together, and the move protocol's transaction loop runs it
/// itself.
pub(crate) struct Io<S>(Tree<S>);

impl<S> Clone for Io<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S: Storage + 'static> Storage for Io<S> {
    async fn get_item(&self, key: &Key, consistent: bool) -> Result<Option<Item>> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().get_item(key, consistent))
            .await
    }
    async fn put_item(&self, item: Item, condition: crate::storage::Condition) -> Result<()> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().put_item(item.clone(), condition.clone()))
            .await
    }
    async fn delete_item(&self, key: &Key, condition: crate::storage::Condition) -> Result<()> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().delete_item(key, condition.clone()))
            .await
    }
    async fn query_page(&self, query: &Query, start: Option<Key>) -> Result<crate::storage::Page> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().query_page(query, start.clone()))
            .await
    }
    async fn scan_page(
        &self,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> Result<crate::storage::Page> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().scan_page(limit, start.clone()))
            .await
    }
    async fn transact_get(&self, keys: Vec<Key>) -> Result<Vec<Option<Item>>> {
        self.0.ensure_verified().await?;
        // A read: a cancellation for a conflict or throttling is as safe to resend as a
        // throttled request.
        self.policy()
            .retry_if(
                |e| {
                    matches!(e.kind(), ErrorKind::Throttled | ErrorKind::Conflict)
                        || (e.kind() == ErrorKind::TransactionCanceled && e.is_retryable())
                },
                move || self.raw().transact_get(keys.clone()),
            )
            .await
    }
    async fn scan_segment_page(
        &self,
        segment: crate::storage::ScanSegment,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> Result<crate::storage::Page> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().scan_segment_page(segment, limit, start.clone()))
            .await
    }
    async fn batch_get(
        &self,
        keys: Vec<Key>,
        consistent: bool,
    ) -> Result<crate::storage::BatchGetOutput> {
        self.0.ensure_verified().await?;
        self.raw().batch_get(keys, consistent).await
    }
    async fn get_item_projected(
        &self,
        key: &Key,
        consistent: bool,
        projection: &[String],
    ) -> Result<Option<Item>> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().get_item_projected(key, consistent, projection))
            .await
    }
    async fn batch_get_projected(
        &self,
        keys: Vec<Key>,
        consistent: bool,
        projection: &[String],
    ) -> Result<crate::storage::BatchGetOutput> {
        self.0.ensure_verified().await?;
        self.raw()
            .batch_get_projected(keys, consistent, projection)
            .await
    }
    async fn batch_write(
        &self,
        requests: Vec<crate::storage::WriteRequest>,
    ) -> Result<Vec<crate::storage::WriteRequest>> {
        self.0.ensure_verified().await?;
        self.raw().batch_write(requests).await
    }
    async fn transact_write(&self, actions: Vec<crate::storage::TransactAction>) -> Result<()> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().transact_write(actions.clone()))
            .await
    }
    fn create_table(
        &self,
        billing: Billing,
        indexes: &[crate::storage::IndexSpec],
    ) -> impl Future<Output = Result<bool>> + Send {
        self.raw().create_table(billing, indexes)
    }
    fn add_index(
        &self,
        billing: Billing,
        index: &crate::storage::IndexSpec,
    ) -> impl Future<Output = Result<()>> + Send {
        self.raw().add_index(billing, index)
    }
    async fn query_index_page(
        &self,
        query: &crate::storage::IndexQuery,
        start: Option<Item>,
    ) -> Result<crate::storage::IndexPage> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().query_index_page(query, start.clone()))
            .await
    }
    fn describe_table(
        &self,
    ) -> impl Future<Output = Result<Option<crate::storage::TableDescription>>> + Send {
        self.policy()
            .retry_transient(move || self.raw().describe_table())
    }
    async fn update_item(
        &self,
        key: &Key,
        actions: Vec<crate::storage::UpdateAction>,
        condition: crate::storage::Condition,
    ) -> Result<Item> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || {
                self.raw()
                    .update_item(key, actions.clone(), condition.clone())
            })
            .await
    }
    async fn transact_write_idempotent(
        &self,
        actions: Vec<crate::storage::TransactAction>,
        token: &str,
    ) -> Result<()> {
        self.0.ensure_verified().await?;
        self.policy()
            .retry_transient(move || self.raw().transact_write_idempotent(actions.clone(), token))
            .await
    }
    fn enable_ttl(&self, attribute: &str) -> impl Future<Output = Result<()>> + Send {
        self.policy()
            .retry_transient(move || self.raw().enable_ttl(attribute))
    }
    fn ttl_attribute(&self) -> impl Future<Output = Result<Option<String>>> + Send {
        self.policy()
            .retry_transient(move || self.raw().ttl_attribute())
    }
    fn enable_stream(&self) -> impl Future<Output = Result<()>> + Send {
        self.policy()
            .retry_transient(move || self.raw().enable_stream())
    }
}

impl<S> Io<S> {
    fn raw(&self) -> &S {
        &self.0.inner.storage
    }

    fn policy(&self) -> &RetryPolicy {
        &self.0.inner.config.retry
    }
}

impl<S> Tree<S> {
    /// The denormalized targets this tree knows (the stream processor reads them).
    pub(crate) fn denorm_targets(&self) -> &denorm::Targets {
        &self.inner.targets
    }

    /// The backend, each request under the retry policy (see [`Io`]); owned, so streams
    /// can keep it.
    pub(crate) fn io(&self) -> Io<S> {
        Io(self.clone())
    }

    fn from_parts(storage: S, layout: Layout, config: Config) -> Self {
        let targets = denorm::Targets::default();
        for (template, defs) in &config.denormalized {
            targets.add(template, defs);
        }
        Tree {
            inner: Arc::new(Inner {
                storage,
                layout,
                config,
                known: KnownRows::default(),
                targets,
                verified: tokio::sync::OnceCell::new(),
            }),
            root: None,
            relative: false,
            observer: None,
        }
    }

    /// This handle, reporting how far the subtree operations run through it have come
    /// (moves, copies, subtree deletions, and what [`resume`](Tree::resume) finishes): `f` is
    /// called after each node walked and each slice written (see [`OpProgress`]). What a
    /// command line shows as a progress bar. Clones of the returned handle report too; the
    /// original does not.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # use std::sync::{Arc, Mutex};
    /// use dynatree::ops::Phase;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// for i in 0..3 {
    ///     tree.put(["org", "eng", &i.to_string()], &V { v: 1 }).await?;
    /// }
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// let observed = tree.on_progress(move |p| {
    ///     log.lock().unwrap().push((p.phase, p.done, p.total));
    /// });
    /// observed.move_subtree(["org", "eng"], ["org", "tech"]).await?;
    /// let seen = seen.lock().unwrap();
    /// // Two levels (eng, then its three children): four nodes in each phase.
    /// assert!(seen.contains(&(Phase::Copy, 4, Some(4))));
    /// assert!(seen.contains(&(Phase::Delete, 4, Some(4))));
    /// # Ok(()) }
    /// ```
    pub fn on_progress(&self, f: impl Fn(&OpProgress) + Send + Sync + 'static) -> Tree<S> {
        let mut tree = self.clone();
        tree.observer = Some(Arc::new(f));
        tree
    }

    /// Tells the observer, if any, how far `op` has come in `phase`.
    pub(crate) fn tell(&self, op: Operation, phase: Phase, done: usize, total: Option<usize>) {
        if let Some(f) = &self.observer {
            f(&OpProgress {
                op,
                phase,
                done: done as u64,
                total: total.map(|t| t as u64),
            });
        }
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// The storage backend (a [`SharedStorage`] for a `Tree`; use
    /// [`SharedStorage::downcast_ref`] to reach the concrete one).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::new(FakeTable::new());
    /// let fake: &FakeTable = tree.storage().downcast_ref().expect("a fake table");
    /// assert_eq!(fake.metrics().total_requests(), 0);
    /// ```
    pub fn storage(&self) -> &S {
        &self.inner.storage
    }

    /// Who propagates denormalized fields (see [`Propagation`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{denorm::Propagation, Tree};
    /// use dynatree_testing::FakeTable;
    ///
    /// assert_eq!(Tree::new(FakeTable::new()).propagation(), Propagation::Inline);
    /// ```
    pub fn propagation(&self) -> Propagation {
        self.inner.config.propagation
    }

    /// The reserved character.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// assert_eq!(Tree::new(FakeTable::new()).reserved(), '¦'); // the default
    /// let tree = Tree::builder(FakeTable::new()).reserved('|').build()?;
    /// assert_eq!(tree.reserved(), '|');
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn reserved(&self) -> char {
        self.inner.layout.reserved()
    }

    /// Creates the table (hash key `Key`, range key `Child`, both strings) if it does not exist,
    /// and waits until it is active. If it exists, checks its key schema.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.create_table().await?; // again: nothing to do
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::TableMismatch`] if an existing table has another key schema;
    /// [`ErrorKind::Backend`] if it is not active within the wait (see
    /// [`TreeBuilder::table_wait`]); any backend error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: calling it again finishes the job.
    pub async fn create_table(&self) -> Result<()> {
        let span = tracing::debug_span!("dynatree.create_table");
        async {
            let specs: Vec<crate::storage::IndexSpec> = self
                .inner
                .config
                .indexes
                .iter()
                .map(|ix| ix.spec(self.inner.layout.reserved()))
                .chain(self.path_index_spec())
                .collect();
            // `Ok(false)` when it exists already: its schema and indexes are checked below.
            self.inner.storage
                .create_table(self.inner.config.billing, &specs)
                .await?;
            let deadline = tokio::time::Instant::now() + self.inner.config.table_wait;
            let mut retry = 0;
            loop {
                let description = self.io().describe_table().await?;
                // An existing table lacking some of our indexes: add one, once the table and
                // every index it has are active (DynamoDB builds one index at a time per
                // table and refuses a second creation meanwhile), then wait again.
                if let Some(d) = &description
                    && d.status == TableStatus::Active
                    && d.has_tree_schema()
                    && d.indexes.iter().all(|(_, st)| *st == TableStatus::Active)
                    && let Some(missing) = specs
                        .iter()
                        .find(|s| !d.indexes.iter().any(|(n, _)| *n == s.name))
                {
                    match self.inner.storage.add_index(self.inner.config.billing, missing).await {
                        // Another index is still being built: wait below and try again.
                        Err(e) if matches!(e.kind(), ErrorKind::Throttled | ErrorKind::LimitExceeded) => {}
                        Err(e) => return Err(e),
                        Ok(()) => {}
                    }
                }
                let indexes_ready = |d: &crate::storage::TableDescription| {
                    specs.iter().all(|s| {
                        d.indexes
                            .iter()
                            .any(|(n, st)| *n == s.name && *st == TableStatus::Active)
                    })
                };
                match description {
                    Some(d) if !d.has_tree_schema() => {
                        return Err(Error::new(
                            ErrorKind::TableMismatch,
                            format!(
                                "expected hash key `{HASH_KEY}` (S) and range key `{RANGE_KEY}` (S), found {:?} and {:?}",
                                d.hash_key, d.range_key
                            ),
                        ));
                    }
                    Some(d) if d.status == TableStatus::Active && indexes_ready(&d) => {
                        if self.inner.config.time_to_live {
                            self.io().enable_ttl(&self.inner.layout.ttl_attr()).await?;
                        }
                        if self.inner.config.propagation == Propagation::Stream {
                            self.io().enable_stream().await?;
                        }
                        let settings = TableSettings::record(
                            &self.inner.storage,
                            &self.settings(),
                            &self.inner.config.retry,
                        )
                        .await?;
                        self.check_table(&d, Some(&settings))?;
                        // Checked: the first request need not describe the table again.
                        let _ = self.inner.verified.set(());
                        return Ok(());
                    }
                    // Creating, or not visible yet: wait.
                    _ => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(Error::new(
                        ErrorKind::Backend,
                        "table did not become active in time",
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100 * (1 << retry.min(4)))).await;
                retry += 1;
            }
        }
        .instrument(span)
        .await
    }

    /// Checks that this tree can use its table, as it does once before its first request:
    /// one DescribeTable (and, for a tree with a path index, a read of the table's
    /// [`TableSettings`]). Refused with [`ErrorKind::TableMismatch`]:
    ///
    /// - a key schema other than hash key `Key` (S) and range key `Child` (S), such as a
    ///   table with a hash key `Key` and no range key, where a second top-level object would
    ///   silently replace the first;
    /// - a table with the path index ([`PATH_INDEX`]) for a tree built without
    ///   [`path_index`](TreeBuilder::path_index), whose writes would leave objects out of it;
    ///   a tree with a path index on a table without one, or with another depth than the
    ///   table's settings record;
    /// - a secondary index a registered type declares that the table lacks.
    ///
    /// [`create_table`](Tree::create_table) makes the same checks (and adds what is missing).
    /// Once a check has passed, the tree (with its clones and scopes) does not check again.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, Tree};
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::builder(table.clone()).path_index(2).build()?.create_table().await?;
    /// Tree::builder(table.clone()).path_index(2).build()?.verify().await?;
    /// // A tree that would write objects without their path index values:
    /// let plain = Tree::new(table.clone());
    /// assert_eq!(plain.verify().await.unwrap_err().kind(), ErrorKind::TableMismatch);
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// assert_eq!(plain.put(["a"], &V { v: 1 }).await.unwrap_err().kind(), ErrorKind::TableMismatch);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::TableNotFound`] if the table does not exist; [`ErrorKind::TableMismatch`]
    /// as above; the backend's errors (DescribeTable needs `dynamodb:DescribeTable`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn verify(&self) -> Result<()> {
        let span = tracing::debug_span!("dynatree.verify");
        async {
            let retry = &self.inner.config.retry;
            let description = retry
                .retry_transient(|| self.inner.storage.describe_table())
                .await?
                .ok_or_else(|| Error::new(ErrorKind::TableNotFound, "the table does not exist"))?;
            // The settings say the path index's depth: needed to compare a tree's depth, and
            // for a tree without the index, to say which depth to build it with.
            let wants = self.inner.config.path_index.is_some();
            let has = description.indexes.iter().any(|(n, _)| n == PATH_INDEX);
            let settings = if description.has_tree_schema() && (wants || has) {
                let read = retry
                    .retry_transient(|| {
                        TableSettings::read(&self.inner.storage, self.inner.layout.reserved())
                    })
                    .await;
                if wants { read? } else { read.ok().flatten() }
            } else {
                None
            };
            self.check_table(&description, settings.as_ref())?;
            let _ = self.inner.verified.set(());
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// [`verify`](Tree::verify), unless it has passed already or is turned off.
    pub(crate) async fn ensure_verified(&self) -> Result<()> {
        if !self.inner.config.verify_table || self.inner.verified.initialized() {
            return Ok(());
        }
        self.verify().await
    }

    /// What [`create_table`](Tree::create_table) records about this tree.
    fn settings(&self) -> TableSettings {
        let mut s = TableSettings::new(self.inner.layout.reserved());
        s.path_index = self.inner.config.path_index;
        s.indexes = self
            .inner
            .config
            .indexes
            .iter()
            .map(|ix| {
                let templates = self
                    .inner
                    .config
                    .index_templates
                    .iter()
                    .filter(|(name, _)| *name == ix.name())
                    .map(|(_, t)| *t);
                IndexSettings::new(ix.name(), ix.has_range(), templates)
            })
            .collect();
        s
    }

    /// Why this tree cannot use a table described by `d` (with `settings`, when read).
    fn check_table(
        &self,
        d: &crate::storage::TableDescription,
        settings: Option<&TableSettings>,
    ) -> Result<()> {
        let mismatch = |m: String| Err(Error::new(ErrorKind::TableMismatch, m));
        if !d.has_tree_schema() {
            let range = match &d.range_key {
                Some((name, ty)) => format!("range key `{name}` ({ty})"),
                None => "no range key".to_owned(),
            };
            return mismatch(format!(
                "not a dynatree table: expected hash key `{HASH_KEY}` (S) and range key `{RANGE_KEY}` (S), found hash key `{}` ({}) and {range}",
                d.hash_key.0, d.hash_key.1
            ));
        }
        let has = |name: &str| d.indexes.iter().any(|(n, _)| n == name);
        match (self.inner.config.path_index, has(PATH_INDEX)) {
            (None, true) => {
                let depth = settings
                    .and_then(|s| s.path_index)
                    .map_or_else(|| "depth".to_owned(), |d| d.to_string());
                return mismatch(format!(
                    "the table has the path index `{PATH_INDEX}`, which this tree's writes would skip: build the tree with `path_index({depth})`"
                ));
            }
            (Some(_), false) => {
                return mismatch(format!(
                    "this tree keeps a path index but the table has no index `{PATH_INDEX}`: run `create_table` to add it"
                ));
            }
            (Some(mine), true) => {
                if let Some(theirs) = settings.and_then(|s| s.path_index)
                    && theirs != mine
                {
                    return mismatch(format!(
                        "the table's path index has depth {theirs}, this tree's has depth {mine}: build the tree with `path_index({theirs})`"
                    ));
                }
            }
            (None, false) => {}
        }
        if let Some(ix) = self.inner.config.indexes.iter().find(|ix| !has(ix.name())) {
            return mismatch(format!(
                "the table has no secondary index `{}`, which this tree's types declare: run `create_table` to add it",
                ix.name()
            ));
        }
        Ok(())
    }

    /// Stores `value` (any type that serializes to a map) at `path`, creating the listing rows
    /// of its ancestors as needed.
    ///
    /// A small object at any depth whose ancestors exist costs one TransactWriteItems request;
    /// see [`consistency`](crate::consistency).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["Accounts", "1"], &V { v: 1 }).await?;
    /// tree.put(["Accounts", "1"], &V { v: 2 }).await?; // replaces
    /// assert_eq!(tree.get(["Accounts", "1"]).await?, Some(V { v: 2 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`], [`ErrorKind::InvalidAttribute`] (a field named `Key`,
    /// `Child`, or starting with the reserved character), [`ErrorKind::ItemTooLarge`],
    /// [`ErrorKind::Serialization`]: nothing was written. [`ErrorKind::Conflict`] if concurrent
    /// removals kept winning; backend errors.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have written the object; every state it leaves keeps
    /// every object reachable, and calling `put` again completes it.
    pub async fn put<T: Serialize + ?Sized>(&self, path: impl IntoPath, value: &T) -> Result<()> {
        let path = self.enter(path)?;
        let span = tracing::debug_span!("dynatree.put", path = %path);
        async {
            self.refuse_root(&path, "put")?;
            let mut row = self.object_row_for(&path, value)?;
            if !self.source_at(&path) {
                return self
                    .write_object(&path, row, &crate::storage::Condition::Always)
                    .await;
            }
            // A source of denormalized fields: stamped, fenced and propagated as a typed put.
            row.insert(
                self.inner.layout.source_version_attr(),
                crate::item::Value::N(denorm::next_version().to_string()),
            );
            let guard = self.before_source_write_at(&path).await?;
            if let Err(e) = self
                .write_fenced(&path, &mut row, &crate::storage::Condition::Always)
                .await
            {
                self.source_write_failed(guard, &e).await;
                return Err(e);
            }
            self.after_source_write(guard, &path, Some(&row)).await
        }
        .instrument(span)
        .await
    }

    /// Stores a symbolic link at `path` pointing at `target` (which need not exist).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["Accounts", "1"], &V { v: 1 }).await?;
    /// tree.put_link(["ByEmail", "a@example.com"], ["Accounts", "1"]).await?;
    /// assert_eq!(tree.get(["ByEmail", "a@example.com"]).await?, Some(V { v: 1 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`put`](Tree::put), for either path.
    ///
    /// # Cancel safety
    ///
    /// As [`put`](Tree::put).
    pub async fn put_link(&self, path: impl IntoPath, target: impl IntoPath) -> Result<()> {
        let path = self.enter(path)?;
        let target = self.enter(target)?;
        let span = tracing::debug_span!("dynatree.put_link", path = %path, target = %target);
        async {
            self.refuse_root(&path, "put_link")?;
            self.inner.layout.check_object_path(&path)?;
            self.inner.layout.check_object_path(&target)?;
            let row = self.link_row_for(&path, &target)?;
            if !self.source_at(&path) {
                return self
                    .write_object(&path, row, &crate::storage::Condition::Always)
                    .await;
            }
            // A link replacing a source of denormalized fields removes the source: as a delete
            // (tombstone, pinned versions, copies cleared).
            let guard = self.before_source_write_at(&path).await?;
            let result = self.replace_source_with(&path, row).await;
            match result {
                Ok(()) => self.after_source_write(guard, &path, None).await,
                Err(e) => {
                    self.source_write_failed(guard, &e).await;
                    Err(e)
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Reads the object at `path`, following links (at most
    /// [`max_link_hops`](TreeBuilder::max_link_hops)). `None` if nothing is there, or a link's
    /// target is missing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert_eq!(tree.get::<V>(["missing"]).await?, None);
    /// tree.put_link(["a"], ["b"]).await?;
    /// tree.put_link(["b"], ["a"]).await?;
    /// assert!(tree.get::<V>(["a"]).await.unwrap_err().is_link_loop());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`]; [`ErrorKind::LinkLoop`] on a cycle or too many hops;
    /// [`ErrorKind::Serialization`] if the stored attributes do not fit `T`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn get<T: DeserializeOwned>(&self, path: impl IntoPath) -> Result<Option<T>> {
        let path = self.enter(path)?;
        let span = tracing::debug_span!("dynatree.get", path = %path);
        async {
            self.inner.layout.check_object_path(&path)?;
            match self.resolve(&path).await? {
                Some(item) => self.to_value(item).map(Some),
                None => Ok(None),
            }
        }
        .instrument(span)
        .await
    }

    /// The target of the link at `path`, without following it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put_link(["l"], ["x", "y"]).await?;
    /// assert_eq!(tree.read_link(["l"]).await?, dynatree::Path::new(["x", "y"])?);
    /// assert!(tree.read_link(["nothing"]).await.unwrap_err().is_not_found());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotFound`] if nothing is at `path` (a fence left by a removal with
    /// [`fenced_puts`](TreeBuilder::fenced_puts) is nothing); [`ErrorKind::NotALink`] if an
    /// object that is not a link is there; [`ErrorKind::InvalidPath`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn read_link(&self, path: impl IntoPath) -> Result<Path> {
        let path = self.enter(path)?;
        let span = tracing::debug_span!("dynatree.read_link", path = %path);
        async {
            self.inner.layout.check_object_path(&path)?;
            let item = self
                .io()
                .get_item(
                    &self.inner.layout.object_key(&path),
                    self.inner.config.consistent_reads,
                )
                .await?
                // A fence (fenced puts) or an expired row is no object, as for `get`.
                .filter(|i| !self.inner.layout.is_absent(i, crate::expiry::now_secs()))
                .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("nothing at {path}")))?;
            match item.get_s(self.inner.layout.link_attr()) {
                Some(t) => self.leave(self.link_target(&path, t)?),
                None => Err(Error::new(
                    ErrorKind::NotALink,
                    format!("the object at {path} is not a link"),
                )),
            }
        }
        .instrument(span)
        .await
    }

    /// The names of the children of `prefix` (the root: an empty path), in DynamoDB's order
    /// (UTF-8 bytes), lazily: one Query per page, sent only as the stream is polled, so
    /// dropping it early stops the reads.
    ///
    /// An invalid prefix yields one error and nothing is sent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// tree.put(["b"], &V { v: 1 }).await?;
    /// tree.put(["a", "x"], &V { v: 2 }).await?;
    /// let root: Vec<String> = tree.list(dynatree::Path::root()).try_collect().await?;
    /// assert_eq!(root, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the stream holds no partial state between pages.
    pub fn list(
        &self,
        prefix: impl IntoPath,
    ) -> futures::stream::BoxStream<'static, Result<String>> {
        let query = self
            .enter(prefix)
            .and_then(|p| Ok(self.inner.layout.check_listable(&p)?.then_some(p)));
        Box::pin(match query {
            Ok(Some(dir)) => self.list_names(&dir, false).left_stream(),
            // `Ok(None)`: a listing key over DynamoDB's limit holds no children; send nothing.
            other => futures::stream::iter(other.err().map(Err)).right_stream(),
        })
    }

    /// The children of `prefix` with their objects: per page of names, one Query plus one
    /// BatchGetItem per 100 names (and one more per round of links to follow), never one
    /// GetItem per child.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["d", "a"], &V { v: 1 }).await?;
    /// tree.put(["d", "b", "c"], &V { v: 2 }).await?;
    /// let entries: Vec<dynatree::Entry<V>> = tree.list_items(["d"]).try_collect().await?;
    /// assert_eq!(entries[0].value, Some(V { v: 1 }));
    /// assert_eq!(entries[1].name, "b");
    /// assert_eq!(entries[1].value, None); // only children
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Each item is an error on an invalid prefix, a backend failure, a link loop, or
    /// attributes that do not fit `T`; the stream ends after the first error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn list_items<T: DeserializeOwned + Send + 'static>(
        &self,
        prefix: impl IntoPath,
    ) -> futures::stream::BoxStream<'static, Result<Entry<T>>> {
        let checked = self
            .enter(prefix)
            .and_then(|p| Ok(self.inner.layout.check_listable(&p)?.then_some(p)));
        Box::pin(match checked {
            Ok(Some(prefix)) => {
                let query = self.listing_query(&prefix);
                let tree = self.clone();
                query_pages(self.io(), query, None)
                    .and_then(move |page| {
                        let prefix = prefix.clone();
                        let tree = tree.clone();
                        async move { tree.entries_for(&prefix, page.items).await }
                    })
                    .map_ok(|entries| futures::stream::iter(entries.into_iter().map(Ok)))
                    .try_flatten()
                    .left_stream()
            }
            // `Ok(None)`: a listing key over DynamoDB's limit holds no children; send nothing.
            other => futures::stream::iter(other.err().map(Err)).right_stream(),
        })
    }

    /// Every row of the table, raw, lazily (a Scan). For debugging, export and tests.
    ///
    /// Through a [scope](Tree::scope) only the rows of the scope come out (its root's own
    /// object row and every row under it; keys as stored, absolute), but the Scan still reads
    /// the whole table.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["a", "b"], &V { v: 1 }).await?;
    /// let rows: Vec<dynatree::storage::Item> = tree.scan().try_collect().await?;
    /// assert_eq!(rows.len(), 3); // two listing rows and the object row
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn scan(&self) -> futures::stream::BoxStream<'static, Result<Item>> {
        let tree = self.clone();
        Box::pin(
            scan_pages(self.io(), None)
                .map_ok(move |p| {
                    let rows: Vec<Item> = p
                        .items
                        .into_iter()
                        .filter(|i| tree.row_in_scope(i))
                        .collect();
                    futures::stream::iter(rows.into_iter().map(Ok))
                })
                .try_flatten(),
        )
    }

    /// The checked object row for `value` at `path`.
    pub(crate) fn object_row_for<T: Serialize + ?Sized>(
        &self,
        path: &Path,
        value: &T,
    ) -> Result<Item> {
        self.inner.layout.check_object_path(path)?;
        let attrs = Item::from_serialize(value)?;
        self.inner.layout.check_user_item(&attrs)?;
        let mut row = self.inner.layout.object_row(path, attrs)?;
        self.add_path_index(path, &mut row)?;
        Ok(row)
    }

    /// The checked link row at `path` pointing at `target` (path-index attributes included).
    pub(crate) fn link_row_for(&self, path: &Path, target: &Path) -> Result<Item> {
        self.inner.layout.check_object_path(target)?;
        let mut row = self.inner.layout.link_row(path, target)?;
        self.add_path_index(path, &mut row)?;
        Ok(row)
    }

    /// The names under `dir`, unchecked; strongly consistent if asked, else with the tree's
    /// read consistency.
    pub(crate) fn list_names(
        &self,
        dir: &Path,
        consistent: bool,
    ) -> impl Stream<Item = Result<String>> + Send + use<S> {
        let query = self.listing_query(dir);
        let consistent = consistent || query.consistent;
        query_pages(self.io(), query.consistent(consistent), None)
            .map_ok(|page| {
                futures::stream::iter(
                    page.items
                        .into_iter()
                        .filter_map(|i| i.get_s(RANGE_KEY).map(str::to_owned))
                        .map(Ok),
                )
            })
            .try_flatten()
    }

    /// The checked listing query of `prefix`.
    pub(crate) fn listing_query_for(&self, prefix: &Path) -> Result<Query> {
        self.inner.layout.check_listing_path(prefix)?;
        Ok(self.listing_query(prefix))
    }

    fn listing_query(&self, prefix: &Path) -> Query {
        let mut q = Query::new(self.inner.layout.listing_hash(prefix.components()))
            .consistent(self.inner.config.consistent_reads);
        q.limit = self.inner.config.page_size;
        q
    }

    fn next_hop(&self, origin: &Path, target: &str, seen: &mut Vec<Path>) -> Result<Path> {
        let target = self.link_target(origin, target)?;
        if seen.contains(&target) {
            return Err(Error::new(
                ErrorKind::LinkLoop,
                format!("links from {origin} form a cycle through {target}"),
            ));
        }
        if seen.len() > self.inner.config.max_link_hops {
            return Err(Error::new(
                ErrorKind::LinkLoop,
                format!(
                    "links from {origin} take more than {} hops",
                    self.inner.config.max_link_hops
                ),
            ));
        }
        seen.push(target.clone());
        Ok(target)
    }

    pub(crate) fn to_value<T: DeserializeOwned>(&self, mut item: Item) -> Result<T> {
        crate::layout::strip_bookkeeping(&mut item, self.inner.layout.reserved());
        item.to_deserialize()
    }
}

/// Listing rows this process has seen exist: a hint that picks the cheapest write plan. Never
/// trusted for correctness (every plan is guarded by conditions), so it is bounded and simply
/// cleared when full.
///
/// With [`fenced_puts`](TreeBuilder::fenced_puts), it also remembers when a listing row was last
/// verified free (exists, neither marked nor locked) by a request sent at that instant: within
/// [`FENCE_TRUST`] of it, an object is written under the row with one PutItem (see the
/// consistency docs, "Fenced puts").
#[derive(Debug, Default)]
pub(crate) struct KnownRows {
    rows: Mutex<HashSet<Key>>,
    verified: Mutex<std::collections::HashMap<Key, tokio::time::Instant>>,
}

/// How long after a request verified a listing row free a process trusts it to write the
/// object under it with one PutItem ([`TreeBuilder::fenced_puts`]).
pub(crate) const FENCE_TRUST: Duration = Duration::from_secs(30);

/// How long a fence row stays before it expires (and the table's time-to-live may delete
/// it): far longer than [`FENCE_TRUST`] plus the longest time a signed request may take to
/// reach DynamoDB (its signature is refused after 5 minutes; clocks are bounded by the same
/// rule). See the consistency docs, "Fenced puts".
pub(crate) const FENCE_LIFETIME: Duration = Duration::from_secs(3600);

const KNOWN_ROWS_MAX: usize = 100_000;

impl KnownRows {
    fn contains(&self, key: &Key) -> bool {
        self.rows.lock().is_ok_and(|r| r.contains(key))
    }

    fn insert_all(&self, keys: impl IntoIterator<Item = Key>) {
        if let Ok(mut r) = self.rows.lock() {
            if r.len() > KNOWN_ROWS_MAX {
                r.clear();
            }
            r.extend(keys);
        }
    }

    fn remove(&self, key: &Key) {
        if let Ok(mut r) = self.rows.lock() {
            r.remove(key);
        }
        if let Ok(mut v) = self.verified.lock() {
            v.remove(key);
        }
    }

    /// Records that a request sent at `at` found (or made) the listing row `key` free.
    fn verify(&self, key: Key, at: tokio::time::Instant) {
        if let Ok(mut v) = self.verified.lock() {
            if v.len() > KNOWN_ROWS_MAX {
                v.retain(|_, t| t.elapsed() < FENCE_TRUST);
                if v.len() > KNOWN_ROWS_MAX {
                    v.clear();
                }
            }
            let t = v.entry(key).or_insert(at);
            *t = (*t).max(at);
        }
    }

    /// Whether the listing row `key` was verified free by a request sent less than
    /// [`FENCE_TRUST`] ago.
    fn fresh(&self, key: &Key) -> bool {
        self.verified
            .lock()
            .is_ok_and(|v| v.get(key).is_some_and(|t| t.elapsed() < FENCE_TRUST))
    }
}
