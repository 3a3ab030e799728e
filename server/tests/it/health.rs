//! The probes for load balancers: `GET /healthz` (the process serves) and `GET /readyz` (the
//! store can take writes), both without the token when one is set, while every other route
//! still requires it; `/readyz` answers `503` once the store's files are removed under the
//! running server, and `/healthz` stays `200`.

use crate::common;

use common::*;
use reqwest::Method;
use serde_json::json;
use turnwise_rules::{Method as RouteMethod, Route};
use turnwise_server::{router, serve_with, ServerOptions, Shutdown};

const TOKEN: &str = "s3cret";

#[tokio::test]
async fn the_probes_answer_without_the_token_and_nothing_else_does() {
    let server = common::start(turnwise::Engine::in_memory(), Some(TOKEN)).await;
    let api = &server.api;
    for probe in ["/healthz", "/readyz"] {
        for token in [None, Some("wrong"), Some(TOKEN)] {
            let answer = api.try_raw(Method::GET, probe, None, token).await.unwrap();
            assert_eq!(
                answer.body,
                json!({"status": "ok"}),
                "{probe} {token:?}: {answer:#?}"
            );
            assert_eq!(answer.status, 200);
        }
        // Only GET.
        let answer = api.try_raw(Method::POST, probe, None, None).await.unwrap();
        assert_eq!(answer.status, 405, "{answer:#?}");
    }

    // Every route of the protocol, and paths near the probes', still require the token.
    let mut refused: Vec<(Method, String)> = Route::ALL
        .into_iter()
        .map(|r| {
            let method = match r.method() {
                RouteMethod::Get => Method::GET,
                RouteMethod::Post => Method::POST,
            };
            (method, r.path().to_owned())
        })
        .collect();
    for path in [
        "/healthz/",
        "/readyz/x",
        "/v1/healthz",
        "/healthzz",
        "/",
        "/v1/workflows/nope",
    ] {
        refused.push((Method::GET, path.to_owned()));
    }
    for (method, path) in refused {
        let body = (method == Method::POST).then(|| b"{}".to_vec());
        let answer = api
            .try_raw(method.clone(), &path, body, None)
            .await
            .unwrap();
        answer.err(401, "unauthorized");
    }
}

#[tokio::test]
async fn readyz_is_503_once_the_server_shuts_down() {
    // The routes see `signal` fire while the listener keeps accepting (it waits on nothing), so
    // the probe is answered after the shutdown began, as a request in flight would be.
    let signal = Shutdown::new();
    let options = ServerOptions::default().with_shutdown(signal.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api::new(format!("http://{}", listener.local_addr().unwrap()), None);
    let app = router(turnwise::Engine::in_memory(), options.clone());
    let never = Shutdown::new();
    let stop = never.clone();
    tokio::spawn(async move { serve_with(listener, app, &options, stop.wait_owned()).await });

    api.get("/readyz").await.ok();
    signal.trigger();
    let e = api.get("/readyz").await.err(503, "shutting_down");
    assert!(
        e["message"].as_str().unwrap().contains("shutting down"),
        "{e}"
    );
    assert_eq!(api.get("/healthz").await.ok(), json!({"status": "ok"}));
    never.trigger();
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_when_the_store_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("turnwise.db");
    let (_server, addr) = spawn_binary(&db, "127.0.0.1:0", Some(TOKEN));
    let api = Api::new(format!("http://{addr}"), Some(TOKEN));
    api.create("r-1", 60_000).await;
    let ready = api
        .try_raw(Method::GET, "/readyz", None, None)
        .await
        .unwrap();
    assert_eq!(
        (ready.status.as_u16(), ready.body),
        (200, json!({"status": "ok"}))
    );

    for suffix in ["", "-wal", "-shm"] {
        let mut file = db.clone().into_os_string();
        file.push(suffix);
        std::fs::remove_file(&file).unwrap();
    }

    let not_ready = api
        .try_raw(Method::GET, "/readyz", None, None)
        .await
        .unwrap();
    let e = not_ready.err(503, "store_unavailable");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("was deleted"), "{message}");
    // Still alive: the process serves, only the store cannot write.
    let alive = api
        .try_raw(Method::GET, "/healthz", None, None)
        .await
        .unwrap();
    assert_eq!(
        (alive.status.as_u16(), alive.body),
        (200, json!({"status": "ok"}))
    );
    // And it stays not ready.
    api.try_raw(Method::GET, "/readyz", None, None)
        .await
        .unwrap()
        .err(503, "store_unavailable");
}
