#![doc = include_str!("moves.md")]

use futures::TryStreamExt;

use crate::batch::get_all;
use crate::error::{Error, ErrorKind, Result};
use crate::item::{Item, Value};
use crate::layout::{HASH_KEY, RANGE_KEY};
use crate::path::{IntoPath, Path};
use crate::storage::{Condition, Key, Query, Storage, TransactAction};
use crate::stream::query_pages;

use super::Tree;

/// What to do about links elsewhere in the tree that point into a moved subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LinkPolicy {
    /// Leave them (they dangle).
    Ignore,
    /// Find and report them (one Scan of the table when the move is done).
    #[default]
    Report,
    /// Find them and point them at the new paths.
    Rewrite,
}

/// What [`Tree::delete_node`] does with the children of the node it deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnChildren {
    /// Refuse with [`ErrorKind::HasChildren`] (the rule for roots of org charts and folders).
    #[default]
    Refuse,
    /// Move each child (with its subtree) to the node's parent, then delete the node.
    Reparent,
    /// Delete the whole subtree ([`Tree::delete_subtree`]).
    Recursive,
}

/// What a move or copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// The operation's id (its intent record).
    pub id: String,
    /// Nodes (listing entries) written under the destination.
    pub nodes: usize,
    /// Objects written under the destination.
    pub objects: usize,
    /// Links that pointed into the moved subtree: `(link path, old target)`.
    pub links: Vec<(Path, Path)>,
}

/// A recorded operation not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// Its id.
    pub id: String,
    /// `"move"` or `"copy"`.
    pub op: String,
    /// The source.
    pub from: Path,
    /// The destination.
    pub to: Path,
    /// `"lock"`, `"copy"` or `"delete"`.
    pub phase: String,
    links: LinkPolicy,
}

impl<S: Storage> Tree<S> {
    /// Moves the node at `from` (its object, if any) and every descendant to `to`, reporting
    /// links that pointed into it; see [`consistency`](crate::consistency) and
    /// [`move_subtree_with`](Tree::move_subtree_with).
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["org", "eng", "db"], &V { v: 1 }).await?;
    /// tree.put(["org", "eng", "db", "alice"], &V { v: 2 }).await?;
    /// tree.put_link(["people", "alice"], ["org", "eng", "db", "alice"]).await?;
    /// let report = tree.move_subtree(["org", "eng", "db"], ["org", "data", "db"]).await?;
    /// assert_eq!(report.objects, 2);
    /// assert_eq!(report.links.len(), 1); // people/alice pointed into the old place
    /// assert_eq!(tree.get(["org", "data", "db", "alice"]).await?, Some(V { v: 2 }));
    /// assert_eq!(tree.get::<V>(["org", "eng", "db"]).await?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidPath`] (root, `to` inside `from`); [`ErrorKind::NotFound`] if
    /// nothing is at `from`; [`ErrorKind::AlreadyExists`] if something is at `to`;
    /// [`ErrorKind::Locked`] if part of it is being moved by another operation; backend errors
    /// (then call it again, or [`resume`](Tree::resume)).
    ///
    /// # Cancel safety
    ///
    /// A dropped future leaves the operation recorded: the same call again, or `resume`,
    /// finishes it.
    pub async fn move_subtree(&self, from: impl IntoPath, to: impl IntoPath) -> Result<MoveReport> {
        self.move_subtree_with(from, to, LinkPolicy::Report).await
    }

    /// [`move_subtree`](Tree::move_subtree) with a policy for links into the subtree.
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn move_subtree_with(
        &self,
        from: impl IntoPath,
        to: impl IntoPath,
        links: LinkPolicy,
    ) -> Result<MoveReport> {
        self.start("move", from.into_path()?, to.into_path()?, links)
            .await
    }

    /// Copies the node at `from` and every descendant to `to`. Writers under `from` are not
    /// stopped: what they write during the copy may or may not be copied.
    ///
    /// # Examples
    ///
    /// ```
    /// # use dynatree::Tree; use dynatree_testing::FakeTable;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["templates", "a", "b"], &V { v: 1 }).await?;
    /// tree.copy_subtree(["templates"], ["projects", "p1"]).await?;
    /// assert_eq!(tree.get(["projects", "p1", "a", "b"]).await?, Some(V { v: 1 }));
    /// assert_eq!(tree.get(["templates", "a", "b"]).await?, Some(V { v: 1 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn copy_subtree(&self, from: impl IntoPath, to: impl IntoPath) -> Result<MoveReport> {
        self.start(
            "copy",
            from.into_path()?,
            to.into_path()?,
            LinkPolicy::Ignore,
        )
        .await
    }

    /// Deletes the node at `path` deciding what happens to its children: refuse (the default
    /// rule), re-attach them to the node's parent, or delete them too.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::{OnChildren, Tree};
    /// # use dynatree_testing::FakeTable; use futures::TryStreamExt;
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)] struct V { v: u8 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> dynatree::Result<()> {
    /// let tree = Tree::new(FakeTable::new());
    /// tree.create_table().await?;
    /// tree.put(["ceo"], &V { v: 0 }).await?;
    /// tree.put(["ceo", "cto"], &V { v: 1 }).await?;
    /// tree.put(["ceo", "cto", "dev"], &V { v: 2 }).await?;
    /// // A root with reports cannot go.
    /// assert!(tree.delete_node(["ceo"], OnChildren::Refuse).await.unwrap_err().is_has_children());
    /// // The CTO leaves; the developer reports to the CEO.
    /// tree.delete_node(["ceo", "cto"], OnChildren::Reparent).await?;
    /// assert_eq!(tree.get(["ceo", "dev"]).await?, Some(V { v: 2 }));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::HasChildren`] with [`OnChildren::Refuse`]; [`ErrorKind::AlreadyExists`]
    /// if a child's name is taken under the parent (children moved so far stay moved; fix the
    /// name and call again); as [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// Each child's move is recorded; calling it again finishes.
    pub async fn delete_node(&self, path: impl IntoPath, on_children: OnChildren) -> Result<()> {
        let path = path.into_path()?;
        self.layout.check_object_path(&path)?;
        match on_children {
            OnChildren::Recursive => {
                self.delete_subtree(&path).await?;
                return Ok(());
            }
            OnChildren::Refuse => {
                let q = Query::new(self.layout.listing_hash(path.components()))
                    .with_limit(1)
                    .consistent(true);
                if !self.storage.query_page(&q, None).await?.items.is_empty() {
                    return Err(Error::new(
                        ErrorKind::HasChildren,
                        format!("{path} still has children"),
                    ));
                }
            }
            OnChildren::Reparent => {
                let parent = path.parent().unwrap_or_default();
                let children: Vec<String> = self.list_names(&path, true).try_collect().await?;
                for c in children {
                    let to = parent.child(c.clone())?;
                    self.move_subtree_with(path.child(c)?, to, LinkPolicy::Rewrite)
                        .await?;
                }
            }
        }
        self.delete(&path).await
    }

    /// The recorded operations not finished yet (consistent read of the intent records).
    ///
    /// # Errors
    ///
    /// Backend errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn pending(&self) -> Result<Vec<Intent>> {
        let q = Query::new(self.layout.intents_hash()).consistent(true);
        let rows: Vec<crate::storage::Page> =
            query_pages(&self.storage, q, None).try_collect().await?;
        rows.into_iter()
            .flat_map(|p| p.items)
            .map(|item| self.decode_intent(&item))
            .collect()
    }

    /// Finishes every recorded operation (after a crash, from any process).
    ///
    /// # Errors
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    ///
    /// # Cancel safety
    ///
    /// As [`move_subtree`](Tree::move_subtree).
    pub async fn resume(&self) -> Result<Vec<MoveReport>> {
        let mut out = Vec::new();
        for intent in self.pending().await? {
            out.push(self.run(intent).await?);
        }
        Ok(out)
    }

    async fn start(&self, op: &str, from: Path, to: Path, links: LinkPolicy) -> Result<MoveReport> {
        self.layout.check_object_path(&from)?;
        self.layout.check_object_path(&to)?;
        if to.starts_with(&from) || from.starts_with(&to) {
            return Err(Error::invalid_path(format!(
                "cannot {op} {from} to {to}: one contains the other"
            )));
        }
        // The same call again resumes it.
        if let Some(intent) = self
            .pending()
            .await?
            .into_iter()
            .find(|i| i.op == op && i.from == from && i.to == to)
        {
            return self.run(intent).await;
        }
        let source = self.layout.listing_key(&from);
        if self.storage.get_item(&source, true).await?.is_none() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("nothing at {from}"),
            ));
        }
        let dest_taken = self
            .storage
            .get_item(&self.layout.listing_key(&to), true)
            .await?
            .is_some()
            || self
                .storage
                .get_item(&self.layout.object_key(&to), true)
                .await?
                .is_some();
        if dest_taken {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("something is already at {to}"),
            ));
        }
        let intent = Intent {
            id: format!("{:013}-{:016x}", now_ms(), fastrand::u64(..)),
            op: op.to_owned(),
            from,
            to,
            phase: if op == "move" { "lock" } else { "copy" }.to_owned(),
            links,
        };
        // Recorded before the first write.
        self.storage
            .put_item(self.encode_intent(&intent), Condition::NotExists)
            .await?;
        self.run(intent).await
    }

    async fn run(&self, mut intent: Intent) -> Result<MoveReport> {
        let moving = intent.op == "move";
        let levels = if moving {
            self.lock_walk(&intent).await?
        } else {
            self.plain_walk(&intent.from).await?
        };
        let mut report = MoveReport {
            id: intent.id.clone(),
            ..MoveReport::default()
        };
        if intent.phase != "delete" {
            let (nodes, objects) = self.copy_levels(&intent, &levels).await?;
            report.nodes = nodes;
            report.objects = objects;
            if moving {
                intent.phase = "delete".to_owned();
                self.storage
                    .put_item(self.encode_intent(&intent), Condition::Exists)
                    .await?;
            }
        }
        if moving {
            self.delete_levels(&intent, &levels).await?;
            let mut q = intent.from.parent();
            while let Some(current) = q.filter(|p| !p.is_root()) {
                if !self.remove_if_empty_pub(&current).await? {
                    break;
                }
                q = current.parent();
            }
        }
        if intent.links != LinkPolicy::Ignore {
            report.links = self.links_into(&intent.from).await?;
            if intent.links == LinkPolicy::Rewrite {
                for (link, target) in &report.links {
                    let rest = &target.components()[intent.from.len()..];
                    let new_target = Path::new(intent.to.components().iter().chain(rest).cloned())?;
                    self.put_link(link, &new_target).await?;
                }
            }
        }
        self.storage
            .delete_item(
                &Key::new(self.layout.intents_hash(), intent.id.clone()),
                Condition::Always,
            )
            .await?;
        Ok(report)
    }

    /// Locks the subtree level by level and returns its nodes by depth (only rows we hold).
    async fn lock_walk(&self, intent: &Intent) -> Result<Vec<Vec<Path>>> {
        let lock = Value::S(intent.id.clone());
        let mut levels = Vec::new();
        let mut level = vec![intent.from.clone()];
        while !level.is_empty() {
            let actions: Vec<TransactAction> = level
                .iter()
                .map(|p| {
                    let mut row = self.layout.listing_row(p);
                    row.insert(self.layout.moving_attr(), lock.clone());
                    TransactAction::Put {
                        item: row,
                        condition: Condition::And(vec![
                            Condition::Exists,
                            Condition::Or(vec![
                                Condition::attr_not_exists(self.layout.moving_attr()),
                                Condition::equals(self.layout.moving_attr(), lock.clone()),
                            ]),
                        ]),
                    }
                })
                .collect();
            let applied = self.transact_chunks(actions, true).await?;
            let (held, not_held): (Vec<Path>, Vec<Path>) = level
                .into_iter()
                .partition(|p| applied.contains(&self.layout.listing_key(p)));
            // A row that exists but was not ours to lock is another move's; a missing one was
            // removed meanwhile (or by our own delete phase before a crash).
            for p in &not_held {
                if self
                    .storage
                    .get_item(&self.layout.listing_key(p), true)
                    .await?
                    .is_some_and(|r| r.contains(self.layout.moving_attr()))
                {
                    return Err(self.locked_error(p));
                }
            }
            let mut next = Vec::new();
            for dir in &held {
                let names: Vec<String> = self.list_names(dir, true).try_collect().await?;
                for n in names {
                    next.push(dir.child(n)?);
                }
            }
            levels.push(held);
            level = next;
        }
        Ok(levels)
    }

    async fn plain_walk(&self, from: &Path) -> Result<Vec<Vec<Path>>> {
        let mut levels = Vec::new();
        let exists = self
            .storage
            .get_item(&self.layout.listing_key(from), true)
            .await?
            .is_some();
        let mut level = if exists { vec![from.clone()] } else { vec![] };
        while !level.is_empty() {
            let mut next = Vec::new();
            for dir in &level {
                let names: Vec<String> = self.list_names(dir, true).try_collect().await?;
                for n in names {
                    next.push(dir.child(n)?);
                }
            }
            levels.push(level);
            level = next;
        }
        Ok(levels)
    }

    fn dest_of(&self, intent: &Intent, p: &Path) -> Result<Path> {
        let rest = &p.components()[intent.from.len()..];
        Path::new(intent.to.components().iter().chain(rest).cloned())
    }

    /// Writes every node and object under the destination, top-down. Returns (nodes, objects).
    async fn copy_levels(&self, intent: &Intent, levels: &[Vec<Path>]) -> Result<(usize, usize)> {
        if levels.iter().all(Vec::is_empty) {
            return Ok((0, 0));
        }
        // The destination's ancestors, as for any put.
        if let Some(parent) = intent.to.parent().filter(|p| !p.is_root()) {
            self.ensure_listing(&parent).await?;
        }
        let (mut nodes, mut objects) = (0, 0);
        for level in levels {
            let sources = self.objects_of(level, true).await?;
            let mut actions = Vec::with_capacity(level.len() * 2);
            for p in level {
                let dest = self.dest_of(intent, p)?;
                actions.push(TransactAction::Put {
                    item: self.layout.listing_row(&dest),
                    condition: self.not_marked(),
                });
                nodes += 1;
                if let Some(src) = sources.get(&self.layout.object_key(p).hash) {
                    actions.push(TransactAction::Put {
                        item: self.moved_row(src, &dest),
                        condition: Condition::Always,
                    });
                    objects += 1;
                }
            }
            self.transact_chunks(actions, false).await?;
        }
        Ok((nodes, objects))
    }

    /// An object row re-keyed for `dest`, its path-index attributes recomputed.
    fn moved_row(&self, src: &Item, dest: &Path) -> Item {
        let sc = self.layout.reserved();
        let mut row: Item = src
            .iter()
            .filter(|(n, _)| !n.starts_with(&format!("{sc}pix.")))
            .map(|(n, v)| (n.to_owned(), v.clone()))
            .collect();
        let key = self.layout.object_key(dest);
        row.insert(HASH_KEY, Value::S(key.hash));
        row.insert(RANGE_KEY, Value::S(key.range));
        self.add_path_index(dest, &mut row);
        row
    }

    /// Deletes the source bottom-up: objects, and listing rows conditional on our lock.
    async fn delete_levels(&self, intent: &Intent, levels: &[Vec<Path>]) -> Result<()> {
        let lock = Value::S(intent.id.clone());
        for level in levels.iter().rev() {
            let mut actions = Vec::with_capacity(level.len() * 2);
            for p in level {
                let key = self.layout.listing_key(p);
                self.known.remove(&key);
                actions.push(TransactAction::Delete {
                    key: self.layout.object_key(p),
                    condition: Condition::Always,
                });
                actions.push(TransactAction::Delete {
                    key,
                    condition: Condition::equals(self.layout.moving_attr(), lock.clone()),
                });
            }
            self.transact_chunks(actions, true).await?;
        }
        Ok(())
    }

    /// Creates the listing rows of `path` and its ancestors that are missing.
    async fn ensure_listing(&self, path: &Path) -> Result<()> {
        let keys: Vec<Key> = (1..=path.len())
            .map(|i| self.layout.listing_key(&path.prefix(i)))
            .collect();
        if keys.iter().all(|k| self.known.contains(k)) {
            return Ok(());
        }
        let found = get_all(&self.storage, keys.clone(), true, &self.config.retry).await?;
        let actions: Vec<TransactAction> = keys
            .iter()
            .filter(|k| !found.iter().any(|i| Key::from_item(i).as_ref() == Some(*k)))
            .map(|k| TransactAction::Put {
                item: k.clone().into_item(),
                condition: self.not_marked(),
            })
            .collect();
        if !actions.is_empty() {
            self.transact_chunks(actions, false).await?;
        }
        self.known.insert_all(keys);
        Ok(())
    }

    /// Links anywhere in the tree whose target is `from` or under it (one Scan).
    async fn links_into(&self, from: &Path) -> Result<Vec<(Path, Path)>> {
        let link_attr = self.layout.link_attr().to_owned();
        let items: Vec<Item> = self.scan().try_collect().await?;
        let mut out = Vec::new();
        for item in items {
            let (Some(target), Some(hash)) = (item.get_s(&link_attr), item.get_s(HASH_KEY)) else {
                continue;
            };
            if item.get_s(RANGE_KEY) != Some(self.layout.link_attr()) {
                continue;
            }
            let (Ok(target), Ok(link)) = (
                self.layout.decode_target(target),
                self.layout.decode_target(hash),
            ) else {
                continue;
            };
            if target.starts_with(from) {
                out.push((link, target));
            }
        }
        out.sort();
        Ok(out)
    }

    fn encode_intent(&self, intent: &Intent) -> Item {
        let sc = self.layout.reserved();
        let mut item = Key::new(self.layout.intents_hash(), intent.id.clone()).into_item();
        item.insert(format!("{sc}op"), Value::S(intent.op.clone()));
        item.insert(
            format!("{sc}from"),
            Value::S(self.layout.encode_target(&intent.from)),
        );
        item.insert(
            format!("{sc}to"),
            Value::S(self.layout.encode_target(&intent.to)),
        );
        item.insert(format!("{sc}phase"), Value::S(intent.phase.clone()));
        let links = match intent.links {
            LinkPolicy::Ignore => "ignore",
            LinkPolicy::Report => "report",
            LinkPolicy::Rewrite => "rewrite",
        };
        item.insert(format!("{sc}links"), Value::S(links.to_owned()));
        item
    }

    fn decode_intent(&self, item: &Item) -> Result<Intent> {
        let sc = self.layout.reserved();
        let field = |n: &str| {
            item.get_s(&format!("{sc}{n}"))
                .map(str::to_owned)
                .ok_or_else(|| {
                    Error::new(ErrorKind::Backend, format!("intent record without `{n}`"))
                })
        };
        Ok(Intent {
            id: item.get_s(RANGE_KEY).unwrap_or_default().to_owned(),
            op: field("op")?,
            from: self.layout.decode_target(&field("from")?)?,
            to: self.layout.decode_target(&field("to")?)?,
            phase: field("phase")?,
            links: match field("links")?.as_str() {
                "ignore" => LinkPolicy::Ignore,
                "rewrite" => LinkPolicy::Rewrite,
                _ => LinkPolicy::Report,
            },
        })
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
