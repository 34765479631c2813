//! What a move, copy or subtree deletion sends in each phase, decided without a backend: pure
//! functions from the rows the operation has read (and the outcome of its last transaction)
//! to the transactions it sends next. `moves.rs` is their driver: it reads, renews its lease,
//! calls these, sends what they return through its fence and reports progress. Each plan is
//! unit-tested below against every state it distinguishes; the argument for the guards
//! they carry is in `moves.md`.
//!
//! The phases, with the plan of each:
//! - lock: [`hold`] (each object held, or fenced where none is);
//! - copy: [`carried`] (which nodes of a level go), [`copy_slice`] (their rows under the
//!   destination), [`hollow`] (which copied nodes name nothing);
//! - delete: [`delete_slice`] and [`after_delete`] (which rows were still ours);
//! - unlock: [`release`] (holds off the objects), [`unlock`] (locks off the listing rows).

use std::collections::{HashMap, HashSet};

use crate::item::{Item, Value};
use crate::layout::Layout;
use crate::path::Path;
use crate::storage::{Condition, Key, TransactAction, UpdateAction};

/// Which nodes of one level of the source a copy carries to the destination.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Carried<'a> {
    /// Copied: the root, every node with an object, every parent of a node one level down.
    pub(crate) kept: Vec<&'a Path>,
    /// Not copied: nodes below the root that name nothing (no object, no child; a removal
    /// that met the lock left them to the operation).
    pub(crate) skipped: Vec<&'a Path>,
    /// Copied without an object (below the root): [`hollow`] decides which name nothing.
    pub(crate) objectless: Vec<&'a Path>,
}

/// Which nodes of `level` (at `depth` below the operation's root) a copy carries, given the
/// `next` level down and which nodes have an object.
pub(crate) fn carried<'a>(
    depth: usize,
    level: &'a [Path],
    next: Option<&[Path]>,
    has_object: impl Fn(&Path) -> bool,
) -> Carried<'a> {
    let parents: HashSet<Path> = next
        .map(|next| next.iter().filter_map(Path::parent).collect())
        .unwrap_or_default();
    let mut out = Carried::default();
    for p in level {
        let object = has_object(p);
        if depth == 0 || object || parents.contains(p) {
            out.kept.push(p);
            if depth > 0 && !object {
                out.objectless.push(p);
            }
        } else {
            out.skipped.push(p);
        }
    }
    out
}

/// Of the nodes copied without an object (`objectless`, with their depth, top-down), those
/// that name nothing: every child was skipped or names nothing itself. Bottom-up, in the
/// order found.
pub(crate) fn hollow(
    levels: &[Vec<Path>],
    skipped: &HashSet<Path>,
    objectless: &[(usize, Path)],
) -> Vec<Path> {
    let mut hollow: HashSet<Path> = HashSet::new();
    let mut out = Vec::new();
    for (depth, p) in objectless.iter().rev() {
        let mut children = levels
            .get(depth + 1)
            .into_iter()
            .flatten()
            .filter(|c| c.parent().as_ref() == Some(p));
        if children.all(|c| skipped.contains(c) || hollow.contains(c)) {
            hollow.insert(p.clone());
            out.push(p.clone());
        }
    }
    out
}

/// One node a copy writes: its place under the destination and its object's row there
/// (already re-keyed and held), if it has an object.
#[derive(Debug, Clone)]
pub(crate) struct CopiedNode {
    pub(crate) dest: Path,
    pub(crate) object: Option<Item>,
}

/// The transaction that copies `nodes` (a slice of one level) under the operation `lock`:
/// first a check that `parent` (the destination's parent, for the root's level) exists and
/// is free, then each node's listing row, locked by the operation and written only where no
/// row is or the operation's own is, and its object. Returns the actions and the index of
/// the first listing row (a failed action before it is the parent's check; at or after it,
/// something already at the destination).
pub(crate) fn copy_slice(
    layout: &Layout,
    lock: &Value,
    parent: Option<&Path>,
    nodes: Vec<CopiedNode>,
) -> (Vec<TransactAction>, usize) {
    let mut actions = Vec::with_capacity(nodes.len() * 2 + 1);
    if let Some(parent) = parent {
        actions.push(TransactAction::ConditionCheck {
            key: layout.listing_key(parent),
            condition: layout.free_row(),
        });
    }
    let first_dest = actions.len();
    let ours_or_new = layout.absent_or_locked_by(lock);
    for node in nodes {
        let mut row = layout.listing_row(&node.dest);
        row.insert(layout.moving_attr(), lock.clone());
        actions.push(TransactAction::Put {
            item: row,
            condition: ours_or_new.clone(),
        });
        if let Some(item) = node.object {
            actions.push(TransactAction::Put {
                item,
                condition: Condition::Always,
            });
        }
    }
    (actions, first_dest)
}

/// Consecutive ranges of items of the given `weights` (actions per item), each as long as
/// fits in `cap` actions (an item heavier than `cap` alone in its range): the slices of a
/// level that each go in one transaction.
pub(crate) fn pack(
    weights: impl IntoIterator<Item = usize>,
    cap: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut load, mut end) = (0, 0, 0);
    for (i, w) in weights.into_iter().enumerate() {
        if load + w > cap && i > start {
            out.push(start..i);
            (start, load) = (i, 0);
        }
        load += w;
        end = i + 1;
    }
    if end > start {
        out.push(start..end);
    }
    out
}

/// `items` in turns across their partitions (`partition` of each): the first of each
/// partition, in the order the partitions first appear, then the second of each, and so on.
/// A level's transactions sent in this order spread over the partitions of its parents
/// instead of meeting one partition's write limit together.
pub(crate) fn spread<T, K: Eq + std::hash::Hash + Clone>(
    items: impl IntoIterator<Item = T>,
    partition: impl Fn(&T) -> K,
) -> Vec<T> {
    let mut order: Vec<K> = Vec::new();
    let mut groups: std::collections::HashMap<K, std::collections::VecDeque<T>> =
        std::collections::HashMap::new();
    for item in items {
        let k = partition(&item);
        groups
            .entry(k.clone())
            .or_insert_with(|| {
                order.push(k);
                std::collections::VecDeque::new()
            })
            .push_back(item);
    }
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for k in &order {
            if let Some(item) = groups
                .get_mut(k)
                .and_then(std::collections::VecDeque::pop_front)
            {
                out.push(item);
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// How an object is removed: deleted, or (with fenced puts) replaced by a fence expiring at
/// the given second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    Delete,
    Fence { expiry: u64 },
}

impl Removal {
    /// The action that removes the object at `path` under `condition`.
    pub(crate) fn action(
        self,
        layout: &Layout,
        path: &Path,
        condition: Condition,
    ) -> TransactAction {
        match self {
            Removal::Delete => TransactAction::Delete {
                key: layout.object_key(path),
                condition,
            },
            Removal::Fence { expiry } => TransactAction::Put {
                item: layout.fence_row(path, expiry, None),
                condition,
            },
        }
    }
}

/// The transaction that deletes `slice` (a slice of one level, deepest level first): per
/// node, two actions, its object and its listing row, the row only while still locked by
/// the operation. A node in `keep` (a child of it was not the operation's to delete) keeps
/// its listing row, only unlocked.
pub(crate) fn delete_slice(
    layout: &Layout,
    lock: &Value,
    removal: Removal,
    slice: &[Path],
    keep: &HashSet<Path>,
) -> Vec<TransactAction> {
    let mut actions = Vec::with_capacity(slice.len() * 2);
    for p in slice {
        actions.push(removal.action(layout, p, Condition::Always));
        let ours = layout.locked_by(lock);
        actions.push(if keep.contains(p) {
            TransactAction::Put {
                item: layout.listing_row(p),
                condition: ours,
            }
        } else {
            TransactAction::Delete {
                key: layout.listing_key(p),
                condition: ours,
            }
        });
    }
    actions
}

/// After [`delete_slice`] of `slice` failed at the actions `failed` (a failed group is a
/// row no longer the operation's): the nodes kept, whose holds the operation takes off.
/// Their parents, and the parents of nodes already in `keep`, join `keep`.
pub(crate) fn after_delete(
    slice: &[Path],
    failed: &[usize],
    keep: &mut HashSet<Path>,
) -> Vec<Path> {
    let mut kept = Vec::new();
    for (i, p) in slice.iter().enumerate() {
        let not_ours = failed.iter().any(|&f| f / 2 == i);
        if not_ours {
            kept.push(p.clone());
        }
        if not_ours || keep.contains(p) {
            keep.extend(p.parent());
        }
    }
    kept
}

/// A move's destination of each source path (`None`: not moved there).
pub(crate) type Destinations<'a> = dyn Fn(&Path) -> Option<Path> + Sync + 'a;

/// The transaction that holds the objects of `level` for the operation `id`: each object
/// present (`has_object`) gets the hold, conditional on still existing; with fenced puts
/// (`fence` the expiry of a fence written now, `now` the time), a node without an object
/// gets a held fence, conditional on no live object. Returns the actions and the indexes
/// of the fences (a failed fence is an object written meanwhile: the level is held again).
///
/// `moved_to`, for a move, gives each object's destination: it is set with the hold
/// (`SC movedto`), for readers of the stream.
pub(crate) fn hold(
    layout: &Layout,
    id: &str,
    level: &[Path],
    has_object: impl Fn(&Key) -> bool,
    fence: Option<(u64, u64)>,
    moved_to: Option<&Destinations<'_>>,
) -> (Vec<TransactAction>, Vec<usize>) {
    let held = layout.held_attr();
    let mut actions = Vec::with_capacity(level.len());
    let mut fences = Vec::new();
    for p in level {
        let key = layout.object_key(p);
        if has_object(&key) {
            let mut set = vec![UpdateAction::Set(held.clone(), Value::S(id.to_owned()))];
            if let Some(to) = moved_to.and_then(|f| f(p)) {
                set.push(UpdateAction::Set(
                    layout.moved_to_attr(),
                    Value::S(layout.encode_target(&to)),
                ));
            }
            actions.push(TransactAction::Update {
                key,
                actions: set,
                condition: Condition::Exists,
            });
        } else if let Some((expiry, now)) = fence {
            fences.push(actions.len());
            actions.push(TransactAction::Put {
                item: layout.fence_row(p, expiry, Some(id)),
                condition: layout.live(Condition::NotExists, now),
            });
        }
    }
    (actions, fences)
}

/// The transaction that takes the operation `id`'s holds off the objects at `paths`, from
/// their rows as read (`rows`, by hash key): a held object loses the hold (and the source a
/// copy names, `SC movedfrom` or `SC copiedfrom`); a held fence
/// (written where no object was) is deleted; a row held by no one or by another is left.
pub(crate) fn release(
    layout: &Layout,
    id: &Value,
    paths: &[Path],
    rows: &HashMap<String, Item>,
) -> Vec<TransactAction> {
    let held = layout.held_attr();
    paths
        .iter()
        .filter_map(|p| {
            let key = layout.object_key(p);
            let row = rows.get(&key.hash).filter(|r| r.get(&held) == Some(id))?;
            let ours = layout.held_by(id);
            Some(if layout.is_fence(row) {
                TransactAction::Delete {
                    key,
                    condition: ours,
                }
            } else {
                TransactAction::Update {
                    key,
                    actions: vec![
                        UpdateAction::Remove(held.clone()),
                        UpdateAction::Remove(layout.moved_from_attr()),
                        UpdateAction::Remove(layout.copied_from_attr()),
                        UpdateAction::Remove(layout.moved_to_attr()),
                    ],
                    condition: ours,
                }
            })
        })
        .collect()
}

/// The transaction that takes the operation's `lock` off the listing rows of `paths`: each
/// rewritten without it, only where the operation still holds it.
pub(crate) fn unlock(layout: &Layout, lock: &Value, paths: &[Path]) -> Vec<TransactAction> {
    paths
        .iter()
        .map(|p| TransactAction::Put {
            item: layout.listing_row(p),
            condition: layout.locked_by(lock),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_partitions_in_turns() {
        let items = ["a1", "a2", "a3", "b1", "c1", "c2"];
        let out = spread(items, |s| s.as_bytes()[0]);
        assert_eq!(out, ["a1", "b1", "c1", "a2", "c2", "a3"]);
        assert!(spread(Vec::<u8>::new(), |b| *b).is_empty());
    }

    #[test]
    fn pack_fills_each_transaction_without_splitting_an_item() {
        assert_eq!(pack([2, 2, 1, 2, 2], 4), [0..2, 2..4, 4..5]);
        assert_eq!(pack([1; 5], 2), [0..2, 2..4, 4..5]);
        assert_eq!(pack([3, 1], 2), [0..1, 1..2]);
        assert_eq!(
            pack([2; 49], 98),
            vec![std::ops::Range { start: 0, end: 49 }]
        );
        assert!(pack(std::iter::empty(), 98).is_empty());
    }

    fn layout() -> Layout {
        Layout::new('¦').unwrap()
    }

    fn path(s: &str) -> Path {
        Path::new(s.split('/')).unwrap()
    }

    fn paths(s: &[&str]) -> Vec<Path> {
        s.iter().map(|p| path(p)).collect()
    }

    fn lock() -> Value {
        Value::S("op-1".into())
    }

    #[test]
    fn a_copy_carries_the_root_objects_and_parents_and_skips_empty_nodes() {
        let level = paths(&["r/a", "r/b", "r/c"]);
        let next = paths(&["r/b/x"]);
        let c = carried(1, &level, Some(&next), |p| *p == path("r/a"));
        assert_eq!(c.kept, [&level[0], &level[1]]);
        assert_eq!(c.objectless, [&level[1]]);
        assert_eq!(c.skipped, [&level[2]]);
        // The root is carried whatever it holds.
        let root = paths(&["r"]);
        let c = carried(0, &root, None, |_| false);
        assert_eq!((c.kept.len(), c.objectless.len()), (1, 0));
    }

    #[test]
    fn a_node_is_hollow_when_every_child_was_skipped_or_is_hollow() {
        let levels = vec![
            paths(&["r"]),
            paths(&["r/a", "r/b"]),
            paths(&["r/a/x", "r/b/y"]),
        ];
        let skipped: HashSet<Path> = [path("r/a/x")].into_iter().collect();
        let objectless = vec![(1, path("r/a")), (1, path("r/b"))];
        // r/b's child r/b/y was copied (it has an object): r/b names something.
        assert_eq!(hollow(&levels, &skipped, &objectless), [path("r/a")]);
        // Nested: r/a/x objectless with no child, r/a objectless above it: both hollow,
        // deepest first.
        let objectless = vec![(1, path("r/a")), (2, path("r/a/x"))];
        assert_eq!(
            hollow(&levels, &HashSet::new(), &objectless),
            [path("r/a/x"), path("r/a")]
        );
    }

    #[test]
    fn a_copy_slice_checks_the_destination_parent_first_and_writes_locked_rows_only_where_free_or_ours()
     {
        let l = layout();
        let object = l.object_key(&path("d/a")).into_item();
        let nodes = vec![
            CopiedNode {
                dest: path("d/a"),
                object: Some(object.clone()),
            },
            CopiedNode {
                dest: path("d/b"),
                object: None,
            },
        ];
        let (actions, first) = copy_slice(&l, &lock(), Some(&path("d")), nodes.clone());
        assert_eq!((actions.len(), first), (4, 1));
        assert_eq!(
            actions[0],
            TransactAction::ConditionCheck {
                key: l.listing_key(&path("d")),
                condition: l.free_row(),
            }
        );
        let TransactAction::Put { item, condition } = &actions[1] else {
            panic!("a listing row: {:?}", actions[1]);
        };
        assert_eq!(item.get(l.moving_attr()), Some(&lock()));
        assert_eq!(*condition, l.absent_or_locked_by(&lock()));
        assert_eq!(
            actions[2],
            TransactAction::Put {
                item: object,
                condition: Condition::Always,
            }
        );
        // Below the root's level, no check.
        let (actions, first) = copy_slice(&l, &lock(), None, nodes);
        assert_eq!((actions.len(), first), (3, 0));
    }

    #[test]
    fn a_delete_slice_removes_rows_still_locked_and_keeps_those_above_a_kept_child() {
        let l = layout();
        let slice = paths(&["r/a", "r/b"]);
        let keep: HashSet<Path> = [path("r/b")].into_iter().collect();
        let actions = delete_slice(&l, &lock(), Removal::Delete, &slice, &keep);
        assert_eq!(actions.len(), 4);
        assert_eq!(
            actions[0],
            TransactAction::Delete {
                key: l.object_key(&path("r/a")),
                condition: Condition::Always,
            }
        );
        assert_eq!(
            actions[1],
            TransactAction::Delete {
                key: l.listing_key(&path("r/a")),
                condition: l.locked_by(&lock()),
            }
        );
        assert_eq!(
            actions[3],
            TransactAction::Put {
                item: l.listing_row(&path("r/b")),
                condition: l.locked_by(&lock()),
            }
        );
        // With fenced puts, the object is replaced by a fence.
        let actions = delete_slice(
            &l,
            &lock(),
            Removal::Fence { expiry: 9 },
            &slice,
            &HashSet::new(),
        );
        assert!(matches!(&actions[0], TransactAction::Put { item, .. } if l.is_fence(item)));
    }

    #[test]
    fn after_a_delete_nodes_no_longer_ours_are_kept_and_their_parents_keep_their_rows() {
        let slice = paths(&["r/a/x", "r/b/y", "r/c/z"]);
        let mut keep: HashSet<Path> = [path("r/c/z")].into_iter().collect();
        // The row of r/b/y (action 3, its second) was not ours.
        let kept = after_delete(&slice, &[3], &mut keep);
        assert_eq!(kept, [path("r/b/y")]);
        assert!(keep.contains(&path("r/b")) && keep.contains(&path("r/c")));
        assert!(!keep.contains(&path("r/a")));
    }

    #[test]
    fn a_hold_holds_objects_and_fences_empty_nodes_only_with_fenced_puts() {
        let l = layout();
        let level = paths(&["r/a", "r/b"]);
        let with_object = l.object_key(&path("r/a"));
        let has = |k: &Key| *k == with_object;
        let (actions, fences) = hold(&l, "op-1", &level, has, None, None);
        assert_eq!((actions.len(), fences.len()), (1, 0));
        assert_eq!(
            actions[0],
            TransactAction::Update {
                key: with_object.clone(),
                actions: vec![UpdateAction::Set(l.held_attr(), lock())],
                condition: Condition::Exists,
            }
        );
        let (actions, fences) = hold(&l, "op-1", &level, has, Some((99, 10)), None);
        assert_eq!(fences, [1]);
        let TransactAction::Put { item, condition } = &actions[1] else {
            panic!("a fence: {:?}", actions[1]);
        };
        assert!(l.is_fence(item));
        assert_eq!(item.get(&l.held_attr()), Some(&lock()));
        assert_eq!(*condition, l.live(Condition::NotExists, 10));
    }

    #[test]
    fn a_release_takes_off_only_the_operations_holds_and_origins_and_deletes_its_fences() {
        let l = layout();
        let held = l.held_attr();
        let ps = paths(&["r/a", "r/b", "r/c"]);
        let mut rows = HashMap::new();
        let mut object = l.object_key(&ps[0]).into_item();
        object.insert(held.clone(), lock());
        rows.insert(l.object_key(&ps[0]).hash, object);
        let fence = l.fence_row(&ps[1], 9, Some("op-1"));
        rows.insert(l.object_key(&ps[1]).hash, fence);
        let mut other = l.object_key(&ps[2]).into_item();
        other.insert(held.clone(), Value::S("op-2".into()));
        rows.insert(l.object_key(&ps[2]).hash, other);
        let actions = release(&l, &lock(), &ps, &rows);
        assert_eq!(
            actions,
            [
                TransactAction::Update {
                    key: l.object_key(&ps[0]),
                    actions: vec![
                        UpdateAction::Remove(held),
                        UpdateAction::Remove(l.moved_from_attr()),
                        UpdateAction::Remove(l.copied_from_attr()),
                        UpdateAction::Remove(l.moved_to_attr()),
                    ],
                    condition: l.held_by(&lock()),
                },
                TransactAction::Delete {
                    key: l.object_key(&ps[1]),
                    condition: l.held_by(&lock()),
                },
            ]
        );
    }

    #[test]
    fn an_unlock_rewrites_each_row_only_where_the_lock_is_still_the_operations() {
        let l = layout();
        let actions = unlock(&l, &lock(), &paths(&["r", "r/a"]));
        assert_eq!(
            actions[1],
            TransactAction::Put {
                item: l.listing_row(&path("r/a")),
                condition: l.locked_by(&lock()),
            }
        );
    }
}
