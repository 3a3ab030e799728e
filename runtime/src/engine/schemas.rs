//! Registered workflow schemas: kept in the store per (namespace, type, version), and, with
//! the `schema-validation` feature, the admission checks of messages and signals.
//!
//! The engine keeps compiled validators of each namespace it has looked at in memory, read
//! from the store when first needed and again at most every [`RELOAD`], so that a document
//! another process registered on a shared store is used soon after. A document registered
//! through this engine is used at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;
#[cfg(feature = "schema-validation")]
use crate::protocol::schema_check::{self as check, SchemaPart, Validator};
use crate::protocol::validate;

/// How long a namespace's documents read from the store are used before they are read again.
pub(super) const RELOAD: Duration = Duration::from_secs(5);

/// A document as the store keeps it: the registered document and when it was registered.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    document: SchemaDocument,
    registered_at_ms: Millis,
}

/// A registered document with what its checks need.
pub(super) struct Entry {
    stored: Stored,
    #[cfg(feature = "schema-validation")]
    message: Option<Validator>,
    #[cfg(feature = "schema-validation")]
    signals: HashMap<String, Validator>,
}

impl Entry {
    /// The document as the schemas routes serve it: the document with `registered_at_ms`.
    pub(super) fn view(&self) -> Value {
        serde_json::to_value(&self.stored).unwrap_or(Value::Null)
    }
}

/// One namespace's documents, by (type, version).
type Entries = Arc<HashMap<(String, String), Arc<Entry>>>;

/// One namespace's documents, and when they were read from the store. Shared, so that the
/// check on every admission takes a reference count, not a copy of the map.
struct Namespace {
    read_at: Instant,
    entries: Entries,
}

/// The registered documents of the namespaces this engine has looked at.
#[derive(Default)]
pub(super) struct Schemas {
    namespaces: Mutex<HashMap<String, Namespace>>,
}

#[cfg(feature = "schema-validation")]
fn compile(param: &str, schema: &Value) -> Result<Option<Validator>> {
    check::validator(schema)
        .map_err(|e| Error::invalid(param, format!("`{param}` is not a usable JSON Schema: {e}")))
}

/// Check a document and compile its validators.
fn entry(stored: Stored) -> Result<Entry> {
    let d = &stored.document;
    validate::identifier("workflow_type", &d.workflow_type)?;
    validate::identifier("version", &d.version)?;
    if let Some(m) = &d.manifest {
        if (m.name.as_str(), m.version.as_str()) != (d.workflow_type.as_str(), d.version.as_str()) {
            return Err(Error::invalid(
                "manifest",
                format!(
                    "the manifest describes `{}` `{}` but the document registers `{}` `{}`; register each version's own manifest",
                    m.name, m.version, d.workflow_type, d.version
                ),
            ));
        }
    }
    for name in d.signals.keys() {
        if let Err(why) = turnwise_rules::check_identifier(name) {
            return Err(Error::invalid(
                "signals",
                format!("{name:?} is not a valid signal name: {why}"),
            ));
        }
    }
    #[cfg(feature = "schema-validation")]
    {
        let message = compile("message", &d.message)?;
        compile("state", &d.state)?;
        compile("reply", &d.reply)?;
        let mut signals = HashMap::new();
        for (name, schema) in &d.signals {
            if let Some(v) = compile(&format!("signals.{name}"), schema)? {
                signals.insert(name.clone(), v);
            }
        }
        Ok(Entry {
            stored,
            message,
            signals,
        })
    }
    #[cfg(not(feature = "schema-validation"))]
    Ok(Entry { stored })
}

impl Schemas {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Namespace>> {
        self.namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Engine {
    /// Register (or replace) the schema document of one workflow type and version in this
    /// engine's namespace: checked (identifiers, usable JSON Schemas), kept in the store, and
    /// used for admission checks from now on. Answers the document as served, with
    /// `registered_at_ms`.
    pub async fn register_schema_document(&self, document: SchemaDocument) -> Result<Value> {
        let stored = Stored {
            document,
            registered_at_ms: self.now(),
        };
        let entry = entry(stored)?;
        let body = serde_json::to_string(&entry.stored)
            .map_err(|e| Error::store(format!("encode a schema document: {e}")))?;
        let d = &entry.stored.document;
        self.inner
            .store
            .save_schema(&self.ns, &d.workflow_type, &d.version, &body)
            .await?;
        let view = entry.view();
        let key = (d.workflow_type.clone(), d.version.clone());
        let mut namespaces = self.inner.schemas.lock();
        if let Some(ns) = namespaces.get_mut(&*self.ns) {
            Arc::make_mut(&mut ns.entries).insert(key, Arc::new(entry));
        }
        Ok(view)
    }

    /// The registered schema documents of this namespace (as served, with
    /// `registered_at_ms`), by type and version, optionally of one type (and version).
    pub async fn schema_documents(
        &self,
        workflow_type: Option<&str>,
        version: Option<&str>,
    ) -> Result<Vec<Value>> {
        let entries = self.namespace_schemas().await?;
        let mut found: Vec<(&(String, String), &Arc<Entry>)> = entries
            .iter()
            .filter(|((t, v), _)| {
                workflow_type.is_none_or(|want| want == t) && version.is_none_or(|want| want == v)
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(b.0));
        Ok(found.into_iter().map(|(_, e)| e.view()).collect())
    }

    /// This namespace's documents, read from the store when not read in the last [`RELOAD`].
    async fn namespace_schemas(&self) -> Result<Entries> {
        {
            let namespaces = self.inner.schemas.lock();
            if let Some(ns) = namespaces
                .get(&*self.ns)
                .filter(|ns| ns.read_at.elapsed() < RELOAD)
            {
                return Ok(Arc::clone(&ns.entries));
            }
        }
        let read_at = Instant::now();
        let mut entries = HashMap::new();
        for body in self.inner.store.load_schemas(&self.ns).await? {
            // A kept document this version cannot use is left out (and said once per read).
            let parsed = serde_json::from_str::<Stored>(&body)
                .map_err(|e| Error::invalid("document", e))
                .and_then(entry);
            match parsed {
                Ok(e) => {
                    let d = &e.stored.document;
                    entries.insert((d.workflow_type.clone(), d.version.clone()), Arc::new(e));
                }
                Err(e) => tracing::warn!(
                    namespace = %self.ns,
                    "a kept schema document cannot be used and is left out: {e}"
                ),
            }
        }
        let entries = Arc::new(entries);
        self.inner.schemas.lock().insert(
            self.ns.to_string(),
            Namespace {
                read_at,
                entries: Arc::clone(&entries),
            },
        );
        Ok(entries)
    }

    /// The replay manifests registered for `workflow_type` in this namespace, by version. A
    /// manifest whose state or message schema is not known (`null`) takes the one of its
    /// document.
    pub(super) async fn manifests(&self, workflow_type: &str) -> Result<super::compat::Manifests> {
        let entries = self.namespace_schemas().await?;
        let mut found = HashMap::new();
        for ((t, version), entry) in entries.iter() {
            let d = &entry.stored.document;
            let Some(manifest) = d.manifest.as_ref().filter(|_| t == workflow_type) else {
                continue;
            };
            let mut manifest = manifest.clone();
            let schemas = &mut manifest.schemas;
            for (mine, theirs) in [
                (&mut schemas.state, &d.state),
                (&mut schemas.message, &d.message),
            ] {
                if mine.is_null() {
                    mine.clone_from(theirs);
                }
            }
            found.insert(version.clone(), manifest);
        }
        Ok(Arc::new(found))
    }

    /// The document of one type and version, if one is registered.
    async fn schema_entry(&self, workflow_type: &str, version: &str) -> Result<Option<Arc<Entry>>> {
        let entries = self.namespace_schemas().await?;
        Ok(entries
            .get(&(workflow_type.to_owned(), version.to_owned()))
            .cloned())
    }

    /// Check a message against its workflow's message schema, if one is registered.
    pub(super) async fn check_message_schema(
        &self,
        inst: &InstanceRecord,
        message: &Value,
    ) -> Result<()> {
        #[cfg(feature = "schema-validation")]
        if let Some(entry) = self
            .schema_entry(&inst.workflow_type, &inst.version)
            .await?
        {
            if let Some(v) = &entry.message {
                return refuse_violations(v, SchemaPart::Message, inst, message);
            }
        }
        let _ = (inst, message);
        Ok(())
    }

    /// Check a signal against the document registered for its instance's type and version, if
    /// one is: a client's signal must have a name the document declares (its `signals` keys),
    /// and a value that matches the schema of its name, when that is not `null`. A child
    /// turn's outcome, which the engine delivers under the name the parent chose, is not held
    /// to the declared names.
    pub(super) async fn check_signal_schema(
        &self,
        inst: &InstanceRecord,
        signal: &SignalRequest,
        sender: Sender,
    ) -> Result<()> {
        let Some(entry) = self
            .schema_entry(&inst.workflow_type, &inst.version)
            .await?
        else {
            return Ok(());
        };
        let name = signal.name.as_str();
        let declared = &entry.stored.document.signals;
        if sender == Sender::Client && !declared.contains_key(name) {
            return Err(undeclared(inst, name, declared.keys()));
        }
        #[cfg(feature = "schema-validation")]
        if let Some(v) = entry.signals.get(name) {
            return refuse_violations(v, SchemaPart::Signal(name), inst, &signal.value);
        }
        Ok(())
    }
}

/// Who sends a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sender {
    /// A client, through the signal route.
    Client,
    /// The engine, delivering a child turn's outcome to its parent turn.
    Engine,
}

/// The refusal of a signal named `name` that the registered document of `inst`'s type and
/// version does not declare: `invalid_request` on `name`, listing the declared names.
fn undeclared<'a>(
    inst: &InstanceRecord,
    name: &str,
    declared: impl ExactSizeIterator<Item = &'a String>,
) -> Error {
    let (accepted, fix) = if declared.len() == 0 {
        ("it declares no signals".to_owned(), "register")
    } else {
        let names: Vec<String> = declared.map(|n| format!("`{n}`")).collect();
        let names = format!("it declares {}", names.join(", "));
        (names, "send one of those names, or register")
    };
    Error::invalid(
        "name",
        format!(
            "signal `{name}` is not declared by the registered schema of {} {}: {accepted}; \
             {fix} a schema that declares `{name}`; nothing was written",
            inst.workflow_type, inst.version
        ),
    )
}

/// [`Error::SchemaValidation`] naming every failing path, when `value` does not match `part`
/// of `inst`'s document.
#[cfg(feature = "schema-validation")]
fn refuse_violations(
    validator: &Validator,
    part: SchemaPart<'_>,
    inst: &InstanceRecord,
    value: &Value,
) -> Result<()> {
    let errors = check::found(validator, value);
    let Some(first) = errors.first() else {
        return Ok(());
    };
    let mismatch = part.mismatch(&inst.workflow_type, &inst.version, &errors);
    Err(Error::SchemaValidation {
        param: part.failing_param(first),
        message: format!("{mismatch}; nothing was written"),
        errors,
    })
}
