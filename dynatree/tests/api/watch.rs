//! `Tree::watch`: the typed changes of a subtree read from the fake table's sharded stream:
//! from now on, only the subtree, moves across its border as creations and deletions, shards
//! read parents first, a cursor to resume from exactly, an expired cursor as a typed error,
//! the resynchronisation the docs give, scopes, and what a poll sends.

use std::time::Duration;

use dynatree::storage::Storage;
use dynatree::watch::{Change, Cursor, Watch};
use dynatree::{ErrorKind, Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
    url: String,
}

fn link(account: &str, short: &str, url: &str) -> Link {
    Link {
        account: account.into(),
        short: short.into(),
        url: url.into(),
    }
}

async fn setup() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    table.enable_stream().await.unwrap();
    (table, tree)
}

/// One line per change.
fn line(change: &Change<Link>) -> String {
    match change {
        Change::Created { path, value, .. } => format!("created {path} {}", value.url),
        Change::Updated { path, old, new, .. } => {
            format!("updated {path} {} -> {}", old.url, new.url)
        }
        Change::Deleted { path, .. } => format!("deleted {path}"),
        Change::Moved { from, to, .. } => format!("moved {from} {to}"),
        _ => unreachable!("a change this test does not know"),
    }
}

/// The changes a watch hands until it has nothing more to hand now.
async fn drain(watch: &mut Watch<Link>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(Some(change)) = tokio::time::timeout(Duration::from_millis(50), watch.next()).await
    {
        out.push(line(&change.unwrap()));
    }
    out
}

fn fast(watch: Watch<Link>) -> Watch<Link> {
    watch.idle(Duration::from_millis(5))
}

#[tokio::test]
async fn a_watch_hands_the_changes_under_its_path_from_its_start() {
    let (_table, tree) = setup().await;
    let links = tree.repo::<Link>();
    links.put(&link("acme", "old", "before")).await.unwrap();
    let mut watch = fast(tree.watch::<Link>(["Accounts", "acme"]));
    watch.start().await.unwrap();

    links.put(&link("acme", "a", "1")).await.unwrap();
    links.put(&link("acme", "a", "2")).await.unwrap();
    links.put(&link("globex", "g", "1")).await.unwrap();
    tree.move_subtree(
        ["Accounts", "acme", "Links", "a"],
        ["Accounts", "acme", "Links", "b"],
    )
    .await
    .unwrap();
    // Out of the subtree, and in again.
    tree.move_subtree(
        ["Accounts", "acme", "Links", "b"],
        ["Accounts", "globex", "Links", "b"],
    )
    .await
    .unwrap();
    tree.move_subtree(
        ["Accounts", "globex", "Links", "g"],
        ["Accounts", "acme", "Links", "g"],
    )
    .await
    .unwrap();
    tree.delete(["Accounts", "acme", "Links", "old"])
        .await
        .unwrap();

    assert_eq!(
        drain(&mut watch).await,
        [
            "created /Accounts/acme/Links/a 1",
            "updated /Accounts/acme/Links/a 1 -> 2",
            "moved /Accounts/acme/Links/a /Accounts/acme/Links/b",
            "deleted /Accounts/acme/Links/b",
            "created /Accounts/acme/Links/g 1",
            "deleted /Accounts/acme/Links/old",
        ]
    );
}

#[tokio::test]
async fn a_stored_cursor_resumes_right_after_the_last_change_handed() {
    let (_table, tree) = setup().await;
    let links = tree.repo::<Link>();
    let mut watch = fast(tree.watch::<Link>(["Accounts"]));
    watch.start().await.unwrap();
    for i in 0..5 {
        links
            .put(&link("acme", &format!("l{i}"), "1"))
            .await
            .unwrap();
    }
    let mut first = Vec::new();
    for _ in 0..2 {
        first.push(line(&watch.try_next().await.unwrap().unwrap()));
    }
    let stored = watch.cursor().to_string();
    drop(watch);
    links.put(&link("acme", "l5", "1")).await.unwrap();

    let cursor: Cursor = stored.parse().unwrap();
    let mut resumed = fast(tree.watch::<Link>(["Accounts"]).start_after(cursor));
    let rest = drain(&mut resumed).await;
    let all: Vec<String> = first.into_iter().chain(rest).collect();
    let expected: Vec<String> = (0..6)
        .map(|i| format!("created /Accounts/acme/Links/l{i} 1"))
        .collect();
    assert_eq!(all, expected, "each change once, in order");

    // The cursor also travels through serde, as a string.
    let json = serde_json::to_string(resumed.cursor()).unwrap();
    let back: Cursor = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, resumed.cursor());
    assert_eq!(
        "w1;x".parse::<Cursor>().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[tokio::test]
async fn shards_are_read_parents_first_so_each_path_keeps_its_order() {
    let (table, tree) = setup().await;
    let links = tree.repo::<Link>();
    let mut watch = fast(tree.watch::<Link>(["Accounts"]));
    watch.start().await.unwrap();
    let mut expected: Vec<Vec<String>> = vec![Vec::new(); 6];
    for round in 0..4 {
        for (i, per_path) in expected.iter_mut().enumerate() {
            let url = format!("v{round}");
            links
                .put(&link("acme", &format!("l{i}"), &url))
                .await
                .unwrap();
            per_path.push(url);
        }
        // The stream splits: closed shards, and children of them (2, then 3, …).
        table.split_stream(round + 2);
    }
    let shards = table.stream_shards().await.unwrap();
    assert!(shards.len() > 6, "several generations of shards");

    let mut seen: Vec<Vec<String>> = vec![Vec::new(); 6];
    let mut watch_changes = 0;
    while watch_changes < 24 {
        let change = watch.try_next().await.unwrap().unwrap();
        let i: usize = change.path().name().unwrap()[1..].parse().unwrap();
        seen[i].push(change.value().unwrap().url.clone());
        watch_changes += 1;
    }
    assert_eq!(seen, expected, "per path, every change once and in order");
}

#[tokio::test]
async fn a_transaction_split_across_shards_carries_its_identity_on_each_change() {
    let (table, tree) = setup().await;
    table.split_stream(4);
    let mut watch = fast(tree.watch::<Link>(["Accounts"]));
    watch.start().await.unwrap();
    let mut tx = tree.transaction();
    for account in ["a", "b", "c", "d", "e"] {
        tx.put(&link(account, "x", "1"));
    }
    tx.idempotency_token("order-1");
    tx.commit().await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..5 {
        let change = watch.try_next().await.unwrap().unwrap();
        ids.push(change.info().transaction.clone());
    }
    assert!(
        ids.iter().all(|t| t.as_deref() == Some("order-1")),
        "{ids:?}"
    );
}

#[tokio::test]
async fn a_cursor_the_stream_no_longer_holds_is_a_typed_error_and_resync_misses_nothing() {
    let (table, tree) = setup().await;
    let links = tree.repo::<Link>();
    let mut watch = fast(tree.watch::<Link>(["Accounts"]));
    watch.start().await.unwrap();
    links.put(&link("acme", "a", "1")).await.unwrap();
    watch.try_next().await.unwrap().unwrap();
    let stored = watch.cursor().clone();
    drop(watch);

    links.put(&link("acme", "b", "1")).await.unwrap();
    table.split_stream(1);
    table.trim_stream(); // a day passes
    let mut stale = fast(tree.watch::<Link>(["Accounts"]).start_after(stored));
    let err = stale.try_next().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CursorExpired);
    // It stays expired.
    assert_eq!(
        stale.try_next().await.unwrap_err().kind(),
        ErrorKind::CursorExpired
    );

    // Resynchronise: a new watch takes its position, then the subtree is read, then the watch
    // is consumed; a write between the two is in the watch (and maybe in the read, too).
    let mut fresh = fast(tree.watch::<Link>(["Accounts"]));
    fresh.start().await.unwrap();
    links.put(&link("acme", "c", "1")).await.unwrap();
    let mut state: std::collections::BTreeMap<String, String> = tree
        .entities::<Link>()
        .descendants(["Accounts"])
        .map_ok(|l| (format!("/Accounts/{}/Links/{}", l.account, l.short), l.url))
        .try_collect()
        .await
        .unwrap();
    links.put(&link("acme", "a", "2")).await.unwrap();
    for change in drain(&mut fresh).await {
        let mut words = change.split(' ');
        let (_, path, url) = (
            words.next(),
            words.next().unwrap(),
            words.next_back().unwrap(),
        );
        state.insert(path.to_owned(), url.to_owned());
    }
    let table_now: std::collections::BTreeMap<String, String> = tree
        .entities::<Link>()
        .descendants(["Accounts"])
        .map_ok(|l| (format!("/Accounts/{}/Links/{}", l.account, l.short), l.url))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(state, table_now);
}

#[tokio::test]
async fn a_scope_watches_with_paths_relative_to_its_root() {
    let (_table, tree) = setup().await;
    let tenant = tree.scope(["Tenants", "t1"]).unwrap();
    let other = tree.scope(["Tenants", "t2"]).unwrap();
    let mut watch = fast(tenant.watch::<Link>(["Accounts"]));
    watch.start().await.unwrap();
    tenant
        .repo::<Link>()
        .put(&link("acme", "a", "1"))
        .await
        .unwrap();
    other
        .repo::<Link>()
        .put(&link("acme", "b", "1"))
        .await
        .unwrap();
    assert_eq!(
        drain(&mut watch).await,
        ["created /Accounts/acme/Links/a 1"]
    );
}

#[tokio::test]
async fn a_caller_mistake_is_the_only_item_and_nothing_is_sent() {
    let (table, tree) = setup().await;
    table.reset_metrics();
    let mut bad = tree.watch::<Link>(["Accounts", "a\u{a6}b"]);
    assert_eq!(
        bad.try_next().await.unwrap_err().kind(),
        ErrorKind::InvalidPath
    );
    assert!(bad.next().await.is_none(), "the stream ends after it");
    assert_eq!(table.metrics().total_requests(), 0);

    // A table without a stream: NotFound, and polling again asks again.
    let plain = FakeTable::new();
    let tree = Tree::new(plain.clone());
    tree.create_table().await.unwrap();
    let mut watch = tree.watch::<Link>(["Accounts"]);
    assert_eq!(watch.start().await.unwrap_err().kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn an_idle_poll_sends_one_get_records_per_open_shard() {
    let (table, tree) = setup().await;
    table.split_stream(3);
    let mut watch = fast(tree.watch::<Link>(["Accounts"]));
    table.reset_metrics();
    watch.start().await.unwrap();
    // Taking the position: the shards, and each open shard's newest position.
    assert_eq!(table.metrics().requests("DescribeStream"), 1);
    assert_eq!(table.metrics().requests("GetRecords"), 3);

    table.reset_metrics();
    assert!(drain(&mut watch).await.is_empty());
    let polls = table.metrics().requests("GetRecords");
    assert!(polls >= 3 && polls % 3 == 0, "{polls} GetRecords");
    assert_eq!(
        table.metrics().requests("DescribeStream"),
        0,
        "no shard ended"
    );

    // 100 changes in one shard generation: one page per shard.
    table.reset_metrics();
    let links = tree.repo::<Link>();
    for i in 0..100 {
        links
            .put(&link("acme", &format!("l{i}"), "1"))
            .await
            .unwrap();
    }
    let puts = table.metrics().total_requests();
    table.reset_metrics();
    let mut handed = 0;
    while handed < 100 {
        watch.try_next().await.unwrap().unwrap();
        handed += 1;
    }
    let reads = table.metrics().total_requests();
    assert!(puts > 0);
    assert!(reads <= 6, "{reads} requests to read 100 changes");
}

#[tokio::test]
async fn a_cursor_older_than_the_streams_retention_that_reads_a_shard_from_its_start_expired() {
    let (table, tree) = setup().await;
    let shard = table.stream_shards().await.unwrap().remove(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let two_days = 2 * 24 * 60 * 60;
    // A shard the cursor had to read again from its start (a change held back at its first
    // record), taken two days ago: what it held then may be trimmed.
    let old: Cursor = format!("w1;{}@{};{}=+", now - two_days, now - two_days, shard.id())
        .parse()
        .unwrap();
    let mut watch = fast(tree.watch::<Link>(["Accounts"]).start_after(old));
    assert_eq!(
        watch.try_next().await.unwrap_err().kind(),
        ErrorKind::CursorExpired
    );
    // Taken a minute ago, the same cursor reads on.
    let recent: Cursor = format!("w1;{}@{};{}=+", now - 60, now - 60, shard.id())
        .parse()
        .unwrap();
    let mut watch = fast(tree.watch::<Link>(["Accounts"]).start_after(recent));
    tree.repo::<Link>()
        .put(&link("acme", "a", "1"))
        .await
        .unwrap();
    assert_eq!(
        drain(&mut watch).await,
        ["created /Accounts/acme/Links/a 1"]
    );
}
