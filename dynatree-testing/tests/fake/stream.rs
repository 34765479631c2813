//! The fake table's DynamoDB stream: one record per changed row for every kind of write
//! request, none for writes that change nothing or fail, increasing sequence numbers; and the
//! faulty reader: per-item order kept under every fault mode, everything delivered at least
//! once, deterministic per seed.

use std::collections::{BTreeMap, HashMap, HashSet};

use dynatree::changes::{Change, ChangeKind};
use dynatree::storage::{Condition, Key, Storage, TransactAction, UpdateAction, WriteRequest};
use dynatree::{ErrorKind, Tree, storage::Item, storage::Value};
use dynatree_testing::{FakeStream, FakeTable, Fault, StreamFaults};

fn s(v: &str) -> Value {
    Value::S(v.into())
}

fn n(v: &str) -> Value {
    Value::N(v.into())
}

fn item(key: &Key, attrs: &[(&str, Value)]) -> Item {
    let mut item = key.clone().into_item();
    for (name, value) in attrs {
        item.insert(*name, value.clone());
    }
    item
}

/// A table with the tree's schema and its stream enabled.
async fn streaming() -> FakeTable {
    let table = FakeTable::new();
    Tree::new(table.clone()).create_table().await.unwrap();
    table.enable_stream().await.unwrap();
    table
}

/// The records written since `from` records.
fn since(table: &FakeTable, from: usize) -> Vec<Change> {
    table.stream_records().split_off(from)
}

fn assert_change(
    change: &Change,
    kind: ChangeKind,
    key: &Key,
    old: Option<&Item>,
    new: Option<&Item>,
) {
    assert_eq!(change.kind(), kind, "{change:?}");
    assert_eq!(change.key(), key, "{change:?}");
    assert_eq!(change.old_image(), old, "old image of {change:?}");
    assert_eq!(change.new_image(), new, "new image of {change:?}");
}

#[tokio::test]
async fn put_item_inserts_then_modifies_with_both_images() {
    let table = streaming().await;
    let key = Key::new("h", "a");
    let v1 = item(&key, &[("x", n("1"))]);
    let v2 = item(&key, &[("x", n("2")), ("y", s("why"))]);
    table.put_item(v1.clone(), Condition::Always).await.unwrap();
    table.put_item(v2.clone(), Condition::Exists).await.unwrap();
    let records = table.stream_records();
    assert_eq!(records.len(), 2);
    assert_change(&records[0], ChangeKind::Insert, &key, None, Some(&v1));
    assert_change(&records[1], ChangeKind::Modify, &key, Some(&v1), Some(&v2));
}

#[tokio::test]
async fn images_are_the_stored_items() {
    // Numbers are stored (and streamed) in DynamoDB's canonical form.
    let table = streaming().await;
    let key = Key::new("h", "a");
    table
        .put_item(item(&key, &[("x", n("1.50"))]), Condition::Always)
        .await
        .unwrap();
    let records = table.stream_records();
    assert_eq!(
        records[0].new_image(),
        Some(&item(&key, &[("x", n("1.5"))]))
    );
}

#[tokio::test]
async fn a_put_that_changes_nothing_writes_no_record() {
    let table = streaming().await;
    let key = Key::new("h", "a");
    let v = item(
        &key,
        &[
            ("x", n("1")),
            ("set", Value::Ss(vec!["a".into(), "b".into()])),
        ],
    );
    table.put_item(v.clone(), Condition::Always).await.unwrap();
    assert_eq!(table.stream_records().len(), 1);
    table.put_item(v.clone(), Condition::Always).await.unwrap();
    // Equal as DynamoDB compares: the number by value, the set in any order.
    let same = item(
        &key,
        &[
            ("x", n("1.0")),
            ("set", Value::Ss(vec!["b".into(), "a".into()])),
        ],
    );
    table.put_item(same, Condition::Always).await.unwrap();
    assert_eq!(table.stream_records().len(), 1);
}

#[tokio::test]
async fn delete_item_removes_with_the_old_image_and_absent_items_write_nothing() {
    let table = streaming().await;
    let key = Key::new("h", "a");
    let v = item(&key, &[("x", n("1"))]);
    table.put_item(v.clone(), Condition::Always).await.unwrap();
    table.delete_item(&key, Condition::Always).await.unwrap();
    table.delete_item(&key, Condition::Always).await.unwrap();
    table
        .delete_item(&Key::new("h", "never"), Condition::Always)
        .await
        .unwrap();
    let records = table.stream_records();
    assert_eq!(records.len(), 2);
    assert_change(&records[1], ChangeKind::Remove, &key, Some(&v), None);
}

#[tokio::test]
async fn update_item_inserts_modifies_and_skips_updates_that_change_nothing() {
    let table = streaming().await;
    let key = Key::new("h", "a");
    let set = |v: &str| vec![UpdateAction::Set("x".into(), n(v))];
    table
        .update_item(&key, set("1"), Condition::Always)
        .await
        .unwrap();
    table
        .update_item(&key, set("2"), Condition::Always)
        .await
        .unwrap();
    // The same value again, a removal of a missing attribute, no actions at all: no change.
    table
        .update_item(&key, set("2.0"), Condition::Always)
        .await
        .unwrap();
    table
        .update_item(
            &key,
            vec![UpdateAction::Remove("missing".into())],
            Condition::Always,
        )
        .await
        .unwrap();
    table
        .update_item(&key, Vec::new(), Condition::Always)
        .await
        .unwrap();
    let records = table.stream_records();
    assert_eq!(records.len(), 2, "{records:#?}");
    let v1 = item(&key, &[("x", n("1"))]);
    let v2 = item(&key, &[("x", n("2"))]);
    assert_change(&records[0], ChangeKind::Insert, &key, None, Some(&v1));
    assert_change(&records[1], ChangeKind::Modify, &key, Some(&v1), Some(&v2));
    // An update without actions of an absent item creates it with just its key.
    let bare = Key::new("h", "bare");
    table
        .update_item(&bare, Vec::new(), Condition::Always)
        .await
        .unwrap();
    let records = since(&table, 2);
    assert_eq!(records.len(), 1);
    assert_change(
        &records[0],
        ChangeKind::Insert,
        &bare,
        None,
        Some(&bare.clone().into_item()),
    );
}

#[tokio::test]
async fn batch_write_writes_one_record_per_changed_row_in_request_order() {
    let table = streaming().await;
    let (a, b, c, d) = (
        Key::new("h", "a"),
        Key::new("h", "b"),
        Key::new("g", "c"),
        Key::new("h", "d"),
    );
    let va = item(&a, &[("x", n("1"))]);
    let vb = item(&b, &[("x", n("1"))]);
    table.put_item(va.clone(), Condition::Always).await.unwrap();
    table.put_item(vb.clone(), Condition::Always).await.unwrap();
    let va2 = item(&a, &[("x", n("2"))]);
    let vc = item(&c, &[("x", n("3"))]);
    let unprocessed = table
        .batch_write(vec![
            WriteRequest::Put(va2.clone()),
            WriteRequest::Delete(b.clone()),
            WriteRequest::Delete(d.clone()), // absent: no record
            WriteRequest::Put(vc.clone()),
        ])
        .await
        .unwrap();
    assert!(unprocessed.is_empty());
    let records = since(&table, 2);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert_change(&records[0], ChangeKind::Modify, &a, Some(&va), Some(&va2));
    assert_change(&records[1], ChangeKind::Remove, &b, Some(&vb), None);
    assert_change(&records[2], ChangeKind::Insert, &c, None, Some(&vc));
}

#[tokio::test]
async fn batch_write_requests_left_unprocessed_write_no_record() {
    let table = streaming().await;
    table.inject(0, Fault::Unprocessed { processed: 1 });
    let keys = [Key::new("h", "a"), Key::new("h", "b"), Key::new("h", "c")];
    let unprocessed = table
        .batch_write(
            keys.iter()
                .map(|k| WriteRequest::Put(k.clone().into_item()))
                .collect(),
        )
        .await
        .unwrap();
    assert_eq!(unprocessed.len(), 2);
    let records = table.stream_records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key(), &keys[0]);
}

#[tokio::test]
async fn transact_write_writes_a_record_per_put_delete_and_update_but_not_checks() {
    let table = streaming().await;
    let (a, b, c, d) = (
        Key::new("h", "a"),
        Key::new("h", "b"),
        Key::new("h", "c"),
        Key::new("h", "d"),
    );
    let vb = item(&b, &[("x", n("1"))]);
    let vc = item(&c, &[("x", n("1"))]);
    let vd = item(&d, &[("x", n("1"))]);
    for v in [&vb, &vc, &vd] {
        table.put_item(v.clone(), Condition::Always).await.unwrap();
    }
    let va = item(&a, &[("y", s("new"))]);
    table
        .transact_write(vec![
            TransactAction::Put {
                item: va.clone(),
                condition: Condition::NotExists,
            },
            TransactAction::Delete {
                key: b.clone(),
                condition: Condition::Exists,
            },
            TransactAction::ConditionCheck {
                key: d.clone(),
                condition: Condition::Exists,
            },
            TransactAction::Update {
                key: c.clone(),
                actions: vec![UpdateAction::Add("x".into(), n("5"))],
                condition: Condition::Exists,
            },
        ])
        .await
        .unwrap();
    let records = since(&table, 3);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert_change(&records[0], ChangeKind::Insert, &a, None, Some(&va));
    assert_change(&records[1], ChangeKind::Remove, &b, Some(&vb), None);
    let vc2 = item(&c, &[("x", n("6"))]);
    assert_change(&records[2], ChangeKind::Modify, &c, Some(&vc), Some(&vc2));

    // Actions that change nothing (an identical put, a delete of an absent item, an update
    // to the same value) write no record, inside a transaction too.
    table
        .transact_write(vec![
            TransactAction::Put {
                item: va.clone(),
                condition: Condition::Always,
            },
            TransactAction::Delete {
                key: b.clone(),
                condition: Condition::Always,
            },
            TransactAction::Update {
                key: c.clone(),
                actions: vec![UpdateAction::Set("x".into(), n("6"))],
                condition: Condition::Always,
            },
        ])
        .await
        .unwrap();
    assert_eq!(table.stream_records().len(), 6);
}

#[tokio::test]
async fn failed_requests_write_no_record() {
    let table = streaming().await;
    let key = Key::new("h", "a");
    let v = item(&key, &[("x", n("1"))]);
    table.put_item(v.clone(), Condition::Always).await.unwrap();
    let other = item(&key, &[("x", n("2"))]);

    // Failed conditions.
    let e = table
        .put_item(other.clone(), Condition::NotExists)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConditionFailed);
    let e = table
        .delete_item(&key, Condition::equals("x", n("9")))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConditionFailed);
    let e = table
        .update_item(
            &key,
            vec![UpdateAction::Set("x".into(), n("3"))],
            Condition::NotExists,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConditionFailed);

    // A cancelled transaction: its other actions are not applied either.
    let e = table
        .transact_write(vec![
            TransactAction::Put {
                item: Key::new("h", "b").into_item(),
                condition: Condition::Always,
            },
            TransactAction::Delete {
                key: key.clone(),
                condition: Condition::NotExists,
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TransactionCanceled);

    // An invalid request.
    let e = table
        .batch_write(vec![
            WriteRequest::Put(Key::new("h", "c").into_item()),
            WriteRequest::Put(Key::new("h", "c").into_item()),
        ])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation);

    // Injected faults before the write.
    for fault in [Fault::Fail, Fault::Throttle] {
        table.inject(0, fault);
        assert!(
            table
                .put_item(other.clone(), Condition::Always)
                .await
                .is_err()
        );
    }
    assert_eq!(table.stream_records().len(), 1);
    assert_eq!(table.rows(), std::slice::from_ref(&v));

    // A lost response: the write happened, so its record is there.
    table.inject(0, Fault::FailAfterApply);
    assert!(
        table
            .put_item(other.clone(), Condition::Always)
            .await
            .is_err()
    );
    let records = table.stream_records();
    assert_eq!(records.len(), 2);
    assert_change(
        &records[1],
        ChangeKind::Modify,
        &key,
        Some(&v),
        Some(&other),
    );
}

#[tokio::test]
async fn time_to_live_deletions_are_removals() {
    let table = streaming().await;
    table.enable_ttl("expires").await.unwrap();
    let (a, b) = (Key::new("h", "a"), Key::new("h", "b"));
    let va = item(&a, &[("expires", n("100"))]);
    let vb = item(&b, &[("expires", n("300"))]);
    table.put_item(va.clone(), Condition::Always).await.unwrap();
    table.put_item(vb.clone(), Condition::Always).await.unwrap();
    assert_eq!(table.expire_ttl(200), 1);
    let records = since(&table, 2);
    assert_eq!(records.len(), 1);
    assert_change(&records[0], ChangeKind::Remove, &a, Some(&va), None);
}

#[tokio::test]
async fn writes_before_the_stream_was_enabled_are_not_in_it() {
    let table = FakeTable::new();
    Tree::new(table.clone()).create_table().await.unwrap();
    let key = Key::new("h", "a");
    let v1 = item(&key, &[("x", n("1"))]);
    table.put_item(v1.clone(), Condition::Always).await.unwrap();
    assert!(table.stream_records().is_empty());
    assert!(table.stream_reader().is_caught_up());
    table.enable_stream().await.unwrap();
    let v2 = item(&key, &[("x", n("2"))]);
    table.put_item(v2.clone(), Condition::Always).await.unwrap();
    let records = table.stream_records();
    assert_eq!(records.len(), 1);
    // The old image is the row as it was, written before the stream.
    assert_change(&records[0], ChangeKind::Modify, &key, Some(&v1), Some(&v2));
}

#[tokio::test]
async fn no_table_no_stream() {
    let table = FakeTable::new();
    assert!(table.stream_records().is_empty());
    let mut reader = table.stream_reader();
    assert!(reader.is_caught_up());
    assert!(reader.next_batch(10).is_empty());
    assert!(reader.drain().is_empty());
}

#[tokio::test]
async fn sequence_numbers_are_21_digits_and_strictly_increasing() {
    let table = streaming().await;
    let workload = Workload::new(3);
    workload.run(&table, 300).await;
    let records = table.stream_records();
    assert!(records.len() > 100);
    for r in &records {
        assert_eq!(r.sequence_number().len(), 21);
        assert!(r.sequence_number().bytes().all(|b| b.is_ascii_digit()));
    }
    for w in records.windows(2) {
        assert!(w[0].sequence_number() < w[1].sequence_number());
        let (x, y): (u128, u128) = (
            w[0].sequence_number().parse().unwrap(),
            w[1].sequence_number().parse().unwrap(),
        );
        assert!(x < y);
    }
}

/// The stream replays the table: applying every record's new image, in order, to the rows
/// there were when the stream was enabled gives the table's rows; and each record's old image
/// is the row before it.
#[tokio::test]
async fn the_records_replay_the_table_exactly() {
    for seed in 0..10 {
        let table = FakeTable::new();
        Tree::new(table.clone()).create_table().await.unwrap();
        let workload = Workload::new(seed);
        workload.run(&table, 50).await;
        let mut rows: BTreeMap<Key, Item> = table
            .rows()
            .into_iter()
            .map(|i| (Key::from_item(&i).unwrap(), i))
            .collect();
        table.enable_stream().await.unwrap();
        workload.run(&table, 200).await;
        for r in table.stream_records() {
            assert_eq!(rows.get(r.key()), r.old_image(), "seed {seed}: {r:?}");
            assert_ne!(r.old_image(), r.new_image());
            match r.new_image() {
                Some(new) => {
                    assert_eq!(Key::from_item(new).as_ref(), Some(r.key()));
                    rows.insert(r.key().clone(), new.clone());
                }
                None => {
                    rows.remove(r.key());
                }
            }
            let kind = match (r.old_image(), r.new_image()) {
                (None, Some(_)) => ChangeKind::Insert,
                (Some(_), Some(_)) => ChangeKind::Modify,
                _ => ChangeKind::Remove,
            };
            assert_eq!(r.kind(), kind);
        }
        assert_eq!(
            rows.into_values().collect::<Vec<_>>(),
            table.rows(),
            "seed {seed}"
        );
    }
}

#[tokio::test]
async fn a_tree_write_is_streamed() {
    #[derive(serde::Serialize)]
    struct Doc {
        title: String,
    }
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.unwrap();
    table.enable_stream().await.unwrap();
    tree.put(
        ["a", "b"],
        &Doc {
            title: "one".into(),
        },
    )
    .await
    .unwrap();
    let first = table.stream_records();
    assert!(!first.is_empty());
    assert!(first.iter().all(|c| c.kind() == ChangeKind::Insert));
    tree.put(
        ["a", "b"],
        &Doc {
            title: "two".into(),
        },
    )
    .await
    .unwrap();
    let second = since(&table, first.len());
    assert_eq!(second.len(), 1, "{second:#?}");
    assert_eq!(second[0].kind(), ChangeKind::Modify);
    tree.put(
        ["a", "b"],
        &Doc {
            title: "two".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(table.stream_records().len(), first.len() + 1);
}

#[tokio::test]
async fn reading_is_not_a_request() {
    let table = streaming().await;
    Workload::new(1).run(&table, 20).await;
    table.reset_metrics();
    table.inject_always(Fault::Fail);
    let mut reader = table.stream_reader();
    let all = reader.drain();
    assert_eq!(all, table.stream_records());
    assert_eq!(table.metrics().total_requests(), 0);
    table.clear_faults();
}

#[tokio::test]
async fn readers_are_independent_and_read_from_the_start() {
    let table = streaming().await;
    Workload::new(2).run(&table, 30).await;
    let all = table.stream_records();
    let mut first = table.stream_reader();
    let half = first.next_batch(all.len() / 2);
    assert_eq!(half, all[..all.len() / 2]);
    // A clone continues from the same place; a new reader starts over.
    let mut copy = first.clone();
    let mut fresh = table.stream_reader();
    assert_eq!(first.drain(), all[all.len() / 2..]);
    assert_eq!(copy.drain(), all[all.len() / 2..]);
    assert_eq!(fresh.drain(), all);
    // Later writes are read by every reader.
    Workload::new(3).run(&table, 10).await;
    let more = since(&table, all.len());
    assert!(!more.is_empty());
    for reader in [&mut first, &mut copy, &mut fresh] {
        assert!(!reader.is_caught_up());
        let mut got = Vec::new();
        loop {
            let batch = reader.next_batch(3);
            assert!(batch.len() <= 3);
            if batch.is_empty() {
                break;
            }
            got.extend(batch);
        }
        assert!(reader.is_caught_up());
        assert_eq!(got, more);
    }
}

#[tokio::test]
async fn a_batch_of_zero_reads_one() {
    let table = streaming().await;
    Workload::new(4).run(&table, 5).await;
    let mut reader = table.stream_reader();
    assert_eq!(reader.next_batch(0).len(), 1);
}

// ---------------------------------------------------------------------------------------
// Faults.

/// Random writes over a few keys: puts, updates, deletes, batches and transactions.
struct Workload {
    seed: u64,
}

impl Workload {
    fn new(seed: u64) -> Self {
        Self { seed }
    }

    async fn run(&self, table: &FakeTable, requests: usize) {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let keys: Vec<Key> = (0..6)
            .map(|i| Key::new(format!("h{}", i % 2), format!("r{i}")))
            .collect();
        for _ in 0..requests {
            let key = keys[rng.usize(..keys.len())].clone();
            let value = n(&rng.u8(..4).to_string());
            // Errors (failed conditions) are part of the workload.
            let _ = match rng.u8(..6) {
                0 => {
                    table
                        .put_item(item(&key, &[("x", value)]), Condition::Always)
                        .await
                }
                1 => table.delete_item(&key, Condition::Always).await,
                2 => table
                    .update_item(
                        &key,
                        vec![UpdateAction::Set("x".into(), value)],
                        Condition::Exists,
                    )
                    .await
                    .map(drop),
                3 => {
                    let mut picked: Vec<Key> = keys.clone();
                    rng.shuffle(&mut picked);
                    let requests = picked
                        .into_iter()
                        .take(rng.usize(1..4))
                        .map(|k| {
                            if rng.bool() {
                                WriteRequest::Put(item(&k, &[("x", n(&rng.u8(..4).to_string()))]))
                            } else {
                                WriteRequest::Delete(k)
                            }
                        })
                        .collect();
                    table.batch_write(requests).await.map(drop)
                }
                4 => {
                    let mut picked: Vec<Key> = keys.clone();
                    rng.shuffle(&mut picked);
                    let actions = picked
                        .into_iter()
                        .take(rng.usize(1..4))
                        .map(|k| match rng.u8(..3) {
                            0 => TransactAction::Put {
                                item: item(&k, &[("x", n(&rng.u8(..4).to_string()))]),
                                condition: Condition::Always,
                            },
                            1 => TransactAction::Delete {
                                key: k,
                                condition: Condition::Always,
                            },
                            _ => TransactAction::Update {
                                key: k,
                                actions: vec![UpdateAction::Add("x".into(), n("1"))],
                                condition: Condition::Exists,
                            },
                        })
                        .collect();
                    table.transact_write(actions).await
                }
                _ => {
                    table
                        .put_item(item(&key, &[("x", value)]), Condition::NotExists)
                        .await
                }
            };
        }
    }
}

/// Reads `reader` to the end with batch sizes drawn from `seed`, checking each batch's size;
/// returns the batches.
fn read_all(reader: &mut FakeStream, seed: u64) -> Vec<Vec<Change>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut batches = Vec::new();
    for _ in 0..100_000 {
        let caught_up = reader.is_caught_up();
        let max = rng.usize(1..8);
        let batch = reader.next_batch(max);
        assert_eq!(
            caught_up,
            batch.is_empty(),
            "is_caught_up agrees with next_batch"
        );
        assert!(
            batch.len() <= max,
            "{} records for at most {max}",
            batch.len()
        );
        if batch.is_empty() {
            assert!(reader.next_batch(max).is_empty());
            return batches;
        }
        batches.push(batch);
    }
    panic!("the stream never caught up");
}

fn modes(seed: u64) -> [(&'static str, StreamFaults); 5] {
    [
        ("none", StreamFaults::new(seed)),
        ("redeliver", StreamFaults::new(seed).redeliver(0.4)),
        ("duplicate", StreamFaults::new(seed).duplicate(0.3)),
        ("delay", StreamFaults::new(seed).delay(0.4)),
        ("all", StreamFaults::all(seed)),
    ]
}

/// What a faulty delivery did, checked against the log.
#[derive(Default)]
struct Observed {
    redelivered: bool,
    duplicated: bool,
    reordered: bool,
}

/// Checks a delivery against the log: only the log's records, each at least once; the first
/// deliveries of each item's records in the order they were made; with `redeliver` off, every
/// delivery of an item in order and each record at most twice in a row (a duplicate).
fn check_delivery(log: &[Change], delivered: &[Change], redeliver: bool, what: &str) -> Observed {
    let by_seq: HashMap<&str, &Change> = log.iter().map(|c| (c.sequence_number(), c)).collect();
    let mut observed = Observed::default();
    let mut first_seen: HashSet<&str> = HashSet::new();
    let mut last_first: HashMap<&Key, &str> = HashMap::new();
    let mut last_any: HashMap<&Key, &str> = HashMap::new();
    let mut previous: Option<&str> = None;
    let mut highest_first: Option<&str> = None;
    for c in delivered {
        let seq = c.sequence_number();
        let original = by_seq
            .get(seq)
            .unwrap_or_else(|| panic!("{what}: {seq} is not in the log"));
        assert_eq!(*original, c, "{what}: a record was altered");
        let again = !first_seen.insert(seq);
        if again {
            if previous == Some(seq) {
                observed.duplicated = true;
            } else {
                observed.redelivered = true;
                assert!(
                    redeliver,
                    "{what}: {seq} delivered again without redelivery"
                );
            }
        } else {
            if let Some(before) = last_first.insert(c.key(), seq) {
                assert!(
                    before < seq,
                    "{what}: {seq} of {:?} first delivered after {before}",
                    c.key()
                );
            }
            if highest_first.is_some_and(|h| h > seq) {
                observed.reordered = true;
            }
            highest_first = highest_first.max(Some(seq));
        }
        if !redeliver && let Some(before) = last_any.insert(c.key(), seq) {
            assert!(
                before <= seq,
                "{what}: {seq} of {:?} delivered after {before}",
                c.key()
            );
        }
        previous = Some(seq);
    }
    for c in log {
        assert!(
            first_seen.contains(c.sequence_number()),
            "{what}: {} never delivered",
            c.sequence_number()
        );
    }
    observed
}

#[tokio::test]
async fn every_fault_mode_keeps_per_item_order_and_delivers_everything() {
    let mut seen: BTreeMap<&str, Observed> = BTreeMap::new();
    for seed in 0..30 {
        let table = streaming().await;
        Workload::new(seed).run(&table, 80).await;
        let log = table.stream_records();
        assert!(!log.is_empty());
        for (name, faults) in modes(seed) {
            let what = format!("{name}, seed {seed}");
            let mut reader = table.stream_reader().with_faults(faults);
            let delivered: Vec<Change> = read_all(&mut reader, seed).concat();
            let redeliver = matches!(name, "redeliver" | "all");
            let o = check_delivery(&log, &delivered, redeliver, &what);
            match name {
                "none" => assert_eq!(delivered, log, "{what}"),
                "duplicate" => {
                    let mut once = delivered.clone();
                    once.dedup();
                    assert_eq!(once, log, "{what}: duplicates are adjacent");
                }
                "delay" => assert_eq!(delivered.len(), log.len(), "{what}: each once"),
                _ => {}
            }
            let e = seen.entry(name).or_default();
            e.redelivered |= o.redelivered;
            e.duplicated |= o.duplicated;
            e.reordered |= o.reordered;
        }
    }
    // Each fault actually strikes (over 30 seeds), and only its own effect shows.
    assert!(seen["redeliver"].redelivered);
    assert!(!seen["redeliver"].duplicated || seen["redeliver"].redelivered);
    assert!(seen["duplicate"].duplicated);
    assert!(!seen["duplicate"].redelivered && !seen["duplicate"].reordered);
    assert!(seen["delay"].reordered);
    assert!(!seen["delay"].redelivered && !seen["delay"].duplicated);
    assert!(seen["all"].redelivered && seen["all"].duplicated && seen["all"].reordered);
    let none = &seen["none"];
    assert!(!none.redelivered && !none.duplicated && !none.reordered);
}

/// Reading while the table is being written: records appended between batches are delivered
/// too, with the same guarantees.
#[tokio::test]
async fn faults_hold_while_the_table_keeps_changing() {
    for seed in 0..20 {
        for (name, faults) in modes(seed) {
            let what = format!("{name}, seed {seed}");
            let table = streaming().await;
            let mut reader = table.stream_reader().with_faults(faults);
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut delivered = Vec::new();
            for round in 0..20 {
                Workload::new(seed * 100 + round).run(&table, 5).await;
                for _ in 0..rng.usize(0..3) {
                    let batch = reader.next_batch(rng.usize(1..5));
                    delivered.extend(batch);
                }
            }
            delivered.extend(reader.drain());
            assert!(reader.is_caught_up(), "{what}");
            assert!(reader.next_batch(10).is_empty(), "{what}");
            let redeliver = matches!(name, "redeliver" | "all");
            check_delivery(&table.stream_records(), &delivered, redeliver, &what);
        }
    }
}

#[tokio::test]
async fn drain_returns_everything_still_held() {
    for seed in 0..20 {
        let table = streaming().await;
        Workload::new(seed).run(&table, 40).await;
        let log = table.stream_records();
        let mut reader = table
            .stream_reader()
            .with_faults(StreamFaults::all(seed).delay(0.8).redeliver(0.8));
        let mut delivered = Vec::new();
        for _ in 0..3 {
            delivered.extend(reader.next_batch(2));
        }
        let rest = reader.drain();
        assert!(reader.is_caught_up());
        assert!(reader.drain().is_empty());
        delivered.extend(rest);
        check_delivery(&log, &delivered, true, &format!("seed {seed}"));
    }
}

#[tokio::test]
async fn delivery_is_deterministic_per_seed() {
    let table = streaming().await;
    Workload::new(11).run(&table, 100).await;
    let run = |seed: u64| {
        let mut reader = table.stream_reader().with_faults(StreamFaults::all(seed));
        read_all(&mut reader, 5)
    };
    assert_eq!(run(1), run(1));
    assert_eq!(run(2), run(2));
    let distinct: HashSet<Vec<Vec<String>>> = (0..5)
        .map(|seed| {
            run(seed)
                .iter()
                .map(|b| b.iter().map(|c| c.sequence_number().to_owned()).collect())
                .collect()
        })
        .collect();
    assert!(distinct.len() > 1, "different seeds deliver differently");
    // A clone is an independent reader in the same state: it delivers the same.
    let mut reader = table.stream_reader().with_faults(StreamFaults::all(3));
    reader.next_batch(4);
    let mut copy = reader.clone();
    assert_eq!(read_all(&mut reader, 9), read_all(&mut copy, 9));
}
