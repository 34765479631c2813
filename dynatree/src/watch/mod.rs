//! Typed changes: what a table's stream records mean for the objects of an
//! [`Entity`] (one hierarchical type, or an enum of them).
//!
//! A record of DynamoDB Streams ([`changes::Change`](crate::changes::Change), view type
//! `NEW_AND_OLD_IMAGES`) is one change of one row. [`decode`] turns it into a [`Change<T>`]:
//! created, updated, deleted or moved, with the object's path, the record's sequence number,
//! and whether dynatree's propagation wrote it. Or into nothing: listing rows, intents, lanes,
//! tombstones, checkpoints, settings, guards, link-index entries, fences, links, and changes of
//! bookkeeping attributes alone (a move's holds and their release) are never changes; nor is an
//! object whose path matches no template of `T` (unless `T` has an `other` variant).
//!
//! # What one record says
//!
//! The decoding reads one record and nothing else (no request, no state), so a Lambda handler
//! and a watcher decode alike:
//!
//! | record | change |
//! |---|---|
//! | an object row inserted | `Created` |
//! | inserted by a move or re-parenting at its destination (`SC movedfrom` names its source) | `Moved` |
//! | inserted by a copy (`SC copiedfrom`) | `Created` |
//! | an object row's attributes changed | `Updated` (`propagated` when only denormalized copies and their versions changed) |
//! | only bookkeeping attributes changed | nothing |
//! | an object row removed (or replaced by a fence or a link) | `Deleted` |
//! | a move's source removed (it carries the move's hold, `SC held`, and its destination, `SC movedto`) | nothing: its `Moved` came with the destination's insert (a [`Watch`] pairs the two records instead, and hands the `Moved` when both are read) |
//! | a destination row a refused move rolls back (`SC movedfrom`) | `Moved` back to its source |
//! | a destination row a refused copy rolls back (`SC copiedfrom`) | `Deleted` |
//!
//! # Transactions
//!
//! Every object a [`Transaction`](crate::Transaction) puts or patches carries the
//! transaction's identity (`SC tx`: its idempotency token, or an id of its own), and its change
//! says so ([`Info::transaction`]). Nothing is grouped: DynamoDB Streams delivers the records
//! of one transaction in the shards of their items, "at different times", interleaved with
//! others, and with no record that says the transaction is complete, so a group could never
//! be known to be closed. A consumer that needs a transaction's writes together collects the
//! changes carrying its identity; the ones it will see are the transaction's puts and patches
//! (a deletion's record has no new image to carry it), each within the stream's delay of the
//! commit (typically under a second, 24 hours at most while the stream keeps them).
//!
//! # Watching a subtree
//!
//! [`Tree::watch`](crate::Tree::watch) follows the objects under one path as they change: a
//! [`Watch`] is a `Stream` of [`Change<T>`] read from the table's stream (on
//! [`DynamoDbTable`](crate::DynamoDbTable), through
//! `DynamoDbTable::with_streams`, feature `streams`; on the fake table, from its own sharded
//! stream). It hands each change once, the changes of each path in order, shards read parents
//! first, and [`Watch::cursor`] is where to resume ([`Watch::start_after`]). The protocol and
//! its argument are in the [consistency docs](crate::consistency#watching-a-subtree)
//! (invariant 14).
//!
//! # Resynchronising
//!
//! The stream keeps records 24 hours. A watch resumed from an older cursor fails with
//! [`ErrorKind::CursorExpired`](crate::ErrorKind::CursorExpired): the changes in between are
//! lost to it. Rebuild the follower's state, in this order:
//!
//! 1. make a new watch and call [`Watch::start`]: it takes its position in the stream now;
//! 2. read the subtree (for example with [`Tree::descendants`](crate::Tree::descendants), or
//!    through [`Entities`](crate::entity::Entities));
//! 3. consume the watch.
//!
//! A write acknowledged after step 1 is in the watch, whether or not step 2 saw it, so nothing
//! is missed; one that step 2 saw is handed again, with its whole value, which a follower that
//! keeps values absorbs.
//!
//! A moved object whose destination path matches no template of `T` (and `T` has no `other`
//! variant) is `Deleted` at its source; one whose source matched none is `Created` at its
//! destination. The `Moved` [`decode`] gives comes with the record of its destination's
//! insert, so it may be decoded before or after the records of its source (DynamoDB Streams
//! orders the records of one item, not of two). A [`Watch`] orders them: it hands the `Moved`
//! once it has read both the copy and the source's removal, after every earlier change of
//! either path.
//!
//! # Examples
//!
//! ```
//! use dynatree::{Hierarchical, Tree};
//! use dynatree::storage::Storage;
//! use dynatree::watch::{self, Change};
//! use dynatree_testing::FakeTable;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
//! #[dynatree(path = "Docs/{id}")]
//! struct Doc { id: String, title: String }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
//! let table = FakeTable::new();
//! let tree = Tree::new(table.clone());
//! tree.create_table().await?;
//! table.enable_stream().await?;
//! let docs = tree.repo::<Doc>();
//! docs.put(&Doc { id: "a".into(), title: "Draft".into() }).await?;
//! docs.put(&Doc { id: "a".into(), title: "Final".into() }).await?;
//! docs.delete(&DocKey { id: "a".into() }).await?;
//!
//! let mut changes = Vec::new();
//! for record in table.stream_records() {
//!     changes.extend(watch::decode::<Doc>(&record)?); // listing rows decode to nothing
//! }
//! assert!(matches!(&changes[0], Change::Created { value, .. } if value.title == "Draft"));
//! assert!(matches!(&changes[1], Change::Updated { old, new, .. } if old.title == "Draft" && new.title == "Final"));
//! assert!(matches!(&changes[2], Change::Deleted { path, .. } if path.to_string() == "/Docs/a"));
//! assert_eq!(changes.len(), 3);
//! # Ok(()) }
//! ```

mod cursor;
mod follow;
mod order;

pub use cursor::Cursor;
pub use follow::Watch;

use crate::entity::Entity;
use crate::error::Result;
use crate::item::Item;
use crate::layout::Layout;
use crate::path::Path;

/// What happened to one object, decoded from one stream record by [`decode`].
///
/// # Examples
///
/// ```
/// use dynatree::watch::Change;
///
/// fn describe<T: std::fmt::Debug>(change: &Change<T>) -> String {
///     match change {
///         Change::Created { path, .. } => format!("created {path}"),
///         Change::Updated { path, info, .. } if info.propagated => format!("refreshed {path}"),
///         Change::Updated { path, .. } => format!("updated {path}"),
///         Change::Deleted { path, .. } => format!("deleted {path}"),
///         Change::Moved { from, to, .. } => format!("moved {from} to {to}"),
///         _ => "something new".into(),
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change<T> {
    /// An object was created at `path`.
    Created {
        /// Its path.
        path: Path,
        /// Its value.
        value: T,
        /// The record's details.
        info: Info,
    },
    /// The object at `path` changed.
    Updated {
        /// Its path.
        path: Path,
        /// Its value before.
        old: T,
        /// Its value after.
        new: T,
        /// The record's details (`propagated`: only denormalized copies changed).
        info: Info,
    },
    /// The object at `path` was deleted (or replaced by a link).
    Deleted {
        /// Its path.
        path: Path,
        /// Its value before.
        old: T,
        /// The record's details.
        info: Info,
    },
    /// The object at `from` was moved to `to` by a move of its subtree.
    Moved {
        /// Its path before.
        from: Path,
        /// Its path after.
        to: Path,
        /// Its value (at `to`).
        value: T,
        /// The record's details.
        info: Info,
    },
}

/// The details of the record a [`Change`] was decoded from.
///
/// # Examples
///
/// ```
/// use dynatree::watch::Change;
///
/// fn position<T>(change: &Change<T>) -> &str {
///     &change.info().sequence_number
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Info {
    /// The record's sequence number in its shard.
    pub sequence_number: String,
    /// Whether dynatree's propagation wrote it: only denormalized copies (and their versions)
    /// changed, refreshed from an ancestor.
    pub propagated: bool,
    /// The identity of the [transaction](crate::Transaction) that wrote it: its idempotency
    /// token, or an id of its own. `None` for a write outside a transaction, and for a
    /// deletion (a removal's record holds only the row before it).
    pub transaction: Option<String>,
}

impl<T> Change<T> {
    /// The object's path now: where it was created, updated or moved to, or where it was
    /// deleted.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::watch::Change;
    /// fn path<T>(c: &Change<T>) -> String { c.path().to_string() }
    /// ```
    pub fn path(&self) -> &Path {
        match self {
            Self::Created { path, .. }
            | Self::Updated { path, .. }
            | Self::Deleted { path, .. } => path,
            Self::Moved { to, .. } => to,
        }
    }

    /// The record's details.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::watch::Change;
    /// fn propagated<T>(c: &Change<T>) -> bool { c.info().propagated }
    /// ```
    pub fn info(&self) -> &Info {
        match self {
            Self::Created { info, .. }
            | Self::Updated { info, .. }
            | Self::Deleted { info, .. }
            | Self::Moved { info, .. } => info,
        }
    }

    /// The object's value after the change; `None` for a deletion.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::watch::Change;
    /// fn exists<T>(c: &Change<T>) -> bool { c.value().is_some() }
    /// ```
    pub fn value(&self) -> Option<&T> {
        match self {
            Self::Created { value, .. } | Self::Moved { value, .. } => Some(value),
            Self::Updated { new, .. } => Some(new),
            Self::Deleted { .. } => None,
        }
    }
}

/// The change of an object of `T` that `record` says, or `None` when it says none: a row that
/// is no object (listing rows, bookkeeping), a change of bookkeeping attributes alone, a move's
/// source leaving, or an object whose path matches no template of `T`. See the
/// [module](crate::watch) for each case. Keys are read with `T`'s reserved character.
///
/// # Errors
///
/// [`ErrorKind::Serialization`](crate::ErrorKind::Serialization) if an image whose path
/// matches a template of `T` does not fit its type.
///
/// # Examples
///
/// ```
/// use dynatree::changes::{Change as Record, ChangeKind};
/// use dynatree::storage::Key;
/// use dynatree::watch;
///
/// #[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize, Debug)]
/// #[dynatree(path = "Docs/{id}")]
/// struct Doc { id: String }
///
/// // A listing row's record: no change of an object.
/// let listing = Record::new(ChangeKind::Insert, Key::new("\u{a6}Docs\u{a6}", "a"), None, None, "1");
/// assert!(watch::decode::<Doc>(&listing)?.is_none());
/// # Ok::<(), dynatree::Error>(())
/// ```
pub fn decode<T: Entity>(record: &crate::storage::record::Change) -> Result<Option<Change<T>>> {
    Decoder::new(T::RESERVED, View::whole())?.decode(record)
}

/// Which objects a decoder reports, and the paths it reports them at: those under `prefix`
/// (absolute), relative to `root` (a scope's root; the table's root for a whole tree).
#[derive(Debug, Clone)]
pub(crate) struct View {
    root: Path,
    prefix: Path,
}

impl View {
    /// Every object, at its absolute path.
    pub(crate) fn whole() -> Self {
        Self {
            root: Path::root(),
            prefix: Path::root(),
        }
    }

    /// The objects under `prefix` (absolute, under `root`), relative to `root`.
    pub(crate) fn new(root: Path, prefix: Path) -> Self {
        Self { root, prefix }
    }

    /// The path an object at the absolute `path` is reported at, if it is in view.
    fn see(&self, path: &Path) -> Option<Path> {
        if !path.starts_with(&self.prefix) {
            return None;
        }
        let rest = path.components().get(self.root.len()..)?;
        Path::new(rest.iter().cloned()).ok()
    }
}

/// What one record says to a reader that can pair records ([`Decoder::classify`]): a change
/// of one object, or one of the two records of a moved object (each in its own item's order),
/// or the rollback of a refused move's copy. Paths are absolute.
#[derive(Debug)]
pub(crate) enum Record<T> {
    /// A change of one object, complete in itself (or nothing).
    Plain(Option<Change<T>>),
    /// A move's copy written at `to` (`SC movedfrom` names `from`).
    Arrival {
        from: Path,
        to: Path,
        hold: String,
        image: Item,
        info: Info,
    },
    /// A move's source removed (`SC movedto` names `to`).
    Departure {
        from: Path,
        to: Path,
        hold: String,
        image: Item,
        info: Info,
    },
    /// A move's copy at `to` released (the move is over): its hold and `SC movedfrom` taken
    /// off.
    Released { from: Path, to: Path, hold: String },
    /// A move's source at `from` released without being removed (`SC movedto` taken off):
    /// the move was refused and rolled back.
    Kept { from: Path, to: Path, hold: String },
    /// A refused move's copy at `to` rolled back (or removed by a writer outside the
    /// protocol while the move held it).
    Rollback {
        from: Path,
        to: Path,
        hold: String,
        image: Item,
        info: Info,
    },
}

/// The typed decoding of records, with the layout's attribute names built once.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    layout: Layout,
    view: View,
    tx_attr: String,
    moved_from_attr: String,
    moved_to_attr: String,
    copied_from_attr: String,
    held_attr: String,
}

impl Decoder {
    pub(crate) fn new(reserved: char, view: View) -> Result<Self> {
        let layout = Layout::new(reserved)?;
        Ok(Self {
            tx_attr: layout.tx_attr(),
            moved_from_attr: layout.moved_from_attr(),
            moved_to_attr: layout.moved_to_attr(),
            copied_from_attr: layout.copied_from_attr(),
            held_attr: layout.held_attr(),
            layout,
            view,
        })
    }

    /// The change of an object of `T` in view that `record` says (see [`decode`]): a move
    /// is `Moved` at its copy's insert, and its source's removal says nothing.
    pub(crate) fn decode<T: Entity>(
        &self,
        record: &crate::storage::record::Change,
    ) -> Result<Option<Change<T>>> {
        Ok(match self.classify(record)? {
            Record::Plain(change) => change,
            Record::Arrival {
                from,
                to,
                image,
                info,
                ..
            } => self.moved(&from, &to, image, info)?,
            // A refused move rolls its destination back: the object is at its source.
            Record::Rollback {
                from,
                to,
                image,
                info,
                ..
            } => self.moved(&to, &from, image, info)?,
            Record::Departure { .. } | Record::Released { .. } | Record::Kept { .. } => None,
        })
    }

    /// What `record` says, with a move's records told apart (see [`Record`]).
    pub(crate) fn classify<T: Entity>(
        &self,
        record: &crate::storage::record::Change,
    ) -> Result<Record<T>> {
        let layout = &self.layout;
        let Some(path) = layout.path_of_object_key(record.key()) else {
            return Ok(Record::Plain(None));
        };
        let present = |image: Option<&Item>| -> Option<Item> {
            image
                .filter(|i| !layout.is_fence(i) && i.get(layout.link_attr()).is_none())
                .cloned()
        };
        let (old, new) = (present(record.old_image()), present(record.new_image()));
        // The transaction that wrote the new image: its `SC tx`, if the write set it anew.
        let tx_attr = &self.tx_attr;
        let transaction = record
            .new_image()
            .and_then(|n| n.get_s(tx_attr))
            .filter(|&t| record.old_image().and_then(|o| o.get_s(tx_attr)) != Some(t))
            .map(str::to_owned);
        let info = |propagated| Info {
            sequence_number: record.sequence_number().to_owned(),
            propagated,
            transaction: transaction.clone(),
        };
        let named = |image: &Item, attr: &str| -> Result<Option<Path>> {
            image
                .get_s(attr)
                .map(|s| layout.decode_target(s))
                .transpose()
        };
        let hold = |image: &Item| image.get_s(&self.held_attr).unwrap_or_default().to_owned();
        Ok(match (old, new) {
            (None, None) => Record::Plain(None),
            (None, Some(new)) => match named(&new, &self.moved_from_attr)? {
                Some(from) => Record::Arrival {
                    from,
                    to: path,
                    hold: hold(&new),
                    image: new,
                    info: info(false),
                },
                None => Record::Plain(self.at(&path, new)?.map(|(path, value)| Change::Created {
                    path,
                    value,
                    info: info(false),
                })),
            },
            (Some(old), None) => {
                if let Some(from) = named(&old, &self.moved_from_attr)? {
                    Record::Rollback {
                        from,
                        to: path,
                        hold: hold(&old),
                        image: old,
                        info: info(false),
                    }
                } else if let Some(to) = named(&old, &self.moved_to_attr)? {
                    Record::Departure {
                        from: path,
                        to,
                        hold: hold(&old),
                        image: old,
                        info: info(false),
                    }
                } else if old.contains(&self.held_attr) && !old.contains(&self.copied_from_attr) {
                    // A move's source held without its destination's name (written by an
                    // earlier version): its `Moved` came with the destination's insert.
                    Record::Plain(None)
                } else {
                    Record::Plain(self.at(&path, old)?.map(|(path, old)| Change::Deleted {
                        path,
                        old,
                        info: info(false),
                    }))
                }
            }
            (Some(old), Some(new)) => {
                if let (Some(from), None) = (
                    named(&old, &self.moved_from_attr)?,
                    new.get(&self.moved_from_attr),
                ) && !old.contains(&self.copied_from_attr)
                    && changed_attributes(&old, &new, layout).is_empty()
                {
                    return Ok(Record::Released {
                        from,
                        to: path,
                        hold: hold(&old),
                    });
                }
                if let (Some(to), None) = (
                    named(&old, &self.moved_to_attr)?,
                    new.get(&self.moved_to_attr),
                ) && changed_attributes(&old, &new, layout).is_empty()
                {
                    return Ok(Record::Kept {
                        from: path,
                        to,
                        hold: hold(&old),
                    });
                }
                let changed = changed_attributes(&old, &new, layout);
                if changed.is_empty() {
                    return Ok(Record::Plain(None));
                }
                let propagated = only_copies(&changed, &old, &new, layout);
                Record::Plain(match (self.at(&path, old)?, self.at(&path, new)?) {
                    (Some((path, old)), Some((_, new))) => Some(Change::Updated {
                        path,
                        old,
                        new,
                        info: info(propagated),
                    }),
                    _ => None,
                })
            }
        })
    }

    /// The object `image` at the absolute `path` as a `T`, with the path it is reported at;
    /// `None` when the path is out of view or matches no template of `T`.
    pub(crate) fn at<T: Entity>(&self, path: &Path, image: Item) -> Result<Option<(Path, T)>> {
        let Some(seen) = self.view.see(path) else {
            return Ok(None);
        };
        Ok(T::decode(&seen, image)?.map(|value| (seen, value)))
    }

    /// The change for the object `image` moved from `from` to `to` (absolute): `Moved` if
    /// both paths are in view and `T`'s; `Deleted` at `from` if only it is, `Created` at `to`
    /// if only it is.
    pub(crate) fn moved<T: Entity>(
        &self,
        from: &Path,
        to: &Path,
        image: Item,
        info: Info,
    ) -> Result<Option<Change<T>>> {
        let at_from = self.at::<T>(from, image.clone())?;
        let at_to = self.at::<T>(to, image)?;
        Ok(match (at_from, at_to) {
            (Some((from, _)), Some((to, value))) => Some(Change::Moved {
                from,
                to,
                value,
                info,
            }),
            (Some((path, old)), None) => Some(Change::Deleted { path, old, info }),
            (None, Some((path, value))) => Some(Change::Created { path, value, info }),
            (None, None) => None,
        })
    }
}

/// The names of the attributes a reader sees (not keys, not bookkeeping) that differ between
/// `old` and `new`.
fn changed_attributes<'a>(old: &'a Item, new: &'a Item, layout: &Layout) -> Vec<&'a str> {
    let sc = layout.reserved();
    let visible = |n: &&str| {
        !n.starts_with(sc) && *n != crate::storage::HASH_KEY && *n != crate::storage::RANGE_KEY
    };
    let mut changed: Vec<&str> = old
        .names()
        .filter(visible)
        .filter(|n| old.get(n) != new.get(n))
        .collect();
    changed.extend(new.names().filter(visible).filter(|n| !old.contains(n)));
    changed
}

/// Whether the visible change from `old` to `new` (the attributes `changed`) is only in
/// denormalized copies refreshed by propagation: every attribute that changed is a copy (its
/// version attribute `SC dv.<name>` is in the new image), and some copy's version changed.
fn only_copies(changed: &[&str], old: &Item, new: &Item, layout: &Layout) -> bool {
    let copy = |n: &str| new.contains(&layout.target_version_attr(n));
    let version_moved = changed.iter().any(|n| {
        let v = layout.target_version_attr(n);
        old.get(&v) != new.get(&v)
    });
    changed.iter().all(|n| copy(n)) && version_moved
}
