//! The table a tree runs on: creating it with the indexes and settings the tree needs
//! ([`Tree::create_table`]), and checking, before the first request, that the tree can use it
//! ([`Tree::verify`]).

use std::time::Duration;

use tracing::Instrument;

use crate::denorm::Propagation;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{HASH_KEY, RANGE_KEY};
use crate::storage::{IndexSettings, Storage, TableSettings, TableStatus};

use super::{Ctx, PATH_INDEX, ops};

/// [`Tree::create_table`]: creates the table (or adds the indexes it lacks), waits until it
/// is active, turns on time to live and the stream as configured, records the settings, and
/// checks the table as [`verify`] does.
pub(crate) async fn create<S: Storage + 'static>(cx: &Ctx<S>) -> Result<()> {
    let span = tracing::debug_span!("dynatree.create_table");
    async {
        let specs: Vec<crate::storage::IndexSpec> = cx
            .inner
            .config
            .indexes
            .iter()
            .map(|ix| ix.spec(cx.inner.layout.reserved()))
            .chain(ops::path_index_spec(cx))
            .collect();
        // `Ok(false)` when it exists already: its schema and indexes are checked below.
        cx.inner.storage
            .create_table(cx.inner.config.billing, &specs)
            .await?;
        let deadline = tokio::time::Instant::now() + cx.inner.config.table_wait;
        let mut retry = 0;
        loop {
            let description = cx.io().describe_table().await?;
            // An existing table lacking some of our indexes: add one, once the table and
            // every index it has are active (DynamoDB builds one index at a time per
            // table and refuses a second creation meanwhile), then wait again.
            if let Some(d) = &description
                && d.status == TableStatus::Active
                && d.has_tree_schema()
                && d.indexes.iter().all(|(_, st)| *st == TableStatus::Active)
                && let Some(missing) = specs
                    .iter()
                    .find(|s| !d.indexes.iter().any(|(n, _)| *n == s.name))
            {
                match cx.inner.storage.add_index(cx.inner.config.billing, missing).await {
                    // Another index is still being built: wait below and try again.
                    Err(e) if matches!(e.kind(), ErrorKind::Throttled | ErrorKind::LimitExceeded) => {}
                    Err(e) => return Err(e),
                    Ok(()) => {}
                }
            }
            let indexes_ready = |d: &crate::storage::TableDescription| {
                specs.iter().all(|s| {
                    d.indexes
                        .iter()
                        .any(|(n, st)| *n == s.name && *st == TableStatus::Active)
                })
            };
            match description {
                Some(d) if !d.has_tree_schema() => {
                    return Err(Error::new(
                        ErrorKind::TableMismatch,
                        format!(
                            "expected hash key `{HASH_KEY}` (S) and range key `{RANGE_KEY}` (S), found {:?} and {:?}",
                            d.hash_key, d.range_key
                        ),
                    ));
                }
                Some(d) if d.status == TableStatus::Active && indexes_ready(&d) => {
                    if cx.inner.config.time_to_live {
                        cx.io().enable_ttl(&cx.inner.layout.ttl_attr()).await?;
                    }
                    if cx.inner.config.propagation == Propagation::Stream {
                        cx.io().enable_stream().await?;
                    }
                    let settings = TableSettings::record(
                        &cx.inner.storage,
                        &settings(cx),
                        &cx.inner.config.retry,
                    )
                    .await?;
                    check_table(cx, &d, Some(&settings))?;
                    // Checked: the first request need not describe the table again.
                    let _ = cx.inner.verified.set(());
                    return Ok(());
                }
                // Creating, or not visible yet: wait.
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Backend,
                    "table did not become active in time",
                ));
            }
            crate::retry::sleep_for(Duration::from_millis(100 * (1 << retry.min(4)))).await;
            retry += 1;
        }
    }
    .instrument(span)
    .await
}

/// [`Tree::verify`]: one DescribeTable, and the settings row where the path index needs it.
pub(crate) async fn verify<S: Storage + 'static>(cx: &Ctx<S>) -> Result<()> {
    let span = tracing::debug_span!("dynatree.verify");
    async {
        let retry = &cx.inner.config.retry;
        let description = retry
            .retry_transient(|| cx.inner.storage.describe_table())
            .await?
            .ok_or_else(|| Error::new(ErrorKind::TableNotFound, "the table does not exist"))?;
        // The settings say the path index's depth (needed to compare a tree's depth, and
        // for a tree without the index, to say which depth to build it with) and the link
        // index's, which every tree on the table keeps: always read, and a tree that cannot
        // read them does not start (it would write links without their entries).
        let settings = if description.has_tree_schema() {
            retry
                .retry_transient(|| {
                    TableSettings::read(&cx.inner.storage, cx.inner.layout.reserved())
                })
                .await?
        } else {
            None
        };
        check_table(cx, &description, settings.as_ref())?;
        let _ = cx.inner.verified.set(());
        Ok(())
    }
    .instrument(span)
    .await
}

/// What [`create_table`](Tree::create_table) records about this tree.
fn settings<S: Storage + 'static>(cx: &Ctx<S>) -> TableSettings {
    let mut s = TableSettings::new(cx.inner.layout.reserved());
    s.path_index = cx.inner.config.path_index;
    s.link_index = cx.inner.config.link_index;
    s.sharded = sharded_map(cx.inner.layout.sharded_dirs());
    s.indexes = cx
        .inner
        .config
        .indexes
        .iter()
        .map(|ix| {
            let templates = cx
                .inner
                .config
                .index_templates
                .iter()
                .filter(|(name, _)| *name == ix.name())
                .map(|(_, t)| *t);
            IndexSettings::new(ix.name(), ix.has_range(), templates)
        })
        .collect();
    s
}

/// Why this tree cannot use a table described by `d` (with `settings`, when read); a tree
/// built without a link index adopts the table's.
fn check_table<S: Storage + 'static>(
    cx: &Ctx<S>,
    d: &crate::storage::TableDescription,
    settings: Option<&TableSettings>,
) -> Result<()> {
    let mismatch = |m: String| Err(Error::new(ErrorKind::TableMismatch, m));
    if !d.has_tree_schema() {
        let range = match &d.range_key {
            Some((name, ty)) => format!("range key `{name}` ({ty})"),
            None => "no range key".to_owned(),
        };
        return mismatch(format!(
            "not a dynatree table: expected hash key `{HASH_KEY}` (S) and range key `{RANGE_KEY}` (S), found hash key `{}` ({}) and {range}",
            d.hash_key.0, d.hash_key.1
        ));
    }
    let has = |name: &str| d.indexes.iter().any(|(n, _)| n == name);
    match (cx.inner.config.path_index, has(PATH_INDEX)) {
        (None, true) => {
            let depth = settings
                .and_then(|s| s.path_index)
                .map_or_else(|| "depth".to_owned(), |d| d.to_string());
            return mismatch(format!(
                "the table has the path index `{PATH_INDEX}`, which this tree's writes would skip: build the tree with `path_index({depth})`"
            ));
        }
        (Some(_), false) => {
            return mismatch(format!(
                "this tree keeps a path index but the table has no index `{PATH_INDEX}`: run `create_table` to add it"
            ));
        }
        (Some(mine), true) => {
            if let Some(theirs) = settings.and_then(|s| s.path_index)
                && theirs != mine
            {
                return mismatch(format!(
                    "the table's path index has depth {theirs}, this tree's has depth {mine}: build the tree with `path_index({theirs})`"
                ));
            }
        }
        (None, false) => {}
    }
    match (
        cx.inner.config.link_index,
        settings.and_then(|s| s.link_index),
    ) {
        (Some(mine), Some(theirs)) if mine != theirs => {
            return mismatch(format!(
                "the table's link index has depth {theirs}, this tree's has depth {mine}: build the tree with `link_index({theirs})`"
            ));
        }
        (Some(_), None) => {
            return mismatch(
                "this tree keeps a link index but the table's settings record none: run `create_table` to record it (then `repair` writes the entries of the links already there)".to_owned(),
            );
        }
        (None, theirs) => {
            let _ = cx.inner.learned_link_index.set(theirs);
        }
        _ => {}
    }
    check_sharding(cx, settings)?;
    if let Some(ix) = cx.inner.config.indexes.iter().find(|ix| !has(ix.name())) {
        return mismatch(format!(
            "the table has no secondary index `{}`, which this tree's types declare: run `create_table` to add it",
            ix.name()
        ));
    }
    Ok(())
}

/// The sharded directories `dirs` as the table's settings record them.
fn sharded_map(dirs: &[crate::layout::ShardedDir]) -> std::collections::BTreeMap<String, u32> {
    dirs.iter()
        .map(|d| (d.template().to_owned(), d.shards()))
        .collect()
}

/// Refuses a tree whose sharded directories differ from the table's. Unlike the link index,
/// a tree cannot adopt the table's: every key it computes, from its first one, depends on
/// them, so they are part of the tree's schema, set when it is built.
fn check_sharding<S: Storage + 'static>(
    cx: &Ctx<S>,
    settings: Option<&TableSettings>,
) -> Result<()> {
    let layout = &cx.inner.layout;
    let empty = std::collections::BTreeMap::new();
    let theirs = settings.map_or(&empty, |s| &s.sharded);
    let mine = sharded_map(layout.sharded_dirs());
    if mine == *theirs {
        return Ok(());
    }
    let show = |m: &std::collections::BTreeMap<String, u32>| {
        if m.is_empty() {
            "none".to_owned()
        } else {
            m.iter()
                .map(|(t, n)| format!("{t:?} in {n} shards"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    Err(Error::new(
        ErrorKind::TableMismatch,
        format!(
            "the table's sharded directories are {}, this tree's are {}: build the tree with the table's (or run `create_table` to record new ones; `check` then reports the children listed outside their shard)",
            show(theirs),
            show(&mine)
        ),
    ))
}
