//! The removal protocol (see [`consistency`](crate::consistency)): deleting an object, removing
//! listing rows that name nothing (mark, check, delete on the mark), pruning emptied ancestors.
//!
#![doc = include_str!("removal.md")]

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{Condition, Key, Query, Storage, TransactAction};

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
        let path = self.enter(path)?;
        let span = tracing::debug_span!("dynatree.delete", path = %path);
        tracing::Instrument::instrument(
            async {
                self.inner.layout.check_object_path(&path)?;
                self.refuse_root(&path, "delete")?;
                // A source of denormalized fields: its last version is kept as its tombstone
                // (the delete is conditional on deleting that version), and its optional copies
                // below are cleared.
                let guard = self.before_source_write_at(&path).await?;
                let deleted = if self.source_at(&path) {
                    self.delete_source(&path).await
                } else {
                    self.delete_checked(&path).await
                };
                match deleted {
                    Ok(()) => self.after_source_write(guard, &path, None).await,
                    Err(e) => {
                        self.source_write_failed(guard, &e).await;
                        Err(e)
                    }
                }
            },
            span,
        )
        .await
    }

    /// Deletes the source object at `path` after recording its version as its tombstone,
    /// conditional on the object still holding that version (a write in between: again).
    async fn delete_source(&self, path: &Path) -> Result<()> {
        let mut backoff = Backoff::new(self.inner.config.retry);
        loop {
            // Its versions as read (its own and its chained copies'), pinned by the delete;
            // the latest is the tombstone.
            let row = self.pin_versions(path).await?;
            let unchanged = self.same_versions(path, &row);
            match self.delete_checked_if(path, unchanged).await {
                Err(e) if e.is_condition_failed() && backoff.spend() => {}
                other => return other,
            }
        }
    }

    pub(crate) async fn delete_checked(&self, path: &Path) -> Result<()> {
        self.delete_checked_if(path, Condition::Always).await
    }

    /// [`delete_checked`](Tree::delete_checked), with a condition on the object row
    /// ([`ErrorKind::ConditionFailed`] and nothing deleted if it does not hold).
    pub(crate) async fn delete_checked_if(&self, path: &Path, object: Condition) -> Result<()> {
        let conditional = !object.is_always();
        let own = self.inner.layout.listing_key(path);
        self.inner.known.remove(&own);
        self.inner.known.remove(&self.inner.layout.object_key(path));
        let mut backoff = Backoff::new(self.inner.config.retry);
        // What we believe L(P) is; refined after a cancelled attempt.
        let mut seen: Option<Item> = Some(own.clone().into_item());
        // Fenced puts: a fence goes where a row is (an object, or a fence renewed); where
        // nothing is, the mark is sent with a check that nothing is there, so that a node that
        // never held an object and keeps its children gets no fence (if its listing row goes,
        // the end of the removal fences it). Which of the two is tried is flipped when the
        // object's row turns out otherwise.
        let fence_rows_only = self.inner.config.fenced_puts && !conditional;
        let mut nothing_there = false;
        let mut flipped = false;
        let marked = loop {
            let Some(row) = seen.as_ref() else {
                // L(P) is missing: so is O(P) (or a foreign writer left it alone): delete it,
                // while L(P) stays missing.
                if self.delete_unlisted(path, object.clone()).await? {
                    break None;
                }
                // Listed meanwhile (a repair re-created its listing row): remove it as any.
                another_try(&mut backoff, path)?;
                seen = self.io().get_item(&own, true).await?;
                continue;
            };
            if row.contains(self.inner.layout.moving_attr()) {
                return Err(self.locked_error(path));
            }
            let mark = self.new_mark();
            let object_action = if !fence_rows_only {
                self.remove_object(path, object.clone())
            } else if nothing_there {
                TransactAction::ConditionCheck {
                    key: self.inner.layout.object_key(path),
                    condition: Condition::NotExists,
                }
            } else {
                self.remove_object(path, Condition::Exists)
            };
            // The object's delete last: its failed condition is reported as the caller's.
            let tx = vec![
                TransactAction::Put {
                    item: self.marked_row(&own, &mark),
                    condition: self.markable(),
                },
                object_action,
            ];
            match self.transact(tx, conditional || fence_rows_only).await {
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
                Err(e) => return self.abandon_removal(&own, &mark, e).await,
            }
            another_try(&mut backoff, path)?;
            seen = self.io().get_item(&own, true).await?;
        };
        // O(P) is gone and puts at P wait; L(P) goes if P has no children.
        if let Some(mark) = marked {
            match self.finish_removal(path, &own, &mark, false).await {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => return self.abandon_removal(&own, &mark, e).await,
            }
        }
        // Prune ancestors that now name nothing. This also runs when L(P) was already gone, so
        // repeating a delete that failed while pruning finishes the pruning.
        self.prune_above(path).await
    }

    /// Removes the listing rows of `path`'s ancestors that name nothing, deepest first,
    /// stopping at the first one still needed (or being removed by someone else).
    pub(crate) async fn prune_above(&self, path: &Path) -> Result<()> {
        let mut q = path.parent();
        // Never the root's listing row: a whole tree's root has none, a scope's belongs to
        // the parent tree (see `scope`).
        while let Some(current) = q.filter(|p| p.len() > self.floor()) {
            if !self.remove_if_empty(&current).await? {
                break;
            }
            q = current.parent();
        }
        Ok(())
    }

    /// With `key` = L(q) marked by `mark`: deletes it if q has no children (and, when
    /// `check_object`, no object), else unmarks it. Returns whether it was deleted.
    pub(crate) async fn finish_removal(
        &self,
        q: &Path,
        key: &Key,
        mark: &str,
        check_object: bool,
    ) -> Result<bool> {
        let mut empty = !self.has_children(q).await?;
        if empty && check_object {
            let now = crate::expiry::now_secs();
            empty = self
                .io()
                .get_item(&self.inner.layout.object_key(q), true)
                .await?
                .is_none_or(|r| {
                    self.inner.config.fenced_puts && self.inner.layout.is_absent(&r, now)
                });
        }
        let ours = Condition::equals(self.inner.layout.deleting_attr(), Value::S(mark.to_owned()));
        if empty && self.inner.config.fenced_puts {
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
                self.remove_object(q, self.no_object()),
            ];
            let io = self.io();
            let sent = self
                .inner
                .config
                .retry
                .retry_if(super::conflict_only, || io.transact_write(tx.clone()))
                .await;
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
            return match self.io().put_item(key.clone().into_item(), ours).await {
                Ok(()) => Ok(false),
                Err(e) if e.kind() == ErrorKind::ConditionFailed => Ok(false),
                Err(e) => Err(e),
            };
        }
        let result = if empty {
            self.io().delete_item(key, ours).await
        } else {
            self.io().put_item(key.clone().into_item(), ours).await
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
    pub(crate) async fn remove_if_empty(&self, q: &Path) -> Result<bool> {
        // A cheap look first: most parents still have other children.
        if self.has_children(q).await? {
            return Ok(false);
        }
        let key = self.inner.layout.listing_key(q);
        self.inner.known.remove(&key);
        let mut seen: Option<Item> = Some(key.clone().into_item());
        for _ in 0..self.inner.config.retry.max_attempts() {
            let Some(row) = seen.as_ref() else {
                // Already absent (a failed delete got this far): keep pruning upwards.
                return Ok(true);
            };
            if row.contains(self.inner.layout.moving_attr()) {
                return Ok(false);
            }
            // A live removal mark belongs to a removal (or a re-parenting) under way: it is
            // theirs to finish. An expired one is taken over, conditional on exactly it.
            let condition = match row.get_s(self.inner.layout.deleting_attr()) {
                Some(old) if !self.mark_expired(old) => return Ok(false),
                Some(old) => Condition::And(vec![
                    Condition::attr_not_exists(self.inner.layout.moving_attr()),
                    Condition::equals(self.inner.layout.deleting_attr(), Value::S(old.to_owned())),
                ]),
                None => Condition::And(vec![
                    Condition::Exists,
                    Condition::attr_not_exists(self.inner.layout.moving_attr()),
                    Condition::attr_not_exists(self.inner.layout.deleting_attr()),
                ]),
            };
            let mark = self.new_mark();
            match self
                .io()
                .put_item(self.marked_row(&key, &mark), condition)
                .await
            {
                Ok(()) => {
                    return match self.finish_removal(q, &key, &mark, true).await {
                        Err(e) => self.abandon_removal(&key, &mark, e).await,
                        ok => ok,
                    };
                }
                Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                    seen = self.io().get_item(&key, true).await?;
                }
                Err(e) => return self.abandon_removal(&key, &mark, e).await,
            }
        }
        Ok(false)
    }

    /// Deletes `path`'s object and listing row only if it has no children, atomically
    /// against puts under it: L(P) is marked first (new children wait), then the children are
    /// counted with a consistent read, then both rows go in one transaction conditional on the
    /// mark. Children found: the mark is taken off and the result is
    /// [`ErrorKind::HasChildren`].
    pub(crate) async fn delete_leaf(&self, path: &Path) -> Result<()> {
        let key = self.inner.layout.listing_key(path);
        self.inner.known.remove(&key);
        self.inner.known.remove(&self.inner.layout.object_key(path));
        let mut backoff = Backoff::new(self.inner.config.retry);
        loop {
            let Some(row) = self.io().get_item(&key, true).await? else {
                // No listing row: no children and (by the invariants) no object, unless one
                // that a foreign writer left unlisted, deleted while the row stays missing.
                if self.delete_unlisted(path, Condition::Always).await? {
                    return self.prune_above(path).await;
                }
                another_try(&mut backoff, path)?;
                continue;
            };
            if row.contains(self.inner.layout.moving_attr()) {
                return Err(self.locked_error(path));
            }
            let mark = self.new_mark();
            match self
                .io()
                .put_item(self.marked_row(&key, &mark), self.markable())
                .await
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::ConditionFailed => continue,
                Err(e) => return self.abandon_removal(&key, &mark, e).await,
            }
            let ours = Condition::equals(self.inner.layout.deleting_attr(), Value::S(mark.clone()));
            let has_children = match self.has_children(path).await {
                Ok(yes) => yes,
                Err(e) => return self.abandon_removal(&key, &mark, e).await,
            };
            if has_children {
                let e = Error::new(ErrorKind::HasChildren, format!("{path} still has children"));
                return self.abandon_removal(&key, &mark, e).await;
            }
            let tx = vec![
                self.remove_object(path, Condition::Always),
                TransactAction::Delete {
                    key: key.clone(),
                    condition: ours,
                },
            ];
            match self.transact(tx, false).await {
                Ok(Attempt::Done) => return self.prune_above(path).await,
                Ok(_) => {}
                Err(e) => return self.abandon_removal(&key, &mark, e).await,
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
    pub(crate) async fn delete_unlisted(&self, path: &Path, object: Condition) -> Result<bool> {
        if self.inner.config.fenced_puts {
            return self.fence_unlisted(path, object).await;
        }
        let conditional = !object.is_always();
        let tx = vec![
            TransactAction::ConditionCheck {
                key: self.inner.layout.listing_key(path),
                condition: Condition::NotExists,
            },
            self.remove_object(path, object),
        ];
        Ok(matches!(
            self.transact(tx, conditional).await?,
            Attempt::Done
        ))
    }

    /// [`delete_unlisted`](Tree::delete_unlisted) with fenced puts: a real object there is
    /// replaced by a fence; nothing or a fence is left as it is (a fence must stay: it may be
    /// what keeps a PutItem trusting an earlier look at the listing row out).
    async fn fence_unlisted(&self, path: &Path, object: Condition) -> Result<bool> {
        let layout = &self.inner.layout;
        let tx = vec![
            TransactAction::ConditionCheck {
                key: layout.listing_key(path),
                condition: Condition::NotExists,
            },
            TransactAction::Put {
                item: layout.fence_row(path, self.fence_expiry(), None),
                condition: Condition::And(vec![
                    Condition::Exists,
                    Condition::attr_not_exists(layout.fence_attr()),
                    object.clone(),
                ]),
            },
        ];
        let e = match self.io().transact_write(tx).await {
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
        let row = self.io().get_item(&layout.object_key(path), true).await?;
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

    /// Whether `q` has a child (one consistent Query of one item).
    pub(crate) async fn has_children_consistent(&self, q: &Path) -> Result<bool> {
        self.has_children(q).await
    }

    pub(crate) async fn has_children(&self, q: &Path) -> Result<bool> {
        let query = Query::new(self.inner.layout.listing_hash(q.components()))
            .with_limit(1)
            .consistent(true);
        let page = self.io().query_page(&query, None).await?;
        Ok(!page.items.is_empty())
    }
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
