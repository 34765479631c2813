//! [`Tree`]: the untyped tree API over any [`Storage`].
//!
//! `Tree` is the caller's handle and nothing more: each public method takes the caller's
//! paths into absolute ones (a [scope](Tree::scope) names paths from its root), checks them,
//! opens a tracing span, and hands the call to a protocol. The protocols are modules of
//! functions over one context, [`Ctx`] (the table behind the one retry layer, the layout, the
//! configuration, the known-rows cache, the scope and the progress observer):
//!
//! - `write`: the put plan (one transaction, or guarded single writes), fenced puts;
//! - `guard`: the conditions and marks the other protocols share, and the guarded
//!   transaction;
//! - `removal`: deletes, listing rows that name nothing, pruning;
//! - `many`: batch writes and reads;
//! - `txn`: user transactions;
//! - `moves`: intents (record, claim, lease, renew, finish, resume) and the subtree
//!   operations that run as their clients (moves, copies, deletions, re-parenting);
//! - `denorm`: propagation of denormalized fields;
//! - `read`, `ops`: reads, link resolution, ancestors and descendants;
//! - `table`: creating and checking the table;
//! - `expire`: sweeping expired rows;
//! - [`crate::check`] (scan, judge, repair), [`crate::transaction`] and
//!   [`crate::transfer`] are protocols of the same kind outside this module.
//!
//! Which protocol calls which shows in each module's imports. Their invariants and the
//! arguments for them are in each module's docs, indexed from [`crate::consistency`].

mod builder;
pub(crate) mod clock;
mod context;
pub(crate) mod denorm;
pub(crate) mod expire;
pub(crate) mod guard;
pub(crate) mod intent;
pub(crate) mod links;
pub(crate) mod many;
pub(crate) mod move_plan;
pub(crate) mod moves;
pub(crate) mod ops;
pub(crate) mod plan;
pub(crate) mod read;
pub(crate) mod removal;
pub mod scope;
mod table;
pub(crate) mod txn;
pub(crate) mod write;

pub(crate) use builder::Config;
pub use builder::TreeBuilder;
pub(crate) use context::{Ctx, FENCE_LIFETIME, Inner, KnownRows};
pub(crate) use denorm::script_versions;
pub use intent::{Intent, Operation, Phase};
pub use moves::{LinkPolicy, MoveReport, OnChildren};
pub use ops::{Descendant, Descendants, PATH_INDEX, Strategy};
pub(crate) use read::ReadOpts;
pub(crate) use txn::Op as TxOp;

use std::fmt;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Serialize, de::DeserializeOwned};
use tracing::Instrument;

use crate::denorm::Propagation;
use crate::error::Result;
use crate::item::Item;
use crate::layout::{DEFAULT_RESERVED, Layout};
use crate::path::{IntoPath, Path};
use crate::storage::{SharedStorage, Storage};

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
    /// What the protocols run over: the table, its layout, the configuration, the scope.
    pub(crate) cx: Ctx<S>,
    /// Whether the public methods take and return paths relative to the scope's root (a scope
    /// as the caller sees it), or absolute ones (the same scope as its own operations run it,
    /// still confined to the root: see [`scope`]).
    relative: bool,
}

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

impl<S> Clone for Tree<S> {
    fn clone(&self) -> Self {
        Self {
            cx: self.cx.clone(),
            relative: self.relative,
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Tree<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tree")
            .field("storage", &self.cx.inner.storage)
            .field("scope", &self.cx.root.as_deref())
            .field("reserved", &self.cx.inner.layout.reserved())
            .field("config", &self.cx.inner.config)
            .finish_non_exhaustive()
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
        TreeBuilder::new(storage)
    }
}

impl<S> Tree<S> {
    fn from_parts(storage: S, layout: Layout, config: Config) -> Self {
        let targets = denorm::Targets::default();
        for (template, defs) in &config.denormalized {
            targets.add(template, defs);
        }
        Tree {
            cx: Ctx {
                inner: Arc::new(Inner {
                    storage,
                    layout,
                    config,
                    known: KnownRows::default(),
                    targets,
                    verified: tokio::sync::OnceCell::new(),
                    learned_link_index: tokio::sync::OnceCell::new(),
                }),
                root: None,
                observer: None,
                enclosing: Arc::default(),
            },
            relative: false,
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
        tree.cx.observer = Some(Arc::new(f));
        tree
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// `InvalidReserved` if an entity checked against `reserved` is read through this tree,
    /// whose reserved character is another.
    pub(crate) fn check_entity_reserved(&self, reserved: char) -> Result<()> {
        if reserved == self.reserved() {
            Ok(())
        } else {
            Err(crate::Error::new(
                crate::ErrorKind::InvalidReserved,
                "the entity was checked against another reserved character than the tree's",
            ))
        }
    }

    /// Runs `op` as one call (every retry inside draws from one budget, see `Ctx::call`) on
    /// `path` made absolute, inside the span `span` names for it: the shape of every public
    /// operation on one path.
    fn call_at<'a, T, Fut>(
        &'a self,
        path: impl IntoPath + 'a,
        span: fn(&Path) -> tracing::Span,
        op: impl FnOnce(Path) -> Fut + 'a,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        Fut: Future<Output = Result<T>> + 'a,
    {
        self.cx.call(async move {
            let path = self.enter(path)?;
            let span = span(&path);
            op(path).instrument(span).await
        })
    }

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
        &self.cx.inner.storage
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
        self.cx.inner.config.propagation
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
        self.cx.inner.layout.reserved()
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
    /// [`ErrorKind::TableMismatch`](crate::ErrorKind::TableMismatch) if an existing table has another key schema;
    /// [`ErrorKind::Backend`](crate::ErrorKind::Backend) if it is not active within the wait (see
    /// [`TreeBuilder::table_wait`]); any backend error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: calling it again finishes the job.
    pub async fn create_table(&self) -> Result<()> {
        self.cx.call(async { table::create(&self.cx).await }).await
    }

    /// Checks that this tree can use its table, as it does once before its first request:
    /// one DescribeTable (and, for a tree with a path index, a read of the table's
    /// [`TableSettings`](crate::storage::TableSettings)). Refused with [`ErrorKind::TableMismatch`](crate::ErrorKind::TableMismatch):
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
    /// [`ErrorKind::TableNotFound`](crate::ErrorKind::TableNotFound) if the table does not exist; [`ErrorKind::TableMismatch`](crate::ErrorKind::TableMismatch)
    /// as above; the backend's errors (DescribeTable needs `dynamodb:DescribeTable`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn verify(&self) -> Result<()> {
        self.cx.call(async { table::verify(&self.cx).await }).await
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
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath), [`ErrorKind::InvalidAttribute`](crate::ErrorKind::InvalidAttribute) (a field named `Key`,
    /// `Child`, or starting with the reserved character), [`ErrorKind::ItemTooLarge`](crate::ErrorKind::ItemTooLarge),
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization): nothing was written. [`ErrorKind::Conflict`](crate::ErrorKind::Conflict) if concurrent
    /// removals kept winning; backend errors.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have written the object; every state it leaves keeps
    /// every object reachable, and calling `put` again completes it.
    pub async fn put<T: Serialize + ?Sized>(&self, path: impl IntoPath, value: &T) -> Result<()> {
        let span = |p: &Path| tracing::debug_span!("dynatree.put", path = %p);
        self.call_at(path, span, |path| write::put_value(&self.cx, path, value))
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
        self.cx
            .call(async {
                let (path, target) = (self.enter(path)?, self.enter(target)?);
                let span =
                    tracing::debug_span!("dynatree.put_link", path = %path, target = %target);
                write::put_link_to(&self.cx, path, target)
                    .instrument(span)
                    .await
            })
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
    /// [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath); [`ErrorKind::LinkLoop`](crate::ErrorKind::LinkLoop) on a cycle or too many hops;
    /// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if the stored attributes do not fit `T`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn get<T: DeserializeOwned>(&self, path: impl IntoPath) -> Result<Option<T>> {
        let span = |p: &Path| tracing::debug_span!("dynatree.get", path = %p);
        self.call_at(path, span, |path| read::get_value(&self.cx, path))
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
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) if nothing is at `path` (a fence left by a removal with
    /// [`fenced_puts`](TreeBuilder::fenced_puts) is nothing); [`ErrorKind::NotALink`](crate::ErrorKind::NotALink) if an
    /// object that is not a link is there; [`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn read_link(&self, path: impl IntoPath) -> Result<Path> {
        self.cx
            .call(async {
                let path = self.enter(path)?;
                let span = tracing::debug_span!("dynatree.read_link", path = %path);
                self.leave(read::link_at(&self.cx, &path).instrument(span).await?)
            })
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
            .and_then(|p| Ok(self.cx.inner.layout.check_listable(&p)?.then_some(p)));
        Box::pin(match query {
            Ok(Some(dir)) => self.cx.list_names(&dir, false).left_stream(),
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
            .and_then(|p| Ok(self.cx.inner.layout.check_listable(&p)?.then_some(p)));
        match checked {
            Ok(Some(prefix)) => read::entries_under(self.cx.clone(), prefix),
            // `Ok(None)`: a listing key over DynamoDB's limit holds no children; send nothing.
            other => Box::pin(futures::stream::iter(other.err().map(Err))),
        }
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
        read::rows_in_scope(self.cx.clone())
    }
}
