//! The link index: one entry row per link row, keyed by the link's target, so that the links
//! into a subtree are one Query away instead of a Scan of the table (see "The link index" in
//! the moves docs).
//!
//! With depth `d` ([`TreeBuilder::link_index`](crate::TreeBuilder::link_index)), the entry of
//! the link at `L` to the target `T` is the row
//!
//! | `Key` | `Child` |
//! |---|---|
//! | `SC t0 … SC t(d-1) SC SC links` | `SC td … SC t(n-1) SC SC SC l0 … SC l(m-1)` |
//!
//! (the first `min(d, n)` components of the target, then the rest of the target and the link
//! itself). No component is empty, so `SC SC` occurs in neither key but as the separators
//! above: no entry's `Key` is a path's object or listing key (the Go library never reads
//! them), and each entry splits into its link and target one way only. The entries of the
//! targets under a path `P` of depth `d` or more are one partition's range
//! `begins_with(SC p(d) … SC p(k-1) SC)`.

use super::{Layout, MAX_HASH_KEY_BYTES, MAX_RANGE_KEY_BYTES};
use crate::error::{Error, Result};
use crate::item::Item;
use crate::path::Path;
use crate::storage::{Key, Query, RangeCondition};

/// The suffix of an entry partition's `Key`, after `SC SC`.
const ENTRIES: &str = "links";

impl Layout {
    /// The partition of the entries of targets whose first `depth` components are `prefix`'s
    /// (or, shorter, exactly `prefix`).
    fn link_entries_hash(&self, prefix: &[String]) -> String {
        format!(
            "{}{}{}{ENTRIES}",
            self.object_hash(prefix),
            self.sc,
            self.sc
        )
    }

    /// The key of the entry of the link at `link` to `target` in an index of depth `depth`,
    /// refused ([`ErrorKind::InvalidPath`](crate::ErrorKind::InvalidPath)) when it would break
    /// DynamoDB's key limits (the rest of the target and the link's path share the 1,024
    /// bytes of a range key).
    pub(crate) fn link_entry_key(&self, link: &Path, target: &Path, depth: usize) -> Result<Key> {
        let t = target.components();
        let cut = depth.min(t.len());
        let hash = self.link_entries_hash(&t[..cut]);
        let range = format!(
            "{}{}{}{}",
            self.object_hash(&t[cut..]),
            self.sc,
            self.sc,
            self.object_hash(link.components())
        );
        if hash.len() > MAX_HASH_KEY_BYTES {
            return Err(Error::invalid_path(format!(
                "the link index entry of {link} has a {}-byte partition key, over DynamoDB's {MAX_HASH_KEY_BYTES}",
                hash.len()
            )));
        }
        if range.len() > MAX_RANGE_KEY_BYTES {
            return Err(Error::invalid_path(format!(
                "the link index entry of {link} to {target} has a {}-byte sort key (the target below depth {depth} and the link's path), over DynamoDB's {MAX_RANGE_KEY_BYTES}",
                range.len()
            )));
        }
        Ok(Key::new(hash, range))
    }

    /// The entry row of the link row `row`, if it is one (its `Key` and `Child` only).
    pub(crate) fn link_entry_of(&self, row: &Item, depth: usize) -> Option<Result<Item>> {
        let (link, target) = self.link_of_row(row)?;
        Some(
            self.link_entry_key(&link, &target, depth)
                .map(Key::into_item),
        )
    }

    /// The path and target of the link row `row`; `None` for any other row (or a link row
    /// whose key or target does not name a path).
    pub(crate) fn link_of_row(&self, row: &Item) -> Option<(Path, Path)> {
        let key = Key::from_item(row)?;
        let link = self.path_of_object_key(&key)?;
        let target = self.decode_target(row.get_s(self.link_attr())?).ok()?;
        Some((link, target))
    }

    /// Whether `key` is a link index entry's.
    pub(crate) fn is_link_entry(&self, key: &Key) -> bool {
        self.decode_link_entry(key).is_some()
    }

    /// The link and target an entry's key names; `None` if `key` is no entry's.
    pub(crate) fn decode_link_entry(&self, key: &Key) -> Option<(Path, Path)> {
        let sep = format!("{}{}", self.sc, self.sc);
        let prefix = key.hash.strip_suffix(ENTRIES)?.strip_suffix(&sep)?;
        let head = self.decode_target(prefix).ok()?;
        let (rest, link) = key.range.split_once(&sep)?;
        let mut target = head;
        if !rest.is_empty() {
            for c in self.decode_target(rest).ok()?.components() {
                target = target.child(c.clone()).ok()?;
            }
        }
        let link = self.decode_target(link).ok()?;
        Some((link, target))
    }

    /// The Query of the entries of every target at `from` or under it, strongly consistent;
    /// `None` when `from` is shallower than `depth` (its targets' entries span partitions).
    pub(crate) fn link_entries_query(&self, from: &Path, depth: usize) -> Option<Query> {
        let c = from.components();
        if c.len() < depth || c.is_empty() {
            return None;
        }
        let begins = format!("{}{}", self.object_hash(&c[depth..]), self.sc);
        Some(
            Query::new(self.link_entries_hash(&c[..depth]))
                .with_range(RangeCondition::BeginsWith(begins))
                .consistent(true),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> Path {
        Path::new(s.iter().copied()).unwrap()
    }

    #[test]
    fn entries_split_into_their_link_and_target_one_way_only() {
        let layout = Layout::new('¦').unwrap();
        for (link, target, depth) in [
            (p(&["l"]), p(&["Accounts", "1", "Links", "x"]), 2),
            (p(&["a", "b"]), p(&["Accounts"]), 2),
            (p(&["a", "b"]), p(&["Accounts", "1"]), 2),
            (p(&["a"]), p(&["Accounts", "1", "x"]), 1),
        ] {
            let key = layout.link_entry_key(&link, &target, depth).unwrap();
            assert!(layout.is_link_entry(&key), "{key:?}");
            assert_eq!(layout.decode_link_entry(&key), Some((link, target)));
            assert!(layout.path_of_object_key(&key).is_none());
            assert!(!key.hash.ends_with('¦'), "not a listing partition: {key:?}");
        }
        let key = layout
            .link_entry_key(&p(&["l"]), &p(&["Accounts", "1", "x"]), 2)
            .unwrap();
        assert_eq!(key.hash, "¦Accounts¦1¦¦links");
        assert_eq!(key.range, "¦x¦¦¦l");
        for not in [
            Key::new("¦¦links", "¦¦¦l"),
            Key::new("¦a¦¦links", "¦x"),
            Key::new("¦a", "¦"),
            Key::new("¦a¦", "links"),
            Key::new("¦¦intents", "x¦1"),
        ] {
            assert!(!layout.is_link_entry(&not), "{not:?}");
        }
    }

    #[test]
    fn the_query_of_a_subtree_matches_exactly_the_entries_of_its_targets() {
        let layout = Layout::new('¦').unwrap();
        let link = p(&["l", "m"]);
        let targets = [
            p(&["A", "1"]),
            p(&["A", "1", "x"]),
            p(&["A", "1", "x", "y"]),
            p(&["A", "1", "xy"]),
            p(&["A", "1", "y"]),
            p(&["A", "12", "x"]),
            p(&["A"]),
        ];
        for (from, depth, want) in [
            (p(&["A", "1"]), 2, vec![0, 1, 2, 3, 4]),
            (p(&["A", "1", "x"]), 2, vec![1, 2]),
            (p(&["A", "1", "x"]), 1, vec![1, 2]),
            (p(&["A", "1", "x", "y"]), 3, vec![2]),
        ] {
            let q = layout.link_entries_query(&from, depth).unwrap();
            assert!(q.consistent);
            let got: Vec<usize> = targets
                .iter()
                .enumerate()
                .filter(|(_, t)| {
                    let key = layout.link_entry_key(&link, t, depth).unwrap();
                    key.hash == q.hash && q.range.as_ref().is_none_or(|r| r.matches(&key.range))
                })
                .map(|(i, _)| i)
                .collect();
            assert_eq!(got, want, "{from} at depth {depth}");
        }
        assert!(layout.link_entries_query(&p(&["A"]), 2).is_none());
    }

    #[test]
    fn entries_over_the_key_limits_are_refused() {
        let layout = Layout::new('¦').unwrap();
        let long = "x".repeat(600);
        let err = layout
            .link_entry_key(&p(&[&long]), &p(&["A", "1", &long]), 2)
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidPath);
        assert!(
            layout
                .link_entry_key(&p(&[&long]), &p(&["A", &long]), 2)
                .is_ok()
        );
    }
}
