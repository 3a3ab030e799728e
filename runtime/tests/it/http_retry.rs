//! The `Http` backend's client-side rules against a scripted server: which routes are retried,
//! the delay it honours, when it stops, the bytes it resends, the headers and query it sends.
#![cfg(feature = "http")]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Error, Http};

use crate::common;

/// One programmed answer.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn reply(status: u16, body: Value) -> Reply {
    Reply {
        status,
        headers: Vec::new(),
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

fn ok(body: Value) -> Reply {
    reply(200, body)
}

/// A `503 store_unavailable` as a turnwise server sends it, the error's field in `details`.
fn unavailable() -> Reply {
    reply(
        503,
        json!({"error": {"type": "api_error", "code": "store_unavailable",
                          "message": "store error: busy", "request_id": null, "doc_url": null,
                          "details": {"message": "busy"}}}),
    )
}

impl Reply {
    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    fn delayed(mut self, by: Duration) -> Self {
        self.delay = by;
        self
    }
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: Vec<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
    at: Instant,
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// Answered once the programmed replies run out.
    otherwise: Option<Reply>,
    seen: Vec<Seen>,
}

/// A server on 127.0.0.1:0 answering a programmed sequence.
#[derive(Clone)]
struct Scripted {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl Scripted {
    async fn start(replies: Vec<Reply>) -> Scripted {
        let script = Arc::new(Mutex::new(Script {
            replies: replies.into(),
            ..Script::default()
        }));
        let state = script.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move { answer(state, method, uri, headers, body).await }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Scripted { addr, script }
    }

    /// Answer `reply` whenever the programmed ones have run out.
    fn otherwise(&self, reply: Reply) {
        self.script.lock().unwrap().otherwise = Some(reply);
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// A client with short delays, so retries run fast.
    fn client(&self) -> Http {
        Http::builder(self.url())
            .retry_delay(Duration::from_millis(5))
            .build()
            .unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.script.lock().unwrap().seen.clone()
    }
}

async fn answer(
    script: Arc<Mutex<Script>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let next = {
        let mut s = script.lock().unwrap();
        s.seen.push(Seen {
            method,
            path: uri.path().to_owned(),
            query,
            headers,
            body,
            at: Instant::now(),
        });
        s.replies.pop_front().or_else(|| s.otherwise.clone())
    };
    let Some(r) = next else {
        return (StatusCode::IM_A_TEAPOT, "the script ran out").into_response();
    };
    tokio::time::sleep(r.delay).await;
    let mut response = (
        StatusCode::from_u16(r.status).unwrap(),
        [("content-type", "application/json")],
        r.body,
    )
        .into_response();
    for (name, value) in r.headers {
        response
            .headers_mut()
            .insert(name, value.parse().expect("a header value"));
    }
    response
}

// ---------------------------------------------------------------------------------------------
// Fixtures of the wire
// ---------------------------------------------------------------------------------------------

fn lease() -> Lease {
    Lease {
        workflow_id: "w-1".into(),
        turn: 1,
        token: "tok-1".into(),
    }
}

fn turn_json(status: &str) -> Value {
    json!({
        "workflow_id": "w-1", "number": 1, "message_id": "m-1", "message": {"add": 1},
        "version": "v1", "status": status, "attempt": 1, "sequence": 2,
        "created_at_ms": 1, "updated_at_ms": 2, "ready_at_ms": 1, "steps": [],
        "result": null, "state_after": null, "some_future_field": {"ignored": true}
    })
}

fn instance_json() -> Value {
    json!({
        "id": "w-1", "workflow_type": "counter", "version": "v1", "state": {"count": 0},
        "status": "idle", "pending_messages": 0, "completed_turns": 0, "history_through": 0,
        "sequence": 1, "created_at_ms": 1, "updated_at_ms": 1
    })
}

fn task_json(lease_ms: u64) -> Value {
    json!({"task": {
        "workflow_type": "counter", "state": {"count": 0}, "token": "tok-1",
        "lease_ms": lease_ms, "effect_prefix": "e1", "turn": turn_json("running")
    }})
}

fn message() -> MessageRequest {
    MessageRequest {
        workflow_id: "w-1".into(),
        id: "m-1".into(),
        message: json!({"add": 1}),
        origin: None,
    }
}

/// An integer beyond 64 bits with `exact-numbers`; the largest u64 without it.
const BIG: &str = if cfg!(feature = "exact-numbers") {
    "123456789012345678901234567890"
} else {
    "18446744073709551615"
};

fn big() -> Value {
    serde_json::from_str(BIG).unwrap()
}

fn complete() -> CompleteRequest {
    CompleteRequest {
        lease: lease(),
        state: json!({"count": 1, "big": big()}),
        result: json!(1),
        continuation: None,
        usage: None,
        results: None,
    }
}

fn fail() -> FailRequest {
    FailRequest {
        lease: lease(),
        error: "boom".into(),
        non_retryable: false,
        retry_at_ms: None,
        usage: None,
        results: None,
        mismatch: None,
    }
}

fn claim() -> ClaimRequest {
    ClaimRequest {
        worker: "w".into(),
        workflows: vec![WorkflowRef::new("counter", "v1")],
        wait_ms: 0,
        include_execution_credential: None,
    }
}

fn control() -> ControlRequest {
    ControlRequest {
        workflow_id: "w-1".into(),
        action: ControlAction::Pause,
        turn: None,
        by: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Retries
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn retry_after_header_is_honoured() {
    let server = Scripted::start(vec![
        unavailable().header("retry-after", "1"),
        ok(turn_json("queued")),
    ])
    .await;
    let started = Instant::now();
    let turn = server.client().send_message(message()).await.unwrap();
    assert_eq!(turn.number, 1);
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "one retry");
    let gap = seen[1].at - seen[0].at;
    assert!(
        gap >= Duration::from_millis(950),
        "the retry waited {gap:?}, not the 1 s Retry-After asked for"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn retry_after_seconds_in_the_body_is_honoured() {
    let mut busy = reply(
        429,
        json!({"error": {"code": "rate_limited", "message": "slow down", "type": "rate_limit_error",
                          "retry_after_seconds": 0.4, "request_id": null, "doc_url": null}}),
    );
    busy.headers.clear();
    let server = Scripted::start(vec![busy, ok(instance_json())]).await;
    server.client().get_instance("w-1").await.unwrap();
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_millis(380), "waited only {gap:?}");
}

#[tokio::test]
async fn header_wins_over_the_body_hint() {
    let busy = reply(
        503,
        json!({"error": {"code": "store_unavailable", "message": "busy", "retry_after_seconds": 30}}),
    )
    .header("retry-after", "0");
    let server = Scripted::start(vec![busy, ok(instance_json())]).await;
    let started = Instant::now();
    server.client().get_instance("w-1").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn retryable_false_stops_at_once() {
    let refused = reply(
        503,
        json!({"error": {"code": "workflow_source_closure_pending", "message": "not now",
                          "retryable": false, "type": "api_error"}}),
    )
    .header("retry-after", "0");
    let server = Scripted::start(vec![refused, ok(turn_json("queued"))]).await;
    let err = server.client().send_message(message()).await.unwrap_err();
    assert_eq!(server.seen().len(), 1, "no retry after retryable: false");
    assert_eq!(err.status(), 503);
    assert_eq!(err.code(), "workflow_source_closure_pending");
    assert_eq!(
        err,
        Error::Http {
            status: 503,
            code: "workflow_source_closure_pending".into(),
            message: "not now".into()
        }
    );
}

#[tokio::test]
async fn claim_fail_heartbeat_and_control_are_sent_once() {
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable().header("retry-after", "0"));
    let http = server.client();

    let e = http.claim(claim()).await.unwrap_err();
    assert_eq!(e, Error::store("busy"));
    assert!(e.is_retryable());
    http.fail(fail()).await.unwrap_err();
    http.heartbeat(lease()).await.unwrap_err();
    http.control(control()).await.unwrap_err();

    let paths: Vec<_> = server.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/workflows/turns/claim",
            "/v1/workflows/turns/fail",
            "/v1/workflows/turns/heartbeat",
            "/v1/workflows/instances/control",
        ]
    );
}

#[tokio::test]
async fn retried_routes_are_retried() {
    let server = Scripted::start(vec![]).await;
    let http = Http::builder(server.url())
        .retry_delay(Duration::from_millis(1))
        .max_retries(1)
        .build()
        .unwrap();
    server.otherwise(unavailable());
    let l = lease();
    let _ = http.create_instance(create()).await;
    let _ = http.send_message(message()).await;
    let _ = http
        .signal(SignalRequest {
            workflow_id: "w-1".into(),
            turn: 1,
            id: "s".into(),
            name: "go".into(),
            value: Value::Null,
        })
        .await;
    let _ = http
        .delete_instance(DeleteRequest {
            workflow_id: "w-1".into(),
        })
        .await;
    let _ = http.get_instance("w-1").await;
    let _ = http.list_instances(ListInstancesQuery::default()).await;
    let _ = http
        .instance_inbox(InboxQuery {
            id: "w-1".into(),
            ..InboxQuery::default()
        })
        .await;
    let _ = http
        .type_inbox(TypeInboxQuery {
            workflow_type: "counter".into(),
            ..TypeInboxQuery::default()
        })
        .await;
    let _ = http
        .history(HistoryQuery {
            id: "w-1".into(),
            ..HistoryQuery::default()
        })
        .await;
    let _ = http
        .turn(TurnQuery {
            id: "w-1".into(),
            turn: 1,
        })
        .await;
    let _ = http
        .operation(OperationRequest {
            lease: l.clone(),
            position: 0,
            key: "k".into(),
            kind: OperationKind::Step,
            timeout_ms: 1000,
            heartbeat_timeout_ms: None,
        })
        .await;
    let _ = http
        .progress(ProgressRequest {
            lease: l.clone(),
            key: "k".into(),
            sequence: 1,
            details: Value::Null,
            checkpoint: Value::Null,
        })
        .await;
    let _ = http
        .checkpoint(CheckpointRequest {
            lease: l.clone(),
            position: 0,
            key: "k".into(),
            kind: CheckpointKind::Step,
            output: json!(1),
            delay_ms: None,
        })
        .await;
    let _ = http
        .wait_signal(WaitSignalRequest {
            lease: l.clone(),
            position: 1,
            key: "w".into(),
            name: "go".into(),
            timeout_ms: 1000,
        })
        .await;
    let _ = http.complete(complete()).await;

    let seen = server.seen();
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in &seen {
        let call = format!("{} {}", s.method, s.path);
        match counts.iter_mut().find(|(p, _)| *p == call) {
            Some((_, n)) => *n += 1,
            None => counts.push((call, 1)),
        }
    }
    for (path, n) in &counts {
        assert_eq!(
            *n, 2,
            "{path} must be sent twice with max_retries(1), was {n}"
        );
    }
    assert_eq!(counts.len(), 15, "{counts:?}");
}

fn create() -> CreateInstanceRequest {
    CreateInstanceRequest {
        id: "w-1".into(),
        workflow_type: "counter".into(),
        version: "v1".into(),
        state: json!({"count": 0}),
        lease_ms: Some(60_000),
        max_attempts: Some(3),
        on_exhausted: None,
    }
}

#[tokio::test]
async fn complete_resends_identical_bytes() {
    let server = Scripted::start(vec![
        unavailable(),
        reply(
            500,
            json!({"error": {"code": "internal", "message": "oops"}}),
        ),
        reply(429, json!({})),
        ok(turn_json("completed")),
    ])
    .await;
    let turn = server.client().complete(complete()).await.unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    let seen = server.seen();
    assert_eq!(seen.len(), 4);
    for s in &seen[1..] {
        assert_eq!(
            s.body, seen[0].body,
            "a retried completion sends the same bytes"
        );
    }
    // Big integers pass through untouched.
    let sent = String::from_utf8(seen[0].body.to_vec()).unwrap();
    assert!(sent.contains(BIG), "{sent}");
    assert!(
        !sent.contains("continuation"),
        "absent optional fields stay off: {sent}"
    );
}

#[tokio::test]
async fn max_retries_bounds_the_tries() {
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable());
    let http = Http::builder(server.url())
        .retry_delay(Duration::from_millis(1))
        .max_retries(3)
        .build()
        .unwrap();
    let e = http.get_instance("w-1").await.unwrap_err();
    assert_eq!(e.status(), 503);
    assert_eq!(server.seen().len(), 4, "1 try + 3 retries");

    // The default: 6 retries.
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable().header("retry-after", "0"));
    server.client().get_instance("w-1").await.unwrap_err();
    assert_eq!(server.seen().len(), 7);
}

#[tokio::test]
async fn budget_is_respected() {
    // A delay that would end past the budget is not waited for.
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable().header("retry-after", "2"));
    let http = Http::builder(server.url())
        .retry_budget(Duration::from_millis(1500))
        .build()
        .unwrap();
    let started = Instant::now();
    http.send_message(message()).await.unwrap_err();
    assert_eq!(server.seen().len(), 1);
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "it must not wait the 2 s it was asked to"
    );

    // Retries stop once the budget is used up.
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable().header("retry-after", "0.3"));
    let http = Http::builder(server.url())
        .retry_budget(Duration::from_millis(1000))
        .max_retries(100)
        .build()
        .unwrap();
    let started = Instant::now();
    http.send_message(message()).await.unwrap_err();
    let took = started.elapsed();
    let tries = server.seen().len();
    assert!(
        (3..=4).contains(&tries),
        "0.3 s apart within a 1 s budget: {tries} tries"
    );
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}

#[tokio::test]
async fn retry_after_is_capped_at_a_minute() {
    // A day asked for. Capped at 60 s, it is still over a 59 s budget: no retry, and no
    // day-long wait.
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable().header("retry-after", "86400"));
    let http = Http::builder(server.url())
        .retry_budget(Duration::from_secs(59))
        .build()
        .unwrap();
    let started = Instant::now();
    http.get_instance("w-1").await.unwrap_err();
    assert_eq!(server.seen().len(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));

    // Within a 61 s budget the capped delay fits, so the client waits to retry. Uncapped, the
    // day would not fit, and the call would end at once with the first answer's error.
    // (The exact delay, 60 s, is checked in `client::retry`'s unit tests.)
    let server = Scripted::start(vec![]).await;
    server.otherwise(unavailable().header("retry-after", "86400"));
    let http = Http::builder(server.url())
        .retry_budget(Duration::from_secs(61))
        .build()
        .unwrap();
    let mut call = tokio::spawn(async move { http.get_instance("w-1").await });
    common::eventually("the first try", || async {
        (!server.seen().is_empty()).then_some(())
    })
    .await;
    match tokio::time::timeout(Duration::from_secs(1), &mut call).await {
        Err(_) => {}
        Ok(ended) => panic!(
            "the call ended instead of waiting the capped minute to retry: {:?}",
            ended.map(|r| r.map(drop))
        ),
    }
    assert_eq!(server.seen().len(), 1, "no retry before the minute is up");
    call.abort();
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let conflict = reply(
        409,
        json!({"error": {"code": "conflict", "message": "message `m-1` was admitted with another payload"}}),
    );
    let server = Scripted::start(vec![conflict]).await;
    server.otherwise(ok(turn_json("queued")));
    let e = server.client().send_message(message()).await.unwrap_err();
    assert_eq!(
        e,
        Error::Conflict {
            message: "message `m-1` was admitted with another payload".into()
        }
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn transport_failures_are_retried_then_reported() {
    // Nothing listens on a port just released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let http = Http::builder(format!("http://{addr}"))
        .retry_delay(Duration::from_millis(20))
        .max_retries(3)
        .build()
        .unwrap();
    let started = Instant::now();
    let e = http.get_instance("w-1").await.unwrap_err();
    assert!(matches!(e, Error::Transport { .. }), "{e:?}");
    assert!(e.is_retryable());
    assert!(e.to_string().contains("/v1/workflows/instances/get"), "{e}");
    // The failure underneath is kept as the error's source, not only as text: its chain ends
    // in the operating system's refusal.
    let mut cause = std::error::Error::source(&e).expect("the transport failure as a source");
    while let Some(deeper) = cause.source() {
        cause = deeper;
    }
    assert!(
        cause.downcast_ref::<std::io::Error>().is_some(),
        "the chain ends in an io::Error, not {cause:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

// ---------------------------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_connection_the_server_closes_is_not_reused() {
    // `connection: close` on the first answer: the claim after it, sent once, needs another.
    let server = Scripted::start(vec![
        ok(turn_json("running")).header("connection", "close"),
        ok(task_json(60_000)),
    ])
    .await;
    let http = server.client();
    http.heartbeat(lease()).await.unwrap();
    assert!(http.claim(claim()).await.unwrap().task.is_some());
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn a_connection_closed_while_idle_is_replaced() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A server that answers one request per connection, then closes it without saying so.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0usize));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            *count.lock().unwrap() += 1;
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut read = 0;
                loop {
                    let n = stream.read(&mut buf[read..]).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    read += n;
                    let text = String::from_utf8_lossy(&buf[..read]);
                    let Some(head) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..head]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if read >= head + 4 + length {
                        break;
                    }
                }
                let body = task_json(60_000).to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).await.unwrap();
                stream.write_all(body.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            });
        }
    });
    let http = Http::connect(format!("http://{addr}"), None).unwrap();
    for _ in 0..3 {
        // Claims are sent once: each must find a live connection.
        assert!(http.claim(claim()).await.unwrap().task.is_some());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(*accepted.lock().unwrap(), 3);
}

#[tokio::test]
async fn redirects_are_followed() {
    let moved = || reply(307, json!({})).header("location", "/elsewhere");
    let server = Scripted::start(vec![moved(), moved(), ok(turn_json("running"))]).await;
    let t = server.client().heartbeat(lease()).await.unwrap();
    assert_eq!(t.status, TurnStatus::Running);
    let seen = server.seen();
    let last = seen.last().unwrap();
    assert_eq!(last.path, "/elsewhere");
    assert_eq!(last.method, Method::POST);
    assert_eq!(last.body, seen[0].body, "a 307 keeps the body");
}

// ---------------------------------------------------------------------------------------------
// Timeouts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn heartbeat_times_out_at_a_third_of_the_lease() {
    let server = Scripted::start(vec![
        ok(task_json(300)),
        ok(turn_json("running")).delayed(Duration::from_secs(3)),
    ])
    .await;
    let http = server.client();
    let task = http.claim(claim()).await.unwrap().task.unwrap();
    assert_eq!(task.lease_ms, 300);
    let started = Instant::now();
    let e = http
        .heartbeat(Lease {
            workflow_id: "w-1".into(),
            turn: 1,
            token: task.token,
        })
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, Error::Transport { .. }), "{e:?}");
    assert!(
        took >= Duration::from_millis(90) && took < Duration::from_millis(2500),
        "the heartbeat gave up after {took:?}, not after about 100 ms (the answer takes 3 s)"
    );
    assert_eq!(
        server.seen().len(),
        2,
        "a timed-out heartbeat is not retried"
    );
}

#[tokio::test]
async fn claim_waits_longer_than_its_wait_ms() {
    let server = Scripted::start(vec![
        ok(json!({"task": null})).delayed(Duration::from_millis(1500))
    ])
    .await;
    let http = Http::builder(server.url())
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut req = claim();
    req.wait_ms = 1000;
    let r = http.claim(req).await.unwrap();
    assert!(r.task.is_none());
}

// ---------------------------------------------------------------------------------------------
// What goes on the wire
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn headers_and_scope_on_every_request() {
    let server = Scripted::start(vec![]).await;
    server.otherwise(ok(instance_json()));
    let http = Http::builder(server.url())
        .token(Some("sk_test_1".to_owned()))
        .graph("main")
        .stack("staging")
        .build()
        .unwrap();
    http.get_instance("w 1").await.unwrap();
    let _ = http.create_instance(create()).await.unwrap();
    let other = http.with_graph("side");
    other.get_instance("w-1").await.unwrap();

    let seen = server.seen();
    for s in &seen {
        let h = |name: &str| s.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(h("authorization").as_deref(), Some("Bearer sk_test_1"));
        assert_eq!(h("lbb-version").as_deref(), Some("2026-10-21"));
        assert_eq!(
            h("user-agent"),
            Some(format!("turnwise/{}", env!("CARGO_PKG_VERSION")))
        );
        assert_eq!(h("accept").as_deref(), Some("*/*"));
        assert_eq!(h("host"), Some(server.addr.to_string()));
        assert_eq!(s.query[1], ("stack".to_owned(), "staging".to_owned()));
    }
    assert_eq!(seen[0].method, Method::GET);
    assert_eq!(seen[0].path, "/v1/workflows/instances/get");
    assert_eq!(
        seen[0].query,
        [
            ("graph".to_owned(), "main".to_owned()),
            ("stack".to_owned(), "staging".to_owned()),
            ("id".to_owned(), "w+1".to_owned()),
        ]
    );
    assert!(seen[0].headers.get("content-type").is_none());
    assert_eq!(seen[1].method, Method::POST);
    assert_eq!(
        seen[1].headers.get("content-type").unwrap(),
        "application/json"
    );
    let body: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(
        body,
        json!({"id": "w-1", "workflow_type": "counter", "version": "v1",
               "state": {"count": 0}, "lease_ms": 60000, "max_attempts": 3})
    );
    assert_eq!(seen[2].query[0], ("graph".to_owned(), "side".to_owned()));
}

#[tokio::test]
async fn read_queries() {
    let server = Scripted::start(vec![
        ok(json!({"workflow_id": "w-1", "workflow_type": "counter", "version": "v1",
                  "status": "idle", "pending_messages": 0, "messages": []})),
        ok(json!({"workflow_id": "w-1", "workflow_type": "counter", "version": "v1",
                  "status": "idle", "pending_messages": 0, "messages": []})),
        ok(json!({"turns": [], "next_after": 3})),
        ok(json!({"workflow_type": "counter", "identities": 0, "with_messages": 0, "instances": []})),
        ok(json!({"instances": []})),
        ok(turn_json("completed")),
    ])
    .await;
    let http = server.client();
    http.instance_inbox(InboxQuery {
        id: "w-1".into(),
        after: Some(2),
        limit: Some(10),
        payloads: true,
    })
    .await
    .unwrap();
    http.instance_inbox(InboxQuery {
        id: "w-1".into(),
        ..InboxQuery::default()
    })
    .await
    .unwrap();
    let h = http
        .history(HistoryQuery {
            id: "w-1".into(),
            after: None,
            limit: Some(5),
        })
        .await
        .unwrap();
    assert_eq!(h.next_after, Some(3));
    http.type_inbox(TypeInboxQuery {
        workflow_type: "counter".into(),
        version: Some("v1".into()),
        after: Some("a".into()),
        limit: None,
    })
    .await
    .unwrap();
    http.list_instances(ListInstancesQuery {
        after: Some("b".into()),
        limit: Some(2),
    })
    .await
    .unwrap();
    http.turn(TurnQuery {
        id: "w-1".into(),
        turn: 7,
    })
    .await
    .unwrap();

    let q = |s: &Seen| {
        s.query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    };
    let seen = server.seen();
    let got: Vec<_> = seen
        .iter()
        .map(|s| format!("{}?{}", s.path, q(s)))
        .collect();
    assert_eq!(
        got,
        [
            "/v1/workflows/instances/inbox?id=w-1&after=2&limit=10&payloads=true",
            "/v1/workflows/instances/inbox?id=w-1",
            "/v1/workflows/instances/history?id=w-1&limit=5",
            "/v1/workflows/inbox?workflow_type=counter&version=v1&after=a",
            "/v1/workflows/instances?after=b&limit=2",
            "/v1/workflows/instances/turn?id=w-1&turn=7",
        ]
    );
}

#[tokio::test]
async fn worker_bodies_follow_the_wire() {
    let server = Scripted::start(vec![]).await;
    server.otherwise(ok(json!({})));
    let http = server.client();
    // Empty or unexpected answers of routes whose body the wire does not promise are fine.
    let t = http
        .checkpoint(CheckpointRequest {
            lease: lease(),
            position: 2,
            key: "nap".into(),
            kind: CheckpointKind::Sleep,
            output: Value::Null,
            delay_ms: Some(500),
        })
        .await
        .unwrap();
    assert_eq!(t.status, TurnStatus::Waiting);
    http.fail(fail()).await.unwrap();
    http.claim(claim()).await.unwrap();
    let seen = server.seen();
    let body = |i: usize| serde_json::from_slice::<Value>(&seen[i].body).unwrap();
    assert_eq!(
        body(0),
        json!({"workflow_id": "w-1", "turn": 1, "token": "tok-1", "position": 2,
               "key": "nap", "kind": "sleep", "delay_ms": 500})
    );
    assert_eq!(
        body(1),
        json!({"workflow_id": "w-1", "turn": 1, "token": "tok-1", "error": "boom",
               "non_retryable": false})
    );
    assert_eq!(
        body(2),
        json!({"worker": "w", "workflows": [{"workflow_type": "counter", "version": "v1"}],
               "wait_ms": 0})
    );
}

#[tokio::test]
async fn operation_reads_the_resume_cursor_leniently() {
    let server = Scripted::start(vec![ok(json!({"operation": {"checkpoint": {"page": 3}}}))]).await;
    let t = server
        .client()
        .operation(OperationRequest {
            lease: lease(),
            position: 0,
            key: "fetch".into(),
            kind: OperationKind::Step,
            timeout_ms: 1000,
            heartbeat_timeout_ms: None,
        })
        .await
        .unwrap();
    assert_eq!(t.operation.unwrap().checkpoint, json!({"page": 3}));
}

#[tokio::test]
async fn claim_answers_that_are_not_tasks_are_idle() {
    let server = Scripted::start(vec![
        ok(json!({"task": null})),
        ok(json!({})),
        ok(json!([1, 2])),
        Reply {
            status: 200,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        },
        ok(json!({"task": {"workflow_type": "counter"}})),
    ])
    .await;
    let http = server.client();
    for _ in 0..4 {
        assert!(http.claim(claim()).await.unwrap().task.is_none());
    }
    let e = http.claim(claim()).await.unwrap_err();
    assert!(matches!(e, Error::Transport { .. }), "{e:?}");
}

#[tokio::test]
async fn errors_map_to_the_engine_variants() {
    let env = |status: u16, code: &str, message: &str, extra: Value| {
        let mut e = json!({"type": "invalid_request_error", "code": code, "message": message,
                           "request_id": "req-1", "doc_url": null});
        if let (Value::Object(e), Value::Object(x)) = (&mut e, extra) {
            e.extend(x);
        }
        reply(status, json!({ "error": e }))
    };
    // The envelopes as a turnwise server sends them: the variant's fields in `details`.
    let server = Scripted::start(vec![
        env(
            409,
            "turn_lease_lost",
            "turn 1 of `w-1` is not held by this token: the lease expired",
            json!({"details": {"workflow_id": "w-1", "turn": 1, "reason": "the lease expired"}}),
        ),
        env(
            404,
            "not_found",
            "instance `w-1` was not found",
            json!({"details": {"what": "instance `w-1`"}}),
        ),
        env(
            400,
            "invalid_request",
            "invalid `position`: must be 0",
            json!({"param": "position", "details": {"param": "position", "message": "must be 0"}}),
        ),
        env(
            413,
            "payload_too_large",
            "`output` is 70000 bytes, over its limit of 65536 bytes",
            json!({"param": "output", "details": {"what": "output", "size": 70000, "limit": 65536}}),
        ),
        env(422, "step_limit", "64 steps", json!({})),
        env(409, "inbox_full", "128 pending", json!({})),
        env(409, "signal_limit", "64 signals", json!({})),
        env(
            403,
            "reserved_workflow_type",
            "lbb.x is reserved",
            json!({}),
        ),
    ])
    .await;
    let http = server.client();
    let step = || CheckpointRequest {
        lease: lease(),
        position: 0,
        key: "k".into(),
        kind: CheckpointKind::Step,
        output: json!(1),
        delay_ms: None,
    };
    assert_eq!(
        http.checkpoint(step()).await.unwrap_err(),
        Error::LeaseLost {
            workflow_id: "w-1".into(),
            turn: 1,
            reason: "the lease expired".into()
        }
    );
    assert_eq!(
        http.get_instance("w-1").await.unwrap_err(),
        Error::NotFound {
            what: "instance `w-1`".into()
        }
    );
    assert_eq!(
        http.checkpoint(step()).await.unwrap_err(),
        Error::Invalid {
            param: "position".into(),
            message: "must be 0".into()
        }
    );
    assert_eq!(
        http.checkpoint(step()).await.unwrap_err(),
        Error::TooLarge {
            what: "output".into(),
            size: 70000,
            limit: 65536
        }
    );
    let e = http.checkpoint(step()).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (422, "step_limit"));
    assert!(matches!(e, Error::LimitReached { limit: "steps", .. }));
    let e = http.send_message(message()).await.unwrap_err();
    assert!(matches!(
        e,
        Error::LimitReached {
            limit: "pending_messages",
            ..
        }
    ));
    let e = http
        .signal(SignalRequest {
            workflow_id: "w-1".into(),
            turn: 1,
            id: "s".into(),
            name: "go".into(),
            value: Value::Null,
        })
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::LimitReached {
            limit: "signals",
            ..
        }
    ));
    let e = http.create_instance(create()).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (403, "reserved_workflow_type"));
    assert!(matches!(e, Error::Reserved { .. }));
}

#[tokio::test]
async fn connect_checks_the_base_url() {
    assert!(matches!(
        Http::connect("ftp://example.invalid", None),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        Http::connect("not a url", None),
        Err(Error::Invalid { .. })
    ));
    let http = Http::connect("http://127.0.0.1:7400///", Some("secret".into())).unwrap();
    assert_eq!(http.base_url(), "http://127.0.0.1:7400");
    assert!(!format!("{http:?}").contains("secret"));
    let builder = Http::builder("http://127.0.0.1:7400").token(Some("secret".to_owned()));
    assert!(!format!("{builder:?}").contains("secret"));
}

/// A value an older server stored deeper than serde_json's default recursion limit (128) is
/// read back: the answer is parsed again without the limit, as stored records are.
#[tokio::test]
async fn an_answer_nesting_deeper_than_serde_jsons_default_limit_is_read() {
    let mut state = json!(1);
    for _ in 0..140 {
        state = Value::Array(vec![state]);
    }
    let mut instance = instance_json();
    instance["state"] = state.clone();
    let server = Scripted::start(vec![ok(instance)]).await;
    let read = server.client().get_instance("w-1").await.unwrap();
    assert_eq!(read.state, state);
}
