//! Decoding a table's stream into typed changes: dynatree's consumer path (each SDK record
//! converted with `changes::from_stream_record`, then `watch::decode::<Link>`) against the same
//! SDK records decoded by hand, as a program without dynatree would: skip the rows that are
//! not objects by their keys, and deserialize the images with serde_dynamo. Both run on the
//! same records (written on the fake: creations, updates, deletions and a move of a subtree),
//! one after the other in each round, alternating which goes first; the table shows the median
//! and the best round after an untimed warm-up. Run:
//! `cargo bench -p dynatree-testing --bench typed_changes`
//! (`DYNATREE_CHANGES_OBJECTS` sets the number of objects, 10,000 by default).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, Record, StreamRecord};
use dynatree::storage::{Item, Storage, Value};
use dynatree::watch;
use dynatree::{Hierarchical, Tree};
use dynatree_testing::FakeTable;
use serde::{Deserialize, Serialize};

/// Timed rounds (after one untimed warm-up round).
const ROUNDS: usize = 7;

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
    target: String,
    clicks: u64,
    tags: Vec<String>,
}

fn objects() -> usize {
    std::env::var("DYNATREE_CHANGES_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn attribute(v: &Value) -> AttributeValue {
    match v {
        Value::S(s) => AttributeValue::S(s.clone()),
        Value::N(n) => AttributeValue::N(n.clone()),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Null => AttributeValue::Null(true),
        Value::L(l) => AttributeValue::L(l.iter().map(attribute).collect()),
        Value::M(m) => {
            AttributeValue::M(m.iter().map(|(k, v)| (k.clone(), attribute(v))).collect())
        }
        Value::Ss(s) => AttributeValue::Ss(s.to_vec()),
        Value::Ns(s) => AttributeValue::Ns(s.to_vec()),
        other => panic!("a value the bench does not write: {other:?}"),
    }
}

fn image(item: &Item) -> HashMap<String, AttributeValue> {
    item.iter()
        .map(|(k, v)| (k.to_owned(), attribute(v)))
        .collect()
}

/// The fake's records as the SDK's, as GetRecords returns them.
fn sdk_records(records: &[dynatree::changes::Change]) -> Vec<Record> {
    records
        .iter()
        .map(|c| {
            let keys = c.key().clone().into_item();
            let mut body = StreamRecord::builder()
                .set_keys(Some(image(&keys)))
                .sequence_number(c.sequence_number());
            if let Some(old) = c.old_image() {
                body = body.set_old_image(Some(image(old)));
            }
            if let Some(new) = c.new_image() {
                body = body.set_new_image(Some(image(new)));
            }
            Record::builder()
                .event_name(OperationType::from(c.kind().event_name()))
                .dynamodb(body.build())
                .build()
        })
        .collect()
}

async fn write_records(n: usize) -> Vec<Record> {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.expect("a table");
    table.enable_stream().await.expect("a stream");
    let links = tree.repo::<Link>();
    let link = |i: usize, clicks: u64| Link {
        account: format!("a{}", i % 10),
        short: format!("l{i:06}"),
        target: format!("https://example.com/{i}"),
        clicks,
        tags: vec!["news".into(), format!("t{}", i % 7)],
    };
    let all: Vec<Link> = (0..n).map(|i| link(i, 0)).collect();
    links.put_all(&all).await.expect("put_all");
    for i in (0..n).step_by(2) {
        links.put(&link(i, 1)).await.expect("an update");
    }
    for i in (1..n).step_by(5) {
        links
            .delete(&LinkKey {
                account: format!("a{}", i % 10),
                short: format!("l{i:06}"),
            })
            .await
            .expect("a deletion");
    }
    tree.move_subtree(["Accounts", "a3"], ["Accounts", "b3"])
        .await
        .expect("a move");
    sdk_records(&table.stream_records())
}

/// dynatree's path: the consumer's conversion, then the typed decoding.
fn with_dynatree(records: &[Record]) -> usize {
    let mut changes = 0;
    for r in records {
        let raw = dynatree::changes::from_stream_record(r).expect("a record of a tree table");
        if let Some(c) = watch::decode::<Link>(&raw).expect("a link") {
            changes += 1;
            black_box(c);
        }
    }
    changes
}

/// dynatree's conversion alone (the SDK's record into a raw `changes::Change`): the part of
/// the first path that any consumer on the SDK pays.
fn conversion_only(records: &[Record]) -> usize {
    let mut converted = 0;
    for r in records {
        black_box(dynatree::changes::from_stream_record(r).expect("a record"));
        converted += 1;
    }
    converted
}

/// By hand: object rows by their range key, images through serde_dynamo.
fn by_hand(records: &[Record]) -> usize {
    let mut changes = 0;
    for r in records {
        let Some(body) = r.dynamodb() else { continue };
        let object = body
            .keys()
            .and_then(|k| k.get("Child"))
            .is_some_and(|c| matches!(c, AttributeValue::S(s) if s == "¦"));
        let hash = body.keys().and_then(|k| k.get("Key"));
        let bookkeeping = matches!(hash, Some(AttributeValue::S(s)) if s.starts_with("¦¦"));
        if !object || bookkeeping {
            continue;
        }
        let decode = |img: Option<&HashMap<String, AttributeValue>>| {
            img.filter(|i| !i.is_empty())
                .map(|i| serde_dynamo::aws_sdk_dynamodbstreams_1::from_item::<Link>(i.clone()))
                .transpose()
                .expect("a link")
        };
        let old = decode(body.old_image());
        let new = decode(body.new_image());
        changes += 1;
        black_box((old, new));
    }
    changes
}

fn main() {
    let n = objects();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let records = rt.block_on(write_records(n));
    let typed = with_dynatree(&records);
    let hand = by_hand(&records);
    let converted = conversion_only(&records);
    let mut times: [Vec<Duration>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..=ROUNDS {
        let mut cells: [Duration; 3] = [Duration::ZERO; 3];
        let order = if round % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
        for which in order {
            let start = Instant::now();
            black_box(match which {
                0 => with_dynatree(&records),
                1 => by_hand(&records),
                _ => conversion_only(&records),
            });
            cells[which] = start.elapsed();
        }
        if round > 0 {
            for (t, c) in times.iter_mut().zip(cells) {
                t.push(c);
            }
        }
    }
    println!(
        "{} records of {n} objects (creations, updates, deletions, a move of 1/10 of them)\n",
        records.len()
    );
    println!("| decoder | changes out | median ms | best ms | records/s (median) |");
    println!("|---|---|---|---|---|");
    let mut medians = [0.0; 3];
    for (i, (name, out)) in [
        (
            "dynatree: `from_stream_record` + `watch::decode::<Link>`",
            typed,
        ),
        ("by hand: keys checked, images through `serde_dynamo`", hand),
        (
            "of the first: `from_stream_record` alone (records out)",
            converted,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut t = times[i].clone();
        t.sort();
        let median = t[t.len() / 2].as_secs_f64();
        medians[i] = median;
        println!(
            "| {name} | {out} | {:.1} | {:.1} | {:.0} |",
            median * 1e3,
            t[0].as_secs_f64() * 1e3,
            records.len() as f64 / median
        );
    }
    println!(
        "\ndynatree takes {:.2}x the time of the hand decoding ({:.0}% of it the conversion of the SDK's record); it yields one change per moved object where the hand decoding yields two (a removal and an insert), and drops the bookkeeping records (holds, releases) the hand decoding hands on.",
        medians[0] / medians[1],
        100.0 * medians[2] / medians[0]
    );
}
