//! Pagination: the adaptors from a backend's `query_page`, `scan_page` and
//! `query_index_page` to lazy [`Stream`]s of pages. Every paged read of the runtime goes
//! through one of these.
//!
//! Like the AWS paginators: nothing is sent until the stream is polled, pages follow
//! `LastEvaluatedKey`, the stream stops when the service repeats the same key, and it ends
//! after the first error.

use futures::Stream;

use crate::error::Result;
use crate::item::Item;
use crate::storage::{IndexPage, IndexQuery, Key, Page, Query, Storage};

enum State {
    Start,
    After(Key),
    Done,
}

/// Pages of `query`, lazily, starting after `start` (a resumption cursor) if given.
pub(crate) fn query_pages<H>(
    storage: H,
    query: Query,
    start: Option<Key>,
) -> impl Stream<Item = Result<Page>> + Send + use<H>
where
    H: Storage + Clone,
{
    let initial = match start {
        None => State::Start,
        Some(k) => State::After(k),
    };
    futures::stream::try_unfold(initial, move |state| {
        let query = query.clone();
        let storage = storage.clone();
        async move {
            let start = match state {
                State::Done => return Ok(None),
                State::Start => None,
                State::After(k) => Some(k),
            };
            let page = storage.query_page(&query, start.clone()).await?;
            let next = match &page.last_key {
                None => State::Done,
                Some(k) if Some(k) == start.as_ref() => State::Done,
                // The page ended on the condition's far bound: nothing follows, and DynamoDB
                // refuses that key as a start key.
                Some(k) if !query.accepts_start(k) => State::Done,
                Some(k) => State::After(k.clone()),
            };
            Ok(Some((page, next)))
        }
    })
}

/// Pages of a whole-table scan, lazily.
pub(crate) fn scan_pages<H>(
    storage: H,
    limit: Option<u32>,
) -> impl Stream<Item = Result<Page>> + Send + use<H>
where
    H: Storage + Clone,
{
    futures::stream::try_unfold(State::Start, move |state| {
        let storage = storage.clone();
        async move {
            let start = match state {
                State::Done => return Ok(None),
                State::Start => None,
                State::After(k) => Some(k),
            };
            let page = storage.scan_page(limit, start.clone()).await?;
            let next = match &page.last_key {
                None => State::Done,
                Some(k) if Some(k) == start.as_ref() => State::Done,
                Some(k) => State::After(k.clone()),
            };
            Ok(Some((page, next)))
        }
    })
}

/// Pages of an index query, lazily, starting after the index key `start` if given: as
/// [`query_pages`], following each page's `last` key while the query's range condition
/// accepts it.
pub(crate) fn index_pages<H>(
    storage: H,
    query: IndexQuery,
    start: Option<Item>,
) -> impl Stream<Item = Result<IndexPage>> + Send + use<H>
where
    H: Storage + Clone,
{
    futures::stream::try_unfold(Some(start), move |state| {
        let query = query.clone();
        let storage = storage.clone();
        async move {
            let Some(start) = state else {
                return Ok(None);
            };
            let page = storage.query_index_page(&query, start.clone()).await?;
            let next = match &page.last {
                None => None,
                Some(k) if Some(k) == start.as_ref() => None,
                Some(k) if !query.accepts_start(k) => None,
                Some(k) => Some(Some(k.clone())),
            };
            Ok(Some((page, next)))
        }
    })
}

/// One shard of a [`merged_query_pages`]: its query, the items read and not yet given out,
/// and where its next page starts (`None` once it has no more).
struct Shard {
    query: Query,
    buffered: std::collections::VecDeque<Item>,
    next: Option<Option<Key>>,
}

/// Pages of the partitions `hashes`, each queried as `query` (its hash replaced), merged by
/// their sort key in `query`'s direction, starting after the sort key `after` if given: the
/// listing of a sharded directory as one. A page holds at most `query.limit` items and ends
/// where some partition with more to read stops; its `last_key` is `(query.hash, the last
/// sort key given)`, so a caller resumes with that sort key. A partition is queried again only
/// when its items have all been given out, so the requests are those of the partitions' own
/// paging plus at most one per partition. `hashes` are the shards of a sharded directory, in
/// order: an item of shard `k` whose name belongs in another shard (a row written outside the
/// layout, which `check` reports) is skipped, as the listing of one shard never holds it.
pub(crate) fn merged_query_pages<H>(
    storage: H,
    query: Query,
    hashes: Vec<String>,
    after: Option<String>,
) -> impl Stream<Item = Result<Page>> + Send + use<H>
where
    H: Storage + Clone,
{
    let forward = query.forward;
    let limit = query.limit.map_or(usize::MAX, |l| l as usize);
    let base = query.hash.clone();
    let shards: Vec<Shard> = hashes
        .into_iter()
        .map(|hash| {
            let mut q = query.clone();
            q.hash = hash;
            let start = after.clone().map(|a| Key::new(q.hash.clone(), a));
            // A start the condition refuses has nothing after it.
            let next = match start {
                Some(s) if !q.accepts_start(&s) => None,
                s => Some(s),
            };
            Shard {
                query: q,
                buffered: Default::default(),
                next,
            }
        })
        .collect();
    let name = |i: &Item| {
        i.get_s(crate::storage::RANGE_KEY)
            .unwrap_or_default()
            .to_owned()
    };
    // Whether `a` comes before (or with) `b` in the merge's direction.
    let before = move |a: &str, b: &str| if forward { a <= b } else { a >= b };
    futures::stream::try_unfold(shards, move |mut shards| {
        let storage = storage.clone();
        let base = base.clone();
        async move {
            loop {
                // Read a page of every partition with more to read and nothing buffered.
                let reads = shards
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.buffered.is_empty())
                    .filter_map(|(i, s)| s.next.clone().map(|start| (i, start)))
                    .map(|(i, start)| {
                        let (storage, query) = (storage.clone(), shards[i].query.clone());
                        async move {
                            let page = storage.query_page(&query, start.clone()).await?;
                            Ok::<_, crate::error::Error>((i, start, page))
                        }
                    });
                let n = shards.len() as u32;
                for (i, start, page) in futures::future::try_join_all(reads).await? {
                    let shard = &mut shards[i];
                    shard.next = match page.last_key {
                        None => None,
                        Some(k) if Some(&k) == start.as_ref() => None,
                        Some(k) if !shard.query.accepts_start(&k) => None,
                        Some(k) => Some(Some(k)),
                    };
                    shard.buffered.extend(
                        page.items
                            .into_iter()
                            .filter(|item| crate::path::part_of(&name(item), n) == i as u32),
                    );
                }
                // Every item up to the bound is known: the nearest point where a partition
                // with more to read stopped.
                let bound = shards
                    .iter()
                    .filter_map(|s| s.next.as_ref().and_then(|k| k.as_ref()))
                    .map(|k| k.range.clone())
                    .reduce(|a, b| if before(&a, &b) { a } else { b });
                let mut items = Vec::new();
                while items.len() < limit {
                    let best = shards
                        .iter()
                        .enumerate()
                        .filter_map(|(i, s)| s.buffered.front().map(|item| (i, name(item))))
                        .filter(|(_, n)| bound.as_ref().is_none_or(|b| before(n, b)))
                        .reduce(|a, b| if before(&a.1, &b.1) { a } else { b });
                    let Some((i, _)) = best else { break };
                    items.extend(shards[i].buffered.pop_front());
                }
                let more = shards
                    .iter()
                    .any(|s| !s.buffered.is_empty() || s.next.is_some());
                if items.is_empty() {
                    if more {
                        // Partitions that returned empty pages: read on.
                        continue;
                    }
                    return Ok(None);
                }
                let last_key =
                    more.then(|| Key::new(base.clone(), name(items.last().expect("not empty"))));
                let page = Page { items, last_key };
                return Ok(Some((page, shards)));
            }
        }
    })
}
