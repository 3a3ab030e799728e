//! A real run for every fixture: instances of the old code with turns in flight (asleep at
//! `nap` or waiting for the approval, failed once and backing off, idle after a completed turn)
//! meet the new code deployed under the same version (a second `Worker` over the same engine
//! and clock). A `safe` change finishes every turn on the new code and no step runs twice; a
//! change that needs a patch or breaks suspends the turn at `nap` (no failure, no retry, the
//! inbox waits), and the fix its finding suggests, classed `safe`, finishes it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use turnwise::clock::Clock;
use turnwise::manifest::compat::{compare, Class};
use turnwise::prelude::*;
use turnwise::protocol::{MismatchReport, TurnStatus, WorkflowTurn};
use turnwise::testing::TestEnv;
use turnwise::Worker;

use super::fixtures::{self, *};
use super::manifest;

const DAY: Duration = Duration::from_secs(24 * 3600);
/// The amount every fixture's message carries; its reply.
const AMOUNT: u64 = 5;

/// A worker running `new` over `env`'s engine and clock, as after a deploy.
fn deploy<N: Workflow>(env: &TestEnv, new: N) -> Worker {
    Worker::new(env.engine().clone())
        .clock(Arc::new(env.clock().clone()) as Arc<dyn Clock>)
        .register(new)
}

/// Assert every step instance `id` ran ran once: no effect id twice.
fn ran_once(id: &str) -> Vec<String> {
    let runs = fixtures::runs(id);
    let unique: BTreeSet<_> = runs.iter().collect();
    assert_eq!(unique.len(), runs.len(), "{id}: a step ran twice: {runs:?}");
    runs
}

async fn turn<W: Workflow>(h: &Handle<W>, n: u64) -> WorkflowTurn {
    h.turn(n).await.unwrap()
}

/// The old code's instances with turns in flight, by role.
struct InFlight<O: Workflow> {
    idle: Handle<O>,
    asleep: Handle<O>,
    retrying: Handle<O>,
}

/// Start `name`'s instances of `old`: `-idle` with turn 1 completed, `-asleep` with turn 1
/// asleep at `nap` (or waiting for the approval), `-retrying` with turn 1 backing off after
/// a step failed (see [`fixtures::fail_once`]).
async fn in_flight<O>(env: &TestEnv, old: &O, name: &str, msg: &O::Message) -> InFlight<O>
where
    O: Workflow,
    O::State: Default,
    O::Message: Clone,
{
    let idle = env.start(old, &format!("{name}-idle")).await.unwrap();
    idle.send(msg.clone(), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(turn(&idle, 1).await.status, TurnStatus::Completed, "{name}");

    let asleep = env.start(old, &format!("{name}-asleep")).await.unwrap();
    asleep.send(msg.clone(), "m1").await.unwrap();
    let retrying = env.start(old, &format!("{name}-retrying")).await.unwrap();
    fixtures::fail_once(&format!("{name}-retrying"));
    retrying.send(msg.clone(), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    let t = turn(&asleep, 1).await;
    assert_eq!(t.status, TurnStatus::Waiting, "{name}: asleep: {t:?}");
    let t = turn(&retrying, 1).await;
    assert_eq!(
        (t.status, t.attempt),
        (TurnStatus::Queued, 1),
        "{name}: a step failed its first attempt and the turn backs off: {t:?}"
    );
    assert!(t.error.is_some(), "{name}: {t:?}");
    InFlight {
        idle,
        asleep,
        retrying,
    }
}

/// `name`'s instances of `old` in flight (see [`in_flight`]) and `new` deployed over them,
/// after asserting the change is classed `safe`.
async fn prepare<O, N>(
    name: &str,
    old: O,
    new: N,
    msg: &O::Message,
) -> (TestEnv, InFlight<O>, Worker)
where
    O: Workflow + Clone,
    O::State: Default,
    O::Message: Clone,
    N: Workflow,
{
    let class = compare(&manifest(&old), &manifest(&new)).class;
    assert_eq!(class, Class::Safe, "{name}");
    let env = TestEnv::new().register(old.clone());
    let f = in_flight(&env, &old, name, msg).await;
    let worker = deploy(&env, new);
    (env, f, worker)
}

/// After [`prepare`]: a new message to the idle instance, time passes, and every turn
/// completed with its reply on the new code, with no step run twice; `new_step`: a key only
/// the new code has, which the idle instance's new turn runs.
async fn finish<O>(
    env: &TestEnv,
    f: &InFlight<O>,
    worker: &Worker,
    msg: O::Message,
    new_step: Option<&str>,
) where
    O: Workflow<Reply = u64>,
{
    f.idle.send(msg, "m2").await.unwrap();
    let mut attempts = 0;
    for _ in 0..6 {
        env.clock().advance(HOUR);
        attempts += worker.run_until_idle().await.unwrap();
    }
    assert!(attempts > 0, "{}: the new code ran", f.idle.id());
    let retried = turn(&f.retrying, 1).await.attempt;
    assert!(retried >= 2, "{}: the new code retried", f.retrying.id());
    for (h, n) in [(&f.idle, 1), (&f.idle, 2), (&f.asleep, 1), (&f.retrying, 1)] {
        let t = turn(h, n).await;
        assert_eq!(
            t.status,
            TurnStatus::Completed,
            "{} turn {n}: {t:?}",
            h.id()
        );
        assert_eq!(h.reply(n).await.unwrap(), Some(AMOUNT), "{}", h.id());
        ran_once(h.id());
    }
    if let Some(key) = new_step {
        let suffix = format!("/{key}");
        let idle = ran_once(f.idle.id());
        assert!(
            idle.iter().any(|e| e.ends_with(&suffix)),
            "{}: the new code's step `{key}` ran: {idle:?}",
            f.idle.id()
        );
    }
}

/// [`prepare`] then [`finish`].
async fn safe_run<O, N>(name: &str, old: O, new: N, msg: O::Message, new_step: Option<&str>)
where
    O: Workflow<Reply = u64> + Clone,
    O::State: Default,
    O::Message: Clone,
    N: Workflow,
{
    let (env, f, worker) = prepare(name, old, new, &msg).await;
    finish(&env, &f, &worker, msg, new_step).await;
}

/// [`prepare`] and [`finish`] for a change classed `review` (the check cannot tell; a person
/// decides): with the amount every run sends, these behave as before, and finish.
async fn review_run<O, N>(name: &str, old: O, new: N, msg: O::Message)
where
    O: Workflow<Reply = u64> + Clone,
    O::State: Default,
    O::Message: Clone,
    N: Workflow,
{
    let class = compare(&manifest(&old), &manifest(&new)).class;
    assert_eq!(class, Class::Review, "{name}");
    let env = TestEnv::new().register(old.clone());
    let f = in_flight(&env, &old, name, &msg).await;
    let worker = deploy(&env, new);
    finish(&env, &f, &worker, msg, None).await;
}

/// The changes classed `review`, run: a condition moved past the amount sent, a sleep's length
/// computed another way, a message variant added.
#[tokio::test]
async fn the_changes_for_review_finish_turns_in_flight_when_they_behave_alike() {
    use enum_message::Msg;
    review_run("v-cond", branchy::f, condition_changed::f, AMOUNT).await;
    review_run("v-input", base::f, input_changed::f, AMOUNT).await;
    review_run(
        "v-variant",
        enum_message::f,
        variant_added::f,
        Msg::Pay(AMOUNT),
    )
    .await;
}

#[tokio::test]
async fn every_safe_change_finishes_the_turns_in_flight() {
    safe_run("r-layout", base::f, layout::f, AMOUNT, None).await;
    safe_run("r-after", base::f, insert_after::f, AMOUNT, Some("c")).await;
    safe_run("r-branch", base::f, new_branch::f, AMOUNT, None).await;
    safe_run("r-else", branchy::f, else_added::f, AMOUNT, Some("small")).await;
    safe_run("r-optional", base::f, optional_field::f, AMOUNT, None).await;
    safe_run("r-patch", base::f, patch_added::f, AMOUNT, Some("x")).await;
}

/// A signal accepted in addition: the turn waiting for the approval gets it after the deploy.
#[tokio::test]
async fn a_signal_added_finishes_the_turn_waiting_for_the_approval() {
    let (env, f, worker) = prepare("r-signal", waiting::f, signal_added::f, &AMOUNT).await;
    f.asleep
        .signal_waiting(Approval { ok: true }, "ok-1")
        .await
        .unwrap();
    finish(&env, &f, &worker, AMOUNT, None).await;
}

/// The next version, through a real upgrade: every instance moves to v2 and its turns finish
/// there, the asleep one running v2's `receipt` after `b`.
#[tokio::test]
async fn the_next_version_finishes_the_turns_in_flight_after_the_upgrade() {
    let class = compare(&manifest(&base::f), &manifest(&next_version::f)).class;
    assert_eq!(class, Class::Safe);
    let env = TestEnv::new().register(base::f);
    let f = in_flight(&env, &base::f, "r-next", &AMOUNT).await;
    let worker = deploy(&env, base::f).register(next_version::f);
    // The deploy registers v2's replay manifest, which the upgrade checks against.
    worker.register_schemas().await.unwrap();
    let mut moved = Vec::new();
    for h in [&f.idle, &f.asleep, &f.retrying] {
        moved.push(h.upgrade(&next_version::f).await.unwrap());
    }
    moved[0].send(AMOUNT, "m2").await.unwrap();
    for _ in 0..4 {
        env.clock().advance(HOUR);
        worker.run_until_idle().await.unwrap();
    }
    for (h, n) in [
        (&moved[0], 1),
        (&moved[0], 2),
        (&moved[1], 1),
        (&moved[2], 1),
    ] {
        let t = turn(h, n).await;
        assert_eq!(
            t.status,
            TurnStatus::Completed,
            "{} turn {n}: {t:?}",
            h.id()
        );
        assert_eq!(h.reply(n).await.unwrap(), Some(AMOUNT), "{}", h.id());
        ran_once(h.id());
    }
    for h in [&moved[0], &moved[1]] {
        assert!(
            ran_once(h.id()).iter().any(|e| e.ends_with("/receipt")),
            "{}: v2 ran its receipt",
            h.id()
        );
        assert_eq!(
            turn(h, if h.id().ends_with("idle") { 2 } else { 1 })
                .await
                .version,
            "v2"
        );
    }
}

/// An amount no report, error or event may show.
const SECRET: u64 = 987_654_321;

/// An instance of `old` (`name`) with turn 1 completed on `msg`, turn 2 asleep at `nap` (or
/// waiting for the approval) on it, and turn 3 queued behind.
async fn asleep<O>(env: &TestEnv, old: &O, name: &str, msg: &O::Message) -> Handle<O>
where
    O: Workflow,
    O::State: Default,
    O::Message: Clone,
{
    let h = env.start(old, name).await.unwrap();
    h.send(msg.clone(), "m1").await.unwrap();
    env.run_until_idle().await.unwrap();
    env.advance(HOUR).await.unwrap();
    assert_eq!(turn(&h, 1).await.status, TurnStatus::Completed, "{name}");
    h.send(msg.clone(), "m2").await.unwrap();
    h.send(msg.clone(), "m3").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(turn(&h, 2).await.status, TurnStatus::Waiting, "{name}");
    h
}

/// After a deploy over [`asleep`]'s instance: time passes and turn 2 is suspended, not failed
/// and not retried (its attempt count stays through days), turn 3 stays queued, and the
/// report names the call's line in fixtures.rs when the code made one. The report.
async fn suspended<O: Workflow>(env: &TestEnv, h: &Handle<O>, worker: &Worker) -> MismatchReport {
    env.clock().advance(HOUR);
    worker.run_until_idle().await.unwrap();
    let t = turn(h, 2).await;
    assert_eq!(t.status, TurnStatus::Suspended, "{}: {t:?}", h.id());
    for _ in 0..3 {
        env.clock().advance(DAY);
        worker.run_until_idle().await.unwrap();
    }
    let later = turn(h, 2).await;
    assert_eq!(later.status, TurnStatus::Suspended, "{}", h.id());
    assert_eq!(
        later.attempt,
        t.attempt,
        "{}: no attempt while suspended",
        h.id()
    );
    assert_eq!(turn(h, 3).await.status, TurnStatus::Queued, "{}", h.id());
    let report = later.mismatch.expect("a suspended turn carries its report");
    if report.found.is_some() {
        let at = report.at.as_deref().unwrap_or_default();
        assert!(
            at.starts_with("runtime/tests/it/compat_fixtures/fixtures.rs:"),
            "{}: {at:?}",
            h.id()
        );
    }
    report
}

/// A change that needs a patch or breaks suspends the turn in flight; the fix its finding
/// suggests is classed `safe` and finishes the turns in flight.
async fn suspends_then_fixed<O, N, F>(
    name: &str,
    old: O,
    new: N,
    fixed: F,
    msg: O::Message,
) -> MismatchReport
where
    O: Workflow<Reply = u64> + Clone,
    O::State: Default,
    O::Message: Clone,
    N: Workflow,
    F: Workflow,
{
    let env = TestEnv::new().register(old.clone());
    let h = asleep(&env, &old, name, &msg).await;
    let report = suspended(&env, &h, &deploy(&env, new)).await;
    safe_run(&format!("{name}-fixed"), old, fixed, msg, None).await;
    report
}

#[tokio::test]
async fn a_change_that_needs_a_patch_suspends_and_its_fix_finishes() {
    let r = suspends_then_fixed("s-rename", base::f, rename::f, rename_fixed::f, AMOUNT).await;
    assert_eq!(r.found.map(|f| f.key).as_deref(), Some("amount"));
    suspends_then_fixed(
        "s-before",
        base::f,
        insert_before::f,
        insert_before_fixed::f,
        AMOUNT,
    )
    .await;
    suspends_then_fixed(
        "s-between",
        base::f,
        insert_between::f,
        insert_between_fixed::f,
        AMOUNT,
    )
    .await;
    suspends_then_fixed("s-reorder", base::f, reorder::f, reorder_fixed::f, AMOUNT).await;
    suspends_then_fixed(
        "s-loop",
        looped::f,
        loop_key_changed::f,
        loop_key_fixed::f,
        AMOUNT,
    )
    .await;
    suspends_then_fixed(
        "s-member",
        grouped::f,
        member_added::f,
        member_added_fixed::f,
        AMOUNT,
    )
    .await;
    suspends_then_fixed(
        "s-unpatch",
        patch_added::f,
        patch_removed::f,
        patch_added::f,
        AMOUNT,
    )
    .await;
}

/// A change at or after `b` that the classifier flags (a turn that saved `b` would no longer
/// replay) meets a turn asleep at `nap`, which has not saved `b`: it finishes on the new code,
/// running no step twice; the suggested fix finishes turns in flight too.
async fn asleep_before_the_change<N: Workflow, F: Workflow>(
    name: &str,
    new: N,
    fixed: F,
    class: Class,
) {
    assert_eq!(
        compare(&manifest(&base::f), &manifest(&new)).class,
        class,
        "{name}"
    );
    let env = TestEnv::new().register(base::f);
    let h = asleep(&env, &base::f, name, &AMOUNT).await;
    let worker = deploy(&env, new);
    for _ in 0..3 {
        env.clock().advance(HOUR);
        worker.run_until_idle().await.unwrap();
    }
    assert_eq!(turn(&h, 2).await.status, TurnStatus::Completed, "{name}");
    assert_eq!(h.reply(2).await.unwrap(), Some(AMOUNT), "{name}");
    let runs = ran_once(name);
    let b = runs.iter().filter(|e| e.ends_with("/b")).count();
    assert_eq!(b, 1, "{name}: only turn 1 ran `b`: {runs:?}");
    safe_run(&format!("{name}-fixed"), base::f, fixed, AMOUNT, None).await;
}

#[tokio::test]
async fn a_change_after_the_saved_steps_finishes_a_turn_asleep_before_it() {
    asleep_before_the_change(
        "s-remove",
        remove_last::f,
        remove_last_fixed::f,
        Class::NeedsPatch,
    )
    .await;
    asleep_before_the_change(
        "s-kind",
        kind_change::f,
        kind_change_fixed::f,
        Class::Breaks,
    )
    .await;
}

/// The same changes meet a turn that saved every step, `b` included, and failed before it
/// completed: it no longer replays, so it is suspended (not failed, not retried), with the
/// line of the call the new code made instead; the suggested fix finishes it with `b` run once.
#[tokio::test]
async fn a_change_after_the_saved_steps_suspends_a_turn_that_saved_them() {
    for (name, new) in [("r-remove", Changed::Remove), ("r-kind", Changed::Kind)] {
        let env = TestEnv::new().register(base::f);
        let h = env.start(&base::f, name).await.unwrap();
        fixtures::fail_after_b(name);
        h.send(AMOUNT, "m1").await.unwrap();
        env.run_until_idle().await.unwrap();
        env.advance(HOUR).await.unwrap();
        let t = turn(&h, 1).await;
        let keys: Vec<&str> = t.steps.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["a", "nap", "b"], "{name}: {t:?}");
        assert_eq!(t.status, TurnStatus::Queued, "{name}: retrying");
        h.send(AMOUNT, "m2").await.unwrap();
        let worker = match new {
            Changed::Remove => deploy(&env, remove_last::f),
            Changed::Kind => deploy(&env, kind_change::f),
        };
        for _ in 0..3 {
            env.clock().advance(DAY);
            worker.run_until_idle().await.unwrap();
        }
        let t = turn(&h, 1).await;
        assert_eq!(t.status, TurnStatus::Suspended, "{name}: {t:?}");
        // Attempt 1 failed after `b`; attempt 2 met the change and suspended; none since.
        assert_eq!(t.attempt, 2, "{name}: no attempt counted while suspended");
        assert_eq!(turn(&h, 2).await.status, TurnStatus::Queued, "{name}");
        let report = t.mismatch.expect("a suspended turn carries its report");
        assert_eq!(report.position, 2, "{name}: {report:?}");
        if let Changed::Kind = new {
            let at = report.at.unwrap_or_default();
            assert!(
                at.starts_with("runtime/tests/it/compat_fixtures/fixtures.rs:"),
                "{at}"
            );
        }
        // The fix deployed instead, and the suspended turn resumed on it (an upgrade to the
        // instance's own version, checked against the fix's manifest): it keeps every saved
        // step, `b` included.
        let fixed = match new {
            Changed::Remove => resume_on(&env, &h, remove_last_fixed::f).await,
            Changed::Kind => resume_on(&env, &h, kind_change_fixed::f).await,
        };
        for _ in 0..6 {
            env.clock().advance(HOUR);
            fixed.run_until_idle().await.unwrap();
        }
        assert_eq!(turn(&h, 1).await.status, TurnStatus::Completed, "{name}");
        assert_eq!(turn(&h, 2).await.status, TurnStatus::Completed, "{name}");
        // Turn 1 replayed its saved `b`, never ran it again: no effect id ran twice.
        ran_once(name);
        let events = h.instance().await.unwrap().events;
        assert_eq!(
            events.last().map(|e| e.action.as_str()),
            Some("resume"),
            "{name}"
        );
    }
}

/// Deploy `fix` (its manifest registered) and resume `h`'s suspended turn on it.
async fn resume_on<F: Workflow + Copy>(env: &TestEnv, h: &Handle<base::f>, fix: F) -> Worker {
    let worker = deploy(env, fix);
    worker.register_schemas().await.unwrap();
    h.upgrade(&fix).await.unwrap();
    worker
}

#[derive(Clone, Copy)]
enum Changed {
    Remove,
    Kind,
}

/// Assert `text` shows no payload value.
fn no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(&SECRET.to_string()),
        "{what} shows a payload value: {text}"
    );
}

/// Saved data the new code cannot decode suspends the turn like a replay mismatch: the report
/// names what could not be read and how, no payload value shows anywhere, and the readable
/// variant is classed `safe` and finishes the turns.
async fn unreadable<O, N, F>(
    name: &str,
    (old, new, fixed): (O, N, F),
    (msg, fix_msg): (O::Message, O::Message),
    part: &str,
) -> MismatchReport
where
    O: Workflow<Reply = u64> + Clone,
    O::State: Default,
    O::Message: Clone,
    N: Workflow,
    F: Workflow,
{
    let env = TestEnv::new().register(old.clone());
    let h = asleep(&env, &old, name, &msg).await;
    let r = suspended(&env, &h, &deploy(&env, new)).await;
    assert!(r.message.contains(part), "{name}: {}", r.message);
    assert!(
        r.message.contains("cannot be read"),
        "{name}: {}",
        r.message
    );
    let t = turn(&h, 2).await;
    no_secret(name, &format!("{r:?} {:?}", t.error));
    let info = h.instance().await.unwrap();
    no_secret(name, &format!("{:?}", info.events));
    safe_run(&format!("{name}-fixed"), old, fixed, fix_msg, None).await;
    r
}

#[tokio::test]
async fn saved_data_the_new_code_cannot_read_suspends_the_turn() {
    use enum_message::Msg;
    let r = unreadable(
        "d-state",
        (base::f, required_field::f, required_field_fixed::f),
        (SECRET, AMOUNT),
        "the state",
    )
    .await;
    assert!(r.message.contains("missing field `owner`"), "{}", r.message);
    assert_eq!(r.found, None);
    let r = unreadable(
        "d-message",
        (enum_message::f, variant_removed::f, variant_kept::f),
        (Msg::Refund(SECRET), Msg::Refund(AMOUNT)),
        "the message",
    )
    .await;
    assert!(r.message.contains("unknown variant"), "{}", r.message);
    let r = unreadable(
        "d-output",
        (typed::f, output_changed::f, output_kept::f),
        (SECRET, AMOUNT),
        "the output of step `a`",
    )
    .await;
    assert!(r.message.contains("another type"), "{}", r.message);
    assert_eq!(r.found.map(|f| f.key).as_deref(), Some("a"));
}

/// A buffered signal the new code cannot decode suspends the turn waiting for it; the readable
/// variant finishes it.
#[tokio::test]
async fn a_signal_the_new_code_cannot_read_suspends_the_turn() {
    let env = TestEnv::new().register(waiting::f);
    let h = env.start(&waiting::f, "d-signal").await.unwrap();
    h.send(SECRET, "m1").await.unwrap();
    h.send(SECRET, "m2").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(turn(&h, 1).await.status, TurnStatus::Waiting);
    let worker = deploy(&env, signal_changed::f);
    h.signal_waiting(Approval { ok: true }, "ok-1")
        .await
        .unwrap();
    worker.run_until_idle().await.unwrap();
    let t = turn(&h, 1).await;
    assert_eq!(t.status, TurnStatus::Suspended, "{t:?}");
    let r = t.mismatch.clone().unwrap();
    assert!(r.message.contains("signal `approval`"), "{}", r.message);
    assert!(r.message.contains("missing field `by`"), "{}", r.message);
    let at = r.at.as_deref().unwrap_or_default();
    assert!(
        at.starts_with("runtime/tests/it/compat_fixtures/fixtures.rs:"),
        "{at}"
    );
    no_secret("signal", &format!("{r:?} {:?}", t.error));
    for _ in 0..3 {
        env.clock().advance(DAY);
        worker.run_until_idle().await.unwrap();
    }
    let later = turn(&h, 1).await;
    assert_eq!(
        (later.status, later.attempt),
        (TurnStatus::Suspended, t.attempt)
    );
    assert_eq!(turn(&h, 2).await.status, TurnStatus::Queued);

    let (env, f, worker) = prepare(
        "d-signal-fixed",
        waiting::f,
        signal_changed_fixed::f,
        &AMOUNT,
    )
    .await;
    f.asleep
        .signal_waiting(Approval { ok: true }, "ok-1")
        .await
        .unwrap();
    finish(&env, &f, &worker, AMOUNT, None).await;
}

/// `required_field` under `on_mismatch = "fail"`: the unreadable state fails the turn for
/// good instead, as a replay mismatch would.
#[workflow(name = "order", on_mismatch = "fail")]
pub async fn strict_required(
    ctx: &mut Turn,
    s: required_field::S2,
    m: u64,
) -> Result<Done<required_field::S2, u64>, TurnError> {
    ctx.sleep("nap", HOUR).await?;
    Ok(Done::new(s).reply(m))
}

#[tokio::test]
async fn on_mismatch_fail_fails_the_turn_with_unreadable_data() {
    let env = TestEnv::new().register(base::f);
    let h = asleep(&env, &base::f, "d-strict", &SECRET).await;
    env.clock().advance(HOUR);
    deploy(&env, strict_required)
        .run_until_idle()
        .await
        .unwrap();
    let t = turn(&h, 2).await;
    assert_eq!(t.status, TurnStatus::Failed, "{t:?}");
    assert!(t.mismatch.is_none());
    let error = t.error.clone().unwrap_or_default();
    assert!(error.contains("the state cannot be read"), "{error}");
    no_secret("strict", &error);
}
