#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod batch;
mod error;
mod item;
mod layout;
mod path;
mod storage;
mod stream;
mod tree;

#[doc(hidden)]
pub mod __private;

pub mod consistency {
    #![doc = include_str!("tree/write.md")]
}

pub use crate::batch::{BATCH_GET_MAX, BATCH_WRITE_MAX, RetryPolicy, TRANSACT_MAX};
pub use crate::error::{CancellationReason, Error, ErrorKind, Result};
pub use crate::item::{Item, MAX_ITEM_BYTES, Value};
pub use crate::layout::{
    DEFAULT_RESERVED, HASH_KEY, MAX_HASH_KEY_BYTES, MAX_RANGE_KEY_BYTES, RANGE_KEY,
};
pub use crate::path::{IntoPath, Path};
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub use crate::storage::dynamodb::DynamoDbTable;
pub use crate::storage::{
    BatchGetOutput, Billing, Condition, Key, Page, Query, RangeCondition, Storage,
    TableDescription, TableStatus, TransactAction, WriteRequest,
};
pub use crate::tree::{Entry, Tree, TreeBuilder};
