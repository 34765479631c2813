//! `Tree::descendants` with the query vocabulary: `limit`, `page_size`, `pages()` and cursors,
//! by the walk and by the path index.

use dynatree::{Cursor, Descendant, ErrorKind, Path, Strategy, Tree, TypedPage};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

/// Objects under `t` (including names where one is a prefix of a sibling) and one outside it.
const OBJECTS: &[&[&str]] = &[
    &["t", "a"],
    &["t", "a", "b"],
    &["t", "a", "b", "c"],
    &["t", "a", "b", "d"],
    &["t", "a", "e"],
    &["t", "ab"],
    &["t", "ab", "x"],
    &["t", "b", "deep", "er"], // `t/b` and `t/b/deep` have no object
    &["t", "c"],
    &["u", "z"],
];

async fn tree() -> (FakeTable, Tree) {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone()).path_index(1).build().unwrap();
    tree.create_table().await.unwrap();
    for (i, p) in OBJECTS.iter().enumerate() {
        tree.put(
            *p,
            &V {
                v: u32::try_from(i).unwrap(),
            },
        )
        .await
        .unwrap();
    }
    (fake, tree)
}

fn paths(items: &[Descendant]) -> Vec<String> {
    items.iter().map(|d| d.path.to_string()).collect()
}

async fn all(tree: &Tree, strategy: Strategy, max_depth: Option<usize>) -> Vec<String> {
    let mut q = tree.descendants(["t"]).strategy(strategy);
    if let Some(m) = max_depth {
        q = q.max_depth(m);
    }
    paths(&q.items().try_collect::<Vec<_>>().await.unwrap())
}

#[tokio::test]
async fn the_walk_is_depth_first_and_the_index_in_stored_key_order() {
    let (_, tree) = tree().await;
    assert_eq!(
        all(&tree, Strategy::Walk, None).await,
        [
            "/t/a",
            "/t/a/b",
            "/t/a/b/c",
            "/t/a/b/d",
            "/t/a/e",
            "/t/ab",
            "/t/ab/x",
            "/t/b/deep/er",
            "/t/c"
        ]
    );
    // `¦t¦ab` sorts before `¦t¦a¦b`: `b` (0x62) is below the reserved character's first byte.
    assert_eq!(
        all(&tree, Strategy::PathIndex, None).await,
        [
            "/t/a",
            "/t/ab",
            "/t/ab/x",
            "/t/a/b",
            "/t/a/b/c",
            "/t/a/b/d",
            "/t/a/e",
            "/t/b/deep/er",
            "/t/c"
        ]
    );
    assert_eq!(
        all(&tree, Strategy::Walk, Some(2)).await,
        ["/t/a", "/t/a/b", "/t/a/e", "/t/ab", "/t/ab/x", "/t/c"]
    );
    assert_eq!(
        all(&tree, Strategy::PathIndex, Some(1)).await,
        ["/t/a", "/t/ab", "/t/c"]
    );
    assert!(all(&tree, Strategy::Walk, Some(0)).await.is_empty());
    assert!(all(&tree, Strategy::PathIndex, Some(0)).await.is_empty());
}

/// Every page read with a new query from the previous page's cursor (through its string
/// form), for every page size, limit and depth: the pages together are exactly `items()`,
/// none is empty, and every page but the last has a cursor.
#[tokio::test]
async fn pages_resumed_from_cursors_give_every_descendant_once() {
    let (_, tree) = tree().await;
    for strategy in [Strategy::Walk, Strategy::PathIndex] {
        for max_depth in [None, Some(1), Some(2), Some(3)] {
            let expected = all(&tree, strategy, max_depth).await;
            for page_size in 1..=4u32 {
                for limit in [None, Some(1), Some(4), Some(100)] {
                    let query = || {
                        let mut q = tree
                            .descendants(["t"])
                            .strategy(strategy)
                            .page_size(page_size)
                            .concurrency(2);
                        if let Some(m) = max_depth {
                            q = q.max_depth(m);
                        }
                        if let Some(n) = limit {
                            q = q.limit(n);
                        }
                        q
                    };
                    let what = format!("{strategy:?} {max_depth:?} {page_size} {limit:?}");
                    // In one stream.
                    let pages: Vec<TypedPage<Descendant>> =
                        query().pages().try_collect().await.unwrap();
                    let flat: Vec<String> = pages.iter().flat_map(|p| paths(&p.items)).collect();
                    let want: Vec<String> = expected
                        .iter()
                        .take(limit.unwrap_or(usize::MAX))
                        .cloned()
                        .collect();
                    assert_eq!(flat, want, "{what}");
                    assert!(pages.iter().all(|p| !p.items.is_empty()), "{what}");
                    if let Some((last, rest)) = pages.split_last() {
                        assert!(rest.iter().all(|p| p.cursor.is_some()), "{what}");
                        // The last page's cursor, if it has one (the walk cannot know that
                        // nothing follows without a request), leads to nothing.
                        if let Some(c) = &last.cursor {
                            assert!(
                                limit.is_none_or(|n| flat.len() < n),
                                "{what}: no cursor once the limit is reached"
                            );
                            let more: Vec<Descendant> = query()
                                .start_after(c.clone())
                                .items()
                                .try_collect()
                                .await
                                .unwrap();
                            assert!(more.is_empty(), "{what}");
                        }
                    }
                    // One page per query, each resumed from the last cursor (no limit: a
                    // limit counts per query).
                    if limit.is_some() {
                        continue;
                    }
                    let mut resumed = Vec::new();
                    let mut cursor: Option<String> = None;
                    loop {
                        let mut q = query();
                        if let Some(c) = &cursor {
                            q = q.start_after(c.parse::<Cursor>().unwrap());
                        }
                        let Some(page) = q.pages().try_next().await.unwrap() else {
                            break;
                        };
                        resumed.extend(paths(&page.items));
                        match page.cursor {
                            Some(c) => cursor = Some(c.to_string()),
                            None => break,
                        }
                    }
                    assert_eq!(resumed, expected, "{what}, resumed");
                }
            }
        }
    }
}

#[tokio::test]
async fn a_cursor_is_refused_on_another_query() {
    let (fake, tree) = tree().await;
    let cursor = |strategy| {
        let tree = tree.clone();
        async move {
            tree.descendants(["t"])
                .strategy(strategy)
                .page_size(1)
                .pages()
                .try_next()
                .await
                .unwrap()
                .unwrap()
                .cursor
                .unwrap()
        }
    };
    let walk = cursor(Strategy::Walk).await;
    let index = cursor(Strategy::PathIndex).await;
    fake.reset_metrics();
    let refused = |q: dynatree::Descendants| async move {
        q.items().try_collect::<Vec<_>>().await.unwrap_err().kind()
    };
    let t = || tree.descendants(["t"]);
    for q in [
        t().strategy(Strategy::PathIndex).start_after(walk.clone()),
        t().strategy(Strategy::Walk).start_after(index.clone()),
        t().strategy(Strategy::Walk)
            .max_depth(2)
            .start_after(walk.clone()),
        tree.descendants(["u"])
            .strategy(Strategy::Walk)
            .start_after(walk.clone()),
        tree.descendants(["t", "a"])
            .strategy(Strategy::Walk)
            .start_after(walk.clone()),
    ] {
        assert_eq!(refused(q).await, ErrorKind::InvalidArgument);
    }
    assert_eq!(fake.metrics().total_requests(), 0, "nothing sent");
    // A page size is not part of the query: the cursor goes on with another one.
    let rest: Vec<Descendant> = t()
        .strategy(Strategy::Walk)
        .page_size(3)
        .start_after(walk)
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rest.len(), 8);
    assert_eq!(
        "not a cursor".parse::<Cursor>().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

/// The object a cursor names was deleted before the next page: the walk goes on after it
/// (its subtree, then its later siblings); so does the index.
#[tokio::test]
async fn a_cursor_outlives_its_object() {
    let (_, tree) = tree().await;
    for strategy in [Strategy::Walk, Strategy::PathIndex] {
        let q = || tree.descendants(["t"]).strategy(strategy);
        let limited: Vec<TypedPage<Descendant>> = q().limit(2).pages().try_collect().await.unwrap();
        assert!(
            limited.last().unwrap().cursor.is_none(),
            "the limit is reached"
        );
        let page = q().page_size(1).pages().try_next().await.unwrap().unwrap();
        assert_eq!(paths(&page.items), ["/t/a"]);
        tree.delete(["t", "a"]).await.unwrap();
        let rest: Vec<Descendant> = q()
            .start_after(page.cursor.unwrap())
            .items()
            .try_collect()
            .await
            .unwrap();
        let expected = all(&tree, strategy, None).await;
        assert_eq!(paths(&rest), expected);
        assert_eq!(expected.len(), 8);
        tree.put(["t", "a"], &V { v: 0 }).await.unwrap();
    }
}

/// Resuming a deep walk costs one listing Query per level above the cursor, not a walk of
/// what came before it.
#[tokio::test]
async fn resuming_a_walk_lists_only_the_cursors_ancestors() {
    let fake = FakeTable::new();
    let tree = Tree::new(fake.clone());
    tree.create_table().await.unwrap();
    for i in 0..50 {
        tree.put(["r", &format!("early{i:02}"), "x"], &V { v: i })
            .await
            .unwrap();
    }
    tree.put(["r", "m", "n", "o", "p"], &V { v: 0 })
        .await
        .unwrap();
    tree.put(["r", "z"], &V { v: 0 }).await.unwrap();
    let cursor = {
        let mut pages = tree.descendants(["r"]).page_size(1).concurrency(1).pages();
        loop {
            let page = pages.try_next().await.unwrap().unwrap();
            if paths(&page.items).last().map(String::as_str) == Some("/r/m/n/o/p") {
                break page.cursor.unwrap();
            }
        }
    };
    fake.reset_metrics();
    let rest: Vec<Descendant> = tree
        .descendants(["r"])
        .start_after(cursor)
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(paths(&rest), ["/r/z"]);
    // `r/m/n/o/p`'s own children, then after `p`, `o`, `n` and `m` in their parents: 5
    // Queries; `r/z`'s children: 1; one BatchGetItem for `z`.
    let m = fake.metrics();
    assert_eq!(m.requests("Query"), 6, "{:?}", m.requests_by_operation());
    assert_eq!(m.requests("BatchGetItem"), 1);
}

#[tokio::test]
async fn a_limit_of_zero_sends_nothing() {
    let (fake, tree) = tree().await;
    fake.reset_metrics();
    for strategy in [Strategy::Walk, Strategy::PathIndex] {
        let pages: Vec<TypedPage<Descendant>> = tree
            .descendants(["t"])
            .strategy(strategy)
            .limit(0)
            .pages()
            .try_collect()
            .await
            .unwrap();
        assert!(pages.is_empty());
    }
    assert_eq!(fake.metrics().total_requests(), 0);
    let root: Vec<Descendant> = tree
        .descendants(Path::root())
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(root.len(), OBJECTS.len());
}
