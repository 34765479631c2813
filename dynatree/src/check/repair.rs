//! The repair of what [`Tree::check`] found ([`Tree::repair`]), with the runtime's guarded
//! writes: see [`crate::check`] for what each class gets, and the consistency docs ("Check
//! and repair") for why each repair is safe against concurrent writers.

use crate::check::scan;
use crate::tree::{Ctx, Tree, denorm, guard, intent, removal, write};
use std::collections::HashSet;
use std::sync::Arc;

use super::{Class, Phase, Progress, ProgressFn, Repaired, Report, Violation};
use crate::error::{Error, ErrorKind, Party, Result};
use crate::expiry::now_secs;
use crate::item::Value;
use crate::layout::{all, exists_and, unchanged};
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{Condition, Storage, TransactAction, UpdateAction};

use crate::tree::denorm::version_after;
use crate::tree::guard::Attempt;

/// A repair of the violations of a [`Report`], configured, then [`run`](Repair::run). Made
/// by [`Tree::repair`].
///
/// # Examples
///
/// ```
/// # use dynatree::Tree; use dynatree_testing::FakeTable;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// # let tree = Tree::new(FakeTable::new()); tree.create_table().await?;
/// let report = tree.check().run().await?;
/// let repaired = tree.repair(&report).on_progress(|p| eprintln!("{}", p.done)).run().await?;
/// assert!(repaired.fixed().is_empty());
/// # Ok(()) }
/// ```
#[must_use = "a repair does nothing until `run` is awaited"]
pub struct Repair<S> {
    tree: Tree<S>,
    violations: Vec<Violation>,
    /// The link index's stale entries: (link, target).
    stale_entries: Vec<(Path, Path)>,
    dry_run: bool,
    progress: Option<ProgressFn>,
    /// Only part `.0` of `.1`.
    part: Option<(u32, u32)>,
}

impl<S> std::fmt::Debug for Repair<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repair")
            .field("violations", &self.violations.len())
            .field("dry_run", &self.dry_run)
            .field("part", &self.part)
            .finish_non_exhaustive()
    }
}

/// The order repairs run in: operations first (finishing one releases its locks and marks),
/// then locks and marks (malformed ones first), then expired values, then missing rows, then
/// empty ones (a row re-created above is not empty), then attributes.
fn order(class: Class) -> u8 {
    match class {
        Class::AbandonedIntent => 0,
        Class::Malformed | Class::LockWithoutIntent => 1,
        Class::ExpiredMark => 2,
        Class::Expired => 3,
        Class::Unreachable | Class::BrokenClosure => 4,
        // After the rows in the shards are written (as unreachable objects' are).
        Class::EmptyListing | Class::Misplaced => 5,
        Class::MissingIndex => 6,
        Class::StaleCopy => 7,
        _ => 8,
    }
}

/// How one repair ended.
enum Outcome {
    Fixed,
    Left(String),
}

impl<S: Storage + 'static> Repair<S> {
    /// Lists what would be repaired without writing anything ([`Repaired::fixed`] then holds
    /// the violations a repair would work on).
    ///
    /// # Examples
    ///
    /// See [`Repaired::is_dry_run`](crate::check::Repaired::is_dry_run).
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Calls `f` after each violation (see [`Progress`], phase [`Phase::Repair`]).
    ///
    /// # Examples
    ///
    /// See [`Repair`].
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Repairs each violation in turn (operations, locks and marks first, then rows, then
    /// attributes), each with the runtime's guarded writes, so the application can keep
    /// writing meanwhile. A violation that a concurrent writer fixed first counts as fixed;
    /// one that a concurrent operation holds now is left, with why.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] through a [scope](Tree::scope). Errors of the service
    /// (throttling beyond the retry budget, a backend failure) stop the repair and are
    /// returned: what was repaired before stays repaired, and a check finds the rest. Other
    /// failures of one violation leave it, with the error as the reason.
    ///
    /// # Cancel safety
    ///
    /// A dropped repair leaves each violation repaired or not; a repair in flight is one of
    /// the runtime's protocols and is left as its cancel safety says (a mark released after
    /// its lease, an operation finished by [`Tree::resume`]). Check and repair again.
    pub async fn run(self) -> Result<Repaired> {
        crate::retry::call(self.tree.cx.inner.config.retry, async move {
            let span = tracing::info_span!(
                "dynatree.repair",
                violations = self.violations.len(),
                dry_run = self.dry_run
            );
            tracing::Instrument::instrument(self.run_inner(), span).await
        })
        .await
    }

    /// Repairs only part `i` of `n` (from 0) of the violations, so that `n` workers can share
    /// one report: those whose path's first component falls in part `i`
    /// ([`transfer::part_of`](crate::transfer::part_of)), and in part 0 those without a path
    /// or at the root. A subtree's violations are in one part, so the repairs that depend on
    /// each other (a listing row re-created, then the emptied ones removed) run in their order
    /// in one worker; the parts may run at once, each repair being a guarded write.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// for name in ["a", "b", "c", "d"] {
    ///     table.put_item(Key::new("¦", name).into_item(), Condition::Always).await?;
    /// }
    /// let report = tree.check().grace(std::time::Duration::ZERO).run().await?;
    /// let mut fixed = 0;
    /// for i in 0..3 {
    ///     fixed += tree.repair(&report).part(i, 3).run().await?.fixed().len();
    /// }
    /// assert_eq!(fixed, 4); // each violation in exactly one part
    /// # Ok(()) }
    /// ```
    pub fn part(mut self, i: u32, n: u32) -> Self {
        self.part = Some((i, n));
        self
    }

    async fn run_inner(mut self) -> Result<Repaired> {
        let tree = self.tree.clone();
        if tree.is_scoped() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "repair works on the whole table: call it on the tree, not on a scope",
            ));
        }
        if let Some((i, n)) = self.part {
            if n == 0 || i >= n {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("part {i} of {n}: the part must be below the number of parts"),
                ));
            }
            self.violations.retain(|v| in_part(v, i, n));
            self.stale_entries
                .retain(|(link, _)| super::in_part(Some(link), i, n));
        }
        self.violations
            .sort_by_key(|v| (order(v.class), v.path.as_ref().map(Path::len)));
        let total = self.violations.len() as u64;
        let mut out = Repaired {
            dry_run: self.dry_run,
            ..Repaired::default()
        };
        let mut sources_done: HashSet<Path> = HashSet::new();
        for (i, v) in self.violations.iter().enumerate() {
            let outcome = if !v.class.repairable() {
                Outcome::Left(
                    match v.class {
                        Class::DanglingLink => {
                            "a human decides: point the link elsewhere, or delete it"
                        }
                        Class::LinkCycle => "a human decides which link of the cycle to change",
                        _ => "a human decides: the row is not a row of the layout",
                    }
                    .into(),
                )
            } else if self.dry_run {
                Outcome::Fixed
            } else {
                match repair_one(&tree.cx, v, &mut sources_done).await {
                    Ok(o) => o,
                    Err(e) if e.party() == Party::Service => return Err(e),
                    Err(e) => Outcome::Left(format!("failed: {e}")),
                }
            };
            // A violation settled: a step of the repair.
            crate::retry::progressed();
            match outcome {
                Outcome::Fixed => out.fixed.push(v.clone()),
                Outcome::Left(why) => out.left.push((v.clone(), why)),
            }
            if let Some(f) = &self.progress {
                f(&Progress {
                    phase: Phase::Repair,
                    done: i as u64 + 1,
                    total: Some(total),
                    ..Progress::default()
                });
            }
        }
        out.swept = sweep(&tree.cx, &self.stale_entries, self.dry_run).await?;
        Ok(out)
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// Repairs the violations of `report` (from [`check`](Tree::check)): see
    /// [`crate::check`] for what each class gets. Check again afterwards: a repaired table
    /// that nobody else changed is healthy, apart from what needs a human decision.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # use dynatree::storage::{Condition, Key, Storage};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// // A listing row naming nothing, as the Go library's Delete leaves them.
    /// table.put_item(Key::new("¦", "gone").into_item(), Condition::Always).await?;
    /// let report = tree.check().run().await?;
    /// let repaired = tree.repair(&report).run().await?;
    /// assert_eq!(repaired.fixed().len(), 1);
    /// assert!(tree.check().run().await?.is_healthy());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// See [`Repair::run`].
    pub fn repair(&self, report: &Report) -> Repair<S> {
        Repair {
            tree: self.clone(),
            violations: report.violations.clone(),
            stale_entries: report.stale_entries.clone(),
            dry_run: false,
            progress: None,
            part: None,
        }
    }
}

/// Deletes the link index's stale `entries` (after the violations: a link whose missing
/// entry was just written is live), each conditional on its link row being no link to its
/// target (see `tree/links.md`); how many went. In a dry run, how many would be tried.
async fn sweep<S: Storage + 'static>(
    cx: &Ctx<S>,
    entries: &[(Path, Path)],
    dry_run: bool,
) -> Result<usize> {
    let Some(depth) = cx.link_depth() else {
        return Ok(0);
    };
    if dry_run {
        return Ok(entries.len());
    }
    let mut swept = 0;
    for (link, target) in entries {
        if crate::tree::links::drop_stale(cx, link, target, depth).await? {
            swept += 1;
        }
        crate::retry::progressed();
    }
    Ok(swept)
}

async fn repair_one<S: Storage + 'static>(
    cx: &Ctx<S>,
    v: &Violation,
    sources_done: &mut HashSet<Path>,
) -> Result<Outcome> {
    let layout = &cx.inner.layout;
    let path = v.path.clone();
    match (v.class, path) {
        (Class::AbandonedIntent, _) => {
            let Some(id) = &v.token else {
                return Ok(Outcome::Left("no operation id".into()));
            };
            // Finished or rolled back (as `resume` does), or already gone.
            intent::drive(cx, id).await?;
            Ok(Outcome::Fixed)
        }
        (Class::LockWithoutIntent, None) => {
            // A lane row whose record another program deleted: deleted while the record
            // stays absent.
            let Some(id) = &v.token else {
                return Ok(Outcome::Left("no operation id".into()));
            };
            let tx = vec![
                TransactAction::ConditionCheck {
                    key: layout.intent_key(id),
                    condition: Condition::NotExists,
                },
                TransactAction::Delete {
                    key: v.key.clone(),
                    condition: Condition::Always,
                },
            ];
            match cx.transact_resending_conflicts(tx).await {
                Ok(()) => Ok(Outcome::Fixed),
                Err(e) if e.kind() == ErrorKind::TransactionCanceled => Ok(Outcome::Left(format!(
                    "operation {id} is recorded again: `resume` finishes it"
                ))),
                Err(e) => Err(e),
            }
        }
        (Class::LockWithoutIntent, Some(p)) => {
            let Some(id) = &v.token else {
                return Ok(Outcome::Left("no lock".into()));
            };
            let key = v.key.clone();
            let attr = super::scan::lock_attr(layout, &key);
            let lock = Value::S(id.clone());
            let release = if key == layout.listing_key(&p) {
                TransactAction::Put {
                    item: layout.listing_row(&p),
                    condition: unchanged(attr.clone(), Some(lock.clone())),
                }
            } else {
                // An object's hold: the attribute goes, the object stays.
                TransactAction::Update {
                    key: key.clone(),
                    actions: vec![UpdateAction::Remove(attr.clone())],
                    condition: unchanged(attr.clone(), Some(lock.clone())),
                }
            };
            let tx = vec![
                TransactAction::ConditionCheck {
                    key: layout.intent_key(id),
                    condition: Condition::NotExists,
                },
                release,
            ];
            // A conflict cancels nothing for good: both conditions are evaluated afresh.
            let sent = cx.transact_resending_conflicts(tx).await;
            match sent {
                Ok(()) => Ok(Outcome::Fixed),
                Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                    let row = cx.io().get_item(&key, true).await?;
                    if row.is_some_and(|r| r.get(&attr) == Some(&lock)) {
                        Ok(Outcome::Left(format!(
                            "operation {id} is recorded again: `resume` finishes it"
                        )))
                    } else {
                        Ok(Outcome::Fixed)
                    }
                }
                Err(e) => Err(e),
            }
        }
        (Class::ExpiredMark, Some(p)) => {
            if let Some(mark) = &v.token {
                guard::clear_expired_mark(cx, &layout.listing_key(&p), mark).await?;
            }
            Ok(Outcome::Fixed)
        }
        (Class::Expired, Some(p)) => {
            let now = now_secs();
            let still = layout.expired_at(now);
            match cx.io().delete_item(&layout.object_key(&p), still).await {
                // Put again meanwhile with a later expiry: no longer expired.
                Err(e) if e.kind() == ErrorKind::ConditionFailed => return Ok(Outcome::Fixed),
                other => other?,
            }
            if removal::remove_if_empty(cx, &p).await? {
                removal::prune_above(cx, &p).await?;
            }
            Ok(Outcome::Fixed)
        }
        (Class::Unreachable, Some(p)) => {
            let anchor = TransactAction::ConditionCheck {
                key: layout.object_key(&p),
                condition: all(layout.real_object()),
            };
            relink(cx, &p, anchor).await
        }
        (Class::BrokenClosure, Some(p)) => {
            let Some(parent) = p.parent().filter(|q| !q.is_root()) else {
                return Ok(Outcome::Fixed);
            };
            // Only that it exists: a marked or locked row still needs its parent's rows
            // while it is there (its remover or operation prunes them if they end up
            // naming nothing).
            let anchor = TransactAction::ConditionCheck {
                key: layout.listing_key(&p),
                condition: Condition::Exists,
            };
            relink(cx, &parent, anchor).await
        }
        (Class::EmptyListing, Some(p)) => {
            if removal::remove_if_empty(cx, &p).await? {
                removal::prune_above(cx, &p).await?;
                return Ok(Outcome::Fixed);
            }
            // Not removed: no longer empty (fixed by a writer), or held by an operation.
            match cx.io().get_item(&layout.listing_key(&p), true).await? {
                Some(r) if r.contains(layout.moving_attr()) => Ok(Outcome::Left(
                    "a move, copy or deletion holds it: `resume` finishes that first".into(),
                )),
                _ => Ok(Outcome::Fixed),
            }
        }
        (Class::MissingIndex, Some(p)) if scan::link_entry_wanted(cx, v).is_some() => {
            // A link without its link index entry (written by the Go library): the entry,
            // conditional on the link still pointing at its target.
            let Some((target, entry)) = scan::link_entry_wanted(cx, v) else {
                return Ok(Outcome::Fixed);
            };
            let actions = vec![
                TransactAction::ConditionCheck {
                    key: layout.object_key(&p),
                    condition: layout.links_to(&target),
                },
                TransactAction::Put {
                    item: entry.into_item(),
                    condition: crate::storage::Condition::Always,
                },
            ];
            match cx.io().transact_write(actions).await {
                // Changed meanwhile: a dynatree write of a link writes its entry.
                Err(e) if e.kind() == ErrorKind::TransactionCanceled => Ok(Outcome::Fixed),
                other => other.map(|()| Outcome::Fixed),
            }
        }
        (Class::MissingIndex, Some(p)) => {
            let key = layout.object_key(&p);
            let Some(row) = cx.io().get_item(&key, true).await? else {
                // Deleted meanwhile: nothing to index.
                return Ok(Outcome::Fixed);
            };
            let set: Vec<UpdateAction> = scan::index_attributes_of(cx, &p, &row)
                .into_iter()
                .filter(|(name, v)| row.get(name) != Some(v))
                .map(|(name, v)| UpdateAction::Set(name, v))
                .collect();
            if set.is_empty() {
                return Ok(Outcome::Fixed);
            }
            // Only onto the row as read: its user attributes (what index values follow
            // from) unchanged.
            let unchanged = layout.user_attrs_unchanged(&row);
            match cx.io().update_item(&key, set, unchanged).await {
                // Written or deleted meanwhile: a dynatree write sets its own index
                // attributes; a foreign one is found by the next check.
                Err(e) if e.kind() == ErrorKind::ConditionFailed => Ok(Outcome::Left(
                    "the object changed while it was repaired: check again".into(),
                )),
                other => other.map(|_| Outcome::Fixed),
            }
        }
        (Class::Misplaced, _) => {
            // No reader of this tree's sharding reads it, and no writer writes it.
            cx.io().delete_item(&v.key, Condition::Always).await?;
            Ok(Outcome::Fixed)
        }
        (Class::StaleCopy, Some(p)) => refresh_stale(cx, &p, sources_done).await,
        (Class::Malformed, _) => remove_malformed(cx, v).await,
        _ => Ok(Outcome::Left("nothing to repair it with".into())),
    }
}

/// Takes a bookkeeping attribute of the wrong type (`v.token` names it) off its row, in
/// one transaction conditional on its exact value as read now: a tombstone row goes
/// whole, any other row loses the attribute. Nothing of the runtime's can own such a value
/// (removal marks, locks and holds are strings, versions numbers, and every step of a
/// remover or an operation is conditional on its own), so nobody's protocol stops short.
/// A lock or hold whose value spells the id of a recorded operation is left to it (the
/// transaction checks that no intent of that id is recorded), as for
/// [`Class::LockWithoutIntent`].
async fn remove_malformed<S: Storage + 'static>(cx: &Ctx<S>, v: &Violation) -> Result<Outcome> {
    let layout = &cx.inner.layout;
    let Some(attr) = v.token.as_deref() else {
        return Ok(Outcome::Left("no attribute named".into()));
    };
    let key = v.key.clone();
    let Some(row) = cx.io().get_item(&key, true).await? else {
        // Deleted meanwhile: nothing left to block anything.
        return Ok(Outcome::Fixed);
    };
    if !super::scan::still_malformed(layout, &key, attr, &row) {
        // Written over meanwhile, with a value of the right type (or none).
        return Ok(Outcome::Fixed);
    }
    let Some(value) = row.get(attr).cloned() else {
        return Ok(Outcome::Fixed);
    };
    let exactly = unchanged(attr.to_owned(), Some(value.clone()));
    let tombstone = key.range == format!("{}sv", layout.reserved());
    let remove = if tombstone {
        TransactAction::Delete {
            key: key.clone(),
            condition: exactly,
        }
    } else {
        TransactAction::Update {
            key: key.clone(),
            actions: vec![UpdateAction::Remove(attr.to_owned())],
            condition: exactly,
        }
    };
    let mut tx = Vec::new();
    // A lock or hold: not while an operation of that id is recorded (a number spelling an
    // id is the only value that could name one).
    let owner = match &value {
        Value::N(n)
            if (attr == layout.moving_attr() || attr == layout.held_attr())
                && !n.is_empty()
                && n.len() <= crate::layout::MAX_RANGE_KEY_BYTES =>
        {
            Some(n.clone())
        }
        _ => None,
    };
    if let Some(id) = &owner {
        tx.push(TransactAction::ConditionCheck {
            key: layout.intent_key(id),
            condition: Condition::NotExists,
        });
    }
    tx.push(remove);
    let sent = cx.transact_resending_conflicts(tx).await;
    match sent {
        Ok(()) => Ok(Outcome::Fixed),
        Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
            let now = cx.io().get_item(&key, true).await?;
            if !now.is_some_and(|r| r.get(attr) == Some(&value)) {
                return Ok(Outcome::Fixed);
            }
            Ok(Outcome::Left(match owner {
                Some(id) => format!("operation {id} is recorded: `resume` finishes it"),
                None => "the row kept changing concurrently: check and repair again".into(),
            }))
        }
        Err(e) => Err(e),
    }
}

/// Re-creates the missing listing rows of `path` and its ancestors, in transactions that
/// end with `anchor` (a check that the row needing them is still there), with the same
/// guards as a put: never under a row being removed or locked.
async fn relink<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    anchor: TransactAction,
) -> Result<Outcome> {
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        match write::link_with_state(cx, path, anchor.clone(), true, &[]).await {
            Ok(Attempt::Done) => return Ok(Outcome::Fixed),
            // The row that needed them is gone meanwhile: nothing left to reach.
            Err(e) if e.kind() == ErrorKind::ConditionFailed => return Ok(Outcome::Fixed),
            Err(e) if e.kind() == ErrorKind::Locked => {
                return Ok(Outcome::Left(
                    "inside a subtree a move, copy or deletion holds: `resume` finishes it".into(),
                ));
            }
            Err(e) => return Err(e),
            Ok(Attempt::Again) => {}
            Ok(Attempt::Wait) => backoff.wait().await,
            Ok(_) => {
                if !backoff.retry().await {
                    return Ok(Outcome::Left(format!(
                        "{} kept changing concurrently: check and repair again",
                        path.escaped()
                    )));
                }
            }
        }
    }
}

/// Brings the copies below the source of the stale copy at `path` up to the source: the
/// source is stamped with a new version (fenced: only if its versions are as read), then
/// propagated under an intent, as a write of the source would.
async fn refresh_stale<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    done: &mut HashSet<Path>,
) -> Result<Outcome> {
    let layout = &cx.inner.layout;
    let mut sources: Vec<Path> = Vec::new();
    for ty in denorm::target_types_at(cx, path) {
        for d in ty.denormalized {
            let depth = d.source_template().split('/').count();
            if depth < path.len() && !sources.contains(&path.prefix(depth)) {
                sources.push(path.prefix(depth));
            }
        }
    }
    // Sources nearest the root first: a chain's intermediate copies are refreshed before
    // they are copied further.
    sources.sort_by_key(Path::len);
    for source in sources {
        if !done.insert(source.clone()) {
            continue;
        }
        let guard = intent::record_propagation(cx, &source).await?;
        let key = layout.object_key(&source);
        if let Some(row) = cx.io().get_item(&key, true).await?
            && !row.contains(layout.link_attr())
        {
            let v = version_after(denorm::row_version(cx, &source, &row).unwrap_or(0));
            let stamp = vec![UpdateAction::Set(
                layout.source_version_attr(),
                Value::N(v.to_string()),
            )];
            let unchanged = exists_and(denorm::same_versions(cx, &source, &row));
            match cx.io().update_item(&key, stamp, unchanged).await {
                // Written meanwhile: that write propagates (or this intent does).
                Err(e) if e.kind() == ErrorKind::ConditionFailed => {}
                Err(e) => {
                    intent::release_intent(cx, &guard).await;
                    return Err(e);
                }
                Ok(_) => {}
            }
        }
        denorm::after_source_write(cx, Some(guard), &source, None).await?;
    }
    Ok(Outcome::Fixed)
}

/// Whether `v` is in part `i` of `n` (see [`Repair::part`]).
fn in_part(v: &Violation, i: u32, n: u32) -> bool {
    super::in_part(v.path.as_ref(), i, n)
}
