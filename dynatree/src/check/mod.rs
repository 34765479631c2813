//! Integrity check and repair of a tree's table: [`Tree::check`] and [`Tree::repair`].
//!
//! [`Tree::check`] reads the whole table with a parallel Scan and reports every row that breaks
//! the layout's invariants (see [`consistency`](crate::consistency)), each with its
//! [`Class`] and path. The Scan is not a snapshot, so every suspect is confirmed on one
//! snapshot of the rows it concerns (TransactGetItems) before it is reported: a table that applications write to while
//! it is checked reports what is wrong, not what was half-written while the Scan passed.
//!
//! [`Tree::repair`] fixes what a program can decide, with the guarded writes of the runtime
//! (never an unconditional delete of a row a concurrent writer may have just written), and
//! leaves what needs a human decision (dangling links, link cycles, rows that do not parse)
//! in [`Repaired::left`]. Checking again after a repair of a table nobody else changes finds
//! nothing.
//!
//! | class | what it is | repair |
//! |---|---|---|
//! | [`Class::Unreachable`] | an object row whose listing row is missing | re-creates the listing rows, conditional on the object still being there |
//! | [`Class::BrokenClosure`] | a listing row whose parent's listing row is missing | re-creates the missing rows above it |
//! | [`Class::EmptyListing`] | a listing row naming neither an object nor children | removed by the removal protocol (mark, check, delete on the mark) |
//! | [`Class::Misplaced`] | a listing row of a child of a [sharded directory](crate::TreeBuilder::sharded) outside the child's shard (written by the Go library, or before the directory was sharded): lists do not see it; or a shard guard of a directory whose listing row another program deleted | deleted (a listing row after the row in the shard is written, as for [`Class::Unreachable`]) |
//! | [`Class::ExpiredMark`] | a removal mark whose lease ran out | taken off, conditional on exactly that mark |
//! | [`Class::AbandonedIntent`] | a move, copy, deletion or propagation whose owner's lease ran out | finished or rolled back, as [`Tree::resume`] does |
//! | [`Class::LockWithoutIntent`] | a move lock, or a lane row of a multi-row operation, whose operation is not recorded (its record deleted by another program) | released (a lane row deleted), conditional on the lock and on the operation still not being recorded |
//! | [`Class::Expired`] | an object past its expiry that DynamoDB has not deleted yet | deleted if still expired, then emptied listing rows removed |
//! | [`Class::MissingIndex`] | an object without the index attributes the tree keeps: the path index's, and the secondary indexes' of a type registered with [`TreeBuilder::indexes_of`] (for a value written through a [scope](crate::Tree::scope), the scope's); with a [link index](crate::TreeBuilder::link_index), a link without its entry (written by the Go library) | the attributes written, conditional on the object; a link's entry written, conditional on the link still pointing at its target |
//! | [`Class::StaleCopy`] | a denormalized copy that differs from its source | copied again by the propagation's conditional write |
//! | [`Class::Malformed`] | a bookkeeping attribute of a type the runtime never writes (a removal mark or lock that is no string, a hold that is no string, a version that is no number), which blocks writes for good | the attribute removed, conditional on its exact value (and, for a lock or hold, on no operation of that id being recorded) |
//! | [`Class::DanglingLink`] | a link whose target (after following links) is missing | left for a human |
//! | [`Class::LinkCycle`] | links that lead back to themselves | left for a human |
//! | [`Class::Unparsable`] | a row that is not a row of the layout (e.g. a component holding the reserved character, which the Go library can write, or a link whose target is not a string) | left for a human |
//!
//! [`Tree::check`]: crate::Tree::check
//! [`Tree::repair`]: crate::Tree::repair
//! [`Tree::resume`]: crate::Tree::resume
//! [`TreeBuilder::indexes_of`]: crate::TreeBuilder::indexes_of
//!
//! # Examples
//!
//! ```
//! use dynatree::Tree;
//! use dynatree::check::Class;
//! use dynatree::storage::{Condition, Key, Storage};
//! use dynatree_testing::FakeTable;
//!
//! # #[derive(serde::Serialize)] struct V { v: u8 }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
//! let table = FakeTable::new();
//! let tree = Tree::new(table.clone());
//! tree.create_table().await?;
//! tree.put(["Accounts", "1", "Links", "x"], &V { v: 1 }).await?;
//! // Something deletes a listing row behind the library's back (as the Go library's Delete
//! // of a node with children does).
//! table.delete_item(&Key::new("¦Accounts¦1¦Links¦", "x"), Condition::Always).await?;
//!
//! let report = tree.check().run().await?;
//! let found: Vec<(Class, String)> = report
//!     .violations()
//!     .iter()
//!     .map(|v| (v.class(), v.path().unwrap().to_string()))
//!     .collect();
//! assert_eq!(found, [
//!     (Class::Unreachable, "/Accounts/1/Links/x".to_owned()),
//!     // ...and, seen from the listings, /Accounts/1/Links now names nothing.
//!     (Class::EmptyListing, "/Accounts/1/Links".to_owned()),
//! ]);
//!
//! // Repair re-creates the listing row (so /Accounts/1/Links is no longer empty).
//! let repaired = tree.repair(&report).run().await?;
//! assert_eq!(repaired.fixed().len(), 2);
//! assert!(tree.check().run().await?.is_healthy());
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::path::Path;
use crate::storage::Key;

mod part;
pub(crate) mod repair;
pub(crate) mod scan;

pub use part::CheckPart;

/// Whether `path` is in part `i` of `n`: its first component's
/// [`part_of`](crate::transfer::part_of), and part 0 without a path or at the root (the split
/// of [`Repair::part`] and [`Check::bucket`]).
pub(crate) fn in_part(path: Option<&Path>, i: u32, n: u32) -> bool {
    match path.and_then(|p| p.components().first()) {
        Some(first) => crate::path::part_of(first, n) == i,
        None => i == 0,
    }
}

/// One merger's share of a check's facts (see [`Check::bucket`]): bucket `i` of `n`, by the
/// first `depth` components of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) i: u32,
    pub(crate) n: u32,
    pub(crate) depth: usize,
}

impl Bucket {
    /// Bucket `i` of `n` by the first `depth` components, refused
    /// ([`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)) unless `i < n` and
    /// `depth >= 1`.
    pub(crate) fn new(i: u32, n: u32, depth: usize) -> crate::Result<Self> {
        let invalid = |what: String| crate::Error::new(crate::ErrorKind::InvalidArgument, what);
        if n == 0 || i >= n {
            return Err(invalid(format!(
                "bucket {i} of {n}: the bucket must be below the number of buckets"
            )));
        }
        if depth == 0 {
            return Err(invalid(format!(
                "bucket {i} of {n}: the bucket depth must be at least 1"
            )));
        }
        Ok(Self { i, n, depth })
    }

    /// Whether a path of at least `depth` components is in this bucket: its first component
    /// in part `i` at depth 1 (the split of [`Repair::part`]), its escaped prefix of `depth`
    /// components (`/a/b`) deeper.
    fn owns(&self, path: &Path) -> bool {
        match self.depth {
            1 => in_part(Some(path), self.i, self.n),
            d => crate::path::part_of(&path.prefix(d).escaped(), self.n) == self.i,
        }
    }

    /// Whether the facts of `path` are kept: those of its paths, and those of every path
    /// shorter than `depth` (the top of the tree, which every bucket's rows may need).
    pub(crate) fn keeps(&self, path: &Path) -> bool {
        path.len() < self.depth || self.owns(path)
    }

    /// Whether the rows of `path` (or of none) are judged in this bucket: its own paths; the
    /// top of the tree and the rows without a path in bucket 0.
    pub(crate) fn judges(&self, path: Option<&Path>) -> bool {
        match path {
            Some(p) if p.len() >= self.depth => self.owns(p),
            _ => self.i == 0,
        }
    }
}
pub use repair::Repair;
pub use scan::Check;

/// What is wrong with a row: the classes of [`Violation`]s (see the [module docs](self)).
///
/// # Examples
///
/// ```
/// use dynatree::check::Class;
/// assert_eq!(Class::Unreachable.to_string(), "unreachable");
/// assert!(Class::Unreachable.repairable());
/// assert!(!Class::DanglingLink.repairable());
/// assert_eq!(Class::ALL.len(), 14);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Class {
    /// An object (or link) row without its listing row: no listing reaches it.
    Unreachable,
    /// A listing row whose parent's listing row is missing: the closure of listing rows is
    /// broken above it.
    BrokenClosure,
    /// A listing row that names nothing: no object and no children.
    EmptyListing,
    /// A row of a [sharded directory](crate::TreeBuilder::sharded) that is not where the
    /// layout puts it: a listing row of a child outside the child's shard (the Go library's,
    /// or one written before the directory was sharded), which no list sees (the child's row
    /// in its shard is missing too, and reported as [`Class::Unreachable`] or
    /// [`Class::BrokenClosure`]); or a shard guard of a directory whose listing row another
    /// program deleted, through which new children would be listed under no parent.
    Misplaced,
    /// A removal mark on a listing row whose lease ran out (its remover died).
    ExpiredMark,
    /// A recorded multi-row operation (move, copy, subtree deletion, re-parenting,
    /// propagation) not finished, whose owner's lease ran out.
    AbandonedIntent,
    /// A move lock on a listing row, a hold on an object, or a lane row of a multi-row
    /// operation, whose operation is not recorded. The runtime writes and deletes a lane
    /// row with its record, so such a lane was left by another program deleting the record;
    /// it has no path.
    LockWithoutIntent,
    /// An object past its expiry that DynamoDB has not deleted yet (time-to-live leftovers).
    Expired,
    /// An object without the index attributes the tree keeps (written by the Go library, or
    /// re-put by it), or with index values another scope's writes would give it (moved by the
    /// whole tree from one scope to another, or its indexed field changed by another program);
    /// or, with a [link index](crate::TreeBuilder::link_index), a link without its entry
    /// (written by the Go library, or before the table recorded the index).
    MissingIndex,
    /// A denormalized copy that differs from its source.
    StaleCopy,
    /// A bookkeeping attribute of a type the runtime never writes, which its conditions can
    /// never pass: a listing row's removal mark (`SC deleting`) or lock (`SC moving`) that is
    /// not a string (every write under the row waits or is refused, and no remover takes it
    /// over), an object's hold (`SC held`) that is not a string, a version (`SC sv`,
    /// `SC cv.<field>`, `SC dv.<field>`, a tombstone's) that is not a number (writes of the
    /// source, or copies into the target, fail their condition for good).
    Malformed,
    /// A link whose target, after following links, is not there.
    DanglingLink,
    /// Links that lead back to themselves, or a chain longer than the tree follows.
    LinkCycle,
    /// A row that is not a row of the layout.
    Unparsable,
}

impl Class {
    /// Every class, in the order of the [module docs](self).
    pub const ALL: [Class; 14] = [
        Class::Unreachable,
        Class::BrokenClosure,
        Class::EmptyListing,
        Class::Misplaced,
        Class::ExpiredMark,
        Class::AbandonedIntent,
        Class::LockWithoutIntent,
        Class::Expired,
        Class::MissingIndex,
        Class::StaleCopy,
        Class::Malformed,
        Class::DanglingLink,
        Class::LinkCycle,
        Class::Unparsable,
    ];

    /// A short lowercase name (`"unreachable"`, `"broken-closure"`, …), what `Display` prints.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(dynatree::check::Class::BrokenClosure.name(), "broken-closure");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Class::Unreachable => "unreachable",
            Class::BrokenClosure => "broken-closure",
            Class::EmptyListing => "empty-listing",
            Class::Misplaced => "misplaced",
            Class::ExpiredMark => "expired-mark",
            Class::AbandonedIntent => "abandoned-intent",
            Class::LockWithoutIntent => "lock-without-intent",
            Class::DanglingLink => "dangling-link",
            Class::LinkCycle => "link-cycle",
            Class::Unparsable => "unparsable",
            Class::StaleCopy => "stale-copy",
            Class::Expired => "expired",
            Class::MissingIndex => "missing-index",
            Class::Malformed => "malformed",
        }
    }

    /// Whether [`Tree::repair`](crate::Tree::repair) fixes this class (the others need a
    /// human decision and are reported, never deleted).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!dynatree::check::Class::LinkCycle.repairable());
    /// ```
    pub fn repairable(&self) -> bool {
        !matches!(
            self,
            Class::DanglingLink | Class::LinkCycle | Class::Unparsable
        )
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One row that breaks an invariant: its [`Class`], the path it concerns (none for rows that
/// do not parse and for intents without one), the row's key, and a detail.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree::check::Class; use dynatree_testing::FakeTable;
/// # use dynatree::storage::{Condition, Key, Storage};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// table.put_item(Key::new("¦", "orphan").into_item(), Condition::Always).await?;
/// let report = tree.check().run().await?;
/// let v = &report.violations()[0];
/// assert_eq!(v.class(), Class::EmptyListing);
/// assert_eq!(v.path().map(|p| p.to_string()).as_deref(), Some("/orphan"));
/// assert_eq!(v.key(), &Key::new("¦", "orphan"));
/// assert_eq!(v.to_string(), "empty-listing /orphan: a listing row that names neither an object nor children");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub(crate) class: Class,
    pub(crate) path: Option<Path>,
    pub(crate) key: Key,
    pub(crate) detail: String,
    /// What repair needs beyond the path (a mark, a lock, an intent id).
    pub(crate) token: Option<String>,
}

impl Violation {
    /// Its class.
    ///
    /// # Examples
    ///
    /// See [`Violation`].
    pub fn class(&self) -> Class {
        self.class
    }

    /// The path it concerns, if the row names one.
    ///
    /// # Examples
    ///
    /// See [`Violation`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_ref()
    }

    /// The key of the row (`Key`, `Child`).
    ///
    /// # Examples
    ///
    /// See [`Violation`].
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// What is wrong, in a short phrase.
    ///
    /// # Examples
    ///
    /// See [`Violation`].
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{} {}: {}", self.class, p.escaped(), self.detail),
            None => write!(
                f,
                "{} (Key={:?}, Child={:?}): {}",
                self.class, self.key.hash, self.key.range, self.detail
            ),
        }
    }
}

impl serde::Serialize for Violation {
    fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Violation", 5)?;
        st.serialize_field("class", self.class.name())?;
        st.serialize_field("path", &self.path.as_ref().map(Path::escaped))?;
        st.serialize_field("key", &self.key.hash)?;
        st.serialize_field("child", &self.key.range)?;
        st.serialize_field("detail", &self.detail)?;
        st.end()
    }
}

/// What [`Tree::check`](crate::Tree::check) found, and what it cost.
///
/// Serialized (serde) with a field per accessor; the duration is `elapsed_ms`, a whole number
/// of milliseconds.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// tree.put(["a", "b"], &V { v: 1 }).await?;
/// let report = tree.check().run().await?;
/// assert!(report.is_healthy());
/// assert_eq!(report.rows(), 3);
/// assert_eq!(report.read_units(), 0.5); // one Scan page of a few bytes
/// println!("{report}");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    pub(crate) violations: Vec<Violation>,
    pub(crate) rows: u64,
    pub(crate) read_units: f64,
    pub(crate) confirm_read_units: f64,
    pub(crate) pages: u64,
    pub(crate) segments: u32,
    pub(crate) in_progress: usize,
    /// The link index's stale entries: (link, target). Serialized as their number.
    #[serde(rename = "stale_entries", serialize_with = "count")]
    pub(crate) stale_entries: Vec<(Path, Path)>,
    /// Serialized with its unit in the name: a whole number of milliseconds.
    #[serde(rename = "elapsed_ms", serialize_with = "millis")]
    pub(crate) elapsed: Duration,
}

fn millis<Z: serde::Serializer>(d: &Duration, s: Z) -> Result<Z::Ok, Z::Error> {
    s.serialize_u128(d.as_millis())
}

fn count<T, Z: serde::Serializer>(v: &[T], s: Z) -> Result<Z::Ok, Z::Error> {
    s.serialize_u64(v.len() as u64)
}

impl Report {
    /// Every violation found, ordered by class, then path.
    ///
    /// # Examples
    ///
    /// See [`Report`].
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// The violations of one class.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Tree, check::Class}; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// let report = tree.check().run().await?;
    /// assert_eq!(report.of(Class::Unreachable).count(), 0);
    /// # Ok(()) }
    /// ```
    pub fn of(&self, class: Class) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.class == class)
    }

    /// Whether nothing is wrong.
    ///
    /// # Examples
    ///
    /// See [`Report`].
    pub fn is_healthy(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many rows the Scan read.
    ///
    /// # Examples
    ///
    /// See [`Report`].
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Read capacity units the Scan consumed, by DynamoDB's rules (the item sizes of each
    /// page rounded up to 4 KB, halved for eventually consistent reads).
    ///
    /// # Examples
    ///
    /// See [`Report`].
    pub fn read_units(&self) -> f64 {
        self.read_units
    }

    /// Read capacity units of the reads that confirmed the suspects, beyond the Scan
    /// (transactional reads: two units per 4 KB row; a consistent Query or GetItem: one
    /// unit per 4 KB).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert_eq!(tree.check().run().await?.confirm_read_units(), 0.0);
    /// # Ok(()) }
    /// ```
    pub fn confirm_read_units(&self) -> f64 {
        self.confirm_read_units
    }

    /// How many Scan pages were read (requests), over every segment.
    ///
    /// # Examples
    ///
    /// See [`Report`].
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Recorded operations whose owner is running them now (not violations).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert_eq!(tree.check().run().await?.in_progress(), 0);
    /// # Ok(()) }
    /// ```
    pub fn in_progress(&self) -> usize {
        self.in_progress
    }

    /// Entries of the [link index](crate::TreeBuilder::link_index) whose link is gone or
    /// points elsewhere now (not violations). A deleted, replaced or moved link leaves its
    /// old entry behind: reads check every entry against its link row, so a stale entry is
    /// never taken for a link, only kept. A move's look deletes those it meets;
    /// [`Tree::repair`](crate::Tree::repair) deletes all of them (see
    /// [`Repaired::swept`]). Counted from the Scan, not confirmed: each deletion is
    /// conditional on the link row still being no link to the entry's target.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::builder(FakeTable::new()).link_index(1).build()?;
    /// tree.create_table().await?;
    /// tree.put(["a", "x"], &V { v: 1 }).await?;
    /// tree.put(["b", "y"], &V { v: 2 }).await?;
    /// tree.put_link(["l"], ["a", "x"]).await?;
    /// tree.put_link(["l"], ["b", "y"]).await?; // the entry of l -> /a/x is stale now
    /// let report = tree.check().run().await?;
    /// assert!(report.is_healthy());
    /// assert_eq!(report.stale_entries(), 1);
    /// assert_eq!(tree.repair(&report).run().await?.swept(), 1);
    /// assert_eq!(tree.check().run().await?.stale_entries(), 0);
    /// # Ok(()) }
    /// ```
    pub fn stale_entries(&self) -> usize {
        self.stale_entries.len()
    }

    /// How long the check took.
    ///
    /// # Examples
    ///
    /// See [`Report`].
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for v in &self.violations {
            writeln!(f, "{v}")?;
        }
        write!(
            f,
            "{} rows in {} pages, {} read units (+{} to confirm), {:.1} s: ",
            self.rows,
            self.pages,
            self.read_units,
            self.confirm_read_units,
            self.elapsed.as_secs_f64()
        )?;
        if self.violations.is_empty() {
            f.write_str("healthy")?;
        } else {
            let mut parts = Vec::new();
            for class in Class::ALL {
                let n = self.of(class).count();
                if n > 0 {
                    parts.push(format!("{n} {class}"));
                }
            }
            write!(f, "{}", parts.join(", "))?;
        }
        match self.stale_entries.len() {
            0 => Ok(()),
            n => write!(f, " ({n} stale link index entries: repair deletes them)"),
        }
    }
}

/// How far a [`Tree::check`](crate::Tree::check) or [`Tree::repair`](crate::Tree::repair)
/// has come, given to the callback of `on_progress` after each Scan page and each repaired
/// violation.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # use std::sync::{Arc, Mutex};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&seen);
/// tree.check().on_progress(move |p| log.lock().unwrap().push(p.done)).run().await?;
/// assert!(!seen.lock().unwrap().is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// What is being done.
    pub phase: Phase,
    /// Rows scanned, suspects confirmed, or violations repaired so far (by `phase`).
    pub done: u64,
    /// The total for `phase`, when known (the number of suspects or of violations to repair;
    /// none for the Scan, whose total is not known in advance).
    pub total: Option<u64>,
    /// Read capacity units consumed so far.
    pub read_units: f64,
    /// Segments of the Scan finished, of [`segments`](Progress::segments).
    pub segments_done: u32,
    /// Segments of the Scan.
    pub segments: u32,
}

/// The phase a [`Progress`] reports on.
///
/// # Examples
///
/// ```
/// assert_eq!(dynatree::check::Phase::default(), dynatree::check::Phase::Scan);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Reading the table.
    #[default]
    Scan,
    /// Confirming suspects with consistent reads.
    Confirm,
    /// Repairing.
    Repair,
}

pub(crate) type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// What [`Tree::repair`](crate::Tree::repair) did: the violations it fixed (or found already
/// gone), and those it left, each with why.
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # use dynatree::storage::{Condition, Key, Storage};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// tree.put_link(["l"], ["nowhere"]).await?;
/// let report = tree.check().run().await?;
/// let repaired = tree.repair(&report).run().await?;
/// assert!(repaired.fixed().is_empty());
/// assert_eq!(repaired.left().len(), 1); // a dangling link is a human's decision
/// assert!(repaired.to_string().contains("dangling-link /l"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Repaired {
    pub(crate) fixed: Vec<Violation>,
    pub(crate) left: Vec<(Violation, String)>,
    pub(crate) swept: usize,
    pub(crate) dry_run: bool,
}

impl Repaired {
    /// The violations fixed (or found fixed already: a concurrent writer or remover got
    /// there first).
    ///
    /// # Examples
    ///
    /// See [`Repaired`].
    pub fn fixed(&self) -> &[Violation] {
        &self.fixed
    }

    /// The violations left, with why: those that need a human decision, and those a
    /// concurrent operation holds right now (check and repair again later).
    ///
    /// # Examples
    ///
    /// See [`Repaired`].
    pub fn left(&self) -> &[(Violation, String)] {
        &self.left
    }

    /// How many stale entries of the link index the repair deleted (in a dry run, how many
    /// it would try): see [`Report::stale_entries`]. An entry whose link points at its
    /// target again by the time of the repair is kept.
    ///
    /// # Examples
    ///
    /// See [`Report::stale_entries`].
    pub fn swept(&self) -> usize {
        self.swept
    }

    /// Whether this was a dry run (nothing written; `fixed` lists what would be repaired).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// let report = tree.check().run().await?;
    /// assert!(tree.repair(&report).dry_run(true).run().await?.is_dry_run());
    /// # Ok(()) }
    /// ```
    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dry_run { "would fix" } else { "fixed" };
        for v in &self.fixed {
            writeln!(f, "{verb} {v}")?;
        }
        for (v, why) in &self.left {
            writeln!(f, "left {v} ({why})")?;
        }
        write!(f, "{} {verb}, {} left", self.fixed.len(), self.left.len())?;
        match self.swept {
            0 => Ok(()),
            n if self.dry_run => write!(f, ", {n} stale link index entries would be deleted"),
            n => write!(f, ", {n} stale link index entries deleted"),
        }
    }
}
