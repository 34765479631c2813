//! A merge of check parts split into buckets (`Check::bucket`, `bucket_depth`) against one
//! check: on random tables of listing rows, objects and links written raw (unreachable
//! objects, broken closures, empty listings, dangling links, cycles and long chains across
//! buckets), the buckets' reports hold between them exactly the violations of one check.

use dynatree::Tree;
use dynatree::storage::{Condition, DEFAULT_RESERVED, Item, Key, Storage, Value};
use dynatree_testing::FakeTable;
use proptest::prelude::*;

/// A path of 1 to 4 components over a small alphabet (so that paths meet).
fn path() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c")], 1..=4)
        .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

#[derive(Debug, Clone)]
enum Row {
    Listing(Vec<String>),
    Object(Vec<String>),
    Link(Vec<String>, Vec<String>),
}

fn row() -> impl Strategy<Value = Row> {
    prop_oneof![
        path().prop_map(Row::Listing),
        path().prop_map(Row::Object),
        (path(), path()).prop_map(|(l, t)| Row::Link(l, t)),
    ]
}

fn enc(p: &[String]) -> String {
    p.iter().map(|c| format!("{DEFAULT_RESERVED}{c}")).collect()
}

fn item(r: &Row) -> Item {
    let sc = DEFAULT_RESERVED.to_string();
    match r {
        Row::Listing(p) => {
            let (last, parent) = p.split_last().expect("a component");
            Key::new(format!("{}{sc}", enc(parent)), last.clone()).into_item()
        }
        Row::Object(p) => {
            let mut i = Key::new(enc(p), sc).into_item();
            i.insert("v", Value::N("1".into()));
            i
        }
        Row::Link(l, t) => {
            let mut i = Key::new(enc(l), sc.clone()).into_item();
            i.insert(sc, Value::S(enc(t)));
            i
        }
    }
}

async fn differential(rows: Vec<Row>) -> Result<(), TestCaseError> {
    let table = FakeTable::new();
    let tree = Tree::new(table.clone());
    tree.create_table().await.expect("table");
    for r in &rows {
        table
            .put_item(item(r), Condition::Always)
            .await
            .expect("row");
    }
    let zero = std::time::Duration::ZERO;
    let whole = tree
        .check()
        .grace(zero)
        .segments(2)
        .run()
        .await
        .expect("check");
    let mut want: Vec<String> = whole.violations().iter().map(|v| v.to_string()).collect();
    want.sort();
    let parts = vec![
        tree.check()
            .segments(2)
            .part(0..1)
            .run_part()
            .await
            .expect("part"),
        tree.check()
            .segments(2)
            .part(1..2)
            .run_part()
            .await
            .expect("part"),
    ];
    for (n, depth) in [(2, 1), (3, 2), (4, 3)] {
        let mut union = Vec::new();
        for i in 0..n {
            let report = tree
                .check()
                .grace(zero)
                .bucket(i, n)
                .bucket_depth(depth)
                .merge(parts.clone())
                .await
                .expect("merge");
            union.extend(report.violations().iter().map(|v| v.to_string()));
        }
        union.sort();
        prop_assert_eq!(&union, &want, "{} buckets of depth {}", n, depth);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn buckets_of_a_merge_report_what_one_check_does(rows in proptest::collection::vec(row(), 0..24)) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(differential(rows))?;
    }
}
