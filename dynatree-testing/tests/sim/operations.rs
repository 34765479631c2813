//! Interleaving scenarios on the fake: concurrent `Tree` operations on overlapping paths, with
//! faults, explored by `dynatree_testing::sim` (bounded search, then random schedules). Each
//! test is one scenario; a failure prints the schedule's trace and a replay string:
//! `DYNATREE_SIM_REPLAY='<replay>' cargo test -p dynatree-testing --test sim
//! operations::<test name> -- --exact`.
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 1000 here, 1500 for triples).

use crate::acts::*;

/// A scenario of this module: the shared one (setup objects, then `acts` concurrently, each
/// checked against its model), with a budget of 1000 schedules.
fn scenario(name: &str, setup: &[(&[&str], u32)], acts: &[Act]) -> Sim<FakeTable> {
    crate::acts::scenario(name, setup, acts).schedules(1000)
}

/// The operation `i` returned `Ok` unless a fault hit it.
fn ok_unless_faulted(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| match &end.outcomes[i] {
        OpOutcome::Ok(_) | OpOutcome::Crashed => Ok(()),
        OpOutcome::Err(e) if matches!(e.kind(), ErrorKind::Backend | ErrorKind::Throttled) => {
            Ok(())
        }
        other => Err(format!("op{i} should have succeeded, got {other}")),
    }
}

/// The operation `i` returned `Ok` unless a fault hit it or another operation held its subtree.
fn ok_unless_faulted_or_locked(i: usize) -> impl Fn(&End<'_>) -> Result<(), String> {
    let ok = ok_unless_faulted(i);
    move |end| match &end.outcomes[i] {
        OpOutcome::Err(e) if e.kind() == ErrorKind::Locked => Ok(()),
        _ => ok(end),
    }
}

// ------------------------------------------------------------------------------------------
// Races of moves, subtree deletions and `resume` with writers, each once a defect.

/// A put deep under `x` while `x` is deleted: never Ok with the object unreachable.
#[test]
fn put_deep_under_a_subtree_being_deleted() {
    scenario(
        "put x/new/deep vs delete_subtree x",
        &[(&["x", "a"], 1)],
        &[
            Act::Put(p(&["x", "new", "deep"]), 2),
            Act::DeleteSubtree(p(&["x"])),
        ],
    )
    .run();
}

/// A put under an existing child of `x` while `x` is deleted.
#[test]
fn put_under_a_child_of_a_subtree_being_deleted() {
    scenario(
        "put x/b/new vs delete_subtree x",
        &[(&["x", "a"], 1), (&["x", "b"], 2), (&["x", "b", "c"], 3)],
        &[
            Act::Put(p(&["x", "b", "new"]), 4),
            Act::DeleteSubtree(p(&["x"])),
        ],
    )
    .run();
}

/// A move fails in its delete phase; a second move into the old source then returns
/// Ok, and `resume()` must not delete what it moved there.
#[test]
fn failed_move_then_move_into_its_source() {
    with_faults(scenario(
        "move src->dst (faulted) vs move p->src/p2",
        &[(&["src", "a"], 1), (&["p", "q1"], 2), (&["p", "q2"], 3)],
        &[
            Act::Move(p(&["src"]), p(&["dst"]), LinkPolicy::Report),
            Act::Move(p(&["p"]), p(&["src", "p2"]), LinkPolicy::Report),
        ],
    ))
    .run();
}

/// A `resume()` from a second process races the move it resumes, and a write at the
/// destination after the move must not be reverted by a stale copy.
#[test]
fn resume_races_the_move_it_resumes() {
    scenario(
        "move s->d vs resume vs put d/2=99",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Resume,
            Act::Put(p(&["d", "2"]), 99),
        ],
    )
    .schedules(1500)
    .run();
}

/// The pair of the one above: the move and a `resume()` from a second tree.
#[test]
fn move_vs_resume_of_its_intent_from_another_tree() {
    with_faults(scenario(
        "move s->d vs resume",
        &[(&["s", "1"], 1), (&["s", "2", "x"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Resume,
        ],
    ))
    .run();
}

/// A put at the destination during a move must not be overwritten by the copy.
#[test]
fn put_at_destination_during_move() {
    scenario(
        "move s->d vs put d/1=9",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["d", "1"]), 9),
        ],
    )
    .run();
}

/// A put of the destination node itself during a move.
#[test]
fn put_of_the_destination_node_during_move() {
    scenario(
        "move s->d vs put d=9",
        &[(&["s", "1"], 1)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["d"]), 9),
        ],
    )
    .run();
}

/// A move refused (Locked: its source is inside a moving subtree) leaves no intent
/// or lock, and `resume()` does not carry it out.
#[test]
fn refused_move_leaves_nothing() {
    scenario(
        "move a->b vs move a/x->c",
        &[(&["a", "x", "1"], 1), (&["a", "y"], 2)],
        &[
            Act::Move(p(&["a"]), p(&["b"]), LinkPolicy::Report),
            Act::Move(p(&["a", "x"]), p(&["c"]), LinkPolicy::Report),
        ],
    )
    .run();
}

/// A move refused because its destination is taken meanwhile.
#[test]
fn move_refused_at_taken_destination() {
    scenario(
        "move a->d vs put d/z",
        &[(&["a", "1"], 1)],
        &[
            Act::Move(p(&["a"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["d", "z"]), 2),
            Act::Resume,
        ],
    )
    .run();
}

/// A writer meeting a removal mark left by a dead process waits for the removal
/// lease (paused time: no real waiting), it does not fail with Conflict.
#[test]
fn writer_meets_mark_of_dead_deleter() {
    scenario(
        "delete x/a (may crash) vs put x/b",
        &[(&["x", "a"], 1)],
        &[Act::Delete(p(&["x", "a"])), Act::Put(p(&["x", "b"]), 2)],
    )
    .faults(1, crashes())
    // The deletion holds its subtree locked until it ends, or until `resume()` finishes it
    // after its process died: a put under it is refused (`Locked`), never lost.
    .check(ok_unless_faulted_or_locked(1))
    .run();
}

/// The same with delete_subtree: its marks outlive a crash, and a writer under the subtree
/// waits them out.
#[test]
fn writer_meets_marks_of_dead_delete_subtree() {
    scenario(
        "delete_subtree x (may crash) vs put x/a/b",
        &[(&["x", "a"], 1), (&["x", "c"], 2)],
        &[
            Act::DeleteSubtree(p(&["x"])),
            Act::Put(p(&["x", "a", "b"]), 3),
        ],
    )
    .faults(1, crashes())
    // The deletion holds its subtree locked until it ends, or until `resume()` finishes it
    // after its process died: a put under it is refused (`Locked`), never lost.
    .check(ok_unless_faulted_or_locked(1))
    .run();
}

// ------------------------------------------------------------------------------------------
// Pairs on overlapping paths.

#[test]
fn put_vs_put_same_node() {
    with_faults(scenario(
        "put a/b=1 vs put a/b=2",
        &[],
        &[Act::Put(p(&["a", "b"]), 1), Act::Put(p(&["a", "b"]), 2)],
    ))
    .run();
}

#[test]
fn put_vs_delete_same_node() {
    with_faults(scenario(
        "put a/b vs delete a/b",
        &[(&["a", "b"], 1)],
        &[Act::Put(p(&["a", "b"]), 2), Act::Delete(p(&["a", "b"]))],
    ))
    .run();
}

#[test]
fn put_vs_delete_sibling_prunes_parent() {
    with_faults(scenario(
        "put a/c vs delete a/b (prunes a)",
        &[(&["a", "b"], 1)],
        &[Act::Put(p(&["a", "c"]), 2), Act::Delete(p(&["a", "b"]))],
    ))
    .run();
}

#[test]
fn put_deep_vs_delete_ancestor_object() {
    with_faults(scenario(
        "put a/b/c vs delete a",
        &[(&["a"], 1)],
        &[Act::Put(p(&["a", "b", "c"]), 2), Act::Delete(p(&["a"]))],
    ))
    .run();
}

#[test]
fn create_vs_create_same_node() {
    with_faults(scenario(
        "create d/n=1 vs create d/n=2",
        &[],
        &[Act::Create("d", "n", 1), Act::Create("d", "n", 2)],
    ))
    .run();
}

#[test]
fn update_vs_delete_same_node() {
    with_faults(scenario(
        "update d/n vs delete d/n",
        &[],
        &[
            Act::Create("d", "n", 1),
            Act::Update("d", "n", 2),
            Act::Delete(p(&["d", "n"])),
        ],
    ))
    .run();
}

#[test]
fn put_link_vs_move_of_its_target() {
    scenario(
        "put_link l->s/1 vs move s->d Rewrite",
        &[(&["s", "1"], 1)],
        &[
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    )
    .run();
}

#[test]
fn put_vs_delete_node_refuse() {
    with_faults(scenario(
        "put a/b/new vs delete_node a/b Refuse",
        &[(&["a", "b"], 1)],
        &[
            Act::Put(p(&["a", "b", "new"]), 2),
            Act::DeleteNode(p(&["a", "b"]), OnChildren::Refuse),
        ],
    ))
    .run();
}

#[test]
fn put_vs_delete_node_reparent() {
    scenario(
        "put a/b/new vs delete_node a/b Reparent",
        &[(&["a", "b"], 1), (&["a", "b", "c"], 2)],
        &[
            Act::Put(p(&["a", "b", "new"]), 3),
            Act::DeleteNode(p(&["a", "b"]), OnChildren::Reparent),
        ],
    )
    .run();
}

#[test]
fn put_vs_delete_node_recursive() {
    with_faults(scenario(
        "put a/b/new vs delete_node a Recursive",
        &[(&["a"], 1), (&["a", "b"], 2)],
        &[
            Act::Put(p(&["a", "b", "new"]), 3),
            Act::DeleteNode(p(&["a"]), OnChildren::Recursive),
        ],
    ))
    .run();
}

#[test]
fn put_under_source_vs_move() {
    scenario(
        "put s/new vs move s->d",
        &[(&["s", "1"], 1)],
        &[
            Act::Put(p(&["s", "new"]), 2),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn move_with_every_fault() {
    with_faults(scenario(
        "move s->d alone, faults",
        &[(&["s", "1"], 1), (&["s", "2", "3"], 2)],
        &[Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite)],
    ))
    .schedules(1000)
    .run();
}

#[test]
fn move_vs_delete_subtree_of_source() {
    scenario(
        "move s->d vs delete_subtree s",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::DeleteSubtree(p(&["s"])),
        ],
    )
    .run();
}

#[test]
fn move_vs_move_same_source() {
    scenario(
        "move s->d1 vs move s->d2",
        &[(&["s", "1"], 1)],
        &[
            Act::Move(p(&["s"]), p(&["d1"]), LinkPolicy::Report),
            Act::Move(p(&["s"]), p(&["d2"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn move_source_vs_destination_chain() {
    scenario(
        "move a->b vs move b->c",
        &[(&["a", "1"], 1), (&["b", "2"], 2)],
        &[
            Act::Move(p(&["a"]), p(&["b2"]), LinkPolicy::Report),
            Act::Move(p(&["b"]), p(&["a", "b"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn moves_into_each_others_subtrees() {
    scenario(
        "move a->b/a vs move b->a/b",
        &[(&["a", "1"], 1), (&["b", "2"], 2)],
        &[
            Act::Move(p(&["a"]), p(&["b", "a"]), LinkPolicy::Report),
            Act::Move(p(&["b"]), p(&["a", "b"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn copy_vs_put_under_source() {
    scenario(
        "copy s->d vs put s/new",
        &[(&["s", "1"], 1)],
        &[
            Act::Copy(p(&["s"]), p(&["d"])),
            Act::Put(p(&["s", "new"]), 2),
        ],
    )
    // A put under the source during a copy may or may not be copied: no serial order
    // describes "copied without the put's object" when the put came first and vice versa, so
    // the serial check holds exactly when the copy is all-or-nothing per object.
    .run();
}

#[test]
fn move_ignore_vs_put_under_source_with_faults() {
    with_faults(scenario(
        "move s->d Ignore vs put s/n",
        &[(&["s", "1"], 1)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Ignore),
            Act::Put(p(&["s", "n"]), 2),
        ],
    ))
    .run();
}

#[test]
fn put_link_vs_delete_subtree_of_its_node() {
    with_faults(scenario(
        "put_link x/l->y vs delete_subtree x",
        &[(&["x", "a"], 1), (&["y"], 2)],
        &[
            Act::PutLink(p(&["x", "l"]), p(&["y"])),
            Act::DeleteSubtree(p(&["x"])),
        ],
    ))
    .run();
}

#[test]
fn update_vs_update_same_node() {
    scenario(
        "update d/n=2 vs update d/n=3",
        &[],
        &[
            Act::Create("d", "n", 1),
            Act::Update("d", "n", 2),
            Act::Update("d", "n", 3),
        ],
    )
    .run();
}

#[test]
fn copy_vs_copy_into_each_other() {
    scenario(
        "copy a->b/a vs copy b->a/b",
        &[(&["a", "1"], 1), (&["b", "2"], 2)],
        &[
            Act::Copy(p(&["a"]), p(&["b", "a"])),
            Act::Copy(p(&["b"]), p(&["a", "b"])),
        ],
    )
    .run();
}

#[test]
fn delete_node_recursive_vs_move_into_it_vs_resume() {
    with_faults(scenario(
        "delete_node x Recursive vs move s->x/s vs resume",
        &[(&["x", "a"], 1), (&["s", "1"], 2)],
        &[
            Act::DeleteNode(p(&["x"]), OnChildren::Recursive),
            Act::Move(p(&["s"]), p(&["x", "s"]), LinkPolicy::Report),
            Act::Resume,
        ],
    ))
    .schedules(600)
    .run();
}

#[test]
fn copy_vs_delete_subtree_of_destination_parent() {
    with_faults(scenario(
        "copy s->d/c vs delete_subtree d",
        &[(&["s", "1"], 1), (&["d", "x"], 2)],
        &[
            Act::Copy(p(&["s"]), p(&["d", "c"])),
            Act::DeleteSubtree(p(&["d"])),
        ],
    ))
    .run();
}

#[test]
fn delete_subtree_vs_delete_subtree_nested() {
    with_faults(scenario(
        "delete_subtree a vs delete_subtree a/b",
        &[(&["a", "b", "c"], 1), (&["a", "d"], 2)],
        &[
            Act::DeleteSubtree(p(&["a"])),
            Act::DeleteSubtree(p(&["a", "b"])),
        ],
    ))
    .run();
}

// ------------------------------------------------------------------------------------------
// Triples.

#[test]
fn triple_put_delete_subtree_move() {
    scenario(
        "put x/b/new vs delete_subtree x/a vs move x/b->y",
        &[(&["x", "a", "1"], 1), (&["x", "b", "2"], 2)],
        &[
            Act::Put(p(&["x", "b", "new"]), 3),
            Act::DeleteSubtree(p(&["x", "a"])),
            Act::Move(p(&["x", "b"]), p(&["y"]), LinkPolicy::Report),
        ],
    )
    .schedules(1500)
    .run();
}

#[test]
fn triple_move_resume_delete_subtree_with_faults() {
    with_faults(scenario(
        "move s->d vs resume vs delete_subtree d",
        &[(&["s", "1"], 1)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Resume,
            Act::DeleteSubtree(p(&["d"])),
        ],
    ))
    .schedules(1500)
    .run();
}

// ------------------------------------------------------------------------------------------
// The simulator itself.

/// A wrong model is caught, and the printed replay string reruns exactly that schedule.
#[test]
fn sim_catches_a_wrong_model_and_replays_it() {
    let sim = || {
        Sim::new("wrong model", FakeTable::new)
            .schedules(50)
            .op(
                "put a=1",
                |t| async move { t.put(["a"], &V { v: 1 }).await },
            )
            .model(|m| m.put(["a"], &V { v: 1 }))
            .op(
                "put a=2",
                |t| async move { t.put(["a"], &V { v: 2 }).await },
            )
            // Wrong on purpose: claims the second put never happens.
            .model(|_| Ok(()))
    };
    let failure = sim().explore().unwrap_err();
    assert!(failure.message.contains("no serial order"), "{failure}");
    let again = sim().replay(&failure.replay).unwrap_err();
    assert_eq!(again.trace, failure.trace);
    assert_eq!(again.replay, failure.replay);
}

/// A panic in an operation is a failure, not a crash of the test.
#[test]
fn sim_reports_a_panicking_operation() {
    let failure = Sim::new("panics", FakeTable::new)
        .schedules(5)
        .op("put then panic", |t| async move {
            t.put(["a"], &V { v: 1 }).await?;
            if t.get::<V>(["a"]).await?.is_some() {
                panic!("boom");
            }
            Ok(())
        })
        .explore()
        .unwrap_err();
    assert!(failure.message.contains("panicked: boom"), "{failure}");
}

/// Exploration is exhaustive for a small scenario and counts its schedules: two puts of one
/// request each interleave in 2 orders; with one fault (3 kinds that fit a write, 5 in all)
/// per schedule there are more.
#[test]
fn sim_explores_small_scenarios_exhaustively() {
    let report = Sim::new("two puts", FakeTable::new)
        .schedules(10_000)
        .preemptions(None)
        .op("put a", |t| async move { t.put(["a"], &V { v: 1 }).await })
        .op("put b", |t| async move { t.put(["b"], &V { v: 2 }).await })
        .explore()
        .unwrap();
    assert!(report.exhaustive);
    assert!(report.schedules >= 2 && report.schedules < 100, "{report}");
}

/// A tree whose policy tries each request once: no retry of any loop.
fn one_attempt_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .retry_policy(dynatree::RetryPolicy::new(
            1,
            Duration::ZERO,
            Duration::ZERO,
        ))
        .build()
        .expect("a tree with one attempt per request")
}

/// A Rewrite move whose policy allows no second round of rewriting: a link it finds held by
/// another move is moved by that move, old target and all. The move looks once more before
/// it reports success; a link still pointing into its source fails it (left recorded, for
/// `resume`) instead of being left behind under an `Ok`.
#[test]
fn a_rewrite_move_without_retries_reports_success_only_with_no_link_left_into_its_source() {
    scenario_with(
        "move s->d Rewrite vs move x->y Report (link x/l->s/1), one attempt per request",
        one_attempt_tree,
        paths(&[(&["s", "1"], 1), (&["x", "o"], 2)]),
        vec![(p(&["x", "l"]), p(&["s", "1"]))],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::Move(p(&["x"]), p(&["y"]), LinkPolicy::Report),
        ],
    )
    .schedules(300)
    .run();
}

/// A re-parenting whose child move runs out of link-rewrite rounds fails with `Unfinished`
/// (documented: "`resume`, or the same call again, finishes it"). The same call again joins
/// the recorded re-parenting, finds no child left under the node (the child's objects were
/// moved before its rewrite phase) and returns `Ok`, while the child move stays recorded in
/// its rewrite phase, with its link still pointing into the old child: a child move left
/// recorded outside its re-parenting, under an `Ok`.
#[test]
fn a_reparent_called_again_after_unfinished_finishes_its_child_move() {
    scenario_base(
        "reparent s (again after Unfinished) vs move x->y Report (link x/l->s/c/1), one attempt per request",
        one_attempt_tree,
        paths(&[(&["s", "c", "1"], 1), (&["x", "o"], 2)]),
        vec![(p(&["x", "l"]), p(&["s", "c", "1"]))],
    )
    .op("reparent s, again after Unfinished", |t| async move {
        match t.delete_node(["s"], OnChildren::Reparent).await {
            Err(e) if e.kind() == ErrorKind::Unfinished => {
                t.delete_node(["s"], OnChildren::Reparent).await?;
                let s = dynatree::Path::new(["s"]).expect("a path");
                let left: Vec<_> = t
                    .pending()
                    .await?
                    .into_iter()
                    .filter(|i| i.from.starts_with(&s))
                    .collect();
                assert!(
                    left.is_empty(),
                    "the same call again returned Ok with {left:?} still recorded"
                );
                Ok("second call".to_owned())
            }
            other => other.map(|()| String::new()),
        }
    })
    .op("move x->y Report", |t| async move {
        t.move_subtree_with(["x"], ["y"], LinkPolicy::Report)
            .await
            .map(|r| format!("{} objects", r.objects))
    })
    .schedules(600)
    .run();
}

/// A Rewrite move with one attempt per request, no other move running: a link put into its
/// source while it runs, whose new target would break the key limit under the destination,
/// is documented to be "left pointing at the old place" (the move still succeeds). But the
/// move's one round rewrote the other link, so its rounds are out, and the last look finds
/// the limit-breaking link (which no round can ever rewrite): the move fails with
/// `Unfinished`, documented only for links "carried away by other moves", although `resume`
/// then finishes it with nothing more to do.
#[test]
fn a_rewrite_move_is_not_unfinished_for_a_link_it_may_not_rewrite() {
    let (a, b) = ("a".repeat(1000), "b".repeat(1000));
    let dest = "d".repeat(60);
    scenario_base(
        "move s->d... Rewrite vs put_link x/m->s/a../b.. (too long under d...), one attempt per request",
        one_attempt_tree,
        paths(&[(&["s", "1"], 1)]),
        vec![(p(&["x", "l"]), p(&["s", "1"]))],
    )
    .op("move s->d... Rewrite", move |t| {
        let dest = dest.clone();
        async move {
            match t.move_subtree_with(["s"], [dest.as_str()], LinkPolicy::Rewrite).await {
                Err(e) if e.kind() == ErrorKind::Unfinished => {
                    panic!("Unfinished with no other move running: {e}")
                }
                other => other.map(|r| format!("{} objects", r.objects)),
            }
        }
    })
    .op("put_link x/m -> s/a../b..", move |t| {
        let target = vec!["s".to_owned(), a.clone(), b.clone()];
        async move { t.put_link(["x", "m"], target).await.map(|()| String::new()) }
    })
    .schedules(600)
    .run();
}
