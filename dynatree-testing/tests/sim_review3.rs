//! Third review round: schedules and faults aimed at the multi-request protocols after the
//! fixes of the second round (commits c6b25f9, 58e186b, 643f05e): re-parenting as an owned
//! intent, link rewrites that help other operations, rollbacks that prune. Written by an
//! outside reviewer; failing scenarios document a defect (see
//! /work/notes/review3-findings.md) and are kept as they are.
//!
//! Replay one: `DYNATREE_SIM_REPLAY='<replay>' cargo test -p dynatree-testing --test
//! sim_review3 <test name> -- --nocapture`. Budget: `DYNATREE_SIM_SCHEDULES` (default small
//! here, so that the whole file stays under a minute; use 3000 locally). The `targeted_*` tests
//! carry their schedule in the code.

#![allow(dead_code)]

use std::time::Duration;

use dynatree::{
    Condition, ErrorKind, Item, Key, LinkPolicy, OnChildren, Storage, TransactAction, Tree, Value,
};
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Model, OpOutcome, Sim, SimFault, SimStorage, Stored};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct V {
    v: u32,
}

type P = Vec<String>;
type T = Tree<SimStorage<FakeTable>>;

const SC: char = '¦';

fn p(parts: &[&str]) -> P {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// One operation of a scenario, with its model.
#[derive(Clone, Debug)]
enum Act {
    Put(P, u32),
    PutLink(P, P),
    Delete(P),
    DeleteSubtree(P),
    DeleteNode(P, OnChildren),
    /// `delete_node(Reparent)`, called again once after an error that is not a refusal (the
    /// documented recovery: "call again finishes").
    ReparentTwice(P),
    Move(P, P, LinkPolicy),
    /// A move that may join the same move of another process (documented: "the same call
    /// again (from this process or another) joins the recorded operation and returns its
    /// result"). `Ok` must mean: the move was applied (by this call or the one it joined).
    MoveJoining(P, P),
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

fn short(p: &P) -> String {
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

fn transient(k: ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::Backend
            | ErrorKind::Throttled
            | ErrorKind::Unprocessed
            | ErrorKind::TransactionCanceled
    )
}

fn listing_key(path: &P) -> Key {
    let (last, parent) = path.split_last().expect("a non-empty path");
    let mut h = String::from(SC);
    for c in parent {
        h.push_str(c);
        h.push(SC);
    }
    Key::new(h, last.clone())
}

fn object_key(path: &P) -> Key {
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
async fn go_put(t: &T, path: &P, v: u32) -> dynatree::Result<()> {
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
async fn go_delete(t: &T, path: &P) -> dynatree::Result<()> {
    t.storage()
        .delete_item(&object_key(path), Condition::Always)
        .await?;
    t.storage()
        .delete_item(&listing_key(path), Condition::Always)
        .await
}

impl Act {
    fn name(&self) -> String {
        match self {
            Act::Put(p, v) => format!("put {}={v}", short(p)),
            Act::PutLink(p, t) => format!("put_link {}->{}", short(p), short(t)),
            Act::Delete(p) => format!("delete {}", short(p)),
            Act::DeleteSubtree(p) => format!("delete_subtree {}", short(p)),
            Act::DeleteNode(p, c) => format!("delete_node {} {c:?}", short(p)),
            Act::ReparentTwice(p) => format!("delete_node {} Reparent (x2)", short(p)),
            Act::Move(f, t, l) => format!("move {}->{} {l:?}", short(f), short(t)),
            Act::MoveJoining(f, t) => format!("move {}->{} (may join)", short(f), short(t)),
            Act::DeleteSubtreeJoining(p) => format!("delete_subtree {} (may join)", short(p)),
            Act::Copy(f, t) => format!("copy {}->{}", short(f), short(t)),
            Act::Resume => "resume".into(),
            Act::GoPut(p, v) => format!("Go put {}={v}", short(p)),
            Act::GoDelete(p) => format!("Go delete {}", short(p)),
            Act::GoPutThenPut(p, a, b) => format!("Go put {}={a}, then put ={b}", short(p)),
        }
    }

    fn has_model(&self) -> bool {
        !matches!(
            self,
            Act::GoPut(..) | Act::GoDelete(_) | Act::GoPutThenPut(..)
        )
    }

    async fn run(self, t: T) -> dynatree::Result<String> {
        match self {
            Act::Put(p, v) => t.put(p, &V { v }).await.map(|()| String::new()),
            Act::PutLink(p, to) => t.put_link(p, to).await.map(|()| String::new()),
            Act::Delete(p) => t.delete(p).await.map(|()| String::new()),
            Act::DeleteSubtree(p) | Act::DeleteSubtreeJoining(p) => {
                t.delete_subtree(p).await.map(|n| n.to_string())
            }
            Act::DeleteNode(p, c) => t.delete_node(p, c).await.map(|()| String::new()),
            Act::ReparentTwice(p) => match t.delete_node(p.clone(), OnChildren::Reparent).await {
                Ok(()) => Ok(String::new()),
                Err(e) if !transient(e.kind()) => Err(e),
                Err(first) => match t.delete_node(p, OnChildren::Reparent).await {
                    Ok(()) => Ok("second call".to_owned()),
                    // Documented: the first call may have completed with its response lost;
                    // the same call again then acts on the tree as it is now (here refused).
                    // The outcome stays the first failure's (applied or not), which the
                    // serial check then decides from the state.
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
            },
            Act::Move(f, to, l) => t
                .move_subtree_with(f, to, l)
                .await
                .map(|r| format!("{} objects", r.objects)),
            Act::MoveJoining(f, to) => t
                .move_subtree(f, to)
                .await
                .map(|r| format!("{} objects, id {:?}", r.objects, r.id)),
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

    fn model(&self, m: &mut Model) -> Result<(), ErrorKind> {
        match self {
            Act::Put(p, v) => m.put(p, &V { v: *v }),
            Act::PutLink(p, t) => m.put_link(p, t),
            Act::Delete(p) => m.delete(p),
            Act::DeleteSubtree(p) | Act::DeleteSubtreeJoining(p) => m.delete_subtree(p),
            Act::DeleteNode(p, c) => m.delete_node(p, *c),
            Act::ReparentTwice(p) => m.delete_node(p, OnChildren::Reparent),
            Act::Move(f, t, l) => m.move_subtree(f, t, *l),
            // Only used without the serial model (see `ok_means_applied`).
            Act::MoveJoining(f, t) => m.move_subtree(f, t, LinkPolicy::Report),
            Act::Copy(f, t) => m.copy_subtree(f, t),
            Act::Resume => Ok(()),
            Act::GoPut(..) | Act::GoDelete(_) | Act::GoPutThenPut(..) => Ok(()),
        }
    }
}

fn plain_tree(s: SimStorage<FakeTable>) -> T {
    Tree::new(s)
}

fn pix_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .path_index(1)
        .build()
        .expect("a tree with a path index")
}

fn short_lease_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .removal_lease(Duration::from_millis(200))
        .build()
        .expect("a tree with a short lease")
}

/// A scenario: `setup` objects and links, then `acts` concurrently (each checked against its
/// model when every act has one), on trees built by `tree`.
fn scenario_with(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: Vec<(P, u32)>,
    links: Vec<(P, P)>,
    acts: &[Act],
) -> Sim<FakeTable> {
    let mut sim = Sim::new(name, FakeTable::new)
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
        });
    for a in acts {
        let (run, model) = (a.clone(), a.clone());
        sim = sim.op(a.name(), move |t| run.clone().run(t));
        if a.has_model() {
            sim = sim.model(move |m| model.model(m));
        }
    }
    sim
}

fn scenario(name: &str, setup: &[(&[&str], u32)], acts: &[Act]) -> Sim<FakeTable> {
    let setup = setup.iter().map(|(q, v)| (p(q), *v)).collect();
    scenario_with(name, plain_tree, setup, Vec::new(), acts)
}

fn with_faults(sim: Sim<FakeTable>) -> Sim<FakeTable> {
    sim.faults(1, SimFault::all())
}

fn request_faults() -> [SimFault; 3] {
    [
        SimFault::Request(dynatree_testing::Fault::Fail),
        SimFault::Request(dynatree_testing::Fault::FailAfterApply),
        SimFault::Request(dynatree_testing::Fault::Throttle),
    ]
}

/// Runs exactly `replay` and panics with the failure (trace included) if a check breaks.
fn replay_exact(sim: Sim<FakeTable>, replay: &str) {
    if let Err(f) = sim.replay(replay) {
        panic!("{f}");
    }
}

/// Every object row of a tree with a path index of depth 1 carries the index attributes of
/// its own path (so the index and the walk agree).
fn pix_attrs_match(end: &End<'_>) -> Result<(), String> {
    let sc = SC.to_string();
    for r in end.rows {
        let (Some(h), Some(c)) = (r.get_s("Key"), r.get_s("Child")) else {
            continue;
        };
        if c != sc || h.starts_with(&format!("{sc}{sc}")) {
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
fn paths_with_value(end: &End<'_>, v: u32) -> Vec<P> {
    end.model
        .objects()
        .iter()
        .filter(|(_, s)| match s {
            Stored::Object(item) => item.get("v") == Some(&Value::N(v.to_string())),
            Stored::Link(_) => false,
        })
        .map(|(k, _)| k.clone())
        .collect()
}

// ------------------------------------------------------------------------------------------
// Cost and time: each operation's virtual time and the backend's request count at its end.

thread_local! {
    /// Per operation index: (virtual time it took, backend requests counted when it ended).
    static STATS: std::cell::RefCell<Vec<Option<(Duration, u64)>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn reset_stats() {
    STATS.with(|s| s.borrow_mut().clear());
}

fn record(st: &SimStorage<FakeTable>, took: Duration) {
    let Some(i) = st.op() else { return };
    let n = st.backend().metrics().total_requests();
    STATS.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() <= i {
            s.resize(i + 1, None);
        }
        s[i] = Some((took, n));
    });
}

/// Runs `a` and records its virtual time and the request count.
async fn measured(a: Act, t: T) -> dynatree::Result<String> {
    let started = tokio::time::Instant::now();
    let st = t.storage().clone();
    let r = a.run(t).await;
    record(&st, started.elapsed());
    r
}

/// No operation took longer than `time` (virtual), and the backend saw at most `requests`
/// requests (setup included) by the end of the last operation.
fn bounded(time: Duration, requests: u64) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |_| {
        STATS.with(|s| {
            for (i, st) in s.borrow().iter().enumerate() {
                let Some((took, n)) = st else { continue };
                if *took > time {
                    return Err(format!("op{i} took {took:?} (virtual) > {time:?}"));
                }
                if *n > requests {
                    return Err(format!(
                        "{n} requests by the end of op{i} > cap {requests}: runaway loop"
                    ));
                }
            }
            Ok(())
        })
    }
}

/// Like `scenario_with`, but every op is measured (see `bounded`).
fn measured_scenario(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: Vec<(P, u32)>,
    links: Vec<(P, P)>,
    acts: &[Act],
) -> Sim<FakeTable> {
    measured_scenario_opts(name, tree, setup, links, acts, true)
}

/// `measured_scenario`, with or without the serial models.
fn measured_scenario_opts(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: Vec<(P, u32)>,
    links: Vec<(P, P)>,
    acts: &[Act],
    models: bool,
) -> Sim<FakeTable> {
    let mut sim = Sim::new(name, FakeTable::new)
        .schedules(200)
        .tree(tree)
        .setup(move |t| {
            let setup = setup.clone();
            let links = links.clone();
            async move {
                reset_stats();
                for (p, v) in setup {
                    t.put(p, &V { v }).await?;
                }
                for (p, to) in links {
                    t.put_link(p, to).await?;
                }
                Ok(())
            }
        });
    for a in acts {
        let (run, model) = (a.clone(), a.clone());
        sim = sim.op(a.name(), move |t| measured(run.clone(), t));
        if models && a.has_model() {
            sim = sim.model(move |m| model.model(m));
        }
    }
    sim
}

/// Op `i` returned `Ok` (not `TakenOver` or another error).
fn op_ok(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| match &end.outcomes[i] {
        OpOutcome::Ok(_) => Ok(()),
        o => Err(format!("op{i} did not succeed: {o}")),
    }
}

// ------------------------------------------------------------------------------------------
// 1. Re-parenting and link rewrites that help other operations.

/// A node that is a link into its own subtree (`a/p -> a/p/c/x`), re-parented alone: the child
/// move's rewrite meets the link's listing row, held by the re-parenting itself (its lock on
/// `L(a/p)`), and "helps" the re-parenting, whose owner (this very call, waiting on the child
/// move) is alive: it waits out the whole lease, takes its own caller's operation over, runs
/// it to its end, and the caller then fails with `TakenOver`. Serially: Ok, `a/p` gone, `a/c/x`
/// there. One operation, no faults.
#[test]
fn reparent_of_a_link_into_its_own_subtree() {
    measured_scenario(
        "delete_node a/p Reparent (a/p -> a/p/c/x)",
        plain_tree,
        vec![(p(&["a", "p", "c", "x"]), 1)],
        vec![(p(&["a", "p"]), p(&["a", "p", "c", "x"]))],
        &[Act::DeleteNode(p(&["a", "p"]), OnChildren::Reparent)],
    )
    .schedules(1)
    .check(op_ok(0))
    .check(bounded(Duration::from_secs(5), 300))
    .run();
}

/// Op `i` did not fail with `TakenOver` (nobody else ran its operation).
fn not_taken_over(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| match end.outcomes[i].err_kind() {
        Some(ErrorKind::TakenOver) => {
            Err(format!("op{i} failed with TakenOver: {}", end.outcomes[i]))
        }
        _ => Ok(()),
    }
}

/// Two re-parentings whose nodes are links into each other's child subtrees: each child
/// move's rewrite meets the other re-parenting's lock and helps it, while that one waits for
/// its own child move: a wait in a circle, broken only when a lease runs out.
#[test]
fn two_reparents_of_links_into_each_other() {
    measured_scenario(
        "delete_node p1 Reparent vs delete_node p2 Reparent (p1 -> p2/c2/x, p2 -> p1/c1/x)",
        plain_tree,
        vec![(p(&["p1", "c1", "x"]), 1), (p(&["p2", "c2", "x"]), 2)],
        vec![
            (p(&["p1"]), p(&["p2", "c2", "x"])),
            (p(&["p2"]), p(&["p1", "c1", "x"])),
        ],
        &[
            Act::DeleteNode(p(&["p1"]), OnChildren::Reparent),
            Act::DeleteNode(p(&["p2"]), OnChildren::Reparent),
        ],
    )
    .schedules(60)
    .check(not_taken_over(0))
    .check(not_taken_over(1))
    .check(bounded(Duration::from_secs(20), 1500))
    .run();
}

/// A user moves a child of a node while the node is re-parented, to the very place the
/// re-parenting moves it: the re-parenting's child move is "the same call" and joins the
/// user's intent; when the user's call finishes it, the join reports `TakenOver`, and the
/// re-parenting fails with it (nobody took the re-parenting over) and stays recorded.
#[test]
fn reparent_vs_the_same_child_move_by_a_user() {
    measured_scenario(
        "delete_node a/p Reparent vs move a/p/c->a/c",
        plain_tree,
        vec![(p(&["a", "p", "c", "x"]), 1), (p(&["a", "p", "d"]), 2)],
        vec![],
        &[
            Act::DeleteNode(p(&["a", "p"]), OnChildren::Reparent),
            Act::Move(p(&["a", "p", "c"]), p(&["a", "c"]), LinkPolicy::Report),
        ],
    )
    .schedules(300)
    .run();
}

/// The same without the serial model: the re-parenting must not fail with `TakenOver`.
#[test]
fn reparent_vs_the_same_child_move_by_a_user_joined() {
    measured_scenario_opts(
        "delete_node a/p Reparent vs move a/p/c->a/c (no model)",
        plain_tree,
        vec![(p(&["a", "p", "c", "x"]), 1), (p(&["a", "p", "d"]), 2)],
        vec![],
        &[
            Act::DeleteNode(p(&["a", "p"]), OnChildren::Reparent),
            Act::Move(p(&["a", "p", "c"]), p(&["a", "c"]), LinkPolicy::Report),
        ],
        false,
    )
    .schedules(300)
    // (op1, the user's move, may join the re-parenting's child move and then fail with
    // TakenOver: documented for "the same call again", see review3-findings R3.)
    .check(not_taken_over(0))
    .check(bounded(Duration::from_secs(20), 1500))
    .run();
}

/// A re-parenting whose process dies (any request), then three `resume()`s from three
/// processes at once: each waits for or takes over the re-parenting and its pending child
/// move. None may fail with `TakenOver` (no lease runs out here: no time passes but backoffs).
#[test]
fn crashed_reparent_then_three_resumes() {
    measured_scenario(
        "delete_node a/p Reparent (crashes) vs resume x3",
        plain_tree,
        vec![
            (p(&["a", "p", "c", "x"]), 1),
            (p(&["a", "p", "d"]), 2),
            (p(&["a", "p"]), 3),
        ],
        vec![],
        &[
            Act::DeleteNode(p(&["a", "p"]), OnChildren::Reparent),
            Act::Resume,
            Act::Resume,
            Act::Resume,
        ],
    )
    .schedules(400)
    .faults(1, [SimFault::Crash, SimFault::CrashAfterApply])
    .check(not_taken_over(1))
    .check(not_taken_over(2))
    .check(not_taken_over(3))
    .check(bounded(Duration::from_secs(3700), 3000))
    .run();
}

/// A Rewrite move whose link is a node being re-parented (`a/p -> s/1`, `a/p` has a child):
/// the rewrite waits for the re-parenting (which deletes the link with the node) and looks
/// again. Faults anywhere, then recovery.
#[test]
fn rewrite_vs_reparent_of_the_links_node() {
    with_faults(measured_scenario(
        "move s->d Rewrite vs delete_node a/p Reparent (a/p -> s/1)",
        plain_tree,
        vec![(p(&["s", "1"]), 1), (p(&["a", "p", "c"]), 2)],
        vec![(p(&["a", "p"]), p(&["s", "1"]))],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::DeleteNode(p(&["a", "p"]), OnChildren::Reparent),
        ],
    ))
    .schedules(300)
    .check(bounded(Duration::from_secs(3700), 3000))
    .run();
}

/// Re-parenting of a top-level node (its children move to the root) with a path index, while
/// a copy of one child runs and links point into both children.
#[test]
fn pix_top_level_reparent_vs_copy_with_links() {
    measured_scenario(
        "pix: delete_node p Reparent vs copy p/a->z (l1 -> p/a/x, p/b/l2 -> p/a)",
        pix_tree,
        vec![
            (p(&["p", "a", "x"]), 1),
            (p(&["p", "b"]), 2),
            (p(&["p"]), 3),
        ],
        vec![
            (p(&["l1"]), p(&["p", "a", "x"])),
            (p(&["p", "b", "l2"]), p(&["p", "a"])),
        ],
        &[
            Act::DeleteNode(p(&["p"]), OnChildren::Reparent),
            Act::Copy(p(&["p", "a"]), p(&["z"])),
        ],
    )
    .schedules(300)
    .check(pix_attrs_match)
    .check(bounded(Duration::from_secs(20), 2000))
    .run();
}

// ------------------------------------------------------------------------------------------
// 2. Leases of re-parentings and of operations helped by link rewrites.

/// A re-parenting whose child move waits out a live removal mark (a delete under the child
/// died after marking) while a `resume()` elsewhere waits on the re-parenting: the
/// re-parenting's own lease is not renewed while its child moves, so the resume takes over a
/// live re-parenting. Short lease (200 ms).
#[test]
fn short_lease_reparent_child_waits_vs_resume() {
    measured_scenario_opts(
        "short lease: delete_node a/p Reparent vs delete a/p/c/x (may die) vs resume",
        short_lease_tree,
        vec![(p(&["a", "p", "c", "x"]), 1), (p(&["a", "p", "c", "y"]), 2)],
        vec![],
        &[
            Act::DeleteNode(p(&["a", "p"]), OnChildren::Reparent),
            Act::Delete(p(&["a", "p", "c", "x"])),
            Act::Resume,
        ],
        false,
    )
    .schedules(600)
    .faults(1, [SimFault::CrashAfterApply])
    .check(not_taken_over(0))
    .check(not_taken_over(2))
    .run();
}

/// A Rewrite move helps a copy that holds the link's node; short lease and time may pass,
/// request faults: the helped copy's caller may be taken over, but the end state must be a
/// serial one (the serial check) and nothing may spin.
#[test]
fn short_lease_rewrite_helps_copy_with_faults() {
    with_faults(measured_scenario(
        "short lease: move s->d Rewrite vs copy x->y (x/l -> s/1) vs resume",
        short_lease_tree,
        vec![(p(&["s", "1"]), 1), (p(&["x", "o"]), 2)],
        vec![(p(&["x", "l"]), p(&["s", "1"]))],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::Copy(p(&["x"]), p(&["y"])),
            Act::Resume,
        ],
    ))
    .allow_wait(true)
    .schedules(400)
    .check(bounded(Duration::from_secs(3700), 3000))
    .run();
}
