//! The stream processor: [`Tree::apply_changes`], which keeps denormalized copies in step with
//! their sources from a table's change records.

use crate::denorm::{Denormalized, TypeInfo};
use crate::error::Result;
use crate::storage::Storage;
use crate::tree::denorm::matches_template;
use crate::tree::{Ctx, Tree, denorm};
use tracing::Instrument;

use super::{Applied, Change, FailedChange};

impl<S: Storage + 'static> Tree<S> {
    /// The stream processor: see [`changes`](crate::changes).
    ///
    /// For each change, in order: a change of a *source* object (a type some registered
    /// target copies from) copies it to every target below it, or clears their optional
    /// copies if it was removed, by the same version-guarded writes as inline propagation; a
    /// *target* object written without the versions of its copies (a new or moved object, or
    /// one written by another program) is filled from its ancestors. Listing rows, intents and
    /// unregistered types are skipped. Applying a change twice, or an old change after a newer
    /// one, moves no copy backwards. Register the target types first
    /// ([`TreeBuilder::denormalized`](crate::TreeBuilder::denormalized) or
    /// [`Tree::repo`]).
    ///
    /// Stops at the first change that fails and reports it (see [`Applied`]): deliver the
    /// batch again from that change.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::changes::{Change, ChangeKind};
    /// use dynatree::{Hierarchical, denorm::Propagation, Tree};
    /// use dynatree_testing::FakeTable;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Forums/{forum}")]
    /// struct Forum { forum: String, name: String }
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Forums/{forum}/Threads/{thread}")]
    /// struct Thread { forum: String, thread: String, #[dynatree(from = Forum::name)] forum_name: Option<String> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::builder(table.clone())
    ///     .denormalized::<Thread>()
    ///     .propagation(Propagation::Stream)
    ///     .build()?;
    /// tree.create_table().await?;
    /// tree.repo::<Forum>().put(&Forum { forum: "f".into(), name: "Rust".into() }).await?;
    /// let thread = Thread { forum: "f".into(), thread: "t".into(), forum_name: None };
    /// tree.repo::<Thread>().put(&thread).await?;
    /// // Nothing copied by the writes: the stream's records do it.
    /// let key = tree.repo::<Thread>().get(&thread.key()).await?.unwrap();
    /// assert_eq!(key.forum_name, None);
    /// let changes: Vec<Change> = table.stream_reader().next_batch(100);
    /// tree.apply_changes(&changes).await.into_result()?;
    /// let read = tree.repo::<Thread>().get(&thread.key()).await?.unwrap();
    /// assert_eq!(read.forum_name.as_deref(), Some("Rust"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancelling leaves some changes applied and the rest not: deliver the batch again.
    pub async fn apply_changes(&self, changes: &[Change]) -> Applied {
        self.cx.call(apply_all(&self.cx, changes)).await
    }
}

/// Applies `changes` in order, stopping at the first failure. See
/// [`Tree::apply_changes`].
async fn apply_all<S: Storage + 'static>(cx: &Ctx<S>, changes: &[Change]) -> Applied {
    for (index, change) in changes.iter().enumerate() {
        let span = tracing::debug_span!(
            "dynatree.apply_change",
            kind = change.kind().event_name(),
            sequence = change.sequence_number()
        );
        // Each change applied is a step of the call.
        crate::retry::progressed();
        if let Err(error) = apply_change(cx, change).instrument(span).await {
            return Applied {
                applied: index,
                failure: Some(FailedChange {
                    index,
                    sequence_number: change.sequence_number().to_owned(),
                    error,
                }),
            };
        }
    }
    Applied {
        applied: changes.len(),
        failure: None,
    }
}

async fn apply_change<S: Storage + 'static>(cx: &Ctx<S>, change: &Change) -> Result<()> {
    let layout = &cx.layout();
    let Some(path) = layout.path_of_object_key(change.key()) else {
        return Ok(());
    };
    let targets = cx.denorm_targets().snapshot();
    let source_attrs: Vec<&str> = targets
        .iter()
        .flat_map(|(_, defs)| defs.iter())
        .filter(|d| matches_template(d.source_template(), &path))
        .map(Denormalized::source_attr)
        .collect();
    // A fence (fenced puts) is no object: its record is a removal.
    let new = change
        .new_image()
        .filter(|r| !r.contains(layout.link_attr()) && !layout.is_fence(r));
    if !source_attrs.is_empty() {
        match new {
            Some(new) => {
                let unchanged = change.old_image().is_some_and(|old| {
                    !old.contains(layout.link_attr())
                        && source_attrs.iter().all(|a| old.get(a) == new.get(a))
                });
                // What is stored now is propagated, not the image (a record delivered
                // late may show a source since moved or removed); none: its removal's own
                // record does the work.
                if !unchanged && let Some(now) = denorm::current_source(cx, &path).await? {
                    denorm::reconcile_source(cx, &path, Some(&now), None).await?;
                }
            }
            // Removed (or now a link): whatever is there now decides; the removed row's
            // version is its tombstone if its deleter did not record one (another program).
            None => {
                if let Some(v) = change
                    .old_image()
                    .and_then(|o| denorm::row_version(cx, &path, o))
                {
                    denorm::put_tombstone(cx, &path, v).await?;
                }
                denorm::reconcile_source(cx, &path, None, None).await?;
            }
        }
    }
    if let Some(new) = new {
        for (template, defs) in &targets {
            let missing = defs
                .iter()
                .any(|d| !new.contains(&layout.target_version_attr(d.target())));
            if missing && matches_template(template, &path) {
                let ty = TypeInfo {
                    template,
                    denormalized: defs,
                };
                denorm::refresh_copies(cx, ty, &path, new).await?;
            }
        }
    }
    Ok(())
}
