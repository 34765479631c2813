//! Implementation detail of the `dynatree` crate: the `#[derive(Hierarchical)]` macro.
//!
//! Depend on `dynatree` (feature `derive`, on by default) instead of this crate. Its API is
//! semver-exempt and pinned to the exact version of `dynatree` that uses it. The derive itself
//! arrives with issue 3; this crate already carries the wiring (pinned version, feature flag).
