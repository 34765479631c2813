//! Hygiene: the derive's output compiles in hostile scopes, without warnings.
#![deny(warnings)]
#![deny(unused_qualifications, clippy::pedantic)]
#![allow(dead_code, clippy::struct_field_names)]

mod shadows {
    // Local items named like the prelude's: generated code must not pick them up.
    struct Result;
    struct Ok;
    struct Err;
    struct Option;
    struct Some;
    struct None;
    struct Clone;
    struct Vec;
    struct String;
    struct Display;
    struct Formatter;
    struct Ordering;
    struct Serialize;
    struct Deserialize;
    mod serde {}
    mod core {}

    #[derive(dynatree::Hierarchical, ::serde::Serialize, ::serde::Deserialize)]
    #[dynatree(
        path = "Accounts/{id}/Links/{short}",
        index(name = "by_target", hash = target)
    )]
    pub(super) struct Link {
        id: ::std::string::String,
        short: u32,
        target: ::std::string::String,
        #[dynatree(version)]
        version: u64,
    }
}

mod no_prelude {
    #![no_implicit_prelude]

    #[derive(::dynatree::Hierarchical, ::serde::Serialize, ::serde::Deserialize)]
    #[dynatree(path = "Accounts/{id}")]
    pub struct Account {
        pub id: ::std::string::String,
        pub name: ::std::string::String,
    }
}

mod reexported {
    mod inner {
        pub use dynatree as dt;
    }

    #[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize)]
    #[dynatree(path = "Things/{id}", crate = "inner::dt")]
    struct Thing {
        id: i64,
    }
}

mod parent_in_scope {
    // `Hierarchical` and serde's traits imported by name: the generated `__dynatree::...` paths,
    // the parent check's and the key structs' serde derives included, must not trip
    // `unused_qualifications`.
    use dynatree::Hierarchical;
    use serde::{Deserialize, Serialize};

    #[derive(Hierarchical, Serialize, Deserialize)]
    #[dynatree(path = "Accounts/{id}")]
    pub struct Account {
        pub id: String,
    }

    #[derive(Hierarchical, Serialize, Deserialize)]
    #[dynatree(path = "Accounts/{id}/Links/{short}", parent = Account)]
    pub struct Link {
        pub id: String,
        pub short: String,
    }
}

mod raw_identifiers {
    #[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize)]
    #[dynatree(
        path = "Kinds/{type}/Items/{ref}",
        index(name = "by_match", hash = r#match)
    )]
    pub struct Item {
        pub r#type: String,
        pub r#ref: String,
        pub r#match: String,
    }
}

#[test]
fn parent_and_raw_identifier_keys() {
    use dynatree::Hierarchical;
    let key = parent_in_scope::LinkKey {
        id: "a".into(),
        short: "b".into(),
    };
    assert_eq!(key.path().unwrap().to_string(), "/Accounts/a/Links/b");
    let item = raw_identifiers::Item {
        r#type: "book".into(),
        r#ref: "r1".into(),
        r#match: "m".into(),
    };
    let key = item.key();
    assert_eq!(key.path().unwrap().to_string(), "/Kinds/book/Items/r1");
    assert_eq!(
        raw_identifiers::Item::key_from_path(&key.path().unwrap()).unwrap(),
        key
    );
    assert_eq!(
        item.index_keys(),
        [raw_identifiers::Item::index_by_match("m")]
    );
}

#[test]
fn generated_items_work() {
    use dynatree::Hierarchical;
    let key = no_prelude::AccountKey { id: "a".into() };
    assert_eq!(key.path().unwrap().to_string(), "/Accounts/a");
    assert_eq!(
        no_prelude::Account::key_from_path(&key.path().unwrap()).unwrap(),
        key
    );
    let mut set = std::collections::HashSet::new();
    set.insert(key.clone());
    assert!(set.contains(&key));
}

#[test]
fn key_structs_display_serialize_and_order() {
    use std::collections::{BTreeSet, HashMap};

    let key = shadows::LinkKey {
        id: "a".into(),
        short: 7,
    };
    assert_eq!(key.to_string(), key.path().unwrap().to_string());
    assert_eq!(key.to_string(), "/Accounts/a/Links/0000000007");
    assert_eq!(key.collection().to_string(), "/Accounts/a/Links");
    let bad = shadows::LinkKey {
        id: String::new(),
        short: 7,
    };
    assert!(bad.path().is_err());
    assert_eq!(bad.to_string(), "/Accounts//Links/0000000007");

    let json = serde_json::to_value(&key).unwrap();
    assert_eq!(json, serde_json::json!({"id": "a", "short": 7}));
    assert_eq!(
        serde_json::from_value::<shadows::LinkKey>(json).unwrap(),
        key
    );
    let coll = serde_json::to_value(key.collection()).unwrap();
    assert_eq!(coll, serde_json::json!({"id": "a"}));
    assert_eq!(
        serde_json::from_value::<shadows::LinkCollection>(coll).unwrap(),
        key.collection()
    );
    // Renamed and raw-identifier fields keep the names the item is stored under.
    let raw = raw_identifiers::ItemKey {
        r#type: "t".into(),
        r#ref: "r".into(),
    };
    assert_eq!(
        serde_json::to_value(&raw).unwrap(),
        serde_json::json!({"type": "t", "ref": "r"})
    );

    let mut map = HashMap::new();
    map.insert(key.clone(), 1);
    assert_eq!(map.get(&key), Some(&1));

    // The order of the keys is the order of their paths.
    let keys: BTreeSet<shadows::LinkKey> = [("b", 1), ("a", 10), ("a", 9), ("a", 100)]
        .into_iter()
        .map(|(id, short)| shadows::LinkKey {
            id: id.into(),
            short,
        })
        .collect();
    let in_order: Vec<String> = keys.iter().map(ToString::to_string).collect();
    let mut by_path = in_order.clone();
    by_path.sort();
    assert_eq!(in_order, by_path);
    assert_eq!(
        in_order,
        [
            "/Accounts/a/Links/0000000009",
            "/Accounts/a/Links/0000000010",
            "/Accounts/a/Links/0000000100",
            "/Accounts/b/Links/0000000001",
        ]
    );
}

#[test]
fn index_constructors_take_borrowed_forms() {
    let owned = String::from("a@b");
    let by_str = shadows::Link::index_by_target("a@b");
    assert_eq!(by_str, shadows::Link::index_by_target(&owned));
    assert_eq!(by_str, shadows::Link::index_by_target(owned.as_str()));
    assert_eq!(
        by_str,
        shadows::Link::index_by_target(&std::borrow::Cow::Borrowed("a@b"))
    );
    assert_eq!(by_str.hash(), "a@b");
}
