//! The embedded fixture: an [`Engine`] over any [`Store`], timed by a [`ManualClock`].

use std::any::Any;
use std::time::Duration;

use turnwise::clock::ManualClock;
use turnwise::store::{MemoryStore, Store};
use turnwise::{Engine, EngineConfig};

use crate::Fixture;

/// An in-process [`Engine`] over one store with a [`ManualClock`], for the conformance suite.
///
/// ```no_run
/// turnwise_conformance::conformance_tests!(|config: turnwise::EngineConfig| async move {
///     turnwise_conformance::embedded::EmbeddedFixture::memory(config)
/// });
/// ```
pub struct EmbeddedFixture {
    engine: Engine,
    clock: ManualClock,
    /// Whatever must outlive the engine (a temporary directory holding a database file).
    _guard: Option<Box<dyn Any + Send + Sync>>,
}

impl EmbeddedFixture {
    /// An engine over a fresh [`MemoryStore`].
    pub fn memory(config: EngineConfig) -> Self {
        Self::new(MemoryStore::new(), config)
    }

    /// An engine over `store`, with a [`ManualClock`] at its default start.
    pub fn new(store: impl Store, config: EngineConfig) -> Self {
        let clock = ManualClock::default();
        let engine = Engine::new(store, clock.clone(), config);
        Self {
            engine,
            clock,
            _guard: None,
        }
    }

    /// Keep `guard` alive as long as the fixture (for example the `TempDir` of a database).
    pub fn keep_alive(mut self, guard: impl Any + Send + Sync) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The manual clock the engine runs on.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl std::fmt::Debug for EmbeddedFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedFixture")
            .field("engine", &self.engine)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Fixture for EmbeddedFixture {
    type Backend = Engine;

    fn backend(&self) -> Engine {
        self.engine.clone()
    }

    fn backend_in(&self, namespace: &str) -> Engine {
        self.engine.namespace(namespace)
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn waiting_claims(&self) -> usize {
        self.engine.waiting_claims()
    }
}
