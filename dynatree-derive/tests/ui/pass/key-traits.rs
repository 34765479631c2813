// The generated key and collection structs: Display (the path), serde (a struct of the fields,
// under the names the item stores them under), Hash/Eq (a HashMap key) and Ord (the order of
// the paths); index constructors take borrowed forms.
use std::collections::{BTreeSet, HashMap};

use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[dynatree(
    path = "Accounts/{account_id}/Links/{short}",
    index(name = "by_target", hash = target_url),
    index(name = "by_clicks", hash = clicks)
)]
struct Link {
    account_id: String,
    short: u64,
    target_url: String,
    clicks: u32,
}

fn main() {
    let key = LinkKey {
        account_id: "a1".into(),
        short: 7,
    };
    assert_eq!(key.to_string(), key.path().unwrap().to_string());
    assert_eq!(key.to_string(), "/Accounts/a1/Links/00000000000000000007");
    assert_eq!(format!("{}", key.collection()), "/Accounts/a1/Links");

    // Display never fails, even where `path()` does.
    let bad = LinkKey {
        account_id: String::new(),
        short: 7,
    };
    assert!(bad.path().is_err());
    assert_eq!(bad.to_string(), "/Accounts//Links/00000000000000000007");

    let json = serde_json::to_string(&key).unwrap();
    assert_eq!(json, r#"{"accountId":"a1","short":7}"#);
    assert_eq!(serde_json::from_str::<LinkKey>(&json).unwrap(), key);
    let coll = key.collection();
    let json = serde_json::to_string(&coll).unwrap();
    assert_eq!(json, r#"{"accountId":"a1"}"#);
    assert_eq!(serde_json::from_str::<LinkCollection>(&json).unwrap(), coll);

    let mut clicks = HashMap::new();
    clicks.insert(key.clone(), 1);
    *clicks.entry(key.clone()).or_insert(0) += 1;
    assert_eq!(clicks[&key], 2);

    // The order of the paths: placeholders in template order, each in its own order.
    let keys: BTreeSet<LinkKey> = [("b", 1), ("a", 10), ("a", 9)]
        .into_iter()
        .map(|(a, s)| LinkKey {
            account_id: a.into(),
            short: s,
        })
        .collect();
    let paths: Vec<String> = keys.iter().map(ToString::to_string).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    assert!(
        LinkCollection {
            account_id: "a".into()
        } < LinkCollection {
            account_id: "b".into()
        }
    );

    // Index constructors: a `&str`, a `&String`, and a literal for an integer field.
    let owned = String::from("http://example.com/");
    assert_eq!(
        Link::index_by_target("http://example.com/"),
        Link::index_by_target(&owned)
    );
    assert_eq!(
        Link::index_by_target(owned.as_str()).hash(),
        "http://example.com/"
    );
    assert_eq!(Link::index_by_clicks(&3).hash(), "0000000003");
    let link = Link {
        account_id: "a1".into(),
        short: 7,
        target_url: owned.clone(),
        clicks: 3,
    };
    assert_eq!(
        link.index_keys(),
        [Link::index_by_target(&owned), Link::index_by_clicks(&3u32)]
    );
}
