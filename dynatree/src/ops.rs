//! Operations and their records: the options of subtree moves, copies and removals, what they
//! report, and the intent records that make them resumable.
//!
//! The application verbs (`put`, `get`, `list`, `remove`, the typed repositories) take and
//! return the names at the crate root. The operations that span many requests
//! ([`Tree::move_subtree`](crate::Tree::move_subtree), copies, removals of a subtree,
//! [`Tree::resume`](crate::Tree::resume), [`Tree::pending`](crate::Tree::pending)) speak the
//! vocabulary here.
//!
//! # Examples
//!
//! ```
//! use dynatree::ops::OnChildren;
//!
//! // What a removal does with an object's children.
//! let _ = OnChildren::Refuse;
//! ```

pub use crate::tree::{Intent, LinkPolicy, MoveReport, OnChildren, OpProgress, Operation, Phase};
