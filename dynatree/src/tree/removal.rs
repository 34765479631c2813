//! The removal protocol (see [`consistency`](crate::consistency)): deleting an object, removing
//! listing rows that name nothing (mark, check, delete on the mark), pruning emptied ancestors.
//!
#![doc = include_str!("removal.md")]

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::layout::all;
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{Condition, Key, Query, Storage, TransactAction};
use crate::tree::plan::{self, Prune};
use crate::tree::{Ctx, denorm, guard};

use super::Tree;
use super::guard::Attempt;

impl<S: Storage + 'static> Tree<S> {
    /// Deletes the object or link at `path`.
    ///
    /// Children of `path` stay reachable: its listing row is removed only when it has none.
    /// Ancestor listing rows left naming nothing are removed too (safely against concurrent
    /// puts; see the module docs). Deleting a missing path succeeds.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
    /// tree.put(["a"], &V { v: 1 }).await?;
    /// tree.put(["a", "child"], &V { v: 2 }).await?;
    /// tree.delete(["a"]).await?;
    /// // The child stays reachable.
    /// let names: Vec<String> = tree.list(["a"]).try_collect().await?;
    /// assert_eq!(names, ["child"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] (the root, an empty component, the reserved character, a key
    /// over DynamoDB's limits): nothing was written. Backend errors.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have deleted the object; a listing row it marked is
    /// released after the removal lease. Calling `delete` again completes it.
    pub async fn delete(&self, path: impl crate::IntoPath) -> Result<()> {
        let span = |p: &Path| tracing::debug_span!("dynatree.delete", path = %p);
        self.call_at(path, span, |path| delete_at(&self.cx, path))
            .await
    }
}

/// [`Tree::delete`] at the absolute `path`: checked as an object's path, refused at the root,
/// then [`delete`].
async fn delete_at<S: Storage + 'static>(cx: &Ctx<S>, path: Path) -> Result<()> {
    cx.inner.layout.check_object_path(&path)?;
    cx.refuse_root(&path, "delete")?;
    delete(cx, &path).await
}

/// [`Tree::delete`] of a checked path: a plain delete, or for a source of denormalized
/// fields, its last version kept as its tombstone and its optional copies below cleared.
pub(crate) async fn delete<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    // A source of denormalized fields: its last version is kept as its tombstone
    // (the delete is conditional on deleting that version), and its optional copies
    // below are cleared.
    let guard = denorm::before_source_write_at(cx, path).await?;
    let deleted = if denorm::source_at(cx, path) {
        delete_source(cx, path).await
    } else {
        delete_checked(cx, path).await
    };
    match deleted {
        Ok(()) => denorm::after_source_write(cx, guard, path, None).await,
        Err(e) => {
            denorm::source_write_failed(cx, guard, &e).await;
            Err(e)
        }
    }
}

/// Deletes the source object at `path` after recording its version as its tombstone,
/// conditional on the object still holding that version (a write in between: again).
async fn delete_source<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        // Its versions as read (its own and its chained copies'), pinned by the delete;
        // the latest is the tombstone.
        let row = denorm::pin_versions(cx, path).await?;
        let unchanged = denorm::same_versions(cx, path, &row);
        match delete_checked_if(cx, path, unchanged).await {
            Err(e) if e.is_condition_failed() && backoff.spend() => {}
            other => return other,
        }
    }
}

pub(crate) async fn delete_checked<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    delete_checked_if(cx, path, Condition::Always).await
}

/// [`delete_checked`](delete_checked), with a condition on the object row
/// ([`ErrorKind::ConditionFailed`] and nothing deleted if it does not hold).
pub(crate) async fn delete_checked_if<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    object: Condition,
) -> Result<()> {
    let conditional = !object.is_always();
    let own = cx.inner.layout.listing_key(path);
    cx.inner.known.remove(&own);
    cx.inner.known.remove(&cx.inner.layout.object_key(path));
    let mut backoff = Backoff::new(cx.inner.config.retry);
    // What we believe L(P) is; refined after a cancelled attempt.
    let mut seen: Option<Item> = Some(own.clone().into_item());
    // Fenced puts: a fence goes where a row is (an object, or a fence renewed); where
    // nothing is, the mark is sent with a check that nothing is there, so that a node that
    // never held an object and keeps its children gets no fence (if its listing row goes,
    // the end of the removal fences it). Which of the two is tried is flipped when the
    // object's row turns out otherwise.
    let fence_rows_only = cx.inner.config.fenced_puts && !conditional;
    let mut nothing_there = false;
    let mut flipped = false;
    let marked = loop {
        let Some(row) = seen.as_ref() else {
            // L(P) is missing: so is O(P) (or a foreign writer left it alone): delete it,
            // while L(P) stays missing.
            if delete_unlisted(cx, path, object.clone()).await? {
                break None;
            }
            // Listed meanwhile (a repair re-created its listing row): remove it as any.
            another_try(&mut backoff, path)?;
            seen = cx.io().get_item(&own, true).await?;
            continue;
        };
        if row.contains(cx.inner.layout.moving_attr()) {
            return Err(guard::locked_error(path));
        }
        let mark = guard::new_mark(cx);
        let object_action = if !fence_rows_only {
            guard::remove_object(cx, path, object.clone())
        } else if nothing_there {
            TransactAction::ConditionCheck {
                key: cx.inner.layout.object_key(path),
                condition: Condition::NotExists,
            }
        } else {
            guard::remove_object(cx, path, Condition::Exists)
        };
        // The object's delete last: its failed condition is reported as the caller's.
        let tx = plan::mark_transaction(&cx.inner.layout, &own, &mark, object_action);
        match guard::transact(cx, tx, conditional || fence_rows_only).await {
            Ok(Attempt::Done) => break Some(mark),
            Ok(_) => {}
            // Nothing applied: the object's row is not as this attempt assumed.
            Err(e) if fence_rows_only && e.kind() == ErrorKind::ConditionFailed => {
                nothing_there = !nothing_there;
                // The first guess being wrong is no race: only a row that keeps changing
                // spends the retry budget.
                if flipped {
                    another_try(&mut backoff, path)?;
                }
                flipped = true;
                continue;
            }
            // The mark may have been applied with its response lost: take it off again.
            Err(e) => return guard::abandon_removal(cx, &own, &mark, e).await,
        }
        another_try(&mut backoff, path)?;
        seen = cx.io().get_item(&own, true).await?;
    };
    // O(P) is gone and puts at P wait; L(P) goes if P has no children.
    if let Some(mark) = marked {
        match finish_removal(cx, path, &own, &mark, false).await {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => return guard::abandon_removal(cx, &own, &mark, e).await,
        }
    }
    // Prune ancestors that now name nothing. This also runs when L(P) was already gone, so
    // repeating a delete that failed while pruning finishes the pruning.
    prune_above(cx, path).await
}

/// Removes the listing rows of `path`'s ancestors that name nothing, deepest first,
/// stopping at the first one still needed (or being removed by someone else).
pub(crate) async fn prune_above<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    let mut q = path.parent();
    // Never the root's listing row: a whole tree's root has none, a scope's belongs to
    // the parent tree (see `scope`).
    while let Some(current) = q.filter(|p| p.len() > cx.floor()) {
        if !remove_if_empty(cx, &current).await? {
            break;
        }
        q = current.parent();
    }
    Ok(())
}

/// With `key` = L(q) marked by `mark`: deletes it if q has no children (and, when
/// `check_object`, no object), else unmarks it. Returns whether it was deleted.
pub(crate) async fn finish_removal<S: Storage + 'static>(
    cx: &Ctx<S>,
    q: &Path,
    key: &Key,
    mark: &str,
    check_object: bool,
) -> Result<bool> {
    let mut empty = !has_children_held(cx, q).await?;
    if empty && check_object {
        let now = crate::expiry::now_secs();
        empty = cx
            .io()
            .get_item(&cx.inner.layout.object_key(q), true)
            .await?
            .is_none_or(|r| cx.inner.config.fenced_puts && cx.inner.layout.is_absent(&r, now));
    }
    let ours = cx.inner.layout.marked_by(mark);
    if empty && cx.inner.config.fenced_puts {
        // Fenced puts: the row goes with a fence at the object's key, conditional on no
        // object there (one that a PutItem trusting an earlier look at the row wrote after
        // the mark keeps the row).
        // A transaction conflict (another transaction on either row in flight) is tried
        // again under the retry policy: both conditions are evaluated afresh.
        let tx = vec![
            TransactAction::Delete {
                key: key.clone(),
                condition: ours.clone(),
            },
            guard::remove_object(cx, q, guard::no_object(cx)),
        ];
        let sent = cx.transact_resending_conflicts(tx).await;
        let canceled = match sent {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                let reasons = e.cancellation_reasons();
                if reasons.first().is_some_and(|r| r.is_condition_failed()) {
                    // The mark expired and someone else took it over: their job now.
                    return Ok(false);
                }
                e
            }
            Err(e) => return Err(e),
        };
        // An object there, or conflicts to the end: the row stays, unmarked (a later
        // prune, or `repair`, removes it if it stays empty).
        tracing::debug!(error = %canceled, "removal kept the listing row");
        return match cx.io().put_item(key.clone().into_item(), ours).await {
            Ok(()) => Ok(false),
            Err(e) if e.kind() == ErrorKind::ConditionFailed => Ok(false),
            Err(e) => Err(e),
        };
    }
    let result = if empty {
        cx.io().delete_item(key, ours).await
    } else {
        cx.io().put_item(key.clone().into_item(), ours).await
    };
    match result {
        Ok(()) => Ok(empty),
        // The mark expired and someone else took it over: their job now.
        Err(e) if e.kind() == ErrorKind::ConditionFailed => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes L(q) if q has neither object nor children. Returns whether it is now absent
/// (removed, or already gone), in which case the parent is the next to look at.
///
/// A locked row is left to its operation, a row with a live removal mark to its remover
/// (`false`); an expired mark is taken over.
pub(crate) async fn remove_if_empty<S: Storage + 'static>(cx: &Ctx<S>, q: &Path) -> Result<bool> {
    // A cheap look first: most parents still have other children.
    if has_children(cx, q).await? {
        return Ok(false);
    }
    let key = cx.inner.layout.listing_key(q);
    cx.inner.known.remove(&key);
    let mut seen: Option<Item> = Some(key.clone().into_item());
    for () in Backoff::new(cx.inner.config.retry).tries() {
        let condition = match plan::prune(&cx.inner.layout, seen.as_ref(), guard::mark_expired) {
            // Already absent (a failed delete got this far): keep pruning upwards.
            Prune::Absent => return Ok(true),
            Prune::Leave => return Ok(false),
            Prune::Mark(condition) => condition,
        };
        let mark = guard::new_mark(cx);
        match cx
            .io()
            .put_item(guard::marked_row(cx, &key, &mark), condition)
            .await
        {
            Ok(()) => {
                return match finish_removal(cx, q, &key, &mark, true).await {
                    Err(e) => guard::abandon_removal(cx, &key, &mark, e).await,
                    ok => ok,
                };
            }
            Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                seen = cx.io().get_item(&key, true).await?;
            }
            Err(e) => return guard::abandon_removal(cx, &key, &mark, e).await,
        }
    }
    Ok(false)
}

/// Deletes `path`'s object and listing row only if it has no children, atomically
/// against puts under it: L(P) is marked first (new children wait), then the children are
/// counted with a consistent read, then both rows go in one transaction conditional on the
/// mark. Children found: the mark is taken off and the result is
/// [`ErrorKind::HasChildren`].
pub(crate) async fn delete_leaf<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    let key = cx.inner.layout.listing_key(path);
    cx.inner.known.remove(&key);
    cx.inner.known.remove(&cx.inner.layout.object_key(path));
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        let Some(row) = cx.io().get_item(&key, true).await? else {
            // No listing row: no children and (by the invariants) no object, unless one
            // that a foreign writer left unlisted, deleted while the row stays missing.
            if delete_unlisted(cx, path, Condition::Always).await? {
                return prune_above(cx, path).await;
            }
            another_try(&mut backoff, path)?;
            continue;
        };
        if row.contains(cx.inner.layout.moving_attr()) {
            return Err(guard::locked_error(path));
        }
        let mark = guard::new_mark(cx);
        match cx
            .io()
            .put_item(guard::marked_row(cx, &key, &mark), guard::markable(cx))
            .await
        {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::ConditionFailed => continue,
            Err(e) => return guard::abandon_removal(cx, &key, &mark, e).await,
        }
        let ours = cx.inner.layout.marked_by(&mark);
        let has_children = match has_children_held(cx, path).await {
            Ok(yes) => yes,
            Err(e) => return guard::abandon_removal(cx, &key, &mark, e).await,
        };
        if has_children {
            let e = Error::new(ErrorKind::HasChildren, format!("{path} still has children"));
            return guard::abandon_removal(cx, &key, &mark, e).await;
        }
        let tx = vec![
            guard::remove_object(cx, path, Condition::Always),
            TransactAction::Delete {
                key: key.clone(),
                condition: ours,
            },
        ];
        match guard::transact(cx, tx, false).await {
            Ok(Attempt::Done) => return prune_above(cx, path).await,
            Ok(_) => {}
            Err(e) => return guard::abandon_removal(cx, &key, &mark, e).await,
        }
        if !backoff.retry().await {
            return Err(kept_changing(path));
        }
    }
}

/// Deletes `path`'s object (if `object` holds) in one transaction with a check that its
/// listing row is absent. `Ok(false)`, nothing deleted, if the row exists: a repair
/// re-created it for an object a foreign writer left unlisted, and deleting the object
/// alone would leave the row naming nothing; the caller removes it by the full protocol.
pub(crate) async fn delete_unlisted<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    object: Condition,
) -> Result<bool> {
    if cx.inner.config.fenced_puts {
        return fence_unlisted(cx, path, object).await;
    }
    let conditional = !object.is_always();
    let tx = vec![
        TransactAction::ConditionCheck {
            key: cx.inner.layout.listing_key(path),
            condition: Condition::NotExists,
        },
        guard::remove_object(cx, path, object),
    ];
    Ok(matches!(
        guard::transact(cx, tx, conditional).await?,
        Attempt::Done
    ))
}

/// [`delete_unlisted`](delete_unlisted) with fenced puts: a real object there is
/// replaced by a fence; nothing or a fence is left as it is (a fence must stay: it may be
/// what keeps a PutItem trusting an earlier look at the listing row out).
async fn fence_unlisted<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    object: Condition,
) -> Result<bool> {
    let layout = &cx.inner.layout;
    let tx = vec![
        TransactAction::ConditionCheck {
            key: layout.listing_key(path),
            condition: Condition::NotExists,
        },
        TransactAction::Put {
            item: layout.fence_row(path, guard::fence_expiry(), None),
            condition: all(layout.real_object().into_iter().chain([object.clone()])),
        },
    ];
    let e = match cx.io().transact_write(tx).await {
        Ok(()) => return Ok(true),
        Err(e) if e.kind() == ErrorKind::TransactionCanceled => e,
        Err(e) => return Err(e),
    };
    let reasons = e.cancellation_reasons();
    if reasons.first().is_some_and(|r| r.is_condition_failed()) {
        // Listed meanwhile.
        return Ok(false);
    }
    if !reasons.get(1).is_some_and(|r| r.is_condition_failed()) {
        // A conflict: look again.
        return Ok(false);
    }
    let row = cx.io().get_item(&layout.object_key(path), true).await?;
    let nothing = row.as_ref().is_none_or(|r| layout.is_fence(r));
    if nothing && object.eval(None) {
        Ok(true)
    } else if nothing || !object.is_always() {
        Err(Error::new(
            ErrorKind::ConditionFailed,
            "the object's condition does not hold",
        )
        .with_source(e))
    } else {
        Ok(false)
    }
}

/// Whether `q` has a child, asked by a protocol that has marked or locked `L(q)`: a sharded
/// directory's guards are dropped first, so that no child can be added after the Queries
/// without meeting the mark or lock (see "Sharded directories").
pub(crate) async fn has_children_held<S: Storage + 'static>(cx: &Ctx<S>, q: &Path) -> Result<bool> {
    cx.drop_guards(q).await?;
    has_children(cx, q).await
}

/// Whether `q` has a child, read only (a first look, or a check's confirmation).
pub(crate) async fn has_children<S: Storage + 'static>(cx: &Ctx<S>, q: &Path) -> Result<bool> {
    // One Query per partition of the listing (a sharded directory's shards at once).
    let asks = cx
        .inner
        .layout
        .listing_hashes(q.components())
        .into_iter()
        .map(|hash| async move {
            let query = Query::new(hash).with_limit(1).consistent(true);
            let page = cx.io().query_page(&query, None).await?;
            Ok::<_, Error>(!page.items.is_empty())
        });
    Ok(futures::future::try_join_all(asks)
        .await?
        .into_iter()
        .any(|has| has))
}

/// Counts one more attempt at `path`, or gives up ([`ErrorKind::Conflict`]) when the retry
/// budget is spent.
fn another_try(backoff: &mut Backoff, path: &Path) -> Result<()> {
    if backoff.spend() {
        Ok(())
    } else {
        Err(kept_changing(path))
    }
}

fn kept_changing(path: &Path) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("{path} kept changing concurrently"),
    )
}
