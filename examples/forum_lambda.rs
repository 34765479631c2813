//! The stream processor of the `forum` tree as an AWS Lambda function: each batch of the
//! table's DynamoDB stream is applied with `dynatree::changes::lambda::handle`, which answers
//! with the partial batch response (Lambda retries from the first failed record).
//!
//! Deploy with an event source mapping on the table's stream (view type `NEW_AND_OLD_IMAGES`,
//! `FunctionResponseTypes: ["ReportBatchItemFailures"]`) and the environment variable
//! `DYNATREE_TABLE` naming the table. Build: `cargo build -p examples --bin forum_lambda`
//! (for Lambda, cross-compile with `cargo lambda build --release`).

use dynatree::changes::lambda::{DynamoDbEventResponse, Event, handle};
use dynatree::{DynamoDbTable, Propagation};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[path = "forum_model.rs"]
#[allow(dead_code)] // the writers' model: the processor only registers its types
mod model;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let table_name = std::env::var("DYNATREE_TABLE")
        .map_err(|_| "set DYNATREE_TABLE to the name of the forum's table")?;
    let config = aws_config::load_from_env().await;
    let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), table_name);
    // The same registrations as the writers' tree (`forum.rs`): the processor copies into
    // these types.
    let tree = model::tree(table, Propagation::Stream)?;
    let tree = &tree;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let response: DynamoDbEventResponse = handle(tree, &event.payload).await;
        Ok::<_, Error>(response)
    }))
    .await
}
