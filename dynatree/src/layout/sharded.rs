//! Sharded directories: the listing rows of a very wide directory spread over several
//! partitions, so that its new children are not capped by one partition's 1,000 write units a
//! second (see [`TreeBuilder::sharded`](crate::TreeBuilder::sharded)).
//!
//! With a sharded directory `P` (`P` matches a sharded template, split `n` ways), the rows
//! are
//!
//! | row | `Key` | `Child` |
//! |---|---|---|
//! | listing row of the child `c` | `SC p0 SC … SC p(m-1) SC SC s{k}`, `k = part_of(c, n)` | `c` |
//! | guard of shard `k` | `SC p0 SC … SC p(m-1) SC SC g{k}` | `SC` |
//!
//! where an unsharded directory lists `c` in `SC p0 SC … SC p(m-1) SC`. No component is empty,
//! so `SC SC` occurs in no path's key: these partitions are neither a path's object nor its
//! listing key, and the suffixes `s{k}` and `g{k}` keep them apart from the link index's
//! `SC SC links` and the other bookkeeping partitions. Each child has one place, so every
//! writer and guard that addresses a child's listing row ([`Layout::listing_key`]) addresses
//! that one row; a reader of the children queries the `n` partitions and merges them by name.
//!
//! The Go library lists a directory by its one partition: it does not see the children of a
//! sharded directory. The guards, and why the protocols stay correct with them, are argued in
//! `sharded.md` beside this file (the "Sharded directories" section of the `consistency`
//! docs).

use std::sync::{Arc, OnceLock};

use super::{Layout, MAX_HASH_KEY_BYTES};
use crate::error::{Error, ErrorKind, Result};
use crate::path::{Path, part_of};
use crate::storage::Key;

/// The most partitions one directory may be spread over.
pub(crate) const MAX_SHARDS: u32 = 256;

/// One sharded directory template: a `/`-separated path whose `{name}` components match any
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardedDir {
    template: String,
    parts: Vec<Option<String>>,
    shards: u32,
}

impl ShardedDir {
    /// Parses `template` (checked against the reserved character `sc`) split `shards` ways.
    pub(crate) fn new(template: &str, shards: u32, sc: char) -> Result<Self> {
        let bad = |why: String| {
            Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("sharded directory {template:?}: {why}"),
            ))
        };
        if !(2..=MAX_SHARDS).contains(&shards) {
            return bad(format!(
                "{shards} shards; a directory is spread over 2 to {MAX_SHARDS}"
            ));
        }
        let trimmed = template.trim_matches('/');
        if trimmed.is_empty() {
            return bad("the root cannot be sharded".to_owned());
        }
        let mut parts = Vec::new();
        for c in trimmed.split('/') {
            if c.is_empty() {
                return bad("an empty component".to_owned());
            }
            if c.contains(sc) {
                return bad(format!(
                    "a component contains the reserved character {sc:?}"
                ));
            }
            if c == "*" {
                parts.push(None);
            } else if c.starts_with('{') || c.ends_with('}') {
                if !(c.starts_with('{') && c.ends_with('}') && c.len() > 2) {
                    return bad(format!("{c:?} is neither a name nor a `{{field}}`"));
                }
                parts.push(None);
            } else {
                parts.push(Some(c.to_owned()));
            }
        }
        Ok(Self {
            template: parts
                .iter()
                .map(|p| p.as_deref().unwrap_or("*"))
                .collect::<Vec<_>>()
                .join("/"),
            parts,
            shards,
        })
    }

    /// The template, with `*` for each `{field}` (the form the table's settings record).
    pub(crate) fn template(&self) -> &str {
        &self.template
    }

    /// How many partitions the directory is spread over.
    pub(crate) fn shards(&self) -> u32 {
        self.shards
    }

    /// Whether the directory `dir` is one of this template's.
    fn matches(&self, dir: &[String]) -> bool {
        self.parts.len() == dir.len()
            && self
                .parts
                .iter()
                .zip(dir)
                .all(|(t, c)| t.as_ref().is_none_or(|t| t == c))
    }

    /// Whether some directory matches both templates.
    fn overlaps(&self, other: &Self) -> bool {
        self.parts.len() == other.parts.len()
            && self
                .parts
                .iter()
                .zip(&other.parts)
                .all(|(a, b)| a.is_none() || b.is_none() || a == b)
    }
}

/// The sharded directories of a tree's table, set when the tree is built (shared by the
/// layout's clones).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sharding(Arc<OnceLock<Vec<ShardedDir>>>);

impl Sharding {
    /// The directories, if known (none before they are set or learned).
    fn dirs(&self) -> &[ShardedDir] {
        self.0.get().map_or(&[], Vec::as_slice)
    }
}

/// Checks that no directory matches two of `dirs`, and sorts them by template.
pub(crate) fn checked(mut dirs: Vec<ShardedDir>) -> Result<Vec<ShardedDir>> {
    dirs.sort_by(|a, b| a.template.cmp(&b.template));
    dirs.dedup();
    for (i, a) in dirs.iter().enumerate() {
        if let Some(b) = dirs[i + 1..].iter().find(|b| a.overlaps(b)) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "sharded directories {:?} ({} shards) and {:?} ({} shards) can name the same directory",
                    a.template, a.shards, b.template, b.shards
                ),
            ));
        }
    }
    Ok(dirs)
}

impl Layout {
    /// Sets the sharded directories (once, when the tree is built). `false` if they were
    /// already set.
    pub(crate) fn set_sharded(&self, dirs: Vec<ShardedDir>) -> bool {
        self.sharding.0.set(dirs).is_ok()
    }

    /// The sharded directories this tree knows.
    pub(crate) fn sharded_dirs(&self) -> &[ShardedDir] {
        self.sharding.dirs()
    }

    /// How many partitions the children of `dir` are spread over, if it is sharded.
    pub(crate) fn shards_of(&self, dir: &[String]) -> Option<u32> {
        let dirs = self.sharding.dirs();
        if dirs.is_empty() {
            return None;
        }
        dirs.iter().find(|d| d.matches(dir)).map(|d| d.shards)
    }

    /// The `Key` of shard `k` of the sharded directory `dir`: `SC p0 SC … SC SC s{k}`.
    pub(crate) fn shard_hash(&self, dir: &[String], k: u32) -> String {
        let mut s = self.listing_hash(dir);
        s.push(self.sc);
        s.push('s');
        s.push_str(&k.to_string());
        s
    }

    /// The guard of shard `k` of the sharded directory `dir`: the row
    /// `(SC p0 SC … SC SC g{k}, SC)`, in a partition of its own. While it exists, `dir`'s
    /// listing row exists and the children of shard `k` may be added by checking it instead
    /// of that row (see `sharded.md`).
    pub(crate) fn shard_guard_key(&self, dir: &[String], k: u32) -> Key {
        let mut s = self.listing_hash(dir);
        s.push(self.sc);
        s.push('g');
        s.push_str(&k.to_string());
        Key::new(s, self.sc.to_string())
    }

    /// The guard a new child at `path` may check instead of its parent's listing row: the
    /// guard of its shard, if its parent is a sharded directory.
    pub(crate) fn guard_of_child(&self, path: &Path) -> Option<Key> {
        let (last, parent) = path.components().split_last()?;
        let n = self.shards_of(parent)?;
        Some(self.shard_guard_key(parent, part_of(last, n)))
    }

    /// The directory and shard of the shard guard `key`; `None` for any other key.
    pub(crate) fn guard_dir(&self, key: &Key) -> Option<(Path, u32)> {
        if !self.is_shard_guard(key) {
            return None;
        }
        let (dir, k) = key.hash.rsplit_once(self.sc)?;
        let k = k.strip_prefix('g')?.parse().ok()?;
        let dir = dir.strip_suffix(self.sc)?;
        Some((self.decode_target(dir).ok()?, k))
    }

    /// Whether `key` is a shard guard's (see [`shard_guard_key`](Self::shard_guard_key)).
    pub(crate) fn is_shard_guard(&self, key: &Key) -> bool {
        if key.range.chars().ne([self.sc]) {
            return false;
        }
        let Some((dir, k)) = key.hash.rsplit_once(self.sc) else {
            return false;
        };
        dir.ends_with(self.sc)
            && k.strip_prefix('g')
                .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
    }

    /// The `Key` of the listing row of the child `name` of `dir`.
    pub(crate) fn child_listing_hash(&self, dir: &[String], name: &str) -> String {
        match self.shards_of(dir) {
            None => self.listing_hash(dir),
            Some(n) => self.shard_hash(dir, part_of(name, n)),
        }
    }

    /// The partitions holding the listing rows of `dir`'s children: one, or its shards.
    pub(crate) fn listing_hashes(&self, dir: &[String]) -> Vec<String> {
        match self.shards_of(dir) {
            None => vec![self.listing_hash(dir)],
            Some(n) => (0..n).map(|k| self.shard_hash(dir, k)).collect(),
        }
    }

    /// The longest `Key` of a listing row of `dir`'s children, in bytes.
    pub(crate) fn listing_hash_len(&self, dir: &[String]) -> usize {
        let base = self.listing_hash(dir).len();
        match self.shards_of(dir) {
            None => base,
            Some(n) => base + self.sc.len_utf8() + 1 + (n - 1).to_string().len(),
        }
    }

    /// Whether the children of `dir` have listing keys within DynamoDB's limit.
    pub(crate) fn listing_fits(&self, dir: &[String]) -> bool {
        self.listing_hash_len(dir) <= MAX_HASH_KEY_BYTES
    }

    /// The directory a shard partition's `Key` belongs to (its listing hash, `SC`-terminated)
    /// and the shard; `None` for any other key.
    pub(crate) fn split_shard_hash<'a>(&self, hash: &'a str) -> Option<(&'a str, u32)> {
        let (dir, shard) = hash.rsplit_once(self.sc)?;
        let k = shard.strip_prefix('s')?;
        if k.is_empty()
            || (k.len() > 1 && k.starts_with('0'))
            || !k.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        // The directory's listing hash ends with SC, so the shard follows `SC SC`.
        dir.ends_with(self.sc).then_some(())?;
        Some((dir, k.parse().ok()?))
    }
}
