//! The conformance suite against the embedded engine over the SQLite store, one fresh database
//! file (in its own temporary directory) per case.

use turnwise::store::SqliteStore;
use turnwise_conformance::embedded::EmbeddedFixture;

turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let store = SqliteStore::open(&dir.path().join("conformance.db"))
        .await
        .expect("open the SQLite store");
    EmbeddedFixture::new(store, config).keep_alive(dir)
});
