//! Interleaving scenarios of scoped trees (`Tree::scope`): a scoped delete of the scope's last
//! child races a put into the scope and an unscoped delete above it, with one fault per
//! schedule. After every schedule the simulator checks the table (every object reachable,
//! listing rows upward closed, no lock, live mark or intent left); each scenario adds what the
//! scope promises: it never removes its root's listing row (that row belongs to the parent
//! tree), and an acknowledged put into the scope stays.
//!
//! Budget: `DYNATREE_SIM_SCHEDULES` schedules per scenario (default 1000 here).

use dynatree::Tree;
use dynatree_testing::FakeTable;
use dynatree_testing::sim::{End, Sim, SimFault};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct V {
    v: u32,
}

/// The scope every scenario works in.
const ROOT: [&str; 2] = ["T", "s"];

fn scope(t: &Tree) -> dynatree::Result<Tree> {
    t.scope(ROOT)
}

fn value(end: &End<'_>, path: &[&str]) -> Option<u64> {
    end.number(path, "v")
}

/// The scope's last child `a` is deleted through the scope while a put adds `b` through the
/// scope and the whole tree deletes the object at `T`, above the scope (a removal that marks
/// `T`'s listing row and would prune it were it empty). Nobody may remove the scope root's
/// listing row: not the scoped delete (its pruning stops below the root), not the unscoped
/// delete (`T` still lists `s`).
#[test]
fn scoped_delete_of_last_child_vs_put_into_scope_vs_unscoped_delete_above() {
    Sim::new(
        "scoped delete a vs scoped put b vs unscoped delete T",
        FakeTable::new,
    )
    .schedules(1000)
    .faults(1, SimFault::all())
    .setup(|t| async move {
        t.put(["T"], &V { v: 0 }).await?;
        scope(&t)?.put(["a"], &V { v: 1 }).await
    })
    .op("scope delete a", |t| async move {
        scope(&t)?.delete(["a"]).await
    })
    .op("scope put b", |t| async move {
        scope(&t)?.put(["b"], &V { v: 2 }).await
    })
    .op("delete T", |t| async move { t.delete(["T"]).await })
    .check(|end| {
        if !end.has_row("¦T¦", "s") {
            return Err("the scope root's listing row (¦T¦, s) is gone".into());
        }
        if !end.has_row("¦", "T") {
            return Err("the listing row of T, which lists the scope, is gone".into());
        }
        if end.ok(0) && value(end, &["T", "s", "a"]).is_some() {
            return Err("a survived its acknowledged scoped delete".into());
        }
        if end.ok(1) && value(end, &["T", "s", "b"]) != Some(2) {
            return Err("the acknowledged scoped put of b is gone".into());
        }
        if end.ok(2) && value(end, &["T"]).is_some() {
            return Err("T survived its acknowledged delete".into());
        }
        Ok(())
    })
    .allow_wait(true)
    .run();
}

/// The same race, but the whole tree deletes the scope root's own object (`T/s`), whose
/// pruning may remove the root's listing row once the scope is empty. The parent tree may do
/// that; the scope's put must then create the row again, never leave `b` unreachable (the
/// simulator's reachability check), and the row stays whenever the scope holds anything.
#[test]
fn scoped_delete_of_last_child_vs_put_into_scope_vs_unscoped_delete_of_the_root_object() {
    Sim::new(
        "scoped delete a vs scoped put b vs unscoped delete T/s",
        FakeTable::new,
    )
    .schedules(1000)
    .faults(1, SimFault::all())
    .setup(|t| async move {
        t.put(ROOT, &V { v: 0 }).await?;
        scope(&t)?.put(["a"], &V { v: 1 }).await
    })
    .op("scope delete a", |t| async move {
        scope(&t)?.delete(["a"]).await
    })
    .op("scope put b", |t| async move {
        scope(&t)?.put(["b"], &V { v: 2 }).await
    })
    .op("delete T/s", |t| async move { t.delete(ROOT).await })
    .check(|end| {
        let b = value(end, &["T", "s", "b"]);
        if end.ok(1) && b != Some(2) {
            return Err("the acknowledged scoped put of b is gone".into());
        }
        if b.is_some() && !end.has_row("¦T¦", "s") {
            return Err("b is stored but the scope root's listing row is gone".into());
        }
        if end.ok(0) && value(end, &["T", "s", "a"]).is_some() {
            return Err("a survived its acknowledged scoped delete".into());
        }
        if end.ok(2) && value(end, &["T", "s"]).is_some() {
            return Err("T/s survived its acknowledged delete".into());
        }
        Ok(())
    })
    .allow_wait(true)
    .run();
}
