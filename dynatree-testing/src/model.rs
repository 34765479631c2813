//! A model-based property test: random sequences of put, link, get, read_link, list and delete
//! run against a [`Tree`] and against a `BTreeMap` model; after every step the results must
//! agree and the raw rows must keep the tree's invariants
//! ([`crate::conformance::assert_invariants`]).
//!
//! [`run_fake`] runs it on [`FakeTable`]; `run_local` (with the `local` feature) on DynamoDB
//! Local.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
#[cfg(feature = "local")]
use std::sync::OnceLock;
#[cfg(feature = "local")]
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "local")]
use dynatree::DynamoDbTable;
use dynatree::storage::Storage;
use dynatree::{ErrorKind, Path, Tree};
use futures::TryStreamExt;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use crate::FakeTable;
use crate::conformance::{V, assert_invariants};

/// The hop limit of the tree under test: small, so random link chains reach it.
pub const HOPS: usize = 2;

/// One step of a test sequence.
#[derive(Debug, Clone)]
pub enum Op {
    /// `put(path, {v})`
    Put(Vec<String>, u32),
    /// `put_link(path, target)`
    Link(Vec<String>, Vec<String>),
    /// `get(path)`
    Get(Vec<String>),
    /// `read_link(path)`
    ReadLink(Vec<String>),
    /// `list(prefix)`
    List(Vec<String>),
    /// `delete(path)`
    Delete(Vec<String>),
}

/// What the model holds at a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// An object.
    Object(u32),
    /// A link to a path.
    Link(Vec<String>),
}

/// The reference: a map from full paths to entries.
#[derive(Debug, Clone, Default)]
pub struct Model {
    entries: BTreeMap<Vec<String>, Entry>,
}

/// What the model says a `get` returns.
#[derive(Debug, PartialEq)]
enum Got {
    Value(Option<u32>),
    Loop,
}

impl Model {
    fn get(&self, path: &[String]) -> Got {
        let mut current = path.to_vec();
        let mut seen = vec![current.clone()];
        loop {
            match self.entries.get(&current) {
                None => return Got::Value(None),
                Some(Entry::Object(v)) => return Got::Value(Some(*v)),
                Some(Entry::Link(t)) => {
                    if seen.contains(t) || seen.len() > HOPS {
                        return Got::Loop;
                    }
                    seen.push(t.clone());
                    current = t.clone();
                }
            }
        }
    }

    fn list(&self, prefix: &[String]) -> Vec<String> {
        let names: BTreeSet<String> = self
            .entries
            .keys()
            .filter(|k| k.len() > prefix.len() && k.starts_with(prefix))
            .map(|k| k[prefix.len()].clone())
            .collect();
        names.into_iter().collect()
    }
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(str::to_owned)
}

fn path() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(component(), 1..=3)
}

/// The reference state machine.
#[derive(Debug)]
pub struct ModelMachine;

impl ReferenceStateMachine for ModelMachine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        // Prefer paths that exist, so deletes, reads and link chains hit something.
        let existing: Vec<Vec<String>> = state.entries.keys().cloned().collect();
        let known = if existing.is_empty() {
            path().boxed()
        } else {
            prop_oneof![1 => path(), 2 => proptest::sample::select(existing)].boxed()
        };
        prop_oneof![
            4 => (path(), 0..100u32).prop_map(|(p, v)| Op::Put(p, v)),
            3 => (path(), known.clone()).prop_map(|(p, t)| Op::Link(p, t)),
            3 => known.clone().prop_map(Op::Get),
            1 => known.clone().prop_map(Op::ReadLink),
            2 => proptest::collection::vec(component(), 0..=2).prop_map(Op::List),
            2 => known.prop_map(Op::Delete),
        ]
        .boxed()
    }

    fn apply(mut state: Model, op: &Op) -> Model {
        match op {
            Op::Put(p, v) => {
                state.entries.insert(p.clone(), Entry::Object(*v));
            }
            Op::Link(p, t) => {
                state.entries.insert(p.clone(), Entry::Link(t.clone()));
            }
            Op::Delete(p) => {
                state.entries.remove(p);
            }
            Op::Get(_) | Op::ReadLink(_) | Op::List(_) => {}
        }
        state
    }
}

/// Makes the storage for one test case.
pub trait Backend: 'static {
    /// The storage type.
    type Storage: Storage + 'static;
    /// A fresh, not yet created table.
    fn make() -> Self::Storage;
}

/// [`FakeTable`] as a model backend.
#[derive(Debug)]
pub struct Fake;

impl Backend for Fake {
    type Storage = FakeTable;
    fn make() -> FakeTable {
        FakeTable::new()
    }
}

#[cfg(feature = "local")]
static LOCAL_ENDPOINT: OnceLock<String> = OnceLock::new();
#[cfg(feature = "local")]
static LOCAL_TABLES: AtomicU64 = AtomicU64::new(0);

/// DynamoDB Local (at the endpoint given to [`run_local`]) as a model backend.
#[cfg(feature = "local")]
#[cfg_attr(docsrs, doc(cfg(feature = "local")))]
#[derive(Debug)]
pub struct Local;

#[cfg(feature = "local")]
impl Backend for Local {
    type Storage = DynamoDbTable;
    fn make() -> DynamoDbTable {
        let endpoint = LOCAL_ENDPOINT.get().expect("run_local sets the endpoint");
        let n = LOCAL_TABLES.fetch_add(1, Ordering::Relaxed);
        DynamoDbTable::new(
            crate::client_for(endpoint),
            format!("dynatree-model-{}-{n}", std::process::id()),
        )
    }
}

/// The system under test: a tree on its own runtime.
pub struct Sut<B: Backend> {
    rt: tokio::runtime::Runtime,
    tree: Tree,
    _backend: PhantomData<B>,
}

impl<B: Backend> std::fmt::Debug for Sut<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sut").finish_non_exhaustive()
    }
}

/// Binds the model to a backend.
#[derive(Debug)]
pub struct TreeTest<B>(PhantomData<B>);

impl<B: Backend> StateMachineTest for TreeTest<B> {
    type SystemUnderTest = Sut<B>;
    type Reference = ModelMachine;

    fn init_test(_: &Model) -> Sut<B> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let tree = Tree::builder(B::make())
            .max_link_hops(HOPS)
            .build()
            .expect("tree");
        rt.block_on(tree.create_table()).expect("create table");
        Sut {
            rt,
            tree,
            _backend: PhantomData,
        }
    }

    fn apply(sut: Sut<B>, model: &Model, op: Op) -> Sut<B> {
        let tree = &sut.tree;
        sut.rt.block_on(async {
            match &op {
                Op::Put(p, v) => tree.put(p, &V { v: *v }).await.expect("put"),
                Op::Link(p, t) => tree.put_link(p, t).await.expect("put_link"),
                Op::Delete(p) => tree.delete(p).await.expect("delete"),
                Op::Get(p) => {
                    let got = match tree.get::<V>(p).await {
                        Ok(v) => Got::Value(v.map(|v| v.v)),
                        Err(e) if e.kind() == ErrorKind::LinkLoop => Got::Loop,
                        Err(e) => panic!("get {p:?}: {e}"),
                    };
                    assert_eq!(got, model.get(p), "get {p:?}");
                }
                Op::ReadLink(p) => {
                    let got = tree.read_link(p).await;
                    match model.entries.get(p) {
                        None => assert!(got.unwrap_err().is_not_found(), "read_link {p:?}"),
                        Some(Entry::Object(_)) => {
                            assert!(got.unwrap_err().is_not_a_link(), "read_link {p:?}");
                        }
                        Some(Entry::Link(t)) => {
                            assert_eq!(got.expect("read_link"), Path::new(t.clone()).unwrap());
                        }
                    }
                }
                Op::List(prefix) => {
                    let names: Vec<String> = tree.list(prefix).try_collect().await.expect("list");
                    assert_eq!(names, model.list(prefix), "list {prefix:?}");
                }
            }
        });
        sut
    }

    fn check_invariants(sut: &Sut<B>, _: &Model) {
        sut.rt.block_on(assert_invariants(&sut.tree));
    }
}

fn run<B: Backend>(cases: u32, steps: std::ops::Range<usize>) {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config.clone());
    let result = runner.run(
        &ModelMachine::sequential_strategy(steps),
        |(initial, transitions, seen)| {
            TreeTest::<B>::test_sequential(config.clone(), initial, transitions, seen);
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("model test failed: {e}");
    }
}

/// Runs `cases` random sequences of up to 40 steps on [`FakeTable`].
///
/// # Examples
///
/// ```
/// // Random sequences of puts, links, gets, lists and deletes on a fresh `FakeTable`; it panics
/// // with the (shrunk) failing sequence when the tree and the `BTreeMap` model disagree.
/// dynatree_testing::model::run_fake(4);
/// ```
pub fn run_fake(cases: u32) {
    run::<Fake>(cases, 1..40);
}

/// Runs `cases` random sequences of up to 25 steps on DynamoDB Local at `endpoint`.
///
/// # Examples
///
/// ```no_run
/// // Starts a JVM: run it where DynamoDB Local may run (see `DynamoDbLocal::start`).
/// let local = dynatree_testing::DynamoDbLocal::start()?;
/// dynatree_testing::model::run_local(&local.endpoint(), 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "local")]
#[cfg_attr(docsrs, doc(cfg(feature = "local")))]
pub fn run_local(endpoint: &str, cases: u32) {
    LOCAL_ENDPOINT.get_or_init(|| endpoint.to_owned());
    run::<Local>(cases, 1..25);
}
