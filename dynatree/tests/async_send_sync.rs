//! Compile-time checks in the spirit of tokio's `tests/async_send_sync.rs`: every public handle,
//! builder, page and error is `Send + Sync + 'static` (and `Clone` where it is a handle), every
//! public future is `Send`, and `'static` too when its arguments are, and every public stream is
//! `Send + 'static` whatever its arguments borrow.
//!
//! The checks are ordinary generic bounds on functions that are type-checked and never called:
//! a change that makes one future or stream non-`Send` (an `Rc`, a `MutexGuard` or a `&Cell`
//! held across an `.await`, a non-`Send` boxed stream) fails to compile this file. The futures
//! are checked for every backend (`S: Storage + 'static`), which covers the type-erased `Tree`
//! and `Tree<FakeTable>` / `Tree<DynamoDbTable>` alike. The last tests move a `Tree` and a
//! `Repository` into `tokio::spawn` on a multi-threaded runtime and use them there.
//!
//! When a public async method or stream is added, add it here (`grep -rn "pub async fn" src`,
//! `grep -rn "pub fn .*Stream" src`).

// The check functions are type-checked, never called; each takes one argument per kind of value
// a method borrows.
#![allow(dead_code, clippy::too_many_arguments)]

use std::future::Future;

use dynatree::storage::{
    Billing, Condition, IndexQuery, IndexSpec, Key, Query, SharedStorage, Storage, TransactAction,
    WriteRequest,
};
use dynatree::{
    Cursor, Descendant, Descendants, Entry, Error, Hierarchical, IndexQueryBuilder, Path,
    Repository, RetryPolicy, Strategy, Tree, TreeBuilder, TypedPage, TypedQuery, ops::Intent,
    ops::LinkPolicy, ops::MoveReport, ops::OnChildren, storage::Item,
};
use dynatree_testing::FakeTable;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Fixtures.

/// An untyped value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct V {
    v: u32,
}

/// A typed value with a secondary index (for `Repository::index`).
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Users/{id}", index(name = "by_email", hash = email))]
struct User {
    id: String,
    email: String,
}

/// A typed value under `User` with a version field (for `update` and `ancestor`).
#[derive(Hierarchical, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[dynatree(path = "Users/{user_id}/Notes/{note}", parent = User)]
struct Note {
    user_id: String,
    note: String,
    text: String,
    #[dynatree(version)]
    version: u64,
}

// ---------------------------------------------------------------------------------------------
// The bounds.

/// A handle: shared between tasks and cloned into them.
fn handle<T: Send + Sync + Clone + 'static>() {}

/// A value a task may own, return or share.
fn value<T: Send + Sync + 'static>() {}

/// A future that `tokio::spawn` accepts as it is.
fn send_static<F: Future + Send + 'static>(_: F) {}

/// A future that a spawned task may await (it borrows from the task).
fn send<F: Future + Send>(_: F) {}

/// A stream that `tokio::spawn` accepts as it is.
fn stream_static<St: Stream + Send + 'static>(_: St) {}

// ---------------------------------------------------------------------------------------------
// Types.

#[test]
fn handles_are_send_sync_clone_static() {
    handle::<Tree>();
    handle::<Tree<SharedStorage>>();
    handle::<Tree<FakeTable>>();
    handle::<Repository<User>>();
    handle::<Repository<User, FakeTable>>();
    handle::<Cursor>();
    handle::<SharedStorage>();
    #[cfg(feature = "dynamodb")]
    {
        handle::<Tree<dynatree::DynamoDbTable>>();
        handle::<Repository<User, dynatree::DynamoDbTable>>();
        handle::<dynatree::DynamoDbTable>();
    }
    fn any_backend<S: Storage + 'static>() {
        handle::<Tree<S>>();
        handle::<Repository<User, S>>();
    }
    any_backend::<FakeTable>();
}

#[test]
fn values_are_send_sync_static() {
    value::<TypedQuery<User>>();
    value::<TypedQuery<User, FakeTable>>();
    value::<IndexQueryBuilder<User>>();
    value::<IndexQueryBuilder<User, FakeTable>>();
    value::<Descendants>();
    value::<Descendants<FakeTable>>();
    value::<TypedPage<User>>();
    value::<Error>();
    value::<dynatree::Result<()>>();
    value::<TreeBuilder<FakeTable>>();
    value::<Entry<V>>();
    value::<Descendant>();
    value::<MoveReport>();
    value::<Intent>();
    value::<RetryPolicy>();
    value::<Path>();
    value::<Item>();
    // `Error` also crosses task boundaries inside boxed errors.
    value::<Box<dyn std::error::Error + Send + Sync>>();
    let _: Box<dyn std::error::Error + Send + Sync + 'static> =
        Box::new(Error::new(dynatree::ErrorKind::InvalidPath, "x"));
    fn any_backend<S: Storage + 'static>() {
        value::<TypedQuery<User, S>>();
        value::<IndexQueryBuilder<User, S>>();
        value::<Descendants<S>>();
    }
    any_backend::<FakeTable>();
}

// ---------------------------------------------------------------------------------------------
// `Tree`: every public async method and stream, for every backend.

/// Owned or `'static` arguments: each future is `Send + 'static`, each stream too.
fn tree_static<S: Storage + 'static>(
    tree: &'static Tree<S>,
    path: Path,
    to: Path,
    parts: Vec<String>,
    v: &'static V,
) {
    send_static(tree.create_table());
    send_static(tree.put(path.clone(), v));
    send_static(tree.put(["a", "b"], v));
    send_static(tree.put(parts.clone(), v));
    send_static(tree.put_link(path.clone(), to.clone()));
    send_static(tree.get::<V>(path.clone()));
    send_static(tree.get::<V>(["a", "b"]));
    send_static(tree.read_link(path.clone()));
    send_static(tree.delete(path.clone()));
    send_static(tree.ancestors::<V>(path.clone()));
    send_static(tree.ancestor_items(path.clone()));
    send_static(tree.delete_subtree(path.clone()));
    send_static(tree.move_subtree(path.clone(), to.clone()));
    send_static(tree.move_subtree_with(path.clone(), to.clone(), LinkPolicy::Rewrite));
    send_static(tree.copy_subtree(path.clone(), to.clone()));
    send_static(tree.delete_node(path.clone(), OnChildren::Recursive));
    send_static(tree.pending());
    send_static(tree.resume());

    stream_static(tree.list(path.clone()));
    stream_static(tree.list_items::<V>(path.clone()));
    stream_static(tree.scan());
    stream_static(tree.descendants(path.clone()).items());
    stream_static(
        tree.descendants(parts)
            .max_depth(3)
            .concurrency(4)
            .strategy(Strategy::Walk)
            .items(),
    );
}

/// Borrowed arguments: each future is `Send`; streams own what they need, so they are
/// `'static` even then.
fn tree_borrowed<'a, S: Storage + 'static>(
    tree: &'a Tree<S>,
    path: &'a Path,
    to: &'a Path,
    parts: &'a [String],
    name: &'a str,
    v: &'a V,
) {
    send(tree.create_table());
    send(tree.put(path, v));
    send(tree.put(parts, v));
    send(tree.put([name, name], v));
    send(tree.put_link(path, to));
    send(tree.get::<V>(path));
    send(tree.get::<V>([name]));
    send(tree.read_link(path));
    send(tree.delete(parts));
    send(tree.ancestors::<V>(path));
    send(tree.ancestor_items(parts));
    send(tree.delete_subtree(path));
    send(tree.move_subtree(path, to));
    send(tree.move_subtree_with(path, to, LinkPolicy::Ignore));
    send(tree.copy_subtree(parts, to));
    send(tree.delete_node(path, OnChildren::Reparent));
    send(tree.pending());
    send(tree.resume());

    stream_static(tree.list(path));
    stream_static(tree.list([name]));
    stream_static(tree.list_items::<V>(parts));
    stream_static(tree.scan());
    stream_static(tree.descendants(path).items());
    stream_static(
        tree.descendants([name])
            .strategy(Strategy::PathIndex)
            .items(),
    );
}

/// The same through a handle the future owns: what a spawned task does.
fn tree_owned<S: Storage + 'static>(tree: Tree<S>, v: V) {
    send_static(async move {
        tree.put(["a"], &v).await?;
        let got: Option<V> = tree.get(["a"]).await?;
        let names: Vec<String> = tree.list(Path::root()).try_collect().await?;
        let _ = (got, names);
        Ok::<_, Error>(())
    });
}

// ---------------------------------------------------------------------------------------------
// `Repository`, `TypedQuery`, `IndexQueryBuilder`.

fn repo_static<S: Storage + 'static>(
    tree: &'static Tree<S>,
    users: &'static Repository<User, S>,
    notes: &'static Repository<Note, S>,
    user: &'static User,
    user_key: &'static UserKey,
    batch: &'static [User],
    keys: &'static Vec<UserKey>,
    note: &'static mut Note,
    note_key: &'static NoteKey,
    collection: &'static UserCollection,
    notes_of: NoteCollection,
    cursor: Cursor,
) {
    stream_static(tree.repo::<User>().list(collection));
    send_static(users.put(user));
    send_static(users.put_all(batch));
    send_static(users.put_all(batch.iter().rev()));
    send_static(users.get_many(keys));
    send_static(users.get_many([user_key, user_key]));
    send_static(users.create(user));
    send_static(users.get(user_key));
    send_static(users.delete(user_key));
    send_static(notes.ancestor::<User>(note_key));
    send_static(notes.update(note));

    stream_static(users.list(collection));
    stream_static(users.query(collection).items());
    stream_static(users.query(collection).pages());
    stream_static(
        notes
            .query(&notes_of)
            .begins_with("n")
            .descending()
            .limit(10)
            .page_size(5)
            .consistent(true)
            .start_after(cursor.clone())
            .pages(),
    );
    stream_static(users.index(User::index_by_email("a@example.com")).items());
    stream_static(
        users
            .index(User::index_by_email("a@example.com"))
            .limit(3)
            .start_after(cursor)
            .pages(),
    );
}

fn repo_borrowed<'a, S: Storage + 'static>(
    users: &'a Repository<User, S>,
    notes: &'a Repository<Note, S>,
    user: &'a User,
    user_key: &'a UserKey,
    batch: &'a [User],
    keys: &'a [UserKey],
    note: &'a mut Note,
    note_key: &'a NoteKey,
    collection: &'a UserCollection,
    notes_of: &'a NoteCollection,
    email: &'a str,
    prefix: &'a str,
) {
    send(users.put(user));
    send(users.put_all(batch));
    send(users.put_all([user, user]));
    send(users.get_many(keys));
    send(users.get_many(keys.iter().take(1)));
    send(users.create(user));
    send(users.get(user_key));
    send(users.delete(user_key));
    send(notes.ancestor::<User>(note_key));
    send(notes.update(note));

    stream_static(users.list(collection));
    stream_static(users.query(collection).gt(prefix).items());
    stream_static(notes.query(notes_of).between(prefix, prefix).pages());
    stream_static(users.index(User::index_by_email(email)).items());
    stream_static(users.index(User::index_by_email(email)).pages());
}

/// Query builders are values a task may own and run later.
fn builders_owned<S: Storage + 'static>(
    query: TypedQuery<User, S>,
    ix: IndexQueryBuilder<User, S>,
) {
    send_static(async move {
        let a: Vec<User> = query.items().try_collect().await?;
        let b: Vec<TypedPage<User>> = ix.pages().try_collect().await?;
        let _ = (a, b);
        Ok::<_, Error>(())
    });
}

// ---------------------------------------------------------------------------------------------
// The backend interface (`dynatree::storage`) and `RetryPolicy`.

fn storage_static<S: Storage + 'static>(
    storage: &'static S,
    policy: &'static RetryPolicy,
    key: &'static Key,
    query: &'static Query,
    index: &'static IndexSpec,
    index_query: &'static IndexQuery,
    specs: &'static [IndexSpec],
    item: Item,
) {
    send_static(storage.get_item(key, true));
    send_static(storage.put_item(item.clone(), Condition::Always));
    send_static(storage.delete_item(key, Condition::Exists));
    send_static(storage.query_page(query, Some(key.clone())));
    send_static(storage.scan_page(Some(10), None));
    send_static(storage.batch_get(vec![key.clone()], false));
    send_static(storage.batch_write(vec![WriteRequest::Delete(key.clone())]));
    send_static(storage.transact_write(Vec::<TransactAction>::new()));
    send_static(storage.create_table(Billing::OnDemand, specs));
    send_static(storage.add_index(Billing::OnDemand, index));
    send_static(storage.query_index_page(index_query, Some(item)));
    send_static(storage.describe_table());

    send_static(dynatree::storage::get_all(
        storage,
        vec![key.clone()],
        true,
        policy,
    ));
    send_static(dynatree::storage::write_all(
        storage,
        vec![WriteRequest::Delete(key.clone())],
        policy,
    ));
    send_static(policy.retry_throttled(|| storage.get_item(key, true)));
    send_static(policy.retry_throttled(|| async { Ok(1) }));
}

fn storage_borrowed<'a, S: Storage + 'static>(
    storage: &'a S,
    policy: &'a RetryPolicy,
    key: &'a Key,
    query: &'a Query,
    specs: &'a [IndexSpec],
) {
    send(storage.get_item(key, false));
    send(storage.query_page(query, None));
    send(storage.create_table(Billing::OnDemand, specs));
    send(dynatree::storage::get_all(
        storage,
        vec![key.clone()],
        true,
        policy,
    ));
    send(dynatree::storage::write_all(storage, Vec::new(), policy));
    send(policy.retry_throttled(|| storage.get_item(key, true)));
}

/// The concrete backends, through the same checks (the generic ones imply these; naming them
/// keeps the intent visible and catches a blanket impl that stops applying).
fn concrete_backends(
    erased: &'static Tree,
    fake: &'static Tree<FakeTable>,
    shared: &'static SharedStorage,
    table: &'static FakeTable,
    policy: &'static RetryPolicy,
    key: &'static Key,
    v: &'static V,
) {
    send_static(erased.put(["a"], v));
    send_static(fake.put(["a"], v));
    stream_static(erased.list(["a"]));
    stream_static(fake.list(["a"]));
    send_static(shared.get_item(key, true));
    send_static(table.get_item(key, true));
    send_static(policy.retry_throttled(|| shared.get_item(key, true)));
    let _ = tree_static::<SharedStorage>;
    let _ = tree_static::<FakeTable>;
    let _ = repo_static::<SharedStorage>;
    let _ = repo_static::<FakeTable>;
    let _ = storage_static::<SharedStorage>;
    let _ = storage_static::<FakeTable>;
    #[cfg(feature = "dynamodb")]
    {
        let _ = tree_static::<dynatree::DynamoDbTable>;
        let _ = storage_static::<dynatree::DynamoDbTable>;
    }
}

// ---------------------------------------------------------------------------------------------
// At run time: handles moved into spawned tasks on a multi-threaded runtime.

fn user(i: u32) -> User {
    User {
        id: format!("u{i}"),
        email: format!("u{i}@example.com"),
    }
}

async fn work_in_tasks<S: Storage + 'static>(tree: Tree<S>) {
    tree.create_table().await.expect("create_table");
    let users: Repository<User, S> = tree.repo::<User>();

    // Several tasks write through clones of one tree and one repository at the same time.
    let mut tasks = Vec::new();
    for i in 0..8u32 {
        let tree = tree.clone();
        let users = users.clone();
        tasks.push(tokio::spawn(async move {
            tree.put(["Things", &format!("t{i}")], &V { v: i }).await?;
            users.put(&user(i)).await?;
            let got: Option<V> = tree.get(["Things", &format!("t{i}")]).await?;
            let back = users
                .get(&UserKey {
                    id: format!("u{i}"),
                })
                .await?;
            Ok::<_, Error>((got, back))
        }));
    }
    for (i, task) in (0u32..).zip(tasks) {
        let (got, back) = task.await.expect("task panicked").expect("task failed");
        assert_eq!(got, Some(V { v: i }));
        assert_eq!(back, Some(user(i)));
    }

    // A stream, a query and a builder created here are consumed in another task.
    let names = tree.list(["Things"]);
    let query = users.query(&UserCollection {});
    let by_email = users.index(User::index_by_email("u3@example.com"));
    let descendants = tree.descendants(["Things"]);
    let (names, all, found, below) = tokio::spawn(async move {
        let names: Vec<String> = names.try_collect().await?;
        let all: Vec<User> = query.items().try_collect().await?;
        let found: Vec<User> = by_email.items().try_collect().await?;
        let below = descendants
            .items()
            .map_ok(|d| d.path)
            .try_collect::<Vec<_>>()
            .await?;
        Ok::<_, Error>((names, all, found, below))
    })
    .await
    .expect("task panicked")
    .expect("task failed");
    assert_eq!(names.len(), 8);
    assert_eq!(names[0], "t0");
    assert_eq!(all.len(), 8);
    assert_eq!(found, [user(3)]);
    assert_eq!(below.len(), 8);

    // Batches in a task: the values and keys are the task's own.
    let batch: Vec<User> = (8..12).map(user).collect();
    let many = tokio::spawn({
        let users = users.clone();
        async move {
            users.put_all(&batch).await?;
            let keys: Vec<UserKey> = (7..13)
                .map(|i| UserKey {
                    id: format!("u{i}"),
                })
                .collect();
            users.get_many(&keys).await
        }
    })
    .await
    .expect("task panicked")
    .expect("task failed");
    assert_eq!(
        many,
        [
            Some(user(7)),
            Some(user(8)),
            Some(user(9)),
            Some(user(10)),
            Some(user(11)),
            None
        ]
    );

    // The tree outlives the tasks, and a task outlives the tree handle it was cloned from.
    let last = tokio::spawn({
        let tree = tree.clone();
        async move { tree.scan().count().await }
    });
    drop(tree);
    drop(users);
    assert!(last.await.expect("task panicked") > 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erased_tree_and_repository_move_into_spawned_tasks() {
    let tree: Tree = Tree::builder(FakeTable::new())
        .indexes_of::<User>()
        .build()
        .expect("tree");
    work_in_tasks(tree).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_tree_and_repository_move_into_spawned_tasks() {
    let tree: Tree<FakeTable> = Tree::builder(FakeTable::new())
        .indexes_of::<User>()
        .build_static()
        .expect("tree");
    work_in_tasks(tree).await;
}
