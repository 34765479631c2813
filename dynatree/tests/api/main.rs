//! The public API of `dynatree` on the in-memory fake, one module per subject, all in one test
//! binary (each binary links the AWS SDK statically, so one binary builds far faster than one
//! per subject). Run one subject: `cargo test -p dynatree --test api write_api::`. The
//! compile-time checks (`async_send_sync.rs`, `test_gen.rs`) stay binaries of their own: they
//! set lints for their whole crate.

mod common;

mod check_repair;
mod copy_links;
mod cursors;
mod denormalized;
mod denormalized_events;
mod descendants_pages;
mod dynamodb_errors;
mod entities;
mod retry_budget;
mod scope;
mod sharded;
mod table_checks;
mod tracing_spans;
mod transfer;
mod typed_changes;
mod watch;
mod write_api;
