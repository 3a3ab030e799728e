//! Schedules through typed handles on the `TestEnv` virtual clock: delayed messages
//! (`send_at`/`send_after`), recurring schedules (intervals and cron) with their message ids
//! and origins, the catch-up policies after a downtime, and pause/resume/delete.

use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::testing::TestEnv;
use turnwise::{EngineConfig, Error};

#[derive(Clone)]
struct Diary;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Note(String);

impl Workflow for Diary {
    type State = Vec<String>;
    type Message = Note;
    type Reply = usize;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "diary";
    const VERSION: &'static str = "v1";

    async fn run(
        &self,
        _ctx: &mut Turn<Self>,
        mut log: Vec<String>,
        msg: Note,
    ) -> TurnResult<Self> {
        log.push(msg.0);
        let n = log.len();
        Ok(Done::new(log).reply(n))
    }
}

/// 2026-01-01T00:00:00Z, where the test clock starts.
const START: i64 = 1_767_225_600_000;
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

fn env() -> TestEnv {
    TestEnv::new().register(Diary)
}

/// The message ids and origins of the instance's finished turns, oldest first.
async fn admitted(h: &Handle<Diary>) -> Vec<(String, String)> {
    h.history(None)
        .await
        .unwrap()
        .turns
        .into_iter()
        .map(|t| {
            let origin = t.origin.map(|o| o.kind).unwrap_or_default();
            (t.message_id, origin)
        })
        .collect()
}

fn ids(admitted: &[(String, String)]) -> Vec<&str> {
    admitted.iter().map(|(id, _)| id.as_str()).collect()
}

#[tokio::test]
async fn send_after_fires_at_its_time_and_not_before() {
    let env = env();
    let h = env.start(&Diary, "d-1").await.unwrap();
    let pending = h
        .send_after(Note("later".into()), "m-later", 10 * MINUTE)
        .await
        .unwrap();
    assert_eq!(pending.next_fire_ms, Some(START + 600_000));
    // A message sent after it is not held up by it.
    h.send(Note("now".into()), "m-now").await.unwrap();
    env.advance(10 * MINUTE - Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(h.state().await.unwrap(), vec!["now".to_string()]);
    assert_eq!(h.schedules().await.unwrap().len(), 1, "still pending");
    env.advance(Duration::from_millis(1)).await.unwrap();
    assert_eq!(h.state().await.unwrap(), vec!["now", "later"]);
    let log = admitted(&h).await;
    assert_eq!(ids(&log), ["m-now", "m-later"], "admitted under its own id");
    assert_eq!(log[1].1, "schedule");
    assert!(
        h.schedules().await.unwrap().is_empty(),
        "a fired one-off is gone"
    );
    // Nothing fires again later, and the id stays taken.
    env.advance(HOUR).await.unwrap();
    assert_eq!(h.state().await.unwrap().len(), 2);
    let again = h
        .send_after(Note("later".into()), "m-later", MINUTE)
        .await
        .unwrap_err();
    assert!(matches!(again, Error::Conflict { .. }), "{again:?}");
}

#[tokio::test]
async fn send_at_is_idempotent_and_can_be_cancelled() {
    let env = env();
    let h = env.start(&Diary, "d-2").await.unwrap();
    let when = UNIX_EPOCH + Duration::from_millis(START as u64) + HOUR;
    let first = h.send_at(Note("x".into()), "m-1", when).await.unwrap();
    let repeat = h.send_at(Note("x".into()), "m-1", when).await.unwrap();
    assert_eq!(first, repeat);
    let changed = h.send_at(Note("y".into()), "m-1", when).await.unwrap_err();
    assert!(matches!(changed, Error::Conflict { .. }), "{changed:?}");
    let cancelled = h.send_at(Note("z".into()), "m-2", when).await.unwrap();
    assert_eq!(cancelled.name, "m-2");
    assert!(h.delete_schedule("m-2").await.unwrap());
    assert!(!h.delete_schedule("m-2").await.unwrap(), "gone already");
    env.advance(HOUR).await.unwrap();
    assert_eq!(h.state().await.unwrap(), vec!["x".to_string()]);
}

#[tokio::test]
async fn intervals_fire_each_occurrence_once_with_deterministic_ids() {
    let env = env();
    let h = env.start(&Diary, "d-3").await.unwrap();
    h.schedule(
        "tick",
        ScheduleSpec::every(MINUTE),
        CatchUp::One,
        Note("tick".into()),
    )
    .await
    .unwrap();
    for _ in 0..3 {
        env.advance(MINUTE).await.unwrap();
        // Running again at the same time admits nothing more.
        env.run_until_idle().await.unwrap();
    }
    let log = admitted(&h).await;
    assert_eq!(
        ids(&log),
        [
            "schedule/tick/2026-01-01T00:01:00.000Z",
            "schedule/tick/2026-01-01T00:02:00.000Z",
            "schedule/tick/2026-01-01T00:03:00.000Z",
        ]
    );
    assert!(log.iter().all(|(_, origin)| origin == "schedule"));
    let s = h.get_schedule("tick").await.unwrap();
    assert_eq!((s.fired, s.skipped), (3, 0));
    assert_eq!(s.next_fire_ms, Some(START + 4 * 60_000));
}

#[tokio::test]
async fn cron_fires_at_the_times_it_names_in_utc() {
    let env = env();
    let h = env.start(&Diary, "d-4").await.unwrap();
    h.schedule(
        "nightly",
        ScheduleSpec::cron("30 3 * * *"),
        CatchUp::One,
        Note("n".into()),
    )
    .await
    .unwrap();
    env.advance(3 * HOUR + 29 * MINUTE).await.unwrap();
    assert!(h.state().await.unwrap().is_empty(), "03:29 is before 03:30");
    env.advance(MINUTE).await.unwrap();
    env.advance(24 * HOUR).await.unwrap();
    assert_eq!(
        ids(&admitted(&h).await),
        [
            "schedule/nightly/2026-01-01T03:30:00.000Z",
            "schedule/nightly/2026-01-02T03:30:00.000Z",
        ]
    );
    let bad = h
        .schedule(
            "bad",
            ScheduleSpec::cron("every tuesday"),
            CatchUp::One,
            Note("b".into()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&bad, Error::Invalid { param, message } if param == "spec.expr" && message.contains("five fields")),
        "{bad:?}"
    );
}

/// An hourly schedule, then 5 h 10 min during which nothing runs (the clock moves without a
/// worker looking), then the worker runs: what each policy admits.
async fn after_downtime(policy: CatchUp) -> (Vec<String>, u64) {
    let env = env();
    let h = env.start(&Diary, "d-5").await.unwrap();
    h.schedule(
        "hourly",
        ScheduleSpec::every(HOUR),
        policy,
        Note("h".into()),
    )
    .await
    .unwrap();
    env.clock().advance(5 * HOUR + 10 * MINUTE);
    env.run_until_idle().await.unwrap();
    let log = admitted(&h).await.into_iter().map(|(id, _)| id).collect();
    let s = h.get_schedule("hourly").await.unwrap();
    assert_eq!(s.next_fire_ms, Some(START + 6 * 3_600_000), "{policy:?}");
    // The next occurrence fires on time whatever the policy.
    env.advance(50 * MINUTE).await.unwrap();
    let last = admitted(&h).await.pop().unwrap().0;
    assert_eq!(last, "schedule/hourly/2026-01-01T06:00:00.000Z");
    (log, s.skipped)
}

#[tokio::test]
async fn catch_up_skip_admits_nothing_late() {
    let (log, skipped) = after_downtime(CatchUp::Skip).await;
    assert!(log.is_empty(), "{log:?}");
    assert_eq!(skipped, 5);
}

#[tokio::test]
async fn catch_up_one_admits_the_newest_missed_occurrence() {
    let (log, skipped) = after_downtime(CatchUp::One).await;
    assert_eq!(log, ["schedule/hourly/2026-01-01T05:00:00.000Z"]);
    assert_eq!(skipped, 4);
}

#[tokio::test]
async fn catch_up_all_admits_every_missed_occurrence_in_order() {
    let (log, skipped) = after_downtime(CatchUp::All).await;
    let want: Vec<String> = (1..=5)
        .map(|h| format!("schedule/hourly/2026-01-01T0{h}:00:00.000Z"))
        .collect();
    assert_eq!(log, want);
    assert_eq!(skipped, 0);
}

#[tokio::test]
async fn pause_resume_and_delete() {
    let env = env();
    let h = env.start(&Diary, "d-6").await.unwrap();
    h.schedule(
        "tick",
        ScheduleSpec::every(MINUTE),
        CatchUp::Skip,
        Note("t".into()),
    )
    .await
    .unwrap();
    env.advance(MINUTE).await.unwrap();
    assert!(h.pause_schedule("tick").await.unwrap().paused);
    env.advance(10 * MINUTE).await.unwrap();
    assert_eq!(
        h.state().await.unwrap().len(),
        1,
        "paused: nothing admitted"
    );
    let resumed = h.resume_schedule("tick").await.unwrap();
    assert!(!resumed.paused);
    // Resumed 9 minutes after the missed 00:02: `skip` drops the late ones (00:11 was due
    // right now and is on time).
    env.run_until_idle().await.unwrap();
    assert_eq!(
        ids(&admitted(&h).await),
        [
            "schedule/tick/2026-01-01T00:01:00.000Z",
            "schedule/tick/2026-01-01T00:11:00.000Z"
        ]
    );
    assert!(h.delete_schedule("tick").await.unwrap());
    env.advance(10 * MINUTE).await.unwrap();
    assert_eq!(h.state().await.unwrap().len(), 2, "deleted: nothing more");
    let missing = h.get_schedule("tick").await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { .. }), "{missing:?}");
    assert!(h.pause_schedule("tick").await.is_err());
}

#[tokio::test]
async fn creation_is_checked_and_idempotent() {
    let env = env();
    let h = env.start(&Diary, "d-7").await.unwrap();
    let a = h
        .schedule(
            "tick",
            ScheduleSpec::every(MINUTE),
            CatchUp::All,
            Note("t".into()),
        )
        .await
        .unwrap();
    env.clock().advance(Duration::from_secs(5));
    let again = h
        .schedule(
            "tick",
            ScheduleSpec::every(MINUTE),
            CatchUp::All,
            Note("t".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        a, again,
        "an identical repeat answers the schedule as created"
    );
    let other = h
        .schedule(
            "tick",
            ScheduleSpec::every(HOUR),
            CatchUp::All,
            Note("t".into()),
        )
        .await
        .unwrap_err();
    assert!(matches!(other, Error::Conflict { .. }), "{other:?}");
    let short = h
        .schedule(
            "fast",
            ScheduleSpec::every(Duration::from_millis(10)),
            CatchUp::One,
            Note("f".into()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&short, Error::Invalid { param, .. } if param == "spec.every_ms"),
        "{short:?}"
    );
    let bad_name = h
        .schedule(
            "no/slash",
            ScheduleSpec::every(MINUTE),
            CatchUp::One,
            Note("f".into()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&bad_name, Error::Invalid { param, .. } if param == "name"),
        "{bad_name:?}"
    );
    // No instance, no schedule: schedules do not create instances.
    let ghost = env.engine().clone();
    let err = turnwise::Backend::get_schedule(&ghost, "nobody", "tick")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    // Deleting the instance deletes its schedules.
    assert!(h.delete().await.unwrap());
    env.advance(HOUR).await.unwrap();
    let listed = turnwise::Backend::list_schedules(&ghost, Default::default())
        .await
        .unwrap();
    assert!(listed.schedules.is_empty());
}

#[tokio::test]
async fn the_schedule_limit_is_refused_before_anything_is_written() {
    let mut config = EngineConfig::default();
    config.limits.schedules_per_instance = 2;
    let env = TestEnv::with_config(config).register(Diary);
    let h = env.start(&Diary, "d-8").await.unwrap();
    for name in ["a", "b"] {
        h.send_after(Note(name.into()), name, MINUTE).await.unwrap();
    }
    let full = h
        .send_after(Note("c".into()), "c", MINUTE)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &full,
            Error::LimitReached {
                limit: "schedules",
                ..
            }
        ),
        "{full:?}"
    );
    assert_eq!(h.schedules().await.unwrap().len(), 2);
}

#[tokio::test]
async fn firings_of_several_schedules_are_admitted_in_time_order() {
    let env = env();
    let h = env.start(&Diary, "d-9").await.unwrap();
    let every = |m: u32| ScheduleSpec::every(m * MINUTE);
    h.schedule("a-slow", every(3), CatchUp::All, Note("slow".into()))
        .await
        .unwrap();
    h.schedule("b-fast", every(2), CatchUp::All, Note("fast".into()))
        .await
        .unwrap();
    env.clock().advance(6 * MINUTE);
    env.run_until_idle().await.unwrap();
    assert_eq!(
        ids(&admitted(&h).await),
        [
            "schedule/b-fast/2026-01-01T00:02:00.000Z",
            "schedule/a-slow/2026-01-01T00:03:00.000Z",
            "schedule/b-fast/2026-01-01T00:04:00.000Z",
            "schedule/a-slow/2026-01-01T00:06:00.000Z",
            "schedule/b-fast/2026-01-01T00:06:00.000Z",
        ]
    );
}
