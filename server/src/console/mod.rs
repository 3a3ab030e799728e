//! The console: server-rendered pages at `/console` to see and operate the workflows of the
//! default namespace in a browser (`docs/console.md`).
//!
//! Reading goes through the engine, as the API's reads do; every action goes through the same
//! engine call and the same schema check as its API route, with the message origin kind
//! `console`. The pages are HTML made with maud; a little script of our own (served from the
//! binary) adds the live parts (a poll of the Running line and status), the array and variant
//! controls of the generated forms, and the check of a form against its schema's bounds before
//! it is sent. Without the script every page still reads.

mod auth;
pub mod forms;
mod pages;

use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Engine};

use crate::error::ApiError;
use crate::AppState;

pub(crate) use auth::{Csrf, Login};

/// Where the console is mounted.
pub(crate) const PREFIX: &str = "/console";
pub(crate) const LOGIN: &str = "/console/login";
pub(crate) const CSS: &str = "/console/assets/console.css";
pub(crate) const JS: &str = "/console/assets/console.js";
/// The live part of an instance page, polled every second by its script.
pub(crate) const LIVE: &str = "/console/instance/live";

/// The console's routes, behind its guard (token and CSRF cookie, [`auth::guard`]).
pub(crate) fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route(PREFIX, get(workflows_page))
        .route("/console/", get(workflows_page))
        .route("/console/instances", get(instances_page))
        .route("/console/instance", get(instance_page))
        .route(LIVE, get(instance_live))
        .route("/console/run", get(run_page))
        .route("/console/instance/payload", get(payload))
        .route("/console/new", get(new_page))
        .route("/console/schemas", get(schemas_page))
        .route("/console/schemas/download", get(schema_download))
        .route(LOGIN, get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route("/console/create", post(create))
        .route("/console/message", post(message))
        .route("/console/signal", post(signal))
        .route("/console/control", post(control))
        .route("/console/delete", post(delete))
        .route(CSS, get(css))
        .route(JS, get(js))
        .route_layer(middleware::from_fn_with_state(state, auth::guard))
}

/// A refusal shown as a page (the console's counterpart of the API's error envelope).
#[derive(Debug)]
pub struct Fail {
    status: StatusCode,
    message: String,
}

impl Fail {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Fail {
            status,
            message: message.into(),
        }
    }
}

impl From<ApiError> for Fail {
    fn from(e: ApiError) -> Self {
        Fail::new(e.status, e.message.clone())
    }
}

impl From<turnwise::Error> for Fail {
    fn from(e: turnwise::Error) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (
            self.status,
            html(pages::failure(self.status, &self.message)),
        )
            .into_response()
    }
}

type Page = Result<Response, Fail>;

fn html(markup: maud::Markup) -> Response {
    Html(markup.into_string()).into_response()
}

fn see_other(to: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        res.headers_mut().insert(LOCATION, v);
    }
    res
}

/// What every page's frame needs: the CSRF token for its forms, whether to offer logout.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub(crate) csrf: String,
    pub(crate) login: bool,
}

fn frame(csrf: &Csrf, login: &Login) -> Frame {
    Frame {
        csrf: csrf.0.clone(),
        login: login.required,
    }
}

/// The console reads and writes the default namespace.
fn engine(state: &AppState) -> &Engine {
    &state.default_ns
}

fn now_ms(state: &AppState) -> i64 {
    engine(state).clock().now_ms()
}

// ---- assets ---------------------------------------------------------------------------------

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    )
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [(CONTENT_TYPE, kind), (CACHE_CONTROL, "public, max-age=300")],
        body,
    )
        .into_response()
}

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

async fn scan(
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

async fn workflows_page(
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

async fn instances_page(
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
struct InstanceQuery {
    id: String,
    /// The newest turn of the history page (absent: the newest kept).
    #[serde(default)]
    before: Option<u64>,
    /// The queue's order: `newest` first, or oldest first (the default).
    #[serde(default)]
    queue: Option<String>,
    /// The Runs section's page: the cursor of the runs API (absent: the newest runs).
    #[serde(default)]
    runs: Option<String>,
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
async fn schema_of(state: &AppState, workflow_type: &str, version: &str) -> Option<SchemaDocument> {
    let doc = engine(state)
        .schema_documents(Some(workflow_type), Some(version))
        .await
        .ok()?
        .into_iter()
        .next()?;
    serde_json::from_value(doc).ok()
}

async fn load_instance(state: &AppState, q: &InstanceQuery) -> Result<InstanceView, Fail> {
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

async fn instance_page(
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
async fn instance_live(State(state): State<AppState>, Query(q): Query<InstanceQuery>) -> Page {
    let instance = engine(&state).get_instance(&q.id).await?;
    let mut res = html(pages::live(&instance, now_ms(&state)));
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

#[derive(Deserialize)]
struct RunQuery {
    run: String,
}

/// Everything of one run (`/console/run?run=<id>`).
async fn run_page(
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
struct PayloadQuery {
    id: String,
    turn: u64,
}

/// One message of the queue, opened on demand.
async fn payload(State(state): State<AppState>, Query(q): Query<PayloadQuery>) -> Page {
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
struct NewQuery {
    #[serde(default, rename = "type")]
    workflow_type: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

async fn new_page(
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

async fn registered(state: &AppState) -> Vec<SchemaDocument> {
    engine(state)
        .schema_documents(None, None)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| serde_json::from_value(d).ok())
        .collect()
}

async fn schemas_page(
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
struct SchemaQuery {
    #[serde(rename = "type")]
    workflow_type: String,
    version: String,
}

async fn schema_download(State(state): State<AppState>, Query(q): Query<SchemaQuery>) -> Page {
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

// ---- login ----------------------------------------------------------------------------------

async fn login_page(Extension(csrf): Extension<Csrf>) -> Response {
    html(pages::login(&csrf.0, None))
}

async fn login(
    State(state): State<AppState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let secure = auth::over_tls(&headers, &uri);
    let form = forms::FormData::parse(&body);
    auth::check_csrf(&headers, &form)?;
    let csrf = auth::cookie(&headers, auth::CSRF_COOKIE).unwrap_or_default();
    let given = form.get("token").unwrap_or("");
    match state.options.api_token.as_deref() {
        None => Ok(see_other(PREFIX)),
        Some(expected) => match auth::login_cookie(Some(expected), given, secure) {
            Some(cookie) => {
                let mut res = see_other(PREFIX);
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    res.headers_mut().append(SET_COOKIE, v);
                }
                Ok(res)
            }
            None => Ok((
                StatusCode::UNAUTHORIZED,
                html(pages::login(csrf, Some("That is not this server's token."))),
            )
                .into_response()),
        },
    }
}

async fn logout(uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes) -> Page {
    auth::check_csrf(&headers, &forms::FormData::parse(&body))?;
    let mut res = see_other(LOGIN);
    if let Ok(v) = HeaderValue::from_str(&auth::logout_cookie(auth::over_tls(&headers, &uri))) {
        res.headers_mut().append(SET_COOKIE, v);
    }
    Ok(res)
}

// ---- actions --------------------------------------------------------------------------------

/// The origin of everything the console admits.
fn origin(form: &forms::FormData) -> MessageOrigin {
    let mut o = MessageOrigin::new("console");
    if let Some(note) = form.get("note").filter(|n| !n.trim().is_empty()) {
        o.fields.insert("note".into(), json!(note));
    }
    o
}

/// Read a form's body after the CSRF check.
fn read_form(headers: &HeaderMap, body: &[u8]) -> Result<forms::FormData, Fail> {
    let form = forms::FormData::parse(body);
    auth::check_csrf(headers, &form)?;
    Ok(form)
}

fn required<'a>(form: &'a forms::FormData, name: &str) -> Result<&'a str, Fail> {
    form.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        Fail::new(
            StatusCode::BAD_REQUEST,
            format!("the form has no `{name}`; submit it from the console's page"),
        )
    })
}

fn instance_url(id: &str) -> String {
    let q: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("id", id)
        .finish();
    format!("/console/instance?{q}")
}

/// The errors of a server refusal, by form field: the schema check's `details.errors` mapped to
/// their fields, the message itself at the root.
fn refusal_errors(e: &ApiError, field: &forms::Field, value: &Value) -> forms::Errors {
    let mut errors = forms::Errors::new();
    let listed = e
        .details
        .as_ref()
        .and_then(|d| d.get("errors"))
        .and_then(Value::as_array);
    for item in listed.into_iter().flatten() {
        let at = item["instance_path"].as_str().unwrap_or("");
        let path = forms::path_of(field, forms::ROOT, at, value);
        let message = item["message"]
            .as_str()
            .unwrap_or("does not match the schema");
        errors.entry(path).or_default().push(message.to_owned());
    }
    errors
}

/// Re-show the instance page with a form's refusal beside its fields (`400` or the engine's
/// status).
async fn refused(
    state: &AppState,
    csrf: &Csrf,
    login: &Login,
    id: &str,
    pending: pages::Pending,
    status: StatusCode,
) -> Page {
    let view = load_instance(
        state,
        &InstanceQuery {
            id: id.to_owned(),
            before: None,
            queue: None,
            runs: None,
        },
    )
    .await?;
    let page = pages::instance(&frame(csrf, login), &view, &pending);
    Ok((status, html(page)).into_response())
}

async fn message(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let message_id = required(&form, "message_id")?.to_owned();
    let engine = engine(&state);
    let inst = engine.get_instance(&id).await?;
    let schema = schema_of(&state, &inst.workflow_type, &inst.version).await;
    let field = forms::Field::from_schema(schema.as_ref().map_or(&Value::Null, |d| &d.message));
    let value = match forms::value_of(&field, forms::ROOT, &form) {
        Ok(v) => v,
        Err(errors) => {
            let pending = pages::Pending::message(None, errors, "the form has fields to correct");
            return refused(&state, &csrf, &login, &id, pending, StatusCode::BAD_REQUEST).await;
        }
    };
    // The API route's engine call, which checks the registered schema first.
    let sent = engine
        .send_message(MessageRequest {
            workflow_id: id.clone(),
            id: message_id,
            message: value.clone(),
            origin: Some(origin(&form)),
        })
        .await
        .map_err(ApiError::from);
    match sent {
        Ok(_) => Ok(see_other(&instance_url(&id))),
        Err(e) => {
            let errors = refusal_errors(&e, &field, &value);
            let pending = pages::Pending::message(Some(value), errors, &e.message);
            refused(&state, &csrf, &login, &id, pending, e.status).await
        }
    }
}

async fn signal(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let name = required(&form, "name")?.to_owned();
    let signal_id = required(&form, "signal_id")?.to_owned();
    let turn: u64 = required(&form, "turn")?
        .parse()
        .map_err(|_| Fail::new(StatusCode::BAD_REQUEST, "`turn` is not a turn number"))?;
    let engine = engine(&state);
    let inst = engine.get_instance(&id).await?;
    let schema = schema_of(&state, &inst.workflow_type, &inst.version).await;
    let field = forms::Field::from_schema(
        schema
            .as_ref()
            .and_then(|d| d.signals.get(&name))
            .unwrap_or(&Value::Null),
    );
    let value = match forms::value_of(&field, forms::ROOT, &form) {
        Ok(v) => v,
        Err(errors) => {
            let pending =
                pages::Pending::signal(&name, None, errors, "the form has fields to correct");
            return refused(&state, &csrf, &login, &id, pending, StatusCode::BAD_REQUEST).await;
        }
    };
    // The API route's engine call, which checks the registered schema first.
    let sent = engine
        .signal(SignalRequest {
            workflow_id: id.clone(),
            turn,
            id: signal_id,
            name: name.clone(),
            value: value.clone(),
        })
        .await
        .map_err(ApiError::from);
    match sent {
        Ok(_) => Ok(see_other(&instance_url(&id))),
        Err(e) => {
            let errors = refusal_errors(&e, &field, &value);
            let pending = pages::Pending::signal(&name, Some(value), errors, &e.message);
            refused(&state, &csrf, &login, &id, pending, e.status).await
        }
    }
}

async fn create(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let workflow_type = required(&form, "workflow_type")?.to_owned();
    let version = required(&form, "version")?.to_owned();
    let id = required(&form, "id")?.to_owned();
    let schema = schema_of(&state, &workflow_type, &version).await;
    let field = forms::Field::from_schema(schema.as_ref().map_or(&Value::Null, |d| &d.state));
    let docs = registered(&state).await;
    let again = |errors: forms::Errors, value: Option<Value>, message: &str, status| {
        let pending = pages::Pending::message(value, errors, message);
        let page = pages::new_instance(
            &frame(&csrf, &login),
            &docs,
            Some((&workflow_type, &version)),
            &pending,
        );
        Ok((status, html(page)).into_response())
    };
    let state_value = match forms::value_of(&field, forms::ROOT, &form) {
        Ok(v) => v,
        Err(errors) => {
            return again(
                errors,
                None,
                "the form has fields to correct",
                StatusCode::BAD_REQUEST,
            )
        }
    };
    let number = |name: &str| form.get(name).and_then(|v| v.trim().parse::<u64>().ok());
    let created = engine(&state)
        .create_instance(CreateInstanceRequest {
            id: id.clone(),
            workflow_type: workflow_type.clone(),
            version: version.clone(),
            state: state_value.clone(),
            lease_ms: number("lease_ms"),
            max_attempts: number("max_attempts").map(|n| n.min(u32::MAX as u64) as u32),
            on_exhausted: match form.get("on_exhausted") {
                Some("skip") => Some(OnExhausted::Skip),
                Some("block") => Some(OnExhausted::Block),
                _ => None,
            },
        })
        .await;
    match created {
        Ok(inst) => Ok(see_other(&instance_url(&inst.id))),
        Err(e) => {
            let e = ApiError::from(e);
            again(
                forms::Errors::new(),
                Some(state_value),
                &e.message,
                e.status,
            )
        }
    }
}

async fn control(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let action = required(&form, "action")?;
    let action: ControlAction = serde_json::from_value(json!(action)).map_err(|_| {
        Fail::new(
            StatusCode::BAD_REQUEST,
            format!(
                "`{action}` is not an action; use one of {}",
                ControlAction::ALL.join(", ")
            ),
        )
    })?;
    let turn = form.get("turn").and_then(|t| t.parse::<u64>().ok());
    engine(&state)
        .control(ControlRequest {
            workflow_id: id.clone(),
            action,
            turn,
        })
        .await?;
    Ok(see_other(&instance_url(&id)))
}

async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    engine(&state)
        .delete_instance(DeleteRequest { workflow_id: id })
        .await?;
    Ok(see_other("/console/instances"))
}
