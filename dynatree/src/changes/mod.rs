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
//! `StreamConsumer::poll_changes` (feature `streams`) or `lambda::handle_changes` (feature
//! `lambda`).

use crate::error::Error;
pub use crate::storage::record::{Change, ChangeKind};

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
