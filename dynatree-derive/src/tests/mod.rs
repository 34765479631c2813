//! Expansion snapshots: the derive's output for each attribute combination, pretty-printed.
//! Bless with `INSTA_UPDATE=always cargo test -p dynatree-derive` and review `git diff`.

use proc_macro2::TokenStream;
use quote::quote;

fn expand(input: TokenStream) -> String {
    let out = crate::expand::derive(input);
    let file: syn::File = syn::parse2(out).expect("the expansion parses as items");
    prettyplease::unparse(&file)
}

macro_rules! snapshot {
    ($name:ident, $($input:tt)*) => {
        #[test]
        fn $name() {
            let input = quote!($($input)*);
            insta::with_settings!({ description => input.to_string(), omit_expression => true }, {
                insta::assert_snapshot!(stringify!($name), expand(input));
            });
        }
    };
}

snapshot!(
    basic,
    #[dynatree(path = "Accounts/{id}")]
    pub struct Account {
        id: String,
        name: String,
    }
);

snapshot!(
    parent_and_version,
    #[dynatree(path = "Accounts/{account_id}/Links/{short}", parent = Account)]
    pub(crate) struct Link {
        account_id: String,
        short: String,
        target: String,
        #[dynatree(version)]
        version: u64,
    }
);

snapshot!(
    reserved_and_crate_path,
    #[dynatree(
        path = "Sensors/{sensor}/Readings/{at}",
        reserved = "|",
        crate = "my::dynatree"
    )]
    struct Reading {
        sensor: u32,
        at: i64,
        value: f64,
    }
);

snapshot!(
    serde_rename_all_version,
    #[serde(rename_all = "camelCase")]
    #[dynatree(path = "Users/{user_id}")]
    struct User {
        user_id: String,
        #[dynatree(version)]
        row_version: u64,
    }
);

snapshot!(
    secondary_indexes,
    #[dynatree(
        path = "Users/{id}",
        index(name = "by_email", hash = email),
        index(name = "by-team", hash = team, range = joined)
    )]
    pub struct User {
        id: String,
        email: String,
        team: String,
        joined: u32,
    }
);

snapshot!(
    raw_identifier_fields,
    #[dynatree(
        path = "Kinds/{type}/Items/{ref}",
        index(name = "by_match", hash = r#match, range = r#type)
    )]
    struct Item {
        r#type: String,
        r#ref: u32,
        r#match: String,
    }
);

snapshot!(
    serde_attributes_that_break_keys,
    #[dynatree(path = "Accounts/{id}", index(name = "by_email", hash = email))]
    #[serde(tag = "Key", transparent, from = "A", try_from = "A", into = "A")]
    struct Account {
        #[serde(skip, skip_serializing, skip_deserializing)]
        id: String,
        #[serde(rename = "mail", skip_serializing_if = "String::is_empty")]
        email: String,
        #[serde(flatten)]
        rest: Rest,
        #[serde(skip, default)]
        cache: String,
    }
);

snapshot!(
    errors_emit_a_stub_impl,
    #[dynatree(path = "Accounts//{missing}")]
    struct Broken {
        id: String,
    }
);

#[test]
fn never_panics_on_odd_input() {
    // Non-struct shapes, no attributes, garbage attributes: errors, never a panic.
    for input in [
        quote!(
            enum E {
                A,
            }
        ),
        quote!(
            struct S;
        ),
        quote!(
            struct T(u8);
        ),
        quote!(
            #[dynatree]
            struct U {
                a: String,
            }
        ),
        quote!(
            #[dynatree(path)]
            struct V {
                a: String,
            }
        ),
        quote!(
            #[dynatree(path = 5)]
            struct W {
                a: String,
            }
        ),
        quote!(
            #[dynatree(path = "")]
            struct X {
                a: String,
            }
        ),
        quote!(
            #[serde(tag, content = 5, rename_all(serialize), from)]
            #[dynatree(path = "{r#a}")]
            struct Z {
                #[serde(skip = , flatten(), rename(deserialize = "b"))]
                r#a: String,
            }
        ),
        quote!(
            #[dynatree(path = "{a}", reserved = "")]
            struct Y {
                a: String,
            }
        ),
    ] {
        let out = crate::expand::derive(input).to_string();
        assert!(out.contains("compile_error"), "{out}");
    }
}
