//! [`StreamConsumer`]: a polling consumer of a table's DynamoDB stream, on
//! `aws-sdk-dynamodbstreams`, that feeds [`Tree::apply_changes`] and checkpoints in the tree's
//! own table.
//!
//! The SDK's types stay in this module (and in the signatures that take a client).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::time::Duration;

use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::error::ProvideErrorMetadata;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use tracing::Instrument;

use super::{Change, Follow, Process, Propagate};
use crate::error::{Error, ErrorKind, Result};
use crate::item::Value;
use crate::layout::no_later_checkpoint;
use crate::storage::dynamodb_stream::stream_span;
use crate::storage::{Query, RangeCondition, SharedStorage, Storage};
use crate::tree::Tree;

/// The longest consumer name, in UTF-8 bytes (its checkpoint rows' range keys hold it with a
/// shard id, and a range key is at most 1024 bytes).
const MAX_NAME_BYTES: usize = 512;
/// DynamoDB Streams' sequence numbers are decimal strings of 21 to 40 digits.
const SEQUENCE_DIGITS: usize = 40;
/// GetRecords returns at most 1000 records.
const MAX_BATCH: u32 = 1000;
/// How many times one shard's expired iterator is renewed within one poll.
const MAX_RENEWALS: u32 = 3;

/// A polling consumer of a tree table's DynamoDB stream (view type `NEW_AND_OLD_IMAGES`): it
/// walks the stream's shards, turns their records into [`Change`]s, applies them with
/// [`Tree::apply_changes`], and checkpoints each shard's progress in the tree's own table.
/// For local development (DynamoDB Local has streams) and for services that do not run on
/// AWS Lambda (there, use [`lambda::handle`](crate::changes::lambda::handle)).
///
/// # Shards and order
///
/// A poll lists the stream's shards (DescribeStream, every page) and reads each shard from its
/// position to what is available now (GetShardIterator, then GetRecords until a page comes
/// back empty or a closed shard ends). A child shard is read only once its parent is read to
/// its end (or its parent has left the stream), so the changes of one item are applied in the
/// order they were made. A shard that was never read starts at `TRIM_HORIZON` (the oldest
/// record still in the stream, 24 hours back at most).
///
/// # Checkpoints
///
/// After each applied batch the consumer writes the shard's last processed sequence number to
/// a bookkeeping row of the tree's table (partition `¦¦checkpoints`, where no path's key can
/// be; the Go library never reads it), by a conditional write that never moves a checkpoint
/// backwards. The rows are keyed by the consumer's name: two consumers with different names
/// keep separate checkpoints, and a new consumer with the same name (after a restart) resumes
/// after them (`AFTER_SEQUENCE_NUMBER`). The consumer's own checkpoint writes come back on the
/// stream; it skips those records (they are never given to the tree) and writes no
/// checkpoint for a batch made only of them, so checkpoints do not feed themselves.
///
/// Delivery is at least once: a restart re-reads what was applied after the last durable
/// checkpoint, which is harmless because applying a change again moves no copy backwards.
///
/// # Failures
///
/// If a change fails to apply, its shard stops at that record for this poll: everything
/// before it is applied and checkpointed, the failure is in the [`PollReport`], and the next
/// poll starts the shard again at that record (`AT_SEQUENCE_NUMBER`). Other shards go on. A
/// change that can never be applied therefore blocks its shard (and every later change of its
/// items), and is reported on every poll. A checkpoint older than the stream's trim horizon
/// (the consumer was stopped for more than 24 hours) cannot be resumed: the shard restarts at
/// `TRIM_HORIZON`, with a warning; what was trimmed is lost to this consumer.
///
/// # Examples
///
/// ```no_run
/// use dynatree::changes::StreamConsumer;
/// use dynatree::{DynamoDbTable, denorm::Propagation, Tree};
///
/// # async fn run() -> dynatree::Result<()> {
/// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
/// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "forum");
/// let arn = dynatree::changes::latest_stream_arn(&table).await?;
/// let tree = Tree::builder(table).propagation(Propagation::Stream).build()?;
/// let streams = aws_sdk_dynamodbstreams::Client::new(&config);
/// let mut consumer = StreamConsumer::new(tree, streams, arn, "denormalizer")?;
/// let report = consumer.poll_once().await?;
/// println!("applied {} changes", report.applied());
/// # Ok(()) }
/// ```
pub struct StreamConsumer<S = SharedStorage> {
    tree: Tree<S>,
    client: Client,
    stream_arn: String,
    name: String,
    batch_size: u32,
    idle: Duration,
    /// The checkpoints were read from the table (once, on the first poll).
    loaded: bool,
    shards: HashMap<String, ShardState>,
}

impl<S> fmt::Debug for StreamConsumer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamConsumer")
            .field("stream_arn", &self.stream_arn)
            .field("name", &self.name)
            .field("batch_size", &self.batch_size)
            .field("idle", &self.idle)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

/// Where a shard is read from when it has no iterator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    TrimHorizon,
    After(String),
    At(String),
}

#[derive(Debug)]
struct ShardState {
    position: Position,
    /// The iterator to read the next page with; taken out before each request, so that a
    /// cancelled poll starts again from `position`.
    iterator: Option<String>,
    /// Read to its end (a closed shard).
    done: bool,
    /// The last checkpoint known to be durable.
    checkpoint: Option<String>,
}

impl ShardState {
    fn new(checkpoint: Option<String>) -> Self {
        Self {
            position: checkpoint
                .clone()
                .map_or(Position::TrimHorizon, Position::After),
            iterator: None,
            done: false,
            checkpoint,
        }
    }
}

/// One shard as DescribeStream lists it.
#[derive(Debug)]
struct ShardInfo {
    id: String,
    parent: Option<String>,
    ending: Option<String>,
}

/// What one [`StreamConsumer::poll_once`] did.
///
/// # Examples
///
/// ```
/// use dynatree::changes::PollReport;
///
/// fn summary(report: &PollReport) -> String {
///     format!(
///         "{} applied of {} records in {} shards, {} failed",
///         report.applied(),
///         report.records(),
///         report.shards(),
///         report.failures().len()
///     )
/// }
/// ```
#[derive(Debug, Default)]
pub struct PollReport {
    applied: usize,
    records: usize,
    shards: usize,
    failures: Vec<ShardFailure>,
}

impl PollReport {
    /// How many changes were applied to the tree.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::PollReport;
    /// fn busy(report: &PollReport) -> bool { report.applied() > 0 }
    /// ```
    pub fn applied(&self) -> usize {
        self.applied
    }

    /// How many stream records were read, the consumer's own checkpoint writes included (those
    /// are skipped, not applied).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::PollReport;
    /// fn skipped(report: &PollReport) -> usize { report.records() - report.applied() }
    /// ```
    pub fn records(&self) -> usize {
        self.records
    }

    /// How many shards were read.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::PollReport;
    /// fn shards(report: &PollReport) -> usize { report.shards() }
    /// ```
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shards that stopped at a change that failed; each is retried from that change on
    /// the next poll.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::PollReport;
    /// fn log(report: &PollReport) {
    ///     for f in report.failures() {
    ///         eprintln!("{} stopped at {}: {}", f.shard_id(), f.sequence_number(), f.error());
    ///     }
    /// }
    /// ```
    pub fn failures(&self) -> &[ShardFailure] {
        &self.failures
    }

    /// `Ok` with the number of changes applied, or the error of the first failure.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::PollReport;
    /// fn applied(report: PollReport) -> dynatree::Result<usize> { report.into_result() }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of the first change that failed.
    pub fn into_result(self) -> Result<usize> {
        match self.failures.into_iter().next() {
            None => Ok(self.applied),
            Some(f) => Err(f.error),
        }
    }
}

/// A shard that stopped at a change that failed to apply (or a record that is not a change of
/// a row).
///
/// # Examples
///
/// ```
/// # use dynatree::changes::ShardFailure;
/// fn retryable(f: &ShardFailure) -> bool { f.error().is_retryable() }
/// ```
#[derive(Debug)]
pub struct ShardFailure {
    shard_id: String,
    sequence_number: String,
    error: Error,
}

impl ShardFailure {
    /// The shard's id.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ShardFailure;
    /// fn shard(f: &ShardFailure) -> &str { f.shard_id() }
    /// ```
    pub fn shard_id(&self) -> &str {
        &self.shard_id
    }

    /// The sequence number of the record that failed (the next poll starts there).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ShardFailure;
    /// fn at(f: &ShardFailure) -> &str { f.sequence_number() }
    /// ```
    pub fn sequence_number(&self) -> &str {
        &self.sequence_number
    }

    /// Why it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ShardFailure;
    /// fn why(f: &ShardFailure) -> String { f.error().to_string() }
    /// ```
    pub fn error(&self) -> &Error {
        &self.error
    }
}

impl<S: Storage + 'static> StreamConsumer<S> {
    /// A consumer named `name` of the stream `stream_arn` (the tree table's stream; see
    /// [`latest_stream_arn`](crate::changes::latest_stream_arn)), applying to `tree`. Nothing
    /// is sent: the checkpoints are read on the first poll.
    ///
    /// The client is used as given (with the SDK's own retries). Defaults: 1000 records per
    /// GetRecords, 1 second between polls in [`run`](Self::run).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument`](ErrorKind::InvalidArgument) if the name is empty, longer than 512
    /// bytes, or contains the tree's reserved character; or if the ARN is empty.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use dynatree::changes::StreamConsumer;
    /// use dynatree::{DynamoDbTable, Tree};
    ///
    /// # async fn run() -> dynatree::Result<()> {
    /// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    /// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "forum");
    /// let arn = dynatree::changes::latest_stream_arn(&table).await?;
    /// let streams = aws_sdk_dynamodbstreams::Client::new(&config);
    /// let consumer = StreamConsumer::new(Tree::new(table), streams, arn, "denormalizer")?;
    /// assert_eq!(consumer.name(), "denormalizer");
    /// # Ok(()) }
    /// ```
    pub fn new(
        tree: Tree<S>,
        client: Client,
        stream_arn: impl Into<String>,
        name: impl Into<String>,
    ) -> Result<Self> {
        let name = name.into();
        let stream_arn = stream_arn.into();
        if name.is_empty() || name.len() > MAX_NAME_BYTES || name.contains(tree.reserved()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "consumer name must be 1 to {MAX_NAME_BYTES} bytes without the reserved character"
                ),
            ));
        }
        if stream_arn.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "empty stream arn"));
        }
        Ok(Self {
            tree,
            client,
            stream_arn,
            name,
            batch_size: MAX_BATCH,
            idle: Duration::from_secs(1),
            loaded: false,
            shards: HashMap::new(),
        })
    }

    /// At most `records` records per GetRecords request (1 to 1000; clamped), so at most that
    /// many changes per call of [`Tree::apply_changes`] and per checkpoint.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::changes::StreamConsumer;
    /// # fn f(consumer: StreamConsumer) -> StreamConsumer {
    /// consumer.batch_size(100)
    /// # }
    /// ```
    #[must_use]
    pub fn batch_size(mut self, records: u32) -> Self {
        self.batch_size = records.clamp(1, MAX_BATCH);
        self
    }

    /// How long [`run`](Self::run) sleeps after each poll (1 second by default). DynamoDB
    /// Streams serves each shard at most 5 GetRecords requests per second.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::changes::StreamConsumer;
    /// # use std::time::Duration;
    /// # fn f(consumer: StreamConsumer) -> StreamConsumer {
    /// consumer.idle(Duration::from_millis(250))
    /// # }
    /// ```
    #[must_use]
    pub fn idle(mut self, sleep: Duration) -> Self {
        self.idle = sleep;
        self
    }

    /// The consumer's name (what its checkpoints are kept under).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::changes::StreamConsumer;
    /// # fn f(consumer: &StreamConsumer) {
    /// println!("consumer {}", consumer.name());
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream's ARN.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::changes::StreamConsumer;
    /// # fn f(consumer: &StreamConsumer) {
    /// println!("reading {}", consumer.stream_arn());
    /// # }
    /// ```
    pub fn stream_arn(&self) -> &str {
        &self.stream_arn
    }

    /// Reads every record available now, in every shard that is ready, applies them and
    /// checkpoints; see [`StreamConsumer`] for the order and the failures. The first poll
    /// reads the consumer's checkpoints first.
    ///
    /// # Errors
    ///
    /// A failure of the stream's API (the stream does not exist:
    /// [`TableNotFound`](ErrorKind::TableNotFound); too many requests:
    /// [`Throttled`](ErrorKind::Throttled); anything else: [`Backend`](ErrorKind::Backend),
    /// with DynamoDB's code, request id, and the SDK's error as the
    /// [`source`](std::error::Error::source)) or of a checkpoint's read or write. What was
    /// applied before stays applied; the next poll goes on from there. A change that fails to
    /// apply is not an error of the poll: it is in [`PollReport::failures`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a cancelled poll leaves the consumer where its last complete batch left
    /// it, so the next poll re-reads and re-applies at most the batch that was in flight,
    /// which is harmless (application is idempotent). A checkpoint write that was in flight may
    /// or may not have happened; either way checkpoints never move backwards.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::changes::StreamConsumer;
    /// # async fn f(consumer: &mut StreamConsumer) -> dynatree::Result<()> {
    /// let report = consumer.poll_once().await?;
    /// for failure in report.failures() {
    ///     eprintln!("{}: {}", failure.shard_id(), failure.error());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn poll_once(&mut self) -> Result<PollReport> {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            let span = tracing::debug_span!(
                "dynatree.stream.poll",
                consumer = %self.name,
                applied = tracing::field::Empty,
                records = tracing::field::Empty,
            );
            async {
                let report = self.poll(&mut Propagate(self.tree.clone())).await?;
                tracing::Span::current().record("applied", report.applied);
                tracing::Span::current().record("records", report.records);
                Ok(report)
            }
            .instrument(span)
            .await
        })
        .await
    }

    /// Reads every record available now, as [`poll_once`](Self::poll_once) does, but instead
    /// of applying the records to the tree hands each change of the [`Entity`](crate::Entity)
    /// `T` they say to `handler`, in order (records that say none, such as listing rows and
    /// bookkeeping, are skipped; see [`watch::decode`](crate::watch::decode)). Checkpoints are
    /// kept under the consumer's name as for `poll_once`: give a follower its own name.
    ///
    /// A record that does not decode, or whose change `handler` fails, stops its shard for
    /// this poll: everything before it is checkpointed, the failure is in the
    /// [`PollReport`], and the next poll hands that change again. Delivery is at least once:
    /// after a restart, the changes after the last checkpoint come again.
    /// [`PollReport::applied`] counts the records processed.
    ///
    /// # Errors
    ///
    /// As [`poll_once`](Self::poll_once).
    ///
    /// # Cancel safety
    ///
    /// As [`poll_once`](Self::poll_once): a cancelled poll hands the batch that was in flight
    /// again on the next poll.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use dynatree::changes::StreamConsumer;
    /// use dynatree::watch::Change;
    ///
    /// #[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize, Debug)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String, title: String }
    ///
    /// # async fn f(consumer: &mut StreamConsumer) -> dynatree::Result<()> {
    /// let mut titles = std::collections::BTreeMap::new();
    /// let report = consumer
    ///     .poll_changes(&mut |change: Change<Doc>| {
    ///         match &change {
    ///             Change::Deleted { old, .. } => { titles.remove(&old.id); }
    ///             _ => if let Some(doc) = change.value() { titles.insert(doc.id.clone(), doc.title.clone()); },
    ///         }
    ///         async { Ok(()) }
    ///     })
    ///     .await?;
    /// println!("{} records", report.records());
    /// # Ok(()) }
    /// ```
    pub async fn poll_changes<T, F, Fut>(&mut self, handler: &mut F) -> Result<PollReport>
    where
        T: crate::Entity,
        F: FnMut(crate::watch::Change<T>) -> Fut + Send,
        Fut: Future<Output = Result<()>> + Send,
    {
        crate::retry::call(self.tree.cx.inner.config.retry, async {
            let span = tracing::debug_span!(
                "dynatree.stream.poll_changes",
                consumer = %self.name,
                handled = tracing::field::Empty,
                records = tracing::field::Empty,
            );
            async {
                let mut follow = Follow {
                    handler: &mut *handler,
                    _type: std::marker::PhantomData,
                };
                let report = self.poll(&mut follow).await?;
                tracing::Span::current().record("handled", report.applied);
                tracing::Span::current().record("records", report.records);
                Ok(report)
            }
            .instrument(span)
            .await
        })
        .await
    }

    /// Polls until `until` completes, sleeping [`idle`](Self::idle) after each poll. Failed
    /// changes and retryable errors (throttling, network, service errors) are logged with
    /// `tracing` at level `warn` and retried on the next poll.
    ///
    /// # Errors
    ///
    /// The first error of a poll that retrying cannot fix (not
    /// [retryable](Error::is_retryable), and not a [`Backend`](ErrorKind::Backend) failure):
    /// for example the stream or the table does not exist.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, like [`poll_once`](Self::poll_once); `until` is the graceful way to stop
    /// (it interrupts a poll in the same way).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::changes::StreamConsumer;
    /// # async fn f(mut consumer: StreamConsumer) -> dynatree::Result<()> {
    /// // Stop after a minute (a service would wait for its shutdown signal).
    /// consumer.run(tokio::time::sleep(std::time::Duration::from_secs(60))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(&mut self, until: impl Future<Output = ()>) -> Result<()> {
        let mut until = std::pin::pin!(until);
        loop {
            tokio::select! {
                () = &mut until => return Ok(()),
                polled = self.poll_once() => match polled {
                    Ok(report) => {
                        for f in &report.failures {
                            tracing::warn!(
                                consumer = %self.name,
                                shard = %f.shard_id,
                                sequence = %f.sequence_number,
                                error = %f.error,
                                "change failed to apply; retrying on the next poll"
                            );
                        }
                    }
                    Err(e) if e.is_retryable() || e.kind() == ErrorKind::Backend => {
                        tracing::warn!(consumer = %self.name, error = %e, "poll failed; retrying");
                    }
                    Err(e) => return Err(e),
                },
            }
            tokio::select! {
                () = &mut until => return Ok(()),
                () = crate::retry::sleep_for(self.idle) => {}
            }
        }
    }

    async fn poll(&mut self, processor: &mut impl Process) -> Result<PollReport> {
        if !self.loaded {
            self.load_checkpoints().await?;
            self.loaded = true;
        }
        let listed = self.describe().await?;
        let present: HashSet<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        // Shards that left the stream (trimmed) need no state any more.
        self.shards.retain(|id, _| present.contains(id.as_str()));
        let mut report = PollReport::default();
        let mut visited: HashSet<String> = HashSet::new();
        loop {
            let mut progress = false;
            for shard in &listed {
                if visited.contains(&shard.id) || !self.ready(shard, &present) {
                    continue;
                }
                visited.insert(shard.id.clone());
                report.shards += 1;
                self.read_shard(shard, &mut report, processor).await?;
                if self.shards.get(&shard.id).is_some_and(|s| s.done) {
                    progress = true;
                }
            }
            if !progress {
                return Ok(report);
            }
        }
    }

    /// Whether `shard` may be read: not done, and its parent (if still in the stream) done.
    fn ready(&self, shard: &ShardInfo, present: &HashSet<&str>) -> bool {
        if self.shards.get(&shard.id).is_some_and(|s| s.done) {
            return false;
        }
        match &shard.parent {
            Some(parent) if present.contains(parent.as_str()) => {
                self.shards.get(parent).is_some_and(|s| s.done)
            }
            _ => true,
        }
    }

    /// Reads one shard to what is available now.
    async fn read_shard(
        &mut self,
        shard: &ShardInfo,
        report: &mut PollReport,
        processor: &mut impl Process,
    ) -> Result<()> {
        let state = self
            .shards
            .entry(shard.id.clone())
            .or_insert_with(|| ShardState::new(None));
        // A closed shard whose last record is checkpointed has nothing left.
        if let (Some(ending), Some(done_to)) = (&shard.ending, &state.checkpoint)
            && let (Some(ending), Some(done_to)) = (ordinal(ending), ordinal(done_to))
            && done_to >= ending
        {
            state.done = true;
            return Ok(());
        }
        let mut renewals = 0;
        loop {
            let iterator = match self.take_iterator(&shard.id) {
                Some(it) => it,
                None => match self.shard_iterator(&shard.id).await {
                    Ok(Some(it)) => it,
                    Ok(None) => {
                        self.state(&shard.id).done = true;
                        return Ok(());
                    }
                    // DynamoDB Local answers TRIM_HORIZON of a shard without records yet so:
                    // nothing to read now; the next poll asks again.
                    Err(e) if self.nothing_yet(&shard.id, &e) => return Ok(()),
                    Err(e) => return Err(e),
                },
            };
            let output = match self.get_records(iterator).await {
                Ok(output) => output,
                Err(e) if self.nothing_yet(&shard.id, &e) => return Ok(()),
                Err(e)
                    if e.service_code() == Some("ExpiredIteratorException")
                        && renewals < MAX_RENEWALS =>
                {
                    renewals += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (records, next) = output;
            report.records += records.len();
            if records.is_empty() {
                let state = self.state(&shard.id);
                match next {
                    Some(next) => state.iterator = Some(next),
                    None => state.done = true,
                }
                return Ok(());
            }
            if let Some(failure) = self
                .apply(&shard.id, &records, next, report, processor)
                .await?
            {
                report.failures.push(failure);
                return Ok(());
            }
            if self.state(&shard.id).done {
                return Ok(());
            }
        }
    }

    /// Whether `e` says that a shard read from its trim horizon has no records yet.
    fn nothing_yet(&mut self, shard: &str, e: &Error) -> bool {
        e.service_code() == Some("TrimmedDataAccessException")
            && self.state(shard).position == Position::TrimHorizon
    }

    /// Applies one page of records and checkpoints it; moves the shard's position. `Some`
    /// failure if the shard stops at a record.
    async fn apply(
        &mut self,
        shard: &str,
        records: &[Record],
        next: Option<String>,
        report: &mut PollReport,
        processor: &mut impl Process,
    ) -> Result<Option<ShardFailure>> {
        let own = self.tree.cx.layout().checkpoint_key(&self.name, "").hash;
        // (record index, change) of the records that are changes of the tree's rows.
        let mut changes: Vec<Change> = Vec::with_capacity(records.len());
        let mut indexes: Vec<usize> = Vec::with_capacity(records.len());
        let mut failed: Option<(usize, String, Error)> = None;
        for (i, record) in records.iter().enumerate() {
            match from_stream_record(record) {
                Ok(change) if change.key().hash == own => {}
                Ok(change) => {
                    changes.push(change);
                    indexes.push(i);
                }
                Err(error) => {
                    let seq = sequence_of(record).unwrap_or_default().to_owned();
                    failed = Some((i, seq, error));
                    break;
                }
            }
        }
        let applied = processor.process(&changes).await;
        report.applied += applied.applied();
        if let Some(f) = applied.failure {
            failed = Some((indexes[f.index], f.sequence_number, f.error));
        }
        let (processed, failure) = match failed {
            Some((i, seq, error)) => (
                &records[..i],
                Some(ShardFailure {
                    shard_id: shard.to_owned(),
                    sequence_number: seq,
                    error,
                }),
            ),
            None => (records, None),
        };
        let last = processed
            .iter()
            .rev()
            .find_map(sequence_of)
            .map(str::to_owned);
        {
            let state = self.state(shard);
            match &failure {
                Some(f) if !f.sequence_number.is_empty() => {
                    state.position = Position::At(f.sequence_number.clone());
                }
                Some(_) => {
                    if let Some(last) = &last {
                        state.position = Position::After(last.clone());
                    }
                }
                None => {
                    if let Some(last) = &last {
                        state.position = Position::After(last.clone());
                    }
                    match next {
                        Some(next) => state.iterator = Some(next),
                        None => state.done = true,
                    }
                }
            }
        }
        if applied.applied > 0
            && let Some(last) = last
        {
            self.checkpoint(shard, &last).await?;
        }
        Ok(failure)
    }

    fn state(&mut self, shard: &str) -> &mut ShardState {
        self.shards
            .entry(shard.to_owned())
            .or_insert_with(|| ShardState::new(None))
    }

    fn take_iterator(&mut self, shard: &str) -> Option<String> {
        self.state(shard).iterator.take()
    }

    // ---- checkpoints ----

    fn sequence_attr(&self) -> String {
        format!("{}sequence", self.tree.reserved())
    }

    fn ordinal_attr(&self) -> String {
        format!("{}ordinal", self.tree.reserved())
    }

    /// Reads this consumer's checkpoints (one Query, strongly consistent).
    async fn load_checkpoints(&mut self) -> Result<()> {
        let prefix = self.tree.cx.layout().checkpoint_key(&self.name, "");
        let query = Query::new(prefix.hash.clone())
            .with_range(RangeCondition::BeginsWith(prefix.range.clone()))
            .consistent(true);
        let seq_attr = self.sequence_attr();
        let io = self.tree.cx.io();
        let mut start = None;
        loop {
            let page = io.query_page(&query, start).await?;
            for item in &page.items {
                let (Some(range), Some(seq)) = (item.get_s("Child"), item.get_s(&seq_attr)) else {
                    continue;
                };
                let Some(shard) = range.strip_prefix(prefix.range.as_str()) else {
                    continue;
                };
                self.shards
                    .insert(shard.to_owned(), ShardState::new(Some(seq.to_owned())));
            }
            match page.last_key {
                Some(k) => start = Some(k),
                None => break,
            }
        }
        tracing::debug!(consumer = %self.name, shards = self.shards.len(), "checkpoints loaded");
        Ok(())
    }

    /// Writes `sequence` as the shard's checkpoint unless a later one is already there.
    async fn checkpoint(&mut self, shard: &str, sequence: &str) -> Result<()> {
        let Some(ordinal) = ordinal(sequence) else {
            return Err(Error::new(
                ErrorKind::Backend,
                format!("stream record has an invalid sequence number {sequence:?}"),
            ));
        };
        let key = self.tree.cx.layout().checkpoint_key(&self.name, shard);
        let ordinal_attr = self.ordinal_attr();
        let mut row = key.into_item();
        row.insert(self.sequence_attr(), Value::S(sequence.to_owned()));
        row.insert(ordinal_attr.clone(), Value::S(ordinal.clone()));
        let condition = no_later_checkpoint(ordinal_attr, ordinal);
        match self.tree.cx.io().put_item(row, condition).await {
            Ok(()) => {}
            // Another consumer with this name got further: keep its checkpoint.
            Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                tracing::debug!(shard, "a later checkpoint is already stored");
            }
            Err(e) => return Err(e),
        }
        self.state(shard).checkpoint = Some(sequence.to_owned());
        Ok(())
    }

    // ---- the stream's API ----

    /// Every shard of the stream (DescribeStream, every page).
    async fn describe(&self) -> Result<Vec<ShardInfo>> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .client
                .describe_stream()
                .stream_arn(&self.stream_arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .instrument(stream_span!("DescribeStream", self.stream_arn))
                .await
                .map_err(sdk_error)?;
            let Some(desc) = out.stream_description() else {
                break;
            };
            for shard in desc.shards() {
                let Some(id) = shard.shard_id() else { continue };
                shards.push(ShardInfo {
                    id: id.to_owned(),
                    parent: shard.parent_shard_id().map(str::to_owned),
                    ending: shard
                        .sequence_number_range()
                        .and_then(|r| r.ending_sequence_number())
                        .map(str::to_owned),
                });
            }
            match desc.last_evaluated_shard_id() {
                Some(last) => start = Some(last.to_owned()),
                None => break,
            }
        }
        Ok(shards)
    }

    /// A new iterator at the shard's position; `None` if the stream has none to give.
    async fn shard_iterator(&mut self, shard: &str) -> Result<Option<String>> {
        let position = self.state(shard).position.clone();
        let (kind, seq) = match &position {
            Position::TrimHorizon => (ShardIteratorType::TrimHorizon, None),
            Position::After(s) => (ShardIteratorType::AfterSequenceNumber, Some(s.clone())),
            Position::At(s) => (ShardIteratorType::AtSequenceNumber, Some(s.clone())),
        };
        let sent = self
            .client
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(shard)
            .shard_iterator_type(kind)
            .set_sequence_number(seq)
            .send()
            .instrument(stream_span!("GetShardIterator", self.stream_arn))
            .await;
        match sent {
            Ok(out) => Ok(out.shard_iterator().map(str::to_owned)),
            Err(e)
                if e.code() == Some("TrimmedDataAccessException")
                    && position != Position::TrimHorizon =>
            {
                tracing::warn!(
                    consumer = %self.name,
                    shard,
                    "checkpoint is older than the stream's trim horizon; \
                     restarting the shard at TRIM_HORIZON"
                );
                self.state(shard).position = Position::TrimHorizon;
                Box::pin(self.shard_iterator(shard)).await
            }
            Err(e) => Err(sdk_error(e)),
        }
    }

    /// One page of records and the next iterator (`None` at the end of a closed shard).
    async fn get_records(&self, iterator: String) -> Result<(Vec<Record>, Option<String>)> {
        let span = stream_span!("GetRecords", self.stream_arn);
        let out = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(i32::try_from(self.batch_size).unwrap_or(1000))
            .send()
            .instrument(span.clone())
            .await
            .map_err(sdk_error)?;
        span.record("records", out.records().len());
        let next = out.next_shard_iterator().map(str::to_owned);
        Ok((out.records.unwrap_or_default(), next))
    }
}

/// The ARN of the latest stream of `table` (DescribeTable's `LatestStreamArn`).
///
/// # Errors
///
/// [`TableNotFound`](ErrorKind::TableNotFound) if the table does not exist;
/// [`InvalidArgument`](ErrorKind::InvalidArgument) if it has no stream (see
/// [`Propagation::Stream`](crate::denorm::Propagation::Stream) or
/// [`Storage::enable_stream`]); DynamoDB's other errors as the table maps them.
///
/// # Examples
///
/// ```no_run
/// use dynatree::DynamoDbTable;
///
/// # async fn run() -> dynatree::Result<()> {
/// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
/// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "forum");
/// let arn = dynatree::changes::latest_stream_arn(&table).await?;
/// assert!(arn.starts_with("arn:"));
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Cancel safe (one read-only request).
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(all(feature = "streams", feature = "dynamodb"))))]
pub async fn latest_stream_arn(table: &crate::DynamoDbTable) -> Result<String> {
    let out = table
        .client()
        .describe_table()
        .table_name(table.table_name())
        .send()
        .instrument(tracing::debug_span!(
            "DynamoDB.DescribeTable",
            span.kind = "client",
            db.system = "dynamodb",
            db.operation = "DescribeTable",
            db.name = %table.table_name(),
        ))
        .await
        .map_err(sdk_error)?;
    out.table()
        .and_then(|t| t.latest_stream_arn())
        .map(str::to_owned)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                "table has no stream (enable one with Storage::enable_stream)",
            )
        })
}

pub use crate::storage::dynamodb_stream::from_stream_record;
use crate::storage::dynamodb_stream::sdk_error;

/// A sequence number as a fixed-width decimal string, so that string order is numeric order;
/// `None` if it is not a number of at most 40 digits.
fn ordinal(sequence: &str) -> Option<String> {
    if sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = sequence.trim_start_matches('0');
    (digits.len() <= SEQUENCE_DIGITS).then(|| format!("{digits:0>SEQUENCE_DIGITS$}"))
}

fn sequence_of(record: &Record) -> Option<&str> {
    record
        .dynamodb()
        .and_then(|r| r.sequence_number())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::ChangeKind;
    use crate::storage::Key;
    use aws_sdk_dynamodbstreams::primitives::Blob;
    use aws_sdk_dynamodbstreams::types::StreamRecord;
    use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType};

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }

    #[test]
    fn ordinals_sort_as_numbers() {
        let a = ordinal("000000000000000000009").expect("valid");
        let b = ordinal("10").expect("valid");
        assert!(a < b);
        assert_eq!(a.len(), SEQUENCE_DIGITS);
        assert_eq!(ordinal("0").as_deref(), Some("0".repeat(40).as_str()));
        assert_eq!(ordinal(""), None);
        assert_eq!(ordinal("12a"), None);
        assert_eq!(ordinal(&"1".repeat(41)), None);
        assert!(ordinal(&"9".repeat(40)).is_some());
    }

    #[test]
    fn records_become_changes() {
        let record = Record::builder()
            .event_name(OperationType::Modify)
            .dynamodb(
                StreamRecord::builder()
                    .keys("Key", s("\u{a6}Forums\u{a6}f"))
                    .keys("Child", s("\u{a6}"))
                    .old_image("Key", s("\u{a6}Forums\u{a6}f"))
                    .old_image("Child", s("\u{a6}"))
                    .old_image("name", s("Rust"))
                    .new_image("Key", s("\u{a6}Forums\u{a6}f"))
                    .new_image("Child", s("\u{a6}"))
                    .new_image("name", s("Rust!"))
                    .new_image("n", AttributeValue::N("7".into()))
                    .new_image("b", AttributeValue::B(Blob::new(vec![1, 2])))
                    .new_image(
                        "m",
                        AttributeValue::M(HashMap::from([(
                            "l".to_owned(),
                            AttributeValue::L(vec![
                                AttributeValue::Null(true),
                                AttributeValue::Bool(true),
                            ]),
                        )])),
                    )
                    .new_image("ss", AttributeValue::Ss(vec!["a".into()]))
                    .sequence_number("000000000000000000042")
                    .build(),
            )
            .build();
        let change = from_stream_record(&record).expect("a change");
        assert_eq!(change.kind(), ChangeKind::Modify);
        assert_eq!(change.key(), &Key::new("\u{a6}Forums\u{a6}f", "\u{a6}"));
        assert_eq!(change.sequence_number(), "000000000000000000042");
        let old = change.old_image().expect("old image");
        assert_eq!(old.get_s("name"), Some("Rust"));
        let new = change.new_image().expect("new image");
        assert_eq!(new.get_s("name"), Some("Rust!"));
        assert_eq!(new.get("n"), Some(&Value::N("7".into())));
        assert_eq!(new.get("b"), Some(&Value::B(vec![1, 2])));
        assert_eq!(
            new.get("m"),
            Some(&Value::M(
                [(
                    "l".to_owned(),
                    Value::L(vec![Value::Null, Value::Bool(true)])
                )]
                .into_iter()
                .collect()
            ))
        );
        assert_eq!(new.get("ss"), Some(&Value::Ss(vec!["a".into()])));
    }

    #[test]
    fn removals_have_no_new_image_and_bad_records_are_refused() {
        let body = StreamRecord::builder()
            .keys("Key", s("h"))
            .keys("Child", s("r"))
            .old_image("Key", s("h"))
            .old_image("Child", s("r"))
            .sequence_number("5")
            .build();
        let removed = Record::builder()
            .event_name(OperationType::Remove)
            .dynamodb(body.clone())
            .build();
        let change = from_stream_record(&removed).expect("a change");
        assert_eq!(change.kind(), ChangeKind::Remove);
        assert!(change.new_image().is_none());
        assert!(change.old_image().is_some());

        let unknown = Record::builder().dynamodb(body).build();
        assert_eq!(
            from_stream_record(&unknown).unwrap_err().kind(),
            ErrorKind::Serialization
        );
        let no_keys = Record::builder()
            .event_name(OperationType::Insert)
            .dynamodb(StreamRecord::builder().sequence_number("6").build())
            .build();
        assert_eq!(
            from_stream_record(&no_keys).unwrap_err().kind(),
            ErrorKind::Serialization
        );
    }
}
