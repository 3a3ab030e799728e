//! Connections: the accept loop, its cap and backoff, and the timeouts of each connection.
//!
//! Each connection is served by hyper's HTTP/1.1 server over a [`Watched`] socket, which
//! enforces the header-read and idle timeouts (a connection that does not send a complete
//! request head in time is closed), and rewrites hyper's own refusals of malformed requests
//! (400, 414, 431, whose bodies hyper leaves empty) into the JSON error envelope. The request
//! body is read through a [`DeadlineBody`], which ends with [`BodyTimedOut`] when the body is
//! not in within the body-read timeout; the body extractor answers that with `408`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, StatusCode};
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;
use crate::{ServerOptions, SHUTDOWN_GRACE};

/// The largest request head (request line and headers) a connection buffers: 64 KiB. A longer
/// one is refused with `431`.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The accept loop's longest pause after an error such as running out of file descriptors.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
const MIN_ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Serve `router` on `listener` with the connection limits of `options` until `shutdown`
/// completes; see [`crate::serve_with`].
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    options: &ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limits = Limits::from(options);
    let permits = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut backoff = MIN_ACCEPT_BACKOFF;
    tokio::pin!(shutdown);
    'accept: loop {
        // At the cap, wait for a connection to close before accepting the next: the next
        // waits in the listen backlog meanwhile.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break 'accept,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue 'accept,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break 'accept,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff = MIN_ACCEPT_BACKOFF;
                stream
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or memory: pause instead of spinning, and
                // go on once connections have closed.
                tracing::error!(
                    error = %e, backoff_ms = backoff.as_millis() as u64,
                    "accepting a connection failed; pausing before the next accept"
                );
                drop(permit);
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = &mut shutdown => break 'accept,
                }
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                continue;
            }
        };
        // Small request/response pairs: don't let Nagle's algorithm hold a segment back.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set on a connection");
        }
        let router = router.clone();
        let mut stop = stop_rx.clone();
        conns.spawn(async move {
            let _permit = permit;
            let state = Arc::new(Mutex::new(Phase::first()));
            let io = TokioIo::new(Watched::new(stream, state.clone(), limits));
            let service = Service {
                inner: TowerToHyperService::new(router),
                state,
                body_timeout: limits.body,
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                // The socket enforces the header and idle timeouts ([`Watched`]).
                .header_read_timeout(None)
                .keep_alive(true)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(io, service);
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = async { let _ = stop.wait_for(|s| *s).await; } => {
                    // Finish the request in flight, then close.
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "a connection ended with an error");
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "requests still in flight {}s after shutdown began; stopping without them",
            SHUTDOWN_GRACE.as_secs()
        );
        conns.abort_all();
    }
    Ok(())
}

/// An accept error about one incoming connection (gone before it was accepted), not about the
/// listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

/// The timeouts of one connection.
#[derive(Clone, Copy, Debug)]
struct Limits {
    header: Duration,
    body: Duration,
    idle: Duration,
}

impl From<&ServerOptions> for Limits {
    fn from(o: &ServerOptions) -> Self {
        Self {
            header: o.header_read_timeout,
            body: o.body_read_timeout,
            idle: o.idle_timeout,
        }
    }
}

/// Where a connection is between requests.
#[derive(Debug)]
struct Phase {
    /// A request is being handled: no read deadline on the socket (the body has its own).
    busy: bool,
    /// When the connection became idle: accepted, or its last response written.
    since: Instant,
    /// Whether no request has come yet (the header timeout applies from the start).
    first: bool,
    /// When the first byte of the next request head arrived.
    head_started: Option<Instant>,
    /// Requests handed to the router, and response heads written: a response head written
    /// when the two are equal is hyper's own refusal of a malformed request.
    calls: u64,
    heads: u64,
    /// Whether the socket's read deadline is armed. hyper does not read again on its own once
    /// a response is written, so until it is armed every write wakes the connection to read.
    armed: bool,
}

impl Phase {
    fn first() -> Self {
        Self {
            busy: false,
            since: Instant::now(),
            first: true,
            head_started: None,
            calls: 0,
            heads: 0,
            armed: false,
        }
    }

    /// When the socket gives up waiting for the next request head.
    fn read_deadline(&self, limits: &Limits) -> Option<Instant> {
        if self.busy {
            return None;
        }
        Some(match self.head_started {
            Some(t) => t + limits.header,
            None if self.first => self.since + limits.header,
            None => self.since + limits.idle,
        })
    }
}

/// A socket that closes a connection whose next request head does not arrive in time.
struct Watched {
    io: TcpStream,
    state: Arc<Mutex<Phase>>,
    limits: Limits,
    timer: Pin<Box<Sleep>>,
    armed_for: Option<Instant>,
    /// Bytes of a refusal still to write in place of hyper's empty-bodied one.
    rewrite: Option<(Vec<u8>, usize)>,
}

impl Watched {
    fn new(io: TcpStream, state: Arc<Mutex<Phase>>, limits: Limits) -> Self {
        Self {
            io,
            state,
            limits,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed_for: None,
            rewrite: None,
        }
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        // The lock is only held for a few field reads and writes, which cannot panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let mut phase = this.phase();
                    if !phase.busy && phase.head_started.is_none() {
                        phase.head_started = Some(Instant::now());
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let (deadline, partial) = {
                    let mut phase = this.phase();
                    let deadline = phase.read_deadline(&this.limits);
                    phase.armed = deadline.is_some();
                    (deadline, phase.head_started.is_some())
                };
                let Some(deadline) = deadline else {
                    return Poll::Pending;
                };
                if this.armed_for != Some(deadline) {
                    this.timer.as_mut().reset(deadline);
                    this.armed_for = Some(deadline);
                }
                ready!(this.timer.as_mut().poll(cx));
                if partial {
                    // Half a request: say why it ends, if the socket takes it at once.
                    let refusal = refusal(
                        StatusCode::REQUEST_TIMEOUT,
                        "the request head (request line and headers) did not arrive in time; \
                         send the whole head within the header timeout",
                    );
                    let _ = this.io.try_write(&refusal);
                }
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no complete request head within the timeout",
                )))
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.rewrite.is_none() {
            if let Some(status) = status_line(buf) {
                let routed = {
                    let mut phase = this.phase();
                    let routed = phase.heads < phase.calls;
                    if routed {
                        phase.heads += 1;
                    }
                    routed
                };
                if !routed {
                    // No request reached the router: hyper refuses a malformed one.
                    this.rewrite = Some((refusal(status, hyper_refusal_message(status)), 0));
                }
            }
        }
        if let Some((bytes, written)) = &mut this.rewrite {
            // Write the envelope instead; hyper's bytes count as written. hyper closes the
            // connection after such a refusal.
            while *written < bytes.len() {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, &bytes[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
            return Poll::Ready(Ok(buf.len()));
        }
        let n = ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
        let mut phase = this.phase();
        if !phase.busy && phase.head_started.is_none() {
            // Still writing the last response: the idle time starts after it.
            phase.since = Instant::now();
        }
        if !phase.busy && !phase.armed {
            cx.waker().wake_by_ref();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The status of a response head at the start of `buf`.
fn status_line(buf: &[u8]) -> Option<StatusCode> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let code = rest.get(..3)?;
    StatusCode::from_bytes(code).ok()
}

fn hyper_refusal_message(status: StatusCode) -> &'static str {
    match status.as_u16() {
        414 => "the request target (path and query) is longer than this server accepts",
        431 => "the request head is larger than this server accepts (64 KiB of request line and headers)",
        _ => "the request is not valid HTTP/1.1 (request line, method, version or a header)",
    }
}

/// A complete HTTP/1.1 response refusing a request, with the JSON envelope, that closes the
/// connection.
fn refusal(status: StatusCode, message: &str) -> Vec<u8> {
    let code = match status.as_u16() {
        408 => "request_timeout",
        414 => "uri_too_long",
        431 => "request_header_fields_too_large",
        _ => "invalid_request",
    };
    let id = crate::layers::request_id::generate();
    let body = ApiError::new(status, code, message).body(&id).to_string();
    tracing::info!(
        target: "turnwise_server::http",
        status = status.as_u16(), code, request_id = %id,
        "request refused by the HTTP layer"
    );
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\nx-request-id: {id}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// The router as hyper's service, marking the connection busy while a request is handled and
/// giving each request body its read deadline.
#[derive(Clone)]
struct Service {
    inner: TowerToHyperService<Router>,
    state: Arc<Mutex<Phase>>,
    body_timeout: Duration,
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        {
            let mut phase = self.state.lock().unwrap_or_else(|e| e.into_inner());
            phase.busy = true;
            phase.armed = false;
            phase.first = false;
            phase.head_started = None;
            phase.calls += 1;
        }
        let deadline = Instant::now() + self.body_timeout;
        let req = req.map(|body| Body::new(DeadlineBody::new(body, deadline)));
        let fut = hyper::service::Service::call(&self.inner, req);
        let state = self.state.clone();
        Box::pin(async move {
            let res = fut.await;
            let mut phase = state.lock().unwrap_or_else(|e| e.into_inner());
            phase.busy = false;
            phase.since = Instant::now();
            res
        })
    }
}

/// The request body did not arrive within the body-read timeout.
#[derive(Debug)]
pub(crate) struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive within the body-read timeout")
    }
}

impl std::error::Error for BodyTimedOut {}

/// A request body that fails with [`BodyTimedOut`] once its deadline passes.
struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<Sleep>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, deadline: Instant) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        ready!(self.deadline.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyTimedOut))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
