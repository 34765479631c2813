//! Writes of targets and of sources of denormalized fields: target writes check their sources
//! in the write's own transaction (`Tree::fill_checked`), and every source write checks its
//! tombstone in its own transaction.
//!
//! The chain over three levels of the module `denorm_chain` (shared with the other `denorm`
//! modules):
//! `RForum` at `R/{forum}`, `RThread` at `R/{forum}/T/{thread}` (its `forum_name` copies
//! `RForum::name`), `RPost` at `.../P/{post}` (`thread_title` copies `RThread::title`,
//! `forum_name` copies `RThread::forum_name`). Every schedule ends with the simulator's
//! `resume()` in a fresh process and its invariants, then a check that every copy equals its
//! source (or `None` where the source object is missing, a link included), whatever failed.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 600 here).

use std::time::Duration;

use dynatree::{ErrorKind, RetryPolicy};

use crate::denorm_chain::{
    RForum, RPost, RThread, builder, check, delete_forum, delete_thread, forum_key, move_thread,
    patch_forum, patch_title, put_forum, put_post, put_thread, recreate_thread, rename_forum,
    rforum, rpost, rthread, setup, sim, sim0,
};

// ---------------------------------------------------------------------------------------------
// 1. Typed writes of targets (checked in their own transaction).

/// A new post (a pure target of the thread, chained to the forum) races a rename of the
/// forum, whose walk copies into the thread and then the posts it listed (no faults).
#[test]
fn new_post_vs_rename_forum() {
    sim0("put post f/t/p3 vs patch f=F2 (no faults)")
        .op("put post f/t/p3", put_post("f", "t", "p3"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// A new post races a rename of the forum and a retitle of its thread (one fault).
#[test]
fn new_post_vs_rename_and_retitle() {
    sim("put post f/t/p3 vs put f=F2 vs patch title=T2")
        .op("put post f/t/p3", put_post("f", "t", "p3"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch title=T2", patch_title("f", "T2"))
        .run();
}

/// A new thread (a target written with checks on its source) races a rename AND a delete
/// of the forum: its checks hold either the forum's version or its absence and tombstone.
#[test]
fn put_thread_vs_rename_and_delete_forum() {
    sim("put thread f/n vs patch f=F2 vs delete f")
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("delete f", delete_forum("f"))
        .run();
}

/// As `put_thread_vs_rename_and_delete_forum` with a put of the forum (which can re-create it) instead of a patch, no faults.
#[test]
fn put_thread_vs_put_and_delete_forum() {
    sim0("put thread f/n vs put f=F2 vs delete f (no faults)")
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("delete f", delete_forum("f"))
        .run();
}

/// A create (put if not exists) of a thread races the forum's delete and re-creation.
#[test]
fn create_thread_vs_delete_recreate_forum() {
    sim("create thread f/n vs delete f; put f=F2")
        .op("create thread f/n", |t| async move {
            t.repo::<RThread>().create(&rthread("f", "n", "N1")).await
        })
        .op("delete f; put f=F2", |t| async move {
            let forums = t.repo::<RForum>();
            forums.delete(&forum_key("f")).await?;
            forums.put(&rforum("f", "F2")).await
        })
        .run();
}

/// A create of a thread under a forum that is missing at the start (deleted in setup)
/// races its re-creation and a second delete.
#[test]
fn create_thread_under_deleted_forum_vs_recreate() {
    sim("create thread f/n vs put f=F2; delete f (forum deleted in setup)")
        .setup(|t| async move {
            setup(t.clone()).await?;
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .op("create thread f/n", |t| async move {
            t.repo::<RThread>().create(&rthread("f", "n", "N1")).await
        })
        .op("put f=F2; delete f", |t| async move {
            let forums = t.repo::<RForum>();
            forums.put(&rforum("f", "F2")).await?;
            forums.delete(&forum_key("f")).await
        })
        .op("patch title=T2", patch_title("f", "T2"))
        .run();
}

/// `put_all` of posts (fill, write, re-read) races a rename of the forum and a retitle.
#[test]
fn put_all_posts_vs_rename_and_retitle() {
    sim("put_all posts f/t/p3,p4 vs patch f=F2 vs patch title=T2")
        .op("put_all p3, p4", |t| async move {
            t.repo::<RPost>()
                .put_all(&[rpost("f", "t", "p3"), rpost("f", "t", "p4")])
                .await
        })
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("patch title=T2", patch_title("f", "T2"))
        .run();
}

/// `put_all` of threads (sources too: written one by one) races renames of the forum.
#[test]
fn put_all_threads_vs_renames() {
    sim("put_all threads f/n,f/m vs patch f=F2 vs put f=F3")
        .op("put_all n, m", |t| async move {
            t.repo::<RThread>()
                .put_all(&[rthread("f", "n", "N1"), rthread("f", "m", "M1")])
                .await
        })
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("put f=F3", put_forum("f", "F3"))
        .run();
}

/// A new post under the thread races a move of the thread's subtree to the other forum
/// (and a rename of the destination).
#[test]
fn put_post_vs_move_of_its_thread() {
    sim("put post f/t/p3 vs move f/t -> g/t vs patch g=G2")
        .op("put post f/t/p3", put_post("f", "t", "p3"))
        .op("move f/t -> g/t", move_thread)
        .op("patch g=G2", patch_forum("g", "G2"))
        .run();
}

/// A put of the moved thread itself (at its old place, then its new one) races the move.
#[test]
fn put_thread_vs_move_of_it() {
    sim("put thread f/t=T2; put g/t=T3 vs move f/t -> g/t vs patch f=F2")
        .op("put f/t=T2; put g/t=T3", |t| async move {
            let threads = t.repo::<RThread>();
            let a = threads.put(&rthread("f", "t", "T2")).await;
            let b = threads.put(&rthread("g", "t", "T3")).await;
            a.and(b)
        })
        .op("move f/t -> g/t", move_thread)
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// A link put at the forum's path replaces the source object (one op, no faults): the
/// copies of a source that is no object any more are `None`.
#[test]
fn link_replaces_source() {
    sim0("put_link R/f -> R/g (one op, no faults)")
        .op("put_link R/f -> R/g", |t| async move {
            t.put_link(["R", "f"], ["R", "g"]).await
        })
        .run();
}

/// A forum deleted and replaced by a link races a new thread and a re-creation.
#[test]
fn link_at_source_vs_new_thread() {
    sim("delete f; put_link R/f -> R/g vs put thread f/n vs put f=F2")
        .op("delete f; link", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await?;
            t.put_link(["R", "f"], ["R", "g"]).await
        })
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("put f=F2", put_forum("f", "F2"))
        .run();
}

/// The target write's retry loop under a storm of renames, with two attempts: an error
/// must be `Conflict`, say why, and leave nothing written.
#[test]
fn retry_exhaustion_under_renames() {
    let conflicts = std::rc::Rc::new(std::cell::Cell::new(0usize));
    let seen = std::rc::Rc::clone(&conflicts);
    sim0("put thread f/n (2 attempts) vs 3 renames (no faults)")
        .tree(|s| {
            builder(s)
                .retry_policy(RetryPolicy::new(
                    2,
                    Duration::from_millis(1),
                    Duration::from_millis(2),
                ))
                .build()
                .expect("tree")
        })
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("put f=F3", put_forum("f", "F3"))
        .op("patch f=F4", patch_forum("f", "F4"))
        .check(move |end| {
            check(end)?;
            let n = ["R", "f", "T", "n"].map(str::to_owned);
            match &end.outcomes[0] {
                dynatree_testing::sim::OpOutcome::Err(e) => {
                    if e.kind() == ErrorKind::Conflict {
                        seen.set(seen.get() + 1);
                    }
                    if e.kind() == ErrorKind::Conflict && end.model.get(n.to_vec()).is_some() {
                        return Err(format!("the put failed ({e}) but f/n was written"));
                    }
                    if e.kind() == ErrorKind::Conflict && !e.to_string().contains("kept changing") {
                        return Err(format!("unclear conflict: {e}"));
                    }
                    Ok(())
                }
                _ => Ok(()),
            }
        })
        .run();
    eprintln!("the put ended in Conflict in {} schedules", conflicts.get());
}

/// A thread put under a forum path that holds a link (no source object: its copy is
/// checked against the link) races the link's replacement by a forum object.
#[test]
fn put_thread_under_link_vs_forum_put() {
    sim("put thread f/n vs put f=F2 (R/f a link in setup)")
        .setup(|t| async move {
            setup(t.clone()).await?;
            t.repo::<RForum>().delete(&forum_key("f")).await?;
            t.put_link(["R", "f"], ["R", "g"]).await
        })
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .op("put f=F2", put_forum("f", "F2"))
        .op("patch title=T2", patch_title("f", "T2"))
        .run();
}

// ---------------------------------------------------------------------------------------------
// 2. Source writes and their tombstones.

/// A transaction putting the forum (a tombstone check in its commit) races the forum's
/// delete and a transaction patching it with a new post.
#[test]
fn tx_source_put_vs_delete() {
    sim("tx {put f=F2} vs delete f vs tx {patch f=F3, put post f/t/p3}")
        .op("tx {put f=F2}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rforum("f", "F2"));
            tx.commit().await
        })
        .op("delete f", delete_forum("f"))
        .op("tx {patch f=F3, put p3}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F3"))
                .put(&rpost("f", "t", "p3"));
            tx.commit().await
        })
        .run();
}

/// A transaction putting the thread (a source and a target) races its delete and a
/// rename of the forum, with a new post.
#[test]
fn tx_intermediate_put_vs_delete_and_rename() {
    sim("tx {put thread f/t=T2} vs delete thread f/t vs patch f=F2 vs put post p3")
        .op("tx {put f/t=T2}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rthread("f", "t", "T2"));
            tx.commit().await
        })
        .op("delete f/t", delete_thread("f"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .op("put post p3", put_post("f", "t", "p3"))
        .run();
}

/// An untyped put at the forum's path races its delete and a new thread.
#[test]
fn untyped_put_at_source_vs_delete() {
    sim("tree.put R/f=F2 vs delete f vs put thread f/n")
        .op("tree.put R/f=F2", |t| async move {
            t.put(["R", "f"], &rforum("f", "F2")).await
        })
        .op("delete f", delete_forum("f"))
        .op("put thread f/n", put_thread("f", "n", "N1"))
        .run();
}

/// A delete of the intermediate races a new post under it (checks against the thread's
/// absence and tombstone) and a rename of the forum.
#[test]
fn delete_intermediate_vs_new_post_and_rename() {
    sim("delete thread f/t vs put post f/t/p3 vs patch f=F2")
        .op("delete f/t", delete_thread("f"))
        .op("put post p3", put_post("f", "t", "p3"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}

/// As `delete_intermediate_vs_new_post_and_rename` with a retitle (the post's direct source) instead of the forum's rename.
#[test]
fn delete_intermediate_vs_new_post_and_retitle() {
    sim("delete thread f/t vs put post f/t/p3 vs patch title=T2")
        .op("delete f/t", delete_thread("f"))
        .op("put post p3", put_post("f", "t", "p3"))
        .op("patch title=T2", patch_title("f", "T2"))
        .run();
}

/// An update of the thread (condition: exists) races its delete and a rename.
#[test]
fn update_thread_vs_delete_and_rename() {
    sim("update thread f/t=T2 vs delete thread f/t; put f/t=T3 vs patch f=F2")
        .op("update f/t=T2", |t| async move {
            let mut v = rthread("f", "t", "T2");
            t.repo::<RThread>().update(&mut v).await
        })
        .op("delete f/t; put f/t=T3", recreate_thread("T3"))
        .op("patch f=F2", patch_forum("f", "F2"))
        .run();
}
