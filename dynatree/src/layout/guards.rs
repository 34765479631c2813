//! Every condition a protocol guards a row with, built in one place and checked against every
//! state a row can be in. The protocols (`crate::tree`) name these; none spells out the
//! attributes of a guard itself.

use crate::item::Value;
use crate::storage::{Comparison, Condition};

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
}
