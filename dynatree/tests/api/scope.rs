//! Scoped trees (`Tree::scope`): relative paths in and out of every public method that takes or
//! returns paths, links leaving the scope refused, the scope's root row never pruned, typed
//! repositories and index queries isolated between scopes, composition.

use dynatree::{
    ErrorKind, Hierarchical, Path, Strategy, Tree, ops::LinkPolicy, ops::OnChildren, storage::Item,
};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

fn v(v: u32) -> V {
    V { v }
}

fn p<const N: usize>(c: [&str; N]) -> Path {
    Path::new(c).expect("path")
}

async fn tree() -> Tree {
    let tree = Tree::new(FakeTable::new());
    tree.create_table().await.expect("table");
    tree
}

/// The listing rows of the table as `(Key, Child)`.
async fn listing_rows(tree: &Tree) -> Vec<(String, String)> {
    let rows: Vec<Item> = tree.scan().try_collect().await.expect("scan");
    let mut out: Vec<(String, String)> = rows
        .iter()
        .filter(|i| i.get_s("Child") != Some("¦"))
        .map(|i| {
            (
                i.get_s("Key").unwrap_or_default().to_owned(),
                i.get_s("Child").unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn put_get_list_and_links_are_relative() {
    let tree = tree().await;
    let t = tree.scope(["Tenants", "t1"]).unwrap();
    assert!(t.is_scoped());
    assert_eq!(t.scope_root(), p(["Tenants", "t1"]));

    t.put(["a", "b"], &v(1)).await.unwrap();
    // Stored at the absolute path.
    assert_eq!(
        tree.get::<V>(["Tenants", "t1", "a", "b"]).await.unwrap(),
        Some(v(1))
    );
    assert_eq!(t.get::<V>(["a", "b"]).await.unwrap(), Some(v(1)));
    // Nothing outside is addressable: the same relative path elsewhere is not read.
    tree.put(["a", "b"], &v(99)).await.unwrap();
    assert_eq!(t.get::<V>(["a", "b"]).await.unwrap(), Some(v(1)));

    // Links: a relative target in, a relative target out; followed inside the scope.
    t.put_link(["l"], ["a", "b"]).await.unwrap();
    assert_eq!(t.read_link(["l"]).await.unwrap(), p(["a", "b"]));
    assert_eq!(
        tree.read_link(["Tenants", "t1", "l"]).await.unwrap(),
        p(["Tenants", "t1", "a", "b"])
    );
    assert_eq!(t.get::<V>(["l"]).await.unwrap(), Some(v(1)));

    // Listings.
    let root: Vec<String> = t.list(Path::root()).try_collect().await.unwrap();
    assert_eq!(root, ["a", "l"]);
    let entries: Vec<dynatree::Entry<V>> = t.list_items(Path::root()).try_collect().await.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].value, None);
    assert_eq!(entries[1].value, Some(v(1)));
    let under_a: Vec<String> = t.list(["a"]).try_collect().await.unwrap();
    assert_eq!(under_a, ["b"]);

    // A `..` is a name, not a way out.
    t.put([".."], &v(7)).await.unwrap();
    assert_eq!(
        tree.get::<V>(["Tenants", "t1", ".."]).await.unwrap(),
        Some(v(7))
    );
    assert_eq!(tree.get::<V>(["Tenants", ".."]).await.unwrap(), None);

    // Scan: only the scope's rows.
    let rows: Vec<Item> = t.scan().try_collect().await.unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| {
        let k = r.get_s("Key").unwrap();
        k == "¦Tenants¦t1" || k.starts_with("¦Tenants¦t1¦")
    }));
    let all: Vec<Item> = tree.scan().try_collect().await.unwrap();
    assert!(all.len() > rows.len());
}

#[tokio::test]
async fn ancestors_and_descendants_are_relative() {
    let table = FakeTable::new();
    let tree = Tree::builder(table).path_index(2).build().unwrap();
    tree.create_table().await.unwrap();
    tree.put(["T", "x"], &v(0)).await.unwrap(); // the scope's root object
    let t = tree.scope(["T", "x"]).unwrap();
    t.put(["org"], &v(1)).await.unwrap();
    t.put(["org", "eng", "db"], &v(3)).await.unwrap();
    t.put(["other"], &v(4)).await.unwrap();
    tree.put(["T", "y", "org", "eng"], &v(9)).await.unwrap(); // another scope

    // Ancestors: below the root only (the root object is `get(root)`), relative.
    let crumbs: Vec<(Path, V)> = t.ancestors(["org", "eng", "db", "me"]).await.unwrap();
    assert_eq!(
        crumbs,
        [(p(["org"]), v(1)), (p(["org", "eng", "db"]), v(3))]
    );
    let items = t.ancestor_items(["org", "eng", "db"]).await.unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].0, p(["org"]));

    // Descendants, by the walk and by the path index.
    for strategy in [Strategy::Walk, Strategy::PathIndex, Strategy::Auto] {
        let found: Vec<_> = t
            .descendants(Path::root())
            .strategy(strategy)
            .items()
            .try_collect()
            .await
            .unwrap();
        let mut paths: Vec<Path> = found.iter().map(|d| d.path.clone()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [p(["org"]), p(["org", "eng", "db"]), p(["other"])],
            "{strategy:?}"
        );
        let under: Vec<_> = t
            .descendants(["org"])
            .strategy(strategy)
            .items()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(under.len(), 1, "{strategy:?}");
        assert_eq!(under[0].path, p(["org", "eng", "db"]));
        assert_eq!(under[0].value::<V>().unwrap(), v(3));
    }
}

#[tokio::test]
async fn the_root_reads_its_object_and_refuses_writes() {
    let tree = tree().await;
    tree.put(["Accounts", "a1"], &v(42)).await.unwrap();
    tree.put(["Accounts", "a1", "x"], &v(1)).await.unwrap();
    let t = tree.scope(["Accounts", "a1"]).unwrap();
    // `get` of the root reads the root's own object.
    assert_eq!(t.get::<V>(Path::root()).await.unwrap(), Some(v(42)));
    assert!(t.read_link(Path::root()).await.unwrap_err().is_not_a_link());
    // An unscoped tree's root still holds nothing.
    assert!(
        tree.get::<V>(Path::root())
            .await
            .unwrap_err()
            .is_invalid_path()
    );

    let root = Path::root();
    let refused = [
        t.put(&root, &v(0)).await.unwrap_err(),
        t.put_link(&root, ["x"]).await.unwrap_err(),
        t.delete(&root).await.unwrap_err(),
        t.delete_node(&root, OnChildren::Refuse).await.unwrap_err(),
        t.delete_node(&root, OnChildren::Reparent)
            .await
            .unwrap_err(),
        t.delete_node(&root, OnChildren::Recursive)
            .await
            .unwrap_err(),
        t.delete_subtree(&root).await.unwrap_err(),
        t.move_subtree(&root, ["y"]).await.unwrap_err(),
        t.move_subtree(["x"], &root).await.unwrap_err(),
        t.copy_subtree(&root, ["y"]).await.unwrap_err(),
        t.copy_subtree(["x"], &root).await.unwrap_err(),
    ];
    for e in refused {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert_eq!(
        tree.get::<V>(["Accounts", "a1"]).await.unwrap(),
        Some(v(42))
    );
    assert_eq!(t.get::<V>(["x"]).await.unwrap(), Some(v(1)));
}

#[tokio::test]
async fn deleting_the_last_child_leaves_the_roots_listing_row() {
    let tree = tree().await;
    let t = tree.scope(["Tenants", "t1"]).unwrap();
    let root_row = ("¦Tenants¦".to_owned(), "t1".to_owned());
    let tenants_row = ("¦".to_owned(), "Tenants".to_owned());

    // delete
    t.put(["a", "b"], &v(1)).await.unwrap();
    t.delete(["a", "b"]).await.unwrap();
    assert_eq!(
        listing_rows(&tree).await,
        [tenants_row.clone(), root_row.clone()]
    );
    let left: Vec<String> = tree.list(["Tenants"]).try_collect().await.unwrap();
    assert_eq!(left, ["t1"]);

    // delete_node (refuse), delete_node (recursive), delete_subtree
    t.put(["a"], &v(1)).await.unwrap();
    t.delete_node(["a"], OnChildren::Refuse).await.unwrap();
    assert_eq!(
        listing_rows(&tree).await,
        [tenants_row.clone(), root_row.clone()]
    );
    t.put(["a", "b", "c"], &v(1)).await.unwrap();
    assert_eq!(t.delete_subtree(["a"]).await.unwrap(), 1);
    assert_eq!(
        listing_rows(&tree).await,
        [tenants_row.clone(), root_row.clone()]
    );
    t.put(["a", "b"], &v(1)).await.unwrap();
    t.delete_node(["a"], OnChildren::Recursive).await.unwrap();
    assert_eq!(
        listing_rows(&tree).await,
        [tenants_row.clone(), root_row.clone()]
    );

    // A re-parenting to the root, then its last child deleted.
    t.put(["a"], &v(1)).await.unwrap();
    t.put(["a", "b"], &v(2)).await.unwrap();
    t.delete_node(["a"], OnChildren::Reparent).await.unwrap();
    assert_eq!(t.get::<V>(["b"]).await.unwrap(), Some(v(2)));
    t.delete(["b"]).await.unwrap();
    assert_eq!(
        listing_rows(&tree).await,
        [tenants_row.clone(), root_row.clone()]
    );

    // A move out of the last child leaves it too.
    t.put(["a", "b"], &v(1)).await.unwrap();
    t.move_subtree(["a", "b"], ["c"]).await.unwrap();
    t.delete(["c"]).await.unwrap();
    assert_eq!(listing_rows(&tree).await, [tenants_row.clone(), root_row]);

    // The whole tree prunes as before.
    tree.put(["Other", "x"], &v(1)).await.unwrap();
    tree.delete(["Other", "x"]).await.unwrap();
    let top: Vec<String> = tree.list(Path::root()).try_collect().await.unwrap();
    assert_eq!(top, ["Tenants"]);
}

#[tokio::test]
async fn a_link_leaving_the_scope_is_refused() {
    let tree = tree().await;
    tree.put(["Secrets", "s"], &v(13)).await.unwrap();
    tree.put(["T", "in"], &v(1)).await.unwrap();
    // Written by the whole tree: one link out of the scope, one inside, one chain that leaves.
    tree.put_link(["T", "out"], ["Secrets", "s"]).await.unwrap();
    tree.put_link(["T", "ok"], ["T", "in"]).await.unwrap();
    tree.put_link(["T", "hop"], ["T", "out"]).await.unwrap();
    let t = tree.scope(["T"]).unwrap();

    for name in ["out", "hop"] {
        let e = t.get::<V>([name]).await.unwrap_err();
        assert!(e.is_out_of_scope(), "{e}");
        assert_eq!(e.party(), dynatree::error::Party::Data);
    }
    assert!(t.read_link(["out"]).await.unwrap_err().is_out_of_scope());
    assert_eq!(t.read_link(["hop"]).await.unwrap(), p(["out"]));
    assert_eq!(t.read_link(["ok"]).await.unwrap(), p(["in"]));
    assert_eq!(t.get::<V>(["ok"]).await.unwrap(), Some(v(1)));

    // Listing with values: the stream fails on the foreign link.
    let listed: Result<Vec<dynatree::Entry<V>>, _> = t.list_items(Path::root()).try_collect().await;
    assert!(listed.unwrap_err().is_out_of_scope());
    // Names alone are fine.
    let names: Vec<String> = t.list(Path::root()).try_collect().await.unwrap();
    assert_eq!(names, ["hop", "in", "ok", "out"]);
    // The whole tree still follows it.
    assert_eq!(tree.get::<V>(["T", "out"]).await.unwrap(), Some(v(13)));
}

#[tokio::test]
async fn moves_copies_and_intents_are_relative() {
    let tree = tree().await;
    let t = tree.scope(["T"]).unwrap();
    t.put(["org", "eng", "db"], &v(1)).await.unwrap();
    t.put(["org", "eng", "db", "alice"], &v(2)).await.unwrap();
    t.put_link(["people", "alice"], ["org", "eng", "db", "alice"])
        .await
        .unwrap();
    // A link outside the scope into the moved subtree: not reported, not rewritten.
    tree.put_link(["elsewhere"], ["T", "org", "eng", "db", "alice"])
        .await
        .unwrap();

    let report = t
        .move_subtree_with(
            ["org", "eng", "db"],
            ["org", "data", "db"],
            LinkPolicy::Rewrite,
        )
        .await
        .unwrap();
    assert_eq!(report.objects, 2);
    assert_eq!(
        report.links,
        [(p(["people", "alice"]), p(["org", "eng", "db", "alice"]))]
    );
    assert_eq!(
        t.read_link(["people", "alice"]).await.unwrap(),
        p(["org", "data", "db", "alice"])
    );
    assert_eq!(
        tree.read_link(["elsewhere"]).await.unwrap(),
        p(["T", "org", "eng", "db", "alice"])
    );

    let copied = t.copy_subtree(["org", "data"], ["copy"]).await.unwrap();
    assert_eq!(copied.objects, 2);
    assert_eq!(
        t.get::<V>(["copy", "db", "alice"]).await.unwrap(),
        Some(v(2))
    );
    assert!(t.pending().await.unwrap().is_empty());
    assert!(t.resume().await.unwrap().is_empty());

    // Paths outside: still refused by the move's own rules, relative to the scope.
    assert!(
        t.move_subtree(["nothing"], ["x"])
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn pending_intents_of_a_scope_are_relative_and_its_own() {
    use dynatree::storage::Value;
    use dynatree::storage::{Condition, Storage};
    // A move recorded by a process that died before its first step: through the scope it is
    // listed with relative paths, through another scope not at all; resume finishes it.
    let tree = tree().await;
    let t = tree.scope(["T"]).unwrap();
    let other = tree.scope(["U"]).unwrap();
    t.put(["a", "b"], &v(1)).await.unwrap();
    let mut intent = Item::new();
    for (name, value) in [
        ("Key", "¦¦intents"),
        ("Child", "0000000000001-00000000000000aa"),
        ("¦op", "move"),
        ("¦from", "¦T¦a"),
        ("¦to", "¦T¦z"),
        ("¦phase", "lock"),
        ("¦links", "report"),
    ] {
        intent.insert(name, Value::S(value.to_owned()));
    }
    tree.storage()
        .put_item(intent, Condition::Always)
        .await
        .unwrap();

    let all = tree.pending().await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(
        (all[0].from.clone(), all[0].to.clone()),
        (p(["T", "a"]), p(["T", "z"]))
    );
    let mine = t.pending().await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(
        (mine[0].from.clone(), mine[0].to.clone()),
        (p(["a"]), p(["z"]))
    );
    assert!(other.pending().await.unwrap().is_empty());
    assert!(other.resume().await.unwrap().is_empty());
    assert_eq!(tree.pending().await.unwrap().len(), 1);

    let reports = t.resume().await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].objects, 1);
    assert!(tree.pending().await.unwrap().is_empty());
    assert_eq!(t.get::<V>(["z", "b"]).await.unwrap(), Some(v(1)));
    assert_eq!(t.get::<V>(["a", "b"]).await.unwrap(), None);
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(
    path = "Accounts/{account}/Links/{short}",
    index(name = "by_target", hash = target)
)]
struct Link {
    account: String,
    short: String,
    target: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}")]
struct Account {
    account: String,
    name: String,
}

fn link(short: &str) -> Link {
    Link {
        account: "a".into(),
        short: short.into(),
        target: "https://example.com".into(),
    }
}

#[tokio::test]
async fn repositories_and_indexes_are_isolated_between_scopes() {
    let tree = Tree::builder(FakeTable::new())
        .indexes_of::<Link>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let (one, two) = (
        tree.scope(["Tenants", "one"]).unwrap(),
        tree.scope(["Tenants", "onetwo"]).unwrap(),
    );
    one.repo::<Link>().put(&link("x")).await.unwrap();
    one.repo::<Account>()
        .put(&Account {
            account: "a".into(),
            name: "One".into(),
        })
        .await
        .unwrap();
    two.repo::<Link>()
        .put_all(&[link("y"), link("z")])
        .await
        .unwrap();
    tree.repo::<Link>().put(&link("w")).await.unwrap();

    // Stored under the scope's root.
    assert_eq!(
        tree.get::<Link>(["Tenants", "one", "Accounts", "a", "Links", "x"])
            .await
            .unwrap(),
        Some(link("x"))
    );
    let links = one.repo::<Link>();
    assert_eq!(links.get(&link("x").key()).await.unwrap(), Some(link("x")));
    assert_eq!(links.get(&link("y").key()).await.unwrap(), None);
    assert_eq!(
        links
            .get_many(&[link("x").key(), link("y").key()])
            .await
            .unwrap(),
        [Some(link("x")), None]
    );
    assert_eq!(
        links
            .ancestor::<Account>(&link("x").key())
            .await
            .unwrap()
            .map(|a| a.name),
        Some("One".to_owned())
    );
    assert!(
        links
            .create(&link("x"))
            .await
            .unwrap_err()
            .is_already_exists()
    );

    // Collections: each scope its own.
    let coll = LinkCollection {
        account: "a".into(),
    };
    let mine: Vec<Link> = one.repo::<Link>().list(&coll).try_collect().await.unwrap();
    assert_eq!(mine, [link("x")]);
    let theirs: Vec<Link> = two
        .repo::<Link>()
        .query(&coll)
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(theirs, [link("y"), link("z")]);
    let whole: Vec<Link> = tree.repo::<Link>().list(&coll).try_collect().await.unwrap();
    assert_eq!(whole, [link("w")]);

    // Index queries: the same value in every scope, each sees its own.
    let by_target = |t: &Tree| {
        t.repo::<Link>()
            .index(Link::index_by_target("https://example.com"))
            .items()
            .try_collect::<Vec<Link>>()
    };
    assert_eq!(by_target(&one).await.unwrap(), [link("x")]);
    let mut got = by_target(&two).await.unwrap();
    got.sort_by(|a, b| a.short.cmp(&b.short));
    assert_eq!(got, [link("y"), link("z")]);
    assert_eq!(by_target(&tree).await.unwrap(), [link("w")]);

    // Deleting through one scope leaves the other alone.
    one.repo::<Link>().delete(&link("x").key()).await.unwrap();
    assert!(by_target(&one).await.unwrap().is_empty());
    assert_eq!(by_target(&two).await.unwrap().len(), 2);
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Events/{id}", index(name = "by_kind", hash = kind, range = day))]
struct Event {
    id: String,
    kind: String,
    day: String,
}

/// Every row of the table, sorted by key.
async fn all_rows(tree: &Tree) -> Vec<Item> {
    let mut rows: Vec<Item> = tree.scan().try_collect().await.expect("scan");
    rows.sort_by(|a, b| {
        (a.get_s("Key"), a.get_s("Child")).cmp(&(b.get_s("Key"), b.get_s("Child")))
    });
    rows
}

/// A scope's index hash is its root, the template and the value joined by the reserved
/// character. A value holding the reserved character could spell the hash of a scope nested
/// in the writer's (`Tenants/t1` writing `<template>¦v` is `Tenants/t1/<template>` writing
/// `v`): such values are refused on every write and in queries, and an index query through a
/// scope returns nothing from outside its root even when the table holds such a row.
#[tokio::test]
async fn index_values_cannot_reach_into_a_nested_scope() {
    let tree = Tree::builder(FakeTable::new())
        .indexes_of::<Link>()
        .indexes_of::<Event>()
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let outer = tree.scope(["Tenants", "t1"]).unwrap();
    let nested = outer.scope([Link::TEMPLATE]).unwrap();
    let target = "https://example.com";
    let crafted = Link {
        target: format!("{}¦{target}", Link::TEMPLATE),
        ..link("x")
    };
    let before = all_rows(&tree).await;
    for t in [&outer, &nested, &tree] {
        let links = t.repo::<Link>();
        let refusals = [
            links.put(&crafted).await.unwrap_err(),
            links.create(&crafted).await.unwrap_err(),
            links
                .put_all(&[link("ok"), crafted.clone()])
                .await
                .unwrap_err(),
        ];
        for e in refusals {
            assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e:?}");
            assert!(e.is_invalid_input());
            assert!(e.to_string().contains("reserved character"), "{e}");
        }
        // Asking for such a value is refused the same way.
        let e = links
            .index(Link::index_by_target(&crafted.target))
            .items()
            .try_collect::<Vec<_>>()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e:?}");
    }
    // Index range values too, written or compared with.
    let event = Event {
        id: "e".into(),
        kind: "k".into(),
        day: "01¦02".into(),
    };
    let e = outer.repo::<Event>().put(&event).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e:?}");
    let e = outer
        .repo::<Event>()
        .index(Event::index_by_kind("k"))
        .ge(&"01¦".to_owned())
        .items()
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e:?}");
    assert_eq!(all_rows(&tree).await, before, "nothing written");

    // A row forged anyway (by another program) in the outer scope, with the nested scope's
    // index hash, and an item of the nested scope itself with the same value.
    let forged_path = ["Tenants", "t1", "Accounts", "a", "Links", "x"];
    let mut row = Item::from_serialize(&link("x")).unwrap();
    row.insert(
        "Key",
        dynatree::storage::Value::S(format!("¦{}", forged_path.join("¦"))),
    );
    row.insert("Child", dynatree::storage::Value::S("¦".into()));
    row.insert(
        "¦ix.by_target.h",
        dynatree::storage::Value::S(format!("¦Tenants¦t1¦{t}¦{t}¦{target}", t = Link::TEMPLATE)),
    );
    dynatree::storage::Storage::put_item(tree.storage(), row, dynatree::storage::Condition::Always)
        .await
        .unwrap();
    nested.repo::<Link>().put(&link("n")).await.unwrap();
    let found: Vec<Link> = nested
        .repo::<Link>()
        .index(Link::index_by_target(target))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found, [link("n")], "only the nested scope's own item");
    // The outer scope reads the forged row at its path, and finds only its own through the
    // index: the forged row's hash is not the outer scope's.
    assert_eq!(
        tree.get::<Link>(forged_path).await.unwrap(),
        Some(link("x"))
    );
    let outer_found: Vec<Link> = outer
        .repo::<Link>()
        .index(Link::index_by_target(target))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert!(outer_found.is_empty(), "{outer_found:?}");
}

#[tokio::test]
async fn scopes_compose() {
    let tree = tree().await;
    let ab = tree.scope(["a", "b"]).unwrap();
    let a_then_b = tree.scope(["a"]).unwrap().scope(["b"]).unwrap();
    assert_eq!(ab.scope_root(), a_then_b.scope_root());
    assert_eq!(ab.scope_root(), p(["a", "b"]));
    a_then_b.put(["c"], &v(1)).await.unwrap();
    assert_eq!(ab.get::<V>(["c"]).await.unwrap(), Some(v(1)));
    assert_eq!(tree.get::<V>(["a", "b", "c"]).await.unwrap(), Some(v(1)));
    // A scope of the root is the tree itself; of a scope's root, the same scope.
    assert!(!tree.scope(Path::root()).unwrap().is_scoped());
    assert_eq!(ab.scope(Path::root()).unwrap().scope_root(), p(["a", "b"]));
    // A scope's root is checked like any path.
    assert!(tree.scope(["a¦b"]).unwrap_err().is_invalid_path());
    let long = "x".repeat(1000);
    let deep = tree.scope([long.as_str(), long.as_str()]).unwrap();
    assert!(
        deep.put([long.as_str()], &v(1))
            .await
            .unwrap_err()
            .is_invalid_path()
    );
}
