//! The `turnwise` client commands, run as a user runs them: the built binary against a server
//! this test starts, every subcommand, in tables and in `--json`, with each class of exit code.
//! The turns the commands look at are driven with the raw protocol over the `Http` backend.
//! `docs/operations.md` shows these same command lines.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Http};

/// Bounds every wait of these tests.
const PATIENCE: Duration = Duration::from_secs(60);

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Exit code 0, and stdout as JSON.
    #[track_caller]
    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "{self:#?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:#?}"))
    }

    /// Exit code 0, and stdout as text.
    #[track_caller]
    fn text(&self) -> &str {
        assert_eq!(self.code, 0, "{self:#?}");
        &self.stdout
    }

    /// This exit code, and the `--json` error printed on stderr.
    #[track_caller]
    fn failed(&self, code: i32) -> Value {
        assert_eq!(self.code, code, "{self:#?}");
        assert!(
            self.stdout.is_empty(),
            "a failure prints nothing on stdout: {self:#?}"
        );
        let e: Value = serde_json::from_str(self.stderr.trim())
            .unwrap_or_else(|e| panic!("stderr is not one JSON error ({e}): {self:#?}"));
        assert_eq!(e["error"]["exit_code"], code, "{self:#?}");
        e["error"].clone()
    }
}

/// `turnwise <args>` against `base`, with no `TURNWISE_*` variable but the URL (and the token
/// when given).
async fn turnwise(base: &str, token: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnwise"));
    cmd.args(args)
        .env("TURNWISE_URL", base)
        .env_remove("TURNWISE_API_TOKEN")
        .env_remove("TURNWISE_GRAPH")
        .env_remove("TURNWISE_STACK")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(t) = token {
        cmd.env("TURNWISE_API_TOKEN", t);
    }
    let out = tokio::time::timeout(PATIENCE, cmd.output())
        .await
        .expect("the command ends by itself")
        .expect("run the turnwise binary");
    Run {
        code: out.status.code().expect("an exit code, not a signal"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The counter's schemas: a message `{"add": integer}`, a signal `approve` of `{"by": string}`.
fn counter_schema() -> SchemaDocument {
    SchemaDocument {
        workflow_type: "counter".into(),
        version: "v1".into(),
        message: json!({"type": "object", "required": ["add"],
                        "properties": {"add": {"type": "integer"}}}),
        signals: BTreeMap::from([(
            "approve".to_owned(),
            json!({"type": "object", "required": ["by"],
                   "properties": {"by": {"type": "string"}}}),
        )]),
        state: json!({"type": "object"}),
        reply: json!({"type": "integer"}),
        manifest: None,
    }
}

async fn create(http: &Http, id: &str, workflow_type: &str) {
    http.create_instance(CreateInstanceRequest {
        id: id.into(),
        workflow_type: workflow_type.into(),
        version: "v1".into(),
        state: json!({"count": 0}),
        lease_ms: None,
        max_attempts: Some(3),
        on_exhausted: None,
    })
    .await
    .unwrap();
}

async fn send(http: &Http, id: &str, message_id: &str, message: Value) -> WorkflowTurn {
    http.send_message(MessageRequest {
        workflow_id: id.into(),
        id: message_id.into(),
        message,
        origin: None,
    })
    .await
    .unwrap()
}

/// Claim the ready counter turn (there must be one).
async fn claim(http: &Http) -> TurnTask {
    http.claim(ClaimRequest {
        worker: "cli-test".into(),
        workflows: vec![WorkflowRef::new("counter", "v1")],
        wait_ms: 5_000,
        include_execution_credential: None,
    })
    .await
    .unwrap()
    .task
    .expect("a ready turn to claim")
}

fn lease(task: &TurnTask) -> Lease {
    Lease {
        workflow_id: task.turn.workflow_id.clone(),
        turn: task.turn.number,
        token: task.token.clone(),
    }
}

async fn complete(http: &Http, task: &TurnTask, result: Value) {
    http.complete(CompleteRequest {
        lease: lease(task),
        state: json!({"count": result}),
        result,
        continuation: None,
        usage: Some(RunUsage {
            calls: Some(2),
            ..RunUsage::default()
        }),
        results: None,
    })
    .await
    .unwrap();
}

async fn fail(http: &Http, task: &TurnTask, retry_at_ms: Option<i64>) {
    http.fail(FailRequest {
        lease: lease(task),
        error: "the disk was full".into(),
        non_retryable: retry_at_ms.is_none(),
        retry_at_ms,
        usage: None,
        results: None,
        mismatch: None,
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_print_tables_and_the_apis_json() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    for (id, ty) in [("c-1", "counter"), ("c-2", "counter"), ("o-1", "other")] {
        create(&http, id, ty).await;
    }
    send(&http, "c-1", "m1", json!({"add": 2})).await;

    let all = turnwise(base, None, &["instances", "list", "--json"])
        .await
        .json();
    let ids: Vec<&str> = all["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c-1", "c-2", "o-1"]);
    assert!(all.get("next_after").is_none(), "{all}");

    let table = turnwise(base, None, &["instances", "list", "--type", "counter"]).await;
    let lines: Vec<&str> = table.text().lines().collect();
    assert_eq!(lines.len(), 3, "a header and two rows: {table:#?}");
    for (line, words) in lines.iter().zip([
        ["ID", "TYPE", "VERSION", "STATUS", "PENDING"],
        ["c-1", "counter", "v1", "queued", "1"],
        ["c-2", "counter", "v1", "idle", "0"],
    ]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[..5], words, "{table:#?}");
    }

    let queued = turnwise(
        base,
        None,
        &["instances", "list", "--status", "queued", "--json"],
    )
    .await
    .json();
    assert_eq!(queued["instances"].as_array().unwrap().len(), 1);
    assert_eq!(queued["instances"][0]["id"], "c-1");

    let first = turnwise(base, None, &["instances", "list", "--limit", "1", "--json"])
        .await
        .json();
    assert_eq!(first["instances"].as_array().unwrap().len(), 1);
    assert_eq!(first["next_after"], "c-1");
    let rest = turnwise(
        base,
        None,
        &["instances", "list", "--after", "c-1", "--json"],
    )
    .await
    .json();
    assert_eq!(rest["instances"][0]["id"], "c-2");
    assert_eq!(rest["instances"][1]["id"], "o-1");

    let inst = turnwise(base, None, &["instances", "get", "c-1", "--json"])
        .await
        .json();
    assert_eq!(inst["id"], "c-1");
    assert_eq!(inst["workflow_type"], "counter");
    assert_eq!(inst["status"], "queued");
    assert_eq!(inst["current_turn"]["message_id"], "m1");
    let text = turnwise(base, None, &["instances", "get", "c-1"]).await;
    assert!(text.text().contains("status:"), "{text:#?}");
    assert!(text.text().contains("counter v1"), "{text:#?}");
    assert!(text.text().contains(r#"{"count":0}"#), "{text:#?}");

    let inbox = turnwise(base, None, &["inbox", "c-1", "--payloads", "--json"])
        .await
        .json();
    assert_eq!(inbox["pending_messages"], 1);
    assert_eq!(inbox["messages"][0]["message_id"], "m1");
    assert_eq!(inbox["messages"][0]["message"], json!({"add": 2}));
    let text = turnwise(base, None, &["inbox", "c-1"]).await;
    assert!(
        text.text()
            .starts_with("c-1 (counter v1): queued, 1 pending"),
        "{text:#?}"
    );
    assert!(text
        .text()
        .lines()
        .any(|l| l.starts_with("1 ") && l.contains("m1")));

    // Turn 1 runs and completes; turn 2 waits behind nothing.
    let task = claim(&http).await;
    complete(&http, &task, json!(2)).await;

    let history = turnwise(base, None, &["history", "c-1", "--json"])
        .await
        .json();
    assert_eq!(history["turns"][0]["number"], 1);
    assert_eq!(history["turns"][0]["status"], "completed");
    assert_eq!(history["turns"][0]["result"], 2);
    let later = turnwise(base, None, &["history", "c-1", "--after", "1", "--json"])
        .await
        .json();
    assert_eq!(later["turns"], json!([]));
    let text = turnwise(base, None, &["history", "c-1"]).await;
    assert!(
        text.text().lines().next().unwrap().starts_with("TURN"),
        "{text:#?}"
    );
    assert!(text.text().contains("completed"), "{text:#?}");

    let turn = turnwise(base, None, &["turn", "c-1", "1", "--json"])
        .await
        .json();
    assert_eq!(turn["number"], 1);
    assert_eq!(turn["message"], json!({"add": 2}));
    assert_eq!(turn["state_after"], json!({"count": 2}));
    let text = turnwise(base, None, &["turn", "c-1", "1"]).await;
    assert!(text.text().contains("worker:"), "{text:#?}");
    assert!(text.text().contains("cli-test"), "{text:#?}");

    let runs = turnwise(base, None, &["runs", "c-1", "--json"])
        .await
        .json();
    assert_eq!(runs["workflow_id"], "c-1");
    let run = &runs["runs"][0];
    assert_eq!(run["turn"], 1);
    assert_eq!(run["attempt"], 1);
    assert_eq!(run["outcome"], "completed");
    assert_eq!(run["usage"]["calls"], 2);
    assert!(run["id"].as_str().unwrap().ends_with("-c-1-1"), "{runs}");
    let text = turnwise(base, None, &["runs", "c-1"]).await;
    assert!(text.text().starts_with("RUN"), "{text:#?}");
    assert!(text.text().contains("2 calls"), "{text:#?}");
    assert_eq!(
        turnwise(base, None, &["runs", "c-2"]).await.text(),
        "no runs\n"
    );

    // --graph and --stack address another namespace.
    let staged = http.with_graph("main").with_stack("dev");
    create(&staged, "s-1", "counter").await;
    let there = turnwise(
        base,
        None,
        &[
            "--graph",
            "main",
            "--stack",
            "dev",
            "instances",
            "list",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(there["instances"].as_array().unwrap().len(), 1);
    assert_eq!(there["instances"][0]["id"], "s-1");
    turnwise(base, None, &["instances", "get", "s-1", "--json"])
        .await
        .failed(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_operator_actions() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    create(&http, "c-1", "counter").await;

    let sent = turnwise(
        base,
        None,
        &[
            "send",
            "c-1",
            "--id",
            "m1",
            "--message",
            r#"{"add": 2}"#,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(sent["number"], 1);
    assert_eq!(sent["status"], "queued");
    assert_eq!(sent["origin"]["kind"], "manual");
    // The same id and message again is the same turn.
    let again = turnwise(
        base,
        None,
        &["send", "c-1", "--id", "m1", "--message", r#"{"add": 2}"#],
    )
    .await;
    assert!(again.text().contains("turn 1 of c-1"), "{again:#?}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m2.json");
    std::fs::write(&file, r#"{"add": 40}"#).unwrap();
    let from_file = turnwise(
        base,
        None,
        &[
            "send",
            "c-1",
            "--id",
            "m2",
            "--message-file",
            file.to_str().unwrap(),
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(from_file["number"], 2);
    assert_eq!(from_file["message"], json!({"add": 40}));

    let paused = turnwise(base, None, &["pause", "c-1", "--json"])
        .await
        .json();
    assert_eq!(paused["status"], "paused");
    let text = turnwise(base, None, &["resume", "c-1"]).await;
    assert!(text.text().starts_with("done: resume c-1"), "{text:#?}");
    assert!(text.text().contains("queued"), "{text:#?}");

    // Turn 1 fails for good: retry runs it again, and when it fails again skip moves on.
    let task = claim(&http).await;
    fail(&http, &task, None).await;
    let inst = turnwise(base, None, &["instances", "get", "c-1", "--json"])
        .await
        .json();
    assert_eq!(inst["status"], "failed");
    let retried = turnwise(base, None, &["retry", "c-1", "--turn", "1", "--json"])
        .await
        .json();
    assert_eq!(retried["status"], "queued");
    let task = claim(&http).await;
    fail(&http, &task, None).await;
    let skipped = turnwise(base, None, &["skip", "c-1", "--turn", "1", "--json"])
        .await
        .json();
    assert_eq!(skipped["current_turn"]["number"], 2);
    let history = turnwise(base, None, &["history", "c-1"]).await;
    let row = history.text().lines().nth(1).unwrap();
    assert!(row.starts_with("1 "), "{history:#?}");
    assert!(row.contains("failed"), "{history:#?}");
    assert!(row.ends_with("error: the disk was full"), "{history:#?}");

    // Turn 2 asks to be retried in an hour: wake makes it ready now.
    let task = claim(&http).await;
    assert_eq!(task.turn.number, 2);
    let in_an_hour = task.turn.updated_at_ms + 3_600_000;
    fail(&http, &task, Some(in_an_hour)).await;
    let waiting = turnwise(base, None, &["turn", "c-1", "2", "--json"])
        .await
        .json();
    assert_eq!(waiting["status"], "waiting");
    let woken = turnwise(base, None, &["wake", "c-1", "--json"])
        .await
        .json();
    assert_eq!(woken["status"], "queued");

    // A signal for turn 2, then turn 2 cancelled.
    let signalled = turnwise(
        base,
        None,
        &[
            "signal",
            "c-1",
            "--turn",
            "2",
            "--name",
            "approve",
            "--id",
            "e1",
            "--value",
            r#"{"by": "ann"}"#,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(signalled["signals"][0]["id"], "e1");
    assert_eq!(signalled["signals"][0]["value"], json!({"by": "ann"}));
    let cancelled = turnwise(base, None, &["cancel", "c-1", "--turn", "2", "--json"])
        .await
        .json();
    assert_eq!(cancelled["pending_messages"], 0);
    let turn = turnwise(base, None, &["turn", "c-1", "2", "--json"])
        .await
        .json();
    assert_eq!(turn["status"], "cancelled");

    let deleted = turnwise(base, None, &["delete", "c-1", "--json"])
        .await
        .json();
    assert_eq!(deleted, json!({"deleted": true}));
    let text = turnwise(base, None, &["delete", "c-1"]).await;
    assert_eq!(text.text(), "no instance c-1: nothing to delete\n");
    turnwise(base, None, &["instances", "get", "c-1", "--json"])
        .await
        .failed(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_create_then_send_then_show() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();

    // A message to an instance that is not there points at the command that creates it.
    let missing = turnwise(
        base,
        None,
        &["send", "c-1", "--id", "m1", "--message", r#"{"add": 2}"#],
    )
    .await;
    assert_eq!(missing.code, 3, "{missing:#?}");
    assert!(
        missing.stderr.starts_with(
            "turnwise: instance `c-1` was not found; create it first: \
             turnwise instances create c-1 --type TYPE --version VERSION --state JSON"
        ),
        "{missing:#?}"
    );

    // The table: what was done, then the instance's status, inbox, creation time and state.
    let created = turnwise(
        base,
        None,
        &[
            "instances",
            "create",
            "c-1",
            "--type",
            "counter",
            "--version",
            "v1",
            "--state",
            r#"{"count": 0}"#,
        ],
    )
    .await;
    let lines: Vec<&str> = created.text().lines().collect();
    assert_eq!(lines.len(), 5, "{created:#?}");
    assert_eq!(lines[0], "done: create c-1 (counter v1)");
    assert_eq!(lines[1], "status:   idle");
    assert_eq!(lines[2], "pending:  0");
    assert!(lines[3].starts_with("created:  20"), "{created:#?}");
    assert_eq!(lines[4], r#"state:    {"count":0}"#);

    // An identical repeat answers the existing instance, in `--json` the route's instance: the
    // shape `instances get --json` prints. Omitted settings are the server's defaults.
    let args = [
        "instances",
        "create",
        "c-1",
        "--type",
        "counter",
        "--version",
        "v1",
        "--state",
        r#"{"count": 0}"#,
        "--json",
    ];
    let repeat = turnwise(base, None, &args).await.json();
    let shown = turnwise(base, None, &["instances", "get", "c-1", "--json"])
        .await
        .json();
    assert_eq!(repeat, shown);
    assert_eq!(repeat["id"], "c-1");
    assert_eq!(repeat["workflow_type"], "counter");
    assert_eq!(repeat["version"], "v1");
    assert_eq!(repeat["state"], json!({"count": 0}));
    assert_eq!(repeat["status"], "idle");
    assert_eq!(repeat["lease_ms"], 60_000);
    assert_eq!(repeat["max_attempts"], 3);
    assert_eq!(repeat["on_exhausted"], "block");
    let listed = http
        .list_instances(ListInstancesQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.instances.len(), 1, "one instance: {listed:?}");

    // The same id as another workflow type is a conflict, and nothing changes.
    let e = turnwise(
        base,
        None,
        &[
            "instances",
            "create",
            "c-1",
            "--type",
            "other",
            "--version",
            "v1",
            "--json",
        ],
    )
    .await
    .failed(4);
    assert_eq!(e["kind"], "conflict");
    assert_eq!(e["code"], "conflict");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("already exists as counter v1"),
        "{message}"
    );
    assert_eq!(
        http.get_instance("c-1").await.unwrap().workflow_type,
        "counter"
    );

    // Create, then send, then show.
    let sent = turnwise(
        base,
        None,
        &[
            "send",
            "c-1",
            "--id",
            "m1",
            "--message",
            r#"{"add": 2}"#,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(sent["workflow_id"], "c-1");
    assert_eq!(sent["number"], 1);
    let shown = turnwise(base, None, &["instances", "get", "c-1"]).await;
    let text = shown.text();
    assert!(text.contains("status:           queued"), "{shown:#?}");
    assert!(
        text.contains("current turn:     1 (queued, attempt 0, message m1)"),
        "{shown:#?}"
    );
    assert!(
        text.contains(r#"state:            {"count":0}"#),
        "{shown:#?}"
    );

    // The settings, and the state from a file; without a state it is `null`.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    std::fs::write(&file, r#"{"count": 40}"#).unwrap();
    let set = turnwise(
        base,
        None,
        &[
            "instances",
            "create",
            "c-2",
            "--type",
            "counter",
            "--version",
            "v1",
            "--state-file",
            file.to_str().unwrap(),
            "--lease-ms",
            "5000",
            "--max-attempts",
            "7",
            "--on-exhausted",
            "skip",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(set["state"], json!({"count": 40}));
    assert_eq!(set["lease_ms"], 5_000);
    assert_eq!(set["max_attempts"], 7);
    assert_eq!(set["on_exhausted"], "skip");
    let bare = turnwise(
        base,
        None,
        &[
            "instances",
            "create",
            "c-3",
            "--type",
            "counter",
            "--version",
            "v1",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(bare["state"], Value::Null);

    // Bad input is exit 2: JSON that does not parse (refused here), a setting out of range
    // (refused by the server), a value clap does not know.
    let create_c4 = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = vec![
            "instances",
            "create",
            "c-4",
            "--type",
            "counter",
            "--version",
            "v1",
        ];
        args.extend_from_slice(extra);
        args
    };
    let e = turnwise(base, None, &create_c4(&["--state", "{nope", "--json"]))
        .await
        .failed(2);
    assert_eq!(e["param"], "state");
    let e = turnwise(base, None, &create_c4(&["--max-attempts", "500", "--json"]))
        .await
        .failed(2);
    assert_eq!(e["param"], "max_attempts");
    let usage = turnwise(base, None, &create_c4(&["--on-exhausted", "retry"])).await;
    assert_eq!(usage.code, 2, "{usage:#?}");
    assert!(
        usage.stderr.contains("[possible values: block, skip]"),
        "{usage:#?}"
    );
    turnwise(base, None, &["instances", "get", "c-4", "--json"])
        .await
        .failed(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_create_checks_the_state_against_its_schema_before_sending() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    let mut tally = counter_schema();
    tally.workflow_type = "tally".into();
    tally.state = json!({"type": "object", "required": ["count"],
                         "properties": {"count": {"type": "integer"}}});
    http.register_schema(&tally).await.unwrap();
    let create = |state: &'static str| {
        [
            "instances",
            "create",
            "t-1",
            "--type",
            "tally",
            "--version",
            "v1",
            "--state",
            state,
            "--json",
        ]
    };

    let e = turnwise(base, None, &create(r#"{"count": "zero"}"#))
        .await
        .failed(2);
    assert_eq!(e["kind"], "invalid");
    assert_eq!(e["param"], "state/count");
    // Refused by the CLI, not the server: no server code, and nothing was created.
    assert_eq!(e["code"], Value::Null, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "`state` does not match the state schema of tally v1: at `/count`: \"zero\" is not \
             of type \"integer\"; nothing was sent"
        ),
        "{message}"
    );
    let nothing = http.get_instance("t-1").await.unwrap_err();
    assert!(
        matches!(nothing, turnwise::Error::NotFound { .. }),
        "{nothing:?}"
    );
    // No state is `null`, which the schema refuses too.
    let text = turnwise(
        base,
        None,
        &[
            "instances",
            "create",
            "t-1",
            "--type",
            "tally",
            "--version",
            "v1",
        ],
    )
    .await;
    assert_eq!(text.code, 2, "{text:#?}");
    assert!(
        text.stderr.contains("the state schema of tally v1"),
        "{text:#?}"
    );
    assert!(
        http.get_instance("t-1").await.is_err(),
        "nothing was created"
    );

    // A state that matches is sent; a version with no schema registered is not checked.
    let made = turnwise(base, None, &create(r#"{"count": 1}"#))
        .await
        .json();
    assert_eq!(made["state"], json!({"count": 1}));
    let unchecked = turnwise(
        base,
        None,
        &[
            "instances",
            "create",
            "t-2",
            "--type",
            "tally",
            "--version",
            "v2",
            "--state",
            r#"{"count": "zero"}"#,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(unchecked["state"], json!({"count": "zero"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_tell_the_failures_apart() {
    let server = common::start(turnwise::Engine::in_memory(), Some("s3cret")).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, Some("s3cret".into())).unwrap();
    create(&http, "c-1", "counter").await;
    send(&http, "c-1", "m1", json!({"add": 1})).await;
    let token = Some("s3cret");

    // 0: done.
    turnwise(base, token, &["instances", "get", "c-1", "--json"])
        .await
        .json();

    // 3: not found, an instance and a turn.
    let e = turnwise(base, token, &["instances", "get", "nope", "--json"])
        .await
        .failed(3);
    assert_eq!(e["kind"], "not_found");
    assert_eq!(e["code"], "not_found");
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    turnwise(base, token, &["turn", "c-1", "9", "--json"])
        .await
        .failed(3);
    let text = turnwise(base, token, &["history", "nope"]).await;
    assert_eq!(text.code, 3, "{text:#?}");
    assert!(text.stderr.starts_with("turnwise: "), "{text:#?}");

    // 4: conflict, the same message id with another message.
    let e = turnwise(
        base,
        token,
        &[
            "send",
            "c-1",
            "--id",
            "m1",
            "--message",
            r#"{"add": 5}"#,
            "--json",
        ],
    )
    .await
    .failed(4);
    assert_eq!(e["kind"], "conflict");

    // 5: authentication, a wrong token and none.
    let e = turnwise(base, Some("wrong"), &["instances", "list", "--json"])
        .await
        .failed(5);
    assert_eq!(e["kind"], "auth");
    assert!(e["message"].as_str().unwrap().contains("--token"), "{e}");
    turnwise(base, None, &["instances", "list", "--json"])
        .await
        .failed(5);
    // The flag beats the environment.
    turnwise(
        base,
        Some("wrong"),
        &["--token", "s3cret", "instances", "list", "--json"],
    )
    .await
    .json();

    // 6: transport, a port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let url = format!("http://{closed}");
    let e = turnwise(
        &url,
        token,
        &["--retries", "0", "instances", "list", "--json"],
    )
    .await
    .failed(6);
    assert_eq!(e["kind"], "unavailable");
    assert!(e["message"].as_str().unwrap().contains(&url), "{e}");

    // 2: invalid input, refused by the CLI (bad JSON, a bad URL, a missing flag) or by the
    // server (an id outside the identifier rule).
    let e = turnwise(
        base,
        token,
        &[
            "send",
            "c-1",
            "--id",
            "m2",
            "--message",
            "{not json",
            "--json",
        ],
    )
    .await
    .failed(2);
    assert_eq!(e["param"], "message");
    turnwise(
        base,
        token,
        &["--url", "ftp://x", "instances", "list", "--json"],
    )
    .await
    .failed(2);
    let usage = turnwise(base, token, &["retry", "c-1"]).await;
    assert_eq!(usage.code, 2, "clap's usage error: {usage:#?}");
    assert!(usage.stderr.contains("--turn"), "{usage:#?}");
    let e = turnwise(base, token, &["instances", "get", "no spaces", "--json"])
        .await
        .failed(2);
    assert_eq!(e["code"], "invalid_request");
    // `serve` does not take the client flags.
    let serve = turnwise(base, token, &["serve", "--db", "x.db", "--token", "t"]).await;
    assert_eq!(serve.code, 2, "{serve:#?}");
    assert!(serve.stderr.contains("--api-token"), "{serve:#?}");

    // 1: a watched turn that failed.
    let task = http
        .claim(ClaimRequest {
            worker: "cli-test".into(),
            workflows: vec![WorkflowRef::new("counter", "v1")],
            wait_ms: 5_000,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
        .unwrap();
    fail(&http, &task, None).await;
    let e = turnwise(base, token, &["watch", "c-1", "--json"]).await;
    assert_eq!(e.code, 1, "{e:#?}");
    let last: Value = serde_json::from_str(e.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["status"], "failed");

    // --help documents the codes.
    let help = turnwise(base, None, &["--help"]).await;
    for line in [
        "3  not found",
        "4  conflict",
        "5  authentication",
        "6  transport",
    ] {
        assert!(help.text().contains(line), "{line}: {help:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_and_schema_errors_caught_before_sending() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    create(&http, "c-1", "counter").await;
    assert_eq!(
        turnwise(base, None, &["schemas", "list"]).await.text(),
        "no schemas registered\n"
    );
    http.register_schema(&counter_schema()).await.unwrap();

    let e = turnwise(
        base,
        None,
        &[
            "send",
            "c-1",
            "--id",
            "bad",
            "--message",
            r#"{"add": "two"}"#,
            "--json",
        ],
    )
    .await
    .failed(2);
    assert_eq!(e["param"], "message/add");
    // Refused by the CLI, not the server: no server code, and nothing was sent.
    assert_eq!(e["code"], Value::Null, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("`/add`"), "{message}");
    assert!(message.contains("nothing was sent"), "{message}");
    let inbox = http
        .instance_inbox(InboxQuery {
            id: "c-1".into(),
            ..InboxQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(inbox.pending_messages, 0, "the server saw no message");
    let text = turnwise(
        base,
        None,
        &["send", "c-1", "--id", "bad", "--message", r#"{}"#],
    )
    .await;
    assert_eq!(text.code, 2, "{text:#?}");
    assert!(
        text.stderr.contains("\"add\" is a required property"),
        "{text:#?}"
    );

    turnwise(
        base,
        None,
        &[
            "send",
            "c-1",
            "--id",
            "good",
            "--message",
            r#"{"add": 2}"#,
            "--json",
        ],
    )
    .await
    .json();
    let e = turnwise(
        base,
        None,
        &[
            "signal",
            "c-1",
            "--turn",
            "1",
            "--name",
            "approve",
            "--id",
            "e1",
            "--value",
            r#"{"by": 3}"#,
            "--json",
        ],
    )
    .await
    .failed(2);
    assert_eq!(e["param"], "value/by");
    assert_eq!(e["code"], Value::Null);
    let turn = http
        .turn(TurnQuery {
            id: "c-1".into(),
            turn: 1,
        })
        .await
        .unwrap();
    assert!(
        turn.signals.as_ref().is_none_or(|s| s.is_empty()),
        "the server saw no signal: {turn:?}"
    );
    // A name the registered schema does not declare: the server refuses it, listing the
    // declared names, and the command fails with its message.
    let e = turnwise(
        base,
        None,
        &[
            "signal", "c-1", "--turn", "1", "--name", "aprove", "--id", "e2", "--value", "3",
            "--json",
        ],
    )
    .await
    .failed(2);
    assert_eq!(
        (e["param"].as_str(), e["code"].as_str()),
        (Some("name"), Some("invalid_request")),
        "{e}"
    );
    let text = turnwise(
        base,
        None,
        &[
            "signal", "c-1", "--turn", "1", "--name", "aprove", "--id", "e2", "--value", "3",
        ],
    )
    .await;
    assert_ne!(text.code, 0, "{text:#?}");
    assert!(
        text.stderr.contains("signal `aprove` is not declared")
            && text.stderr.contains("it declares `approve`"),
        "{text:#?}"
    );
    let turn = http
        .turn(TurnQuery {
            id: "c-1".into(),
            turn: 1,
        })
        .await
        .unwrap();
    assert!(
        turn.signals.as_ref().is_none_or(|s| s.is_empty()),
        "the server kept no signal: {turn:?}"
    );

    // The schema reads.
    let table = turnwise(base, None, &["schemas", "list"]).await;
    let row: Vec<&str> = table
        .text()
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..4],
        ["counter", "v1", "checked", "approve"],
        "{table:#?}"
    );
    let listed = turnwise(
        base,
        None,
        &["schemas", "list", "--type", "counter", "--json"],
    )
    .await
    .json();
    assert_eq!(listed["schemas"][0]["workflow_type"], "counter");
    assert!(listed["schemas"][0]["registered_at_ms"].is_i64());
    assert_eq!(
        turnwise(
            base,
            None,
            &["schemas", "list", "--type", "other", "--json"]
        )
        .await
        .json(),
        json!({"schemas": []})
    );
    let doc = turnwise(base, None, &["schemas", "get", "counter", "v1", "--json"])
        .await
        .json();
    assert_eq!(doc["message"], counter_schema().message);
    let text = turnwise(base, None, &["schemas", "get", "counter", "v1"]).await;
    assert!(text.text().contains("signal approve:"), "{text:#?}");
    turnwise(base, None, &["schemas", "get", "counter", "v9", "--json"])
        .await
        .failed(3);

    let registered = serde_json::to_value(counter_schema()).unwrap();
    let exported = turnwise(base, None, &["schemas", "export"]).await.json();
    assert_eq!(exported, json!([registered]));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("schemas");
    let text = turnwise(
        base,
        None,
        &["schemas", "export", "--dir", out.to_str().unwrap()],
    )
    .await;
    assert!(text.text().starts_with("wrote "), "{text:#?}");
    let file: Value =
        serde_json::from_slice(&std::fs::read(out.join("counter-v1.json")).unwrap()).unwrap();
    assert_eq!(file, registered);
}

/// `watch` on `id` with its stdout read line by line; the lines arrive on the channel.
fn spawn_watch(
    base: &str,
    args: &[&str],
) -> (common::ServerProcess, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .arg("watch")
        .args(args)
        .env("TURNWISE_URL", base)
        .env_remove("TURNWISE_API_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (common::ServerProcess(child), rx)
}

/// The next line from `watch` that contains `text`, with the lines before it.
fn wait_for_line(rx: &std::sync::mpsc::Receiver<String>, text: &str) -> (String, Vec<String>) {
    let mut before = Vec::new();
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) if line.contains(text) => return (line, before),
            Ok(line) => before.push(line),
            Err(e) => panic!("no line with {text:?} ({e}); saw {before:#?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_follows_a_turn_to_its_end() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let http = Http::connect(base.as_str(), None).unwrap();
    create(&http, "w-1", "counter").await;
    send(&http, "w-1", "m1", json!({"add": 3})).await;

    let (mut watch, lines) = spawn_watch(&base, &["w-1", "--timeout", "120"]);
    let (first, _) = wait_for_line(&lines, "turn 1 of w-1");
    assert!(first.contains("queued"), "{first}");

    let task = claim(&http).await;
    http.operation(OperationRequest {
        lease: lease(&task),
        position: 0,
        key: "fetch".into(),
        kind: OperationKind::Step,
        timeout_ms: 60_000,
        heartbeat_timeout_ms: None,
    })
    .await
    .unwrap();
    http.progress(ProgressRequest {
        lease: lease(&task),
        key: "fetch".into(),
        sequence: 1,
        details: json!({"phase": "reading pages", "done": 3, "total": 10, "unit": "pages"}),
        checkpoint: Value::Null,
    })
    .await
    .unwrap();
    let (progress, _) = wait_for_line(&lines, "3/10 pages");
    assert!(progress.contains("running"), "{progress}");
    assert!(progress.contains("step fetch"), "{progress}");
    assert!(
        progress.contains("[######--------------] 3/10 pages 30%  reading pages"),
        "{progress}"
    );

    complete(&http, &task, json!(3)).await;
    let (done, _) = wait_for_line(&lines, "completed");
    assert!(done.starts_with("turn 1 of w-1: completed"), "{done}");
    let (outcome, _) = wait_for_line(&lines, "result 3");
    assert!(outcome.starts_with("completed in "), "{outcome}");
    let status = common::wait_exit(&mut watch.0, PATIENCE).expect("watch ends with the turn");
    assert_eq!(status.code(), Some(0));

    // --json: one turn per line, the last one completed.
    send(&http, "w-1", "m2", json!({"add": 1})).await;
    let (mut watch, lines) = spawn_watch(&base, &["w-1", "--turn", "2", "--json"]);
    let (first, _) = wait_for_line(&lines, "\"number\":2");
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["status"], "queued");
    let task = claim(&http).await;
    complete(&http, &task, json!(4)).await;
    let (last, _) = wait_for_line(&lines, "\"completed\"");
    let last: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["result"], 4);
    let status = common::wait_exit(&mut watch.0, PATIENCE).expect("watch ends with the turn");
    assert_eq!(status.code(), Some(0));

    // Nothing to follow: an idle instance.
    let idle = turnwise(&base, None, &["watch", "w-1"]).await;
    assert_eq!(idle.text(), "w-1 is idle: no unfinished turn to watch\n");
    // A turn nobody claims, past the timeout: exit code 7.
    send(&http, "w-1", "m3", json!({"add": 1})).await;
    let late = turnwise(&base, None, &["watch", "w-1", "--timeout", "1", "--json"]).await;
    assert_eq!(late.code, 7, "{late:#?}");
    let e: Value = serde_json::from_str(late.stderr.trim()).unwrap();
    assert_eq!(e["error"]["kind"], "timed_out");
}

/// `schedules list|get|pause|resume|delete` over schedules made with the `Http` backend; the
/// server checks a schedule's message against the registered schema as it checks a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_commands() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    http.register_schema(&counter_schema()).await.unwrap();
    create(&http, "c-1", "counter").await;
    create(&http, "c-2", "counter").await;
    let schedule =
        |id: &str, name: &str, spec: ScheduleSpec, message: Value| CreateScheduleRequest {
            workflow_id: id.into(),
            name: name.into(),
            spec,
            message,
            catch_up: CatchUp::All,
        };
    let bad = http
        .create_schedule(schedule(
            "c-1",
            "bad",
            ScheduleSpec::cron("0 3 * * *"),
            json!({"add": "x"}),
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), "schema_validation_failed", "{bad}");
    http.create_schedule(schedule(
        "c-1",
        "nightly",
        ScheduleSpec::cron("0 3 * * *"),
        json!({"add": 1}),
    ))
    .await
    .unwrap();
    http.create_schedule(schedule(
        "c-2",
        "tick",
        ScheduleSpec::every(Duration::from_secs(90)),
        json!({"add": 2}),
    ))
    .await
    .unwrap();

    let all = turnwise(base, None, &["schedules", "list", "--json"])
        .await
        .json();
    let names: Vec<&str> = all["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nightly", "tick"]);
    let one = turnwise(base, None, &["schedules", "list", "--id", "c-2", "--json"])
        .await
        .json();
    assert_eq!(one["schedules"].as_array().unwrap().len(), 1);
    let table = turnwise(base, None, &["schedules", "list"]).await;
    let lines: Vec<&str> = table.text().lines().collect();
    assert_eq!(lines.len(), 3, "a header and two rows: {table:#?}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["c-1", "nightly", "cron", "0", "3", "*"],
        "{table:#?}"
    );
    let cells: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["c-2", "tick", "every", "1m30s", "all", "active"],
        "{table:#?}"
    );

    let got = turnwise(
        base,
        None,
        &["schedules", "get", "c-1", "nightly", "--json"],
    )
    .await
    .json();
    assert_eq!(got["spec"], json!({"kind": "cron", "expr": "0 3 * * *"}));
    assert_eq!(got["message"], json!({"add": 1}));
    let text = turnwise(base, None, &["schedules", "get", "c-1", "nightly"]).await;
    assert!(text.text().contains("cron 0 3 * * *"), "{text:#?}");

    let paused = turnwise(base, None, &["schedules", "pause", "c-2", "tick", "--json"])
        .await
        .json();
    assert_eq!(paused["paused"], true);
    assert!(http.get_schedule("c-2", "tick").await.unwrap().paused);
    let resumed = turnwise(base, None, &["schedules", "resume", "c-2", "tick"]).await;
    assert!(resumed.text().contains("active"), "{resumed:#?}");
    let deleted = turnwise(
        base,
        None,
        &["schedules", "delete", "c-2", "tick", "--json"],
    )
    .await
    .json();
    assert_eq!(deleted, json!({"deleted": true}));
    let again = turnwise(base, None, &["schedules", "delete", "c-2", "tick"]).await;
    assert!(again.text().contains("nothing deleted"), "{again:#?}");
    let missing = turnwise(base, None, &["schedules", "get", "c-2", "tick", "--json"])
        .await
        .failed(3);
    assert_eq!(missing["code"], "not_found", "{missing}");
    let missing = turnwise(base, None, &["schedules", "pause", "c-9", "x", "--json"])
        .await
        .failed(3);
    assert_eq!(missing["code"], "not_found", "{missing}");
}

/// `manifest`: the replay manifests workers registered with their schemas are written as the
/// files a crate commits; a manifest of another workflow than its document is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_writes_the_registered_replay_manifests() {
    use turnwise::manifest::{files, Call, CallKind, Manifest, Node};
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("manifests");
    let out_arg = out.to_str().unwrap();
    let text = turnwise(base, None, &["manifest", "--out", out_arg]).await;
    assert!(
        text.text().starts_with("no replay manifests registered"),
        "{text:#?}"
    );

    let manifest = Manifest::new(
        "counter",
        "v1",
        Node::Seq(vec![Node::Call(Call::new(
            CallKind::Step,
            "add",
            "src/counter.rs:9",
        ))]),
    );
    let mut doc = counter_schema();
    doc.manifest = Some(manifest.clone());
    http.register_schema(&doc).await.unwrap();
    let text = turnwise(base, None, &["manifest", "--out", out_arg]).await;
    assert!(text.text().contains("1 manifest in"), "{text:#?}");
    assert_eq!(
        std::fs::read_to_string(out.join("counter.v1.json")).unwrap(),
        manifest.to_canonical_json()
    );
    files::check(&out, [manifest.clone()]).unwrap();
    // Unchanged: nothing written again.
    let again = turnwise(base, None, &["manifest", "--out", out_arg, "--json"])
        .await
        .json();
    assert_eq!(again["manifests"], 1);
    assert_eq!(again["written"], json!([]));

    let mut wrong = counter_schema();
    wrong.version = "v2".into();
    wrong.manifest = Some(manifest);
    let e = http.register_schema(&wrong).await.unwrap_err();
    assert_eq!(e.param(), Some("manifest"), "{e}");
    assert!(
        e.to_string()
            .contains("register each version's own manifest"),
        "{e}"
    );
}

/// Suspend the ready counter turn as a worker that met a replay mismatch: it saved step
/// `add` and sleep `nap`, and its code now calls step `check` at position 1.
async fn suspend(http: &Http) {
    use turnwise::manifest::grammar::Saved;
    use turnwise::manifest::CallKind;
    let task = claim(http).await;
    let l = lease(&task);
    http.checkpoint(CheckpointRequest {
        lease: l.clone(),
        position: 0,
        key: "add".into(),
        kind: CheckpointKind::Step,
        output: json!(2),
        delay_ms: None,
    })
    .await
    .unwrap();
    http.fail(FailRequest {
        lease: l,
        error: "ReplayMismatch: the code changed".into(),
        non_retryable: false,
        retry_at_ms: None,
        usage: None,
        results: None,
        mismatch: Some(MismatchReport {
            version: "v1".into(),
            position: 1,
            saved: vec![Saved::new(CallKind::Step, "add")],
            found: Some(Saved::new(CallKind::Step, "check")),
            at: Some("src/counter.rs:27".into()),
            message: "position 1: the handler now calls step `check`".into(),
        }),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_turn_shows_its_report_and_is_restarted_or_forked() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    create(&http, "c-1", "counter").await;
    send(&http, "c-1", "m1", json!({"add": 2})).await;
    send(&http, "c-1", "m2", json!({"add": 3})).await;
    suspend(&http).await;

    let shown = turnwise(base, None, &["instances", "get", "c-1"]).await;
    let text = shown.text();
    // The value printed after `key:` on its own line.
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no `{key}:` line in:\n{text}"))
    };
    assert_eq!(field("status"), "suspended");
    assert_eq!(field("version"), "v1");
    assert_eq!(field("diverged at"), "position 1");
    assert_eq!(field("code called"), "step `check`");
    assert_eq!(field("at"), "src/counter.rs:27");
    for needle in [
        "turn 1 is suspended by a replay mismatch",
        "step `add`  replayed",
        "instances restart c-1 1 --from last-accepted|scratch",
        "instances fork c-1 NEW_ID",
    ] {
        assert!(text.contains(needle), "`{needle}` in:\n{text}");
    }
    let events = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("suspend"))
        .unwrap_or_else(|| panic!("the suspend event in:\n{text}"));
    assert!(events.contains("position 1"), "{events}");
    let json = turnwise(base, None, &["instances", "get", "c-1", "--json"])
        .await
        .json();
    assert_eq!(json["current_turn"]["mismatch"]["at"], "src/counter.rs:27");
    assert_eq!(json["events"][0]["action"], "suspend");

    // Refused when the turn is not suspended: exit 4, the server's code.
    let refused = turnwise(
        base,
        None,
        &[
            "instances",
            "restart",
            "c-1",
            "2",
            "--from",
            "scratch",
            "--json",
        ],
    )
    .await;
    let e = refused.failed(4);
    assert_eq!(e["code"], "turn_not_suspended", "{refused:#?}");

    let fork = turnwise(
        base,
        None,
        &["instances", "fork", "c-1", "c-1b", "--by", "ops"],
    )
    .await;
    assert!(
        fork.text().contains("done: fork c-1 (turn 1) to c-1b"),
        "{fork:#?}"
    );
    let forked = http.get_instance("c-1b").await.unwrap();
    assert_eq!((forked.pending_messages, forked.events.len()), (2, 1));

    let args = [
        "instances",
        "restart",
        "c-1",
        "1",
        "--from",
        "last-accepted",
        "--by",
        "ops",
    ];
    let restarted = turnwise(base, None, &args).await;
    let text = restarted.text();
    assert!(
        text.contains("done: restart turn 1 of c-1 from last_accepted")
            && text.contains("keeping 1 saved step(s)")
            && text.contains("ops"),
        "{restarted:#?}"
    );
    let repeat = turnwise(base, None, &[&args[..], &["--json"]].concat())
        .await
        .json();
    assert_eq!(
        repeat["event"]["by"], "ops",
        "an exact repeat answers the same"
    );
    let inst = http.get_instance("c-1").await.unwrap();
    let actions: Vec<&str> = inst.events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["suspend", "fork", "restart_turn"]);
    let t = http
        .turn(TurnQuery {
            id: "c-1".into(),
            turn: 1,
        })
        .await
        .unwrap();
    assert_eq!((t.status, t.steps.len()), (TurnStatus::Queued, 1));
}

/// `turns export`: a turn's saved record, on stdout or into a file, as `turnwise::replay`
/// reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_export_writes_a_turns_saved_record() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.as_str();
    let http = Http::connect(base, None).unwrap();
    create(&http, "c-1", "counter").await;
    send(&http, "c-1", "m-1", json!({"add": 2})).await;
    let task = claim(&http).await;
    http.checkpoint(CheckpointRequest {
        lease: lease(&task),
        position: 0,
        key: "add".into(),
        kind: CheckpointKind::Step,
        output: json!(2),
        delay_ms: None,
    })
    .await
    .unwrap();

    let printed = turnwise(base, None, &["turns", "export", "c-1", "1"]).await;
    let saved: turnwise::replay::SavedTurn = serde_json::from_str(printed.text()).unwrap();
    assert_eq!(saved.workflow_type, "counter");
    assert_eq!(saved.turn.message, json!({"add": 2}));
    assert_eq!(saved.turn.steps[0].key, "add");
    assert_eq!(saved.turn.steps[0].output, json!(2));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("turn.json");
    let text = turnwise(
        base,
        None,
        &[
            "turns",
            "export",
            "c-1",
            "1",
            "--out",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(text.text().contains("(1 saved steps)"), "{text:#?}");
    let from_file: turnwise::replay::SavedTurn =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(from_file, saved);
    turnwise(base, None, &["turns", "export", "c-1", "9", "--json"])
        .await
        .failed(3);
}
