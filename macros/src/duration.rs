//! Compile-time duration literals: `"250ms"`, `"30s"`, `"5m"`, `"1h30m"`. The accepted ranges
//! are the protocol's, in `turnwise_rules::durations`.

use turnwise_rules::durations::{HOUR_MS, MINUTE_MS, SECOND_MS};

/// Parse a duration literal into milliseconds, or say what is wrong with it.
pub(crate) fn parse_ms(text: &str) -> Result<u64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("it is empty".into());
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("expected a number at `{rest}`"));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| "the number is too large".to_owned())?;
        rest = rest[digits..].trim_start();
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        let factor = match unit {
            "ms" => 1,
            "s" | "sec" | "secs" => SECOND_MS,
            "m" | "min" | "mins" => MINUTE_MS,
            "h" | "hr" | "hrs" => HOUR_MS,
            "" => return Err(format!("`{n}` has no unit")),
            other => return Err(format!("unknown unit `{other}`")),
        };
        total = n
            .checked_mul(factor)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| "the duration is too large".to_owned())?;
        rest = rest[unit_len..].trim_start();
    }
    Ok(total)
}

/// A duration in milliseconds, as people write it.
pub(crate) fn show(ms: u64) -> String {
    if ms >= HOUR_MS && ms.is_multiple_of(HOUR_MS) {
        format!("{}h", ms / HOUR_MS)
    } else if ms >= MINUTE_MS && ms.is_multiple_of(MINUTE_MS) {
        format!("{}m", ms / MINUTE_MS)
    } else if ms >= SECOND_MS && ms.is_multiple_of(SECOND_MS) {
        format!("{}s", ms / SECOND_MS)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(parse_ms("250ms"), Ok(250));
        assert_eq!(parse_ms("30s"), Ok(30_000));
        assert_eq!(parse_ms("5m"), Ok(300_000));
        assert_eq!(parse_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_ms("1h 30m"), Ok(5_400_000));
        assert!(parse_ms("5").is_err());
        assert!(parse_ms("5x").is_err());
        assert!(parse_ms("").is_err());
        assert!(parse_ms("m").is_err());
        assert_eq!(show(300_000), "5m");
        assert_eq!(show(1_500), "1500ms");
    }
}
