//! The stream processor of the `forum` tree as an AWS Lambda function: each batch of the
//! table's DynamoDB stream is applied with `dynatree::changes::lambda::handle`, which answers
//! with the partial batch response (Lambda retries from the first failed record).
//!
//! Deploy with an event source mapping on the table's stream (view type `NEW_AND_OLD_IMAGES`,
//! `FunctionResponseTypes: ["ReportBatchItemFailures"]`) and the environment variable
//! `DYNATREE_TABLE` naming the table. Build: `cargo build -p examples --bin forum_lambda`
//! (for Lambda, cross-compile with `cargo lambda build --release`).

use dynatree::changes::lambda::{DynamoDbEventResponse, Event, handle};
use dynatree::{DynamoDbTable, Hierarchical, Propagation, Tree};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde::{Deserialize, Serialize};

/// A forum: its name is copied to its threads and posts.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

/// A thread shows its forum's name.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}", parent = Forum)]
struct Thread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

/// A post shows its forum's name and its thread's title.
#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}", parent = Thread)]
struct Post {
    forum: String,
    thread: String,
    post: String,
    body: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
    #[dynatree(from = Thread::title)]
    thread_title: Option<String>,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let table_name = std::env::var("DYNATREE_TABLE")
        .map_err(|_| "set DYNATREE_TABLE to the name of the forum's table")?;
    let config = aws_config::load_from_env().await;
    let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), table_name);
    // The same registrations as the writers' tree: the processor copies into these types.
    let tree = Tree::builder(table)
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .propagation(Propagation::Stream)
        .build()?;
    let tree = &tree;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let response: DynamoDbEventResponse = handle(tree, &event.payload).await;
        Ok::<_, Error>(response)
    }))
    .await
}
