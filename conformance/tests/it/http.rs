//! The conformance suite over HTTP: each case drives the `Http` backend, which talks to a
//! turnwise server started in-process on loopback over an engine with a manual clock.

use crate::common;

use common::HttpFixture;

turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
    HttpFixture::memory(config).await
});
