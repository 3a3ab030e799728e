//! The [`Http`] backend: the message-workflow protocol spoken to a server over HTTP.
//!
//! [`Http`] implements [`Backend`] by sending each call to its route of the message-workflow
//! API (`docs/http-client.md` lists them), so handles and workers run over a turnwise server,
//! or any server speaking the same API, exactly as they run over the embedded
//! `Engine`. Refusals come back as the same [`Error`] variants the engine
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
//!     .token(std::env::var("TURNWISE_API_TOKEN").ok())
//!     .graph("main")
//!     .build()?;
//! # let _ = backend;
//! # Ok(())
//! # }
//! ```

#![warn(clippy::too_many_lines)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod answers;
mod errors;
mod pool;
mod retry;
mod tls;
mod transport;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, USER_AGENT};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

use self::answers::Answer;
use self::transport::Call;
use self::transport::Retry;
use turnwise_core::protocol::backend::Backend;
use turnwise_core::protocol::error::{Error, Result};
use turnwise_core::protocol::*;
use turnwise_core::rules::routes::Route;

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

/// A claim's request timeout is at least its `wait_ms` plus this much.
const CLAIM_MARGIN: Duration = Duration::from_secs(10);
/// The heartbeat timeout for a token this client did not claim (a third of the default lease).
const UNKNOWN_LEASE_BEAT_TIMEOUT: Duration = Duration::from_secs(20);
/// The lease map is emptied when it reaches this many entries (see [`Http::heartbeat`]).
const LEASE_MAP_CAP: usize = 4096;

// Each operation's path, from the protocol's one route table (`turnwise_core::rules::routes`),
// which the server registers its routes from too.
const P_SCHEMAS: &str = Route::RegisterSchema.path();
const P_INSTANCES: &str = Route::CreateInstance.path();
const P_MESSAGE: &str = Route::SendMessage.path();
const P_GET: &str = Route::GetInstance.path();
const P_INBOX: &str = Route::InstanceInbox.path();
const P_TYPE_INBOX: &str = Route::TypeInbox.path();
const P_HISTORY: &str = Route::History.path();
const P_TURN: &str = Route::Turn.path();
const P_CONTROL: &str = Route::Control.path();
const P_DELETE: &str = Route::Delete.path();
const P_CLAIM: &str = Route::Claim.path();
const P_OPERATION: &str = Route::Operation.path();
const P_PROGRESS: &str = Route::Progress.path();
const P_CHECKPOINT: &str = Route::Checkpoint.path();
const P_WAIT_SIGNAL: &str = Route::WaitSignal.path();
const P_SIGNAL: &str = Route::Signal.path();
const P_COMPLETE: &str = Route::Complete.path();
const P_FAIL: &str = Route::Fail.path();
const P_HEARTBEAT: &str = Route::Heartbeat.path();
const P_RUNS: &str = Route::Runs.path();
const P_RUN: &str = Route::GetRun.path();
const P_RUN_STATS: &str = Route::RunStats.path();
const P_SCHEDULES: &str = Route::CreateSchedule.path();
const P_SCHEDULE_GET: &str = Route::GetSchedule.path();
const P_SCHEDULE_CONTROL: &str = Route::ControlSchedule.path();
const P_RESTART: &str = Route::RestartTurn.path();
const P_FORK: &str = Route::ForkInstance.path();
const P_COMPAT: &str = Route::CompatLive.path();
const P_UPGRADE: &str = Route::UpgradeInstances.path();

/// Every route without parameters of its own, whose URL [`Config::fixed`] builds once.
const FIXED_PATHS: [&str; 22] = [
    P_RUNS,
    P_RUN,
    P_RUN_STATS,
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
                let target = pool::Direct::target(&url);
                Some((path, url, target))
            })
            .collect();
        self
    }

    /// The URL of `path` with the scope's query parameters, then `query`.
    fn build_url(&self, path: &str, query: &[(&str, String)]) -> Result<Url> {
        let mut url = Url::parse(&format!("{}{path}", self.base)).map_err(|e| {
            Error::transport_caused(format_args!("cannot build the URL of {path}"), e)
        })?;
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
    direct: Option<Arc<pool::Direct>>,
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
    /// PEM documents of CA certificates to trust besides the system's, checked by `build`.
    ca_certificates: Vec<Vec<u8>>,
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
            .field("ca_certificates", &self.ca_certificates.len())
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

    /// Trust the CA certificate(s) of `pem` for `https://` servers, besides the operating
    /// system's trust roots: for a server whose certificate a private CA signed.
    ///
    /// `pem` is a PEM document with one or more `-----BEGIN CERTIFICATE-----` sections (other
    /// sections are skipped); call this again to add more documents. They are read by
    /// [`build`](Self::build), which fails with [`Error::Invalid`] (param `ca_certificate`)
    /// for a document that is not PEM, holds no certificate, or holds one that is not a
    /// readable X.509 certificate.
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_certificates.push(pem.into());
        self
    }

    /// Check the options and build the client. Fails with [`Error::Invalid`] for a base URL
    /// that is not an absolute `http` or `https` URL, a token that cannot be a header, or a
    /// CA certificate that cannot be read (see [`ca_certificate`](Self::ca_certificate)).
    ///
    /// Certificates of `https://` servers are checked against the operating system's trust
    /// roots (on Linux and BSDs the CA bundle at `SSL_CERT_FILE` / `SSL_CERT_DIR` or the usual
    /// system paths) plus the CA certificates given. An `https://` client fails with
    /// [`Error::Transport`] when no trusted root can be loaded at all.
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
        let direct = pool::Direct::new(&url, direct_headers).map(Arc::new);
        let mut extra_roots = Vec::new();
        for (i, pem) in self.ca_certificates.iter().enumerate() {
            extra_roots.extend(tls::parse_ca_pem(pem, i + 1)?);
        }
        let tls = tls::client_config(extra_roots, url.scheme() == "https")?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .default_headers(headers)
            .user_agent(user_agent)
            .build()
            .map_err(|e| Error::transport_caused("cannot build the HTTP client", e))?;
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
            ca_certificates: Vec::new(),
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

    /// `GET /v1/workflows/schemas?workflow_type=`, retried: the schema documents registered
    /// in this client's namespace, of one workflow type when `workflow_type` is given, as the
    /// server answers them (each [`SchemaDocument`] with its `registered_at_ms`). Not part of
    /// [`Backend`]: the embedded engine keeps no schemas.
    pub async fn list_schemas(
        &self,
        workflow_type: Option<&str>,
    ) -> Result<Vec<serde_json::Value>> {
        let mut q = Vec::new();
        push_opt(&mut q, "workflow_type", workflow_type);
        let mut page: serde_json::Value = self.get(P_SCHEMAS, q).await?;
        match page.get_mut("schemas").map(serde_json::Value::take) {
            Some(serde_json::Value::Array(docs)) => Ok(docs),
            _ => Err(Error::transport(format!(
                "{P_SCHEMAS} answered a body without a `schemas` array"
            ))),
        }
    }

    /// `GET /v1/workflows/schemas?workflow_type=&version=`, retried: the schema document of
    /// one workflow type and version, as the server answers it. [`Error::NotFound`] when none
    /// is registered.
    pub async fn get_schema(
        &self,
        workflow_type: &str,
        version: &str,
    ) -> Result<serde_json::Value> {
        let q = vec![
            ("workflow_type", workflow_type.to_owned()),
            ("version", version.to_owned()),
        ];
        self.get(P_SCHEMAS, q).await
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
        let instance = match turnwise_core::protocol::json::from_slice(&answer.body) {
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

    /// `GET /v1/workflows/instances/runs?id=&cursor=&limit=`, retried.
    async fn runs(&self, query: RunsQuery) -> Result<RunPage> {
        let mut q = Vec::new();
        push_opt(&mut q, "id", query.id);
        push_opt(&mut q, "cursor", query.cursor);
        push_opt(&mut q, "limit", query.limit);
        self.get(P_RUNS, q).await
    }

    /// `GET /v1/workflows/instances/runs/get?run=`, retried.
    async fn run(&self, run_id: &str) -> Result<WorkflowRun> {
        self.get(P_RUN, vec![("run", run_id.to_owned())]).await
    }

    /// `GET /v1/workflows/instances/runs/stats?hours=`, retried.
    async fn run_stats(&self, hours: u32) -> Result<RunStats> {
        self.get(P_RUN_STATS, vec![("hours", hours.to_string())])
            .await
    }

    /// `GET /v1/workflows/instances/turn?id=&turn=`, retried.
    async fn turn(&self, query: TurnQuery) -> Result<WorkflowTurn> {
        let q = vec![("id", query.id), ("turn", query.turn.to_string())];
        self.get(P_TURN, q).await
    }

    /// `GET /v1/workflows/instances/turn?id=&turn=&wait_ms=` (the turnwise extension: the
    /// server answers once the turn has an outcome or the wait runs out), retried, with a
    /// request timeout of at least the wait plus 10 s. A server without the extension answers
    /// at once, and the caller reads again.
    async fn await_turn(&self, query: TurnQuery, wait: Duration) -> Result<WorkflowTurn> {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let q = vec![
            ("id", query.id),
            ("turn", query.turn.to_string()),
            ("wait_ms", wait_ms.to_string()),
        ];
        let answer = self
            .send(Call {
                method: Method::GET,
                path: P_TURN,
                query: q,
                body: None,
                retry: Retry::Yes,
                timeout: self.config.timeout.max(wait + CLAIM_MARGIN),
                lease: None,
            })
            .await?;
        Answer {
            path: P_TURN,
            body: answer,
        }
        .decode()
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
        let status = if req.mismatch.is_some() {
            TurnStatus::Suspended
        } else if req.non_retryable {
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

    /// `POST /v1/workflows/schedules` (a turnwise extension), retried: an identical repeat
    /// answers the schedule as created.
    async fn create_schedule(&self, req: CreateScheduleRequest) -> Result<WorkflowSchedule> {
        self.post(P_SCHEDULES, &req, Retry::Yes, None)
            .await?
            .decode()
    }

    /// `GET /v1/workflows/schedules/get?workflow_id=&name=`, retried.
    async fn get_schedule(&self, workflow_id: &str, name: &str) -> Result<WorkflowSchedule> {
        let q = vec![
            ("workflow_id", workflow_id.to_owned()),
            ("name", name.to_owned()),
        ];
        self.get(P_SCHEDULE_GET, q).await
    }

    /// `GET /v1/workflows/schedules?workflow_id=&after=&limit=`, retried.
    async fn list_schedules(&self, query: ListSchedulesQuery) -> Result<ScheduleList> {
        let mut q = Vec::new();
        push_opt(&mut q, "workflow_id", query.workflow_id);
        push_opt(&mut q, "after", query.after);
        push_opt(&mut q, "limit", query.limit);
        self.get(P_SCHEDULES, q).await
    }

    /// `POST /v1/workflows/schedules/control`, retried: each action is idempotent.
    async fn control_schedule(
        &self,
        req: ScheduleControlRequest,
    ) -> Result<ScheduleControlResponse> {
        self.post(P_SCHEDULE_CONTROL, &req, Retry::Yes, None)
            .await?
            .decode()
    }

    /// `POST /v1/workflows/turns/restart` (a turnwise extension), retried: an exact repeat
    /// answers the restart as it was made.
    async fn restart_turn(&self, req: RestartTurnRequest) -> Result<RestartTurnResponse> {
        self.post(P_RESTART, &req, Retry::Yes, None).await?.decode()
    }

    /// `POST /v1/workflows/instances/fork` (a turnwise extension), retried: an exact repeat
    /// answers the fork as it was made.
    async fn fork_instance(&self, req: ForkInstanceRequest) -> Result<ForkInstanceResponse> {
        self.post(P_FORK, &req, Retry::Yes, None).await?.decode()
    }

    /// `GET /v1/workflows/compat?workflow_type=&to_version=`, retried: one answer with every
    /// instance checked (the route does not page).
    async fn compat_live(&self, query: LiveCompatQuery) -> Result<LiveCompat> {
        let q = vec![
            ("workflow_type", query.workflow_type),
            ("to_version", query.to_version),
        ];
        self.get(P_COMPAT, q).await
    }

    /// `POST /v1/workflows/instances/upgrade`, retried: a repeat answers the recorded move and
    /// records nothing.
    async fn upgrade_instances(&self, req: UpgradeRequest) -> Result<UpgradeResponse> {
        self.post(P_UPGRADE, &req, Retry::Yes, None).await?.decode()
    }
}
