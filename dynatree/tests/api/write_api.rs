//! The write API from outside: transactions, conditions of one's own, partial
//! updates, time to live. Request counts are asserted on the metered fake.

use dynatree::{ErrorKind, Hierarchical, Patch, Tree, update::Cond};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    name: String,
    balance: i64,
    tags: Vec<String>,
    nick: Option<String>,
    #[dynatree(version)]
    version: u64,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}", index(name = "by_target", hash = target))]
struct Link {
    account: String,
    short: String,
    target: String,
    hits: u64,
    #[dynatree(ttl)]
    until: Option<u64>,
}

fn account(id: &str, balance: i64) -> Account {
    Account {
        id: id.into(),
        name: format!("account {id}"),
        balance,
        tags: vec![],
        nick: None,
        version: 1,
    }
}

fn link(account: &str, short: &str) -> Link {
    Link {
        account: account.into(),
        short: short.into(),
        target: format!("https://{short}"),
        hits: 0,
        until: None,
    }
}

fn akey(id: &str) -> AccountKey {
    AccountKey { id: id.into() }
}

async fn setup() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .indexes_of::<Link>()
        .time_to_live(true)
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    (table, tree)
}

#[tokio::test]
async fn transaction_commits_all_or_nothing_and_maps_reasons() {
    let (table, tree) = setup().await;
    let accounts = tree.repo::<Account>();
    accounts.put(&account("a", 10)).await.unwrap();
    accounts.put(&account("c", 10)).await.unwrap();
    let f = Account::FIELDS;

    // New paths (a new account and a link under it) in one transaction with a patch.
    let mut tx = tree.transaction();
    tx.create(&account("b", 0))
        .put(&link("b", "l1"))
        .patch(Patch::new(&akey("a")).add(f.balance, -3))
        .check::<Account>(&akey("c"), f.name.eq("account c"));
    assert_eq!(tx.len(), 4);
    tx.commit().await.unwrap();
    assert_eq!(accounts.get(&akey("a")).await.unwrap().unwrap().balance, 7);
    assert_eq!(accounts.get(&akey("a")).await.unwrap().unwrap().version, 2);
    assert!(
        tree.repo::<Link>()
            .get(&link("b", "l1").key())
            .await
            .unwrap()
            .is_some()
    );

    // The second action's condition fails: nothing is applied, the reasons are the caller's.
    let before = table.rows();
    let mut tx = tree.transaction();
    tx.put(&link("a", "l2"))
        .create(&account("b", 5))
        .patch(Patch::new(&akey("a")).add(f.balance, 1));
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TransactionCanceled);
    let reasons = err.cancellation_reasons();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(!reasons[0].is_failure());
    assert!(reasons[1].is_condition_failed());
    assert!(!reasons[2].is_failure());
    // The ancestors of the put may have been created (listing rows only); no object changed.
    let objects = |rows: &[dynatree::storage::Item]| {
        rows.iter()
            .filter(|r| r.get_s("Child") == Some("¦"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(objects(&table.rows()), objects(&before));
}

#[tokio::test]
async fn transaction_refuses_mistakes_before_sending() {
    let (table, tree) = setup().await;
    table.reset_metrics();

    let err = tree.transaction().commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);

    let mut tx = tree.transaction();
    tx.put(&account("a", 1)).delete::<Account>(&akey("a"));
    assert_eq!(
        tx.commit().await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // 40 puts of new names need 40 listing rows + a parent check each: over 100 actions.
    let mut tx = tree.transaction();
    for i in 0..40 {
        tx.put(&account(&format!("{i}"), 0));
        tx.put(&link(&format!("{i}"), "x"));
    }
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("over DynamoDB's 100"), "{err}");

    let mut tx = tree.transaction();
    tx.idempotency_token("x".repeat(37)).put(&account("a", 1));
    assert_eq!(
        tx.commit().await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    let mut tx = tree.transaction();
    tx.patch(Patch::<Account>::new(&akey("a")));
    assert_eq!(
        tx.commit().await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    let mut tx = tree.transaction();
    tx.put(&account("", 1));
    assert_eq!(
        tx.commit().await.unwrap_err().kind(),
        ErrorKind::InvalidPath
    );

    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn idempotency_token_applies_once() {
    let (table, tree) = setup().await;
    let accounts = tree.repo::<Account>();
    accounts.put(&account("a", 0)).await.unwrap();
    let f = Account::FIELDS;
    let tx = || {
        let mut tx = tree.transaction();
        tx.idempotency_token("req-1")
            .patch(Patch::new(&akey("a")).add(f.balance, 5))
            .put(&link("a", "x"));
        tx
    };
    tx().commit().await.unwrap();
    tx().commit().await.unwrap();
    assert_eq!(accounts.get(&akey("a")).await.unwrap().unwrap().balance, 5);

    // Other actions under the same token: DynamoDB's mismatch error.
    let mut other = tree.transaction();
    other
        .idempotency_token("req-1")
        .patch(Patch::new(&akey("a")).add(f.balance, 6));
    let err = other.commit().await.unwrap_err();
    assert_eq!(
        err.service_code(),
        Some("IdempotentParameterMismatchException"),
        "{err:?}"
    );
    let _ = table;
}

/// The table's rows but its settings row (written by `create_table` for the index, and kept).
fn tree_rows(table: &FakeTable) -> Vec<dynatree::storage::Item> {
    let settings = dynatree::storage::TableSettings::key('¦');
    table
        .rows()
        .into_iter()
        .filter(|r| {
            !(r.get_s("Key") == Some(settings.hash.as_str())
                && r.get_s("Child") == Some(settings.range.as_str()))
        })
        .collect()
}

#[tokio::test]
async fn transaction_delete_prunes_listing_rows() {
    let (table, tree) = setup().await;
    tree.repo::<Link>().put(&link("a", "x")).await.unwrap();
    let mut tx = tree.transaction();
    tx.delete::<Link>(&link("a", "x").key());
    tx.commit().await.unwrap();
    // Nothing left: the links directory and the account's name are pruned.
    assert!(tree_rows(&table).is_empty(), "{:?}", table.rows());
}

#[tokio::test]
async fn transaction_costs_one_request_with_known_parents() {
    let (table, tree) = setup().await;
    let accounts = tree.repo::<Account>();
    accounts.put(&account("a", 0)).await.unwrap();
    tree.repo::<Link>().put(&link("a", "x")).await.unwrap();
    table.reset_metrics();
    let mut tx = tree.transaction();
    tx.put(&link("a", "y"))
        .put(&link("a", "z"))
        .patch(Patch::new(&akey("a")).add(Account::FIELDS.balance, 1));
    tx.commit().await.unwrap();
    assert_eq!(table.metrics().requests("TransactWriteItems"), 1);
    assert_eq!(table.metrics().total_requests(), 1);
}

#[tokio::test]
async fn put_if_delete_if_patch() {
    let (table, tree) = setup().await;
    let accounts = tree.repo::<Account>();
    let f = Account::FIELDS;
    let a = account("a", 10);

    // Nothing stored: a field condition does not hold; `Cond::not_exists` does.
    assert_eq!(
        accounts
            .put_if(&a, f.balance.gt(0))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::ConditionFailed
    );
    accounts.put_if(&a, Cond::not_exists()).await.unwrap();
    accounts
        .put_if(
            &account("a", 20),
            f.balance.between(5, 15) & f.nick.eq(None),
        )
        .await
        .unwrap();

    // Patches: set, append, remove, add; the version bumps; key fields cannot be named.
    table.reset_metrics();
    accounts
        .patch(
            Patch::new(&akey("a"))
                .set(f.nick, "ace")
                .append(f.tags, ["x", "y"])
                .set(f.name, String::from("A")),
        )
        .await
        .unwrap();
    // One UpdateItem (conditional on the value being there and not held by a move).
    assert_eq!(table.metrics().requests("UpdateItem"), 1);
    assert_eq!(table.metrics().total_requests(), 1);
    let got = accounts.get(&akey("a")).await.unwrap().unwrap();
    assert_eq!(got.nick.as_deref(), Some("ace"));
    assert_eq!(got.tags, ["x", "y"]);
    assert_eq!(got.name, "A");
    assert_eq!(got.version, 2);
    accounts
        .patch(
            Patch::new(&akey("a"))
                .remove(f.nick)
                .when(f.tags.contains("x")),
        )
        .await
        .unwrap();
    assert_eq!(accounts.get(&akey("a")).await.unwrap().unwrap().nick, None);

    // A failing patch condition vs nothing to patch.
    let err = accounts
        .patch(
            Patch::new(&akey("a"))
                .add(f.balance, 1)
                .when(f.balance.lt(0)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConditionFailed);
    let err = accounts
        .patch(Patch::new(&akey("nobody")).add(f.balance, 1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(accounts.get(&akey("nobody")).await.unwrap().is_none());

    // A patch changing one field twice is refused before sending.
    table.reset_metrics();
    let err = accounts
        .patch(Patch::new(&akey("a")).add(f.balance, 1).set(f.balance, 3))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(table.metrics().total_requests(), 0);

    // delete_if.
    assert_eq!(
        accounts
            .delete_if(&akey("a"), f.balance.gt(100))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::ConditionFailed
    );
    accounts
        .delete_if(&akey("a"), f.name.begins_with("A"))
        .await
        .unwrap();
    assert!(accounts.get(&akey("a")).await.unwrap().is_none());
    assert!(tree_rows(&table).is_empty(), "{:?}", table.rows());
}

#[tokio::test]
async fn patch_never_touches_a_link() {
    let (_table, tree) = setup().await;
    tree.repo::<Account>().put(&account("a", 1)).await.unwrap();
    tree.put_link(["Accounts", "l"], ["Accounts", "a"])
        .await
        .unwrap();
    let err = tree
        .repo::<Account>()
        .patch(Patch::new(&akey("l")).add(Account::FIELDS.balance, 1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(
        tree.read_link(["Accounts", "l"]).await.unwrap().to_string(),
        "/Accounts/a"
    );
}

#[tokio::test]
async fn expired_values_are_not_read_and_are_swept() {
    let (table, tree) = setup().await;
    let links = tree.repo::<Link>();
    let old = Link {
        until: Some(1),
        ..link("a", "old")
    };
    let new = Link {
        until: Some(4_000_000_000),
        ..link("a", "new")
    };
    links
        .put_all(&[old.clone(), new.clone(), link("a", "forever")])
        .await
        .unwrap();
    assert_eq!(
        dynatree::storage::Storage::ttl_attribute(&table)
            .await
            .unwrap()
            .as_deref(),
        Some("¦ttl")
    );

    assert_eq!(links.get(&old.key()).await.unwrap(), None);
    assert_eq!(links.get(&new.key()).await.unwrap(), Some(new.clone()));
    let many = links.get_many(&[old.key(), new.key()]).await.unwrap();
    assert_eq!(many, [None, Some(new.clone())]);
    let by_target: Vec<Link> = links
        .index(Link::index_by_target("https://old"))
        .items()
        .try_collect()
        .await
        .unwrap();
    assert!(by_target.is_empty());
    let listed: Vec<Link> = links
        .query(&old.key().collection())
        .items()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");

    let below: Vec<dynatree::Descendant> = tree
        .descendants(["Accounts"])
        .items()
        .try_collect()
        .await
        .unwrap();
    let paths: Vec<String> = below.iter().map(|d| d.path.to_string()).collect();
    assert_eq!(
        paths,
        ["/Accounts/a/Links/forever", "/Accounts/a/Links/new"]
    );

    // DynamoDB deletes the expired object row; the sweep removes the name left behind.
    assert_eq!(table.expire_ttl(2), 1);
    assert_eq!(tree.sweep_expired(["Accounts"]).await.unwrap(), 1);
    let names: Vec<String> = tree
        .list(["Accounts", "a", "Links"])
        .try_collect()
        .await
        .unwrap();
    assert_eq!(names, ["forever", "new"]);
}

#[tokio::test]
async fn write_api_through_a_scope() {
    let (_table, tree) = setup().await;
    let tenant = tree.scope(["Tenants", "t1"]).unwrap();
    let accounts = tenant.repo::<Account>();
    let mut tx = tenant.transaction();
    tx.put(&account("a", 1)).put(&link("a", "x"));
    tx.commit().await.unwrap();
    accounts
        .patch(Patch::new(&akey("a")).add(Account::FIELDS.balance, 1))
        .await
        .unwrap();
    accounts
        .put_if(&account("a", 5), Account::FIELDS.balance.eq(2))
        .await
        .unwrap();
    // Stored under the scope's root, invisible to the unscoped repository at the same key.
    let inside: Option<Account> = tree.get(["Tenants", "t1", "Accounts", "a"]).await.unwrap();
    assert_eq!(inside.unwrap().balance, 5);
    assert!(
        tree.repo::<Account>()
            .get(&akey("a"))
            .await
            .unwrap()
            .is_none()
    );
    accounts
        .delete_if(&akey("a"), Account::FIELDS.balance.eq(5))
        .await
        .unwrap();
    tenant
        .repo::<Link>()
        .delete_if(&link("a", "x").key(), Cond::exists())
        .await
        .unwrap();
    // Everything under the scope is pruned; the scope's root row stays.
    let names: Vec<String> = tree.list(["Tenants"]).try_collect().await.unwrap();
    assert_eq!(names, ["t1"]);
    let inside: Vec<String> = tenant
        .list(dynatree::Path::root())
        .try_collect()
        .await
        .unwrap();
    assert!(inside.is_empty(), "{inside:?}");
}

/// What each write of the write API costs, on the metered fake (deterministic; DynamoDB's
/// published rule: a transaction bills 2 write units per KB per item, condition checks
/// included). Figures in BENCHMARKS.md.
#[tokio::test]
async fn write_api_costs() {
    let (table, tree) = setup().await;
    let accounts = tree.repo::<Account>();
    let links = tree.repo::<Link>();
    accounts.put(&account("a", 0)).await.unwrap();
    links.put(&link("a", "x")).await.unwrap();
    links.put(&link("a", "y")).await.unwrap();
    let f = Account::FIELDS;
    let mut rows = Vec::new();
    let mut measure = |what: &str, table: &FakeTable| {
        let m = table.metrics();
        rows.push((
            what.to_owned(),
            m.total_requests(),
            m.requests("TransactWriteItems"),
            m.write_units(),
            m.read_units(),
        ));
        table.reset_metrics();
    };

    table.reset_metrics();
    accounts
        .patch(Patch::new(&akey("a")).add(f.balance, 1))
        .await
        .unwrap();
    measure("patch", &table);
    accounts
        .put_if(&account("a", 5), f.balance.eq(1))
        .await
        .unwrap();
    measure("put_if (existing)", &table);
    let mut tx = tree.transaction();
    tx.put(&link("a", "p"))
        .put(&link("a", "q"))
        .patch(Patch::new(&akey("a")).add(f.balance, 1));
    tx.commit().await.unwrap();
    measure("transaction: 2 new names + 1 patch", &table);
    links
        .delete_if(&link("a", "p").key(), Link::FIELDS.hits.eq(0))
        .await
        .unwrap();
    measure("delete_if (siblings remain)", &table);
    let expected: Vec<(&str, u64, u64, f64)> = vec![
        // One UpdateItem: the value's existence (so its listing row's), no hold, the patch's
        // condition.
        ("patch", 1, 0, 1.0),
        // An overwrite of a value this tree wrote: one PutItem, the caller's condition and
        // the object's existence (and no hold) in its condition.
        ("put_if (existing)", 1, 0, 1.0),
        // 3 actions + 4 guards (2 new listing rows, their parent's check, the patched
        // value's listing row), 2 units each.
        ("transaction: 2 new names + 1 patch", 1, 1, 14.0),
        // The transaction (delete + lock check), then the removal of the emptied listing row
        // (children query, mark, children query, object read, delete) and one look at the
        // parent, which still has children.
        ("delete_if (siblings remain)", 7, 1, 6.0),
    ];
    for ((what, requests, tx, wcu, _), (ew, er, et, eu)) in rows.iter().zip(&expected) {
        assert_eq!(what, ew);
        assert_eq!((*requests, *tx, *wcu), (*er, *et, *eu), "{what}");
    }
}
