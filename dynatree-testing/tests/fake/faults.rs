//! Faults placed by operation and key ([`FaultRule`]), on the fake and through [`Faulty`]: a
//! test names the request it means ("the transaction that writes under `a`"), not its number
//! in dynatree's request plan.

use std::time::Duration;

use crate::fixtures::V;
use dynatree::storage::{Key, Storage, WriteRequest};
use dynatree::{ErrorKind, RetryPolicy, Tree, storage};
use dynatree_testing::conformance::assert_invariants;
use dynatree_testing::{FakeTable, Fault, FaultRule, Faulty, Op};

fn fast() -> RetryPolicy {
    RetryPolicy::new(6, Duration::from_millis(1), Duration::from_millis(5))
}

async fn tree_on<S: Storage + 'static>(storage: S) -> Tree {
    let tree = Tree::builder(storage).retry_policy(fast()).build().unwrap();
    tree.create_table().await.unwrap();
    tree
}

/// The lost response of the write under `a` (a PutItem from the handle that wrote or read the
/// object, a transaction from a new one that knows only its parent): whatever reads precede it (none, some, listings of `a`
/// included), the rule strikes that write: the put reports the error, the write happened, and
/// the same call again succeeds.
#[tokio::test]
async fn a_rule_on_transactions_under_a_prefix_strikes_the_put_whatever_precedes_it() {
    use futures::TryStreamExt;
    for reads in [0, 1, 5] {
        for cold in [false, true] {
            let fake = FakeTable::new();
            let tree = tree_on(fake.clone()).await;
            tree.put(["a", "x"], &V { v: 0 }).await.unwrap();
            tree.put(["b", "x"], &V { v: 0 }).await.unwrap();
            // A new handle knows no rows, so it plans the put differently.
            let tree = if cold {
                tree_on(fake.clone()).await
            } else {
                tree
            };
            // The handle that wrote the object, or one that read it, overwrites it with one
            // PutItem; a new handle that has only written `a` (so knows the parent's listing
            // row: it is adding names there) sends a transaction.
            let op = if cold && reads == 0 {
                Op::TransactWriteItems
            } else {
                Op::PutItem
            };
            fake.inject_rule(
                FaultRule::new(Fault::FailAfterApply)
                    .operation(op)
                    .key_prefix("¦a¦"),
            );
            for _ in 0..reads {
                let _: Option<V> = tree.get(["a", "x"]).await.unwrap();
                let _: Vec<String> = tree.list(["a"]).try_collect().await.unwrap();
            }
            // Writes elsewhere do not match.
            tree.put(["b", "x"], &V { v: 1 }).await.unwrap();
            tree.put(["a"], &V { v: 1 }).await.unwrap(); // hash keys `¦` and `¦a`
            assert!(fake.fired().is_empty(), "{reads} reads, cold {cold}");

            let e = tree.put(["a", "x"], &V { v: 7 }).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Backend, "{e:?}");
            assert_eq!(
                fake.fired(),
                [(op, Fault::FailAfterApply)],
                "{reads} reads, cold {cold}"
            );
            // Applied: the new value is there already; the same call again succeeds.
            assert_eq!(tree.get::<V>(["a", "x"]).await.unwrap(), Some(V { v: 7 }));
            tree.put(["a", "x"], &V { v: 7 }).await.unwrap();
            assert_eq!(fake.fired().len(), 1, "the rule fired once");
            assert!(!fake.plan().is_armed());
            assert_invariants(&tree).await;
        }
    }
}

/// A new path from a handle that knows no rows: the rule strikes the first transaction under
/// `a` (nothing applied), and the put, repeated, succeeds.
#[tokio::test]
async fn a_failed_first_transaction_of_a_new_path_is_retried_by_the_caller() {
    let fake = FakeTable::new();
    let tree = tree_on(fake.clone()).await;
    tree.put(["a", "x"], &V { v: 0 }).await.unwrap();
    let tree = tree_on(fake.clone()).await;
    fake.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .key_prefix("¦a¦"),
    );
    let e = tree.put(["a", "b", "c"], &V { v: 7 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Backend, "{e:?}");
    assert_eq!(fake.fired(), [(Op::TransactWriteItems, Fault::Fail)]);
    assert_eq!(tree.get::<V>(["a", "b", "c"]).await.unwrap(), None);
    tree.put(["a", "b", "c"], &V { v: 7 }).await.unwrap();
    assert_eq!(
        tree.get::<V>(["a", "b", "c"]).await.unwrap(),
        Some(V { v: 7 })
    );
    assert_invariants(&tree).await;
}

/// The same rule through `Faulty`, around the fake: same request struck.
#[tokio::test]
async fn faulty_takes_the_same_rules() {
    let table = Faulty::new(FakeTable::new());
    let tree = tree_on(table.clone()).await;
    tree.put(["a", "x"], &V { v: 0 }).await.unwrap();
    table.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .key_prefix("¦a¦"),
    );
    let _: Option<V> = tree.get(["a", "x"]).await.unwrap();
    tree.put(["b"], &V { v: 1 }).await.unwrap();
    let e = tree.put(["a", "y"], &V { v: 2 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Backend);
    assert_eq!(table.fired(), [(Op::TransactWriteItems, Fault::Fail)]);
    // Not applied.
    assert_eq!(tree.get::<V>(["a", "y"]).await.unwrap(), None);
    tree.put(["a", "y"], &V { v: 2 }).await.unwrap();
    assert_eq!(tree.get::<V>(["a", "y"]).await.unwrap(), Some(V { v: 2 }));
    assert_invariants(&tree).await;
}

/// `nth` counts only matching requests; `times` strikes that many in a row; throttles are
/// retried by dynatree.
#[tokio::test]
async fn nth_and_times_count_matching_requests_only() {
    let fake = FakeTable::new();
    let tree = tree_on(fake.clone()).await;
    // Objects this tree wrote: each put below is one PutItem.
    tree.put(["a"], &V { v: 0 }).await.unwrap();
    tree.put(["b"], &V { v: 0 }).await.unwrap();
    fake.inject_rule(
        FaultRule::new(Fault::Throttle)
            .operation(Op::PutItem)
            .key_prefix("¦a")
            .nth(1)
            .times(2),
    );
    tree.put(["b"], &V { v: 1 }).await.unwrap();
    tree.put(["a"], &V { v: 1 }).await.unwrap(); // match 0: not struck
    assert!(fake.fired().is_empty());
    fake.reset_metrics(); // keeps rules (only request numbers are dropped)
    tree.put(["a"], &V { v: 1 }).await.unwrap(); // matches 1 and 2 throttled, 3 goes through
    assert_eq!(
        fake.fired(),
        [
            (Op::PutItem, Fault::Throttle),
            (Op::PutItem, Fault::Throttle)
        ]
    );
    assert_eq!(fake.metrics().requests("PutItem"), 3);
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), Some(V { v: 1 }));
}

/// An exact key: only reads of that row fail, every time, until cleared.
#[tokio::test]
async fn an_exact_key_rule_strikes_only_that_row() {
    let fake = FakeTable::new();
    let tree = tree_on(fake.clone()).await;
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    tree.put(["b"], &V { v: 2 }).await.unwrap();
    fake.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::GetItem)
            .key(Key::new("¦a", "¦"))
            .always(),
    );
    for _ in 0..3 {
        assert!(tree.get::<V>(["a"]).await.is_err());
        assert_eq!(tree.get::<V>(["b"]).await.unwrap(), Some(V { v: 2 }));
    }
    assert_eq!(fake.fired().len(), 3);
    fake.clear_faults();
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), Some(V { v: 1 }));
}

/// A Query touches its partition: a key-prefix rule strikes listings under it.
#[tokio::test]
async fn a_prefix_rule_strikes_queries_of_matching_partitions() {
    use futures::TryStreamExt;
    let fake = FakeTable::new();
    let tree = tree_on(fake.clone()).await;
    tree.put(["a", "x"], &V { v: 1 }).await.unwrap();
    tree.put(["b", "x"], &V { v: 1 }).await.unwrap();
    fake.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::Query)
            .key_prefix("¦a¦"),
    );
    let names: Vec<String> = tree.list(["b"]).try_collect().await.unwrap();
    assert_eq!(names, ["x"]);
    assert!(tree.list(["a"]).try_collect::<Vec<_>>().await.is_err());
    let names: Vec<String> = tree.list(["a"]).try_collect().await.unwrap();
    assert_eq!(names, ["x"]);
}

/// Two rules due on one request: the first added fires, and both count the request.
#[tokio::test]
async fn one_request_suffers_one_fault() {
    let fake = FakeTable::new();
    let tree = tree_on(fake.clone()).await;
    fake.inject_rule(FaultRule::new(Fault::Fail).operation(Op::GetItem));
    fake.inject_rule(FaultRule::new(Fault::Throttle).operation(Op::GetItem));
    assert_eq!(
        tree.get::<V>(["a"]).await.unwrap_err().kind(),
        ErrorKind::Backend
    );
    // The throttle rule counted that request as its match 0: it is spent too.
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), None);
    assert_eq!(fake.fired(), [(Op::GetItem, Fault::Fail)]);
}

fn rows(prefix: &str, n: usize) -> Vec<WriteRequest> {
    (0..n)
        .map(|i| WriteRequest::Put(Key::new(prefix, format!("{i:02}")).into_item()))
        .collect()
}

fn keys(prefix: &str, n: usize) -> Vec<Key> {
    (0..n)
        .map(|i| Key::new(prefix, format!("{i:02}")))
        .collect()
}

/// `Faulty` leaves batch items unprocessed; dynatree's batch helpers resend them until done.
#[tokio::test]
async fn faulty_unprocessed_batch_items_are_retried_by_the_batch_helpers() {
    let table = Faulty::new(FakeTable::new());
    tree_on(table.clone()).await;
    table.inject_rule(
        FaultRule::new(Fault::Unprocessed { processed: 10 })
            .operation(Op::BatchWriteItem)
            .times(2),
    );
    // 30 rows: chunk of 25 → 10 written, 15 back; 15 → 10 written, 5 back; 5; then 5.
    storage::write_all(&table, rows("h", 30), &fast())
        .await
        .unwrap();
    assert_eq!(table.inner().rows().len(), 30);
    assert_eq!(table.fired().len(), 2);
    let m = table.inner().metrics();
    assert_eq!(m.requests("BatchWriteItem"), 4);

    table.inject_rule(
        FaultRule::new(Fault::Unprocessed { processed: 3 })
            .operation(Op::BatchGetItem)
            .times(3),
    );
    let found = storage::get_all(&table, keys("h", 30), true, &fast())
        .await
        .unwrap();
    assert_eq!(found.len(), 30);
    assert_eq!(table.fired().len(), 5);
    // 30 → 3 + 27 back; 27 → 3 + 24 back; 24 → 3 + 21 back; 21 → all.
    assert_eq!(table.inner().metrics().requests("BatchGetItem"), 4);
}

/// Nothing processed, ever: the helpers give up with a count, and nothing reached the backend.
#[tokio::test]
async fn faulty_unprocessed_forever_gives_up_with_a_count() {
    let table = Faulty::new(FakeTable::new());
    tree_on(table.clone()).await;
    table.inject_always(Fault::Unprocessed { processed: 0 });
    let e = storage::write_all(&table, rows("g", 30), &fast())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unprocessed);
    assert_eq!(e.unprocessed_count(), 30);
    assert!(table.inner().rows().is_empty());
    assert_eq!(table.inner().metrics().requests("BatchWriteItem"), 0);

    let e = storage::get_all(&table, keys("g", 5), false, &fast())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unprocessed);
    assert_eq!(e.unprocessed_count(), 5);
}

/// A lost response of a partly processed batch: the processed part is applied.
#[tokio::test]
async fn faulty_unprocessed_items_are_added_to_the_backends_own() {
    let table = Faulty::new(FakeTable::new());
    tree_on(table.clone()).await;
    // The backend itself leaves all but 2 of what it is sent unprocessed.
    table.inner().inject_rule(
        FaultRule::new(Fault::Unprocessed { processed: 2 }).operation(Op::BatchWriteItem),
    );
    table.inject_rule(
        FaultRule::new(Fault::Unprocessed { processed: 5 }).operation(Op::BatchWriteItem),
    );
    let back = table.batch_write(rows("u", 8)).await.unwrap();
    let back: Vec<String> = back
        .into_iter()
        .map(|r| match r {
            WriteRequest::Put(item) => Key::from_item(&item).unwrap().range,
            WriteRequest::Delete(k) => k.range,
        })
        .collect();
    assert_eq!(back, ["02", "03", "04", "05", "06", "07"]);
    assert_eq!(table.inner().rows().len(), 2);
}

/// The numbered API keeps working (and counts every operation).
#[tokio::test]
async fn numbered_faults_still_work() {
    let fake = FakeTable::new();
    let tree = tree_on(fake.clone()).await;
    fake.inject(1, Fault::Fail);
    assert!(tree.get::<V>(["a"]).await.is_ok());
    assert!(tree.get::<V>(["a"]).await.is_err());
    fake.inject(5, Fault::Fail);
    fake.reset_metrics(); // drops numbered faults
    for _ in 0..8 {
        assert!(tree.get::<V>(["a"]).await.is_ok());
    }
    assert_eq!(fake.fired(), [(Op::GetItem, Fault::Fail)]);
}

/// A backend (or layer) that answers with the wrong kind of response is reported as a
/// `Backend` error naming the operation that got it ("a {op} answered with ..."). The
/// typed methods name the wrong one: every request answered `Done` (DeleteItem,
/// TransactWriteItems, UpdateTable, ...) is reported as a PutItem, and a Scan as a Query.
#[tokio::test]
async fn a_wrong_response_names_the_operation_that_got_it() {
    use dynatree::storage::{Condition, Request, Response};

    /// Answers every request with an item.
    struct Wrong;
    impl Storage for Wrong {
        async fn send(&self, _request: Request) -> dynatree::Result<Response> {
            Ok(Response::Item(None))
        }
    }
    let e = Wrong
        .delete_item(&Key::new("h", "r"), Condition::Always)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Backend);
    assert!(e.to_string().contains("DeleteItem"), "{e}");
    let e = Wrong.transact_write(vec![]).await.unwrap_err();
    assert!(e.to_string().contains("TransactWriteItems"), "{e}");
    let e = Wrong.scan_page(None, None).await.unwrap_err();
    assert!(e.to_string().contains("Scan"), "{e}");
}
