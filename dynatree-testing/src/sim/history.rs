//! The history of a schedule, and the linearizability check that judges it.
//!
//! Every call a process makes through [`Calls::call`] (and every operation of [`Sim::op`] that
//! has a [`model`](super::Sim::model)) is recorded with the logical time it was invoked and the
//! logical time it returned, on one clock that ticks at every granted request and every call
//! event, so "returned before invoked" is the real order in which things happened. A call whose
//! answer never came (its process crashed, or it was dropped) is recorded as unknown; a call
//! that returned a transient error ([`ErrorKind::Backend`], a throttle, ...) is unknown too,
//! since its request may have been applied.
//!
//! After each schedule the history is checked (Wing and Gong's search, with the memo of
//! Lowe's variant, as Porcupine does): is there one order of the calls that respects real time
//! (a call that returned before another was invoked comes first), in which each known call's
//! model gives the result the call saw, each unknown call is applied or not, and the objects
//! after the last call (and the recovery's `resume()`) equal the table's? Calls are atomic in
//! the model: a read that saw an impossible state (an object at both ends of a move, a deleted
//! name still listed) has no place in any order.
//!
//! [`Sim::op`]: super::Sim::op

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use dynatree::{ErrorKind, Result};

use super::{Gate, Model};

/// A call's model: its effect on the model and the `Debug` form of its result there.
pub(super) type CallModel = Rc<dyn Fn(&mut Model) -> std::result::Result<String, ErrorKind>>;

/// What a process saw of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Observed {
    /// It returned `Ok`; the value's `Debug` form.
    Ok(String),
    /// It returned an error of this kind.
    Err(ErrorKind),
    /// Its answer never came (the process crashed, or the call was dropped), or it returned a
    /// transient error: its effect may or may not have happened.
    Unknown,
}

/// One call of a schedule's history.
#[derive(Clone)]
pub struct Call {
    /// The process (operation index) that made it.
    pub process: usize,
    /// Its name.
    pub name: String,
    /// When it was invoked, on the schedule's logical clock.
    pub invoked: u64,
    /// When it returned; `None` if it never did.
    pub returned: Option<u64>,
    /// What its process saw.
    pub observed: Observed,
    /// Whether the result's value is compared with the model's (not only `Ok` or the error).
    pub(super) compare: bool,
    pub(super) model: CallModel,
}

impl Call {
    /// A call of a history gathered elsewhere (from other OS processes, say), for
    /// [`check_history`]: made by `process`, invoked at `invoked` and returned at `returned`
    /// (`None`: never) on one clock, having seen `observed`, meaning `model` (whose value's
    /// `Debug` form is compared with an observed `Ok`).
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::sim::{Call, Observed};
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug)] struct V { v: u8 }
    /// let put = Call::new(0, "put a", 1, Some(2), Observed::Ok("()".into()), |m| {
    ///     m.put(["a"], &V { v: 1 })
    /// });
    /// assert_eq!(put.to_string(), "p0 [1, 2] put a: Ok(())");
    /// ```
    pub fn new<T, M>(
        process: usize,
        name: impl Into<String>,
        invoked: u64,
        returned: Option<u64>,
        observed: Observed,
        model: M,
    ) -> Self
    where
        T: fmt::Debug,
        M: Fn(&mut Model) -> std::result::Result<T, ErrorKind> + 'static,
    {
        Self {
            process,
            name: name.into(),
            invoked,
            returned,
            observed: if returned.is_some() {
                observed
            } else {
                Observed::Unknown
            },
            compare: true,
            model: Rc::new(move |m: &mut Model| model(m).map(|v| format!("{v:?}"))),
        }
    }
}

/// Checks a history for linearizability (see the [module docs](super)): whether one order of
/// `calls` that respects real time explains every result they saw and turns `initial` into
/// `actual`. Errors of the kinds in `refusals` mean "not applied"; transient errors and
/// unknown outcomes "applied or not". At most `DYNATREE_SIM_HISTORY_STATES` (2,000,000)
/// states are searched: split a long history by the paths its calls touch, as Porcupine does,
/// and check each part against the part of the table it covers.
///
/// # Errors
///
/// What is wrong, with the history.
///
/// # Examples
///
/// ```
/// use dynatree::ErrorKind;
/// use dynatree_testing::sim::{Call, Model, Observed, check_history};
/// # #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)] struct V { v: u8 }
/// let put = |v: u8, at: u64| {
///     Call::new(0, format!("put a={v}"), at, Some(at + 1), Observed::Ok("()".into()), move |m| {
///         m.put(["a"], &V { v })
///     })
/// };
/// let get = |at: u64, saw: &str| {
///     Call::new(1, "get a", at, Some(at + 1), Observed::Ok(saw.into()), |m| m.read::<V>(["a"]))
/// };
/// let mut end = Model::default();
/// end.put(["a"], &V { v: 2 }).unwrap();
/// let start = Model::default();
/// // put 1, put 2, then a read that saw 1: stale.
/// let stale = [put(1, 1), put(2, 3), get(5, "Some(V { v: 1 })")];
/// assert!(check_history(&start, &stale, &end, &[ErrorKind::Conflict]).is_err());
/// let fresh = [put(1, 1), put(2, 3), get(5, "Some(V { v: 2 })")];
/// assert!(check_history(&start, &fresh, &end, &[ErrorKind::Conflict]).is_ok());
/// ```
pub fn check_history(
    initial: &Model,
    calls: &[Call],
    actual: &Model,
    refusals: &[ErrorKind],
) -> std::result::Result<(), String> {
    let budget = std::env::var("DYNATREE_SIM_HISTORY_STATES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2_000_000);
    let list = || calls.iter().map(|c| format!("\n  {c}")).collect::<String>();
    match Linearizer::new(calls, refusals, actual, budget).check(initial) {
        Verdict::Linearizable => Ok(()),
        Verdict::NotLinearizable => Err(format!(
            "the history is not linearizable: no order of the calls that respects real time \
             explains every result seen and the objects in the table; calls (process \
             [invoked, returned] name: result):{}",
            list()
        )),
        Verdict::TooLarge(why) => Err(format!(
            "the history could not be checked: {why}; calls:{}",
            list()
        )),
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("process", &self.process)
            .field("name", &self.name)
            .field("invoked", &self.invoked)
            .field("returned", &self.returned)
            .field("observed", &self.observed)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ret = self
            .returned
            .map_or_else(|| "never".to_owned(), |r| r.to_string());
        write!(
            f,
            "p{} [{}, {ret}] {}: {}",
            self.process,
            self.invoked,
            self.name,
            match &self.observed {
                Observed::Ok(v) => format!("Ok({v})"),
                Observed::Err(k) => format!("Err({k:?})"),
                Observed::Unknown => "unknown".to_owned(),
            }
        )
    }
}

/// A process's recorder of its calls, handed to [`Sim::process`](super::Sim::process).
///
/// Cloning gives another handle on the same process's history.
#[derive(Clone)]
pub struct Calls {
    pub(super) process: usize,
    pub(super) gate: Arc<Gate>,
    pub(super) history: Rc<RefCell<Vec<Call>>>,
}

impl fmt::Debug for Calls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calls")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

/// Marks a call unknown unless it returned (a crashed process drops its future mid-call).
pub(super) struct Open {
    history: Rc<RefCell<Vec<Call>>>,
    index: usize,
    done: bool,
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.done
            && let Some(c) = self.history.borrow_mut().get_mut(self.index)
        {
            c.observed = Observed::Unknown;
        }
    }
}

impl Calls {
    /// Runs `call` (one request-level `Tree` call, or any future) as one entry of the history,
    /// whose meaning is `model`: its effect on the [`Model`] and the value it returns there
    /// (the same type as the call's). The checker compares the `Debug` forms of the values.
    ///
    /// Every write a process makes must go through here, or the history cannot explain the
    /// table at the end.
    ///
    /// # Errors
    ///
    /// The call's own result, unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree_testing::FakeTable;
    /// use dynatree_testing::sim::Sim;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
    /// struct V { v: u8 }
    ///
    /// Sim::new("a read sees a put or not", FakeTable::new)
    ///     .schedules(30)
    ///     .process("writer", |tree, calls| async move {
    ///         calls
    ///             .call("put a", tree.put(["a"], &V { v: 1 }), |m| m.put(["a"], &V { v: 1 }))
    ///             .await
    ///     })
    ///     .process("reader", |tree, calls| async move {
    ///         calls.call("get a", tree.get::<V>(["a"]), |m| m.read::<V>(["a"])).await?;
    ///         calls.call("get a", tree.get::<V>(["a"]), |m| m.read::<V>(["a"])).await
    ///     })
    ///     .run(); // a second read that misses a put the first one saw would fail it
    /// ```
    pub async fn call<T, F, M>(&self, name: impl Into<String>, call: F, model: M) -> Result<T>
    where
        F: Future<Output = Result<T>>,
        T: fmt::Debug,
        M: Fn(&mut Model) -> std::result::Result<T, ErrorKind> + 'static,
    {
        let model: CallModel = Rc::new(move |m: &mut Model| model(m).map(|v| format!("{v:?}")));
        let mut open = self.open(name.into(), true, model);
        let r = call.await;
        self.close(&mut open, &r);
        r
    }

    pub(super) fn open(&self, name: String, compare: bool, model: CallModel) -> Open {
        let invoked = self.tick();
        let mut history = self.history.borrow_mut();
        history.push(Call {
            process: self.process,
            name,
            invoked,
            returned: None,
            observed: Observed::Unknown,
            compare,
            model,
        });
        Open {
            history: Rc::clone(&self.history),
            index: history.len() - 1,
            done: false,
        }
    }

    /// The next instant of the schedule's logical clock.
    fn tick(&self) -> u64 {
        let mut st = self.gate.lock();
        st.clock += 1;
        st.clock
    }

    pub(super) fn close<T: fmt::Debug>(&self, open: &mut Open, r: &Result<T>) {
        let at = self.tick();
        if let Some(c) = self.history.borrow_mut().get_mut(open.index) {
            c.returned = Some(at);
            c.observed = match r {
                Ok(v) => Observed::Ok(format!("{v:?}")),
                Err(e) => Observed::Err(e.kind()),
            };
        }
        open.done = true;
    }
}

/// How the checker treats an error kind a call returned.
fn unknown_kind(k: ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::Backend
            | ErrorKind::Throttled
            | ErrorKind::Unprocessed
            | ErrorKind::TransactionCanceled
            // Another call took the operation over: its outcome is that call's.
            | ErrorKind::TakenOver
            // Recorded, partly done: recovery (`resume`) finishes it.
            | ErrorKind::Unfinished
    )
}

/// Searches for an order of `calls` that explains what they saw and ends at `actual`.
pub(super) struct Linearizer<'a> {
    calls: &'a [Call],
    refusals: &'a [ErrorKind],
    actual: &'a Model,
    seen: HashSet<(Vec<u64>, String)>,
    nodes: u64,
    budget: u64,
}

/// The outcome of a check that could not decide.
pub(super) enum Verdict {
    Linearizable,
    NotLinearizable,
    TooLarge(String),
}

impl<'a> Linearizer<'a> {
    pub(super) fn new(
        calls: &'a [Call],
        refusals: &'a [ErrorKind],
        actual: &'a Model,
        budget: u64,
    ) -> Self {
        Self {
            calls,
            refusals,
            actual,
            seen: HashSet::new(),
            nodes: 0,
            budget,
        }
    }

    pub(super) fn check(&mut self, initial: &Model) -> Verdict {
        let done = vec![0u64; self.calls.len().div_ceil(64)];
        match self.search(&done, 0, initial) {
            Some(true) => Verdict::Linearizable,
            Some(false) => Verdict::NotLinearizable,
            None => Verdict::TooLarge(format!(
                "the search gave up after {} states (DYNATREE_SIM_HISTORY_STATES)",
                self.budget
            )),
        }
    }

    /// `Some(found)`, or `None` when the budget ran out.
    /// `done`: a bit per call, `count` of them set.
    fn search(&mut self, done: &[u64], count: usize, state: &Model) -> Option<bool> {
        let n = self.calls.len();
        if count == n {
            return Some(state == self.actual);
        }
        let is_done = |i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        self.nodes += 1;
        if self.nodes > self.budget {
            return None;
        }
        if !self.seen.insert((done.to_vec(), format!("{state:?}"))) {
            return Some(false);
        }
        // Only a call invoked before every pending call that returned may come next. A call
        // that returned a transient error or was taken over bounds nothing: the intent it left
        // may be finished later (by `resume`, or by another call).
        let horizon = (0..n)
            .filter(|&i| !is_done(i))
            .filter(|&i| !matches!(self.calls[i].observed, Observed::Err(k) if unknown_kind(k)))
            .filter_map(|i| self.calls[i].returned)
            .min()
            .unwrap_or(u64::MAX);
        for i in 0..n {
            if is_done(i) || self.calls[i].invoked > horizon {
                continue;
            }
            let c = &self.calls[i];
            let mut next = done.to_vec();
            next[i / 64] |= 1 << (i % 64);
            let next = &next;
            let apply = || {
                let mut m = state.clone();
                let r = (c.model)(&mut m);
                (m, r)
            };
            let found = match &c.observed {
                Observed::Ok(v) => {
                    let (m, r) = apply();
                    match r {
                        Ok(got) if !c.compare || got == *v => self.search(next, count + 1, &m)?,
                        _ => false,
                    }
                }
                Observed::Err(k) if self.refusals.contains(k) => {
                    self.search(next, count + 1, state)?
                }
                Observed::Err(k) if unknown_kind(*k) => {
                    self.either(next, count + 1, state, &apply)?
                }
                Observed::Err(k) => {
                    let (m, r) = apply();
                    r == Err(*k) && self.search(next, count + 1, &m)?
                }
                Observed::Unknown => self.either(next, count + 1, state, &apply)?,
            };
            if found {
                return Some(true);
            }
        }
        Some(false)
    }

    /// An unknown outcome: not applied, or applied (whatever its result).
    fn either(
        &mut self,
        next: &[u64],
        count: usize,
        state: &Model,
        apply: &dyn Fn() -> (Model, std::result::Result<String, ErrorKind>),
    ) -> Option<bool> {
        if self.search(next, count, state)? {
            return Some(true);
        }
        let (m, r) = apply();
        Some(r.is_ok() && self.search(next, count, &m)?)
    }
}
