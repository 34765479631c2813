//! Transaction conflicts: DynamoDB cancels a transaction that meets another transaction on one
//! of its items (`TransactionConflict`), and refuses a single-item write to an item a
//! transaction is changing (`TransactionConflictException`). Nothing is applied either way, so
//! a conflict is transient: every protocol must absorb it (look at the rows again, or send the
//! request again under the retry policy) and neither break an invariant nor fail the caller's
//! operation while its retry budget lasts.
//!
//! Each scenario runs two or three operations with up to two `Fault::Conflict` placed on any
//! transaction or single-item write of the schedule, and checks the serial-order model plus:
//! no operation returns a conflict, a cancelled transaction or a backend error (a refusal the
//! race itself explains, such as `Locked`, `AlreadyExists` or `NotFound`, is fine).
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 300 here).
//! `DYNATREE_SIM_FENCED=1` runs the same scenarios with fenced puts.

mod review_acts;

use review_acts::*;

/// The scenario with up to two conflicts anywhere, and the check that they were absorbed.
fn conflicts(name: &str, setup: &[(&[&str], u32)], acts: &[Act]) -> Sim<FakeTable> {
    let n = acts.len();
    review_acts::scenario(name, setup, acts)
        .schedules(300)
        .faults(2, [conflict()])
        .check(absorbed(n))
}

#[test]
fn put_new_and_overwrite() {
    conflicts(
        "put a/b/c (new) vs put a/x (overwrite)",
        &[(&["a", "x"], 1)],
        &[
            Act::Put(p(&["a", "b", "c"]), 2),
            Act::Put(p(&["a", "x"]), 3),
        ],
    )
    .run();
}

#[test]
fn put_vs_delete_sibling_prunes_parent() {
    conflicts(
        "put a/c vs delete a/b (prunes a)",
        &[(&["a", "b"], 1)],
        &[Act::Put(p(&["a", "c"]), 2), Act::Delete(p(&["a", "b"]))],
    )
    .run();
}

#[test]
fn delete_leaf_prunes_ancestors() {
    conflicts(
        "delete a/b/c (prunes a/b, a) vs put a/d",
        &[(&["a", "b", "c"], 1)],
        &[
            Act::Delete(p(&["a", "b", "c"])),
            Act::Put(p(&["a", "d"]), 2),
        ],
    )
    .run();
}

#[test]
fn create_and_update() {
    conflicts(
        "create d/n vs update d/n",
        &[],
        &[Act::Create("d", "n", 1), Act::Update("d", "n", 2)],
    )
    .run();
}

#[test]
fn move_vs_put_at_destination() {
    conflicts(
        "move s->d vs put d/x",
        &[(&["s", "1"], 1), (&["s", "2", "3"], 2)],
        &[
            Act::Move(p(&["s"]), p(&["d"]), LinkPolicy::Report),
            Act::Put(p(&["d", "x"]), 4),
        ],
    )
    .run();
}

#[test]
fn copy_vs_delete_in_source() {
    conflicts(
        "copy s->d vs delete s/1",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[Act::Copy(p(&["s"]), p(&["d"])), Act::Delete(p(&["s", "1"]))],
    )
    .run();
}

#[test]
fn delete_subtree_vs_put_beside() {
    conflicts(
        "delete_subtree x vs put y/z",
        &[(&["x", "a"], 1), (&["x", "b", "c"], 2), (&["y", "q"], 3)],
        &[Act::DeleteSubtree(p(&["x"])), Act::Put(p(&["y", "z"]), 4)],
    )
    .run();
}

#[test]
fn reparent_vs_put_sibling() {
    conflicts(
        "delete_node a (reparent) vs put a/c",
        &[(&["a"], 1), (&["a", "b"], 2)],
        &[
            Act::DeleteNode(p(&["a"]), OnChildren::Reparent),
            Act::Put(p(&["q", "c"]), 3),
        ],
    )
    .run();
}
