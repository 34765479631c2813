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

    #[derive(dynatree::Hierarchical, serde::Serialize, serde::Deserialize)]
    #[dynatree(path = "Accounts/{id}/Links/{short}")]
    struct Link {
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
    // `Hierarchical` imported by name: the generated `__dynatree::Hierarchical` paths, the
    // parent check's included, must not trip `unused_qualifications`.
    use dynatree::Hierarchical;

    #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
    #[dynatree(path = "Accounts/{id}")]
    pub struct Account {
        pub id: String,
    }

    #[derive(Hierarchical, serde::Serialize, serde::Deserialize)]
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
        [raw_identifiers::Item::index_by_match(&"m".into())]
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
