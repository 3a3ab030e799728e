//! Printing: the API's JSON with `--json`, aligned tables and `key: value` blocks otherwise,
//! and failures on stderr.

use std::io::Write;

use serde::Serialize;
use serde_json::{json, Value};

use super::Failure;

/// Where results go, and in which form.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    /// `--json`: print the API's JSON.
    pub json: bool,
}

impl Out {
    pub fn new(json: bool) -> Self {
        Out { json }
    }

    /// `value` as indented JSON on stdout.
    pub fn print_json(&self, value: &impl Serialize) {
        match serde_json::to_string_pretty(value) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("turnwise: cannot print the answer as JSON: {e}"),
        }
    }

    /// `value` as one line of JSON on stdout, flushed (for `watch`, one line per change).
    pub fn print_json_line(&self, value: &impl Serialize) {
        if let Ok(text) = serde_json::to_string(value) {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{text}");
            let _ = stdout.flush();
        }
    }

    /// A failure on stderr: `turnwise: <message>`, or with `--json` an `{"error": …}` object.
    pub fn failure(&self, f: &Failure) {
        if self.json {
            let body = json!({"error": {
                "exit_code": f.exit as u8,
                "kind": f.exit.name(),
                "code": f.code,
                "param": f.param,
                "message": f.message,
            }});
            eprintln!("{body}");
        } else {
            eprintln!("turnwise: {}", f.message);
        }
    }
}

/// Columns of text, each as wide as its widest cell, separated by two spaces.
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Self {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table on stdout, header first.
    pub fn print(&self) {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                text.push_str(cell);
                let pad = widths.get(i).copied().unwrap_or(0);
                text.extend(std::iter::repeat_n(
                    ' ',
                    pad.saturating_sub(cell.chars().count()),
                ));
            }
            println!("{}", text.trim_end());
        };
        line(&mut self.header.iter().copied());
        for row in &self.rows {
            line(&mut row.iter().map(String::as_str));
        }
    }
}

/// `key: value` lines, the keys aligned.
pub fn fields(pairs: &[(&str, String)]) {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in pairs {
        println!(
            "{key:<width$}  {value}",
            key = format!("{key}:"),
            width = width + 1
        );
    }
}

/// A time in milliseconds since the Unix epoch as RFC 3339 in UTC, to the second; `-` for 0.
pub fn time(ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A duration in milliseconds, short: `850ms`, `12.3s`, `4m05s`, `2h10m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// `value` as compact JSON, cut to `max` characters with `…`.
pub fn compact(value: &Value, max: usize) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    if text.chars().count() <= max {
        text
    } else {
        let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// An optional value, `-` when absent.
pub fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The progress view as one line: a bar when the total is known, `phase: done unit` otherwise.
pub fn progress(p: &turnwise::protocol::Progress) -> String {
    let unit = p
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    match p.total {
        Some(total) if total > 0 => {
            const WIDTH: u64 = 20;
            let filled = (p.done.min(total) * WIDTH / total) as usize;
            let bar: String = "#".repeat(filled) + &"-".repeat(WIDTH as usize - filled);
            format!(
                "[{bar}] {}/{total}{unit} {}%  {}",
                p.done,
                p.done.min(total) * 100 / total,
                p.phase
            )
        }
        Some(total) => format!("{}/{total}{unit}  {}", p.done, p.phase),
        None => format!("{}{unit}  {}", p.done, p.phase),
    }
}
