//! Tree operations over many nodes: ancestors, descendants, subtree deletion.

use std::collections::VecDeque;

use futures::{Stream, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::layout::{HASH_KEY, RANGE_KEY};
use crate::path::{IntoPath, Path};
use crate::storage::{IndexQuery, IndexSpec, RangeCondition, SharedStorage, Storage};

use super::Tree;

/// The name of the path index's GSI.
pub const PATH_INDEX: &str = "dynatree_paths";

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

/// A descendants query, built by [`Tree::descendants`].
#[derive(Debug)]
#[must_use = "a query does nothing until `items()` is polled"]
pub struct Descendants<S = SharedStorage> {
    tree: Tree<S>,
    prefix: Result<Path>,
    max_depth: Option<usize>,
    concurrency: usize,
    strategy: Strategy,
}

impl<S: Storage + 'static> Tree<S> {
    /// The path-index GSI definition, when the tree has one.
    pub(crate) fn path_index_spec(&self) -> Option<IndexSpec> {
        self.inner.config.path_index.map(|_| {
            let sc = self.inner.layout.reserved();
            IndexSpec::new(PATH_INDEX, format!("{sc}pix.h"), Some(format!("{sc}pix.r")))
        })
    }

    /// Adds the path index attributes to an object row (nothing without a path index), and
    /// checks them against DynamoDB's limits for index keys (hash 2048 bytes, range 1024) and
    /// the row against the item size limit.
    pub(crate) fn add_path_index(&self, path: &Path, row: &mut Item) -> Result<()> {
        let (Some(depth), Some(spec)) = (self.inner.config.path_index, self.path_index_spec())
        else {
            return Ok(());
        };
        let hash = self
            .inner
            .layout
            .object_hash(&path.components()[..depth.min(path.len())]);
        let range = self.inner.layout.object_hash(path.components());
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
        self.ancestor_items(path)
            .await?
            .into_iter()
            .map(|(p, item)| Ok((p, self.to_value(item)?)))
            .collect()
    }

    /// [`ancestors`](Tree::ancestors) as raw rows, for trees whose levels hold different types
    /// (deserialize each with [`Item::to_deserialize`]).
    ///
    /// # Errors
    ///
    /// As [`ancestors`](Tree::ancestors).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn ancestor_items(&self, path: impl IntoPath) -> Result<Vec<(Path, Item)>> {
        let path = path.into_path()?;
        self.inner.layout.check_object_path(&path)?;
        let prefixes: Vec<Path> = (1..path.len()).map(|i| path.prefix(i)).collect();
        let mut by_hash = self
            .objects_of(&prefixes, self.inner.config.consistent_reads)
            .await?;
        Ok(prefixes
            .into_iter()
            .filter_map(|p| {
                let item = by_hash.remove(&self.inner.layout.object_key(&p).hash)?;
                Some((p, item))
            })
            .collect())
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
            prefix: prefix.into_path(),
            max_depth: None,
            concurrency: 8,
            strategy: Strategy::Auto,
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
        let path = path.into_path()?;
        self.inner.layout.check_object_path(&path)?;
        let report = self
            .start("delete", path.clone(), path, super::LinkPolicy::Ignore)
            .await?;
        Ok(report.objects)
    }
}

impl<S: Storage + 'static> Descendants<S> {
    /// Only descendants down to `depth` levels below the prefix (1: children only).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// How many listing Queries the walk runs at once (default 8).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The strategy (default [`Strategy::Auto`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The descendant objects: by the walk, level by level (names in byte order within each
    /// directory); by the path index, in byte order of the full path.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn items(self) -> futures::stream::BoxStream<'static, Result<Descendant>> {
        let tree = self.tree.clone();
        let (max_depth, concurrency) = (self.max_depth, self.concurrency);
        let plan = self.plan();
        Box::pin(match plan {
            Err(e) => futures::stream::once(async move { Err(e) }).left_stream(),
            Ok((prefix, true)) => index_stream(tree, prefix, max_depth)
                .left_stream()
                .right_stream(),
            Ok((prefix, false)) => walk_stream(tree, prefix, max_depth, concurrency)
                .right_stream()
                .right_stream(),
        })
    }

    /// The checked prefix, and whether to use the path index.
    fn plan(self) -> Result<(Path, bool)> {
        let prefix = self.prefix?;
        self.tree.inner.layout.check_listing_path(&prefix)?;
        let index_depth = self.tree.inner.config.path_index;
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
    /// # Errors
    ///
    /// [`ErrorKind::Serialization`] if it does not fit `T`.
    pub fn value<T: DeserializeOwned>(&self) -> Result<T> {
        let mut item = self.item.clone();
        item.remove(HASH_KEY);
        item.remove(RANGE_KEY);
        let bookkeeping: Vec<String> = item
            .names()
            .filter(|n| n.starts_with(self.reserved))
            .map(str::to_owned)
            .collect();
        for n in bookkeeping {
            item.remove(&n);
        }
        item.to_deserialize()
    }
}

/// The walk: level by level, `concurrency` directories at a time.
fn walk_stream<S: Storage + 'static>(
    tree: Tree<S>,
    prefix: Path,
    max_depth: Option<usize>,
    concurrency: usize,
) -> impl Stream<Item = Result<Descendant>> + Send + 'static {
    let mut queue = VecDeque::new();
    queue.push_back((prefix, 0usize));
    futures::stream::try_unfold(queue, move |mut queue| {
        let tree = tree.clone();
        async move {
            let tree = &tree;
            if queue.is_empty() {
                return Ok(None);
            }
            let batch: Vec<(Path, usize)> = queue.drain(..queue.len().min(concurrency)).collect();
            let listed: Vec<(Path, usize, Vec<Path>)> = futures::stream::iter(batch)
                .map(|(dir, depth)| async move {
                    let names: Vec<String> = tree.list_names(&dir, false).try_collect().await?;
                    let children = names
                        .into_iter()
                        .map(|n| dir.child(n))
                        .collect::<Result<Vec<Path>>>()?;
                    Ok::<_, Error>((dir, depth, children))
                })
                .buffered(concurrency)
                .try_collect()
                .await?;
            let mut found = Vec::new();
            for (_, depth, children) in listed {
                if children.is_empty() {
                    continue;
                }
                let mut by_hash = tree
                    .objects_of(&children, tree.inner.config.consistent_reads)
                    .await?;
                for child in children {
                    let child_depth = depth + 1;
                    if max_depth.is_some_and(|m| child_depth > m) {
                        continue;
                    }
                    if let Some(item) = by_hash.remove(&tree.inner.layout.object_key(&child).hash) {
                        found.push(Descendant {
                            path: child.clone(),
                            item,
                            reserved: tree.inner.layout.reserved(),
                        });
                    }
                    if max_depth.is_none_or(|m| child_depth < m) {
                        queue.push_back((child, child_depth));
                    }
                }
            }
            Ok(Some((found, queue)))
        }
    })
    .map_ok(|found| futures::stream::iter(found.into_iter().map(Ok)))
    .try_flatten()
}

/// The path index: one paged Query, `begins_with(full path, prefix SC)`.
fn index_stream<S: Storage + 'static>(
    tree: Tree<S>,
    prefix: Path,
    max_depth: Option<usize>,
) -> impl Stream<Item = Result<Descendant>> + Send + 'static {
    let depth = tree.inner.config.path_index.unwrap_or(0);
    let spec = tree.path_index_spec().expect("path index configured");
    let mut begins = tree.inner.layout.object_hash(prefix.components());
    begins.push(tree.inner.layout.reserved());
    let query = IndexQuery {
        index: spec,
        hash: tree.inner.layout.object_hash(&prefix.components()[..depth]),
        range: Some(RangeCondition::BeginsWith(begins)),
        forward: true,
        limit: None,
    };
    let base = prefix.len();
    futures::stream::try_unfold(Some(None::<Item>), move |state| {
        let query = query.clone();
        let tree = tree.clone();
        async move {
            let Some(start) = state else {
                return Ok(None);
            };
            let page = tree.io().query_index_page(&query, start).await?;
            let mut found = Vec::new();
            for item in page.items {
                let Some(hash) = item.get_s(HASH_KEY) else {
                    continue;
                };
                let path = tree.inner.layout.decode_target(hash)?;
                if max_depth.is_none_or(|m| path.len() - base <= m) {
                    found.push(Descendant {
                        path,
                        item,
                        reserved: tree.inner.layout.reserved(),
                    });
                }
            }
            Ok(Some((found, page.last.map(Some))))
        }
    })
    .map_ok(|found| futures::stream::iter(found.into_iter().map(Ok)))
    .try_flatten()
}
