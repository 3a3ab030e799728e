//! The workflow's JSON Schemas, compared with the committed `schema.json`.
//! `TURNWISE_BLESS=1 cargo test -p example-review-draft --test schema` rewrites it after a reviewed change.

use example_review_draft::review_draft;

#[test]
fn the_schema_matches_its_snapshot() {
    let workflow = review_draft(example_review_draft::Review::default());
    let json = workflow.schema().to_json() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema.json");
    if std::env::var_os("TURNWISE_BLESS").is_some() {
        std::fs::write(&path, &json).expect("schema.json is writable");
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        json, want,
        "the schema changed: review it, then rerun with TURNWISE_BLESS=1"
    );
}
