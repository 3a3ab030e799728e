//! Small measurement helpers: latency percentiles, rates, human-readable durations and the
//! process's resident memory.

use std::time::Duration;

/// Percentiles of a set of latencies.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// The slowest sample.
    pub max: Duration,
}

impl Summary {
    /// Summarize `samples` (sorted in place). Percentiles use the nearest-rank method.
    pub fn of(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        Self {
            p50: percentile(samples, 50.0),
            p99: percentile(samples, 99.0),
            max: samples.last().copied().unwrap_or_default(),
        }
    }
}

/// The nearest-rank `p`th percentile of sorted samples (zero when there are none).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Events per second.
pub fn rate(events: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        events as f64 / secs
    } else {
        0.0
    }
}

/// A latency as milliseconds with enough digits to compare sub-millisecond values.
pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// A rate with thousands separators and no decimals.
pub fn count(v: f64) -> String {
    let n = v.round() as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// The page size `/proc/self/statm` counts in. Every Linux target this benchmark runs on
/// (x86_64, aarch64 with 4 KiB pages) uses 4 KiB.
const PAGE_BYTES: u64 = 4096;

/// The resident set size of this process in bytes, from `/proc/self/statm` (`None` where
/// there is no procfs).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let resident: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(resident * PAGE_BYTES)
}

/// The 1-, 5- and 15-minute load averages from `/proc/loadavg`, as printed there (`None` where
/// there is no procfs). Other work on the machine shows up in every figure of a benchmark.
pub fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Await every task of a measured phase: all their latency samples, and the first error any of
/// them returned. A panicked task panics here, naming `who`.
pub async fn gather<E>(
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<Duration>, E>>>,
    who: &str,
) -> (Vec<Duration>, Option<E>) {
    let mut samples = Vec::new();
    let mut failure = None;
    for t in tasks {
        match t.await {
            Ok(Ok(s)) => samples.extend(s),
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(join) => panic!("a bench {who} panicked: {join}"),
        }
    }
    (samples, failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Summary::of(&mut v);
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
        assert_eq!(
            percentile(&[Duration::from_millis(7)], 99.0),
            Duration::from_millis(7)
        );
    }

    #[test]
    fn formatting() {
        assert_eq!(count(1234567.4), "1,234,567");
        assert_eq!(count(999.0), "999");
        assert_eq!(ms(Duration::from_micros(1500)), "1.500 ms");
        assert!(rss_bytes().is_none_or(|b| b > 0));
    }
}
