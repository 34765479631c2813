//! Many objects at once: the batch put behind [`Repository::put_all`](crate::Repository::put_all)
//! and the batch read behind [`Repository::get_many`](crate::Repository::get_many).
//!
//! A batch keeps every invariant of a single put (see [`consistency`](crate::consistency)):
//! each object row is written in a transaction that also checks (or creates) its own listing
//! row, so no object is ever written where its listing row is missing, marked for removal or
//! locked. What a batch saves is requests: the listing rows of the whole batch are read once
//! (deduplicated), missing ancestors are created once, and up to 100 actions share a
//! transaction, where one put each sends one transaction per object.
//!
#![doc = include_str!("many.md")]

use std::collections::{BTreeMap, HashSet};

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::path::Path;
use crate::storage::{Key, Storage, TRANSACT_MAX, TransactAction, get_all};

use super::Tree;
use super::guard::Attempt;

/// DynamoDB refuses a TransactWriteItems request over 4 MB; stay under it with a margin for
/// the request's own framing.
const TRANSACT_BYTES: usize = 3_500_000;

/// One object's share of a transaction.
struct Unit {
    index: usize,
    actions: Vec<TransactAction>,
    /// The listing row of the parent, checked once per transaction (new names only).
    parent: Option<Key>,
    bytes: usize,
}

impl<S: Storage + 'static> Tree<S> {
    /// Writes every `(path, row)` (unconditional puts of object rows), keeping the invariants,
    /// in as few transactions as fit; rows whose transaction lost a race with a removal, a lock
    /// or a concurrent writer are written again one at a time by the single-put protocol.
    pub(crate) async fn write_objects(&self, rows: Vec<(Path, Item)>) -> Result<()> {
        let mut seen = HashSet::with_capacity(rows.len());
        for (p, _) in &rows {
            if !seen.insert(p) {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("the batch has two values at {p}"),
                ));
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        let layout = &self.inner.layout;
        // The listing rows of the objects' ancestors, deduplicated, by depth; and their own.
        let mut ancestors: BTreeMap<usize, BTreeMap<Key, Path>> = BTreeMap::new();
        for (path, _) in &rows {
            for i in 1..path.len() {
                let prefix = path.prefix(i);
                ancestors
                    .entry(i)
                    .or_default()
                    .insert(layout.listing_key(&prefix), prefix);
            }
        }
        let own: Vec<Key> = rows.iter().map(|(p, _)| layout.listing_key(p)).collect();
        let all: HashSet<&Key> = ancestors
            .values()
            .flat_map(|m| m.keys())
            .chain(&own)
            .collect();
        let (known, unknown): (Vec<&Key>, Vec<&Key>) =
            all.into_iter().partition(|k| self.inner.known.contains(k));
        self.ensure_verified().await?;
        let found = get_all(
            &self.inner.storage,
            unknown.into_iter().cloned().collect(),
            true,
            &self.inner.config.retry,
        )
        .await?;
        let mut exists: HashSet<Key> = known.into_iter().cloned().collect();
        // Rows being removed or moved: the objects below them take the single-put path, which
        // waits, takes expired marks off, or reports `Locked`.
        let mut busy: HashSet<Key> = HashSet::new();
        for row in found {
            let Some(key) = Key::from_item(&row) else {
                continue;
            };
            if row.contains(layout.deleting_attr()) || row.contains(layout.moving_attr()) {
                busy.insert(key.clone());
            }
            exists.insert(key);
        }
        let is_busy = |path: &Path| {
            (1..=path.len()).any(|i| busy.contains(&layout.listing_key(&path.prefix(i))))
        };
        let (slow, fast): (Vec<usize>, Vec<usize>) =
            (0..rows.len()).partition(|&i| is_busy(&rows[i].0));

        // Missing ancestors, parents first (a parent created earlier in the same transaction
        // needs no check; transactions are sent in order).
        let missing: Vec<(&Key, &Path)> = ancestors
            .values()
            .flat_map(|level| level.iter())
            .filter(|(k, p)| !exists.contains(*k) && !is_busy(p))
            .collect();
        if !self.create_listing_rows(&missing).await? {
            // A race with a removal on the way down: every object goes one by one.
            return self
                .write_each(&rows, &(0..rows.len()).collect::<Vec<_>>())
                .await;
        }
        exists.extend(missing.into_iter().map(|(k, _)| k.clone()));

        // The objects: check (or create) each one's own listing row in its transaction.
        let units = fast
            .iter()
            .map(|&index| {
                let (path, row) = &rows[index];
                let key = layout.listing_key(path);
                let bytes = row.size() + key.hash.len() + key.range.len();
                let (first, parent) = if exists.contains(&key) {
                    (
                        TransactAction::ConditionCheck {
                            key,
                            condition: self.unmarked_exists(),
                        },
                        None,
                    )
                } else {
                    (
                        TransactAction::Put {
                            item: key.into_item(),
                            condition: self.not_marked(),
                        },
                        self.parent_key(path),
                    )
                };
                Unit {
                    index,
                    actions: vec![
                        first,
                        TransactAction::Put {
                            item: row.clone(),
                            condition: crate::storage::Condition::Always,
                        },
                    ],
                    parent,
                    bytes,
                }
            })
            .collect();
        let mut again = slow;
        for (done, indexes) in self.send_units(units).await? {
            if done {
                self.inner
                    .known
                    .insert_all(indexes.iter().map(|&i| layout.listing_key(&rows[i].0)));
            } else {
                again.extend(indexes);
            }
        }
        again.sort_unstable();
        self.write_each(&rows, &again).await
    }

    /// Creates the listing rows `missing` (ancestors, parents first), sharing transactions;
    /// `false` if one of them lost a race with a removal (some may have been created).
    pub(crate) async fn create_listing_rows(&self, missing: &[(&Key, &Path)]) -> Result<bool> {
        let units = missing
            .iter()
            .enumerate()
            .map(|(index, (key, path))| Unit {
                index,
                actions: vec![TransactAction::Put {
                    item: (*key).clone().into_item(),
                    condition: self.not_marked(),
                }],
                parent: self.parent_key(path),
                bytes: key.hash.len() + key.range.len(),
            })
            .collect();
        let all_done = self.send_units(units).await?.iter().all(|(done, _)| *done);
        if all_done {
            self.inner
                .known
                .insert_all(missing.iter().map(|(k, _)| (*k).clone()));
        }
        Ok(all_done)
    }

    /// The listing row of `path`'s parent, if the parent is not the root.
    fn parent_key(&self, path: &Path) -> Option<Key> {
        path.parent()
            .filter(|p| !p.is_root())
            .map(|p| self.inner.layout.listing_key(&p))
    }

    /// Packs units into transactions (at most 100 actions and about 3.5 MB each, each parent
    /// checked once per transaction) and sends them one after the other. Returns, per
    /// transaction, whether it was written and the units' indexes.
    async fn send_units(&self, units: Vec<Unit>) -> Result<Vec<(bool, Vec<usize>)>> {
        let mut out = Vec::new();
        let mut units = units.into_iter().peekable();
        while units.peek().is_some() {
            let mut actions: Vec<TransactAction> = Vec::new();
            // In first-seen order, so that a schedule's requests are the same on every run.
            let mut checks: Vec<Key> = Vec::new();
            let mut indexes = Vec::new();
            let mut bytes = 0;
            while let Some(unit) = units.peek() {
                let extra = usize::from(unit.parent.as_ref().is_some_and(|p| !checks.contains(p)));
                let fits = actions.len() + checks.len() + unit.actions.len() + extra
                    <= TRANSACT_MAX
                    && bytes + unit.bytes <= TRANSACT_BYTES;
                if !fits && !indexes.is_empty() {
                    break;
                }
                let unit = units.next().expect("peeked");
                if let Some(p) = unit.parent
                    && !checks.contains(&p)
                {
                    checks.push(p);
                }
                bytes += unit.bytes;
                actions.extend(unit.actions);
                indexes.push(unit.index);
            }
            for key in checks {
                // A parent created in this very transaction needs no check (and DynamoDB
                // refuses two actions on one item).
                if actions.iter().any(|a| a.key().as_ref() == Some(&key)) {
                    continue;
                }
                actions.push(TransactAction::ConditionCheck {
                    key,
                    condition: self.unmarked_exists(),
                });
            }
            let done = matches!(self.transact(actions, false).await?, Attempt::Done);
            out.push((done, indexes));
        }
        Ok(out)
    }

    /// The single-put protocol for the rows at `indexes`, one at a time.
    async fn write_each(&self, rows: &[(Path, Item)], indexes: &[usize]) -> Result<()> {
        for &i in indexes {
            let (path, row) = &rows[i];
            self.write_object(path, row.clone(), &crate::storage::Condition::Always)
                .await?;
        }
        Ok(())
    }

    /// The values at `paths`, links followed, in order (`None` where nothing is): one
    /// BatchGetItem per 100 distinct paths and per round of links.
    pub(crate) async fn read_many(&self, paths: &[Path]) -> Result<Vec<Option<Item>>> {
        for p in paths {
            self.inner.layout.check_object_path(p)?;
        }
        self.resolve_many(paths).await
    }
}
