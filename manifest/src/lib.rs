//! Replay manifests: what a version of a `#[workflow]` may save in a turn, written down so that
//! a change can be checked before it meets instances in flight.
//!
//! `#[workflow]` knows every durable call of the body at compile time: its key (or the pattern
//! of a key computed in a loop), its kind, the branches and loops around it and its source
//! location. A [`Manifest`] holds that [`grammar`](Node), the JSON Schemas of the workflow's
//! state, message, reply, signals and step outputs, and a [`shape_hash`](Manifest::shape_hash)
//! that changes when the structure changes and not when comments, formatting or locations do.
//!
//! [`grammar`] answers whether a grammar accepts what a turn in flight saved and how two
//! grammars' shapes differ; [`compat`] is the check between two manifests of a workflow that CI
//! runs ([`compat::compare`]); [`schema::reads`] tells, from two versions' JSON Schemas,
//! whether the new code reads every value the old one saved; [`files`] keeps manifests on disk.
//!
//! Manifests are canonical JSON ([`Manifest::to_canonical_json`]): sorted keys, nothing
//! time-dependent, byte-identical across rebuilds, meant to be committed like a lockfile under
//! `turnwise/manifests/` ([`Manifest::file_name`]).
//!
//! ```
//! use turnwise_manifest::{Call, CallKind, Manifest, Node};
//!
//! let grammar = Node::Seq(vec![
//!     Node::Call(Call::new(CallKind::Step, "charge", "src/order.rs:12")),
//!     Node::Call(Call::new(CallKind::Sleep, "cool-off", "src/order.rs:13")),
//! ]);
//! let manifest = Manifest::new("order", "v1", grammar);
//! assert_eq!(manifest.file_name(), "order.v1.json");
//! // Locations are not part of the shape.
//! let moved = Node::Seq(vec![
//!     Node::Call(Call::new(CallKind::Step, "charge", "src/order.rs:40")),
//!     Node::Call(Call::new(CallKind::Sleep, "cool-off", "src/order.rs:41")),
//! ]);
//! assert_eq!(manifest.shape_hash, Manifest::new("order", "v1", moved).shape_hash);
//! ```

#![forbid(unsafe_code)]
// One job per function: clippy.toml sets the limit at 100 lines.
#![warn(clippy::too_many_lines)]

pub mod files;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub mod compat;
pub mod grammar;
pub mod schema;

/// The version of the manifest format this crate writes and reads.
pub const FORMAT: u32 = 1;

/// The directory, relative to a crate's root, where manifests are committed.
pub const DIR: &str = "turnwise/manifests";

/// The replay manifest of one workflow version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The manifest format ([`FORMAT`]).
    pub format: u32,
    /// The workflow's name (the wire's `workflow_type`).
    pub name: String,
    /// The version.
    pub version: String,
    /// The hash of the grammar's shape ([`shape_hash`]).
    pub shape_hash: String,
    /// The durable calls of a turn.
    pub grammar: Node,
    /// The patch ids the body asks about with `ctx.patched(..)`, sorted.
    #[serde(default)]
    pub patches: Vec<String>,
    /// The JSON Schemas of the values a turn reads and writes.
    #[serde(default)]
    pub schemas: Schemas,
}

/// The JSON Schemas of a workflow version (`null`: not known).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schemas {
    /// The saved state.
    #[serde(default)]
    pub state: Value,
    /// A message.
    #[serde(default)]
    pub message: Value,
    /// A turn's reply.
    #[serde(default)]
    pub reply: Value,
    /// Each accepted signal, by signal name.
    #[serde(default)]
    pub signals: BTreeMap<String, Value>,
    /// Each step output known at compile time, by step key.
    #[serde(default)]
    pub steps: BTreeMap<String, Value>,
}

/// A part of a turn's grammar of durable calls.
///
/// A turn saves its durable calls in the order it makes them; the grammar describes every
/// order a version's code can make them in. Serialized externally tagged:
/// `{"seq": [..]}`, `{"alt": {..}}`, `{"loop": ..}`, `{"parallel": [..]}`, `{"patch": {..}}`,
/// `{"call": {..}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    /// The parts one after the other.
    Seq(Vec<Node>),
    /// One of the arms, chosen by a condition (`if`, `match`, `let .. else`). An `if` without
    /// `else` has an empty arm.
    Alt(Alt),
    /// The body zero or more times (`for`, `while`, `loop`, a fan-out).
    Loop(Box<Node>),
    /// The members of a parallel group. They run concurrently but are saved in declaration
    /// order, so for replay a group is the members in sequence.
    Parallel(Vec<Node>),
    /// `if ctx.patched("id") { new } else { old }`: a turn that reached the patch on new code
    /// saved the patch's marker and takes `new`; a turn saved before the patch takes `old`.
    Patch(Patch),
    /// One durable call.
    Call(Call),
}

/// Alternatives chosen by a condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alt {
    /// A fingerprint of the condition's tokens (formatting does not change it): a changed
    /// condition is reported for review.
    #[serde(default)]
    pub cond: String,
    /// The arms, in source order.
    pub arms: Vec<Node>,
}

/// `ctx.patched(id)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    /// The patch id, unique in the workflow.
    pub id: String,
    /// What a turn runs when it reaches the patch on new code (after the marker).
    pub new: Box<Node>,
    /// What a turn saved before the patch existed runs.
    pub old: Box<Node>,
    /// Where `ctx.patched` is called, `file:line`.
    #[serde(default)]
    pub at: String,
}

impl Patch {
    /// The key of the marker a turn saves when it takes the new branch: `patched.<id>`.
    pub fn marker_key(id: &str) -> String {
        format!("{PATCH_MARKER_PREFIX}{id}")
    }
}

/// The key prefix of a patch marker ([`Patch::marker_key`]).
pub const PATCH_MARKER_PREFIX: &str = "patched.";

/// What a durable call saves, as the wire's checkpoint kinds name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A step with an output: `ctx.step`, `ctx.transact`, a `#[step]` function, `ctx.now`,
    /// `ctx.random`, `ctx.start_child`, a parallel member, a patch marker.
    Step,
    /// `ctx.sleep`.
    Sleep,
    /// A signal wait: `ctx.wait_for_signal`, and the wait for a child's outcome
    /// (`ctx.call_child`, `ctx.await_child`).
    Signal,
}

impl CallKind {
    /// The name on the wire: `step`, `sleep` or `signal`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Step => "step",
            CallKind::Sleep => "sleep",
            CallKind::Signal => "signal",
        }
    }
}

impl std::fmt::Display for CallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The wildcard of a key pattern: `item-*` stands for the keys a loop computes with
/// `format!("item-{i}")`, `*` for a key computed any other way.
pub const WILDCARD: char = '*';

/// One durable call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// What it saves.
    pub kind: CallKind,
    /// The key, or a pattern with [`WILDCARD`] for the parts computed at run time.
    pub key: String,
    /// The method as written (`step`, `transact`, `sleep`, `wait_for_signal`, `now`, `random`,
    /// `call_child`, `start_child`, `await_child`, `step_fn`, `fan_out`, `patched`), for
    /// reports. Empty when not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call: String,
    /// The awaited signal's name, for signal waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// A fingerprint of the call's arguments other than the key: a changed input is reported
    /// for review. Empty when the call takes none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub input: String,
    /// Where the call is, `file:line`.
    #[serde(default)]
    pub at: String,
}

impl Call {
    /// A call of `kind` with `key`, at `at` (`file:line`).
    pub fn new(kind: CallKind, key: impl Into<String>, at: impl Into<String>) -> Self {
        Call {
            kind,
            key: key.into(),
            call: String::new(),
            signal: None,
            input: String::new(),
            at: at.into(),
        }
    }

    /// With the method as written.
    #[must_use]
    pub fn call(mut self, call: impl Into<String>) -> Self {
        self.call = call.into();
        self
    }

    /// With the awaited signal's name.
    #[must_use]
    pub fn signal(mut self, name: impl Into<String>) -> Self {
        self.signal = Some(name.into());
        self
    }

    /// With the fingerprint of the call's input.
    #[must_use]
    pub fn input(mut self, fingerprint: impl Into<String>) -> Self {
        self.input = fingerprint.into();
        self
    }

    /// Whether the key is a pattern (holds [`WILDCARD`]).
    pub fn is_pattern(&self) -> bool {
        self.key.contains(WILDCARD)
    }
}

impl Manifest {
    /// The manifest of `name` `version` with `grammar`, its shape hash computed, no patches
    /// and no schemas.
    pub fn new(name: impl Into<String>, version: impl Into<String>, grammar: Node) -> Self {
        Manifest {
            format: FORMAT,
            name: name.into(),
            version: version.into(),
            shape_hash: shape_hash(&grammar),
            grammar,
            patches: Vec::new(),
            schemas: Schemas::default(),
        }
    }

    /// `<name>.<version>.json`, the file it is committed as under [`DIR`].
    pub fn file_name(&self) -> String {
        format!("{}.{}.json", self.name, self.version)
    }

    /// The manifest as canonical JSON: keys sorted at every level, two-space indents, a final
    /// newline. Equal manifests give equal bytes.
    pub fn to_canonical_json(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        canonical_json(&value)
    }

    /// Read a manifest written by [`to_canonical_json`](Self::to_canonical_json) (or any JSON
    /// of the same shape).
    ///
    /// # Errors
    ///
    /// The JSON is not a manifest, or of a format this crate does not read.
    pub fn from_json(text: &str) -> Result<Self, ManifestError> {
        let manifest: Manifest =
            serde_json::from_str(text).map_err(|e| ManifestError::Invalid(e.to_string()))?;
        if manifest.format != FORMAT {
            return Err(ManifestError::Format(manifest.format));
        }
        Ok(manifest)
    }
}

/// A manifest that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManifestError {
    /// The text is not a manifest: the parser's message.
    Invalid(String),
    /// A manifest format this version does not read.
    Format(u32),
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestError::Invalid(e) => write!(f, "not a turnwise manifest: {e}"),
            ManifestError::Format(n) => write!(
                f,
                "manifest format {n} is not read by this version of turnwise (it reads format {FORMAT}); rewrite the manifests with this version"
            ),
        }
    }
}

impl std::error::Error for ManifestError {}

/// `value` as canonical JSON: object keys sorted at every level, pretty-printed with two-space
/// indents, with a final newline.
pub fn canonical_json(value: &Value) -> String {
    let mut value = value.clone();
    value.sort_all_objects();
    let mut out = serde_json::to_string_pretty(&value).unwrap_or_default();
    out.push('\n');
    out
}

/// The hash of a grammar's shape: SHA-256, in hex, of the canonical JSON of `grammar` without
/// what is not shape (source locations and the fingerprints of conditions and inputs).
pub fn shape_hash(grammar: &Node) -> String {
    let mut value = serde_json::to_value(grammar).unwrap_or(Value::Null);
    strip_non_shape(&mut value);
    value.sort_all_objects();
    let text = serde_json::to_string(&value).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Remove `at`, `cond` and `input` from every object of a serialized grammar.
fn strip_non_shape(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in ["at", "cond", "input"] {
                map.remove(key);
            }
            map.values_mut().for_each(strip_non_shape);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_non_shape),
        _ => {}
    }
}

/// A short fingerprint of source text, for [`Alt::cond`] and [`Call::input`]: the first 16 hex
/// digits of its SHA-256.
pub fn fingerprint(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: &str, cond: &str) -> Node {
        Node::Seq(vec![
            Node::Call(Call::new(CallKind::Step, "a", at).input("x")),
            Node::Alt(Alt {
                cond: cond.into(),
                arms: vec![
                    Node::Call(Call::new(CallKind::Signal, "ok", at).signal("approval")),
                    Node::Seq(vec![]),
                ],
            }),
        ])
    }

    #[test]
    fn canonical_json_round_trips_byte_for_byte() {
        let mut m = Manifest::new("order", "v1", sample("src/a.rs:1", "c1"));
        m.patches = vec!["p".into()];
        m.schemas.state = serde_json::json!({"type": "object", "b": 1, "a": 2});
        let text = m.to_canonical_json();
        let back = Manifest::from_json(&text).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.to_canonical_json(), text);
        assert!(text.find("\"a\": 2").unwrap() < text.find("\"b\": 1").unwrap());
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn shape_hash_ignores_locations_conditions_and_inputs_only() {
        let base = shape_hash(&sample("src/a.rs:1", "c1"));
        assert_eq!(base, shape_hash(&sample("src/b.rs:9", "c2")));
        let renamed = Node::Seq(vec![Node::Call(Call::new(CallKind::Step, "b", ""))]);
        assert_ne!(base, shape_hash(&renamed));
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn other_formats_are_refused_by_name() {
        let mut m = Manifest::new("order", "v1", Node::Seq(vec![]));
        m.format = 99;
        let err = Manifest::from_json(&serde_json::to_string(&m).unwrap()).unwrap_err();
        assert_eq!(err, ManifestError::Format(99));
        assert!(err.to_string().contains("format 99"));
        let err = Manifest::from_json("{}").unwrap_err();
        assert!(err.to_string().starts_with("not a turnwise manifest"));
    }
}
