//! The explorer itself, on schedules whose alternatives change between runs as a real clock
//! makes them change (a lease renewal due in one run and not in the next): on paused time that
//! is a defect of the code under test and fails with "nondeterminism"; on a real clock the
//! search samples on (a step whose alternative is gone takes the last one left) and every
//! schedule it runs is still checked.

use std::sync::atomic::{AtomicUsize, Ordering};

use dynatree::Tree;
use dynatree_testing::FakeTable;
use dynatree_testing::sim::Sim;
use serde::Serialize;

#[derive(Serialize)]
struct V {
    v: u32,
}

/// Every other run, the first operation sends its two puts together (two requests parked at
/// once); in the others, one after the other. `runs` counts the runs of one scenario.
fn flickering(name: &str, runs: &'static AtomicUsize) -> Sim<FakeTable> {
    Sim::new(name, FakeTable::new)
        .schedules(40)
        .op("two puts", move |t: Tree| async move {
            let a = V { v: 1 };
            let b = V { v: 2 };
            if runs.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
                let (x, y) = futures::join!(t.put(["a"], &a), t.put(["b"], &b));
                x.and(y)
            } else {
                t.put(["a"], &a).await?;
                t.put(["b"], &b).await
            }
        })
        .model(|m| {
            m.put(["a"], &V { v: 1 })?;
            m.put(["b"], &V { v: 2 })
        })
        .op(
            "put c",
            |t: Tree| async move { t.put(["c"], &V { v: 3 }).await },
        )
        .model(|m| m.put(["c"], &V { v: 3 }))
}

#[test]
fn paused_time_reports_alternatives_that_change_on_rerun() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let failure = flickering("flickering on paused time", &RUNS)
        .explore()
        .expect_err("the search must notice that a rerun offered other alternatives");
    assert!(failure.message.contains("nondeterminism"), "{failure}");
}

#[test]
fn a_real_clock_samples_on_when_alternatives_change_on_rerun() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let report = flickering("flickering on a real clock", &RUNS)
        .real_time(true)
        .explore()
        .unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(report.schedules, 40);
    assert!(
        RUNS.load(Ordering::Relaxed) >= 40,
        "every schedule ran the operation"
    );
}
