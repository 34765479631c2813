//! One retry budget: `DynamoDbTable` turns the SDK's retries off, so a throttled request is
//! sent at most `RetryPolicy::max_attempts` times in all, by dynatree's loop alone. Canned
//! DynamoDB responses (aws-smithy-mocks), no server; the mock counts every request sent.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemOutput;
use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::operation::put_item::PutItemOutput;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use dynatree::storage::{Condition, Key, Storage};
use dynatree::{DynamoDbTable, ErrorKind, RetryPolicy, Tree};

const ATTEMPTS: u32 = 4;

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct V {
    v: u8,
}

fn body(error_type: &str) -> String {
    format!(
        r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{error_type}","message":"canned {error_type}"}}"#
    )
}

fn throttle() -> String {
    body("ProvisionedThroughputExceededException")
}

fn policy() -> RetryPolicy {
    RetryPolicy::new(ATTEMPTS, Duration::from_millis(1), Duration::from_millis(2))
}

/// A client whose SDK retries are on (standard mode, 5 attempts): the table must turn them
/// off, or every count below is multiplied by 5.
fn client(rules: &[&Rule]) -> Client {
    mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules, |c| c
        .retry_config(RetryConfig::standard().with_max_attempts(5)))
}

fn tree(client: Client) -> Tree {
    // These tests count the requests of one operation: the table check of the first request
    // (a DescribeTable, counted elsewhere) is left out.
    Tree::builder(DynamoDbTable::new(client, "t"))
        .verify_table(false)
        .retry_policy(policy())
        .build()
        .unwrap()
}

/// PutItem answers "condition failed": a cold handle's first try of a put as an overwrite
/// finds no object, and the put goes on by its transaction.
fn no_object() -> Rule {
    mock!(Client::put_item)
        .sequence()
        .http_status(400, Some(body("ConditionalCheckFailedException")))
        .repeatedly()
        .build()
}

/// Reads answer "nothing there", so that a write's planning reads succeed.
fn empty_reads() -> (Rule, Rule) {
    let get = mock!(Client::get_item)
        .sequence()
        .output(|| GetItemOutput::builder().build())
        .repeatedly()
        .build();
    let batch = mock!(Client::batch_get_item)
        .sequence()
        .output(|| BatchGetItemOutput::builder().build())
        .repeatedly()
        .build();
    (get, batch)
}

#[tokio::test]
async fn the_table_turns_the_sdk_retries_off() {
    let rule = mock!(Client::get_item)
        .sequence()
        .http_status(400, Some(throttle()))
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&rule]), "t");
    let retry = table.client().config().retry_config().unwrap();
    assert_eq!(retry.max_attempts(), 1);
    // One Storage call, one request.
    let e = table.get_item(&Key::new("a", "b"), true).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Throttled, "{e:?}");
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn always_throttled_get_sends_max_attempts() {
    let rule = mock!(Client::get_item)
        .sequence()
        .http_status(400, Some(throttle()))
        .repeatedly()
        .build();
    let tree = tree(client(&[&rule]));
    let e = tree.get::<V>(["a"]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Throttled, "{e:?}");
    assert_eq!(
        e.service_code(),
        Some("ProvisionedThroughputExceededException")
    );
    assert_eq!(rule.num_calls(), ATTEMPTS as usize);
}

#[tokio::test]
async fn always_throttled_transaction_sends_max_attempts() {
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .http_status(400, Some(throttle()))
        .repeatedly()
        .build();
    let (get, batch) = empty_reads();
    let absent = no_object();
    let tree = tree(client(&[&rule, &get, &batch, &absent]));
    let e = tree.put(["a"], &V { v: 1 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Throttled, "{e:?}");
    assert_eq!(rule.num_calls(), ATTEMPTS as usize);
    assert_eq!(absent.num_calls(), 1);
}

#[tokio::test]
async fn always_throttled_put_item_sends_max_attempts() {
    // PutItem is what the tree sends for intents and removal marks; it runs each request in
    // the policy's loop, as `RetryPolicy::retry_throttled` does here.
    let rule = mock!(Client::put_item)
        .sequence()
        .http_status(400, Some(throttle()))
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&rule]), "t");
    let e = policy()
        .retry_throttled(|| table.put_item(Key::new("a", "b").into_item(), Condition::Always))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Throttled, "{e:?}");
    assert_eq!(rule.num_calls(), ATTEMPTS as usize);
}

#[tokio::test]
async fn throttled_twice_then_done_sends_three() {
    let get = mock!(Client::get_item)
        .sequence()
        .http_status(400, Some(throttle()))
        .times(2)
        .output(|| GetItemOutput::builder().build())
        .repeatedly()
        .build();
    let tree1 = tree(client(&[&get]));
    assert_eq!(tree1.get::<V>(["a"]).await.unwrap(), None);
    assert_eq!(get.num_calls(), 3);

    let tx = mock!(Client::transact_write_items)
        .sequence()
        .http_status(400, Some(throttle()))
        .times(2)
        .output(|| TransactWriteItemsOutput::builder().build())
        .repeatedly()
        .build();
    let (reads, batch) = empty_reads();
    let absent = no_object();
    let tree2 = tree(client(&[&tx, &reads, &batch, &absent]));
    tree2.put(["a"], &V { v: 1 }).await.unwrap();
    assert_eq!(tx.num_calls(), 3);
    assert_eq!(absent.num_calls(), 1);

    let put = mock!(Client::put_item)
        .sequence()
        .http_status(400, Some(throttle()))
        .times(2)
        .output(|| PutItemOutput::builder().build())
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&put]), "t");
    policy()
        .retry_throttled(|| table.put_item(Key::new("a", "b").into_item(), Condition::Always))
        .await
        .unwrap();
    assert_eq!(put.num_calls(), 3);
}

#[tokio::test]
async fn errors_that_are_not_throttling_are_sent_once() {
    // DynamoDB refused the request as invalid: once, through the tree.
    let get = mock!(Client::get_item)
        .sequence()
        .http_status(400, Some(body("ValidationException")))
        .repeatedly()
        .build();
    let tree1 = tree(client(&[&get]));
    let e = tree1.get::<V>(["a"]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation, "{e:?}");
    assert_eq!(get.num_calls(), 1);

    // A failed condition: once (the SDK would not retry it either; nor does the policy).
    let put = mock!(Client::put_item)
        .sequence()
        .http_status(400, Some(body("ConditionalCheckFailedException")))
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&put]), "t");
    let e = policy()
        .retry_throttled(|| table.put_item(Key::new("a", "b").into_item(), Condition::NotExists))
        .await
        .unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    assert_eq!(put.num_calls(), 1);

    // A server error: the SDK would have retried it 5 times; the table sends it once.
    let tx = mock!(Client::transact_write_items)
        .sequence()
        .http_status(500, Some(body("InternalServerError")))
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&tx]), "t");
    let e = table.transact_write(Vec::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Backend, "{e:?}");
    assert_eq!(tx.num_calls(), 1);
}

/// A 500 as the service sends it (`InternalServerError`) and as DynamoDB Local does
/// (`InternalFailure`).
fn server_error(code: &str) -> String {
    if code == "InternalFailure" {
        // DynamoDB Local's generic failure has no `com.amazonaws.dynamodb` namespace.
        format!(r#"{{"__type":"com.amazon.coral.service#{code}","message":"canned {code}"}}"#)
    } else {
        body(code)
    }
}

#[tokio::test]
async fn reads_that_fail_transiently_are_resent_within_the_budget() {
    for code in [
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
    ] {
        // Twice, then an answer: the get returns it, after three requests.
        let get = mock!(Client::get_item)
            .sequence()
            .http_status(500, Some(server_error(code)))
            .times(2)
            .output(|| GetItemOutput::builder().build())
            .repeatedly()
            .build();
        let tree1 = tree(client(&[&get]));
        assert_eq!(tree1.get::<V>(["a"]).await.unwrap(), None, "{code}");
        assert_eq!(get.num_calls(), 3, "{code}");

        // Always: the policy's number of tries, then the last error, transient.
        let always = mock!(Client::get_item)
            .sequence()
            .http_status(500, Some(server_error(code)))
            .repeatedly()
            .build();
        let tree2 = tree(client(&[&always]));
        let e = tree2.get::<V>(["a"]).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Backend, "{code}: {e:?}");
        assert!(e.is_transient() && e.is_retryable(), "{code}: {e:?}");
        assert_eq!(e.service_code(), Some(code));
        assert_eq!(always.num_calls(), ATTEMPTS as usize, "{code}");
    }

    // A batch read, and the table's description through the public loop.
    let batch = mock!(Client::batch_get_item)
        .sequence()
        .http_status(500, Some(server_error("InternalServerError")))
        .times(1)
        .output(|| BatchGetItemOutput::builder().build())
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&batch]), "t");
    let found = dynatree::storage::get_all(&table, vec![Key::new("a", "b")], true, &policy())
        .await
        .unwrap();
    assert!(found.is_empty());
    assert_eq!(batch.num_calls(), 2);
    let always = mock!(Client::batch_get_item)
        .sequence()
        .http_status(500, Some(server_error("InternalServerError")))
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&always]), "t");
    let e = dynatree::storage::get_all(&table, vec![Key::new("a", "b")], true, &policy())
        .await
        .unwrap_err();
    assert!(
        e.is_transient(),
        "the last try's error, not unprocessed keys: {e:?}"
    );
    assert_eq!(always.num_calls(), ATTEMPTS as usize);

    let describe = mock!(Client::describe_table)
        .sequence()
        .http_status(500, Some(server_error("InternalFailure")))
        .times(1)
        .output(|| {
            aws_sdk_dynamodb::operation::describe_table::DescribeTableOutput::builder().build()
        })
        .repeatedly()
        .build();
    let table = DynamoDbTable::new(client(&[&describe]), "t");
    policy()
        .retry_read(|| table.describe_table())
        .await
        .unwrap();
    assert_eq!(describe.num_calls(), 2);
}

#[tokio::test]
async fn writes_that_fail_transiently_are_not_resent() {
    // The transaction may have been applied: its error reaches the caller after one try.
    let tx = mock!(Client::transact_write_items)
        .sequence()
        .http_status(500, Some(server_error("InternalServerError")))
        .repeatedly()
        .build();
    let (get, batch) = empty_reads();
    let absent = no_object();
    let tree = tree(client(&[&tx, &get, &batch, &absent]));
    let e = tree.put(["a"], &V { v: 1 }).await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(tx.num_calls(), 1);

    // Access denied is a backend error, but not transient: a read is not resent either.
    let denied = mock!(Client::get_item)
        .sequence()
        .http_status(400, Some(body("AccessDeniedException")))
        .repeatedly()
        .build();
    let tree = self::tree(client(&[&denied]));
    let e = tree.get::<V>(["a"]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Backend, "{e:?}");
    assert!(!e.is_transient(), "{e:?}");
    assert_eq!(denied.num_calls(), 1);
}
