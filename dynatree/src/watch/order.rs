//! The order a watch hands changes in: each path's changes in the order of its records, and a
//! moved object's `Moved` after everything before it at both paths, though its two records
//! (the copy's insert, the source's removal) are in the shards of two items. And the cursor
//! after each change handed, which never passes a record whose change is held back.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use super::cursor::{Cursor, Mark};
use super::{Change, Info};
use crate::error::Result;
use crate::path::Path;
use crate::storage::sequence_after;

/// Where a record was read: its shard, its sequence number, and the shard's mark before it.
#[derive(Debug, Clone)]
pub(super) struct At {
    pub(super) shard: String,
    pub(super) seq: String,
    pub(super) before: Option<Mark>,
}

/// How long a source's removal waits for its copy once the watch has read the whole stream.
pub(super) const ORPHAN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How many refused moves' keys are remembered for their copies read later.
const MAX_REMEMBERED: usize = 10_000;

/// A move's two records are one pair: (source, destination, the operation's hold).
pub(super) type PairKey = (Path, Path, String);

/// A change handed, with the cursor right after it.
pub(super) struct Handed<T> {
    pub(super) change: Result<Change<T>>,
    pub(super) cursor: Cursor,
}

struct Event<T> {
    /// `None` while a move waits for its other record.
    change: Option<Result<Change<T>>>,
    /// The `Moved` a move's first record said, kept until the other comes.
    moved: Option<Change<T>>,
    /// What a source's removal says if its copy never comes: a deletion at the source.
    alone: Option<Change<T>>,
    /// A source's removal read first: when the watch first found itself caught up with the
    /// stream while it waited for the copy.
    orphan_since: Option<tokio::time::Instant>,
    /// The pair it waits for, if it is a move's first record.
    key: Option<PairKey>,
    /// A copy's insert whose move released it: the move is over, and if its source's removal
    /// has not come, the move kept its source.
    released: bool,
    /// A copy's insert whose copy was removed since (the event of that removal's deletion):
    /// a rollback if the move turns out refused, a deletion after the move if not.
    copy_removed: Option<u64>,
    /// The path queues the event is in.
    paths: Vec<Path>,
    records: Vec<At>,
}

/// The changes read but not handed yet, in per-path queues.
pub(super) struct Order<T> {
    next: u64,
    events: BTreeMap<u64, Event<T>>,
    queues: HashMap<Path, VecDeque<u64>>,
    pairs: HashMap<PairKey, u64>,
    /// Moves handed at their source's removal alone (their copy was before the watch's
    /// position): a copy read late is dropped.
    resolved: Vec<PairKey>,
    /// Moves refused whose source's release was read before their copy: the copy is a
    /// creation (its rollback, later in its shard, a deletion).
    kept: Vec<PairKey>,
    /// Per shard: the records of events not handed, by sequence number, with the mark before
    /// each.
    unhanded: HashMap<String, Vec<At>>,
    /// Per shard: records handed that a cursor rewound before them must skip.
    handed: HashMap<String, Vec<String>>,
}

impl<T> Order<T> {
    /// An order that knows, from the cursor it resumes from, the records handed already.
    pub(super) fn new(resumed: &Cursor) -> Self {
        Self {
            next: 0,
            events: BTreeMap::new(),
            queues: HashMap::new(),
            pairs: HashMap::new(),
            resolved: Vec::new(),
            kept: Vec::new(),
            unhanded: HashMap::new(),
            handed: resumed
                .skips
                .iter()
                .map(|(s, q)| (s.clone(), q.clone()))
                .collect(),
        }
    }

    fn add(&mut self, event: Event<T>) -> u64 {
        let id = self.next;
        self.next += 1;
        for p in &event.paths {
            self.queues.entry(p.clone()).or_default().push_back(id);
        }
        for at in &event.records {
            self.unhanded
                .entry(at.shard.clone())
                .or_default()
                .push(at.clone());
        }
        self.events.insert(id, event);
        id
    }

    /// A change of one path (or a decoding error, handed at once).
    pub(super) fn plain(&mut self, at: At, change: Result<Change<T>>) {
        let paths = match &change {
            Ok(c) => vec![c.path().clone()],
            Err(_) => Vec::new(),
        };
        self.add(Event {
            change: Some(change),
            moved: None,
            alone: None,
            orphan_since: None,
            key: None,
            released: false,
            copy_removed: None,
            paths,
            records: vec![at],
        });
    }

    /// A move's copy inserted at `moved`'s destination.
    pub(super) fn arrival(&mut self, at: At, key: PairKey, moved: Change<T>) {
        let resolved = self.resolved.iter().position(|k| *k == key);
        if let Some(i) = resolved {
            // Its source's removal was handed alone, as a deletion: the copy is a creation.
            self.resolved.swap_remove(i);
        }
        let kept = self.kept.iter().position(|k| *k == key);
        if let Some(i) = kept {
            self.kept.swap_remove(i);
        }
        if resolved.is_some() || kept.is_some() {
            // Or its move was refused: the source stayed, the copy is there until rolled back.
            if let Change::Moved {
                to, value, info, ..
            } = moved
            {
                self.plain(
                    at,
                    Ok(Change::Created {
                        path: to,
                        value,
                        info,
                    }),
                );
            }
            return;
        }
        let to = moved.path().clone();
        match self.pairs.remove(&key) {
            Some(id) => self.complete(id, at, to, moved),
            None => {
                let id = self.add(Event {
                    change: None,
                    moved: Some(moved),
                    alone: None,
                    orphan_since: None,
                    key: Some(key.clone()),
                    released: false,
                    copy_removed: None,
                    paths: vec![to],
                    records: vec![at],
                });
                self.pairs.insert(key, id);
            }
        }
    }

    /// A move's source removed at `moved`'s source (`moved` as the removal says it; `alone`,
    /// the deletion at the source it is if no copy comes).
    pub(super) fn departure(&mut self, at: At, key: PairKey, moved: Change<T>, alone: Change<T>) {
        let Change::Moved { from, .. } = &moved else {
            return;
        };
        let from = from.clone();
        if let Some(i) = self.resolved.iter().position(|k| *k == key) {
            // Its copy was handed alone, as a creation: the removal is a deletion.
            self.resolved.swap_remove(i);
            self.plain(at, Ok(alone));
            return;
        }
        match self.pairs.remove(&key) {
            Some(id) => {
                if let Some(event) = self.events.get_mut(&id) {
                    event.change = event.moved.take().map(Ok);
                }
                self.place(id, at, from);
            }
            None => {
                let id = self.add(Event {
                    change: None,
                    moved: Some(moved),
                    alone: Some(alone),
                    orphan_since: None,
                    key: Some(key.clone()),
                    released: false,
                    copy_removed: None,
                    paths: vec![from],
                    records: vec![at],
                });
                self.pairs.insert(key, id);
            }
        }
    }

    /// The watch has read every shard to what the stream holds (`now`). A move's record still
    /// without its pair after [`ORPHAN_GRACE`] of that never gets it:
    ///
    /// - a source's removal whose copy never comes (written before the watch's position, or
    ///   none: time to live deleted the held source): a deletion at the source;
    /// - a copy whose move was released without removing its source (a write outside the
    ///   protocol kept the source): the copy is a `Created` at its destination.
    ///
    /// - a copy rolled back whose source never said it was kept (a write outside the protocol
    ///   erased the source's hold): the move never happened, and both records say nothing.
    ///
    /// A copy whose move is not released yet waits (a move that stopped is finished later).
    pub(super) fn caught_up(&mut self, now: tokio::time::Instant) {
        let mut orphans = Vec::new();
        for (id, e) in &mut self.events {
            let Some(Change::Moved { from, .. }) = &e.moved else {
                continue;
            };
            let departed = e.paths.first() == Some(from);
            let settled = departed || e.released || e.copy_removed.is_some();
            if e.change.is_some() || e.paths.len() != 1 || !settled {
                continue;
            }
            let since = *e.orphan_since.get_or_insert(now);
            if now.duration_since(since) >= ORPHAN_GRACE {
                orphans.push((*id, departed));
            }
        }
        for (id, departed) in orphans {
            // A copy rolled back whose source never said it was kept (a write outside the
            // protocol erased the source's hold): the move never happened; both go.
            let removal = self
                .events
                .get(&id)
                .filter(|_| !departed)
                .and_then(|e| e.copy_removed);
            if let Some(removal) = removal {
                if let Some(key) = self.events.get_mut(&id).and_then(|e| e.key.take()) {
                    self.pairs.remove(&key);
                }
                self.finish(id);
                self.finish(removal);
                continue;
            }
            if let Some(e) = self.events.get_mut(&id) {
                e.change = match e.moved.take() {
                    Some(_) if departed => e.alone.take().map(Ok),
                    Some(Change::Moved {
                        to, value, info, ..
                    }) => Some(Ok(Change::Created {
                        path: to,
                        value,
                        info,
                    })),
                    _ => None,
                };
                if let Some(key) = e.key.take() {
                    self.pairs.remove(&key);
                    self.resolved.push(key);
                }
            }
        }
    }

    /// The departure came first: the arrival completes the move.
    fn complete(&mut self, id: u64, at: At, to: Path, moved: Change<T>) {
        if let Some(event) = self.events.get_mut(&id) {
            event.change = Some(Ok(moved));
        }
        self.place(id, at, to);
    }

    /// Puts event `id` in the queue of `path` too, read at `at`.
    fn place(&mut self, id: u64, at: At, path: Path) {
        self.queues.entry(path.clone()).or_default().push_back(id);
        self.unhanded
            .entry(at.shard.clone())
            .or_default()
            .push(at.clone());
        if let Some(event) = self.events.get_mut(&id) {
            event.paths.push(path);
            event.records.push(at);
        }
    }

    /// A move's copy removed while it still names its source (`deleted`, at `at`): if the
    /// move waits for its source, the removal's deletion waits behind it and is dropped with it
    /// if the move turns out refused (a rollback), handed after its `Moved` if not (a removal
    /// outside the protocol: time to live, the Go library). The deletion back when no move
    /// waits: the caller hands it.
    pub(super) fn copy_removed(
        &mut self,
        at: At,
        key: &PairKey,
        deleted: Change<T>,
    ) -> Option<Change<T>> {
        let Some(&id) = self.pairs.get(key) else {
            return Some(deleted);
        };
        let arrived = self.events.get(&id).is_some_and(
            |e| matches!(&e.moved, Some(Change::Moved { to, .. }) if e.paths.first() == Some(to)),
        );
        if !arrived {
            return Some(deleted);
        }
        let removal = self.add(Event {
            change: Some(Ok(deleted)),
            moved: None,
            alone: None,
            orphan_since: None,
            key: None,
            released: false,
            copy_removed: None,
            paths: Vec::new(),
            records: vec![at],
        });
        // In the destination's queue, behind the move.
        if let Some(Change::Moved { to, .. }) = self.events.get(&id).and_then(|e| e.moved.as_ref())
        {
            let to = to.clone();
            self.queues
                .entry(to.clone())
                .or_default()
                .push_back(removal);
            if let Some(e) = self.events.get_mut(&removal) {
                e.paths.push(to);
            }
        }
        if let Some(e) = self.events.get_mut(&id) {
            e.copy_removed = Some(removal);
        }
        None
    }

    /// A move's source released without its removal: the move was refused. A move that waits
    /// for its source never happened if its copy was removed (both are dropped); if not, its
    /// copy is a creation (its rollback follows in the copy's shard).
    pub(super) fn kept(&mut self, key: PairKey) {
        let Some(id) = self.pairs.remove(&key) else {
            self.kept.push(key);
            if self.kept.len() > MAX_REMEMBERED {
                self.kept.remove(0);
            }
            return;
        };
        let removal = self.events.get(&id).and_then(|e| e.copy_removed);
        match removal {
            Some(removal) => {
                self.finish(id);
                self.finish(removal);
            }
            None => {
                if let Some(e) = self.events.get_mut(&id) {
                    e.change = match e.moved.take() {
                        Some(Change::Moved {
                            to, value, info, ..
                        }) => Some(Ok(Change::Created {
                            path: to,
                            value,
                            info,
                        })),
                        _ => None,
                    };
                    e.key = None;
                }
            }
        }
    }

    /// A move's copy released: if it still waits for its source's removal, the move may have
    /// kept its source (see [`caught_up`](Self::caught_up)).
    pub(super) fn released(&mut self, key: &PairKey) {
        if let Some(e) = self.pairs.get(key).and_then(|id| self.events.get_mut(id)) {
            e.released = true;
        }
    }

    /// Takes event `id` out of every queue, its records handed; its change, if any.
    fn finish(&mut self, id: u64) -> Option<Result<Change<T>>> {
        let event = self.events.remove(&id)?;
        for p in &event.paths {
            if let Some(q) = self.queues.get_mut(p) {
                q.retain(|&e| e != id);
                if q.is_empty() {
                    self.queues.remove(p);
                }
            }
        }
        for at in &event.records {
            if let Some(un) = self.unhanded.get_mut(&at.shard) {
                un.retain(|u| u.seq != at.seq);
            }
            self.handed
                .entry(at.shard.clone())
                .or_default()
                .push(at.seq.clone());
        }
        event.change
    }

    /// Hands every change that may go now, in the order read: one whose move is complete
    /// and that is first in the queue of each of its paths; each with the cursor after it,
    /// from the marks read so far (`read`).
    pub(super) fn drain(&mut self, read: &Cursor, out: &mut Vec<Handed<T>>) {
        // Passes in the order read; a pass that hands nothing ends it (handing a change may
        // free one read before it: a move placed at its source's queue after later changes).
        loop {
            let ids: Vec<u64> = self.events.keys().copied().collect();
            let mut progressed = false;
            for id in ids {
                let ready = self.events.get(&id).is_some_and(|e| {
                    e.change.is_some()
                        && e.paths
                            .iter()
                            .all(|p| self.queues.get(p).and_then(VecDeque::front) == Some(&id))
                });
                if ready && let Some(change) = self.finish(id) {
                    let cursor = self.cursor(read);
                    out.push(Handed { change, cursor });
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        self.prune(read);
    }

    /// The cursor after what was handed: each shard's mark moved back before its first
    /// record not handed, and the records after that point which were handed listed to skip.
    pub(super) fn cursor(&self, read: &Cursor) -> Cursor {
        let mut cursor = read.clone();
        cursor.skips.clear();
        cursor.taken = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for (shard, un) in &self.unhanded {
            if let Some(first) = un.first() {
                cursor
                    .marks
                    .insert(shard.clone(), first.before.clone().unwrap_or(Mark::Fresh));
            }
        }
        for (shard, seqs) in &self.handed {
            let mark = cursor.marks.get(shard).cloned().unwrap_or(Mark::Fresh);
            let mut skip: Vec<String> = seqs.iter().filter(|q| mark.before(q)).cloned().collect();
            skip.sort_by(|a, b| {
                if sequence_after(a, b) {
                    std::cmp::Ordering::Greater
                } else if sequence_after(b, a) {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Equal
                }
            });
            skip.dedup();
            if !skip.is_empty() {
                cursor.skips.insert(shard.clone(), skip);
            }
        }
        cursor
    }

    /// Forgets handed records no cursor can be rewound before any more.
    fn prune(&mut self, read: &Cursor) {
        self.unhanded.retain(|_, un| !un.is_empty());
        let cursor = self.cursor(read);
        self.handed.retain(|shard, seqs| {
            let mark = cursor.marks.get(shard).cloned().unwrap_or(Mark::Fresh);
            seqs.retain(|q| mark.before(q));
            !seqs.is_empty()
        });
    }

    /// Whether nothing read waits to be handed.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// The details a move's `Moved` carries are the copy's.
pub(super) fn moved<T>(from: Path, to: Path, value: T, info: Info) -> Change<T> {
    Change::Moved {
        from,
        to,
        value,
        info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Path {
        Path::parse(s).unwrap()
    }

    fn info(seq: &str) -> Info {
        Info {
            sequence_number: seq.into(),
            propagated: false,
            transaction: None,
        }
    }

    fn at(shard: &str, seq: &str, before: Option<&str>) -> At {
        At {
            shard: shard.into(),
            seq: seq.into(),
            before: before.map(|b| Mark::After(b.into())),
        }
    }

    fn created(p: &str, v: u32, seq: &str) -> Change<u32> {
        Change::Created {
            path: path(p),
            value: v,
            info: info(seq),
        }
    }

    fn handed(order: &mut Order<u32>, read: &Cursor) -> Vec<String> {
        let mut out = Vec::new();
        order.drain(read, &mut out);
        out.into_iter()
            .map(|h| match h.change.unwrap() {
                Change::Moved { from, to, .. } => format!("moved {from} {to}"),
                c => format!("{} {}", c.path(), c.value().copied().unwrap_or(0)),
            })
            .collect()
    }

    #[test]
    fn a_move_waits_for_its_source_and_holds_back_its_destination() {
        let read = Cursor::default();
        let mut order = Order::new(&read);
        let key = (path("/a"), path("/b"), "op".to_owned());
        // Shard 2 is read first: the copy, then an overwrite of the destination.
        order.arrival(
            at("s2", "10", None),
            key.clone(),
            moved(path("/a"), path("/b"), 1, info("10")),
        );
        order.plain(at("s2", "12", Some("10")), Ok(created("/b", 2, "12")));
        order.plain(at("s2", "13", Some("12")), Ok(created("/c", 3, "13")));
        assert_eq!(handed(&mut order, &read), ["/c 3"]);
        // The cursor stays before the copy, and skips what was handed after it.
        let c = order.cursor(&read);
        assert_eq!(c.marks.get("s2"), Some(&Mark::Fresh));
        assert_eq!(
            c.skips.get("s2").map(Vec::as_slice),
            Some(["13".to_owned()].as_slice())
        );
        // Shard 1: an update of the source, then its removal.
        order.plain(at("s1", "5", None), Ok(created("/a", 9, "5")));
        assert_eq!(handed(&mut order, &read), ["/a 9"]);
        let alone = Change::Deleted {
            path: path("/a"),
            old: 1,
            info: info("11"),
        };
        order.departure(
            at("s1", "11", Some("5")),
            key,
            moved(path("/a"), path("/b"), 1, info("11")),
            alone,
        );
        assert_eq!(handed(&mut order, &read), ["moved /a /b", "/b 2"]);
        assert!(order.is_empty());
    }

    #[test]
    fn a_rolled_back_copy_cancels_the_move() {
        let read = Cursor::default();
        let mut order = Order::new(&read);
        let key = (path("/a"), path("/b"), "op".to_owned());
        order.arrival(
            at("s2", "10", None),
            key.clone(),
            moved(path("/a"), path("/b"), 1, info("10")),
        );
        let deleted = Change::Deleted {
            path: path("/b"),
            old: 1,
            info: info("11"),
        };
        assert!(
            order
                .copy_removed(at("s2", "11", Some("10")), &key, deleted)
                .is_none()
        );
        order.plain(at("s2", "12", Some("11")), Ok(created("/b", 2, "12")));
        assert!(
            handed(&mut order, &read).is_empty(),
            "all wait for the source"
        );
        order.kept(key);
        assert_eq!(handed(&mut order, &read), ["/b 2"]);
        assert!(order.is_empty());
    }

    #[test]
    fn a_removal_without_its_copy_is_a_deletion_once_caught_up() {
        let read = Cursor::default();
        let mut order = Order::new(&read);
        let key = (path("/a"), path("/b"), "op".to_owned());
        let alone = Change::Deleted {
            path: path("/a"),
            old: 1,
            info: info("11"),
        };
        order.departure(
            at("s1", "11", None),
            key.clone(),
            moved(path("/a"), path("/b"), 1, info("11")),
            alone,
        );
        order.plain(at("s1", "12", Some("11")), Ok(created("/a", 2, "12")));
        let t0 = tokio::time::Instant::now();
        order.caught_up(t0);
        assert!(
            handed(&mut order, &read).is_empty(),
            "it waits for its copy a while"
        );
        order.caught_up(t0 + ORPHAN_GRACE);
        assert_eq!(
            handed(&mut order, &read),
            ["/a 0", "/a 2"],
            "a deletion, then the creation"
        );
        // The copy read late is a creation.
        order.arrival(
            at("s2", "10", None),
            key,
            moved(path("/a"), path("/b"), 1, info("10")),
        );
        assert_eq!(handed(&mut order, &read), ["/b 1"]);
        assert!(order.is_empty());
    }
}
