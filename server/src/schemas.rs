//! Workflow schemas: what workers register, and the checks made with them.
//!
//! A worker registers one document per workflow type and version: JSON Schemas for the
//! message, each signal by name, the state and the reply. The engine keeps them in its store
//! per namespace, type and version (so they survive a restart of the server), serves them back,
//! and checks every message (`instances/message`) and signal (`turns/signal`) of an instance of
//! that type and version against them before anything is written
//! ([`turnwise::Error::SchemaValidation`], `400 schema_validation_failed`); a signal whose name
//! the document does not declare is refused (`400 invalid_request` on `name`, listing the
//! declared names). An instance whose type and version have no registered schema is admitted
//! unchecked.

/// The wire document of `POST /v1/workflows/schemas`, defined with the protocol's types.
pub use turnwise::protocol::SchemaDocument;

/// One way a value fails a JSON Schema: the engine's
/// [`SchemaViolation`](turnwise::protocol::SchemaViolation).
pub use turnwise::protocol::SchemaViolation as Violation;

/// The engine's validator ([`turnwise::protocol::schema_check`]), with which the `turnwise` CLI
/// checks a message, signal or initial state before it sends it, against the document the
/// server serves, so it refuses what the server would refuse, naming the path.
pub use turnwise::protocol::schema_check::violations;
