//! turnwise's contract: what every other turnwise crate builds on.
//!
//! - [`protocol`]: the message-workflow protocol's wire types, the [`Backend`] trait (one
//!   method per route of the route table), the typed [`Error`], the input rules
//!   ([`protocol::validate`]) and the check of a value against a registered JSON Schema;
//! - [`store`]: the [`Store`](store::Store) contract, its records and the checks every store
//!   makes the same way ([`store::support`]);
//! - [`clock`], [`trace`] and [`metrics`]: time, trace context and what is recorded;
//! - [`testing`]: how a test that cannot run here says so.
//!
//! Applications depend on the `turnwise` crate, which re-exports all of this at the same
//! paths (`turnwise::protocol`, `turnwise::store`, …) beside the engine and the SDK. The
//! drivers (`turnwise-sqlite`, `turnwise-postgres`) and the HTTP client (`turnwise-http`)
//! depend on this crate only; it depends on no driver.

#![warn(clippy::too_many_lines)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod clock;
pub mod metrics;
pub mod protocol;
pub mod store;
pub mod testing;
pub mod trace;

/// Replay manifests and the compatibility check between versions (the `turnwise-manifest`
/// crate).
pub use turnwise_manifest as manifest;
/// The protocol's rules (identifier syntax, limits, duration bounds, names and routes).
pub use turnwise_rules as rules;

pub use protocol::{backend, error, validate};

pub use backend::Backend;
pub use error::{Error, Result};
