//! Sharded directories (`TreeBuilder::sharded`): what the builder refuses, what the table's
//! settings record and what a tree of other settings is told, where the rows go and what a
//! read costs, key limits, and what check and repair make of listing rows the Go library
//! writes outside their shard.

use dynatree::check::Class;
use dynatree::ops::OnChildren;
use dynatree::storage::{Key, Storage, TableSettings};
use dynatree::{ErrorKind, Tree};
use dynatree_testing::{FakeTable, Fault, FaultRule};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::common::{go_put, n};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct V {
    v: u32,
}

/// The shard of `name` among `n`: FNV-1a of its bytes (as `transfer::part_of`).
fn shard(name: &str, n: u32) -> u32 {
    dynatree::transfer::part_of(name, n)
}

#[test]
fn the_builder_refuses_templates_and_counts_it_cannot_use() {
    let table = FakeTable::new();
    for (template, shards, says) in [
        ("Accounts/{id}/Links", 1, "2 to 256"),
        ("Accounts/{id}/Links", 0, "2 to 256"),
        ("Accounts/{id}/Links", 257, "2 to 256"),
        ("", 4, "the root"),
        ("/", 4, "the root"),
        ("Accounts//Links", 4, "an empty component"),
        ("Accounts/{id/Links", 4, "neither a name nor"),
        ("Accounts/{}/Links", 4, "neither a name nor"),
        ("Acc¦ounts", 4, "reserved character"),
    ] {
        let err = Tree::builder(table.clone())
            .sharded(template, shards)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{template:?}");
        assert!(err.to_string().contains(says), "{template:?}: {err}");
    }
    // Two templates that can name the same directory.
    let err = Tree::builder(table.clone())
        .sharded("Accounts/{id}", 4)
        .sharded("{kind}/7", 8)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string().contains("can name the same directory"),
        "{err}"
    );
    // The same one twice is one; `*` is `{field}`; disjoint ones are fine.
    Tree::builder(table.clone())
        .sharded("Accounts/{id}", 4)
        .sharded("Accounts/*", 4)
        .sharded("Teams/{id}", 2)
        .build()
        .unwrap();
    // Nothing was sent.
    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn the_table_records_its_sharded_directories_and_other_trees_are_refused() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .sharded("Accounts/{id}/Links", 4)
        .sharded("Accounts", 2)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let settings = TableSettings::read(&table, '¦').await.unwrap().unwrap();
    assert_eq!(
        settings.sharded.into_iter().collect::<Vec<_>>(),
        [
            ("Accounts".to_owned(), 2),
            ("Accounts/*/Links".to_owned(), 4)
        ]
    );
    tree.put(["Accounts", "1", "Links", "l"], &V { v: 1 })
        .await
        .unwrap();
    let rows = table.rows().len();
    for other in [
        Tree::builder(table.clone()).build().unwrap(),
        Tree::builder(table.clone())
            .sharded("Accounts/{id}/Links", 8)
            .sharded("Accounts", 2)
            .build()
            .unwrap(),
        Tree::builder(table.clone())
            .sharded("Accounts/{id}/Links", 4)
            .build()
            .unwrap(),
    ] {
        let err = other
            .put(["Accounts", "1", "Links", "m"], &V { v: 2 })
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TableMismatch);
        assert!(
            err.to_string().contains("\"Accounts/*/Links\" in 4 shards"),
            "{err}"
        );
    }
    assert_eq!(table.rows().len(), rows, "nothing written");
    // The same sharding, written either way, is accepted.
    let same = Tree::builder(table.clone())
        .sharded("Accounts", 2)
        .sharded("Accounts/*/Links", 4)
        .build()
        .unwrap();
    assert_eq!(
        same.get::<V>(["Accounts", "1", "Links", "l"])
            .await
            .unwrap(),
        Some(V { v: 1 })
    );
    // A sharded tree on a table whose settings record none (created before): refused, and
    // told how to record them.
    let plain = FakeTable::new();
    Tree::new(plain.clone()).create_table().await.unwrap();
    let err = Tree::builder(plain.clone())
        .sharded("Accounts", 2)
        .build()
        .unwrap()
        .put(["Accounts", "1"], &V { v: 1 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableMismatch);
    assert!(err.to_string().contains("create_table"), "{err}");
    // Another count of the same template cannot be recorded over the first.
    let err = Tree::builder(table.clone())
        .sharded("Accounts/{id}/Links", 8)
        .sharded("Accounts", 2)
        .build()
        .unwrap()
        .create_table()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableMismatch);
}

#[tokio::test]
async fn children_go_to_their_shard_and_a_list_reads_every_shard_once() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .sharded("Accounts/{id}/Links", 8)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("l{i:02}")).collect();
    for name in names.iter().rev() {
        tree.put(["Accounts", "1", "Links", name], &V { v: 1 })
            .await
            .unwrap();
    }
    // Each child's listing row is in its shard's partition; the directory's own is empty.
    for name in &names {
        let key = Key::new(
            format!("¦Accounts¦1¦Links¦¦s{}", shard(name, 8)),
            name.clone(),
        );
        assert!(
            table.get_item(&key, true).await.unwrap().is_some(),
            "{key:?}"
        );
    }
    assert!(
        !table
            .rows()
            .iter()
            .any(|r| r.get_s("Key") == Some("¦Accounts¦1¦Links¦")),
        "no child listed in the unsharded partition"
    );
    // The directories above are not sharded.
    assert!(
        table
            .get_item(&Key::new("¦Accounts¦1¦", "Links"), true)
            .await
            .unwrap()
            .is_some()
    );
    table.reset_metrics();
    let listed: Vec<String> = tree
        .list(["Accounts", "1", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed, names, "in order");
    assert_eq!(table.metrics().requests("Query"), 8, "one Query per shard");
    // A directory that is not sharded: one Query.
    table.reset_metrics();
    let top: Vec<String> = tree.list(["Accounts", "1"]).try_collect().await.unwrap();
    assert_eq!(top, ["Links"]);
    assert_eq!(table.metrics().requests("Query"), 1);
    // The process created the guard of every shard beside a check of `L(Links)`, and now
    // adds names by checking the guard of their shard: with every request on `L(Links)`
    // failing, its new names go through; a process that knows no guard checks `L(Links)`.
    let guards = || {
        table
            .rows()
            .iter()
            .filter(|r| {
                r.get_s("Key")
                    .is_some_and(|k| k.starts_with("¦Accounts¦1¦Links¦¦g"))
            })
            .count()
    };
    assert_eq!(guards(), 8);
    table.inject_rule(
        FaultRule::new(Fault::Fail)
            .key(Key::new("¦Accounts¦1¦", "Links"))
            .always(),
    );
    for i in 0..8 {
        tree.put(["Accounts", "1", "Links", &format!("m{i}")], &V { v: 2 })
            .await
            .unwrap();
    }
    let cold = Tree::builder(table.clone())
        .sharded("Accounts/{id}/Links", 8)
        .build()
        .unwrap();
    let err = cold
        .put(["Accounts", "1", "Links", "n"], &V { v: 3 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend);
    table.clear_faults();
    for i in 0..8 {
        tree.delete(["Accounts", "1", "Links", &format!("m{i}")])
            .await
            .unwrap();
    }
    // A check reads the guards and writes nothing.
    table.reset_metrics();
    assert!(tree.check().run().await.unwrap().is_healthy());
    assert_eq!(table.metrics().write_units(), 0.0);

    // A removal asks every shard whether the directory has children: it has, so a node
    // deletion that refuses children is refused, and a delete keeps the directory listed.
    // Having marked the directory's row, it dropped the guards first.
    tree.put(["Accounts", "1", "Links"], &V { v: 0 })
        .await
        .unwrap();
    let err = tree
        .delete_node(["Accounts", "1", "Links"], OnChildren::Refuse)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::HasChildren);
    assert_eq!(guards(), 0, "dropped by the removal");
    tree.delete(["Accounts", "1", "Links"]).await.unwrap();
    let top: Vec<String> = tree.list(["Accounts", "1"]).try_collect().await.unwrap();
    assert_eq!(top, ["Links"], "the children stay reachable");
    // Removing the subtree empties every shard.
    assert_eq!(
        tree.delete_subtree(["Accounts", "1", "Links"])
            .await
            .unwrap(),
        40
    );
    assert!(
        !table.rows().iter().any(|r| r
            .get_s("Key")
            .is_some_and(|k| k.starts_with("¦Accounts¦1¦Links¦¦s"))),
        "every shard emptied"
    );
}

#[tokio::test]
async fn a_child_whose_shard_key_would_be_too_long_is_refused_and_nothing_is_written() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .sharded("{a}/{b}/{c}", 2)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let (a, b, c) = ("x".repeat(1000), "y".repeat(1000), "w".repeat(38));
    let dir = [a.as_str(), b.as_str(), c.as_str()];
    // The directory's listing key is 2,046 bytes; a child named `z` has a 2,047-byte object
    // key, but its shard's key is 2,050 bytes, over DynamoDB's 2,048.
    tree.put(dir, &V { v: 1 }).await.unwrap();
    let rows = table.rows().len();
    let err = tree
        .put([a.as_str(), b.as_str(), c.as_str(), "z"], &V { v: 1 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath);
    assert!(err.to_string().contains("sharded directory"), "{err}");
    assert_eq!(table.rows().len(), rows);
    // Its listing is empty without a request.
    table.reset_metrics();
    let names: Vec<String> = tree.list(dir).try_collect().await.unwrap();
    assert!(names.is_empty());
    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn listing_rows_the_go_library_writes_outside_their_shard_are_reported_and_moved_in() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .sharded("Accounts/{id}/Links", 4)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put(["Accounts", "1", "Links", "a"], &V { v: 1 })
        .await
        .unwrap();
    // The Go library lists `b` (and `c/d`'s directory `c`) in the directory's own partition,
    // and a stray row sits in the wrong shard.
    go_put(&table, &["Accounts", "1", "Links", "b"], &[("v", n(2))]).await;
    go_put(
        &table,
        &["Accounts", "1", "Links", "c", "d"],
        &[("v", n(3))],
    )
    .await;
    let wrong = (shard("a", 4) + 1) % 4;
    let stray = Key::new(format!("¦Accounts¦1¦Links¦¦s{wrong}"), "a");
    crate::common::raw_put(&table, stray.clone(), &[]).await;
    // Lists see only what is in the shards.
    let listed: Vec<String> = tree
        .list(["Accounts", "1", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed, ["a"]);

    let report = tree
        .check()
        .grace(std::time::Duration::ZERO)
        .run()
        .await
        .unwrap();
    let mut found: Vec<(Class, String)> = report
        .violations()
        .iter()
        .map(|v| {
            (
                v.class(),
                v.path().map(|p| p.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            (Class::Unreachable, "/Accounts/1/Links/b".to_owned()),
            // `c`'s own row is missing from its shard: `d`'s listing row has no parent.
            (Class::BrokenClosure, "/Accounts/1/Links/c/d".to_owned()),
            (Class::Misplaced, "/Accounts/1/Links/a".to_owned()),
            (Class::Misplaced, "/Accounts/1/Links/b".to_owned()),
            (Class::Misplaced, "/Accounts/1/Links/c".to_owned()),
        ],
        "{report}"
    );
    assert!(report.violations().iter().all(|v| v.class().repairable()));
    // A dry run writes nothing.
    let before = table.rows();
    let dry = tree.repair(&report).dry_run(true).run().await.unwrap();
    assert_eq!(dry.fixed().len(), 5);
    assert_eq!(table.rows(), before);

    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.fixed().len(), 5, "{repaired:?}");
    assert!(
        tree.check()
            .grace(std::time::Duration::ZERO)
            .run()
            .await
            .unwrap()
            .is_healthy()
    );
    let listed: Vec<String> = tree
        .list(["Accounts", "1", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed, ["a", "b", "c"]);
    assert!(table.get_item(&stray, true).await.unwrap().is_none());
    assert!(
        table
            .get_item(&Key::new("¦Accounts¦1¦Links¦", "b"), true)
            .await
            .unwrap()
            .is_none(),
        "the Go library's row is gone"
    );
    assert_eq!(
        dynatree_testing::sim::check_rows(&table.rows(), '¦'),
        [],
        "every row where the layout puts it"
    );
}
