//! The retry policy: the one budget of a tree, and the loop that spends it around each
//! request.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

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
/// [`BATCH_GET_MAX`](crate::storage::BATCH_GET_MAX) keys or
/// [`BATCH_WRITE_MAX`](crate::storage::BATCH_WRITE_MAX) requests. An operation made of several steps
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
        sleep_for(self.delay(retry)).await;
    }

    /// Runs one request, `op`, resending it while it is throttled, at most
    /// [`max_attempts`](Self::max_attempts) times in all, with this policy's delays in
    /// between: the loop the tree runs around each request, for code that calls a
    /// [`Storage`](crate::storage::Storage) directly.
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
        let mut backoff = Backoff::new(*self);
        loop {
            match op().await {
                Err(e) if again(&e) => {
                    if !backoff.retry().await {
                        return Err(e);
                    }
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

/// The retries of one guarded loop of a protocol: a lost race (a guard failed, the state it
/// read changed) spends the policy's budget and sleeps its backoff; a wait for a live removal,
/// which finishes or whose lease runs out, does not spend it. Every protocol loop that tries
/// a write again goes through one of these, so the policy is read in one place.
#[derive(Debug)]
pub(crate) struct Backoff {
    policy: RetryPolicy,
    retries: u32,
    waits: u32,
}

impl Backoff {
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            retries: 0,
            waits: 0,
        }
    }

    /// How many lost races were counted so far.
    pub(crate) fn retries(&self) -> u32 {
        self.retries
    }

    /// Counts a lost race: the number of this retry (0-based, what
    /// [`RetryPolicy::delay`] takes), or `None` once the budget is spent. For a loop that
    /// sleeps in its own way (an intent's owner caps its sleep by its lease).
    pub(crate) fn next_retry(&mut self) -> Option<u32> {
        if self.retries + 1 >= self.policy.max_attempts {
            return None;
        }
        self.retries += 1;
        Some(self.retries - 1)
    }

    /// Counts a wait for a live removal or hold (not a failed try): the number to pass to
    /// [`RetryPolicy::delay`], growing as a retry's does up to the policy's ninth.
    pub(crate) fn next_wait(&mut self) -> u32 {
        let n = self.waits.min(8);
        self.waits = self.waits.saturating_add(1);
        n
    }

    /// Counts a lost race without sleeping: `false` once the budget is spent, and the caller
    /// fails with an error of its own.
    pub(crate) fn spend(&mut self) -> bool {
        self.next_retry().is_some()
    }

    /// Counts a lost race and sleeps the backoff before the next try: `false`, at once, once
    /// the budget is spent.
    pub(crate) async fn retry(&mut self) -> bool {
        match self.next_retry() {
            Some(n) => {
                self.policy.sleep(n).await;
                true
            }
            None => false,
        }
    }

    /// Waits for a live removal or hold to end; not a failed try. The delay grows as a
    /// retry's does, up to the policy's ninth.
    pub(crate) async fn wait(&mut self) {
        let n = self.next_wait();
        self.policy.sleep(n).await;
    }
}

/// Sleeps `d` (nothing for zero): every sleep of the runtime's retries and waits is here or
/// in [`RetryPolicy`].
pub(crate) async fn sleep_for(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
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
