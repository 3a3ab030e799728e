//! The verdict on moving one instance to another version of its workflow: pure, over the
//! instance's record, its settled head turn and the registered replay manifests. The live
//! check (`upgrade.rs`) asks it of every instance; an upgrade asks it again inside each
//! instance's conditional commit.
//!
//! It reads what replay compares and nothing else: the keys, kinds and order of the head's
//! saved steps (with the signal names of its waits and buffered signals), the instance's
//! version and status, and the manifests' grammars and JSON Schemas. No payload value (state,
//! message, step output, signal value) is read.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::manifest::grammar::{self, Acceptance, Divergence, Saved};
use crate::manifest::schema::{self, SchemaCompat};
use crate::manifest::{CallKind, Manifest};
use crate::protocol::*;
use crate::store::{InstanceRecord, TurnRecord};

/// The registered manifests of one workflow type, by version.
pub(super) type Manifests = Arc<HashMap<String, Manifest>>;

/// What the check found on one instance.
#[derive(Clone, Debug)]
pub(super) struct Judged {
    /// The verdict.
    pub(super) verdict: Verdict,
    /// The head turn whose saved steps were checked, when one is in flight or suspended.
    pub(super) turn: Option<u64>,
    /// How many steps that turn saved.
    pub(super) saved_steps: Option<u32>,
    /// Why it is pinned.
    pub(super) reason: Option<CompatReason>,
    /// The worker holding the head under a lease now, and until when.
    pub(super) held: Option<(String, Millis)>,
    /// Whether the head is suspended (moving it resumes it).
    pub(super) suspended: bool,
}

impl Judged {
    fn movable(verdict: Verdict) -> Self {
        Judged {
            verdict,
            turn: None,
            saved_steps: None,
            reason: None,
            held: None,
            suspended: false,
        }
    }

    fn pinned(reason: CompatReason) -> Self {
        Judged {
            reason: Some(reason),
            ..Judged::movable(Verdict::Pinned)
        }
    }

    /// The words a reader of the live check needs beside the verdict: a head held by a worker
    /// now, which an upgrade waits for.
    pub(super) fn note(&self) -> Option<String> {
        let (worker, until) = self.held.as_ref()?;
        let turn = self.turn.unwrap_or_default();
        Some(format!(
            "turn {turn} is held by worker `{worker}` under a lease (until {until} ms): an \
             upgrade refuses it, as retryable, until that attempt ends"
        ))
    }

    /// The entry of the live check's answer for `inst`.
    pub(super) fn entry(self, inst: &InstanceRecord, status: InstanceStatus) -> InstanceCompat {
        InstanceCompat {
            workflow_id: inst.id.clone(),
            version: inst.version.clone(),
            status,
            verdict: self.verdict,
            turn: self.turn,
            saved_steps: self.saved_steps,
            note: self.note(),
            reason: self.reason,
        }
    }
}

/// The saved steps of a turn as replay compares them: key, kind and signal name.
pub(super) fn saved_prefix(turn: &TurnRecord) -> Vec<Saved> {
    turn.steps
        .iter()
        .map(|s| Saved {
            key: s.key.clone(),
            kind: match s.kind {
                CheckpointKind::Step => CallKind::Step,
                CheckpointKind::Sleep => CallKind::Sleep,
                CheckpointKind::Signal => CallKind::Signal,
            },
            signal: s.signal_name.clone(),
        })
        .collect()
}

/// Judges instances of one workflow type against one target version, remembering what it
/// worked out for a version or a saved prefix so that thousands of instances cost little more
/// than their reads.
pub(super) struct Judge {
    workflow_type: String,
    to_version: String,
    manifests: Manifests,
    /// Per source version: whether the target's state and message schemas read its own.
    versions: HashMap<String, Option<CompatReason>>,
    /// Per saved prefix: whether the target grammar accepts it.
    prefixes: HashMap<Vec<Saved>, Option<CompatReason>>,
    /// Per (source version, part, key): whether the target's schema of a step's output or a
    /// signal reads the source's.
    parts: HashMap<(String, PartKind, String), Option<CompatReason>>,
}

/// A part of a turn whose values a new version decodes on replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum PartKind {
    Step,
    Signal,
}

impl Judge {
    /// A judge of `workflow_type`'s instances against `to_version`, with the type's manifests.
    pub(super) fn new(workflow_type: &str, to_version: &str, manifests: Manifests) -> Self {
        Judge {
            workflow_type: workflow_type.to_owned(),
            to_version: to_version.to_owned(),
            manifests,
            versions: HashMap::new(),
            prefixes: HashMap::new(),
            parts: HashMap::new(),
        }
    }

    /// The workflow type it judges.
    pub(super) fn workflow_type(&self) -> &str {
        &self.workflow_type
    }

    /// The verdict on moving `inst` (of this judge's type, on another version than the
    /// target) whose settled head is `head` (`None`: no unfinished turn, or the head was not
    /// loaded because none is pending).
    pub(super) fn judge(&mut self, inst: &InstanceRecord, head: Option<&TurnRecord>) -> Judged {
        if let Some(reason) = self.missing_manifest(&inst.version) {
            return Judged::pinned(reason);
        }
        if let Some(reason) = self.version_schemas(&inst.version) {
            return Judged::pinned(reason);
        }
        let Some(head) = head else {
            return Judged::movable(Verdict::Upgradable);
        };
        let (verdict, held) = match head.status {
            TurnStatus::Queued if head.steps.is_empty() => {
                return Judged::movable(Verdict::Upgradable)
            }
            TurnStatus::Running => {
                let worker = head.worker.clone().unwrap_or_else(|| "?".into());
                let until = head.deadline_ms.unwrap_or_default();
                (Verdict::UpgradableAfterTurn, Some((worker, until)))
            }
            TurnStatus::Queued | TurnStatus::Waiting | TurnStatus::Failed => {
                (Verdict::UpgradableAfterTurn, None)
            }
            TurnStatus::Suspended => (Verdict::Resumable, None),
            TurnStatus::Completed | TurnStatus::Cancelled | TurnStatus::Unknown => {
                return Judged::pinned(CompatReason::new(
                    ReasonCode::UnknownStatus,
                    format!(
                        "its head turn {} is {}, which this check cannot judge; read the \
                         instance and check again",
                        head.number, head.status
                    ),
                ));
            }
        };
        let prefix = saved_prefix(head);
        let judged = Judged {
            verdict,
            turn: Some(head.number),
            saved_steps: Some(prefix.len() as u32),
            reason: None,
            held,
            suspended: head.status == TurnStatus::Suspended,
        };
        match self.turn_reason(&inst.version, head, prefix) {
            Some(reason) => Judged {
                verdict: Verdict::Pinned,
                reason: Some(reason),
                ..judged
            },
            None => judged,
        }
    }

    /// Why the manifests cannot be compared: none registered for `version` or the target.
    fn missing_manifest(&self, version: &str) -> Option<CompatReason> {
        let t = &self.workflow_type;
        let message = if !self.manifests.contains_key(version) {
            format!(
                "no replay manifest is registered for `{t}` `{version}`, the instance's version: \
                 start a worker that runs `{t}` `{version}` (workers register each version's \
                 manifest when they start), then check again"
            )
        } else if !self.manifests.contains_key(&self.to_version) {
            format!(
                "no replay manifest is registered for the target `{t}` `{}`: start a worker \
                 that runs it (it registers the manifest), then check again",
                self.to_version
            )
        } else {
            return None;
        };
        Some(CompatReason::new(ReasonCode::NoManifest, message))
    }

    /// Whether the target's state and message schemas read `version`'s (worked out once per
    /// version).
    fn version_schemas(&mut self, version: &str) -> Option<CompatReason> {
        if let Some(known) = self.versions.get(version) {
            return known.clone();
        }
        let reason = match (
            self.manifests.get(version),
            self.manifests.get(&self.to_version),
        ) {
            (Some(from), Some(to)) => {
                let parts = [
                    ("state", &to.schemas.state, &from.schemas.state),
                    ("message", &to.schemas.message, &from.schemas.message),
                ];
                parts.into_iter().find_map(|(part, reader, writer)| {
                    self.schema_reason(version, part, reader, writer)
                })
            }
            _ => None,
        };
        self.versions.insert(version.to_owned(), reason.clone());
        reason
    }

    /// Why the turn in flight cannot go on on the target: its saved prefix rejected, or a
    /// saved step's output or a signal it waits for (or holds) no longer read.
    fn turn_reason(
        &mut self,
        version: &str,
        head: &TurnRecord,
        prefix: Vec<Saved>,
    ) -> Option<CompatReason> {
        let mut steps = BTreeSet::new();
        let mut signals = BTreeSet::new();
        for s in &prefix {
            match s.kind {
                CallKind::Step => steps.insert(s.key.clone()),
                CallKind::Signal => signals.insert(s.signal.clone().unwrap_or_default()),
                CallKind::Sleep => false,
            };
        }
        signals.extend(head.signals.iter().map(|s| s.name.clone()));
        if let Some(reason) = self.prefix_reason(head.number, prefix) {
            return Some(reason);
        }
        let parts = steps
            .into_iter()
            .map(|k| (PartKind::Step, k))
            .chain(signals.into_iter().map(|n| (PartKind::Signal, n)));
        for (kind, key) in parts {
            if let Some(reason) = self.part_reason(version, kind, key) {
                return Some(reason);
            }
        }
        None
    }

    /// Whether the target grammar accepts `prefix` (worked out once per prefix).
    fn prefix_reason(&mut self, turn: u64, prefix: Vec<Saved>) -> Option<CompatReason> {
        if let Some(known) = self.prefixes.get(&prefix) {
            return known.clone().map(|r| with_turn(r, turn));
        }
        let target = self.manifests.get(&self.to_version)?;
        let reason = match grammar::accepts(&target.grammar, &prefix) {
            Acceptance::Accepted => None,
            Acceptance::Rejected(d) => Some(rejected(&self.to_version, &prefix, &d)),
        };
        self.prefixes.insert(prefix, reason.clone());
        reason.map(|r| with_turn(r, turn))
    }

    /// Whether the target's schema of a step's output or a signal reads `version`'s, when
    /// both manifests have one (worked out once per version and key).
    fn part_reason(&mut self, version: &str, kind: PartKind, key: String) -> Option<CompatReason> {
        let slot = (version.to_owned(), kind, key);
        if let Some(known) = self.parts.get(&slot) {
            return known.clone();
        }
        let (from, to) = (
            self.manifests.get(version)?,
            self.manifests.get(&self.to_version)?,
        );
        let key = &slot.2;
        let (reader, writer, part) = match kind {
            PartKind::Step => (
                to.schemas.steps.get(key),
                from.schemas.steps.get(key),
                format!("step `{key}`"),
            ),
            PartKind::Signal => (
                to.schemas.signals.get(key),
                from.schemas.signals.get(key),
                format!("signal `{key}`"),
            ),
        };
        let reason = match (reader, writer) {
            (Some(reader), Some(writer)) => self.schema_reason(version, &part, reader, writer),
            _ => None,
        };
        self.parts.insert(slot, reason.clone());
        reason
    }

    /// Why the target's schema of `part` does not read (or is not shown to read) what
    /// `version` wrote.
    fn schema_reason(
        &self,
        version: &str,
        part: &str,
        reader: &Value,
        writer: &Value,
    ) -> Option<CompatReason> {
        let (t, to) = (&self.workflow_type, &self.to_version);
        let missing = match (reader.is_null(), writer.is_null()) {
            (true, _) => Some(to.as_str()),
            (_, true) => Some(version),
            _ => None,
        };
        if let Some(v) = missing {
            let mut r = CompatReason::new(
                ReasonCode::SchemaUnproven,
                format!(
                    "the {part} schema of `{t}` `{v}` is not known, so `{to}` is not shown to \
                     read the {part} `{version}` wrote; register the version's schemas (its \
                     worker does when it starts)"
                ),
            );
            r.part = Some(part.to_owned());
            return Some(r);
        }
        let (code, at, message) = match schema::reads(reader, writer) {
            SchemaCompat::Reads => return None,
            SchemaCompat::Breaks { at, why } => (
                ReasonCode::SchemaBreak,
                at.clone(),
                format!(
                    "the {part} schema of `{t}` `{to}` cannot read every {part} `{version}` \
                     wrote, at `{at}`: {why}; make `{to}` accept it (e.g. with a default), or \
                     keep the instance on `{version}`"
                ),
            ),
            SchemaCompat::Unknown { at, keyword } => (
                ReasonCode::SchemaUnproven,
                at.clone(),
                format!(
                    "the {part} schema of `{t}` `{to}` is not shown to read every {part} \
                     `{version}` wrote: keyword `{keyword}` at `{at}` is not modelled by the \
                     check, and counts as not proven; review it, or keep the instance on \
                     `{version}`"
                ),
            ),
        };
        let mut r = CompatReason::new(code, message);
        r.part = Some(part.to_owned());
        r.at = Some(at);
        Some(r)
    }
}

/// `reason` naming the turn it is about.
fn with_turn(mut reason: CompatReason, turn: u64) -> CompatReason {
    reason.message = format!("turn {turn} {}", reason.message);
    reason
}

/// The reason of a prefix the target grammar rejects: the saved prefix, the position, what
/// was saved there and what the target would call instead, with its `file:line`. It reads
/// "turn N " + this.
fn rejected(to_version: &str, prefix: &[Saved], d: &Divergence<'_>) -> CompatReason {
    let saved: Vec<String> = prefix.iter().map(Saved::describe).collect();
    let mut expected: Vec<String> = d
        .expected
        .iter()
        .map(|c| {
            let call = Saved::of_call(c).describe();
            if c.at.is_empty() {
                call
            } else {
                format!("{call} at {}", c.at)
            }
        })
        .collect();
    expected.extend(d.markers.iter().map(|p| {
        let marker = Saved::marker(&p.id).describe();
        if p.at.is_empty() {
            format!("{marker} (patch `{}`)", p.id)
        } else {
            format!("{marker} (patch `{}` at {})", p.id, p.at)
        }
    }));
    let instead = if expected.is_empty() {
        format!("`{to_version}` makes no further durable call there")
    } else {
        format!("`{to_version}` would call {} there", expected.join(" or "))
    };
    let message = format!(
        "saved [{}], which `{to_version}` does not replay: at position {} the turn saved {}, \
         but {instead}; keep the instance on its version until the turn ends, or deploy a \
         version that makes the saved calls (a patch keeps the old branch for turns saved \
         before it)",
        saved.join(", "),
        d.matched,
        d.saved.describe(),
    );
    let mut r = CompatReason::new(ReasonCode::PrefixRejected, message);
    r.saved = prefix.to_vec();
    r.position = Some(d.matched as u32);
    r.expected = expected;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Call, Node};
    use serde_json::json;

    fn manifest(version: &str, last: &str, state: Value) -> Manifest {
        let grammar = Node::Seq(vec![
            Node::Call(Call::new(CallKind::Step, "reserve", "src/order.rs:10")),
            Node::Call(Call::new(CallKind::Sleep, "settle", "src/order.rs:11")),
            Node::Call(Call::new(CallKind::Step, last, "src/order.rs:12")),
        ]);
        let mut m = Manifest::new("order", version, grammar);
        m.schemas.state = state;
        m.schemas.message = json!({"type": "integer"});
        m
    }

    fn judge(v2_state: Value) -> Judge {
        let state = json!({"type": "object", "properties": {"charged": {"type": "integer"}}});
        let manifests: HashMap<String, Manifest> = [
            ("v1".to_owned(), manifest("v1", "charge", state)),
            ("v2".to_owned(), manifest("v2", "charge_with_tax", v2_state)),
        ]
        .into();
        Judge::new("order", "v2", Arc::new(manifests))
    }

    fn record(version: &str) -> InstanceRecord {
        serde_json::from_value(json!({
            "ns": "default", "id": "order-1", "workflow_type": "order", "version": version,
            "state": {"charged": 1}, "lease_ms": 60000, "max_attempts": 3, "on_exhausted": "block",
            "paused": false, "created_at_ms": 1, "updated_at_ms": 1, "revision": 1,
            "next_turn": 2, "pending": [1], "completed_turns": 0, "history_through": 0,
            "history_pruned_through": 0, "due_at_ms": null, "epoch": "e"
        }))
        .unwrap()
    }

    fn turn(status: TurnStatus, keys: &[(&str, CheckpointKind)]) -> TurnRecord {
        let mut t = TurnRecord::queued(1, "m".into(), json!(5), None, 1, "e".into());
        t.status = status;
        t.steps = keys
            .iter()
            .map(|(k, kind)| StepCheckpoint {
                key: (*k).into(),
                kind: *kind,
                output: Value::Null,
                at_ms: 1,
                delay_ms: None,
                signal_name: None,
                wake_at_ms: None,
            })
            .collect();
        t
    }

    fn same_state() -> Value {
        json!({"type": "object", "properties": {"charged": {"type": "integer"}}})
    }

    #[test]
    fn idle_and_fresh_heads_are_upgradable() {
        let mut j = judge(same_state());
        let inst = record("v1");
        assert_eq!(j.judge(&inst, None).verdict, Verdict::Upgradable);
        let fresh = turn(TurnStatus::Queued, &[]);
        assert_eq!(j.judge(&inst, Some(&fresh)).verdict, Verdict::Upgradable);
    }

    #[test]
    fn a_turn_in_flight_is_judged_by_its_saved_prefix() {
        use CheckpointKind::{Sleep, Step};
        let mut j = judge(same_state());
        let inst = record("v1");
        let asleep = turn(TurnStatus::Waiting, &[("reserve", Step), ("settle", Sleep)]);
        let judged = j.judge(&inst, Some(&asleep));
        assert_eq!(judged.verdict, Verdict::UpgradableAfterTurn);
        assert_eq!((judged.turn, judged.saved_steps), (Some(1), Some(2)));
        let past = turn(
            TurnStatus::Failed,
            &[("reserve", Step), ("settle", Sleep), ("charge", Step)],
        );
        let judged = j.judge(&inst, Some(&past));
        assert_eq!(judged.verdict, Verdict::Pinned);
        let reason = judged.reason.unwrap();
        assert_eq!(reason.code, ReasonCode::PrefixRejected);
        assert_eq!(reason.position, Some(2));
        assert_eq!(
            reason.expected,
            ["step `charge_with_tax` at src/order.rs:12"]
        );
        assert!(
            reason.message.starts_with(
                "turn 1 saved [step `reserve`, sleep `settle`, step `charge`], which `v2` does \
                 not replay: at position 2 the turn saved step `charge`, but `v2` would call \
                 step `charge_with_tax` at src/order.rs:12 there"
            ),
            "{}",
            reason.message
        );
        let suspended = turn(TurnStatus::Suspended, &[("reserve", Step)]);
        let judged = j.judge(&inst, Some(&suspended));
        assert_eq!(judged.verdict, Verdict::Resumable);
        assert!(judged.suspended);
    }

    #[test]
    fn a_state_schema_that_does_not_read_pins_naming_part_and_pointer() {
        let v2 = json!({
            "type": "object",
            "properties": {"charged": {"type": "integer"}, "currency": {"type": "string"}},
            "required": ["currency"]
        });
        let mut j = judge(v2);
        let judged = j.judge(&record("v1"), None);
        assert_eq!(judged.verdict, Verdict::Pinned);
        let reason = judged.reason.unwrap();
        assert_eq!(reason.code, ReasonCode::SchemaBreak);
        assert_eq!(reason.part.as_deref(), Some("state"));
        assert_eq!(reason.at.as_deref(), Some("/currency"));
        assert!(
            reason.message.contains("state schema of `order` `v2`"),
            "{reason}"
        );
    }

    #[test]
    fn unknown_keywords_and_unknown_schemas_are_not_proven() {
        let v2 = json!({"type": "object", "properties": {"charged": {"type": "integer", "multipleOf": 2}}});
        let reason = judge(v2).judge(&record("v1"), None).reason.unwrap();
        assert_eq!(reason.code, ReasonCode::SchemaUnproven);
        assert_eq!(reason.at.as_deref(), Some("/charged"));
        let reason = judge(Value::Null)
            .judge(&record("v1"), None)
            .reason
            .unwrap();
        assert_eq!(reason.code, ReasonCode::SchemaUnproven);
        assert!(reason.message.contains("is not known"), "{reason}");
    }

    #[test]
    fn a_missing_manifest_pins_naming_the_version() {
        let mut j = judge(same_state());
        let reason = j.judge(&record("v0"), None).reason.unwrap();
        assert_eq!(reason.code, ReasonCode::NoManifest);
        assert!(reason.message.contains("`order` `v0`"), "{reason}");
        let mut j = Judge::new("order", "v3", j.manifests.clone());
        let reason = j.judge(&record("v1"), None).reason.unwrap();
        assert!(
            reason.message.contains("the target `order` `v3`"),
            "{reason}"
        );
    }
}
