//! What a faster new name would break: the protocols without a transaction that the argument
//! of "New names: the bound" in `dynatree/src/tree/write.md` rules out, written here with raw
//! requests and raced against dynatree's own removals. Each scenario must fail: the simulator
//! finds a schedule that leaves an object or a listing row unreachable from the root. They are
//! the evidence that the transaction of a new name is not an accident of the code.

use crate::acts::*;

/// The listing row of `a/n`, written as a PutItem conditional on no removal mark and no lock
/// on it (what a writer trusting `L(a)` could send), and the object row `a/n` as a second
/// PutItem: both at once (`together`) or one after the other.
async fn two_put_items(t: T, v: u32, together: bool) -> dynatree::Result<()> {
    let path = p(&["a", "n"]);
    let listing = t.storage().put_item(
        listing_key(&path).into_item(),
        Condition::And(vec![
            Condition::AttrNotExists(format!("{SC}deleting")),
            Condition::AttrNotExists(format!("{SC}moving")),
        ]),
    );
    let mut row = object_key(&path).into_item();
    row.insert("v", Value::N(v.to_string()));
    let object = t.storage().put_item(row, Condition::Always);
    if together {
        let (l, o) = futures::join!(listing, object);
        l.and(o)
    } else {
        listing.await?;
        object.await
    }
}

/// `a` has one child, `a/s`; one process deletes it (which prunes `a`, now empty), the other
/// adds the name `a/n` under `a`, whose listing row it verified moments ago.
fn new_name_vs_prune(name: &str, together: bool) -> Sim<FakeTable> {
    scenario_base(name, plain_tree, paths(&[(&["a", "s"], 1)]), Vec::new())
        .schedules(200)
        .op("new name a/n as two PutItems", move |t| async move {
            two_put_items(t, 2, together).await
        })
        .model(|m| m.put(["a", "n"], &V { v: 2 }))
        .op("delete a/s", |t| async move { t.delete(["a", "s"]).await })
        .model(|m| m.delete(["a", "s"]))
}

/// The two rows of a new name sent at once (one PutItem's latency, the fastest a new name
/// could be): the prune of `a` marks `L(a)`, finds no child and deletes it while the listing
/// row of `a/n` is on its way. Nothing in `L(a/n)`'s own item tells its PutItem that its
/// parent is going, so the name lands under no parent.
#[test]
fn a_new_name_as_two_put_items_at_once_is_lost_to_a_prune() {
    assert_lands_under_no_parent(new_name_vs_prune(
        "new name as two PutItems at once vs prune",
        true,
    ));
}

/// The same, the listing row first and the object after it (two PutItems' latency): the
/// order does not help, because the parent's removal is decided on another item.
#[test]
fn a_new_name_as_two_put_items_in_order_is_lost_to_a_prune() {
    assert_lands_under_no_parent(new_name_vs_prune(
        "new name as two PutItems in order vs prune",
        false,
    ));
}

/// The simulator finds a schedule that leaves the listing row of `a/n` under no parent.
fn assert_lands_under_no_parent(sim: Sim<FakeTable>) {
    let failure = sim
        .explore()
        .expect_err("a listing row written without its parent's check lands under no parent");
    assert!(
        failure
            .message
            .contains("listing row of a/n has no parent listing row"),
        "expected a row left under no parent, got: {}",
        failure.message
    );
}

/// The control: the same race with dynatree's put (one transaction that checks `L(a)` and
/// creates `L(a/n)` with the object) keeps every row reachable in every schedule, faults
/// included.
#[test]
fn a_new_name_in_one_transaction_survives_the_prune() {
    scenario_base(
        "new name by put vs prune",
        plain_tree,
        paths(&[(&["a", "s"], 1)]),
        Vec::new(),
    )
    .schedules(200)
    .op("put a/n", |t| async move {
        t.put(["a", "n"], &V { v: 2 }).await
    })
    .model(|m| m.put(["a", "n"], &V { v: 2 }))
    .op("delete a/s", |t| async move { t.delete(["a", "s"]).await })
    .model(|m| m.delete(["a", "s"]))
    .faults(1, SimFault::all())
    .run();
}
