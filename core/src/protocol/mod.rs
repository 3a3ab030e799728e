//! The contract: the protocol's wire types, the [`Backend`](backend::Backend) trait, the typed
//! error, the input rules and the check of a value against a registered schema.
//!
//! This layer imports nothing else of the crate; the stores, the engine, the HTTP client and
//! the SDK all build on it. Its wire types are re-exported here, so `turnwise::protocol::*`
//! names every request and response.

pub mod backend;
pub mod error;
pub mod json;
mod schedule;
pub mod schema_check;
mod types;
pub mod validate;
mod versions;

pub use schedule::*;
pub use types::*;
pub use versions::*;
