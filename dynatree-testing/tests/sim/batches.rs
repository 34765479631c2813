//! Interleaving scenarios of the batch put (`Repository::put_all`, several transactions)
//! against the removals and moves it can race, with one fault per schedule. After every
//! schedule the simulator checks the table (every object reachable, listing rows upward
//! closed, no lock, live mark or intent left); each scenario adds what an acknowledged batch
//! promises: every value it wrote is in the tree unless an operation serialized after it
//! removed or moved it.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 1000 here).

use dynatree::{ErrorKind, Hierarchical, Tree, ops::LinkPolicy};
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Sim, SimFault};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{name}")]
struct Doc {
    dir: String,
    name: String,
    v: u32,
}

fn doc(dir: &str, name: &str, v: u32) -> Doc {
    Doc {
        dir: dir.into(),
        name: name.into(),
        v,
    }
}

/// `put_all` of `docs`, as a simulator operation.
fn put_all(docs: Vec<Doc>) -> impl Fn(Tree) -> BoxFuture<'static, dynatree::Result<()>> {
    move |t: Tree| {
        let docs = docs.clone();
        Box::pin(async move { t.repo::<Doc>().put_all(&docs).await })
    }
}

fn base(name: &str) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .schedules(1000)
        .faults(1, SimFault::all())
        .setup(|t| async move { t.repo::<Doc>().put(&doc("x", "a", 1)).await })
}

fn value(end: &End<'_>, path: [&str; 2]) -> Option<u64> {
    end.number(path, "v")
}

/// A batch under `x` and elsewhere while `x` is deleted: the subtree deletion takes the batch's
/// values under `x` or none of them leave it unreachable; the value outside `x` stays.
#[test]
fn put_all_vs_delete_subtree() {
    base("put_all x/a x/b y/c vs delete_subtree x")
        .op(
            "put_all",
            put_all(vec![doc("x", "a", 2), doc("x", "b", 2), doc("y", "c", 2)]),
        )
        .op("delete_subtree x", |t| async move {
            t.delete_subtree(["x"]).await
        })
        .check(|end| {
            if end.ok(0) && value(end, ["y", "c"]) != Some(2) {
                return Err("an acknowledged value outside the deleted subtree is gone".into());
            }
            if end.ok(0) && end.ok(1) {
                // Each value under x is either deleted or the batch's.
                for n in ["a", "b"] {
                    if value(end, ["x", n]).is_some_and(|v| v != 2) {
                        return Err(format!("x/{n} holds a value nobody wrote last"));
                    }
                }
            }
            Ok(())
        })
        .run();
}

/// A batch while its directory moves: every acknowledged value is at the source (written after
/// the move) or at the destination (moved with it), never lost.
#[test]
fn put_all_vs_move() {
    base("put_all x/a x/b vs move x -> z")
        .op("put_all", put_all(vec![doc("x", "a", 2), doc("x", "b", 2)]))
        .op("move x z", |t| async move {
            t.move_subtree_with(["x"], ["z"], LinkPolicy::Ignore).await
        })
        .check(|end| {
            if !end.ok(0) {
                return Ok(());
            }
            for n in ["a", "b"] {
                let here = value(end, ["x", n]) == Some(2);
                let moved = value(end, ["z", n]) == Some(2);
                if !here && !moved {
                    return Err(format!("the acknowledged x/{n}=2 was lost"));
                }
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// A batch while a sibling is deleted (a removal that marks and prunes listing rows): the
/// batch's other value survives, and nothing is left unreachable.
#[test]
fn put_all_vs_delete_pruning_the_directory() {
    base("put_all x/b x/c vs delete x/a")
        .op("put_all", put_all(vec![doc("x", "b", 2), doc("x", "c", 2)]))
        .op("delete x/a", |t| async move { t.delete(["x", "a"]).await })
        .check(|end| {
            if end.ok(0) {
                for n in ["b", "c"] {
                    if value(end, ["x", n]) != Some(2) {
                        return Err(format!("the acknowledged x/{n}=2 is gone"));
                    }
                }
            }
            if end.ok(1) && value(end, ["x", "a"]).is_some() {
                return Err("x/a survived its acknowledged delete".into());
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// Two values at one path in one batch are the caller's mistake: refused, nothing sent.
#[test]
fn put_all_refuses_two_values_at_one_path() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let table = FakeTable::new();
        let tree = Tree::new(table.clone());
        tree.create_table().await.expect("table");
        table.reset_metrics();
        let e = tree
            .repo::<Doc>()
            .put_all(&[doc("x", "a", 1), doc("x", "a", 2)])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(table.metrics().total_requests(), 0);
    });
}
