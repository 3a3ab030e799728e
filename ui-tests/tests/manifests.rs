//! The committed replay manifests the frozen cases of `tests/ui` build against are the ones the
//! code generates: `files::check` fails when they are stale (rewrite them with
//! `TURNWISE_MANIFESTS=write cargo test -p turnwise-ui-tests --test manifests`).

#[allow(dead_code)]
mod frozen {
    include!("frozen/checkout.rs");
}

#[test]
fn committed_manifests_are_current() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/turnwise/manifests");
    turnwise::manifest::files::check(dir, [frozen::checkout.manifest()]).unwrap();
}
