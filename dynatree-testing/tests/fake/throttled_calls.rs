//! The most requests one user call sends while the service throttles: for each request kind,
//! every request of that kind is throttled, and the call's requests are counted. The figures
//! are deterministic (no delays, one process), so each is asserted exactly: a change of the
//! retry structure shows here first. The policy allows 4 tries of one request; a throttled
//! request is tried that often and then fails the call (a batch read with `Unprocessed`), so
//! the worst case is the requests before it plus its 4 tries. Without throttling, the put
//! below sends 3 requests, the transaction 2 and the move 29.

use std::time::Duration;

use dynatree::{ErrorKind, Hierarchical, RetryPolicy, Tree};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op};

const ATTEMPTS: u32 = 4;

/// Every request kind a call of the tree sends.
const KINDS: [Op; 9] = [
    Op::GetItem,
    Op::PutItem,
    Op::DeleteItem,
    Op::UpdateItem,
    Op::Query,
    Op::BatchGetItem,
    Op::BatchWriteItem,
    Op::TransactWriteItems,
    Op::TransactGetItems,
];

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct V {
    v: u32,
}

#[derive(Hierarchical, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    v: u32,
}

fn account(id: &str, v: u32) -> Account {
    Account { id: id.into(), v }
}

async fn setup() -> (FakeTable, Tree) {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone())
        .retry_policy(RetryPolicy::new(ATTEMPTS, Duration::ZERO, Duration::ZERO))
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.verify().await.unwrap();
    (fake, tree)
}

/// A fresh handle on `fake` with `attempts` tries per request: nothing cached from the
/// preparation.
async fn fresh(fake: &FakeTable, attempts: u32) -> Tree {
    let tree = Tree::builder(fake.clone())
        .retry_policy(RetryPolicy::new(attempts, Duration::ZERO, Duration::ZERO))
        .build()
        .unwrap();
    tree.verify().await.unwrap();
    tree
}

/// For each request kind, throttled always: the requests the call sends, with the kind, and
/// the call's error kind.
async fn worst<F, Fut>(prepare: impl AsyncFn(&Tree), call: F) -> Vec<(Op, u64, Option<ErrorKind>)>
where
    F: Fn(Tree) -> Fut,
    Fut: Future<Output = dynatree::Result<()>>,
{
    let mut out = Vec::new();
    for kind in KINDS {
        let (fake, tree) = setup().await;
        prepare(&tree).await;
        let fresh = fresh(&fake, ATTEMPTS).await;
        fake.reset_metrics();
        fake.inject_rule(FaultRule::new(Fault::Throttle).operation(kind).always());
        let result = call(fresh).await;
        out.push((
            kind,
            fake.metrics().total_requests(),
            result.err().map(|e| e.kind()),
        ));
    }
    out
}

fn largest(counts: &[(Op, u64, Option<ErrorKind>)]) -> u64 {
    counts.iter().map(|(_, n, _)| *n).max().unwrap_or(0)
}

#[tokio::test]
async fn a_put_of_a_new_name_sends_a_bounded_number_of_requests_when_throttled() {
    let counts = worst(
        async |tree: &Tree| tree.put(["a", "b"], &V { v: 0 }).await.unwrap(),
        |tree| async move { tree.put(["a", "b", "c"], &V { v: 1 }).await },
    )
    .await;
    for (kind, n, error) in &counts {
        // A throttled kind the put needs fails the call with `Throttled` (`Unprocessed` for a
        // batch read); one it does not need leaves it done.
        assert!(
            matches!(
                error,
                None | Some(ErrorKind::Throttled | ErrorKind::Unprocessed)
            ),
            "{kind:?}: {n} requests, {error:?}"
        );
    }
    // A failed overwrite (this handle cannot tell a new name from another process's object)
    // and the read of the listing rows, then 4 tries of the throttled transaction.
    assert_eq!(largest(&counts), 6, "{counts:?}");
}

#[tokio::test]
async fn a_transaction_sends_a_bounded_number_of_requests_when_throttled() {
    let counts = worst(
        async |tree: &Tree| tree.repo::<Account>().put(&account("a", 0)).await.unwrap(),
        |tree| async move {
            let mut tx = tree.transaction();
            tx.put(&account("a", 1)).put(&account("b", 2));
            tx.commit().await
        },
    )
    .await;
    for (kind, n, error) in &counts {
        assert!(
            matches!(
                error,
                None | Some(ErrorKind::Throttled | ErrorKind::Unprocessed)
            ),
            "{kind:?}: {n} requests, {error:?}"
        );
    }
    assert_eq!(largest(&counts), 5, "{counts:?}");
}

#[tokio::test]
async fn a_move_sends_a_bounded_number_of_requests_when_throttled() {
    let counts = worst(
        async |tree: &Tree| {
            for p in [["src", "a"], ["src", "b"]] {
                tree.put(p, &V { v: 0 }).await.unwrap();
            }
        },
        |tree| async move { tree.move_subtree(["src"], ["dst"]).await.map(|_| ()) },
    )
    .await;
    for (kind, n, error) in &counts {
        assert!(
            matches!(
                error,
                None | Some(ErrorKind::Throttled | ErrorKind::Unprocessed)
            ),
            "{kind:?}: {n} requests, {error:?}"
        );
    }
    // The worst kind, DeleteItem, fails the move after most of its steps are done.
    assert_eq!(largest(&counts), 33, "{counts:?}");
}

/// Every other request of the call throttled, from its first: the call's requests, and what
/// it returned.
async fn every_other<F, Fut>(
    attempts: u32,
    prepare: impl AsyncFn(&Tree),
    call: F,
) -> (u64, dynatree::Result<()>)
where
    F: FnOnce(Tree) -> Fut,
    Fut: Future<Output = dynatree::Result<()>>,
{
    let (fake, tree) = setup().await;
    prepare(&tree).await;
    let fresh = fresh(&fake, attempts).await;
    fake.reset_metrics();
    fake.inject_rule(FaultRule::new(Fault::Throttle).every(2));
    let result = call(fresh).await;
    (fake.metrics().total_requests(), result)
}

// One budget per call: the retries of every layer of a call (the request resent, the guarded
// write tried again, the batch's unprocessed keys) draw from the policy's `ATTEMPTS - 1`, given
// back at each step of progress. With every other request throttled, each request is sent
// twice: a put of a new name (3 requests) spends exactly its 3 retries and succeeds in 6.

#[tokio::test]
async fn a_put_of_a_new_name_spends_one_budget_when_every_other_request_is_throttled() {
    let (sent, result) = every_other(
        ATTEMPTS,
        async |tree: &Tree| tree.put(["a", "b"], &V { v: 0 }).await.unwrap(),
        |tree| async move { tree.put(["a", "b", "c"], &V { v: 1 }).await },
    )
    .await;
    result.unwrap();
    assert_eq!(sent, 6);
}

#[tokio::test]
async fn a_transaction_spends_one_budget_when_every_other_request_is_throttled() {
    let (sent, result) = every_other(
        ATTEMPTS,
        async |tree: &Tree| tree.repo::<Account>().put(&account("a", 0)).await.unwrap(),
        |tree| async move {
            let mut tx = tree.transaction();
            tx.put(&account("a", 1)).put(&account("b", 2));
            tx.commit().await
        },
    )
    .await;
    result.unwrap();
    assert_eq!(sent, 4);
}

#[tokio::test]
async fn a_move_fails_throttled_once_its_budget_is_spent_before_a_step() {
    // Before its first step (the intent recorded) a move reads four times: every other request
    // throttled, those four need four retries, one more than the budget of `ATTEMPTS` tries.
    // No single request was tried more than twice.
    let (sent, result) = every_other(
        ATTEMPTS,
        async |tree: &Tree| {
            for p in [["src", "a"], ["src", "b"]] {
                tree.put(p, &V { v: 0 }).await.unwrap();
            }
        },
        |tree| async move { tree.move_subtree(["src"], ["dst"]).await.map(|_| ()) },
    )
    .await;
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Throttled);
    assert_eq!(sent, 7);
}

#[tokio::test]
async fn a_move_spends_one_budget_per_step_when_every_other_request_is_throttled() {
    // With the default number of tries, each step of the move (the intent recorded, each
    // phase, each object locked, copied, deleted) has the budget again: the move succeeds,
    // each of its 29 requests sent twice.
    let (sent, result) = every_other(
        RetryPolicy::default().max_attempts(),
        async |tree: &Tree| {
            for p in [["src", "a"], ["src", "b"]] {
                tree.put(p, &V { v: 0 }).await.unwrap();
            }
        },
        |tree| async move { tree.move_subtree(["src"], ["dst"]).await.map(|_| ()) },
    )
    .await;
    result.unwrap();
    assert_eq!(sent, 58);
}
