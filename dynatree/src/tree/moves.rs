#![doc = include_str!("moves.md")]

use futures::TryStreamExt;

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::layout::{HASH_KEY, RANGE_KEY};
use crate::path::{IntoPath, Path};
use crate::retry::Backoff;
use crate::storage::batch::{TRANSACT_MAX, get_all};
use crate::storage::{Condition, Key, Query, Storage, TransactAction, UpdateAction};
use crate::stream::query_pages;

use super::Tree;
use super::clock::{after_ms, now_ms};
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
    links: LinkPolicy,
    /// The token of the call that runs it now, if any, and until when (ms since the epoch) it
    /// may: the owner's lease.
    owner: Option<String>,
    lease: u64,
    /// Why it was refused (`"Kind: detail"`), once it is being rolled back.
    refusal: Option<String>,
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
    /// call took the move over (the outcome is that call's); backend errors (then call it
    /// again, or [`resume`](Tree::resume)).
    ///
    /// # Cancel safety
    ///
    /// A dropped future leaves the operation recorded: the same call again, or `resume`,
    /// finishes it.
    pub async fn move_subtree(&self, from: impl IntoPath, to: impl IntoPath) -> Result<MoveReport> {
        self.move_subtree_with(from, to, LinkPolicy::Report).await
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
        let (from, to) = self.enter_move(from, to, "move")?;
        let report = self.base().start(Operation::Move, from, to, links).await?;
        self.leave_report(report)
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
        self.copy_subtree_with(from, to, LinkPolicy::Ignore).await
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
        let (from, to) = self.enter_move(from, to, "copy")?;
        let report = self.base().start(Operation::Copy, from, to, links).await?;
        self.leave_report(report)
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
        let path = self.enter(path)?;
        self.inner.layout.check_object_path(&path)?;
        self.refuse_root(&path, "delete")?;
        let base = self.base();
        match on_children {
            OnChildren::Recursive => base.delete_subtree(&path).await.map(|_| ()),
            OnChildren::Refuse => base.delete_leaf(&path).await,
            OnChildren::Reparent => base.reparent(&path).await,
        }
    }

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
        let q = Query::new(self.inner.layout.intents_hash()).consistent(true);
        let rows: Vec<crate::storage::Page> = query_pages(self.io(), q, None).try_collect().await?;
        let all = rows
            .into_iter()
            .flat_map(|p| p.items)
            .map(|item| self.decode_intent(&item))
            .collect::<Result<Vec<_>>>()?;
        // Through a scope: its own operations, with relative paths.
        self.scoped_intents(all)
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
        let mut out = Vec::new();
        let mut first_error = None;
        for intent in self.pending().await? {
            match self.base().drive(&intent.id).await {
                Ok(Some(Outcome::Done(report))) => out.push(self.leave_report(report)?),
                // Finished elsewhere, or refused and rolled back: nothing left to do.
                Ok(None | Some(Outcome::RolledBack(_))) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Starts (or, when the same operation is recorded, resumes) a move, copy or subtree
    /// deletion.
    pub(crate) async fn start(
        &self,
        op: Operation,
        from: Path,
        to: Path,
        links: LinkPolicy,
    ) -> Result<MoveReport> {
        self.inner.layout.check_object_path(&from)?;
        self.inner.layout.check_object_path(&to)?;
        if op != Operation::Delete && (to.starts_with(&from) || from.starts_with(&to)) {
            return Err(Error::invalid_path(format!(
                "cannot {op} {from} to {to}: one contains the other"
            )));
        }
        // The same call again resumes it.
        if let Some(intent) = self
            .pending()
            .await?
            .into_iter()
            .find(|i| i.op == op && i.from == from && i.to == to)
        {
            return self.join(&intent.id).await;
        }
        // The destination first, then the source: a source that moved into this very
        // destination meanwhile reads as gone (`NotFound`), as it would serially; a missing
        // source is reported before a taken destination.
        let dest_taken = op != Operation::Delete
            && (self
                .io()
                .get_item(&self.inner.layout.listing_key(&to), true)
                .await?
                .is_some()
                || self
                    .io()
                    .get_item(&self.inner.layout.object_key(&to), true)
                    .await?
                    .is_some_and(|r| !self.inner.layout.is_fence(&r)));
        let source = self.inner.layout.listing_key(&from);
        let source_row = self.io().get_item(&source, true).await?;
        if source_row
            .as_ref()
            .is_some_and(|r| r.contains(self.inner.layout.moving_attr()))
        {
            // Held by another operation (moved, copied or deleted right now, or by one whose
            // process died: `resume` finishes it): refused, nothing written.
            return Err(self.locked_error(&from));
        }
        if source_row.is_none() {
            if op == Operation::Delete {
                // No listing row: no children, and by the invariants no object either (one a
                // foreign writer left unlisted is deleted while the row stays missing).
                let object = self.inner.layout.object_key(&from);
                let existed = self.io().get_item(&object, true).await?.is_some();
                if self.delete_unlisted(&from, Condition::Always).await? {
                    return Ok(MoveReport {
                        objects: usize::from(existed),
                        ..MoveReport::default()
                    });
                }
                // Listed meanwhile (a repair re-created the row): the whole protocol.
                return self.record_and_run(op, from, to, links).await;
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
        self.record_and_run(op, from, to, links).await
    }

    /// Records that the source of denormalized fields at `path` is about to change: an intent
    /// owned by this call, which [`run_owned`](Tree::run_owned) (or a `resume`) finishes by
    /// bringing every copy below `path` up to the source as it is then.
    pub(crate) async fn record_propagation(&self, path: &Path) -> Result<Guard> {
        self.record(
            Operation::Propagate,
            path.clone(),
            path.clone(),
            Phase::Propagate,
            LinkPolicy::Ignore,
        )
        .await
    }

    /// Records a new intent owned by this call: one PutItem.
    async fn record(
        &self,
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
            lease: after_ms(self.inner.config.lease),
            refusal: None,
        };
        self.io()
            .put_item(self.encode_intent(&intent), Condition::NotExists)
            .await?;
        Ok(Guard {
            intent: std::sync::Mutex::new(intent),
            token,
        })
    }

    /// Records a new intent owned by this call (before the first write of the operation),
    /// then runs it to its end.
    async fn record_and_run(
        &self,
        op: Operation,
        from: Path,
        to: Path,
        links: LinkPolicy,
    ) -> Result<MoveReport> {
        let guard = self.record(op, from, to, Phase::Lock, links).await?;
        match self.run_owned(&guard).await? {
            Outcome::Done(report) => Ok(report),
            Outcome::RolledBack(e) => Err(e),
        }
    }

    /// Joins the recorded operation `id` (the same call made again): runs it if nobody does,
    /// else waits for it.
    async fn join(&self, id: &str) -> Result<MoveReport> {
        match self.drive(id).await? {
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
    pub(crate) async fn drive(&self, id: &str) -> Result<Option<Outcome>> {
        let Some(guard) = self.claim(id).await? else {
            return Ok(None);
        };
        self.run_owned(&guard).await.map(Some)
    }

    /// Runs an owned intent; on failure, gives up the ownership so that a `resume` elsewhere
    /// need not wait for the lease.
    pub(crate) async fn run_owned(&self, g: &Guard) -> Result<Outcome> {
        let result = self.run(g).await;
        if result.is_err() {
            self.release_intent(g).await;
        }
        result
    }

    /// Gives up the ownership of an intent (after a failure), so that a `resume` elsewhere
    /// need not wait for the lease. Best effort: if it fails, the lease runs out instead.
    pub(crate) async fn release_intent(&self, g: &Guard) {
        let mut intent = g.snapshot();
        if intent.owner.is_some() {
            intent.owner = None;
            intent.lease = 0;
            let _ = self
                .io()
                .put_item(self.encode_intent(&intent), self.owned_by(&g.token))
                .await;
        }
    }

    /// Becomes the owner of intent `id`: at once if nobody owns it or the owner's lease ran
    /// out; after waiting, while another call runs it. `None` if it disappears meanwhile.
    async fn claim(&self, id: &str) -> Result<Option<Guard>> {
        let key = self.inner.layout.intent_key(id);
        let mut waited = 0u32;
        loop {
            let Some(item) = self.io().get_item(&key, true).await? else {
                return Ok(None);
            };
            let intent = self.decode_intent(&item)?;
            let now = now_ms();
            if intent.owner.is_some() && intent.lease >= now {
                // Someone is running it: wait for it to finish, or for its lease to run out.
                let left = std::time::Duration::from_millis(intent.lease - now + 1);
                let nap = self
                    .inner
                    .config
                    .retry
                    .delay(waited.min(8))
                    .max(std::time::Duration::from_millis(1));
                tokio::time::sleep(nap.min(left)).await;
                waited = waited.saturating_add(1);
                continue;
            }
            let token = new_token();
            // Exactly the record read: a slow owner that is still alive moves its phase on or
            // renews its lease without changing its token, and taking over from a stale read
            // would write an older phase back over its progress (and roll it back).
            let mut unchanged: Vec<Condition> = item
                .iter()
                .map(|(name, value)| Condition::equals(name, value.clone()))
                .collect();
            if intent.owner.is_none() {
                unchanged.push(Condition::attr_not_exists(self.owner_attr()));
            }
            let condition = Condition::And(unchanged);
            let mut mine = intent.clone();
            mine.owner = Some(token.clone());
            mine.lease = after_ms(self.inner.config.lease);
            match self
                .io()
                .put_item(self.encode_intent(&mine), condition)
                .await
            {
                Ok(()) => {
                    return Ok(Some(Guard {
                        intent: std::sync::Mutex::new(mine),
                        token,
                    }));
                }
                Err(e) if e.kind() == ErrorKind::ConditionFailed => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The phases, from the recorded one to the end.
    async fn run(&self, g: &Guard) -> Result<Outcome> {
        let op = g.snapshot().op;
        if op == Operation::Reparent {
            return self.run_reparent(g).await;
        }
        if op == Operation::Propagate {
            let path = g.snapshot().from;
            if !self.knows_targets() {
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
            self.refresh_own(&path).await?;
            self.reconcile_source(&path, None, Some(g)).await?;
            self.finish(g).await?;
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
        // that started at the lock phase copied everything under the destination itself, so
        // it may unlock the destination from what it knows; a resumed one walks it.
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
                    let levels = match self.lock_walk(g).await {
                        Ok(levels) => levels,
                        Err(e) if matches!(e.kind(), ErrorKind::Locked | ErrorKind::Conflict) => {
                            return self.refuse(g, e).await;
                        }
                        Err(e) => return Err(e),
                    };
                    if op == Operation::Delete && levels.first().is_none_or(Vec::is_empty) {
                        // Deleted by an operation that came first: nothing left to do.
                        self.finish(g).await?;
                        return Ok(Outcome::Done(report));
                    }
                    if levels.first().is_none_or(Vec::is_empty) {
                        // The source went away before it was locked (moved or deleted by
                        // another operation that came first).
                        let e = Error::new(ErrorKind::NotFound, format!("nothing at {from}"));
                        return self.refuse(g, e).await;
                    }
                    if op != Operation::Delete
                        && let Err(e) = self.validate(g, &levels).await
                    {
                        return self.refuse(g, e).await;
                    }
                    if op != Operation::Delete || self.inner.config.fenced_puts {
                        // Overwrites that skip the listing row's check (one PutItem) meet the
                        // hold on the object and take the guarded path, which the locks refuse.
                        // With fenced puts a subtree deletion holds too: a PutItem trusting a
                        // look at a listing row from before its lock must not land between the
                        // count of the objects and their fences.
                        self.hold_objects(g, &levels).await?;
                    }
                    known = Some(levels);
                    self.set_phase(
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
                            let levels = self.walk_held(&from, &g.id(), true).await?;
                            if !self.holds_whole(&from, &levels) {
                                // A writer that ignores locks (the Go library) rewrote part of
                                // the source: there is no one state of it left to copy.
                                let e = Error::new(
                                    ErrorKind::Conflict,
                                    format!("{from} changed under the operation's locks"),
                                );
                                return self.refuse(g, e).await;
                            }
                            levels
                        }
                    };
                    match self.copy_levels(g, &levels).await {
                        Ok((nodes, objects, empty, links)) => {
                            report.nodes = nodes;
                            report.objects = objects;
                            report.links = links;
                            copied = true;
                            hollow = empty;
                        }
                        // Refused at the destination, or by a limit: the source is intact and
                        // everything written under the destination is ours, so undo it.
                        Err(e) if refuses(e.kind()) => return self.refuse(g, e).await,
                        Err(e) => return Err(e),
                    }
                    known = Some(levels);
                    self.set_phase(
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
                        None => self.walk_held(&from, &g.id(), true).await?,
                    };
                    let deleted = self
                        .delete_levels(g, &levels, op == Operation::Delete)
                        .await?;
                    if op == Operation::Delete {
                        report.objects = deleted;
                    } else if known.is_none() {
                        // A resumed call walked only the rows it holds: objects below a lock
                        // erased by a writer that ignores locks stay, and lose our hold.
                        let nodes = self.walk_nodes(&from).await?;
                        self.release_objects(g, &nodes).await?;
                    }
                    self.prune_above(&from).await?;
                    if op == Operation::Delete {
                        self.finish(g).await?;
                        return Ok(Outcome::Done(report));
                    }
                    self.set_phase(g, Phase::Unlock).await?;
                }
                Phase::Unlock => {
                    let dest = match known.take().filter(|_| fresh) {
                        Some(levels) => {
                            let intent = g.snapshot();
                            levels
                                .iter()
                                .flatten()
                                .map(|p| dest_of(&intent, p))
                                .collect::<Result<Vec<Path>>>()?
                        }
                        None => self.walk_held(&to, &g.id(), true).await?.concat(),
                    };
                    // The destination's objects are held by the operation since their copy
                    // (a resumed call looks at every node: a lock erased by a writer that
                    // ignores locks must not hide the holds below it).
                    let holds = if fresh {
                        dest.clone()
                    } else {
                        self.walk_nodes(&to).await?
                    };
                    self.release_and_unlock(g, &holds, &dest).await?;
                    // Deepest first: a node whose only children were hollow is hollow too.
                    for p in hollow.drain(..) {
                        let _ = self.remove_if_empty(&p).await;
                    }
                    if op == Operation::Copy && !copied && g.snapshot().links != LinkPolicy::Ignore
                    {
                        // Resumed after the copy: its links, from the source (still held).
                        report.links = self.links_within(g).await?;
                    }
                    if op == Operation::Copy {
                        // A copy holds its source too, so that it copies one state of it.
                        match &known {
                            Some(levels) => {
                                let paths = levels.concat();
                                self.release_and_unlock(g, &paths, &paths).await?;
                            }
                            None => {
                                let nodes = self.walk_nodes(&from).await?;
                                self.release_and_unlock(g, &nodes, &[]).await?;
                                let paths = self.walk_held(&from, &g.id(), true).await?.concat();
                                self.release_and_unlock(g, &[], &paths).await?;
                            }
                        }
                    }
                    // Denormalized fields of the subtree, from its new ancestors (the moved rows
                    // carry no copy versions: every copy is written again). Before the intent
                    // goes, so that a resumed call does it again.
                    self.refill_subtree(&to, Some(g)).await?;
                    let links = g.snapshot().links;
                    if op == Operation::Move && links != LinkPolicy::Ignore {
                        report.links = self.links_into(&from).await?;
                        if links == LinkPolicy::Rewrite {
                            self.rewrite_links(g, &report.links).await?;
                        }
                    }
                    self.finish(g).await?;
                    return Ok(Outcome::Done(report));
                }
                Phase::Rollback => {
                    self.roll_back(g).await?;
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
    async fn reparent(&self, path: &Path) -> Result<()> {
        if let Some(intent) = self
            .pending()
            .await?
            .into_iter()
            .find(|i| i.op == Operation::Reparent && i.from == *path)
        {
            return self.join(&intent.id).await.map(|_| ());
        }
        if self
            .io()
            .get_item(&self.inner.layout.listing_key(path), true)
            .await?
            .is_none()
        {
            // No listing row: no children and (by the invariants) no object.
            return self.delete(path).await;
        }
        let parent = path.parent().unwrap_or_default();
        self.record_and_run(
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
    async fn run_reparent(&self, g: &Guard) -> Result<Outcome> {
        let (path, parent, id) = {
            let i = g.snapshot();
            (i.from, i.to, i.id)
        };
        let lock = Value::S(id.clone());
        let key = self.inner.layout.listing_key(&path);
        let (mut rounds, mut waited) = (0, 0);
        loop {
            let phase = g.snapshot().phase;
            match phase {
                Phase::Lock => {
                    let mut row = self.inner.layout.listing_row(&path);
                    row.insert(self.inner.layout.moving_attr(), lock.clone());
                    let action = TransactAction::Put {
                        item: row,
                        condition: Condition::And(vec![
                            Condition::Exists,
                            Condition::attr_not_exists(self.inner.layout.deleting_attr()),
                            Condition::Or(vec![
                                Condition::attr_not_exists(self.inner.layout.moving_attr()),
                                Condition::equals(self.inner.layout.moving_attr(), lock.clone()),
                            ]),
                        ]),
                    };
                    if self.fenced(g, vec![action], false).await?.is_empty() {
                        self.set_phase(g, Phase::Move).await?;
                        continue;
                    }
                    match self.io().get_item(&key, true).await? {
                        // Gone meanwhile: nothing left to re-parent or delete.
                        None => {
                            self.finish(g).await?;
                            return Ok(Outcome::Done(MoveReport::default()));
                        }
                        Some(r) if r.contains(self.inner.layout.moving_attr()) => {
                            let e = self.locked_error(&path);
                            return self.refuse(g, e).await;
                        }
                        Some(r) => {
                            match r.get_s(self.inner.layout.deleting_attr()) {
                                Some(mark) if self.mark_expired(mark) => {
                                    self.clear_expired_mark(&key, mark).await?;
                                }
                                // A live removal: wait for it (outside the budget).
                                Some(_) => {
                                    self.owner_sleep(g, waited.min(8)).await?;
                                    waited += 1;
                                    continue;
                                }
                                None => {}
                            }
                            if rounds + 1 >= self.inner.config.retry.max_attempts() {
                                let e = Error::new(
                                    ErrorKind::Conflict,
                                    format!("{path} kept changing while it was being locked"),
                                );
                                return self.refuse(g, e).await;
                            }
                            self.owner_sleep(g, rounds).await?;
                            rounds += 1;
                        }
                    }
                }
                Phase::Move => {
                    self.renew_if_due(g).await?;
                    let children: Vec<String> = self.list_names(&path, true).try_collect().await?;
                    let mut again = false;
                    for c in children {
                        let to = parent.child(c.clone())?;
                        // Boxed: a move runs intents, and this is one. The parent's lease is
                        // renewed while the child moves.
                        let child = path.child(c)?;
                        let moved = self
                            .renewing(
                                g,
                                Box::pin(self.move_subtree_with(
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
                            let holder = self
                                .io()
                                .get_item(&self.inner.layout.listing_key(&child), true)
                                .await?
                                .and_then(|r| r.get(self.inner.layout.moving_attr()).cloned());
                            if let Some(Value::S(other)) = holder {
                                let _ = self.renewing(g, Box::pin(self.drive(&other))).await?;
                                again = true;
                                continue;
                            }
                        }
                        match moved {
                            // A child that went away meanwhile has nothing to move.
                            Ok(_) => {}
                            Err(e) if e.kind() == ErrorKind::NotFound => {}
                            // Joined an identical move that another call ran to its end
                            // (completed or refused): look at the children again.
                            Err(e) if e.kind() == ErrorKind::TakenOver => again = true,
                            // A name taken under the parent, a limit: the children moved so far
                            // stay moved; the node is released.
                            Err(e) if refuses(e.kind()) => return self.refuse(g, e).await,
                            Err(e) => return Err(e),
                        }
                    }
                    if again {
                        if rounds + 1 >= self.inner.config.retry.max_attempts() {
                            let e = Error::new(
                                ErrorKind::Conflict,
                                format!("the children of {path} kept being moved by others"),
                            );
                            return self.refuse(g, e).await;
                        }
                        self.owner_sleep(g, rounds).await?;
                        rounds += 1;
                        continue;
                    }
                    self.set_phase(g, Phase::Delete).await?;
                }
                Phase::Delete => {
                    let held = self
                        .io()
                        .get_item(&key, true)
                        .await?
                        .is_some_and(|r| r.get(self.inner.layout.moving_attr()) == Some(&lock));
                    if !held {
                        // Only this operation takes its lock off, and only by deleting the
                        // node: an earlier call got this far (whatever is at the path now
                        // came after).
                        self.finish(g).await?;
                        return Ok(Outcome::Done(MoveReport::default()));
                    }
                    if self.has_children_consistent(&path).await? {
                        // Only possible if a writer ignored the lock (the Go library).
                        let e = Error::new(
                            ErrorKind::HasChildren,
                            format!("{path} got children that ignored its lock"),
                        );
                        return self.refuse(g, e).await;
                    }
                    let actions = vec![
                        self.remove_object(&path, Condition::Always),
                        TransactAction::Delete {
                            key: key.clone(),
                            condition: Condition::equals(
                                self.inner.layout.moving_attr(),
                                lock.clone(),
                            ),
                        },
                    ];
                    self.fenced_groups(g, actions, true, 2).await?;
                    self.inner.known.remove(&key);
                    self.prune_above(&path).await?;
                    self.finish(g).await?;
                    return Ok(Outcome::Done(MoveReport::default()));
                }
                Phase::Rollback => {
                    self.roll_back(g).await?;
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
    async fn refuse(&self, g: &Guard, e: Error) -> Result<Outcome> {
        let mut intent = g.snapshot();
        intent.phase = Phase::Rollback;
        intent.lease = after_ms(self.inner.config.lease);
        intent.refusal = Some(encode_refusal(&e));
        self.write_intent(g, intent).await?;
        self.roll_back(g).await?;
        Ok(Outcome::RolledBack(e))
    }

    /// Undoes a move, copy or deletion that has not started deleting: unlocks the source
    /// rows it holds, removes what it wrote under the destination, drops the intent.
    async fn roll_back(&self, g: &Guard) -> Result<()> {
        let intent = g.snapshot();
        if intent.op == Operation::Reparent {
            // Only the node itself is held; children moved so far stay moved.
            self.unlock_paths(g, std::slice::from_ref(&intent.from))
                .await?;
            return self.finish(g).await;
        }
        let held = self.walk_held(&intent.from, &intent.id, true).await?;
        // Every node's object, held or not: a lock erased by a writer that ignores locks
        // (the Go library) hides the holds below it from the walk of held rows.
        let nodes = self.walk_nodes(&intent.from).await?;
        self.release_objects(g, &nodes).await?;
        self.unlock_paths(g, &held.concat()).await?;
        // Rows the operation held that name nothing now (another operation's rollback may have
        // emptied them meanwhile) go, as after any removal; each keeps the invariants alone.
        // (Below the root only: the root was there before the operation and stays.)
        for p in held.iter().skip(1).rev().flatten() {
            self.remove_if_empty(p).await?;
        }
        if intent.op != Operation::Delete {
            // Through rows not held: a writer that ignores locks may have erased the lock of
            // a row we created; only rows with our lock are removed.
            let levels = self.walk_held(&intent.to, &intent.id, true).await?;
            self.delete_levels(g, &levels, false).await?;
            // What stays under the destination (below a lock such a writer erased) loses the
            // holds of the copies written there.
            let rest = self.walk_nodes(&intent.to).await?;
            self.release_objects(g, &rest).await?;
            self.prune_above(&intent.to).await?;
        }
        self.finish(g).await
    }

    /// Checks every destination key, row size and rewritten link target of the operation
    /// before anything is written under the destination.
    async fn validate(&self, g: &Guard, levels: &[Vec<Path>]) -> Result<()> {
        let intent = g.snapshot();
        for level in levels {
            self.renew_if_due(g).await?;
            let sources = self.objects_of(level, true).await?;
            for p in level {
                let dest = dest_of(&intent, p)?;
                self.inner.layout.check_object_path(&dest)?;
                if let Some(src) = sources.get(&self.inner.layout.object_key(p).hash) {
                    self.copied_row(&intent, src, &dest)?;
                }
            }
        }
        if intent.op == Operation::Move && intent.links == LinkPolicy::Rewrite {
            for (link, target) in self.links_into(&intent.from).await? {
                let new_target = dest_of(&intent, &target)?;
                self.link_row_for(&link, &new_target)?;
            }
        }
        Ok(())
    }

    /// Locks the source subtree level by level (each level's children are listed, with
    /// consistent reads, after the level is locked, so nothing created before its parent was
    /// locked is missed, and nothing can be created after) and returns its nodes by depth.
    async fn lock_walk(&self, g: &Guard) -> Result<Vec<Vec<Path>>> {
        let id = g.id();
        let lock = Value::S(id.clone());
        let mut levels = Vec::new();
        let mut level = vec![g.snapshot().from];
        let op = g.snapshot().op;
        let mut locked = 0;
        let (mut rounds, mut waited, mut waiting) = (0, 0, false);
        while !level.is_empty() {
            self.renew_if_due(g).await?;
            let actions: Vec<TransactAction> = level
                .iter()
                .map(|p| {
                    let mut row = self.inner.layout.listing_row(p);
                    row.insert(self.inner.layout.moving_attr(), lock.clone());
                    TransactAction::Put {
                        item: row,
                        // Not while a removal of the row is under way (it may be about to
                        // go): that is waited for below.
                        condition: Condition::And(vec![
                            Condition::Exists,
                            Condition::attr_not_exists(self.inner.layout.deleting_attr()),
                            Condition::Or(vec![
                                Condition::attr_not_exists(self.inner.layout.moving_attr()),
                                Condition::equals(self.inner.layout.moving_attr(), lock.clone()),
                            ]),
                        ]),
                    }
                })
                .collect();
            let failed = self.fenced(g, actions, true).await?;
            let mut held = Vec::with_capacity(level.len());
            let mut again = Vec::new();
            for (i, p) in level.into_iter().enumerate() {
                if !failed.contains(&i) {
                    held.push(p);
                    continue;
                }
                // Not locked: gone meanwhile (fine: not part of the subtree any more), another
                // operation's (refused), or freed since (lock it again).
                match self
                    .io()
                    .get_item(&self.inner.layout.listing_key(&p), true)
                    .await?
                {
                    None => {}
                    Some(r) if r.get(self.inner.layout.moving_attr()) == Some(&lock) => {
                        held.push(p)
                    }
                    Some(r) if r.contains(self.inner.layout.moving_attr()) => {
                        return Err(self.locked_error(&p));
                    }
                    Some(r) => {
                        if let Some(mark) = r.get_s(self.inner.layout.deleting_attr()) {
                            if self.mark_expired(mark) {
                                self.clear_expired_mark(&self.inner.layout.listing_key(&p), mark)
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
                    self.owner_sleep(g, waited.min(8)).await?;
                    waited += 1;
                    level = held.into_iter().chain(again).collect();
                    continue;
                }
                if rounds + 1 >= self.inner.config.retry.max_attempts() {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("{} kept changing while it was being locked", again[0]),
                    ));
                }
                self.owner_sleep(g, rounds).await?;
                rounds += 1;
                held.sort();
                // The rows held so far stay held; the others are tried again with this level.
                level = held.into_iter().chain(again).collect();
                continue;
            }
            held.sort();
            let mut next = Vec::new();
            for (i, dir) in held.iter().enumerate() {
                let names: Vec<String> = self.list_names(dir, true).try_collect().await?;
                for n in names {
                    next.push(dir.child(n)?);
                }
                // Each node reported once its children are known: a level can be most of the
                // subtree, and listing it one Query per node.
                self.tell(op, Phase::Lock, locked + i + 1, None);
            }
            locked += held.len();
            levels.push(held);
            level = next;
        }
        Ok(levels)
    }

    /// Every node under `root` (itself included) that has a listing row, held or not: where
    /// holds on objects may be left when a writer that ignores locks erased a lock above them.
    async fn walk_nodes(&self, root: &Path) -> Result<Vec<Path>> {
        let mut all = Vec::new();
        if self
            .io()
            .get_item(&self.inner.layout.listing_key(root), true)
            .await?
            .is_none()
        {
            return Ok(all);
        }
        let mut level = vec![root.clone()];
        while !level.is_empty() {
            let mut next = Vec::new();
            for dir in &level {
                let names: Vec<String> = self.list_names(dir, true).try_collect().await?;
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
    async fn walk_held(&self, root: &Path, id: &str, through: bool) -> Result<Vec<Vec<Path>>> {
        let held =
            |row: &Item| row.get(self.inner.layout.moving_attr()) == Some(&Value::S(id.into()));
        let mut levels: Vec<Vec<Path>> = Vec::new();
        let root_row = self
            .io()
            .get_item(&self.inner.layout.listing_key(root), true)
            .await?;
        let root_held = root_row.as_ref().is_some_and(&held);
        // (node, held) pairs of the current depth that the walk goes on from.
        let mut level: Vec<(Path, bool)> = match root_row {
            Some(_) if root_held || through => vec![(root.clone(), root_held)],
            _ => vec![],
        };
        while !level.is_empty() {
            let mut children = Vec::new();
            for (dir, _) in &level {
                let names: Vec<String> = self.list_names(dir, true).try_collect().await?;
                for n in names {
                    children.push(dir.child(n)?);
                }
            }
            let keys: Vec<Key> = children
                .iter()
                .map(|p| self.inner.layout.listing_key(p))
                .collect();
            self.ensure_verified().await?;
            let rows = get_all(&self.inner.storage, keys, true, &self.inner.config.retry).await?;
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
                    let h = held_keys.contains(&self.inner.layout.listing_key(&p));
                    (p, h)
                })
                .filter(|(_, h)| *h || through)
                .collect();
        }
        Ok(levels)
    }

    /// Whether `levels` (held nodes by depth, from [`walk_held`](Self::walk_held) through
    /// rows not held) is a whole subtree of `root`: the root is held and every held node's
    /// parent is.
    fn holds_whole(&self, root: &Path, levels: &[Vec<Path>]) -> bool {
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
    async fn copy_levels(
        &self,
        g: &Guard,
        levels: &[Vec<Path>],
    ) -> Result<(usize, usize, Vec<Path>, Vec<(Path, Path)>)> {
        let intent = g.snapshot();
        let lock = Value::S(intent.id.clone());
        let ours_or_new = Condition::Or(vec![
            Condition::NotExists,
            Condition::equals(self.inner.layout.moving_attr(), lock.clone()),
        ]);
        let (mut nodes, mut objects) = (0, 0);
        let mut links = Vec::new();
        let total: usize = levels.iter().map(Vec::len).sum();
        // Source nodes not copied (they name nothing), and those copied without an object.
        let mut skipped: std::collections::HashSet<Path> = std::collections::HashSet::new();
        let mut objectless: Vec<(usize, Path)> = Vec::new();
        let parent = intent.to.parent().filter(|p| !p.is_root());
        for (depth, level) in levels.iter().enumerate() {
            self.renew_if_due(g).await?;
            let sources = self.objects_of(level, true).await?;
            // Nodes below the root that name nothing (no object, no child: a removal that
            // met the lock left them to the operation) are not carried to the destination.
            let parents: std::collections::HashSet<Path> = levels
                .get(depth + 1)
                .map(|next| next.iter().filter_map(Path::parent).collect())
                .unwrap_or_default();
            let mut kept: Vec<&Path> = Vec::with_capacity(level.len());
            for p in level {
                let object = sources.contains_key(&self.inner.layout.object_key(p).hash);
                if depth == 0 || object || parents.contains(p) {
                    kept.push(p);
                    if depth > 0 && !object {
                        objectless.push((depth, p.clone()));
                    }
                } else {
                    skipped.insert(p.clone());
                }
            }
            // In slices, each reported: a level can hold most of the subtree. (Only the
            // root's level checks the destination's parent, and it is one node.)
            for slice in kept.chunks(PROGRESS_SLICE) {
                let mut attempt = 0;
                loop {
                    let mut actions = Vec::with_capacity(slice.len() * 2 + 1);
                    if depth == 0
                        && let Some(parent) = &parent
                    {
                        self.ensure_listing(g, parent).await?;
                        // The destination's parent exists and is neither locked nor being removed.
                        actions.push(TransactAction::ConditionCheck {
                            key: self.inner.layout.listing_key(parent),
                            condition: self.free_row(),
                        });
                    }
                    let first_dest = actions.len();
                    let (mut level_nodes, mut level_objects) = (0, 0);
                    let mut level_links = Vec::new();
                    for &p in slice {
                        let dest = dest_of(&intent, p)?;
                        let mut row = self.inner.layout.listing_row(&dest);
                        row.insert(self.inner.layout.moving_attr(), lock.clone());
                        actions.push(TransactAction::Put {
                            item: row,
                            condition: ours_or_new.clone(),
                        });
                        level_nodes += 1;
                        if let Some(src) = sources.get(&self.inner.layout.object_key(p).hash) {
                            actions.push(TransactAction::Put {
                                item: self.copied_row(&intent, src, &dest)?,
                                condition: Condition::Always,
                            });
                            level_objects += 1;
                            if intent.op == Operation::Copy
                                && intent.links != LinkPolicy::Ignore
                                && let Some(target) = self.link_into(src, &intent.from)
                            {
                                level_links.push((dest.clone(), target));
                            }
                        }
                    }
                    let failed = self.fenced(g, actions, false).await?;
                    let Some(&i) = failed.first() else {
                        nodes += level_nodes;
                        objects += level_objects;
                        links.append(&mut level_links);
                        self.tell(intent.op, Phase::Copy, nodes, Some(total));
                        break;
                    };
                    if i >= first_dest {
                        return Err(Error::new(
                            ErrorKind::AlreadyExists,
                            format!("something is already at {}", intent.to),
                        ));
                    }
                    // The parent's check failed: held by another operation (refused), or removed
                    // or being removed meanwhile (create it again, or wait for the removal).
                    let parent = parent.as_ref().expect("a check of the parent was sent");
                    let key = self.inner.layout.listing_key(parent);
                    self.inner.known.remove(&key);
                    if self
                        .io()
                        .get_item(&key, true)
                        .await?
                        .is_some_and(|r| r.contains(self.inner.layout.moving_attr()))
                    {
                        return Err(Error::new(
                            ErrorKind::Locked,
                            format!(
                                "the destination's parent {parent} is held by another operation"
                            ),
                        ));
                    }
                    if attempt + 1 >= self.inner.config.retry.max_attempts() {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!("the destination's parent {parent} kept being removed"),
                        ));
                    }
                    self.owner_sleep(g, attempt).await?;
                    attempt += 1;
                }
            }
        }
        // Bottom-up: an objectless node is hollow when every child was skipped or is hollow.
        let mut hollow: std::collections::HashSet<Path> = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (depth, p) in objectless.iter().rev() {
            let children = levels
                .get(depth + 1)
                .into_iter()
                .flatten()
                .filter(|c| c.parent().as_ref() == Some(p));
            if children
                .into_iter()
                .all(|c| skipped.contains(c) || hollow.contains(c))
            {
                hollow.insert(p.clone());
                out.push(dest_of(&intent, p)?);
            }
        }
        links.sort();
        Ok((nodes, objects, out, links))
    }

    /// The row `src` copied to `dest` ([`moved_row`](Self::moved_row)); a copy with
    /// [`LinkPolicy::Rewrite`] points a link into its source at the same place under its
    /// destination.
    fn copied_row(&self, intent: &Intent, src: &Item, dest: &Path) -> Result<Item> {
        let mut row = self.moved_row(src, dest, &intent.id)?;
        if intent.op == Operation::Copy
            && intent.links == LinkPolicy::Rewrite
            && let Some(target) = self.link_into(src, &intent.from)
        {
            let target = dest_of(intent, &target)?;
            self.inner.layout.check_object_path(&target)?;
            row.insert(
                self.inner.layout.link_attr(),
                Value::S(self.inner.layout.encode_target(&target)),
            );
            crate::layout::check_item_size(&row)?;
        }
        Ok(row)
    }

    /// The target of the link row `row`, if it is `from` or under it.
    fn link_into(&self, row: &Item, from: &Path) -> Option<Path> {
        let raw = row.get_s(self.inner.layout.link_attr())?;
        let target = self.inner.layout.decode_target(raw).ok()?;
        target.starts_with(from).then_some(target)
    }

    /// The links of a copy's destination whose originals point into its source, from the
    /// source it holds (for a call that resumed the copy after its copy phase).
    async fn links_within(&self, g: &Guard) -> Result<Vec<(Path, Path)>> {
        let intent = g.snapshot();
        let mut out = Vec::new();
        for level in self.walk_held(&intent.from, &intent.id, true).await? {
            let sources = self.objects_of(&level, true).await?;
            for p in &level {
                if let Some(target) = sources
                    .get(&self.inner.layout.object_key(p).hash)
                    .and_then(|src| self.link_into(src, &intent.from))
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
    fn moved_row(&self, src: &Item, dest: &Path, id: &str) -> Result<Item> {
        let held = self.inner.layout.held_attr();
        let mut row: Item = src
            .iter()
            .filter(|(n, _)| {
                !self.inner.layout.is_path_index_attr(n)
                    && !self.inner.layout.is_target_version_attr(n)
                    && *n != held
            })
            .map(|(n, v)| (n.to_owned(), v.clone()))
            .collect();
        row.insert(held, Value::S(id.to_owned()));
        let key = self.inner.layout.object_key(dest);
        row.insert(HASH_KEY, Value::S(key.hash));
        row.insert(RANGE_KEY, Value::S(key.range));
        self.add_path_index(dest, &mut row)?;
        crate::layout::check_item_size(&row)?;
        Ok(row)
    }

    /// Deletes held nodes bottom-up: objects, and listing rows conditional on our lock, so the
    /// tree stays upward-closed at every step. With `count`, returns how many objects were
    /// there (one more consistent read per level).
    async fn delete_levels(&self, g: &Guard, levels: &[Vec<Path>], count: bool) -> Result<usize> {
        let lock = Value::S(g.id());
        let op = g.snapshot().op;
        let total: usize = levels.iter().map(Vec::len).sum();
        let mut done = 0;
        let mut deleted = 0;
        // Nodes that keep their listing row: a child of theirs was not ours to delete (its
        // lock was erased by a writer that ignores locks, which may have written since), so
        // removing the row would break upward closure. Their own rows are only unlocked.
        let mut keep: std::collections::HashSet<Path> = std::collections::HashSet::new();
        let mut kept: Vec<Path> = Vec::new();
        for level in levels.iter().rev() {
            if count {
                deleted += self.objects_of(level, true).await?.len();
            }
            // In slices, each reported (a node's row is kept or not by its children, one
            // level down, never by its own level).
            for slice in level.chunks(DELETE_SLICE) {
                let mut actions = Vec::with_capacity(slice.len() * 2);
                for p in slice {
                    let key = self.inner.layout.listing_key(p);
                    self.inner.known.remove(&key);
                    actions.push(self.remove_object(p, Condition::Always));
                    let ours = Condition::equals(self.inner.layout.moving_attr(), lock.clone());
                    actions.push(if keep.contains(p) {
                        TransactAction::Put {
                            item: self.inner.layout.listing_row(p),
                            condition: ours,
                        }
                    } else {
                        TransactAction::Delete {
                            key,
                            condition: ours,
                        }
                    });
                }
                // A node whose lock is gone keeps its object too: only rows still proven ours are
                // deleted.
                let failed = self.fenced_groups(g, actions, true, 2).await?;
                for (i, p) in slice.iter().enumerate() {
                    let not_ours = failed.iter().any(|&f| f / 2 == i);
                    if not_ours {
                        kept.push(p.clone());
                    }
                    if not_ours || keep.contains(p) {
                        keep.extend(p.parent());
                    }
                }
                done += slice.len();
                self.tell(op, Phase::Delete, done, Some(total));
            }
        }
        // The objects kept (their rows were no longer ours) lose our hold.
        self.release_objects(g, &kept).await?;
        Ok(deleted)
    }

    /// Holds the object rows of the locked source (`SC held` = the operation's id), level by
    /// level, so that an overwrite sent as one PutItem (conditional on no hold) cannot land
    /// between the copy and the delete of its object. Objects cannot appear or go under the
    /// locks meanwhile (creations and deletions check the listing rows), so the set read here
    /// is the set held.
    async fn hold_objects(&self, g: &Guard, levels: &[Vec<Path>]) -> Result<()> {
        let id = Value::S(g.id());
        let held = self.inner.layout.held_attr();
        let fenced = self.inner.config.fenced_puts;
        let op = g.snapshot().op;
        let total: usize = levels.iter().map(Vec::len).sum();
        let mut done = 0;
        // In slices, each reported (still the lock phase, its total known now).
        for level in levels.iter().flat_map(|l| l.chunks(PROGRESS_SLICE)) {
            let mut attempt = 0;
            loop {
                self.renew_if_due(g).await?;
                let objects = self.objects_of(level, true).await?;
                let actions: Vec<TransactAction> = level
                    .iter()
                    .filter_map(|p| {
                        let key = self.inner.layout.object_key(p);
                        self.inner.known.remove(&key);
                        if objects.contains_key(&key.hash) {
                            Some(TransactAction::Update {
                                key,
                                actions: vec![UpdateAction::Set(held.clone(), id.clone())],
                                condition: Condition::Exists,
                            })
                        } else if fenced {
                            // Fenced puts: no object here, so a held fence, which a PutItem
                            // trusting an earlier look at the (now locked) listing row cannot
                            // pass; an object written meanwhile fails it, and is held instead.
                            Some(TransactAction::Put {
                                item: self.inner.layout.fence_row(
                                    p,
                                    self.fence_expiry(),
                                    Some(&g.id()),
                                ),
                                condition: self.no_object(),
                            })
                        } else {
                            None
                        }
                    })
                    .collect();
                // An object gone meanwhile (only a writer that ignores locks can do that) is not
                // held: nothing to copy there either.
                let fences: Vec<usize> = actions
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| matches!(a, TransactAction::Put { .. }))
                    .map(|(i, _)| i)
                    .collect();
                let failed = self.fenced(g, actions, true).await?;
                if !failed.iter().any(|i| fences.contains(i)) {
                    break;
                }
                if attempt + 1 >= self.inner.config.retry.max_attempts() {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        "objects kept appearing under the operation's locks",
                    ));
                }
                attempt += 1;
            }
            done += level.len();
            self.tell(op, Phase::Lock, done, Some(total));
        }
        Ok(())
    }

    /// Takes the operation's holds off the object rows at `paths` (those it still holds).
    async fn release_objects(&self, g: &Guard, paths: &[Path]) -> Result<()> {
        let id = Value::S(g.id());
        let held = self.inner.layout.held_attr();
        for chunk in paths.chunks(crate::storage::batch::TRANSACT_MAX) {
            let rows = self.rows_of(chunk, true).await?;
            let actions: Vec<TransactAction> = chunk
                .iter()
                .filter_map(|p| {
                    let row = rows
                        .get(&self.inner.layout.object_key(p).hash)
                        .filter(|r| r.get(&held) == Some(&id))?;
                    let ours = Condition::equals(held.clone(), id.clone());
                    // A fence the operation wrote where no object was (fenced puts) goes: the
                    // listing row is still there, so a PutItem landing now is reachable.
                    Some(if self.inner.layout.is_fence(row) {
                        TransactAction::Delete {
                            key: self.inner.layout.object_key(p),
                            condition: ours,
                        }
                    } else {
                        TransactAction::Update {
                            key: self.inner.layout.object_key(p),
                            actions: vec![UpdateAction::Remove(held.clone())],
                            condition: ours,
                        }
                    })
                })
                .collect();
            self.fenced(g, actions, true).await?;
        }
        Ok(())
    }

    /// Takes the operation's locks off the listing rows of `paths` (rows not held are left).
    async fn unlock_paths(&self, g: &Guard, paths: &[Path]) -> Result<()> {
        let lock = Value::S(g.id());
        let actions: Vec<TransactAction> = paths
            .iter()
            .map(|p| TransactAction::Put {
                item: self.inner.layout.listing_row(p),
                condition: Condition::equals(self.inner.layout.moving_attr(), lock.clone()),
            })
            .collect();
        self.fenced(g, actions, true).await?;
        Ok(())
    }

    /// Releases the holds on the objects at `holds`, then unlocks the listing rows of `paths`,
    /// in slices, each reported (`"unlock"`: the holds and rows done, of both).
    async fn release_and_unlock(&self, g: &Guard, holds: &[Path], paths: &[Path]) -> Result<()> {
        let op = g.snapshot().op;
        let total = holds.len() + paths.len();
        let mut done = 0;
        for slice in holds.chunks(RELEASE_SLICE) {
            self.release_objects(g, slice).await?;
            done += slice.len();
            self.tell(op, Phase::Unlock, done, Some(total));
        }
        for slice in paths.chunks(PROGRESS_SLICE) {
            self.unlock_paths(g, slice).await?;
            done += slice.len();
            self.tell(op, Phase::Unlock, done, Some(total));
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
    async fn rewrite_links(&self, g: &Guard, links: &[(Path, Path)]) -> Result<()> {
        let intent = g.snapshot();
        let mut pending: Vec<(Path, Path)> = links.to_vec();
        let mut round = 0;
        let mut blockers = std::collections::BTreeSet::new();
        loop {
            let mut held_elsewhere = false;
            let mut rewritten = 0;
            for (link, target) in &pending {
                let Ok(row) = dest_of(&intent, target).and_then(|t| self.link_row_for(link, &t))
                else {
                    continue;
                };
                let unchanged = Condition::equals(
                    self.inner.layout.link_attr(),
                    Value::S(self.inner.layout.encode_target(target)),
                );
                // The link's object exists (the put is conditional on its old target), so a
                // removal mark on its listing row cannot end in the row's deletion: only a
                // lock matters. A re-parenting's lock is no obstacle either: it never copies
                // its node's own row (it deletes it at its end), so waiting for it is needless
                // and could wait in a circle (the re-parenting may be waiting for this move).
                let mut allowed: Option<Value> = None;
                loop {
                    let free = Condition::attr_not_exists(self.inner.layout.moving_attr());
                    let check = match &allowed {
                        None => free,
                        Some(v) => Condition::Or(vec![
                            free,
                            Condition::equals(self.inner.layout.moving_attr(), v.clone()),
                        ]),
                    };
                    let actions = vec![
                        TransactAction::ConditionCheck {
                            key: self.inner.layout.listing_key(link),
                            condition: Condition::And(vec![Condition::Exists, check]),
                        },
                        TransactAction::Put {
                            item: row.clone(),
                            condition: unchanged.clone(),
                        },
                    ];
                    let failed = self.fenced(g, actions, false).await?;
                    if failed.is_empty() {
                        rewritten += 1;
                    } else if failed.contains(&0) {
                        let holder = self
                            .io()
                            .get_item(&self.inner.layout.listing_key(link), true)
                            .await?
                            .and_then(|r| r.get(self.inner.layout.moving_attr()).cloned());
                        if let Some(Value::S(other)) = holder {
                            if allowed.is_none() && self.is_reparenting(&other).await? {
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
                    let _ = Box::pin(self.drive(&other)).await;
                }
            }
            // Look again: a link copied or moved meanwhile (with its old target) is as much a
            // link into the old place as the ones found before. The operation is not over
            // until a look finds none left, so every link created before it ends is rewritten.
            if rewritten == 0 && !held_elsewhere {
                break;
            }
            if round + 1 >= self.inner.config.retry.max_attempts() {
                break;
            }
            if held_elsewhere {
                self.owner_sleep(g, round).await?;
            }
            round += 1;
            pending = self.links_into(&intent.from).await?;
            if pending.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// Sends `actions` in transactions of at most 99, each with a check that this call still
    /// owns the intent (so a call that lost its lease, or a stale resume, can write nothing).
    /// Returns the indexes of actions whose condition failed; with `resend_rest`, the other
    /// actions of such a transaction are sent again without them, else the operation stops
    /// at the first such transaction.
    async fn fenced(
        &self,
        g: &Guard,
        actions: Vec<TransactAction>,
        resend_rest: bool,
    ) -> Result<Vec<usize>> {
        self.fenced_groups(g, actions, resend_rest, 1).await
    }

    /// [`fenced`](Self::fenced) for actions that go in groups of `group` consecutive actions
    /// (an object and its listing row): a group is never split between transactions, and
    /// when one action of a group fails, the whole group is dropped.
    async fn fenced_groups(
        &self,
        g: &Guard,
        actions: Vec<TransactAction>,
        resend_rest: bool,
        group: usize,
    ) -> Result<Vec<usize>> {
        let group = group.max(1);
        let intent_key = self.inner.layout.intent_key(&g.id());
        let mut failed_all = Vec::new();
        let indexed: Vec<(usize, TransactAction)> = actions.into_iter().enumerate().collect();
        let chunk_size = (TRANSACT_MAX - 1) / group * group;
        for chunk in indexed.chunks(chunk_size) {
            let mut pending: Vec<(usize, TransactAction)> = chunk.to_vec();
            let mut backoff = Backoff::new(self.inner.config.retry);
            while !pending.is_empty() {
                self.renew_if_due(g).await?;
                let mut tx: Vec<TransactAction> = pending.iter().map(|(_, a)| a.clone()).collect();
                tx.push(TransactAction::ConditionCheck {
                    key: intent_key.clone(),
                    condition: self.owned_by(&g.token),
                });
                self.ensure_verified().await?;
                match self.inner.storage.transact_write(tx).await {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::TransactionCanceled => {
                        let reasons = e.cancellation_reasons();
                        if reasons
                            .get(pending.len())
                            .is_some_and(crate::error::CancellationReason::is_condition_failed)
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
                    Err(e) if e.kind() == ErrorKind::Throttled => {
                        if !backoff.retry().await {
                            return Err(e);
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(failed_all)
    }

    /// Whether the intent `id` is a re-parenting (false if it is gone).
    async fn is_reparenting(&self, id: &str) -> Result<bool> {
        let key = self.inner.layout.intent_key(id);
        Ok(match self.io().get_item(&key, true).await? {
            Some(item) => self.decode_intent(&item)?.op == Operation::Reparent,
            None => false,
        })
    }

    /// A backoff sleep of an intent's owner: never longer than a third of the lease, and the
    /// lease renewed after it, so waiting never lets the lease run out.
    async fn owner_sleep(&self, g: &Guard, retry: u32) -> Result<()> {
        let cap = self.inner.config.lease / 3;
        let d = self.inner.config.retry.delay(retry).min(cap);
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
        self.renew_if_due(g).await
    }

    /// Runs `work` (a child operation of a re-parenting) while renewing `g`'s lease every
    /// third of it, so a long child does not let the parent's lease run out.
    async fn renewing<T>(&self, g: &Guard, work: impl Future<Output = T>) -> Result<T> {
        let period = (self.inner.config.lease / 3).max(std::time::Duration::from_millis(1));
        // Both are polled together: the work goes on while a renewal is in flight.
        let renewals = async {
            loop {
                tokio::time::sleep(period).await;
                if let Err(e) = self.renew_if_due(g).await {
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
    async fn set_phase(&self, g: &Guard, phase: Phase) -> Result<()> {
        let mut intent = g.snapshot();
        intent.phase = phase;
        intent.lease = after_ms(self.inner.config.lease);
        self.write_intent(g, intent).await
    }

    /// Renews the lease when half of it has run out.
    pub(crate) async fn renew_if_due(&self, g: &Guard) -> Result<()> {
        let mut intent = g.snapshot();
        let half = u64::try_from(self.inner.config.lease.as_millis() / 2).unwrap_or(u64::MAX);
        if now_ms().saturating_add(half) < intent.lease {
            return Ok(());
        }
        intent.lease = after_ms(self.inner.config.lease);
        self.write_intent(g, intent).await
    }

    async fn write_intent(&self, g: &Guard, intent: Intent) -> Result<()> {
        match self
            .io()
            .put_item(self.encode_intent(&intent), self.owned_by(&g.token))
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

    /// Drops the intent record: the operation is over.
    pub(crate) async fn finish(&self, g: &Guard) -> Result<()> {
        let key = self.inner.layout.intent_key(&g.id());
        match self.io().delete_item(&key, self.owned_by(&g.token)).await {
            Err(e) if e.kind() == ErrorKind::ConditionFailed => Err(taken_over().with_source(e)),
            other => {
                if other.is_ok() {
                    g.release();
                }
                other
            }
        }
    }

    fn owner_attr(&self) -> String {
        self.inner.layout.intent_attr("owner")
    }

    fn owned_by(&self, token: &str) -> Condition {
        Condition::equals(self.owner_attr(), Value::S(token.to_owned()))
    }

    /// Creates the listing rows of `path` and its ancestors that are missing, fenced by our
    /// ownership (a call that lost its lease creates nothing). A failed check (an ancestor
    /// removed meanwhile) is left to the caller's own check of `path`.
    async fn ensure_listing(&self, g: &Guard, path: &Path) -> Result<()> {
        let keys: Vec<Key> = (1..=path.len())
            .map(|i| self.inner.layout.listing_key(&path.prefix(i)))
            .collect();
        if keys.iter().all(|k| self.inner.known.contains(k)) {
            return Ok(());
        }
        self.ensure_verified().await?;
        let found = get_all(
            &self.inner.storage,
            keys.clone(),
            true,
            &self.inner.config.retry,
        )
        .await?;
        let mut actions = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            if found
                .iter()
                .any(|it| Key::from_item(it).as_ref() == Some(k))
            {
                continue;
            }
            // Each new row with proof that its parent row is there (upward closure).
            if actions.is_empty() && i > 0 {
                actions.push(TransactAction::ConditionCheck {
                    key: keys[i - 1].clone(),
                    condition: self.free_row(),
                });
            }
            actions.push(TransactAction::Put {
                item: k.clone().into_item(),
                condition: self.not_marked(),
            });
        }
        if !actions.is_empty() && !self.fenced(g, actions, false).await?.is_empty() {
            return Ok(());
        }
        self.inner.known.insert_all(keys);
        Ok(())
    }

    /// Links anywhere in the tree whose target is `from` or under it (one Scan).
    async fn links_into(&self, from: &Path) -> Result<Vec<(Path, Path)>> {
        let link_attr = self.inner.layout.link_attr().to_owned();
        let items: Vec<Item> = self.scan().try_collect().await?;
        let mut out = Vec::new();
        for item in items {
            let (Some(target), Some(hash)) = (item.get_s(&link_attr), item.get_s(HASH_KEY)) else {
                continue;
            };
            if item.get_s(RANGE_KEY) != Some(self.inner.layout.link_attr()) {
                continue;
            }
            let (Ok(target), Ok(link)) = (
                self.inner.layout.decode_target(target),
                self.inner.layout.decode_target(hash),
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

    fn encode_intent(&self, intent: &Intent) -> Item {
        let attr = |field: &str| self.inner.layout.intent_attr(field);
        let mut item = self.inner.layout.intent_key(&intent.id).into_item();
        item.insert(attr("op"), Value::S(intent.op.as_str().to_owned()));
        item.insert(
            attr("from"),
            Value::S(self.inner.layout.encode_target(&intent.from)),
        );
        let to = if intent.to.is_root() {
            String::new()
        } else {
            self.inner.layout.encode_target(&intent.to)
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
            item.insert(self.owner_attr(), Value::S(owner.clone()));
            item.insert(attr("lease"), Value::N(intent.lease.to_string()));
        }
        if let Some(refusal) = &intent.refusal {
            item.insert(attr("refusal"), Value::S(refusal.clone()));
        }
        item
    }

    pub(crate) fn decode_intent(&self, item: &Item) -> Result<Intent> {
        let attr = |field: &str| self.inner.layout.intent_attr(field);
        let field = |n: &str| {
            item.get_s(&attr(n)).map(str::to_owned).ok_or_else(|| {
                Error::new(ErrorKind::Backend, format!("intent record without `{n}`"))
            })
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
        Ok(Intent {
            id: item.get_s(RANGE_KEY).unwrap_or_default().to_owned(),
            op: Operation::parse(&field("op")?).ok_or_else(|| unknown("op"))?,
            from: self.inner.layout.decode_target(&field("from")?)?,
            // A re-parenting of a top-level node moves its children to the root: stored empty.
            to: match field("to")?.as_str() {
                "" => Path::root(),
                to => self.inner.layout.decode_target(to)?,
            },
            phase: Phase::parse(&field("phase")?).ok_or_else(|| unknown("phase"))?,
            links: match field("links")?.as_str() {
                "ignore" => LinkPolicy::Ignore,
                "rewrite" => LinkPolicy::Rewrite,
                _ => LinkPolicy::Report,
            },
            owner: item.get_s(&self.owner_attr()).map(str::to_owned),
            lease,
            refusal: item.get_s(&attr("refusal")).map(str::to_owned),
        })
    }
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

fn taken_over() -> Error {
    Error::new(
        ErrorKind::TakenOver,
        "another call took the operation over after this call's lease ran out",
    )
}

/// A refusal as recorded in the intent: the kind's name, then the detail.
fn encode_refusal(e: &Error) -> String {
    format!("{:?}: {e}", e.kind())
}

/// The refusal recorded in an intent, as the error it was.
fn decode_refusal(s: Option<&str>) -> Error {
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
fn new_token() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// An intent this call owns, with its current recorded state.
#[derive(Debug)]
pub(crate) struct Guard {
    intent: std::sync::Mutex<Intent>,
    token: String,
}

impl Guard {
    fn snapshot(&self) -> Intent {
        self.intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn id(&self) -> String {
        self.snapshot().id
    }

    fn set(&self, intent: Intent) {
        *self
            .intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = intent;
    }

    /// The intent is gone: nothing to give back on failure.
    fn release(&self) {
        self.intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .owner = None;
    }
}
