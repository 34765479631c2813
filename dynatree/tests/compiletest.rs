//! The derive's compile-time errors (`tests/ui/fail`, one mistake per file, grouped by kind)
//! and accepted inputs (`tests/ui/pass`). Bless after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p dynatree --test compiletest` and read the diff.

#[rustversion::attr(not(stable), ignore = "`.stderr` files are blessed on stable rustc")]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
