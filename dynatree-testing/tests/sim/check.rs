//! `Tree::check` under the interleaving simulator:
//! a HEALTHY table checked (`check()` as one operation, small Scan pages, several segments)
//! while the application runs each protocol of the runtime. The claim under test
//! (`dynatree::consistency`, "Check and repair"): a check of a table that applications write to
//! reports only what held at one instant, never the transient states of running protocols. So
//! every violation such a check reports is a false positive (unless argued otherwise below).
//! Then faults (a check whose requests fail, a repair that crashes part-way), and repairs racing
//! writers beyond the scenarios of `repair` (stale copies, abandoned intents, secondary
//! index attributes).
//!
//! After every schedule (and the simulator's recovery `resume()`), besides the simulator's own
//! checks, each scenario checks that `check()` of the final table is healthy, apart from the
//! classes left to humans.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 300 here).
//!
//! Found by these scenarios (failing until fixed in the library; each is a report of a healthy
//! table that some writer was in the middle of changing):
//! - `check_vs_put_all_and_transaction`: `put_all` and transactions write the listing rows of
//!   new top-level names alone first (`TransactWriteItems Put ¦|z`), then the objects with the
//!   rest. A check confirming in between reports `empty-listing /z`: the snapshot sees `L(z)`
//!   free and no `O(z)`, the children Query finds none. The claim names exactly this ("a put's
//!   new rows") as never reported. A copy (and a move) does the same for the rows above its
//!   destination: `check_vs_copy_subtree` at budget 1500 reports `empty-listing /c` between
//!   `TransactWriteItems Put ¦|c` and the destination's rows, under a live intent.
//! - `check_vs_deletes_that_prune` (and the `empty-listing /R/f/T` of
//!   `check_vs_move_of_a_target`, a move's `prune_above`): a delete removes `L(a/b/x)`, then
//!   marks `L(a/b)` to prune it. Between the two, `L(a/b)` is unmarked and names nothing; the
//!   check reports `empty-listing /a/b`, which the delete removes a moment later. A real state at
//!   one instant, but a transient state of a running removal (it is the mark that tells the
//!   check, and the mark is not there yet).
//! - `check_vs_move_of_a_target`, `check_vs_copy_of_a_target`: a move or copy of a target
//!   (thread `f/t`) under another source (forum `g`) writes the destination rows with the copies
//!   they had (`forum_name` "F1"), and refills them from the new ancestors only after the unlock
//!   phase (`refill_subtree`). A check in between reports `stale-copy /R/g/T/t`, under a live
//!   `move`/`copy` intent: only `propagate` intents excuse stale copies.

use crate::denorm_chain;

use std::rc::Rc;

use crate::acts::*;
use dynatree::check::Class;
use dynatree_testing::{Fault, FaultRule, Faulty};

use crate::denorm_chain::{RPost, RThread, thread_path};

const BUDGET: usize = 300;

// ---------------------------------------------------------------------------------------------
// Helpers.

/// The check as an operation of its own process: `segments` segments, pages of `page` items.
/// Returns the violations it reported (their `Display`), as `Ok`. Its model changes nothing.
fn check_op(sim: Sim<FakeTable>, segments: u32, page: u32) -> Sim<FakeTable> {
    sim.op(
        format!("check (segments {segments}, pages of {page})"),
        move |t| async move {
            let report = t.check().segments(segments).page_size(page).run().await?;
            Ok::<_, dynatree::Error>(
                report
                    .violations()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
            )
        },
    )
    .model(|_| Ok(()))
}

/// The concurrent check (operation `i`) reported nothing.
fn no_false_positive(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| match &end.outcomes[i] {
        OpOutcome::Ok(v) if v == "[]" => Ok(()),
        other => Err(format!(
            "the check of a healthy table, run during the application's writes, reported: {other}\noutcomes: {:?}",
            end.outcomes
        )),
    }
}

/// With faults: the concurrent check (operation `i`) either failed (an error, or its process
/// died) or reported nothing; never a wrong report.
///
/// A write that failed part-way may leave a listing row naming nothing (as `healthy_on`
/// allows): a report of such rows only is right then (with fenced puts, a new name's listing row
/// is written before its object, and a crash in between leaves it).
fn no_wrong_report(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| match &end.outcomes[i] {
        OpOutcome::Ok(v) if v != "[]" && !left_by_a_failed_write(end, i, v) => Err(format!(
            "a check with a failing request reported: {v}\noutcomes: {:?}",
            end.outcomes
        )),
        OpOutcome::Panicked(m) => Err(format!("the check panicked: {m}")),
        _ => Ok(()),
    }
}

/// Whether the report `v` of the check (op `i`) names only empty listing rows, and another op
/// failed (a failed write may leave one; `final_violations` allows the same).
fn left_by_a_failed_write(end: &End<'_>, i: usize, v: &str) -> bool {
    let failed = end
        .outcomes
        .iter()
        .enumerate()
        .any(|(j, o)| j != i && !o.is_ok());
    let entries: Vec<String> = serde_json::from_str(v).unwrap_or_default();
    failed && !entries.is_empty() && entries.iter().all(|e| e.starts_with("empty-listing "))
}

/// A healthy table of `setup` objects (and `links`), a check (op0) and the app's `acts`
/// (op1...), each with its model.
fn checked(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: &[(&[&str], u32)],
    links: &[(&[&str], &[&str])],
    acts: &[Act],
    segments: u32,
    page: u32,
) -> Sim<FakeTable> {
    let links: Vec<(P, P)> = links.iter().map(|(a, b)| (p(a), p(b))).collect();
    let mut sim = check_op(
        scenario_base(name, tree, paths(setup), links).schedules(BUDGET),
        segments,
        page,
    );
    for a in acts {
        sim = act(sim, a.clone());
    }
    sim.check(no_false_positive(0))
}

fn healthy_on(build: fn(FakeTable) -> T) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| {
        // A failed (faulted) delete may leave a listing row naming nothing, harmlessly.
        let failed = end.outcomes.iter().any(|o| !o.is_ok());
        let found = final_violations(end.rows, build, failed)?;
        if found.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "check() of the final table is not healthy: {found:?}"
            ))
        }
    }
}

fn plain(t: FakeTable) -> T {
    Tree::new(t)
}

fn healthy() -> impl Fn(&End<'_>) -> Result<(), String> {
    healthy_on(plain)
}

// ---------------------------------------------------------------------------------------------
// 1. A healthy table, checked while each protocol runs.

/// New names at depth and a new top-level name, while the check scans.
#[test]
fn check_vs_puts_at_depth() {
    checked(
        "check vs put a/b/y, put n/m, put a/c/d/e",
        plain_tree,
        &[(&["a", "b", "x"], 1)],
        &[],
        &[
            Act::Put(p(&["a", "b", "y"]), 2),
            Act::Put(p(&["n", "m"]), 3),
            Act::Put(p(&["a", "c", "d", "e"]), 4),
        ],
        3,
        1,
    )
    .check(healthy())
    .run();
}

/// Deletes that prune their parents.
#[test]
fn check_vs_deletes_that_prune() {
    checked(
        "check vs delete a/b/x, delete a/c",
        plain_tree,
        &[(&["a", "b", "x"], 1), (&["a", "c"], 2), (&["k"], 3)],
        &[],
        &[
            Act::Delete(p(&["a", "b", "x"])),
            Act::Delete(p(&["a", "c"])),
        ],
        2,
        1,
    )
    .check(healthy())
    .run();
}

/// A delete of an object whose node has children (the mark is taken off again), and
/// `delete_node(Refuse)`.
#[test]
fn check_vs_delete_node_refuse() {
    checked(
        "check vs delete_node a/b Refuse, delete_node a Refuse, delete a",
        plain_tree,
        &[(&["a"], 1), (&["a", "b"], 2), (&["a", "c", "d"], 3)],
        &[],
        &[
            Act::DeleteNode(p(&["a", "b"]), OnChildren::Refuse),
            Act::DeleteNode(p(&["a", "c"]), OnChildren::Refuse),
            Act::Delete(p(&["a"])),
        ],
        3,
        1,
    )
    .check(healthy())
    .run();
}

/// A put of new children racing the delete of their parent's only child.
#[test]
fn check_vs_put_and_delete_of_siblings() {
    checked(
        "check vs put a/c, delete a/d, put a, delete a/c",
        plain_tree,
        &[(&["a", "d"], 1)],
        &[],
        &[
            Act::Put(p(&["a", "c"]), 2),
            Act::Delete(p(&["a", "d"])),
            Act::Put(p(&["a"]), 3),
        ],
        2,
        1,
    )
    .check(healthy())
    .run();
}

/// `put_all` batches (of a two-level type) and a transaction, while the check scans.
#[test]
fn check_vs_put_all_and_transaction() {
    scenario_base(
        "check vs put_all {x/a, x/b, y/c}, transaction {put z/d, put w/e}",
        plain_tree,
        paths(&[(&["w", "k"], 1)]),
        Vec::new(),
    )
    .schedules(BUDGET)
    .op("check", |t| async move {
        let r = t.check().segments(3).page_size(1).run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .op("put_all", |t| async move {
        t.repo::<Doc>()
            .put_all(&[doc("x", "a", 1), doc("x", "b", 2), doc("y", "c", 3)])
            .await
    })
    .op("transaction", |t| async move {
        let mut tx = t.transaction();
        tx.put(&doc("z", "d", 4)).put(&doc("w", "e", 5));
        tx.commit().await
    })
    .check(no_false_positive(0))
    .check(healthy())
    .run();
}

/// A move of a subtree (locks, copies, deletion of the source, unlock).
#[test]
fn check_vs_move_subtree() {
    checked(
        "check vs move a->z/y",
        plain_tree,
        &[(&["a", "b", "c"], 1), (&["a", "d"], 2), (&["z", "k"], 3)],
        &[],
        &[Act::Move(p(&["a"]), p(&["z", "y"]), LinkPolicy::Report)],
        3,
        1,
    )
    .check(healthy())
    .run();
}

/// A move and a put under its source (refused or moved along).
#[test]
fn check_vs_move_and_put_under_it() {
    checked(
        "check vs move a->z, put a/b/n",
        plain_tree,
        &[(&["a", "b", "c"], 1), (&["a", "d"], 2)],
        &[],
        &[
            Act::Move(p(&["a"]), p(&["z"]), LinkPolicy::Report),
            Act::Put(p(&["a", "b", "n"]), 3),
        ],
        2,
        1,
    )
    .check(healthy())
    .run();
}

/// A copy of a subtree.
#[test]
fn check_vs_copy_subtree() {
    checked(
        "check vs copy a->c/x",
        plain_tree,
        &[(&["a", "b", "c"], 1), (&["a", "d"], 2)],
        &[],
        &[Act::Copy(p(&["a"]), p(&["c", "x"]))],
        3,
        1,
    )
    .check(healthy())
    .run();
}

/// A deletion of a subtree.
#[test]
fn check_vs_delete_subtree() {
    checked(
        "check vs delete_subtree a, put k/n",
        plain_tree,
        &[(&["a", "b", "c"], 1), (&["a", "d"], 2), (&["k"], 3)],
        &[],
        &[Act::DeleteSubtree(p(&["a"])), Act::Put(p(&["k", "n"]), 4)],
        3,
        1,
    )
    .check(healthy())
    .run();
}

/// A re-parenting delete.
#[test]
fn check_vs_delete_node_reparent() {
    checked(
        "check vs delete_node a/b Reparent",
        plain_tree,
        &[
            (&["a", "b"], 1),
            (&["a", "b", "c"], 2),
            (&["a", "b", "d", "e"], 3),
            (&["a", "x"], 4),
        ],
        &[],
        &[Act::DeleteNode(p(&["a", "b"]), OnChildren::Reparent)],
        3,
        1,
    )
    .check(healthy())
    .run();
}

/// Links written (after their target) and deleted (before their target), in one process
/// each, so that no link dangles at any instant.
#[test]
fn check_vs_links_written_and_deleted() {
    scenario_base(
        "check vs {put t2, put_link l2->t2}, {delete l1, delete t1}",
        plain_tree,
        paths(&[(&["t1"], 1)]),
        vec![(p(&["l1"]), p(&["t1"]))],
    )
    .schedules(BUDGET)
    .op("check", |t| async move {
        let r = t.check().segments(2).page_size(1).run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .model(|_| Ok(()))
    .op("put t2, then link l2->t2", |t| async move {
        t.put(["t2"], &V { v: 2 }).await?;
        t.put_link(["l2"], ["t2"]).await
    })
    .model(|m| {
        m.put(["t2"], &V { v: 2 })?;
        m.put_link(["l2"], ["t2"])
    })
    .op("delete l1, then t1", |t| async move {
        t.delete(["l1"]).await?;
        t.delete(["t1"]).await
    })
    .model(|m| {
        m.delete(["l1"])?;
        m.delete(["t1"])
    })
    .check(no_false_positive(0))
    .check(healthy())
    .run();
}

/// One process writes a target, links to it, then deletes the link and the target: no link
/// dangles at any instant.
#[test]
fn check_vs_link_lifecycle_in_one_process() {
    scenario_base(
        "check vs put t, put_link l->t, delete l, delete t",
        plain_tree,
        paths(&[(&["k"], 1)]),
        Vec::new(),
    )
    .schedules(BUDGET)
    .op("check", |t| async move {
        let r = t.check().segments(2).page_size(1).run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .model(|_| Ok(()))
    .op("put t, link l->t, delete l, delete t", |t| async move {
        t.put(["t"], &V { v: 2 }).await?;
        t.put_link(["l"], ["t"]).await?;
        t.delete(["l"]).await?;
        t.delete(["t"]).await
    })
    .model(|_| Ok(()))
    .check(no_false_positive(0))
    .check(healthy())
    .run();
}

/// A value that expires in a day (not expired while checked), put and re-put.
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{name}")]
struct Exp {
    dir: String,
    name: String,
    v: u32,
    #[dynatree(ttl)]
    until: Option<u64>,
}

fn exp(dir: &str, name: &str, v: u32, until: Option<u64>) -> Exp {
    Exp {
        dir: dir.into(),
        name: name.into(),
        v,
        until,
    }
}

fn tomorrow() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 86_400
}

#[test]
fn check_vs_expiring_values() {
    Sim::new(
        "check vs put x/a (expiring), put x/b (expiring), delete x/c",
        FakeTable::new,
    )
    .schedules(BUDGET)
    .setup(|t| async move {
        t.repo::<Exp>()
            .put(&exp("x", "c", 1, Some(tomorrow())))
            .await
    })
    .op("check", |t| async move {
        let r = t.check().segments(2).page_size(1).run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .op("put x/a", |t| async move {
        t.repo::<Exp>()
            .put(&exp("x", "a", 2, Some(tomorrow())))
            .await
    })
    .op("put x/b, delete x/c", |t| async move {
        t.repo::<Exp>()
            .put(&exp("x", "b", 3, Some(tomorrow())))
            .await?;
        t.delete(["x", "c"]).await
    })
    .check(no_false_positive(0))
    .check(healthy())
    .run();
}

// ---------------------------------------------------------------------------------------------
// Denormalized copies (the chain forum -> thread -> post, inline propagation).

fn denorm(t: FakeTable) -> T {
    Tree::builder(t)
        .denormalized::<RThread>()
        .denormalized::<RPost>()
        .build()
        .expect("tree")
}

/// The chain's setup (forums `f` "F1" and `g` "G1", thread `f/t`, posts `p1`, `p2`), a
/// check (op0), then the given operations.
fn denorm_checked(name: &str, segments: u32, page: u32) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .tree(denorm_chain::inline_tree)
        .schedules(BUDGET)
        .setup(denorm_chain::setup)
        .op("check", move |t| async move {
            let r = t.check().segments(segments).page_size(page).run().await?;
            Ok::<_, dynatree::Error>(classes(&r))
        })
        .check(no_false_positive(0))
        .check(healthy_on(denorm))
        .check(denorm_chain::check)
}

/// A rename of the forum (a put of the source), propagated inline to the thread and posts.
#[test]
fn check_vs_rename_of_a_source() {
    denorm_checked("check vs rename forum f (put)", 3, 1)
        .op("put forum f=F2", denorm_chain::put_forum("f", "F2"))
        .run();
}

/// A patch of the forum's name and of the thread's title.
#[test]
fn check_vs_patches_of_sources() {
    denorm_checked("check vs patch forum f, patch title", 3, 2)
        .op("patch forum f=F3", denorm_chain::patch_forum("f", "F3"))
        .op("patch title T2", denorm_chain::patch_title("f", "T2"))
        .run();
}

/// New targets (a post, a thread) and a transaction writing a source and a target.
#[test]
fn check_vs_new_targets_and_transaction() {
    denorm_checked(
        "check vs put post p3, put thread g/t, tx {forum f, thread f/n}",
        3,
        1,
    )
    .op("put post p3", denorm_chain::put_post("f", "t", "p3"))
    .op("put thread g/t", denorm_chain::put_thread("g", "t", "TG"))
    .op(
        "tx forum f + thread f/n",
        denorm_chain::tx_put_forum_and_new_thread,
    )
    .run();
}

/// A move of a target (the thread, with its posts) under another source (forum `g`).
#[test]
fn check_vs_move_of_a_target() {
    denorm_checked("check vs move f/t -> g/t", 2, 1)
        .op("move thread f/t -> g/t", denorm_chain::move_thread)
        .run();
}

/// A copy of a target under another source.
#[test]
fn check_vs_copy_of_a_target() {
    denorm_checked("check vs copy f/t -> g/t", 2, 1)
        .op("copy thread f/t -> g/t", |t| async move {
            t.copy_subtree(thread_path("f"), thread_path("g")).await
        })
        .run();
}

/// A delete of the source (its copies cleared) and of a target.
#[test]
fn check_vs_delete_of_a_source() {
    denorm_checked("check vs delete forum f, delete post p2", 2, 1)
        .op("delete forum f", denorm_chain::delete_forum("f"))
        .op("delete post p2", |t| async move {
            t.delete(["R", "f", "T", "t", "P", "p2"]).await
        })
        .run();
}

// ---------------------------------------------------------------------------------------------
// A listing row that is never empty at any instant, judged on two reads at two instants.

/// `a` lists `d` (setup). One process puts `a/c`, then deletes `a/d`; another puts the object
/// `a`, then deletes `a/c`. At every instant `a` names something (`d` until `c` exists, `c`
/// until the object `a` exists), so no check may call it empty: the confirmation's snapshot
/// (no object `a`, while `c` exists) and its later children Query (no child, while the object
/// exists) must not be combined into "empty".
#[test]
fn check_vs_a_listing_never_empty() {
    Sim::new(
        "check vs {put a/c, delete a/d}, {put a, delete a/c}",
        FakeTable::new,
    )
    .schedules(BUDGET)
    .setup(|t| async move { t.put(["a", "d"], &V { v: 1 }).await })
    .op("check", |t| async move {
        let r = t.check().segments(2).page_size(1).run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .op("put a/c, delete a/d", |t| async move {
        t.put(["a", "c"], &V { v: 2 }).await?;
        t.delete(["a", "d"]).await
    })
    .op("put a, delete a/c", |t| async move {
        t.put(["a"], &V { v: 3 }).await?;
        t.delete(["a", "c"]).await
    })
    .check(no_false_positive(0))
    .check(healthy())
    .run();
}

// ---------------------------------------------------------------------------------------------
// Links a running move will rewrite.

/// The concurrent check (op0) reported exactly `want` (`class path`, in the report's order).
fn reported_exactly(want: &'static [&'static str]) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| {
        let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
        match &end.outcomes[0] {
            OpOutcome::Ok(v) if *v == format!("{want:?}") => Ok(()),
            other => Err(format!(
                "the check reported {other}, where only {want:?} are wrong at any instant\noutcomes: {:?}",
                end.outcomes
            )),
        }
    }
}

/// A check placed anywhere in a move with `LinkPolicy::Rewrite` (one preemption: the check
/// runs whole between any two requests of the move, or the move between two of the check's).
/// From the move's delete phase until its rewrite, the links into the source lead nowhere
/// under a live intent: the check excuses them (it follows them at the destination), and
/// still reports the links that lead nowhere whatever the move does: `l2` into the source,
/// where nothing is (rewritten to the destination, where nothing is either), and `l4`
/// elsewhere. `l1` is followed through `l3`, and `a/l` (inside the moved subtree, moved along
/// and rewritten) points into it.
#[test]
fn check_during_a_rewriting_move_reports_only_links_that_dangle_for_good() {
    check_during_a_rewriting_move(sequential_tree, true);
}

/// The same with the move's reads in flight together (16 by default): random schedules,
/// as the bounded search cannot place the check among all their orders.
#[test]
fn check_during_a_rewriting_move_in_parallel_reports_only_links_that_dangle_for_good() {
    check_during_a_rewriting_move(plain_tree, false);
}

fn check_during_a_rewriting_move(tree: fn(SimStorage<FakeTable>) -> T, exhaustive: bool) {
    let report = scenario_base(
        "check vs move a->z Rewrite, links into the source",
        tree,
        paths(&[(&["a", "b", "c"], 1), (&["a", "d"], 2), (&["q"], 3)]),
        vec![
            (p(&["l1"]), p(&["a", "b", "c"])),
            (p(&["l2"]), p(&["a", "zz"])),
            (p(&["l3"]), p(&["l1"])),
            (p(&["l4"]), p(&["nowhere", "x"])),
            (p(&["a", "l"]), p(&["a", "d"])),
        ],
    )
    .schedules(400)
    .preemptions(Some(1))
    .op("check", |t| async move {
        let r = t.check().run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .model(|_| Ok(()));
    let report = act(report, Act::Move(p(&["a"]), p(&["z"]), LinkPolicy::Rewrite))
        .check(reported_exactly(&[
            "dangling-link /l2",
            "dangling-link /l4",
        ]))
        .check(healthy())
        .run();
    if exhaustive && std::env::var_os("DYNATREE_SIM_SCHEDULES").is_none() {
        assert!(report.exhaustive, "every placement of the check: {report}");
    }
}

/// The same for `delete_node(Reparent)`: each child moves up with `LinkPolicy::Rewrite`, so
/// the links into the children's subtrees lead nowhere from each child's delete phase until
/// its rewrite. `l3` (into the node, where nothing is) dangles for good.
#[test]
fn check_during_a_reparenting_reports_only_links_that_dangle_for_good() {
    check_during_a_reparenting(sequential_tree, true);
}

/// The same with the child moves' reads in flight together: random schedules.
#[test]
fn check_during_a_reparenting_in_parallel_reports_only_links_that_dangle_for_good() {
    check_during_a_reparenting(plain_tree, false);
}

fn check_during_a_reparenting(tree: fn(SimStorage<FakeTable>) -> T, exhaustive: bool) {
    let report = scenario_base(
        "check vs delete_node a/b Reparent, links into its children",
        tree,
        paths(&[
            (&["a", "b"], 1),
            (&["a", "b", "c"], 2),
            (&["a", "b", "d", "e"], 3),
        ]),
        vec![
            (p(&["l1"]), p(&["a", "b", "c"])),
            (p(&["l2"]), p(&["a", "b", "d", "e"])),
            (p(&["l3"]), p(&["a", "b", "zz"])),
        ],
    )
    .schedules(400)
    .preemptions(Some(1))
    .op("check", |t| async move {
        let r = t.check().run().await?;
        Ok::<_, dynatree::Error>(classes(&r))
    })
    .model(|_| Ok(()));
    let report = act(
        report,
        Act::DeleteNode(p(&["a", "b"]), OnChildren::Reparent),
    )
    .check(reported_exactly(&["dangling-link /l3"]))
    .check(healthy())
    .run();
    if exhaustive && std::env::var_os("DYNATREE_SIM_SCHEDULES").is_none() {
        assert!(report.exhaustive, "every placement of the check: {report}");
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Faults.

/// A check whose requests fail (before or after apply, throttled, or its process dies) while
/// the app writes: an error, or a report with nothing in it, never a wrong report.
#[test]
fn check_with_failing_requests() {
    let sim = check_op(
        scenario_base(
            "check (one fault anywhere) vs put a/b/y, put n",
            plain_tree,
            paths(&[(&["a", "b", "x"], 1), (&["a", "c"], 2)]),
            Vec::new(),
        )
        .schedules(BUDGET),
        2,
        1,
    );
    let sim = act(sim, Act::Put(p(&["a", "b", "y"]), 3));
    act(sim, Act::Put(p(&["n"]), 4))
        .faults(1, SimFault::all())
        .allow_wait(true)
        .check(no_wrong_report(0))
        .check(healthy())
        .run();
}

/// A check of a corrupted table whose `n`-th request fails (for every `n` it sends, each
/// fault kind, 1 to 4 segments): an error, or the full report, never a partial one.
#[test]
fn check_of_a_corrupted_table_with_failing_requests() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let table = FakeTable::new();
        let tree = Tree::new(table.clone());
        tree.create_table().await.expect("table");
        tree.put(["a", "x"], &V { v: 1 }).await.expect("put");
        tree.put(["b", "c"], &V { v: 2 }).await.expect("put");
        tree.put_link(["l"], ["b", "c"]).await.expect("link");
        table
            .delete_item(&listing_key(&p(&["a", "x"])), Condition::Always)
            .await
            .expect("raw delete");
        table
            .put_item(listing_key(&p(&["e"])).into_item(), Condition::Always)
            .await
            .expect("raw put");
        let full = classes(
            &tree
                .check()
                .grace(Duration::ZERO)
                .run()
                .await
                .expect("check"),
        );
        assert_eq!(
            full,
            ["unreachable /a/x", "empty-listing /a", "empty-listing /e"]
        );
        let mut runs = 0;
        for segments in 1..=4 {
            for fault in [Fault::Fail, Fault::FailAfterApply, Fault::Throttle] {
                for n in 0..40 {
                    table.inject_rule(FaultRule::new(fault.clone()).nth(n));
                    let got = tree
                        .check()
                        .segments(segments)
                        .page_size(1)
                        .grace(Duration::ZERO)
                        .run()
                        .await;
                    let fired = !table.fired().is_empty();
                    table.plan().clear_fired();
                    table.clear_faults();
                    runs += 1;
                    match got {
                        Ok(r) => assert_eq!(
                            classes(&r),
                            full,
                            "segments {segments}, {fault:?} at request {n}"
                        ),
                        Err(e) => {
                            assert!(fired, "segments {segments}: an error without a fault: {e}")
                        }
                    }
                    if !fired {
                        break;
                    }
                }
            }
        }
        assert!(runs > 30);
    });
}

/// After the schedule (and recovery): a check of the final rows, a repair of its report, and
/// a check again, which must be healthy apart from the classes left to humans.
fn repair_again_heals(build: fn(FakeTable) -> T) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| {
        let rows = end.rows.to_vec();
        let found = std::thread::spawn(move || {
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
                let repaired = tree.repair(&report).run().await?;
                let again = tree.check().grace(Duration::ZERO).run().await?;
                Ok::<_, dynatree::Error>((
                    repaired.to_string(),
                    again
                        .violations()
                        .iter()
                        .filter(|v| v.class().repairable())
                        .map(ToString::to_string)
                        .collect::<Vec<_>>(),
                ))
            })
        })
        .join()
        .map_err(|_| "the second repair panicked".to_owned())?
        .map_err(|e| format!("the second repair failed: {e}"))?;
        if found.1.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "after a crashed repair, a repair from a fresh report left {:?} ({})",
                found.1, found.0
            ))
        }
    }
}

/// Every class a repair writes for, repaired by one operator whose process crashes (or whose
/// request fails) part-way; then another repair, from a fresh report, finishes.
#[test]
fn repair_crashing_part_way_then_again() {
    let slot = Slot::default();
    let s = Rc::clone(&slot);
    Sim::new(
        "repair (crashes part-way), then repair again",
        FakeTable::new,
    )
    .schedules(BUDGET)
    .setup(move |t| {
        let s = Rc::clone(&s);
        async move {
            for (path, v) in [
                (p(&["u", "x"]), 1),
                (p(&["k", "s"]), 2),
                (p(&["b", "c", "d"]), 4),
                (p(&["l", "m"]), 5),
            ] {
                t.put(path, &V { v }).await?;
            }
            write_raw(
                &t,
                &[
                    Raw::Remove(listing_key(&p(&["u", "x"]))),
                    Raw::Listing(p(&["k", "e"])),
                    Raw::Remove(listing_key(&p(&["b"]))),
                    Raw::ExpiredMark(p(&["m"])),
                    Raw::Lock(p(&["l"]), "ghost"),
                ],
            )
            .await?;
            let report = t.check().run().await?;
            if report.violations().len() < 5 {
                return Err(dynatree::Error::new(
                    ErrorKind::InvalidArgument,
                    format!("not corrupted enough: {:?}", classes(&report)),
                ));
            }
            *s.borrow_mut() = Some(report);
            Ok(())
        }
    })
    .op("repair", move |t| {
        let report = slot.borrow().clone().expect("setup took the report");
        async move { t.repair(&report).run().await.map(|r| r.to_string()) }
    })
    .op("an hour later: check, repair", |t| async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let report = t.check().run().await?;
        let repaired = t.repair(&report).run().await?;
        Ok::<_, dynatree::Error>(format!("{} / {repaired}", classes(&report).join(", ")))
    })
    .faults(1, crashes_and_failures())
    .check(healthy())
    .check(repair_again_heals(plain))
    .run();
}

// ---------------------------------------------------------------------------------------------
// 3. Repairs racing writers: stale copies, abandoned intents, secondary index attributes.

/// `tree.repair(&report)` of the setup's report, as operation (one round).
fn repair_op(sim: Sim<FakeTable>, slot: &Slot, name: &str) -> Sim<FakeTable> {
    let slot = Rc::clone(slot);
    sim.op(name, move |t| {
        let report = slot.borrow().clone().expect("setup took the report");
        async move { t.repair(&report).run().await.map(|r| r.to_string()) }
    })
}

/// The chain's setup, then forum `f`'s row rewritten raw, without versions, named "FX" (as
/// the Go library writes it): the thread's and the posts' copies are stale.
fn stale_setup(name: &str, slot: &Slot) -> Sim<FakeTable> {
    let s = Rc::clone(slot);
    Sim::new(name, FakeTable::new)
        .tree(denorm_chain::inline_tree)
        .schedules(BUDGET)
        .setup(move |t| {
            let s = Rc::clone(&s);
            async move {
                denorm_chain::setup(t.clone()).await?;
                let mut row = object_key(&p(&["R", "f"])).into_item();
                row.insert("forum", Value::S("f".into()));
                row.insert("name", Value::S("FX".into()));
                t.storage().put_item(row, Condition::Always).await?;
                let report = t.check().run().await?;
                let found = classes(&report);
                if !found.iter().any(|c| c == "stale-copy /R/f/T/t") {
                    return Err(dynatree::Error::new(
                        ErrorKind::InvalidArgument,
                        format!("no stale copy: {found:?}"),
                    ));
                }
                *s.borrow_mut() = Some(report);
                Ok(())
            }
        })
}

/// Stale copies repaired while the app renames the forum (a typed put) and moves the thread
/// to forum `g`: every copy ends equal to its source.
#[test]
fn stale_copy_repair_vs_rename_and_move_of_the_target() {
    let slot = Slot::default();
    let sim = stale_setup(
        "repair (f rewritten raw: stale copies) vs put forum f=F2, move f/t -> g/t",
        &slot,
    );
    repair_op(sim, &slot, "repair")
        .op("put forum f=F2", denorm_chain::put_forum("f", "F2"))
        .op("move thread f/t -> g/t", denorm_chain::move_thread)
        .check(denorm_chain::check)
        .check(healthy_on(denorm))
        .run();
}

/// The same, one fault per schedule (the simulator's recovery `resume()` finishes what an
/// intent records).
#[test]
fn stale_copy_repair_vs_rename_with_faults() {
    let slot = Slot::default();
    let sim = stale_setup(
        "repair (stale copies, one fault) vs patch forum f=F3, put post p3",
        &slot,
    );
    repair_op(sim, &slot, "repair")
        .op("patch forum f=F3", denorm_chain::patch_forum("f", "F3"))
        .op("put post p3", denorm_chain::put_post("f", "t", "p3"))
        .faults(1, SimFault::all())
        .allow_wait(true)
        .check(denorm_chain::check)
        .check(healthy_on(denorm))
        .run();
}

/// A move `s -> d` whose process died at its `fail_at`-th request, lease run out.
async fn abandoned_move(t: &T, fail_at: u64) -> dynatree::Result<()> {
    let faulty = Faulty::new(backend(t));
    faulty.inject_rule(FaultRule::new(Fault::Fail).nth(fail_at).always());
    let crashed = Tree::new(faulty);
    let _ = crashed.move_subtree(["s"], ["d"]).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    Ok(())
}

/// An abandoned move repaired while another process calls `resume()` (and the app puts under
/// the destination): the move applied exactly once, the put kept or refused.
#[test]
fn abandoned_intent_repair_vs_resume() {
    for fail_at in [7, 12, 17] {
        let slot = Slot::default();
        let s = Rc::clone(&slot);
        let sim = Sim::new(
            format!("repair (move s->d abandoned at request {fail_at}) vs resume, put d/n"),
            FakeTable::new,
        )
        .schedules(BUDGET / 3)
        .setup(move |t| {
            let s = Rc::clone(&s);
            async move {
                t.put(["s", "a"], &V { v: 1 }).await?;
                t.put(["s", "b", "c"], &V { v: 2 }).await?;
                abandoned_move(&t, fail_at).await?;
                let report = t.check().run().await?;
                if report.of(Class::AbandonedIntent).count() == 0 {
                    return Err(dynatree::Error::new(
                        ErrorKind::InvalidArgument,
                        format!("no abandoned intent: {:?}", classes(&report)),
                    ));
                }
                *s.borrow_mut() = Some(report);
                Ok(())
            }
        });
        repair_op(sim, &slot, "repair")
            .op(
                "resume",
                |t| async move { t.resume().await.map(|r| r.len()) },
            )
            .op("put d/n", |t| async move {
                t.put(["d", "n"], &V { v: 4 }).await
            })
            .check(healthy())
            .check(|end| {
                let has = |path: &[&str], v| end.number(path, "v") == Some(v);
                let at_d = has(&["d", "a"], 1) && has(&["d", "b", "c"], 2);
                let at_s = has(&["s", "a"], 1) && has(&["s", "b", "c"], 2);
                if at_d == at_s {
                    return Err(format!("the move is applied {} times", u8::from(at_d) * 2));
                }
                if end.ok(2) && !has(&["d", "n"], 4) {
                    return Err("the acknowledged put d/n is lost".into());
                }
                Ok(())
            })
            .run();
    }
}

/// A user with a secondary index on its email.
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "U/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

fn user(id: &str, email: &str) -> User {
    User {
        id: id.into(),
        email: email.into(),
    }
}

fn indexed_sim(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s).indexes_of::<User>().build().expect("tree")
}

fn indexed(t: FakeTable) -> T {
    Tree::builder(t).indexes_of::<User>().build().expect("tree")
}

/// The index attribute of every user row equals the user's email (the index finds it by its
/// current value). Returns the rows' (email, index attributes) that disagree.
fn index_follows(end: &End<'_>) -> Result<(), String> {
    let mut wrong = Vec::new();
    for r in end.rows {
        let (Some(h), Some(c)) = (r.get_s("Key"), r.get_s("Child")) else {
            continue;
        };
        if !h.starts_with("¦U¦") || c != "¦" {
            continue;
        }
        let email = r.get_s("email");
        let index: Vec<(String, String)> = r
            .iter()
            .filter(|(n, _)| n.starts_with('¦') && n.contains("by_email"))
            .map(|(n, v)| (n.to_string(), format!("{v:?}")))
            .collect();
        if index.is_empty()
            || !index
                .iter()
                .any(|(_, v)| email.is_some_and(|e| v.contains(e)))
        {
            wrong.push(format!("{h}: email {email:?}, index attributes {index:?}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// Users written raw without index attributes (as the Go library writes them), repaired while
/// the app re-puts one with another email and updates the other's (`update`).
#[test]
fn missing_index_repair_vs_typed_reput_and_patch() {
    let slot = Slot::default();
    let s = Rc::clone(&slot);
    let sim = Sim::new(
        "repair (U/1, U/2 without index attributes) vs put U/1 b@x, update U/2 c@x",
        FakeTable::new,
    )
    .tree(indexed_sim)
    .schedules(BUDGET)
    .setup(move |t| {
        let s = Rc::clone(&s);
        async move {
            t.repo::<User>().put(&user("0", "z@x")).await?;
            for id in ["1", "2"] {
                let path = p(&["U", id]);
                let st = t.storage();
                st.put_item(listing_key(&path).into_item(), Condition::Always)
                    .await?;
                let mut row = object_key(&path).into_item();
                row.insert("id", Value::S(id.into()));
                row.insert("email", Value::S("a@x".into()));
                st.put_item(row, Condition::Always).await?;
            }
            let report = t.check().run().await?;
            if report.of(Class::MissingIndex).count() != 2 {
                return Err(dynatree::Error::new(
                    ErrorKind::InvalidArgument,
                    format!("not 2 missing indexes: {:?}", classes(&report)),
                ));
            }
            *s.borrow_mut() = Some(report);
            Ok(())
        }
    });
    repair_op(sim, &slot, "repair")
        .op("put U/1 b@x", |t| async move {
            t.repo::<User>().put(&user("1", "b@x")).await
        })
        .op("update U/2 c@x", |t| async move {
            t.repo::<User>().update(&mut user("2", "c@x")).await
        })
        .check(index_follows)
        .check(healthy_on(indexed))
        .run();
}
