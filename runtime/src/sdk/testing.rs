//! A test environment: an in-memory engine with a virtual clock and a worker, so a test runs
//! workflows over messages and signals, skips through sleeps and timeouts instantly, and
//! asserts state, replies, saved steps and effect ids, with no server and no real waiting.
//!
//! ```
//! # use turnwise::prelude::*;
//! # use serde::{Deserialize, Serialize};
//! # use std::time::Duration;
//! # #[derive(Serialize, Deserialize, Default)] struct Count { count: u64 }
//! # struct Counter;
//! # impl Workflow for Counter {
//! #     type State = Count; type Message = u64; type Reply = u64; type Codec = turnwise::codec::JsonCodec;
//! #     const NAME: &'static str = "counter"; const VERSION: &'static str = "v1";
//! #     async fn run(&self, ctx: &mut Turn<Self>, state: Count, add: u64) -> TurnResult<Self> {
//! #         let add = ctx.step("add", |_s| async move { Ok(add) }).await?;
//! #         ctx.sleep("cool-down", Duration::from_secs(3600)).await?;
//! #         Ok(Done::new(Count { count: state.count + add }).reply(state.count + add))
//! #     }
//! # }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), turnwise::Error> {
//! use turnwise::testing::TestEnv;
//!
//! let env = TestEnv::new().register(Counter);
//! let counter = env.start(&Counter, "counter-1").await?;
//! counter.send(2, "m1").await?;
//! env.run_until_idle().await?;                 // runs the step, then sleeps an hour
//! assert_eq!(counter.state().await?.count, 0);
//! env.advance(Duration::from_secs(3600)).await?; // an hour passes instantly
//! assert_eq!(counter.state().await?.count, 2);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::engine::{Engine, EngineConfig};
use crate::protocol::error::Result;
use crate::sdk::handle::{Handle, WorkflowExt};
use crate::sdk::worker::Worker;
use crate::sdk::workflow::Workflow;
use crate::store::MemoryStore;

pub use crate::skip::{in_ci, skip_test};
#[cfg(feature = "postgres")]
pub use crate::store::postgres::TestPostgres;

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

    /// Move the virtual clock forward, then run what became ready.
    pub async fn advance(&self, by: Duration) -> Result<usize> {
        self.clock.advance(by);
        self.run_until_idle().await
    }
}

/// Compare `actual` (a workflow's JSON Schema, say) with the snapshot committed at `path`,
/// so that a change to what a workflow accepts on the wire is never made unreviewed. With
/// `TURNWISE_BLESS` set in the environment the snapshot is first rewritten from `actual`.
/// A trailing newline is added to `actual` if it has none.
///
/// ```no_run
/// // In `tests/schema.rs`; bless with `TURNWISE_BLESS=1 cargo test --test schema`.
/// # let my_workflow_schema_json = String::from("{}");
/// let json = my_workflow_schema_json; // e.g. `my_workflow.schema().to_json()`
/// turnwise::testing::assert_snapshot(&json, concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json"));
/// ```
///
/// # Panics
///
/// When `actual` differs from the snapshot or the snapshot is missing (the message names the
/// file and how to bless it), and when blessing cannot write the file. It is an assertion.
#[track_caller]
pub fn assert_snapshot(actual: &str, path: impl AsRef<std::path::Path>) {
    let path = path.as_ref();
    let mut actual = actual.to_owned();
    if !actual.ends_with('\n') {
        actual.push('\n');
    }
    if std::env::var_os("TURNWISE_BLESS").is_some() {
        if let Err(e) = std::fs::write(path, &actual) {
            panic!("TURNWISE_BLESS: cannot write {}: {e}", path.display());
        }
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        actual == want,
        "{} does not match: review the change, then rerun with TURNWISE_BLESS=1 to rewrite it\n\
         --- snapshot\n{want}\n--- actual\n{actual}",
        path.display()
    );
}
