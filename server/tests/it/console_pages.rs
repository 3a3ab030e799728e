//! What the console's pages say, over HTTP: the **No worker** warning after two minutes of a
//! ready message with no turn running, and the server's schema refusal of a form shown beside
//! its field with nothing admitted.

use crate::common;

use std::time::Duration;

use reqwest::header::COOKIE;
use reqwest::{Client, StatusCode};
use serde_json::json;
use turnwise::clock::ManualClock;
use turnwise::store::MemoryStore;
use turnwise::{Engine, EngineConfig};

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_message_ready_for_two_minutes_with_no_turn_running_warns_of_no_worker() {
    let clock = ManualClock::new(1_800_000_000_000);
    let engine = Engine::new(MemoryStore::new(), clock.clone(), EngineConfig::default());
    let server = common::start(engine, None).await;
    let api = server.api.scoped("");
    api.post(
        "/v1/workflows/instances",
        json!({"id": "c-1", "workflow_type": "counter", "version": "v1", "state": {}}),
    )
    .await
    .ok();
    api.send("c-1", "m1", json!({"add": 1})).await;
    let page = || async {
        let res = client()
            .get(format!("{}/console", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.text().await.unwrap()
    };

    clock.advance(Duration::from_secs(119));
    let early = page().await;
    assert!(
        early.contains("counter") && early.contains("1 min 59 s"),
        "{early}"
    );
    assert!(
        !early.contains("No worker"),
        "not before two minutes: {early}"
    );

    clock.advance(Duration::from_secs(2));
    let late = page().await;
    assert!(late.contains("No worker"), "{late}");
    assert!(late.contains("2 min 1 s"), "the lag: {late}");
    assert!(
        late.contains(&format!(
            "Worker::new(Http::connect(&quot;{}&quot;",
            api.base
        )),
        "the warning says how to start a worker against this server: {late}"
    );
}

#[tokio::test]
async fn the_servers_schema_refusal_is_shown_beside_the_field_and_nothing_is_admitted() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let api = server.api.scoped("");
    api.post(
        "/v1/workflows/schemas",
        json!({"workflow_type": "counter", "version": "v1",
               "message": {"type": "object", "properties": {
                   "add": {"type": "integer", "minimum": 0}}, "required": ["add"]}}),
    )
    .await
    .ok();
    api.post(
        "/v1/workflows/instances",
        json!({"id": "c-1", "workflow_type": "counter", "version": "v1", "state": {}}),
    )
    .await
    .ok();
    let http = client();
    let res = http
        .get(format!("{}/console/instance?id=c-1", api.base))
        .send()
        .await
        .unwrap();
    let cookie = res
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let csrf = cookie.split_once('=').unwrap().1.to_owned();
    let page = res.text().await.unwrap();
    assert!(
        page.contains(r#"name="v/add" type="text" inputmode="decimal" data-kind="integer" data-required="1" data-min="0""#),
        "the message form is generated from the registered schema: {page}"
    );

    // Sent as a browser without our script would: the server's check refuses it.
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("csrf", csrf.as_str()),
            ("workflow_id", "c-1"),
            ("message_id", "m-bad"),
            ("v/add", "-5"),
        ])
        .finish();
    let res = http
        .post(format!("{}/console/message", api.base))
        .header(COOKIE, &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let page = res.text().await.unwrap();
    assert!(
        page.contains(
            r#"<span class="err" data-err-for="v/add">-5 is less than the minimum of 0</span>"#
        ),
        "the refusal beside its field: {page}"
    );
    assert!(
        page.contains("schema_validation_failed") || page.contains("does not match"),
        "{page}"
    );
    assert!(
        page.contains(r#"value="-5""#),
        "the form keeps what was entered: {page}"
    );
    let inbox = api.get("/v1/workflows/instances/inbox?id=c-1").await.ok();
    assert_eq!(inbox["messages"], json!([]), "nothing admitted: {inbox}");
}

#[tokio::test]
async fn instances_are_filtered_and_paged_and_payloads_and_schemas_open_on_demand() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let api = server.api.scoped("");
    for i in 0..55 {
        api.post(
            "/v1/workflows/instances",
            json!({"id": format!("a-{i:03}"), "workflow_type": "alpha", "version": "v1"}),
        )
        .await
        .ok();
    }
    for id in ["b-1", "b-2"] {
        api.post(
            "/v1/workflows/instances",
            json!({"id": id, "workflow_type": "beta", "version": "v2"}),
        )
        .await
        .ok();
    }
    api.send("b-2", "m1", json!({"secret": "payload-text"}))
        .await;
    api.post(
        "/v1/workflows/schemas",
        json!({"workflow_type": "beta", "version": "v2", "message": {"type": "object"}}),
    )
    .await
    .ok();
    let base = api.base.clone();
    let get = |path: String| {
        let url = format!("{base}{path}");
        async move {
            let res = client().get(url).send().await.unwrap();
            let status = res.status();
            let disposition = res
                .headers()
                .get("content-disposition")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, disposition, res.text().await.unwrap())
        }
    };
    // The rows of the list, less its header row.
    let rows = |page: &str| page.matches("<tr>").count() - 1;

    let (_, _, page) = get("/console/instances?type=beta".into()).await;
    assert_eq!(rows(&page), 2, "{page}");
    let (_, _, page) = get("/console/instances?status=queued".into()).await;
    assert_eq!(rows(&page), 1, "{page}");
    assert!(page.contains(">b-2<"), "{page}");
    let (_, _, page) = get("/console/instances?prefix=a-05".into()).await;
    assert_eq!(rows(&page), 5, "{page}");
    let (_, _, page) = get("/console/instances?type=alpha&version=v1".into()).await;
    assert_eq!(rows(&page), 50, "a page holds 50: {page}");
    assert!(page.contains("a-049") && !page.contains("a-050"), "{page}");
    let next = page
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a next-page link")
        .replace("&amp;", "&");
    let (_, _, second) = get(next).await;
    assert_eq!(rows(&second), 5, "the rest of alpha: {second}");
    assert!(
        second.contains("a-050") && !second.contains("b-1"),
        "{second}"
    );
    assert!(!second.contains("rel=\"next\""), "the last page: {second}");

    // The instance page lists the message without its payload; the payload opens on demand.
    let (_, _, page) = get("/console/instance?id=b-2".into()).await;
    assert!(
        page.contains("m1") && !page.contains("payload-text"),
        "{page}"
    );
    let (status, _, payload) = get("/console/instance/payload?id=b-2&turn=1".into()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(payload.contains("payload-text"), "{payload}");

    // A registered document downloads as JSON.
    let (status, disposition, doc) =
        get("/console/schemas/download?type=beta&version=v2".into()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        disposition.as_deref(),
        Some("attachment; filename=\"beta-v2.schema.json\"")
    );
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["message"], json!({"type": "object"}));
    let (status, _, _) = get("/console/instance?id=nope".into()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The `data-turn` numbers of the finished turns a page lists, in order.
fn listed_turns(page: &str) -> Vec<u64> {
    page.split("<details class=\"turn\" data-turn=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test]
async fn finished_turns_are_listed_newest_first_a_page_at_a_time() {
    use turnwise::prelude::*;
    let engine = turnwise::Engine::in_memory();
    let server = common::start(engine.clone(), None).await;
    let worker = Worker::new(engine.clone())
        .register(example_counter::counter)
        .run_async();
    let handle = example_counter::counter
        .start(&engine, "c-1")
        .await
        .unwrap();
    for i in 0..12 {
        handle
            .send(example_counter::Add::request(1), format!("m{i}"))
            .await
            .unwrap();
    }
    let mut through = 0;
    for _ in 0..400 {
        let inst = engine.get_instance("c-1").await.unwrap();
        if inst.pending_messages == 0 && inst.history_through >= 12 {
            through = inst.history_through;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    worker.stop().await.unwrap();
    assert!(through >= 12, "the turns did not finish");

    let get = |path: String| {
        let url = format!("{}{path}", server.api.base);
        async move {
            client()
                .get(url)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let first = get("/console/instance?id=c-1".into()).await;
    let want: Vec<u64> = (through - 9..=through).rev().collect();
    assert_eq!(listed_turns(&first), want, "the newest ten, newest first");
    let older = format!("before={}", through - 10);
    assert!(first.contains(&older), "a link to the older turns: {first}");
    assert!(!first.contains("newer"), "nothing newer: {first}");

    let second = get(format!("/console/instance?id=c-1&{older}")).await;
    let want: Vec<u64> = (1..=through - 10).rev().collect::<Vec<_>>();
    let shown = listed_turns(&second);
    assert_eq!(shown, want[..want.len().min(10)], "the next ten");
    assert!(second.contains("newer"), "a link back: {second}");
    // Each turn opens as its steps, message, result and state.
    assert!(second.contains("<ol class=\"timeline\">") && second.contains("State left"));
}

#[tokio::test]
async fn the_operator_actions_go_through_the_engine() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let api = server.api.scoped("");
    api.post(
        "/v1/workflows/instances",
        json!({"id": "c-1", "workflow_type": "counter", "version": "v1"}),
    )
    .await
    .ok();
    api.send("c-1", "m1", json!({"add": 1})).await;
    let http = client();
    let res = http
        .get(format!("{}/console/instance?id=c-1", api.base))
        .send()
        .await
        .unwrap();
    let cookie = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let csrf = cookie.split_once('=').unwrap().1.to_owned();
    let page = res.text().await.unwrap();
    for action in ["pause", "cancel_turn", "delete"] {
        assert!(
            page.contains(&format!("data-action=\"{action}\"")),
            "{action} is offered: {page}"
        );
    }
    let post = |path: &'static str, pairs: Vec<(&'static str, &'static str)>| {
        let url = format!("{}{path}", api.base);
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .append_pair("csrf", &csrf)
            .finish();
        let req = http
            .post(url)
            .header(COOKIE, &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.text().await.unwrap())
        }
    };

    let (status, _) = post(
        "/console/control",
        vec![
            ("workflow_id", "c-1"),
            ("action", "cancel_turn"),
            ("turn", "1"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let turn = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=1")
        .await
        .ok();
    assert_eq!(turn["status"], "cancelled", "{turn}");

    // The engine's refusals are shown as pages with their status.
    let (status, page) = post(
        "/console/control",
        vec![("workflow_id", "c-1"), ("action", "explode")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        page.contains("pause, resume, retry, skip, cancel_turn, wake"),
        "{page}"
    );
    let (status, page) = post(
        "/console/control",
        vec![("workflow_id", "c-1"), ("action", "retry"), ("turn", "1")],
    )
    .await;
    assert!(status.is_client_error(), "{status}: {page}");

    let (status, _) = post("/console/delete", vec![("workflow_id", "c-1")]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    api.get("/v1/workflows/instances/get?id=c-1")
        .await
        .err(404, "not_found");
}
