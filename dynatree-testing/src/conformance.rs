//! The conformance suite: behaviours every [`Storage`] backend must share, each an `async fn`
//! that takes a fresh, not yet created table and panics on a difference.
//!
//! `tests/conformance.rs` runs every case on [`FakeTable`](crate::FakeTable) and on DynamoDB
//! Local, so the fake cannot drift from the real service. Cases include the scenarios of the Go
//! library dynamotree and one test per defect of it that dynatree fixes.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use dynatree::storage::{
    Condition, Key, Query, RangeCondition, Storage, TransactAction, WriteRequest,
};
use dynatree::{
    ErrorKind, Hierarchical, Path, RetryPolicy, Tree, storage, storage::Item, storage::Value,
};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

/// A boxed conformance case.
pub type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One named case, generic over the backend.
pub type Case<S> = fn(S) -> CaseFuture;

/// Every case, by name.
///
/// # Examples
///
/// ```
/// use dynatree_testing::{FakeTable, conformance};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// for (name, case) in conformance::cases::<FakeTable>() {
///     if name == "basic_sequence" {
///         case(FakeTable::new()).await;
///     }
/// }
/// # }
/// ```
pub fn cases<S: Storage + 'static>() -> Vec<(&'static str, Case<S>)> {
    macro_rules! case {
        ($f:ident) => {
            (
                stringify!($f),
                (|s: S| Box::pin($f(s)) as CaseFuture) as Case<S>,
            )
        };
    }
    vec![
        case!(create_table_is_idempotent),
        case!(basic_sequence),
        case!(worked_example_rows),
        case!(link_rows),
        case!(reserved_character_x),
        case!(invalid_input_writes_nothing),
        case!(get_validates_paths),
        case!(root_listing_works),
        case!(delete_one_component_path),
        case!(delete_keeps_children_reachable),
        case!(delete_prunes_empty_ancestors),
        case!(link_cycle_is_an_error),
        case!(key_and_child_attributes_refused),
        case!(serialization_failures),
        case!(enums_round_trip_as_whole_values_and_fields),
        case!(link_failures),
        case!(early_stop_of_a_listing),
        case!(fifty_component_path),
        case!(path_deeper_than_one_transaction),
        case!(list_items_reads_objects_and_follows_links),
        case!(listing_is_in_byte_order_across_pages),
        case!(go_written_rows_are_readable),
        case!(conditional_writes),
        case!(transaction_cancellation_reasons),
        case!(transaction_key_checks),
        case!(service_limits_are_enforced),
        case!(query_ranges_and_pages),
        case!(one_megabyte_pages),
        case!(batches_of_any_size),
        case!(concurrent_puts_and_deletes_keep_objects_reachable),
        case!(typed_repository_crud),
        case!(typed_optimistic_update),
        case!(typed_range_queries),
        case!(typed_values_are_checked_at_run_time),
        case!(typed_links_and_reserved_character),
        case!(typed_secondary_indexes),
        case!(indexes_are_added_to_an_existing_table),
        case!(ancestors_root_first),
        case!(descendants_by_walk_and_path_index),
        case!(delete_subtree_removes_everything_below),
        case!(move_and_copy_subtrees),
        case!(delete_node_refuses_reparents_or_recurses),
        case!(go_null_strings_read_as_empty_strings),
        case!(values_dynamodb_refuses_are_refused_before_sending),
        case!(queries_dynamodb_refuses_are_refused_before_sending),
        case!(condition_operators),
        case!(update_item_semantics),
        case!(update_item_refusals),
        case!(update_item_without_actions),
        case!(transaction_updates),
        case!(idempotent_transactions),
        case!(time_to_live),
        case!(projected_reads),
        case!(projection_with_a_name_twice_is_refused),
        case!(projection_with_an_empty_name_is_refused),
        case!(projection_name_count_limit),
        case!(index_names_follow_dynamodb_rules),
        case!(typed_transactions),
        case!(typed_conditions_and_patches),
        case!(typed_idempotent_transaction),
        case!(typed_expiry_and_sweep),
        case!(typed_projections_and_consistent_reads),
        case!(typed_denormalized_fields),
        case!(transact_get_rules),
        case!(check_and_repair),
    ]
}

/// A small value type for the cases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct V {
    /// A number.
    pub v: u32,
}

fn p(components: &[&str]) -> Path {
    Path::new(components.iter().copied()).expect("test paths are non-empty")
}

async fn tree<S: Storage + 'static>(table: S) -> Tree {
    let tree = Tree::builder(table)
        .retry_policy(fast_retry())
        .build()
        .expect("default tree");
    tree.create_table().await.expect("create table");
    tree
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy::new(
        8,
        std::time::Duration::from_millis(1),
        std::time::Duration::from_millis(20),
    )
}

async fn names(tree: &Tree, prefix: Path) -> Vec<String> {
    tree.list(prefix).try_collect().await.expect("list")
}

/// Every row of the table as `(Key, Child, other attribute names)`, sorted.
pub async fn rows(tree: &Tree) -> Vec<(String, String, Vec<String>)> {
    let mut rows: Vec<_> = tree
        .scan()
        .map_ok(|item| {
            let key = Key::from_item(&item).expect("every row has a key");
            let attrs = item
                .names()
                .filter(|n| *n != dynatree::storage::HASH_KEY && *n != dynatree::storage::RANGE_KEY)
                .map(str::to_owned)
                .collect();
            (key.hash, key.range, attrs)
        })
        .try_collect()
        .await
        .expect("scan");
    rows.sort();
    rows
}

/// Asserts the tree's invariants on the raw rows: every listing row's ancestors exist (upward
/// closure) and every object row's listing row exists (reachability).
pub async fn assert_invariants(tree: &Tree) {
    let sc = tree.reserved();
    let all = rows(tree).await;
    let keys: BTreeSet<(String, String)> =
        all.iter().map(|(h, r, _)| (h.clone(), r.clone())).collect();
    let listing_of = |components: &[&str]| {
        let (last, parent) = components.split_last().expect("non-empty");
        let mut h = String::from(sc);
        for c in parent {
            h.push_str(c);
            h.push(sc);
        }
        (h, (*last).to_owned())
    };
    let intents = format!("{sc}{sc}intents");
    let fence = format!("{sc}fence");
    let settings = dynatree::storage::TableSettings::key(sc);
    for (h, r, attrs) in &all {
        // A fence row (fenced puts) is no object; the table's settings row is no path.
        if *h == intents || attrs.contains(&fence) || (*h == settings.hash && *r == settings.range)
        {
            continue;
        }
        let path: Vec<&str> = if r == &sc.to_string() {
            // Object row: Key = SC k0 SC … k(n-1)
            h.strip_prefix(sc).expect("object key").split(sc).collect()
        } else {
            // Listing row: Key = SC k0 SC … SC, Child = k(i)
            let inner = h.strip_prefix(sc).expect("listing key");
            let mut p: Vec<&str> = if inner.is_empty() {
                Vec::new()
            } else {
                inner
                    .strip_suffix(sc)
                    .expect("listing key")
                    .split(sc)
                    .collect()
            };
            p.push(r);
            p
        };
        for i in 1..=path.len() {
            let needed = listing_of(&path[..i]);
            assert!(
                keys.contains(&needed),
                "row ({h:?}, {r:?}) needs listing row {needed:?}, which is missing"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// Creating the table twice succeeds; the tree works after. The table is on-demand and active
/// when `create_table` returns (dynamotree defect 8: 1/1 provisioned, no wait).
pub async fn create_table_is_idempotent<S: Storage + 'static>(table: S) {
    assert!(table.describe_table().await.unwrap().is_none());
    let e = table
        .get_item(&Key::new("a", "b"), false)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableNotFound, "{e:?}");
    let tree = tree(table).await;
    let d = tree.storage().describe_table().await.unwrap().unwrap();
    assert_eq!(d.status, dynatree::storage::TableStatus::Active);
    assert_eq!(d.billing, dynatree::storage::Billing::OnDemand);
    tree.create_table().await.expect("second create");
    let d = tree.storage().describe_table().await.unwrap().unwrap();
    assert!(d.has_tree_schema());
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    tree.create_table().await.expect("third create keeps data");
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), Some(V { v: 1 }));
}

/// dynamotree's basic scenario: put, link, get through the link, list, delete.
pub async fn basic_sequence<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Link {
        #[serde(rename = "LinkTarget")]
        target: String,
    }
    let link = Link {
        target: "http://example.com/".into(),
    };
    tree.put(["Accounts", "123456", "Links", "xyzpdq"], &link)
        .await
        .unwrap();
    tree.put(["Accounts", "12345"], &V { v: 5 }).await.unwrap();
    tree.put_link(
        ["AccountsByEmail", "alice@example.com"],
        ["Accounts", "12345"],
    )
    .await
    .unwrap();
    assert_eq!(
        tree.get::<Link>(["Accounts", "123456", "Links", "xyzpdq"])
            .await
            .unwrap(),
        Some(link)
    );
    assert_eq!(
        tree.get::<V>(["AccountsByEmail", "alice@example.com"])
            .await
            .unwrap(),
        Some(V { v: 5 })
    );
    assert_eq!(
        tree.read_link(["AccountsByEmail", "alice@example.com"])
            .await
            .unwrap(),
        p(&["Accounts", "12345"])
    );
    assert_eq!(
        names(&tree, Path::root()).await,
        ["Accounts", "AccountsByEmail"]
    );
    assert_eq!(names(&tree, p(&["Accounts"])).await, ["12345", "123456"]);
    tree.delete(["Accounts", "12345"]).await.unwrap();
    assert_eq!(tree.get::<V>(["Accounts", "12345"]).await.unwrap(), None);
    assert_eq!(
        tree.get::<V>(["AccountsByEmail", "alice@example.com"])
            .await
            .unwrap(),
        None,
        "a dangling link reads as nothing"
    );
    assert_eq!(names(&tree, p(&["Accounts"])).await, ["123456"]);
    assert_invariants(&tree).await;
}

/// The exact rows of REFERENCE §2's worked example.
pub async fn worked_example_rows<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    #[derive(Serialize)]
    struct Link {
        #[serde(rename = "LinkTarget")]
        target: &'static str,
    }
    tree.put(
        ["Accounts", "123456", "Links", "xyzpdq"],
        &Link {
            target: "http://example.com/",
        },
    )
    .await
    .unwrap();
    let expected: Vec<(String, String, Vec<String>)> = vec![
        ("¦".into(), "Accounts".into(), vec![]),
        ("¦Accounts¦".into(), "123456".into(), vec![]),
        ("¦Accounts¦123456¦".into(), "Links".into(), vec![]),
        ("¦Accounts¦123456¦Links¦".into(), "xyzpdq".into(), vec![]),
        (
            "¦Accounts¦123456¦Links¦xyzpdq".into(),
            "¦".into(),
            vec!["LinkTarget".into()],
        ),
    ];
    let mut expected = expected;
    expected.sort();
    assert_eq!(rows(&tree).await, expected);
    let raw = tree
        .storage()
        .get_item(&Key::new("¦Accounts¦123456¦Links¦xyzpdq", "¦"), true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        raw.get("LinkTarget"),
        Some(&Value::S("http://example.com/".into()))
    );
}

/// A link is stored as in dynamotree: one attribute named SC holding `SC t0 SC t1`.
pub async fn link_rows<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    tree.put_link(
        ["AccountsByEmail", "alice@example.com"],
        ["Accounts", "12345"],
    )
    .await
    .unwrap();
    let mut expected: Vec<(String, String, Vec<String>)> = vec![
        ("¦".into(), "AccountsByEmail".into(), vec![]),
        (
            "¦AccountsByEmail¦".into(),
            "alice@example.com".into(),
            vec![],
        ),
        (
            "¦AccountsByEmail¦alice@example.com".into(),
            "¦".into(),
            vec!["¦".into()],
        ),
    ];
    expected.sort();
    assert_eq!(rows(&tree).await, expected);
    let raw = tree
        .storage()
        .get_item(&Key::new("¦AccountsByEmail¦alice@example.com", "¦"), true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw.get_s("¦"), Some("¦Accounts¦12345"));
}

/// dynamotree's test with reserved character `X`.
pub async fn reserved_character_x<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .reserved('X')
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    tree.put_link(["l"], ["a", "b"]).await.unwrap();
    assert_eq!(tree.get::<V>(["l"]).await.unwrap(), Some(V { v: 1 }));
    let e = tree.put(["aXb"], &V { v: 2 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    // `¦` is an ordinary character in this tree.
    tree.put(["a¦b"], &V { v: 3 }).await.unwrap();
    assert_eq!(tree.get::<V>(["a¦b"]).await.unwrap(), Some(V { v: 3 }));
    let r = rows(&tree).await;
    assert!(r.contains(&("XaX".into(), "b".into(), vec![])));
    assert!(r.contains(&("XaXb".into(), "X".into(), vec!["v".into()])));
    assert!(r.contains(&("Xl".into(), "X".into(), vec!["X".into()])));
    assert_invariants(&tree).await;
}

/// Every kind of invalid input is a typed error and writes nothing.
pub async fn invalid_input_writes_nothing<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let bad_paths: Vec<Vec<String>> = vec![
        vec!["a¦b".into()],
        vec!["ok".into(), "x¦".into()],
        vec!["a".repeat(1025)],
        vec!["a".repeat(1000), "b".repeat(1000), "c".repeat(100)],
    ];
    for bad in &bad_paths {
        let path = Path::new(bad.clone()).unwrap();
        let e = tree.put(&path, &V { v: 1 }).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidPath, "put {path:?}");
        let e = tree.put_link(&path, ["t"]).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidPath);
        let e = tree.put_link(["l"], &path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidPath, "link target {path:?}");
        let e = tree.get::<V>(&path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidPath);
        let e = tree.delete(&path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidPath);
        let e = tree.read_link(&path).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidPath);
        let listed: Vec<_> = tree.list(&path).collect().await;
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0].as_ref().unwrap_err().kind(),
            ErrorKind::InvalidPath
        );
    }
    // Empty components and empty paths.
    let e = tree.put(["a", ""], &V { v: 1 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    let e = tree.put(Path::root(), &V { v: 1 }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    let e = tree.delete(Path::root()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    let e = tree.delete(Vec::<String>::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    // Attribute names.
    let mut m = std::collections::BTreeMap::new();
    m.insert("¦secret", 1);
    let e = tree.put(["a"], &m).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidAttribute);
    // Items over 400 KB.
    #[derive(Serialize)]
    struct Big {
        body: String,
    }
    let e = tree
        .put(
            ["big"],
            &Big {
                body: "x".repeat(dynatree::storage::MAX_ITEM_BYTES),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ItemTooLarge);
    // Just under the limit works.
    let overhead = "body".len() + 2 * "¦big".len() + "Key".len() + "Child".len();
    tree.put(
        ["big"],
        &Big {
            body: "x".repeat(dynatree::storage::MAX_ITEM_BYTES - overhead - 10),
        },
    )
    .await
    .expect("an item just under 400 KB");
    tree.delete(["big"]).await.unwrap();
    assert_eq!(rows(&tree).await, vec![], "nothing was written");
}

/// dynamotree defect 1: a component containing SC given to Get addresses another path.
pub async fn get_validates_paths<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    tree.put(["a", "b"], &V { v: 1 }).await.unwrap();
    let e = tree.get::<V>(["a¦b"]).await.unwrap_err();
    assert!(e.is_invalid_path());
    let e = tree.delete(["a¦b"]).await.unwrap_err();
    assert!(e.is_invalid_path());
    assert_eq!(tree.get::<V>(["a", "b"]).await.unwrap(), Some(V { v: 1 }));
}

/// dynamotree defect 2: listing the root returns the top-level names.
pub async fn root_listing_works<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    assert!(names(&tree, Path::root()).await.is_empty());
    tree.put(["b", "x"], &V { v: 1 }).await.unwrap();
    tree.put(["a"], &V { v: 2 }).await.unwrap();
    assert_eq!(names(&tree, Path::root()).await, ["a", "b"]);
}

/// dynamotree defect 3: deleting a one-component path works; an empty path is an error.
pub async fn delete_one_component_path<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    tree.put(["top"], &V { v: 1 }).await.unwrap();
    tree.delete(["top"]).await.unwrap();
    assert_eq!(tree.get::<V>(["top"]).await.unwrap(), None);
    assert!(names(&tree, Path::root()).await.is_empty());
    assert_eq!(rows(&tree).await, vec![]);
    assert!(
        tree.delete(Path::root())
            .await
            .unwrap_err()
            .is_invalid_path()
    );
    // Deleting what is not there succeeds.
    tree.delete(["never"]).await.unwrap();
}

/// dynamotree defect 4: deleting a node with children keeps the subtree reachable.
pub async fn delete_keeps_children_reachable<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    tree.put(["a", "b"], &V { v: 2 }).await.unwrap();
    tree.delete(["a"]).await.unwrap();
    assert_eq!(tree.get::<V>(["a"]).await.unwrap(), None);
    assert_eq!(names(&tree, Path::root()).await, ["a"]);
    assert_eq!(names(&tree, p(&["a"])).await, ["b"]);
    assert_eq!(tree.get::<V>(["a", "b"]).await.unwrap(), Some(V { v: 2 }));
    assert_invariants(&tree).await;
    // Once the child goes too, everything goes.
    tree.delete(["a", "b"]).await.unwrap();
    assert_eq!(rows(&tree).await, vec![]);
}

/// Deleting the last object below a chain of names removes the names; siblings stay.
pub async fn delete_prunes_empty_ancestors<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    tree.put(["a", "b", "c", "d"], &V { v: 1 }).await.unwrap();
    tree.put(["a", "x"], &V { v: 2 }).await.unwrap();
    tree.delete(["a", "b", "c", "d"]).await.unwrap();
    assert_eq!(names(&tree, p(&["a"])).await, ["x"]);
    assert!(names(&tree, p(&["a", "b"])).await.is_empty());
    assert_invariants(&tree).await;
    tree.delete(["a", "x"]).await.unwrap();
    assert_eq!(rows(&tree).await, vec![]);
}

/// dynamotree defect 5: a link cycle is an error, not a hang; long chains hit the hop limit.
pub async fn link_cycle_is_an_error<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .max_link_hops(3)
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    tree.put_link(["a"], ["b"]).await.unwrap();
    tree.put_link(["b"], ["a"]).await.unwrap();
    let e = tree.get::<V>(["a"]).await.unwrap_err();
    assert!(e.is_link_loop(), "{e}");
    tree.put_link(["self"], ["self"]).await.unwrap();
    assert!(tree.get::<V>(["self"]).await.unwrap_err().is_link_loop());
    // A chain of 3 hops is fine, 4 is too long.
    tree.put(["end"], &V { v: 9 }).await.unwrap();
    for (from, to) in [("h3", "end"), ("h2", "h3"), ("h1", "h2")] {
        tree.put_link([from], [to]).await.unwrap();
    }
    assert_eq!(tree.get::<V>(["h1"]).await.unwrap(), Some(V { v: 9 }));
    tree.put_link(["h0"], ["h1"]).await.unwrap();
    assert!(tree.get::<V>(["h0"]).await.unwrap_err().is_link_loop());
    // list_items reports the loop too.
    let items: Vec<_> = tree.list_items::<V>(Path::root()).collect().await;
    assert!(
        items
            .iter()
            .any(|r| r.as_ref().is_err_and(|e| e.is_link_loop()))
    );
}

/// dynamotree defect 6: user attributes named `Key`/`Child` are refused, not overwritten, and
/// a delimiter that starts `Key` or `Child` is refused when the tree is built.
pub async fn key_and_child_attributes_refused<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    for name in ["Key", "Child"] {
        let mut m = std::collections::BTreeMap::new();
        m.insert(name, "x");
        let e = tree.put(["a"], &m).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidAttribute, "{name}");
    }
    assert_eq!(rows(&tree).await, vec![]);
}

/// Serialization fails on write (not a map) and on read (wrong shape), as typed errors.
pub async fn serialization_failures<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let e = tree.put(["n"], &5u32).await.unwrap_err();
    assert!(e.is_serialization());
    let e = tree.put(["s"], "text").await.unwrap_err();
    assert!(e.is_serialization());
    assert_eq!(rows(&tree).await, vec![]);
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Other {
        name: String,
    }
    let e = tree.get::<Other>(["a"]).await.unwrap_err();
    assert!(e.is_serialization());
    assert!(std::error::Error::source(&e).is_some());
}

/// Enums, externally tagged as `serde_dynamo` writes them: a newtype, tuple or struct variant
/// stored as the whole value is an item of one attribute named by the variant, and reads back;
/// every kind of variant, nested ones too, reads back as a field. A unit variant is a string,
/// not an item: refused as a whole value. A variant named like a key or bookkeeping attribute
/// is refused like any such attribute. Nothing refused is written.
pub async fn enums_round_trip_as_whole_values_and_fields<S: Storage + 'static>(table: S) {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    enum Inner {
        Unit,
        Count(u32),
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    enum E {
        Unit,
        Newtype(u32),
        Text(String),
        Tuple(u32, String),
        Struct { x: u32, tags: Vec<String> },
        Nested(Inner),
        Optional(Option<Inner>),
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Holder {
        e: E,
        inner: Inner,
        list: Vec<E>,
    }
    let tree = tree(table).await;
    let whole = [
        E::Newtype(5),
        E::Text("hi".into()),
        E::Tuple(7, "seven".into()),
        E::Struct {
            x: 1,
            tags: vec!["a".into(), "b".into()],
        },
        E::Nested(Inner::Count(3)),
        E::Nested(Inner::Unit),
        E::Optional(Some(Inner::Count(4))),
        E::Optional(None),
    ];
    for (i, value) in whole.iter().enumerate() {
        let path = ["whole", &i.to_string()];
        tree.put(path, value).await.expect("put an enum");
        assert_eq!(
            tree.get::<E>(path).await.expect("get an enum").as_ref(),
            Some(value)
        );
        // Read as an `Option` of the enum too.
        assert_eq!(
            tree.get::<Option<E>>(path)
                .await
                .expect("get")
                .flatten()
                .as_ref(),
            Some(value)
        );
    }
    let everything = vec![E::Unit]
        .into_iter()
        .chain(whole.iter().cloned())
        .collect::<Vec<_>>();
    for (i, e) in everything.iter().enumerate() {
        let holder = Holder {
            e: e.clone(),
            inner: Inner::Unit,
            list: everything.clone(),
        };
        let path = ["field", &i.to_string()];
        tree.put(path, &holder).await.expect("put a holder");
        assert_eq!(
            tree.get::<Holder>(path).await.expect("get a holder"),
            Some(holder)
        );
    }
    let before = rows(&tree).await;
    // A unit variant as the whole value is a string.
    let e = tree.put(["unit"], &E::Unit).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Serialization, "{e:?}");
    // A variant named like the table's keys or dynatree's bookkeeping.
    #[derive(Debug, Serialize)]
    enum Clash {
        Key(u32),
        Child(u32),
        #[serde(rename = "¦ttl")]
        Ttl(u32),
        #[serde(rename = "¦")]
        LinkMark(String),
    }
    for clash in [
        Clash::Key(1),
        Clash::Child(1),
        Clash::Ttl(1),
        Clash::LinkMark("¦a".into()),
    ] {
        let e = tree.put(["clash"], &clash).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidAttribute, "{clash:?}: {e:?}");
    }
    assert_eq!(rows(&tree).await, before);
    // A stored item of two attributes is no enum.
    let two: std::collections::BTreeMap<&str, u32> = [("Newtype", 1), ("Unit", 2)].into();
    tree.put(["two"], &two).await.expect("put");
    let e = tree.get::<E>(["two"]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Serialization, "{e:?}");
}

/// read_link: not found and not a link are distinct; a dangling link reads as nothing.
pub async fn link_failures<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    assert!(
        tree.read_link(["nothing"])
            .await
            .unwrap_err()
            .is_not_found()
    );
    tree.put(["obj"], &V { v: 1 }).await.unwrap();
    assert!(tree.read_link(["obj"]).await.unwrap_err().is_not_a_link());
    tree.put_link(["dangling"], ["missing", "target"])
        .await
        .unwrap();
    assert_eq!(
        tree.read_link(["dangling"]).await.unwrap(),
        p(&["missing", "target"])
    );
    assert_eq!(tree.get::<V>(["dangling"]).await.unwrap(), None);
    // A link can be replaced by an object and back.
    tree.put(["dangling"], &V { v: 2 }).await.unwrap();
    assert!(
        tree.read_link(["dangling"])
            .await
            .unwrap_err()
            .is_not_a_link()
    );
}

/// A listing stopped early returns the first names and sends no further pages.
pub async fn early_stop_of_a_listing<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .page_size(2)
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    for i in 0..9 {
        tree.put(["dir", &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    let first: Vec<String> = tree.list(["dir"]).take(3).try_collect().await.unwrap();
    assert_eq!(first, ["n0", "n1", "n2"]);
    let all = names(&tree, p(&["dir"])).await;
    assert_eq!(all.len(), 9);
}

/// dynamotree's 50-component path.
pub async fn fifty_component_path<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let comps: Vec<String> = (0..50).map(|i| format!("c{i}")).collect();
    tree.put(&comps, &V { v: 50 }).await.unwrap();
    assert_eq!(tree.get::<V>(&comps).await.unwrap(), Some(V { v: 50 }));
    assert_eq!(
        names(&tree, Path::new(&comps[..49]).unwrap()).await,
        ["c49"]
    );
    assert_eq!(rows(&tree).await.len(), 51);
    assert_invariants(&tree).await;
    tree.delete(&comps).await.unwrap();
    assert_eq!(rows(&tree).await, vec![]);
}

/// A path with more listing rows than one transaction holds is written in chunks.
pub async fn path_deeper_than_one_transaction<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let comps: Vec<String> = (0..230).map(|i| format!("{i}")).collect();
    tree.put(&comps, &V { v: 230 }).await.unwrap();
    assert_eq!(tree.get::<V>(&comps).await.unwrap(), Some(V { v: 230 }));
    assert_eq!(rows(&tree).await.len(), 231);
    assert_invariants(&tree).await;
    // A sibling at the bottom reuses the existing chain.
    let mut sib = comps.clone();
    *sib.last_mut().unwrap() = "sibling".into();
    tree.put(&sib, &V { v: 1 }).await.unwrap();
    assert_eq!(rows(&tree).await.len(), 233);
}

/// list_items returns each child with its object (links followed), across BatchGet chunks.
pub async fn list_items_reads_objects_and_follows_links<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .page_size(150)
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    for i in 0..130 {
        tree.put(["d", &format!("{i:03}")], &V { v: i })
            .await
            .unwrap();
    }
    tree.put(["d", "sub", "x"], &V { v: 1000 }).await.unwrap();
    tree.put_link(["d", "zlink"], ["d", "005"]).await.unwrap();
    tree.put_link(["d", "zzdangling"], ["nowhere"])
        .await
        .unwrap();
    let entries: Vec<dynatree::Entry<V>> = tree.list_items(["d"]).try_collect().await.unwrap();
    assert_eq!(entries.len(), 133);
    assert_eq!(entries[0].name, "000");
    assert_eq!(entries[7].value, Some(V { v: 7 }));
    let by_name = |n: &str| entries.iter().find(|e| e.name == n).unwrap().value.clone();
    assert_eq!(
        by_name("sub"),
        None,
        "a name with only children has no object"
    );
    assert_eq!(by_name("zlink"), Some(V { v: 5 }));
    assert_eq!(by_name("zzdangling"), None);
}

/// Children come in UTF-8 byte order (`"B" < "Z" < "a" < "é"`), across small pages.
pub async fn listing_is_in_byte_order_across_pages<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .page_size(2)
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    for n in ["é", "a", "Z", "B", "aa", "0", "~"] {
        tree.put(["o", n], &V { v: 0 }).await.unwrap();
    }
    assert_eq!(
        names(&tree, p(&["o"])).await,
        ["0", "B", "Z", "a", "aa", "~", "é"]
    );
}

/// Rows as the Go library writes them (every row, by BatchWriteItem) are read, listed and
/// deleted by dynatree.
pub async fn go_written_rows_are_readable<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let go_rows = |path: &[&str], attrs: &[(&str, &str)]| {
        let mut out = Vec::new();
        let mut h = String::from("¦");
        for c in path {
            out.push(WriteRequest::Put(Key::new(h.clone(), *c).into_item()));
            h.push_str(c);
            h.push('¦');
        }
        let mut obj = Key::new(h.trim_end_matches('¦'), "¦").into_item();
        for (k, v) in attrs {
            obj.insert(*k, Value::S((*v).to_owned()));
        }
        out.push(WriteRequest::Put(obj));
        out
    };
    let mut reqs = go_rows(&["Accounts", "1", "Links", "x"], &[("target", "t")]);
    reqs.extend(go_rows(&["Accounts", "2"], &[("name", "bob")]));
    reqs.extend(go_rows(&["ByEmail", "bob"], &[("¦", "¦Accounts¦2")]));
    // Go rewrites shared listing rows; a batch may not repeat a key, so de-duplicate.
    let mut seen = BTreeSet::new();
    reqs.retain(|r| match r {
        WriteRequest::Put(i) => seen.insert(Key::from_item(i).unwrap()),
        WriteRequest::Delete(_) => true,
    });
    storage::write_all(tree.storage(), reqs, &fast_retry())
        .await
        .unwrap();
    #[derive(Debug, PartialEq, Deserialize)]
    struct Acc {
        name: String,
    }
    assert_eq!(
        tree.get::<Acc>(["ByEmail", "bob"]).await.unwrap(),
        Some(Acc { name: "bob".into() })
    );
    assert_eq!(names(&tree, p(&["Accounts"])).await, ["1", "2"]);
    tree.put(["Accounts", "3"], &V { v: 3 }).await.unwrap();
    tree.delete(["Accounts", "1", "Links", "x"]).await.unwrap();
    assert_eq!(names(&tree, p(&["Accounts"])).await, ["2", "3"]);
    assert_invariants(&tree).await;
}

/// Conditional PutItem / DeleteItem report `ConditionFailed` and change nothing.
pub async fn conditional_writes<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    let k = Key::new("h", "r");
    let mut item = k.clone().into_item();
    item.insert("v", Value::N("1".into()));
    s.put_item(item.clone(), Condition::NotExists)
        .await
        .unwrap();
    let e = s
        .put_item(item.clone(), Condition::NotExists)
        .await
        .unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    let e = s
        .delete_item(&k, Condition::equals("v", Value::N("2".into())))
        .await
        .unwrap_err();
    assert!(e.is_condition_failed());
    s.delete_item(&k, Condition::equals("v", Value::N("1".into())))
        .await
        .unwrap();
    assert!(s.get_item(&k, true).await.unwrap().is_none());
    let e = s.delete_item(&k, Condition::Exists).await.unwrap_err();
    assert!(e.is_condition_failed());
    s.put_item(
        item,
        Condition::Or(vec![Condition::Exists, Condition::attr_not_exists("v")]),
    )
    .await
    .unwrap();
}

/// A cancelled transaction applies nothing and gives one reason per action, in order.
pub async fn transaction_cancellation_reasons<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    let a = Key::new("a", "1");
    s.put_item(a.clone().into_item(), Condition::Always)
        .await
        .unwrap();
    let e = s
        .transact_write(vec![
            TransactAction::Put {
                item: Key::new("b", "1").into_item(),
                condition: Condition::Always,
            },
            TransactAction::ConditionCheck {
                key: a.clone(),
                condition: Condition::NotExists,
            },
            TransactAction::Delete {
                key: Key::new("c", "1"),
                condition: Condition::Always,
            },
        ])
        .await
        .unwrap_err();
    assert!(e.is_transaction_canceled(), "{e:?}");
    let codes: Vec<&str> = e
        .cancellation_reasons()
        .iter()
        .map(dynatree::error::CancellationReason::code)
        .collect();
    assert_eq!(codes, ["None", "ConditionalCheckFailed", "None"]);
    assert!(
        s.get_item(&Key::new("b", "1"), true)
            .await
            .unwrap()
            .is_none()
    );
    s.transact_write(vec![
        TransactAction::Put {
            item: Key::new("b", "1").into_item(),
            condition: Condition::NotExists,
        },
        TransactAction::ConditionCheck {
            key: a,
            condition: Condition::Exists,
        },
    ])
    .await
    .unwrap();
    assert!(
        s.get_item(&Key::new("b", "1"), true)
            .await
            .unwrap()
            .is_some()
    );
}

/// Inside TransactWriteItems the key of each action is checked hash key first, then range
/// key, and the first problem found decides: an empty value refuses the whole request; an
/// oversized one cancels the transaction with a `ValidationError` reason for that action (so
/// an oversized hash key with an empty range key cancels, and an empty hash key with an
/// oversized range key refuses). The same for every kind of action. Nothing is written.
pub async fn transaction_key_checks<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    let a = Key::new("a", "1");
    s.put_item(a.clone().into_item(), Condition::Always)
        .await
        .unwrap();
    let (long_h, long_r) = ("k".repeat(2049), "r".repeat(1025));
    let refused = [
        (String::new(), long_r.clone()),
        (String::new(), "r".to_owned()),
        ("h".to_owned(), String::new()),
    ];
    let cancelled = [
        (long_h.clone(), String::new()),
        (long_h.clone(), long_r.clone()),
        ("h".to_owned(), long_r.clone()),
    ];
    let actions = |key: Key| {
        [
            TransactAction::Delete {
                key: key.clone(),
                condition: Condition::Always,
            },
            TransactAction::ConditionCheck {
                key: key.clone(),
                condition: Condition::NotExists,
            },
            TransactAction::Put {
                item: key.clone().into_item(),
                condition: Condition::Always,
            },
            TransactAction::Update {
                key,
                actions: vec![storage::UpdateAction::Set(upd("x"), st("1"))],
                condition: Condition::Always,
            },
        ]
    };
    for (h, r) in refused.iter().chain(&cancelled) {
        for action in actions(Key::new(h.clone(), r.clone())) {
            let e = s
                .transact_write(vec![
                    TransactAction::Put {
                        item: Key::new("b", "1").into_item(),
                        condition: Condition::Always,
                    },
                    action,
                    TransactAction::ConditionCheck {
                        key: a.clone(),
                        condition: Condition::Exists,
                    },
                ])
                .await
                .unwrap_err();
            let codes: Vec<&str> = e
                .cancellation_reasons()
                .iter()
                .map(dynatree::error::CancellationReason::code)
                .collect();
            if refused.contains(&(h.clone(), r.clone())) {
                assert_eq!(
                    e.kind(),
                    ErrorKind::Validation,
                    "{} / {}: {e:?}",
                    h.len(),
                    r.len()
                );
                assert!(codes.is_empty(), "{e:?}");
            } else {
                assert!(
                    e.is_transaction_canceled(),
                    "{} / {}: {e:?}",
                    h.len(),
                    r.len()
                );
                assert_eq!(codes, ["None", "ValidationError", "None"], "{e:?}");
            }
        }
    }
    assert!(
        s.get_item(&Key::new("b", "1"), true)
            .await
            .unwrap()
            .is_none()
    );
}

/// The service's limits are refused as validation errors, with nothing applied.
pub async fn service_limits_are_enforced<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    let validation = |r: dynatree::Result<()>| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Validation, "{e:?}");
    };
    // Key byte limits: 2048 for the hash key, 1024 for the range key, counted in UTF-8 bytes.
    validation(
        s.put_item(
            Key::new("¦".repeat(1025), "r").into_item(),
            Condition::Always,
        )
        .await,
    );
    s.put_item(
        Key::new("¦".repeat(1024), "r").into_item(),
        Condition::Always,
    )
    .await
    .unwrap();
    validation(
        s.put_item(
            Key::new("h", "x".repeat(1025)).into_item(),
            Condition::Always,
        )
        .await,
    );
    validation(
        s.put_item(Key::new("h", "").into_item(), Condition::Always)
            .await,
    );
    // Item size.
    let mut big = Key::new("h", "big").into_item();
    big.insert("b", Value::S("x".repeat(dynatree::storage::MAX_ITEM_BYTES)));
    validation(s.put_item(big, Condition::Always).await);
    // Two actions on one item.
    validation(
        s.transact_write(vec![
            TransactAction::Put {
                item: Key::new("t", "1").into_item(),
                condition: Condition::Always,
            },
            TransactAction::ConditionCheck {
                key: Key::new("t", "1"),
                condition: Condition::Always,
            },
        ])
        .await,
    );
    // 101 actions.
    let actions: Vec<TransactAction> = (0..101)
        .map(|i| TransactAction::Put {
            item: Key::new("t", format!("{i}")).into_item(),
            condition: Condition::Always,
        })
        .collect();
    validation(s.transact_write(actions).await);
    // 26 batch writes, 101 batch gets.
    let writes: Vec<WriteRequest> = (0..26)
        .map(|i| WriteRequest::Put(Key::new("w", format!("{i}")).into_item()))
        .collect();
    validation(s.batch_write(writes).await.map(|_| ()));
    let keys: Vec<Key> = (0..101).map(|i| Key::new("g", format!("{i}"))).collect();
    validation(s.batch_get(keys, true).await.map(|_| ()));
    // Nothing of the refused requests was applied.
    let r = rows(&tree).await;
    assert_eq!(r.len(), 1, "{r:?}");
}

/// Key conditions on the range key, descending order, limits and resumption.
pub async fn query_ranges_and_pages<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    for c in ["a", "ab", "abc", "b", "c", "d"] {
        s.put_item(Key::new("h", c).into_item(), Condition::Always)
            .await
            .unwrap();
    }
    let run = |q: Query| async move {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = s.query_page(&q, start).await.unwrap();
            out.extend(
                page.items
                    .iter()
                    .map(|i| i.get_s("Child").unwrap().to_owned()),
            );
            match page.last_key {
                Some(k) => start = Some(k),
                None => break,
            }
        }
        out
    };
    assert_eq!(
        run(Query::new("h").with_range(RangeCondition::BeginsWith("ab".into()))).await,
        ["ab", "abc"]
    );
    assert_eq!(
        run(Query::new("h").with_range(RangeCondition::Between("ab".into(), "c".into()))).await,
        ["ab", "abc", "b", "c"]
    );
    assert_eq!(
        run(Query::new("h").with_range(RangeCondition::Lt("b".into()))).await,
        ["a", "ab", "abc"]
    );
    assert_eq!(
        run(Query::new("h").with_range(RangeCondition::Ge("c".into()))).await,
        ["c", "d"]
    );
    assert_eq!(
        run(Query::new("h").descending().with_limit(2)).await,
        ["d", "c", "b", "abc", "ab", "a"]
    );
    assert_eq!(
        run(Query::new("h")
            .with_range(RangeCondition::Gt("a".into()))
            .with_limit(1))
        .await,
        ["ab", "abc", "b", "c", "d"]
    );
    let page = s
        .query_page(&Query::new("h").with_limit(2), None)
        .await
        .unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.last_key, Some(Key::new("h", "ab")));
}

/// Query pages stop at 1 MB.
pub async fn one_megabyte_pages<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    for i in 0..12 {
        let mut item = Key::new("big", format!("{i:02}")).into_item();
        item.insert("b", Value::S("x".repeat(200 * 1024)));
        s.put_item(item, Condition::Always).await.unwrap();
    }
    let first = s.query_page(&Query::new("big"), None).await.unwrap();
    assert!(first.last_key.is_some(), "12 × 200 KB cannot fit one page");
    assert!(
        (5..=6).contains(&first.items.len()),
        "a 1 MB page holds 5 or 6 items of 200 KB, got {}",
        first.items.len()
    );
    let mut total = first.items.len();
    let mut start = first.last_key;
    while let Some(k) = start {
        let page = s.query_page(&Query::new("big"), Some(k)).await.unwrap();
        total += page.items.len();
        start = page.last_key;
    }
    assert_eq!(total, 12);
}

/// The batch helpers read and write any number of items through 100 / 25 item requests.
pub async fn batches_of_any_size<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    let puts: Vec<WriteRequest> = (0..260)
        .map(|i| WriteRequest::Put(Key::new(format!("p{}", i % 7), format!("{i}")).into_item()))
        .collect();
    storage::write_all(s, puts, &fast_retry()).await.unwrap();
    let keys: Vec<Key> = (0..260)
        .map(|i| Key::new(format!("p{}", i % 7), format!("{i}")))
        .chain([Key::new("missing", "x")])
        .collect();
    let found = storage::get_all(s, keys, true, &fast_retry())
        .await
        .unwrap();
    assert_eq!(found.len(), 260);
    let deletes: Vec<WriteRequest> = (0..260)
        .map(|i| WriteRequest::Delete(Key::new(format!("p{}", i % 7), format!("{i}"))))
        .collect();
    storage::write_all(s, deletes, &fast_retry()).await.unwrap();
    assert_eq!(rows(&tree).await, vec![]);
}

/// Concurrent puts under a node and deletes of its objects never leave an object unreachable.
pub async fn concurrent_puts_and_deletes_keep_objects_reachable<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let tree = &tree;
    let writer = |id: u32| async move {
        for round in 0..12u32 {
            let name = format!("w{id}-{}", round % 3);
            tree.put(["shared", "dir", &name], &V { v: round })
                .await
                .unwrap();
            if round % 2 == 1 {
                tree.delete(["shared", "dir", &name]).await.unwrap();
            }
        }
    };
    let deleter = || async move {
        for _ in 0..12 {
            for id in 0..3 {
                for r in 0..3 {
                    tree.delete(["shared", "dir", &format!("w{id}-{r}")])
                        .await
                        .unwrap();
                }
            }
        }
    };
    futures::join!(writer(0), writer(1), writer(2), deleter());
    assert_invariants(tree).await;
    // Every object that survived is listed.
    let listed: Vec<String> = tree.list(["shared", "dir"]).try_collect().await.unwrap();
    for name in &listed {
        let _ = tree.get::<V>(["shared", "dir", name]).await.unwrap();
    }
    let objects = rows(tree)
        .await
        .into_iter()
        .filter(|(h, r, _)| r == "¦" && h.starts_with("¦shared¦dir¦"))
        .count();
    assert!(objects <= listed.len());
    let item_count = tree
        .scan()
        .try_fold(0usize, |n, _: Item| async move { Ok(n + 1) })
        .await
        .unwrap();
    assert!(item_count >= objects);
}

// ---- typed API (`#[derive(Hierarchical)]`) ----------------------------------------------------

/// An account, as in the dynamotree README.
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
pub(crate) struct Account {
    /// Its id.
    pub id: String,
    /// Display name.
    pub name: String,
}

/// A short link owned by an account.
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account_id}/Links/{short}", parent = Account)]
pub(crate) struct Link {
    /// The owner.
    pub account_id: String,
    /// The short name.
    pub short: String,
    /// Where it redirects.
    pub target: String,
    /// Optimistic-locking version.
    #[dynatree(version)]
    pub version: u64,
}

/// A reading keyed by a signed timestamp (negatives sort first).
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Sensors/{sensor}/Readings/{at}")]
pub(crate) struct Reading {
    /// The sensor number.
    pub sensor: u32,
    /// Seconds from an epoch.
    pub at: i64,
    /// The value.
    pub value: i32,
}

/// A type checked against another reserved character.
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Pipes/{id}", reserved = "|")]
pub(crate) struct Piped {
    /// Its id.
    pub id: String,
}

fn link(account: &str, short: &str) -> Link {
    Link {
        account_id: account.into(),
        short: short.into(),
        target: format!("https://example.com/{short}"),
        version: 1,
    }
}

/// put, create, get, delete and list through a repository; values read back equal the values
/// written; keys are recovered from paths.
pub async fn typed_repository_crud<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let accounts = tree.repo::<Account>();
    let links = tree.repo::<Link>();
    let alice = Account {
        id: "a1".into(),
        name: "Alice".into(),
    };
    accounts.create(&alice).await.unwrap();
    assert!(
        accounts
            .create(&alice)
            .await
            .unwrap_err()
            .is_already_exists()
    );
    assert_eq!(
        accounts.get(&alice.key()).await.unwrap(),
        Some(alice.clone())
    );
    for short in ["zeta", "alpha", "mid"] {
        links.put(&link("a1", short)).await.unwrap();
    }
    links.put(&link("a2", "other")).await.unwrap();
    let a1 = LinkCollection {
        account_id: "a1".into(),
    };
    let listed: Vec<Link> = links.list(&a1).try_collect().await.unwrap();
    let shorts: Vec<&str> = listed.iter().map(|l| l.short.as_str()).collect();
    assert_eq!(shorts, ["alpha", "mid", "zeta"]);
    assert_eq!(listed[0], link("a1", "alpha"));
    // The rows are the untyped layout: the tree sees the same objects.
    let names = names(&tree, p(&["Accounts", "a1", "Links"])).await;
    assert_eq!(names, ["alpha", "mid", "zeta"]);
    let key = link("a1", "mid").key();
    assert_eq!(Link::key_from_path(&key.path().unwrap()).unwrap(), key);
    assert!(Link::key_from_path(&p(&["Accounts", "a1", "Other", "mid"])).is_err());
    links.delete(&key).await.unwrap();
    assert_eq!(links.get(&key).await.unwrap(), None);
    let listed: Vec<Link> = links.list(&a1).try_collect().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_invariants(&tree).await;
}

/// With a version field, `update` is optimistic: a stale writer loses and nothing changes.
pub async fn typed_optimistic_update<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let links = tree.repo::<Link>();
    let mut missing = link("a1", "nope");
    let e = links.update(&mut missing).await.unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    assert_eq!(missing.version, 1, "the version is unchanged on failure");

    links.create(&link("a1", "x")).await.unwrap();
    let mut first = links.get(&link("a1", "x").key()).await.unwrap().unwrap();
    let mut second = first.clone();
    first.target = "https://first.example/".into();
    links.update(&mut first).await.unwrap();
    assert_eq!(first.version, 2);
    second.target = "https://second.example/".into();
    let e = links.update(&mut second).await.unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    assert_eq!(second.version, 1);
    let stored = links.get(&first.key()).await.unwrap().unwrap();
    assert_eq!(stored, first);
}

/// Range conditions on the last placeholder, descending order, limits, page sizes and
/// resumption from a cursor, all as key conditions on `Child`.
pub async fn typed_range_queries<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let readings = tree.repo::<Reading>();
    let times = [-30i64, -5, 0, 7, 10, 25, 100, 1000];
    for at in times {
        readings
            .put(&Reading {
                sensor: 1,
                at,
                value: i32::try_from(at).unwrap(),
            })
            .await
            .unwrap();
    }
    readings
        .put(&Reading {
            sensor: 2,
            at: 5,
            value: 0,
        })
        .await
        .unwrap();
    let s1 = ReadingCollection { sensor: 1 };
    assert_eq!(run(readings.query(&s1)).await, times);
    assert_eq!(run(readings.query(&s1).lt(&0)).await, [-30, -5]);
    assert_eq!(run(readings.query(&s1).le(&0)).await, [-30, -5, 0]);
    assert_eq!(run(readings.query(&s1).gt(&25)).await, [100, 1000]);
    assert_eq!(run(readings.query(&s1).ge(&25)).await, [25, 100, 1000]);
    assert_eq!(run(readings.query(&s1).eq(&7)).await, [7]);
    assert_eq!(
        run(readings.query(&s1).between(&-5, &10)).await,
        [-5, 0, 7, 10]
    );
    assert_eq!(
        run(readings.query(&s1).descending().limit(3)).await,
        [1000, 100, 25]
    );
    assert_eq!(
        run(readings.query(&s1).ge(&0).page_size(2)).await,
        [0, 7, 10, 25, 100, 1000]
    );
    // Pages with cursors: resume exactly where the last page stopped.
    let first: Vec<dynatree::TypedPage<Reading>> = readings
        .query(&s1)
        .limit(3)
        .pages()
        .try_collect()
        .await
        .unwrap();
    let got: Vec<i64> = first
        .iter()
        .flat_map(|p| p.items.iter().map(|r| r.at))
        .collect();
    assert_eq!(got, [-30, -5, 0]);
    let cursor = readings
        .query(&s1)
        .page_size(3)
        .pages()
        .try_next()
        .await
        .unwrap()
        .unwrap()
        .cursor
        .expect("more pages follow");
    assert_eq!(
        run(readings.query(&s1).start_after(cursor)).await,
        [7, 10, 25, 100, 1000]
    );
    // Two range conditions are refused, not combined silently.
    let e = readings
        .query(&s1)
        .gt(&0)
        .lt(&10)
        .items()
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

async fn run(q: dynatree::TypedQuery<Reading>) -> Vec<i64> {
    let items: Vec<Reading> = q.items().try_collect().await.unwrap();
    items.into_iter().map(|r| r.at).collect()
}

/// Key values are checked on every call: a reserved character or an empty string in a key
/// field is a typed error and nothing is written.
pub async fn typed_values_are_checked_at_run_time<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let links = tree.repo::<Link>();
    let e = links.put(&link("a¦b", "x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    let e = links.put(&link("a", "")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    let e = links
        .get(&LinkKey {
            account_id: "a¦b".into(),
            short: "x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidPath);
    let listed: Vec<_> = links
        .list(&LinkCollection {
            account_id: "x¦".into(),
        })
        .collect()
        .await;
    assert!(listed[0].as_ref().unwrap_err().is_invalid_path());
    assert_eq!(rows(&tree).await, vec![]);
}

/// A symbolic link `Links/{short}` to a typed value is followed by the tree and the
/// repository; a type checked against another reserved character is refused.
pub async fn typed_links_and_reserved_character<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let links = tree.repo::<Link>();
    let l = link("a1", "xyz");
    links.put(&l).await.unwrap();
    tree.put_link(["Links", "xyz"], l.key().path().unwrap())
        .await
        .unwrap();
    assert_eq!(tree.get::<Link>(["Links", "xyz"]).await.unwrap(), Some(l));
    let e = tree
        .repo::<Piped>()
        .put(&Piped { id: "p".into() })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidReserved);
}

/// A user with two secondary indexes.
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(
    path = "Users/{id}",
    index(name = "by_email", hash = email),
    index(name = "by_team", hash = team, range = joined)
)]
pub(crate) struct User {
    /// Its id.
    pub id: String,
    /// Unique e-mail.
    pub email: String,
    /// Team name.
    pub team: String,
    /// When the user joined the team.
    pub joined: u32,
}

/// Another type using an index of the same name: its values never mix with `User`'s.
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Robots/{id}", index(name = "by_email", hash = email))]
pub(crate) struct Robot {
    /// Its id.
    pub id: String,
    /// Its e-mail.
    pub email: String,
}

fn user(id: &str, email: &str, team: &str, joined: u32) -> User {
    User {
        id: id.into(),
        email: email.into(),
        team: team.into(),
        joined,
    }
}

/// Index queries: exact hash lookups, range order and conditions, updates and deletes move
/// index entries, types sharing an index name stay apart.
pub async fn typed_secondary_indexes<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .indexes_of::<User>()
        .indexes_of::<Robot>()
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let d = tree.storage().describe_table().await.unwrap().unwrap();
    let mut names: Vec<&str> = d.indexes.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["by_email", "by_team"]);
    let users = tree.repo::<User>();
    for u in [
        user("u1", "ann@example.com", "red", 30),
        user("u2", "bob@example.com", "red", 10),
        user("u3", "cyd@example.com", "blue", 20),
        user("u4", "dan@example.com", "red", 20),
    ] {
        users.put(&u).await.unwrap();
    }
    tree.repo::<Robot>()
        .put(&Robot {
            id: "r1".into(),
            email: "ann@example.com".into(),
        })
        .await
        .unwrap();
    let ids = |v: Vec<User>| v.into_iter().map(|u| u.id).collect::<Vec<_>>();
    let by_email = |e: &str| User::index_by_email(&e.to_owned());
    let found: Vec<User> = users
        .index(by_email("ann@example.com"))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        found,
        [user("u1", "ann@example.com", "red", 30)],
        "no robot here"
    );
    let red = || User::index_by_team(&"red".to_owned());
    let all_red: Vec<User> = users.index(red()).items().try_collect().await.unwrap();
    assert_eq!(ids(all_red), ["u2", "u4", "u1"], "ordered by `joined`");
    let late: Vec<User> = users
        .index(red())
        .ge(&20u32)
        .descending()
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(late), ["u1", "u4"]);
    let one: Vec<User> = users
        .index(red())
        .limit(1)
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(one), ["u2"]);
    // An update moves the entry; a delete removes it.
    users
        .put(&user("u2", "bob@new.example", "blue", 10))
        .await
        .unwrap();
    let old: Vec<User> = users
        .index(by_email("bob@example.com"))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert!(old.is_empty());
    users.delete(&UserKey { id: "u4".into() }).await.unwrap();
    let red_now: Vec<User> = users.index(red()).items().try_collect().await.unwrap();
    assert_eq!(ids(red_now), ["u1"]);
    // The tree's own reads never show the bookkeeping attributes.
    assert_eq!(
        users.get(&UserKey { id: "u1".into() }).await.unwrap(),
        Some(user("u1", "ann@example.com", "red", 30))
    );
    assert_invariants(&tree).await;
}

/// A tree whose types gained indexes adds them to an existing table and waits for them.
pub async fn indexes_are_added_to_an_existing_table<S: Storage + 'static>(table: S) {
    table
        .create_table(dynatree::storage::Billing::OnDemand, &[])
        .await
        .unwrap();
    let tree = Tree::builder(table)
        .indexes_of::<User>()
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let d = tree.storage().describe_table().await.unwrap().unwrap();
    assert_eq!(d.indexes.len(), 2, "{d:?}");
    assert!(
        d.indexes
            .iter()
            .all(|(_, s)| *s == dynatree::storage::TableStatus::Active)
    );
    tree.repo::<User>()
        .put(&user("u1", "ann@example.com", "red", 1))
        .await
        .unwrap();
    let found: Vec<User> = tree
        .repo::<User>()
        .index(User::index_by_email(&"ann@example.com".to_owned()))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    tree.create_table().await.expect("idempotent with indexes");
}

// ---- tree operations ------------------------------------------------------------------------

/// Ancestors come root first; names without objects are left out.
pub async fn ancestors_root_first<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    tree.put(["a"], &V { v: 1 }).await.unwrap();
    tree.put(["a", "b", "c"], &V { v: 3 }).await.unwrap();
    tree.put(["a", "b", "c", "d", "e"], &V { v: 5 })
        .await
        .unwrap();
    let got: Vec<(Path, V)> = tree.ancestors(["a", "b", "c", "d", "e"]).await.unwrap();
    assert_eq!(
        got,
        [(p(&["a"]), V { v: 1 }), (p(&["a", "b", "c"]), V { v: 3 })]
    );
    assert!(tree.ancestors::<V>(["a"]).await.unwrap().is_empty());
    assert!(
        tree.ancestors::<V>(Path::root())
            .await
            .unwrap_err()
            .is_invalid_path()
    );
}

fn sorted_paths(d: Vec<dynatree::Descendant>) -> Vec<String> {
    let mut v: Vec<String> = d.into_iter().map(|d| d.path.to_string()).collect();
    v.sort();
    v
}

/// The walk and the path index return the same descendants; depth bounds hold.
pub async fn descendants_by_walk_and_path_index<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .path_index(2)
        .retry_policy(fast_retry())
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let objects = [
        &["t1"][..],
        &["t1", "a"],
        &["t1", "a", "x"],
        &["t1", "a", "x", "deep"],
        &["t1", "b", "y"],
        &["t1", "ab"],
        &["t2", "a", "z"],
    ];
    for o in objects {
        tree.put(o, &V { v: 0 }).await.unwrap();
    }
    tree.put_link(["t1", "a", "link"], ["t2", "a", "z"])
        .await
        .unwrap();
    let walk = |prefix: &[&str], depth: Option<usize>| {
        let mut q = tree
            .descendants(p(prefix))
            .strategy(dynatree::Strategy::Walk);
        if let Some(d) = depth {
            q = q.max_depth(d);
        }
        q.items().try_collect::<Vec<_>>()
    };
    let index = |prefix: &[&str], depth: Option<usize>| {
        let mut q = tree
            .descendants(p(prefix))
            .strategy(dynatree::Strategy::PathIndex);
        if let Some(d) = depth {
            q = q.max_depth(d);
        }
        q.items().try_collect::<Vec<_>>()
    };
    let expected = ["/t1/a/link", "/t1/a/x", "/t1/a/x/deep"];
    assert_eq!(
        sorted_paths(walk(&["t1", "a"], None).await.unwrap()),
        expected
    );
    assert_eq!(
        sorted_paths(index(&["t1", "a"], None).await.unwrap()),
        expected,
        "`/t1/ab` is not under `/t1/a`"
    );
    assert_eq!(
        sorted_paths(walk(&["t1", "a"], Some(1)).await.unwrap()),
        ["/t1/a/link", "/t1/a/x"]
    );
    assert_eq!(
        sorted_paths(index(&["t1", "a"], Some(1)).await.unwrap()),
        ["/t1/a/link", "/t1/a/x"]
    );
    // Depth 0: nothing below the prefix, by either strategy.
    assert!(walk(&["t1", "a"], Some(0)).await.unwrap().is_empty());
    assert!(index(&["t1", "a"], Some(0)).await.unwrap().is_empty());
    // Shorter than the index depth: Auto walks; the whole tree from the root.
    let all = tree
        .descendants(Path::root())
        .items()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert_eq!(all.len(), 8);
    let t1 = tree
        .descendants(["t1"])
        .items()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert_eq!(t1.len(), 6);
    assert!(index(&["t1"], None).await.unwrap_err().kind() == ErrorKind::InvalidArgument);
    let d = walk(&["t1", "a", "x"], None).await.unwrap();
    assert_eq!(d[0].value::<V>().unwrap(), V { v: 0 });
    // Deleting removes objects from the index too.
    tree.delete(["t1", "a", "x", "deep"]).await.unwrap();
    assert_eq!(index(&["t1", "a"], None).await.unwrap().len(), 2);
}

/// delete_subtree removes the node and every descendant, keeps siblings, and a repeat is a
/// no-op.
pub async fn delete_subtree_removes_everything_below<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    for o in [
        &["org"][..],
        &["org", "eng"],
        &["org", "eng", "db", "alice"],
        &["org", "eng", "web", "bob"],
        &["org", "sales", "carol"],
    ] {
        tree.put(o, &V { v: 0 }).await.unwrap();
    }
    assert_eq!(tree.delete_subtree(["org", "eng"]).await.unwrap(), 3);
    assert_eq!(names(&tree, p(&["org"])).await, ["sales"]);
    assert_invariants(&tree).await;
    assert_eq!(tree.delete_subtree(["org", "eng"]).await.unwrap(), 0);
    assert_eq!(tree.delete_subtree(["org"]).await.unwrap(), 2);
    assert_eq!(rows(&tree).await, vec![]);
}

/// move_subtree moves every node and object (listing entries without objects too), reports
/// or rewrites links into it, refuses bad targets; copy_subtree leaves the source.
pub async fn move_and_copy_subtrees<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    for (o, v) in [
        (&["org", "eng"][..], 1),
        (&["org", "eng", "db", "alice"], 2),
        (&["org", "eng", "web", "bob"], 3),
        (&["org", "sales", "carol"], 4),
    ] {
        tree.put(o, &V { v }).await.unwrap();
    }
    tree.put_link(["people", "alice"], ["org", "eng", "db", "alice"])
        .await
        .unwrap();
    tree.put_link(["people", "carol"], ["org", "sales", "carol"])
        .await
        .unwrap();
    // Refusals first: nothing changes.
    let e = tree
        .move_subtree(["org", "eng"], ["org", "eng", "x"])
        .await
        .unwrap_err();
    assert!(e.is_invalid_path(), "{e:?}");
    let e = tree.move_subtree(["nothing"], ["else"]).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let e = tree
        .move_subtree(["org", "eng"], ["org", "sales"])
        .await
        .unwrap_err();
    assert!(e.is_already_exists(), "{e:?}");

    let report = tree
        .move_subtree_with(
            ["org", "eng"],
            ["org", "tech"],
            dynatree::ops::LinkPolicy::Rewrite,
        )
        .await
        .unwrap();
    assert_eq!(report.objects, 3);
    assert_eq!(report.nodes, 5, "eng, db, web, alice, bob");
    assert_eq!(
        report.links,
        [(p(&["people", "alice"]), p(&["org", "eng", "db", "alice"]))]
    );
    assert_eq!(names(&tree, p(&["org"])).await, ["sales", "tech"]);
    assert_eq!(names(&tree, p(&["org", "tech"])).await, ["db", "web"]);
    assert_eq!(
        tree.get::<V>(["org", "tech"]).await.unwrap(),
        Some(V { v: 1 })
    );
    assert_eq!(
        tree.get::<V>(["org", "tech", "web", "bob"]).await.unwrap(),
        Some(V { v: 3 })
    );
    assert_eq!(
        tree.get::<V>(["people", "alice"]).await.unwrap(),
        Some(V { v: 2 }),
        "rewritten"
    );
    assert!(tree.pending().await.unwrap().is_empty());
    assert_invariants(&tree).await;

    tree.copy_subtree(["org", "tech"], ["archive", "tech"])
        .await
        .unwrap();
    assert_eq!(
        tree.get::<V>(["archive", "tech", "db", "alice"])
            .await
            .unwrap(),
        Some(V { v: 2 })
    );
    assert_eq!(
        tree.get::<V>(["org", "tech", "db", "alice"]).await.unwrap(),
        Some(V { v: 2 })
    );
    assert_invariants(&tree).await;
}

/// delete_node: a node with children is refused by default, re-parents its children on
/// request (name clashes refused), or deletes recursively.
pub async fn delete_node_refuses_reparents_or_recurses<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    for o in [
        &["root"][..],
        &["root", "mgr"],
        &["root", "mgr", "a"],
        &["root", "mgr", "b", "b1"],
        &["root", "other"],
    ] {
        tree.put(o, &V { v: 0 }).await.unwrap();
    }
    let e = tree
        .delete_node(["root"], dynatree::ops::OnChildren::Refuse)
        .await
        .unwrap_err();
    assert!(e.is_has_children(), "{e:?}");
    assert_eq!(tree.get::<V>(["root"]).await.unwrap(), Some(V { v: 0 }));
    tree.delete_node(["root", "mgr"], dynatree::ops::OnChildren::Reparent)
        .await
        .unwrap();
    assert_eq!(names(&tree, p(&["root"])).await, ["a", "b", "other"]);
    assert_eq!(
        tree.get::<V>(["root", "b", "b1"]).await.unwrap(),
        Some(V { v: 0 })
    );
    // A clash: `other` exists under root already.
    tree.put(["root", "a", "other"], &V { v: 1 }).await.unwrap();
    let e = tree
        .delete_node(["root", "a"], dynatree::ops::OnChildren::Reparent)
        .await
        .unwrap_err();
    assert!(e.is_already_exists(), "{e:?}");
    tree.delete_node(["root"], dynatree::ops::OnChildren::Recursive)
        .await
        .unwrap();
    assert_eq!(rows(&tree).await, vec![]);
}

/// A profile as the Go library writes it: an empty string is stored as `NULL`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GoProfile {
    name: String,
    nick: Option<String>,
    tags: Vec<String>,
    inner: GoInner,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GoInner {
    title: String,
}

/// A raw row with `NULL` attributes (aws-sdk-go's empty strings) reads into `String` fields as
/// `""`, into `Option` as `None`; a mismatch names the attribute's path.
async fn go_null_strings_read_as_empty_strings<S: Storage + 'static>(s: S) {
    let tree = tree(s).await;
    let mut row = Key::new("¦people¦ann", "¦").into_item();
    row.insert("name", Value::Null);
    row.insert("nick", Value::Null);
    row.insert("tags", Value::Null);
    row.insert(
        "inner",
        Value::M([("title".to_owned(), Value::Null)].into()),
    );
    tree.storage()
        .put_item(row, Condition::Always)
        .await
        .expect("raw put");
    let got: Option<GoProfile> = tree.get(["people", "ann"]).await.expect("get");
    assert_eq!(
        got,
        Some(GoProfile {
            name: String::new(),
            nick: None,
            tags: vec![],
            inner: GoInner {
                title: String::new()
            },
        })
    );
    let mut row = Key::new("¦people¦bob", "¦").into_item();
    row.insert("name", Value::S("Bob".into()));
    row.insert("tags", Value::L(vec![]));
    row.insert(
        "inner",
        Value::M([("title".to_owned(), Value::N("7".into()))].into()),
    );
    tree.storage()
        .put_item(row, Condition::Always)
        .await
        .expect("raw put");
    let e = tree.get::<GoProfile>(["people", "bob"]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Serialization);
    assert!(
        e.to_string()
            .contains("attribute `inner.title`: invalid type"),
        "{e}"
    );
}

#[derive(Debug, Serialize)]
struct Float {
    x: f64,
}

/// NaN, infinities, numbers beyond DynamoDB's range or precision, empty map keys, attribute
/// names over 64 KB and an exhausted version are refused with a typed error; nothing is sent.
async fn values_dynamodb_refuses_are_refused_before_sending<S: Storage + 'static>(s: S) {
    let tree = tree(s).await;
    tree.put(["ok"], &V { v: 1 }).await.expect("put");
    let before = rows(&tree).await;
    for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, 1e-200] {
        let e = tree.put(["f"], &Float { x }).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "{x}: {e:?}");
        assert!(e.is_invalid_input());
        assert!(e.to_string().contains("attribute `x`"), "{e}");
    }
    tree.put(["f"], &Float { x: 1e-130 })
        .await
        .expect("1e-130 fits");
    tree.delete(["f"]).await.expect("delete");
    let empty_key: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u8>> =
        [("m".to_owned(), [(String::new(), 1)].into())].into();
    let e = tree.put(["m"], &empty_key).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidAttribute, "{e:?}");
    let long_name: std::collections::BTreeMap<String, u8> = [("n".repeat(65_536), 1)].into();
    let e = tree.put(["n"], &long_name).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidAttribute, "{e:?}");
    assert_eq!(rows(&tree).await, before);

    // An optimistic update at the last version: a typed error, no panic, nothing sent.
    let links = tree.repo::<Link>();
    let mut l = Link {
        account_id: "a".into(),
        short: "s".into(),
        target: "t".into(),
        version: 0,
    };
    links.create(&l).await.expect("create");
    let stored = rows(&tree).await;
    l.version = u64::MAX;
    let e = links.update(&mut l).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e:?}");
    assert_eq!(l.version, u64::MAX);
    assert_eq!(rows(&tree).await, stored);

    // A valid object path whose children's listing key is one byte over 2048 has no children.
    let c = "a".repeat(1022);
    let path = p(&[&c, &c]);
    assert_eq!(names(&tree, path.clone()).await, Vec::<String>::new());
    let entries: Vec<dynatree::Entry<V>> = tree
        .list_items(path)
        .try_collect()
        .await
        .expect("list_items");
    assert!(entries.is_empty());
}

/// `between` with reversed bounds, `begins_with("")`, oversized values and cursors of another
/// query are refused before sending; a cursor at the condition's far end is an empty result.
async fn queries_dynamodb_refuses_are_refused_before_sending<S: Storage + 'static>(s: S) {
    let tree = tree(s).await;
    let readings = tree.repo::<Reading>();
    for at in [5i64, 10, 20, 40] {
        readings
            .put(&Reading {
                sensor: 1,
                at,
                value: 1,
            })
            .await
            .expect("put");
    }
    let col = ReadingCollection { sensor: 1 };
    let ats = |r: Vec<Reading>| r.into_iter().map(|r| r.at).collect::<Vec<_>>();
    let cursor_of = |q: dynatree::TypedQuery<Reading>, what: &'static str| async move {
        q.page_size(1)
            .pages()
            .try_next()
            .await
            .expect("a page")
            .expect("a page")
            .cursor
            .expect(what)
    };
    let at_5 = cursor_of(readings.query(&col).ge(&5), "ge 5").await;
    let refused = [
        readings.query(&col).between(&40, &5),
        readings.query(&col).ge(&10).start_after(at_5.clone()),
        readings
            .query(&col)
            .ge(&5)
            .descending()
            .start_after(at_5.clone()),
        readings.query(&col).ge(&5).lt(&7),
    ];
    for q in refused {
        let e = q.items().try_collect::<Vec<_>>().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    }
    let links = tree.repo::<Link>();
    let a1 = LinkCollection {
        account_id: "a1".into(),
    };
    for prefix in [String::new(), "0".repeat(1025)] {
        let e = links
            .query(&a1)
            .begins_with(&prefix)
            .items()
            .try_collect::<Vec<_>>()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    }
    // On its own query (page size aside), the cursor continues after its page.
    assert_eq!(
        ats(readings
            .query(&col)
            .ge(&5)
            .start_after(at_5)
            .items()
            .try_collect()
            .await
            .expect("rest")),
        [10, 20, 40]
    );
    // A page that ends on the condition's far bound is the last: no cursor, nothing more sent.
    let pages: Vec<dynatree::TypedPage<Reading>> = readings
        .query(&col)
        .le(&20)
        .page_size(3)
        .pages()
        .try_collect()
        .await
        .expect("pages");
    assert_eq!(pages.len(), 1);
    assert_eq!(ats(pages[0].items.clone()), [5, 10, 20]);
    assert!(pages[0].cursor.is_none());
    // Pages that end exactly on an inclusive far bound.
    for forward in [true, false] {
        let q = readings.query(&col).between(&10, &20).page_size(1);
        let q = if forward { q } else { q.descending() };
        let got = ats(q.items().try_collect().await.expect("between pages"));
        assert_eq!(got, if forward { [10, 20] } else { [20, 10] });
    }
    let got = ats(readings
        .query(&col)
        .le(&10)
        .page_size(2)
        .items()
        .try_collect()
        .await
        .expect("le pages"));
    assert_eq!(got, [5, 10]);
}

// ---- conditions, partial updates, idempotent transactions, time to live ----

fn n(v: &str) -> Value {
    Value::N(v.into())
}

fn st(v: &str) -> Value {
    Value::S(v.into())
}

/// Whether `condition` holds on the item at `key` (put back unchanged when it does).
async fn holds<S: Storage>(s: &S, key: &Key, condition: Condition) -> bool {
    let current = s.get_item(key, true).await.expect("get");
    let r = match current {
        Some(item) => s.put_item(item, condition.clone()).await,
        // Deleting an absent item changes nothing.
        None => s.delete_item(key, condition.clone()).await,
    };
    match r {
        Ok(()) => true,
        Err(e) if e.is_condition_failed() => false,
        Err(e) => panic!("{condition:?}: {e:?}"),
    }
}

async fn refused<S: Storage>(s: &S, key: &Key, condition: Condition) -> dynatree::Error {
    let e = s
        .delete_item(key, condition.clone())
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Validation, "{condition:?}: {e:?}");
    e
}

/// Comparisons, `BETWEEN`, `begins_with`, `contains` and `NOT` evaluate as DynamoDB evaluates
/// them (numbers by value beyond `f64`'s precision, strings and binaries by bytes, another
/// type or a missing attribute false, `<>` true on a missing attribute or another type), and
/// the operands DynamoDB refuses are refused.
pub async fn condition_operators<S: Storage + 'static>(table: S) {
    use storage::Comparison::{Ge, Gt, Le, Lt, Ne};
    let tree = tree(table).await;
    let s = tree.storage();
    let k = Key::new("h", "r");
    let mut item = k.clone().into_item();
    item.insert("n", n("10"));
    item.insert("big", n("12345678901234567890123456789012345678"));
    item.insert("s", st("hello"));
    item.insert("b", Value::B(vec![1, 2, 3]));
    item.insert("ss", Value::Ss(vec!["x".into(), "y".into()]));
    item.insert("ns", Value::Ns(vec!["1.5".into(), "2".into()]));
    item.insert("l", Value::L(vec![st("x"), n("2")]));
    item.insert("t", Value::Bool(true));
    s.put_item(item, Condition::Always).await.unwrap();
    let cmp = Condition::compare;
    let cases = [
        (cmp("n", Lt, n("9.5")), false),
        (cmp("n", Lt, n("10.5")), true),
        (cmp("n", Le, n("1e1")), true),
        (
            cmp("n", Gt, n("9.99999999999999999999999999999999999")),
            true,
        ),
        (
            cmp("n", Ge, n("10.000000000000000000000000000000000001")),
            false,
        ),
        (
            cmp("big", Lt, n("12345678901234567890123456789012345679")),
            true,
        ),
        (
            cmp("big", Gt, n("12345678901234567890123456789012345677")),
            true,
        ),
        (cmp("s", Gt, st("hell")), true),
        (cmp("s", Lt, st("hellp")), true),
        (cmp("s", Lt, st("¦")), true),
        (cmp("b", Gt, Value::B(vec![1, 2])), true),
        (cmp("b", Lt, Value::B(vec![1, 3])), true),
        // Another type, or a missing attribute: false.
        (cmp("s", Lt, n("1")), false),
        (cmp("s", Gt, n("1")), false),
        (cmp("missing", Lt, n("1")), false),
        (cmp("missing", Ge, n("1")), false),
        // `<>`: true unless equal.
        (cmp("n", Ne, n("10.0")), false),
        (cmp("n", Ne, n("11")), true),
        (cmp("n", Ne, st("10")), true),
        (cmp("missing", Ne, n("1")), true),
        (
            cmp("ss", Ne, Value::Ss(vec!["y".into(), "x".into()])),
            false,
        ),
        (cmp("t", Ne, Value::Bool(false)), true),
        (Condition::between("n", n("10"), n("10")), true),
        (Condition::between("n", n("-1"), n("9.9")), false),
        (Condition::between("s", st("a"), st("i")), true),
        (Condition::between("s", st("i"), st("z")), false),
        (Condition::between("s", n("1"), n("2")), false),
        (Condition::between("missing", n("1"), n("2")), false),
        (Condition::begins_with("s", st("he")), true),
        (Condition::begins_with("s", st("")), true),
        (Condition::begins_with("s", st("hello!")), false),
        (Condition::begins_with("b", Value::B(vec![1, 2])), true),
        (Condition::begins_with("b", Value::B(vec![2])), false),
        (Condition::begins_with("n", st("1")), false),
        (Condition::begins_with("missing", st("a")), false),
        (Condition::contains("s", st("ell")), true),
        (Condition::contains("s", st("elo")), false),
        (Condition::contains("b", Value::B(vec![2, 3])), true),
        (Condition::contains("b", Value::B(vec![1, 3])), false),
        (Condition::contains("ss", st("x")), true),
        (Condition::contains("ss", st("z")), false),
        (Condition::contains("ns", n("1.50")), true),
        (Condition::contains("ns", n("3")), false),
        (Condition::contains("l", st("x")), true),
        (Condition::contains("l", n("2.0")), true),
        (Condition::contains("l", st("2")), false),
        (Condition::contains("n", n("1")), false),
        (Condition::contains("missing", st("a")), false),
        (Condition::not(Condition::attr_exists("s")), false),
        (Condition::not(cmp("n", Lt, n("5"))), true),
        (Condition::not(Condition::Always), false),
        (
            Condition::Or(vec![Condition::Always, Condition::NotExists]),
            true,
        ),
        (
            Condition::And(vec![Condition::Always, Condition::contains("s", st("h"))]),
            true,
        ),
        // One part around another group: DynamoDB refuses redundant parentheses (`((a OR
        // b))`), so none may be sent.
        (
            Condition::And(vec![Condition::Or(vec![
                Condition::attr_not_exists("n"),
                cmp("n", Lt, n("50")),
            ])]),
            true,
        ),
        (
            Condition::Or(vec![Condition::And(vec![
                Condition::attr_exists("s"),
                cmp("n", Gt, n("50")),
            ])]),
            false,
        ),
        (
            Condition::And(vec![
                Condition::And(vec![Condition::Or(vec![Condition::attr_exists("s")])]),
                Condition::not(Condition::And(vec![Condition::attr_exists("missing")])),
            ]),
            true,
        ),
    ];
    for (c, expected) in cases {
        assert_eq!(holds(s, &k, c.clone()).await, expected, "{c:?}");
    }
    // An absent item: every comparison is false, but `<>` and `NOT`.
    let absent = Key::new("h", "absent");
    assert!(holds(s, &absent, cmp("n", Ne, n("1"))).await);
    assert!(!holds(s, &absent, cmp("n", Lt, n("1"))).await);
    assert!(!holds(s, &absent, Condition::contains("s", st("a"))).await);
    assert!(
        holds(
            s,
            &absent,
            Condition::not(Condition::begins_with("s", st("a")))
        )
        .await
    );
    // Operands DynamoDB refuses, whatever the item.
    refused(s, &k, Condition::between("n", n("2"), n("1"))).await;
    refused(s, &k, Condition::between("s", st("b"), st("a"))).await;
    refused(s, &k, Condition::between("n", n("1"), st("2"))).await;
    refused(s, &k, cmp("n", Lt, Value::L(vec![]))).await;
    refused(s, &k, cmp("n", Gt, Value::Bool(true))).await;
    refused(s, &k, Condition::begins_with("s", n("1"))).await;
    // `contains` takes any operand (a list may hold a set): a set in a set is just false.
    assert!(
        !holds(
            s,
            &k,
            Condition::contains("ss", Value::Ss(vec!["x".into()]))
        )
        .await
    );
    refused(s, &absent, Condition::between("n", n("2"), n("1"))).await;
    // Names with any characters.
    let mut odd = Key::new("h", "odd").into_item();
    odd.insert("a b.c[0]#:x", n("1"));
    s.put_item(odd, Condition::Always).await.unwrap();
    assert!(holds(s, &Key::new("h", "odd"), cmp("a b.c[0]#:x", Gt, n("0"))).await);
}

fn upd(name: &str) -> String {
    name.to_owned()
}

/// UpdateItem: creates an absent item, `SET`, `REMOVE`, `ADD` (numbers exactly, sets as a
/// union), `DELETE` (an emptied set is removed), appends, returns the new item, and applies
/// nothing when its condition fails.
pub async fn update_item_semantics<S: Storage + 'static>(table: S) {
    use storage::UpdateAction::{Add, Append, Delete, Remove, Set};
    let tree = tree(table).await;
    let s = tree.storage();
    let k = Key::new("h", "r");
    // An absent item: the condition sees nothing, the update creates it.
    let e = s
        .update_item(&k, vec![Set(upd("a"), n("1"))], Condition::Exists)
        .await
        .unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    assert!(s.get_item(&k, true).await.unwrap().is_none());
    let item = s
        .update_item(
            &k,
            vec![
                Set(upd("a"), st("x")),
                Add(upd("n"), n("0.1")),
                Add(upd("tags"), Value::Ss(vec!["red".into()])),
                Append(upd("log"), Value::L(vec![st("one")])),
                Remove(upd("nothing")),
                Delete(upd("absent_set"), Value::Ss(vec!["x".into()])),
            ],
            Condition::NotExists,
        )
        .await
        .unwrap();
    let mut expected = k.clone().into_item();
    expected.insert("a", st("x"));
    expected.insert("n", n("0.1"));
    expected.insert("tags", Value::Ss(vec!["red".into()]));
    expected.insert("log", Value::L(vec![st("one")]));
    assert_same_item(&item, &expected);
    assert_same_item(&s.get_item(&k, true).await.unwrap().unwrap(), &expected);
    let item = s
        .update_item(
            &k,
            vec![
                Remove(upd("a")),
                Add(upd("n"), n("0.2")),
                Add(upd("tags"), Value::Ss(vec!["blue".into(), "red".into()])),
                Append(upd("log"), Value::L(vec![st("two"), n("3")])),
                Set(upd("big"), n("99999999999999999999999999999999999999")),
            ],
            Condition::equals("a", st("x")),
        )
        .await
        .unwrap();
    let mut expected = k.clone().into_item();
    expected.insert("n", n("0.3"));
    expected.insert("tags", Value::Ss(vec!["red".into(), "blue".into()]));
    expected.insert("log", Value::L(vec![st("one"), st("two"), n("3")]));
    expected.insert("big", n("99999999999999999999999999999999999999"));
    assert_same_item(&item, &expected);
    let item = s
        .update_item(
            &k,
            vec![
                Add(upd("big"), n("-99999999999999999999999999999999999998")),
                Add(upd("n"), n("-0.3")),
                Delete(upd("tags"), Value::Ss(vec!["red".into(), "green".into()])),
            ],
            Condition::Always,
        )
        .await
        .unwrap();
    // (DynamoDB Local returns a sum as it computed it, `0.0` for 0.3 - 0.3: compare values.)
    assert!(item.get("big").unwrap().same_as(&n("1")), "{item:?}");
    assert!(item.get("n").unwrap().same_as(&n("0")), "{item:?}");
    assert!(
        item.get("tags")
            .unwrap()
            .same_as(&Value::Ss(vec!["blue".into()]))
    );
    let item = s
        .update_item(
            &k,
            vec![
                Delete(upd("tags"), Value::Ss(vec!["blue".into()])),
                Add(upd("nums"), Value::Ns(vec!["1".into(), "2".into()])),
            ],
            Condition::Always,
        )
        .await
        .unwrap();
    assert!(
        !item.contains("tags"),
        "an emptied set is removed: {item:?}"
    );
    let item = s
        .update_item(
            &k,
            vec![Add(upd("nums"), Value::Ns(vec!["2.0".into(), "3".into()]))],
            Condition::Always,
        )
        .await
        .unwrap();
    assert!(item.get("nums").unwrap().same_as(&Value::Ns(vec![
        "1".into(),
        "2".into(),
        "3".into()
    ])));
    // A failed condition applies nothing.
    let before = s.get_item(&k, true).await.unwrap();
    let e = s
        .update_item(
            &k,
            vec![Set(upd("x"), n("1"))],
            Condition::compare("n", storage::Comparison::Gt, n("5")),
        )
        .await
        .unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    assert_eq!(s.get_item(&k, true).await.unwrap(), before);
}

fn assert_same_item(got: &Item, expected: &Item) {
    let names = |i: &Item| i.names().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(names(got), names(expected), "{got:?}");
    for (name, v) in expected.iter() {
        assert!(
            got.get(name).is_some_and(|g| g.same_as(v)),
            "{name}: {got:?}"
        );
    }
}

/// UpdateItem refuses what DynamoDB refuses (a key attribute, two actions on one attribute,
/// `ADD` of a string, `ADD` onto another type, `DELETE` of a non-set, an append to a
/// non-list, a sum out of range, an item over 400 KB) and applies nothing then.
pub async fn update_item_refusals<S: Storage + 'static>(table: S) {
    use storage::UpdateAction::{Add, Append, Delete, Remove, Set};
    let tree = tree(table).await;
    let s = tree.storage();
    let k = Key::new("h", "r");
    let mut item = k.clone().into_item();
    item.insert("s", st("text"));
    item.insert("n", n("1"));
    item.insert("ss", Value::Ss(vec!["a".into()]));
    item.insert("big", n("9.9999999999999999999999999999999999999E+125"));
    s.put_item(item, Condition::Always).await.unwrap();
    let item = s.get_item(&k, true).await.unwrap();
    let refusals: Vec<Vec<storage::UpdateAction>> = vec![
        vec![Set(upd(storage::HASH_KEY), st("x"))],
        vec![Remove(upd(storage::RANGE_KEY))],
        vec![Set(upd("a"), n("1")), Add(upd("a"), n("1"))],
        vec![Set(upd("a"), n("1")), Remove(upd("a"))],
        vec![Add(upd("a"), st("x"))],
        vec![Add(upd("a"), Value::L(vec![n("1")]))],
        vec![Add(upd("s"), n("1"))],
        vec![Add(upd("n"), Value::Ss(vec!["x".into()]))],
        vec![Add(upd("ss"), Value::Ns(vec!["1".into()]))],
        vec![Delete(upd("ss"), st("a"))],
        vec![Delete(upd("n"), Value::Ss(vec!["x".into()]))],
        vec![Append(upd("s"), Value::L(vec![n("1")]))],
        vec![Append(upd("l"), st("x"))],
        vec![Add(upd("big"), n("9E+125"))],
        vec![Set(
            upd("huge"),
            Value::S("x".repeat(dynatree::storage::MAX_ITEM_BYTES)),
        )],
    ];
    for actions in refusals {
        let e = s
            .update_item(&k, actions.clone(), Condition::Always)
            .await
            .expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Validation, "{actions:?}: {e:?}");
        assert_eq!(s.get_item(&k, true).await.unwrap(), item, "{actions:?}");
    }
}

/// UpdateItem with no action (no update expression) is valid: it creates an absent item with
/// just its key, and leaves an existing one as it is. Inside a transaction an update needs an
/// action (refused before sending).
pub async fn update_item_without_actions<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    let k = Key::new("h", "r");
    let e = s
        .update_item(&k, vec![], Condition::Exists)
        .await
        .unwrap_err();
    assert!(e.is_condition_failed(), "{e:?}");
    let item = s.update_item(&k, vec![], Condition::Always).await.unwrap();
    assert_eq!(item, k.clone().into_item());
    assert_eq!(s.get_item(&k, true).await.unwrap(), Some(item));
    let mut full = k.clone().into_item();
    full.insert("a", n("1"));
    s.put_item(full.clone(), Condition::Always).await.unwrap();
    let item = s.update_item(&k, vec![], Condition::Exists).await.unwrap();
    assert_eq!(item, full);
    let e = s
        .transact_write(vec![TransactAction::Update {
            key: Key::new("h", "s"),
            actions: vec![],
            condition: Condition::Always,
        }])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
}

/// An update inside TransactWriteItems: applied with the other actions, all or nothing; what
/// it meets in the item cancels the transaction with its own reason; what is wrong whatever
/// the item refuses the request.
pub async fn transaction_updates<S: Storage + 'static>(table: S) {
    use storage::UpdateAction::{Add, Set};
    let tree = tree(table).await;
    let s = tree.storage();
    let a = Key::new("a", "1");
    let b = Key::new("b", "1");
    let mut item = a.clone().into_item();
    item.insert("s", st("text"));
    s.put_item(item.clone(), Condition::Always).await.unwrap();
    s.transact_write(vec![
        TransactAction::Update {
            key: a.clone(),
            actions: vec![Add(upd("n"), n("2"))],
            condition: Condition::Exists,
        },
        TransactAction::Update {
            key: b.clone(),
            actions: vec![Set(upd("v"), st("new"))],
            condition: Condition::NotExists,
        },
    ])
    .await
    .unwrap();
    let got = s.get_item(&a, true).await.unwrap().unwrap();
    assert_eq!(got.get("n"), Some(&n("2")));
    let got = s.get_item(&b, true).await.unwrap().unwrap();
    assert_eq!(got.get("v"), Some(&st("new")));
    // A failed condition: cancelled, nothing applied.
    let e = s
        .transact_write(vec![
            TransactAction::Update {
                key: a.clone(),
                actions: vec![Add(upd("n"), n("1"))],
                condition: Condition::Always,
            },
            TransactAction::Update {
                key: b.clone(),
                actions: vec![Set(upd("v"), st("newer"))],
                condition: Condition::NotExists,
            },
        ])
        .await
        .unwrap_err();
    let codes: Vec<&str> = e
        .cancellation_reasons()
        .iter()
        .map(dynatree::error::CancellationReason::code)
        .collect();
    assert_eq!(codes, ["None", "ConditionalCheckFailed"], "{e:?}");
    assert_eq!(
        s.get_item(&a, true).await.unwrap().unwrap().get("n"),
        Some(&n("2"))
    );
    // `ADD` onto a string: what the item holds refuses the whole request.
    let e = s
        .transact_write(vec![
            TransactAction::Update {
                key: b.clone(),
                actions: vec![Set(upd("w"), n("1"))],
                condition: Condition::Always,
            },
            TransactAction::Update {
                key: a.clone(),
                actions: vec![Add(upd("s"), n("1"))],
                condition: Condition::Always,
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation, "{e:?}");
    assert!(!s.get_item(&b, true).await.unwrap().unwrap().contains("w"));
    // A key attribute: the transaction is cancelled with a `ValidationError` reason (DynamoDB
    // Local 3.3.1 then lists that one reason only, not one per action; the fake gives one per
    // action, as the service documents).
    let e = s
        .transact_write(vec![
            TransactAction::ConditionCheck {
                key: b.clone(),
                condition: Condition::Exists,
            },
            TransactAction::Update {
                key: a.clone(),
                actions: vec![Set(upd(storage::RANGE_KEY), st("x"))],
                condition: Condition::Always,
            },
        ])
        .await
        .unwrap_err();
    assert!(e.is_transaction_canceled(), "{e:?}");
    let failures: Vec<&str> = e
        .cancellation_reasons()
        .iter()
        .filter(|r| r.is_failure())
        .map(dynatree::error::CancellationReason::code)
        .collect();
    assert_eq!(failures, ["ValidationError"], "{e:?}");
    // Anything else wrong with the update expression refuses the request.
    for actions in [
        vec![Set(upd("x"), n("1")), Add(upd("x"), n("1"))],
        vec![Add(upd("x"), st("1"))],
        vec![storage::UpdateAction::Delete(upd("x"), n("1"))],
    ] {
        let e = s
            .transact_write(vec![TransactAction::Update {
                key: a.clone(),
                actions: actions.clone(),
                condition: Condition::Always,
            }])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Validation, "{actions:?}: {e:?}");
    }
    assert_eq!(
        s.get_item(&a, true).await.unwrap().unwrap().get("n"),
        Some(&n("2"))
    );
}

/// TransactWriteItems with a client request token: a repeat is not applied again, the same
/// token with other actions is refused (`IdempotentParameterMismatchException`), a token of
/// 0 or over 36 characters is refused.
pub async fn idempotent_transactions<S: Storage + 'static>(table: S) {
    use storage::UpdateAction::Add;
    let tree = tree(table).await;
    let s = tree.storage();
    let k = Key::new("h", "r");
    let add = |by: &str| {
        vec![TransactAction::Update {
            key: k.clone(),
            actions: vec![Add(upd("n"), n(by))],
            condition: Condition::Always,
        }]
    };
    let count = || async {
        s.get_item(&k, true)
            .await
            .unwrap()
            .and_then(|i| i.get("n").cloned())
    };
    s.transact_write_idempotent(add("1"), "token-1")
        .await
        .unwrap();
    s.transact_write_idempotent(add("1"), "token-1")
        .await
        .unwrap();
    assert_eq!(count().await, Some(n("1")));
    let r = s.transact_write_idempotent(add("2"), "token-1").await;
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation, "{e:?}");
    assert_eq!(
        e.service_code(),
        Some("IdempotentParameterMismatchException"),
        "{e:?}"
    );
    assert_eq!(count().await, Some(n("1")));
    s.transact_write_idempotent(add("1"), "token-2")
        .await
        .unwrap();
    assert_eq!(count().await, Some(n("2")));
    for token in [String::new(), "x".repeat(37)] {
        let e = s
            .transact_write_idempotent(add("1"), &token)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Validation, "{token:?}: {e:?}");
    }
    s.transact_write_idempotent(add("1"), &"x".repeat(36))
        .await
        .unwrap();
    assert_eq!(count().await, Some(n("3")));
    // A cancelled transaction does not use its token up.
    let guarded = vec![TransactAction::Update {
        key: k.clone(),
        actions: vec![Add(upd("n"), n("1"))],
        condition: Condition::equals("n", n("4")),
    }];
    let e = s
        .transact_write_idempotent(guarded.clone(), "token-3")
        .await
        .unwrap_err();
    assert!(e.is_transaction_canceled(), "{e:?}");
    s.transact_write(add("1")).await.unwrap();
    s.transact_write_idempotent(guarded, "token-3")
        .await
        .unwrap();
    assert_eq!(count().await, Some(n("5")));
}

/// UpdateTimeToLive and DescribeTimeToLive: enabling is idempotent on one attribute, another
/// attribute is refused while one is enabled.
pub async fn time_to_live<S: Storage + 'static>(table: S) {
    let tree = tree(table).await;
    let s = tree.storage();
    assert_eq!(s.ttl_attribute().await.unwrap(), None);
    s.enable_ttl("expires").await.unwrap();
    assert_eq!(s.ttl_attribute().await.unwrap().as_deref(), Some("expires"));
    s.enable_ttl("expires").await.unwrap();
    let e = s.enable_ttl("other").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation, "{e:?}");
    assert_eq!(s.ttl_attribute().await.unwrap().as_deref(), Some("expires"));
}

// ---- projections -------------------------------------------------------------------------------

fn names_of(projection: &[&str]) -> Vec<String> {
    projection.iter().map(|n| (*n).to_owned()).collect()
}

fn attr_names(item: &Item) -> Vec<&str> {
    item.names().collect()
}

/// A raw table with one index (`by_ix`: hash `ixh`, range `ixr`), active, and three items in it:
/// `(h, r0..r2)` with `a`, `b` and a 10 KB `big`; `r1` has no `a`.
async fn projection_table<S: Storage + 'static>(
    table: S,
) -> (dynatree::storage::SharedStorage, storage::IndexSpec) {
    let spec = storage::IndexSpec::new("by_ix", "ixh", Some("ixr".to_owned()));
    table
        .create_table(
            dynatree::storage::Billing::OnDemand,
            std::slice::from_ref(&spec),
        )
        .await
        .expect("create table");
    let s = storage::SharedStorage::new(table);
    for _ in 0..600 {
        let d = s.describe_table().await.expect("describe").expect("table");
        if d.status == storage::TableStatus::Active
            && d.indexes
                .iter()
                .all(|(_, st)| *st == storage::TableStatus::Active)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for i in 0..3 {
        let mut item = Key::new("h", format!("r{i}")).into_item();
        if i != 1 {
            item.insert("a", n(&i.to_string()));
        }
        item.insert("b", st("bee"));
        item.insert("big", st(&"x".repeat(10_000)));
        item.insert("ixh", st("g"));
        item.insert("ixr", st(&format!("{i}")));
        s.put_item(item, Condition::Always).await.expect("put");
    }
    (s, spec)
}

fn index_query(spec: &storage::IndexSpec, projection: Option<&[&str]>) -> storage::IndexQuery {
    storage::IndexQuery {
        index: spec.clone(),
        hash: "g".into(),
        range: None,
        forward: true,
        limit: None,
        projection: projection.map(names_of),
    }
}

/// Projections on GetItem, BatchGetItem and an index Query: only the named top-level
/// attributes the item has (an item with none of them is an empty item, a missing item is
/// none), the key attributes only when named, an empty projection is every attribute, and the
/// read costs what the unprojected read costs (metered on the fake).
pub async fn projected_reads<S: Storage + 'static>(table: S) {
    let (s, spec) = projection_table(table).await;
    let k0 = Key::new("h", "r0");
    let k1 = Key::new("h", "r1");
    let whole = s.get_item(&k0, true).await.unwrap().expect("r0");

    // GetItem.
    let got = s
        .get_item_projected(&k0, true, &names_of(&["b", "a"]))
        .await
        .unwrap()
        .expect("r0");
    assert_eq!(attr_names(&got), ["a", "b"]);
    assert_eq!(got.get("a"), Some(&n("0")));
    let keyed = s
        .get_item_projected(&k0, true, &names_of(&["Key", "Child", "b"]))
        .await
        .unwrap()
        .expect("r0");
    assert_eq!(attr_names(&keyed), ["Child", "Key", "b"]);
    assert_eq!(Key::from_item(&keyed), Some(k0.clone()));
    let partial = s
        .get_item_projected(&k1, false, &names_of(&["a", "b"]))
        .await
        .unwrap()
        .expect("r1");
    assert_eq!(attr_names(&partial), ["b"]);
    let nothing = s
        .get_item_projected(&k1, true, &names_of(&["a", "zzz"]))
        .await
        .unwrap();
    assert_eq!(
        nothing.as_ref().map(attr_names),
        Some(vec![]),
        "{nothing:?}"
    );
    let absent = s
        .get_item_projected(&Key::new("h", "none"), true, &names_of(&["a"]))
        .await
        .unwrap();
    assert_eq!(absent, None);
    let all = s.get_item_projected(&k0, true, &[]).await.unwrap();
    assert_eq!(all.as_ref(), Some(&whole));

    // BatchGetItem.
    let keys = vec![k0.clone(), k1.clone(), Key::new("h", "none")];
    let out = s
        .batch_get_projected(keys.clone(), true, &names_of(&["Child", "a"]))
        .await
        .unwrap();
    assert!(out.unprocessed.is_empty());
    let mut got: Vec<Vec<&str>> = out.items.iter().map(attr_names).collect();
    got.sort();
    assert_eq!(got, [vec!["Child"], vec!["Child", "a"]]);
    let out = s
        .batch_get_projected(keys.clone(), false, &names_of(&["zzz"]))
        .await
        .unwrap();
    let got: Vec<Vec<&str>> = out.items.iter().map(attr_names).collect();
    assert_eq!(got, [Vec::<&str>::new(), vec![]], "{out:?}");
    let out = s.batch_get_projected(keys, true, &[]).await.unwrap();
    assert_eq!(out.items.len(), 2);
    assert!(out.items.contains(&whole));

    // An index Query: projected items, a complete last key.
    let page = s
        .query_index_page(&index_query(&spec, Some(&["a", "ixr"])), None)
        .await
        .unwrap();
    let got: Vec<Vec<&str>> = page.items.iter().map(attr_names).collect();
    assert_eq!(got, [vec!["a", "ixr"], vec!["ixr"], vec!["a", "ixr"]]);
    let mut q = index_query(&spec, Some(&["b"]));
    q.limit = Some(1);
    let first = s.query_index_page(&q, None).await.unwrap();
    assert_eq!(
        first.items.iter().map(attr_names).collect::<Vec<_>>(),
        [vec!["b"]]
    );
    let last = first.last.expect("a last key");
    let mut last_names = attr_names(&last);
    last_names.sort_unstable();
    assert_eq!(last_names, ["Child", "Key", "ixh", "ixr"]);
    let second = s.query_index_page(&q, Some(last)).await.unwrap();
    assert_eq!(second.items.len(), 1);
    let unprojected = s
        .query_index_page(&index_query(&spec, None), None)
        .await
        .unwrap();
    assert_eq!(unprojected.items[0], whole);
    let empty = s
        .query_index_page(&index_query(&spec, Some(&[])), None)
        .await
        .unwrap();
    assert_eq!(empty.items, unprojected.items);

    // Metering: a projection reads (and pays for) the whole item.
    if let Some(fake) = s.downcast_ref::<crate::FakeTable>() {
        fake.reset_metrics();
        s.get_item(&k0, true).await.unwrap();
        let full = fake.metrics().read_units();
        fake.reset_metrics();
        s.get_item_projected(&k0, true, &names_of(&["a"]))
            .await
            .unwrap();
        assert_eq!(fake.metrics().read_units(), full);
        assert_eq!(full, 3.0, "a 10 KB item is 3 units");
        fake.reset_metrics();
        s.batch_get(vec![k0.clone(), k1.clone()], false)
            .await
            .unwrap();
        let full = fake.metrics().read_units();
        fake.reset_metrics();
        s.batch_get_projected(vec![k0.clone(), k1.clone()], false, &names_of(&["zzz"]))
            .await
            .unwrap();
        assert_eq!(fake.metrics().read_units(), full);
        fake.reset_metrics();
        s.query_index_page(&index_query(&spec, None), None)
            .await
            .unwrap();
        let full = fake.metrics().read_units();
        fake.reset_metrics();
        s.query_index_page(&index_query(&spec, Some(&["a"])), None)
            .await
            .unwrap();
        assert_eq!(fake.metrics().read_units(), full);
    }
}

/// Runs `projection` on GetItem, BatchGetItem and an index Query; each is refused with
/// `Validation` when `refused`, else succeeds.
async fn projection_verdicts(
    s: &storage::SharedStorage,
    spec: &storage::IndexSpec,
    projection: Vec<String>,
    refused: bool,
) {
    let k0 = Key::new("h", "r0");
    let mut q = index_query(spec, None);
    q.projection = Some(projection.clone());
    let results = [
        (
            "GetItem",
            s.get_item_projected(&k0, true, &projection)
                .await
                .map(|_| ()),
        ),
        (
            "BatchGetItem",
            s.batch_get_projected(vec![k0.clone()], true, &projection)
                .await
                .map(|_| ()),
        ),
        ("Query", s.query_index_page(&q, None).await.map(|_| ())),
    ];
    for (op, r) in results {
        match r {
            Err(e) if refused => assert_eq!(e.kind(), ErrorKind::Validation, "{op}: {e:?}"),
            Ok(()) if !refused => {}
            other => panic!("{op}: expected refused = {refused}, got {other:?}"),
        }
    }
}

/// A name given twice in one projection is refused ("two document paths overlap").
pub async fn projection_with_a_name_twice_is_refused<S: Storage + 'static>(table: S) {
    let (s, spec) = projection_table(table).await;
    projection_verdicts(&s, &spec, names_of(&["a", "b", "a"]), true).await;
    projection_verdicts(&s, &spec, names_of(&["Key", "Key"]), true).await;
}

/// An empty name in a projection is refused.
pub async fn projection_with_an_empty_name_is_refused<S: Storage + 'static>(table: S) {
    let (s, spec) = projection_table(table).await;
    projection_verdicts(&s, &spec, names_of(&["a", ""]), true).await;
}

/// As many names as fit in DynamoDB's 4 KB expression string ([`storage::MAX_PROJECTION_NAMES`],
/// sent as `#p0,#p1,…`) are taken; one more is refused.
pub async fn projection_name_count_limit<S: Storage + 'static>(table: S) {
    let (s, spec) = projection_table(table).await;
    let names = |count: usize| (0..count).map(|i| format!("attr{i}")).collect::<Vec<_>>();
    let max = storage::MAX_PROJECTION_NAMES;
    projection_verdicts(&s, &spec, names(max), false).await;
    projection_verdicts(&s, &spec, names(max + 1), true).await;
}

/// An index name has 3 to 255 characters of `a-z A-Z 0-9 _ - .`: a table with a shorter one is
/// refused (and not created).
pub async fn index_names_follow_dynamodb_rules<S: Storage + 'static>(table: S) {
    for name in ["ix", "has space"] {
        let spec = storage::IndexSpec::new(name, "¦ix.h", None);
        let err = table
            .create_table(dynatree::storage::Billing::OnDemand, &[spec])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{name}: {err:?}");
    }
    let spec = storage::IndexSpec::new("ix3", "¦ix.h", None);
    assert!(
        table
            .create_table(dynatree::storage::Billing::OnDemand, &[spec])
            .await
            .unwrap()
    );
}

// ---- the write API (typed) ---------------------------------------------------------------------

#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Wallets/{id}", index(name = "by_owner", hash = owner))]
struct Wallet {
    id: String,
    owner: String,
    balance: i64,
    tags: Vec<String>,
    note: Option<String>,
    #[dynatree(version)]
    version: u64,
}

#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Wallets/{wallet}/Entries/{n}")]
struct Entry {
    wallet: String,
    n: u32,
    amount: i64,
    #[dynatree(ttl)]
    until: Option<u64>,
}

fn wallet(id: &str, balance: i64) -> Wallet {
    Wallet {
        id: id.into(),
        owner: format!("owner-{id}"),
        balance,
        tags: Vec::new(),
        note: None,
        version: 1,
    }
}

fn wkey(id: &str) -> WalletKey {
    WalletKey { id: id.into() }
}

async fn wallet_tree<S: Storage + 'static>(table: S) -> Tree {
    let tree = Tree::builder(table)
        .retry_policy(fast_retry())
        .indexes_of::<Wallet>()
        .time_to_live(true)
        .build()
        .expect("tree");
    tree.create_table().await.expect("create table");
    tree
}

/// `tree.transaction()` across types: all or nothing, new paths with their listing rows,
/// cancellation reasons for the caller's actions only; the invariants hold after each.
pub async fn typed_transactions<S: Storage + 'static>(table: S) {
    let tree = wallet_tree(table).await;
    let wallets = tree.repo::<Wallet>();
    wallets.put(&wallet("a", 10)).await.unwrap();
    let f = Wallet::FIELDS;
    let mut tx = tree.transaction();
    tx.patch(
        dynatree::Patch::new(&wkey("a"))
            .add(f.balance, -4)
            .when(f.balance.ge(4)),
    )
    .create(&wallet("b", 4))
    .create(&Entry {
        wallet: "b".into(),
        n: 1,
        amount: 4,
        until: None,
    });
    tx.commit().await.unwrap();
    assert_eq!(wallets.get(&wkey("a")).await.unwrap().unwrap().balance, 6);
    assert_eq!(wallets.get(&wkey("a")).await.unwrap().unwrap().version, 2);
    assert!(
        tree.repo::<Entry>()
            .get(&EntryKey {
                wallet: "b".into(),
                n: 1
            })
            .await
            .unwrap()
            .is_some()
    );
    assert_invariants(&tree).await;

    // The second action fails (b exists): nothing applied, reasons in the caller's order.
    let mut tx = tree.transaction();
    tx.patch(dynatree::Patch::new(&wkey("a")).add(f.balance, -1))
        .create(&wallet("b", 0))
        .put(&Entry {
            wallet: "c".into(),
            n: 1,
            amount: 1,
            until: None,
        });
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TransactionCanceled, "{err:?}");
    let reasons = err.cancellation_reasons();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[1].is_condition_failed(), "{reasons:?}");
    assert!(!reasons[0].is_condition_failed() && !reasons[2].is_condition_failed());
    assert_eq!(wallets.get(&wkey("a")).await.unwrap().unwrap().balance, 6);
    assert!(
        tree.repo::<Entry>()
            .get(&EntryKey {
                wallet: "c".into(),
                n: 1
            })
            .await
            .unwrap()
            .is_none()
    );
    assert_invariants(&tree).await;

    // A delete in a transaction prunes what then names nothing.
    let mut tx = tree.transaction();
    tx.delete::<Entry>(&EntryKey {
        wallet: "b".into(),
        n: 1,
    })
    .delete::<Wallet>(&wkey("b"));
    tx.commit().await.unwrap();
    let names: Vec<String> = tree.list(p(&["Wallets"])).try_collect().await.unwrap();
    assert!(names.iter().all(|n| n != "b"), "{names:?}");
    assert_invariants(&tree).await;
}

/// `put_if`, `delete_if` and `Patch` with typed conditions, as DynamoDB evaluates them.
pub async fn typed_conditions_and_patches<S: Storage + 'static>(table: S) {
    let tree = wallet_tree(table).await;
    let wallets = tree.repo::<Wallet>();
    let f = Wallet::FIELDS;
    assert_eq!(
        wallets
            .put_if(&wallet("a", 1), f.balance.gt(0))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::ConditionFailed
    );
    wallets
        .put_if(&wallet("a", 1), dynatree::update::Cond::not_exists())
        .await
        .unwrap();
    wallets
        .patch(
            dynatree::Patch::new(&wkey("a"))
                .add(f.balance, 2)
                .append(f.tags, ["x", "y"])
                .set(f.note, "hi")
                .when(f.owner.begins_with("owner-") & f.note.eq(None)),
        )
        .await
        .unwrap();
    let got = wallets.get(&wkey("a")).await.unwrap().unwrap();
    assert_eq!(
        (
            got.balance,
            got.tags.len(),
            got.note.as_deref(),
            got.version
        ),
        (3, 2, Some("hi"), 2)
    );
    wallets
        .patch(
            dynatree::Patch::new(&wkey("a"))
                .remove(f.note)
                .when(f.tags.contains("y") & f.balance.between(1, 5)),
        )
        .await
        .unwrap();
    assert_eq!(wallets.get(&wkey("a")).await.unwrap().unwrap().note, None);
    assert_eq!(
        wallets
            .patch(
                dynatree::Patch::new(&wkey("a"))
                    .add(f.balance, 1)
                    .when(f.balance.ne(3))
            )
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::ConditionFailed
    );
    assert_eq!(
        wallets
            .patch(dynatree::Patch::new(&wkey("zz")).add(f.balance, 1))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert!(wallets.get(&wkey("zz")).await.unwrap().is_none());
    assert_eq!(
        wallets
            .delete_if(&wkey("a"), f.balance.lt(0))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::ConditionFailed
    );
    wallets
        .delete_if(&wkey("a"), !f.tags.contains("nope"))
        .await
        .unwrap();
    assert!(wallets.get(&wkey("a")).await.unwrap().is_none());
    assert_invariants(&tree).await;
}

/// A transaction with an idempotency token applies once however often it is sent; other
/// actions under the same token are DynamoDB's mismatch error.
pub async fn typed_idempotent_transaction<S: Storage + 'static>(table: S) {
    let tree = wallet_tree(table).await;
    let wallets = tree.repo::<Wallet>();
    wallets.put(&wallet("a", 0)).await.unwrap();
    let f = Wallet::FIELDS;
    let token = format!("t-{:016x}", fastrand::u64(..));
    for _ in 0..2 {
        let mut tx = tree.transaction();
        tx.idempotency_token(token.clone())
            .patch(dynatree::Patch::new(&wkey("a")).add(f.balance, 5))
            .put(&Entry {
                wallet: "a".into(),
                n: 1,
                amount: 5,
                until: None,
            });
        tx.commit().await.unwrap();
    }
    assert_eq!(wallets.get(&wkey("a")).await.unwrap().unwrap().balance, 5);
    let mut other = tree.transaction();
    other
        .idempotency_token(token)
        .patch(dynatree::Patch::new(&wkey("a")).add(f.balance, 6));
    let err = other.commit().await.unwrap_err();
    assert_eq!(
        err.service_code(),
        Some("IdempotentParameterMismatchException"),
        "{err:?}"
    );
}

/// `#[dynatree(ttl)]`: the expiry attribute is written, TTL enabled by `create_table`, reads and
/// conditions see an expired value as absent, and the sweep removes it and its name.
pub async fn typed_expiry_and_sweep<S: Storage + 'static>(table: S) {
    let tree = wallet_tree(table).await;
    assert_eq!(
        tree.storage().ttl_attribute().await.unwrap().as_deref(),
        Some("¦ttl")
    );
    let entries = tree.repo::<Entry>();
    let old = Entry {
        wallet: "a".into(),
        n: 1,
        amount: 1,
        until: Some(1_000),
    };
    let live = Entry {
        wallet: "a".into(),
        n: 2,
        amount: 2,
        until: Some(4_000_000_000),
    };
    entries.put_all(&[old.clone(), live.clone()]).await.unwrap();
    assert_eq!(entries.get(&old.key()).await.unwrap(), None);
    assert_eq!(entries.get(&live.key()).await.unwrap(), Some(live.clone()));
    let listed: Vec<Entry> = entries
        .query(&old.key().collection())
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed, std::slice::from_ref(&live));
    // A create over the expired value succeeds (it is absent for conditions too).
    let again = Entry {
        until: Some(4_000_000_000),
        ..old.clone()
    };
    entries.create(&again).await.unwrap();
    assert_eq!(entries.get(&old.key()).await.unwrap(), Some(again.clone()));
    // Expire it again and sweep: the object and its name go, the live one stays.
    entries
        .put(&Entry {
            until: Some(1_000),
            ..again
        })
        .await
        .unwrap();
    assert_eq!(tree.sweep_expired(p(&["Wallets"])).await.unwrap(), 1);
    let names: Vec<String> = tree
        .list(p(&["Wallets", "a", "Entries"]))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(names, ["0000000002"]);
    assert_invariants(&tree).await;
}

/// Per-call reads: a consistent read sees the last write; a projection reads a smaller type,
/// through get, a typed query and an index query.
pub async fn typed_projections_and_consistent_reads<S: Storage + 'static>(table: S) {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Balance {
        balance: i64,
    }
    let tree = wallet_tree(table).await;
    let wallets = tree.repo::<Wallet>();
    let mut w = wallet("a", 7);
    w.note = Some("x".repeat(10_000));
    wallets.put(&w).await.unwrap();
    assert_eq!(
        wallets.read(&wkey("a")).consistent(true).await.unwrap(),
        Some(w.clone())
    );
    assert_eq!(
        wallets
            .read(&wkey("a"))
            .consistent(true)
            .project::<Balance>()
            .await
            .unwrap(),
        Some(Balance { balance: 7 })
    );
    let listed: Vec<Balance> = wallets
        .query(&WalletCollection {})
        .consistent(true)
        .items_as()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed, [Balance { balance: 7 }]);
    // Index reads are eventually consistent: wait for the index to show it.
    let mut by_owner: Vec<Balance> = Vec::new();
    for _ in 0..50 {
        by_owner = wallets
            .index(Wallet::index_by_owner("owner-a"))
            .items_as()
            .try_collect()
            .await
            .unwrap();
        if !by_owner.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(by_owner, [Balance { balance: 7 }]);
}

/// A source of denormalized fields (`Board` at `Boards/{board}`).
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Boards/{board}")]
struct Board {
    board: String,
    name: String,
}

/// Copies its board's name; a source of its own title.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Boards/{board}/Topics/{topic}")]
struct Topic {
    board: String,
    topic: String,
    title: String,
    #[dynatree(from = Board::name)]
    board_name: Option<String>,
}

/// Copies its topic's title and, through the topic, its board's name (a chain).
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Boards/{board}/Topics/{topic}/Notes/{note}")]
struct Note {
    board: String,
    topic: String,
    note: String,
    #[dynatree(from = Topic::title)]
    topic_title: Option<String>,
    #[dynatree(from = Topic::board_name)]
    board_name: Option<String>,
}

/// Denormalized fields, inline, with every conditional write they send: fill on write (the
/// write's transaction checks the sources), a rename through a chain, a patch of the
/// intermediate, a move under another source, a source removed (tombstone, optional copies
/// cleared) and written again, a transaction writing a source and a target.
pub async fn typed_denormalized_fields<S: Storage + 'static>(table: S) {
    let tree = Tree::builder(table)
        .retry_policy(fast_retry())
        .denormalized::<Topic>()
        .denormalized::<Note>()
        .build()
        .expect("tree");
    tree.create_table().await.expect("create table");
    let board = |b: &str, name: &str| Board {
        board: b.into(),
        name: name.into(),
    };
    let topic = |b: &str, title: &str| Topic {
        board: b.into(),
        topic: "t".into(),
        title: title.into(),
        board_name: None,
    };
    let note = |b: &str, n: &str| Note {
        board: b.into(),
        topic: "t".into(),
        note: n.into(),
        topic_title: None,
        board_name: None,
    };
    let notes = tree.repo::<Note>();
    let read = |b: &'static str| {
        let notes = notes.clone();
        async move {
            let mut out = Vec::new();
            for n in ["n1", "n2"] {
                let got = notes
                    .read(&note(b, n).key())
                    .consistent(true)
                    .await
                    .expect("read")
                    .expect("a note");
                out.push((got.topic_title, got.board_name));
            }
            out
        }
    };
    let both = |t: &str, b: Option<&str>| vec![(Some(t.to_owned()), b.map(str::to_owned)); 2];
    tree.repo::<Board>().put(&board("a", "A")).await.unwrap();
    tree.repo::<Board>().put(&board("b", "B")).await.unwrap();
    tree.repo::<Topic>().put(&topic("a", "T")).await.unwrap();
    notes.put(&note("a", "n1")).await.unwrap();
    notes.put_all([&note("a", "n2")]).await.unwrap();
    assert_eq!(read("a").await, both("T", Some("A")));
    // A rename through the chain, a patch of the intermediate.
    tree.repo::<Board>().put(&board("a", "A2")).await.unwrap();
    tree.repo::<Topic>()
        .patch(dynatree::Patch::new(&topic("a", "").key()).set(Topic::FIELDS.title, "T2"))
        .await
        .unwrap();
    assert_eq!(read("a").await, both("T2", Some("A2")));
    // Moved under another board: copies from the new ancestors.
    tree.move_subtree(
        ["Boards", "a", "Topics", "t"],
        ["Boards", "b", "Topics", "t"],
    )
    .await
    .unwrap();
    assert_eq!(read("b").await, both("T2", Some("B")));
    // The source removed: optional copies cleared; written again: copied again.
    tree.repo::<Board>()
        .delete(&board("b", "").key())
        .await
        .unwrap();
    assert_eq!(read("b").await, both("T2", None));
    let mut tx = tree.transaction();
    tx.put(&board("b", "B3")).put(&note("b", "n3"));
    tx.commit().await.unwrap();
    assert_eq!(read("b").await, both("T2", Some("B3")));
    let n3 = notes
        .read(&note("b", "n3").key())
        .consistent(true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n3.board_name.as_deref(), Some("B3"));
    assert!(tree.pending().await.unwrap().is_empty());
}

/// TransactGetItems: rows in the order asked, `None` where nothing is; DynamoDB's refusals
/// (no keys, more than 100, one key twice).
pub async fn transact_get_rules<S: Storage + 'static>(table: S) {
    let table = std::sync::Arc::new(table);
    let tree = tree(std::sync::Arc::clone(&table)).await;
    tree.put(p(&["a", "b"]), &V { v: 1 }).await.unwrap();
    let rows = table
        .transact_get(vec![
            Key::new("¦a¦b", "¦"),
            Key::new("¦", "missing"),
            Key::new("¦", "a"),
        ])
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[0].as_ref().and_then(|r| r.get("v")),
        Some(&Value::N("1".into()))
    );
    assert!(rows[1].is_none());
    assert!(rows[2].is_some());
    let twice = table
        .transact_get(vec![Key::new("¦", "a"), Key::new("¦", "a")])
        .await
        .unwrap_err();
    assert_eq!(twice.kind(), ErrorKind::Validation, "{twice}");
    let none = table.transact_get(Vec::new()).await.unwrap_err();
    assert_eq!(none.kind(), ErrorKind::Validation, "{none}");
    let many: Vec<Key> = (0..101).map(|i| Key::new("¦", format!("k{i}"))).collect();
    let over = table.transact_get(many).await.unwrap_err();
    assert_eq!(over.kind(), ErrorKind::Validation, "{over}");
}

/// The integrity checker on a table corrupted through raw writes (as the Go library and
/// crashed processes leave them): each class found with its path, in 1 and 3 segments alike;
/// the repair fixes what a program can decide, leaves the dangling link, and the table is
/// then healthy but for it.
pub async fn check_and_repair<S: Storage + 'static>(table: S) {
    use dynatree::check::Class;
    let table = std::sync::Arc::new(table);
    let tree = tree(std::sync::Arc::clone(&table)).await;
    for path in [&["a", "b", "c"][..], &["a", "d"], &["x", "y"]] {
        tree.put(p(path), &V { v: 1 }).await.unwrap();
    }
    tree.put_link(p(&["l"]), p(&["nowhere"])).await.unwrap();
    // The Go library's Delete of /a/b, which has a child: its listing row goes, and /a/b/c
    // with it, unreachable.
    table
        .delete_item(&Key::new("¦a¦", "b"), Condition::Always)
        .await
        .unwrap();
    // A listing row naming nothing, and an expired removal mark.
    table
        .put_item(Key::new("¦x¦", "empty").into_item(), Condition::Always)
        .await
        .unwrap();
    let mut marked = Key::new("¦a¦", "d").into_item();
    marked.insert("¦deleting", Value::S("1:00000000000000ff".into()));
    table.put_item(marked, Condition::Always).await.unwrap();
    // A row that is no row of the layout.
    table
        .put_item(Key::new("¦x¦", "bad¦name").into_item(), Condition::Always)
        .await
        .unwrap();

    let report = tree.check().run().await.unwrap();
    let found: Vec<(Class, Option<String>)> = report
        .violations()
        .iter()
        .map(|v| (v.class(), v.path().map(Path::to_string)))
        .collect();
    assert_eq!(
        found,
        [
            (Class::BrokenClosure, Some("/a/b/c".to_owned())),
            (Class::EmptyListing, Some("/x/empty".to_owned())),
            (Class::ExpiredMark, Some("/a/d".to_owned())),
            (Class::DanglingLink, Some("/l".to_owned())),
            (Class::Unparsable, None),
        ],
        "{report}"
    );
    let split = tree.check().segments(3).page_size(2).run().await.unwrap();
    assert_eq!(split.violations(), report.violations());
    assert_eq!(split.rows(), report.rows());

    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(repaired.fixed().len(), 3, "{repaired}");
    assert_eq!(repaired.left().len(), 2, "{repaired}");
    let after = tree.check().run().await.unwrap();
    let left: Vec<Class> = after.violations().iter().map(|v| v.class()).collect();
    assert_eq!(left, [Class::DanglingLink, Class::Unparsable], "{after}");
    let names: Vec<String> = tree.list(p(&["a", "b"])).try_collect().await.unwrap();
    assert_eq!(names, ["c"]);
    let names: Vec<String> = tree.list(p(&["x"])).try_collect().await.unwrap();
    assert!(!names.contains(&"empty".to_owned()), "{names:?}");
    assert_eq!(
        tree.get::<V>(p(&["a", "b", "c"])).await.unwrap(),
        Some(V { v: 1 })
    );
}
