//! Sharded directories (`TreeBuilder::sharded`) against plain ones: the same random sequence
//! of puts, links, deletions, subtree deletions, moves and copies on a tree whose directories
//! are sharded and on one whose are not gives the same outcomes, the same names in every
//! directory (in order, through every page size and cursor), the same typed queries (ranges,
//! both directions, limits, cursors), the same descendants and the same check report.
//!
//! Budget: `DYNATREE_SHARDED_CASES` sequences (default 64).

use dynatree::{Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// The objects of the typed queries: the children of `a/{dir}`, a sharded directory.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "a/{dir}/{name}")]
struct Doc {
    dir: String,
    name: String,
    v: u32,
}

/// Top-level directories in 2 shards, `a/{dir}` in 3 (the root is never sharded).
fn sharded(table: &FakeTable) -> Tree<FakeTable> {
    Tree::builder(table.clone())
        .sharded("{top}", 2)
        .sharded("a/{dir}", 3)
        .build_static()
        .expect("tree")
}

const NAMES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// A path of 1 to 4 components over a small alphabet (so that paths meet).
fn path() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(proptest::sample::select(&NAMES[..]), 1..=4)
        .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<String>, u32),
    Link(Vec<String>, Vec<String>),
    Delete(Vec<String>),
    DeleteSubtree(Vec<String>),
    Move(Vec<String>, Vec<String>),
    Copy(Vec<String>, Vec<String>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (path(), 0u32..100).prop_map(|(p, v)| Op::Put(p, v)),
        1 => (path(), path()).prop_map(|(l, t)| Op::Link(l, t)),
        2 => path().prop_map(Op::Delete),
        1 => path().prop_map(Op::DeleteSubtree),
        1 => (path(), path()).prop_map(|(f, t)| Op::Move(f, t)),
        1 => (path(), path()).prop_map(|(f, t)| Op::Copy(f, t)),
    ]
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct V {
    v: u32,
}

/// What an operation did, comparable across the two trees.
async fn apply(tree: &Tree<FakeTable>, op: &Op) -> String {
    let kind = |e: dynatree::Error| format!("{:?}", e.kind());
    match op {
        Op::Put(p, v) => format!("{:?}", tree.put(p, &V { v: *v }).await.map_err(kind)),
        Op::Link(l, t) => format!("{:?}", tree.put_link(l, t).await.map_err(kind)),
        Op::Delete(p) => format!("{:?}", tree.delete(p).await.map_err(kind)),
        Op::DeleteSubtree(p) => format!("{:?}", tree.delete_subtree(p).await.map_err(kind)),
        Op::Move(f, t) => format!(
            "{:?}",
            tree.move_subtree(f, t)
                .await
                .map(|r| (r.nodes, r.objects))
                .map_err(kind)
        ),
        Op::Copy(f, t) => format!(
            "{:?}",
            tree.copy_subtree(f, t)
                .await
                .map(|r| (r.nodes, r.objects))
                .map_err(kind)
        ),
    }
}

/// Every name of every directory, read whole and page by page.
async fn listings(tree: &Tree<FakeTable>) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut dirs = vec![Vec::<String>::new()];
    while let Some(dir) = dirs.pop() {
        let names: Vec<String> = tree.list(&dir).try_collect().await.expect("list");
        for n in &names {
            let mut child = dir.clone();
            child.push(n.clone());
            dirs.push(child);
        }
        out.push((dir.join("/"), names));
    }
    out.sort();
    out
}

/// The descendants of the root, paged by `page_size`, each page resumed from its cursor by a
/// fresh request.
async fn descendants(tree: &Tree<FakeTable>, page_size: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let mut q = tree
            .descendants(dynatree::Path::root())
            .page_size(page_size);
        if let Some(c) = cursor.take() {
            q = q.start_after(c);
        }
        let mut pages = q.pages();
        let Some(page) = pages.try_next().await.expect("descendants") else {
            break;
        };
        out.extend(page.items.iter().map(|d| d.path.to_string()));
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    out
}

/// Typed queries over `a/{dir}`: ranges, both directions, a limit, and pages resumed from
/// their cursors. Read as JSON: the random operations put other values there too.
async fn queries(tree: &Tree<FakeTable>, dir: &str) -> Vec<Vec<serde_json::Value>> {
    type Json = serde_json::Value;
    let repo = tree.repo::<Doc>();
    let c = DocCollection { dir: dir.into() };
    let mut out = Vec::new();
    for q in [
        repo.query(&c),
        repo.query(&c).descending(),
        repo.query(&c).ge(&"c".to_owned()),
        repo.query(&c).lt(&"e".to_owned()).descending(),
        repo.query(&c).between(&"b".to_owned(), &"f".to_owned()),
        repo.query(&c).begins_with(&"d".to_owned()),
        repo.query(&c).limit(3),
        repo.query(&c).descending().limit(2),
        // Pages of two read on by one stream: the merge resumes each shard where it stopped.
        repo.query(&c).page_size(2),
        repo.query(&c).descending().page_size(2),
        repo.query(&c).ge(&"b".to_owned()).page_size(3).limit(4),
    ] {
        out.push(q.items_as::<Json>().try_collect().await.expect("query"));
    }
    // Two at a time, each page from a fresh request after the last cursor.
    for descending in [false, true] {
        let mut got = Vec::new();
        let mut cursor = None;
        loop {
            let mut q = repo.query(&c).page_size(2);
            if descending {
                q = q.descending();
            }
            if let Some(cur) = cursor.take() {
                q = q.start_after(cur);
            }
            let Some(page) = q.pages_as::<Json>().try_next().await.expect("page") else {
                break;
            };
            got.extend(page.items);
            match page.cursor {
                Some(cur) => cursor = Some(cur),
                None => break,
            }
        }
        out.push(got);
    }
    out
}

async fn differential(ops: Vec<Op>, docs: Vec<(usize, usize, u32)>) -> Result<(), TestCaseError> {
    let (t1, t2) = (FakeTable::new(), FakeTable::new());
    let plain = Tree::builder(t1.clone()).build_static().expect("tree");
    let shards = sharded(&t2);
    plain.create_table().await.expect("table");
    shards.create_table().await.expect("table");
    for (d, n, v) in &docs {
        let doc = Doc {
            dir: NAMES[*d % 2].into(),
            name: NAMES[*n].into(),
            v: *v,
        };
        plain.repo::<Doc>().put(&doc).await.expect("doc");
        shards.repo::<Doc>().put(&doc).await.expect("doc");
    }
    for op in &ops {
        let (a, b) = (apply(&plain, op).await, apply(&shards, op).await);
        prop_assert_eq!(a, b, "{:?}", op);
    }
    let names = listings(&plain).await;
    prop_assert_eq!(&names, &listings(&shards).await);
    // The same table read in pages of two: each shard's Query is limited, and the merge
    // reads on shard by shard.
    let paged = Tree::builder(t2.clone())
        .sharded("{top}", 2)
        .sharded("a/{dir}", 3)
        .page_size(2)
        .build_static()
        .expect("tree");
    prop_assert_eq!(&names, &listings(&paged).await);
    for size in [1, 3] {
        prop_assert_eq!(
            descendants(&plain, size).await,
            descendants(&shards, size).await
        );
    }
    for dir in ["a", "b"] {
        prop_assert_eq!(queries(&plain, dir).await, queries(&shards, dir).await);
    }
    let items = |t: &Tree<FakeTable>| {
        let t = t.clone();
        async move {
            t.list_items::<serde_json::Value>(["a"])
                .map_ok(|e| e.name)
                .try_collect::<Vec<_>>()
                .await
                .expect("items")
        }
    };
    prop_assert_eq!(items(&plain).await, items(&shards).await);
    prop_assert_eq!(items(&plain).await, items(&paged).await);
    // The same violations (the links the operations left dangling or in cycles), no others.
    let mut reports = Vec::new();
    for tree in [&plain, &shards] {
        let report = tree
            .check()
            .grace(std::time::Duration::ZERO)
            .run()
            .await
            .expect("check");
        let mut v: Vec<String> = report.violations().iter().map(|v| v.to_string()).collect();
        v.sort();
        reports.push(v);
    }
    prop_assert_eq!(&reports[0], &reports[1]);
    prop_assert_eq!(dynatree_testing::sim::check_rows(&t2.rows(), '¦'), []);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("DYNATREE_SHARDED_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_sharded_tree_behaves_as_a_plain_one(
        ops in proptest::collection::vec(op(), 0..24),
        docs in proptest::collection::vec((0usize..2, 0usize..7, 0u32..10), 0..12),
    ) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(differential(ops, docs))?;
    }
}
