//! The `Http` backend's own connections to a plain `http://` server: HTTP/1.1 over a pool of
//! kept-alive TCP connections, each request written straight to one of them.
//!
//! reqwest's layers around the same hyper connection (redirects, its retry policy, proxy
//! matching, a URL parsed again from every answer, boxed futures) cost more CPU than the rest of
//! a call on a loopback server, so [`Http`](super::Http) sends through [`Direct`] when it can, and through
//! reqwest otherwise: for `https://`, when a proxy is configured in the environment, and to
//! follow a redirect. What goes on the wire is what reqwest sends: the same method, path,
//! query, headers (`host`, `accept: */*`, `user-agent`, `lbb-version`, `authorization`,
//! `content-type`, `content-length`) and body, and the same socket options (`TCP_NODELAY`,
//! keep-alive probes after 15 s, every 15 s, 3 of them, `TCP_USER_TIMEOUT` 30 s). Idle
//! connections are reused most recent first and dropped after 90 s, as reqwest's pool does.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE, HOST};
use reqwest::{Method, Url};

/// An idle connection is not reused after this long (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Keep-alive probes: after this much silence, then this often, this many (reqwest's).
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;
/// Unacknowledged data fails the connection after this long (reqwest's, on Linux).
#[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
const USER_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variables that give reqwest a proxy for `http://` URLs.
const PROXY_VARS: [&str; 4] = ["ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"];

/// Connections to one `http://` origin.
pub(super) struct Direct {
    /// Where to connect.
    host: String,
    port: u16,
    /// The headers of a request without a body (`content-length` aside)...
    headers: HeaderMap,
    /// ... and of one with a JSON body: `content-type` first, as reqwest sends a request's
    /// own headers before the client's.
    body_headers: HeaderMap,
    /// Idle connections, the most recently used last.
    idle: Mutex<Vec<Idle>>,
}

struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
}

/// An answer: its status, its headers and its whole body.
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

/// Why an exchange failed, as a chain of causes for the transport error's message.
#[derive(Debug)]
pub(super) enum Failure {
    Connect(std::io::Error),
    Http(hyper::Error),
    TimedOut(Duration),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(_) => f.write_str("error trying to connect"),
            Failure::Http(_) => f.write_str("error sending request"),
            Failure::TimedOut(after) => write!(f, "operation timed out after {after:?}"),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failure::Connect(e) => Some(e),
            Failure::Http(e) => Some(e),
            Failure::TimedOut(_) => None,
        }
    }
}

impl Direct {
    /// Connections to `url`'s origin sending `headers` (reqwest's defaults are added),
    /// or `None` when reqwest must send: not `http://`, or a proxy in the environment.
    pub(super) fn new(url: &Url, headers: HeaderMap) -> Option<Direct> {
        if url.scheme() != "http" || PROXY_VARS.iter().any(|v| std::env::var_os(v).is_some()) {
            return None;
        }
        // An IPv6 literal without its brackets, to connect to.
        let host = url
            .host_str()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url.port_or_known_default()?;
        // As hyper-util writes it for reqwest: the URL's host, with the port unless it
        // is the scheme's default (IPv6 in brackets).
        let authority = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str()?),
            None => url.host_str()?.to_owned(),
        };
        // In reqwest's order: its default `accept`, the client's headers, then `host`.
        let mut ordered = HeaderMap::with_capacity(headers.len() + 2);
        ordered.insert(ACCEPT, HeaderValue::from_static("*/*"));
        ordered.extend(headers);
        ordered.insert(HOST, HeaderValue::from_str(&authority).ok()?);
        let mut body_headers = HeaderMap::with_capacity(ordered.len() + 1);
        body_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        body_headers.extend(ordered.iter().map(|(k, v)| (k.clone(), v.clone())));
        Some(Direct {
            host,
            port,
            headers: ordered,
            body_headers,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// The request target (path and query, the origin form) of `url`, as reqwest sends it.
    pub(super) fn target(url: &Url) -> Option<Uri> {
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        target.parse().ok()
    }

    /// Send one request and read its whole answer, within `timeout`.
    pub(super) async fn send(
        &self,
        method: &Method,
        target: &Uri,
        body: Option<&Bytes>,
        traceparent: Option<&HeaderValue>,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        let exchange = self.exchange(method, target, body, traceparent);
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Failure::TimedOut(timeout)),
        }
    }

    async fn exchange(
        &self,
        method: &Method,
        target: &Uri,
        body: Option<&Bytes>,
        traceparent: Option<&HeaderValue>,
    ) -> Result<Reply, Failure> {
        loop {
            let (mut sender, pooled) = match self.checkout().await {
                Some(sender) => (sender, true),
                None => (self.connect().await?, false),
            };
            let mut request = hyper::Request::new(Full::new(body.cloned().unwrap_or_default()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = target.clone();
            request.headers_mut().clone_from(match body {
                Some(_) => &self.body_headers,
                None => &self.headers,
            });
            if let Some(traceparent) = traceparent {
                request
                    .headers_mut()
                    .insert(super::transport::TRACEPARENT, traceparent.clone());
            }
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let (parts, incoming) = response.into_parts();
                    let body = incoming.collect().await.map_err(Failure::Http)?.to_bytes();
                    self.checkin(sender);
                    return Ok(Reply {
                        status: parts.status.as_u16(),
                        headers: parts.headers,
                        body,
                    });
                }
                Err(mut e) => {
                    // A kept-alive connection the server closed before it took the
                    // request: nothing was sent, so send it on another (as reqwest's pool
                    // does).
                    if pooled && e.take_message().is_some() {
                        continue;
                    }
                    return Err(Failure::Http(e.into_error()));
                }
            }
        }
    }

    /// An idle connection ready for a request, dropping the closed and the stale.
    async fn checkout(&self) -> Option<SendRequest<Full<Bytes>>> {
        loop {
            let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            if idle.since.elapsed() >= IDLE_TIMEOUT || idle.sender.is_closed() {
                continue;
            }
            let mut sender = idle.sender;
            // Ready at once unless the connection ended meanwhile.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    fn checkin(&self, sender: SendRequest<Full<Bytes>>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        // The oldest are first: drop those past the idle timeout.
        let stale = idle
            .iter()
            .take_while(|i| i.since.elapsed() >= IDLE_TIMEOUT)
            .count();
        idle.drain(..stale);
        idle.push(Idle {
            sender,
            since: Instant::now(),
        });
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(Failure::Connect)?;
        stream.set_nodelay(true).map_err(Failure::Connect)?;
        let socket = socket2::SockRef::from(&stream);
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(KEEPALIVE)
            .with_interval(KEEPALIVE)
            .with_retries(KEEPALIVE_RETRIES);
        socket
            .set_tcp_keepalive(&keepalive)
            .map_err(Failure::Connect)?;
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        socket
            .set_tcp_user_timeout(Some(USER_TIMEOUT))
            .map_err(Failure::Connect)?;
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(Failure::Http)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "an HTTP connection ended with an error");
            }
        });
        sender.ready().await.map_err(Failure::Http)?;
        Ok(sender)
    }
}
