//! The macros' compile-time checks: one case per rule under `tests/ui/<macro>/{fail,pass}/`.
//!
//! Record the `.stderr` files with `TRYBUILD=overwrite cargo test -p turnwise-ui-tests --test ui`
//! and review the diff; one case: `cargo test -p turnwise-ui-tests --test ui -- ui trybuild=not-async.rs`.

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "the .stderr files are recorded with rustc 1.95"
)]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/fail/*.rs");
    t.pass("tests/ui/*/pass/*.rs");
}
