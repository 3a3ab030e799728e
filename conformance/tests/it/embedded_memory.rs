//! The conformance suite against the embedded engine over the in-memory store.

use turnwise_conformance::embedded::EmbeddedFixture;

turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
    EmbeddedFixture::memory(config)
});
