//! Fixtures shared by the integrity checker's tests: `check_repair.rs` here (on the fake) and
//! `check_local.rs` of `dynatree-testing` (on DynamoDB Local, which includes this file with
//! `#[path]`). Value types, raw writes as another program (or the Go library) would do them,
//! and reports reduced to `(class, path)` pairs.
#![allow(dead_code)]

use dynatree::check::{Class, Report};
use dynatree::storage::{Condition, Key, Storage};
use dynatree::{Hierarchical, Path, Tree, storage::Value};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct V {
    pub v: u32,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Sessions/{id}")]
pub struct Session {
    pub id: String,
    pub user: String,
    #[dynatree(ttl)]
    pub expires: u64,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}")]
pub struct Forum {
    pub forum: String,
    pub name: String,
}

#[derive(Hierarchical, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[dynatree(path = "Forums/{forum}/Threads/{thread}")]
pub struct Thread {
    pub forum: String,
    pub thread: String,
    pub title: String,
    #[dynatree(from = Forum::name)]
    pub forum_name: String,
}

pub fn p(s: &str) -> Path {
    Path::parse_escaped(s).unwrap()
}

/// `(class, path or "Key|Child")` of every violation, sorted.
pub fn found(report: &Report) -> Vec<(Class, String)> {
    let mut v: Vec<(Class, String)> = report
        .violations()
        .iter()
        .map(|v| (v.class(), describe(v.path(), v.key())))
        .collect();
    v.sort();
    v
}

pub fn describe(path: Option<&Path>, key: &Key) -> String {
    match path {
        Some(p) => p.escaped(),
        None => format!("{}|{}", key.hash, key.range),
    }
}

pub fn expect(list: &[(Class, &str)]) -> Vec<(Class, String)> {
    let mut v: Vec<(Class, String)> = list.iter().map(|(c, s)| (*c, s.to_string())).collect();
    v.sort();
    v
}

pub fn listed(vs: &[dynatree::check::Violation]) -> Vec<(Class, String)> {
    let mut v: Vec<(Class, String)> = vs
        .iter()
        .map(|v| (v.class(), describe(v.path(), v.key())))
        .collect();
    v.sort();
    v
}

pub fn sc_key(path: &[&str]) -> String {
    path.iter().map(|c| format!("¦{c}")).collect()
}

pub fn listing_key(path: &[&str]) -> Key {
    let (last, parent) = path.split_last().unwrap();
    Key::new(format!("{}¦", sc_key(parent)), *last)
}

pub fn object_key(path: &[&str]) -> Key {
    Key::new(sc_key(path), "¦")
}

pub async fn raw_put<S: Storage>(table: &S, key: Key, attrs: &[(&str, Value)]) {
    let mut item = key.into_item();
    for (n, v) in attrs {
        item.insert(*n, v.clone());
    }
    table.put_item(item, Condition::Always).await.unwrap();
}

pub async fn raw_delete<S: Storage>(table: &S, key: Key) {
    table.delete_item(&key, Condition::Always).await.unwrap();
}

/// Sets one attribute of an existing row, raw (read, change, put back unconditionally).
pub async fn raw_set<S: Storage>(table: &S, key: Key, name: &str, value: Value) {
    let mut item = table.get_item(&key, true).await.unwrap().expect("the row");
    item.insert(name, value);
    table.put_item(item, Condition::Always).await.unwrap();
}

pub fn s(v: &str) -> Value {
    Value::S(v.to_owned())
}

pub fn n(v: u64) -> Value {
    Value::N(v.to_string())
}

/// The Go library's Put: every listing row, then the object row, all unconditional.
pub async fn go_put<S: Storage>(table: &S, path: &[&str], attrs: &[(&str, Value)]) {
    for i in 1..=path.len() {
        raw_put(table, listing_key(&path[..i]), &[]).await;
    }
    raw_put(table, object_key(path), attrs).await;
}

/// The Go library's Delete: the object row and its own listing row, unconditionally (children
/// and ancestors' listing rows left as they are: REFERENCE §2 defect 4).
pub async fn go_delete<S: Storage>(table: &S, path: &[&str]) {
    raw_delete(table, object_key(path)).await;
    raw_delete(table, listing_key(path)).await;
}

pub async fn list(tree: &Tree, path: &str) -> Vec<String> {
    tree.list(p(path)).try_collect().await.unwrap()
}

pub async fn get(tree: &Tree, path: &str) -> Option<V> {
    tree.get(p(path)).await.unwrap()
}

pub fn forum(id: &str, name: &str) -> Forum {
    Forum {
        forum: id.into(),
        name: name.into(),
    }
}

pub fn thread(forum: &str) -> Thread {
    Thread {
        forum: forum.into(),
        thread: "t".into(),
        title: "Hello".into(),
        forum_name: String::new(),
    }
}
