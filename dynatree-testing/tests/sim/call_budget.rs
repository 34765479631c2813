//! One retry budget per call: a loop that gives up when the call's budget is spent must fail
//! the call, never return as if it were done. Each test spends part of a call's budget on
//! throttled requests (as any throttling does) right before a loop that retries a lost race,
//! and checks that the call reports success only for what it did.
//!
//! The put runs on the fake table directly (one process: the race its loop retries is set up
//! by hand before the call); the move is a simulator scenario against a second move, on a
//! table that throttles every other read.

use std::time::Duration;

use dynatree::storage::{Condition, RANGE_KEY, Storage, Value};
use dynatree::{Hierarchical, RetryPolicy, Tree};
use dynatree_testing::sim::Sim;
use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
use serde::{Deserialize, Serialize};

/// The policy's tries of one request: a call's budget is `ATTEMPTS - 1` retries.
const ATTEMPTS: u32 = 3;

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
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

fn tree_on(fake: &FakeTable) -> Tree {
    Tree::builder(fake.clone())
        .denormalized::<Thread>()
        .retry_policy(RetryPolicy::new(ATTEMPTS, Duration::ZERO, Duration::ZERO))
        .build()
        .expect("tree")
}

fn forum(name: &str) -> Forum {
    Forum {
        forum: "f".into(),
        name: name.into(),
    }
}

/// The source `F/f` written and removed, leaving its tombstone; then the tombstone moved far
/// ahead (as a process whose clock runs an hour ahead leaves it when it removes the source),
/// so that the next write of the source, stamped by this clock, fails the tombstone check once
/// and has to be stamped again after it.
async fn tombstone_ahead(fake: &FakeTable) {
    let tree = tree_on(fake);
    tree.create_table().await.expect("table");
    tree.verify().await.expect("verify");
    tree.repo::<Forum>().put(&forum("old")).await.expect("put");
    tree.delete(["F", "f"]).await.expect("delete");
    let sv = format!("{}sv", dynatree::storage::DEFAULT_RESERVED);
    let stone = fake
        .rows()
        .into_iter()
        .find(|r| r.get_s(RANGE_KEY) == Some(sv.as_str()) && r.get(&sv).is_some())
        .expect("the removed source's tombstone");
    let ahead = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 3_600_000,
    )
    .unwrap()
        << 16;
    let mut moved = stone.clone();
    moved.insert(sv.clone(), Value::N(ahead.to_string()));
    fake.put_item(moved, Condition::Always)
        .await
        .expect("tombstone");
}

/// `Tree::put` of a denormalized source: the write fails its tombstone check once (the
/// tombstone is ahead of this process's clock) and is stamped again after it. With the call's
/// budget spent by two throttled transactions just before, the put may fail (a typed error,
/// nothing written) but never report success for a source it did not store.
#[tokio::test]
async fn a_put_of_a_source_that_reports_success_has_written_it_when_its_budget_runs_out() {
    let fake = FakeTable::new();
    tombstone_ahead(&fake).await;
    // A fresh handle (nothing cached), and the put's first two transactions throttled: the
    // intent of its propagation is recorded first (a PutItem, a step of progress), then the
    // guarded write (a transaction) is resent twice and spends the call's two retries.
    let tree = tree_on(&fake);
    tree.verify().await.expect("verify");
    fake.inject_rule(
        FaultRule::new(Fault::Throttle)
            .operation(Op::TransactWriteItems)
            .times(u64::from(ATTEMPTS - 1)),
    );
    let put = tree.put(["F", "f"], &forum("new")).await;
    fake.clear_faults();
    let stored: Option<Forum> = tree.get(["F", "f"]).await.expect("get");
    match put {
        Ok(()) => assert_eq!(
            stored,
            Some(forum("new")),
            "the put returned Ok(()) but the source is not stored"
        ),
        // A typed error with nothing written would be acceptable.
        Err(e) => assert!(stored.is_none(), "{e}: failed, yet stored {stored:?}"),
    }
}

/// The same put with its budget whole: stamped again after the tombstone, and written. (The
/// control of the test above: the tombstone alone is no reason for the put to fail.)
#[tokio::test]
async fn a_put_of_a_source_behind_a_tombstone_ahead_is_stamped_again_and_written() {
    let fake = FakeTable::new();
    tombstone_ahead(&fake).await;
    let tree = tree_on(&fake);
    tree.verify().await.expect("verify");
    tree.put(["F", "f"], &forum("new")).await.expect("put");
    let stored: Option<Forum> = tree.get(["F", "f"]).await.expect("get");
    assert_eq!(stored, Some(forum("new")));
}

/// `move s->d Rewrite` against `move x->y` with the link `x/l -> s/1`, on a table that
/// throttles every other GetItem (each read costs one retry), policy of 5 tries (a call's
/// budget: 4 retries). In every serial order the link ends at `y/l -> d/1`: the Rewrite finds
/// the link held by the other move, waits for it, and must look again to find it at `y/l`.
/// Its reads in that round (the holder's lock, whether it is a re-parenting, the other intent
/// while it waits) spend the call's budget with no step of progress between them; the rounds
/// of looking again are bounded by the policy alone, so the Rewrite still looks again and a
/// move that returns `Ok` leaves no link pointing into its source.
#[test]
fn a_rewrite_move_that_returns_ok_leaves_no_link_into_its_source_when_reads_are_throttled() {
    use crate::acts::{Act, p};
    const READ_ATTEMPTS: u32 = 5;
    let base = Sim::new(
        "move s->d Rewrite vs move x->y (link x/l->s/1), every other GetItem throttled",
        || {
            let table = FakeTable::new();
            table.inject_rule(
                FaultRule::new(Fault::Throttle)
                    .operation(Op::GetItem)
                    .every(2),
            );
            table
        },
    )
    .schedules(200)
    .tree(|s| {
        Tree::builder(s)
            .retry_policy(RetryPolicy::new(
                READ_ATTEMPTS,
                Duration::ZERO,
                Duration::ZERO,
            ))
            .build()
            .expect("tree")
    })
    .setup(|t| async move {
        t.put(p(&["s", "1"]), &crate::acts::V { v: 1 }).await?;
        t.put(p(&["x", "o"]), &crate::acts::V { v: 2 }).await?;
        t.put_link(p(&["x", "l"]), p(&["s", "1"])).await?;
        Ok(())
    });
    crate::acts::with_acts(
        base,
        &[
            Act::Move(p(&["s"]), p(&["d"]), dynatree::ops::LinkPolicy::Rewrite),
            Act::Move(p(&["x"]), p(&["y"]), dynatree::ops::LinkPolicy::Report),
        ],
        true,
        Act::run,
    )
    .run();
}
