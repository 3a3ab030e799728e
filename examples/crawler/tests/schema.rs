//! The workflow's JSON Schemas, compared with the committed `schema.json`.
//! `TURNWISE_BLESS=1 cargo test -p example-crawler --test schema` rewrites it after a reviewed change.

use example_crawler::crawler;

#[test]
fn the_schema_matches_its_snapshot() {
    let workflow = crawler(example_crawler::Site::new());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
    turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
}
