//! Transactions across items and types: [`Transaction`].
//!
#![doc = include_str!("txn.md")]

use crate::tree::{Ctx, guard, many, removal};
use std::collections::HashSet;

use crate::error::{CancellationReason, Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{
    Condition, Key, Storage, TRANSACT_MAX, TRANSACT_MAX_BYTES, TransactAction, get_all,
};

#[derive(Debug, Clone)]
pub(crate) enum Op {
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
    /// A check of the tombstone of the source at `path` (denormalized fields), added to the
    /// caller's actions: it may share its path with one of them.
    Tombstone {
        path: Path,
        condition: Condition,
    },
}

impl Op {
    /// The op with its condition seeing an expired value (or a fence) as absent.
    fn live(self, layout: &crate::layout::Layout, now: u64) -> Op {
        self.map_condition(|c| layout.live(c, now))
    }

    /// The op with its condition seeing a fence row (fenced puts) as absent.
    fn unfenced(self, layout: &crate::layout::Layout) -> Op {
        self.map_condition(|c| layout.unfenced(c))
    }

    /// The op with `f` applied to its condition.
    fn map_condition(self, f: impl Fn(Condition) -> Condition) -> Op {
        match self {
            Op::Put {
                path,
                row,
                condition,
            } => Op::Put {
                path,
                row,
                condition: f(condition),
            },
            Op::Delete { path, condition } => Op::Delete {
                path,
                condition: f(condition),
            },
            Op::Update {
                path,
                actions,
                condition,
            } => Op::Update {
                path,
                actions,
                condition: f(condition),
            },
            Op::Check { path, condition } => Op::Check {
                path,
                condition: f(condition),
            },
            tombstone @ Op::Tombstone { .. } => tombstone,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            Op::Put { path, .. }
            | Op::Delete { path, .. }
            | Op::Update { path, .. }
            | Op::Check { path, .. }
            | Op::Tombstone { path, .. } => path,
        }
    }
}

/// Commits the caller's actions `ops` (untyped; `expiring[i]`: the conditions of action `i`
/// see an expired value as absent) with their guards, as one TransactWriteItems: the
/// protocol of the module docs. `ops` is not empty.
pub(crate) async fn commit_ops<S: Storage + 'static>(
    cx: &Ctx<S>,
    ops: Vec<Op>,
    expiring: Vec<bool>,
    token: Option<String>,
) -> Result<()> {
    let mut paths = HashSet::new();
    for op in &ops {
        if !matches!(op, Op::Tombstone { .. }) && !paths.insert(op.path()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("the transaction has two actions at {}", op.path()),
            ));
        }
    }
    let tree = cx;
    // Conditions see expired values as absent, except under an idempotency token: a resend must
    // be the identical request, and the time of the check would differ.
    let now = crate::expiry::now_secs();
    let ops: Vec<Op> = ops
        .into_iter()
        .zip(&expiring)
        .map(|(op, &expiring)| {
            if (expiring || tree.inner.config.fenced_puts) && token.is_none() {
                op.live(&tree.inner.layout, now)
            } else if tree.inner.config.fenced_puts {
                op.unfenced(&tree.inner.layout)
            } else {
                op
            }
        })
        .collect();
    // Every object written carries the transaction's identity, for readers of the stream.
    let tx = token
        .clone()
        .unwrap_or_else(|| format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)));
    let tx_attr = tree.inner.layout.tx_attr();
    let ops: Vec<Op> = ops
        .into_iter()
        .map(|mut op| {
            match &mut op {
                Op::Put { row, .. } => {
                    row.insert(tx_attr.clone(), Value::S(tx.clone()));
                }
                Op::Update { actions, .. } => {
                    actions.push(crate::storage::UpdateAction::Set(
                        tx_attr.clone(),
                        Value::S(tx.clone()),
                    ));
                }
                Op::Delete { .. } | Op::Check { .. } | Op::Tombstone { .. } => {}
            }
            op
        })
        .collect();
    let (actions, owners) = plan_transaction(tree, &ops);
    if actions.len() > TRANSACT_MAX {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "the transaction needs {} actions with its guards ({} of yours), over DynamoDB's {TRANSACT_MAX}",
                actions.len(),
                ops.len()
            ),
        ));
    }
    let bytes: usize = actions.iter().map(TransactAction::payload_size).sum();
    if bytes > TRANSACT_MAX_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "the transaction is {bytes} bytes with its guards, over DynamoDB's 4 MB ({TRANSACT_MAX_BYTES} bytes)"
            ),
        ));
    }
    let puts: Vec<&Path> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Put { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    let mut backoff = Backoff::new(tree.inner.config.retry);
    let mut fresh = false;
    loop {
        // `None`: lost a race creating the ancestors; `Some(e)`: a guard failed.
        let failure = if ensure_ancestors(tree, &puts, fresh).await? {
            let sent = match &token {
                Some(token) => {
                    tree.io()
                        .transact_write_idempotent(actions.clone(), token)
                        .await
                }
                None => tree.io().transact_write(actions.clone()).await,
            };
            match sent {
                Ok(()) => {
                    after_commit(tree, &ops).await;
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
        match guard_state(tree, &ops).await? {
            GuardState::Locked(path) => return Err(guard::locked_error(&path)),
            GuardState::Removing => backoff.wait().await,
            GuardState::Raced => {
                if !backoff.retry().await {
                    let err = Error::new(
                        ErrorKind::Conflict,
                        "the transaction's paths kept changing concurrently",
                    );
                    return Err(match failure {
                        Some(e) => err.with_source(e),
                        None => err,
                    });
                }
            }
        }
        fresh = true;
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

/// The transaction's actions with their guards, and for each the index of the caller's
/// action it is (`None` for a guard). Independent of the cache.
fn plan_transaction<S: Storage + 'static>(
    cx: &Ctx<S>,
    ops: &[Op],
) -> (Vec<TransactAction>, Vec<Option<usize>>) {
    let layout = &cx.inner.layout;
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
                actions.push(guard::remove_object(cx, path, condition.clone()));
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
            Op::Tombstone { path, condition } => {
                actions.push(TransactAction::ConditionCheck {
                    key: layout.tombstone_key(path),
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
                condition: guard::not_marked(cx),
            },
            Guard::Free => TransactAction::ConditionCheck {
                key,
                condition: guard::unmarked_exists(cx),
            },
            Guard::Unlocked => TransactAction::ConditionCheck {
                key,
                condition: layout.unlocked_or(None),
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
async fn ensure_ancestors<S: Storage + 'static>(
    cx: &Ctx<S>,
    puts: &[&Path],
    fresh: bool,
) -> Result<bool> {
    let layout = &cx.inner.layout;
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
        .filter(|(k, _)| fresh || !cx.inner.known.contains(k))
        .map(|(k, _)| k.clone())
        .collect();
    if unknown.is_empty() {
        return Ok(true);
    }
    cx.ensure_verified().await?;
    let found = get_all(
        &cx.inner.storage,
        unknown.clone(),
        true,
        &cx.inner.config.retry,
    )
    .await?;
    let mut present: HashSet<Key> = HashSet::new();
    for row in &found {
        if let Some(k) = Key::from_item(row) {
            present.insert(k);
        }
    }
    cx.inner.known.insert_all(present.iter().cloned());
    let missing: Vec<(&Key, &Path)> = wanted
        .iter()
        .filter(|(k, _)| unknown.contains(k) && !present.contains(k))
        .map(|(k, p)| (k, p))
        .collect();
    if missing.is_empty() {
        return Ok(true);
    }
    many::create_listing_rows(cx, &missing).await
}

/// Reads the guarded listing rows after a guard failed.
async fn guard_state<S: Storage + 'static>(cx: &Ctx<S>, ops: &[Op]) -> Result<GuardState> {
    let layout = &cx.inner.layout;
    let mut keys: Vec<(Key, Path)> = Vec::new();
    for op in ops {
        let path = op.path();
        for i in 1..=path.len() {
            let prefix = path.prefix(i);
            let key = layout.listing_key(&prefix);
            cx.inner.known.remove(&key);
            if !keys.iter().any(|(k, _)| *k == key) {
                keys.push((key, prefix));
            }
        }
    }
    cx.ensure_verified().await?;
    let found = get_all(
        &cx.inner.storage,
        keys.iter().map(|(k, _)| k.clone()).collect(),
        true,
        &cx.inner.config.retry,
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
            if guard::mark_expired(mark) {
                guard::clear_mark(cx, &key, mark).await?;
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
async fn after_commit<S: Storage + 'static>(cx: &Ctx<S>, ops: &[Op]) {
    let layout = &cx.inner.layout;
    cx.inner
        .known
        .insert_all(ops.iter().filter_map(|op| match op {
            Op::Put { path, .. } => Some(layout.listing_key(path)),
            _ => None,
        }));
    for op in ops {
        if let Op::Delete { path, .. } = op {
            let pruned = match removal::remove_if_empty(cx, path).await {
                Ok(true) => removal::prune_above(cx, path).await,
                Ok(false) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = pruned {
                tracing::warn!(path = %path, error = %e, "listing rows left after a transaction's delete");
            }
        }
    }
}

impl<S> Ctx<S> {
    /// The tree's retry policy.
    pub(crate) fn config_retry(&self) -> crate::RetryPolicy {
        self.inner.config.retry
    }

    /// The key strings of this tree.
    pub(crate) fn layout(&self) -> &crate::layout::Layout {
        &self.inner.layout
    }
}
/// `condition` on a value that may expire (`expiring`: its type has a `#[dynatree(ttl)]`
/// field): an expired value counts as absent (see `Layout::live`).
pub(crate) fn live_if<S>(cx: &Ctx<S>, expiring: bool, condition: Condition) -> Condition {
    if expiring || cx.inner.config.fenced_puts {
        cx.inner.layout.live(condition, crate::expiry::now_secs())
    } else {
        condition
    }
}
