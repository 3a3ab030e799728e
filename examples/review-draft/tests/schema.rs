//! The workflow's JSON Schemas, compared with the committed `schema.json`.
//! `TURNWISE_BLESS=1 cargo test -p example-review-draft --test schema` rewrites it after a reviewed change.

use example_review_draft::review_draft;

#[test]
fn the_schema_matches_its_snapshot() {
    let workflow = review_draft(example_review_draft::Review::default());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
    turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
}
