//! Typed changes (`watch::decode`) under races and faults: after every schedule, a follower
//! that replays the table's stream, decoded record by record, holds exactly the objects the
//! table holds. So every acknowledged write is seen in effect, a move is seen as one `Moved`
//! per object (its copies name their source, its source's removal says nothing), a refused
//! move or copy rolled back cancels what it showed, and no bookkeeping write shows as a change.
//! Raced: moves, copies and re-parenting against puts, overwrites and deletions, with one fault
//! of every kind per schedule (crashes finished by `resume`).

use std::cell::RefCell;
use std::collections::BTreeMap;

use dynatree::watch::{self, Change};

use crate::acts::*;

thread_local! {
    /// The table of the schedule running on this thread (the simulator runs a schedule's
    /// backend, operations and checks on the test's thread).
    static TABLE: RefCell<Option<FakeTable>> = const { RefCell::new(None) };
}

/// A table kept for the check (its stream is enabled by the setup, before the first write).
fn recorded_table() -> FakeTable {
    let table = FakeTable::new();
    TABLE.with(|t| *t.borrow_mut() = Some(table.clone()));
    table
}

/// The objects a follower holds after applying every decoded change of the stream in order.
fn follower(table: &FakeTable) -> Result<BTreeMap<Vec<String>, Item>, String> {
    let mut objects = BTreeMap::new();
    for record in table.stream_records() {
        let change = watch::decode::<Any>(&record).map_err(|e| format!("decode: {e}"))?;
        let value = |v: &Any| match v {
            Any::Object(u) => Ok(u.object().clone()),
            Any::Never(_) => Err("an object at Never/".to_owned()),
        };
        match change {
            None => {}
            Some(Change::Created { path, value: v, .. })
            | Some(Change::Updated { path, new: v, .. }) => {
                objects.insert(path.components().to_vec(), value(&v)?);
            }
            Some(Change::Deleted { path, .. }) if objects.remove(path.components()).is_none() => {
                return Err(format!("deleted {path}, which the follower does not hold"));
            }
            Some(Change::Deleted { .. }) => {}
            Some(Change::Moved {
                from, to, value: v, ..
            }) => {
                if objects.remove(from.components()).is_none() {
                    return Err(format!("moved {from}, which the follower does not hold"));
                }
                if objects
                    .insert(to.components().to_vec(), value(&v)?)
                    .is_some()
                {
                    return Err(format!("moved onto {to}, which the follower holds"));
                }
            }
            Some(other) => return Err(format!("a change this test does not know: {other:?}")),
        }
    }
    Ok(objects)
}

/// The follower holds exactly the table's objects.
fn follower_agrees(end: &End<'_>) -> Result<(), String> {
    let table = TABLE
        .with(|t| t.borrow().clone())
        .ok_or("no table recorded")?;
    let followed = follower(&table)?;
    let stored: BTreeMap<Vec<String>, Item> = end
        .model
        .objects()
        .iter()
        .filter_map(|(p, s)| match s {
            Stored::Object(item) => Some((p.clone(), item.clone())),
            Stored::Link(_) => None,
        })
        .collect();
    if followed == stored {
        Ok(())
    } else {
        Err(format!(
            "the follower holds {followed:?}, the table {stored:?}"
        ))
    }
}

fn run(name: &str, setup: &[(&[&str], u32)], acts: &[Act]) {
    let setup = paths(setup);
    let sim = Sim::new(name, recorded_table)
        .schedules(150)
        .tree(plain_tree)
        .setup(move |t| {
            let setup = setup.clone();
            async move {
                t.storage().enable_stream().await?;
                for (p, v) in setup {
                    t.put(p, &V { v }).await?;
                }
                Ok(())
            }
        });
    with_faults(with_acts(sim, acts, true, Act::run))
        .check(follower_agrees)
        .run();
}

/// A move of a subtree while a new child is put under it and an object of it is overwritten.
#[test]
fn move_vs_put_and_overwrite() {
    run(
        "typed changes: move a to c vs put a/x vs put a/b",
        &[(&["a"], 1), (&["a", "b"], 2), (&["a", "b", "d"], 3)],
        &[
            Act::Move(p(&["a"]), p(&["c"]), LinkPolicy::Report),
            Act::Put(p(&["a", "x"]), 4),
            Act::Put(p(&["a", "b"]), 5),
        ],
    );
}

/// A move into a destination another writer takes (refused and rolled back, or first).
#[test]
fn move_vs_put_at_its_destination() {
    run(
        "typed changes: move a to c vs put c",
        &[(&["a"], 1), (&["a", "b"], 2)],
        &[
            Act::Move(p(&["a"]), p(&["c"]), LinkPolicy::Report),
            Act::Put(p(&["c"]), 7),
        ],
    );
}

/// A copy while an object of its source is deleted and its destination's parent is written.
#[test]
fn copy_vs_delete_and_put() {
    run(
        "typed changes: copy a to c vs delete a/b vs put c",
        &[(&["a"], 1), (&["a", "b"], 2), (&["a", "e"], 3)],
        &[
            Act::Copy(p(&["a"]), p(&["c"])),
            Act::Delete(p(&["a", "b"])),
            Act::Put(p(&["c"]), 9),
        ],
    );
}

/// Re-parenting (moves of the children) while a child is overwritten, and a subtree deletion
/// beside it.
#[test]
fn reparent_vs_overwrite_and_delete_subtree() {
    run(
        "typed changes: delete_node a Reparent vs put a/b vs delete_subtree e",
        &[
            (&["a"], 1),
            (&["a", "b"], 2),
            (&["a", "b", "c"], 3),
            (&["e"], 4),
            (&["e", "f"], 5),
        ],
        &[
            Act::ReparentTwice(p(&["a"])),
            Act::Put(p(&["a", "b"]), 6),
            Act::DeleteSubtree(p(&["e"])),
        ],
    );
}
