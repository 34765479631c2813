//! A sampled set of interleaving schedules on Amazon's DynamoDB Local (real clock, real
//! requests, still serialized in the chosen order), with a short removal lease. One test, one
//! server: every scenario runs, then the test fails listing every failing schedule. If DynamoDB
//! Local cannot start, the test fails saying what is missing; it is never skipped.
//!
//! Schedules per scenario: `DYNATREE_SIM_LOCAL_SCHEDULES` (default 6).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dynatree::{DynamoDbTable, ErrorKind, Tree, ops::LinkPolicy};
use dynatree_testing::DynamoDbLocal;
use dynatree_testing::sim::{OpOutcome, Sim, SimFault, SimStorage};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct V {
    v: u32,
}

const LEASE: Duration = Duration::from_millis(300);

fn sim(local: &Arc<DynamoDbLocal>, name: &str) -> Sim<DynamoDbTable> {
    let local = Arc::clone(local);
    let n = std::env::var("DYNATREE_SIM_LOCAL_SCHEDULES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    Sim::new(name, move || local.fresh_table())
        .tree(|s: SimStorage<DynamoDbTable>| {
            Tree::builder(s)
                .removal_lease(LEASE)
                .build()
                .expect("valid tree settings")
        })
        .real_time(true)
        .recovery_wait(LEASE * 3)
        .preemptions(Some(1))
        .schedules(n)
        .seed(7)
}

#[test]
fn sampled_schedules_on_dynamodb_local() {
    // The SDK's futures are large in debug builds: give the scheduler's thread room.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(sampled)
        .expect("spawn")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
}

fn sampled() {
    let local = match DynamoDbLocal::start() {
        Ok(l) => Arc::new(l),
        Err(e) => panic!("DynamoDB Local is required for this test: {e}"),
    };
    let started = Instant::now();
    let scenarios: Vec<Sim<DynamoDbTable>> = vec![
        sim(&local, "local: put x/new/deep vs delete_subtree x")
            .setup(|t| async move { t.put(["x", "a"], &V { v: 1 }).await })
            .op("put", |t| async move {
                t.put(["x", "new", "deep"], &V { v: 2 }).await
            })
            .model(|m| m.put(["x", "new", "deep"], &V { v: 2 }))
            .op("delete_subtree", |t| async move {
                t.delete_subtree(["x"]).await
            })
            .model(|m| m.delete_subtree(["x"])),
        sim(&local, "local: move s->d vs put d/1")
            .setup(|t| async move { t.put(["s", "1"], &V { v: 1 }).await })
            .op(
                "move",
                |t| async move { t.move_subtree(["s"], ["d"]).await },
            )
            .model(|m| m.move_subtree(["s"], ["d"], LinkPolicy::Report))
            .op(
                "put",
                |t| async move { t.put(["d", "1"], &V { v: 9 }).await },
            )
            .model(|m| m.put(["d", "1"], &V { v: 9 })),
        sim(&local, "local: move s->d (faults) vs resume")
            .setup(|t| async move { t.put(["s", "1", "2"], &V { v: 1 }).await })
            .op(
                "move",
                |t| async move { t.move_subtree(["s"], ["d"]).await },
            )
            .model(|m| m.move_subtree(["s"], ["d"], LinkPolicy::Report))
            .op("resume", |t| async move { t.resume().await })
            .model(|_| Ok(()))
            .faults(1, SimFault::all()),
        sim(&local, "local: delete x/a (crash) vs put x/b")
            .setup(|t| async move { t.put(["x", "a"], &V { v: 1 }).await })
            .op("delete", |t| async move { t.delete(["x", "a"]).await })
            .model(|m| m.delete(["x", "a"]))
            .op(
                "put",
                |t| async move { t.put(["x", "b"], &V { v: 2 }).await },
            )
            .model(|m| m.put(["x", "b"], &V { v: 2 }))
            .faults(1, [SimFault::Crash, SimFault::CrashAfterApply])
            .check(|end| match &end.outcomes[1] {
                OpOutcome::Err(e) if e.kind() == ErrorKind::Conflict => {
                    Err(format!("the put gave up on a dead process's mark: {e}"))
                }
                _ => Ok(()),
            }),
    ];
    let mut failures = Vec::new();
    let mut total = 0;
    for s in &scenarios {
        match s.explore() {
            Ok(r) => {
                total += r.schedules;
                eprintln!("{r}");
            }
            Err(f) => {
                total += f.schedules;
                failures.push(f.to_string());
            }
        }
    }
    eprintln!(
        "{total} schedules on DynamoDB Local in {:.1?}",
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
