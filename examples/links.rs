//! The multi-tenant link-sharing app of the dynamotree README, with `#[derive(Hierarchical)]`.
//!
//! Accounts own short links. Two symbolic links make the common lookups one call each:
//! `AccountsByEmail/<email>` -> `Accounts/<id>` (log-in), and `Links/<short>` ->
//! `Accounts/<id>/Links/<short>` (a redirect, without knowing the account).
//!
//! Runs on the in-memory `FakeTable` by default and prints every step and the rows it wrote.
//! With `DYNATREE_TABLE=<name>` it runs on DynamoDB through the standard AWS configuration
//! chain (creating the table if missing); for DynamoDB Local, also set
//! `AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000`, `AWS_REGION` and test credentials.

use dynatree::{DynamoDbTable, Hierarchical, Patch, Tree};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Hierarchical, Debug, Clone, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{id}")]
struct Account {
    id: String,
    name: String,
    email: String,
}

#[derive(Hierarchical, Debug, Clone, Serialize, Deserialize)]
#[dynatree(path = "Accounts/{account_id}/Links/{short}", parent = Account)]
struct Link {
    account_id: String,
    short: String,
    target: String,
    created: u64,
    /// Redirects served: counted with an atomic partial update.
    #[serde(default)]
    hits: u64,
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

/// Creates a link and the `Links/<short>` symbolic link that makes redirects one lookup.
async fn shorten(tree: &Tree, link: &Link) -> dynatree::Result<()> {
    tree.repo::<Link>().create(link).await?;
    tree.put_link(["Links", &link.short], link.key().path()?)
        .await
}

/// A redirect: one read, no account id needed; the hit is counted with a partial update (an
/// atomic `ADD`, so concurrent redirects all count).
async fn redirect(tree: &Tree, short: &str) -> dynatree::Result<Option<String>> {
    let Some(link) = tree.get::<Link>(["Links", short]).await? else {
        return Ok(None);
    };
    tree.repo::<Link>()
        .patch(Patch::new(&link.key()).add(Link::FIELDS.hits, 1))
        .await?;
    Ok(Some(link.target))
}

async fn run(tree: Tree) -> Result<(), Box<dyn std::error::Error>> {
    tree.create_table().await?;
    println!("create_table: ready (hash key `Key`, range key `Child`)");
    let accounts = tree.repo::<Account>();
    let links = tree.repo::<Link>();

    let alice = Account {
        id: "123456".into(),
        name: "Alice".into(),
        email: "alice@example.com".into(),
    };
    match accounts.create(&alice).await {
        Ok(()) => println!("create {} {alice:?}", alice.key().path()?),
        Err(e) if e.is_already_exists() => println!("{} exists already", alice.key().path()?),
        Err(e) => return Err(e.into()),
    }
    tree.put_link(["AccountsByEmail", &alice.email], alice.key().path()?)
        .await?;
    println!(
        "put_link /AccountsByEmail/{} -> {}",
        alice.email,
        alice.key().path()?
    );

    for (short, target) in [
        ("xyzpdq", "http://example.com/"),
        ("docs", "https://docs.rs/dynatree"),
        ("dt-repo", "https://github.com/dynatree/dynatree"),
    ] {
        let link = Link {
            account_id: alice.id.clone(),
            short: short.into(),
            target: target.into(),
            created: 1_700_000_000,
            hits: 0,
        };
        match shorten(&tree, &link).await {
            Ok(()) => println!("shorten {short} -> {target} (and /Links/{short})"),
            Err(e) if e.is_already_exists() => println!("{short} exists already: {e}"),
            Err(e) => return Err(e.into()),
        }
    }

    let by_email: Option<Account> = tree.get(["AccountsByEmail", "alice@example.com"]).await?;
    println!("log-in by e-mail (follows the link): {by_email:?}");
    println!(
        "redirect /Links/xyzpdq -> {}",
        redirect(&tree, "xyzpdq").await?.unwrap_or_default()
    );

    redirect(&tree, "xyzpdq").await?;
    let counted = links
        .read(&LinkKey {
            account_id: alice.id.clone(),
            short: "xyzpdq".into(),
        })
        .consistent(true)
        .await?
        .map_or(0, |l| l.hits);
    println!("hits of xyzpdq after 2 redirects (a patch each): {counted}");

    let mine = LinkCollection {
        account_id: alice.id.clone(),
    };
    let all: Vec<Link> = links.list(&mine).try_collect().await?;
    println!(
        "Alice's links, in key order: {:?}",
        all.iter().map(|l| l.short.as_str()).collect::<Vec<_>>()
    );
    let d: Vec<Link> = links
        .query(&mine)
        .begins_with("d")
        .items()
        .try_collect()
        .await?;
    println!(
        "Alice's links starting with \"d\" (a key condition, not a filter): {:?}",
        d.iter().map(|l| l.short.as_str()).collect::<Vec<_>>()
    );

    let duplicate = links.create(&all[0]).await;
    println!(
        "create {} again: {}",
        all[0].short,
        duplicate.map_or_else(|e| e.to_string(), |()| "created?!".into())
    );
    let bad = Link {
        short: "bad¦name".into(),
        ..all[0].clone()
    };
    match links.put(&bad).await {
        Err(e) => println!(
            "put a link named \"bad¦name\": refused, {e} (kind {:?})",
            e.kind()
        ),
        Ok(()) => return Err("a reserved character was accepted".into()),
    }

    println!("\nrows in the table (the dynamotree layout):");
    print_rows(&tree).await?;

    let gone = LinkKey {
        account_id: alice.id.clone(),
        short: "dt-repo".into(),
    };
    links.delete(&gone).await?;
    tree.delete(["Links", "dt-repo"]).await?;
    println!("\ndelete {} and /Links/dt-repo", gone.path()?);
    println!(
        "redirect /Links/dt-repo -> {:?}",
        redirect(&tree, "dt-repo").await?
    );
    Ok(())
}

async fn print_rows(tree: &Tree) -> Result<(), Box<dyn std::error::Error>> {
    let mut rows: Vec<dynatree::storage::Item> = tree.scan().try_collect().await?;
    rows.sort_by(|a, b| {
        (a.get_s("Key"), a.get_s("Child")).cmp(&(b.get_s("Key"), b.get_s("Child")))
    });
    for row in rows {
        let others: Vec<String> = row
            .iter()
            .filter(|(n, _)| *n != "Key" && *n != "Child")
            .map(|(n, v)| match v {
                dynatree::storage::Value::S(s) => format!("{n}={s:?}"),
                dynatree::storage::Value::N(x) => format!("{n}={x}"),
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
