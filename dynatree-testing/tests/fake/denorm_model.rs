//! The model test of denormalized fields: random sequences of source renames, title
//! patches, creations, moves of subtrees under other sources and removals of sources,
//! propagated inline (with a failed request at a chosen index in every step, then `resume`)
//! and by the stream processor (batches redelivered, duplicated and delayed, a failed request
//! while applying them, the batch delivered again from the failed record). After every step,
//! no copy went backwards (its version never decreases while its object lives); at the end,
//! every copy equals what its sources hold.
//!
//! Budget: `DYNATREE_MODEL_CASES` sequences per mode (default 24), each of 12 steps.

use std::collections::HashMap;

use dynatree::{Hierarchical, Patch, Tree, denorm::Propagation, storage::Item, storage::Value};
use dynatree_testing::{FakeStream, FakeTable, Fault, Faulty, StreamFaults};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "F/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "F/{forum}/T/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "F/{forum}/T/{thread}/P/{post}")]
struct Post {
    forum: String,
    thread: String,
    post: String,
    #[dynatree(from = Thread::title)]
    thread_title: Option<String>,
    #[dynatree(from = Thread::forum_name)]
    forum_name: Option<String>,
}

const FORUMS: [&str; 2] = ["f", "g"];
const THREADS: [&str; 2] = ["t", "u"];

fn cases() -> u64 {
    std::env::var("DYNATREE_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    Rename(usize, u32),
    Title(usize, usize, u32),
    NewThread(usize, usize),
    NewPost(usize, usize, u32),
    Move(usize, usize),
    RemoveForum(usize),
}

fn random_step(rng: &mut fastrand::Rng) -> Step {
    let f = rng.usize(..FORUMS.len());
    let t = rng.usize(..THREADS.len());
    match rng.u8(..10) {
        0..=2 => Step::Rename(f, rng.u32(..1000)),
        3 => Step::Title(f, t, rng.u32(..1000)),
        4 => Step::NewThread(f, t),
        5 | 6 => Step::NewPost(f, t, rng.u32(..4)),
        7 | 8 => Step::Move(t, rng.usize(..FORUMS.len())),
        _ => Step::RemoveForum(f),
    }
}

/// Runs `step`; errors are the step's own business (a move to a taken place, a patch of a
/// missing thread, an injected fault): the final state is what the check compares.
async fn run(tree: &Tree, step: &Step) -> dynatree::Result<()> {
    match *step {
        Step::Rename(f, n) => {
            tree.repo::<Forum>()
                .put(&Forum {
                    forum: FORUMS[f].into(),
                    name: format!("forum {n}"),
                })
                .await
        }
        Step::Title(f, t, n) => {
            let key = ThreadKey {
                forum: FORUMS[f].into(),
                thread: THREADS[t].into(),
            };
            tree.repo::<Thread>()
                .patch(Patch::new(&key).set(Thread::FIELDS.title, format!("title {n}")))
                .await
        }
        Step::NewThread(f, t) => {
            tree.repo::<Thread>()
                .put(&Thread {
                    forum: FORUMS[f].into(),
                    thread: THREADS[t].into(),
                    title: "new".into(),
                    forum_name: None,
                })
                .await
        }
        Step::NewPost(f, t, p) => {
            tree.repo::<Post>()
                .put(&Post {
                    forum: FORUMS[f].into(),
                    thread: THREADS[t].into(),
                    post: format!("p{p}"),
                    thread_title: None,
                    forum_name: None,
                })
                .await
        }
        Step::Move(t, to) => {
            // The thread wherever it is now, to the other forum.
            for from in FORUMS {
                if from != FORUMS[to] {
                    match tree
                        .move_subtree(
                            ["F", from, "T", THREADS[t]],
                            ["F", FORUMS[to], "T", THREADS[t]],
                        )
                        .await
                    {
                        Err(e) if e.is_not_found() || e.is_already_exists() => {}
                        other => return other.map(|_| ()),
                    }
                }
            }
            Ok(())
        }
        Step::RemoveForum(f) => {
            tree.repo::<Forum>()
                .delete(&ForumKey {
                    forum: FORUMS[f].into(),
                })
                .await
        }
    }
}

/// The object rows of the table by path (components joined by `/`), bookkeeping included.
fn objects(table: &FakeTable) -> HashMap<String, Item> {
    table
        .rows()
        .into_iter()
        .filter(|r| r.get_s("Child") == Some("¦"))
        .filter_map(|r| {
            let key = r.get_s("Key")?.to_owned();
            let path = key.strip_prefix('¦')?.replace('¦', "/");
            Some((path, r))
        })
        .collect()
}

fn s(row: &Item, attr: &str) -> Option<String> {
    match row.get(attr) {
        Some(Value::S(v)) => Some(v.clone()),
        _ => None,
    }
}

fn version(row: &Item, attr: &str) -> Option<u64> {
    match row.get(&format!("¦dv.{attr}")) {
        Some(Value::N(n)) => n.parse().ok(),
        _ => None,
    }
}

/// No copy's version decreased since `before` for an object that lived throughout (present
/// in both snapshots, and not rewritten by a move: a moved row is a new row).
fn no_regression(
    before: &HashMap<String, Item>,
    after: &HashMap<String, Item>,
) -> Result<(), String> {
    for (path, row) in after {
        let Some(old) = before.get(path) else {
            continue;
        };
        for attr in ["forum_name", "thread_title"] {
            if let (Some(a), Some(b)) = (version(old, attr), version(row, attr))
                && b < a
            {
                return Err(format!(
                    "{path}: copy {attr} went back from version {a} to {b}"
                ));
            }
        }
    }
    Ok(())
}

/// Every copy equals what its sources hold now.
fn copies_follow(objects: &HashMap<String, Item>) -> Result<(), String> {
    for (path, row) in objects {
        let parts: Vec<&str> = path.split('/').collect();
        let forum = objects.get(&parts[..2].join("/"));
        let forum_name = forum.and_then(|f| s(f, "name"));
        match parts.len() {
            4 if s(row, "forum_name") != forum_name => {
                return Err(format!(
                    "{path}: forum_name {:?}, the forum holds {forum_name:?}",
                    s(row, "forum_name")
                ));
            }
            6 => {
                let thread = objects.get(&parts[..4].join("/"));
                let title = thread.and_then(|t| s(t, "title"));
                let thread_copy = thread.and_then(|t| s(t, "forum_name"));
                if s(row, "thread_title") != title || s(row, "forum_name") != thread_copy {
                    return Err(format!(
                        "{path}: ({:?}, {:?}), the thread holds ({title:?}, {thread_copy:?})",
                        s(row, "thread_title"),
                        s(row, "forum_name")
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn tree_on<S: dynatree::storage::Storage + 'static>(storage: S, propagation: Propagation) -> Tree {
    Tree::builder(storage)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .propagation(propagation)
        .build()
        .expect("tree")
}

async fn setup(tree: &Tree) {
    tree.create_table().await.expect("table");
    for f in FORUMS {
        tree.repo::<Forum>()
            .put(&Forum {
                forum: f.into(),
                name: format!("forum {f}"),
            })
            .await
            .expect("forum");
    }
}

/// Inline propagation: in every step one request (at an index drawn per step, possibly past
/// the step's last request) fails; then `resume` finishes what the failure left.
#[tokio::test(start_paused = true)]
async fn inline_propagation_matches_the_model_under_failures() {
    for case in 0..cases() {
        let mut rng = fastrand::Rng::with_seed(case);
        let table = Faulty::new(FakeTable::new());
        let tree = tree_on(table.clone(), Propagation::Inline);
        setup(&tree).await;
        let mut before = objects(table.inner());
        let mut trace = Vec::new();
        for _ in 0..12 {
            let step = random_step(&mut rng);
            let fault = rng.u64(..12);
            trace.push((step.clone(), fault));
            table.inject(
                fault,
                if rng.bool() {
                    Fault::Fail
                } else {
                    Fault::FailAfterApply
                },
            );
            let _ = run(&tree, &step).await;
            table.clear_faults();
            tree.resume()
                .await
                .unwrap_or_else(|e| panic!("case {case}: resume: {e} after {trace:?}"));
            let after = objects(table.inner());
            no_regression(&before, &after)
                .unwrap_or_else(|e| panic!("case {case}: {e} after {trace:?}"));
            before = after;
        }
        assert!(tree.pending().await.unwrap().is_empty(), "case {case}");
        copies_follow(&before).unwrap_or_else(|e| panic!("case {case}: {e} after {trace:?}"));
    }
}

/// Applies batches of `reader` until it is caught up; a batch that fails is delivered again
/// from its failed record (what a Lambda does with a partial-batch response).
async fn drain(
    tree: &Tree,
    reader: &mut FakeStream,
    table: &Faulty<FakeTable>,
    rng: &mut fastrand::Rng,
) {
    loop {
        let batch = reader.next_batch(1 + rng.usize(..6));
        if batch.is_empty() {
            return;
        }
        let mut from = 0;
        while from < batch.len() {
            if rng.u8(..4) == 0 {
                table.inject(rng.u64(..6), Fault::Fail);
            }
            let applied = tree.apply_changes(&batch[from..]).await;
            table.clear_faults();
            match applied.failure() {
                None => from = batch.len(),
                Some(f) => from += f.index(),
            }
        }
    }
}

/// Stream propagation: the writes only stamp; the records (redelivered, duplicated, delayed,
/// seeded) are applied at random points, with failures; at the end everything is applied.
#[tokio::test(start_paused = true)]
async fn stream_propagation_matches_the_model_under_faults() {
    for case in 0..cases() {
        let mut rng = fastrand::Rng::with_seed(1_000 + case);
        let table = Faulty::new(FakeTable::new());
        let tree = tree_on(table.clone(), Propagation::Stream);
        setup(&tree).await;
        let mut reader = table
            .inner()
            .stream_reader()
            .with_faults(StreamFaults::all(case));
        let mut before = objects(table.inner());
        let mut trace = Vec::new();
        for _ in 0..12 {
            let step = random_step(&mut rng);
            trace.push(step.clone());
            run(&tree, &step).await.ok();
            if rng.bool() {
                drain(&tree, &mut reader, &table, &mut rng).await;
            }
            let after = objects(table.inner());
            no_regression(&before, &after)
                .unwrap_or_else(|e| panic!("case {case}: {e} after {trace:?}"));
            before = after;
        }
        drain(&tree, &mut reader, &table, &mut rng).await;
        let end = objects(table.inner());
        no_regression(&before, &end).unwrap_or_else(|e| panic!("case {case}: {e} after {trace:?}"));
        copies_follow(&end).unwrap_or_else(|e| panic!("case {case}: {e} after {trace:?}"));
        // The whole stream once more from the start: nothing moves.
        let mut again = table.inner().stream_reader();
        drain(&tree, &mut again, &table, &mut rng).await;
        let replayed = objects(table.inner());
        no_regression(&end, &replayed).unwrap_or_else(|e| panic!("case {case}: replay: {e}"));
        copies_follow(&replayed).unwrap_or_else(|e| {
            panic!("case {case}: replay: {e} after {trace:?}; before the replay: {end:?}; after: {replayed:?}")
        });
    }
}
