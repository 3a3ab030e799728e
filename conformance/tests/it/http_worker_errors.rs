//! Errors by meaning over HTTP: the `Http` backend gives the same `Error` as the embedded
//! engine for every engine error, and a worker over HTTP decides by that error, never by the
//! HTTP status: a limit or a size refusal fails the turn for good with the server's message, an
//! error the protocol does not know fails the attempt like any other error, and only
//! `turn_lease_lost` ends the attempt without a word. A proxy between worker and server strips
//! the task's `steps_max` (a server that does not send it) or answers with a code no server of
//! the protocol sends. Every due time is on the manual clock, which these tests never move.

use crate::common;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use common::HttpFixture;
use serde_json::{json, Value};
use turnwise::clock::{Clock, ManualClock};
use turnwise::prelude::*;
use turnwise::protocol::*;
use turnwise::{Backend, EngineConfig, Error, Http};

/// A worker over `backend` on the fixture's clock.
fn worker(backend: Http, clock: &ManualClock) -> Worker {
    Worker::new(backend)
        .id("http-worker")
        .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
        .progress_every(Duration::ZERO)
        .claim_wait(Duration::from_millis(50))
}

fn config(change: impl FnOnce(&mut EngineConfig)) -> EngineConfig {
    let mut c = EngineConfig::default();
    change(&mut c);
    c
}

/// Three steps, each adding one.
#[workflow(name = "three-steps", version = "v1")]
async fn three_steps(ctx: &mut Turn, state: u64, add: u64) -> Result<Done<u64, u64>, TurnError> {
    let a = ctx.step("one", move |_s| async move { Ok(add) }).await?;
    let b = ctx.step("two", move |_s| async move { Ok(a + 1) }).await?;
    let c = ctx
        .step("three", move |_s| async move { Ok(b + 1) })
        .await?;
    Ok(Done::new(state + c).reply(c))
}

/// One step whose output is `len` bytes of JSON.
#[workflow(name = "big-output", version = "v1")]
async fn big_output(ctx: &mut Turn, state: u64, len: u64) -> Result<Done<u64, u64>, TurnError> {
    let s = ctx
        .step(
            "big",
            move |_s| async move { Ok("x".repeat(len as usize - 2)) },
        )
        .await?;
    Ok(Done::new(state + s.len() as u64))
}

// ---------------------------------------------------------------------------------------------
// A proxy that changes answers
// ---------------------------------------------------------------------------------------------

/// What the proxy does to an exchange.
#[derive(Clone, Copy)]
enum Meddle {
    /// Remove `task.steps_max` from claim answers.
    StripStepsMax,
    /// Answer every checkpoint with `409 mystery` without sending it on.
    MysteryCheckpoints,
}

fn json_response(status: u16, body: Vec<u8>) -> Response {
    let mut r = (StatusCode::from_u16(status).unwrap(), body).into_response();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

/// Start a proxy in front of `upstream` that meddles as told; answers its base URL.
async fn proxy(upstream: String, meddle: Meddle) -> String {
    let client = reqwest::Client::new();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let client = client.clone();
            let upstream = upstream.clone();
            async move {
                let path = uri.path().to_owned();
                if matches!(meddle, Meddle::MysteryCheckpoints)
                    && path == "/v1/workflows/turns/checkpoint"
                {
                    let body = json!({"error": {"type": "conflict_error", "code": "mystery",
                        "message": "a mystery refusal", "request_id": null, "doc_url": null}});
                    return json_response(409, body.to_string().into_bytes());
                }
                let target = format!(
                    "{upstream}{}",
                    uri.path_and_query().map_or("", |p| p.as_str())
                );
                let mut request = client.request(method, target).body(body);
                for name in ["authorization", "content-type", "lbb-version", "user-agent"] {
                    if let Some(v) = headers.get(name) {
                        request = request.header(name, v.as_bytes());
                    }
                }
                let answer = match request.send().await {
                    Ok(a) => a,
                    Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
                };
                let status = answer.status().as_u16();
                let mut bytes = answer.bytes().await.unwrap_or_default().to_vec();
                if matches!(meddle, Meddle::StripStepsMax) && path == "/v1/workflows/turns/claim" {
                    if let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) {
                        if let Some(task) = v.get_mut("task").and_then(Value::as_object_mut) {
                            assert!(
                                task.remove("steps_max").is_some(),
                                "a claim carries steps_max"
                            );
                        }
                        bytes = v.to_string().into_bytes();
                    }
                }
                json_response(status, bytes)
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn client_of(base: String) -> Http {
    Http::builder(base)
        .token(Some(common::TOKEN.to_owned()))
        .retry_delay(Duration::from_millis(5))
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The worker over HTTP
// ---------------------------------------------------------------------------------------------

/// Run three steps against a step limit of two through `backend`; answer the failed turn's
/// error.
async fn three_steps_past_a_limit_of_two(f: &HttpFixture, backend: Http) -> String {
    let w = worker(backend.clone(), f.clock()).register(three_steps);
    let h = three_steps.start(&backend, "steps-1").await.unwrap();
    h.send(1, "m1").await.unwrap();
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    // At once: the clock never moved, so no lease expired and no backoff passed.
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    assert_eq!(t.steps.len(), 2, "the two steps within the limit are saved");
    let error = t.error.unwrap_or_default();
    assert!(
        error.starts_with("WorkflowError: "),
        "a permanent failure: {error}"
    );
    assert!(
        error.contains("at most 2 steps") && error.contains("step_limit"),
        "the error names the limit: {error}"
    );
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_the_step_limit_fails_the_turn_for_good_over_http() {
    let f = HttpFixture::memory(config(|c| c.limits.steps_per_turn = 2)).await;
    // The claim carries the limit; the step context refuses the third step itself.
    let error = three_steps_past_a_limit_of_two(&f, f.http()).await;
    assert!(error.contains("step `three`"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refusing_a_step_past_its_limit_fails_the_turn_for_good() {
    let f = HttpFixture::memory(config(|c| c.limits.steps_per_turn = 2)).await;
    // A claim without `steps_max`: the worker assumes the wire's 64 and sends the third step;
    // the server's `422 step_limit` fails the turn with the server's own message.
    let backend = client_of(proxy(f.base_url().to_owned(), Meddle::StripStepsMax).await);
    let error = three_steps_past_a_limit_of_two(&f, backend).await;
    assert!(
        error.contains("a turn holds at most 2 steps (steps_per_turn) and position 2"),
        "the server's message is on the turn: {error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_output_over_its_limit_fails_the_turn_for_good_over_http() {
    let f = HttpFixture::memory(config(|c| c.limits.output_bytes = 100)).await;
    let w = worker(f.http(), f.clock()).register(big_output);
    let h = big_output.start(&f.http(), "big-1").await.unwrap();
    h.send(101, "m1").await.unwrap();
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("payload_too_large")
            && error.contains("`output` is 101 bytes, over its limit of 100 bytes"),
        "the server's refusal is on the turn: {error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_code_is_an_http_error_and_not_a_lost_lease() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let backend = client_of(proxy(f.base_url().to_owned(), Meddle::MysteryCheckpoints).await);

    // The client keeps what the server said.
    let h = three_steps.start(&f.http(), "steps-1").await.unwrap();
    h.send(1, "m1").await.unwrap();
    let task = f
        .http()
        .claim(ClaimRequest {
            worker: "probe".into(),
            workflows: vec![WorkflowRef::new("three-steps", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .expect("m1 is ready");
    let lease = Lease {
        workflow_id: task.turn.workflow_id.clone(),
        turn: task.turn.number,
        token: task.token.clone(),
    };
    let e = backend
        .checkpoint(CheckpointRequest {
            lease: lease.clone(),
            position: 0,
            key: "one".into(),
            kind: CheckpointKind::Step,
            output: json!(1),
            delay_ms: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        e,
        Error::Http {
            status: 409,
            code: "mystery".into(),
            message: "a mystery refusal".into()
        }
    );
    assert!(!e.is_lease_lost() && !e.is_refusal());
    f.http()
        .fail(FailRequest {
            lease,
            error: "probe".into(),
            non_retryable: false,
            retry_at_ms: Some(0),
            usage: None,
            results: None,
            mismatch: None,
        })
        .await
        .unwrap();

    // A worker that gets it does not go quiet: it fails the attempt (retryably, as for any
    // error the protocol does not name), and the turn records why.
    f.clock().advance(Duration::from_secs(1));
    let w = worker(backend, f.clock()).register(three_steps);
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Queued, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.starts_with("Error: ") && error.contains("mystery"),
        "a retryable failure naming the code: {error}"
    );
}

// ---------------------------------------------------------------------------------------------
// The same Error over both backends
// ---------------------------------------------------------------------------------------------

/// The refusal of `$call` (an expression using `$b: &impl Backend`) over the embedded engine
/// and over HTTP, which must be the same `Error`, with this status and code.
macro_rules! same_refusal {
    ($engine:expr, $http:expr, $status:expr, $code:expr, |$b:ident| $call:expr) => {{
        let embedded = {
            let $b = $engine;
            $call.await
        };
        let over_http = {
            let $b = $http;
            $call.await
        };
        check_same(embedded, over_http, $status, $code)
    }};
}

#[track_caller]
fn check_same<T: Debug>(
    embedded: turnwise::Result<T>,
    over_http: turnwise::Result<T>,
    status: u16,
    code: &str,
) -> String {
    let embedded = embedded.expect_err("the engine refuses");
    let over_http = over_http.expect_err("the server refuses");
    assert_eq!(
        over_http, embedded,
        "{status} {code}: the Http backend gives the engine's error"
    );
    assert_eq!(
        (embedded.status(), embedded.code()),
        (status, code),
        "{embedded:?}"
    );
    code.to_owned()
}

fn create_request(id: &str, workflow_type: &str, version: &str) -> CreateInstanceRequest {
    CreateInstanceRequest {
        id: id.into(),
        workflow_type: workflow_type.into(),
        version: version.into(),
        state: Value::Null,
        lease_ms: None,
        max_attempts: None,
        on_exhausted: None,
    }
}

fn message(id: &str) -> MessageRequest {
    MessageRequest {
        workflow_id: "w-1".into(),
        id: id.into(),
        message: Value::Null,
        origin: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_engine_error_is_the_same_error_over_http() {
    let f = HttpFixture::memory(config(|c| {
        c.limits.state_bytes = 16;
        c.limits.pending_messages = 1;
        c.limits.signals_per_turn = 1;
        c.limits.steps_per_turn = 1;
        c.limits.schedules_per_instance = 1;
    }))
    .await;
    let (engine, http) = (f.engine().clone(), f.http());
    let (e, h) = (&engine, &http);
    let mut codes = Vec::new();

    codes.push(same_refusal!(e, h, 400, "invalid_request", |b| b
        .create_instance(create_request("not an id", "t", "v1"))));
    let mut big = create_request("w-big", "t", "v1");
    big.state = json!("a string longer than sixteen bytes");
    codes.push(same_refusal!(e, h, 413, "payload_too_large", |b| b
        .create_instance(big.clone())));
    codes.push(same_refusal!(e, h, 403, "reserved_workflow_type", |b| b
        .create_instance(create_request("w-2", "lbb.anything", "v1"))));
    codes.push(same_refusal!(e, h, 403, "reserved_workflow_id", |b| b
        .create_instance(create_request("calibration", "t", "v1"))));
    codes.push(same_refusal!(e, h, 404, "not_found", |b| b.get_instance("nobody")));

    engine
        .create_instance(create_request("w-1", "t", "v1"))
        .await
        .unwrap();
    codes.push(same_refusal!(e, h, 409, "conflict", |b| b
        .create_instance(create_request("w-1", "t", "v2"))));
    engine.send_message(message("m1")).await.unwrap();
    codes.push(same_refusal!(e, h, 409, "inbox_full", |b| b.send_message(message("m2"))));
    let later = |name: &str| CreateScheduleRequest {
        workflow_id: "w-1".into(),
        name: name.into(),
        spec: ScheduleSpec::After { delay_ms: 60_000 },
        message: json!(null),
        catch_up: CatchUp::One,
    };
    engine.create_schedule(later("d1")).await.unwrap();
    codes.push(same_refusal!(e, h, 409, "schedule_limit", |b| b
        .create_schedule(later("d2"))));

    let task = engine
        .claim(ClaimRequest {
            worker: "probe".into(),
            workflows: vec![WorkflowRef::new("t", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .expect("m1 is ready");
    let lease = Lease {
        workflow_id: "w-1".into(),
        turn: task.turn.number,
        token: task.token.clone(),
    };
    let stale = Lease {
        token: "wt_stale".into(),
        ..lease.clone()
    };
    codes.push(same_refusal!(e, h, 409, "turn_lease_lost", |b| b.heartbeat(stale.clone())));
    let gone = Lease {
        workflow_id: "nobody".into(),
        ..lease.clone()
    };
    codes.push(same_refusal!(e, h, 409, "turn_lease_lost", |b| b.heartbeat(gone.clone())));
    let past_the_limit = OperationRequest {
        lease: lease.clone(),
        position: 1,
        key: "second".into(),
        kind: OperationKind::Step,
        timeout_ms: 1_000,
        heartbeat_timeout_ms: None,
    };
    codes.push(same_refusal!(e, h, 422, "step_limit", |b| b
        .operation(past_the_limit.clone())));
    let signal = |id: &str| SignalRequest {
        workflow_id: "w-1".into(),
        turn: task.turn.number,
        id: id.into(),
        name: "go".into(),
        value: json!(1),
    };
    engine.signal(signal("s1")).await.unwrap();
    codes.push(same_refusal!(e, h, 409, "signal_limit", |b| b.signal(signal("s2"))));

    // Every code the engine sends to a client was seen (`store_unavailable` and
    // `record_unreadable` need a failing store; `Error::from_wire`'s unit tests cover them).
    codes.sort();
    codes.dedup();
    let mut want: Vec<String> = [
        "invalid_request",
        "payload_too_large",
        "reserved_workflow_type",
        "reserved_workflow_id",
        "not_found",
        "conflict",
        "turn_lease_lost",
    ]
    .iter()
    .map(|c| c.to_string())
    .chain(Error::LIMITS.iter().map(|(_, code, _)| code.to_string()))
    .collect();
    want.sort();
    assert_eq!(codes, want);
}
