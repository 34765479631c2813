//! Deletes of sources of denormalized fields (tombstones), transactions writing sources and
//! targets together (fenced), chains with `cv` versions, and the stream processor reading the
//! stored source.
//!
//! The chain over three levels of the module `denorm_chain` (shared with the other `denorm`
//! modules):
//! `RForum` at `R/{forum}`, `RThread` at `R/{forum}/T/{thread}` (its `forum_name` copies
//! `RForum::name`), `RPost` at `.../P/{post}` (`thread_title` copies `RThread::title`,
//! `forum_name` copies `RThread::forum_name`). Every schedule ends with the simulator's
//! `resume()` in a fresh process and its invariants, then a check that every copy equals its
//! source (or `None` where the source object is missing), whatever failed.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 600 here).

use crate::denorm_chain::{
    RForum, RThread, delete_forum, delete_recreate_delete_forum, forum_key, move_thread,
    patch_forum, patch_title, pending_sim, processor, put_forum, put_thread, recreate_thread,
    rename_forum, rpost, rthread, sim, sim0, stream_sim, thread_key, tx_put_forum_and_new_thread,
};

// ---------------------------------------------------------------------------------------------
// 1. Tombstones.

/// A delete of the forum's object races two writers of it (a put and a patch) and a new
/// thread below it.
#[test]
fn delete_vs_put_and_patch_and_new_target() {
    sim("delete f vs put f=F2 vs patch f=F3 vs put thread f/n")
        .op("delete f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch f=F3", patch_forum("f", "F3"))
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .run();
}

/// As `delete_vs_put_and_patch_and_new_target` with two puts and no fault: the source written by a put stamped before another
/// writer's committed version, after a delete of that version.
#[test]
fn delete_vs_two_puts() {
    sim0("delete f vs put f=F2 vs put f=F3 (no faults)")
        .op("delete f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

/// A delete inside a transaction races a put of the source.
#[test]
fn tx_delete_vs_put() {
    sim("tx {delete f} vs put f=F2")
        .op("tx {delete f}", |t| async move {
            let mut tx = t.transaction();
            tx.delete::<RForum>(&forum_key("f"));
            tx.commit().await
        })
        .op("put f=F2", put_forum("f", "F2"))
        .run();
}

/// A transaction deleting the source and putting a new thread below it races a patch.
#[test]
fn tx_delete_and_target_vs_patch() {
    sim("tx {delete f, put thread f/n} vs patch f=F2")
        .op("tx {delete f, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.delete::<RForum>(&forum_key("f"))
                .put(&rthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// Delete, re-create and delete again in one operation, racing a put of the source.
#[test]
fn delete_recreate_delete_vs_put() {
    sim("delete f; put f=F2; delete f vs put f=F3")
        .op("delete; put F2; delete", delete_recreate_delete_forum)
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

/// Two deletes and a re-creation, each its own operation.
#[test]
fn delete_vs_recreate_vs_delete() {
    sim("delete f vs put f=F2 vs delete f")
        .op("delete f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("delete f (2)", delete_forum("f"))
        .run();
}

/// A delete of the destination's object races the move of a subtree under it (and a
/// rename of the destination).
#[test]
fn delete_destination_vs_move() {
    sim("delete g vs move f/t -> g/t vs patch g=G2")
        .op("delete g", delete_forum("g"))
        .op("move f/t -> g/t", move_thread)
        .op("patch g=G2", patch_forum("g", "G2"))
        .run();
}

/// A delete of the destination races a move under it and the destination's re-creation.
#[test]
fn delete_destination_vs_move_vs_recreate() {
    sim("delete g vs move f/t -> g/t vs put g=G2")
        .op("delete g", delete_forum("g"))
        .op("move f/t -> g/t", move_thread)
        .op("put g=G2", put_forum("g", "G2"))
        .run();
}

/// The source is deleted while a propagation of it is pending (its rename's copies failed;
/// the intent stays), racing `resume` and a re-creation.
#[test]
fn delete_with_pending_propagation() {
    pending_sim("delete f vs resume vs put f=F3 (F2's propagation pending)")
        .op("delete f", delete_forum("f"))
        .op(
            "resume",
            |t| async move { t.resume().await.map(|r| r.len()) },
        )
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

// ---------------------------------------------------------------------------------------------
// 2. Transactions.

/// Two transactions write the same source (and targets below it), racing a patch.
#[test]
fn two_transactions_vs_patch() {
    sim("tx {put f=F2, put f/n} vs tx {patch f=F3, put post f/t/p3} vs patch f=F4")
        .op("tx {put f=F2, put f/n}", tx_put_forum_and_new_thread)
        .op("tx {patch f=F3, put p3}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F3"))
                .put(&rpost("f", "t", "p3"));
            tx.commit().await
        })
        .op("patch f=F4", patch_forum("f", "F4"))
        .run();
}

/// A transaction writes an intermediate (the thread: a target of the forum, a source of
/// its posts) and a new post under it, racing a rename of the forum and a retitle.
#[test]
fn tx_source_and_target_under_it_vs_rename() {
    sim("tx {put thread f/t=T2, put post f/t/p3} vs patch f=F2 vs patch title=T3")
        .op("tx {put f/t=T2, put p3}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rthread("f", "t", "T2")).put(&rpost("f", "t", "p3"));
            tx.commit().await
        })
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("patch title=T3", patch_title("f", "T3"))
        .run();
}

/// A transaction writes the forum and the thread below it together (a source, and a
/// target of it that is a source too), racing a put of the forum.
#[test]
fn tx_forum_and_thread_vs_put() {
    sim("tx {patch f=F2, put thread f/t=T2} vs put f=F3")
        .op("tx {patch f=F2, put f/t=T2}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F2"))
                .put(&rthread("f", "t", "T2"));
            tx.commit().await
        })
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

/// A transaction re-creating the forum (with a new thread) races its delete and a put.
#[test]
fn tx_recreate_vs_delete_vs_put() {
    sim("tx {put f=F2, put f/n} vs delete f vs put f=F3")
        .op("tx {put f=F2, put f/n}", tx_put_forum_and_new_thread)
        .op("delete f", delete_forum("f"))
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

/// As `tx_recreate_vs_delete_vs_put` without the put: the transaction's own stamp (taken right before its commit,
/// after the tombstone it read) against the delete.
#[test]
fn tx_recreate_vs_delete() {
    sim("tx {put f=F2, put f/n} vs delete f")
        .op("tx {put f=F2, put f/n}", tx_put_forum_and_new_thread)
        .op("delete f", delete_forum("f"))
        .run();
}

// ---------------------------------------------------------------------------------------------
// 3. Chains with `cv` versions.

/// A retitle of the intermediate races a rename of the top source and a move of the
/// intermediate.
#[test]
fn retitle_vs_rename_vs_move() {
    sim("patch title=T2 vs patch f=F2 vs move f/t -> g/t")
        .op("patch title=T2", patch_title("f", "T2"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("move f/t -> g/t", move_thread)
        .run();
}

/// A put of the intermediate (a new own version) races a rename of the top source and a
/// retitle.
#[test]
fn put_intermediate_vs_rename_vs_retitle() {
    sim("put thread f/t=T2 vs put f=F2 vs patch title=T3")
        .op("put thread f/t=T2", put_thread("f", "t", "T2"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch title=T3", patch_title("f", "T3"))
        .run();
}

/// A put of the intermediate races two renames of the top source (no faults: pure
/// interleaving).
#[test]
fn put_intermediate_vs_two_renames() {
    sim0("put thread f/t=T2 vs put f=F2 vs patch f=F3 (no faults)")
        .op("put thread f/t=T2", put_thread("f", "t", "T2"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch f=F3", patch_forum("f", "F3"))
        .run();
}

/// The intermediate is deleted and put again while the top source is renamed.
#[test]
fn delete_and_recreate_intermediate_vs_rename() {
    sim("delete thread f/t; put f/t=T2 vs patch f=F2")
        .op("delete f/t; put f/t=T2", recreate_thread("T2"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// No race at all: the forum is renamed, then the thread (an intermediate) is deleted.
/// The posts' chained `forum_name` must be cleared (their thread object is gone).
#[test]
fn rename_then_delete_intermediate() {
    sim0("patch f=F2; delete thread f/t (one op, no faults)")
        .op("patch f=F2; delete f/t", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F2")).await?;
            t.repo::<RThread>().delete(&thread_key("f")).await
        })
        .run();
}

// ---------------------------------------------------------------------------------------------
// 4. Stream mode.

/// Stream mode: a delete of the forum, its re-creation, a new thread and the processor.
#[test]
fn stream_delete_recreate() {
    let (sim, table) = stream_sim("stream: delete f vs put f=F2 vs put thread f/n vs processor");
    sim.op("delete f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("processor", processor(table))
        .run();
}

/// Stream mode: a move under a forum that is deleted meanwhile, a retitle, the processor.
#[test]
fn stream_move_vs_delete_destination() {
    let (sim, table) =
        stream_sim("stream: move f/t -> g/t vs delete g vs patch title vs processor");
    sim.op("move f/t -> g/t", move_thread)
        .op("delete g", delete_forum("g"))
        .op("patch g/t title=T2", patch_title("g", "T2"))
        .op("processor", processor(table))
        .run();
}

/// Stream mode: delete, re-create and delete again in one op, a delete of the thread and
/// its re-creation in another, and the processor.
#[test]
fn stream_delete_recreate_delete_and_thread() {
    let (sim, table) =
        stream_sim("stream: delete; put F2; delete f vs delete f/t; put f/t=T2 vs processor");
    sim.op("delete f; put F2; delete f", delete_recreate_delete_forum)
        .op("delete f/t; put f/t=T2", recreate_thread("T2"))
        .op("processor", processor(table))
        .run();
}

/// Stream mode: two writers of the forum and its delete, with the processor.
#[test]
fn stream_delete_vs_two_writers() {
    let (sim, table) = stream_sim("stream: delete f vs put f=F2 vs patch f=F3 vs processor");
    sim.op("delete f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch f=F3", patch_forum("f", "F3"))
        .op("processor", processor(table))
        .run();
}
