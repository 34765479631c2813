#![doc = include_str!("moves.md")]

use std::collections::HashSet;

use crate::tree::{Ctx, denorm, guard, move_plan, ops, read, removal};
use futures::{FutureExt, TryStreamExt};

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::layout::{HASH_KEY, RANGE_KEY, exists_and};
use crate::path::{IntoPath, Path};
use crate::retry::Backoff;
use crate::storage::batch::{TRANSACT_MAX, get_all};
use crate::storage::{Condition, Key, Storage, TransactAction};

use super::Tree;
use super::clock::after_ms;
use super::intent::{
    Guard, Intent, Outcome, Throttle, add_lanes, decode_refusal, drive, enclosing_checks,
    encode_refusal, finish, is_reparenting, join, owned_by, owner_nap, owner_retry, owner_wait,
    record_and_run, recorded, renew_if_due, renewing, set_phase, still_owned, taken_over,
    write_intent,
};
pub use super::intent::{Operation, Phase};

/// What to do about links elsewhere in the tree that point into a moved subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LinkPolicy {
    /// Leave them (they dangle).
    Ignore,
    /// Find and report them (one Scan of the table when the move is done).
    #[default]
    Report,
    /// Find them and point them at the new paths.
    Rewrite,
}

/// What [`Tree::delete_node`] does with the children of the node it deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnChildren {
    /// Refuse with [`ErrorKind::HasChildren`] (the rule for roots of org charts and folders).
    #[default]
    Refuse,
    /// Move each child (with its subtree) to the node's parent, then delete the node.
    Reparent,
    /// Delete the whole subtree ([`Tree::delete_subtree`]).
    Recursive,
}

/// What a move or copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// The operation's id (its intent record).
    pub id: String,
    /// Nodes (listing entries) written under the destination.
    pub nodes: usize,
    /// Objects written under the destination.
    pub objects: usize,
    /// Links that pointed into the moved subtree: `(link path, old target)`. For a copy
    /// ([`Tree::copy_subtree_with`]), the links of the copy whose originals point into the
    /// source: `(link path in the copy, the original's target)`.
    pub links: Vec<(Path, Path)>,
}

impl<S: Storage + 'static> Tree<S> {
    /// Moves the node at `from` (its object, if any) and every descendant to `to`, reporting
    /// links that pointed into it; see [`consistency`](crate::consistency) and
    /// [`move_subtree_with`](Tree::move_subtree_with).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["org", "eng", "db"], &V { v: 1 }).await?;
    /// tree.put(["org", "eng", "db", "alice"], &V { v: 2 }).await?;
    /// tree.put_link(["people", "alice"], ["org", "eng", "db", "alice"]).await?;
    /// let report = tree.move_subtree(["org", "eng", "db"], ["org", "data", "db"]).await?;
    /// assert_eq!(report.objects, 2);
    /// assert_eq!(report.links.len(), 1); // people/alice pointed into the old place
    /// assert_eq!(tree.get(["org", "data", "db", "alice"]).await?, Some(V { v: 2 }));
    /// assert_eq!(tree.get::<V>(["org", "eng", "db"]).await?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] (root, `to` inside `from`); [`ErrorKind::NotFound`] if
    /// nothing is at `from`; [`ErrorKind::AlreadyExists`] if something is at `to`;
    /// [`ErrorKind::Locked`] if part of it is held by another operation (the move is rolled
    /// back, nothing applied); [`ErrorKind::InvalidPath`] or [`ErrorKind::ItemTooLarge`] if
    /// the moved rows or rewritten links would break a limit (rolled back too);
    /// [`ErrorKind::TakenOver`] if this call was so slow that its lease ran out and another
    /// call took the move over (the outcome is that call's); [`ErrorKind::Unfinished`] if,
    /// with [`LinkPolicy::Rewrite`], other moves kept carrying links into the source away
    /// while this one rewrote them (the objects are moved; the move stays recorded and
    /// `resume` rewrites the rest); backend errors (then call it again, or
    /// [`resume`](Tree::resume)).
    ///
    /// # Cancel safety
    ///
    /// A dropped future leaves the operation recorded: the same call again, or `resume`,
    /// finishes it.
    pub async fn move_subtree(&self, from: impl IntoPath, to: impl IntoPath) -> Result<MoveReport> {
        self.cx
            .call(async { self.move_subtree_with(from, to, LinkPolicy::Report).await })
            .await
    }

    /// [`move_subtree`](Tree::move_subtree) with a policy for links into the subtree.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{ops::LinkPolicy, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.put(["org", "eng", "alice"], &V { v: 1 }).await?;
    /// tree.put_link(["people", "alice"], ["org", "eng", "alice"]).await?;
    /// let report = tree.move_subtree_with(["org", "eng"], ["org", "tech"], LinkPolicy::Rewrite).await?;
    /// assert_eq!(report.links.len(), 1);
    /// // The link now points at the new place.
    /// assert_eq!(tree.read_link(["people", "alice"]).await?.to_string(), "/org/tech/alice");
    /// assert_eq!(tree.get(["people", "alice"]).await?, Some(V { v: 1 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn move_subtree_with(
        &self,
        from: impl IntoPath,
        to: impl IntoPath,
        links: LinkPolicy,
    ) -> Result<MoveReport> {
        self.cx
            .call(async {
                let (from, to) = self.enter_move(from, to, "move")?;
                let report = start(&self.base().cx, Operation::Move, from, to, links).await?;
                self.leave_report(report)
            })
            .await
    }

    /// Copies the node at `from` and every descendant to `to`, as one state of the source:
    /// the source is locked while it is copied (writers under it get [`ErrorKind::Locked`]
    /// meanwhile), and the destination too until the copy is complete.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["templates", "a", "b"], &V { v: 1 }).await?;
    /// tree.copy_subtree(["templates"], ["projects", "p1"]).await?;
    /// assert_eq!(tree.get(["projects", "p1", "a", "b"]).await?, Some(V { v: 1 }));
    /// assert_eq!(tree.get(["templates", "a", "b"]).await?, Some(V { v: 1 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn copy_subtree(&self, from: impl IntoPath, to: impl IntoPath) -> Result<MoveReport> {
        self.cx
            .call(async { self.copy_subtree_with(from, to, LinkPolicy::Ignore).await })
            .await
    }

    /// [`copy_subtree`](Tree::copy_subtree) with a policy for the links inside the subtree
    /// that point into it: [`LinkPolicy::Rewrite`] writes their copies pointing at the same
    /// place in the copy (the copy is self-contained, as the source is);
    /// [`LinkPolicy::Report`] copies them as they are and lists them in
    /// [`MoveReport::links`] (as `Rewrite` does too); [`LinkPolicy::Ignore`] copies them as
    /// they are. Links elsewhere keep pointing at the source, which stays.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{ops::LinkPolicy, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.put(["templates", "a", "doc"], &V { v: 1 }).await?;
    /// tree.put_link(["templates", "a", "latest"], ["templates", "a", "doc"]).await?;
    /// let report = tree
    ///     .copy_subtree_with(["templates", "a"], ["projects", "p1"], LinkPolicy::Rewrite)
    ///     .await?;
    /// assert_eq!(report.links.len(), 1);
    /// assert_eq!(tree.read_link(["projects", "p1", "latest"]).await?.to_string(), "/projects/p1/doc");
    /// // The source's link is left alone.
    /// assert_eq!(tree.read_link(["templates", "a", "latest"]).await?.to_string(), "/templates/a/doc");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn copy_subtree_with(
        &self,
        from: impl IntoPath,
        to: impl IntoPath,
        links: LinkPolicy,
    ) -> Result<MoveReport> {
        self.cx
            .call(async {
                let (from, to) = self.enter_move(from, to, "copy")?;
                let report = start(&self.base().cx, Operation::Copy, from, to, links).await?;
                self.leave_report(report)
            })
            .await
    }

    /// Deletes the node at `path` deciding what happens to its children: refuse (the default
    /// rule), re-attach them to the node's parent, or delete them too.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{ops::OnChildren, Tree};
    /// # use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["ceo"], &V { v: 0 }).await?;
    /// tree.put(["ceo", "cto"], &V { v: 1 }).await?;
    /// tree.put(["ceo", "cto", "dev"], &V { v: 2 }).await?;
    /// // A root with reports cannot go.
    /// assert!(tree.delete_node(["ceo"], OnChildren::Refuse).await.unwrap_err().is_has_children());
    /// // The CTO leaves; the developer reports to the CEO.
    /// tree.delete_node(["ceo", "cto"], OnChildren::Reparent).await?;
    /// assert_eq!(tree.get(["ceo", "dev"]).await?, Some(V { v: 2 }));
    /// # Ok(()) }
    /// ```
    ///
    /// With [`OnChildren::Reparent`] the operation is recorded as an intent (see
    /// [`Tree::pending`]) and the node's listing row is locked while its children move up,
    /// each with its own recorded move: writers under the node get [`ErrorKind::Locked`]
    /// meanwhile, and nothing can take the lock but this operation or [`Tree::resume`].
    ///
    /// # Errors
    ///
    /// [`ErrorKind::HasChildren`] with [`OnChildren::Refuse`] (the node is left as it was);
    /// [`ErrorKind::AlreadyExists`] if a child's name is taken under the parent (children moved
    /// so far stay moved, the node is released; fix the name and call again);
    /// [`ErrorKind::Locked`] if the node is held by another operation;
    /// [`ErrorKind::TakenOver`] if another call ran the same re-parenting to its end meanwhile
    /// (or took it over from this one); as [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// A dropped future leaves a re-parenting recorded: [`Tree::resume`], or the same call
    /// again, finishes it. A dropped refusing or recursive delete may or may not have applied;
    /// the same call again completes it.
    pub async fn delete_node(&self, path: impl IntoPath, on_children: OnChildren) -> Result<()> {
        let span = |p: &Path| tracing::debug_span!("dynatree.delete_node", path = %p);
        self.call_at(path, span, |path| delete_node(&self.cx, path, on_children))
            .await
    }
}

/// [`Tree::delete_subtree`] at the absolute `path`: checked, refused at the root, then run
/// as a subtree deletion. Returns how many objects it deleted.
pub(crate) async fn delete_subtree<S: Storage + 'static>(cx: &Ctx<S>, path: Path) -> Result<usize> {
    cx.inner.layout.check_object_path(&path)?;
    cx.refuse_root(&path, "delete_subtree")?;
    let report = start(
        cx,
        Operation::Delete,
        path.clone(),
        path,
        LinkPolicy::Ignore,
    )
    .await?;
    Ok(report.objects)
}

/// [`Tree::delete_node`] at the absolute `path`: checked, refused at the scope's root, then
/// deleted as `on_children` says.
async fn delete_node<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: Path,
    on_children: OnChildren,
) -> Result<()> {
    cx.inner.layout.check_object_path(&path)?;
    cx.refuse_root(&path, "delete")?;
    match on_children {
        OnChildren::Recursive => start(
            cx,
            Operation::Delete,
            path.clone(),
            path,
            LinkPolicy::Ignore,
        )
        .await
        .map(|_| ()),
        OnChildren::Refuse => removal::delete_leaf(cx, &path).await,
        OnChildren::Reparent => reparent(cx, &path).await,
    }
}

/// Starts (or, when the same operation is recorded, resumes) a move, copy or subtree
/// deletion.
pub(crate) async fn start<S: Storage + 'static>(
    cx: &Ctx<S>,
    op: Operation,
    from: Path,
    to: Path,
    links: LinkPolicy,
) -> Result<MoveReport> {
    cx.inner.layout.check_object_path(&from)?;
    cx.inner.layout.check_object_path(&to)?;
    if op != Operation::Delete && (to.starts_with(&from) || from.starts_with(&to)) {
        return Err(Error::invalid_path(format!(
            "cannot {op} {from} to {to}: one contains the other"
        )));
    }
    // The same call again resumes it.
    if let Some(intent) = cx
        .tree()
        .pending()
        .await?
        .into_iter()
        .find(|i| i.op == op && i.from == from && i.to == to)
    {
        return join(cx, &intent.id).await;
    }
    // The destination first, then the source: a source that moved into this very
    // destination meanwhile reads as gone (`NotFound`), as it would serially; a missing
    // source is reported before a taken destination.
    let dest_taken = op != Operation::Delete
        && (cx
            .io()
            .get_item(&cx.inner.layout.listing_key(&to), true)
            .await?
            .is_some()
            || cx
                .io()
                .get_item(&cx.inner.layout.object_key(&to), true)
                .await?
                .is_some_and(|r| !cx.inner.layout.is_fence(&r)));
    let source = cx.inner.layout.listing_key(&from);
    let source_row = cx.io().get_item(&source, true).await?;
    if source_row
        .as_ref()
        .is_some_and(|r| r.contains(cx.inner.layout.moving_attr()))
    {
        // Held by another operation (moved, copied or deleted right now, or by one whose
        // process died: `resume` finishes it): refused, nothing written.
        return Err(guard::locked_error(&from));
    }
    if source_row.is_none() {
        if op == Operation::Delete {
            // No listing row: no children, and by the invariants no object either (one a
            // foreign writer left unlisted is deleted while the row stays missing).
            let object = cx.inner.layout.object_key(&from);
            let existed = cx.io().get_item(&object, true).await?.is_some();
            if removal::delete_unlisted(cx, &from, Condition::Always).await? {
                return Ok(MoveReport {
                    objects: usize::from(existed),
                    ..MoveReport::default()
                });
            }
            // Listed meanwhile (a repair re-created the row): the whole protocol.
            return record_and_run(cx, op, from, to, links).await;
        }
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("nothing at {from}"),
        ));
    }
    if dest_taken {
        return Err(Error::new(
            ErrorKind::AlreadyExists,
            format!("something is already at {to}"),
        ));
    }
    record_and_run(cx, op, from, to, links).await
}

/// The phases, from the recorded one to the end.
pub(crate) async fn run<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<Outcome> {
    let op = g.snapshot().op;
    if op == Operation::Reparent {
        return run_reparent(cx, g).await;
    }
    if op == Operation::Propagate {
        let path = g.snapshot().from;
        if !denorm::knows_targets(cx) {
            // Finishing it here would drop the intent with the copies unwritten.
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the propagation of denormalized fields from {path} needs the target types: register them with TreeBuilder::denormalized"
                ),
            ));
        }
        // The object's own copies first (a write of it that failed may have left them
        // stale), then everything below it.
        denorm::refresh_own(cx, &path).await?;
        denorm::reconcile_source(cx, &path, None, Some(g)).await?;
        finish(cx, g).await?;
        return Ok(Outcome::Done(MoveReport {
            id: g.id(),
            ..MoveReport::default()
        }));
    }
    let (from, to) = {
        let i = g.snapshot();
        (i.from, i.to)
    };
    let mut report = MoveReport {
        id: g.snapshot().id,
        ..MoveReport::default()
    };
    // The nodes held, once known in this call (a resumed call walks them again). A call
    // that started at the lock phase locked and held them itself and copied everything
    // under the destination itself, so it may unlock the destination (and a copy its
    // source) from what it knows; a resumed one walks them.
    let mut known: Option<Vec<Vec<Path>>> = None;
    // Destination nodes the copy wrote that name nothing (see `copy_levels`), removed after
    // the unlock (best effort: a resumed call does not know them).
    let mut hollow: Vec<Path> = Vec::new();
    let fresh = g.snapshot().phase == Phase::Lock;
    // Whether this call copied the subtree (and so knows the links of a copy).
    let mut copied = false;
    loop {
        let phase = g.snapshot().phase;
        match phase {
            Phase::Lock => {
                let levels = match lock_walk(cx, g).await {
                    Ok(levels) => levels,
                    Err(e) if matches!(e.kind(), ErrorKind::Locked | ErrorKind::Conflict) => {
                        return refuse(cx, g, e).await;
                    }
                    Err(e) => return Err(e),
                };
                if op == Operation::Delete && levels.first().is_none_or(Vec::is_empty) {
                    // Deleted by an operation that came first: nothing left to do.
                    finish(cx, g).await?;
                    return Ok(Outcome::Done(report));
                }
                if levels.first().is_none_or(Vec::is_empty) {
                    // The source went away before it was locked (moved or deleted by
                    // another operation that came first).
                    let e = Error::new(ErrorKind::NotFound, format!("nothing at {from}"));
                    return refuse(cx, g, e).await;
                }
                if op != Operation::Delete
                    && let Err(e) = validate(cx, g, &levels).await
                {
                    // Only what the operation asks for can be refused (a path or a row
                    // over DynamoDB's limits). A read that failed is not a refusal: the
                    // operation stays recorded, and the same call again or `resume` goes
                    // on from here.
                    if e.kind().party() != crate::error::Party::Caller {
                        return Err(e);
                    }
                    return refuse(cx, g, e).await;
                }
                if op != Operation::Delete || cx.inner.config.fenced_puts {
                    // Overwrites that skip the listing row's check (one PutItem) meet the
                    // hold on the object and take the guarded path, which the locks refuse.
                    // With fenced puts a subtree deletion holds too: a PutItem trusting a
                    // look at a listing row from before its lock must not land between the
                    // count of the objects and their fences.
                    hold_objects(cx, g, &levels).await?;
                }
                known = Some(levels);
                set_phase(
                    cx,
                    g,
                    if op == Operation::Delete {
                        Phase::Delete
                    } else {
                        Phase::Copy
                    },
                )
                .await?;
            }
            Phase::Copy => {
                let levels = match known.take() {
                    Some(levels) => levels,
                    None => {
                        let levels = walk_held(cx, &from, &g.id(), true).await?;
                        if !holds_whole(&from, &levels) {
                            // A writer that ignores locks (the Go library) rewrote part of
                            // the source: there is no one state of it left to copy.
                            let e = Error::new(
                                ErrorKind::Conflict,
                                format!("{from} changed under the operation's locks"),
                            );
                            return refuse(cx, g, e).await;
                        }
                        levels
                    }
                };
                match copy_levels(cx, g, &levels).await {
                    Ok((nodes, objects, empty, links)) => {
                        report.nodes = nodes;
                        report.objects = objects;
                        report.links = links;
                        copied = true;
                        hollow = empty;
                    }
                    // Refused at the destination, or by a limit: the source is intact and
                    // everything written under the destination is ours, so undo it.
                    Err(e) if refuses(e.kind()) => return refuse(cx, g, e).await,
                    Err(e) => return Err(e),
                }
                known = Some(levels);
                set_phase(
                    cx,
                    g,
                    if op == Operation::Move {
                        Phase::Delete
                    } else {
                        Phase::Unlock
                    },
                )
                .await?;
            }
            Phase::Delete => {
                // A resumed call may find part of the source deleted already: what it
                // walks now is not the whole subtree, so it is not kept for the unlock.
                let levels = match &known {
                    Some(levels) => levels.clone(),
                    None => walk_held(cx, &from, &g.id(), true).await?,
                };
                let deleted = delete_levels(cx, g, &levels, op == Operation::Delete).await?;
                if op == Operation::Delete {
                    report.objects = deleted;
                } else if known.is_none() {
                    // A resumed call walked only the rows it holds: objects below a lock
                    // erased by a writer that ignores locks stay, and lose our hold.
                    let nodes = walk_nodes(cx, &from).await?;
                    release_objects(cx, g, &nodes).await?;
                }
                removal::prune_above(cx, &from).await?;
                if op == Operation::Delete {
                    finish(cx, g).await?;
                    return Ok(Outcome::Done(report));
                }
                set_phase(cx, g, Phase::Unlock).await?;
            }
            Phase::Unlock => {
                // A call that ran the lock walk itself knows every row it locked and every
                // object it held: the nodes of that walk, at the source and (re-keyed) at the
                // destination. A resumed call walks them.
                let walked = known.take().filter(|_| fresh);
                let dest = match &walked {
                    Some(levels) => {
                        let intent = g.snapshot();
                        levels
                            .iter()
                            .flatten()
                            .map(|p| dest_of(&intent, p))
                            .collect::<Result<Vec<Path>>>()?
                    }
                    None => walk_held(cx, &to, &g.id(), true).await?.concat(),
                };
                // The destination's objects are held by the operation since their copy
                // (a resumed call looks at every node: a lock erased by a writer that
                // ignores locks must not hide the holds below it).
                let holds = if fresh {
                    dest.clone()
                } else {
                    walk_nodes(cx, &to).await?
                };
                release_and_unlock(cx, g, &holds, &dest).await?;
                // Deepest first: a node whose only children were hollow is hollow too.
                for p in hollow.drain(..) {
                    let _ = removal::remove_if_empty(cx, &p).await;
                }
                if op == Operation::Copy && !copied && g.snapshot().links != LinkPolicy::Ignore {
                    // Resumed after the copy: its links, from the source (still held).
                    report.links = links_within(cx, g).await?;
                }
                if op == Operation::Copy {
                    // A copy holds its source too, so that it copies one state of it. Its
                    // locks and holds there are on the nodes of its lock walk and nowhere
                    // else: a call that walked them releases them from what it knows.
                    match &walked {
                        Some(levels) => {
                            let paths = levels.concat();
                            release_and_unlock(cx, g, &paths, &paths).await?;
                        }
                        None => {
                            let nodes = walk_nodes(cx, &from).await?;
                            release_and_unlock(cx, g, &nodes, &[]).await?;
                            let paths = walk_held(cx, &from, &g.id(), true).await?.concat();
                            release_and_unlock(cx, g, &[], &paths).await?;
                        }
                    }
                }
                // Denormalized fields of the subtree, from its new ancestors (the moved rows
                // carry no copy versions: every copy is written again). Before the intent
                // goes, so that a resumed call does it again.
                denorm::refill_subtree(cx, &to, Some(g)).await?;
                let links = g.snapshot().links;
                if op == Operation::Move && links != LinkPolicy::Ignore {
                    report.links = links_into(cx, &from).await?;
                    if links == LinkPolicy::Rewrite {
                        rewrite_links(cx, g, &report.links).await?;
                    }
                }
                finish(cx, g).await?;
                return Ok(Outcome::Done(report));
            }
            Phase::Rollback => {
                roll_back(cx, g).await?;
                return Ok(Outcome::RolledBack(decode_refusal(
                    g.snapshot().refusal.as_deref(),
                )));
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Backend,
                    format!("intent record with an unknown phase `{other}`"),
                ));
            }
        }
    }
}

/// `delete_node(path, Reparent)`: recorded as an intent, like a move.
async fn reparent<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<()> {
    if let Some(intent) = cx
        .tree()
        .pending()
        .await?
        .into_iter()
        .find(|i| i.op == Operation::Reparent && i.from == *path)
    {
        return join(cx, &intent.id).await.map(|_| ());
    }
    if cx
        .io()
        .get_item(&cx.inner.layout.listing_key(path), true)
        .await?
        .is_none()
    {
        // No listing row: no children and (by the invariants) no object.
        return cx.tree().delete(path).await;
    }
    let parent = path.parent().unwrap_or_default();
    record_and_run(
        cx,
        Operation::Reparent,
        path.clone(),
        parent,
        LinkPolicy::Rewrite,
    )
    .await
    .map(|_| ())
}

/// The phases of a re-parenting: lock the node's listing row (writers under it are
/// refused, removers leave it alone, and only this operation or `resume` can release it),
/// move each child up (each its own recorded move), then delete the node.
async fn run_reparent<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<Outcome> {
    let (path, parent, id) = {
        let i = g.snapshot();
        (i.from, i.to, i.id)
    };
    let lock = Value::S(id.clone());
    let key = cx.inner.layout.listing_key(&path);
    // The child moves run inside this re-parenting: fenced by its ownership too, so that a
    // caller whose lease ran out and was taken over moves no child after that.
    let inside = cx.inside(cx.inner.layout.intent_key(&id), g.token.clone());
    let mut backoff = Backoff::new(cx.inner.config.retry);
    loop {
        let phase = g.snapshot().phase;
        match phase {
            Phase::Lock => {
                let mut row = cx.inner.layout.listing_row(&path);
                row.insert(cx.inner.layout.moving_attr(), lock.clone());
                let action = TransactAction::Put {
                    item: row,
                    condition: cx.inner.layout.lockable_by(&lock),
                };
                if fenced(cx, g, vec![action], false).await?.is_empty() {
                    set_phase(cx, g, Phase::Move).await?;
                    continue;
                }
                match cx.io().get_item(&key, true).await? {
                    // Gone meanwhile: nothing left to re-parent or delete.
                    None => {
                        finish(cx, g).await?;
                        return Ok(Outcome::Done(MoveReport::default()));
                    }
                    Some(r) if r.contains(cx.inner.layout.moving_attr()) => {
                        let e = guard::locked_error(&path);
                        return refuse(cx, g, e).await;
                    }
                    Some(r) => {
                        match r.get_s(cx.inner.layout.deleting_attr()) {
                            Some(mark) if guard::mark_expired(mark) => {
                                guard::clear_expired_mark(cx, &key, mark).await?;
                            }
                            // A live removal: wait for it (outside the budget).
                            Some(_) => {
                                owner_wait(cx, g, &mut backoff).await?;
                                continue;
                            }
                            None => {}
                        }
                        if !owner_retry(cx, g, &mut backoff).await? {
                            let e = Error::new(
                                ErrorKind::Conflict,
                                format!("{path} kept changing while it was being locked"),
                            );
                            return refuse(cx, g, e).await;
                        }
                    }
                }
            }
            Phase::Move => {
                renew_if_due(cx, g).await?;
                let children: Vec<String> = cx.list_names(&path, true).try_collect().await?;
                let mut again = false;
                for c in children {
                    let to = parent.child(c.clone())?;
                    // Boxed: a move runs intents, and this is one. The parent's lease is
                    // renewed while the child moves.
                    let child = path.child(c)?;
                    let moved = renewing(
                        cx,
                        g,
                        Box::pin(start(
                            &inside,
                            Operation::Move,
                            child.clone(),
                            to,
                            LinkPolicy::Rewrite,
                        )),
                    )
                    .await?;
                    // A child held by another operation (a user's move of it, say) is that
                    // operation's: help it to its end, then look at the children again.
                    if let Err(e) = &moved
                        && matches!(e.kind(), ErrorKind::AlreadyExists | ErrorKind::Locked)
                    {
                        let holder = cx
                            .io()
                            .get_item(&cx.inner.layout.listing_key(&child), true)
                            .await?
                            .and_then(|r| r.get(cx.inner.layout.moving_attr()).cloned());
                        if let Some(Value::S(other)) = holder {
                            let _ = renewing(cx, g, Box::pin(drive(cx, &other))).await?;
                            again = true;
                            continue;
                        }
                    }
                    match moved {
                        // A child that went away meanwhile has nothing to move.
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::NotFound => {}
                        // Joined an identical move that another call ran to its end
                        // (completed or refused): look at the children again. Or this
                        // re-parenting was taken over (the child move's writes check it):
                        // then it is the other call's, and this one stops.
                        Err(e) if e.kind() == ErrorKind::TakenOver => {
                            if !still_owned(cx, g).await? {
                                return Err(e);
                            }
                            again = true;
                        }
                        // A name taken under the parent, a limit: the children moved so far
                        // stay moved; the node is released.
                        Err(e) if refuses(e.kind()) => return refuse(cx, g, e).await,
                        Err(e) => return Err(e),
                    }
                }
                if again {
                    if !owner_retry(cx, g, &mut backoff).await? {
                        let e = Error::new(
                            ErrorKind::Conflict,
                            format!("the children of {path} kept being moved by others"),
                        );
                        return refuse(cx, g, e).await;
                    }
                    continue;
                }
                // A child move left recorded after its objects moved (`Unfinished`: links
                // into it still to rewrite) is no longer among the children listed: it is
                // this re-parenting's to finish before it ends.
                for child in recorded(cx).await?.into_iter().filter(|i| {
                    i.op == Operation::Move
                        && i.from.parent().as_ref() == Some(&path)
                        && i.to.parent().as_ref() == Some(&parent)
                }) {
                    renewing(cx, g, Box::pin(drive(&inside, &child.id))).await??;
                }
                set_phase(cx, g, Phase::Delete).await?;
            }
            Phase::Delete => {
                let held = cx
                    .io()
                    .get_item(&key, true)
                    .await?
                    .is_some_and(|r| r.get(cx.inner.layout.moving_attr()) == Some(&lock));
                if !held {
                    // Only this operation takes its lock off, and only by deleting the
                    // node: an earlier call got this far (whatever is at the path now
                    // came after).
                    finish(cx, g).await?;
                    return Ok(Outcome::Done(MoveReport::default()));
                }
                if removal::has_children_held(cx, &path).await? {
                    // Only possible if a writer ignored the lock (the Go library).
                    let e = Error::new(
                        ErrorKind::HasChildren,
                        format!("{path} got children that ignored its lock"),
                    );
                    return refuse(cx, g, e).await;
                }
                let actions = vec![
                    guard::remove_object(cx, &path, Condition::Always),
                    TransactAction::Delete {
                        key: key.clone(),
                        condition: cx.inner.layout.locked_by(&lock),
                    },
                ];
                fenced_groups(cx, g, actions, true, 2).await?;
                cx.inner.known.remove(&key);
                removal::prune_above(cx, &path).await?;
                finish(cx, g).await?;
                return Ok(Outcome::Done(MoveReport::default()));
            }
            Phase::Rollback => {
                roll_back(cx, g).await?;
                return Ok(Outcome::RolledBack(decode_refusal(
                    g.snapshot().refusal.as_deref(),
                )));
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Backend,
                    format!("intent record with an unknown phase `{other}`"),
                ));
            }
        }
    }
}

/// The operation cannot be carried out: record that, undo what it wrote, and fail with
/// `e`.
async fn refuse<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard, e: Error) -> Result<Outcome> {
    let mut intent = g.snapshot();
    intent.phase = Phase::Rollback;
    intent.lease = after_ms(cx.inner.config.lease);
    intent.refusal = Some(encode_refusal(&e));
    write_intent(cx, g, intent).await?;
    roll_back(cx, g).await?;
    Ok(Outcome::RolledBack(e))
}

/// Undoes a move, copy or deletion that has not started deleting: unlocks the source
/// rows it holds, removes what it wrote under the destination, drops the intent.
async fn roll_back<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<()> {
    let intent = g.snapshot();
    if intent.op == Operation::Reparent {
        // Only the node itself is held; children moved so far stay moved.
        unlock_paths(cx, g, std::slice::from_ref(&intent.from)).await?;
        return finish(cx, g).await;
    }
    let held = walk_held(cx, &intent.from, &intent.id, true).await?;
    // Every node's object, held or not: a lock erased by a writer that ignores locks
    // (the Go library) hides the holds below it from the walk of held rows.
    let nodes = walk_nodes(cx, &intent.from).await?;
    release_objects(cx, g, &nodes).await?;
    unlock_paths(cx, g, &held.concat()).await?;
    // Rows the operation held that name nothing now (another operation's rollback may have
    // emptied them meanwhile) go, as after any removal; each keeps the invariants alone.
    // (Below the root only: the root was there before the operation and stays.)
    for p in held.iter().skip(1).rev().flatten() {
        removal::remove_if_empty(cx, p).await?;
    }
    if intent.op != Operation::Delete {
        // Through rows not held: a writer that ignores locks may have erased the lock of
        // a row we created; only rows with our lock are removed.
        let levels = walk_held(cx, &intent.to, &intent.id, true).await?;
        delete_levels(cx, g, &levels, false).await?;
        // What stays under the destination (below a lock such a writer erased) loses the
        // holds of the copies written there.
        let rest = walk_nodes(cx, &intent.to).await?;
        release_objects(cx, g, &rest).await?;
        removal::prune_above(cx, &intent.to).await?;
    }
    finish(cx, g).await
}

/// Checks every destination key, row size and rewritten link target of the operation
/// before anything is written under the destination.
async fn validate<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    levels: &[Vec<Path>],
) -> Result<()> {
    let intent = g.snapshot();
    for level in levels {
        renew_if_due(cx, g).await?;
        let sources = objects_of(cx, level).await?;
        for p in level {
            let dest = dest_of(&intent, p)?;
            cx.inner.layout.check_object_path(&dest)?;
            if let Some(src) = sources.get(&cx.inner.layout.object_key(p).hash) {
                copied_row(cx, &intent, src, &dest)?;
            }
        }
    }
    if intent.op == Operation::Move && intent.links == LinkPolicy::Rewrite {
        for (link, target) in links_into(cx, &intent.from).await? {
            let new_target = dest_of(&intent, &target)?;
            // A link inside the source is rewritten where the move puts it.
            let at = if link.starts_with(&intent.from) {
                dest_of(&intent, &link)?
            } else {
                link
            };
            cx.link_row_for(&at, &new_target)?;
        }
    }
    Ok(())
}

/// Locks the source subtree level by level (each level's children are listed, with
/// consistent reads, after the level is locked, so nothing created before its parent was
/// locked is missed, and nothing can be created after) and returns its nodes by depth.
async fn lock_walk<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<Vec<Vec<Path>>> {
    let id = g.id();
    let lock = Value::S(id.clone());
    let mut levels = Vec::new();
    let mut level = vec![g.snapshot().from];
    let op = g.snapshot().op;
    let mut locked = 0;
    let mut backoff = Backoff::new(cx.inner.config.retry);
    let mut waiting = false;
    while !level.is_empty() {
        renew_if_due(cx, g).await?;
        let actions: Vec<TransactAction> = level
            .iter()
            .map(|p| {
                let mut row = cx.inner.layout.listing_row(p);
                row.insert(cx.inner.layout.moving_attr(), lock.clone());
                TransactAction::Put {
                    item: row,
                    // Not while a removal of the row is under way (it may be about to
                    // go): that is waited for below.
                    condition: cx.inner.layout.lockable_by(&lock),
                }
            })
            .collect();
        // A level's locks, its transactions in flight together, on lanes enough for the
        // level (see "Requests in flight" in `moves.md`).
        add_lanes(cx, g, lanes_for(level.len())).await?;
        let failed = fenced_groups(cx, g, actions, true, 1).await?;
        let mut held = Vec::with_capacity(level.len());
        let mut again = Vec::new();
        for (i, p) in level.into_iter().enumerate() {
            if !failed.contains(&i) {
                held.push(p);
                continue;
            }
            // Not locked: gone meanwhile (fine: not part of the subtree any more), another
            // operation's (refused), or freed since (lock it again).
            match cx
                .io()
                .get_item(&cx.inner.layout.listing_key(&p), true)
                .await?
            {
                None => {}
                Some(r) if r.get(cx.inner.layout.moving_attr()) == Some(&lock) => held.push(p),
                Some(r) if r.contains(cx.inner.layout.moving_attr()) => {
                    return Err(guard::locked_error(&p));
                }
                Some(r) => {
                    if let Some(mark) = r.get_s(cx.inner.layout.deleting_attr()) {
                        if guard::mark_expired(mark) {
                            guard::clear_expired_mark(cx, &cx.inner.layout.listing_key(&p), mark)
                                .await?;
                        } else {
                            // A live removal: wait for it, outside the retry budget (the
                            // mark's lease bounds the wait).
                            waiting = true;
                        }
                    }
                    again.push(p);
                }
            }
        }
        if !again.is_empty() {
            if std::mem::take(&mut waiting) {
                owner_wait(cx, g, &mut backoff).await?;
                level = held.into_iter().chain(again).collect();
                continue;
            }
            if !owner_retry(cx, g, &mut backoff).await? {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{} kept changing while it was being locked", again[0]),
                ));
            }
            held.sort();
            // The rows held so far stay held; the others are tried again with this level.
            level = held.into_iter().chain(again).collect();
            continue;
        }
        held.sort();
        // The whole level is locked: its nodes are listed, several at once. Each node is
        // reported once its children are known (in the level's order): a level can be most
        // of the subtree, and listing it one Query per node.
        let mut listed = 0;
        let names = bounded(
            held.iter(),
            in_flight(cx),
            |dir| {
                cx.list_names(dir, true)
                    .try_collect::<Vec<String>>()
                    .boxed()
            },
            |_| {
                listed += 1;
                cx.tell(op, Phase::Lock, locked + listed, None);
                false
            },
        )
        .await?;
        let mut next = Vec::new();
        for (dir, names) in held.iter().zip(names) {
            for n in names {
                next.push(dir.child(n)?);
            }
        }
        locked += held.len();
        levels.push(held);
        level = next;
    }
    Ok(levels)
}

/// Every node under `root` (itself included) that has a listing row, held or not: where
/// holds on objects may be left when a writer that ignores locks erased a lock above them.
async fn walk_nodes<S: Storage + 'static>(cx: &Ctx<S>, root: &Path) -> Result<Vec<Path>> {
    let mut all = Vec::new();
    if cx
        .io()
        .get_item(&cx.inner.layout.listing_key(root), true)
        .await?
        .is_none()
    {
        return Ok(all);
    }
    let mut level = vec![root.clone()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for (dir, names) in level.iter().zip(list_all(cx, &level).await?) {
            for n in names {
                next.push(dir.child(n)?);
            }
        }
        all.append(&mut level);
        level = next;
    }
    Ok(all)
}

/// The nodes under `root` (itself included) whose listing rows this operation holds, by
/// depth. With `through`, the walk also descends through rows it does not hold (a lock
/// erased by a writer that ignores locks, such as the Go library, must not hide the locks
/// below it); without, it stops at them (under a root that is not ours, nothing is).
async fn walk_held<S: Storage + 'static>(
    cx: &Ctx<S>,
    root: &Path,
    id: &str,
    through: bool,
) -> Result<Vec<Vec<Path>>> {
    let held = |row: &Item| row.get(cx.inner.layout.moving_attr()) == Some(&Value::S(id.into()));
    let mut levels: Vec<Vec<Path>> = Vec::new();
    let root_row = cx
        .io()
        .get_item(&cx.inner.layout.listing_key(root), true)
        .await?;
    let root_held = root_row.as_ref().is_some_and(&held);
    // (node, held) pairs of the current depth that the walk goes on from.
    let mut level: Vec<(Path, bool)> = match root_row {
        Some(_) if root_held || through => vec![(root.clone(), root_held)],
        _ => vec![],
    };
    while !level.is_empty() {
        let mut children = Vec::new();
        let dirs: Vec<Path> = level.iter().map(|(p, _)| p.clone()).collect();
        for (dir, names) in dirs.iter().zip(list_all(cx, &dirs).await?) {
            for n in names {
                children.push(dir.child(n)?);
            }
        }
        let keys: Vec<Key> = children
            .iter()
            .map(|p| cx.inner.layout.listing_key(p))
            .collect();
        cx.ensure_verified().await?;
        let rows = get_all(&cx.inner.storage, keys, true, &cx.inner.config.retry).await?;
        let held_keys: std::collections::HashSet<Key> = rows
            .iter()
            .filter(|r| held(r))
            .filter_map(Key::from_item)
            .collect();
        levels.push(
            level
                .iter()
                .filter(|(_, h)| *h)
                .map(|(p, _)| p.clone())
                .collect(),
        );
        level = children
            .into_iter()
            .map(|p| {
                let h = held_keys.contains(&cx.inner.layout.listing_key(&p));
                (p, h)
            })
            .filter(|(_, h)| *h || through)
            .collect();
    }
    Ok(levels)
}

/// Whether `levels` (held nodes by depth, from [`walk_held`](walk_held) through
/// rows not held) is a whole subtree of `root`: the root is held and every held node's
/// parent is.
fn holds_whole(root: &Path, levels: &[Vec<Path>]) -> bool {
    if levels
        .first()
        .is_none_or(|l| l.as_slice() != std::slice::from_ref(root))
    {
        return false;
    }
    levels.windows(2).all(|w| {
        w[1].iter()
            .all(|p| p.parent().is_some_and(|parent| w[0].contains(&parent)))
    })
}

/// Writes every node and object under the destination, top-down, each listing row locked
/// by the operation (so writers there are refused until it ends, and nothing of theirs is
/// overwritten). Returns (nodes, objects).
/// Also returns the destination nodes it wrote that name nothing (kept for children that
/// were all skipped or hollow themselves), deepest first, for removal after the unlock.
/// Also returns, for a copy whose policy is not `Ignore`, its links whose originals point
/// into the source (see [`MoveReport::links`]).
async fn copy_levels<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    levels: &[Vec<Path>],
) -> Result<(usize, usize, Vec<Path>, Vec<(Path, Path)>)> {
    // A resumed call may know the subtree's width only now.
    add_lanes(cx, g, widest(levels)).await?;
    let intent = g.snapshot();
    let lock = Value::S(intent.id.clone());
    let (mut nodes, mut objects) = (0, 0);
    let mut links = Vec::new();
    let total: usize = levels.iter().map(Vec::len).sum();
    // Source nodes not copied (they name nothing), and those copied without an object.
    let mut skipped: HashSet<Path> = HashSet::new();
    let mut objectless: Vec<(usize, Path)> = Vec::new();
    let parent = intent.to.parent().filter(|p| !p.is_root());
    for (depth, level) in levels.iter().enumerate() {
        renew_if_due(cx, g).await?;
        let sources = objects_of(cx, level).await?;
        let object_of = |p: &Path| sources.get(&cx.inner.layout.object_key(p).hash);
        let next = levels.get(depth + 1).map(Vec::as_slice);
        let carried = move_plan::carried(depth, level, next, |p| object_of(p).is_some());
        skipped.extend(carried.skipped.into_iter().cloned());
        objectless.extend(carried.objectless.into_iter().map(|p| (depth, p.clone())));
        // Only the root's level checks the destination's parent, and it is one node.
        let check = if depth == 0 { parent.as_ref() } else { None };
        // In slices of one transaction each, each reported: a level can hold most of the
        // subtree. The slices of a level go out together, as many as the intent has lanes;
        // the first that fails stops the level. A node's listing row and object are never
        // in two transactions, which would land in either order.
        let cap = TRANSACT_MAX - 1 - cx.enclosing.len() - usize::from(check.is_some());
        let weights = carried.kept.iter().map(|&p| {
            1 + usize::from(object_of(p).is_some()) + super::links::extra_actions(cx, object_of(p))
        });
        let kept = &carried.kept;
        let packed: Vec<&[&Path]> = move_plan::pack(weights, cap)
            .into_iter()
            .map(|r| &kept[r])
            .collect();
        let packed = if g.lanes.count() > 1 {
            move_plan::spread(packed, |s| s.first().and_then(|p| p.parent()))
        } else {
            packed
        };
        let done = bounded(
            packed,
            g.lanes.count(),
            |slice| {
                let (intent, lock, object_of) = (&intent, &lock, &object_of);
                async move {
                    let mut copies = Vec::with_capacity(slice.len());
                    let mut slice_links = Vec::new();
                    for &p in slice {
                        let dest = dest_of(intent, p)?;
                        let object = match object_of(p) {
                            Some(src) => {
                                if intent.op == Operation::Copy
                                    && intent.links != LinkPolicy::Ignore
                                    && let Some(target) = link_into(cx, src, &intent.from)
                                {
                                    slice_links.push((dest.clone(), target));
                                }
                                Some(copied_row(cx, intent, src, &dest)?)
                            }
                            None => None,
                        };
                        copies.push(move_plan::CopiedNode { dest, object });
                    }
                    let slice_objects = copies.iter().filter(|c| c.object.is_some()).count();
                    let mut attempts = Backoff::new(cx.inner.config.retry);
                    loop {
                        if let Some(parent) = check {
                            ensure_listing(cx, g, parent).await?;
                        }
                        let (actions, first_dest) =
                            move_plan::copy_slice(&cx.inner.layout, lock, check, copies.clone());
                        let failed = fenced(cx, g, actions, false).await?;
                        let Some(&i) = failed.first() else {
                            return Ok((slice.len(), slice_objects, slice_links));
                        };
                        // A listing row failed: something is at the destination. Else the
                        // parent's check failed: held by another operation (refused), or
                        // removed or being removed meanwhile (create it again, or wait for the
                        // removal).
                        let Some(parent) = check.filter(|_| i < first_dest) else {
                            return Err(Error::new(
                                ErrorKind::AlreadyExists,
                                format!("something is already at {}", intent.to),
                            ));
                        };
                        let key = cx.inner.layout.listing_key(parent);
                        cx.inner.known.remove(&key);
                        if cx
                            .io()
                            .get_item(&key, true)
                            .await?
                            .is_some_and(|r| r.contains(cx.inner.layout.moving_attr()))
                        {
                            return Err(Error::new(
                                ErrorKind::Locked,
                                format!(
                                    "the destination's parent {parent} is held by another operation"
                                ),
                            ));
                        }
                        if !owner_retry(cx, g, &mut attempts).await? {
                            return Err(Error::new(
                                ErrorKind::Conflict,
                                format!("the destination's parent {parent} kept being removed"),
                            ));
                        }
                    }
                }
                .boxed()
            },
            |(n, _, _)| {
                nodes += n;
                cx.tell(intent.op, Phase::Copy, nodes, Some(total));
                false
            },
        )
        .await?;
        for (_, slice_objects, mut slice_links) in done {
            objects += slice_objects;
            links.append(&mut slice_links);
        }
    }
    let hollow = move_plan::hollow(levels, &skipped, &objectless)
        .iter()
        .map(|p| dest_of(&intent, p))
        .collect::<Result<Vec<_>>>()?;
    links.sort();
    Ok((nodes, objects, hollow, links))
}

/// The row `src` copied to `dest` ([`moved_row`](moved_row)); a copy with
/// [`LinkPolicy::Rewrite`] points a link into its source at the same place under its
/// destination.
fn copied_row<S: Storage + 'static>(
    cx: &Ctx<S>,
    intent: &Intent,
    src: &Item,
    dest: &Path,
) -> Result<Item> {
    let mut row = moved_row(cx, src, dest, &intent.id)?;
    // Where the copy came from, until the operation releases it (for readers of the stream).
    let origin = if intent.op == Operation::Copy {
        cx.inner.layout.copied_from_attr()
    } else {
        cx.inner.layout.moved_from_attr()
    };
    let rest = dest.components().get(intent.to.len()..).unwrap_or_default();
    let from = Path::new(intent.from.components().iter().chain(rest).cloned())?;
    row.insert(origin, Value::S(cx.inner.layout.encode_target(&from)));
    crate::layout::check_item_size(&row)?;
    if intent.op == Operation::Copy
        && intent.links == LinkPolicy::Rewrite
        && let Some(target) = link_into(cx, src, &intent.from)
    {
        let target = dest_of(intent, &target)?;
        cx.inner.layout.check_object_path(&target)?;
        row.insert(
            cx.inner.layout.link_attr(),
            Value::S(cx.inner.layout.encode_target(&target)),
        );
        crate::layout::check_item_size(&row)?;
    }
    // A link's entry in the link index must fit DynamoDB's key limits at its new place.
    if let (Some(depth), Some((link, target))) =
        (cx.link_depth(), cx.inner.layout.link_of_row(&row))
    {
        cx.inner.layout.link_entry_key(&link, &target, depth)?;
    }
    Ok(row)
}

/// The target of the link row `row`, if it is `from` or under it.
fn link_into<S: Storage + 'static>(cx: &Ctx<S>, row: &Item, from: &Path) -> Option<Path> {
    let raw = row.get_s(cx.inner.layout.link_attr())?;
    let target = cx.inner.layout.decode_target(raw).ok()?;
    target.starts_with(from).then_some(target)
}

/// The links of a copy's destination whose originals point into its source, from the
/// source it holds (for a call that resumed the copy after its copy phase).
async fn links_within<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard) -> Result<Vec<(Path, Path)>> {
    let intent = g.snapshot();
    let mut out = Vec::new();
    for level in walk_held(cx, &intent.from, &intent.id, true).await? {
        let sources = objects_of(cx, &level).await?;
        for p in &level {
            if let Some(target) = sources
                .get(&cx.inner.layout.object_key(p).hash)
                .and_then(|src| link_into(cx, src, &intent.from))
            {
                out.push((dest_of(&intent, p)?, target));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// An object row re-keyed for `dest`, its path-index attributes recomputed, checked
/// against the limits.
/// The row `src` moved to `dest`, held by the operation `id` (its copy is the operation's
/// until it unlocks the destination: an overwrite sent as one PutItem must not land there
/// while the operation may still write it again).
fn moved_row<S: Storage + 'static>(cx: &Ctx<S>, src: &Item, dest: &Path, id: &str) -> Result<Item> {
    let layout = &cx.inner.layout;
    let held = layout.held_attr();
    let origins = [
        layout.moved_from_attr(),
        layout.copied_from_attr(),
        layout.moved_to_attr(),
    ];
    let mut row: Item = src
        .iter()
        .filter(|(n, _)| {
            !layout.is_path_index_attr(n)
                && !layout.is_target_version_attr(n)
                && *n != held
                && !origins.iter().any(|o| o == n)
        })
        .map(|(n, v)| (n.to_owned(), v.clone()))
        .collect();
    row.insert(held, Value::S(id.to_owned()));
    let key = cx.inner.layout.object_key(dest);
    row.insert(HASH_KEY, Value::S(key.hash));
    row.insert(RANGE_KEY, Value::S(key.range));
    ops::add_path_index(cx, dest, &mut row)?;
    crate::layout::check_item_size(&row)?;
    Ok(row)
}

/// Deletes held nodes bottom-up: objects, and listing rows conditional on our lock, so the
/// tree stays upward-closed at every step. With `count`, returns how many objects were
/// there (one more consistent read per level).
async fn delete_levels<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    levels: &[Vec<Path>],
    count: bool,
) -> Result<usize> {
    add_lanes(cx, g, widest(levels)).await?;
    let lock = Value::S(g.id());
    let op = g.snapshot().op;
    let total: usize = levels.iter().map(Vec::len).sum();
    let mut done = 0;
    let mut deleted = 0;
    // Nodes that keep their listing row: a child of theirs was not ours to delete (its
    // lock was erased by a writer that ignores locks, which may have written since), so
    // removing the row would break upward closure. Their own rows are only unlocked.
    let mut keep: HashSet<Path> = HashSet::new();
    let mut kept: Vec<Path> = Vec::new();
    for level in levels.iter().rev() {
        if count {
            deleted += objects_of(cx, level).await?.len();
        }
        for p in level {
            cx.inner.known.remove(&cx.inner.layout.listing_key(p));
        }
        // In slices, each reported, together on the intent's lanes: a node's row is kept
        // or not by its children, one level down (all deleted or kept before this level
        // starts), never by its own level.
        let keep_below = &keep;
        let lock = &lock;
        let results = bounded(
            slices(g, level, DELETE_SLICE, (TRANSACT_MAX - 2) / 2),
            g.lanes.count(),
            |slice| {
                async move {
                    let removal = guard::removal(cx);
                    let actions =
                        move_plan::delete_slice(&cx.inner.layout, lock, removal, slice, keep_below);
                    // A node whose lock is gone keeps its object too: only rows still proven
                    // ours are deleted.
                    let failed = fenced_groups(cx, g, actions, true, 2).await?;
                    Ok((slice, failed))
                }
                .boxed()
            },
            |(slice, _)| {
                done += slice.len();
                cx.tell(op, Phase::Delete, done, Some(total));
                false
            },
        )
        .await?;
        for (slice, failed) in results {
            kept.extend(move_plan::after_delete(slice, &failed, &mut keep));
        }
    }
    // The objects kept (their rows were no longer ours) lose our hold.
    release_objects(cx, g, &kept).await?;
    Ok(deleted)
}

/// Holds the object rows of the locked source (`SC held` = the operation's id), in slices
/// (together on the intent's lanes), so that an overwrite sent as one PutItem (conditional on no
/// hold) cannot land between the copy and the delete of its object. Objects cannot appear or go under the
/// locks meanwhile (creations and deletions check the listing rows), so the set read here
/// is the set held.
async fn hold_objects<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    levels: &[Vec<Path>],
) -> Result<()> {
    let fenced = cx.inner.config.fenced_puts;
    let intent = g.snapshot();
    let op = intent.op;
    // A move names each source's destination with its hold (`SC movedto`), for readers of
    // the stream; the destination is checked already (the lock phase's limits).
    let moved_to = |p: &Path| dest_of(&intent, p).ok();
    let moved_to: Option<&move_plan::Destinations<'_>> =
        (op == Operation::Move).then_some(&moved_to);
    let total: usize = levels.iter().map(Vec::len).sum();
    let mut done = 0;
    // In slices, each reported (still the lock phase, its total known now), together on the
    // intent's lanes: holds do not depend on each other.
    bounded(
        levels.iter().flat_map(|l| l.chunks(PROGRESS_SLICE)),
        g.lanes.count(),
        |level| {
            async move {
                let mut attempts = Backoff::new(cx.inner.config.retry);
                loop {
                    renew_if_due(cx, g).await?;
                    let objects = read::objects_of(cx, level, true).await?;
                    for p in level {
                        cx.inner.known.remove(&cx.inner.layout.object_key(p));
                    }
                    // Fenced puts: where no object is, a held fence, which a PutItem trusting an
                    // earlier look at the (now locked) listing row cannot pass; an object written
                    // meanwhile fails it, and the level is held again. An object gone meanwhile
                    // (only a writer that ignores locks can do that) is not held: nothing to copy
                    // there either.
                    let fence = fenced.then(|| (guard::fence_expiry(), crate::expiry::now_secs()));
                    // The hold and the destination's name count in the source row's size.
                    if let Some(to) = moved_to {
                        for (p, row) in level.iter().filter_map(|p| {
                            objects
                                .get(&cx.inner.layout.object_key(p).hash)
                                .map(|r| (p, r))
                        }) {
                            let mut held = row.clone();
                            held.insert(cx.inner.layout.held_attr(), Value::S(g.id()));
                            if let Some(dest) = to(p) {
                                held.insert(
                                    cx.inner.layout.moved_to_attr(),
                                    Value::S(cx.inner.layout.encode_target(&dest)),
                                );
                            }
                            crate::layout::check_item_size(&held)?;
                        }
                    }
                    let (actions, fences) = move_plan::hold(
                        &cx.inner.layout,
                        &g.id(),
                        level,
                        |k| objects.contains_key(&k.hash),
                        fence,
                        moved_to,
                    );
                    let failed = self::fenced(cx, g, actions, true).await?;
                    if !failed.iter().any(|i| fences.contains(i)) {
                        break;
                    }
                    if !attempts.spend() {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            "objects kept appearing under the operation's locks",
                        ));
                    }
                }
                Ok(level.len())
            }
            .boxed()
        },
        |n| {
            done += n;
            cx.tell(op, Phase::Lock, done, Some(total));
            false
        },
    )
    .await?;
    Ok(())
}

/// Takes the operation's holds off the object rows at `paths` (those it still holds).
async fn release_objects<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    paths: &[Path],
) -> Result<()> {
    let id = &Value::S(g.id());
    bounded(
        paths.chunks(crate::storage::batch::TRANSACT_MAX),
        g.lanes.count(),
        |chunk| {
            async move {
                let rows = read::rows_of(cx, chunk, true).await?;
                // A fence the operation wrote where no object was (fenced puts) goes: the
                // listing row is still there, so a PutItem landing now is reachable.
                let actions = move_plan::release(&cx.inner.layout, id, chunk, &rows);
                fenced(cx, g, actions, true).await
            }
            .boxed()
        },
        |_| false,
    )
    .await?;
    Ok(())
}

/// Takes the operation's locks off the listing rows of `paths` (rows not held are left):
/// level by level, parents first, each level's transactions together on the intent's lanes.
async fn unlock_paths<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard, paths: &[Path]) -> Result<()> {
    let lock = Value::S(g.id());
    for level in by_depth(g, paths) {
        let actions = move_plan::unlock(&cx.inner.layout, &lock, &level);
        fenced_groups(cx, g, actions, true, 1).await?;
    }
    Ok(())
}

/// `paths` (top-down) in groups that may be unlocked together: with one lane, all of them
/// (one transaction at a time keeps their order); else one group per depth, shallowest
/// first, each in the order of `paths`. Either way a node's lock never comes off before its
/// parent's (see "Requests in flight" in `moves.md`).
fn by_depth(g: &Guard, paths: &[Path]) -> Vec<Vec<Path>> {
    if g.lanes.count() <= 1 {
        return vec![paths.to_vec()];
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<Path>> = Default::default();
    for p in paths {
        groups.entry(p.len()).or_default().push(p.clone());
    }
    groups.into_values().collect()
}

/// [`lanes_for`] the widest of `levels`.
fn widest(levels: &[Vec<Path>]) -> usize {
    lanes_for(levels.iter().map(Vec::len).max().unwrap_or(0))
}

/// The slices of `level` a phase sends, each reported: `size` nodes each with one lane (one
/// transaction at a time, in order); with several, `one` each (one transaction's worth), in
/// turns across the partitions of their parents' listing rows, so that the transactions in
/// flight together do not all write into one partition (1,000 write units a second).
fn slices<'a>(g: &Guard, level: &'a [Path], size: usize, one: usize) -> Vec<&'a [Path]> {
    if g.lanes.count() <= 1 {
        return level.chunks(size).collect();
    }
    move_plan::spread(level.chunks(one), |s| s.first().and_then(Path::parent))
}

/// Lanes for a level of `nodes` nodes: one per transaction of its widest phase (a copy or
/// a deletion, two actions a node).
fn lanes_for(nodes: usize) -> usize {
    nodes.div_ceil((TRANSACT_MAX - 2) / 2)
}

/// Releases the holds on the objects at `holds`, then unlocks the listing rows of `paths`,
/// in slices, each reported (`"unlock"`: the holds and rows done, of both).
async fn release_and_unlock<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    holds: &[Path],
    paths: &[Path],
) -> Result<()> {
    let op = g.snapshot().op;
    let total = holds.len() + paths.len();
    let mut done = 0;
    // Every hold is released before the first lock comes off; the holds' slices go out
    // together, and the locks level by level, parents first, each level's slices together
    // (on the intent's lanes).
    let tell = |done: &mut usize, n: usize| {
        *done += n;
        cx.tell(op, Phase::Unlock, *done, Some(total));
        false
    };
    bounded(
        holds.chunks(RELEASE_SLICE),
        g.lanes.count(),
        |slice| async move { release_objects(cx, g, slice).await.map(|()| slice.len()) }.boxed(),
        |&n| tell(&mut done, n),
    )
    .await?;
    for level in by_depth(g, paths) {
        bounded(
            slices(g, &level, PROGRESS_SLICE, TRANSACT_MAX - 1),
            g.lanes.count(),
            |slice| async move { unlock_paths(cx, g, slice).await.map(|()| slice.len()) }.boxed(),
            |&n| tell(&mut done, n),
        )
        .await?;
    }
    Ok(())
}

/// Points links into the source at their new place under the destination, each only if
/// it still points where it did (a link changed or deleted meanwhile is left alone), each
/// in a transaction fenced by our ownership. A link whose node is held by another
/// operation waits for that operation (helped to its end, as `resume` would), and the
/// links are looked up again (it may have moved or copied them) until a look finds none
/// left. A link whose new target would break a limit (one created during the move) is
/// left as it was.
async fn rewrite_links<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    links: &[(Path, Path)],
) -> Result<()> {
    let intent = g.snapshot();
    let mut pending: Vec<(Path, Path)> = links.to_vec();
    // Each round follows links created meanwhile by other calls (their progress): bounded by
    // the policy alone, not cut short by this call's other retries.
    let mut rounds = Backoff::alone(cx.inner.config.retry);
    let mut blockers = std::collections::BTreeSet::new();
    loop {
        let mut held_elsewhere = false;
        let mut rewritten = 0;
        for (link, target) in &pending {
            let Ok(row) = dest_of(&intent, target).and_then(|t| cx.link_row_for(link, &t)) else {
                continue;
            };
            let unchanged = cx.inner.layout.links_to(target);
            // The link's object exists (the put is conditional on its old target), so a
            // removal mark on its listing row cannot end in the row's deletion: only a
            // lock matters. A re-parenting's lock is no obstacle either: it never copies
            // its node's own row (it deletes it at its end), so waiting for it is needless
            // and could wait in a circle (the re-parenting may be waiting for this move).
            let mut allowed: Option<Value> = None;
            loop {
                let check = cx.inner.layout.unlocked_or(allowed.as_ref());
                let actions = vec![
                    TransactAction::ConditionCheck {
                        key: cx.inner.layout.listing_key(link),
                        condition: exists_and(check),
                    },
                    TransactAction::Put {
                        item: row.clone(),
                        condition: unchanged.clone(),
                    },
                ];
                let failed = fenced(cx, g, actions, false).await?;
                if failed.is_empty() {
                    rewritten += 1;
                } else if failed.contains(&0) {
                    let holder = cx
                        .io()
                        .get_item(&cx.inner.layout.listing_key(link), true)
                        .await?
                        .and_then(|r| r.get(cx.inner.layout.moving_attr()).cloned());
                    if let Some(Value::S(other)) = holder {
                        if allowed.is_none() && is_reparenting(cx, &other).await? {
                            allowed = Some(Value::S(other));
                            continue;
                        }
                        blockers.insert(other);
                    }
                    held_elsewhere = true;
                }
                break;
            }
        }
        // The moves, copies and subtree deletions holding links: help them to their end
        // (waiting while their owner runs them, taking them over if their owner died), as
        // `resume` would. None of them waits for another operation while it holds rows (a
        // move in this phase holds none; re-parentings, which do wait for their child
        // moves, are not waited for, see above), so this cannot wait in a circle.
        for other in std::mem::take(&mut blockers) {
            if other != intent.id {
                let _ = Box::pin(drive(cx, &other)).await;
            }
        }
        // Look again: a link copied or moved meanwhile (with its old target) is as much a
        // link into the old place as the ones found before. The operation is not over
        // until a look finds none left, so every link created before it ends is rewritten.
        if rewritten == 0 && !held_elsewhere {
            break;
        }
        let Some(retry) = rounds.next_retry() else {
            // Out of rounds: done only if a last look finds no link left that this move
            // could rewrite. Else the move fails, still recorded in its last phase, so that
            // `resume` (or the same call again) rewrites the rest: never an `Ok` with such a
            // link left into the source.
            let left = links_into(cx, &intent.from).await?;
            if rewritable(cx, &intent, left).await?.is_empty() {
                break;
            }
            return Err(Error::new(
                ErrorKind::Unfinished,
                format!(
                    "links into {} kept moving while the move rewrote them; the move is recorded and `resume` rewrites the rest",
                    intent.from
                ),
            ));
        };
        if held_elsewhere {
            owner_nap(cx, g, cx.inner.config.retry.delay(retry)).await?;
        }
        pending = links_into(cx, &intent.from).await?;
        if pending.is_empty() {
            break;
        }
    }
    Ok(())
}

/// Of the links `found` into the source, those this move could rewrite: a new target within
/// DynamoDB's limits (else the link is left pointing at the old place, see above) and a
/// listing row to check the link against (a link without one is a state `check` reports and
/// `repair` restores; no round can rewrite it, so it is left too).
async fn rewritable<S: Storage + 'static>(
    cx: &Ctx<S>,
    intent: &Intent,
    found: Vec<(Path, Path)>,
) -> Result<Vec<(Path, Path)>> {
    let mut out = Vec::new();
    for (link, target) in found {
        if dest_of(intent, &target)
            .and_then(|t| cx.link_row_for(&link, &t))
            .is_err()
        {
            continue;
        }
        let key = cx.inner.layout.listing_key(&link);
        if cx.io().get_item(&key, true).await?.is_some() {
            out.push((link, target));
        }
    }
    Ok(out)
}

/// Sends `actions` in transactions of at most 99, one after the other (a later action may
/// need an earlier one: a copied object its listing row), each with a check that this call
/// still owns the intent (so a call that lost its lease, or a stale resume, can write
/// nothing). Returns the indexes of actions whose condition failed, in order; with
/// `resend_rest`, the other actions of such a transaction are sent again without them,
/// else the operation stops at the first such transaction.
///
/// The actions must not depend on each other's order: their transactions go out together,
/// as many as the intent has lanes (see [`Lanes`](super::intent::Lanes)).
async fn fenced<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    actions: Vec<TransactAction>,
    resend_rest: bool,
) -> Result<Vec<usize>> {
    fenced_groups(cx, g, actions, resend_rest, 1).await
}

/// [`fenced`](fenced) for actions that go in groups of `group` consecutive actions
/// (an object and its listing row): a group is never split between transactions, and
/// when one action of a group fails, the whole group is dropped.
async fn fenced_groups<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    actions: Vec<TransactAction>,
    resend_rest: bool,
    group: usize,
) -> Result<Vec<usize>> {
    fenced_with(cx, g, actions, resend_rest, group, g.lanes.count()).await
}

/// [`fenced`](fenced) for actions that must land in their order: one transaction at a time.
async fn fenced_in_order<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    actions: Vec<TransactAction>,
) -> Result<Vec<usize>> {
    fenced_with(cx, g, actions, false, 1, 1).await
}

/// [`fenced_groups`] with at most `limit` transactions in flight.
async fn fenced_with<S: Storage + 'static>(
    cx: &Ctx<S>,
    g: &Guard,
    actions: Vec<TransactAction>,
    resend_rest: bool,
    group: usize,
    limit: usize,
) -> Result<Vec<usize>> {
    let group = group.max(1);
    let id = g.id();
    let indexed: Vec<(usize, TransactAction)> = actions.into_iter().enumerate().collect();
    // One check of our own intent (or of the lane the transaction takes), and one of each
    // enclosing operation's.
    let checks = 1 + cx.enclosing.len();
    let chunk_size = (TRANSACT_MAX - checks) / group * group;
    let id = &id;
    // Up to `limit` transactions in flight, each on its own lane, so that they never meet on
    // the row they check. Without `resend_rest`, the first with a failed condition starts
    // no more.
    let chunks: Vec<&[(usize, TransactAction)]> = indexed.chunks(chunk_size).collect();
    let chunks = if limit > 1 {
        // In turns across the partitions of their first rows (a level's listing rows sit in
        // their parents' partitions).
        move_plan::spread(chunks, |c| {
            c.first().and_then(|(_, a)| a.key()).map(|k| k.hash)
        })
    } else {
        chunks
    };
    let failed = bounded(
        chunks,
        limit,
        |chunk| {
            async move {
                let mut failed_all = Vec::new();
                let mut pending: Vec<(usize, TransactAction)> = chunk.to_vec();
                let mut backoff = Backoff::new(cx.inner.config.retry);
                // The lane taken, kept through the wait after a throttled try: the next try
                // goes before any transaction of the operation not yet in flight, so the
                // partition's capacity that comes back is not taken by them first.
                let mut kept = None;
                while !pending.is_empty() {
                    renew_if_due(cx, g).await?;
                    let mut tx: Vec<TransactAction> =
                        pending.iter().map(|(_, a)| a.clone()).collect();
                    let lane = match kept.take() {
                        Some(lane) => lane,
                        None => g.lanes.take().await,
                    };
                    let key = match lane.index() {
                        0 => cx.inner.layout.intent_key(id),
                        k => cx.inner.layout.intent_lane_key(id, k),
                    };
                    tx.push(TransactAction::ConditionCheck {
                        key,
                        condition: owned_by(cx, &g.token),
                    });
                    tx.extend(enclosing_checks(cx));
                    cx.ensure_verified().await?;
                    // Sent as it is (its throttling is handled below), but with the link
                    // index's entries of the link rows it puts, as `Io` adds them.
                    let tx = super::links::with_entries_in(cx, tx).await?;
                    let sent = cx.inner.storage.transact_write(tx).await;
                    match sent {
                        // Throttled (DynamoDB reports a throttled transaction as canceled
                        // with `ThrottlingError` reasons, or as throttled).
                        Err(e) if e.is_throttling() => {
                            match g.lanes.throttled() {
                                Throttle::Yield => {
                                    drop(lane);
                                    let n = backoff.next_wait();
                                    crate::retry::sleep_for(cx.inner.config.retry.delay(n)).await;
                                }
                                Throttle::Wait => {
                                    kept = Some(lane);
                                    let n = backoff.next_wait();
                                    crate::retry::sleep_for(cx.inner.config.retry.delay(n)).await;
                                }
                                Throttle::Spend => {
                                    kept = Some(lane);
                                    if !backoff.retry().await {
                                        return Err(e);
                                    }
                                }
                            }
                            continue;
                        }
                        _ => {
                            drop(lane);
                            g.lanes.landed();
                        }
                    }
                    match sent {
                        Ok(()) => {
                            // With transactions in flight together, each that lands is a
                            // step of the call: their throttled tries draw from one budget,
                            // which a call making progress must not run out of.
                            if g.lanes.count() > 1 {
                                crate::retry::progressed();
                            }
                            break;
                        }
                        Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                            let reasons = e.cancellation_reasons();
                            if reasons
                                .iter()
                                .skip(pending.len())
                                .any(crate::error::CancellationReason::is_condition_failed)
                            {
                                return Err(taken_over().with_source(e));
                            }
                            let failed: Vec<usize> = reasons
                                .iter()
                                .take(pending.len())
                                .enumerate()
                                .filter(|(_, r)| r.is_condition_failed())
                                .map(|(i, _)| i)
                                .collect();
                            if !failed.is_empty() {
                                failed_all.extend(failed.iter().map(|&i| pending[i].0));
                                if !resend_rest {
                                    return Ok(failed_all);
                                }
                                let dropped: std::collections::HashSet<usize> =
                                    failed.iter().map(|&i| pending[i].0 / group).collect();
                                pending.retain(|(i, _)| !dropped.contains(&(i / group)));
                                continue;
                            }
                            if !backoff.retry().await {
                                return Err(e);
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(failed_all)
            }
            .boxed()
        },
        |failed| !resend_rest && !failed.is_empty(),
    )
    .await?;
    Ok(failed.concat())
}

/// Creates the listing rows of `path` and its ancestors that are missing, fenced by our
/// ownership (a call that lost its lease creates nothing). A failed check (an ancestor
/// removed meanwhile) is left to the caller's own check of `path`.
async fn ensure_listing<S: Storage + 'static>(cx: &Ctx<S>, g: &Guard, path: &Path) -> Result<()> {
    let keys = cx.prefix_keys(path);
    if keys.iter().all(|k| cx.inner.known.contains(k)) {
        return Ok(());
    }
    let found = cx.prefix_rows(&keys).await?;
    let mut actions = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if found[i].is_some() {
            continue;
        }
        // Each new row with proof that its parent row is there (upward closure).
        if actions.is_empty() && i > 0 {
            actions.push(TransactAction::ConditionCheck {
                key: keys[i - 1].clone(),
                condition: guard::free_row(cx),
            });
        }
        actions.push(TransactAction::Put {
            item: k.clone().into_item(),
            condition: guard::not_marked(cx),
        });
    }
    if !actions.is_empty() && !fenced_in_order(cx, g, actions).await?.is_empty() {
        return Ok(());
    }
    cx.inner.known.insert_all(keys);
    Ok(())
}

/// Links anywhere in the tree whose target is `from` or under it: from the link index when
/// the tree keeps one as deep as `from` (see `links.md`), else one Scan.
async fn links_into<S: Storage + 'static>(cx: &Ctx<S>, from: &Path) -> Result<Vec<(Path, Path)>> {
    if let Some(found) = super::links::into(cx, from).await? {
        return Ok(found);
    }
    let link_attr = cx.inner.layout.link_attr().to_owned();
    let items: Vec<Item> = cx.tree().scan().try_collect().await?;
    let mut out = Vec::new();
    for item in items {
        let (Some(target), Some(hash)) = (item.get_s(&link_attr), item.get_s(HASH_KEY)) else {
            continue;
        };
        if item.get_s(RANGE_KEY) != Some(cx.inner.layout.link_attr()) {
            continue;
        }
        let (Ok(target), Ok(link)) = (
            cx.inner.layout.decode_target(target),
            cx.inner.layout.decode_target(hash),
        ) else {
            continue;
        };
        if target.starts_with(from) {
            out.push((link, target));
        }
    }
    out.sort();
    Ok(out)
}

/// Reads a phase of a move, copy or subtree deletion keeps in flight at once
/// ([`TreeBuilder::subtree_reads_in_flight`](crate::TreeBuilder::subtree_reads_in_flight),
/// default 16): the consistent Queries listing a level's nodes and the BatchGetItems reading
/// a level's objects.
fn in_flight<S: Storage>(cx: &Ctx<S>) -> usize {
    cx.inner.config.in_flight.max(1)
}

/// Runs `step` on each of `items`, at most `limit` at once, and returns their results in
/// the order of `items`; `seen` is called on each result in that order, as soon as it and
/// every result before it are in, and returning `true` starts no more steps. At the first
/// error (the first to happen, wherever it is in the order) no more steps start either:
/// those in flight are awaited (a request already sent lands or fails before this returns,
/// so nothing of the call's is still on its way when it goes on, rolls back or fails), then
/// that error is returned.
fn bounded<'a, T, R, I, F, G>(
    items: I,
    limit: usize,
    mut step: F,
    mut seen: G,
) -> futures::future::BoxFuture<'a, Result<Vec<R>>>
where
    I: IntoIterator<Item = T>,
    I::IntoIter: Send + 'a,
    T: Send + 'a,
    R: Send + 'a,
    F: FnMut(T) -> futures::future::BoxFuture<'a, Result<R>> + Send + 'a,
    G: FnMut(&R) -> bool + Send + 'a,
{
    // Boxed: the future of a generic function holding closures that borrow is otherwise
    // not provably `Send` where the operation is spawned.
    let mut items = items.into_iter().enumerate();
    async move {
        use futures::StreamExt;
        let mut running = futures::stream::FuturesUnordered::new();
        // Results that came in before one ahead of them in the order.
        let mut waiting = std::collections::BTreeMap::new();
        let mut out = Vec::new();
        let mut first_err = None;
        let mut stopped = false;
        loop {
            while !stopped && first_err.is_none() && running.len() < limit.max(1) {
                match items.next() {
                    Some((i, item)) => {
                        let fut = step(item);
                        running.push(async move { (i, fut.await) });
                    }
                    None => break,
                }
            }
            match running.next().await {
                None => break,
                Some((_, Err(e))) => {
                    first_err.get_or_insert(e);
                }
                Some((i, Ok(r))) => {
                    if first_err.is_some() {
                        continue;
                    }
                    waiting.insert(i, r);
                    while let Some(r) = waiting.remove(&out.len()) {
                        stopped |= seen(&r);
                        out.push(r);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
    .boxed()
}

/// The objects at `paths` (a level), read consistently in BatchGetItems of 100 keys,
/// [`in_flight`] at once, by hash key.
async fn objects_of<S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: &[Path],
) -> Result<std::collections::HashMap<String, Item>> {
    let parts = bounded(
        paths.chunks(crate::storage::batch::BATCH_GET_MAX),
        in_flight(cx),
        |chunk| read::objects_of(cx, chunk, true).boxed(),
        |_| false,
    )
    .await?;
    Ok(parts.into_iter().flatten().collect())
}

/// The names of the children of each of `dirs`, in order, listed with consistent reads,
/// [`in_flight`] nodes at once.
async fn list_all<S: Storage + 'static>(cx: &Ctx<S>, dirs: &[Path]) -> Result<Vec<Vec<String>>> {
    bounded(
        dirs,
        in_flight(cx),
        |dir| {
            cx.list_names(dir, true)
                .try_collect::<Vec<String>>()
                .boxed()
        },
        |_| false,
    )
    .await
}

/// Nodes per progress report of a phase that writes a level in slices, each slice whole
/// transactions (of 99 actions besides the fence): two of a hold or an unlock (an action a
/// node), four of a copy (two).
const PROGRESS_SLICE: usize = 2 * (TRANSACT_MAX - 1);
/// [`PROGRESS_SLICE`] for a deletion, whose transactions take 49 groups of two actions.
const DELETE_SLICE: usize = 4 * ((TRANSACT_MAX - 1) / 2);
/// [`PROGRESS_SLICE`] for the release of holds, read and written 100 objects at a time.
const RELEASE_SLICE: usize = 2 * TRANSACT_MAX;

/// `p` (under the intent's source) moved under its destination.
fn dest_of(intent: &Intent, p: &Path) -> Result<Path> {
    let rest = p.components().get(intent.from.len()..).unwrap_or_default();
    Path::new(intent.to.components().iter().chain(rest).cloned())
}

/// Errors that refuse an operation in its copy phase: it is rolled back.
fn refuses(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Locked
            | ErrorKind::AlreadyExists
            | ErrorKind::Conflict
            | ErrorKind::InvalidPath
            | ErrorKind::ItemTooLarge
            | ErrorKind::InvalidValue
            | ErrorKind::InvalidArgument
            | ErrorKind::Validation
    )
}
