//! turnwise: typed durable workflows.
//!
//! This crate holds the message-workflow protocol ([`Backend`]), the engine that enforces its
//! rules ([`Engine`]) and the durable stores it runs on ([`store`]). An instance has a durable
//! inbox of messages; each message is one *turn*, run by a worker under a lease, whose steps
//! are checkpointed so that a retried or resumed attempt replays them instead of running them
//! again.
//!
//! # Example
//!
//! A worker's view of one turn, on the embedded engine over an in-memory store:
//!
//! ```
//! use serde_json::json;
//! use turnwise::protocol::*;
//! use turnwise::{Backend, Engine};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), turnwise::Error> {
//! let engine = Engine::in_memory();
//! engine
//!     .create_instance(CreateInstanceRequest {
//!         id: "counter-1".into(),
//!         workflow_type: "counter".into(),
//!         version: "v1".into(),
//!         state: json!({"count": 0}),
//!         lease_ms: None,
//!         max_attempts: None,
//!         on_exhausted: None,
//!     })
//!     .await?;
//! engine
//!     .send_message(MessageRequest {
//!         workflow_id: "counter-1".into(),
//!         id: "request-1".into(),
//!         message: json!({"add": 2}),
//!         origin: None,
//!     })
//!     .await?;
//!
//! // A worker claims the turn, saves one step and completes it.
//! let task = engine
//!     .claim(ClaimRequest {
//!         worker: "w1".into(),
//!         workflows: vec![WorkflowRef::new("counter", "v1")],
//!         wait_ms: 0,
//!         include_execution_credential: None,
//!     })
//!     .await?
//!     .task
//!     .expect("the message is ready");
//! let lease = Lease { workflow_id: "counter-1".into(), turn: 1, token: task.token.clone() };
//! engine
//!     .checkpoint(CheckpointRequest {
//!         lease: lease.clone(),
//!         position: 0,
//!         key: "add".into(),
//!         kind: CheckpointKind::Step,
//!         output: json!(2),
//!         delay_ms: None,
//!     })
//!     .await?;
//! engine
//!     .complete(CompleteRequest {
//!         lease,
//!         state: json!({"count": 2}),
//!         result: json!(2),
//!         continuation: None,
//!         usage: None,
//!         results: None,
//!     })
//!     .await?;
//!
//! let instance = engine.get_instance("counter-1").await?;
//! assert_eq!(instance.state, json!({"count": 2}));
//! assert_eq!(instance.completed_turns, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Defining workflows
//!
//! [`macro@workflow`] turns an `async fn` into a [`Workflow`], [`macro@step`] makes reusable
//! steps and [`derive@Signal`] declares signals; they check keys, signatures, signals and
//! replay determinism at compile time (see `docs/macros.md`). Implementing [`Workflow`] by
//! hand works too.
//!
//! # Feature flags
//!
//! | feature  | default | what it adds |
//! |----------|---------|--------------|
//! | `sqlite` | yes     | [`store::SqliteStore`] and [`Engine::open`], the embedded default |
//! | `http`   | no      | `Http`: the [`Backend`] over HTTP, a client of a turnwise server |
//! | `macros` | yes     | `#[workflow]`, `#[step]` and `#[derive(Signal)]` |

#![doc(test(attr(deny(warnings))))]

// Generated code names `::turnwise::...`; this makes those paths work inside this crate too.
extern crate self as turnwise;

pub mod backend;
pub mod clock;
pub mod codec;
pub mod context;
pub mod engine;
pub mod error;
pub mod handle;
// The `Http` backend: its source is `client/` (the layer beside the stores), its public path
// `turnwise::http`, the one users, docs and tests name.
#[cfg(feature = "http")]
#[path = "client/mod.rs"]
pub mod http;
pub mod prelude;
pub mod protocol;
pub mod schema;
pub mod store;
pub mod testing;
pub mod validate;
pub mod worker;
pub mod workflow;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use backend::Backend;
pub use engine::{Engine, EngineConfig, Limits, RetentionPolicy};
pub use error::{Error, Result};
pub use handle::{Handle, WorkflowExt};
#[cfg(feature = "http")]
pub use http::{Http, HttpBuilder};
pub use worker::{RunningWorker, Worker};
pub use workflow::{
    Accepts, Done, Signal, TurnError, TurnResult, Workflow, WorkflowError, WorkflowOptions,
    WorkflowWait,
};

#[cfg(feature = "macros")]
pub use turnwise_macros::{step, workflow, Signal};
