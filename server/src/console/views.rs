//! The console's pages as handlers: each reads what its page shows through the engine, then
//! renders it with [`pages`](super::pages).

use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Deserialize;
use turnwise::protocol::*;
use turnwise::{Backend, Engine};

use super::{engine, frame, html, now_ms, pages, Csrf, Fail, Login, Page};
use crate::AppState;

// ---- the workflows page -----------------------------------------------------------------------

/// The server's URL as the browser reached it (its `Host`), for the commands a page shows.
fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("127.0.0.1:7400");
    format!("http://{host}")
}

/// Counts of one workflow type and version.
#[derive(Clone, Debug, Default)]
pub(crate) struct TypeRow {
    pub(crate) workflow_type: String,
    pub(crate) version: String,
    pub(crate) by_status: std::collections::BTreeMap<String, u64>,
    pub(crate) instances: u64,
    /// When the oldest ready message was admitted.
    pub(crate) oldest_ready_ms: Option<i64>,
    /// Since when a message has been ready (the earliest).
    pub(crate) ready_since_ms: Option<i64>,
    pub(crate) running: u64,
    pub(crate) registered: bool,
}

/// The most instances the console reads for a page's counts or filters.
const SCAN_MAX: usize = 10_000;

/// A ready message older than this with no turn running: the **No worker** warning.
pub(crate) const NO_WORKER_AFTER: Duration = Duration::from_secs(120);

pub(super) async fn scan(
    engine: &Engine,
    mut keep: impl FnMut(WorkflowInstance) -> bool,
) -> Result<bool, Fail> {
    let mut after = None;
    let mut seen = 0usize;
    loop {
        let page = engine
            .list_instances(ListInstancesQuery {
                after: after.take(),
                limit: Some(100),
            })
            .await?;
        for inst in page.instances {
            seen += 1;
            if !keep(inst) {
                return Ok(true);
            }
        }
        match page.next_after {
            Some(next) if seen < SCAN_MAX => after = Some(next),
            Some(_) => return Ok(false),
            None => return Ok(true),
        }
    }
}

pub(super) async fn workflows_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
) -> Page {
    let engine = engine(&state);
    let now = now_ms(&state);
    let mut rows: std::collections::BTreeMap<(String, String), TypeRow> = Default::default();
    for doc in engine
        .schema_documents(None, None)
        .await
        .unwrap_or_default()
    {
        let t = doc["workflow_type"].as_str().unwrap_or_default().to_owned();
        let v = doc["version"].as_str().unwrap_or_default().to_owned();
        let row = rows.entry((t.clone(), v.clone())).or_default();
        row.workflow_type = t;
        row.version = v;
        row.registered = true;
    }
    let complete = scan(engine, |inst| {
        let row = rows
            .entry((inst.workflow_type.clone(), inst.version.clone()))
            .or_default();
        row.workflow_type = inst.workflow_type.clone();
        row.version = inst.version.clone();
        row.instances += 1;
        *row.by_status
            .entry(inst.status.as_str().to_owned())
            .or_default() += 1;
        if inst.status == InstanceStatus::Running {
            row.running += 1;
        }
        if let Some(head) = &inst.current_turn {
            if head.status == TurnStatus::Queued && head.ready_at_ms <= now {
                let since = head.ready_at_ms.max(head.created_at_ms);
                row.oldest_ready_ms = Some(
                    row.oldest_ready_ms
                        .map_or(head.created_at_ms, |o| o.min(head.created_at_ms)),
                );
                row.ready_since_ms = Some(row.ready_since_ms.map_or(since, |o| o.min(since)));
            }
        }
        true
    })
    .await?;
    let rows: Vec<TypeRow> = rows.into_values().collect();
    // The runs of the last 24 hours, by hour (left out when the store cannot say).
    let stats = engine.run_stats(24).await.ok();
    Ok(html(pages::workflows(
        &frame(&csrf, &login),
        &base_url(&headers),
        &rows,
        stats.as_ref(),
        now,
        complete,
    )))
}

// ---- instances ------------------------------------------------------------------------------

/// The filters of the instances page.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct InstanceFilter {
    #[serde(default, rename = "type")]
    pub(crate) workflow_type: Option<String>,
    #[serde(default)]
    pub(crate) version: Option<String>,
    #[serde(default)]
    pub(crate) status: Option<String>,
    #[serde(default)]
    pub(crate) prefix: Option<String>,
    #[serde(default)]
    pub(crate) after: Option<String>,
}

/// Instances per page.
const PAGE: usize = 50;

pub(super) async fn instances_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    Query(filter): Query<InstanceFilter>,
) -> Page {
    let engine = engine(&state);
    let some = |o: &Option<String>| o.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    let (t, v, s, p) = (
        some(&filter.workflow_type),
        some(&filter.version),
        some(&filter.status),
        some(&filter.prefix),
    );
    let after = some(&filter.after);
    let mut shown = Vec::new();
    let mut more = false;
    scan(engine, |inst| {
        if after.as_deref().is_some_and(|a| inst.id.as_str() <= a) {
            return true;
        }
        let fits = t.as_deref().is_none_or(|t| t == inst.workflow_type)
            && v.as_deref().is_none_or(|v| v == inst.version)
            && s.as_deref().is_none_or(|s| s == inst.status.as_str())
            && p.as_deref().is_none_or(|p| inst.id.starts_with(p));
        if fits {
            if shown.len() == PAGE {
                more = true;
                return false;
            }
            shown.push(inst);
        }
        true
    })
    .await?;
    let next = more.then(|| shown.last().map(|i| i.id.clone())).flatten();
    Ok(html(pages::instances(
        &frame(&csrf, &login),
        &filter,
        &shown,
        next.as_deref(),
        now_ms(&state),
    )))
}

// ---- one instance ---------------------------------------------------------------------------

#[derive(Deserialize)]
pub(super) struct InstanceQuery {
    pub(super) id: String,
    /// The newest turn of the history page (absent: the newest kept).
    #[serde(default)]
    pub(super) before: Option<u64>,
    /// The queue's order: `newest` first, or oldest first (the default).
    #[serde(default)]
    pub(super) queue: Option<String>,
    /// The Runs section's page: the cursor of the runs API (absent: the newest runs).
    #[serde(default)]
    pub(super) runs: Option<String>,
}

/// Finished turns per page.
const TURNS_PAGE: u64 = 10;

/// Everything the instance page shows.
pub(crate) struct InstanceView {
    pub(crate) instance: WorkflowInstance,
    pub(crate) queue: InboxResponse,
    pub(crate) newest_first: bool,
    pub(crate) turns: Vec<WorkflowTurn>,
    pub(crate) older: Option<u64>,
    pub(crate) newer: Option<u64>,
    /// A page of the instance's runs, newest first.
    pub(crate) runs: RunPage,
    /// Whether that page is a later one (its cursor was given): the page links the newest.
    pub(crate) runs_later: bool,
    pub(crate) schema: Option<SchemaDocument>,
    pub(crate) now_ms: i64,
}

/// Runs per page of the instance's **Runs** section.
const RUNS_PAGE: u32 = 20;

/// A page of the instance's runs from the runs API, newest first, from `cursor` on (the
/// `next_cursor` of the page before; absent: the newest).
async fn instance_runs(engine: &Engine, id: &str, cursor: Option<&str>) -> Result<RunPage, Fail> {
    let mut q = RunsQuery::instance(id).limit(RUNS_PAGE);
    if let Some(c) = cursor.filter(|c| !c.is_empty()) {
        q = q.cursor(c);
    }
    Ok(engine.runs(q).await?)
}

/// The registered schema document of a type and version, if any.
pub(super) async fn schema_of(
    state: &AppState,
    workflow_type: &str,
    version: &str,
) -> Option<SchemaDocument> {
    let doc = engine(state)
        .schema_documents(Some(workflow_type), Some(version))
        .await
        .ok()?
        .into_iter()
        .next()?;
    serde_json::from_value(doc).ok()
}

pub(super) async fn load_instance(
    state: &AppState,
    q: &InstanceQuery,
) -> Result<InstanceView, Fail> {
    let engine = engine(state);
    let instance = engine.get_instance(&q.id).await?;
    let queue = engine
        .instance_inbox(InboxQuery {
            id: q.id.clone(),
            after: None,
            limit: Some(100),
            payloads: false,
        })
        .await?;
    let newest = instance.history_through;
    let top = q.before.unwrap_or(newest).min(newest);
    let from = top.saturating_sub(TURNS_PAGE);
    let mut turns = if top == 0 {
        Vec::new()
    } else {
        engine
            .history(HistoryQuery {
                id: q.id.clone(),
                after: Some(from),
                limit: Some(TURNS_PAGE as u32),
            })
            .await?
            .turns
    };
    turns.retain(|t| t.number <= top);
    turns.reverse();
    let pruned = instance.history_pruned_through.unwrap_or(0);
    let older = (from > pruned).then_some(from);
    let newer = (top < newest).then(|| (top + TURNS_PAGE).min(newest));
    let runs = instance_runs(engine, &q.id, q.runs.as_deref()).await?;
    let schema = schema_of(state, &instance.workflow_type, &instance.version).await;
    Ok(InstanceView {
        newest_first: q.queue.as_deref() == Some("newest"),
        instance,
        queue,
        turns,
        older,
        newer,
        runs,
        runs_later: q.runs.as_deref().is_some_and(|c| !c.is_empty()),
        schema,
        now_ms: now_ms(state),
    })
}

pub(super) async fn instance_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    Query(q): Query<InstanceQuery>,
) -> Page {
    let view = load_instance(&state, &q).await?;
    Ok(html(pages::instance(
        &frame(&csrf, &login),
        &view,
        &pages::Pending::default(),
    )))
}

/// The live part of the instance page (status, Running line, operation, waits), polled by the
/// page's script.
pub(super) async fn instance_live(
    State(state): State<AppState>,
    Query(q): Query<InstanceQuery>,
) -> Page {
    let instance = engine(&state).get_instance(&q.id).await?;
    let mut res = html(pages::live(&instance, now_ms(&state)));
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

#[derive(Deserialize)]
pub(super) struct RunQuery {
    run: String,
}

/// Everything of one run (`/console/run?run=<id>`).
pub(super) async fn run_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    Query(q): Query<RunQuery>,
) -> Page {
    let run = engine(&state).run(&q.run).await?;
    Ok(html(pages::run(
        &frame(&csrf, &login),
        &run,
        now_ms(&state),
    )))
}

#[derive(Deserialize)]
pub(super) struct PayloadQuery {
    id: String,
    turn: u64,
}

/// One message of the queue, opened on demand.
pub(super) async fn payload(State(state): State<AppState>, Query(q): Query<PayloadQuery>) -> Page {
    let turn = engine(&state)
        .turn(TurnQuery {
            id: q.id,
            turn: q.turn,
        })
        .await?;
    Ok(html(pages::json_block(&turn.message)))
}

// ---- new instance and schemas ---------------------------------------------------------------

#[derive(Deserialize)]
pub(super) struct NewQuery {
    #[serde(default, rename = "type")]
    workflow_type: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

pub(super) async fn new_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    Query(q): Query<NewQuery>,
) -> Page {
    let docs = registered(&state).await;
    let chosen = match (q.workflow_type, q.version) {
        (Some(t), Some(v)) if !t.is_empty() => Some((t, v)),
        _ => None,
    };
    Ok(html(pages::new_instance(
        &frame(&csrf, &login),
        &docs,
        chosen.as_ref().map(|(t, v)| (t.as_str(), v.as_str())),
        &pages::Pending::default(),
    )))
}

pub(super) async fn registered(state: &AppState) -> Vec<SchemaDocument> {
    engine(state)
        .schema_documents(None, None)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| serde_json::from_value(d).ok())
        .collect()
}

pub(super) async fn schemas_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
) -> Page {
    Ok(html(pages::schemas(
        &frame(&csrf, &login),
        &registered(&state).await,
    )))
}

#[derive(Deserialize)]
pub(super) struct SchemaQuery {
    #[serde(rename = "type")]
    workflow_type: String,
    version: String,
}

pub(super) async fn schema_download(
    State(state): State<AppState>,
    Query(q): Query<SchemaQuery>,
) -> Page {
    let doc = engine(&state)
        .schema_documents(Some(&q.workflow_type), Some(&q.version))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            Fail::new(
                StatusCode::NOT_FOUND,
                format!(
                    "no schemas are registered for {} {}",
                    q.workflow_type, q.version
                ),
            )
        })?;
    let body = serde_json::to_string_pretty(&doc).unwrap_or_default();
    let file = format!("{}-{}.schema.json", q.workflow_type, q.version);
    let mut res = ([(CONTENT_TYPE, "application/json")], body).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        res.headers_mut().insert(CONTENT_DISPOSITION, v);
    }
    Ok(res)
}

// ---- the login page -----------------------------------------------------------------------------

pub(super) async fn login_page(Extension(csrf): Extension<Csrf>) -> Response {
    html(pages::login(&csrf.0, None))
}
