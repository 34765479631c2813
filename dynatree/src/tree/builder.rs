//! [`TreeBuilder`] and the configuration it builds.

use std::time::Duration;

use crate::denorm::Propagation;
use crate::error::Result;
use crate::item::Item;
use crate::layout::{DEFAULT_RESERVED, Layout};
use crate::path::Path;
use crate::retry::RetryPolicy;
use crate::storage::{Billing, SharedStorage, Storage};

use super::Tree;

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) max_link_hops: usize,
    pub(crate) consistent_reads: bool,
    pub(crate) retry: RetryPolicy,
    pub(crate) billing: Billing,
    pub(crate) lease: Duration,
    /// Requests a phase of a subtree operation keeps in flight at once.
    pub(crate) in_flight: usize,
    /// Transactions a phase of a subtree operation keeps in flight at once (its lanes).
    pub(crate) tx_in_flight: usize,
    pub(crate) page_size: Option<u32>,
    pub(crate) table_wait: Duration,
    pub(crate) indexes: Vec<crate::keys::IndexDef>,
    /// Types with secondary indexes registered on the builder: their template, how their
    /// index attributes follow from a row, and which scopes a row's index values name (for the
    /// checker and imports).
    pub(crate) indexed: Vec<(&'static str, IndexAttrsFn, IndexRootsFn)>,
    pub(crate) path_index: Option<usize>,
    /// The depth of the link index (see [`TreeBuilder::link_index`]).
    pub(crate) link_index: Option<usize>,
    /// The sharded directories as given (see [`TreeBuilder::sharded`]): template, shards.
    pub(crate) sharded: Vec<(String, u32)>,
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
            in_flight: 16,
            tx_in_flight: 16,
            page_size: None,
            table_wait: Duration::from_secs(300),
            indexes: Vec::new(),
            indexed: Vec::new(),
            path_index: None,
            link_index: None,
            sharded: Vec::new(),
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
    /// The builder [`Tree::builder`] returns: every setting at its default.
    pub(super) fn new(storage: S) -> Self {
        TreeBuilder {
            storage,
            reserved: DEFAULT_RESERVED,
            config: Config::default(),
        }
    }

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

    /// How many links `get` follows before it fails with [`ErrorKind::LinkLoop`](crate::ErrorKind::LinkLoop) (default 8).
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

    /// How many reads a phase of a move, copy or subtree deletion keeps in flight at once;
    /// default 16, and 0 counts as 1.
    ///
    /// A phase's independent reads (the consistent Queries listing the nodes of one level, one
    /// per node, and the BatchGetItems reading a level's objects) go out together, up to this
    /// many; its transactions are bounded by
    /// [`subtree_transactions_in_flight`](Self::subtree_transactions_in_flight) (see
    /// "Requests in flight" in the [`consistency`](crate::consistency) docs of moves). The requests and their cost are
    /// the same at every setting; only the time changes. Lower it to draw read capacity more
    /// slowly from a provisioned table, or set 1 to send one request at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::builder(FakeTable::new()).subtree_reads_in_flight(4).build()?;
    /// assert!(format!("{tree:?}").contains("in_flight: 4"));
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn subtree_reads_in_flight(mut self, n: usize) -> Self {
        self.config.in_flight = n.max(1);
        self
    }

    /// How many transactions a phase of a move, copy or subtree deletion keeps in flight at
    /// once; default 16, at most 64, and 0 counts as 1.
    ///
    /// A level of a subtree wider than one transaction (49 nodes) is locked, held, copied,
    /// deleted and unlocked by several transactions. To send them together, the operation
    /// gives its intent *lanes*: rows that only its owner writes, one per transaction in
    /// flight, each transaction checking its own lane instead of the intent record (see
    /// "Requests in flight" in the [`consistency`](crate::consistency) docs of moves). The
    /// lanes are written with the record, in one transaction, when a level first needs them:
    /// up to one per 49 nodes of the level, at most this many. They cost one write unit each
    /// to write and to delete at the end, and one more per takeover of the operation, and
    /// nothing for a subtree no wider than 49 nodes. Levels still go one after the other in
    /// the order the protocol needs. 1 sends one transaction at a time and writes no lane.
    /// An operation inside another (the child moves of a re-parenting) sends one at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::builder(FakeTable::new()).subtree_transactions_in_flight(4).build()?;
    /// assert!(format!("{tree:?}").contains("tx_in_flight: 4"));
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn subtree_transactions_in_flight(mut self, n: usize) -> Self {
        self.config.tx_in_flight = n.clamp(1, super::intent::MAX_LANES);
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
    /// cannot use with [`ErrorKind::TableMismatch`](crate::ErrorKind::TableMismatch) before anything is written (see
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
    /// [`PATH_INDEX`](crate::storage::PATH_INDEX) that [`Tree::create_table`] creates. Then [`Tree::descendants`] of any
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

    /// Keeps a link index of depth `depth` (default: none): every link row is written in one
    /// transaction with an entry keyed by its target, so a move with
    /// [`LinkPolicy::Report`](crate::ops::LinkPolicy::Report) or
    /// [`Rewrite`](crate::ops::LinkPolicy::Rewrite) finds the links into its source with one
    /// consistent Query per 1 MB of them instead of a Scan of the whole table. A link write
    /// costs one more item in its transaction (a cold overwrite of a link becomes a
    /// transaction of two items); reads are unchanged.
    ///
    /// The entries of the targets sharing their first `depth` components share a partition:
    /// choose `depth` so that one is one tenant (e.g. 2 for `Accounts/{id}/…`), and no
    /// deeper than the subtrees you move (a move of a node shallower than `depth` looks for
    /// its links with a Scan, as without the index). Under an IAM policy that confines a
    /// service to a [scope](crate::Tree::scope), `depth` must be at least the scope's:
    /// the entries then live under the scope's keys. The link path and the target below
    /// `depth` share an entry's 1,024-byte sort key: a link whose entry would not fit is
    /// refused ([`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath)).
    ///
    /// [`Tree::create_table`] records the depth in the table's settings; a tree built without
    /// it adopts the table's when it verifies the table, and one built with another depth is
    /// refused ([`ErrorKind::TableMismatch`](crate::ErrorKind::TableMismatch)). The Go
    /// library writes links without entries: [`Tree::check`](crate::Tree::check) reports
    /// such a link and [`Tree::repair`](crate::Tree::repair) writes its entry. See "The link
    /// index" in the [`consistency`](crate::consistency) docs.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{ops::LinkPolicy, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone()).link_index(2).build()?;
    /// tree.create_table().await?;
    /// tree.put(["Accounts", "1", "Files", "a"], &V { v: 1 }).await?;
    /// tree.put_link(["Shortcuts", "a"], ["Accounts", "1", "Files", "a"]).await?;
    /// table.reset_metrics();
    /// let from = ["Accounts", "1", "Files"];
    /// let report = tree.move_subtree_with(from, ["Accounts", "1", "Old"], LinkPolicy::Rewrite).await?;
    /// assert_eq!(report.links.len(), 1);
    /// assert_eq!(table.metrics().requests("Scan"), 0); // the links came from the index
    /// assert_eq!(tree.read_link(["Shortcuts", "a"]).await?.to_string(), "/Accounts/1/Old/a");
    /// # Ok(()) }
    /// ```
    pub fn link_index(mut self, depth: usize) -> Self {
        self.config.link_index = Some(depth.max(1));
        self
    }

    /// Spreads the listing rows of the children of every directory matching `template` over
    /// `shards` partitions (default: none), for directories that get new children faster than
    /// one partition takes them. `template` is a `/`-separated path whose `{field}` components (or `*`)
    /// match any name, e.g. `"Accounts/{account_id}/Links"`; `shards` is 2 to 256. Call it once
    /// per template; no directory may match two.
    ///
    /// DynamoDB takes at most 1,000 write units a second in one partition, and every new child
    /// of a directory bills 2 in the directory's partition (its listing row) and 2 in the
    /// partition of the directory's parent (its transaction's check of the directory's own
    /// listing row): about 490 new names a second in one directory under the service model,
    /// whatever the client does. The listing row of a child of a sharded directory goes in the
    /// partition of its shard (chosen by a hash of its name,
    /// [`part_of`](crate::transfer::part_of)), and its transaction checks the shard's guard, a
    /// row in a partition of its own, instead of the directory's listing row: each shard takes
    /// about 500 new names a second (2 shards about 1,000, 16 about 8,000; `BENCHMARKS.md`,
    /// "Every operation under the model of the service"). Writes cost what they cost without
    /// shards (a process's first name in a shard also writes the guard); a removal or a move of
    /// the directory deletes its `n` guards (one BatchWriteItem). A read of the children (a
    /// list, a typed query, a walk of the subtree) sends one Query per shard for each page and
    /// merges them by name, so the order, ranges, limits and cursors are those of one
    /// directory. Gets, the path index and links are unchanged. See "Sharded directories" in
    /// the [`consistency`](crate::consistency) docs.
    ///
    /// The sharding is part of the table's schema, like the reserved character: every key a
    /// tree computes depends on it, so every tree on the table is built with the same sharded
    /// directories. [`Tree::create_table`] records them in the table's settings
    /// ([`TableSettings::sharded`](crate::storage::TableSettings::sharded)), and a tree built
    /// with others, or without them, is refused when it verifies the table
    /// ([`ErrorKind::TableMismatch`](crate::ErrorKind::TableMismatch)), before its first
    /// request. With [`verify_table(false)`](TreeBuilder::verify_table), agreeing with the
    /// table is up to you (the command line builds its tree from the settings). The Go library lists a directory from one
    /// partition, so it does not see the children of a sharded directory (it reads their
    /// objects by path as before). [`Tree::check`](crate::Tree::check) reports a child listed
    /// outside its shard (written by the Go library, or before the directory was sharded) as
    /// [`Class::Misplaced`](crate::check::Class::Misplaced), and
    /// [`Tree::repair`](crate::Tree::repair) moves its listing row into the shard.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{ErrorKind, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone()).sharded("Accounts/{id}/Links", 4).build()?;
    /// tree.create_table().await?;
    /// for name in ["d", "b", "a", "c"] {
    ///     tree.put(["Accounts", "1", "Links", name], &V { v: 1 }).await?;
    /// }
    /// table.reset_metrics();
    /// let names: Vec<String> = tree.list(["Accounts", "1", "Links"]).try_collect().await?;
    /// assert_eq!(names, ["a", "b", "c", "d"]); // in order, gathered from 4 partitions
    /// assert_eq!(table.metrics().requests("Query"), 4);
    ///
    /// // Every tree on the table is built with the same sharded directories.
    /// for other in [
    ///     Tree::new(table.clone()),
    ///     Tree::builder(table.clone()).sharded("Accounts/{id}/Links", 8).build()?,
    /// ] {
    ///     let err = other.list(["Accounts"]).try_collect::<Vec<_>>().await.unwrap_err();
    ///     assert_eq!(err.kind(), ErrorKind::TableMismatch);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn sharded(mut self, template: &str, shards: u32) -> Self {
        self.config.sharded.push((template.to_owned(), shards));
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
    ///   [`LinkPolicy::Rewrite`](crate::ops::LinkPolicy::Rewrite) (or by a `Rewrite` move until its rewrite): Go follows the
    ///   link to the fence; dynatree reads nothing there, and [`Tree::check`] reports the link
    ///   as dangling.
    ///
    /// # Deprecated
    ///
    /// Measured under the model of the service (`BENCHMARKS.md`, "Every operation under the
    /// model of the service"), the mode does not earn its place, and it will be removed:
    /// - a new name under a parent at depth 4 or 20 takes 32-33 ms at p50 against 24 by default
    ///   (a transaction for the listing row, then the PutItem), for 5 write units against 6;
    /// - an overwrite from a process that has not seen the object is a transaction (25 ms, 4
    ///   write units) where the default sends one PutItem (8 ms, 1 unit);
    /// - one directory takes the same 480-490 new names a second either way;
    /// - it wins only for new top-level names (16 ms against 24, 2 units against 4), at the
    ///   price of fences that the Go library reads as empty objects, and of every process on
    ///   the table having to use it.
    ///
    /// Build trees without it; a table written in the mode keeps working by default once its
    /// fences expire (dynatree's readers treat a fence as no object, and a guarded write
    /// replaces one).
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(deprecated)]
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
    #[deprecated(
        since = "0.1.0",
        note = "no faster than the default for new names below the top level, slower for overwrites from a new process, and the Go library reads its fences as empty objects: build the tree without it"
    )]
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
    /// [`ErrorKind::InvalidReserved`](crate::ErrorKind::InvalidReserved) if the reserved
    /// character cannot be used; [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// if a [sharded](TreeBuilder::sharded) directory's template or count is not valid, or two
    /// templates can name the same directory.
    pub fn build(self) -> Result<Tree> {
        let layout = layout(self.reserved, &self.config)?;
        Ok(Tree::from_parts(
            SharedStorage::new(self.storage),
            layout,
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
        let layout = layout(self.reserved, &self.config)?;
        Ok(Tree::from_parts(self.storage, layout, self.config))
    }
}

/// The layout of a tree built with `reserved` and `config`: its sharded directories are set
/// if the builder named any (else learned from the table).
fn layout(reserved: char, config: &Config) -> Result<Layout> {
    let layout = Layout::new(reserved)?;
    if !config.sharded.is_empty() {
        let dirs = config
            .sharded
            .iter()
            .map(|(t, n)| crate::layout::ShardedDir::new(t, *n, reserved))
            .collect::<Result<Vec<_>>>()?;
        layout.set_sharded(crate::layout::checked_sharded(dirs)?);
    }
    Ok(layout)
}
