//! SDK errors map to `ErrorKind`s: canned DynamoDB error responses (as the service sends them,
//! JSON with `__type`), no server.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use dynatree::storage::{Condition, Key, Storage, TransactAction};
use dynatree::{DynamoDbTable, ErrorKind, Tree, error::Party, storage::Billing};

/// The SDK's own retries (with real sleeps) are not what these tests are about (the table
/// turns them off anyway; `retry_budget.rs` checks that).
fn no_retry(c: aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::config::Builder {
    c.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
}

/// A canned error response with a request id header, as DynamoDB sends it.
fn response(status: u16, body: String, request_id: &'static str) -> HttpResponse {
    let mut r = HttpResponse::new(status.try_into().unwrap(), body.into());
    r.headers_mut().insert("x-amzn-RequestId", request_id);
    r
}

fn body(error_type: &str, extra: &str) -> String {
    format!(
        r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{error_type}","message":"canned {error_type}"{extra}}}"#
    )
}

#[tokio::test]
async fn service_errors_map_to_kinds() {
    let cases = [
        (
            "ProvisionedThroughputExceededException",
            400,
            ErrorKind::Throttled,
        ),
        ("ThrottlingException", 400, ErrorKind::Throttled),
        ("RequestLimitExceeded", 400, ErrorKind::Throttled),
        ("LimitExceededException", 400, ErrorKind::LimitExceeded),
        ("ValidationException", 400, ErrorKind::Validation),
        (
            "ItemCollectionSizeLimitExceededException",
            400,
            ErrorKind::Validation,
        ),
        ("ResourceNotFoundException", 400, ErrorKind::TableNotFound),
        ("InternalServerError", 500, ErrorKind::Backend),
        ("AccessDeniedException", 400, ErrorKind::Backend),
    ];
    for (error_type, status, kind) in cases {
        let rule = mock!(Client::get_item)
            .sequence()
            .http_status(status, Some(body(error_type, "")))
            .repeatedly()
            .build();
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], no_retry);
        let table = DynamoDbTable::new(client, "t");
        let e = table
            .get_item(&Key::new("a", "b"), false)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), kind, "{error_type}: {e:?}");
        // Every error DynamoDB answers with here is the service's fault, with its code kept.
        assert_eq!(e.party(), Party::Service, "{error_type}");
        assert_eq!(e.service_code(), Some(error_type));
        // Only the service's own failures (HTTP 5xx) are transient: a read is resent.
        assert_eq!(e.is_transient(), status >= 500, "{error_type}");
        // The SDK error is the source; Display does not repeat it (except a validation
        // message, which says what DynamoDB refused).
        assert!(std::error::Error::source(&e).is_some(), "{error_type}");
        if kind != ErrorKind::Validation {
            assert!(!e.to_string().contains("canned"), "{e}");
        }
    }
}

#[tokio::test]
async fn conditional_check_failure() {
    let rule = mock!(Client::put_item)
        .sequence()
        .http_status(400, Some(body("ConditionalCheckFailedException", "")))
        .repeatedly()
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], no_retry);
    let table = DynamoDbTable::new(client, "t");
    let e = table
        .put_item(Key::new("a", "b").into_item(), Condition::NotExists)
        .await
        .unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    assert_eq!(e.party(), Party::Data);
    assert_eq!(e.to_string(), "condition failed");
    assert_eq!(e.service_code(), Some("ConditionalCheckFailedException"));
}

#[tokio::test]
async fn service_code_and_request_id_without_downcasting() {
    let rule = mock!(Client::get_item)
        .sequence()
        .http_response(|| {
            response(
                400,
                body("ValidationException", ""),
                "4KBNVRGD25RG1KEO9UT4V3FQDJVV4KQNSO5AEMVJF66Q9ASUAAJG",
            )
        })
        .repeatedly()
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], no_retry);
    let table = DynamoDbTable::new(client, "t");
    let e = table
        .get_item(&Key::new("a", "b"), false)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation);
    assert_eq!(e.service_code(), Some("ValidationException"));
    assert_eq!(
        e.request_id(),
        Some("4KBNVRGD25RG1KEO9UT4V3FQDJVV4KQNSO5AEMVJF66Q9ASUAAJG")
    );
    // The operation and DynamoDB's own message, for one-line reports.
    assert_eq!(e.operation(), Some("GetItem"));
    assert_eq!(e.service_message(), Some("canned ValidationException"));
    // Display stays a short lowercase phrase (with DynamoDB's message for a validation error),
    // and the SDK error stays the source.
    assert_eq!(
        e.to_string(),
        "request rejected as invalid: canned ValidationException"
    );
    let source = std::error::Error::source(&e).unwrap();
    assert!(
        source
            .downcast_ref::<aws_sdk_dynamodb::error::SdkError<
                aws_sdk_dynamodb::operation::get_item::GetItemError,
                HttpResponse,
            >>()
            .is_some()
    );
    // Wrapping keeps both.
    let wrapped = dynatree::Error::new(ErrorKind::Conflict, "").with_source(e);
    assert_eq!(wrapped.service_code(), Some("ValidationException"));
    assert_eq!(wrapped.operation(), Some("GetItem"));
    assert_eq!(
        wrapped.service_message(),
        Some("canned ValidationException")
    );
    assert!(wrapped.request_id().is_some());

    // A transaction's cancellation keeps them too, with its reasons.
    let tx = mock!(Client::transact_write_items)
        .sequence()
        .http_response(|| {
            response(
                400,
                body(
                    "TransactionCanceledException",
                    r#","CancellationReasons":[{"Code":"ThrottlingError"}]"#,
                ),
                "TXREQ",
            )
        })
        .repeatedly()
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&tx], no_retry);
    let table = DynamoDbTable::new(client, "t");
    let e = table
        .transact_write(vec![TransactAction::ConditionCheck {
            key: Key::new("a", "b"),
            condition: Condition::Exists,
        }])
        .await
        .unwrap_err();
    assert!(e.is_transaction_canceled(), "{e:?}");
    assert_eq!(e.service_code(), Some("TransactionCanceledException"));
    assert_eq!(e.request_id(), Some("TXREQ"));
    // Cancelled for throttling: the service's fault, not the data's.
    assert_eq!(e.party(), Party::Service);
}

#[tokio::test]
async fn transaction_cancellation_keeps_reasons() {
    let reasons = r#","CancellationReasons":[{"Code":"None"},{"Code":"ConditionalCheckFailed","Message":"The conditional request failed"},{"Code":"TransactionConflict"}]"#;
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .http_status(400, Some(body("TransactionCanceledException", reasons)))
        .repeatedly()
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], no_retry);
    let table = DynamoDbTable::new(client, "t");
    let e = table
        .transact_write(vec![TransactAction::ConditionCheck {
            key: Key::new("a", "b"),
            condition: Condition::Exists,
        }])
        .await
        .unwrap_err();
    assert!(e.is_transaction_canceled(), "{e:?}");
    let codes: Vec<&str> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
    assert_eq!(
        codes,
        ["None", "ConditionalCheckFailed", "TransactionConflict"]
    );
    assert_eq!(
        e.cancellation_reasons()[1].message(),
        Some("The conditional request failed")
    );
    assert!(e.is_retryable(), "a transaction conflict may succeed later");
}

#[tokio::test]
async fn table_lifecycle_errors() {
    // CreateTable on an existing table: not an error for create_table (it returns false).
    let create = mock!(Client::create_table)
        .sequence()
        .http_status(400, Some(body("ResourceInUseException", "")))
        .repeatedly()
        .build();
    // DescribeTable of a missing table: None.
    let describe = mock!(Client::describe_table)
        .sequence()
        .http_status(400, Some(body("ResourceNotFoundException", "")))
        .repeatedly()
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&create, &describe]);
    let table = DynamoDbTable::new(client, "t");
    assert!(!table.create_table(Billing::OnDemand, &[]).await.unwrap());
    assert!(table.describe_table().await.unwrap().is_none());
    // A tree whose table never shows up gives up after its wait, with a typed error.
    let tree = Tree::builder(table)
        .table_wait(std::time::Duration::from_millis(50))
        .build()
        .unwrap();
    let e = tree.create_table().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Backend);
    assert_eq!(
        e.to_string(),
        "storage backend error: table did not become active in time"
    );
}
