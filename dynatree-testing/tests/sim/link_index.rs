//! The link index (see `tree/links.md`): invariant 1 (every link row dynatree writes has its
//! entry, whatever runs beside it) and the rewrite guarantee of moves found through the
//! entries, under link writes, deletions, overwrites and the dropping of stale entries, with
//! faults. Each schedule's outcome must be one of a serial order's, and a check of the final
//! table must find no link without its entry.
// Fenced puts are deprecated; what they still do is measured and tested until they go.
#![allow(deprecated)]

use crate::acts::*;

fn indexed_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .link_index(1)
        .build()
        .expect("a tree with a link index")
}

fn indexed_on(t: FakeTable) -> T {
    Tree::builder(t)
        .link_index(1)
        .build()
        .expect("a tree with a link index")
}

/// No violation in the final table (an empty listing row only when an operation failed):
/// above all no link without its entry (`missing-index`).
fn every_link_indexed(end: &End<'_>) -> Result<(), String> {
    let failed = end.outcomes.iter().any(|o| !o.is_ok());
    let found = final_violations(end.rows, indexed_on, failed)?;
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("check() of the final table: {found:?}"))
    }
}

fn indexed_fenced_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .link_index(1)
        .fenced_puts(true)
        .build()
        .expect("a tree with a link index and fenced puts")
}

fn run_with(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: &[(&[&str], u32)],
    links: &[(&[&str], &[&str])],
    acts: &[Act],
) {
    let links = links.iter().map(|(l, t)| (p(l), p(t))).collect();
    with_faults(scenario_with(name, tree, paths(setup), links, acts))
        .schedules(250)
        .check(every_link_indexed)
        .run();
}

fn run(name: &str, setup: &[(&[&str], u32)], links: &[(&[&str], &[&str])], acts: &[Act]) {
    run_with(name, indexed_tree, setup, links, acts);
}

/// A link created while a Rewrite move runs: created before the move ends, it points at the
/// new place (the move's looks find it through its entry).
#[test]
fn put_link_vs_rewrite_move_through_the_index() {
    run(
        "link index: put_link l->s/1 vs move s->d Rewrite",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[],
        &[
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// A link deleted and created again while a move's look drops stale entries: the entry the
/// new link row lands with is never the one dropped (the drop checks, in its transaction,
/// that the link row is no link to the target).
#[test]
fn relink_vs_the_drop_of_its_stale_entry() {
    run(
        "link index: delete l, put_link l->s/1 vs move s->d Rewrite (l -> s/1)",
        &[(&["s", "1"], 1)],
        &[(&["l"], &["s", "1"])],
        &[
            Act::Delete(p(&["l"])),
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// The same with the stale entry already there: `l -> s/1` deleted before the race, then
/// created again while the move's looks find the stale entry and drop it. Every interleaving
/// of the two (no bound on preemptions), with a fault.
#[test]
fn relink_vs_the_drop_of_its_stale_entry_every_interleaving() {
    let sim = Sim::new(
        "link index: put_link l->s/1 vs move s->d Rewrite (l -> s/1 deleted)",
        FakeTable::new,
    )
    .tree(indexed_tree)
    .setup(|t| async move {
        t.put(["s", "1"], &V { v: 1 }).await?;
        t.put_link(["l"], ["s", "1"]).await?;
        t.delete(["l"]).await?;
        Ok(())
    });
    with_faults(with_acts(
        sim,
        &[
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
        false,
        Act::run,
    ))
    .preemptions(None)
    .schedules(400)
    .check(every_link_indexed)
    .run();
}

/// A check and a repair that deletes the stale entry of `l -> s/1` (the link deleted before
/// the race) while the link is created again: the repair's delete of the entry checks, in its
/// transaction, that `l` is no link to `s/1`, so the new link keeps its entry. Every
/// interleaving of the two, with a fault.
#[test]
fn relink_vs_repair_sweeping_its_stale_entry_every_interleaving() {
    let sim = Sim::new(
        "link index: put_link l->s/1 vs check and repair (l -> s/1 deleted)",
        FakeTable::new,
    )
    .tree(indexed_tree)
    .setup(|t| async move {
        t.put(["s", "1"], &V { v: 1 }).await?;
        t.put_link(["l"], ["s", "1"]).await?;
        t.delete(["l"]).await?;
        Ok(())
    })
    .op("check and repair", |t| async move {
        let report = t.check().run().await?;
        let repaired = t.repair(&report).run().await?;
        Ok(format!(
            "{} stale, {} swept",
            report.stale_entries(),
            repaired.swept()
        ))
    });
    with_faults(with_acts(
        sim,
        &[Act::PutLink(p(&["l"]), p(&["s", "1"]))],
        false,
        Act::run,
    ))
    .preemptions(None)
    .schedules(400)
    .check(every_link_indexed)
    .run();
}

/// An object put over a link (leaving its entry stale) and the link put back, while a move
/// reports the links into its source.
#[test]
fn put_over_a_link_and_back_vs_a_reporting_move() {
    run(
        "link index: put l, put_link l->s/1 vs move s->d Report (l -> s/1)",
        &[(&["s", "1"], 1)],
        &[(&["l"], &["s", "1"])],
        &[
            Act::Put(p(&["l"]), 7),
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
        ],
    );
}

/// A copy carries a link inside its source (its copy's entry goes with it) while a move of
/// the link's target rewrites the links into it.
#[test]
fn copy_of_a_link_vs_rewrite_move_of_its_target() {
    run(
        "link index: copy a->c (a/l -> s/1) vs move s->d Rewrite",
        &[(&["s", "1"], 1), (&["a", "x"], 2)],
        &[(&["a", "l"], &["s", "1"])],
        &[
            Act::Copy(p(&["a"]), p(&["c"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// Under `fenced_puts`, a new top-level link goes the fenced path (a put sent straight to the
/// table): with its entry, so a Rewrite move that runs after it finds it.
#[test]
fn fenced_put_link_vs_rewrite_move() {
    run_with(
        "link index: fenced put_link l->s/1 vs move s->d Rewrite",
        indexed_fenced_tree,
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[],
        &[
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// A re-parenting moves a link row up (its entry goes with it, at the new place) while a
/// Rewrite move of the link's target runs.
#[test]
fn reparent_of_a_links_parent_vs_rewrite_move_of_its_target() {
    run(
        "link index: delete_node(a, Reparent) (a/l -> s/1) vs move s->d Rewrite",
        &[(&["s", "1"], 1), (&["a"], 3), (&["a", "x"], 2)],
        &[(&["a", "l"], &["s", "1"])],
        &[
            Act::ReparentTwice(p(&["a"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// A move of the link row's parent (with Ignore) while a Rewrite move of its target runs:
/// the moved link row lands with its entry and the Rewrite move's looks follow it.
#[test]
fn move_of_a_link_row_vs_rewrite_move_of_its_target() {
    run(
        "link index: move a->b Ignore (a/l -> s/1) vs move s->d Rewrite",
        &[(&["s", "1"], 1), (&["a", "x"], 2)],
        &[(&["a", "l"], &["s", "1"])],
        &[
            Act::Move(p(&["a"]), p(&["b"]), LinkPolicy::Ignore),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// A link repointed elsewhere and back (a stale entry, then the same entry again) while two
/// Rewrite moves run one after the other on the target; with `resume` beside them.
#[test]
fn relink_elsewhere_and_back_vs_rewrite_move_and_resume() {
    run(
        "link index: put_link l->t/1, put_link l->s/1 vs move s->d Rewrite, resume (l -> s/1)",
        &[(&["s", "1"], 1), (&["t", "1"], 2)],
        &[(&["l"], &["s", "1"])],
        &[
            Act::PutLink(p(&["l"]), p(&["t", "1"])),
            Act::PutLink(p(&["l"]), p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
            Act::Resume,
        ],
    );
}

/// A link inside the moved subtree pointing into it, while a second link is created into the
/// subtree: both end at the new place.
#[test]
fn inner_link_and_new_link_vs_rewrite_move() {
    run(
        "link index: put_link m->s/2 vs move s->d Rewrite (s/l -> s/1)",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[(&["s", "l"], &["s", "1"])],
        &[
            Act::PutLink(p(&["m"]), p(&["s", "2"])),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}

/// Two Rewrite moves in a chain: s->d while the link's own parent a->b is moved with Rewrite
/// too (a/l -> s/1, and k -> a/x points into a).
#[test]
fn two_rewrite_moves_crossing() {
    run(
        "link index: move a->b Rewrite vs move s->d Rewrite (a/l -> s/1, s/k -> a/x)",
        &[(&["s", "1"], 1), (&["a", "x"], 2)],
        &[(&["a", "l"], &["s", "1"]), (&["s", "k"], &["a", "x"])],
        &[
            Act::Move(p(&["a"]), p(&["b"]), LinkPolicy::Rewrite),
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Rewrite),
        ],
    );
}
