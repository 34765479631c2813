//! Watchers (`Tree::watch`) racing writers, with faults on every request, the watcher's own
//! included, while the stream splits its shards (so a move's copy and its source's removal, and
//! one object's records before and after a split, are in different shards). A watcher takes its
//! position before the setup writes; a process reads the stream while the writers run (three
//! reads) and stores its cursor; after the recovery, a new watch resumes from that cursor and
//! catches up. After every schedule:
//!
//! - its changes apply strictly in the order handed: a creation at a path the follower does
//!   not hold, an update or deletion of exactly the value it holds, a move from a held path to
//!   one it does not hold (so each write is seen in effect once per watcher, each path's
//!   changes in order, a move once per object);
//! - the follower then holds exactly the objects under the watched path.

use std::cell::RefCell;
use std::collections::BTreeMap;

use dynatree::watch::{Change, Cursor, Watch};

use crate::acts::*;

/// What one schedule's watcher knows, kept between its steps (the simulator runs a schedule's
/// backend, operations and checks on the test's thread).
#[derive(Default)]
struct Follower {
    table: Option<FakeTable>,
    cursor: Option<Cursor>,
    objects: BTreeMap<Vec<String>, Item>,
    /// The first change that did not apply.
    broken: Option<String>,
    changes: usize,
}

thread_local! {
    static FOLLOWER: RefCell<Follower> = RefCell::new(Follower::default());
}

fn recorded_table() -> FakeTable {
    let table = FakeTable::new();
    FOLLOWER.with(|f| {
        *f.borrow_mut() = Follower {
            table: Some(table.clone()),
            ..Follower::default()
        }
    });
    table
}

fn table() -> FakeTable {
    FOLLOWER.with(|f| f.borrow().table.clone().expect("a recorded table"))
}

/// Applies `changes` strictly, in order.
fn apply(changes: Vec<Change<Any>>) {
    FOLLOWER.with(|f| {
        let f = &mut *f.borrow_mut();
        for change in changes {
            f.changes += 1;
            if f.broken.is_some() {
                return;
            }
            if let Err(e) = apply_one(&mut f.objects, change) {
                f.broken = Some(e);
            }
        }
    });
}

fn object(v: &Any) -> Result<Item, String> {
    match v {
        Any::Object(u) => Ok(u.object().clone()),
        Any::Never(_) => Err("an object at Never/".to_owned()),
    }
}

fn apply_one(objects: &mut BTreeMap<Vec<String>, Item>, change: Change<Any>) -> Result<(), String> {
    match change {
        Change::Created { path, value, .. } => {
            if objects
                .insert(path.components().to_vec(), object(&value)?)
                .is_some()
            {
                return Err(format!("created {path}, which the follower holds"));
            }
        }
        Change::Updated { path, old, new, .. } => {
            let held = objects.get(path.components());
            if held != Some(&object(&old)?) {
                return Err(format!(
                    "updated {path} from {old:?}, the follower holds {held:?}"
                ));
            }
            objects.insert(path.components().to_vec(), object(&new)?);
        }
        Change::Deleted { path, old, .. } => {
            let held = objects.remove(path.components());
            if held != Some(object(&old)?) {
                return Err(format!(
                    "deleted {path} holding {old:?}, the follower held {held:?}"
                ));
            }
        }
        Change::Moved {
            from, to, value, ..
        } => {
            if objects.remove(from.components()).is_none() {
                return Err(format!("moved {from}, which the follower does not hold"));
            }
            if objects
                .insert(to.components().to_vec(), object(&value)?)
                .is_some()
            {
                return Err(format!("moved onto {to}, which the follower holds"));
            }
        }
        other => return Err(format!("a change this test does not know: {other:?}")),
    }
    Ok(())
}

fn stored_cursor() -> Option<Cursor> {
    FOLLOWER.with(|f| f.borrow().cursor.clone())
}

fn store_cursor(watch: &Watch<Any>) {
    let cursor = watch.cursor().clone();
    FOLLOWER.with(|f| f.borrow_mut().cursor = Some(cursor));
}

/// A watch of `prefix` resumed from the stored cursor.
fn resumed(tree: &T, prefix: &[String]) -> Watch<Any> {
    let watch = tree.watch::<Any>(prefix.to_vec());
    match stored_cursor() {
        Some(cursor) => watch.start_after(cursor),
        None => watch,
    }
}

/// The follower holds exactly the objects under `prefix`, and every change applied.
fn follower_agrees(end: &End<'_>, prefix: &[String]) -> Result<(), String> {
    let (objects, broken, changes) = FOLLOWER.with(|f| {
        let f = f.borrow();
        (f.objects.clone(), f.broken.clone(), f.changes)
    });
    if let Some(broken) = broken {
        return Err(format!("change {changes}: {broken}"));
    }
    let stored: BTreeMap<Vec<String>, Item> = end
        .model
        .objects()
        .iter()
        .filter(|(p, _)| p.starts_with(prefix))
        .filter_map(|(p, s)| match s {
            Stored::Object(item) => Some((p.clone(), item.clone())),
            Stored::Link(_) => None,
        })
        .collect();
    if objects == stored {
        Ok(())
    } else {
        Err(format!(
            "the watcher holds {objects:?}, the table {stored:?}"
        ))
    }
}

fn run(name: &str, prefix: &[&str], setup: &[(&[&str], u32)], acts: &[Act]) {
    let setup = paths(setup);
    let prefix: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
    let (p1, p2, p3) = (prefix.clone(), prefix.clone(), prefix.clone());
    let sim = Sim::new(name, recorded_table)
        .schedules(120)
        .tree(plain_tree)
        .setup(move |t| {
            let (setup, prefix) = (setup.clone(), p1.clone());
            async move {
                t.storage().enable_stream().await?;
                table().split_stream(2);
                let mut watch = t.watch::<Any>(prefix);
                watch.start().await?;
                store_cursor(&watch);
                for (p, v) in setup {
                    t.put(p, &V { v }).await?;
                }
                Ok(())
            }
        });
    with_faults(with_acts(sim, acts, true, Act::run))
        .process("watcher", move |t, _calls| {
            let prefix = p2.clone();
            async move {
                let mut watch = resumed(&t, &prefix);
                for _ in 0..3 {
                    // A failed read is read again by the next one. The changes and the cursor
                    // after them are kept together (the process may crash at any request).
                    if let Ok(changes) = watch.catch_up().await {
                        apply(changes);
                        store_cursor(&watch);
                    }
                }
                Ok(())
            }
        })
        .op("split the stream", |t| async move {
            // Each read is a point of the schedule: the splits fall anywhere among the writes.
            let _ = t.get::<V>(["split-1"]).await;
            table().split_stream(3);
            let _ = t.get::<V>(["split-2"]).await;
            table().split_stream(1);
            Ok(())
        })
        .finish(move |t| {
            let prefix = p3.clone();
            async move {
                let mut watch = resumed(&t, &prefix);
                loop {
                    let changes = watch.catch_up().await?;
                    if changes.is_empty() {
                        break;
                    }
                    apply(changes);
                }
                Ok(())
            }
        })
        .check(move |end| follower_agrees(end, &prefix))
        .run();
}

/// Moves out of, into and within the watched subtree while objects in it are overwritten and
/// put.
#[test]
fn moves_across_the_border_vs_puts() {
    run(
        "watchers: watch a; move a/b to c, move d to a/d, put a/x, put a/b/e",
        &["a"],
        &[
            (&["a"], 1),
            (&["a", "b"], 2),
            (&["a", "b", "e"], 3),
            (&["d"], 4),
        ],
        &[
            Act::Move(p(&["a", "b"]), p(&["c"]), LinkPolicy::Report),
            Act::Move(p(&["d"]), p(&["a", "d"]), LinkPolicy::Report),
            Act::Put(p(&["a", "x"]), 5),
            Act::Put(p(&["a", "b", "e"]), 6),
        ],
    );
}

/// A copy into the subtree and a subtree deletion in it, while an object it deletes is
/// overwritten.
#[test]
fn copy_and_subtree_deletion_vs_overwrite() {
    run(
        "watchers: watch all; copy a to c vs delete_subtree e vs put e/f",
        &[],
        &[(&["a"], 1), (&["a", "b"], 2), (&["e"], 3), (&["e", "f"], 4)],
        &[
            Act::Copy(p(&["a"]), p(&["c"])),
            Act::DeleteSubtree(p(&["e"])),
            Act::Put(p(&["e", "f"]), 7),
        ],
    );
}

/// Re-parenting (moves of the children) while a child is overwritten and deleted.
#[test]
fn reparent_vs_overwrite_and_delete() {
    run(
        "watchers: watch all; delete_node a Reparent vs put a/b vs delete a/c",
        &[],
        &[(&["a"], 1), (&["a", "b"], 2), (&["a", "c"], 3)],
        &[
            Act::ReparentTwice(p(&["a"])),
            Act::Put(p(&["a", "b"]), 8),
            Act::Delete(p(&["a", "c"])),
        ],
    );
}
