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

mod answer;
mod extract;
mod routes;

pub mod error;
pub mod schemas;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use turnwise::Engine;

pub use crate::error::ApiError;
pub use crate::schemas::{SchemaDocument, SchemaRegistry};

/// The largest request body accepted by default: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

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
    /// When set, every route requires `Authorization: Bearer <token>` (401 otherwise).
    pub api_token: Option<String>,
    /// The largest request body, in bytes (413 past it). Default 1 MiB.
    pub body_limit: usize,
    /// Fired when the server stops; see [`Shutdown`].
    pub shutdown: Shutdown,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            api_token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            shutdown: Shutdown::new(),
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
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) engine: Engine,
    /// `engine` addressing the default namespace, for requests that name no other.
    pub(crate) default_ns: Engine,
    pub(crate) schemas: Arc<SchemaRegistry>,
    pub(crate) options: Arc<ServerOptions>,
    pub(crate) started: Instant,
}

/// The server's routes over `engine`.
pub fn router(engine: Engine, options: ServerOptions) -> Router {
    let state = AppState {
        default_ns: engine.namespace(turnwise::engine::DEFAULT_NAMESPACE),
        engine,
        schemas: Arc::new(SchemaRegistry::default()),
        options: Arc::new(options),
        started: Instant::now(),
    };
    let limit = state.options.body_limit;
    routes::routes()
        .layer(DefaultBodyLimit::max(limit))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(
            state.options.clone(),
            request_context,
        ))
        .with_state(state)
}

/// Serve `router` on `listener` until `shutdown` completes, then stop accepting connections and
/// let the requests in flight finish (at most [`SHUTDOWN_GRACE`]).
///
/// A request is acknowledged only after the engine committed it, so stopping loses nothing
/// that was acknowledged; a request cut off by the grace period was never answered, and its
/// client retries it.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = fired_tx.send(());
    };
    // Small request/response pairs: don't let Nagle's algorithm hold a segment back.
    let listener =
        axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY could not be set on a connection");
            }
        });
    let server = axum::serve(listener, router).with_graceful_shutdown(signal);
    let server = std::future::IntoFuture::into_future(server);
    tokio::pin!(server);
    tokio::select! {
        res = &mut server => res,
        () = async {
            if fired_rx.await.is_ok() {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        } => {
            tracing::warn!(
                "requests still in flight {}s after shutdown began; stopping without them",
                SHUTDOWN_GRACE.as_secs()
            );
            Ok(())
        }
    }
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

/// Compare without leaking where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

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

/// Give every request an id, refuse it without the configured bearer token, write error
/// bodies in the wire's envelope, and log the request.
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
    let mut res = match authenticate(&options, &req) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    };
    let status = res.status();
    if status.is_client_error() || status.is_server_error() {
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
        let latency_ms = started.elapsed().as_millis() as u64;
        if status.is_server_error() {
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

fn generic_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        404 => "not_found",
        405 => "method_not_allowed",
        413 => "payload_too_large",
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
