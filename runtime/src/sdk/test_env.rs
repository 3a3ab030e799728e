//! [`TestEnv`]: an in-memory engine, a manual clock and a worker (feature `engine`).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::engine::{Engine, EngineConfig};
use crate::protocol::error::Result;
use crate::sdk::handle::{Handle, WorkflowExt};
use crate::sdk::worker::Worker;
use crate::sdk::workflow::Workflow;
use crate::store::MemoryStore;

/// An in-memory engine, a manual clock and a worker.
#[derive(Clone, Debug)]
pub struct TestEnv {
    engine: Engine,
    clock: ManualClock,
    worker: Worker,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    /// A fresh environment with default engine settings.
    pub fn new() -> Self {
        Self::with_config(EngineConfig::default())
    }

    /// A fresh environment with engine settings of your own.
    pub fn with_config(config: EngineConfig) -> Self {
        let clock = ManualClock::default();
        let engine = Engine::new(MemoryStore::new(), clock.clone(), config);
        let worker = Worker::new(engine.clone())
            .id("test-worker")
            .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
            .progress_every(Duration::ZERO);
        Self {
            engine,
            clock,
            worker,
        }
    }

    /// Let the environment's worker run this workflow.
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.worker = self.worker.register(workflow);
        self
    }

    /// The engine (a [`Backend`](crate::Backend)).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The virtual clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The environment's worker.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// Start an instance (see [`WorkflowExt::start`]), after registering the worker's
    /// workflow schemas with the engine, which then checks the messages and signals the
    /// handle sends against them.
    pub async fn start<W: Workflow>(&self, workflow: &W, id: &str) -> Result<Handle<W>>
    where
        W::State: Default,
    {
        self.worker.register_schemas().await?;
        workflow.start(&self.engine, id).await
    }

    /// Run turns until none is ready at the current virtual time; returns how many attempts ran.
    pub async fn run_until_idle(&self) -> Result<usize> {
        self.worker.run_until_idle().await
    }

    /// Replay a saved turn ([`export_turn`](crate::replay::export_turn), `turnwise turns
    /// export`) against `workflow`'s code: whether it still makes the saved durable calls, or
    /// the report of where it diverges ([`crate::replay::replay`]). Nothing of this
    /// environment is touched.
    pub async fn replay<W: Workflow>(
        &self,
        workflow: W,
        saved: &crate::replay::SavedTurn,
    ) -> Result<crate::replay::Replayed> {
        crate::replay::replay(workflow, saved).await
    }

    /// Move the virtual clock forward, then run what became ready.
    pub async fn advance(&self, by: Duration) -> Result<usize> {
        self.clock.advance(by);
        self.run_until_idle().await
    }
}
