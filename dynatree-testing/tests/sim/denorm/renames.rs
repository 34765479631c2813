//! Interleaving scenarios of the inline propagation of denormalized fields: two renames of one source racing each other and the creation of a target below it,
//! with one fault per schedule. After every schedule: the invariants of the tree (checked by
//! the simulator), and every copy equal to its source's final value.
//!
//! The `chain_*` scenarios use a chain over three levels (a post copies its thread's title and its thread's copy of the
//! forum's name) and check unconditionally, after the simulator's recovery `resume()`, that
//! every copy equals its source (or is `None` where the source object is missing): moves racing
//! renames of both forums and of the title, two updates of the destination racing a move, a
//! deletion of the source racing its re-creation and a new target, transactions writing a source
//! and a target together, every fault on single operations, two `resume`s racing a new rename,
//! puts of targets racing renames, and the stream mode (`apply_changes` in order, then again from
//! the start with redelivery, duplication and delay).
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 600 here).

use dynatree::{Hierarchical, Patch, Tree};
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Sim, SimFault};
use serde::{Deserialize, Serialize};

use crate::denorm_chain::{
    RForum, RThread, attr_of, builder, delete_forum, forum_key, move_thread, move_thread_report,
    patch_forum, patch_title, pending_sim, processor, put_forum, put_post, put_thread,
    rename_forum, rforum, rthread, sim, sim0, stream_sim, tx_put_forum_and_new_thread,
};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "F/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "F/{forum}/T/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

fn forum(name: &str) -> Forum {
    Forum {
        forum: "f".into(),
        name: name.into(),
    }
}

fn thread(id: &str) -> Thread {
    Thread {
        forum: "f".into(),
        thread: id.into(),
        forum_name: None,
    }
}

fn tree(storage: dynatree_testing::sim::SimStorage<FakeTable>) -> Tree {
    Tree::builder(storage)
        .denormalized::<Thread>()
        .build()
        .expect("tree")
}

/// Every thread's copy equals the forum's final name.
fn copies_follow(end: &End<'_>) -> Result<(), String> {
    let name = attr_of(end.model, &["F", "f"], "name");
    for t in ["a", "b"] {
        let path = ["F", "f", "T", t];
        if end.model.get(path.to_vec()).is_none() {
            continue;
        }
        let copy = attr_of(end.model, &path, "forum_name");
        if copy != name {
            return Err(format!(
                "thread {t} copies {copy:?}, the forum is named {name:?}"
            ));
        }
    }
    Ok(())
}

/// Two renames of the forum (a put and a patch) race each other and the creation of a thread:
/// whatever the order and the faults, every thread ends with the forum's final name (versions
/// follow the commit order of the source's writes; a late copy never wins).
#[test]
fn two_renames_vs_a_new_thread() {
    Sim::new(
        "rename f (put) vs rename f (patch) vs put thread b",
        FakeTable::new,
    )
    .tree(tree)
    .schedules(600)
    .faults(1, SimFault::all())
    .setup(|t| async move {
        t.repo::<Forum>().put(&forum("A")).await?;
        t.repo::<Thread>().put(&thread("a")).await
    })
    .op("rename B", |t| async move {
        t.repo::<Forum>().put(&forum("B")).await
    })
    .op("rename C", |t| async move {
        t.repo::<Forum>()
            .patch(Patch::new(&forum("").key()).set(Forum::FIELDS.name, "C"))
            .await
    })
    .op("put thread b", |t| async move {
        t.repo::<Thread>().put(&thread("b")).await
    })
    .check(|end| {
        // An operation that failed may have left its source written without its copies:
        // the guarantee is for acknowledged operations (a retry completes the others).
        if (0..3).all(|i| end.ok(i)) {
            copies_follow(end)?;
        }
        Ok(())
    })
    .allow_wait(true)
    .run();
}

// ---------------------------------------------------------------------------------------------
// A chain over three levels (`denorm_chain`): a post copies its
// thread's title and its thread's copy of the forum's name.

/// Scenario 1: The thread (with its posts) moves from forum `f` to forum `g` while both forums are
/// renamed: the moved copies follow `g`'s final name whichever came first (the refill, or the
/// rename's walk that sees the moved rows).
#[test]
fn chain_move_vs_renames_of_both_forums() {
    sim("move f/t -> g/t vs put g=G2 vs patch f=F2")
        .op("move f/t -> g/t", move_thread_report)
        .op("put g=G2", put_forum("g", "G2"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// Scenario 1b: The move races a rename of the thread's title (a patch at its old path: applied
/// before, refused while it moves, or not found after) and a rename of the destination.
#[test]
fn chain_move_vs_title_and_destination_rename() {
    sim("move f/t -> g/t vs patch title=T2 vs patch g=G2")
        .op("move f/t -> g/t", move_thread_report)
        .op("patch f/t title=T2", patch_title("f", "T2"))
        .op("patch g=G2", patch_forum("g", "G2"))
        .run();
}

/// Scenario 2: two updates of one source (a put and a patch of `g`) race the move of a
/// subtree under it.
#[test]
fn chain_two_updates_of_the_destination_vs_move() {
    sim("move f/t -> g/t vs put g=G2 vs patch g=G3")
        .op("move f/t -> g/t", move_thread_report)
        .op("put g=G2", put_forum("g", "G2"))
        .op("patch g=G3", patch_forum("g", "G3"))
        .run();
}

/// Scenario 3: The forum's object is deleted (its node keeps the thread below) while it is created
/// again and a new thread is put below it: the optional copies end `None` if no forum object
/// is left, else its name (a clearing never hides a later creation).
#[test]
fn chain_delete_source_vs_recreate_and_new_target() {
    sim("delete forum f vs put f=F2 vs put thread f/n")
        .op("delete forum f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .run();
}

/// Scenario 3b: as 3 without the new thread and without faults: the clearing against the
/// re-creation alone.
#[test]
fn chain_delete_source_vs_recreate() {
    sim0("delete forum f vs put f=F2 (no faults)")
        .op("delete forum f", delete_forum("f"))
        .op("put f=F2", put_forum("f", "F2"))
        .run();
}

/// Scenario 4: A transaction writes the forum (a put) and a new thread below it together, racing a
/// patch of the forum.
#[test]
fn chain_transaction_source_and_target_vs_patch() {
    sim("tx {put f=F2, put thread f/n} vs patch f=F3")
        .op("tx {put f=F2, put f/n}", tx_put_forum_and_new_thread)
        .op("patch f=F3", patch_forum("f", "F3"))
        .run();
}

/// Scenario 4b: A transaction patches the forum and puts a new thread below it, racing a put of the
/// forum.
#[test]
fn chain_transaction_patch_and_target_vs_put() {
    sim("tx {patch f=F2, put thread f/n} vs put f=F3")
        .op("tx {patch f=F2, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F2"))
                .put(&rthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

/// Scenario 5: One operation at a time under every fault at every request (the bounded search is
/// exhaustive here), then `resume()`: a rename through the chain, a move, a put of a thread
/// (itself a source and a target), a deletion of the source.
#[test]
fn chain_single_operations_under_every_fault() {
    for (name, op) in [
        ("rename f (put)", 0),
        ("rename f (patch)", 1),
        ("move f/t -> g/t", 2),
        ("put thread f/t title=T2", 3),
        ("delete forum f", 4),
    ] {
        sim(name)
            .faults(2, SimFault::all())
            .preemptions(None)
            .op(name, move |t| async move {
                match op {
                    0 => t.repo::<RForum>().put(&rforum("f", "F2")).await,
                    1 => t.repo::<RForum>().patch(rename_forum("f", "F2")).await,
                    2 => move_thread(t).await,
                    3 => t.repo::<RThread>().put(&rthread("f", "t", "T2")).await,
                    _ => t.repo::<RForum>().delete(&forum_key("f")).await,
                }
            })
            .run();
    }
}

/// Scenario 6a: Two `resume`s race each other and a new rename, over a propagation left unfinished
/// (its first copy failed: the intent stays, given up).
#[test]
fn chain_two_resumes_vs_a_new_rename() {
    pending_sim("resume vs resume vs patch f=F3 (F2's propagation unfinished)")
        .op(
            "resume",
            |t| async move { t.resume().await.map(|r| r.len()) },
        )
        .op(
            "resume",
            |t| async move { t.resume().await.map(|r| r.len()) },
        )
        .op("patch f=F3", patch_forum("f", "F3"))
        .run();
}

/// Scenario 6b: Fan-outs beyond the inline limit (1 here: the forum has three targets below) are
/// propagated by a task in the background, under the intent: two renames and a new post
/// racing them.
#[test]
fn chain_background_propagation() {
    sim("inline_limit 1: put f=F2 vs patch f=F3 vs put post f/t/p3")
        .tree(|s| builder(s).inline_limit(1).build().expect("tree"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch f=F3", patch_forum("f", "F3"))
        .op("put post f/t/p3", put_post("f", "t", "p3"))
        .run();
}

/// Scenario 6c: a put of the thread (a target of the forum, and a source of its posts) races
/// a rename of the forum; one fault per schedule.
#[test]
fn chain_put_target_vs_rename() {
    sim("put thread f/t title=T2 vs patch f=F2")
        .op("put thread f/t", put_thread("f", "t", "T2"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// Scenario 6d: a put of a post (a pure target: no intent of its own) races a rename of its
/// thread's title; one fault per schedule.
#[test]
fn chain_put_pure_target_vs_rename() {
    sim("put post f/t/p1 vs patch title=T2")
        .op("put post f/t/p1", put_post("f", "t", "p1"))
        .op("patch f/t title=T2", patch_title("f", "T2"))
        .run();
}

// ---------------------------------------------------------------------------------------------
// Stream mode: the writes only stamp; `apply_changes` propagates from the table's stream.

/// Scenario 7: Stream mode: a rename of `f` (put), a move of its thread to `g`, a rename of `g`
/// (patch), a new thread in `f` and a processor applying what it finds meanwhile, all racing;
/// then the whole stream is applied in order, and once more from the start with redelivery,
/// duplication and delay: after each, every copy follows its source.
#[test]
fn chain_stream_mode() {
    let (sim, table) =
        stream_sim("stream: put f=F2 vs move f/t -> g/t vs patch g=G2 vs put f/n vs processor");
    sim.op("put f=F2", put_forum("f", "F2"))
        .op("move f/t -> g/t", move_thread)
        .op("patch g=G2", patch_forum("g", "G2"))
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("processor (what it finds)", processor(table))
        .run();
}
