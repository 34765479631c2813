//! Operations written as steps: the scenario vocabulary of the simulations whose operations
//! must be ordered against each other (fenced puts, the overwrite fast path). Each simulated
//! operation is its own process (own `Tree`, own cache), so an operation that needs a warm
//! cache or an earned trust first does the writes that warm it, then raises a flag in a log
//! shared by the operations of one schedule; the operations that must come after it wait for
//! that flag (polled on the simulator's paused clock, at most 20 s). The log is cleared by each
//! schedule's setup, and the checks can read the real-time order it recorded.
//!
//! Also here: user transactions as data ([`TxOp`]), a value with an expiry ([`Exp`]), and the
//! builders that add an operation made of steps to a scenario.
#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;

use dynatree::Patch;
use futures::TryStreamExt;

use crate::acts::*;

/// The model of one operation.
pub type ModelFn = Box<dyn Fn(&mut Model) -> Result<(), ErrorKind>>;

/// The events of one schedule, in the (real-time) order they happened.
pub type Log = Rc<RefCell<Vec<&'static str>>>;

/// A value with an expiry (`#[dynatree(ttl)]`), seconds since the epoch.
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{name}")]
pub struct Exp {
    pub dir: String,
    pub name: String,
    pub v: u32,
    #[dynatree(ttl)]
    pub until: Option<u64>,
}

/// Long past: expired.
pub const PAST: u64 = 1_000;
/// Far ahead: live.
pub const FUTURE: u64 = 4_000_000_000;

pub fn exp(dir: &str, name: &str, v: u32, until: u64) -> Exp {
    Exp {
        dir: dir.into(),
        name: name.into(),
        v,
        until: Some(until),
    }
}

/// One action of a user transaction on `Doc` values.
#[derive(Clone, Debug)]
pub enum TxOp {
    Put(&'static str, &'static str, u32),
    Create(&'static str, &'static str, u32),
    Delete(&'static str, &'static str),
    /// `delete_if` the stored `v` equals this.
    DeleteIf(&'static str, &'static str, u32),
    /// A patch setting `v`.
    Patch(&'static str, &'static str, u32),
}

pub fn dkey(d: &str, n: &str) -> DocKey {
    DocKey {
        dir: d.into(),
        name: n.into(),
    }
}

/// The model of a transaction: all its actions, or (any refused) none; a refusal is the
/// transaction's cancellation.
pub fn tx_model(ops: &[TxOp], m: &mut Model) -> Result<(), ErrorKind> {
    let canceled = Err(ErrorKind::TransactionCanceled);
    for op in ops {
        match op {
            TxOp::Put(d, n, v) => m.put([*d, *n], &doc(d, n, *v))?,
            TxOp::Create(d, n, v) => {
                if m.create([*d, *n], &doc(d, n, *v)).is_err() {
                    return canceled;
                }
            }
            TxOp::Delete(d, n) => m.delete([*d, *n])?,
            TxOp::DeleteIf(d, n, v) => {
                let holds = matches!(m.get([*d, *n]), Some(Stored::Object(item))
                    if item.get("v") == Some(&Value::N(v.to_string())));
                if !holds {
                    return canceled;
                }
                m.delete([*d, *n])?;
            }
            TxOp::Patch(d, n, v) => {
                // A patch sets `v` and keeps the other attributes: a `Doc` stays a `Doc`, a
                // `V` (a plain put's value) stays a `V`.
                match m.get([*d, *n]) {
                    Some(Stored::Object(item)) if item.contains("dir") => {
                        m.put([*d, *n], &doc(d, n, *v))?
                    }
                    Some(Stored::Object(_)) => m.put([*d, *n], &V { v: *v })?,
                    _ => return canceled,
                }
            }
        }
    }
    Ok(())
}

pub fn tx_name(ops: &[TxOp]) -> String {
    let parts: Vec<String> = ops
        .iter()
        .map(|o| match o {
            TxOp::Put(d, n, v) => format!("put {d}/{n}={v}"),
            TxOp::Create(d, n, v) => format!("create {d}/{n}={v}"),
            TxOp::Delete(d, n) => format!("delete {d}/{n}"),
            TxOp::DeleteIf(d, n, v) => format!("delete {d}/{n} if v={v}"),
            TxOp::Patch(d, n, v) => format!("patch {d}/{n} v={v}"),
        })
        .collect();
    format!("tx[{}]", parts.join("; "))
}

/// One step of an operation.
#[derive(Clone, Debug)]
pub enum Step {
    /// `put p=v` on this process's tree (an error ends the operation).
    Put(P, u32),
    /// An act (an error ends the operation).
    Do(Act),
    /// An act whose outcome is ignored (used for its effect on the process's cache).
    Try(Act),
    /// Appends a flag to the log.
    Raise(&'static str),
    /// Waits (paused time, at most 20 s) until the flag is in the log; if it never comes, the
    /// operation ends there with an error.
    Wait(&'static str),
    /// The same, but goes on after 20 s without the flag.
    WaitAtMost(&'static str),
    /// Waits (at most 20 s, then goes on) until the object row of the path is in the table
    /// (looked at directly, not through the gate: the copy of a move has landed there).
    WaitRow(P),
    /// Sleeps (tokio time: the simulator's virtual clock).
    Sleep(Duration),
    /// `get p`: the result (`None` or the value) is the operation's output.
    Get(P),
    /// `list p`: the names, joined, are the operation's output.
    List(P),
    /// A transaction putting `doc(dir, name, v)` (setup's value: no change), outcome ignored:
    /// it reads the ancestors' listing rows and so teaches the process `L(dir)`.
    LearnParent(&'static str, &'static str, u32),
    /// A user transaction (an error ends the operation), with an idempotency token if set.
    Tx(Vec<TxOp>, Option<&'static str>),
    /// `repo::<Exp>().create`.
    CreateExp(&'static str, &'static str, u32, u64),
    /// `repo::<Exp>().put`.
    PutExp(&'static str, &'static str, u32, u64),
    /// `repo::<Exp>().get`: `get none` or `get v`.
    GetExp(&'static str, &'static str),
    /// The listing row of the path is lost (a raw DeleteItem, as a corruption).
    LoseListing(P),
    /// The table's time-to-live deletes every row whose `SC ttl` is before now + 2 h (the
    /// fences of the last hour included): not a request, nothing gated.
    ExpireFences,
}

pub fn has(log: &Log, flag: &str) -> bool {
    log.borrow().contains(&flag)
}

/// Whether flag `a` was raised before flag `b` (both raised).
pub fn before(log: &Log, a: &str, b: &str) -> bool {
    let l = log.borrow();
    match (
        l.iter().position(|f| *f == a),
        l.iter().position(|f| *f == b),
    ) {
        (Some(i), Some(j)) => i < j,
        _ => false,
    }
}

/// Polls the log (every 50 ms of paused time, at most 20 s) until `flag` is in it.
async fn wait_for(log: &Log, flag: &str) {
    let mut n = 0;
    while !has(log, flag) && n < 400 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        n += 1;
    }
}

pub async fn run_steps(steps: Vec<Step>, t: T, log: Log) -> dynatree::Result<String> {
    let mut out = String::new();
    for s in steps {
        match s {
            Step::Put(p, v) => {
                t.put(p, &V { v }).await?;
                out = format!("put {v}");
            }
            Step::Do(a) => out = a.run(t.clone()).await?,
            Step::Try(a) => {
                let r = a.run(t.clone()).await;
                out = format!("tried: {:?}", r.map_err(|e| e.kind()));
            }
            Step::Raise(f) => log.borrow_mut().push(f),
            Step::WaitAtMost(f) => wait_for(&log, f).await,
            Step::Wait(f) => {
                wait_for(&log, f).await;
                if !has(&log, f) {
                    // The simulator let 20 s pass first: the order this wait was to ensure
                    // does not hold, so the operation stops here, having done nothing more
                    // (an error: its model allows "not applied").
                    return Err(dynatree::Error::new(
                        dynatree::ErrorKind::Backend,
                        format!("waited out: `{f}` was never raised"),
                    ));
                }
            }
            Step::WaitRow(p) => {
                let key = object_key(&p);
                let table = backend(&t);
                let mut n = 0;
                while n < 400
                    && !table
                        .rows()
                        .iter()
                        .any(|r| Key::from_item(r).is_some_and(|k| k == key))
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    n += 1;
                }
            }
            Step::Sleep(d) => tokio::time::sleep(d).await,
            Step::Get(p) => {
                out = match t.get::<V>(p).await? {
                    Some(v) => format!("get {}", v.v),
                    None => "get none".to_owned(),
                }
            }
            Step::List(p) => {
                let names: Vec<String> = t.list(p).try_collect().await?;
                out = format!("list {}", names.join(","));
            }
            Step::LearnParent(dir, name, v) => {
                let mut tx = t.transaction();
                tx.put(&doc(dir, name, v));
                let r = tx.commit().await;
                out = format!("learnt: {:?}", r.map_err(|e| e.kind()));
            }
            Step::Tx(ops, token) => {
                let mut tx = t.transaction();
                for op in &ops {
                    match op {
                        TxOp::Put(d, n, v) => tx.put(&doc(d, n, *v)),
                        TxOp::Create(d, n, v) => tx.create(&doc(d, n, *v)),
                        TxOp::Delete(d, n) => tx.delete::<Doc>(&dkey(d, n)),
                        TxOp::DeleteIf(d, n, v) => {
                            tx.delete_if::<Doc>(&dkey(d, n), Doc::FIELDS.v.eq(*v))
                        }
                        TxOp::Patch(d, n, v) => {
                            tx.patch(Patch::new(&dkey(d, n)).set(Doc::FIELDS.v, *v))
                        }
                    };
                }
                if let Some(tok) = token {
                    tx.idempotency_token(tok);
                }
                tx.commit().await?;
                out = "committed".to_owned();
            }
            Step::CreateExp(d, n, v, until) => {
                t.repo::<Exp>().create(&exp(d, n, v, until)).await?;
                out = format!("created {v}");
            }
            Step::PutExp(d, n, v, until) => {
                t.repo::<Exp>().put(&exp(d, n, v, until)).await?;
                out = format!("put {v}");
            }
            Step::GetExp(d, n) => {
                let key = ExpKey {
                    dir: d.into(),
                    name: n.into(),
                };
                out = match t.repo::<Exp>().get(&key).await? {
                    Some(e) => format!("get {}", e.v),
                    None => "get none".to_owned(),
                }
            }
            Step::LoseListing(path) => {
                write_raw(&t, &[Raw::Remove(listing_key(&path))]).await?;
            }
            Step::ExpireFences => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                backend(&t).expire_ttl(now + 7200);
            }
        }
    }
    Ok(out)
}

/// Adds an operation running `steps`, with `model` (the serial check needs every operation's).
pub fn op(
    sim: Sim<FakeTable>,
    log: &Log,
    name: &str,
    steps: Vec<Step>,
    model: Option<ModelFn>,
) -> Sim<FakeTable> {
    let l = log.clone();
    let sim = sim.op(name.to_owned(), move |t| {
        run_steps(steps.clone(), t, l.clone())
    });
    match model {
        Some(m) => sim.model(m),
        None => sim,
    }
}

pub fn put_model(path: P, v: u32) -> Option<ModelFn> {
    Some(Box::new(move |m: &mut Model| m.put(path.clone(), &V { v })))
}

pub fn no_effect() -> Option<ModelFn> {
    Some(Box::new(|_m: &mut Model| Ok(())))
}

/// An act as an operation (with its model), right away.
pub fn act_now(sim: Sim<FakeTable>, log: &Log, a: Act) -> Sim<FakeTable> {
    let m = a.clone();
    op(
        sim,
        log,
        &a.name(),
        vec![Step::Do(a)],
        Some(Box::new(move |md: &mut Model| m.model(md))),
    )
}

/// An act run once `flag` is raised, with its model; if 20 s pass first, the act is not run
/// and the operation fails ([`Step::Wait`]).
pub fn act_after(sim: Sim<FakeTable>, log: &Log, flag: &'static str, a: Act) -> Sim<FakeTable> {
    let m = a.clone();
    op(
        sim,
        log,
        &format!("{} (after {flag})", a.name()),
        vec![Step::Wait(flag), Step::Do(a)],
        Some(Box::new(move |md: &mut Model| m.model(md))),
    )
}

/// An act run once `flag` is raised or 20 s passed ([`Step::WaitAtMost`]), with its model
/// where it has one.
pub fn act_after_at_most(
    sim: Sim<FakeTable>,
    log: &Log,
    flag: &'static str,
    a: Act,
) -> Sim<FakeTable> {
    let m = a.clone();
    let name = format!("{} (after {flag})", a.name());
    op(
        sim,
        log,
        &name,
        vec![Step::WaitAtMost(flag), Step::Do(a)],
        m.has_model()
            .then(|| Box::new(move |md: &mut Model| m.model(md)) as Box<_>),
    )
}

/// A reader: `get path` once `flag` is raised (no flag: right away). No effect on the model;
/// its result is checked by [`reader_sees`].
pub fn reader(
    sim: Sim<FakeTable>,
    log: &Log,
    flag: Option<&'static str>,
    path: &[&str],
) -> Sim<FakeTable> {
    let path = p(path);
    let mut steps = Vec::new();
    if let Some(f) = flag {
        steps.push(Step::Wait(f));
    }
    steps.push(Step::Get(path.clone()));
    op(
        sim,
        log,
        &format!("get {}", short(&path)),
        steps,
        no_effect(),
    )
}

/// A lister: `list path` (no effect on the model); checked by [`reader_sees`].
pub fn lister(sim: Sim<FakeTable>, log: &Log, path: &[&str]) -> Sim<FakeTable> {
    let path = p(path);
    op(
        sim,
        log,
        &format!("list {}", short(&path)),
        vec![Step::List(path.clone())],
        no_effect(),
    )
}

/// The output of operation `i` is one of `allowed` (or it did not return `Ok`): any value the
/// model allows, whenever the reader came.
pub fn reader_sees(
    i: usize,
    allowed: &'static [&'static str],
) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end: &End<'_>| match &end.outcomes[i] {
        OpOutcome::Ok(s) => {
            let s = s.trim_matches('"');
            if allowed.contains(&s) {
                Ok(())
            } else {
                Err(format!("reader op{i} saw {s:?}, allowed {allowed:?}"))
            }
        }
        _ => Ok(()),
    }
}

/// A new name under a known parent: the process learns `L(dir)` from a transaction that
/// writes setup's document `dir/y` = 1 again (no change), raises `flag`, then puts
/// `dir/name=v`: the 2-item verification, then the fenced PutItem. Model: the put.
pub fn known_parent_put(
    sim: Sim<FakeTable>,
    log: &Log,
    dir: &'static str,
    name: &str,
    v: u32,
    flag: &'static str,
) -> Sim<FakeTable> {
    let target = p(&[dir, name]);
    op(
        sim,
        log,
        &format!("learn {dir} | {flag} | put {dir}/{name}={v}"),
        vec![
            Step::LearnParent(dir, "y", 1),
            Step::Raise(flag),
            Step::Put(target.clone(), v),
        ],
        put_model(target, v),
    )
}
