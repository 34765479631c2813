//! What a write may not do, on both backends (`FakeTable`, then Amazon's DynamoDB Local, one
//! server for the file): a patch keeps every number it adds to (the version field too) inside
//! the field's type and takes no NaN or infinity, in its values or its conditions; a patch
//! cannot change a denormalized copy; a transaction may carry DynamoDB's 4 MB (4,194,304
//! bytes, counted as DynamoDB counts them) and no more. Each refusal writes nothing. If
//! DynamoDB Local cannot start, the tests fail saying why: they are never skipped.

use std::future::Future;
use std::sync::OnceLock;

use dynatree::storage::{
    Comparison, Condition, Key, Storage, TRANSACT_MAX_BYTES, TransactAction, UpdateAction,
};
use dynatree::{
    ErrorKind, Hierarchical, Patch, Result, RetryPolicy, Tree, storage::Item, storage::Value,
    update::Cond, update::Field,
};
use dynatree_testing::{DynamoDbLocal, FakeTable};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Counters/{id}")]
struct Counter {
    id: String,
    hits: u64,
    small: i8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    level: Option<u16>,
    score: f64,
    #[dynatree(version)]
    version: u64,
}

fn counter(id: &str) -> Counter {
    Counter {
        id: id.into(),
        hits: 0,
        small: 0,
        level: None,
        score: 0.5,
        version: 1,
    }
}

fn ckey(id: &str) -> CounterKey {
    CounterKey { id: id.into() }
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Blobs/{id}")]
struct Blob {
    id: String,
    data: String,
}

/// A blob whose item is about 399 KB.
fn blob(i: usize) -> Blob {
    Blob {
        id: format!("b{i:02}"),
        data: "x".repeat(399 * 1024),
    }
}

/// The shared DynamoDB Local of this test binary (stopped with it).
fn local() -> &'static DynamoDbLocal {
    static LOCAL: OnceLock<std::result::Result<DynamoDbLocal, String>> = OnceLock::new();
    match LOCAL.get_or_init(|| DynamoDbLocal::start().map_err(|e| e.to_string())) {
        Ok(local) => local,
        Err(e) => panic!("DynamoDB Local is required for this test: {e}"),
    }
}

/// Runs `case` on a fresh `FakeTable`, then on a fresh DynamoDB Local table, each on a runtime
/// of its own (on a thread with room for the SDK's large debug futures).
fn on_both<F, Fut>(case: F)
where
    F: Fn(Tree) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()>,
{
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let run = |tree: Tree| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(async {
                        tree.create_table().await.expect("create the table");
                        case(tree).await;
                    });
            };
            run(tree(FakeTable::new()));
            run(tree(local().fresh_table()));
        })
        .expect("spawn")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
}

fn tree<S: Storage + 'static>(table: S) -> Tree {
    Tree::builder(table)
        .retry_policy(RetryPolicy::new(
            8,
            std::time::Duration::from_millis(1),
            std::time::Duration::from_millis(20),
        ))
        .denormalized::<Thread>()
        .build()
        .expect("a tree")
}

/// Every row of the table, sorted by key.
async fn rows(tree: &Tree) -> Vec<Item> {
    let mut rows: Vec<Item> = tree.scan().try_collect().await.expect("scan");
    rows.sort_by_key(Key::from_item);
    rows
}

fn kind(r: Result<()>) -> ErrorKind {
    r.expect_err("refused").kind()
}

async fn commit_one(tree: &Tree, patch: Patch<Counter>) -> Result<()> {
    let mut tx = tree.transaction();
    tx.patch(patch);
    tx.commit().await
}

#[test]
fn adding_keeps_a_number_inside_its_type() {
    on_both(|tree| async move {
        let counters = tree.repo::<Counter>();
        let f = Counter::FIELDS;
        let c = Counter {
            hits: u64::MAX - 1,
            small: -127,
            ..counter("c")
        };
        counters.put(&c).await.unwrap();
        // Up to the maximum, and not one more: alone or in a transaction, nothing written.
        counters
            .patch(Patch::new(&ckey("c")).add(f.hits, 1))
            .await
            .unwrap();
        let before = rows(&tree).await;
        let err = counters
            .patch(Patch::new(&ckey("c")).add(f.hits, 1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue, "{err}");
        assert!(err.to_string().contains("`hits`"), "{err}");
        assert_eq!(
            kind(commit_one(&tree, Patch::new(&ckey("c")).add(f.hits, u64::MAX)).await),
            ErrorKind::InvalidValue
        );
        assert_eq!(rows(&tree).await, before);
        let now = counters.get(&ckey("c")).await.unwrap().unwrap();
        assert_eq!((now.hits, now.version), (u64::MAX, 2));
        // Down to the minimum of a signed type, and not one less; back up within it.
        counters
            .patch(Patch::new(&ckey("c")).add(f.small, -1))
            .await
            .unwrap();
        assert_eq!(
            kind(
                counters
                    .patch(Patch::new(&ckey("c")).add(f.small, -1))
                    .await
            ),
            ErrorKind::InvalidValue
        );
        for _ in 0..2 {
            counters
                .patch(Patch::new(&ckey("c")).add(f.small, i8::MAX))
                .await
                .unwrap();
        }
        assert_eq!(
            kind(counters.patch(Patch::new(&ckey("c")).add(f.small, 2)).await),
            ErrorKind::InvalidValue
        );
        assert_eq!(counters.get(&ckey("c")).await.unwrap().unwrap().small, 126);
        // A missing field counts as zero: the whole range is open to it, no more.
        counters
            .patch(Patch::new(&ckey("c")).add(f.level, u16::MAX))
            .await
            .unwrap();
        assert_eq!(
            kind(commit_one(&tree, Patch::new(&ckey("c")).add(f.level, 1)).await),
            ErrorKind::InvalidValue
        );
        // Another action's failure in the same transaction is still a cancellation.
        let mut tx = tree.transaction();
        tx.patch(Patch::new(&ckey("c")).add(f.hits, 0))
            .create(&counter("c2"))
            .create(&counter("c2x"));
        tx.commit().await.unwrap();
        let mut tx = tree.transaction();
        tx.patch(Patch::new(&ckey("c")).add(f.level, 0))
            .create(&counter("c2"));
        let err = tx.commit().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TransactionCanceled, "{err}");
        let now = counters.get(&ckey("c")).await.unwrap().unwrap();
        assert_eq!(
            (now.hits, now.small, now.level),
            (u64::MAX, 126, Some(u16::MAX))
        );
    });
}

#[test]
fn a_version_at_its_maximum_is_not_patched() {
    on_both(|tree| async move {
        let counters = tree.repo::<Counter>();
        let f = Counter::FIELDS;
        let mut top = Counter {
            version: u64::MAX,
            ..counter("top")
        };
        counters.put(&top).await.unwrap();
        let before = rows(&tree).await;
        // The kind `update` refuses it with.
        assert_eq!(
            kind(counters.update(&mut top).await),
            ErrorKind::InvalidValue
        );
        let err = counters
            .patch(Patch::new(&ckey("top")).set(f.score, 2.0))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue, "{err}");
        assert!(err.to_string().contains("version"), "{err}");
        assert_eq!(
            kind(commit_one(&tree, Patch::new(&ckey("top")).add(f.hits, 1)).await),
            ErrorKind::InvalidValue
        );
        assert_eq!(rows(&tree).await, before);
        // Still readable as the type, at its version.
        let now = counters.get(&ckey("top")).await.unwrap().unwrap();
        assert_eq!((now.version, now.score), (u64::MAX, 0.5));
        // One below the maximum: the last patch it takes.
        let mut next = Counter {
            version: u64::MAX - 1,
            ..counter("next")
        };
        counters.put(&next).await.unwrap();
        counters
            .patch(Patch::new(&ckey("next")).add(f.hits, 1))
            .await
            .unwrap();
        next = counters.get(&ckey("next")).await.unwrap().unwrap();
        assert_eq!((next.hits, next.version), (1, u64::MAX));
    });
}

#[test]
fn nan_and_infinities_are_refused_before_sending() {
    on_both(|tree| async move {
        let counters = tree.repo::<Counter>();
        let f = Counter::FIELDS;
        counters.put(&counter("c")).await.unwrap();
        let before = rows(&tree).await;
        let key = ckey("c");
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            // In a patch's values.
            for patch in [
                Patch::new(&key).set(f.score, bad),
                Patch::new(&key).add(f.score, bad),
                Patch::new(&key).add(f.hits, 1).when(f.score.lt(bad)),
            ] {
                assert_eq!(
                    kind(counters.patch(patch.clone()).await),
                    ErrorKind::InvalidValue
                );
                assert_eq!(
                    kind(commit_one(&tree, patch).await),
                    ErrorKind::InvalidValue
                );
            }
            // In the conditions of puts, deletes and checks.
            let conditions: [Cond<Counter>; 4] = [
                f.score.eq(bad),
                f.score.ne(bad) | f.hits.eq(0),
                f.score.between(0.0, bad),
                !f.score.ge(bad),
            ];
            for c in conditions {
                assert_eq!(
                    kind(counters.put_if(&counter("c"), c.clone()).await),
                    ErrorKind::InvalidValue
                );
                assert_eq!(
                    kind(counters.delete_if(&key, c.clone()).await),
                    ErrorKind::InvalidValue
                );
                let mut tx = tree.transaction();
                tx.check(&key, c).put(&counter("d"));
                assert_eq!(kind(tx.commit().await), ErrorKind::InvalidValue);
            }
        }
        assert_eq!(rows(&tree).await, before);
    });
}

#[test]
fn a_denormalized_copy_is_not_patched() {
    on_both(|tree| async move {
        let threads = tree.repo::<Thread>();
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
            title: "Hi".into(),
            forum_name: None,
        };
        threads.put(&thread).await.unwrap();
        let before = rows(&tree).await;
        // `Thread::FIELDS.forum_name` is read-only (a compile error in a patch); a hand-made
        // handle on its attribute is refused at run time, alone or in a transaction.
        let copy = Field::<Thread, Option<String>>::new("forum_name");
        for patch in [
            Patch::new(&thread.key()).set(copy, "mine"),
            Patch::new(&thread.key()).remove(copy),
            Patch::new(&thread.key())
                .set(Thread::FIELDS.title, "Hello")
                .set(copy, "mine"),
        ] {
            let err = threads.patch(patch.clone()).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(err.to_string().contains("forum_name"), "{err}");
            let mut tx = tree.transaction();
            tx.patch(patch);
            assert_eq!(kind(tx.commit().await), ErrorKind::InvalidArgument);
        }
        assert_eq!(rows(&tree).await, before);
        // The copy still names its source's value, and still takes part in conditions.
        threads
            .patch(
                Patch::new(&thread.key())
                    .set(Thread::FIELDS.title, "Hello")
                    .when(Thread::FIELDS.forum_name.eq("Rust")),
            )
            .await
            .unwrap();
        let now = threads.get(&thread.key()).await.unwrap().unwrap();
        assert_eq!(
            (now.title.as_str(), now.forum_name.as_deref()),
            ("Hello", Some("Rust"))
        );
    });
}

#[test]
fn a_transaction_carries_up_to_four_megabytes() {
    on_both(|tree| async move {
        let blobs = tree.repo::<Blob>();
        // Nine values of 399 KB (about 3.68 MB with their guards): one transaction.
        let mut tx = tree.transaction();
        for i in 0..9 {
            tx.put(&blob(i));
        }
        tx.commit().await.unwrap();
        for i in 0..9 {
            assert_eq!(blobs.get(&blob(i).key()).await.unwrap(), Some(blob(i)));
        }
        // Eleven (about 4.5 MB): refused before sending, nothing written.
        let before = rows(&tree).await;
        let mut tx = tree.transaction();
        for i in 10..21 {
            tx.put(&blob(i));
        }
        let err = tx.commit().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("4 MB"), "{err}");
        assert_eq!(rows(&tree).await, before);
    });
}

/// A put (creation) of `key` adding `payload` bytes to a transaction.
fn put_of_payload(key: Key, payload: usize) -> TransactAction {
    let put = |size: usize| {
        let mut item = key.clone().into_item();
        let pad = size - item.size() - "b".len();
        item.insert("b", Value::S("x".repeat(pad)));
        TransactAction::Put {
            item,
            condition: Condition::NotExists,
        }
    };
    // What the condition adds: `attribute_not_exists(#n0)` standing for `Key`.
    let overhead = put(1000).payload_size() - 1000;
    let put = put(payload - overhead);
    assert_eq!(put.payload_size(), payload);
    put
}

/// An update with a condition, a condition check, and puts filling the rest: `total` bytes as
/// `TransactAction::payload_size` counts them.
fn actions_of(tag: &str, total: usize) -> Vec<TransactAction> {
    let mut actions = vec![
        TransactAction::Update {
            key: Key::new(format!("{tag}-u"), "r"),
            actions: vec![
                UpdateAction::Add("n".into(), Value::N("12345".into())),
                UpdateAction::Append("l".into(), Value::L(vec![Value::S("ab".into())])),
            ],
            condition: Condition::Or(vec![
                Condition::attr_not_exists("n"),
                Condition::Compare("n".into(), Comparison::Lt, Value::N("100".into())),
            ]),
        },
        TransactAction::ConditionCheck {
            key: Key::new(format!("{tag}-c"), "r"),
            condition: Condition::Always,
        },
    ];
    let rest = total
        - actions
            .iter()
            .map(TransactAction::payload_size)
            .sum::<usize>();
    let n = rest.div_ceil(400_000);
    for i in 0..n {
        let share = if i + 1 == n {
            rest - rest / n * (n - 1)
        } else {
            rest / n
        };
        actions.push(put_of_payload(
            Key::new(format!("{tag}-p{i:02}"), "r"),
            share,
        ));
    }
    assert_eq!(
        actions
            .iter()
            .map(TransactAction::payload_size)
            .sum::<usize>(),
        total
    );
    actions
}

#[test]
fn transaction_size_is_counted_as_dynamodb_counts_it() {
    on_both(|tree| async move {
        let s = tree.storage();
        // Exactly at the limit: accepted; one byte over: DynamoDB's refusal, nothing written.
        s.transact_write(actions_of("at", TRANSACT_MAX_BYTES))
            .await
            .unwrap();
        let before = rows(&tree).await;
        let err = s
            .transact_write(actions_of("over", TRANSACT_MAX_BYTES + 1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
        assert_eq!(rows(&tree).await, before);
    });
}
