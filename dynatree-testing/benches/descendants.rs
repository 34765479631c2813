//! Descendants of one tenant of 10,000 objects (10 × 10 directories of 100): the listing walk
//! against the path index, requests from the metered fake, time on the fake and on DynamoDB
//! Local. Run: `cargo bench -p dynatree-testing --bench descendants`.

use std::time::Instant;

use dynatree::{Strategy, Tree};
use dynatree_testing::{DynamoDbLocal, FakeTable};
use fixtures::V;
use futures::TryStreamExt;

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

async fn build(tree: &Tree) {
    tree.create_table().await.unwrap();
    for a in 0..10 {
        for b in 0..10 {
            for c in 0..100u32 {
                tree.put(
                    [
                        "tenant",
                        &format!("d{a}"),
                        &format!("e{b}"),
                        &format!("f{c:03}"),
                    ],
                    &V { v: c },
                )
                .await
                .unwrap();
            }
        }
    }
}

async fn time(tree: &Tree, strategy: Strategy) -> (usize, f64) {
    let start = Instant::now();
    let found: Vec<dynatree::Descendant> = tree
        .descendants(["tenant"])
        .strategy(strategy)
        .concurrency(16)
        .items()
        .try_collect()
        .await
        .unwrap();
    (found.len(), start.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fake = FakeTable::new();
    let tree = Tree::builder(fake.clone()).path_index(1).build().unwrap();
    build(&tree).await;
    println!("| backend | strategy | objects | requests | read units | seconds |");
    println!("|---|---|---|---|---|---|");
    for (name, strategy) in [
        ("walk", Strategy::Walk),
        ("path index", Strategy::PathIndex),
    ] {
        fake.reset_metrics();
        let (n, secs) = time(&tree, strategy).await;
        let m = fake.metrics();
        println!(
            "| FakeTable | {name} | {n} | {} | {} | {secs:.3} |",
            m.total_requests(),
            m.read_units()
        );
    }
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("DynamoDB Local could not start: {e}");
            std::process::exit(1);
        }
    };
    let tree = Tree::builder(local.fresh_table())
        .path_index(1)
        .build()
        .unwrap();
    let start = Instant::now();
    build(&tree).await;
    eprintln!(
        "(wrote 10,000 objects to DynamoDB Local in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    for (name, strategy) in [
        ("walk", Strategy::Walk),
        ("path index", Strategy::PathIndex),
    ] {
        let (n, secs) = time(&tree, strategy).await;
        println!("| DynamoDB Local | {name} | {n} | (as above) | | {secs:.3} |");
    }
}
