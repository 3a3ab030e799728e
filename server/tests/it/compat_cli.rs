//! `turnwise compat --baseline`: the CI check's exit codes (0 safe, 1 review, 2 needs-patch,
//! 3 breaks, 4 could not run), its text and `--json` shapes, and a baseline read from a
//! directory or from a git revision.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};
use turnwise::manifest::{files, Alt, Call, CallKind, Manifest, Node};

use crate::config::turnwise;

fn step(key: &str, line: u32) -> Node {
    Node::Call(Call::new(
        CallKind::Step,
        key,
        format!("src/order.rs:{line}"),
    ))
}

fn sleep(key: &str, line: u32) -> Node {
    Node::Call(Call::new(
        CallKind::Sleep,
        key,
        format!("src/order.rs:{line}"),
    ))
}

/// `order` v1 as deployed: charge, sleep, ship.
fn deployed() -> Manifest {
    let mut m = Manifest::new(
        "order",
        "v1",
        Node::Seq(vec![step("charge", 3), sleep("nap", 4), step("ship", 5)]),
    );
    m.schemas.state = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    m
}

fn compat(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd = turnwise(&[&["compat"], args].concat(), &[]);
    cmd.current_dir(dir);
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run turnwise compat");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// Write `baseline` and `current` under `dir` and run the check with `--json`.
fn classify(dir: &Path, current: Manifest) -> (i32, Value) {
    files::write_dir(dir.join("deployed"), [deployed()]).unwrap();
    let _ = std::fs::remove_dir_all(dir.join("turnwise/manifests"));
    files::write_dir(dir.join("turnwise/manifests"), [current]).unwrap();
    let (code, out, err) = compat(dir, &["--baseline", "deployed", "--json"]);
    let json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    (code, json)
}

#[test]
fn each_class_exits_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    // Unchanged: safe.
    let (code, json) = classify(dir.path(), deployed());
    assert_eq!((code, json["class"].as_str()), (0, Some("safe")), "{json}");

    // A changed step input: replay still works, a person should look.
    let mut review = deployed();
    if let Node::Seq(parts) = &mut review.grammar {
        if let Node::Call(c) = &mut parts[0] {
            c.input = "changed".into();
        }
    }
    let mut base = deployed();
    if let Node::Seq(parts) = &mut base.grammar {
        if let Node::Call(c) = &mut parts[0] {
            c.input = "original".into();
        }
    }
    files::write_dir(dir.path().join("deployed"), [base]).unwrap();
    let _ = std::fs::remove_dir_all(dir.path().join("turnwise/manifests"));
    files::write_dir(dir.path().join("turnwise/manifests"), [review]).unwrap();
    let (code, out, _) = compat(dir.path(), &["--baseline", "deployed"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("order v1 → v1: review"), "{out}");

    // A step inserted before the sleep: a turn asleep would not replay.
    let inserted = Manifest::new(
        "order",
        "v1",
        Node::Seq(vec![
            step("charge", 3),
            step("fraud", 4),
            sleep("nap", 5),
            step("ship", 6),
        ]),
    );
    let (code, json) = classify(dir.path(), inserted);
    assert_eq!(code, 2, "{json}");
    let finding = &json["comparisons"][0]["findings"][0];
    assert_eq!(finding["class"], "needs-patch");
    assert_eq!(finding["prefix"], json!(["step `charge`", "sleep `nap`"]));
    assert_eq!(finding["at"], "src/order.rs:4");
    assert!(
        finding["fix"].as_str().unwrap().contains("patched"),
        "{finding}"
    );

    // The state gained a required field: old state cannot be read.
    let mut breaks = deployed();
    breaks.schemas.state = json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}, "owner": {"type": "string"}},
        "required": ["owner"]
    });
    let (code, json) = classify(dir.path(), breaks);
    assert_eq!(code, 3, "{json}");
    assert!(json["comparisons"][0]["findings"][0]["what"]
        .as_str()
        .unwrap()
        .contains("owner"));
}

#[test]
fn a_new_version_beside_the_deployed_one_is_compared_as_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    files::write_dir(dir.path().join("deployed"), [deployed()]).unwrap();
    let v2 = Manifest::new(
        "order",
        "v2",
        Node::Seq(vec![
            step("charge", 3),
            Node::Alt(Alt {
                cond: "c".into(),
                arms: vec![sleep("nap", 5), Node::Seq(vec![])],
            }),
            step("ship", 7),
        ]),
    );
    files::write_dir(dir.path().join("turnwise/manifests"), [deployed(), v2]).unwrap();
    let (code, out, _) = compat(dir.path(), &["--baseline", "deployed"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("order v1 → v1: safe"), "{out}");
    assert!(out.contains("order v1 → v2: safe"), "{out}");
    assert!(out.ends_with("2 comparisons: safe\n"), "{out}");
}

#[test]
fn a_git_revision_is_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    files::write_dir(dir.path().join("turnwise/manifests"), [deployed()]).unwrap();
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-qm",
        "deployed",
    ]);
    // The working tree renames `ship`: turns asleep would replay into a key that is gone.
    let mut renamed = Manifest::new(
        "order",
        "v1",
        Node::Seq(vec![
            step("charge", 3),
            sleep("nap", 4),
            step("dispatch", 5),
        ]),
    );
    renamed.schemas = deployed().schemas;
    files::write_dir(dir.path().join("turnwise/manifests"), [renamed]).unwrap();
    let (code, out, err) = compat(dir.path(), &["--baseline", "HEAD"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("`ship`"), "{out}");
}

#[test]
fn a_check_that_cannot_run_says_why_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = compat(dir.path(), &["--baseline", "deployed"]);
    assert_eq!(code, 4);
    assert!(err.contains("no manifests in turnwise/manifests"), "{err}");
    files::write_dir(dir.path().join("turnwise/manifests"), [deployed()]).unwrap();
    let (code, _, err) = compat(dir.path(), &["--baseline", "no-such-rev"]);
    assert_eq!(code, 4);
    assert!(
        err.contains("\"no-such-rev\" is neither a directory nor a git revision"),
        "{err}"
    );
    std::fs::write(dir.path().join("turnwise/manifests/bad.json"), "{}").unwrap();
    let (code, _, err) = compat(dir.path(), &["--baseline", "."]);
    assert_eq!(code, 4);
    assert!(err.contains("bad.json: not a turnwise manifest"), "{err}");
}
