//! The accepted ranges and defaults of durations, in milliseconds.

/// An inclusive range of accepted milliseconds (or counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The smallest accepted value.
    pub min: u64,
    /// The largest accepted value.
    pub max: u64,
}

impl Bounds {
    /// Whether `v` is within the bounds.
    pub const fn contains(self, v: u64) -> bool {
        self.min <= v && v <= self.max
    }

    /// `v` if it is within the bounds, else why not.
    pub const fn check(self, v: u64) -> Result<u64, OutOfRange> {
        if self.contains(v) {
            Ok(v)
        } else {
            Err(OutOfRange {
                value: v,
                bounds: self,
            })
        }
    }
}

/// A value outside its [`Bounds`]. Its message names the value and the accepted range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange {
    /// The refused value.
    pub value: u64,
    /// What is accepted.
    pub bounds: Bounds,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Bounds { min, max } = self.bounds;
        write!(f, "{} is outside {min}..={max}", self.value)
    }
}

impl std::error::Error for OutOfRange {}

/// One second.
pub const SECOND_MS: u64 = 1_000;
/// One minute.
pub const MINUTE_MS: u64 = 60 * SECOND_MS;
/// One hour.
pub const HOUR_MS: u64 = 60 * MINUTE_MS;
/// One day.
pub const DAY_MS: u64 = 24 * HOUR_MS;
/// 365 days, the longest sleep or signal wait.
pub const YEAR_MS: u64 = 365 * DAY_MS;

/// An instance's `lease_ms`: 100 ms to 24 h.
pub const LEASE: Bounds = Bounds {
    min: 100,
    max: DAY_MS,
};
/// `lease_ms` when a create request leaves it out: 60 s.
pub const DEFAULT_LEASE_MS: u64 = 60 * SECOND_MS;

/// An operation's per-attempt `timeout_ms`: 100 ms to 24 h.
pub const OPERATION_TIMEOUT: Bounds = Bounds {
    min: 100,
    max: DAY_MS,
};
/// The operation timeout the LBB client sends unless told otherwise: 5 minutes.
pub const DEFAULT_OPERATION_TIMEOUT_MS: u64 = 5 * MINUTE_MS;

/// The shortest `heartbeat_timeout_ms`; the longest is the operation's own `timeout_ms`.
pub const HEARTBEAT_TIMEOUT_MIN_MS: u64 = 100;

/// A sleep's `delay_ms`: 0 to 365 days.
pub const SLEEP_DELAY: Bounds = Bounds {
    min: 0,
    max: YEAR_MS,
};

/// A signal wait's `timeout_ms`: 1 ms to 365 days.
pub const WAIT_TIMEOUT: Bounds = Bounds {
    min: 1,
    max: YEAR_MS,
};

/// How far ahead of now a failure's `retry_at_ms` takes effect: 1 s to 366 days. A time
/// within [`TIME`] is clamped into this range, never refused; one outside [`TIME`] is refused.
pub const RETRY_AT_AHEAD: Bounds = Bounds {
    min: SECOND_MS,
    max: 366 * DAY_MS,
};

/// A point in time a request names, in milliseconds since the Unix epoch: a failure's
/// `retry_at_ms`, a schedule's `at_ms` and `anchor_ms`. From 1970-01-01T00:00:00.000Z to
/// 9999-12-31T23:59:59.999Z, the last millisecond RFC 3339 writes.
pub const TIME: Bounds = Bounds {
    min: 0,
    max: 253_402_300_799_999,
};

/// A delayed message's `delay_ms` (a schedule of kind `after`): 0 to 365 days, as a sleep. A
/// later message names its time (`at_ms`).
pub const SCHEDULE_DELAY: Bounds = Bounds {
    min: 0,
    max: YEAR_MS,
};

/// A recurring schedule's `every_ms`: 1 s to 365 days.
pub const SCHEDULE_EVERY: Bounds = Bounds {
    min: SECOND_MS,
    max: YEAR_MS,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive() {
        assert!(LEASE.contains(100) && LEASE.contains(86_400_000));
        assert!(!LEASE.contains(99) && !LEASE.contains(86_400_001));
        assert_eq!(OPERATION_TIMEOUT.check(300_000), Ok(300_000));
        assert!(SLEEP_DELAY.contains(0) && !WAIT_TIMEOUT.contains(0));
        assert_eq!(YEAR_MS, 31_536_000_000);
        assert!(LEASE.contains(DEFAULT_LEASE_MS));
        assert!(OPERATION_TIMEOUT.contains(DEFAULT_OPERATION_TIMEOUT_MS));
        // The last time is the last millisecond of 9999, and `after` reaches far short of it.
        assert_eq!(TIME.max + 1, 253_402_300_800_000);
        assert!(TIME.contains(0) && !TIME.contains(TIME.max + 1));
        assert!(SCHEDULE_DELAY.max < TIME.max && SCHEDULE_EVERY.contains(1_000));
    }

    #[test]
    fn out_of_range_names_value_and_range() {
        let e = LEASE.check(99).unwrap_err();
        assert_eq!(e.to_string(), "99 is outside 100..=86400000");
        assert_eq!(e.bounds, LEASE);
    }
}
