//! Schedules and faults aimed at the multi-request protocols where they help each other:
//! re-parenting as an owned intent, link rewrites that help other operations, rollbacks that
//! prune, and the leases of all of them (with each operation's virtual time and request count
//! bounded).
//!
//! Replay one: `DYNATREE_SIM_REPLAY='<replay>' cargo test -p dynatree-testing --test sim
//! protocols::helping_rewrites::<test name> -- --exact --nocapture`. Budget:
//! `DYNATREE_SIM_SCHEDULES` (default small here, so that the whole module stays under a
//! minute; use 3000 locally). The `targeted_*` tests
//! carry their schedule in the code.

#![allow(dead_code)]

use crate::acts::*;

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
    let st = t
        .storage()
        .downcast_ref::<SimStorage<FakeTable>>()
        .expect("a simulated backend")
        .clone();
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
    // The setup steps run alone, before any operation records its stats.
    let sim = scenario_base(name, tree, setup, links).setup(|_| async {
        reset_stats();
        Ok(())
    });
    with_acts(sim, acts, models, measured)
}

/// Op `i` returned `Ok` (not `TakenOver` or another error).
fn op_ok(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| {
        if end.ok(i) {
            Ok(())
        } else {
            Err(format!("op{i} did not succeed: {}", end.outcomes[i]))
        }
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
    // TakenOver: documented for "the same call again".)
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
    .faults(1, crashes())
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
