//! Runs the conformance suite (and the model-based property test) on both backends:
//! `fake::<case>` on `FakeTable`, `dynamodb_local::<case>` on Amazon's DynamoDB Local.
//!
//! A custom libtest-compatible harness, so that one DynamoDB Local serves every trial and is
//! stopped when they end. If the server cannot start, every `dynamodb_local::` trial fails with
//! the launcher's message (what to install); nothing is skipped.

use std::sync::{Arc, OnceLock};

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

fn local_server(cell: &OnceLock<Result<DynamoDbLocal, String>>) -> Result<&DynamoDbLocal, Failed> {
    cell.get_or_init(|| DynamoDbLocal::start().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Failed::from(format!("DynamoDB Local is required for this test: {e}")))
}
