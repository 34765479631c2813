//! The table's settings row: what [`Tree::create_table`](crate::Tree::create_table) created the
//! table for (its reserved character, the path index's depth, the secondary indexes and the
//! types that fill them), so that a program that did not create the table (the command line,
//! a second service) learns from the table how every write must look.

use std::collections::BTreeMap;

use super::{Condition, Key, Storage};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};

/// The settings a tree's table was created with, as [`Tree::create_table`](crate::Tree::create_table)
/// records them in one row of the table (partition `SC SC settings`, which no path's key can
/// equal, so listings, the Go library and exports never see it) when there is something to
/// record: a path index or a secondary index.
///
/// A program that did not create the table reads them with [`TableSettings::read`] and builds
/// its tree to match: a tree whose path index disagrees with them is refused before its first
/// request (see [`Tree::verify`](crate::Tree::verify)).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree::storage::TableSettings;
/// use dynatree_testing::FakeTable;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// Tree::builder(table.clone()).path_index(2).build()?.create_table().await?;
///
/// let settings = TableSettings::read(&table, '¦').await?.expect("written by create_table");
/// assert_eq!(settings.path_index, Some(2));
/// assert_eq!(settings.reserved, '¦');
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableSettings {
    /// The tree's reserved character.
    pub reserved: char,
    /// The depth of the path index, if the table has one.
    pub path_index: Option<usize>,
    /// The secondary indexes of the table, by name.
    pub indexes: Vec<IndexSettings>,
    /// The depth of the link index, if the table keeps one
    /// ([`TreeBuilder::link_index`](crate::TreeBuilder::link_index)): every tree on the
    /// table writes its entries.
    pub link_index: Option<usize>,
    /// The [sharded directories](crate::TreeBuilder::sharded) of the table: each template
    /// (with `*` for every `{field}`) and the partitions its directories' listing rows are
    /// spread over. Every tree on the table must agree.
    pub sharded: BTreeMap<String, u32>,
}

/// One secondary index of a table's [`TableSettings`].
///
/// # Examples
///
/// ```
/// use dynatree::storage::IndexSettings;
///
/// let ix = IndexSettings::new("by_email", false, ["Users/{id}"]);
/// assert_eq!(ix.templates, ["Users/{id}"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexSettings {
    /// The index's name (a global secondary index of the table).
    pub name: String,
    /// Whether it has a range key.
    pub has_range: bool,
    /// The path templates of the types whose objects it indexes (empty when the index was
    /// declared without its types, as the command line's `create-table --index` does).
    pub templates: Vec<String>,
}

impl IndexSettings {
    /// An index named `name`, filled by the types with `templates`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::IndexSettings;
    ///
    /// assert!(IndexSettings::new("by_created", true, Vec::<String>::new()).has_range);
    /// ```
    pub fn new(
        name: impl Into<String>,
        has_range: bool,
        templates: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            has_range,
            templates: templates.into_iter().map(Into::into).collect(),
        }
    }
}

const RESERVED: &str = "reserved";
const PATH_INDEX: &str = "path_index";
const INDEXES: &str = "indexes";
const HAS_RANGE: &str = "range";
const TEMPLATES: &str = "templates";
const LINK_INDEX: &str = "link_index";
const SHARDED: &str = "sharded";
/// A counter that makes each rewrite conditional on the row as read.
const REVISION: &str = "revision";

impl TableSettings {
    /// Settings with reserved character `reserved`, no path index and no secondary index.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::TableSettings;
    ///
    /// let s = TableSettings::new('¦');
    /// assert_eq!(s.path_index, None);
    /// assert!(s.indexes.is_empty());
    /// ```
    pub fn new(reserved: char) -> Self {
        Self {
            reserved,
            path_index: None,
            indexes: Vec::new(),
            link_index: None,
            sharded: BTreeMap::new(),
        }
    }

    /// The key of the settings row of a tree with reserved character `reserved`:
    /// `(SC SC settings, SC SC settings)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::TableSettings;
    ///
    /// let key = TableSettings::key('¦');
    /// assert_eq!(key.hash, "¦¦settings");
    /// ```
    pub fn key(reserved: char) -> Key {
        let name = format!("{reserved}{reserved}settings");
        Key::new(name.clone(), name)
    }

    /// Reads the settings of the tree with reserved character `reserved` from `storage` (one
    /// consistent GetItem); `None` if the table has none: created without a path index or
    /// secondary indexes (which need no row), by another program, or by a version of dynatree
    /// that did not record them.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::storage::TableSettings;
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// assert_eq!(TableSettings::read(&table, '¦').await?, None); // nothing beyond the defaults
    /// Tree::builder(table.clone()).path_index(1).build()?.create_table().await?;
    /// assert_eq!(TableSettings::read(&table, '¦').await?.unwrap().path_index, Some(1));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`] if the row does not hold settings as dynatree writes them;
    /// the backend's errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn read<S: Storage + ?Sized>(storage: &S, reserved: char) -> Result<Option<Self>> {
        let row = storage.get_item(&Self::key(reserved), true).await?;
        row.map(|r| Self::from_item(reserved, &r)).transpose()
    }

    fn from_item(reserved: char, item: &Item) -> Result<Self> {
        let bad = |what: &str| {
            Error::new(
                ErrorKind::Serialization,
                format!("the table's settings row has {what}"),
            )
        };
        let stored = item
            .get_s(RESERVED)
            .ok_or_else(|| bad("no reserved character"))?;
        if stored.chars().ne([reserved]) {
            return Err(bad("another reserved character"));
        }
        // A depth: absent, or a positive integer.
        let depth = |attr: &str, what: &str| match item.get(attr) {
            None => Ok(None),
            Some(Value::N(n)) => n
                .parse::<usize>()
                .ok()
                .filter(|d| *d > 0)
                .map(Some)
                .ok_or_else(|| bad(&format!("a {what} depth that is not a positive integer"))),
            Some(_) => Err(bad(&format!("a {what} depth that is not a number"))),
        };
        let path_index = depth(PATH_INDEX, "path index")?;
        let link_index = depth(LINK_INDEX, "link index")?;
        let mut indexes = Vec::new();
        match item.get(INDEXES) {
            None => {}
            Some(Value::M(m)) => {
                for (name, v) in m {
                    let Value::M(fields) = v else {
                        return Err(bad("an index that is not a map"));
                    };
                    let has_range = matches!(fields.get(HAS_RANGE), Some(Value::Bool(true)));
                    let templates = match fields.get(TEMPLATES) {
                        None => Vec::new(),
                        Some(Value::L(l)) => l
                            .iter()
                            .map(|t| match t {
                                Value::S(s) => Ok(s.clone()),
                                _ => Err(bad("an index template that is not a string")),
                            })
                            .collect::<Result<_>>()?,
                        Some(_) => return Err(bad("index templates that are not a list")),
                    };
                    indexes.push(IndexSettings {
                        name: name.clone(),
                        has_range,
                        templates,
                    });
                }
            }
            Some(_) => return Err(bad("indexes that are not a map")),
        }
        let mut sharded = BTreeMap::new();
        match item.get(SHARDED) {
            None => {}
            Some(Value::M(m)) => {
                for (template, n) in m {
                    let n = match n {
                        Value::N(n) => n.parse::<u32>().ok().filter(|n| *n >= 2),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        bad("a sharded directory whose count is not an integer of 2 or more")
                    })?;
                    sharded.insert(template.clone(), n);
                }
            }
            Some(_) => return Err(bad("sharded directories that are not a map")),
        }
        Ok(Self {
            reserved,
            path_index,
            indexes,
            link_index,
            sharded,
        })
    }

    fn to_item(&self, revision: u64) -> Item {
        let key = Self::key(self.reserved);
        let mut item = Item::new();
        item.insert(super::HASH_KEY, Value::S(key.hash));
        item.insert(super::RANGE_KEY, Value::S(key.range));
        item.insert(RESERVED, Value::S(self.reserved.to_string()));
        if let Some(d) = self.path_index {
            item.insert(PATH_INDEX, Value::N(d.to_string()));
        }
        if let Some(d) = self.link_index {
            item.insert(LINK_INDEX, Value::N(d.to_string()));
        }
        if !self.sharded.is_empty() {
            let m = self
                .sharded
                .iter()
                .map(|(t, n)| (t.clone(), Value::N(n.to_string())))
                .collect();
            item.insert(SHARDED, Value::M(m));
        }
        if !self.indexes.is_empty() {
            let m: BTreeMap<String, Value> = self
                .indexes
                .iter()
                .map(|ix| {
                    let mut fields = BTreeMap::new();
                    fields.insert(HAS_RANGE.to_owned(), Value::Bool(ix.has_range));
                    fields.insert(
                        TEMPLATES.to_owned(),
                        Value::L(ix.templates.iter().cloned().map(Value::S).collect()),
                    );
                    (ix.name.clone(), Value::M(fields))
                })
                .collect();
            item.insert(INDEXES, Value::M(m));
        }
        item.insert(REVISION, Value::N(revision.to_string()));
        item
    }

    /// These settings and `other`'s together: every index of both, with the templates of both.
    /// The path index must agree (or be absent from one side).
    pub(crate) fn merge(&self, other: &Self) -> Result<Self> {
        // A depth both sides must agree on (or one side leaves out).
        let agreed = |a: Option<usize>, b: Option<usize>, what: &str, setter: &str| match (a, b) {
            (Some(a), Some(b)) if a != b => Err(Error::new(
                ErrorKind::TableMismatch,
                format!(
                    "the table's {what} has depth {a}, this tree's has depth {b}: build the tree with `{setter}({a})`"
                ),
            )),
            (a, b) => Ok(a.or(b)),
        };
        let path_index = agreed(
            self.path_index,
            other.path_index,
            "path index",
            "path_index",
        )?;
        let link_index = agreed(
            self.link_index,
            other.link_index,
            "link index",
            "link_index",
        )?;
        let mut indexes = self.indexes.clone();
        for ix in &other.indexes {
            match indexes.iter_mut().find(|i| i.name == ix.name) {
                Some(mine) => {
                    for t in &ix.templates {
                        if !mine.templates.contains(t) {
                            mine.templates.push(t.clone());
                        }
                    }
                }
                None => indexes.push(ix.clone()),
            }
        }
        indexes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut sharded = self.sharded.clone();
        for (t, n) in &other.sharded {
            match sharded.get(t) {
                Some(m) if m != n => {
                    return Err(Error::new(
                        ErrorKind::TableMismatch,
                        format!(
                            "the table's sharded directory {t:?} has {m} shards, this tree's has {n}: build the tree with `sharded({t:?}, {m})`"
                        ),
                    ));
                }
                _ => {
                    sharded.insert(t.clone(), *n);
                }
            }
        }
        Ok(Self {
            reserved: self.reserved,
            path_index,
            indexes,
            link_index,
            sharded,
        })
    }

    /// Records `wanted` merged into what the table has: a no-op when nothing changes,
    /// otherwise a put conditional on the row as read (a concurrent writer's settings are read
    /// again and merged).
    pub(crate) async fn record<S: Storage + ?Sized>(
        storage: &S,
        wanted: &Self,
        retry: &crate::retry::RetryPolicy,
    ) -> Result<Self> {
        let key = Self::key(wanted.reserved);
        // At least three tries, whatever the policy: settings change rarely, and a lost race
        // reads them again at once.
        let tries = crate::retry::RetryPolicy::new(
            retry.max_attempts().max(3),
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
        );
        for () in crate::retry::Backoff::new(tries).tries() {
            let row = retry
                .retry_transient(|| storage.get_item(&key, true))
                .await?;
            let (current, revision) = match &row {
                Some(r) => (
                    Self::from_item(wanted.reserved, r)?,
                    r.get(REVISION).and_then(|v| match v {
                        Value::N(n) => n.parse::<u64>().ok(),
                        _ => None,
                    }),
                ),
                None => (Self::new(wanted.reserved), None),
            };
            let merged = current.merge(wanted)?;
            // Nothing to record: the same settings, or none beyond the defaults (no row is
            // read as no path index and no secondary index).
            if merged == current && (row.is_some() || merged == Self::new(wanted.reserved)) {
                return Ok(merged);
            }
            let condition = match (&row, revision) {
                (None, _) => Condition::NotExists,
                (Some(_), Some(n)) => {
                    Condition::Equals(REVISION.to_owned(), Value::N(n.to_string()))
                }
                (Some(_), None) => Condition::AttrNotExists(REVISION.to_owned()),
            };
            let next = revision.map_or(1, |n| n.saturating_add(1));
            match retry
                .retry_transient(|| storage.put_item(merged.to_item(next), condition.clone()))
                .await
            {
                Ok(()) => return Ok(merged),
                Err(e) if e.kind() == ErrorKind::ConditionFailed => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::new(
            ErrorKind::Conflict,
            "the table's settings kept changing while they were recorded",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_their_row() {
        let mut s = TableSettings::new('|');
        s.path_index = Some(3);
        s.indexes
            .push(IndexSettings::new("by_email", false, ["Users/{id}"]));
        s.indexes
            .push(IndexSettings::new("by_created", true, Vec::<String>::new()));
        let item = s.to_item(4);
        let back = TableSettings::from_item('|', &item).unwrap();
        assert_eq!(back.path_index, Some(3));
        assert_eq!(back.indexes.len(), 2);
        assert!(
            back.indexes
                .iter()
                .any(|i| i.name == "by_created" && i.has_range)
        );
        assert_eq!(
            TableSettings::from_item('¦', &item).unwrap_err().kind(),
            ErrorKind::Serialization
        );
    }

    #[test]
    fn merging_keeps_every_index_and_refuses_another_depth() {
        let mut a = TableSettings::new('¦');
        a.path_index = Some(2);
        a.indexes.push(IndexSettings::new("x", false, ["A/{id}"]));
        let mut b = TableSettings::new('¦');
        b.indexes.push(IndexSettings::new("x", false, ["B/{id}"]));
        b.indexes.push(IndexSettings::new("y", true, ["B/{id}"]));
        let m = a.merge(&b).unwrap();
        assert_eq!(m.path_index, Some(2));
        assert_eq!(m.indexes[0].templates, ["A/{id}", "B/{id}"]);
        assert_eq!(m.indexes.len(), 2);
        b.path_index = Some(1);
        assert_eq!(a.merge(&b).unwrap_err().kind(), ErrorKind::TableMismatch);
    }
}
