//! The rules of the turnwise protocol that more than one crate needs, written down once.
//!
//! The attribute macros check literals against these rules at compile time; the runtime's
//! validation and engine check requests against them; the server registers the route table;
//! the HTTP client builds request paths from it; the conformance suite tests backends against
//! the same numbers and names. Nothing here depends on another crate, so the proc-macro crate
//! compiles it too.
//!
//! - [`ident`]: the identifier syntax of ids, keys, names, types and versions;
//! - [`limits`]: sizes and counts (steps per turn, signals per turn, bytes per value, …);
//! - [`durations`]: the accepted ranges and defaults of leases, timeouts, sleeps, waits, times
//!   and schedules;
//! - [`names`]: reserved names (the `lbb.` prefix, reserved ids) and the origin kinds;
//! - [`routes`]: each operation's HTTP method and path.
//!
//! The protocol itself is described in `docs/protocol.md`; this crate is where its numbers
//! and names live in code.
//!
//! # Example
//!
//! ```
//! use turnwise_rules::{check_identifier, durations, limits, names, IdentifierError, Route};
//!
//! // Ids, keys, names, types and versions share one syntax.
//! assert!(check_identifier("order-42.v2").is_ok());
//! assert_eq!(check_identifier("two words"), Err(IdentifierError::Character(' ')));
//!
//! // Numbers and ranges the engine enforces and the macros check at compile time.
//! assert_eq!(limits::STEPS_PER_TURN, 64);
//! assert!(durations::LEASE.check(30_000).is_ok());
//! assert!(durations::LEASE.check(10).is_err());
//!
//! // Names the server keeps for itself, and where each operation lives on the wire.
//! assert!(names::is_reserved_type("lbb.internal"));
//! assert_eq!(Route::Claim.path(), "/v1/workflows/turns/claim");
//! ```

#![forbid(unsafe_code)]

pub mod durations;
pub mod ident;
pub mod limits;
pub mod names;
pub mod routes;

pub use durations::Bounds;
pub use ident::{check_identifier, is_identifier, IdentifierError};
pub use routes::{Method, Route};
