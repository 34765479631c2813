#![doc = include_str!("write.md")]

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::layout;
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::batch::TRANSACT_MAX;
use crate::storage::{Condition, Storage, TransactAction};
use crate::tree::plan::{self, FromState};
use crate::tree::{Ctx, denorm, guard, removal};

use super::guard::Attempt;

/// Writes the object (or link) row `row` at `path` keeping the invariants. `condition` is
/// evaluated against the current object row, atomically with the write; when it does not
/// hold the result is [`ErrorKind::ConditionFailed`] and nothing is written.
pub(crate) async fn write_object<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: Item,
    condition: &Condition,
) -> Result<()> {
    write_object_checked(cx, path, row, condition, &[])
        .await
        .map(drop)
}

/// [`write_object`](write_object) with `checks` (condition checks on other rows,
/// here the sources of denormalized copies) in the same transaction. `Ok(false)` if a check
/// failed: nothing was written.
pub(crate) async fn write_object_checked<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: Item,
    condition: &Condition,
    checks: &[TransactAction],
) -> Result<bool> {
    let object_key = cx.inner.layout.object_key(path);
    let own = cx.inner.layout.listing_key(path);
    let fenced = cx.inner.config.fenced_puts;
    let object_known = cx.inner.known.contains(&object_key);
    let known = |p: &Path| cx.inner.known.contains(&cx.inner.layout.listing_key(p));
    let planned = plan::optimistic(path, known, checks.len());
    let what = plan::Known {
        object: object_known,
        own: cx.inner.known.contains(&own),
        sibling: cx.inner.known.knows_partition(&own.hash),
    };
    // First try the plan the cache suggests; after a failed check, read the real state.
    let mut read_state = false;
    let first = match plan::first(planned, what, checks.len(), condition) {
        // Fenced puts write an object this process does not know by the fenced path (its
        // trust and fences are argued for that order; see "Fenced puts").
        plan::First::Overwrite { .. } if fenced && !object_known => plan::First::Transaction,
        first => first,
    };
    if let plan::First::Overwrite { read } = first {
        // An overwrite: one PutItem, conditional on the object being there (not a fence)
        // and not held by a move or copy. An object row exists only while its listing row
        // does (invariant 2), so no check of the listing row is needed; anything else
        // takes the guarded path below (see the consistency docs, "Overwrites").
        let mut all = cx.inner.layout.overwritable();
        if !condition.is_always() {
            all.push(condition.clone());
        }
        match cx.io().put_item(row.clone(), layout::all(all)).await {
            Ok(()) => {
                cx.inner.known.insert_all(Some(object_key));
                return Ok(true);
            }
            Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                cx.inner.known.remove(&object_key);
                read_state = read;
            }
            Err(e) => return Err(e),
        }
    }
    // Under fenced puts, a put of an object this process did not know takes the fenced path;
    // a known one whose overwrite failed, the guarded path.
    if checks.is_empty() && fenced && !object_known {
        // Fenced puts: make sure L(P) was verified free moments ago (creating it if this
        // process does not know it), then one PutItem conditional on no fence.
        let created = if cx.inner.known.fresh(&own) {
            false
        } else {
            match verify_listing(cx, path).await {
                Ok(created) => created,
                Err(e) => {
                    // The listing row may have been written (a lost response): take it
                    // away again if it names nothing (best effort, as below).
                    let _ = removal::remove_if_empty(cx, path).await;
                    return Err(e);
                }
            }
        };
        if cx.inner.known.fresh(&own) {
            match put_fenced(cx, &row, condition).await {
                Ok(()) => {
                    cx.inner.known.insert_all(Some(object_key));
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                    // A fence, a hold or the caller's condition: the guarded path decides.
                    cx.inner.known.remove(&own);
                }
                Err(e) => {
                    // The listing row this call wrote would name nothing: take it away again
                    // (best effort, by the removal protocol, which keeps it if the PutItem
                    // applied after all; a crash here leaves it, as a failure part-way
                    // through the Go library's put does, for `check` and `repair`).
                    if created {
                        let _ = removal::remove_if_empty(cx, path).await;
                    }
                    return Err(e);
                }
            }
        }
    }
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        let sent = tokio::time::Instant::now();
        let outcome = if read_state {
            put_with_state(cx, path, &row, condition, checks).await?
        } else {
            put_optimistic(cx, path, &row, condition, checks).await?
        };
        match outcome {
            Attempt::Done => {
                cx.inner.known.insert_all(Some(object_key));
                // The transaction checked (or created) L(P) free when it committed.
                if fenced {
                    cx.inner.known.verify(own, sent);
                }
                return Ok(true);
            }
            Attempt::Stale => return Ok(false),
            Attempt::Retry if !read_state => read_state = true,
            Attempt::Again => read_state = true,
            // A live removal: it either finishes quickly or its lease runs out, and then
            // the mark is taken off. Neither is a failed attempt.
            Attempt::Wait => backoff.wait().await,
            Attempt::Retry => {
                if !backoff.retry().await {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("{path} kept being removed concurrently"),
                    ));
                }
            }
        }
    }
}

/// Fenced puts: the object row `row` in one PutItem, conditional on no fence and no hold
/// at its key and on `condition`. Only sent within [`FENCE_TRUST`] of a request that
/// verified the listing row free (see the consistency docs, "Fenced puts").
///
/// [`FENCE_TRUST`]: super::FENCE_TRUST
///
/// Sent once, without the retry policy: a resend after a backoff would be sent later than
/// the trust allows. A throttled attempt, or one refused for a transaction in flight on the
/// object, is reported as a failed condition, so that the guarded path (with its retries)
/// takes over.
async fn put_fenced<S: Storage + 'static>(
    cx: &Ctx<S>,
    row: &Item,
    condition: &Condition,
) -> Result<()> {
    let mut all = cx.inner.layout.unfenced_unheld();
    if !condition.is_always() {
        all.push(condition.clone());
    }
    // A link row under a link index goes with its entry, in one transaction sent once as
    // the PutItem would be; its cancellation, whatever the reason, is the guarded path's turn.
    if let Some(depth) = super::links::depth_for(cx, row).await? {
        let put = TransactAction::Put {
            item: row.clone(),
            condition: layout::all(all),
        };
        let actions = super::links::add_entries(cx, vec![put], depth)?;
        return match cx.inner.storage.transact_write(actions).await {
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::TransactionCanceled | ErrorKind::Throttled | ErrorKind::Conflict
                ) =>
            {
                Err(Error::new(
                    ErrorKind::ConditionFailed,
                    "refused, throttled or in conflict: the guarded path takes over",
                )
                .with_source(e))
            }
            other => other,
        };
    }
    match cx
        .inner
        .storage
        .put_item(row.clone(), layout::all(all))
        .await
    {
        // Nothing was applied; resending could outlive the trust.
        Err(e) if matches!(e.kind(), ErrorKind::Throttled | ErrorKind::Conflict) => {
            Err(Error::new(
                ErrorKind::ConditionFailed,
                "throttled or in conflict: the guarded path takes over",
            )
            .with_source(e))
        }
        other => other,
    }
}

/// Fenced puts: verifies (creating it if missing) that `path`'s listing row is free with
/// one cheap write, recording when on success: a new top-level name's row in one PutItem
/// (the root needs no check), a new name under a known parent in a transaction that also
/// checks the parent's row. Anything else (or a failure) is left to the guarded path.
/// Returns whether it wrote the row.
async fn verify_listing<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<bool> {
    let own = cx.inner.layout.listing_key(path);
    let sent = tokio::time::Instant::now();
    let parent = path.parent().filter(|p| !p.is_root());
    let ok = match &parent {
        None => {
            match cx
                .io()
                .put_item(cx.inner.layout.listing_row(path), guard::not_marked(cx))
                .await
            {
                Ok(()) => true,
                Err(e) if e.kind() == ErrorKind::ConditionFailed => false,
                Err(e) => return Err(e),
            }
        }
        Some(parent) => {
            let parent_key = cx.inner.layout.listing_key(parent);
            if !cx.inner.known.contains(&parent_key) {
                return Ok(false);
            }
            let actions = vec![
                TransactAction::Put {
                    item: cx.inner.layout.listing_row(path),
                    condition: guard::not_marked(cx),
                },
                TransactAction::ConditionCheck {
                    key: parent_key.clone(),
                    condition: guard::unmarked_exists(cx),
                },
            ];
            match guard::transact(cx, actions, false).await? {
                Attempt::Done => true,
                _ => {
                    cx.inner.known.remove(&parent_key);
                    false
                }
            }
        }
    };
    if ok {
        cx.inner.known.insert_all(Some(own.clone()));
        cx.inner.known.verify(own, sent);
    } else {
        cx.inner.known.remove(&own);
    }
    Ok(ok)
}

/// One transaction planned from the cache alone ([`plan::optimistic`]).
async fn put_optimistic<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
    condition: &Condition,
    checks: &[TransactAction],
) -> Result<Attempt> {
    let layout = &cx.inner.layout;
    let known = |p: &Path| cx.inner.known.contains(&layout.listing_key(p));
    let planned = plan::optimistic(path, known, checks.len());
    let (mut actions, mut at) =
        plan::optimistic_actions(layout, path, planned, row, condition, checks);
    // A new name in a sharded directory checks its shard's guard instead of the parent's
    // listing row (see "Sharded directories").
    let shard_guard = layout
        .guard_of_child(path)
        // Room for the guard's put and a link's index entry.
        .filter(|_| planned == plan::Optimistic::UnderParent && actions.len() + 2 <= TRANSACT_MAX)
        .map(|g| match cx.inner.known.contains(&g) {
            true => plan::ShardGuard::Known(g),
            false => plan::ShardGuard::New(g),
        });
    if let Some(g) = &shard_guard {
        (actions, at) = plan::with_shard_guard(actions, at, g);
    }
    let guard_key = shard_guard.map(|g| match g {
        plan::ShardGuard::Known(k) | plan::ShardGuard::New(k) => k,
    });
    match guard::transact_checked(cx, actions, !condition.is_always(), at).await? {
        Attempt::Done => {
            cx.inner.known.insert_all(
                plan::optimistic_learned(layout, path, planned)
                    .into_iter()
                    .chain(guard_key),
            );
            Ok(Attempt::Done)
        }
        Attempt::Stale => Ok(Attempt::Stale),
        _ => {
            for key in plan::optimistic_doubted(layout, path, planned)
                .into_iter()
                .chain(guard_key)
            {
                cx.inner.known.remove(&key);
            }
            Ok(Attempt::Retry)
        }
    }
}

/// Reads the listing rows of every prefix, then writes exactly the missing ones.
async fn put_with_state<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
    condition: &Condition,
    checks: &[TransactAction],
) -> Result<Attempt> {
    let last = TransactAction::Put {
        item: row.clone(),
        condition: condition.clone(),
    };
    link_with_state(cx, path, last, !condition.is_always(), checks).await
}

/// Reads the listing rows of every prefix of `path`, then writes exactly the missing ones
/// with `last` (the object's put, or for a repair a check of the row that needs them) as
/// the last action; `conditional`: a failure of `last`'s condition is the caller's
/// [`ErrorKind::ConditionFailed`].
pub(crate) async fn link_with_state<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    last: TransactAction,
    conditional: bool,
    checks: &[TransactAction],
) -> Result<Attempt> {
    let keys = cx.prefix_keys(path);
    let existing = cx.prefix_rows(&keys).await?;
    let mut actions =
        match plan::from_state(&cx.inner.layout, &keys, &existing, guard::mark_expired) {
            // A locked row: the subtree is moving, and this write is refused.
            FromState::Locked => return Err(guard::locked_error(path)),
            // A marked row is being removed: wait for it, or take an expired mark off.
            FromState::ClearMark(i, mark) => {
                guard::clear_mark(cx, &keys[i], &mark).await?;
                return Ok(Attempt::Again);
            }
            FromState::Wait => return Ok(Attempt::Wait),
            FromState::Write(actions) => actions,
        };
    // The checks right before the object's put (in its chunk: the last one).
    let at = actions.len();
    actions.extend(checks.iter().cloned());
    actions.push(last);
    let reserve = super::links::extra_actions(
        cx,
        actions.iter().filter_map(|a| match a {
            TransactAction::Put { item, .. } => Some(item),
            _ => None,
        }),
    );
    for chunk in plan::chunks(&cx.inner.layout, &actions, at..at + checks.len(), reserve) {
        match guard::transact_checked(cx, chunk.actions, chunk.last && conditional, chunk.checks)
            .await?
        {
            Attempt::Done => {}
            Attempt::Stale => return Ok(Attempt::Stale),
            _ => return Ok(Attempt::Retry),
        }
    }
    cx.inner.known.insert_all(keys);
    Ok(Attempt::Done)
}

/// [`Tree::put`](crate::Tree::put) at the absolute `path`: refused at the root, the value
/// checked and converted, then [`put_object`].
pub(crate) async fn put_value<S: Storage + 'static, T: serde::Serialize + ?Sized>(
    cx: &Ctx<S>,
    path: Path,
    value: &T,
) -> Result<()> {
    cx.refuse_root(&path, "put")?;
    let row = cx.object_row_for(&path, value)?;
    put_object(cx, &path, row).await
}

/// [`Tree::put_link`](crate::Tree::put_link) at the absolute `path` to the absolute
/// `target`: both checked as objects' paths, then [`put_link`].
pub(crate) async fn put_link_to<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: Path,
    target: Path,
) -> Result<()> {
    cx.refuse_root(&path, "put_link")?;
    cx.inner.layout.check_object_path(&path)?;
    cx.inner.layout.check_object_path(&target)?;
    let row = cx.link_row_for(&path, &target)?;
    put_link(cx, &path, row).await
}

/// [`Tree::put`] of a checked object row: one write for a plain object; a source of
/// denormalized fields is stamped with a new version, written fenced, and propagated.
pub(crate) async fn put_object<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    mut row: Item,
) -> Result<()> {
    if !denorm::source_at(cx, path) {
        return write_object(cx, path, row, &crate::storage::Condition::Always).await;
    }
    // A source of denormalized fields: stamped, fenced and propagated as a typed put.
    row.insert(
        cx.inner.layout.source_version_attr(),
        crate::item::Value::N(denorm::next_version().to_string()),
    );
    let guard = denorm::before_source_write_at(cx, path).await?;
    if let Err(e) =
        denorm::write_fenced(cx, path, &mut row, &crate::storage::Condition::Always).await
    {
        denorm::source_write_failed(cx, guard, &e).await;
        return Err(e);
    }
    denorm::after_source_write(cx, guard, path, Some(&row)).await
}

/// [`Tree::put_link`] of a checked link row: one write, or, where it replaces a source of
/// denormalized fields, that source's removal (tombstone, pinned versions, copies cleared).
pub(crate) async fn put_link<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: Item,
) -> Result<()> {
    if !denorm::source_at(cx, path) {
        return write_object(cx, path, row, &crate::storage::Condition::Always).await;
    }
    // A link replacing a source of denormalized fields removes the source: as a delete
    // (tombstone, pinned versions, copies cleared).
    let guard = denorm::before_source_write_at(cx, path).await?;
    let result = denorm::replace_source_with(cx, path, row).await;
    match result {
        Ok(()) => denorm::after_source_write(cx, guard, path, None).await,
        Err(e) => {
            denorm::source_write_failed(cx, guard, &e).await;
            Err(e)
        }
    }
}
