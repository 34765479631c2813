//! Transactions across items and types: [`Transaction`], the typed builder over the tree's
//! transaction protocol (the guards, their argument and the cost are in the
//! [`consistency`](crate::consistency) docs, "Transactions").

use crate::error::{Error, ErrorKind, Result};
use crate::fields::Cond;
use crate::hierarchical::Hierarchical;
use crate::layout::both;
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{Condition, SharedStorage, Storage};
use crate::tree::{Ctx, denorm, txn};
use crate::tree::{Tree, TxOp as Op};
use crate::update::{Bound, Patch};

/// The longest idempotency token DynamoDB accepts.
const MAX_TOKEN_CHARS: usize = 36;

/// A transaction across items and types, committed as one TransactWriteItems: every action
/// takes effect, or none does. Created by [`Tree::transaction`].
///
/// Each action names a typed value or key; the guards that keep the tree consistent (the listing
/// rows of the puts, locks of moves) are added for you and count towards DynamoDB's limit of
/// 100 actions per transaction: a transaction over it is refused before anything is sent.
/// Mistakes in adding an action (a value that does not serialize, a key with an empty
/// component) are reported by [`commit`](Transaction::commit), before anything is sent.
///
/// # Examples
///
/// ```
/// use dynatree::{update::Cond, Hierarchical, Patch, Tree};
/// use dynatree_testing::FakeTable;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Accounts/{id}")]
/// struct Account { id: String, balance: i64 }
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Accounts/{account}/Transfers/{n}")]
/// struct Transfer { account: String, n: u32, amount: i64 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// let accounts = tree.repo::<Account>();
/// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
/// accounts.put(&Account { id: "b".into(), balance: 0 }).await?;
///
/// let f = Account::FIELDS;
/// let key = |id: &str| AccountKey { id: id.into() };
/// let mut tx = tree.transaction();
/// tx.patch(Patch::new(&key("a")).add(f.balance, -7).when(f.balance.ge(7)))
///     .patch(Patch::new(&key("b")).add(f.balance, 7))
///     .create(&Transfer { account: "a".into(), n: 1, amount: -7 });
/// tx.commit().await?;
/// assert_eq!(accounts.get(&key("b")).await?.unwrap().balance, 7);
///
/// // Not enough money left: nothing happens, and the reasons say which action failed.
/// let mut tx = tree.transaction();
/// tx.patch(Patch::new(&key("a")).add(f.balance, -7).when(f.balance.ge(7)))
///     .patch(Patch::new(&key("b")).add(f.balance, 7));
/// let err = tx.commit().await.unwrap_err();
/// assert!(err.is_transaction_canceled());
/// assert!(err.cancellation_reasons()[0].is_condition_failed());
/// assert!(!err.cancellation_reasons()[1].is_failure());
/// assert_eq!(accounts.get(&key("b")).await?.unwrap().balance, 7);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a transaction does nothing until it is committed"]
pub struct Transaction<S = SharedStorage> {
    tree: Tree<S>,
    ops: Vec<Op>,
    /// Per action: whether its type has a `#[dynatree(ttl)]` field (its conditions then see an
    /// expired value as absent).
    expiring: Vec<bool>,
    token: Option<String>,
    error: Option<Error>,
    /// The patches' bounds (see `Patch::bounds`), by the index of their action: a patch whose
    /// condition failed is refused with `InvalidValue` if one of them did not hold.
    bounds: Vec<(usize, Path, Vec<Bound>)>,
    /// Whether the commit propagates denormalized fields itself (not when a caller that does
    /// it sends a one-action transaction: `Repository::patch`).
    pub(crate) propagate: bool,
}

impl<S: Storage + 'static> Tree<S> {
    /// An empty [`Transaction`] on this tree.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// let tree = Tree::new(FakeTable::new());
    /// let tx = tree.transaction();
    /// assert!(tx.is_empty());
    /// ```
    pub fn transaction(&self) -> Transaction<S> {
        Transaction {
            tree: self.clone(),
            ops: Vec::new(),
            expiring: Vec::new(),
            token: None,
            error: None,
            bounds: Vec::new(),
            propagate: true,
        }
    }
}

impl<S: Storage + 'static> Transaction<S> {
    fn fail(&mut self, e: Error) -> &mut Self {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self
    }

    fn push<T: Hierarchical>(&mut self, op: Result<Op>) -> &mut Self {
        match op {
            Ok(op) => {
                self.ops.push(op);
                self.expiring.push(T::TTL_FIELD.is_some());
                self
            }
            Err(e) => self.fail(e),
        }
    }

    fn path_of<T: Hierarchical>(&self, key: &T::Key) -> Result<Path> {
        self.tree.repo::<T>().check_reserved()?;
        let path = self.tree.enter(T::key_path(key)?)?;
        self.tree.cx.layout().check_object_path(&path)?;
        Ok(path)
    }

    fn put_op<T: Hierarchical>(&self, value: &T, condition: Result<Condition>) -> Result<Op> {
        let (path, row) = self.tree.repo::<T>().row(value)?;
        Ok(Op::Put {
            path,
            row,
            condition: condition?,
        })
    }

    /// Stores `value` at its path, replacing what is there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// let mut tx = tree.transaction();
    /// tx.put(&Account { id: "a".into(), balance: 1 }).put(&Account { id: "b".into(), balance: 2 });
    /// tx.commit().await?;
    /// assert_eq!(accounts.get(&key("b")).await?.unwrap().balance, 2);
    /// # Ok(()) }
    /// ```
    pub fn put<T: Hierarchical>(&mut self, value: &T) -> &mut Self {
        let op = self.put_op(value, Ok(Condition::Always));
        self.push::<T>(op)
    }

    /// Stores `value` only if nothing is at its path yet.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// let mut tx = tree.transaction();
    /// tx.create(&Account { id: "b".into(), balance: 0 }).create(&Account { id: "a".into(), balance: 0 });
    /// let err = tx.commit().await.unwrap_err(); // `a` exists: nothing is written
    /// assert!(err.cancellation_reasons()[1].is_condition_failed());
    /// assert_eq!(accounts.get(&key("b")).await?, None);
    /// # Ok(()) }
    /// ```
    pub fn create<T: Hierarchical>(&mut self, value: &T) -> &mut Self {
        let op = self.put_op(value, Ok(Condition::NotExists));
        self.push::<T>(op)
    }

    /// Stores `value` only if `condition` holds for what is stored at its path.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// let mut tx = tree.transaction();
    /// tx.put_if(&Account { id: "a".into(), balance: 0 }, f.balance.eq(10));
    /// tx.commit().await?;
    /// assert_eq!(accounts.get(&key("a")).await?.unwrap().balance, 0);
    /// # Ok(()) }
    /// ```
    pub fn put_if<T: Hierarchical>(&mut self, value: &T, condition: Cond<T>) -> &mut Self {
        let op = self.put_op(value, condition.into_condition());
        self.push::<T>(op)
    }

    /// Deletes the value at `key` (nothing there is fine).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// let mut tx = tree.transaction();
    /// tx.delete::<Account>(&key("a")).delete::<Account>(&key("nobody"));
    /// tx.commit().await?;
    /// assert_eq!(accounts.get(&key("a")).await?, None);
    /// # Ok(()) }
    /// ```
    pub fn delete<T: Hierarchical>(&mut self, key: &T::Key) -> &mut Self {
        self.delete_if::<T>(key, Cond::always())
    }

    /// Deletes the value at `key` only if `condition` holds for it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// // Close the account only if it is empty.
    /// let mut tx = tree.transaction();
    /// tx.delete_if(&key("a"), f.balance.eq(0));
    /// assert!(tx.commit().await.unwrap_err().is_transaction_canceled());
    /// assert!(accounts.get(&key("a")).await?.is_some());
    /// # Ok(()) }
    /// ```
    pub fn delete_if<T: Hierarchical>(&mut self, key: &T::Key, condition: Cond<T>) -> &mut Self {
        let op = self.path_of::<T>(key).and_then(|path| {
            Ok(Op::Delete {
                path,
                condition: condition.into_condition()?,
            })
        });
        self.push::<T>(op)
    }

    /// Applies a partial update (see [`Patch`]): fails the transaction if no value is stored
    /// at the patch's key or the patch's condition does not hold.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// let mut tx = tree.transaction();
    /// tx.patch(Patch::new(&key("a")).add(f.balance, 5));
    /// tx.commit().await?;
    /// assert_eq!(accounts.get(&key("a")).await?.unwrap().balance, 15);
    /// // No value at the key: the transaction fails.
    /// let mut tx = tree.transaction();
    /// tx.patch(Patch::new(&key("nobody")).add(f.balance, 5));
    /// assert!(tx.commit().await.unwrap_err().is_transaction_canceled());
    /// # Ok(()) }
    /// ```
    pub fn patch<T: Hierarchical>(&mut self, patch: Patch<T>) -> &mut Self {
        let op = self.path_of::<T>(&patch.key).and_then(|path| {
            let (actions, condition) = patch.plan(self.tree.cx.layout())?;
            Ok(Op::Update {
                path,
                actions,
                condition,
            })
        });
        if let Ok(Op::Update { path, .. }) = &op {
            self.bounds
                .push((self.ops.len(), path.clone(), patch.bounds()));
        }
        self.push::<T>(op)
    }

    /// Writes nothing at `key`, but fails the transaction unless `condition` holds for what
    /// is stored there ([`Cond::exists`] for "a value is stored").
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// // Open `b` only while `a` holds at least 20.
    /// let mut tx = tree.transaction();
    /// tx.check(&key("a"), f.balance.ge(20)).create(&Account { id: "b".into(), balance: 0 });
    /// let err = tx.commit().await.unwrap_err();
    /// assert!(err.cancellation_reasons()[0].is_condition_failed());
    /// assert_eq!(accounts.get(&key("b")).await?, None);
    /// # Ok(()) }
    /// ```
    pub fn check<T: Hierarchical>(&mut self, key: &T::Key, condition: Cond<T>) -> &mut Self {
        let op = self.path_of::<T>(key).and_then(|path| {
            Ok(Op::Check {
                path,
                condition: condition.into_condition()?,
            })
        });
        self.push::<T>(op)
    }

    /// Makes the commit idempotent: DynamoDB applies a transaction with a given token at most
    /// once within ten minutes, so a commit whose outcome is unknown (a timeout, a dropped
    /// future) can be sent again with the same token and the same actions. Sending other
    /// actions under a token already used fails with the service code
    /// `IdempotentParameterMismatchException`. 1 to 36 characters.
    ///
    /// After the ten minutes DynamoDB has forgotten the token, and a resend is a new
    /// transaction: an unconditional change (an addition) is applied again. A commit that may
    /// be resent that late should carry a condition on what it read (a version field,
    /// [`Patch::when`](crate::Patch::when)): its resend is then cancelled, which means
    /// "applied before, or changed since" (see [`consistency`](crate::consistency),
    /// "Ambiguous outcomes").
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// accounts.put(&Account { id: "a".into(), balance: 10 }).await?;
    /// let deposit = || {
    ///     let mut tx = tree.transaction();
    ///     tx.patch(Patch::new(&key("a")).add(f.balance, 5)).idempotency_token("deposit-42");
    ///     tx
    /// };
    /// deposit().commit().await?;
    /// deposit().commit().await?; // sent again (say, after a timeout): applied once
    /// assert_eq!(accounts.get(&key("a")).await?.unwrap().balance, 15);
    /// # Ok(()) }
    /// ```
    pub fn idempotency_token(&mut self, token: impl Into<String>) -> &mut Self {
        let token = token.into();
        let chars = token.chars().count();
        if chars == 0 || chars > MAX_TOKEN_CHARS {
            return self.fail(Error::new(
                ErrorKind::InvalidArgument,
                format!("an idempotency token has 1 to {MAX_TOKEN_CHARS} characters, not {chars}"),
            ));
        }
        self.token = Some(token);
        self
    }

    /// The number of actions added (guards not counted).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// let mut tx = tree.transaction();
    /// tx.put(&Account { id: "a".into(), balance: 0 }).check(&key("b"), Cond::<Account>::not_exists());
    /// assert_eq!(tx.len(), 2); // the guards added at commit do not count
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no action was added.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// let mut tx = tree.transaction();
    /// assert!(tx.is_empty());
    /// tx.delete::<Account>(&key("a"));
    /// assert!(!tx.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Sends the transaction: every action takes effect, or none does.
    ///
    /// After a commit that deleted values, the listing rows that then name nothing are removed
    /// (by the removal protocol, outside the transaction); a failure there is logged, not
    /// returned: the transaction itself took effect, and a leftover listing row only lists an
    /// empty name until the next delete under it or a repair.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{update::Cond, Hierarchical, Patch, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// # #[dynatree(path = "Accounts/{id}")]
    /// # struct Account { id: String, balance: i64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// let accounts = tree.repo::<Account>();
    /// let key = |id: &str| AccountKey { id: id.into() };
    /// let f = Account::FIELDS;
    /// let mut tx = tree.transaction();
    /// tx.put(&Account { id: "a".into(), balance: 1 }).patch(Patch::new(&key("a")).add(f.balance, 1));
    /// // Two actions at one path: refused before anything is sent.
    /// assert_eq!(tx.commit().await.unwrap_err().kind(), dynatree::ErrorKind::InvalidArgument);
    /// let mut tx = tree.transaction();
    /// tx.put(&Account { id: "a".into(), balance: 1 });
    /// tx.commit().await?;
    /// assert_eq!(accounts.get(&key("a")).await?.unwrap().balance, 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - Before sending: the first mistake made while adding actions;
    ///   [`ErrorKind::InvalidArgument`] if there is no action, two actions name one path, or
    ///   the actions with their guards exceed 100 actions or DynamoDB's 4 MB
    ///   ([`TRANSACT_MAX_BYTES`](crate::storage::TRANSACT_MAX_BYTES), counted as DynamoDB
    ///   counts it: [`TransactAction::payload_size`](crate::storage::TransactAction::payload_size)).
    /// - [`ErrorKind::TransactionCanceled`] if a caller's condition did not hold:
    ///   [`Error::cancellation_reasons`] has one reason per action, in the order they were added
    ///   (the guards' are left out).
    /// - [`ErrorKind::InvalidValue`] if a patch's [`add`](Patch::add) would take a stored number
    ///   outside its type's range, or a patched value's version field is at `u64::MAX` (as
    ///   [`Repository::update`](crate::Repository::update) refuses it): nothing is written, and
    ///   the cancelled transaction is the error's [`source`](std::error::Error::source).
    /// - [`ErrorKind::Locked`] if a path is inside a subtree a move holds;
    ///   [`ErrorKind::Conflict`] if a guard kept losing races with removals under the retry
    ///   policy. Backend errors.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have committed (all or nothing); with an idempotency
    /// token, committing the same transaction again is safe. Missing ancestors it created stay
    /// (listing rows only).
    pub async fn commit(mut self) -> Result<()> {
        crate::retry::call(self.tree.cx.inner.config.retry, async move {
            let span = tracing::debug_span!("dynatree.transaction", actions = self.ops.len());
            // `Repository::patch` tells an out-of-range patch itself, from the row it reads anyway.
            let bounds = if self.propagate {
                std::mem::take(&mut self.bounds)
            } else {
                Vec::new()
            };
            let tree = self.tree.clone();
            let result = tracing::Instrument::instrument(self.commit_inner(), span).await;
            match result {
                Err(e) if e.is_transaction_canceled() && !bounds.is_empty() => {
                    Err(out_of_range(&tree.cx, bounds, e).await)
                }
                other => other,
            }
        })
        .await
    }

    async fn commit_inner(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.ops.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a transaction needs at least one action",
            ));
        }
        if !self.propagate {
            return txn::commit_ops(&self.tree.cx, self.ops, self.expiring, self.token).await;
        }
        // Denormalized fields (see `Denormalized`): targets put are filled from their
        // ancestors before and checked again after; sources changed are stamped (puts were, by
        // their rows), each recorded as an intent, and propagated after the commit.
        let tree = self.tree;
        let mut ops = self.ops;
        // Targets put: intents on their sources (a failure or crash between the commit and the
        // re-read is finished by `resume`), then their copies filled.
        let mut refresh = Vec::new();
        for op in &ops {
            if let Op::Put { path, .. } = op {
                for ty in denorm::target_types_at(&tree.cx, path) {
                    match denorm::record_refresh(&tree.cx, ty, std::iter::once(path)).await {
                        Ok(g) => refresh.extend(g),
                        Err(e) => {
                            denorm::end_refresh(&tree.cx, refresh, true).await;
                            return Err(e);
                        }
                    }
                }
            }
        }
        for op in &mut ops {
            if let Op::Put { path, row, .. } = op {
                for ty in denorm::target_types_at(&tree.cx, path) {
                    if let Err(e) = denorm::fill_targets(&tree.cx, ty, path, row).await {
                        denorm::end_refresh(&tree.cx, refresh, true).await;
                        return Err(e);
                    }
                }
            }
        }
        let mut guards = Vec::new();
        for op in &ops {
            if !matches!(op, Op::Check { .. }) && denorm::source_at(&tree.cx, op.path()) {
                match denorm::before_source_write_at(&tree.cx, op.path()).await {
                    Ok(Some(g)) => guards.push((op.path().clone(), g)),
                    Ok(None) => {}
                    Err(e) => {
                        for (_, g) in guards {
                            denorm::source_write_failed(&tree.cx, Some(g), &e).await;
                        }
                        return Err(e);
                    }
                }
            }
        }
        let written: Vec<(Path, crate::storage::Item)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Put { path, row, .. } => Some((path.clone(), row.clone())),
                _ => None,
            })
            .collect();
        // Sources are stamped right before the commit and fenced like a put
        // (`Tree::write_fenced`): the stored version must be older. A commit cancelled by a
        // fence (a write of that source committed meanwhile with a later version) is stamped
        // again after it and sent again; under an idempotency token it is not (a resend must
        // be the same request), and the cancellation is the caller's.
        let sources: Vec<usize> = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| {
                matches!(op, Op::Put { .. } | Op::Update { .. })
                    && denorm::source_at(&tree.cx, op.path())
            })
            .map(|(i, _)| i)
            .collect();
        let mut floors: Vec<u64> = vec![0; ops.len()];
        // Deletes of sources: the row as read, whose versions the delete is conditional on
        // (the latest is recorded as the tombstone first).
        let mut pins: Vec<Option<crate::storage::Item>> = vec![None; ops.len()];
        for (i, op) in ops.iter().enumerate() {
            match op {
                // A removed source written again comes after its tombstone.
                Op::Put { path, .. } if sources.contains(&i) => {
                    floors[i] = denorm::tombstone(&tree.cx, path)
                        .await?
                        .map_or(0, |t| t.saturating_add(1));
                }
                // A source deleted: its version is its tombstone, and the delete is
                // conditional on it.
                Op::Delete { path, .. } if denorm::source_at(&tree.cx, path) => {
                    pins[i] = Some(denorm::pin_versions(&tree.cx, path).await?);
                }
                _ => {}
            }
        }
        let mut backoff = Backoff::new(tree.cx.config_retry());
        let committed = loop {
            let (mut stamped, stamps) = denorm::stamp_sources(&tree.cx, &ops, &sources, &floors);
            // Each source put checks its tombstone in the same transaction (a removal that
            // commits after the tombstone was read is seen): after the caller's actions.
            let mut tombstone_of: Vec<(usize, usize)> = Vec::new();
            let mut expiring = self.expiring.clone();
            for &i in &sources {
                if let Op::Put { path, .. } = &ops[i] {
                    tombstone_of.push((stamped.len(), i));
                    stamped.push(Op::Tombstone {
                        path: path.clone(),
                        condition: denorm::tombstone_below(&tree.cx, stamps[i]),
                    });
                    expiring.push(false);
                }
            }
            for (op, pin) in stamped.iter_mut().zip(&pins) {
                if let (Op::Delete { path, condition }, Some(row)) = (op, pin) {
                    let same = denorm::same_versions(&tree.cx, path, row);
                    *condition = both(condition, same);
                }
            }
            let e = match txn::commit_ops(&tree.cx, stamped, expiring, self.token.clone()).await {
                Ok(()) => break Ok(()),
                Err(e) => e,
            };
            if self.token.is_some() || !e.is_transaction_canceled() || !backoff.spend() {
                break Err(e);
            }
            let mut fenced = false;
            for &(at, i) in &tombstone_of {
                if e.cancellation_reasons()
                    .get(at)
                    .is_some_and(crate::error::CancellationReason::is_condition_failed)
                {
                    // Removed meanwhile: written again after its tombstone.
                    let t = denorm::tombstone(&tree.cx, ops[i].path())
                        .await?
                        .unwrap_or(0);
                    floors[i] = floors[i].max(t.saturating_add(1));
                    fenced = true;
                }
            }
            for &i in &sources {
                if e.cancellation_reasons()
                    .get(i)
                    .is_some_and(crate::error::CancellationReason::is_condition_failed)
                {
                    match denorm::stored_version(&tree.cx, ops[i].path()).await {
                        Ok(Some(stored)) if stored >= stamps[i] => {
                            floors[i] = stored;
                            fenced = true;
                        }
                        Ok(_) => {}
                        Err(read) => return Err(read),
                    }
                }
            }
            for (i, pin) in pins.iter_mut().enumerate() {
                let failed = e
                    .cancellation_reasons()
                    .get(i)
                    .is_some_and(crate::error::CancellationReason::is_condition_failed);
                if let (true, Some(seen)) = (failed, pin.as_ref()) {
                    // Written meanwhile: read (and tombstone) again; else the caller's condition.
                    let path = ops[i].path();
                    let now = denorm::pin_versions(&tree.cx, path).await?;
                    if denorm::row_version(&tree.cx, path, &now)
                        != denorm::row_version(&tree.cx, path, seen)
                    {
                        *pin = Some(now);
                        fenced = true;
                    }
                }
            }
            if !fenced {
                break Err(e);
            }
        };
        if let Err(e) = committed {
            for (_, g) in guards {
                denorm::source_write_failed(&tree.cx, Some(g), &e).await;
            }
            // Nothing written if the transaction was refused; else (a lost response) the
            // intents stay for `resume`.
            let refused =
                e.is_transaction_canceled() || e.is_condition_failed() || e.is_invalid_input();
            denorm::end_refresh(&tree.cx, refresh, !refused).await;
            return Err(e);
        }
        let mut first_error = None;
        for (path, row) in &written {
            for ty in denorm::target_types_at(&tree.cx, path) {
                if let Err(e) = denorm::recheck_targets(&tree.cx, ty, path, row).await {
                    first_error.get_or_insert(e);
                }
            }
        }
        denorm::end_refresh(&tree.cx, refresh, first_error.is_some()).await;
        for (path, g) in guards {
            if let Err(e) = denorm::after_source_write(&tree.cx, Some(g), &path, None).await {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            // Committed; a copy that failed is left to the intent (`Tree::resume`).
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The error of a cancelled transaction `e`: [`ErrorKind::InvalidValue`] if a patch whose
/// condition failed would take a stored number out of its type (one consistent read per
/// such patch), else `e`.
async fn out_of_range<S: Storage + 'static>(
    cx: &Ctx<S>,
    bounds: Vec<(usize, Path, Vec<Bound>)>,
    e: Error,
) -> Error {
    for (i, path, bounds) in bounds {
        let failed = e
            .cancellation_reasons()
            .get(i)
            .is_some_and(crate::error::CancellationReason::is_condition_failed);
        if !failed {
            continue;
        }
        // Only a stored value (no link, no fence, not expired) is out of range.
        let layout = cx.layout();
        if let Ok(Some(row)) = cx.io().get_item(&layout.object_key(&path), true).await
            && !row.contains(layout.link_attr())
            && !layout.is_absent(&row, crate::expiry::now_secs())
            && let Some(out) = crate::update::out_of_range(&bounds, &row)
        {
            return out.with_source(e);
        }
    }
    e
}
