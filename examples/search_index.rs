//! A follower kept in sync through `Tree::watch`: an in-memory search index of each account's
//! links (words of the target URL -> short names), fed by the typed changes of `Accounts/`.
//!
//! The follower first takes its position in the stream, then reads what is there (the
//! documented resynchronisation: nothing written in between is missed), then applies the
//! changes as the app writes, renames and moves links; at the end it checks the index
//! against a fresh read of the table. It also stops halfway and resumes from its cursor.
//!
//! Runs on the in-memory `FakeTable` by default (its stream split into several shards). With
//! `DYNATREE_TABLE=<name>` it runs on DynamoDB through the standard AWS configuration chain
//! (the table created with its stream if missing); for DynamoDB Local, start
//! `cargo run -p examples --bin dynamodb-local` and export what it prints.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dynatree::storage::Storage;
use dynatree::watch::{Change, Cursor, Watch};
use dynatree::{DynamoDbTable, Hierarchical, Path, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Debug, Clone, Serialize, Deserialize, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
    target: String,
}

/// The follower: per account, each word of a target -> the paths of the links that have it.
/// It keys links by their paths, which a change always carries (a moved object keeps the key
/// fields it was written with; its path is where it is).
#[derive(Default, Debug, PartialEq)]
struct SearchIndex {
    words: BTreeMap<(String, String), BTreeSet<String>>,
}

fn words(target: &str) -> impl Iterator<Item = String> + '_ {
    target
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2 && *w != "https" && *w != "www")
        .map(str::to_lowercase)
}

/// The account of a path `Accounts/<account>/...`.
fn account(path: &Path) -> String {
    path.components().get(1).cloned().unwrap_or_default()
}

impl SearchIndex {
    fn add(&mut self, path: &Path, target: &str) {
        for w in words(target) {
            self.words
                .entry((account(path), w))
                .or_default()
                .insert(path.to_string());
        }
    }

    fn remove(&mut self, path: &Path, target: &str) {
        for w in words(target) {
            let key = (account(path), w);
            if let Some(paths) = self.words.get_mut(&key) {
                paths.remove(&path.to_string());
                if paths.is_empty() {
                    self.words.remove(&key);
                }
            }
        }
    }

    /// Applies one change: a change carries whole values, so old and new are both at hand.
    fn apply(&mut self, change: &Change<Link>) {
        match change {
            Change::Created { path, value, .. } => self.add(path, &value.target),
            Change::Updated { path, old, new, .. } => {
                self.remove(path, &old.target);
                self.add(path, &new.target);
            }
            Change::Deleted { path, old, .. } => self.remove(path, &old.target),
            Change::Moved {
                from, to, value, ..
            } => {
                self.remove(from, &value.target);
                self.add(to, &value.target);
            }
            _ => {}
        }
    }

    fn search(&self, account: &str, word: &str) -> Vec<String> {
        self.words
            .get(&(account.to_owned(), word.to_owned()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The index of what the table holds under `Accounts/` now.
    async fn read(tree: &Tree) -> dynatree::Result<Self> {
        let mut index = Self::default();
        let mut objects = tree.descendants(["Accounts"]).items();
        while let Some(d) = objects.try_next().await? {
            let l: Link = d.value()?;
            index.add(&d.path, &l.target);
        }
        Ok(index)
    }
}

fn link(account: &str, short: &str, target: &str) -> Link {
    Link {
        account: account.into(),
        short: short.into(),
        target: target.into(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("DYNATREE_TABLE") {
        Ok(table) if !table.is_empty() => {
            let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            println!("# backend: DynamoDB table {table:?}");
            let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), table)
                .with_streams(aws_sdk_dynamodbstreams::Client::new(&config));
            let tree = Tree::new(table.clone());
            tree.create_table().await?;
            table.enable_stream().await?;
            run(tree).await
        }
        _ => {
            println!("# backend: in-memory FakeTable (set DYNATREE_TABLE to use DynamoDB)");
            let table = FakeTable::new();
            let tree = Tree::new(table.clone());
            tree.create_table().await?;
            table.enable_stream().await?;
            table.split_stream(3);
            run(tree).await
        }
    }
}

/// Applies every change the stream holds now (DynamoDB's stream lags its writes by a moment:
/// it reads until `expected` changes came, or for a few seconds).
async fn follow(
    watch: &mut Watch<Link>,
    index: &mut SearchIndex,
    expected: usize,
) -> dynatree::Result<usize> {
    let mut n = 0;
    for _ in 0..100 {
        while let Some(change) = watch.next_ready().await? {
            println!("  {}", describe(&change));
            index.apply(&change);
            n += 1;
        }
        if n >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(n)
}

fn describe(change: &Change<Link>) -> String {
    match change {
        Change::Created { path, value, .. } => format!("created {path} -> {}", value.target),
        Change::Updated { path, new, .. } => format!("updated {path} -> {}", new.target),
        Change::Deleted { path, .. } => format!("deleted {path}"),
        Change::Moved { from, to, .. } => format!("moved {from} to {to}"),
        _ => "another change".into(),
    }
}

async fn run(tree: Tree) -> Result<(), Box<dyn std::error::Error>> {
    let links = tree.repo::<Link>();
    // Links written before the follower exists.
    links
        .put(&link("acme", "docs", "https://docs.rs/dynatree"))
        .await?;
    links
        .put(&link("acme", "go", "https://github.com/crewjam/dynamotree"))
        .await?;

    // 1. The watch takes its position, 2. the follower reads the subtree, 3. it follows.
    let mut watch = tree.watch::<Link>(["Accounts"]);
    watch.start().await?;
    let mut index = SearchIndex::read(&tree).await?;
    println!("read the links; following the stream");

    links
        .put(&link("acme", "rust", "https://www.rust-lang.org"))
        .await?;
    links
        .put(&link(
            "globex",
            "crates",
            "https://crates.io/crates/dynatree",
        ))
        .await?;
    links
        .put(&link("acme", "docs", "https://docs.rs/dynatree/latest"))
        .await?;
    follow(&mut watch, &mut index, 3).await?;
    println!(
        "search acme 'dynatree': {:?}",
        index.search("acme", "dynatree")
    );

    // Stop, keep the cursor (a string), write meanwhile, resume from it.
    let cursor = watch.cursor().to_string();
    drop(watch);
    tree.move_subtree(
        ["Accounts", "acme", "Links", "go"],
        ["Accounts", "globex", "Links", "go"],
    )
    .await?;
    links
        .delete(&LinkKey {
            account: "acme".into(),
            short: "rust".into(),
        })
        .await?;
    let mut watch = tree
        .watch::<Link>(["Accounts"])
        .start_after(cursor.parse::<Cursor>()?);
    println!("resumed from the stored cursor");
    follow(&mut watch, &mut index, 2).await?;

    println!(
        "search globex 'dynamotree': {:?}",
        index.search("globex", "dynamotree")
    );
    println!("search acme 'rust': {:?}", index.search("acme", "rust"));

    // The follower agrees with a fresh read of the table.
    let fresh = SearchIndex::read(&tree).await?;
    assert_eq!(index, fresh, "the follower matches the table");
    println!("the index matches the table: {} words", index.words.len());
    Ok(())
}
