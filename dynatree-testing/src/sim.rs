//! A deterministic interleaving simulator: several `Tree` operations run concurrently against
//! one backend, every request they send waits at a gate, and the simulator chooses which
//! request goes next (and whether it suffers a fault). It explores the schedules of a scenario
//! exhaustively up to a bound, then seeded-randomly; after each schedule it runs
//! [`Tree::resume`] from a fresh tree and checks the table (see [`check_rows`]), the
//! serial-order model (see [`Model`]) and your own checks. A failing schedule prints a replay
//! string that reruns exactly that schedule.
//!
//! How it works (ideas from loom, shuttle and FoundationDB's simulation, code of its own):
//!
//! - Each operation is its own process: its own [`Tree`] (own cache) over its own
//!   [`SimStorage`] handle. Every request of that handle parks at a gate until the scheduler
//!   grants it, then runs against the shared backend.
//! - The scheduler polls every operation itself, in one task, on a current-thread tokio
//!   runtime with paused time: retry backoffs and lease waits take no real time and happen in a
//!   deterministic order. When no request is parked but an operation sleeps, time passes (tokio
//!   jumps to the next timer). Optionally "let time pass" is also a choice while requests are
//!   parked ([`Sim::allow_wait`]). `fastrand` (dynatree's ids and jitter) is seeded per
//!   schedule.
//! - A choice is one parked request to grant, optionally with a [`SimFault`]: a request
//!   [`Fault`] (fail before apply, fail after apply i.e. a lost response, throttle, a
//!   transaction conflict, unprocessed batch items) or the death of the operation's process at that request
//!   ([`SimFault::Crash`], [`SimFault::CrashAfterApply`]).
//! - Exploration: a depth-first search over choice sequences (stateless model checking: each
//!   schedule reruns from the start), bounded by the number of preemptions (switching away from
//!   an operation that could go on, as in CHESS) and of faults; when the search does not finish
//!   within half the budget, the rest are random schedules, alternately uniform and PCT-like
//!   (random operation priorities with a few priority change points).
//!
//! Budget knobs (environment): `DYNATREE_SIM_SCHEDULES` (schedules per scenario),
//! `DYNATREE_SIM_SEED` (seed of the random phase), `DYNATREE_SIM_REPLAY` (replay one schedule
//! instead of exploring: run a single test with it), `DYNATREE_SIM_TRACE=1` (print each step
//! as it happens, for a schedule that hangs), `DYNATREE_SIM_FENCED=1` (every tree built in the
//! process uses [`fenced_puts`](dynatree::TreeBuilder::fenced_puts): the whole suite explores
//! that mode).
//!
//! # Examples
//!
//! Two of your own operations racing on a [`FakeTable`](crate::FakeTable): a put of `x/b`
//! while `x/a` is deleted (a delete that may prune `x` when it names nothing else). Whatever the
//! order, the put must never be lost while reporting success.
//!
//! ```
//! use dynatree_testing::FakeTable;
//! use dynatree_testing::sim::Sim;
//!
//! #[derive(serde::Serialize, Clone)]
//! struct V { v: u8 }
//!
//! let report = Sim::new("put vs delete_subtree", FakeTable::new)
//!     .setup(|tree| async move { tree.put(["x", "a"], &V { v: 1 }).await })
//!     .op("put x/b", |tree| async move { tree.put(["x", "b"], &V { v: 2 }).await })
//!     .model(|m| m.put(["x", "b"], &V { v: 2 }))
//!     .op("delete x", |tree| async move { tree.delete(["x", "a"]).await })
//!     .model(|m| m.delete(["x", "a"]))
//!     .check(|end| {
//!         // Your own invariant: whatever happened, `x/a` is gone.
//!         match end.model.get(["x", "a"]) {
//!             None => Ok(()),
//!             Some(_) => Err("x/a survived".into()),
//!         }
//!     })
//!     .schedules(200)
//!     .run(); // panics with a replay string if a schedule fails
//! assert!(report.schedules > 1);
//! ```

mod check;
mod history;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use dynatree::storage::{Key, Op, Request, Response, Storage, TransactAction, WriteRequest};
use dynatree::{Error, ErrorKind, IntoPath, Result, Tree, storage::Item};
use futures::FutureExt;
use futures::future::LocalBoxFuture;

pub use self::check::{Model, Stored, Violation, check_rows};
use self::history::CallModel;
pub use self::history::{Call, Calls, Observed, check_history};
use crate::Fault;

/// What the simulator can do to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimFault {
    /// A request fault: [`Fault::Fail`] (nothing applied), [`Fault::FailAfterApply`] (applied,
    /// response lost), [`Fault::Throttle`], [`Fault::Conflict`] (transactions and single-item
    /// writes only), [`Fault::InternalError`] (nothing applied; opt-in, not in
    /// [`all`](SimFault::all)), or [`Fault::Unprocessed`] (batch requests only).
    Request(Fault),
    /// The operation's process dies as it sends this request: nothing applied, the operation
    /// never returns (its future is dropped).
    Crash,
    /// The operation's process dies right after this request was applied.
    CrashAfterApply,
    /// The operation's process stops right before it sends this request (a `SIGSTOP`, a VM
    /// frozen, a stop-the-world pause) for this long, while the others go on; then the request
    /// waits at the gate again. Not in [`all`](SimFault::all): place it with
    /// [`Sim::faults`], with a length beyond a lease or a trust window.
    Pause(Duration),
}

impl SimFault {
    /// Every fault the explorer places by default: fail before apply, lost response, throttle,
    /// a transaction conflict, and both crashes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::Fault;
    /// use dynatree_testing::sim::SimFault;
    ///
    /// let all = SimFault::all();
    /// assert_eq!(all.len(), 6);
    /// assert!(all.contains(&SimFault::Request(Fault::Conflict)));
    /// assert!(all.contains(&SimFault::Request(Fault::FailAfterApply)));
    /// assert!(all.contains(&SimFault::Crash) && all.contains(&SimFault::CrashAfterApply));
    /// // Unprocessed batch items are opt-in: they only fit batch requests.
    /// assert!(!all.iter().any(|f| matches!(f, SimFault::Request(Fault::Unprocessed { .. }))));
    /// ```
    pub fn all() -> Vec<SimFault> {
        vec![
            SimFault::Request(Fault::Fail),
            SimFault::Request(Fault::FailAfterApply),
            SimFault::Request(Fault::Throttle),
            SimFault::Request(Fault::Conflict),
            SimFault::Crash,
            SimFault::CrashAfterApply,
        ]
    }

    fn code(&self) -> String {
        match self {
            SimFault::Request(Fault::Fail) => "F".into(),
            SimFault::Request(Fault::FailAfterApply) => "L".into(),
            SimFault::Request(Fault::Throttle) => "T".into(),
            SimFault::Request(Fault::Conflict) => "K".into(),
            SimFault::Request(Fault::InternalError) => "I".into(),
            SimFault::Request(Fault::Unprocessed { processed }) => format!("U{processed}"),
            SimFault::Crash => "C".into(),
            SimFault::CrashAfterApply => "X".into(),
            SimFault::Pause(d) => format!("P{}", d.as_millis()),
        }
    }

    fn parse(s: &str) -> Option<SimFault> {
        Some(match s {
            "F" => SimFault::Request(Fault::Fail),
            "L" => SimFault::Request(Fault::FailAfterApply),
            "T" => SimFault::Request(Fault::Throttle),
            "K" => SimFault::Request(Fault::Conflict),
            "I" => SimFault::Request(Fault::InternalError),
            "C" => SimFault::Crash,
            "X" => SimFault::CrashAfterApply,
            p if p.starts_with('P') => {
                SimFault::Pause(Duration::from_millis(p.strip_prefix('P')?.parse().ok()?))
            }
            u => SimFault::Request(Fault::Unprocessed {
                processed: u.strip_prefix('U')?.parse().ok()?,
            }),
        })
    }

    /// Whether the fault only makes sense on a write (it applies the request).
    fn needs_write(&self) -> bool {
        matches!(
            self,
            SimFault::Request(Fault::FailAfterApply) | SimFault::CrashAfterApply
        )
    }

    /// Whether the fault can happen to request `p`: after-apply faults to writes, unprocessed
    /// items to batches, conflicts to transactions and single-item writes.
    fn fits(&self, p: &Parked) -> bool {
        match self {
            SimFault::Request(Fault::Unprocessed { .. }) => p.request.starts_with("Batch"),
            SimFault::Request(Fault::Conflict) => matches!(
                p.request,
                "TransactWriteItems" | "TransactGetItems" | "PutItem" | "DeleteItem" | "UpdateItem"
            ),
            k => !k.needs_write() || p.write,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The gate shared by the scheduler and every operation's storage handle.

#[derive(Debug, Clone)]
struct Parked {
    op: usize,
    seq: u64,
    request: &'static str,
    detail: String,
    write: bool,
}

#[derive(Debug, Default)]
struct GateState {
    next_seq: Vec<u64>,
    parked: BTreeMap<(usize, u64), Parked>,
    granted: HashMap<(usize, u64), Option<SimFault>>,
    /// The wakers of parked requests: a request inside a combinator that polls only what was
    /// woken (`buffered`, `FuturesUnordered`) is polled again when it is granted.
    wakers: HashMap<(usize, u64), std::task::Waker>,
    in_flight: usize,
    crashed: Vec<bool>,
    /// Operations whose future has ended: a request of theirs now comes from a task they
    /// spawned, which the scheduler does not poll (it is woken for them).
    ended: Vec<bool>,
    trace: Vec<String>,
    /// The scheduler's waker, while it waits: woken when a request parks or a granted one
    /// returns (from a task the scheduler does not poll itself, such as one an operation
    /// spawned).
    scheduler: Option<std::task::Waker>,
    /// The schedule's logical clock: ticks at every granted request and every call event.
    clock: u64,
}

#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
}

impl Gate {
    fn new(ops: usize) -> Self {
        Self {
            state: Mutex::new(GateState {
                next_seq: vec![0; ops],
                crashed: vec![false; ops],
                ended: vec![false; ops],
                ..GateState::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn note(&self, line: String) {
        if live_trace() {
            eprintln!("{line}");
        }
        self.lock().trace.push(line);
    }
}

/// Waits at the gate until the scheduler grants the request.
struct Wait {
    gate: Arc<Gate>,
    key: (usize, u64),
    done: bool,
}

impl Future for Wait {
    type Output = Option<SimFault>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.gate.lock();
        let granted = st.granted.remove(&self.key);
        match granted {
            Some(f) => {
                st.wakers.remove(&self.key);
                drop(st);
                self.done = true;
                Poll::Ready(f)
            }
            // The scheduler polls the operation again right after granting it, and wakes this
            // request's waker so that combinators poll it.
            None => {
                st.wakers.insert(self.key, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if !self.done {
            let mut st = self.gate.lock();
            st.parked.remove(&self.key);
            st.wakers.remove(&self.key);
        }
    }
}

/// Counts a granted request as running until its backend call returns.
struct InFlight(Arc<Gate>, usize);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
        if st.ended.get(self.1).copied().unwrap_or(false)
            && let Some(w) = st.scheduler.take()
        {
            w.wake();
        }
    }
}

/// One simulated process's handle on the shared backend: every request waits for the
/// scheduler's grant, then runs against the backend (with the fault the scheduler chose).
///
/// The handles of setup and recovery (no operation index) are not gated.
pub struct SimStorage<B> {
    backend: Arc<B>,
    op: Option<usize>,
    gate: Arc<Gate>,
}

impl<B> fmt::Debug for SimStorage<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimStorage").field("op", &self.op).finish()
    }
}

impl<B> Clone for SimStorage<B> {
    fn clone(&self) -> Self {
        Self {
            backend: Arc::clone(&self.backend),
            op: self.op,
            gate: Arc::clone(&self.gate),
        }
    }
}

impl<B: Storage + 'static> SimStorage<B> {
    /// The shared backend.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::{OpOutcome, Sim, SimStorage};
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("peek at the table", FakeTable::new)
    ///     .schedules(1)
    ///     .setup(|tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("count rows", |tree| async move {
    ///         let sim: &SimStorage<FakeTable> = tree.storage().downcast_ref().expect("a sim handle");
    ///         // The shared table itself: not gated, no fault, not a request of the operation.
    ///         Ok(sim.backend().rows().len())
    ///     })
    ///     .check(|end| match &end.outcomes[0] {
    ///         OpOutcome::Ok(rows) if rows != "0" => Ok(()),
    ///         other => Err(format!("the setup's rows are missing: {other}")),
    ///     })
    ///     .run();
    /// ```
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The index of the operation this handle belongs to; `None` for setup and recovery.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use std::rc::Rc;
    /// use dynatree::Tree;
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::{Sim, SimStorage};
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let seen = Rc::new(RefCell::new(Vec::new()));
    /// let log = Rc::clone(&seen);
    /// Sim::new("who builds trees", FakeTable::new)
    ///     .schedules(1)
    ///     .tree(move |s: SimStorage<FakeTable>| {
    ///         log.borrow_mut().push(s.op());
    ///         Tree::new(s)
    ///     })
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put b", |tree| async move { tree.put(["b"], &V { v: 2 }).await })
    ///     .run();
    /// let seen = seen.borrow();
    /// assert!(seen.contains(&Some(0)) && seen.contains(&Some(1))); // one per operation
    /// assert!(seen.contains(&None)); // recovery's tree, not gated
    /// ```
    pub fn op(&self) -> Option<usize> {
        self.op
    }

    /// Parks at the gate; returns the fault to apply, with the in-flight guard.
    async fn enter(
        &self,
        request: &'static str,
        write: bool,
        detail: String,
    ) -> Option<(Option<SimFault>, InFlight)> {
        let op = self.op?;
        loop {
            let (fault, guard) = self.park(op, request, write, detail.clone()).await;
            if let Some(SimFault::Pause(d)) = fault {
                // Not sent yet: the process is stopped, the others go on.
                drop(guard);
                self.gate
                    .note(format!("    op{op} paused for {d:?} before {request}"));
                tokio::time::sleep(d).await;
                continue;
            }
            return Some((fault, guard));
        }
    }

    /// Parks one request at the gate until it is granted.
    async fn park(
        &self,
        op: usize,
        request: &'static str,
        write: bool,
        detail: String,
    ) -> (Option<SimFault>, InFlight) {
        let key = {
            let mut st = self.gate.lock();
            let seq = st.next_seq[op];
            st.next_seq[op] += 1;
            st.parked.insert(
                (op, seq),
                Parked {
                    op,
                    seq,
                    request,
                    detail,
                    write,
                },
            );
            if st.ended.get(op).copied().unwrap_or(false)
                && let Some(w) = st.scheduler.take()
            {
                w.wake();
            }
            (op, seq)
        };
        let fault = Wait {
            gate: Arc::clone(&self.gate),
            key,
            done: false,
        }
        .await;
        (fault, InFlight(Arc::clone(&self.gate), op))
    }

    async fn crash(&self, guard: InFlight) -> ! {
        if let Some(op) = self.op {
            self.gate.lock().crashed[op] = true;
        }
        drop(guard);
        std::future::pending::<()>().await;
        unreachable!("a crashed operation is never polled to completion")
    }

    /// Parks a request of `actions` actions at the gate, then sends it (`call`) or applies
    /// its fault.
    async fn gated_actions<T>(
        &self,
        request: &'static str,
        write: bool,
        actions: usize,
        detail: impl FnOnce() -> String,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let Some((fault, guard)) = self.enter(request, write, detail()).await else {
            return call.await;
        };
        let r = match fault {
            None | Some(SimFault::Request(Fault::Unprocessed { .. }) | SimFault::Pause(_)) => {
                call.await
            }
            Some(SimFault::Request(Fault::Throttle)) => Err(Error::new(
                ErrorKind::Throttled,
                format!("simulated throttle of {request}"),
            )),
            Some(SimFault::Request(Fault::FailAfterApply)) => {
                let _ = call.await;
                Err(Error::new(
                    ErrorKind::Backend,
                    format!("simulated lost response of {request} (it was applied)"),
                ))
            }
            Some(SimFault::Request(Fault::Conflict)) if request.starts_with("Transact") => {
                Err(crate::fake::conflict_cancellation(actions))
            }
            Some(SimFault::Request(Fault::Conflict)) => Err(Error::new(
                ErrorKind::Conflict,
                format!("simulated transaction conflict on {request}"),
            )
            .with_service_code("TransactionConflictException")),
            Some(SimFault::Request(Fault::InternalError)) => {
                Err(crate::fault::internal_error(request))
            }
            Some(SimFault::Crash) => self.crash(guard).await,
            Some(SimFault::CrashAfterApply) => {
                let _ = call.await;
                self.crash(guard).await
            }
            Some(SimFault::Request(_)) => Err(Error::new(
                ErrorKind::Backend,
                format!("simulated failure of {request}"),
            )),
        };
        drop(guard);
        self.note_result(&r);
        r
    }

    fn note_result<T>(&self, r: &Result<T>) {
        if let Some(op) = self.op {
            self.gate.note(match r {
                Ok(_) => format!("    op{op} <- ok"),
                Err(e) => format!("    op{op} <- {:?}: {e}", e.kind()),
            });
        }
    }

    /// The fault a batch request would suffer, for [`Fault::Unprocessed`].
    async fn enter_batch(
        &self,
        request: &'static str,
        write: bool,
        detail: String,
    ) -> std::result::Result<(Option<usize>, Option<InFlight>), Error> {
        let Some((fault, guard)) = self.enter(request, write, detail).await else {
            return Ok((None, None));
        };
        match fault {
            None | Some(SimFault::Pause(_)) => Ok((None, Some(guard))),
            Some(SimFault::Request(Fault::Unprocessed { processed })) => {
                Ok((Some(processed), Some(guard)))
            }
            Some(SimFault::Request(Fault::Throttle)) => Err(Error::new(
                ErrorKind::Throttled,
                format!("simulated throttle of {request}"),
            )),
            Some(SimFault::Request(Fault::InternalError)) => {
                Err(crate::fault::internal_error(request))
            }
            Some(SimFault::Crash) => self.crash(guard).await,
            // Batches are never offered after-apply faults (see `SimFault::needs_write`).
            Some(_) => Err(Error::new(
                ErrorKind::Backend,
                format!("simulated failure of {request}"),
            )),
        }
    }
}

fn key_str(k: &Key) -> String {
    format!("{}|{}", k.hash, k.range)
}

fn item_key(i: &Item) -> String {
    Key::from_item(i).map_or_else(|| "?".into(), |k| key_str(&k))
}

fn action_str(a: &TransactAction) -> String {
    match a {
        TransactAction::Put { item, .. } => format!("Put {}", item_key(item)),
        TransactAction::Delete { key, .. } => format!("Del {}", key_str(key)),
        TransactAction::ConditionCheck { key, .. } => format!("Check {}", key_str(key)),
        TransactAction::Update { key, .. } => format!("Upd {}", key_str(key)),
    }
}

/// What the schedule's log shows of a request: the keys it names, or its index.
fn request_detail(request: &Request) -> String {
    let keys = |keys: &[Key]| keys.iter().map(key_str).collect::<Vec<_>>().join(", ");
    match request {
        Request::GetItem { key, .. }
        | Request::DeleteItem { key, .. }
        | Request::UpdateItem { key, .. } => key_str(key),
        Request::PutItem { item, .. } => item_key(item),
        Request::Query { query, .. } => query.hash.clone(),
        Request::QueryIndex { query, .. } => format!("index {}", query.index.name),
        Request::BatchGet { keys: k, .. } | Request::TransactGet { keys: k } => keys(k),
        Request::BatchWrite { requests } => requests
            .iter()
            .map(|r| match r {
                WriteRequest::Put(i) => format!("Put {}", item_key(i)),
                WriteRequest::Delete(k) => format!("Del {}", key_str(k)),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Request::TransactWrite { actions, .. } => actions
            .iter()
            .map(action_str)
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    }
}

impl<B: Storage + 'static> Storage for SimStorage<B> {
    async fn send(&self, mut request: Request) -> Result<Response> {
        let op = request.op();
        if op == Op::DescribeTable {
            // Not a scheduling point: the table's description reads no row, so no order of it
            // against other requests can matter (a tree describes its table once, before its
            // first request). Counted as running, so the scheduler waits for it rather than
            // taking the process for a sleeper.
            let _running = self.op.map(|op| {
                self.gate.lock().in_flight += 1;
                InFlight(Arc::clone(&self.gate), op)
            });
            return self.backend.send(request).await;
        }
        let write = request.writes()
            || matches!(op, Op::CreateTable | Op::UpdateTable | Op::UpdateTimeToLive);
        let detail = request_detail(&request);
        if request.batch_len().is_some() {
            let (processed, guard) = self.enter_batch(op.name(), write, detail).await?;
            let held = processed.and_then(|n| request.split_batch(n));
            let r = self.backend.send(request).await;
            let r = r.map(|r| match held {
                Some(rest) => rest.add_to(r),
                None => r,
            });
            drop(guard);
            self.note_result(&r);
            return r;
        }
        // A transaction's cancellation reasons are one per action.
        let actions = match &request {
            Request::TransactGet { keys } => keys.len(),
            Request::TransactWrite { actions, .. } => actions.len(),
            _ => 1,
        };
        self.gated_actions(
            op.name(),
            write,
            actions,
            || detail,
            self.backend.send(request),
        )
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

/// How one operation ended in a schedule.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpOutcome {
    /// It returned `Ok`; the value's `Debug` form.
    Ok(String),
    /// It returned an error.
    Err(Error),
    /// Its process died at a request ([`SimFault::Crash`], [`SimFault::CrashAfterApply`]).
    Crashed,
    /// It panicked; the panic message.
    Panicked(String),
}

impl OpOutcome {
    /// Whether it returned `Ok`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Error, ErrorKind};
    /// use dynatree_testing::sim::OpOutcome;
    ///
    /// assert!(OpOutcome::Ok("()".into()).is_ok());
    /// assert!(!OpOutcome::Err(Error::new(ErrorKind::Locked, "")).is_ok());
    /// assert!(!OpOutcome::Crashed.is_ok());
    /// ```
    pub fn is_ok(&self) -> bool {
        matches!(self, OpOutcome::Ok(_))
    }

    /// The error's kind, if it returned an error.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use dynatree::ErrorKind;
    ///
    /// Sim::new("read a missing link", FakeTable::new)
    ///     .schedules(1)
    ///     .op("read_link", |tree| async move { tree.read_link(["nothing"]).await })
    ///     .check(|end| match end.outcomes[0].err_kind() {
    ///         Some(ErrorKind::NotFound) => Ok(()),
    ///         _ => Err(format!("expected not found, got {}", end.outcomes[0])),
    ///     })
    ///     .run();
    /// ```
    pub fn err_kind(&self) -> Option<ErrorKind> {
        match self {
            OpOutcome::Err(e) => Some(e.kind()),
            _ => None,
        }
    }
}

impl fmt::Display for OpOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpOutcome::Ok(v) => write!(f, "Ok({v})"),
            OpOutcome::Err(e) => write!(f, "Err({:?}: {e})", e.kind()),
            OpOutcome::Crashed => f.write_str("crashed"),
            OpOutcome::Panicked(m) => write!(f, "panicked: {m}"),
        }
    }
}

/// The end of one schedule, after recovery, as user checks ([`Sim::check`]) see it.
#[derive(Debug)]
#[non_exhaustive]
pub struct End<'a> {
    /// How each operation ended, by index.
    pub outcomes: &'a [OpOutcome],
    /// The objects in the table.
    pub model: &'a Model,
    /// Every raw row of the table.
    pub rows: &'a [Item],
}

impl End<'_> {
    /// Whether operation `i` (by the order of [`Sim::op`]) returned `Ok`.
    ///
    /// # Panics
    ///
    /// If there is no operation `i`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use dynatree_testing::Fault;
    /// use dynatree_testing::sim::SimFault;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("a put that reports Ok is stored", FakeTable::new)
    ///     .schedules(20)
    ///     .faults(1, [SimFault::Request(Fault::Fail)])
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .check(|end| {
    ///         if end.ok(0) && end.model.get(["a"]).is_none() {
    ///             return Err("put a returned Ok but a is missing".into());
    ///         }
    ///         Ok(())
    ///     })
    ///     .run();
    /// ```
    pub fn ok(&self, i: usize) -> bool {
        self.outcomes[i].is_ok()
    }

    /// The number attribute `attr` of the object at `path` (links not followed), if there is
    /// such an object with such a number (as a `u64`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("last writer wins", FakeTable::new)
    ///     .schedules(20)
    ///     .op("put a=1", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put a=2", |tree| async move { tree.put(["a"], &V { v: 2 }).await })
    ///     .check(|end| match end.number(["a"], "v") {
    ///         Some(1 | 2) => Ok(()),
    ///         other => Err(format!("a.v is {other:?}")),
    ///     })
    ///     .run();
    /// ```
    pub fn number(&self, path: impl IntoPath, attr: &str) -> Option<u64> {
        match self.model.get(path)? {
            Stored::Object(item) => match item.get(attr)? {
                dynatree::storage::Value::N(n) => n.parse().ok(),
                _ => None,
            },
            Stored::Link(_) => None,
        }
    }

    /// Whether the table holds the row with this `Key` and `Child` (a listing row, say).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("listing rows of a put", FakeTable::new)
    ///     .schedules(20)
    ///     .setup(|tree| async move { tree.put(["x", "a"], &V { v: 1 }).await })
    ///     .op("put x/b", |tree| async move { tree.put(["x", "b"], &V { v: 2 }).await })
    ///     .op("delete x/a", |tree| async move { tree.delete(["x", "a"]).await })
    ///     .check(|end| {
    ///         // `x/b` is listed under `x`, and `x` under the root.
    ///         if end.ok(0) && !(end.has_row("¦x¦", "b") && end.has_row("¦", "x")) {
    ///             return Err("x/b is not listed".into());
    ///         }
    ///         Ok(())
    ///     })
    ///     .run();
    /// ```
    pub fn has_row(&self, key: &str, child: &str) -> bool {
        self.rows.iter().any(|r| {
            r.get_s(dynatree::storage::HASH_KEY) == Some(key)
                && r.get_s(dynatree::storage::RANGE_KEY) == Some(child)
        })
    }
}

type TreeFactory<B> = Box<dyn Fn(SimStorage<B>) -> Tree>;
type OpFn = Box<dyn Fn(Tree, Calls) -> LocalBoxFuture<'static, Result<String>>>;
type SetupFn = Box<dyn Fn(Tree) -> LocalBoxFuture<'static, Result<String>>>;
type ModelFn = dyn Fn(&mut Model) -> std::result::Result<(), ErrorKind>;
type CheckFn = Box<dyn Fn(&End<'_>) -> std::result::Result<(), String>>;

struct OpSpec {
    name: String,
    run: OpFn,
    model: Option<std::rc::Rc<ModelFn>>,
    /// A process ([`Sim::process`]): its calls are its history.
    process: bool,
    /// How far its wall clock is ahead of the others' (negative: behind), in milliseconds.
    skew_ms: i64,
}

/// A scenario: a backend, setup, concurrent operations (each with an optional model of its
/// effect), checks, and the exploration settings. See the [module docs](self).
#[must_use]
pub struct Sim<B> {
    name: String,
    backend: Box<dyn Fn() -> B>,
    tree: TreeFactory<B>,
    setup: Vec<SetupFn>,
    /// Steps after the recovery ([`Sim::finish`]).
    finish: Vec<SetupFn>,
    ops: Vec<OpSpec>,
    checks: Vec<CheckFn>,
    schedules: usize,
    max_faults: usize,
    faults: Vec<SimFault>,
    preemptions: Option<usize>,
    seed: u64,
    allow_wait: bool,
    real_time: bool,
    recovery_wait: Duration,
    refusals: Vec<ErrorKind>,
    max_steps: usize,
}

impl<B> fmt::Debug for Sim<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("name", &self.name)
            .field("ops", &self.ops.iter().map(|o| &o.name).collect::<Vec<_>>())
            .field("schedules", &self.schedules)
            .field("max_faults", &self.max_faults)
            .field("preemptions", &self.preemptions)
            .finish_non_exhaustive()
    }
}

/// What an exploration did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// The scenario's name.
    pub name: String,
    /// Schedules run.
    pub schedules: usize,
    /// Whether the bounded depth-first search covered every schedule within its bounds.
    pub exhaustive: bool,
    /// Wall-clock time taken.
    pub elapsed: Duration,
    /// Schedules whose history was checked (a process among the operations, every other
    /// operation with a model).
    pub histories: usize,
    /// Calls in the checked histories, in all.
    pub calls: usize,
    /// The most requests one operation sent in one schedule (retries and waits included): how
    /// close the scenario came to a livelock.
    pub most_requests: usize,
}

/// What the schedules of one exploration added up to.
#[derive(Debug, Default)]
struct Stats {
    histories: usize,
    calls: usize,
    most_requests: usize,
}

/// Polls an operation with its process's clock skew.
struct Skewed<F> {
    skew_ms: i64,
    inner: F,
}

impl<F: Future + Unpin> Future for Skewed<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let skew = self.skew_ms;
        dynatree::__private::with_clock_skew(skew, || Pin::new(&mut self.inner).poll(cx))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sim `{}`: {} schedules ({}) in {:.2?}",
            self.name,
            self.schedules,
            if self.exhaustive {
                "bounded search exhausted"
            } else {
                "bounded search cut off, then random"
            },
            self.elapsed
        )?;
        if self.histories > 0 {
            write!(
                f,
                "; {} histories checked ({} calls)",
                self.histories, self.calls
            )?;
        }
        write!(
            f,
            "; at most {} requests by one operation",
            self.most_requests
        )
    }
}

/// A schedule that broke a check, with the string that replays it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Failure {
    /// The scenario's name.
    pub name: String,
    /// Pass to [`Sim::replay`] (or set `DYNATREE_SIM_REPLAY`) to rerun exactly this schedule.
    pub replay: String,
    /// What broke.
    pub message: String,
    /// Every granted request and its result, in order.
    pub trace: Vec<String>,
    /// How many schedules ran before (and including) this one.
    pub schedules: usize,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sim `{}` failed on schedule {}:\n{}",
            self.name, self.schedules, self.message
        )?;
        writeln!(f, "trace:")?;
        for l in &self.trace {
            writeln!(f, "  {l}")?;
        }
        write!(f, "replay: DYNATREE_SIM_REPLAY='{}'", self.replay)
    }
}

impl std::error::Error for Failure {}

/// `DYNATREE_SIM_TRACE=1`: print every step of the trace as it happens (for a schedule that
/// hangs instead of failing).
fn live_trace() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("DYNATREE_SIM_TRACE").is_some_and(|v| v == "1"))
}

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

impl<B: Storage + 'static> Sim<B> {
    /// A scenario named `name` on a fresh backend per schedule from `backend` (the simulator
    /// creates the table). Defaults: 500 schedules (or `DYNATREE_SIM_SCHEDULES`), no faults,
    /// at most 2 preemptions in the bounded search, paused time.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let report = Sim::new("two puts", FakeTable::new)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put b", |tree| async move { tree.put(["b"], &V { v: 2 }).await })
    ///     .schedules(10)
    ///     .run();
    /// assert_eq!(report.name, "two puts");
    /// assert!(report.schedules >= 2); // both orders at least
    /// ```
    pub fn new(name: impl Into<String>, backend: impl Fn() -> B + 'static) -> Self {
        if std::env::var("DYNATREE_SIM_FENCED").is_ok_and(|v| v == "1") {
            // Every tree of this process with fenced puts (TreeBuilder::fenced_puts).
            dynatree::__private::set_fenced_puts_default(true);
        }
        Self {
            name: name.into(),
            backend: Box::new(backend),
            tree: Box::new(Tree::new),
            setup: Vec::new(),
            finish: Vec::new(),
            ops: Vec::new(),
            checks: Vec::new(),
            schedules: env_num("DYNATREE_SIM_SCHEDULES").map_or(500, |n| n as usize),
            max_faults: 0,
            faults: SimFault::all(),
            preemptions: Some(2),
            seed: env_num("DYNATREE_SIM_SEED").unwrap_or(0x5eed),
            allow_wait: false,
            real_time: false,
            recovery_wait: Duration::from_secs(3600),
            refusals: vec![ErrorKind::Locked, ErrorKind::Conflict],
            max_steps: 5000,
        }
    }

    /// How each process builds its tree (e.g. a short removal lease); default `Tree::new`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use std::time::Duration;
    /// use dynatree::Tree;
    /// use dynatree_testing::sim::SimFault;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("crash in delete_subtree, short lease", FakeTable::new)
    ///     .tree(|s| {
    ///         Tree::builder(s)
    ///             .removal_lease(Duration::from_secs(5))
    ///             .build()
    ///             .expect("valid tree settings")
    ///     })
    ///     .setup(|tree| async move { tree.put(["a", "b"], &V { v: 1 }).await })
    ///     .op("delete a", |tree| async move { tree.delete_subtree(["a"]).await })
    ///     .model(|m| m.delete_subtree(["a"]))
    ///     .faults(1, [SimFault::Crash])
    ///     .schedules(20)
    ///     .run(); // recovery resumes a crashed deletion once its 5 s lease has expired
    /// ```
    pub fn tree(mut self, f: impl Fn(SimStorage<B>) -> Tree + 'static) -> Self {
        self.tree = Box::new(f);
        self
    }

    /// A step run before the operations, alone and without faults (e.g. creating objects).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("delete what setup wrote", FakeTable::new)
    ///     .schedules(10)
    ///     .setup(|tree| async move {
    ///         tree.put(["a"], &V { v: 1 }).await?;
    ///         tree.put(["b"], &V { v: 2 }).await
    ///     })
    ///     .op("delete a", |tree| async move { tree.delete(["a"]).await })
    ///     .check(|end| match (end.model.get(["a"]), end.number(["b"], "v")) {
    ///         (None, Some(2)) => Ok(()),
    ///         other => Err(format!("unexpected end state {other:?}")),
    ///     })
    ///     .run();
    /// ```
    pub fn setup<F, T>(mut self, f: impl Fn(Tree) -> F + 'static) -> Self
    where
        F: Future<Output = Result<T>> + 'static,
        T: fmt::Debug,
    {
        self.setup.push(Box::new(move |t| {
            let fut = f(t);
            async move { fut.await.map(|v| format!("{v:?}")) }.boxed_local()
        }));
        self
    }

    /// A step run after the operations and the recovery, before the checks, on a fresh tree
    /// with no faults and no gating (as [`setup`](Self::setup) runs before them): what a
    /// check needs done asynchronously, such as a follower catching up with the table's
    /// stream. A step that fails fails the schedule.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("read after the race", FakeTable::new)
    ///     .schedules(5)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .finish(|tree| async move {
    ///         let v = tree.get::<V>(["a"]).await?;
    ///         assert!(v.is_some());
    ///         Ok(())
    ///     })
    ///     .run();
    /// ```
    pub fn finish<F, T>(mut self, f: impl Fn(Tree) -> F + 'static) -> Self
    where
        F: Future<Output = Result<T>> + 'static,
        T: fmt::Debug,
    {
        self.finish.push(Box::new(move |t| {
            let fut = f(t);
            async move { fut.await.map(|v| format!("{v:?}")) }.boxed_local()
        }));
        self
    }

    /// An operation, run concurrently with the others in its own process (own tree). The
    /// closure gets the tree by value; return what the operation returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use dynatree_testing::sim::OpOutcome;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("read during a put", FakeTable::new)
    ///     .schedules(10)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("get a", |tree| async move { tree.get::<V>(["a"]).await })
    ///     .check(|end| match &end.outcomes[1] {
    ///         // The value an operation returns, in its `Debug` form.
    ///         OpOutcome::Ok(got) if got == "None" || got == "Some(V { v: 1 })" => Ok(()),
    ///         other => Err(format!("get a: {other}")),
    ///     })
    ///     .run();
    /// ```
    pub fn op<F, T>(mut self, name: impl Into<String>, f: impl Fn(Tree) -> F + 'static) -> Self
    where
        F: Future<Output = Result<T>> + 'static,
        T: fmt::Debug,
    {
        self.ops.push(OpSpec {
            name: name.into(),
            run: Box::new(move |t, _| {
                let fut = f(t);
                async move { fut.await.map(|v| format!("{v:?}")) }.boxed_local()
            }),
            model: None,
            process: false,
            skew_ms: 0,
        });
        self
    }

    /// A process: like [`op`](Sim::op), in its own process with its own tree, but it records
    /// each of its calls through [`Calls::call`] with the call's model, so that the history
    /// of every result it saw is checked (see [`Calls`] and the module docs): a process can
    /// read while others write, and every read is judged, not only the end state.
    ///
    /// The history check runs when every operation of the scenario is a process or has a
    /// [`model`](Sim::model).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let report = Sim::new("reads around a delete", FakeTable::new)
    ///     .schedules(50)
    ///     .setup(|tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("delete a", |tree| async move { tree.delete(["a"]).await })
    ///     .model(|m| m.delete(["a"]))
    ///     .process("reader", |tree, calls| async move {
    ///         for _ in 0..2 {
    ///             calls.call("get a", tree.get::<V>(["a"]), |m| m.read::<V>(["a"])).await?;
    ///         }
    ///         Ok(())
    ///     })
    ///     .run();
    /// assert!(report.histories > 0);
    /// ```
    pub fn process<F, T>(
        mut self,
        name: impl Into<String>,
        f: impl Fn(Tree, Calls) -> F + 'static,
    ) -> Self
    where
        F: Future<Output = Result<T>> + 'static,
        T: fmt::Debug,
    {
        self.ops.push(OpSpec {
            name: name.into(),
            run: Box::new(move |t, calls| {
                let fut = f(t, calls);
                async move { fut.await.map(|v| format!("{v:?}")) }.boxed_local()
            }),
            model: None,
            process: true,
            skew_ms: 0,
        });
        self
    }

    /// The wall clock of the last added operation's process runs `skew` ahead of the others'
    /// (`behind`: behind them). dynatree reads that clock for leases, intents and expiry;
    /// tokio's monotonic clock (timeouts, the trust window of fenced puts) is not skewed.
    /// A task the operation spawns runs on the shared clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("a deletion with a clock 10 s ahead", FakeTable::new)
    ///     .schedules(20)
    ///     .setup(|tree| async move { tree.put(["a", "b"], &V { v: 1 }).await })
    ///     .op("delete a", |tree| async move { tree.delete_subtree(["a"]).await })
    ///     .model(|m| m.delete_subtree(["a"]))
    ///     .skew(Duration::from_secs(10), false)
    ///     .op("put a/c", |tree| async move { tree.put(["a", "c"], &V { v: 2 }).await })
    ///     .model(|m| m.put(["a", "c"], &V { v: 2 }))
    ///     .run();
    /// ```
    pub fn skew(mut self, skew: Duration, behind: bool) -> Self {
        if let Some(last) = self.ops.last_mut() {
            let ms = i64::try_from(skew.as_millis()).unwrap_or(i64::MAX);
            last.skew_ms = if behind { -ms } else { ms };
        }
        self
    }

    /// The model of the last added operation's effect. When every operation has one, each
    /// schedule is checked against every serial order: the objects in the table must equal
    /// the model after the operations in some order, where an operation that returned `Ok`
    /// is applied (and its model succeeds there), one that failed with a transient error or
    /// crashed is applied or not, one refused by a concurrency error ([`ErrorKind::Locked`],
    /// [`ErrorKind::Conflict`], see [`refusals`](Sim::refusals)) is not applied, one taken
    /// over by another call ([`ErrorKind::TakenOver`]) or left recorded unfinished
    /// ([`ErrorKind::Unfinished`], finished by recovery) may or may not be, and any
    /// other error must be the model's error at that position.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// // Whatever the order, the table must equal the model after both puts in some serial order.
    /// Sim::new("put vs delete", FakeTable::new)
    ///     .schedules(20)
    ///     .setup(|tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put a/b", |tree| async move { tree.put(["a", "b"], &V { v: 2 }).await })
    ///     .model(|m| m.put(["a", "b"], &V { v: 2 }))
    ///     .op("delete a", |tree| async move { tree.delete(["a"]).await })
    ///     .model(|m| m.delete(["a"]))
    ///     .run();
    /// ```
    pub fn model(
        mut self,
        f: impl Fn(&mut Model) -> std::result::Result<(), ErrorKind> + 'static,
    ) -> Self {
        if let Some(last) = self.ops.last_mut() {
            last.model = Some(std::rc::Rc::new(f));
        }
        self
    }

    /// A check of your own, after each schedule and its recovery.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// Sim::new("two puts of one path", FakeTable::new)
    ///     .schedules(20)
    ///     .op("put a=1", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put a=2", |tree| async move { tree.put(["a"], &V { v: 2 }).await })
    ///     .check(|end| {
    ///         if end.model.objects().len() == 1 { Ok(()) } else { Err("a is not alone".into()) }
    ///     })
    ///     .run();
    /// ```
    pub fn check(
        mut self,
        f: impl Fn(&End<'_>) -> std::result::Result<(), String> + 'static,
    ) -> Self {
        self.checks.push(Box::new(f));
        self
    }

    /// Schedules to run (overridden by `DYNATREE_SIM_SCHEDULES`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let report = Sim::new("three puts", FakeTable::new)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put b", |tree| async move { tree.put(["b"], &V { v: 2 }).await })
    ///     .op("put c", |tree| async move { tree.put(["c"], &V { v: 3 }).await })
    ///     .schedules(4)
    ///     .run();
    /// # if std::env::var_os("DYNATREE_SIM_SCHEDULES").is_none() {
    /// assert_eq!(report.schedules, 4); // half bounded search, half random
    /// # }
    /// ```
    pub fn schedules(mut self, n: usize) -> Self {
        if env_num("DYNATREE_SIM_SCHEDULES").is_none() {
            self.schedules = n.max(1);
        }
        self
    }

    /// Places up to `n` faults per schedule, of the given kinds.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use dynatree_testing::Fault;
    /// use dynatree_testing::sim::SimFault;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// // A lost response or a crash may leave the put applied or not; the model check accepts both.
    /// Sim::new("put under faults", FakeTable::new)
    ///     .faults(1, [SimFault::Request(Fault::FailAfterApply), SimFault::CrashAfterApply])
    ///     .op("put a/b", |tree| async move { tree.put(["a", "b"], &V { v: 1 }).await })
    ///     .model(|m| m.put(["a", "b"], &V { v: 1 }))
    ///     .op("put a/c", |tree| async move { tree.put(["a", "c"], &V { v: 2 }).await })
    ///     .model(|m| m.put(["a", "c"], &V { v: 2 }))
    ///     .schedules(30)
    ///     .run();
    /// ```
    pub fn faults(mut self, n: usize, kinds: impl IntoIterator<Item = SimFault>) -> Self {
        self.max_faults = n;
        self.faults = kinds.into_iter().collect();
        self
    }

    /// The preemption bound of the depth-first search (`None`: unbounded).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let report = Sim::new("two puts, every interleaving", FakeTable::new)
    ///     .preemptions(None)
    ///     .schedules(1_000)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put b", |tree| async move { tree.put(["b"], &V { v: 2 }).await })
    ///     .run();
    /// # if std::env::var_os("DYNATREE_SIM_SCHEDULES").is_none() {
    /// assert!(report.exhaustive); // the unbounded search finished within the budget
    /// # }
    /// ```
    pub fn preemptions(mut self, bound: Option<usize>) -> Self {
        self.preemptions = bound;
        self
    }

    /// Seed of the random phase and, on paused time, of `fastrand` in every schedule (it leads
    /// the replay string); overridden by `DYNATREE_SIM_SEED`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let sim = |seed| {
    ///     Sim::new("seeded", FakeTable::new)
    ///         .schedules(6)
    ///         .seed(seed)
    ///         .op("put a=1", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///         .op("put a=2", |tree| async move { tree.put(["a"], &V { v: 2 }).await })
    ///         .check(|end| match end.number(["a"], "v") {
    ///             Some(2) => Ok(()),
    ///             _ => Err("put a=1 ran last".into()), // wrong on purpose
    ///         })
    /// };
    /// // The same seed explores the same schedules: the same failure, with the same replay string.
    /// let failure = sim(7).explore().unwrap_err();
    /// assert_eq!(sim(7).explore().unwrap_err().replay, failure.replay);
    /// # if std::env::var_os("DYNATREE_SIM_SEED").is_none() {
    /// assert!(failure.replay.starts_with("7:")); // on paused time, every schedule's `fastrand` seed
    /// # }
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        if env_num("DYNATREE_SIM_SEED").is_none() {
            self.seed = seed;
        }
        self
    }

    /// Also offers "let time pass" as a choice while requests are parked and an operation
    /// sleeps (a retry backoff, a lease wait), so the sleeper may act before the others.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use dynatree_testing::Fault;
    /// use dynatree_testing::sim::SimFault;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// // A throttled put sleeps before it retries; the other put may overtake it meanwhile.
    /// Sim::new("throttled put", FakeTable::new)
    ///     .allow_wait(true)
    ///     .faults(1, [SimFault::Request(Fault::Throttle)])
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .model(|m| m.put(["a"], &V { v: 1 }))
    ///     .op("put b", |tree| async move { tree.put(["b"], &V { v: 2 }).await })
    ///     .model(|m| m.put(["b"], &V { v: 2 }))
    ///     .check(|end| if end.ok(0) { Ok(()) } else { Err("the retry gave up".into()) })
    ///     .schedules(30)
    ///     .run();
    /// ```
    pub fn allow_wait(mut self, yes: bool) -> Self {
        self.allow_wait = yes;
        self
    }

    /// Runs on a real clock and I/O (for a real backend such as DynamoDB Local) instead of
    /// paused time. Requests are still serialized in the chosen order. Timers then fire when
    /// the clock says (a lease renewal after a slow response), so a rerun of a schedule's
    /// prefix may offer other alternatives: the bounded search becomes a sample (a step whose
    /// chosen alternative is gone takes the last one left) instead of failing with
    /// "nondeterminism", which on paused time points at a defect.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// // For DynamoDB Local (`move || local.fresh_table()`); the fake works too.
    /// let report = Sim::new("real clock", FakeTable::new)
    ///     .real_time(true)
    ///     .schedules(2)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .model(|m| m.put(["a"], &V { v: 1 }))
    ///     .run();
    /// assert!(report.schedules >= 1);
    /// ```
    pub fn real_time(mut self, yes: bool) -> Self {
        self.real_time = yes;
        if yes {
            self.recovery_wait = Duration::ZERO;
        }
        self
    }

    /// How long recovery waits before `resume()` (default 1 h of paused time, so every lease
    /// has expired; zero with [`real_time`](Sim::real_time)).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use std::time::Duration;
    /// use dynatree::Tree;
    /// use dynatree_testing::sim::SimFault;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// // Recovery waits one minute of paused time: past the 30 s lease of a crashed deletion.
    /// Sim::new("crashed deletion, recovered", FakeTable::new)
    ///     .tree(|s| Tree::builder(s).removal_lease(Duration::from_secs(30)).build().expect("valid"))
    ///     .recovery_wait(Duration::from_secs(60))
    ///     .setup(|tree| async move { tree.put(["a", "b"], &V { v: 1 }).await })
    ///     .op("delete a", |tree| async move { tree.delete_subtree(["a"]).await })
    ///     .model(|m| m.delete_subtree(["a"]))
    ///     .faults(1, [SimFault::Crash])
    ///     .schedules(20)
    ///     .run();
    /// ```
    pub fn recovery_wait(mut self, d: Duration) -> Self {
        self.recovery_wait = d;
        self
    }

    /// Error kinds that mean "refused, nothing applied" for the serial-order check (default
    /// `Locked` and `Conflict`); replaces the list.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// use dynatree::ErrorKind;
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// // A put into a subtree being deleted is refused (`Locked`): it must not have written.
    /// Sim::new("put vs delete_subtree", FakeTable::new)
    ///     .refusals([ErrorKind::Locked, ErrorKind::Conflict])
    ///     .setup(|tree| async move { tree.put(["a", "b"], &V { v: 1 }).await })
    ///     .op("put a/c", |tree| async move { tree.put(["a", "c"], &V { v: 2 }).await })
    ///     .model(|m| m.put(["a", "c"], &V { v: 2 }))
    ///     .op("delete a", |tree| async move { tree.delete_subtree(["a"]).await })
    ///     .model(|m| m.delete_subtree(["a"]))
    ///     .schedules(30)
    ///     .run();
    /// ```
    pub fn refusals(mut self, kinds: impl IntoIterator<Item = ErrorKind>) -> Self {
        self.refusals = kinds.into_iter().collect();
        self
    }

    /// Explores, then prints the report; panics with the failure (and its replay string) if
    /// a schedule fails.
    ///
    /// # Panics
    ///
    /// On a failing schedule.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let report = Sim::new("two puts", FakeTable::new)
    ///     .op("put a", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .model(|m| m.put(["a"], &V { v: 1 }))
    ///     .op("put b", |tree| async move { tree.put(["b"], &V { v: 2 }).await })
    ///     .model(|m| m.put(["b"], &V { v: 2 }))
    ///     .schedules(10)
    ///     .run(); // prints the report; would panic with a replay string on a failing schedule
    /// assert!(report.to_string().starts_with("sim `two puts`:"));
    /// ```
    #[track_caller]
    pub fn run(self) -> Report {
        match self.explore() {
            Ok(r) => {
                eprintln!("{r}");
                r
            }
            Err(f) => panic!("{f}"),
        }
    }

    /// Explores the scenario's schedules: the bounded depth-first search for up to half the
    /// budget, then random schedules for the rest (unless the search finished). With
    /// `DYNATREE_SIM_REPLAY` set, replays that one schedule instead.
    ///
    /// # Errors
    ///
    /// The first failing schedule.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let failure = Sim::new("wrong expectation", FakeTable::new)
    ///     .schedules(20)
    ///     .op("put a=1", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///     .op("put a=2", |tree| async move { tree.put(["a"], &V { v: 2 }).await })
    ///     .check(|end| match end.number(["a"], "v") {
    ///         Some(2) => Ok(()),
    ///         _ => Err("put a=1 ran last".into()), // wrong on purpose: either may run last
    ///     })
    ///     .explore()
    ///     .unwrap_err();
    /// assert!(failure.message.contains("put a=1 ran last"), "{failure}");
    /// assert!(!failure.replay.is_empty() && !failure.trace.is_empty());
    /// ```
    pub fn explore(&self) -> std::result::Result<Report, Failure> {
        if let Ok(r) = std::env::var("DYNATREE_SIM_REPLAY") {
            return self.replay(&r);
        }
        let started = Instant::now();
        let mut n = 0;
        let mut stats = Stats::default();
        let dfs_budget = if self.preemptions.is_none() {
            self.schedules
        } else {
            self.schedules.div_ceil(2)
        };
        // Iterative bounding (as CHESS): serial schedules first, then more preemptions and
        // faults, so that a cut-off search still covered the small bounds completely.
        let mut stages = Vec::new();
        for p in self.preemptions.map_or(usize::MAX..=usize::MAX, |b| 0..=b) {
            for f in 0..=self.max_faults {
                stages.push((p, f));
            }
        }
        let mut exhaustive = true;
        'stages: for (p, f) in stages {
            let mut prefix: Vec<usize> = Vec::new();
            loop {
                if n >= dfs_budget {
                    exhaustive = false;
                    break 'stages;
                }
                let mut c = Dfs {
                    prefix: std::mem::take(&mut prefix),
                    real_time: self.real_time,
                    taken: Vec::new(),
                    bound: (p != usize::MAX).then_some(p),
                    max_faults: f,
                    kinds: self.faults.clone(),
                    allow_wait: self.allow_wait,
                };
                n += 1;
                if let Err(fail) = self.run_one(self.schedule_seed(n), &mut c, &mut stats) {
                    return Err(fail.numbered(n));
                }
                match c.next_prefix() {
                    Some(next) => prefix = next,
                    None => break,
                }
            }
        }
        if !(exhaustive && self.preemptions.is_none()) {
            let mut k = 0u64;
            while n < self.schedules {
                let seed = self
                    .seed
                    .wrapping_add(k)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15);
                k += 1;
                let mut c = Random::new(
                    seed,
                    k % 2 == 1,
                    self.max_faults,
                    self.faults.clone(),
                    self.allow_wait,
                );
                n += 1;
                if let Err(f) = self.run_one(self.schedule_seed(n), &mut c, &mut stats) {
                    return Err(f.numbered(n));
                }
            }
        }
        Ok(Report {
            name: self.name.clone(),
            schedules: n,
            exhaustive,
            elapsed: started.elapsed(),
            histories: stats.histories,
            calls: stats.calls,
            most_requests: stats.most_requests,
        })
    }

    /// Reruns exactly the schedule `replay` names (as printed by a [`Failure`]).
    ///
    /// # Errors
    ///
    /// The failure, if it fails again (or if the code changed so that the schedule no longer
    /// exists: "diverged").
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
    /// let sim = || {
    ///     Sim::new("wrong expectation", FakeTable::new)
    ///         .schedules(20)
    ///         .op("put a=1", |tree| async move { tree.put(["a"], &V { v: 1 }).await })
    ///         .op("put a=2", |tree| async move { tree.put(["a"], &V { v: 2 }).await })
    ///         .check(|end| match end.number(["a"], "v") {
    ///             Some(2) => Ok(()),
    ///             _ => Err("put a=1 ran last".into()),
    ///         })
    /// };
    /// let failure = sim().explore().unwrap_err();
    /// let again = sim().replay(&failure.replay).unwrap_err(); // exactly that schedule
    /// assert_eq!(again.trace, failure.trace);
    /// assert_eq!(again.schedules, 1);
    /// ```
    pub fn replay(&self, replay: &str) -> std::result::Result<Report, Failure> {
        let started = Instant::now();
        let (seed, choices) = replay.split_once(':').unwrap_or((replay, ""));
        let seed = seed.trim().parse().unwrap_or(self.seed);
        let mut c = Replay {
            tokens: choices
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            at: 0,
        };
        let mut stats = Stats::default();
        self.run_one(seed, &mut c, &mut stats)
            .map_err(|f| f.numbered(1))?;
        Ok(Report {
            name: self.name.clone(),
            schedules: 1,
            exhaustive: false,
            elapsed: started.elapsed(),
            histories: stats.histories,
            calls: stats.calls,
            most_requests: stats.most_requests,
        })
    }

    /// The `fastrand` seed of schedule `n`: one seed for every schedule on paused time (so the
    /// search sees the same alternatives for the same choices); on a real backend a new one per
    /// schedule of the process, as DynamoDB remembers transaction tokens (drawn from it) for ten minutes.
    fn schedule_seed(&self, n: usize) -> u64 {
        static SCHEDULES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        if self.real_time {
            // Unique in the process, whatever the scenario (the replay string prints it).
            let k = SCHEDULES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.seed.wrapping_add(n as u64).wrapping_add(k << 32)
        } else {
            self.seed
        }
    }

    fn runtime(&self) -> tokio::runtime::Runtime {
        let mut b = tokio::runtime::Builder::new_current_thread();
        if self.real_time {
            b.enable_all();
        } else {
            b.enable_time().start_paused(true);
        }
        b.build().expect("a current-thread tokio runtime")
    }

    /// Runs one schedule with `chooser`.
    fn run_one(
        &self,
        seed: u64,
        chooser: &mut dyn Chooser,
        stats: &mut Stats,
    ) -> std::result::Result<(), Failure> {
        let rt = self.runtime();
        let mut tokens = Vec::new();
        let gate = Arc::new(Gate::new(self.ops.len()));
        let result = rt.block_on(Box::pin(self.schedule(
            seed,
            chooser,
            &gate,
            &mut tokens,
            stats,
        )));
        drop(rt);
        let st = gate.lock();
        let most = st.next_seq.iter().copied().max().unwrap_or(0);
        stats.most_requests = stats
            .most_requests
            .max(usize::try_from(most).unwrap_or(usize::MAX));
        drop(st);
        result.map_err(|message| Failure {
            name: self.name.clone(),
            replay: format!("{seed}:{}", tokens.join(",")),
            message,
            trace: std::mem::take(&mut gate.lock().trace),
            schedules: 0,
        })
    }

    async fn schedule(
        &self,
        seed: u64,
        chooser: &mut dyn Chooser,
        gate: &Arc<Gate>,
        tokens: &mut Vec<String>,
        stats: &mut Stats,
    ) -> std::result::Result<(), String> {
        fastrand::seed(seed);
        // Versions of denormalized fields from a counter, not the wall clock: the same
        // schedule takes the same branches when it is replayed.
        // (On real time, against a real backend, the clock's as in production.)
        dynatree::__private::script_versions((!self.real_time).then_some(1_800_000_000_000 << 16));
        let backend = Arc::new((self.backend)());
        let free = SimStorage {
            backend: Arc::clone(&backend),
            op: None,
            gate: Arc::clone(gate),
        };
        let t = (self.tree)(free.clone());
        let sc = t.reserved();
        Box::pin(t.create_table())
            .await
            .map_err(|e| format!("create_table failed: {e:?}"))?;
        for (i, s) in self.setup.iter().enumerate() {
            s((self.tree)(free.clone()))
                .await
                .map_err(|e| format!("setup step {i} failed: {e:?}"))?;
        }
        let initial = Model::from_rows(&Box::pin(scan_all(&*backend)).await?, sc);

        // The operations, each in its own process, and the history of their calls.
        let history: std::rc::Rc<RefCell<Vec<Call>>> = std::rc::Rc::default();
        let mut futs: Vec<Option<LocalBoxFuture<'static, std::thread::Result<Result<String>>>>> =
            self.ops
                .iter()
                .enumerate()
                .map(|(i, op)| {
                    let tree = (self.tree)(SimStorage {
                        backend: Arc::clone(&backend),
                        op: Some(i),
                        gate: Arc::clone(gate),
                    });
                    let calls = Calls {
                        process: i,
                        gate: Arc::clone(gate),
                        history: std::rc::Rc::clone(&history),
                    };
                    let run = (op.run)(tree, calls.clone());
                    // An operation with a model is one call of the history, from its start
                    // to its end (its returned value is not compared).
                    let run = match &op.model {
                        Some(model) if !op.process => {
                            let model = std::rc::Rc::clone(model);
                            let model: CallModel = std::rc::Rc::new(move |m: &mut Model| {
                                model(m).map(|()| String::new())
                            });
                            let name = op.name.clone();
                            async move {
                                let mut open = calls.open(name, false, model);
                                let r = run.await;
                                calls.close(&mut open, &r);
                                r
                            }
                            .boxed_local()
                        }
                        _ => run,
                    };
                    Some(
                        Skewed {
                            skew_ms: op.skew_ms,
                            inner: AssertUnwindSafe(run).catch_unwind().boxed_local(),
                        }
                        .boxed_local(),
                    )
                })
                .collect();
        let mut outcomes: Vec<Option<OpOutcome>> = self.ops.iter().map(|_| None).collect();
        let stuck_after = if self.real_time {
            Duration::from_secs(120)
        } else {
            Duration::from_secs(24 * 3600)
        };
        let mut watchdog = Box::pin(tokio::time::sleep(stuck_after));
        let mut drive = Drive {
            current: None,
            preemptions: 0,
            faults: 0,
            steps: 0,
        };
        let problem: RefCell<Option<String>> = RefCell::new(None);
        std::future::poll_fn(|cx| {
            loop {
                // Let every live operation run to its next gate, its end, or a timer.
                for (i, slot) in futs.iter_mut().enumerate() {
                    let Some(f) = slot else { continue };
                    if let Poll::Ready(r) = f.as_mut().poll(cx) {
                        outcomes[i] = Some(match r {
                            Ok(Ok(v)) => OpOutcome::Ok(v),
                            Ok(Err(e)) => OpOutcome::Err(e),
                            Err(p) => OpOutcome::Panicked(panic_message(&*p)),
                        });
                        *slot = None;
                        if let Some(e) = gate.lock().ended.get_mut(i) {
                            *e = true;
                        }
                        gate.note(format!(
                            "op{i} ({}) ended: {}",
                            self.ops[i].name,
                            outcomes[i].as_ref().expect("just set")
                        ));
                    } else if std::mem::take(&mut gate.lock().crashed[i]) {
                        outcomes[i] = Some(OpOutcome::Crashed);
                        *slot = None;
                        gate.note(format!("op{i} ({}) crashed", self.ops[i].name));
                    }
                }
                if futs.iter().all(Option::is_none) {
                    return Poll::Ready(());
                }
                let (parked, in_flight) = {
                    let st = gate.lock();
                    (
                        st.parked.values().cloned().collect::<Vec<_>>(),
                        st.in_flight,
                    )
                };
                if in_flight > 0 {
                    gate.lock().scheduler = Some(cx.waker().clone());
                    return Poll::Pending; // a real request is on its way
                }
                let sleeping = futs
                    .iter()
                    .enumerate()
                    .any(|(i, f)| f.is_some() && !parked.iter().any(|p| p.op == i));
                if parked.is_empty() {
                    if watchdog.as_mut().poll(cx).is_ready() {
                        *problem.borrow_mut() = Some(format!(
                            "stuck: operations pending for {stuck_after:?} with no request"
                        ));
                        return Poll::Ready(());
                    }
                    gate.lock().scheduler = Some(cx.waker().clone());
                    return Poll::Pending; // only sleepers: let time pass
                }
                drive.steps += 1;
                if drive.steps > self.max_steps {
                    *problem.borrow_mut() = Some(format!(
                        "livelock: more than {} requests granted",
                        self.max_steps
                    ));
                    return Poll::Ready(());
                }
                let view = View {
                    parked: &parked,
                    current: drive.current,
                    can_wait: sleeping,
                    faults_used: drive.faults,
                    preemptions_used: drive.preemptions,
                };
                let choice = match chooser.choose(&view) {
                    Ok(c) => c,
                    Err(e) => {
                        *problem.borrow_mut() = Some(e);
                        return Poll::Ready(());
                    }
                };
                if view.is_preemption(&choice) {
                    drive.preemptions += 1;
                }
                tokens.push(choice.token(&parked));
                match choice {
                    Choice::Wait => {
                        gate.note("(time passes)".into());
                        drive.current = None;
                        if watchdog.as_mut().poll(cx).is_ready() {
                            *problem.borrow_mut() = Some("stuck while waiting".into());
                            return Poll::Ready(());
                        }
                        gate.lock().scheduler = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    Choice::Grant { op, seq, fault } => {
                        let mut st = gate.lock();
                        let p = st
                            .parked
                            .remove(&(op, seq))
                            .expect("chosen from the parked");
                        let line = format!(
                            "op{op} #{seq} {} {}{}",
                            p.request,
                            p.detail,
                            fault
                                .as_ref()
                                .map(|f| format!("  [fault {f:?}]"))
                                .unwrap_or_default()
                        );
                        if live_trace() {
                            eprintln!("{line}");
                        }
                        st.trace.push(line);
                        if fault.is_some() {
                            drive.faults += 1;
                        }
                        st.granted.insert((op, seq), fault);
                        st.clock += 1;
                        if let Some(w) = st.wakers.remove(&(op, seq)) {
                            w.wake();
                        }
                        st.in_flight += 1;
                        drive.current = Some(op);
                    }
                }
            }
        })
        .await;
        drop(futs);
        if let Some(p) = problem.into_inner() {
            return Err(p);
        }
        let outcomes: Vec<OpOutcome> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or(OpOutcome::Crashed))
            .collect();
        let mut errors = Vec::new();
        for (i, o) in outcomes.iter().enumerate() {
            if let OpOutcome::Panicked(m) = o {
                errors.push(format!("op{i} ({}) panicked: {m}", self.ops[i].name));
            }
        }

        // Recovery: the documented `resume()` from a fresh process, no faults.
        tokio::time::sleep(self.recovery_wait).await;
        let rec = (self.tree)(free.clone());
        match AssertUnwindSafe(Box::pin(rec.resume()))
            .catch_unwind()
            .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => errors.push(format!("recovery resume() failed: {:?}: {e}", e.kind())),
            Err(p) => errors.push(format!(
                "recovery resume() panicked: {}",
                panic_message(&*p)
            )),
        }
        for (i, step) in self.finish.iter().enumerate() {
            let t = (self.tree)(free.clone());
            match AssertUnwindSafe(step(t)).catch_unwind().await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => errors.push(format!("finish step {i} failed: {:?}: {e}", e.kind())),
                Err(p) => errors.push(format!("finish step {i} panicked: {}", panic_message(&*p))),
            }
        }
        let mut rows = Box::pin(scan_all(&*backend)).await?;
        // A removal mark is a lease: a process that died after marking cannot take its mark
        // off, so one is tolerated after a crash, provided it has expired by now: a writer at
        // that node must take it off and succeed (probed below, then the rows are read again).
        let crashed = outcomes.iter().any(|o| matches!(o, OpOutcome::Crashed));
        let mut probed = false;
        for v in check_rows(&rows, sc) {
            match &v {
                Violation::RemovalMark(path) if crashed => {
                    let probe = (self.tree)(free.clone());
                    let mut at = path.clone();
                    at.push("sim-probe".to_owned());
                    let put = AssertUnwindSafe(Box::pin(probe.put(
                        at.clone(),
                        &std::collections::BTreeMap::from([("probe", 1u8)]),
                    )))
                    .catch_unwind()
                    .await;
                    let del = AssertUnwindSafe(Box::pin(probe.delete(at.clone())))
                        .catch_unwind()
                        .await;
                    match (put, del) {
                        (Ok(Ok(())), Ok(Ok(()))) => probed = true,
                        (put, del) => errors.push(format!(
                            "{v}, left by a crash, but a put and delete under it failed: {:?} / {:?}",
                            put.map_err(|p| panic_message(&*p)),
                            del.map_err(|p| panic_message(&*p)),
                        )),
                    }
                }
                _ => errors.push(v.to_string()),
            }
        }
        if probed {
            rows = Box::pin(scan_all(&*backend)).await?;
            for v in check_rows(&rows, sc) {
                if let Violation::RemovalMark(_) = v {
                    errors.push(format!(
                        "{v} even after its lease ran out and a writer came"
                    ));
                }
            }
        }
        let model = Model::from_rows(&rows, sc);
        if self.ops.iter().all(|o| o.model.is_some() && !o.process)
            && let Err(e) = self.serial_check(&initial, &model, &outcomes)
        {
            errors.push(e);
        }
        let calls = std::mem::take(&mut *history.borrow_mut());
        // Without a process every call spans its whole operation and all start together:
        // the serial-order check above already decides the history.
        if self.ops.iter().any(|o| o.process)
            && self.ops.iter().all(|o| o.model.is_some() || o.process)
        {
            stats.histories += 1;
            stats.calls += calls.len();
            if let Err(e) = check_history(&initial, &calls, &model, &self.refusals) {
                errors.push(e);
            }
        }
        let end = End {
            outcomes: &outcomes,
            model: &model,
            rows: &rows,
        };
        for c in &self.checks {
            if let Err(e) = c(&end) {
                errors.push(format!("check failed: {e}"));
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        let mut msg = errors.join("\n");
        msg.push_str("\noutcomes:");
        for (i, o) in outcomes.iter().enumerate() {
            msg.push_str(&format!("\n  op{i} {}: {o}", self.ops[i].name));
        }
        msg.push_str("\nobjects after recovery:");
        for (p, v) in model.objects() {
            msg.push_str(&format!("\n  {} = {v:?}", p.join("/")));
        }
        Err(msg)
    }

    /// Whether `actual` equals the model after some serial order of the operations.
    fn serial_check(
        &self,
        initial: &Model,
        actual: &Model,
        outcomes: &[OpOutcome],
    ) -> std::result::Result<(), String> {
        let n = self.ops.len();
        let mut order: Vec<usize> = (0..n).collect();
        let mut found = false;
        permutations(&mut order, 0, &mut |perm| {
            if !found && self.serial_from(initial, actual, outcomes, perm) {
                found = true;
            }
        });
        if found {
            Ok(())
        } else {
            Err("no serial order of the operations gives the objects in the table".into())
        }
    }

    fn serial_from(
        &self,
        state: &Model,
        actual: &Model,
        outcomes: &[OpOutcome],
        rest: &[usize],
    ) -> bool {
        let Some((&i, rest)) = rest.split_first() else {
            return state == actual;
        };
        let model = self.ops[i].model.as_ref().expect("checked by the caller");
        let applied = || {
            let mut m = state.clone();
            let r = model(&mut m);
            (m, r)
        };
        match &outcomes[i] {
            OpOutcome::Ok(_) => {
                let (m, r) = applied();
                r.is_ok() && self.serial_from(&m, actual, outcomes, rest)
            }
            OpOutcome::Panicked(_) => false,
            OpOutcome::Crashed => {
                self.serial_from(state, actual, outcomes, rest) || {
                    let (m, r) = applied();
                    r.is_ok() && self.serial_from(&m, actual, outcomes, rest)
                }
            }
            OpOutcome::Err(e) => match e.kind() {
                ErrorKind::Backend
                | ErrorKind::Throttled
                | ErrorKind::Unprocessed
                | ErrorKind::TransactionCanceled
                // Another call took the operation over: its outcome is that call's.
                | ErrorKind::TakenOver
                // Recorded, partly done: recovery (`resume`) finishes it.
                | ErrorKind::Unfinished => {
                    self.serial_from(state, actual, outcomes, rest) || {
                        let (m, r) = applied();
                        r.is_ok() && self.serial_from(&m, actual, outcomes, rest)
                    }
                }
                k if self.refusals.contains(&k) => self.serial_from(state, actual, outcomes, rest),
                k => {
                    let (m, r) = applied();
                    r == Err(k) && self.serial_from(&m, actual, outcomes, rest)
                }
            },
        }
    }
}

fn permutations(v: &mut [usize], k: usize, f: &mut dyn FnMut(&[usize])) {
    if k == v.len() {
        f(v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permutations(v, k + 1, f);
        v.swap(k, i);
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".into())
}

async fn scan_all<B: Storage + 'static>(backend: &B) -> std::result::Result<Vec<Item>, String> {
    let mut rows = Vec::new();
    let mut start = None;
    loop {
        let page = backend
            .scan_page(None, start)
            .await
            .map_err(|e| format!("scan failed: {e}"))?;
        rows.extend(page.items);
        match page.last_key {
            Some(k) => start = Some(k),
            None => return Ok(rows),
        }
    }
}

impl Failure {
    fn numbered(mut self, n: usize) -> Self {
        self.schedules = n;
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Choosers: bounded depth-first search, random, replay.

struct Drive {
    current: Option<usize>,
    preemptions: usize,
    faults: usize,
    steps: usize,
}

struct View<'a> {
    parked: &'a [Parked],
    current: Option<usize>,
    can_wait: bool,
    faults_used: usize,
    preemptions_used: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Choice {
    Grant {
        op: usize,
        seq: u64,
        fault: Option<SimFault>,
    },
    Wait,
}

impl Choice {
    /// `op[/k][fault]`, k the rank of the request among that op's parked ones; `W` for wait.
    fn token(&self, parked: &[Parked]) -> String {
        match self {
            Choice::Wait => "W".into(),
            Choice::Grant { op, seq, fault } => {
                let k = parked
                    .iter()
                    .filter(|p| p.op == *op)
                    .position(|p| p.seq == *seq)
                    .unwrap_or(0);
                let mut s = op.to_string();
                if k > 0 {
                    s.push_str(&format!("/{k}"));
                }
                if let Some(f) = fault {
                    s.push_str(&f.code());
                }
                s
            }
        }
    }
}

impl View<'_> {
    fn current_parked(&self) -> bool {
        self.current
            .is_some_and(|c| self.parked.iter().any(|p| p.op == c))
    }

    fn is_preemption(&self, c: &Choice) -> bool {
        self.current_parked()
            && match c {
                Choice::Wait => true,
                Choice::Grant { op, .. } => Some(*op) != self.current,
            }
    }

    /// The requests in the search's order: the current operation's first, then by operation.
    fn ordered(&self) -> Vec<&Parked> {
        let mut v: Vec<&Parked> = self.parked.iter().collect();
        v.sort_by_key(|p| (Some(p.op) != self.current, p.op, p.seq));
        v
    }

    /// Every alternative, default first, within the bounds.
    fn alternatives(
        &self,
        bound: Option<usize>,
        max_faults: usize,
        kinds: &[SimFault],
        allow_wait: bool,
    ) -> Vec<Choice> {
        let may_preempt = bound.is_none_or(|b| self.preemptions_used < b);
        let mut out = Vec::new();
        for p in self.ordered() {
            let grant = |fault| Choice::Grant {
                op: p.op,
                seq: p.seq,
                fault,
            };
            if !may_preempt && self.is_preemption(&grant(None)) {
                continue;
            }
            out.push(grant(None));
            if self.faults_used < max_faults {
                for k in kinds {
                    if k.fits(p) {
                        out.push(grant(Some(k.clone())));
                    }
                }
            }
        }
        if allow_wait && self.can_wait && (may_preempt || !self.current_parked()) {
            out.push(Choice::Wait);
        }
        out
    }
}

trait Chooser {
    fn choose(&mut self, view: &View<'_>) -> std::result::Result<Choice, String>;
}

struct Dfs {
    prefix: Vec<usize>,
    /// On a real clock, timers (a lease renewal, a backoff) make a rerun's alternatives differ
    /// from the first run's: a step whose chosen alternative is gone takes the last one left,
    /// and the search goes on as a sample. On paused time that is a defect and fails.
    real_time: bool,
    taken: Vec<(usize, usize)>,
    bound: Option<usize>,
    max_faults: usize,
    kinds: Vec<SimFault>,
    allow_wait: bool,
}

impl Dfs {
    fn next_prefix(&self) -> Option<Vec<usize>> {
        let i = self.taken.iter().rposition(|&(c, n)| c + 1 < n)?;
        let mut p: Vec<usize> = self.taken[..i].iter().map(|&(c, _)| c).collect();
        p.push(self.taken[i].0 + 1);
        Some(p)
    }
}

impl Chooser for Dfs {
    fn choose(&mut self, view: &View<'_>) -> std::result::Result<Choice, String> {
        let alts = view.alternatives(self.bound, self.max_faults, &self.kinds, self.allow_wait);
        let step = self.taken.len();
        let mut c = self.prefix.get(step).copied().unwrap_or(0);
        if self.real_time && !alts.is_empty() {
            c = c.min(alts.len() - 1);
        }
        let choice = alts.get(c).cloned().ok_or_else(|| {
            "nondeterminism: the schedule's alternatives changed on rerun".to_owned()
        })?;
        self.taken.push((c, alts.len()));
        Ok(choice)
    }
}

struct Random {
    rng: fastrand::Rng,
    pct: bool,
    priorities: Vec<u64>,
    change_points: Vec<usize>,
    step: usize,
    max_faults: usize,
    kinds: Vec<SimFault>,
    allow_wait: bool,
}

impl Random {
    fn new(
        seed: u64,
        pct: bool,
        max_faults: usize,
        kinds: Vec<SimFault>,
        allow_wait: bool,
    ) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let change_points = (0..2).map(|_| rng.usize(0..40)).collect();
        Self {
            rng,
            pct,
            priorities: Vec::new(),
            change_points,
            step: 0,
            max_faults,
            kinds,
            allow_wait,
        }
    }
}

impl Chooser for Random {
    fn choose(&mut self, view: &View<'_>) -> std::result::Result<Choice, String> {
        self.step += 1;
        if self.allow_wait && view.can_wait && self.rng.u8(0..20) == 0 {
            return Ok(Choice::Wait);
        }
        let p = if self.pct {
            let max_op = view.parked.iter().map(|p| p.op).max().unwrap_or(0);
            while self.priorities.len() <= max_op {
                self.priorities.push(self.rng.u64(1000..u64::MAX));
            }
            let best = view
                .parked
                .iter()
                .max_by_key(|p| (self.priorities[p.op], std::cmp::Reverse(p.seq)))
                .expect("parked is not empty");
            if let Some(cp) = self.change_points.iter().position(|&s| s == self.step) {
                self.priorities[best.op] = cp as u64;
            }
            best
        } else {
            &view.parked[self.rng.usize(0..view.parked.len())]
        };
        let fault = if view.faults_used < self.max_faults && self.rng.u8(0..8) == 0 {
            let fitting: Vec<&SimFault> = self.kinds.iter().filter(|k| k.fits(p)).collect();
            (!fitting.is_empty()).then(|| fitting[self.rng.usize(0..fitting.len())].clone())
        } else {
            None
        };
        Ok(Choice::Grant {
            op: p.op,
            seq: p.seq,
            fault,
        })
    }
}

struct Replay {
    tokens: Vec<String>,
    at: usize,
}

impl Chooser for Replay {
    fn choose(&mut self, view: &View<'_>) -> std::result::Result<Choice, String> {
        let Some(t) = self.tokens.get(self.at).cloned() else {
            // Past the recorded choices: the search's default.
            return view
                .alternatives(None, 0, &[], false)
                .into_iter()
                .next()
                .ok_or_else(|| "no alternative".into());
        };
        self.at += 1;
        if t == "W" {
            return Ok(Choice::Wait);
        }
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let op: usize = t[..digits]
            .parse()
            .map_err(|_| format!("bad replay token {t:?}"))?;
        let mut rest = &t[digits..];
        let mut k = 0;
        if let Some(r) = rest.strip_prefix('/') {
            let d = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            k = r[..d]
                .parse()
                .map_err(|_| format!("bad replay token {t:?}"))?;
            rest = &r[d..];
        }
        let fault = if rest.is_empty() {
            None
        } else {
            Some(SimFault::parse(rest).ok_or_else(|| format!("bad fault in replay token {t:?}"))?)
        };
        let p = view
            .parked
            .iter()
            .filter(|p| p.op == op)
            .nth(k)
            .ok_or_else(|| {
                format!(
                    "replay diverged at choice {}: op{op} has no parked request #{k}",
                    self.at
                )
            })?;
        Ok(Choice::Grant {
            op,
            seq: p.seq,
            fault,
        })
    }
}
