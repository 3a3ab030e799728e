//! `turnwise compat --workflow NAME --to VERSION` (the live check) and `turnwise instances
//! upgrade`, run as a user runs them: the built binary against a server this test starts
//! (with a token), in tables and in `--json`, with their exit codes. The instances are made
//! with the raw protocol over the `Http` backend, with `order`'s hand-written manifests of the
//! conformance suite (`turnwise_conformance::versions`). `docs/versions.md` shows these same
//! command lines.

use crate::common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Http};

const TOKEN: &str = "upgrade-cli-token";

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    #[track_caller]
    fn json(&self, code: i32) -> Value {
        assert_eq!(self.code, code, "{self:#?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:#?}"))
    }

    #[track_caller]
    fn text(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "{self:#?}");
        &self.stdout
    }
}

/// `turnwise <args>` against `base` with `token`, and no other `TURNWISE_*` variable.
async fn turnwise(base: &str, token: &str, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnwise"));
    cmd.args(args)
        .env("TURNWISE_URL", base)
        .env("TURNWISE_API_TOKEN", token)
        .env_remove("TURNWISE_GRAPH")
        .env_remove("TURNWISE_STACK")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the command ends by itself")
        .expect("run the turnwise binary");
    Run {
        code: out.status.code().expect("an exit code, not a signal"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// `id` on `order` v1, with a turn asleep after `reserve` (and `wrap`, which v2 does not make,
/// when `gift`).
async fn asleep(http: &Http, id: &str, gift: bool) {
    create(http, id).await;
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
            worker: "cli-test".into(),
            workflows: vec![WorkflowRef::new("order", "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .expect("the turn is ready");
    let lease = Lease {
        workflow_id: id.into(),
        turn: task.turn.number,
        token: task.token.clone(),
    };
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

async fn create(http: &Http, id: &str) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compat_and_upgrade_commands() {
    let server = common::start(turnwise::Engine::in_memory(), Some(TOKEN)).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, Some(TOKEN.into())).unwrap();
    turnwise_conformance::versions::register(&http).await;
    create(&http, "idle").await;
    asleep(&http, "asleep", false).await;
    asleep(&http, "gift", true).await;
    let compat = ["compat", "--workflow", "order", "--to", "v2"];

    // The live check: a table, and why the pinned one is pinned; exit 2.
    let run = turnwise(base, TOKEN, &compat).await;
    let text = run.text(2);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("order → v2: 3 instances checked, 0 already on v2")
    );
    assert_eq!(
        lines.next(),
        Some("upgradable 1, upgradable-after-turn 1, resumable 0, pinned 1")
    );
    assert!(
        text.contains("INSTANCE  VERSION  STATUS   VERDICT                TURN"),
        "{text}"
    );
    assert!(
        text.contains("asleep    v1       waiting  upgradable-after-turn  1"),
        "{text}"
    );
    assert!(
        text.contains("idle      v1       idle     upgradable"),
        "{text}"
    );
    assert!(
        text.contains(
            "  gift: turn 1 saved [step `reserve`, step `wrap`, sleep `settle`], which `v2` \
             does not replay"
        ),
        "{text}"
    );
    // `--live` says the same explicitly.
    let live = ["compat", "--live", "--workflow", "order", "--to", "v2"];
    assert_eq!(turnwise(base, TOKEN, &live).await.text(2), text);
    assert!(text.contains("(prefix_rejected)"), "{text}");

    // --json: the API's answer, for tools; the same exit code.
    let check = turnwise(base, TOKEN, &[&compat[..], &["--json"]].concat())
        .await
        .json(2);
    assert_eq!(
        keys(&check),
        BTreeSet::from([
            "workflow_type",
            "to_version",
            "checked",
            "on_target",
            "counts",
            "instances",
            "checked_at_ms"
        ])
    );
    assert_eq!(
        check["counts"],
        json!({"upgradable": 1, "upgradable-after-turn": 1, "resumable": 0, "pinned": 1})
    );
    let gift = &check["instances"][1];
    assert_eq!(gift["workflow_id"], "gift");
    assert_eq!(gift["verdict"], "pinned");
    assert_eq!(
        keys(&gift["reason"]),
        BTreeSet::from(["code", "message", "saved", "position", "expected"])
    );
    assert_eq!(gift["reason"]["code"], "prefix_rejected");
    assert_eq!(
        gift["reason"]["saved"][1],
        json!({"key": "wrap", "kind": "step"})
    );
    assert_eq!(
        keys(&check["instances"][0]),
        BTreeSet::from([
            "workflow_id",
            "version",
            "status",
            "verdict",
            "turn",
            "saved_steps"
        ])
    );
    // The global --json, before the command, works the same.
    let global = turnwise(base, TOKEN, &[&["--json"], &compat[..]].concat()).await;
    assert_eq!(global.json(2)["checked"], 3);

    // One instance, by id.
    let one = ["instances", "upgrade", "idle", "--to", "v2", "--by", "ops"];
    let run = turnwise(base, TOKEN, &one).await;
    let text = run.text(0);
    assert!(
        text.starts_with("RESULT    INSTANCE  FROM  TO  DETAIL"),
        "{text}"
    );
    assert!(
        text.contains("upgraded  idle      v1    v2  upgrade (upgradable) by ops"),
        "{text}"
    );

    // Every movable instance of the type: the pinned one is refused, exit 4.
    let all = [
        "instances",
        "upgrade",
        "--workflow",
        "order",
        "--to",
        "v2",
        "--all-upgradable",
        "--by",
        "ops",
        "--json",
    ];
    let run = turnwise(base, TOKEN, &all).await;
    let answer = run.json(4);
    assert_eq!(
        keys(&answer),
        BTreeSet::from(["to_version", "upgraded", "unchanged", "refused"])
    );
    assert_eq!(answer["upgraded"][0]["workflow_id"], "asleep");
    assert_eq!(answer["upgraded"][0]["verdict"], "upgradable-after-turn");
    assert_eq!(answer["refused"][0]["workflow_id"], "gift");
    assert_eq!(answer["refused"][0]["retryable"], false);
    let error: Value = serde_json::from_str(run.stderr.trim()).unwrap();
    assert_eq!(error["error"]["kind"], "conflict", "{run:#?}");
    let moved = answer["upgraded"][0].clone();

    // A repeat answers the recorded move.
    let again = ["instances", "upgrade", "asleep", "--to", "v2", "--json"];
    let repeat = turnwise(base, TOKEN, &again).await.json(0);
    assert_eq!(repeat["upgraded"], json!([moved]));
    let inst = http.get_instance("asleep").await.unwrap();
    assert_eq!(inst.events.len(), 1);
    assert_eq!(inst.events[0].by.as_deref(), Some("ops"));

    // Once the pinned one is gone, every instance left can move: exit 0.
    http.delete_instance(DeleteRequest {
        workflow_id: "gift".into(),
    })
    .await
    .unwrap();
    let run = turnwise(base, TOKEN, &compat).await;
    assert!(
        run.text(0)
            .starts_with("order → v2: 0 instances checked, 2 already on v2"),
        "{run:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compat_and_upgrade_exit_codes() {
    let server = common::start(turnwise::Engine::in_memory(), Some(TOKEN)).await;
    let base = server.api.base.as_str();
    for (args, code) in [
        (&["instances", "upgrade", "--to", "v2"][..], 2),
        (
            &[
                "instances",
                "upgrade",
                "x",
                "--workflow",
                "order",
                "--to",
                "v2",
            ][..],
            2,
        ),
        (
            &["instances", "upgrade", "--workflow", "order", "--to", "v2"][..],
            2,
        ),
        (&["compat", "--workflow", "order"][..], 2),
        (
            &[
                "compat",
                "--baseline",
                "x",
                "--workflow",
                "order",
                "--to",
                "v2",
            ][..],
            2,
        ),
        (&["instances", "upgrade", "nope", "--to", "v2"][..], 3),
    ] {
        let run = turnwise(base, TOKEN, args).await;
        assert_eq!(run.code, code, "{args:?}: {run:#?}");
    }
    let run = turnwise(
        base,
        "wrong",
        &["compat", "--workflow", "order", "--to", "v2"],
    )
    .await;
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("--token"), "{run:#?}");
    // No instance of the type: nothing pinned.
    let run = turnwise(
        base,
        TOKEN,
        &["compat", "--workflow", "order", "--to", "v2"],
    )
    .await;
    assert!(
        run.text(0)
            .starts_with("order → v2: 0 instances checked, 0 already on v2"),
        "{run:#?}"
    );
}
