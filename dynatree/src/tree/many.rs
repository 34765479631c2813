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

use crate::tree::{Ctx, guard, read, write};
use std::collections::{BTreeMap, HashSet};

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::path::Path;
use crate::storage::{Key, Storage, TRANSACT_MAX, TransactAction, get_all};

use super::guard::Attempt;

/// DynamoDB refuses a TransactWriteItems request over 4 MB; stay under it with a margin for
/// the request's own framing.
const TRANSACT_BYTES: usize = 3_500_000;

/// The most bytes a link index entry counts for in a transaction (its two keys).
const ENTRY_BYTES: usize = 3_072;

/// One object's share of a transaction.
struct Unit {
    index: usize,
    actions: Vec<TransactAction>,
    /// The listing row of the parent, checked once per transaction (new names only).
    parent: Option<Key>,
    bytes: usize,
}

/// Writes every `(path, row)` (unconditional puts of object rows), keeping the invariants,
/// in as few transactions as fit; rows whose transaction lost a race with a removal, a lock
/// or a concurrent writer are written again one at a time by the single-put protocol.
pub(crate) async fn write_objects<S: Storage + 'static>(
    cx: &Ctx<S>,
    rows: Vec<(Path, Item)>,
) -> Result<()> {
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
    let layout = &cx.inner.layout;
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
        all.into_iter().partition(|k| cx.inner.known.contains(k));
    cx.ensure_verified().await?;
    let found = get_all(
        &cx.inner.storage,
        unknown.into_iter().cloned().collect(),
        true,
        &cx.inner.config.retry,
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
    let is_busy =
        |path: &Path| (1..=path.len()).any(|i| busy.contains(&layout.listing_key(&path.prefix(i))));
    let (slow, fast): (Vec<usize>, Vec<usize>) =
        (0..rows.len()).partition(|&i| is_busy(&rows[i].0));

    // Missing ancestors, parents first (a parent created earlier in the same transaction
    // needs no check; transactions are sent in order).
    let missing: Vec<(&Key, &Path)> = ancestors
        .values()
        .flat_map(|level| level.iter())
        .filter(|(k, p)| !exists.contains(*k) && !is_busy(p))
        .collect();
    if !create_listing_rows(cx, &missing).await? {
        // A race with a removal on the way down: every object goes one by one.
        return write_each(cx, &rows, &(0..rows.len()).collect::<Vec<_>>()).await;
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
                        condition: guard::unmarked_exists(cx),
                    },
                    None,
                )
            } else {
                (
                    TransactAction::Put {
                        item: key.into_item(),
                        condition: guard::not_marked(cx),
                    },
                    parent_key(cx, path),
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
    for (done, indexes) in send_units(cx, units).await? {
        if done {
            cx.inner
                .known
                .insert_all(indexes.iter().map(|&i| layout.listing_key(&rows[i].0)));
        } else {
            again.extend(indexes);
        }
    }
    again.sort_unstable();
    write_each(cx, &rows, &again).await
}

/// Creates the listing rows `missing` (ancestors, parents first), sharing transactions;
/// `false` if one of them lost a race with a removal (some may have been created).
pub(crate) async fn create_listing_rows<S: Storage + 'static>(
    cx: &Ctx<S>,
    missing: &[(&Key, &Path)],
) -> Result<bool> {
    let units = missing
        .iter()
        .enumerate()
        .map(|(index, (key, path))| Unit {
            index,
            actions: vec![TransactAction::Put {
                item: (*key).clone().into_item(),
                condition: guard::not_marked(cx),
            }],
            parent: parent_key(cx, path),
            bytes: key.hash.len() + key.range.len(),
        })
        .collect();
    let all_done = send_units(cx, units).await?.iter().all(|(done, _)| *done);
    if all_done {
        cx.inner
            .known
            .insert_all(missing.iter().map(|(k, _)| (*k).clone()));
    }
    Ok(all_done)
}

/// The item `action` puts, if it is a put.
fn put_item(action: &TransactAction) -> Option<&Item> {
    match action {
        TransactAction::Put { item, .. } => Some(item),
        _ => None,
    }
}

/// The listing row of `path`'s parent, if the parent is not the root.
fn parent_key<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Option<Key> {
    path.parent()
        .filter(|p| !p.is_root())
        .map(|p| cx.inner.layout.listing_key(&p))
}

/// Packs units into transactions (at most 100 actions and about 3.5 MB each, each parent
/// checked once per transaction) and sends them one after the other. Returns, per
/// transaction, whether it was written and the units' indexes.
async fn send_units<S: Storage + 'static>(
    cx: &Ctx<S>,
    units: Vec<Unit>,
) -> Result<Vec<(bool, Vec<usize>)>> {
    let mut out = Vec::new();
    let mut units = units.into_iter().peekable();
    while units.peek().is_some() {
        let mut actions: Vec<TransactAction> = Vec::new();
        // In first-seen order, so that a schedule's requests are the same on every run.
        let mut checks: Vec<Key> = Vec::new();
        let mut indexes = Vec::new();
        let mut bytes = 0;
        // The link index's entries, which the transaction carries too.
        let mut entries = 0;
        while let Some(unit) = units.peek() {
            let extra = usize::from(unit.parent.as_ref().is_some_and(|p| !checks.contains(p)));
            let unit_entries =
                super::links::extra_actions(cx, unit.actions.iter().filter_map(put_item));
            let fits =
                actions.len() + entries + checks.len() + unit.actions.len() + unit_entries + extra
                    <= TRANSACT_MAX
                    && bytes + unit.bytes + unit_entries * ENTRY_BYTES <= TRANSACT_BYTES;
            if !fits && !indexes.is_empty() {
                break;
            }
            let unit = units.next().expect("peeked");
            if let Some(p) = unit.parent
                && !checks.contains(&p)
            {
                checks.push(p);
            }
            bytes += unit.bytes + unit_entries * ENTRY_BYTES;
            entries += unit_entries;
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
                condition: guard::unmarked_exists(cx),
            });
        }
        let done = matches!(guard::transact(cx, actions, false).await?, Attempt::Done);
        // A transaction of the batch settled: a step of the call.
        crate::retry::progressed();
        out.push((done, indexes));
    }
    Ok(out)
}

/// The single-put protocol for the rows at `indexes`, one at a time.
async fn write_each<S: Storage + 'static>(
    cx: &Ctx<S>,
    rows: &[(Path, Item)],
    indexes: &[usize],
) -> Result<()> {
    for &i in indexes {
        let (path, row) = &rows[i];
        write::write_object(cx, path, row.clone(), &crate::storage::Condition::Always).await?;
    }
    Ok(())
}

/// The values at `paths`, links followed, in order (`None` where nothing is): one
/// BatchGetItem per 100 distinct paths and per round of links.
pub(crate) async fn read_many<S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: &[Path],
) -> Result<Vec<Option<Item>>> {
    for p in paths {
        cx.inner.layout.check_object_path(p)?;
    }
    read::resolve_many(cx, paths).await
}
