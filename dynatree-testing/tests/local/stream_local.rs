//! The polling stream consumer (`dynatree::changes::StreamConsumer`, feature `streams`) against
//! DynamoDB Local's own stream: records arrive as changes with the right kinds and images, a
//! consumer restarted under the same name resumes after its checkpoints, a change that fails is
//! retried from that change, a renamed forum reaches its threads and posts through the
//! stream, and a follower gets typed changes (a move as one change per object, a
//! transaction's identity) with the same checkpoints and retries, and `Tree::watch` follows a
//! subtree through the storage interface's stream reads and resumes from its cursor. One test, one server; if DynamoDB Local cannot start, the test fails saying what is
//! missing: it is never skipped.

use dynatree::changes::{ChangeKind, StreamConsumer, from_stream_record, latest_stream_arn};
use dynatree::storage::{Key, Query, RangeCondition, Storage};
use dynatree::{DynamoDbTable, ErrorKind, Hierarchical, Tree, denorm::Propagation, storage::Value};
use dynatree_testing::{DynamoDbLocal, Fault, FaultRule, Faulty};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct V {
    v: u32,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
struct Forum {
    forum: String,
    name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}")]
struct Thread {
    forum: String,
    thread: String,
    title: String,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}/Posts/{post}")]
struct Post {
    forum: String,
    thread: String,
    post: String,
    body: String,
    #[dynatree(from = Thread::title)]
    thread_title: Option<String>,
    #[dynatree(from = Forum::name)]
    forum_name: Option<String>,
}

const CHECKPOINTS: &str = "¦¦checkpoints";

fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    use aws_sdk_dynamodbstreams::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_dynamodbstreams::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "dynatree",
            "dynatree",
            None,
            None,
            "stream-local",
        ))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

/// Every record of the stream, read directly (every shard from TRIM_HORIZON to now), as
/// changes.
async fn read_stream(
    client: &aws_sdk_dynamodbstreams::Client,
    arn: &str,
) -> Vec<dynatree::changes::Change> {
    use aws_sdk_dynamodbstreams::types::ShardIteratorType;
    let desc = client
        .describe_stream()
        .stream_arn(arn)
        .send()
        .await
        .expect("DescribeStream on DynamoDB Local");
    let mut changes = Vec::new();
    for shard in desc.stream_description().expect("a stream").shards() {
        let mut iterator = client
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard.shard_id().expect("a shard id"))
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("GetShardIterator")
            .shard_iterator()
            .map(str::to_owned);
        while let Some(it) = iterator {
            let out = client
                .get_records()
                .shard_iterator(it)
                .send()
                .await
                .expect("GetRecords");
            if out.records().is_empty() {
                break;
            }
            for record in out.records() {
                changes.push(from_stream_record(record).expect("a record of a tree table"));
            }
            iterator = out.next_shard_iterator().map(str::to_owned);
        }
    }
    changes
}

/// The changes of the tree's own rows (not the consumers' checkpoints).
fn tree_changes(changes: &[dynatree::changes::Change]) -> usize {
    changes
        .iter()
        .filter(|c| c.key().hash != CHECKPOINTS)
        .count()
}

async fn checkpoints(table: &DynamoDbTable, consumer: &str) -> Vec<dynatree::storage::Item> {
    let query = Query::new(CHECKPOINTS)
        .with_range(RangeCondition::BeginsWith(format!("{consumer}¦")))
        .consistent(true);
    table
        .query_page(&query, None)
        .await
        .expect("query the checkpoints")
        .items
}

#[test]
fn stream_consumer_on_dynamodb_local() {
    // The SDK's futures are large in debug builds: give the runtime's thread room.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(run)
        .expect("spawn")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
}

fn run() {
    let local = match DynamoDbLocal::start() {
        Ok(l) => l,
        Err(e) => panic!("DynamoDB Local is required for this test: {e}"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        records_arrive_as_changes_and_restarts_resume(&local).await;
        forum_renames_propagate_and_failures_are_retried(&local).await;
        a_follower_gets_typed_changes(&local).await;
        a_watch_follows_a_subtree_and_resumes(&local).await;
    });
}

async fn records_arrive_as_changes_and_restarts_resume(local: &DynamoDbLocal) {
    let table = local.fresh_table();
    let tree = Tree::builder(table.clone())
        .propagation(Propagation::Stream)
        .build()
        .expect("valid settings");
    tree.create_table().await.expect("create the table");
    let arn = latest_stream_arn(&table)
        .await
        .expect("create_table enables the stream under Propagation::Stream");
    let streams = streams_client(&local.endpoint());

    // A stream without records yet (DynamoDB Local refuses TRIM_HORIZON of such a shard with
    // TrimmedDataAccessException): nothing to apply, not an error.
    let mut early =
        StreamConsumer::new(tree.clone(), streams.clone(), &arn, "early").expect("a consumer");
    let report = early.poll_once().await.expect("a poll of an empty stream");
    assert_eq!(report.applied(), 0);

    tree.put(["a"], &V { v: 1 }).await.expect("put");
    tree.put(["a"], &V { v: 2 }).await.expect("put");
    tree.delete(["a"]).await.expect("delete");

    // What the stream holds, through the conversion the consumer uses.
    let direct = read_stream(&streams, &arn).await;
    let object = Key::new("¦a", "¦");
    let of_a: Vec<_> = direct.iter().filter(|c| c.key() == &object).collect();
    let kinds: Vec<ChangeKind> = of_a.iter().map(|c| c.kind()).collect();
    assert_eq!(
        kinds,
        [ChangeKind::Insert, ChangeKind::Modify, ChangeKind::Remove]
    );
    let v = |image: Option<&dynatree::storage::Item>| image.and_then(|i| i.get("v").cloned());
    assert_eq!(v(of_a[0].old_image()), None);
    assert_eq!(v(of_a[0].new_image()), Some(Value::N("1".into())));
    assert_eq!(v(of_a[1].old_image()), Some(Value::N("1".into())));
    assert_eq!(v(of_a[1].new_image()), Some(Value::N("2".into())));
    assert_eq!(v(of_a[2].old_image()), Some(Value::N("2".into())));
    assert!(of_a[2].new_image().is_none());
    assert_eq!(of_a[0].new_image().and_then(|i| i.get_s("Key")), Some("¦a"));
    let written = tree_changes(&direct);
    assert!(written >= 3, "the listing row is in the stream too");

    // A consumer applies every record, then checkpoints.
    let mut first = StreamConsumer::new(tree.clone(), streams.clone(), &arn, "c1")
        .expect("a consumer")
        .batch_size(2);
    let report = first.poll_once().await.expect("poll");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(report.applied(), written);
    // Records read: the tree's, and the checkpoints it wrote after each batch of 2 (read later
    // in the same poll, and skipped).
    assert_eq!(report.records(), written + written.div_ceil(2));
    assert_eq!(
        checkpoints(&table, "c1").await.len(),
        1,
        "one shard, one checkpoint"
    );
    // Its own checkpoint writes come back on the stream: skipped, and not checkpointed again.
    let report = first.poll_once().await.expect("poll");
    assert_eq!(report.applied(), 0);
    let report = first.poll_once().await.expect("poll");
    assert_eq!(
        (report.applied(), report.records()),
        (0, 0),
        "checkpoints do not feed themselves"
    );
    drop(first);

    // New writes; a new consumer with the same name resumes after its checkpoint.
    tree.put(["b"], &V { v: 3 }).await.expect("put");
    let all = tree_changes(&read_stream(&streams, &arn).await);
    let mut restarted =
        StreamConsumer::new(tree.clone(), streams.clone(), &arn, "c1").expect("a consumer");
    let report = restarted.poll_once().await.expect("poll");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(
        report.applied(),
        all - written,
        "only what was written after the checkpoint is applied again"
    );
    assert!(all - written >= 1);

    // Another name keeps its own checkpoints: it reads everything.
    let mut other =
        StreamConsumer::new(tree.clone(), streams.clone(), &arn, "c2").expect("a consumer");
    let report = other.poll_once().await.expect("poll");
    assert_eq!(report.applied(), all);
    assert_eq!(checkpoints(&table, "c2").await.len(), 1);
    assert_eq!(checkpoints(&table, "c1").await.len(), 1);

    // `run` polls until its future completes.
    tree.put(["c"], &V { v: 4 }).await.expect("put");
    let mut running = StreamConsumer::new(tree.clone(), streams.clone(), &arn, "c2")
        .expect("a consumer")
        .idle(std::time::Duration::from_millis(100));
    running
        .run(tokio::time::sleep(std::time::Duration::from_millis(1500)))
        .await
        .expect("run");
    let mut after =
        StreamConsumer::new(tree.clone(), streams.clone(), &arn, "c2").expect("a consumer");
    let report = after.poll_once().await.expect("poll");
    assert_eq!(
        report.applied(),
        0,
        "run applied and checkpointed the new put"
    );

    // A name with the reserved character is refused.
    let err = StreamConsumer::new(tree.clone(), streams.clone(), &arn, "a¦b").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

async fn forum_renames_propagate_and_failures_are_retried(local: &DynamoDbLocal) {
    let table = local.fresh_table();
    let writer = Tree::builder(table.clone())
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .propagation(Propagation::Stream)
        .build()
        .expect("valid settings");
    writer.create_table().await.expect("create the table");
    let arn = latest_stream_arn(&table).await.expect("a stream");
    let faulty = Faulty::new(table.clone());
    let processor = Tree::builder(faulty.clone())
        .denormalized::<Thread>()
        .denormalized::<Post>()
        .propagation(Propagation::Stream)
        .build()
        .expect("valid settings");
    let streams = streams_client(&local.endpoint());

    let (forums, threads, posts) = (
        writer.repo::<Forum>(),
        writer.repo::<Thread>(),
        writer.repo::<Post>(),
    );
    let forum = Forum {
        forum: "f".into(),
        name: "Rust".into(),
    };
    let thread = Thread {
        forum: "f".into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: None,
    };
    let post = Post {
        forum: "f".into(),
        thread: "t".into(),
        post: "p".into(),
        body: "first".into(),
        thread_title: None,
        forum_name: None,
    };
    forums.put(&forum).await.expect("put forum");
    threads.put(&thread).await.expect("put thread");
    posts.put(&post).await.expect("put post");
    let read_post = || async {
        posts
            .get(&post.key())
            .await
            .expect("get post")
            .expect("the post")
    };
    assert_eq!(
        read_post().await.forum_name,
        None,
        "the writes copy nothing"
    );

    // Every write to the post's row fails: the shard stops at the change that needs it.
    faulty.inject_rule(
        FaultRule::new(Fault::Fail)
            .key_prefix("¦Forums¦f¦Threads¦t¦Posts¦")
            .always(),
    );
    let mut consumer =
        StreamConsumer::new(processor.clone(), streams.clone(), &arn, "forum").expect("a consumer");
    let report = consumer.poll_once().await.expect("poll");
    assert_eq!(report.failures().len(), 1, "one shard stopped");
    let failure = &report.failures()[0];
    assert_eq!(failure.error().kind(), ErrorKind::Backend);
    assert!(!failure.sequence_number().is_empty());
    assert!(report.applied() < tree_changes(&read_stream(&streams, &arn).await));
    assert_eq!(read_post().await.forum_name, None);
    // Still failing: the next poll stops at the same record.
    let again = consumer.poll_once().await.expect("poll");
    assert_eq!(again.failures().len(), 1);
    assert_eq!(
        again.failures()[0].sequence_number(),
        failure.sequence_number()
    );
    assert_eq!(
        again.applied(),
        0,
        "nothing after the failed record is applied"
    );

    // The fault clears: the next poll starts at the failed record and goes on.
    faulty.clear_faults();
    let report = consumer.poll_once().await.expect("poll");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert!(report.applied() >= 1);
    let copied = read_post().await;
    assert_eq!(copied.forum_name.as_deref(), Some("Rust"));
    assert_eq!(copied.thread_title.as_deref(), Some("Hello"));
    let t = threads
        .get(&thread.key())
        .await
        .expect("get")
        .expect("thread");
    assert_eq!(t.forum_name.as_deref(), Some("Rust"));

    // A rename of the source reaches every target through the stream.
    forums
        .put(&Forum {
            forum: "f".into(),
            name: "Rust (official)".into(),
        })
        .await
        .expect("rename");
    assert_eq!(read_post().await.forum_name.as_deref(), Some("Rust"));
    let report = consumer.poll_once().await.expect("poll");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert!(report.applied() >= 1);
    assert_eq!(
        read_post().await.forum_name.as_deref(),
        Some("Rust (official)")
    );
    let t = threads
        .get(&thread.key())
        .await
        .expect("get")
        .expect("thread");
    assert_eq!(t.forum_name.as_deref(), Some("Rust (official)"));
    drop(consumer);

    // Restarted, it finds nothing left to apply (and it has not re-read what it applied).
    let mut restarted =
        StreamConsumer::new(processor.clone(), streams, &arn, "forum").expect("a consumer");
    let report = restarted.poll_once().await.expect("poll");
    assert_eq!(report.applied(), 0);
    assert!(report.failures().is_empty());
}

#[derive(dynatree::Entity, Debug, Clone, PartialEq)]
enum ForumItem {
    Forum(Forum),
    Thread(Thread),
}

/// One line per change a follower is handed.
fn line(change: &dynatree::watch::Change<ForumItem>) -> String {
    use dynatree::watch::Change;
    let tx = change.info().transaction.as_deref().unwrap_or("-");
    match change {
        Change::Created { path, .. } => format!("created {path} tx {tx}"),
        Change::Updated { path, .. } => format!("updated {path} tx {tx}"),
        Change::Deleted { path, .. } => format!("deleted {path}"),
        Change::Moved { from, to, .. } => format!("moved {from} to {to}"),
        _ => unreachable!("a change this test does not know"),
    }
}

async fn a_follower_gets_typed_changes(local: &DynamoDbLocal) {
    let table = local.fresh_table();
    let tree = Tree::builder(table.clone())
        .propagation(Propagation::Stream)
        .build()
        .expect("valid settings");
    tree.create_table().await.expect("create the table");
    let arn = latest_stream_arn(&table).await.expect("a stream");
    let streams = streams_client(&local.endpoint());
    let forum = |id: &str| Forum {
        forum: id.into(),
        name: id.to_uppercase(),
    };
    tree.repo::<Forum>().put(&forum("a")).await.expect("put");
    let thread = Thread {
        forum: "a".into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: None,
    };
    tree.repo::<Thread>().put(&thread).await.expect("put");
    tree.move_subtree(["Forums", "a"], ["Forums", "b"])
        .await
        .expect("move");
    let mut tx = tree.transaction();
    tx.put(&forum("c")).idempotency_token("tx-1");
    tx.commit().await.expect("commit");

    let mut follower =
        StreamConsumer::new(tree.clone(), streams.clone(), &arn, "follower").expect("a consumer");
    let mut seen: Vec<String> = Vec::new();
    let report = follower
        .poll_changes(&mut |change| {
            seen.push(line(&change));
            async { Ok(()) }
        })
        .await
        .expect("poll");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(
        seen,
        [
            "created /Forums/a tx -",
            "created /Forums/a/Threads/t tx -",
            "moved /Forums/a to /Forums/b",
            "moved /Forums/a/Threads/t to /Forums/b/Threads/t",
            "created /Forums/c tx tx-1",
        ]
    );

    // A handler that fails stops the shard at that change; the next poll hands it again.
    tree.repo::<Forum>().put(&forum("d")).await.expect("put");
    tree.repo::<Forum>().put(&forum("e")).await.expect("put");
    let mut handed: Vec<String> = Vec::new();
    let report = follower
        .poll_changes(&mut |change| {
            let l = line(&change);
            let fail = l.contains("/Forums/e");
            handed.push(l);
            async move {
                if fail {
                    Err(dynatree::Error::new(
                        ErrorKind::Backend,
                        "the index is down",
                    ))
                } else {
                    Ok(())
                }
            }
        })
        .await
        .expect("poll");
    assert_eq!(report.failures().len(), 1);
    assert_eq!(handed, ["created /Forums/d tx -", "created /Forums/e tx -"]);
    // Restarted under its name: it resumes at the failed change.
    let mut restarted =
        StreamConsumer::new(tree.clone(), streams.clone(), &arn, "follower").expect("a consumer");
    let mut again: Vec<String> = Vec::new();
    let report = restarted
        .poll_changes(&mut |change| {
            again.push(line(&change));
            async { Ok(()) }
        })
        .await
        .expect("poll");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(again, ["created /Forums/e tx -"]);
}

async fn a_watch_follows_a_subtree_and_resumes(local: &DynamoDbLocal) {
    let table = local
        .fresh_table()
        .with_streams(streams_client(&local.endpoint()));
    let tree = Tree::new(table.clone());
    tree.create_table().await.expect("create the table");
    table.enable_stream().await.expect("a stream");
    let mut watch = tree.watch::<ForumItem>(["Forums"]);
    watch.start().await.expect("a position");
    let forum = |id: &str| Forum {
        forum: id.into(),
        name: id.to_uppercase(),
    };
    tree.repo::<Forum>().put(&forum("a")).await.expect("put");
    let thread = Thread {
        forum: "a".into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: None,
    };
    tree.repo::<Thread>().put(&thread).await.expect("put");
    tree.put(["Elsewhere", "x"], &V { v: 1 })
        .await
        .expect("put");
    tree.move_subtree(["Forums", "a"], ["Forums", "b"])
        .await
        .expect("move");
    let mut tx = tree.transaction();
    tx.put(&forum("c")).idempotency_token("tx-2");
    tx.commit().await.expect("commit");

    let expected = [
        "created /Forums/a tx -",
        "created /Forums/a/Threads/t tx -",
        "moved /Forums/a to /Forums/b",
        "moved /Forums/a/Threads/t to /Forums/b/Threads/t",
        "created /Forums/c tx tx-2",
    ];
    let mut seen = Vec::new();
    let mut cursors = Vec::new();
    // DynamoDB Local's stream is near real time: read until the five changes are in.
    for _ in 0..50 {
        while let Some(change) = watch.next_ready().await.expect("a read") {
            seen.push(line(&change));
            cursors.push(watch.cursor().to_string());
        }
        if seen.len() >= expected.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, expected);

    // A new watch resumed after the second change hands the rest, once each.
    let mut resumed = tree
        .watch::<ForumItem>(["Forums"])
        .start_after(cursors[1].parse().expect("a cursor"));
    let rest: Vec<String> = resumed
        .catch_up()
        .await
        .expect("a read")
        .iter()
        .map(line)
        .collect();
    assert_eq!(rest, &expected[2..]);
    assert!(resumed.catch_up().await.expect("a read").is_empty());
}
