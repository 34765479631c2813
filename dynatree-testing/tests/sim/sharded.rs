//! Sharded directories (see "Sharded directories" in the `consistency` docs): a child's
//! listing row lives in its shard, and every protocol that addresses it (writes, guards,
//! removals, moves, copies) addresses that one row, while a remover asks every shard whether
//! the directory has children. A new child whose process knows its shard's guard checks the
//! guard instead of the directory's listing row, and every protocol that marks or locks that
//! row drops the guards before it reads the children. Raced here: new children in different
//! shards, and new children through a known guard, against the removal of their directory,
//! node deletions that refuse or keep children, subtree deletions, moves and copies of the
//! directory, with faults. Each schedule's outcome must be
//! one of a serial order's, the raw rows must hold the layout's invariants (the simulator's
//! checker reads the sharding from the table's settings row and wants each listing row in
//! its shard), and a check of the final table must find nothing to repair.

use crate::acts::*;

/// `s` in 4 shards, `d` in 3: `s/1`, `s/2`, `s/3` and `s/4` are in different shards of `s`.
pub(super) fn sharded_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .sharded("s", 4)
        .sharded("d", 3)
        .build()
        .expect("a tree with sharded directories")
}

pub(super) fn sharded_on(t: FakeTable) -> T {
    Tree::builder(t)
        .sharded("s", 4)
        .sharded("d", 3)
        .build()
        .expect("a tree with sharded directories")
}

/// Nothing to repair in the final table (an empty listing row only when an operation failed).
pub(super) fn nothing_to_repair(end: &End<'_>) -> Result<(), String> {
    let failed = end.outcomes.iter().any(|o| !o.is_ok());
    let found = final_violations(end.rows, sharded_on, failed)?;
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("check() of the final table: {found:?}"))
    }
}

fn run(name: &str, setup: &[(&[&str], u32)], acts: &[Act]) {
    with_faults(scenario_with(
        name,
        sharded_tree,
        paths(setup),
        Vec::new(),
        acts,
    ))
    .schedules(250)
    .check(nothing_to_repair)
    .run();
}

#[test]
fn the_children_of_the_scenarios_are_in_different_shards() {
    let shards: Vec<u32> = ["1", "2", "3", "4"]
        .iter()
        .map(|n| dynatree::transfer::part_of(n, 4))
        .collect();
    let mut distinct = shards.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{shards:?}");
}

/// A new child in one shard while the directory's object is deleted refusing children: the
/// deletion sees the child (it asks every shard, consistently), or the child's write sees the
/// removal and re-creates the directory's listing row.
#[test]
fn new_child_vs_delete_node_refusing_children() {
    run(
        "sharded: put s/3 vs delete_node s Refuse",
        &[(&["s"], 1)],
        &[
            Act::Put(p(&["s", "3"]), 3),
            Act::DeleteNode(p(&["s"]), OnChildren::Refuse),
        ],
    );
}

/// Two new children in different shards while the directory's last child is deleted (the
/// removal of the emptied directory's listing row races both).
#[test]
fn new_children_in_two_shards_vs_delete_of_the_last_child() {
    run(
        "sharded: put s/2, put s/3 vs delete s/1",
        &[(&["s", "1"], 1)],
        &[
            Act::Put(p(&["s", "2"]), 2),
            Act::Put(p(&["s", "3"]), 3),
            Act::Delete(p(&["s", "1"])),
        ],
    );
}

/// A new child while the subtree is deleted: the child is deleted with it, or written after
/// it and reachable.
#[test]
fn new_child_vs_delete_subtree() {
    run(
        "sharded: put s/4 vs delete_subtree s",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[Act::Put(p(&["s", "4"]), 4), Act::DeleteSubtree(p(&["s"]))],
    );
}

/// A new child while the sharded directory moves into another sharded directory: each child
/// lands in its shard of `d`.
#[test]
fn new_child_vs_move_between_sharded_directories() {
    run(
        "sharded: put s/3 vs move s/x -> d/x",
        &[(&["s", "x", "1"], 1), (&["s", "x", "2"], 2)],
        &[
            Act::Put(p(&["s", "x", "3"]), 3),
            Act::Move(p(&["s", "x"]), p(&["d", "x"]), LinkPolicy::Ignore),
        ],
    );
}

/// The whole sharded directory moved and copied while a child is added and another deleted.
#[test]
fn move_and_copy_of_a_sharded_directory_vs_its_children() {
    run(
        "sharded: put s/3, delete s/1 vs move s -> m",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[
            Act::Put(p(&["s", "3"]), 3),
            Act::Delete(p(&["s", "1"])),
            Act::Move(p(&["s"]), p(&["m"]), LinkPolicy::Ignore),
        ],
    );
    run(
        "sharded: put s/4 vs copy s -> d/c",
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[
            Act::Put(p(&["s", "4"]), 4),
            Act::Copy(p(&["s"]), p(&["d", "c"])),
        ],
    );
}

/// Deleting a node whose children are re-parented into its sharded parent: each child's new
/// listing row goes into its shard of `s`.
#[test]
fn reparent_into_a_sharded_directory_vs_new_child() {
    run(
        "sharded: put s/n/4 vs delete_node s/n Reparent",
        &[
            (&["s", "n"], 1),
            (&["s", "n", "1"], 2),
            (&["s", "n", "2"], 3),
        ],
        &[
            Act::Put(p(&["s", "n", "4"]), 4),
            Act::ReparentTwice(p(&["s", "n"])),
        ],
    );
}

/// Two names in the same shard of `s` as `3`.
pub(super) fn same_shard_as_3() -> (String, String) {
    let k = dynatree::transfer::part_of("3", 4);
    let mut names = (5..200)
        .map(|i| i.to_string())
        .filter(|n| dynatree::transfer::part_of(n, 4) == k);
    let first = names.next().expect("a name in the shard");
    let second = names.next().expect("another name in the shard");
    (first, second)
}

/// One process puts `s/3` (learning `L(s)`), a second name of its shard (creating the
/// shard's guard beside a check of `L(s)`), then a third, which checks the guard instead of
/// `L(s)`, while `other` runs. No serial model (the three puts are not one atomic
/// operation): the invariants of the rows and the final check judge every schedule.
fn through_a_known_guard(name: &str, setup: &[(&[&str], u32)], other: Act) {
    let (second, third) = same_shard_as_3();
    let sim = with_acts(
        scenario_base(name, sharded_tree, paths(setup), Vec::new()),
        &[other],
        false,
        Act::run,
    )
    .op("put s/3, then two names of its shard", move |t| {
        let (second, third) = (second.clone(), third.clone());
        async move {
            t.put(["s", "3"], &V { v: 3 }).await?;
            t.put(["s", second.as_str()], &V { v: 4 }).await?;
            t.put(["s", third.as_str()], &V { v: 5 }).await?;
            Ok(String::new())
        }
    });
    with_faults(sim)
        .schedules(400)
        .check(nothing_to_repair)
        .run();
}

/// The third put checks the guard while `delete_node(s, Refuse)` marks `L(s)`, drops the
/// guards and counts the children: the put commits before the drop (and is counted), or its
/// check fails and it meets the mark.
#[test]
fn new_child_through_a_known_guard_vs_delete_node_refusing_children() {
    through_a_known_guard(
        "sharded: put s/3, s/x (guard) vs delete_node s Refuse",
        &[(&["s"], 1)],
        Act::DeleteNode(p(&["s"]), OnChildren::Refuse),
    );
}

/// The same against the prune of `L(s)` after its last other child is deleted.
#[test]
fn new_child_through_a_known_guard_vs_delete_of_the_last_child() {
    through_a_known_guard(
        "sharded: put s/3, s/x (guard) vs delete s/1",
        &[(&["s", "1"], 1)],
        Act::Delete(p(&["s", "1"])),
    );
}

/// The same against a move of the directory: the move locks `L(s)`, drops the guards and
/// lists the children; a child committed through the guard is moved.
#[test]
fn new_child_through_a_known_guard_vs_move_of_the_directory() {
    through_a_known_guard(
        "sharded: put s/3, s/x (guard) vs move s -> m",
        &[(&["s", "1"], 1)],
        Act::Move(p(&["s"]), p(&["m"]), LinkPolicy::Ignore),
    );
}

/// The same against a subtree deletion of the directory.
#[test]
fn new_child_through_a_known_guard_vs_delete_subtree() {
    through_a_known_guard(
        "sharded: put s/3, s/x (guard) vs delete_subtree s",
        &[(&["s", "1"], 1)],
        Act::DeleteSubtree(p(&["s"])),
    );
}

/// A shard's guard alive while the directory has no child: the children another program
/// deleted raw (the Go library's delete, which prunes nothing). A process that knows the
/// guard puts a new child while `delete_node(s, Refuse)` marks `L(s)` and counts the
/// children: the count drops the guards first, so the put either commits before it (and is
/// counted) or fails its check of the guard and meets the mark.
#[test]
fn new_child_through_a_guard_outliving_its_children_vs_delete_node() {
    let (second, third) = same_shard_as_3();
    let sim = with_acts(
        scenario_base(
            "sharded: put s/3, s/x, raw delete both, put s/y (guard) vs delete_node s Refuse",
            sharded_tree,
            paths(&[(&["s"], 1)]),
            Vec::new(),
        ),
        &[Act::DeleteNode(p(&["s"]), OnChildren::Refuse)],
        false,
        Act::run,
    )
    .op("put s/3 and s/x, delete both raw, put s/y", move |t| {
        let (second, third) = (second.clone(), third.clone());
        async move {
            use dynatree::storage::{Condition, Key, Storage};
            t.put(["s", "3"], &V { v: 3 }).await?;
            t.put(["s", second.as_str()], &V { v: 4 }).await?;
            let shard = dynatree::transfer::part_of("3", 4);
            for name in ["3", second.as_str()] {
                let listing = Key::new(format!("¦s¦¦s{shard}"), name);
                let object = Key::new(format!("¦s¦{name}"), "¦");
                // The object first, as the Go library deletes.
                t.storage().delete_item(&object, Condition::Always).await?;
                t.storage().delete_item(&listing, Condition::Always).await?;
            }
            t.put(["s", third.as_str()], &V { v: 5 }).await?;
            Ok(String::new())
        }
    });
    with_faults(sim)
        .schedules(400)
        .check(nothing_to_repair)
        .run();
}
