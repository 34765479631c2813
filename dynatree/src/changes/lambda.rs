//! The stream processor as an AWS Lambda function: [`handle`] takes the DynamoDB Streams event
//! a Lambda receives (`aws_lambda_events`' [`Event`]) and answers with the partial batch
//! response ([`DynamoDbEventResponse`]).
//!
//! Configure the event source mapping with `FunctionResponseTypes: ["ReportBatchItemFailures"]`
//! and the table's stream with the view type `NEW_AND_OLD_IMAGES`. Lambda then retries a batch
//! from the first failed record that [`handle`] reports (everything before it is applied), and
//! the shard waits meanwhile, so the changes of one item keep their order. Retries re-apply
//! changes, which is harmless: applying a change again moves no copy backwards.
//!
//! The repository's `examples/forum_lambda.rs` is a complete function on `lambda_runtime`: it
//! builds the tree once (registering the same denormalized types as the writers) and calls
//! [`handle`] for each invocation. The rest of this page is its path to production.
//!
//! # Build
//!
//! With [cargo-lambda](https://www.cargo-lambda.info/), which cross-compiles (with Zig, no
//! container needed):
//!
//! ```text
//! cargo lambda build --release --arm64 -p examples --bin forum_lambda
//! ```
//!
//! It writes `target/lambda/forum_lambda/bootstrap`: the function runs on the OS-only runtime
//! `provided.al2023` (the binary is the runtime), on `arm64` (Graviton, cheaper per
//! GB-second than `x86_64`; use `--x86-64` for the other). The binary is the whole package:
//! the SDK's TLS is rustls, compiled in.
//!
//! # Deploy
//!
//! ```text
//! cargo lambda deploy --binary-name forum_lambda \
//!   --iam-role arn:aws:iam::123456789012:role/forum-stream \
//!   --env-var DYNATREE_TABLE=forum --timeout 300 --memory 512 \
//!   forum-stream
//! ```
//!
//! cargo-lambda deploys on `provided.al2023` and takes the architecture from the binary. The
//! timeout bounds a whole batch: one record can walk a subtree (renaming a source with 10,000
//! copies below it is 10,000 conditional UpdateItems), so leave room, and lower the batch size
//! rather than raise the timeout past what a retry can afford. The function needs the table's
//! stream with the view type `NEW_AND_OLD_IMAGES`: [`Tree::create_table`] enables it when the
//! tree uses [`Propagation::Stream`](crate::denorm::Propagation::Stream) (the command line:
//! `dynatree create-table --stream`).
//!
//! # The event source mapping
//!
//! ```text
//! aws lambda create-event-source-mapping \
//!   --function-name forum-stream \
//!   --event-source-arn "$(aws dynamodb describe-table --table-name forum \
//!       --query Table.LatestStreamArn --output text)" \
//!   --starting-position TRIM_HORIZON \
//!   --function-response-types ReportBatchItemFailures \
//!   --batch-size 100 --maximum-batching-window-in-seconds 1 \
//!   --bisect-batch-on-function-error \
//!   --maximum-retry-attempts 10 --maximum-record-age-in-seconds 86400 \
//!   --destination-config '{"OnFailure":{"Destination":"arn:aws:sqs:eu-west-1:123456789012:forum-stream-failures"}}'
//! ```
//!
//! | setting | value | why |
//! |---|---|---|
//! | `FunctionResponseTypes` | `ReportBatchItemFailures` | required: without it Lambda ignores the partial batch response and retries the whole batch on any failure |
//! | `BatchSize` | 100 (up to 10,000) | records are applied one after the other; a batch must finish within the function's timeout, and one record may walk a subtree |
//! | `MaximumBatchingWindowInSeconds` | 0 to a few | how long copies may lag their source, against how many invocations a busy table costs |
//! | `BisectBatchOnFunctionError` | on | a timeout or a crash returns no partial response: Lambda splits the batch and retries the halves, so one slow record does not hold the others; after a partial response the batch is split at the reported record |
//! | `MaximumRetryAttempts` | 10 | a record that keeps failing (a type the function does not register, a permission missing) holds up its shard while it is retried; the default (-1) retries until the record leaves the stream, 24 hours later |
//! | `MaximumRecordAgeInSeconds` | 86400 | the stream keeps records 24 hours |
//! | `DestinationConfig.OnFailure` | an SQS queue or SNS topic | receives where in the stream the records are that Lambda gave up on (not the records); their copies stay stale: `dynatree check` reports stale copies, and `dynatree repair` propagates them again |
//! | `ParallelizationFactor` | 1 | one batch per shard at a time, in order. Up to 10 keeps the order per partition key only, which is enough (copies are versioned), at the price of more concurrent writes to the table |
//! | `StartingPosition` | `TRIM_HORIZON` | apply everything the stream still holds; `LATEST` skips the changes made before the mapping existed (fill them with `dynatree repair`) |
//!
//! Optionally, a filter drops the listing rows before Lambda invokes the function (the
//! function ignores them anyway): `--filter-criteria '{"Filters":[{"Pattern":"{\"dynamodb\":{\"Keys\":{\"Child\":{\"S\":[\"¦\"]}}}}"}]}'`
//! (object rows have `Child` = the reserved character; write yours if the tree uses another).
//!
//! # Permissions
//!
//! The execution role needs to read the stream, to read the table and write the copies, to
//! send to the failure destination, and to write logs (attach the managed policy
//! `AWSLambdaBasicExecutionRole` for those). The table statement is exactly what the stream
//! processor sends: consistent GetItem and Query to walk the subtree below a changed source,
//! BatchGetItem to read ancestors, UpdateItem for the version-guarded copies and PutItem for the
//! tombstone of a removed source, and DescribeTable for the table check a tree makes once,
//! before its first request (see `Tree::verify`); no Scan, no DeleteItem, no transaction, no
//! index, no other table administration.
//!
//! ```json
//! {
//!   "Version": "2012-10-17",
//!   "Statement": [
//!     {
//!       "Sid": "ReadTheStream",
//!       "Effect": "Allow",
//!       "Action": [
//!         "dynamodb:DescribeStream",
//!         "dynamodb:GetRecords",
//!         "dynamodb:GetShardIterator",
//!         "dynamodb:ListStreams"
//!       ],
//!       "Resource": "arn:aws:dynamodb:eu-west-1:123456789012:table/forum/stream/*"
//!     },
//!     {
//!       "Sid": "CopyDenormalizedFields",
//!       "Effect": "Allow",
//!       "Action": [
//!         "dynamodb:DescribeTable",
//!         "dynamodb:GetItem",
//!         "dynamodb:BatchGetItem",
//!         "dynamodb:Query",
//!         "dynamodb:UpdateItem",
//!         "dynamodb:PutItem"
//!       ],
//!       "Resource": "arn:aws:dynamodb:eu-west-1:123456789012:table/forum"
//!     },
//!     {
//!       "Sid": "ReportGivenUpRecords",
//!       "Effect": "Allow",
//!       "Action": "sqs:SendMessage",
//!       "Resource": "arn:aws:sqs:eu-west-1:123456789012:forum-stream-failures"
//!     }
//!   ]
//! }
//! ```
//!
//! Failures are logged with `tracing` at level `warn` (see [`handle`]): install a subscriber in
//! the function's `main` (for example `tracing-subscriber`'s JSON formatter) to see them in
//! CloudWatch Logs.
//!
//! # Try it locally
//!
//! The repository has a sample event, `examples/events/forum_stream.json`: a window of the forum
//! table's stream as Lambda delivers it, in which a post is created, a comment is created and
//! deleted (with its listing rows and a removal mark, which the function ignores) and the
//! forum is renamed. `cargo test -p examples --bin forum_lambda` feeds it to the example's
//! handler on the in-memory table, without cargo-lambda, and checks the partial batch
//! response, the copies, a failed record retried from its sequence number, and that every
//! request it sent is allowed by the policy above.
//!
//! With cargo-lambda, against DynamoDB Local on port 8000 (the variables of the `forum`
//! example, which writes the table first):
//!
//! ```text
//! export DYNATREE_TABLE=forum AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 \
//!   AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
//! cargo run -p examples --bin forum
//! cargo lambda watch -p examples --bin forum_lambda   # in another terminal, same variables
//! cargo lambda invoke forum_lambda --data-file examples/events/forum_stream.json
//! {"batchItemFailures":[]}
//! ```
//!
//! And against the deployed function (the sample names rows of the table `forum`; applying it
//! to any table only brings copies up to date with their sources as they are now):
//!
//! ```text
//! cargo lambda invoke --remote forum-stream --data-file examples/events/forum_stream.json
//! ```

pub use aws_lambda_events::event::dynamodb::{Event, EventRecord};
pub use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use super::{Applied, Change, ChangeKind, Follow, Process, Propagate};
use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::item::convert::from_serde_dynamo;
use crate::storage::{Key, Storage};
use crate::tree::Tree;

/// Applies the records of a DynamoDB Streams event to `tree`, in order, with
/// [`Tree::apply_changes`], and reports the first record that failed as the one batch item
/// failure (its sequence number as `itemIdentifier`), so that Lambda retries the batch from
/// there. An empty `batch_item_failures` means the whole batch was applied.
///
/// A record that is not a change of a row (an unknown event name, no keys) fails like a change
/// that cannot be applied: the records before it are applied, and it is reported. A failed
/// record without a sequence number is reported with no identifier, which Lambda takes as a
/// failure of the whole batch.
///
/// Each failure is also logged with `tracing` at level `warn`.
///
/// # Examples
///
/// ```
/// use dynatree::Tree;
/// use dynatree::changes::lambda::{Event, handle};
/// use dynatree_testing::FakeTable;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let event: Event = serde_json::from_value(serde_json::json!({
///     "Records": [{
///         "eventID": "1",
///         "eventName": "INSERT",
///         "eventSource": "aws:dynamodb",
///         "awsRegion": "us-east-1",
///         "dynamodb": {
///             "Keys": { "Key": { "S": "¦Forums¦f" }, "Child": { "S": "¦" } },
///             "NewImage": {
///                 "Key": { "S": "¦Forums¦f" }, "Child": { "S": "¦" }, "name": { "S": "Rust" }
///             },
///             "SequenceNumber": "111",
///             "SizeBytes": 42,
///             "StreamViewType": "NEW_AND_OLD_IMAGES"
///         }
///     }]
/// })).expect("an event");
/// let response = handle(&tree, &event).await;
/// assert!(response.batch_item_failures.is_empty());
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Cancelling leaves some changes applied and the rest not; Lambda delivers the batch again.
pub async fn handle<S: Storage + 'static>(tree: &Tree<S>, event: &Event) -> DynamoDbEventResponse {
    let span = tracing::info_span!(
        "dynatree.lambda.batch",
        records = event.records.len(),
        applied = tracing::field::Empty,
    );
    respond_to(event, &mut Propagate(tree.clone()), span).await
}

/// Hands the changes of the [`Entity`](crate::Entity) `T` that the records of a DynamoDB
/// Streams event say to `handler`, in order, and reports the first record that failed (it
/// does not decode, or `handler` failed its change) as the one batch item failure, so that
/// Lambda retries the batch from there: a follower of the table (a search index, a cache, a
/// notification) in a Lambda function. Records that say no change of `T` (listing rows,
/// bookkeeping, other types) are skipped; see [`watch::decode`](crate::watch::decode).
/// Delivery is at least once: a retried batch hands its changes again.
///
/// # Examples
///
/// ```
/// use dynatree::changes::lambda::{Event, handle_changes};
/// use dynatree::watch::Change;
///
/// #[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize, Debug)]
/// #[dynatree(path = "Forums/{forum}")]
/// struct Forum { forum: String, name: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let event: Event = serde_json::from_value(serde_json::json!({
///     "Records": [{
///         "eventID": "1",
///         "eventName": "INSERT",
///         "eventSource": "aws:dynamodb",
///         "awsRegion": "us-east-1",
///         "dynamodb": {
///             "Keys": { "Key": { "S": "¦Forums¦f" }, "Child": { "S": "¦" } },
///             "NewImage": {
///                 "Key": { "S": "¦Forums¦f" }, "Child": { "S": "¦" },
///                 "forum": { "S": "f" }, "name": { "S": "Rust" }
///             },
///             "SequenceNumber": "111",
///             "SizeBytes": 42,
///             "StreamViewType": "NEW_AND_OLD_IMAGES"
///         }
///     }]
/// })).expect("an event");
/// let mut names = Vec::new();
/// let response = handle_changes(&event, &mut |change: Change<Forum>| {
///     names.extend(change.value().map(|f| f.name.clone()));
///     async { Ok(()) }
/// })
/// .await;
/// assert!(response.batch_item_failures.is_empty());
/// assert_eq!(names, ["Rust"]);
/// # }
/// ```
///
/// # Cancel safety
///
/// Cancelling leaves some changes handled and the rest not; Lambda delivers the batch again.
pub async fn handle_changes<T, F, Fut>(event: &Event, handler: &mut F) -> DynamoDbEventResponse
where
    T: crate::Entity,
    F: FnMut(crate::watch::Change<T>) -> Fut + Send,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let span = tracing::info_span!(
        "dynatree.lambda.changes",
        records = event.records.len(),
        applied = tracing::field::Empty,
    );
    let mut follow = Follow {
        handler,
        _type: std::marker::PhantomData,
    };
    respond_to(event, &mut follow, span).await
}

/// Processes the records of `event` with `processor` inside `span`, and answers with the first
/// failed record.
async fn respond_to(
    event: &Event,
    processor: &mut impl Process,
    span: tracing::Span,
) -> DynamoDbEventResponse {
    let (changes, bad) = changes_of(&event.records);
    let applied = tracing::Instrument::instrument(processor.process(&changes), span.clone()).await;
    span.record("applied", applied.applied());
    let failed = first_failure(applied, bad);
    if let Some((sequence, error)) = &failed {
        tracing::warn!(
            parent: &span,
            sequence = sequence.as_deref().unwrap_or(""),
            error = %error,
            "stream record failed; Lambda retries the batch from it"
        );
    }
    respond(failed.map(|(sequence, _)| sequence))
}

/// The partial batch response: no failure, or the first failed record's sequence number.
fn respond(failed: Option<Option<String>>) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    if let Some(sequence) = failed {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = sequence;
        response.batch_item_failures.push(failure);
    }
    response
}

/// The change a Lambda's stream record reports.
///
/// # Errors
///
/// [`Serialization`](ErrorKind::Serialization) if the record is not a change of a row of a
/// tree table: an event name other than `INSERT`, `MODIFY` and `REMOVE`, no sequence number,
/// or keys other than the strings `Key` and `Child`.
///
/// # Examples
///
/// ```
/// use dynatree::changes::ChangeKind;
/// use dynatree::changes::lambda::{EventRecord, to_change};
///
/// let record: EventRecord = serde_json::from_value(serde_json::json!({
///     "eventID": "2",
///     "eventName": "REMOVE",
///     "awsRegion": "us-east-1",
///     "dynamodb": {
///         "Keys": { "Key": { "S": "¦Forums¦f" }, "Child": { "S": "¦" } },
///         "OldImage": { "Key": { "S": "¦Forums¦f" }, "Child": { "S": "¦" } },
///         "SequenceNumber": "222",
///         "SizeBytes": 30
///     }
/// })).expect("a record");
/// let change = to_change(&record)?;
/// assert_eq!(change.kind(), ChangeKind::Remove);
/// assert!(change.new_image().is_none());
/// # Ok::<(), dynatree::Error>(())
/// ```
pub fn to_change(record: &EventRecord) -> Result<Change> {
    let invalid = |what: &str| Error::new(ErrorKind::Serialization, what.to_owned());
    let kind = ChangeKind::from_event_name(&record.event_name)
        .ok_or_else(|| invalid("stream record with an unknown event name"))?;
    let body = &record.change;
    let sequence = body
        .sequence_number
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("stream record without a sequence number"))?;
    let key = Key::from_item(&image(&body.keys))
        .ok_or_else(|| invalid("stream record without string keys Key and Child"))?;
    let old = image_of(&body.old_image);
    let new = image_of(&body.new_image);
    Ok(Change::new(kind, key, old, new, sequence))
}

/// A record that is not a change: its sequence number (if it has one) and why.
type Bad = (Option<String>, Error);

/// The changes of `records` up to the first that is not one, and that one.
fn changes_of(records: &[EventRecord]) -> (Vec<Change>, Option<Bad>) {
    let mut changes = Vec::with_capacity(records.len());
    for record in records {
        match to_change(record) {
            Ok(c) => changes.push(c),
            Err(e) => {
                let seq = record
                    .change
                    .sequence_number
                    .clone()
                    .filter(|s| !s.is_empty());
                return (changes, Some((seq, e)));
            }
        }
    }
    (changes, None)
}

/// The sequence number (if any) and error of the first record that failed: the first change
/// that failed to apply, or else the first record that was not a change (every change before
/// it was applied).
fn first_failure(applied: Applied, bad: Option<Bad>) -> Option<Bad> {
    match applied.failure {
        Some(f) => Some((Some(f.sequence_number), f.error)),
        None => bad,
    }
}

fn image_of(raw: &serde_dynamo::Item) -> Option<Item> {
    (!raw.is_empty()).then(|| image(raw))
}

fn image(image: &serde_dynamo::Item) -> Item {
    let map: &std::collections::HashMap<String, serde_dynamo::AttributeValue> = image.as_ref();
    map.iter()
        .map(|(k, v)| (k.clone(), from_serde_dynamo(v.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::FailedChange;
    use crate::item::Value;

    /// A DynamoDB Streams event as Lambda delivers it (NEW_AND_OLD_IMAGES): a forum created,
    /// renamed, a thread removed, on the table `forum`.
    const EVENT: &str = r#"{
      "Records": [
        {
          "eventID": "c4ca4238a0b923820dcc509a6f75849b",
          "eventName": "INSERT",
          "eventVersion": "1.1",
          "eventSource": "aws:dynamodb",
          "awsRegion": "eu-west-1",
          "dynamodb": {
            "ApproximateCreationDateTime": 1763856000,
            "Keys": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust" }
            },
            "NewImage": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust" },
              "forum": { "S": "rust" },
              "name": { "S": "Rust" },
              "posts": { "N": "0" },
              "tags": { "SS": ["lang", "systems"] },
              "logo": { "B": "iVBORw0KGgo=" },
              "moderators": { "L": [ { "S": "ann" }, { "NULL": true } ] },
              "settings": { "M": { "open": { "BOOL": true } } },
              "¦v": { "N": "1763856000000001" }
            },
            "SequenceNumber": "4421584500000000017450439091",
            "SizeBytes": 186,
            "StreamViewType": "NEW_AND_OLD_IMAGES"
          },
          "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/forum/stream/2026-11-23T00:00:00.000"
        },
        {
          "eventID": "c81e728d9d4c2f636f067f89cc14862c",
          "eventName": "MODIFY",
          "eventVersion": "1.1",
          "eventSource": "aws:dynamodb",
          "awsRegion": "eu-west-1",
          "dynamodb": {
            "ApproximateCreationDateTime": 1763856060,
            "Keys": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust" }
            },
            "NewImage": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust" },
              "forum": { "S": "rust" },
              "name": { "S": "Rust (official)" }
            },
            "OldImage": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust" },
              "forum": { "S": "rust" },
              "name": { "S": "Rust" }
            },
            "SequenceNumber": "4421584600000000017450439176",
            "SizeBytes": 140,
            "StreamViewType": "NEW_AND_OLD_IMAGES"
          },
          "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/forum/stream/2026-11-23T00:00:00.000"
        },
        {
          "eventID": "eccbc87e4b5ce2fe28308fd9f2a7baf3",
          "eventName": "REMOVE",
          "eventVersion": "1.1",
          "eventSource": "aws:dynamodb",
          "awsRegion": "eu-west-1",
          "userIdentity": {
            "type": "Service",
            "principalId": "dynamodb.amazonaws.com"
          },
          "dynamodb": {
            "ApproximateCreationDateTime": 1763856120,
            "Keys": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust¦Threads¦t1" }
            },
            "OldImage": {
              "Child": { "S": "¦" },
              "Key": { "S": "¦Forums¦rust¦Threads¦t1" },
              "title": { "S": "Hello" }
            },
            "SequenceNumber": "4421584700000000017450439260",
            "SizeBytes": 98,
            "StreamViewType": "NEW_AND_OLD_IMAGES"
          },
          "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/forum/stream/2026-11-23T00:00:00.000"
        }
      ]
    }"#;

    fn event() -> Event {
        serde_json::from_str(EVENT).expect("the fixture is a DynamoDB event")
    }

    #[test]
    fn records_of_a_lambda_event_become_changes() {
        let event = event();
        let (changes, bad) = changes_of(&event.records);
        assert!(bad.is_none());
        assert_eq!(changes.len(), 3);

        let insert = &changes[0];
        assert_eq!(insert.kind(), ChangeKind::Insert);
        assert_eq!(insert.key(), &Key::new("¦Forums¦rust", "¦"));
        assert_eq!(insert.sequence_number(), "4421584500000000017450439091");
        assert!(insert.old_image().is_none());
        let new = insert.new_image().expect("a new image");
        assert_eq!(new.get_s("name"), Some("Rust"));
        assert_eq!(new.get_s("Key"), Some("¦Forums¦rust"));
        assert_eq!(new.get("posts"), Some(&Value::N("0".into())));
        assert_eq!(new.get("¦v"), Some(&Value::N("1763856000000001".into())));
        assert_eq!(
            new.get("tags"),
            Some(&Value::Ss(vec!["lang".into(), "systems".into()]))
        );
        assert_eq!(
            new.get("logo"),
            Some(&Value::B(vec![
                0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'
            ]))
        );
        assert_eq!(
            new.get("moderators"),
            Some(&Value::L(vec![Value::S("ann".into()), Value::Null]))
        );
        assert_eq!(
            new.get("settings"),
            Some(&Value::M(
                [("open".to_owned(), Value::Bool(true))]
                    .into_iter()
                    .collect()
            ))
        );

        let modify = &changes[1];
        assert_eq!(modify.kind(), ChangeKind::Modify);
        assert_eq!(
            modify.old_image().and_then(|i| i.get_s("name")),
            Some("Rust")
        );
        assert_eq!(
            modify.new_image().and_then(|i| i.get_s("name")),
            Some("Rust (official)")
        );

        let remove = &changes[2];
        assert_eq!(remove.kind(), ChangeKind::Remove);
        assert_eq!(remove.key(), &Key::new("¦Forums¦rust¦Threads¦t1", "¦"));
        assert!(remove.new_image().is_none());
        assert_eq!(
            remove.old_image().and_then(|i| i.get_s("title")),
            Some("Hello")
        );
    }

    #[test]
    fn a_record_that_is_not_a_change_stops_the_batch_there() {
        let mut event = event();
        event.records[1].event_name = "UPSERT".into();
        let (changes, bad) = changes_of(&event.records);
        assert_eq!(changes.len(), 1, "the records before it are still applied");
        let (seq, error) = bad.expect("the second record is refused");
        assert_eq!(seq.as_deref(), Some("4421584600000000017450439176"));
        assert_eq!(error.kind(), ErrorKind::Serialization);

        let applied = Applied {
            applied: 1,
            failure: None,
        };
        let failed = first_failure(applied, Some((seq, error))).expect("a failure");
        let response = respond(Some(failed.0));
        assert_eq!(
            serde_json::to_value(&response).expect("json"),
            serde_json::json!({
                "batchItemFailures": [{ "itemIdentifier": "4421584600000000017450439176" }]
            })
        );
    }

    #[test]
    fn the_first_change_that_fails_to_apply_is_reported() {
        let event = event();
        let (_, bad) = changes_of(&event.records);
        let applied = Applied {
            applied: 1,
            failure: Some(FailedChange {
                index: 1,
                sequence_number: "4421584600000000017450439176".into(),
                error: Error::new(ErrorKind::Throttled, ""),
            }),
        };
        let (seq, error) = first_failure(applied, bad).expect("a failure");
        assert_eq!(seq.as_deref(), Some("4421584600000000017450439176"));
        assert_eq!(error.kind(), ErrorKind::Throttled);
        let response = respond(Some(seq));
        assert_eq!(response.batch_item_failures.len(), 1);
        assert_eq!(
            response.batch_item_failures[0].item_identifier.as_deref(),
            Some("4421584600000000017450439176")
        );
    }

    #[test]
    fn a_batch_without_failures_reports_none() {
        let applied = Applied {
            applied: 3,
            failure: None,
        };
        assert!(first_failure(applied, None).is_none());
        assert_eq!(
            serde_json::to_value(respond(None)).expect("json"),
            serde_json::json!({ "batchItemFailures": [] })
        );
    }

    #[test]
    fn records_without_sequence_numbers_or_keys_are_refused() {
        let mut event = event();
        event.records[0].change.sequence_number = None;
        assert_eq!(
            to_change(&event.records[0]).unwrap_err().kind(),
            ErrorKind::Serialization
        );
        let (_, bad) = changes_of(&event.records);
        let (seq, _) = bad.expect("refused");
        assert_eq!(
            seq, None,
            "reported without an identifier: the whole batch is retried"
        );

        let mut event = self::event();
        event.records[2].change.keys = serde_dynamo::Item::default();
        assert_eq!(
            to_change(&event.records[2]).unwrap_err().kind(),
            ErrorKind::Serialization
        );
    }
}
