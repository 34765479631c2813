//! The repository README, compiled as this crate's documentation so that its Rust code blocks
//! run as doctests (`cargo test -p examples --doc`). The `dynatree` crate's own front page is
//! `dynatree/README.md`; this README is the project's.
#![doc = include_str!("../README.md")]
