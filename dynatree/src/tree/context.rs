//! The context every protocol runs over ([`Ctx`]): the table behind the one retry layer
//! ([`Io`]), the layout, the configuration, the known-rows cache, the scope and the progress
//! observer; and the services every protocol uses (checked rows, listing queries, link hops).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, TryFutureExt, TryStreamExt};
use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, ErrorKind, Result};
use crate::item::Item;
use crate::layout::{Layout, RANGE_KEY};
use crate::path::Path;
use crate::storage::{Key, Query, Request, Response, Storage, TransactAction};
use crate::stream::query_pages;

use super::{Config, OpProgress, Operation, Phase, Tree, denorm, links, ops};

/// The context every protocol runs over: the storage (each request behind the one retry
/// layer, [`Ctx::io`]), the layout, the configuration, the known-rows cache, the scope's
/// root and the progress observer. A [`Tree`] is this and the way its caller names paths;
/// the protocols (the modules beside this one, `check`, `transaction`, ...) are functions
/// over a `&Ctx`, so which protocol calls which shows in their imports.
pub(crate) struct Ctx<S> {
    pub(crate) inner: Arc<Inner<S>>,
    /// The absolute root of a scoped tree ([`Tree::scope`]); `None` for the whole table.
    pub(crate) root: Option<Arc<Path>>,
    /// Told how far subtree operations run through this handle have come
    /// ([`Tree::on_progress`]).
    pub(crate) observer: Option<Observer>,
    /// The intents of the operations this one runs inside (a re-parenting's child moves),
    /// each with its owner's token: every fenced write of an operation run through this
    /// context also checks that they are still owned so, so that a caller whose enclosing
    /// operation was taken over writes nothing more (see `tree/moves.md`, "Re-parenting").
    pub(crate) enclosing: Arc<Vec<(Key, String)>>,
}

impl<S> Clone for Ctx<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            root: self.root.clone(),
            observer: self.observer.clone(),
            enclosing: Arc::clone(&self.enclosing),
        }
    }
}

impl<S> Ctx<S> {
    /// The tree over this context taking and returning absolute paths, for a protocol that
    /// runs a public operation as a step of its own (a re-parenting's moves).
    pub(crate) fn tree(&self) -> Tree<S> {
        Tree {
            cx: self.clone(),
            relative: false,
        }
    }

    /// This context, scoped to the absolute `root` (see [`Tree::scope`]).
    pub(crate) fn scoped(&self, root: Path) -> Ctx<S> {
        Ctx {
            root: Some(Arc::new(root)),
            ..self.clone()
        }
    }

    /// This context, inside the operation whose intent is at `intent` and owned by `token`:
    /// what runs the operations it starts (see [`enclosing`](Self::enclosing)).
    pub(crate) fn inside(&self, intent: Key, token: String) -> Ctx<S> {
        let mut enclosing = (*self.enclosing).clone();
        enclosing.push((intent, token));
        Ctx {
            enclosing: Arc::new(enclosing),
            ..self.clone()
        }
    }
}

/// A callback of [`Tree::on_progress`].
type Observer = Arc<dyn Fn(&OpProgress) + Send + Sync>;

#[derive(Debug)]
pub(crate) struct Inner<S> {
    pub(crate) storage: S,
    pub(crate) layout: Layout,
    pub(crate) config: Config,
    pub(crate) known: KnownRows,
    /// The target types of denormalized fields this tree propagates to.
    pub(crate) targets: denorm::Targets,
    /// Set once the table has been checked ([`Tree::verify`]): before the first request, or
    /// by [`Tree::create_table`].
    pub(crate) verified: tokio::sync::OnceCell<()>,
    /// The depth of the link index the table's settings record (`None`: none), learned when
    /// the table was verified, or, for a tree that does not verify it, before its first write
    /// of a link row (for a tree built without [`Config::link_index`]).
    pub(crate) learned_link_index: tokio::sync::OnceCell<Option<usize>>,
}

/// The tree's backend as its operations see it: an owned handle (streams keep it) that sends
/// every single request under the tree's [`RetryPolicy`], resending it while DynamoDB throttles
/// it or refuses it for a transaction in flight on its item (`TransactionConflictException`:
/// nothing was applied). A transaction cancelled for a conflict is not resent here: its caller
/// looks at the rows again. That is the only retry loop around a request (the SDK's own retries are off, see
/// [`DynamoDbTable`](crate::DynamoDbTable)); batch requests are passed through because their
/// callers ([`get_all`], [`write_all`](crate::storage::write_all)) run the same budget over
/// throttling and unprocessed items together, and the move protocol's transaction loop runs it
/// itself.
pub(crate) struct Io<S>(Ctx<S>);

impl<S> Clone for Io<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S: Storage + 'static> Storage for Io<S> {
    async fn send(&self, request: Request) -> Result<Response> {
        let raw = &self.0.inner.storage;
        let policy = &self.0.inner.config.retry;
        // Requests on the table itself go out before it is verified (verifying sends them).
        let on_items = !matches!(
            request,
            Request::CreateTable { .. }
                | Request::AddIndex { .. }
                | Request::DescribeTable
                | Request::EnableTtl { .. }
                | Request::TtlAttribute
                | Request::EnableStream
                | Request::StreamShards
                | Request::StreamRecords { .. }
        );
        if on_items {
            self.0.ensure_verified().await?;
        }
        // Under a link index, every link row goes out with its entry (see `links`).
        // A tree that knows the table keeps no link index (the default) looks no further.
        let known_none =
            self.0.link_depth().is_none() && self.0.inner.learned_link_index.get().is_some();
        let depth = if on_items && !known_none && links::writes_link_rows(&self.0, &request) {
            links::depth(&self.0).await?
        } else {
            None
        };
        let request = match depth {
            Some(depth) => match links::with_entries(&self.0, request, depth)? {
                links::Plan::Send(request) => request,
                links::Plan::Put(tx) => return links::put_as_transaction(&self.0, tx).await,
                links::Plan::Batch { links, rest } => {
                    for tx in links {
                        links::put_as_transaction(&self.0, tx).await?;
                    }
                    if rest.is_empty() {
                        return Ok(Response::Unprocessed(Vec::new()));
                    }
                    Request::BatchWrite { requests: rest }
                }
            },
            _ => request,
        };
        match request {
            // Creating a table or an index is not resent: its caller waits for it and looks.
            // A batch's caller runs the budget over throttling and unprocessed items together.
            Request::CreateTable { .. }
            | Request::AddIndex { .. }
            | Request::BatchGet { .. }
            | Request::BatchWrite { .. } => raw.send(request).await,
            // A read: a cancellation for a conflict or throttling is as safe to resend as a
            // throttled request, and so is a transient failure.
            Request::TransactGet { .. } => {
                policy
                    .retry_if(
                        |e| {
                            matches!(e.kind(), ErrorKind::Throttled | ErrorKind::Conflict)
                                || e.is_transient()
                                || (e.kind() == ErrorKind::TransactionCanceled && e.is_retryable())
                        },
                        || raw.send(request.clone()),
                    )
                    .await
            }
            // A read that failed transiently is resent; a write is not, as it may have been
            // applied (its caller's next call finds out).
            _ if request.is_read() => policy.retry_read(|| raw.send(request.clone())).await,
            _ => policy.retry_transient(|| raw.send(request.clone())).await,
        }
    }
}

impl<S> Ctx<S> {
    /// The depth of the table's link index, if it keeps one: this tree's setting, or the
    /// table's as learned when the table was verified.
    pub(crate) fn link_depth(&self) -> Option<usize> {
        self.inner
            .config
            .link_index
            .or_else(|| self.inner.learned_link_index.get().copied().flatten())
    }

    /// The denormalized targets this tree knows (the stream processor reads them).
    pub(crate) fn denorm_targets(&self) -> &denorm::Targets {
        &self.inner.targets
    }

    /// The backend, each request under the retry policy (see [`Io`]); owned, so streams
    /// can keep it.
    pub(crate) fn io(&self) -> Io<S> {
        Io(self.clone())
    }

    /// Runs `op` as one user call: every retry loop inside draws from one budget (see
    /// `retry::call`). What each public operation runs its body in.
    pub(crate) fn call<F: std::future::Future>(
        &self,
        op: F,
    ) -> impl std::future::Future<Output = F::Output> + use<F, S> {
        crate::retry::call(self.inner.config.retry, op)
    }

    /// Tells the observer, if any, how far `op` has come in `phase`: a step of progress,
    /// which fills the call's retry budget up again (see `retry::progressed`).
    pub(crate) fn tell(&self, op: Operation, phase: Phase, done: usize, total: Option<usize>) {
        crate::retry::progressed();
        if let Some(f) = &self.observer {
            f(&OpProgress {
                op,
                phase,
                done: done as u64,
                total: total.map(|t| t as u64),
            });
        }
    }
}

impl<S: Storage + 'static> Ctx<S> {
    /// [`verify`](Tree::verify), unless it has passed already or is turned off.
    pub(crate) async fn ensure_verified(&self) -> Result<()> {
        if !self.inner.config.verify_table || self.inner.verified.initialized() {
            return Ok(());
        }
        super::table::verify(self).await
    }

    /// Sends the transaction `tx`, again while it is cancelled only for a conflict with
    /// another transaction in flight on its items (no condition failed, so nothing was
    /// applied and each condition is evaluated afresh), under the retry policy.
    pub(crate) async fn transact_resending_conflicts(&self, tx: Vec<TransactAction>) -> Result<()> {
        let io = self.io();
        self.inner
            .config
            .retry
            .retry_if(conflict_only, || io.transact_write(tx.clone()))
            .await
    }

    /// The listing keys of every prefix of `path`, shortest first.
    pub(crate) fn prefix_keys(&self, path: &Path) -> Vec<Key> {
        (1..=path.len())
            .map(|i| self.inner.layout.listing_key(&path.prefix(i)))
            .collect()
    }

    /// The listing rows of every prefix of `path` (consistent reads, one BatchGetItem per
    /// 100 keys), by position: `None` where a row is missing.
    pub(crate) async fn prefix_rows(&self, keys: &[Key]) -> Result<Vec<Option<Item>>> {
        self.ensure_verified().await?;
        let found = crate::storage::batch::get_all(
            &self.inner.storage,
            keys.to_vec(),
            true,
            &self.inner.config.retry,
        )
        .await?;
        let mut rows: Vec<Option<Item>> = vec![None; keys.len()];
        for item in found {
            if let Some(i) = Key::from_item(&item).and_then(|k| keys.iter().position(|x| *x == k)) {
                rows[i] = Some(item);
            }
        }
        Ok(rows)
    }

    /// The checked object row for `value` at `path`.
    pub(crate) fn object_row_for<T: Serialize + ?Sized>(
        &self,
        path: &Path,
        value: &T,
    ) -> Result<Item> {
        self.inner.layout.check_object_path(path)?;
        let attrs = Item::from_serialize(value)?;
        self.inner.layout.check_user_item(&attrs)?;
        let mut row = self.inner.layout.object_row(path, attrs)?;
        ops::add_path_index(self, path, &mut row)?;
        Ok(row)
    }

    /// The checked link row at `path` pointing at `target` (path-index attributes included).
    pub(crate) fn link_row_for(&self, path: &Path, target: &Path) -> Result<Item> {
        self.inner.layout.check_object_path(target)?;
        let mut row = self.inner.layout.link_row(path, target)?;
        ops::add_path_index(self, path, &mut row)?;
        if let Some(depth) = self.link_depth() {
            // Its entry must fit DynamoDB's key limits too.
            self.inner.layout.link_entry_key(path, target, depth)?;
        }
        Ok(row)
    }

    /// The names under `dir`, unchecked; strongly consistent if asked, else with the tree's
    /// read consistency. Asked for consistent names, it is a protocol's step that decides on
    /// `dir`'s children after marking or locking `dir`'s listing row: a sharded directory's
    /// guards are dropped first (see [`drop_guards`](Self::drop_guards)).
    pub(crate) fn list_names(
        &self,
        dir: &Path,
        consistent: bool,
    ) -> impl Stream<Item = Result<String>> + Send + use<S> {
        let query = self.listing_query(dir);
        let protocol = consistent;
        let consistent = consistent || query.consistent;
        let (cx, dir) = (self.clone(), dir.clone());
        async move {
            if protocol {
                cx.drop_guards(&dir).await?;
            }
            Ok::<_, Error>(cx.listing_pages(&dir, query.consistent(consistent), None))
        }
        .try_flatten_stream()
        .map_ok(|page| {
            futures::stream::iter(
                page.items
                    .into_iter()
                    .filter_map(|i| i.get_s(RANGE_KEY).map(str::to_owned))
                    .map(Ok),
            )
        })
        .try_flatten()
    }

    /// Deletes the shard guards of `dir`, if it is a sharded directory, before a protocol that
    /// marked or locked `dir`'s listing row reads its children: from then on a new child of
    /// `dir` checks that row, which refuses it, so the read that follows sees every child
    /// (see "Sharded directories" in the consistency docs).
    pub(crate) async fn drop_guards(&self, dir: &Path) -> Result<()> {
        let layout = &self.inner.layout;
        let Some(n) = layout.shards_of(dir.components()) else {
            return Ok(());
        };
        let keys: Vec<Key> = (0..n)
            .map(|k| layout.shard_guard_key(dir.components(), k))
            .collect();
        for key in &keys {
            self.inner.known.remove(key);
        }
        crate::storage::batch::write_all(
            &self.io(),
            keys.into_iter()
                .map(crate::storage::WriteRequest::Delete)
                .collect(),
            &self.inner.config.retry,
        )
        .await
    }

    /// The checked listing query of `prefix`.
    pub(crate) fn listing_query_for(&self, prefix: &Path) -> Result<Query> {
        self.inner.layout.check_listing_path(prefix)?;
        Ok(self.listing_query(prefix))
    }

    /// The listing rows of `dir`'s children as `query` (a [`listing_query`](Self::listing_query)
    /// of `dir`, perhaps with a range, direction, limit or consistency) reads them, page by
    /// page, after the child named `after`: the pages of one partition, or those of a sharded
    /// directory's partitions merged by name. Either way a page's `last_key` names the last
    /// child given (under `query.hash`).
    pub(crate) fn listing_pages(
        &self,
        dir: &Path,
        query: Query,
        after: Option<String>,
    ) -> futures::stream::BoxStream<'static, Result<crate::storage::Page>> {
        let hashes = self.inner.layout.listing_hashes(dir.components());
        if hashes.len() == 1 {
            let start = after.map(|a| Key::new(query.hash.clone(), a));
            Box::pin(query_pages(self.io(), query, start))
        } else {
            Box::pin(crate::stream::merged_query_pages(
                self.io(),
                query,
                hashes,
                after,
            ))
        }
    }

    pub(crate) fn listing_query(&self, prefix: &Path) -> Query {
        let mut q = Query::new(self.inner.layout.listing_hash(prefix.components()))
            .consistent(self.inner.config.consistent_reads);
        q.limit = self.inner.config.page_size;
        q
    }

    pub(crate) fn next_hop(
        &self,
        origin: &Path,
        target: &str,
        seen: &mut Vec<Path>,
    ) -> Result<Path> {
        let target = self.link_target(origin, target)?;
        if seen.contains(&target) {
            return Err(Error::new(
                ErrorKind::LinkLoop,
                format!("links from {origin} form a cycle through {target}"),
            ));
        }
        if seen.len() > self.inner.config.max_link_hops {
            return Err(Error::new(
                ErrorKind::LinkLoop,
                format!(
                    "links from {origin} take more than {} hops",
                    self.inner.config.max_link_hops
                ),
            ));
        }
        seen.push(target.clone());
        Ok(target)
    }

    pub(crate) fn to_value<T: DeserializeOwned>(&self, mut item: Item) -> Result<T> {
        crate::layout::strip_bookkeeping(&mut item, self.inner.layout.reserved());
        item.to_deserialize()
    }
}

/// Listing rows this process has seen exist: a hint that picks the cheapest write plan. Never
/// trusted for correctness (every plan is guarded by conditions), so it is bounded and simply
/// cleared when full.
///
/// With [`fenced_puts`](TreeBuilder::fenced_puts), it also remembers when a listing row was last
/// verified free (exists, neither marked nor locked) by a request sent at that instant: within
/// [`FENCE_TRUST`] of it, an object is written under the row with one PutItem (see the
/// consistency docs, "Fenced puts").
#[derive(Debug, Default)]
pub(crate) struct KnownRows {
    /// The rows and their partitions, under one lock (every insert updates both).
    known: Mutex<Known>,
    verified: Mutex<std::collections::HashMap<Key, tokio::time::Instant>>,
}

#[derive(Debug, Default)]
struct Known {
    rows: HashSet<Key>,
    /// The partitions of the rows ever inserted (a hint that outlives removals: this process
    /// has written or seen names there).
    partitions: HashSet<String>,
}

/// How long after a request verified a listing row free a process trusts it to write the
/// object under it with one PutItem ([`TreeBuilder::fenced_puts`]).
pub(crate) const FENCE_TRUST: Duration = Duration::from_secs(30);

/// How long a fence row stays before it expires (and the table's time-to-live may delete
/// it): far longer than [`FENCE_TRUST`] plus the longest time a signed request may take to
/// reach DynamoDB (its signature is refused after 5 minutes; clocks are bounded by the same
/// rule). See the consistency docs, "Fenced puts".
pub(crate) const FENCE_LIFETIME: Duration = Duration::from_secs(3600);

const KNOWN_ROWS_MAX: usize = 100_000;

impl KnownRows {
    pub(crate) fn contains(&self, key: &Key) -> bool {
        self.known.lock().is_ok_and(|k| k.rows.contains(key))
    }

    pub(crate) fn insert_all(&self, keys: impl IntoIterator<Item = Key>) {
        if let Ok(mut k) = self.known.lock() {
            let Known { rows, partitions } = &mut *k;
            if rows.len() > KNOWN_ROWS_MAX {
                rows.clear();
            }
            if partitions.len() > KNOWN_ROWS_MAX {
                partitions.clear();
            }
            for key in keys {
                if !partitions.contains(&key.hash) {
                    partitions.insert(key.hash.clone());
                }
                rows.insert(key);
            }
        }
    }

    /// Whether this process has known a row in the partition `hash` (for a listing row's
    /// partition: a name in that directory).
    pub(crate) fn knows_partition(&self, hash: &str) -> bool {
        self.known.lock().is_ok_and(|k| k.partitions.contains(hash))
    }

    pub(crate) fn remove(&self, key: &Key) {
        if let Ok(mut k) = self.known.lock() {
            k.rows.remove(key);
        }
        if let Ok(mut v) = self.verified.lock() {
            v.remove(key);
        }
    }

    /// Records that a request sent at `at` found (or made) the listing row `key` free.
    pub(crate) fn verify(&self, key: Key, at: tokio::time::Instant) {
        if let Ok(mut v) = self.verified.lock() {
            if v.len() > KNOWN_ROWS_MAX {
                v.retain(|_, t| t.elapsed() < FENCE_TRUST);
                if v.len() > KNOWN_ROWS_MAX {
                    v.clear();
                }
            }
            let t = v.entry(key).or_insert(at);
            *t = (*t).max(at);
        }
    }

    /// Whether the listing row `key` was verified free by a request sent less than
    /// [`FENCE_TRUST`] ago.
    pub(crate) fn fresh(&self, key: &Key) -> bool {
        self.verified
            .lock()
            .is_ok_and(|v| v.get(key).is_some_and(|t| t.elapsed() < FENCE_TRUST))
    }
}

/// A transaction cancelled only because another transaction was in flight on its items (no
/// condition failed): sending it again is safe.
pub(crate) fn conflict_only(e: &Error) -> bool {
    let reasons = e.cancellation_reasons();
    e.kind() == ErrorKind::TransactionCanceled
        && reasons.iter().any(|r| r.code() == "TransactionConflict")
        && !reasons
            .iter()
            .any(crate::error::CancellationReason::is_condition_failed)
}
