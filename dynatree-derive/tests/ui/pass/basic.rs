use dynatree::Hierarchical;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account_id}/Links/{short}", parent = Account)]
struct Link {
    account_id: String,
    short: String,
    target: String,
    #[dynatree(version)]
    version: u64,
}

#[allow(dead_code)]
fn uses() -> dynatree::Result<()> {
    let key = LinkKey { account_id: "a".into(), short: "b".into() };
    let _: dynatree::Path = key.path()?;
    let _: LinkCollection = key.collection();
    let _: AccountKey = AccountKey { id: "a".into() };
    Ok(())
}

fn main() {}
