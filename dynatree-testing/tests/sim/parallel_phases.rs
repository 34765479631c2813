//! Subtree operations with their phases' reads in flight together (the default, 16; their
//! transactions one at a time), against what the same operations keep with one request at a
//! time (`sequential_tree`): the order `moves.md` ("Requests in flight") keeps, errors and
//! crashes in the middle of a phase, takeovers, concurrent writers, the requests sent, and
//! DynamoDB's rule that transactions in flight on one item cancel each other.
//!
//! Most of what a phase sends in parallel is sliced by DynamoDB's limits (99 actions a
//! transaction, 198 nodes a slice), so several scenarios use a source with about a hundred
//! rows: two transactions of one unlock, two slices of one level.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::acts::*;

/// The names `x000 .. x{n-1}`.
pub(crate) fn xs(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("x{i:03}")).collect()
}

/// `check()` of the final table finds nothing repairable but, when an operation failed, an
/// empty listing row (a failed delete may leave one, documented).
pub(crate) fn no_violation_unless_failed(end: &End<'_>) -> Result<(), String> {
    let failed = end.outcomes.iter().any(|o| !o.is_ok());
    let found = final_violations(end.rows, Tree::new, failed)?;
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("check() of the final table: {found:?}"))
    }
}

// ---------------------------------------------------------------------------------------------
// 1. The order of a node's unlock and its parent's.

/// Source `a`: `a/p/n` (its parent `a/p` names no object) and 98 objects `a/x000 ..`, so
/// the destination's 101 rows, top-down, unlock in two transactions: `z`, `z/p` and 97 of
/// the `x` in the first; the last `x` and `z/p/n` in the second.
fn wide_source() -> Vec<(P, u32)> {
    let mut setup = vec![(p(&["a", "p", "n"]), 1)];
    setup.extend(xs(98).into_iter().map(|x| (vec!["a".to_owned(), x], 2)));
    setup
}

// The same race made certain: a layer over the fake table holds back the unlock transaction
// of `parent` until the unlock of `child` has landed and a delete of `child` (another
// process, straight on the table) has returned. With one request in flight the unlock of
// `parent` is sent first and goes on after a timeout; with several, the unlock of `child` is
// already on its way.

/// The state shared by [`Reorder`]'s clones.
struct ReorderState {
    inner: FakeTable,
    parent: Key,
    child: Key,
    child_path: P,
    started: AtomicBool,
    finished: AtomicBool,
    done: tokio::sync::Notify,
    /// What the delete of `child` returned.
    outcome: std::sync::Mutex<Option<String>>,
}

/// See above.
#[derive(Clone)]
struct Reorder(Arc<ReorderState>);

impl Reorder {
    fn new(inner: FakeTable, parent: P, child: P) -> Self {
        Self(Arc::new(ReorderState {
            inner,
            parent: listing_key(&parent),
            child: listing_key(&child),
            child_path: child,
            started: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            done: tokio::sync::Notify::new(),
            outcome: std::sync::Mutex::new(None),
        }))
    }

    fn outcome(&self) -> Option<String> {
        self.0.outcome.lock().expect("not poisoned").clone()
    }
}

/// Whether `actions` unlock the listing row `key` (a bare Put of it, no lock in the item).
fn unlocks(actions: &[TransactAction], key: &Key) -> bool {
    let moving = format!("{SC}moving");
    actions.iter().any(|a| {
        matches!(a, TransactAction::Put { item, .. }
            if Key::from_item(item).as_ref() == Some(key) && !item.contains(&moving))
    })
}

impl Storage for Reorder {
    async fn send(
        &self,
        request: dynatree::storage::Request,
    ) -> dynatree::Result<dynatree::storage::Response> {
        let s = &self.0;
        let (holds_parent, frees_child) = match &request {
            dynatree::storage::Request::TransactWrite { actions, .. } => {
                (unlocks(actions, &s.parent), unlocks(actions, &s.child))
            }
            _ => (false, false),
        };
        if holds_parent && !frees_child && !s.finished.load(Ordering::SeqCst) {
            let wait = s.done.notified();
            if !s.finished.load(Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_secs(5), wait).await;
            }
        }
        let out = s.inner.send(request).await;
        if frees_child && out.is_ok() && !s.started.swap(true, Ordering::SeqCst) {
            let other = Tree::new(s.inner.clone());
            let r = other.delete(s.child_path.clone()).await;
            *s.outcome.lock().expect("not poisoned") = Some(format!("{r:?}"));
            s.finished.store(true, Ordering::SeqCst);
            s.done.notify_waiters();
        }
        out
    }
}

/// `op` (a move `a -> z` or a copy `a -> z`) of [`wide_source`] on a tree sending `in_flight`
/// requests at once, through a [`Reorder`] of `parent`'s and `child`'s unlocks; returns the
/// final check's violations and what the delete of `child` returned.
async fn unlock_race(
    in_flight: usize,
    copy: bool,
    parent: P,
    child: P,
) -> (Vec<String>, Option<String>) {
    let table = FakeTable::new();
    let plain = Tree::new(table.clone());
    plain.create_table().await.expect("table");
    for (path, v) in wide_source() {
        plain.put(path, &V { v }).await.expect("setup");
    }
    let layer = Reorder::new(table.clone(), parent, child);
    let tree = Tree::builder(layer.clone())
        .subtree_reads_in_flight(in_flight)
        .build()
        .expect("a tree");
    if copy {
        tree.copy_subtree(p(&["a"]), p(&["z"])).await.expect("copy");
    } else {
        tree.move_subtree(p(&["a"]), p(&["z"])).await.expect("move");
    }
    let report = plain
        .check()
        .grace(Duration::ZERO)
        .run()
        .await
        .expect("check");
    let found = report
        .violations()
        .iter()
        .map(ToString::to_string)
        .collect();
    (found, layer.outcome())
}

/// One request in flight: `z/p` is unlocked before `z/p/n`; the delete of `z/p/n` prunes `z/p`.
#[tokio::test(start_paused = true)]
async fn a_delete_racing_the_unlock_of_a_move_leaves_no_empty_listing_one_request_in_flight() {
    let (found, deleted) = unlock_race(1, false, p(&["z", "p"]), p(&["z", "p", "n"])).await;
    assert_eq!(deleted.as_deref(), Some("Ok(())"));
    assert!(found.is_empty(), "{found:?}");
}

/// A copy's source, one request in flight: `a/p` is unlocked before `a/p/n`.
#[tokio::test(start_paused = true)]
async fn a_delete_racing_the_unlock_of_a_copys_source_leaves_no_empty_listing_one_request_in_flight()
 {
    let (found, deleted) = unlock_race(1, true, p(&["a", "p"]), p(&["a", "p", "n"])).await;
    assert_eq!(deleted.as_deref(), Some("Ok(())"));
    assert!(found.is_empty(), "{found:?}");
}

/// Sixteen reads in flight: the unlocks still go one at a time, so the unlock of `z/p/n`
/// (the second transaction) cannot land before `z/p`'s; were it sent together with it, the
/// delete of `z/p/n` would return `Ok` with its prune refused by `z/p`'s lock, and the move
/// would then unlock `z/p` naming nothing (an empty listing row).
#[tokio::test(start_paused = true)]
async fn a_delete_racing_the_unlock_of_a_move_leaves_no_empty_listing_sixteen_in_flight() {
    let (found, deleted) = unlock_race(16, false, p(&["z", "p"]), p(&["z", "p", "n"])).await;
    assert_eq!(deleted.as_deref(), Some("Ok(())"));
    assert!(found.is_empty(), "{found:?}");
}

/// A copy's source, sixteen reads in flight: the same order, at `a/p`.
#[tokio::test(start_paused = true)]
async fn a_delete_racing_the_unlock_of_a_copys_source_leaves_no_empty_listing_sixteen_in_flight() {
    let (found, deleted) = unlock_race(16, true, p(&["a", "p"]), p(&["a", "p", "n"])).await;
    assert_eq!(deleted.as_deref(), Some("Ok(())"));
    assert!(found.is_empty(), "{found:?}");
}

// ---------------------------------------------------------------------------------------------
// 2. The requests sent: the same with sixteen in flight as with one.

/// A source `r` with levels of more than one slice: `r/c0 .. r/c2`, 110 objects under each
/// (330 nodes on one level: two slices of a copy, of a delete, several unlock transactions),
/// links inside the source and one into it from outside (`l`).
async fn costs_of(
    reads: usize,
    transactions: usize,
) -> Vec<(&'static str, std::collections::BTreeMap<&'static str, u64>)> {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .subtree_reads_in_flight(reads)
        .subtree_transactions_in_flight(transactions)
        .build()
        .expect("a tree");
    tree.create_table().await.expect("table");
    tree.put(p(&["r"]), &V { v: 0 }).await.expect("setup");
    for c in 0..3 {
        let c = format!("c{c}");
        for x in xs(110) {
            tree.put(p(&["r", &c, &x]), &V { v: 1 })
                .await
                .expect("setup");
        }
    }
    tree.put_link(p(&["r", "c0", "link"]), p(&["r", "c1", "x000"]))
        .await
        .expect("setup");
    tree.put_link(p(&["l"]), p(&["r", "c2", "x001"]))
        .await
        .expect("setup");
    let mut out = Vec::new();
    let mut measure = |name: &'static str, table: &FakeTable| {
        out.push((name, table.metrics().requests_by_operation().clone()));
        table.reset_metrics();
    };
    table.reset_metrics();
    tree.move_subtree_with(p(&["r"]), p(&["m"]), LinkPolicy::Rewrite)
        .await
        .expect("move");
    measure("move Rewrite", &table);
    tree.copy_subtree_with(p(&["m"]), p(&["c"]), LinkPolicy::Report)
        .await
        .expect("copy");
    measure("copy Report", &table);
    tree.delete_node(p(&["c", "c1"]), OnChildren::Reparent)
        .await
        .expect("reparent");
    measure("delete_node Reparent", &table);
    assert_eq!(tree.delete_subtree(p(&["c"])).await.expect("delete"), 332);
    measure("delete_subtree", &table);
    out
}

/// Move (links rewritten), copy (links reported), re-parenting of 110 children and subtree
/// deletion send the same requests, kind by kind, with sixteen reads in flight as with one.
#[tokio::test(start_paused = true)]
async fn subtree_operations_send_the_same_requests_with_reads_in_parallel_as_one_at_a_time() {
    let one = costs_of(1, 1).await;
    let sixteen = costs_of(16, 1).await;
    assert_eq!(one, sixteen);
}

/// With sixteen transactions in flight, each operation with a level wider than one
/// transaction (330 nodes: 7 lanes) sends what it sends one at a time plus its lanes and its
/// unlocks level by level (below). The re-parenting's child moves run inside it, on its
/// record: one at a time, as before.
#[tokio::test(start_paused = true)]
async fn subtree_operations_with_transactions_in_parallel_send_only_their_lanes_more() {
    let one = costs_of(1, 1).await;
    let sixteen = costs_of(16, 16).await;
    let ops: Vec<&str> = one.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        ops,
        sixteen.iter().map(|(name, _)| *name).collect::<Vec<_>>()
    );
    for ((name, one), (_, sixteen)) in one.iter().zip(&sixteen) {
        let kinds: std::collections::BTreeSet<&str> =
            one.keys().chain(sixteen.keys()).copied().collect();
        let diff: Vec<(&str, i64)> = kinds
            .into_iter()
            .map(|k| {
                let n = |m: &std::collections::BTreeMap<&str, u64>| {
                    i64::try_from(m.get(k).copied().unwrap_or(0)).expect("a count")
                };
                (k, n(sixteen) - n(one))
            })
            .filter(|(_, d)| *d != 0)
            .collect();
        // The lanes: one transaction writes them (two for the deletion, whose widest level
        // comes second: they grow), one deletes them with the record. The unlocks go level by
        // level: one more transaction for each of the two levels above the wide one, at the
        // destination (move, copy) and at the source (copy).
        let expected: Vec<(&str, i64)> = match *name {
            "move Rewrite" => vec![("DeleteItem", -1), ("TransactWriteItems", 2 + 2)],
            "copy Report" => vec![("DeleteItem", -1), ("TransactWriteItems", 2 + 2 + 2)],
            "delete_subtree" => vec![("DeleteItem", -1), ("TransactWriteItems", 3)],
            _ => Vec::new(),
        };
        assert_eq!(diff, expected, "{name}: requests by kind, 16 in flight - 1");
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Simulated schedules with requests in flight together (the default tree): a level's
// listings, the holds of every level and the reads of a level's objects go out at once.

/// A source of three levels, several nodes each: `s/a`, `s/b/c`, `s/b/d`, `s/e/f/g`, `s/h`.
fn bushy() -> Vec<(P, u32)> {
    paths(&[
        (&["s", "a"], 1),
        (&["s", "b", "c"], 2),
        (&["s", "b", "d"], 3),
        (&["s", "e", "f", "g"], 4),
        (&["s", "h"], 5),
    ])
}

/// A move with up to two crashes or failed requests anywhere (several listings, holds and
/// reads in flight when one hits), then `resume`: all or nothing, the final table healthy.
#[test]
fn parallel_move_with_crashes_and_failures_mid_phase_resumes_to_all_or_nothing() {
    scenario_with(
        "move s->z (bushy), crashes and failures",
        plain_tree,
        bushy(),
        Vec::new(),
        &[Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Ignore)],
    )
    .faults(2, crashes_and_failures())
    .schedules(500)
    .check(no_violation_unless_failed)
    .run();
}

/// A copy whose source holds links into itself and is the target of an outside link, under
/// one fault of every kind: all or nothing.
#[test]
fn parallel_copy_with_links_under_every_fault() {
    with_faults(scenario_with(
        "copy s->z (bushy, links), every fault",
        plain_tree,
        bushy(),
        vec![
            (p(&["s", "b", "l"]), p(&["s", "e", "f", "g"])),
            (p(&["l"]), p(&["s", "a"])),
        ],
        &[Act::Copy(p(&["s"]), p(&["z"]))],
    ))
    .schedules(500)
    .check(no_violation_unless_failed)
    .run();
}

/// A move rewriting links (one inside the source, one into it) under one fault of every kind.
#[test]
fn parallel_rewriting_move_with_links_under_every_fault() {
    with_faults(scenario_with(
        "move s->z Rewrite (bushy, links), every fault",
        plain_tree,
        bushy(),
        vec![
            (p(&["s", "b", "l"]), p(&["s", "e", "f", "g"])),
            (p(&["l"]), p(&["s", "a"])),
        ],
        &[Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Rewrite)],
    ))
    .schedules(500)
    .check(no_violation_unless_failed)
    .run();
}

/// Writers racing the parallel lock walk: a put under a second-level node, a put at the
/// destination, a delete of a leaf; serial order checked against the model.
#[test]
fn parallel_move_vs_puts_under_source_and_destination_and_a_delete() {
    scenario_with(
        "move s->z (bushy) vs put s/b/x, put z/q, delete s/e/f/g",
        plain_tree,
        bushy(),
        Vec::new(),
        &[
            Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Ignore),
            Act::Put(p(&["s", "b", "x"]), 9),
            Act::Put(p(&["z", "q"]), 8),
            Act::Delete(p(&["s", "e", "f", "g"])),
        ],
    )
    .schedules(600)
    .check(no_violation_unless_failed)
    .run();
}

/// Two subtree operations racing for the same rows with parallel lock walks: a move of the
/// source against a subtree deletion of one of its branches, and a copy of another branch.
#[test]
fn parallel_move_vs_delete_subtree_and_copy_of_branches() {
    scenario_with(
        "move s->z (bushy) vs delete_subtree s/b vs copy s/e->k",
        plain_tree,
        bushy(),
        Vec::new(),
        &[
            Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Ignore),
            Act::DeleteSubtree(p(&["s", "b"])),
            Act::Copy(p(&["s", "e"]), p(&["k"])),
        ],
    )
    .schedules(600)
    .check(no_violation_unless_failed)
    .run();
}

/// A subtree deletion with crashes mid-phase and a put under the subtree, then `resume`.
#[test]
fn parallel_delete_subtree_with_crashes_vs_put_under_it() {
    scenario_with(
        "delete_subtree s (bushy) vs put s/b/x, crashes",
        plain_tree,
        bushy(),
        Vec::new(),
        &[
            Act::DeleteSubtree(p(&["s"])),
            Act::Put(p(&["s", "b", "x"]), 9),
        ],
    )
    .faults(2, crashes())
    .schedules(500)
    .check(no_violation_unless_failed)
    .run();
}

/// A re-parenting of a node with four children (each its own parallel move), called again
/// after a transient error, racing a put under one child, with one fault of every kind.
#[test]
fn parallel_reparent_of_several_children_vs_put_under_a_child_under_every_fault() {
    with_faults(scenario_with(
        "delete_node s Reparent (bushy) vs put s/b/x, every fault",
        plain_tree,
        bushy(),
        Vec::new(),
        &[
            Act::ReparentTwice(p(&["s"])),
            Act::Put(p(&["s", "b", "x"]), 9),
        ],
    ))
    .schedules(500)
    .check(no_violation_unless_failed)
    .run();
}

/// A tree with a 10 s lease.
pub(crate) fn leased(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .removal_lease(Duration::from_secs(10))
        .build()
        .expect("valid settings")
}

/// A move taken over mid-phase by a `resume()` whose clock runs past the lease (it sees the
/// lease run out at once, wherever the schedule puts it, while requests of the owner are in
/// flight): the owner's requests in flight write nothing once it lost the intent, and the
/// move is applied exactly once.
#[test]
fn parallel_move_taken_over_mid_phase_by_resume_applies_once() {
    scenario_with(
        "move s->z (bushy) vs resume (clock ahead)",
        leased,
        bushy(),
        Vec::new(),
        &[Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Ignore)],
    )
    .op("resume (clock ahead)", |t| async move {
        t.resume().await.map(|r| r.len())
    })
    .model(|_| Ok(()))
    .skew(Duration::from_secs(15), false)
    .schedules(500)
    .check(|end| {
        let at_source = bushy()
            .iter()
            .filter(|(q, _)| end.model.get(q.clone()).is_some())
            .count();
        let at_dest = bushy()
            .iter()
            .filter(|(q, _)| {
                let mut d = q.clone();
                d[0] = "z".to_owned();
                end.model.get(d).is_some()
            })
            .count();
        match (at_source, at_dest) {
            (5, 0) | (0, 5) => Ok(()),
            other => Err(format!("(at the source, at the destination) = {other:?}")),
        }
    })
    .check(no_violation_unless_failed)
    .run();
}

/// A re-parenting taken over mid child move by a `resume()` with its clock ahead.
#[test]
fn parallel_reparent_taken_over_mid_child_move_by_resume() {
    scenario_with(
        "delete_node s Reparent (bushy) vs resume (clock ahead)",
        leased,
        bushy(),
        Vec::new(),
        &[Act::DeleteNode(p(&["s"]), OnChildren::Reparent)],
    )
    .op("resume (clock ahead)", |t| async move {
        t.resume().await.map(|r| r.len())
    })
    .model(|_| Ok(()))
    .skew(Duration::from_secs(15), false)
    .schedules(500)
    .check(no_violation_unless_failed)
    .run();
}

/// `s` and `n` children (120: a level of three lanes).
pub(crate) fn wide(n: usize) -> Vec<(P, u32)> {
    let mut setup = vec![(p(&["s"]), 0)];
    setup.extend(xs(n).into_iter().map(|x| (vec!["s".to_owned(), x], 1)));
    setup
}

/// A move whose level of 120 children goes out on three lanes, taken over mid-phase by a
/// `resume()` whose clock runs past the lease, with transactions of the owner in flight on
/// several lanes: the takeover claims every lane in one transaction, so the owner's
/// transactions still in flight write nothing after it, and the move is applied exactly
/// once.
#[test]
fn parallel_move_on_lanes_taken_over_mid_phase_by_resume_applies_once() {
    scenario_with(
        "move s->z (120 children, 3 lanes) vs resume (clock ahead)",
        leased,
        wide(120),
        Vec::new(),
        &[Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Ignore)],
    )
    .op("resume (clock ahead)", |t| async move {
        t.resume().await.map(|r| r.len())
    })
    .model(|_| Ok(()))
    .skew(Duration::from_secs(15), false)
    .schedules(80)
    .check(|end| {
        let count = |root: &str| {
            wide(120)
                .iter()
                .filter(|(q, _)| {
                    let mut d = q.clone();
                    d[0] = root.to_owned();
                    end.model.get(d).is_some()
                })
                .count()
        };
        match (count("s"), count("z")) {
            (121, 0) | (0, 121) => Ok(()),
            other => Err(format!("(at the source, at the destination) = {other:?}")),
        }
    })
    .check(no_violation_unless_failed)
    .run();
}

/// A subtree deletion on three lanes with a crash anywhere (the lanes half written, a level
/// half deleted), then `resume`: the subtree is gone and no lane or intent row is left.
#[test]
fn parallel_delete_on_lanes_with_a_crash_resumes_and_leaves_no_lane() {
    scenario_with(
        "delete_subtree s (120 children, 3 lanes), a crash",
        plain_tree,
        wide(120),
        Vec::new(),
        &[Act::DeleteSubtree(p(&["s"]))],
    )
    .faults(1, crashes())
    .schedules(60)
    .check(no_violation_unless_failed)
    .check(|end| {
        let sc = SC;
        let left: Vec<&str> = end
            .rows
            .iter()
            .filter_map(|r| r.get_s("Key"))
            .filter(|h| *h == format!("{sc}{sc}intents"))
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{} rows left in the intents partition", left.len()))
        }
    })
    .run();
}

/// One level of 200 nodes (two copy and two delete slices, two lock and hold transactions)
/// moved with a crash anywhere, then `resume`.
#[test]
fn parallel_move_of_a_level_of_two_slices_with_a_crash_resumes() {
    let mut setup = vec![(p(&["s"]), 0)];
    setup.extend(xs(200).into_iter().map(|x| (vec!["s".to_owned(), x], 1)));
    scenario_with(
        "move s->z (200 children), a crash",
        plain_tree,
        setup,
        Vec::new(),
        &[Act::Move(p(&["s"]), p(&["z"]), LinkPolicy::Ignore)],
    )
    .faults(1, crashes())
    .schedules(60)
    .check(no_violation_unless_failed)
    .run();
}

// ---------------------------------------------------------------------------------------------
// 4. An error in flight: no request starts after it.

/// A layer over the fake table for the lock walk's listings of one level (`s/a`, `s/b`,
/// `s/c`): the listing of `s/b` fails (nothing sent), the listing of `s/a` is held back until
/// that failure has been returned (or a timeout, with one request in flight), and every
/// listing of `s/c` sent after the failure is counted.
struct AfterErrorState {
    inner: FakeTable,
    failed: AtomicBool,
    done: tokio::sync::Notify,
    after: std::sync::atomic::AtomicUsize,
}

#[derive(Clone)]
struct AfterError(Arc<AfterErrorState>);

/// The partition listing the children of `node`.
fn children_hash(node: &[&str]) -> String {
    let mut q = p(node);
    q.push("_".to_owned());
    listing_key(&q).hash
}

impl Storage for AfterError {
    async fn send(
        &self,
        request: dynatree::storage::Request,
    ) -> dynatree::Result<dynatree::storage::Response> {
        let s = &self.0;
        let hash = match &request {
            dynatree::storage::Request::Query { query, .. } => Some(query.hash.clone()),
            _ => None,
        };
        if hash.as_deref() == Some(children_hash(&["s", "b"]).as_str()) {
            s.failed.store(true, Ordering::SeqCst);
            s.done.notify_waiters();
            return Err(dynatree::Error::new(
                ErrorKind::Backend,
                "the listing of s/b failed",
            ));
        }
        if hash.as_deref() == Some(children_hash(&["s", "a"]).as_str())
            && !s.failed.load(Ordering::SeqCst)
        {
            let wait = s.done.notified();
            if !s.failed.load(Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_secs(5), wait).await;
            }
        }
        if hash.as_deref() == Some(children_hash(&["s", "c"]).as_str())
            && s.failed.load(Ordering::SeqCst)
        {
            s.after.fetch_add(1, Ordering::SeqCst);
        }
        s.inner.send(request).await
    }
}

/// A move of `s` whose lock walk lists `s/a`, `s/b`, `s/c` with `in_flight` requests at once
/// and fails at the listing of `s/b`: the listings of `s/c` sent after that failure (none, as
/// with one request at a time: "the first error starts no more requests").
async fn listings_after_an_error(in_flight: usize) -> usize {
    let table = FakeTable::new();
    let plain = Tree::new(table.clone());
    plain.create_table().await.expect("table");
    for c in ["a", "b", "c"] {
        plain
            .put(p(&["s", c, "1"]), &V { v: 1 })
            .await
            .expect("setup");
    }
    let layer = AfterError(Arc::new(AfterErrorState {
        inner: table.clone(),
        failed: AtomicBool::new(false),
        done: tokio::sync::Notify::new(),
        after: std::sync::atomic::AtomicUsize::new(0),
    }));
    let tree = Tree::builder(layer.clone())
        .subtree_reads_in_flight(in_flight)
        .retry_policy(dynatree::RetryPolicy::new(
            1,
            Duration::from_millis(1),
            Duration::from_millis(1),
        ))
        .build()
        .expect("a tree");
    let e = tree
        .move_subtree(p(&["s"]), p(&["z"]))
        .await
        .expect_err("the listing of s/b fails");
    assert_eq!(e.kind(), ErrorKind::Backend, "{e}");
    // The move stays recorded at its lock phase; resume finishes it.
    assert_eq!(plain.resume().await.expect("resume").len(), 1);
    assert!(
        plain
            .get::<V>(p(&["z", "c", "1"]))
            .await
            .expect("get")
            .is_some()
    );
    layer.0.after.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn no_listing_starts_after_a_failed_listing_one_request_in_flight() {
    assert_eq!(listings_after_an_error(1).await, 0);
}
/// Two in flight: the listing of `s/a` held back, `s/b` fails; when `s/a` returns, the
/// listing of `s/c` must not start (the error is seen when it happens, not when the results
/// before it are in).
#[tokio::test(start_paused = true)]
async fn no_listing_starts_after_a_failed_listing_two_in_flight() {
    assert_eq!(listings_after_an_error(2).await, 0);
}

// ---------------------------------------------------------------------------------------------
// 5. A process that dies with an earlier transaction of a phase never sent. With one
// transaction at a time, no later one of the phase is sent (a crash leaves a prefix); with
// several, on lanes, the later ones of the same level are; either way `resume` from another
// process finishes the operation.

/// Picks the action of a transaction that a [`Dies`] layer looks for.
type Pick = fn(&TransactAction) -> bool;

struct DiesState {
    inner: FakeTable,
    /// A transaction with such an action never returns (it is never sent).
    hold: Pick,
    /// A transaction with such an action, once applied, lets the test drop the call.
    trigger: Pick,
    fired: AtomicBool,
}

/// A layer over the fake table that keeps one transaction of a phase from ever being sent
/// and tells the test if another of the same phase is applied.
#[derive(Clone)]
struct Dies(Arc<DiesState>);

impl Storage for Dies {
    async fn send(
        &self,
        request: dynatree::storage::Request,
    ) -> dynatree::Result<dynatree::storage::Response> {
        let s = &self.0;
        let (hold, trigger) = match &request {
            dynatree::storage::Request::TransactWrite { actions, .. } => {
                (actions.iter().any(s.hold), actions.iter().any(s.trigger))
            }
            _ => (false, false),
        };
        if hold {
            std::future::pending::<()>().await;
        }
        let out = s.inner.send(request).await;
        if trigger && out.is_ok() {
            s.fired.store(true, Ordering::SeqCst);
        }
        out
    }
}

fn deletes(a: &TransactAction, path: &[&str]) -> bool {
    matches!(a, TransactAction::Delete { key, .. } if *key == listing_key(&p(path)))
}

fn writes_locked(a: &TransactAction, path: &[&str]) -> bool {
    let moving = format!("{SC}moving");
    matches!(a, TransactAction::Put { item, .. }
        if Key::from_item(item) == Some(listing_key(&p(path))) && item.contains(&moving))
}

fn updates_object(a: &TransactAction, path: &[&str]) -> bool {
    matches!(a, TransactAction::Update { key, .. } if *key == object_key(&p(path)))
}

/// `s` with 200 children (two slices of one level in every phase), `op` run through a
/// [`Dies`] layer that holds `hold`'s transaction back for ten minutes, in which `trigger`'s
/// (later in the phase) must not be applied; then the call is dropped (the process died) and
/// a `resume` from a fresh tree finishes it. Returns the number of children at `s` and at
/// `z`, and the final check's violations.
async fn dies_mid_phase(
    op: &'static str,
    hold: Pick,
    trigger: Pick,
    transactions: usize,
) -> (usize, usize, Vec<String>) {
    let table = FakeTable::new();
    let plain = Tree::new(table.clone());
    plain.create_table().await.expect("table");
    plain.put(p(&["s"]), &V { v: 0 }).await.expect("setup");
    for x in xs(200) {
        plain.put(p(&["s", &x]), &V { v: 1 }).await.expect("setup");
    }
    let layer = Dies(Arc::new(DiesState {
        inner: table.clone(),
        hold,
        trigger,
        fired: AtomicBool::new(false),
    }));
    let tree = Tree::builder(layer.clone())
        .subtree_transactions_in_flight(transactions)
        .build()
        .expect("a tree");
    let call = async {
        match op {
            "move" => tree.move_subtree(p(&["s"]), p(&["z"])).await.map(|_| ()),
            "copy" => tree.copy_subtree(p(&["s"]), p(&["z"])).await.map(|_| ()),
            _ => tree.delete_subtree(p(&["s"])).await.map(|_| ()),
        }
    };
    let fired = async {
        while !layer.0.fired.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    if transactions == 1 {
        tokio::select! {
            r = call => panic!("the {op} ended with a transaction held back: {r:?}"),
            () = fired => panic!("the {op} applied a later transaction of its phase before an earlier one"),
            () = tokio::time::sleep(Duration::from_secs(600)) => {}
        }
    } else {
        tokio::select! {
            r = call => panic!("the {op} ended with a transaction held back: {r:?}"),
            () = tokio::time::sleep(Duration::from_secs(600)) => {
                panic!("the {op} sent no later transaction of its phase beside the one held back")
            }
            () = fired => {}
        }
    }
    let resumed = Tree::new(table.clone()).resume().await.expect("resume");
    assert_eq!(resumed.len(), 1);
    let count = |root: &'static str| {
        let plain = plain.clone();
        async move {
            let mut n = 0;
            for x in xs(200) {
                if plain.get::<V>(p(&[root, &x])).await.expect("get").is_some() {
                    n += 1;
                }
            }
            n
        }
    };
    let (at_s, at_z) = (count("s").await, count("z").await);
    let report = plain
        .check()
        .grace(Duration::ZERO)
        .run()
        .await
        .expect("check");
    let found = report
        .violations()
        .iter()
        .map(ToString::to_string)
        .collect();
    (at_s, at_z, found)
}

/// Dies while holding the source's objects, the first slice's hold never sent.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_before_its_first_hold_slice_sends_no_later_one_and_is_resumed() {
    let r = dies_mid_phase(
        "move",
        |a| updates_object(a, &["s", "x000"]),
        |a| updates_object(a, &["s", "x199"]),
        1,
    )
    .await;
    assert_eq!(r, (0, 200, Vec::new()));
}

/// Dies while holding the source's objects, the first slice's hold never sent, with its level's transactions in flight together: a later one
/// of the level is applied, and `resume` still finishes the operation.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_before_its_first_hold_slice_in_parallel_is_resumed() {
    let r = dies_mid_phase(
        "move",
        |a| updates_object(a, &["s", "x000"]),
        |a| updates_object(a, &["s", "x199"]),
        16,
    )
    .await;
    assert_eq!(r, (0, 200, Vec::new()));
}

/// Dies in the copy phase, the level's first slice never sent.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_before_its_first_copy_slice_sends_no_later_one_and_is_resumed() {
    let r = dies_mid_phase(
        "move",
        |a| writes_locked(a, &["z", "x000"]),
        |a| writes_locked(a, &["z", "x199"]),
        1,
    )
    .await;
    assert_eq!(r, (0, 200, Vec::new()));
}

/// Dies in the copy phase, the level's first slice never sent, with its level's transactions in flight together: a later one
/// of the level is applied, and `resume` still finishes the operation.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_before_its_first_copy_slice_in_parallel_is_resumed() {
    let r = dies_mid_phase(
        "move",
        |a| writes_locked(a, &["z", "x000"]),
        |a| writes_locked(a, &["z", "x199"]),
        16,
    )
    .await;
    assert_eq!(r, (0, 200, Vec::new()));
}

/// Dies in the delete phase, the level's first slice never sent.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_before_its_first_delete_slice_sends_no_later_one_and_is_resumed() {
    let r = dies_mid_phase(
        "move",
        |a| deletes(a, &["s", "x000"]),
        |a| deletes(a, &["s", "x199"]),
        1,
    )
    .await;
    assert_eq!(r, (0, 200, Vec::new()));
}

/// Dies in the delete phase, the level's first slice never sent, with its level's transactions in flight together: a later one
/// of the level is applied, and `resume` still finishes the operation.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_before_its_first_delete_slice_in_parallel_is_resumed() {
    let r = dies_mid_phase(
        "move",
        |a| deletes(a, &["s", "x000"]),
        |a| deletes(a, &["s", "x199"]),
        16,
    )
    .await;
    assert_eq!(r, (0, 200, Vec::new()));
}

/// A copy that dies in its copy phase, the level's first slice never sent.
#[tokio::test(start_paused = true)]
async fn a_copy_that_dies_before_its_first_copy_slice_sends_no_later_one_and_is_resumed() {
    let r = dies_mid_phase(
        "copy",
        |a| writes_locked(a, &["z", "x000"]),
        |a| writes_locked(a, &["z", "x199"]),
        1,
    )
    .await;
    assert_eq!(r, (200, 200, Vec::new()));
}

/// A copy that dies in its copy phase, the level's first slice never sent, with its level's transactions in flight together: a later one
/// of the level is applied, and `resume` still finishes the operation.
#[tokio::test(start_paused = true)]
async fn a_copy_that_dies_before_its_first_copy_slice_in_parallel_is_resumed() {
    let r = dies_mid_phase(
        "copy",
        |a| writes_locked(a, &["z", "x000"]),
        |a| writes_locked(a, &["z", "x199"]),
        16,
    )
    .await;
    assert_eq!(r, (200, 200, Vec::new()));
}

/// A subtree deletion that dies, the level's first slice never sent.
#[tokio::test(start_paused = true)]
async fn a_subtree_deletion_that_dies_before_its_first_slice_sends_no_later_one_and_is_resumed() {
    let r = dies_mid_phase(
        "delete",
        |a| deletes(a, &["s", "x000"]),
        |a| deletes(a, &["s", "x199"]),
        1,
    )
    .await;
    assert_eq!(r, (0, 0, Vec::new()));
}

/// A subtree deletion that dies, the level's first slice never sent, with its level's transactions in flight together: a later one
/// of the level is applied, and `resume` still finishes the operation.
#[tokio::test(start_paused = true)]
async fn a_subtree_deletion_that_dies_before_its_first_slice_in_parallel_is_resumed() {
    let r = dies_mid_phase(
        "delete",
        |a| deletes(a, &["s", "x000"]),
        |a| deletes(a, &["s", "x199"]),
        16,
    )
    .await;
    assert_eq!(r, (0, 0, Vec::new()));
}

/// Whether `a` unlocks the listing row of `path` (a bare Put of it).
fn unlocks_row(a: &TransactAction, path: &[&str]) -> bool {
    unlocks(std::slice::from_ref(a), &listing_key(&p(path)))
}

/// A move of [`wide_source`] that dies in its unlock phase with the unlock of `z/p` never
/// sent: the unlock of its child `z/p/n` (a later transaction) must not be applied in the ten
/// minutes before the call is dropped, so another process's delete of `z/p/n` is refused
/// (`Locked`); a `resume` finishes the unlock, and the delete then prunes nothing it should
/// keep. Returns the final check's violations.
async fn dies_between_unlocks_then_child_deleted() -> Vec<String> {
    let table = FakeTable::new();
    let plain = Tree::new(table.clone());
    plain.create_table().await.expect("table");
    for (path, v) in wide_source() {
        plain.put(path, &V { v }).await.expect("setup");
    }
    let layer = Dies(Arc::new(DiesState {
        inner: table.clone(),
        hold: |a| unlocks_row(a, &["z", "p"]),
        trigger: |a| unlocks_row(a, &["z", "p", "n"]),
        fired: AtomicBool::new(false),
    }));
    let tree = Tree::new(layer.clone());
    let fired = async {
        while !layer.0.fired.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::select! {
        r = tree.move_subtree(p(&["a"]), p(&["z"])) => panic!("the move ended: {r:?}"),
        () = fired => panic!("a child's unlock was applied before its parent's"),
        () = tokio::time::sleep(Duration::from_secs(600)) => {}
    }
    let refused = plain
        .delete(p(&["z", "p", "n"]))
        .await
        .expect_err("the child is still locked");
    assert_eq!(refused.kind(), ErrorKind::Locked, "{refused:?}");
    assert_eq!(
        Tree::new(table.clone())
            .resume()
            .await
            .expect("resume")
            .len(),
        1
    );
    plain
        .delete(p(&["z", "p", "n"]))
        .await
        .expect("delete after the resumed unlock");
    let report = plain
        .check()
        .grace(Duration::ZERO)
        .run()
        .await
        .expect("check");
    report
        .violations()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A crash in the unlock phase leaves a prefix of it applied: never a child unlocked under a
/// parent still locked, so no delete of the child prunes into the lock and leaves the parent,
/// unlocked later, naming nothing.
#[tokio::test(start_paused = true)]
async fn a_move_that_dies_in_its_unlock_phase_unlocks_no_child_before_its_parent() {
    let found = dies_between_unlocks_then_child_deleted().await;
    assert!(found.is_empty(), "{found:?}");
}

// ---------------------------------------------------------------------------------------------
// 6. DynamoDB's rule for items of transactions in flight.
//
// DynamoDB cancels a TransactWriteItems that includes an item which is part of another
// TransactWriteItems still in progress (reason `TransactionConflict` at that item), and
// refuses a PutItem, UpdateItem or DeleteItem of such an item (`TransactionConflictException`)
// ("Transaction conflict handling in DynamoDB"). Every transaction of a phase includes the
// ConditionCheck of the operation's intent row, and a lease renewal writes that row: with
// several transactions in flight they would meet on it, which is why a phase sends its
// transactions together only on lanes, each checking its own lane row. Neither the fake
// table nor the service model applies that rule (their requests apply one at a time); this
// layer does, with 10 ms a request.

pub(crate) struct InProgressState {
    inner: FakeTable,
    /// Items of the transactions in flight, with how many hold each.
    items: std::sync::Mutex<std::collections::HashMap<Key, usize>>,
    /// Requests refused for an item of a transaction in flight.
    pub(crate) conflicts: std::sync::atomic::AtomicUsize,
    /// Of those, transactions that met an intent record (not a lane row) in flight.
    pub(crate) on_record: std::sync::atomic::AtomicUsize,
}

/// A layer over `inner` applying DynamoDB's rule for items of transactions in flight.
#[derive(Clone)]
pub(crate) struct InProgress(pub(crate) Arc<InProgressState>);

impl InProgress {
    pub(crate) fn new(inner: FakeTable) -> Self {
        Self(Arc::new(InProgressState {
            inner,
            items: std::sync::Mutex::new(std::collections::HashMap::new()),
            conflicts: std::sync::atomic::AtomicUsize::new(0),
            on_record: std::sync::atomic::AtomicUsize::new(0),
        }))
    }
}

/// Whether `k` is an intent record's key (not a lane row's).
fn is_intent_record(k: &Key) -> bool {
    k.hash == format!("{SC}{SC}intents") && !k.range.contains(SC)
}

impl Storage for InProgress {
    async fn send(
        &self,
        request: dynatree::storage::Request,
    ) -> dynatree::Result<dynatree::storage::Response> {
        use dynatree::error::CancellationReason;
        use dynatree::storage::Request as R;
        let s = &self.0;
        let latency = Duration::from_millis(10);
        match &request {
            R::TransactWrite { actions, .. } => {
                let keys: Vec<Option<Key>> = actions.iter().map(TransactAction::key).collect();
                let refused: Option<Vec<CancellationReason>> = {
                    let mut items = s.items.lock().expect("not poisoned");
                    if keys.iter().flatten().any(|k| items.contains_key(k)) {
                        if keys
                            .iter()
                            .flatten()
                            .any(|k| items.contains_key(k) && is_intent_record(k))
                        {
                            s.on_record.fetch_add(1, Ordering::SeqCst);
                        }
                        Some(
                            keys.iter()
                                .map(|k| match k {
                                    Some(k) if items.contains_key(k) => {
                                        CancellationReason::new("TransactionConflict", None)
                                    }
                                    _ => CancellationReason::none(),
                                })
                                .collect(),
                        )
                    } else {
                        for k in keys.iter().flatten() {
                            *items.entry(k.clone()).or_default() += 1;
                        }
                        None
                    }
                };
                if let Some(reasons) = refused {
                    s.conflicts.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(latency).await;
                    return Err(dynatree::Error::transaction_canceled(reasons));
                }
                tokio::time::sleep(latency).await;
                let out = s.inner.send(request).await;
                let mut items = s.items.lock().expect("not poisoned");
                for k in keys.iter().flatten() {
                    if let Some(n) = items.get_mut(k) {
                        *n -= 1;
                        if *n == 0 {
                            items.remove(k);
                        }
                    }
                }
                out
            }
            R::PutItem { .. } | R::UpdateItem { .. } | R::DeleteItem { .. } => {
                let busy = {
                    let items = s.items.lock().expect("not poisoned");
                    request.keys().iter().any(|k| items.contains_key(k))
                };
                tokio::time::sleep(latency).await;
                if busy {
                    s.conflicts.fetch_add(1, Ordering::SeqCst);
                    return Err(dynatree::Error::new(
                        ErrorKind::Conflict,
                        "the item is part of a transaction in progress",
                    )
                    .with_service_code("TransactionConflictException"));
                }
                s.inner.send(request).await
            }
            _ => {
                tokio::time::sleep(latency).await;
                s.inner.send(request).await
            }
        }
    }
}

/// A move of `s` (600 children: levels of several slices) with `in_flight` requests at once
/// on a table that applies DynamoDB's rule: what the move returned, its requests by kind and
/// the requests refused for a conflict.
async fn move_on_dynamodbs_rule(
    in_flight: usize,
) -> (
    Result<(), String>,
    std::collections::BTreeMap<&'static str, u64>,
    usize,
) {
    let mut setup = vec![(p(&["s"]), 0)];
    setup.extend((0..600).map(|x| (p(&["s", &format!("x{x:03}")]), 1)));
    move_of_on_dynamodbs_rule(in_flight, setup).await
}

/// A move of `s` (its objects `setup`) with `in_flight` requests at once on a table that
/// applies DynamoDB's rule.
async fn move_of_on_dynamodbs_rule(
    in_flight: usize,
    setup: Vec<(P, u32)>,
) -> (
    Result<(), String>,
    std::collections::BTreeMap<&'static str, u64>,
    usize,
) {
    let table = FakeTable::new();
    let plain = Tree::new(table.clone());
    plain.create_table().await.expect("table");
    for (path, v) in setup {
        plain.put(path, &V { v }).await.expect("setup");
    }
    let layer = InProgress::new(table.clone());
    let tree = Tree::builder(layer.clone())
        .subtree_reads_in_flight(in_flight)
        .subtree_transactions_in_flight(in_flight)
        .build()
        .expect("a tree");
    table.reset_metrics();
    let out = tree
        .move_subtree(p(&["s"]), p(&["z"]))
        .await
        .map(|_| ())
        .map_err(|e| format!("{:?}: {e}", e.kind()));
    let by_op = table.metrics().requests_by_operation().clone();
    (out, by_op, layer.0.conflicts.load(Ordering::SeqCst))
}

/// One request at a time: no request meets a transaction of its own call in flight.
#[tokio::test(start_paused = true)]
async fn a_move_meets_no_conflict_of_its_own_on_dynamodbs_rule_one_request_in_flight() {
    let (out, _, conflicts) = move_on_dynamodbs_rule(1).await;
    assert_eq!(out, Ok(()));
    assert_eq!(conflicts, 0);
}
/// Sixteen reads and sixteen transactions in flight: the transactions of a phase, sent
/// together, each check their own lane row instead of the intent row, so they do not cancel
/// each other on DynamoDB's rule (`TransactionConflict`), and the lease renewals (writes of
/// the intent row) meet none of them. The move meets no conflict and sends the requests it
/// sends with one request in flight, plus its lanes (13 for the level of 600: one
/// transaction writes them, one deletes them with the record instead of a DeleteItem) and
/// one unlock transaction (the root is unlocked before its level).
#[tokio::test(start_paused = true)]
async fn a_move_meets_no_conflict_of_its_own_on_dynamodbs_rule_sixteen_in_flight() {
    let (one_out, mut one, _) = move_on_dynamodbs_rule(1).await;
    assert_eq!(one_out, Ok(()));
    let (out, sixteen, conflicts) = move_on_dynamodbs_rule(16).await;
    // The lanes' two, and the unlock of the destination's root apart from its level.
    *one.entry("TransactWriteItems").or_default() += 3;
    *one.entry("DeleteItem").or_default() -= 1;
    one.retain(|_, n| *n > 0);
    assert_eq!(
        (out, conflicts, sixteen),
        (Ok(()), 0, one),
        "(what the move returned, requests refused for a conflict, requests by kind)"
    );
}

/// A small source of three levels (`bushy`): its holds, one transaction a level, would meet
/// on the intent row too if they went together.
#[tokio::test(start_paused = true)]
async fn a_small_move_meets_no_conflict_of_its_own_on_dynamodbs_rule_sixteen_in_flight() {
    let (one_out, one, _) = move_of_on_dynamodbs_rule(1, bushy()).await;
    assert_eq!(one_out, Ok(()));
    let (out, sixteen, conflicts) = move_of_on_dynamodbs_rule(16, bushy()).await;
    assert_eq!(
        (out, conflicts, sixteen),
        (Ok(()), 0, one),
        "(what the move returned, requests refused for a conflict, requests by kind)"
    );
}
