//! The link index ([`TreeBuilder::link_index`](crate::TreeBuilder::link_index)): every link
//! row goes out in one transaction with its entry (the layout is in `layout::links`), and a
//! move finds the links into its source from the entries of its targets. The invariant and
//! the argument are in `links.md` beside this file.

use futures::TryStreamExt;

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::path::Path;
use crate::storage::{
    Condition, Request, Response, Storage, TRANSACT_MAX, TransactAction, WriteRequest,
};
use crate::stream::query_pages;

use super::Ctx;
use super::read;

/// How [`Io`](super::context::Io) sends a request under a link index.
pub(crate) enum Plan {
    /// As it is (no link row in it, or its entries added to its transaction).
    Send(Request),
    /// A PutItem of a link row, as a transaction with its entry: the put first.
    Put(Vec<TransactAction>),
    /// A BatchWriteItem: its link rows, each a transaction with its entry, then the rest.
    Batch {
        /// One transaction per link row.
        links: Vec<Vec<TransactAction>>,
        /// The other requests of the batch.
        rest: Vec<WriteRequest>,
    },
}

/// `request` with the entry of every link row it puts, in the same transaction (invariant
/// 1 of `links.md`). A transaction that would pass DynamoDB's 100 actions with them is
/// refused before anything is sent: every caller that packs transactions leaves room
/// ([`extra_actions`]).
pub(crate) fn with_entries<S>(cx: &Ctx<S>, request: Request, depth: usize) -> Result<Plan> {
    let layout = &cx.inner.layout;
    match request {
        Request::PutItem { item, condition } => match layout.link_entry_of(&item, depth) {
            Some(entry) => Ok(Plan::Put(vec![
                TransactAction::Put { item, condition },
                TransactAction::Put {
                    item: entry?,
                    condition: Condition::Always,
                },
            ])),
            None => Ok(Plan::Send(Request::PutItem { item, condition })),
        },
        Request::TransactWrite { actions, token } => Ok(Plan::Send(Request::TransactWrite {
            actions: add_entries(cx, actions, depth)?,
            token,
        })),
        Request::BatchWrite { requests } => {
            let mut links = Vec::new();
            let mut rest = Vec::new();
            for r in requests {
                match r {
                    WriteRequest::Put(item) => match layout.link_entry_of(&item, depth) {
                        Some(entry) => links.push(vec![
                            TransactAction::Put {
                                item,
                                condition: Condition::Always,
                            },
                            TransactAction::Put {
                                item: entry?,
                                condition: Condition::Always,
                            },
                        ]),
                        None => rest.push(WriteRequest::Put(item)),
                    },
                    other => rest.push(other),
                }
            }
            if links.is_empty() {
                return Ok(Plan::Send(Request::BatchWrite { requests: rest }));
            }
            Ok(Plan::Batch { links, rest })
        }
        other => Ok(Plan::Send(other)),
    }
}

/// The transaction `actions` with the entry of every link row it puts (but those already
/// in it), refused if they would pass DynamoDB's 100 actions.
pub(crate) fn add_entries<S>(
    cx: &Ctx<S>,
    mut actions: Vec<TransactAction>,
    depth: usize,
) -> Result<Vec<TransactAction>> {
    let entries = entries_of(cx, &actions, depth)?;
    if actions.len() + entries.len() > TRANSACT_MAX {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!(
                "a transaction of {} actions has no room for the {} link index entries of its link rows",
                actions.len(),
                entries.len()
            ),
        ));
    }
    actions.extend(entries);
    Ok(actions)
}

/// The entries of the link rows `actions` put, but those already among them.
fn entries_of<S>(
    cx: &Ctx<S>,
    actions: &[TransactAction],
    depth: usize,
) -> Result<Vec<TransactAction>> {
    let layout = &cx.inner.layout;
    let mut out = Vec::new();
    for a in actions {
        let TransactAction::Put { item, .. } = a else {
            continue;
        };
        let Some(entry) = layout.link_entry_of(item, depth) else {
            continue;
        };
        let entry = entry?;
        let key = crate::storage::Key::from_item(&entry);
        if actions.iter().any(|b| b.key() == key) {
            continue;
        }
        out.push(TransactAction::Put {
            item: entry,
            condition: Condition::Always,
        });
    }
    Ok(out)
}

/// How many actions the link index adds to a transaction putting `rows`: what a caller that
/// packs transactions leaves room for (also while a tree that does not verify its table has
/// not learned yet whether the table keeps one).
pub(crate) fn extra_actions<'a, S>(cx: &Ctx<S>, rows: impl IntoIterator<Item = &'a Item>) -> usize {
    let unknown = !cx.inner.config.verify_table && cx.inner.learned_link_index.get().is_none();
    if cx.link_depth().is_none() && !unknown {
        return 0;
    }
    rows.into_iter()
        .filter(|r| cx.inner.layout.link_of_row(r).is_some())
        .count()
}

/// Whether `request` puts a link row.
pub(crate) fn writes_link_rows<S>(cx: &Ctx<S>, request: &Request) -> bool {
    let layout = &cx.inner.layout;
    match request {
        Request::PutItem { item, .. } => layout.link_of_row(item).is_some(),
        Request::TransactWrite { actions, .. } => actions.iter().any(
            |a| matches!(a, TransactAction::Put { item, .. } if layout.link_of_row(item).is_some()),
        ),
        Request::BatchWrite { requests } => requests
            .iter()
            .any(|r| matches!(r, WriteRequest::Put(item) if layout.link_of_row(item).is_some())),
        _ => false,
    }
}

/// The depth of the table's link index, for a write of a link row: the tree's, or the
/// table's as learned when the tree verified it. A tree that does not verify its table
/// ([`TreeBuilder::verify_table`](crate::TreeBuilder::verify_table)) reads the table's
/// settings row once, before its first write of a link row, so that no tree writes a link
/// without its entry on a table that keeps the index.
pub(crate) async fn depth<S: Storage + 'static>(cx: &Ctx<S>) -> Result<Option<usize>> {
    if let Some(d) = cx.link_depth() {
        return Ok(Some(d));
    }
    let learned = cx
        .inner
        .learned_link_index
        .get_or_try_init(|| async {
            let settings = cx
                .inner
                .config
                .retry
                .retry_transient(|| {
                    crate::storage::TableSettings::read(
                        &cx.inner.storage,
                        cx.inner.layout.reserved(),
                    )
                })
                .await?;
            Ok::<_, Error>(settings.and_then(|s| s.link_index))
        })
        .await?;
    Ok(*learned)
}

/// [`depth`] for a write of `row`: `None` unless it is a link row.
pub(crate) async fn depth_for<S: Storage + 'static>(
    cx: &Ctx<S>,
    row: &Item,
) -> Result<Option<usize>> {
    if cx.inner.layout.link_of_row(row).is_none() {
        return Ok(None);
    }
    depth(cx).await
}

/// `tx` with the entries of the link rows it puts (see [`add_entries`]), for a transaction
/// sent straight to the table (the move protocol's own loop).
pub(crate) async fn with_entries_in<S: Storage + 'static>(
    cx: &Ctx<S>,
    tx: Vec<TransactAction>,
) -> Result<Vec<TransactAction>> {
    let any = tx.iter().any(|a| {
        matches!(a, TransactAction::Put { item, .. } if cx.inner.layout.link_of_row(item).is_some())
    });
    match any {
        true => match depth(cx).await? {
            Some(d) => add_entries(cx, tx, d),
            None => Ok(tx),
        },
        false => Ok(tx),
    }
}

/// Sends a link row's put and its entry as one transaction, answering as the PutItem would:
/// resent while it is cancelled only for a conflict or throttled (nothing was applied);
/// [`ErrorKind::ConditionFailed`] when the put's condition failed.
pub(crate) async fn put_as_transaction<S: Storage + 'static>(
    cx: &Ctx<S>,
    actions: Vec<TransactAction>,
) -> Result<Response> {
    let raw = &cx.inner.storage;
    let sent = cx
        .inner
        .config
        .retry
        .retry_if(
            |e| {
                matches!(e.kind(), ErrorKind::Throttled | ErrorKind::Conflict)
                    || e.is_throttling()
                    || super::context::conflict_only(e)
            },
            || {
                raw.send(Request::TransactWrite {
                    actions: actions.clone(),
                    token: None,
                })
            },
        )
        .await;
    match sent {
        Ok(_) => Ok(Response::Done),
        Err(e)
            if e.kind() == ErrorKind::TransactionCanceled
                && e.cancellation_reasons()
                    .first()
                    .is_some_and(crate::error::CancellationReason::is_condition_failed) =>
        {
            Err(Error::new(
                ErrorKind::ConditionFailed,
                "the link row's condition failed",
            ))
        }
        Err(e) => Err(e),
    }
}

/// The links whose target is `from` or under it, from the link index: `None` when the tree
/// keeps none, or when `from` is shallower than its depth (the caller scans). Each entry
/// found is checked against its link row (one consistent BatchGetItem per 100); an entry
/// whose link row no longer points at its target is deleted, in a transaction conditional
/// on that (invariant 2 of `links.md`).
pub(crate) async fn into<S: Storage + 'static>(
    cx: &Ctx<S>,
    from: &Path,
) -> Result<Option<Vec<(Path, Path)>>> {
    let Some(depth) = cx.link_depth() else {
        return Ok(None);
    };
    let layout = &cx.inner.layout;
    let Some(query) = layout.link_entries_query(from, depth) else {
        return Ok(None);
    };
    let mut found: Vec<(Path, Path)> = Vec::new();
    let mut pages = std::pin::pin!(query_pages(cx.io(), query, None));
    while let Some(page) = pages.try_next().await? {
        found.extend(page.items.iter().filter_map(|e| {
            let key = crate::storage::Key::from_item(e)?;
            layout
                .decode_link_entry(&key)
                .filter(|(_, t)| t.starts_with(from))
        }));
    }
    let rows = read::rows_of(cx, found.iter().map(|(l, _)| l), true).await?;
    let mut out = Vec::new();
    for (link, target) in found {
        let row = rows.get(&layout.object_key(&link).hash);
        if row.and_then(|r| layout.link_of_row(r)).as_ref() == Some(&(link.clone(), target.clone()))
        {
            out.push((link, target));
        } else {
            drop_stale(cx, &link, &target, depth).await?;
        }
    }
    out.sort();
    out.dedup();
    Ok(Some(out))
}

/// Deletes the entry of the link at `link` to `target`, in one transaction with a check that
/// the row at `link` is no link to `target` (so an entry whose link row lands in the same
/// transaction as it is never deleted). Lost to a concurrent write, it is left for a later
/// look. Whether it was deleted (or found gone).
pub(crate) async fn drop_stale<S: Storage + 'static>(
    cx: &Ctx<S>,
    link: &Path,
    target: &Path,
    depth: usize,
) -> Result<bool> {
    let layout = &cx.inner.layout;
    let Ok(entry) = layout.link_entry_key(link, target, depth) else {
        return Ok(false);
    };
    let actions = vec![
        TransactAction::ConditionCheck {
            key: layout.object_key(link),
            condition: Condition::Not(Box::new(layout.links_to(target))),
        },
        TransactAction::Delete {
            key: entry,
            condition: Condition::Always,
        },
    ];
    match cx.io().transact_write(actions).await {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::TransactionCanceled => Ok(false),
        Err(e) => Err(e),
    }
}
