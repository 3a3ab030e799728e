//! The conformance suite over HTTP to a turnwise server on the PostgreSQL store, each case in a
//! schema of its own (skipped with a printed line when there is no database, except in CI).

use turnwise::testing::TestPostgres;

use crate::common::HttpFixture;

turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
    let db = TestPostgres::start("conformance_http").await?;
    let store = db.store().await;
    Some(HttpFixture::new(store, config).await.keep_alive(db))
});
