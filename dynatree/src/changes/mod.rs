//! Changes of rows, as DynamoDB Streams reports them, and the propagation of denormalized
//! fields from them ([`Tree::apply_changes`](crate::Tree::apply_changes)).
//!
//! A table's stream (view type `NEW_AND_OLD_IMAGES`) reports every change of a row once, in
//! the order the changes of that row were made; delivery to a processor is at least once
//! (a failed batch is delivered again). [`Change`] is one such record, whatever brought it:
//! a Lambda event, a polling consumer, or `dynatree_testing::FakeTable`'s own stream.
//!
//! The processor turns each change into the same idempotent, version-guarded writes that
//! inline propagation makes (see [`Denormalized`](crate::denorm::Denormalized)): applying a change
//! twice, or an old change after a newer one, never moves a copy backwards.
//!
//! A [`Change`] is raw: a row's key and images, listing rows and bookkeeping included. What it
//! means for the objects of a type is [`watch::decode`](crate::watch::decode)'s typed
//! [`watch::Change`](crate::watch::Change), which a follower of the table gets from
//! [`StreamConsumer::poll_changes`] or [`lambda::handle_changes`].

use crate::error::Error;
use crate::item::Item;
use crate::storage::Key;

pub(crate) mod apply;
#[cfg(feature = "streams")]
mod consumer;
#[cfg(all(feature = "streams", feature = "dynamodb"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "streams", feature = "dynamodb"))))]
pub use consumer::latest_stream_arn;
#[cfg(feature = "streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "streams")))]
pub use consumer::{PollReport, ShardFailure, StreamConsumer, from_stream_record};
#[cfg(feature = "lambda")]
#[cfg_attr(docsrs, doc(cfg(feature = "lambda")))]
pub mod lambda;

/// What happened to a row.
///
/// # Examples
///
/// ```
/// use dynatree::changes::ChangeKind;
///
/// assert_eq!(ChangeKind::from_event_name("MODIFY"), Some(ChangeKind::Modify));
/// assert_eq!(ChangeKind::Remove.event_name(), "REMOVE");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// The row was created.
    Insert,
    /// The row was changed.
    Modify,
    /// The row was deleted (by a request, or by time to live).
    Remove,
}

impl ChangeKind {
    /// The stream's event name: `INSERT`, `MODIFY` or `REMOVE`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ChangeKind;
    /// assert_eq!(ChangeKind::Insert.event_name(), "INSERT");
    /// ```
    pub fn event_name(self) -> &'static str {
        match self {
            Self::Insert => "INSERT",
            Self::Modify => "MODIFY",
            Self::Remove => "REMOVE",
        }
    }

    /// The kind of a stream event name; `None` for anything else.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::ChangeKind;
    /// assert_eq!(ChangeKind::from_event_name("INSERT"), Some(ChangeKind::Insert));
    /// assert_eq!(ChangeKind::from_event_name("insert"), None);
    /// ```
    pub fn from_event_name(name: &str) -> Option<Self> {
        match name {
            "INSERT" => Some(Self::Insert),
            "MODIFY" => Some(Self::Modify),
            "REMOVE" => Some(Self::Remove),
            _ => None,
        }
    }
}

/// One change of one row: a stream record with the images of `NEW_AND_OLD_IMAGES`.
///
/// # Examples
///
/// ```
/// use dynatree::changes::{Change, ChangeKind};
/// use dynatree::storage::Key;
/// use dynatree::{storage::Item, storage::Value};
///
/// let key = Key::new("\u{a6}Forums\u{a6}rust", "\u{a6}");
/// let mut new = key.clone().into_item();
/// new.insert("name", Value::S("Rust".into()));
/// let change = Change::new(ChangeKind::Insert, key, None, Some(new), "000100");
/// assert_eq!(change.sequence_number(), "000100");
/// assert!(change.old_image().is_none());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    kind: ChangeKind,
    key: Key,
    old_image: Option<Item>,
    new_image: Option<Item>,
    sequence_number: String,
}

impl Change {
    /// A change of the row `key`: its image before (`None` for an insert) and after (`None`
    /// for a removal), and the stream's sequence number of the record.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let gone = Change::new(ChangeKind::Remove, Key::new("h", "r"), None, None, "7");
    /// assert_eq!(gone.kind(), ChangeKind::Remove);
    /// ```
    pub fn new(
        kind: ChangeKind,
        key: Key,
        old_image: Option<Item>,
        new_image: Option<Item>,
        sequence_number: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            key,
            old_image,
            new_image,
            sequence_number: sequence_number.into(),
        }
    }

    /// What happened.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Modify, Key::new("h", "r"), None, None, "1");
    /// assert_eq!(c.kind(), ChangeKind::Modify);
    /// ```
    pub fn kind(&self) -> ChangeKind {
        self.kind
    }

    /// The row's key.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Modify, Key::new("h", "r"), None, None, "1");
    /// assert_eq!(c.key(), &Key::new("h", "r"));
    /// ```
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The row before the change (`None` for an insert, or when the stream's view type does
    /// not include old images).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, None, "1");
    /// assert!(c.old_image().is_none());
    /// ```
    pub fn old_image(&self) -> Option<&Item> {
        self.old_image.as_ref()
    }

    /// The row after the change (`None` for a removal).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let row = Key::new("h", "r").into_item();
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, Some(row.clone()), "1");
    /// assert_eq!(c.new_image(), Some(&row));
    /// ```
    pub fn new_image(&self) -> Option<&Item> {
        self.new_image.as_ref()
    }

    /// The record's sequence number in its shard (what a Lambda reports back as the first
    /// failed record, and what a consumer checkpoints).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::{Change, ChangeKind};
    /// # use dynatree::storage::Key;
    /// let c = Change::new(ChangeKind::Insert, Key::new("h", "r"), None, None, "42");
    /// assert_eq!(c.sequence_number(), "42");
    /// ```
    pub fn sequence_number(&self) -> &str {
        &self.sequence_number
    }
}

#[cfg(any(feature = "streams", feature = "lambda"))]
/// What a stream processor does with a batch of records, in order, stopping at the first
/// that fails: the tree's propagation ([`Propagate`]), or a user's handler of typed changes
/// ([`Follow`]). The polling consumer and the Lambda handler run either.
pub(crate) trait Process {
    /// Processes `changes` in order; see [`Applied`].
    fn process(&mut self, changes: &[Change]) -> impl std::future::Future<Output = Applied> + Send;
}

#[cfg(any(feature = "streams", feature = "lambda"))]
/// The tree's own processing: [`Tree::apply_changes`](crate::Tree::apply_changes).
pub(crate) struct Propagate<S>(pub(crate) crate::Tree<S>);

#[cfg(any(feature = "streams", feature = "lambda"))]
impl<S: crate::storage::Storage + 'static> Process for Propagate<S> {
    async fn process(&mut self, changes: &[Change]) -> Applied {
        self.0.apply_changes(changes).await
    }
}

#[cfg(any(feature = "streams", feature = "lambda"))]
/// A user's handler of typed changes: each record decoded as a change of `T`
/// ([`watch::decode`](crate::watch::decode)) and, if it is one, handed to the handler; a record
/// that does not decode, or whose change the handler fails, stops the batch there.
pub(crate) struct Follow<'h, T, F> {
    pub(crate) handler: &'h mut F,
    pub(crate) _type: std::marker::PhantomData<fn() -> T>,
}

#[cfg(any(feature = "streams", feature = "lambda"))]
impl<T, F, Fut> Process for Follow<'_, T, F>
where
    T: crate::Entity,
    F: FnMut(crate::watch::Change<T>) -> Fut + Send,
    Fut: std::future::Future<Output = crate::Result<()>> + Send,
{
    async fn process(&mut self, changes: &[Change]) -> Applied {
        for (index, record) in changes.iter().enumerate() {
            let handled = match crate::watch::decode::<T>(record) {
                Ok(Some(change)) => (self.handler)(change).await,
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(error) = handled {
                return Applied {
                    applied: index,
                    failure: Some(FailedChange {
                        index,
                        sequence_number: record.sequence_number().to_owned(),
                        error,
                    }),
                };
            }
        }
        Applied {
            applied: changes.len(),
            failure: None,
        }
    }
}

/// What [`Tree::apply_changes`](crate::Tree::apply_changes) did with a batch: the changes are
/// applied in order, and it stops at the first that fails (so that the batch can be delivered
/// again from there: everything before it is applied, and applying it again does no harm).
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let applied = tree.apply_changes(&[]).await;
/// assert_eq!(applied.applied(), 0);
/// assert!(applied.failure().is_none());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Applied {
    pub(crate) applied: usize,
    pub(crate) failure: Option<FailedChange>,
}

impl Applied {
    /// How many changes, from the start of the batch, were applied.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert_eq!(tree.apply_changes(&[]).await.applied(), 0);
    /// # Ok(()) }
    /// ```
    pub fn applied(&self) -> usize {
        self.applied
    }

    /// The first change that failed, if one did.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert!(tree.apply_changes(&[]).await.failure().is_none());
    /// # Ok(()) }
    /// ```
    pub fn failure(&self) -> Option<&FailedChange> {
        self.failure.as_ref()
    }

    /// `Ok` with the number applied, or the error of the first change that failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// assert_eq!(tree.apply_changes(&[]).await.into_result()?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of the first change that failed.
    pub fn into_result(self) -> crate::Result<usize> {
        match self.failure {
            None => Ok(self.applied),
            Some(f) => Err(f.error),
        }
    }
}

/// The first change of a batch that could not be applied.
///
/// # Examples
///
/// ```
/// # use dynatree::changes::Applied;
/// fn report(applied: &Applied) -> Option<String> {
///     applied.failure().map(|f| format!("retry from {}: {}", f.sequence_number(), f.error()))
/// }
/// ```
#[derive(Debug)]
pub struct FailedChange {
    pub(crate) index: usize,
    pub(crate) sequence_number: String,
    pub(crate) error: Error,
}

impl FailedChange {
    /// Its index in the batch.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::FailedChange;
    /// fn first_failed(f: &FailedChange) -> usize { f.index() }
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }

    /// Its sequence number (a Lambda's `batchItemFailures` item identifier).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::FailedChange;
    /// fn identifier(f: &FailedChange) -> &str { f.sequence_number() }
    /// ```
    pub fn sequence_number(&self) -> &str {
        &self.sequence_number
    }

    /// Why it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::changes::FailedChange;
    /// fn retryable(f: &FailedChange) -> bool { f.error().is_retryable() }
    /// ```
    pub fn error(&self) -> &Error {
        &self.error
    }
}
