//! Strict wire input: every field the wire marks required is required (an explicit `null` is
//! kept, a missing key is refused), every typed field has its documented type and range, and a
//! body nested past the JSON parser's limit is refused with a message naming the limit. Each
//! refusal is `400` (or `413` for a report over its size) with `param` = the field's path, and
//! nothing is written: the instance, its inbox, its history and the claimed turn read the same
//! afterwards.

use crate::common;

use common::*;
use serde_json::{json, Value};
use turnwise::Engine;

/// A server with instance `c-1` holding one claimed turn; answers the server and the task.
async fn with_claimed_turn() -> (InProcess, Value) {
    let srv = start(Engine::in_memory(), None).await;
    srv.api.create("c-1", 60_000).await;
    srv.api.send("c-1", "m1", json!({"add": 1})).await;
    let task = srv.api.claim(0).await;
    assert!(task.is_object(), "{task}");
    (srv, task)
}

/// Everything the API shows about `c-1` and its first turn.
async fn everything(api: &Api) -> Value {
    let turn = api.get("/v1/workflows/instances/turn?id=c-1&turn=1").await;
    json!({"snapshot": api.snapshot("c-1").await, "turn": turn.body})
}

/// Post each case and check that it is refused with `status` and `param`, and that the
/// message names the field.
async fn refused(api: &Api, cases: &[(&str, Value, &str)], status: u16, code: &str) {
    for (path, body, param) in cases {
        let e = api.post(path, body.clone()).await.err(status, code);
        assert_eq!(e["param"], *param, "{path} {body}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(param),
            "the message names `{param}`: {e}"
        );
    }
}

/// `base` without `key`.
fn without(base: &Value, key: &str) -> Value {
    let mut out = base.clone();
    out.as_object_mut().unwrap().remove(key);
    out
}

#[tokio::test]
async fn every_route_refuses_a_missing_required_field() {
    let (srv, task) = with_claimed_turn().await;
    let l = lease(&task);
    let before = everything(&srv.api).await;

    let create = json!({"id": "c-9", "workflow_type": "counter", "version": "v1"});
    let message = json!({"workflow_id": "c-1", "id": "m2", "message": null});
    let control = json!({"workflow_id": "c-1", "action": "pause"});
    let claim = json!({"worker": "w", "wait_ms": 0,
                       "workflows": [{"workflow_type": "counter", "version": "v1"}]});
    let operation = with(
        &l,
        json!({"position": 0, "key": "a", "kind": "step", "timeout_ms": 1000}),
    );
    let progress = with(
        &l,
        json!({"key": "a", "sequence": 1, "details": null, "checkpoint": null}),
    );
    let checkpoint = with(&l, json!({"position": 0, "key": "a", "kind": "step"}));
    let wait = with(
        &l,
        json!({"position": 0, "key": "w", "name": "n", "timeout_ms": 1000}),
    );
    let signal = json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": "n", "value": null});
    let complete = with(&l, json!({"state": null}));
    let fail = with(&l, json!({"error": "boom", "non_retryable": false}));

    let mut cases: Vec<(&str, Value, &str)> = Vec::new();
    let routes: [(&str, &Value, &[&str]); 12] = [
        (
            "/v1/workflows/instances",
            &create,
            &["id", "workflow_type", "version"],
        ),
        (
            "/v1/workflows/instances/message",
            &message,
            &["workflow_id", "id", "message"],
        ),
        (
            "/v1/workflows/instances/control",
            &control,
            &["workflow_id", "action"],
        ),
        (
            "/v1/workflows/instances/delete",
            &json!({"workflow_id": "c-1"}),
            &["workflow_id"],
        ),
        (
            "/v1/workflows/turns/claim",
            &claim,
            &["worker", "workflows"],
        ),
        (
            "/v1/workflows/turns/operation",
            &operation,
            &[
                "workflow_id",
                "turn",
                "token",
                "position",
                "key",
                "kind",
                "timeout_ms",
            ],
        ),
        (
            "/v1/workflows/turns/progress",
            &progress,
            &["token", "key", "sequence", "details", "checkpoint"],
        ),
        (
            "/v1/workflows/turns/checkpoint",
            &checkpoint,
            &["turn", "position", "key", "kind"],
        ),
        (
            "/v1/workflows/turns/wait-signal",
            &wait,
            &["token", "position", "key", "name", "timeout_ms"],
        ),
        (
            "/v1/workflows/turns/signal",
            &signal,
            &["workflow_id", "turn", "id", "name", "value"],
        ),
        (
            "/v1/workflows/turns/complete",
            &complete,
            &["workflow_id", "token", "state"],
        ),
        ("/v1/workflows/turns/fail", &fail, &["turn", "error"]),
    ];
    for (path, body, required) in routes {
        for key in required {
            cases.push((path, without(body, key), key));
        }
    }
    // A continuation carries its message, `null` or not.
    cases.push((
        "/v1/workflows/turns/complete",
        with(&complete, json!({"continuation": {}})),
        "continuation.message",
    ));
    refused(&srv.api, &cases, 400, "invalid_request").await;
    assert_eq!(everything(&srv.api).await, before, "nothing was written");
    srv.api
        .get("/v1/workflows/instances/get?id=c-9")
        .await
        .err(404, "not_found");
    // The heartbeat's lease triple is the whole body.
    for key in ["workflow_id", "turn", "token"] {
        let e = srv
            .api
            .post("/v1/workflows/turns/heartbeat", without(&l, key))
            .await
            .err(400, "invalid_request");
        assert_eq!(e["param"], key, "{e}");
    }
}

#[tokio::test]
async fn explicit_nulls_in_required_fields_are_kept() {
    let (srv, task) = with_claimed_turn().await;
    let api = &srv.api;
    let l = lease(&task);
    api.post(
        "/v1/workflows/turns/signal",
        json!({"workflow_id": "c-1", "turn": 1, "id": "s1", "name": "n", "value": null}),
    )
    .await
    .ok();
    api.post(
        "/v1/workflows/turns/operation",
        with(
            &l,
            json!({"position": 0, "key": "a", "kind": "step", "timeout_ms": 1000}),
        ),
    )
    .await
    .ok();
    api.post(
        "/v1/workflows/turns/progress",
        with(
            &l,
            json!({"key": "a", "sequence": 1, "details": null, "checkpoint": null}),
        ),
    )
    .await
    .ok();
    let turn = api
        .post(
            "/v1/workflows/turns/complete",
            with(
                &l,
                json!({"state": null, "continuation": {"message": null}}),
            ),
        )
        .await
        .ok();
    assert_eq!(turn["state_after"], Value::Null);
    assert_eq!(turn["signals"][0]["value"], Value::Null);
    let inst = api.get("/v1/workflows/instances/get?id=c-1").await.ok();
    assert_eq!(inst["state"], Value::Null);
    let next = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=2")
        .await
        .ok();
    assert_eq!(next["message"], Value::Null);
    let sent = api.send("c-1", "m3", Value::Null).await;
    assert_eq!(sent["message"], Value::Null);
}

#[tokio::test]
async fn typed_fields_are_checked_against_their_type_and_range() {
    let (srv, task) = with_claimed_turn().await;
    let l = lease(&task);
    let before = everything(&srv.api).await;
    let complete = with(&l, json!({"state": {"count": 1}}));
    let fail = with(&l, json!({"error": "boom", "non_retryable": false}));
    let input = |extra: Value| with(&json!({"outcome": "written"}), extra);
    let mut cases: Vec<(&str, Value, &str)> = Vec::new();
    for path in ["/v1/workflows/turns/complete", "/v1/workflows/turns/fail"] {
        let base = if path.ends_with("complete") {
            &complete
        } else {
            &fail
        };
        for (usage, param) in [
            (json!("lots"), "usage"),
            (json!(5), "usage"),
            (json!([1, 2]), "usage"),
            (json!(true), "usage"),
            (json!({"calls": -1}), "usage.calls"),
            (json!({"calls": 1, "errors": 0.5}), "usage.errors"),
            (json!({"tokens_in": 1.5}), "usage.tokens_in"),
            (json!({"tokens_out": "12"}), "usage.tokens_out"),
            (json!({"cost_micro_usd": -3}), "usage.cost_micro_usd"),
            (json!({"calls": 1e3}), "usage.calls"),
        ] {
            cases.push((path, with(base, json!({ "usage": usage })), param));
        }
        for (results, param) in [
            (json!("all good"), "results"),
            (json!([]), "results"),
            (json!({"inputs": "none"}), "results.inputs"),
            (json!({"inputs": [{}]}), "results.inputs[0].outcome"),
            (
                json!({"inputs": [input(json!({})), {"outcome": "great"}]}),
                "results.inputs[1].outcome",
            ),
            (
                json!({"inputs": [input(json!({"cost_micro_usd": -1}))]}),
                "results.inputs[0].cost_micro_usd",
            ),
            (
                json!({"inputs": [input(json!({"iri": 7}))]}),
                "results.inputs[0].iri",
            ),
            (
                json!({"inputs": [input(json!({"values": {"a": 1}}))]}),
                "results.inputs[0].values",
            ),
            (
                json!({"inputs": [input(json!({"region": [1]}))]}),
                "results.inputs[0].region",
            ),
            (
                json!({"inputs": [input(json!({"error": "e".repeat(501)}))]}),
                "results.inputs[0].error",
            ),
            (
                json!({"inputs": [input(json!({"values": vec![1; 33]}))]}),
                "results.inputs[0].values",
            ),
            (
                json!({"inputs": vec![input(json!({})); 201]}),
                "results.inputs",
            ),
            (json!({"counts": 3}), "results.counts"),
            (json!({"counts": {"written": -1}}), "results.counts.written"),
            (json!({"counts": {"review": 2.5}}), "results.counts.review"),
            (json!({"counts": {"writen": 1}}), "results.counts.writen"),
        ] {
            cases.push((path, with(base, json!({ "results": results })), param));
        }
    }
    // A continuation is an object with a message.
    for c in [json!([1]), json!("next"), json!(7)] {
        cases.push((
            "/v1/workflows/turns/complete",
            with(&complete, json!({ "continuation": c })),
            "continuation",
        ));
    }
    refused(&srv.api, &cases, 400, "invalid_request").await;

    // A report over 512 KiB is a 413 naming `results`, so the LBB worker resends without it.
    let big = json!({"inputs": vec![input(json!({"label": "l".repeat(3000)})); 180]});
    for (path, base) in [
        ("/v1/workflows/turns/complete", &complete),
        ("/v1/workflows/turns/fail", &fail),
    ] {
        let e = srv
            .api
            .post(path, with(base, json!({ "results": big })))
            .await
            .err(413, "payload_too_large");
        assert_eq!(e["param"], "results", "{e}");
    }
    assert_eq!(everything(&srv.api).await, before, "nothing was written");
}

#[tokio::test]
async fn usage_is_kept_in_the_documented_shape() {
    let (srv, task) = with_claimed_turn().await;
    let api = &srv.api;
    let usage = json!({"calls": 3, "errors": 0, "tokens_in": 1200, "tokens_out": 300,
                       "cost_micro_usd": 4500});
    // Unknown keys (here a 60 KiB one) are ignored like every unknown key, and not stored.
    let mut sent = usage.clone();
    sent["blob"] = json!("b".repeat(60 * 1024));
    let results = json!({
        "counts": {"written": 1, "failed": 1},
        "inputs": [{"outcome": "written", "iri": "urn:a", "values": [{"v": 1}],
                    "region": {"page": 1, "x0": 0.5, "x1": 1, "y0": 0, "y1": 1}},
                   {"outcome": "failed", "error": "no page"}]
    });
    api.post(
        "/v1/workflows/turns/complete",
        with(
            &lease(&task),
            json!({"state": {"count": 1}, "usage": sent, "results": results}),
        ),
    )
    .await
    .ok();
    let history = api.get("/v1/workflows/instances/history?id=c-1").await.ok();
    assert_eq!(history["turns"][0]["run"]["usage"], usage);

    // A partial usage keeps only what was sent; a failure keeps its usage too.
    api.send("c-1", "m2", json!({"add": 1})).await;
    let task = api.claim(0).await;
    api.post(
        "/v1/workflows/turns/fail",
        with(
            &lease(&task),
            json!({"error": "boom", "non_retryable": true, "usage": {"calls": 1}}),
        ),
    )
    .await
    .ok();
    let turn = api
        .get("/v1/workflows/instances/turn?id=c-1&turn=2")
        .await
        .ok();
    assert_eq!(turn["run"]["usage"], json!({"calls": 1}));
}

/// JSON text nesting `levels` arrays inside the `message` of a message request.
fn deep_message(levels: usize) -> Vec<u8> {
    let mut body = br#"{"workflow_id":"c-1","id":"deep","message":"#.to_vec();
    body.extend(std::iter::repeat_n(b'[', levels));
    body.extend(std::iter::repeat_n(b']', levels));
    body.push(b'}');
    body
}

#[tokio::test]
async fn a_body_past_the_parsers_nesting_limit_says_so() {
    let (srv, _) = with_claimed_turn().await;
    let api = &srv.api;
    let before = everything(api).await;
    // The body object is one level: 127 in all is what the parser takes.
    for levels in [127, 128, 1000, 100_000] {
        let e = api
            .raw(
                reqwest::Method::POST,
                "/v1/workflows/instances/message",
                Some(deep_message(levels)),
            )
            .await
            .err(400, "invalid_request");
        let m = e["message"].as_str().unwrap();
        assert!(
            m.contains("nests more than 127") && m.contains("64 levels"),
            "{levels}: {e}"
        );
        assert_eq!(e["param"], Value::Null);
    }
    // Within the parser's limit, the engine names the field.
    let e = api
        .raw(
            reqwest::Method::POST,
            "/v1/workflows/instances/message",
            Some(deep_message(126)),
        )
        .await
        .err(400, "invalid_request");
    assert_eq!(e["param"], "message", "{e}");
    assert_eq!(everything(api).await, before, "nothing was written");
}

#[tokio::test]
async fn the_embedded_engine_refuses_what_the_types_cannot() {
    use turnwise::protocol::*;
    use turnwise::Backend;
    let engine = Engine::in_memory();
    engine
        .create_instance(CreateInstanceRequest {
            id: "c-1".into(),
            workflow_type: "counter".into(),
            version: "v1".into(),
            state: Value::Null,
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        })
        .await
        .unwrap();
    engine
        .send_message(MessageRequest {
            workflow_id: "c-1".into(),
            id: "m1".into(),
            message: json!(1),
            origin: None,
        })
        .await
        .unwrap();
    let task = engine
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
    let input = RunInput {
        outcome: RunOutcome::Written,
        iri: None,
        label: None,
        error: None,
        cost_micro_usd: None,
        region: None,
        values: None,
    };
    let complete = |results: RunResultsReport| CompleteRequest {
        lease: lease.clone(),
        state: json!(1),
        result: Value::Null,
        continuation: None,
        usage: Some(RunUsage {
            calls: Some(1),
            ..RunUsage::default()
        }),
        results: Some(results),
    };
    let too_many = RunResultsReport {
        counts: None,
        inputs: Some(vec![input.clone(); 201]),
    };
    let e = engine.complete(complete(too_many)).await.unwrap_err();
    assert!(
        matches!(&e, turnwise::Error::Invalid { param, .. } if param == "results.inputs"),
        "{e}"
    );
    let long_error = RunResultsReport {
        counts: None,
        inputs: Some(vec![RunInput {
            error: Some("e".repeat(501)),
            ..input.clone()
        }]),
    };
    let e = engine.complete(complete(long_error)).await.unwrap_err();
    assert!(
        matches!(&e, turnwise::Error::Invalid { param, .. } if param == "results.inputs[0].error"),
        "{e}"
    );
    let big = RunResultsReport {
        counts: None,
        inputs: Some(vec![
            RunInput {
                label: Some("l".repeat(3000)),
                ..input.clone()
            };
            180
        ]),
    };
    let e = engine.complete(complete(big)).await.unwrap_err();
    assert!(
        matches!(&e, turnwise::Error::TooLarge { what, .. } if what == "results"),
        "{e}"
    );
    let turn = engine
        .complete(complete(RunResultsReport {
            counts: None,
            inputs: Some(vec![input; 200]),
        }))
        .await
        .unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.run.unwrap().usage.unwrap().calls, Some(1));
}
