//! Adversarial schedules for watchers (`Tree::watch`, invariant 14): moves in chains and
//! swaps, moves racing overwrites at both ends, copies, re-parenting, transactions over
//! several partitions, moves across the watched path's border in both directions, scoped
//! watches, shards split at awkward points, and watchers that crash, restart from their
//! stored cursor several times, or take their position while writers run.
//!
//! Each scenario follows the harness of `watchers.rs`: a follower applies the changes in the
//! order handed and must end holding exactly the objects under the watched path. A strict
//! follower (position taken before the setup writes) refuses a change that does not apply to
//! what it holds (a creation of a held path, an update or deletion of another value, a move
//! from a path it does not hold): each change at most once, each path's changes in order. A
//! resynchronising follower (position taken while writers run, then a snapshot of the table,
//! as `watch.md` prescribes) keeps whole values, so a change handed again is absorbed; it must
//! still end holding exactly the table's objects (nothing acknowledged after the position is
//! lost). The finish step writes "late" objects long after every writer ended, then catches
//! up: a watch must hand them (a path held back forever fails here).
//!
//! Refused moves in every order of their records, watches positioned in each phase of a
//! refused move, moves back and forth under a crashing watcher, and time to live expiring a
//! subtree being moved are here too.
//!
//! Scenarios that met defects, now mended: a watch positioned in the middle of a move (the
//! source's removal without its copy), a move that kept its source after a lock-ignoring
//! write (the copy without its removal), a move's copy removed outside the protocol (time to
//! live, a Go delete) after its `Moved` was handed, and a resumed cursor that did not know a
//! shard read while empty (its loss by trimming went unnoticed), a refused move whose source's
//! hold a Go put erased (its copy and rollback waited for a release that never came). The
//! finish steps wait out the watch's documented 10 s for a move's missing record before they
//! call it caught up.

use std::cell::RefCell;
use std::collections::BTreeMap;

use dynatree::watch::{Change, Cursor, Watch};

use crate::acts::*;

/// Longer than the watch's wait for a move's missing record once it is caught up (10 s).
const MOVE_RECORD_WAIT: Duration = Duration::from_secs(11);

/// What one schedule's watcher knows, kept between its steps.
#[derive(Default)]
struct Follower {
    table: Option<FakeTable>,
    cursor: Option<Cursor>,
    objects: BTreeMap<Vec<String>, Item>,
    /// Keeps whole values (a resynchronised follower): a change handed again is absorbed.
    tolerant: bool,
    /// The first change that did not apply.
    broken: Option<String>,
    changes: usize,
    /// A watch reported `CursorExpired`.
    expired: bool,
}

thread_local! {
    static FOLLOWER: RefCell<Follower> = RefCell::new(Follower::default());
}

fn recorded_table() -> FakeTable {
    let table = FakeTable::new();
    FOLLOWER.with(|f| {
        *f.borrow_mut() = Follower {
            table: Some(table.clone()),
            ..Follower::default()
        }
    });
    table
}

fn table() -> FakeTable {
    FOLLOWER.with(|f| f.borrow().table.clone().expect("a recorded table"))
}

fn object(v: &Any) -> Result<Item, String> {
    match v {
        Any::Object(u) => Ok(u.object().clone()),
        Any::Never(_) => Err("an object at Never/".to_owned()),
    }
}

fn apply(changes: Vec<Change<Any>>) {
    FOLLOWER.with(|f| {
        let f = &mut *f.borrow_mut();
        for change in changes {
            f.changes += 1;
            if f.broken.is_some() {
                return;
            }
            let applied = if f.tolerant {
                absorb_one(&mut f.objects, change)
            } else {
                apply_one(&mut f.objects, change)
            };
            if let Err(e) = applied {
                f.broken = Some(e);
            }
        }
    });
}

/// Applies one change strictly.
fn apply_one(objects: &mut BTreeMap<Vec<String>, Item>, change: Change<Any>) -> Result<(), String> {
    match change {
        Change::Created { path, value, .. } => {
            if objects
                .insert(path.components().to_vec(), object(&value)?)
                .is_some()
            {
                return Err(format!("created {path}, which the follower holds"));
            }
        }
        Change::Updated { path, old, new, .. } => {
            let held = objects.get(path.components());
            if held != Some(&object(&old)?) {
                return Err(format!(
                    "updated {path} from {old:?}, the follower holds {held:?}"
                ));
            }
            objects.insert(path.components().to_vec(), object(&new)?);
        }
        Change::Deleted { path, old, .. } => {
            let held = objects.remove(path.components());
            if held != Some(object(&old)?) {
                return Err(format!(
                    "deleted {path} holding {old:?}, the follower held {held:?}"
                ));
            }
        }
        Change::Moved {
            from, to, value, ..
        } => {
            if objects.remove(from.components()).is_none() {
                return Err(format!("moved {from}, which the follower does not hold"));
            }
            if objects
                .insert(to.components().to_vec(), object(&value)?)
                .is_some()
            {
                return Err(format!("moved onto {to}, which the follower holds"));
            }
        }
        other => return Err(format!("a change this test does not know: {other:?}")),
    }
    Ok(())
}

/// Applies one change as whole values (what a resynchronised follower does).
fn absorb_one(
    objects: &mut BTreeMap<Vec<String>, Item>,
    change: Change<Any>,
) -> Result<(), String> {
    match change {
        Change::Created { path, value, .. } => {
            objects.insert(path.components().to_vec(), object(&value)?);
        }
        Change::Updated { path, new, .. } => {
            objects.insert(path.components().to_vec(), object(&new)?);
        }
        Change::Deleted { path, .. } => {
            objects.remove(path.components());
        }
        Change::Moved {
            from, to, value, ..
        } => {
            objects.remove(from.components());
            objects.insert(to.components().to_vec(), object(&value)?);
        }
        other => return Err(format!("a change this test does not know: {other:?}")),
    }
    Ok(())
}

fn stored_cursor() -> Option<Cursor> {
    FOLLOWER.with(|f| f.borrow().cursor.clone())
}

fn store_cursor(watch: &Watch<Any>) {
    let cursor = watch.cursor().clone();
    FOLLOWER.with(|f| f.borrow_mut().cursor = Some(cursor));
}

fn note_expired() {
    FOLLOWER.with(|f| f.borrow_mut().expired = true);
}

/// The objects of the table under `scope`/`prefix`, by their paths relative to `scope`.
fn objects_in(rows: &[Item], scope: &[String], prefix: &[String]) -> BTreeMap<Vec<String>, Item> {
    let mut under = scope.to_vec();
    under.extend(prefix.iter().cloned());
    Model::from_rows(rows, SC)
        .objects()
        .iter()
        .filter(|(p, _)| p.starts_with(&under))
        .filter_map(|(p, s)| match s {
            Stored::Object(item) => Some((p[scope.len()..].to_vec(), item.clone())),
            Stored::Link(_) => None,
        })
        .collect()
}

/// The resynchronisation of `watch.md`: the watch took its position; the follower reads the
/// subtree (here, the table at once) and keeps whole values from now on.
fn snapshot(scope: &[String], prefix: &[String]) {
    let objects = objects_in(&table().rows(), scope, prefix);
    FOLLOWER.with(|f| {
        let f = &mut *f.borrow_mut();
        f.objects = objects;
        f.tolerant = true;
    });
}

/// One scenario: where the watch is, what it races, and how the watcher runs.
#[derive(Clone)]
struct Plan {
    name: String,
    /// The scope the watch is made on (empty: the whole tree); `prefix` is relative to it.
    scope: Vec<String>,
    prefix: Vec<String>,
    /// Objects written (absolute paths) before the writers run.
    setup: Vec<(P, u32)>,
    /// Objects written in setup with an expiry long past (`expires`, the table's time to live
    /// attribute), which `Step::Expire` deletes as DynamoDB's time to live does.
    expiring: Vec<(P, u32)>,
    /// Open shards once the stream is enabled.
    shards: usize,
    /// The splits an extra operation makes, each after a read (anywhere among the writes).
    splits: Vec<usize>,
    /// The watch takes its position in the watcher's process, racing the writers (then a
    /// snapshot of the table, and a follower keeping whole values); otherwise in setup,
    /// before the setup writes (a strict follower).
    racing_start: bool,
    /// Reads per watch in the watcher's process.
    reads: usize,
    /// How many times the watcher drops its watch and resumes a new one from its cursor.
    restarts: usize,
    /// Objects written (absolute paths) by the finish step, long after every writer ended,
    /// before the final catch-up.
    late: Vec<(P, u32)>,
    max_faults: usize,
    faults: Vec<SimFault>,
    schedules: usize,
    tree: fn(SimStorage<FakeTable>) -> T,
}

impl Plan {
    fn new(name: &str, prefix: &[&str], setup: &[(&[&str], u32)]) -> Self {
        Self {
            name: format!("watchers (adversarial): {name}"),
            scope: Vec::new(),
            prefix: p(prefix),
            setup: paths(setup),
            expiring: Vec::new(),
            shards: 2,
            splits: vec![3, 1],
            racing_start: false,
            reads: 3,
            restarts: 0,
            late: Vec::new(),
            max_faults: 1,
            faults: SimFault::all(),
            schedules: 150,
            tree: plain_tree,
        }
    }
}

fn make_watch(t: &T, scope: &[String], prefix: &[String]) -> dynatree::Result<Watch<Any>> {
    if scope.is_empty() {
        Ok(t.watch::<Any>(prefix.to_vec()))
    } else {
        Ok(t.scope(scope.to_vec())?.watch::<Any>(prefix.to_vec()))
    }
}

/// A watch resumed from the stored cursor; with none, a fresh one that takes its position
/// now, then the snapshot (the resynchronisation).
async fn open_watch(t: &T, scope: &[String], prefix: &[String]) -> dynatree::Result<Watch<Any>> {
    let watch = make_watch(t, scope, prefix)?;
    match stored_cursor() {
        Some(cursor) => Ok(watch.start_after(cursor)),
        None => {
            let mut watch = watch;
            watch.start().await?;
            snapshot(scope, prefix);
            store_cursor(&watch);
            Ok(watch)
        }
    }
}

/// The follower holds exactly the objects under the watched path, and every change applied
/// (or the watch told it its cursor expired).
fn follower_agrees(end: &End<'_>, scope: &[String], prefix: &[String]) -> Result<(), String> {
    let (objects, broken, changes, expired) = FOLLOWER.with(|f| {
        let f = f.borrow();
        (f.objects.clone(), f.broken.clone(), f.changes, f.expired)
    });
    if let Some(broken) = broken {
        return Err(format!("change {changes}: {broken}"));
    }
    if expired {
        return Ok(());
    }
    let stored = objects_in(end.rows, scope, prefix);
    if objects == stored {
        Ok(())
    } else {
        Err(format!(
            "after {changes} changes the watcher holds {objects:?}, the table {stored:?}"
        ))
    }
}

/// One step of a writer: an act, a transaction of documents, a lock-ignoring put, or a split
/// of the stream right there.
#[derive(Clone, Debug)]
enum Step {
    Act(Act),
    /// A transaction putting documents `{dir}/{name}` = v.
    Tx(Vec<(&'static str, &'static str, u32)>),
    Split(usize),
    /// A read (a point of the schedule), then DynamoDB's time to live deletes every row whose
    /// `expires` is past (not a request of the tree's).
    Expire,
}

/// An object with a time to live attribute.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Expiring {
    v: u32,
    expires: u64,
}

impl Step {
    fn name(&self) -> String {
        match self {
            Step::Act(a) => a.name(),
            Step::Tx(docs) => format!(
                "transaction {{{}}}",
                docs.iter()
                    .map(|(d, n, v)| format!("put {d}/{n}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Step::Split(n) => format!("split the stream into {n}"),
            Step::Expire => "time to live deletes the expired rows".to_owned(),
        }
    }

    async fn run(self, t: T) -> dynatree::Result<String> {
        match self {
            Step::Act(a) => a.run(t).await,
            Step::Tx(docs) => {
                let mut tx = t.transaction();
                for (d, n, v) in docs {
                    tx.put(&doc(d, n, v));
                }
                tx.commit().await.map(|()| String::new())
            }
            Step::Split(n) => {
                table().split_stream(n);
                Ok(String::new())
            }
            Step::Expire => {
                let _ = t.get::<V>(["ttl-tick"]).await;
                Ok(format!("{} rows", table().expire_ttl(1000)))
            }
        }
    }
}

fn act(a: Act) -> Step {
    Step::Act(a)
}

fn mv(from: &[&str], to: &[&str]) -> Step {
    Step::Act(Act::Move(p(from), p(to), LinkPolicy::Report))
}

fn put(path: &[&str], v: u32) -> Step {
    Step::Act(Act::Put(p(path), v))
}

/// A writer: its steps one after the other (a refused or failed step does not stop it).
type Writer = Vec<Step>;

fn run(plan: Plan, writers: Vec<Writer>) {
    let Plan {
        name,
        scope,
        prefix,
        setup,
        expiring,
        shards,
        splits,
        racing_start,
        reads,
        restarts,
        late,
        max_faults,
        faults,
        schedules,
        tree,
    } = plan;
    let (s1, s2, s3) = (scope.clone(), scope.clone(), scope.clone());
    let (p1, p2, p3) = (prefix.clone(), prefix.clone(), prefix.clone());
    let mut sim = Sim::new(name, recorded_table)
        .schedules(schedules)
        .tree(tree)
        .setup(move |t| {
            let (setup, scope, prefix) = (setup.clone(), s1.clone(), p1.clone());
            let expiring = expiring.clone();
            async move {
                t.storage().enable_stream().await?;
                t.storage().enable_ttl("expires").await?;
                table().split_stream(shards);
                if !racing_start {
                    let mut watch = make_watch(&t, &scope, &prefix)?;
                    watch.start().await?;
                    store_cursor(&watch);
                }
                for (p, v) in setup {
                    t.put(p, &V { v }).await?;
                }
                for (p, v) in expiring {
                    t.put(p, &Expiring { v, expires: 1 }).await?;
                }
                Ok(())
            }
        });
    for steps in writers {
        let name = steps
            .iter()
            .map(Step::name)
            .collect::<Vec<_>>()
            .join("; then ");
        sim = sim.op(name, move |t| {
            let steps = steps.clone();
            async move {
                let mut out = Vec::new();
                for s in steps {
                    let n = s.name();
                    match s.run(t.clone()).await {
                        Ok(r) => out.push(format!("{n}: ok {r}")),
                        Err(e) => out.push(format!("{n}: {:?}", e.kind())),
                    }
                }
                Ok::<_, dynatree::Error>(out.join("; "))
            }
        });
    }
    if !splits.is_empty() {
        sim = sim.op("split the stream", move |t| {
            let splits = splits.clone();
            async move {
                for (i, n) in splits.into_iter().enumerate() {
                    let _ = t.get::<V>([format!("split-{i}")]).await;
                    table().split_stream(n);
                }
                Ok(())
            }
        });
    }
    sim.faults(max_faults, faults)
        .process("watcher", move |t, _calls| {
            let (scope, prefix) = (s2.clone(), p2.clone());
            async move {
                for _ in 0..=restarts {
                    let mut watch = match open_watch(&t, &scope, &prefix).await {
                        Ok(w) => w,
                        Err(_) => continue,
                    };
                    for _ in 0..reads {
                        // The changes and the cursor after them are kept together (the
                        // process may crash at any request).
                        match watch.catch_up().await {
                            Ok(changes) => {
                                apply(changes);
                                store_cursor(&watch);
                            }
                            Err(e) if e.kind() == ErrorKind::CursorExpired => note_expired(),
                            Err(_) => {}
                        }
                    }
                }
                Ok(())
            }
        })
        .finish(move |t| {
            let (scope, prefix, late) = (s3.clone(), p3.clone(), late.clone());
            async move {
                for (p, v) in late {
                    t.put(p, &V { v }).await?;
                }
                let mut watch = open_watch(&t, &scope, &prefix).await?;
                let mut waited = false;
                for _ in 0..50 {
                    match watch.catch_up().await {
                        // Caught up: once more after the watch's wait for a move's missing
                        // record (`watch.md`: 10 s once caught up; paused time here).
                        Ok(changes) if changes.is_empty() => {
                            if waited {
                                break;
                            }
                            waited = true;
                            tokio::time::sleep(MOVE_RECORD_WAIT).await;
                        }
                        Ok(changes) => {
                            waited = false;
                            apply(changes);
                        }
                        Err(e) if e.kind() == ErrorKind::CursorExpired => {
                            note_expired();
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
        })
        .check(move |end| follower_agrees(end, &scope, &prefix))
        .run();
}

/// The slot of the stream's open shards (of `n`) the object row at `path` goes to (as the
/// fake stream chooses it: FNV-1a of the partition key).
fn slot(path: &[&str], n: u64) -> u64 {
    let mut h = String::new();
    for c in path {
        h.push(SC);
        h.push_str(c);
    }
    h.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) % n
}

/// The first `k` one-component names, among `n0`, `n1`, … , whose object rows go to shard
/// slot `s` of `n`.
fn names_in(s: u64, n: u64, k: usize, taken: &[String]) -> Vec<String> {
    (0..)
        .map(|i| format!("n{i}"))
        .filter(|name| !taken.contains(name) && slot(&[name.as_str()], n) == s)
        .take(k)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The watch takes its position while a move runs.
// ---------------------------------------------------------------------------------------

/// The watch starts while `a` moves to `b` (one shard: so the position can fall between the
/// copy's insert and the source's removal); long after, `a` is created again. The watch must
/// hand it.
#[test]
fn a_watch_positioned_mid_move_hands_later_changes_at_the_vacated_source() {
    let mut plan = Plan::new(
        "start racing move a->b; late put a, c",
        &[],
        &[(&["a"], 1), (&["c"], 3)],
    );
    plan.shards = 1;
    plan.splits = Vec::new();
    plan.racing_start = true;
    plan.reads = 2;
    plan.max_faults = 0;
    plan.late = paths(&[(&["a"], 9), (&["c"], 7)]);
    run(plan, vec![vec![mv(&["a"], &["b"])]]);
}

/// As above over two shards, the stream split while the move runs.
#[test]
fn a_watch_positioned_mid_move_over_two_shards_hands_later_changes_at_the_vacated_source() {
    let mut plan = Plan::new(
        "start racing move a->b, splits; late put a",
        &[],
        &[(&["a"], 1), (&["a", "x"], 2)],
    );
    plan.shards = 2;
    plan.splits = vec![2];
    plan.racing_start = true;
    plan.reads = 2;
    plan.max_faults = 0;
    plan.late = paths(&[(&["a"], 9), (&["a", "y"], 8)]);
    run(plan, vec![vec![mv(&["a"], &["b"])]]);
}

/// The watch starts while puts, a copy and a deletion run (no move): the resynchronised
/// follower must end with the table's objects.
#[test]
fn a_watch_positioned_among_puts_copies_and_deletions_resynchronises() {
    let mut plan = Plan::new(
        "start racing copy a->c, delete d, put a/x; late put e",
        &[],
        &[(&["a"], 1), (&["a", "x"], 2), (&["d"], 4)],
    );
    plan.racing_start = true;
    plan.late = paths(&[(&["e"], 5)]);
    run(
        plan,
        vec![
            vec![act(Act::Copy(p(&["a"]), p(&["c"])))],
            vec![act(Act::Delete(p(&["d"]))), put(&["a", "x"], 6)],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Chains, swaps, moves into vacated paths.
// ---------------------------------------------------------------------------------------

/// `a` moves to `b`, then `b` to `c`, while `b` is put by another writer (before, between or
/// after the moves), the stream splitting anywhere.
#[test]
fn a_chain_of_moves_vs_a_put_at_the_middle_path() {
    let mut plan = Plan::new(
        "move a->b then b->c vs put b",
        &[],
        &[(&["a"], 1), (&["a", "k"], 2)],
    );
    plan.late = paths(&[(&["b"], 9), (&["a"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"]), mv(&["b"], &["c"])],
            vec![put(&["b"], 5)],
        ],
    );
}

/// A swap of `a` and `b` through `t` (`a->t`, `b->a`, `t->b`), while both are overwritten.
#[test]
fn a_swap_through_a_vacated_path_vs_overwrites_of_both() {
    let mut plan = Plan::new(
        "swap a,b via t vs put a, put b",
        &[],
        &[(&["a"], 1), (&["b"], 2)],
    );
    plan.late = paths(&[(&["t"], 9), (&["a"], 7), (&["b"], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["a"], &["t"]), mv(&["b"], &["a"]), mv(&["t"], &["b"])],
            vec![put(&["a"], 5), put(&["b"], 6)],
        ],
    );
}

/// A move away and back (`a->b`, `b->a`) while the stream splits between the two moves,
/// then `a` deleted and created again, racing a put at `b`.
#[test]
fn a_move_there_and_back_then_deletion_and_recreation() {
    let mut plan = Plan::new(
        "move a->b, split, b->a, delete a, put a vs put b",
        &[],
        &[(&["a"], 1)],
    );
    plan.splits = vec![2];
    plan.late = paths(&[(&["a"], 9), (&["b"], 8)]);
    run(
        plan,
        vec![
            vec![
                mv(&["a"], &["b"]),
                Step::Split(3),
                mv(&["b"], &["a"]),
                act(Act::Delete(p(&["a"]))),
                put(&["a"], 4),
            ],
            vec![put(&["b"], 6)],
        ],
    );
}

/// Two moves whose copies and removals are in opposite shards (`a`, `d` in one, `b`, `c` in
/// the other): `a->b` and `c->d` at once, then chained on (`b->c'`, `d->a'` into the vacated
/// names), with overwrites. A pairing that waited on a cycle would hold paths back forever.
#[test]
fn concurrent_moves_with_copies_and_removals_in_opposite_shards() {
    let x = names_in(0, 2, 2, &[]);
    let y = names_in(1, 2, 2, &x);
    let (a, d, b, c) = (x[0].clone(), x[1].clone(), y[0].clone(), y[1].clone());
    let (a, b, c, d) = (a.as_str(), b.as_str(), c.as_str(), d.as_str());
    let mut plan = Plan::new(
        &format!("{a}->{b} then {b}->{c} vs {c}->{d} then {d}->{a}, over two shards"),
        &[],
        &[(&[a], 1), (&[c], 3)],
    );
    plan.splits = Vec::new();
    plan.late = paths(&[(&[a], 9), (&[b], 8), (&[c], 7), (&[d], 6)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&[a], &[b]), mv(&[b], &[c])],
            vec![mv(&[c], &[d]), mv(&[d], &[a])],
        ],
    );
}

/// A move racing overwrites of its source and of its destination's path (the destination
/// created under it or first), then the same move again.
#[test]
fn a_move_racing_overwrites_at_source_and_destination() {
    let mut plan = Plan::new(
        "move a->b (twice) vs put a vs put b",
        &[],
        &[(&["a"], 1), (&["a", "x"], 2)],
    );
    plan.late = paths(&[(&["a"], 9), (&["b"], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"]), mv(&["a"], &["b"])],
            vec![put(&["a"], 5)],
            vec![put(&["b"], 6)],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Copies, re-parenting, transactions.
// ---------------------------------------------------------------------------------------

/// A copy of `a` to `c` racing a move of `a` to `b` (one is refused or waits its turn), and a
/// copy of the moved subtree onward.
#[test]
fn copies_racing_a_move_of_their_source() {
    let mut plan = Plan::new(
        "copy a->c vs move a->b then copy b->d",
        &[],
        &[(&["a"], 1), (&["a", "x"], 2)],
    );
    plan.late = paths(&[(&["c"], 9), (&["b", "x"], 8)]);
    run(
        plan,
        vec![
            vec![act(Act::Copy(p(&["a"]), p(&["c"])))],
            vec![mv(&["a"], &["b"]), act(Act::Copy(p(&["b"]), p(&["d"])))],
        ],
    );
}

/// Re-parenting under a watched sub-path (children come up to it) while a child is
/// overwritten, and the node is put again once gone.
#[test]
fn reparenting_inside_the_watched_path_vs_overwrite_and_recreation() {
    let mut plan = Plan::new(
        "watch w; delete_node w/p Reparent then put w/p vs put w/p/c",
        &["w"],
        &[
            (&["w"], 0),
            (&["w", "p"], 1),
            (&["w", "p", "c"], 2),
            (&["w", "p", "d"], 3),
        ],
    );
    plan.late = paths(&[(&["w", "c"], 9), (&["w", "p"], 8)]);
    run(
        plan,
        vec![
            vec![act(Act::ReparentTwice(p(&["w", "p"]))), put(&["w", "p"], 4)],
            vec![put(&["w", "p", "c"], 5)],
        ],
    );
}

/// Re-parenting that carries children out of the watched path (`w` is deleted, its children
/// come up to the root).
#[test]
fn reparenting_carries_children_across_the_border() {
    let mut plan = Plan::new(
        "watch w; delete_node w Reparent vs put w/c",
        &["w"],
        &[(&["w"], 1), (&["w", "c"], 2), (&["w", "d"], 3)],
    );
    plan.late = paths(&[(&["w", "c"], 9), (&["c"], 8)]);
    run(
        plan,
        vec![
            vec![act(Act::ReparentTwice(p(&["w"])))],
            vec![put(&["w", "c"], 5)],
        ],
    );
}

/// Transactions over several partitions (several object rows, several shards) racing a move
/// of one of their directories.
#[test]
fn transactions_over_several_partitions_vs_a_move_of_their_directory() {
    let mut plan = Plan::new(
        "tx {x/a, y/b, z/c} vs move x->m vs tx {y/b, x/d}",
        &[],
        &[(&["x"], 0), (&["y"], 0), (&["z"], 0)],
    );
    plan.shards = 3;
    plan.splits = vec![2, 3];
    plan.late = paths(&[(&["x", "a"], 9), (&["m", "a"], 8)]);
    run(
        plan,
        vec![
            vec![Step::Tx(vec![("x", "a", 1), ("y", "b", 2), ("z", "c", 3)])],
            vec![mv(&["x"], &["m"])],
            vec![Step::Tx(vec![("y", "b", 4), ("x", "d", 5)])],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// The watched path's border.
// ---------------------------------------------------------------------------------------

/// Watching `w`: an object leaves (`w/x->o`) and comes back elsewhere (`o->w/y`), another
/// comes in (`i->w/i`) and goes out again, one moves within, while they are overwritten.
#[test]
fn moves_across_the_border_in_both_directions() {
    let mut plan = Plan::new(
        "watch w; w/x->o then o->w/y; i->w/i then w/i->j; w/z->w/q vs put w/x, put o",
        &["w"],
        &[(&["w"], 0), (&["w", "x"], 1), (&["i"], 2), (&["w", "z"], 3)],
    );
    plan.late = paths(&[(&["w", "x"], 9), (&["w", "i"], 8), (&["o"], 7)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["w", "x"], &["o"]), mv(&["o"], &["w", "y"])],
            vec![mv(&["i"], &["w", "i"]), mv(&["w", "i"], &["j"])],
            vec![mv(&["w", "z"], &["w", "q"])],
            vec![put(&["w", "x"], 5), put(&["o"], 6)],
        ],
    );
}

/// A move into the watched path refused (its destination taken by a racing put), and a move
/// out of it refused the same way: nothing, or consistent creations and deletions.
#[test]
fn refused_moves_across_the_border() {
    let mut plan = Plan::new(
        "watch w; i->w/i vs put w/i; w/x->o vs put o",
        &["w"],
        &[(&["w"], 0), (&["w", "x"], 1), (&["i"], 2)],
    );
    plan.late = paths(&[(&["w", "i"], 9), (&["w", "x"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["i"], &["w", "i"])],
            vec![put(&["w", "i"], 5)],
            vec![mv(&["w", "x"], &["o"])],
            vec![put(&["o"], 6)],
        ],
    );
}

/// A watch through a scope, while moves of the whole tree cross the scope's root both ways.
#[test]
fn a_scoped_watch_vs_unscoped_moves_across_its_root() {
    let mut plan = Plan::new(
        "scope T/s, watch all; x->T/s/x, T/s/y->y, put T/s/y",
        &[],
        &[
            (&["T"], 0),
            (&["T", "s"], 0),
            (&["T", "s", "y"], 1),
            (&["x"], 2),
        ],
    );
    plan.scope = p(&["T", "s"]);
    plan.late = paths(&[(&["T", "s", "x"], 9), (&["x"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["x"], &["T", "s", "x"])],
            vec![mv(&["T", "s", "y"], &["y"])],
            vec![put(&["T", "s", "y"], 5)],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Watchers that stop and resume.
// ---------------------------------------------------------------------------------------

/// The watcher drops its watch and resumes from its cursor three times (one read each),
/// crashing or failing at any request, while a move and overwrites run and the stream splits.
#[test]
fn a_watcher_resumed_many_times_under_crashes() {
    let mut plan = Plan::new(
        "watcher resumed 3x; move a->b then b/x->c vs put a/x vs put b",
        &[],
        &[(&["a"], 1), (&["a", "x"], 2)],
    );
    plan.reads = 1;
    plan.restarts = 3;
    plan.faults = vec![
        SimFault::Crash,
        SimFault::CrashAfterApply,
        SimFault::Request(dynatree_testing::Fault::Fail),
        SimFault::Request(dynatree_testing::Fault::FailAfterApply),
    ];
    plan.max_faults = 2;
    plan.late = paths(&[(&["a"], 9), (&["b", "x"], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"]), mv(&["b", "x"], &["c"])],
            vec![put(&["a", "x"], 5)],
            vec![put(&["b"], 6)],
        ],
    );
}

/// Resumed many times, watching a sub-path while moves cross its border, over three shards
/// split twice.
#[test]
fn a_watcher_resumed_many_times_while_moves_cross_its_border() {
    let mut plan = Plan::new(
        "watch w, resumed 3x; w/a->b then b->w/c; d->w/d",
        &["w"],
        &[
            (&["w"], 0),
            (&["w", "a"], 1),
            (&["w", "a", "k"], 2),
            (&["d"], 3),
        ],
    );
    plan.shards = 3;
    plan.splits = vec![1, 3];
    plan.reads = 1;
    plan.restarts = 3;
    plan.late = paths(&[(&["w", "a"], 9), (&["w", "d", "z"], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["w", "a"], &["b"]), mv(&["b"], &["w", "c"])],
            vec![mv(&["d"], &["w", "d"])],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Lock-ignoring writers.
// ---------------------------------------------------------------------------------------

/// A Go put (lock-ignoring) of a move's source races the move: whatever the order, the
/// watcher must end with the table's objects, and a later put at the destination must be
/// handed.
#[test]
fn a_lock_ignoring_overwrite_of_a_moves_source_does_not_hold_back_the_destination() {
    let mut plan = Plan::new("move a->b vs Go put a", &[], &[(&["a"], 1)]);
    plan.splits = Vec::new();
    plan.max_faults = 0;
    plan.late = paths(&[(&["b"], 9), (&["c"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"])],
            vec![act(Act::GoPut(p(&["a"]), 7))],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Expiry.
// ---------------------------------------------------------------------------------------

/// A cursor stored once the watch read a closed shard to its end and its (then empty) child;
/// the child then gets records, closes, and the stream trims (24 hours pass). A watch resumed
/// from that cursor must report `CursorExpired` or hand every change after the cursor; it
/// must not lose changes silently.
#[test]
fn a_resumed_watch_that_missed_trimmed_records_of_an_unknown_shard_reports_cursor_expired() {
    Sim::new(
        "watchers (adversarial): cursor after a split; put x; split, trim, put z; resume",
        recorded_table,
    )
    .schedules(5)
    .setup(|t| async move {
        t.storage().enable_stream().await?;
        table().split_stream(1);
        t.put(["w"], &V { v: 0 }).await?;
        let mut watch = t.watch::<Any>(Vec::<String>::new());
        watch.start().await?;
        snapshot(&[], &[]);
        // The shard the watch took its position in closes; its child is empty.
        table().split_stream(1);
        let changes = watch.catch_up().await?;
        apply(changes);
        store_cursor(&watch);
        Ok(())
    })
    .op("put x", |t| async move { t.put(["x"], &V { v: 1 }).await })
    .finish(|t| async move {
        table().split_stream(1);
        t.put(["y"], &V { v: 2 }).await?;
        table().trim_stream();
        t.put(["z"], &V { v: 3 }).await?;
        let mut watch = open_watch(&t, &[], &[]).await?;
        let mut waited = false;
        for _ in 0..10 {
            match watch.catch_up().await {
                Ok(changes) if changes.is_empty() => {
                    if waited {
                        break;
                    }
                    waited = true;
                    tokio::time::sleep(MOVE_RECORD_WAIT).await;
                }
                Ok(changes) => {
                    waited = false;
                    apply(changes);
                }
                Err(e) if e.kind() == ErrorKind::CursorExpired => {
                    note_expired();
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
    .check(|end| follower_agrees(end, &[], &[]))
    .run();
}

/// A Go delete (lock-ignoring) of a move's destination while the move runs: the removal of a
/// row carrying `SC movedfrom` reads as a refused move's rollback. Later changes at the
/// source's path must still be handed.
#[test]
fn a_lock_ignoring_deletion_of_a_moves_copy_does_not_hold_back_the_source() {
    let mut plan = Plan::new("move a->b vs Go delete b", &[], &[(&["a"], 1)]);
    plan.splits = Vec::new();
    plan.max_faults = 0;
    plan.late = paths(&[(&["a"], 9), (&["b"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"])],
            vec![act(Act::GoDelete(p(&["b"])))],
        ],
    );
}

/// A move whose process crashes, recovered by `resume`, while a Go put overwrites its source
/// (a resumed copy whose source is no longer wholly held is refused and rolled back; the Go
/// put erased the source's hold and `SC movedto`, so no `Kept` record comes). Later puts at
/// the source, the destination and elsewhere must be handed.
#[test]
fn a_crashed_move_rolled_back_after_a_lock_ignoring_overwrite_of_its_source() {
    let mut plan = Plan::new("move a->b (crashes) vs Go put a", &[], &[(&["a"], 1)]);
    plan.splits = Vec::new();
    plan.faults = vec![SimFault::Crash, SimFault::CrashAfterApply];
    plan.late = paths(&[(&["a"], 9), (&["b"], 8), (&["c"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"])],
            vec![act(Act::GoPut(p(&["a"]), 7))],
        ],
    );
}

/// DynamoDB's time to live deletes an expired object while it moves (its held source, or its
/// copy before the move releases it): whatever it deleted, the watcher must end with the
/// table's objects and hand the later changes at both paths.
#[test]
fn time_to_live_deleting_a_moving_object() {
    let mut plan = Plan::new("move a->b vs time to live (a expired)", &[], &[]);
    plan.expiring = paths(&[(&["a"], 1)]);
    plan.splits = Vec::new();
    plan.max_faults = 0;
    plan.late = paths(&[(&["a"], 9), (&["b"], 8)]);
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"])],
            vec![Step::Expire, Step::Expire, Step::Expire],
        ],
    );
}

/// Names for a move whose copy's insert is read before its source's records: the destination
/// in the first of two open shards (read first), the source in the second.
fn dest_then_source() -> (String, String) {
    let d = names_in(0, 2, 1, &[]).remove(0);
    let s = names_in(1, 2, 1, std::slice::from_ref(&d)).remove(0);
    (s, d)
}

// ---------------------------------------------------------------------------------------
// Refused moves.
// ---------------------------------------------------------------------------------------

/// A live move of `a` (with a child) to `b`, refused at its second level by a Go put of
/// `b/x` (its listing row is not the move's): the copy of `a` at `b` is rolled back and the
/// sources released. The destination is read first; the watcher stops after every read and
/// resumes from its cursor, so a cursor may fall after the source's release and before the
/// copy's insert.
#[test]
fn a_refused_move_whose_release_is_read_before_its_copy_survives_a_restart() {
    let (s, d) = dest_then_source();
    let (s, d) = (s.as_str(), d.as_str());
    let mut plan = Plan::new(
        &format!("move {s}->{d} vs Go put {d}/x; watcher resumed 4x; late put {s}, {d}"),
        &[],
        &[(&[s], 1), (&[s, "x"], 2)],
    );
    plan.splits = Vec::new();
    plan.reads = 1;
    plan.restarts = 4;
    plan.max_faults = 0;
    plan.late = paths(&[(&[s], 9), (&[d], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![vec![mv(&[s], &[d])], vec![act(Act::GoPut(p(&[d, "x"]), 5))]],
    );
}

/// The same refusal, its rollback and release read in any order relative to later puts at
/// both paths, the stream splitting, with a fault anywhere.
#[test]
fn a_refused_moves_rollback_and_release_in_every_order_vs_later_writes_at_both_paths() {
    let mut plan = Plan::new(
        "move a->b vs Go put b/x vs put a, put b",
        &[],
        &[(&["a"], 1), (&["a", "x"], 2)],
    );
    plan.splits = vec![2, 1];
    plan.late = paths(&[(&["a"], 9), (&["b"], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"])],
            vec![act(Act::GoPut(p(&["b", "x"]), 5))],
            vec![put(&["a"], 6), put(&["b"], 7)],
        ],
    );
}

/// The watch takes its position while a refused move runs (before its copy, between its copy
/// and its rollback, between the rollback and the release, after), then is resumed from its
/// cursor.
#[test]
fn a_watch_positioned_in_each_phase_of_a_refused_move() {
    let (s, d) = dest_then_source();
    let (s, d) = (s.as_str(), d.as_str());
    let mut plan = Plan::new(
        &format!("start racing move {s}->{d} vs Go put {d}/x; resumed; late put {s}, {d}"),
        &[],
        &[(&[s], 1), (&[s, "x"], 2)],
    );
    plan.splits = Vec::new();
    plan.racing_start = true;
    plan.reads = 1;
    plan.restarts = 2;
    plan.max_faults = 0;
    plan.late = paths(&[(&[s], 9), (&[d], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![vec![mv(&[s], &[d])], vec![act(Act::GoPut(p(&[d, "x"]), 5))]],
    );
}

/// The watch takes its position while a move runs, and is resumed from its cursor several
/// times: a shard it read nothing of is read again from a minute before its start (the
/// move's copy, before the position), after the source's removal was resolved alone.
#[test]
fn a_watch_positioned_mid_move_and_resumed_rereads_the_copy_before_its_position() {
    let (s, d) = dest_then_source();
    let (s, d) = (s.as_str(), d.as_str());
    let mut plan = Plan::new(
        &format!("start racing move {s}->{d}; resumed 3x; late put {s}, {d}"),
        &[],
        &[(&[s], 1)],
    );
    plan.splits = Vec::new();
    plan.racing_start = true;
    plan.reads = 1;
    plan.restarts = 3;
    plan.max_faults = 0;
    plan.late = paths(&[(&[s], 9), (&[d], 8)]);
    plan.schedules = 150;
    run(plan, vec![vec![mv(&[s], &[d])]]);
}

// ---------------------------------------------------------------------------------------
// Moves of one path in a row, and a watcher that crashes.
// ---------------------------------------------------------------------------------------

/// The same move twice (same source and destination, two hold ids) and back and forth, while
/// the watcher crashes or fails at any request and resumes from its cursor.
#[test]
fn moves_back_and_forth_of_one_path_vs_a_crashing_watcher() {
    let mut plan = Plan::new(
        "move a->b, b->a, a->b vs put a; watcher resumed 3x, crashes",
        &[],
        &[(&["a"], 1)],
    );
    plan.splits = vec![2];
    plan.reads = 1;
    plan.restarts = 3;
    plan.faults = vec![
        SimFault::Crash,
        SimFault::Request(dynatree_testing::Fault::Fail),
        SimFault::Request(dynatree_testing::Fault::FailAfterApply),
    ];
    plan.max_faults = 2;
    plan.late = paths(&[(&["a"], 9), (&["b"], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"]), mv(&["b"], &["a"]), mv(&["a"], &["b"])],
            vec![put(&["a"], 5)],
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Records outside the protocol.
// ---------------------------------------------------------------------------------------

/// A Go delete of a move's copy (a removal still naming its source) while the watcher stops
/// after each read: a cursor may fall between the copy's removal and its source's removal.
#[test]
fn a_copy_removed_outside_the_protocol_then_a_restart_before_the_source_removal() {
    let (s, d) = dest_then_source();
    let (s, d) = (s.as_str(), d.as_str());
    let mut plan = Plan::new(
        &format!("move {s}->{d} vs Go delete {d}; resumed 4x; late put {s}, {d}"),
        &[],
        &[(&[s], 1)],
    );
    plan.splits = Vec::new();
    plan.reads = 1;
    plan.restarts = 4;
    plan.max_faults = 0;
    plan.late = paths(&[(&[s], 9), (&[d], 8)]);
    plan.schedules = 200;
    run(
        plan,
        vec![vec![mv(&[s], &[d])], vec![act(Act::GoDelete(p(&[d])))]],
    );
}

/// Time to live expires objects of a subtree while it moves (held sources, copies before
/// their release), the watcher resumed after every read.
#[test]
fn time_to_live_expiring_a_subtree_being_moved_vs_a_resumed_watcher() {
    let mut plan = Plan::new(
        "move a->b vs time to live (a, a/x expired); resumed 3x",
        &[],
        &[],
    );
    plan.expiring = paths(&[(&["a"], 1), (&["a", "x"], 2)]);
    plan.splits = Vec::new();
    plan.reads = 1;
    plan.restarts = 3;
    plan.max_faults = 0;
    plan.late = paths(&[(&["a"], 9), (&["b"], 8), (&["b", "x"], 7)]);
    plan.schedules = 200;
    run(
        plan,
        vec![
            vec![mv(&["a"], &["b"])],
            vec![Step::Expire, Step::Expire, Step::Expire],
        ],
    );
}
