//! The link index (`TreeBuilder::link_index`): every link row is written with its entry, and a
//! move that reports or rewrites links finds them with one Query of the entries of its
//! source's targets, at a cost that grows with those links and not with the table.
// Fenced puts are deprecated; what they still do is measured and tested until they go.
#![allow(deprecated)]

use dynatree::check::Class;
use dynatree::ops::LinkPolicy;
use dynatree::storage::{
    Condition, DEFAULT_RESERVED, Item, Key, Query, Storage, TableSettings, Value,
};
use dynatree::transfer::Record;
use dynatree::{ErrorKind, Path, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

fn p(s: &str) -> Path {
    Path::parse(s).expect("path")
}

async fn indexed(table: &FakeTable, depth: usize) -> Tree {
    let tree = Tree::builder(table.clone())
        .link_index(depth)
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    tree
}

/// The entries in the partition of targets under `/Accounts/<account>` (depth 2), as
/// `(link, target)`.
async fn entries(table: &FakeTable, account: &str) -> Vec<(String, String)> {
    let r = DEFAULT_RESERVED;
    let q = Query::new(format!("{r}Accounts{r}{account}{r}{r}links")).consistent(true);
    let page = table.query_page(&q, None).await.expect("query");
    page.items
        .iter()
        .map(|i| {
            let k = Key::from_item(i).expect("key");
            (k.hash, k.range)
        })
        .collect()
}

/// Five links into `/Accounts/1/Files`, one to a target there that does not exist (it must
/// be found too), one into another account, and `filler` unrelated objects.
async fn links_and_filler(table: &FakeTable, filler: usize) -> Tree {
    let tree = indexed(table, 2).await;
    for i in 0..5 {
        tree.put(["Accounts", "1", "Files", &format!("f{i}")], &V { v: i })
            .await
            .expect("put");
        tree.put_link(
            ["Shortcuts", &format!("s{i}")],
            ["Accounts", "1", "Files", &format!("f{i}")],
        )
        .await
        .expect("link");
    }
    tree.put_link(
        ["Shortcuts", "ghost"],
        ["Accounts", "1", "Files", "nothing"],
    )
    .await
    .expect("link to a target that does not exist");
    tree.put(["Accounts", "2", "Files", "g"], &V { v: 9 })
        .await
        .expect("put");
    tree.put_link(["Shortcuts", "other"], ["Accounts", "2", "Files", "g"])
        .await
        .expect("link");
    let rows = (0..filler).map(|i| {
        Ok(Record::Object {
            path: Path::new(["Other", &format!("o{i}")]).expect("path"),
            item: Item::new(),
            expires: None,
        })
    });
    tree.import(futures::stream::iter(rows))
        .run()
        .await
        .expect("filler");
    tree
}

#[tokio::test]
async fn a_move_finds_the_links_into_its_source_with_one_query_whatever_the_table_holds() {
    let mut costs = Vec::new();
    for filler in [100, 3_000] {
        let table = FakeTable::new();
        let tree = links_and_filler(&table, filler).await;
        table.reset_metrics();
        let report = tree
            .move_subtree_with(
                ["Accounts", "1", "Files"],
                ["Accounts", "1", "Old"],
                LinkPolicy::Rewrite,
            )
            .await
            .expect("move");
        let mut want: Vec<(Path, Path)> = (0..5)
            .map(|i| {
                (
                    p(&format!("/Shortcuts/s{i}")),
                    p(&format!("/Accounts/1/Files/f{i}")),
                )
            })
            .collect();
        want.push((p("/Shortcuts/ghost"), p("/Accounts/1/Files/nothing")));
        want.sort();
        assert_eq!(report.links, want);
        let m = table.metrics();
        assert_eq!(m.requests("Scan"), 0, "no Scan with the index");
        costs.push((m.requests_by_operation().clone(), m.read_units()));
        for i in 0..5 {
            assert_eq!(
                tree.read_link(["Shortcuts", &format!("s{i}")])
                    .await
                    .expect("link")
                    .to_string(),
                format!("/Accounts/1/Old/f{i}")
            );
        }
        assert_eq!(
            tree.read_link(["Shortcuts", "ghost"])
                .await
                .expect("link")
                .to_string(),
            "/Accounts/1/Old/nothing"
        );
        assert_eq!(
            tree.read_link(["Shortcuts", "other"])
                .await
                .expect("link")
                .to_string(),
            "/Accounts/2/Files/g"
        );
        // The rewritten links' entries are under their new targets; the old ones were
        // dropped when the last look found them stale.
        let left = entries(&table, "1").await;
        assert_eq!(left.len(), 6, "{left:?}");
        assert!(left.iter().all(|(_, r)| r.starts_with("¦Old¦")), "{left:?}");
    }
    // The same requests and read units with 100 and 3,000 other rows.
    assert_eq!(costs[0], costs[1]);
}

#[tokio::test]
async fn without_the_index_the_same_move_scans_the_table() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.expect("table");
    tree.put(["Accounts", "1", "Files", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put_link(["Shortcuts", "s"], ["Accounts", "1", "Files", "f"])
        .await
        .expect("link");
    table.reset_metrics();
    let report = tree
        .move_subtree(["Accounts", "1", "Files"], ["Accounts", "1", "Old"])
        .await
        .expect("move");
    assert_eq!(report.links.len(), 1);
    assert_eq!(table.metrics().requests("Scan"), 1);
}

#[tokio::test]
async fn a_link_goes_out_in_one_transaction_with_its_entry() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    tree.put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put_link(["l"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    assert_eq!(entries(&table, "1").await.len(), 1);

    // An overwrite of the link from a process that never saw it: one transaction of the
    // link row and its entry, no PutItem.
    let cold = indexed(&table, 2).await;
    cold.put(["Accounts", "1", "g"], &V { v: 2 })
        .await
        .expect("put");
    table.reset_metrics();
    cold.put_link(["l"], ["Accounts", "1", "g"])
        .await
        .expect("relink");
    let m = table.metrics();
    assert_eq!(m.requests("PutItem"), 0);
    assert_eq!(m.requests("TransactWriteItems"), 1);
    assert_eq!(m.total_requests(), 1);
    // The entry of the old target is stale until a move looks at it.
    assert_eq!(entries(&table, "1").await.len(), 2);
    let report = tree
        .move_subtree(["Accounts", "1"], ["Accounts", "9"])
        .await
        .expect("move");
    assert_eq!(report.links, vec![(p("/l"), p("/Accounts/1/g"))]);
    assert!(entries(&table, "1").await.len() <= 2);
}

#[tokio::test]
async fn stale_entries_are_never_reported_and_are_dropped_by_the_look_that_finds_them() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    tree.put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    for l in ["a", "b", "c"] {
        tree.put_link([l], ["Accounts", "1", "f"])
            .await
            .expect("link");
    }
    // a: deleted; b: an object put over it; c: left as it is.
    tree.delete(["a"]).await.expect("delete");
    tree.put(["b"], &V { v: 2 })
        .await
        .expect("put over the link");
    assert_eq!(entries(&table, "1").await.len(), 3);
    let report = tree
        .move_subtree(["Accounts", "1", "f"], ["Accounts", "1", "g"])
        .await
        .expect("move");
    assert_eq!(report.links, vec![(p("/c"), p("/Accounts/1/f"))]);
    // The stale entries of a and b are gone; c's stays (Report does not rewrite it).
    assert_eq!(entries(&table, "1").await.len(), 1);
}

#[tokio::test]
async fn links_moved_copied_or_imported_carry_their_entries() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    tree.put(["Accounts", "1", "doc"], &V { v: 1 })
        .await
        .expect("put");
    tree.put_link(["tpl", "latest"], ["Accounts", "1", "doc"])
        .await
        .expect("link");
    // Moved: the link row's new place has its entry.
    tree.move_subtree(["tpl"], ["templates"])
        .await
        .expect("move");
    // Copied: so does the copy.
    tree.copy_subtree(["templates"], ["p1"])
        .await
        .expect("copy");
    table.reset_metrics();
    let report = tree
        .move_subtree(["Accounts", "1", "doc"], ["Accounts", "1", "doc2"])
        .await
        .expect("move");
    assert_eq!(
        report.links,
        vec![
            (p("/p1/latest"), p("/Accounts/1/doc")),
            (p("/templates/latest"), p("/Accounts/1/doc")),
        ]
    );
    assert_eq!(table.metrics().requests("Scan"), 0);

    // Imported into another table with the index: the links' entries are written too.
    let records: Vec<Record> = tree
        .export(Path::root())
        .try_collect()
        .await
        .expect("export");
    let other = FakeTable::new();
    let copy = indexed(&other, 2).await;
    copy.import(futures::stream::iter(records.into_iter().map(Ok)))
        .run()
        .await
        .expect("import");
    other.reset_metrics();
    // (The links still point at the old place: the move above only reported them.)
    let report = copy
        .move_subtree(["Accounts", "1"], ["Accounts", "7"])
        .await
        .expect("move");
    assert_eq!(report.links.len(), 2);
    assert_eq!(other.metrics().requests("Scan"), 0);
}

#[tokio::test]
async fn the_tables_link_index_is_adopted_and_a_disagreeing_tree_is_refused() {
    let table = FakeTable::new();
    indexed(&table, 2).await;
    let settings = TableSettings::read(&table, DEFAULT_RESERVED)
        .await
        .expect("read")
        .expect("settings");
    assert_eq!(settings.link_index, Some(2));

    // Built without the index: it adopts the table's and writes entries.
    let plain = Tree::new(table.clone());
    plain
        .put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    plain
        .put_link(["l"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    assert_eq!(entries(&table, "1").await.len(), 1);

    let other = Tree::builder(table.clone())
        .link_index(3)
        .build()
        .expect("tree");
    let err = other.get::<V>(["l"]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableMismatch, "{err}");

    // A tree with the index on a table whose settings record none.
    let bare = FakeTable::new();
    Tree::new(bare.clone()).create_table().await.expect("table");
    let wants = Tree::builder(bare.clone())
        .link_index(2)
        .build()
        .expect("tree");
    let err = wants.get::<V>(["l"]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableMismatch, "{err}");
}

#[tokio::test]
async fn a_link_whose_entry_would_break_the_key_limits_is_refused_and_nothing_is_written() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    let long = "x".repeat(600);
    tree.put(["Accounts", "1", &long], &V { v: 1 })
        .await
        .expect("put");
    let before = table.rows().len();
    let err = tree
        .put_link([long.as_str()], ["Accounts", "1", &long])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath, "{err}");
    assert_eq!(table.rows().len(), before);
}

#[tokio::test]
async fn check_reports_a_link_without_its_entry_and_repair_writes_it() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    tree.put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put_link(["mine"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    assert!(tree.check().run().await.expect("check").is_healthy());

    // A link as the Go library writes it: its listing row and link row, no entry.
    let r = DEFAULT_RESERVED;
    table
        .put_item(Key::new(r.to_string(), "go").into_item(), Condition::Always)
        .await
        .expect("listing row");
    let mut link = Key::new(format!("{r}go"), r.to_string()).into_item();
    link.insert(r.to_string(), Value::S(format!("{r}Accounts{r}1{r}f")));
    table
        .put_item(link, Condition::Always)
        .await
        .expect("link row");

    let report = tree.check().segments(2).run().await.expect("check");
    let found: Vec<_> = report
        .violations()
        .iter()
        .map(|v| (v.class(), v.path().map(Path::to_string)))
        .collect();
    assert_eq!(found, vec![(Class::MissingIndex, Some("/go".to_owned()))]);
    // The same from a check split in two parts and merged.
    let parts = vec![
        tree.check()
            .segments(2)
            .part(0..1)
            .run_part()
            .await
            .expect("part"),
        tree.check()
            .segments(2)
            .part(1..2)
            .run_part()
            .await
            .expect("part"),
    ];
    let merged = tree.check().segments(2).merge(parts).await.expect("merge");
    assert_eq!(merged.violations().len(), 1, "{merged}");

    // Until repaired, a move does not see the Go link.
    let repaired = tree.repair(&report).run().await.expect("repair");
    assert_eq!(repaired.fixed().len(), 1, "{repaired}");
    assert!(tree.check().run().await.expect("check").is_healthy());
    let moved = tree
        .move_subtree(["Accounts", "1", "f"], ["Accounts", "1", "g"])
        .await
        .expect("move");
    assert_eq!(
        moved.links,
        vec![
            (p("/go"), p("/Accounts/1/f")),
            (p("/mine"), p("/Accounts/1/f"))
        ]
    );
}

/// The violations `check` finds, as (class, path).
async fn violations(tree: &Tree) -> Vec<String> {
    let report = tree.check().run().await.expect("check");
    report
        .violations()
        .iter()
        .map(|v| format!("{:?} {:?}", v.class(), v.path().map(Path::to_string)))
        .collect()
}

/// With `fenced_puts`, a link put at a new name whose listing row this process can verify
/// free with one cheap write (a top-level name, or a new name under a known parent) takes the
/// fenced path, which sends its put straight to the table: the link row goes with its entry
/// there too, and a Rewrite move of its target finds and rewrites it.
#[tokio::test]
async fn a_fenced_put_of_a_link_writes_its_entry() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .link_index(2)
        .fenced_puts(true)
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    tree.put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put(["Shortcuts", "x"], &V { v: 1 })
        .await
        .expect("put");
    // A top-level name, and a new name under a parent this process knows.
    tree.put_link(["l"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    tree.put_link(["Shortcuts", "l"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    let found = violations(&tree).await;
    let missing = entries(&table, "1").await;
    let report = tree
        .move_subtree_with(
            ["Accounts", "1", "f"],
            ["Accounts", "1", "g"],
            LinkPolicy::Rewrite,
        )
        .await
        .expect("move");
    let l = tree.read_link(["l"]).await.expect("link");
    assert!(found.is_empty(), "check after fenced put_links: {found:?}");
    assert_eq!(missing.len(), 2, "entries written: {missing:?}");
    assert_eq!(
        report.links,
        vec![
            (p("/Shortcuts/l"), p("/Accounts/1/f")),
            (p("/l"), p("/Accounts/1/f"))
        ]
    );
    assert_eq!(
        l,
        p("/Accounts/1/g"),
        "the Rewrite move left /l pointing at the old place"
    );
}

/// A tree built without `.link_index` that does not verify its table (`verify_table(false)`)
/// reads the table's settings before its first write of a link row, and writes its entry.
#[tokio::test]
async fn a_tree_that_skips_verification_still_writes_entries() {
    let table = FakeTable::new();
    let indexed_tree = indexed(&table, 2).await;
    indexed_tree
        .put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    let unverified = Tree::builder(table.clone())
        .verify_table(false)
        .build()
        .expect("tree");
    unverified
        .put_link(["l"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    let found = violations(&indexed_tree).await;
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(entries(&table, "1").await.len(), 1);
}

/// A link *inside* the moved subtree pointing into it is copied with its old target, then
/// rewritten at its new place: when only the entry of (its new place, its new target) would
/// break the 1,024-byte sort key, the move is refused before it copies anything (it never
/// ends `Ok` with the moved link pointing at the old, now empty, place).
#[tokio::test]
async fn a_rewrite_move_of_a_link_inside_its_source_whose_new_entry_would_not_fit_is_refused() {
    let table = FakeTable::new();
    let tree = indexed(&table, 1).await;
    let long = "x".repeat(600);
    tree.put(["A", "s", "t"], &V { v: 1 }).await.expect("put");
    tree.put_link(["A", "s", "l"], ["A", "s", "t"])
        .await
        .expect("link");
    let moved = tree
        .move_subtree_with(["A", "s"], ["A", long.as_str()], LinkPolicy::Rewrite)
        .await;
    match moved {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidPath, "{e}");
            // Rolled back: the source as it was.
            assert_eq!(
                tree.read_link(["A", "s", "l"])
                    .await
                    .expect("link")
                    .to_string(),
                "/A/s/t"
            );
        }
        Ok(report) => {
            let now = tree
                .read_link(["A", long.as_str(), "l"])
                .await
                .expect("link");
            assert_eq!(
                now,
                Path::new(["A", long.as_str(), "t"]).expect("path"),
                "the move ended Ok (links {:?}) with the moved link pointing into the old place",
                report.links
            );
        }
    }
}

/// The same move without the index rewrites the link (no entry to fit).
#[tokio::test]
async fn the_same_move_without_the_index_rewrites_the_link() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.expect("table");
    let long = "x".repeat(600);
    tree.put(["A", "s", "t"], &V { v: 1 }).await.expect("put");
    tree.put_link(["A", "s", "l"], ["A", "s", "t"])
        .await
        .expect("link");
    tree.move_subtree_with(["A", "s"], ["A", long.as_str()], LinkPolicy::Rewrite)
        .await
        .expect("move");
    assert_eq!(
        tree.read_link(["A", long.as_str(), "l"])
            .await
            .expect("link"),
        Path::new(["A", long.as_str(), "t"]).expect("path")
    );
}

/// A link from outside into the source whose rewritten entry would not fit: the move is
/// refused (InvalidPath) and rolled back, nothing changed.
#[tokio::test]
async fn a_rewrite_move_of_a_target_whose_links_new_entry_would_not_fit_is_rolled_back() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    let long = "y".repeat(500);
    let dest = "x".repeat(600);
    tree.put(["Accounts", "1", "s", "t"], &V { v: 1 })
        .await
        .expect("put");
    tree.put_link([long.as_str()], ["Accounts", "1", "s", "t"])
        .await
        .expect("link");
    let before = table.rows();
    let err = tree
        .move_subtree_with(
            ["Accounts", "1", "s"],
            ["Accounts", "1", dest.as_str()],
            LinkPolicy::Rewrite,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath, "{err}");
    assert_eq!(
        tree.read_link([long.as_str()]).await.expect("link"),
        p("/Accounts/1/s/t")
    );
    assert_eq!(
        tree.get::<V>(["Accounts", "1", "s", "t"])
            .await
            .expect("get"),
        Some(V { v: 1 })
    );
    let after = table.rows();
    assert!(
        after.len() <= before.len(),
        "rows left by the refused move: {} -> {}",
        before.len(),
        after.len()
    );
    assert!(violations(&tree).await.is_empty());
}

/// A copy with Rewrite whose copied link's entry would not fit: refused, rolled back.
#[tokio::test]
async fn a_rewrite_copy_whose_copied_links_entry_would_not_fit_is_rolled_back() {
    let table = FakeTable::new();
    let tree = indexed(&table, 1).await;
    let long = "x".repeat(600);
    tree.put(["A", "s", "t"], &V { v: 1 }).await.expect("put");
    tree.put_link(["A", "s", "l"], ["A", "s", "t"])
        .await
        .expect("link");
    let before = table.rows().len();
    let err = tree
        .copy_subtree_with(["A", "s"], ["A", long.as_str()], LinkPolicy::Rewrite)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath, "{err}");
    assert_eq!(table.rows().len(), before);
    assert!(violations(&tree).await.is_empty());
}

/// A scoped tree of a tree built without `.link_index` (it adopts the table's) writes entries,
/// and a Rewrite move inside the scope finds its links with no Scan.
#[tokio::test]
async fn a_scoped_tree_adopting_the_index_writes_entries() {
    let table = FakeTable::new();
    indexed(&table, 2).await;
    let plain = Tree::new(table.clone());
    let scoped = plain.scope(["Accounts", "1"]).expect("scope");
    scoped.put(["f"], &V { v: 1 }).await.expect("put");
    scoped.put_link(["l"], ["f"]).await.expect("link");
    assert_eq!(entries(&table, "1").await.len(), 1);
    table.reset_metrics();
    let report = scoped
        .move_subtree_with(["f"], ["g"], LinkPolicy::Rewrite)
        .await
        .expect("move");
    assert_eq!(report.links.len(), 1, "{:?}", report.links);
    assert_eq!(table.metrics().requests("Scan"), 0);
    assert!(violations(&plain).await.is_empty());
}

/// Re-parenting (`delete_node(Reparent)`) moves the children up: the link rows among them
/// carry their entries to their new place.
#[tokio::test]
async fn a_reparent_carries_the_entries_of_the_links_it_moves() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    tree.put(["Accounts", "1", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put(["dir"], &V { v: 0 }).await.expect("put");
    tree.put_link(["dir", "l"], ["Accounts", "1", "f"])
        .await
        .expect("link");
    tree.delete_node(["dir"], dynatree::ops::OnChildren::Reparent)
        .await
        .expect("reparent");
    assert!(violations(&tree).await.is_empty());
    let report = tree
        .move_subtree_with(
            ["Accounts", "1", "f"],
            ["Accounts", "1", "g"],
            LinkPolicy::Rewrite,
        )
        .await
        .expect("move");
    assert_eq!(report.links, vec![(p("/l"), p("/Accounts/1/f"))]);
    assert_eq!(
        tree.read_link(["l"]).await.expect("link"),
        p("/Accounts/1/g")
    );
}

/// Cost: many stale entries under the source (links repointed elsewhere) are each dropped by
/// the first look; a second move of the same place reads none of them again.
#[tokio::test]
async fn stale_entries_are_paid_for_once() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    tree.put(["Accounts", "1", "s", "f"], &V { v: 1 })
        .await
        .expect("put");
    tree.put(["Accounts", "2", "g"], &V { v: 1 })
        .await
        .expect("put");
    for i in 0..150 {
        let l = format!("l{i}");
        tree.put_link([l.as_str()], ["Accounts", "1", "s", "f"])
            .await
            .expect("link");
        tree.put_link([l.as_str()], ["Accounts", "2", "g"])
            .await
            .expect("relink");
    }
    assert_eq!(entries(&table, "1").await.len(), 150);
    let report = tree
        .move_subtree(["Accounts", "1", "s"], ["Accounts", "1", "t"])
        .await
        .expect("move");
    assert!(report.links.is_empty());
    assert_eq!(entries(&table, "1").await.len(), 0, "stale entries left");
    table.reset_metrics();
    tree.move_subtree(["Accounts", "1", "t"], ["Accounts", "1", "u"])
        .await
        .expect("move");
    let after = table.metrics().requests_by_operation().clone();
    // The same move on a table that never had those links.
    let fresh = FakeTable::new();
    let base = indexed(&fresh, 2).await;
    base.put(["Accounts", "1", "t", "f"], &V { v: 1 })
        .await
        .expect("put");
    fresh.reset_metrics();
    base.move_subtree(["Accounts", "1", "t"], ["Accounts", "1", "u"])
        .await
        .expect("move");
    assert_eq!(after, *fresh.metrics().requests_by_operation());
}

/// Stale entries (a link deleted, repointed, or overwritten by an object) are no violation:
/// the check counts them, one check or split, and the repair deletes them, keeping the entry
/// of a link created again to the same target meanwhile. A dry run deletes nothing.
#[tokio::test]
async fn check_counts_stale_entries_and_repair_deletes_those_still_stale() {
    let table = FakeTable::new();
    let tree = indexed(&table, 2).await;
    for f in ["f", "g"] {
        tree.put(["Accounts", "1", f], &V { v: 1 })
            .await
            .expect("put");
    }
    let f = ["Accounts", "1", "f"];
    tree.put_link(["repointed"], f).await.expect("link");
    tree.put_link(["repointed"], ["Accounts", "1", "g"])
        .await
        .expect("relink");
    tree.put_link(["deleted"], f).await.expect("link");
    tree.delete(["deleted"]).await.expect("delete");
    tree.put_link(["overwritten"], f).await.expect("link");
    tree.put(["overwritten"], &V { v: 2 }).await.expect("put");
    tree.put_link(["created-again"], f).await.expect("link");
    tree.delete(["created-again"]).await.expect("delete");
    assert_eq!(entries(&table, "1").await.len(), 5);

    let report = tree.check().run().await.expect("check");
    assert!(report.is_healthy(), "{report}");
    assert_eq!(report.stale_entries(), 4);
    assert!(
        report
            .to_string()
            .contains("healthy (4 stale link index entries: repair deletes them)"),
        "{report}"
    );
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["stale_entries"], 4);
    let parts = vec![
        tree.check()
            .segments(2)
            .part(0..1)
            .run_part()
            .await
            .expect("part"),
        tree.check()
            .segments(2)
            .part(1..2)
            .run_part()
            .await
            .expect("part"),
    ];
    let merged = tree.check().segments(2).merge(parts).await.expect("merge");
    assert_eq!(merged.stale_entries(), 4, "{merged}");

    let before = table.rows();
    let dry = tree
        .repair(&report)
        .dry_run(true)
        .run()
        .await
        .expect("dry run");
    assert_eq!(dry.swept(), 4);
    assert!(
        dry.to_string()
            .contains("4 stale link index entries would be deleted"),
        "{dry}"
    );
    assert_eq!(table.rows(), before);

    // After the check, before the repair: the link is created again to the same target.
    tree.put_link(["created-again"], f).await.expect("link");
    let repaired = tree.repair(&report).run().await.expect("repair");
    assert_eq!(repaired.swept(), 3, "{repaired}");
    assert!(repaired.fixed().is_empty());
    let r = DEFAULT_RESERVED;
    let mut kept = entries(&table, "1").await;
    kept.sort();
    assert_eq!(
        kept,
        vec![
            (
                format!("{r}Accounts{r}1{r}{r}links"),
                format!("{r}f{r}{r}{r}created-again")
            ),
            (
                format!("{r}Accounts{r}1{r}{r}links"),
                format!("{r}g{r}{r}{r}repointed")
            ),
        ]
    );
    let after = tree.check().run().await.expect("check");
    assert!(after.is_healthy(), "{after}");
    assert_eq!(after.stale_entries(), 0);
    // Split among workers, each entry is deleted by exactly one part.
    tree.delete(["created-again"]).await.expect("delete");
    tree.delete(["repointed"]).await.expect("delete");
    let report = tree.check().run().await.expect("check");
    assert_eq!(report.stale_entries(), 2);
    let mut swept = 0;
    for i in 0..3 {
        swept += tree
            .repair(&report)
            .part(i, 3)
            .run()
            .await
            .expect("repair part")
            .swept();
    }
    assert_eq!(swept, 2);
    assert!(entries(&table, "1").await.is_empty());
}
