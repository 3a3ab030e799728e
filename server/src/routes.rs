//! The routes: each parses its request, calls the engine, and answers its value.

use std::time::{Duration, Instant};

use axum::extract::{OriginalUri, State};
use axum::http::StatusCode;
use axum::routing::{get, on, post, MethodFilter, MethodRouter};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use turnwise::protocol::*;
use turnwise::Backend;
use turnwise_rules::{Method, Route};

use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Ns, Query};
use crate::schemas::SchemaDocument;
use crate::AppState;

/// The handler of each route of the protocol's table (`turnwise_rules::Route`), registered
/// under the table's method and path.
fn handler(route: Route) -> MethodRouter<AppState> {
    let method = match route.method() {
        Method::Get => MethodFilter::GET,
        Method::Post => MethodFilter::POST,
    };
    match route {
        Route::CreateInstance => on(method, create),
        Route::ListInstances => on(method, list),
        Route::GetInstance => on(method, get_instance),
        Route::SendMessage => on(method, message),
        Route::InstanceInbox => on(method, inbox),
        Route::TypeInbox => on(method, type_inbox),
        Route::History => on(method, history),
        Route::Turn => on(method, turn),
        Route::Control => on(method, control),
        Route::Delete => on(method, delete),
        Route::Claim => on(method, claim),
        Route::Operation => on(method, operation),
        Route::Progress => on(method, progress),
        Route::Checkpoint => on(method, checkpoint),
        Route::WaitSignal => on(method, wait_signal),
        Route::Signal => on(method, signal),
        Route::Complete => on(method, complete),
        Route::Fail => on(method, fail),
        Route::Heartbeat => on(method, heartbeat),
        Route::Status => on(method, status),
        Route::ListSchemas => on(method, list_schemas),
        Route::RegisterSchema => on(method, register_schema),
        Route::Runs => on(method, runs),
        Route::GetRun => on(method, get_run),
        Route::RunStats => on(method, run_stats),
        Route::CreateSchedule => on(method, create_schedule),
        Route::ListSchedules => on(method, list_schedules),
        Route::GetSchedule => on(method, get_schedule),
        Route::ControlSchedule => on(method, control_schedule),
        Route::RestartTurn => on(method, restart_turn),
        Route::ForkInstance => on(method, fork_instance),
        Route::CompatLive => on(method, compat_live),
        Route::UpgradeInstances => on(method, upgrade_instances),
    }
}

pub(crate) fn routes() -> Router<AppState> {
    // Routes sharing a path (create and list, the two schema routes) merge into one method
    // router; the table has no method and path twice (the rules crate tests that).
    let offered = Route::ALL.into_iter().fold(Router::new(), |router, route| {
        router.route(route.path(), handler(route))
    });
    offered
        // For load balancers and orchestrators: no token, no namespace (see `layers::is_probe`).
        .route(HEALTHZ, get(healthz))
        .route(READYZ, get(readyz))
        .route(METRICS, get(metrics))
        // Routes of the wire that this server does not offer: a clear refusal, never a retry.
        .route(
            "/v1/workflows/turns/execution-credential",
            post(unsupported),
        )
        .route("/v1/workflows/blobs", get(unsupported).post(unsupported))
        .route("/v1/workflows/activities/{kind}", post(unsupported))
        .route("/v1/workflows/named/requeue", post(unsupported))
        .route("/v1/reviews", get(unsupported).post(unsupported))
        .route("/v1/graph/commit", post(unsupported))
        .fallback(not_found)
}

async fn not_found(OriginalUri(uri): OriginalUri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "there is no route {}; see docs/http.md for the routes",
            uri.path()
        ),
    )
}

async fn unsupported(OriginalUri(uri): OriginalUri) -> ApiError {
    ApiError::not_supported(uri.path())
}

// ---- instances ----------------------------------------------------------------------------

async fn create(
    Ns(engine): Ns,
    Body(req): Body<CreateInstanceRequest>,
) -> ApiResult<Json<WorkflowInstance>> {
    Ok(Json(engine.create_instance(req).await?))
}

async fn list(
    Ns(engine): Ns,
    Query(q): Query<ListInstancesQuery>,
) -> ApiResult<Json<InstanceList>> {
    Ok(Json(engine.list_instances(q).await?))
}

#[derive(Deserialize)]
struct IdQuery {
    id: String,
}

async fn get_instance(
    Ns(engine): Ns,
    Query(q): Query<IdQuery>,
) -> ApiResult<Json<WorkflowInstance>> {
    Ok(Json(engine.get_instance(&q.id).await?))
}

/// The engine checks the message against its registered schema before writing anything.
async fn message(Ns(engine): Ns, Body(req): Body<MessageRequest>) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.send_message(req).await?))
}

// ---- schedules (a turnwise extension) ------------------------------------------------------

/// The engine checks the message against the registered schema, as for a message.
async fn create_schedule(
    Ns(engine): Ns,
    Body(req): Body<CreateScheduleRequest>,
) -> ApiResult<Json<WorkflowSchedule>> {
    Ok(Json(engine.create_schedule(req).await?))
}

async fn list_schedules(
    Ns(engine): Ns,
    Query(q): Query<ListSchedulesQuery>,
) -> ApiResult<Json<ScheduleList>> {
    Ok(Json(engine.list_schedules(q).await?))
}

#[derive(Deserialize)]
struct ScheduleRead {
    workflow_id: String,
    name: String,
}

async fn get_schedule(
    Ns(engine): Ns,
    Query(q): Query<ScheduleRead>,
) -> ApiResult<Json<WorkflowSchedule>> {
    Ok(Json(engine.get_schedule(&q.workflow_id, &q.name).await?))
}

async fn control_schedule(
    Ns(engine): Ns,
    Body(req): Body<ScheduleControlRequest>,
) -> ApiResult<Json<ScheduleControlResponse>> {
    Ok(Json(engine.control_schedule(req).await?))
}

// ---- versions (a turnwise extension) -------------------------------------------------------

/// Every instance of the type not on the target, each with its verdict (not paged).
async fn compat_live(
    Ns(engine): Ns,
    Query(q): Query<LiveCompatQuery>,
) -> ApiResult<Json<LiveCompat>> {
    Ok(Json(engine.compat_live(q).await?))
}

/// Each instance is checked again, and moved, in its own conditional commit.
async fn upgrade_instances(
    Ns(engine): Ns,
    Body(req): Body<UpgradeRequest>,
) -> ApiResult<Json<UpgradeResponse>> {
    Ok(Json(engine.upgrade_instances(req).await?))
}

async fn inbox(Ns(engine): Ns, Query(q): Query<InboxQuery>) -> ApiResult<Json<InboxResponse>> {
    Ok(Json(engine.instance_inbox(q).await?))
}

async fn type_inbox(
    Ns(engine): Ns,
    Query(q): Query<TypeInboxQuery>,
) -> ApiResult<Json<TypeInboxResponse>> {
    Ok(Json(engine.type_inbox(q).await?))
}

async fn control(
    Ns(engine): Ns,
    Body(req): Body<ControlRequest>,
) -> ApiResult<Json<WorkflowInstance>> {
    Ok(Json(engine.control(req).await?))
}

// ---- ways out of a suspension (turnwise extensions) ----------------------------------------

/// Conditional on the turn being suspended (`409 turn_not_suspended`); an exact repeat answers
/// the restart as it was made.
async fn restart_turn(
    Ns(engine): Ns,
    Body(req): Body<RestartTurnRequest>,
) -> ApiResult<Json<RestartTurnResponse>> {
    Ok(Json(engine.restart_turn(req).await?))
}

/// Conditional on the head turn being suspended (`409 turn_not_suspended`); an exact repeat
/// answers the fork as it was made.
async fn fork_instance(
    Ns(engine): Ns,
    Body(req): Body<ForkInstanceRequest>,
) -> ApiResult<Json<ForkInstanceResponse>> {
    Ok(Json(engine.fork_instance(req).await?))
}

async fn delete(Ns(engine): Ns, Body(req): Body<DeleteRequest>) -> ApiResult<Json<DeleteResponse>> {
    Ok(Json(engine.delete_instance(req).await?))
}

async fn history(
    Ns(engine): Ns,
    Query(q): Query<HistoryQuery>,
) -> ApiResult<Json<HistoryResponse>> {
    Ok(Json(engine.history(q).await?))
}

async fn runs(Ns(engine): Ns, Query(q): Query<RunsQuery>) -> ApiResult<Json<RunPage>> {
    Ok(Json(engine.runs(q).await?))
}

#[derive(Deserialize)]
struct RunRead {
    run: String,
}

async fn get_run(Ns(engine): Ns, Query(q): Query<RunRead>) -> ApiResult<Json<WorkflowRun>> {
    Ok(Json(engine.run(&q.run).await?))
}

/// `hours`: 1–720, default 24.
#[derive(Deserialize)]
struct StatsRead {
    #[serde(default)]
    hours: Option<u32>,
}

async fn run_stats(Ns(engine): Ns, Query(q): Query<StatsRead>) -> ApiResult<Json<RunStats>> {
    Ok(Json(engine.run_stats(q.hours.unwrap_or(24)).await?))
}

/// The query of the turn route: LBB's `id` and `turn`, and the turnwise extension `wait_ms`.
#[derive(Deserialize)]
struct TurnRead {
    id: String,
    turn: u64,
    /// Answer once the turn is settled (`completed`, `failed`, `cancelled`, `suspended`), waiting up to
    /// this long (at most the claim wait) for one.
    #[serde(default)]
    wait_ms: Option<u64>,
}

async fn turn(
    State(state): State<AppState>,
    Ns(engine): Ns,
    Query(q): Query<TurnRead>,
) -> ApiResult<Json<WorkflowTurn>> {
    let query = TurnQuery {
        id: q.id,
        turn: q.turn,
    };
    let wait = Duration::from_millis(q.wait_ms.unwrap_or(0));
    if wait.is_zero() {
        return Ok(Json(engine.turn(query).await?));
    }
    // A server shutting down answers a waiting read at once with the turn as it is.
    let shutdown = &state.options.shutdown;
    let read = query.clone();
    tokio::select! {
        answer = engine.await_turn(query, wait) => Ok(Json(answer?)),
        () = shutdown.wait() => Ok(Json(engine.turn(read).await?)),
    }
}

// ---- turns --------------------------------------------------------------------------------

/// A waiting claim looks at the shutdown signal this often.
const CLAIM_SLICE: Duration = Duration::from_secs(1);

/// Long-poll in slices, so that a server shutting down answers waiting claims `{"task": null}`
/// at once instead of holding them. Each slice scans before it waits, so no wake-up between
/// slices is missed, and a slice is never cut short: a turn it claims is always answered.
async fn claim(
    State(state): State<AppState>,
    Ns(engine): Ns,
    Body(req): Body<ClaimRequest>,
) -> ApiResult<Json<ClaimResponse>> {
    let total = Duration::from_millis(req.wait_ms).min(engine.config().max_claim_wait);
    if total.is_zero() {
        // No wait (a worker polling, or a server shutting down): the loop below would make
        // exactly this one call, after copying the request for it.
        let mut req = req;
        req.wait_ms = 0;
        return Ok(Json(engine.claim(req).await?));
    }
    let deadline = Instant::now() + total;
    let shutdown = &state.options.shutdown;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let slice = if shutdown.is_triggered() {
            Duration::ZERO
        } else {
            left.min(CLAIM_SLICE)
        };
        let mut slice_req = req.clone();
        slice_req.wait_ms = slice.as_millis() as u64;
        let res = engine.claim(slice_req).await?;
        if res.task.is_some() || shutdown.is_triggered() || Instant::now() >= deadline {
            return Ok(Json(res));
        }
    }
}

async fn operation(
    Ns(engine): Ns,
    Body(req): Body<OperationRequest>,
) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.operation(req).await?))
}

async fn progress(
    Ns(engine): Ns,
    Body(req): Body<ProgressRequest>,
) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.progress(req).await?))
}

async fn checkpoint(
    Ns(engine): Ns,
    Body(req): Body<CheckpointRequest>,
) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.checkpoint(req).await?))
}

async fn wait_signal(
    Ns(engine): Ns,
    Body(req): Body<WaitSignalRequest>,
) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.wait_signal(req).await?))
}

/// The engine checks the value against the registered schema of its name before writing
/// anything.
async fn signal(Ns(engine): Ns, Body(req): Body<SignalRequest>) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.signal(req).await?))
}

async fn complete(
    Ns(engine): Ns,
    Body(req): Body<CompleteRequest>,
) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.complete(req).await?))
}

async fn fail(Ns(engine): Ns, Body(req): Body<FailRequest>) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.fail(req).await?))
}

async fn heartbeat(Ns(engine): Ns, Body(lease): Body<Lease>) -> ApiResult<Json<WorkflowTurn>> {
    Ok(Json(engine.heartbeat(lease).await?))
}

// ---- status and schemas -------------------------------------------------------------------

/// The liveness probe's path.
pub(crate) const HEALTHZ: &str = "/healthz";
/// The readiness probe's path.
pub(crate) const READYZ: &str = "/readyz";

/// The Prometheus page's path.
pub(crate) const METRICS: &str = "/metrics";

/// Only `GET /metrics` (a listener of its own).
pub(crate) fn metrics_routes() -> Router<AppState> {
    Router::new().route(METRICS, get(metrics))
}

/// The Prometheus text format: the recorder's series and the inbox gauges of the default
/// namespace (`crate::metrics`).
async fn metrics(State(state): State<AppState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let page = crate::metrics::render(state.options.metrics.as_ref(), &state.default_ns).await;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        page,
    )
        .into_response()
}

/// Liveness: the process serves requests. Touches neither the store nor the engine.
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: the store can take writes now ([`turnwise::Engine::health`], no query and no
/// write) and the server is not shutting down; `503` saying why otherwise.
async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    if state.options.shutdown.is_triggered() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down: send new requests to another instance",
        ));
    }
    state.engine.health().await?;
    Ok(Json(json!({"status": "ok"})))
}

/// The status route counts at most this many instances.
const STATUS_MAX_INSTANCES: usize = 10_000;

/// Health and counts of the namespace. A store that cannot take writes (its files deleted or
/// replaced, a failed sync, a failed last write) is a `503 store_unavailable`; so is a store
/// that fails to read, since this reads every instance (up to a cap).
async fn status(State(state): State<AppState>, Ns(engine): Ns) -> ApiResult<Json<Value>> {
    engine.health().await?;
    let mut by_status: Map<String, Value> = InstanceStatus::ALL
        .iter()
        .map(|s| ((*s).to_owned(), json!(0u64)))
        .collect();
    let (mut total, mut pending, mut completed) = (0u64, 0u64, 0u64);
    let mut after = None;
    let mut complete = true;
    loop {
        let page = engine
            .list_instances(ListInstancesQuery {
                after: after.take(),
                limit: Some(100),
            })
            .await?;
        for inst in &page.instances {
            total += 1;
            pending += inst.pending_messages;
            completed += inst.completed_turns;
            let slot = by_status
                .entry(inst.status.as_str().to_owned())
                .or_insert(json!(0u64));
            *slot = json!(slot.as_u64().unwrap_or(0) + 1);
        }
        match page.next_after {
            Some(next) if (total as usize) < STATUS_MAX_INSTANCES => after = Some(next),
            Some(_) => {
                complete = false;
                break;
            }
            None => break,
        }
    }
    Ok(Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "namespace": engine.ns(),
        "uptime_ms": state.started.elapsed().as_millis() as u64,
        "instances": total,
        "instances_by_status": by_status,
        "pending_messages": pending,
        "completed_turns": completed,
        "counts_complete": complete,
        "schemas": engine.schema_documents(None, None).await?.len(),
        "shutting_down": state.options.shutdown.is_triggered(),
    })))
}

/// Kept in the store per namespace, type and version, so it survives a restart.
async fn register_schema(
    Ns(engine): Ns,
    Body(doc): Body<SchemaDocument>,
) -> ApiResult<Json<Value>> {
    Ok(Json(engine.register_schema_document(doc).await?))
}

#[derive(Deserialize)]
struct SchemaQuery {
    workflow_type: Option<String>,
    version: Option<String>,
}

/// With both `workflow_type` and `version`: that document (404 when none is registered).
/// Otherwise `{"schemas": [...]}`, filtered by what was given.
async fn list_schemas(Ns(engine): Ns, Query(q): Query<SchemaQuery>) -> ApiResult<Json<Value>> {
    let found = engine
        .schema_documents(q.workflow_type.as_deref(), q.version.as_deref())
        .await?;
    match (&q.workflow_type, &q.version) {
        (Some(t), Some(v)) => found.into_iter().next().map(Json).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no schemas are registered for {t} {v}"),
            )
        }),
        _ => Ok(Json(json!({ "schemas": found }))),
    }
}
