//! Batch reads and writes of any size: chunked at DynamoDB's 100 / 25 item limits, unprocessed
//! items resent with exponential backoff and full jitter, and a typed error after a bound.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::storage::{Key, Storage, WriteRequest};

/// DynamoDB's limit on keys in one BatchGetItem.
pub const BATCH_GET_MAX: usize = 100;
/// DynamoDB's limit on requests in one BatchWriteItem.
pub const BATCH_WRITE_MAX: usize = 25;
/// DynamoDB's limit on actions in one TransactWriteItems.
pub const TRANSACT_MAX: usize = 100;

/// How often and how patiently dynatree retries unprocessed batch items, throttled requests
/// and lost races: the one retry budget of a tree
/// ([`TreeBuilder::retry_policy`](crate::TreeBuilder::retry_policy)).
///
/// The delay before retry `n` (from 0) is a random duration between zero and
/// `min(max_delay, base_delay * 2^n)` ("full jitter").
///
/// # The budget
///
/// Each request a tree operation needs is tried at most [`max_attempts`](Self::max_attempts)
/// times in all: a throttled request ([`ErrorKind::Throttled`]) is resent after a delay, and
/// after the last try the operation fails with the last error (a typed
/// [`Unprocessed`](ErrorKind::Unprocessed) count for batches, [`Conflict`](ErrorKind::Conflict)
/// for a race lost every time). Nothing else resends it:
/// [`DynamoDbTable`](crate::DynamoDbTable) turns the SDK's own retries off, so with the default
/// policy one throttled request costs at most 10 requests, not the SDK's 3 attempts times 10.
/// Other errors (a failed condition, a validation error, a missing table) are not retried:
/// they are sent once. A batch of any size is tried at most `max_attempts` times per chunk of
/// [`BATCH_GET_MAX`] keys or [`BATCH_WRITE_MAX`] requests. An operation made of several steps
/// (read the listing rows, then write) has this budget for each step.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dynatree::RetryPolicy;
///
/// let fast = RetryPolicy::new(5, Duration::from_millis(1), Duration::from_millis(10));
/// assert_eq!(fast.max_attempts(), 5);
/// assert!(fast.delay(10) <= Duration::from_millis(10));
/// ```
///
/// On a tree:
///
/// ```
/// # use std::time::Duration;
/// # use dynatree::{RetryPolicy, Tree};
/// # use dynatree_testing::FakeTable;
/// let tree = Tree::builder(FakeTable::new())
///     .retry_policy(RetryPolicy::new(3, Duration::from_millis(5), Duration::from_millis(50)))
///     .build()?;
/// # Ok::<(), dynatree::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 10 attempts, 25 ms base, 2 s cap: at most about 6 s of waiting.
    fn default() -> Self {
        Self::new(10, Duration::from_millis(25), Duration::from_secs(2))
    }
}

impl RetryPolicy {
    /// A policy of `max_attempts` tries (at least 1) with the given delays.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree::RetryPolicy;
    ///
    /// let once = RetryPolicy::new(0, Duration::ZERO, Duration::ZERO);
    /// assert_eq!(once.max_attempts(), 1); // every request is sent at least once
    /// ```
    pub fn new(max_attempts: u32, base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            base_delay,
            max_delay,
        }
    }

    /// How many times one request is tried in all (the first try included).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::RetryPolicy;
    ///
    /// assert_eq!(RetryPolicy::default().max_attempts(), 10);
    /// ```
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The (random) delay before retry number `retry` (0-based).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree::RetryPolicy;
    ///
    /// let p = RetryPolicy::new(5, Duration::from_millis(10), Duration::from_millis(50));
    /// assert!(p.delay(0) <= Duration::from_millis(10));
    /// assert!(p.delay(30) <= Duration::from_millis(50));
    /// ```
    pub fn delay(&self, retry: u32) -> Duration {
        let cap = self
            .base_delay
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_delay);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(fastrand::u64(0..=nanos))
    }

    pub(crate) async fn sleep(&self, retry: u32) {
        let d = self.delay(retry);
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }

    /// Runs one request, `op`, resending it while it is throttled, at most
    /// [`max_attempts`](Self::max_attempts) times in all, with this policy's delays in
    /// between: the loop the tree runs around each request, for code that calls a
    /// [`Storage`] directly.
    ///
    /// # Errors
    ///
    /// The first error that is not [`ErrorKind::Throttled`], at once; the last
    /// [`Throttled`](ErrorKind::Throttled) error after the last try.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `op`: a dropped future may have sent any number of tries.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use dynatree::{RetryPolicy, Tree};
    /// # use dynatree::storage::{Key, Storage};
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// # Tree::new(table.clone()).create_table().await?;
    /// let policy = RetryPolicy::new(4, Duration::from_millis(1), Duration::from_millis(5));
    /// let key = Key::new("h", "r");
    /// let row = policy.retry_throttled(|| table.get_item(&key, true)).await?;
    /// assert!(row.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn retry_throttled<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_if(|e| e.kind() == ErrorKind::Throttled, op)
            .await
    }

    /// Calls `op` until it returns anything but an error `again` accepts, or until the budget
    /// is spent, sleeping before each retry.
    pub(crate) async fn retry_if<T, F, Fut>(
        &self,
        again: impl Fn(&Error) -> bool,
        mut op: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut retry = 0;
        loop {
            match op().await {
                Err(e) if again(&e) && retry + 1 < self.max_attempts => {
                    self.sleep(retry).await;
                    retry += 1;
                }
                other => return other,
            }
        }
    }

    /// As [`retry_throttled`](Self::retry_throttled), and also retries the service's
    /// [`ErrorKind::Conflict`] (`TransactionConflictException`: a single-item write met an item
    /// that a transaction is changing; `TransactionInProgressException`: a transaction with the
    /// same client token is still running). Either way nothing was applied, so sending the same
    /// request again is safe. What every request of a tree goes through.
    pub(crate) async fn retry_transient<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_if(
            |e| matches!(e.kind(), ErrorKind::Throttled | ErrorKind::Conflict),
            op,
        )
        .await
    }
}

/// Reads every key (duplicates removed), 100 per BatchGetItem, resending unprocessed keys with
/// backoff. Returns the items found, in no particular order.
///
/// # Errors
///
/// [`ErrorKind::Unprocessed`] with [`Error::unprocessed_count`] if keys were still unprocessed
/// after `policy.max_attempts()` tries; any other backend error at once. Throttled requests are
/// retried like unprocessed keys.
///
/// # Cancel safety
///
/// Cancel safe (reads only).
///
/// # Examples
///
/// ```
/// # use dynatree::{storage, RetryPolicy, Tree};
/// # use dynatree::storage::Key;
/// # use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// # Tree::new(table.clone()).create_table().await?;
/// let keys: Vec<Key> = (0..250).map(|i| Key::new("h", format!("{i:03}"))).collect();
/// let found = storage::get_all(&table, keys, true, &RetryPolicy::default()).await?;
/// assert!(found.is_empty());
/// assert_eq!(table.metrics().requests("BatchGetItem"), 3); // 100 + 100 + 50
/// # Ok(()) }
/// ```
pub async fn get_all<S: Storage>(
    storage: &S,
    keys: Vec<Key>,
    consistent: bool,
    policy: &RetryPolicy,
) -> Result<Vec<Item>> {
    get_all_projected(storage, keys, consistent, &[], policy).await
}

/// [`get_all`] reading only the attributes `projection` names (empty: all).
pub(crate) async fn get_all_projected<S: Storage>(
    storage: &S,
    keys: Vec<Key>,
    consistent: bool,
    projection: &[String],
    policy: &RetryPolicy,
) -> Result<Vec<Item>> {
    let mut seen = HashSet::new();
    let keys: Vec<Key> = keys
        .into_iter()
        .filter(|k| seen.insert(k.clone()))
        .collect();
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(BATCH_GET_MAX) {
        let mut pending = chunk.to_vec();
        let mut retry = 0;
        loop {
            let sent = if projection.is_empty() {
                storage.batch_get(pending.clone(), consistent).await
            } else {
                storage
                    .batch_get_projected(pending.clone(), consistent, projection)
                    .await
            };
            match sent {
                Ok(out) => {
                    found.extend(out.items);
                    pending = out.unprocessed;
                }
                Err(e) if e.kind() == ErrorKind::Throttled => {}
                Err(e) => return Err(e),
            }
            if pending.is_empty() {
                break;
            }
            if retry + 1 >= policy.max_attempts() {
                return Err(Error::unprocessed(pending.len(), "keys"));
            }
            policy.sleep(retry).await;
            retry += 1;
        }
    }
    Ok(found)
}

/// Writes every request, 25 per BatchWriteItem, resending unprocessed ones with backoff.
///
/// Not atomic: use it for rows whose order does not matter (the tree's own writes use
/// transactions).
///
/// # Errors
///
/// [`ErrorKind::Unprocessed`] with [`Error::unprocessed_count`] = the requests not written
/// (this chunk's leftovers plus every chunk not yet sent) after `policy.max_attempts()` tries.
///
/// # Cancel safety
///
/// A dropped future may have written any prefix of the chunks; writing again is idempotent
/// for puts and deletes.
///
/// # Examples
///
/// ```
/// # use dynatree::{storage, RetryPolicy, Tree};
/// # use dynatree::storage::{Key, WriteRequest};
/// # use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// # Tree::new(table.clone()).create_table().await?;
/// let rows = (0..30).map(|i| WriteRequest::Put(Key::new("h", format!("{i:02}")).into_item()));
/// storage::write_all(&table, rows.collect(), &RetryPolicy::default()).await?;
/// assert_eq!(table.metrics().requests("BatchWriteItem"), 2); // 25 + 5
/// # Ok(()) }
/// ```
pub async fn write_all<S: Storage>(
    storage: &S,
    requests: Vec<WriteRequest>,
    policy: &RetryPolicy,
) -> Result<()> {
    let mut chunks = requests.chunks(BATCH_WRITE_MAX);
    let mut left: usize = requests.len();
    for chunk in chunks.by_ref() {
        let mut pending = chunk.to_vec();
        let mut retry = 0;
        loop {
            match storage.batch_write(pending.clone()).await {
                Ok(unprocessed) => pending = unprocessed,
                Err(e) if e.kind() == ErrorKind::Throttled => {}
                Err(e) => return Err(e),
            }
            if pending.is_empty() {
                break;
            }
            if retry + 1 >= policy.max_attempts() {
                // This chunk's leftovers plus every chunk not yet sent.
                let not_sent = left - chunk.len();
                return Err(Error::unprocessed(
                    pending.len() + not_sent,
                    "write requests",
                ));
            }
            policy.sleep(retry).await;
            retry += 1;
        }
        left -= chunk.len();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retry_throttled_spends_exactly_the_budget() {
        let p = RetryPolicy::new(4, Duration::ZERO, Duration::ZERO);
        let tries = std::cell::Cell::new(0);
        // Always throttled: 4 tries, then the last error.
        let r: Result<()> = p
            .retry_throttled(|| {
                tries.set(tries.get() + 1);
                async { Err(Error::new(ErrorKind::Throttled, "")) }
            })
            .await;
        assert!(r.unwrap_err().is_throttled());
        assert_eq!(tries.get(), 4);
        // Throttled twice, then done: 3 tries.
        tries.set(0);
        let r = p
            .retry_throttled(|| {
                tries.set(tries.get() + 1);
                let n = tries.get();
                async move {
                    if n <= 2 {
                        Err(Error::new(ErrorKind::Throttled, ""))
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
        assert_eq!(r.unwrap(), 3);
        // Any other error: once.
        tries.set(0);
        let r: Result<()> = p
            .retry_throttled(|| {
                tries.set(tries.get() + 1);
                async { Err(Error::new(ErrorKind::Validation, "")) }
            })
            .await;
        assert!(r.unwrap_err().is_validation());
        assert_eq!(tries.get(), 1);
    }

    #[test]
    fn delay_is_capped() {
        let p = RetryPolicy::new(3, Duration::from_millis(10), Duration::from_millis(50));
        for n in 0..40 {
            let d = p.delay(n);
            assert!(d <= Duration::from_millis(50), "{d:?}");
            if n == 0 {
                assert!(d <= Duration::from_millis(10));
            }
        }
    }
}
