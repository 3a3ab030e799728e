//! Tests that cannot run here (no PostgreSQL, no `chromedriver`, no `python3`): one rule for
//! when that fails the run and one way of saying it, so that a skip is never mistaken for a
//! pass. Re-exported as [`turnwise::testing::in_ci`](crate::testing::in_ci) and
//! [`turnwise::testing::skip_test`](crate::testing::skip_test).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether this process runs under CI: the environment variable `CI` is set to anything but
/// empty, `0` or `false` (any case). There a test that needs a service fails when the service is
/// missing, instead of skipping: a CI run must not pass what it did not run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        let v = v.trim();
        !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
    })
}

/// Say that the running test did not run, because of `reason` (what is missing, and how to
/// provide it), then return so that the test can return early.
///
/// The test passes as far as the test harness counts, so this makes the skip visible: one line,
/// numbered within the process, written straight to the process's standard error (past the
/// harness's output capture, which would otherwise hide it), naming the test. The highest
/// number a test binary prints is how many of its tests did not run:
///
/// ```text
/// turnwise: did not run #3: store_contract::postgres::claims (no PostgreSQL at postgres://postgres@127.0.0.1:5432/test: ...; set TURNWISE_TEST_POSTGRES to run it)
/// ```
///
/// `test` names the test when the harness did not (a test on the main thread); otherwise the
/// harness's name for the running test is used.
///
/// # Panics
///
/// Under CI ([`in_ci`]), with the same words: there a missing service is a failure.
pub fn skip_test(test: &str, reason: &str) {
    let thread = std::thread::current();
    let name = match thread.name() {
        Some(name) if name != "main" => name,
        _ => test,
    };
    assert!(
        !in_ci(),
        "{name} cannot run: {reason} (CI is set, where every test must run)"
    );
    static SKIPPED: AtomicUsize = AtomicUsize::new(0);
    let n = SKIPPED.fetch_add(1, Ordering::Relaxed) + 1;
    let line = format!("turnwise: did not run #{n}: {name} ({reason})\n");
    // Nothing to do if standard error is gone.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
