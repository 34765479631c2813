//! Transactions across items and types: [`Transaction`].
//!
//! The caller's actions are sent as one TransactWriteItems together with the guards that keep
//! the tree's invariants (see [`consistency`](crate::consistency), "Transactions"):
//!
//! | caller's action at `P` | guards added |
//! |---|---|
//! | put, create, put_if | put `L(P)` unless marked or locked; check `L(parent)` exists, unmarked (skipped for a top-level path, or when the transaction writes the parent's listing row itself) |
//! | patch | check `L(P)` exists, unmarked, unlocked |
//! | delete, delete_if | check `L(P)` is not locked by a move (absent is fine) |
//! | check | none |
//!
//! The guards do not depend on what the tree has cached, so the same actions always make the
//! same request: that is what lets an idempotency token be sent again after a timeout. Missing
//! ancestors of the puts (above their parents) are created before the transaction, like a put
//! creates them; they are listing rows only, harmless if the transaction then fails.

use std::collections::HashSet;

use crate::error::{CancellationReason, Error, ErrorKind, Result};
use crate::fields::Cond;
use crate::hierarchical::Hierarchical;
use crate::item::Item;
use crate::path::Path;
use crate::storage::{
    Condition, Key, SharedStorage, Storage, TRANSACT_MAX, TransactAction, get_all,
};
use crate::update::Patch;

use super::Tree;

/// DynamoDB refuses a TransactWriteItems request over 4 MB; stay under it with a margin for the
/// request's own framing.
const TRANSACT_BYTES: usize = 3_500_000;

/// The longest idempotency token DynamoDB accepts.
const MAX_TOKEN_CHARS: usize = 36;

#[derive(Debug, Clone)]
enum Op {
    Put {
        path: Path,
        row: Item,
        condition: Condition,
    },
    Delete {
        path: Path,
        condition: Condition,
    },
    Update {
        path: Path,
        actions: Vec<crate::storage::UpdateAction>,
        condition: Condition,
    },
    Check {
        path: Path,
        condition: Condition,
    },
}

impl Op {
    /// The op with its condition seeing an expired value as absent.
    fn live(self, layout: &crate::layout::Layout, now: u64) -> Op {
        match self {
            Op::Put {
                path,
                row,
                condition,
            } => Op::Put {
                path,
                row,
                condition: layout.live(condition, now),
            },
            Op::Delete { path, condition } => Op::Delete {
                path,
                condition: layout.live(condition, now),
            },
            Op::Update {
                path,
                actions,
                condition,
            } => Op::Update {
                path,
                actions,
                condition: layout.live(condition, now),
            },
            Op::Check { path, condition } => Op::Check {
                path,
                condition: layout.live(condition, now),
            },
        }
    }

    fn path(&self) -> &Path {
        match self {
            Op::Put { path, .. }
            | Op::Delete { path, .. }
            | Op::Update { path, .. }
            | Op::Check { path, .. } => path,
        }
    }
}

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
/// use dynatree::{Cond, Hierarchical, Patch, Tree};
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
        self.tree.inner.layout.check_object_path(&path)?;
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
            let (actions, condition) = patch.plan(self.tree.inner.layout.link_attr())?;
            Ok(Op::Update {
                path,
                actions,
                condition,
            })
        });
        self.push::<T>(op)
    }

    /// Writes nothing at `key`, but fails the transaction unless `condition` holds for what
    /// is stored there ([`Cond::exists`] for "a value is stored").
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    /// # use dynatree::{Cond, Hierarchical, Patch, Tree};
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
    ///   the actions with their guards exceed 100 actions or 4 MB.
    /// - [`ErrorKind::TransactionCanceled`] if a caller's condition did not hold:
    ///   [`Error::cancellation_reasons`] has one reason per action, in the order they were added
    ///   (the guards' are left out).
    /// - [`ErrorKind::Locked`] if a path is inside a subtree a move holds;
    ///   [`ErrorKind::Conflict`] if a guard kept losing races with removals under the retry
    ///   policy. Backend errors.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have committed (all or nothing); with an idempotency
    /// token, committing the same transaction again is safe. Missing ancestors it created stay
    /// (listing rows only).
    pub async fn commit(self) -> Result<()> {
        let span = tracing::debug_span!("dynatree.transaction", actions = self.ops.len());
        tracing::Instrument::instrument(self.commit_inner(), span).await
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
        let mut paths = HashSet::new();
        for op in &self.ops {
            if !paths.insert(op.path()) {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("the transaction has two actions at {}", op.path()),
                ));
            }
        }
        let tree = &self.tree;
        // Conditions see expired values as absent, except under an idempotency token: a resend must
        // be the identical request, and the time of the check would differ.
        let now = crate::expiry::now_secs();
        let ops: Vec<Op> = self
            .ops
            .iter()
            .zip(&self.expiring)
            .map(|(op, &expiring)| {
                if expiring && self.token.is_none() {
                    op.clone().live(&tree.inner.layout, now)
                } else {
                    op.clone()
                }
            })
            .collect();
        let (actions, owners) = tree.plan_transaction(&ops);
        if actions.len() > TRANSACT_MAX {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the transaction needs {} actions with its guards ({} of yours), over DynamoDB's {TRANSACT_MAX}",
                    actions.len(),
                    self.ops.len()
                ),
            ));
        }
        let bytes: usize = actions.iter().map(action_bytes).sum();
        if bytes > TRANSACT_BYTES {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("the transaction is about {bytes} bytes, over DynamoDB's 4 MB"),
            ));
        }
        let puts: Vec<&Path> = self
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Put { path, .. } => Some(path),
                _ => None,
            })
            .collect();
        let policy = tree.inner.config.retry;
        let mut retry = 0;
        let mut waited = 0;
        let mut fresh = false;
        loop {
            // `None`: lost a race creating the ancestors; `Some(e)`: a guard failed.
            let failure = if tree.ensure_ancestors(&puts, fresh).await? {
                let sent = match &self.token {
                    Some(token) => {
                        tree.io()
                            .transact_write_idempotent(actions.clone(), token)
                            .await
                    }
                    None => tree.io().transact_write(actions.clone()).await,
                };
                match sent {
                    Ok(()) => {
                        tree.after_commit(&self.ops).await;
                        return Ok(());
                    }
                    Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                        let reasons = e.cancellation_reasons();
                        let caller_failed = reasons
                            .iter()
                            .zip(&owners)
                            .any(|(r, o)| o.is_some() && r.is_condition_failed());
                        if caller_failed {
                            let mine: Vec<CancellationReason> = reasons
                                .iter()
                                .zip(&owners)
                                .filter(|(_, o)| o.is_some())
                                .map(|(r, _)| r.clone())
                                .collect();
                            let mut err = Error::transaction_canceled(mine);
                            if let Some(id) = e.request_id() {
                                err = err.with_request_id(id.to_owned());
                            }
                            return Err(err.with_source(e));
                        }
                        let raced = reasons
                            .iter()
                            .any(|r| r.is_condition_failed() || r.code() == "TransactionConflict");
                        if !raced {
                            return Err(e);
                        }
                        Some(e)
                    }
                    Err(e) => return Err(e),
                }
            } else {
                None
            };
            // A guard failed, or an ancestor could not be created: a removal or a move under
            // way, or a conflict. Look at the rows: a lock is reported, a live mark waited out
            // (its lease bounds the wait), an expired one taken off, a race retried under the
            // retry policy.
            match tree.guard_state(&self.ops).await? {
                GuardState::Locked(path) => return Err(tree.locked_error(&path)),
                GuardState::Removing => {
                    policy.sleep(waited.min(8)).await;
                    waited += 1;
                }
                GuardState::Raced => {
                    if retry + 1 >= policy.max_attempts() {
                        let err = Error::new(
                            ErrorKind::Conflict,
                            "the transaction's paths kept changing concurrently",
                        );
                        return Err(match failure {
                            Some(e) => err.with_source(e),
                            None => err,
                        });
                    }
                    policy.sleep(retry).await;
                    retry += 1;
                }
            }
            fresh = true;
        }
    }
}

/// The guard on one listing row, weakest first: a row checked for "not locked" (absent is
/// fine), for "exists, unmarked, unlocked", or written (created or rewritten) unless marked or
/// locked, which implies the others for the transaction's own put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Guard {
    Unlocked,
    Free,
    Create,
}

/// Why a guard failed, from a fresh read of the guarded rows.
enum GuardState {
    /// A move holds this path.
    Locked(Path),
    /// A removal is under way (a live mark): wait for it.
    Removing,
    /// Something changed in between: plan again.
    Raced,
}

fn action_bytes(a: &TransactAction) -> usize {
    match a {
        TransactAction::Put { item, .. } => item.size(),
        other => other.key().map_or(0, |k| k.hash.len() + k.range.len()) + 64,
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// The transaction's actions with their guards, and for each the index of the caller's
    /// action it is (`None` for a guard). Independent of the cache.
    fn plan_transaction(&self, ops: &[Op]) -> (Vec<TransactAction>, Vec<Option<usize>>) {
        let layout = &self.inner.layout;
        let mut actions = Vec::new();
        let mut owners = Vec::new();
        // One guard per listing row, the strongest asked for, in first-seen order.
        let mut guards: Vec<(Key, Guard)> = Vec::new();
        let mut guard = |key: Key, g: Guard| match guards.iter_mut().find(|(k, _)| *k == key) {
            Some((_, old)) => *old = (*old).max(g),
            None => guards.push((key, g)),
        };
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Put {
                    path,
                    row,
                    condition,
                } => {
                    actions.push(TransactAction::Put {
                        item: row.clone(),
                        condition: condition.clone(),
                    });
                    guard(layout.listing_key(path), Guard::Create);
                    if let Some(parent) = path.parent().filter(|p| !p.is_root()) {
                        guard(layout.listing_key(&parent), Guard::Free);
                    }
                }
                Op::Delete { path, condition } => {
                    actions.push(TransactAction::Delete {
                        key: layout.object_key(path),
                        condition: condition.clone(),
                    });
                    guard(layout.listing_key(path), Guard::Unlocked);
                }
                Op::Update {
                    path,
                    actions: updates,
                    condition,
                } => {
                    actions.push(TransactAction::Update {
                        key: layout.object_key(path),
                        actions: updates.clone(),
                        condition: condition.clone(),
                    });
                    guard(layout.listing_key(path), Guard::Free);
                }
                Op::Check { path, condition } => {
                    actions.push(TransactAction::ConditionCheck {
                        key: layout.object_key(path),
                        condition: condition.clone(),
                    });
                }
            }
            owners.push(Some(i));
        }
        let guards: Vec<TransactAction> = guards
            .into_iter()
            .map(|(key, g)| match g {
                Guard::Create => TransactAction::Put {
                    item: key.into_item(),
                    condition: self.not_marked(),
                },
                Guard::Free => TransactAction::ConditionCheck {
                    key,
                    condition: self.unmarked_exists(),
                },
                Guard::Unlocked => TransactAction::ConditionCheck {
                    key,
                    condition: Condition::attr_not_exists(layout.moving_attr()),
                },
            })
            .collect();
        owners.extend(std::iter::repeat_n(None, guards.len()));
        actions.extend(guards);
        (actions, owners)
    }

    /// Makes sure the listing rows above the puts' parents exist (the parents' own rows are
    /// checked, not created, in the transaction: created here too when missing). `fresh`:
    /// read them instead of trusting the cache. `false`: lost a race creating them.
    async fn ensure_ancestors(&self, puts: &[&Path], fresh: bool) -> Result<bool> {
        let layout = &self.inner.layout;
        let mut wanted: Vec<(Key, Path)> = Vec::new();
        let mut seen = HashSet::new();
        for path in puts {
            for i in 1..path.len() {
                let prefix = path.prefix(i);
                let key = layout.listing_key(&prefix);
                if seen.insert(key.clone()) {
                    wanted.push((key, prefix));
                }
            }
        }
        wanted.sort_by_key(|(_, p)| p.len());
        let unknown: Vec<Key> = wanted
            .iter()
            .filter(|(k, _)| fresh || !self.inner.known.contains(k))
            .map(|(k, _)| k.clone())
            .collect();
        if unknown.is_empty() {
            return Ok(true);
        }
        let found = get_all(
            &self.inner.storage,
            unknown.clone(),
            true,
            &self.inner.config.retry,
        )
        .await?;
        let mut present: HashSet<Key> = HashSet::new();
        for row in &found {
            if let Some(k) = Key::from_item(row) {
                present.insert(k);
            }
        }
        self.inner.known.insert_all(present.iter().cloned());
        let missing: Vec<(&Key, &Path)> = wanted
            .iter()
            .filter(|(k, _)| unknown.contains(k) && !present.contains(k))
            .map(|(k, p)| (k, p))
            .collect();
        if missing.is_empty() {
            return Ok(true);
        }
        self.create_listing_rows(&missing).await
    }

    /// Reads the guarded listing rows after a guard failed.
    async fn guard_state(&self, ops: &[Op]) -> Result<GuardState> {
        let layout = &self.inner.layout;
        let mut keys: Vec<(Key, Path)> = Vec::new();
        for op in ops {
            let path = op.path();
            for i in 1..=path.len() {
                let prefix = path.prefix(i);
                let key = layout.listing_key(&prefix);
                self.inner.known.remove(&key);
                if !keys.iter().any(|(k, _)| *k == key) {
                    keys.push((key, prefix));
                }
            }
        }
        let found = get_all(
            &self.inner.storage,
            keys.iter().map(|(k, _)| k.clone()).collect(),
            true,
            &self.inner.config.retry,
        )
        .await?;
        let mut removing = false;
        for row in &found {
            let Some(key) = Key::from_item(row) else {
                continue;
            };
            if row.contains(layout.moving_attr())
                && let Some((_, path)) = keys.iter().find(|(k, _)| *k == key)
            {
                return Ok(GuardState::Locked(path.clone()));
            }
            if let Some(mark) = row.get_s(layout.deleting_attr()) {
                if self.mark_expired(mark) {
                    self.clear_mark(&key, mark).await?;
                } else {
                    removing = true;
                }
            }
        }
        Ok(if removing {
            GuardState::Removing
        } else {
            GuardState::Raced
        })
    }

    /// After a commit: the listing rows of the puts are known; the deleted paths' listing rows
    /// are removed if they name nothing now, and their ancestors pruned.
    async fn after_commit(&self, ops: &[Op]) {
        let layout = &self.inner.layout;
        self.inner
            .known
            .insert_all(ops.iter().filter_map(|op| match op {
                Op::Put { path, .. } => Some(layout.listing_key(path)),
                _ => None,
            }));
        for op in ops {
            if let Op::Delete { path, .. } = op {
                let pruned = match self.remove_if_empty(path).await {
                    Ok(true) => self.prune_above(path).await,
                    Ok(false) => Ok(()),
                    Err(e) => Err(e),
                };
                if let Err(e) = pruned {
                    tracing::warn!(path = %path, error = %e, "listing rows left after a transaction's delete");
                }
            }
        }
    }
}

impl<S> Tree<S> {
    /// `condition` on a value of `T`: if `T` has a `#[dynatree(ttl)]` field, an expired value
    /// counts as absent (see `Layout::live`).
    pub(crate) fn live_for<T: Hierarchical>(&self, condition: Condition) -> Condition {
        if T::TTL_FIELD.is_some() {
            self.inner.layout.live(condition, crate::expiry::now_secs())
        } else {
            condition
        }
    }

    /// The tree's retry policy.
    pub(crate) fn config_retry(&self) -> crate::RetryPolicy {
        self.inner.config.retry
    }

    /// The key strings of this tree.
    pub(crate) fn layout(&self) -> &crate::layout::Layout {
        &self.inner.layout
    }
}
