//! Runs: each attempt of a turn is a run, and the commit that ends the attempt (a completion, a
//! failure, a suspension, a lost lease, a cancellation) writes the run's summary. A suspended
//! run that resumes is the same run. Summaries are listed newest first with cursors, read one
//! by one, counted by hour, and kept `run_retention` (30 days by default).

use std::time::Duration;

use serde_json::json;
use turnwise::protocol::*;
use turnwise::{Backend, EngineConfig};

use crate::support::*;
use crate::{advance_ms, Fixture};

/// The default configuration with run retention off (`run_retention` zero keeps every run).
pub fn keep_all_config() -> EngineConfig {
    let mut config = EngineConfig::default();
    config.run_retention = Duration::ZERO;
    config
}

const DAY_MS: u64 = 24 * 3600 * 1000;

/// Every run of instance `id` (or of the namespace), newest first, read page by page with
/// pages of `limit`.
async fn all_runs<B: Backend + ?Sized>(b: &B, id: Option<&str>, limit: u32) -> Vec<WorkflowRun> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..1_000 {
        let page = ok(
            b.runs(RunsQuery {
                id: id.map(Into::into),
                cursor: cursor.clone(),
                limit: Some(limit),
            })
            .await,
            "list runs",
        );
        assert!(
            page.runs.len() <= limit as usize,
            "a page holds at most `limit` runs"
        );
        assert_eq!(
            page.has_more,
            page.next_cursor.is_some(),
            "has_more says whether there is a next_cursor"
        );
        out.extend(page.runs);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
    panic!("the runs listing never ended");
}

async fn runs_of<B: Backend + ?Sized>(b: &B, id: &str) -> Vec<WorkflowRun> {
    all_runs(b, Some(id), 100).await
}

fn outcomes(runs: &[WorkflowRun]) -> Vec<RunEnd> {
    runs.iter().map(|r| r.outcome).collect()
}

fn run_id(task: &TurnTask) -> String {
    task.turn
        .run
        .as_ref()
        .expect("a claimed turn has a run")
        .id
        .clone()
}

/// One summary per attempt: a run suspended by a sleep or a signal wait, then resumed, stays
/// one run whose summary is rewritten when it ends again; a failed attempt, an attempt whose
/// lease expired and the completing attempt are three runs, newest first.
pub async fn one_summary_per_attempt(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!({"go": 1})).await;
    assert!(
        runs_of(&b, "inst-1").await.is_empty(),
        "no run before a claim"
    );

    let first = claim(&b, "m1 is ready").await;
    let run1 = run_id(&first);
    assert!(
        runs_of(&b, "inst-1").await.is_empty(),
        "a running run has no summary yet"
    );
    sleep(&b, &lease(&first), 0, "nap", 1_000).await;
    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(
        outcomes(&runs),
        [RunEnd::Sleeping],
        "the sleep ended the run"
    );
    assert_eq!(runs[0].id, run1);
    assert_eq!(runs[0].turn_status, TurnStatus::Waiting);
    assert_eq!(runs[0].attempt, 1);

    advance_ms(&f, 1_000);
    let task = claim(&b, "the sleep is over").await;
    assert_eq!(run_id(&task), run1, "the resumed attempt is the same run");
    ok(
        b.wait_signal(wait_request(&lease(&task), 1, "wait", "go", 60_000))
            .await,
        "a signal wait with no signal",
    );
    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(
        outcomes(&runs),
        [RunEnd::WaitingSignal],
        "the same run, now ended by the signal wait"
    );
    assert_eq!(runs[0].id, run1);
    signal(&b, "inst-1", 1, "s1", "go", json!(true)).await;
    let task = claim(&b, "the signal arrived").await;
    assert_eq!(
        run_id(&task),
        run1,
        "a run resumed after a signal is the same run"
    );
    step(&b, &lease(&task), 2, "work", json!(1)).await;
    fail(&b, &lease(&task), "RuntimeError: boom").await;
    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(
        outcomes(&runs),
        [RunEnd::Failed],
        "still one run: the attempt failed"
    );
    let failed = &runs[0];
    assert_eq!(failed.error.as_deref(), Some("RuntimeError: boom"));
    assert_eq!(failed.turn_status, TurnStatus::Queued, "the turn backs off");
    assert_eq!(
        failed
            .steps
            .iter()
            .map(|s| s.key.as_str())
            .collect::<Vec<_>>(),
        ["nap", "wait", "work"],
        "the run saved the sleep, the signal wait and the step"
    );

    advance_ms(&f, 1_000);
    let second = claim(&b, "the backoff passed").await;
    assert_eq!(second.turn.attempt, 2);
    let run2 = run_id(&second);
    assert_ne!(run2, run1, "a new attempt is a new run");
    advance_ms(&f, 60_000);
    let third = claim(&b, "the lease of attempt 2 expired").await;
    assert_eq!(third.turn.attempt, 3);
    let run3 = run_id(&third);
    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(
        outcomes(&runs),
        [RunEnd::LeaseLost, RunEnd::Failed],
        "the claim that found the lease expired wrote the lost run's summary"
    );
    assert_eq!(runs[0].id, run2);
    assert!(
        runs[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("lease")),
        "a lost lease says so: {:?}",
        runs[0].error
    );

    complete(&b, &lease(&third), json!({"n": 1}), json!("done")).await;
    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(
        runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [run3.as_str(), run2.as_str(), run1.as_str()],
        "one run per attempt, newest first"
    );
    assert_eq!(
        outcomes(&runs),
        [RunEnd::Completed, RunEnd::LeaseLost, RunEnd::Failed]
    );
    assert_eq!(
        runs.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [3, 2, 1]
    );
    let done = &runs[0];
    assert_eq!(done.turn_status, TurnStatus::Completed);
    assert_eq!(done.error, None, "a completed run carries no error");
    assert_eq!(
        (
            done.workflow_id.as_str(),
            done.workflow_type.as_str(),
            done.version.as_str()
        ),
        ("inst-1", TYPE, VERSION)
    );
    assert_eq!((done.turn, done.message_id.as_str()), (1, "m1"));
    assert!(done.ended_at_ms >= done.started_at_ms);
}

/// A cancelled turn ends its run as cancelled, also a run that a sleep had suspended.
pub async fn cancel_ends_the_run(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    let task = claim(&b, "m1 is ready").await;
    sleep(&b, &lease(&task), 0, "nap", 60_000).await;
    control(&b, control_turn("inst-1", ControlAction::CancelTurn, 1)).await;
    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(outcomes(&runs), [RunEnd::Cancelled], "{runs:?}");
    assert_eq!(runs[0].turn_status, TurnStatus::Cancelled);
}

/// A summary names what the run did: the message's origin, the inbox before and after, the
/// `sample` and `counters` of the turn's result, the phases of its progress and what it
/// finished, the usage and the results report the worker sent, and the worker. A claim offers
/// `results_max`.
pub async fn summary_fields(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    let mut req = message_request("inst-1", "m1", json!({"pages": 3}));
    let mut origin = MessageOrigin::new("manual");
    origin.fields.insert("actor".into(), json!("ana"));
    req.origin = Some(origin);
    ok(b.send_message(req).await, "send m1 with an origin");
    send(&b, "inst-1", "m2", json!(null)).await;

    let task = claim(&b, "m1 is ready").await;
    assert_eq!(
        task.results_max,
        Some(RunResultsReport::MAX_INPUTS as u64),
        "the server keeps run results, so the task offers results_max"
    );
    let l = lease(&task);
    ok(
        b.operation(operation_request(&l, 0, "crawl")).await,
        "operation",
    );
    for (seq, (phase, done)) in [
        ("listing", 1),
        ("listing", 2),
        ("reading", 1),
        ("reading", 3),
    ]
    .into_iter()
    .enumerate()
    {
        let details = json!({"phase": phase, "done": done, "total": 3, "unit": "pages"});
        ok(
            b.progress(progress_request(
                &l,
                "crawl",
                seq as u64 + 1,
                details,
                json!(null),
            ))
            .await,
            "progress",
        );
        advance_ms(&f, 10);
    }
    checkpoint_step(&b, &l, 0, "crawl", json!({"pages": 3})).await;
    let mut done = complete_request(
        &l,
        json!({"seen": 3}),
        json!({"sample": ["p1", "p2", 7, "p3"], "counters": {"pages": 3, "bad": -1, "links": 12}}),
    );
    done.usage = Some(RunUsage {
        calls: Some(2),
        errors: Some(0),
        tokens_in: Some(100),
        tokens_out: Some(20),
        cost_micro_usd: Some(150),
    });
    done.results = Some(RunResultsReport {
        counts: Some(RunResultCounts {
            written: Some(1),
            failed: Some(1),
            ..RunResultCounts::default()
        }),
        inputs: None,
    });
    ok(b.complete(done).await, "complete with usage and results");

    let runs = runs_of(&b, "inst-1").await;
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(
        r.origin.as_ref().map(|o| o.kind.as_str()),
        Some("manual"),
        "the message's origin"
    );
    assert_eq!(
        r.origin.as_ref().and_then(|o| o.fields.get("actor")),
        Some(&json!("ana"))
    );
    assert_eq!(
        (r.queue_before, r.queue_after),
        (2, 1),
        "two messages were pending when it started, one after"
    );
    assert_eq!(
        r.sample.as_deref(),
        Some(&["p1".to_owned(), "p2".to_owned(), "p3".to_owned()][..]),
        "the names of the result's sample"
    );
    let counters = r.counters.as_ref().expect("counters");
    assert_eq!(
        counters
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect::<Vec<_>>(),
        [("links", 12), ("pages", 3)],
        "whole numbers by name; a negative one is left out"
    );
    assert_eq!(
        r.phases
            .iter()
            .map(|p| (p.phase.as_str(), p.done))
            .collect::<Vec<_>>(),
        [("listing", 2), ("reading", 3)],
        "one phase per name, with its last count"
    );
    assert!(r.phases[0].ended_at_ms > r.phases[0].started_at_ms);
    let finished = r.finished.as_ref().expect("what the run finished");
    assert_eq!(
        (finished.done, finished.unit.as_deref(), finished.total),
        (3, Some("pages"), Some(3))
    );
    assert_eq!(r.usage.as_ref().and_then(|u| u.cost_micro_usd), Some(150));
    assert_eq!(
        r.results
            .as_ref()
            .and_then(|x| x.counts.as_ref())
            .and_then(|c| c.written),
        Some(1),
        "the results report is kept"
    );
    assert_eq!(r.worker.as_deref(), Some(WORKER));
    assert_eq!(r.steps.len(), 1);
}

/// Pages of runs, newest first, with cursors; an instance's runs only; one run by id; runs
/// by hour; the bounds of `limit` and `hours`.
pub async fn paging_get_and_stats(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    create(&b, "inst-2").await;
    for i in 1..=5 {
        send(&b, "inst-1", &format!("m{i}"), json!(i)).await;
        run_next(&b, json!(i)).await;
        advance_ms(&f, 1);
    }
    send(&b, "inst-2", "m1", json!(null)).await;
    run_next(&b, json!(null)).await;

    let everything = all_runs(&b, None, 2).await;
    assert_eq!(
        everything.len(),
        6,
        "every run of the namespace, in pages of 2"
    );
    let ids: Vec<&str> = everything.iter().map(|r| r.id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.dedup();
    assert_eq!(ids, sorted, "newest first, no run twice");
    assert_eq!(everything[0].workflow_id, "inst-2", "the newest run first");

    let first = ok(
        b.runs(RunsQuery::instance("inst-1").limit(2)).await,
        "page 1",
    );
    assert_eq!(
        first.runs.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [5, 4]
    );
    assert!(first.has_more);
    let cursor = first.next_cursor.clone().expect("a next page");
    let second = ok(
        b.runs(RunsQuery::instance("inst-1").limit(2).cursor(cursor))
            .await,
        "page 2",
    );
    assert_eq!(
        second.runs.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [3, 2]
    );
    let all_one = runs_of(&b, "inst-1").await;
    assert_eq!(
        all_one.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [5, 4, 3, 2, 1],
        "only the instance's runs"
    );
    let last = ok(
        b.runs(RunsQuery::instance("inst-1").limit(5)).await,
        "one page of exactly all",
    );
    assert_eq!(last.runs.len(), 5);
    assert_eq!(last.next_cursor, None, "no cursor past the last run");
    assert!(!last.has_more);

    let one = ok(b.run(&all_one[2].id).await, "read one run");
    assert_eq!(one, all_one[2], "a run reads as it is listed");
    expect_not_found(b.run("0000000000000-nope-1").await, "an unknown run");

    let stats = ok(b.run_stats(2).await, "runs by hour");
    assert_eq!(stats.hours, 2);
    assert_eq!(stats.by_hour.len(), 2, "one entry per hour asked for");
    assert_eq!(
        stats.by_hour[1].start_ms - stats.by_hour[0].start_ms,
        3_600_000
    );
    let total: u64 = stats.by_hour.iter().map(|h| h.runs).sum();
    assert_eq!(total, 6);
    let completed: u64 = stats
        .by_hour
        .iter()
        .filter_map(|h| h.outcomes.get("completed"))
        .sum();
    assert_eq!(completed, 6);

    expect_invalid(
        b.runs(RunsQuery::default().limit(0)).await,
        "limit",
        "limit 0",
    );
    expect_invalid(
        b.runs(RunsQuery::default().limit(101)).await,
        "limit",
        "limit 101",
    );
    expect_invalid(b.run_stats(0).await, "hours", "hours 0");
    expect_invalid(b.run_stats(721).await, "hours", "hours 721");
    let other = f.backend_in("elsewhere");
    assert!(
        all_runs(&other, None, 100).await.is_empty(),
        "runs are per namespace"
    );
}

/// Runs are kept 30 days after they ended: the first commit that writes a run after that
/// deletes the expired ones.
pub async fn kept_thirty_days(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    run_next(&b, json!(1)).await;
    let old = runs_of(&b, "inst-1").await;
    assert_eq!(old.len(), 1);

    advance_ms(&f, 29 * DAY_MS);
    send(&b, "inst-1", "m2", json!(null)).await;
    run_next(&b, json!(2)).await;
    assert_eq!(
        runs_of(&b, "inst-1").await.len(),
        2,
        "a run 29 days old is kept"
    );

    advance_ms(&f, 2 * DAY_MS);
    send(&b, "inst-1", "m3", json!(null)).await;
    run_next(&b, json!(3)).await;
    let kept = runs_of(&b, "inst-1").await;
    assert_eq!(
        kept.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [3, 2],
        "the run that ended 31 days ago is gone"
    );
    expect_not_found(b.run(&old[0].id).await, "an expired run");
}

/// With `run_retention` zero every run is kept.
pub async fn zero_retention_keeps_all(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    send(&b, "inst-1", "m1", json!(null)).await;
    run_next(&b, json!(1)).await;
    advance_ms(&f, 400 * DAY_MS);
    send(&b, "inst-1", "m2", json!(null)).await;
    run_next(&b, json!(2)).await;
    assert_eq!(runs_of(&b, "inst-1").await.len(), 2);
}
