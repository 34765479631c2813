//! A check split across workers: [`CheckPart`], what one worker's share of the Scan found,
//! saved between runs and merged into one [`Report`](super::Report).
//!
//! Each row of the layout is judged by rows in other partitions (an object by its listing row
//! in its parent's partition, a listing row by the object or children it names, a link by its
//! target), and a Scan segment holds whole partitions, so a part cannot judge its own rows. It
//! keeps what the judgement needs of each row instead (the facts [`Check::run`] keeps in
//! memory: a listing row's mark and lock, an object's link, expiry, index state and hold, an
//! intent's operation, the rows that do not parse, and the full rows between which
//! denormalized copies are compared), and the merge joins them and confirms the suspects as a
//! whole check does.
//!
//! [`Check::run`]: super::Check::run

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::scan::{IntentRow, ObjectRow, Rows, ScanState};
use super::{Class, Violation};
use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::item::json::{ItemJson, value_from_json};
use crate::path::Path;
use crate::storage::{Key, Storage};
use crate::tree::{Operation, Tree};

/// The format name a saved part carries.
const FORMAT: &str = "dynatree check part";
/// The version of the saved form this version of dynatree writes and reads.
const VERSION: u32 = 1;

/// What one worker's share of a check's Scan found: some segments of one parallel Scan, each
/// finished or with the key it goes on after. Made by [`Check::run_part`], saved (serde: JSON
/// with `serde_json`, or any self-describing format), [resumed][`Check::resume`] if unfinished,
/// and merged with the other parts by [`Check::merge`] into the check's report.
///
/// A part holds a few facts per row of its segments, not the rows: about the length of the
/// row's path, plus the full rows of types with denormalized copies.
///
/// [`Check::run_part`]: super::Check::run_part
/// [`Check::resume`]: super::Check::resume
/// [`Check::merge`]: super::Check::merge
///
/// # Examples
///
/// Two workers share a Scan of 4 segments; the first stops at its time limit, is saved, and
/// goes on in a later run; a third process merges their parts.
///
/// ```
/// use std::time::Duration;
/// use dynatree::Tree;
/// use dynatree::check::CheckPart;
/// use dynatree::storage::{Condition, Key, Storage};
/// use dynatree_testing::FakeTable;
///
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// tree.put(["a", "b"], &V { v: 1 }).await?;
/// table.put_item(Key::new("¦", "orphan").into_item(), Condition::Always).await?;
///
/// let first = tree.check().segments(4).part(0..2).time_limit(Duration::ZERO).run_part().await?;
/// assert!(!first.is_complete());
/// let saved = serde_json::to_string(&first)?;
/// let first: CheckPart = serde_json::from_str(&saved)?;
/// let first = tree.check().resume(first).run_part().await?;
/// assert!(first.is_complete());
/// let second = tree.check().segments(4).part(2..4).run_part().await?;
///
/// let report = tree.check().grace(Duration::ZERO).merge([first, second]).await?;
/// assert_eq!(report.rows(), 4);
/// assert_eq!(report.violations().len(), 1); // the listing row naming nothing
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CheckPart {
    wire: Wire,
}

impl CheckPart {
    /// Whether every segment of the part was scanned to its end.
    ///
    /// # Examples
    ///
    /// See [`CheckPart`].
    pub fn is_complete(&self) -> bool {
        self.wire.pending.is_empty()
    }

    /// The segments of the Scan this part covers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// let part = tree.check().segments(8).part(2..5).run_part().await?;
    /// assert_eq!(part.segments(), 2..5);
    /// assert_eq!(part.total_segments(), 8);
    /// # Ok(()) }
    /// ```
    pub fn segments(&self) -> Range<u32> {
        self.wire.segments[0]..self.wire.segments[1]
    }

    /// The total segments of the Scan the part belongs to.
    ///
    /// # Examples
    ///
    /// See [`segments`](Self::segments).
    pub fn total_segments(&self) -> u32 {
        self.wire.total_segments
    }

    /// Rows scanned so far.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["a"], &V { v: 1 }).await?;
    /// let part = tree.check().run_part().await?;
    /// assert_eq!(part.rows(), 2); // a listing row and an object row
    /// assert_eq!(part.read_units(), 0.5);
    /// assert_eq!(part.pages(), 1);
    /// # Ok(()) }
    /// ```
    pub fn rows(&self) -> u64 {
        self.wire.rows
    }

    /// Read capacity units the part's Scan consumed so far (as [`Report::read_units`]).
    ///
    /// [`Report::read_units`]: super::Report::read_units
    ///
    /// # Examples
    ///
    /// See [`rows`](Self::rows).
    pub fn read_units(&self) -> f64 {
        self.wire.read_units
    }

    /// Scan pages read so far.
    ///
    /// # Examples
    ///
    /// See [`rows`](Self::rows).
    pub fn pages(&self) -> u64 {
        self.wire.pages
    }

    /// The saved form of what a Scan found.
    pub(super) fn from_state<S: Storage + 'static>(tree: &Tree<S>, state: ScanState) -> Self {
        let ScanState {
            rows,
            total,
            range,
            pending,
            read_units,
            pages,
            scan_time,
        } = state;
        let mut listings: Vec<WireListing> = rows
            .listings
            .into_iter()
            .map(|(path, (mark, lock))| WireListing {
                path: path.escaped(),
                mark,
                lock,
            })
            .collect();
        listings.sort_by(|a, b| a.path.cmp(&b.path));
        let copies: BTreeMap<String, serde_json::Value> = rows
            .denorm_rows
            .iter()
            .map(|(path, item)| {
                (
                    path.escaped(),
                    serde_json::to_value(ItemJson(item)).unwrap_or(serde_json::Value::Null),
                )
            })
            .collect();
        let mut link_entries: Vec<[String; 2]> = rows
            .link_entries
            .iter()
            .map(|(l, t)| [l.escaped(), t.escaped()])
            .collect();
        link_entries.sort();
        let mut lanes: Vec<String> = rows.lanes.iter().cloned().collect();
        lanes.sort();
        let mut guards: Vec<(String, u32)> =
            rows.guards.iter().map(|(d, k)| (d.escaped(), *k)).collect();
        guards.sort();
        let mut objects: Vec<WireObject> = rows
            .objects
            .into_iter()
            .map(|(path, o)| WireObject {
                path: path.escaped(),
                link: o.link.map(|l| l.escaped()),
                expired: o.expired,
                missing_index: o.missing_index,
                held: o.held,
            })
            .collect();
        objects.sort_by(|a, b| a.path.cmp(&b.path));
        let intents = rows
            .intents
            .into_iter()
            .map(|(id, i)| {
                (
                    id,
                    WireIntent {
                        abandoned: i.abandoned,
                        detail: i.detail,
                        operation: i.op.0.as_str().to_owned(),
                        from: i.op.1.escaped(),
                        to: i.op.2.escaped(),
                    },
                )
            })
            .collect();
        let violations = rows
            .unparsable
            .iter()
            .chain(&rows.malformed)
            .map(WireViolation::from)
            .collect();
        Self {
            wire: Wire {
                format: FORMAT.to_owned(),
                version: VERSION,
                reserved: tree.cx.inner.layout.reserved(),
                total_segments: total,
                segments: [range.start, range.end],
                pending: pending
                    .into_iter()
                    .map(|(segment, after)| WirePending {
                        segment,
                        after: after.map(|k| [k.hash, k.range]),
                    })
                    .collect(),
                rows: rows.count,
                read_units,
                pages,
                scan_ms: u64::try_from(scan_time.as_millis()).unwrap_or(u64::MAX),
                listings,
                objects,
                intents,
                violations,
                copies,
                link_entries,
                lanes,
                guards,
            },
        }
    }

    /// What the part found, to scan on from or to merge.
    pub(super) fn into_state<S: Storage + 'static>(
        self,
        tree: &Tree<S>,
        bucket: Option<super::Bucket>,
    ) -> Result<ScanState> {
        let w = self.wire;
        let invalid = |what: String| Error::new(ErrorKind::InvalidArgument, what);
        if w.format != FORMAT || w.version != VERSION {
            return Err(invalid(format!(
                "not a check part of this version: format `{}` version {} (this version reads `{FORMAT}` version {VERSION})",
                w.format, w.version
            )));
        }
        let reserved = tree.cx.inner.layout.reserved();
        if w.reserved != reserved {
            return Err(invalid(format!(
                "a check part of a tree whose reserved character is `{}`, not `{reserved}`",
                w.reserved
            )));
        }
        let [start, end] = w.segments;
        if start >= end || end > w.total_segments {
            return Err(invalid(format!(
                "a check part of segments {start}..{end} of {}",
                w.total_segments
            )));
        }
        let path = |s: &str| {
            Path::parse_escaped(s).map_err(|e| invalid(format!("a check part's path `{s}`: {e}")))
        };
        let mut state = ScanState::new(tree, w.total_segments, start..end)?;
        state.pending.clear();
        for p in w.pending {
            if !(start..end).contains(&p.segment) {
                return Err(invalid(format!(
                    "a check part of segments {start}..{end} goes on with segment {}",
                    p.segment
                )));
            }
            state
                .pending
                .insert(p.segment, p.after.map(|[h, r]| Key::new(h, r)));
        }
        state.read_units = w.read_units;
        state.pages = w.pages;
        state.scan_time = Duration::from_millis(w.scan_ms);
        // In a bucket, only what it keeps (see `Check::bucket`), so that a part's facts outside
        // it are never held.
        let keeps = |p: &Path| bucket.is_none_or(|b| b.keeps(p));
        let judges = |p: Option<&Path>| bucket.is_none_or(|b| b.judges(p));
        let rows: &mut Rows = &mut state.rows;
        rows.count = w.rows;
        for l in w.listings {
            let p = path(&l.path)?;
            if let Some(parent) = p.parent().filter(|q| keeps(q)) {
                rows.parents.insert(parent);
            }
            if keeps(&p) {
                rows.listings.insert(p, (l.mark, l.lock));
            }
        }
        for [l, t] in &w.link_entries {
            let l = path(l)?;
            if keeps(&l) {
                rows.link_entries.insert((l, path(t)?));
            }
        }
        if judges(None) {
            rows.lanes.extend(w.lanes);
        }
        for (d, k) in w.guards {
            let d = path(&d)?;
            if keeps(&d) {
                rows.guards.insert((d, k));
            }
        }
        for o in w.objects {
            let p = path(&o.path)?;
            if !keeps(&p) {
                continue;
            }
            let link = o.link.as_deref().map(path).transpose()?;
            rows.objects.insert(
                p,
                ObjectRow {
                    link,
                    expired: o.expired,
                    missing_index: o.missing_index,
                    held: o.held,
                },
            );
        }
        for (id, i) in w.intents {
            let op = Operation::parse(&i.operation).ok_or_else(|| {
                invalid(format!(
                    "a check part's intent {id}: operation `{}` is unknown",
                    i.operation
                ))
            })?;
            rows.intents.insert(
                id,
                IntentRow {
                    abandoned: i.abandoned,
                    detail: i.detail,
                    op: (op, path(&i.from)?, path(&i.to)?),
                },
            );
        }
        for v in w.violations {
            let v = v.into_violation(&path)?;
            if judges(v.path.as_ref()) {
                rows.unparsable.push(v);
            }
        }
        for (p, attrs) in w.copies {
            if !keeps(&path(&p)?) {
                continue;
            }
            let serde_json::Value::Object(attrs) = attrs else {
                return Err(invalid(format!("a check part's row at `{p}` is not a map")));
            };
            let mut item = Item::new();
            for (name, v) in &attrs {
                let value = value_from_json(v).map_err(|e| {
                    invalid(format!(
                        "a check part's row at `{p}`, attribute `{name}`: {e}"
                    ))
                })?;
                item.insert(name.clone(), value);
            }
            rows.denorm_rows.insert(path(&p)?, item);
        }
        Ok(state)
    }
}

/// The parts of one check joined: every segment scanned once.
pub(super) struct Merged {
    pub(super) rows: Rows,
    pub(super) total: u32,
    pub(super) read_units: f64,
    pub(super) pages: u64,
    /// The longest part's scanning.
    pub(super) scan_time: Duration,
}

/// Joins `parts` (one at a time, as the iterator gives them), checking that they are
/// finished and cover every segment of one Scan exactly once; with `bucket`, each part's rows
/// outside it are dropped as the part is read (see [`Check::bucket`](super::Check::bucket)).
pub(super) fn merge<S: Storage + 'static>(
    tree: &Tree<S>,
    parts: impl IntoIterator<Item = CheckPart>,
    bucket: Option<super::Bucket>,
) -> Result<Merged> {
    let invalid = |what: String| Error::new(ErrorKind::InvalidArgument, what);
    let mut total = None;
    let mut covered: BTreeMap<u32, Range<u32>> = BTreeMap::new();
    let mut merged = Merged {
        rows: Rows::new(tree).in_bucket(bucket),
        total: 0,
        read_units: 0.0,
        pages: 0,
        scan_time: Duration::ZERO,
    };
    for part in parts {
        let total = *total.get_or_insert(part.total_segments());
        if part.total_segments() != total {
            return Err(invalid(format!(
                "check parts of different Scans: {} and {total} segments in all",
                part.total_segments()
            )));
        }
        let r = part.segments();
        if !part.is_complete() {
            return Err(invalid(format!(
                "the check part of segments {}..{} is not finished: resume it first",
                r.start, r.end
            )));
        }
        if let Some((_, other)) = covered
            .iter()
            .find(|(_, o)| o.start < r.end && r.start < o.end)
        {
            return Err(invalid(format!(
                "check parts overlap: segments {}..{} and {}..{}",
                other.start, other.end, r.start, r.end
            )));
        }
        covered.insert(r.start, r);
        // Only the bucket's share of the part is ever built.
        let state = part.into_state(tree, bucket)?;
        let rows = state.rows;
        let into = &mut merged.rows;
        into.count += rows.count;
        into.listings.extend(rows.listings);
        into.parents.extend(rows.parents);
        into.objects.extend(rows.objects);
        into.intents.extend(rows.intents);
        into.unparsable.extend(rows.unparsable);
        into.malformed.extend(rows.malformed);
        into.denorm_rows.extend(rows.denorm_rows);
        into.link_entries.extend(rows.link_entries);
        into.lanes.extend(rows.lanes);
        into.guards.extend(rows.guards);
        merged.read_units += state.read_units;
        merged.pages += state.pages;
        merged.scan_time = merged.scan_time.max(state.scan_time);
    }
    let Some(total) = total else {
        return Err(invalid("no check parts to merge".into()));
    };
    let mut next = 0;
    for r in covered.values() {
        if r.start != next {
            return Err(invalid(format!(
                "no check part scanned segments {next}..{} of {total}",
                r.start
            )));
        }
        next = r.end;
    }
    if next != total {
        return Err(invalid(format!(
            "no check part scanned segments {next}..{total} of {total}"
        )));
    }
    merged.total = total;
    Ok(merged)
}

impl Serialize for CheckPart {
    fn serialize<Z: serde::Serializer>(&self, s: Z) -> std::result::Result<Z::Ok, Z::Error> {
        self.wire.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CheckPart {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(Self {
            wire: Wire::deserialize(d)?,
        })
    }
}

/// The saved form. Paths are escaped (`/a/b%2Fc`), items in DynamoDB's JSON form.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    format: String,
    version: u32,
    reserved: char,
    total_segments: u32,
    /// The first segment and the one after the last.
    segments: [u32; 2],
    /// The segments not finished, each with the key (hash, range) its next page starts after.
    pending: Vec<WirePending>,
    rows: u64,
    read_units: f64,
    pages: u64,
    scan_ms: u64,
    listings: Vec<WireListing>,
    objects: Vec<WireObject>,
    intents: BTreeMap<String, WireIntent>,
    violations: Vec<WireViolation>,
    /// Full rows of the objects between which denormalized copies are compared.
    copies: BTreeMap<String, serde_json::Value>,
    /// The link index's entries: (link, target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    link_entries: Vec<[String; 2]>,
    /// The range keys of intents' lane rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    lanes: Vec<String>,
    /// The shard guards of sharded directories: (directory, shard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    guards: Vec<(String, u32)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePending {
    segment: u32,
    after: Option<[String; 2]>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireListing {
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mark: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireObject {
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    link: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    expired: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    missing_index: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireIntent {
    abandoned: bool,
    detail: String,
    operation: String,
    from: String,
    to: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireViolation {
    class: String,
    path: Option<String>,
    key: [String; 2],
    detail: String,
    token: Option<String>,
}

impl From<&Violation> for WireViolation {
    fn from(v: &Violation) -> Self {
        Self {
            class: v.class.name().to_owned(),
            path: v.path.as_ref().map(Path::escaped),
            key: [v.key.hash.clone(), v.key.range.clone()],
            detail: v.detail.clone(),
            token: v.token.clone(),
        }
    }
}

impl WireViolation {
    fn into_violation(self, path: &impl Fn(&str) -> Result<Path>) -> Result<Violation> {
        let class = Class::ALL
            .into_iter()
            .find(|c| c.name() == self.class)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("a check part's violation class `{}` is unknown", self.class),
                )
            })?;
        let [hash, range] = self.key;
        Ok(Violation {
            class,
            path: self.path.as_deref().map(path).transpose()?,
            key: Key::new(hash, range),
            detail: self.detail,
            token: self.token,
        })
    }
}
