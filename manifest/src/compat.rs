//! The compatibility check between two manifests of a workflow, for CI: can the `new` code
//! take over the turns in flight of the `old` one, and read what they saved?
//!
//! [`compare`] classifies a change ([`Class`], the worst finding wins):
//!
//! - [`Class::Breaks`]: saved data cannot be read: the new state, message, signal or step
//!   output schema does not read the old one, an old signal is no longer accepted, or a key is
//!   reused with another kind.
//! - [`Class::NeedsPatch`]: some saved prefix of the old grammar is not accepted by the new
//!   one: a turn in flight with it would fail to replay. The finding names the shortest such
//!   prefix, where the new code diverges and the fix (`ctx.patched(..)`, `.key(..)`, or a new
//!   version).
//! - [`Class::Review`]: replay works, but something a person should look at changed: the
//!   condition of a branch, the input of a call, a schema the check cannot compare, or new
//!   messages that instances left on the old version cannot read.
//! - [`Class::Safe`]: none of these.
//!
//! ```
//! use turnwise_manifest::compat::{compare, Class};
//! use turnwise_manifest::{Call, CallKind, Manifest, Node};
//!
//! let step = |key: &str, at: &str| Node::Call(Call::new(CallKind::Step, key, at));
//! let old = Manifest::new("order", "v1", Node::Seq(vec![step("charge", "src/order.rs:3")]));
//! let new = Manifest::new(
//!     "order",
//!     "v1",
//!     Node::Seq(vec![step("reserve", "src/order.rs:3"), step("charge", "src/order.rs:4")]),
//! );
//! let comparison = compare(&old, &new);
//! assert_eq!(comparison.class, Class::NeedsPatch);
//! assert_eq!(comparison.findings[0].prefix, ["step `charge`"]);
//! assert_eq!(comparison.findings[0].at.as_deref(), Some("src/order.rs:3"));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::grammar::{self, describe_call, Divergence, Saved, Search};
use crate::schema::{self, SchemaCompat};
use crate::{Alt, Call, CallKind, Manifest, Node, Schemas};

/// How many positions [`compare`] searches at most for a saved prefix of the old grammar that
/// the new one rejects ([`grammar::first_rejected`]); past it, the comparison asks for review.
pub const SEARCH_LIMIT: usize = 10_000;

/// How a change affects the turns in flight, ordered by severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Nothing found.
    Safe,
    /// Replay works, but a person should look at the change.
    Review,
    /// Some turns in flight would fail to replay: patch the change or publish a new version.
    NeedsPatch,
    /// Saved data cannot be read, or a saved key is reused with another kind.
    Breaks,
}

impl Class {
    /// The exit code of a CI check: 0 safe, 1 review, 2 needs-patch, 3 breaks.
    pub fn exit_code(self) -> i32 {
        match self {
            Class::Safe => 0,
            Class::Review => 1,
            Class::NeedsPatch => 2,
            Class::Breaks => 3,
        }
    }

    /// `safe`, `review`, `needs-patch` or `breaks`, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Safe => "safe",
            Class::Review => "review",
            Class::NeedsPatch => "needs-patch",
            Class::Breaks => "breaks",
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing the check found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// How bad it is.
    pub class: Class,
    /// What changed, in one sentence naming the thing (key, field, signal, variant).
    pub what: String,
    /// The shortest saved prefix that breaks (described entries, e.g. `["step `charge`",
    /// "sleep `nap`"]`); empty for findings that do not depend on a prefix.
    pub prefix: Vec<String>,
    /// `file:line` where the new code diverges (the `at` of the new call expected at the
    /// divergence, or of the changed call); `None` when unknown.
    pub at: Option<String>,
    /// The fix, concretely.
    pub fix: String,
}

/// The result of comparing two manifests of a workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The workflow's name.
    pub name: String,
    /// The old manifest's version.
    pub from: String,
    /// The new manifest's version.
    pub to: String,
    /// The worst finding's class, [`Class::Safe`] without findings.
    pub class: Class,
    /// What the check found, worst first.
    pub findings: Vec<Finding>,
}

impl Comparison {
    /// The comparison as canonical JSON (keys sorted, two-space indents, a final newline):
    /// stable across runs, for `--json`.
    pub fn to_json(&self) -> String {
        crate::canonical_json(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

/// The check of a whole set of manifests against a baseline, as `turnwise compat --baseline`
/// runs it: every comparison, and the worst class among them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The worst class of all comparisons ([`Class::Safe`] when there are none).
    pub class: Class,
    /// The comparisons, by name and versions.
    pub comparisons: Vec<Comparison>,
}

impl Report {
    /// The report as canonical JSON, for `--json`.
    pub fn to_json(&self) -> String {
        crate::canonical_json(&serde_json::to_value(self).unwrap_or(Value::Null))
    }

    /// The report for people: each comparison ([`render_text`]), then a summary line.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for c in &self.comparisons {
            out.push_str(&render_text(c));
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        let n = self.comparisons.len();
        out.push_str(&format!(
            "{n} comparison{}: {}\n",
            if n == 1 { "" } else { "s" },
            self.class
        ));
        out
    }
}

/// Compare the `current` manifests with a `baseline` (what is deployed, e.g. the manifests of
/// the last release). For each workflow version in the baseline:
///
/// - the same version in `current` is compared with it: the code of a version that turns in
///   flight replay was changed in place;
/// - each version of the same workflow in `current` that the baseline does not have is
///   compared with it: instances on the old version would be upgraded to it;
/// - a version missing from `current` while no new version replaces it is reported for review:
///   instances on it would have no code to run on.
///
/// Workflows only in `current` are new and have nothing to compare with.
pub fn compare_sets(baseline: &[Manifest], current: &[Manifest]) -> Report {
    let has = |set: &[Manifest], name: &str, version: &str| {
        set.iter().any(|m| m.name == name && m.version == version)
    };
    let mut comparisons = Vec::new();
    for old in baseline {
        let same = current
            .iter()
            .find(|m| m.name == old.name && m.version == old.version);
        if let Some(new) = same {
            comparisons.push(compare(old, new));
        }
        let added: Vec<&Manifest> = current
            .iter()
            .filter(|m| m.name == old.name && !has(baseline, &m.name, &m.version))
            .collect();
        for new in &added {
            comparisons.push(compare(old, new));
        }
        if same.is_none() && added.is_empty() {
            comparisons.push(removed(old));
        }
    }
    comparisons.sort_by(|a, b| (&a.name, &a.from, &a.to).cmp(&(&b.name, &b.from, &b.to)));
    let class = comparisons
        .iter()
        .map(|c| c.class)
        .max()
        .unwrap_or(Class::Safe);
    Report { class, comparisons }
}

/// A baseline version no longer among the current manifests, with no new version of its
/// workflow either.
fn removed(old: &Manifest) -> Comparison {
    Comparison {
        name: old.name.clone(),
        from: old.version.clone(),
        to: old.version.clone(),
        class: Class::Review,
        findings: vec![Finding {
            class: Class::Review,
            what: format!(
                "version `{}` of `{}` is in the baseline but not among the current manifests: instances on it would have no code to run on",
                old.version, old.name
            ),
            prefix: Vec::new(),
            at: None,
            fix: format!(
                "keep `{}` `{}` registered with the worker and its manifest committed until no instance runs it (`turnwise compat --url .. --to <version>` then upgrade them)",
                old.name, old.version
            ),
        }],
    }
}

/// Compare the `old` manifest of a workflow with the `new` one: can new code take over the
/// turns in flight of old code and read what they saved? See the [module](self) for the rules.
pub fn compare(old: &Manifest, new: &Manifest) -> Comparison {
    let mut findings = schema_findings(old, new);
    findings.extend(kind_findings(old, new));
    findings.extend(replay_finding(old, new));
    findings.extend(condition_findings(old, new));
    findings.extend(input_findings(old, new));
    findings.sort_by_key(|f| std::cmp::Reverse(f.class));
    let class = findings
        .iter()
        .map(|f| f.class)
        .max()
        .unwrap_or(Class::Safe);
    Comparison {
        name: new.name.clone(),
        from: old.version.clone(),
        to: new.version.clone(),
        class,
        findings,
    }
}

/// The comparison as a report for people:
///
/// ```text
/// order v1 → v2: needs-patch
///   needs-patch: step `reserve` was inserted before step `charge`, …
///     saved prefix: step `charge`
///     at: src/order.rs:3
///     fix: wrap the new call in …
/// ```
pub fn render_text(c: &Comparison) -> String {
    let mut out = format!("{} {} → {}: {}\n", c.name, c.from, c.to, c.class);
    if c.findings.is_empty() {
        out.push_str("  nothing affects the turns in flight\n");
    }
    for f in &c.findings {
        out.push_str(&format!("  {}: {}\n", f.class, f.what));
        if !f.prefix.is_empty() {
            out.push_str(&format!("    saved prefix: {}\n", f.prefix.join(" → ")));
        }
        if let Some(at) = &f.at {
            out.push_str(&format!("    at: {at}\n"));
        }
        out.push_str(&format!("    fix: {}\n", f.fix));
    }
    out
}

/// `Some(at)` unless empty.
fn known(at: &str) -> Option<String> {
    Some(at.to_string()).filter(|at| !at.is_empty())
}

/// ", or publish it as a new version …": the way out that always works.
fn version_hint(old: &Manifest, new: &Manifest) -> String {
    if old.version == new.version {
        format!(
            "or publish it as a new version (`#[workflow(version = \"{}\")]`) so that the turns in flight finish on `{}`",
            next_version(&old.version),
            old.version
        )
    } else {
        format!(
            "or keep `{}` running for its turns in flight instead of moving them to `{}`",
            old.version, new.version
        )
    }
}

/// `v1` → `v2`, `1.9` → `1.10`, `beta` → `beta-2`.
fn next_version(version: &str) -> String {
    let head = version.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = version.get(head.len()..).unwrap_or_default();
    match digits.parse::<u64>().ok().and_then(|n| n.checked_add(1)) {
        Some(n) => format!("{head}{n}"),
        None => format!("{version}-2"),
    }
}

/// A patch id made of `key`: its letters, digits, `-`, `_` and `.`.
fn patch_id(key: &str) -> String {
    let id: String = key
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let id = id.trim_matches(|c| matches!(c, '-' | '_' | '.'));
    if id.is_empty() {
        "change".into()
    } else {
        id.into()
    }
}

/// How a schema comparison is reported.
struct SchemaCheck {
    /// "the state schema".
    subject: String,
    /// The class when the reader does not read the writer.
    on_break: Class,
    /// What follows, for the turns in flight.
    consequence: String,
    /// The fix.
    fix: String,
}

impl SchemaCheck {
    /// The finding when `reader` does not read `writer`.
    fn run(&self, reader: &Value, writer: &Value) -> Option<Finding> {
        let (class, what, fix) = match schema::reads(reader, writer) {
            SchemaCompat::Reads => return None,
            SchemaCompat::Breaks { at, why } => (
                self.on_break,
                format!(
                    "{} changed{}: {why}; {}",
                    self.subject,
                    at_pointer(&at),
                    self.consequence
                ),
                self.fix.clone(),
            ),
            SchemaCompat::Unknown { at, keyword } => (
                Class::Review,
                format!(
                    "{} changed in a way the check does not compare (`{keyword}`{})",
                    self.subject,
                    at_pointer(&at)
                ),
                format!(
                    "check by hand that the new schema reads what the old one allowed, or {}",
                    self.fix
                ),
            ),
        };
        Some(Finding {
            class,
            what,
            prefix: Vec::new(),
            at: None,
            fix,
        })
    }
}

/// " at `/properties/x`", or nothing at the root.
fn at_pointer(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!(" at `{at}`")
    }
}

/// The fix of a schema that no longer reads saved values.
fn schema_fix(old: &Manifest, new: &Manifest) -> String {
    format!(
        "keep the old values readable (defaults for new fields with `#[serde(default)]`, old names with `#[serde(alias = ..)]`, removed variants kept), {}",
        version_hint(old, new)
    )
}

/// The findings of the schemas: state, message (both ways), signals, step outputs.
fn schema_findings(old: &Manifest, new: &Manifest) -> Vec<Finding> {
    let (o, n) = (&old.schemas, &new.schemas);
    let fix = schema_fix(old, new);
    let check = |subject: &str, on_break: Class, consequence: &str, fix: &str| SchemaCheck {
        subject: subject.to_string(),
        on_break,
        consequence: consequence.to_string(),
        fix: fix.to_string(),
    };
    let mut out = Vec::new();
    let state = check(
        "the state schema",
        Class::Breaks,
        "new code cannot read the state saved by the turns in flight",
        &fix,
    );
    out.extend(state.run(&n.state, &o.state));
    let message = check(
        "the message schema",
        Class::Breaks,
        "new code cannot read the messages queued by old clients",
        &fix,
    );
    let forward = message.run(&n.message, &o.message);
    // Schemas the check cannot compare one way it cannot compare the other: one finding.
    let compared = forward.as_ref().is_none_or(|f| f.class != Class::Review);
    out.extend(forward);
    let back = format!(
        "instances left on `{}` cannot read the messages of new clients",
        old.version
    );
    let back_fix = format!(
        "send messages the old way until no instance of `{}` is left, or make the new fields optional",
        old.version
    );
    let backward = check("the message schema", Class::Review, &back, &back_fix);
    if compared {
        out.extend(backward.run(&o.message, &n.message));
    }
    out.extend(signal_findings(old, new, o, n));
    out.extend(step_findings(o, n, &fix));
    out
}

/// The findings of the signals' schemas.
fn signal_findings(old: &Manifest, new: &Manifest, o: &Schemas, n: &Schemas) -> Vec<Finding> {
    let mut out = Vec::new();
    for (name, old_schema) in &o.signals {
        let Some(new_schema) = n.signals.get(name) else {
            out.push(Finding {
                class: Class::Breaks,
                what: format!("signal `{name}` is no longer accepted: turns in flight may wait for it or have it queued"),
                prefix: Vec::new(),
                at: None,
                fix: format!("keep accepting signal `{name}` until no turn in flight waits for it, {}", version_hint(old, new)),
            });
            continue;
        };
        let check = SchemaCheck {
            subject: format!("the schema of signal `{name}`"),
            on_break: Class::Breaks,
            consequence: format!(
                "new code cannot read the `{name}` signals sent to turns in flight"
            ),
            fix: schema_fix(old, new),
        };
        out.extend(check.run(new_schema, old_schema));
    }
    out
}

/// The findings of the step outputs' schemas, for the keys in both.
fn step_findings(o: &Schemas, n: &Schemas, fix: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (key, old_schema) in &o.steps {
        let Some(new_schema) = n.steps.get(key) else {
            continue;
        };
        let check = SchemaCheck {
            subject: format!("the output schema of step `{key}`"),
            on_break: Class::Breaks,
            consequence: format!(
                "replay cannot read the output of `{key}` saved by turns in flight"
            ),
            fix: format!("{fix}; or give the step a new key inside `ctx.patched(..)`"),
        };
        out.extend(check.run(new_schema, old_schema));
    }
    out
}

/// The kinds each literal key of `grammar` is called with.
fn literal_kinds(grammar: &Node) -> BTreeMap<&str, BTreeSet<CallKind>> {
    let mut kinds: BTreeMap<&str, BTreeSet<CallKind>> = BTreeMap::new();
    for call in grammar::calls(grammar)
        .into_iter()
        .filter(|c| !c.is_pattern())
    {
        kinds
            .entry(call.key.as_str())
            .or_default()
            .insert(call.kind);
    }
    kinds
}

/// Literal keys of the old grammar the new one calls with another kind.
fn kind_findings(old: &Manifest, new: &Manifest) -> Vec<Finding> {
    let old_kinds = literal_kinds(&old.grammar);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for call in grammar::calls(&new.grammar) {
        let Some(kinds) = old_kinds.get(call.key.as_str()) else {
            continue;
        };
        if call.is_pattern() || kinds.contains(&call.kind) || !seen.insert(&call.key) {
            continue;
        }
        let was: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let was = was.join(" and ");
        let shortest = grammar::shortest_prefix(&old.grammar, SEARCH_LIMIT, |e| {
            e.key == call.key && e.kind != call.kind
        });
        out.push(Finding {
            class: Class::Breaks,
            what: format!(
                "key `{}` reused with another kind: a {was} in the old code, a {} in the new",
                call.key, call.kind
            ),
            prefix: match shortest {
                Search::Found(prefix) => describe_all(&prefix),
                Search::Exhausted | Search::GaveUp => Vec::new(),
            },
            at: known(&call.at),
            fix: format!(
                "give the {} a key of its own: a turn that saved {was} `{}` cannot replay a {} with it",
                call.kind, call.key, call.kind
            ),
        });
    }
    out
}

/// The entries described.
fn describe_all(prefix: &[Saved]) -> Vec<String> {
    prefix.iter().map(Saved::describe).collect()
}

/// The shortest saved prefix of the old grammar the new one rejects, explained; a finding for
/// review when the search gave up.
fn replay_finding(old: &Manifest, new: &Manifest) -> Option<Finding> {
    match grammar::first_rejected(&old.grammar, &new.grammar, SEARCH_LIMIT) {
        Search::Exhausted => None,
        Search::Found((prefix, d)) => Some(Divergent::new(old, new, &prefix, &d).finding()),
        Search::GaveUp => Some(Finding {
            class: Class::Review,
            what: format!(
                "the old code has too many ways to be in flight: the check followed {SEARCH_LIMIT} of them, shortest first, and found no break"
            ),
            prefix: Vec::new(),
            at: None,
            fix: "check by hand that the change keeps the calls that turns in flight saved, or guard it with `ctx.patched(..)`".into(),
        }),
    }
}

/// What a divergence looks like.
enum Shape<'g> {
    /// The saved entry is the marker of a patch the new code no longer has.
    RemovedPatch(String),
    /// The new code calls another key of the same kind there, a key the old code did not use.
    Renamed(&'g Call),
    /// The new code calls a new key there, and the saved entry later.
    Inserted(&'g Call),
    /// The new code no longer makes the saved call anywhere.
    Removed,
    /// Anything else (a reorder, a kind or signal change, …).
    Other,
}

/// A rejected prefix and what is known around it.
struct Divergent<'a, 'g> {
    /// The old manifest.
    old: &'a Manifest,
    /// The new manifest.
    new: &'g Manifest,
    /// The rejected prefix.
    prefix: &'a [Saved],
    /// Where it diverges.
    d: &'a Divergence<'g>,
}

impl<'a, 'g> Divergent<'a, 'g> {
    /// The divergence `d` of `prefix`.
    fn new(
        old: &'a Manifest,
        new: &'g Manifest,
        prefix: &'a [Saved],
        d: &'a Divergence<'g>,
    ) -> Self {
        Divergent {
            old,
            new,
            prefix,
            d,
        }
    }

    /// The finding.
    fn finding(&self) -> Finding {
        let (what, fix) = match self.shape() {
            Shape::RemovedPatch(id) => self.removed_patch(&id),
            Shape::Renamed(call) => self.renamed(call),
            Shape::Inserted(call) => self.inserted(call),
            Shape::Removed => self.removed(),
            Shape::Other => self.other(),
        };
        Finding {
            class: Class::NeedsPatch,
            what,
            prefix: describe_all(self.prefix),
            at: self.at(),
            fix,
        }
    }

    /// What the divergence looks like.
    fn shape(&self) -> Shape<'g> {
        let saved = &self.d.saved;
        if let Some(id) = self.removed_patch_id() {
            return Shape::RemovedPatch(id);
        }
        let new_calls = grammar::calls(&self.new.grammar);
        let old_calls = grammar::calls(&self.old.grammar);
        let key_in = |calls: &[&Call], key: &str| calls.iter().any(|c| c.key == key);
        let saved_key_gone = !new_calls
            .iter()
            .any(|c| grammar::key_matches(&c.key, &saved.key));
        let fresh = |c: &&&'g Call| !key_in(&old_calls, &c.key);
        if saved_key_gone {
            let renamed = self
                .d
                .expected
                .iter()
                .filter(fresh)
                .find(|c| c.kind == saved.kind);
            return renamed.map_or(Shape::Removed, |c| Shape::Renamed(c));
        }
        let saved_later = new_calls.iter().any(|c| grammar::call_matches(c, saved));
        match self.d.expected.iter().find(fresh) {
            Some(call) if saved_later => Shape::Inserted(call),
            _ => Shape::Other,
        }
    }

    /// The id of a patch removed from the new code whose marker is in the prefix.
    fn removed_patch_id(&self) -> Option<String> {
        let ids = |m: &Manifest| -> BTreeSet<String> {
            let mut ids: BTreeSet<String> = m.patches.iter().cloned().collect();
            ids.extend(grammar::patch_ids(&m.grammar).into_iter().map(String::from));
            ids
        };
        let (old_ids, new_ids) = (ids(self.old), ids(self.new));
        self.prefix
            .iter()
            .filter_map(Saved::marker_id)
            .find(|id| old_ids.contains(*id) && !new_ids.contains(*id))
            .map(String::from)
    }

    /// Where the new code diverges: the first call (or patch) it expects there, else the last
    /// call it matched.
    fn at(&self) -> Option<String> {
        let expected = self.d.expected.iter().map(|c| c.at.as_str());
        let markers = self.d.markers.iter().map(|p| p.at.as_str());
        if let Some(at) = expected.chain(markers).find(|at| !at.is_empty()) {
            return known(at);
        }
        let last = self
            .d
            .matched
            .checked_sub(1)
            .and_then(|i| self.prefix.get(i))?;
        let call = grammar::calls(&self.new.grammar)
            .into_iter()
            .find(|c| grammar::call_matches(c, last))?;
        known(&call.at)
    }

    /// "at position 3 (after step `a`)".
    fn position(&self) -> String {
        let n = self.d.matched + 1;
        match self
            .d
            .matched
            .checked_sub(1)
            .and_then(|i| self.prefix.get(i))
        {
            Some(before) => format!("at position {n} (after {})", before.describe()),
            None => format!("at position {n} (the first call)"),
        }
    }

    /// What the new code does there: "calls step `x` or sleep `y`".
    fn expected(&self) -> String {
        let calls = self.d.expected.iter().map(|c| describe_call(c));
        let markers = self
            .d
            .markers
            .iter()
            .map(|p| format!("the marker of patch `{}`", p.id));
        let all: Vec<String> = calls.chain(markers).collect();
        if all.is_empty() {
            "makes no more durable calls".into()
        } else {
            format!("calls {}", all.join(" or "))
        }
    }

    /// The general fix: a patch around the change, or a version.
    fn patch_fix(&self, id: &str) -> String {
        format!(
            "wrap the change in `if ctx.patched(\"{}\") {{ .. }} else {{ .. }}` keeping the old calls in the else branch, {}",
            patch_id(id),
            version_hint(self.old, self.new)
        )
    }

    /// A removed patch.
    fn removed_patch(&self, id: &str) -> (String, String) {
        let what = format!(
            "patch `{id}` was removed while turns may depend on it: turns in flight saved {} {} where the new code {}",
            self.d.saved.describe(),
            self.position(),
            self.expected()
        );
        let fix = format!(
            "keep `if ctx.patched(\"{id}\") {{ .. }} else {{ .. }}` until no turn that reached it on older code, or saved its marker, is in flight, {}",
            version_hint(self.old, self.new)
        );
        (what, fix)
    }

    /// A renamed key.
    fn renamed(&self, call: &Call) -> (String, String) {
        let old = &self.d.saved.key;
        let what = format!(
            "the key `{old}` was renamed to `{}` ({}): turns in flight saved `{old}` {}",
            call.key,
            call.kind,
            self.position()
        );
        let keep = if old.contains(crate::WILDCARD) {
            format!("keep computing the keys as `{old}` in the loop")
        } else {
            let on = known(&call.at)
                .map(|at| format!(" on the call at {at}"))
                .unwrap_or_default();
            format!("keep the key `{old}` with `.key(\"{old}\")`{on}")
        };
        (what, format!("{keep}, or {}", self.patch_fix(&call.key)))
    }

    /// A call inserted before a saved one.
    fn inserted(&self, call: &Call) -> (String, String) {
        let what = format!(
            "{} was inserted before {}, which turns in flight saved {}",
            describe_call(call),
            self.d.saved.describe(),
            self.position()
        );
        let fix = format!(
            "wrap the new call in `if ctx.patched(\"{}\") {{ .. }}` so that turns saved before it skip it, {}",
            patch_id(&call.key),
            version_hint(self.old, self.new)
        );
        (what, fix)
    }

    /// A saved call the new code no longer makes.
    fn removed(&self) -> (String, String) {
        let saved = self.d.saved.describe();
        let what = format!(
            "{saved} was removed: turns in flight saved it {}, where the new code {}",
            self.position(),
            self.expected()
        );
        let fix = format!(
            "keep the call for the turns saved before the change: `if ctx.patched(\"{}\") {{ <new code> }} else {{ <the old call> }}`, {}",
            patch_id(&format!("remove-{}", self.d.saved.key)),
            version_hint(self.old, self.new)
        );
        (what, fix)
    }

    /// Any other divergence.
    fn other(&self) -> (String, String) {
        let what = format!(
            "the durable calls changed: turns in flight saved {} {}, where the new code {}",
            self.d.saved.describe(),
            self.position(),
            self.expected()
        );
        let id = self.d.expected.first().map_or("change", |c| c.key.as_str());
        (what, self.patch_fix(id))
    }
}

/// The alternatives of `grammar`, in pre-order.
fn alts(grammar: &Node) -> Vec<&Alt> {
    let mut out = Vec::new();
    grammar::visit(grammar, &mut |node| {
        if let Node::Alt(alt) = node {
            out.push(alt);
        }
    });
    out
}

/// The first literal call in the arms of `alt`, which names it across versions.
fn anchor(alt: &Alt) -> Option<&Call> {
    alt.arms
        .iter()
        .flat_map(grammar::calls)
        .find(|c| !c.is_pattern())
}

/// The old and new alternatives paired: by their anchor's key, and those without one by their
/// position among them.
fn pair_alts<'g>(old: &[&'g Alt], new: &[&'g Alt]) -> Vec<(&'g Alt, &'g Alt)> {
    let mut used = vec![false; new.len()];
    let mut pairs = Vec::new();
    for o in old {
        let Some(key) = anchor(o).map(|c| &c.key) else {
            continue;
        };
        let found = new.iter().enumerate().find(|(i, n)| {
            !used.get(*i).copied().unwrap_or(true) && anchor(n).is_some_and(|c| &c.key == key)
        });
        if let Some((i, n)) = found {
            if let Some(flag) = used.get_mut(i) {
                *flag = true;
            }
            pairs.push((*o, *n));
        }
    }
    let unanchored = |alts: &[&'g Alt]| -> Vec<&'g Alt> {
        alts.iter()
            .copied()
            .filter(|a| anchor(a).is_none())
            .collect()
    };
    pairs.extend(unanchored(old).into_iter().zip(unanchored(new)));
    pairs
}

/// The alternatives whose condition changed.
fn condition_findings(old: &Manifest, new: &Manifest) -> Vec<Finding> {
    let (old_alts, new_alts) = (alts(&old.grammar), alts(&new.grammar));
    let mut unnamed = 0;
    let mut out = Vec::new();
    for (o, n) in pair_alts(&old_alts, &new_alts) {
        let named = anchor(n).map(describe_call);
        unnamed += usize::from(named.is_none());
        if o.cond == n.cond {
            continue;
        }
        let which = named.map_or_else(
            || format!("branch number {unnamed} without a literal key in its arms"),
            |call| format!("branch that leads to {call}"),
        );
        out.push(Finding {
            class: Class::Review,
            what: format!("the condition of the {which} changed"),
            prefix: Vec::new(),
            at: n.arms.iter().flat_map(grammar::calls).find_map(|c| known(&c.at)),
            fix: "check that a turn in flight takes the same arm on replay as when it saved its calls (a condition on the state, the message or step outputs does; one on the clock, the environment or configuration may not); if not, guard the change with `ctx.patched(..)`".into(),
        });
    }
    out
}

/// The literal calls of both grammars whose input fingerprint changed.
fn input_findings(old: &Manifest, new: &Manifest) -> Vec<Finding> {
    let literal = |m: &'_ Manifest| -> BTreeMap<String, Vec<Call>> {
        let mut by_key: BTreeMap<String, Vec<Call>> = BTreeMap::new();
        for call in grammar::calls(&m.grammar)
            .into_iter()
            .filter(|c| !c.is_pattern())
        {
            by_key
                .entry(call.key.clone())
                .or_default()
                .push(call.clone());
        }
        by_key
    };
    let (old_calls, new_calls) = (literal(old), literal(new));
    let mut out = Vec::new();
    for (key, olds) in &old_calls {
        let Some(news) = new_calls.get(key) else {
            continue;
        };
        let changed = olds
            .iter()
            .zip(news)
            .find(|(o, n)| o.kind == n.kind && o.input != n.input);
        if let Some((_, n)) = changed {
            out.push(Finding {
                class: Class::Review,
                what: format!("the input of {} changed", describe_call(n)),
                prefix: Vec::new(),
                at: known(&n.at),
                fix: "turns in flight keep what they saved with the old input (replay does not run the call again); if they must not, give the call a new key inside `ctx.patched(..)`".into(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Patch;
    use serde_json::json;

    fn version(name: &str, v: &str, grammar: Node) -> Manifest {
        Manifest::new(name, v, grammar)
    }

    #[test]
    fn a_set_is_compared_in_place_and_along_each_new_version() {
        let v1 = version("order", "v1", seq(vec![step("a", 1), sleep("nap", 2)]));
        let v1_changed = version(
            "order",
            "v1",
            seq(vec![step("a", 1), step("x", 2), sleep("nap", 3)]),
        );
        let v2 = version(
            "order",
            "v2",
            seq(vec![step("a", 1), sleep("nap", 2), step("b", 3)]),
        );
        let other = version("refund", "v1", seq(vec![step("r", 1)]));
        let report = compare_sets(std::slice::from_ref(&v1), &[v1_changed, v2, other]);
        let pairs: Vec<(&str, &str, Class)> = report
            .comparisons
            .iter()
            .map(|c| (c.from.as_str(), c.to.as_str(), c.class))
            .collect();
        assert_eq!(
            pairs,
            [("v1", "v1", Class::NeedsPatch), ("v1", "v2", Class::Safe)]
        );
        assert_eq!(report.class, Class::NeedsPatch);
        let text = report.to_text();
        assert!(text.contains("order v1 → v1: needs-patch"), "{text}");
        assert!(text.ends_with("2 comparisons: needs-patch\n"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["class"], "needs-patch");
        assert_eq!(json["comparisons"][1]["class"], "safe");
    }

    #[test]
    fn a_version_dropped_without_a_successor_is_for_review() {
        let v1 = version("order", "v1", seq(vec![step("a", 1)]));
        let report = compare_sets(std::slice::from_ref(&v1), &[]);
        assert_eq!(report.class, Class::Review);
        assert!(report.comparisons[0].findings[0]
            .what
            .contains("no code to run on"));
        assert_eq!(compare_sets(&[], &[v1]).class, Class::Safe);
    }

    fn at(line: u32) -> String {
        format!("src/order.rs:{line}")
    }

    fn step(key: &str, line: u32) -> Node {
        Node::Call(Call::new(CallKind::Step, key, at(line)))
    }

    fn sleep(key: &str, line: u32) -> Node {
        Node::Call(Call::new(CallKind::Sleep, key, at(line)))
    }

    fn seq(items: Vec<Node>) -> Node {
        Node::Seq(items)
    }

    fn alt(cond: &str, arms: Vec<Node>) -> Node {
        Node::Alt(Alt {
            cond: cond.into(),
            arms,
        })
    }

    fn patch(id: &str, new: Node, old: Node) -> Node {
        Node::Patch(Patch {
            id: id.into(),
            new: Box::new(new),
            old: Box::new(old),
            at: at(20),
        })
    }

    fn manifest(grammar: Node) -> Manifest {
        Manifest::new("order", "v1", grammar)
    }

    fn base() -> Node {
        seq(vec![
            step("a", 1),
            step("charge", 2),
            sleep("nap", 3),
            step("ship", 4),
        ])
    }

    /// The comparison, with its single finding of `class`.
    fn one(old: Node, new: Node, class: Class) -> Finding {
        let c = compare(&manifest(old), &manifest(new));
        assert_eq!(c.class, class, "{}", render_text(&c));
        let found: Vec<&Finding> = c.findings.iter().filter(|f| f.class == class).collect();
        assert_eq!(found.len(), 1, "{}", render_text(&c));
        found[0].clone()
    }

    fn safe(old: Node, new: Node) {
        let c = compare(&manifest(old), &manifest(new));
        assert_eq!(c.class, Class::Safe, "{}", render_text(&c));
        assert!(c.findings.is_empty());
    }

    #[test]
    fn classes_are_ordered_and_named() {
        assert!(Class::Safe < Class::Review && Class::Review < Class::NeedsPatch);
        assert!(Class::NeedsPatch < Class::Breaks);
        let all = [Class::Safe, Class::Review, Class::NeedsPatch, Class::Breaks];
        let codes: Vec<i32> = all.iter().map(|c| c.exit_code()).collect();
        assert_eq!(codes, [0, 1, 2, 3]);
        for class in all {
            assert_eq!(serde_json::to_value(class).unwrap(), json!(class.as_str()));
        }
    }

    #[test]
    fn identical_is_safe() {
        safe(base(), base());
    }

    #[test]
    fn locations_and_grouping_are_safe() {
        let moved = seq(vec![
            seq(vec![step("a", 11), step("charge", 12)]),
            sleep("nap", 13),
            step("ship", 14),
        ]);
        safe(base(), moved);
    }

    #[test]
    fn appending_after_every_saved_prefix_is_safe() {
        let mut more = vec![base()];
        more.push(step("notify", 5));
        safe(base(), seq(more));
    }

    #[test]
    fn inserting_before_a_saved_step_needs_a_patch() {
        let new = seq(vec![
            step("a", 1),
            step("reserve", 2),
            step("charge", 3),
            sleep("nap", 4),
        ]);
        let f = one(base(), new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`", "step `charge`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:2"));
        assert!(
            f.what
                .contains("step `reserve` was inserted before step `charge`"),
            "{}",
            f.what
        );
        assert!(f.fix.contains("ctx.patched(\"reserve\")"), "{}", f.fix);
        assert!(f.fix.contains("version = \"v2\""), "{}", f.fix);
    }

    #[test]
    fn inserting_at_the_start_needs_a_patch() {
        let new = seq(vec![step("hello", 7), base()]);
        let f = one(base(), new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:7"));
    }

    #[test]
    fn inserting_between_a_step_and_a_sleep_needs_a_patch() {
        let new = seq(vec![
            step("a", 1),
            step("charge", 2),
            step("log", 3),
            sleep("nap", 4),
        ]);
        let f = one(base(), new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`", "step `charge`", "sleep `nap`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:3"));
        assert!(f.fix.contains("ctx.patched(\"log\")"), "{}", f.fix);
    }

    #[test]
    fn renaming_needs_a_patch_or_the_old_key() {
        let new = seq(vec![
            step("a", 1),
            step("charge-card", 22),
            sleep("nap", 3),
            step("ship", 4),
        ]);
        let f = one(base(), new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`", "step `charge`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:22"));
        assert!(
            f.what.contains("`charge` was renamed to `charge-card`"),
            "{}",
            f.what
        );
        assert!(
            f.fix.starts_with(
                "keep the key `charge` with `.key(\"charge\")` on the call at src/order.rs:22"
            ),
            "{}",
            f.fix
        );
    }

    #[test]
    fn reordering_needs_a_patch() {
        let new = seq(vec![
            step("charge", 2),
            step("a", 1),
            sleep("nap", 3),
            step("ship", 4),
        ]);
        let f = one(base(), new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:2"));
        assert!(
            f.what.contains("saved step `a` at position 1"),
            "{}",
            f.what
        );
        assert!(f.fix.contains("ctx.patched(\"charge\")"), "{}", f.fix);
    }

    #[test]
    fn removing_a_saved_call_needs_a_patch() {
        let new = seq(vec![step("a", 1), sleep("nap", 3), step("ship", 4)]);
        let f = one(base(), new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`", "step `charge`"]);
        assert!(
            f.what.starts_with("step `charge` was removed"),
            "{}",
            f.what
        );
        assert_eq!(f.at.as_deref(), Some("src/order.rs:3"));
    }

    #[test]
    fn changing_a_kind_breaks() {
        let new = seq(vec![
            step("a", 1),
            sleep("charge", 9),
            sleep("nap", 3),
            step("ship", 4),
        ]);
        let c = compare(&manifest(base()), &manifest(new));
        assert_eq!(c.class, Class::Breaks);
        let f = &c.findings[0];
        assert_eq!(f.class, Class::Breaks);
        assert!(
            f.what.starts_with("key `charge` reused with another kind"),
            "{}",
            f.what
        );
        assert_eq!(f.prefix, ["step `a`", "step `charge`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:9"));
        // The replay finding is there too.
        assert!(c.findings.iter().any(|f| f.class == Class::NeedsPatch));
    }

    #[test]
    fn a_change_after_many_branches_is_found() {
        let branches = |last: &str| {
            let mut items: Vec<Node> = (0..20)
                .map(|i| alt("c", (0..3).map(|j| step(&format!("k{i}-{j}"), 5)).collect()))
                .collect();
            items.push(step(last, 30));
            seq(items)
        };
        let f = one(branches("end"), branches("fin"), Class::NeedsPatch);
        assert_eq!(f.prefix.len(), 21);
        assert_eq!(f.prefix.last().map(String::as_str), Some("step `end`"));
        assert_eq!(f.at.as_deref(), Some("src/order.rs:30"));
    }

    #[test]
    fn a_new_if_arm_is_safe() {
        let old = seq(vec![
            step("a", 1),
            alt("c", vec![step("b", 2), seq(vec![])]),
            sleep("nap", 3),
        ]);
        let new = seq(vec![
            step("a", 1),
            alt("c", vec![step("b", 2), step("x", 5), seq(vec![])]),
            sleep("nap", 3),
        ]);
        safe(old, new);
    }

    #[test]
    fn changing_a_loop_key_pattern_needs_a_patch() {
        let looped = |key: &str| Node::Loop(Box::new(step(key, 6)));
        let old = seq(vec![step("a", 1), looped("item-*"), sleep("nap", 7)]);
        let new = seq(vec![step("a", 1), looped("row-*"), sleep("nap", 7)]);
        let f = one(old, new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`", "step `item-*`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:6"));
        assert!(
            f.what.contains("`item-*` was renamed to `row-*`"),
            "{}",
            f.what
        );
        assert!(
            f.fix.starts_with("keep computing the keys as `item-*`"),
            "{}",
            f.fix
        );
    }

    #[test]
    fn a_parallel_member_added_in_the_middle_needs_a_patch() {
        let group = |members: Vec<Node>| seq(vec![Node::Parallel(members), sleep("nap", 9)]);
        let old = group(vec![step("a", 1), step("c", 3)]);
        let new = group(vec![step("a", 1), step("b", 2), step("c", 3)]);
        let f = one(old, new, Class::NeedsPatch);
        assert_eq!(f.prefix, ["step `a`", "step `c`"]);
        assert_eq!(f.at.as_deref(), Some("src/order.rs:2"));
        assert!(
            f.what.contains("step `b` was inserted before step `c`"),
            "{}",
            f.what
        );
    }

    #[test]
    fn adding_a_patch_is_safe() {
        let new = seq(vec![
            step("a", 1),
            patch(
                "reserve-first",
                seq(vec![step("reserve", 5), step("charge", 2)]),
                step("charge", 2),
            ),
            sleep("nap", 3),
            step("ship", 4),
        ]);
        let mut m = manifest(new);
        m.patches = vec!["reserve-first".into()];
        let c = compare(&manifest(base()), &m);
        assert_eq!(c.class, Class::Safe, "{}", render_text(&c));
    }

    #[test]
    fn removing_a_patch_needs_a_patch_and_names_it() {
        let patched = seq(vec![
            step("a", 1),
            patch("p", step("new", 5), step("old", 6)),
            sleep("nap", 3),
        ]);
        let new = seq(vec![step("a", 1), step("new", 5), sleep("nap", 3)]);
        let mut old = manifest(patched);
        old.patches = vec!["p".into()];
        let c = compare(&old, &manifest(new));
        assert_eq!(c.class, Class::NeedsPatch);
        let f = &c.findings[0];
        assert_eq!(f.prefix, ["step `a`", "step `patched.p`"]);
        assert!(
            f.what
                .starts_with("patch `p` was removed while turns may depend on it"),
            "{}",
            f.what
        );
        assert_eq!(f.at.as_deref(), Some("src/order.rs:5"));
        assert!(f.fix.contains("ctx.patched(\"p\")"), "{}", f.fix);
    }

    #[test]
    fn a_changed_condition_is_for_review() {
        let with = |cond: &str| {
            seq(vec![
                step("a", 1),
                alt(cond, vec![step("b", 2), seq(vec![])]),
            ])
        };
        let f = one(with("c1"), with("c2"), Class::Review);
        assert_eq!(
            f.what,
            "the condition of the branch that leads to step `b` changed"
        );
        assert_eq!(f.at.as_deref(), Some("src/order.rs:2"));
        assert!(f.prefix.is_empty());
        // Moving the branch keeps it paired by its key.
        let moved = seq(vec![
            alt("c1", vec![step("b", 2), seq(vec![])]),
            step("a", 1),
        ]);
        let c = compare(&manifest(with("c1")), &manifest(moved));
        assert!(c.findings.iter().all(|f| f.class != Class::Review));
        // Branches without literal keys pair by position.
        let bare = |cond: &str| {
            alt(
                cond,
                vec![Node::Loop(Box::new(step("i-*", 8))), seq(vec![])],
            )
        };
        let f = one(bare("x"), bare("y"), Class::Review);
        assert!(
            f.what.contains("branch number 1 without a literal key"),
            "{}",
            f.what
        );
    }

    #[test]
    fn a_changed_input_is_for_review() {
        let with = |input: &str| {
            let charge = Call::new(CallKind::Step, "charge", at(2)).input(input);
            seq(vec![step("a", 1), Node::Call(charge)])
        };
        let f = one(with("f1"), with("f2"), Class::Review);
        assert_eq!(f.what, "the input of step `charge` changed");
        assert_eq!(f.at.as_deref(), Some("src/order.rs:2"));
    }

    #[test]
    fn equal_schemas_are_unaffected() {
        let schemas = |m: &mut Manifest| {
            m.schemas.state = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
            m.schemas.message = json!({"type": "string"});
            m.schemas
                .signals
                .insert("approval".into(), json!({"type": "boolean"}));
            m.schemas
                .steps
                .insert("charge".into(), json!({"type": "number"}));
        };
        let (mut old, mut new) = (manifest(base()), manifest(base()));
        schemas(&mut old);
        schemas(&mut new);
        assert_eq!(compare(&old, &new).class, Class::Safe);
        // A signal no longer accepted breaks, whatever its schema.
        new.schemas.signals.clear();
        let c = compare(&old, &new);
        assert_eq!(c.class, Class::Breaks);
        assert!(c.findings[0]
            .what
            .starts_with("signal `approval` is no longer accepted"));
        assert!(c.findings[0].prefix.is_empty());
    }

    #[test]
    fn reports_as_text_and_stable_json() {
        let new = seq(vec![step("reserve", 9), base()]);
        let c = compare(&manifest(base()), &Manifest::new("order", "v2", new));
        let text = render_text(&c);
        assert!(text.starts_with("order v1 → v2: needs-patch\n"), "{text}");
        assert!(text.contains("    saved prefix: step `a`\n"), "{text}");
        assert!(text.contains("    at: src/order.rs:9\n"), "{text}");
        assert!(
            text.contains("or keep `v1` running for its turns in flight"),
            "{text}"
        );
        let json = c.to_json();
        assert_eq!(json, c.to_json());
        let back: Comparison = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert!(json.contains("\"class\": \"needs-patch\""), "{json}");
        let safe = compare(&manifest(base()), &manifest(base()));
        assert_eq!(
            render_text(&safe),
            "order v1 → v1: safe\n  nothing affects the turns in flight\n"
        );
    }

    #[test]
    fn suggested_versions_and_patch_ids() {
        assert_eq!(next_version("v1"), "v2");
        assert_eq!(next_version("1.9"), "1.10");
        assert_eq!(next_version("beta"), "beta-2");
        assert_eq!(
            next_version("v99999999999999999999999"),
            "v99999999999999999999999-2"
        );
        assert_eq!(patch_id("item-*"), "item");
        assert_eq!(patch_id("*"), "change");
    }
}
