//! [`Watch`]: the typed changes of a subtree, read from the table's stream shard by shard,
//! with a [`Cursor`] to resume from.
//!
#![doc = include_str!("watch.md")]

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::Stream;
use tracing::Instrument;

use super::cursor::{Cursor, Mark};
use super::order::{At, Handed, Order, moved};
use super::{Change, Decoder, Record, View};
use crate::entity::Entity;
use crate::error::{Error, ErrorKind, Result};
use crate::path::IntoPath;
use crate::storage::{SharedStorage, Storage, StreamPage, StreamPosition, StreamShard};
use crate::tree::Tree;

/// GetRecords returns at most 1,000 records.
const PAGE: u32 = 1000;
/// How long a watch waits after a poll that found nothing new, unless told otherwise.
const IDLE: Duration = Duration::from_millis(250);
/// How often the shards are listed again even when no shard ended (new shards only follow
/// ended ones; this is a safety net).
const RELIST: Duration = Duration::from_secs(60);
/// How far before its start a watch resumed on a shard where it had seen nothing reads
/// (DynamoDB Streams rounds record times down to the second, and clocks differ).
const START_MARGIN: Duration = Duration::from_secs(60);
/// How long DynamoDB Streams keeps a record.
const RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// How many times one poll lists the shards again after shards ended.
const ROUNDS: usize = 4;

/// What one poll read: the changes in order, the cursor after everything it read, and the
/// error that stopped it, if any.
struct Polled<T> {
    handed: Vec<Handed<T>>,
    end: Cursor,
    error: Option<Error>,
}

/// The reading side of a watch: the shards' positions and the changes held back, owned by
/// one poll at a time.
struct Follower<T, S> {
    tree: Tree<S>,
    decoder: Decoder,
    /// How far each shard was read (the cursor handed out is [`Order::cursor`] of it).
    cursor: Cursor,
    order: Order<T>,
    /// Continuations of the shards being read (what the backend said to read on from).
    next: HashMap<String, StreamPosition>,
    /// The position was taken (a fresh watch takes it on its first poll), or given.
    positioned: bool,
    /// Whether to list the shards again before reading.
    relist: bool,
    listed_at: Option<Instant>,
    shards: Vec<StreamShard>,
    page: u32,
}

/// A poll in flight: it owns the follower and gives it back with what it read.
type PollFuture<T, S> = Pin<Box<dyn Future<Output = (Follower<T, S>, Polled<T>)> + Send>>;

/// The typed changes of the objects under one path, from the table's stream, as a
/// [`Stream`] that does not end: [`Tree::watch`] makes one.
///
/// Each item is a [`Change`] of an object under the path (or a decoding error, see below).
/// [`cursor`](Self::cursor) is the position right after the last change handed: store it,
/// and a watch made with [`start_after`](Self::start_after) hands the changes after it. The
/// guarantees, and how a watch reads the stream, are in the [module docs](crate::watch).
///
/// # Errors
///
/// An item is an error, and the stream goes on after it:
///
/// - [`ErrorKind::Serialization`]: a record under the path that names a type of `T` does not
///   fit it (as for a read of that type). The record is passed: the cursor after the error
///   is past it.
/// - [`ErrorKind::CursorExpired`]: the stream no longer holds the watch's position (24 hours
///   passed since the changes it names); every later poll fails the same way. Resynchronise.
/// - [`ErrorKind::NotFound`]: the table has no stream.
/// - a request error after the tree's retries ([`ErrorKind::Throttled`], …): polling again
///   reads again from where it stopped.
/// - a caller's mistake (an invalid path, a type checked against another reserved character)
///   is the only item, and the stream ends after it.
///
/// # Cancel safety
///
/// Dropping a watch between items loses nothing that [`cursor`](Self::cursor) does not
/// name: a change is taken off the stream only when it is handed.
///
/// # Examples
///
/// ```
/// use dynatree::{Hierarchical, Tree};
/// use dynatree::storage::Storage;
/// use dynatree::watch::Change;
/// use dynatree_testing::FakeTable;
/// use futures::TryStreamExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
/// #[dynatree(path = "Accounts/{account}/Links/{short}")]
/// struct Link { account: String, short: String, url: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
/// let table = FakeTable::new();
/// let tree = Tree::new(table.clone());
/// tree.create_table().await?;
/// table.enable_stream().await?;
///
/// let mut watch = tree.watch::<Link>(["Accounts", "acme"]);
/// watch.start().await?; // from now on
/// let link = |short: &str| Link { account: "acme".into(), short: short.into(), url: "https://a".into() };
/// tree.repo::<Link>().put(&link("a")).await?;
/// tree.repo::<Link>().put(&Link { account: "other".into(), ..link("b") }).await?; // not watched
///
/// let change = watch.try_next().await?.expect("a watch does not end");
/// assert!(matches!(change, Change::Created { value, .. } if value == link("a")));
/// let cursor = watch.cursor().to_string(); // store it
///
/// tree.repo::<Link>().delete(&LinkKey { account: "acme".into(), short: "a".into() }).await?;
/// let mut resumed = tree.watch::<Link>(["Accounts", "acme"]).start_after(cursor.parse()?);
/// let change = resumed.try_next().await?.expect("a watch does not end");
/// assert!(matches!(change, Change::Deleted { .. }));
/// # Ok(()) }
/// ```
pub struct Watch<T, S = SharedStorage> {
    follower: Option<Follower<T, S>>,
    poll: Option<PollFuture<T, S>>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    ready: VecDeque<Handed<T>>,
    /// The cursor once `ready` is handed.
    end: Cursor,
    cursor: Cursor,
    idle: Duration,
    /// A caller's mistake, handed once before the stream ends.
    refused: Option<Error>,
    ended: bool,
    _type: PhantomData<fn() -> T>,
}

impl<T, S> fmt::Debug for Watch<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("cursor", &self.cursor.to_string())
            .field("ready", &self.ready.len())
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl<S: Storage + 'static> Tree<S> {
    /// The changes of the objects of `T` under `path` (and `path` itself), from now on, as a
    /// [`Watch`]: a [`Stream`] of [`Change<T>`](Change) read from the table's stream (which
    /// must be enabled: [`Storage::enable_stream`]) that does not end. On a
    /// [scope](Tree::scope), `path` and the changes' paths are relative to its root. `T` is a
    /// hierarchical type or an enum deriving [`Entity`]: objects whose paths match no
    /// template of `T` are passed over.
    ///
    /// A moved object is one [`Change::Moved`] when both paths are watched, a
    /// [`Change::Deleted`] when it left the path, a [`Change::Created`] when it came in.
    ///
    /// A fresh watch takes its position on its first poll, or at [`Watch::start`]; resume
    /// from a stored cursor with [`Watch::start_after`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{Hierarchical, Tree};
    /// use dynatree::storage::Storage;
    /// use dynatree::watch::Change;
    /// use dynatree_testing::FakeTable;
    /// use futures::TryStreamExt;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
    /// #[dynatree(path = "Docs/{id}")]
    /// struct Doc { id: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.enable_stream().await?;
    /// let mut docs = tree.watch::<Doc>(["Docs"]);
    /// docs.start().await?;
    /// tree.repo::<Doc>().put(&Doc { id: "a".into() }).await?;
    /// tree.move_subtree(["Docs", "a"], ["Docs", "b"]).await?;
    /// assert!(matches!(docs.try_next().await?, Some(Change::Created { .. })));
    /// assert!(matches!(docs.try_next().await?, Some(Change::Moved { .. })));
    /// # Ok(()) }
    /// ```
    pub fn watch<T: Entity>(&self, path: impl IntoPath) -> Watch<T, S> {
        let made = self
            .check_entity_reserved(T::RESERVED)
            .and_then(|()| self.enter(path))
            .and_then(|prefix| {
                prefix.validate(self.reserved())?;
                Decoder::new(T::RESERVED, View::new(self.scope_root(), prefix))
            });
        let (follower, refused) = match made {
            Ok(decoder) => (
                Some(Follower {
                    tree: self.clone(),
                    decoder,
                    cursor: Cursor::default(),
                    order: Order::new(&Cursor::default()),
                    next: HashMap::new(),
                    positioned: false,
                    relist: true,
                    listed_at: None,
                    shards: Vec::new(),
                    page: PAGE,
                }),
                None,
            ),
            Err(e) => (None, Some(e)),
        };
        Watch {
            follower,
            poll: None,
            sleep: None,
            ready: VecDeque::new(),
            end: Cursor::default(),
            cursor: Cursor::default(),
            idle: IDLE,
            refused,
            ended: false,
            _type: PhantomData,
        }
    }
}

impl<T: Entity + Send + 'static, S: Storage + 'static> Watch<T, S> {
    /// The same watch, resuming right after `cursor` (taken from [`cursor`](Self::cursor) of
    /// a watch of the same table) rather than from now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    /// # #[dynatree(path = "Docs/{id}")]
    /// # struct Doc { id: String }
    /// # let tree = Tree::new(FakeTable::new());
    /// let stored = "w1;1800000000;shardId-000000=000000000000000000007";
    /// let watch = tree.watch::<Doc>(["Docs"]).start_after(stored.parse()?);
    /// assert_eq!(watch.cursor().to_string(), stored);
    /// # Ok::<(), dynatree::Error>(())
    /// ```
    #[must_use]
    pub fn start_after(mut self, cursor: Cursor) -> Self {
        if let Some(f) = self.follower.as_mut()
            && !f.positioned
        {
            f.order = Order::new(&cursor);
            f.cursor = cursor.clone();
            f.positioned = true;
            self.cursor = cursor.clone();
            self.end = cursor;
        }
        self
    }

    /// How long the watch waits before it reads the stream again after a poll that found
    /// nothing new (250 ms unless set). Each poll sends one GetRecords per open shard.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    /// # #[dynatree(path = "Docs/{id}")]
    /// # struct Doc { id: String }
    /// # let tree = Tree::new(FakeTable::new());
    /// let watch = tree.watch::<Doc>(["Docs"]).idle(std::time::Duration::from_secs(1));
    /// ```
    #[must_use]
    pub fn idle(mut self, wait: Duration) -> Self {
        self.idle = wait;
        self
    }

    /// The position right after the last change handed (and the records before it that were
    /// no changes of the watched objects): store it, and resume with
    /// [`start_after`](Self::start_after).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    /// # #[dynatree(path = "Docs/{id}")]
    /// # struct Doc { id: String }
    /// # let tree = Tree::new(FakeTable::new());
    /// let watch = tree.watch::<Doc>(["Docs"]);
    /// let stored: String = watch.cursor().to_string();
    /// # let _ = stored;
    /// ```
    pub fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// Reads the stream to what it holds now and returns the changes not handed yet, in
    /// order (empty when there is none), without waiting: for a caller that polls on its own
    /// schedule (a job, a test) rather than consuming the watch as a [`Stream`]. The
    /// [`cursor`](Self::cursor) is then right after the last change returned.
    ///
    /// # Errors
    ///
    /// As an item of the stream (see [`Watch`]). The changes read before the error are
    /// returned first, by this call, and the error by the next one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read cancelled midway goes on at the next call (or poll), and nothing
    /// it read is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    /// # #[dynatree(path = "Docs/{id}")]
    /// # struct Doc { id: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.enable_stream().await?;
    /// let mut watch = tree.watch::<Doc>(["Docs"]);
    /// assert!(watch.catch_up().await?.is_empty()); // takes the position: nothing yet
    /// tree.repo::<Doc>().put(&Doc { id: "a".into() }).await?;
    /// assert_eq!(watch.catch_up().await?.len(), 1);
    /// assert!(watch.catch_up().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn catch_up(&mut self) -> Result<Vec<Change<T>>> {
        if let Some(e) = self.refused.take() {
            self.ended = true;
            return Err(e);
        }
        if self.ready.is_empty() {
            self.read_once().await;
        }
        self.take_ready()
    }

    /// The next change if the stream holds one now (reading it once if no change is waiting),
    /// or `None` when the watch is caught up: [`catch_up`](Self::catch_up) one change at a
    /// time, with the [`cursor`](Self::cursor) right after each.
    ///
    /// # Errors
    ///
    /// As an item of the stream (see [`Watch`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`catch_up`](Self::catch_up).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    /// # #[dynatree(path = "Docs/{id}")]
    /// # struct Doc { id: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// # let table = FakeTable::new();
    /// # let tree = Tree::new(table.clone());
    /// # tree.create_table().await?;
    /// # table.enable_stream().await?;
    /// let mut watch = tree.watch::<Doc>(["Docs"]);
    /// watch.start().await?;
    /// tree.repo::<Doc>().put(&Doc { id: "a".into() }).await?;
    /// tree.repo::<Doc>().put(&Doc { id: "b".into() }).await?;
    /// let mut saved = Vec::new();
    /// while let Some(change) = watch.next_ready().await? {
    ///     saved.push((change.path().to_string(), watch.cursor().to_string()));
    /// }
    /// assert_eq!(saved.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn next_ready(&mut self) -> Result<Option<Change<T>>> {
        if let Some(e) = self.refused.take() {
            self.ended = true;
            return Err(e);
        }
        if self.ready.is_empty() {
            self.read_once().await;
        }
        let Some(handed) = self.ready.pop_front() else {
            return Ok(None);
        };
        self.cursor = if self.ready.is_empty() {
            self.end.clone()
        } else {
            handed.cursor
        };
        handed.change.map(Some)
    }

    /// One read of the stream (or the end of one in flight), into the ready changes.
    async fn read_once(&mut self) {
        if self.poll.is_none() {
            let Some(follower) = self.follower.take() else {
                return;
            };
            self.poll = Some(Box::pin(follower.poll_once()));
        }
        if let Some(poll) = self.poll.as_mut() {
            let (follower, polled) = poll.await;
            self.poll = None;
            self.follower = Some(follower);
            self.absorb(polled);
        }
    }

    /// The ready changes up to the first error (or the error, if it is first).
    fn take_ready(&mut self) -> Result<Vec<Change<T>>> {
        let mut out = Vec::new();
        while let Some(front) = self.ready.front() {
            if front.change.is_err() && !out.is_empty() {
                break;
            }
            let Some(handed) = self.ready.pop_front() else {
                break;
            };
            self.cursor = if self.ready.is_empty() {
                self.end.clone()
            } else {
                handed.cursor
            };
            out.push(handed.change?);
        }
        if self.ready.is_empty() {
            self.cursor = self.end.clone();
        }
        Ok(out)
    }

    /// Takes what a poll read into the ready changes (the error last); whether the watch
    /// should wait before it reads again (nothing new, or an error).
    fn absorb(&mut self, polled: Polled<T>) -> bool {
        let Polled { handed, end, error } = polled;
        let nothing = handed.is_empty();
        self.ready.extend(handed);
        self.end = end;
        if nothing && self.ready.is_empty() {
            self.cursor = self.end.clone();
        }
        match error {
            Some(e) => {
                // The changes read before the error go first; the error after them.
                let cursor = self.end.clone();
                self.ready.push_back(Handed {
                    change: Err(e),
                    cursor,
                });
                true
            }
            None => nothing,
        }
    }

    /// Takes the watch's position in the stream now, if it has none yet (a fresh watch takes
    /// it on its first poll; one made with [`start_after`](Self::start_after) has it): every
    /// change acknowledged after this returns is handed. What a resynchronisation starts
    /// with, before it reads the subtree.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotFound`] when the table has no stream; a request's error after the
    /// tree's retries; the caller's mistake the watch was made with.
    ///
    /// # Cancel safety
    ///
    /// Cancelling it leaves the watch without a position; the next poll takes one.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::{Hierarchical, Tree};
    /// # use dynatree::storage::Storage;
    /// # use dynatree_testing::FakeTable;
    /// # #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    /// # #[dynatree(path = "Docs/{id}")]
    /// # struct Doc { id: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let table = FakeTable::new();
    /// let tree = Tree::new(table.clone());
    /// tree.create_table().await?;
    /// table.enable_stream().await?;
    /// let mut watch = tree.watch::<Doc>(["Docs"]);
    /// watch.start().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(&mut self) -> Result<()> {
        if let Some(e) = self.refused.take() {
            self.ended = true;
            return Err(e);
        }
        // A poll in flight has the follower; it takes the position itself.
        let Some(mut follower) = self.follower.take() else {
            return Ok(());
        };
        let result = if follower.positioned {
            Ok(Vec::new())
        } else {
            let cx = follower.tree.cx.clone();
            cx.call(follower.take_position()).await
        };
        let end = follower.order.cursor(&follower.cursor);
        self.follower = Some(follower);
        let handed = result?;
        if self.ready.is_empty() && handed.is_empty() {
            self.cursor = end.clone();
        }
        self.ready.extend(handed);
        self.end = end;
        Ok(())
    }
}

// Nothing of a watch is pinned in place: its futures are boxed.
impl<T, S> Unpin for Watch<T, S> {}

impl<T: Entity + Send + 'static, S: Storage + 'static> Stream for Watch<T, S> {
    type Item = Result<Change<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(e) = this.refused.take() {
                this.ended = true;
                return Poll::Ready(Some(Err(e)));
            }
            if let Some(handed) = this.ready.pop_front() {
                this.cursor = if this.ready.is_empty() {
                    this.end.clone()
                } else {
                    handed.cursor
                };
                return Poll::Ready(Some(handed.change));
            }
            if let Some(sleep) = this.sleep.as_mut() {
                match sleep.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => this.sleep = None,
                }
            }
            if this.poll.is_none() {
                let Some(follower) = this.follower.take() else {
                    return Poll::Ready(None);
                };
                this.poll = Some(Box::pin(follower.poll_once()));
            }
            let Some(poll) = this.poll.as_mut() else {
                continue;
            };
            let (follower, polled) = match poll.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(out) => out,
            };
            this.poll = None;
            this.follower = Some(follower);
            if this.absorb(polled) {
                this.sleep = Some(Box::pin(tokio::time::sleep(this.idle)));
            }
        }
    }
}

impl<T: Entity, S: Storage + 'static> Follower<T, S> {
    /// One poll: the position if there is none yet, then every shard that may be read, to
    /// what the stream holds now.
    async fn poll_once(mut self) -> (Self, Polled<T>) {
        let cx = self.tree.cx.clone();
        let span = tracing::debug_span!("dynatree.watch", shards = tracing::field::Empty);
        let mut handed = Vec::new();
        let result = cx
            .call(async {
                if !self.positioned {
                    handed.extend(self.take_position().await?);
                }
                self.read_all(&mut handed).await?;
                // Read from the stream now: the age of the cursor it resumed from no longer
                // says anything about where it reads.
                self.cursor.taken = 0;
                Ok(())
            })
            .instrument(span)
            .await;
        let end = self.order.cursor(&self.cursor);
        (
            self,
            Polled {
                handed,
                end,
                error: result.err(),
            },
        )
    }

    /// Takes the position of a fresh watch: every closed shard is done, every open one is
    /// read from its newest record on (`LATEST`, one request per open shard, so that the
    /// backend fixes the position now).
    async fn take_position(&mut self) -> Result<Vec<Handed<T>>> {
        let io = self.tree.cx.io();
        let shards = io.stream_shards().await?;
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut cursor = Cursor {
            started,
            ..Cursor::default()
        };
        let mut pages = Vec::new();
        for shard in &shards {
            if shard.is_closed() {
                cursor.marks.insert(shard.id().to_owned(), Mark::Done);
            } else {
                cursor.marks.insert(shard.id().to_owned(), Mark::Start);
                let page = io
                    .stream_page(shard.id(), StreamPosition::Latest, self.page)
                    .await?;
                pages.push((shard.id().to_owned(), page));
            }
        }
        self.order = Order::new(&cursor);
        self.cursor = cursor;
        self.shards = shards;
        self.listed_at = Some(Instant::now());
        self.relist = false;
        self.positioned = true;
        self.next.clear();
        let mut handed = Vec::new();
        for (shard, page) in pages {
            self.take_page(&shard, page, None, &mut handed);
        }
        Ok(handed)
    }

    /// Reads every shard that may be read now, parents before children, to what the stream
    /// holds; lists the shards again first when one ended (or a while passed).
    async fn read_all(&mut self, handed: &mut Vec<Handed<T>>) -> Result<()> {
        // Rounds: when a shard ends, the shards are listed again and its children read in
        // the next round (a bounded number per poll).
        for _ in 0..ROUNDS {
            let stale = self.listed_at.is_none_or(|at| at.elapsed() >= RELIST);
            if self.relist || stale {
                self.shards = self.tree.cx.io().stream_shards().await?;
                // An expired cursor stays expired: the shards are checked on every poll.
                self.check_listed()?;
                self.listed_at = Some(Instant::now());
                self.relist = false;
            }
            let shards = self.shards.clone();
            for shard in &shards {
                if self.may_read(shard, &shards) {
                    self.read_shard(shard.id(), handed).await?;
                }
            }
            // No open shard known: a stream just enabled, or one that lost its shards;
            // the next poll lists them again.
            if self.shards.iter().all(StreamShard::is_closed) {
                self.relist = true;
                break;
            }
            if !self.relist {
                break;
            }
        }
        // Every shard that may be read was read to what the stream holds.
        self.order.caught_up(tokio::time::Instant::now());
        self.order.drain(&self.cursor, handed);
        Ok(())
    }

    /// Every shard the cursor has not read to its end must still be in the stream: if it left
    /// (its records were trimmed), the changes the watch had not read are lost to it.
    fn check_listed(&mut self) -> Result<()> {
        let listed: HashSet<&str> = self.shards.iter().map(StreamShard::id).collect();
        if let Some((gone, _)) = self
            .cursor
            .marks
            .iter()
            .find(|(id, mark)| **mark != Mark::Done && !listed.contains(id.as_str()))
        {
            return Err(Error::new(
                ErrorKind::CursorExpired,
                format!("shard {gone} left the stream before the watch read it to its end"),
            ));
        }
        // A shard the cursor does not know, whose parent the cursor does not know either and
        // the stream no longer has: the parent was born and trimmed while the watch was
        // stopped, and its changes are lost to it.
        if let Some(orphan) = self.shards.iter().find(|s| {
            !self.cursor.marks.contains_key(s.id())
                && s.parent()
                    .is_some_and(|p| !listed.contains(p) && !self.cursor.marks.contains_key(p))
        }) {
            return Err(Error::new(
                ErrorKind::CursorExpired,
                format!(
                    "the parent of shard {} left the stream before the watch read it",
                    orphan.id()
                ),
            ));
        }
        // Shards read to their end that left the stream are forgotten.
        self.cursor
            .marks
            .retain(|id, mark| *mark != Mark::Done || listed.contains(id.as_str()));
        Ok(())
    }

    /// Whether `shard` has records the watch may read now: not read to its end, and its
    /// parent (if the stream still has it) read to its end.
    fn may_read(&self, shard: &StreamShard, shards: &[StreamShard]) -> bool {
        if self.cursor.marks.get(shard.id()) == Some(&Mark::Done) {
            return false;
        }
        match shard.parent() {
            Some(parent) if shards.iter().any(|s| s.id() == parent) => {
                self.cursor.marks.get(parent) == Some(&Mark::Done)
            }
            _ => true,
        }
    }

    /// Reads one shard to what it holds now.
    async fn read_shard(&mut self, shard: &str, handed: &mut Vec<Handed<T>>) -> Result<()> {
        let io = self.tree.cx.io();
        // Known from its first read on, so that a cursor notices if it leaves the stream.
        if !self.cursor.marks.contains_key(shard) {
            self.cursor.marks.insert(shard.to_owned(), Mark::Fresh);
        }
        loop {
            let (position, since) = self.position(shard)?;
            let page = match io.stream_page(shard, position.clone(), self.page).await {
                Ok(page) => page,
                // A continuation too old: read again from the shard's mark.
                Err(e)
                    if e.kind() == ErrorKind::CursorExpired
                        && matches!(position, StreamPosition::Next(_)) =>
                {
                    self.next.remove(shard);
                    let (position, _) = self.position(shard)?;
                    io.stream_page(shard, position, self.page).await?
                }
                Err(e) => return Err(e),
            };
            let more = !page.records.is_empty() && page.next.is_some();
            self.take_page(shard, page, since, handed);
            if !more {
                return Ok(());
            }
        }
    }

    /// Where to read `shard` from, and the time before which its records are passed over
    /// (for a shard the watch had seen nothing of since its start, resumed from a cursor).
    ///
    /// [`ErrorKind::CursorExpired`] for such a shard when the watch started more than the
    /// stream's retention ago: what it held after the start may be gone.
    fn position(&self, shard: &str) -> Result<(StreamPosition, Option<SystemTime>)> {
        if let Some(next) = self.next.get(shard) {
            return Ok((next.clone(), None));
        }
        Ok(match self.cursor.marks.get(shard) {
            Some(Mark::After(seq)) => (StreamPosition::After(seq.clone()), None),
            Some(Mark::Start) => {
                let started = UNIX_EPOCH + Duration::from_secs(self.cursor.started);
                if started.elapsed().is_ok_and(|age| age >= RETENTION) {
                    return Err(Error::new(
                        ErrorKind::CursorExpired,
                        format!(
                            "the watch started more than 24 hours ago and read nothing of shard {shard}"
                        ),
                    ));
                }
                (
                    StreamPosition::TrimHorizon,
                    started.checked_sub(START_MARGIN),
                )
            }
            // A shard born after the position was taken: all of it, if the stream still has
            // all of it (a cursor taken more than the retention ago may have lost its start).
            Some(Mark::Fresh | Mark::Done) | None => {
                let taken = UNIX_EPOCH + Duration::from_secs(self.cursor.taken);
                if self.cursor.taken != 0 && taken.elapsed().is_ok_and(|age| age >= RETENTION) {
                    return Err(Error::new(
                        ErrorKind::CursorExpired,
                        format!(
                            "the cursor is more than 24 hours old and shard {shard} is read from its start"
                        ),
                    ));
                }
                (StreamPosition::TrimHorizon, None)
            }
        })
    }

    /// Decodes a page of `shard`, moves the shard's mark past each record, and hands the
    /// changes that may go: records at or before the mark (redeliveries), records the cursor
    /// resumed from says were handed, and records before `since` are passed.
    fn take_page(
        &mut self,
        shard: &str,
        page: StreamPage,
        since: Option<SystemTime>,
        handed: &mut Vec<Handed<T>>,
    ) {
        for record in &page.records {
            let seq = record.sequence_number();
            let before = self.cursor.marks.get(shard).cloned();
            if before.as_ref().is_some_and(|m| !m.before(seq)) {
                continue;
            }
            self.cursor
                .marks
                .insert(shard.to_owned(), Mark::After(seq.to_owned()));
            if self.cursor.skips(shard, seq) {
                continue;
            }
            if let (Some(since), Some(at)) = (since, record.created_at())
                && at < since
            {
                continue;
            }
            let at = At {
                shard: shard.to_owned(),
                seq: seq.to_owned(),
                before,
            };
            match self.decoder.classify::<T>(record) {
                Err(e) => self.order.plain(at, Err(e)),
                Ok(Record::Plain(None)) => {}
                Ok(Record::Plain(Some(change))) => self.order.plain(at, Ok(change)),
                Ok(record) => {
                    if let Err(e) = self.pair(at.clone(), record) {
                        self.order.plain(at, Err(e));
                    }
                }
            }
        }
        self.order.drain(&self.cursor, handed);
        match page.next {
            Some(next) => {
                self.next.insert(shard.to_owned(), next);
            }
            None => {
                self.next.remove(shard);
                self.cursor.marks.insert(shard.to_owned(), Mark::Done);
                // A shard ended: its children are listed next time.
                self.relist = true;
            }
        }
    }

    /// One of a move's records, paired with the other: a `Moved` goes when both are read,
    /// after everything before it at both paths. A move into the watched objects from outside
    /// them is a creation, one out of them a deletion, each at its own record.
    fn pair(&mut self, at: At, record: Record<T>) -> Result<()> {
        let d = &self.decoder;
        match record {
            Record::Arrival {
                from,
                to,
                hold,
                image,
                info,
            } => {
                let source = d.at::<T>(&from, image.clone())?;
                match (source, d.at::<T>(&to, image)?) {
                    (Some((from_seen, _)), Some((to_seen, value))) => {
                        let change = moved(from_seen, to_seen, value, info);
                        self.order.arrival(at, (from, to, hold), change);
                    }
                    (None, Some((path, value))) => {
                        self.order
                            .plain(at, Ok(Change::Created { path, value, info }));
                    }
                    // Out of them: the source's removal says it.
                    (_, None) => {}
                }
            }
            Record::Departure {
                from,
                to,
                hold,
                image,
                info,
            } => match (d.at::<T>(&from, image.clone())?, d.at::<T>(&to, image)?) {
                (Some((from_seen, old)), Some((to_seen, value))) => {
                    let alone = Change::Deleted {
                        path: from_seen.clone(),
                        old,
                        info: info.clone(),
                    };
                    let change = moved(from_seen, to_seen, value, info);
                    self.order.departure(at, (from, to, hold), change, alone);
                }
                (Some((path, old)), None) => {
                    self.order
                        .plain(at, Ok(Change::Deleted { path, old, info }));
                }
                (None, _) => {}
            },
            Record::Rollback {
                from,
                to,
                hold,
                image,
                info,
            } => match (d.at::<T>(&from, image.clone())?, d.at::<T>(&to, image)?) {
                (Some(_), Some((path, old))) => {
                    let deleted = Change::Deleted { path, old, info };
                    let key = (from, to, hold);
                    if let Some(deleted) = self.order.copy_removed(at.clone(), &key, deleted) {
                        self.order.plain(at, Ok(deleted));
                    }
                }
                (None, Some((path, old))) => {
                    self.order
                        .plain(at, Ok(Change::Deleted { path, old, info }));
                }
                (_, None) => {}
            },
            Record::Released { from, to, hold } => self.order.released(&(from, to, hold)),
            Record::Kept { from, to, hold } => self.order.kept((from, to, hold)),
            Record::Plain(change) => {
                if let Some(change) = change {
                    self.order.plain(at, Ok(change));
                }
            }
        }
        Ok(())
    }
}
