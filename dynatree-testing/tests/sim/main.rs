//! Interleaving scenarios explored by `dynatree_testing::sim` on the fake table, one module per
//! subject, all in one test binary (each binary links the AWS SDK statically, so one binary
//! instead of twenty-odd saves CI time and disk).
//!
//! Run one subject: `cargo test -p dynatree-testing --test sim fences::` (a module path is a
//! test-name filter). Replay one schedule: `DYNATREE_SIM_REPLAY='<replay>' cargo test -p
//! dynatree-testing --test sim <module>::<test name> -- --exact --nocapture`. Budget:
//! `DYNATREE_SIM_SCHEDULES` schedules per scenario (overrides each module's default).
//!
//! Shared vocabulary:
//! - [`acts`]: the operations as data (`Act`), their models, lock-ignoring writes, scenario
//!   builders, fault profiles and checks;
//! - [`steps`]: operations written as a sequence of steps (`Step`) with a log of flags the
//!   operations of one schedule share, to order them;
//! - [`denorm_chain`]: the three-level chain of denormalized copies;
//! - [`pair_reads`]: a reader that looks at two paths in turn during a move.

mod acts;
#[allow(dead_code)]
mod denorm_chain;
#[allow(dead_code)]
mod pair_reads;
mod steps;

mod batches;
mod bounds;
mod call_budget;
mod check;
mod conflicts;
mod denorm;
mod explorer;
mod fences;
mod history;
mod lanes;
mod lanes_flow;
mod link_index;
mod operations;
mod overwrite;
mod parallel_phases;
mod protocols;
mod readers;
mod repair;
mod reparent_takeovers;
mod scopes;
mod sharded;
mod sharded_write_paths;
mod typed_changes;
mod watchers;
mod watchers_adversarial;
mod write_api;
mod write_api_adversarial;
