//! The crate root's former names, kept compiling for one release so that code written against
//! it keeps building while it moves to the module paths (`dynatree::storage::Item`,
//! `dynatree::ops::Intent`, ...). Hidden from the docs; the changelog lists the moves.

pub use crate::denorm::{DenormTarget, Denormalized, Propagation};
pub use crate::error::{CancellationReason, Party};
pub use crate::keys::{AsKeySegment, IndexDef, IndexKey, KeySegment};
pub use crate::ops::{Intent, LinkPolicy, MoveReport, OnChildren, OpProgress};
pub use crate::storage::{
    Billing, DEFAULT_RESERVED, Item, MAX_ATTRIBUTE_NAME_BYTES, MAX_ITEM_BYTES, PATH_INDEX, Value,
};
pub use crate::update::{
    Cond, Field, Numeric, Operand, ReadOnly, StringSetField, Updatable, UpdatableField,
};
