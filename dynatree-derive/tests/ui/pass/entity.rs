use dynatree::entity::Unknown;
use dynatree::{Entity, Hierarchical, Path};
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
#[dynatree(path = "Accounts/{account}")]
struct Account {
    account: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
#[dynatree(path = "Accounts/{account}/Links/{short}")]
struct Link {
    account: String,
    short: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, PartialEq)]
#[dynatree(path = "Accounts/{account}/Folders/{folder}")]
struct Folder {
    account: String,
    folder: u64,
}

/// Different lengths, and different literals at one length, do not overlap.
#[derive(Entity, Debug, PartialEq)]
enum AccountItem {
    Account(Account),
    Link(Link),
    Folder(Folder),
    #[dynatree(other)]
    Other(Unknown),
}

/// Without an `other` variant; through a renamed crate path.
#[derive(Entity, Debug, PartialEq)]
#[dynatree(crate = "::dynatree")]
enum OnlyLinks {
    Link(Link),
}

fn main() {
    assert_eq!(AccountItem::TEMPLATES.len(), 3);
    let row = dynatree::storage::Item::new();
    let path = Path::parse("/Else").unwrap();
    assert!(matches!(AccountItem::decode(&path, row.clone()), Ok(Some(AccountItem::Other(_)))));
    assert!(matches!(OnlyLinks::decode(&path, row), Ok(None)));
}
