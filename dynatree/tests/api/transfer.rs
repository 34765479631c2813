//! Export and import (`dynatree::transfer`): round trips of every attribute type, links,
//! expiry and awkward names; idempotent re-imports; resumption after a failure part-way; bad
//! records refused with nothing of their batch written; subtrees under another prefix and
//! through scopes; exact request counts on the metered fake.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dynatree::transfer::{BadRecord, Imported, Record};
use dynatree::{ErrorKind, Hierarchical, Path, Tree, storage::Item, storage::Value};
use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Sessions/{id}")]
struct Session {
    id: String,
    user: String,
    #[dynatree(ttl)]
    expires: u64,
}

/// Far in the future (2096): never expired while the tests run.
const LATER: u64 = 4_000_000_000;

fn p<const N: usize>(c: [&str; N]) -> Path {
    Path::new(c).expect("path")
}

async fn tree_on(table: &FakeTable) -> Tree {
    let tree = Tree::builder(table.clone())
        .time_to_live(true)
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    tree
}

async fn fresh() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = tree_on(&table).await;
    (table, tree)
}

async fn export_all(tree: &Tree) -> Vec<Record> {
    tree.export(Path::root())
        .try_collect()
        .await
        .expect("export")
}

fn lines(records: &[Record]) -> Vec<String> {
    records.iter().map(Record::to_json_line).collect()
}

fn stream_of(
    lines: &[String],
) -> impl futures::Stream<Item = dynatree::Result<Record>> + Send + '_ {
    futures::stream::iter(lines.iter().map(|l| Record::from_json_line(l)))
}

/// An item with every DynamoDB type, numbers in DynamoDB's canonical form (as stored).
fn every_type() -> Item {
    let mut item = Item::new();
    item.insert(
        "s",
        Value::S("héllo, \"world\"\n¦ inside a value is fine".into()),
    );
    item.insert("n", Value::N("-1.5".into()));
    item.insert(
        "big",
        Value::N("12345678901234567890123456789012345678".into()),
    );
    item.insert("tiny", Value::N("0.0000000000000000000000000001".into()));
    item.insert("b", Value::B(vec![0, 1, 2, 254, 255]));
    item.insert("yes", Value::Bool(true));
    item.insert("no", Value::Bool(false));
    item.insert("nothing", Value::Null);
    item.insert(
        "l",
        Value::L(vec![
            Value::S("a".into()),
            Value::N("7".into()),
            Value::L(vec![]),
            Value::Null,
        ]),
    );
    item.insert(
        "m",
        Value::M(BTreeMap::from([
            ("inner".to_owned(), Value::M(BTreeMap::new())),
            ("k".to_owned(), Value::Bs(vec![vec![9], vec![8, 7]])),
        ])),
    );
    item.insert("ss", Value::Ss(vec!["x".into(), "y".into()]));
    item.insert("ns", Value::Ns(vec!["1".into(), "2.25".into()]));
    item.insert("bs", Value::Bs(vec![vec![1], vec![2, 3]]));
    item.insert("empty string", Value::S(String::new()));
    item
}

fn object(path: Path, item: Item, expires: Option<u64>) -> Record {
    Record::Object {
        path,
        item,
        expires,
    }
}

/// A source tree: objects of every type (written by an import of built records), typed puts,
/// a typed value with an expiry, links, nested paths, names with `/`, `%` and spaces; plus an
/// expired session, which no read returns and no export holds.
async fn source() -> (FakeTable, Tree) {
    let (table, tree) = fresh().await;
    let built = vec![
        object(p(["Types", "all"]), every_type(), None),
        object(p(["Types", "all", "below"]), every_type(), Some(LATER)),
        object(p(["Files", "a/b", "100%", "c d"]), every_type(), None),
        object(p(["Empty"]), Item::new(), None),
    ];
    tree.import(futures::stream::iter(built.into_iter().map(Ok)))
        .run()
        .await
        .expect("import");
    tree.put(["Accounts", "1"], &V { v: 1 }).await.unwrap();
    tree.put(["Accounts", "1", "Links", "x"], &V { v: 2 })
        .await
        .unwrap();
    tree.put(["Accounts", "2"], &V { v: 3 }).await.unwrap();
    tree.put_link(["ByEmail", "ann@example.com"], ["Accounts", "1"])
        .await
        .unwrap();
    tree.put_link(["Files", "a/b", "link%"], ["Files", "a/b", "100%", "c d"])
        .await
        .unwrap();
    let sessions = tree.repo::<Session>();
    sessions
        .put(&Session {
            id: "s1".into(),
            user: "ann".into(),
            expires: LATER,
        })
        .await
        .unwrap();
    sessions
        .put(&Session {
            id: "old".into(),
            user: "bob".into(),
            expires: 1_000,
        })
        .await
        .unwrap();
    (table, tree)
}

/// The table's rows, `Key`/`Child` first, for exact comparisons of two tables.
fn rows(table: &FakeTable) -> Vec<String> {
    table.rows().iter().map(|r| format!("{r:?}")).collect()
}

#[tokio::test]
async fn round_trip_keeps_every_type_link_expiry_and_name() {
    let (_, src) = source().await;
    let exported = export_all(&src).await;
    let text = lines(&exported);
    let paths: Vec<String> = exported.iter().map(|r| r.path().escaped()).collect();
    assert_eq!(
        paths,
        [
            "/Accounts/1",
            "/Accounts/1/Links/x",
            "/Accounts/2",
            "/ByEmail/ann@example.com",
            "/Empty",
            "/Files/a%2Fb/100%25/c d",
            "/Files/a%2Fb/link%25",
            "/Sessions/s1",
            "/Types/all",
            "/Types/all/below",
        ],
        "depth first, each before its descendants; the expired session left out"
    );
    assert_eq!(
        text[3],
        r#"{"path":"/ByEmail/ann@example.com","link":"/Accounts/1"}"#
    );
    assert_eq!(
        text[7],
        format!(
            r#"{{"path":"/Sessions/s1","item":{{"expires":{{"N":"{LATER}"}},"id":{{"S":"s1"}},"user":{{"S":"ann"}}}},"expires":{LATER}}}"#
        )
    );
    assert_eq!(exported[8], object(p(["Types", "all"]), every_type(), None));
    assert_eq!(
        exported[9],
        object(p(["Types", "all", "below"]), every_type(), Some(LATER))
    );

    // Into another table, through the text form.
    let (copy_table, copy) = fresh().await;
    let done = copy.import(stream_of(&text)).run().await.unwrap();
    assert_eq!((done.records(), done.objects(), done.links()), (10, 8, 2));
    assert_eq!(lines(&export_all(&copy).await), text);
    // Read back as the application sees it.
    assert_eq!(
        copy.get(["ByEmail", "ann@example.com"]).await.unwrap(),
        Some(V { v: 1 })
    );
    let session = copy
        .repo::<Session>()
        .get(&SessionKey { id: "s1".into() })
        .await
        .unwrap();
    assert_eq!(session.map(|s| s.expires), Some(LATER));
    // The expiry is DynamoDB's time to live again: the attribute, not only the field.
    let row = copy_table
        .rows()
        .into_iter()
        .find(|r| r.get_s("Key") == Some("¦Types¦all¦below"))
        .expect("row");
    assert_eq!(row.get("¦ttl"), Some(&Value::N(LATER.to_string())));
    // Every listing row is there: the copy lists like the source.
    for dir in [
        p([]),
        p(["Files", "a/b"]),
        p(["Accounts", "1"]),
        p(["Types", "all"]),
    ] {
        let a: Vec<String> = src.list(dir.clone()).try_collect().await.unwrap();
        let b: Vec<String> = copy.list(dir.clone()).try_collect().await.unwrap();
        assert_eq!(a, b, "{dir}");
    }
}

#[tokio::test]
async fn a_second_import_changes_nothing() {
    let (_, src) = source().await;
    let text = lines(&export_all(&src).await);
    let (table, copy) = fresh().await;
    copy.import(stream_of(&text)).run().await.unwrap();
    let once = rows(&table);
    // Again, by this process (warm cache) and by another (a new handle, cold cache).
    copy.import(stream_of(&text)).run().await.unwrap();
    assert_eq!(rows(&table), once);
    let other = tree_on(&table).await;
    other.import(stream_of(&text)).batch(3).run().await.unwrap();
    assert_eq!(rows(&table), once);
}

#[tokio::test]
async fn an_interrupted_import_resumes_from_its_last_progress() {
    let records: Vec<String> = (0..250)
        .map(|i| {
            let rec = object(
                p(["Data", &format!("g{}", i % 7), &format!("{i:04}")]),
                every_type(),
                None,
            );
            rec.to_json_line()
        })
        .chain([Record::Link {
            path: p(["Latest"]),
            target: p(["Data", "g0", "0000"]),
        }
        .to_json_line()])
        .collect();

    // What an uninterrupted import leaves.
    let (clean_table, clean) = fresh().await;
    clean
        .import(stream_of(&records))
        .batch(120)
        .run()
        .await
        .unwrap();
    let expected = rows(&clean_table);

    // Batches of 120 records: three transactions each (and one more for the first batch's
    // ancestors), so some failures fall in the middle of a batch. `nth` counts from 0.
    for nth in 0..8 {
        let (table, tree) = fresh().await;
        // The nth transaction fails: part of a batch may be written.
        table.inject_rule(
            FaultRule::new(Fault::Fail)
                .operation(Op::TransactWriteItems)
                .nth(nth),
        );
        let checkpoint = Arc::new(Mutex::new(0u64));
        let saved = Arc::clone(&checkpoint);
        let err = tree
            .import(stream_of(&records))
            .batch(120)
            .on_progress(move |p: &Imported| *saved.lock().unwrap() = p.committed())
            .run()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Backend, "nth {nth}");
        assert!(BadRecord::of(&err).is_none(), "not a bad record: {err}");
        let resume_at = *checkpoint.lock().unwrap();
        assert_eq!(table.fired().len(), 1, "nth {nth}");
        assert_eq!(resume_at % 120, 0, "whole batches are reported");
        table.clear_faults();
        // Another process resumes from the checkpoint.
        let again = tree_on(&table).await;
        let done = again
            .import(stream_of(&records))
            .batch(120)
            .skip(resume_at)
            .run()
            .await
            .unwrap();
        assert_eq!(done.skipped(), resume_at);
        assert_eq!(done.committed(), 251);
        assert_eq!(rows(&table), expected, "nth {nth}, resumed at {resume_at}");
    }
}

#[tokio::test]
async fn bad_records_are_refused_and_nothing_of_their_batch_is_written() {
    let good = |i: usize| format!(r#"{{"path":"/ok/{i}","item":{{"v":{{"N":"{i}"}}}}}}"#);
    let big = "x".repeat(410_000);
    let cases: Vec<(String, ErrorKind)> = vec![
        (
            r#"{"path":"/a¦b","item":{}}"#.into(),
            ErrorKind::InvalidPath,
        ),
        (r#"{"path":"/","item":{}}"#.into(), ErrorKind::InvalidPath),
        (
            r#"{"path":"/a","item":{"Key":{"S":"x"}}}"#.into(),
            ErrorKind::InvalidAttribute,
        ),
        (
            r#"{"path":"/a","item":{"¦ix":{"S":"x"}}}"#.into(),
            ErrorKind::InvalidAttribute,
        ),
        (
            r#"{"path":"/a","item":{"":{"S":"x"}}}"#.into(),
            ErrorKind::InvalidAttribute,
        ),
        (
            r#"{"path":"/a","item":{"n":{"N":"NaN"}}}"#.into(),
            ErrorKind::InvalidValue,
        ),
        (
            r#"{"path":"/a","item":{"s":{"SS":[]}}}"#.into(),
            ErrorKind::InvalidValue,
        ),
        (
            r#"{"path":"/a","item":{"s":{"SS":["x","x"]}}}"#.into(),
            ErrorKind::InvalidValue,
        ),
        (
            format!(r#"{{"path":"/a","item":{{"s":{{"S":"{big}"}}}}}}"#),
            ErrorKind::ItemTooLarge,
        ),
        (
            format!(r#"{{"path":"/{}","item":{{}}}}"#, "k".repeat(1025)),
            ErrorKind::InvalidPath,
        ),
        (
            r#"{"path":"/l","link":"/t¦x"}"#.into(),
            ErrorKind::InvalidPath,
        ),
        (r#"{"path":"/a","item":{"#.into(), ErrorKind::Serialization),
        (
            r#"{"path":"/a","object":{}}"#.into(),
            ErrorKind::Serialization,
        ),
    ];
    for (bad, kind) in cases {
        let (table, tree) = fresh().await;
        // Batches of 4: records 1-4 are written, then the batch of 5, 6 and the bad 7 is not.
        let mut input: Vec<String> = (1..=6).map(good).collect();
        input.push(bad.clone());
        input.push(good(8));
        let progress = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&progress);
        let err = tree
            .import(stream_of(&input))
            .batch(4)
            .on_progress(move |p: &Imported| seen.lock().unwrap().push(p.committed()))
            .run()
            .await
            .unwrap_err();
        let short = &bad[..bad.len().min(60)];
        assert_eq!(err.kind(), kind, "{short}: {err}");
        let record = BadRecord::of(&err).expect("names the record");
        assert_eq!(record.number(), 7, "{short}");
        assert!(err.to_string().contains("record 7"), "{err}");
        assert_eq!(*progress.lock().unwrap(), [4], "{short}");
        let names: Vec<String> = tree.list(["ok"]).try_collect().await.unwrap();
        assert_eq!(names, ["1", "2", "3", "4"], "{short}");
        assert!(
            table.rows().iter().all(|r| r.get_s("Child") != Some("5")),
            "{short}"
        );
    }
}

#[tokio::test]
async fn a_bad_record_in_the_first_batch_writes_nothing() {
    let (table, tree) = fresh().await;
    let before = rows(&table);
    let input = vec![
        r#"{"path":"/a","item":{}}"#.to_owned(),
        r#"{"path":"/b","item":{"Child":{"S":"x"}}}"#.to_owned(),
    ];
    let err = tree.import(stream_of(&input)).run().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidAttribute);
    assert_eq!(
        err.to_string(),
        "invalid attribute name: record 2 at /b: `Child` is the table's key attribute"
    );
    assert_eq!(
        BadRecord::of(&err).and_then(BadRecord::path),
        Some(&p(["b"]))
    );
    assert_eq!(rows(&table), before);
    assert_eq!(table.metrics().requests("TransactWriteItems"), 0);
}

#[tokio::test]
async fn a_subtree_goes_under_another_prefix() {
    let (_, src) = source().await;
    // `/Accounts/1` exported, imported under `/Copy`: at `/Copy/Accounts/1/...`.
    let text = lines(
        &src.export(["Accounts", "1"])
            .try_collect::<Vec<_>>()
            .await
            .unwrap(),
    );
    assert_eq!(text.len(), 2);
    let (_, dst) = fresh().await;
    dst.put_link(
        ["Copy", "Accounts", "1", "Links", "home"],
        ["Copy", "Accounts", "1"],
    )
    .await
    .unwrap();
    let link_line = Record::Link {
        path: p(["Accounts", "1", "Links", "home"]),
        target: p(["Accounts", "1"]),
    }
    .to_json_line();
    let mut input = text.clone();
    input.push(link_line);
    dst.import(stream_of(&input))
        .under(["Copy"])
        .run()
        .await
        .unwrap();
    assert_eq!(
        dst.get(["Copy", "Accounts", "1", "Links", "x"])
            .await
            .unwrap(),
        Some(V { v: 2 })
    );
    // A link's target is under the prefix too: links within the export stay within the copy.
    assert_eq!(
        dst.read_link(["Copy", "Accounts", "1", "Links", "home"])
            .await
            .unwrap(),
        p(["Copy", "Accounts", "1"])
    );
    let copied = lines(
        &dst.scope(["Copy"])
            .unwrap()
            .export(["Accounts", "1"])
            .try_collect::<Vec<_>>()
            .await
            .unwrap(),
    );
    assert_eq!(copied[..1], text[..1]);
    assert_eq!(copied.len(), 3);

    // Through a scope: the export's paths are the scope's, so they land right under the prefix.
    let files = src.scope(["Files"]).unwrap();
    let text = lines(&export_all(&files).await);
    assert_eq!(
        text[1],
        r#"{"path":"/a%2Fb/link%25","link":"/a%2Fb/100%25/c d"}"#
    );
    let (_, dst) = fresh().await;
    dst.import(stream_of(&text))
        .under(["Backup", "Files"])
        .run()
        .await
        .unwrap();
    assert_eq!(
        dst.read_link(["Backup", "Files", "a/b", "link%"])
            .await
            .unwrap(),
        p(["Backup", "Files", "a/b", "100%", "c d"])
    );
    // And an import through a scope writes inside it.
    let scope = dst.scope(["Tenants", "t1"]).unwrap();
    scope.import(stream_of(&text)).run().await.unwrap();
    assert_eq!(lines(&export_all(&scope).await), text);
    let mirrored = lines(
        &dst.export(["Tenants", "t1"])
            .try_collect::<Vec<_>>()
            .await
            .unwrap(),
    );
    assert_eq!(
        mirrored[1],
        r#"{"path":"/Tenants/t1/a%2Fb/link%25","link":"/Tenants/t1/a%2Fb/100%25/c d"}"#
    );
}

#[tokio::test]
async fn a_link_out_of_a_scope_cannot_be_exported_through_it() {
    let (_, tree) = fresh().await;
    tree.put(["t", "a"], &V { v: 1 }).await.unwrap();
    tree.put_link(["t", "l"], ["elsewhere"]).await.unwrap();
    let err = tree
        .scope(["t"])
        .unwrap()
        .export(Path::root())
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfScope);
    // The whole tree exports it.
    assert_eq!(export_all(&tree).await.len(), 2);
}

#[tokio::test]
async fn exporting_nothing_and_invalid_paths() {
    let (_, tree) = fresh().await;
    assert!(export_all(&tree).await.is_empty());
    let none: Vec<Record> = tree.export(["missing"]).try_collect().await.unwrap();
    assert!(none.is_empty());
    let err = tree
        .export(["a¦b"])
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath);
    let err = tree
        .import(futures::stream::empty())
        .under(["x", ""])
        .run()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPath);
    let done = tree.import(futures::stream::empty()).run().await.unwrap();
    assert_eq!(done, Imported::default());
}

/// 250 objects under one parent, imported into an empty table in one batch: the 251 listing
/// rows read in 3 BatchGetItem, the parent's listing row created in one transaction, the
/// objects in 6 (49 objects, each with its listing row, plus the parent's check: 99 actions).
#[tokio::test]
async fn request_counts_of_a_small_import() {
    let input: Vec<String> = (0..250)
        .map(|i| format!(r#"{{"path":"/Parent/{i:03}","item":{{"v":{{"N":"{i}"}}}}}}"#))
        .collect();
    let (table, tree) = fresh().await;
    table.reset_metrics();
    let done = tree.import(stream_of(&input)).run().await.unwrap();
    assert_eq!(done.batches(), 1);
    let m = table.metrics();
    assert_eq!(m.requests("BatchGetItem"), 3, "{m:?}");
    assert_eq!(m.requests("TransactWriteItems"), 7, "{m:?}");
    assert_eq!(m.total_requests(), 10, "{m:?}");

    // Again, by the same handle: every listing row is known to exist, nothing is read; each
    // object is a put and the check of its listing row (50 per transaction).
    table.reset_metrics();
    tree.import(stream_of(&input)).run().await.unwrap();
    let m = table.metrics();
    assert_eq!(m.requests("BatchGetItem"), 0, "{m:?}");
    assert_eq!(m.requests("TransactWriteItems"), 5, "{m:?}");
    assert_eq!(m.total_requests(), 5, "{m:?}");

    // The export: one GetItem for `/Parent`, then the walk lists it and each child (251
    // Queries) and reads the 250 objects in 3 BatchGetItem.
    table.reset_metrics();
    let out: Vec<Record> = tree.export(["Parent"]).try_collect().await.unwrap();
    assert_eq!(out.len(), 250);
    let m = table.metrics();
    assert_eq!(m.requests("GetItem"), 1, "{m:?}");
    assert_eq!(m.requests("BatchGetItem"), 3, "{m:?}");
    assert_eq!(m.requests("Query"), 251, "{m:?}");
}

/// The export stream and the import future are `Send + 'static`: a command line runs them in
/// spawned tasks (a progress bar beside them).
#[tokio::test]
async fn export_and_import_run_in_spawned_tasks() {
    let (_, src) = source().await;
    let export = tokio::spawn(
        src.export(Path::root())
            .map_ok(|r| r.to_json_line())
            .try_collect::<Vec<String>>(),
    );
    let text = export.await.unwrap().unwrap();
    let (_, dst) = fresh().await;
    let owned = futures::stream::iter(text.clone().into_iter().map(|l| Record::from_json_line(&l)));
    let progress = Arc::new(Mutex::new(0u64));
    let seen = Arc::clone(&progress);
    let import = tokio::spawn(
        dst.import(owned)
            .batch(4)
            .on_progress(move |p: &Imported| *seen.lock().unwrap() = p.committed())
            .run(),
    );
    let done = import.await.unwrap().unwrap();
    assert_eq!(done.committed(), text.len() as u64);
    assert_eq!(*progress.lock().unwrap(), text.len() as u64);
    assert_eq!(lines(&export_all(&dst).await), text);
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

/// An import into a tree that knows the types with secondary indexes writes their index
/// attributes: the imported values are found by index queries, and the check is healthy.
#[tokio::test]
async fn an_import_indexes_registered_types() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .indexes_of::<User>()
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    let mut item = Item::new();
    item.insert("id", Value::S("u1".into()));
    item.insert("email", Value::S("ann@example.com".into()));
    let records = vec![object(p(["Users", "u1"]), item, None).to_json_line()];
    tree.import(stream_of(&records))
        .run()
        .await
        .expect("import");
    let users = tree.repo::<User>();
    let found: Vec<User> = users
        .index(User::index_by_email("ann@example.com"))
        .items()
        .try_collect()
        .await
        .expect("query");
    assert_eq!(
        found,
        [User {
            id: "u1".into(),
            email: "ann@example.com".into()
        }]
    );
    let report = tree.check().run().await.expect("check");
    assert!(report.is_healthy(), "{report}");
}

fn user_record(id: &str, email: &str) -> String {
    let mut item = Item::new();
    item.insert("id", Value::S(id.into()));
    item.insert("email", Value::S(email.into()));
    object(p(["Users", id]), item, None).to_json_line()
}

async fn users_by_email(tree: &Tree, email: &str) -> Vec<String> {
    let found: Vec<User> = tree
        .repo::<User>()
        .index(User::index_by_email(email))
        .items()
        .try_collect()
        .await
        .expect("query");
    let mut ids: Vec<String> = found.into_iter().map(|u| u.id).collect();
    ids.sort();
    ids
}

/// An import through a scope writes the index values the scope's typed writes write (the
/// scope's root in their hash): the scope's index queries find the records, other scopes' and
/// the whole tree's do not, and the check is healthy.
#[tokio::test]
async fn an_import_through_a_scope_indexes_for_the_scope() {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .indexes_of::<User>()
        .build()
        .expect("tree");
    tree.create_table().await.expect("table");
    let email = "ann@example.com";
    let (t1, t2) = (
        tree.scope(["Tenants", "t1"]).unwrap(),
        tree.scope(["Tenants", "t2"]).unwrap(),
    );
    t1.import(stream_of(&[
        user_record("u1", email),
        user_record("u2", email),
    ]))
    .run()
    .await
    .expect("import through t1");
    tree.import(stream_of(&[user_record("w", email)]))
        .run()
        .await
        .expect("import through the whole tree");
    // Under a prefix, through a scope: the template is matched below the scope's root.
    let under = vec![
        object(
            p(["u3"]),
            {
                let mut item = Item::new();
                item.insert("id", Value::S("u3".into()));
                item.insert("email", Value::S(email.into()));
                item
            },
            None,
        )
        .to_json_line(),
    ];
    t2.import(stream_of(&under))
        .under(["Users"])
        .run()
        .await
        .expect("import under a prefix");
    table.settle();
    assert_eq!(users_by_email(&t1, email).await, ["u1", "u2"]);
    assert_eq!(users_by_email(&t2, email).await, ["u3"]);
    assert_eq!(users_by_email(&tree, email).await, ["w"]);
    // What the typed write through the scope stores, attribute for attribute.
    let imported = table
        .rows()
        .into_iter()
        .find(|r| r.get_s("Key") == Some("¦Tenants¦t1¦Users¦u1"))
        .expect("the imported row");
    t1.repo::<User>()
        .put(&User {
            id: "u1".into(),
            email: email.into(),
        })
        .await
        .unwrap();
    let written = table
        .rows()
        .into_iter()
        .find(|r| r.get_s("Key") == Some("¦Tenants¦t1¦Users¦u1"))
        .expect("the written row");
    assert_eq!(imported, written);
    let report = tree.check().run().await.expect("check");
    assert!(report.is_healthy(), "{report}");
}

/// A record whose indexed value holds the reserved character cannot be indexed (typed writes
/// refuse it): an import refuses it as a bad record (`InvalidValue`, named by number and path),
/// with nothing of its batch written, through a scope and through the whole tree.
#[tokio::test]
async fn an_import_refuses_an_index_value_with_the_reserved_character() {
    for scope in [Path::root(), p(["Tenants", "t1"])] {
        let table = FakeTable::new();
        let tree = Tree::builder(table.clone())
            .indexes_of::<User>()
            .build()
            .expect("tree");
        tree.create_table().await.expect("table");
        let into = tree.scope(scope.clone()).unwrap();
        let input = vec![
            user_record("u1", "a@example.com"),
            user_record("u2", "b@example.com"),
            user_record("u3", "c@example.com"),
            user_record("u4", "Users/{id}¦d@example.com"),
            user_record("u5", "e@example.com"),
        ];
        let progress = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&progress);
        let err = into
            .import(stream_of(&input))
            .batch(2)
            .on_progress(move |p: &Imported| seen.lock().unwrap().push(p.committed()))
            .run()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue, "{scope}: {err}");
        let bad = BadRecord::of(&err).expect("names the record");
        assert_eq!(bad.number(), 4, "{scope}");
        assert_eq!(bad.path(), Some(&p(["Users", "u4"])), "{scope}");
        let said = err.to_string();
        assert!(said.contains("record 4 at /Users/u4"), "{said}");
        assert!(said.contains("reserved character"), "{said}");
        assert_eq!(*progress.lock().unwrap(), [2], "{scope}");
        let names: Vec<String> = into.list(["Users"]).try_collect().await.unwrap();
        assert_eq!(names, ["u1", "u2"], "{scope}: nothing of the second batch");
        assert!(
            table
                .rows()
                .iter()
                .all(|r| !matches!(r.get_s("Child"), Some("u3" | "u4"))),
            "{scope}"
        );
    }
}
