//! Reads of several types at once (`Tree::entities`, `#[derive(Entity)]`): each object decoded
//! as the variant whose template matches its path, in the request plan of one type; objects no
//! variant names become the `other` variant or are skipped, never an error; links, scopes,
//! cursors, sharded directories and the path index.

use dynatree::entity::Unknown;
use dynatree::{Entity, ErrorKind, Hierarchical, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::common::{go_put, s};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}")]
struct Account {
    account: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
    target: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}/Folders/{folder}")]
struct Folder {
    account: String,
    folder: u64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
enum AccountItem {
    Account(Account),
    Link(Link),
    Folder(Folder),
    #[dynatree(other)]
    Other(Unknown),
}

/// The same types without an `other` variant.
#[derive(Entity, Debug, Clone, PartialEq)]
enum Known {
    Account(Account),
    Link(Link),
    Folder(Folder),
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}", reserved = "|")]
struct PipeAccount {
    account: String,
}

fn link(account: &str, short: &str) -> Link {
    Link {
        account: account.into(),
        short: short.into(),
        target: format!("https://{short}"),
    }
}

/// Account 1 with `links` links, two folders, and a note no type names.
async fn account(tree: &Tree, links: usize) {
    let account = Account {
        account: "1".into(),
        name: "Ann".into(),
    };
    tree.repo::<Account>().put(&account).await.unwrap();
    let all: Vec<Link> = (0..links).map(|i| link("1", &format!("l{i:03}"))).collect();
    tree.repo::<Link>().put_all(&all).await.unwrap();
    for folder in [7, 30] {
        let f = Folder {
            account: "1".into(),
            folder,
        };
        tree.repo::<Folder>().put(&f).await.unwrap();
    }
    tree.put(
        ["Accounts", "1", "Notes", "n1"],
        &serde_json::json!({ "text": "hi" }),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_parents_children_cost_what_one_types_query_costs() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    account(&tree, 150).await;

    table.reset_metrics();
    let typed: Vec<Link> = tree
        .repo::<Link>()
        .query(&LinkCollection {
            account: "1".into(),
        })
        .items()
        .try_collect()
        .await
        .unwrap();
    let one_type = table.metrics().requests_by_operation().clone();

    table.reset_metrics();
    let items: Vec<AccountItem> = tree
        .entities::<AccountItem>()
        .list(["Accounts", "1", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(table.metrics().requests_by_operation(), &one_type);
    assert_eq!(table.metrics().requests("Query"), 1);
    assert_eq!(
        table.metrics().requests("BatchGetItem"),
        2,
        "150 objects: two batches"
    );
    assert_eq!(table.metrics().total_requests(), 3);
    let links: Vec<Link> = items
        .into_iter()
        .map(|i| match i {
            AccountItem::Link(l) => l,
            other => panic!("not a link: {other:?}"),
        })
        .collect();
    assert_eq!(links, typed);
}

#[tokio::test]
async fn descendants_mix_every_type_in_one_walk_or_one_index_query() {
    for index in [false, true] {
        let table = FakeTable::new();
        let builder = Tree::builder(table.clone());
        let tree = if index {
            builder.path_index(1).build().unwrap()
        } else {
            builder.build().unwrap()
        };
        tree.create_table().await.unwrap();
        account(&tree, 3).await;

        table.reset_metrics();
        let raw: Vec<dynatree::Descendant> = tree
            .descendants(["Accounts"])
            .items()
            .try_collect()
            .await
            .unwrap();
        let plan = table.metrics().requests_by_operation().clone();
        table.reset_metrics();
        let all: Vec<AccountItem> = tree
            .entities::<AccountItem>()
            .descendants(["Accounts"])
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            table.metrics().requests_by_operation(),
            &plan,
            "index: {index}"
        );
        if index {
            assert_eq!(table.metrics().total_requests(), 1, "one index query");
        }
        assert_eq!(all.len(), raw.len());
        let kinds: Vec<String> = all
            .iter()
            .map(|i| match i {
                AccountItem::Account(a) => format!("account {}", a.account),
                AccountItem::Link(l) => format!("link {}", l.short),
                AccountItem::Folder(f) => format!("folder {}", f.folder),
                AccountItem::Other(u) => format!("other {}", u.path()),
            })
            .collect();
        let mut sorted = kinds.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                "account 1",
                "folder 30",
                "folder 7",
                "link l000",
                "link l001",
                "link l002",
                "other /Accounts/1/Notes/n1",
            ],
            "index: {index}"
        );
        // Paths of one order: the descendants' own.
        let paths: Vec<String> = raw.iter().map(|d| d.path.to_string()).collect();
        let by_path: Vec<String> = all
            .iter()
            .map(|i| match i {
                AccountItem::Account(a) => format!("/Accounts/{}", a.account),
                AccountItem::Link(l) => format!("/Accounts/{}/Links/{}", l.account, l.short),
                AccountItem::Folder(f) => format!(
                    "/Accounts/{}/Folders/{}",
                    f.account,
                    FolderKey {
                        account: f.account.clone(),
                        folder: f.folder
                    }
                    .path()
                    .unwrap()
                    .components()[3]
                ),
                AccountItem::Other(u) => u.path().to_string(),
            })
            .collect();
        assert_eq!(by_path, paths, "index: {index}");
    }
}

#[tokio::test]
async fn objects_no_variant_names_are_the_other_variant_or_skipped_never_errors() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    account(&tree, 2).await;
    // Rows the Go library wrote, where no type lives: among the links and beside them.
    go_put(
        &table,
        &["Accounts", "1", "Links", "a", "deeper"],
        &[("x", s("1"))],
    )
    .await;
    go_put(&table, &["Accounts", "1", "Stray"], &[("x", s("2"))]).await;

    let with_other: Vec<AccountItem> = tree
        .entities::<AccountItem>()
        .descendants(["Accounts", "1"])
        .try_collect()
        .await
        .unwrap();
    let unknown: Vec<&Unknown> = with_other
        .iter()
        .filter_map(|i| match i {
            AccountItem::Other(u) => Some(u),
            _ => None,
        })
        .collect();
    let paths: Vec<String> = unknown.iter().map(|u| u.path().to_string()).collect();
    assert_eq!(
        paths,
        [
            "/Accounts/1/Links/a/deeper",
            "/Accounts/1/Notes/n1",
            "/Accounts/1/Stray"
        ]
    );
    // The object without the bookkeeping attributes, readable as any type.
    for u in &unknown {
        assert!(u.object().names().all(|n| !n.starts_with('¦')), "{u:?}");
    }
    let note: serde_json::Value = unknown[1].value().unwrap();
    assert_eq!(note, serde_json::json!({ "text": "hi" }));

    let known: Vec<Known> = tree
        .entities::<Known>()
        .descendants(["Accounts", "1"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(known.len(), with_other.len() - 3, "the three are skipped");
    // A parent whose children no variant names: an empty list, not an error.
    let notes: Vec<Known> = tree
        .entities::<Known>()
        .list(["Accounts", "1", "Notes"])
        .try_collect()
        .await
        .unwrap();
    assert!(notes.is_empty());
    assert_eq!(
        tree.entities::<Known>()
            .get(["Accounts", "1", "Notes", "n1"])
            .await
            .unwrap(),
        None
    );
    let got = tree
        .entities::<AccountItem>()
        .get(["Accounts", "1", "Notes", "n1"])
        .await
        .unwrap();
    assert!(
        matches!(got, Some(AccountItem::Other(u)) if u.path().to_string() == "/Accounts/1/Notes/n1")
    );
}

#[tokio::test]
async fn an_object_that_does_not_fit_the_variant_its_path_names_is_an_error() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    go_put(&table, &["Accounts", "9"], &[("account", s("9"))]).await; // no `name`
    let err = tree
        .entities::<AccountItem>()
        .get(["Accounts", "9"])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    let listed: Result<Vec<AccountItem>, _> = tree
        .entities::<AccountItem>()
        .list(["Accounts"])
        .try_collect()
        .await;
    assert_eq!(listed.unwrap_err().kind(), ErrorKind::Serialization);
}

#[tokio::test]
async fn get_decodes_by_the_path_asked_for_and_follows_links() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    tree.repo::<Link>().put(&link("2", "x")).await.unwrap();
    tree.put_link(
        ["Accounts", "1", "Links", "alias"],
        ["Accounts", "2", "Links", "x"],
    )
    .await
    .unwrap();
    let items = tree.entities::<AccountItem>();
    let got = items
        .get(["Accounts", "1", "Links", "alias"])
        .await
        .unwrap();
    assert_eq!(got, Some(AccountItem::Link(link("2", "x"))));
    assert_eq!(
        items.get(["Accounts", "1", "Links", "none"]).await.unwrap(),
        None
    );
    // A single hierarchical type is an entity too.
    let one = tree.entities::<Link>();
    assert_eq!(
        one.get(["Accounts", "2", "Links", "x"]).await.unwrap(),
        Some(link("2", "x"))
    );
    let listed: Vec<Link> = one
        .list(["Accounts", "1", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed, [link("2", "x")]);
    // An invalid path: a typed error, nothing sent.
    table.reset_metrics();
    let err = items.get(["Accounts", "1", "a¦b"]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath);
    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn an_entity_of_another_reserved_character_is_refused_with_nothing_sent() {
    #[derive(Entity, Debug)]
    #[allow(dead_code)] // never decoded: every read is refused first
    enum Piped {
        Account(PipeAccount),
    }
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    account(&tree, 1).await;
    table.reset_metrics();
    let pipes = tree.entities::<Piped>();
    let kinds = [
        pipes.get(["Accounts", "1"]).await.unwrap_err().kind(),
        pipes
            .list(["Accounts"])
            .try_collect::<Vec<_>>()
            .await
            .unwrap_err()
            .kind(),
        pipes
            .query(["Accounts"])
            .items()
            .try_collect::<Vec<_>>()
            .await
            .unwrap_err()
            .kind(),
        pipes
            .descendants(["Accounts"])
            .try_collect::<Vec<_>>()
            .await
            .unwrap_err()
            .kind(),
    ];
    assert_eq!(kinds, [ErrorKind::InvalidReserved; 4]);
    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn a_scoped_tree_decodes_by_the_path_in_the_table() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    account(&tree, 2).await;
    let scoped = tree.scope(["Accounts", "1"]).unwrap();
    let items = scoped.entities::<AccountItem>();
    assert_eq!(
        items.get(["Links", "l001"]).await.unwrap(),
        Some(AccountItem::Link(link("1", "l001")))
    );
    let links: Vec<AccountItem> = items.list(["Links"]).try_collect().await.unwrap();
    assert_eq!(links.len(), 2);
    let below: Vec<AccountItem> = items
        .descendants(dynatree::Path::root())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(below.len(), 5, "two links, two folders, the note");
    assert!(below.iter().any(
        |i| matches!(i, AccountItem::Other(u) if u.path().to_string() == "/Accounts/1/Notes/n1")
    ));
}

#[tokio::test]
async fn a_query_over_names_pages_resumes_and_counts_only_decoded_values() {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    account(&tree, 10).await;
    // A child without an object among them (a directory): no value, so not counted.
    tree.put(
        ["Accounts", "1", "Links", "l004x", "deep"],
        &serde_json::json!({ "x": 1 }),
    )
    .await
    .unwrap();
    let query = || tree.entities::<Known>().query(["Accounts", "1", "Links"]);
    let first = query()
        .page_size(3)
        .pages()
        .try_next()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.items.len(), 3);
    let rest: Vec<Known> = query()
        .start_after(first.cursor.unwrap())
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        rest.len(),
        7,
        "every link after the first page, the directory skipped"
    );
    let between: Vec<Known> = query()
        .between("l002", "l005")
        .descending()
        .limit(3)
        .items()
        .try_collect()
        .await
        .unwrap();
    let shorts: Vec<&str> = between
        .iter()
        .map(|k| match k {
            Known::Link(l) => l.short.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(shorts, ["l005", "l004", "l003"]);
}

#[tokio::test]
async fn a_sharded_directory_is_read_one_query_per_shard() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .sharded("Accounts/{account}/Links", 4)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    account(&tree, 20).await;
    table.reset_metrics();
    let items: Vec<AccountItem> = tree
        .entities::<AccountItem>()
        .list(["Accounts", "1", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(items.len(), 20);
    assert_eq!(table.metrics().requests("Query"), 4);
    assert_eq!(table.metrics().requests("BatchGetItem"), 1);
}
