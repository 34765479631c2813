//! Tests against DynamoDB Local, one module per subject, all in one test binary (each binary
//! links the AWS SDK statically): the integrity checker, the simulator on a real server, the
//! polling stream consumer, the write limits both backends refuse, and the differential test of
//! `FakeTable` against Local. Each starts the server it needs; one that cannot start fails the
//! test with its reason. Run one subject: `cargo test -p dynatree-testing --test local
//! differential::`. (The stress test, which runs this crate's test binary as worker processes,
//! stays a binary of its own.)

#[path = "../../../dynatree/tests/api/common/mod.rs"]
mod common;

mod check_local;
mod differential;
mod sim_local;
mod stream_local;
mod write_limits;
