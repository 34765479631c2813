//! Runs the conformance suite (and the model-based property test) on both backends:
//! `fake::<case>` on `FakeTable`, `dynamodb_local::<case>` on Amazon's DynamoDB Local.
//!
//! A custom libtest-compatible harness, so that one DynamoDB Local serves every trial and is
//! stopped when they end. If the server cannot start, every `dynamodb_local::` trial fails with
//! the launcher's message (what to install); nothing is skipped.

use std::sync::{Arc, OnceLock};

use dynatree::storage::Storage;
use dynatree::{DynamoDbTable, ErrorKind, Tree, storage::Billing};
use dynatree_testing::{DynamoDbLocal, FakeTable, conformance, model};
use libtest_mimic::{Arguments, Failed, Trial};

mod fixtures;

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
    {
        let local = Arc::clone(&local);
        trials.push(Trial::test(
            "dynamodb_local::move_recovers_from_faults_at_sampled_requests",
            move || {
                let server = local_server(&local)?;
                runtime().block_on(move_fault_sample(|| server.fresh_table(), 12));
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

/// Objects as (Key, v), from a raw scan (intent records left out).
async fn objects(tree: &Tree) -> Vec<(String, String)> {
    use futures::TryStreamExt;
    let rows: Vec<dynatree::storage::Item> = tree.scan().try_collect().await.unwrap();
    let mut out: Vec<(String, String)> = rows
        .into_iter()
        .filter(|r| r.get_s("Child") == Some("¦"))
        .filter(|r| !r.get_s("Key").unwrap_or_default().starts_with("¦¦"))
        .map(|r| {
            let v = match r.get("v") {
                Some(dynatree::storage::Value::N(n)) => n.clone(),
                _ => String::new(),
            };
            (r.get_s("Key").unwrap().to_owned(), v)
        })
        .collect();
    out.sort();
    out
}

async fn build_team(tree: &Tree) {
    use fixtures::V;
    // 4 teams × 5 groups × 10 people, with the team nodes: 224 nodes to move.
    tree.put(["org", "eng"], &V { v: 1 }).await.unwrap();
    for t in 0..4u32 {
        tree.put(["org", "eng", &format!("t{t}")], &V { v: t })
            .await
            .unwrap();
        for g in 0..5u32 {
            for p in 0..10u32 {
                tree.put(
                    [
                        "org",
                        "eng",
                        &format!("t{t}"),
                        &format!("g{g}"),
                        &format!("p{p}"),
                    ],
                    &V {
                        v: 100 * t + 10 * g + p,
                    },
                )
                .await
                .unwrap();
            }
        }
    }
    tree.put(["org", "sales"], &V { v: 2 }).await.unwrap();
}

/// A failure at `samples` request indices spread over a 224-node move on this backend (through
/// `Faulty`), then resume or the same call: the objects equal the model of the completed move.
async fn move_fault_sample<S: Storage + 'static>(make: impl Fn() -> S, samples: u64) {
    use dynatree_testing::{Fault, Faulty};
    let model = Tree::new(FakeTable::new());
    model.create_table().await.unwrap();
    build_team(&model).await;
    model
        .move_subtree(["org", "eng"], ["org", "tech"])
        .await
        .unwrap();
    let expected = objects(&model).await;

    let probe = Faulty::new(make());
    let tree = Tree::new(probe.clone());
    tree.create_table().await.unwrap();
    build_team(&tree).await;
    let before = probe.requests();
    tree.move_subtree(["org", "eng"], ["org", "tech"])
        .await
        .unwrap();
    let requests = probe.requests() - before;
    assert_eq!(objects(&tree).await, expected);
    let step = (requests / samples).max(1);

    let mut at = 0;
    while at < requests {
        for fault in [Fault::Fail, Fault::FailAfterApply] {
            let table = Faulty::new(make());
            let tree = Tree::new(table.clone());
            tree.create_table().await.unwrap();
            build_team(&tree).await;
            table.inject(at, fault.clone());
            let first = tree.move_subtree(["org", "eng"], ["org", "tech"]).await;
            table.clear_faults();
            if first.is_err() {
                let other = Tree::new(table.clone());
                other.resume().await.unwrap();
                match tree.move_subtree(["org", "eng"], ["org", "tech"]).await {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => panic!("{fault:?} at request {at}: {e:?}"),
                }
            }
            assert!(tree.pending().await.unwrap().is_empty());
            assert_eq!(objects(&tree).await, expected, "{fault:?} at request {at}");
            conformance::assert_invariants(&tree).await;
        }
        at += step;
    }
}

async fn refuses_other_schema<S: Storage + 'static>(table: S) {
    let tree = Tree::new(table);
    let e = tree.create_table().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch, "{e:?}");
}

async fn provisioned_billing<S: Storage + 'static>(table: S) {
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
