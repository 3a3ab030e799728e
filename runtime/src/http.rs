//! The [`Http`] backend: the message-workflow protocol spoken to a server over HTTP.
//!
//! [`Http`] implements [`Backend`] by sending each call to its route of the message-workflow
//! API (`docs/http-client.md` lists them), so handles and workers run over a turnwise server,
//! or any server speaking the same API, exactly as they run over the embedded
//! [`Engine`](crate::Engine). Refusals come back as the same [`Error`] variants the engine
//! returns, chosen by the answer's `error.code` and status.
//!
//! The client follows the retry rules the wire asks of every client:
//!
//! * **Which calls are retried.** Create, message, signal, delete, every read, and the worker's
//!   operation, progress, checkpoint, wait-signal and complete are retried after a `429`, a
//!   `5xx` or a transport failure. Claim, fail, heartbeat and control are sent once.
//! * **Same bytes.** A request body is serialized once; every retry sends the identical bytes,
//!   which is what lets the server recognise a repeated completion.
//! * **Delay.** The `Retry-After` header (seconds or an HTTP date), else the body's
//!   `error.retry_after_seconds`, else full-jitter exponential backoff
//!   (`uniform(0, retry_delay · 2^retry)`), each capped at 60 s. A transport failure always uses
//!   the jittered backoff.
//! * **Limits.** At most [`HttpBuilder::max_retries`] retries (6 by default), and no retry whose
//!   delay would end past [`HttpBuilder::retry_budget`] (60 s by default) from the first send.
//! * **Refusal.** An answer whose body says `error.retryable: false` is returned at once.
//!
//! ```no_run
//! use turnwise::Http;
//!
//! # fn main() -> Result<(), turnwise::Error> {
//! let backend = Http::builder("http://127.0.0.1:7400")
//!     .token(std::env::var("TURNWISE_TOKEN").ok())
//!     .graph("main")
//!     .build()?;
//! # let _ = backend;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{
    HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, USER_AGENT,
};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::protocol::*;

/// The API version sent in the `lbb-version` header of every request.
pub const API_VERSION: &str = "2026-10-21";
/// The request timeout unless [`HttpBuilder::timeout`] sets another.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Retries of a retryable call unless [`HttpBuilder::max_retries`] sets another.
pub const DEFAULT_MAX_RETRIES: u32 = 6;
/// The wall-clock budget of one call's retries unless [`HttpBuilder::retry_budget`] sets
/// another.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(60);
/// The base of the jittered backoff unless [`HttpBuilder::retry_delay`] sets another.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// No single retry delay is longer than this, whatever the server asks.
const MAX_DELAY: Duration = Duration::from_secs(60);
/// A claim's request timeout is at least its `wait_ms` plus this much.
const CLAIM_MARGIN: Duration = Duration::from_secs(10);
/// The heartbeat timeout for a token this client did not claim (a third of the default lease).
const UNKNOWN_LEASE_BEAT_TIMEOUT: Duration = Duration::from_secs(20);
/// The lease map is emptied when it reaches this many entries (see [`Http::heartbeat`]).
const LEASE_MAP_CAP: usize = 4096;

const P_SCHEMAS: &str = "/v1/workflows/schemas";
const P_INSTANCES: &str = "/v1/workflows/instances";
const P_MESSAGE: &str = "/v1/workflows/instances/message";
const P_GET: &str = "/v1/workflows/instances/get";
const P_INBOX: &str = "/v1/workflows/instances/inbox";
const P_TYPE_INBOX: &str = "/v1/workflows/inbox";
const P_HISTORY: &str = "/v1/workflows/instances/history";
const P_TURN: &str = "/v1/workflows/instances/turn";
const P_CONTROL: &str = "/v1/workflows/instances/control";
const P_DELETE: &str = "/v1/workflows/instances/delete";
const P_CLAIM: &str = "/v1/workflows/turns/claim";
const P_OPERATION: &str = "/v1/workflows/turns/operation";
const P_PROGRESS: &str = "/v1/workflows/turns/progress";
const P_CHECKPOINT: &str = "/v1/workflows/turns/checkpoint";
const P_WAIT_SIGNAL: &str = "/v1/workflows/turns/wait-signal";
const P_SIGNAL: &str = "/v1/workflows/turns/signal";
const P_COMPLETE: &str = "/v1/workflows/turns/complete";
const P_FAIL: &str = "/v1/workflows/turns/fail";
const P_HEARTBEAT: &str = "/v1/workflows/turns/heartbeat";

/// Whether a route may be sent again after a `429`, a `5xx` or a transport failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    Yes,
    Once,
}

/// Every route without parameters of its own, whose URL [`Config::fixed`] builds once.
const FIXED_PATHS: [&str; 19] = [
    P_SCHEMAS,
    P_INSTANCES,
    P_MESSAGE,
    P_GET,
    P_INBOX,
    P_TYPE_INBOX,
    P_HISTORY,
    P_TURN,
    P_CONTROL,
    P_DELETE,
    P_CLAIM,
    P_OPERATION,
    P_PROGRESS,
    P_CHECKPOINT,
    P_WAIT_SIGNAL,
    P_SIGNAL,
    P_COMPLETE,
    P_FAIL,
    P_HEARTBEAT,
];

struct Config {
    /// The base URL without a trailing `/`.
    base: String,
    graph: Option<String>,
    stack: Option<String>,
    timeout: Duration,
    max_retries: u32,
    retry_budget: Duration,
    retry_delay: Duration,
    /// The URL of every path of [`FIXED_PATHS`] with the scope's query and no parameters of
    /// its own, built once: parsing a URL costs more than the rest of building a request.
    fixed: Vec<(&'static str, Url, Option<hyper::Uri>)>,
}

impl Config {
    /// The config with its fixed URLs built (again) from its base, scope and options.
    fn with_fixed_urls(mut self) -> Config {
        // A path whose URL cannot be built is left out: building it at each call reports why.
        self.fixed = FIXED_PATHS
            .iter()
            .filter_map(|&path| {
                let url = self.build_url(path, &[]).ok()?;
                let target = direct::Direct::target(&url);
                Some((path, url, target))
            })
            .collect();
        self
    }

    /// The URL of `path` with the scope's query parameters, then `query`.
    fn build_url(&self, path: &str, query: &[(&str, String)]) -> Result<Url> {
        let mut url = Url::parse(&format!("{}{path}", self.base))
            .map_err(|e| Error::Transport(format!("cannot build the URL of {path}: {e}")))?;
        {
            let mut pairs = url.query_pairs_mut();
            if let Some(graph) = &self.graph {
                pairs.append_pair("graph", graph);
            }
            if let Some(stack) = &self.stack {
                pairs.append_pair("stack", stack);
            }
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        Ok(url)
    }
}

/// The message-workflow protocol over HTTP: a client of a turnwise server (`turnwise serve`)
/// or of any server speaking the same API.
///
/// Cheap to clone; clones share one connection pool. Every request carries the bearer token,
/// the `lbb-version` and `user-agent` headers, and the `graph`/`stack` scope as query
/// parameters. See the [module docs](self) for the retry rules.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    /// The connections of a plain `http://` server, when this client sends on its own.
    direct: Option<Arc<direct::Direct>>,
    config: Arc<Config>,
    /// Lease lengths of the turns this client claimed, by token: a heartbeat's request timeout
    /// is a third of its lease.
    leases: Arc<Mutex<HashMap<String, u64>>>,
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http")
            .field("base_url", &self.config.base)
            .field("graph", &self.config.graph)
            .field("stack", &self.config.stack)
            .finish_non_exhaustive()
    }
}

/// Options of an [`Http`] backend; made by [`Http::builder`], finished by
/// [`HttpBuilder::build`].
#[derive(Clone)]
#[must_use]
pub struct HttpBuilder {
    base_url: String,
    token: Option<String>,
    graph: Option<String>,
    stack: Option<String>,
    timeout: Duration,
    max_retries: u32,
    retry_budget: Duration,
    retry_delay: Duration,
}

impl fmt::Debug for HttpBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpBuilder")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("graph", &self.graph)
            .field("stack", &self.stack)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_budget", &self.retry_budget)
            .field("retry_delay", &self.retry_delay)
            .finish()
    }
}

impl HttpBuilder {
    /// The bearer token sent as `authorization: Bearer <token>`; `None` sends no
    /// `authorization` header.
    pub fn token(mut self, token: impl Into<Option<String>>) -> Self {
        self.token = token.into();
        self
    }

    /// The graph whose workflow namespace every request addresses (the `graph` query
    /// parameter). Without one the server's default is used.
    pub fn graph(mut self, graph: impl Into<String>) -> Self {
        self.graph = Some(graph.into());
        self
    }

    /// The environment every request addresses (the `stack` query parameter).
    pub fn stack(mut self, stack: impl Into<String>) -> Self {
        self.stack = Some(stack.into());
        self
    }

    /// The timeout of one request (default 120 s). A claim always gets at least its `wait_ms`
    /// plus 10 s; a heartbeat gets a third of its lease (see [`Http::heartbeat`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many times a retryable call is sent again at most (default 6, so 7 tries).
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// The wall-clock budget of one call: a retry whose delay would end later than this after
    /// the first send is not made (default 60 s).
    pub fn retry_budget(mut self, budget: Duration) -> Self {
        self.retry_budget = budget;
        self
    }

    /// The base of the jittered backoff: retry `n` (from 0) waits a random time up to
    /// `retry_delay · 2^n`, at most 60 s (default 0.1 s).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Check the options and build the client. Fails with [`Error::Invalid`] for a base URL
    /// that is not an absolute `http` or `https` URL, or a token that cannot be a header.
    pub fn build(self) -> Result<Http> {
        let base = self.base_url.trim_end_matches('/').to_owned();
        let url = Url::parse(&base)
            .map_err(|e| Error::invalid("base_url", format!("`{base}` is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(Error::invalid(
                "base_url",
                format!("`{base}` is not an http:// or https:// URL"),
            ));
        }
        let mut headers = HeaderMap::new();
        headers.insert("lbb-version", HeaderValue::from_static(API_VERSION));
        if let Some(token) = &self.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::invalid("token", "the token holds characters a header cannot carry")
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let user_agent = concat!("turnwise/", env!("CARGO_PKG_VERSION"));
        let mut direct_headers = headers.clone();
        direct_headers.insert(USER_AGENT, HeaderValue::from_static(user_agent));
        let direct = direct::Direct::new(&url, direct_headers).map(Arc::new);
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(user_agent)
            .build()
            .map_err(|e| Error::Transport(format!("cannot build the HTTP client: {e}")))?;
        Ok(Http {
            client,
            direct,
            config: Arc::new(
                Config {
                    base,
                    graph: self.graph,
                    stack: self.stack,
                    timeout: self.timeout,
                    max_retries: self.max_retries,
                    retry_budget: self.retry_budget,
                    retry_delay: self.retry_delay,
                    fixed: Vec::new(),
                }
                .with_fixed_urls(),
            ),
            leases: Arc::default(),
        })
    }
}

impl Http {
    /// A client of the server at `base_url` (e.g. `http://127.0.0.1:7400`) with default
    /// options, sending `token` as a bearer token when given.
    pub fn connect(base_url: impl Into<String>, token: Option<String>) -> Result<Http> {
        Self::builder(base_url).token(token).build()
    }

    /// Options for a client of the server at `base_url`.
    pub fn builder(base_url: impl Into<String>) -> HttpBuilder {
        HttpBuilder {
            base_url: base_url.into(),
            token: None,
            graph: None,
            stack: None,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_budget: DEFAULT_RETRY_BUDGET,
            retry_delay: DEFAULT_RETRY_DELAY,
        }
    }

    /// The same client (and connection pool) addressing another graph.
    pub fn with_graph(&self, graph: impl Into<String>) -> Http {
        self.rescoped(|c| c.graph = Some(graph.into()))
    }

    /// The same client (and connection pool) addressing another environment.
    pub fn with_stack(&self, stack: impl Into<String>) -> Http {
        self.rescoped(|c| c.stack = Some(stack.into()))
    }

    fn rescoped(&self, change: impl FnOnce(&mut Config)) -> Http {
        let c = &self.config;
        let mut config = Config {
            base: c.base.clone(),
            graph: c.graph.clone(),
            stack: c.stack.clone(),
            timeout: c.timeout,
            max_retries: c.max_retries,
            retry_budget: c.retry_budget,
            retry_delay: c.retry_delay,
            fixed: Vec::new(),
        };
        change(&mut config);
        let config = config.with_fixed_urls();
        Http {
            client: self.client.clone(),
            direct: self.direct.clone(),
            config: Arc::new(config),
            leases: self.leases.clone(),
        }
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.config.base
    }

    /// The graph every request addresses, if one was set.
    pub fn graph(&self) -> Option<&str> {
        self.config.graph.as_deref()
    }

    /// The environment every request addresses, if one was set.
    pub fn stack(&self) -> Option<&str> {
        self.config.stack.as_deref()
    }

    // -----------------------------------------------------------------------------------------
    // Sending
    // -----------------------------------------------------------------------------------------

    /// The URL of a call, and its request target when this client sends on its own.
    fn url(&self, path: &str, query: &[(&str, String)]) -> Result<(Url, Option<hyper::Uri>)> {
        if query.is_empty() {
            if let Some((_, url, target)) = self.config.fixed.iter().find(|(p, ..)| *p == path) {
                return Ok((url.clone(), target.clone()));
            }
        }
        let url = self.config.build_url(path, query)?;
        let target = self
            .direct
            .as_ref()
            .and_then(|_| direct::Direct::target(&url));
        Ok((url, target))
    }

    /// Send one call, with retries when its route allows them, and answer the success body.
    async fn send(&self, call: Call<'_>) -> Result<Bytes> {
        let config = &self.config;
        let (url, target) = self.url(call.path, &call.query)?;
        let first = Instant::now();
        let mut retries = 0u32;
        loop {
            // The same bytes on every try: the body was serialized once, before the loop.
            let reply = match (&self.direct, &target) {
                (Some(direct), Some(target)) => {
                    let sent = Instant::now();
                    match direct
                        .send(&call.method, target, call.body.as_ref(), call.timeout)
                        .await
                    {
                        // reqwest follows redirects: let it, from the start, in the time left.
                        Ok(r) if (300..400).contains(&r.status) => {
                            let left = call.timeout.saturating_sub(sent.elapsed());
                            self.via_reqwest(&call, &url, left).await
                        }
                        Ok(r) => Ok(Reply {
                            status: r.status,
                            retry_after: retry_after(&r.headers),
                            body: r.body,
                        }),
                        Err(e) => Err((transport(&call, &e), true)),
                    }
                }
                _ => self.via_reqwest(&call, &url, call.timeout).await,
            };
            let (error, may_retry, asked) = match reply {
                Ok(Reply { status, body, .. }) if (200..300).contains(&status) => return Ok(body),
                Ok(Reply {
                    status,
                    retry_after,
                    body,
                }) => {
                    let wire = WireError::parse(status, &body);
                    let may_retry =
                        (status == 429 || status >= 500) && wire.retryable != Some(false);
                    let asked = retry_after.or(wire.retry_after);
                    (wire.into_error(status, call.lease), may_retry, asked)
                }
                Err((error, may_retry)) => (error, may_retry, None),
            };
            if call.retry == Retry::Once || !may_retry || retries >= config.max_retries {
                return Err(error);
            }
            let delay = asked
                .map(|d| d.min(MAX_DELAY))
                .unwrap_or_else(|| jitter(config.retry_delay, retries));
            if first.elapsed() + delay > config.retry_budget {
                return Err(error);
            }
            tracing::debug!(
                path = call.path,
                retry = retries + 1,
                ?delay,
                error = %error,
                "retrying an HTTP call"
            );
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }

    /// One try of `call` through reqwest within `timeout`: its answer, or the transport error
    /// and whether it may be retried.
    async fn via_reqwest(
        &self,
        call: &Call<'_>,
        url: &Url,
        timeout: Duration,
    ) -> std::result::Result<Reply, (Error, bool)> {
        let mut request = self
            .client
            .request(call.method.clone(), url.clone())
            .timeout(timeout);
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = retry_after(response.headers());
                match response.bytes().await {
                    Ok(body) => Ok(Reply {
                        status,
                        retry_after,
                        body,
                    }),
                    Err(e) => Err((transport(call, &e), true)),
                }
            }
            Err(e) => Err((transport(call, &e), !e.is_builder())),
        }
    }

    /// POST `body` to `path` and answer the success body, to be read with [`Answer`]'s methods.
    async fn post<B: Serialize>(
        &self,
        path: &'static str,
        body: &B,
        retry: Retry,
        lease: Option<&Lease>,
    ) -> Result<Answer> {
        self.post_with_timeout(path, body, retry, lease, self.config.timeout)
            .await
    }

    async fn post_with_timeout<B: Serialize>(
        &self,
        path: &'static str,
        body: &B,
        retry: Retry,
        lease: Option<&Lease>,
        timeout: Duration,
    ) -> Result<Answer> {
        // Most bodies are a few hundred bytes: start big enough to write them without growing.
        let mut bytes = Vec::with_capacity(512);
        serde_json::to_writer(&mut bytes, body)
            .map_err(|e| Error::invalid("body", format!("cannot be serialized: {e}")))?;
        let body = Bytes::from(bytes);
        let answer = self
            .send(Call {
                method: Method::POST,
                path,
                query: Vec::new(),
                body: Some(body),
                retry,
                timeout,
                lease,
            })
            .await?;
        Ok(Answer { path, body: answer })
    }

    /// GET `path` with `query` (always retried) and parse the answer as `T`.
    async fn get<T: DeserializeOwned>(
        &self,
        path: &'static str,
        query: Vec<(&'static str, String)>,
    ) -> Result<T> {
        let answer = self
            .send(Call {
                method: Method::GET,
                path,
                query,
                body: None,
                retry: Retry::Yes,
                timeout: self.config.timeout,
                lease: None,
            })
            .await?;
        Answer { path, body: answer }.decode()
    }

    // -----------------------------------------------------------------------------------------
    // The lease map
    // -----------------------------------------------------------------------------------------

    fn remember_lease(&self, token: &str, lease_ms: u64) {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        if leases.len() >= LEASE_MAP_CAP {
            // Entries of turns lost without a final call are never removed one by one; an
            // emptied map only costs forgotten tokens the conservative heartbeat timeout.
            leases.clear();
        }
        leases.insert(token.to_owned(), lease_ms);
    }

    fn forget_lease(&self, token: &str) {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        leases.remove(token);
    }

    /// The request timeout of a heartbeat: a third of the lease (at least 50 ms), never more
    /// than the client's timeout.
    fn heartbeat_timeout(&self, token: &str) -> Duration {
        let leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let t = match leases.get(token) {
            Some(&lease_ms) => Duration::from_millis((lease_ms / 3).max(50)),
            None => UNKNOWN_LEASE_BEAT_TIMEOUT,
        };
        t.min(self.config.timeout)
    }

    /// Forget a token whose turn is over for this client: the server said the lease is lost.
    /// (A turn released, completed or failed is forgotten by the call that ended it.)
    fn settle<T>(&self, lease: &Lease, r: &Result<T>) {
        if matches!(r, Err(e) if e.is_lease_lost()) {
            self.forget_lease(&lease.token);
        }
    }
}

/// One request, as [`Http::send`] sends it.
struct Call<'a> {
    method: Method,
    path: &'static str,
    query: Vec<(&'static str, String)>,
    body: Option<Bytes>,
    retry: Retry,
    timeout: Duration,
    /// The lease of a turn route, to fill [`Error::LeaseLost`].
    lease: Option<&'a Lease>,
}

/// An answer, from either way of sending.
struct Reply {
    status: u16,
    /// The `Retry-After` header, read.
    retry_after: Option<Duration>,
    body: Bytes,
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after)
}

fn transport(call: &Call<'_>, e: &dyn std::error::Error) -> Error {
    let mut message = format!("{} {}: {e}", call.method, call.path);
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::Transport(message)
}

/// Full-jitter backoff: a random delay in `[0, base · 2^retry)`, at most 60 s.
fn jitter(base: Duration, retry: u32) -> Duration {
    let ceiling = base
        .checked_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY);
    // `RandomState` is seeded randomly per process and per instance: enough randomness for
    // spreading retries, without a dependency.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(retry);
    let unit = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    ceiling.mul_f64(unit)
}

/// A `Retry-After` value: delay seconds, or an HTTP date (IMF-fixdate).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = parse_http_date(value)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Seconds since the epoch of an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`.
fn parse_http_date(value: &str) -> Option<u64> {
    let (_, rest) = value.split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + (h * 3600 + m * 60 + s) as i64).ok()
}

/// The success body of a call, read in one pass straight into the type the call answers.
///
/// Each reading first deserializes the bytes into its type directly. Only when that fails does
/// it take the slow way of earlier versions (the body as a JSON value, then the value read as
/// the type, or leniently): so the answer is the same, the errors are the same, and the common
/// case builds no intermediate [`Value`].
struct Answer {
    path: &'static str,
    body: Bytes,
}

impl Answer {
    /// The body as JSON: `null` when empty.
    fn value(&self) -> Result<Value> {
        parse_body(self.path, &self.body)
    }

    /// The body as a `T`.
    fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        match crate::store::json::from_slice(&self.body) {
            Ok(v) => Ok(v),
            Err(_) => decode(self.path, self.value()?),
        }
    }

    /// The body as a turn, or leniently as a stand-in turn (see [`lenient_turn`]).
    fn turn(&self, lease: &Lease, status: TurnStatus) -> Result<WorkflowTurn> {
        match crate::store::json::from_slice(&self.body) {
            Ok(turn) => Ok(turn),
            Err(_) => Ok(lenient_turn(self.value()?, lease, status)),
        }
    }

    /// The body as a claim answer (see [`parse_claim`]).
    fn claim(&self) -> Result<ClaimResponse> {
        match crate::store::json::from_slice(&self.body) {
            Ok(claimed) => Ok(claimed),
            Err(_) => parse_claim(self.value()?),
        }
    }
}

/// A success body as JSON: `null` when empty.
fn parse_body(path: &str, body: &[u8]) -> Result<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    crate::store::json::from_slice(body)
        .map_err(|e| Error::Transport(format!("{path} answered a body that is not JSON: {e}")))
}

fn decode<T: DeserializeOwned>(path: &str, value: Value) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| Error::Transport(format!("{path} answered a body that cannot be read: {e}")))
}

/// The answer of a worker route whose body the protocol does not promise (operation,
/// progress, checkpoint, wait-signal, complete, fail, heartbeat): the turn when the server
/// sent one, as a turnwise server does; otherwise what can be read of it (`status`, `steps`,
/// `operation`) on a stand-in turn built from the lease, with `status` as the call implies.
fn lenient_turn(value: Value, lease: &Lease, status: TurnStatus) -> WorkflowTurn {
    if let Ok(turn) = serde_json::from_value::<WorkflowTurn>(value.clone()) {
        return turn;
    }
    let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
    let steps: Vec<StepCheckpoint> = serde_json::from_value(field("steps")).unwrap_or_default();
    let status = serde_json::from_value(field("status")).unwrap_or(status);
    let operation = match field("operation") {
        Value::Object(op) => serde_json::from_value(Value::Object(op.clone()))
            .ok()
            .or_else(|| {
                Some(TurnOperation {
                    key: op.get("key").and_then(Value::as_str).unwrap_or("").into(),
                    kind: OperationKind::Step,
                    attempt: 0,
                    started_at_ms: 0,
                    timeout_ms: 0,
                    deadline_ms: 0,
                    last_heartbeat_ms: 0,
                    sequence: 0,
                    details: op.get("details").cloned().unwrap_or(Value::Null),
                    checkpoint: op.get("checkpoint").cloned().unwrap_or(Value::Null),
                    heartbeat_timeout_ms: None,
                })
            }),
        _ => None,
    };
    WorkflowTurn {
        workflow_id: lease.workflow_id.clone(),
        number: lease.turn,
        message_id: String::new(),
        message: Value::Null,
        version: String::new(),
        status,
        attempt: 0,
        sequence: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
        ready_at_ms: 0,
        steps,
        result: Value::Null,
        state_after: Value::Null,
        continued_to: None,
        deadline_ms: None,
        error: None,
        finished_at_ms: None,
        operation,
        origin: None,
        progress: None,
        run: None,
        signals: None,
        wait: None,
        worker: None,
    }
}

/// A claim answer, read as leniently as the wire allows: a body that is not an object, or a
/// `task` that is not an object, means nothing was claimed.
fn parse_claim(value: Value) -> Result<ClaimResponse> {
    let task = match value {
        Value::Object(mut body) => body.remove("task").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    if !task.is_object() {
        return Ok(ClaimResponse { task: None });
    }
    // A task that cannot be read is an error, never a silent drop: the worker backs off and
    // the server gets the turn back when its lease expires.
    let task = serde_json::from_value(task).map_err(|e| {
        Error::Transport(format!(
            "the claim answered a task that cannot be read: {e}"
        ))
    })?;
    Ok(ClaimResponse { task: Some(task) })
}

/// The error envelope of a non-2xx answer, read in the wire's order of preference.
#[derive(Debug, Default)]
struct WireError {
    code: String,
    message: String,
    param: Option<String>,
    retryable: Option<bool>,
    retry_after: Option<Duration>,
    details: Value,
}

impl WireError {
    fn parse(status: u16, body: &[u8]) -> WireError {
        let text = || {
            let raw = String::from_utf8_lossy(body).trim().to_owned();
            if raw.is_empty() {
                format!("the server answered HTTP {status} without a body")
            } else {
                raw
            }
        };
        let unstructured = || WireError {
            code: "unstructured_error".into(),
            message: text(),
            ..WireError::default()
        };
        let Ok(Value::Object(mut root)) = crate::store::json::from_slice::<Value>(body) else {
            return unstructured();
        };
        let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        match root.remove("error") {
            // The data-plane envelope: {"error": {"code", "message", ...}}.
            Some(Value::Object(e)) => WireError {
                code: string(e.get("code")).unwrap_or_else(|| "unstructured_error".into()),
                message: string(e.get("message")).unwrap_or_else(text),
                param: string(e.get("param")),
                retryable: e.get("retryable").and_then(Value::as_bool),
                retry_after: e
                    .get("retry_after_seconds")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(1e9))),
                details: e.get("details").cloned().unwrap_or(Value::Null),
            },
            // The integrations style: {"ok": false, "error": "<text>", "code": "..."}.
            Some(Value::String(message)) => WireError {
                code: string(root.get("code")).unwrap_or_else(|| "unstructured_error".into()),
                message,
                details: root.remove("details").unwrap_or(Value::Null),
                ..WireError::default()
            },
            _ => unstructured(),
        }
    }

    /// The [`Error`] the embedded engine would have returned: chosen by the code (and a
    /// status that agrees with it), its fields from `details`; see [`Error::from_wire`].
    fn into_error(self, status: u16, lease: Option<&Lease>) -> Error {
        Error::from_wire(
            status,
            &self.code,
            &self.message,
            self.param.as_deref(),
            &self.details,
            lease.map(|l| (l.workflow_id.as_str(), l.turn)),
        )
    }
}

fn push_opt<T: ToString>(q: &mut Vec<(&'static str, String)>, key: &'static str, v: Option<T>) {
    if let Some(v) = v {
        q.push((key, v.to_string()));
    }
}

#[async_trait]
impl Backend for Http {
    /// `POST /v1/workflows/instances`, retried. The answer is the instance; a server that
    /// answers something else is asked for the instance with a read.
    async fn create_instance(&self, req: CreateInstanceRequest) -> Result<WorkflowInstance> {
        let answer = self.post(P_INSTANCES, &req, Retry::Yes, None).await?;
        let instance = match crate::store::json::from_slice(&answer.body) {
            Ok(instance) => Ok(instance),
            Err(_) => serde_json::from_value(answer.value()?),
        };
        match instance {
            Ok(instance) => Ok(instance),
            Err(_) => self.get_instance(&req.id).await,
        }
    }

    /// `POST /v1/workflows/instances/message`, retried.
    async fn send_message(&self, req: MessageRequest) -> Result<WorkflowTurn> {
        self.post(P_MESSAGE, &req, Retry::Yes, None).await?.decode()
    }

    /// `GET /v1/workflows/instances/get?id=`, retried.
    async fn get_instance(&self, id: &str) -> Result<WorkflowInstance> {
        self.get(P_GET, vec![("id", id.to_owned())]).await
    }

    /// `GET /v1/workflows/instances?after=&limit=`, retried.
    async fn list_instances(&self, query: ListInstancesQuery) -> Result<InstanceList> {
        let mut q = Vec::new();
        push_opt(&mut q, "after", query.after);
        push_opt(&mut q, "limit", query.limit);
        self.get(P_INSTANCES, q).await
    }

    /// `GET /v1/workflows/instances/inbox?id=&after=&limit=&payloads=true`, retried
    /// (`payloads` is sent only when true).
    async fn instance_inbox(&self, query: InboxQuery) -> Result<InboxResponse> {
        let mut q = vec![("id", query.id)];
        push_opt(&mut q, "after", query.after);
        push_opt(&mut q, "limit", query.limit);
        if query.payloads {
            q.push(("payloads", "true".into()));
        }
        self.get(P_INBOX, q).await
    }

    /// `GET /v1/workflows/inbox?workflow_type=&version=&after=&limit=`, retried.
    async fn type_inbox(&self, query: TypeInboxQuery) -> Result<TypeInboxResponse> {
        let mut q = vec![("workflow_type", query.workflow_type)];
        push_opt(&mut q, "version", query.version);
        push_opt(&mut q, "after", query.after);
        push_opt(&mut q, "limit", query.limit);
        self.get(P_TYPE_INBOX, q).await
    }

    /// `GET /v1/workflows/instances/history?id=&after=&limit=`, retried.
    async fn history(&self, query: HistoryQuery) -> Result<HistoryResponse> {
        let mut q = vec![("id", query.id)];
        push_opt(&mut q, "after", query.after);
        push_opt(&mut q, "limit", query.limit);
        self.get(P_HISTORY, q).await
    }

    /// `GET /v1/workflows/instances/turn?id=&turn=`, retried.
    async fn turn(&self, query: TurnQuery) -> Result<WorkflowTurn> {
        let q = vec![("id", query.id), ("turn", query.turn.to_string())];
        self.get(P_TURN, q).await
    }

    /// `POST /v1/workflows/instances/control`, sent once.
    async fn control(&self, req: ControlRequest) -> Result<WorkflowInstance> {
        self.post(P_CONTROL, &req, Retry::Once, None)
            .await?
            .decode()
    }

    /// `POST /v1/workflows/instances/delete`, retried.
    async fn delete_instance(&self, req: DeleteRequest) -> Result<DeleteResponse> {
        self.post(P_DELETE, &req, Retry::Yes, None).await?.decode()
    }

    /// `POST /v1/workflows/turns/claim`, sent once, with a request timeout of at least
    /// `wait_ms` plus 10 s. A body or `task` that is not an object means nothing was claimed.
    async fn claim(&self, req: ClaimRequest) -> Result<ClaimResponse> {
        let timeout = self
            .config
            .timeout
            .max(Duration::from_millis(req.wait_ms) + CLAIM_MARGIN);
        let answer = self
            .post_with_timeout(P_CLAIM, &req, Retry::Once, None, timeout)
            .await?;
        let claimed = answer.claim()?;
        if let Some(task) = &claimed.task {
            self.remember_lease(&task.token, task.lease_ms);
        }
        Ok(claimed)
    }

    /// `POST /v1/workflows/turns/operation`, retried.
    async fn operation(&self, req: OperationRequest) -> Result<WorkflowTurn> {
        let r = self
            .post(P_OPERATION, &req, Retry::Yes, Some(&req.lease))
            .await;
        self.settle(&req.lease, &r);
        r?.turn(&req.lease, TurnStatus::Running)
    }

    /// `POST /v1/workflows/turns/progress`, retried.
    async fn progress(&self, req: ProgressRequest) -> Result<WorkflowTurn> {
        let r = self
            .post(P_PROGRESS, &req, Retry::Yes, Some(&req.lease))
            .await;
        self.settle(&req.lease, &r);
        r?.turn(&req.lease, TurnStatus::Running)
    }

    /// `POST /v1/workflows/turns/checkpoint`, retried. A saved sleep releases the turn.
    async fn checkpoint(&self, req: CheckpointRequest) -> Result<WorkflowTurn> {
        let r = self
            .post(P_CHECKPOINT, &req, Retry::Yes, Some(&req.lease))
            .await;
        self.settle(&req.lease, &r);
        let status = if req.kind == CheckpointKind::Sleep {
            self.forget_lease(&req.lease.token);
            TurnStatus::Waiting
        } else {
            TurnStatus::Running
        };
        r?.turn(&req.lease, status)
    }

    /// `POST /v1/workflows/turns/wait-signal`, retried. A `waiting` answer released the turn.
    async fn wait_signal(&self, req: WaitSignalRequest) -> Result<WorkflowTurn> {
        let r = self
            .post(P_WAIT_SIGNAL, &req, Retry::Yes, Some(&req.lease))
            .await;
        self.settle(&req.lease, &r);
        let turn = r?.turn(&req.lease, TurnStatus::Running)?;
        if turn.status == TurnStatus::Waiting {
            self.forget_lease(&req.lease.token);
        }
        Ok(turn)
    }

    /// `POST /v1/workflows/turns/signal`, retried.
    async fn signal(&self, req: SignalRequest) -> Result<WorkflowTurn> {
        self.post(P_SIGNAL, &req, Retry::Yes, None).await?.decode()
    }

    /// `POST /v1/workflows/turns/complete`, retried with the very same body bytes.
    async fn complete(&self, req: CompleteRequest) -> Result<WorkflowTurn> {
        let r = self
            .post(P_COMPLETE, &req, Retry::Yes, Some(&req.lease))
            .await;
        self.forget_lease(&req.lease.token);
        r?.turn(&req.lease, TurnStatus::Completed)
    }

    /// `POST /v1/workflows/turns/fail`, sent once.
    async fn fail(&self, req: FailRequest) -> Result<WorkflowTurn> {
        let r = self.post(P_FAIL, &req, Retry::Once, Some(&req.lease)).await;
        self.forget_lease(&req.lease.token);
        let status = if req.non_retryable {
            TurnStatus::Failed
        } else {
            TurnStatus::Queued
        };
        r?.turn(&req.lease, status)
    }

    /// `POST /v1/workflows/turns/heartbeat`, sent once, with a request timeout of a third of
    /// the lease (at least 50 ms).
    ///
    /// The lease length comes from the claim: the client remembers `lease_ms` by token for the
    /// turns it claimed (clones share the memory) and forgets it when the turn is released,
    /// finished or lost. For a token it did not claim it uses 20 s, a third of the default
    /// 60 s lease. Either way the timeout is at most [`HttpBuilder::timeout`].
    async fn heartbeat(&self, lease: Lease) -> Result<WorkflowTurn> {
        let timeout = self.heartbeat_timeout(&lease.token);
        let r = self
            .post_with_timeout(P_HEARTBEAT, &lease, Retry::Once, Some(&lease), timeout)
            .await;
        self.settle(&lease, &r);
        r?.turn(&lease, TurnStatus::Running)
    }

    /// `POST /v1/workflows/schemas`, retried: registering the same document again is harmless.
    async fn register_schema(&self, schema: &SchemaDocument) -> Result<()> {
        let body = schema;
        // The answer is not used, but one that is not JSON is still an error.
        self.post(P_SCHEMAS, &body, Retry::Yes, None)
            .await?
            .value()
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse_http_date("yesterday"), None);
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn jitter_stays_under_its_ceiling() {
        let base = Duration::from_millis(100);
        for retry in 0..40 {
            let d = jitter(base, retry);
            let ceiling = (base * 2u32.saturating_pow(retry.min(20))).min(MAX_DELAY);
            assert!(d <= ceiling, "retry {retry}: {d:?} > {ceiling:?}");
        }
        let spread: std::collections::HashSet<_> = (0..16).map(|_| jitter(base, 3)).collect();
        assert!(spread.len() > 1, "jitter must vary");
    }

    #[test]
    fn error_bodies() {
        let lease = Lease {
            workflow_id: "w".into(),
            turn: 3,
            token: "t".into(),
        };
        // With details (as a turnwise server sends them), the fields come from there.
        let body = br#"{"error":{"type":"conflict_error","code":"turn_lease_lost","message":"turn 3 of `w` is not held by this token: the lease expired","request_id":null,"doc_url":null,"details":{"workflow_id":"w","turn":3,"reason":"the lease expired"}}}"#;
        let e = WireError::parse(409, body).into_error(409, None);
        assert_eq!(
            e,
            Error::LeaseLost {
                workflow_id: "w".into(),
                turn: 3,
                reason: "the lease expired".into()
            }
        );
        // Without, the code still picks the variant; the message is not parsed.
        let body = br#"{"error":{"code":"turn_lease_lost","message":"gone"}}"#;
        let e = WireError::parse(409, body).into_error(409, Some(&lease));
        assert_eq!(
            e,
            Error::LeaseLost {
                workflow_id: "w".into(),
                turn: 3,
                reason: "gone".into()
            }
        );

        let body = br#"{"error":{"code":"payload_too_large","message":"`state` is 70000 bytes, over its limit of 65536 bytes","param":"state","details":{"what":"state","size":70000,"limit":65536}}}"#;
        let e = WireError::parse(413, body).into_error(413, None);
        assert_eq!(
            e,
            Error::TooLarge {
                what: "state".into(),
                size: 70000,
                limit: 65536
            }
        );

        let body = br#"{"error":{"code":"invalid_request","message":"invalid `id`: too long","param":"id","details":{"param":"id","message":"too long"}}}"#;
        let e = WireError::parse(400, body).into_error(400, None);
        assert_eq!(
            e,
            Error::Invalid {
                param: "id".into(),
                message: "too long".into()
            }
        );

        // A known code with another status keeps what the server said.
        let body = br#"{"error":{"code":"conflict","message":"busy"}}"#;
        let e = WireError::parse(503, body).into_error(503, None);
        assert_eq!((e.status(), e.code()), (503, "conflict"));
        assert!(e.is_retryable());

        let e = WireError::parse(502, b"Bad Gateway").into_error(502, None);
        assert_eq!((e.status(), e.code()), (502, "unstructured_error"));

        let body = br#"{"ok":false,"error":"nope","code":"weird"}"#;
        let e = WireError::parse(400, body).into_error(400, None);
        assert_eq!(
            e,
            Error::Http {
                status: 400,
                code: "weird".into(),
                message: "nope".into()
            }
        );
    }

    #[test]
    fn claim_answers_read_leniently() {
        assert!(parse_claim(Value::Null).unwrap().task.is_none());
        assert!(parse_claim(serde_json::json!([1])).unwrap().task.is_none());
        assert!(parse_claim(serde_json::json!({"task": "x"}))
            .unwrap()
            .task
            .is_none());
        assert!(parse_claim(serde_json::json!({"task": {"token": 1}})).is_err());
    }
}

/// The `Http` backend's own connections to a plain `http://` server: HTTP/1.1 over a pool of
/// kept-alive TCP connections, each request written straight to one of them.
///
/// reqwest's layers around the same hyper connection (redirects, its retry policy, proxy
/// matching, a URL parsed again from every answer, boxed futures) cost more CPU than the rest of
/// a call on a loopback server, so [`Http`] sends through [`Direct`] when it can, and through
/// reqwest otherwise: for `https://`, when a proxy is configured in the environment, and to
/// follow a redirect. What goes on the wire is what reqwest sends: the same method, path,
/// query, headers (`host`, `accept: */*`, `user-agent`, `lbb-version`, `authorization`,
/// `content-type`, `content-length`) and body, and the same socket options (`TCP_NODELAY`,
/// keep-alive probes after 15 s, every 15 s, 3 of them, `TCP_USER_TIMEOUT` 30 s). Idle
/// connections are reused most recent first and dropped after 90 s, as reqwest's pool does.
mod direct {
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
            timeout: Duration,
        ) -> Result<Reply, Failure> {
            match tokio::time::timeout(timeout, self.exchange(method, target, body)).await {
                Ok(result) => result,
                Err(_) => Err(Failure::TimedOut(timeout)),
            }
        }

        async fn exchange(
            &self,
            method: &Method,
            target: &Uri,
            body: Option<&Bytes>,
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
}
