//! `GET /metrics`: read by a strict parser of the Prometheus text format, and checked to move
//! with real work by the right amounts. The server is the `turnwise` binary (its counters are
//! its own); the worker runs in this test's process over HTTP, its series read from this
//! process's recorder. Also: the token guards `/metrics` like the API, and `--metrics-bind`
//! serves it (and only it) without the token.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::http::Http;
use turnwise::prelude::*;
use turnwise::protocol::{Lease, TurnStatus};

use common::{Api, ServerProcess};

const TOKEN: &str = "metrics-s3cret";

// ---- a strict parser of the text format -----------------------------------------------------

/// One sample: its metric name and labels (sorted).
type Series = (String, BTreeMap<String, String>);

/// A parsed page: each family's type, and every sample's value.
#[derive(Debug, Default)]
struct Page {
    types: HashMap<String, String>,
    samples: HashMap<Series, f64>,
}

impl Page {
    /// The value of `name` with exactly these labels; 0 when the series is absent (a counter
    /// not incremented yet is not rendered).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .get(&(name.to_owned(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    /// Every sample of `name`.
    fn series(&self, name: &str) -> Vec<(&BTreeMap<String, String>, f64)> {
        self.samples
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|((_, l), v)| (l, *v))
            .collect()
    }
}

fn metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s
            .parse()
            .map_err(|_| format!("{s:?} is not a sample value")),
    }
}

/// `{a="x",b="y"}` (after the name) into labels and the rest of the line.
fn labels(mut rest: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut out = BTreeMap::new();
    let Some(inner) = rest.strip_prefix('{') else {
        return Ok((out, rest));
    };
    rest = inner;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((out, after));
        }
        let eq = rest.find('=').ok_or("a label without `=`")?;
        let name = &rest[..eq];
        if !label_name(name) {
            return Err(format!("{name:?} is not a label name"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("a label value without its opening quote")?;
        let mut v = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().ok_or("an unterminated label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("a dangling escape")?.1 {
                    'n' => v.push('\n'),
                    '\\' => v.push('\\'),
                    '"' => v.push('"'),
                    c => return Err(format!("the escape \\{c} is not allowed")),
                },
                (_, '\n') => return Err("a newline in a label value".into()),
                (_, c) => v.push(c),
            }
        };
        if out.insert(name.to_owned(), v).is_some() {
            return Err(format!("the label {name} is repeated"));
        }
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err("labels not separated by `,`".into());
        }
    }
}

/// Parse a page; every line must be a comment, a `# HELP`/`# TYPE` line, blank, or a sample
/// of a family whose `# TYPE` came before it. Histograms are checked whole: cumulative
/// buckets up to `le="+Inf"`, which equals `_count`.
fn parse(text: &str) -> Result<Page, String> {
    let mut page = Page::default();
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !metric_name(name) {
                        return Err(at("a TYPE of a bad name".into()));
                    }
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(at(format!("{kind:?} is not a metric type")));
                    }
                    if page
                        .types
                        .insert(name.to_owned(), kind.to_owned())
                        .is_some()
                    {
                        return Err(at("a second TYPE line for one family".into()));
                    }
                    if page
                        .samples
                        .keys()
                        .any(|(s, _)| family(s, &page.types) == name)
                    {
                        return Err(at("a TYPE after the family's samples".into()));
                    }
                }
                (Some("HELP"), Some(name), _) if !metric_name(name) => {
                    return Err(at("a HELP of a bad name".into()))
                }
                _ => {}
            }
            continue;
        }
        let end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..end];
        if !metric_name(name) {
            return Err(at(format!("{name:?} is not a metric name")));
        }
        let (labels, rest) = labels(&line[end..]).map_err(at)?;
        let mut fields = rest.split_whitespace();
        let v = value(fields.next().ok_or_else(|| at("no value".into()))?).map_err(at)?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>()
                .map_err(|_| at(format!("{ts:?} is not a timestamp")))?;
        }
        if fields.next().is_some() || !rest.starts_with(' ') {
            return Err(at("junk around the value".into()));
        }
        let fam = family(name, &page.types);
        let Some(kind) = page.types.get(fam) else {
            return Err(at(format!("a sample of {name} before any TYPE of it")));
        };
        if kind == "counter" && (v < 0.0 || v.is_nan()) {
            return Err(at("a counter below 0".into()));
        }
        if page.samples.insert((name.to_owned(), labels), v).is_some() {
            return Err(at("a repeated series".into()));
        }
    }
    for (name, kind) in &page.types {
        if kind == "histogram" {
            check_histogram(&page, name)?;
        }
    }
    Ok(page)
}

/// The family a sample's name belongs to (a histogram's `_bucket`, `_sum`, `_count`).
fn family<'a>(name: &'a str, types: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if types
                .get(base)
                .is_some_and(|k| k == "histogram" || k == "summary")
            {
                return base;
            }
        }
    }
    name
}

fn check_histogram(page: &Page, name: &str) -> Result<(), String> {
    let mut by_series: HashMap<BTreeMap<String, String>, Vec<(f64, f64)>> = HashMap::new();
    for (labels, v) in page.series(&format!("{name}_bucket")) {
        let mut labels = labels.clone();
        let le = labels
            .remove("le")
            .ok_or(format!("{name}_bucket without le"))?;
        by_series.entry(labels).or_default().push((value(&le)?, v));
    }
    for (labels, mut buckets) in by_series {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{name}{labels:?}: buckets are not cumulative"));
        }
        let last = buckets.last().ok_or("no bucket")?;
        if last.0 != f64::INFINITY {
            return Err(format!("{name}{labels:?}: no le=\"+Inf\" bucket"));
        }
        let count = page
            .samples
            .get(&(format!("{name}_count"), labels.clone()))
            .ok_or(format!("{name}{labels:?}: no _count"))?;
        if *count != last.1 {
            return Err(format!("{name}{labels:?}: _count is not the +Inf bucket"));
        }
        if !page
            .samples
            .contains_key(&(format!("{name}_sum"), labels.clone()))
        {
            return Err(format!("{name}{labels:?}: no _sum"));
        }
    }
    Ok(())
}

#[test]
fn the_parser_refuses_what_is_not_the_text_format() {
    let good = "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"q\\\"\\\\\\n\"} 3\n\
                # TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n";
    let page = parse(good).unwrap();
    assert_eq!(page.get("x_total", &[("a", "q\"\\\n")]), 3.0);
    assert_eq!(page.get("h_count", &[]), 2.0);
    for bad in [
        "x_total 1\n",                              // no TYPE
        "# TYPE x counter\nx{a=\"1\"} one\n",       // bad value
        "# TYPE x counter\nx{a=1} 1\n",             // unquoted
        "# TYPE x counter\nx{a=\"1\",a=\"2\"} 1\n", // repeated label
        "# TYPE x counter\nx 1\nx 2\n",             // repeated series
        "# TYPE x counter\nx -1\n",                 // negative counter
        "# TYPE x teapot\n",                        // bad type
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
        "# TYPE 1x gauge\n",
        "# TYPE x gauge\nx{a=\"\\t\"} 1\n",
    ] {
        assert!(parse(bad).is_err(), "accepted: {bad:?}");
    }
}

// ---- the server and the work -----------------------------------------------------------------

/// The binary serving a fresh store with these extra flags: the process, the API's address,
/// and the metrics listener's address when it has one.
fn spawn(dir: &std::path::Path, extra: &[&str]) -> (ServerProcess, String, Option<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_turnwise"));
    cmd.args(["serve", "--db"])
        .arg(dir.join("metrics.db"))
        .args(["--bind", "127.0.0.1:0"])
        .args(extra)
        .env_remove("TURNWISE_API_TOKEN")
        .env_remove("TURNWISE_METRICS_BIND")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("start the turnwise binary");
    let stdout = child.stdout.take().unwrap();
    let wants_metrics = extra.contains(&"--metrics-bind");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut api, mut metrics) = (None, None);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix("turnwise listening on http://") {
                api = Some(addr.to_owned());
            }
            if let Some(url) = line.strip_prefix("turnwise metrics on http://") {
                metrics = url.strip_suffix("/metrics").map(str::to_owned);
            }
            if api.is_some() && (metrics.is_some() || !wants_metrics) {
                let _ = tx.send((api.take().unwrap_or_default(), metrics.take()));
            }
        }
    });
    let child = ServerProcess(child);
    let (api, metrics) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the turnwise binary did not start listening within 30 s");
    (child, api, metrics)
}

/// `GET /metrics` with the client's token, parsed.
async fn scrape(api: &Api) -> Page {
    let mut req = api.http.get(format!("{}/metrics", api.base));
    if let Some(t) = &api.token {
        req = req.bearer_auth(t);
    }
    let answer = req.send().await.unwrap();
    assert_eq!(answer.status(), 200, "{answer:?}");
    let kind = answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let text = answer.text().await.unwrap();
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
struct Job {
    kind: String,
}

fn job(kind: &str) -> Job {
    Job { kind: kind.into() }
}

/// Whether the `retry_once` job failed its first attempt already.
static RETRIED: AtomicBool = AtomicBool::new(false);

/// One step, then: a reply (`ok`), a continuation into an `ok` turn (`continue`), a permanent
/// failure (`fail`; the instance skips exhausted turns), or one retryable failure first
/// (`retry_once`).
#[workflow(name = "metered", version = "v1", on_exhausted = "skip")]
async fn metered(ctx: &mut Turn, state: u64, job: Job) -> Result<Done<u64, u64>, TurnError> {
    let n = ctx.step("work", |_| async { Ok(1u64) }).await?;
    match job.kind.as_str() {
        "continue" => Ok(Done::new(state + n).continue_with(self::job("ok"))),
        "fail" => Err(TurnError::permanent("asked to fail")),
        "retry_once" if !RETRIED.swap(true, Ordering::SeqCst) => {
            Err(TurnError::retry("asked to fail once"))
        }
        _ => Ok(Done::new(state + n).reply(state + n)),
    }
}

fn delta(before: &Page, after: &Page, name: &str, labels: &[(&str, &str)]) -> f64 {
    after.get(name, labels) - before.get(name, labels)
}

#[tokio::test]
async fn metrics_move_with_real_work() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, _) = spawn(dir.path(), &["--api-token", TOKEN]);
    let api = Api::new(format!("http://{addr}"), Some(TOKEN));
    let http = Http::connect(format!("http://{addr}"), Some(TOKEN.to_owned())).unwrap();
    // The worker's series are recorded in this process.
    let local = turnwise_server::metrics::install().unwrap();

    let mut handles = Vec::new();
    for kind in ["ok", "continue", "fail", "retry_once", "cancel"] {
        let handle = metered
            .start(&http, &format!("metered-{kind}"))
            .await
            .unwrap();
        handle.send(job(kind), "m1").await.unwrap();
        handles.push((kind, handle));
    }
    // Cancelled before any worker sees it.
    handles[4].1.cancel_turn(1).await.unwrap();

    let before = scrape(&api).await;
    let local_before = parse(&local.render()).unwrap();
    let wf = [("workflow_type", "metered"), ("version", "v1")];
    assert_eq!(before.get("turnwise_inbox_messages", &wf), 4.0);
    assert!(before.get("turnwise_inbox_oldest_ready_age_seconds", &wf) >= 0.0);
    assert_eq!(before.get("turnwise_inbox_scan_complete", &[]), 1.0);
    assert_eq!(
        before.get(
            "turnwise_turns_total",
            &[("workflow_type", "metered"), ("outcome", "cancelled")]
        ),
        1.0
    );

    // Every turn to its end; the retry waits out its backoff (about a second).
    let worker = Worker::new(http.clone()).register(metered);
    let (_, retried) = &handles[3];
    loop {
        worker.run_until_idle().await.unwrap();
        if retried.turn(1).await.unwrap().status == TurnStatus::Completed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A worker call under a lease that holds nothing.
    let lost = http
        .heartbeat(Lease {
            workflow_id: "metered-ok".into(),
            turn: 1,
            token: "not-a-token".into(),
        })
        .await
        .unwrap_err();
    assert!(lost.is_lease_lost(), "{lost}");

    let after = scrape(&api).await;
    let local_after = parse(&local.render()).unwrap();
    for (name, kind) in [
        ("turnwise_claims_total", "counter"),
        ("turnwise_attempts_total", "counter"),
        ("turnwise_turns_total", "counter"),
        ("turnwise_lease_losses_total", "counter"),
        ("turnwise_store_commit_seconds", "histogram"),
        ("turnwise_store_sqlite_sync_seconds", "histogram"),
        ("turnwise_http_request_duration_seconds", "histogram"),
        ("turnwise_inbox_messages", "gauge"),
        ("turnwise_inbox_oldest_ready_age_seconds", "gauge"),
        ("turnwise_claims_waiting", "gauge"),
    ] {
        assert_eq!(
            after.types.get(name).map(String::as_str),
            Some(kind),
            "{name}"
        );
    }
    let d = |name: &str, labels: &[(&str, &str)]| delta(&before, &after, name, labels);
    let turns = |outcome| {
        d(
            "turnwise_turns_total",
            &[("workflow_type", "metered"), ("outcome", outcome)],
        )
    };
    assert_eq!(turns("completed"), 3.0, "ok, the continuation, the retried");
    assert_eq!(turns("continued"), 1.0);
    assert_eq!(turns("failed"), 1.0);
    assert_eq!(turns("cancelled"), 0.0);
    let attempts = |which| {
        d(
            "turnwise_attempts_total",
            &[("workflow_type", "metered"), ("attempt", which)],
        )
    };
    assert_eq!(attempts("first"), 5.0);
    assert_eq!(attempts("retry"), 1.0);
    assert_eq!(d("turnwise_claims_total", &[("result", "granted")]), 6.0);
    assert!(d("turnwise_claims_total", &[("result", "empty")]) >= 1.0);
    assert_eq!(d("turnwise_lease_losses_total", &[]), 1.0);
    // At least one durable commit per finished attempt.
    assert!(
        d(
            "turnwise_store_commit_seconds_count",
            &[("durability", "durable")]
        ) >= 6.0,
        "{:?}",
        after.series("turnwise_store_commit_seconds_count")
    );
    assert!(d("turnwise_store_sqlite_sync_seconds_count", &[]) >= 1.0);
    let http_count = |route, status| {
        d(
            "turnwise_http_request_duration_seconds_count",
            &[("method", "POST"), ("route", route), ("status", status)],
        )
    };
    assert_eq!(http_count("/v1/workflows/turns/complete", "200"), 4.0);
    assert_eq!(http_count("/v1/workflows/turns/fail", "200"), 2.0);
    assert_eq!(http_count("/v1/workflows/turns/heartbeat", "409"), 1.0);
    assert_eq!(
        http_count("/v1/workflows/turns/claim", "200"),
        6.0 + d("turnwise_claims_total", &[("result", "empty")])
    );
    // Routes are templates: no instance id or query string in any label.
    for (labels, _) in after.series("turnwise_http_request_duration_seconds_count") {
        let route = &labels["route"];
        assert!(route.starts_with('/') || route == "unmatched", "{route}");
        assert!(
            !route.contains('?') && !route.contains("metered-"),
            "{route}"
        );
    }
    assert_eq!(after.get("turnwise_inbox_messages", &wf), 0.0);
    assert_eq!(
        after.get("turnwise_inbox_oldest_ready_age_seconds", &wf),
        0.0
    );

    // The worker's histograms, in this process.
    let ld = |name: &str, labels: &[(&str, &str)]| delta(&local_before, &local_after, name, labels);
    let step = |outcome| {
        ld(
            "turnwise_worker_step_seconds_count",
            &[("workflow_type", "metered"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        step("ok"),
        5.0,
        "one step a turn; the retry replays its step"
    );
    assert_eq!(step("error"), 0.0);
    let turn = |outcome| {
        ld(
            "turnwise_worker_turn_seconds_count",
            &[("workflow_type", "metered"), ("outcome", outcome)],
        )
    };
    assert_eq!(turn("completed"), 4.0);
    assert_eq!(turn("failed"), 2.0);
}

/// A turn suspended by a replay mismatch counts once in `turnwise_turns_suspended_total`, by
/// workflow type; the worker's late repeat of the suspension is a lost lease and counts nothing.
#[tokio::test]
async fn a_suspension_counts_once() {
    use turnwise::manifest::grammar::Saved;
    use turnwise::manifest::CallKind;
    use turnwise::protocol::*;
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, _) = spawn(dir.path(), &["--api-token", TOKEN]);
    let api = Api::new(format!("http://{addr}"), Some(TOKEN));
    let http = Http::connect(format!("http://{addr}"), Some(TOKEN.to_owned())).unwrap();
    http.create_instance(CreateInstanceRequest {
        id: "s-1".into(),
        workflow_type: "suspending".into(),
        version: "v1".into(),
        state: serde_json::Value::Null,
        lease_ms: None,
        max_attempts: None,
        on_exhausted: None,
    })
    .await
    .unwrap();
    http.send_message(MessageRequest {
        workflow_id: "s-1".into(),
        id: "m1".into(),
        message: serde_json::Value::Null,
        origin: None,
    })
    .await
    .unwrap();
    let task = http
        .claim(ClaimRequest {
            worker: "w".into(),
            workflows: vec![WorkflowRef::new("suspending", "v1")],
            wait_ms: 5_000,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .expect("the turn is ready");
    let suspend = FailRequest {
        lease: Lease {
            workflow_id: "s-1".into(),
            turn: 1,
            token: task.token.clone(),
        },
        error: "ReplayMismatch: changed".into(),
        non_retryable: false,
        retry_at_ms: None,
        usage: None,
        results: None,
        mismatch: Some(MismatchReport {
            version: "v1".into(),
            position: 0,
            saved: Vec::new(),
            found: Some(Saved::new(CallKind::Step, "new")),
            at: None,
            message: "the code changed".into(),
        }),
    };
    http.fail(suspend.clone()).await.unwrap();
    assert!(http.fail(suspend).await.unwrap_err().is_lease_lost());
    let page = scrape(&api).await;
    assert_eq!(page.types["turnwise_turns_suspended_total"], "counter");
    assert_eq!(
        page.get(
            "turnwise_turns_suspended_total",
            &[("workflow_type", "suspending")]
        ),
        1.0
    );
}

#[tokio::test]
async fn metrics_need_the_token_unless_served_on_their_own_listener() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, metrics) = spawn(
        dir.path(),
        &["--api-token", TOKEN, "--metrics-bind", "127.0.0.1:0"],
    );
    let metrics = metrics.expect("the metrics listener's address");
    let api = Api::new(format!("http://{addr}"), Some(TOKEN));
    for token in [None, Some("wrong")] {
        let answer = api
            .try_raw(Method::GET, "/metrics", None, token)
            .await
            .unwrap();
        answer.err(401, "unauthorized");
    }
    let with_token = scrape(&api).await;
    assert_eq!(with_token.get("turnwise_inbox_scan_complete", &[]), 1.0);

    // The metrics listener: /metrics without the token, and nothing else.
    let open = Api::new(format!("http://{metrics}"), None);
    let page = scrape(&open).await;
    assert_eq!(page.types["turnwise_inbox_messages"], "gauge");
    let other = open
        .try_raw(Method::GET, "/v1/workflows/status", None, None)
        .await
        .unwrap();
    assert_eq!(other.status, 404, "{other:?}");
    let other = open
        .try_raw(Method::GET, "/v1/workflows/status", None, Some(TOKEN))
        .await
        .unwrap();
    assert_eq!(other.status, 404, "{other:?}");
}

#[test]
fn a_metrics_listener_off_loopback_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .args(["serve", "--db"])
        .arg(dir.path().join("m.db"))
        .args(["--bind", "127.0.0.1:0"])
        .env_remove("TURNWISE_API_TOKEN")
        .env("TURNWISE_METRICS_BIND", "0.0.0.0:0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to serve /metrics on 0.0.0.0:0 without an API token"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("m.db").exists(),
        "refused before opening the store"
    );
}
