//! The read path: object rows by path, links followed, expired values skipped, with a per-call
//! choice of consistency and projection.

use crate::tree::Ctx;
use std::collections::HashMap;

use serde::de::DeserializeOwned;

use futures::TryStreamExt;
use futures::stream::BoxStream;

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::path::Path;
use crate::storage::batch::get_all_projected;
use crate::storage::{HASH_KEY, RANGE_KEY, Storage};
use crate::stream::scan_pages;

use super::Entry;

/// How one read is made.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadOpts {
    /// Strongly consistent reads.
    pub consistent: bool,
    /// The attributes to read (with what the read path itself needs); empty: all.
    pub projection: Vec<String>,
}

/// The tree's default read: its consistency setting, every attribute.
pub(crate) fn default_read<S: Storage + 'static>(cx: &Ctx<S>) -> ReadOpts {
    ReadOpts {
        consistent: cx.inner.config.consistent_reads,
        projection: Vec::new(),
    }
}

/// A read with `consistent` (default: the tree's setting) of only `fields` (`None`: all),
/// plus the attributes the read path needs: the keys, the link target, the expiry, the
/// fence mark (fenced puts).
pub(crate) fn read_opts<S: Storage + 'static>(
    cx: &Ctx<S>,
    consistent: Option<bool>,
    fields: Option<&[&str]>,
) -> ReadOpts {
    let layout = &cx.inner.layout;
    ReadOpts {
        consistent: consistent.unwrap_or(cx.inner.config.consistent_reads),
        projection: match fields {
            None => Vec::new(),
            Some(fields) => {
                let mut names: Vec<String> = [HASH_KEY, RANGE_KEY, layout.link_attr()]
                    .into_iter()
                    .map(str::to_owned)
                    .chain([layout.ttl_attr(), layout.fence_attr()])
                    .collect();
                for f in fields {
                    if !names.iter().any(|n| n == f) {
                        names.push((*f).to_owned());
                    }
                }
                names
            }
        },
    }
}

/// The object rows of `paths` (one BatchGetItem per 100, unprocessed keys retried),
/// keyed by their `Key` string; absent objects are left out.
pub(crate) async fn objects_of<'p, S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: impl IntoIterator<Item = &'p Path>,
    consistent: bool,
) -> Result<HashMap<String, Item>> {
    let read = ReadOpts {
        consistent,
        projection: Vec::new(),
    };
    objects_with(cx, paths, &read).await
}

/// The rows at the object keys of `paths` as stored (fences included), by hash key.
pub(crate) async fn rows_of<'p, S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: impl IntoIterator<Item = &'p Path>,
    consistent: bool,
) -> Result<HashMap<String, Item>> {
    rows_with(cx, paths, consistent, &[]).await
}

async fn rows_with<'p, S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: impl IntoIterator<Item = &'p Path>,
    consistent: bool,
    projection: &[String],
) -> Result<HashMap<String, Item>> {
    let keys = paths
        .into_iter()
        .map(|p| cx.inner.layout.object_key(p))
        .collect();
    cx.ensure_verified().await?;
    let items = get_all_projected(
        &cx.inner.storage,
        keys,
        consistent,
        projection,
        &cx.inner.config.retry,
    )
    .await?;
    Ok(items
        .into_iter()
        .filter_map(|i| Some((i.get_s(HASH_KEY)?.to_owned(), i)))
        .collect())
}

async fn objects_with<'p, S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: impl IntoIterator<Item = &'p Path>,
    read: &ReadOpts,
) -> Result<HashMap<String, Item>> {
    let mut rows = rows_with(cx, paths, read.consistent, &read.projection).await?;
    // A fence row (fenced puts) is no object.
    rows.retain(|_, i| !cx.inner.layout.is_fence(i));
    Ok(rows)
}

/// The children in `rows` (listing rows under `prefix`) with their objects.
pub(crate) async fn entries_for<S: Storage + 'static, T: DeserializeOwned>(
    cx: &Ctx<S>,
    prefix: &Path,
    rows: Vec<Item>,
) -> Result<Vec<Entry<T>>> {
    let read = default_read(cx);
    entries_with(cx, prefix, rows, &read).await
}

/// As [`entries_for`](entries_for), read as `read` says.
pub(crate) async fn entries_with<S: Storage + 'static, T: DeserializeOwned>(
    cx: &Ctx<S>,
    prefix: &Path,
    rows: Vec<Item>,
    read: &ReadOpts,
) -> Result<Vec<Entry<T>>> {
    objects_of_children(cx, prefix, rows, read)
        .await?
        .into_iter()
        .map(|(path, item)| {
            let name = path.components().last().cloned().unwrap_or_default();
            Ok(Entry {
                name,
                value: item.map(|i| cx.to_value(i)).transpose()?,
            })
        })
        .collect()
}

/// The children of `prefix` named by the listing rows `rows`, each with its object row
/// (through links; `None`: no object), in the order of `rows`: one BatchGetItem per 100
/// names, and one more per round of links to follow.
pub(crate) async fn objects_of_children<S: Storage + 'static>(
    cx: &Ctx<S>,
    prefix: &Path,
    rows: Vec<Item>,
    read: &ReadOpts,
) -> Result<Vec<(Path, Option<Item>)>> {
    let paths = rows
        .iter()
        .filter_map(|i| i.get_s(RANGE_KEY))
        .map(|n| prefix.child(n.to_owned()))
        .collect::<Result<Vec<Path>>>()?;
    let resolved = resolve_many_with(cx, &paths, read).await?;
    Ok(paths.into_iter().zip(resolved).collect())
}

/// [`Tree::get`](crate::Tree::get) at the absolute `path`: checked as an object's path,
/// resolved through a link, decoded.
pub(crate) async fn get_value<S: Storage + 'static, T: DeserializeOwned>(
    cx: &Ctx<S>,
    path: Path,
) -> Result<Option<T>> {
    cx.inner.layout.check_object_path(&path)?;
    match resolve(cx, &path).await? {
        Some(item) => cx.to_value(item).map(Some),
        None => Ok(None),
    }
}

/// Follows links from `path` to an object row (the tree's default read).
pub(crate) async fn resolve<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
) -> Result<Option<Item>> {
    let read = default_read(cx);
    resolve_with(cx, path, &read).await
}

/// Follows links from `path` to an object row; an expired one reads as absent.
pub(crate) async fn resolve_with<S: Storage + 'static>(
    cx: &Ctx<S>,
    path: &Path,
    read: &ReadOpts,
) -> Result<Option<Item>> {
    let mut current = path.clone();
    let mut seen = vec![current.clone()];
    loop {
        let key = cx.inner.layout.object_key(&current);
        let io = cx.io();
        let found = if read.projection.is_empty() {
            io.get_item(&key, read.consistent).await?
        } else {
            io.get_item_projected(&key, read.consistent, &read.projection)
                .await?
        };
        let Some(item) = found else {
            return Ok(None);
        };
        let Some(target) = item.get_s(cx.inner.layout.link_attr()) else {
            // Expired (see `crate::expiry`): as if DynamoDB had deleted it already; a
            // fence (fenced puts) is no object either.
            if cx.inner.layout.is_absent(&item, crate::expiry::now_secs()) {
                return Ok(None);
            }
            // A belief for the next put of it, which then tries an overwrite first (never
            // trusted for correctness: see the consistency docs, "Overwrites").
            cx.inner.known.insert_all(Some(key));
            return Ok(Some(item));
        };
        current = cx.next_hop(path, target, &mut seen)?;
    }
}

/// Resolves many paths with BatchGetItem rounds (one round per link hop).
pub(crate) async fn resolve_many<S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: &[Path],
) -> Result<Vec<Option<Item>>> {
    let read = default_read(cx);
    resolve_many_with(cx, paths, &read).await
}

/// As [`resolve_many`](resolve_many), read as `read` says.
pub(crate) async fn resolve_many_with<S: Storage + 'static>(
    cx: &Ctx<S>,
    paths: &[Path],
    read: &ReadOpts,
) -> Result<Vec<Option<Item>>> {
    let mut out: Vec<Option<Item>> = vec![None; paths.len()];
    let now = crate::expiry::now_secs();
    let mut pending: Vec<(usize, Path, Vec<Path>)> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (i, p.clone(), vec![p.clone()]))
        .collect();
    while !pending.is_empty() {
        let by_hash = objects_with(cx, pending.iter().map(|(_, p, _)| p), read).await?;
        let mut next = Vec::new();
        for (i, p, mut seen) in pending {
            let hash = cx.inner.layout.object_key(&p).hash;
            let Some(item) = by_hash.get(&hash).cloned() else {
                continue;
            };
            match item.get_s(cx.inner.layout.link_attr()) {
                Some(t) => {
                    let target = cx.next_hop(&paths[i], t, &mut seen)?;
                    next.push((i, target, seen));
                }
                None if cx.inner.layout.is_absent(&item, now) => {}
                None => {
                    cx.inner
                        .known
                        .insert_all(Some(cx.inner.layout.object_key(&p)));
                    out[i] = Some(item);
                }
            }
        }
        pending = next;
    }
    Ok(out)
}

/// The link at `path` (absolute): its target, absolute. See [`Tree::read_link`](crate::Tree::read_link).
pub(crate) async fn link_at<S: Storage + 'static>(cx: &Ctx<S>, path: &Path) -> Result<Path> {
    let layout = &cx.inner.layout;
    layout.check_object_path(path)?;
    let item = cx
        .io()
        .get_item(&layout.object_key(path), cx.inner.config.consistent_reads)
        .await?
        // A fence (fenced puts) or an expired row is no object, as for `get`.
        .filter(|i| !layout.is_absent(i, crate::expiry::now_secs()))
        .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("nothing at {path}")))?;
    match item.get_s(layout.link_attr()) {
        Some(t) => cx.link_target(path, t),
        None => Err(Error::new(
            ErrorKind::NotALink,
            format!("the object at {path} is not a link"),
        )),
    }
}

/// The children of `prefix` (absolute, checked listable) with their objects, page by page:
/// one Query plus the reads of [`entries_for`] per page. See
/// [`Tree::list_items`](crate::Tree::list_items).
pub(crate) fn entries_under<S: Storage + 'static, T: DeserializeOwned + Send + 'static>(
    cx: Ctx<S>,
    prefix: Path,
) -> BoxStream<'static, Result<Entry<T>>> {
    let query = cx.listing_query(&prefix);
    Box::pin(
        cx.listing_pages(&prefix, query, None)
            .and_then(move |page| {
                let (cx, prefix) = (cx.clone(), prefix.clone());
                async move { entries_for(&cx, &prefix, page.items).await }
            })
            .map_ok(|entries| futures::stream::iter(entries.into_iter().map(Ok)))
            .try_flatten(),
    )
}

/// Every row of the table in the scope of `cx`, raw, page by page (a Scan). See
/// [`Tree::scan`](crate::Tree::scan).
pub(crate) fn rows_in_scope<S: Storage + 'static>(cx: Ctx<S>) -> BoxStream<'static, Result<Item>> {
    Box::pin(
        scan_pages(cx.io(), None)
            .map_ok(move |p| {
                let rows: Vec<Item> = p.items.into_iter().filter(|i| cx.row_in_scope(i)).collect();
                futures::stream::iter(rows.into_iter().map(Ok))
            })
            .try_flatten(),
    )
}
