//! Input rules shared by every backend: identifiers, keys, sizes, the ranges of times and
//! durations ([`Times`]) and the progress convention.
//!
//! Each check returns an [`Error`] naming the field and what is allowed, so a refusal is
//! actionable and nothing is written.

use serde_json::Value;

use turnwise_rules::durations::{self, Bounds};

use crate::protocol::error::{Error, Result};
use crate::protocol::{
    CheckpointRequest, CreateInstanceRequest, CreateScheduleRequest, FailRequest, Millis,
    OperationRequest, ScheduleSpec, WaitSignalRequest,
};

/// The most durable calls (steps, sleeps, signal waits) a turn holds by default: the wire's
/// 64, the engine's default `Limits::steps_per_turn`, and the step context's limit when a
/// claim does not carry one. A claim from a turnwise server carries the engine's own limit
/// (the task's `steps_max`), and the step context enforces that instead.
///
/// The number is `turnwise_rules::limits::STEPS_PER_TURN`, which the macros' compile-time
/// budget check reads too.
pub const MAX_STEPS: usize = turnwise_rules::limits::STEPS_PER_TURN;

/// The longest id, key or name: 128 characters (`turnwise_rules::ident::MAX_LEN`).
pub const MAX_ID_LEN: usize = turnwise_rules::ident::MAX_LEN;

/// Whether `s` is 1–128 of `A-Z a-z 0-9 _ - .`: the rule for instance ids, message ids, signal
/// ids, step keys, signal names, workflow types and versions (`turnwise-rules` holds it).
pub use turnwise_rules::ident::is_identifier;

/// Check one identifier field.
pub fn identifier(param: &'static str, s: &str) -> Result<()> {
    turnwise_rules::check_identifier(s)
        .map_err(|why| Error::invalid(param, format!("{s:?} is not a valid identifier: {why}")))
}

/// The compact UTF-8 JSON length of a value, as limits count it.
pub fn json_len(v: &Value) -> usize {
    serialized_len(v)
}

/// The compact JSON length of anything serializable, counted without building it.
pub fn serialized_len<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter(0);
    // Serializing to an infallible writer only fails for values JSON cannot hold (non-string
    // map keys), which the records here never contain.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// How deeply a user value (a message, state, reply, step output, signal value, progress
/// details, resume cursor or origin) may nest: at most 64 arrays and objects inside one
/// another. A scalar nests 0 levels, `[]` and `{}` 1, `[[1]]` 2.
///
/// Stored records and wire answers wrap a user value in a few more levels (a turn, its steps,
/// a step, a signal step's `{received, value}`, a claim's task): at most 8. The limit keeps
/// every record and answer well inside the 128 levels JSON parsers commonly accept (serde_json's
/// default), so an accepted value can always be read back.
pub const MAX_DEPTH: usize = turnwise_rules::limits::NESTING;

/// How many arrays and objects nest inside one another in `v`, counted up to `MAX_DEPTH + 1`
/// (a deeper value answers `MAX_DEPTH + 1`). Recursion stops there, so any value is safe to
/// measure however deep it is.
pub fn depth(v: &Value) -> usize {
    fn walk(v: &Value, budget: usize) -> usize {
        match v {
            Value::Array(a) => 1 + deepest(a.iter(), budget),
            Value::Object(o) => 1 + deepest(o.values(), budget),
            _ => 0,
        }
    }
    // The deepest child of a container with `budget` levels left below it; no deeper than
    // `budget + 1`, which is enough to tell that the limit is passed.
    fn deepest<'a>(children: impl Iterator<Item = &'a Value>, budget: usize) -> usize {
        if budget == 0 {
            return 0;
        }
        let mut deepest = 0;
        for c in children {
            deepest = deepest.max(walk(c, budget - 1));
            if deepest >= budget {
                break;
            }
        }
        deepest
    }
    walk(v, MAX_DEPTH)
}

/// How deeply arrays and objects nest in the JSON `text`, counted by a scan of its bytes
/// without recursion, so any depth can be measured. Brackets inside strings do not count; the
/// text need not be valid JSON (the scan only counts). For telling why a parser refused a text,
/// and for deciding whether a text is safe to decode without a recursion limit.
pub fn text_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Check that a user value nests at most [`MAX_DEPTH`] levels, naming the field.
pub fn nesting(what: &str, v: &Value) -> Result<()> {
    nesting_of(what, depth(v))
}

/// `Err` naming `what` when `depth` passes [`MAX_DEPTH`].
fn nesting_of(what: &str, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::invalid(
            what.to_owned(),
            format!(
                "the value nests more than {MAX_DEPTH} arrays/objects deep; \
                 user values may nest at most {MAX_DEPTH} levels"
            ),
        ));
    }
    Ok(())
}

/// [`size`] for a message's origin, `origin`, as the JSON object it is sent as: its nesting
/// (the object and its fields' values) and its compact length, measured without building it.
pub fn origin_size(origin: &crate::protocol::MessageOrigin, limit: usize) -> Result<()> {
    let deepest = origin.fields.values().map(depth).max().unwrap_or(0);
    nesting_of("origin", 1 + deepest)?;
    let n = serialized_len(origin);
    if n > limit {
        return Err(Error::TooLarge {
            what: "origin".to_owned(),
            size: n,
            limit,
        });
    }
    Ok(())
}

/// Check that a user value fits its size limit and the nesting limit ([`MAX_DEPTH`]).
///
/// The nesting is checked first: serializing an arbitrarily deep value to count its size would
/// recurse as deep as it nests.
pub fn size(what: &str, v: &Value, limit: usize) -> Result<()> {
    nesting(what, v)?;
    let n = json_len(v);
    if n > limit {
        return Err(Error::TooLarge {
            what: what.to_owned(),
            size: n,
            limit,
        });
    }
    Ok(())
}

/// Check who asks for an operator action (`by`): 1–128 characters, not blank, no control
/// characters, when given.
pub fn by(by: Option<&str>) -> Result<()> {
    let Some(by) = by else { return Ok(()) };
    if by.trim().is_empty() || by.chars().count() > MAX_ID_LEN || by.chars().any(char::is_control) {
        return Err(Error::invalid(
            "by",
            "who asks must be 1-128 characters without control characters (a user or tool name)",
        ));
    }
    Ok(())
}

/// The longest `at` (`file:line`) of a mismatch report, in characters.
pub const MISMATCH_AT_CHARS: usize = 512;

/// Check a worker's mismatch report ([`crate::protocol::MismatchReport`]) against what a
/// turn can hold: at most `steps_max` saved entries and a `position` among them (or just
/// past them, when the handler returned early), keys and signal names that are identifiers
/// (or a key's pattern), an `at` of at most [`MISMATCH_AT_CHARS`], and the version an
/// identifier. The message is cut by the engine, never refused.
pub fn mismatch_report(report: &crate::protocol::MismatchReport, steps_max: usize) -> Result<()> {
    identifier("mismatch.version", &report.version)?;
    if report.saved.len() > steps_max {
        return Err(Error::invalid(
            "mismatch.saved",
            format!(
                "{} saved entries are listed; a turn holds at most {steps_max}",
                report.saved.len()
            ),
        ));
    }
    if report.position as usize > report.saved.len() {
        return Err(Error::invalid(
            "mismatch.position",
            format!(
                "position {} is past the {} saved entries listed",
                report.position,
                report.saved.len()
            ),
        ));
    }
    for entry in report.saved.iter().chain(&report.found) {
        identifier("mismatch.saved.key", &entry.key)?;
        if let Some(name) = &entry.signal {
            identifier("mismatch.saved.signal", name)?;
        }
    }
    if report.at.as_ref().is_some_and(|at| {
        at.chars().count() > MISMATCH_AT_CHARS || at.chars().any(char::is_control)
    }) {
        return Err(Error::invalid(
            "mismatch.at",
            format!("`at` is a `file:line` of at most {MISMATCH_AT_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Check a value against a numeric range, naming the field.
pub fn range(param: &'static str, v: u64, min: u64, max: u64) -> Result<()> {
    if v < min || v > max {
        return Err(Error::invalid(
            param,
            format!("{v} is outside {min}..={max}"),
        ));
    }
    Ok(())
}

/// The time and duration fields of a request, checked against their ranges.
///
/// Every time and duration field of the protocol's requests is checked here and nowhere else:
/// the engine checks each request with [`Times::check_times`] before it reads anything, and
/// the HTTP server hands every request to the engine. A value outside its range is
/// `400 invalid_request` naming the field, and nothing is written. The ranges are
/// `turnwise_rules::durations`'s:
///
/// | Request | Field | Range |
/// |---|---|---|
/// | [`CreateInstanceRequest`] | `lease_ms` | 100 ms ..= 24 h ([`LEASE`](durations::LEASE)) |
/// | [`OperationRequest`] | `timeout_ms` | 100 ms ..= 24 h ([`OPERATION_TIMEOUT`](durations::OPERATION_TIMEOUT)) |
/// | [`OperationRequest`] | `heartbeat_timeout_ms` | 100 ms ..= the request's `timeout_ms` |
/// | [`CheckpointRequest`] | `delay_ms` | 0 ..= 365 days ([`SLEEP_DELAY`](durations::SLEEP_DELAY)) |
/// | [`WaitSignalRequest`] | `timeout_ms` | 1 ms ..= 365 days ([`WAIT_TIMEOUT`](durations::WAIT_TIMEOUT)) |
/// | [`FailRequest`] | `retry_at_ms` | a time ([`TIME`](durations::TIME): 1970 to 9999), then clamped to now + 1 s ..= now + 366 days |
/// | [`CreateScheduleRequest`] | `spec.at_ms`, `spec.anchor_ms` | a time ([`TIME`](durations::TIME)) |
/// | [`CreateScheduleRequest`] | `spec.delay_ms` | 0 ..= 365 days ([`SCHEDULE_DELAY`](durations::SCHEDULE_DELAY)) |
/// | [`CreateScheduleRequest`] | `spec.every_ms` | 1 s ..= 365 days ([`SCHEDULE_EVERY`](durations::SCHEDULE_EVERY)) |
///
/// A claim's `wait_ms` (and the turn read's) takes any whole number of milliseconds and is
/// capped at the engine's `max_claim_wait`, so it has nothing to check here; over HTTP, a
/// negative or fractional number in any of these fields is refused when the body is read,
/// naming the field too.
pub trait Times {
    /// `Err` naming the first time or duration field outside its range.
    fn check_times(&self) -> Result<()>;
}

/// Check a duration field, in milliseconds, against its bounds.
fn duration(param: &'static str, ms: u64, bounds: Bounds) -> Result<()> {
    range(param, ms, bounds.min, bounds.max)
}

/// Check a point in time, in Unix milliseconds, against [`durations::TIME`].
fn time(param: &'static str, ms: Millis) -> Result<()> {
    let in_range = u64::try_from(ms).is_ok_and(|ms| durations::TIME.contains(ms));
    if in_range {
        return Ok(());
    }
    Err(Error::invalid(
        param,
        format!(
            "{ms} is outside {}..={}: a time is milliseconds since the Unix epoch, from \
             1970-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z",
            durations::TIME.min,
            durations::TIME.max
        ),
    ))
}

impl Times for CreateInstanceRequest {
    /// `lease_ms`, when given (the engine checks its default with it).
    fn check_times(&self) -> Result<()> {
        match self.lease_ms {
            Some(ms) => duration("lease_ms", ms, durations::LEASE),
            None => Ok(()),
        }
    }
}

impl Times for OperationRequest {
    fn check_times(&self) -> Result<()> {
        duration("timeout_ms", self.timeout_ms, durations::OPERATION_TIMEOUT)?;
        match self.heartbeat_timeout_ms {
            Some(ms) => range(
                "heartbeat_timeout_ms",
                ms,
                durations::HEARTBEAT_TIMEOUT_MIN_MS,
                self.timeout_ms,
            ),
            None => Ok(()),
        }
    }
}

impl Times for CheckpointRequest {
    /// `delay_ms`, when given (which kinds take one is the checkpoint route's rule).
    fn check_times(&self) -> Result<()> {
        match self.delay_ms {
            Some(ms) => duration("delay_ms", ms, durations::SLEEP_DELAY),
            None => Ok(()),
        }
    }
}

impl Times for WaitSignalRequest {
    fn check_times(&self) -> Result<()> {
        duration("timeout_ms", self.timeout_ms, durations::WAIT_TIMEOUT)
    }
}

impl Times for FailRequest {
    fn check_times(&self) -> Result<()> {
        match self.retry_at_ms {
            Some(at) => time("retry_at_ms", at),
            None => Ok(()),
        }
    }
}

impl Times for CreateScheduleRequest {
    fn check_times(&self) -> Result<()> {
        match &self.spec {
            ScheduleSpec::Once { at_ms } => time("spec.at_ms", *at_ms),
            ScheduleSpec::After { delay_ms } => {
                duration("spec.delay_ms", *delay_ms, durations::SCHEDULE_DELAY)
            }
            ScheduleSpec::Every {
                every_ms,
                anchor_ms,
            } => {
                duration("spec.every_ms", *every_ms, durations::SCHEDULE_EVERY)?;
                match anchor_ms {
                    Some(at) => time("spec.anchor_ms", *at),
                    None => Ok(()),
                }
            }
            ScheduleSpec::Cron { .. } => Ok(()),
        }
    }
}

const MAX_SAFE_INT: u64 = (1 << 53) - 1;

/// Check progress `details` against the progress convention when it has a `phase` key:
/// `phase` a trimmed string of 1–80 characters without control characters, `done` and `total`
/// integers in 0..=2^53-1, `unit` a trimmed string of 1–32 letters, digits, spaces, `-` or `_`.
/// Details without `phase` are free JSON.
pub fn progress_details(details: &Value) -> Result<()> {
    let Some(obj) = details.as_object() else {
        return Ok(());
    };
    let Some(phase) = obj.get("phase") else {
        return Ok(());
    };
    let bad = |field: &str, why: &str| {
        Error::invalid(
            "details",
            format!("progress `{field}` {why} (see the progress convention)"),
        )
    };
    let phase = phase
        .as_str()
        .ok_or_else(|| bad("phase", "must be a string"))?;
    let p = phase.trim();
    if p.is_empty() || p.chars().count() > 80 || p.chars().any(char::is_control) {
        return Err(bad(
            "phase",
            "must be 1-80 characters without control characters",
        ));
    }
    let count = |field: &str, required: bool| -> Result<()> {
        match obj.get(field) {
            None | Some(Value::Null) if !required => Ok(()),
            Some(v) => match v.as_u64() {
                Some(n) if n <= MAX_SAFE_INT => Ok(()),
                _ => Err(bad(field, "must be an integer from 0 to 2^53-1")),
            },
            None => Err(bad(field, "is required")),
        }
    };
    count("done", true)?;
    count("total", false)?;
    match obj.get("unit") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let u = v
                .as_str()
                .ok_or_else(|| bad("unit", "must be a string"))?
                .trim();
            let ok = !u.is_empty()
                && u.chars().count() <= 32
                && u.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'));
            if !ok {
                return Err(bad(
                    "unit",
                    "must be 1-32 letters, digits, spaces, '-' or '_'",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers() {
        assert!(is_identifier("counter-1.v2_x"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("a/b"));
        assert!(!is_identifier(&"a".repeat(129)));
        assert!(is_identifier(&"a".repeat(128)));
        let e = identifier("id", "a b").unwrap_err();
        assert!(e.to_string().contains("' '"), "{e}");
    }

    #[test]
    fn progress_convention() {
        assert!(progress_details(
            &json!({"phase": "reading", "done": 1, "total": 3, "unit": "pages"})
        )
        .is_ok());
        assert!(progress_details(&json!({"page": 1})).is_ok());
        assert!(progress_details(&json!({"phase": "", "done": 1})).is_err());
        assert!(progress_details(&json!({"phase": "x"})).is_err());
        assert!(progress_details(&json!({"phase": "x", "done": -1})).is_err());
        assert!(progress_details(&json!({"phase": "x", "done": 1, "unit": "a/b"})).is_err());
        assert!(progress_details(&json!({"phase": "x", "done": 9007199254740992u64})).is_err());
    }

    fn nested(levels: usize) -> Value {
        let mut v = json!(1);
        for i in 0..levels {
            // Built by hand: `json!` would serialize `v` again, recursing as deep as it nests.
            v = if i % 2 == 0 {
                Value::Array(vec![v])
            } else {
                Value::Object([("k".to_owned(), v)].into_iter().collect())
            };
        }
        v
    }

    /// The origin is measured as the object it is sent as: the same verdicts as `size` on its
    /// `Value`, without building that `Value`.
    #[test]
    fn origin_size_agrees_with_size_of_its_value() {
        use crate::protocol::MessageOrigin;
        let with = |field: Value| {
            let mut o = MessageOrigin::new("app");
            o.fields.insert("note".to_owned(), field);
            o
        };
        let cases = [
            MessageOrigin::new("app"),
            with(json!("a short note")),
            with(json!("x".repeat(600))),
            with(nested(MAX_DEPTH - 1)),
            with(nested(MAX_DEPTH)),
        ];
        for origin in cases {
            let value = serde_json::to_value(&origin).unwrap();
            let by_value = size("origin", &value, 512).map_err(|e| e.to_string());
            let direct = origin_size(&origin, 512).map_err(|e| e.to_string());
            assert_eq!(direct, by_value, "{origin:?}");
        }
        assert!(
            origin_size(&with(nested(MAX_DEPTH)), 1 << 20).is_err(),
            "one level too deep"
        );
        assert!(origin_size(&with(nested(MAX_DEPTH - 1)), 1 << 20).is_ok());
    }

    #[test]
    fn depth_counts_containers_and_stops_past_the_limit() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!([])), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(depth(&nested(MAX_DEPTH)), MAX_DEPTH);
        assert_eq!(depth(&nested(MAX_DEPTH + 1)), MAX_DEPTH + 1);
        // Far deeper than any stack could serialize: measured without recursing past the limit.
        let deep = nested(200_000);
        assert_eq!(depth(&deep), MAX_DEPTH + 1);
        assert!(size("message", &nested(MAX_DEPTH), 1 << 20).is_ok());
        let e = size("message", &deep, 1 << 20).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { param, message } if param == "message" && message.contains("64")),
            "{e}"
        );
        // Dropping a value this deep recurses in serde_json; leak it in the test instead.
        std::mem::forget(deep);
    }

    #[test]
    fn text_depth_ignores_brackets_in_strings() {
        assert_eq!(text_depth(b"1"), 0);
        assert_eq!(text_depth(br#"{"a":[1,{"b":"[[[{{"}]}"#), 3);
        assert_eq!(text_depth(br#"["\"[[", "\\", []]"#), 2);
        let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
        assert_eq!(text_depth(deep.as_bytes()), 300);
        assert_eq!(text_depth(b"[[[ unfinished"), 3);
        assert_eq!(text_depth(br#"{"a": "[[[{\"[["}"#), 1);
    }

    #[test]
    fn sizes() {
        assert_eq!(json_len(&json!({"a": 1})), 7);
        assert!(size("message", &json!("x".repeat(10)), 12).is_ok());
        assert!(matches!(
            size("message", &json!("x".repeat(11)), 12),
            Err(Error::TooLarge { .. })
        ));
    }
}
