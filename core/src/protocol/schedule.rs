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
///
/// On the wire, an object with `kind` (`once`, `after`, `every` or `cron`) and that kind's
/// fields; other keys are ignored. A field of the wrong type or a missing one is refused
/// naming it (`spec.delay_ms`), as every request field is. The ranges of its times and
/// durations are [`Times`](crate::protocol::validate::Times)'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScheduleSpec {
    /// Once, at `at_ms` (a delayed message): admitted under the schedule's name as its
    /// message id, then the schedule is gone.
    Once {
        /// When, in milliseconds since the Unix epoch (1970 to 9999).
        at_ms: Millis,
    },
    /// Once, `delay_ms` after the backend receives the request, by the backend's clock (not
    /// the caller's): stored as [`ScheduleSpec::Once`].
    After {
        /// How long from now: 0 to 365 days.
        delay_ms: u64,
    },
    /// Every `every_ms` milliseconds, at `anchor_ms + k * every_ms` (`anchor_ms` defaults to
    /// the creation time).
    Every {
        /// The interval: 1 s to 365 days.
        every_ms: u64,
        /// The time the occurrences are counted from (1970 to 9999); set by the engine when
        /// not given.
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

/// The `kind` of a [`ScheduleSpec`] on the wire.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum SpecKind {
    Once,
    After,
    Every,
    Cron,
}

/// Reads the object's fields in place, so that a path-tracking reader (the server's) names the
/// field at fault: serde's internally tagged enums buffer the object first, and a refusal of
/// one of its fields names only the object.
impl<'de> Deserialize<'de> for ScheduleSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SpecVisitor)
    }
}

struct SpecVisitor;

impl<'de> serde::de::Visitor<'de> for SpecVisitor {
    type Value = ScheduleSpec;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a schedule spec: an object with `kind` (once, after, every or cron)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ScheduleSpec, A::Error> {
        use serde::de::Error as _;
        /// `field`'s value, refused when the object has it twice.
        fn once<'de, A: serde::de::MapAccess<'de>, T: Deserialize<'de>>(
            map: &mut A,
            slot: &mut Option<T>,
            field: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(A::Error::duplicate_field(field));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let mut kind: Option<SpecKind> = None;
        let mut at_ms: Option<Millis> = None;
        let mut delay_ms: Option<u64> = None;
        let mut every_ms: Option<u64> = None;
        let mut anchor_ms: Option<Option<Millis>> = None;
        let mut expr: Option<String> = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "kind" => once(&mut map, &mut kind, "kind")?,
                "at_ms" => once(&mut map, &mut at_ms, "at_ms")?,
                "delay_ms" => once(&mut map, &mut delay_ms, "delay_ms")?,
                "every_ms" => once(&mut map, &mut every_ms, "every_ms")?,
                "anchor_ms" => once(&mut map, &mut anchor_ms, "anchor_ms")?,
                "expr" => once(&mut map, &mut expr, "expr")?,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        fn required<T, E: serde::de::Error>(v: Option<T>, field: &'static str) -> Result<T, E> {
            v.ok_or_else(|| E::missing_field(field))
        }
        Ok(match required(kind, "kind")? {
            SpecKind::Once => ScheduleSpec::Once {
                at_ms: required(at_ms, "at_ms")?,
            },
            SpecKind::After => ScheduleSpec::After {
                delay_ms: required(delay_ms, "delay_ms")?,
            },
            SpecKind::Every => ScheduleSpec::Every {
                every_ms: required(every_ms, "every_ms")?,
                anchor_ms: anchor_ms.flatten(),
            },
            SpecKind::Cron => ScheduleSpec::Cron {
                expr: required(expr, "expr")?,
            },
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_reads_as_it_is_written() {
        let specs = [
            ScheduleSpec::Once { at_ms: 5 },
            ScheduleSpec::After { delay_ms: 60_000 },
            ScheduleSpec::Every {
                every_ms: 1_000,
                anchor_ms: Some(0),
            },
            ScheduleSpec::every(std::time::Duration::from_secs(60)),
            ScheduleSpec::cron("0 3 * * *"),
        ];
        for spec in specs {
            let v = serde_json::to_value(&spec).unwrap();
            assert_eq!(serde_json::from_value::<ScheduleSpec>(v).unwrap(), spec);
        }
        let read = |v: Value| serde_json::from_value::<ScheduleSpec>(v).map_err(|e| e.to_string());
        assert_eq!(
            read(json!({"every_ms": 1000, "kind": "every", "anchor_ms": null, "note": 1})),
            Ok(ScheduleSpec::Every {
                every_ms: 1000,
                anchor_ms: None
            }),
            "the kind may come last, a null anchor is none, other keys are ignored"
        );
        let refused = |v: Value, why: &str| {
            let e = read(v.clone()).unwrap_err();
            assert!(e.contains(why), "{v}: {e}");
        };
        refused(json!({"kind": "yearly"}), "unknown variant `yearly`");
        refused(json!({"kind": "once"}), "missing field `at_ms`");
        refused(json!({"at_ms": 5}), "missing field `kind`");
        // serde_json words a negative u64 by its number representation: "expected u64", or
        // "invalid number" under `arbitrary_precision` (the `exact-numbers` feature).
        let negative = read(json!({"kind": "after", "delay_ms": -1})).unwrap_err();
        assert!(
            negative.contains("expected u64") || negative.contains("invalid number"),
            "a negative delay_ms: {negative}"
        );
        refused(json!([1]), "a schedule spec");
    }
}
