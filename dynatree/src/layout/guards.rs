//! Every condition a protocol guards a row with, built in one place and checked against every
//! state a row can be in. The protocols (`crate::tree`) name these; none spells out the
//! attributes of a guard itself.

use crate::item::{Item, Value};
use crate::path::Path;
use crate::storage::{Comparison, Condition, HASH_KEY, RANGE_KEY};

use super::Layout;

impl Layout {
    /// Exists, and neither marked for removal nor locked by a move.
    pub(crate) fn free_row(&self) -> Condition {
        Condition::And(vec![
            Condition::Exists,
            Condition::attr_not_exists(self.deleting_attr()),
            Condition::attr_not_exists(self.moving_attr()),
        ])
    }

    /// Absent, or present and neither marked nor locked: what writing a listing row requires.
    pub(crate) fn not_marked(&self) -> Condition {
        Condition::And(vec![
            Condition::attr_not_exists(self.deleting_attr()),
            Condition::attr_not_exists(self.moving_attr()),
        ])
    }

    /// Exists and is not locked (a live or expired mark is taken over): what marking requires.
    pub(crate) fn markable(&self) -> Condition {
        Condition::And(vec![
            Condition::Exists,
            Condition::attr_not_exists(self.moving_attr()),
        ])
    }

    /// Not locked, and marked with exactly `mark` (an expired mark, taken over).
    pub(crate) fn markable_from(&self, mark: &str) -> Condition {
        Condition::And(vec![
            Condition::attr_not_exists(self.moving_attr()),
            self.marked_by(mark),
        ])
    }

    /// Marked for removal with `mark`: every step of a removal after its mark is conditional
    /// on it, so a remover whose mark was taken over stops.
    pub(crate) fn marked_by(&self, mark: &str) -> Condition {
        Condition::equals(self.deleting_attr(), Value::S(mark.to_owned()))
    }

    /// Locked by the operation whose lock value is `lock`.
    pub(crate) fn locked_by(&self, lock: &Value) -> Condition {
        Condition::equals(self.moving_attr(), lock.clone())
    }

    /// Exists, not marked for removal, and unlocked or locked by `lock` already: what an
    /// operation's lock of a listing row requires.
    pub(crate) fn lockable_by(&self, lock: &Value) -> Condition {
        Condition::And(vec![
            Condition::Exists,
            Condition::attr_not_exists(self.deleting_attr()),
            self.unlocked_or(Some(lock)),
        ])
    }

    /// Not locked, or locked by `lock` (when given).
    pub(crate) fn unlocked_or(&self, lock: Option<&Value>) -> Condition {
        let free = Condition::attr_not_exists(self.moving_attr());
        match lock {
            None => free,
            Some(lock) => Condition::Or(vec![free, self.locked_by(lock)]),
        }
    }

    /// Absent, or locked by `lock`: where an operation writes the rows of its destination.
    pub(crate) fn absent_or_locked_by(&self, lock: &Value) -> Condition {
        Condition::Or(vec![Condition::NotExists, self.locked_by(lock)])
    }

    /// An object row that neither holds a fence nor is held by a move or copy: what a single
    /// PutItem of an object requires (with [`overwritable`](Self::overwritable), that it is
    /// there).
    pub(crate) fn unfenced_unheld(&self) -> Vec<Condition> {
        vec![
            Condition::attr_not_exists(self.fence_attr()),
            Condition::attr_not_exists(self.held_attr()),
        ]
    }

    /// An object row that is there, is no fence, and is not held: an overwrite in one
    /// PutItem. The conjuncts, for the caller to add its own.
    pub(crate) fn overwritable(&self) -> Vec<Condition> {
        let mut all = vec![Condition::Exists];
        all.extend(self.unfenced_unheld());
        all
    }

    /// A plain object row: there, no fence, no link. What a denormalized copy is written
    /// into. The conjuncts, for the caller to add its own.
    pub(crate) fn plain_object(&self) -> Vec<Condition> {
        vec![
            Condition::Exists,
            Condition::attr_not_exists(self.fence_attr()),
            Condition::attr_not_exists(self.link_attr()),
        ]
    }

    /// A real object row: there and no fence. The conjuncts, for the caller to add its own.
    pub(crate) fn real_object(&self) -> Vec<Condition> {
        vec![
            Condition::Exists,
            Condition::attr_not_exists(self.fence_attr()),
        ]
    }

    /// An object row held by the move or copy whose id is `id`.
    pub(crate) fn held_by(&self, id: &Value) -> Condition {
        Condition::equals(self.held_attr(), id.clone())
    }

    /// A link row whose target is `target`.
    pub(crate) fn links_to(&self, target: &Path) -> Condition {
        Condition::equals(self.link_attr(), Value::S(self.encode_target(target)))
    }

    /// A link row (one holding the link attribute), whatever its target.
    pub(crate) fn any_link(&self) -> Condition {
        Condition::attr_exists(self.link_attr())
    }

    /// An object row whose expiry is before `now` (seconds since the epoch).
    pub(crate) fn expired_at(&self, now: u64) -> Condition {
        Condition::Compare(self.ttl_attr(), Comparison::Lt, Value::N(now.to_string()))
    }

    /// A tombstone row as read: holding version `version`, or absent when there was none.
    pub(crate) fn tombstone_as_read(&self, version: Option<u64>) -> Condition {
        match version {
            Some(t) => Condition::equals(self.source_version_attr(), Value::N(t.to_string())),
            None => Condition::NotExists,
        }
    }

    /// There, with every user attribute of `row` (no key or bookkeeping attribute) equal to
    /// its value in `row`.
    pub(crate) fn user_attrs_unchanged(&self, row: &Item) -> Condition {
        let mut unchanged = vec![Condition::Exists];
        for name in row.names() {
            if !name.starts_with(self.reserved())
                && name != HASH_KEY
                && name != RANGE_KEY
                && let Some(v) = row.get(name)
            {
                unchanged.push(Condition::equals(name, v.clone()));
            }
        }
        Condition::And(unchanged)
    }

    /// An intent record owned by the owner whose token is `token`.
    pub(crate) fn intent_owned_by(&self, token: &str) -> Condition {
        Condition::equals(self.intent_attr("owner"), Value::S(token.to_owned()))
    }

    /// An intent record with every attribute of `item` (the record as read) equal to its
    /// value there, and, when `unowned`, no owner.
    pub(crate) fn intent_as_read(&self, item: &Item, unowned: bool) -> Condition {
        let mut unchanged: Vec<Condition> = item
            .iter()
            .map(|(name, value)| Condition::equals(name, value.clone()))
            .collect();
        if unowned {
            unchanged.push(Condition::attr_not_exists(self.intent_attr("owner")));
        }
        // The optional fields absent when read are still absent: a record that gained lanes
        // (or a refusal) since is not the record read, even with every other field equal.
        for field in ["lanes", "refusal"] {
            let name = self.intent_attr(field);
            if !item.contains(&name) {
                unchanged.push(Condition::attr_not_exists(name));
            }
        }
        Condition::And(unchanged)
    }
}

/// All of `conditions`, as one `And` of them in their order (none dropped or merged).
pub(crate) fn all(conditions: impl IntoIterator<Item = Condition>) -> Condition {
    Condition::And(conditions.into_iter().collect())
}

/// `condition` and `extra`: just `extra` when `condition` is `Always`.
pub(crate) fn both(condition: &Condition, extra: Condition) -> Condition {
    match condition {
        Condition::Always => extra,
        c => Condition::And(vec![c.clone(), extra]),
    }
}

/// The row is there and `condition` holds.
pub(crate) fn exists_and(condition: Condition) -> Condition {
    Condition::And(vec![Condition::Exists, condition])
}

/// Every attribute of `attrs` as `row` holds it: equal, or absent where `row` lacks it.
pub(crate) fn unchanged_since(row: &Item, attrs: impl IntoIterator<Item = String>) -> Condition {
    Condition::And(
        attrs
            .into_iter()
            .map(|a| {
                let seen = row.get(&a).cloned();
                unchanged(a, seen)
            })
            .collect(),
    )
}

/// Every attribute of `attrs` absent or a number below `v`: a row whose versions are all
/// older than `v`.
pub(crate) fn versions_below(attrs: impl IntoIterator<Item = String>, v: u64) -> Condition {
    Condition::And(
        attrs
            .into_iter()
            .map(|attr| below(attr, Comparison::Lt, Value::N(v.to_string())))
            .collect(),
    )
}

/// The user's version field `field` holds the number `v`: an optimistic update's guard.
pub(crate) fn at_version(field: &str, v: u64) -> Condition {
    Condition::equals(field, Value::N(v.to_string()))
}

/// A stream consumer's checkpoint row: absent, or holding an ordinal (in `ordinal_attr`) at
/// most `ordinal`, so that a checkpoint never moves back.
#[cfg_attr(not(feature = "streams"), allow(dead_code))]
pub(crate) fn no_later_checkpoint(ordinal_attr: String, ordinal: String) -> Condition {
    Condition::Or(vec![
        Condition::NotExists,
        Condition::compare(ordinal_attr, Comparison::Le, Value::S(ordinal)),
    ])
}

/// `attr` absent, or a number `op` (below, or at most) `v`: a version guard.
pub(crate) fn below(attr: String, op: Comparison, v: Value) -> Condition {
    Condition::Or(vec![
        Condition::attr_not_exists(attr.clone()),
        Condition::Compare(attr, op, v),
    ])
}

/// `attr` still holds `seen` as read: equal to it, or absent if it was.
pub(crate) fn unchanged(attr: String, seen: Option<Value>) -> Condition {
    match seen {
        Some(v) => Condition::equals(attr, v),
        None => Condition::attr_not_exists(attr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Item;
    use crate::path::Path;

    /// Every state of a listing row: absent, plain, marked, locked, marked and locked.
    fn states(layout: &Layout) -> [(&'static str, Option<Item>); 5] {
        let path = Path::new(["a", "b"]).unwrap();
        let plain = layout.listing_key(&path).into_item();
        let with = |attrs: &[&str]| {
            let mut row = plain.clone();
            for a in attrs {
                row.insert(*a, Value::S("1:x".into()));
            }
            Some(row)
        };
        [
            ("absent", None),
            ("plain", Some(plain.clone())),
            ("marked", with(&[layout.deleting_attr()])),
            ("locked", with(&[layout.moving_attr()])),
            (
                "marked+locked",
                with(&[layout.deleting_attr(), layout.moving_attr()]),
            ),
        ]
    }

    fn holds(c: &crate::storage::Condition, layout: &Layout) -> Vec<&'static str> {
        states(layout)
            .into_iter()
            .filter(|(_, row)| c.eval(row.as_ref()))
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn guard_conditions_hold_exactly_where_the_protocol_needs() {
        let layout = Layout::new('¦').unwrap();
        // A put may rely on a row only when it is there and nobody is removing or moving it.
        assert_eq!(holds(&layout.free_row(), &layout), ["plain"]);
        // A new row may be written over nothing or an unclaimed row, never over a claimed one.
        assert_eq!(holds(&layout.not_marked(), &layout), ["absent", "plain"]);
        // A remover may mark a row that exists and is not locked (taking over another mark).
        assert_eq!(holds(&layout.markable(), &layout), ["plain", "marked"]);
    }

    #[test]
    fn lock_and_mark_guards_name_their_owner() {
        let layout = Layout::new('¦').unwrap();
        let lock = Value::S("1:x".into());
        // The states' marks and locks all hold the value "1:x".
        assert_eq!(
            holds(&layout.marked_by("1:x"), &layout),
            ["marked", "marked+locked"]
        );
        assert_eq!(holds(&layout.markable_from("1:x"), &layout), ["marked"]);
        assert_eq!(
            holds(&layout.locked_by(&lock), &layout),
            ["locked", "marked+locked"]
        );
        assert_eq!(
            holds(&layout.lockable_by(&lock), &layout),
            ["plain", "locked"]
        );
        let other = Value::S("2:y".into());
        assert_eq!(holds(&layout.lockable_by(&other), &layout), ["plain"]);
        assert_eq!(
            holds(&layout.absent_or_locked_by(&lock), &layout),
            ["absent", "locked", "marked+locked"]
        );
        assert_eq!(
            holds(&layout.unlocked_or(None), &layout),
            ["absent", "plain", "marked"]
        );
    }

    #[test]
    fn object_guards_refuse_fences_holds_and_links() {
        let layout = Layout::new('¦').unwrap();
        let path = Path::new(["a"]).unwrap();
        let plain = layout.object_row(&path, Item::new()).unwrap();
        let with = |attr: String| {
            let mut row = plain.clone();
            row.insert(attr, Value::S("x".into()));
            row
        };
        let rows = [
            ("absent", None),
            ("plain", Some(plain.clone())),
            ("fence", Some(with(layout.fence_attr()))),
            ("held", Some(with(layout.held_attr()))),
            ("link", Some(with(layout.link_attr().to_owned()))),
        ];
        let holds = |c: Condition| -> Vec<&str> {
            rows.iter()
                .filter(|(_, r)| c.eval(r.as_ref()))
                .map(|(n, _)| *n)
                .collect()
        };
        assert_eq!(
            holds(Condition::And(layout.overwritable())),
            ["plain", "link"]
        );
        assert_eq!(
            holds(Condition::And(layout.unfenced_unheld())),
            ["absent", "plain", "link"]
        );
        assert_eq!(
            holds(Condition::And(layout.plain_object())),
            ["plain", "held"]
        );
    }

    #[test]
    fn version_guards_compare_numbers_and_absence() {
        let n = |v: u64| Value::N(v.to_string());
        let row = |v: Option<u64>| {
            let mut r = Item::new();
            if let Some(v) = v {
                r.insert("v", n(v));
            }
            r
        };
        let lt = below("v".into(), Comparison::Lt, n(5));
        assert!(lt.eval(Some(&row(None))) && lt.eval(Some(&row(Some(4)))));
        assert!(!lt.eval(Some(&row(Some(5)))));
        let le = below("v".into(), Comparison::Le, n(5));
        assert!(le.eval(Some(&row(Some(5)))) && !le.eval(Some(&row(Some(6)))));
        let same = unchanged("v".into(), Some(n(3)));
        assert!(same.eval(Some(&row(Some(3)))) && !same.eval(Some(&row(None))));
        let absent = unchanged("v".into(), None);
        assert!(absent.eval(Some(&row(None))) && !absent.eval(Some(&row(Some(3)))));
    }

    /// The names of the `rows` on which `c` holds, in order.
    fn admits<'a>(c: &Condition, rows: &[(&'a str, Option<Item>)]) -> Vec<&'a str> {
        rows.iter()
            .filter(|(_, r)| c.eval(r.as_ref()))
            .map(|(n, _)| *n)
            .collect()
    }

    /// A row of the attributes `attrs` (no key).
    fn row_of(attrs: &[(&str, Value)]) -> Option<Item> {
        let mut row = Item::new();
        for (name, value) in attrs {
            row.insert(*name, value.clone());
        }
        Some(row)
    }

    fn n(v: u64) -> Value {
        Value::N(v.to_string())
    }

    #[test]
    fn object_guards_name_the_holder_and_the_link_target() {
        let layout = Layout::new('¦').unwrap();
        let path = Path::new(["a"]).unwrap();
        let target = Path::new(["t"]).unwrap();
        let elsewhere = Path::new(["u"]).unwrap();
        let plain = layout.object_row(&path, Item::new()).unwrap();
        let with = |attr: String, value: Value| {
            let mut row = plain.clone();
            row.insert(attr, value);
            Some(row)
        };
        let id = Value::S("op-1".into());
        let rows = [
            ("absent", None),
            ("plain", Some(plain.clone())),
            ("fence", with(layout.fence_attr(), n(9))),
            ("held", with(layout.held_attr(), id.clone())),
            (
                "held by another",
                with(layout.held_attr(), Value::S("op-2".into())),
            ),
            ("link", Some(layout.link_row(&path, &target).unwrap())),
            (
                "other link",
                Some(layout.link_row(&path, &elsewhere).unwrap()),
            ),
        ];
        assert_eq!(admits(&layout.held_by(&id), &rows), ["held"]);
        assert_eq!(admits(&layout.links_to(&target), &rows), ["link"]);
        assert_eq!(admits(&layout.any_link(), &rows), ["link", "other link"]);
        assert_eq!(
            admits(&all(layout.real_object()), &rows),
            ["plain", "held", "held by another", "link", "other link"]
        );
        // With a caller's own conjunct after the real object's.
        let unheld = Condition::attr_not_exists(layout.held_attr());
        assert_eq!(
            admits(
                &all(layout.real_object().into_iter().chain([unheld])),
                &rows
            ),
            ["plain", "link", "other link"]
        );
    }

    #[test]
    fn expiry_guard_admits_only_rows_expired_before_now() {
        let layout = Layout::new('¦').unwrap();
        let ttl = layout.ttl_attr();
        let rows = [
            ("absent", None),
            ("no expiry", row_of(&[])),
            ("expired before", row_of(&[(&ttl, n(9))])),
            ("expiring now", row_of(&[(&ttl, n(10))])),
            ("expiring after", row_of(&[(&ttl, n(11))])),
        ];
        assert_eq!(admits(&layout.expired_at(10), &rows), ["expired before"]);
    }

    #[test]
    fn tombstone_guard_admits_the_tombstone_as_read() {
        let layout = Layout::new('¦').unwrap();
        let sv = layout.source_version_attr();
        let rows = [
            ("absent", None),
            ("at 5", row_of(&[(&sv, n(5))])),
            ("at 6", row_of(&[(&sv, n(6))])),
        ];
        assert_eq!(admits(&layout.tombstone_as_read(Some(5)), &rows), ["at 5"]);
        assert_eq!(admits(&layout.tombstone_as_read(None), &rows), ["absent"]);
    }

    #[test]
    fn user_attrs_guard_ignores_keys_and_bookkeeping() {
        let layout = Layout::new('¦').unwrap();
        let path = Path::new(["a"]).unwrap();
        let sv = layout.source_version_attr();
        let mut attrs = Item::new();
        attrs.insert("name", Value::S("x".into()));
        attrs.insert(sv.clone(), n(1));
        let read = layout.object_row(&path, attrs).unwrap();
        let changed = |name: &str, value: Option<Value>| {
            let mut row = read.clone();
            match value {
                Some(v) => row.insert(name, v),
                None => row.remove(name),
            };
            Some(row)
        };
        let rows = [
            ("absent", None),
            ("as read", Some(read.clone())),
            (
                "user attr changed",
                changed("name", Some(Value::S("y".into()))),
            ),
            ("user attr removed", changed("name", None)),
            ("user attr added", changed("other", Some(n(1)))),
            ("bookkeeping changed", changed(&sv, Some(n(2)))),
        ];
        // Only the user attributes read are compared: added ones and bookkeeping are not.
        assert_eq!(
            admits(&layout.user_attrs_unchanged(&read), &rows),
            ["as read", "user attr added", "bookkeeping changed"]
        );
    }

    #[test]
    fn intent_guards_admit_the_owner_and_the_record_as_read() {
        let layout = Layout::new('¦').unwrap();
        let owner = layout.intent_attr("owner");
        let phase = layout.intent_attr("phase");
        let unowned = row_of(&[(&phase, Value::S("copy".into()))]).unwrap();
        let owned_by = |token: &str| {
            let mut row = unowned.clone();
            row.insert(owner.clone(), Value::S(token.into()));
            Some(row)
        };
        let rows = [
            ("absent", None),
            ("unowned", Some(unowned.clone())),
            ("owned by t", owned_by("t")),
            ("owned by u", owned_by("u")),
            (
                "phase moved on",
                row_of(&[(&phase, Value::S("delete".into()))]),
            ),
        ];
        assert_eq!(admits(&layout.intent_owned_by("t"), &rows), ["owned by t"]);
        // Taking over an unowned record: it, exactly, and still nobody's.
        assert_eq!(
            admits(&layout.intent_as_read(&unowned, true), &rows),
            ["unowned"]
        );
        // Taking over from a stale owner: the record with that owner, exactly.
        let stale = owned_by("t").unwrap();
        assert_eq!(
            admits(&layout.intent_as_read(&stale, false), &rows),
            ["owned by t"]
        );
    }

    #[test]
    fn combinators_keep_every_condition_in_order() {
        let layout = Layout::new('¦').unwrap();
        let a = Condition::attr_exists("a");
        let b = Condition::attr_exists("b");
        assert_eq!(
            all([a.clone(), b.clone()]),
            Condition::And(vec![a.clone(), b.clone()])
        );
        // Nested conjunctions stay as they are: nothing is flattened or dropped.
        let nested = all([layout.free_row(), Condition::Always]);
        assert_eq!(
            nested,
            Condition::And(vec![layout.free_row(), Condition::Always])
        );
        assert_eq!(both(&Condition::Always, b.clone()), b);
        assert_eq!(
            both(&a, b.clone()),
            Condition::And(vec![a.clone(), b.clone()])
        );
        assert_eq!(
            exists_and(a.clone()),
            Condition::And(vec![Condition::Exists, a])
        );
        // A guard that holds over nothing no longer does once the row must exist.
        assert_eq!(holds(&exists_and(layout.not_marked()), &layout), ["plain"]);
        let lock = Value::S("1:x".into());
        assert_eq!(
            holds(&exists_and(layout.unlocked_or(Some(&lock))), &layout),
            ["plain", "marked", "locked", "marked+locked"]
        );
    }

    #[test]
    fn version_set_guards_compare_every_attribute() {
        let rows = [
            ("absent", None),
            ("none", row_of(&[])),
            ("a 3", row_of(&[("a", n(3))])),
            ("a 3 b 4", row_of(&[("a", n(3)), ("b", n(4))])),
            ("a 3 b 5", row_of(&[("a", n(3)), ("b", n(5))])),
            ("a 6", row_of(&[("a", n(6))])),
        ];
        let attrs = || ["a".to_owned(), "b".to_owned()];
        let read = row_of(&[("a", n(3))]).unwrap();
        assert_eq!(admits(&unchanged_since(&read, attrs()), &rows), ["a 3"]);
        let nothing = Item::new();
        assert_eq!(
            admits(&unchanged_since(&nothing, attrs()), &rows),
            ["absent", "none"]
        );
        assert_eq!(
            admits(&versions_below(attrs(), 5), &rows),
            ["absent", "none", "a 3", "a 3 b 4"]
        );
    }

    #[test]
    fn optimistic_version_guard_admits_the_version_read() {
        let rows = [
            ("absent", None),
            ("no version", row_of(&[])),
            ("at 3", row_of(&[("version", n(3))])),
            ("at 4", row_of(&[("version", n(4))])),
            (
                "at 3 as a string",
                row_of(&[("version", Value::S("3".into()))]),
            ),
        ];
        assert_eq!(admits(&at_version("version", 3), &rows), ["at 3"]);
    }

    #[test]
    fn checkpoint_guard_never_moves_a_checkpoint_back() {
        let s = |v: &str| Value::S(v.into());
        let rows = [
            ("absent", None),
            ("no ordinal", row_of(&[])),
            ("earlier", row_of(&[("o", s("0004"))])),
            ("same", row_of(&[("o", s("0005"))])),
            ("later", row_of(&[("o", s("0006"))])),
        ];
        assert_eq!(
            admits(&no_later_checkpoint("o".into(), "0005".into()), &rows),
            ["absent", "earlier", "same"]
        );
    }
}
