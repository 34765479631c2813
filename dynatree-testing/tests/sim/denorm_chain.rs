//! The chain over three levels shared by the simulations of the denormalized-field
//! propagation (the modules of `denorm` and `check`): `RForum` at
//! `R/{forum}`, `RThread` at `R/{forum}/T/{thread}` (its `forum_name` copies `RForum::name`),
//! `RPost` at `.../P/{post}` (`thread_title` copies `RThread::title`, `forum_name` copies
//! `RThread::forum_name`); their constructors, the trees, the setup, the check that every copy
//! equals its source, the `Sim` builders (inline, stream, a propagation left pending), the
//! stream processor, and the operations the scenarios race.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use dynatree::{Hierarchical, Patch, Tree, denorm::Propagation, ops::LinkPolicy, ops::MoveReport};
use dynatree_testing::sim::{End, Model, Sim, SimFault, SimStorage, Stored};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op, StreamFaults};
use futures::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "R/{forum}")]
pub struct RForum {
    pub forum: String,
    pub name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "R/{forum}/T/{thread}")]
pub struct RThread {
    pub forum: String,
    pub thread: String,
    pub title: String,
    #[dynatree(from = RForum::name)]
    pub forum_name: Option<String>,
}

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "R/{forum}/T/{thread}/P/{post}")]
pub struct RPost {
    pub forum: String,
    pub thread: String,
    pub post: String,
    #[dynatree(from = RThread::title)]
    pub thread_title: Option<String>,
    #[dynatree(from = RThread::forum_name)]
    pub forum_name: Option<String>,
}

pub fn rforum(id: &str, name: &str) -> RForum {
    RForum {
        forum: id.into(),
        name: name.into(),
    }
}

pub fn rthread(forum: &str, id: &str, title: &str) -> RThread {
    RThread {
        forum: forum.into(),
        thread: id.into(),
        title: title.into(),
        forum_name: None,
    }
}

pub fn rpost(forum: &str, thread: &str, id: &str) -> RPost {
    RPost {
        forum: forum.into(),
        thread: thread.into(),
        post: id.into(),
        thread_title: None,
        forum_name: None,
    }
}

/// A patch renaming forum `id`.
pub fn rename_forum(id: &str, name: &str) -> Patch<RForum> {
    Patch::new(&forum_key(id)).set(RForum::FIELDS.name, name.to_owned())
}

/// A patch of the title of thread `t` in `forum`.
pub fn retitle(forum: &str, title: &str) -> Patch<RThread> {
    Patch::new(&thread_key(forum)).set(RThread::FIELDS.title, title.to_owned())
}

pub fn forum_key(id: &str) -> RForumKey {
    rforum(id, "").key()
}

/// The key of thread `t` in `forum`.
pub fn thread_key(forum: &str) -> RThreadKey {
    rthread(forum, "t", "").key()
}

/// The path of thread `t` in `forum`.
pub fn thread_path(forum: &str) -> [String; 4] {
    ["R", forum, "T", "t"].map(str::to_owned)
}

/// The builder of every process's tree.
pub fn builder(s: SimStorage<FakeTable>) -> dynatree::TreeBuilder<SimStorage<FakeTable>> {
    Tree::builder(s)
        .denormalized::<RThread>()
        .denormalized::<RPost>()
}

pub fn inline_tree(s: SimStorage<FakeTable>) -> Tree {
    builder(s).build().expect("tree")
}

pub fn stream_tree(s: SimStorage<FakeTable>) -> Tree {
    builder(s)
        .propagation(Propagation::Stream)
        .build()
        .expect("tree")
}

/// Forums `f` ("F1") and `g` ("G1"); thread `f/t` ("`delete_vs_put_and_patch_and_new_target`") with posts `p1`, `p2`.
pub async fn setup(t: Tree) -> dynatree::Result<()> {
    t.repo::<RForum>().put(&rforum("f", "F1")).await?;
    t.repo::<RForum>().put(&rforum("g", "G1")).await?;
    t.repo::<RThread>().put(&rthread("f", "t", "T1")).await?;
    t.repo::<RPost>().put(&rpost("f", "t", "p1")).await?;
    t.repo::<RPost>().put(&rpost("f", "t", "p2")).await
}

/// The string attribute `attr` of the object at `path` (`None`: no object, a link, no such
/// attribute, or null).
pub fn attr_of<S: AsRef<str>>(model: &Model, path: &[S], attr: &str) -> Option<String> {
    match model.get(path)? {
        Stored::Object(item) => item.get_s(attr).map(str::to_owned),
        Stored::Link(_) => None,
    }
}

/// Every copy of the chain equals its source's value (`None` where the source object is
/// missing, a link included): a thread's `forum_name` its forum's `name`, a post's
/// `thread_title` and `forum_name` its thread's `title` and `forum_name`.
pub fn follows(model: &Model) -> Result<(), String> {
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

/// [`follows`] on the end of a schedule; on failure, with the outcomes and the versions of
/// every row, for the diagnosis.
pub fn check(end: &End<'_>) -> Result<(), String> {
    follows(end.model).map_err(|e| {
        format!(
            "{e}\noutcomes: {:?}\nversions:\n{}",
            end.outcomes,
            versions(end.rows)
        )
    })
}

/// The version attributes of every row under `R` (objects and tombstones).
pub fn versions(rows: &[dynatree::storage::Item]) -> String {
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

/// The default budget of a scenario (`DYNATREE_SIM_SCHEDULES` overrides it).
pub const SCHEDULES: usize = 600;

/// An inline scenario: setup, one fault per schedule of every kind, time may pass. The check
/// after recovery (`resume()` from a fresh process) is unconditional: whatever failed or
/// crashed, its intent is finished by `resume`, so every copy follows its source.
pub fn sim(name: &str) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .tree(inline_tree)
        .schedules(SCHEDULES)
        .faults(1, SimFault::all())
        .allow_wait(true)
        .setup(setup)
        .check(check)
}

/// The same scenario without faults (pure interleaving).
pub fn sim0(name: &str) -> Sim<FakeTable> {
    sim(name).faults(0, SimFault::all())
}

/// The backend of the schedule running, kept by [`sim_keeping_table`].
pub type Backend = Rc<RefCell<Option<FakeTable>>>;

/// A bare `Sim` on a `FakeTable` that it keeps in the returned cell for each schedule.
fn sim_keeping_table(name: &str) -> (Sim<FakeTable>, Backend) {
    let table: Backend = Rc::default();
    let cell = Rc::clone(&table);
    let sim = Sim::new(name, move || {
        let t = FakeTable::new();
        *cell.borrow_mut() = Some(t.clone());
        t
    });
    (sim, table)
}

/// An inline scenario over a propagation left unfinished: after [`setup`], a put of `f=F2`
/// whose first copy fails (its intent stays, given up, for `resume`).
pub fn pending_sim(name: &str) -> Sim<FakeTable> {
    let (sim, table) = sim_keeping_table(name);
    sim.tree(inline_tree)
        .schedules(SCHEDULES)
        .faults(1, SimFault::all())
        .allow_wait(true)
        .setup(move |t| {
            let table = table.borrow().clone().expect("the backend");
            async move {
                setup(t.clone()).await?;
                // The rename's first copy fails: its intent is left for `resume`.
                table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::UpdateItem));
                let failed = t.repo::<RForum>().put(&rforum("f", "F2")).await;
                table.clear_faults();
                assert!(failed.is_err(), "the propagation was to fail");
                assert_eq!(t.pending().await?.len(), 1, "one propagation left");
                Ok(())
            }
        })
        .check(check)
}

/// Applies the whole stream of `table` from its start (so every record already applied is
/// delivered again) with `faults`, batches of 3, until caught up; on a thread of its own (the
/// simulator's runtime is busy with the check). Returns the objects after.
pub fn process_stream(table: &FakeTable, faults: Option<StreamFaults>) -> Result<Model, String> {
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

/// A stream scenario: the writes only stamp; one processor op (see [`processor`]) applies what
/// it finds while they run; after the schedule, the whole stream in order, then again from its
/// start with redelivery, duplication and delay: after each, every copy follows its source.
pub fn stream_sim(name: &str) -> (Sim<FakeTable>, Backend) {
    let (sim, table) = sim_keeping_table(name);
    let checked = Rc::clone(&table);
    let schedule = Rc::new(Cell::new(0u64));
    let sim = sim
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

/// The future of an operation.
pub type OpFuture<T = ()> = LocalBoxFuture<'static, dynatree::Result<T>>;

/// The processor op: applies up to four batches of what it finds, as the writes go on.
pub fn processor(table: Backend) -> impl Fn(Tree) -> OpFuture<usize> {
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

// ---------------------------------------------------------------------------------------------
// The operations the scenarios race.

/// A put of forum `id` named `name`.
pub fn put_forum(id: &'static str, name: &'static str) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RForum>().put(&rforum(id, name)).await })
}

/// A patch renaming forum `id` to `name`.
pub fn patch_forum(id: &'static str, name: &'static str) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RForum>().patch(rename_forum(id, name)).await })
}

/// A delete of forum `id`'s object.
pub fn delete_forum(id: &'static str) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RForum>().delete(&forum_key(id)).await })
}

/// A put of thread `forum/id` titled `title`.
pub fn put_thread(
    forum: &'static str,
    id: &'static str,
    title: &'static str,
) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RThread>().put(&rthread(forum, id, title)).await })
}

/// A patch of the title of thread `forum/t`.
pub fn patch_title(forum: &'static str, title: &'static str) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RThread>().patch(retitle(forum, title)).await })
}

/// A delete of thread `forum/t`'s object.
pub fn delete_thread(forum: &'static str) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RThread>().delete(&thread_key(forum)).await })
}

/// A put of post `forum/thread/id`.
pub fn put_post(
    forum: &'static str,
    thread: &'static str,
    id: &'static str,
) -> impl Fn(Tree) -> OpFuture {
    move |t| Box::pin(async move { t.repo::<RPost>().put(&rpost(forum, thread, id)).await })
}

/// The move of thread `f/t` (with its posts) to `g/t`, links ignored; returns its report.
pub async fn move_thread_report(t: Tree) -> dynatree::Result<MoveReport> {
    t.move_subtree_with(thread_path("f"), thread_path("g"), LinkPolicy::Ignore)
        .await
}

/// [`move_thread_report`], returning nothing.
pub async fn move_thread(t: Tree) -> dynatree::Result<()> {
    move_thread_report(t).await.map(|_| ())
}

/// A transaction putting forum `f` named "F2" and a new thread `f/n` ("N1") below it.
pub async fn tx_put_forum_and_new_thread(t: Tree) -> dynatree::Result<()> {
    let mut tx = t.transaction();
    tx.put(&rforum("f", "F2")).put(&rthread("f", "n", "N1"));
    tx.commit().await
}

/// In one operation: a delete of forum `f`, its re-creation named "F2", a delete again.
pub async fn delete_recreate_delete_forum(t: Tree) -> dynatree::Result<()> {
    let forums = t.repo::<RForum>();
    forums.delete(&forum_key("f")).await?;
    forums.put(&rforum("f", "F2")).await?;
    forums.delete(&forum_key("f")).await
}

/// In one operation: a delete of thread `f/t`, then a put of it titled `title`.
pub fn recreate_thread(title: &'static str) -> impl Fn(Tree) -> OpFuture {
    move |t| {
        Box::pin(async move {
            let threads = t.repo::<RThread>();
            threads.delete(&thread_key("f")).await?;
            threads.put(&rthread("f", "t", title)).await
        })
    }
}
