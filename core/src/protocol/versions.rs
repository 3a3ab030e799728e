//! Moving instances to another version of their workflow (a turnwise extension of the wire):
//! the live compatibility check ([`LiveCompatQuery`] → [`LiveCompat`]) and the upgrade
//! ([`UpgradeRequest`] → [`UpgradeResponse`]). See `docs/versions.md`.
//!
//! Both read only what replay compares (the keys, kinds and order of a turn's saved steps) and
//! the replay manifests that workers register with their schema documents; neither reads a
//! payload value.

use serde::{Deserialize, Serialize};

use super::{InstanceStatus, Millis};
use crate::manifest::grammar::Saved;

/// `GET /v1/workflows/compat?workflow_type=&to_version=`: which instances of a workflow type
/// could move to `to_version` now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCompatQuery {
    /// The workflow type.
    pub workflow_type: String,
    /// The version the instances would move to.
    pub to_version: String,
}

/// What the live check says of one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No turn in flight, and the target's state and message schemas read the instance
    /// version's: it moves as it is.
    Upgradable,
    /// A turn is in flight (asleep, waiting for a signal, backing off, failed and waiting for
    /// an operator, or held by a worker), the target grammar accepts the steps it saved, and
    /// the schemas read: it moves, and the turn goes on on the new version.
    UpgradableAfterTurn,
    /// The head turn is suspended by a replay mismatch and the target grammar accepts its
    /// saved steps (schemas as above): moving it resumes the turn.
    Resumable,
    /// It cannot be shown to move safely; [`InstanceCompat::reason`] says why.
    Pinned,
    /// A verdict this version of turnwise does not know, from a newer server.
    #[serde(other)]
    Unknown,
}

impl Verdict {
    /// Every verdict a server answers, in the order they are counted.
    pub const ALL: [Verdict; 4] = [
        Verdict::Upgradable,
        Verdict::UpgradableAfterTurn,
        Verdict::Resumable,
        Verdict::Pinned,
    ];

    /// The value on the wire: `upgradable`, `upgradable-after-turn`, `resumable`, `pinned`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Upgradable => "upgradable",
            Verdict::UpgradableAfterTurn => "upgradable-after-turn",
            Verdict::Resumable => "resumable",
            Verdict::Pinned => "pinned",
            Verdict::Unknown => "unknown",
        }
    }

    /// The verdict whose wire value is `text`.
    pub fn parse(text: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// Whether an upgrade may move the instance: every verdict but `pinned` (and `unknown`).
    pub fn is_movable(self) -> bool {
        matches!(
            self,
            Verdict::Upgradable | Verdict::UpgradableAfterTurn | Verdict::Resumable
        )
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an instance cannot move (or not now), as a machine code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// No replay manifest is registered for the instance's version or for the target.
    NoManifest,
    /// The target's schema of a part (state, message, a saved step's output, a signal) cannot
    /// read some value the instance's version wrote.
    SchemaBreak,
    /// The schemas could not be shown to read: a keyword the check does not model, or a
    /// schema that is not known.
    SchemaUnproven,
    /// The target grammar does not accept the steps the turn in flight saved.
    PrefixRejected,
    /// The head turn is in a state this version of turnwise cannot judge.
    UnknownStatus,
    /// Only in an upgrade's refusals: the head turn is held by a worker under a lease now.
    /// Not a pin: the same upgrade succeeds once the attempt ends (a sleep, a signal wait, a
    /// failure or the turn's end releases it).
    Held,
    /// A code this version of turnwise does not know, from a newer server.
    #[serde(other)]
    Unknown,
}

impl ReasonCode {
    /// The value on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::NoManifest => "no_manifest",
            ReasonCode::SchemaBreak => "schema_break",
            ReasonCode::SchemaUnproven => "schema_unproven",
            ReasonCode::PrefixRejected => "prefix_rejected",
            ReasonCode::UnknownStatus => "unknown_status",
            ReasonCode::Held => "held",
            ReasonCode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an instance is pinned to its version, or why an upgrade refused it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompatReason {
    /// The kind of reason.
    pub code: ReasonCode,
    /// The reason in words, naming what is wrong and what to do.
    pub message: String,
    /// The part whose schema does not read: `state`, `message`, ``step `charge` `` (a saved
    /// step's output) or ``signal `approval` ``.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Where in that part, as a JSON Pointer (`""` for the whole value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The saved steps of the turn whose prefix the target rejects, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub saved: Vec<Saved>,
    /// The position of the first saved step the target grammar does not accept there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    /// What the target would call at that position instead, each as ``step `charge` at
    /// src/order.rs:40``; empty when the target's turn ends there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<String>,
}

impl CompatReason {
    /// A reason of `code` in words, with no details.
    pub fn new(code: ReasonCode, message: impl Into<String>) -> Self {
        CompatReason {
            code,
            message: message.into(),
            part: None,
            at: None,
            saved: Vec::new(),
            position: None,
            expected: Vec::new(),
        }
    }
}

impl std::fmt::Display for CompatReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The live check's verdict on one instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceCompat {
    /// The instance.
    pub workflow_id: String,
    /// The version it is on.
    pub version: String,
    /// Its status when it was checked.
    pub status: InstanceStatus,
    /// The verdict.
    pub verdict: Verdict,
    /// The head turn whose saved steps were checked (a turn in flight or suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// How many steps that turn saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_steps: Option<u32>,
    /// Why it is pinned (`pinned` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CompatReason>,
    /// What else to know: a head held by a worker now, which an upgrade waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How many instances have each verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictCounts {
    /// `upgradable`.
    pub upgradable: u64,
    /// `upgradable-after-turn`.
    #[serde(rename = "upgradable-after-turn")]
    pub upgradable_after_turn: u64,
    /// `resumable`.
    pub resumable: u64,
    /// `pinned`.
    pub pinned: u64,
}

impl VerdictCounts {
    /// Count one more instance with `verdict` (an unknown verdict counts as pinned).
    pub fn add(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Upgradable => self.upgradable += 1,
            Verdict::UpgradableAfterTurn => self.upgradable_after_turn += 1,
            Verdict::Resumable => self.resumable += 1,
            Verdict::Pinned | Verdict::Unknown => self.pinned += 1,
        }
    }

    /// The count of `verdict`.
    pub fn of(&self, verdict: Verdict) -> u64 {
        match verdict {
            Verdict::Upgradable => self.upgradable,
            Verdict::UpgradableAfterTurn => self.upgradable_after_turn,
            Verdict::Resumable => self.resumable,
            Verdict::Pinned | Verdict::Unknown => self.pinned,
        }
    }

    /// Every instance counted.
    pub fn total(&self) -> u64 {
        self.upgradable + self.upgradable_after_turn + self.resumable + self.pinned
    }
}

/// The answer of the live check: every instance of the type not on the target version, each
/// with its verdict, and the counts.
///
/// The answer is complete, not a page: the check reads every instance of the type (a page of
/// the store at a time) and lists each one it checked, by id. It is exact for each instance
/// as it was when it was read; instances go on changing while the check runs, which is why an
/// upgrade checks each instance again in its own commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCompat {
    /// The workflow type.
    pub workflow_type: String,
    /// The target version.
    pub to_version: String,
    /// The instances checked (those not on the target).
    pub checked: u64,
    /// The instances of the type already on the target, not listed.
    pub on_target: u64,
    /// How many instances have each verdict.
    pub counts: VerdictCounts,
    /// Every instance checked, by id.
    pub instances: Vec<InstanceCompat>,
    /// When the check started, by the backend's clock.
    pub checked_at_ms: Millis,
}

impl LiveCompat {
    /// Whether every instance checked can move (none is pinned).
    pub fn all_movable(&self) -> bool {
        self.counts.pinned == 0
    }
}

/// `POST /v1/workflows/instances/upgrade`: move one instance, or every instance of a type that
/// can move, to `to_version`.
///
/// One instance: `workflow_id` (and, as a check, `workflow_type`). Every movable instance of a
/// type: `workflow_type` with `all_upgradable: true`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeRequest {
    /// The instance to move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// With `all_upgradable`: the type whose instances to move. With `workflow_id`: the type
    /// the instance must be of (refused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_type: Option<String>,
    /// The version to move to.
    pub to_version: String,
    /// Move every instance of `workflow_type` that can move (the others are listed as
    /// refused).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_upgradable: bool,
    /// Who asks (a person, a token's name, a tool), recorded on each instance's event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl UpgradeRequest {
    /// Move instance `workflow_id` to `to_version`.
    pub fn instance(workflow_id: impl Into<String>, to_version: impl Into<String>) -> Self {
        UpgradeRequest {
            workflow_id: Some(workflow_id.into()),
            to_version: to_version.into(),
            ..UpgradeRequest::default()
        }
    }

    /// Move every instance of `workflow_type` that can move to `to_version`.
    pub fn all_upgradable(workflow_type: impl Into<String>, to_version: impl Into<String>) -> Self {
        UpgradeRequest {
            workflow_type: Some(workflow_type.into()),
            to_version: to_version.into(),
            all_upgradable: true,
            ..UpgradeRequest::default()
        }
    }

    /// Recorded as asked by `who`.
    #[must_use]
    pub fn by(mut self, who: impl Into<String>) -> Self {
        self.by = Some(who.into());
        self
    }
}

/// An instance an upgrade moved (or had moved: a repeat answers the recorded move).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upgraded {
    /// The instance.
    pub workflow_id: String,
    /// The version it was on.
    pub from_version: String,
    /// The version it is on now.
    pub to_version: String,
    /// `upgrade`, or `resume` for a suspended turn the move resumed.
    pub action: String,
    /// Its verdict when it moved.
    pub verdict: Verdict,
    /// The turn in flight that moved with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// When it moved, by the backend's clock.
    pub at_ms: Millis,
    /// Who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// An instance an upgrade left where it was, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// The instance.
    pub workflow_id: String,
    /// The version it stays on.
    pub version: String,
    /// Its verdict when it was checked again, in its own commit.
    pub verdict: Verdict,
    /// Why.
    pub reason: CompatReason,
    /// Whether the same request may succeed later without a change of code (a head held by
    /// a worker now).
    pub retryable: bool,
}

/// The answer of an upgrade.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeResponse {
    /// The target version.
    pub to_version: String,
    /// The instances moved (by this request, or, for a repeat, by the one it repeats).
    pub upgraded: Vec<Upgraded>,
    /// The instances named that already were on the target version without being moved
    /// there by an upgrade.
    pub unchanged: Vec<String>,
    /// The instances left where they were, with why.
    pub refused: Vec<Refused>,
}
