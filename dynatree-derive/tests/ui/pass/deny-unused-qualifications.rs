#![deny(unused_qualifications)]

use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(
    path = "Accounts/{account_id}/Links/{short}",
    parent = Account,
    index(name = "by_target", hash = target)
)]
struct Link {
    account_id: String,
    short: String,
    target: String,
    #[dynatree(version)]
    version: u64,
}

fn main() {
    let key = LinkKey {
        account_id: "a".into(),
        short: "b".into(),
    };
    assert_eq!(key.path().unwrap().to_string(), "/Accounts/a/Links/b");
    let _ = (Account::TEMPLATE, Link::index_by_target(&"t".to_owned()));
}
