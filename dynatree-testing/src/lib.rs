// The README is the crate's front page. Its links point at docs.rs so that they work where
// the README is shown on its own; these definitions come first, and the first definition of a
// link label wins, so rustdoc resolves the same labels to the local items.
#![doc = "[`FakeTable`]: FakeTable"]
#![doc = "[`FakeTable::set_read_lag`]: FakeTable::set_read_lag"]
#![doc = "[`FakeTable::stream_reader`]: FakeTable::stream_reader"]
#![doc = "[`Faulty`]: Faulty"]
#![doc = "[`FaultRule`]: FaultRule"]
#![doc = "[`Fault`]: Fault"]
#![doc = "[`Op`]: Op"]
#![doc = "[`sim`]: sim"]
#![doc = "[`FakeStream`]: FakeStream"]
#![doc = "[`StreamFaults`]: StreamFaults"]
#![doc = "[`Storage`]: dynatree::storage::Storage"]
#![doc = ""]
#![doc = include_str!("../README.md")]
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
pub mod service;
pub mod sim;
pub mod stream;

pub use crate::fake::{FakeTable, Metrics, PAGE_BYTES};
pub use crate::fault::{Fault, FaultPlan, FaultRule};
pub use crate::faulty::Faulty;
#[cfg(feature = "local")]
#[cfg_attr(docsrs, doc(cfg(feature = "local")))]
pub use crate::local::{DynamoDbLocal, LaunchError, NPM_PACKAGE, client_for};
pub use crate::stream::{FakeStream, StreamFaults};
/// The DynamoDB operations a [`FaultRule`] matches (the same as `dynatree::storage::Op`).
pub use dynatree::storage::Op;
