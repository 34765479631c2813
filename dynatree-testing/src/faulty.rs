//! [`Faulty`]: fault injection for any [`Storage`], DynamoDB Local included.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dynatree::storage::{Key, Op, Request, Response, Storage};
use dynatree::{Error, ErrorKind, Result};

use crate::fault::{Fault, FaultPlan, FaultRule};

/// Wraps any backend and makes chosen requests fail, before or after they are applied, or
/// leaves batch items unprocessed, so crash-safety tests run against the real service too.
/// [`FakeTable`](crate::FakeTable) has the same faults built in; both take the same
/// [`FaultRule`]s.
///
/// - [`Fault::Throttle`] and [`Fault::Fail`]: the request is not sent.
/// - [`Fault::FailAfterApply`]: the request is sent, then its response replaced by an error.
/// - [`Fault::Unprocessed`]: of a BatchGetItem or BatchWriteItem, only the first `processed`
///   items are sent; the rest come back unprocessed (with whatever the backend itself left
///   unprocessed). Other requests run normally.
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree_testing::{FakeTable, Fault, Faulty};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// let table = Faulty::new(FakeTable::new());
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// table.inject(0, Fault::Fail); // the next request fails
/// assert!(tree.put(["a"], &V { v: 1 }).await.is_err());
/// tree.put(["a"], &V { v: 1 }).await?; // and the same call again succeeds
/// assert!(table.requests() > 3);
/// # Ok(()) }
/// ```
///
/// Clones share the backend, the request counter and the fault plan.
#[derive(Debug)]
pub struct Faulty<S> {
    shared: Arc<Shared<S>>,
}

#[derive(Debug)]
struct Shared<S> {
    inner: S,
    count: AtomicU64,
    faults: FaultPlan,
}

impl<S> Clone for Faulty<S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: Storage + 'static> Faulty<S> {
    /// `inner`, with no faults yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{FakeTable, Faulty};
    ///
    /// let table = Faulty::new(FakeTable::new());
    /// assert_eq!(table.requests(), 0);
    /// ```
    pub fn new(inner: S) -> Self {
        Self {
            shared: Arc::new(Shared {
                inner,
                count: AtomicU64::new(0),
                faults: FaultPlan::new(),
            }),
        }
    }

    /// The wrapped backend.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::{FakeTable, Faulty};
    ///
    /// let table = Faulty::new(FakeTable::new());
    /// assert!(table.inner().rows().is_empty());
    /// ```
    pub fn inner(&self) -> &S {
        &self.shared.inner
    }

    /// Requests served so far (those failed by a fault included).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{FakeTable, Faulty};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = Faulty::new(FakeTable::new());
    /// Tree::new(table.clone()).create_table().await?;
    /// assert!(table.requests() >= 1);
    /// # Ok(()) }
    /// ```
    pub fn requests(&self) -> u64 {
        self.shared.count.load(Ordering::SeqCst)
    }

    /// Makes request number `nth` (0-based, counted from now, whatever its operation) suffer
    /// `fault`. This depends on the exact requests dynatree sends; prefer
    /// [`inject_rule`](Self::inject_rule), which matches requests by operation and key.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{FakeTable, Fault, Faulty};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct V { v: u8 }
    /// let table = Faulty::new(FakeTable::new());
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject(1, Fault::Fail);
    /// assert!(tree.get::<V>(["a"]).await.is_ok());
    /// assert!(tree.get::<V>(["a"]).await.is_err());
    /// # Ok(()) }
    /// ```
    pub fn inject(&self, nth: u64, fault: Fault) {
        self.shared.faults.inject_nth(nth, fault);
    }

    /// Makes every request suffer `fault` until [`clear_faults`](Self::clear_faults).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{FakeTable, Fault, Faulty};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug)] struct V { v: u8 }
    /// let table = Faulty::new(FakeTable::new());
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_always(Fault::Throttle);
    /// assert!(tree.get::<V>(["a"]).await.unwrap_err().is_throttled());
    /// # Ok(()) }
    /// ```
    pub fn inject_always(&self, fault: Fault) {
        self.shared.faults.add(FaultRule::new(fault).always());
    }

    /// Injects a fault where `rule` says: by operation, key or hash-key prefix, on the n-th
    /// matching request, once, n times or always. See [`FaultRule`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{storage, RetryPolicy, Tree};
    /// # use dynatree::storage::{Key, WriteRequest};
    /// # use dynatree_testing::{FakeTable, Fault, FaultRule, Faulty, Op};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = Faulty::new(FakeTable::new());
    /// Tree::new(table.clone()).create_table().await?;
    /// table.inject_rule(
    ///     FaultRule::new(Fault::Unprocessed { processed: 1 }).operation(Op::BatchWriteItem),
    /// );
    /// let rows = (0..3)
    ///     .map(|i| WriteRequest::Put(Key::new("h", i.to_string()).into_item()))
    ///     .collect();
    /// storage::write_all(&table, rows, &RetryPolicy::default()).await?; // the rest is resent
    /// assert_eq!(table.inner().rows().len(), 3);
    /// assert_eq!(table.inner().metrics().requests("BatchWriteItem"), 2);
    /// # Ok(()) }
    /// ```
    pub fn inject_rule(&self, rule: FaultRule) {
        self.shared.faults.add(rule);
    }

    /// Removes every injected fault (the log of [`fired`](Self::fired) faults stays).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::{FakeTable, Fault, Faulty};
    /// let table = Faulty::new(FakeTable::new());
    /// table.inject_always(Fault::Fail);
    /// table.clear_faults();
    /// assert!(!table.plan().is_armed());
    /// ```
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// The faults that fired so far, in order, with the operation they struck.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::{FakeTable, Fault, FaultRule, Faulty, Op};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// let table = Faulty::new(FakeTable::new());
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::TransactWriteItems));
    /// tree.put(["a"], &V { v: 1 }).await?; // retried after the throttle
    /// assert_eq!(table.fired(), [(Op::TransactWriteItems, Fault::Throttle)]);
    /// # Ok(()) }
    /// ```
    pub fn fired(&self) -> Vec<(Op, Fault)> {
        self.shared.faults.fired()
    }

    /// The wrapper's fault plan.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree_testing::{FakeTable, Fault, Faulty};
    /// let table = Faulty::new(FakeTable::new());
    /// table.inject(0, Fault::Fail);
    /// assert!(table.plan().is_armed());
    /// ```
    pub fn plan(&self) -> &FaultPlan {
        &self.shared.faults
    }

    /// Starts a request: counts it, fails it now if its fault says so, else returns the fault
    /// to apply later.
    fn begin(&self, op: Op, keys: &[Key]) -> Result<Option<Fault>> {
        self.shared.count.fetch_add(1, Ordering::SeqCst);
        match self.shared.faults.on_request(op, keys) {
            Some(Fault::Throttle) => Err(Error::new(
                ErrorKind::Throttled,
                format!("injected throttle on {op}"),
            )),
            Some(Fault::Fail) => Err(Error::new(
                ErrorKind::Backend,
                format!("injected failure of {op}"),
            )),
            Some(Fault::InternalError) => Err(crate::fault::internal_error(op)),
            other => Ok(other),
        }
    }

    fn end<T>(fault: Option<&Fault>, op: Op, r: Result<T>) -> Result<T> {
        match r {
            Ok(_) if fault == Some(&Fault::FailAfterApply) => Err(Error::new(
                ErrorKind::Backend,
                format!("injected lost response of {op} (it was applied)"),
            )),
            other => other,
        }
    }
}

impl<S: Storage + 'static> Storage for Faulty<S> {
    async fn send(&self, mut request: Request) -> Result<Response> {
        let op = request.op();
        let fault = self.begin(op, &request.keys())?;
        let held = match fault {
            Some(Fault::Unprocessed { processed }) => request.split_batch(processed),
            _ => None,
        };
        let r = match held {
            Some(rest) if request.batch_len() == Some(0) && !rest.is_empty() => {
                Ok(rest.into_response())
            }
            Some(rest) => self
                .shared
                .inner
                .send(request)
                .await
                .map(|r| rest.add_to(r)),
            None => self.shared.inner.send(request).await,
        };
        Self::end(fault.as_ref(), op, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeTable;

    #[tokio::test]
    async fn projected_reads_suffer_the_faults_of_their_operation() {
        let table = Faulty::new(FakeTable::new());
        table
            .create_table(dynatree::storage::Billing::OnDemand, &[])
            .await
            .unwrap();
        let (k, other) = (Key::new("h", "r"), Key::new("h", "s"));
        let names = ["a".to_owned()];
        table.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::GetItem));
        let e = table
            .get_item_projected(&k, true, &names)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Throttled);
        assert_eq!(table.inner().metrics().requests("GetItem"), 0);
        table.clear_faults();
        table.inject_rule(
            FaultRule::new(Fault::Unprocessed { processed: 1 }).operation(Op::BatchGetItem),
        );
        let out = table
            .batch_get_projected(vec![k, other.clone()], true, &names)
            .await
            .unwrap();
        assert_eq!(out.unprocessed, [other]);
        assert_eq!(table.fired().len(), 2);
    }
}
