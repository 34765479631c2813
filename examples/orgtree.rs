//! Org charts: several disjoint trees of any depth. Breadcrumbs (ancestors), everyone below a
//! manager (descendants through the path index: one Query per page, however deep), moving a
//! team with its sub-teams, a manager leaving (reports re-attached to their manager), and the
//! rule that a root with reports cannot be deleted.
//!
//! In-memory by default; `DYNATREE_TABLE=<name>` runs it on DynamoDB (see `links.rs`).

use dynatree::{DynamoDbTable, Path, Tree, ops::OnChildren};
use dynatree_testing::FakeTable;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Person {
    name: String,
    title: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("DYNATREE_TABLE") {
        Ok(table) if !table.is_empty() => {
            let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let client = aws_sdk_dynamodb::Client::new(&config);
            println!("# backend: DynamoDB table {table:?}");
            // One path-index partition per org: the first component.
            run(Tree::builder(DynamoDbTable::new(client, table))
                .path_index(1)
                .build()?)
            .await
        }
        _ => {
            println!("# backend: in-memory FakeTable (set DYNATREE_TABLE to use DynamoDB)");
            run(Tree::builder(FakeTable::new()).path_index(1).build()?).await
        }
    }
}

fn show(path: &Path) -> String {
    path.components().join(" > ")
}

async fn hire(tree: &Tree, path: &[&str], name: &str, title: &str) -> dynatree::Result<()> {
    tree.put(
        path,
        &Person {
            name: name.into(),
            title: title.into(),
        },
    )
    .await
}

async fn run(tree: Tree) -> Result<(), Box<dyn std::error::Error>> {
    tree.create_table().await?;
    // Two disjoint trees; ids as components, people as objects.
    for (path, name, title) in [
        (&["acme"][..], "Ada", "CEO"),
        (&["acme", "cto"], "Brian", "CTO"),
        (&["acme", "cto", "platform"], "Chen", "Platform lead"),
        (
            &["acme", "cto", "platform", "db"],
            "Dana",
            "Database engineer",
        ),
        (
            &["acme", "cto", "platform", "net"],
            "Eli",
            "Network engineer",
        ),
        (&["acme", "cto", "apps"], "Fay", "Apps lead"),
        (&["acme", "cto", "apps", "web"], "Gus", "Web developer"),
        (&["acme", "cfo"], "Hana", "CFO"),
        (&["globex"], "Ivan", "CEO"),
        (&["globex", "ops"], "Jo", "COO"),
    ] {
        hire(&tree, path, name, title).await?;
    }
    println!("hired 10 people in 2 orgs (acme, globex)");

    let dana = Path::new(["acme", "cto", "platform", "db"])?;
    let crumbs: Vec<(Path, Person)> = tree.ancestors(&dana).await?;
    println!(
        "breadcrumbs of Dana (one BatchGetItem): {}",
        crumbs
            .iter()
            .map(|(_, p)| format!("{} ({})", p.name, p.title))
            .collect::<Vec<_>>()
            .join(" > ")
    );

    let below: Vec<dynatree::Descendant> = tree
        .descendants(["acme", "cto"])
        .items()
        .try_collect()
        .await?;
    println!("everyone below the CTO (path index):");
    for d in &below {
        let p: Person = d.value()?;
        println!("  {:<32} {} ({})", show(&d.path), p.name, p.title);
    }
    let direct: Vec<dynatree::Descendant> = tree
        .descendants(["acme", "cto"])
        .max_depth(1)
        .items()
        .try_collect()
        .await?;
    println!(
        "the CTO's direct reports: {:?}",
        direct
            .iter()
            .map(|d| d.value::<Person>().map(|p| p.name))
            .collect::<Result<Vec<_>, _>>()?
    );

    let report = tree
        .move_subtree(["acme", "cto", "platform"], ["acme", "cfo", "platform"])
        .await?;
    println!(
        "moved the platform team (with its sub-teams) under the CFO: {} people, {} positions",
        report.objects, report.nodes
    );
    let crumbs: Vec<(Path, Person)> = tree.ancestors(["acme", "cfo", "platform", "db"]).await?;
    println!(
        "Dana's breadcrumbs now: {}",
        crumbs
            .iter()
            .map(|(_, p)| p.name.as_str())
            .collect::<Vec<_>>()
            .join(" > ")
    );

    tree.delete_node(["acme", "cto"], OnChildren::Reparent)
        .await?;
    let ceo_reports: Vec<String> = tree.list(["acme"]).try_collect().await?;
    println!("Brian (CTO) left; his reports now report to the CEO: acme > {ceo_reports:?}");

    match tree.delete_node(["globex"], OnChildren::Refuse).await {
        Err(e) if e.is_has_children() => println!("delete globex's CEO: refused, {e}"),
        other => return Err(format!("a root with reports was deleted: {other:?}").into()),
    }
    tree.delete_node(["globex", "ops"], OnChildren::Refuse)
        .await?;
    tree.delete_node(["globex"], OnChildren::Refuse).await?;
    println!("globex wound down: its COO, then its CEO (no reports left)");

    println!("\nthe org now:");
    let everyone: Vec<dynatree::Descendant> =
        tree.descendants(Path::root()).items().try_collect().await?;
    for d in everyone {
        let p: Person = d.value()?;
        println!("  {:<32} {} ({})", show(&d.path), p.name, p.title);
    }
    Ok(())
}
