//! Fault injection shared by [`FakeTable`](crate::FakeTable) and [`Faulty`](crate::Faulty):
//! [`Fault`]s placed by [`FaultRule`]s that match requests by operation and key, so a test
//! says "the transaction that writes under `a`" rather than "request number 3", and does not
//! depend on how many requests dynatree sends before it.

use std::sync::{Mutex, MutexGuard};

use dynatree::storage::{Key, Op};

/// A failure to inject into a request of a [`FakeTable`](crate::FakeTable) or a
/// [`Faulty`](crate::Faulty) backend.
///
/// # Examples
///
/// ```
/// # use dynatree::{storage, RetryPolicy, Tree};
/// # use dynatree::storage::{Key, WriteRequest};
/// # use dynatree_testing::{FakeTable, Fault};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// # Tree::new(table.clone()).create_table().await?;
/// table.inject_always(Fault::Unprocessed { processed: 0 });
/// let rows = vec![WriteRequest::Put(Key::new("h", "r").into_item())];
/// let err = storage::write_all(&table, rows, &RetryPolicy::default()).await.unwrap_err();
/// assert_eq!(err.unprocessed_count(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The request is throttled ([`ErrorKind::Throttled`](dynatree::ErrorKind::Throttled));
    /// nothing is applied.
    Throttle,
    /// The request fails ([`ErrorKind::Backend`](dynatree::ErrorKind::Backend)); nothing is
    /// applied.
    Fail,
    /// The request is applied, then its response is lost
    /// ([`ErrorKind::Backend`](dynatree::ErrorKind::Backend)): the "timed out, but it happened"
    /// case. A request that fails by itself (a condition, a cancelled transaction, a limit)
    /// returns its own error, as nothing was applied.
    FailAfterApply,
    /// The service fails with an internal error, as DynamoDB's `InternalServerError` (HTTP
    /// 500): [`ErrorKind::Backend`](dynatree::ErrorKind::Backend), transient
    /// ([`Error::is_transient`](dynatree::Error::is_transient)). Nothing is applied. A tree
    /// resends a read that fails so; a write's error reaches the caller.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::InternalError).operation(Op::GetItem));
    /// assert_eq!(tree.get::<serde_json::Value>(["a"]).await?, None); // resent, answered
    /// table.inject_rule(FaultRule::new(Fault::InternalError).operation(Op::TransactWriteItems));
    /// let e = tree.put(["b"], &serde_json::json!({})).await.unwrap_err();
    /// assert!(e.is_transient());
    /// assert_eq!(e.service_code(), Some("InternalServerError"));
    /// # Ok(()) }
    /// ```
    InternalError,
    /// For BatchGetItem and BatchWriteItem: only the first `processed` items are processed, the
    /// rest come back unprocessed. Other requests run normally.
    Unprocessed {
        /// How many items are processed.
        processed: usize,
    },
    /// Another transaction is changing an item the request touches, as DynamoDB reports it:
    /// TransactWriteItems and TransactGetItems are cancelled
    /// ([`ErrorKind::TransactionCanceled`](dynatree::ErrorKind::TransactionCanceled)) with the
    /// reason `TransactionConflict` for their first action and `None` for the others;
    /// PutItem, DeleteItem and UpdateItem fail with
    /// [`ErrorKind::Conflict`](dynatree::ErrorKind::Conflict) (`TransactionConflictException`).
    /// Nothing is applied. Other requests run normally.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::{Condition, Key, Storage, TransactAction};
    /// use dynatree::{ErrorKind, Tree};
    /// use dynatree_testing::{Fault, FakeTable, FaultRule, Op};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// Tree::new(table.clone()).create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Conflict).operation(Op::TransactWriteItems));
    /// let put = |r: &str| TransactAction::Put {
    ///     item: Key::new("h", r).into_item(),
    ///     condition: Condition::Always,
    /// };
    /// let e = table.transact_write(vec![put("a"), put("b")]).await.unwrap_err();
    /// let codes: Vec<&str> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
    /// assert_eq!(codes, ["TransactionConflict", "None"]);
    /// assert!(e.is_retryable());
    /// assert!(table.rows().is_empty());
    /// # Ok(()) }
    /// ```
    Conflict,
}
/// Where a [`Fault`] strikes: requests of one operation, touching one key or keys under a
/// hash-key prefix, the `nth` such request, `times` times.
///
/// The keys a request touches: its item key (GetItem, PutItem, DeleteItem), every key of a
/// batch or transaction, and for a Query on the table its partition, as a [`Key`] with that
/// hash and an empty range (so [`key_prefix`](Self::key_prefix) matches it and
/// [`key`](Self::key) never does). Scans, index queries and table operations touch no key: a
/// rule with a key filter never matches them.
///
/// A rule counts every request it matches, from the moment it is added, whether or not another
/// rule fired on it; it fires on matches `nth` to `nth + times - 1`. When several rules are due
/// on one request, the one added first fires (one request suffers one fault).
///
/// # Examples
///
/// The transaction of a put of a new name under `a` fails once, however many reads dynatree
/// sends first (an overwrite of `a/x`, which this tree wrote, would be a PutItem):
///
/// ```
/// use dynatree::Tree;
/// use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// tree.put(["a", "x"], &V { v: 0 }).await?;
/// table.inject_rule(
///     FaultRule::new(Fault::FailAfterApply)
///         .operation(Op::TransactWriteItems)
///         .key_prefix("¦a¦"),
/// );
/// let _: Option<V> = tree.get(["a", "x"]).await?; // not a transaction: not counted
/// tree.put(["b"], &V { v: 1 }).await?; // not under `a`: untouched
/// assert!(tree.put(["a", "y"], &V { v: 1 }).await.is_err()); // applied, response lost
/// assert_eq!(tree.get::<V>(["a", "y"]).await?, Some(V { v: 1 }));
/// tree.put(["a", "y"], &V { v: 1 }).await?; // the rule fired once
/// assert_eq!(table.fired(), [(Op::TransactWriteItems, Fault::FailAfterApply)]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a rule does nothing until it is injected"]
pub struct FaultRule {
    fault: Fault,
    op: Option<Op>,
    key: Option<Key>,
    key_prefix: Option<String>,
    nth: u64,
    times: Option<u64>,
    /// Fires on one matching request in this many (1: every one).
    period: u64,
}

impl FaultRule {
    /// A rule that makes the next request (of any operation, on any key) suffer `fault`, once.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultRule, Op};
    ///
    /// let rule = FaultRule::new(Fault::Fail);
    /// assert!(rule.matches(Op::Scan, &[]));
    /// ```
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            op: None,
            key: None,
            key_prefix: None,
            nth: 0,
            times: Some(1),
            period: 1,
        }
    }

    /// Only requests of operation `op`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultRule, Op};
    ///
    /// let rule = FaultRule::new(Fault::Fail).operation(Op::GetItem);
    /// assert!(!rule.matches(Op::Query, &[]));
    /// ```
    pub fn operation(mut self, op: Op) -> Self {
        self.op = Some(op);
        self
    }

    /// Only requests that touch exactly `key` (one of their keys equals it).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Key;
    /// use dynatree_testing::{Fault, FaultRule, Op};
    ///
    /// let rule = FaultRule::new(Fault::Fail).key(Key::new("¦a", "¦"));
    /// assert!(rule.matches(Op::GetItem, &[Key::new("¦a", "¦")]));
    /// assert!(!rule.matches(Op::GetItem, &[Key::new("¦", "a")]));
    /// ```
    pub fn key(mut self, key: Key) -> Self {
        self.key = Some(key);
        self
    }

    /// Only requests that touch a key whose hash key starts with `prefix`.
    ///
    /// With dynatree's layout, the object row of `a/b` has hash key `¦a¦b` and the listing
    /// rows under `a` have `¦a¦`, so the prefix `¦a¦` matches everything strictly under `a`,
    /// and `¦a` also matches `a`'s own object row (and `ab`'s: add the separator to be exact).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Key;
    /// use dynatree_testing::{Fault, FaultRule, Op};
    ///
    /// let rule = FaultRule::new(Fault::Fail).key_prefix("¦a¦");
    /// assert!(rule.matches(Op::BatchWriteItem, &[Key::new("¦x", "¦"), Key::new("¦a¦b", "¦")]));
    /// assert!(!rule.matches(Op::BatchWriteItem, &[Key::new("¦a", "¦")]));
    /// ```
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = Some(prefix.into());
        self
    }

    /// Fires on the `k`-th matching request (0-based, counted from when the rule is injected)
    /// instead of the first.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::GetItem).nth(1));
    /// assert!(tree.get::<V>(["a"]).await.is_ok());
    /// assert!(tree.get::<V>(["a"]).await.is_err());
    /// assert!(tree.get::<V>(["a"]).await.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn nth(mut self, k: u64) -> Self {
        self.nth = k;
        self
    }

    /// Fires `n` times (default 1): on `n` matching requests in a row, or on every `k`-th of
    /// them after [`every`](Self::every).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// // Two throttles in a row: dynatree's retry policy absorbs them.
    /// table.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::TransactWriteItems).times(2));
    /// tree.put(["a"], &V { v: 1 }).await?;
    /// assert_eq!(table.fired().len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Fires on every matching request from the `nth` on, until the faults are cleared.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::Tree;
    /// use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct V { v: u8 }
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::GetItem).always());
    /// assert!(tree.get::<V>(["a"]).await.is_err());
    /// assert!(tree.get::<V>(["a"]).await.is_err());
    /// table.clear_faults();
    /// assert!(tree.get::<V>(["a"]).await.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn always(mut self) -> Self {
        self.times = None;
        self
    }

    /// Fires on every `k`-th matching request from the [`nth`](Self::nth) on (the `nth`, the
    /// `nth + k`-th, ...), until the faults are cleared: with `k = 2`, every other request.
    /// A `k` of 0 counts as 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Key;
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Throttle).every(2));
    /// let key = [Key::new("h", "r")];
    /// let fired: Vec<bool> = (0..5).map(|_| plan.on_request(Op::GetItem, &key).is_some()).collect();
    /// assert_eq!(fired, [true, false, true, false, true]);
    /// ```
    pub fn every(mut self, k: u64) -> Self {
        self.period = k.max(1);
        self.times = None;
        self
    }

    /// The fault this rule injects.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultRule};
    ///
    /// assert_eq!(FaultRule::new(Fault::Throttle).fault(), &Fault::Throttle);
    /// ```
    pub fn fault(&self) -> &Fault {
        &self.fault
    }

    /// Whether a request of operation `op` touching `keys` matches the rule's filters
    /// (operation and key; not its turn, which [`FaultPlan`] keeps).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Key;
    /// use dynatree_testing::{Fault, FaultRule, Op};
    ///
    /// let rule = FaultRule::new(Fault::Fail)
    ///     .operation(Op::TransactWriteItems)
    ///     .key_prefix("¦a¦");
    /// let keys = [Key::new("¦a¦", "b"), Key::new("¦a¦b", "¦")];
    /// assert!(rule.matches(Op::TransactWriteItems, &keys));
    /// assert!(!rule.matches(Op::BatchWriteItem, &keys));
    /// assert!(!rule.matches(Op::TransactWriteItems, &[Key::new("¦", "a")]));
    /// ```
    pub fn matches(&self, op: Op, keys: &[Key]) -> bool {
        if self.op.is_some_and(|o| o != op) {
            return false;
        }
        if let Some(k) = &self.key
            && !keys.contains(k)
        {
            return false;
        }
        if let Some(p) = &self.key_prefix
            && !keys.iter().any(|k| k.hash.starts_with(p.as_str()))
        {
            return false;
        }
        true
    }

    /// Whether the `seen`-th match (0-based) is one the rule fires on.
    fn due(&self, seen: u64) -> bool {
        if seen < self.nth || !(seen - self.nth).is_multiple_of(self.period) {
            return false;
        }
        self.times
            .is_none_or(|t| (seen - self.nth) / self.period < t)
    }

    /// Whether the rule can still fire after `seen` matches.
    fn spent(&self, seen: u64) -> bool {
        self.times
            .is_some_and(|t| seen >= self.nth.saturating_add(t.saturating_mul(self.period)))
    }
}

/// The faults of one backend: the injected [`FaultRule`]s, each with how many requests it has
/// matched, and the log of faults that fired. [`FakeTable`](crate::FakeTable) and
/// [`Faulty`](crate::Faulty) each hold one (see their `plan()`); a simulator or a custom
/// backend can hold its own and ask it, per request, which fault strikes.
///
/// It is thread-safe (a mutex inside), so the backend's methods take `&self`.
///
/// # Examples
///
/// ```
/// use dynatree::storage::Key;
/// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
///
/// let plan = FaultPlan::new();
/// plan.add(FaultRule::new(Fault::Throttle).operation(Op::GetItem).nth(1));
/// let key = [Key::new("h", "r")];
/// assert_eq!(plan.on_request(Op::GetItem, &key), None);
/// assert_eq!(plan.on_request(Op::PutItem, &key), None); // not a GetItem: not counted
/// assert_eq!(plan.on_request(Op::GetItem, &key), Some(Fault::Throttle));
/// assert_eq!(plan.on_request(Op::GetItem, &key), None); // fired once
/// assert_eq!(plan.fired(), [(Op::GetItem, Fault::Throttle)]);
/// ```
#[derive(Debug, Default)]
pub struct FaultPlan {
    state: Mutex<PlanState>,
}

#[derive(Debug, Default)]
struct PlanState {
    rules: Vec<Armed>,
    fired: Vec<(Op, Fault)>,
}

#[derive(Debug)]
struct Armed {
    rule: FaultRule,
    /// Requests matched so far.
    seen: u64,
    /// Placed by [`FaultPlan::inject_nth`]: a request number, dropped by
    /// [`FaultPlan::clear_numbered`].
    numbered: bool,
}

impl FaultPlan {
    /// A plan with no rules.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{FaultPlan, Op};
    ///
    /// assert_eq!(FaultPlan::new().on_request(Op::Scan, &[]), None);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, PlanState> {
        // A panicking test thread must not poison every later assertion.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a rule; it counts requests from now.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Fail).operation(Op::Scan));
    /// assert_eq!(plan.on_request(Op::Scan, &[]), Some(Fault::Fail));
    /// ```
    pub fn add(&self, rule: FaultRule) {
        self.lock().rules.push(Armed {
            rule,
            seen: 0,
            numbered: false,
        });
    }

    /// Makes request number `nth` (0-based, counted from now, any operation) suffer `fault`:
    /// `FaultRule::new(fault).nth(nth)`, also removed by
    /// [`clear_numbered`](Self::clear_numbered).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.inject_nth(1, Fault::Fail);
    /// assert_eq!(plan.on_request(Op::GetItem, &[]), None);
    /// assert_eq!(plan.on_request(Op::Query, &[]), Some(Fault::Fail));
    /// ```
    pub fn inject_nth(&self, nth: u64, fault: Fault) {
        self.lock().rules.push(Armed {
            rule: FaultRule::new(fault).nth(nth),
            seen: 0,
            numbered: true,
        });
    }

    /// Removes every rule (the log of [`fired`](Self::fired) faults stays).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Fail).always());
    /// plan.clear();
    /// assert_eq!(plan.on_request(Op::Scan, &[]), None);
    /// ```
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// Removes the rules placed by [`inject_nth`](Self::inject_nth) (request numbers), keeping
    /// the others.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.inject_nth(0, Fault::Fail);
    /// plan.add(FaultRule::new(Fault::Throttle));
    /// plan.clear_numbered();
    /// assert_eq!(plan.on_request(Op::Scan, &[]), Some(Fault::Throttle));
    /// ```
    pub fn clear_numbered(&self) {
        self.lock().rules.retain(|a| !a.numbered);
    }

    /// The faults that fired so far, in order, with the operation they struck.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Fail));
    /// plan.on_request(Op::DescribeTable, &[]);
    /// assert_eq!(plan.fired(), [(Op::DescribeTable, Fault::Fail)]);
    /// ```
    pub fn fired(&self) -> Vec<(Op, Fault)> {
        self.lock().fired.clone()
    }

    /// Empties the log of [`fired`](Self::fired) faults.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Fail));
    /// plan.on_request(Op::Scan, &[]);
    /// plan.clear_fired();
    /// assert!(plan.fired().is_empty());
    /// ```
    pub fn clear_fired(&self) {
        self.lock().fired.clear();
    }

    /// Whether some rule may still fire.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Fail).operation(Op::PutItem));
    /// assert!(plan.is_armed());
    /// plan.on_request(Op::PutItem, &[]);
    /// assert!(!plan.is_armed());
    /// ```
    pub fn is_armed(&self) -> bool {
        self.lock().rules.iter().any(|a| !a.rule.spent(a.seen))
    }

    /// Counts one request of operation `op` touching `keys` against every rule, and returns
    /// the fault it must suffer, if any (recorded in [`fired`](Self::fired)). Rules that can
    /// no longer fire are dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::storage::Key;
    /// use dynatree_testing::{Fault, FaultPlan, FaultRule, Op};
    ///
    /// let plan = FaultPlan::new();
    /// plan.add(FaultRule::new(Fault::Fail).key(Key::new("h", "r")));
    /// assert_eq!(plan.on_request(Op::GetItem, &[Key::new("h", "s")]), None);
    /// assert_eq!(plan.on_request(Op::GetItem, &[Key::new("h", "r")]), Some(Fault::Fail));
    /// ```
    pub fn on_request(&self, op: Op, keys: &[Key]) -> Option<Fault> {
        let mut state = self.lock();
        if state.rules.is_empty() {
            return None;
        }
        let mut fault = None;
        for armed in &mut state.rules {
            if !armed.rule.matches(op, keys) {
                continue;
            }
            if fault.is_none() && armed.rule.due(armed.seen) {
                fault = Some(armed.rule.fault.clone());
            }
            armed.seen += 1;
        }
        state.rules.retain(|a| !a.rule.spent(a.seen));
        if let Some(f) = &fault {
            state.fired.push((op, f.clone()));
        }
        fault
    }
}

/// The error of an injected [`Fault::InternalError`] on `op`.
pub(crate) fn internal_error(op: impl std::fmt::Display) -> dynatree::Error {
    dynatree::Error::new(
        dynatree::ErrorKind::Backend,
        format!("injected internal error of {op}"),
    )
    .with_service_code("InternalServerError")
    .with_operation(op.to_string())
    .with_transient()
}
