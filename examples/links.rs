//! The multi-tenant link-sharing app of the dynamotree README, on dynatree's untyped tree API.
//!
//! Accounts own short links; two symbolic links make lookups one request each:
//! `AccountsByEmail/<email>` -> `Accounts/<id>` and `Links/<short>` -> the link under its
//! account, so a redirect needs no account id.
//!
//! Runs on the in-memory `FakeTable` by default and prints every step and the rows it wrote.
//! With `DYNATREE_TABLE=<name>` it runs on DynamoDB through the standard AWS configuration
//! chain (creating the table if missing); for DynamoDB Local, also set
//! `AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000`, `AWS_REGION` and test credentials.

use dynatree::{DynamoDbTable, Path, Storage, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Account {
    name: String,
    email: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Link {
    target: String,
    created: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("DYNATREE_TABLE") {
        Ok(table) if !table.is_empty() => {
            let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let client = aws_sdk_dynamodb::Client::new(&config);
            println!("# backend: DynamoDB table {table:?}");
            run(Tree::new(DynamoDbTable::new(client, table))).await
        }
        _ => {
            println!("# backend: in-memory FakeTable (set DYNATREE_TABLE to use DynamoDB)");
            run(Tree::new(FakeTable::new())).await
        }
    }
}

async fn run<S: Storage>(tree: Tree<S>) -> Result<(), Box<dyn std::error::Error>> {
    tree.create_table().await?;
    println!("create_table: ready (hash key `Key`, range key `Child`)");

    let account = Account {
        name: "Alice".into(),
        email: "alice@example.com".into(),
    };
    tree.put(["Accounts", "123456"], &account).await?;
    println!("put /Accounts/123456 {account:?}");

    let link = Link {
        target: "http://example.com/".into(),
        created: 1_700_000_000,
    };
    tree.put(["Accounts", "123456", "Links", "xyzpdq"], &link)
        .await?;
    println!("put /Accounts/123456/Links/xyzpdq {link:?}");

    tree.put_link(
        ["AccountsByEmail", "alice@example.com"],
        ["Accounts", "123456"],
    )
    .await?;
    println!("put_link /AccountsByEmail/alice@example.com -> /Accounts/123456");
    tree.put_link(
        ["Links", "xyzpdq"],
        ["Accounts", "123456", "Links", "xyzpdq"],
    )
    .await?;
    println!("put_link /Links/xyzpdq -> /Accounts/123456/Links/xyzpdq");

    let by_email: Option<Account> = tree.get(["AccountsByEmail", "alice@example.com"]).await?;
    println!("get /AccountsByEmail/alice@example.com (follows the link) = {by_email:?}");
    let redirect: Option<Link> = tree.get(["Links", "xyzpdq"]).await?;
    println!(
        "redirect /Links/xyzpdq -> {}",
        redirect.map_or("(none)".into(), |l| l.target)
    );

    let top: Vec<String> = tree.list(Path::root()).try_collect().await?;
    println!("list / = {top:?}");
    let links: Vec<dynatree::Entry<Link>> = tree
        .list_items(["Accounts", "123456", "Links"])
        .try_collect()
        .await?;
    for entry in &links {
        println!(
            "list_items /Accounts/123456/Links: {} = {:?}",
            entry.name, entry.value
        );
    }

    match tree.put(["Accounts", "bad¦id"], &account).await {
        Err(e) => println!("put /Accounts/bad¦id refused: {e} (kind {:?})", e.kind()),
        Ok(()) => return Err("a reserved character was accepted".into()),
    }

    println!("\nrows in the table (the dynamotree layout):");
    print_rows(&tree).await?;

    tree.delete(["Links", "xyzpdq"]).await?;
    println!("\ndelete /Links/xyzpdq: the link row and the now empty /Links listing are gone");
    print_rows(&tree).await?;
    Ok(())
}

async fn print_rows<S: Storage>(tree: &Tree<S>) -> Result<(), Box<dyn std::error::Error>> {
    let mut rows: Vec<dynatree::Item> = tree.scan().try_collect().await?;
    rows.sort_by(|a, b| {
        (a.get_s("Key"), a.get_s("Child")).cmp(&(b.get_s("Key"), b.get_s("Child")))
    });
    for row in rows {
        let others: Vec<String> = row
            .iter()
            .filter(|(n, _)| *n != "Key" && *n != "Child")
            .map(|(n, v)| match v {
                dynatree::Value::S(s) => format!("{n}={s:?}"),
                dynatree::Value::N(x) => format!("{n}={x}"),
                other => format!("{n}={other:?}"),
            })
            .collect();
        let line = format!(
            "  Key={:<38} Child={:<20} {}",
            format!("{:?}", row.get_s("Key").unwrap_or_default()),
            format!("{:?}", row.get_s("Child").unwrap_or_default()),
            others.join(" ")
        );
        println!("{}", line.trim_end());
    }
    Ok(())
}
