//! [`FakeStream`]: the fake table's DynamoDB stream (view type `NEW_AND_OLD_IMAGES`), with
//! seeded delivery faults ([`StreamFaults`]).
//!
//! Once the stream is enabled ([`Storage::enable_stream`](dynatree::storage::Storage::enable_stream)),
//! every request that changes rows appends one [`Change`] per changed row to the table's
//! stream log, as DynamoDB Streams does: PutItem, DeleteItem, UpdateItem, BatchWriteItem,
//! every Put, Delete and Update of a TransactWriteItems, and the deletions of time to live
//! ([`FakeTable::expire_ttl`]). A write that changes nothing (a put of an identical item, a
//! delete of an absent item, an update that leaves the item as it was) and a request that
//! fails (a failed condition, a cancelled transaction, an injected fault before the write)
//! write no record. Sequence numbers are 21-digit, zero-padded decimal strings, strictly
//! increasing, so their string order is their numeric order.
//!
//! [`FakeTable::stream_reader`] reads the log from its start; [`FakeStream::with_faults`]
//! delivers it as DynamoDB Streams and Lambda may (redelivered, duplicated and delayed
//! batches), so a stream processor such as
//! [`Tree::apply_changes`](dynatree::Tree::apply_changes) is tested without AWS.
//!
//! # Examples
//!
//! ```
//! use dynatree::Tree;
//! use dynatree::changes::ChangeKind;
//! use dynatree::storage::Storage;
//! use dynatree_testing::{FakeTable, StreamFaults};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
//! #[derive(serde::Serialize)]
//! struct Doc { title: String }
//!
//! let table = FakeTable::new();
//! let tree = Tree::new(table.clone());
//! tree.create_table().await?;
//! table.enable_stream().await?;
//! tree.put(["forum"], &Doc { title: "Rust".into() }).await?;
//! tree.put(["forum"], &Doc { title: "Rust users".into() }).await?;
//!
//! let records = table.stream_records();
//! let last = records.last().expect("a record per change");
//! assert_eq!(last.kind(), ChangeKind::Modify);
//! assert!(last.old_image().is_some() && last.new_image().is_some());
//!
//! // The processor, fed at least once, in per-item order, with faults.
//! let mut stream = table.stream_reader().with_faults(StreamFaults::all(42));
//! while !stream.is_caught_up() {
//!     let batch = stream.next_batch(10);
//!     tree.apply_changes(&batch).await.into_result()?;
//! }
//! # Ok(()) }
//! ```

use std::collections::{HashSet, VecDeque};

use dynatree::changes::{Change, ChangeKind};
use dynatree::storage::{Item, Key, StreamPage, StreamPosition, StreamShard};
use dynatree::{Error, ErrorKind, Result};

use crate::fake::FakeTable;

/// The digits of a sequence number (DynamoDB's are 21 digits long too).
const SEQUENCE_DIGITS: usize = 21;

/// The table's stream log: every change since the stream was enabled, oldest first, and its
/// shards.
#[derive(Debug, Default)]
pub(crate) struct StreamLog {
    records: Vec<Change>,
    /// The sequence number of the latest record (0: none yet). Record `i` of `records` has
    /// sequence number `i + 1`.
    last: u64,
    /// Every shard, oldest first; the open ones last (see [`FakeTable::split_stream`]).
    shards: Vec<FakeShard>,
    /// The records up to this sequence number have left the stream
    /// ([`FakeTable::trim_stream`]).
    trimmed: u64,
}

/// One shard of the fake stream: the sequence numbers of its records.
#[derive(Debug)]
struct FakeShard {
    id: String,
    parent: Option<String>,
    closed: bool,
    /// The sequence numbers of its records, in order.
    records: Vec<u64>,
}

impl StreamLog {
    /// Appends the change of `key` from `old` to `new`, unless it changed nothing.
    pub(crate) fn record(&mut self, key: Key, old: Option<Item>, new: Option<Item>) {
        let kind = match (&old, &new) {
            (None, None) => return,
            (Some(a), Some(b)) if same_item(a, b) => return,
            (None, Some(_)) => ChangeKind::Insert,
            (Some(_), Some(_)) => ChangeKind::Modify,
            (Some(_), None) => ChangeKind::Remove,
        };
        self.last += 1;
        let sequence = format!("{:0width$}", self.last, width = SEQUENCE_DIGITS);
        if self.shards.is_empty() {
            self.split(1);
        }
        // The item's shard: one of the open ones, by its partition key.
        let open: Vec<usize> = (0..self.shards.len())
            .filter(|&i| !self.shards[i].closed)
            .collect();
        let slot = open[(fnv(&key.hash) % open.len() as u64) as usize];
        self.shards[slot].records.push(self.last);
        self.records.push(
            Change::new(kind, key, old, new, sequence)
                .with_created_at(std::time::SystemTime::now()),
        );
    }

    /// Closes every open shard and opens `n` (at least 1) new ones; new shard `i` is the
    /// child of old shard `i` modulo their number.
    pub(crate) fn split(&mut self, n: usize) {
        let old: Vec<String> = self
            .shards
            .iter()
            .filter(|s| !s.closed)
            .map(|s| s.id.clone())
            .collect();
        for s in &mut self.shards {
            s.closed = true;
        }
        let base = self.shards.len();
        for i in 0..n.max(1) {
            let parent = (!old.is_empty()).then(|| old[i % old.len()].clone());
            self.shards.push(FakeShard {
                id: format!("shardId-{:06}", base + i),
                parent,
                closed: false,
                records: Vec::new(),
            });
        }
    }

    /// Every record written so far leaves the stream, and so do the closed shards (24 hours
    /// pass).
    pub(crate) fn trim(&mut self) {
        self.trimmed = self.last;
        self.shards.retain(|s| !s.closed);
    }

    /// The shards, as DescribeStream lists them (parents first).
    pub(crate) fn shards(&self) -> Vec<StreamShard> {
        self.shards
            .iter()
            .map(|s| StreamShard::new(s.id.clone(), s.parent.clone(), s.closed))
            .collect()
    }

    /// One page of `shard`'s records from `position` (GetRecords).
    pub(crate) fn page(
        &self,
        shard: &str,
        position: &StreamPosition,
        limit: u32,
    ) -> Result<StreamPage> {
        let Some(s) = self.shards.iter().find(|s| s.id == shard) else {
            return Err(Error::new(
                ErrorKind::TableNotFound,
                format!("Requested resource not found: Shard does not exist: {shard}"),
            )
            .with_service_code("ResourceNotFoundException"));
        };
        let expired = || {
            Error::new(ErrorKind::CursorExpired, "").with_service_code("TrimmedDataAccessException")
        };
        let after = match position {
            StreamPosition::TrimHorizon => self.trimmed,
            StreamPosition::Latest => self.last,
            StreamPosition::After(seq) | StreamPosition::Next(seq) => {
                let seq: u64 = seq.parse().map_err(|_| {
                    Error::new(
                        ErrorKind::Validation,
                        format!("invalid sequence number {seq:?}"),
                    )
                    .with_service_code("ValidationException")
                })?;
                if seq < self.trimmed {
                    return Err(expired());
                }
                seq
            }
        };
        let from = s.records.partition_point(|&q| q <= after);
        let limit = usize::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        let taken = s.records.get(from..).unwrap_or_default();
        let taken = &taken[..taken.len().min(limit)];
        let records: Vec<Change> = taken
            .iter()
            .filter_map(|&q| self.records.get(usize::try_from(q - 1).ok()?).cloned())
            .collect();
        let read_to = taken.last().copied().unwrap_or(after);
        let at_end = from + taken.len() >= s.records.len();
        let next = if s.closed && at_end {
            None
        } else if taken.is_empty() && *position == StreamPosition::TrimHorizon {
            Some(StreamPosition::TrimHorizon)
        } else {
            Some(StreamPosition::Next(format!(
                "{read_to:0width$}",
                width = SEQUENCE_DIGITS
            )))
        };
        Ok(StreamPage { records, next })
    }

    /// Every record, oldest first.
    pub(crate) fn records(&self) -> &[Change] {
        &self.records
    }
}

/// The 64-bit FNV-1a hash of `s`: a stable choice of shard.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether two items are equal as DynamoDB compares them (numbers by value, sets in any
/// order): writing one over the other changes nothing.
fn same_item(a: &Item, b: &Item) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((na, va), (nb, vb))| na == nb && va.same_as(vb))
}

impl FakeTable {
    /// A reader of the table's stream from its oldest record (`TRIM_HORIZON`), delivering
    /// each record once, in order. Reading is not a request of the table: it is not metered
    /// and suffers none of the table's faults. Readers are independent: each sees every
    /// record, and a clone continues from where the original was.
    ///
    /// The stream has only the changes made since it was enabled
    /// ([`Storage::enable_stream`](dynatree::storage::Storage::enable_stream), or a tree
    /// built with [`Propagation::Stream`](dynatree::denorm::Propagation::Stream) creating the table);
    /// without it, the reader sees nothing. Feed its batches to
    /// [`Tree::apply_changes`](dynatree::Tree::apply_changes); add
    /// [`FakeStream::with_faults`] to deliver them as a Lambda or a restarted consumer may.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::changes::ChangeKind;
    /// use dynatree::storage::Storage;
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// #[derive(serde::Serialize)]
    /// struct Doc { title: String }
    ///
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.enable_stream().await?;
    /// tree.put(["a"], &Doc { title: "hello".into() }).await?;
    ///
    /// let mut stream = table.stream_reader();
    /// let batch = stream.next_batch(100);
    /// assert!(!batch.is_empty());
    /// assert!(batch.iter().all(|c| c.kind() == ChangeKind::Insert));
    /// assert!(stream.is_caught_up());
    /// assert!(stream.next_batch(100).is_empty());
    ///
    /// // Another reader starts from the beginning again.
    /// assert_eq!(table.stream_reader().next_batch(100), batch);
    /// # Ok(()) }
    /// ```
    pub fn stream_reader(&self) -> FakeStream {
        FakeStream {
            table: self.clone(),
            next: 0,
            faults: None,
        }
    }

    /// Every record of the table's stream so far, oldest first (empty while the stream is not
    /// enabled). Not a request: not metered, no faults.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::changes::ChangeKind;
    /// use dynatree::storage::{Condition, Key, Storage};
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// let key = Key::new("h", "r");
    /// table.put_item(key.clone().into_item(), Condition::Always).await?; // before: not in it
    /// table.enable_stream().await?;
    /// table.delete_item(&key, Condition::Always).await?;
    /// table.delete_item(&key, Condition::Always).await?; // deletes nothing: no record
    ///
    /// let records = table.stream_records();
    /// assert_eq!(records.len(), 1);
    /// assert_eq!(records[0].kind(), ChangeKind::Remove);
    /// assert_eq!(records[0].old_image(), Some(&key.into_item()));
    /// assert_eq!(records[0].sequence_number(), "000000000000000000001");
    /// # Ok(()) }
    /// ```
    pub fn stream_records(&self) -> Vec<Change> {
        self.with_stream_log(|log| log.records().to_vec())
    }

    /// Closes every open shard of the table's stream and opens `shards` new ones (at least
    /// one), children of the closed ones, as DynamoDB Streams does every few hours and when
    /// partitions split. Each item's later records go to one of the new shards, chosen by its
    /// partition key: with several shards, the records of a transaction (and of a move) land
    /// in different shards and a reader sees them interleaved with others, as on the service.
    /// The stream starts with one shard. Not a request.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::storage::Storage;
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// table.split_stream(3);
    /// let shards = table.stream_shards().await?;
    /// assert_eq!(shards.iter().filter(|s| !s.is_closed()).count(), 3);
    /// assert!(shards.iter().filter(|s| !s.is_closed()).all(|s| s.parent().is_some()));
    /// # Ok(()) }
    /// ```
    pub fn split_stream(&self, shards: usize) {
        self.with_stream_log_mut(|log| log.split(shards));
    }

    /// Every record of the table's stream so far leaves it, and so do its closed shards, as
    /// after 24 hours: a position before now is then refused
    /// ([`ErrorKind::CursorExpired`](dynatree::ErrorKind::CursorExpired)), what a watch that
    /// was stopped for a day meets. [`stream_records`](Self::stream_records) and
    /// [`stream_reader`](Self::stream_reader) still see everything. Not a request.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ErrorKind, Tree};
    /// use dynatree::storage::{Condition, Key, Storage, StreamPosition};
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// table.put_item(Key::new("h", "b").into_item(), Condition::Always).await?;
    /// let shard = table.stream_shards().await?.remove(0);
    /// let first = table.stream_page(shard.id(), StreamPosition::TrimHorizon, 1).await?;
    /// let seen = first.records[0].sequence_number().to_owned();
    ///
    /// table.trim_stream();
    /// let err = table.stream_page(shard.id(), StreamPosition::After(seen), 10).await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::CursorExpired);
    /// let now = table.stream_page(shard.id(), StreamPosition::TrimHorizon, 10).await?;
    /// assert!(now.records.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn trim_stream(&self) {
        self.with_stream_log_mut(StreamLog::trim);
    }
}

/// How a [`FakeStream`] misdelivers, as DynamoDB Streams and Lambda may: seeded, so a run
/// replays exactly.
///
/// - **redeliver** (per delivered batch): the batch, or its tail from one of its records on,
///   is delivered again after 0 to 3 later batches, as a Lambda retrying a failed batch or a
///   consumer restarting from its last checkpoint does. This is the only fault that brings an
///   old record of an item after a newer one.
/// - **duplicate** (per record): the record appears twice in its batch, right after itself
///   (when the batch has room for both within its `max`).
/// - **delay** (per new batch): the batch is held back for 1 to 3 later batches, which are
///   delivered first, as shards are read at different paces. Those later batches have no
///   record of the held batch's items (they wait for it), so a delay reorders the changes of
///   different items only.
///
/// Every record is still delivered at least once: a held batch is released at the latest
/// when nothing else is left ([`FakeStream::drain`] returns everything still held).
///
/// # Examples
///
/// ```
/// use dynatree_testing::StreamFaults;
///
/// let faults = StreamFaults::new(7).redeliver(0.2).duplicate(0.1).delay(0.3);
/// assert_eq!(faults, StreamFaults::all(7).redeliver(0.2).duplicate(0.1).delay(0.3));
/// assert_eq!(StreamFaults::new(7), StreamFaults::all(7).redeliver(0.0).duplicate(0.0).delay(0.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct StreamFaults {
    seed: u64,
    redeliver: f64,
    duplicate: f64,
    delay: f64,
}

impl StreamFaults {
    /// No faults yet, drawing from `seed`: add them with [`redeliver`](Self::redeliver),
    /// [`duplicate`](Self::duplicate) and [`delay`](Self::delay).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::StreamFaults;
    /// let only_retries = StreamFaults::new(42).redeliver(0.5);
    /// # let _ = only_retries;
    /// ```
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            redeliver: 0.0,
            duplicate: 0.0,
            delay: 0.0,
        }
    }

    /// Every fault, each with probability 0.25, drawing from `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::StreamFaults;
    /// assert_eq!(StreamFaults::all(1), StreamFaults::new(1).redeliver(0.25).duplicate(0.25).delay(0.25));
    /// ```
    pub fn all(seed: u64) -> Self {
        Self::new(seed).redeliver(0.25).duplicate(0.25).delay(0.25)
    }

    /// The probability (0 to 1) that a delivered batch is delivered again later.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::StreamFaults;
    /// let always = StreamFaults::new(3).redeliver(1.0);
    /// # let _ = always;
    /// ```
    pub fn redeliver(mut self, probability: f64) -> Self {
        self.redeliver = clamp(probability);
        self
    }

    /// The probability (0 to 1) that a record is repeated in its batch.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::StreamFaults;
    /// let doubled = StreamFaults::new(3).duplicate(1.0); // every record twice
    /// # let _ = doubled;
    /// ```
    pub fn duplicate(mut self, probability: f64) -> Self {
        self.duplicate = clamp(probability);
        self
    }

    /// The probability (0 to 1) that a new batch is held back behind later ones.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::StreamFaults;
    /// let lagging = StreamFaults::new(3).delay(0.5);
    /// # let _ = lagging;
    /// ```
    pub fn delay(mut self, probability: f64) -> Self {
        self.delay = clamp(probability);
        self
    }
}

/// A probability in 0..=1 (NaN: 0).
fn clamp(p: f64) -> f64 {
    if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) }
}

/// A reader of a [`FakeTable`]'s stream ([`FakeTable::stream_reader`]): batches of
/// [`Change`]s, each change once and the changes of one item in the order they were made,
/// or, [`with_faults`](Self::with_faults), at least once with the misdeliveries of
/// [`StreamFaults`].
///
/// Cloning is cheap and gives an independent reader that continues from the same place (with
/// the same pending faults and random state, so both deliver the same).
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree::storage::{Condition, Key, Storage};
/// use dynatree_testing::{FakeTable, StreamFaults};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// Tree::new(table.clone()).create_table().await?;
/// table.enable_stream().await?;
/// for r in ["a", "b", "c", "d"] {
///     table.put_item(Key::new("h", r).into_item(), Condition::Always).await?;
/// }
///
/// let mut stream = table.stream_reader().with_faults(StreamFaults::all(9));
/// let mut seen = Vec::new();
/// while !stream.is_caught_up() {
///     for change in stream.next_batch(2) {
///         // Here: tree.apply_changes(&batch), which must tolerate all of it.
///         seen.push(change.sequence_number().to_owned());
///     }
/// }
/// for record in table.stream_records() {
///     assert!(seen.iter().any(|s| s == record.sequence_number())); // at least once
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FakeStream {
    table: FakeTable,
    /// The index in the log of the next record never read.
    next: usize,
    faults: Option<Faulty>,
}

/// The state of a faulty delivery.
#[derive(Debug, Clone)]
struct Faulty {
    faults: StreamFaults,
    rng: fastrand::Rng,
    /// Records read from the log but waiting for a held batch with a record of their item,
    /// in log order.
    waiting: VecDeque<Change>,
    /// Batches held back (delayed, or to be delivered again), oldest first.
    held: VecDeque<Held>,
}

#[derive(Debug, Clone)]
struct Held {
    records: Vec<Change>,
    /// How many more batches are delivered before this one.
    after: u32,
    /// A delivery again (rather than a delayed first delivery, whose items later records
    /// wait for).
    again: bool,
}

impl FakeStream {
    /// The same reader, delivering with `faults`: redelivered, duplicated and delayed batches,
    /// deterministic for the seed (and the table's records).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::storage::{Condition, Key, Storage};
    /// use dynatree_testing::{FakeTable, StreamFaults};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    ///
    /// let mut stream = table.stream_reader().with_faults(StreamFaults::new(1).duplicate(1.0));
    /// let batch = stream.next_batch(10);
    /// assert_eq!(batch.len(), 2); // the one record, twice
    /// assert_eq!(batch[0], batch[1]);
    /// # Ok(()) }
    /// ```
    pub fn with_faults(mut self, faults: StreamFaults) -> Self {
        let (waiting, held) = match self.faults.take() {
            Some(f) => (f.waiting, f.held),
            None => (VecDeque::new(), VecDeque::new()),
        };
        self.faults = Some(Faulty {
            faults,
            rng: fastrand::Rng::with_seed(faults.seed),
            waiting,
            held,
        });
        self
    }

    /// The next batch of at most `max` records (at least 1 is asked for), oldest first; empty
    /// when the reader [is caught up](Self::is_caught_up). Records written later are read by
    /// later calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::storage::{Condition, Key, Storage};
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// let mut stream = table.stream_reader();
    /// assert!(stream.next_batch(10).is_empty());
    /// for r in ["a", "b", "c"] {
    ///     table.put_item(Key::new("h", r).into_item(), Condition::Always).await?;
    /// }
    /// assert_eq!(stream.next_batch(2).len(), 2);
    /// assert_eq!(stream.next_batch(2).len(), 1);
    /// assert!(stream.next_batch(2).is_empty());
    /// # Ok(()) }
    /// ```
    pub fn next_batch(&mut self, max: usize) -> Vec<Change> {
        let max = max.max(1);
        let table = self.table.clone();
        table.with_stream_log(|log| {
            let log = log.records();
            match self.faults.as_mut() {
                None => {
                    let end = log.len().min(self.next.saturating_add(max));
                    let batch = log.get(self.next..end).unwrap_or_default().to_vec();
                    self.next = end.max(self.next);
                    batch
                }
                Some(f) => f.next_batch(log, &mut self.next, max, true),
            }
        })
    }

    /// Whether every record was delivered and nothing is held back for later: the next
    /// [`next_batch`](Self::next_batch) would be empty (until the table changes again).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::storage::{Condition, Key, Storage};
    /// use dynatree_testing::FakeTable;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// let mut stream = table.stream_reader();
    /// assert!(stream.is_caught_up());
    /// table.put_item(Key::new("h", "a").into_item(), Condition::Always).await?;
    /// assert!(!stream.is_caught_up());
    /// stream.next_batch(10);
    /// assert!(stream.is_caught_up());
    /// # Ok(()) }
    /// ```
    pub fn is_caught_up(&self) -> bool {
        let read_all = self
            .table
            .with_stream_log(|log| self.next >= log.records().len());
        read_all
            && self
                .faults
                .as_ref()
                .is_none_or(|f| f.waiting.is_empty() && f.held.is_empty())
    }

    /// Everything not delivered yet, held-back batches and redeliveries included, in an order
    /// a stream may deliver it (the changes of one item in order, except for redeliveries),
    /// without new faults; the reader is then caught up.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree::storage::{Condition, Key, Storage};
    /// use dynatree_testing::{FakeTable, StreamFaults};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.enable_stream().await?;
    /// for r in ["a", "b", "c"] {
    ///     table.put_item(Key::new("h", r).into_item(), Condition::Always).await?;
    /// }
    /// let mut stream = table.stream_reader().with_faults(StreamFaults::new(5).delay(1.0));
    /// let mut seen = stream.next_batch(1);
    /// seen.extend(stream.drain());
    /// assert!(stream.is_caught_up());
    /// let mut seen: Vec<_> = seen.iter().map(|c| c.sequence_number().to_owned()).collect();
    /// seen.sort();
    /// seen.dedup();
    /// assert_eq!(seen.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn drain(&mut self) -> Vec<Change> {
        let table = self.table.clone();
        table.with_stream_log(|log| {
            let log = log.records();
            match self.faults.as_mut() {
                None => {
                    let rest = log.get(self.next..).unwrap_or_default().to_vec();
                    self.next = log.len().max(self.next);
                    rest
                }
                Some(f) => {
                    let mut out = Vec::new();
                    loop {
                        let batch = f.next_batch(log, &mut self.next, usize::MAX, false);
                        if batch.is_empty() {
                            break out;
                        }
                        out.extend(batch);
                    }
                }
            }
        })
    }
}

impl Faulty {
    /// The next batch; `inject`: whether new faults may strike (not while draining).
    fn next_batch(
        &mut self,
        log: &[Change],
        next: &mut usize,
        max: usize,
        inject: bool,
    ) -> Vec<Change> {
        for h in &mut self.held {
            h.after = h.after.saturating_sub(1);
        }
        loop {
            // A held batch whose time has come goes first.
            if let Some(i) = self.held.iter().position(|h| h.after == 0) {
                return self.release(i, max, inject);
            }
            let fresh = self.fresh(log, next, max, inject);
            if fresh.is_empty() {
                // Nothing new can go: the oldest held batch goes now.
                if self.held.is_empty() {
                    return Vec::new();
                }
                return self.release(0, max, inject);
            }
            if inject && self.chance(self.faults.delay) {
                let after = self.rng.u32(1..=3);
                self.held.push_back(Held {
                    records: fresh,
                    after,
                    again: false,
                });
                continue;
            }
            self.delivered(&fresh, inject);
            return fresh;
        }
    }

    /// Delivers held batch `i` (at most `max` of its records; the rest stays first in line).
    fn release(&mut self, i: usize, max: usize, inject: bool) -> Vec<Change> {
        let Some(mut held) = self.held.remove(i) else {
            return Vec::new();
        };
        if held.records.len() > max {
            let rest = held.records.split_off(max);
            self.held.push_front(Held {
                records: rest,
                after: 0,
                again: held.again,
            });
        }
        if !held.again {
            self.delivered(&held.records, inject);
        }
        held.records
    }

    /// A new batch: waiting records whose items are no longer held, then records of the log,
    /// at most `max` with their duplicates; records of held items wait.
    fn fresh(&mut self, log: &[Change], next: &mut usize, max: usize, inject: bool) -> Vec<Change> {
        let blocked: HashSet<&Key> = self
            .held
            .iter()
            .filter(|h| !h.again)
            .flat_map(|h| h.records.iter().map(Change::key))
            .collect();
        let duplicate = if inject { self.faults.duplicate } else { 0.0 };
        let mut batch = Vec::new();
        let mut still_waiting = VecDeque::new();
        let take = |change: Change, batch: &mut Vec<Change>, rng: &mut fastrand::Rng| {
            let twice = duplicate > 0.0 && batch.len() + 2 <= max && rng.f64() < duplicate;
            if twice {
                batch.push(change.clone());
            }
            batch.push(change);
        };
        while let Some(change) = self.waiting.pop_front() {
            if batch.len() >= max || blocked.contains(change.key()) {
                still_waiting.push_back(change);
            } else {
                take(change, &mut batch, &mut self.rng);
            }
        }
        while batch.len() < max
            && let Some(change) = log.get(*next)
        {
            *next += 1;
            if blocked.contains(change.key()) {
                still_waiting.push_back(change.clone());
            } else {
                take(change.clone(), &mut batch, &mut self.rng);
            }
        }
        self.waiting = still_waiting;
        batch
    }

    /// A batch was delivered for the first time: maybe deliver it (or its tail) again later.
    fn delivered(&mut self, batch: &[Change], inject: bool) {
        if !inject || batch.is_empty() || !self.chance(self.faults.redeliver) {
            return;
        }
        let from = self.rng.usize(0..batch.len());
        let after = self.rng.u32(1..=4);
        self.held.push_back(Held {
            records: batch.get(from..).unwrap_or_default().to_vec(),
            after,
            again: true,
        });
    }

    fn chance(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.rng.f64() < probability
    }
}
