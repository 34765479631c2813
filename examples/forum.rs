//! Denormalized ancestor fields: forums, threads, posts and comments, where every comment shows
//! its forum's name and its thread's title without reading either.
//!
//! `#[dynatree(from = Forum::name)]` on a field makes it a copy of an ancestor's field: dynatree
//! fills it when the value is written, rewrites it when the source changes (a rename reaches
//! every copy below), and refills it when the value moves under another parent. Each copy
//! carries the source's version and is written by a conditional write, so a late or repeated
//! write never takes it back to an older value.
//!
//! Runs on the in-memory `FakeTable` by default, propagating inline (each write copies before
//! it returns), and prints the requests every step cost. With `DYNATREE_TABLE=<name>` it runs on
//! DynamoDB (see `links.rs` for DynamoDB Local's variables) with `Propagation::Stream`: the
//! writes only stamp versions, and a polling consumer of the table's DynamoDB stream
//! (`dynatree::changes::StreamConsumer`) copies after each step. The same processor runs on AWS
//! Lambda in `forum_lambda.rs`.

use std::collections::BTreeMap;

use dynatree::changes::{StreamConsumer, latest_stream_arn};
use dynatree::{DynamoDbTable, Tree, denorm::Propagation};
use dynatree_testing::FakeTable;

#[path = "forum_model.rs"]
mod model;
use model::{Comment, CommentKey, Forum, Post, Thread, ThreadKey, tree};

/// Where the example runs: the fake (metered, inline) or DynamoDB (stream consumer).
enum Backend {
    Fake(FakeTable),
    Stream(Box<StreamConsumer>),
}

impl Backend {
    /// Starts a step: the fake's counters from zero.
    fn start(&self) {
        if let Backend::Fake(table) = self {
            table.reset_metrics();
        }
    }

    /// Ends a step: the requests it cost (fake), or the consumer's polls until the stream has
    /// nothing more (DynamoDB; the consumer's copies come back on the stream, and are sources
    /// of the chained copies).
    async fn finish(&mut self) -> dynatree::Result<String> {
        match self {
            Backend::Fake(table) => {
                let m = table.metrics();
                let ops: Vec<String> = m
                    .requests_by_operation()
                    .iter()
                    .map(|(op, n)| format!("{n} {op}"))
                    .collect();
                Ok(format!(
                    "{} requests ({}), {} WCU",
                    m.total_requests(),
                    ops.join(", "),
                    m.write_units()
                ))
            }
            Backend::Stream(consumer) => {
                let (mut applied, mut polls) = (0, 0);
                loop {
                    let report = consumer.poll_once().await?;
                    polls += 1;
                    let n = report.applied();
                    report.into_result()?;
                    applied += n;
                    if n == 0 || polls == 20 {
                        break;
                    }
                }
                Ok(format!(
                    "stream consumer: {applied} changes applied in {polls} polls"
                ))
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("DYNATREE_TABLE") {
        Ok(name) if !name.is_empty() => {
            let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let table = DynamoDbTable::new(aws_sdk_dynamodb::Client::new(&config), name.clone());
            println!("# backend: DynamoDB table {name:?}, copies made by the stream consumer");
            let tree = tree(table.clone(), Propagation::Stream)?;
            tree.create_table().await?; // enables the stream (NEW_AND_OLD_IMAGES)
            // A table left by an earlier run: start from no forums.
            match tree.delete_subtree(["Forums"]).await {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            }
            let arn = latest_stream_arn(&table).await?;
            // DynamoDB Local serves the stream on the same endpoint.
            let mut streams = aws_sdk_dynamodbstreams::config::Builder::from(&config);
            if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB_STREAMS").is_none()
                && let Ok(url) = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            {
                streams = streams.endpoint_url(url);
            }
            let streams = aws_sdk_dynamodbstreams::Client::from_conf(streams.build());
            let consumer = StreamConsumer::new(tree.clone(), streams, arn, "forum-example")?;
            run(tree, Backend::Stream(Box::new(consumer))).await
        }
        _ => {
            println!(
                "# backend: in-memory FakeTable, inline propagation (DYNATREE_TABLE: DynamoDB and its stream)"
            );
            let table = FakeTable::new();
            let tree = tree(table.clone(), Propagation::Inline)?;
            tree.create_table().await?;
            run(tree, Backend::Fake(table)).await
        }
    }
}

/// Prints every comment with the forum's name and the thread's title it holds: one
/// BatchGetItem, no read of a forum or a thread.
async fn show(tree: &Tree, where_: &BTreeMap<&str, &str>) -> dynatree::Result<()> {
    let mut sorted = COMMENTS;
    sorted.sort();
    let keys: Vec<CommentKey> = sorted
        .iter()
        .map(|(thread, post, comment, _)| CommentKey {
            forum: where_[thread].into(),
            thread: (*thread).into(),
            post: (*post).into(),
            comment: (*comment).into(),
        })
        .collect();
    for c in tree
        .repo::<Comment>()
        .get_many(&keys)
        .await?
        .into_iter()
        .flatten()
    {
        println!(
            "  [{}] {} > {}/{}: {}",
            c.forum_name.as_deref().unwrap_or("?"),
            c.thread_title.as_deref().unwrap_or("?"),
            c.post,
            c.comment,
            c.text
        );
    }
    Ok(())
}

/// (thread, post, comment, text)
const COMMENTS: [(&str, &str, &str, &str); 5] = [
    ("async", "p1", "c1", "tokio or smol?"),
    ("async", "p1", "c2", "both work"),
    ("async", "p2", "c1", "cancel safety matters"),
    ("errors", "p1", "c1", "thiserror for libraries"),
    ("async", "p2", "c2", "select! needs care"),
];

async fn run(tree: Tree, mut backend: Backend) -> Result<(), Box<dyn std::error::Error>> {
    let (forums, threads, posts, comments) = (
        tree.repo::<Forum>(),
        tree.repo::<Thread>(),
        tree.repo::<Post>(),
        tree.repo::<Comment>(),
    );
    // Which forum each thread is in.
    let mut where_ = BTreeMap::from([("async", "rust"), ("errors", "rust")]);

    backend.start();
    for (forum, name) in [("rust", "Rust"), ("go", "Go")] {
        let forum = Forum {
            forum: forum.into(),
            name: name.into(),
        };
        forums.put(&forum).await?;
    }
    for (thread, title) in [("async", "Async in 2026"), ("errors", "Error handling")] {
        let forum_name = None; // filled by dynatree, whatever is passed
        let thread = Thread {
            forum: "rust".into(),
            thread: thread.into(),
            title: title.into(),
            forum_name,
        };
        threads.put(&thread).await?;
    }
    for (thread, post) in [("async", "p1"), ("async", "p2"), ("errors", "p1")] {
        posts
            .put(&Post {
                forum: "rust".into(),
                thread: thread.into(),
                post: post.into(),
                body: format!("{thread} {post}"),
                forum_name: None,
                thread_title: None,
            })
            .await?;
    }
    let comment = |(thread, post, comment, text): (&str, &str, &str, &str)| Comment {
        forum: "rust".into(),
        thread: thread.into(),
        post: post.into(),
        comment: comment.into(),
        text: text.into(),
        forum_name: None,
        thread_title: None,
    };
    for c in &COMMENTS[..4] {
        comments.put(&comment(*c)).await?;
    }
    println!(
        "created 2 forums, 2 threads, 3 posts, 4 comments: {}",
        backend.finish().await?
    );

    backend.start();
    comments.put(&comment(COMMENTS[4])).await?;
    println!("one more comment: {}", backend.finish().await?);
    show(&tree, &where_).await?;

    backend.start();
    let rust = Forum {
        forum: "rust".into(),
        name: "Rust users".into(),
    };
    forums.put(&rust).await?;
    println!(
        "\nrename forum Rust -> Rust users: {}",
        backend.finish().await?
    );
    show(&tree, &where_).await?;

    let key = ThreadKey {
        forum: "rust".into(),
        thread: "errors".into(),
    };
    let mut errors = threads.get(&key).await?.ok_or("thread errors is missing")?;
    errors.title = "Errors, revisited".into();
    backend.start();
    threads.put(&errors).await?;
    println!(
        "\nretitle thread errors -> {:?} (comments copy it from their post): {}",
        errors.title,
        backend.finish().await?
    );
    show(&tree, &where_).await?;

    backend.start();
    let report = tree
        .move_subtree(
            ["Forums", "rust", "Threads", "errors"],
            ["Forums", "go", "Threads", "errors"],
        )
        .await?;
    where_.insert("errors", "go");
    println!(
        "\nmove thread errors to forum Go ({} objects: the thread, its post, its comment): {}",
        report.objects,
        backend.finish().await?
    );
    show(&tree, &where_).await?;
    Ok(())
}
