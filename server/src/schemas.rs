//! Workflow schemas: what workers register, and the admission checks made with them.
//!
//! A worker registers one document per workflow type and version: JSON Schemas for the
//! message, each signal by name, the state and the reply. The server keeps them per namespace,
//! type and version, serves them back, and checks every message (`instances/message`) and
//! signal (`turns/signal`) of an instance of that type and version against them before anything
//! is written. An instance whose type and version have no registered schema is admitted
//! unchecked, and so is a signal whose name the document does not declare.
//!
//! The registry lives in the server process: workers register when they start, so a restarted
//! server is filled again as workers reconnect.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::error::ApiError;

/// The wire document of `POST /v1/workflows/schemas`, defined with the protocol's types.
pub use turnwise::protocol::SchemaDocument;

/// A registered document with its compiled validators.
struct Entry {
    document: SchemaDocument,
    registered_at_ms: i64,
    message: Option<jsonschema::Validator>,
    signals: HashMap<String, jsonschema::Validator>,
}

/// The schemas registered with this server process.
#[derive(Default)]
pub struct SchemaRegistry {
    // (namespace, workflow type, version) → entry.
    entries: RwLock<BTreeMap<(String, String, String), Arc<Entry>>>,
}

fn compile(param: &str, schema: &Value) -> Result<Option<jsonschema::Validator>, ApiError> {
    if schema.is_null() {
        return Ok(None);
    }
    jsonschema::validator_for(schema).map(Some).map_err(|e| {
        ApiError::invalid(
            Some(param.to_owned()),
            format!("`{param}` is not a usable JSON Schema: {e}"),
        )
    })
}

impl SchemaRegistry {
    /// Register (or replace) the document of one workflow type and version in `ns`.
    pub fn register(
        &self,
        ns: &str,
        document: SchemaDocument,
        now_ms: i64,
    ) -> Result<Value, ApiError> {
        turnwise::validate::identifier("workflow_type", &document.workflow_type)?;
        turnwise::validate::identifier("version", &document.version)?;
        let message = compile("message", &document.message)?;
        compile("state", &document.state)?;
        compile("reply", &document.reply)?;
        let mut signals = HashMap::new();
        for (name, schema) in &document.signals {
            if let Err(why) = turnwise_rules::check_identifier(name) {
                return Err(ApiError::invalid(
                    Some("signals".into()),
                    format!("{name:?} is not a valid signal name: {why}"),
                ));
            }
            if let Some(v) = compile(&format!("signals.{name}"), schema)? {
                signals.insert(name.clone(), v);
            }
        }
        let key = (
            ns.to_owned(),
            document.workflow_type.clone(),
            document.version.clone(),
        );
        let entry = Arc::new(Entry {
            document,
            registered_at_ms: now_ms,
            message,
            signals,
        });
        let view = view(&entry);
        self.entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, entry);
        Ok(view)
    }

    /// The documents registered in `ns`, optionally of one type (and version).
    pub fn list(&self, ns: &str, workflow_type: Option<&str>, version: Option<&str>) -> Vec<Value> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .filter(|((n, t, v), _)| {
                n == ns
                    && workflow_type.is_none_or(|want| want == t)
                    && version.is_none_or(|want| want == v)
            })
            .map(|(_, e)| view(e))
            .collect()
    }

    /// How many documents are registered in `ns`.
    pub fn count(&self, ns: &str) -> usize {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.keys().filter(|(n, _, _)| n == ns).count()
    }

    fn get(&self, ns: &str, workflow_type: &str, version: &str) -> Option<Arc<Entry>> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&(ns.to_owned(), workflow_type.to_owned(), version.to_owned()))
            .cloned()
    }

    /// Whether anything is registered for this type and version (a cheap pre-check).
    pub fn has(&self, ns: &str, workflow_type: &str, version: &str) -> bool {
        self.get(ns, workflow_type, version).is_some()
    }

    /// Check a message against its workflow's message schema, if one is registered.
    pub fn check_message(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        message: &Value,
    ) -> Result<(), ApiError> {
        let Some(entry) = self.get(ns, workflow_type, version) else {
            return Ok(());
        };
        match &entry.message {
            Some(v) => check(
                v,
                "message",
                &format!("the message schema of {workflow_type} {version}"),
                message,
            ),
            None => Ok(()),
        }
    }

    /// Check a signal value against the schema of its name, if one is registered.
    pub fn check_signal(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        name: &str,
        value: &Value,
    ) -> Result<(), ApiError> {
        let Some(entry) = self.get(ns, workflow_type, version) else {
            return Ok(());
        };
        match entry.signals.get(name) {
            Some(v) => check(
                v,
                "value",
                &format!("the schema of signal `{name}` of {workflow_type} {version}"),
                value,
            ),
            None => Ok(()),
        }
    }
}

fn view(entry: &Entry) -> Value {
    let mut doc = serde_json::to_value(&entry.document).unwrap_or(Value::Null);
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("registered_at_ms".into(), json!(entry.registered_at_ms));
    }
    doc
}

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

/// A `400 schema_validation_failed` naming every failing path (JSON Pointers into `param`).
fn check(
    validator: &jsonschema::Validator,
    param: &str,
    what: &str,
    instance: &Value,
) -> Result<(), ApiError> {
    let errors = collect(validator, instance);
    if errors.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = errors.iter().map(Violation::describe).collect();
    let first = &errors[0].instance_path;
    let details: Vec<Value> = errors
        .iter()
        .map(|v| {
            json!({"instance_path": v.instance_path, "schema_path": v.schema_path,
                   "message": v.message})
        })
        .collect();
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "schema_validation_failed",
        format!(
            "`{param}` does not match {what}: {}; nothing was written",
            listed.join("; ")
        ),
    )
    .with_param(format!("{param}{first}"))
    .with_details(json!({ "errors": details })))
}
