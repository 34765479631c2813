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
