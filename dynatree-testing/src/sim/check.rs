//! Invariants of a tree's raw rows, and a model of its objects for the serial-order check.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use dynatree::{ErrorKind, IntoPath, Path, ops::LinkPolicy, ops::OnChildren, storage::Item};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// One broken invariant found by [`check_rows`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// An object (or link) row whose listing row is missing: listing from the root never
    /// reaches it.
    Unreachable(Vec<String>),
    /// A listing row whose parent's listing row is missing (listing rows must be upward closed).
    NotUpwardClosed(Vec<String>),
    /// A listing row still locked by a move (`SC moving`).
    Lock(Vec<String>),
    /// A listing row still marked for removal (`SC deleting`).
    RemovalMark(Vec<String>),
    /// An object row still held by a move or copy (`SC held`).
    Hold(Vec<String>),
    /// A bookkeeping row (an intent record, `Key` starting with two reserved characters).
    Bookkeeping(String, String),
    /// A row without string `Key` and `Child`, or with a key that is no path's.
    Malformed(String),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Unreachable(p) => write!(f, "object {} is unreachable", p.join("/")),
            Violation::NotUpwardClosed(p) => {
                write!(
                    f,
                    "listing row of {} has no parent listing row",
                    p.join("/")
                )
            }
            Violation::Lock(p) => write!(f, "listing row of {} is still locked", p.join("/")),
            Violation::Hold(p) => write!(f, "object {} is still held", p.join("/")),
            Violation::RemovalMark(p) => {
                write!(f, "listing row of {} still has a removal mark", p.join("/"))
            }
            Violation::Bookkeeping(h, r) => {
                write!(f, "bookkeeping row left: Key={h:?} Child={r:?}")
            }
            Violation::Malformed(s) => write!(f, "malformed row: {s}"),
        }
    }
}

/// Checks the raw rows of a tree (all of them, e.g. [`FakeTable::rows`](crate::FakeTable::rows)
/// or a Scan) against the invariants that must hold once no operation is running and
/// [`Tree::resume`](dynatree::Tree::resume) has finished:
///
/// - every object row `SC p0 … SC pn-1 / SC` has its listing row `SC p0 … SC / pn-1` (a fence
///   row, `SC fence`, left by a removal with fenced puts, is no object);
/// - listing rows are upward closed (a listing row's parent listing row exists);
/// - no listing row is locked (`SC moving`) or marked for removal (`SC deleting`), no object
///   row held (`SC held`);
/// - no bookkeeping row (intent record) is left;
/// - the listing row of a child of a sharded directory (as the table's settings row among
///   `rows` records them) is in the child's shard (`SC p0 SC … SC SC s{k}`, `k` the FNV-1a
///   hash of its name modulo the shards), and no other listing row of such a directory is.
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree::storage::Key;
/// use dynatree_testing::{FakeTable, sim};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// tree.put(["a", "b"], &V { v: 1 }).await?;
/// assert!(sim::check_rows(&table.rows(), '¦').is_empty());
///
/// // Lose the listing row of `a`: `a/b` is now unreachable, and `b`'s listing row dangles.
/// let mut rows = table.rows();
/// rows.retain(|r| Key::from_item(r) != Some(Key::new("¦", "a")));
/// assert_eq!(sim::check_rows(&rows, '¦').len(), 1);
/// # Ok(()) }
/// ```
pub fn check_rows(rows: &[Item], reserved: char) -> Vec<Violation> {
    let sc = reserved.to_string();
    let sc2 = format!("{sc}{sc}");
    let deleting = format!("{sc}deleting");
    let moving = format!("{sc}moving");
    let held = format!("{sc}held");
    let fence = format!("{sc}fence");
    // The tombstone of a removed source of denormalized fields: `(object key, SC sv)`, kept.
    let tombstone = format!("{sc}sv");
    let sharded = Sharded::from_rows(rows, reserved);
    // The listing row of `last` under `parent`, where this checker expects it.
    let listing_hash = |parent: &[String], last: &str| sharded.listing_hash(parent, last, reserved);
    let mut listings: BTreeSet<(String, String)> = BTreeSet::new();
    for r in rows {
        if let (Some(h), Some(c)) = (r.get_s("Key"), r.get_s("Child"))
            && c != sc
            && c != tombstone
        {
            listings.insert((h.to_owned(), c.to_owned()));
        }
    }
    let mut out = Vec::new();
    for r in rows {
        let (Some(h), Some(c)) = (r.get_s("Key"), r.get_s("Child")) else {
            out.push(Violation::Malformed(format!("{r:?}")));
            continue;
        };
        // The table's settings row is not left behind by an operation: it stays.
        if dynatree::storage::Key::new(h, c) == dynatree::storage::TableSettings::key(reserved) {
            continue;
        }
        if h.starts_with(&sc2) {
            out.push(Violation::Bookkeeping(h.to_owned(), c.to_owned()));
            continue;
        }
        if c == tombstone && !h.ends_with(reserved) {
            continue;
        }
        // An entry of the link index (`Key` = `SC t0 … SC SC links`): written with its link
        // row; an entry whose link was deleted or replaced is stale, and harmless (a move's
        // look drops it). The final `check` of a scenario judges the entries links need.
        if let Some(head) = h.strip_suffix(&format!("{sc2}links"))
            && head.starts_with(&sc)
            && !head.contains(&sc2)
        {
            continue;
        }
        let Some(rest) = h.strip_prefix(&sc) else {
            out.push(Violation::Malformed(format!("Key={h:?} Child={c:?}")));
            continue;
        };
        // A shard guard of a sharded directory (`SC p0 SC … SC SC g{k}`, `SC`): it exists
        // only while the directory's listing row does.
        if c == sc
            && let Some((dir, k)) = rest.rsplit_once(reserved)
            && k.strip_prefix('g')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            let comps: Vec<String> = dir
                .strip_suffix(reserved)
                .unwrap_or(dir)
                .split(reserved)
                .map(str::to_owned)
                .collect();
            let listed = comps.split_last().is_some_and(|(last, parent)| {
                listings.contains(&(listing_hash(parent, last), last.clone()))
            });
            if !listed {
                out.push(Violation::Malformed(format!(
                    "Key={h:?} Child={c:?}: a shard guard of /{} without its listing row",
                    comps.join("/")
                )));
            }
            continue;
        }
        if c == sc {
            // An object row: its listing row is (parent listing hash, last component).
            let comps: Vec<String> = rest.split(reserved).map(str::to_owned).collect();
            let (last, parent) = comps.split_last().expect("split yields one item");
            // A fence row (fenced puts) is no object: it needs no listing row.
            if !r.contains(&fence)
                && !listings.contains(&(listing_hash(parent, last), last.clone()))
            {
                out.push(Violation::Unreachable(comps.clone()));
            }
            // A hold on a fence row (fenced puts) keeps out nothing the fence does not.
            if r.contains(&held) && !r.contains(&fence) {
                out.push(Violation::Hold(comps.clone()));
            }
        } else {
            // A shard's partition: `SC p0 SC … SC SC s{k}`.
            let unsharded = match h.rsplit_once(reserved) {
                Some((dir, k))
                    if dir.ends_with(reserved)
                        && k.strip_prefix('s').is_some_and(|n| {
                            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
                        }) =>
                {
                    dir
                }
                _ => h,
            };
            let rest = &unsharded[reserved.len_utf8()..];
            let parent: Vec<String> = match rest.strip_suffix(reserved) {
                Some(p) => p.split(reserved).map(str::to_owned).collect(),
                None if rest.is_empty() => Vec::new(),
                None => {
                    out.push(Violation::Malformed(format!("Key={h:?} Child={c:?}")));
                    continue;
                }
            };
            if listing_hash(&parent, c) != h {
                out.push(Violation::Malformed(format!(
                    "Key={h:?} Child={c:?}: not where the listing row of {c} under /{} belongs",
                    parent.join("/")
                )));
                continue;
            }
            let mut path = parent.clone();
            path.push(c.to_owned());
            if let Some((plast, pparent)) = parent.split_last()
                && !listings.contains(&(listing_hash(pparent, plast), plast.clone()))
            {
                out.push(Violation::NotUpwardClosed(path.clone()));
            }
            if r.contains(&moving) {
                out.push(Violation::Lock(path.clone()));
            }
            if r.contains(&deleting) {
                out.push(Violation::RemovalMark(path));
            }
        }
    }
    out
}

/// The sharded directories the table's settings row records: each template's components
/// (`None` for a `*`) and its shards.
struct Sharded(Vec<(Vec<Option<String>>, u32)>);

impl Sharded {
    fn from_rows(rows: &[Item], sc: char) -> Self {
        let key = dynatree::storage::TableSettings::key(sc);
        let mut dirs = Vec::new();
        for r in rows {
            if r.get_s("Key") != Some(key.hash.as_str())
                || r.get_s("Child") != Some(key.range.as_str())
            {
                continue;
            }
            if let Some(dynatree::storage::Value::M(m)) = r.get("sharded") {
                for (template, n) in m {
                    let dynatree::storage::Value::N(n) = n else {
                        continue;
                    };
                    let Ok(n) = n.parse::<u32>() else {
                        continue;
                    };
                    let parts = template
                        .split('/')
                        .map(|c| (c != "*").then(|| c.to_owned()))
                        .collect();
                    dirs.push((parts, n));
                }
            }
        }
        Self(dirs)
    }

    /// The `Key` of the listing row of `name` under `parent`.
    fn listing_hash(&self, parent: &[String], name: &str, sc: char) -> String {
        let mut s = String::from(sc);
        for c in parent {
            s.push_str(c);
            s.push(sc);
        }
        let shards = self.0.iter().find(|(t, _)| {
            t.len() == parent.len()
                && t.iter()
                    .zip(parent)
                    .all(|(t, c)| t.as_ref().is_none_or(|t| t == c))
        });
        if let Some((_, n)) = shards {
            // FNV-1a of the name's bytes.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in name.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            s.push(sc);
            s.push_str(&format!("s{}", h % u64::from(*n)));
        }
        s
    }
}

/// What a [`Model`] holds at a path: an object's user attributes, or a link's target.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// An object: its attributes, without keys and bookkeeping.
    Object(Item),
    /// A link to this path.
    Link(Vec<String>),
}

/// A model of a tree's objects (path → object or link), with the semantics of each `Tree`
/// operation, for the serial-order check of [`Sim`](super::Sim): after a schedule, the real
/// objects must equal the model after the operations in some serial order.
///
/// Each method returns the [`ErrorKind`] the real operation returns in that state (and may
/// change the model on an error, as the real operation does, e.g. a re-parent that stops at a
/// taken name).
///
/// # Examples
///
/// ```
/// use dynatree::{ErrorKind, ops::LinkPolicy};
/// use dynatree_testing::sim::Model;
///
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// let mut m = Model::default();
/// m.put(["a", "b"], &V { v: 1 }).unwrap();
/// assert_eq!(m.create(["a", "b"], &V { v: 2 }), Err(ErrorKind::AlreadyExists));
/// m.move_subtree(["a"], ["c"], LinkPolicy::Report).unwrap();
/// assert!(m.get(["c", "b"]).is_some() && !m.has_node(["a"]));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    objects: BTreeMap<Vec<String>, Stored>,
}

fn comps(p: impl IntoPath) -> Result<Vec<String>, ErrorKind> {
    p.into_path()
        .map(|p| p.components().to_vec())
        .map_err(|e| e.kind())
}

fn item_of<T: Serialize + ?Sized>(v: &T) -> Result<Item, ErrorKind> {
    Item::from_serialize(v).map_err(|e| e.kind())
}

fn under(p: &[String], prefix: &[String]) -> bool {
    p.len() >= prefix.len() && p[..prefix.len()] == *prefix
}

impl Model {
    /// The model of the objects in `rows` (raw rows of a tree with reserved character
    /// `reserved`): listing rows and bookkeeping rows are skipped, bookkeeping attributes
    /// dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Tree, storage::Value};
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::{Model, Stored};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// tree.put(["a", "b"], &V { v: 1 }).await?;
    /// tree.put_link(["l"], ["a", "b"]).await?;
    /// let m = Model::from_rows(&table.rows(), '¦');
    /// assert_eq!(m.objects().len(), 2); // no listing rows, no `a` of its own
    /// let Some(Stored::Object(item)) = m.get(["a", "b"]) else { panic!("no object at a/b") };
    /// assert_eq!(item.get("v"), Some(&Value::N("1".into())));
    /// assert_eq!(item.len(), 1); // keys and bookkeeping dropped
    /// assert_eq!(m.get(["l"]), Some(&Stored::Link(vec!["a".into(), "b".into()])));
    /// # Ok(()) }
    /// ```
    pub fn from_rows(rows: &[Item], reserved: char) -> Self {
        let sc = reserved.to_string();
        let mut objects = BTreeMap::new();
        for r in rows {
            let (Some(h), Some(c)) = (r.get_s("Key"), r.get_s("Child")) else {
                continue;
            };
            // A fence row (fenced puts) is no object.
            if c != sc || h.starts_with(&format!("{sc}{sc}")) || r.contains(&format!("{sc}fence")) {
                continue;
            }
            let Some(rest) = h.strip_prefix(&sc) else {
                continue;
            };
            let path: Vec<String> = rest.split(reserved).map(str::to_owned).collect();
            // No path has an empty component: a shard guard of a sharded directory, or other
            // bookkeeping, is no object.
            if path.iter().any(String::is_empty) {
                continue;
            }
            let stored = match r.get_s(&sc) {
                Some(t) => Stored::Link(
                    t.strip_prefix(&sc)
                        .unwrap_or(t)
                        .split(reserved)
                        .map(str::to_owned)
                        .collect(),
                ),
                None => {
                    let item: Item = r
                        .clone()
                        .into_iter()
                        .filter(|(n, _)| n != "Key" && n != "Child" && !n.starts_with(&sc))
                        .collect();
                    Stored::Object(item)
                }
            };
            objects.insert(path, stored);
        }
        Self { objects }
    }

    /// Every object and link, by path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["b"], &V { v: 2 }).unwrap();
    /// m.put(["a", "x"], &V { v: 1 }).unwrap();
    /// let paths: Vec<&Vec<String>> = m.objects().keys().collect();
    /// assert_eq!(paths, [&vec!["a".to_owned(), "x".to_owned()], &vec!["b".to_owned()]]);
    /// ```
    pub fn objects(&self) -> &BTreeMap<Vec<String>, Stored> {
        &self.objects
    }

    /// What is stored at `path` (links not followed).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::{Model, Stored};
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// m.put_link(["l"], ["a"]).unwrap();
    /// assert!(matches!(m.get(["a"]), Some(Stored::Object(_))));
    /// assert_eq!(m.get(["l"]), Some(&Stored::Link(vec!["a".into()]))); // not followed
    /// assert_eq!(m.get(["b"]), None);
    /// ```
    pub fn get(&self, path: impl IntoPath) -> Option<&Stored> {
        self.objects.get(&comps(path).ok()?)
    }

    /// Whether `path` is a node: an object there or below (its listing row exists).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a", "b"], &V { v: 1 }).unwrap();
    /// assert!(m.has_node(["a"]) && m.has_node(["a", "b"]));
    /// assert!(m.get(["a"]).is_none()); // a node without an object of its own
    /// assert!(!m.has_node(["b"]));
    /// ```
    pub fn has_node(&self, path: impl IntoPath) -> bool {
        comps(path).is_ok_and(|p| self.node(&p))
    }

    /// [`Tree::get`](dynatree::Tree::get): the object at `path` as a `T`, following links
    /// (at most 8 hops, the tree's default); `None` if nothing is there or a link's target is
    /// missing. For the history of [`Calls::call`](super::Calls::call).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`], [`ErrorKind::LinkLoop`], [`ErrorKind::Serialization`], as
    /// the tree's.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ErrorKind;
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// m.put_link(["l"], ["a"]).unwrap();
    /// assert_eq!(m.read::<V>(["l"]), Ok(Some(V { v: 1 })));
    /// assert_eq!(m.read::<V>(["b"]), Ok(None));
    /// m.put_link(["x"], ["x"]).unwrap();
    /// assert_eq!(m.read::<V>(["x"]), Err(ErrorKind::LinkLoop));
    /// ```
    pub fn read<T: DeserializeOwned>(&self, path: impl IntoPath) -> Result<Option<T>, ErrorKind> {
        let mut at = comps(path)?;
        for _ in 0..=8 {
            match self.objects.get(&at) {
                None => return Ok(None),
                Some(Stored::Object(item)) => {
                    return item.to_deserialize().map(Some).map_err(|e| e.kind());
                }
                Some(Stored::Link(t)) => at.clone_from(t),
            }
        }
        Err(ErrorKind::LinkLoop)
    }

    /// [`Tree::list`](dynatree::Tree::list): the names of the children of `path` (nodes with
    /// an object or link at or below them), in the order of their UTF-8 bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a", "y", "z"], &V { v: 1 }).unwrap();
    /// m.put(["a", "x"], &V { v: 2 }).unwrap();
    /// m.put(["b"], &V { v: 3 }).unwrap();
    /// assert_eq!(m.children(["a"]), ["x", "y"]);
    /// assert_eq!(m.children(dynatree::Path::root()), ["a", "b"]);
    /// ```
    pub fn children(&self, path: impl IntoPath) -> Vec<String> {
        let Ok(p) = comps(path) else {
            return Vec::new();
        };
        let names: BTreeSet<&String> = self
            .objects
            .keys()
            .filter(|k| k.len() > p.len() && under(k, &p))
            .map(|k| &k[p.len()])
            .collect();
        names.into_iter().cloned().collect()
    }

    /// Keeps only the objects and links whose path `keep` accepts: the part of a tree that
    /// one part of a history covers (see [`check_history`](super::check_history)).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a", "x"], &V { v: 1 }).unwrap();
    /// m.put(["b"], &V { v: 2 }).unwrap();
    /// m.retain(|p| p[0] == "a");
    /// assert_eq!(m.objects().len(), 1);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(&[String]) -> bool) {
        self.objects.retain(|p, _| keep(p));
    }

    fn node(&self, p: &[String]) -> bool {
        self.objects.keys().any(|k| under(k, p))
    }

    /// [`Tree::put`](dynatree::Tree::put).
    ///
    /// # Errors
    ///
    /// As the tree's, for an invalid path or value.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Value;
    /// use dynatree_testing::sim::{Model, Stored};
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// m.put(["a"], &V { v: 2 }).unwrap(); // replaces
    /// let Some(Stored::Object(item)) = m.get(["a"]) else { panic!() };
    /// assert_eq!(item.get("v"), Some(&Value::N("2".into())));
    /// assert_eq!(m.put(["a", ""], &V { v: 3 }), Err(dynatree::ErrorKind::InvalidPath));
    /// ```
    pub fn put<T: Serialize + ?Sized>(
        &mut self,
        path: impl IntoPath,
        value: &T,
    ) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        self.objects.insert(p, Stored::Object(item_of(value)?));
        Ok(())
    }

    /// [`Tree::put_link`](dynatree::Tree::put_link).
    ///
    /// # Errors
    ///
    /// As the tree's, for an invalid path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::{Model, Stored};
    ///
    /// let mut m = Model::default();
    /// m.put_link(["l"], ["a", "b"]).unwrap(); // the target need not exist
    /// assert_eq!(m.get(["l"]), Some(&Stored::Link(vec!["a".into(), "b".into()])));
    /// assert!(!m.has_node(["a"]));
    /// ```
    pub fn put_link(
        &mut self,
        path: impl IntoPath,
        target: impl IntoPath,
    ) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        let t = comps(target)?;
        self.objects.insert(p, Stored::Link(t));
        Ok(())
    }

    /// [`Repository::create`](dynatree::Repository::create): `AlreadyExists` if an object or
    /// link is at `path`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ErrorKind;
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// assert_eq!(m.create(["a"], &V { v: 1 }), Ok(()));
    /// assert_eq!(m.create(["a"], &V { v: 2 }), Err(ErrorKind::AlreadyExists));
    /// m.put_link(["l"], ["a"]).unwrap();
    /// assert_eq!(m.create(["l"], &V { v: 3 }), Err(ErrorKind::AlreadyExists));
    /// ```
    pub fn create<T: Serialize + ?Sized>(
        &mut self,
        path: impl IntoPath,
        value: &T,
    ) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        if self.objects.contains_key(&p) {
            return Err(ErrorKind::AlreadyExists);
        }
        self.objects.insert(p, Stored::Object(item_of(value)?));
        Ok(())
    }

    /// [`Repository::update`](dynatree::Repository::update) of a type without a version
    /// field: `ConditionFailed` if nothing is at `path`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ConditionFailed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ErrorKind;
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// assert_eq!(m.update(["a"], &V { v: 1 }), Err(ErrorKind::ConditionFailed));
    /// assert!(m.get(["a"]).is_none());
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// assert_eq!(m.update(["a"], &V { v: 2 }), Ok(()));
    /// ```
    pub fn update<T: Serialize + ?Sized>(
        &mut self,
        path: impl IntoPath,
        value: &T,
    ) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        if !self.objects.contains_key(&p) {
            return Err(ErrorKind::ConditionFailed);
        }
        self.objects.insert(p, Stored::Object(item_of(value)?));
        Ok(())
    }

    /// [`Tree::delete`](dynatree::Tree::delete): the object only; children stay.
    ///
    /// # Errors
    ///
    /// For an invalid path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// m.put(["a", "b"], &V { v: 2 }).unwrap();
    /// m.delete(["a"]).unwrap();
    /// assert!(m.get(["a"]).is_none());
    /// assert!(m.get(["a", "b"]).is_some()); // children stay
    /// m.delete(["nothing"]).unwrap(); // deleting nothing is fine
    /// ```
    pub fn delete(&mut self, path: impl IntoPath) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        self.objects.remove(&p);
        Ok(())
    }

    /// [`Tree::delete_subtree`](dynatree::Tree::delete_subtree): the object and every
    /// descendant.
    ///
    /// # Errors
    ///
    /// For an invalid path.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// m.put(["a", "b", "c"], &V { v: 2 }).unwrap();
    /// m.put(["ab"], &V { v: 3 }).unwrap();
    /// m.delete_subtree(["a"]).unwrap();
    /// assert!(!m.has_node(["a"]));
    /// assert!(m.get(["ab"]).is_some()); // whole components only
    /// ```
    pub fn delete_subtree(&mut self, path: impl IntoPath) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        self.objects.retain(|k, _| !under(k, &p));
        Ok(())
    }

    /// [`Tree::delete_node`](dynatree::Tree::delete_node).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::HasChildren`] with [`OnChildren::Refuse`]; [`ErrorKind::AlreadyExists`]
    /// when re-parenting meets a taken name (children moved before it stay moved).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, ops::OnChildren};
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a"], &V { v: 1 }).unwrap();
    /// m.put(["a", "b"], &V { v: 2 }).unwrap();
    /// assert_eq!(m.delete_node(["a"], OnChildren::Refuse), Err(ErrorKind::HasChildren));
    /// m.delete_node(["a"], OnChildren::Reparent).unwrap();
    /// assert!(m.get(["a"]).is_none());
    /// assert!(m.get(["b"]).is_some()); // `a/b` moved up to `b`
    /// ```
    pub fn delete_node(
        &mut self,
        path: impl IntoPath,
        on_children: OnChildren,
    ) -> Result<(), ErrorKind> {
        let p = comps(path)?;
        let children: BTreeSet<String> = self
            .objects
            .keys()
            .filter(|k| k.len() > p.len() && under(k, &p))
            .map(|k| k[p.len()].clone())
            .collect();
        match on_children {
            OnChildren::Recursive => {
                return self.delete_subtree(Path::new(p).map_err(|e| e.kind())?);
            }
            OnChildren::Reparent => {
                let parent = &p[..p.len() - 1];
                for c in children {
                    let mut from = p.clone();
                    from.push(c.clone());
                    let mut to = parent.to_vec();
                    to.push(c);
                    self.relocate(&from, &to, true, LinkPolicy::Rewrite)?;
                }
            }
            _ => {
                if !children.is_empty() {
                    return Err(ErrorKind::HasChildren);
                }
            }
        }
        self.objects.remove(&p);
        Ok(())
    }

    /// [`Tree::move_subtree_with`](dynatree::Tree::move_subtree_with).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] if one path contains the other, [`ErrorKind::NotFound`] if
    /// `from` is no node, [`ErrorKind::AlreadyExists`] if `to` is one.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, ops::LinkPolicy};
    /// use dynatree_testing::sim::{Model, Stored};
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a", "b"], &V { v: 1 }).unwrap();
    /// m.put_link(["l"], ["a", "b"]).unwrap();
    /// m.move_subtree(["a"], ["c"], LinkPolicy::Rewrite).unwrap();
    /// assert!(!m.has_node(["a"]) && m.get(["c", "b"]).is_some());
    /// assert_eq!(m.get(["l"]), Some(&Stored::Link(vec!["c".into(), "b".into()])));
    /// assert_eq!(m.move_subtree(["a"], ["d"], LinkPolicy::Report), Err(ErrorKind::NotFound));
    /// assert_eq!(m.move_subtree(["c"], ["c", "x"], LinkPolicy::Report), Err(ErrorKind::InvalidPath));
    /// ```
    pub fn move_subtree(
        &mut self,
        from: impl IntoPath,
        to: impl IntoPath,
        links: LinkPolicy,
    ) -> Result<(), ErrorKind> {
        let (f, t) = (comps(from)?, comps(to)?);
        self.relocate(&f, &t, true, links)
    }

    /// [`Tree::copy_subtree`](dynatree::Tree::copy_subtree).
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Model::move_subtree).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ErrorKind;
    /// use dynatree_testing::sim::Model;
    ///
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let mut m = Model::default();
    /// m.put(["a", "b"], &V { v: 1 }).unwrap();
    /// m.copy_subtree(["a"], ["c"]).unwrap();
    /// assert!(m.get(["a", "b"]).is_some() && m.get(["c", "b"]).is_some());
    /// assert_eq!(m.copy_subtree(["a"], ["c"]), Err(ErrorKind::AlreadyExists));
    /// ```
    pub fn copy_subtree(
        &mut self,
        from: impl IntoPath,
        to: impl IntoPath,
    ) -> Result<(), ErrorKind> {
        let (f, t) = (comps(from)?, comps(to)?);
        self.relocate(&f, &t, false, LinkPolicy::Ignore)
    }

    fn relocate(
        &mut self,
        from: &[String],
        to: &[String],
        remove: bool,
        links: LinkPolicy,
    ) -> Result<(), ErrorKind> {
        if under(to, from) || under(from, to) {
            return Err(ErrorKind::InvalidPath);
        }
        if !self.node(from) {
            return Err(ErrorKind::NotFound);
        }
        if self.node(to) {
            return Err(ErrorKind::AlreadyExists);
        }
        let moved: Vec<(Vec<String>, Stored)> = self
            .objects
            .iter()
            .filter(|(k, _)| under(k, from))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in moved {
            if remove {
                self.objects.remove(&k);
            }
            let mut nk = to.to_vec();
            nk.extend_from_slice(&k[from.len()..]);
            self.objects.insert(nk, v);
        }
        if remove && links == LinkPolicy::Rewrite {
            for v in self.objects.values_mut() {
                if let Stored::Link(t) = v
                    && under(t, from)
                {
                    let mut nt = to.to_vec();
                    nt.extend_from_slice(&t[from.len()..]);
                    *t = nt;
                }
            }
        }
        Ok(())
    }
}
