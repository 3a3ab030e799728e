//! Connections over real sockets on 127.0.0.1: the header-read, body-read and idle timeouts
//! close or refuse connections that do not send their request in time, a body declared over
//! the limit is refused at once, the connection cap holds further connections back until one
//! closes, and every refusal of the HTTP layer that carries a body is the JSON error envelope.
//! The test servers use short timeouts; every wait is bounded.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use turnwise::Engine;
use turnwise_server::ServerOptions;

/// Longer than any timeout of the test servers: a wait past it fails the test.
const BOUND: Duration = Duration::from_secs(10);

fn short_timeouts() -> ServerOptions {
    ServerOptions::default()
        .with_header_read_timeout(Duration::from_millis(300))
        .with_body_read_timeout(Duration::from_millis(300))
        .with_idle_timeout(Duration::from_millis(500))
}

async fn server(options: ServerOptions) -> (InProcess, String) {
    let srv = start_with(Engine::in_memory(), None, options).await;
    let addr = srv.api.base.trim_start_matches("http://").to_owned();
    (srv, addr)
}

/// One raw HTTP response.
#[derive(Debug)]
struct Raw {
    status: u16,
    head: String,
    body: Value,
}

/// Read one response from `s`, or `None` when the connection closes before one arrives. Fails
/// the test if neither happens within [`BOUND`].
async fn read_response(s: &mut TcpStream) -> Option<Raw> {
    tokio::time::timeout(BOUND, async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if buf.len() >= end + 4 + len {
                    let status = head[9..12].parse().unwrap();
                    let body =
                        serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
                    return Some(Raw { status, head, body });
                }
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .expect("the server answered or closed the connection in time")
}

/// Wait until the server closes `s` (bounded).
async fn closed(s: &mut TcpStream) {
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(BOUND, async {
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the server closed the connection in time");
}

/// Check a refusal's JSON envelope and that it names the request id of its header.
#[track_caller]
fn envelope(r: &Raw, status: u16, code: &str) -> Value {
    assert_eq!(r.status, status, "{r:#?}");
    assert!(r.head.contains("content-type: application/json"), "{r:#?}");
    let e = &r.body["error"];
    assert_eq!(e["code"], code, "{r:#?}");
    assert_eq!(e["type"], "invalid_request_error", "{r:#?}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
    let id = r
        .head
        .lines()
        .find_map(|l| l.strip_prefix("x-request-id:"))
        .expect("an x-request-id header")
        .trim();
    assert_eq!(e["request_id"], id, "{r:#?}");
    e.clone()
}

async fn connect(addr: &str) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_header_timeout() {
    let (_srv, addr) = server(short_timeouts()).await;
    let mut s = connect(&addr).await;
    assert!(read_response(&mut s).await.is_none(), "closed, no answer");
}

#[tokio::test]
async fn half_a_request_head_is_refused_with_408_after_the_header_timeout() {
    let (_srv, addr) = server(short_timeouts()).await;
    for partial in [
        &b"GET /v1/workfl"[..],
        b"GET /v1/workflows/status HTTP/1.1\r\nhost: x\r\nx-half: ",
        b"POST /v1/workflows/instances HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n",
    ] {
        let mut s = connect(&addr).await;
        s.write_all(partial).await.unwrap();
        let r = read_response(&mut s).await.expect("a 408");
        envelope(&r, 408, "request_timeout");
        closed(&mut s).await;
    }
}

#[tokio::test]
async fn a_body_declared_over_the_limit_is_refused_at_once() {
    // Long timeouts: the 413 cannot come from one of them.
    let (srv, addr) = server(ServerOptions::default()).await;
    let mut s = connect(&addr).await;
    s.write_all(
        b"POST /v1/workflows/instances HTTP/1.1\r\nhost: x\r\ncontent-length: 10000000000\r\n\r\n",
    )
    .await
    .unwrap();
    let r = read_response(&mut s).await.expect("a 413");
    let e = envelope(&r, 413, "payload_too_large");
    assert!(
        e["message"].as_str().unwrap().contains("10000000000"),
        "{e}"
    );
    assert!(r.head.contains("connection: close"), "{r:#?}");
    closed(&mut s).await;
    // The server goes on.
    srv.api.get("/v1/workflows/status").await.ok();
}

#[tokio::test]
async fn a_short_body_is_refused_with_408_after_the_body_timeout() {
    let (srv, addr) = server(short_timeouts()).await;
    let mut s = connect(&addr).await;
    s.write_all(
        b"POST /v1/workflows/instances HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"id\":",
    )
    .await
    .unwrap();
    let r = read_response(&mut s).await.expect("a 408");
    envelope(&r, 408, "request_timeout");
    assert!(r.head.contains("connection: close"), "{r:#?}");
    closed(&mut s).await;
    assert_eq!(
        srv.api.get("/v1/workflows/instances").await.ok()["instances"],
        json!([]),
        "nothing was written"
    );
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let (_srv, addr) = server(short_timeouts()).await;
    let mut s = connect(&addr).await;
    for _ in 0..2 {
        s.write_all(b"GET /v1/workflows/status HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let r = read_response(&mut s).await.expect("an answer");
        assert_eq!(r.status, 200, "{r:#?}");
    }
    closed(&mut s).await;
}

#[tokio::test]
async fn a_claim_long_polls_past_the_body_timeout() {
    let (srv, _) = server(short_timeouts()).await;
    // The body arrives at once; the handler then holds the claim for 1 s, longer than every
    // timeout of this server (body 300 ms, idle 500 ms), and answers it.
    const WAIT: Duration = Duration::from_millis(1000);
    let started = std::time::Instant::now();
    let res = srv
        .api
        .post(
            "/v1/workflows/turns/claim",
            json!({"worker": "w", "wait_ms": WAIT.as_millis() as u64,
                   "workflows": [{"workflow_type": "counter", "version": "v1"}]}),
        )
        .await
        .ok();
    let waited = started.elapsed();
    assert_eq!(res, json!({"task": null}));
    // The server cannot answer before the wait has run out (its deadline is later than
    // `started`); the slack only allows for timer rounding.
    assert!(
        waited >= WAIT - Duration::from_millis(50),
        "the claim answered after {waited:?}, before its wait_ms of {WAIT:?}: it did not \
         long-poll, so it outlived no timeout"
    );
    assert!(
        waited > Duration::from_millis(500),
        "the claim answered after {waited:?}: not longer than the body (300 ms) and idle \
         (500 ms) timeouts it is meant to outlive"
    );
    assert!(waited < BOUND, "the claim took {waited:?}");
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_closes() {
    let options = ServerOptions::default()
        .with_max_connections(2)
        .with_header_read_timeout(Duration::from_secs(60));
    let (_srv, addr) = server(options).await;
    let held = [connect(&addr).await, connect(&addr).await];
    let mut third = connect(&addr).await;
    third
        .write_all(b"GET /v1/workflows/status HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut byte)).await;
    assert!(
        early.is_err(),
        "no answer while the cap is reached: {early:?}"
    );
    drop(held);
    let r = read_response(&mut third).await.expect("an answer");
    assert_eq!(r.status, 200, "{r:#?}");
}

#[tokio::test]
async fn two_authorization_headers_are_refused() {
    for token in [None, Some("s3cret")] {
        let srv = start_with(Engine::in_memory(), token, ServerOptions::default()).await;
        let addr = srv.api.base.trim_start_matches("http://");
        let mut s = connect(addr).await;
        s.write_all(
            b"GET /v1/workflows/status HTTP/1.1\r\nhost: x\r\nauthorization: Bearer s3cret\r\n\
              authorization: Bearer other\r\n\r\n",
        )
        .await
        .unwrap();
        let r = read_response(&mut s).await.expect("an answer");
        let e = envelope(&r, 400, "invalid_request");
        assert_eq!(e["param"], "authorization", "{e}");
    }
}

#[tokio::test]
async fn refusals_of_the_http_layer_are_json_envelopes() {
    let (srv, addr) = server(ServerOptions::default()).await;
    let long_target = format!(
        "GET /v1/workflows/status?x={} HTTP/1.1\r\nhost: x\r\n\r\n",
        "a".repeat(9000)
    );
    let big_header = |kib: usize| {
        format!(
            "GET /v1/workflows/status HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
            "b".repeat(kib * 1024)
        )
    };
    // Past the server's header limit, and past what it buffers of a request head at all.
    let (big, huge) = (big_header(40), big_header(200));
    let cases: [(&[u8], u16, &str); 6] = [
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "invalid_request"),
        (
            b"GET /v1/workflows/status HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n",
            400,
            "invalid_request",
        ),
        (
            b"POST /v1/workflows/instances HTTP/1.1\r\nhost: x\r\ncontent-length: zero\r\n\r\n",
            400,
            "invalid_request",
        ),
        (long_target.as_bytes(), 414, "uri_too_long"),
        (big.as_bytes(), 431, "request_header_fields_too_large"),
        (huge.as_bytes(), 431, "request_header_fields_too_large"),
    ];
    for (request, status, code) in cases {
        let mut s = connect(&addr).await;
        // A refused request may be cut off before all of it is written.
        let _ = s.write_all(request).await;
        let r = read_response(&mut s).await.expect("an answer");
        envelope(&r, status, code);
    }
    srv.api.get("/v1/workflows/status").await.ok();
}
