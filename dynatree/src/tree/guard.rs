//! The guards of the write and removal protocols (see [`consistency`](crate::consistency)):
//! the conditions a listing row is checked against, removal marks (leases), and the one
//! transaction helper that tells a lost race from a caller's failed condition.
//!
#![doc = include_str!("guard.md")]

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::path::Path;
use crate::storage::{Condition, Key, Storage, TransactAction};
use crate::tree::Ctx;

use super::clock::{after_ms, now_ms};
use super::move_plan::Removal;

/// Outcome of one attempt of a write.
pub(crate) enum Attempt {
    Done,
    /// Lost a race (a condition or a concurrent transaction): retry, within the budget.
    Retry,
    /// A listing row on the path carries a live removal mark: wait (outside the retry budget;
    /// the mark's lease bounds the wait) and look again.
    Wait,
    /// An expired mark was taken off: look again at once (no failed attempt).
    Again,
    /// A check on another row (a source of denormalized copies) failed: what was read before
    /// the write is stale; nothing was written.
    Stale,
}

/// The action that removes the object row at `path` if `condition` holds: a Delete, or
/// with [`fenced_puts`](super::TreeBuilder::fenced_puts) a Put of a fence row (see the
/// consistency docs, "Fenced puts"), so that no PutItem trusting an earlier look at the
/// listing row lands there once the listing row may go.
pub(crate) fn remove_object<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    condition: Condition,
) -> TransactAction {
    removal(cx).action(&cx.inner.layout, path, condition)
}

/// How this tree removes an object: deleted, or replaced by a fence (fenced puts).
pub(crate) fn removal<S: Storage + 'static>(cx: &Ctx<S>) -> Removal {
    if cx.inner.config.fenced_puts {
        Removal::Fence {
            expiry: fence_expiry(),
        }
    } else {
        Removal::Delete
    }
}

/// When a fence written now expires (seconds since the epoch).
pub(crate) fn fence_expiry() -> u64 {
    crate::expiry::now_secs().saturating_add(super::FENCE_LIFETIME.as_secs())
}

/// No object at an object key: nothing, a fence, or an expired value.
pub(crate) fn no_object<S: Storage + 'static>(cx: &Ctx<S>) -> Condition {
    cx.inner
        .layout
        .live(Condition::NotExists, crate::expiry::now_secs())
}

/// A listing row exists, and is neither marked for removal nor locked.
pub(crate) fn unmarked_exists<S: Storage + 'static>(cx: &Ctx<S>) -> Condition {
    cx.inner.layout.free_row()
}

/// Exists, and neither marked for removal nor locked.
pub(crate) fn free_row<S: Storage + 'static>(cx: &Ctx<S>) -> Condition {
    cx.inner.layout.free_row()
}

/// A listing row (if any) is neither marked nor locked: what creating it requires.
pub(crate) fn not_marked<S: Storage + 'static>(cx: &Ctx<S>) -> Condition {
    cx.inner.layout.not_marked()
}

pub(crate) fn locked_error(path: &Path) -> Error {
    Error::new(
        ErrorKind::Locked,
        format!(
            "{path} is inside a subtree that another operation holds (a move, copy or subtree deletion)"
        ),
    )
}

/// [`transact`](transact), where a failed condition of an action in `checks` (the
/// indexes of condition checks on other rows) is [`Attempt::Stale`].
pub(crate) async fn transact_checked<S: Storage + 'static>(
    cx: &Ctx<S>,
    actions: Vec<TransactAction>,
    object_condition: bool,
    checks: std::ops::Range<usize>,
) -> Result<Attempt> {
    if checks.is_empty() {
        return transact(cx, actions, object_condition).await;
    }
    match cx.io().transact_write(actions).await {
        Err(e)
            if e.kind() == ErrorKind::TransactionCanceled
                && e.cancellation_reasons().get(checks).is_some_and(|r| {
                    r.iter()
                        .any(crate::error::CancellationReason::is_condition_failed)
                }) =>
        {
            Ok(Attempt::Stale)
        }
        Ok(()) => Ok(Attempt::Done),
        Err(e) => canceled(e, object_condition),
    }
}

/// Sends one transaction; a cancellation for a condition or a conflict means "retry". With
/// `object_condition`, the last action is the object put with the caller's condition, and
/// its failure is the caller's [`ErrorKind::ConditionFailed`], not a race to retry.
pub(crate) async fn transact<S: Storage + 'static>(
    cx: &Ctx<S>,
    actions: Vec<TransactAction>,
    object_condition: bool,
) -> Result<Attempt> {
    match cx.io().transact_write(actions).await {
        Ok(()) => Ok(Attempt::Done),
        Err(e) => canceled(e, object_condition),
    }
}

/// What a failed TransactWriteItems means for the protocol.
fn canceled(e: Error, object_condition: bool) -> Result<Attempt> {
    if e.kind() != ErrorKind::TransactionCanceled {
        return Err(e);
    }
    let reasons = e.cancellation_reasons();
    if object_condition
        && reasons
            .last()
            .is_some_and(crate::error::CancellationReason::is_condition_failed)
    {
        return Err(Error::new(
            ErrorKind::ConditionFailed,
            "the object's condition does not hold",
        )
        .with_source(e));
    }
    let lost_race = reasons
        .iter()
        .any(|r| r.is_condition_failed() || matches!(r.code(), "TransactionConflict"));
    if lost_race {
        Ok(Attempt::Retry)
    } else {
        Err(e)
    }
}

pub(crate) fn new_mark<S: Storage + 'static>(cx: &Ctx<S>) -> String {
    let expires = after_ms(cx.inner.config.lease);
    format!("{expires}:{:016x}", fastrand::u64(..))
}

pub(crate) fn mark_expired(mark: &str) -> bool {
    mark_expired_at(mark, now_ms())
}

/// The condition under which a listing row may be marked by a remover: it exists and is
/// not locked. Any removal mark already there is taken over: every final step of a removal
/// is conditional on the remover's own mark, so the one replaced stops at its next step
/// (the lease only tells writers how long to wait). So a repeated delete finishes what a
/// failed one left marked.
pub(crate) fn markable<S: Storage + 'static>(cx: &Ctx<S>) -> Condition {
    cx.inner.layout.markable()
}

/// After a failure part-way through a removal: takes our mark off again if it is still
/// ours (best effort; if this fails too, the mark's lease runs out instead), and returns
/// the original error.
pub(crate) async fn abandon_removal<S: Storage + 'static, T>(
    cx: &Ctx<S>,
    key: &Key,
    mark: &str,
    e: Error,
) -> Result<T> {
    for _ in 0..2 {
        if clear_mark(cx, key, mark).await.is_ok() {
            break;
        }
    }
    Err(e)
}

/// Takes an expired removal mark off `key` (conditional on exactly that mark).
pub(crate) async fn clear_expired_mark<S: Storage + 'static>(
    cx: &Ctx<S>,
    key: &Key,
    mark: &str,
) -> Result<()> {
    clear_mark(cx, key, mark).await
}

pub(crate) async fn clear_mark<S: Storage + 'static>(
    cx: &Ctx<S>,
    key: &Key,
    mark: &str,
) -> Result<()> {
    match cx
        .io()
        .put_item(key.clone().into_item(), cx.inner.layout.marked_by(mark))
        .await
    {
        Err(e) if e.kind() != ErrorKind::ConditionFailed => Err(e),
        _ => Ok(()),
    }
}

pub(crate) fn marked_row<S: Storage + 'static>(cx: &Ctx<S>, key: &Key, mark: &str) -> Item {
    let mut item = key.clone().into_item();
    item.insert(cx.inner.layout.deleting_attr(), Value::S(mark.to_owned()));
    item
}

/// Whether the removal mark `mark` (`<expiry ms>:<nonce>`) has expired at `now` (ms); a mark
/// that does not parse counts as expired (it cannot be anyone's live lease).
fn mark_expired_at(mark: &str, now: u64) -> bool {
    mark.split(':')
        .next()
        .and_then(|t| t.parse::<u64>().ok())
        .is_none_or(|expires| expires < now)
}

#[cfg(test)]
mod tests {
    use super::mark_expired_at;

    #[test]
    fn marks_expire_by_their_lease() {
        assert!(!mark_expired_at("2000:00ff", 1999));
        assert!(!mark_expired_at("2000:00ff", 2000));
        assert!(mark_expired_at("2000:00ff", 2001));
        // Not a mark of ours: nobody's live lease.
        assert!(mark_expired_at("garbage", 0));
    }
}
