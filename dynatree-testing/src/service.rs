//! A model of the DynamoDB service around a [`FakeTable`]: how long each request takes, and
//! how much one partition serves before it throttles, on tokio's clock.
//!
//! DynamoDB Local runs every request on one JVM, so its throughput ranks protocols by CPU, not by
//! what they cost on the service, where a transaction waits about three times as long as a
//! PutItem and one partition takes a bounded number of writes a second. A [`ServiceTable`]
//! serves requests from a [`FakeTable`] as the service would time them:
//!
//! - **Latency.** Each request waits a time drawn from a log-normal distribution fitted to the
//!   kind's published median and 99th percentile ([`Latency`]), growing with the items in the
//!   request (or, for a Query or Scan page, the items it returns). It is applied half-way
//!   through that time, so concurrent requests overlap as they do on the service.
//! - **Partitions.** Every partition key value is a partition with its own throughput: at most
//!   [`partition_write_units`](ServiceModel::partition_write_units) write units and
//!   [`partition_read_units`](ServiceModel::partition_read_units) read units a second
//!   (1,000 and 3,000 on the service, also after adaptive capacity), as token buckets that hold
//!   at most [`burst`](ServiceModel::burst) of unused capacity. A request that reaches a
//!   partition whose bucket is spent is throttled without being applied: its error is
//!   [`dynatree::ErrorKind::Throttled`], with a [`ThrottlingReason`] as
//!   its source (`TableWriteKeyRangeThroughputExceeded` for a hot partition, as the service
//!   says). The units a request consumed are taken after it is applied (the fake's own
//!   metering, so transactions count twice), so a bucket may go below zero and then throttles
//!   until it refills, as the service's does. The service may split a busy partition key by
//!   sort key ("split for heat"); the model never does, so its ceilings are the lower bound.
//!   A table-wide limit ([`table_write_units`](ServiceModel::table_write_units)) models a
//!   provisioned table or an on-demand table's maximum.
//! - **Time.** Every wait is a [`tokio::time::sleep`]: on a runtime with paused time
//!   (`start_paused`, tokio's `test-util` feature), minutes of service time pass in
//!   milliseconds of real time, and with a fixed [`seed`](ServiceModel::seed) every run gives
//!   the same figures. tokio's timer counts whole milliseconds, so each latency is rounded to
//!   the nearest one.
//!
//! Requests are applied one at a time (they are atomic in the fake anyway), so the units each
//! consumed are exact.
//!
//! # Sources of the figures
//!
//! [`ServiceModel::published`] takes the latencies measured from Lambda in the same region by
//! Alex DeBrie's `dynamodb-performance-testing` (400 calls per configuration): PutItem p50
//! 7.55 ms, p99 16.2 ms; BatchWriteItem of 25 items 10.2 / 27.6; TransactWriteItems of 5 items
//! 25.3 / 92.5 and of 25 items 32.1 / 97.5 (with a failing condition 25.3 / 84.9: the same
//! median, so the model does not tell them apart). A batch's cost per further item is the
//! straight line through one item (PutItem) and 25; a transaction's through 5 and 25. No
//! figures for reads were published from the same setup: the model times GetItem, Query,
//! Scan, BatchGetItem and TransactGetItems as PutItem, BatchWriteItem and TransactWriteItems,
//! and [`ServiceModel::latency`] replaces any of them. The throughput limits are the
//! service's documented per-partition maximums.
//!
//! # Examples
//!
//! Two puts in one partition's directory, timed as on the service:
//!
//! ```
//! use std::time::Duration;
//! use dynatree::Tree;
//! use dynatree_testing::FakeTable;
//! use dynatree_testing::service::{ServiceModel, ServiceTable};
//!
//! # #[derive(serde::Serialize)] struct Link { url: String }
//! # fn main() -> dynatree::Result<()> {
//! let runtime = tokio::runtime::Builder::new_current_thread()
//!     .enable_all()
//!     .start_paused(true) // virtual time: the model's waits take no real time
//!     .build()
//!     .unwrap();
//! runtime.block_on(async {
//!     let fake = FakeTable::new();
//!     let table = ServiceTable::new(fake.clone(), ServiceModel::published().seed(7));
//!     let tree = Tree::new(table.clone());
//!     tree.create_table().await?;
//!     let link = Link { url: "https://example.com".into() };
//!     tree.put(["Accounts", "1", "Links", "a"], &link).await?;
//!     let started = tokio::time::Instant::now();
//!     tree.put(["Accounts", "1", "Links", "a"], &link).await?; // an overwrite: one PutItem
//!     let took = started.elapsed();
//!     assert!(took > Duration::from_millis(2) && took < Duration::from_millis(60), "{took:?}");
//!     assert_eq!(table.stats().throttled(), 0);
//!     Ok(())
//! })
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dynatree::storage::{Request, Response, Storage};
use dynatree::{Error, ErrorKind, Result};
use tokio::time::Instant;

use crate::{FakeTable, Op};

/// A request kind's latency on the service: its median and 99th percentile for one item, and
/// what each further item in the request adds to them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dynatree_testing::service::Latency;
///
/// let put = Latency::new(Duration::from_micros(7_550), Duration::from_micros(16_200));
/// assert_eq!(put.p50(), Duration::from_micros(7_550));
/// let batch = put.per_item(Duration::from_micros(110), Duration::from_micros(475));
/// assert_eq!(batch.p50_of(25), Duration::from_micros(7_550 + 24 * 110));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    p50: Duration,
    p99: Duration,
    item_p50: Duration,
    item_p99: Duration,
}

impl Latency {
    /// A latency with median `p50` and 99th percentile `p99` (raised to `p50` if below it),
    /// the same for any number of items.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::service::Latency;
    ///
    /// let l = Latency::new(Duration::from_millis(5), Duration::from_millis(12));
    /// assert_eq!(l.p99_of(10), Duration::from_millis(12));
    /// ```
    pub fn new(p50: Duration, p99: Duration) -> Self {
        Latency {
            p50,
            p99: p99.max(p50),
            item_p50: Duration::ZERO,
            item_p99: Duration::ZERO,
        }
    }

    /// The same, plus `p50` and `p99` for each item beyond the first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::service::Latency;
    ///
    /// let l = Latency::new(Duration::from_millis(5), Duration::from_millis(12))
    ///     .per_item(Duration::from_millis(1), Duration::from_millis(2));
    /// assert_eq!(l.p99_of(3), Duration::from_millis(16));
    /// ```
    pub fn per_item(mut self, p50: Duration, p99: Duration) -> Self {
        self.item_p50 = p50;
        self.item_p99 = p99;
        self
    }

    /// The median for one item.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::service::Latency;
    ///
    /// let l = Latency::new(Duration::from_millis(5), Duration::from_millis(12));
    /// assert_eq!(l.p50(), Duration::from_millis(5));
    /// ```
    pub fn p50(&self) -> Duration {
        self.p50
    }

    /// The median for a request of `items` items (at least one).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::service::Latency;
    ///
    /// let l = Latency::new(Duration::from_millis(5), Duration::from_millis(12))
    ///     .per_item(Duration::from_millis(1), Duration::ZERO);
    /// assert_eq!(l.p50_of(0), Duration::from_millis(5));
    /// assert_eq!(l.p50_of(2), Duration::from_millis(6));
    /// ```
    pub fn p50_of(&self, items: usize) -> Duration {
        self.p50 + extra(self.item_p50, items)
    }

    /// The 99th percentile for a request of `items` items (at least one).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::service::Latency;
    ///
    /// let l = Latency::new(Duration::from_millis(5), Duration::from_millis(12));
    /// assert_eq!(l.p99_of(1), Duration::from_millis(12));
    /// ```
    pub fn p99_of(&self, items: usize) -> Duration {
        self.p99 + extra(self.item_p99, items)
    }

    /// A draw for `items` items: log-normal with the median and 99th percentile above, from a
    /// standard normal deviate `z`.
    fn draw(&self, items: usize, z: f64) -> Duration {
        let p50 = self.p50_of(items).as_secs_f64().max(1e-6);
        let p99 = self.p99_of(items).as_secs_f64().max(p50);
        // ln(L) ~ N(ln p50, sigma), with p99 = p50 * exp(2.326 * sigma).
        let sigma = (p99 / p50).ln() / 2.326_348;
        let secs = p50 * (sigma * z).exp();
        // A bound far in the tail keeps one draw from stalling a run.
        Duration::from_secs_f64(secs.min(p99 * 4.0))
    }
}

fn extra(per_item: Duration, items: usize) -> Duration {
    per_item.saturating_mul(u32::try_from(items.saturating_sub(1)).unwrap_or(u32::MAX))
}

/// The service as a [`ServiceTable`] times it: latencies per request kind, throughput per
/// partition, and the seed of its draws. See the [module docs](self) for the model and the
/// sources of its figures.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dynatree_testing::Op;
/// use dynatree_testing::service::{Latency, ServiceModel};
///
/// let model = ServiceModel::published()
///     .partition_write_units(500.0)
///     .latency(Op::GetItem, Latency::new(Duration::from_millis(4), Duration::from_millis(9)))
///     .seed(42);
/// assert_eq!(model.latency_of(Op::GetItem).p50(), Duration::from_millis(4));
/// assert_eq!(model.latency_of(Op::PutItem).p50(), Duration::from_micros(7_550));
/// ```
#[derive(Debug, Clone)]
pub struct ServiceModel {
    latencies: BTreeMap<Op, Latency>,
    other: Latency,
    partition_write: f64,
    partition_read: f64,
    burst: Duration,
    table_write: Option<f64>,
    table_read: Option<f64>,
    table_burst: Duration,
    seed: u64,
}

impl ServiceModel {
    /// The published figures (see the [module docs](self)): latencies per request kind, 1,000
    /// write units and 3,000 read units a second per partition with one second of burst, no
    /// table-wide limit (an on-demand table that has scaled), seed 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::Op;
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let model = ServiceModel::published();
    /// let tx = model.latency_of(Op::TransactWriteItems);
    /// assert_eq!(tx.p50_of(5), Duration::from_micros(25_300));
    /// assert_eq!(tx.p50_of(25), Duration::from_micros(32_100));
    /// ```
    pub fn published() -> Self {
        let ms = |m: f64| Duration::from_secs_f64(m / 1000.0);
        let single = Latency::new(ms(7.55), ms(16.2));
        // Through PutItem (1 item) and 25 items at 10.2 / 27.6.
        let batch = single.per_item(ms((10.2 - 7.55) / 24.0), ms((27.6 - 16.2) / 24.0));
        // Through 5 items at 25.3 / 92.5 and 25 at 32.1 / 97.5.
        let (tp50, tp99) = ((32.1 - 25.3) / 20.0, (97.5 - 92.5) / 20.0);
        let transaction =
            Latency::new(ms(25.3 - 4.0 * tp50), ms(92.5 - 4.0 * tp99)).per_item(ms(tp50), ms(tp99));
        let mut latencies = BTreeMap::new();
        for op in [Op::GetItem, Op::PutItem, Op::DeleteItem, Op::UpdateItem] {
            latencies.insert(op, single);
        }
        for op in [Op::Query, Op::Scan, Op::BatchGetItem, Op::BatchWriteItem] {
            latencies.insert(op, batch);
        }
        for op in [Op::TransactWriteItems, Op::TransactGetItems] {
            latencies.insert(op, transaction);
        }
        ServiceModel {
            latencies,
            other: single,
            partition_write: 1000.0,
            partition_read: 3000.0,
            burst: Duration::from_secs(1),
            table_write: None,
            table_read: None,
            table_burst: Duration::from_secs(300),
            seed: 1,
        }
    }

    /// Times requests of kind `op` by `latency`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::Op;
    /// use dynatree_testing::service::{Latency, ServiceModel};
    ///
    /// let fast = Latency::new(Duration::from_millis(1), Duration::from_millis(2));
    /// let model = ServiceModel::published().latency(Op::Query, fast);
    /// assert_eq!(model.latency_of(Op::Query), fast);
    /// ```
    pub fn latency(mut self, op: Op, latency: Latency) -> Self {
        self.latencies.insert(op, latency);
        self
    }

    /// How requests of kind `op` are timed (table management requests: as PutItem).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::Op;
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published();
    /// assert!(m.latency_of(Op::TransactWriteItems).p50() > m.latency_of(Op::PutItem).p50() * 3);
    /// ```
    pub fn latency_of(&self, op: Op) -> Latency {
        self.latencies.get(&op).copied().unwrap_or(self.other)
    }

    /// Write units a second one partition serves (the service: 1,000).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published().partition_write_units(100.0);
    /// # let _ = m;
    /// ```
    pub fn partition_write_units(mut self, per_second: f64) -> Self {
        self.partition_write = per_second.max(0.0);
        self
    }

    /// Read units a second one partition serves (the service: 3,000).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published().partition_read_units(300.0);
    /// # let _ = m;
    /// ```
    pub fn partition_read_units(mut self, per_second: f64) -> Self {
        self.partition_read = per_second.max(0.0);
        self
    }

    /// How much unused capacity a partition keeps, as time at its rate (default one second:
    /// a partition never serves more than its rate over any second after a quiet one).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published().burst(Duration::from_millis(500));
    /// # let _ = m;
    /// ```
    pub fn burst(mut self, burst: Duration) -> Self {
        self.burst = burst;
        self
    }

    /// A table-wide write limit in units a second, with 300 seconds of burst (a provisioned
    /// table, or an on-demand table's maximum).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published().table_write_units(4000.0);
    /// # let _ = m;
    /// ```
    pub fn table_write_units(mut self, per_second: f64) -> Self {
        self.table_write = Some(per_second.max(0.0));
        self
    }

    /// A table-wide read limit in units a second, with 300 seconds of burst.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published().table_read_units(12000.0);
    /// # let _ = m;
    /// ```
    pub fn table_read_units(mut self, per_second: f64) -> Self {
        self.table_read = Some(per_second.max(0.0));
        self
    }

    /// The seed of the latency draws: the same seed and the same requests in the same order
    /// give the same times.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::service::ServiceModel;
    ///
    /// let m = ServiceModel::published().seed(7);
    /// # let _ = m;
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

impl Default for ServiceModel {
    fn default() -> Self {
        ServiceModel::published()
    }
}

/// Why the model throttled a request: the service's `ThrottlingReasons` code and the resource
/// (the partition key, or the table). The source of the [`Throttled`](ErrorKind::Throttled)
/// error.
///
/// # Examples
///
/// ```
/// use std::error::Error as _;
/// use dynatree_testing::service::ThrottlingReason;
///
/// # fn check(e: &dynatree::Error) {
/// if let Some(r) = e.source().and_then(|s| s.downcast_ref::<ThrottlingReason>()) {
///     println!("{} on {}", r.reason(), r.resource());
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottlingReason {
    reason: &'static str,
    resource: String,
}

impl ThrottlingReason {
    /// The code: `TableWriteKeyRangeThroughputExceeded`, `TableReadKeyRangeThroughputExceeded`,
    /// `TableWriteProvisionedThroughputExceeded` or `TableReadProvisionedThroughputExceeded`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::service::ThrottlingReason;
    /// # fn f(r: &ThrottlingReason) -> bool {
    /// r.reason().ends_with("ThroughputExceeded")
    /// # }
    /// ```
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// The partition key whose partition is spent, or `"table"`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::service::ThrottlingReason;
    /// # fn f(r: &ThrottlingReason) -> &str {
    /// r.resource()
    /// # }
    /// ```
    pub fn resource(&self) -> &str {
        &self.resource
    }
}

impl fmt::Display for ThrottlingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.reason, self.resource)
    }
}

impl std::error::Error for ThrottlingReason {}

/// What a [`ServiceTable`] has served: requests by kind, throttled requests by reason, and the
/// service time of them all.
///
/// # Examples
///
/// ```
/// # fn f(table: &dynatree_testing::service::ServiceTable) {
/// let stats = table.stats();
/// println!("{} requests, {} throttled", stats.requests(), stats.throttled());
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceStats {
    requests: BTreeMap<Op, u64>,
    throttled: BTreeMap<&'static str, u64>,
    busy: Duration,
}

impl ServiceStats {
    /// Requests served, throttled ones included.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(table: &dynatree_testing::service::ServiceTable) -> u64 {
    /// table.stats().requests()
    /// # }
    /// ```
    pub fn requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Requests of kind `op`.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(table: &dynatree_testing::service::ServiceTable) -> u64 {
    /// table.stats().requests_of(dynatree_testing::Op::PutItem)
    /// # }
    /// ```
    pub fn requests_of(&self, op: Op) -> u64 {
        self.requests.get(&op).copied().unwrap_or(0)
    }

    /// Requests throttled, for any reason.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(table: &dynatree_testing::service::ServiceTable) -> u64 {
    /// table.stats().throttled()
    /// # }
    /// ```
    pub fn throttled(&self) -> u64 {
        self.throttled.values().sum()
    }

    /// Requests throttled with this [`ThrottlingReason::reason`] code.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(table: &dynatree_testing::service::ServiceTable) -> u64 {
    /// table.stats().throttled_for("TableWriteKeyRangeThroughputExceeded")
    /// # }
    /// ```
    pub fn throttled_for(&self, reason: &str) -> u64 {
        self.throttled.get(reason).copied().unwrap_or(0)
    }

    /// The sum of every request's modelled latency.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(table: &dynatree_testing::service::ServiceTable) -> std::time::Duration {
    /// table.stats().busy()
    /// # }
    /// ```
    pub fn busy(&self) -> Duration {
        self.busy
    }
}

/// A token bucket of units: `rate` a second, at most `cap` kept.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(cap: f64, now: Instant) -> Self {
        Bucket {
            tokens: cap,
            at: now,
        }
    }

    fn refill(&mut self, rate: f64, cap: f64, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + rate * secs).min(cap);
        self.at = now;
    }
}

#[derive(Debug)]
struct State {
    rng: u64,
    write: BTreeMap<String, Bucket>,
    read: BTreeMap<String, Bucket>,
    table_write: Option<Bucket>,
    table_read: Option<Bucket>,
    stats: ServiceStats,
}

#[derive(Debug)]
struct Shared {
    model: ServiceModel,
    state: Mutex<State>,
    /// Requests are applied one at a time, so the units each consumed are its own.
    apply: tokio::sync::Mutex<()>,
}

/// A [`FakeTable`] served as the service would serve it (see the [module docs](self)). Cheap to
/// clone; clones share the table, the partitions and the statistics.
///
/// # Examples
///
/// ```
/// use dynatree_testing::FakeTable;
/// use dynatree_testing::service::{ServiceModel, ServiceTable};
///
/// let fake = FakeTable::new();
/// let table = ServiceTable::new(fake.clone(), ServiceModel::published());
/// let tree = dynatree::Tree::new(table.clone());
/// # let _ = tree;
/// ```
#[derive(Debug, Clone)]
pub struct ServiceTable {
    fake: FakeTable,
    shared: Arc<Shared>,
}

impl ServiceTable {
    /// Serves `fake` under `model`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::service::{ServiceModel, ServiceTable};
    ///
    /// let table = ServiceTable::new(FakeTable::new(), ServiceModel::published().seed(3));
    /// assert_eq!(table.stats().requests(), 0);
    /// ```
    pub fn new(fake: FakeTable, model: ServiceModel) -> Self {
        let rng = model.seed ^ 0x9e37_79b9_7f4a_7c15;
        ServiceTable {
            fake,
            shared: Arc::new(Shared {
                model,
                state: Mutex::new(State {
                    rng,
                    write: BTreeMap::new(),
                    read: BTreeMap::new(),
                    table_write: None,
                    table_read: None,
                    stats: ServiceStats::default(),
                }),
                apply: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The fake table underneath (its rows and metrics).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::service::{ServiceModel, ServiceTable};
    ///
    /// let table = ServiceTable::new(FakeTable::new(), ServiceModel::published());
    /// assert!(table.fake().rows().is_empty());
    /// ```
    pub fn fake(&self) -> &FakeTable {
        &self.fake
    }

    /// What the model has served so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::service::{ServiceModel, ServiceTable};
    ///
    /// let table = ServiceTable::new(FakeTable::new(), ServiceModel::published());
    /// assert_eq!(table.stats().throttled(), 0);
    /// ```
    pub fn stats(&self) -> ServiceStats {
        self.state().stats.clone()
    }

    /// Forgets the statistics (the partitions keep their state).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::service::{ServiceModel, ServiceTable};
    ///
    /// let table = ServiceTable::new(FakeTable::new(), ServiceModel::published());
    /// table.reset_stats();
    /// ```
    pub fn reset_stats(&self) {
        self.state().stats = ServiceStats::default();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A standard normal deviate (Box-Muller over splitmix64).
    fn normal(state: &mut State) -> f64 {
        let mut next = || {
            state.rng = state.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            // In (0, 1]: the log below stays finite.
            ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
        };
        let (u1, u2) = (next(), next());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// The partition or table whose capacity is spent for `request`, if any.
    fn spent(
        &self,
        state: &mut State,
        request: &Request,
        now: Instant,
    ) -> Option<ThrottlingReason> {
        let m = &self.shared.model;
        let writes = request.writes();
        let (rate, cap, buckets) = if writes {
            (
                m.partition_write,
                m.partition_write * m.burst.as_secs_f64(),
                &mut state.write,
            )
        } else {
            (
                m.partition_read,
                m.partition_read * m.burst.as_secs_f64(),
                &mut state.read,
            )
        };
        let mut hashes: Vec<String> = request.keys().into_iter().map(|k| k.hash).collect();
        hashes.sort();
        hashes.dedup();
        for hash in hashes {
            if let Some(b) = buckets.get_mut(&hash) {
                b.refill(rate, cap, now);
                if b.tokens <= 0.0 {
                    let reason = if writes {
                        "TableWriteKeyRangeThroughputExceeded"
                    } else {
                        "TableReadKeyRangeThroughputExceeded"
                    };
                    return Some(ThrottlingReason {
                        reason,
                        resource: hash,
                    });
                }
            }
        }
        let (rate, table) = if writes {
            (m.table_write, &mut state.table_write)
        } else {
            (m.table_read, &mut state.table_read)
        };
        if let (Some(rate), Some(b)) = (rate, table.as_mut()) {
            b.refill(rate, rate * m.table_burst.as_secs_f64(), now);
            if b.tokens <= 0.0 {
                let reason = if writes {
                    "TableWriteProvisionedThroughputExceeded"
                } else {
                    "TableReadProvisionedThroughputExceeded"
                };
                return Some(ThrottlingReason {
                    reason,
                    resource: "table".into(),
                });
            }
        }
        None
    }

    /// Takes what a request consumed from its partitions' buckets and the table's.
    fn debit(&self, state: &mut State, consumed: &[crate::fake::Consumed], now: Instant) {
        let m = &self.shared.model;
        let (mut read, mut write) = (0.0, 0.0);
        for c in consumed {
            read += c.read;
            write += c.write;
            let Some(hash) = &c.hash else { continue };
            for (units, rate, buckets) in [
                (c.write, m.partition_write, &mut state.write),
                (c.read, m.partition_read, &mut state.read),
            ] {
                if units > 0.0 {
                    let cap = rate * m.burst.as_secs_f64();
                    let b = buckets
                        .entry(hash.clone())
                        .or_insert(Bucket::full(cap, now));
                    b.refill(rate, cap, now);
                    b.tokens -= units;
                }
            }
        }
        for (units, rate, bucket) in [
            (write, m.table_write, &mut state.table_write),
            (read, m.table_read, &mut state.table_read),
        ] {
            if let Some(rate) = rate {
                let cap = rate * m.table_burst.as_secs_f64();
                let b = bucket.get_or_insert(Bucket::full(cap, now));
                b.refill(rate, cap, now);
                b.tokens -= units;
            }
        }
    }
}

/// `d` rounded to the nearest millisecond: tokio's timer counts whole milliseconds and would
/// otherwise round every wait up.
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis((d.as_secs_f64() * 1000.0).round() as u64)
}

/// The items a request carries (for its latency): keys, writes or actions; 1 for the rest.
fn items_of(request: &Request) -> usize {
    match request {
        Request::BatchGet { keys, .. } | Request::TransactGet { keys } => keys.len(),
        Request::BatchWrite { requests } => requests.len(),
        Request::TransactWrite { actions, .. } => actions.len(),
        _ => 1,
    }
}

/// The items a response returns (a Query or Scan page's latency grows with them).
fn items_returned(response: &Response) -> usize {
    match response {
        Response::Page(page) => page.items.len(),
        Response::IndexPage(page) => page.items.len(),
        _ => 1,
    }
}

impl Storage for ServiceTable {
    /// Waits half the drawn latency, throttles or applies the request on the fake, then waits
    /// the rest (plus, for a Query or Scan page, what its items add).
    ///
    /// Cancel safety: a request dropped before its half-way point is never applied; one
    /// dropped after it was applied stays applied, as on the service.
    async fn send(&self, request: Request) -> Result<Response> {
        let op = request.op();
        let latency = self.shared.model.latency_of(op);
        let paged = matches!(op, Op::Query | Op::Scan);
        let z = {
            let mut state = self.state();
            *state.stats.requests.entry(op).or_insert(0) += 1;
            Self::normal(&mut state)
        };
        let total = whole_ms(latency.draw(if paged { 1 } else { items_of(&request) }, z));
        let half = whole_ms(total / 2);
        tokio::time::sleep(half).await;
        let applied = {
            let _one = self.shared.apply.lock().await;
            let now = Instant::now();
            let refused = {
                let mut state = self.state();
                let refused = self.spent(&mut state, &request, now);
                if let Some(r) = &refused {
                    *state.stats.throttled.entry(r.reason).or_insert(0) += 1;
                }
                refused
            };
            match refused {
                Some(reason) => Err(Error::new(
                    ErrorKind::Throttled,
                    format!("{op:?} throttled: {reason}"),
                )
                .with_source(reason)),
                None => {
                    let (result, consumed) = self.fake.metered(self.fake.send(request)).await;
                    self.debit(&mut self.state(), &consumed, now);
                    result
                }
            }
        };
        let mut rest = total.saturating_sub(half);
        if paged && let Ok(response) = &applied {
            // Each item of the page beyond the first adds the per-item median.
            rest = whole_ms(rest + extra(latency.item_p50, items_returned(response)));
        }
        self.state().stats.busy += half + rest;
        tokio::time::sleep(rest).await;
        applied
    }
}
