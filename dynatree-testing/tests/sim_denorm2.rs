//! Second outside review of the denormalized-field propagation (issue 9), after the fixes of
//! the first review (tombstones, fenced transactions, the stream processor reading the stored
//! source). Findings: `/work/notes/denorm-review2.md`.
//!
//! The chain over three levels of `sim_denorm.rs` (copied here): `RForum` at `R/{forum}`,
//! `RThread` at `R/{forum}/T/{thread}` (its `forum_name` copies `RForum::name`), `RPost` at
//! `.../P/{post}` (`thread_title` copies `RThread::title`, `forum_name` copies
//! `RThread::forum_name`). Every schedule ends with the simulator's `resume()` in a fresh
//! process and its invariants, then a check that every copy equals its source (or `None` where
//! the source object is missing), whatever failed.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 600 here).

use std::cell::RefCell;
use std::rc::Rc;

use dynatree::{Hierarchical, LinkPolicy, Patch, Propagation, Tree};
use dynatree_testing::sim::{End, Model, Sim, SimFault, SimStorage, Stored};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op, StreamFaults};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "R/{forum}")]
struct RForum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "R/{forum}/T/{thread}")]
struct RThread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = RForum::name)]
    forum_name: Option<String>,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "R/{forum}/T/{thread}/P/{post}")]
struct RPost {
    forum: String,
    thread: String,
    post: String,
    #[dynatree(from = RThread::title)]
    thread_title: Option<String>,
    #[dynatree(from = RThread::forum_name)]
    forum_name: Option<String>,
}

fn rforum(id: &str, name: &str) -> RForum {
    RForum {
        forum: id.into(),
        name: name.into(),
    }
}

fn rthread(forum: &str, id: &str, title: &str) -> RThread {
    RThread {
        forum: forum.into(),
        thread: id.into(),
        title: title.into(),
        forum_name: None,
    }
}

fn rpost(forum: &str, thread: &str, id: &str) -> RPost {
    RPost {
        forum: forum.into(),
        thread: thread.into(),
        post: id.into(),
        thread_title: None,
        forum_name: None,
    }
}

fn rename_forum(id: &str, name: &str) -> Patch<RForum> {
    Patch::new(&rforum(id, "").key()).set(RForum::FIELDS.name, name.to_owned())
}

fn retitle(forum: &str, title: &str) -> Patch<RThread> {
    Patch::new(&rthread(forum, "t", "").key()).set(RThread::FIELDS.title, title.to_owned())
}

fn forum_key(id: &str) -> RForumKey {
    rforum(id, "").key()
}

fn thread_path(forum: &str) -> [String; 4] {
    ["R", forum, "T", "t"].map(str::to_owned)
}

fn builder(s: SimStorage<FakeTable>) -> dynatree::TreeBuilder<SimStorage<FakeTable>> {
    Tree::builder(s)
        .denormalized::<RThread>()
        .denormalized::<RPost>()
}

fn inline_tree(s: SimStorage<FakeTable>) -> Tree {
    builder(s).build().expect("tree")
}

fn stream_tree(s: SimStorage<FakeTable>) -> Tree {
    builder(s)
        .propagation(Propagation::Stream)
        .build()
        .expect("tree")
}

/// Forums `f` ("F1") and `g` ("G1"); thread `f/t` ("T1") with posts `p1`, `p2`.
async fn setup(t: Tree) -> dynatree::Result<()> {
    t.repo::<RForum>().put(&rforum("f", "F1")).await?;
    t.repo::<RForum>().put(&rforum("g", "G1")).await?;
    t.repo::<RThread>().put(&rthread("f", "t", "T1")).await?;
    t.repo::<RPost>().put(&rpost("f", "t", "p1")).await?;
    t.repo::<RPost>().put(&rpost("f", "t", "p2")).await
}

fn attr_of(model: &Model, path: &[String], attr: &str) -> Option<String> {
    match model.get(path.to_vec())? {
        Stored::Object(item) => item.get_s(attr).map(str::to_owned),
        Stored::Link(_) => None,
    }
}

/// Every copy equals its source's value (`None` where the source object is missing).
fn follows(model: &Model) -> Result<(), String> {
    let mut errors = Vec::new();
    for (path, stored) in model.objects() {
        if path.first().map(String::as_str) != Some("R") || matches!(stored, Stored::Link(_)) {
            continue;
        }
        let pairs: &[(&str, usize, &str)] = match path.len() {
            4 => &[("forum_name", 2, "name")],
            6 => &[
                ("thread_title", 4, "title"),
                ("forum_name", 4, "forum_name"),
            ],
            _ => &[],
        };
        for (copy, n, source) in pairs {
            let got = attr_of(model, path, copy);
            let want = attr_of(model, &path[..*n], source);
            if got != want {
                errors.push(format!(
                    "{}.{copy} is {got:?}, its source {}.{source} is {want:?}",
                    path.join("/"),
                    path[..*n].join("/")
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn check(end: &End<'_>) -> Result<(), String> {
    follows(end.model).map_err(|e| {
        format!(
            "{e}\noutcomes: {:?}\nversions:\n{}",
            end.outcomes,
            versions(end.rows)
        )
    })
}

/// The version attributes of every row under `R` (objects and tombstones).
fn versions(rows: &[dynatree::Item]) -> String {
    let mut out = Vec::new();
    for r in rows {
        let (Some(key), Some(child)) = (r.get_s("Key"), r.get_s("Child")) else {
            continue;
        };
        if !key.starts_with("¦R¦") {
            continue;
        }
        let mut attrs: Vec<String> = r
            .iter()
            .filter(|(n, _)| {
                n.starts_with("¦sv")
                    || n.starts_with("¦dv.")
                    || n.starts_with("¦cv.")
                    || *n == "name"
                    || *n == "title"
                    || *n == "forum_name"
                    || *n == "thread_title"
            })
            .map(|(n, v)| format!("{n}={v:?}"))
            .collect();
        attrs.sort();
        if attrs.is_empty() {
            continue;
        }
        out.push(format!("  {key} | {child}: {}", attrs.join(" ")));
    }
    out.join("\n")
}

const SCHEDULES: usize = 600;

/// An inline scenario: setup, one fault per schedule of every kind, time may pass, the check
/// after recovery.
fn sim(name: &str) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .tree(inline_tree)
        .schedules(SCHEDULES)
        .faults(1, SimFault::all())
        .allow_wait(true)
        .setup(setup)
        .check(check)
}

// ---------------------------------------------------------------------------------------------
// 1. Tombstones.

/// T1: a delete of the forum's object races two writers of it (a put and a patch) and a new
/// thread below it.
#[test]
fn t1_delete_vs_put_and_patch_and_new_target() {
    sim("delete f vs put f=F2 vs patch f=F3 vs put thread f/n")
        .op("delete f", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F2")).await
        })
        .op("patch f=F3", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F3")).await
        })
        .op("put thread f/n", |t| async move {
            t.repo::<RThread>().put(&rthread("f", "n", "N1")).await
        })
        .run();
}

/// T1b: as T1 with two puts and no fault: the source written by a put stamped before another
/// writer's committed version, after a delete of that version.
#[test]
fn t1b_delete_vs_two_puts() {
    sim("delete f vs put f=F2 vs put f=F3 (no faults)")
        .faults(0, SimFault::all())
        .op("delete f", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F2")).await
        })
        .op("put f=F3", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F3")).await
        })
        .run();
}

/// T2: a delete inside a transaction races a put of the source.
#[test]
fn t2_tx_delete_vs_put() {
    sim("tx {delete f} vs put f=F2")
        .op("tx {delete f}", |t| async move {
            let mut tx = t.transaction();
            tx.delete::<RForum>(&forum_key("f"));
            tx.commit().await
        })
        .op("put f=F2", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F2")).await
        })
        .run();
}

/// T2b: a transaction deleting the source and putting a new thread below it races a patch.
#[test]
fn t2b_tx_delete_and_target_vs_patch() {
    sim("tx {delete f, put thread f/n} vs patch f=F2")
        .op("tx {delete f, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.delete::<RForum>(&forum_key("f"))
                .put(&rthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("patch f=F2", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F2")).await
        })
        .run();
}

/// T3: delete, re-create and delete again in one operation, racing a put of the source.
#[test]
fn t3_delete_recreate_delete_vs_put() {
    sim("delete f; put f=F2; delete f vs put f=F3")
        .op("delete; put F2; delete", |t| async move {
            let forums = t.repo::<RForum>();
            forums.delete(&forum_key("f")).await?;
            forums.put(&rforum("f", "F2")).await?;
            forums.delete(&forum_key("f")).await
        })
        .op("put f=F3", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F3")).await
        })
        .run();
}

/// T3b: two deletes and a re-creation, each its own operation.
#[test]
fn t3b_delete_vs_recreate_vs_delete() {
    sim("delete f vs put f=F2 vs delete f")
        .op("delete f", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F2")).await
        })
        .op("delete f (2)", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .run();
}

/// T4: a delete of the destination's object races the move of a subtree under it (and a
/// rename of the destination).
#[test]
fn t4_delete_destination_vs_move() {
    sim("delete g vs move f/t -> g/t vs patch g=G2")
        .op("delete g", |t| async move {
            t.repo::<RForum>().delete(&forum_key("g")).await
        })
        .op("move f/t -> g/t", |t| async move {
            t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                .await
                .map(|_| ())
        })
        .op("patch g=G2", |t| async move {
            t.repo::<RForum>().patch(rename_forum("g", "G2")).await
        })
        .run();
}

/// T4b: a delete of the destination races a move under it and the destination's re-creation.
#[test]
fn t4b_delete_destination_vs_move_vs_recreate() {
    sim("delete g vs move f/t -> g/t vs put g=G2")
        .op("delete g", |t| async move {
            t.repo::<RForum>().delete(&forum_key("g")).await
        })
        .op("move f/t -> g/t", |t| async move {
            t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                .await
                .map(|_| ())
        })
        .op("put g=G2", |t| async move {
            t.repo::<RForum>().put(&rforum("g", "G2")).await
        })
        .run();
}

/// T5: the source is deleted while a propagation of it is pending (its rename's copies failed;
/// the intent stays), racing `resume` and a re-creation.
#[test]
fn t5_delete_with_pending_propagation() {
    let table: Rc<RefCell<Option<FakeTable>>> = Rc::default();
    let cell = Rc::clone(&table);
    Sim::new(
        "delete f vs resume vs put f=F3 (F2's propagation pending)",
        move || {
            let t = FakeTable::new();
            *cell.borrow_mut() = Some(t.clone());
            t
        },
    )
    .tree(inline_tree)
    .schedules(SCHEDULES)
    .faults(1, SimFault::all())
    .allow_wait(true)
    .setup(move |t| {
        let table = table.borrow().clone().expect("the backend");
        async move {
            setup(t.clone()).await?;
            table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::UpdateItem));
            let failed = t.repo::<RForum>().put(&rforum("f", "F2")).await;
            table.clear_faults();
            assert!(failed.is_err(), "the propagation was to fail");
            assert_eq!(t.pending().await?.len(), 1, "one propagation left");
            Ok(())
        }
    })
    .op("delete f", |t| async move {
        t.repo::<RForum>().delete(&forum_key("f")).await
    })
    .op(
        "resume",
        |t| async move { t.resume().await.map(|r| r.len()) },
    )
    .op("put f=F3", |t| async move {
        t.repo::<RForum>().put(&rforum("f", "F3")).await
    })
    .check(check)
    .run();
}

// ---------------------------------------------------------------------------------------------
// 2. Transactions.

/// X1: two transactions write the same source (and targets below it), racing a patch.
#[test]
fn x1_two_transactions_vs_patch() {
    sim("tx {put f=F2, put f/n} vs tx {patch f=F3, put post f/t/p3} vs patch f=F4")
        .op("tx {put f=F2, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rforum("f", "F2")).put(&rthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("tx {patch f=F3, put p3}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F3"))
                .put(&rpost("f", "t", "p3"));
            tx.commit().await
        })
        .op("patch f=F4", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F4")).await
        })
        .run();
}

/// X2: a transaction writes an intermediate (the thread: a target of the forum, a source of
/// its posts) and a new post under it, racing a rename of the forum and a retitle.
#[test]
fn x2_tx_source_and_target_under_it_vs_rename() {
    sim("tx {put thread f/t=T2, put post f/t/p3} vs patch f=F2 vs patch title=T3")
        .op("tx {put f/t=T2, put p3}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rthread("f", "t", "T2")).put(&rpost("f", "t", "p3"));
            tx.commit().await
        })
        .op("patch f=F2", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F2")).await
        })
        .op("patch title=T3", |t| async move {
            t.repo::<RThread>().patch(retitle("f", "T3")).await
        })
        .run();
}

/// X3: a transaction writes the forum and the thread below it together (a source, and a
/// target of it that is a source too), racing a put of the forum.
#[test]
fn x3_tx_forum_and_thread_vs_put() {
    sim("tx {patch f=F2, put thread f/t=T2} vs put f=F3")
        .op("tx {patch f=F2, put f/t=T2}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F2"))
                .put(&rthread("f", "t", "T2"));
            tx.commit().await
        })
        .op("put f=F3", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F3")).await
        })
        .run();
}

/// X4: a transaction re-creating the forum (with a new thread) races its delete and a put.
#[test]
fn x4_tx_recreate_vs_delete_vs_put() {
    sim("tx {put f=F2, put f/n} vs delete f vs put f=F3")
        .op("tx {put f=F2, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rforum("f", "F2")).put(&rthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("delete f", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .op("put f=F3", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F3")).await
        })
        .run();
}

/// X4b: as X4 without the put: the transaction's own stamp (taken right before its commit,
/// after the tombstone it read) against the delete.
#[test]
fn x4b_tx_recreate_vs_delete() {
    sim("tx {put f=F2, put f/n} vs delete f")
        .op("tx {put f=F2, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&rforum("f", "F2")).put(&rthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("delete f", |t| async move {
            t.repo::<RForum>().delete(&forum_key("f")).await
        })
        .run();
}

// ---------------------------------------------------------------------------------------------
// 3. Chains with `cv` versions.

/// C1: a retitle of the intermediate races a rename of the top source and a move of the
/// intermediate.
#[test]
fn c1_retitle_vs_rename_vs_move() {
    sim("patch title=T2 vs patch f=F2 vs move f/t -> g/t")
        .op("patch title=T2", |t| async move {
            t.repo::<RThread>().patch(retitle("f", "T2")).await
        })
        .op("patch f=F2", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F2")).await
        })
        .op("move f/t -> g/t", |t| async move {
            t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                .await
                .map(|_| ())
        })
        .run();
}

/// C2: a put of the intermediate (a new own version) races a rename of the top source and a
/// retitle.
#[test]
fn c2_put_intermediate_vs_rename_vs_retitle() {
    sim("put thread f/t=T2 vs put f=F2 vs patch title=T3")
        .op("put thread f/t=T2", |t| async move {
            t.repo::<RThread>().put(&rthread("f", "t", "T2")).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F2")).await
        })
        .op("patch title=T3", |t| async move {
            t.repo::<RThread>().patch(retitle("f", "T3")).await
        })
        .run();
}

/// C3: a put of the intermediate races two renames of the top source (no faults: pure
/// interleaving).
#[test]
fn c3_put_intermediate_vs_two_renames() {
    sim("put thread f/t=T2 vs put f=F2 vs patch f=F3 (no faults)")
        .faults(0, SimFault::all())
        .op("put thread f/t=T2", |t| async move {
            t.repo::<RThread>().put(&rthread("f", "t", "T2")).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<RForum>().put(&rforum("f", "F2")).await
        })
        .op("patch f=F3", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F3")).await
        })
        .run();
}

/// C4: the intermediate is deleted and put again while the top source is renamed.
#[test]
fn c4_delete_and_recreate_intermediate_vs_rename() {
    sim("delete thread f/t; put f/t=T2 vs patch f=F2")
        .op("delete f/t; put f/t=T2", |t| async move {
            let threads = t.repo::<RThread>();
            threads.delete(&rthread("f", "t", "").key()).await?;
            threads.put(&rthread("f", "t", "T2")).await
        })
        .op("patch f=F2", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F2")).await
        })
        .run();
}

/// C5: no race at all: the forum is renamed, then the thread (an intermediate) is deleted.
/// The posts' chained `forum_name` must be cleared (their thread object is gone).
#[test]
fn c5_rename_then_delete_intermediate() {
    sim("patch f=F2; delete thread f/t (one op, no faults)")
        .faults(0, SimFault::all())
        .op("patch f=F2; delete f/t", |t| async move {
            t.repo::<RForum>().patch(rename_forum("f", "F2")).await?;
            t.repo::<RThread>()
                .delete(&rthread("f", "t", "").key())
                .await
        })
        .run();
}

// ---------------------------------------------------------------------------------------------
// 4. Stream mode.

/// Applies the whole stream of `table` from its start with `faults`, batches of 3, until caught
/// up, on a thread of its own. Returns the objects after.
fn process_stream(table: &FakeTable, faults: Option<StreamFaults>) -> Result<Model, String> {
    let table = table.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let tree = Tree::builder(table.clone())
                .denormalized::<RThread>()
                .denormalized::<RPost>()
                .propagation(Propagation::Stream)
                .build()
                .map_err(|e| e.to_string())?;
            let mut reader = table.stream_reader();
            if let Some(f) = faults {
                reader = reader.with_faults(f);
            }
            let mut batches = 0;
            while !reader.is_caught_up() {
                let batch = reader.next_batch(3);
                tree.apply_changes(&batch)
                    .await
                    .into_result()
                    .map_err(|e| format!("apply_changes failed: {e}"))?;
                batches += 1;
                if batches > 10_000 {
                    return Err("the stream does not settle".to_owned());
                }
            }
            Ok(Model::from_rows(&table.rows(), tree.reserved()))
        })
    })
    .join()
    .map_err(|_| "the stream processor panicked".to_owned())?
}

/// A stream scenario: the writes only stamp; one processor op applies what it finds while
/// they run; after the schedule, the whole stream in order, then again from its start with
/// redelivery, duplication and delay.
fn stream_sim(name: &str) -> (Sim<FakeTable>, Rc<RefCell<Option<FakeTable>>>) {
    let table: Rc<RefCell<Option<FakeTable>>> = Rc::default();
    let cell = Rc::clone(&table);
    let checked = Rc::clone(&table);
    let schedule = Rc::new(std::cell::Cell::new(0u64));
    let sim = Sim::new(name, move || {
        let t = FakeTable::new();
        *cell.borrow_mut() = Some(t.clone());
        t
    })
    .tree(stream_tree)
    .schedules(SCHEDULES)
    .faults(1, SimFault::all())
    .allow_wait(true)
    .setup(setup)
    .check(move |end| {
        let table = checked.borrow().clone().expect("the backend");
        let in_order = process_stream(&table, None)?;
        follows(&in_order).map_err(|e| {
            format!(
                "after the stream in order: {e}\noutcomes: {:?}\nversions:\n{}",
                end.outcomes,
                versions(&table.rows())
            )
        })?;
        let n = schedule.get();
        schedule.set(n + 1);
        let again = process_stream(&table, Some(StreamFaults::all(n)))?;
        follows(&again).map_err(|e| {
            format!(
                "after redelivery (seed {n}): {e}\nversions:\n{}",
                versions(&table.rows())
            )
        })
    });
    (sim, table)
}

/// The processor op: applies up to four batches of what it finds, as the writes go on.
fn processor(
    table: Rc<RefCell<Option<FakeTable>>>,
) -> impl Fn(Tree) -> futures::future::LocalBoxFuture<'static, dynatree::Result<usize>> {
    move |t| {
        let table = table.borrow().clone().expect("the backend");
        Box::pin(async move {
            let mut reader = table.stream_reader();
            let mut applied = 0;
            for _ in 0..4 {
                let batch = reader.next_batch(4);
                applied += t.apply_changes(&batch).await.into_result()?;
                tokio::task::yield_now().await;
            }
            Ok(applied)
        })
    }
}

/// S1: stream mode: a delete of the forum, its re-creation, a new thread and the processor.
#[test]
fn s1_stream_delete_recreate() {
    let (sim, table) = stream_sim("stream: delete f vs put f=F2 vs put thread f/n vs processor");
    sim.op("delete f", |t| async move {
        t.repo::<RForum>().delete(&forum_key("f")).await
    })
    .op("put f=F2", |t| async move {
        t.repo::<RForum>().put(&rforum("f", "F2")).await
    })
    .op("put thread f/n", |t| async move {
        t.repo::<RThread>().put(&rthread("f", "n", "N1")).await
    })
    .op("processor", processor(table))
    .run();
}

/// S2: stream mode: a move under a forum that is deleted meanwhile, a retitle, the processor.
#[test]
fn s2_stream_move_vs_delete_destination() {
    let (sim, table) =
        stream_sim("stream: move f/t -> g/t vs delete g vs patch title vs processor");
    sim.op("move f/t -> g/t", |t| async move {
        t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
            .await
            .map(|_| ())
    })
    .op("delete g", |t| async move {
        t.repo::<RForum>().delete(&forum_key("g")).await
    })
    .op("patch g/t title=T2", |t| async move {
        t.repo::<RThread>().patch(retitle("g", "T2")).await
    })
    .op("processor", processor(table))
    .run();
}

/// S3: stream mode: delete, re-create and delete again in one op, a delete of the thread and
/// its re-creation in another, and the processor.
#[test]
fn s3_stream_delete_recreate_delete_and_thread() {
    let (sim, table) =
        stream_sim("stream: delete; put F2; delete f vs delete f/t; put f/t=T2 vs processor");
    sim.op("delete f; put F2; delete f", |t| async move {
        let forums = t.repo::<RForum>();
        forums.delete(&forum_key("f")).await?;
        forums.put(&rforum("f", "F2")).await?;
        forums.delete(&forum_key("f")).await
    })
    .op("delete f/t; put f/t=T2", |t| async move {
        let threads = t.repo::<RThread>();
        threads.delete(&rthread("f", "t", "").key()).await?;
        threads.put(&rthread("f", "t", "T2")).await
    })
    .op("processor", processor(table))
    .run();
}

/// S4: stream mode: two writers of the forum and its delete, with the processor.
#[test]
fn s4_stream_delete_vs_two_writers() {
    let (sim, table) = stream_sim("stream: delete f vs put f=F2 vs patch f=F3 vs processor");
    sim.op("delete f", |t| async move {
        t.repo::<RForum>().delete(&forum_key("f")).await
    })
    .op("put f=F2", |t| async move {
        t.repo::<RForum>().put(&rforum("f", "F2")).await
    })
    .op("patch f=F3", |t| async move {
        t.repo::<RForum>().patch(rename_forum("f", "F3")).await
    })
    .op("processor", processor(table))
    .run();
}
