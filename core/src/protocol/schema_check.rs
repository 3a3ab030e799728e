//! Checking a value against a registered schema document: the one validator the engine admits
//! messages and signals with, shared with the clients that check before they send (the
//! `turnwise` CLI) and the console's form tests.
//!
//! [`SchemaPart`] names which schema of a document applies (the message schema, the schema of a
//! named signal, the state schema) and words the refusal of a value that does not match it;
//! [`violations`] checks a value against a JSON Schema (with the `schema-validation` feature).

use serde_json::Value;

use crate::protocol::SchemaViolation;

/// At most this many violations are reported.
const MAX_REPORTED: usize = 10;

/// Which schema of a registered document a value is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaPart<'a> {
    /// The message schema (`message`), for a message.
    Message,
    /// The schema of the named signal (`signals.<name>`), for its value.
    Signal(&'a str),
    /// The state schema (`state`), for an instance's initial state.
    State,
}

impl SchemaPart<'_> {
    /// The request parameter the checked value is: `message`, `value` (a signal's) or
    /// `state`. A violation's path is reported after it (`message/address/city`).
    pub fn param(&self) -> &'static str {
        match self {
            SchemaPart::Message => "message",
            SchemaPart::Signal(_) => "value",
            SchemaPart::State => "state",
        }
    }

    /// How refusals name this schema: ``the message schema``, ``the schema of signal
    /// `name` ``, ``the state schema``.
    pub fn describe(&self) -> String {
        match self {
            SchemaPart::Message => "the message schema".to_owned(),
            SchemaPart::Signal(name) => format!("the schema of signal `{name}`"),
            SchemaPart::State => "the state schema".to_owned(),
        }
    }

    /// This part of a schema document as served (`message`, `signals.<name>`, `state`), if
    /// the document has it.
    pub fn of<'d>(&self, document: &'d Value) -> Option<&'d Value> {
        match self {
            SchemaPart::Message => document.get("message"),
            SchemaPart::Signal(name) => document.get("signals").and_then(|s| s.get(name)),
            SchemaPart::State => document.get("state"),
        }
    }

    /// The refusal of a value with these violations, as the engine and the CLI word it before
    /// saying what was not done, each violation [described](SchemaViolation::describe):
    /// ``
    /// `message` does not match the message schema of order v1: at `/qty`: -1 is less than the
    /// minimum of 0
    /// ``.
    pub fn mismatch(
        &self,
        workflow_type: &str,
        version: &str,
        violations: &[SchemaViolation],
    ) -> String {
        let listed: Vec<String> = violations.iter().map(SchemaViolation::describe).collect();
        format!(
            "`{}` does not match {} of {workflow_type} {version}: {}",
            self.param(),
            self.describe(),
            listed.join("; ")
        )
    }

    /// The parameter a refusal names for a violation: the checked parameter followed by the
    /// violation's JSON Pointer (`message/address/city`).
    pub fn failing_param(&self, violation: &SchemaViolation) -> String {
        format!("{}{}", self.param(), violation.instance_path)
    }
}

/// Check `value` against the JSON Schema `schema` with the validator the engine checks
/// messages and signals with: the first violations (at most 10), none when `value` conforms
/// or `schema` is `null`. `Err` says why `schema` is not a usable JSON Schema.
#[cfg(feature = "schema-validation")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema-validation")))]
pub fn violations(schema: &Value, value: &Value) -> Result<Vec<SchemaViolation>, String> {
    Ok(match validator(schema)? {
        Some(validator) => found(&validator, value),
        None => Vec::new(),
    })
}

/// The compiled validator of a JSON Schema; `None` for `null` (nothing to check). `Err` says
/// why `schema` is not a usable JSON Schema.
/// A compiled JSON Schema (the `jsonschema` crate's), as the engine caches them.
#[doc(hidden)]
#[cfg(feature = "schema-validation")]
pub type Validator = jsonschema::Validator;

// Public for the engine's cache of compiled validators; the type is jsonschema's.
#[doc(hidden)]
#[cfg(feature = "schema-validation")]
pub fn validator(schema: &Value) -> Result<Option<jsonschema::Validator>, String> {
    if schema.is_null() {
        return Ok(None);
    }
    jsonschema::validator_for(schema)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The first violations (at most 10) of `value` against a compiled schema.
#[doc(hidden)]
#[cfg(feature = "schema-validation")]
pub fn found(validator: &jsonschema::Validator, value: &Value) -> Vec<SchemaViolation> {
    validator
        .iter_errors(value)
        .take(MAX_REPORTED)
        .map(|e| {
            SchemaViolation::new(
                e.instance_path().as_str(),
                e.schema_path().as_str(),
                e.to_string(),
            )
        })
        .collect()
}

#[cfg(not(feature = "schema-validation"))]
const _: usize = MAX_REPORTED;

#[cfg(all(test, feature = "schema-validation"))]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_part_finds_its_schema_and_words_the_refusal() {
        let document = json!({
            "message": {"type": "integer", "minimum": 0},
            "signals": {"approve": {"type": "object", "required": ["by"]}},
            "state": null,
        });
        let message = SchemaPart::Message.of(&document).unwrap();
        let found = violations(message, &json!(-1)).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(SchemaPart::Message.failing_param(&found[0]), "message");
        assert_eq!(
            SchemaPart::Message.mismatch("order", "v1", &found),
            "`message` does not match the message schema of order v1: at `/`: -1 is less than \
             the minimum of 0"
        );
        let approve = SchemaPart::Signal("approve");
        let found = violations(approve.of(&document).unwrap(), &json!({"by": 1, "x": {}}));
        assert!(found.unwrap().is_empty());
        assert_eq!(approve.describe(), "the schema of signal `approve`");
        assert_eq!(SchemaPart::Signal("reject").of(&document), None);
        let state = SchemaPart::State.of(&document).unwrap();
        assert_eq!(violations(state, &json!("anything")).unwrap(), Vec::new());
        assert!(violations(&json!({"type": 7}), &json!(1)).is_err());
    }
}
