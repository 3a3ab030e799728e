//! JSON Schemas of workflows: what a workflow's messages, state, replies, signals and steps look
//! like on the wire, for clients in other languages, docs and compatibility checks.
//!
//! `#[workflow]` generates the schema of every workflow it defines (`counter.schema()`); a
//! [`Manifest`] gathers the schemas of a set of workflows into one document.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use turnwise::prelude::*;
//! use turnwise::schema::Manifest;
//!
//! #[derive(Serialize, Deserialize, JsonSchema, Default)]
//! struct Count {
//!     count: u64,
//! }
//!
//! #[workflow(name = "counter", version = "v1")]
//! async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
//!     let add = ctx.step::<u64, _, _>("add", move |_| async move { Ok(add) }).await?;
//!     Ok(Done::new(Count { count: state.count + add }).reply(state.count + add))
//! }
//!
//! let schema = counter.schema();
//! assert_eq!((schema.name.as_str(), schema.version.as_str()), ("counter", "v1"));
//! assert_eq!(schema.message["type"], "integer");
//! assert!(schema.steps.contains_key("add"));
//!
//! let manifest = Manifest::of([counter.schema()]);
//! assert!(manifest.schemas_json().contains("\"counter\""));
//! ```

use std::collections::BTreeMap;

use schemars::{JsonSchema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::SchemaDocument;

/// The JSON Schemas of one workflow definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkflowSchema {
    /// The workflow's name (the wire's `workflow_type`).
    pub name: String,
    /// Its version.
    pub version: String,
    /// The schema of a message.
    pub message: Value,
    /// The schema of the saved state.
    pub state: Value,
    /// The schema of a turn's reply.
    pub reply: Value,
    /// The schema of each accepted signal, by signal name.
    pub signals: BTreeMap<String, Value>,
    /// The schema of each step output known at compile time, by step key.
    pub steps: BTreeMap<String, Value>,
}

/// The root JSON Schema of `T`, as a JSON value.
pub fn schema_of<T: ?Sized + JsonSchema>() -> Value {
    SchemaGenerator::default()
        .into_root_schema_for::<T>()
        .to_value()
}

impl WorkflowSchema {
    /// A schema with the message, state and reply of `M`, `S` and `R`, and no signal or step.
    pub fn new<M, S, R>(name: impl Into<String>, version: impl Into<String>) -> Self
    where
        M: ?Sized + JsonSchema,
        S: ?Sized + JsonSchema,
        R: ?Sized + JsonSchema,
    {
        Self {
            name: name.into(),
            version: version.into(),
            message: schema_of::<M>(),
            state: schema_of::<S>(),
            reply: schema_of::<R>(),
            signals: BTreeMap::new(),
            steps: BTreeMap::new(),
        }
    }

    /// Add an accepted signal under its name.
    #[must_use]
    pub fn signal<T: ?Sized + JsonSchema>(mut self, name: impl Into<String>) -> Self {
        self.signals.insert(name.into(), schema_of::<T>());
        self
    }

    /// Add a step's output under the step's key.
    #[must_use]
    pub fn step<T: ?Sized + JsonSchema>(mut self, key: impl Into<String>) -> Self {
        self.steps.insert(key.into(), schema_of::<T>());
        self
    }

    /// The wire document a worker registers with a backend: the message, state, reply and
    /// signal schemas under the workflow's type and version (step outputs are not part of it;
    /// the worker adds the version's replay manifest, which holds them).
    pub fn document(&self) -> SchemaDocument {
        SchemaDocument {
            workflow_type: self.name.clone(),
            version: self.version.clone(),
            message: self.message.clone(),
            signals: self.signals.clone(),
            state: self.state.clone(),
            reply: self.reply.clone(),
            manifest: None,
        }
    }

    /// The schema as one pretty-printed JSON document.
    pub fn to_json(&self) -> String {
        // A map of strings to JSON values always serializes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The schemas of a set of workflows, ordered by name and version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The workflows.
    pub workflows: Vec<WorkflowSchema>,
}

impl Manifest {
    /// A manifest of these workflows' schemas.
    pub fn of(schemas: impl IntoIterator<Item = WorkflowSchema>) -> Self {
        let mut workflows: Vec<WorkflowSchema> = schemas.into_iter().collect();
        workflows.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
        Self { workflows }
    }

    /// The manifest as one pretty-printed JSON document.
    pub fn schemas_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
