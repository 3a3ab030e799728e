//! The turnwise HTTP server: the message-workflow API of `docs/http.md` over an [`Engine`].
//!
//! The routes are thin: each parses its request into the protocol types of
//! [`turnwise::protocol`], calls the engine in the namespace the request addresses, and answers
//! the engine's value or its error in the wire's envelope. Every rule lives in the engine, so a
//! request acknowledged with a 2xx has been committed by it.
//!
//! Tests and embedders start a server in-process:
//!
//! ```no_run
//! use turnwise_server::{router, serve, ServerOptions, Shutdown};
//!
//! # async fn run() -> std::io::Result<()> {
//! let engine = turnwise::Engine::in_memory();
//! let shutdown = Shutdown::new();
//! let options = ServerOptions::default().with_shutdown(shutdown.clone());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let app = router(engine, options);
//! let stop = shutdown.clone();
//! tokio::spawn(async move { serve(listener, app, stop.wait_owned()).await });
//! // … later:
//! shutdown.trigger();
//! # Ok(())
//! # }
//! ```

mod conn;
mod console;
mod extract;
mod routes;

pub mod error;
pub mod metrics;
pub mod schemas;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tracing::Instrument;
use turnwise::trace::TraceContext;
use turnwise::Engine;

pub use crate::error::ApiError;
pub use crate::schemas::SchemaDocument;

/// The largest request body accepted by default: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// How long a connection may take to send a request head (request line and headers) by
/// default: 10 s from its first byte, or from the connection's start for its first request.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request body may take to arrive by default: 30 s from its head. The handler's
/// own time (a claim's long-poll) does not count.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a kept-alive connection may stay idle between requests by default: 60 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How many connections are served at once by default; more wait until one closes.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The longest request target (path and query) accepted: 8 KiB (`414` past it).
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// The most header bytes (names and values) a request may carry: 32 KiB (`431` past it).
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// A shutdown signal shared by the routes and the caller of [`serve`].
///
/// Once triggered, waiting claims answer `{"task": null}` within about a second instead of
/// holding their connection for the whole long-poll, so a graceful shutdown does not wait for
/// them.
#[derive(Clone, Debug)]
pub struct Shutdown(Arc<watch::Sender<bool>>);

impl Shutdown {
    /// A signal that has not fired.
    pub fn new() -> Self {
        Self(Arc::new(watch::Sender::new(false)))
    }

    /// Fire the signal.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Whether the signal has fired.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Wait until the signal fires.
    pub async fn wait(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so this cannot fail while we wait.
        let _ = rx.wait_for(|fired| *fired).await;
    }

    /// [`Shutdown::wait`] as an owned future, for [`serve`].
    pub async fn wait_owned(self) {
        self.wait().await
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

/// How the server behaves.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    /// When set, every route but the `/healthz` and `/readyz` probes requires
    /// `Authorization: Bearer <token>` (401 otherwise).
    pub api_token: Option<String>,
    /// The largest request body, in bytes (413 past it). Default 1 MiB.
    pub body_limit: usize,
    /// Fired when the server stops; see [`Shutdown`].
    pub shutdown: Shutdown,
    /// How long a connection may take to send a request head: from its start for its first
    /// request, from the head's first byte after that. The connection is then closed (with a
    /// `408` when part of a head had come). Default [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// How long a request body may take to arrive, from the end of its head: `408` past it.
    /// Default [`DEFAULT_BODY_READ_TIMEOUT`].
    pub body_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    /// Default [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// How many connections [`serve_with`] serves at once; a further connection waits in the
    /// listen backlog until one closes. Default [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// The Prometheus recorder `GET /metrics` renders ([`metrics::install`]); without one the
    /// page has only the inbox gauges computed from the store.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            api_token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            shutdown: Shutdown::new(),
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            metrics: None,
        }
    }
}

impl ServerOptions {
    /// Require this bearer token on every request.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.api_token = Some(token.into());
        self
    }

    /// Accept bodies up to `bytes`.
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Use this shutdown signal.
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Close a connection that takes longer than this to send a request head.
    pub fn with_header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Refuse with `408` a request whose body takes longer than this to arrive.
    pub fn with_body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// Close a kept-alive connection idle for this long.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Render this Prometheus recorder at `GET /metrics` ([`metrics::install`]).
    pub fn with_metrics(mut self, handle: metrics_exporter_prometheus::PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Serve at most this many connections at once (at least 1).
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) engine: Engine,
    /// `engine` addressing the default namespace, for requests that name no other.
    pub(crate) default_ns: Engine,
    pub(crate) options: Arc<ServerOptions>,
    pub(crate) started: Instant,
}

/// The server's routes over `engine`, `GET /metrics` among them (with the bearer token when
/// one is set).
pub fn router(engine: Engine, options: ServerOptions) -> Router {
    let state = AppState::new(engine, options);
    let console = console::routes(state.clone());
    layered(routes::routes().merge(console), state)
}

/// Only `GET /metrics`, for a listener of its own (`turnwise serve --metrics-bind`): served
/// without the bearer token, so bind it where only the monitoring can reach it.
pub fn metrics_router(engine: Engine, options: ServerOptions) -> Router {
    let mut options = options;
    options.api_token = None;
    let state = AppState::new(engine, options);
    layered(routes::metrics_routes(), state)
}

impl AppState {
    fn new(engine: Engine, options: ServerOptions) -> Self {
        AppState {
            default_ns: engine.namespace(turnwise::engine::DEFAULT_NAMESPACE),
            engine,
            options: Arc::new(options),
            started: Instant::now(),
        }
    }
}

/// `routes` with the limits, the panic guard and the request context every request goes
/// through.
fn layered(routes: Router<AppState>, state: AppState) -> Router {
    let limit = state.options.body_limit;
    routes
        .layer(DefaultBodyLimit::max(limit))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(
            state.options.clone(),
            request_context,
        ))
        .with_state(state)
}

/// [`serve_with`] with the default connection limits and timeouts of [`ServerOptions`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, &ServerOptions::default(), shutdown).await
}

/// Serve `router` on `listener` until `shutdown` completes, then stop accepting connections and
/// let the requests in flight finish (at most [`SHUTDOWN_GRACE`]).
///
/// The connection limits come from `options`: [`ServerOptions::header_read_timeout`],
/// [`ServerOptions::body_read_timeout`], [`ServerOptions::idle_timeout`] and
/// [`ServerOptions::max_connections`] (pass the options the router was made with). An error
/// accepting a connection (out of file descriptors, say) pauses the accept loop, from 10 ms
/// doubling up to 1 s, and never stops the server.
///
/// A request is acknowledged only after the engine committed it, so stopping loses nothing
/// that was acknowledged; a request cut off by the grace period was never answered, and its
/// client retries it.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    options: &ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    conn::serve(listener, router, options, shutdown).await
}

/// How long a graceful shutdown waits for requests in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// A handler panicked: answer `500 internal_error` instead of dropping the connection.
fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        "the server failed while handling this request; nothing was acknowledged",
    )
    .into_response()
}

/// The refusal of a request without the configured bearer token, if it is one.
fn authenticate(options: &ServerOptions, req: &Request) -> Option<ApiError> {
    let mut given = req
        .headers()
        .get_all(axum::http::header::AUTHORIZATION)
        .iter();
    if given.next().is_some() && given.next().is_some() {
        // Which one would count is ambiguous, whether or not a token is configured.
        return Some(
            ApiError::invalid(
                None,
                "the request has more than one Authorization header; send exactly one",
            )
            .with_param("authorization"),
        );
    }
    let expected = options.api_token.as_deref()?;
    let given = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let token = given.and_then(|v| {
        let (scheme, rest) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    match token {
        Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => None,
        Some(_) => Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is not valid for this server",
        )),
        None => Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server requires `Authorization: Bearer <token>` (the token it was started with)",
        )),
    }
}

/// Whether `path` is one of the two probes (`GET /healthz`, `GET /readyz`), the only routes
/// served without the bearer token: they say whether the server is up, nothing about its data.
fn is_probe(path: &str) -> bool {
    path == routes::HEALTHZ || path == routes::READYZ
}

/// Whether `path` is the console's (`/console` and below): pages and forms, with their own
/// authentication (`console::auth`) and HTML refusals.
fn is_console(path: &str) -> bool {
    path == console::PREFIX || path.starts_with("/console/")
}

/// Compare without leaking where the first difference is (only whether the lengths differ).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

/// With the `otel` feature: make the request span's OpenTelemetry parent the caller's span
/// (or, for a request without `traceparent`, a parent in the trace the span records), so that
/// the exported trace id is the `trace_id` field's.
#[cfg(feature = "otel")]
fn otel_parent(span: &tracing::Span, parent: &TraceContext) {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&parent.trace_id()),
        SpanId::from_hex(&parent.span_id()),
    ) else {
        return;
    };
    let flags = if parent.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let remote = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}

/// The W3C trace context header.
const TRACEPARENT: &str = "traceparent";

/// A request id: `req_` and 24 hex digits, unique within the process and unlikely to repeat
/// across restarts.
fn request_id() -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        format!("req_{:016x}", h.finish())
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // `format!("{prefix}{n:08x}")` without the formatting machinery, once per request.
    let mut id = String::with_capacity(prefix.len() + 16);
    id.push_str(prefix);
    push_hex(&mut id, n, 8);
    id
}

/// `n` in lowercase hex, with leading zeros up to `min_digits`.
fn push_hex(out: &mut String, n: u64, min_digits: usize) {
    let digits = (n.checked_ilog2().map_or(1, |b| b / 4 + 1) as usize).max(min_digits);
    for i in (0..digits).rev() {
        let nibble = if i < 16 { (n >> (4 * i)) & 0xf } else { 0 };
        out.push(char::from(b"0123456789abcdef"[nibble as usize]));
    }
}

/// The route label of a request: its matched path template (the table's own `&'static str`
/// when it is one of the protocol's routes), or `unmatched`; never the raw path.
fn route_label(req: &Request) -> ::metrics::SharedString {
    let Some(matched) = req.extensions().get::<MatchedPath>() else {
        return "unmatched".into();
    };
    let matched = matched.as_str();
    let known = turnwise_rules::Route::ALL
        .iter()
        .map(|r| r.path())
        .chain([routes::HEALTHZ, routes::READYZ, routes::METRICS])
        .find(|p| *p == matched);
    match known {
        Some(path) => path.into(),
        None => matched.to_owned().into(),
    }
}

/// Give every request an id and a span (`request`: method, route, status, request id and the
/// trace id of its `traceparent`, continued, or of a new trace), refuse it without the
/// configured bearer token, write error bodies in the wire's envelope, record its latency, and
/// log it.
async fn request_context(
    State(options): State<Arc<ServerOptions>>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let id = request_id();
    let method = req.method().clone();
    // A clone of the URI shares its bytes with the request: no copy of the path.
    let uri = req.uri().clone();
    let path = uri.path();
    let route = route_label(&req);
    let incoming = req
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::parse);
    let trace = incoming.map_or_else(TraceContext::new_root, |c| c.child());
    let span = tracing::info_span!(
        target: "turnwise_server::http",
        "request",
        method = %method,
        route = %route,
        status = tracing::field::Empty,
        request_id = %id,
        trace_id = %trace.trace_id(),
    );
    #[cfg(feature = "otel")]
    otel_parent(&span, &incoming.unwrap_or(trace));
    let probe = is_probe(path);
    // The console checks the token itself (a cookie or the header) and answers its pages.
    let console = is_console(path);
    let refused = if probe || console {
        too_large(&options, &req)
    } else {
        authenticate(&options, &req).or_else(|| too_large(&options, &req))
    };
    let mut res = match refused {
        Some(refused) => refused.into_response(),
        None => trace.scope(next.run(req)).instrument(span.clone()).await,
    };
    let status = res.status();
    span.record("status", status.as_u16());
    let _entered = span.enter();
    metrics::http_request(&method, route, status.as_u16(), started.elapsed());
    if (status.is_client_error() || status.is_server_error()) && !console {
        let error = match res.extensions_mut().remove::<ApiError>() {
            Some(e) => e,
            // A refusal from the framework itself (e.g. a method not allowed on a route).
            None => ApiError::new(status, generic_code(status), generic_message(status, path)),
        };
        let mut headers = std::mem::take(res.headers_mut());
        headers.remove(axum::http::header::CONTENT_LENGTH);
        let mut json = axum::Json(error.body(&id)).into_response();
        *json.status_mut() = status;
        for (k, v) in headers.iter() {
            if k != axum::http::header::CONTENT_TYPE {
                json.headers_mut().insert(k.clone(), v.clone());
            }
        }
        res = json;
        if matches!(status.as_u16(), 408 | 413) {
            // The body was not read to its end: the connection cannot carry another request.
            res.headers_mut().insert(
                axum::http::header::CONNECTION,
                HeaderValue::from_static("close"),
            );
        }
        let latency_ms = started.elapsed().as_millis() as u64;
        if probe {
            // A load balancer probes every few seconds; what makes the server unready (a store
            // that cannot write, a shutdown) is logged once where it happens.
            tracing::debug!(
                target: "turnwise_server::http",
                %method, %path, status = status.as_u16(), code = %error.code,
                latency_ms, request_id = %id, message = %error.message,
                "probe refused"
            );
        } else if status.is_server_error() {
            tracing::warn!(
                target: "turnwise_server::http",
                %method, %path, status = status.as_u16(), code = %error.code,
                latency_ms, request_id = %id, message = %error.message,
                "request failed"
            );
        } else {
            tracing::info!(
                target: "turnwise_server::http",
                %method, %path, status = status.as_u16(), code = %error.code,
                latency_ms, request_id = %id,
                "request refused"
            );
        }
    } else if probe || path == console::LIVE {
        // Probed every few seconds by a load balancer, or polled every second by an open
        // console page: kept out of the `info` log.
        tracing::debug!(
            target: "turnwise_server::http",
            %method, %path, status = status.as_u16(),
            latency_ms = started.elapsed().as_millis() as u64, request_id = %id,
            "request"
        );
    } else {
        tracing::info!(
            target: "turnwise_server::http",
            %method, %path, status = status.as_u16(),
            latency_ms = started.elapsed().as_millis() as u64, request_id = %id,
            "request"
        );
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}

/// The refusal of a request whose target or declared body is over its limit, before any of
/// the body is read.
fn too_large(options: &ServerOptions, req: &Request) -> Option<ApiError> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return Some(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!(
                "the request target is {target} bytes; this server accepts at most \
                 {MAX_URI_BYTES}"
            ),
        ));
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if headers > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request_header_fields_too_large",
            format!(
                "the request headers are {headers} bytes; this server accepts at most \
                 {MAX_HEADER_BYTES}"
            ),
        ));
    }
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    (declared > options.body_limit as u64).then(|| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the request body is {declared} bytes (content-length), larger than the {} \
                 this server accepts; keep large data elsewhere and send a reference",
                options.body_limit
            ),
        )
    })
}

fn generic_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "request_timeout",
        413 => "payload_too_large",
        414 => "uri_too_long",
        431 => "request_header_fields_too_large",
        415 => "unsupported_media_type",
        s if s >= 500 => "internal_error",
        _ => "invalid_request",
    }
}

fn generic_message(status: StatusCode, path: &str) -> String {
    match status.as_u16() {
        404 => format!("there is no route {path}; see docs/http.md for the routes"),
        405 => format!("{path} does not take this method; see docs/http.md for the routes"),
        413 => "the request body is larger than this server accepts".to_owned(),
        _ => format!(
            "{} on {path}",
            status.canonical_reason().unwrap_or("request refused")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_as_format_writes_it() {
        for n in [
            0,
            1,
            0xf,
            0x10,
            0xdead_beef,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
        ] {
            for min in [0, 8, 16, 20] {
                let mut s = String::new();
                push_hex(&mut s, n, min);
                assert_eq!(s, format!("{n:0min$x}"), "{n} {min}");
            }
        }
        let id = request_id();
        assert!(id.starts_with("req_") && id.len() == 4 + 16 + 8, "{id}");
    }
}
