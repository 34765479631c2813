//! Runs the conformance suite (and the model-based property test) on both backends:
//! `fake::<case>` on `FakeTable`, `dynamodb_local::<case>` on Amazon's DynamoDB Local.
//!
//! A custom libtest-compatible harness, so that one DynamoDB Local serves every trial and is
//! stopped when they end. If the server cannot start, every `dynamodb_local::` trial fails with
//! the launcher's message (what to install); nothing is skipped.

use std::sync::{Arc, OnceLock};

use dynatree::{Billing, DynamoDbTable, ErrorKind, Storage, Tree};
use dynatree_testing::{DynamoDbLocal, FakeTable, conformance, model};
use libtest_mimic::{Arguments, Failed, Trial};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn main() {
    let args = Arguments::from_args();
    let local: Arc<OnceLock<Result<DynamoDbLocal, String>>> = Arc::new(OnceLock::new());
    let mut trials = Vec::new();

    for (name, case) in conformance::cases::<FakeTable>() {
        trials.push(Trial::test(format!("fake::{name}"), move || {
            runtime().block_on(case(FakeTable::new()));
            Ok(())
        }));
    }
    for (name, case) in conformance::cases::<dynatree::DynamoDbTable>() {
        let local = Arc::clone(&local);
        trials.push(Trial::test(format!("dynamodb_local::{name}"), move || {
            let server = local_server(&local)?;
            // A client per trial: each trial has its own runtime.
            let table = server.fresh_table();
            runtime().block_on(case(table));
            Ok(())
        }));
    }
    trials.push(Trial::test(
        "fake::table_with_other_schema_is_refused",
        || {
            runtime().block_on(refuses_other_schema(FakeTable::with_schema("pk", "sk")));
            Ok(())
        },
    ));
    trials.push(Trial::test("fake::provisioned_billing", || {
        runtime().block_on(provisioned_billing(FakeTable::new()));
        Ok(())
    }));
    {
        let local = Arc::clone(&local);
        trials.push(Trial::test(
            "dynamodb_local::table_with_other_schema_is_refused",
            move || {
                let server = local_server(&local)?;
                let table = server.fresh_table();
                runtime().block_on(async {
                    create_foreign_table(&table).await;
                    refuses_other_schema(table).await;
                });
                Ok(())
            },
        ));
    }
    {
        let local = Arc::clone(&local);
        trials.push(Trial::test(
            "dynamodb_local::provisioned_billing",
            move || {
                let server = local_server(&local)?;
                runtime().block_on(provisioned_billing(server.fresh_table()));
                Ok(())
            },
        ));
    }
    trials.push(Trial::test("fake::model_state_machine", || {
        model::run_fake(256);
        Ok(())
    }));
    {
        let local = Arc::clone(&local);
        trials.push(Trial::test(
            "dynamodb_local::model_state_machine",
            move || {
                let server = local_server(&local)?;
                model::run_local(&server.endpoint(), 24);
                Ok(())
            },
        ));
    }

    let conclusion = libtest_mimic::run(&args, trials);
    // Stop the server before exiting (process::exit skips destructors).
    if let Ok(owned) = Arc::try_unwrap(local) {
        drop(owned);
    }
    conclusion.exit();
}

async fn refuses_other_schema<S: Storage>(table: S) {
    let tree = Tree::new(table);
    let e = tree.create_table().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch, "{e:?}");
}

async fn provisioned_billing<S: Storage>(table: S) {
    let tree = Tree::builder(table)
        .billing(Billing::Provisioned { read: 7, write: 3 })
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let d = tree.storage().describe_table().await.unwrap().unwrap();
    assert_eq!(d.billing, Billing::Provisioned { read: 7, write: 3 });
}

/// A table named like `table` with hash key `pk` and range key `sk`, made with the SDK.
async fn create_foreign_table(table: &DynamoDbTable) {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    };
    let def = |n: &str| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let key = |n: &str, t| {
        KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(t)
            .build()
            .unwrap()
    };
    table
        .client()
        .create_table()
        .table_name(table.table_name())
        .attribute_definitions(def("pk"))
        .attribute_definitions(def("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .unwrap();
}

fn local_server(cell: &OnceLock<Result<DynamoDbLocal, String>>) -> Result<&DynamoDbLocal, Failed> {
    cell.get_or_init(|| DynamoDbLocal::start().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Failed::from(format!("DynamoDB Local is required for this test: {e}")))
}
