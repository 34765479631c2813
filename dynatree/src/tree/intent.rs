//! Intents: the record of an operation that spans many requests (a move, copy, subtree
//! deletion, re-parenting or propagation), and the protocol that runs it to its end whoever
//! started it: record, claim (owner token and lease), renew, set the phase, finish, and
//! [`Tree::resume`]. The operations themselves (`tree::moves`, `tree::denorm`) are its
//! clients: they write only under a [`Guard`], in transactions that check that the intent
//! still names the caller as its owner (invariant 3 of [`consistency`](crate::consistency),
//! argued in "Moving, copying and deleting subtrees").
//!
//! An intent record carries the operation it finishes and the phase it has reached as
//! [`Operation`] and [`Phase`], stored in the record's `op` and `phase` attributes.

use std::fmt;

use futures::TryStreamExt;
use serde::{Serialize, Serializer};

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::layout::RANGE_KEY;
use crate::path::Path;
use crate::retry::Backoff;
use crate::storage::{Condition, Query, Storage, TransactAction};
use crate::stream::query_pages;
use crate::tree::Ctx;

use super::Tree;
use super::clock::{after_ms, now_ms};
use super::moves::{LinkPolicy, MoveReport, run};

macro_rules! stored_names {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $stored:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// The name stored in the intent record (and shown by the command line).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $stored,)+
                }
            }

            /// The value of a stored name; `None` for a name this version does not know.
            pub(crate) fn parse(s: &str) -> Option<Self> {
                match s {
                    $($stored => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}

stored_names! {
    /// The operation an intent record finishes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ops::Operation;
    ///
    /// assert_eq!(Operation::Move.to_string(), "move");
    /// assert_eq!(Operation::Reparent, "reparent");
    /// ```
    Operation {
        /// [`Tree::move_subtree`](crate::Tree::move_subtree).
        Move = "move",
        /// [`Tree::copy_subtree`](crate::Tree::copy_subtree).
        Copy = "copy",
        /// [`Tree::delete_subtree`](crate::Tree::delete_subtree).
        Delete = "delete",
        /// [`Tree::delete_node`](crate::Tree::delete_node) with
        /// [`OnChildren::Reparent`](crate::ops::OnChildren::Reparent).
        Reparent = "reparent",
        /// A change of a source of denormalized fields whose copies are not all written yet
        /// (see [`Denormalized`](crate::denorm::Denormalized)).
        Propagate = "propagate",
    }
}

stored_names! {
    /// How far a recorded operation has come.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ops::Phase;
    ///
    /// assert_eq!(Phase::Unlock.as_str(), "unlock");
    /// ```
    Phase {
        /// Walking and locking the source (then holding its objects).
        Lock = "lock",
        /// Writing the destination.
        Copy = "copy",
        /// Moving a re-parented node's children up, one recorded move each.
        Move = "move",
        /// Removing the source.
        Delete = "delete",
        /// Releasing the holds on objects, then the locks on listing rows.
        Unlock = "unlock",
        /// Refused: undoing what was written.
        Rollback = "rollback",
        /// Bringing denormalized copies up to their source.
        Propagate = "propagate",
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// The recorded operations not finished yet (consistent read of the intent records).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::{Fault, FaultRule, FakeTable, Op};
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// # tree.create_table().await?;
    /// tree.put(["org", "eng", "alice"], &V { v: 1 }).await?;
    /// assert!(tree.pending().await?.is_empty());
    /// // The move fails part-way (a backend error): it stays recorded.
    /// table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::TransactWriteItems).nth(1));
    /// assert!(tree.move_subtree(["org", "eng"], ["org", "tech"]).await.is_err());
    /// let pending = tree.pending().await?;
    /// assert_eq!(pending.len(), 1);
    /// assert_eq!((pending[0].op.as_str(), pending[0].to.to_string().as_str()), ("move", "/org/tech"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Backend errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// Through a [scope](Tree::scope): the operations whose source and destination are inside
    /// it, with relative paths (the records of every scope share one partition).
    pub async fn pending(&self) -> Result<Vec<Intent>> {
        // Through a scope: its own operations, with relative paths.
        self.cx
            .call(async { self.scoped_intents(recorded(&self.cx).await?) })
            .await
    }

    /// Finishes every recorded operation (after a crash, from any process): moves, copies,
    /// subtree deletions, re-parenting deletes, and propagations of denormalized fields (which
    /// need the target types registered on this tree, see
    /// [`TreeBuilder::denormalized`](crate::TreeBuilder::denormalized)).
    ///
    /// An operation another call is running now (its owner's lease is live) is waited for;
    /// one whose owner died (the lease ran out) is taken over. An operation that can no
    /// longer be carried out (its refusal was recorded but not yet undone, or it is refused
    /// now) is rolled back, which is not an error of `resume`. Returns the reports of the
    /// operations this call finished.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::{Fault, FaultRule, FakeTable, Op};
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// # tree.create_table().await?;
    /// tree.put(["org", "eng", "alice"], &V { v: 1 }).await?;
    /// // The move fails part-way (a backend error)...
    /// table.inject_rule(FaultRule::new(Fault::Fail).operation(Op::TransactWriteItems).nth(1));
    /// assert!(tree.move_subtree(["org", "eng"], ["org", "tech"]).await.is_err());
    /// // ...and any process finishes it.
    /// let done = Tree::new(table.clone()).resume().await?;
    /// assert_eq!(done.len(), 1);
    /// assert!(tree.pending().await?.is_empty());
    /// assert_eq!(tree.get(["org", "tech", "alice"]).await?, Some(V { v: 1 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree); every operation is tried, and the first error
    /// is returned.
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn resume(&self) -> Result<Vec<MoveReport>> {
        self.cx
            .call(async {
                let (reports, first_error) =
                    drive_all(&self.base().cx, self.pending().await?).await;
                let out = reports
                    .into_iter()
                    .map(|r| self.leave_report(r))
                    .collect::<Result<Vec<_>>>()?;
                first_error.map_or(Ok(out), Err)
            })
            .await
    }
}

/// Every operation recorded in the table (absolute paths), read consistently.
pub(crate) async fn recorded<S: Storage + 'static>(cx: &Ctx<S>) -> Result<Vec<Intent>> {
    let q = Query::new(cx.inner.layout.intents_hash()).consistent(true);
    let pages: Vec<crate::storage::Page> = query_pages(cx.io(), q, None).try_collect().await?;
    pages
        .into_iter()
        .flat_map(|p| p.items)
        .filter(|item| !is_lane(cx, item))
        .map(|item| decode_intent(cx, &item))
        .collect()
}

/// Whether `item`, read from the intents partition, is a lane row of an intent rather than
/// an intent record (see [`add_lanes`]).
pub(crate) fn is_lane<S: Storage + 'static>(cx: &Ctx<S>, item: &Item) -> bool {
    crate::storage::Key::from_item(item).is_some_and(|k| cx.inner.layout.is_intent_lane(&k))
}

/// Drives every one of `intents` to its end (see [`drive`]): the reports of those that
/// finished here (absolute paths), and the first error, after trying them all.
async fn drive_all<S: Storage + 'static>(
    cx: &Ctx<S>,
    intents: Vec<Intent>,
) -> (Vec<MoveReport>, Option<Error>) {
    let mut out = Vec::new();
    let mut first_error = None;
    for intent in intents {
        match drive(cx, &intent.id).await {
            Ok(Some(Outcome::Done(report))) => out.push(report),
            // Finished elsewhere, or refused and rolled back: nothing left to do.
            Ok(None | Some(Outcome::RolledBack(_))) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    (out, first_error)
}

/// A recorded operation not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// Its id.
    pub id: String,
    /// The operation it finishes.
    pub op: Operation,
    /// The source.
    pub from: Path,
    /// The destination.
    pub to: Path,
    /// How far it has come.
    pub phase: Phase,
    pub(crate) links: LinkPolicy,
    /// The token of the call that runs it now, if any, and until when (ms since the epoch) it
    /// may: the owner's lease.
    pub(crate) owner: Option<String>,
    pub(crate) lease: u64,
    /// How many lane rows it has (0: its transactions check the record itself).
    pub(crate) lanes: usize,
    /// Why it was refused (`"Kind: detail"`), once it is being rolled back.
    pub(crate) refusal: Option<String>,
}

impl Intent {
    /// Whether nobody runs it: no owner, or the owner's lease ran out before `now` (ms).
    pub(crate) fn abandoned(&self, now: u64) -> bool {
        self.owner.is_none() || self.lease < now
    }

    /// Whether it is a move that points the links into its source at the destination before
    /// its intent goes (`LinkPolicy::Rewrite`; a re-parenting's children move so).
    pub(crate) fn rewrites_links(&self) -> bool {
        self.op == Operation::Move && self.links == LinkPolicy::Rewrite
    }
}

/// How an owned run of an intent ended.
pub(crate) enum Outcome {
    Done(MoveReport),
    /// Refused, and undone: the refusal.
    RolledBack(Error),
}

/// Records that the source of denormalized fields at `path` is about to change: an intent
/// owned by this call, which [`run_owned`](run_owned) (or a `resume`) finishes by
/// bringing every copy below `path` up to the source as it is then.
pub(crate) async fn record_propagation<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Guard> {
    record(
        cx,
        Operation::Propagate,
        path.clone(),
        path.clone(),
        Phase::Propagate,
        LinkPolicy::Ignore,
    )
    .await
}

/// Records a new intent owned by this call: one PutItem.
pub(crate) async fn record<S: Storage + 'static>(
    cx: &Ctx<S>,
    op: Operation,
    from: Path,
    to: Path,
    phase: Phase,
    links: LinkPolicy,
) -> Result<Guard> {
    let token = new_token();
    let intent = Intent {
        id: format!("{:013}-{:016x}", now_ms(), fastrand::u64(..)),
        op,
        from,
        to,
        phase,
        links,
        owner: Some(token.clone()),
        lease: after_ms(cx.inner.config.lease),
        lanes: 0,
        refusal: None,
    };
    write_inside(
        cx,
        encode_intent(cx, &intent),
        Condition::NotExists,
        Vec::new(),
    )
    .await?;
    // The operation is recorded: a step of the call (see `retry::progressed`).
    crate::retry::progressed();
    Ok(Guard::new(cx, intent, token))
}

/// Writes the intent record `item` under `condition`, with `lanes` (writes of its lane rows,
/// unconditional: see [`add_lanes`]): one PutItem, or, with lanes or inside other
/// operations (a re-parenting's child move), a transaction that also checks that each of them
/// is still the caller's, so that a caller whose enclosing operation was taken over neither
/// records nor claims an intent for a later `resume` to find owned by it. The record's
/// condition failing is [`ErrorKind::ConditionFailed`]; an enclosing operation taken over is
/// [`ErrorKind::TakenOver`]; a conflict with a write of an enclosing intent (its lease renewed)
/// or with a transaction in flight on a lane is sent again.
async fn write_inside<S: Storage + 'static>(
    cx: &Ctx<S>,
    item: Item,
    condition: Condition,
    lanes: Vec<TransactAction>,
) -> Result<()> {
    if cx.enclosing.is_empty() && lanes.is_empty() {
        return cx.io().put_item(item, condition).await;
    }
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        let mut tx = vec![TransactAction::Put {
            item: item.clone(),
            condition: condition.clone(),
        }];
        tx.extend(lanes.iter().cloned());
        tx.extend(enclosing_checks(cx));
        match cx.io().transact_write(tx).await {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                let reasons = e.cancellation_reasons();
                if reasons
                    .iter()
                    .skip(1)
                    .any(crate::error::CancellationReason::is_condition_failed)
                {
                    return Err(taken_over().with_source(e));
                }
                if reasons
                    .first()
                    .is_some_and(crate::error::CancellationReason::is_condition_failed)
                {
                    return Err(Error::new(
                        ErrorKind::ConditionFailed,
                        "the intent record is not as read",
                    )
                    .with_source(e));
                }
                // A conflict with a write of the enclosing intent (its lease renewed):
                // nothing was applied; again.
                if !backoff.retry().await {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The checks that every enclosing operation of `cx` is still owned by the caller that
/// started this one (see [`Ctx::inside`]): part of every fenced write of an operation.
pub(crate) fn enclosing_checks<S: Storage + 'static>(
    cx: &Ctx<S>,
) -> impl Iterator<Item = TransactAction> + '_ {
    cx.enclosing
        .iter()
        .map(|(key, token)| TransactAction::ConditionCheck {
            key: key.clone(),
            condition: owned_by(cx, token),
        })
}

/// Whether the intent of `g` is still owned by this call (a consistent read): `false` once
/// another call took it over, or it is gone.
pub(crate) async fn still_owned<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<bool> {
    let key = cx.inner.layout.intent_key(&g.id());
    Ok(match cx.io().get_item(&key, true).await? {
        Some(item) => decode_intent(cx, &item)?.owner.as_deref() == Some(g.token.as_str()),
        None => false,
    })
}

/// Records a new intent owned by this call (before the first write of the operation),
/// then runs it to its end.
pub(crate) async fn record_and_run<S: Storage + 'static>(
    cx: &Ctx<S>,
    op: Operation,
    from: Path,
    to: Path,
    links: LinkPolicy,
) -> Result<MoveReport> {
    let guard = record(cx, op, from, to, Phase::Lock, links).await?;
    match run_owned(cx, &guard).await? {
        Outcome::Done(report) => Ok(report),
        Outcome::RolledBack(e) => Err(e),
    }
}

/// Joins the recorded operation `id` (the same call made again): runs it if nobody does,
/// else waits for it.
pub(crate) async fn join<S: Storage + 'static>(cx: &Ctx<S>, id: &str) -> Result<MoveReport> {
    match drive(cx, id).await? {
        Some(Outcome::Done(report)) => Ok(report),
        Some(Outcome::RolledBack(e)) => Err(e),
        // Run to its end meanwhile by the call that owned it: completed or refused,
        // which this call cannot tell.
        None => Err(Error::new(
            ErrorKind::TakenOver,
            format!("operation {id} was run to its end by another call, which has its outcome"),
        )),
    }
}

/// Claims the intent `id` and runs it to its end. `None` if it is gone (finished by
/// someone else) or was rolled back.
pub(crate) async fn drive<S: Storage + 'static>(cx: &Ctx<S>, id: &str) -> Result<Option<Outcome>> {
    let Some(guard) = claim(cx, id).await? else {
        return Ok(None);
    };
    run_owned(cx, &guard).await.map(Some)
}

/// Runs an owned intent; on failure, gives up the ownership so that a `resume` elsewhere
/// need not wait for the lease.
pub(crate) async fn run_owned<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<Outcome> {
    let result = run(cx, g).await;
    if result.is_err() {
        release_intent(cx, g).await;
    }
    result
}

/// Gives up the ownership of an intent (after a failure), so that a `resume` elsewhere
/// need not wait for the lease. Best effort: if it fails, the lease runs out instead.
pub(crate) async fn release_intent<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) {
    let intent = g.snapshot();
    if intent.owner.is_some() {
        // Only the owner and the lease go: the rest stays as stored, which may be ahead of
        // this call's snapshot (a write whose answer was lost, such as lanes added).
        let _ = cx
            .io()
            .update_item(
                &cx.inner.layout.intent_key(&intent.id),
                vec![
                    crate::storage::UpdateAction::Remove(owner_attr(cx)),
                    crate::storage::UpdateAction::Remove(cx.inner.layout.intent_attr("lease")),
                ],
                owned_by(cx, &g.token),
            )
            .await;
    }
}

/// Becomes the owner of intent `id`: at once if nobody owns it or the owner's lease ran
/// out; after waiting, while another call runs it. `None` if it disappears meanwhile.
pub(crate) async fn claim<S: Storage + 'static>(cx: &Ctx<S>, id: &str) -> Result<Option<Guard>> {
    let key = cx.inner.layout.intent_key(id);
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        let Some(item) = cx.io().get_item(&key, true).await? else {
            return Ok(None);
        };
        let intent = decode_intent(cx, &item)?;
        let now = now_ms();
        if intent.owner.is_some() && intent.lease >= now {
            // Someone is running it: wait for it to finish, or for its lease to run out.
            let left = std::time::Duration::from_millis(intent.lease - now + 1);
            let nap = cx
                .inner
                .config
                .retry
                .delay(backoff.next_wait())
                .max(std::time::Duration::from_millis(1));
            crate::retry::sleep_for(nap.min(left)).await;
            continue;
        }
        let token = new_token();
        // Exactly the record read: a slow owner that is still alive moves its phase on or
        // renews its lease without changing its token, and taking over from a stale read
        // would write an older phase back over its progress (and roll it back).
        let condition = cx
            .inner
            .layout
            .intent_as_read(&item, intent.owner.is_none());
        let mut mine = intent.clone();
        mine.owner = Some(token.clone());
        mine.lease = after_ms(cx.inner.config.lease);
        // Every lane changes hands in the same transaction: once it lands, a transaction of
        // the old owner fails its lane's check, whichever lane it is in.
        let lanes = lane_rows(cx, id, 1..=intent.lanes, &token);
        match write_inside(cx, encode_intent(cx, &mine), condition, lanes).await {
            Ok(()) => return Ok(Some(Guard::new(cx, mine, token))),
            Err(e) if e.kind() == ErrorKind::ConditionFailed => {}
            Err(e) => return Err(e),
        }
    }
}

/// Whether the intent `id` is a re-parenting (false if it is gone).
pub(crate) async fn is_reparenting<S: Storage + 'static>(cx: &Ctx<S>, id: &str) -> Result<bool> {
    let key = cx.inner.layout.intent_key(id);
    Ok(match cx.io().get_item(&key, true).await? {
        Some(item) => decode_intent(cx, &item)?.op == Operation::Reparent,
        None => false,
    })
}

/// A lost race of an intent's owner: counts it in `backoff` and sleeps its delay (see
/// [`owner_nap`]); `false`, at once, once the budget is spent.
pub(crate) async fn owner_retry<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    backoff: &mut Backoff,
) -> Result<bool> {
    match backoff.next_retry() {
        Some(n) => {
            owner_nap(cx, g, cx.inner.config.retry.delay(n)).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// An owner's wait for a live removal or hold (not a failed try), counted in `backoff`.
pub(crate) async fn owner_wait<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    backoff: &mut Backoff,
) -> Result<()> {
    let n = backoff.next_wait();
    owner_nap(cx, g, cx.inner.config.retry.delay(n)).await
}

/// An owner sleeps `d`, never longer than a third of its lease, and renews the lease if due
/// after it.
pub(crate) async fn owner_nap<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    d: std::time::Duration,
) -> Result<()> {
    crate::retry::sleep_for(d.min(cx.inner.config.lease / 3)).await;
    renew_if_due(cx, g).await
}

/// Runs `work` (a child operation of a re-parenting) while renewing `g`'s lease every
/// third of it, so a long child does not let the parent's lease run out.
pub(crate) async fn renewing<S: Storage + 'static, T>(
    cx: &Ctx<S>,
    g: &Guard,
    work: impl Future<Output = T>,
) -> Result<T> {
    let period = (cx.inner.config.lease / 3).max(std::time::Duration::from_millis(1));
    // Both are polled together: the work goes on while a renewal is in flight.
    let renewals = async {
        loop {
            crate::retry::sleep_for(period).await;
            if let Err(e) = renew_if_due(cx, g).await {
                return e;
            }
        }
    };
    match futures::future::select(std::pin::pin!(work), std::pin::pin!(renewals)).await {
        futures::future::Either::Left((out, _)) => Ok(out),
        futures::future::Either::Right((e, _)) => Err(e),
    }
}

/// Records a new phase (renewing the lease), conditional on our ownership.
pub(crate) async fn set_phase<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    phase: Phase,
) -> Result<()> {
    let mut intent = g.snapshot();
    intent.phase = phase;
    intent.lease = after_ms(cx.inner.config.lease);
    write_intent(cx, g, intent).await?;
    // A phase recorded: a step of the call (a lease renewed is none).
    crate::retry::progressed();
    Ok(())
}

/// Renews the lease when half of it has run out.
pub(crate) async fn renew_if_due<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<()> {
    let mut intent = g.snapshot();
    let half = u64::try_from(cx.inner.config.lease.as_millis() / 2).unwrap_or(u64::MAX);
    if now_ms().saturating_add(half) < intent.lease {
        return Ok(());
    }
    intent.lease = after_ms(cx.inner.config.lease);
    write_intent(cx, g, intent).await
}

/// Writes the intent record of `g` as `intent` (a new phase, a renewed lease), conditional on
/// this call still owning it; inside other operations (a re-parenting's child move), also on
/// their still being the caller's ([`write_inside`]), so that a caller whose enclosing
/// operation was taken over stops renewing the leases of its child moves and the new owner
/// can take them over as soon as they run out.
pub(crate) async fn write_intent<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    intent: Intent,
) -> Result<()> {
    write_intent_with(cx, g, intent, Vec::new()).await
}

/// [`write_intent`], writing the lane rows `lanes` in the same transaction.
async fn write_intent_with<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    intent: Intent,
    lanes: Vec<TransactAction>,
) -> Result<()> {
    match write_inside(
        cx,
        encode_intent(cx, &intent),
        owned_by(cx, &g.token),
        lanes,
    )
    .await
    {
        Ok(()) => {
            g.set(intent);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::ConditionFailed => Err(taken_over().with_source(e)),
        Err(e) => Err(e),
    }
}

/// The most lanes an intent has ([`TreeBuilder::subtree_transactions_in_flight`]
/// (crate::TreeBuilder::subtree_transactions_in_flight) is capped at it): a takeover writes
/// the record and every lane in one transaction of at most 100 actions, the checks of
/// enclosing operations included.
pub(crate) const MAX_LANES: usize = 64;

/// The lane rows `lanes` of intent `id`, owned by `token`: unconditional Puts (a lane row is
/// written only with its record, in one transaction conditional on the record).
fn lane_rows<S: Storage + 'static>(
    cx: &Ctx<S>,
    id: &str,
    lanes: std::ops::RangeInclusive<usize>,
    token: &str,
) -> Vec<TransactAction> {
    lanes
        .map(|k| {
            let mut item = cx.inner.layout.intent_lane_key(id, k).into_item();
            item.insert(owner_attr(cx), Value::S(token.to_owned()));
            TransactAction::Put {
                item,
                condition: Condition::Always,
            }
        })
        .collect()
}

/// Gives the intent of `g` lanes enough for `transactions` transactions in flight at once
/// (at most [`TreeBuilder::subtree_transactions_in_flight`]
/// (crate::TreeBuilder::subtree_transactions_in_flight)), if it has fewer: one transaction
/// that writes the record (its lane count, conditional on our ownership) and the new lane
/// rows. Call it only while none of the operation's transactions is in flight. An operation
/// inside another (a re-parenting's child move) keeps to its record: every transaction of
/// it checks the enclosing record too, so they could not be in flight together anyway.
///
/// See "Requests in flight" in `moves.md` for why lanes keep invariant 3.
pub(crate) async fn add_lanes<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    transactions: usize,
) -> Result<()> {
    let want = transactions.min(cx.inner.config.tx_in_flight.min(MAX_LANES));
    let mut intent = g.snapshot();
    if want <= 1 || want <= intent.lanes || !cx.enclosing.is_empty() {
        return Ok(());
    }
    let rows = lane_rows(cx, &intent.id, intent.lanes + 1..=want, &g.token);
    intent.lanes = want;
    intent.lease = after_ms(cx.inner.config.lease);
    write_intent_with(cx, g, intent, rows).await?;
    g.lanes.open(want);
    Ok(())
}

/// Drops the intent record (and its lanes, in the same transaction): the operation is over.
pub(crate) async fn finish<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<()> {
    let intent = g.snapshot();
    let key = cx.inner.layout.intent_key(&intent.id);
    let result = if intent.lanes == 0 {
        cx.io().delete_item(&key, owned_by(cx, &g.token)).await
    } else {
        finish_with_lanes(cx, g, &intent).await
    };
    match result {
        Err(e) if e.kind() == ErrorKind::ConditionFailed => Err(taken_over().with_source(e)),
        other => {
            if other.is_ok() {
                g.release();
            }
            other
        }
    }
}

/// [`finish`] of an intent with lanes: one transaction deleting the record (conditional on
/// our ownership) and every lane.
async fn finish_with_lanes<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    intent: &Intent,
) -> Result<()> {
    let layout = &cx.inner.layout;
    let mut tx = vec![TransactAction::Delete {
        key: layout.intent_key(&intent.id),
        condition: owned_by(cx, &g.token),
    }];
    tx.extend((1..=intent.lanes).map(|k| TransactAction::Delete {
        key: layout.intent_lane_key(&intent.id, k),
        condition: Condition::Always,
    }));
    tx.extend(enclosing_checks(cx));
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        match cx.io().transact_write(tx.clone()).await {
            Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                if e.cancellation_reasons()
                    .iter()
                    .any(crate::error::CancellationReason::is_condition_failed)
                {
                    return Err(Error::new(
                        ErrorKind::ConditionFailed,
                        "the intent record is not ours",
                    )
                    .with_source(e));
                }
                if !backoff.retry().await {
                    return Err(e);
                }
            }
            other => return other,
        }
    }
}

pub(crate) fn owner_attr<S: Storage + 'static>(cx: &Ctx<S>) -> String {
    cx.inner.layout.intent_attr("owner")
}

pub(crate) fn owned_by<S: Storage + 'static>(cx: &Ctx<S>, token: &str) -> Condition {
    cx.inner.layout.intent_owned_by(token)
}

pub(crate) fn encode_intent<S: Storage + 'static>(cx: &Ctx<S>, intent: &Intent) -> Item {
    let attr = |field: &str| cx.inner.layout.intent_attr(field);
    let mut item = cx.inner.layout.intent_key(&intent.id).into_item();
    item.insert(attr("op"), Value::S(intent.op.as_str().to_owned()));
    item.insert(
        attr("from"),
        Value::S(cx.inner.layout.encode_target(&intent.from)),
    );
    let to = if intent.to.is_root() {
        String::new()
    } else {
        cx.inner.layout.encode_target(&intent.to)
    };
    item.insert(attr("to"), Value::S(to));
    item.insert(attr("phase"), Value::S(intent.phase.as_str().to_owned()));
    let links = match intent.links {
        LinkPolicy::Ignore => "ignore",
        LinkPolicy::Report => "report",
        LinkPolicy::Rewrite => "rewrite",
    };
    item.insert(attr("links"), Value::S(links.to_owned()));
    if let Some(owner) = &intent.owner {
        item.insert(owner_attr(cx), Value::S(owner.clone()));
        item.insert(attr("lease"), Value::N(intent.lease.to_string()));
    }
    if intent.lanes > 0 {
        item.insert(attr("lanes"), Value::N(intent.lanes.to_string()));
    }
    if let Some(refusal) = &intent.refusal {
        item.insert(attr("refusal"), Value::S(refusal.clone()));
    }
    item
}

pub(crate) fn decode_intent<S: Storage + 'static>(cx: &Ctx<S>, item: &Item) -> Result<Intent> {
    let attr = |field: &str| cx.inner.layout.intent_attr(field);
    let field = |n: &str| {
        item.get_s(&attr(n))
            .map(str::to_owned)
            .ok_or_else(|| Error::new(ErrorKind::Backend, format!("intent record without `{n}`")))
    };
    let unknown = |n: &str| {
        Error::new(
            ErrorKind::Backend,
            format!("intent record with an unknown `{n}`"),
        )
    };
    let lease = match item.get(&attr("lease")) {
        Some(Value::N(n)) => n.parse().unwrap_or(0),
        _ => 0,
    };
    let lanes = match item.get(&attr("lanes")) {
        Some(Value::N(n)) => n.parse::<usize>().unwrap_or(0).min(MAX_LANES),
        _ => 0,
    };
    Ok(Intent {
        lanes,
        id: item.get_s(RANGE_KEY).unwrap_or_default().to_owned(),
        op: Operation::parse(&field("op")?).ok_or_else(|| unknown("op"))?,
        from: cx.inner.layout.decode_target(&field("from")?)?,
        // A re-parenting of a top-level node moves its children to the root: stored empty.
        to: match field("to")?.as_str() {
            "" => Path::root(),
            to => cx.inner.layout.decode_target(to)?,
        },
        phase: Phase::parse(&field("phase")?).ok_or_else(|| unknown("phase"))?,
        links: match field("links")?.as_str() {
            "ignore" => LinkPolicy::Ignore,
            "rewrite" => LinkPolicy::Rewrite,
            _ => LinkPolicy::Report,
        },
        owner: item.get_s(&owner_attr(cx)).map(str::to_owned),
        lease,
        refusal: item.get_s(&attr("refusal")).map(str::to_owned),
    })
}

pub(crate) fn taken_over() -> Error {
    Error::new(
        ErrorKind::TakenOver,
        "another call took the operation over after this call's lease ran out",
    )
}

/// A refusal as recorded in the intent: the kind's name, then the detail.
pub(crate) fn encode_refusal(e: &Error) -> String {
    format!("{:?}: {e}", e.kind())
}

/// The refusal recorded in an intent, as the error it was.
pub(crate) fn decode_refusal(s: Option<&str>) -> Error {
    let s = s.unwrap_or("Conflict: refused");
    let (kind, detail) = s.split_once(": ").unwrap_or(("Conflict", s));
    let kind = [
        ErrorKind::Locked,
        ErrorKind::AlreadyExists,
        ErrorKind::NotFound,
        ErrorKind::InvalidPath,
        ErrorKind::ItemTooLarge,
        ErrorKind::InvalidValue,
        ErrorKind::InvalidArgument,
        ErrorKind::Validation,
        ErrorKind::Conflict,
    ]
    .into_iter()
    .find(|k| format!("{k:?}") == kind)
    .unwrap_or(ErrorKind::Conflict);
    Error::new(
        kind,
        format!("the operation was refused and rolled back ({detail})"),
    )
}

/// A fresh owner token.
pub(crate) fn new_token() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// An intent this call owns, with its current recorded state.
#[derive(Debug)]
pub(crate) struct Guard {
    intent: std::sync::Mutex<Intent>,
    pub(crate) token: String,
    /// The lanes its transactions take turns on.
    pub(crate) lanes: Lanes,
}

impl Guard {
    /// An intent owned by this call: its transactions in flight at once are at most its
    /// lanes and the setting; inside another operation, one (each checks the enclosing
    /// record too, so they could not be in flight together).
    fn new<S: Storage + 'static>(cx: &Ctx<S>, intent: Intent, token: String) -> Self {
        let cap = if cx.enclosing.is_empty() {
            cx.inner.config.tx_in_flight
        } else {
            1
        };
        let lanes = Lanes::new(intent.lanes, cap);
        Self {
            intent: std::sync::Mutex::new(intent),
            token,
            lanes,
        }
    }

    pub(crate) fn snapshot(&self) -> Intent {
        self.intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn id(&self) -> String {
        self.snapshot().id
    }

    pub(crate) fn set(&self, intent: Intent) {
        *self
            .intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = intent;
    }

    /// The intent is gone: nothing to give back on failure.
    pub(crate) fn release(&self) {
        self.intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .owner = None;
    }
}

/// The lanes of an owned intent that are free: a transaction of the operation takes one
/// (waiting while all are taken), checks that lane's row, and gives it back once it has its
/// answer. So no two transactions of the operation in flight check the same row. Lane 0 is
/// the intent record itself, the only lane of an intent without lane rows.
///
/// How many may be taken at once also follows the table's answers: a throttled transaction
/// halves it (its rows share a partition with the others of its level, whose limit it met),
/// and each one that lands adds one back, up to the number of lanes.
#[derive(Debug)]
pub(crate) struct Lanes {
    free: std::sync::Mutex<Vec<usize>>,
    /// One permit per transaction that may start now.
    permits: tokio::sync::Semaphore,
    /// How many lane rows there are (0: the record is the only lane).
    rows: std::sync::atomic::AtomicUsize,
    /// At most this many in flight, whatever the lanes (the caller's setting).
    cap: usize,
    flow: std::sync::Mutex<Flow>,
}

/// How many transactions may be in flight, and how many permits are to be forgotten as they
/// come back (the allowance was cut while they were taken).
#[derive(Debug)]
struct Flow {
    allowed: usize,
    debt: usize,
    /// Lanes taken now.
    held: usize,
}

/// What a throttled transaction of an operation on lanes does next. The throttle halved the
/// transactions allowed in flight; only one left alone in flight spends the call's retry
/// budget, so that the transactions of one wave do not spend it together while the
/// operation is only finding its pace, and a call whose transactions never land still stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Throttle {
    /// More are in flight than now allowed: give the lane back and queue for one again.
    Yield,
    /// Others are in flight too: keep the lane and wait (no retry spent).
    Wait,
    /// Alone in flight: keep the lane and retry, spending the budget.
    Spend,
}

/// A lane taken from [`Lanes`], given back when dropped.
pub(crate) struct Lane<'a> {
    lanes: &'a Lanes,
    k: usize,
    permit: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl Lanes {
    fn new(rows: usize, cap: usize) -> Self {
        let free: Vec<usize> = if rows == 0 {
            vec![0]
        } else {
            (1..=rows).rev().collect()
        };
        let cap = cap.max(1);
        let allowed = free.len().min(cap);
        Self {
            permits: tokio::sync::Semaphore::new(allowed),
            rows: std::sync::atomic::AtomicUsize::new(rows),
            cap,
            flow: std::sync::Mutex::new(Flow {
                allowed,
                debt: 0,
                held: 0,
            }),
            free: std::sync::Mutex::new(free),
        }
    }

    fn rows(&self) -> usize {
        self.rows.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn flow(&self) -> std::sync::MutexGuard<'_, Flow> {
        self.flow
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn free(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One permit fewer in circulation: a free one now, or the next to come back.
    fn shrink_one(&self, flow: &mut Flow) {
        match self.permits.try_acquire() {
            Ok(p) => p.forget(),
            Err(_) => flow.debt += 1,
        }
    }

    /// One permit more in circulation.
    fn grow_one(&self, flow: &mut Flow) {
        if flow.debt > 0 {
            flow.debt -= 1;
        } else {
            self.permits.add_permits(1);
        }
    }

    /// How many transactions may be in flight at once.
    pub(crate) fn count(&self) -> usize {
        self.rows().max(1).min(self.cap)
    }

    /// The lane rows are now `1..=rows` (there were fewer).
    fn open(&self, rows: usize) {
        let mut flow = self.flow();
        let old = self.rows();
        if rows <= old {
            return;
        }
        if old == 0 {
            // The record stops being a lane: free, it leaves the free lanes now; in flight,
            // it is not given back (see `Drop`). Its permit goes either way.
            self.free().retain(|&k| k != 0);
            self.shrink_one(&mut flow);
            flow.allowed = flow.allowed.saturating_sub(1);
        }
        self.free().extend((old + 1..=rows).rev());
        self.rows.store(rows, std::sync::atomic::Ordering::SeqCst);
        while flow.allowed < self.count() {
            self.grow_one(&mut flow);
            flow.allowed += 1;
        }
    }

    /// A transaction was throttled: half as many may be in flight from now on (at least one).
    /// What the transaction should do next: see [`Throttle`].
    pub(crate) fn throttled(&self) -> Throttle {
        let mut flow = self.flow();
        let keep = (flow.allowed / 2).max(1);
        for _ in keep..flow.allowed {
            self.shrink_one(&mut flow);
        }
        flow.allowed = keep;
        if flow.debt > 0 {
            Throttle::Yield
        } else if flow.held > 1 {
            Throttle::Wait
        } else {
            Throttle::Spend
        }
    }

    /// A transaction landed: one more may be in flight, up to the number of lanes.
    pub(crate) fn landed(&self) {
        let mut flow = self.flow();
        if flow.allowed < self.count() {
            flow.allowed += 1;
            self.grow_one(&mut flow);
        }
    }

    /// Takes a free lane, waiting for one.
    pub(crate) async fn take(&self) -> Lane<'_> {
        // The semaphore is never closed: `acquire` cannot fail.
        let permit = self.permits.acquire().await.ok();
        self.flow().held += 1;
        // A permit is in circulation only while a lane is free for it.
        let k = self.free().pop().unwrap_or(0);
        Lane {
            lanes: self,
            k,
            permit,
        }
    }
}

impl Lane<'_> {
    /// Which lane: 0 for the record itself, else a lane row.
    pub(crate) fn index(&self) -> usize {
        self.k
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let mut flow = self.lanes.flow();
        flow.held -= 1;
        // The record stops being a lane once there are lane rows.
        if !(self.k == 0 && self.lanes.rows() > 0) {
            self.lanes.free().push(self.k);
        }
        if flow.debt > 0 {
            flow.debt -= 1;
            permit.forget();
        } else {
            drop(permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random takes, answers (landed or throttled, a throttled lane kept or given
    /// back), and lanes opened mid-way, checked after every step: no lane taken twice, lane 0
    /// never taken once there are lane rows, never more permits free than lanes free, the
    /// permit count equal to the allowance plus the debt, and a take never waiting with
    /// nothing in flight; at the end, every lane free and `count()` permits.
    #[test]
    fn lanes_keep_their_counts_over_random_cycles() {
        use futures::FutureExt;
        for seed in 0..400u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let cap = [1, 2, 3, 4, 16][rng.usize(..5)];
            let start = [0, 0, 1, 2, 5][rng.usize(..5)];
            let lanes = Lanes::new(start, cap);
            let mut held: Vec<Lane<'_>> = Vec::new();
            for step in 0..300 {
                let ctx = format!("seed {seed} step {step} cap {cap} rows {}", lanes.rows());
                match rng.usize(..10) {
                    0..=3 => match lanes.take().now_or_never() {
                        Some(l) => {
                            assert!(
                                !held.iter().any(|h| h.index() == l.index()),
                                "{ctx}: lane {} taken twice",
                                l.index()
                            );
                            if lanes.rows() > 0 {
                                assert!(
                                    (1..=lanes.rows()).contains(&l.index()),
                                    "{ctx}: lane {} taken with {} lane rows",
                                    l.index(),
                                    lanes.rows()
                                );
                            }
                            held.push(l);
                        }
                        None => {
                            assert!(!held.is_empty(), "{ctx}: a take waits with none in flight")
                        }
                    },
                    4..=5 if !held.is_empty() => {
                        let l = held.swap_remove(rng.usize(..held.len()));
                        drop(l);
                        lanes.landed();
                    }
                    6 if !held.is_empty() => {
                        // Throttled: kept through the wait (stays in `held`), or its task
                        // fails and gives it back.
                        let _ = lanes.throttled();
                        if rng.bool() {
                            let l = held.swap_remove(rng.usize(..held.len()));
                            drop(l);
                        }
                    }
                    7 => {
                        let _ = lanes.throttled();
                    }
                    8 if rng.usize(..6) == 0 => {
                        let more = lanes.rows() + 1 + rng.usize(..4);
                        lanes.open(more.min(MAX_LANES));
                    }
                    _ => lanes.landed(),
                }
                let flow = lanes.flow();
                let free = lanes.free().len();
                let available = lanes.permits.available_permits();
                assert!(
                    available <= free,
                    "{ctx}: {available} permits for {free} free lanes"
                );
                assert!(
                    flow.allowed <= lanes.count(),
                    "{ctx}: allowed {} > count {}",
                    flow.allowed,
                    lanes.count()
                );
                assert!(flow.allowed >= 1, "{ctx}: nothing allowed");
                assert_eq!(
                    available + held.len(),
                    flow.allowed + flow.debt,
                    "{ctx}: permits drifted"
                );
                assert!(
                    flow.debt <= held.len(),
                    "{ctx}: debt {} > {} in flight",
                    flow.debt,
                    held.len()
                );
                assert_eq!(flow.held, held.len(), "{ctx}: lanes taken");
            }
            held.clear();
            for _ in 0..lanes.count() {
                lanes.landed();
            }
            assert_eq!(
                lanes.permits.available_permits(),
                lanes.count(),
                "seed {seed}: permits at rest"
            );
            let mut free = lanes.free().clone();
            free.sort_unstable();
            let want: Vec<usize> = if lanes.rows() == 0 {
                vec![0]
            } else {
                (1..=lanes.rows()).collect()
            };
            assert_eq!(free, want, "seed {seed}: free lanes at rest");
        }
    }

    #[tokio::test]
    async fn lanes_are_taken_once_each_and_follow_throttling() {
        let lanes = Lanes::new(0, 16);
        let a = lanes.take().await;
        assert_eq!(a.index(), 0);
        // The record stops being a lane while a transaction is in flight on it: three in
        // flight in all, that one included.
        lanes.open(3);
        let taken: Vec<Lane<'_>> = vec![lanes.take().await, lanes.take().await];
        assert!(lanes.permits.try_acquire().is_err(), "three in flight");
        drop(a);
        let third = lanes.take().await;
        let mut ks: Vec<usize> = taken.iter().chain([&third]).map(Lane::index).collect();
        ks.sort_unstable();
        assert_eq!(ks, [1, 2, 3], "lane 0 is no lane any more");
        assert!(
            lanes.permits.try_acquire().is_err(),
            "three lanes, three in flight"
        );
        drop(taken);
        drop(third);
        assert_eq!(lanes.permits.available_permits(), 3);
        // Throttled: one of three, then back up one at a time.
        lanes.throttled();
        assert_eq!(lanes.permits.available_permits(), 1);
        let one = lanes.take().await;
        lanes.throttled();
        assert_eq!(lanes.permits.available_permits(), 0);
        drop(one);
        assert_eq!(lanes.permits.available_permits(), 1);
        lanes.landed();
        lanes.landed();
        lanes.landed();
        assert_eq!(lanes.permits.available_permits(), 3);
        assert_eq!(lanes.free().len(), 3);
    }

    #[test]
    fn stored_names_round_trip() {
        for op in [
            Operation::Move,
            Operation::Copy,
            Operation::Delete,
            Operation::Reparent,
            Operation::Propagate,
        ] {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        for phase in [
            Phase::Lock,
            Phase::Copy,
            Phase::Move,
            Phase::Delete,
            Phase::Unlock,
            Phase::Rollback,
            Phase::Propagate,
        ] {
            assert_eq!(Phase::parse(phase.as_str()), Some(phase));
        }
        assert_eq!(Phase::parse("later"), None);
    }
}
