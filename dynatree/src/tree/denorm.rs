//! Inline propagation of denormalized ancestor fields: see
//! [`Denormalized`](crate::denorm::Denormalized) and the consistency docs ("Denormalized fields").
//!
//! - A value of a *target* type (one with `#[dynatree(from = ..)]` fields) is filled from its
//!   ancestors' rows when it is written (put, create, update, put_if, put_all), and checked
//!   again after the write: a source changed in between is copied again.
//! - A write of a *source* value (a type some registered target copies from) stamps the row
//!   with a version (`SC sv`, a hybrid logical clock) and then copies the source fields to every
//!   target below it, each by a conditional UpdateItem that only moves a target's version
//!   forward (`SC dv.<attr>`): repeated or late copies never regress a target.
//!
#![doc = include_str!("denorm.md")]

use crate::layout::{all, below, both, unchanged, unchanged_since, versions_below};
use crate::tree::{Ctx, intent, read, write};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;

use crate::denorm::{Denormalized, TypeInfo};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{Comparison, Condition, Storage, TransactAction, UpdateAction};

use super::clock::now_ms;
use super::intent::Guard;

/// A level-by-level walk below a path (see [`Tree::walk_below`]).
struct Walk {
    deepest: usize,
    level: Vec<Path>,
}

/// What a conditional copy did.
enum Copied {
    /// Written; for a target that is a source itself, its new version.
    Applied(Option<Value>),
    /// Not written: the stored copy is as new or newer, or the object is gone.
    Refused,
}

/// The target types a tree knows: their templates and declarations.
#[derive(Debug, Default)]
pub(crate) struct Targets(RwLock<Vec<(&'static str, &'static [Denormalized])>>);

impl Targets {
    pub(crate) fn add(&self, template: &'static str, defs: &'static [Denormalized]) {
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

    /// Whether a registered target type (its template and declarations) satisfies `f`, read
    /// under the lock without copying (this runs on every typed write).
    fn any(&self, f: impl Fn(&str, &[Denormalized]) -> bool) -> bool {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(t, defs)| f(t, defs))
    }

    pub(crate) fn snapshot(&self) -> Vec<(&'static str, &'static [Denormalized])> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

std::thread_local! {
    /// A scripted version clock for this thread (the interleaving simulator's, which replays
    /// schedules exactly): the last version given, counted up from a fixed base.
    static SCRIPTED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Makes the versions of this thread a counter from `base` (`None`: the clock again). For the
/// interleaving simulator, whose schedules must replay exactly.
pub(crate) fn script_versions(base: Option<u64>) {
    SCRIPTED.with(|c| c.set(base));
}

/// A version from one order: milliseconds since the epoch shifted by 16 bits, plus a counter
/// for writes in the same millisecond in this process.
pub(crate) fn next_version() -> u64 {
    if let Some(last) = SCRIPTED.with(std::cell::Cell::get) {
        let next = last + 1;
        SCRIPTED.with(|c| c.set(Some(next)));
        return next;
    }
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

/// `attr` absent, or a number below `v`.
fn version_below(attr: String, v: u64) -> Condition {
    below(attr, Comparison::Lt, Value::N(v.to_string()))
}

/// `condition` and `fence`.
fn with_fence(condition: &Condition, fence: Condition) -> Condition {
    both(condition, fence)
}

/// A number attribute as a version (0 when absent or not a number).
fn number(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::N(n)) => n.parse().unwrap_or(0),
        _ => 0,
    }
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

/// Makes the tree propagate to `T`'s denormalized fields (idempotent).
pub(crate) fn register_targets<S: Storage + 'static>(cx: &Ctx<S>, ty: TypeInfo) {
    cx.inner.targets.add(ty.template, ty.denormalized);
}

/// Whether values of the type with `template` are copied by a registered target.
pub(crate) fn is_source<S: Storage + 'static>(cx: &Ctx<S>, template: &str) -> bool {
    // On every typed write: read under the lock, no copy.
    cx.inner
        .targets
        .any(|_, defs| defs.iter().any(|d| d.source_template() == template))
}

/// Whether `attr` of the type with `template` is itself a denormalized copy.
fn is_copy_field<S: Storage + 'static>(cx: &Ctx<S>, template: &str, attr: &str) -> bool {
    cx.inner
        .targets
        .any(|t, defs| t == template && defs.iter().any(|d| d.target() == attr))
}

/// Whether the copy `attr` of the object at `path` is copied further by a registered
/// target (a chain).
fn feeds_chain<S: Storage + 'static>(cx: &Ctx<S>, path: &Path, attr: &str) -> bool {
    cx.inner.targets.any(|_, defs| {
        defs.iter()
            .any(|d| d.source_attr() == attr && matches_template(d.source_template(), path))
    })
}

/// Whether any target type is registered.
pub(crate) fn knows_targets<S: Storage + 'static>(cx: &Ctx<S>) -> bool {
    cx.inner.targets.any(|_, _| true)
}

/// Whether the object at `path` is a source of a registered target (by the templates).
pub(crate) fn source_at<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> bool {
    cx.inner.targets.any(|_, defs| {
        defs.iter()
            .any(|d| matches_template(d.source_template(), path))
    })
}

/// The registered target types whose template `path` matches.
pub(crate) fn target_types_at<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Vec<TypeInfo> {
    cx.inner
        .targets
        .snapshot()
        .into_iter()
        .filter(|(t, _)| matches_template(t, path))
        .map(|(template, denormalized)| TypeInfo {
            template,
            denormalized,
        })
        .collect()
}

/// The transaction's actions `ops` with the sources among them (indexes `sources`)
/// stamped with a version after `floors[i]` and fenced (the stored version is older), and
/// the stamps by index.
pub(crate) fn stamp_sources<S: Storage + 'static>(
    cx: &Ctx<S>,
    ops: &[super::TxOp],
    sources: &[usize],
    floors: &[u64],
) -> (Vec<super::TxOp>, Vec<u64>) {
    let sv = cx.inner.layout.source_version_attr();
    let mut stamps = vec![0; ops.len()];
    let mut out = ops.to_vec();
    for &i in sources {
        let v = version_after(floors.get(i).copied().unwrap_or(0));
        stamps[i] = v;
        let fence = stored_version_below(cx, ops[i].path(), v);
        match &mut out[i] {
            super::TxOp::Put { row, condition, .. } => {
                row.insert(sv.clone(), Value::N(v.to_string()));
                *condition = with_fence(condition, fence);
            }
            super::TxOp::Update {
                actions, condition, ..
            } => {
                actions.push(UpdateAction::Set(sv.clone(), Value::N(v.to_string())));
                *condition = with_fence(condition, fence);
            }
            _ => {}
        }
    }
    (out, stamps)
}

/// The condition on the tombstone of the source at `path` for a write of it stamped `v`:
/// no tombstone, or one whose clear version (`t + 1`) is below `v`.
pub(crate) fn tombstone_below<S: Storage + 'static>(cx: &Ctx<S>, v: u64) -> Condition {
    version_below(cx.inner.layout.source_version_attr(), v.saturating_sub(1))
}

/// The version stored in the object row at `path` (consistent read), if any: see
/// [`row_version`](row_version).
pub(crate) async fn stored_version<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Option<u64>> {
    Ok(cx
        .io()
        .get_item(&cx.inner.layout.object_key(path), true)
        .await?
        .and_then(|r| row_version(cx, path, &r)))
}

/// The attributes that version the source at `path`: its own `SC sv`, and `SC cv.<field>`
/// of each of its copies that is copied further (a chain).
pub(crate) fn version_attrs<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Vec<String> {
    let layout = &cx.inner.layout;
    let mut attrs = vec![layout.source_version_attr()];
    for (_, defs) in cx.inner.targets.snapshot() {
        for d in defs {
            if matches_template(d.source_template(), path)
                && is_copy_field(cx, d.source_template(), d.source_attr())
            {
                let cv = layout.change_version_attr(d.source_attr());
                if !attrs.contains(&cv) {
                    attrs.push(cv);
                }
            }
        }
    }
    attrs
}

/// The latest of a source row's versions (see [`version_attrs`](version_attrs)):
/// what its writes are fenced against and its tombstone records.
pub(crate) fn row_version<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
) -> Option<u64> {
    version_attrs(cx, path)
        .iter()
        .filter_map(|a| match row.get(a) {
            Some(Value::N(n)) => n.parse::<u64>().ok(),
            _ => None,
        })
        .max()
}

/// A condition that holds while the source row at `path` holds exactly the versions of
/// `row` (what was read): each version attribute equal, or absent.
pub(crate) fn same_versions<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
) -> Condition {
    unchanged_since(row, version_attrs(cx, path))
}

/// As [`before_source_write`](before_source_write), by the path (for the untyped
/// and transactional writes).
pub(crate) async fn before_source_write_at<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Option<Guard>> {
    if !inline(cx) || !source_at(cx, path) {
        return Ok(None);
    }
    intent::record_propagation(cx, path).await.map(Some)
}

/// Writes the object row `row` at `path` under `condition`; a stamped source row is
/// fenced by its version (see [`fenced_source`](fenced_source)) and stamped again
/// after the stored version when the fence fails.
pub(crate) async fn write_fenced<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &mut Item,
    condition: &Condition,
) -> Result<()> {
    // With no checks, `false` means the source kept being written behind its tombstone
    // until the retries ran out: nothing was written, which the caller must hear.
    if write_fenced_checked(cx, path, row, condition, &[]).await? {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Conflict,
            format!("{path} kept changing while it was written"),
        ))
    }
}

/// [`write_fenced`](write_fenced) with `checks` on the sources the row's copies were
/// filled from (see [`fill_checked`](fill_checked)): `Ok(false)`, nothing written,
/// if one of them changed meanwhile.
pub(crate) async fn write_fenced_checked<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &mut Item,
    condition: &Condition,
    checks: &[TransactAction],
) -> Result<bool> {
    let mut backoff = Backoff::new(cx.config_retry());
    loop {
        let fenced = fenced_source(cx, path, row, condition);
        // A source is written after its tombstone, if it has one: its last version `t`
        // when it was removed, its copies cleared under `t + 1`. Checked in the write's
        // transaction, so a removal committed after any read of the tombstone is seen.
        let mut all = checks.to_vec();
        let ours = source_version(cx, row);
        if let Some(v) = ours {
            all.push(TransactAction::ConditionCheck {
                key: cx.inner.layout.tombstone_key(path),
                condition: tombstone_below(cx, v),
            });
        }
        let e = match write::write_object_checked(cx, path, row.clone(), &fenced, &all).await {
            Ok(true) => return Ok(true),
            Ok(false) => {
                if let Some(v) = ours
                    && let Some(t) = tombstone(cx, path).await?
                    && t.saturating_add(1) >= v
                    && backoff.spend()
                {
                    restamp(cx, row, t.saturating_add(1));
                    continue;
                }
                return Ok(false);
            }
            Err(e) => e,
        };
        if e.is_condition_failed() && backoff.spend() {
            // A source written meanwhile with a later version: stamp after it, again.
            if let Some(stored) = fence_failed(cx, path, row).await? {
                restamp(cx, row, stored);
                continue;
            }
        }
        return Err(e);
    }
}

/// Stamps a source row with a new version (before it is written).
pub(crate) fn stamp_source<S: Storage + 'static>(cx: &Ctx<S>, ty: TypeInfo, row: &mut Item) {
    if is_source(cx, ty.template) {
        row.insert(
            cx.inner.layout.source_version_attr(),
            Value::N(next_version().to_string()),
        );
    }
}

/// The version a stamped source row carries.
pub(crate) fn source_version<S: Storage + 'static>(cx: &Ctx<S>, row: &Item) -> Option<u64> {
    match row.get(&cx.inner.layout.source_version_attr()) {
        Some(Value::N(n)) => n.parse().ok(),
        _ => None,
    }
}

/// `condition`, plus (for a stamped source row) that the stored row's version is older than
/// `row`'s: versions of one source then increase in the order its writes commit, and a copy
/// of a later write always carries a larger version than a copy of an earlier one.
pub(crate) fn fenced_source<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
    condition: &Condition,
) -> Condition {
    let Some(v) = source_version(cx, row) else {
        return condition.clone();
    };
    let newer = stored_version_below(cx, path, v);
    both(condition, newer)
}

/// After a fenced write failed its condition: the stored row's version, if it is the
/// fence that failed (the stored version is not older than `row`'s); `None` if it was the
/// caller's condition.
pub(crate) async fn fence_failed<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &Item,
) -> Result<Option<u64>> {
    let Some(ours) = source_version(cx, row) else {
        return Ok(None);
    };
    let stored = stored_version(cx, path).await?;
    Ok(stored.filter(|s| *s >= ours))
}

/// Stamps `row` again with a version after `stored`.
pub(crate) fn restamp<S: Storage + 'static>(cx: &Ctx<S>, row: &mut Item, stored: u64) {
    row.insert(
        cx.inner.layout.source_version_attr(),
        Value::N(version_after(stored).to_string()),
    );
}

/// For a patch of a source of type `ty`: the action stamping it with a version after
/// `stored`, and the fence that keeps versions in commit order (as `fenced_source` for a
/// put); `None` if `ty` is no source.
pub(crate) fn source_fence<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    stored: u64,
) -> Option<(UpdateAction, Condition)> {
    is_source(cx, ty.template).then(|| {
        let v = version_after(stored);
        (
            UpdateAction::Set(
                cx.inner.layout.source_version_attr(),
                Value::N(v.to_string()),
            ),
            stored_version_below(cx, path, v),
        )
    })
}

/// The fence of a source write stamped `v` at `path`: every version the stored row holds
/// (its own, and when each chained copy of it changed) is older.
fn stored_version_below<S: Storage + 'static>(cx: &Ctx<S>, path: &Path, v: u64) -> Condition {
    versions_below(version_attrs(cx, path), v)
}

/// Whether writes propagate themselves (not the stream).
fn inline<S: Storage + 'static>(cx: &Ctx<S>) -> bool {
    cx.inner.config.propagation == super::Propagation::Inline
}

/// Before a write of a value of type `ty` at `path`: for a source, under inline
/// propagation, the intent that gets its copies written even if this process stops
/// before they are ([`Tree::resume`] finishes it). One PutItem.
pub(crate) async fn before_source_write<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
) -> Result<Option<Guard>> {
    if !inline(cx) || !is_source(cx, ty.template) {
        return Ok(None);
    }
    intent::record_propagation(cx, path).await.map(Some)
}

/// After the write that `before_source_write` prepared (`row`: what it wrote, `None` if
/// the write failed or if it is to be read again): copies the source to every target
/// below it and drops the intent. Beyond the inline limit, a task in the background does
/// it and this returns at once.
pub(crate) async fn after_source_write<S: Storage + 'static>(
    cx: &Ctx<S>,
    guard: Option<Guard>,
    path: &Path,
    row: Option<&Item>,
) -> Result<()> {
    let Some(g) = guard else {
        return Ok(());
    };
    let row = match row {
        Some(r) => Some(r.clone()),
        None => current_source(cx, path).await?,
    };
    let limit = Some(cx.inner.config.inline_limit);
    let result = copy_below(cx, path, row.as_ref(), Some(&g), limit).await;
    match result {
        Ok(true) => intent::finish(cx, &g).await,
        Ok(false) => {
            // Beyond the inline limit: the rest in the background, under the intent (which
            // walks again from the source: the copies written so far are skipped).
            let tree = cx.clone();
            tokio::spawn(async move {
                // On failure the intent stays for `resume`.
                let _ = intent::run_owned(&tree, &g).await;
            });
            Ok(())
        }
        Err(e) => {
            // Give the intent up at once, so that `resume` need not wait for the lease.
            intent::release_intent(cx, &g).await;
            Err(e)
        }
    }
}

/// Before a write of targets of type `ty` at `paths` that re-reads its sources after the
/// write (`put_all`, transactions): under inline propagation, an intent on each distinct
/// source of theirs, so that a failure or crash between the write and the re-read is
/// finished by [`Tree::resume`] (which brings every copy below those sources up to date).
pub(crate) async fn record_refresh<'p, S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    paths: impl IntoIterator<Item = &'p Path>,
) -> Result<Vec<Guard>> {
    if !inline(cx) || ty.denormalized.is_empty() {
        return Ok(Vec::new());
    }
    let mut sources: Vec<Path> = Vec::new();
    for p in paths {
        for d in ty.denormalized {
            let s = p.prefix(template_len(d.source_template()));
            if !sources.contains(&s) {
                sources.push(s);
            }
        }
    }
    let mut guards = Vec::with_capacity(sources.len());
    for s in &sources {
        match intent::record_propagation(cx, s).await {
            Ok(g) => guards.push(g),
            Err(e) => {
                end_refresh(cx, guards, true).await;
                return Err(e);
            }
        }
    }
    Ok(guards)
}

/// After the write `record_refresh` prepared: its intents dropped (the copies were
/// re-read), or left to `resume` if it failed (`failed`: part of it may have been written).
pub(crate) async fn end_refresh<S: Storage + 'static>(
    cx: &Ctx<S>,
    guards: Vec<Guard>,
    failed: bool,
) {
    for g in guards {
        if failed {
            intent::release_intent(cx, &g).await;
        } else {
            // Best effort: a leftover intent only costs a `resume` a walk.
            let _ = intent::finish(cx, &g).await;
        }
    }
}

/// After the write that `before_source_write` prepared failed with `e`: a write that
/// surely did not happen (a failed condition, a refusal) drops the intent; one that may
/// have happened leaves it to [`Tree::resume`] (given up, so it need not wait).
pub(crate) async fn source_write_failed<S: Storage + 'static>(
    cx: &Ctx<S>,
    guard: Option<Guard>,
    e: &crate::Error,
) {
    let Some(g) = guard else {
        return;
    };
    let surely_not = e.is_condition_failed()
        || e.is_transaction_canceled()
        || e.is_invalid_input()
        || e.is_validation()
        || matches!(
            e.kind(),
            ErrorKind::NotFound | ErrorKind::Locked | ErrorKind::AlreadyExists
        );
    if surely_not {
        // Best effort: a leftover intent only costs a `resume` a needless walk.
        let _ = intent::finish(cx, &g).await;
    } else {
        intent::release_intent(cx, &g).await;
    }
}

/// The source row at `path` as it is now (consistent), `None` if no object is there.
pub(crate) async fn current_source<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Option<Item>> {
    Ok(cx
        .io()
        .get_item(&cx.inner.layout.object_key(path), true)
        .await?
        .filter(|r| !r.contains(cx.inner.layout.link_attr()) && !cx.inner.layout.is_fence(r)))
}

/// Brings every copy below `path` up to the source there as it is now (`row` if given,
/// else read): copies it, or clears optional copies if no source is there. What an intent
/// of op `propagate` does.
pub(crate) async fn reconcile_source<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: Option<&Item>,
    g: Option<&Guard>,
) -> Result<()> {
    let row = match row {
        Some(r) => Some(r.clone()),
        None => current_source(cx, path).await?,
    };
    copy_below(cx, path, row.as_ref(), g, None).await.map(drop)
}

/// Refreshes the copies of the object at `path` itself, if it is of a target type.
pub(crate) async fn refresh_own<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    let types = target_types_at(cx, path);
    if types.is_empty() {
        return Ok(());
    }
    if let Some(row) = current_source(cx, path).await? {
        for ty in types {
            refresh_copies(cx, ty, path, &row).await?;
        }
    }
    Ok(())
}

/// After a patch of a source value of `T` at `path`: reads it (consistently) and
/// propagates it, finishing the intent `guard`.
pub(crate) async fn propagate_patched<S: Storage + 'static>(
    cx: &Ctx<S>,
    guard: Option<Guard>,
    path: &Path,
) -> Result<()> {
    after_source_write(cx, guard, path, None).await
}

/// Under inline propagation: fills `row`'s copies from its ancestors
/// ([`fill_from_ancestors`](fill_from_ancestors)) and returns condition checks that
/// hold while every source read is as it was read: sent in the write's transaction, they
/// make the write fail (nothing written) if a source changed in between, instead of a
/// re-read after the write. Empty if `ty` has no copies (or under stream propagation).
pub(crate) async fn fill_checked<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    row: &mut Item,
) -> Result<Vec<TransactAction>> {
    if !inline(cx) || ty.denormalized.is_empty() {
        return Ok(Vec::new());
    }
    let layout = &cx.inner.layout;
    let mut sources: Vec<Path> = Vec::new();
    for d in ty.denormalized {
        let p = path.prefix(template_len(d.source_template()));
        if !sources.contains(&p) {
            sources.push(p);
        }
    }
    let found = read::objects_of(cx, sources.iter(), true).await?;
    let mut checks = Vec::with_capacity(sources.len());
    for source in &sources {
        let key = layout.object_key(source);
        let condition = match found.get(&key.hash) {
            None => {
                // Missing: filled after its tombstone, which must not move either.
                let tombstone = layout.tombstone_key(source);
                let unchanged = layout.tombstone_as_read(self::tombstone(cx, source).await?);
                checks.push(TransactAction::ConditionCheck {
                    key: tombstone,
                    condition: unchanged,
                });
                Condition::NotExists
            }
            Some(r) if r.contains(layout.link_attr()) => {
                // A link there: no source, as if missing; its tombstone must not move.
                let unchanged = layout.tombstone_as_read(self::tombstone(cx, source).await?);
                checks.push(TransactAction::ConditionCheck {
                    key: layout.tombstone_key(source),
                    condition: unchanged,
                });
                layout.any_link()
            }
            Some(r) => {
                // Its own version, and when each copy of it that is copied here last
                // changed (a chain).
                let mut attrs = vec![layout.source_version_attr()];
                for d in ty.denormalized {
                    if path.prefix(template_len(d.source_template())) == *source
                        && is_copy_field(cx, d.source_template(), d.source_attr())
                    {
                        attrs.push(layout.change_version_attr(d.source_attr()));
                    }
                }
                unchanged_since(r, attrs)
            }
        };
        checks.push(TransactAction::ConditionCheck { key, condition });
    }
    fill_found(cx, ty, path, row, &found).await?;
    Ok(checks)
}

/// Under inline propagation: [`fill_from_ancestors`](fill_from_ancestors). The
/// stream fills targets otherwise.
pub(crate) async fn fill_targets<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    row: &mut Item,
) -> Result<()> {
    if !inline(cx) {
        return Ok(());
    }
    fill_from_ancestors(cx, ty, path, row).await.map(drop)
}

/// Fills `T`'s denormalized fields of `row` (at `path`) from its ancestors' rows, with
/// their versions. One BatchGetItem.
async fn fill_from_ancestors<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    row: &mut Item,
) -> Result<Vec<bool>> {
    if ty.denormalized.is_empty() {
        return Ok(Vec::new());
    }
    let sources: Vec<Path> = ty
        .denormalized
        .iter()
        .map(|d| path.prefix(template_len(d.source_template())))
        .collect();
    let found = read::objects_of(cx, sources.iter(), true).await?;
    fill_found(cx, ty, path, row, &found).await
}

/// Fills `row`'s copies from the source rows `found` (by hash key). Which sources were
/// missing, by declaration.
async fn fill_found<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    row: &mut Item,
    found: &std::collections::HashMap<String, Item>,
) -> Result<Vec<bool>> {
    let sources: Vec<Path> = ty
        .denormalized
        .iter()
        .map(|d| path.prefix(template_len(d.source_template())))
        .collect();
    let mut absent = Vec::with_capacity(sources.len());
    let mut tombstones: Vec<(Path, Option<u64>)> = Vec::new();
    for (d, source) in ty.denormalized.iter().zip(&sources) {
        let hash = cx.inner.layout.object_key(source).hash;
        let src = found
            .get(&hash)
            .filter(|r| !r.contains(cx.inner.layout.link_attr()));
        absent.push(src.is_none());
        let gone = match src {
            Some(_) => None,
            // A missing source: the version of its tombstone (one GetItem per missing
            // source, only then).
            None => match tombstones.iter().find(|(p, _)| p == source) {
                Some((_, t)) => Some(t.unwrap_or(0)),
                None => {
                    let t = tombstone(cx, source).await?;
                    tombstones.push((source.clone(), t));
                    Some(t.unwrap_or(0))
                }
            },
        };
        copy_into(cx, d, src, gone, row);
    }
    Ok(absent)
}

/// Sets `d`'s target and version in `row` from the source row `src` (absent: cleared when
/// optional, left as written otherwise).
fn copy_into<S: Storage + 'static>(
    cx: &Ctx<S>,
    d: &Denormalized,
    src: Option<&Item>,
    gone: Option<u64>,
    row: &mut Item,
) {
    let layout = &cx.inner.layout;
    // A field of the source's own: the source's version. A field that is a copy itself (a
    // chain): the later of the source's version (its writes, its creation) and when that
    // copy last changed there (`SC cv.<field>`, moved past both by every change of it).
    // No source: just after its tombstone (its last version before it was removed; 0 if
    // it never was), before any it gets if created again (stamped after that).
    let version = match src {
        Some(s) => {
            let own = number(s.get(&layout.source_version_attr()));
            if is_copy_field(cx, d.source_template(), d.source_attr()) {
                own.max(number(s.get(&layout.change_version_attr(d.source_attr()))))
            } else {
                own
            }
        }
        None => gone.map_or(0, |t| t.saturating_add(1)),
    };
    let version = Value::N(version.to_string());
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
pub(crate) async fn recheck_targets<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    written: &Item,
) -> Result<()> {
    if !inline(cx) {
        return Ok(());
    }
    refresh_copies(cx, ty, path, written).await
}

/// Copies to `written` (the row at `path`, of type `ty`) every source whose version
/// differs from the one `written` holds (or that it holds none of).
pub(crate) async fn refresh_copies<S: Storage + 'static>(
    cx: &Ctx<S>,
    ty: TypeInfo,
    path: &Path,
    written: &Item,
) -> Result<()> {
    if ty.denormalized.is_empty() || written.contains(cx.inner.layout.link_attr()) {
        return Ok(());
    }
    let mut fresh = written.clone();
    fill_from_ancestors(cx, ty, path, &mut fresh).await?;
    for d in ty.denormalized {
        let attr = cx.inner.layout.target_version_attr(d.target());
        if fresh.get(&attr) != written.get(&attr)
            && let Copied::Applied(Some(v)) = copy_to_target(cx, path, d, &fresh).await?
        {
            fresh.insert(cx.inner.layout.change_version_attr(d.target()), v);
        }
    }
    Ok(())
}

/// One conditional UpdateItem: sets `d`'s target at `path` to what `filled` holds for it,
/// if the object is there and its copy is older. `Ok` also when it is newer or gone.
async fn copy_to_target<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    d: &Denormalized,
    filled: &Item,
) -> Result<Copied> {
    let layout = &cx.inner.layout;
    let version_attr = layout.target_version_attr(d.target());
    let (Some(value), Some(version)) = (filled.get(d.target()), filled.get(&version_attr)) else {
        return Ok(Copied::Refused);
    };
    let key = layout.object_key(path);
    // A copy that is copied further (a chain): when it changed moves past the row's own
    // version and its previous change, so the copies of this copy see a change.
    let chained = feeds_chain(cx, path, d.target());
    let sv = layout.source_version_attr();
    let cv = layout.change_version_attr(d.target());
    let mut stored = number(filled.get(&sv)).max(number(filled.get(&cv)));
    for () in Backoff::alone(cx.inner.config.retry).tries() {
        let mut conditions = layout.plain_object();
        conditions.push(below(version_attr.clone(), Comparison::Lt, version.clone()));
        let mut actions = vec![
            UpdateAction::Set(d.target().to_owned(), value.clone()),
            UpdateAction::Set(version_attr.clone(), version.clone()),
        ];
        let bumped = Value::N(version_after(stored).to_string());
        if chained {
            for attr in [&sv, &cv] {
                conditions.push(below(attr.clone(), Comparison::Lt, bumped.clone()));
            }
            actions.push(UpdateAction::Set(cv.clone(), bumped.clone()));
        }
        match cx.io().update_item(&key, actions, all(conditions)).await {
            Ok(_) => return Ok(Copied::Applied(chained.then_some(bumped))),
            Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                if !chained {
                    return Ok(Copied::Refused);
                }
                // Gone, newer, or its own version moved meanwhile: look again.
                let Some(now) = cx.io().get_item(&key, true).await? else {
                    return Ok(Copied::Refused);
                };
                let newer = match (now.get(&version_attr), version) {
                    (Some(Value::N(a)), Value::N(b)) => {
                        a.parse::<u64>().unwrap_or(0) >= b.parse::<u64>().unwrap_or(0)
                    }
                    _ => false,
                };
                if newer || now.contains(layout.link_attr()) {
                    return Ok(Copied::Refused);
                }
                stored = number(now.get(&sv)).max(number(now.get(&cv)));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Copied::Refused)
}

/// A walk of the objects strictly below `root`, level by level, read consistently: one
/// Query per directory page and one BatchGetItem per 100 names of a level. Each level is
/// listed when the walk asks for it, after the caller has handled the level above: a child
/// created before a copy into its parent committed is listed, one created after sees the
/// copy. Nothing below the deepest target type is listed.
fn walk_below<S: Storage + 'static>(cx: &Ctx<S>, root: &Path) -> Walk {
    let deepest = cx
        .inner
        .targets
        .snapshot()
        .iter()
        .map(|(t, _)| template_len(t))
        .max()
        .unwrap_or(0);
    Walk {
        deepest,
        level: vec![root.clone()],
    }
}

/// The next level of `walk` (`None` when there is none).
async fn next_level<S: Storage + 'static>(
    cx: &Ctx<S>,
    walk: &mut Walk,
) -> Result<Option<Vec<(Path, Item)>>> {
    if walk.level.is_empty() {
        return Ok(None);
    }
    let mut next = Vec::new();
    for prefix in walk.level.iter().filter(|p| p.len() < walk.deepest) {
        let mut query = cx.listing_query_for(prefix)?;
        query.consistent = true;
        let pages = cx.listing_pages(prefix, query, None);
        futures::pin_mut!(pages);
        while let Some(page) = pages.try_next().await? {
            for row in &page.items {
                if let Some(name) = row.get_s(crate::storage::RANGE_KEY) {
                    next.push(prefix.child(name.to_owned())?);
                }
            }
        }
    }
    let objects = read::objects_of(cx, next.iter(), true).await?;
    let out = next
        .iter()
        .filter_map(|p| {
            objects
                .get(&cx.inner.layout.object_key(p).hash)
                .map(|row| (p.clone(), row.clone()))
        })
        .collect();
    walk.level = next;
    Ok(Some(out))
}

/// Copies the source `row` at `path` (`None`: no source there, optional copies are
/// cleared) to every registered target below it (walked level by level, each level listed
/// after the copies into the level above), and on through chains (a target that is itself
/// a source). With `limit`, stops after that many targets: `Ok(false)`.
async fn copy_below<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: Option<&Item>,
    g: Option<&Guard>,
    limit: Option<usize>,
) -> Result<bool> {
    let targets = cx.inner.targets.snapshot();
    // No source: the tombstone of the removed one orders the clears.
    let gone = match row {
        Some(_) => None,
        None => tombstone(cx, path).await?,
    };
    // The rows as they are after our copies: the source, then each updated target.
    let mut current: Vec<(Path, Option<Item>)> = vec![(path.clone(), row.cloned())];
    let mut walk = walk_below(cx, path);
    let mut seen = 0usize;
    while let Some(level) = next_level(cx, &mut walk).await? {
        for (p, item) in level {
            seen += 1;
            if let Some(g) = g
                && seen % 64 == 63
            {
                intent::renew_if_due(cx, g).await?;
            }
            if let Some(updated) = copy_into_object(cx, &targets, &current, &p, item, gone).await? {
                current.push((p, Some(updated)));
            }
            // An object brought up to date: a step of the propagation.
            crate::retry::progressed();
        }
        if limit.is_some_and(|l| seen > l) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The copies of `p` (its row `item`) from the sources among `current` (the walk's
/// source and the targets it updated): written if older. Returns the row as it is after,
/// if `p` is a target of one of them.
async fn copy_into_object<S: Storage + 'static>(
    cx: &Ctx<S>,
    targets: &[(&'static str, &'static [Denormalized])],
    current: &[(Path, Option<Item>)],
    p: &Path,
    mut item: Item,
    gone: Option<u64>,
) -> Result<Option<Item>> {
    {
        if item.contains(cx.inner.layout.link_attr()) {
            return Ok(None);
        }
        let mut changed = false;
        for (template, defs) in targets {
            if !matches_template(template, p) {
                continue;
            }
            for d in defs.iter() {
                let n = template_len(d.source_template());
                let Some((_, src)) = current.iter().rev().find(|(q, _)| {
                    q.len() == n && *q == p.prefix(n) && matches_template(d.source_template(), q)
                }) else {
                    continue;
                };
                match src {
                    Some(src) => {
                        let mut filled = item.clone();
                        copy_into(cx, d, Some(src), None, &mut filled);
                        // The same value under the same version: written already (the
                        // walk read it consistently after the source's write).
                        if filled != item {
                            match copy_to_target(cx, p, d, &filled).await? {
                                Copied::Applied(Some(v)) => {
                                    filled
                                        .insert(cx.inner.layout.change_version_attr(d.target()), v);
                                }
                                Copied::Applied(None) => {}
                                Copied::Refused => {
                                    // Newer there (or gone): the chain goes on from what is
                                    // stored, never from this stale view.
                                    match cx
                                        .io()
                                        .get_item(&cx.inner.layout.object_key(p), true)
                                        .await?
                                        .filter(|r| !cx.inner.layout.is_fence(r))
                                    {
                                        Some(row) => filled = row,
                                        None => break,
                                    }
                                }
                            }
                        }
                        item = filled;
                    }
                    None => {
                        if let Some(cleared) = clear_target(cx, p, d, &item, gone).await? {
                            item = cleared;
                        }
                    }
                }
                changed = true;
            }
        }
        Ok(changed.then_some(item))
    }
}

/// No source is there any more: clears the optional copy `d` of `item` (at `path`).
/// With the removed source's last version `gone` (its tombstone): under that version, if
/// the copy is not newer (a source created again is stamped after the tombstone, and its
/// copies win; late copies of the removed source lose). Without one: under a version after
/// the copy's, if the copy is unchanged. Returns the row as it is after (`None` if `d` is
/// not optional or the object is gone).
async fn clear_target<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    d: &Denormalized,
    item: &Item,
    gone: Option<u64>,
) -> Result<Option<Item>> {
    if !d.optional() {
        return Ok(None);
    }
    let layout = &cx.inner.layout;
    let version_attr = layout.target_version_attr(d.target());
    let sv = layout.source_version_attr();
    let cv = layout.change_version_attr(d.target());
    let key = layout.object_key(path);
    let mut current = item.clone();
    for () in Backoff::alone(cx.inner.config.retry).tries() {
        let seen = current.get(&version_attr).cloned();
        let seen_version = number(seen.as_ref());
        let cleared = matches!(current.get(d.target()), None | Some(Value::Null));
        let (version, copy_condition) = match gone {
            // Cleared under the tombstone already, or a copy of a source created again
            // (stamped after the tombstone's clear version): leave it.
            Some(t) if seen.is_some() && seen_version > t => return Ok(Some(current)),
            // Cleared under `t + 1`, between the removed source's last version `t` and any
            // version of a source created again (stamped after `t + 1`).
            Some(t) => (
                t.saturating_add(1),
                below(
                    version_attr.clone(),
                    Comparison::Le,
                    Value::N(t.to_string()),
                ),
            ),
            None if cleared => return Ok(Some(current)),
            None => (
                version_after(seen_version),
                unchanged(version_attr.clone(), seen.clone()),
            ),
        };
        let version = Value::N(version.to_string());
        let mut conditions = layout.plain_object();
        conditions.push(copy_condition);
        let mut actions = vec![
            UpdateAction::Set(d.target().to_owned(), Value::Null),
            UpdateAction::Set(version_attr.clone(), version.clone()),
        ];
        if feeds_chain(cx, path, d.target()) && !cleared {
            // A chain: when the copy changed moves past the row's own version and its
            // previous change (see `copy_to_target`).
            let seen_cv = current.get(&cv).cloned();
            let bumped = Value::N(
                version_after(
                    number(current.get(&sv))
                        .max(number(seen_cv.as_ref()))
                        .max(seen_version),
                )
                .to_string(),
            );
            conditions.push(unchanged(cv.clone(), seen_cv));
            conditions.push(below(sv.clone(), Comparison::Lt, bumped.clone()));
            actions.push(UpdateAction::Set(cv.clone(), bumped));
        }
        match cx.io().update_item(&key, actions, all(conditions)).await {
            Ok(after) => return Ok(Some(after)),
            Err(e) if e.kind() == ErrorKind::ConditionFailed => {
                // A copy landed meanwhile (a write of the source that raced its removal):
                // look again; if the source is back, its own propagation has the last word.
                match cx.io().get_item(&key, true).await? {
                    Some(row) if !row.contains(layout.link_attr()) => current = row,
                    _ => return Ok(None),
                }
                let source = path.prefix(template_len(d.source_template()));
                if current_source(cx, &source).await?.is_some() {
                    return Ok(Some(current));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(current))
}

/// The tombstone of the source at `path`: the last version of a removed source object
/// (written when it is deleted), if any.
pub(crate) async fn tombstone<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Option<u64>> {
    Ok(cx
        .io()
        .get_item(&cx.inner.layout.tombstone_key(path), true)
        .await?
        .and_then(|r| source_version(cx, &r)))
}

/// Before the source object at `path` is deleted: reads its row (consistently), records
/// its latest version as its tombstone, and returns it (for a delete conditional on
/// [`same_versions`](same_versions)); an absent row reads as its bare key.
pub(crate) async fn pin_versions<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<Item> {
    let key = cx.inner.layout.object_key(path);
    let row = cx
        .io()
        .get_item(&key, true)
        .await?
        .unwrap_or_else(|| key.into_item());
    if let Some(v) = row_version(cx, path, &row) {
        put_tombstone(cx, path, v).await?;
    }
    Ok(row)
}

/// Writes `row` (a link) over the source object at `path` after recording its version as
/// its tombstone, conditional on the object still holding that version (a write in
/// between: again).
pub(crate) async fn replace_source_with<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: Item,
) -> Result<()> {
    let mut backoff = Backoff::new(cx.config_retry());
    loop {
        let seen = pin_versions(cx, path).await?;
        let unchanged = same_versions(cx, path, &seen);
        match write::write_object(cx, path, row.clone(), &unchanged).await {
            Err(e) if e.is_condition_failed() && backoff.spend() => {}
            other => return other,
        }
    }
}

/// Records `v` as the tombstone of the source at `path`, unless a later one is there.
pub(crate) async fn put_tombstone<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    v: u64,
) -> Result<()> {
    let mut row = cx.inner.layout.tombstone_key(path).into_item();
    row.insert(
        cx.inner.layout.source_version_attr(),
        Value::N(v.to_string()),
    );
    let attr = cx.inner.layout.source_version_attr();
    match cx.io().put_item(row, version_below(attr, v)).await {
        Ok(()) => Ok(()),
        // A later tombstone is there already.
        Err(e) if e.kind() == ErrorKind::ConditionFailed => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the denormalized fields of the object at `root` and of every object below it
/// again, from their ancestors as they are now: after a move (the moved rows carry no copy
/// versions, so every copy is written). Parents before children, so that chains copy
/// updated intermediates. Under stream propagation, the stream does it (the moved rows
/// are new rows without copy versions).
pub(crate) async fn refill_subtree<S: Storage + 'static>(
    cx: &Ctx<S>,
    root: &Path,
    g: Option<&Guard>,
) -> Result<()> {
    let targets = cx.inner.targets.snapshot();
    if targets.is_empty() || !inline(cx) {
        return Ok(());
    }
    // The root, then level by level: each level listed after the one above was refilled
    // (a child created meanwhile either is listed or filled itself from the refilled
    // parent).
    let mut level: Vec<(Path, Item)> = cx
        .io()
        .get_item(&cx.inner.layout.object_key(root), true)
        .await?
        .filter(|r| !cx.inner.layout.is_fence(r))
        .map(|row| vec![(root.clone(), row)])
        .unwrap_or_default();
    let mut walk = walk_below(cx, root);
    let mut seen = 0usize;
    loop {
        for (p, item) in &level {
            seen += 1;
            if let Some(g) = g
                && seen % 64 == 63
            {
                intent::renew_if_due(cx, g).await?;
            }
            for (template, defs) in &targets {
                if matches_template(template, p) {
                    let ty = TypeInfo {
                        template,
                        denormalized: defs,
                    };
                    refresh_copies(cx, ty, p, item).await?;
                }
            }
        }
        match next_level(cx, &mut walk).await? {
            Some(next) => level = next,
            None => return Ok(()),
        }
    }
}
