//! What workflow authors use: workflow definitions, the turn and step contexts, typed handles,
//! the worker, codecs, the test environment and JSON Schemas of workflows. (`private.rs`, the
//! support of generated code, is declared at the crate root as `turnwise::__private`, the path
//! the macros name.)
//!
//! This layer builds on the protocol and on the engine's [`WorkerBackend`](crate::WorkerBackend)
//! (it talks to any backend that implements it: the engine, the `Http` backend, a wrapper of
//! yours) and, for [`testing`] only, on the engine itself and the in-memory store. Nothing
//! below it imports it. Its modules are re-exported at the crate root (`turnwise::workflow`,
//! `turnwise::context`, …).

pub mod codec;
pub mod context;
pub mod handle;
mod outcome;
pub mod replay;
pub mod schema;
#[cfg(feature = "engine")]
mod test_env;
pub mod testing;
pub mod worker;
pub mod workflow;

/// The `Http` backend keeps every default: each call is its route, as an LBB server expects.
#[cfg(feature = "http")]
impl crate::worker_backend::WorkerBackend for turnwise_http::Http {}
