//! Tree operations over many nodes: ancestors, descendants, subtree deletion.

use crate::tree::{Ctx, moves, read};
use std::collections::VecDeque;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;

use crate::cursor::{Cursor, TypedPage, another_query, cursor_outside, fingerprint};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::layout::{HASH_KEY, RANGE_KEY};
use crate::path::{IntoPath, Path};
use crate::storage::{IndexQuery, IndexSpec, Key, RangeCondition, SharedStorage, Storage};

use super::Tree;

pub use crate::storage::PATH_INDEX;

/// One descendant object: its path and its raw row (see [`Descendant::value`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Descendant {
    /// The object's path.
    pub path: Path,
    /// Its attributes (the raw row, bookkeeping included).
    pub item: Item,
    reserved: char,
}

/// How [`Tree::descendants`] finds the descendants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// The path index if the tree has one and the prefix has at least its depth; the walk
    /// otherwise.
    #[default]
    Auto,
    /// Walk the listing rows: one Query per node page (every node, since only a Query tells
    /// whether a node has children), plus BatchGetItem for the objects.
    Walk,
    /// One paged Query of the path index (requires [`TreeBuilder::path_index`](super::TreeBuilder::path_index)).
    PathIndex,
}

/// The descendant objects of a prefix, built by [`Tree::descendants`]: by a walk of the listing
/// rows or by the path index, with the vocabulary the typed queries share (`limit`,
/// `page_size`, `start_after`, `pages()` with a [`Cursor`]).
///
/// Order: the walk goes depth first, each object before its descendants, the children of a
/// node in byte order of their names (`/a`, `/a/b`, `/ab`); the path index returns objects in
/// byte order of their stored keys, which have the reserved character between components
/// (`/a`, `/ab`, `/a/b`, since `b` sorts before `¦`). Either way the order does not depend on
/// page boundaries, so a cursor (the last object of a page) says exactly where to continue.
///
/// There is no `descending`: reversed, the walk would return every object after its
/// descendants, not the same traversal backwards in any useful sense, and the two strategies
/// would reverse different orders; collect and reverse a page if needed. Range methods do not
/// apply either (a prefix already selects the range).
///
/// # Examples
///
/// ```
/// # use dynatree::{Cursor, Tree}; use dynatree_testing::FakeTable; use futures::TryStreamExt;
/// # #[derive(serde::Serialize)] struct V { v: u8 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let tree = Tree::new(FakeTable::new());
/// tree.create_table().await?;
/// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
///     tree.put(p, &V { v: 0 }).await?;
/// }
/// let first: Vec<_> = tree.descendants(["a"]).limit(2).items().try_collect().await?;
/// let paths: Vec<String> = first.iter().map(|d| d.path.to_string()).collect();
/// assert_eq!(paths, ["/a/b", "/a/b/c"]); // depth first
/// // Send the cursor to a client as a string, take it back, continue after it.
/// let page = tree.descendants(["a"]).page_size(1).pages().try_next().await?.expect("a page");
/// let cursor: Cursor = page.cursor.expect("more follow").to_string().parse()?;
/// let rest: Vec<_> = tree.descendants(["a"]).start_after(cursor).items().try_collect().await?;
/// let paths: Vec<String> = rest.iter().map(|d| d.path.to_string()).collect();
/// assert_eq!(paths, ["/a/b/c", "/a/d", "/a/e"]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a query does nothing until `items()` or `pages()` is polled"]
pub struct Descendants<S = SharedStorage> {
    tree: Tree<S>,
    prefix: Result<Path>,
    max_depth: Option<usize>,
    concurrency: usize,
    strategy: Strategy,
    limit: Option<usize>,
    page_size: Option<u32>,
    start_after: Option<Cursor>,
}

impl<S: Storage + 'static> Tree<S> {
    /// Every existing ancestor object of `path`, root first: one BatchGetItem per 100
    /// ancestors (unprocessed keys retried). Ancestors without an object are left out.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct Team { name: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// tree.put(["org"], &Team { name: "Org".into() }).await?;
    /// tree.put(["org", "eng", "db"], &Team { name: "Databases".into() }).await?;
    /// table.reset_metrics();
    /// let crumbs: Vec<(dynatree::Path, Team)> = tree.ancestors(["org", "eng", "db", "me"]).await?;
    /// let names: Vec<&str> = crumbs.iter().map(|(_, t)| t.name.as_str()).collect();
    /// assert_eq!(names, ["Org", "Databases"]); // `org/eng` has no object
    /// assert_eq!(table.metrics().total_requests(), 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`]; [`ErrorKind::Serialization`] if an ancestor does not fit
    /// `T` (use [`ancestor_items`](Tree::ancestor_items) for mixed types); backend errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn ancestors<T: DeserializeOwned>(
        &self,
        path: impl IntoPath,
    ) -> Result<Vec<(Path, T)>> {
        self.cx
            .call(async {
                self.ancestor_items(path)
                    .await?
                    .into_iter()
                    .map(|(p, item)| Ok((p, self.cx.to_value(item)?)))
                    .collect()
            })
            .await
    }

    /// [`ancestors`](Tree::ancestors) as raw rows, for trees whose levels hold different types
    /// (deserialize each with [`Item::to_deserialize`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Debug, PartialEq)]
    /// struct Org { name: String }
    /// #[derive(Serialize, Deserialize, Debug, PartialEq)]
    /// struct Team { lead: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.put(["acme"], &Org { name: "Acme".into() }).await?;
    /// tree.put(["acme", "eng"], &Team { lead: "Ann".into() }).await?;
    /// let rows = tree.ancestor_items(["acme", "eng", "alice"]).await?;
    /// assert_eq!(rows.len(), 2);
    /// assert_eq!(rows[0].1.to_deserialize::<Org>()?, Org { name: "Acme".into() });
    /// assert_eq!(rows[1].1.to_deserialize::<Team>()?, Team { lead: "Ann".into() });
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`ancestors`](Tree::ancestors).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn ancestor_items(&self, path: impl IntoPath) -> Result<Vec<(Path, Item)>> {
        self.cx
            .call(async {
                let path = self.enter(path)?;
                ancestors_of(&self.cx, &path)
                    .await?
                    .into_iter()
                    .map(|(p, item)| Ok((self.leave(p)?, item)))
                    .collect()
            })
            .await
    }

    /// The descendant objects of `prefix` (the root: everything), lazily; see [`Descendants`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["x"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let all: Vec<_> = tree.descendants(["a"]).items().try_collect().await?;
    /// let paths: Vec<String> = all.iter().map(|d| d.path.to_string()).collect();
    /// assert_eq!(paths, ["/a/b", "/a/b/c"]);
    /// let children: Vec<_> = tree.descendants(["a"]).max_depth(1).items().try_collect().await?;
    /// assert_eq!(children.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn descendants(&self, prefix: impl IntoPath) -> Descendants<S> {
        Descendants {
            tree: self.clone(),
            prefix: self.enter(prefix),
            max_depth: None,
            concurrency: 8,
            strategy: Strategy::Auto,
            limit: None,
            page_size: None,
            start_after: None,
        }
    }

    /// Deletes `path`'s object and every descendant, safely against concurrent writers.
    ///
    /// The deletion is recorded as an intent first (see [`Tree::pending`]); then every listing
    /// row of the subtree is locked, level by level, each level listed again after it is
    /// locked, so a put that returned `Ok` before its parent was locked is deleted with the
    /// subtree, and one that comes after is refused with [`ErrorKind::Locked`]; then rows go
    /// bottom-up, each listing row conditional on the lock, so the tree stays upward-closed at
    /// every step. A process that dies part-way leaves the intent: [`Tree::resume`] (or the
    /// same call again) finishes. Returns how many objects were deleted.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["a", "b", "c"], &V { v: 0 }).await?;
    /// tree.put(["a", "d"], &V { v: 0 }).await?;
    /// tree.put(["keep"], &V { v: 0 }).await?;
    /// assert_eq!(tree.delete_subtree(["a"]).await?, 2);
    /// let left: Vec<String> = tree.list(dynatree::Path::root()).try_collect().await?;
    /// assert_eq!(left, ["keep"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`]; [`ErrorKind::Locked`] if part of the subtree is held by a
    /// move or another deletion (nothing is deleted then); backend errors (then call it again,
    /// or [`Tree::resume`]).
    ///
    /// # Cancel safety
    ///
    /// A dropped future leaves the deletion recorded, possibly part-way (bottom-up):
    /// `resume`, or the same call again, finishes it.
    pub async fn delete_subtree(&self, path: impl IntoPath) -> Result<usize> {
        let span = |p: &Path| tracing::debug_span!("dynatree.delete_subtree", path = %p);
        self.call_at(path, span, |path| moves::delete_subtree(&self.cx, path))
            .await
    }
}
/// The path-index GSI definition, when the tree has one.
pub(crate) fn path_index_spec<S: Storage + 'static>(cx: &Ctx<S>) -> Option<IndexSpec> {
    cx.inner
        .config
        .path_index
        .map(|_| cx.inner.layout.path_index_spec())
}

/// Adds the path index attributes to an object row (nothing without a path index), and
/// checks them against DynamoDB's limits for index keys (hash 2048 bytes, range 1024) and
/// the row against the item size limit.
pub(crate) fn add_path_index<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    row: &mut Item,
) -> Result<()> {
    let (Some(depth), Some(spec)) = (cx.inner.config.path_index, path_index_spec(cx)) else {
        return Ok(());
    };
    let (hash, range) = cx.inner.layout.path_index_values(path.components(), depth);
    if hash.len() > crate::storage::MAX_HASH_KEY_BYTES
        || range.len() > crate::storage::MAX_RANGE_KEY_BYTES
    {
        return Err(Error::invalid_path(format!(
            "{path} is {} bytes as a key: with a path index, at most {} (the index's range key)",
            range.len(),
            crate::storage::MAX_RANGE_KEY_BYTES
        )));
    }
    row.insert(spec.hash_attr, Value::S(hash));
    if let Some(r) = spec.range_attr {
        row.insert(r, Value::S(range));
    }
    crate::layout::check_item_size(row)
}

impl<S: Storage + 'static> Descendants<S> {
    /// Only descendants down to `depth` levels below the prefix (1: children only).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let near: Vec<_> = tree.descendants(["a"]).max_depth(1).items().try_collect().await?;
    /// let paths: Vec<String> = near.iter().map(|d| d.path.to_string()).collect();
    /// assert_eq!(paths, ["/a/b", "/a/d", "/a/e"]); // not /a/b/c
    /// # Ok(()) }
    /// ```
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// How many listing Queries the walk runs at once (default 8): it lists the children of
    /// that many siblings together before it goes down into the first.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// // One listing Query at a time: slower, same result.
    /// let one: Vec<_> = tree.descendants(["a"]).concurrency(1).items().try_collect().await?;
    /// let eight: Vec<_> = tree.descendants(["a"]).items().try_collect().await?;
    /// assert_eq!(one, eight);
    /// # Ok(()) }
    /// ```
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The strategy (default [`Strategy::Auto`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{ErrorKind, Strategy, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let walked: Vec<_> = tree.descendants(["a"]).strategy(Strategy::Walk).items().try_collect().await?;
    /// assert_eq!(walked.len(), 4);
    /// // This tree has no path index (see `TreeBuilder::path_index`).
    /// let err = tree.descendants(["a"]).strategy(Strategy::PathIndex).items().try_collect::<Vec<_>>().await;
    /// assert_eq!(err.unwrap_err().kind(), ErrorKind::InvalidArgument);
    /// # Ok(()) }
    /// ```
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// At most `n` descendants in all.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let first: Vec<_> = tree.descendants(["a"]).limit(3).items().try_collect().await?;
    /// let paths: Vec<String> = first.iter().map(|d| d.path.to_string()).collect();
    /// assert_eq!(paths, ["/a/b", "/a/b/c", "/a/d"]);
    /// # Ok(()) }
    /// ```
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// At most `n` rows per DynamoDB Query (its `Limit`; default: the tree's
    /// [`page_size`](super::TreeBuilder::page_size), else 1 MB pages): listing rows for the
    /// walk, objects for the path index.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// for name in ["b", "c", "d", "e"] {
    ///     tree.put(["a", name], &V { v: 0 }).await?;
    /// }
    /// table.reset_metrics();
    /// let all: Vec<_> = tree.descendants(["a"]).page_size(2).items().try_collect().await?;
    /// assert_eq!(all.len(), 4);
    /// // `a` listed in Queries of 2 rows (the third finds nothing more), then each child.
    /// assert_eq!(table.metrics().requests("Query"), 3 + 4);
    /// # Ok(()) }
    /// ```
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = Some(n.max(1));
        self
    }

    /// Continues after the page that returned `cursor` (see [`Cursor`]). A cursor this query
    /// cannot have returned (another query's: another prefix, depth or strategy; or a
    /// position that is empty, not an object's path, not below the prefix within the depth,
    /// or by the path index over its 1,024-byte range key limit) makes the stream yield
    /// [`ErrorKind::InvalidArgument`], with nothing sent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Cursor, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let page = tree.descendants(["a"]).page_size(1).pages().try_next().await?.expect("a page");
    /// let cursor: Cursor = page.cursor.expect("more follow");
    /// let rest: Vec<_> = tree.descendants(["a"]).start_after(cursor).items().try_collect().await?;
    /// // Together, every descendant once.
    /// let paths: Vec<String> = page.items.iter().chain(&rest).map(|d| d.path.to_string()).collect();
    /// assert_eq!(paths, ["/a/b", "/a/b/c", "/a/d", "/a/e"]);
    /// # Ok(()) }
    /// ```
    pub fn start_after(mut self, cursor: Cursor) -> Self {
        self.start_after = Some(cursor);
        self
    }

    /// The descendant objects, page by page, each page with the cursor after it. No page is
    /// empty. With the path index a page is what one Query returned; the walk ends a page
    /// wherever it must send a request and has objects to hand over. As with
    /// [`TypedQuery::pages`](crate::TypedQuery::pages), the cursor is `None` once the end or
    /// the limit is known to be reached, and the last page may still carry one (the next
    /// request finds nothing), which then leads to no more pages.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let pages: Vec<_> = tree.descendants(["a"]).page_size(1).pages().try_collect().await?;
    /// assert!(pages.iter().all(|p| !p.items.is_empty())); // no page is empty
    /// assert_eq!(pages.iter().map(|p| p.items.len()).sum::<usize>(), 4);
    /// assert!(pages[0].cursor.is_some()); // where the second page starts
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The stream yields one error and ends, with nothing sent, on an invalid prefix
    /// ([`ErrorKind::InvalidPath`]), [`Strategy::PathIndex`] on a tree without a path index
    /// or with a prefix shorter than its depth, or a cursor this query cannot have returned
    /// (see [`start_after`](Descendants::start_after); [`ErrorKind::InvalidArgument`]); later,
    /// on backend errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn pages(mut self) -> BoxStream<'static, Result<TypedPage<Descendant>>> {
        let tree = self.tree.clone();
        let (max_depth, concurrency) = (self.max_depth, self.concurrency);
        let (limit, page_size) = (self.limit.unwrap_or(usize::MAX), self.page_size);
        let cursor = self.start_after.take();
        let setup = self.plan().and_then(|(prefix, use_index)| {
            let fp = fingerprint(
                if use_index {
                    "descendants by index"
                } else {
                    "descendants by walk"
                },
                &[
                    &tree.cx.inner.layout.listing_hash(prefix.components()),
                    &format!("{max_depth:?}"),
                ],
                None,
                true,
            );
            let start = match cursor {
                None => None,
                Some(c) => Some(resume_point(
                    &tree,
                    &prefix,
                    max_depth,
                    use_index,
                    c.parts_for(fp)?,
                )?),
            };
            Ok((prefix, use_index, fp, start))
        });
        Box::pin(match setup {
            Err(e) => futures::stream::once(async move { Err(e) }).left_stream(),
            Ok((prefix, true, fp, start)) => {
                index_pages(tree, prefix, max_depth, page_size, limit, fp, start)
                    .left_stream()
                    .right_stream()
            }
            Ok((prefix, false, fp, start)) => {
                let walk = Walk::new(tree, &prefix, start, max_depth, concurrency, page_size);
                walk_pages(walk, limit, fp).right_stream().right_stream()
            }
        })
    }

    /// The descendant objects, lazily, in the order of [`pages`](Descendants::pages).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// for p in [&["a"][..], &["a", "b"], &["a", "b", "c"], &["a", "d"], &["a", "e"]] {
    ///     tree.put(p, &V { v: 0 }).await?;
    /// }
    /// let all: Vec<_> = tree.descendants(["a"]).items().try_collect().await?;
    /// let paths: Vec<String> = all.iter().map(|d| d.path.to_string()).collect();
    /// assert_eq!(paths, ["/a/b", "/a/b/c", "/a/d", "/a/e"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`pages`](Descendants::pages).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> BoxStream<'static, Result<Descendant>> {
        Box::pin(
            self.pages()
                .map_ok(|p| futures::stream::iter(p.items.into_iter().map(Ok)))
                .try_flatten(),
        )
    }

    /// The descendant objects decoded as the [`Entity`](crate::Entity) `E`, lazily, in the
    /// order of [`pages`](Descendants::pages): each as the variant its path matches (see
    /// [`entity`](crate::entity)); an object whose path matches no template of `E` is skipped
    /// when `E` has no `#[dynatree(other)]` variant. The requests are those of `pages`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Entity, Hierarchical, Tree};
    /// use dynatree_testing::FakeTable;
    /// use futures::TryStreamExt;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Folders/{folder}")]
    /// struct Folder { folder: String }
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
    /// #[dynatree(path = "Folders/{folder}/{file}")]
    /// struct File { folder: String, file: String }
    ///
    /// #[derive(Entity, Debug, PartialEq)]
    /// enum Node { Folder(Folder), File(File) }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.repo::<Folder>().put(&Folder { folder: "f".into() }).await?;
    /// tree.repo::<File>().put(&File { folder: "f".into(), file: "a".into() }).await?;
    /// let nodes: Vec<Node> = tree.descendants(["Folders"]).max_depth(1).entities().try_collect().await?;
    /// assert_eq!(nodes, [Node::Folder(Folder { folder: "f".into() })]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`pages`](Descendants::pages); also [`ErrorKind::InvalidReserved`] (with nothing
    /// sent) for an entity checked against another reserved character, and
    /// [`ErrorKind::Serialization`] for an object whose path matches a template of `E` but
    /// whose attributes do not fit its type.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn entities<E: crate::Entity>(self) -> BoxStream<'static, Result<E>> {
        if let Err(e) = self.tree.check_entity_reserved(E::RESERVED) {
            return Box::pin(futures::stream::once(async move { Err(e) }));
        }
        let tree = self.tree.clone();
        Box::pin(
            self.items()
                .and_then(move |d| {
                    let decoded = tree.enter(d.path).and_then(|path| E::decode(&path, d.item));
                    futures::future::ready(decoded)
                })
                .try_filter_map(futures::future::ok),
        )
    }

    /// The checked prefix, and whether to use the path index.
    fn plan(self) -> Result<(Path, bool)> {
        let prefix = self.prefix?;
        self.tree.cx.inner.layout.check_listing_path(&prefix)?;
        let index_depth = self.tree.cx.inner.config.path_index;
        let use_index = match (self.strategy, index_depth) {
            (Strategy::Walk, _) | (Strategy::Auto, None) => false,
            (Strategy::Auto, Some(depth)) => prefix.len() >= depth,
            (Strategy::PathIndex, None) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "this tree has no path index (TreeBuilder::path_index)",
                ));
            }
            (Strategy::PathIndex, Some(depth)) => {
                if prefix.len() < depth {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("the path index needs a prefix of at least {depth} components"),
                    ));
                }
                true
            }
        };
        Ok((prefix, use_index))
    }
}

impl Descendant {
    /// The object as `T` (bookkeeping attributes removed).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree;
    /// # use dynatree_testing::FakeTable;
    /// # use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let tree = Tree::new(FakeTable::new());
    /// # tree.create_table().await?;
    /// tree.put(["a", "b"], &V { v: 7 }).await?;
    /// let found: Vec<_> = tree.descendants(["a"]).items().try_collect().await?;
    /// assert_eq!(found[0].value::<V>()?, V { v: 7 }); // without the bookkeeping attributes
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`] if it does not fit `T`.
    pub fn value<T: DeserializeOwned>(&self) -> Result<T> {
        let mut item = self.item.clone();
        crate::layout::strip_bookkeeping(&mut item, self.reserved);
        item.to_deserialize()
    }
}

/// The absolute path a cursor of a descendants query stands for: an object strictly below
/// `prefix`, within `max_depth`, and (by the path index, `by_index`) one the index can hold:
/// its key, the index's range key, within DynamoDB's sort key limit.
fn resume_point<S: Storage + 'static>(
    tree: &Tree<S>,
    prefix: &Path,
    max_depth: Option<usize>,
    by_index: bool,
    parts: &[String],
) -> Result<Path> {
    let [hash] = parts else {
        return Err(another_query());
    };
    if hash.is_empty() {
        return Err(cursor_outside("the cursor's position is empty"));
    }
    if by_index && hash.len() > crate::storage::MAX_RANGE_KEY_BYTES {
        return Err(cursor_outside(format!(
            "the cursor's position is {} bytes, over DynamoDB's {}-byte sort key limit (the path index's range key)",
            hash.len(),
            crate::storage::MAX_RANGE_KEY_BYTES
        )));
    }
    let path = tree
        .cx
        .inner
        .layout
        .decode_target(hash)
        .map_err(|_| cursor_outside("the cursor's position is not an object's path"))?;
    let below = path.len() > prefix.len()
        && path.starts_with(prefix)
        && max_depth.is_none_or(|m| path.len() - prefix.len() <= m);
    if below {
        Ok(path)
    } else {
        Err(cursor_outside(
            "the cursor's position is outside the query's prefix or depth",
        ))
    }
}

/// The walk, depth first: a stack of the directories being listed, each with the names of its
/// current listing page still to visit.
struct Walk<S> {
    tree: Tree<S>,
    stack: Vec<Frame>,
    max_depth: Option<usize>,
    concurrency: usize,
    page_size: Option<u32>,
}

/// A directory of the walk.
struct Frame {
    dir: Path,
    /// How far below the prefix `dir` is.
    depth: usize,
    /// Its children still to visit (from the current listing page).
    entries: VecDeque<Entry>,
    /// Whether the entries' objects have been read.
    objects: bool,
    /// `Some(start)` while more of the listing is to be read (`start`: exclusive start key).
    next: Option<Option<Key>>,
}

/// A child still to visit.
struct Entry {
    path: Path,
    object: Option<Item>,
    /// The first listing page of its own children, once read.
    children: Option<Listing>,
}

/// One listing page: names, and where the next page starts.
#[derive(Default)]
struct Listing {
    names: Vec<String>,
    next: Option<Key>,
}

impl Frame {
    fn new(dir: Path, depth: usize, listing: Listing) -> Result<Self> {
        let entries = listing
            .names
            .into_iter()
            .map(|n| {
                Ok(Entry {
                    path: dir.child(n)?,
                    object: None,
                    children: None,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            dir,
            depth,
            entries,
            objects: false,
            next: listing.next.map(Some),
        })
    }

    /// A directory whose listing is read from `start` on (exclusive).
    fn unread(dir: Path, depth: usize, start: Option<Key>) -> Self {
        Self {
            dir,
            depth,
            entries: VecDeque::new(),
            objects: true,
            next: Some(start),
        }
    }
}

impl<S: Storage + 'static> Walk<S> {
    /// The walk below `prefix`, from its start or after the object at `after`: the stack is
    /// then `after`'s ancestors, each listed from the name after `after`'s, and `after` itself.
    fn new(
        tree: Tree<S>,
        prefix: &Path,
        after: Option<Path>,
        max_depth: Option<usize>,
        concurrency: usize,
        page_size: Option<u32>,
    ) -> Self {
        let mut stack = Vec::new();
        let descend = |depth: usize| max_depth.is_none_or(|m| depth < m);
        match after {
            None if descend(0) => stack.push(Frame::unread(prefix.clone(), 0, None)),
            None => {}
            Some(after) => {
                for i in prefix.len()..after.len() {
                    let start = tree.cx.inner.layout.listing_key(&after.prefix(i + 1));
                    stack.push(Frame::unread(
                        after.prefix(i),
                        i - prefix.len(),
                        Some(start),
                    ));
                }
                let depth = after.len() - prefix.len();
                if descend(depth) {
                    stack.push(Frame::unread(after, depth, None));
                }
            }
        }
        Self {
            tree,
            stack,
            max_depth,
            concurrency,
            page_size,
        }
    }

    /// The next objects, at most `left`, up to the next request that has to wait for them to
    /// be handed over; `None` at the end. Also returns the absolute path of the last one.
    async fn next_objects(&mut self, left: usize) -> Result<Option<(Vec<Descendant>, Path)>> {
        let Walk {
            tree,
            stack,
            max_depth,
            concurrency,
            page_size,
        } = self;
        let layout = &tree.cx.inner.layout;
        let mut out: Vec<Descendant> = Vec::new();
        let mut last = None;
        while let Some(top) = stack.last_mut() {
            if out.len() == left {
                break;
            }
            let requests = top.entries.is_empty()
                || !top.objects
                || (max_depth.is_none_or(|m| top.depth + 1 < m)
                    && top.entries.front().is_some_and(|e| e.children.is_none()));
            if requests && !out.is_empty() {
                break;
            }
            if top.entries.is_empty() {
                let Some(start) = top.next.take() else {
                    stack.pop();
                    continue;
                };
                let listing = list_page(tree.clone(), top.dir.clone(), start, *page_size).await?;
                let (dir, depth) = (top.dir.clone(), top.depth);
                *top = Frame::new(dir, depth, listing.unwrap_or_default())?;
                continue;
            }
            if !top.objects {
                let paths: Vec<Path> = top.entries.iter().map(|e| e.path.clone()).collect();
                let mut by_hash =
                    read::objects_of(&tree.cx, &paths, tree.cx.inner.config.consistent_reads)
                        .await?;
                let now = crate::expiry::now_secs();
                for e in &mut top.entries {
                    e.object = by_hash
                        .remove(&layout.object_key(&e.path).hash)
                        .filter(|i| !layout.is_absent(i, now));
                }
                top.objects = true;
                continue;
            }
            let child_depth = top.depth + 1;
            let descend = max_depth.is_none_or(|m| child_depth < m);
            if descend && top.entries.front().is_some_and(|e| e.children.is_none()) {
                let n = top.entries.len().min(*concurrency);
                let requests: Vec<_> = top
                    .entries
                    .iter()
                    .take(n)
                    .map(|e| list_page(tree.clone(), e.path.clone(), None, *page_size))
                    .collect();
                let listings: Vec<Option<Listing>> = futures::stream::iter(requests)
                    .buffered(n)
                    .try_collect()
                    .await?;
                for (e, l) in top.entries.iter_mut().zip(listings) {
                    e.children = Some(l.unwrap_or_default());
                }
                continue;
            }
            let entry = top.entries.pop_front().expect("entries checked non-empty");
            if let Some(item) = entry.object {
                out.push(Descendant {
                    path: tree.leave(entry.path.clone())?,
                    item,
                    reserved: layout.reserved(),
                });
                last = Some(entry.path.clone());
            }
            if let Some(children) = entry
                .children
                .filter(|c| !c.names.is_empty() || c.next.is_some())
            {
                stack.push(Frame::new(entry.path, child_depth, children)?);
            }
        }
        Ok(last.map(|last| (out, last)))
    }
}

/// One listing page of `dir` from `start` (exclusive); `None` if its listing key is over
/// DynamoDB's limit (it can have no children).
async fn list_page<S: Storage + 'static>(
    tree: Tree<S>,
    dir: Path,
    start: Option<Key>,
    page_size: Option<u32>,
) -> Result<Option<Listing>> {
    if !tree.cx.inner.layout.check_listable(&dir)? {
        return Ok(None);
    }
    let mut query = tree.cx.listing_query_for(&dir)?;
    if page_size.is_some() {
        query.limit = page_size;
    }
    // The start is a child's listing key; a sharded directory resumes each shard after its
    // name.
    let after = start.map(|k| k.range);
    let mut pages = tree.cx.listing_pages(&dir, query, after.clone());
    let Some(page) = pages.try_next().await? else {
        return Ok(Some(Listing::default()));
    };
    let names = page
        .items
        .iter()
        .filter_map(|i| i.get_s(RANGE_KEY).map(str::to_owned))
        .collect();
    // A service that repeats the start key has nothing more.
    let next = page.last_key.filter(|k| Some(&k.range) != after.as_ref());
    Ok(Some(Listing { names, next }))
}

/// The walk's pages.
fn walk_pages<S: Storage + 'static>(
    walk: Walk<S>,
    limit: usize,
    fp: u64,
) -> impl Stream<Item = Result<TypedPage<Descendant>>> + Send + 'static {
    futures::stream::try_unfold((walk, limit), move |(mut walk, left)| async move {
        if left == 0 {
            return Ok(None);
        }
        let Some((items, last)) = walk.next_objects(left).await? else {
            return Ok(None);
        };
        let left = left - items.len();
        let more = left > 0 && !walk.stack.is_empty();
        let cursor = more.then(|| {
            Cursor::new(
                fp,
                vec![walk.tree.cx.inner.layout.object_hash(last.components())],
            )
        });
        Ok(Some((TypedPage { items, cursor }, (walk, left))))
    })
}

/// The path index: one paged Query, `begins_with(full path, prefix SC)`, from the start or
/// after the object at `after`.
fn index_pages<S: Storage + 'static>(
    tree: Tree<S>,
    prefix: Path,
    max_depth: Option<usize>,
    page_size: Option<u32>,
    limit: usize,
    fp: u64,
    after: Option<Path>,
) -> impl Stream<Item = Result<TypedPage<Descendant>>> + Send + 'static {
    let layout = &tree.cx.inner.layout;
    let depth = tree.cx.inner.config.path_index.unwrap_or(0);
    let spec = path_index_spec(&tree.cx).expect("path index configured");
    // Objects strictly below the prefix: keys that start with its listing key.
    let begins = layout.listing_hash(prefix.components());
    // The index's key of an object row: the table's key and the index's two attributes.
    let index_key = |path: &Path| {
        let mut item = layout.object_key(path).into_item();
        let (hash, range) = layout.path_index_values(path.components(), depth);
        item.insert(spec.hash_attr.clone(), Value::S(hash));
        if let Some(r) = &spec.range_attr {
            item.insert(r.clone(), Value::S(range));
        }
        item
    };
    let start = after.as_ref().map(index_key);
    let query = IndexQuery {
        index: spec.clone(),
        hash: layout.path_index_values(prefix.components(), depth).0,
        range: Some(RangeCondition::BeginsWith(begins)),
        forward: true,
        limit: page_size,
        projection: None,
    };
    let base = prefix.len();
    let pages = Box::pin(crate::stream::index_pages(tree.cx.io(), query, start));
    futures::stream::try_unfold((Some(pages), limit), move |(pages, mut left)| {
        let tree = tree.clone();
        async move {
            let Some(mut pages) = pages else {
                return Ok(None);
            };
            // Pages whose objects are all below `max_depth` are skipped: no page is empty.
            loop {
                if left == 0 {
                    return Ok(None);
                }
                let Some(page) = pages.try_next().await? else {
                    return Ok(None);
                };
                let mut items = Vec::new();
                let mut last_hash = None;
                let now = crate::expiry::now_secs();
                for item in page.items {
                    if items.len() == left {
                        break;
                    }
                    let Some(hash) = item.get_s(HASH_KEY) else {
                        continue;
                    };
                    let path = tree.cx.inner.layout.decode_target(hash)?;
                    if tree.cx.inner.layout.is_absent(&item, now) {
                        // Expired: skipped, but the page resumes after it.
                        last_hash = Some(hash.to_owned());
                        continue;
                    }
                    if max_depth.is_none_or(|m| path.len() - base <= m) {
                        last_hash = Some(hash.to_owned());
                        items.push(Descendant {
                            path: tree.leave(path)?,
                            item,
                            reserved: tree.cx.inner.layout.reserved(),
                        });
                    }
                }
                left -= items.len();
                let more = page.last.is_some() && left > 0;
                if items.is_empty() {
                    if more {
                        continue;
                    }
                    return Ok(None);
                }
                let cursor = more
                    .then_some(last_hash)
                    .flatten()
                    .map(|h| Cursor::new(fp, vec![h]));
                return Ok(Some((
                    TypedPage { items, cursor },
                    (more.then_some(pages), left),
                )));
            }
        }
    })
}

/// The objects at the proper prefixes of `path` (absolute), shallowest first, in one batch
/// read; through a scope only those below its root. See
/// [`Tree::ancestor_items`](crate::Tree::ancestor_items).
pub(crate) async fn ancestors_of<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Vec<(Path, Item)>> {
    let layout = &cx.inner.layout;
    layout.check_object_path(path)?;
    let prefixes: Vec<Path> = (cx.floor() + 1..path.len())
        .map(|i| path.prefix(i))
        .collect();
    let mut by_hash = read::objects_of(cx, &prefixes, cx.inner.config.consistent_reads).await?;
    let now = crate::expiry::now_secs();
    Ok(prefixes
        .into_iter()
        .filter_map(|p| {
            let item = by_hash.remove(&layout.object_key(&p).hash)?;
            (!layout.is_absent(&item, now)).then_some((p, item))
        })
        .collect())
}
