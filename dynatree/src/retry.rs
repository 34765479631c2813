//! The retry policy: the one budget of a tree, and the loop that spends it around each
//! request.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
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
/// A request that only reads is also resent after a transient failure
/// ([`Error::is_transient`](crate::Error::is_transient): an HTTP 5xx answer such as
/// `InternalServerError`, a timeout, a dropped connection); a write is not, as it may have
/// been applied, and its error reaches the caller. Other errors (a failed condition, a
/// validation error, a missing table, access denied) are not retried: they are sent once.
///
/// One call of the API (a `put`, a transaction's `commit`, a `move_subtree`, ...) has one
/// budget of `max_attempts - 1` retries, whichever of its loops spends them: a request resent,
/// a write tried again after a lost race, a batch's unprocessed keys sent again. So retries
/// inside retries add up instead of multiplying. Each step of progress gives the call the whole
/// budget again: an operation's intent recorded or its phase advanced, an object locked,
/// copied, deleted or refreshed, a transaction of a bulk write or an import settled, a page of
/// a check, a change applied. A call that makes no progress sends at most its requests plus
/// `max_attempts - 1`; a long one is not failed by throttling spread over its length. Two
/// loops keep the policy's number of tries of their own, because each of their retries follows
/// another writer's progress: a denormalized copy read again after its version moved, and a
/// move's further rounds of link rewriting after links were created meanwhile. Streams
/// (`list`, `scan`, `descendants`, `export`) and the public [`storage::get_all`] and
/// [`storage::write_all`] are not calls: they retry each request, each batch chunk, on the
/// policy's budget.
///
/// [`storage::get_all`]: crate::storage::get_all
/// [`storage::write_all`]: crate::storage::write_all
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

    /// Runs one request that only reads, `op`, resending it while it is throttled, meets a
    /// transaction in progress ([`ErrorKind::Conflict`]) or fails transiently
    /// ([`Error::is_transient`]: an HTTP 5xx answer, a timeout, a dropped connection), at most
    /// [`max_attempts`](Self::max_attempts) times in all: the loop the tree runs around each
    /// of its reads. A write must not go through it: after a transient failure it may have
    /// been applied.
    ///
    /// # Errors
    ///
    /// The first error it does not resend, at once; the last error after the last try.
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
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// # Tree::new(table.clone()).create_table().await?;
    /// let policy = RetryPolicy::new(4, Duration::from_millis(1), Duration::from_millis(5));
    /// let description = policy.retry_read(|| table.describe_table()).await?;
    /// assert!(description.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn retry_read<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_if(
            |e| matches!(e.kind(), ErrorKind::Throttled | ErrorKind::Conflict) || e.is_transient(),
            op,
        )
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

/// The retries one user call may still make: what every retry loop of a call draws from, at
/// every layer (a resent request, a guarded write tried again after a lost race, a batch's
/// unprocessed items sent again), so that nested loops add up instead of multiplying.
///
/// A public operation opens one when it starts ([`call`]) with `max_attempts - 1` retries in
/// it; an operation it runs as a step of its own (a repository's put, a re-parenting's child
/// moves) draws from the same one. A step of progress ([`progressed`]: a step a subtree
/// operation reports to its observer, a chunk of a bulk write committed, a page of a check)
/// fills it up again, so a long operation is not failed by throttling spread over its whole
/// length, while a call that makes no progress stops after the policy's number of retries,
/// whichever loops spend them.
#[derive(Debug)]
pub(crate) struct CallBudget {
    left: AtomicU32,
    full: u32,
}

tokio::task_local! {
    /// The budget of the user call the current task runs, if one is open.
    static CALL: Arc<CallBudget>;
}

impl CallBudget {
    fn new(policy: RetryPolicy) -> Self {
        let full = policy.max_attempts.saturating_sub(1);
        Self {
            left: AtomicU32::new(full),
            full,
        }
    }

    /// Takes one retry: `false` once none is left.
    fn take(&self) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The open call's budget, if any.
    fn current() -> Option<Arc<CallBudget>> {
        CALL.try_with(Arc::clone).ok()
    }
}

/// Runs `op` as one user call under `policy`: every retry loop it runs draws from one
/// [`CallBudget`]. Inside a call already open, `op` is a step of it and draws from its budget.
/// Work `op` spawns onto other tasks (propagation in the background) is not part of the call.
///
/// The call's future is boxed: a public operation that runs others as its steps (a
/// re-parenting's moves) would otherwise nest their futures inline, deeper than the compiler's
/// type-layout limit lets a caller's crate build, and larger on the stack.
pub(crate) fn call<F: Future>(policy: RetryPolicy, op: F) -> impl Future<Output = F::Output> {
    // Boxed at once, and this is no `async fn`: the future returned holds a pointer, not
    // `op` itself, so that a call nested in a call (a re-parenting's moves) costs its
    // caller's future and stack one pointer, not another copy of everything below it.
    let op = Box::pin(op);
    async move {
        if CallBudget::current().is_some() {
            op.await
        } else {
            CALL.scope(Arc::new(CallBudget::new(policy)), op).await
        }
    }
}

/// A step of the current call is done: its retries are the policy's again (see
/// [`CallBudget`]). Nothing outside a call.
pub(crate) fn progressed() {
    if let Some(c) = CallBudget::current() {
        c.left.store(c.full, Ordering::Release);
    }
}

/// The retries of one guarded loop of a protocol: a lost race (a guard failed, the state it
/// read changed) spends the policy's budget and sleeps its backoff; a wait for a live removal,
/// which finishes or whose lease runs out, does not spend it. Every protocol loop that tries
/// a write again goes through one of these, so the policy is read in one place.
#[derive(Debug)]
pub(crate) struct Backoff {
    policy: RetryPolicy,
    /// The budget of the user call this loop runs in, if one is open.
    call: Option<Arc<CallBudget>>,
    retries: u32,
    waits: u32,
}

impl Backoff {
    /// The policy's number of retries, and no more than the current user call has left (see
    /// [`call`]).
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            call: CallBudget::current(),
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
        if let Some(call) = &self.call
            && !call.take()
        {
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

    /// The policy's number of retries, apart from any call's budget: for a loop whose every
    /// retry follows another writer's progress on the same row (a denormalized copy whose
    /// version moved meanwhile), whose giving up leaves that writer's work in place rather than
    /// failing the call. Its requests still draw from the call's budget when resent.
    pub(crate) fn alone(policy: RetryPolicy) -> Self {
        Self {
            policy,
            call: None,
            retries: 0,
            waits: 0,
        }
    }

    /// The tries of a loop that reads the row again instead of sleeping between them: the
    /// first is free, each later one counts as a lost race ([`spend`](Self::spend)).
    pub(crate) fn tries(mut self) -> impl Iterator<Item = ()> {
        let mut first = true;
        std::iter::from_fn(move || (std::mem::take(&mut first) || self.spend()).then_some(()))
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

/// Sleeps `d` (nothing for zero): every sleep of the runtime is this one (retries, waits for
/// a removal or a lease, a lease's renewal tick, a table's activation, a check's pacing, the
/// stream consumer's idle polls), so that time is passed in one place.
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

    /// A loop that tries again a step which is itself resent while throttled: inside one
    /// call both draw from one budget, so the tries add up to the policy's number instead of
    /// its square; a step of progress gives the budget back.
    #[tokio::test]
    async fn nested_loops_of_one_call_share_its_budget() {
        let p = RetryPolicy::new(4, Duration::ZERO, Duration::ZERO);
        let tries = std::cell::Cell::new(0);
        let throttled = || {
            tries.set(tries.get() + 1);
            async { Err::<(), _>(Error::new(ErrorKind::Throttled, "")) }
        };
        let nested = || async {
            let mut outer = Backoff::new(p);
            loop {
                let r = p.retry_transient(throttled).await;
                if !outer.retry().await {
                    return r;
                }
            }
        };
        // Outside a call: each loop has the policy's budget, 4 x 4 tries.
        assert!(nested().await.is_err());
        assert_eq!(tries.get(), 16);
        // Inside one: 4 tries in all.
        tries.set(0);
        assert!(call(p, nested()).await.is_err());
        assert_eq!(tries.get(), 4);
        // Progress between two steps: each step has the budget again.
        tries.set(0);
        let two_steps = call(p, async {
            let first = p.retry_transient(throttled).await;
            progressed();
            let second = p.retry_transient(throttled).await;
            (first.is_err(), second.is_err())
        });
        assert_eq!(two_steps.await, (true, true));
        assert_eq!(tries.get(), 8);
        // A call inside a call is a step of it: no budget of its own.
        tries.set(0);
        let inner = call(p, async {
            let _ = p.retry_transient(throttled).await;
            call(p, p.retry_transient(throttled)).await
        });
        assert!(inner.await.is_err());
        assert_eq!(tries.get(), 5);
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
