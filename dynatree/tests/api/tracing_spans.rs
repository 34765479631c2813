//! Every DynamoDB call opens one span named `DynamoDB.<Operation>` with OpenTelemetry's database
//! fields and the consumed capacity (asked for only while a subscriber records the span); no
//! item body ever reaches a span.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::describe_table::DescribeTableOutput;
use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, ConsumedCapacity, KeySchemaElement, KeyType,
    ReturnConsumedCapacity, ScalarAttributeType, TableDescription, TableStatus,
};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use dynatree::{DynamoDbTable, Tree};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

#[derive(Default, Clone)]
struct Captured(Arc<Mutex<Vec<(String, String, String)>>>);

struct Fields<'a>(&'a str, &'a Captured);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.1.0.lock().unwrap().push((
            self.0.to_owned(),
            field.name().to_owned(),
            format!("{value:?}"),
        ));
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>> Layer<S>
    for Captured
{
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        attrs.record(&mut Fields(attrs.metadata().name(), self));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let name = ctx.span(id).map_or("?", |s| s.name());
        values.record(&mut Fields(name, self));
    }
}

#[test]
fn get_item_span_has_otel_fields_and_no_item_body() {
    let rule = mock!(Client::get_item).then_output(|| {
        GetItemOutput::builder()
            .item("Key", AttributeValue::S("¦secret-path".into()))
            .item("Child", AttributeValue::S("¦".into()))
            .item("v", AttributeValue::S("s3cr3t-body".into()))
            .consumed_capacity(ConsumedCapacity::builder().capacity_units(0.5).build())
            .build()
    });
    // The tree describes its table once, before its first request.
    let describe = describe_rule();
    let settings = settings_rule();
    let client = mock_client!(
        aws_sdk_dynamodb,
        RuleMode::MatchAny,
        [&settings, &rule, &describe]
    );
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let tree = Tree::new(DynamoDbTable::new(client, "tbl"));
        let v: Option<serde_json::Value> = rt.block_on(tree.get(["secret-path"])).unwrap();
        assert!(v.is_some());
    });
    let fields = captured.0.lock().unwrap().clone();
    // The object's GetItem: the last (the first reads the table's settings row).
    let get = |name: &str| -> Option<String> {
        fields
            .iter()
            .rfind(|(span, f, _)| span == "DynamoDB.GetItem" && f == name)
            .map(|(_, _, v)| v.clone())
    };
    assert_eq!(get("db.system").as_deref(), Some("\"dynamodb\""));
    assert_eq!(get("db.operation").as_deref(), Some("\"GetItem\""));
    assert_eq!(get("db.name").as_deref(), Some("tbl"));
    assert_eq!(get("span.kind").as_deref(), Some("\"client\""));
    assert_eq!(
        get("aws.dynamodb.consumed_capacity").as_deref(),
        Some("0.5")
    );
    assert!(
        fields
            .iter()
            .any(|(span, f, v)| span == "DynamoDB.DescribeTable"
                && f == "db.operation"
                && v == "\"DescribeTable\""),
        "{fields:?}"
    );
    // The tree's own span names the path; nothing records the item body.
    assert!(fields.iter().any(|(span, _, _)| span == "dynatree.get"));
    assert!(
        !fields.iter().any(|(_, _, v)| v.contains("s3cr3t")),
        "{fields:?}"
    );
}

/// The answer to the GetItem of the table's settings row a tree sends once, before its first
/// request: no settings.
fn settings_rule() -> aws_smithy_mocks::Rule {
    mock!(Client::get_item)
        .match_requests(|r| {
            r.key()
                .and_then(|k| k.get("Key"))
                .is_some_and(|v| v.as_s().is_ok_and(|s| s == "¦¦settings"))
        })
        .then_output(|| GetItemOutput::builder().build())
}

/// The answer to the DescribeTable a tree sends once, before its first request.
fn describe_rule() -> aws_smithy_mocks::Rule {
    mock!(Client::describe_table).then_output(|| {
        let key = |name: &str, kind| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .unwrap()
        };
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap()
        };
        DescribeTableOutput::builder()
            .table(
                TableDescription::builder()
                    .table_status(TableStatus::Active)
                    .key_schema(key("Key", KeyType::Hash))
                    .key_schema(key("Child", KeyType::Range))
                    .attribute_definitions(attr("Key"))
                    .attribute_definitions(attr("Child"))
                    .build(),
            )
            .build()
    })
}

/// The consumed capacity is asked for only while a subscriber records the call's span: a
/// process without one neither sends nor parses it.
#[test]
fn consumed_capacity_is_asked_for_only_while_a_subscriber_records_the_span() {
    let asked = |with_subscriber: bool| {
        let with = mock!(Client::get_item)
            .match_requests(|r| {
                r.return_consumed_capacity() == Some(&ReturnConsumedCapacity::Total)
            })
            .then_output(|| GetItemOutput::builder().build());
        let without = mock!(Client::get_item)
            .match_requests(|r| r.return_consumed_capacity().is_none())
            .then_output(|| GetItemOutput::builder().build());
        let describe = describe_rule();
        let settings = settings_rule();
        let client = mock_client!(
            aws_sdk_dynamodb,
            RuleMode::MatchAny,
            [&settings, &with, &without, &describe]
        );
        let run = || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let tree = Tree::new(DynamoDbTable::new(client, "tbl"));
            let v: Option<serde_json::Value> = rt.block_on(tree.get(["a"])).unwrap();
            assert!(v.is_none());
        };
        if with_subscriber {
            let subscriber = tracing_subscriber::registry().with(Captured::default());
            tracing::subscriber::with_default(subscriber, run);
        } else {
            tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), run);
        }
        (with.num_calls(), without.num_calls())
    };
    assert_eq!(asked(true), (1, 0));
    assert_eq!(asked(false), (0, 1));
}
