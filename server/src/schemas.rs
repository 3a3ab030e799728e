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

use serde_json::Value;

/// The wire document of `POST /v1/workflows/schemas`, defined with the protocol's types.
pub use turnwise::protocol::SchemaDocument;

/// At most this many validation errors are reported.
const MAX_REPORTED: usize = 10;

/// One way a value fails a JSON Schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// A JSON Pointer to the failing part of the value (`""` for the value itself).
    pub instance_path: String,
    /// A JSON Pointer to the schema keyword that failed.
    pub schema_path: String,
    /// What is wrong.
    pub message: String,
}

impl Violation {
    /// `at `/path`: message`, the form the server's refusals list them in.
    pub fn describe(&self) -> String {
        let at = if self.instance_path.is_empty() {
            "/"
        } else {
            self.instance_path.as_str()
        };
        format!("at `{at}`: {}", self.message)
    }
}

/// Check `value` against the JSON Schema `schema` with the validator the server checks
/// messages and signals with: the first violations (at most 10), none when `value` conforms
/// or `schema` is `null`. `Err` says why `schema` is not a usable JSON Schema.
///
/// The `turnwise` CLI checks a message or signal with this before it sends it, against the
/// document the server serves, so it refuses what the server would refuse, naming the path.
pub fn violations(schema: &Value, value: &Value) -> Result<Vec<Violation>, String> {
    if schema.is_null() {
        return Ok(Vec::new());
    }
    let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
    Ok(collect(&validator, value))
}

fn collect(validator: &jsonschema::Validator, instance: &Value) -> Vec<Violation> {
    validator
        .iter_errors(instance)
        .take(MAX_REPORTED)
        .map(|e| Violation {
            instance_path: e.instance_path().as_str().to_owned(),
            schema_path: e.schema_path().as_str().to_owned(),
            message: e.to_string(),
        })
        .collect()
}
