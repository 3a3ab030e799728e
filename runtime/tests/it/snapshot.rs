//! `turnwise::testing::assert_snapshot`: passes on a match, fails on a change or a missing file.

use turnwise::testing::assert_snapshot;

#[test]
fn a_snapshot_passes_when_equal_and_fails_when_changed_or_missing() {
    if std::env::var_os("TURNWISE_BLESS").is_some() {
        println!("skipped: TURNWISE_BLESS is set, which rewrites snapshots instead of comparing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("schema.json");
    std::fs::write(&path, "{\"type\":\"object\"}\n").unwrap();
    // Equal, the trailing newline added.
    assert_snapshot("{\"type\":\"object\"}", &path);

    let changed = std::panic::catch_unwind(|| assert_snapshot("{\"type\":\"array\"}", &path));
    let message = *changed.unwrap_err().downcast::<String>().unwrap();
    assert!(message.contains("schema.json does not match"), "{message}");
    assert!(message.contains("TURNWISE_BLESS=1"), "{message}");

    let missing = dir.path().join("missing.json");
    assert!(std::panic::catch_unwind(|| assert_snapshot("{}", &missing)).is_err());
}
