//! Records the SQLite store cannot read the usual way, and what it does with them.
//!
//! - Records deeper than serde_json's default recursion limit (128), as versions before the
//!   nesting limit could write them: read back whole, from the tables and from the journal.
//! - Records that cannot be decoded at all (damaged by hand, or deeper than any store writes):
//!   the store opens anyway, the instance is quarantined (its reads answer `500
//!   record_unreadable` naming it, claims and listings go on without it), every other
//!   instance is served, and deleting the instance clears it.
//!
//! The records are damaged with plain SQL on a closed file, as a crash, a bug of an older
//! version or a hand edit would leave them.

#![cfg(feature = "sqlite")]

use std::path::Path;

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Engine, Error};

const TYPE: &str = "wf";

/// A value nesting `levels` arrays deep around the number 1, built without recursion.
fn deep(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = Value::Array(vec![v]);
    }
    v
}

async fn create(engine: &Engine, id: &str) {
    engine
        .create_instance(CreateInstanceRequest {
            id: id.into(),
            workflow_type: TYPE.into(),
            version: "v1".into(),
            state: json!({"n": 0}),
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        })
        .await
        .unwrap();
}

async fn send(engine: &Engine, id: &str, message_id: &str) {
    engine
        .send_message(MessageRequest {
            workflow_id: id.into(),
            id: message_id.into(),
            message: json!({"m": message_id}),
            origin: None,
        })
        .await
        .unwrap();
}

async fn claim(engine: &Engine) -> Option<TurnTask> {
    engine
        .claim(ClaimRequest {
            worker: "w".into(),
            workflows: vec![WorkflowRef::new(TYPE, "v1")],
            wait_ms: 0,
            include_execution_credential: None,
        })
        .await
        .unwrap()
        .task
}

/// Two instances, `good` and `bad`, each with one queued message; the store closed.
async fn two_instances(path: &Path) {
    let engine = Engine::open(path).await.unwrap();
    for id in ["bad", "good"] {
        create(&engine, id).await;
        send(&engine, id, "m1").await;
    }
}

/// Run `sql` with `params` on the closed store file.
fn edit(path: &Path, sql: &str, params: impl rusqlite::Params) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute(sql, params).unwrap();
}

/// The stored record of instance `id`, as JSON.
fn instance_body(path: &Path, id: &str) -> (i64, Value) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let (revision, body): (i64, String) = conn
        .query_row(
            "SELECT revision, body FROM instances WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    (revision, serde_json::from_str(&body).unwrap())
}

fn assert_unreadable<T: std::fmt::Debug>(res: turnwise::Result<T>, id: &str, what: &str) {
    match res {
        Err(e @ Error::Unreadable { .. }) => {
            assert_eq!((e.status(), e.code()), (500, "record_unreadable"), "{what}");
            assert!(!e.is_retryable(), "{what}: retrying cannot help: {e}");
            let text = e.to_string();
            assert!(
                text.contains(&format!("`{id}`")) && text.contains("quarantined"),
                "{what}: the error names the instance and says it is quarantined: {text}"
            );
        }
        other => panic!("{what}: expected Error::Unreadable, got {other:?}"),
    }
}

/// The reads of the rest of the store work, and a claim hands out `good`'s turn (answered).
async fn the_rest_serves(engine: &Engine) -> TurnTask {
    let good = engine.get_instance("good").await.unwrap();
    assert_eq!(good.pending_messages, 1);
    let listed = engine
        .list_instances(ListInstancesQuery {
            after: None,
            limit: None,
        })
        .await
        .expect("listing the namespace");
    let ids: Vec<&str> = listed.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        ids,
        ["good"],
        "the quarantined instance is left out of listings"
    );
    let task = claim(engine).await.expect("good's turn is claimable");
    assert_eq!(task.turn.workflow_id, "good");
    assert!(
        claim(engine).await.is_none(),
        "the quarantined head is not handed out"
    );
    task
}

#[tokio::test]
async fn a_record_deeper_than_serde_jsons_default_limit_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    two_instances(&path).await;
    // As an older version could have stored it: a state 140 levels deep (the record adds one).
    let (_, mut body) = instance_body(&path, "bad");
    body["state"] = deep(140);
    edit(
        &path,
        "UPDATE instances SET body = ?1 WHERE id = 'bad'",
        [serde_json::to_string(&body).unwrap()],
    );
    let engine = Engine::open(&path).await.unwrap();
    let inst = engine
        .get_instance("bad")
        .await
        .expect("the deep record reads");
    assert_eq!(inst.state, deep(140));
    std::mem::forget(inst); // dropping 140 levels is fine, but keep the test's stack shallow
}

#[tokio::test]
async fn a_journaled_write_deeper_than_serde_jsons_default_limit_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    two_instances(&path).await;
    // A write journaled before a crash, carrying a message 140 levels deep: replayed at open.
    let (revision, mut body) = instance_body(&path, "bad");
    body["revision"] = json!(revision + 1);
    body["state"] = deep(140);
    edit(
        &path,
        "INSERT INTO journal (ns, id, revision, instance, turns) \
         VALUES ('default', 'bad', ?1, ?2, '[]')",
        rusqlite::params![revision + 1, serde_json::to_string(&body).unwrap()],
    );
    let engine = Engine::open(&path)
        .await
        .expect("the store opens with a deep journaled write");
    let inst = engine
        .get_instance("bad")
        .await
        .expect("the replayed record reads");
    assert_eq!(inst.state, deep(140));
    std::mem::forget(inst);
}

#[tokio::test]
async fn an_undecodable_record_quarantines_its_instance_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    two_instances(&path).await;
    edit(
        &path,
        "UPDATE instances SET body = '{\"id\": \"bad\", \"trunc' WHERE id = 'bad'",
        [],
    );
    let engine = Engine::open(&path)
        .await
        .expect("one bad record does not stop the store from opening");
    assert_unreadable(engine.get_instance("bad").await, "bad", "reading it");
    assert_unreadable(
        engine
            .send_message(MessageRequest {
                workflow_id: "bad".into(),
                id: "m2".into(),
                message: json!(2),
                origin: None,
            })
            .await,
        "bad",
        "writing to it",
    );
    the_rest_serves(&engine).await;

    // Deleting it is how an operator clears it; the id is then free again.
    let deleted = engine
        .delete_instance(DeleteRequest {
            workflow_id: "bad".into(),
        })
        .await
        .unwrap();
    assert!(deleted.deleted);
    assert!(matches!(
        engine.get_instance("bad").await,
        Err(Error::NotFound { .. })
    ));
    create(&engine, "bad").await;
    assert_eq!(
        engine.get_instance("bad").await.unwrap().pending_messages,
        0
    );
}

#[tokio::test]
async fn an_undecodable_turn_quarantines_its_instance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    two_instances(&path).await;
    edit(
        &path,
        "UPDATE turns SET body = 'not json' WHERE id = 'bad'",
        [],
    );
    let engine = Engine::open(&path).await.unwrap();
    assert_unreadable(
        engine
            .turn(TurnQuery {
                id: "bad".into(),
                turn: 1,
            })
            .await,
        "bad",
        "reading its turn",
    );
    // Once found, the whole instance is refused, not only the turn.
    assert_unreadable(engine.get_instance("bad").await, "bad", "reading it after");
    the_rest_serves(&engine).await;
}

#[tokio::test]
async fn a_stored_turn_status_this_version_does_not_know_quarantines_its_instance() {
    // Answers read a status they do not know as `TurnStatus::Unknown`; a store must not.
    for status in ["archived", "unknown"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        two_instances(&path).await;
        edit(
            &path,
            "UPDATE turns SET body = json_set(body, '$.status', ?1) WHERE id = 'bad'",
            [status],
        );
        let engine = Engine::open(&path).await.unwrap();
        assert_unreadable(
            engine
                .turn(TurnQuery {
                    id: "bad".into(),
                    turn: 1,
                })
                .await,
            "bad",
            status,
        );
        the_rest_serves(&engine).await;
    }
}

#[tokio::test]
async fn a_record_deeper_than_any_store_writes_is_quarantined_not_a_stack_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    two_instances(&path).await;
    let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let (_, body) = instance_body(&path, "bad");
    let text = serde_json::to_string(&body).unwrap().replacen(
        "\"state\":{\"n\":0}",
        &format!("\"state\":{nested}"),
        1,
    );
    assert!(text.contains(&nested));
    edit(
        &path,
        "UPDATE instances SET body = ?1 WHERE id = 'bad'",
        [text],
    );
    let engine = Engine::open(&path).await.unwrap();
    assert_unreadable(engine.get_instance("bad").await, "bad", "reading it");
    the_rest_serves(&engine).await;
}

#[tokio::test]
async fn an_undecodable_journaled_write_is_kept_and_its_instance_quarantined_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    two_instances(&path).await;
    let (revision, _) = instance_body(&path, "bad");
    edit(
        &path,
        "INSERT INTO journal (ns, id, revision, instance, turns) \
         VALUES ('default', 'bad', ?1, '{}', '[{\"number\": ')",
        [revision + 1],
    );
    for open in 0..2 {
        let engine = Engine::open(&path)
            .await
            .expect("a bad journal row does not stop the store from opening");
        assert_unreadable(
            engine.get_instance("bad").await,
            "bad",
            &format!("reading it (open {open})"),
        );
        let task = the_rest_serves(&engine).await;
        // A new ready turn of good's for the next open.
        engine
            .control(ControlRequest {
                workflow_id: "good".into(),
                action: ControlAction::CancelTurn,
                turn: Some(task.turn.number),
                by: None,
            })
            .await
            .unwrap();
        send(&engine, "good", &format!("again-{open}")).await;
    }
    // The journaled write was kept, as it was, for an operator to look at.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let kept: (String, String) = conn
        .query_row(
            "SELECT id, turns FROM quarantine WHERE id = 'bad'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(kept, ("bad".to_owned(), "[{\"number\": ".to_owned()));
    drop(conn);

    let engine = Engine::open(&path).await.unwrap();
    assert!(
        engine
            .delete_instance(DeleteRequest {
                workflow_id: "bad".into(),
            })
            .await
            .unwrap()
            .deleted
    );
    drop(engine);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let left: i64 = conn
        .query_row("SELECT COUNT(*) FROM quarantine", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        left, 0,
        "deleting the instance deletes its quarantined rows"
    );
    drop(conn);
    let engine = Engine::open(&path).await.unwrap();
    assert!(matches!(
        engine.get_instance("bad").await,
        Err(Error::NotFound { .. })
    ));
}
