//! The row layout, byte-compatible with the Go library dynamotree. Every key string dynatree
//! produces comes from this module.
//!
//! With reserved character SC (default `¦`, two bytes in UTF-8) and a path `[k0, …, k(n-1)]`:
//!
//! | row | `Key` | `Child` | attributes |
//! |---|---|---|---|
//! | listing entry of component i | `SC k0 SC … SC k(i-1) SC` (`SC` for i = 0) | `k(i)` | none (bookkeeping only) |
//! | object row | `SC k0 SC … SC k(n-1)` | `SC` | the object's |
//! | link row | as the object row | `SC` | one attribute named `SC`: `SC t0 SC t1 …` |
//!
//! dynatree's own bookkeeping lives in attributes whose names start with SC, which user data can
//! never use, so the Go library reads every row it knows unchanged.

mod guards;
mod links;
mod sharded;

#[cfg(feature = "streams")]
pub(crate) use guards::no_later_checkpoint;
pub(crate) use guards::{
    all, at_version, below, both, exists_and, unchanged, unchanged_since, versions_below,
};
pub(crate) use sharded::{ShardedDir, checked as checked_sharded};

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, MAX_ITEM_BYTES, Value};
use crate::path::Path;
use crate::storage::{Comparison, Condition, Key};
pub(crate) use crate::storage::{
    DEFAULT_RESERVED, HASH_KEY, MAX_HASH_KEY_BYTES, MAX_RANGE_KEY_BYTES, PATH_INDEX, RANGE_KEY,
};

/// The key strings of one tree, built from its reserved character.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    sc: char,
    sc_str: String,
    deleting_attr: String,
    moving_attr: String,
    sharding: sharded::Sharding,
}

impl Layout {
    /// A layout for `reserved`, refusing characters that collide with the key attribute names.
    pub(crate) fn new(reserved: char) -> Result<Self> {
        let s = reserved.to_string();
        // Bookkeeping attributes and the link attribute start with SC; a SC that starts `Key` or
        // `Child` would make them collide with the key attributes (dynamotree defect 6).
        if HASH_KEY.starts_with(&s) || RANGE_KEY.starts_with(&s) {
            return Err(Error::new(
                ErrorKind::InvalidReserved,
                format!(
                    "{reserved:?} starts the key attribute name `{}`",
                    if HASH_KEY.starts_with(&s) {
                        HASH_KEY
                    } else {
                        RANGE_KEY
                    }
                ),
            ));
        }
        if reserved.is_control() {
            return Err(Error::new(
                ErrorKind::InvalidReserved,
                format!("{reserved:?} is a control character"),
            ));
        }
        Ok(Self {
            sc: reserved,
            deleting_attr: format!("{reserved}deleting"),
            moving_attr: format!("{reserved}moving"),
            sc_str: s,
            sharding: sharded::Sharding::default(),
        })
    }

    pub(crate) fn reserved(&self) -> char {
        self.sc
    }

    /// `Key` of the rows listing the children of `prefix`: `SC k0 SC … SC` (`SC` for the root).
    pub(crate) fn listing_hash(&self, prefix: &[String]) -> String {
        let mut s = String::with_capacity(
            prefix
                .iter()
                .map(|c| c.len() + self.sc.len_utf8())
                .sum::<usize>()
                + 2,
        );
        s.push(self.sc);
        for c in prefix {
            s.push_str(c);
            s.push(self.sc);
        }
        s
    }

    /// `Key` of the object row of `path`: `SC k0 SC … SC k(n-1)`.
    pub(crate) fn object_hash(&self, path: &[String]) -> String {
        let mut s = String::new();
        for c in path {
            s.push(self.sc);
            s.push_str(c);
        }
        s
    }

    /// The object (or link) row of a non-root path.
    pub(crate) fn object_key(&self, path: &Path) -> Key {
        Key::new(self.object_hash(path.components()), self.sc_str.clone())
    }

    /// The listing row that names the last component of a non-root path under its parent
    /// (in its shard, if the parent is a sharded directory).
    pub(crate) fn listing_key(&self, path: &Path) -> Key {
        let (last, parent) = path
            .components()
            .split_last()
            .expect("listing_key of the root");
        Key::new(self.child_listing_hash(parent, last), last.clone())
    }

    /// The attribute that marks a row a link; its value is the target.
    pub(crate) fn link_attr(&self) -> &str {
        &self.sc_str
    }

    /// The bookkeeping attribute of an object row holding its expiry (seconds since the Unix
    /// epoch), the table's time-to-live attribute: `SC ttl`.
    pub(crate) fn ttl_attr(&self) -> String {
        format!("{}ttl", self.sc)
    }

    /// `condition` as it should hold for a value that may have expired: evaluated against the
    /// object row if it has not expired by `now`, and against "no object" if it has (so that
    /// `NotExists` holds over an expired value and a field condition does not), as the reads
    /// see it. `Always` stays `Always`.
    pub(crate) fn live(&self, condition: Condition, now: u64) -> Condition {
        if condition.is_always() {
            return condition;
        }
        // A fence row (fenced puts) is no object either.
        let expired = Condition::Or(vec![
            Condition::Compare(self.ttl_attr(), Comparison::Lt, Value::N(now.to_string())),
            Condition::attr_exists(self.fence_attr()),
        ]);
        if condition.eval(None) {
            // Holds for "nothing": an expired value is as good as nothing.
            Condition::Or(vec![expired, condition])
        } else {
            Condition::And(vec![Condition::Not(Box::new(expired)), condition])
        }
    }

    /// `condition` with a fence row (fenced puts) counting as no object: as [`live`](Self::live)
    /// without the expiry (the same at any time, for idempotent resends).
    pub(crate) fn unfenced(&self, condition: Condition) -> Condition {
        if condition.is_always() {
            return condition;
        }
        let fence = Condition::attr_exists(self.fence_attr());
        if condition.eval(None) {
            Condition::Or(vec![fence, condition])
        } else {
            Condition::And(vec![Condition::Not(Box::new(fence)), condition])
        }
    }

    /// The bookkeeping attribute of a source row holding its version (denormalized fields):
    /// `SC sv`.
    pub(crate) fn source_version_attr(&self) -> String {
        format!("{}sv", self.sc)
    }

    /// The bookkeeping attribute of a target row holding the version its copy `target` was
    /// written with: `SC dv.<target>`.
    pub(crate) fn target_version_attr(&self, target: &str) -> String {
        format!("{}dv.{target}", self.sc)
    }

    /// The bookkeeping attribute of a row whose copy `target` is copied further (a chain):
    /// when that copy last changed, `SC cv.<target>` (see the consistency docs).
    pub(crate) fn change_version_attr(&self, target: &str) -> String {
        format!("{}cv.{target}", self.sc)
    }

    /// The tombstone row of a removed source of denormalized fields at `path`: the object
    /// row's hash key with range `SC sv` (no path's listing query or object read reaches it;
    /// the Go library never reads it), holding the removed row's last version.
    pub(crate) fn tombstone_key(&self, path: &Path) -> Key {
        Key::new(
            self.object_hash(path.components()),
            format!("{}sv", self.sc),
        )
    }

    /// Whether `name` is a target version attribute (`SC dv.<target>`).
    pub(crate) fn is_target_version_attr(&self, name: &str) -> bool {
        name.strip_prefix(self.sc)
            .is_some_and(|rest| rest.starts_with("dv."))
    }

    /// The path of an object row's key (`SC k0 SC … SC k(n-1)`, range `SC`); `None` for
    /// listing rows, intents and anything else.
    pub(crate) fn path_of_object_key(&self, key: &Key) -> Option<Path> {
        if key.range != self.sc_str {
            return None;
        }
        self.decode_target(&key.hash).ok()
    }

    /// The bookkeeping attribute of a fence row (see [`TreeBuilder::fenced_puts`]): `SC fence`,
    /// the fence's expiry in seconds since the Unix epoch.
    ///
    /// [`TreeBuilder::fenced_puts`]: crate::TreeBuilder::fenced_puts
    pub(crate) fn fence_attr(&self) -> String {
        format!("{}fence", self.sc)
    }

    /// Whether `row` is a fence row: no object, whatever else it holds.
    pub(crate) fn is_fence(&self, row: &Item) -> bool {
        row.contains(&self.fence_attr())
    }

    /// Whether `row`, read at an object key, is no object for readers: a fence, or expired.
    pub(crate) fn is_absent(&self, row: &Item, now: u64) -> bool {
        self.is_fence(row) || self.is_expired(row, now)
    }

    /// The fence row at `path`'s object key, expiring (and deleted by the table's
    /// time-to-live) at `expiry` seconds since the epoch, held by `held` if given.
    pub(crate) fn fence_row(&self, path: &Path, expiry: u64, held: Option<&str>) -> Item {
        let mut row = self.object_key(path).into_item();
        row.insert(self.fence_attr(), Value::N(expiry.to_string()));
        row.insert(self.ttl_attr(), Value::N(expiry.to_string()));
        if let Some(id) = held {
            row.insert(self.held_attr(), Value::S(id.to_owned()));
        }
        row
    }

    /// Whether `row` is an object row whose expiry is before `now` (seconds since the epoch).
    pub(crate) fn is_expired(&self, row: &Item, now: u64) -> bool {
        match row.get(&self.ttl_attr()) {
            Some(crate::item::Value::N(n)) => n.parse::<u64>().is_ok_and(|t| t < now),
            _ => false,
        }
    }

    /// The bookkeeping attribute that marks a listing row as being removed.
    pub(crate) fn deleting_attr(&self) -> &str {
        &self.deleting_attr
    }

    /// The bookkeeping attribute that locks a listing row while its subtree moves.
    pub(crate) fn moving_attr(&self) -> &str {
        &self.moving_attr
    }

    /// The bookkeeping attribute that holds an object row while a move or copy of its subtree
    /// runs (its value is the operation's id): `SC held`. Overwrites sent as a single PutItem
    /// are conditional on its absence (see [`consistency`](crate::consistency)).
    pub(crate) fn held_attr(&self) -> String {
        format!("{}held", self.sc)
    }

    /// The bookkeeping attribute of an object row written by a move (or re-parenting) at its
    /// destination, from its copy until the operation releases it: `SC movedfrom`, the
    /// source's path (encoded as a link target). With [`copied_from_attr`](Self::copied_from_attr)
    /// it lets a reader of the table's stream tell a moved object from a created one, and the
    /// deletion of a move's source (held, without either) from a removal.
    pub(crate) fn moved_from_attr(&self) -> String {
        format!("{}movedfrom", self.sc)
    }

    /// The bookkeeping attribute a move (or re-parenting) sets on each source object with its
    /// hold: `SC movedto`, the object's destination path (encoded as a link target). With
    /// [`moved_from_attr`](Self::moved_from_attr) on the copy, a reader of the table's stream
    /// pairs a move's two records, each in its own item's order.
    pub(crate) fn moved_to_attr(&self) -> String {
        format!("{}movedto", self.sc)
    }

    /// The bookkeeping attribute naming the user transaction that last wrote an object row
    /// (`SC tx`, its idempotency token or a random id): what tells a reader of the table's
    /// stream which records one transaction wrote.
    pub(crate) fn tx_attr(&self) -> String {
        format!("{}tx", self.sc)
    }

    /// As [`moved_from_attr`](Self::moved_from_attr), for a copy: `SC copiedfrom`.
    pub(crate) fn copied_from_attr(&self) -> String {
        format!("{}copiedfrom", self.sc)
    }

    /// The partition of intent records: `SC SC intents`, which no path's key can equal (a
    /// path's keys never have two SC in a row).
    pub(crate) fn intents_hash(&self) -> String {
        format!("{0}{0}intents", self.sc)
    }

    /// The row of a stream consumer's checkpoint of one shard: partition `SC SC checkpoints`
    /// (which no path's key can equal, like [`intents_hash`](Self::intents_hash)), range
    /// `consumer SC shard`. With an empty `shard`, the partition and the prefix of one
    /// consumer's rows.
    #[cfg(feature = "streams")]
    pub(crate) fn checkpoint_key(&self, consumer: &str, shard: &str) -> Key {
        Key::new(
            format!("{0}{0}checkpoints", self.sc),
            format!("{consumer}{}{shard}", self.sc),
        )
    }

    pub(crate) fn encode_target(&self, target: &Path) -> String {
        self.object_hash(target.components())
    }

    /// Parses a link target as stored (`SC t0 SC t1 …`).
    pub(crate) fn decode_target(&self, s: &str) -> Result<Path> {
        let rest = s.strip_prefix(self.sc).ok_or_else(|| {
            Error::invalid_path("stored link target does not start with the reserved character")
        })?;
        let path = Path::new(rest.split(self.sc))?;
        self.check_object_path(&path)?;
        Ok(path)
    }

    /// Checks a path that names an object: non-empty, no reserved character, every key it
    /// produces within DynamoDB's limits.
    pub(crate) fn check_object_path(&self, path: &Path) -> Result<()> {
        if path.is_root() {
            return Err(Error::invalid_path("the root holds no object"));
        }
        self.check_components(path)?;
        let hash = self.object_hash(path.components()).len();
        if hash > MAX_HASH_KEY_BYTES {
            return Err(Error::invalid_path(format!(
                "object key is {hash} bytes, over DynamoDB's {MAX_HASH_KEY_BYTES}-byte partition key limit"
            )));
        }
        // A shard's key is a few bytes longer than the object keys of short children.
        let parent = &path.components()[..path.len() - 1];
        if self.shards_of(parent).is_some() && !self.listing_fits(parent) {
            return Err(Error::invalid_path(format!(
                "the listing key of {path} in its sharded directory is {} bytes, over DynamoDB's {MAX_HASH_KEY_BYTES}-byte partition key limit",
                self.listing_hash_len(parent)
            )));
        }
        Ok(())
    }

    /// Checks a path whose children are listed (the root allowed).
    pub(crate) fn check_listing_path(&self, path: &Path) -> Result<()> {
        self.check_components(path)?;
        let hash = self.listing_hash_len(path.components());
        if hash > MAX_HASH_KEY_BYTES {
            return Err(Error::invalid_path(format!(
                "listing key is {hash} bytes, over DynamoDB's {MAX_HASH_KEY_BYTES}-byte partition key limit"
            )));
        }
        Ok(())
    }

    /// Checks a path whose children are listed, like
    /// [`check_listing_path`](Self::check_listing_path), but a valid object path whose listing
    /// key would be over DynamoDB's partition key limit is not an error: it can have no
    /// children, so `Ok(false)` says that the listing is empty without asking DynamoDB.
    pub(crate) fn check_listable(&self, path: &Path) -> Result<bool> {
        self.check_components(path)?;
        if self.listing_fits(path.components()) {
            return Ok(true);
        }
        self.check_object_path(path)?;
        Ok(false)
    }

    fn check_components(&self, path: &Path) -> Result<()> {
        path.validate(self.sc)?;
        for (i, c) in path.components().iter().enumerate() {
            if c.len() > MAX_RANGE_KEY_BYTES {
                return Err(Error::invalid_path(format!(
                    "component {i} is {} bytes, over DynamoDB's {MAX_RANGE_KEY_BYTES}-byte sort key limit",
                    c.len()
                )));
            }
        }
        Ok(())
    }

    /// Checks user attributes: none named `Key` or `Child`, none starting with SC, and every
    /// name and value within DynamoDB's rules ([`Item::check`]).
    pub(crate) fn check_user_item(&self, item: &Item) -> Result<()> {
        for name in item.names() {
            if name == HASH_KEY || name == RANGE_KEY {
                return Err(Error::new(
                    ErrorKind::InvalidAttribute,
                    format!("`{name}` is the table's key attribute"),
                ));
            }
            if name.starts_with(self.sc) {
                return Err(Error::new(
                    ErrorKind::InvalidAttribute,
                    format!("{name:?} starts with the reserved character {:?}", self.sc),
                ));
            }
        }
        item.check()
    }

    /// The object row for `path` holding `attrs`, checked against the item size limit.
    pub(crate) fn object_row(&self, path: &Path, attrs: Item) -> Result<Item> {
        let key = self.object_key(path);
        let mut row = attrs;
        row.insert(HASH_KEY, Value::S(key.hash));
        row.insert(RANGE_KEY, Value::S(key.range));
        check_item_size(&row)?;
        Ok(row)
    }

    /// The link row at `path` pointing at `target`.
    pub(crate) fn link_row(&self, path: &Path, target: &Path) -> Result<Item> {
        let mut attrs = Item::new();
        attrs.insert(self.link_attr(), Value::S(self.encode_target(target)));
        self.object_row(path, attrs)
    }

    /// A listing row (no attributes besides the key).
    pub(crate) fn listing_row(&self, path: &Path) -> Item {
        self.listing_key(path).into_item()
    }
}

/// Refuses items over DynamoDB's 400 KB limit.
pub(crate) fn check_item_size(item: &Item) -> Result<()> {
    let size = item.size();
    if size > MAX_ITEM_BYTES {
        return Err(Error::new(
            ErrorKind::ItemTooLarge,
            format!("item is {size} bytes, over DynamoDB's {MAX_ITEM_BYTES}-byte limit"),
        ));
    }
    Ok(())
}

impl Layout {
    /// The stored hash value of a secondary-index key: the type's template, SC, the encoded
    /// value (`template SC value`), so types sharing an index name never see each other's
    /// values. Written and queried through a [scope](crate::Tree::scope), the scope's root
    /// comes first as an object key (`SC r0 … SC r(n-1) SC template SC value`): it starts with
    /// SC, which no template does, and the SC after the root keeps `Tenants/a` apart from
    /// `Tenants/ab`, so no two scopes (nor the whole tree) share an index partition. Neither
    /// root components nor templates nor values (refused on writes and queries, see
    /// `index::refuse_reserved_in_index_value`) contain SC, so a hash splits at SC one way
    /// only: no value spells another scope's hash.
    pub(crate) fn index_hash(&self, scope: &[String], template: &str, encoded: &str) -> String {
        let sc = self.sc;
        if scope.is_empty() {
            format!("{template}{sc}{encoded}")
        } else {
            format!("{}{sc}{template}{sc}{encoded}", self.object_hash(scope))
        }
    }

    /// The scope root and the template a stored secondary-index hash names (the inverse of
    /// [`index_hash`](Self::index_hash) but for the value): the root is empty for the whole
    /// tree's form `template SC value`, and the components of a scope's form
    /// `SC r0 … SC r(n-1) SC template SC value`. `None` for a string of neither form.
    pub(crate) fn split_index_hash<'a>(&self, stored: &'a str) -> Option<(Path, &'a str)> {
        let mut fields = stored.rsplitn(3, self.sc);
        let (_value, template) = (fields.next()?, fields.next()?);
        match fields.next() {
            None => Some((Path::root(), template)),
            Some(root) => Some((self.decode_target(root).ok()?, template)),
        }
    }
}

/// Intent records of the multi-row operations (moves, copies, subtree deletions) and the path
/// index: their keys and bookkeeping attributes.
impl Layout {
    /// The key of intent record `id`: `(SC SC intents, id)`.
    pub(crate) fn intent_key(&self, id: &str) -> Key {
        Key::new(self.intents_hash(), id)
    }

    /// The key of lane `k` (from 1) of intent `id`: `(SC SC intents, id SC k)`. A lane row
    /// holds only the owner's token (`SC owner`): the transactions of one lane check it
    /// instead of the intent record, so that several can be in flight at once (see
    /// "Requests in flight" in the moves docs). No intent id holds `SC`, so no lane's key is
    /// an intent's.
    pub(crate) fn intent_lane_key(&self, id: &str, k: usize) -> Key {
        Key::new(self.intents_hash(), format!("{id}{}{k}", self.sc))
    }

    /// Whether `key` is a lane row of an intent (see [`intent_lane_key`](Self::intent_lane_key)).
    pub(crate) fn is_intent_lane(&self, key: &Key) -> bool {
        key.hash == self.intents_hash() && key.range.contains(self.sc)
    }

    /// The attribute `field` of an intent record: `SC field`. The fields are `op`, `from`,
    /// `to`, `phase`, `links`, `owner`, `lease`, `lanes` and `refusal`.
    pub(crate) fn intent_attr(&self, field: &str) -> String {
        format!("{}{field}", self.sc)
    }

    /// The path index (GSI [`PATH_INDEX`]): hash attribute `SC pix.h`, range attribute
    /// `SC pix.r`.
    pub(crate) fn path_index_spec(&self) -> crate::storage::IndexSpec {
        crate::storage::IndexSpec::new(
            PATH_INDEX,
            format!("{}pix.h", self.sc),
            Some(format!("{}pix.r", self.sc)),
        )
    }

    /// Whether `name` is one of the path index's attributes (`SC pix.` …): recomputed, not
    /// copied, when a row moves.
    pub(crate) fn is_path_index_attr(&self, name: &str) -> bool {
        name.strip_prefix(self.sc)
            .is_some_and(|rest| rest.starts_with("pix."))
    }

    /// The path index's (hash, range) values for the object at `path` in an index of depth
    /// `depth`: the object keys of its first `depth` components and of the whole path.
    pub(crate) fn path_index_values(&self, path: &[String], depth: usize) -> (String, String) {
        (
            self.object_hash(&path[..depth.min(path.len())]),
            self.object_hash(path),
        )
    }
}

/// The key attributes of secondary index `name` (bookkeeping): `SC ix.<name>.h` and, with a
/// range key, `SC ix.<name>.r`.
pub(crate) fn index_attrs(sc: char, name: &str, has_range: bool) -> (String, Option<String>) {
    (
        format!("{sc}ix.{name}.h"),
        has_range.then(|| format!("{sc}ix.{name}.r")),
    )
}

/// The user's attributes of a row as read: without the key attributes and without dynatree's
/// bookkeeping (every attribute whose name starts with the reserved character `sc`).
pub(crate) fn strip_bookkeeping(item: &mut Item, sc: char) {
    item.remove(HASH_KEY);
    item.remove(RANGE_KEY);
    let bookkeeping: Vec<String> = item
        .names()
        .filter(|n| n.starts_with(sc))
        .map(str::to_owned)
        .collect();
    for n in bookkeeping {
        item.remove(&n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(c: &[&str]) -> Path {
        Path::new(c.iter().copied()).unwrap()
    }

    #[test]
    fn worked_example_keys() {
        let l = Layout::new(DEFAULT_RESERVED).unwrap();
        let path = p(&["Accounts", "123456", "Links", "xyzpdq"]);
        let rows: Vec<Key> = (1..=4).map(|i| l.listing_key(&path.prefix(i))).collect();
        assert_eq!(rows[0], Key::new("¦", "Accounts"));
        assert_eq!(rows[1], Key::new("¦Accounts¦", "123456"));
        assert_eq!(rows[2], Key::new("¦Accounts¦123456¦", "Links"));
        assert_eq!(rows[3], Key::new("¦Accounts¦123456¦Links¦", "xyzpdq"));
        assert_eq!(
            l.object_key(&path),
            Key::new("¦Accounts¦123456¦Links¦xyzpdq", "¦")
        );
        assert_eq!(l.listing_hash(&[]), "¦");
    }

    #[test]
    fn delimiters_that_collide_are_refused() {
        for c in ['K', 'C'] {
            let e = Layout::new(c).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidReserved);
        }
        assert!(Layout::new('X').is_ok());
        assert!(Layout::new('\0').is_err());
    }

    #[test]
    fn key_byte_limits() {
        let l = Layout::new(DEFAULT_RESERVED).unwrap();
        // 2 bytes of SC + 1024 bytes = 1026: fine. Two such: 2052: over.
        let c = "a".repeat(1024);
        assert!(l.check_object_path(&p(&[&c])).is_ok());
        assert!(l.check_object_path(&p(&[&c, &c])).is_err());
        let long = "a".repeat(1025);
        assert!(l.check_object_path(&p(&[&long])).is_err());
        // Multi-byte characters count as bytes, not chars.
        let e = "é".repeat(513);
        assert!(l.check_object_path(&p(&[&e])).is_err());
    }

    #[test]
    fn listing_key_one_byte_over_is_an_empty_listing() {
        let l = Layout::new(DEFAULT_RESERVED).unwrap();
        // Object key: 2 + 1022 + 2 + 1022 = 2048 bytes (valid); listing key: 2050.
        let c = "a".repeat(1022);
        let path = p(&[&c, &c]);
        assert!(l.check_object_path(&path).is_ok());
        assert!(l.check_listing_path(&path).is_err());
        assert!(!l.check_listable(&path).unwrap());
        assert!(l.check_listable(&p(&[&c])).unwrap());
        assert!(l.check_listable(&Path::root()).unwrap());
        // Not an object path either: still an error.
        let d = "a".repeat(1024);
        assert!(l.check_listable(&p(&[&d, &d])).is_err());
        assert!(l.check_listable(&p(&["a¦b"])).is_err());
    }

    #[test]
    fn user_items_are_checked_against_dynamodb_rules() {
        let l = Layout::new(DEFAULT_RESERVED).unwrap();
        let mut item = Item::new();
        item.insert("n", Value::N("NaN".into()));
        assert_eq!(
            l.check_user_item(&item).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
        let mut item = Item::new();
        item.insert("", Value::Null);
        assert_eq!(
            l.check_user_item(&item).unwrap_err().kind(),
            ErrorKind::InvalidAttribute
        );
    }

    #[test]
    fn targets_round_trip() {
        let l = Layout::new('X').unwrap();
        let t = p(&["Accounts", "12345"]);
        let s = l.encode_target(&t);
        assert_eq!(s, "XAccountsX12345");
        assert_eq!(l.decode_target(&s).unwrap(), t);
        assert!(l.decode_target("Accounts").is_err());
    }

    #[test]
    fn index_hashes_name_their_scope_and_template() {
        let l = Layout::new(DEFAULT_RESERVED).unwrap();
        let t = "Accounts/{account}/Links/{short}";
        for scope in [p(&[]), p(&["Tenants", "t1"]), p(&["a"])] {
            let hash = l.index_hash(scope.components(), t, "v");
            assert_eq!(l.split_index_hash(&hash), Some((scope, t)), "{hash}");
        }
        assert_eq!(l.split_index_hash("v"), None);
        assert_eq!(l.split_index_hash("x¦t¦v"), None);
        assert_eq!(l.split_index_hash("¦t¦v"), None);
    }
}
