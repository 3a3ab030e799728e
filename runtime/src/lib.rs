//! turnwise: typed durable workflows.
//!
//! A workflow instance has a durable inbox of messages; each message is one *turn*, run by a
//! worker under a lease, whose steps are checkpointed so that a retried or resumed attempt
//! replays them instead of running them again. [`macro@workflow`] turns an `async fn` into a
//! [`Workflow`]; a [`Worker`] runs its turns and a [`Handle`] starts instances, sends messages
//! and reads results, over a [`Backend`]: the embedded [`Engine`] (in-process, over SQLite or
//! memory) or `Http` (a turnwise server, feature `http`).
//!
//! # Example
//!
//! A counter on the embedded engine over an in-memory store:
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use turnwise::prelude::*;
//!
//! /// The saved state; a new instance starts from `Count::default()`.
//! #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
//! pub struct Count {
//!     /// The running total.
//!     pub count: u64,
//! }
//!
//! /// A step: its output is saved, and a retry of the turn replays it.
//! #[step]
//! async fn add(amount: u64) -> Result<u64, TurnError> {
//!     Ok(amount)
//! }
//!
//! /// Adds each message to the count and replies with the new total.
//! #[workflow(name = "counter", version = "v1")]
//! pub async fn counter(ctx: &mut Turn, state: Count, amount: u64) -> Result<Done<Count, u64>, TurnError> {
//!     let added = add(ctx, amount).await?;
//!     let total = state.count + added;
//!     Ok(Done::new(Count { count: total }).reply(total))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), turnwise::Error> {
//! let engine = Engine::in_memory(); // or Engine::open("app.db").await? for a SQLite file
//! let handle = counter.start(&engine, "counter-1").await?;
//! let first = handle.send(2, "request-1").await?.number;
//! let second = handle.send(3, "request-2").await?.number;
//!
//! let worker = Worker::new(engine.clone()).register(counter);
//! assert_eq!(worker.run_until_idle().await?, 2); // two turns, one attempt each
//!
//! assert_eq!(handle.reply(first).await?, Some(2));
//! assert_eq!(handle.reply(second).await?, Some(5));
//! assert_eq!(handle.state().await?, Count { count: 5 });
//! let turn = handle.turn(second).await?;
//! assert_eq!(turn.steps[0].key, "add"); // the saved step
//! # Ok(())
//! # }
//! ```
//!
//! `docs/guide.md` in the repository walks through everything else: signals, sleeps,
//! continuations, errors and retries, effect ids, workers in production and testing with
//! [`testing::TestEnv`]. What the macros generate and check at compile time is in
//! `docs/macros.md`; [`Workflow`] can also be implemented by hand.
//!
//! # The protocol underneath
//!
//! Handles and workers speak the message-workflow protocol through the [`Backend`] trait, whose
//! calls and types ([`protocol`]) can be used directly. One turn, as a worker sees it:
//!
//! ```
//! use serde_json::json;
//! use turnwise::protocol::*;
//! use turnwise::{Backend, Engine};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), turnwise::Error> {
//! let engine = Engine::in_memory();
//! let create = CreateInstanceRequest {
//!     id: "counter-1".into(),
//!     workflow_type: "counter".into(),
//!     version: "v1".into(),
//!     state: json!({"count": 0}),
//!     lease_ms: None,
//!     max_attempts: None,
//!     on_exhausted: None,
//! };
//! engine.create_instance(create).await?;
//! let message = MessageRequest {
//!     workflow_id: "counter-1".into(),
//!     id: "request-1".into(),
//!     message: json!({"add": 2}),
//!     origin: None,
//! };
//! engine.send_message(message).await?;
//!
//! let claim = ClaimRequest {
//!     worker: "w1".into(),
//!     workflows: vec![WorkflowRef::new("counter", "v1")],
//!     wait_ms: 0,
//!     include_execution_credential: None,
//! };
//! let task = engine.claim(claim).await?.task.expect("the message is ready");
//! let lease = Lease { workflow_id: "counter-1".into(), turn: 1, token: task.token.clone() };
//! let done = CompleteRequest {
//!     lease,
//!     state: json!({"count": 2}),
//!     result: json!(2),
//!     continuation: None,
//!     usage: None,
//!     results: None,
//! };
//! engine.complete(done).await?;
//! assert_eq!(engine.get_instance("counter-1").await?.state, json!({"count": 2}));
//! # Ok(())
//! # }
//! ```
//!
//! `docs/protocol.md` states the protocol's rules; `examples/protocol-demo` runs every call.
//!
//! # Feature flags
//!
//! | feature  | default | what it adds |
//! |----------|---------|--------------|
//! | `engine` | yes     | the embedded [`Engine`], [`store::MemoryStore`], schedules and [`testing::TestEnv`]; `sqlite` and `postgres` turn it on. A worker or client that only talks HTTP leaves it out (`default-features = false, features = ["http", "macros"]`) |
//! | `sqlite` | yes     | [`store::SqliteStore`] and [`Engine::open`], the embedded default (the `turnwise-sqlite` crate) |
//! | `bundled-sqlite` | yes | SQLite compiled into the crate; without it (keeping `sqlite`) the system's SQLite library is linked |
//! | `http`   | no      | `Http`: the [`Backend`] over HTTP, a client of a turnwise server (the `turnwise-http` crate, at `turnwise::http`) |
//! | `macros` | yes     | `#[workflow]`, `#[step]` and `#[derive(Signal)]` |
//! | `exact-numbers` | no | JSON numbers kept exactly as written (serde_json's `arbitrary_precision`, which then applies to the whole build; see "Numbers" in `docs/protocol.md`) |
//! | `schema-validation` | yes | messages and signals admitted by the embedded engine checked against their workflow's registered JSON Schemas (the `jsonschema` crate) |
//! | `postgres` | no | `store::PostgresStore`, `Engine::connect("postgres://…")`, `Engine::postgres` and transactional steps (`Turn::transact`): several processes on one database (the `turnwise-postgres` crate) |
//! | `test-util` | no | switches for turnwise's own crash tests (`Engine::hold_child_deliveries`); not for applications |
//!
//! # Crates
//!
//! This crate is the facade. The contract (protocol types, [`Backend`], [`Error`], validation,
//! the `Store` contract, [`clock`]) is `turnwise-core`; the stores are `turnwise-sqlite` and
//! `turnwise-postgres`, the `Http` backend `turnwise-http`, each depending on `turnwise-core`
//! only. Every item is re-exported here at the path users import (`turnwise::protocol`,
//! `turnwise::store::SqliteStore`, `turnwise::http::Http`, …); `docs/architecture.md` draws the
//! graph.

// One job per function: clippy.toml sets the limit at 100 lines; the few longer functions
// say why where they are.
#![warn(clippy::too_many_lines)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Generated code names `::turnwise::...`; this makes those paths work inside this crate too.
extern crate self as turnwise;

#[cfg(feature = "engine")]
#[cfg_attr(docsrs, doc(cfg(feature = "engine")))]
pub mod engine;
pub mod prelude;
mod sdk;
pub mod store;
mod worker_backend;

// The contract, at the paths users know: `turnwise-core`'s modules.
pub use turnwise_core::protocol::{backend, error, validate};
pub use turnwise_core::{clock, manifest, metrics, protocol, trace};
/// The `Http` backend: the `turnwise-http` crate, a client of a turnwise (or Little Big Brain)
/// server.
#[cfg(feature = "http")]
pub use turnwise_http as http;
// The SDK's modules, at the paths users know.
pub use sdk::{codec, context, handle, replay, schema, testing, worker, workflow};

// Support for generated code; it lives with the SDK, at the path the macros name.
#[doc(hidden)]
#[path = "sdk/private.rs"]
pub mod __private;

pub use backend::Backend;
#[cfg(feature = "engine")]
pub use engine::{Engine, EngineConfig, Limits, RetentionPolicy};
pub use error::{Error, Result};
pub use handle::{CallError, Handle, Pending, WorkflowExt};
#[cfg(feature = "http")]
pub use http::{Http, HttpBuilder};
pub use worker::{RunningWorker, Worker};
pub use worker_backend::WorkerBackend;
pub use workflow::{
    AcceptedBy, Accepts, Done, OnMismatch, Signal, StepOutput, TurnError, TurnResult, Workflow,
    WorkflowError, WorkflowOptions, WorkflowWait,
};

#[cfg(feature = "macros")]
pub use turnwise_macros::{step, workflow, Signal};
