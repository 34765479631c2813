//! Tests on the in-memory fake table (`FakeTable`, metered and faulty), without a server and
//! without the interleaving simulator, one module per subject, all in one test binary (each
//! binary links the AWS SDK statically). Run one subject: `cargo test -p dynatree-testing
//! --test fake cost::`.

#[path = "../fixtures/mod.rs"]
mod fixtures;

mod ambiguous_outcomes;
mod check_buckets;
mod cost;
mod denorm_model;
mod faults;
mod fenced_puts;
mod link_index;
mod link_rewrites;
mod segments;
mod service_model;
mod sharded;
mod stale_reads;
mod stream;
mod throttled_calls;
