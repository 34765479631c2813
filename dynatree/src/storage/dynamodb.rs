//! [`DynamoDbTable`]: the [`Storage`] backend on `aws-sdk-dynamodb`.
//!
//! The SDK's types stay in this module. Every call opens one span named
//! `DynamoDB.<Operation>` with OpenTelemetry's database fields and records the consumed
//! capacity once the response arrives (asked for only while a subscriber records the span).
//! Keys are never logged with item bodies.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::RequestId;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    self as t, AttributeValue, BillingMode, ConsumedCapacity, KeyType, ReturnConsumedCapacity,
    ScalarAttributeType,
};
use tracing::Instrument;

use super::{HASH_KEY, RANGE_KEY};
use crate::error::{CancellationReason, Error, ErrorKind, Result};
use crate::item::convert::{from_sdk, to_sdk};
use crate::item::{Item, Value};
use crate::storage::expr::Expr;
use crate::storage::{
    BatchGetOutput, Billing, Condition, IndexPage, IndexQuery, IndexSpec, Key, Page, Query,
    Request, Response, ScanSegment, Storage, TableDescription, TableStatus, TransactAction,
    UpdateAction, WriteRequest,
};

/// One DynamoDB table, through an `aws_sdk_dynamodb::Client` built by the caller.
///
/// # Retries: one budget
///
/// The table turns the SDK's own retries off on the client it is given (the SDK's default,
/// standard mode with 3 attempts, would otherwise run inside dynatree's loop and multiply with
/// it). Every call of [`Storage`] sends exactly one request; throttled requests, unprocessed
/// batch items and lost races are retried by the tree, within its
/// [`RetryPolicy`](crate::RetryPolicy). So one throttled request of a tree operation is sent
/// at most [`RetryPolicy::max_attempts`](crate::RetryPolicy::max_attempts) times (10 by
/// default), not 3 × 10. Everything else about the client (credentials, region, endpoint,
/// timeouts, interceptors, HTTP client) is kept.
///
/// # Errors
///
/// Service errors map to [`ErrorKind`]s (`ConditionalCheckFailedException` to
/// [`ConditionFailed`](ErrorKind::ConditionFailed), throttling to
/// [`Throttled`](ErrorKind::Throttled), `LimitExceededException` to
/// [`LimitExceeded`](ErrorKind::LimitExceeded), `ValidationException` to
/// [`Validation`](ErrorKind::Validation), `ResourceNotFoundException` to
/// [`TableNotFound`](ErrorKind::TableNotFound), anything else to
/// [`Backend`](ErrorKind::Backend)); the error keeps DynamoDB's code
/// ([`Error::service_code`]), message ([`Error::service_message`]) and request id
/// ([`Error::request_id`]) and the operation that failed ([`Error::operation`]), and the SDK's
/// error is its [`source`](std::error::Error::source).
///
/// # Examples
///
/// ```no_run
/// use dynatree::{DynamoDbTable, Tree};
///
/// # async fn run() -> dynatree::Result<()> {
/// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
/// let client = aws_sdk_dynamodb::Client::new(&config);
/// let tree = Tree::new(DynamoDbTable::new(client, "my-tree"));
/// tree.create_table().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DynamoDbTable {
    client: Client,
    table: String,
    /// The client of the table's stream ([`DynamoDbTable::with_streams`]).
    #[cfg(feature = "streams")]
    streams: Option<super::dynamodb_stream::StreamClient>,
}

impl DynamoDbTable {
    /// The table `table_name`, reached through `client`, with the SDK's retries turned off (see
    /// [Retries](DynamoDbTable#retries-one-budget)): a copy of `client` whose configuration is
    /// the same but for `RetryConfig::disabled()`. Clones of `client` used elsewhere keep their
    /// retries.
    ///
    /// That copy gets a connection pool of its own when `client` uses the SDK's default HTTP
    /// client (measured: `cargo bench -p dynatree-testing --bench put_compare`, section "HTTP
    /// client"). To share one pool between your own calls and the tree's, build `client` with
    /// `RetryConfig::disabled()` (or with an explicit `http_client`): it is then kept as given.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use dynatree::DynamoDbTable;
    ///
    /// # async fn run() {
    /// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    /// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "my-tree");
    /// let retry = table.client().config().retry_config().unwrap();
    /// assert_eq!(retry.max_attempts(), 1);
    /// # }
    /// ```
    pub fn new(client: Client, table_name: impl Into<String>) -> Self {
        Self {
            client: without_retries(&client),
            table: table_name.into(),
            #[cfg(feature = "streams")]
            streams: None,
        }
    }

    /// The same table, reading its stream through `client` (feature `streams`): what
    /// [`Tree::watch`](crate::Tree::watch) and [`Storage::stream_shards`] need. Without it,
    /// reads of the stream are refused ([`ErrorKind::InvalidArgument`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use dynatree::DynamoDbTable;
    ///
    /// # async fn run() {
    /// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    /// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "my-tree")
    ///     .with_streams(aws_sdk_dynamodbstreams::Client::new(&config));
    /// # }
    /// ```
    #[cfg(feature = "streams")]
    #[cfg_attr(docsrs, doc(cfg(feature = "streams")))]
    #[must_use]
    pub fn with_streams(mut self, client: aws_sdk_dynamodbstreams::Client) -> Self {
        self.streams = Some(super::dynamodb_stream::StreamClient::new(client));
        self
    }

    /// The table's name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::DynamoDbTable;
    /// # async fn run() {
    /// # let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    /// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "my-tree");
    /// assert_eq!(table.table_name(), "my-tree");
    /// # }
    /// ```
    pub fn table_name(&self) -> &str {
        &self.table
    }

    /// The SDK client the table sends with: the one it was given, with the SDK's retries
    /// turned off.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use dynatree::DynamoDbTable;
    /// # async fn run() {
    /// # let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    /// let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), "my-tree");
    /// let tables = table.client().list_tables().send().await;
    /// # }
    /// ```
    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// `client` with the same configuration but no SDK retries: dynatree's `RetryPolicy` is the
/// only retry loop.
fn without_retries(client: &Client) -> Client {
    let config = client.config();
    if config.retry_config().is_some_and(|r| r.max_attempts() <= 1) {
        return client.clone();
    }
    // A valid client's configuration with retries off is valid: `from_conf` does not panic.
    Client::from_conf(
        config
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build(),
    )
}

/// One span per DynamoDB call, named `DynamoDB.<Operation>`, with OpenTelemetry's database
/// fields; the consumed capacity is recorded when the response arrives. Keys and item bodies
/// are never recorded.
macro_rules! op_span {
    ($table:expr, $op:literal) => {
        tracing::debug_span!(
            concat!("DynamoDB.", $op),
            span.kind = "client",
            db.system = "dynamodb",
            db.operation = $op,
            db.name = %$table,
            aws.dynamodb.consumed_capacity = tracing::field::Empty,
        )
    };
}

/// The consumed capacity to ask for: the total when the call's span is recorded (a
/// subscriber listens at its level), else none, so that a process without one neither sends
/// nor parses it.
fn capacity() -> Option<ReturnConsumedCapacity> {
    (!tracing::Span::current().is_disabled()).then_some(ReturnConsumedCapacity::Total)
}

fn record_capacity<'a>(caps: impl IntoIterator<Item = &'a ConsumedCapacity>) {
    let total: f64 = caps
        .into_iter()
        .filter_map(ConsumedCapacity::capacity_units)
        .sum();
    tracing::Span::current().record("aws.dynamodb.consumed_capacity", total);
}

// ---- conversions ----

fn to_map(item: Item) -> HashMap<String, AttributeValue> {
    item.into_iter().map(|(k, v)| (k, to_sdk(v))).collect()
}

fn from_map(map: HashMap<String, AttributeValue>) -> Result<Item> {
    map.into_iter()
        .map(|(k, v)| Ok((k, from_sdk(v)?)))
        .collect()
}

fn key_map(key: &Key) -> HashMap<String, AttributeValue> {
    to_map(key.clone().into_item())
}

fn key_from_map(map: HashMap<String, AttributeValue>) -> Result<Key> {
    super::key_of(&from_map(map)?)
}

/// The values of an expression's placeholders, in the SDK's types.
fn av_values(expr: &Expr) -> Option<HashMap<String, AttributeValue>> {
    expr.values().map(|values| {
        values
            .iter()
            .map(|(k, v)| (k.clone(), to_sdk(v.clone())))
            .collect()
    })
}

/// A GSI definition projecting every attribute.
fn gsi(ix: &IndexSpec, billing: Billing) -> Result<t::GlobalSecondaryIndex> {
    let key = |n: &str, k: KeyType| {
        t::KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(k)
            .build()
            .map_err(build_err)
    };
    let mut b = t::GlobalSecondaryIndex::builder()
        .index_name(&ix.name)
        .key_schema(key(&ix.hash_attr, KeyType::Hash)?)
        .projection(
            t::Projection::builder()
                .projection_type(t::ProjectionType::All)
                .build(),
        );
    if let Some(r) = &ix.range_attr {
        b = b.key_schema(key(r, KeyType::Range)?);
    }
    if let Billing::Provisioned { read, write } = billing {
        b = b.provisioned_throughput(
            t::ProvisionedThroughput::builder()
                .read_capacity_units(i64::try_from(read).unwrap_or(i64::MAX))
                .write_capacity_units(i64::try_from(write).unwrap_or(i64::MAX))
                .build()
                .map_err(build_err)?,
        );
    }
    b.build().map_err(build_err)
}

// ---- errors ----

/// The kind of a DynamoDB error code.
fn kind_of(code: Option<&str>) -> ErrorKind {
    match code {
        Some("ConditionalCheckFailedException") => ErrorKind::ConditionFailed,
        Some("TransactionCanceledException") => ErrorKind::TransactionCanceled,
        Some(
            "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            // The account's throughput limit (on-demand tables): throttling too.
            | "RequestLimitExceeded",
        ) => ErrorKind::Throttled,
        // "Only 1 online index can be created or deleted simultaneously per table", too many
        // table operations at once, account quotas.
        Some("LimitExceededException") => ErrorKind::LimitExceeded,
        Some("ValidationException" | "ItemCollectionSizeLimitExceededException") => {
            ErrorKind::Validation
        }
        // A client request token reused with other parameters: the request is invalid.
        Some("IdempotentParameterMismatchException") => ErrorKind::Validation,
        Some("ResourceNotFoundException") => ErrorKind::TableNotFound,
        // Another request with the same client request token is still running.
        Some("TransactionConflictException" | "TransactionInProgressException") => {
            ErrorKind::Conflict
        }
        _ => ErrorKind::Backend,
    }
}

/// The DynamoDB operation whose SDK error type this is (named by [`Error::operation`]).
trait Operation {
    const NAME: &'static str;
}

macro_rules! operations {
    ($($module:ident :: $error:ident => $name:literal,)*) => {
        $(impl Operation for aws_sdk_dynamodb::operation::$module::$error {
            const NAME: &'static str = $name;
        })*
    };
}

operations! {
    batch_get_item::BatchGetItemError => "BatchGetItem",
    batch_write_item::BatchWriteItemError => "BatchWriteItem",
    create_table::CreateTableError => "CreateTable",
    delete_item::DeleteItemError => "DeleteItem",
    describe_table::DescribeTableError => "DescribeTable",
    describe_time_to_live::DescribeTimeToLiveError => "DescribeTimeToLive",
    get_item::GetItemError => "GetItem",
    put_item::PutItemError => "PutItem",
    query::QueryError => "Query",
    scan::ScanError => "Scan",
    transact_get_items::TransactGetItemsError => "TransactGetItems",
    transact_write_items::TransactWriteItemsError => "TransactWriteItems",
    update_item::UpdateItemError => "UpdateItem",
    update_table::UpdateTableError => "UpdateTable",
    update_time_to_live::UpdateTimeToLiveError => "UpdateTimeToLive",
}

/// The operation, and DynamoDB's code, message and request id on `e`, when the service
/// answered.
fn with_metadata<E>(e: Error, err: &SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + Operation,
{
    let mut e = e.with_operation(E::NAME);
    if let Some(code) = err.code() {
        e = e.with_service_code(code);
    }
    if let Some(message) = err.message() {
        e = e.with_service_message(message);
    }
    let id = RequestId::request_id(err).or_else(|| match err {
        SdkError::ServiceError(s) => s.err().meta().request_id(),
        _ => None,
    });
    if let Some(id) = id {
        e = e.with_request_id(id);
    }
    e
}

fn map_err<E>(err: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + Operation + std::error::Error + Send + Sync + 'static,
{
    let kind = kind_of(err.code());
    let detail = match (kind, err.message()) {
        (ErrorKind::Validation, Some(m)) => m.to_owned(),
        _ => String::new(),
    };
    let mut e = with_metadata(Error::new(kind, detail), &err);
    if kind == ErrorKind::Backend && transient(&err) {
        e = e.with_transient();
    }
    e.with_source(err)
}

/// Whether the service, or the way to it, failed for reasons of its own: a timeout, a
/// connection that failed or dropped, an answer that could not be read, an HTTP 5xx answer
/// (DynamoDB's `InternalServerError` and `ServiceUnavailable`; DynamoDB Local says
/// `InternalFailure`). The AWS SDKs' standard retry classifies the same as transient; a
/// request refused for the caller's reasons (access denied, a bad signature) is not.
fn transient<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    match err {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(d) => d.is_io() || d.is_timeout(),
        SdkError::ServiceError(s) => {
            s.raw().status().is_server_error()
                || matches!(
                    err.code(),
                    Some("InternalServerError" | "InternalFailure" | "ServiceUnavailable")
                )
        }
        _ => false,
    }
}

/// The SDK refused to build a request (a required field missing): nothing was sent.
fn build_err(e: aws_sdk_dynamodb::error::BuildError) -> Error {
    Error::new(ErrorKind::InvalidArgument, "request could not be built").with_source(e)
}

impl DynamoDbTable {
    /// TransactWriteItems, with a client request token if given.
    async fn transact(&self, actions: Vec<TransactAction>, token: Option<&str>) -> Result<()> {
        if token == Some("") {
            // DynamoDB refuses a token under 1 character; DynamoDB Local 3.3.1 would take an
            // empty one as no token at all, and apply a repeat again.
            return Err(Error::new(
                ErrorKind::Validation,
                "value at 'clientRequestToken' failed to satisfy constraint: member must have length between 1 and 36",
            ));
        }
        {
            let mut items = Vec::with_capacity(actions.len());
            for action in actions {
                // The expressions as `TransactAction::payload_size` counts them.
                let (expr, update, cond) = Expr::transact(&action);
                let item = match action {
                    TransactAction::Put { item, .. } => t::TransactWriteItem::builder()
                        .put(
                            t::Put::builder()
                                .table_name(&self.table)
                                .set_item(Some(to_map(item)))
                                .set_condition_expression(cond)
                                .set_expression_attribute_names(expr.names())
                                .set_expression_attribute_values(av_values(&expr))
                                .build()
                                .map_err(build_err)?,
                        )
                        .build(),
                    TransactAction::Delete { key, .. } => t::TransactWriteItem::builder()
                        .delete(
                            t::Delete::builder()
                                .table_name(&self.table)
                                .set_key(Some(key_map(&key)))
                                .set_condition_expression(cond)
                                .set_expression_attribute_names(expr.names())
                                .set_expression_attribute_values(av_values(&expr))
                                .build()
                                .map_err(build_err)?,
                        )
                        .build(),
                    TransactAction::ConditionCheck { key, .. } => {
                        // DynamoDB requires an expression: `Expr::transact` always gives one.
                        t::TransactWriteItem::builder()
                            .condition_check(
                                t::ConditionCheck::builder()
                                    .table_name(&self.table)
                                    .set_key(Some(key_map(&key)))
                                    .set_condition_expression(cond)
                                    .set_expression_attribute_names(expr.names())
                                    .set_expression_attribute_values(av_values(&expr))
                                    .build()
                                    .map_err(build_err)?,
                            )
                            .build()
                    }
                    TransactAction::Update { key, actions, .. } => {
                        if actions.is_empty() {
                            return Err(Error::new(
                                ErrorKind::InvalidArgument,
                                "an update inside a transaction needs at least one action (TransactWriteItems requires an update expression)",
                            ));
                        }
                        t::TransactWriteItem::builder()
                            .update(
                                t::Update::builder()
                                    .table_name(&self.table)
                                    .set_key(Some(key_map(&key)))
                                    .set_update_expression(update)
                                    .set_condition_expression(cond)
                                    .set_expression_attribute_names(expr.names())
                                    .set_expression_attribute_values(av_values(&expr))
                                    .build()
                                    .map_err(build_err)?,
                            )
                            .build()
                    }
                };
                items.push(item);
            }
            let out = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items))
                .set_client_request_token(token.map(str::to_owned))
                .set_return_consumed_capacity(capacity())
                .send()
                .await;
            match out {
                Ok(out) => {
                    record_capacity(out.consumed_capacity());
                    Ok(())
                }
                Err(err) => {
                    if let Some(TransactWriteItemsError::TransactionCanceledException(ex)) =
                        err.as_service_error()
                    {
                        let reasons = ex
                            .cancellation_reasons()
                            .iter()
                            .map(|r| {
                                CancellationReason::new(
                                    r.code().unwrap_or("None"),
                                    r.message().map(str::to_owned),
                                )
                            })
                            .collect();
                        let e = with_metadata(Error::transaction_canceled(reasons), &err);
                        return Err(e.with_source(err));
                    }
                    Err(map_err(err))
                }
            }
        }
    }
}

impl DynamoDbTable {
    /// GetItem, projected unless `projection` is empty.
    async fn get(
        &self,
        key: &Key,
        consistent: bool,
        projection: &[String],
    ) -> Result<Option<Item>> {
        async {
            let mut expr = Expr::default();
            let out = self
                .client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(key_map(key)))
                .consistent_read(consistent)
                .set_projection_expression(expr.projection(projection))
                .set_expression_attribute_names(expr.names())
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            out.item.map(from_map).transpose()
        }
        .instrument(op_span!(self.table, "GetItem"))
        .await
    }

    /// BatchGetItem, projected unless `projection` is empty.
    async fn batch(
        &self,
        keys: Vec<Key>,
        consistent: bool,
        projection: &[String],
    ) -> Result<BatchGetOutput> {
        if keys.is_empty() {
            return Ok(BatchGetOutput::default());
        }
        async {
            let mut expr = Expr::default();
            let ka = t::KeysAndAttributes::builder()
                .set_keys(Some(keys.iter().map(key_map).collect()))
                .consistent_read(consistent)
                .set_projection_expression(expr.projection(projection))
                .set_expression_attribute_names(expr.names())
                .build()
                .map_err(build_err)?;
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, ka)
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            let items = out
                .responses
                .and_then(|mut r| r.remove(&self.table))
                .unwrap_or_default()
                .into_iter()
                .map(from_map)
                .collect::<Result<_>>()?;
            let unprocessed = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(&self.table))
                .map(|ka| ka.keys)
                .unwrap_or_default()
                .into_iter()
                .map(key_from_map)
                .collect::<Result<_>>()?;
            Ok(BatchGetOutput { items, unprocessed })
        }
        .instrument(op_span!(self.table, "BatchGetItem"))
        .await
    }
}

impl Storage for DynamoDbTable {
    async fn send(&self, request: Request) -> Result<Response> {
        Ok(match request {
            Request::GetItem {
                key,
                consistent,
                projection,
            } => Response::Item(
                self.get(&key, consistent, projection.as_deref().unwrap_or_default())
                    .await?,
            ),
            Request::PutItem { item, condition } => {
                self.put_item(item, condition).await?;
                Response::Done
            }
            Request::DeleteItem { key, condition } => {
                self.delete_item(&key, condition).await?;
                Response::Done
            }
            Request::UpdateItem {
                key,
                actions,
                condition,
            } => Response::Updated(self.update_item(&key, actions, condition).await?),
            Request::Query { query, start } => {
                Response::Page(self.query_page(&query, start).await?)
            }
            Request::Scan {
                segment,
                limit,
                start,
            } => Response::Page(
                self.scan_segment_page(segment.unwrap_or_else(ScanSegment::whole), limit, start)
                    .await?,
            ),
            Request::QueryIndex { query, start } => {
                Response::IndexPage(self.query_index_page(&query, start).await?)
            }
            Request::BatchGet {
                keys,
                consistent,
                projection,
            } => Response::BatchGet(
                self.batch(keys, consistent, projection.as_deref().unwrap_or_default())
                    .await?,
            ),
            Request::BatchWrite { requests } => {
                Response::Unprocessed(self.batch_write(requests).await?)
            }
            Request::TransactGet { keys } => Response::Items(self.transact_get(keys).await?),
            Request::TransactWrite { actions, token } => {
                self.transact_write(actions, token.as_deref()).await?;
                Response::Done
            }
            Request::CreateTable { billing, indexes } => {
                Response::Created(self.create_table(billing, &indexes).await?)
            }
            Request::AddIndex { billing, index } => {
                self.add_index(billing, &index).await?;
                Response::Done
            }
            Request::DescribeTable => Response::Table(self.describe_table().await?),
            Request::EnableTtl { attribute } => {
                self.enable_ttl(&attribute).await?;
                Response::Done
            }
            Request::TtlAttribute => Response::TtlAttribute(self.ttl_attribute().await?),
            Request::EnableStream => {
                self.enable_stream().await?;
                Response::Done
            }
            Request::StreamShards => Response::Shards(self.stream_shards_page().await?),
            Request::StreamRecords {
                shard,
                position,
                limit,
            } => Response::Records(self.stream_page(&shard, position, limit).await?),
        })
    }
}

/// The stream's reads, through the client of [`DynamoDbTable::with_streams`].
impl DynamoDbTable {
    #[cfg(feature = "streams")]
    async fn stream_client(&self) -> Result<(&super::dynamodb_stream::StreamClient, String)> {
        let client = self.streams.as_ref().ok_or_else(no_stream_client)?;
        let describe = async {
            let out = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .instrument(op_span!(self.table, "DescribeTable"))
                .await
                .map_err(map_err)?;
            Ok(out
                .table()
                .and_then(|t| t.latest_stream_arn())
                .map(str::to_owned))
        };
        let arn = client.arn(describe).await?;
        Ok((client, arn))
    }

    async fn stream_shards_page(&self) -> Result<Vec<super::StreamShard>> {
        #[cfg(feature = "streams")]
        {
            let (client, arn) = self.stream_client().await?;
            client.shards(&arn).await
        }
        #[cfg(not(feature = "streams"))]
        Err(no_stream_client())
    }

    async fn stream_page(
        &self,
        shard: &str,
        position: super::StreamPosition,
        limit: u32,
    ) -> Result<super::StreamPage> {
        #[cfg(feature = "streams")]
        {
            let (client, arn) = self.stream_client().await?;
            client.records(&arn, shard, position, limit).await
        }
        #[cfg(not(feature = "streams"))]
        {
            let _ = (shard, position, limit);
            Err(no_stream_client())
        }
    }
}

fn no_stream_client() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "reading the table's stream needs a DynamoDB Streams client (feature `streams`, DynamoDbTable::with_streams)",
    )
}

/// Each request, as [`Storage::send`] dispatches it.
impl DynamoDbTable {
    async fn put_item(&self, item: Item, condition: Condition) -> Result<()> {
        async {
            let mut expr = Expr::default();
            let cond = expr.condition(&condition);
            let out = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(to_map(item)))
                .set_condition_expression(cond)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(av_values(&expr))
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            Ok(())
        }
        .instrument(op_span!(self.table, "PutItem"))
        .await
    }

    async fn delete_item(&self, key: &Key, condition: Condition) -> Result<()> {
        async {
            let mut expr = Expr::default();
            let cond = expr.condition(&condition);
            let out = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key_map(key)))
                .set_condition_expression(cond)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(av_values(&expr))
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            Ok(())
        }
        .instrument(op_span!(self.table, "DeleteItem"))
        .await
    }

    async fn query_page(&self, query: &Query, start: Option<Key>) -> Result<Page> {
        async {
            let mut expr = Expr::default();
            let h = expr.name(HASH_KEY);
            let hv = expr.value(Value::S(query.hash.clone()));
            let mut kce = format!("{h} = {hv}");
            if let Some(range) = &query.range {
                kce = format!("{kce} AND {}", expr.range(RANGE_KEY, range));
            }
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(kce)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(av_values(&expr))
                .scan_index_forward(query.forward)
                .consistent_read(query.consistent)
                .set_limit(query.limit.map(|l| i32::try_from(l).unwrap_or(i32::MAX)))
                .set_exclusive_start_key(start.as_ref().map(key_map))
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            Ok(Page {
                items: out
                    .items
                    .unwrap_or_default()
                    .into_iter()
                    .map(from_map)
                    .collect::<Result<_>>()?,
                last_key: out.last_evaluated_key.map(key_from_map).transpose()?,
            })
        }
        .instrument(op_span!(self.table, "Query"))
        .await
    }

    async fn scan_segment_page(
        &self,
        segment: ScanSegment,
        limit: Option<u32>,
        start: Option<Key>,
    ) -> Result<Page> {
        let split = segment.total() > 1;
        async {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .set_segment(split.then(|| i32::try_from(segment.index()).unwrap_or(i32::MAX)))
                .set_total_segments(
                    split.then(|| i32::try_from(segment.total()).unwrap_or(i32::MAX)),
                )
                .set_limit(limit.map(|l| i32::try_from(l).unwrap_or(i32::MAX)))
                .set_exclusive_start_key(start.as_ref().map(key_map))
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            Ok(Page {
                items: out
                    .items
                    .unwrap_or_default()
                    .into_iter()
                    .map(from_map)
                    .collect::<Result<_>>()?,
                last_key: out.last_evaluated_key.map(key_from_map).transpose()?,
            })
        }
        .instrument(op_span!(self.table, "Scan"))
        .await
    }

    async fn transact_get(&self, keys: Vec<Key>) -> Result<Vec<Option<Item>>> {
        async {
            let gets = keys
                .iter()
                .map(|k| {
                    t::Get::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_map(k)))
                        .build()
                        .map(|g| t::TransactGetItem::builder().get(g).build())
                        .map_err(|e| Error::new(ErrorKind::Backend, format!("building a get: {e}")))
                })
                .collect::<Result<Vec<_>>>()?;
            let out = self
                .client
                .transact_get_items()
                .set_transact_items(Some(gets))
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            out.responses
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.item.map(from_map).transpose())
                .collect()
        }
        .instrument(op_span!(self.table, "TransactGetItems"))
        .await
    }

    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        async {
            let reqs = requests
                .into_iter()
                .map(|r| {
                    Ok(match r {
                        WriteRequest::Put(item) => t::WriteRequest::builder()
                            .put_request(
                                t::PutRequest::builder()
                                    .set_item(Some(to_map(item)))
                                    .build()
                                    .map_err(build_err)?,
                            )
                            .build(),
                        WriteRequest::Delete(key) => t::WriteRequest::builder()
                            .delete_request(
                                t::DeleteRequest::builder()
                                    .set_key(Some(key_map(&key)))
                                    .build()
                                    .map_err(build_err)?,
                            )
                            .build(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let out = self
                .client
                .batch_write_item()
                .request_items(&self.table, reqs)
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            out.unprocessed_items
                .and_then(|mut u| u.remove(&self.table))
                .unwrap_or_default()
                .into_iter()
                .filter_map(|w| {
                    if let Some(p) = w.put_request {
                        Some(from_map(p.item).map(WriteRequest::Put))
                    } else {
                        w.delete_request
                            .map(|d| key_from_map(d.key).map(WriteRequest::Delete))
                    }
                })
                .collect()
        }
        .instrument(op_span!(self.table, "BatchWriteItem"))
        .await
    }

    async fn transact_write(
        &self,
        actions: Vec<TransactAction>,
        token: Option<&str>,
    ) -> Result<()> {
        self.transact(actions, token)
            .instrument(op_span!(self.table, "TransactWriteItems"))
            .await
    }

    async fn update_item(
        &self,
        key: &Key,
        actions: Vec<UpdateAction>,
        condition: Condition,
    ) -> Result<Item> {
        async {
            let mut expr = Expr::default();
            let update = expr.update(&actions);
            let cond = expr.condition(&condition);
            let out = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key_map(key)))
                .set_update_expression(update)
                .set_condition_expression(cond)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(av_values(&expr))
                .return_values(t::ReturnValue::AllNew)
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            match out.attributes {
                Some(map) => from_map(map),
                // Nothing to return only if the update left nothing but the key.
                None => Ok(key.clone().into_item()),
            }
        }
        .instrument(op_span!(self.table, "UpdateItem"))
        .await
    }

    async fn enable_ttl(&self, attribute: &str) -> Result<()> {
        let sent: Result<()> = async {
            self.client
                .update_time_to_live()
                .table_name(&self.table)
                .time_to_live_specification(
                    t::TimeToLiveSpecification::builder()
                        .enabled(true)
                        .attribute_name(attribute)
                        .build()
                        .map_err(build_err)?,
                )
                .send()
                .await
                .map_err(map_err)?;
            Ok(())
        }
        .instrument(op_span!(self.table, "UpdateTimeToLive"))
        .await;
        match sent {
            // DynamoDB refuses to enable it again ("TimeToLive is already enabled"): that is
            // success when it is enabled on this attribute.
            Err(e) if e.kind() == ErrorKind::Validation => {
                if self.ttl_attribute().await?.as_deref() == Some(attribute) {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    async fn enable_stream(&self) -> Result<()> {
        let view = t::StreamViewType::NewAndOldImages;
        let current = async {
            let out = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(map_err)?;
            Ok::<_, Error>(out.table.and_then(|t| t.stream_specification))
        }
        .instrument(op_span!(self.table, "DescribeTable"))
        .await?;
        if let Some(spec) = current
            && spec.stream_enabled
        {
            return if spec.stream_view_type == Some(view) {
                Ok(())
            } else {
                Err(Error::new(
                    ErrorKind::Validation,
                    "the table's stream is enabled with another view type than NEW_AND_OLD_IMAGES",
                ))
            };
        }
        async {
            self.client
                .update_table()
                .table_name(&self.table)
                .stream_specification(
                    t::StreamSpecification::builder()
                        .stream_enabled(true)
                        .stream_view_type(view)
                        .build()
                        .map_err(build_err)?,
                )
                .send()
                .await
                .map_err(map_err)?;
            Ok(())
        }
        .instrument(op_span!(self.table, "UpdateTable"))
        .await
    }

    async fn ttl_attribute(&self) -> Result<Option<String>> {
        async {
            let out = self
                .client
                .describe_time_to_live()
                .table_name(&self.table)
                .send()
                .await
                .map_err(map_err)?;
            Ok(out.time_to_live_description.and_then(|d| {
                matches!(
                    d.time_to_live_status,
                    Some(t::TimeToLiveStatus::Enabled | t::TimeToLiveStatus::Enabling)
                )
                .then_some(d.attribute_name)
                .flatten()
            }))
        }
        .instrument(op_span!(self.table, "DescribeTimeToLive"))
        .await
    }

    async fn create_table(&self, billing: Billing, indexes: &[IndexSpec]) -> Result<bool> {
        async {
            let attr = |n: &str| {
                t::AttributeDefinition::builder()
                    .attribute_name(n)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(build_err)
            };
            let key = |n: &str, k: KeyType| {
                t::KeySchemaElement::builder()
                    .attribute_name(n)
                    .key_type(k)
                    .build()
                    .map_err(build_err)
            };
            let mut req = self
                .client
                .create_table()
                .table_name(&self.table)
                .attribute_definitions(attr(HASH_KEY)?)
                .attribute_definitions(attr(RANGE_KEY)?)
                .key_schema(key(HASH_KEY, KeyType::Hash)?)
                .key_schema(key(RANGE_KEY, KeyType::Range)?);
            let mut defined = vec![HASH_KEY.to_owned(), RANGE_KEY.to_owned()];
            for ix in indexes {
                for a in std::iter::once(&ix.hash_attr).chain(ix.range_attr.as_ref()) {
                    if !defined.contains(a) {
                        req = req.attribute_definitions(attr(a)?);
                        defined.push(a.clone());
                    }
                }
                req = req.global_secondary_indexes(gsi(ix, billing)?);
            }
            req = match billing {
                Billing::OnDemand => req.billing_mode(BillingMode::PayPerRequest),
                Billing::Provisioned { read, write } => req
                    .billing_mode(BillingMode::Provisioned)
                    .provisioned_throughput(
                        t::ProvisionedThroughput::builder()
                            .read_capacity_units(i64::try_from(read).unwrap_or(i64::MAX))
                            .write_capacity_units(i64::try_from(write).unwrap_or(i64::MAX))
                            .build()
                            .map_err(build_err)?,
                    ),
            };
            match req.send().await {
                Ok(_) => Ok(true),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_in_use_exception()) =>
                {
                    Ok(false)
                }
                Err(e) => Err(map_err(e)),
            }
        }
        .instrument(op_span!(self.table, "CreateTable"))
        .await
    }

    async fn add_index(&self, billing: Billing, index: &IndexSpec) -> Result<()> {
        async {
            let attr = |n: &str| {
                t::AttributeDefinition::builder()
                    .attribute_name(n)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(build_err)
            };
            let mut req = self
                .client
                .update_table()
                .table_name(&self.table)
                .attribute_definitions(attr(&index.hash_attr)?);
            if let Some(r) = &index.range_attr {
                req = req.attribute_definitions(attr(r)?);
            }
            let g = gsi(index, billing)?;
            let mut create = t::CreateGlobalSecondaryIndexAction::builder()
                .index_name(g.index_name())
                .set_key_schema(Some(g.key_schema().to_vec()))
                .set_projection(g.projection().cloned());
            if let Some(p) = g.provisioned_throughput() {
                create = create.provisioned_throughput(p.clone());
            }
            req.global_secondary_index_updates(
                t::GlobalSecondaryIndexUpdate::builder()
                    .create(create.build().map_err(build_err)?)
                    .build(),
            )
            .send()
            .await
            .map_err(map_err)?;
            Ok(())
        }
        .instrument(op_span!(self.table, "UpdateTable"))
        .await
    }

    async fn query_index_page(&self, query: &IndexQuery, start: Option<Item>) -> Result<IndexPage> {
        async {
            let mut expr = Expr::default();
            let h = expr.name(&query.index.hash_attr);
            let hv = expr.value(Value::S(query.hash.clone()));
            let mut kce = format!("{h} = {hv}");
            if let (Some(range), Some(attr)) = (&query.range, &query.index.range_attr) {
                kce = format!("{kce} AND {}", expr.range(attr, range));
            }
            let projection = expr.projection(query.projection.as_deref().unwrap_or_default());
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(&query.index.name)
                .key_condition_expression(kce)
                .set_projection_expression(projection)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(av_values(&expr))
                .scan_index_forward(query.forward)
                .set_limit(query.limit.map(|l| i32::try_from(l).unwrap_or(i32::MAX)))
                .set_exclusive_start_key(start.map(to_map))
                .set_return_consumed_capacity(capacity())
                .send()
                .await
                .map_err(map_err)?;
            record_capacity(out.consumed_capacity());
            Ok(IndexPage {
                items: out
                    .items
                    .unwrap_or_default()
                    .into_iter()
                    .map(from_map)
                    .collect::<Result<_>>()?,
                last: out.last_evaluated_key.map(from_map).transpose()?,
            })
        }
        .instrument(op_span!(self.table, "Query"))
        .await
    }

    async fn describe_table(&self) -> Result<Option<TableDescription>> {
        async {
            let out = match self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(map_err(e)),
            };
            let Some(table) = out.table else {
                return Ok(None);
            };
            let type_of = |name: &str| {
                table
                    .attribute_definitions()
                    .iter()
                    .find(|d| d.attribute_name() == name)
                    .map(|d| d.attribute_type().as_str().to_owned())
                    .unwrap_or_default()
            };
            let mut hash = (String::new(), String::new());
            let mut range = None;
            for k in table.key_schema() {
                let entry = (k.attribute_name().to_owned(), type_of(k.attribute_name()));
                match k.key_type() {
                    KeyType::Hash => hash = entry,
                    KeyType::Range => range = Some(entry),
                    _ => {}
                }
            }
            let status = match table.table_status() {
                Some(t::TableStatus::Active) => TableStatus::Active,
                Some(t::TableStatus::Creating) => TableStatus::Creating,
                _ => TableStatus::Other,
            };
            let on_demand = table
                .billing_mode_summary()
                .and_then(|b| b.billing_mode())
                .is_some_and(|m| *m == BillingMode::PayPerRequest);
            let billing = if on_demand {
                Billing::OnDemand
            } else {
                let t = table.provisioned_throughput();
                let units = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
                Billing::Provisioned {
                    read: units(t.and_then(|t| t.read_capacity_units())),
                    write: units(t.and_then(|t| t.write_capacity_units())),
                }
            };
            let indexes = table
                .global_secondary_indexes()
                .iter()
                .map(|g| {
                    let status = match g.index_status() {
                        Some(t::IndexStatus::Active) => TableStatus::Active,
                        Some(t::IndexStatus::Creating) => TableStatus::Creating,
                        _ => TableStatus::Other,
                    };
                    (g.index_name().unwrap_or_default().to_owned(), status)
                })
                .collect();
            Ok(Some(TableDescription {
                status,
                hash_key: hash,
                range_key: range,
                billing,
                indexes,
            }))
        }
        .instrument(op_span!(self.table, "DescribeTable"))
        .await
    }
}
