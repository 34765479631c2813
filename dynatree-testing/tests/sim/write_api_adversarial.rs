//! Adversarial interleavings of the write API
//! (`Tree::transaction`, `Repository::patch`, `put_if`, `delete_if`, `sweep_expired`, scoped
//! trees) against the removals, moves, copies and re-parentings they can race. After every
//! schedule the simulator checks the table (every object reachable, listing rows upward
//! closed, no lock, live mark or intent left); most scenarios also check every schedule
//! against the serial order of the operations' models (all or nothing for a transaction).
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 400 here).

use dynatree::{
    ErrorKind, Hierarchical, Patch, Tree, ops::LinkPolicy, ops::OnChildren, update::Cond,
};
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Model, OpOutcome, Sim, SimFault, Stored};
use serde::{Deserialize, Serialize};

/// A value one level deep: `{dir}`.
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}")]
struct Top {
    dir: String,
    v: u32,
}

/// A value two levels deep: `{dir}/{name}`.
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{name}")]
struct Doc {
    dir: String,
    name: String,
    v: u32,
    #[dynatree(ttl)]
    until: Option<u64>,
}

/// A value three levels deep: `{dir}/{sub}/{name}`.
#[derive(Hierarchical, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[dynatree(path = "{dir}/{sub}/{name}")]
struct Deep {
    dir: String,
    sub: String,
    name: String,
    v: u32,
}

fn top(dir: &str, v: u32) -> Top {
    Top { dir: dir.into(), v }
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

const SCHEDULES: usize = 400;

fn sim(name: &str) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .schedules(SCHEDULES)
        .faults(1, SimFault::all())
        .allow_wait(true)
}

fn v_of(stored: Option<&Stored>) -> Option<u32> {
    match stored? {
        Stored::Object(item) => match item.get("v")? {
            dynatree::storage::Value::N(n) => n.parse().ok(),
            _ => None,
        },
        Stored::Link(_) => None,
    }
}

fn value(end: &End<'_>, path: &[&str]) -> Option<u32> {
    v_of(end.model.get(path.to_vec()))
}

fn s_of(item: &dynatree::storage::Item, name: &str) -> String {
    match item.get(name) {
        Some(dynatree::storage::Value::S(s)) => s.clone(),
        _ => String::new(),
    }
}

/// The model of a `Doc` patch adding `n` to `v` at `path` (the stored value keeps its own
/// `dir` and `name`, wherever it moved): `missing` when nothing is stored there.
fn model_patch(m: &mut Model, path: &[&str], n: u32, missing: ErrorKind) -> Result<(), ErrorKind> {
    let Some(Stored::Object(item)) = m.get(path.to_vec()) else {
        return Err(missing);
    };
    let v = v_of(m.get(path.to_vec())).ok_or(missing)?;
    let d = Doc {
        dir: s_of(item, "dir"),
        name: s_of(item, "name"),
        v: v + n,
        until: None,
    };
    m.put(path.to_vec(), &d)
}

/// Runs `f` on a copy of the model and keeps the copy only if every action succeeded: a
/// transaction's all or nothing. Any failure is the transaction's cancellation.
fn model_txn(
    m: &mut Model,
    f: impl FnOnce(&mut Model) -> Result<(), ErrorKind>,
) -> Result<(), ErrorKind> {
    let mut copy = m.clone();
    match f(&mut copy) {
        Ok(()) => {
            *m = copy;
            Ok(())
        }
        Err(_) => Err(ErrorKind::TransactionCanceled),
    }
}

/// A transaction moving a value between two directories (delete `x/a`, create `y/a`) while
/// `y` is deleted as a subtree and `x` is moved to `z` (`x/k` keeps `x` a node): every
/// schedule must be a serial order of the three, the transaction all or nothing.
#[test]
fn relocating_transaction_vs_delete_subtree_of_target_vs_move_of_source() {
    sim("txn {delete x/a, create y/a} vs delete_subtree y vs move x -> z")
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("x", "k", 1)).await?;
            docs.put(&doc("y", "b", 1)).await
        })
        .op("txn relocate", |t| async move {
            let mut tx = t.transaction();
            tx.delete::<Doc>(&key("x", "a")).create(&doc("y", "a", 1));
            tx.commit().await
        })
        .model(|m| {
            model_txn(m, |m| {
                m.delete(["x", "a"])?;
                m.create(["y", "a"], &doc("y", "a", 1))
            })
        })
        .op("delete_subtree y", |t| async move {
            t.delete_subtree(["y"]).await
        })
        .model(|m| m.delete_subtree(["y"]))
        .op("move x z", |t| async move {
            t.move_subtree_with(["x"], ["z"], LinkPolicy::Ignore).await
        })
        .model(|m| m.move_subtree(["x"], ["z"], LinkPolicy::Ignore))
        .run();
}

/// One transaction writing a node and its child (`a` and `a/b`, with `a`'s listing row
/// written by the transaction itself as the child's parent guard) while `a` is deleted as a
/// subtree: a serial order of the two, never the child without its parent row.
#[test]
fn nested_puts_in_one_transaction_vs_delete_subtree() {
    sim("txn {put a, put a/b} vs delete_subtree a")
        .setup(|t| async move { t.repo::<Doc>().put(&doc("a", "c", 1)).await })
        .op("txn nested", |t| async move {
            let mut tx = t.transaction();
            tx.put(&top("a", 2)).put(&doc("a", "b", 2));
            tx.commit().await
        })
        .model(|m| {
            m.put(["a"], &top("a", 2))?;
            m.put(["a", "b"], &doc("a", "b", 2))
        })
        .op("delete_subtree a", |t| async move {
            t.delete_subtree(["a"]).await
        })
        .model(|m| m.delete_subtree(["a"]))
        .run();
}

/// The same with a whole new branch: the transaction writes `n` and `n/s/q` (the row of `n/s`
/// is created before the transaction, as a missing ancestor) while `n`'s only other value is
/// deleted, a delete that prunes `n` when it names nothing else.
#[test]
fn nested_new_branch_transaction_vs_pruning_delete() {
    sim("txn {put n, put n/s/q} vs delete n/o (prunes n)")
        .setup(|t| async move { t.repo::<Doc>().put(&doc("n", "o", 1)).await })
        .op("txn branch", |t| async move {
            let mut tx = t.transaction();
            tx.put(&top("n", 2)).put(&Deep {
                dir: "n".into(),
                sub: "s".into(),
                name: "q".into(),
                v: 2,
            });
            tx.commit().await
        })
        .model(|m| {
            m.put(["n"], &top("n", 2))?;
            m.put(
                ["n", "s", "q"],
                &Deep {
                    dir: "n".into(),
                    sub: "s".into(),
                    name: "q".into(),
                    v: 2,
                },
            )
        })
        .op("delete n/o", |t| async move { t.delete(["n", "o"]).await })
        .model(|m| m.delete(["n", "o"]))
        .run();
}

/// A transaction putting two levels below a directory (`x/n/q`, whose parent row `x/n` does
/// not exist yet) while `x` is deleted as a subtree. The transaction must end: `Ok` (before
/// the subtree's lock, then deleted with it), or refused with `Locked`.
#[test]
fn deep_put_transaction_vs_delete_subtree() {
    sim("txn {put x/n/q} vs delete_subtree x")
        .setup(|t| async move { t.repo::<Doc>().put(&doc("x", "a", 1)).await })
        .op("txn deep put", |t| async move {
            let mut tx = t.transaction();
            tx.put(&Deep {
                dir: "x".into(),
                sub: "n".into(),
                name: "q".into(),
                v: 1,
            });
            tx.commit().await
        })
        .model(|m| {
            m.put(
                ["x", "n", "q"],
                &Deep {
                    dir: "x".into(),
                    sub: "n".into(),
                    name: "q".into(),
                    v: 1,
                },
            )
        })
        .op("delete_subtree x", |t| async move {
            t.delete_subtree(["x"]).await
        })
        .model(|m| m.delete_subtree(["x"]))
        .run();
}

/// A patch of a child while its parent node is deleted with its children moved up
/// (`delete_node(x, Reparent)`): the patch applies before the child moves (and moves with
/// it), or finds nothing (`NotFound`), or is refused; never lost, never applied twice.
#[test]
fn patch_vs_delete_node_reparent() {
    sim("patch x/a vs delete_node x (Reparent)")
        .setup(|t| async move {
            t.repo::<Top>().put(&top("x", 1)).await?;
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("x", "b", 1)).await
        })
        .op("patch x/a", |t| async move {
            t.repo::<Doc>()
                .patch(Patch::new(&key("x", "a")).add(Doc::FIELDS.v, 10))
                .await
        })
        .model(|m| model_patch(m, &["x", "a"], 10, ErrorKind::NotFound))
        .op("delete_node x reparent", |t| async move {
            t.delete_node(["x"], OnChildren::Reparent).await
        })
        .model(|m| m.delete_node(["x"], OnChildren::Reparent))
        .run();
}

/// Patches at both ends of a copy (`x/a` the source, `z/a` the destination) while `x` is
/// copied to `z`: the copy holds one state of the source, a patch of the destination finds
/// nothing before the copy ends or applies after it.
#[test]
fn patches_vs_copy_subtree() {
    sim("patch x/a vs copy x -> z vs patch z/a")
        .setup(|t| async move { t.repo::<Doc>().put(&doc("x", "a", 1)).await })
        .op("patch x/a", |t| async move {
            t.repo::<Doc>()
                .patch(Patch::new(&key("x", "a")).add(Doc::FIELDS.v, 10))
                .await
        })
        .model(|m| model_patch(m, &["x", "a"], 10, ErrorKind::NotFound))
        .op(
            "copy x z",
            |t| async move { t.copy_subtree(["x"], ["z"]).await },
        )
        .model(|m| m.copy_subtree(["x"], ["z"]))
        .op("patch z/a", |t| async move {
            t.repo::<Doc>()
                .patch(Patch::new(&key("z", "a")).add(Doc::FIELDS.v, 100))
                .await
        })
        .model(|m| model_patch(m, &["z", "a"], 100, ErrorKind::NotFound))
        .run();
}

/// Two transactions on overlapping paths, each conditional on what the other changes
/// (`put_if x/a` + `delete y/b` against `patch y/b` + `delete_if x/a`), while `x` is deleted
/// as a subtree: a serial order of the three, each transaction all or nothing.
#[test]
fn overlapping_conditional_transactions_vs_delete_subtree() {
    let f = Doc::FIELDS;
    sim("txn {put_if x/a, delete y/b} vs txn {patch y/b, delete_if x/a} vs delete_subtree x")
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("y", "b", 1)).await
        })
        .op("txn 1", move |t| async move {
            let mut tx = t.transaction();
            tx.put_if(&doc("x", "a", 2), f.v.eq(1))
                .delete::<Doc>(&key("y", "b"));
            tx.commit().await
        })
        .model(|m| {
            model_txn(m, |m| {
                if v_of(m.get(["x", "a"])) != Some(1) {
                    return Err(ErrorKind::ConditionFailed);
                }
                m.put(["x", "a"], &doc("x", "a", 2))?;
                m.delete(["y", "b"])
            })
        })
        .op("txn 2", move |t| async move {
            let mut tx = t.transaction();
            tx.patch(Patch::new(&key("y", "b")).add(f.v, 5))
                .delete_if::<Doc>(&key("x", "a"), f.v.eq(1));
            tx.commit().await
        })
        .model(|m| {
            model_txn(m, |m| {
                model_patch(m, &["y", "b"], 5, ErrorKind::NotFound)?;
                if v_of(m.get(["x", "a"])) != Some(1) {
                    return Err(ErrorKind::ConditionFailed);
                }
                m.delete(["x", "a"])
            })
        })
        .op("delete_subtree x", |t| async move {
            t.delete_subtree(["x"]).await
        })
        .model(|m| m.delete_subtree(["x"]))
        .run();
}

/// A conditional delete racing a move of its directory: it deletes only a value its
/// condition holds for, at the source before the move, or finds nothing after it; a value it
/// deleted never lives on at the destination.
#[test]
fn delete_if_vs_move() {
    sim("delete_if x/a (v = 1) vs move x -> z")
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("x", "k", 1)).await
        })
        .op("delete_if x/a", |t| async move {
            t.repo::<Doc>()
                .delete_if(&key("x", "a"), Doc::FIELDS.v.eq(1))
                .await
        })
        .model(|m| {
            if v_of(m.get(["x", "a"])) != Some(1) {
                return Err(ErrorKind::ConditionFailed);
            }
            m.delete(["x", "a"])
        })
        .op("move x z", |t| async move {
            t.move_subtree_with(["x"], ["z"], LinkPolicy::Ignore).await
        })
        .model(|m| m.move_subtree(["x"], ["z"], LinkPolicy::Ignore))
        .run();
}

/// The same transaction (same idempotency token, same actions) sent by two processes, as a
/// client that lost its first process after the commit resends it from another, while a
/// third puts the value the transaction deletes. The patch it carries applies at most once,
/// and exactly once when either send is acknowledged; the put acknowledged after the
/// transaction is never undone by the resend.
#[test]
fn idempotent_transaction_resent_by_another_process() {
    fn send(t: Tree) -> impl std::future::Future<Output = dynatree::Result<()>> {
        let mut tx = t.transaction();
        tx.idempotency_token("order-42")
            .patch(Patch::new(&key("y", "b")).add(Doc::FIELDS.v, 1))
            .put(&doc("w", "c", 1))
            .delete::<Doc>(&key("x", "a"));
        tx.commit()
    }
    sim("txn with token from two processes vs put x/a")
        .setup(|t| async move {
            let docs = t.repo::<Doc>();
            docs.put(&doc("x", "a", 1)).await?;
            docs.put(&doc("y", "b", 1)).await
        })
        .op("txn first", send)
        .op("txn resent", send)
        .op("put x/a=7", |t| async move {
            t.repo::<Doc>().put(&doc("x", "a", 7)).await
        })
        .check(|end| {
            let b = value(end, &["y", "b"]);
            if !matches!(b, Some(1) | Some(2)) {
                return Err(format!("y/b is {b:?}: the patch applied twice"));
            }
            let applied = b == Some(2);
            if (end.ok(0) || end.ok(1)) && !applied {
                return Err("an acknowledged transaction's patch is missing".into());
            }
            if applied != (value(end, &["w", "c"]) == Some(1)) {
                return Err("the transaction is partly visible (patch vs put w/c)".into());
            }
            if !applied && value(end, &["x", "a"]).is_none() {
                return Err("x/a deleted by a transaction that never committed".into());
            }
            if !matches!(value(end, &["x", "a"]), None | Some(1) | Some(7)) {
                return Err("x/a holds a value nobody wrote".into());
            }
            Ok(())
        })
        .run();
}

/// Scope root used by the scoped scenarios.
const ROOT: [&str; 2] = ["T", "s"];

/// A scoped transaction (delete the scope's last child, create another) while the whole tree
/// deletes the subtree above the scope (`T`): a serial order of the two; the scoped
/// transaction never writes outside its scope.
#[test]
fn scoped_transaction_vs_unscoped_delete_subtree_above() {
    sim("scoped txn {delete a, create b} vs unscoped delete_subtree T")
        .setup(|t| async move {
            t.repo::<Top>().put(&top("o", 1)).await?;
            t.scope(ROOT)?.repo::<Top>().put(&top("a", 1)).await
        })
        .op("scoped txn", |t| async move {
            let s = t.scope(ROOT)?;
            let mut tx = s.transaction();
            tx.delete::<Top>(&TopKey { dir: "a".into() })
                .create(&top("b", 2));
            tx.commit().await
        })
        .model(|m| {
            model_txn(m, |m| {
                m.delete(["T", "s", "a"])?;
                m.create(["T", "s", "b"], &top("b", 2))
            })
        })
        .op("delete_subtree T", |t| async move {
            t.delete_subtree(["T"]).await
        })
        .model(|m| m.delete_subtree(["T"]))
        .check(|end| {
            if value(end, &["o"]) != Some(1) {
                return Err("o, outside every scope, changed".into());
            }
            Ok(())
        })
        .run();
}

/// A scoped transaction deleting the scope's only child, racing a scoped put of another
/// child and an unscoped delete of `T`'s object above the scope: the transaction's pruning
/// stops below the scope root, whose listing row belongs to the parent tree.
#[test]
fn scoped_transaction_delete_of_last_child_keeps_the_root_row() {
    sim("scoped txn {delete a} vs scoped put b vs unscoped delete T")
        .setup(|t| async move {
            t.repo::<Top>().put(&top("T", 0)).await?;
            t.scope(ROOT)?.repo::<Top>().put(&top("a", 1)).await
        })
        .op("scoped txn delete a", |t| async move {
            let s = t.scope(ROOT)?;
            let mut tx = s.transaction();
            tx.delete_if::<Top>(&TopKey { dir: "a".into() }, Top::FIELDS.v.eq(1));
            tx.commit().await
        })
        .op("scoped put b", |t| async move {
            t.scope(ROOT)?.repo::<Top>().put(&top("b", 2)).await
        })
        .op("delete T", |t| async move { t.delete(["T"]).await })
        .check(|end| {
            // A scoped removal whose process died is finished by the whole tree's recovery,
            // which may prune up to the scope root's row (documented in `scope`).
            let crashed = matches!(end.outcomes[0], OpOutcome::Crashed);
            if !crashed && !end.has_row("¦T¦", "s") {
                return Err("the scope root's listing row (¦T¦, s) is gone".into());
            }
            if end.ok(0) && value(end, &["T", "s", "a"]).is_some() {
                return Err("a survived its acknowledged scoped delete".into());
            }
            if end.ok(1) && value(end, &["T", "s", "b"]) != Some(2) {
                return Err("the acknowledged scoped put of b is gone".into());
            }
            Ok(())
        })
        .run();
}

/// The setup of the sweep scenarios: `x/a` long expired, `x/b` live (v = 5).
async fn expired_a_live_b(t: &Tree) -> dynatree::Result<()> {
    let docs = t.repo::<Doc>();
    docs.put(&Doc {
        until: Some(1),
        ..doc("x", "a", 1)
    })
    .await?;
    docs.put(&doc("x", "b", 5)).await
}

/// The sweep of expired values racing a move of the swept directory: the live value `x/b`
/// is never deleted (it is at `x/b` or `z/b`, once), whatever the order.
#[test]
fn sweep_vs_move() {
    sim("sweep x vs move x -> z")
        .setup(|t| async move { expired_a_live_b(&t).await })
        .op("sweep x", |t| async move { t.sweep_expired(["x"]).await })
        .op("move x z", |t| async move {
            t.move_subtree_with(["x"], ["z"], LinkPolicy::Ignore).await
        })
        .check(|end| {
            let here = value(end, &["x", "b"]) == Some(5);
            let moved = value(end, &["z", "b"]) == Some(5);
            if here == moved {
                return Err(format!("the live x/b is at x: {here}, at z: {moved}"));
            }
            if end.ok(1) && !moved {
                return Err("the acknowledged move left x/b behind".into());
            }
            Ok(())
        })
        .run();
}

/// The sweep racing a re-parenting of the swept directory's parent and a patch of the live
/// value: the live value is never deleted, the patch never lost.
#[test]
fn sweep_vs_reparent_vs_patch() {
    sim("sweep p vs delete_node p (Reparent) vs patch p/x... (Doc x/b)")
        .setup(|t| async move {
            expired_a_live_b(&t).await?;
            t.repo::<Top>().put(&top("x", 0)).await
        })
        .op("sweep root", |t| async move {
            t.sweep_expired(dynatree::Path::root()).await
        })
        .op("delete_node x reparent", |t| async move {
            t.delete_node(["x"], OnChildren::Reparent).await
        })
        .op("patch x/b", |t| async move {
            t.repo::<Doc>()
                .patch(Patch::new(&key("x", "b")).add(Doc::FIELDS.v, 10))
                .await
        })
        .check(|end| {
            let at_x = value(end, &["x", "b"]);
            let at_b = value(end, &["b"]);
            let live = at_x.or(at_b);
            if at_x.is_some() && at_b.is_some() {
                return Err("the live value is at both x/b and b".into());
            }
            match live {
                None => Err("the live value was deleted".into()),
                Some(5) if end.ok(2) => Err("the acknowledged patch was lost".into()),
                Some(5 | 15) => Ok(()),
                Some(v) => Err(format!("the live value is {v}")),
            }
        })
        .run();
}

/// A tree holding `x/a`, expired (expiry 1970) but not yet deleted by DynamoDB.
async fn with_expired_value() -> dynatree::Result<Tree> {
    let tree = Tree::new(FakeTable::new());
    tree.create_table().await?;
    let docs = tree.repo::<Doc>();
    docs.put(&Doc {
        until: Some(1),
        ..doc("x", "a", 1)
    })
    .await?;
    assert_eq!(
        docs.get(&key("x", "a")).await?,
        None,
        "reads skip the expired value"
    );
    Ok(tree)
}

/// A patch of a value that expired (reads no longer return it) reports `NotFound`, as for a
/// value DynamoDB already deleted, instead of updating a row nobody can read.
#[tokio::test]
async fn patch_of_an_expired_value_is_not_found() -> dynatree::Result<()> {
    let tree = with_expired_value().await?;
    let patched = tree
        .repo::<Doc>()
        .patch(Patch::new(&key("x", "a")).add(Doc::FIELDS.v, 1))
        .await;
    assert!(
        patched.as_ref().is_err_and(dynatree::Error::is_not_found),
        "a patch of a value reads do not see: {patched:?}"
    );
    Ok(())
}

/// Storing a value only if none is stored succeeds over an expired value (reads say none
/// is), through `put_if(not_exists)` and a transaction's `create`.
#[tokio::test]
async fn create_over_an_expired_value_succeeds() -> dynatree::Result<()> {
    let tree = with_expired_value().await?;
    let created = tree
        .repo::<Doc>()
        .put_if(&doc("x", "a", 2), Cond::not_exists())
        .await;
    assert!(
        created.is_ok(),
        "put_if(not_exists) over an expired value: {created:?}"
    );
    let tree = with_expired_value().await?;
    let mut tx = tree.transaction();
    tx.create(&doc("x", "a", 2));
    let created = tx.commit().await;
    assert!(created.is_ok(), "create over an expired value: {created:?}");
    Ok(())
}
