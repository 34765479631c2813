//! [`DynamoDbTable`]'s reads of the table's stream (feature `streams`): DescribeStream,
//! GetShardIterator and GetRecords on `aws-sdk-dynamodbstreams`, and the conversion of the
//! SDK's records, shared with [`changes::StreamConsumer`](crate::changes).
//!
//! Every call opens one span named `DynamoDBStreams.<Operation>`; record bodies are never
//! logged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::config::http::HttpResponse;
use aws_sdk_dynamodbstreams::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodbstreams::operation::RequestId;
use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, Record, ShardIteratorType};
use tracing::Instrument;

use super::record::{Change, ChangeKind};
use super::{Key, StreamPage, StreamPosition, StreamShard};
use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::item::convert::from_streams;

/// One span per DynamoDB Streams request, named `DynamoDBStreams.<Operation>`.
macro_rules! stream_span {
    ($op:literal, $arn:expr) => {
        tracing::debug_span!(
            concat!("DynamoDBStreams.", $op),
            span.kind = "client",
            db.system = "dynamodb",
            db.operation = $op,
            aws.dynamodb.stream_arn = %$arn,
            records = tracing::field::Empty,
        )
    };
}
pub(crate) use stream_span;

/// The DynamoDB Streams client of a [`DynamoDbTable`](super::dynamodb::DynamoDbTable), and
/// the ARN of the table's latest stream once DescribeTable told it.
#[derive(Debug, Clone)]
pub(crate) struct StreamClient {
    client: Client,
    arn: Arc<Mutex<Option<String>>>,
}

impl StreamClient {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            arn: Arc::default(),
        }
    }

    fn cached_arn(&self) -> Option<String> {
        self.arn.lock().ok().and_then(|a| a.clone())
    }

    /// The stream's ARN: cached, or asked with `describe` (DescribeTable's
    /// `LatestStreamArn`; `None` when the table has no stream).
    pub(crate) async fn arn(
        &self,
        describe: impl Future<Output = Result<Option<String>>>,
    ) -> Result<String> {
        if let Some(arn) = self.cached_arn() {
            return Ok(arn);
        }
        let arn = describe
            .await?
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "table has no stream"))?;
        if let Ok(mut cached) = self.arn.lock() {
            *cached = Some(arn.clone());
        }
        Ok(arn)
    }

    /// Every shard of the stream (DescribeStream, every page).
    pub(crate) async fn shards(&self, arn: &str) -> Result<Vec<StreamShard>> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .client
                .describe_stream()
                .stream_arn(arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .instrument(stream_span!("DescribeStream", arn))
                .await
                .map_err(sdk_error)?;
            let Some(desc) = out.stream_description() else {
                break;
            };
            for shard in desc.shards() {
                let Some(id) = shard.shard_id() else { continue };
                let closed = shard
                    .sequence_number_range()
                    .and_then(|r| r.ending_sequence_number())
                    .is_some();
                shards.push(StreamShard::new(
                    id,
                    shard.parent_shard_id().map(str::to_owned),
                    closed,
                ));
            }
            match desc.last_evaluated_shard_id() {
                Some(last) => start = Some(last.to_owned()),
                None => break,
            }
        }
        Ok(shards)
    }

    /// One page of `shard`'s records from `position`.
    pub(crate) async fn records(
        &self,
        arn: &str,
        shard: &str,
        position: StreamPosition,
        limit: u32,
    ) -> Result<StreamPage> {
        let iterator = match &position {
            StreamPosition::Next(iterator) => iterator.clone(),
            _ => match self.iterator(arn, shard, &position).await? {
                Some(iterator) => iterator,
                // DynamoDB Local answers TRIM_HORIZON of a shard without records yet so.
                None => {
                    return Ok(StreamPage {
                        records: Vec::new(),
                        next: Some(position),
                    });
                }
            },
        };
        let span = stream_span!("GetRecords", arn);
        let out = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .send()
            .instrument(span.clone())
            .await
            .map_err(sdk_error)?;
        span.record("records", out.records().len());
        let records = out
            .records()
            .iter()
            .map(from_stream_record)
            .collect::<Result<Vec<_>>>()?;
        Ok(StreamPage {
            records,
            next: out
                .next_shard_iterator()
                .map(|it| StreamPosition::Next(it.to_owned())),
        })
    }

    /// GetShardIterator; `None` when a shard read from its trim horizon has nothing yet.
    async fn iterator(
        &self,
        arn: &str,
        shard: &str,
        position: &StreamPosition,
    ) -> Result<Option<String>> {
        let (kind, sequence) = match position {
            StreamPosition::TrimHorizon => (ShardIteratorType::TrimHorizon, None),
            StreamPosition::Latest => (ShardIteratorType::Latest, None),
            StreamPosition::After(s) => (ShardIteratorType::AfterSequenceNumber, Some(s.clone())),
            StreamPosition::Next(_) => return Ok(None),
        };
        let sent = self
            .client
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard)
            .shard_iterator_type(kind)
            .set_sequence_number(sequence)
            .send()
            .instrument(stream_span!("GetShardIterator", arn))
            .await;
        match sent {
            Ok(out) => Ok(out.shard_iterator().map(str::to_owned)),
            Err(e)
                if e.code() == Some("TrimmedDataAccessException")
                    && *position == StreamPosition::TrimHorizon =>
            {
                Ok(None)
            }
            Err(e) => Err(sdk_error(e)),
        }
    }
}

// ---- conversions ----

fn sequence_of(record: &Record) -> Option<&str> {
    record
        .dynamodb()
        .and_then(|r| r.sequence_number())
        .filter(|s| !s.is_empty())
}

/// The change a record of `aws-sdk-dynamodbstreams`' GetRecords reports (what
/// [`StreamConsumer`](crate::changes::StreamConsumer) gives to
/// [`Tree::apply_changes`](crate::Tree::apply_changes)): its event name as the
/// [`ChangeKind`], its keys, images, sequence number and approximate creation time.
///
/// # Errors
///
/// [`Serialization`](ErrorKind::Serialization) if the record is not a change of a row of a
/// tree table: an unknown event name, no sequence number, keys other than the strings `Key`
/// and `Child`, or an attribute value of a type this SDK version does not know.
///
/// # Examples
///
/// ```
/// use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, Record, StreamRecord};
/// use dynatree::changes::{ChangeKind, from_stream_record};
///
/// let record = Record::builder()
///     .event_name(OperationType::Insert)
///     .dynamodb(StreamRecord::builder()
///         .keys("Key", AttributeValue::S("¦Forums¦f".into()))
///         .keys("Child", AttributeValue::S("¦".into()))
///         .new_image("Key", AttributeValue::S("¦Forums¦f".into()))
///         .new_image("Child", AttributeValue::S("¦".into()))
///         .new_image("name", AttributeValue::S("Rust".into()))
///         .sequence_number("100000000000000000001")
///         .build())
///     .build();
/// let change = from_stream_record(&record)?;
/// assert_eq!(change.kind(), ChangeKind::Insert);
/// assert_eq!(change.new_image().and_then(|i| i.get_s("name")), Some("Rust"));
/// # Ok::<(), dynatree::Error>(())
/// ```
pub fn from_stream_record(record: &Record) -> Result<Change> {
    let invalid = |what: &str| Error::new(ErrorKind::Serialization, what.to_owned());
    let kind = match record.event_name() {
        Some(OperationType::Insert) => ChangeKind::Insert,
        Some(OperationType::Modify) => ChangeKind::Modify,
        Some(OperationType::Remove) => ChangeKind::Remove,
        _ => return Err(invalid("stream record with an unknown event name")),
    };
    let body = record
        .dynamodb()
        .ok_or_else(|| invalid("stream record without its change"))?;
    let sequence =
        sequence_of(record).ok_or_else(|| invalid("stream record without a sequence number"))?;
    let keys = body
        .keys()
        .ok_or_else(|| invalid("stream record without keys"))
        .and_then(|m| image(m.clone()))?;
    let key = Key::from_item(&keys)
        .ok_or_else(|| invalid("stream record without string keys Key and Child"))?;
    let old = body.old_image().cloned().map(image).transpose()?;
    let new = body.new_image().cloned().map(image).transpose()?;
    let change = Change::new(kind, key, old, new, sequence);
    Ok(
        match body
            .approximate_creation_date_time()
            .and_then(|t| SystemTime::try_from(*t).ok())
        {
            Some(at) => change.with_created_at(at),
            None => change,
        },
    )
}

fn image(map: HashMap<String, AttributeValue>) -> Result<Item> {
    map.into_iter()
        .map(|(k, v)| Ok((k, from_streams(v)?)))
        .collect()
}

// ---- errors ----

/// The kind of a DynamoDB Streams (or DynamoDB) error code.
fn kind_of(code: Option<&str>) -> ErrorKind {
    match code {
        // DynamoDB Streams' LimitExceededException is its request-rate limit.
        Some(
            "LimitExceededException"
            | "ThrottlingException"
            | "ProvisionedThroughputExceededException"
            | "RequestLimitExceeded",
        ) => ErrorKind::Throttled,
        Some("ValidationException") => ErrorKind::Validation,
        Some("ResourceNotFoundException") => ErrorKind::TableNotFound,
        Some("TrimmedDataAccessException" | "ExpiredIteratorException") => ErrorKind::CursorExpired,
        _ => ErrorKind::Backend,
    }
}

/// An SDK error as a dynatree error, with the service's code and request id; the SDK's error is
/// its source. (The two SDK crates share their runtime, so this serves both.)
pub(crate) fn sdk_error<E>(err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let kind = kind_of(err.code());
    let detail = match (kind, err.message()) {
        (ErrorKind::Validation | ErrorKind::TableNotFound, Some(m)) => m.to_owned(),
        _ => String::new(),
    };
    let mut e = Error::new(kind, detail);
    if let Some(code) = err.code() {
        e = e.with_service_code(code);
    }
    let id = RequestId::request_id(&err).or_else(|| match &err {
        SdkError::ServiceError(s) => s.err().meta().request_id(),
        _ => None,
    });
    if let Some(id) = id {
        e = e.with_request_id(id);
    }
    e.with_source(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_kinds() {
        assert_eq!(
            kind_of(Some("LimitExceededException")),
            ErrorKind::Throttled
        );
        assert_eq!(
            kind_of(Some("ResourceNotFoundException")),
            ErrorKind::TableNotFound
        );
        assert_eq!(
            kind_of(Some("TrimmedDataAccessException")),
            ErrorKind::CursorExpired
        );
        assert_eq!(
            kind_of(Some("ExpiredIteratorException")),
            ErrorKind::CursorExpired
        );
        assert_eq!(kind_of(None), ErrorKind::Backend);
    }
}
