//! `turnwise serve`'s settings, through the real binary: each flag also from its environment
//! variable and from `--config turnwise.toml`, in the order flag > environment > file >
//! default; an unknown key or a bad value in the file refused, naming it and the file; the
//! history retention (also from Little Big Brain's variables) taking effect over HTTP; and
//! `--log-format json` writing JSON lines.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// A `turnwise` command with none of the caller's turnwise or LBB variables, logging at
/// `warn` unless the test sets `RUST_LOG`.
pub fn turnwise(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_turnwise"));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("TURNWISE_") || key.starts_with("LBB_") {
            cmd.env_remove(&*key);
        }
    }
    cmd.env("RUST_LOG", "warn")
        .args(args)
        .envs(env.iter().copied());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A running `turnwise serve`: the process (killed when this is dropped), a client of it, and
/// its stderr line by line.
struct Served {
    _process: ServerProcess,
    api: Api,
    stderr: Receiver<String>,
}

/// Start `turnwise <args>` (a `serve`) and wait until it listens.
fn serve(args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut child = turnwise(args, env)
        .spawn()
        .expect("start the turnwise binary");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let (addr_tx, addr) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("turnwise listening on http://") {
                let _ = addr_tx.send(addr.to_owned());
            }
        }
    });
    let _process = ServerProcess(child);
    let Ok(addr) = addr.recv_timeout(Duration::from_secs(30)) else {
        let said: Vec<String> = lines.try_iter().collect();
        panic!("turnwise {args:?} did not listen within 30 s; stderr: {said:#?}");
    };
    Served {
        _process,
        api: Api::new(format!("http://{addr}"), None),
        stderr: lines,
    }
}

/// Run `turnwise <args>`, which must exit by itself within 30 s: its exit code and stderr.
pub fn refused(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut child = turnwise(args, env)
        .spawn()
        .expect("start the turnwise binary");
    let Some(status) = wait_exit(&mut child, Duration::from_secs(30)) else {
        let _ = child.kill();
        panic!("turnwise {args:?} did not exit");
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status.code().unwrap_or(-1), stderr)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// A create request of exactly `bytes` bytes.
fn create_of_size(id: &str, bytes: usize) -> Vec<u8> {
    let head = json!({"id": id, "workflow_type": "counter", "version": "v1",
                      "state": {"pad": ""}})
    .to_string();
    assert!(bytes > head.len());
    let pad = "x".repeat(bytes - head.len());
    let body = json!({"id": id, "workflow_type": "counter", "version": "v1",
                      "state": {"pad": pad}})
    .to_string();
    assert_eq!(body.len(), bytes);
    body.into_bytes()
}

/// Whether the server takes a body of `bytes` (`true`) or refuses it as too large (`false`).
async fn takes(api: &Api, id: &str, bytes: usize) -> bool {
    let answer = api
        .raw(
            reqwest::Method::POST,
            "/v1/workflows/instances",
            Some(create_of_size(id, bytes)),
        )
        .await;
    match answer.status.as_u16() {
        200 => true,
        413 => {
            answer.err(413, "payload_too_large");
            false
        }
        _ => panic!("a create of {bytes} bytes: {answer:#?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_beats_its_variable_which_beats_the_file_which_beats_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let file = dir.path().join("turnwise.toml");
    std::fs::write(
        &file,
        format!(
            "# turnwise serve --config turnwise.toml\ndb = {:?}\nbind = \"127.0.0.1:0\"\nbody-limit = 1000\n",
            path(&db)
        ),
    )
    .unwrap();
    let config = ["serve", "--config", path(&file)];

    // The file alone: its database, its address and its limit.
    let served = serve(&config, &[]);
    assert!(takes(&served.api, "f-1", 900).await);
    assert!(!takes(&served.api, "f-2", 1100).await);
    drop(served);

    // The variable over the file.
    let env = [("TURNWISE_BODY_LIMIT", "2000")];
    let served = serve(&config, &env);
    assert!(takes(&served.api, "e-1", 1900).await);
    assert!(!takes(&served.api, "e-2", 2100).await);
    drop(served);

    // The flag over both.
    let served = serve(&[&config[..], &["--body-limit", "3000"]].concat(), &env);
    assert!(takes(&served.api, "a-1", 2900).await);
    assert!(!takes(&served.api, "a-2", 3100).await);
    drop(served);

    // The config file named by its variable, the database by its own.
    let served = serve(
        &["serve", "--body-limit", "3000"],
        &[("TURNWISE_CONFIG", path(&file)), ("TURNWISE_DB", path(&db))],
    );
    assert!(!takes(&served.api, "v-1", 3100).await);
    drop(served);

    // None of them: the default, 1 MiB (a body under the state limit of 64 KiB).
    let served = serve(&["serve", "--db", path(&db), "--bind", "127.0.0.1:0"], &[]);
    assert!(takes(&served.api, "d-1", 60_000).await);
    // Everything went to the one database, whichever source named it.
    for id in ["f-1", "e-1", "a-1", "d-1"] {
        served
            .api
            .get(&format!("/v1/workflows/instances/get?id={id}"))
            .await
            .ok();
    }
}

#[test]
fn an_unknown_key_is_refused_naming_it_and_the_keys_there_are() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("turnwise.toml");
    std::fs::write(&file, "db = \"turnwise.db\"\nbnd = \"127.0.0.1:7400\"\n").unwrap();
    let (code, stderr) = refused(&["serve", "--config", path(&file)], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(path(&file)), "names the file: {stderr}");
    assert!(
        stderr.contains("unknown key `bnd`"),
        "names the key: {stderr}"
    );
    for valid in [
        "`bind`",
        "`body-limit`",
        "`history-keep-turns`",
        "`limit-state-bytes`",
    ] {
        assert!(stderr.contains(valid), "lists {valid}: {stderr}");
    }
    assert!(
        !dir.path().join("turnwise.db").exists(),
        "nothing was opened"
    );
}

#[test]
fn a_bad_value_is_refused_naming_its_key_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("turnwise.toml");
    let db = dir.path().join("turnwise.db");
    for (line, key, why) in [
        ("body-limit = \"big\"", "body-limit", "invalid type"),
        ("idle-timeout = 0", "idle-timeout", "more than 0 seconds"),
        ("max-connections = 0", "max-connections", "out of range"),
        (
            "limit-state-bytes = -1",
            "limit-state-bytes",
            "invalid value",
        ),
        ("log-format = \"xml\"", "log-format", "unknown variant"),
        (
            "history-keep-turns = 1.5",
            "history-keep-turns",
            "invalid type",
        ),
    ] {
        std::fs::write(&file, format!("db = {:?}\n{line}\n", path(&db))).unwrap();
        let (code, stderr) = refused(&["serve", "--config", path(&file)], &[]);
        assert_eq!(code, 2, "{line}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the config file {}, line 2, key `{key}`",
                path(&file)
            )),
            "{line}: {stderr}"
        );
        assert!(stderr.contains(why), "{line}: {stderr}");
    }

    // Little Big Brain's variables are checked too, named.
    let (code, stderr) = refused(
        &["serve", "--db", path(&db)],
        &[("LBB_WORKFLOW_HISTORY_KEEP_TURNS", "many")],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("LBB_WORKFLOW_HISTORY_KEEP_TURNS=\"many\" is not a whole number"),
        "{stderr}"
    );
    // And turnwise's own.
    let (code, stderr) = refused(
        &["serve", "--db", path(&db)],
        &[("TURNWISE_HISTORY_KEEP_MS", "soon")],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--history-keep-ms"), "{stderr}");
    assert!(
        stderr.contains("the value comes from the environment variable TURNWISE_HISTORY_KEEP_MS"),
        "{stderr}"
    );
    assert!(!db.exists(), "nothing was opened");
}

/// Create `id` and run `turns` turns of it to completion over HTTP, one after the other;
/// answer the numbers of the turns its history keeps.
async fn finish_turns(api: &Api, id: &str, turns: u64) -> Vec<u64> {
    api.create(id, 60_000).await;
    for n in 1..=turns {
        api.send(id, &format!("m{n}"), json!({"add": 1})).await;
        let task = api.claim(5_000).await;
        assert_eq!(task["turn"]["number"], n, "{task}");
        api.post(
            "/v1/workflows/turns/complete",
            with(&lease(&task), json!({"state": {"count": n}, "result": n})),
        )
        .await
        .ok();
        // The turns before are older than a keep time of 1 ms when the next one finishes.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let history = api
        .get(&format!("/v1/workflows/instances/history?id={id}"))
        .await
        .ok();
    history["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_retention_takes_effect_from_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let file = dir.path().join("turnwise.toml");
    std::fs::write(&file, "history-keep-turns = 4\nhistory-keep-ms = 1\n").unwrap();
    let base = [
        "serve",
        "--db",
        path(&db),
        "--bind",
        "127.0.0.1:0",
        "--config",
        path(&file),
    ];

    // The default keeps every turn of a day.
    let served = serve(&["serve", "--db", path(&db), "--bind", "127.0.0.1:0"], &[]);
    assert_eq!(finish_turns(&served.api, "all", 5).await, [1, 2, 3, 4, 5]);
    drop(served);

    // Flags.
    let served = serve(
        &[
            "serve",
            "--db",
            path(&db),
            "--bind",
            "127.0.0.1:0",
            "--history-keep-turns",
            "2",
            "--history-keep-ms",
            "1",
        ],
        &[],
    );
    assert_eq!(finish_turns(&served.api, "flags", 5).await, [4, 5]);
    drop(served);

    // The file.
    let served = serve(&base, &[]);
    assert_eq!(finish_turns(&served.api, "file", 6).await, [3, 4, 5, 6]);
    drop(served);

    // Little Big Brain's variables, over the file.
    let lbb = [
        ("LBB_WORKFLOW_HISTORY_KEEP_TURNS", "2"),
        ("LBB_WORKFLOW_HISTORY_KEEP_MS", "1"),
    ];
    let served = serve(&base, &lbb);
    assert_eq!(finish_turns(&served.api, "lbb", 5).await, [4, 5]);
    drop(served);

    // Turnwise's own variable wins over Little Big Brain's.
    let served = serve(
        &["serve", "--db", path(&db), "--bind", "127.0.0.1:0"],
        &[&lbb[..], &[("TURNWISE_HISTORY_KEEP_TURNS", "3")]].concat(),
    );
    assert_eq!(finish_turns(&served.api, "both", 5).await, [3, 4, 5]);
    let pruned = served
        .api
        .get("/v1/workflows/instances/get?id=both")
        .await
        .ok();
    assert_eq!(pruned["history_pruned_through"], 2, "{pruned}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_json_object_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let served = serve(
        &[
            "serve",
            "--db",
            path(&db),
            "--bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ],
        &[("RUST_LOG", "info")],
    );
    served.api.create("j-1", 60_000).await;

    // Read up to the request's line; every line on the way must be a JSON object.
    let mut seen = Vec::new();
    loop {
        let line = served
            .stderr
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no request log line; the lines so far: {seen:#?}"));
        let record: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        assert!(record.is_object(), "{line}");
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(record.get(key).is_some(), "no `{key}` in {line}");
        }
        seen.push(record);
        let last = seen.last().unwrap();
        if last["fields"]["path"] == "/v1/workflows/instances" {
            assert_eq!(last["fields"]["status"], 200, "{last}");
            assert_eq!(last["level"], "INFO", "{last}");
            break;
        }
    }
    let listening = seen
        .iter()
        .find(|r| r["fields"]["message"] == "turnwise listening")
        .unwrap_or_else(|| panic!("no listening line in {seen:#?}"));
    assert_eq!(
        format!("http://{}", listening["fields"]["addr"].as_str().unwrap()),
        served.api.base
    );
}

/// The example file of docs/operations.md ("Configuring"), the first `toml` block there.
fn documented_example() -> String {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .unwrap();
    let section = &doc[doc
        .find("## 9. Configuring")
        .expect("the Configuring section")..];
    let start = section.find("```toml\n").expect("an example file") + "```toml\n".len();
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_file_of_the_docs_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("turnwise.toml");
    let example = documented_example();
    assert!(example.contains("body-limit = 32768"), "{example}");
    std::fs::write(&file, example).unwrap();
    // Its database and address replaced by flags: a temporary file and a free port.
    let db = dir.path().join("turnwise.db");
    let served = serve(
        &[
            "serve",
            "--config",
            path(&file),
            "--db",
            path(&db),
            "--bind",
            "127.0.0.1:0",
        ],
        &[("RUST_LOG", "info")],
    );
    assert!(takes(&served.api, "x-1", 32_000).await);
    assert!(!takes(&served.api, "x-2", 33_000).await);
    // `log-format = "json"`: JSON lines up to the one that says the server listens.
    loop {
        let line = served
            .stderr
            .recv_timeout(Duration::from_secs(30))
            .expect("a log line saying the server listens");
        let record: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if record["fields"]["message"] == "turnwise listening" {
            break;
        }
    }
}
