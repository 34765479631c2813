//! Calls whose answer was lost: what a resend does inside and after DynamoDB's ten-minute
//! window for a transaction's idempotency token (the fake remembers tokens on tokio's clock,
//! which these tests advance).

use std::time::Duration;

use dynatree::{ErrorKind, Hierarchical, Patch, Tree};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    balance: i64,
    #[dynatree(version)]
    version: u64,
}

fn key() -> AccountKey {
    AccountKey { id: "a".into() }
}

async fn setup() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    tree.repo::<Account>()
        .put(&Account {
            id: "a".into(),
            balance: 10,
            version: 0,
        })
        .await
        .unwrap();
    (table, tree)
}

/// Every answer to a transaction is lost from now on (they are applied): a first commit and
/// the retries it makes under its token.
fn lose_answers(table: &FakeTable) {
    table.inject_rule(
        FaultRule::new(Fault::FailAfterApply)
            .operation(Op::TransactWriteItems)
            .always(),
    );
}

/// A deposit whose response is lost (it was applied), sent again with its token.
async fn deposit_lost_then_resent(wait: Duration) -> (Tree, dynatree::Result<()>) {
    let (table, tree) = setup().await;
    let f = Account::FIELDS;
    let deposit = || {
        let mut tx = tree.transaction();
        tx.patch(Patch::new(&key()).add(f.balance, 5))
            .idempotency_token("deposit-42");
        tx
    };
    // Every answer of the first commit is lost (its retries under the token included).
    lose_answers(&table);
    let first = deposit().commit().await;
    assert!(first.is_err(), "the first answer is lost");
    table.clear_faults();
    tokio::time::sleep(wait).await;
    let again = deposit().commit().await;
    (tree, again)
}

#[tokio::test(start_paused = true)]
async fn a_resend_within_ten_minutes_applies_once() {
    let (tree, again) = deposit_lost_then_resent(Duration::from_secs(9 * 60)).await;
    again.expect("the resend succeeds: DynamoDB answers for the first commit");
    let a = tree.repo::<Account>().get(&key()).await.unwrap().unwrap();
    assert_eq!(a.balance, 15, "applied once");
}

/// After the token's window a resend is a new transaction: an unconditional patch applies a
/// second time (the documented behaviour: make a commit you may resend that late conditional).
#[tokio::test(start_paused = true)]
async fn a_resend_after_ten_minutes_is_a_new_transaction() {
    let (tree, again) = deposit_lost_then_resent(Duration::from_secs(11 * 60)).await;
    again.expect("nothing refuses it");
    let a = tree.repo::<Account>().get(&key()).await.unwrap().unwrap();
    assert_eq!(a.balance, 20, "applied twice");
}

/// The remedy: a commit conditional on what the caller read (here the version field) is
/// refused when sent again after the window, so it is never applied twice; the refusal means
/// "applied before, or changed since": read again to tell.
#[tokio::test(start_paused = true)]
async fn a_conditional_resend_after_ten_minutes_is_refused() {
    let (table, tree) = setup().await;
    let f = Account::FIELDS;
    let read = tree.repo::<Account>().get(&key()).await.unwrap().unwrap();
    let deposit = || {
        let mut tx = tree.transaction();
        tx.patch(
            Patch::new(&key())
                .add(f.balance, 5)
                .when(f.version.eq(read.version)),
        )
        .idempotency_token("deposit-43");
        tx
    };
    lose_answers(&table);
    assert!(
        deposit().commit().await.is_err(),
        "the first answer is lost"
    );
    table.clear_faults();
    tokio::time::sleep(Duration::from_secs(11 * 60)).await;
    let err = deposit().commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TransactionCanceled, "{err}");
    let a = tree.repo::<Account>().get(&key()).await.unwrap().unwrap();
    assert_eq!(a.balance, 15, "applied once");
}
