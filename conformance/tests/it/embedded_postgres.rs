//! The conformance suite against the embedded engine over the PostgreSQL store, each case in a
//! schema of its own (`TURNWISE_TEST_POSTGRES`; skipped with a printed line when there is no
//! database, except in CI).

use turnwise::testing::TestPostgres;
use turnwise_conformance::embedded::EmbeddedFixture;

turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
    let db = TestPostgres::start("conformance_embedded").await?;
    let store = db.store().await;
    Some(EmbeddedFixture::new(store, config).keep_alive(db))
});
