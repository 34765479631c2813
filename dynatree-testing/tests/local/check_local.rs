//! The integrity checker against DynamoDB Local: a table corrupted with every class
//! at once (raw writes through the `DynamoDbTable`, as another program or the Go library would
//! make them), checked, repaired and checked again; a segmented check (4 segments) of a few
//! thousand rows that agrees with a 1-segment check; and bookkeeping attributes of the wrong
//! type (`Class::Malformed`, and a link whose target is not a string), planted, checked and
//! repaired on the fake and on DynamoDB Local, which must say and do the same. One test, one
//! server; if DynamoDB Local cannot start, the test fails saying why: it is never skipped.

use std::time::Duration;

use dynatree::check::{Class, Report};
use dynatree::storage::{Key, Storage, WriteRequest, write_all};
use dynatree::{DynamoDbTable, Hierarchical, RetryPolicy, Tree, storage::Item, storage::Value};
use dynatree_testing::{DynamoDbLocal, FakeTable, Fault, FaultRule, Faulty, Op};
use futures::TryStreamExt;

// The value types, raw writes and report helpers of the fake's checker tests.
use crate::common::*;

const LEASE: Duration = Duration::from_millis(500);

fn fast() -> RetryPolicy {
    RetryPolicy::new(8, Duration::from_millis(2), Duration::from_millis(20))
}

/// Every row, sorted by key.
async fn snapshot(tree: &Tree) -> Vec<Item> {
    let mut rows: Vec<Item> = tree.scan().try_collect().await.unwrap();
    rows.sort_by_key(Key::from_item);
    rows
}

#[test]
fn check_and_repair_on_dynamodb_local() {
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => panic!("DynamoDB Local is required for this test: {e}"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        every_class_at_once(&local).await;
        segmented_check_of_thousands_of_rows(&local).await;
        malformed_bookkeeping_agrees_with_the_fake(&local).await;
    });
}

async fn every_class_at_once(local: &DynamoDbLocal) {
    let table = local.fresh_table();
    let build = |storage: Faulty<DynamoDbTable>| {
        Tree::builder(storage)
            .retry_policy(fast())
            .removal_lease(LEASE)
            .path_index(1)
            .denormalized::<Thread>()
            .build()
            .unwrap()
    };
    let faulty = Faulty::new(table.clone());
    let tree = build(faulty.clone());
    tree.create_table().await.expect("create the table");
    for i in 0..5 {
        tree.put(["ok", &format!("n{i}")], &V { v: i })
            .await
            .unwrap();
    }
    // Unreachable (and, written raw, without its path-index attributes).
    raw_put(&table, object_key(&["un", "a", "b"]), &[("v", n(1))]).await;
    // Go Delete of a node with children.
    tree.put(["gd", "b"], &V { v: 1 }).await.unwrap();
    tree.put(["gd", "b", "c"], &V { v: 2 }).await.unwrap();
    go_delete(&table, &["gd", "b"]).await;
    // Go Delete of a leaf: an empty listing row above it.
    tree.put(["el", "f", "g"], &V { v: 1 }).await.unwrap();
    tree.put(["el", "h"], &V { v: 1 }).await.unwrap();
    go_delete(&table, &["el", "f", "g"]).await;
    // Expired mark, lock without intent.
    tree.put(["mk", "n"], &V { v: 1 }).await.unwrap();
    raw_set(&table, listing_key(&["mk", "n"]), "¦deleting", s("5:00ff")).await;
    tree.put(["lk", "k"], &V { v: 1 }).await.unwrap();
    raw_set(
        &table,
        listing_key(&["lk", "k"]),
        "¦moving",
        s("01NOINTENT"),
    )
    .await;
    // Abandoned intent: a move that failed part-way.
    tree.put(["org", "eng", "alice"], &V { v: 1 })
        .await
        .unwrap();
    faulty.inject_rule(
        FaultRule::new(Fault::Fail)
            .operation(Op::TransactWriteItems)
            .nth(1),
    );
    assert!(
        tree.move_subtree(["org", "eng"], ["org", "tech"])
            .await
            .is_err()
    );
    faulty.clear_faults();
    let pending = tree.pending().await.unwrap();
    assert_eq!(pending.len(), 1);
    let intent = format!("¦¦intents|{}", pending[0].id);
    // Dangling link; a cycle (runtime links pointed at each other raw).
    tree.put_link(["dl"], ["nowhere"]).await.unwrap();
    tree.put_link(["cy", "a"], ["ok", "n0"]).await.unwrap();
    tree.put_link(["cy", "b"], ["ok", "n0"]).await.unwrap();
    raw_set(&table, object_key(&["cy", "a"]), "¦", s("¦cy¦b")).await;
    raw_set(&table, object_key(&["cy", "b"]), "¦", s("¦cy¦a")).await;
    // Unparsable rows.
    tree.put(["up"], &V { v: 1 }).await.unwrap();
    raw_put(&table, Key::new("¦up¦", "a¦b"), &[]).await;
    raw_put(&table, Key::new("x", "y"), &[]).await;
    // Expired: typed and raw.
    tree.repo::<Session>()
        .put(&Session {
            id: "old".into(),
            user: "u".into(),
            expires: 1,
        })
        .await
        .unwrap();
    tree.repo::<Session>()
        .put(&Session {
            id: "new".into(),
            user: "u".into(),
            expires: 4_000_000_000,
        })
        .await
        .unwrap();
    go_put(&table, &["ttl", "raw"], &[("v", n(1)), ("¦ttl", n(1000))]).await;
    // Missing index: a Go put and a Go re-put.
    go_put(&table, &["gp", "new"], &[("v", n(5))]).await;
    tree.put(["gp", "old"], &V { v: 6 }).await.unwrap();
    go_put(&table, &["gp", "old"], &[("v", n(60))]).await;
    // Stale copy: the forum renamed by Go.
    tree.repo::<Forum>()
        .put(&Forum {
            forum: "f".into(),
            name: "Rust".into(),
        })
        .await
        .unwrap();
    let thread = Thread {
        forum: "f".into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: String::new(),
    };
    tree.repo::<Thread>().put(&thread).await.unwrap();
    go_put(
        &table,
        &["Forums", "f"],
        &[("forum", s("f")), ("name", s("Rust users"))],
    )
    .await;
    tokio::time::sleep(LEASE * 2).await;

    let want = expect(&[
        (Class::Unreachable, "/un/a/b"),
        (Class::MissingIndex, "/un/a/b"),
        (Class::BrokenClosure, "/gd/b/c"),
        (Class::EmptyListing, "/gd"),
        (Class::EmptyListing, "/el/f"),
        (Class::ExpiredMark, "/mk/n"),
        (Class::AbandonedIntent, intent.as_str()),
        (Class::LockWithoutIntent, "/lk/k"),
        (Class::DanglingLink, "/dl"),
        (Class::LinkCycle, "/cy/a"),
        (Class::LinkCycle, "/cy/b"),
        (Class::Unparsable, "x|y"),
        (Class::Unparsable, "¦up¦|a¦b"),
        (Class::Expired, "/Sessions/old"),
        (Class::Expired, "/ttl/raw"),
        (Class::MissingIndex, "/gp/new"),
        (Class::MissingIndex, "/gp/old"),
        (Class::MissingIndex, "/Forums/f"),
        (Class::StaleCopy, "/Forums/f/Threads/t"),
    ]);
    let fixable: Vec<_> = want
        .iter()
        .filter(|(c, _)| c.repairable())
        .cloned()
        .collect();
    let human: Vec<_> = want
        .iter()
        .filter(|(c, _)| !c.repairable())
        .cloned()
        .collect();

    let report = tree.check().run().await.unwrap();
    assert_eq!(found(&report), want, "{report}");
    let four = tree.check().segments(4).page_size(5).run().await.unwrap();
    assert_eq!(four.violations(), report.violations(), "{four}");
    assert_eq!(four.rows(), report.rows());

    // A dry run writes nothing.
    let before = snapshot(&tree).await;
    let dry = tree.repair(&report).dry_run(true).run().await.unwrap();
    assert_eq!(listed(dry.fixed()), fixable);
    assert_eq!(snapshot(&tree).await, before);

    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(listed(repaired.fixed()), fixable, "{repaired}");
    let left: Vec<_> = repaired.left().iter().map(|(v, _)| v.clone()).collect();
    assert_eq!(listed(&left), human, "{repaired}");
    let again = tree.check().run().await.unwrap();
    assert_eq!(found(&again), human, "{again}");
    // What needs a human stays, and repairing it again writes nothing.
    let before = snapshot(&tree).await;
    let twice = tree.repair(&again).run().await.unwrap();
    assert!(twice.fixed().is_empty(), "{twice}");
    assert_eq!(snapshot(&tree).await, before);

    // The tree reads right.
    assert_eq!(get(&tree, "/un/a/b").await, Some(V { v: 1 }));
    assert_eq!(get(&tree, "/gd/b/c").await, Some(V { v: 2 }));
    assert_eq!(list(&tree, "/gd/b").await, ["c"]);
    assert_eq!(list(&tree, "/el").await, ["h"]);
    assert_eq!(get(&tree, "/org/tech/alice").await, Some(V { v: 1 }));
    assert_eq!(get(&tree, "/org/eng/alice").await, None);
    assert_eq!(get(&tree, "/gp/old").await, Some(V { v: 60 }));
    assert_eq!(list(&tree, "/Sessions").await, ["new"]);
    assert!(tree.pending().await.unwrap().is_empty());
    let t = tree
        .repo::<Thread>()
        .get(&thread.key())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.forum_name, "Rust users");
    tree.put(["lk", "k", "below"], &V { v: 1 }).await.unwrap();
    tree.put(["mk", "n", "below"], &V { v: 1 }).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut gp: Vec<String> = tree
        .descendants(["gp"])
        .items()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.path.escaped())
        .collect();
    gp.sort();
    assert_eq!(gp, ["/gp/new", "/gp/old"]);
    // The humans decide: the cycle and the dangling link go, the unparsable rows too.
    for l in [&["dl"][..], &["cy", "a"], &["cy", "b"]] {
        tree.delete(l).await.unwrap();
    }
    raw_delete(&table, Key::new("¦up¦", "a¦b")).await;
    raw_delete(&table, Key::new("x", "y")).await;
    let last = tree.check().segments(4).run().await.unwrap();
    assert!(last.is_healthy(), "{last}");
}

async fn segmented_check_of_thousands_of_rows(local: &DynamoDbLocal) {
    let table = local.fresh_table();
    let tree = Tree::builder(table.clone())
        .retry_policy(fast())
        .removal_lease(LEASE)
        .build()
        .unwrap();
    tree.create_table().await.expect("create the table");
    // About 3,300 rows as the Go library writes them (listing rows and objects), in batches.
    let mut rows: Vec<WriteRequest> = Vec::new();
    for t in 0..10 {
        rows.push(WriteRequest::Put(
            listing_key(&[&format!("t{t}")]).into_item(),
        ));
        for d in 0..10 {
            let (ts, ds) = (format!("t{t}"), format!("d{d}"));
            rows.push(WriteRequest::Put(listing_key(&[&ts, &ds]).into_item()));
            for o in 0..15 {
                let os = format!("o{o}");
                rows.push(WriteRequest::Put(listing_key(&[&ts, &ds, &os]).into_item()));
                let mut item = object_key(&[&ts, &ds, &os]).into_item();
                item.insert("v", n(o));
                rows.push(WriteRequest::Put(item));
            }
        }
    }
    let total = rows.len() as u64;
    write_all(&table, rows, &fast()).await.unwrap();
    let healthy1 = tree.check().run().await.unwrap();
    assert!(healthy1.is_healthy(), "{healthy1}");
    assert_eq!(healthy1.rows(), total);
    let healthy4 = tree.check().segments(4).run().await.unwrap();
    assert!(healthy4.is_healthy(), "{healthy4}");
    assert_eq!(healthy4.rows(), total);
    assert!(healthy4.pages() >= 4);
    // Some damage spread over the key space.
    for t in [0, 3, 7] {
        let ts = format!("t{t}");
        go_delete(&table, &[&ts, "d1", "o0"]).await; // nothing empty: siblings remain
        raw_delete(&table, listing_key(&[&ts, "d2"])).await; // broken closure x15
        raw_delete(&table, listing_key(&[&ts, "d3", "o4"])).await; // unreachable
    }
    let one = tree.check().run().await.unwrap();
    let four = tree.check().segments(4).run().await.unwrap();
    let small = tree.check().segments(4).page_size(97).run().await.unwrap();
    assert_eq!(one.of(Class::BrokenClosure).count(), 45, "{one}");
    assert_eq!(one.of(Class::Unreachable).count(), 3, "{one}");
    assert_eq!(one.violations().len(), 48, "{one}");
    assert_eq!(four.violations(), one.violations());
    assert_eq!(small.violations(), one.violations());
    assert_eq!(four.rows(), one.rows());
    assert_eq!(small.rows(), one.rows());
    tree.repair(&four).run().await.unwrap();
    let after = tree.check().segments(4).run().await.unwrap();
    assert!(after.is_healthy(), "{after}");
    assert_eq!(list(&tree, "/t3/d2").await.len(), 15);
    assert_eq!(list(&tree, "/t7/d3").await.len(), 15);
}

// ---- malformed bookkeeping: the fake and DynamoDB Local agree ----

/// What a report says, in words that do not depend on the backend: its violations (as
/// displayed: class, path, detail) but those of abandoned intents (a write that failed may
/// leave its propagation's intent, whose id and timing are the run's own).
fn said(report: &Report) -> Vec<String> {
    report
        .violations()
        .iter()
        .filter(|v| v.class() != Class::AbandonedIntent)
        .map(ToString::to_string)
        .collect()
}

/// What a repair says, likewise.
fn done(repaired: &dynatree::check::Repaired) -> Vec<String> {
    let fixed = repaired
        .fixed()
        .iter()
        .filter(|v| v.class() != Class::AbandonedIntent)
        .map(|v| format!("fixed {v}"));
    let left = repaired
        .left()
        .iter()
        .filter(|(v, _)| v.class() != Class::AbandonedIntent)
        .map(|(v, why)| format!("left {v} ({why})"));
    fixed.chain(left).collect()
}

fn outcome<T: std::fmt::Debug>(r: dynatree::Result<T>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("{:?}", e.kind()),
    }
}

/// Every malformed-bookkeeping case of `dynatree/tests/api/check_repair.rs`, on `table`: a removal
/// mark and a lock that are numbers, a lock that is a boolean, a hold that is a number, a lock
/// whose number is the id of a recorded operation, versions that are strings (a source's, a
/// tombstone's, a copy's), and a link whose target is a number. The writes they block, the
/// check, the repair, a second check and repair, and the writes after: as a transcript of
/// lines to compare between backends. Asserts along the way what either backend must do.
async fn malformed_bookkeeping<S: Storage + Clone + 'static>(table: S) -> Vec<String> {
    let build = || {
        Tree::builder(table.clone())
            .retry_policy(fast())
            .removal_lease(LEASE)
            .denormalized::<Thread>()
            .build()
            .unwrap()
    };
    let tree = build();
    tree.create_table().await.expect("create the table");
    let mut out = Vec::new();

    // Marks, locks and holds of the wrong type.
    tree.put(["m", "k"], &V { v: 1 }).await.unwrap();
    tree.put(["l", "k"], &V { v: 2 }).await.unwrap();
    tree.put(["a"], &V { v: 3 }).await.unwrap();
    tree.put(["r", "k"], &V { v: 4 }).await.unwrap();
    raw_set(&table, listing_key(&["m", "k"]), "¦deleting", n(5)).await;
    raw_set(&table, listing_key(&["l", "k"]), "¦moving", n(7)).await;
    raw_set(&table, listing_key(&["a"]), "¦moving", Value::Bool(true)).await;
    raw_set(&table, object_key(&["a"]), "¦held", n(3)).await;
    raw_set(&table, listing_key(&["r", "k"]), "¦moving", n(42)).await;
    // Versions of the wrong type: a source's, a tombstone's, a copy's.
    let forums = tree.repo::<Forum>();
    let threads = tree.repo::<Thread>();
    for f in ["f", "g", "h"] {
        forums.put(&forum(f, "One")).await.unwrap();
        threads.put(&thread(f)).await.unwrap();
    }
    forums.delete(&forum("g", "").key()).await.unwrap();
    let tombstone = Key::new(sc_key(&["Forums", "g"]), "¦sv");
    assert!(table.get_item(&tombstone, true).await.unwrap().is_some());
    raw_set(&table, object_key(&["Forums", "f"]), "¦sv", s("x")).await;
    raw_set(&table, tombstone.clone(), "¦sv", s("x")).await;
    let copy = object_key(&["Forums", "h", "Threads", "t"]);
    raw_set(&table, copy, "¦dv.forum_name", s("x")).await;
    // A link whose target is a number.
    tree.put(["d", "x"], &V { v: 1 }).await.unwrap();
    go_put(&table, &["d", "l"], &[("¦", n(5))]).await;

    // What they block (a tree without a cache of what was written: the guarded paths).
    out.push(format!(
        "put under a numeric mark: {}",
        outcome(build().put(["m", "k", "x"], &V { v: 1 }).await)
    ));
    out.push(format!(
        "put under a numeric lock: {}",
        outcome(build().put(["l", "k", "x"], &V { v: 1 }).await)
    ));
    out.push(format!(
        "put over a numeric hold: {}",
        outcome(build().put(["a"], &V { v: 30 }).await)
    ));
    for f in ["f", "g", "h"] {
        out.push(format!(
            "source {f} written: {}",
            outcome(build().repo::<Forum>().put(&forum(f, "Two")).await)
        ));
    }
    let copied = threads.get(&thread("h").key()).await.unwrap().unwrap();
    out.push(format!("copy of h: {}", copied.forum_name));
    out.push(format!(
        "get of the link: {}",
        outcome(tree.get::<V>(p("/d/l")).await)
    ));
    out.push(format!(
        "read_link of the link: {}",
        outcome(tree.read_link(p("/d/l")).await)
    ));

    let report = tree.check().grace(Duration::ZERO).run().await.unwrap();
    assert!(report.of(Class::AbandonedIntent).count() <= 1, "{report}");
    let first = expect(&[
        (Class::Malformed, "/a"),
        (Class::Malformed, "/a"),
        (Class::Malformed, "/l/k"),
        (Class::Malformed, "/m/k"),
        (Class::Malformed, "/r/k"),
        (Class::Malformed, "/Forums/f"),
        (Class::Malformed, "/Forums/g"),
        (Class::Malformed, "/Forums/h/Threads/t"),
        (Class::StaleCopy, "/Forums/h/Threads/t"),
        (Class::Unparsable, "/d/l"),
    ]);
    let mut seen: Vec<(Class, String)> = found(&report)
        .into_iter()
        .filter(|(c, _)| *c != Class::AbandonedIntent)
        .collect();
    seen.sort();
    assert_eq!(seen, first, "{report}");
    out.extend(said(&report));

    // The lock of 42: an operation of that id is recorded meanwhile, so it is that
    // operation's to release.
    let intent = Key::new("¦¦intents", "42");
    raw_put(&table, intent.clone(), &[("x", s("y"))]).await;
    let repaired = tree.repair(&report).run().await.unwrap();
    assert_eq!(
        listed(
            &repaired
                .left()
                .iter()
                .map(|(v, _)| v.clone())
                .collect::<Vec<_>>()
        ),
        expect(&[(Class::Malformed, "/r/k"), (Class::Unparsable, "/d/l")]),
        "{repaired}"
    );
    out.extend(done(&repaired));
    let again = tree.check().grace(Duration::ZERO).run().await.unwrap();
    out.extend(said(&again));
    raw_delete(&table, intent).await;
    let repaired = tree.repair(&again).run().await.unwrap();
    out.extend(done(&repaired));

    // The writes work again, and the copies follow.
    for (path, v) in [
        (["m", "k", "x"], 1),
        (["l", "k", "x"], 2),
        (["r", "k", "x"], 3),
    ] {
        out.push(format!(
            "put {}: {}",
            path.join("/"),
            outcome(build().put(path, &V { v }).await)
        ));
    }
    out.push(format!(
        "put over the hold: {}",
        outcome(build().put(["a"], &V { v: 30 }).await)
    ));
    for f in ["f", "g", "h"] {
        out.push(format!(
            "source {f} written: {}",
            outcome(build().repo::<Forum>().put(&forum(f, "Three")).await)
        ));
        let copied = threads.get(&thread(f).key()).await.unwrap().unwrap();
        out.push(format!("copy of {f}: {}", copied.forum_name));
    }
    assert!(table.get_item(&tombstone, true).await.unwrap().is_none());
    // The link is a human's decision: deleted.
    tree.delete(["d", "l"]).await.unwrap();
    // A propagation intent a failed write left ends once its lease runs out.
    tokio::time::sleep(LEASE * 2).await;
    let late = tree.check().grace(Duration::ZERO).run().await.unwrap();
    tree.repair(&late).run().await.unwrap();
    let last = tree.check().run().await.unwrap();
    assert!(last.is_healthy(), "{last}");
    out
}

async fn malformed_bookkeeping_agrees_with_the_fake(local: &DynamoDbLocal) {
    let real = malformed_bookkeeping(local.fresh_table()).await;
    let fake = malformed_bookkeeping(FakeTable::new()).await;
    assert_eq!(real, fake, "DynamoDB Local and the fake disagree");
    let blocked: Vec<&str> = real.iter().take(9).map(String::as_str).collect();
    assert_eq!(
        blocked,
        [
            "put under a numeric mark: Conflict",
            "put under a numeric lock: Locked",
            "put over a numeric hold: Locked",
            "source f written: ConditionFailed",
            "source g written: Conflict",
            "source h written: ok ()",
            "copy of h: One",
            "get of the link: Serialization",
            "read_link of the link: NotALink",
        ],
        "{real:#?}"
    );
    assert!(
        real.iter().all(|l| !l.starts_with("put ")
            || l.ends_with("ok ()")
            || blocked.contains(&l.as_str())),
        "{real:#?}"
    );
    assert!(real.contains(&"copy of h: Three".to_owned()), "{real:#?}");
}
