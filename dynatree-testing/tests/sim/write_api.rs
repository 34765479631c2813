//! Interleaving scenarios of the write API (`Tree::transaction`, `Repository::patch`,
//! `put_if`, `delete_if`, `sweep_expired`) against the removals and moves they can race, with
//! one fault per schedule. After every schedule the simulator checks the table (every object
//! reachable, listing rows upward closed, no lock, live mark or intent left); each scenario
//! adds what an acknowledged operation promises.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 600 here).

use dynatree::{Hierarchical, Patch, ops::LinkPolicy};
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Sim, SimFault};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{name}")]
struct Doc {
    dir: String,
    name: String,
    v: u32,
    #[dynatree(ttl)]
    until: Option<u64>,
}

fn doc(dir: &str, name: &str, v: u32) -> Doc {
    Doc {
        dir: dir.into(),
        name: name.into(),
        v,
        until: None,
    }
}

fn key(dir: &str, name: &str) -> DocKey {
    DocKey {
        dir: dir.into(),
        name: name.into(),
    }
}

fn base(name: &str) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .schedules(600)
        .faults(1, SimFault::all())
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("y", "b", 1)).await
        })
}

fn value(end: &End<'_>, path: [&str; 2]) -> Option<u64> {
    end.number(path, "v")
}

/// A transaction that writes under `x` (an overwrite and a new name) and patches `y/b`, while
/// `x` is deleted as a subtree: all or nothing of the transaction, nothing unreachable, and
/// the patch outside `x` applied exactly when the transaction was acknowledged.
#[test]
fn transaction_vs_delete_subtree() {
    base("transaction {put x/a, put x/n, patch y/b} vs delete_subtree x")
        .op("transaction", |t| async move {
            let mut tx = t.transaction();
            tx.put(&doc("x", "a", 2))
                .put(&doc("x", "n", 2))
                .patch(Patch::new(&key("y", "b")).add(Doc::FIELDS.v, 1));
            tx.commit().await
        })
        .op("delete_subtree x", |t| async move {
            t.delete_subtree(["x"]).await
        })
        .check(|end| {
            let patched = value(end, ["y", "b"]) == Some(2);
            if end.ok(0) && !patched {
                return Err("an acknowledged transaction's patch is missing".into());
            }
            if !patched {
                // Not applied: none of the transaction may be visible.
                if value(end, ["x", "n"]).is_some() || value(end, ["x", "a"]) == Some(2) {
                    return Err("part of a transaction that did not commit is visible".into());
                }
            }
            if end.ok(0) && end.ok(1) {
                for n in ["a", "n"] {
                    if value(end, ["x", n]).is_some_and(|v| v != 2) {
                        return Err(format!("x/{n} holds a value nobody wrote last"));
                    }
                }
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// A patch while its directory moves: an acknowledged patch is never lost: the value at the
/// source (patched after the move gave up, or before the move) or at the destination (moved
/// after the patch) carries it.
#[test]
fn patch_vs_move() {
    base("patch x/a vs move x -> z")
        .op("patch", |t| async move {
            t.repo::<Doc>()
                .patch(Patch::new(&key("x", "a")).add(Doc::FIELDS.v, 10))
                .await
        })
        .op("move x z", |t| async move {
            t.move_subtree_with(["x"], ["z"], LinkPolicy::Ignore).await
        })
        .check(|end| {
            if !end.ok(0) {
                return Ok(());
            }
            let here = value(end, ["x", "a"]) == Some(11);
            let moved = value(end, ["z", "a"]) == Some(11);
            if !here && !moved {
                return Err("the acknowledged patch of x/a was lost".into());
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// A conditional delete racing a put at the same path and a delete of the sibling (which
/// prunes the directory): the acknowledged put survives unless the conditional delete came
/// after it (and its condition held for the put's value).
#[test]
fn delete_if_vs_put_and_pruning() {
    base("delete_if x/a (v < 5) vs put x/a=7 vs delete y/b")
        .op("delete_if", |t| async move {
            t.repo::<Doc>()
                .delete_if(&key("x", "a"), Doc::FIELDS.v.lt(5))
                .await
        })
        .op("put x/a=7", |t| async move {
            t.repo::<Doc>().put(&doc("x", "a", 7)).await
        })
        .op("delete y/b", |t| async move { t.delete(["y", "b"]).await })
        .check(|end| {
            // v=7 never satisfies the condition: an acknowledged put stays.
            if end.ok(1) && value(end, ["x", "a"]) != Some(7) {
                return Err("the acknowledged x/a=7 is gone".into());
            }
            if end.ok(2) && value(end, ["y", "b"]).is_some() {
                return Err("y/b survived its acknowledged delete".into());
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// A transaction with an idempotency token sent again after an error (as a client does after
/// a timeout): the patch it carries applies once, never twice.
#[test]
fn idempotent_transaction_resent() {
    base("transaction with token, resent on error, vs delete x/a")
        .op("transaction twice", |t| async move {
            let send = || {
                let mut tx = t.transaction();
                tx.idempotency_token("order-42")
                    .patch(Patch::new(&key("y", "b")).add(Doc::FIELDS.v, 1))
                    .put(&doc("w", "c", 1));
                tx.commit()
            };
            match send().await {
                Ok(()) => Ok(()),
                Err(_) => send().await,
            }
        })
        .op("delete x/a", |t| async move { t.delete(["x", "a"]).await })
        .check(|end| {
            match value(end, ["y", "b"]) {
                Some(1) | Some(2) => {}
                other => return Err(format!("y/b is {other:?}: the patch applied twice")),
            }
            if end.ok(0) && value(end, ["y", "b"]) != Some(2) {
                return Err("an acknowledged transaction's patch is missing".into());
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// The sweep of expired values racing a put that gives the expired value a new life: the
/// acknowledged put survives the sweep.
#[test]
fn sweep_vs_put() {
    Sim::new("sweep_expired x vs put x/a (not expiring)", FakeTable::new)
        .schedules(600)
        .faults(1, SimFault::all())
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&Doc {
                until: Some(1),
                ..doc("x", "a", 1)
            })
            .await?;
            docs.put(&Doc {
                until: Some(1),
                ..doc("x", "b", 1)
            })
            .await
        })
        .op("sweep x", |t| async move { t.sweep_expired(["x"]).await })
        .op("put x/a", |t| async move {
            t.repo::<Doc>().put(&doc("x", "a", 2)).await
        })
        .check(|end| {
            if end.ok(1) && value(end, ["x", "a"]) != Some(2) {
                return Err("the acknowledged x/a=2 was swept".into());
            }
            Ok(())
        })
        .allow_wait(true)
        .run();
}

/// The simulator drives operations whose requests run inside combinators that poll only what
/// was woken (`descendants` lists sibling directories with `buffered`): a granted request wakes
/// its waker (before, such an operation hung on its first granted request).
#[test]
fn descendants_walk_runs_under_the_simulator() {
    use futures::TryStreamExt;
    Sim::new("walk of x", FakeTable::new)
        .schedules(50)
        .faults(1, SimFault::all())
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("x", "b", 1)).await
        })
        .op("walk", |t| async move {
            let below: Vec<dynatree::Descendant> =
                t.descendants(["x"]).concurrency(4).items().try_collect().await?;
            Ok(below.len())
        })
        .op("put x/c", |t| async move {
            t.repo::<Doc>().put(&doc("x", "c", 1)).await
        })
        .check(|end| {
            if end.ok(0) && !matches!(&end.outcomes[0], dynatree_testing::sim::OpOutcome::Ok(n) if n == "2" || n == "3") {
                return Err(format!("the walk saw {:?}", end.outcomes[0]));
            }
            Ok(())
        })
        .run();
}
