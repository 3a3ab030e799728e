//! Interop with the real client: the public `littlebigbrain==0.32.0` Python package, installed
//! with pip into a virtual environment (`target/lbb-venv`, reused when present), runs its
//! `WorkflowWorker` and workflow handles against the `turnwise` binary. The workflow has a step,
//! a sleep, a signal wait answered with `handle.signal`, and a continuation; the test then checks
//! the final state and history through turnwise's own API.
//!
//! Without `python3` (and its `venv` module), or when pip cannot reach the package index (a
//! firewall, no network), the test is reported as not run (`turnwise::testing::skip_test`: one
//! numbered line on standard error), unless `TURNWISE_REQUIRE_INTEROP=1` or CI is set: then
//! either fails it. Any other pip failure fails it always.
//! `an_unreachable_index_skips_unless_interop_is_required` checks that decision against an index
//! on a closed local port, in a fresh venv.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const PACKAGE: &str = "littlebigbrain==0.32.0";
const TOKEN: &str = "lbb_sk_test_local";

fn venv_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("lbb-venv")
}

/// Run a command to its end within `limit`, answering (success, stdout, stderr).
fn run(cmd: &mut Command, limit: Duration) -> (bool, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = wait_exit(&mut child, limit);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    match status {
        Some(s) => (s.success(), stdout, stderr),
        None => {
            panic!("{cmd:?} did not finish within {limit:?}\nstdout:\n{stdout}\nstderr:\n{stderr}")
        }
    }
}

/// Set to `1` (CI does) to make an unreachable package index fail the interop test instead of
/// skipping it.
const REQUIRE_ENV: &str = "TURNWISE_REQUIRE_INTEROP";

/// What setting up the Python side gave.
#[derive(Debug)]
enum Setup {
    /// The venv's python, with the package importable.
    Ready(PathBuf),
    /// No `python3` on this machine, or one without its `venv` module.
    NoPython,
    /// pip could not reach the package index (or a download from it); pip's output.
    Unreachable(String),
}

/// Texts in pip's output or log when it cannot connect to the index (refused, no route, no
/// DNS, a timeout, a proxy or TLS failure) rather than when the index answered and the install
/// failed.
const UNREACHABLE_SIGNS: &[&str] = &[
    "Failed to establish a new connection",
    "NewConnectionError",
    "ConnectTimeoutError",
    "NameResolutionError",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "Read timed out",
    "ProxyError",
    "SSLError",
    "connection error:",
];

/// The venv at `venv` with the package installed, creating the venv if needed. `pip_env` is
/// set (and `pip_env_removed` unset) for pip only. A failure other than an unreachable index
/// panics with pip's output.
fn setup_python(venv: &Path, pip_env: &[(&str, &str)], pip_env_removed: &[&str]) -> Setup {
    // Debian's python3 lacks `ensurepip` (so `-m venv` fails) without python3-venv.
    let found = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(found, Ok(s) if s.success()) {
        return Setup::NoPython;
    }
    let python = venv.join("bin").join("python");
    let installed = |python: &Path| {
        python.exists()
            && run(
                Command::new(python).args([
                    "-c",
                    "import importlib.metadata as m; assert m.version('littlebigbrain') == '0.32.0'",
                ]),
                Duration::from_secs(60),
            )
            .0
    };
    if installed(&python) {
        return Setup::Ready(python);
    }
    if !python.exists() {
        let (ok, out, err) = run(
            Command::new("python3").arg("-m").arg("venv").arg(venv),
            Duration::from_secs(120),
        );
        assert!(ok, "python3 -m venv {venv:?} failed:\n{out}\n{err}");
    }
    // pip says why it found nothing (a connection error, say) only in its verbose log.
    let log = venv.join("pip-install.log");
    let _ = std::fs::remove_file(&log);
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .arg("--log")
    .arg(&log)
    .arg(PACKAGE);
    for (k, v) in pip_env {
        pip.env(k, v);
    }
    for k in pip_env_removed {
        pip.env_remove(k);
    }
    let (ok, out, err) = run(&mut pip, Duration::from_secs(600));
    if !ok {
        let output = format!("{out}\n{err}");
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let unreachable = log
            .lines()
            .chain(output.lines())
            .find(|line| UNREACHABLE_SIGNS.iter().any(|sign| line.contains(sign)));
        if let Some(line) = unreachable {
            return Setup::Unreachable(format!("{output}\npip reported: {}", line.trim()));
        }
        panic!("pip install {PACKAGE} failed (the index answered):\n{output}\npip's log:\n{log}");
    }
    assert!(
        installed(&python),
        "{PACKAGE} is not importable after install"
    );
    Setup::Ready(python)
}

/// The python to run the interop test with, or why the test cannot run here: without
/// `python3` (or its `venv` module), or when the index is unreachable. Either panics instead
/// when `require` is set.
fn python_or_skip(setup: Setup, require: bool) -> Result<PathBuf, String> {
    match setup {
        Setup::Ready(python) => Ok(python),
        Setup::NoPython if require => panic!(
            "{REQUIRE_ENV}=1 requires the lbb interop test, but there is no python3 with its \
             venv module (on Debian: apt-get install python3 python3-venv; .ci/run does)"
        ),
        Setup::NoPython => Err(
            "no python3 with its venv module; install python3 and python3-venv to run it".into(),
        ),
        Setup::Unreachable(output) if require => panic!(
            "{REQUIRE_ENV}=1 requires the lbb interop test, but pip cannot reach the package \
             index to install {PACKAGE}:\n{output}"
        ),
        Setup::Unreachable(_) => Err(format!(
            "pip cannot reach the package index to install {PACKAGE} (set {REQUIRE_ENV}=1 to \
             make this a failure)"
        )),
    }
}

/// Whether the environment requires the interop test to run.
fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_index_skips_unless_interop_is_required() {
    // pip pointed at a port nothing listens on, in a fresh venv, with no configuration file,
    // local wheel directory or other index to fall back on, and no retries.
    let setup = tokio::task::spawn_blocking(|| {
        let dir = tempfile::tempdir().unwrap();
        let setup = setup_python(
            &dir.path().join("venv"),
            &[
                ("PIP_INDEX_URL", "http://127.0.0.1:9/"),
                ("PIP_CONFIG_FILE", "/dev/null"),
                ("PIP_RETRIES", "0"),
                ("PIP_TIMEOUT", "10"),
            ],
            &["PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"],
        );
        (dir, setup)
    })
    .await
    .unwrap();
    let (_dir, setup) = setup;
    let output = match setup {
        Setup::NoPython => {
            turnwise::testing::skip_test(
                "an_unreachable_index_skips_unless_interop_is_required",
                "no python3 with its venv module; install python3 and python3-venv to run it",
            );
            return;
        }
        Setup::Unreachable(output) => output,
        Setup::Ready(_) => panic!("installed {PACKAGE} from an index that does not exist"),
    };
    assert!(
        output.contains("127.0.0.1"),
        "pip's output names the index: {output}"
    );
    let skipped = python_or_skip(Setup::Unreachable(output.clone()), false)
        .expect_err("skipped when not required");
    assert!(skipped.contains(REQUIRE_ENV), "{skipped}");
    let required = std::panic::catch_unwind(|| python_or_skip(Setup::Unreachable(output), true));
    let message = required.expect_err("an unreachable index fails when required");
    let message = message
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(message.contains(REQUIRE_ENV), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lbb_python_worker_runs_against_turnwise_serve() {
    let setup = tokio::task::spawn_blocking(|| setup_python(&venv_dir(), &[], &[]))
        .await
        .unwrap();
    let python = match python_or_skip(setup, required()) {
        Ok(python) => python,
        Err(reason) => {
            turnwise::testing::skip_test(
                "the_lbb_python_worker_runs_against_turnwise_serve",
                &reason,
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("turnwise.db");
    let (mut server, addr) = spawn_binary(&db, "127.0.0.1:0", Some(TOKEN));
    let url = format!("http://{addr}");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lbb/counter_worker.py");

    let (ok, stdout, stderr) = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            run(
                Command::new(&python)
                    .arg(&script)
                    .args([url.as_str(), TOKEN, "main"]),
                Duration::from_secs(150),
            )
        })
        .await
        .unwrap()
    };
    if !ok {
        server.kill();
        panic!("the LBB worker script failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    }
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("no summary from the script ({e}):\n{stdout}\n{stderr}"));
    assert_eq!(seen["state"], json!({"count": 5}), "{seen}");
    assert_eq!(seen["completed_turns"], 2, "{seen}");

    // What turnwise itself says, through its own API.
    let api = Api::new(url, Some(TOKEN));
    let inst = api
        .get("/v1/workflows/instances/get?id=counter-1")
        .await
        .ok();
    assert_eq!(inst["workflow_type"], "counter");
    assert_eq!(inst["version"], "v1");
    assert_eq!(inst["state"], json!({"count": 5}));
    assert_eq!(inst["status"], "idle");
    assert_eq!(inst["completed_turns"], 2);
    assert_eq!(inst["pending_messages"], 0);

    let history = api
        .get("/v1/workflows/instances/history?id=counter-1")
        .await
        .ok();
    let turns = history["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{history}");

    // Turn 1: step, sleep, signal wait resolved by the app's signal, then the continuation.
    let t1 = &turns[0];
    assert_eq!(t1["status"], "completed");
    assert_eq!(t1["message_id"], "request-1");
    assert_eq!(
        t1["attempt"], 1,
        "resumed after the sleep and the wait, never retried"
    );
    let steps = t1["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{t1}");
    assert_eq!(steps[0]["key"], "add");
    assert_eq!(steps[0]["kind"], "step");
    assert_eq!(steps[0]["output"], 2);
    assert!(steps[0].get("delay_ms").is_none());
    assert_eq!(steps[1]["key"], "cool-down");
    assert_eq!(steps[1]["kind"], "sleep");
    assert_eq!(steps[1]["delay_ms"], 200);
    assert_eq!(steps[2]["key"], "approval");
    assert_eq!(steps[2]["kind"], "signal");
    assert_eq!(steps[2]["signal_name"], "approval");
    assert_eq!(
        steps[2]["output"],
        json!({"received": true, "value": {"approved": true}})
    );
    assert_eq!(t1["result"], json!({"continued": 2}));
    assert_eq!(t1["state_after"], json!({"count": 2}));
    assert_eq!(t1["continued_to"], 2);
    let signals = t1["signals"].as_array().unwrap();
    assert_eq!(signals.len(), 1, "the repeated signal was delivered once");
    assert_eq!(signals[0]["id"], "approval-1");

    // Turn 2: the continuation's message, run to its end.
    let t2 = &turns[1];
    assert_eq!(t2["status"], "completed");
    assert_eq!(t2["message"], json!({"add": 3}));
    assert_eq!(t2["origin"]["kind"], "continuation");
    assert_eq!(t2["origin"]["message_id"], "request-1");
    assert_eq!(t2["result"], 5);
    assert_eq!(t2["state_after"], json!({"count": 5}));
    assert_eq!(t2["steps"][0]["output"], 3);
    assert_eq!(t2["worker"], "py-worker");

    server.kill();
}
