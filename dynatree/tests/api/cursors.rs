//! Cursors of collection queries, index queries and descendants: a cursor a query cannot have
//! returned (another query's, or a position that is empty, over DynamoDB's key limits, with
//! the reserved character, outside the range condition or the prefix) is refused with
//! `InvalidArgument` before any request; a valid cursor continues where its page ended.
//!
//! Positions are forged the way a client could: the cursor's text is decoded, its query
//! fingerprint kept and its position replaced.

use dynatree::{Cursor, ErrorKind, Hierarchical, Strategy, Tree, TypedPage};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(
    path = "Shops/{shop}/Orders/{day}",
    index(name = "by_customer", hash = customer, range = day)
)]
struct Order {
    shop: String,
    day: String,
    customer: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

const DAYS: [&str; 5] = ["01-30", "02-01", "02-02", "02-03", "03-01"];

async fn setup() -> (FakeTable, Tree) {
    let table = FakeTable::new();
    let tree = Tree::builder(table.clone())
        .indexes_of::<Order>()
        .path_index(1)
        .build()
        .unwrap();
    tree.create_table().await.unwrap();
    let orders = tree.repo::<Order>();
    for shop in ["s", "t"] {
        for day in DAYS {
            orders
                .put(&Order {
                    shop: shop.into(),
                    day: day.into(),
                    customer: format!("c-{shop}"),
                })
                .await
                .unwrap();
        }
    }
    (table, tree)
}

fn shop(s: &str) -> OrderCollection {
    OrderCollection { shop: s.into() }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn decode(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            let v = ALPHABET.iter().position(|a| a == c).expect("base64url") as u32;
            n |= v << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

fn encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// The parts of a cursor's position (after its version byte and query fingerprint).
fn parts(cursor: &Cursor) -> Vec<String> {
    let bytes = decode(&cursor.to_string());
    let mut rest = &bytes[9..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        out.push(String::from_utf8(rest[4..4 + len].to_vec()).unwrap());
        rest = &rest[4 + len..];
    }
    out
}

/// `cursor` of the same query, at the position `parts`.
fn forge(cursor: &Cursor, parts: &[String]) -> Cursor {
    let mut bytes = decode(&cursor.to_string())[..9].to_vec();
    for p in parts {
        bytes.extend_from_slice(&u32::try_from(p.len()).unwrap().to_be_bytes());
        bytes.extend_from_slice(p.as_bytes());
    }
    encode(&bytes).parse().expect("a well-formed cursor")
}

/// The error of a stream that must fail before sending anything.
async fn refused<T: Send + 'static>(
    table: &FakeTable,
    pages: BoxStream<'static, dynatree::Result<TypedPage<T>>>,
) -> dynatree::Error {
    table.reset_metrics();
    let result: dynatree::Result<Vec<TypedPage<T>>> = pages.try_collect().await;
    let Err(e) = result else {
        panic!("the cursor was taken");
    };
    assert_eq!(table.metrics().total_requests(), 0, "nothing sent: {e}");
    e
}

fn days(pages: &[TypedPage<Order>]) -> Vec<String> {
    pages
        .iter()
        .flat_map(|p| p.items.iter().map(|o| o.day.clone()))
        .collect()
}

#[tokio::test]
async fn collection_cursors_outside_their_query_are_refused() {
    let (table, tree) = setup().await;
    let orders = tree.repo::<Order>();
    let feb = |s: &str| {
        orders
            .query(&shop(s))
            .between("02-01", "02-03")
            .page_size(1)
    };
    let first = feb("s").pages().try_next().await.unwrap().unwrap();
    let cursor = first.cursor.expect("more follow");
    assert_eq!(parts(&cursor), ["02-01"]);

    // A valid cursor continues after its page.
    let rest: Vec<_> = feb("s")
        .start_after(cursor.clone())
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(days(&rest), ["02-02", "02-03"]);

    let mut cases: Vec<(Cursor, &str)> = vec![
        (
            forge(&cursor, &["01-30".into()]),
            "outside the query's range",
        ),
        (
            forge(&cursor, &["03-01".into()]),
            "outside the query's range",
        ),
        (forge(&cursor, &[String::new()]), "empty"),
        (forge(&cursor, &["0".repeat(1025)]), "1025 bytes"),
        (forge(&cursor, &["02-02¦x".into()]), "reserved character"),
        (forge(&cursor, &[]), "another query"),
        (
            forge(&cursor, &["02-02".into(), "02-03".into()]),
            "another query",
        ),
    ];
    // Another shop's listing: another partition, another query.
    let other = feb("t").pages().try_next().await.unwrap().unwrap();
    cases.push((other.cursor.expect("more follow"), "another query"));
    for (c, why) in cases {
        let e = refused(&table, feb("s").start_after(c).pages()).await;
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{why}: {e}");
        assert!(e.to_string().contains(why), "{why}: {e}");
    }
    // Without a range condition, a position of 1,025 bytes or an empty one is still refused.
    let all = || orders.query(&shop("s")).page_size(2);
    let c = all()
        .pages()
        .try_next()
        .await
        .unwrap()
        .unwrap()
        .cursor
        .unwrap();
    for bad in [String::new(), "9".repeat(1025)] {
        let e = refused(&table, all().start_after(forge(&c, &[bad])).pages()).await;
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    // Any position a listing can hold is valid, present or not: the rest follows it.
    let rest: Vec<_> = all()
        .start_after(forge(&c, &["02-015".into()]))
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(days(&rest), ["02-02", "02-03", "03-01"]);
    let rest: Vec<_> = all()
        .start_after(forge(&c, &["0".repeat(1024)]))
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(days(&rest), ["01-30", "02-01", "02-02", "02-03", "03-01"]);
    // A cursor at the condition's last value has nothing after it: no page, nothing sent.
    table.reset_metrics();
    let end: Vec<_> = feb("s")
        .start_after(forge(&cursor, &["02-03".into()]))
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert!(end.is_empty());
    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn index_cursors_outside_their_query_are_refused() {
    let (table, tree) = setup().await;
    let orders = tree.repo::<Order>();
    let feb = |c: &str| {
        orders
            .index(Order::index_by_customer(c))
            .between(&"02-01".to_owned(), &"02-03".to_owned())
            .page_size(1)
    };
    let first = feb("c-s").pages().try_next().await.unwrap().unwrap();
    let cursor = first.cursor.expect("more follow");
    let at = parts(&cursor);
    assert_eq!(at[1], "¦");
    assert_eq!(at[3], "02-01");

    let rest: Vec<_> = feb("c-s")
        .start_after(cursor.clone())
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(days(&rest), ["02-02", "02-03"]);

    let with = |i: usize, v: String| {
        let mut p = at.clone();
        p[i] = v;
        forge(&cursor, &p)
    };
    let cases: Vec<(Cursor, &str)> = vec![
        (with(3, "01-30".into()), "outside the query's range"),
        (with(3, "03-01".into()), "outside the query's range"),
        (with(3, String::new()), "empty"),
        (with(3, "0".repeat(1025)), "1025 bytes"),
        (with(3, "02-02¦".into()), "reserved character"),
        // Another customer's partition of the index.
        (with(2, at[2].replace("c-s", "c-t")), "another query"),
        (with(0, String::new()), "not an object row"),
        (with(0, "Shops".into()), "not an object row"),
        (with(1, "02-01".into()), "not an object row"),
        (forge(&cursor, &at[..3]), "another query"),
    ];
    for (c, why) in cases {
        let e = refused(&table, feb("c-s").start_after(c).pages()).await;
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{why}: {e}");
        assert!(e.to_string().contains(why), "{why}: {e}");
    }
    // Through a scope, a position outside the scope is not one of its rows.
    let scoped = tree.scope(["Tenants", "t1"]).unwrap();
    let sorders = scoped.repo::<Order>();
    for day in DAYS {
        sorders
            .put(&Order {
                shop: "s".into(),
                day: day.into(),
                customer: "c-s".into(),
            })
            .await
            .unwrap();
    }
    let sfeb = || {
        sorders
            .index(Order::index_by_customer("c-s"))
            .between(&"02-01".to_owned(), &"02-03".to_owned())
            .page_size(1)
    };
    let scursor = sfeb()
        .pages()
        .try_next()
        .await
        .unwrap()
        .unwrap()
        .cursor
        .unwrap();
    let mut sat = parts(&scursor);
    assert!(sat[0].starts_with("¦Tenants¦t1¦"), "{sat:?}");
    sat[0] = at[0].clone();
    let e = refused(&table, sfeb().start_after(forge(&scursor, &sat)).pages()).await;
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let rest: Vec<_> = sfeb()
        .start_after(scursor)
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(days(&rest), ["02-02", "02-03"]);

    // At the condition's last value: nothing follows, nothing is sent.
    table.reset_metrics();
    let end: Vec<_> = feb("c-s")
        .start_after(with(3, "02-03".into()))
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert!(end.is_empty());
    assert_eq!(table.metrics().total_requests(), 0);
}

#[tokio::test]
async fn descendants_cursors_outside_their_query_are_refused() {
    let (table, tree) = setup().await;
    for p in [
        &["a"][..],
        &["a", "b"],
        &["a", "b", "c"],
        &["a", "d"],
        &["z"],
    ] {
        tree.put(p, &V { v: 0 }).await.unwrap();
    }
    for strategy in [Strategy::Walk, Strategy::PathIndex] {
        let under_a = || tree.descendants(["a"]).strategy(strategy).page_size(1);
        let first = under_a().pages().try_next().await.unwrap().unwrap();
        let cursor = first.cursor.expect("more follow");
        assert_eq!(parts(&cursor), ["¦a¦b"]);
        let rest: Vec<_> = under_a()
            .start_after(cursor.clone())
            .items()
            .try_collect()
            .await
            .unwrap();
        let paths: Vec<String> = rest.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(paths, ["/a/b/c", "/a/d"], "{strategy:?}");

        let cases: Vec<(String, &str)> = vec![
            (String::new(), "empty"),
            ("¦z".into(), "outside the query's prefix"),
            ("¦a".into(), "outside the query's prefix"),
            ("a¦b".into(), "not an object's path"),
            ("¦a¦¦b".into(), "not an object's path"),
        ];
        for (position, why) in cases {
            let c = forge(&cursor, &[position]);
            let e = refused(&table, under_a().start_after(c).pages()).await;
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidArgument,
                "{strategy:?} {why}: {e}"
            );
            assert!(e.to_string().contains(why), "{strategy:?} {why}: {e}");
        }
        // A position of 1,025 bytes: over the path index's range key limit; the walk (whose
        // keys are the path's components) takes it.
        let long = format!("¦a¦{}", "x".repeat(1020));
        assert_eq!(long.len(), 1025);
        let result: dynatree::Result<Vec<_>> = under_a()
            .start_after(forge(&cursor, &[long]))
            .items()
            .try_collect()
            .await;
        match strategy {
            Strategy::PathIndex => {
                let e = result.unwrap_err();
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                assert!(e.to_string().contains("1025 bytes"), "{e}");
            }
            _ => assert!(result.unwrap().is_empty()),
        }
    }
}
