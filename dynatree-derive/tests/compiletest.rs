//! The derive's compile-time errors (`tests/ui/fail`, one mistake per file, grouped by kind)
//! and accepted inputs (`tests/ui/pass`). Bless after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p dynatree-derive --test compiletest` and read the diff.
//!
//! The suite lives in `dynatree-derive`, not in `dynatree`, for build time: trybuild compiles
//! its cases in a project of its own (`target/tests/trybuild/<crate>`) that depends on every
//! dependency and dev-dependency of the crate under test. Here that is `dynatree` without the
//! `dynamodb` feature, serde and serde_json; from `dynatree` it was the whole AWS SDK again.
//! So no case may need the SDK (the `dynamodb` feature is off).

#[rustversion::attr(not(stable), ignore = "`.stderr` files are blessed on stable rustc")]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
