//! A tree checks its table once, before its first request: a table of another key schema, or
//! one whose path index or secondary indexes this tree's writes would skip, is refused with
//! `TableMismatch` and nothing is written. `create_table` records the table's settings, which
//! other programs read back.

use dynatree::storage::{IndexSettings, Storage, TableSettings};
use dynatree::{ErrorKind, Hierarchical, Tree};
use dynatree_testing::FakeTable;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct V {
    v: u32,
}

#[derive(Debug, Hierarchical, Serialize, Deserialize, PartialEq)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

#[derive(Debug, Hierarchical, Serialize, Deserialize, PartialEq)]
#[dynatree(path = "Teams/{id}", index(name = "by_name", hash = name))]
struct Team {
    id: String,
    name: String,
}

#[tokio::test]
async fn a_table_of_another_key_schema_is_refused_before_anything_is_written() {
    let table = FakeTable::with_schema("id", "sort");
    let tree = Tree::new(table.clone());
    let e = tree.put(["a"], &V { v: 1 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch);
    assert!(
        e.to_string()
            .contains("hash key `id` (S) and range key `sort` (S)"),
        "{e}"
    );
    assert!(table.rows().is_empty());
    // Every operation meets the same refusal, reads included.
    assert_eq!(
        tree.get::<V>(["a"]).await.unwrap_err().kind(),
        ErrorKind::TableMismatch
    );
    assert_eq!(
        tree.verify().await.unwrap_err().kind(),
        ErrorKind::TableMismatch
    );
    assert_eq!(
        table.metrics().total_requests(),
        table.metrics().requests("DescribeTable")
    );
}

#[tokio::test]
async fn a_missing_table_is_named_as_missing() {
    let tree = Tree::new(FakeTable::new());
    let e = tree.put(["a"], &V { v: 1 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableNotFound);
}

#[tokio::test]
async fn the_table_is_described_once_per_tree_and_its_clones_and_scopes() {
    let table = FakeTable::new();
    Tree::new(table.clone()).create_table().await.unwrap();
    let tree = Tree::new(table.clone());
    table.reset_metrics();
    let scoped = tree.scope(["a"]).unwrap();
    let clone = tree.clone();
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    clone.put(["a", "c"], &V { v: 2 }).await.unwrap();
    assert_eq!(scoped.get::<V>(["b"]).await.unwrap(), Some(V { v: 1 }));
    assert_eq!(table.metrics().requests("DescribeTable"), 1);

    // A tree that created the table checked it then.
    let creator = Tree::new(table.clone());
    creator.create_table().await.unwrap();
    table.reset_metrics();
    creator.put(["d"], &V { v: 3 }).await.unwrap();
    assert_eq!(table.metrics().requests("DescribeTable"), 0);

    // And one told not to check never does.
    let unchecked = Tree::builder(table.clone())
        .verify_table(false)
        .build()
        .unwrap();
    unchecked.put(["e"], &V { v: 4 }).await.unwrap();
    assert_eq!(table.metrics().requests("DescribeTable"), 0);
}

#[tokio::test]
async fn a_tree_that_would_skip_the_path_index_is_refused() {
    let table = FakeTable::new();
    let indexed = Tree::builder(table.clone()).path_index(2).build().unwrap();
    indexed.create_table().await.unwrap();
    indexed.put(["x", "y"], &V { v: 1 }).await.unwrap();
    let before = table.rows();

    // Without the index: its writes would leave objects out of it.
    let plain = Tree::new(table.clone());
    let e = plain.put(["x", "z"], &V { v: 2 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch);
    assert!(e.to_string().contains("path_index(2)"), "{e}");
    // With another depth: its index values would not be found.
    let other = Tree::builder(table.clone()).path_index(3).build().unwrap();
    let e = other.put(["x", "z"], &V { v: 2 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch);
    assert!(e.to_string().contains("depth 2"), "{e}");
    assert_eq!(table.rows(), before);

    // The same depth: accepted.
    let same = Tree::builder(table.clone()).path_index(2).build().unwrap();
    same.put(["x", "z"], &V { v: 2 }).await.unwrap();

    // A tree with a path index on a table without one.
    let bare = FakeTable::new();
    Tree::new(bare.clone()).create_table().await.unwrap();
    let e = Tree::builder(bare.clone())
        .path_index(1)
        .build()
        .unwrap()
        .verify()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch);
}

#[tokio::test]
async fn a_type_whose_index_the_table_lacks_is_refused() {
    let table = FakeTable::new();
    Tree::new(table.clone()).create_table().await.unwrap();
    let tree = Tree::builder(table.clone())
        .indexes_of::<User>()
        .build()
        .unwrap();
    let e = tree.verify().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch);
    assert!(e.to_string().contains("by_email"), "{e}");
    // create_table adds it; then the tree may write.
    tree.create_table().await.unwrap();
    tree.repo::<User>()
        .put(&User {
            id: "u1".into(),
            email: "a@example.com".into(),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn create_table_records_settings_that_others_read_and_merge() {
    let table = FakeTable::new();
    assert_eq!(TableSettings::read(&table, '¦').await.ok().flatten(), None);
    Tree::builder(table.clone())
        .path_index(2)
        .indexes_of::<User>()
        .build()
        .unwrap()
        .create_table()
        .await
        .unwrap();
    Tree::builder(table.clone())
        .path_index(2)
        .indexes_of::<Team>()
        .indexes_of::<User>()
        .build()
        .unwrap()
        .create_table()
        .await
        .unwrap();
    let s = TableSettings::read(&table, '¦').await.unwrap().unwrap();
    assert_eq!(s.path_index, Some(2));
    assert_eq!(
        s.indexes,
        [
            IndexSettings::new("by_email", false, ["Users/{id}"]),
            IndexSettings::new("by_name", false, ["Teams/{id}"]),
        ]
    );
    // Another depth on create_table is refused and recorded nowhere.
    let e = Tree::builder(table.clone())
        .path_index(1)
        .build()
        .unwrap()
        .create_table()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableMismatch);
    assert_eq!(TableSettings::read(&table, '¦').await.unwrap().unwrap(), s);
    // The settings row is bookkeeping: the checker knows it, listings never show it.
    let tree = Tree::builder(table.clone()).path_index(2).build().unwrap();
    let report = tree.check().run().await.unwrap();
    assert!(report.is_healthy(), "{report}");
    assert!(table.describe_table().await.unwrap().is_some());
}
