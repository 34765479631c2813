//! Export and import: a tree (or a subtree) as a sequence of [`Record`]s, one per object or
//! link, written as JSON Lines.
//!
//! # The format
//!
//! One JSON object per line. An object:
//!
//! ```text
//! {"path":"/Accounts/1","item":{"name":{"S":"Ann"},"score":{"N":"1.50"}},"expires":1700000000}
//! ```
//!
//! A link (not followed: the link itself is the record):
//!
//! ```text
//! {"path":"/ByEmail/ann@example.com","link":"/Accounts/1"}
//! ```
//!
//! - `path` and `link` are paths in the escaped text form of [`Path::escaped`] (`%2F` is a
//!   `/` inside a component, `%25` a `%`), read back with [`Path::parse_escaped`].
//! - `item` holds the object's attributes in DynamoDB's own JSON form, the one `aws dynamodb`
//!   and DynamoDB's export to S3 use: each value a one-entry map from its type (`S`, `N`,
//!   `B`, `BOOL`, `NULL`, `L`, `M`, `SS`, `NS`, `BS`) to its content; numbers are strings
//!   (their exact decimal text), binaries are base64 (standard alphabet, padded). Every type
//!   round-trips exactly.
//! - Only the user's attributes are exported. dynatree's bookkeeping (every attribute whose
//!   name starts with the reserved character: removal marks, locks, index attributes, versions
//!   of denormalized fields) is left out, with one exception: the expiry (the time-to-live
//!   attribute, see [`Expiry`](crate::Expiry)) is data, and travels as `expires`, in seconds
//!   since the Unix epoch.
//!
//! # What an import writes
//!
//! Each record is checked (path, attribute names, values, item size) before its batch is
//! sent; the rows go through the batch writes of [`Repository::put_all`](crate::Repository::put_all):
//! the listing rows of a batch are read and created once, objects share transactions, and every
//! invariant of a single put holds (see [`consistency`](crate::consistency)). An object row is
//! replaced whole (as [`Tree::put`] does), so importing the same records twice leaves the same
//! tree. Index attributes are computed on the way in: the path index's
//! ([`TreeBuilder::path_index`](crate::TreeBuilder::path_index)), and the secondary indexes'
//! of the types registered with [`TreeBuilder::indexes_of`](crate::TreeBuilder::indexes_of)
//! whose template a record's path matches (joined with [`Import::under`]'s prefix), as the
//! importing tree's typed writes store them: through a [scope](Tree::scope), with the scope's
//! root in their hashes, so the scope's index queries find the records. A record that does not
//! read as that type gets none; one that does but whose index key values cannot be stored (the
//! reserved character in them, or keys over DynamoDB's limits) is refused with
//! [`ErrorKind::InvalidValue`], as its typed write is. The template is matched below the
//! importing tree's root only: rows a scope wrote, exported through the whole tree and
//! imported through it, get no scoped index values (export and import them through their
//! scope). The versions of denormalized fields are not written (typed writes stamp them);
//! copies come in as the export holds them, without propagation.
//!
//! # Examples
//!
//! ```
//! use dynatree::Tree;
//! use dynatree::transfer::Record;
//! use dynatree_testing::FakeTable;
//! use futures::TryStreamExt;
//!
//! # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
//! let source = Tree::new(FakeTable::new());
//! source.create_table().await?;
//! source.put(["a", "b"], &V { v: 1 }).await?;
//! source.put_link(["l"], ["a", "b"]).await?;
//!
//! // Export as JSON Lines...
//! let lines: Vec<String> = source
//!     .export(dynatree::Path::root())
//!     .map_ok(|r| r.to_json_line())
//!     .try_collect()
//!     .await?;
//! assert_eq!(lines, [
//!     r#"{"path":"/a/b","item":{"v":{"N":"1"}}}"#,
//!     r#"{"path":"/l","link":"/a/b"}"#,
//! ]);
//!
//! // ... and import them into another table.
//! let copy = Tree::new(FakeTable::new());
//! copy.create_table().await?;
//! let records = futures::stream::iter(lines.iter().map(|l| Record::from_json_line(l)));
//! let done = copy.import(records).run().await?;
//! assert_eq!((done.objects(), done.links()), (1, 1));
//! assert_eq!(copy.get(["l"]).await?, Some(V { v: 1 }));
//! # Ok(()) }
//! ```

use crate::check::scan;
use crate::tree::{Tree, many, ops, read};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::pin::pin;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, ErrorKind, Result};
use crate::item::json::{ItemJson, value_from_json};
use crate::item::{Item, Value};
pub use crate::path::part_of;
use crate::path::{IntoPath, Path};
use crate::storage::Storage;

/// One exported object or link: a line of an export (see the [module](self) for the format).
///
/// Serializes (serde) as the JSON object of the format; [`to_json_line`](Record::to_json_line)
/// and [`from_json_line`](Record::from_json_line) are the shortcuts for one line.
///
/// # Examples
///
/// ```
/// use dynatree::transfer::Record;
/// use dynatree::{storage::Item, Path, storage::Value};
///
/// let mut item = Item::new();
/// item.insert("price", Value::N("1.50".into()));
/// item.insert("raw", Value::B(vec![0, 255]));
/// let record = Record::Object { path: Path::new(["Files", "a/b"])?, item, expires: Some(2_000_000_000) };
/// let line = record.to_json_line();
/// assert_eq!(
///     line,
///     r#"{"path":"/Files/a%2Fb","item":{"price":{"N":"1.50"},"raw":{"B":"AP8="}},"expires":2000000000}"#
/// );
/// assert_eq!(Record::from_json_line(&line)?, record);
///
/// let link = Record::Link { path: Path::new(["l"])?, target: Path::new(["Files", "a/b"])? };
/// assert_eq!(link.to_json_line(), r#"{"path":"/l","link":"/Files/a%2Fb"}"#);
/// assert_eq!(link.path(), &Path::new(["l"])?);
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Record {
    /// An object: its user attributes, and when it expires.
    Object {
        /// Where it is.
        path: Path,
        /// Its attributes (the user's only: nothing named `Key`, `Child` or starting with the
        /// reserved character).
        item: Item,
        /// When it expires, in seconds since the Unix epoch (see [`Expiry`](crate::Expiry)).
        expires: Option<u64>,
    },
    /// A link.
    Link {
        /// Where it is.
        path: Path,
        /// The path it points at.
        target: Path,
    },
}

impl Record {
    /// The record's path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::Record;
    /// use dynatree::Path;
    ///
    /// let r = Record::from_json_line(r#"{"path":"/a/b","item":{}}"#)?;
    /// assert_eq!(r.path(), &Path::new(["a", "b"])?);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        match self {
            Record::Object { path, .. } | Record::Link { path, .. } => path,
        }
    }

    /// The record as one line of JSON (without the line break).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::Record;
    /// use dynatree::{storage::Item, Path, storage::Value};
    /// use std::collections::BTreeMap;
    ///
    /// let mut item = Item::new();
    /// item.insert("tags", Value::Ss(vec!["x".into(), "y".into()]));
    /// item.insert("m", Value::M(BTreeMap::from([("ok".to_owned(), Value::Bool(true))])));
    /// item.insert("none", Value::Null);
    /// let r = Record::Object { path: Path::new(["a"])?, item, expires: None };
    /// assert_eq!(
    ///     r.to_json_line(),
    ///     r#"{"path":"/a","item":{"m":{"M":{"ok":{"BOOL":true}}},"none":{"NULL":true},"tags":{"SS":["x","y"]}}}"#
    /// );
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn to_json_line(&self) -> String {
        // Serializing this type into a string cannot fail: every key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses one line of an export.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`] if the line is not a record: not JSON, an unknown field,
    /// both or neither of `item` and `link`, a path not in the escaped form, a value not in
    /// DynamoDB's JSON form. What the format allows but a tree refuses (a reserved character
    /// in a path, an attribute named `Key`) is left to the import, which checks it.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::Record;
    /// use dynatree::{ErrorKind, storage::Value};
    ///
    /// let r = Record::from_json_line(r#"{"path":"/a","item":{"n":{"N":"1.50"},"l":{"L":[{"S":"x"},{"NULL":true}]}}}"#)?;
    /// let Record::Object { item, .. } = r else { panic!("an object") };
    /// assert_eq!(item.get("n"), Some(&Value::N("1.50".into()))); // exactly as written
    /// assert_eq!(item.get("l"), Some(&Value::L(vec![Value::S("x".into()), Value::Null])));
    ///
    /// let err = Record::from_json_line(r#"{"path":"/a","item":{"n":{"N":1.5}}}"#).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Serialization);
    /// assert!(Record::from_json_line(r#"{"path":"/a"}"#).is_err()); // neither item nor link
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    pub fn from_json_line(line: &str) -> Result<Record> {
        serde_json::from_str(line).map_err(|e| {
            Error::new(
                ErrorKind::Serialization,
                format!("not an export record: {e}"),
            )
        })
    }
}

impl Serialize for Record {
    fn serialize<Se: Serializer>(&self, s: Se) -> std::result::Result<Se::Ok, Se::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("path", &self.path().escaped())?;
        match self {
            Record::Object { item, expires, .. } => {
                m.serialize_entry("item", &ItemJson(item))?;
                if let Some(e) = expires {
                    m.serialize_entry("expires", e)?;
                }
            }
            Record::Link { target, .. } => m.serialize_entry("link", &target.escaped())?,
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            path: String,
            #[serde(default)]
            item: Option<BTreeMap<String, serde_json::Value>>,
            #[serde(default)]
            link: Option<String>,
            #[serde(default)]
            expires: Option<u64>,
        }
        let w = Wire::deserialize(d)?;
        let path = Path::parse_escaped(&w.path).map_err(D::Error::custom)?;
        match (w.item, w.link) {
            (Some(attrs), None) => {
                let mut item = Item::new();
                for (name, v) in &attrs {
                    let value = value_from_json(v)
                        .map_err(|e| D::Error::custom(format_args!("attribute `{name}`: {e}")))?;
                    item.insert(name.clone(), value);
                }
                Ok(Record::Object {
                    path,
                    item,
                    expires: w.expires,
                })
            }
            (None, Some(target)) if w.expires.is_none() => Ok(Record::Link {
                path,
                target: Path::parse_escaped(&target).map_err(D::Error::custom)?,
            }),
            (None, Some(_)) => Err(D::Error::custom("a link has no `expires`")),
            (Some(_), Some(_)) => Err(D::Error::custom(
                "a record has `item` (an object) or `link` (a link), not both",
            )),
            (None, None) => Err(D::Error::custom(
                "a record needs `item` (an object) or `link` (a link)",
            )),
        }
    }
}

/// The record number (and path, when it was read) of a record an import refused: the
/// [`source`](std::error::Error::source) of the import's error.
///
/// Records are numbered from 1 in the order of the import's stream, skipped ones included: for
/// a file with one record per line, the line number.
///
/// # Examples
///
/// ```
/// use dynatree::transfer::{BadRecord, Record};
/// use dynatree::{ErrorKind, Tree};
/// use dynatree_testing::FakeTable;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let lines = [r#"{"path":"/a","item":{}}"#, r#"{"path":"/b","item":{"Key":{"S":"x"}}}"#];
/// let records = futures::stream::iter(lines.map(Record::from_json_line));
/// let err = tree.import(records).run().await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidAttribute);
/// assert_eq!(err.to_string(), "invalid attribute name: record 2 at /b: `Key` is the table's key attribute");
/// let bad = BadRecord::of(&err).expect("a bad record");
/// assert_eq!(bad.number(), 2);
/// assert_eq!(bad.path().map(|p| p.to_string()), Some("/b".into()));
/// assert_eq!(tree.get::<serde_json::Value>(["a"]).await?, None); // nothing of its batch
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord {
    number: u64,
    path: Option<Path>,
}

impl BadRecord {
    /// The record's number, from 1.
    ///
    /// # Examples
    ///
    /// See [`BadRecord`].
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The record's path as written in it, if the record was read.
    ///
    /// # Examples
    ///
    /// See [`BadRecord`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_ref()
    }

    /// The bad record an import's error is about, if it is about one.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::BadRecord;
    /// use dynatree::{Error, ErrorKind};
    ///
    /// assert!(BadRecord::of(&Error::new(ErrorKind::Backend, "")).is_none());
    /// ```
    pub fn of(err: &Error) -> Option<&BadRecord> {
        std::error::Error::source(err)?.downcast_ref()
    }

    /// `cause` about this record: the same kind, the record named in the detail.
    fn wrap(self, cause: &Error) -> Error {
        let kind = cause.kind();
        let text = cause.to_string();
        let reason = text
            .strip_prefix(&format!("{kind}: "))
            .unwrap_or(text.as_str());
        let at = match &self.path {
            Some(p) => format!("record {} at {}", self.number, p.escaped()),
            None => format!("record {}", self.number),
        };
        Error::new(kind, format!("{at}: {reason}")).with_source(self)
    }
}

impl fmt::Display for BadRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad record {}", self.number)
    }
}

impl std::error::Error for BadRecord {}

/// What an import did, so far (the argument of [`Import::on_progress`]) or in all (the result
/// of [`Import::run`]).
///
/// # Examples
///
/// ```
/// use dynatree::transfer::Record;
/// use dynatree::{storage::Item, Path, Tree};
/// use dynatree_testing::FakeTable;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let records: Vec<Record> = (0..5)
///     .map(|i| Ok(Record::Object { path: Path::new(["d", &i.to_string()])?, item: Item::new(), expires: None }))
///     .collect::<dynatree::Result<_>>()?;
/// let done = tree.import(futures::stream::iter(records.into_iter().map(Ok))).batch(2).skip(1).run().await?;
/// assert_eq!(done.skipped(), 1);
/// assert_eq!(done.records(), 4);
/// assert_eq!(done.committed(), 5);
/// assert_eq!(done.batches(), 2);
/// assert_eq!(done.to_string(), "imported 4 records (4 objects, 0 links) in 2 batches, 1 skipped");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    skipped: u64,
    records: u64,
    objects: u64,
    links: u64,
    batches: u64,
}

impl Imported {
    /// Records written by this run (not counting skipped ones).
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Of them, objects.
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn objects(&self) -> u64 {
        self.objects
    }

    /// Of them, links.
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn links(&self) -> u64 {
        self.links
    }

    /// Batches written by this run.
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Records skipped at the start ([`Import::skip`]).
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// How many records of the stream, from its start, are known to be written: skipped plus
    /// written. After an interruption, pass it to [`Import::skip`] to resume.
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn committed(&self) -> u64 {
        self.skipped + self.records
    }
}

impl fmt::Display for Imported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |n: u64| if n == 1 { "" } else { "s" };
        write!(
            f,
            "imported {} record{} ({} object{}, {} link{}) in {} batch{}",
            self.records,
            s(self.records),
            self.objects,
            s(self.objects),
            self.links,
            s(self.links),
            self.batches,
            if self.batches == 1 { "" } else { "es" },
        )?;
        if self.skipped > 0 {
            write!(f, ", {} skipped", self.skipped)?;
        }
        Ok(())
    }
}

type Progress = Box<dyn FnMut(&Imported) + Send>;

/// An import of records into a tree, built by [`Tree::import`]; nothing happens until
/// [`run`](Import::run).
///
/// # Examples
///
/// ```
/// use dynatree::transfer::Record;
/// use dynatree::Tree;
/// use dynatree_testing::FakeTable;
/// use std::sync::{Arc, Mutex};
///
/// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let lines: Vec<String> = (0..10).map(|i| format!(r#"{{"path":"/x/{i}","item":{{"v":{{"N":"{i}"}}}}}}"#)).collect();
/// let checkpoints = Arc::new(Mutex::new(Vec::new()));
/// let seen = Arc::clone(&checkpoints);
/// let done = tree
///     .import(futures::stream::iter(lines.iter().map(|l| Record::from_json_line(l))))
///     .under(["copy"])
///     .batch(4)
///     .on_progress(move |p| seen.lock().unwrap().push(p.committed()))
///     .run()
///     .await?;
/// assert_eq!(done.records(), 10);
/// assert_eq!(*checkpoints.lock().unwrap(), [4, 8, 10]);
/// assert_eq!(tree.get(["copy", "x", "7"]).await?, Some(V { v: 7 }));
/// # Ok(()) }
/// ```
#[must_use = "an import does nothing until `run()` is awaited"]
pub struct Import<S, R> {
    tree: Tree<S>,
    records: R,
    batch: usize,
    skip: u64,
    under: Result<Path>,
    progress: Option<Progress>,
}

impl<S, R> fmt::Debug for Import<S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Import")
            .field("batch", &self.batch)
            .field("skip", &self.skip)
            .field("under", &self.under)
            .field("on_progress", &self.progress.is_some())
            .finish_non_exhaustive()
    }
}

/// Records per batch unless [`Import::batch`] says otherwise.
const DEFAULT_BATCH: usize = 1_000;

impl<S: Storage + 'static> Tree<S> {
    /// The object or link at `path` (if any, and if `path` is not the root), then every object
    /// and link below it, lazily, as [`Record`]s; the root exports the whole tree. Links are
    /// exported as links, not followed; expired objects are left out, as every read leaves
    /// them out.
    ///
    /// Order: each record before the records below it, as [`Tree::descendants`] returns them
    /// (the walk of the listing rows, or the path index when the tree has one and `path` is
    /// deep enough; see [`Descendants`](crate::Descendants)). Cost: one GetItem for `path`,
    /// then what the descendants cost: for the walk, one Query per node and one BatchGetItem
    /// per 100 names.
    ///
    /// Through a [scope](Tree::scope), paths are the scope's (relative to its root, whose own
    /// object belongs to the parent tree and is not exported), and a link that points out of
    /// the scope is an error ([`ErrorKind::OutOfScope`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::Record;
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    /// use futures::TryStreamExt;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["x"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let records: Vec<Record> = tree.export(["a"]).try_collect().await?;
    /// let paths: Vec<String> = records.iter().map(|r| r.path().to_string()).collect();
    /// assert_eq!(paths, ["/a", "/a/b", "/a/b/c", "/a/d"]);
    ///
    /// // Through a scope: the scope's paths.
    /// let scope = tree.scope(["a"])?;
    /// let records: Vec<Record> = scope.export(dynatree::Path::root()).try_collect().await?;
    /// let paths: Vec<String> = records.iter().map(|r| r.path().to_string()).collect();
    /// assert_eq!(paths, ["/b", "/b/c", "/d"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The stream yields one error and ends: at once on an invalid path
    /// ([`ErrorKind::InvalidPath`]); later on a link out of the scope, a stored link target
    /// that does not parse, or a backend error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the stream stops the reads; nothing is written.
    pub fn export(&self, path: impl IntoPath) -> BoxStream<'static, Result<Record>> {
        match path.into_path() {
            Ok(path) => records_under(self, path),
            Err(e) => Box::pin(futures::stream::once(async move { Err(e) })),
        }
    }

    /// An import of `records` into this tree; see [`Import`] for the settings and
    /// [`Import::run`] for what it does. For an iterator, wrap it in
    /// `futures::stream::iter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::Record;
    /// use dynatree::{Path, Tree};
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let link = Record::Link { path: Path::new(["l"])?, target: Path::new(["t"])? };
    /// let done = tree.import(futures::stream::iter([Ok(link)])).run().await?;
    /// assert_eq!(done.links(), 1);
    /// assert_eq!(tree.read_link(["l"]).await?, Path::new(["t"])?);
    /// # Ok(()) }
    /// ```
    pub fn import<R>(&self, records: R) -> Import<S, R>
    where
        R: Stream<Item = Result<Record>> + Send,
    {
        Import {
            tree: self.clone(),
            records,
            batch: DEFAULT_BATCH,
            skip: 0,
            under: Ok(Path::root()),
            progress: None,
        }
    }
}

/// The records of `path` (relative to `tree`'s scope) and everything below it: the object
/// at `path` itself, then its descendants. See [`Tree::export`].
fn records_under<S: Storage + 'static>(
    tree: &Tree<S>,
    path: Path,
) -> BoxStream<'static, Result<Record>> {
    let start = tree.enter(path.clone()).and_then(|abs| {
        tree.cx.layout().check_listing_path(&abs)?;
        Ok((path, abs))
    });
    let (path, abs) = match start {
        Ok(x) => x,
        Err(e) => return Box::pin(futures::stream::once(async move { Err(e) })),
    };
    let tree = tree.clone();
    let own = {
        let tree = tree.clone();
        let path = path.clone();
        async move {
            // The root holds no object; a scope's root belongs to the parent tree.
            if path.is_root() || tree.cx.layout().check_object_path(&abs).is_err() {
                return Ok(None);
            }
            let key = tree.cx.layout().object_key(&abs);
            let consistent = read::default_read(&tree.cx).consistent;
            let row = tree.cx.io().get_item(&key, consistent).await?;
            let now = crate::expiry::now_secs();
            match row.filter(|r| !tree.cx.layout().is_absent(r, now)) {
                Some(row) => record_of(&tree, path, row).map(Some),
                None => Ok(None),
            }
        }
    };
    let rest = tree
        .descendants(path)
        .items()
        .and_then(move |d| futures::future::ready(record_of(&tree, d.path, d.item)));
    Box::pin(
        futures::stream::once(own)
            .try_filter_map(futures::future::ok)
            .chain(rest)
            // Like every stream of this crate: nothing after the first error.
            .scan(false, |failed, r| {
                let out = (!*failed).then(|| {
                    *failed = r.is_err();
                    r
                });
                futures::future::ready(out)
            }),
    )
}

/// The record of an exported row at `path` (as the caller sees it).
fn record_of<S: Storage + 'static>(tree: &Tree<S>, path: Path, mut row: Item) -> Result<Record> {
    let cx = &tree.cx;
    let layout = cx.layout();
    if let Some(stored) = row.get_s(layout.link_attr()) {
        let origin = tree.enter(path.clone())?;
        let target = tree.leave(cx.link_target(&origin, stored)?)?;
        return Ok(Record::Link { path, target });
    }
    let expires = match row.get(&layout.ttl_attr()) {
        Some(Value::N(n)) => n.parse::<u64>().ok(),
        _ => None,
    };
    crate::layout::strip_bookkeeping(&mut row, layout.reserved());
    Ok(Record::Object {
        path,
        item: row,
        expires,
    })
}

impl<S: Storage + 'static, R: Stream<Item = Result<Record>> + Send> Import<S, R> {
    /// Records per batch (default 1,000; at least 1). A batch is checked whole before any of it
    /// is written, and progress is reported after each batch.
    ///
    /// # Examples
    ///
    /// See [`Import`].
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n.max(1);
        self
    }

    /// Skips the first `n` records of the stream (neither checked nor written): those an
    /// interrupted run reported committed ([`Imported::committed`], through
    /// [`on_progress`](Import::on_progress)).
    ///
    /// # Examples
    ///
    /// See [`Imported`].
    pub fn skip(mut self, n: u64) -> Self {
        self.skip = n;
        self
    }

    /// Writes every record at `prefix` joined with its path, and every link's target joined
    /// with `prefix` too: as if imported into [`tree.scope(prefix)`](Tree::scope), so the
    /// links within an export still point within the copy. An export of `/a` imported under
    /// `/b` lands at `/b/a/...`; to land at `/b/...`, export through
    /// [`tree.scope("/a")`](Tree::scope).
    ///
    /// # Examples
    ///
    /// See [`Import`].
    pub fn under(mut self, prefix: impl IntoPath) -> Self {
        self.under = prefix.into_path();
        self
    }

    /// Calls `f` after each batch is written, with what is written so far: save
    /// [`Imported::committed`] as a checkpoint, and pass it to [`skip`](Import::skip) to
    /// resume.
    ///
    /// # Examples
    ///
    /// See [`Import`].
    pub fn on_progress(mut self, f: impl FnMut(&Imported) + Send + 'static) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Reads the records, and writes them batch after batch.
    ///
    /// Each batch is read, checked whole (paths, attribute names and values, item sizes;
    /// nothing of a batch with a bad record is written), then written through the batch
    /// writes (listing rows read and created once per batch, up to about 49 objects per
    /// TransactWriteItems); two records of one batch at the same path write the later one. An
    /// object replaces what was at its path, so running the same import twice leaves the same
    /// tree.
    ///
    /// # Errors
    ///
    /// A bad record: the kind of what is wrong with it ([`ErrorKind::InvalidPath`],
    /// [`ErrorKind::InvalidAttribute`], [`ErrorKind::InvalidValue`] (also for an index key
    /// value that cannot be stored, see [the module docs](self#what-an-import-writes)),
    /// [`ErrorKind::ItemTooLarge`], or the error the stream yielded, such as
    /// [`ErrorKind::Serialization`] from [`Record::from_json_line`]), the record named in the
    /// message and by [`BadRecord::of`]. [`ErrorKind::InvalidPath`] for an invalid
    /// [`under`](Import::under) prefix, before anything is read. Backend errors. In every case
    /// the batches reported to [`on_progress`](Import::on_progress) are written.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, but resumable: a dropped import leaves every batch reported to
    /// [`on_progress`](Import::on_progress) written, and possibly part of the next one (each
    /// object written with its listing rows, so the tree stays consistent). Run it again with
    /// [`skip`](Import::skip) set to the last reported [`Imported::committed`]: the records
    /// after it are written (again), which leaves the tree the import would have left.
    pub async fn run(self) -> Result<Imported> {
        crate::retry::call(self.tree.cx.inner.config.retry, async move {
            let Import {
                tree,
                records,
                batch,
                skip,
                under,
                mut progress,
            } = self;
            let under = under?;
            let mut records = pin!(records);
            let mut done = Imported::default();
            let mut number = 0u64;
            while done.skipped < skip {
                if records.next().await.is_none() {
                    return Ok(done);
                }
                number += 1;
                done.skipped += 1;
            }
            let mut ended = false;
            while !ended {
                let mut rows: Vec<(Path, Item)> = Vec::new();
                let mut at: HashMap<Path, usize> = HashMap::new();
                let (mut count, mut objects, mut links) = (0u64, 0u64, 0u64);
                while (count as usize) < batch {
                    let Some(next) = records.next().await else {
                        ended = true;
                        break;
                    };
                    number += 1;
                    count += 1;
                    let record = next.map_err(|e| BadRecord { number, path: None }.wrap(&e))?;
                    let shown = record.path().clone();
                    let is_link = matches!(record, Record::Link { .. });
                    let (path, row) = import_row(&tree, &under, record).map_err(|e| {
                        BadRecord {
                            number,
                            path: Some(shown),
                        }
                        .wrap(&e)
                    })?;
                    if is_link {
                        links += 1;
                    } else {
                        objects += 1;
                    }
                    match at.get(&path) {
                        Some(&i) => rows[i].1 = row,
                        None => {
                            at.insert(path.clone(), rows.len());
                            rows.push((path, row));
                        }
                    }
                }
                if count == 0 {
                    break;
                }
                many::write_objects(&tree.cx, rows).await?;
                done.records += count;
                done.objects += objects;
                done.links += links;
                done.batches += 1;
                if let Some(f) = progress.as_mut() {
                    f(&done);
                }
            }
            Ok(done)
        })
        .await
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// Checks `record` as [`import`](Tree::import) checks it before writing it, and as
    /// [`put`](Tree::put) and [`put_link`](Tree::put_link) check the same object or link: the
    /// path, the attribute names and values, the index keys, and the size of the row as it
    /// would be written (bookkeeping and index attributes included). Sends no request: for dry
    /// runs, which must refuse what the real write refuses.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::transfer::Record;
    /// use dynatree::{ErrorKind, storage::Item, Path, Tree, storage::Value};
    /// use dynatree_testing::FakeTable;
    ///
    /// let tree = Tree::new(FakeTable::new());
    /// let mut item = Item::new();
    /// item.insert("big", Value::S("x".repeat(410_000))); // over 400 KiB
    /// let record = Record::Object { path: Path::new(["a"])?, item, expires: None };
    /// assert_eq!(tree.check_record(&record).unwrap_err().kind(), ErrorKind::ItemTooLarge);
    ///
    /// let mut item = Item::new();
    /// item.insert("Key", Value::S("x".into()));
    /// let record = Record::Object { path: Path::new(["a"])?, item, expires: None };
    /// assert_eq!(tree.check_record(&record).unwrap_err().kind(), ErrorKind::InvalidAttribute);
    ///
    /// let link = Record::Link { path: Path::new(["l"])?, target: Path::new(["a"])? };
    /// tree.check_record(&link)?;
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// What the write would fail with before sending: [`ErrorKind::InvalidPath`],
    /// [`ErrorKind::InvalidAttribute`], [`ErrorKind::InvalidValue`],
    /// [`ErrorKind::ItemTooLarge`].
    pub fn check_record(&self, record: &Record) -> Result<()> {
        import_row(self, &Path::root(), record.clone()).map(drop)
    }
}

/// The absolute path and the checked row of a record imported under `under`.
fn import_row<S: Storage + 'static>(
    tree: &Tree<S>,
    under: &Path,
    record: Record,
) -> Result<(Path, Item)> {
    let cx = &tree.cx;
    let join = |p: &Path| Path::new(under.components().iter().chain(p.components()).cloned());
    let layout = cx.layout();
    let path = tree.enter(join(record.path())?)?;
    cx.refuse_root(&path, "import")?;
    layout.check_object_path(&path)?;
    let row = match record {
        Record::Object { item, expires, .. } => {
            layout.check_user_item(&item)?;
            let mut row = layout.object_row(&path, item)?;
            if let Some(t) = expires {
                row.insert(layout.ttl_attr(), Value::N(t.to_string()));
            }
            ops::add_path_index(cx, &path, &mut row)?;
            for (name, value) in scan::index_attributes_to_write(cx, &path, &row)? {
                row.insert(name, value);
            }
            crate::layout::check_item_size(&row)?;
            row
        }
        Record::Link { target, .. } => {
            let target = tree.enter(join(&target)?)?;
            cx.link_row_for(&path, &target)?
        }
    };
    Ok((path, row))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        let mut item = Item::new();
        item.insert("s", Value::S("héllo \"x\"\n".into()));
        item.insert("n", Value::N("-1.50e3".into()));
        item.insert("b", Value::B(vec![0, 1, 2, 255]));
        item.insert("t", Value::Bool(true));
        item.insert("f", Value::Bool(false));
        item.insert("z", Value::Null);
        item.insert(
            "l",
            Value::L(vec![Value::S("a".into()), Value::L(vec![]), Value::Null]),
        );
        item.insert(
            "m",
            Value::M(BTreeMap::from([
                ("x".to_owned(), Value::N("1".into())),
                ("y".to_owned(), Value::M(BTreeMap::new())),
            ])),
        );
        item.insert("ss", Value::Ss(vec!["b".into(), "a".into()]));
        item.insert("ns", Value::Ns(vec!["2".into(), "1.0".into()]));
        item.insert("bs", Value::Bs(vec![vec![1], vec![]]));
        let r = Record::Object {
            path: Path::new(["a/b", "100%", "¦"]).unwrap(),
            item,
            expires: Some(5),
        };
        let line = r.to_json_line();
        assert_eq!(Record::from_json_line(&line).unwrap(), r, "{line}");
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in [
            "",
            "[]",
            r#"{"path":"/a","item":{},"extra":1}"#,
            r#"{"path":"/a","item":{},"link":"/b"}"#,
            r#"{"path":"/a","link":"/b","expires":1}"#,
            r#"{"path":"/a//b","item":{}}"#,
            r#"{"path":"/a%","item":{}}"#,
            r#"{"path":"/a","item":{"x":{"S":"a","N":"1"}}}"#,
            r#"{"path":"/a","item":{"x":{"Q":"a"}}}"#,
            r#"{"path":"/a","item":{"x":{"NULL":false}}}"#,
            r#"{"path":"/a","item":{"x":{"B":"%%%%"}}}"#,
            r#"{"path":"/a","item":{"x":{"SS":[1]}}}"#,
            r#"{"path":"/a","item":{"x":"plain"}}"#,
        ] {
            let e = Record::from_json_line(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Serialization, "{bad}");
        }
    }
}
