//! Schedules and faults aimed at the multi-request protocols (moves, copies, subtree
//! deletions, re-parenting, lease takeover, path index): DynamoDB's limits at a move's
//! destination, the path index kept by moves, copies and re-parentings against writers, link
//! rewrites, refusals, rollbacks and retries, triples, and lease takeovers.
//!
//! Replay one: `DYNATREE_SIM_REPLAY='<replay>' cargo test -p dynatree-testing --test sim
//! protocols::limits_and_takeovers::<test name> -- --exact --nocapture`. Budget:
//! `DYNATREE_SIM_SCHEDULES` (default small here, so that the whole module stays under a
//! minute; use 3000 locally).

use std::cell::Cell;
use std::rc::Rc;

use crate::acts::*;
use futures::TryStreamExt;

/// Every link's target is a path DynamoDB can address (object key at most 2048 bytes).
fn link_targets_valid(end: &End<'_>) -> Result<(), String> {
    for (path, v) in end.model.objects() {
        if let Stored::Link(t) = v {
            let bytes: usize = t.iter().map(|c| c.len() + SC.len_utf8()).sum();
            if bytes > 2048 {
                return Err(format!(
                    "link {} points at a target of {bytes} bytes (over 2048): it can never be read",
                    short(path)
                ));
            }
        }
    }
    Ok(())
}

/// Op `i` ended in a refusal of kind `kinds` (or was hit by a fault).
fn refused_with(i: usize, kinds: &'static [ErrorKind]) -> impl Fn(&End<'_>) -> Result<(), String> {
    move |end| match &end.outcomes[i] {
        OpOutcome::Crashed => Ok(()),
        OpOutcome::Err(e) if kinds.contains(&e.kind()) || transient(e.kind()) => Ok(()),
        other => Err(format!(
            "op{i} should have been refused with one of {kinds:?}, got {other}"
        )),
    }
}

// ------------------------------------------------------------------------------------------
// Limits: a move whose destination (or rewritten link target) would break DynamoDB's limits.

/// A component of `n` bytes.
fn long(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// Without a path index: the destination's object key would be over 2048 bytes. Refused with
/// `InvalidPath`, nothing left behind, and a concurrent `resume()` does not carry it out.
#[test]
fn limit_move_to_too_long_destination_vs_resume() {
    // Source s/A/B: 2+1+2+1020+2+1010 = 2037 bytes. Destination D(40)/A/B: 2076 bytes.
    let a = long('a', 1020);
    let b = long('b', 1010);
    let dest = long('d', 40);
    let setup = vec![
        (vec!["s".into(), a.clone()], 1),
        (vec!["s".into(), a, b], 2),
    ];
    let sim = scenario_with(
        "move s->D(long) vs resume",
        plain_tree,
        setup,
        Vec::new(),
        &[
            Act::Move(p(&["s"]), vec![dest], LinkPolicy::Report),
            Act::Resume,
        ],
    );
    // The model knows no limits: check the refusal ourselves, the table by the checker.
    with_faults(sim)
        .refusals([
            ErrorKind::Locked,
            ErrorKind::Conflict,
            ErrorKind::InvalidPath,
        ])
        .check(refused_with(0, &[ErrorKind::InvalidPath]))
        .run();
}

/// With a path index (depth 1): the index's range key is the full path, and a GSI range key
/// is at most 1024 bytes. A move from a path of under 1024 bytes to one of over 1024 bytes
/// (still under the 2048-byte table limit) must be refused like any other limit, and leave
/// nothing behind; a concurrent `resume()` must not be stuck on it either.
#[test]
fn limit_pix_move_to_destination_over_index_range_limit() {
    // Source s/A: 2+1+2+1000 = 1005 bytes; destination D(40)/A: 1044 bytes (> 1024).
    let a = long('a', 1000);
    let dest = long('d', 40);
    let setup = vec![(vec!["s".into(), a], 1)];
    let sim = scenario_with(
        "pix: move s->D(long) vs resume",
        pix_tree,
        setup,
        Vec::new(),
        &[
            Act::Move(p(&["s"]), vec![dest], LinkPolicy::Report),
            Act::Resume,
        ],
    );
    sim.refusals([
        ErrorKind::Locked,
        ErrorKind::Conflict,
        ErrorKind::InvalidPath,
        ErrorKind::Validation,
    ])
    .check(refused_with(
        0,
        &[ErrorKind::InvalidPath, ErrorKind::ItemTooLarge],
    ))
    .run();
}

/// A link into the subtree whose target (not an existing node: link targets need not exist)
/// would be over 2048 bytes after the rewrite. moves.md: "every rewritten link target is
/// checked (InvalidPath ...)": the move must be refused, and the link left as it was.
#[test]
fn limit_rewrite_of_link_to_too_long_target() {
    // Target s/A/B: 2+1+2+1020+2+1010 = 2037 bytes; rewritten D(40)/A/B: 2076 bytes.
    let a = long('a', 1020);
    let b = long('b', 1010);
    let dest = long('d', 40);
    let sim = scenario_with(
        "move s->D Rewrite, link l->s/A/B (no object there)",
        plain_tree,
        vec![(p(&["s", "1"]), 1)],
        vec![(p(&["l"]), vec!["s".into(), a, b])],
        &[
            Act::Move(p(&["s"]), vec![dest], LinkPolicy::Rewrite),
            Act::Resume,
        ],
    );
    sim.refusals([
        ErrorKind::Locked,
        ErrorKind::Conflict,
        ErrorKind::InvalidPath,
    ])
    .check(link_targets_valid)
    .check(refused_with(0, &[ErrorKind::InvalidPath]))
    .run();
}

/// The same link created while the move runs (after its validation): the rewrite must still
/// not write a target nobody can read.
#[test]
fn limit_link_created_during_rewrite_move() {
    let a = long('a', 1020);
    let b = long('b', 1010);
    let dest = long('d', 40);
    let sim = scenario_with(
        "move s->D Rewrite vs put_link l->s/A/B",
        plain_tree,
        vec![(p(&["s", "1"]), 1)],
        Vec::new(),
        &[
            Act::Move(p(&["s"]), vec![dest], LinkPolicy::Rewrite),
            Act::PutLink(p(&["l"]), vec!["s".into(), a, b]),
        ],
    );
    sim.refusals([
        ErrorKind::Locked,
        ErrorKind::Conflict,
        ErrorKind::InvalidPath,
    ])
    .check(link_targets_valid)
    .run();
}

// ------------------------------------------------------------------------------------------
// Path index: moves keep the index attributes of every row they write.

/// A move with `Rewrite` rewrites a link elsewhere in the tree: the rewritten link row must
/// keep its path index attributes (else `descendants` by the index loses the link).
#[test]
fn pix_move_rewrite_keeps_links_in_the_index() {
    let sim = scenario_with(
        "pix: move s->d Rewrite, link l/x->s/1",
        pix_tree,
        vec![(p(&["s", "1"]), 1), (p(&["s", "2", "3"]), 2)],
        vec![(p(&["l", "x"]), p(&["s", "1"]))],
        &[Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite)],
    );
    sim.check(pix_attrs_match).run();
}

/// Moves and puts with a path index, with faults: every object row carries its own path in
/// the index attributes whatever the schedule.
#[test]
fn pix_move_vs_put_vs_resume_with_faults() {
    let sim = scenario_with(
        "pix: move s->d vs put s/1/new vs resume",
        pix_tree,
        vec![(p(&["s", "1"]), 1), (p(&["s", "2", "3"]), 2)],
        Vec::new(),
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["s", "1", "new"]), 3),
            Act::Resume,
        ],
    );
    with_faults(sim).check(pix_attrs_match).run();
}

/// Plain test (no interleaving): after moves, copies and a re-parent, `descendants` by the
/// path index agrees with the walk for every prefix.
#[test]
fn pix_descendants_by_index_agree_with_the_walk_after_moves() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let tree = Tree::builder(FakeTable::new())
            .path_index(1)
            .build()
            .unwrap();
        tree.create_table().await.unwrap();
        for q in [
            &["s", "1"][..],
            &["s", "2", "3"],
            &["s", "2"],
            &["o", "a", "b"],
            &["o", "a"],
        ] {
            tree.put(q, &V { v: 1 }).await.unwrap();
        }
        tree.put_link(["l", "x"], ["s", "2", "3"]).await.unwrap();
        tree.put_link(["s", "lnk"], ["s", "1"]).await.unwrap();
        tree.move_subtree_with(["s"], ["d"], LinkPolicy::Rewrite)
            .await
            .unwrap();
        tree.copy_subtree(["d"], ["c"]).await.unwrap();
        tree.delete_node(["o", "a"], OnChildren::Reparent)
            .await
            .unwrap();
        for prefix in [&["d"][..], &["c"], &["l"], &["o"], &["s"]] {
            let walk: Vec<String> = tree
                .descendants(prefix)
                .strategy(dynatree::Strategy::Walk)
                .items()
                .map_ok(|d| d.path.to_string())
                .try_collect()
                .await
                .unwrap();
            let mut by_index: Vec<String> = tree
                .descendants(prefix)
                .strategy(dynatree::Strategy::PathIndex)
                .items()
                .map_ok(|d| d.path.to_string())
                .try_collect()
                .await
                .unwrap();
            let mut walk_sorted = walk.clone();
            walk_sorted.sort();
            by_index.sort();
            assert_eq!(by_index, walk_sorted, "descendants of {prefix:?}");
        }
    });
}

// ------------------------------------------------------------------------------------------
// Copies against writers and removals of their source and destination.

#[test]
fn copy_vs_delete_subtree_of_its_source() {
    scenario(
        "copy s->d vs delete_subtree s",
        &[(&["s", "a"], 1), (&["s", "a", "b"], 2), (&["s", "c"], 3)],
        &[
            Act::Copy(p(&["s"]), p(&["d"])),
            Act::DeleteSubtree(p(&["s"])),
        ],
    )
    .run();
}

#[test]
fn copy_vs_move_of_its_source() {
    scenario(
        "copy s->d vs move s->m",
        &[(&["s", "a"], 1), (&["s", "a", "b"], 2)],
        &[
            Act::Copy(p(&["s"]), p(&["d"])),
            Act::Move(p(&["s"]), p(&["m"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn copy_vs_put_at_destination() {
    with_faults(scenario(
        "copy s->d vs put d/1=9",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[Act::Copy(p(&["s"]), p(&["d"])), Act::Put(p(&["d", "1"]), 9)],
    ))
    .run();
}

#[test]
fn copy_vs_put_at_source_and_destination() {
    scenario(
        "copy s->d vs put s/1=7 vs put d=9",
        &[(&["s", "1"], 1), (&["s", "2", "3"], 2)],
        &[
            Act::Copy(p(&["s"]), p(&["d"])),
            Act::Put(p(&["s", "1"]), 7),
            Act::Put(p(&["d"]), 9),
        ],
    )
    .schedules(300)
    .run();
}

#[test]
fn copy_vs_resume_with_faults() {
    with_faults(scenario(
        "copy s->d vs resume",
        &[(&["s", "1"], 1), (&["s", "2", "3"], 2)],
        &[Act::Copy(p(&["s"]), p(&["d"])), Act::Resume],
    ))
    .run();
}

// ------------------------------------------------------------------------------------------
// Re-parenting against puts and moves.

#[test]
fn reparent_vs_put_at_parent_name() {
    scenario(
        "delete_node a/b Reparent vs put a/c",
        &[
            (&["a", "b"], 1),
            (&["a", "b", "c"], 2),
            (&["a", "b", "e"], 3),
        ],
        &[
            Act::DeleteNode(p(&["a", "b"]), OnChildren::Reparent),
            Act::Put(p(&["a", "c"]), 9),
        ],
    )
    .run();
}

#[test]
fn reparent_vs_move_of_a_child() {
    scenario(
        "delete_node a/b Reparent (x2) vs move a/b/c->z",
        &[
            (&["a", "b"], 1),
            (&["a", "b", "c"], 2),
            (&["a", "b", "e"], 3),
        ],
        &[
            Act::ReparentTwiceUnlessRefused(p(&["a", "b"])),
            Act::Move(p(&["a", "b", "c"]), p(&["z"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn reparent_vs_delete_subtree_of_a_child() {
    scenario(
        "delete_node a/b Reparent (x2) vs delete_subtree a/b/c",
        &[
            (&["a", "b"], 1),
            (&["a", "b", "c", "d"], 2),
            (&["a", "b", "e"], 3),
        ],
        &[
            Act::ReparentTwiceUnlessRefused(p(&["a", "b"])),
            Act::DeleteSubtree(p(&["a", "b", "c"])),
        ],
    )
    .run();
}

#[test]
fn reparent_vs_move_of_the_node_itself() {
    scenario(
        "delete_node a/b Reparent (x2) vs move a/b->z",
        &[(&["a", "b"], 1), (&["a", "b", "c"], 2)],
        &[
            Act::ReparentTwiceUnlessRefused(p(&["a", "b"])),
            Act::Move(p(&["a", "b"]), p(&["z"]), LinkPolicy::Report),
        ],
    )
    .run();
}

#[test]
fn reparent_with_links_vs_put_link() {
    scenario_with(
        "delete_node a/b Reparent (x2) vs put_link l->a/b/c/x",
        plain_tree,
        vec![(p(&["a", "b"]), 1), (p(&["a", "b", "c", "x"]), 2)],
        vec![(p(&["m"]), p(&["a", "b", "c"]))],
        &[
            Act::ReparentTwiceUnlessRefused(p(&["a", "b"])),
            Act::PutLink(p(&["l"]), p(&["a", "b", "c", "x"])),
        ],
    )
    .run();
}

// ------------------------------------------------------------------------------------------
// Links rewritten by a move against writes of those links.

#[test]
fn rewrite_vs_put_link_elsewhere() {
    scenario_with(
        "move s->d Rewrite vs put_link l->o",
        plain_tree,
        vec![(p(&["s", "1"]), 1), (p(&["o"]), 2)],
        vec![(p(&["l"]), p(&["s", "1"]))],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::PutLink(p(&["l"]), p(&["o"])),
        ],
    )
    .run();
}

#[test]
fn rewrite_vs_delete_of_the_link() {
    scenario_with(
        "move s->d Rewrite vs delete l",
        plain_tree,
        vec![(p(&["s", "1"]), 1)],
        vec![(p(&["l"]), p(&["s", "1"]))],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::Delete(p(&["l"])),
        ],
    )
    .run();
}

#[test]
fn rewrite_vs_resume_vs_put_link_with_faults() {
    with_faults(scenario_with(
        "move s->d Rewrite vs resume vs put_link l->o",
        plain_tree,
        vec![(p(&["s", "1"]), 1), (p(&["o"]), 2)],
        vec![(p(&["l"]), p(&["s", "1"]))],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::Resume,
            Act::PutLink(p(&["l"]), p(&["o"])),
        ],
    ))
    .schedules(300)
    .run();
}

// ------------------------------------------------------------------------------------------
// Refusals, rollbacks, retries.

/// A move refused because its destination was taken meanwhile, with a fault in its rollback;
/// the client calls it again. The second call must not report success for a move that did
/// not happen.
#[test]
fn retried_move_after_faulted_rollback() {
    with_faults(scenario(
        "move s->d (retried) vs put d/z",
        &[(&["s", "1"], 1)],
        &[
            Act::MoveRetried(p(&["s"]), p(&["d"])),
            Act::Put(p(&["d", "z"]), 2),
        ],
    ))
    .schedules(400)
    .run();
}

/// Two processes make the same move call: one applies it; the other joins its recorded
/// operation (both return Ok) or comes after it or loses the race (NotFound, AlreadyExists,
/// Locked). Either way the move is applied exactly once.
#[test]
fn same_move_from_two_processes() {
    scenario(
        "move s->d vs move s->d",
        &[(&["s", "1"], 1)],
        &[
            Act::MoveJoiningOrAfter(p(&["s"]), p(&["d"])),
            Act::MoveJoiningOrAfter(p(&["s"]), p(&["d"])),
        ],
    )
    .run();
}

/// Crashes in the rollback of a refused move (two faults: one can hit the refusal's cause, the
/// other the rollback), then recovery.
#[test]
fn crash_during_rollback_of_refused_move() {
    scenario(
        "move a->d vs put d/z (two crashes)",
        &[(&["a", "1"], 1), (&["a", "2", "3"], 2)],
        &[
            Act::Move(p(&["a"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["d", "z"]), 2),
        ],
    )
    .faults(2, crashes_and_failures())
    .schedules(400)
    .run();
}

/// Faults hit the resume as well as the move: two resumes from other processes.
#[test]
fn move_vs_two_resumes_with_faults() {
    with_faults(scenario(
        "move s->d vs resume vs resume",
        &[(&["s", "1"], 1), (&["s", "2", "3"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Resume,
            Act::Resume,
        ],
    ))
    .schedules(300)
    .run();
}

// ------------------------------------------------------------------------------------------
// Triples.

#[test]
fn triple_move_put_destination_resume() {
    with_faults(scenario(
        "move s->d vs put d/new vs resume",
        &[(&["s", "1"], 1), (&["s", "2", "3"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["d", "new"]), 9),
            Act::Resume,
        ],
    ))
    .schedules(300)
    .run();
}

#[test]
fn triple_delete_subtree_move_into_it_put() {
    scenario(
        "delete_subtree x vs move s->x/y vs put x/y/z",
        &[(&["x", "a"], 1), (&["s", "1"], 2)],
        &[
            Act::DeleteSubtree(p(&["x"])),
            Act::Move(p(&["s"]), p(&["x", "y"]), LinkPolicy::Report),
            Act::Put(p(&["x", "y", "z"]), 3),
        ],
    )
    .schedules(300)
    .run();
}

#[test]
fn triple_copy_delete_subtree_source_put_source() {
    scenario(
        "copy s->d vs delete_subtree s vs put s/a/n",
        &[(&["s", "a"], 1), (&["s", "c"], 3)],
        &[
            Act::Copy(p(&["s"]), p(&["d"])),
            Act::DeleteSubtree(p(&["s"])),
            Act::Put(p(&["s", "a", "n"]), 4),
        ],
    )
    .schedules(300)
    .run();
}

// ------------------------------------------------------------------------------------------
// Lease takeover: a slow owner whose lease ran out while a resume() elsewhere took over.

/// Time may pass at any point (the owner is slow); the resume takes over once the lease ran
/// out, and the slow owner must write nothing after that.
#[test]
fn lease_takeover_move_vs_resume() {
    with_faults(scenario_with(
        "short lease: move s->d vs resume (time passes)",
        short_lease_tree,
        vec![(p(&["s", "1"]), 1), (p(&["s", "2", "3"]), 2)],
        Vec::new(),
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Resume,
        ],
    ))
    .allow_wait(true)
    .schedules(300)
    .run();
}

#[test]
fn lease_takeover_delete_subtree_vs_resume_vs_put() {
    scenario_with(
        "short lease: delete_subtree x vs resume vs put x/a/n (time passes)",
        short_lease_tree,
        vec![(p(&["x", "a"]), 1), (p(&["x", "b", "c"]), 2)],
        Vec::new(),
        &[
            Act::DeleteSubtree(p(&["x"])),
            Act::Resume,
            Act::Put(p(&["x", "a", "n"]), 3),
        ],
    )
    .allow_wait(true)
    .schedules(300)
    .run();
}

/// The slow owner of a `Rewrite` move has scanned the links; its lease runs out; a resume
/// from another process finishes the move (rewrites the link, drops the intent); then a
/// client, strictly after, points the link back at the old path. The slow owner's rewrite,
/// conditional only on the link's value (not on owning the intent), must not overwrite that
/// acknowledged put_link.
///
/// op2 waits (virtual time) until op0 or op1 reports the move finished, so its put_link comes
/// after the move in real time: the link must end where op2 put it.
fn stale_rewrite_sim(poll: Duration) -> Sim<FakeTable> {
    let finished = Rc::new(Cell::new(false));
    let ended = Rc::new(Cell::new(0u8));
    let (f0, f1, f2, fs) = (
        finished.clone(),
        finished.clone(),
        finished.clone(),
        finished.clone(),
    );
    let (e0, e1, e2, es) = (ended.clone(), ended.clone(), ended.clone(), ended.clone());
    Sim::new(
        "short lease: move s->d Rewrite vs resume vs (after) put_link l->s/1",
        FakeTable::new,
    )
    .tree(short_lease_tree)
    .schedules(300)
    .allow_wait(true)
    .setup(move |t| {
        fs.set(false);
        es.set(0);
        async move {
            t.put(["s", "1"], &V { v: 1 }).await?;
            t.put_link(["l"], ["s", "1"]).await
        }
    })
    .op("move s->d Rewrite", move |t| {
        let (f, e) = (f0.clone(), e0.clone());
        async move {
            let r = t
                .move_subtree_with(["s"], ["d"], LinkPolicy::Rewrite)
                .await;
            if r.is_ok() {
                f.set(true);
            }
            e.set(e.get() + 1);
            r.map(|r| r.objects)
        }
    })
    .op("resume", move |t| {
        let (f, e) = (f1.clone(), e1.clone());
        async move {
            let r = t.resume().await;
            if r.as_ref().is_ok_and(|r| !r.is_empty()) {
                f.set(true);
            }
            e.set(e.get() + 1);
            r.map(|r| r.len())
        }
    })
    .op("put_link l->s/1 after the move", move |t| {
        let (f, e) = (f2.clone(), e2.clone());
        async move {
            loop {
                if f.get() {
                    t.put_link(["l"], ["s", "1"]).await?;
                    return Ok("after");
                }
                if e.get() >= 2 {
                    return Ok("skipped");
                }
                tokio::time::sleep(poll).await;
            }
        }
    })
    .check(|end: &End<'_>| {
        if !matches!(&end.outcomes[2], OpOutcome::Ok(s) if s.contains("after")) {
            return Ok(());
        }
        match end.model.get(["l"]) {
            Some(Stored::Link(t)) if *t == ["s", "1"] => Ok(()),
            other => Err(format!(
                "put_link l->s/1 returned Ok after the move had finished, but l is {other:?}: a stale owner overwrote it"
            )),
        }
    })
}

#[test]
fn lease_takeover_stale_link_rewrite() {
    stale_rewrite_sim(Duration::from_millis(20)).run();
}

/// The schedule of [`lease_takeover_stale_link_rewrite`] that breaks it: op0 runs the whole
/// move up to its link rewrite (scan done, rewrite not sent), then its lease runs out while
/// op1 (resume) waits; op1 takes over, finishes the unlock phase (rewrites l to d/1, drops the
/// intent); op2 then puts l->s/1 and returns Ok; op0's stale rewrite (conditional on l still
/// pointing at s/1, not on owning the intent) then overwrites it.
#[test]
fn targeted_stale_link_rewrite_after_takeover() {
    replay_exact(
        stale_rewrite_sim(Duration::from_millis(1000)),
        STALE_REWRITE,
    );
}

// (op0's first 28 requests run the move up to its link scan: with the holds on the source's
// objects and the release of the destination's, five more than before. The takeover's unlock
// phase walks the destination (its held rows and every node, for holds to release), renews
// the lease, sends its fenced rewrite and looks for links once more: fourteen requests.)
const STALE_REWRITE: &str = "24301:0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,W,1,W,1,W,1,W,1,W,1,W,1,W,1,1,1,1,1,1,1,1,1,1,1,1,1,1,W,2,2,0";

/// Checks the helper itself: the pix check accepts rows written by plain puts.
#[test]
fn scenario_helpers_accept_a_plain_tree() {
    let sim = scenario_with(
        "pix: puts only",
        pix_tree,
        vec![(p(&["s", "1"]), 1)],
        vec![(p(&["l"]), p(&["s", "1"]))],
        &[Act::Put(p(&["s", "2"]), 2)],
    );
    sim.check(pix_attrs_match).check(link_targets_valid).run();
}

// ------------------------------------------------------------------------------------------
// Targeted schedules (replay strings written by hand from serial traces).

/// A move refused because its destination was taken (a put won the race), whose rollback's
/// first write fails; the client calls the move again, as the docs say. The second call finds
/// the recorded intent in phase `rollback`, finishes the rollback, and returns `Ok` with an
/// empty report: a move that did not happen is reported done.
#[test]
fn targeted_retry_of_refused_move_reports_ok() {
    let sim = scenario(
        "move s->d (retried) vs put d/z",
        &[(&["s", "1"], 1)],
        &[
            Act::MoveRetried(p(&["s"]), p(&["d"])),
            Act::Put(p(&["d", "z"]), 2),
        ],
    );
    // op0 up to its first copy write (#13), the put (3 requests), the refused copy write,
    // the rollback phase record (#14), the walk of the held source (#15-#18), then the first
    // rollback write (#19) fails.
    replay_exact(sim, "24301:0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0,0,0,0,0,0,0F");
}

/// `delete_node(Reparent)` failing part-way (request faults, no crash: the caller lives and
/// calls again, the documented recovery) against a put under the node: after the second call
/// the node must be gone and every child moved.
#[test]
fn reparent_faulted_then_called_again_vs_put() {
    scenario(
        "delete_node a/b Reparent (x2, faults) vs put a/b/c/n",
        &[
            (&["a", "b"], 1),
            (&["a", "b", "c"], 2),
            (&["a", "b", "e", "f"], 3),
        ],
        &[
            Act::ReparentTwiceUnlessRefused(p(&["a", "b"])),
            Act::Put(p(&["a", "b", "c", "n"]), 4),
        ],
    )
    .faults(1, request_faults())
    .schedules(300)
    .run();
}
