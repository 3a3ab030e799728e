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

// One job per function: clippy.toml sets the limit at 100 lines; the few longer functions
// say why where they are.
#![warn(clippy::too_many_lines)]
mod conn;
mod console;
mod extract;
mod layers;
mod routes;

pub mod error;
pub mod metrics;
pub mod schemas;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
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
    layers::apply(routes::routes().merge(console), state)
}

/// Only `GET /metrics`, for a listener of its own (`turnwise serve --metrics-bind`): served
/// without the bearer token, so bind it where only the monitoring can reach it.
pub fn metrics_router(engine: Engine, options: ServerOptions) -> Router {
    let mut options = options;
    options.api_token = None;
    let state = AppState::new(engine, options);
    layers::apply(routes::metrics_routes(), state)
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
