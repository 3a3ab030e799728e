//! `GET /metrics`: the Prometheus text format.
//!
//! Two sources make one page:
//!
//! * what the engine, the worker (when in this process) and the server record through the
//!   `metrics` facade ([`turnwise::metrics`] lists the engine's series; the server adds
//!   `turnwise_http_request_duration_seconds`), kept by the Prometheus recorder that
//!   [`install`] sets up and rendered from its [`PrometheusHandle`];
//! * the inbox gauges, computed at each scrape from the store: unfinished messages and the age
//!   of the oldest ready one per workflow type and version, over the default namespace's first
//!   [`INBOX_SCAN_MAX`] instances (the status route's cap).
//! * `turnwise_claims_waiting`, read at each scrape from the engine
//!   ([`Engine::waiting_claims`]): the claims parked in a long poll, in every namespace.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use turnwise::protocol::{InstanceStatus, ListInstancesQuery, TurnStatus};
use turnwise::{Backend, Engine};

/// The HTTP request latency histogram's name.
pub const HTTP_REQUESTS: &str = "turnwise_http_request_duration_seconds";

/// The inbox gauges look at this many instances at most, per scrape.
pub const INBOX_SCAN_MAX: usize = 10_000;

/// The histograms' bucket bounds, in seconds: 0.5 ms to 60 s.
pub const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Why the Prometheus recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot install the Prometheus metrics recorder: {0} (another `metrics` recorder is \
     installed in this process; render that one instead, or do not install it)"
)]
pub struct InstallError(String);

/// Install the Prometheus recorder as the process's `metrics` recorder, once; later calls
/// return the same handle. Inside a Tokio runtime, a task runs the recorder's upkeep every 5
/// seconds.
pub fn install() -> Result<PrometheusHandle, InstallError> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    let handle = HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .map_err(|e| e.to_string())?;
        let handle = builder.install_recorder().map_err(|e| e.to_string())?;
        turnwise::metrics::describe();
        metrics::describe_histogram!(
            HTTP_REQUESTS,
            "Seconds from a request's head to its answer, by method, route template and status."
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let upkeep = handle.clone();
            runtime.spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    upkeep.run_upkeep();
                }
            });
        }
        Ok(handle)
    });
    handle.clone().map_err(InstallError)
}

/// One request answered: its method, route template (never the raw path) and status.
pub(crate) fn http_request(
    method: &axum::http::Method,
    route: metrics::SharedString,
    status: u16,
    took: Duration,
) {
    let method = match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "HEAD" => "HEAD",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    };
    metrics::histogram!(
        HTTP_REQUESTS,
        "method" => method,
        "route" => route,
        "status" => status_label(status),
    )
    .record(took.as_secs_f64());
}

/// The status as a label, without formatting for the statuses this server answers.
fn status_label(status: u16) -> metrics::SharedString {
    let known = match status {
        200 => "200",
        201 => "201",
        204 => "204",
        400 => "400",
        401 => "401",
        404 => "404",
        405 => "405",
        408 => "408",
        409 => "409",
        413 => "413",
        414 => "414",
        415 => "415",
        422 => "422",
        429 => "429",
        431 => "431",
        500 => "500",
        501 => "501",
        503 => "503",
        _ => return status.to_string().into(),
    };
    known.into()
}

/// The page: the recorder's series (when a handle is given), then the inbox gauges and the
/// waiting claims.
pub(crate) async fn render(handle: Option<&PrometheusHandle>, engine: &Engine) -> String {
    let mut page = handle.map(PrometheusHandle::render).unwrap_or_default();
    if !page.is_empty() && !page.ends_with('\n') {
        page.push('\n');
    }
    inbox_gauges(engine, &mut page).await;
    let _ = writeln!(
        page,
        "# HELP turnwise_claims_waiting Claims parked in a long poll now, asleep until a commit \
         rings them or their next look at the schedule.\n\
         # TYPE turnwise_claims_waiting gauge\nturnwise_claims_waiting {}",
        engine.waiting_claims()
    );
    page
}

#[derive(Default)]
struct Inbox {
    messages: u64,
    oldest_ready_ms: Option<i64>,
}

/// The inbox gauges of `engine`'s namespace, appended to `page`. A store that fails to read
/// leaves the gauges out and sets `turnwise_inbox_scan_complete` to 0.
async fn inbox_gauges(engine: &Engine, page: &mut String) {
    let now = engine.clock().now_ms();
    let mut by_workflow: BTreeMap<(String, String), Inbox> = BTreeMap::new();
    let mut seen = 0usize;
    let mut after = None;
    let complete = loop {
        let list = engine
            .list_instances(ListInstancesQuery {
                after: after.take(),
                limit: Some(100),
            })
            .await;
        let list = match list {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "/metrics: reading the inboxes failed");
                by_workflow.clear();
                break false;
            }
        };
        for inst in &list.instances {
            seen += 1;
            let entry = by_workflow
                .entry((inst.workflow_type.clone(), inst.version.clone()))
                .or_default();
            entry.messages += inst.pending_messages;
            let ready = inst.current_turn.as_deref().filter(|head| {
                head.status == TurnStatus::Queued
                    && head.ready_at_ms <= now
                    && inst.status != InstanceStatus::Paused
            });
            if let Some(head) = ready {
                let age = now.saturating_sub(head.ready_at_ms);
                entry.oldest_ready_ms = Some(entry.oldest_ready_ms.map_or(age, |a| a.max(age)));
            }
        }
        match list.next_after {
            Some(next) if seen < INBOX_SCAN_MAX => after = Some(next),
            Some(_) => break false,
            None => break true,
        }
    };
    let _ = writeln!(
        page,
        "# HELP turnwise_inbox_messages Unfinished messages per workflow type and version (at \
         most {INBOX_SCAN_MAX} instances counted).\n# TYPE turnwise_inbox_messages gauge"
    );
    for ((workflow_type, version), inbox) in &by_workflow {
        let _ = writeln!(
            page,
            "turnwise_inbox_messages{{workflow_type=\"{}\",version=\"{}\"}} {}",
            escape(workflow_type),
            escape(version),
            inbox.messages
        );
    }
    let _ = writeln!(
        page,
        "# HELP turnwise_inbox_oldest_ready_age_seconds How long the oldest ready message has \
         waited for a worker, per workflow type and version (0 when none is ready).\n\
         # TYPE turnwise_inbox_oldest_ready_age_seconds gauge"
    );
    for ((workflow_type, version), inbox) in &by_workflow {
        let _ = writeln!(
            page,
            "turnwise_inbox_oldest_ready_age_seconds{{workflow_type=\"{}\",version=\"{}\"}} {}",
            escape(workflow_type),
            escape(version),
            inbox.oldest_ready_ms.unwrap_or(0) as f64 / 1000.0
        );
    }
    let _ = writeln!(
        page,
        "# HELP turnwise_inbox_scan_complete 1 when the inbox gauges counted every instance, 0 \
         when they stopped at the cap or the store failed to read.\n\
         # TYPE turnwise_inbox_scan_complete gauge\nturnwise_inbox_scan_complete {}",
        u8::from(complete)
    );
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
