//! Sharded directories under the write paths other than `put` (links, typed creates,
//! transactions), moves into and re-parentings inside a sharded directory, scoped
//! trees, a cached guard across a re-created directory, crashes with `resume`, expired marks
//! and `repair` racing writers. Judged by the simulator's row checker (every listing row in
//! its shard, no guard without its directory's row at rest), the serial model where every
//! act has one, and a check of the final table.

use crate::acts::*;
use crate::sharded::{nothing_to_repair, same_shard_as_3, sharded_on, sharded_tree};

fn sharded_short_lease_tree(s: SimStorage<FakeTable>) -> T {
    Tree::builder(s)
        .sharded("s", 4)
        .sharded("d", 3)
        .removal_lease(Duration::from_millis(200))
        .build()
        .expect("a sharded tree with a short lease")
}

fn run_modelled(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: &[(&[&str], u32)],
    acts: &[Act],
) {
    with_faults(scenario_with(name, tree, paths(setup), Vec::new(), acts))
        .schedules(250)
        .check(nothing_to_repair)
        .run();
}

/// `acts` (no serial model) beside one process that writes three names of one shard of `s`
/// through `write` (the third one through the guard the second created).
fn beside_guarded_writes<F, Fut>(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: &[(&[&str], u32)],
    acts: &[Act],
    faults: Vec<SimFault>,
    write: F,
) where
    F: Fn(T, String) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = dynatree::Result<()>> + 'static,
{
    beside_guarded_writes_and(name, tree, setup, acts, faults, write, |s| s);
}

fn beside_guarded_writes_and<F, Fut>(
    name: &str,
    tree: fn(SimStorage<FakeTable>) -> T,
    setup: &[(&[&str], u32)],
    acts: &[Act],
    faults: Vec<SimFault>,
    write: F,
    more: impl FnOnce(Sim<FakeTable>) -> Sim<FakeTable>,
) where
    F: Fn(T, String) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = dynatree::Result<()>> + 'static,
{
    let (second, third) = same_shard_as_3();
    let sim = with_acts(
        scenario_base(
            name,
            tree,
            paths(setup).into_iter().chain([(p(&["s0"]), 0)]).collect(),
            Vec::new(),
        ),
        acts,
        false,
        Act::run,
    )
    .op("three names of one shard of s", move |t| {
        let (second, third, write) = (second.clone(), third.clone(), write.clone());
        async move {
            write(t.clone(), "3".into()).await?;
            write(t.clone(), second).await?;
            write(t, third).await?;
            Ok(String::new())
        }
    });
    more(sim)
        .faults(1, faults)
        .allow_wait(true)
        .schedules(300)
        .check(nothing_to_repair)
        .run();
}

fn all_faults() -> Vec<SimFault> {
    SimFault::all().into_iter().collect()
}

// ---- write paths other than `put` --------------------------------------------------------

#[test]
fn links_through_a_known_guard_vs_delete_node_refusing_children() {
    beside_guarded_writes(
        "sharded: put_link s/3, s/x, s/y (guard) vs delete_node s Refuse",
        sharded_tree,
        &[(&["s"], 1)],
        &[Act::DeleteNode(p(&["s"]), OnChildren::Refuse)],
        all_faults(),
        |t, n| async move { t.put_link(["s", n.as_str()], ["s0"]).await },
    );
}

#[test]
fn typed_creates_through_a_known_guard_vs_delete_subtree() {
    beside_guarded_writes(
        "sharded: create s/3, s/x, s/y (guard) vs delete_subtree s",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[Act::DeleteSubtree(p(&["s"]))],
        all_faults(),
        |t, n| async move {
            match t.repo::<Doc>().create(&doc("s", &n, 7)).await {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        },
    );
}

#[test]
fn transaction_after_guarded_puts_vs_delete_of_the_last_child() {
    beside_guarded_writes(
        "sharded: put s/3, s/x (guard), txn create s/y vs delete s/1",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[Act::Delete(p(&["s", "1"]))],
        all_faults(),
        |t, n| async move {
            if n == "3" || dynatree::transfer::part_of(&n, 4) != dynatree::transfer::part_of("3", 4)
            {
                return t.put(["s", n.as_str()], &V { v: 1 }).await;
            }
            // The second name through put (creates the guard), the third in a transaction.
            let (second, _) = same_shard_as_3();
            if n == second {
                return t.put(["s", n.as_str()], &V { v: 1 }).await;
            }
            let mut tx = t.transaction();
            tx.create(&doc("s", &n, 9));
            tx.commit().await
        },
    );
}

#[test]
fn guarded_puts_vs_delete_node_refusing_children_with_update() {
    // A typed update of an existing child (Assumed plan) and a new name through the guard
    // while the directory is deleted refusing children.
    beside_guarded_writes(
        "sharded: put s/3, s/x, s/y (guard) vs update s/1, delete_node s Refuse",
        sharded_tree,
        &[(&["s"], 1)],
        &[
            Act::DeleteNode(p(&["s"]), OnChildren::Refuse),
            Act::Delete(p(&["s", "3"])),
        ],
        all_faults(),
        |t, n| async move { t.put(["s", n.as_str()], &V { v: 5 }).await },
    );
}

// ---- moves into, re-parenting inside ------------------------------------------------------

#[test]
fn move_into_a_sharded_directory_vs_delete_node_refusing_children() {
    run_modelled(
        "sharded: move a/x -> s/x vs delete_node s Refuse",
        sharded_tree,
        &[(&["s"], 1), (&["a", "x"], 2), (&["a", "x", "1"], 3)],
        &[
            Act::Move(p(&["a", "x"]), p(&["s", "x"]), LinkPolicy::Ignore),
            Act::DeleteNode(p(&["s"]), OnChildren::Refuse),
        ],
    );
}

#[test]
fn move_within_a_sharded_directory_vs_delete_of_its_last_child() {
    run_modelled(
        "sharded: move s/1 -> s/3 vs delete s/2, put s/4",
        sharded_tree,
        &[(&["s", "1"], 1), (&["s", "2"], 2)],
        &[
            Act::Move(p(&["s", "1"]), p(&["s", "3"]), LinkPolicy::Ignore),
            Act::Delete(p(&["s", "2"])),
            Act::Put(p(&["s", "4"]), 4),
        ],
    );
}

#[test]
fn copy_into_a_sharded_directory_vs_delete_node_refusing_children() {
    run_modelled(
        "sharded: copy a -> s/c vs delete_node s Refuse",
        sharded_tree,
        &[(&["s"], 1), (&["a"], 2), (&["a", "1"], 3)],
        &[
            Act::Copy(p(&["a"]), p(&["s", "c"])),
            Act::DeleteNode(p(&["s"]), OnChildren::Refuse),
        ],
    );
}

#[test]
fn reparent_inside_a_sharded_directory_vs_delete_of_a_sibling() {
    run_modelled(
        "sharded: delete_node s/n Reparent vs delete s/3",
        sharded_tree,
        &[(&["s", "n"], 1), (&["s", "n", "2"], 2), (&["s", "3"], 3)],
        &[
            Act::ReparentTwice(p(&["s", "n"])),
            Act::Delete(p(&["s", "3"])),
        ],
    );
}

#[test]
fn reparent_of_a_sharded_directory_vs_guarded_puts() {
    beside_guarded_writes(
        "sharded: put s/3, s/x, s/y (guard) vs delete_node s Reparent",
        sharded_tree,
        &[(&["s"], 1), (&["s", "1"], 2)],
        &[Act::ReparentTwice(p(&["s"]))],
        all_faults(),
        |t, n| async move {
            match t.put(["s", n.as_str()], &V { v: 5 }).await {
                // The directory is locked or gone: refused, as any write under a move.
                Err(e) if e.kind() == ErrorKind::Locked => Ok(()),
                other => other,
            }
        },
    );
}

// ---- crashes, resume, expired marks -----------------------------------------------------

#[test]
fn crashed_move_resumed_vs_guarded_puts() {
    beside_guarded_writes(
        "sharded: put s/3, s/x, s/y (guard) vs move s -> m (crash), resume",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[
            Act::Move(p(&["s"]), p(&["m"]), LinkPolicy::Ignore),
            Act::Resume,
        ],
        crashes().into_iter().collect(),
        |t, n| async move {
            match t.put(["s", n.as_str()], &V { v: 5 }).await {
                Err(e) if e.kind() == ErrorKind::Locked => Ok(()),
                other => other,
            }
        },
    );
}

#[test]
fn crashed_subtree_deletion_resumed_vs_guarded_puts() {
    beside_guarded_writes(
        "sharded: put s/3, s/x, s/y (guard) vs delete_subtree s (crash), resume",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[Act::DeleteSubtree(p(&["s"])), Act::Resume],
        crashes().into_iter().collect(),
        |t, n| async move {
            match t.put(["s", n.as_str()], &V { v: 5 }).await {
                Err(e) if e.kind() == ErrorKind::Locked => Ok(()),
                other => other,
            }
        },
    );
}

#[test]
fn expired_removal_mark_vs_guarded_puts() {
    beside_guarded_writes(
        "sharded: put s/3, s/x, s/y (guard) vs delete_node s Refuse (crash, short lease)",
        sharded_short_lease_tree,
        &[(&["s"], 1)],
        &[
            Act::DeleteNode(p(&["s"]), OnChildren::Refuse),
            Act::Delete(p(&["s", "3"])),
        ],
        crashes().into_iter().collect(),
        |t, n| async move { t.put(["s", n.as_str()], &V { v: 5 }).await },
    );
}

// ---- scopes, cached guards, repair -------------------------------------------------------

#[test]
fn scoped_guarded_puts_vs_delete_subtree_of_the_scope_root() {
    beside_guarded_writes(
        "sharded: scope s: put 3, x, y (guard) vs delete_subtree s",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[Act::DeleteSubtree(p(&["s"]))],
        all_faults(),
        |t, n| async move {
            let scoped = t.scope(["s"])?;
            match scoped.put([n.as_str()], &V { v: 5 }).await {
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                other => other,
            }
        },
    );
}

#[test]
fn scoped_guarded_puts_vs_delete_of_the_last_child() {
    beside_guarded_writes(
        "sharded: scope s: put 3, x, y (guard) vs delete s/1",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[Act::Delete(p(&["s", "1"]))],
        all_faults(),
        |t, n| async move {
            let scoped = t.scope(["s"])?;
            match scoped.put([n.as_str()], &V { v: 5 }).await {
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                other => other,
            }
        },
    );
}

#[test]
fn cached_guard_across_a_recreated_directory() {
    // Process A learns the guard of shard k of s; process B deletes s's subtree (dropping the
    // guards), re-creates s with a child in another shard, then prunes it; A writes on
    // through its cached guard.
    let (second, third) = same_shard_as_3();
    let sim = scenario_base(
        "sharded: cached guard vs delete_subtree s, put s/1, delete s/1",
        sharded_tree,
        paths(&[(&["s", "2"], 2)]),
        Vec::new(),
    )
    .op("put s/3, s/x, s/y, s/3 again", move |t| {
        let (second, third) = (second.clone(), third.clone());
        async move {
            t.put(["s", "3"], &V { v: 3 }).await?;
            t.put(["s", second.as_str()], &V { v: 4 }).await?;
            t.put(["s", third.as_str()], &V { v: 5 }).await?;
            t.delete(["s", "3"]).await?;
            t.put(["s", "3"], &V { v: 6 }).await?;
            Ok(String::new())
        }
    })
    .op("delete_subtree s, put s/1, delete s/1", |t| async move {
        t.delete_subtree(["s"]).await?;
        t.put(["s", "1"], &V { v: 1 }).await?;
        t.delete(["s", "1"]).await?;
        Ok(String::new())
    });
    with_faults(sim)
        .schedules(300)
        .check(nothing_to_repair)
        .run();
}

#[test]
fn repair_racing_guarded_puts_and_a_prune() {
    beside_guarded_writes_and(
        "sharded: put s/3, s/x, s/y (guard) vs delete s/1, check+repair",
        sharded_tree,
        &[(&["s", "1"], 1)],
        &[Act::Delete(p(&["s", "1"]))],
        all_faults(),
        |t, n| async move { t.put(["s", n.as_str()], &V { v: 5 }).await },
        |sim| {
            sim.op("check, then repair", |t| async move {
                let report = t.check().grace(Duration::ZERO).run().await?;
                t.repair(&report).run().await?;
                Ok(String::new())
            })
        },
    );
}

/// The link and scoped write paths create a shard's guard; a guard whose directory another
/// program deleted raw (the Go library) is reported by `check` as misplaced and deleted by
/// `repair`, after which a process that still believes in it falls back to the directory's row.
#[test]
fn a_guard_whose_directory_another_program_deleted_is_reported_and_deleted() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let table = FakeTable::new();
        let t = sharded_on(table.clone());
        t.create_table().await.unwrap();
        let (second, third) = same_shard_as_3();
        t.put(["s", "3"], &V { v: 3 }).await.unwrap();
        t.put_link(["s", second.as_str()], ["s", "3"])
            .await
            .unwrap();
        let scoped = t.scope(["s"]).unwrap();
        scoped.put([third.as_str()], &V { v: 5 }).await.unwrap();
        let guards = |rows: &[Item]| {
            rows.iter()
                .filter_map(Key::from_item)
                .filter(|k| k.hash.contains("¦¦g"))
                .count()
        };
        let rows = table.rows();
        assert_eq!(guards(&rows), 1, "one guard after the link's put");
        // A raw deletion of everything under s and of L(s), the guard left.
        for r in &rows {
            let k = Key::from_item(r).unwrap();
            if !k.hash.contains("¦¦g") && (k.hash.starts_with("¦s¦") || k.range == "s") {
                table.delete_item(&k, Condition::Always).await.unwrap();
            }
        }
        let report = t.check().grace(Duration::ZERO).run().await.unwrap();
        let found: Vec<String> = report.violations().iter().map(|v| v.to_string()).collect();
        assert_eq!(found.len(), 1, "{report}");
        assert!(
            found[0].starts_with("misplaced /s: the guard of shard"),
            "{report}"
        );
        let repaired = t.repair(&report).run().await.unwrap();
        assert_eq!(repaired.fixed().len(), 1);
        assert_eq!(guards(&table.rows()), 0);
        // The process that created the guard still believes in it: its check fails, and it
        // writes the directory's row again.
        let k = dynatree::transfer::part_of("3", 4);
        let fourth = (5..400)
            .map(|i| i.to_string())
            .filter(|n| dynatree::transfer::part_of(n, 4) == k)
            .nth(2)
            .unwrap();
        t.put(["s", fourth.as_str()], &V { v: 9 }).await.unwrap();
        let report = t.check().grace(Duration::ZERO).run().await.unwrap();
        assert!(report.is_healthy(), "{report}");
        assert_eq!(dynatree_testing::sim::check_rows(&table.rows(), '¦'), []);
    });
}
