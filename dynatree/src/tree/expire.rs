//! The sweep of expired values: [`Tree::sweep_expired`].
//!
#![doc = include_str!("expire.md")]

use crate::error::{ErrorKind, Result};
use crate::expiry::now_secs;
use crate::path::{IntoPath, Path};
use crate::storage::{RANGE_KEY, Storage};
use crate::tree::{Ctx, read, removal};

use super::Tree;

impl<S: Storage + 'static> Tree<S> {
    /// Removes what time to live leaves behind under `path` (see [`Expiry`](crate::Expiry)):
    /// objects whose expiry has passed but that DynamoDB has not deleted yet, and the listing
    /// rows that then name nothing (neither object nor children). Returns how many names were
    /// removed. `path` itself is kept (its own listing row is not looked at).
    ///
    /// Every removal is the guarded one [`delete`](Tree::delete) uses: an object is deleted
    /// only if its expiry still has passed (a value put again meanwhile, with a later expiry,
    /// stays), and a listing row only if it names nothing at that moment, so the sweep can run
    /// while the application writes.
    ///
    /// One Query per directory page, one BatchGetItem per 100 names, and for each removal the
    /// requests of a delete.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use futures::TryStreamExt;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Carts/{user}/Items/{sku}")]
    /// struct CartItem { user: String, sku: String, #[dynatree(ttl)] until: Option<u64> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// let items = tree.repo::<CartItem>();
    /// items.put(&CartItem { user: "u".into(), sku: "old".into(), until: Some(1) }).await?;
    /// items.put(&CartItem { user: "u".into(), sku: "kept".into(), until: None }).await?;
    /// assert_eq!(tree.sweep_expired(["Carts"]).await?, 1);
    /// let names: Vec<String> = tree.list(["Carts", "u", "Items"]).try_collect().await?;
    /// assert_eq!(names, ["kept"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`]; backend errors (what was removed before stays removed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: a dropped sweep leaves each name either swept or not (a mark it
    /// set is released after the removal lease); sweeping again finishes it.
    pub async fn sweep_expired(&self, path: impl IntoPath) -> Result<usize> {
        self.cx
            .call(async {
                let root = self.enter(path)?;
                let span = tracing::debug_span!("dynatree.sweep_expired", path = %root);
                tracing::Instrument::instrument(sweep_under(&self.cx, root), span).await
            })
            .await
    }
}

async fn sweep_under<S: Storage + 'static>(cx: &Ctx<S>, root: Path) -> Result<usize> {
    cx.inner.layout.check_listing_path(&root)?;
    // Every name under `root`, level by level.
    let mut levels: Vec<Vec<Path>> = Vec::new();
    let mut current = vec![root];
    while !current.is_empty() {
        let mut next = Vec::new();
        for prefix in &current {
            let pages = cx.listing_pages(prefix, cx.listing_query(prefix), None);
            futures::pin_mut!(pages);
            while let Some(page) = futures::TryStreamExt::try_next(&mut pages).await? {
                for row in &page.items {
                    if let Some(name) = row.get_s(RANGE_KEY) {
                        next.push(prefix.child(name.to_owned())?);
                    }
                }
            }
        }
        if !next.is_empty() {
            levels.push(next.clone());
        }
        current = next;
    }
    // Deepest first, so that a directory emptied by the sweep is swept too.
    let now = now_secs();
    let mut removed = 0;
    for level in levels.iter().rev() {
        let objects = read::objects_of(cx, level, true).await?;
        for path in level {
            let hash = cx.inner.layout.object_key(path).hash;
            if let Some(row) = objects.get(&hash) {
                if !cx.inner.layout.is_expired(row, now) {
                    continue;
                }
                // Still expired at the moment of the delete: a value put again meanwhile
                // stays.
                let still = cx.inner.layout.expired_at(now);
                match cx
                    .io()
                    .delete_item(&cx.inner.layout.object_key(path), still)
                    .await
                {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::ConditionFailed => continue,
                    Err(e) => return Err(e),
                }
            }
            if removal::remove_if_empty(cx, path).await? {
                removed += 1;
            }
            // An object swept: a step of the call.
            crate::retry::progressed();
        }
    }
    Ok(removed)
}
