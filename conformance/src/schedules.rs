//! Schedules (a turnwise extension): delayed messages admitted when due and not before,
//! recurring firings admitted once each under `schedule/<name>/<fire time>`, catch-up after a
//! downtime, and the reads and operator actions on schedules.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Error};

use crate::support::*;
use crate::{advance_ms, Fixture};

fn request(
    workflow_id: &str,
    name: &str,
    spec: ScheduleSpec,
    catch_up: CatchUp,
) -> CreateScheduleRequest {
    CreateScheduleRequest {
        workflow_id: workflow_id.into(),
        name: name.into(),
        spec,
        message: json!({"from": name}),
        catch_up,
    }
}

async fn schedule<B: Backend + ?Sized>(b: &B, req: CreateScheduleRequest) -> WorkflowSchedule {
    let what = format!("create schedule `{}` on `{}`", req.name, req.workflow_id);
    ok(b.create_schedule(req).await, &what)
}

fn every(ms: u64) -> ScheduleSpec {
    ScheduleSpec::Every {
        every_ms: ms,
        anchor_ms: None,
    }
}

/// Claim, check the turn's message id, origin and message, and complete it.
async fn take<B: Backend + ?Sized>(b: &B, message_id: &str, why: &str) {
    let task = claim(b, why).await;
    assert_eq!(task.turn.message_id, message_id, "{why}");
    let origin = task.turn.origin.clone().expect("a firing has an origin");
    assert_eq!(
        origin.kind, "schedule",
        "a firing's origin kind is `schedule`"
    );
    complete(b, &lease(&task), json!({"count": 1}), json!(null)).await;
}

fn control(workflow_id: &str, name: &str, action: ScheduleAction) -> ScheduleControlRequest {
    ScheduleControlRequest {
        workflow_id: workflow_id.into(),
        name: name.into(),
        action,
    }
}

/// A delayed message is not claimable before its time, does not hold up the inbox, is
/// admitted under its own id when due, and only once.
pub async fn delayed_message_fires_once_when_due(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let pending = schedule(
        &b,
        request(
            "inst-1",
            "later",
            ScheduleSpec::After { delay_ms: 60_000 },
            CatchUp::One,
        ),
    )
    .await;
    assert!(
        matches!(pending.spec, ScheduleSpec::Once { .. }),
        "a delay is stored as a fire time"
    );
    assert_no_claim(&b, "the delayed message is not due").await;
    send(&b, "inst-1", "now", json!(null)).await;
    let task = claim(&b, "a message sent after the delayed one is not held up").await;
    assert_eq!(task.turn.message_id, "now");
    complete(&b, &lease(&task), json!({"count": 1}), json!(null)).await;
    advance_ms(&f, 59_999);
    assert_no_claim(&b, "one millisecond before the delayed message is due").await;
    advance_ms(&f, 1);
    take(&b, "later", "the delayed message is due").await;
    advance_ms(&f, 3_600_000);
    assert_no_claim(&b, "a delayed message is admitted once").await;
    let listed = ok(
        b.list_schedules(ListSchedulesQuery {
            workflow_id: Some("inst-1".into()),
            ..Default::default()
        })
        .await,
        "list schedules",
    );
    assert!(listed.schedules.is_empty(), "a fired one-off is gone");
    let err = b
        .create_schedule(request(
            "inst-1",
            "later",
            ScheduleSpec::After { delay_ms: 1 },
            CatchUp::One,
        ))
        .await
        .expect_err("the delayed message's id is taken by its turn");
    assert_eq!(err.status(), 409, "{err}");
}

/// Each occurrence of an interval is admitted once, under its deterministic id.
pub async fn recurring_firings_have_deterministic_ids(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let s = schedule(&b, request("inst-1", "tick", every(1000), CatchUp::One)).await;
    let first = s.next_fire_ms.expect("a new schedule has a fire time");
    assert_no_claim(&b, "the first occurrence is not due").await;
    for k in 0..3 {
        advance_ms(&f, 1000);
        take(
            &b,
            &firing_id("tick", first + k * 1000),
            "an occurrence is due",
        )
        .await;
        assert_no_claim(&b, "each occurrence is admitted once").await;
    }
    let read = ok(b.get_schedule("inst-1", "tick").await, "get schedule");
    assert_eq!((read.fired, read.skipped), (3, 0));
    assert_eq!(read.next_fire_ms, Some(first + 3000));
    assert_eq!(read.last_fire_ms, Some(first + 2000));
}

/// After a downtime, `all` admits every missed occurrence oldest first and `one` only the
/// newest.
pub async fn catch_up_after_downtime(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    create(&b, "inst-2").await;
    let all = schedule(&b, request("inst-1", "all", every(1000), CatchUp::All)).await;
    let one = schedule(&b, request("inst-2", "one", every(1000), CatchUp::One)).await;
    advance_ms(&f, 5_500);
    let start = all.next_fire_ms.unwrap();
    let mut seen = Vec::new();
    while let Some(task) = try_claim(&b).await {
        seen.push(task.turn.message_id.clone());
        complete(&b, &lease(&task), json!({"count": 1}), json!(null)).await;
    }
    seen.sort();
    let one_start = one.next_fire_ms.unwrap();
    let mut want: Vec<String> = (0..5).map(|k| firing_id("all", start + k * 1000)).collect();
    want.push(firing_id("one", one_start + 4000));
    want.sort();
    assert_eq!(seen, want, "`all` admits the five missed, `one` the newest");
    let one = ok(b.get_schedule("inst-2", "one").await, "get schedule");
    assert_eq!(one.skipped, 4, "`one` counts what it skipped");
    // Inside each instance the firings are in occurrence order.
    let turns = history(&b, "inst-1").await;
    let ids: Vec<&str> = turns.iter().map(|t| t.message_id.as_str()).collect();
    let ordered: Vec<String> = (0..5).map(|k| firing_id("all", start + k * 1000)).collect();
    assert_eq!(ids, ordered);
}

/// Reads, pause, resume and delete; refusals write nothing.
pub async fn schedule_reads_and_control(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let made = schedule(&b, request("inst-1", "tick", every(1000), CatchUp::Skip)).await;
    assert_eq!(made.workflow_id, "inst-1");
    assert_eq!(made.message, json!({"from": "tick"}));
    let repeat = schedule(&b, request("inst-1", "tick", every(1000), CatchUp::Skip)).await;
    assert_eq!(made, repeat, "an identical repeat answers the schedule");
    let before = instance(&b, "inst-1").await;

    let refusals: Vec<(CreateScheduleRequest, u16, &str)> = vec![
        (
            request("inst-1", "tick", every(2000), CatchUp::Skip),
            409,
            "a taken name",
        ),
        (
            request(
                "inst-1",
                "bad",
                ScheduleSpec::Cron {
                    expr: "61 * * * *".into(),
                },
                CatchUp::One,
            ),
            400,
            "a cron expression out of range",
        ),
        (
            request("inst-1", "fast", every(10), CatchUp::One),
            400,
            "an interval under 1 s",
        ),
        (
            request("inst-1", "a b", every(1000), CatchUp::One),
            400,
            "a name with a space",
        ),
        (
            request("nobody", "tick", every(1000), CatchUp::One),
            404,
            "no such instance",
        ),
    ];
    for (req, status, why) in refusals {
        let err = b.create_schedule(req).await.expect_err(why);
        assert_eq!(err.status(), status, "{why}: {err}");
    }
    let mut big = request("inst-1", "big", every(1000), CatchUp::One);
    big.message = Value::String("x".repeat(40 * 1024));
    let err = b
        .create_schedule(big)
        .await
        .expect_err("a message over 32 KiB");
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert_eq!(
        instance(&b, "inst-1").await.sequence,
        before.sequence,
        "refusals write nothing"
    );

    let paused = ok(
        b.control_schedule(control("inst-1", "tick", ScheduleAction::Pause))
            .await,
        "pause",
    );
    assert!(paused.schedule.expect("pause answers the schedule").paused);
    advance_ms(&f, 5_000);
    assert_no_claim(&b, "a paused schedule admits nothing").await;
    let resumed = ok(
        b.control_schedule(control("inst-1", "tick", ScheduleAction::Resume))
            .await,
        "resume",
    );
    assert!(!resumed.schedule.unwrap().paused);
    // Four occurrences passed while paused; under `skip` only the newest, due right now, is on
    // time.
    let first = made.next_fire_ms.unwrap();
    take(
        &b,
        &firing_id("tick", first + 4000),
        "the on-time occurrence after resume",
    )
    .await;
    assert_no_claim(&b, "the late occurrences are skipped").await;
    assert_eq!(ok(b.get_schedule("inst-1", "tick").await, "get").skipped, 4);
    let deleted = ok(
        b.control_schedule(control("inst-1", "tick", ScheduleAction::Delete))
            .await,
        "delete",
    );
    assert!(deleted.deleted && deleted.schedule.is_none());
    let again = ok(
        b.control_schedule(control("inst-1", "tick", ScheduleAction::Delete))
            .await,
        "delete again",
    );
    assert!(!again.deleted, "a repeated delete finds nothing");
    let err = b.get_schedule("inst-1", "tick").await.expect_err("deleted");
    assert_eq!(err.status(), 404, "{err}");
    let err = b
        .control_schedule(control("inst-1", "tick", ScheduleAction::Pause))
        .await
        .expect_err("pause of a deleted schedule");
    assert_eq!(err.status(), 404, "{err}");
    advance_ms(&f, 5_000);
    assert_no_claim(&b, "a deleted schedule admits nothing").await;

    // The namespace-wide listing pages over instances.
    create(&b, "inst-2").await;
    schedule(&b, request("inst-1", "x", every(60_000), CatchUp::One)).await;
    schedule(&b, request("inst-2", "y", every(60_000), CatchUp::One)).await;
    let page = ok(
        b.list_schedules(ListSchedulesQuery {
            limit: Some(1),
            ..Default::default()
        })
        .await,
        "list a page",
    );
    let names: Vec<&str> = page.schedules.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["x"]);
    let next = ok(
        b.list_schedules(ListSchedulesQuery {
            after: page.next_after.clone(),
            limit: Some(1),
            ..Default::default()
        })
        .await,
        "list the next page",
    );
    assert_eq!(next.schedules[0].workflow_id, "inst-2");
}
