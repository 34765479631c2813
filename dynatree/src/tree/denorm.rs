//! Inline propagation of denormalized ancestor fields (issue 9, first step): see
//! [`Denormalized`](crate::Denormalized) and the consistency docs ("Denormalized fields").
//!
//! - A value of a *target* type (one with `#[dynatree(from = ..)]` fields) is filled from its
//!   ancestors' rows when it is written (put, create, update, put_if, put_all), and checked
//!   again after the write: a source changed in between is copied again.
//! - A write of a *source* value (a type some registered target copies from) stamps the row
//!   with a version (`SC sv`, a hybrid logical clock) and then copies the source fields to every
//!   target below it, each by a conditional UpdateItem that only moves a target's version
//!   forward (`SC dv.<attr>`): repeated or late copies never regress a target.

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;

use crate::denorm::{Denormalized, TypeInfo};
use crate::error::{ErrorKind, Result};
use crate::item::{Item, Value};
use crate::path::Path;
use crate::storage::{Comparison, Condition, Storage, UpdateAction};

use super::Tree;
use super::clock::now_ms;

/// The target types a tree knows: their templates and declarations.
#[derive(Debug, Default)]
pub(crate) struct Targets(RwLock<Vec<(&'static str, &'static [Denormalized])>>);

impl Targets {
    pub(super) fn add(&self, template: &'static str, defs: &'static [Denormalized]) {
        if defs.is_empty() {
            return;
        }
        let mut all = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !all.iter().any(|(t, _)| *t == template) {
            all.push((template, defs));
        }
    }

    fn snapshot(&self) -> Vec<(&'static str, &'static [Denormalized])> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// A version from one order: milliseconds since the epoch shifted by 16 bits, plus a counter
/// for writes in the same millisecond in this process.
pub(crate) fn next_version() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = now_ms() << 16;
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// A version after `stored` (a version read from a row), from this process's clock.
pub(crate) fn version_after(stored: u64) -> u64 {
    let v = next_version();
    v.max(stored.saturating_add(1))
}

/// Whether `path` matches `template` (same length, equal literals).
pub(crate) fn matches_template(template: &str, path: &Path) -> bool {
    let parts: Vec<&str> = template.split('/').collect();
    parts.len() == path.len()
        && parts
            .iter()
            .zip(path.components())
            .all(|(t, c)| t.starts_with('{') || *t == c)
}

fn template_len(template: &str) -> usize {
    template.split('/').count()
}

impl<S: Storage + 'static> Tree<S> {
    /// Makes the tree propagate to `T`'s denormalized fields (idempotent).
    pub(crate) fn register_targets(&self, ty: TypeInfo) {
        self.inner.targets.add(ty.template, ty.denormalized);
    }

    /// Whether values of the type with `template` are copied by a registered target.
    pub(crate) fn is_source(&self, template: &str) -> bool {
        // On every typed write: read under the lock, no copy.
        self.inner
            .targets
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(_, defs)| defs.iter().any(|d| d.source_template() == template))
    }

    /// Stamps a source row with a new version (before it is written).
    pub(crate) fn stamp_source(&self, ty: TypeInfo, row: &mut Item) {
        if self.is_source(ty.template) {
            row.insert(
                self.inner.layout.source_version_attr(),
                Value::N(next_version().to_string()),
            );
        }
    }

    /// The version a stamped source row carries.
    pub(crate) fn source_version(&self, row: &Item) -> Option<u64> {
        match row.get(&self.inner.layout.source_version_attr()) {
            Some(Value::N(n)) => n.parse().ok(),
            _ => None,
        }
    }

    /// `condition`, plus (for a stamped source row) that the stored row's version is older than
    /// `row`'s: versions of one source then increase in the order its writes commit, and a copy
    /// of a later write always carries a larger version than a copy of an earlier one.
    pub(crate) fn fenced_source(&self, row: &Item, condition: &Condition) -> Condition {
        let Some(v) = self.source_version(row) else {
            return condition.clone();
        };
        let newer = self.stored_version_below(v);
        match condition {
            Condition::Always => newer,
            c => Condition::And(vec![c.clone(), newer]),
        }
    }

    /// After a fenced write failed its condition: the stored row's version, if it is the
    /// fence that failed (the stored version is not older than `row`'s); `None` if it was the
    /// caller's condition.
    pub(crate) async fn fence_failed(&self, path: &Path, row: &Item) -> Result<Option<u64>> {
        let Some(ours) = self.source_version(row) else {
            return Ok(None);
        };
        let stored = self
            .io()
            .get_item(&self.inner.layout.object_key(path), true)
            .await?
            .and_then(|r| self.source_version(&r));
        Ok(stored.filter(|s| *s >= ours))
    }

    /// Stamps `row` again with a version after `stored`.
    pub(crate) fn restamp(&self, row: &mut Item, stored: u64) {
        row.insert(
            self.inner.layout.source_version_attr(),
            Value::N(version_after(stored).to_string()),
        );
    }

    /// For a patch of a source of type `ty`: the action stamping it with a version after
    /// `stored`, and the fence that keeps versions in commit order (as `fenced_source` for a
    /// put); `None` if `ty` is no source.
    pub(crate) fn source_fence(
        &self,
        ty: TypeInfo,
        stored: u64,
    ) -> Option<(UpdateAction, Condition)> {
        self.is_source(ty.template).then(|| {
            let v = version_after(stored);
            (
                UpdateAction::Set(
                    self.inner.layout.source_version_attr(),
                    Value::N(v.to_string()),
                ),
                self.stored_version_below(v),
            )
        })
    }

    /// The fence of a source write stamped `v`: the stored row has no version or an older one.
    fn stored_version_below(&self, v: u64) -> Condition {
        let attr = self.inner.layout.source_version_attr();
        Condition::Or(vec![
            Condition::attr_not_exists(attr.clone()),
            Condition::Compare(attr, Comparison::Lt, Value::N(v.to_string())),
        ])
    }

    /// After a patch of a source value of `T` at `path`: reads it (consistently) and
    /// propagates it.
    pub(crate) async fn propagate_patched(&self, ty: TypeInfo, path: &Path) -> Result<()> {
        if !self.is_source(ty.template) {
            return Ok(());
        }
        match self
            .io()
            .get_item(&self.inner.layout.object_key(path), true)
            .await?
        {
            Some(row) => self.propagate_from(ty, path, &row).await,
            None => Ok(()),
        }
    }

    /// Fills `T`'s denormalized fields of `row` (at `path`) from its ancestors' rows, with
    /// their versions. One BatchGetItem.
    pub(crate) async fn fill_targets(
        &self,
        ty: TypeInfo,
        path: &Path,
        row: &mut Item,
    ) -> Result<()> {
        if ty.denormalized.is_empty() {
            return Ok(());
        }
        let sources: Vec<Path> = ty
            .denormalized
            .iter()
            .map(|d| path.prefix(template_len(d.source_template())))
            .collect();
        let found = self.objects_of(sources.iter(), true).await?;
        for (d, source) in ty.denormalized.iter().zip(&sources) {
            let hash = self.inner.layout.object_key(source).hash;
            let src = found.get(&hash);
            self.copy_into(d, src, row);
        }
        Ok(())
    }

    /// Sets `d`'s target and version in `row` from the source row `src` (absent: cleared when
    /// optional, left as written otherwise).
    fn copy_into(&self, d: &Denormalized, src: Option<&Item>, row: &mut Item) {
        let layout = &self.inner.layout;
        let version = src
            .and_then(|s| s.get(&layout.source_version_attr()))
            .cloned()
            .unwrap_or(Value::N("0".to_owned()));
        match src.and_then(|s| s.get(d.source_attr())) {
            Some(v) => {
                row.insert(d.target(), v.clone());
            }
            None if d.optional() => {
                row.insert(d.target(), Value::Null);
            }
            None => return,
        }
        row.insert(layout.target_version_attr(d.target()), version);
    }

    /// After a write of a `T` at `path` that was filled: copies again every source whose
    /// version is now newer than the one written (a source changed while the value was being
    /// written and its propagation may have missed it).
    pub(crate) async fn recheck_targets(
        &self,
        ty: TypeInfo,
        path: &Path,
        written: &Item,
    ) -> Result<()> {
        if ty.denormalized.is_empty() {
            return Ok(());
        }
        let mut fresh = written.clone();
        self.fill_targets(ty, path, &mut fresh).await?;
        for d in ty.denormalized {
            let attr = self.inner.layout.target_version_attr(d.target());
            if fresh.get(&attr) != written.get(&attr) {
                self.copy_to_target(path, d, &fresh, self.is_source(ty.template))
                    .await?;
            }
        }
        Ok(())
    }

    /// One conditional UpdateItem: sets `d`'s target at `path` to what `filled` holds for it,
    /// if the object is there and its copy is older. `Ok` also when it is newer or gone.
    /// `chained`: the target is itself a source (a chain): it carries the version on as its own.
    async fn copy_to_target(
        &self,
        path: &Path,
        d: &Denormalized,
        filled: &Item,
        chained: bool,
    ) -> Result<()> {
        let layout = &self.inner.layout;
        let version_attr = layout.target_version_attr(d.target());
        let (Some(value), Some(version)) = (filled.get(d.target()), filled.get(&version_attr))
        else {
            return Ok(());
        };
        let condition = Condition::And(vec![
            Condition::Exists,
            Condition::attr_not_exists(layout.link_attr()),
            Condition::Or(vec![
                Condition::attr_not_exists(version_attr.clone()),
                Condition::Compare(version_attr.clone(), Comparison::Lt, version.clone()),
            ]),
        ]);
        let mut actions = vec![
            UpdateAction::Set(d.target().to_owned(), value.clone()),
            UpdateAction::Set(version_attr, version.clone()),
        ];
        if chained {
            actions.push(UpdateAction::Set(
                layout.source_version_attr(),
                version.clone(),
            ));
        }
        match self
            .io()
            .update_item(&layout.object_key(path), actions, condition)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::ConditionFailed => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every object strictly below `root` with its row, level by level, read consistently:
    /// one Query per directory page and one BatchGetItem per 100 names of a level.
    async fn consistent_subtree(&self, root: &Path) -> Result<Vec<(Path, Item)>> {
        let mut out = Vec::new();
        let mut current = vec![root.clone()];
        while !current.is_empty() {
            let mut next = Vec::new();
            for prefix in &current {
                let mut query = self.listing_query_for(prefix)?;
                query.consistent = true;
                let pages = crate::stream::query_pages(self.io(), query, None);
                futures::pin_mut!(pages);
                while let Some(page) = pages.try_next().await? {
                    for row in &page.items {
                        if let Some(name) = row.get_s(crate::storage::RANGE_KEY) {
                            next.push(prefix.child(name.to_owned())?);
                        }
                    }
                }
            }
            let objects = self.objects_of(next.iter(), true).await?;
            for p in &next {
                if let Some(row) = objects.get(&self.inner.layout.object_key(p).hash) {
                    out.push((p.clone(), row.clone()));
                }
            }
            current = next;
        }
        Ok(out)
    }

    /// After a write of the source value `row` of type `T` at `path`: copies its fields to every
    /// registered target below it, and on through chains (a target that is itself a source).
    pub(crate) async fn propagate_from(&self, ty: TypeInfo, path: &Path, row: &Item) -> Result<()> {
        if !self.is_source(ty.template) {
            return Ok(());
        }
        let targets = self.inner.targets.snapshot();
        // Below the source, level by level (so a chained target is copied from an already
        // updated intermediate), with consistent reads: a target whose write committed before
        // this walk is seen.
        let below = self.consistent_subtree(path).await?;
        // The rows as they are after our copies: the source, then each updated target.
        let mut current: Vec<(Path, Item)> = vec![(path.clone(), row.clone())];
        for (p, mut item) in below {
            let mut changed = false;
            for (template, defs) in &targets {
                if !matches_template(template, &p) {
                    continue;
                }
                let chained = self.is_source(template);
                for d in defs.iter() {
                    let n = template_len(d.source_template());
                    let Some((_, src)) = current
                        .iter()
                        .rev()
                        .find(|(q, _)| q.len() == n && *q == p.prefix(n))
                    else {
                        continue;
                    };
                    let mut filled = item.clone();
                    self.copy_into(d, Some(src), &mut filled);
                    self.copy_to_target(&p, d, &filled, chained).await?;
                    item = filled;
                    changed = true;
                }
            }
            if changed {
                // Chains copy the target's new value, under the version of its source.
                if let Some(v) = row.get(&self.inner.layout.source_version_attr()) {
                    item.insert(self.inner.layout.source_version_attr(), v.clone());
                }
                current.push((p, item));
            }
        }
        Ok(())
    }
}
