//! The console's Versions page over HTTP: a registered manifest drawn as a diagram (calls,
//! branches, loops, parallel groups, signal waits, patches with their ids), the live
//! compatibility report against a chosen version, the upgrade action (refused without the
//! CSRF field, moving the instances with it), a clear page for a missing or unknown type, and
//! a suspended turn's page with its version's diagram and the divergence marked.

use crate::common;

use reqwest::header::COOKIE;
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use turnwise::manifest::grammar::Saved;
use turnwise::manifest::{Alt, Call, CallKind, Manifest, Node, Patch};
use turnwise::protocol::*;
use turnwise::{Backend, Http};

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `id` on v1: idle (`asleep: None`), or with its first turn claimed and asleep at `settle`
/// after saving `reserve` (and `wrap` when `Some(true)`).
pub(crate) async fn order_on_v1(http: &Http, id: &str, asleep: Option<bool>) {
    let Some(gift) = asleep else {
        create_on_v1(http, id).await;
        return;
    };
    let lease = claimed_on_v1(http, id).await;
    let mut keys = vec![("reserve", CheckpointKind::Step)];
    if gift {
        keys.push(("wrap", CheckpointKind::Step));
    }
    keys.push(("settle", CheckpointKind::Sleep));
    for (position, (key, kind)) in keys.into_iter().enumerate() {
        let sleep = kind == CheckpointKind::Sleep;
        http.checkpoint(CheckpointRequest {
            lease: lease.clone(),
            position: position as u32,
            key: key.into(),
            kind,
            output: if sleep { Value::Null } else { json!(1) },
            delay_ms: sleep.then_some(3_600_000),
        })
        .await
        .unwrap();
    }
}

/// `id` on v1 with its first turn suspended: it saved `reserve`, then its worker's code called
/// step `audit` instead of what came next.
pub(crate) async fn order_suspended_on_v1(http: &Http, id: &str) {
    use turnwise::manifest::{grammar::Saved, CallKind};
    let lease = claimed_on_v1(http, id).await;
    http.checkpoint(CheckpointRequest {
        lease: lease.clone(),
        position: 0,
        key: "reserve".into(),
        kind: CheckpointKind::Step,
        output: json!(1),
        delay_ms: None,
    })
    .await
    .unwrap();
    http.fail(FailRequest {
        lease,
        error: "replay mismatch".into(),
        non_retryable: false,
        retry_at_ms: None,
        usage: None,
        results: None,
        mismatch: Some(MismatchReport {
            version: "v1".into(),
            position: 1,
            saved: vec![Saved::new(CallKind::Step, "reserve")],
            found: Some(Saved::new(CallKind::Step, "audit")),
            at: None,
            message: "the code calls step `audit` at position 1".into(),
        }),
    })
    .await
    .unwrap();
}

async fn create_on_v1(http: &Http, id: &str) {
    http.create_instance(CreateInstanceRequest {
        id: id.into(),
        workflow_type: "order".into(),
        version: "v1".into(),
        state: json!({"charged": 0}),
        lease_ms: None,
        max_attempts: None,
        on_exhausted: None,
    })
    .await
    .unwrap();
}

/// `id` created on v1 with a message, and its turn claimed: the lease.
async fn claimed_on_v1(http: &Http, id: &str) -> Lease {
    create_on_v1(http, id).await;
    http.send_message(MessageRequest {
        workflow_id: id.into(),
        id: "m-1".into(),
        message: json!({"amount": 100}),
        origin: None,
    })
    .await
    .unwrap();
    let task = http
        .claim(ClaimRequest {
            worker: "versions-test".into(),
            workflows: vec![WorkflowRef::new("order", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .expect("the turn is ready");
    Lease {
        workflow_id: id.into(),
        turn: task.turn.number,
        token: task.token.clone(),
    }
}

/// The cookie and CSRF token of a first page.
async fn session(http: &Client, base: &str) -> (String, String) {
    let res = http.get(format!("{base}/console")).send().await.unwrap();
    let cookie = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let csrf = cookie.split_once('=').unwrap().1.to_owned();
    (cookie, csrf)
}

async fn get(http: &Client, url: String) -> (StatusCode, String) {
    let res = http.get(url).send().await.unwrap();
    (res.status(), res.text().await.unwrap())
}

fn call(kind: CallKind, key: &str, line: u32) -> Node {
    Node::Call(Call::new(kind, key, format!("src/ship.rs:{line}")))
}

/// `ship` v1: a patch, a loop, a parallel group, a match and a signal wait.
fn ship_manifest() -> Manifest {
    let grammar = Node::Seq(vec![
        call(CallKind::Step, "pick", 10),
        Node::Patch(Patch {
            id: "fragile-check".into(),
            new: Box::new(call(CallKind::Step, "inspect", 12)),
            old: Box::new(Node::Seq(Vec::new())),
            at: "src/ship.rs:11".into(),
        }),
        Node::Loop(Box::new(call(CallKind::Step, "box-*", 14))),
        Node::Parallel(vec![
            call(CallKind::Step, "label", 16),
            call(CallKind::Step, "invoice", 17),
        ]),
        Node::Alt(Alt {
            cond: "c1".into(),
            arms: vec![
                Node::Call(
                    Call::new(CallKind::Signal, "approval", "src/ship.rs:19").signal("approve"),
                ),
                call(CallKind::Sleep, "cool-off", 20),
            ],
        }),
        call(CallKind::Step, "dispatch", 22),
    ]);
    Manifest::new("ship", "v1", grammar)
}

#[tokio::test]
async fn the_versions_page_draws_each_manifest_and_refuses_what_it_cannot_show() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let b = Http::connect(base.clone(), None).unwrap();
    let m = ship_manifest();
    b.register_schema(&SchemaDocument {
        workflow_type: "ship".into(),
        version: "v1".into(),
        message: json!({"type": "object"}),
        signals: Default::default(),
        state: json!({"type": "object"}),
        reply: Value::Null,
        manifest: Some(m.clone()),
    })
    .await
    .unwrap();
    let http = client();
    let (status, page) = get(&http, format!("{base}/console/versions?type=ship")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    for needle in [
        "Versions of ship",
        r#"data-key="pick" data-kind="step""#,
        r#"data-node="patch" data-patch="fragile-check""#,
        "new (patched fragile-check)",
        "old (before fragile-check)",
        r#"data-node="loop""#,
        r#"data-key="box-*""#,
        r#"data-node="parallel""#,
        r#"data-node="alt""#,
        r#"data-key="approval" data-kind="signal""#,
        "signal <code>approve</code>",
        r#"data-key="cool-off" data-kind="sleep""#,
        "src/ship.rs:22",
        &m.shape_hash,
        "0 instances on it",
    ] {
        assert!(page.contains(needle), "`{needle}` in the page: {page}");
    }
    // The Workflows page links it.
    let (_, workflows) = get(&http, format!("{base}/console")).await;
    assert!(workflows.contains(r#"href="/console/versions?type=ship""#));

    let (status, page) = get(&http, format!("{base}/console/versions")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("needs `type`"), "{page}");
    let (status, page) = get(&http, format!("{base}/console/versions?type=%3Cnope%3E")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        page.contains("no workflow type `&lt;nope&gt;` is registered"),
        "escaped: {page}"
    );
    let (status, page) = get(&http, format!("{base}/console/versions?type=ship&to=v9")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains(r#"id="compat-error""#) && page.contains("`v9` of `ship` is not registered"),
        "{page}"
    );
    server.shutdown.trigger();
}

#[tokio::test]
async fn the_live_report_and_the_upgrade_move_the_movable_instances() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let b = Http::connect(base.clone(), None).unwrap();
    turnwise_conformance::versions::register(&b).await;
    order_on_v1(&b, "idle", None).await;
    order_on_v1(&b, "asleep", Some(false)).await;
    order_on_v1(&b, "gift", Some(true)).await;
    let http = client();
    let (status, page) = get(&http, format!("{base}/console/versions?type=order&to=v2")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    for needle in [
        r#"<li data-verdict="upgradable"><span class="verdict v-upgradable">upgradable</span> <strong>1</strong>"#,
        r#"<li data-verdict="pinned"><span class="verdict v-pinned">pinned</span> <strong>1</strong>"#,
        r#"<tr data-id="asleep" data-verdict="upgradable-after-turn">"#,
        r#"<tr data-id="gift" data-verdict="pinned">"#,
        "(prefix_rejected)",
        r#"data-action="upgrade-all""#,
        "3 instances on it",
    ] {
        assert!(page.contains(needle), "`{needle}` in the page: {page}");
    }

    let (cookie, csrf) = session(&http, &base).await;
    let post = |pairs: Vec<(&str, &str)>| {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        http.post(format!("{base}/console/upgrade"))
            .header(COOKIE, &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let all = vec![("workflow_type", "order"), ("to_version", "v2")];
    let refused = post(all.clone()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN, "no CSRF field");
    let inst = b.get_instance("idle").await.unwrap();
    assert_eq!(inst.version, "v1", "nothing moved");

    let res = post([all, vec![("csrf", csrf.as_str())]].concat())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let to = res.headers()["location"].to_str().unwrap().to_owned();
    assert!(to.starts_with("/console/versions?type=order&to=v2"), "{to}");
    let (_, page) = get(&http, format!("{base}{to}")).await;
    for needle in [
        "2 upgraded, 0 unchanged, 1 refused.",
        "upgraded asleep: v1 → v2 (upgrade, upgradable-after-turn)",
        "upgraded idle: v1 → v2 (upgrade, upgradable)",
        "refused gift: ",
    ] {
        assert!(page.contains(needle), "`{needle}` in the page: {page}");
    }
    for id in ["idle", "asleep"] {
        assert_eq!(b.get_instance(id).await.unwrap().version, "v2");
    }
    let gift = b.get_instance("gift").await.unwrap();
    assert_eq!(gift.version, "v1");
    let moved = gift
        .events
        .iter()
        .any(|e| format!("{e:?}").contains("upgrade"));
    assert!(!moved, "the pinned one has no upgrade event");
    let events = format!("{:?}", b.get_instance("idle").await.unwrap().events);
    assert!(
        events.contains("console"),
        "recorded as by console: {events}"
    );
    server.shutdown.trigger();
}

#[tokio::test]
async fn a_suspended_turn_shows_its_versions_diagram_with_the_divergence_marked() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let b = Http::connect(base.clone(), None).unwrap();
    turnwise_conformance::versions::register(&b).await;
    order_on_v1(&b, "o-1", None).await;
    b.send_message(MessageRequest {
        workflow_id: "o-1".into(),
        id: "m-1".into(),
        message: json!({}),
        origin: None,
    })
    .await
    .unwrap();
    let task = b
        .claim(ClaimRequest {
            worker: "w".into(),
            workflows: vec![WorkflowRef::new("order", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .unwrap();
    let lease = Lease {
        workflow_id: "o-1".into(),
        turn: task.turn.number,
        token: task.token,
    };
    b.checkpoint(CheckpointRequest {
        lease: lease.clone(),
        position: 0,
        key: "reserve".into(),
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
            saved: vec![Saved::new(CallKind::Step, "reserve")],
            found: Some(Saved::new(CallKind::Sleep, "settle")),
            at: Some("src/order.rs:16".into()),
            message: "position 1: the handler now calls sleep `settle`".into(),
        }),
    })
    .await
    .unwrap();
    let (status, page) = get(&client(), format!("{base}/console/instance?id=o-1")).await;
    assert_eq!(status, StatusCode::OK);
    for needle in [
        r#"id="mismatch-diagram""#,
        r#"class="d-call k-step replayed" data-key="reserve" data-kind="step" data-mark="replayed""#,
        r#"class="d-call k-sleep diverged" data-key="settle" data-kind="sleep" data-mark="diverged""#,
        r#"class="d-call k-step" data-key="wrap""#,
        r#"class="d-call k-step" data-key="charge""#,
        r#"href="/console/versions?type=order""#,
        "diverged here: the code called this instead",
    ] {
        assert!(page.contains(needle), "`{needle}` in the page: {page}");
    }
    server.shutdown.trigger();
}
