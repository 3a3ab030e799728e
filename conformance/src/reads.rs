//! Reads: instance status, listings with paging, inboxes, history and single turns.

use serde_json::json;
use turnwise::protocol::*;
use turnwise::Backend;

use crate::support::*;
use crate::{advance_ms, Fixture};

/// The instance status follows its head: idle, queued, running, waiting, paused, failed.
pub async fn instance_status(f: impl Fixture) {
    let b = f.backend();
    let status = |i: WorkflowInstance| i.status;
    create(&b, "inst-1").await;
    assert_eq!(status(instance(&b, "inst-1").await), InstanceStatus::Idle);
    send(&b, "inst-1", "m1", json!(null)).await;
    let inst = instance(&b, "inst-1").await;
    assert_eq!(
        inst.status,
        InstanceStatus::Queued,
        "a ready head makes it queued"
    );
    assert_eq!(inst.current_turn.map(|t| t.number), Some(1));
    let task = claim(&b, "m1 is ready").await;
    assert_eq!(
        status(instance(&b, "inst-1").await),
        InstanceStatus::Running
    );
    sleep(&b, &lease(&task), 0, "nap", 10_000).await;
    assert_eq!(
        status(instance(&b, "inst-1").await),
        InstanceStatus::Waiting
    );
    control(&b, control_request("inst-1", ControlAction::Pause)).await;
    assert_eq!(status(instance(&b, "inst-1").await), InstanceStatus::Paused);
    control(&b, control_request("inst-1", ControlAction::Resume)).await;
    assert_eq!(
        status(instance(&b, "inst-1").await),
        InstanceStatus::Waiting,
        "resume does not cut a sleep short"
    );
    advance_ms(&f, 10_000);
    let task = claim(&b, "the sleep is due").await;
    assert_eq!(
        status(instance(&b, "inst-1").await),
        InstanceStatus::Running
    );
    complete(&b, &lease(&task), json!(null), json!(null)).await;
    let inst = instance(&b, "inst-1").await;
    assert_eq!(inst.status, InstanceStatus::Idle, "nothing pending: idle");
    assert_eq!(inst.pending_messages, 0);
    send(&b, "inst-1", "m2", json!(null)).await;
    let task = claim(&b, "m2 is ready").await;
    fail_for_good(&b, &lease(&task), "WorkflowError: no").await;
    assert_eq!(status(instance(&b, "inst-1").await), InstanceStatus::Failed);
}

/// list_instances pages by ascending id with an exclusive `after` cursor; `limit` is 1–100.
pub async fn list_instances_paging(f: impl Fixture) {
    let b = f.backend();
    for id in ["i-c", "i-a", "i-e", "i-b", "i-d"] {
        create(&b, id).await;
    }
    create(&f.backend_in("elsewhere"), "i-x").await;
    let page = |after: Option<&str>, limit: Option<u32>| ListInstancesQuery {
        after: after.map(Into::into),
        limit,
    };
    let ids = |l: &InstanceList| l.instances.iter().map(|i| i.id.clone()).collect::<Vec<_>>();

    let all = ok(b.list_instances(page(None, None)).await, "list instances");
    assert_eq!(
        ids(&all),
        ["i-a", "i-b", "i-c", "i-d", "i-e"],
        "ascending ids, this namespace only"
    );
    assert_eq!(
        all.next_after, None,
        "a page that is not full has no cursor"
    );

    let p1 = ok(b.list_instances(page(None, Some(2))).await, "list page 1");
    assert_eq!(ids(&p1), ["i-a", "i-b"]);
    assert_eq!(
        p1.next_after.as_deref(),
        Some("i-b"),
        "a full page's cursor is its last id"
    );
    let p2 = ok(
        b.list_instances(page(Some("i-b"), Some(2))).await,
        "list page 2",
    );
    assert_eq!(ids(&p2), ["i-c", "i-d"]);
    assert_eq!(p2.next_after.as_deref(), Some("i-d"));
    let p3 = ok(
        b.list_instances(page(Some("i-d"), Some(2))).await,
        "list page 3",
    );
    assert_eq!(ids(&p3), ["i-e"]);
    assert_eq!(p3.next_after, None);
    let between = ok(
        b.list_instances(page(Some("i-bb"), Some(100))).await,
        "list after i-bb",
    );
    assert_eq!(
        ids(&between),
        ["i-c", "i-d", "i-e"],
        "the cursor need not be an existing id"
    );

    for limit in [0, 101] {
        expect_invalid(
            b.list_instances(page(None, Some(limit))).await,
            "limit",
            &format!("list with limit {limit}"),
        );
    }
}

/// The inbox lists unfinished turns oldest first, with payloads only on request, message sizes,
/// origins, and paging by turn number.
pub async fn instance_inbox(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let messages = [json!({"a": 1}), json!({"bb": [1, 2, 3]}), json!("three")];
    for (i, m) in messages.iter().enumerate() {
        let mut req = message_request("inst-1", &format!("m{}", i + 1), m.clone());
        if i == 2 {
            req.origin = Some(MessageOrigin::new("schedule"));
        }
        ok(b.send_message(req).await, "send");
    }
    let q = |after: Option<u64>, limit: Option<u32>, payloads: bool| InboxQuery {
        id: "inst-1".into(),
        after,
        limit,
        payloads,
    };
    let plain = ok(
        b.instance_inbox(q(None, None, false)).await,
        "read the inbox",
    );
    assert_eq!(plain.workflow_id, "inst-1");
    assert_eq!(plain.workflow_type, TYPE);
    assert_eq!(plain.version, VERSION);
    assert_eq!(plain.status, InstanceStatus::Queued);
    assert_eq!(plain.pending_messages, 3);
    assert_eq!(inbox_numbers(&plain.messages), vec![1, 2, 3]);
    for (entry, m) in plain.messages.iter().zip(&messages) {
        assert_eq!(entry.message, None, "no payloads unless asked for");
        assert_eq!(entry.status, TurnStatus::Queued);
        assert_eq!(entry.attempt, 0);
        assert_eq!(
            entry.message_bytes as usize,
            json_len(m),
            "message_bytes is the serialized size"
        );
    }
    assert_eq!(plain.messages[0].message_id, "m1");
    assert_eq!(
        plain.messages[2].origin.as_ref().map(|o| o.kind.as_str()),
        Some("schedule")
    );

    let full = ok(
        b.instance_inbox(q(None, None, true)).await,
        "read the inbox with payloads",
    );
    for (entry, m) in full.messages.iter().zip(&messages) {
        assert_eq!(
            entry.message.as_ref(),
            Some(m),
            "payloads=true includes each message"
        );
    }

    let p1 = ok(
        b.instance_inbox(q(None, Some(2), false)).await,
        "inbox page 1",
    );
    assert_eq!(inbox_numbers(&p1.messages), vec![1, 2]);
    assert_eq!(p1.next_after, Some(2));
    assert_eq!(p1.pending_messages, 3, "pending_messages counts every page");
    let p2 = ok(
        b.instance_inbox(q(Some(2), Some(2), false)).await,
        "inbox page 2",
    );
    assert_eq!(inbox_numbers(&p2.messages), vec![3]);
    assert_eq!(p2.next_after, None);
    for limit in [0, 101] {
        expect_invalid(
            b.instance_inbox(q(None, Some(limit), false)).await,
            "limit",
            &format!("inbox with limit {limit}"),
        );
    }

    let task = claim(&b, "m1 is ready").await;
    let now = ok(
        b.instance_inbox(q(None, None, false)).await,
        "read the inbox",
    );
    assert_eq!(now.messages[0].status, TurnStatus::Running);
    assert_eq!(now.messages[0].attempt, 1);
    assert_eq!(now.status, InstanceStatus::Running);
    complete(&b, &lease(&task), json!(null), json!(null)).await;
    let now = ok(
        b.instance_inbox(q(None, None, false)).await,
        "read the inbox",
    );
    assert_eq!(
        inbox_numbers(&now.messages),
        vec![2, 3],
        "finished turns leave the inbox"
    );
    assert_eq!(now.pending_messages, 2);
}

/// The type inbox counts the instances of a type (optionally one version) and those with
/// pending messages, pages by instance id, and shows each head without payload.
pub async fn type_inbox(f: impl Fixture) {
    let b = f.backend();
    create(&b, "t-a").await;
    create(&b, "t-b").await;
    let mut v2 = create_request("t-c");
    v2.version = "v2".into();
    create_with(&b, v2).await;
    let mut other = create_request("o-a");
    other.workflow_type = "other-type".into();
    create_with(&b, other).await;
    send(&b, "t-a", "m1", json!({"x": 1})).await;
    send(&b, "t-a", "m2", json!({"x": 2})).await;
    send(&b, "t-c", "m1", json!(null)).await;
    send(&b, "o-a", "m1", json!(null)).await;

    let q = |version: Option<&str>, after: Option<&str>, limit: Option<u32>| TypeInboxQuery {
        workflow_type: TYPE.into(),
        version: version.map(Into::into),
        after: after.map(Into::into),
        limit,
    };
    let ids = |r: &TypeInboxResponse| {
        r.instances
            .iter()
            .map(|e| e.workflow_id.clone())
            .collect::<Vec<_>>()
    };
    let all = ok(b.type_inbox(q(None, None, None)).await, "type inbox");
    assert_eq!(all.workflow_type, TYPE);
    assert_eq!(all.identities, 3, "three instances of the type");
    assert_eq!(all.with_messages, 2, "two of them have pending messages");
    assert_eq!(ids(&all), ["t-a", "t-b", "t-c"]);
    let a = &all.instances[0];
    assert_eq!(a.pending_messages, 2);
    assert_eq!(a.version, VERSION);
    let head = a
        .head
        .as_ref()
        .expect("an instance with messages shows its head");
    assert_eq!(head.turn, 1);
    assert_eq!(head.message, None, "the head is shown without payload");
    assert_eq!(all.instances[1].pending_messages, 0);
    assert!(
        all.instances[1].head.is_none(),
        "an idle instance has no head"
    );

    let v1 = ok(
        b.type_inbox(q(Some(VERSION), None, None)).await,
        "type inbox for v1",
    );
    assert_eq!(v1.identities, 2);
    assert_eq!(v1.with_messages, 1);
    assert_eq!(ids(&v1), ["t-a", "t-b"]);

    let p1 = ok(
        b.type_inbox(q(None, None, Some(2))).await,
        "type inbox page 1",
    );
    assert_eq!(ids(&p1), ["t-a", "t-b"]);
    assert_eq!(p1.next_after.as_deref(), Some("t-b"));
    assert_eq!(p1.identities, 3, "counts cover every page");
    let p2 = ok(
        b.type_inbox(q(None, Some("t-b"), Some(2))).await,
        "type inbox page 2",
    );
    assert_eq!(ids(&p2), ["t-c"]);
    assert_eq!(p2.next_after, None);
}

/// History lists finished turns ascending with an exclusive turn cursor; `limit` is 1–50.
pub async fn history_paging(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let q = |after: Option<u64>, limit: Option<u32>| HistoryQuery {
        id: "inst-1".into(),
        after,
        limit,
    };
    let empty = ok(b.history(q(None, None)).await, "history of a new instance");
    assert!(empty.turns.is_empty());
    assert_eq!(empty.next_after, None);
    for n in 1..=3 {
        send(&b, "inst-1", &format!("m{n}"), json!(n)).await;
        run_next(&b, json!({"count": n})).await;
    }
    send(&b, "inst-1", "m4", json!(4)).await; // pending: not history
    let all = ok(b.history(q(None, None)).await, "history");
    assert_eq!(numbers(&all.turns), vec![1, 2, 3]);
    assert!(all.turns.iter().all(|t| t.status == TurnStatus::Completed));
    assert_eq!(all.turns[1].state_after, json!({"count": 2}));
    let p1 = ok(b.history(q(None, Some(2))).await, "history page 1");
    assert_eq!(numbers(&p1.turns), vec![1, 2]);
    assert_eq!(p1.next_after, Some(2));
    let p2 = ok(b.history(q(Some(2), Some(2))).await, "history page 2");
    assert_eq!(numbers(&p2.turns), vec![3]);
    assert_eq!(p2.next_after, None);
    for limit in [0, 51] {
        expect_invalid(
            b.history(q(None, Some(limit))).await,
            "limit",
            &format!("history with limit {limit}"),
        );
    }
    let fifty = ok(b.history(q(None, Some(50))).await, "history with limit 50");
    assert_eq!(fifty.turns.len(), 3);
}

/// A single turn reads while pending and from history, with steps, result and state_after.
pub async fn single_turn(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let admitted = send(&b, "inst-1", "m1", json!({"q": 1})).await;
    assert_eq!(
        turn(&b, "inst-1", 1).await,
        admitted,
        "a pending turn reads as admitted"
    );
    let task = claim(&b, "m1 is ready").await;
    let l = lease(&task);
    step(&b, &l, 0, "a", json!("out")).await;
    complete(&b, &l, json!({"count": 1}), json!("reply")).await;
    let t = turn(&b, "inst-1", 1).await;
    assert_eq!(t.status, TurnStatus::Completed);
    assert_eq!(t.result, json!("reply"));
    assert_eq!(t.state_after, json!({"count": 1}));
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.message, json!({"q": 1}));
    for missing in [0, 2, 99] {
        expect_not_found(
            b.turn(TurnQuery {
                id: "inst-1".into(),
                turn: missing,
            })
            .await,
            &format!("reading turn {missing}, which does not exist"),
        );
    }
}

/// Every read and application write naming an unknown instance or turn is 404. A worker call
/// whose lease names one is `409 turn_lease_lost`: no token holds a turn that is not there, and
/// that is the one answer on which a worker ends its attempt without a word.
pub async fn not_found(f: impl Fixture) {
    let b = f.backend();
    expect_not_found(b.get_instance("nobody").await, "get of an unknown instance");
    expect_not_found(
        b.instance_inbox(InboxQuery {
            id: "nobody".into(),
            ..Default::default()
        })
        .await,
        "inbox of an unknown instance",
    );
    expect_not_found(
        b.history(HistoryQuery {
            id: "nobody".into(),
            ..Default::default()
        })
        .await,
        "history of an unknown instance",
    );
    expect_not_found(
        b.turn(TurnQuery {
            id: "nobody".into(),
            turn: 1,
        })
        .await,
        "a turn of an unknown instance",
    );
    expect_not_found(
        b.send_message(message_request("nobody", "m1", json!(null)))
            .await,
        "a message to an unknown instance",
    );
    let ghost = Lease {
        workflow_id: "nobody".into(),
        turn: 1,
        token: "t".into(),
    };
    expect_lease_lost(
        b.heartbeat(ghost.clone()).await,
        "a heartbeat for an unknown instance",
    );
    expect_lease_lost(
        b.checkpoint(step_request(&ghost, 0, "a", json!(1))).await,
        "a checkpoint for an unknown instance",
    );
    expect_lease_lost(
        b.complete(complete_request(&ghost, json!(null), json!(null)))
            .await,
        "a completion for an unknown instance",
    );

    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    claim(&b, "m1 is ready").await;
    let before = snapshot(&b, "inst-1").await;
    let unknown_turn = Lease {
        workflow_id: "inst-1".into(),
        turn: 99,
        token: "t".into(),
    };
    expect_lease_lost(
        b.heartbeat(unknown_turn.clone()).await,
        "a heartbeat for an unknown turn",
    );
    expect_lease_lost(
        b.operation(operation_request(&unknown_turn, 0, "a")).await,
        "an operation for an unknown turn",
    );
    expect_lease_lost(
        b.fail(fail_request(&unknown_turn, "x")).await,
        "a fail for an unknown turn",
    );
    assert_unchanged(&b, "inst-1", &before, "writes to an unknown turn").await;
}
