//! The integrity check ([`Tree::check`]): a parallel Scan, the rows sorted into the layout's
//! kinds, the suspects confirmed by consistent reads. Public types in [`crate::check`].
//!
#![doc = include_str!("check.md")]

use crate::tree::{Ctx, denorm, guard, intent, removal};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::part::CheckPart;
use super::{Class, Phase, Progress, ProgressFn, Report, Violation};
use crate::error::{Error, ErrorKind, Result};
use crate::expiry::now_secs;
use crate::item::{Item, Value};
use crate::path::Path;
use crate::storage::{Key, ScanSegment, Storage};

use crate::tree::clock::now_ms;
use crate::tree::denorm::matches_template;
use crate::tree::{Operation, Tree};

/// A check of the whole table, configured, then [`run`](Check::run). Made by
/// [`Tree::check`].
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
/// let report = tree
///     .check()
///     .segments(4)
///     .read_units_per_second(100.0)
///     .on_progress(|p| eprintln!("{} rows", p.done))
///     .run()
///     .await?;
/// assert!(report.is_healthy());
/// # Ok(()) }
/// ```
#[must_use = "a check does nothing until `run` is awaited"]
pub struct Check<S> {
    pub(super) tree: Tree<S>,
    segments: u32,
    rate: Option<f64>,
    page_size: Option<u32>,
    grace: Duration,
    progress: Option<ProgressFn>,
    /// Only these segments, for [`run_part`](Check::run_part).
    part: Option<std::ops::Range<u32>>,
    /// A part to go on with, for [`run_part`](Check::run_part).
    resume: Option<CheckPart>,
    /// When [`run_part`](Check::run_part) stops sending pages.
    time_limit: Option<Duration>,
    /// Only this bucket, for [`merge`](Check::merge).
    bucket: Option<(u32, u32)>,
    /// The components of a path that choose its bucket.
    bucket_depth: usize,
}

impl<S> std::fmt::Debug for Check<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("segments", &self.segments)
            .field("read_units_per_second", &self.rate)
            .field("page_size", &self.page_size)
            .field("grace", &self.grace)
            .field("part", &self.part)
            .field("time_limit", &self.time_limit)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl<S: Storage + 'static> Check<S> {
    /// Reads the table in `n` segments at once (a parallel Scan; default 1). More segments
    /// finish sooner on a large table and consume the same read units.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert!(tree.check().segments(8).run().await?.is_healthy());
    /// assert!(tree.check().segments(0).run().await.is_err()); // InvalidArgument
    /// # Ok(()) }
    /// ```
    pub fn segments(mut self, n: u32) -> Self {
        self.segments = n;
        self
    }

    /// Consumes at most about `units` read capacity units per second on average (pages are
    /// spaced out; default: as fast as the table allows), so a check of a provisioned table
    /// leaves capacity to the application.
    ///
    /// # Examples
    ///
    /// See [`Check`].
    pub fn read_units_per_second(mut self, units: f64) -> Self {
        self.rate = Some(units);
        self
    }

    /// At most `n` items per Scan page (default: DynamoDB's 1 MB pages).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["a", "b"], &V { v: 1 }).await?;
    /// let report = tree.check().page_size(1).run().await?;
    /// assert_eq!(report.pages(), 4); // three rows, one page each, and the empty last page
    /// # Ok(()) }
    /// ```
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = Some(n);
        self
    }

    /// How long a listing row that names nothing, or a denormalized copy that differs from
    /// its source, must stay so to be reported (default 1 s; zero reports them at once). Both
    /// are also moments of running writes (a batch's new name written before its objects, a
    /// parent left for an instant before its remover marks it, a copy before its
    /// propagation), which end within milliseconds; what a crashed writer left stays and is
    /// reported. Only checks that find such suspects wait.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.put_item(Key::new("¦", "left").into_item(), Condition::Always).await?;
    /// let report = tree.check().grace(Duration::ZERO).run().await?;
    /// assert_eq!(report.violations().len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Calls `f` after each Scan page and each confirmation (see [`Progress`]).
    ///
    /// # Examples
    ///
    /// See [`Progress`].
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Scans only the segments `range` of the [`segments`](Self::segments) of the whole
    /// check, for [`run_part`](Self::run_part): one worker's share of a check split across
    /// machines. Every segment of the table is then in exactly one part, and
    /// [`merge`](Self::merge) makes the report.
    ///
    /// # Examples
    ///
    /// See [`CheckPart`].
    pub fn part(mut self, range: std::ops::Range<u32>) -> Self {
        self.part = Some(range);
        self
    }

    /// Goes on with `part`, a [`CheckPart`] that [`run_part`](Self::run_part) returned
    /// unfinished (its time limit passed, or its run failed after saving): its segments and
    /// total are the part's, each unfinished segment starts where it stopped, and what was
    /// found so far is kept.
    ///
    /// # Examples
    ///
    /// See [`CheckPart`].
    pub fn resume(mut self, part: CheckPart) -> Self {
        self.resume = Some(part);
        self
    }

    /// [`run_part`](Self::run_part) sends no Scan page after `limit` has passed since it
    /// started, and returns the part unfinished (say, within a Lambda function's 15 minutes):
    /// save it and [`resume`](Self::resume) it in the next invocation.
    ///
    /// # Examples
    ///
    /// See [`CheckPart`].
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// [`merge`](Self::merge) judges only bucket `i` of `n` (from 0): the rows whose path's
    /// first component falls in part `i` ([`transfer::part_of`](crate::transfer::part_of),
    /// the split of [`Repair::part`](crate::check::Repair::part) and of exports; or its first
    /// [`bucket_depth`](Self::bucket_depth) components), and in bucket 0 the rows without a
    /// path (operations and their lane rows). Each part's facts
    /// outside the bucket are dropped as the part is read, so `n` mergers, each holding
    /// about `1/n` of the facts, share a check too large for one machine's memory; the
    /// reports' violations are those of one merge, each in exactly one bucket. Every row is
    /// judged by rows of its own bucket, but a link whose chain leaves the bucket: that one
    /// is judged by reading its chain (consistent GetItems), as confirmations do. The
    /// report's rows, read units, pages and operations in progress are the whole check's, in
    /// every bucket (do not add them up).
    ///
    /// Feed the parts lazily (an iterator that reads each file as it goes) and a merger
    /// holds one part and its bucket's facts at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// for name in ["a", "b", "c", "d"] {
    ///     // Listing rows naming nothing.
    ///     table.put_item(Key::new("¦", name).into_item(), Condition::Always).await?;
    /// }
    /// let parts = vec![tree.check().segments(2).part(0..2).run_part().await?];
    /// let mut found = 0;
    /// for i in 0..3 {
    ///     let report = tree.check().grace(std::time::Duration::ZERO).bucket(i, 3);
    ///     found += report.merge(parts.clone()).await?.violations().len();
    /// }
    /// assert_eq!(found, 4); // each violation in exactly one bucket
    /// # Ok(()) }
    /// ```
    pub fn bucket(mut self, i: u32, n: u32) -> Self {
        self.bucket = Some((i, n));
        self
    }

    /// How many leading components of a path choose its [`bucket`](Self::bucket) (default
    /// 1: the top-level name, as [`Repair::part`](crate::check::Repair::part) and exports
    /// split). A table whose rows are all under a few top-level names (`Accounts/{id}/…`)
    /// splits evenly only deeper: with 2, by account. Paths shorter than the depth are the
    /// top of the tree: every merger keeps their facts (the rows below are judged by them),
    /// and bucket 0 judges them. With a depth above 1, repair each bucket's report whole
    /// (not with `Repair::part`, which splits by the top-level name).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// for a in 0..4 {
    ///     tree.put(["Accounts", &a.to_string(), "Links", "x"], &V { v: 1 }).await?;
    /// }
    /// let parts = vec![tree.check().run_part().await?];
    /// for i in 0..2 {
    ///     let bucket = tree.check().bucket(i, 2).bucket_depth(2);
    ///     assert!(bucket.merge(parts.clone()).await?.is_healthy());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn bucket_depth(mut self, components: usize) -> Self {
        self.bucket_depth = components;
        self
    }

    /// Scans this check's share of the table (all segments, or [`part`](Self::part)'s, or
    /// the [resumed](Self::resume) part's) and returns what it found, to be merged with the
    /// other parts by [`merge`](Self::merge). Nothing is confirmed or reported yet: a row
    /// in this part may be judged by a row in another.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`]: the options [`run`](Self::run) refuses, a range that is
    /// empty or outside the segments, a part to resume that another tree's reserved character
    /// wrote. Backend errors: the part so far is lost (run it again, or save parts with a
    /// [`time_limit`](Self::time_limit)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn run_part(self) -> Result<CheckPart> {
        crate::retry::call(self.tree.cx.inner.config.retry, async move {
            let span = tracing::info_span!("dynatree.check_part", segments = self.segments);
            tracing::Instrument::instrument(self.run_part_inner(), span).await
        })
        .await
    }

    async fn run_part_inner(mut self) -> Result<CheckPart> {
        self.validate()?;
        if self.bucket.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a bucket is of a merge: run_part scans every row of its segments",
            ));
        }
        let deadline = self.time_limit.map(|l| tokio::time::Instant::now() + l);
        let mut state = match self.resume.take() {
            Some(part) => part.into_state(&self.tree, None)?,
            None => {
                let total = self.segments;
                let range = self.part.clone().unwrap_or(0..total);
                if range.is_empty() || range.end > total {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "segments {}..{} are not a part of {total} segments",
                            range.start, range.end
                        ),
                    ));
                }
                ScanState::new(&self.tree, total, range)?
            }
        };
        self.scan(&mut state, deadline).await?;
        Ok(CheckPart::from_state(&self.tree, state))
    }

    /// Makes the report of a check split into `parts` ([`run_part`](Self::run_part)):
    /// checks that they are finished and cover every segment of one Scan once, joins what
    /// they found, and confirms the suspects with consistent reads, as [`run`](Self::run)
    /// does. The report's rows, read units and pages are the parts' sums; its elapsed time
    /// is the longest part's scanning plus the merge. The parts are taken from the iterator
    /// one at a time, each dropped once joined; with a [`bucket`](Self::bucket), only that
    /// bucket's share of each is kept.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`]: no parts, parts of different Scans (totals) or
    /// reserved characters, an unfinished part, a segment in no part or in two, a bucket
    /// not below the number of buckets. Backend errors of the confirmation.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    ///
    /// See [`CheckPart`].
    pub async fn merge(self, parts: impl IntoIterator<Item = CheckPart>) -> Result<Report> {
        let started = Instant::now();
        // The parts are joined before anything is sent, one at a time as the iterator gives
        // them (each dropped once its bucket's facts are kept).
        let merged = self.validate().and_then(|()| {
            let bucket = self
                .bucket
                .map(|(i, n)| super::Bucket::new(i, n, self.bucket_depth))
                .transpose()?;
            super::part::merge(&self.tree, parts, bucket)
        });
        crate::retry::call(self.tree.cx.inner.config.retry, async move {
            let span = tracing::info_span!("dynatree.check_merge", bucket = ?self.bucket);
            tracing::Instrument::instrument(self.merge_inner(merged?, started), span).await
        })
        .await
    }

    async fn merge_inner(self, merged: super::part::Merged, started: Instant) -> Result<Report> {
        let mut report = self
            .conclude(
                merged.rows,
                merged.read_units,
                merged.pages,
                merged.total,
                started,
            )
            .await?;
        report.elapsed += merged.scan_time;
        Ok(report)
    }

    /// Runs the check.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`]: no segments, more than DynamoDB allows
    /// ([`ScanSegment::MAX_TOTAL`]), a read rate that is not positive, a page size of 0, a
    /// tree that is a [scope](Tree::scope) (a check reads the whole table), or a
    /// [`part`](Self::part), [`resume`](Self::resume) or [`time_limit`](Self::time_limit)
    /// (those are for [`run_part`](Self::run_part)). Backend errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn run(self) -> Result<Report> {
        crate::retry::call(self.tree.cx.inner.config.retry, async move {
            let span = tracing::info_span!("dynatree.check", segments = self.segments);
            tracing::Instrument::instrument(self.run_inner(), span).await
        })
        .await
    }

    async fn run_inner(self) -> Result<Report> {
        let started = Instant::now();
        self.validate()?;
        if self.part.is_some() || self.resume.is_some() || self.time_limit.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a check of some segments, or with a time limit, is run by run_part and its parts merged",
            ));
        }
        if self.bucket.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a bucket is of a merge of check parts: run_part, then merge each bucket",
            ));
        }
        let total = self.segments.max(1);
        let mut state = ScanState::new(&self.tree, total, 0..total)?;
        self.scan(&mut state, None).await?;
        let pages = state.pages;
        self.conclude(state.rows, state.read_units, pages, total, started)
            .await
    }

    /// The checks of the options that every run makes before sending anything.
    pub(super) fn validate(&self) -> Result<()> {
        if self.tree.is_scoped() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "check reads the whole table: call it on the tree, not on a scope",
            ));
        }
        if self.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the read rate must be a positive number of units per second",
            ));
        }
        if self.page_size == Some(0) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the page size must be at least 1",
            ));
        }
        // DynamoDB's bounds on the number of segments.
        ScanSegment::new(0, self.segments)?;
        Ok(())
    }

    /// Scans the segments `state` has left, in parallel, from where each stopped, until all
    /// are done or `deadline` passes (a segment then stops before its next page).
    pub(super) async fn scan(
        &self,
        state: &mut ScanState,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<()> {
        let tree = &self.tree;
        let started = Instant::now();
        let total = state.total;
        let pending: Vec<(u32, Option<Key>)> =
            state.pending.iter().map(|(i, k)| (*i, k.clone())).collect();
        let in_part = state.range.len() as u32;
        let shared = Mutex::new(&mut *state);
        let run_units = Mutex::new(0.0f64);
        let this = &self;
        let scans = pending.into_iter().map(|(index, cursor)| {
            let (shared, run_units) = (&shared, &run_units);
            async move {
                let segment = ScanSegment::new(index, total)?;
                let mut start = cursor;
                loop {
                    if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                        return Ok::<(), Error>(());
                    }
                    let page = tree
                        .cx
                        .io()
                        .scan_segment_page(segment, this.page_size, start)
                        .await?;
                    // A page read: a step of the check.
                    crate::retry::progressed();
                    let bytes: usize = page.items.iter().map(Item::size).sum();
                    let units = bytes.div_ceil(4096).max(1) as f64 / 2.0;
                    let n = page.items.len() as u64;
                    let last = page.last_key.is_none();
                    let wait = {
                        let mut st = shared.lock().map_err(poisoned)?;
                        for item in page.items {
                            st.rows.add(tree, item);
                        }
                        st.rows.count += n;
                        st.read_units += units;
                        st.pages += 1;
                        if last {
                            st.pending.remove(&index);
                        } else {
                            st.pending.insert(index, page.last_key.clone());
                        }
                        this.report(Progress {
                            phase: Phase::Scan,
                            done: st.rows.count,
                            total: None,
                            read_units: st.read_units,
                            segments_done: in_part - st.pending.len() as u32,
                            segments: in_part,
                        });
                        let mut spent = run_units.lock().map_err(poisoned)?;
                        *spent += units;
                        // Spaced out so that this run's average stays under the rate.
                        this.rate.map(|r| {
                            let due = started + Duration::from_secs_f64(*spent / r);
                            due.saturating_duration_since(Instant::now())
                        })
                    };
                    if let Some(wait) = wait.filter(|w| !w.is_zero()) {
                        crate::retry::sleep_for(wait).await;
                    }
                    if last {
                        return Ok(());
                    }
                    start = page.last_key;
                }
            }
        });
        let result = futures::future::try_join_all(scans).await;
        state.scan_time += started.elapsed();
        result.map(drop)
    }

    /// Confirms the suspects of what the Scan found and makes the report.
    pub(super) async fn conclude(
        &self,
        rows: Rows,
        read_units: f64,
        pages: u64,
        segments: u32,
        started: Instant,
    ) -> Result<Report> {
        let tree = &self.tree;
        let in_progress = rows.intents.values().filter(|i| !i.abandoned).count();
        let suspects = rows.suspects(tree);
        let ops: Vec<(Operation, Path, Path)> =
            rows.intents.values().map(|i| i.op.clone()).collect();
        let segments_done = segments;
        let (mut violations, confirm_units) = confirm(
            &tree.cx,
            suspects,
            ops,
            self.grace,
            &|done, total, units| {
                self.report(Progress {
                    phase: Phase::Confirm,
                    done,
                    total: Some(total),
                    read_units: read_units + units,
                    segments_done,
                    segments,
                });
            },
        )
        .await?;
        violations.sort_by(|a, b| {
            (a.class, &a.key.hash, &a.key.range).cmp(&(b.class, &b.key.hash, &b.key.range))
        });
        Ok(Report {
            violations,
            stale_entries: rows.stale_entries(tree),
            rows: rows.count,
            read_units,
            confirm_read_units: confirm_units,
            pages,
            segments,
            in_progress,
            elapsed: started.elapsed(),
        })
    }

    fn report(&self, p: Progress) {
        if let Some(f) = &self.progress {
            f(&p);
        }
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::new(ErrorKind::Backend, "a check task panicked")
}

/// Where a Scan of some segments stands: what it found, what it cost, and where each
/// unfinished segment goes on (what a [`CheckPart`] carries between runs).
pub(super) struct ScanState {
    pub(super) rows: Rows,
    /// The Scan's total segments.
    pub(super) total: u32,
    /// The segments this state covers.
    pub(super) range: std::ops::Range<u32>,
    /// The segments not finished, each with the key its next page starts after.
    pub(super) pending: std::collections::BTreeMap<u32, Option<Key>>,
    pub(super) read_units: f64,
    pub(super) pages: u64,
    /// Time spent scanning, over every run.
    pub(super) scan_time: Duration,
}

impl ScanState {
    pub(super) fn new<S: Storage + 'static>(
        tree: &Tree<S>,
        total: u32,
        range: std::ops::Range<u32>,
    ) -> Result<Self> {
        Ok(Self {
            rows: Rows::new(tree),
            total,
            pending: range.clone().map(|i| (i, None)).collect(),
            range,
            read_units: 0.0,
            pages: 0,
            scan_time: Duration::ZERO,
        })
    }
}

/// What the Scan found, by kind.
pub(super) struct Rows {
    pub(super) count: u64,
    now_secs: u64,
    now_ms: u64,
    /// Listing rows by path: (removal mark, move lock).
    pub(super) listings: HashMap<Path, (Option<String>, Option<String>)>,
    /// Paths that have at least one listing row below them.
    pub(super) parents: HashSet<Path>,
    /// Object rows by path.
    pub(super) objects: HashMap<Path, ObjectRow>,
    /// Intent records by id.
    pub(super) intents: HashMap<String, IntentRow>,
    /// Rows that are not rows of the layout.
    pub(super) unparsable: Vec<Violation>,
    /// Bookkeeping attributes of a type the runtime never writes.
    pub(super) malformed: Vec<Violation>,
    /// Full rows of the objects that denormalized copies are compared between.
    pub(super) denorm_rows: HashMap<Path, Item>,
    denorm_templates: Vec<&'static str>,
    /// The link index's entries: (link, target).
    pub(super) link_entries: HashSet<(Path, Path)>,
    /// The shard guards of sharded directories: (directory, shard).
    pub(super) guards: HashSet<(Path, u32)>,
    /// The range keys of intents' lane rows.
    pub(super) lanes: HashSet<String>,
    /// Only the rows of this bucket were kept (see [`Check::bucket`]).
    pub(super) bucket: Option<super::Bucket>,
}

pub(super) struct ObjectRow {
    pub(super) link: Option<Path>,
    pub(super) expired: bool,
    pub(super) missing_index: bool,
    /// The operation holding it (a move or copy), if any.
    pub(super) held: Option<String>,
}

/// An object row read as a value of a registered type with secondary indexes, through the
/// scope whose index values it should hold (see [`Tree::judged_readings`]).
struct Reading {
    /// The index attributes a typed write through that scope gives it.
    attrs: Vec<(String, Value)>,
    /// Whether the row's stored index values name the type (through any scope).
    named: bool,
}

pub(super) struct IntentRow {
    pub(super) abandoned: bool,
    pub(super) detail: String,
    /// The operation, its source and destination.
    pub(super) op: (Operation, Path, Path),
}

impl Rows {
    pub(super) fn new<S: Storage + 'static>(tree: &Tree<S>) -> Self {
        let mut denorm_templates = Vec::new();
        for (target, copies) in tree.cx.inner.targets.snapshot() {
            denorm_templates.push(target);
            denorm_templates.extend(copies.iter().map(|d| d.source_template()));
        }
        Self {
            count: 0,
            now_secs: now_secs(),
            now_ms: now_ms(),
            listings: HashMap::new(),
            parents: HashSet::new(),
            objects: HashMap::new(),
            intents: HashMap::new(),
            unparsable: Vec::new(),
            malformed: Vec::new(),
            denorm_rows: HashMap::new(),
            denorm_templates,
            link_entries: HashSet::new(),
            guards: HashSet::new(),
            lanes: HashSet::new(),
            bucket: None,
        }
    }

    fn add<S: Storage + 'static>(&mut self, tree: &Tree<S>, item: Item) {
        let Some(key) = Key::from_item(&item) else {
            return;
        };
        self.malformed
            .extend(malformed_attrs(&tree.cx.inner.layout, &key, &item));
        match classify(&tree.cx.inner.layout, &key) {
            Ok(Kind::Listing(path)) => {
                let layout = &tree.cx.inner.layout;
                if let Some(parent) = path.parent() {
                    self.parents.insert(parent);
                }
                let mark = item.get_s(layout.deleting_attr()).map(str::to_owned);
                let lock = item.get_s(layout.moving_attr()).map(str::to_owned);
                self.listings.insert(path, (mark, lock));
            }
            // A fence (fenced puts): bookkeeping, no object; the table's time-to-live deletes
            // it, and a guarded write replaces it.
            Ok(Kind::Object(_)) if tree.cx.inner.layout.is_fence(&item) => {}
            Ok(Kind::Object(path)) => {
                let layout = &tree.cx.inner.layout;
                let link = match item.get(layout.link_attr()) {
                    Some(Value::S(t)) => match layout.decode_target(t) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            self.unparsable.push(violation(
                                Class::Unparsable,
                                Some(path),
                                key,
                                format!("a link whose target does not parse: {e}"),
                            ));
                            return;
                        }
                    },
                    // Not a string: the row is no link, and no object of any type either
                    // (reads of it, and lists of values of its directory, fail).
                    Some(other) => {
                        self.unparsable.push(violation(
                            Class::Unparsable,
                            Some(path),
                            key,
                            format!(
                                "a link whose target `{}` is {}, not a string",
                                layout.link_attr(),
                                type_name(other)
                            ),
                        ));
                        return;
                    }
                    None => None,
                };
                let expired = layout.is_expired(&item, self.now_secs);
                let missing_index = lacks_index(&tree.cx, &path, &item);
                let held = item.get_s(&layout.held_attr()).map(str::to_owned);
                if self
                    .denorm_templates
                    .iter()
                    .any(|t| matches_template(t, &path))
                {
                    self.denorm_rows.insert(path.clone(), item);
                }
                self.objects.insert(
                    path,
                    ObjectRow {
                        link,
                        expired,
                        missing_index,
                        held,
                    },
                );
            }
            Ok(Kind::Intent) => {
                let id = key.range.clone();
                match intent::decode_intent(&tree.cx, &item) {
                    Ok(i) => {
                        let detail = format!(
                            "{} of {} to {} stopped in phase {:?}",
                            i.op,
                            i.from.escaped(),
                            i.to.escaped(),
                            i.phase
                        );
                        self.intents.insert(
                            id,
                            IntentRow {
                                abandoned: i.abandoned(self.now_ms),
                                detail,
                                op: (i.op, i.from.clone(), i.to.clone()),
                            },
                        );
                    }
                    Err(e) => self.unparsable.push(violation(
                        Class::Unparsable,
                        None,
                        key,
                        format!("an intent record that does not parse: {e}"),
                    )),
                }
            }
            Ok(Kind::Bookkeeping) => {
                let layout = &tree.cx.inner.layout;
                if let Some(entry) = layout.decode_link_entry(&key) {
                    self.link_entries.insert(entry);
                } else if let Some(guard) = layout.guard_dir(&key) {
                    self.guards.insert(guard);
                } else if layout.is_intent_lane(&key) {
                    self.lanes.insert(key.range);
                }
            }
            Ok(Kind::Misplaced(path, why)) => {
                self.unparsable
                    .push(violation(Class::Misplaced, Some(path), key, why));
            }
            Err(why) => self
                .unparsable
                .push(violation(Class::Unparsable, None, key, why)),
        }
    }

    /// The rows of `bucket` only (see [`Check::bucket`]): what [`CheckPart`]s read into it
    /// keep, and what its suspects are judged on.
    pub(super) fn in_bucket(mut self, bucket: Option<super::Bucket>) -> Self {
        self.bucket = bucket;
        self
    }

    /// Whether `path`'s rows are among those kept (every path, but in a bucket).
    fn kept(&self, path: &Path) -> bool {
        self.bucket.is_none_or(|b| b.keeps(path))
    }

    /// Whether `path`'s rows (or those without a path) are judged here.
    fn judged(&self, path: Option<&Path>) -> bool {
        self.bucket.is_none_or(|b| b.judges(path))
    }

    /// The link index's entries whose link row is no link to their target, in order.
    fn stale_entries<S: Storage + 'static>(&self, tree: &Tree<S>) -> Vec<(Path, Path)> {
        if tree.cx.link_depth().is_none() {
            return Vec::new();
        }
        let mut stale: Vec<(Path, Path)> = self
            .link_entries
            .iter()
            .filter(|(l, t)| {
                self.judged(Some(l)) && self.objects.get(l).and_then(|o| o.link.as_ref()) != Some(t)
            })
            .cloned()
            .collect();
        stale.sort();
        stale
    }

    /// Every violation the Scan suggests, before confirmation.
    fn suspects<S: Storage + 'static>(&self, tree: &Tree<S>) -> Vec<Violation> {
        let layout = &tree.cx.inner.layout;
        let mut out = self.unparsable.clone();
        out.extend(self.malformed.iter().cloned());
        for (path, o) in self.objects.iter().filter(|(p, _)| self.judged(Some(p))) {
            let key = layout.object_key(path);
            if o.expired {
                out.push(violation(
                    Class::Expired,
                    Some(path.clone()),
                    key,
                    "an object past its expiry, not deleted yet".into(),
                ));
                continue;
            }
            if !self.listings.contains_key(path) {
                out.push(violation(
                    Class::Unreachable,
                    Some(path.clone()),
                    key.clone(),
                    "an object row without its listing row".into(),
                ));
            }
            if let Some(id) = o.held.as_deref()
                && !self.intents.contains_key(id)
            {
                let mut v = violation(
                    Class::LockWithoutIntent,
                    Some(path.clone()),
                    key.clone(),
                    format!("an object held by operation {id}, which is not recorded"),
                );
                v.token = Some(id.to_owned());
                out.push(v);
            }
            if o.missing_index {
                out.push(violation(
                    Class::MissingIndex,
                    Some(path.clone()),
                    key.clone(),
                    "an object without the index attributes the tree keeps".into(),
                ));
            }
            if let Some(target) = &o.link
                && tree.cx.link_depth().is_some()
                && !self.link_entries.contains(&(path.clone(), target.clone()))
            {
                // The token names the target: the entry the link lacks.
                let mut v = violation(
                    Class::MissingIndex,
                    Some(path.clone()),
                    key.clone(),
                    format!("a link without its entry in the link index (to {target})"),
                );
                v.token = Some(layout.encode_target(target));
                out.push(v);
            }
            if let Some(target) = &o.link
                && let Some(v) = self.link_problem(tree, path, target)
            {
                out.push(v);
            }
        }
        for (path, (mark, lock)) in self.listings.iter().filter(|(p, _)| self.judged(Some(p))) {
            let key = layout.listing_key(path);
            if let Some(parent) = path.parent().filter(|p| !p.is_root())
                && !self.listings.contains_key(&parent)
            {
                out.push(violation(
                    Class::BrokenClosure,
                    Some(path.clone()),
                    key.clone(),
                    format!(
                        "a listing row whose parent {} has no listing row",
                        parent.escaped()
                    ),
                ));
            }
            let live_mark = mark.as_deref().is_some_and(|m| !guard::mark_expired(m));
            if let Some(m) = mark.as_deref().filter(|m| guard::mark_expired(m)) {
                let mut v = violation(
                    Class::ExpiredMark,
                    Some(path.clone()),
                    key.clone(),
                    "a removal mark whose lease ran out".into(),
                );
                v.token = Some(m.to_owned());
                out.push(v);
            }
            if let Some(l) = lock.as_deref()
                && !self.intents.contains_key(l)
            {
                let mut v = violation(
                    Class::LockWithoutIntent,
                    Some(path.clone()),
                    key.clone(),
                    format!("a move lock of operation {l}, which is not recorded"),
                );
                v.token = Some(l.to_owned());
                out.push(v);
            }
            if lock.is_none()
                && !live_mark
                && !self.objects.contains_key(path)
                && !self.parents.contains(path)
            {
                out.push(violation(
                    Class::EmptyListing,
                    Some(path.clone()),
                    key,
                    "a listing row that names neither an object nor children".into(),
                ));
            }
        }
        for (dir, k) in self
            .guards
            .iter()
            .filter(|(d, _)| self.judged(Some(d)) && !self.listings.contains_key(d))
        {
            // The runtime deletes a directory's listing row only after its guards: another
            // program deleted it (the Go library).
            out.push(violation(
                Class::Misplaced,
                Some(dir.clone()),
                layout.shard_guard_key(dir.components(), *k),
                format!(
                    "the guard of shard {k} of a directory whose listing row is missing: a new child through it would be listed under no parent"
                ),
            ));
        }
        for range in &self.lanes {
            // A lane row outlives its record only if another program deleted the record: the
            // runtime writes and deletes them in one transaction.
            let Some((id, _)) = range.rsplit_once(layout.reserved()) else {
                continue;
            };
            if !self.intents.contains_key(id) {
                let mut v = violation(
                    Class::LockWithoutIntent,
                    None,
                    Key::new(layout.intents_hash(), range.clone()),
                    format!("a lane row of operation {id}, which is not recorded"),
                );
                v.token = Some(id.to_owned());
                out.push(v);
            }
        }
        // Operations have no path: bucket 0's.
        let pathless = self.judged(None);
        for (id, i) in self.intents.iter().filter(|_| pathless) {
            if i.abandoned {
                let mut v = violation(
                    Class::AbandonedIntent,
                    None,
                    layout.intent_key(id),
                    format!("{} (its owner's lease ran out)", i.detail),
                );
                v.token = Some(id.clone());
                out.push(v);
            }
        }
        for (path, row) in self
            .denorm_rows
            .iter()
            .filter(|(p, _)| self.judged(Some(p)))
        {
            out.extend(stale_copies(&tree.cx, path, row, |p| {
                self.denorm_rows.get(p)
            }));
        }
        out
    }

    /// A dangling link or a cycle, from the Scan's rows.
    fn link_problem<S: Storage + 'static>(
        &self,
        tree: &Tree<S>,
        path: &Path,
        target: &Path,
    ) -> Option<Violation> {
        let hops = tree.cx.inner.config.max_link_hops;
        let mut seen = HashSet::from([path.clone()]);
        let mut current = target.clone();
        for _ in 0..hops {
            match self.objects.get(&current) {
                Some(o) if o.expired => {
                    return Some(link_violation(&tree.cx, path, Class::DanglingLink, target));
                }
                Some(ObjectRow {
                    link: Some(next), ..
                }) => {
                    if !seen.insert(current.clone()) {
                        return Some(link_violation(&tree.cx, path, Class::LinkCycle, target));
                    }
                    current = next.clone();
                }
                Some(_) => return None,
                // In another bucket: the confirmation reads the chain and says what it is.
                None if !self.kept(&current) => {
                    let mut v = link_violation(&tree.cx, path, Class::DanglingLink, target);
                    v.detail = format!(
                        "a link to {} whose chain leaves this bucket",
                        target.escaped()
                    );
                    return Some(v);
                }
                None => return Some(link_violation(&tree.cx, path, Class::DanglingLink, target)),
            }
        }
        // More hops than the tree follows: reads of it fail as a loop does.
        Some(link_violation(&tree.cx, path, Class::LinkCycle, target))
    }
}

fn link_violation<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    class: Class,
    target: &Path,
) -> Violation {
    let detail = match class {
        Class::LinkCycle => format!(
            "a link to {} that leads back to a link or goes on for more than {} hops",
            target.escaped(),
            cx.inner.config.max_link_hops
        ),
        _ => format!("a link to {}, where nothing is", target.escaped()),
    };
    violation(
        class,
        Some(path.clone()),
        cx.inner.layout.object_key(path),
        detail,
    )
}

pub(super) fn violation(class: Class, path: Option<Path>, key: Key, detail: String) -> Violation {
    Violation {
        class,
        path,
        key,
        detail,
        token: None,
    }
}

/// The attribute that holds the row with key `key` for an operation: a listing row's lock, an
/// object row's hold.
pub(super) fn lock_attr(layout: &crate::layout::Layout, key: &Key) -> String {
    if key.range == layout.reserved().to_string() {
        layout.held_attr()
    } else {
        layout.moving_attr().to_owned()
    }
}

/// `p` moved from under `from` to under `to`, if it lies under `from`.
fn moved_to(p: &Path, from: &Path, to: &Path) -> Option<Path> {
    let rest = p.components().get(from.len()..)?;
    if !p.starts_with(from) {
        return None;
    }
    Path::new(to.components().iter().chain(rest).cloned()).ok()
}

/// How many leading components of `path` lie above a match of `template` (a type's path
/// template) with its last components: the root of the scope through which a value of that
/// type is stored at `path` (0: the whole tree). `None` if the template matches no suffix.
fn template_root(template: &str, path: &Path) -> Option<usize> {
    let parts = template.split('/').count();
    let root = path.len().checked_sub(parts)?;
    let rest = Path::new(path.components()[root..].iter().cloned()).ok()?;
    matches_template(template, &rest).then_some(root)
}

/// Whether the row `row` (key `key`) still holds a bookkeeping attribute `attr` of the wrong
/// type (see [`bookkeeping_type`]).
pub(super) fn still_malformed(
    layout: &crate::layout::Layout,
    key: &Key,
    attr: &str,
    row: &Item,
) -> bool {
    if key.range == layout.reserved().to_string() && layout.is_fence(row) {
        return false;
    }
    match (bookkeeping_type(layout, key, attr), row.get(attr)) {
        (Some(t), Some(v)) => !well_typed(t, v),
        _ => false,
    }
}

/// The scalar type the runtime writes a bookkeeping attribute with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expected {
    S,
    N,
}

/// The type dynatree writes the bookkeeping attribute `attr` of the row with key `key` with,
/// for the attributes whose type the runtime relies on: conditions compare them with values of
/// that type, so one of another type fails every such condition for good. A listing row's
/// removal mark and lock (strings); an object row's hold (a string) and versions (numbers:
/// `SC sv`, `SC cv.<field>`, `SC dv.<field>`); a tombstone's version (a number). Fence rows are
/// left out (every reader and writer treats any row with `SC fence` as a fence, whatever it
/// holds), and so are attributes whose type no condition depends on.
pub(super) fn bookkeeping_type(
    layout: &crate::layout::Layout,
    key: &Key,
    attr: &str,
) -> Option<Expected> {
    let sc = layout.reserved();
    let rest = attr.strip_prefix(sc)?;
    if key.hash == layout.intents_hash()
        || key.hash == format!("{sc}{sc}checkpoints")
        || *key == crate::storage::TableSettings::key(sc)
    {
        return None;
    }
    let object = key.range == sc.to_string();
    let tombstone = key.range == format!("{sc}sv");
    let listing = !object
        && !tombstone
        && (key.hash.ends_with(sc) || layout.split_shard_hash(&key.hash).is_some());
    if listing {
        return (attr == layout.deleting_attr() || attr == layout.moving_attr())
            .then_some(Expected::S);
    }
    if tombstone {
        return (rest == "sv").then_some(Expected::N);
    }
    if object {
        if attr == layout.held_attr() {
            return Some(Expected::S);
        }
        if rest == "sv" || rest.starts_with("cv.") || rest.starts_with("dv.") {
            return Some(Expected::N);
        }
    }
    None
}

/// Whether `v` is of the type `expected`.
pub(super) fn well_typed(expected: Expected, v: &Value) -> bool {
    matches!(
        (expected, v),
        (Expected::S, Value::S(_)) | (Expected::N, Value::N(_))
    )
}

/// The bookkeeping attributes of `item` (with key `key`) whose type is not the one the runtime
/// writes (see [`bookkeeping_type`]), as [`Class::Malformed`] violations (the attribute's name
/// as their token). Rows that do not parse, and fences, have none.
fn malformed_attrs(layout: &crate::layout::Layout, key: &Key, item: &Item) -> Vec<Violation> {
    let path = match classify(layout, key) {
        Ok(Kind::Listing(p) | Kind::Object(p)) => p,
        Ok(Kind::Bookkeeping) if key.range == format!("{}sv", layout.reserved()) => {
            match layout.decode_target(&key.hash) {
                Ok(p) => p,
                Err(_) => return Vec::new(),
            }
        }
        _ => return Vec::new(),
    };
    if key.range == layout.reserved().to_string() && layout.is_fence(item) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for name in item.names() {
        let (Some(expected), Some(v)) = (bookkeeping_type(layout, key, name), item.get(name))
        else {
            continue;
        };
        if well_typed(expected, v) {
            continue;
        }
        let what = if name == layout.deleting_attr() {
            "a removal mark that no remover owns or takes over: every write under the row waits for it, then fails"
        } else if name == layout.moving_attr() {
            "a lock that no operation owns: every write under the row is refused as locked"
        } else if name == layout.held_attr() {
            "a hold that no operation owns: overwrites, patches and moves of the object fail their condition"
        } else if key.range != layout.reserved().to_string() {
            "a tombstone version that no write can pass: writing the source again fails"
        } else if name.starts_with(&format!("{}dv.", layout.reserved())) {
            "a copy version that no propagation can pass: the copy is never brought up to date"
        } else {
            "a version that no write can pass: writes of the source fail their condition"
        };
        let want = match expected {
            Expected::S => "a string",
            Expected::N => "a number",
        };
        let mut v = violation(
            Class::Malformed,
            Some(path.clone()),
            key.clone(),
            format!("`{name}` is {}, not {want}: {what}", type_name(v)),
        );
        v.token = Some(name.to_owned());
        out.push(v);
    }
    out
}

/// The name of a value's type, as DynamoDB spells it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::S(_) => "a string (S)",
        Value::N(_) => "a number (N)",
        Value::B(_) => "a binary (B)",
        Value::Bool(_) => "a boolean (BOOL)",
        Value::Null => "null (NULL)",
        Value::L(_) => "a list (L)",
        Value::M(_) => "a map (M)",
        Value::Ss(_) => "a string set (SS)",
        Value::Ns(_) => "a number set (NS)",
        Value::Bs(_) => "a binary set (BS)",
    }
}

/// Whether a recorded operation explains `v` (a transient state it passes through): an
/// empty listing row on the way to, at or under an operation's source or destination (rows
/// created above a copy's destination first, pruned above a moved or deleted source last),
/// a stale copy under a moved or copied subtree's destination (refilled at its end) or under
/// a source whose propagation runs.
fn explained(v: &Violation, ops: &[(Operation, Path, Path)]) -> bool {
    let Some(p) = &v.path else {
        return false;
    };
    ops.iter().any(|(op, from, to)| match v.class {
        Class::EmptyListing => [from, to]
            .iter()
            .any(|q| q.starts_with(p) || p.starts_with(q)),
        Class::StaleCopy => match op {
            Operation::Propagate => p.starts_with(from) && p != from,
            _ => p.starts_with(to) || p.starts_with(from),
        },
        _ => false,
    })
}

/// What a row of the table is.
enum Kind {
    Listing(Path),
    /// A listing row of the path outside its sharded directory's shard, and why.
    Misplaced(Path, String),
    Object(Path),
    Intent,
    /// Tombstones, stream checkpoints, the table's settings.
    Bookkeeping,
}

/// What the row with key `key` is, or why it is not a row of the layout.
fn classify(layout: &crate::layout::Layout, key: &Key) -> std::result::Result<Kind, String> {
    let sc = layout.reserved();
    let sc_str = sc.to_string();
    if layout.is_intent_lane(key) {
        // A lane row of an intent: written and deleted with its record.
        return Ok(Kind::Bookkeeping);
    }
    if layout.is_link_entry(key) {
        // An entry of the link index: written with its link row.
        return Ok(Kind::Bookkeeping);
    }
    if layout.is_shard_guard(key) {
        // A sharded directory's shard guard: written beside a check of its listing row.
        return Ok(Kind::Bookkeeping);
    }
    if key.hash == layout.intents_hash() {
        return Ok(Kind::Intent);
    }
    if key.hash == format!("{sc}{sc}checkpoints") || *key == crate::storage::TableSettings::key(sc)
    {
        return Ok(Kind::Bookkeeping);
    }
    let parse = |s: &str| {
        layout
            .decode_target(s)
            .map_err(|e| format!("its key does not name a path ({e})"))
    };
    if key.range == sc_str {
        return parse(&key.hash).map(Kind::Object);
    }
    // The directory a listing row's partition names (its key without the trailing SC, or
    // the shard suffix) and the path of the child the row lists.
    let listed = |prefix: &str| -> std::result::Result<(Path, Path), String> {
        let dir = if prefix.is_empty() {
            Path::root()
        } else {
            parse(prefix)?
        };
        if key.range.contains(sc) {
            return Err(format!(
                "a listing row whose name contains the reserved character {sc:?}"
            ));
        }
        let path = dir
            .child(key.range.clone())
            .map_err(|e| format!("a listing row that does not name a path ({e})"))?;
        Ok((dir, path))
    };

    if key.range == format!("{sc}sv") {
        return parse(&key.hash).map(|_| Kind::Bookkeeping);
    }
    if let Some((dir, k)) = layout.split_shard_hash(&key.hash) {
        // A listing row in a shard of a sharded directory.
        let (dir, path) = listed(dir.strip_suffix(sc).unwrap_or(dir))?;
        return Ok(match layout.shards_of(dir.components()) {
            Some(n) if crate::path::part_of(&key.range, n) == k => Kind::Listing(path),
            Some(n) => Kind::Misplaced(
                path,
                format!(
                    "listed in shard {k} of {dir}, but its name belongs in shard {} of {n}",
                    crate::path::part_of(&key.range, n)
                ),
            ),
            None => Kind::Misplaced(
                path,
                format!("listed in shard {k} of {dir}, which is not a sharded directory"),
            ),
        });
    }
    let Some(prefix) = key.hash.strip_suffix(sc) else {
        return Err("neither a listing row (its Key does not end in the reserved character) nor an object row (its Child is not the reserved character)".into());
    };
    let (parent, path) = listed(prefix)?;
    Ok(match layout.shards_of(parent.components()) {
        Some(n) => Kind::Misplaced(
            path,
            format!(
                "listed in the partition of {parent}, a directory sharded {n} ways, not in its shard"
            ),
        ),
        None => Kind::Listing(path),
    })
}

impl<S: Storage + 'static> Tree<S> {
    /// Checks the whole table's integrity: see [`check`](crate::check) for what is checked,
    /// what each violation means and what [`repair`](Tree::repair) does about it.
    ///
    /// One Scan of the table (in [`segments`](Check::segments), eventually consistent:
    /// about half a read unit per 4 KB of rows) and, for suspects only, a TransactGetItems
    /// snapshot of the rows each is judged on, which confirms it is wrong at one instant.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["Accounts", "1"], &V { v: 1 }).await?;
    /// let report = tree.check().segments(2).run().await?;
    /// assert!(report.is_healthy(), "{report}");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// [`Check::run`] only reads: cancel safe.
    pub fn check(&self) -> Check<S> {
        Check {
            tree: self.clone(),
            segments: 1,
            rate: None,
            page_size: None,
            grace: Duration::from_secs(1),
            progress: None,
            part: None,
            resume: None,
            time_limit: None,
            bucket: None,
            bucket_depth: 1,
        }
    }
}

/// Whether the object row `row` at `path` lacks an index attribute the tree keeps (or has
/// another value there): one of the path index's, or, when the row is held to readings as
/// values of registered types (see [`judged_readings`](judged_readings)), one of
/// every reading (it holds the values of none of them whole).
pub(super) fn lacks_index<S: Storage + 'static>(cx: &Ctx<S>, path: &Path, row: &Item) -> bool {
    let holds = |(name, v): &(String, Value)| row.get(name) == Some(v);
    if !path_index_attributes(cx, path).iter().all(holds) {
        return true;
    }
    let readings = judged_readings(cx, path, row);
    !readings.is_empty() && !readings.iter().any(|r| r.attrs.iter().all(holds))
}

/// The index attributes the object row `row` at `path` should have (what repair writes):
/// the path index's, when the tree keeps one, and those of the reading of the row as a
/// registered type (see [`judged_readings`](judged_readings)) it fits best: one it
/// holds whole, else one its stored index values name, else the one with the most
/// attributes in place, else the first (the whole tree's before a scope's).
pub(super) fn index_attributes_of<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
) -> Vec<(String, Value)> {
    let mut out = path_index_attributes(cx, path);
    let holds = |(name, v): &(String, Value)| row.get(name) == Some(v);
    let best = judged_readings(cx, path, row).into_iter().min_by_key(|r| {
        let held = r.attrs.iter().filter(|a| holds(a)).count();
        (
            std::cmp::Reverse(held == r.attrs.len()),
            std::cmp::Reverse(r.named),
            std::cmp::Reverse(held),
        )
    });
    out.extend(best.into_iter().flat_map(|r| r.attrs));
    out
}

/// The secondary-index attributes an import writes on the object row `row` at `path`
/// (the path index's are added apart): those of the registered types whose template
/// matches the path below this tree's root (a scope's, or the whole tree's), with the
/// index hashes the tree's typed writes give them. A row that does not read as such a
/// type gets none of its attributes.
///
/// # Errors
///
/// [`ErrorKind::InvalidValue`] if the row reads as such a type but its index key values
/// cannot be stored (the reserved character in them, or over DynamoDB's key limits), as a
/// typed write of it is refused.
pub(crate) fn index_attributes_to_write<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
) -> Result<Vec<(String, Value)>> {
    let layout = &cx.inner.layout;
    let root = cx.floor();
    let mut out = Vec::new();
    if row.contains(layout.link_attr()) {
        return Ok(out);
    }
    for (template, attrs, _) in &cx.inner.config.indexed {
        if template_root(template, path) == Some(root)
            && let Some(found) = attrs(layout, &path.components()[..root], row)?
        {
            out.extend(found);
        }
    }
    Ok(out)
}

/// The path index's attributes of the object at `path`, when the tree keeps one (links
/// carry them too: descendants through the index find them).
fn path_index_attributes<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Vec<(String, Value)> {
    let layout = &cx.inner.layout;
    let mut out = Vec::new();
    if let Some(depth) = cx.inner.config.path_index {
        let spec = layout.path_index_spec();
        let (hash, range) = layout.path_index_values(path.components(), depth);
        out.push((spec.hash_attr, Value::S(hash)));
        if let Some(r) = spec.range_attr {
            out.push((r, Value::S(range)));
        }
    }
    out
}

/// The readings of the object row `row` at `path` as values of the types registered with
/// [`TreeBuilder::indexes_of`](crate::TreeBuilder::indexes_of) that the check holds it to
/// (see `check.md`, "Index values of rows written through scopes"), at most one per type,
/// each through the scope whose index values it should hold:
///
/// - the scope its stored index values of the type name (with the type's template), if the
///   row lies under that scope's root (the deepest, if they name several);
/// - else, if the type's template matches the path's last components, the scope rooted at
///   the components before them, when that is the whole tree (the path is the template)
///   or when the row holds index values of the type naming a scope it no longer lies under
///   (moved out of it).
///
/// A row that does not read as the type, or whose values cannot be indexed (no typed write
/// stores them), has no reading of it; links have none (they are no type's values).
fn judged_readings<S: Storage + 'static>(cx: &Ctx<S>, path: &Path, row: &Item) -> Vec<Reading> {
    let layout = &cx.inner.layout;
    let mut out = Vec::new();
    if row.contains(layout.link_attr()) {
        return out;
    }
    for (template, attrs, roots) in &cx.inner.config.indexed {
        let named = roots(layout, row);
        let under = named
            .iter()
            .filter(|r| r.len() < path.len() && path.starts_with(r))
            .max_by_key(|r| r.len())
            .map(Path::len);
        let root = under
            .or_else(|| template_root(template, path).filter(|&at| at == 0 || !named.is_empty()));
        if let Some(root) = root
            && let Ok(Some(found)) = attrs(layout, &path.components()[..root], row)
        {
            out.push(Reading {
                attrs: found,
                named: !named.is_empty(),
            });
        }
    }
    out
}

/// The copies of the object `row` at `path` (of a registered target type) that differ
/// from their sources (as `source_of` finds them).
pub(super) fn stale_copies<'a, S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
    source_of: impl Fn(&Path) -> Option<&'a Item>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    if row.contains(cx.inner.layout.link_attr()) {
        return out;
    }
    for ty in denorm::target_types_at(cx, path) {
        for d in ty.denormalized {
            let depth = d.source_template().split('/').count();
            let Some(source_path) = (depth < path.len()).then(|| path.prefix(depth)) else {
                continue;
            };
            let source =
                source_of(&source_path).filter(|s| !s.contains(cx.inner.layout.link_attr()));
            let want = source
                .and_then(|s| s.get(d.source_attr()))
                .filter(|v| **v != Value::Null);
            let have = row.get(d.target()).filter(|v| **v != Value::Null);
            // A required copy of a missing source stays as it was (nothing to copy).
            if want.is_none() && !d.optional() {
                continue;
            }
            if want != have {
                let mut v = violation(
                    Class::StaleCopy,
                    Some(path.clone()),
                    cx.inner.layout.object_key(path),
                    format!(
                        "its copy `{}` differs from `{}` of {}",
                        d.target(),
                        d.source_attr(),
                        source_path.escaped()
                    ),
                );
                v.token = Some(d.target().to_owned());
                out.push(v);
            }
        }
    }
    out
}

/// Keeps the suspects that consistent reads confirm. Returns them and the read units of
/// the confirming reads.
///
/// Two classes are also states that running writes pass through without a mark or a
/// lock to tell: a listing row written before what it names (a batch's new top-level
/// name, a copy's destination above it) or left for a moment before its remover marks
/// it (pruning), and a copy written before its refill (a moved target) or its
/// propagation. Those are not reported under a recorded operation that explains them,
/// and otherwise only if they are still wrong after `grace`.
async fn confirm<S: Storage + 'static>(
    cx: &Ctx<S>,
    suspects: Vec<Violation>,
    from_scan: Vec<(Operation, Path, Path)>,
    grace: Duration,
    progress: &(dyn Fn(u64, u64, f64) + Sync),
) -> Result<(Vec<Violation>, f64)> {
    let total = suspects.len() as u64;
    let mut units = 0.0;
    let judged = judge(cx, suspects, Some(progress), &mut units).await?;
    let (links, judged): (Vec<Violation>, Vec<Violation>) = judged
        .into_iter()
        .partition(|v| matches!(v.class, Class::DanglingLink | Class::LinkCycle));
    let (mut transient, mut out): (Vec<Violation>, Vec<Violation>) = judged
        .into_iter()
        .partition(|v| matches!(v.class, Class::EmptyListing | Class::StaleCopy));
    if !links.is_empty() {
        out.extend(not_being_rewritten(cx, links, &mut units).await?);
    }
    if !transient.is_empty() {
        let mut ops = from_scan;
        ops.extend(recorded_operations(cx, &mut units).await?);
        transient.retain(|v| !explained(v, &ops));
    }
    if !transient.is_empty() && !grace.is_zero() {
        crate::retry::sleep_for(grace).await;
        transient = judge(cx, transient, None, &mut units).await?;
        let ops = recorded_operations(cx, &mut units).await?;
        transient.retain(|v| !explained(v, &ops));
    }
    out.extend(transient);
    if total > 0 {
        progress(total, total, units);
    }
    Ok((out, units))
}

/// The recorded operations (op, from, to), read now (consistent).
async fn recorded_operations<S: Storage + 'static>(
    cx: &Ctx<S>,
    units: &mut f64,
) -> Result<Vec<(Operation, Path, Path)>> {
    Ok(recorded_intents(cx, units)
        .await?
        .into_iter()
        .map(|i| (i.op, i.from, i.to))
        .collect())
}

/// The intent records that parse, read now (consistent).
async fn recorded_intents<S: Storage + 'static>(
    cx: &Ctx<S>,
    units: &mut f64,
) -> Result<Vec<crate::tree::Intent>> {
    let q = crate::storage::Query::new(cx.inner.layout.intents_hash()).consistent(true);
    let pages: Vec<crate::storage::Page> =
        futures::TryStreamExt::try_collect(crate::stream::query_pages(cx.io(), q, None)).await?;
    *units += pages.len().max(1) as f64;
    Ok(pages
        .iter()
        .flat_map(|p| &p.items)
        .filter_map(|item| intent::decode_intent(cx, item).ok())
        .collect())
}

/// The suspects still wrong on a snapshot of their rows (see [`confirm`](confirm)).
async fn judge<S: Storage + 'static>(
    cx: &Ctx<S>,
    suspects: Vec<Violation>,
    progress: Option<&(dyn Fn(u64, u64, f64) + Sync)>,
    units: &mut f64,
) -> Result<Vec<Violation>> {
    let layout = &cx.inner.layout;
    // The rows each suspect is judged on, read together as one snapshot
    // (TransactGetItems), several suspects sharing a request of at most 100 rows.
    let key_sets: Vec<Vec<Key>> = suspects.iter().map(|v| confirm_keys(cx, v)).collect();
    let mut packs: Vec<(Vec<usize>, Vec<Key>)> = Vec::new();
    for (i, keys) in key_sets.iter().enumerate() {
        let fits = packs.last().is_some_and(|(_, pack)| {
            pack.len() + keys.iter().filter(|k| !pack.contains(k)).count()
                <= crate::storage::batch::TRANSACT_MAX
        });
        if !fits {
            packs.push((Vec::new(), Vec::new()));
        }
        if let Some((members, pack)) = packs.last_mut() {
            members.push(i);
            for k in keys {
                if !pack.contains(k) {
                    pack.push(k.clone());
                }
            }
        }
    }
    let total = suspects.len() as u64;
    let mut snapshot_of: Vec<usize> = vec![0; suspects.len()];
    let mut snapshots: Vec<HashMap<Key, Item>> = Vec::new();
    for (members, keys) in packs {
        match snapshot(cx, keys, units).await {
            Ok(rows) => {
                for &i in &members {
                    snapshot_of[i] = snapshots.len();
                }
                snapshots.push(rows);
            }
            // Over the 4 MB a transaction may read: each suspect on its own.
            Err(e) if e.kind() == ErrorKind::Validation && members.len() > 1 => {
                for &i in &members {
                    let rows = snapshot(cx, key_sets[i].clone(), units).await?;
                    snapshot_of[i] = snapshots.len();
                    snapshots.push(rows);
                }
            }
            Err(e) => return Err(e),
        }
    }
    let now = now_secs();
    let mut out = Vec::new();
    for (done, mut v) in suspects.into_iter().enumerate() {
        let rows = &snapshots[snapshot_of[done]];
        let row = rows.get(&v.key);
        // What the reads of a link's chain found it to be (a chain that left a bucket of a
        // merge is suspected dangling, whatever it is).
        let mut relabel = None;
        let keep = match (v.class, &v.path) {
            (Class::Misplaced, Some(p)) if layout.is_shard_guard(&v.key) => {
                row.is_some() && !rows.contains_key(&layout.listing_key(p))
            }
            (Class::Unparsable | Class::Misplaced, _) => row.is_some(),
            (Class::Expired, _) => row.is_some_and(|r| layout.is_expired(r, now)),
            (Class::Unreachable, Some(p)) => {
                row.is_some_and(|r| !layout.is_absent(r, now))
                    && !rows.contains_key(&layout.listing_key(p))
            }
            (Class::MissingIndex, Some(p)) => match link_entry_wanted(cx, &v) {
                // A link without its entry: the link still there, the entry still not.
                Some((target, entry)) => {
                    row.and_then(|r| layout.link_of_row(r)) == Some((p.clone(), target))
                        && !rows.contains_key(&entry)
                }
                None => row.is_some_and(|r| lacks_index(cx, p, r)),
            },
            (Class::DanglingLink | Class::LinkCycle, Some(p)) => {
                let class = match row {
                    Some(_) => link_class(cx, p, &[], units).await?,
                    None => None,
                };
                let target = row.and_then(|r| layout.link_of_row(r)).map(|(_, t)| t);
                if let (Some(c), Some(t)) = (class, target) {
                    relabel = Some(link_violation(cx, p, c, &t));
                }
                class.is_some()
            }
            (Class::Malformed, _) => match (row, v.token.as_deref()) {
                (Some(r), Some(attr)) => still_malformed(layout, &v.key, attr, r),
                _ => false,
            },
            (Class::BrokenClosure, Some(p)) => {
                row.is_some()
                    && p.parent()
                        .is_some_and(|q| !rows.contains_key(&layout.listing_key(&q)))
            }
            (Class::ExpiredMark, _) => {
                row.and_then(|r| r.get_s(layout.deleting_attr())) == v.token.as_deref()
            }
            // A lane row: still there, its record still not.
            (Class::LockWithoutIntent, None) => {
                row.is_some()
                    && v.token
                        .as_ref()
                        .is_some_and(|id| !rows.contains_key(&layout.intent_key(id)))
            }
            (Class::LockWithoutIntent, _) => {
                let lock = row.and_then(|r| r.get_s(&lock_attr(layout, &v.key)));
                lock.is_some()
                    && lock == v.token.as_deref()
                    && v.token
                        .as_ref()
                        .is_some_and(|id| !rows.contains_key(&layout.intent_key(id)))
            }
            (Class::EmptyListing, Some(p)) => {
                let free = row.is_some_and(|r| {
                    !r.contains(layout.moving_attr())
                        && r.get_s(layout.deleting_attr())
                            .is_none_or(guard::mark_expired)
                });
                let object = rows
                    .get(&layout.object_key(p))
                    .is_some_and(|r| !layout.is_fence(r));
                if free && !object {
                    *units += 1.0;
                    !removal::has_children(cx, p).await?
                } else {
                    false
                }
            }
            (Class::AbandonedIntent, _) => match row {
                Some(r) => intent::decode_intent(cx, r).is_ok_and(|i| i.abandoned(now_ms())),
                None => false,
            },
            (Class::StaleCopy, Some(p)) => row.is_some_and(|r| {
                stale_copies(cx, p, r, |s| rows.get(&layout.object_key(s)))
                    .iter()
                    .any(|s| s.token == v.token)
            }),
            _ => false,
        };
        if let Some(relabeled) = relabel {
            v = relabeled;
        }
        if keep {
            out.push(v);
        }
        if let Some(progress) = progress {
            progress(done as u64 + 1, total, *units);
        }
    }
    Ok(out)
}

/// The rows a suspect is judged on (its own first).
fn confirm_keys<S: Storage + 'static>(cx: &Ctx<S>, v: &Violation) -> Vec<Key> {
    let layout = &cx.inner.layout;
    let mut keys = vec![v.key.clone()];
    let Some(path) = &v.path else {
        // A lane row without its record: judged with the record's key.
        if let (Class::LockWithoutIntent, Some(id)) = (v.class, &v.token) {
            keys.push(layout.intent_key(id));
        }
        return keys;
    };
    match v.class {
        Class::Unreachable => keys.push(layout.listing_key(path)),
        Class::BrokenClosure => {
            if let Some(parent) = path.parent().filter(|q| !q.is_root()) {
                keys.push(layout.listing_key(&parent));
            }
        }
        Class::EmptyListing => keys.push(layout.object_key(path)),
        // A shard guard, judged with its directory's listing row.
        Class::Misplaced if layout.is_shard_guard(&v.key) => keys.push(layout.listing_key(path)),
        Class::LockWithoutIntent => {
            if let Some(id) = &v.token {
                keys.push(layout.intent_key(id));
            }
        }
        Class::MissingIndex => {
            if let Some((_, entry)) = link_entry_wanted(cx, v) {
                keys.push(entry);
            }
        }
        Class::StaleCopy => {
            for ty in denorm::target_types_at(cx, path) {
                for d in ty.denormalized {
                    let depth = d.source_template().split('/').count();
                    let source = layout.object_key(&path.prefix(depth));
                    if depth < path.len() && !keys.contains(&source) {
                        keys.push(source);
                    }
                }
            }
        }
        _ => {}
    }
    keys
}

/// For a [`Class::MissingIndex`] violation of a link without its link index entry (its token
/// names the target), the target and the key of the entry it lacks.
pub(super) fn link_entry_wanted<S: Storage + 'static>(
    cx: &Ctx<S>,
    v: &Violation,
) -> Option<(Path, Key)> {
    let layout = &cx.inner.layout;
    let target = layout.decode_target(v.token.as_deref()?).ok()?;
    let entry = layout
        .link_entry_key(v.path.as_ref()?, &target, cx.link_depth()?)
        .ok()?;
    Some((target, entry))
}

/// The rows at `keys` as one snapshot (TransactGetItems), adding the read units it bills
/// (two per 4 KB of each row) to `units`.
async fn snapshot<S: Storage + 'static>(
    cx: &Ctx<S>,
    keys: Vec<Key>,
    units: &mut f64,
) -> Result<HashMap<Key, Item>> {
    let found = cx.io().transact_get(keys.clone()).await?;
    let mut rows = HashMap::new();
    for (key, item) in keys.into_iter().zip(found) {
        *units += 2.0 * item.as_ref().map_or(0, Item::size).div_ceil(4096).max(1) as f64;
        if let Some(item) = item {
            rows.insert(key, item);
        }
    }
    Ok(rows)
}

/// What the link at `path` is, followed with consistent reads: [`Class::DanglingLink`] when
/// it ends nowhere, [`Class::LinkCycle`] when it loops or goes on for more hops than the tree
/// follows, `None` when it ends at an object (or is no link any more).
///
/// `rewrites` are the (source, destination) pairs of recorded moves that rewrite the links
/// into their source (`LinkPolicy::Rewrite`): a hop to a path under such a source that is
/// not there (the move deleted it, and will point the link at its new place before its
/// intent goes) is followed at the destination instead.
pub(super) async fn link_class<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    rewrites: &[(Path, Path)],
    units: &mut f64,
) -> Result<Option<Class>> {
    let layout = &cx.inner.layout;
    let now = now_secs();
    let mut seen = HashSet::new();
    let mut current = path.clone();
    let mut hops = 0;
    while hops <= cx.inner.config.max_link_hops {
        if !seen.insert(current.clone()) {
            return Ok(Some(Class::LinkCycle));
        }
        let row = cx.io().get_item(&layout.object_key(&current), true).await?;
        *units += row.as_ref().map_or(0, Item::size).div_ceil(4096).max(1) as f64;
        let first = current == *path;
        let missing = row.as_ref().is_none_or(|r| layout.is_absent(r, now));
        if missing && !first {
            // Moved away by a move that rewrites its links: where the link will point.
            if let Some(moved) = rewrites
                .iter()
                .find_map(|(from, to)| moved_to(&current, from, to))
            {
                current = moved;
                continue;
            }
        }
        hops += 1;
        match row {
            // The link itself is gone (or no longer a link): nothing dangles.
            None if first => return Ok(None),
            Some(r) if first && layout.is_absent(&r, now) => return Ok(None),
            Some(r) if layout.is_absent(&r, now) => return Ok(Some(Class::DanglingLink)),
            Some(r) => match r.get_s(layout.link_attr()) {
                Some(t) => match layout.decode_target(t) {
                    Ok(t) => current = t,
                    Err(_) => return Ok(Some(Class::DanglingLink)),
                },
                None => return Ok(None),
            },
            None => return Ok(Some(Class::DanglingLink)),
        }
    }
    // More hops than the tree follows: reads of it fail as a loop does.
    Ok(Some(Class::LinkCycle))
}

/// Keeps the dangling links and cycles (confirmed by [`judge`](judge)) that no
/// recorded move will mend: a move with `LinkPolicy::Rewrite` deletes its source before it
/// points the links into it at the destination, so from its delete phase until its rewrite
/// those links lead nowhere, under a live intent. Each is followed again with the moves
/// recorded just before as [`link_broken`](link_broken)'s `rewrites`; the intents
/// are read again after the follow, and if an operation was recorded meanwhile (it may have
/// deleted the target since), the follow is repeated with it (a few rounds at most).
async fn not_being_rewritten<S: Storage + 'static>(
    cx: &Ctx<S>,
    mut links: Vec<Violation>,
    units: &mut f64,
) -> Result<Vec<Violation>> {
    let mut before = recorded_intents(cx, units).await?;
    for _ in 0..3 {
        let rewrites: Vec<(Path, Path)> = before
            .iter()
            .filter(|i| i.rewrites_links())
            .map(|i| (i.from.clone(), i.to.clone()))
            .collect();
        let mut broken = Vec::new();
        for v in links {
            let Some(p) = v.path.clone() else {
                broken.push(v);
                continue;
            };
            if link_class(cx, &p, &rewrites, units).await?.is_some() {
                broken.push(v);
            }
        }
        links = broken;
        if links.is_empty() {
            break;
        }
        let after = recorded_intents(cx, units).await?;
        let new = after.iter().any(|a| !before.iter().any(|b| b.id == a.id));
        if !new {
            break;
        }
        before = after;
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_classified_by_their_keys() {
        let layout = crate::layout::Layout::new('¦').unwrap();
        let k = |h: &str, r: &str| classify(&layout, &Key::new(h, r));
        assert!(matches!(k("¦", "a"), Ok(Kind::Listing(p)) if p.to_string() == "/a"));
        assert!(matches!(k("¦a¦", "b"), Ok(Kind::Listing(p)) if p.to_string() == "/a/b"));
        assert!(matches!(k("¦a¦b", "¦"), Ok(Kind::Object(p)) if p.to_string() == "/a/b"));
        assert!(matches!(k("¦a", "¦sv"), Ok(Kind::Bookkeeping)));
        assert!(matches!(k("¦¦intents", "x"), Ok(Kind::Intent)));
        assert!(matches!(k("¦¦intents", "x¦3"), Ok(Kind::Bookkeeping)));
        assert!(matches!(k("¦¦checkpoints", "c¦s"), Ok(Kind::Bookkeeping)));
        assert!(matches!(
            k("¦¦settings", "¦¦settings"),
            Ok(Kind::Bookkeeping)
        ));
        assert!(k("¦a¦", "b¦c").is_err());
        assert!(k("¦a¦¦b", "¦").is_err());
        assert!(k("a", "b").is_err());
        assert!(k("¦a", "x").is_err());
        assert!(k("¦¦other", "x").is_err());
    }

    #[test]
    fn a_template_matches_the_end_of_a_path_below_a_scopes_root() {
        let p = |c: &[&str]| Path::new(c.iter().copied()).unwrap();
        let t = "Links/{short}";
        assert_eq!(template_root(t, &p(&["Links", "x"])), Some(0));
        assert_eq!(
            template_root(t, &p(&["Tenants", "t1", "Links", "x"])),
            Some(2)
        );
        assert_eq!(template_root(t, &p(&["Tenants", "t1", "Other", "x"])), None);
        assert_eq!(template_root(t, &p(&["x"])), None);
        assert_eq!(template_root("{a}/{b}", &p(&["a", "b", "c"])), Some(1));
    }
}
