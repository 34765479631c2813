//! Scenario vocabulary shared by the simulator tests: the operations as data (`Act`), their
//! model, lock-ignoring writes, scenario builders, fault profiles ([`Faults`]) and checks. Each
//! module uses a part of it (and of the names re-exported for it).
#![allow(dead_code, unused_imports)]

use std::future::Future;
pub use std::time::Duration;

pub use dynatree::storage::{Condition, Key, Storage, TransactAction};
pub use dynatree::{
    ErrorKind, Hierarchical, Tree, ops::LinkPolicy, ops::OnChildren, storage::Item, storage::Value,
};
pub use dynatree_testing::FakeTable;
pub use dynatree_testing::sim::{End, Model, OpOutcome, Sim, SimFault, SimStorage, Stored};
pub use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct V {
    pub v: u32,
}

/// A two-level document for `create` and `update` (repositories need a template).
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{name}")]
pub struct Doc {
    pub dir: String,
    pub name: String,
    pub v: u32,
}

pub fn doc(dir: &str, name: &str, v: u32) -> Doc {
    Doc {
        dir: dir.into(),
        name: name.into(),
        v,
    }
}

pub type P = Vec<String>;
pub type T = Tree;

pub const SC: char = '¦';

pub fn p(parts: &[&str]) -> P {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// One operation of a scenario, with its model.
#[derive(Clone, Debug)]
pub enum Act {
    Put(P, u32),
    PutLink(P, P),
    /// `repo::<Doc>().create` of `{dir}/{name}`.
    Create(&'static str, &'static str, u32),
    /// `repo::<Doc>().update` of `{dir}/{name}`.
    Update(&'static str, &'static str, u32),
    Delete(P),
    DeleteSubtree(P),
    DeleteNode(P, OnChildren),
    /// `delete_node(Reparent)`, called again once after a transient error (the documented
    /// recovery: "call again finishes").
    ReparentTwice(P),
    /// `ReparentTwice` as the earliest multi-request scenarios check it: called again once
    /// after any error but the refusals `HasChildren`, `AlreadyExists` and `Locked`.
    ReparentTwiceUnlessRefused(P),
    Move(P, P, LinkPolicy),
    /// A move, called again after a transient (backend) error, as a client retrying would.
    MoveRetried(P, P),
    /// A move that may join the same move of another process (documented: "the same call
    /// again (from this process or another) joins the recorded operation and returns its
    /// result"). `Ok` must mean: the move was applied (by this call or the one it joined).
    MoveJoining(P, P),
    /// The same move from two processes, as the earliest multi-request scenarios check it: joined (`Ok`)
    /// or after the other (`NotFound`, `AlreadyExists`, `Locked`, reported as `Ok`), the move
    /// is applied once, which its model checks (source gone, destination there).
    MoveJoiningOrAfter(P, P),
    /// The same for `delete_subtree`.
    DeleteSubtreeJoining(P),
    Copy(P, P),
    Resume,
    /// The Go library's `Put` (REFERENCE §7): every listing row of the path and the object row
    /// written with unconditional PutItem (erasing any bookkeeping attribute there). No model.
    GoPut(P, u32),
    /// The Go library's `Delete`: unconditional DeleteItem of the object row and of its own
    /// listing row. No model.
    GoDelete(P),
    /// A Go put of `P`, then (strictly after, same client) a dynatree put of `P` with
    /// another value. No model.
    GoPutThenPut(P, u32, u32),
}

pub fn short(p: &P) -> String {
    p.iter()
        .map(|c| {
            if c.len() > 12 {
                format!("{}…({}B)", &c[..4], c.len())
            } else {
                c.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

pub fn transient(k: ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::Backend
            | ErrorKind::Throttled
            | ErrorKind::Unprocessed
            | ErrorKind::TransactionCanceled
    )
}

pub fn listing_key(path: &P) -> Key {
    let (last, parent) = path.split_last().expect("a non-empty path");
    let mut h = String::from(SC);
    for c in parent {
        h.push_str(c);
        h.push(SC);
    }
    Key::new(h, last.clone())
}

pub fn object_key(path: &P) -> Key {
    let mut h = String::new();
    for c in path {
        h.push(SC);
        h.push_str(c);
    }
    Key::new(h, SC.to_string())
}

/// A lock-ignoring writer modelled on the Go library's Put: every listing row and the object
/// row, bare and unconditional (it erases locks and removal marks), here in ONE transaction.
/// The real Go put sends them as separate writes, and then, racing any delete (its own or
/// dynatree's), can itself leave an object whose listing row is gone (REFERENCE §2, defects 4
/// and 7): no protocol of dynatree's can prevent that, so these scenarios isolate what dynatree
/// is answerable for, the effect of erased locks on its own operations.
pub async fn go_put(t: &T, path: &P, v: u32) -> dynatree::Result<()> {
    let mut actions: Vec<TransactAction> = (1..=path.len())
        .map(|i| TransactAction::Put {
            item: listing_key(&path[..i].to_vec()).into_item(),
            condition: Condition::Always,
        })
        .collect();
    let mut row: Item = object_key(path).into_item();
    row.insert("v", Value::N(v.to_string()));
    actions.push(TransactAction::Put {
        item: row,
        condition: Condition::Always,
    });
    t.storage().transact_write(actions).await
}

/// The Go library's Delete: the object row and its listing row, unconditionally.
pub async fn go_delete(t: &T, path: &P) -> dynatree::Result<()> {
    t.storage()
        .delete_item(&object_key(path), Condition::Always)
        .await?;
    t.storage()
        .delete_item(&listing_key(path), Condition::Always)
        .await
}

/// `delete_node(p, Reparent)`, called once more after an error for which `again` holds.
async fn reparent_twice(t: T, p: P, again: fn(ErrorKind) -> bool) -> dynatree::Result<String> {
    match t.delete_node(p.clone(), OnChildren::Reparent).await {
        Ok(()) => Ok(String::new()),
        Err(e) if !again(e.kind()) => Err(e),
        Err(first) => match t.delete_node(p, OnChildren::Reparent).await {
            Ok(()) => Ok("second call".to_owned()),
            // Documented: the first call may have completed with its response lost; the same
            // call again then acts on the tree as it is now (here refused). The outcome stays
            // the first failure's (applied or not), which the serial check then decides from
            // the state.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::AlreadyExists | ErrorKind::NotFound | ErrorKind::HasChildren
                ) =>
            {
                Err(first)
            }
            Err(e) => Err(e),
        },
    }
}

impl Act {
    pub fn name(&self) -> String {
        match self {
            Act::Put(p, v) => format!("put {}={v}", short(p)),
            Act::PutLink(p, t) => format!("put_link {}->{}", short(p), short(t)),
            Act::Create(d, n, v) => format!("create {d}/{n}={v}"),
            Act::Update(d, n, v) => format!("update {d}/{n}={v}"),
            Act::Delete(p) => format!("delete {}", short(p)),
            Act::DeleteSubtree(p) => format!("delete_subtree {}", short(p)),
            Act::DeleteNode(p, c) => format!("delete_node {} {c:?}", short(p)),
            Act::ReparentTwice(p) | Act::ReparentTwiceUnlessRefused(p) => {
                format!("delete_node {} Reparent (x2)", short(p))
            }
            Act::Move(f, t, l) => format!("move {}->{} {l:?}", short(f), short(t)),
            Act::MoveRetried(f, t) => format!("move {}->{} (retried)", short(f), short(t)),
            Act::MoveJoining(f, t) | Act::MoveJoiningOrAfter(f, t) => {
                format!("move {}->{} (may join)", short(f), short(t))
            }
            Act::DeleteSubtreeJoining(p) => format!("delete_subtree {} (may join)", short(p)),
            Act::Copy(f, t) => format!("copy {}->{}", short(f), short(t)),
            Act::Resume => "resume".into(),
            Act::GoPut(p, v) => format!("Go put {}={v}", short(p)),
            Act::GoDelete(p) => format!("Go delete {}", short(p)),
            Act::GoPutThenPut(p, a, b) => format!("Go put {}={a}, then put ={b}", short(p)),
        }
    }

    pub fn has_model(&self) -> bool {
        !matches!(
            self,
            Act::GoPut(..) | Act::GoDelete(_) | Act::GoPutThenPut(..)
        )
    }

    pub async fn run(self, t: T) -> dynatree::Result<String> {
        match self {
            Act::Put(p, v) => t.put(p, &V { v }).await.map(|()| String::new()),
            Act::PutLink(p, to) => t.put_link(p, to).await.map(|()| String::new()),
            Act::Create(d, n, v) => t
                .repo::<Doc>()
                .create(&doc(d, n, v))
                .await
                .map(|()| String::new()),
            Act::Update(d, n, v) => t
                .repo::<Doc>()
                .update(&mut doc(d, n, v))
                .await
                .map(|()| String::new()),
            Act::Delete(p) => t.delete(p).await.map(|()| String::new()),
            Act::DeleteSubtree(p) | Act::DeleteSubtreeJoining(p) => {
                t.delete_subtree(p).await.map(|n| n.to_string())
            }
            Act::DeleteNode(p, c) => t.delete_node(p, c).await.map(|()| String::new()),
            Act::ReparentTwice(p) => reparent_twice(t, p, transient).await,
            Act::ReparentTwiceUnlessRefused(p) => {
                let again = |k| {
                    !matches!(
                        k,
                        ErrorKind::HasChildren | ErrorKind::AlreadyExists | ErrorKind::Locked
                    )
                };
                reparent_twice(t, p, again).await
            }
            Act::Move(f, to, l) => t
                .move_subtree_with(f, to, l)
                .await
                .map(|r| format!("{} objects", r.objects)),
            Act::MoveRetried(f, to) => {
                let mut last = None;
                for _ in 0..3 {
                    match t.move_subtree(f.clone(), to.clone()).await {
                        Ok(r) => return Ok(format!("{} objects, id {:?}", r.objects, r.id)),
                        Err(e) if transient(e.kind()) => last = Some(e),
                        // Documented: a move whose last response was lost may have completed;
                        // the same call again then finds no source. Its outcome stays the
                        // earlier failure's (applied or not), which the check then decides.
                        Err(e) if e.kind() == ErrorKind::NotFound && last.is_some() => {
                            return Err(last.expect("checked"));
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(last.expect("three attempts"))
            }
            Act::MoveJoining(f, to) => t
                .move_subtree(f, to)
                .await
                .map(|r| format!("{} objects, id {:?}", r.objects, r.id)),
            Act::MoveJoiningOrAfter(f, to) => match t.move_subtree(f, to).await {
                Ok(r) => Ok(format!("{} objects", r.objects)),
                // Came after the other, or lost the race to it (its source or destination
                // taken by the other's identical move).
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::NotFound | ErrorKind::AlreadyExists | ErrorKind::Locked
                    ) =>
                {
                    Ok(format!("after the other ({:?})", e.kind()))
                }
                Err(e) => Err(e),
            },
            Act::Copy(f, to) => t
                .copy_subtree(f, to)
                .await
                .map(|r| format!("{} objects", r.objects)),
            Act::Resume => t.resume().await.map(|r| format!("{} resumed", r.len())),
            Act::GoPut(p, v) => go_put(&t, &p, v).await.map(|()| String::new()),
            Act::GoDelete(p) => go_delete(&t, &p).await.map(|()| String::new()),
            Act::GoPutThenPut(p, a, b) => {
                go_put(&t, &p, a).await?;
                t.put(p, &V { v: b })
                    .await
                    .map(|()| "put acknowledged".to_owned())
            }
        }
    }

    pub fn model(&self, m: &mut Model) -> Result<(), ErrorKind> {
        match self {
            Act::Put(p, v) => m.put(p, &V { v: *v }),
            Act::PutLink(p, t) => m.put_link(p, t),
            Act::Create(d, n, v) => m.create([*d, *n], &doc(d, n, *v)),
            Act::Update(d, n, v) => m.update([*d, *n], &doc(d, n, *v)),
            Act::Delete(p) => m.delete(p),
            Act::DeleteSubtree(p) | Act::DeleteSubtreeJoining(p) => m.delete_subtree(p),
            Act::DeleteNode(p, c) => m.delete_node(p, *c),
            Act::ReparentTwice(p) | Act::ReparentTwiceUnlessRefused(p) => {
                m.delete_node(p, OnChildren::Reparent)
            }
            Act::Move(f, t, l) => m.move_subtree(f, t, *l),
            Act::MoveRetried(f, t) => m.move_subtree(f, t, LinkPolicy::Report),
            // Only used without the serial model (see `ok_means_applied`).
            Act::MoveJoining(f, t) => m.move_subtree(f, t, LinkPolicy::Report),
            // Joining a move that was already applied: Ok, and nothing more changes.
            Act::MoveJoiningOrAfter(f, t) => match m.move_subtree(f, t, LinkPolicy::Report) {
                Err(ErrorKind::NotFound) if m.has_node(t) && !m.has_node(f) => Ok(()),
                other => other,
            },
            Act::Copy(f, t) => m.copy_subtree(f, t),
            Act::Resume => Ok(()),
            Act::GoPut(..) | Act::GoDelete(_) | Act::GoPutThenPut(..) => Ok(()),
        }
    }
}

pub fn plain_tree(s: SimStorage<FakeTable>) -> T {
    Tree::new(s)
}

/// A plain tree whose subtree operations send one read at a time (as their transactions), so that a bounded
/// search can place another operation's requests at every point between them.
pub fn sequential_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .subtree_reads_in_flight(1)
        .build()
        .expect("a tree with one request in flight")
}

pub fn pix_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .path_index(1)
        .build()
        .expect("a tree with a path index")
}

pub fn short_lease_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .removal_lease(Duration::from_millis(200))
        .build()
        .expect("a tree with a short lease")
}

/// The start of a scenario (200 schedules): each schedule's table first gets the `setup`
/// objects, then the `links`, on trees built by `tree`.
pub fn scenario_base(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: Vec<(P, u32)>,
    links: Vec<(P, P)>,
) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .schedules(200)
        .tree(tree)
        .setup(move |t| {
            let setup = setup.clone();
            let links = links.clone();
            async move {
                for (p, v) in setup {
                    t.put(p, &V { v }).await?;
                }
                for (p, to) in links {
                    t.put_link(p, to).await?;
                }
                Ok(())
            }
        })
}

/// Adds `acts` as concurrent operations, each run by `run` (`Act::run`, or a wrapper of it),
/// with its model when `models` is set and the act has one (the serial check needs them all).
pub fn with_acts<F>(
    mut sim: Sim<FakeTable>,
    acts: &[Act],
    models: bool,
    run: fn(Act, T) -> F,
) -> Sim<FakeTable>
where
    F: Future<Output = dynatree::Result<String>> + 'static,
{
    for a in acts {
        let (op, model) = (a.clone(), a.clone());
        sim = sim.op(a.name(), move |t| run(op.clone(), t));
        if models && a.has_model() {
            sim = sim.model(move |m| model.model(m));
        }
    }
    sim
}

/// A scenario: `setup` objects and links, then `acts` concurrently (each checked against its
/// model when every act has one), on trees built by `tree`.
pub fn scenario_with(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: Vec<(P, u32)>,
    links: Vec<(P, P)>,
    acts: &[Act],
) -> Sim<FakeTable> {
    with_acts(
        scenario_base(name, tree, setup, links),
        acts,
        true,
        Act::run,
    )
}

/// `(path, value)` pairs written as slices of `&str`.
pub fn paths(setup: &[(&[&str], u32)]) -> Vec<(P, u32)> {
    setup.iter().map(|(q, v)| (p(q), *v)).collect()
}

pub fn scenario(name: &str, setup: &[(&[&str], u32)], acts: &[Act]) -> Sim<FakeTable> {
    scenario_with(name, plain_tree, paths(setup), Vec::new(), acts)
}

pub fn with_faults(sim: Sim<FakeTable>) -> Sim<FakeTable> {
    sim.faults(1, SimFault::all())
}

/// A fault profile: the faults the simulator may place in each schedule of a scenario. One
/// scenario, written once, runs under several profiles (one test per profile, or [`run_under`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Faults {
    /// No fault.
    None,
    /// One fault of every kind per schedule ([`SimFault::all`]), with "let time pass" offered
    /// while requests are parked.
    OneOfAll,
    /// One request fault per schedule ([`request_faults`]: no crash), with "let time pass".
    OneRequestFault,
    /// Up to two transaction conflicts per schedule ([`conflict`]).
    Conflicts,
    /// Up to two faults per schedule among transaction conflicts and crashes.
    ConflictsAndCrashes,
}

impl Faults {
    /// `sim` with the profile's faults.
    pub fn apply(self, sim: Sim<FakeTable>) -> Sim<FakeTable> {
        match self {
            Faults::None => sim,
            Faults::OneOfAll => with_faults(sim).allow_wait(true),
            Faults::OneRequestFault => sim.faults(1, request_faults()).allow_wait(true),
            Faults::Conflicts => sim.faults(2, [conflict()]),
            Faults::ConflictsAndCrashes => {
                sim.faults(2, [conflict(), SimFault::Crash, SimFault::CrashAfterApply])
            }
        }
    }
}

/// Runs the scenario `make` builds under each profile in turn, panicking on the first failure.
pub fn run_under(make: impl Fn() -> Sim<FakeTable>, profiles: &[Faults]) {
    for f in profiles {
        f.apply(make()).run();
    }
}

/// Runs the scenario without faults, then with one fault of every kind per schedule (and
/// "let time pass" offered while requests are parked).
pub fn both(make: impl Fn() -> Sim<FakeTable>) {
    run_under(make, &[Faults::None, Faults::OneOfAll]);
}

/// The request faults (no crash: the caller lives and may call again).
pub fn request_faults() -> [SimFault; 3] {
    [
        SimFault::Request(dynatree_testing::Fault::Fail),
        SimFault::Request(dynatree_testing::Fault::FailAfterApply),
        SimFault::Request(dynatree_testing::Fault::Throttle),
    ]
}

/// The process dies, before or after its request is applied.
pub fn crashes() -> [SimFault; 2] {
    [SimFault::Crash, SimFault::CrashAfterApply]
}

/// A crash or a failed request (two of them hit a rollback as well as its cause).
pub fn crashes_and_failures() -> [SimFault; 3] {
    [
        SimFault::Crash,
        SimFault::CrashAfterApply,
        SimFault::Request(dynatree_testing::Fault::Fail),
    ]
}

/// Runs exactly `replay` and panics with the failure (trace included) if a check breaks.
///
/// With `DYNATREE_SIM_FENCED=1` the requests differ (fenced puts), so a schedule recorded in
/// the default mode does not apply: the scenario is explored instead.
pub fn replay_exact(sim: Sim<FakeTable>, replay: &str) {
    if std::env::var("DYNATREE_SIM_FENCED").is_ok_and(|v| v == "1") {
        eprintln!("fenced puts: exploring the scenario instead of its default-mode schedule");
        sim.run();
        return;
    }
    if let Err(f) = sim.replay(replay) {
        panic!("{f}");
    }
}

/// Every object row of a tree with a path index of depth 1 carries the index attributes of
/// its own path (so the index and the walk agree).
pub fn pix_attrs_match(end: &End<'_>) -> Result<(), String> {
    let sc = SC.to_string();
    for r in end.rows {
        let (Some(h), Some(c)) = (r.get_s("Key"), r.get_s("Child")) else {
            continue;
        };
        // Fence rows (fenced puts) are no objects.
        if c != sc || h.starts_with(&format!("{sc}{sc}")) || r.contains(&format!("{sc}fence")) {
            continue;
        }
        let first: String = {
            let rest = &h[sc.len()..];
            let end = rest.find(SC).unwrap_or(rest.len());
            format!("{sc}{}", &rest[..end])
        };
        let ph = r.get_s(&format!("{sc}pix.h"));
        let pr = r.get_s(&format!("{sc}pix.r"));
        if ph != Some(first.as_str()) || pr != Some(h) {
            return Err(format!(
                "object row {h:?} has path index attributes {ph:?}/{pr:?}, expected {first:?}/{h:?}: the index no longer finds it"
            ));
        }
    }
    Ok(())
}

/// The objects with value `v` (user attribute `v`), by path.
pub fn paths_with_value(end: &End<'_>, v: u32) -> Vec<P> {
    (end.model.objects().keys())
        .filter(|path| end.number(path.as_slice(), "v") == Some(u64::from(v)))
        .cloned()
        .collect()
}

// Corrupted tables and reports, shared by the scenarios of check and repair (`check.rs`,
// `repair.rs`).

/// The report of the check taken in setup (each schedule's own), shared with the repairs.
pub type Slot = std::rc::Rc<std::cell::RefCell<Option<dynatree::check::Report>>>;

/// One raw row of a corrupted table.
#[derive(Clone, Debug)]
pub enum Raw {
    /// An object row `v` at the path, without anything else.
    Object(P, u32),
    /// A bare listing row.
    Listing(P),
    /// A listing row with a removal mark that expired long ago.
    ExpiredMark(P),
    /// A listing row locked by an operation that is not recorded.
    Lock(P, &'static str),
    /// Deletes the row with this key (a listing row lost, say).
    Remove(Key),
}

/// Writes `rows` raw, as the Go library or a crashed process leaves them.
pub async fn write_raw(t: &T, rows: &[Raw]) -> dynatree::Result<()> {
    let s = t.storage();
    for r in rows {
        match r {
            Raw::Object(path, v) => {
                let mut item = object_key(path).into_item();
                item.insert("v", Value::N(v.to_string()));
                s.put_item(item, Condition::Always).await?;
            }
            Raw::Listing(path) => {
                s.put_item(listing_key(path).into_item(), Condition::Always)
                    .await?;
            }
            Raw::ExpiredMark(path) => {
                let mut item = listing_key(path).into_item();
                item.insert(
                    format!("{SC}deleting"),
                    Value::S("1000:00000000dead0001".into()),
                );
                s.put_item(item, Condition::Always).await?;
            }
            Raw::Lock(path, id) => {
                let mut item = listing_key(path).into_item();
                item.insert(format!("{SC}moving"), Value::S((*id).into()));
                s.put_item(item, Condition::Always).await?;
            }
            Raw::Remove(key) => s.delete_item(key, Condition::Always).await?,
        }
    }
    Ok(())
}

/// The fake table behind a simulated tree's storage.
pub fn backend(t: &T) -> FakeTable {
    t.storage()
        .downcast_ref::<SimStorage<FakeTable>>()
        .expect("a simulator's storage")
        .backend()
        .clone()
}

/// A short form of a report's violations: `class path`.
pub fn classes(r: &dynatree::check::Report) -> Vec<String> {
    r.violations()
        .iter()
        .map(|v| {
            format!(
                "{} {}",
                v.class(),
                v.path().map(|p| p.to_string()).unwrap_or_default()
            )
        })
        .collect()
}

/// The app's operation `a`, with its model.
pub fn act(sim: Sim<FakeTable>, a: Act) -> Sim<FakeTable> {
    let (run, model) = (a.clone(), a.clone());
    sim.op(a.name(), move |t| run.clone().run(t))
        .model(move |m| model.model(m))
}

/// `check()` of the final rows, on a tree made by `build` in a thread of its own: its
/// violations, apart from the classes left to humans (and empty listings when `allow_empty`).
pub fn final_violations(
    rows: &[Item],
    build: fn(FakeTable) -> T,
    allow_empty: bool,
) -> Result<Vec<String>, String> {
    let rows = rows.to_vec();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let table = FakeTable::new();
            let tree = build(table.clone());
            tree.create_table().await?;
            for r in rows {
                table.put_item(r, Condition::Always).await?;
            }
            // The table is at rest: nothing transient to wait out.
            let report = tree.check().grace(Duration::ZERO).run().await?;
            Ok::<_, dynatree::Error>(
                report
                    .violations()
                    .iter()
                    .filter(|v| v.class().repairable())
                    .filter(|v| !(allow_empty && v.class() == dynatree::check::Class::EmptyListing))
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
            )
        })
    })
    .join()
    .map_err(|_| "the final check panicked".to_owned())?
    .map_err(|e| format!("the final check failed: {e}"))
}

/// A transaction conflict (`Fault::Conflict`), for `.faults(..)`.
pub fn conflict() -> SimFault {
    SimFault::Request(dynatree_testing::Fault::Conflict)
}

/// Fails when one of the first `n` operations returned a transient error.
pub fn absorbed(n: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| {
        for i in 0..n {
            if let OpOutcome::Err(e) = &end.outcomes[i]
                && matches!(
                    e.kind(),
                    ErrorKind::Conflict
                        | ErrorKind::TransactionCanceled
                        | ErrorKind::Backend
                        | ErrorKind::Throttled
                )
            {
                return Err(format!("op{i} failed on a transient conflict: {e:?}"));
            }
        }
        Ok(())
    }
}

/// Never stored: an entity needs one hierarchical variant; every object is `Any::Object`
/// (what a follower of the whole table decodes the stream into).
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "Never/{id}")]
pub struct Never {
    pub id: String,
}

/// Any object of the table, decoded from the stream by the followers of the scenarios.
#[derive(dynatree::Entity, Debug, Clone, PartialEq)]
pub enum Any {
    Never(Never),
    #[dynatree(other)]
    Object(dynatree::entity::Unknown),
}
