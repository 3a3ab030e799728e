//! Schedules (a turnwise extension of the wire): messages the engine admits to an instance's
//! inbox later, once (a delayed message) or again and again (a fixed interval or a cron
//! expression).
//!
//! A schedule belongs to one instance and is kept in the instance's own record, so the
//! admission of a firing and the advance of the schedule to its next fire time are one
//! conditional write: a firing cannot be admitted without the advance, nor the advance be
//! written without the firing, whatever crashes in between. See `docs/guide.md` ("Schedules").

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Millis;

/// When a schedule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScheduleSpec {
    /// Once, at `at_ms` (a delayed message): admitted under the schedule's name as its
    /// message id, then the schedule is gone.
    Once {
        /// When, in milliseconds since the Unix epoch.
        at_ms: Millis,
    },
    /// Once, `delay_ms` after the backend receives the request, by the backend's clock (not
    /// the caller's): stored as [`ScheduleSpec::Once`].
    After {
        /// How long from now.
        delay_ms: u64,
    },
    /// Every `every_ms` milliseconds, at `anchor_ms + k * every_ms` (`anchor_ms` defaults to
    /// the creation time).
    Every {
        /// The interval, at least 1000 ms.
        every_ms: u64,
        /// The time the occurrences are counted from; set by the engine when not given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<Millis>,
    },
    /// At the times a cron expression names, in UTC: five fields (minute, hour, day of month,
    /// month, day of week) or six (seconds first), POSIX crontab semantics.
    Cron {
        /// The expression, e.g. `0 3 * * *` (03:00 UTC every day).
        expr: String,
    },
}

impl ScheduleSpec {
    /// Every `interval`, counted from the schedule's creation.
    pub fn every(interval: std::time::Duration) -> Self {
        ScheduleSpec::Every {
            every_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            anchor_ms: None,
        }
    }

    /// At the times the cron expression names, in UTC (checked when the schedule is created).
    pub fn cron(expr: impl Into<String>) -> Self {
        ScheduleSpec::Cron { expr: expr.into() }
    }
}

/// What a recurring schedule does with the occurrences that passed while nothing looked at
/// it (the engine was down, or no worker of the workflow was running).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CatchUp {
    /// Admit nothing more than [`CatchUp::LATE_MS`] late: of the occurrences due at once only
    /// the newest is admitted, and only if it is on time.
    Skip,
    /// Admit the newest occurrence that is due, however late; skip the older ones. The
    /// default.
    #[default]
    One,
    /// Admit every occurrence that is due, oldest first, at most [`CatchUp::MAX_ALL`] of the
    /// newest at once (older ones are skipped).
    All,
}

impl CatchUp {
    /// How late an occurrence may be and still be admitted under [`CatchUp::Skip`]: one minute.
    pub const LATE_MS: Millis = 60_000;
    /// The most occurrences one look admits under [`CatchUp::All`].
    pub const MAX_ALL: usize = 32;
}

/// `POST /v1/workflows/schedules`: create a schedule on an instance. An identical repeat
/// answers the existing schedule; another schedule under a taken name is a conflict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateScheduleRequest {
    /// The instance the firings are admitted to; it must exist.
    pub workflow_id: String,
    /// The schedule's name, unique per instance: 1–64 of `A-Z a-z 0-9 _ - .`. For a
    /// [`ScheduleSpec::Once`] it is the message id the message is admitted under (up to 128).
    pub name: String,
    /// When it fires.
    pub spec: ScheduleSpec,
    /// The message each firing admits (checked like a message at creation).
    pub message: Value,
    /// What to do with occurrences missed during downtime (recurring schedules).
    #[serde(default)]
    pub catch_up: CatchUp,
}

/// A schedule as stored and as read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkflowSchedule {
    /// The instance.
    pub workflow_id: String,
    /// The name, unique per instance.
    pub name: String,
    /// When it fires.
    pub spec: ScheduleSpec,
    /// The message each firing admits.
    pub message: Value,
    /// The catch-up policy.
    pub catch_up: CatchUp,
    /// Paused: it admits nothing until resumed (occurrences in between are treated by the
    /// catch-up policy on resume).
    pub paused: bool,
    /// The next occurrence not yet admitted or skipped; `None` once a one-off has fired.
    pub next_fire_ms: Option<Millis>,
    /// Firings admitted so far.
    pub fired: u64,
    /// Occurrences skipped by the catch-up policy or because the inbox was full. For a cron
    /// schedule, of a long run of missed occurrences at most the newest 33 are counted.
    pub skipped: u64,
    /// The occurrence last admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fire_ms: Option<Millis>,
    /// Creation time.
    pub created_at_ms: Millis,
    /// Last change.
    pub updated_at_ms: Millis,
}

/// `GET /v1/workflows/schedules?workflow_id=&after=&limit=`: schedules of one instance, or of
/// every instance of the namespace a page of instances at a time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSchedulesQuery {
    /// Only this instance's schedules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Exclusive instance-id cursor (a previous page's `next_after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// How many instances one page looks at (default 50, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// A page of schedules.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleList {
    /// By instance id, then by name.
    pub schedules: Vec<WorkflowSchedule>,
    /// The cursor for the next page, when the page was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// What [`ScheduleControlRequest`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScheduleAction {
    /// Stop admitting firings.
    Pause,
    /// Admit firings again, from the next occurrence (missed ones by the catch-up policy).
    Resume,
    /// Remove the schedule (firings already admitted stay in the inbox).
    Delete,
}

impl std::fmt::Display for ScheduleAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ScheduleAction::Pause => "pause",
            ScheduleAction::Resume => "resume",
            ScheduleAction::Delete => "delete",
        })
    }
}

/// `POST /v1/workflows/schedules/control`: pause, resume or delete one schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleControlRequest {
    /// The instance.
    pub workflow_id: String,
    /// The schedule.
    pub name: String,
    /// What to do.
    pub action: ScheduleAction,
}

/// The answer to a [`ScheduleControlRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleControlResponse {
    /// The schedule after the action; `None` after a delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<WorkflowSchedule>,
    /// Whether a delete removed it (`false` for a schedule that was not there).
    pub deleted: bool,
}

/// The message id of a recurring schedule's firing at `at_ms`: `schedule/<name>/<fire time>`,
/// the fire time in RFC 3339 UTC with milliseconds (see [`fire_time`]). The `/` keeps it apart
/// from every id a client may send (identifiers have none).
///
/// ```
/// assert_eq!(
///     turnwise::protocol::firing_id("nightly", 1_767_225_600_000),
///     "schedule/nightly/2026-01-01T00:00:00.000Z"
/// );
/// ```
pub fn firing_id(name: &str, at_ms: Millis) -> String {
    format!("schedule/{name}/{}", fire_time(at_ms))
}

/// A fire time as firing ids and origins write it: RFC 3339 UTC with milliseconds.
pub fn fire_time(at_ms: Millis) -> String {
    match chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at_ms) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => at_ms.to_string(),
    }
}
