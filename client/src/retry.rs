//! The retry policy: which calls are sent again, after which answers, and how long to wait
//! first (`Retry-After`, the body's `retry_after_seconds`, or jittered backoff), within the
//! client's retry count and time budget. The rules are in the [module docs](super).

use std::hash::{BuildHasher, Hasher, RandomState};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use reqwest::header::HeaderValue;

use super::errors::WireError;
use super::transport::{Call, Reply, Retry};
use super::Http;
use turnwise_core::protocol::error::Result;
use turnwise_core::trace::TraceContext;

/// No single retry delay is longer than this, whatever the server asks.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(60);

impl Http {
    /// Send one call, with retries when its route allows them, and answer the success body.
    pub(super) async fn send(&self, call: Call<'_>) -> Result<Bytes> {
        let config = &self.config;
        let (url, target) = self.url(call.path, &call.query)?;
        let first = Instant::now();
        let mut retries = 0u32;
        // One trace context per call: its retries are the same operation.
        // (Hex digits and dashes: always a valid header value.)
        let traceparent = HeaderValue::from_str(&TraceContext::outgoing().traceparent()).ok();
        loop {
            // The same bytes on every try: the body was serialized once, before the loop.
            let (error, may_retry, asked) = match self
                .try_once(&call, &url, target.as_ref(), traceparent.as_ref())
                .await
            {
                Ok(Reply { status, body, .. }) if (200..300).contains(&status) => return Ok(body),
                Ok(Reply {
                    status,
                    retry_after,
                    body,
                }) => {
                    let wire = WireError::parse(status, &body);
                    let may_retry =
                        (status == 429 || status >= 500) && wire.retryable != Some(false);
                    let asked = retry_after
                        .as_ref()
                        .and_then(read_retry_after)
                        .or(wire.retry_after);
                    (wire.into_error(status, call.lease), may_retry, asked)
                }
                Err((error, may_retry)) => (error, may_retry, None),
            };
            if call.retry == Retry::Once || !may_retry || retries >= config.max_retries {
                return Err(error);
            }
            let delay = delay_before_retry(asked, config.retry_delay, retries);
            if first.elapsed() + delay > config.retry_budget {
                return Err(error);
            }
            tracing::debug!(
                path = call.path,
                retry = retries + 1,
                ?delay,
                error = %error,
                "retrying an HTTP call"
            );
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }
}

/// How long to wait before retry number `retries + 1`: the delay the server asked for
/// (`Retry-After` or the body's hint), at most [`MAX_DELAY`], else jittered backoff from `base`.
fn delay_before_retry(asked: Option<Duration>, base: Duration, retries: u32) -> Duration {
    asked
        .map(|d| d.min(MAX_DELAY))
        .unwrap_or_else(|| jitter(base, retries))
}

/// The delay an answer's `Retry-After` header asks for, if it is readable.
fn read_retry_after(value: &HeaderValue) -> Option<Duration> {
    value
        .to_str()
        .ok()
        .and_then(|v| parse_retry_after(v, SystemTime::now()))
}

/// A `Retry-After` value read at `now`: delay seconds, or an HTTP date (any of the three forms
/// HTTP allows; a date already past asks for no delay). Fractional seconds are accepted too,
/// as some servers send them; a negative or unreadable value is ignored.
fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Full-jitter backoff: a random delay in `[0, base · 2^retry)`, at most 60 s.
pub(super) fn jitter(base: Duration, retry: u32) -> Duration {
    let ceiling = base
        .checked_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY);
    // `RandomState` is seeded randomly per process and per instance: enough randomness for
    // spreading retries, without a dependency.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(retry);
    let unit = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    ceiling.mul_f64(unit)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use reqwest::header::{HeaderMap, RETRY_AFTER};

    use super::*;

    fn retry_after(headers: &HeaderMap) -> Option<Duration> {
        headers.get(RETRY_AFTER).and_then(read_retry_after)
    }

    /// 1994-11-06 08:49:37 UTC, the example date of the HTTP specification.
    fn example_date() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    #[test]
    fn retry_after_in_seconds() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("0.5", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("NaN", now), None);
        assert_eq!(parse_retry_after("inf", now), None);
        assert_eq!(parse_retry_after("yesterday", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn retry_after_as_an_http_date() {
        let now = example_date() - Duration::from_secs(90);
        // The preferred form (IMF-fixdate) and the two obsolete ones HTTP still accepts.
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_retry_after(date, now),
                Some(Duration::from_secs(90)),
                "{date}"
            );
        }
        // A date already past asks for no delay.
        let later = example_date() + Duration::from_secs(5);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", later),
            Some(Duration::ZERO)
        );
        // Not GMT, or not a date at all: ignored.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 UTC", now),
            None
        );
        assert_eq!(
            parse_retry_after("Sun, 32 Nov 1994 08:49:37 GMT", now),
            None
        );
    }

    #[test]
    fn retry_after_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        let soon = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        headers.insert(RETRY_AFTER, HeaderValue::from_str(&soon).unwrap());
        let asked = retry_after(&headers).expect("a date in the future is read");
        // Whole seconds, and read a moment after it was written.
        assert!(
            asked > Duration::from_secs(110) && asked <= Duration::from_secs(120),
            "{asked:?}"
        );
    }

    #[test]
    fn retry_after_is_capped_at_a_minute() {
        let base = Duration::from_millis(5);
        // A day asked for, by header or body hint: a minute is waited.
        assert_eq!(
            delay_before_retry(Some(Duration::from_secs(86_400)), base, 0),
            MAX_DELAY
        );
        assert_eq!(MAX_DELAY, Duration::from_secs(60));
        assert_eq!(
            delay_before_retry(Some(Duration::from_secs(61)), base, 3),
            MAX_DELAY
        );
        // Under the cap, the delay asked for is waited as asked, whatever the backoff.
        for asked in [Duration::ZERO, Duration::from_millis(300), MAX_DELAY] {
            assert_eq!(delay_before_retry(Some(asked), base, 5), asked);
        }
        // Nothing asked: the jittered backoff, under its own ceiling.
        assert!(delay_before_retry(None, base, 0) < base);
    }

    #[test]
    fn jitter_stays_under_its_ceiling() {
        let base = Duration::from_millis(100);
        for retry in 0..40 {
            let d = jitter(base, retry);
            let ceiling = (base * 2u32.saturating_pow(retry.min(20))).min(MAX_DELAY);
            assert!(d <= ceiling, "retry {retry}: {d:?} > {ceiling:?}");
        }
        let spread: std::collections::HashSet<_> = (0..16).map(|_| jitter(base, 3)).collect();
        assert!(spread.len() > 1, "jitter must vary");
    }
}
