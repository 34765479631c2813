//! Interleaving scenarios of the inline propagation of denormalized fields (issue 9, first
//! step): two renames of one source racing each other and the creation of a target below it,
//! with one fault per schedule. After every schedule: the invariants of the tree (checked by
//! the simulator), and every copy equal to its source's final value.
//!
//! The `chain_*` scenarios (an outside review; findings in `/work/notes/denorm-review.md`) use a
//! chain over three levels (a post copies its thread's title and its thread's copy of the
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
use dynatree_testing::sim::{End, Sim, SimFault, Stored};
use serde::{Deserialize, Serialize};

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

fn text(end: &End<'_>, path: [&str; 2], attr: &str) -> Option<String> {
    text4(end, &path, attr)
}

fn text4(end: &End<'_>, path: &[&str], attr: &str) -> Option<String> {
    match end.model.get(path.to_vec())? {
        Stored::Object(item) => item.get_s(attr).map(str::to_owned),
        Stored::Link(_) => None,
    }
}

/// Every thread's copy equals the forum's final name.
fn copies_follow(end: &End<'_>) -> Result<(), String> {
    let name = text(end, ["F", "f"], "name");
    for t in ["a", "b"] {
        let path = ["F", "f", "T", t];
        if end.model.get(path.to_vec()).is_none() {
            continue;
        }
        let copy = text4(end, &path, "forum_name");
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
// A chain over three levels (outside review of issue 9): a post copies its thread's title and
// its thread's copy of the forum's name.

use std::cell::RefCell;
use std::rc::Rc;

use dynatree::{LinkPolicy, Propagation};
use dynatree_testing::sim::{Model, SimStorage};
use dynatree_testing::{Fault, FaultRule, Op, StreamFaults};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "C/{forum}")]
struct CForum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "C/{forum}/T/{thread}")]
struct CThread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = CForum::name)]
    forum_name: Option<String>,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "C/{forum}/T/{thread}/P/{post}")]
struct CPost {
    forum: String,
    thread: String,
    post: String,
    #[dynatree(from = CThread::title)]
    thread_title: Option<String>,
    #[dynatree(from = CThread::forum_name)]
    forum_name: Option<String>,
}

fn cforum(id: &str, name: &str) -> CForum {
    CForum {
        forum: id.into(),
        name: name.into(),
    }
}

fn cthread(forum: &str, id: &str, title: &str) -> CThread {
    CThread {
        forum: forum.into(),
        thread: id.into(),
        title: title.into(),
        forum_name: None,
    }
}

fn cpost(forum: &str, thread: &str, id: &str) -> CPost {
    CPost {
        forum: forum.into(),
        thread: thread.into(),
        post: id.into(),
        thread_title: None,
        forum_name: None,
    }
}

fn rename_forum(id: &str, name: &str) -> Patch<CForum> {
    Patch::new(&cforum(id, "").key()).set(CForum::FIELDS.name, name.to_owned())
}

/// The builder of every process's tree in the chain scenarios.
fn chain_builder(s: SimStorage<FakeTable>) -> dynatree::TreeBuilder<SimStorage<FakeTable>> {
    Tree::builder(s)
        .denormalized::<CThread>()
        .denormalized::<CPost>()
}

fn chain_tree(s: SimStorage<FakeTable>) -> Tree {
    chain_builder(s).build().expect("tree")
}

/// Forums `f` ("F1") and `g` ("G1"); thread `f/t` ("T1") with posts `p1`, `p2`.
async fn chain_setup(t: Tree) -> dynatree::Result<()> {
    t.repo::<CForum>().put(&cforum("f", "F1")).await?;
    t.repo::<CForum>().put(&cforum("g", "G1")).await?;
    t.repo::<CThread>().put(&cthread("f", "t", "T1")).await?;
    t.repo::<CPost>().put(&cpost("f", "t", "p1")).await?;
    t.repo::<CPost>().put(&cpost("f", "t", "p2")).await
}

/// The string attribute `attr` of the object at `path` (`None`: no object, a link, no such
/// attribute, or null).
fn attr_of(model: &Model, path: &[String], attr: &str) -> Option<String> {
    match model.get(path.to_vec())? {
        Stored::Object(item) => item.get_s(attr).map(str::to_owned),
        Stored::Link(_) => None,
    }
}

/// Every copy of the chain equals its source's value (`None` where the source object is
/// missing): a thread's `forum_name` its forum's `name`, a post's `thread_title` and
/// `forum_name` its thread's `title` and `forum_name`.
fn chain_follows(model: &Model) -> Result<(), String> {
    let mut errors = Vec::new();
    for (path, stored) in model.objects() {
        if path.first().map(String::as_str) != Some("C") || matches!(stored, Stored::Link(_)) {
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

/// The default budget of the chain scenarios (`DYNATREE_SIM_SCHEDULES` overrides it).
const SCHEDULES: usize = 600;

/// A chain scenario: setup, one fault per schedule of every kind, time may pass. The check
/// after recovery (`resume()` from a fresh process) is unconditional: whatever failed or
/// crashed, its intent is finished by `resume`, so every copy follows its source.
fn chain_sim(name: &str) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .tree(chain_tree)
        .schedules(SCHEDULES)
        .faults(1, SimFault::all())
        .allow_wait(true)
        .setup(chain_setup)
        .check(chain_check)
}

/// [`chain_follows`] on the end of a schedule; on failure, with the versions of every object
/// row (`sv`, `dv.*`), for the diagnosis.
fn chain_check(end: &End<'_>) -> Result<(), String> {
    chain_follows(end.model).map_err(|e| format!("{e}\nversions:\n{}", versions(end.rows)))
}

/// The version attributes of every object row of the chain.
fn versions(rows: &[dynatree::Item]) -> String {
    let mut out = Vec::new();
    for r in rows {
        let (Some(key), Some("¦")) = (r.get_s("Key"), r.get_s("Child")) else {
            continue;
        };
        if !key.starts_with("¦C¦") {
            continue;
        }
        let mut attrs: Vec<String> = r
            .iter()
            .filter(|(n, _)| n.starts_with("¦sv") || n.starts_with("¦dv."))
            .map(|(n, v)| format!("{n}={v:?}"))
            .collect();
        attrs.sort();
        out.push(format!("  {key}: {}", attrs.join(" ")));
    }
    out.join("\n")
}

fn thread_path(forum: &str) -> [String; 4] {
    ["C", forum, "T", "t"].map(str::to_owned)
}

/// Scenario 1: The thread (with its posts) moves from forum `f` to forum `g` while both forums are
/// renamed: the moved copies follow `g`'s final name whichever came first (the refill, or the
/// rename's walk that sees the moved rows).
#[test]
fn chain_move_vs_renames_of_both_forums() {
    chain_sim("move f/t -> g/t vs put g=G2 vs patch f=F2")
        .op("move f/t -> g/t", |t| async move {
            t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                .await
        })
        .op("put g=G2", |t| async move {
            t.repo::<CForum>().put(&cforum("g", "G2")).await
        })
        .op("patch f=F2", |t| async move {
            t.repo::<CForum>().patch(rename_forum("f", "F2")).await
        })
        .run();
}

/// Scenario 1b: The move races a rename of the thread's title (a patch at its old path: applied
/// before, refused while it moves, or not found after) and a rename of the destination.
#[test]
fn chain_move_vs_title_and_destination_rename() {
    chain_sim("move f/t -> g/t vs patch title=T2 vs patch g=G2")
        .op("move f/t -> g/t", |t| async move {
            t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                .await
        })
        .op("patch f/t title=T2", |t| async move {
            t.repo::<CThread>()
                .patch(
                    Patch::new(&cthread("f", "t", "").key())
                        .set(CThread::FIELDS.title, "T2".to_owned()),
                )
                .await
        })
        .op("patch g=G2", |t| async move {
            t.repo::<CForum>().patch(rename_forum("g", "G2")).await
        })
        .run();
}

/// Scenario 2: two updates of one source (a put and a patch of `g`) race the move of a
/// subtree under it.
#[test]
fn chain_two_updates_of_the_destination_vs_move() {
    chain_sim("move f/t -> g/t vs put g=G2 vs patch g=G3")
        .op("move f/t -> g/t", |t| async move {
            t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                .await
        })
        .op("put g=G2", |t| async move {
            t.repo::<CForum>().put(&cforum("g", "G2")).await
        })
        .op("patch g=G3", |t| async move {
            t.repo::<CForum>().patch(rename_forum("g", "G3")).await
        })
        .run();
}

/// Scenario 3: The forum's object is deleted (its node keeps the thread below) while it is created
/// again and a new thread is put below it: the optional copies end `None` if no forum object
/// is left, else its name (a clearing never hides a later creation).
#[test]
fn chain_delete_source_vs_recreate_and_new_target() {
    chain_sim("delete forum f vs put f=F2 vs put thread f/n")
        .op("delete forum f", |t| async move {
            t.repo::<CForum>().delete(&cforum("f", "").key()).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<CForum>().put(&cforum("f", "F2")).await
        })
        .op("put thread f/n", |t| async move {
            t.repo::<CThread>().put(&cthread("f", "n", "N1")).await
        })
        .run();
}

/// Scenario 3b: as 3 without the new thread and without faults: the clearing against the
/// re-creation alone.
#[test]
fn chain_delete_source_vs_recreate() {
    chain_sim("delete forum f vs put f=F2 (no faults)")
        .faults(0, SimFault::all())
        .op("delete forum f", |t| async move {
            t.repo::<CForum>().delete(&cforum("f", "").key()).await
        })
        .op("put f=F2", |t| async move {
            t.repo::<CForum>().put(&cforum("f", "F2")).await
        })
        .run();
}

/// Scenario 4: A transaction writes the forum (a put) and a new thread below it together, racing a
/// patch of the forum.
#[test]
fn chain_transaction_source_and_target_vs_patch() {
    chain_sim("tx {put f=F2, put thread f/n} vs patch f=F3")
        .op("tx {put f=F2, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.put(&cforum("f", "F2")).put(&cthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("patch f=F3", |t| async move {
            t.repo::<CForum>().patch(rename_forum("f", "F3")).await
        })
        .run();
}

/// Scenario 4b: A transaction patches the forum and puts a new thread below it, racing a put of the
/// forum.
#[test]
fn chain_transaction_patch_and_target_vs_put() {
    chain_sim("tx {patch f=F2, put thread f/n} vs put f=F3")
        .op("tx {patch f=F2, put f/n}", |t| async move {
            let mut tx = t.transaction();
            tx.patch(rename_forum("f", "F2"))
                .put(&cthread("f", "n", "N1"));
            tx.commit().await
        })
        .op("put f=F3", |t| async move {
            t.repo::<CForum>().put(&cforum("f", "F3")).await
        })
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
        chain_sim(name)
            .faults(2, SimFault::all())
            .preemptions(None)
            .op(name, move |t| async move {
                match op {
                    0 => t.repo::<CForum>().put(&cforum("f", "F2")).await,
                    1 => t.repo::<CForum>().patch(rename_forum("f", "F2")).await,
                    2 => t
                        .move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
                        .await
                        .map(|_| ()),
                    3 => t.repo::<CThread>().put(&cthread("f", "t", "T2")).await,
                    _ => t.repo::<CForum>().delete(&cforum("f", "").key()).await,
                }
            })
            .run();
    }
}

/// Scenario 6a: Two `resume`s race each other and a new rename, over a propagation left unfinished
/// (its first copy failed: the intent stays, given up).
#[test]
fn chain_two_resumes_vs_a_new_rename() {
    let table: Rc<RefCell<Option<FakeTable>>> = Rc::default();
    let cell = Rc::clone(&table);
    Sim::new(
        "resume vs resume vs patch f=F3 (F2's propagation unfinished)",
        move || {
            let t = FakeTable::new();
            *cell.borrow_mut() = Some(t.clone());
            t
        },
    )
    .tree(chain_tree)
    .schedules(SCHEDULES)
    .faults(1, SimFault::all())
    .allow_wait(true)
    .setup(move |t| {
        let table = table.borrow().clone().expect("the backend");
        async move {
            chain_setup(t.clone()).await?;
            // The rename's first copy fails: its intent is left for `resume`.
            table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::UpdateItem));
            let failed = t.repo::<CForum>().put(&cforum("f", "F2")).await;
            table.clear_faults();
            assert!(failed.is_err(), "the propagation was to fail");
            assert_eq!(t.pending().await?.len(), 1, "one propagation left");
            Ok(())
        }
    })
    .op(
        "resume",
        |t| async move { t.resume().await.map(|r| r.len()) },
    )
    .op(
        "resume",
        |t| async move { t.resume().await.map(|r| r.len()) },
    )
    .op("patch f=F3", |t| async move {
        t.repo::<CForum>().patch(rename_forum("f", "F3")).await
    })
    .check(chain_check)
    .run();
}

/// Scenario 6b: Fan-outs beyond the inline limit (1 here: the forum has three targets below) are
/// propagated by a task in the background, under the intent: two renames and a new post
/// racing them.
#[test]
fn chain_background_propagation() {
    chain_sim("inline_limit 1: put f=F2 vs patch f=F3 vs put post f/t/p3")
        .tree(|s| chain_builder(s).inline_limit(1).build().expect("tree"))
        .op("put f=F2", |t| async move {
            t.repo::<CForum>().put(&cforum("f", "F2")).await
        })
        .op("patch f=F3", |t| async move {
            t.repo::<CForum>().patch(rename_forum("f", "F3")).await
        })
        .op("put post f/t/p3", |t| async move {
            t.repo::<CPost>().put(&cpost("f", "t", "p3")).await
        })
        .run();
}

/// Scenario 6c: a put of the thread (a target of the forum, and a source of its posts) races
/// a rename of the forum; one fault per schedule.
#[test]
fn chain_put_target_vs_rename() {
    chain_sim("put thread f/t title=T2 vs patch f=F2")
        .op("put thread f/t", |t| async move {
            t.repo::<CThread>().put(&cthread("f", "t", "T2")).await
        })
        .op("patch f=F2", |t| async move {
            t.repo::<CForum>().patch(rename_forum("f", "F2")).await
        })
        .run();
}

/// Scenario 6d: a put of a post (a pure target: no intent of its own) races a rename of its
/// thread's title; one fault per schedule.
#[test]
fn chain_put_pure_target_vs_rename() {
    chain_sim("put post f/t/p1 vs patch title=T2")
        .op("put post f/t/p1", |t| async move {
            t.repo::<CPost>().put(&cpost("f", "t", "p1")).await
        })
        .op("patch f/t title=T2", |t| async move {
            t.repo::<CThread>()
                .patch(
                    Patch::new(&cthread("f", "t", "").key())
                        .set(CThread::FIELDS.title, "T2".to_owned()),
                )
                .await
        })
        .run();
}

// ---------------------------------------------------------------------------------------------
// Stream mode: the writes only stamp; `apply_changes` propagates from the table's stream.

/// Applies the whole stream of `table` from its start (so every record already applied is
/// delivered again) with `faults`, batches of 3, until caught up; on a thread of its own (the
/// simulator's runtime is busy with the check). Returns the objects after.
fn process_stream(table: &FakeTable, faults: Option<StreamFaults>) -> Result<Model, String> {
    let table = table.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let tree = Tree::builder(table.clone())
                .denormalized::<CThread>()
                .denormalized::<CPost>()
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

/// Scenario 7: Stream mode: a rename of `f` (put), a move of its thread to `g`, a rename of `g`
/// (patch), a new thread in `f` and a processor applying what it finds meanwhile, all racing;
/// then the whole stream is applied in order, and once more from its start with redelivery,
/// duplication and delay: after each, every copy follows its source.
#[test]
fn chain_stream_mode() {
    let table: Rc<RefCell<Option<FakeTable>>> = Rc::default();
    let cell = Rc::clone(&table);
    let processor = Rc::clone(&table);
    let checked = Rc::clone(&table);
    let schedule = Rc::new(std::cell::Cell::new(0u64));
    Sim::new(
        "stream: put f=F2 vs move f/t -> g/t vs patch g=G2 vs put f/n vs processor",
        move || {
            let t = FakeTable::new();
            *cell.borrow_mut() = Some(t.clone());
            t
        },
    )
    .tree(|s| {
        chain_builder(s)
            .propagation(Propagation::Stream)
            .build()
            .expect("tree")
    })
    .schedules(SCHEDULES)
    .faults(1, SimFault::all())
    .allow_wait(true)
    .setup(chain_setup)
    .op("put f=F2", |t| async move {
        t.repo::<CForum>().put(&cforum("f", "F2")).await
    })
    .op("move f/t -> g/t", |t| async move {
        t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
            .await
            .map(|_| ())
    })
    .op("patch g=G2", |t| async move {
        t.repo::<CForum>().patch(rename_forum("g", "G2")).await
    })
    .op("put thread f/n", |t| async move {
        t.repo::<CThread>().put(&cthread("f", "n", "N1")).await
    })
    .op("processor (what it finds)", move |t| {
        let table = processor.borrow().clone().expect("the backend");
        async move {
            let mut reader = table.stream_reader();
            let mut applied = 0;
            for _ in 0..4 {
                let batch = reader.next_batch(4);
                applied += tree_apply(&t, &batch).await?;
                tokio::task::yield_now().await;
            }
            Ok(applied)
        }
    })
    .check(move |_end| {
        let table = checked.borrow().clone().expect("the backend");
        let in_order = process_stream(&table, None)?;
        chain_follows(&in_order).map_err(|e| format!("after the stream in order: {e}"))?;
        let n = schedule.get();
        schedule.set(n + 1);
        let again = process_stream(&table, Some(StreamFaults::all(n)))?;
        chain_follows(&again).map_err(|e| format!("after redelivery: {e}"))
    })
    .run();
}

async fn tree_apply(t: &Tree, batch: &[dynatree::changes::Change]) -> dynatree::Result<usize> {
    t.apply_changes(batch).await.into_result()
}
