//! The stream processor of the `forum` tree as an AWS Lambda function: each batch of the
//! table's DynamoDB stream is applied with `dynatree::changes::lambda::handle`, which answers
//! with the partial batch response (Lambda retries from the first failed record).
//!
//! The path to production (build for Graviton with cargo-lambda, deploy, the event source
//! mapping with `ReportBatchItemFailures`, the IAM policy, a local invocation with
//! `examples/events/forum_stream.json`) is in the documentation of `dynatree::changes::lambda`.
//! The tests below feed that sample event to [`handler`] on the in-memory table.
//!
//! Environment: `DYNATREE_TABLE` names the table; the AWS configuration comes from the standard
//! chain (on Lambda, the function's execution role and region).

use aws_config::BehaviorVersion;
use dynatree::changes::lambda::{DynamoDbEventResponse, Event, handle};
use dynatree::{DynamoDbTable, Tree, denorm::Propagation};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[path = "forum_model.rs"]
#[allow(dead_code)] // the writers' model: the processor only registers its types
mod model;

/// One invocation: the batch of stream records Lambda delivers, applied to the forum's tree,
/// answered with the partial batch response (`{"batchItemFailures": [...]}`: empty when the
/// whole batch was applied, else the sequence number of the first record that failed).
async fn handler(tree: &Tree, event: LambdaEvent<Event>) -> Result<DynamoDbEventResponse, Error> {
    Ok(handle(tree, &event.payload).await)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let table_name = std::env::var("DYNATREE_TABLE")
        .map_err(|_| "set DYNATREE_TABLE to the name of the forum's table")?;
    let config = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), table_name);
    // The same registrations as the writers' tree (`forum.rs`): the processor copies into
    // these types. Built once per execution environment, reused by every invocation.
    let tree = model::tree(table, Propagation::Stream)?;
    let tree = &tree;
    lambda_runtime::run(service_fn(move |event| handler(tree, event))).await
}

#[cfg(test)]
mod tests {
    //! The sample event `examples/events/forum_stream.json` through [`handler`], on the
    //! in-memory table, as Lambda would deliver it: a window of the forum table's stream in
    //! which a post is created, a comment is created and deleted (listing rows, a removal mark
    //! and the comment's own rows) and the forum is renamed.

    use super::*;
    use dynatree::Hierarchical;
    use dynatree::changes::ChangeKind;
    use dynatree::changes::lambda::to_change;
    use dynatree::storage::Key;
    use dynatree_testing::{FakeTable, Fault, FaultRule, Op};
    use futures::TryStreamExt;
    use lambda_runtime::Context;
    use model::{Comment, CommentKey, Forum, Post, PostKey, Thread, ThreadKey};
    use std::collections::BTreeSet;

    const EVENT: &str = include_str!("events/forum_stream.json");

    fn event() -> Event {
        serde_json::from_str(EVENT).expect("the sample is a DynamoDB Streams event")
    }

    fn invocation(event: Event) -> LambdaEvent<Event> {
        LambdaEvent::new(event, Context::default())
    }

    fn s(x: &str) -> String {
        x.to_owned()
    }

    /// The table as the stream's writers left it (the writers use `Propagation::Stream`, so
    /// they only stamped versions): the records of the sample are the changes of these writes.
    async fn written() -> (FakeTable, Tree) {
        let table = FakeTable::new();
        let writers = model::tree(table.clone(), Propagation::Stream).expect("a tree");
        writers.create_table().await.expect("a table");
        let forum = Forum {
            forum: s("rust"),
            name: s("Rust"),
        };
        writers.repo::<Forum>().put(&forum).await.expect("forum");
        let thread = Thread {
            forum: s("rust"),
            thread: s("async"),
            title: s("Async in practice"),
            forum_name: None,
        };
        writers.repo::<Thread>().put(&thread).await.expect("thread");
        let post = Post {
            forum: s("rust"),
            thread: s("async"),
            post: s("p1"),
            body: s("tokio or smol?"),
            forum_name: None,
            thread_title: None,
        };
        writers.repo::<Post>().put(&post).await.expect("post");
        let comment = Comment {
            forum: s("rust"),
            thread: s("async"),
            post: s("p1"),
            comment: s("c1"),
            text: s("both work"),
            forum_name: None,
            thread_title: None,
        };
        writers
            .repo::<Comment>()
            .put(&comment)
            .await
            .expect("comment");
        let renamed = Forum {
            name: s("Rust users"),
            ..forum
        };
        writers.repo::<Forum>().put(&renamed).await.expect("rename");
        writers
            .repo::<Comment>()
            .delete(&comment.key())
            .await
            .expect("delete");
        // The function's own tree, as `main` builds it.
        let processor = model::tree(table.clone(), Propagation::Stream).expect("a tree");
        table.reset_metrics();
        (table, processor)
    }

    fn thread_key() -> ThreadKey {
        ThreadKey {
            forum: s("rust"),
            thread: s("async"),
        }
    }

    fn post_key() -> PostKey {
        PostKey {
            forum: s("rust"),
            thread: s("async"),
            post: s("p1"),
        }
    }

    fn keys(table: &FakeTable) -> BTreeSet<Key> {
        table.rows().iter().filter_map(Key::from_item).collect()
    }

    /// The copies the batch must leave: the thread and the post show the renamed forum, the
    /// post its thread's title; the deleted comment stays deleted.
    async fn assert_copied(tree: &Tree) {
        let thread = tree
            .repo::<Thread>()
            .get(&thread_key())
            .await
            .expect("read");
        assert_eq!(
            thread.expect("the thread").forum_name.as_deref(),
            Some("Rust users")
        );
        let post = tree
            .repo::<Post>()
            .get(&post_key())
            .await
            .expect("read")
            .expect("the post");
        assert_eq!(post.forum_name.as_deref(), Some("Rust users"));
        assert_eq!(post.thread_title.as_deref(), Some("Async in practice"));
        let comment = CommentKey {
            forum: s("rust"),
            thread: s("async"),
            post: s("p1"),
            comment: s("c1"),
        };
        assert_eq!(
            tree.repo::<Comment>().get(&comment).await.expect("read"),
            None
        );
        let names: Vec<String> = tree
            .list(["Forums", "rust", "Threads", "async", "Posts", "p1"])
            .try_collect()
            .await
            .expect("list");
        assert!(names.is_empty(), "no comment is listed again: {names:?}");
    }

    #[test]
    fn the_sample_is_a_window_of_the_forum_tables_stream() {
        let event = event();
        let names: Vec<&str> = event
            .records
            .iter()
            .map(|r| r.event_name.as_str())
            .collect();
        for kind in ["INSERT", "MODIFY", "REMOVE"] {
            assert!(names.contains(&kind), "the sample has a {kind}");
        }
        let mut listing = 0;
        for record in &event.records {
            assert_eq!(record.event_source.as_deref(), Some("aws:dynamodb"));
            let change = to_change(record).expect("a change of a row");
            assert!(!change.sequence_number().is_empty());
            if change.key().range != "¦" {
                listing += 1;
            }
        }
        assert!(listing > 0, "the sample has listing rows");
    }

    #[tokio::test]
    async fn the_whole_batch_is_applied_and_listing_rows_are_ignored() {
        let (table, tree) = written().await;
        let rows_before = keys(&table);

        let response = handler(&tree, invocation(event()))
            .await
            .expect("a response");

        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        assert_eq!(
            serde_json::to_value(&response).expect("json"),
            serde_json::json!({ "batchItemFailures": [] })
        );
        assert_copied(&tree).await;
        // Copies are attribute updates: no row appears or goes (the listing rows of the
        // sample, the comment's included, are not written back).
        assert_eq!(keys(&table), rows_before);
        // What the function sent is what the IAM policy of `dynatree::changes::lambda` allows.
        let allowed = policy_table_actions();
        for operation in table.metrics().requests_by_operation().keys() {
            assert!(
                allowed.contains(&format!("dynamodb:{operation}")),
                "{operation} is not in the documented policy"
            );
        }
    }

    #[tokio::test]
    async fn applying_the_batch_twice_changes_nothing() {
        let (table, tree) = written().await;
        let first = handler(&tree, invocation(event()))
            .await
            .expect("a response");
        assert!(first.batch_item_failures.is_empty());
        let after_first = table.rows();
        let again = handler(&tree, invocation(event()))
            .await
            .expect("a response");
        assert!(again.batch_item_failures.is_empty());
        assert_eq!(
            table.rows(),
            after_first,
            "a redelivered batch moves no copy"
        );
    }

    /// A record that cannot be applied (here every UpdateItem fails, past the retry budget)
    /// is reported by its sequence number; Lambda delivers the batch again from that record,
    /// and once the table answers, the rest is applied.
    #[tokio::test(start_paused = true)]
    async fn a_failed_record_is_reported_and_the_batch_retried_from_it() {
        let (table, tree) = written().await;
        table.inject_rule(
            FaultRule::new(Fault::Fail)
                .operation(Op::UpdateItem)
                .always(),
        );

        let response = handler(&tree, invocation(event()))
            .await
            .expect("a response");

        let event = event();
        // The first record that writes: the post's INSERT fills its copies.
        let post_row = Key::new("¦Forums¦rust¦Threads¦async¦Posts¦p1", "¦");
        let post_insert = event
            .records
            .iter()
            .position(|r| {
                let change = to_change(r).expect("a change");
                change.kind() == ChangeKind::Insert && change.key() == &post_row
            })
            .expect("the post's INSERT");
        let sequence = event.records[post_insert].change.sequence_number.clone();
        assert_eq!(response.batch_item_failures.len(), 1);
        assert_eq!(response.batch_item_failures[0].item_identifier, sequence);
        assert_eq!(
            serde_json::to_value(&response).expect("json")["batchItemFailures"][0]["itemIdentifier"],
            serde_json::json!(sequence.expect("a sequence number"))
        );
        let post = tree
            .repo::<Post>()
            .get(&post_key())
            .await
            .expect("read")
            .expect("the post");
        assert_eq!(post.thread_title, None, "nothing copied yet");

        // Lambda's retry: the same batch from the failed record on.
        table.clear_faults();
        let mut retry = event;
        retry.records.drain(..post_insert);
        let response = handler(&tree, invocation(retry)).await.expect("a response");
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        assert_copied(&tree).await;
    }

    /// The DynamoDB actions on the table that the JSON policy in `dynatree::changes::lambda`'s
    /// documentation grants (its statement whose resource is the table itself).
    fn policy_table_actions() -> Vec<String> {
        let source = include_str!("../dynatree/src/changes/lambda.rs");
        let docs: String = source
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let json = docs
            .split("```json\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a JSON policy in the module docs");
        let policy: serde_json::Value = serde_json::from_str(json).expect("the policy is JSON");
        policy["Statement"]
            .as_array()
            .expect("statements")
            .iter()
            .filter(|st| {
                st["Resource"]
                    .as_str()
                    .is_some_and(|r| r.ends_with(":table/forum"))
            })
            .flat_map(|st| st["Action"].as_array().expect("actions").clone())
            .map(|a| a.as_str().expect("an action").to_owned())
            .collect()
    }
}
