//! What the console's pages say, over HTTP: the **No worker** warning after two minutes of a
//! ready message with no turn running, the server's schema refusal of a form shown beside its
//! field with nothing admitted, the paging of instances, turns and runs, the runs of an instance
//! from the runs API (one per attempt across a signal wait and a retry) and a run's own page.

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

/// The runs the instance page's Runs section lists, in order: `(run id, attempt, outcome)`.
fn listed_runs(page: &str) -> Vec<(String, u32, String)> {
    page.split("<tr class=\"run\" ")
        .skip(1)
        .map(|rest| {
            let attr = |name: &str| {
                rest.split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap()
                    .to_owned()
            };
            (
                attr("data-run"),
                attr("data-attempt").parse().unwrap(),
                attr("data-outcome"),
            )
        })
        .collect()
}

/// The runs of an instance come from the runs API: one row per attempt, newest first; a turn
/// that waited for a signal and resumed keeps its run; each row opens the run's page.
#[tokio::test]
async fn the_runs_section_shows_one_run_per_attempt_after_a_signal_wait_and_a_retry() {
    use turnwise::protocol::*;
    use turnwise::Backend;
    use turnwise_conformance::support::*;

    let clock = ManualClock::new(1_800_000_000_000);
    let engine = Engine::new(MemoryStore::new(), clock.clone(), EngineConfig::default());
    let server = common::start(engine.clone(), None).await;
    let b = &engine;
    let page = |path: String| {
        let url = format!("{}{path}", server.api.base);
        async move {
            let res = client().get(url).send().await.unwrap();
            let status = res.status();
            (status, res.text().await.unwrap())
        }
    };

    create(b, "inst-1").await;
    let mut req = message_request("inst-1", "m1", json!({"pages": 3}));
    let mut origin = MessageOrigin::new("manual");
    origin.fields.insert("actor".into(), json!("ana"));
    req.origin = Some(origin);
    b.send_message(req).await.unwrap();
    send(b, "inst-1", "m2", json!(null)).await;
    let (_, before) = page("/console/instance?id=inst-1".into()).await;
    assert!(listed_runs(&before).is_empty(), "no run before a claim");
    assert!(before.contains("No run yet."), "{before}");

    // Attempt 1 waits for a signal: its run ends `waiting_signal`.
    let first = claim(b, "m1 is ready").await;
    let l = lease(&first);
    b.wait_signal(wait_request(&l, 0, "approval", "go", 60_000))
        .await
        .unwrap();
    let (_, waiting) = page("/console/instance?id=inst-1".into()).await;
    let runs = listed_runs(&waiting);
    assert_eq!(runs.len(), 1, "{waiting}");
    assert_eq!((runs[0].1, runs[0].2.as_str()), (1, "waiting_signal"));
    let run1 = runs[0].0.clone();

    // The signal resumes the same run, which then fails: still one run, now `failed`.
    signal(b, "inst-1", 1, "s1", "go", json!(true)).await;
    let resumed = claim(b, "the signal arrived").await;
    fail(b, &lease(&resumed), "RuntimeError: boom").await;
    let (_, failed) = page("/console/instance?id=inst-1".into()).await;
    assert_eq!(
        listed_runs(&failed),
        [(run1.clone(), 1, "failed".to_owned())],
        "the resumed attempt is the same run: {failed}"
    );
    assert!(failed.contains("RuntimeError: boom"), "{failed}");

    // Attempt 2, after the backoff, reports progress and completes: a second run.
    clock.advance(Duration::from_secs(1));
    let second = claim(b, "the backoff passed").await;
    assert_eq!(second.turn.attempt, 2);
    let l = lease(&second);
    b.operation(operation_request(&l, 1, "crawl"))
        .await
        .unwrap();
    let details = json!({"phase": "reading", "done": 3, "total": 3, "unit": "pages"});
    b.progress(progress_request(&l, "crawl", 1, details, json!(null)))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1_500));
    checkpoint_step(b, &l, 1, "crawl", json!({"pages": 3})).await;
    let mut done = complete_request(
        &l,
        json!({"seen": 3}),
        json!({"sample": ["page-one", "page-two"], "counters": {"links": 12}}),
    );
    done.usage = Some(RunUsage {
        calls: Some(2),
        tokens_in: Some(100),
        cost_micro_usd: Some(150),
        ..RunUsage::default()
    });
    done.results = Some(RunResultsReport {
        counts: Some(RunResultCounts {
            written: Some(4),
            ..RunResultCounts::default()
        }),
        inputs: Some(vec![serde_json::from_value(json!({
            "outcome": "failed", "label": "Page three", "error": "no title",
            "cost_micro_usd": 2_500_000
        }))
        .unwrap()]),
    });
    b.complete(done).await.unwrap();

    let (_, after) = page("/console/instance?id=inst-1".into()).await;
    let runs = listed_runs(&after);
    assert_eq!(runs.len(), 2, "one run per attempt: {after}");
    assert_eq!(
        (runs[0].1, runs[0].2.as_str()),
        (2, "completed"),
        "newest first"
    );
    assert_eq!(runs[1], (run1.clone(), 1, "failed".to_owned()));
    let run2 = runs[0].0.clone();
    assert_ne!(run2, run1);
    let row = after
        .split(&format!("data-run=\"{run2}\""))
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap();
    for shown in [
        "manual",
        "<td>1.5 s</td>",
        "2 → 1",
        "3 of 3 pages",
        "reading",
        "calls 2",
        "tokens in 100",
        "$0.000150",
        &format!("href=\"/console/run?run={run2}\""),
    ] {
        assert!(row.contains(shown), "the row shows {shown}: {row}");
    }

    // The run's page: everything of one run.
    let (status, one) = page(format!("/console/run?run={run2}")).await;
    assert_eq!(status, StatusCode::OK);
    for shown in [
        "inst-1",
        "ana",
        "page-one",
        "page-two",
        "links",
        "12",
        "crawl",
        "reading",
        "<tr data-outcome=\"written\"><th>written</th><td>4</td></tr>",
        "Page three",
        "no title",
        "$2.500000",
        "data-status=\"completed\"",
    ] {
        assert!(one.contains(shown), "the run page shows {shown}: {one}");
    }
    let (status, one) = page(format!("/console/run?run={run1}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        one.contains("RuntimeError: boom") && one.contains("approval"),
        "the failed run: its error and its signal wait: {one}"
    );
    let (status, _) = page("/console/run?run=no-such-run".into()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The Workflows page counts the runs of this hour.
    let (_, workflows) = page("/console".into()).await;
    assert!(
        workflows.contains("2 runs in the last 24 hours"),
        "{workflows}"
    );
}

/// The Runs section pages with the runs API's cursor, twenty runs a page.
#[tokio::test]
async fn runs_are_listed_a_page_at_a_time() {
    use turnwise_conformance::support::*;

    let engine = Engine::in_memory();
    let server = common::start(engine.clone(), None).await;
    create(&engine, "inst-1").await;
    for i in 0..23 {
        send(&engine, "inst-1", &format!("m{i}"), json!(null)).await;
        run_next(&engine, json!({"n": i})).await;
    }
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
    let first = get("/console/instance?id=inst-1".into()).await;
    assert_eq!(listed_runs(&first).len(), 20, "{first}");
    assert!(!first.contains("newest runs"), "{first}");
    let next = first
        .split("rel=\"next\" href=\"/console/instance?")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a link to the older runs")
        .replace("&amp;", "&");
    assert!(next.contains("runs="), "{next}");
    let second = get(format!("/console/instance?{next}")).await;
    let older = listed_runs(&second);
    assert_eq!(older.len(), 3, "{second}");
    let shown: std::collections::BTreeSet<_> = listed_runs(&first)
        .into_iter()
        .chain(older)
        .map(|r| r.0)
        .collect();
    assert_eq!(shown.len(), 23, "every run once");
    assert!(second.contains("newest runs"), "{second}");
    assert!(!second.contains("older runs"), "the last page: {second}");
}

/// A turn suspended by a replay mismatch: the instance page shows its report (the saved
/// steps and where the code left them, what it called instead, where) with the ways out, and
/// the restart and fork forms go through the engine, recorded as the console's.
#[tokio::test]
async fn a_suspended_turn_shows_its_report_and_its_ways_out() {
    use turnwise::manifest::grammar::Saved;
    use turnwise::manifest::CallKind;
    use turnwise::protocol::*;
    use turnwise::{Backend, Http};
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let api = server.api.scoped("");
    let b = Http::connect(api.base.clone(), None).unwrap();
    api.post(
        "/v1/workflows/instances",
        json!({"id": "c-1", "workflow_type": "counter", "version": "v1", "state": {"n": 0}}),
    )
    .await
    .ok();
    api.send("c-1", "m1", json!({"add": 1})).await;
    api.send("c-1", "m2", json!({"add": 2})).await;
    let task = b
        .claim(ClaimRequest {
            worker: "w".into(),
            workflows: vec![WorkflowRef::new("counter", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .unwrap();
    let lease = Lease {
        workflow_id: "c-1".into(),
        turn: 1,
        token: task.token,
    };
    b.checkpoint(CheckpointRequest {
        lease: lease.clone(),
        position: 0,
        key: "add".into(),
        kind: CheckpointKind::Step,
        output: json!(1),
        delay_ms: None,
    })
    .await
    .unwrap();
    b.fail(FailRequest {
        lease,
        error: "ReplayMismatch: changed".into(),
        non_retryable: false,
        retry_at_ms: None,
        usage: None,
        results: None,
        mismatch: Some(MismatchReport {
            version: "v1".into(),
            position: 1,
            saved: vec![Saved::new(CallKind::Step, "add")],
            found: Some(Saved::new(CallKind::Sleep, "nap")),
            at: Some("src/counter.rs:31".into()),
            message: "position 1: the handler now calls sleep `nap`".into(),
        }),
    })
    .await
    .unwrap();

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
    for needle in [
        "Turn 1 is suspended by a replay mismatch",
        "position 1: the handler now calls sleep `nap`",
        r#"<dd id="mismatch-found"><code>sleep `nap`</code></dd>"#,
        r#"<dd id="mismatch-at"><code>src/counter.rs:31</code></dd>"#,
        "<code>step `add`</code>",
        r#"data-action="restart-last_accepted""#,
        r#"data-action="restart-scratch""#,
        r#"data-action="fork""#,
        r#"data-action="cancel_turn""#,
        r#"data-status="suspended""#,
    ] {
        assert!(page.contains(needle), "`{needle}` in the page: {page}");
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
            let to = res
                .headers()
                .get("location")
                .map(|l| l.to_str().unwrap().to_owned());
            (status, to, res.text().await.unwrap())
        }
    };
    let (status, to, _) = post(
        "/console/fork",
        vec![("workflow_id", "c-1"), ("new_id", "c-2")],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        to.as_deref(),
        Some("/console/instance?id=c-2"),
        "shows the fork"
    );
    let fork = api.get("/v1/workflows/instances/get?id=c-2").await.ok();
    assert_eq!(fork["pending_messages"], 2, "{fork}");
    let (status, ..) = post(
        "/console/restart",
        vec![
            ("workflow_id", "c-1"),
            ("turn", "1"),
            ("from", "last_accepted"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let inst = api.get("/v1/workflows/instances/get?id=c-1").await.ok();
    assert_eq!(inst["status"], "queued", "{inst}");
    let events = inst["events"].as_array().unwrap();
    let last = &events[events.len() - 1];
    assert_eq!(
        (&last["action"], &last["by"]),
        (&json!("restart_turn"), &json!("console"))
    );
    // Refused now that nothing is suspended: the engine's 409 as a page.
    let (status, _, page) = post(
        "/console/restart",
        vec![("workflow_id", "c-1"), ("turn", "1"), ("from", "scratch")],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{page}");
    assert!(page.contains("not suspended"), "{page}");
    let (status, _, page) = post(
        "/console/restart",
        vec![("workflow_id", "c-1"), ("turn", "1"), ("from", "sideways")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("last_accepted, scratch"), "{page}");
    let page = http
        .get(format!("{}/console/instance?id=c-1", api.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(r#"<section id="events">"#), "{page}");
    assert!(
        !page.contains("is suspended by a replay mismatch"),
        "{page}"
    );
}
