//! Helpers shared by the HTTP tests: an in-process server, the `turnwise` binary, raw JSON calls.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};
use turnwise_server::{router, serve_with, ServerOptions, Shutdown};

/// One HTTP answer: status, headers and the JSON body (`null` when empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    /// Assert the status, and for errors the envelope, then return the body.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "expected 200, got {self:#?}");
        self.body
    }

    /// Assert an error with this status and code in a complete envelope; return `error`.
    #[track_caller]
    pub fn err(self, status: u16, code: &str) -> Value {
        assert_eq!(self.status.as_u16(), status, "status of {self:#?}");
        let e = &self.body["error"];
        assert_eq!(e["code"], code, "code of {self:#?}");
        for key in [
            "type",
            "code",
            "message",
            "request_id",
            "doc_url",
            "param",
            "retryable",
        ] {
            assert!(
                e.get(key).is_some(),
                "the envelope lacks `{key}`: {self:#?}"
            );
        }
        let id = self
            .headers
            .get("x-request-id")
            .expect("every answer has x-request-id")
            .to_str()
            .unwrap();
        assert_eq!(e["request_id"], id, "the envelope names the request id");
        let kind = match status {
            409 => "conflict_error",
            429 => "rate_limit_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        };
        assert_eq!(e["type"], kind, "type of {self:#?}");
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
        e.clone()
    }
}

/// A client of one server: base URL, token and namespace query.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub token: Option<String>,
    pub query: String,
    pub http: Client,
}

impl Api {
    pub fn new(base: impl Into<String>, token: Option<&str>) -> Self {
        Self {
            base: base.into(),
            token: token.map(str::to_owned),
            query: "graph=main".into(),
            http: Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    /// The same server, another `graph`/`stack` query.
    pub fn scoped(&self, query: &str) -> Self {
        Self {
            query: query.into(),
            ..self.clone()
        }
    }

    fn url(&self, path: &str) -> String {
        let sep = if path.contains('?') { '&' } else { '?' };
        if self.query.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}{path}{sep}{}", self.base, self.query)
        }
    }

    /// Send raw bytes.
    pub async fn raw(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Answer {
        self.try_raw(method, path, body, self.token.as_deref())
            .await
            .expect("the server answers")
    }

    /// Send raw bytes with the given token (or none).
    pub async fn try_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        token: Option<&str>,
    ) -> reqwest::Result<Answer> {
        let mut req = self.http.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let res = req.send().await?;
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.raw(Method::POST, path, Some(serde_json::to_vec(&body).unwrap()))
            .await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.raw(Method::GET, path, None).await
    }

    /// Everything the API shows about an instance: it changes whenever anything is written.
    pub async fn snapshot(&self, id: &str) -> Value {
        let inst = self
            .get(&format!("/v1/workflows/instances/get?id={id}"))
            .await;
        let inbox = self
            .get(&format!(
                "/v1/workflows/instances/inbox?id={id}&payloads=true"
            ))
            .await;
        let history = self
            .get(&format!("/v1/workflows/instances/history?id={id}"))
            .await;
        json!({"instance": inst.body, "inbox": inbox.body, "history": history.body})
    }

    pub async fn create(&self, id: &str, lease_ms: u64) -> Value {
        self.post(
            "/v1/workflows/instances",
            json!({"id": id, "workflow_type": "counter", "version": "v1",
                   "state": {"count": 0}, "lease_ms": lease_ms, "max_attempts": 3}),
        )
        .await
        .ok()
    }

    pub async fn send(&self, id: &str, message_id: &str, message: Value) -> Value {
        self.post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": id, "id": message_id, "message": message}),
        )
        .await
        .ok()
    }

    /// Claim a counter turn, waiting up to `wait_ms`.
    pub async fn claim(&self, wait_ms: u64) -> Value {
        self.post(
            "/v1/workflows/turns/claim",
            json!({"worker": "test-worker", "wait_ms": wait_ms,
                   "workflows": [{"workflow_type": "counter", "version": "v1"}]}),
        )
        .await
        .ok()["task"]
            .clone()
    }
}

/// The lease triple of a claimed task.
pub fn lease(task: &Value) -> Value {
    json!({
        "workflow_id": task["turn"]["workflow_id"],
        "turn": task["turn"]["number"],
        "token": task["token"],
    })
}

/// `base` with `extra`'s keys added.
pub fn with(base: &Value, extra: Value) -> Value {
    let mut out = base.clone();
    for (k, v) in extra.as_object().unwrap() {
        out[k] = v.clone();
    }
    out
}

/// A server running in this process on a free loopback port.
pub struct InProcess {
    pub api: Api,
    pub shutdown: Shutdown,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub async fn start(engine: turnwise::Engine, token: Option<&str>) -> InProcess {
    start_with(engine, token, ServerOptions::default()).await
}

pub async fn start_with(
    engine: turnwise::Engine,
    token: Option<&str>,
    options: ServerOptions,
) -> InProcess {
    let shutdown = Shutdown::new();
    let mut options = options.with_shutdown(shutdown.clone());
    if let Some(t) = token {
        options = options.with_token(t);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(engine, options.clone());
    let stop = shutdown.clone();
    let task =
        tokio::spawn(async move { serve_with(listener, app, &options, stop.wait_owned()).await });
    InProcess {
        api: Api::new(format!("http://{addr}"), token),
        shutdown,
        task,
    }
}

/// A `turnwise` process, killed (SIGKILL) when dropped so that a failing test leaves none behind.
pub struct ServerProcess(pub Child);

impl ServerProcess {
    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// The `turnwise` binary serving `db` on `bind`; answers the process and its `host:port` once
/// it listens.
pub fn spawn_binary(db: &Path, bind: &str, token: Option<&str>) -> (ServerProcess, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_turnwise"));
    cmd.args(["serve", "--db"])
        .arg(db)
        .args(["--bind", bind])
        .env_remove("TURNWISE_API_TOKEN")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(t) = token {
        cmd.args(["--api-token", t]);
    }
    let mut child = cmd.spawn().expect("start the turnwise binary");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Some(addr) = line.strip_prefix("turnwise listening on http://") {
                let _ = tx.send(addr.to_owned());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(addr) => (ServerProcess(child), addr),
        Err(_) => {
            let _ = child.kill();
            panic!("the turnwise binary did not start listening within 30 s");
        }
    }
}

/// Wait for a child to exit, at most `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
