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
//! See the `forum_lambda` example for a complete function on `lambda_runtime`.

pub use aws_lambda_events::event::dynamodb::{Event, EventRecord};
pub use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use super::{Applied, Change, ChangeKind};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
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
    let (changes, bad) = changes_of(&event.records);
    let applied = tracing::Instrument::instrument(tree.apply_changes(&changes), span.clone()).await;
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
    map.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

fn value(v: &serde_dynamo::AttributeValue) -> Value {
    use serde_dynamo::AttributeValue as A;
    match v {
        A::S(s) => Value::S(s.clone()),
        A::N(n) => Value::N(n.clone()),
        A::B(b) => Value::B(b.clone()),
        A::Bool(b) => Value::Bool(*b),
        A::Null(_) => Value::Null,
        A::L(l) => Value::L(l.iter().map(value).collect()),
        A::M(m) => Value::M(m.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
        A::Ss(s) => Value::Ss(s.clone()),
        A::Ns(n) => Value::Ns(n.clone()),
        A::Bs(b) => Value::Bs(b.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::FailedChange;

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
