//! What the write path and the removal protocol send, decided without a backend: pure
//! functions from what a call knows (the listing rows this process has seen, or the rows it
//! has just read) to the requests it sends. `write.rs` and `removal.rs` are their drivers:
//! they read, call these, send what they return and update the known-rows cache. Each plan
//! is unit-tested below against every state it distinguishes. The argument for the guards
//! they carry is in `write.md` and `removal.md`.

use std::ops::Range;

use crate::item::Item;
use crate::layout::Layout;
use crate::path::Path;
use crate::storage::batch::TRANSACT_MAX;
use crate::storage::{Condition, Key, TransactAction};

/// The transaction a put plans from the cache alone (no read first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Optimistic {
    /// A top-level name this process has not seen: create its listing row, which needs
    /// nothing above it, with the object.
    TopLevel,
    /// A new branch below the known listing row of the prefix of this length: check it,
    /// create every listing row below it, write the object.
    Branch(usize),
    /// A new name under a known parent: create the listing row, check the parent's.
    UnderParent,
    /// The listing row known, or nothing known at all: assume the listing row exists and
    /// check it (an update, or a sibling of an earlier put); a failed check falls back to
    /// reading the state.
    Assumed,
}

/// Which optimistic transaction a put of `path` sends, given which listing rows this process
/// knows (`known` of a prefix) and how many `checks` of other rows ride along.
pub(crate) fn optimistic(path: &Path, known: impl Fn(&Path) -> bool, checks: usize) -> Optimistic {
    let n = path.len();
    let own_known = known(path);
    if n == 1 {
        return if own_known {
            Optimistic::Assumed
        } else {
            Optimistic::TopLevel
        };
    }
    if own_known {
        return Optimistic::Assumed;
    }
    let parent_known = path.parent().is_some_and(|p| known(&p));
    if parent_known {
        return Optimistic::UnderParent;
    }
    // The deepest proper ancestor of the parent that is known, if the rows below it fit one
    // transaction with the object and the checks: the check of the known row, the rows
    // below it, the object, the caller's checks.
    (1..n.saturating_sub(1))
        .rev()
        .find(|&i| known(&path.prefix(i)))
        .filter(|&k| 1 + (n - k) + 1 + checks <= TRANSACT_MAX)
        .map_or(Optimistic::Assumed, Optimistic::Branch)
}

/// What a put that carries no other checks tries first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum First {
    /// One PutItem conditional on the object existing and not being held (an overwrite).
    /// When its condition fails the put goes on by the guarded transaction; `read` says
    /// whether it reads the listing rows first (the optimistic transaction would only guess
    /// again what the failed PutItem could not tell).
    Overwrite { read: bool },
    /// The optimistic transaction of the plan.
    Transaction,
}

/// What a put tries first, given its optimistic `plan`, what this process knows (`known`), and
/// how many `checks` of other rows ride along. A caller's `condition` that expects no object
/// (a create) makes the overwrite pointless unless the object is known.
///
/// An overwrite is tried when the object is known (this process wrote or read it), and when
/// the process knows nothing that suggests a new name: a top-level name, or nothing known on
/// the path, or the object's own listing row known. A process that knows the parent's listing
/// row or a row above it but not the object's ([`Optimistic::UnderParent`],
/// [`Optimistic::Branch`]), or a sibling's listing row (a name in the same directory), is most
/// likely adding names where it added names before, and the transaction serves an overwrite
/// too. A cold process's overwrite is then one PutItem at every depth; the first new name it
/// writes pays one failed PutItem before its transaction, in place of the failed optimistic
/// transaction it sent before (the first new top-level name: one more request).
pub(crate) fn first(plan: Optimistic, known: Known, checks: usize, condition: &Condition) -> First {
    let guess = matches!(plan, Optimistic::TopLevel | Optimistic::Assumed)
        && !known.sibling
        && !expects_absent(condition);
    if checks > 0 || !(known.object || guess) {
        return First::Transaction;
    }
    First::Overwrite {
        // A guessed listing row (nothing on the path known): read instead of guessing.
        read: !known.object && !known.own && plan == Optimistic::Assumed,
    }
}

/// What a process knows of the path a put writes, beyond the listing rows of its prefixes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Known {
    /// The object row exists (this process wrote or read it).
    pub(crate) object: bool,
    /// The object's own listing row exists.
    pub(crate) own: bool,
    /// A row in the partition of the object's listing row: a name in the same directory.
    pub(crate) sibling: bool,
}

/// Whether `condition` expects the object to be absent (the condition of a create, with or
/// without "or expired"): a cost guess only, never a correctness decision.
fn expects_absent(condition: &Condition) -> bool {
    match condition {
        Condition::NotExists => true,
        Condition::And(all) => all.iter().any(expects_absent),
        Condition::Or(any) => any.contains(&Condition::NotExists),
        _ => false,
    }
}

/// The actions of `plan` for the object row `row` at `path` under `condition`, with the
/// caller's `checks` right before the object's put (which stays last). Returns the actions
/// and the range the checks occupy.
pub(crate) fn optimistic_actions(
    layout: &Layout,
    path: &Path,
    plan: Optimistic,
    row: &Item,
    condition: &Condition,
    checks: &[TransactAction],
) -> (Vec<TransactAction>, Range<usize>) {
    let create = |p: &Path| TransactAction::Put {
        item: layout.listing_row(p),
        condition: layout.not_marked(),
    };
    let check = |key: Key| TransactAction::ConditionCheck {
        key,
        condition: layout.free_row(),
    };
    let mut actions = match plan {
        Optimistic::TopLevel => vec![create(path)],
        Optimistic::Branch(k) => std::iter::once(check(layout.listing_key(&path.prefix(k))))
            .chain((k + 1..=path.len()).map(|i| create(&path.prefix(i))))
            .collect(),
        Optimistic::UnderParent => {
            let parent = path.prefix(path.len() - 1);
            vec![create(path), check(layout.listing_key(&parent))]
        }
        Optimistic::Assumed => vec![check(layout.listing_key(path))],
    };
    let at = actions.len();
    actions.extend(checks.iter().cloned());
    actions.push(TransactAction::Put {
        item: row.clone(),
        condition: condition.clone(),
    });
    (actions, at..at + checks.len())
}

/// How a new name in a [sharded directory](crate::TreeBuilder::sharded) guards against the
/// removal of its parent (see "Sharded directories" in the consistency docs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ShardGuard {
    /// The guard of the child's shard is believed to exist: check it instead of the parent's
    /// listing row, which is one item in a partition every new child would share.
    Known(Key),
    /// Check the parent's listing row, and create the guard beside it.
    New(Key),
}

/// The actions of an [`Optimistic::UnderParent`] plan (the new listing row, the check of the
/// parent's, the caller's checks at `checks`, the object) with `guard`: the parent's check
/// replaced by the guard's, or the guard created after it. Returns the actions and where the
/// caller's checks are now.
pub(crate) fn with_shard_guard(
    mut actions: Vec<TransactAction>,
    checks: Range<usize>,
    guard: &ShardGuard,
) -> (Vec<TransactAction>, Range<usize>) {
    match guard {
        ShardGuard::Known(g) => {
            actions[1] = TransactAction::ConditionCheck {
                key: g.clone(),
                condition: Condition::Exists,
            };
            (actions, checks)
        }
        ShardGuard::New(g) => {
            actions.insert(
                2,
                TransactAction::Put {
                    item: g.clone().into_item(),
                    condition: Condition::Always,
                },
            );
            (actions, checks.start + 1..checks.end + 1)
        }
    }
}

/// The listing keys a successful optimistic transaction of `plan` created or checked: what
/// the cache learns.
pub(crate) fn optimistic_learned(layout: &Layout, path: &Path, plan: Optimistic) -> Vec<Key> {
    let mut keys = match plan {
        Optimistic::Branch(k) => (k + 1..path.len())
            .map(|i| layout.listing_key(&path.prefix(i)))
            .collect(),
        _ => Vec::new(),
    };
    keys.push(layout.listing_key(path));
    keys
}

/// The listing keys a failed optimistic transaction of `plan` may have been wrong about:
/// what the cache forgets.
pub(crate) fn optimistic_doubted(layout: &Layout, path: &Path, plan: Optimistic) -> Vec<Key> {
    let mut keys = Vec::new();
    if let Optimistic::Branch(k) = plan {
        keys.push(layout.listing_key(&path.prefix(k)));
    }
    keys.push(layout.listing_key(path));
    if path.len() > 1 {
        keys.push(layout.listing_key(&path.prefix(path.len() - 1)));
    }
    keys
}

/// What a put does after reading the listing rows of every prefix of its path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FromState {
    /// A row on the path is locked: the subtree is moving, the write is refused.
    Locked,
    /// The row at this index carries an expired removal mark: take it off, then look again.
    ClearMark(usize, String),
    /// A row on the path carries a live removal mark: wait for its remover.
    Wait,
    /// Write these actions (before the caller's checks and its last action): a put of each
    /// missing listing row, and a check of each existing row right above a missing one and
    /// of the path's own row.
    Write(Vec<TransactAction>),
}

/// The plan for the listing rows `existing` (read at `keys`, the path's prefixes, shortest
/// first); `expired` tells an expired removal mark.
pub(crate) fn from_state(
    layout: &Layout,
    keys: &[Key],
    existing: &[Option<Item>],
    expired: impl Fn(&str) -> bool,
) -> FromState {
    if existing
        .iter()
        .flatten()
        .any(|r| r.contains(layout.moving_attr()))
    {
        return FromState::Locked;
    }
    for (i, row) in existing.iter().enumerate() {
        if let Some(mark) = row.as_ref().and_then(|r| r.get_s(layout.deleting_attr())) {
            if expired(mark) {
                return FromState::ClearMark(i, mark.to_owned());
            }
            return FromState::Wait;
        }
    }
    let n = keys.len();
    let mut actions = Vec::with_capacity(n + 1);
    for (i, key) in keys.iter().enumerate() {
        let exists = existing.get(i).is_some_and(Option::is_some);
        let next_missing = i + 1 < n && existing.get(i + 1).is_some_and(Option::is_none);
        if !exists {
            actions.push(TransactAction::Put {
                item: key.clone().into_item(),
                condition: layout.not_marked(),
            });
        } else if next_missing || i + 1 == n {
            actions.push(TransactAction::ConditionCheck {
                key: key.clone(),
                condition: layout.free_row(),
            });
        }
    }
    FromState::Write(actions)
}

/// One transaction of a chunked write: its actions, where the caller's checks sit in it, and
/// whether it is the last (the one whose final action is the caller's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chunk {
    pub(crate) actions: Vec<TransactAction>,
    pub(crate) checks: Range<usize>,
    pub(crate) last: bool,
}

/// Splits `actions` (the caller's checks at `checks`) into transactions of at most
/// [`TRANSACT_MAX`] actions, sent in order: each after the first starts by checking the row
/// of the action before it, so that a removal between two chunks is seen. The last leaves
/// room for `reserve` more (the link index's entry of a link row it puts).
pub(crate) fn chunks(
    layout: &Layout,
    actions: &[TransactAction],
    checks: Range<usize>,
    reserve: usize,
) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < actions.len() {
        let mut chunk = Vec::with_capacity(TRANSACT_MAX);
        if start > 0
            && let Some(prev) = actions[start - 1].key()
        {
            chunk.push(TransactAction::ConditionCheck {
                key: prev,
                condition: layout.free_row(),
            });
        }
        let mut take = (TRANSACT_MAX - chunk.len()).min(actions.len() - start);
        // The last chunk carries the reserve: end this one a little earlier if need be.
        if start + take == actions.len() && chunk.len() + take + reserve > TRANSACT_MAX {
            take = (TRANSACT_MAX - chunk.len() - reserve).min(take);
        }
        let offset = chunk.len();
        let first = start;
        chunk.extend(actions[start..start + take].iter().cloned());
        start += take;
        // The checks' places in this chunk (they are all in the last one unless the path is
        // about 100 levels deep).
        let lo = checks.start.max(first);
        let hi = checks.end.min(start);
        let range = if lo < hi {
            (lo - first + offset)..(hi - first + offset)
        } else {
            0..0
        };
        out.push(Chunk {
            actions: chunk,
            checks: range,
            last: start == actions.len(),
        });
    }
    out
}

/// What pruning does with the listing row of a node that has no children, as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Prune {
    /// Already absent: go on to the parent.
    Absent,
    /// Locked by an operation, or marked by a live removal: theirs; stop.
    Leave,
    /// Mark it for removal under this condition (free, or exactly the expired mark there).
    Mark(Condition),
}

/// The pruning step for the listing row `row` as read; `expired` tells an expired mark.
pub(crate) fn prune(layout: &Layout, row: Option<&Item>, expired: impl Fn(&str) -> bool) -> Prune {
    let Some(row) = row else {
        return Prune::Absent;
    };
    if row.contains(layout.moving_attr()) {
        return Prune::Leave;
    }
    // A live removal mark belongs to a removal (or a re-parenting) under way: it is theirs
    // to finish. An expired one is taken over, conditional on exactly it.
    match row.get_s(layout.deleting_attr()) {
        Some(old) if !expired(old) => Prune::Leave,
        Some(old) => Prune::Mark(layout.markable_from(old)),
        None => Prune::Mark(layout.free_row()),
    }
}

/// The transaction that marks `path`'s listing row `own` with `mark` and takes the object
/// away (`object_action`, last: its failed condition is the caller's).
pub(crate) fn mark_transaction(
    layout: &Layout,
    own: &Key,
    mark: &str,
    object_action: TransactAction,
) -> Vec<TransactAction> {
    let mut marked = own.clone().into_item();
    marked.insert(
        layout.deleting_attr(),
        crate::item::Value::S(mark.to_owned()),
    );
    vec![
        TransactAction::Put {
            item: marked,
            condition: layout.markable(),
        },
        object_action,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Value;

    fn layout() -> Layout {
        Layout::new('¦').unwrap()
    }

    fn path(segments: &[&str]) -> Path {
        Path::new(segments.iter().copied()).unwrap()
    }

    fn known_of<'a>(known: &'a [&'a [&'a str]]) -> impl Fn(&Path) -> bool + 'a {
        move |p| known.iter().any(|k| path(k) == *p)
    }

    #[test]
    fn an_overwrite_is_tried_first_unless_the_put_likely_adds_a_name() {
        use Optimistic::*;
        let any = Condition::Always;
        let create = Condition::NotExists;
        let overwrite = First::Overwrite { read: false };
        let nothing = Known::default();
        let object = Known {
            object: true,
            own: true,
            sibling: false,
        };
        let own = Known {
            own: true,
            ..nothing
        };
        let sibling = Known {
            sibling: true,
            ..nothing
        };
        // The object known: the overwrite, and after a failure the plan's transaction.
        for plan in [TopLevel, Branch(1), UnderParent, Assumed] {
            assert_eq!(first(plan, object, 0, &any), overwrite);
            assert_eq!(first(plan, object, 0, &create), overwrite);
        }
        // Nothing known: the overwrite, then a read (no guess of the listing row).
        let read = First::Overwrite { read: true };
        assert_eq!(first(Assumed, nothing, 0, &any), read);
        // A top-level name: the overwrite, then the plan's transaction.
        assert_eq!(first(TopLevel, nothing, 0, &any), overwrite);
        // The listing row known (children written), the object not: then the check of it.
        assert_eq!(first(Assumed, own, 0, &any), overwrite);
        // A name beside known ones (the parent's row, or a sibling's, known), or a new branch
        // below a known row: the transaction, which serves an overwrite too.
        assert_eq!(first(UnderParent, nothing, 0, &any), First::Transaction);
        assert_eq!(first(Branch(2), nothing, 0, &any), First::Transaction);
        assert_eq!(first(TopLevel, sibling, 0, &any), First::Transaction);
        assert_eq!(first(Assumed, sibling, 0, &any), First::Transaction);
        // A create of an unknown object, or checks of other rows: the transaction.
        let live = Condition::Or(vec![Condition::NotExists, Condition::attr_exists("ttl")]);
        for c in [&create, &live, &Condition::And(vec![create.clone()])] {
            assert_eq!(first(Assumed, nothing, 0, c), First::Transaction);
        }
        assert_eq!(first(Assumed, object, 1, &any), First::Transaction);
    }

    /// What each action is, in order: "put L(a/b)", "check L(a)", "put object", ...
    fn shape(layout: &Layout, actions: &[TransactAction]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                TransactAction::Put { item, .. } => {
                    let key = Key::from_item(item).unwrap();
                    if item.contains("v") {
                        "put object".to_owned()
                    } else {
                        format!("put {}", name(layout, &key))
                    }
                }
                TransactAction::ConditionCheck { key, .. } => {
                    format!("check {}", name(layout, key))
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn name(layout: &Layout, key: &Key) -> String {
        for depth in 1..=4 {
            let prefix = path(&["a", "b", "c", "d"][..depth]);
            if layout.listing_key(&prefix) == *key {
                return format!("L({})", prefix.to_string().trim_start_matches('/'));
            }
        }
        format!("{key:?}")
    }

    fn object(layout: &Layout, p: &Path) -> Item {
        let mut row = layout.object_key(p).into_item();
        row.insert("v", Value::N("1".into()));
        row
    }

    #[test]
    fn the_optimistic_plan_follows_what_the_cache_knows() {
        let a = path(&["a"]);
        let abcd = path(&["a", "b", "c", "d"]);
        assert_eq!(optimistic(&a, known_of(&[]), 0), Optimistic::TopLevel);
        assert_eq!(optimistic(&a, known_of(&[&["a"]]), 0), Optimistic::Assumed);
        // Nothing known below the root: assumed to exist.
        assert_eq!(optimistic(&abcd, known_of(&[]), 0), Optimistic::Assumed);
        assert_eq!(
            optimistic(&abcd, known_of(&[&["a", "b", "c"]]), 0),
            Optimistic::UnderParent
        );
        assert_eq!(
            optimistic(&abcd, known_of(&[&["a"]]), 0),
            Optimistic::Branch(1)
        );
        // The deepest known ancestor is the one checked.
        assert_eq!(
            optimistic(&abcd, known_of(&[&["a"], &["a", "b"]]), 0),
            Optimistic::Branch(2)
        );
        assert_eq!(
            optimistic(&abcd, known_of(&[&["a", "b", "c", "d"]]), 0),
            Optimistic::Assumed
        );
    }

    #[test]
    fn a_branch_too_long_for_one_transaction_is_assumed() {
        let deep: Vec<String> = (0..TRANSACT_MAX).map(|i| format!("s{i}")).collect();
        let p = Path::new(deep.iter().map(String::as_str)).unwrap();
        let known = |q: &Path| q.len() == 1;
        assert_eq!(optimistic(&p, known, 0), Optimistic::Assumed);
        // Short enough with no checks, too long with them.
        let fits: Vec<String> = (0..TRANSACT_MAX - 1).map(|i| format!("s{i}")).collect();
        let p = Path::new(fits.iter().map(String::as_str)).unwrap();
        assert_eq!(optimistic(&p, known, 0), Optimistic::Branch(1));
        assert_eq!(optimistic(&p, known, 1), Optimistic::Assumed);
    }

    #[test]
    fn each_optimistic_plan_sends_its_actions_with_the_object_last() {
        let l = layout();
        let abcd = path(&["a", "b", "c", "d"]);
        let row = object(&l, &abcd);
        let send = |plan| {
            let (actions, checks) =
                optimistic_actions(&l, &abcd, plan, &row, &Condition::Always, &[]);
            assert!(checks.is_empty());
            shape(&l, &actions)
        };
        assert_eq!(
            send(Optimistic::Assumed),
            ["check L(a/b/c/d)", "put object"]
        );
        assert_eq!(
            send(Optimistic::UnderParent),
            ["put L(a/b/c/d)", "check L(a/b/c)", "put object"]
        );
        assert_eq!(
            send(Optimistic::Branch(1)),
            [
                "check L(a)",
                "put L(a/b)",
                "put L(a/b/c)",
                "put L(a/b/c/d)",
                "put object"
            ]
        );
        let a = path(&["a"]);
        let (actions, _) = optimistic_actions(
            &l,
            &a,
            Optimistic::TopLevel,
            &object(&l, &a),
            &Condition::Always,
            &[],
        );
        assert_eq!(shape(&l, &actions), ["put L(a)", "put object"]);
    }

    #[test]
    fn the_callers_checks_sit_right_before_the_object() {
        let l = layout();
        let p = path(&["a", "b"]);
        let other = TransactAction::ConditionCheck {
            key: Key::new("x", "y"),
            condition: Condition::Exists,
        };
        let (actions, checks) = optimistic_actions(
            &l,
            &p,
            Optimistic::UnderParent,
            &object(&l, &p),
            &Condition::Always,
            std::slice::from_ref(&other),
        );
        assert_eq!(checks, 2..3);
        assert_eq!(actions[2], other);
        assert!(
            matches!(actions.last(), Some(TransactAction::Put { item, .. }) if item.contains("v"))
        );
    }

    #[test]
    fn the_cache_learns_what_a_transaction_created_and_forgets_what_it_doubted() {
        let l = layout();
        let abcd = path(&["a", "b", "c", "d"]);
        let key = |s: &[&str]| l.listing_key(&path(s));
        assert_eq!(
            optimistic_learned(&l, &abcd, Optimistic::Branch(1)),
            [
                key(&["a", "b"]),
                key(&["a", "b", "c"]),
                key(&["a", "b", "c", "d"])
            ]
        );
        assert_eq!(
            optimistic_learned(&l, &abcd, Optimistic::Assumed),
            [key(&["a", "b", "c", "d"])]
        );
        assert_eq!(
            optimistic_doubted(&l, &abcd, Optimistic::Branch(1)),
            [
                key(&["a"]),
                key(&["a", "b", "c", "d"]),
                key(&["a", "b", "c"])
            ]
        );
        assert_eq!(
            optimistic_doubted(&l, &path(&["a"]), Optimistic::TopLevel),
            [key(&["a"])]
        );
    }

    #[test]
    fn the_plan_from_the_rows_read_writes_exactly_the_missing_rows() {
        let l = layout();
        let abcd = path(&["a", "b", "c", "d"]);
        let keys: Vec<Key> = (1..=4).map(|i| l.listing_key(&abcd.prefix(i))).collect();
        let row = |i: usize| Some(keys[i].clone().into_item());
        let plan = |existing: &[Option<Item>]| match from_state(&l, &keys, existing, |_| false) {
            FromState::Write(actions) => shape(&l, &actions),
            other => vec![format!("{other:?}")],
        };
        // Nothing exists: every row is put.
        assert_eq!(
            plan(&[None, None, None, None]),
            ["put L(a)", "put L(a/b)", "put L(a/b/c)", "put L(a/b/c/d)"]
        );
        // The first two exist: the last existing one is checked, the rest put.
        assert_eq!(
            plan(&[row(0), row(1), None, None]),
            ["check L(a/b)", "put L(a/b/c)", "put L(a/b/c/d)"]
        );
        // All exist: only the path's own row is checked.
        assert_eq!(
            plan(&[row(0), row(1), row(2), row(3)]),
            ["check L(a/b/c/d)"]
        );
        // A gap (a row missing between two existing ones, as a repair finds): each existing
        // row above a missing one is checked.
        assert_eq!(
            plan(&[row(0), None, row(2), None]),
            [
                "check L(a)",
                "put L(a/b)",
                "check L(a/b/c)",
                "put L(a/b/c/d)"
            ]
        );
    }

    #[test]
    fn marked_or_locked_rows_stop_the_plan_from_the_rows_read() {
        let l = layout();
        let ab = path(&["a", "b"]);
        let keys: Vec<Key> = (1..=2).map(|i| l.listing_key(&ab.prefix(i))).collect();
        let with = |i: usize, attr: &str, v: &str| {
            let mut r = keys[i].clone().into_item();
            r.insert(attr, Value::S(v.into()));
            Some(r)
        };
        let plain = Some(keys[0].clone().into_item());
        let locked = [plain.clone(), with(1, l.moving_attr(), "lock")];
        assert_eq!(from_state(&l, &keys, &locked, |_| false), FromState::Locked);
        let marked = [with(0, l.deleting_attr(), "m1"), None];
        assert_eq!(from_state(&l, &keys, &marked, |_| false), FromState::Wait);
        assert_eq!(
            from_state(&l, &keys, &marked, |m| m == "m1"),
            FromState::ClearMark(0, "m1".into())
        );
        // A lock anywhere wins over a mark.
        let both = [
            with(0, l.deleting_attr(), "m1"),
            with(1, l.moving_attr(), "lock"),
        ];
        assert_eq!(from_state(&l, &keys, &both, |_| true), FromState::Locked);
    }

    #[test]
    fn chunks_hold_at_most_the_transaction_limit_and_check_the_row_before_each() {
        let l = layout();
        let keys: Vec<Key> = (0..250).map(|i| Key::new(format!("h{i}"), "r")).collect();
        let mut actions: Vec<TransactAction> = keys
            .iter()
            .map(|k| TransactAction::Put {
                item: k.clone().into_item(),
                condition: Condition::Always,
            })
            .collect();
        let check = TransactAction::ConditionCheck {
            key: Key::new("x", "y"),
            condition: Condition::Exists,
        };
        actions.push(check.clone());
        actions.push(TransactAction::Put {
            item: Key::new("obj", "r").into_item(),
            condition: Condition::Always,
        });
        let out = chunks(&l, &actions, 250..251, 0);
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|c| c.actions.len() <= TRANSACT_MAX));
        assert_eq!(
            out.iter().map(|c| c.last).collect::<Vec<_>>(),
            [false, false, true]
        );
        // Every action is sent once, in order, after the first chunk behind a check of the
        // row before it.
        let sent: Vec<&TransactAction> = out
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.actions[usize::from(i > 0)..].iter())
            .collect();
        assert_eq!(sent, actions.iter().collect::<Vec<_>>());
        assert_eq!(
            out[1].actions[0],
            TransactAction::ConditionCheck {
                key: keys[99].clone(),
                condition: l.free_row(),
            }
        );
        // The caller's check is found in the last chunk.
        let last = &out[2];
        assert_eq!(last.actions[last.checks.clone()], [check]);
        assert!(out[0].checks.is_empty() && out[1].checks.is_empty());
    }

    #[test]
    fn pruning_marks_a_free_row_takes_expired_marks_over_and_leaves_the_rest() {
        let l = layout();
        let key = l.listing_key(&path(&["a"]));
        let with = |attr: &str, v: &str| {
            let mut r = key.clone().into_item();
            r.insert(attr, Value::S(v.into()));
            r
        };
        let plain = key.clone().into_item();
        assert_eq!(prune(&l, None, |_| false), Prune::Absent);
        assert_eq!(
            prune(&l, Some(&plain), |_| false),
            Prune::Mark(l.free_row())
        );
        let locked = with(l.moving_attr(), "lock");
        assert_eq!(prune(&l, Some(&locked), |_| true), Prune::Leave);
        let marked = with(l.deleting_attr(), "m1");
        assert_eq!(prune(&l, Some(&marked), |_| false), Prune::Leave);
        assert_eq!(
            prune(&l, Some(&marked), |m| m == "m1"),
            Prune::Mark(l.markable_from("m1"))
        );
    }

    #[test]
    fn the_mark_transaction_marks_the_listing_row_before_the_object_step() {
        let l = layout();
        let own = l.listing_key(&path(&["a", "b"]));
        let object = TransactAction::Delete {
            key: l.object_key(&path(&["a", "b"])),
            condition: Condition::Always,
        };
        let tx = mark_transaction(&l, &own, "m1", object.clone());
        assert_eq!(tx.len(), 2);
        let TransactAction::Put { item, condition } = &tx[0] else {
            panic!("{tx:?}");
        };
        assert_eq!(Key::from_item(item).as_ref(), Some(&own));
        assert_eq!(item.get_s(l.deleting_attr()), Some("m1"));
        assert_eq!(*condition, l.markable());
        assert_eq!(tx[1], object);
    }
}
