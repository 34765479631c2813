//! The real `dynatree` binary against DynamoDB Local, one module per subject, all in one test
//! binary: one server for the binary (started on first use; a server that cannot start fails
//! the tests with its reason), one table per test (the harness is `common`). Run one subject:
//! `cargo test -p dynatree-cli --test cli_tests safety::`.

mod common;

mod commands;
#[cfg(unix)]
mod interrupt;
mod safety;
mod workflows;
