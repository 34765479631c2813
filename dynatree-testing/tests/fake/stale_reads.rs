//! Eventually consistent reads on the fake ([`FakeTable::set_read_lag`]): what users' tests can
//! catch with it, and what dynatree promises under it.
//!
//! dynatree's promises, checked here:
//! - Reads the tree does not make strongly consistent (the default for `get`, `list`,
//!   `list_items`, `ancestors` and the descendants walk, see `TreeBuilder::consistent_reads`)
//!   may be stale; with `consistent_reads(true)` they never are.
//! - Index reads (`descendants` by the path index, `Repository::index`) are always eventually
//!   consistent: they may miss a just-written object, show an old value, or still show a
//!   just-deleted or just-moved object, exactly as the table was a few writes ago; once the
//!   index catches up (`settle()`) they are exact. They never show anything but object rows.
//! - Writes never depend on eventually consistent reads: every write protocol (put, delete,
//!   links, moves, subtree deletion) gives the same result on a replica that lags without
//!   limit as on a strongly consistent table.

use std::time::Duration;

use crate::fixtures::{User, UserKey, V};
use dynatree::storage::Storage;
use dynatree::{Path, RetryPolicy, Strategy, Tree, ops::OnChildren};
use dynatree_testing::FakeTable;
use dynatree_testing::conformance::assert_invariants;
use futures::TryStreamExt;

/// Reads lag this many writes: in these tests, "until `settle()`".
const FROZEN: usize = 1_000_000;

fn fast() -> RetryPolicy {
    RetryPolicy::new(8, Duration::from_millis(1), Duration::from_millis(20))
}

async fn tree_on(fake: &FakeTable, consistent: bool, path_index: Option<usize>) -> Tree {
    let mut b = Tree::builder(fake.clone())
        .retry_policy(fast())
        .consistent_reads(consistent)
        .indexes_of::<User>();
    if let Some(depth) = path_index {
        b = b.path_index(depth);
    }
    let tree = b.build().unwrap();
    tree.create_table().await.unwrap();
    tree
}

fn p(components: &[&str]) -> Path {
    Path::new(components.iter().copied()).unwrap()
}

/// Every object under `prefix` as (path, value), by the given strategy.
async fn objects(tree: &Tree, prefix: &[&str], strategy: Strategy) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = tree
        .descendants(p(prefix))
        .strategy(strategy)
        .items()
        .map_ok(|d| (d.path.to_string(), d.value::<V>().map_or(u32::MAX, |v| v.v)))
        .try_collect()
        .await
        .unwrap();
    out.sort();
    out
}

/// (a) A default tree reads eventually consistent: a get right after a put may miss it, an
/// update may show the old value, a delete may still show the object; `settle()` ends it.
#[tokio::test]
async fn a_default_get_may_be_stale_until_settled() {
    let fake = FakeTable::eventually_consistent(1);
    let tree = tree_on(&fake, false, None).await;
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    assert_eq!(
        tree.get::<V>(["a"]).await.unwrap(),
        None,
        "not replicated yet"
    );
    fake.settle();
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), Some(V { v: 1 }));

    tree.put(["a"], &V { v: 2 }).await.unwrap();
    assert_eq!(
        tree.get::<V>(["a"]).await.unwrap(),
        Some(V { v: 1 }),
        "old value"
    );
    fake.settle();
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), Some(V { v: 2 }));

    // A delete is more than one write request (the object, then the empty listing row).
    fake.set_read_lag(FROZEN);
    tree.delete(["a"]).await.unwrap();
    assert_eq!(
        tree.get::<V>(["a"]).await.unwrap(),
        Some(V { v: 2 }),
        "still there"
    );
    fake.settle();
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), None);

    // With a lag of 1 write request, the next write makes the previous one visible.
    fake.set_read_lag(1);
    tree.put(["b"], &V { v: 1 }).await.unwrap();
    tree.put(["c"], &V { v: 1 }).await.unwrap();
    assert_eq!(tree.get::<V>(["b"]).await.unwrap(), Some(V { v: 1 }));
    assert_eq!(tree.get::<V>(["c"]).await.unwrap(), None);
}

/// (b) Strongly consistent reads are never stale, however far the replica lags.
#[tokio::test]
async fn consistent_reads_are_never_stale() {
    let fake = FakeTable::eventually_consistent(FROZEN);
    let tree = tree_on(&fake, true, None).await;
    let mut model = std::collections::BTreeMap::new();
    for (i, path) in [
        &["x"][..],
        &["x", "a"],
        &["x", "a", "b"],
        &["x", "c"],
        &["y"],
    ]
    .into_iter()
    .enumerate()
    {
        let v = u32::try_from(i).unwrap();
        tree.put(path, &V { v }).await.unwrap();
        model.insert(p(path).to_string(), v);
        assert_eq!(tree.get::<V>(path).await.unwrap(), Some(V { v }));
    }
    tree.put(["x", "a"], &V { v: 10 }).await.unwrap();
    model.insert("/x/a".into(), 10);
    tree.delete(["x", "c"]).await.unwrap();
    model.remove("/x/c");
    assert_eq!(tree.get::<V>(["x", "c"]).await.unwrap(), None);
    let names: Vec<String> = tree.list(["x"]).try_collect().await.unwrap();
    assert_eq!(names, ["a"]);
    let items: Vec<dynatree::Entry<V>> = tree.list_items(["x"]).try_collect().await.unwrap();
    let items: Vec<(String, Option<V>)> = items.into_iter().map(|e| (e.name, e.value)).collect();
    assert_eq!(items, [("a".to_owned(), Some(V { v: 10 }))]);
    let crumbs: Vec<(Path, V)> = tree.ancestors(["x", "a", "b"]).await.unwrap();
    let crumbs: Vec<u32> = crumbs.into_iter().map(|(_, v)| v.v).collect();
    assert_eq!(crumbs, [0, 10]);
    let walk = objects(&tree, &[], Strategy::Walk).await;
    let expected: Vec<(String, u32)> = model.into_iter().collect();
    assert_eq!(walk, expected);

    // The raw backend: consistent GetItem, BatchGetItem and Query see the latest; the others
    // still see nothing of what was written (the table was empty before the first put).
    let key = dynatree::storage::Key::new("¦x", "¦");
    assert!(fake.get_item(&key, true).await.unwrap().is_some());
    assert!(fake.get_item(&key, false).await.unwrap().is_none());
    let both = fake.batch_get(vec![key.clone()], true).await.unwrap();
    assert_eq!(both.items.len(), 1);
    let stale = fake.batch_get(vec![key], false).await.unwrap();
    assert!(stale.items.is_empty());
    let q = dynatree::storage::Query::new("¦x¦");
    let latest = fake
        .query_page(&q.clone().consistent(true), None)
        .await
        .unwrap();
    assert_eq!(latest.items.len(), 1);
    assert!(fake.query_page(&q, None).await.unwrap().items.is_empty());
    assert!(fake.scan_page(None, None).await.unwrap().items.is_empty());
    fake.settle();
    assert!(!fake.scan_page(None, None).await.unwrap().items.is_empty());
}

/// (c) The path index may miss a just-written object, show an old value, or still show a
/// just-deleted one: exactly the objects as they were before the writes not yet replicated.
/// After `settle()` it equals the (consistent) walk.
#[tokio::test]
async fn descendants_by_the_path_index_are_a_past_state_until_settled() {
    let fake = FakeTable::new();
    let tree = tree_on(&fake, true, Some(1)).await;
    for (path, v) in [
        (&["t", "a"][..], 1),
        (&["t", "a", "x"], 2),
        (&["t", "b"], 3),
        (&["t", "c", "d"], 4),
    ] {
        tree.put(path, &V { v }).await.unwrap();
    }
    let before = objects(&tree, &["t"], Strategy::Walk).await;
    assert_eq!(objects(&tree, &["t"], Strategy::PathIndex).await, before);

    fake.set_read_lag(FROZEN);
    tree.put(["t", "new"], &V { v: 5 }).await.unwrap();
    tree.put(["t", "a"], &V { v: 10 }).await.unwrap();
    tree.delete(["t", "b"]).await.unwrap();
    tree.put_link(["t", "c", "link"], ["t", "a"]).await.unwrap();
    let now = objects(&tree, &["t"], Strategy::Walk).await;
    assert_ne!(now, before);
    assert_eq!(
        objects(&tree, &["t"], Strategy::PathIndex).await,
        before,
        "the index shows the objects as they were"
    );
    // `Auto` uses the index for a prefix at least as deep as it.
    assert_eq!(objects(&tree, &["t"], Strategy::Auto).await, before);
    fake.settle();
    assert_eq!(objects(&tree, &["t"], Strategy::PathIndex).await, now);

    // A lag of 2 writes: the index shows the state 2 writes ago.
    fake.set_read_lag(2);
    tree.put(["t", "e"], &V { v: 6 }).await.unwrap(); // write 1
    let one_write_in = objects(&tree, &["t"], Strategy::Walk).await;
    tree.put(["t", "f"], &V { v: 7 }).await.unwrap(); // write 2
    tree.put(["t", "g"], &V { v: 8 }).await.unwrap(); // write 3
    assert_eq!(
        objects(&tree, &["t"], Strategy::PathIndex).await,
        one_write_in
    );
    assert_invariants(&tree).await;
}

/// A move is invisible to the path index until it catches up: the objects still show under
/// the old prefix and not yet under the new one; then the index is exact, and it never shows a
/// row that is not an object (locks, intents, listing rows).
#[tokio::test]
async fn descendants_by_the_path_index_after_a_move() {
    let fake = FakeTable::new();
    let tree = tree_on(&fake, false, Some(1)).await;
    for (path, v) in [
        (&["t", "src"][..], 1),
        (&["t", "src", "a"], 2),
        (&["t", "src", "a", "b"], 3),
        (&["t", "src", "c"], 4),
        (&["t", "other"], 5),
    ] {
        tree.put(path, &V { v }).await.unwrap();
    }
    let src_before = objects(&tree, &["t", "src"], Strategy::PathIndex).await;
    assert_eq!(src_before.len(), 3);
    fake.set_read_lag(FROZEN);
    tree.move_subtree(["t", "src"], ["t", "dst"]).await.unwrap();
    assert_eq!(
        objects(&tree, &["t", "src"], Strategy::PathIndex).await,
        src_before
    );
    assert!(
        objects(&tree, &["t", "dst"], Strategy::PathIndex)
            .await
            .is_empty()
    );
    fake.settle();
    assert!(
        objects(&tree, &["t", "src"], Strategy::PathIndex)
            .await
            .is_empty()
    );
    let dst = objects(&tree, &["t", "dst"], Strategy::PathIndex).await;
    assert_eq!(dst, objects(&tree, &["t", "dst"], Strategy::Walk).await);
    assert_eq!(
        dst,
        [
            ("/t/dst/a".to_owned(), 2),
            ("/t/dst/a/b".to_owned(), 3),
            ("/t/dst/c".to_owned(), 4)
        ]
    );
    // Everything the index holds is an object row: its path names its own key.
    let all = tree
        .descendants(["t"])
        .strategy(Strategy::PathIndex)
        .items()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    for d in &all {
        assert_eq!(
            dynatree::storage::Key::from_item(&d.item).map(|k| k.range),
            Some(tree.reserved().to_string()),
            "{}",
            d.path
        );
    }
    assert_eq!(all.len(), 5);
    assert_eq!(tree.get::<V>(["t", "src"]).await.unwrap(), None);
    assert_eq!(tree.get::<V>(["t", "dst"]).await.unwrap(), Some(V { v: 1 }));
}

/// Typed index queries show the index as it was: an update is not seen under the new value,
/// the old value still finds the user, a delete still shows it; after `settle()`, exact.
#[tokio::test]
async fn typed_index_queries_are_a_past_state_until_settled() {
    let fake = FakeTable::new();
    let tree = tree_on(&fake, false, None).await;
    let users = tree.repo::<User>();
    let ann = User {
        id: "u1".into(),
        email: "ann@example.com".into(),
        team: "red".into(),
        joined: 1,
    };
    users.put(&ann).await.unwrap();
    let by_email = |e: &str| {
        let key = User::index_by_email(&e.to_owned());
        let users = &users;
        async move {
            users
                .index(key)
                .items()
                .try_collect::<Vec<User>>()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        by_email("ann@example.com").await,
        std::slice::from_ref(&ann)
    );
    fake.set_read_lag(FROZEN);
    let moved = User {
        email: "ann@new.example".into(),
        ..ann.clone()
    };
    users.put(&moved).await.unwrap();
    assert!(
        by_email("ann@new.example").await.is_empty(),
        "not yet indexed"
    );
    assert_eq!(
        by_email("ann@example.com").await,
        std::slice::from_ref(&ann),
        "the old entry"
    );
    fake.settle();
    assert!(by_email("ann@example.com").await.is_empty());
    assert_eq!(
        by_email("ann@new.example").await,
        std::slice::from_ref(&moved)
    );
    users.delete(&UserKey { id: "u1".into() }).await.unwrap();
    assert_eq!(by_email("ann@new.example").await, [moved], "still indexed");
    fake.settle();
    assert!(by_email("ann@new.example").await.is_empty());
}

/// The same writes, with stale reads between them, on a strongly consistent table and on
/// replicas that lag 1 to 8 writes or are frozen until the end: the same objects and rows, and
/// the invariants hold. Every write protocol reads what it
/// depends on consistently.
#[tokio::test]
async fn writes_do_not_depend_on_stale_reads() {
    /// Stale reads between the writes, in case what they return leaks into a write.
    async fn read_around(tree: &Tree) {
        for dir in [
            &[][..],
            &["org"],
            &["org", "eng"],
            &["org", "tech"],
            &["tmp", "a"],
        ] {
            let _: Vec<String> = tree.list(p_or_root(dir)).try_collect().await.unwrap();
            let _: Vec<dynatree::Entry<V>> =
                tree.list_items(p_or_root(dir)).try_collect().await.unwrap();
        }
        let _ = objects(tree, &[], Strategy::Walk).await;
        let _ = objects(tree, &["org"], Strategy::PathIndex).await;
        let _: Option<V> = tree.get(["org", "eng", "db"]).await.unwrap();
        let _: Vec<(Path, V)> = tree.ancestors(["org", "tech", "db", "x"]).await.unwrap();
    }
    fn p_or_root(dir: &[&str]) -> Path {
        if dir.is_empty() { Path::root() } else { p(dir) }
    }
    async fn script(tree: &Tree) {
        for path in [
            &["org"][..],
            &["org", "eng"],
            &["org", "eng", "db"],
            &["org", "eng", "db", "x"],
            &["org", "eng", "web"],
            &["org", "sales"],
            &["org", "sales", "emea"],
        ] {
            tree.put(path, &V { v: 1 }).await.unwrap();
        }
        tree.put(["org", "eng"], &V { v: 2 }).await.unwrap();
        read_around(tree).await;
        tree.put_link(["org", "alias"], ["org", "eng", "web"])
            .await
            .unwrap();
        tree.delete(["org", "eng", "web"]).await.unwrap();
        read_around(tree).await;
        tree.put(["tmp", "a", "b"], &V { v: 3 }).await.unwrap();
        tree.delete(["tmp", "a", "b"]).await.unwrap();
        tree.move_subtree(["org", "eng"], ["org", "tech"])
            .await
            .unwrap();
        read_around(tree).await;
        tree.copy_subtree(["org", "tech"], ["org", "copy"])
            .await
            .unwrap();
        tree.put(["org", "tech", "db", "y"], &V { v: 4 })
            .await
            .unwrap();
        assert_eq!(tree.delete_subtree(["org", "copy"]).await.unwrap(), 3);
        read_around(tree).await;
        tree.delete_node(["org", "sales"], OnChildren::Reparent)
            .await
            .unwrap();
        tree.put(["org", "sales"], &V { v: 5 }).await.unwrap();
    }
    let consistent = FakeTable::new();
    let reference = tree_on(&consistent, false, Some(1)).await;
    script(&reference).await;

    let expected = objects(&reference, &[], Strategy::Walk).await;
    let expected_index = objects(&reference, &["org"], Strategy::PathIndex).await;
    let keys = |rows: Vec<dynatree::storage::Item>| {
        rows.iter()
            .filter_map(dynatree::storage::Key::from_item)
            .filter(|k| !k.hash.contains("intents"))
            .collect::<Vec<_>>()
    };
    let expected_keys = keys(consistent.rows());
    for lag in [1, 2, 3, 5, 8, FROZEN] {
        let fake = FakeTable::eventually_consistent(lag);
        let tree = tree_on(&fake, false, Some(1)).await;
        script(&tree).await;
        if lag == FROZEN {
            assert_eq!(
                tree.get::<V>(["org"]).await.unwrap(),
                None,
                "frozen replica"
            );
        }
        fake.settle();
        assert_eq!(
            objects(&tree, &[], Strategy::Walk).await,
            expected,
            "lag {lag}"
        );
        assert_eq!(
            objects(&tree, &["org"], Strategy::PathIndex).await,
            expected_index,
            "lag {lag}"
        );
        assert_eq!(keys(fake.rows()), expected_keys, "lag {lag}");
        assert_invariants(&tree).await;
    }
}
