#![doc = include_str!("write.md")]

use crate::batch::{TRANSACT_MAX, get_all};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::path::Path;
use crate::storage::{Condition, Key, Query, Storage, TransactAction};

use super::Tree;
use super::clock::{after_ms, now_ms};

/// Outcome of one attempt of a write.
pub(super) enum Attempt {
    Done,
    /// Lost a race (a condition or a concurrent transaction): retry, within the budget.
    Retry,
    /// A listing row on the path carries a live removal mark: wait (outside the retry budget;
    /// the mark's lease bounds the wait) and look again.
    Wait,
    /// An expired mark was taken off: look again at once (no failed attempt).
    Again,
}

impl<S: Storage + 'static> Tree<S> {
    pub(super) fn unmarked_exists(&self) -> Condition {
        Condition::And(vec![
            Condition::Exists,
            Condition::attr_not_exists(self.inner.layout.deleting_attr()),
            Condition::attr_not_exists(self.inner.layout.moving_attr()),
        ])
    }

    /// Exists, and neither marked for removal nor locked.
    pub(super) fn free_row(&self) -> Condition {
        self.unmarked_exists()
    }

    pub(super) fn not_marked(&self) -> Condition {
        Condition::And(vec![
            Condition::attr_not_exists(self.inner.layout.deleting_attr()),
            Condition::attr_not_exists(self.inner.layout.moving_attr()),
        ])
    }

    pub(super) fn locked_error(&self, path: &Path) -> Error {
        Error::new(
            ErrorKind::Locked,
            format!(
                "{path} is inside a subtree that another operation holds (a move, copy or subtree deletion)"
            ),
        )
    }

    /// Writes the object (or link) row `row` at `path` keeping the invariants. `condition` is
    /// evaluated against the current object row, atomically with the write; when it does not
    /// hold the result is [`ErrorKind::ConditionFailed`] and nothing is written.
    pub(crate) async fn write_object(
        &self,
        path: &Path,
        row: Item,
        condition: &Condition,
    ) -> Result<()> {
        let policy = self.inner.config.retry;
        let mut retry = 0;
        let mut waited = 0;
        // First try the plan the cache suggests; after a failed check, read the real state.
        let mut read_state = false;
        loop {
            let outcome = if read_state {
                self.put_with_state(path, &row, condition).await?
            } else {
                self.put_optimistic(path, &row, condition).await?
            };
            match outcome {
                Attempt::Done => return Ok(()),
                Attempt::Retry if !read_state => read_state = true,
                Attempt::Again => read_state = true,
                Attempt::Wait => {
                    // A live removal: it either finishes quickly or its lease runs out, and
                    // then the mark is taken off. Neither is a failed attempt.
                    policy.sleep(waited.min(8)).await;
                    waited += 1;
                }
                Attempt::Retry => {
                    if retry + 1 >= policy.max_attempts() {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!("{path} kept being removed concurrently"),
                        ));
                    }
                    policy.sleep(retry).await;
                    retry += 1;
                }
            }
        }
    }

    /// One transaction planned from the cache alone.
    async fn put_optimistic(
        &self,
        path: &Path,
        row: &Item,
        condition: &Condition,
    ) -> Result<Attempt> {
        let own = self.inner.layout.listing_key(path);
        let parent_known = path.parent().filter(|p| !p.is_root()).is_some_and(|p| {
            self.inner
                .known
                .contains(&self.inner.layout.listing_key(&p))
        });
        let actions = if !self.inner.known.contains(&own) && parent_known {
            // A new name under a known parent: create L(P), check L(parent).
            let parent = path.parent().expect("checked above");
            vec![
                TransactAction::Put {
                    item: self.inner.layout.listing_row(path),
                    condition: self.not_marked(),
                },
                TransactAction::ConditionCheck {
                    key: self.inner.layout.listing_key(&parent),
                    condition: self.unmarked_exists(),
                },
                TransactAction::Put {
                    item: row.clone(),
                    condition: condition.clone(),
                },
            ]
        } else {
            // L(P) known, or nothing known: assume L(P) exists (the common case of an update
            // or a sibling of an earlier put); a failed check falls back to reading the state.
            vec![
                TransactAction::ConditionCheck {
                    key: own.clone(),
                    condition: self.unmarked_exists(),
                },
                TransactAction::Put {
                    item: row.clone(),
                    condition: condition.clone(),
                },
            ]
        };
        match self.transact(actions, !condition.is_always()).await? {
            Attempt::Done => {
                self.inner.known.insert_all(Some(own));
                Ok(Attempt::Done)
            }
            _ => {
                self.inner.known.remove(&own);
                if let Some(parent) = path.parent().filter(|p| !p.is_root()) {
                    self.inner
                        .known
                        .remove(&self.inner.layout.listing_key(&parent));
                }
                Ok(Attempt::Retry)
            }
        }
    }

    /// Reads the listing rows of every prefix, then writes exactly the missing ones.
    async fn put_with_state(
        &self,
        path: &Path,
        row: &Item,
        condition: &Condition,
    ) -> Result<Attempt> {
        let n = path.len();
        let keys: Vec<Key> = (1..=n)
            .map(|i| self.inner.layout.listing_key(&path.prefix(i)))
            .collect();
        let found = get_all(
            &self.inner.storage,
            keys.clone(),
            true,
            &self.inner.config.retry,
        )
        .await?;
        let mut existing: Vec<Option<Item>> = vec![None; n];
        for item in found {
            if let Some(i) = Key::from_item(&item).and_then(|k| keys.iter().position(|x| *x == k)) {
                existing[i] = Some(item);
            }
        }
        // A locked row: the subtree is moving, and this write is refused.
        if existing
            .iter()
            .flatten()
            .any(|r| r.contains(self.inner.layout.moving_attr()))
        {
            return Err(self.locked_error(path));
        }
        // A marked row is being removed: wait for it, or take an expired mark off.
        for (i, row) in existing.iter().enumerate() {
            if let Some(mark) = row
                .as_ref()
                .and_then(|r| r.get_s(self.inner.layout.deleting_attr()))
            {
                if self.mark_expired(mark) {
                    self.clear_mark(&keys[i], mark).await?;
                    return Ok(Attempt::Again);
                }
                return Ok(Attempt::Wait);
            }
        }
        let mut actions = Vec::with_capacity(n + 1);
        for i in 0..n {
            let exists = existing[i].is_some();
            let next_missing = i + 1 < n && existing[i + 1].is_none();
            if !exists {
                actions.push(TransactAction::Put {
                    item: keys[i].clone().into_item(),
                    condition: self.not_marked(),
                });
            } else if next_missing || i + 1 == n {
                actions.push(TransactAction::ConditionCheck {
                    key: keys[i].clone(),
                    condition: self.unmarked_exists(),
                });
            }
        }
        actions.push(TransactAction::Put {
            item: row.clone(),
            condition: condition.clone(),
        });
        // Chunk: each chunk after the first starts by checking the row before its first action.
        let mut start = 0;
        while start < actions.len() {
            let mut chunk = Vec::with_capacity(TRANSACT_MAX);
            if start > 0
                && let Some(prev) = actions[start - 1].key()
            {
                chunk.push(TransactAction::ConditionCheck {
                    key: prev,
                    condition: self.unmarked_exists(),
                });
            }
            let take = (TRANSACT_MAX - chunk.len()).min(actions.len() - start);
            chunk.extend(actions[start..start + take].iter().cloned());
            start += take;
            let last = start == actions.len();
            if !matches!(
                self.transact(chunk, last && !condition.is_always()).await?,
                Attempt::Done
            ) {
                return Ok(Attempt::Retry);
            }
        }
        self.inner.known.insert_all(keys);
        Ok(Attempt::Done)
    }

    /// Sends one transaction; a cancellation for a condition or a conflict means "retry". With
    /// `object_condition`, the last action is the object put with the caller's condition, and
    /// its failure is the caller's [`ErrorKind::ConditionFailed`], not a race to retry.
    pub(super) async fn transact(
        &self,
        actions: Vec<TransactAction>,
        object_condition: bool,
    ) -> Result<Attempt> {
        match self.io().transact_write(actions).await {
            Ok(()) => Ok(Attempt::Done),
            Err(e)
                if object_condition
                    && e.kind() == ErrorKind::TransactionCanceled
                    && e.cancellation_reasons()
                        .last()
                        .is_some_and(crate::CancellationReason::is_condition_failed) =>
            {
                Err(Error::new(
                    ErrorKind::ConditionFailed,
                    "the object's condition does not hold",
                )
                .with_source(e))
            }
            Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                let lost_race = e
                    .cancellation_reasons()
                    .iter()
                    .any(|r| r.is_condition_failed() || matches!(r.code(), "TransactionConflict"));
                if lost_race {
                    Ok(Attempt::Retry)
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    fn new_mark(&self) -> String {
        let expires = after_ms(self.inner.config.lease);
        format!("{expires}:{:016x}", fastrand::u64(..))
    }

    pub(super) fn mark_expired(&self, mark: &str) -> bool {
        mark.split(':')
            .next()
            .and_then(|t| t.parse::<u64>().ok())
            .is_none_or(|expires| expires < now_ms())
    }

    /// The condition under which a listing row may be marked by a remover: it exists and is
    /// not locked. Any removal mark already there is taken over: every final step of a removal
    /// is conditional on the remover's own mark, so the one replaced stops at its next step
    /// (the lease only tells writers how long to wait). So a repeated delete finishes what a
    /// failed one left marked.
    fn markable(&self) -> Condition {
        Condition::And(vec![
            Condition::Exists,
            Condition::attr_not_exists(self.inner.layout.moving_attr()),
        ])
    }

    /// After a failure part-way through a removal: takes our mark off again if it is still
    /// ours (best effort; if this fails too, the mark's lease runs out instead), and returns
    /// the original error.
    pub(super) async fn abandon_removal<T>(&self, key: &Key, mark: &str, e: Error) -> Result<T> {
        for _ in 0..2 {
            if self.clear_mark(key, mark).await.is_ok() {
                break;
            }
        }
        Err(e)
    }

    /// Takes an expired removal mark off `key` (conditional on exactly that mark).
    pub(super) async fn clear_expired_mark(&self, key: &Key, mark: &str) -> Result<()> {
        self.clear_mark(key, mark).await
    }

    pub(super) async fn clear_mark(&self, key: &Key, mark: &str) -> Result<()> {
        match self
            .io()
            .put_item(
                key.clone().into_item(),
                Condition::equals(self.inner.layout.deleting_attr(), Value::S(mark.to_owned())),
            )
            .await
        {
            Err(e) if e.kind() != ErrorKind::ConditionFailed => Err(e),
            _ => Ok(()),
        }
    }

    fn marked_row(&self, key: &Key, mark: &str) -> Item {
        let mut item = key.clone().into_item();
        item.insert(self.inner.layout.deleting_attr(), Value::S(mark.to_owned()));
        item
    }

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
                self.delete_checked(&path).await
            },
            span,
        )
        .await
    }

    async fn delete_checked(&self, path: &Path) -> Result<()> {
        let own = self.inner.layout.listing_key(path);
        self.inner.known.remove(&own);
        let policy = self.inner.config.retry;
        let mut retry = 0;
        // What we believe L(P) is; refined after a cancelled attempt.
        let mut seen: Option<Item> = Some(own.clone().into_item());
        let marked = loop {
            let Some(row) = seen.as_ref() else {
                // L(P) is missing: so is O(P) (or a foreign writer left it alone): delete it.
                self.io()
                    .delete_item(&self.inner.layout.object_key(path), Condition::Always)
                    .await?;
                break None;
            };
            if row.contains(self.inner.layout.moving_attr()) {
                return Err(self.locked_error(path));
            }
            let mark = self.new_mark();
            let tx = vec![
                TransactAction::Delete {
                    key: self.inner.layout.object_key(path),
                    condition: Condition::Always,
                },
                TransactAction::Put {
                    item: self.marked_row(&own, &mark),
                    condition: self.markable(),
                },
            ];
            match self.transact(tx, false).await {
                Ok(Attempt::Done) => break Some(mark),
                Ok(_) => {}
                // The mark may have been applied with its response lost: take it off again.
                Err(e) => return self.abandon_removal(&own, &mark, e).await,
            }
            if retry + 1 >= policy.max_attempts() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{path} kept changing concurrently"),
                ));
            }
            retry += 1;
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
    pub(super) async fn prune_above(&self, path: &Path) -> Result<()> {
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
    async fn finish_removal(
        &self,
        q: &Path,
        key: &Key,
        mark: &str,
        check_object: bool,
    ) -> Result<bool> {
        let mut empty = !self.has_children(q).await?;
        if empty && check_object {
            empty = self
                .io()
                .get_item(&self.inner.layout.object_key(q), true)
                .await?
                .is_none();
        }
        let ours = Condition::equals(self.inner.layout.deleting_attr(), Value::S(mark.to_owned()));
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
    pub(super) async fn remove_if_empty(&self, q: &Path) -> Result<bool> {
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
    pub(super) async fn delete_leaf(&self, path: &Path) -> Result<()> {
        let key = self.inner.layout.listing_key(path);
        self.inner.known.remove(&key);
        let policy = self.inner.config.retry;
        let mut retry = 0;
        loop {
            let Some(row) = self.io().get_item(&key, true).await? else {
                // No listing row: no children and (by the invariants) no object.
                self.io()
                    .delete_item(&self.inner.layout.object_key(path), Condition::Always)
                    .await?;
                return self.prune_above(path).await;
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
                TransactAction::Delete {
                    key: self.inner.layout.object_key(path),
                    condition: Condition::Always,
                },
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
            if retry + 1 >= policy.max_attempts() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{path} kept changing concurrently"),
                ));
            }
            policy.sleep(retry).await;
            retry += 1;
        }
    }

    /// Whether `q` has a child (one consistent Query of one item).
    pub(super) async fn has_children_consistent(&self, q: &Path) -> Result<bool> {
        self.has_children(q).await
    }

    async fn has_children(&self, q: &Path) -> Result<bool> {
        let query = Query::new(self.inner.layout.listing_hash(q.components()))
            .with_limit(1)
            .consistent(true);
        let page = self.io().query_page(&query, None).await?;
        Ok(!page.items.is_empty())
    }
}
