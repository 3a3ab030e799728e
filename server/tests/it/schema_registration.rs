//! A Rust worker registers its workflows' schemas (made by `#[workflow]`) with the server when it
//! starts; the server then refuses messages and signals that do not match, naming the path, and
//! signals of names the workflow does not accept, and writes nothing.

use crate::common;

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use turnwise::http::Http;
use turnwise::prelude::*;
use turnwise::protocol::{InboxQuery, MessageRequest, SignalRequest, TurnQuery};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Count {
    count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Add {
    add: u64,
}

#[workflow(name = "counter", version = "v1")]
async fn counter(ctx: &mut Turn, state: Count, msg: Add) -> Result<Done<Count, u64>, TurnError> {
    let add = ctx.step("add", move |_| async move { Ok(msg.add) }).await?;
    let total = state.count + add;
    Ok(Done::new(Count { count: total }).reply(total))
}

/// The signal the `review` workflow accepts.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
struct Approval {
    approved: bool,
}

#[workflow(name = "review", version = "v1", signals(Approval))]
async fn review(ctx: &mut Turn, state: Count, _msg: Add) -> Result<Done<Count, bool>, TurnError> {
    let answer = ctx
        .wait_for_signal::<Approval>("review", Duration::from_secs(60))
        .await?;
    Ok(Done::new(state).reply(answer.is_some_and(|a| a.approved)))
}

/// Once a worker registered the workflow's schema, a signal whose name the workflow does not
/// accept is refused (`400 invalid_request` on `name`, listing the accepted names) and nothing
/// is kept; before, any name is taken, as from LBB workers, which register no schema.
#[tokio::test]
async fn a_signal_the_registered_schema_does_not_declare_is_refused() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let http = Http::connect(server.api.base.clone(), None).unwrap();
    let handle = review.start(&http, "review-1").await.unwrap();
    let turn = handle.send(Add { add: 1 }, "m1").await.unwrap().number;
    let typo = |id: &str| SignalRequest {
        workflow_id: "review-1".into(),
        turn,
        id: id.into(),
        name: "aprove".into(),
        value: json!({"approved": true}),
    };
    http.signal(typo("early"))
        .await
        .expect("no schema registered yet: any name is taken");

    let worker = Worker::new(http.clone()).register(review);
    assert_eq!(worker.register_schemas().await.unwrap(), 1);
    let refused = http.signal(typo("late")).await.unwrap_err();
    assert_eq!((refused.status(), refused.code()), (400, "invalid_request"));
    assert_eq!(refused.param(), Some("name"), "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("`aprove`") && said.contains("it declares `approval`"),
        "the refusal lists the declared names: {said}"
    );
    handle
        .signal(turn, Approval { approved: true }, "answer")
        .await
        .expect("a declared signal is taken");
    let kept = http
        .turn(TurnQuery {
            id: "review-1".into(),
            turn,
        })
        .await
        .unwrap()
        .signals
        .unwrap_or_default();
    let ids: Vec<&str> = kept.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["early", "answer"], "the refused signal was not kept");
}

#[tokio::test]
async fn a_worker_registers_schemas_and_the_server_validates_with_them() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let http = Http::connect(server.api.base.clone(), None).unwrap();

    let handle = counter.start(&http, "counter-1").await.unwrap();
    // Before any worker registered: unvalidated, as for an unknown type.
    let early = http
        .send_message(MessageRequest {
            workflow_id: "counter-1".into(),
            id: "early".into(),
            message: json!({"add": "not a number"}),
            origin: None,
        })
        .await;
    assert!(early.is_ok(), "no schema yet, so no validation: {early:?}");

    let worker = Worker::new(http.clone()).register(counter);
    assert_eq!(worker.register_schemas().await.unwrap(), 1);

    let refused = http
        .send_message(MessageRequest {
            workflow_id: "counter-1".into(),
            id: "bad".into(),
            message: json!({"add": "two"}),
            origin: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (refused.status(), refused.code()),
        (400, "schema_validation_failed"),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("add"),
        "the error names the path: {refused}"
    );
    let inbox = http
        .instance_inbox(InboxQuery {
            id: "counter-1".into(),
            after: None,
            limit: None,
            payloads: false,
        })
        .await
        .unwrap();
    assert!(
        inbox.messages.iter().all(|m| m.message_id != "bad"),
        "nothing was written"
    );

    // A conforming message goes through, and a worker started with `run_async` (which
    // registers by itself) runs it.
    handle.cancel_turn(1).await.unwrap();
    handle.send(Add { add: 2 }, "good").await.unwrap();
    let running = Worker::new(http.clone())
        .register(counter)
        .claim_wait(Duration::from_millis(100))
        .run_async();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while handle.state().await.unwrap().count != 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not complete"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.stop().await.unwrap();

    // The handle reads the runs over the Http backend: the cancelled turn never ran, the
    // conforming one ran once and completed.
    let runs = handle.all_runs().await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].outcome, turnwise::protocol::RunEnd::Completed);
    assert_eq!((runs[0].turn, runs[0].message_id.as_str()), (2, "good"));
    assert_eq!(http.run(&runs[0].id).await.unwrap(), runs[0]);

    let served = server
        .api
        .scoped("")
        .get("/v1/workflows/schemas?workflow_type=counter&version=v1")
        .await
        .ok();
    assert_eq!(
        served["message"]["properties"]["add"]["type"],
        json!("integer"),
        "{served}"
    );
}

/// Registered schemas are kept in the store: the `turnwise` binary killed (SIGKILL) and started
/// again on the same file still serves the document and still refuses a message that does not
/// match it, writing nothing, before any worker registered again.
#[tokio::test]
async fn schemas_survive_a_restart_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schemas.db");
    let (mut server, addr) = common::spawn_binary(&db, "127.0.0.1:0", None);
    let http = Http::connect(format!("http://{addr}"), None).unwrap();
    counter.start(&http, "counter-1").await.unwrap();
    let worker = Worker::new(http.clone()).register(counter);
    assert_eq!(worker.register_schemas().await.unwrap(), 1);
    server.kill();

    let (_server, addr) = common::spawn_binary(&db, "127.0.0.1:0", None);
    let api = common::Api::new(format!("http://{addr}"), None).scoped("");
    let served = api
        .get("/v1/workflows/schemas?workflow_type=counter&version=v1")
        .await
        .ok();
    assert_eq!(
        served["message"]["properties"]["add"]["type"],
        json!("integer"),
        "the document is served after the restart: {served}"
    );
    let refused = api
        .post(
            "/v1/workflows/instances/message",
            json!({"workflow_id": "counter-1", "id": "bad", "message": {"add": "two"}}),
        )
        .await
        .err(400, "schema_validation_failed");
    assert_eq!(refused["param"], "message/add", "{refused}");
    let inbox = api
        .get("/v1/workflows/instances/inbox?id=counter-1")
        .await
        .ok();
    assert_eq!(inbox["messages"], json!([]), "nothing was written: {inbox}");
}
