//! Workers and handles over HTTP: the runtime's own behaviour (steps, sleeps, signals,
//! continuations, retries that replay, lost turns, heartbeats, releases) with the `Http`
//! backend between them and an in-process turnwise server, plus a proxy that loses answers
//! after the server applied them, so every retried route must be an exact, harmless repeat.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use common::HttpFixture;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use turnwise::clock::{Clock, ManualClock};
use turnwise::prelude::*;
use turnwise::protocol::{CheckpointKind, TurnStatus};
use turnwise::{Backend, EngineConfig, Http};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
/// Bounds every real-time wait.
const GUARD: Duration = Duration::from_secs(10);

/// A worker over `backend` on the fixture's clock, as the test environment builds one.
fn worker(backend: Http, clock: &ManualClock) -> Worker {
    Worker::new(backend)
        .id("http-worker")
        .clock(Arc::new(clock.clone()) as Arc<dyn Clock>)
        .progress_every(Duration::ZERO)
        .claim_wait(Duration::from_millis(50))
}

// ---------------------------------------------------------------------------------------------
// The counter: a step, a sleep, a signal wait and a continuation
// ---------------------------------------------------------------------------------------------

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
struct Count {
    count: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Add {
    add: u64,
    /// Continue this many more times, adding 1 each time.
    more: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Bump(u64);

impl Signal for Bump {
    const NAME: &'static str = "bump";
}

#[derive(Clone, Default)]
struct Counter {
    /// Real executions of the `add` step.
    steps: Arc<AtomicUsize>,
}

impl Accepts<Bump> for Counter {}

impl Workflow for Counter {
    type State = Count;
    type Message = Add;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "counter";
    const VERSION: &'static str = "v1";
    const SIGNALS: &'static [&'static str] = &["bump"];

    async fn run(&self, ctx: &mut Turn<Self>, state: Count, msg: Add) -> TurnResult<Self> {
        let steps = self.steps.clone();
        let add = ctx
            .step("add", |_s| async move {
                steps.fetch_add(1, SeqCst);
                Ok(msg.add)
            })
            .await?;
        ctx.sleep("cool-down", HOUR).await?;
        let bump = ctx
            .wait_for_signal::<Bump>("bump", DAY)
            .await?
            .map_or(0, |b| b.0);
        let count = state.count + add + bump;
        if msg.more > 0 {
            return Ok(ctx.continue_(
                Count { count },
                Add {
                    add: 1,
                    more: msg.more - 1,
                },
            ));
        }
        Ok(Done::new(Count { count }).reply(count))
    }
}

/// The counter's whole life over `backend`: returns the handle for further checks.
async fn run_counter(f: &HttpFixture, backend: Http, wf: &Counter) -> Handle<Counter> {
    let w = worker(backend.clone(), f.clock()).register(wf.clone());
    let h = wf.start(&backend, "counter-1").await.unwrap();
    // Starting again is idempotent.
    wf.start(&backend, "counter-1").await.unwrap();
    let first = h.send(Add { add: 2, more: 1 }, "m1").await.unwrap();
    assert_eq!(first.number, 1);
    assert_eq!(
        h.send(Add { add: 2, more: 1 }, "m1").await.unwrap().number,
        1,
        "a message id is admitted once"
    );

    // The step runs, then the sleep releases the turn.
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting, "{t:?}");
    let kinds: Vec<_> = t.steps.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [CheckpointKind::Step, CheckpointKind::Sleep]);

    // Not due yet: nothing to claim. Then the hour passes and the wait suspends the turn.
    assert_eq!(w.run_until_idle().await.unwrap(), 0);
    f.clock().advance(HOUR);
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Waiting);

    // The signal resumes it: it completes and continues as turn 2, which runs to its sleep.
    h.signal(1, Bump(10), "s1").await.unwrap();
    h.signal(1, Bump(10), "s1").await.unwrap();
    assert_eq!(w.run_until_idle().await.unwrap(), 2);
    let t1 = h.turn(1).await.unwrap();
    assert_eq!(t1.status, TurnStatus::Completed, "{t1:?}");
    assert_eq!(t1.continued_to, Some(2));
    assert_eq!(h.state().await.unwrap(), Count { count: 12 });

    // Turn 2 sleeps an hour, waits a day for a signal that never comes, and replies.
    f.clock().advance(HOUR);
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    f.clock().advance(DAY);
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    assert_eq!(h.state().await.unwrap(), Count { count: 13 });
    assert_eq!(h.reply(2).await.unwrap(), Some(13));
    let t2 = h.turn(2).await.unwrap();
    assert_eq!(t2.message_id, "continue-1");
    assert_eq!(t2.attempt, 1, "sleeps and waits count no attempt");
    assert_eq!(
        wf.steps.load(SeqCst),
        2,
        "each turn's step ran once, replayed on every resume"
    );
    let history = h.history(None).await.unwrap();
    assert_eq!(history.turns.len(), 2);
    assert!(h.inbox().await.unwrap().messages.is_empty());
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_with_step_sleep_signal_and_continuation() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Counter::default();
    run_counter(&f, f.http(), &wf).await;
}

// ---------------------------------------------------------------------------------------------
// A proxy that loses answers
// ---------------------------------------------------------------------------------------------

/// Routes whose first answer to each distinct body the proxy throws away (after the server
/// applied the request), answering `503` instead: exactly the routes the client retries.
const LOSSY: &[&str] = &[
    "/v1/workflows/instances",
    "/v1/workflows/instances/message",
    "/v1/workflows/turns/signal",
    "/v1/workflows/turns/operation",
    "/v1/workflows/turns/progress",
    "/v1/workflows/turns/checkpoint",
    "/v1/workflows/turns/wait-signal",
    "/v1/workflows/turns/complete",
];

#[derive(Default)]
struct Losses {
    /// `(path, body)` pairs whose answer was lost once.
    seen: HashSet<(String, Vec<u8>)>,
    /// How many answers were lost, by path.
    lost: Vec<String>,
}

/// Start the proxy in front of `upstream`; answers its base URL and its record.
async fn lossy_proxy(upstream: String) -> (String, Arc<Mutex<Losses>>) {
    let losses = Arc::new(Mutex::new(Losses::default()));
    let client = reqwest::Client::new();
    let record = losses.clone();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let client = client.clone();
            let upstream = upstream.clone();
            let record = record.clone();
            async move {
                let target = format!(
                    "{upstream}{}",
                    uri.path_and_query().map_or("", |p| p.as_str())
                );
                let mut request = client.request(method.clone(), target).body(body.clone());
                for name in ["authorization", "content-type", "lbb-version", "user-agent"] {
                    if let Some(v) = headers.get(name) {
                        request = request.header(name, v.as_bytes());
                    }
                }
                let answer = match request.send().await {
                    Ok(a) => a,
                    Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
                };
                let status = answer.status().as_u16();
                let bytes = answer.bytes().await.unwrap_or_default();
                let path = uri.path().to_owned();
                if method == Method::POST && LOSSY.contains(&path.as_str()) {
                    let mut r = record.lock().unwrap();
                    if r.seen.insert((path.clone(), body.to_vec())) {
                        r.lost.push(path);
                        return lost();
                    }
                }
                let mut response = (StatusCode::from_u16(status).unwrap(), bytes).into_response();
                response
                    .headers_mut()
                    .insert("content-type", "application/json".parse().unwrap());
                response
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), losses)
}

fn lost() -> Response {
    let body = r#"{"error":{"type":"api_error","code":"upstream_lost","message":"the answer was lost","request_id":null,"doc_url":null}}"#;
    let mut r = (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
    r.headers_mut().insert("retry-after", "0".parse().unwrap());
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_are_retried_as_exact_repeats() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let (proxy, losses) = lossy_proxy(f.base_url().to_owned()).await;
    let backend = Http::builder(proxy)
        .token(Some(common::TOKEN.to_owned()))
        .retry_delay(Duration::from_millis(5))
        .build()
        .unwrap();
    let wf = Counter::default();
    // The same life, the same results, although every retried call's first answer was lost.
    run_counter(&f, backend, &wf).await;

    let lost = losses.lock().unwrap().lost.clone();
    for path in LOSSY {
        if *path == "/v1/workflows/turns/progress" || *path == "/v1/workflows/turns/operation" {
            continue; // the counter's step reports no progress; operations checked below
        }
        assert!(
            lost.iter().any(|p| p == path),
            "no answer of {path} was lost: {lost:?}"
        );
    }
    assert!(lost.iter().any(|p| p == "/v1/workflows/turns/operation"));
    // Two turns: two completions, each applied once and answered on its retry.
    assert_eq!(
        lost.iter()
            .filter(|p| *p == "/v1/workflows/turns/complete")
            .count(),
        2
    );
}

// ---------------------------------------------------------------------------------------------
// A retried turn replays its saved step
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Charge {
    charges: Arc<AtomicUsize>,
    mails: Arc<AtomicUsize>,
}

impl Workflow for Charge {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "charge";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, total: u64, amount: u64) -> TurnResult<Self> {
        let charges = self.charges.clone();
        let charged = ctx
            .step("charge", |s| async move {
                charges.fetch_add(1, SeqCst);
                assert!(s.effect_id().ends_with("/charge"));
                Ok(amount)
            })
            .await?;
        if self.mails.fetch_add(1, SeqCst) == 0 {
            return Err(TurnError::retry("the mail server is down"));
        }
        Ok(Done::new(total + charged).reply(total + charged))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_step_is_not_run_again() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Charge::default();
    let w = worker(f.http(), f.clock()).register(wf.clone());
    let h = wf.start(&f.http(), "charge-1").await.unwrap();
    h.send(7, "m1").await.unwrap();

    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Queued, "backing off: {t:?}");
    assert_eq!(t.error.as_deref(), Some("Error: the mail server is down"));
    assert_eq!(t.steps.len(), 1, "the step stays saved");

    // The backoff (1 s) passes; the second attempt replays the charge.
    f.clock().advance(Duration::from_secs(1));
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 2), "{t:?}");
    assert_eq!(h.state().await.unwrap(), 7);
    assert_eq!(wf.charges.load(SeqCst), 1, "charged once");
}

// ---------------------------------------------------------------------------------------------
// Lost turns, heartbeats, releases
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Gate {
    executions: AtomicUsize,
    after: AtomicUsize,
    entered: Notify,
    open: Notify,
}

/// Holds its first step execution until the gate opens.
#[derive(Clone, Default)]
struct Held {
    gate: Arc<Gate>,
    lease: Option<Duration>,
}

impl Workflow for Held {
    type State = u32;
    type Message = u32;
    type Reply = u32;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "held";
    const VERSION: &'static str = "v1";

    fn options(&self) -> WorkflowOptions {
        match self.lease {
            Some(lease) => WorkflowOptions::default().lease(lease),
            None => WorkflowOptions::default(),
        }
    }

    async fn run(&self, ctx: &mut Turn<Self>, state: u32, n: u32) -> TurnResult<Self> {
        let gate = self.gate.clone();
        let n = ctx
            .step("work", |_s| async move {
                let first = gate.executions.fetch_add(1, SeqCst) == 0;
                gate.entered.notify_one();
                if first {
                    tokio::time::timeout(GUARD, gate.open.notified())
                        .await
                        .map_err(|_| TurnError::permanent("held past the guard"))?;
                }
                Ok(n)
            })
            .await?;
        self.gate.after.fetch_add(1, SeqCst);
        Ok(Done::new(state + n).reply(n))
    }
}

async fn entered(wf: &Held) {
    tokio::time::timeout(GUARD, wf.gate.entered.notified())
        .await
        .expect("the step started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turn_stops_silently() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Held::default();
    let w = worker(f.http(), f.clock()).register(wf.clone());
    let h = wf.start(&f.http(), "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let run = tokio::spawn(async move { w.run_once().await });
    entered(&wf).await;
    h.cancel_turn(1).await.unwrap();
    wf.gate.open.notify_one();
    assert!(tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap());

    // The step's checkpoint travels with the completion (the handler's code after the step
    // ran, as code between durable calls may, and wrote nothing); the checkpoint got 409
    // turn_lease_lost: nothing was saved and no failure was sent.
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Cancelled, "{t:?}");
    assert!(t.steps.is_empty());
    assert_eq!(t.error, None);
    assert_eq!(wf.gate.after.load(SeqCst), 1);
    assert_eq!(h.state().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_to_expiry_stops_the_late_holder_silently() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Held::default();
    let w = worker(f.http(), f.clock()).register(wf.clone());
    let h = wf.start(&f.http(), "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let first = w.clone();
    let run = tokio::spawn(async move { first.run_once().await });
    entered(&wf).await;
    // The 60 s lease runs out on the engine's clock; another claim takes the turn and ends it.
    f.clock().advance(Duration::from_secs(60));
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 2), "{t:?}");

    // The first holder's late checkpoint (sent with its completion, after its code after the
    // step ran) is refused over HTTP, and it stops without a word.
    wf.gate.open.notify_one();
    assert!(tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.steps.len()), (TurnStatus::Completed, 1));
    assert_eq!(wf.gate.after.load(SeqCst), 2);
    assert_eq!(
        h.state().await.unwrap(),
        5,
        "the late completion wrote nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_extend_the_lease_over_http() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Held {
        lease: Some(Duration::from_millis(1500)),
        ..Held::default()
    };
    let w = worker(f.http(), f.clock()).register(wf.clone());
    let h = wf.start(&f.http(), "held-1").await.unwrap();
    h.send(1, "m1").await.unwrap();

    let run = tokio::spawn(async move { w.run_once().await });
    entered(&wf).await;
    let claimed = f.clock().now_ms();
    assert_eq!(h.turn(1).await.unwrap().deadline_ms, Some(claimed + 1500));
    f.clock().advance(Duration::from_millis(1000));
    let give_up = tokio::time::Instant::now() + GUARD;
    let deadline = loop {
        let d = h.turn(1).await.unwrap().deadline_ms.unwrap();
        if d > claimed + 1500 {
            break d;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "no heartbeat arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(deadline, claimed + 1000 + 1500);

    wf.gate.open.notify_one();
    assert!(tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    assert_eq!(h.turn(1).await.unwrap().status, TurnStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_now_releases_the_held_turn_over_http() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Held::default();
    let w = worker(f.http(), f.clock()).register(wf.clone());
    let h = wf.start(&f.http(), "held-1").await.unwrap();
    h.send(5, "m1").await.unwrap();

    let running = w.clone().run_async();
    entered(&wf).await;
    let now = f.clock().now_ms();
    tokio::time::timeout(GUARD, running.stop_now())
        .await
        .unwrap()
        .unwrap();
    let t = h.turn(1).await.unwrap();
    assert_eq!(t.status, TurnStatus::Waiting, "{t:?}");
    assert_eq!(
        t.error.as_deref(),
        Some("the worker stopped and released the turn")
    );
    assert_eq!(t.wait.map(|w| w.until_ms), Some(now + 1000));

    f.clock().advance(Duration::from_secs(1));
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Completed, 1), "{t:?}");
}

/// Wait (at most [`GUARD`]) until the server's engine holds `n` claims parked in a long poll.
async fn until_parked(f: &HttpFixture, n: usize, what: &str) {
    let give_up = tokio::time::Instant::now() + GUARD;
    loop {
        let parked = f.engine().waiting_claims();
        if parked == n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "{what}: the server holds {parked} parked claims after {GUARD:?}, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serving_worker_long_polls_over_http() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Counter::default();
    let running = worker(f.http(), f.clock())
        .register(wf.clone())
        .claim_wait(Duration::from_secs(2))
        .concurrency(2)
        .run_async();
    let h = wf.start(&f.http(), "counter-1").await.unwrap();
    // Idle, each slot holds a claim open on the server, parked there until something is
    // ready; a worker polling with `wait_ms` 0 never has a claim parked.
    until_parked(&f, 2, "an idle worker with 2 slots").await;
    // Admitted while both slots hold a claim open: one of them wakes and takes it.
    h.send(Add { add: 3, more: 0 }, "m1").await.unwrap();
    let give_up = tokio::time::Instant::now() + GUARD;
    while h.turn(1).await.unwrap().steps.len() < 2 {
        assert!(tokio::time::Instant::now() < give_up, "the turn never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::timeout(GUARD, running.stop())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(wf.steps.load(SeqCst), 1);
}

/// How long stopping an idle worker may take: far below the server's longest claim wait
/// (10 s), which `stop` and `stop_now` used to wait out. A behaviour bound, not a benchmark.
const IDLE_STOP_BOUND: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_stops_over_http_without_waiting_out_its_claim() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let wf = Counter::default();
    for graceful in [true, false] {
        let running = worker(f.http(), f.clock())
            .register(wf.clone())
            .claim_wait(Duration::from_secs(60))
            .concurrency(2)
            .run_async();
        // Both slots' long-poll claims have reached the server and wait there.
        until_parked(&f, 2, "an idle worker with 2 slots, before it stops").await;
        let started = std::time::Instant::now();
        let stopped = if graceful {
            tokio::time::timeout(IDLE_STOP_BOUND, running.stop()).await
        } else {
            tokio::time::timeout(IDLE_STOP_BOUND, running.stop_now()).await
        };
        let which = if graceful { "stop" } else { "stop_now" };
        stopped
            .unwrap_or_else(|_| panic!("{which}() of an idle worker took over {IDLE_STOP_BOUND:?}"))
            .unwrap();
        println!(
            "{which}() of an idle worker returned after {:?}",
            started.elapsed()
        );
        // The server gives up the claims whose requests the worker dropped (and the next
        // round's count is its own worker's).
        until_parked(&f, 0, "a stopped worker's abandoned claims").await;
    }
    // The abandoned long polls took nothing: a message sent now is claimed by another worker,
    // on its first attempt, with no lease to wait out.
    let h = wf.start(&f.http(), "after-stop").await.unwrap();
    h.send(Add { add: 2, more: 0 }, "m1").await.unwrap();
    let w = worker(f.http(), f.clock()).register(wf.clone());
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    // The step ran and the sleep suspended the turn, on its first attempt.
    assert_eq!((t.status, t.attempt), (TurnStatus::Waiting, 1), "{t:?}");
    assert_eq!(wf.steps.load(SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_and_the_worker_stops_on_it() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let bad = Http::connect(f.base_url(), Some("wrong".to_owned())).unwrap();
    let e = bad.get_instance("x").await.unwrap_err();
    assert_eq!(e.status(), 401, "{e:?}");
    assert!(!e.is_retryable());
    let running = worker(bad, f.clock())
        .register(Counter::default())
        .run_async();
    // A claim refused with 401 ends the worker; stopping it then reports that refusal.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = tokio::time::timeout(GUARD, running.stop()).await.unwrap();
    assert_eq!(r.unwrap_err().status(), 401);
}

// ---------------------------------------------------------------------------------------------
// A transactional step over HTTP
// ---------------------------------------------------------------------------------------------

/// A transactional step: it needs an embedded engine on PostgreSQL.
#[workflow(name = "debit", version = "v1")]
async fn debit(ctx: &mut Turn, state: u64, cents: i64) -> Result<Done<u64, i64>, TurnError> {
    let n = ctx
        .transact("debit", move |tx| async move {
            tx.execute("UPDATE accounts SET cents = cents - $1", &[&cents])
                .await?;
            Ok(cents)
        })
        .await?;
    Ok(Done::new(state + 1).reply(n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_step_over_http_fails_the_turn_saying_why() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let h = debit.start(&f.http(), "acct-1").await.unwrap();
    h.send(5, "m1").await.unwrap();
    let w = worker(f.http(), f.clock()).register(debit);
    assert_eq!(w.run_until_idle().await.unwrap(), 1);
    let t = h.turn(1).await.unwrap();
    // For good, on the first attempt: retrying cannot help.
    assert_eq!((t.status, t.attempt), (TurnStatus::Failed, 1), "{t:?}");
    let error = t.error.unwrap_or_default();
    assert!(
        error.contains("needs a backend that offers step transactions")
            && error.contains("a remote server cannot share its database transaction"),
        "{error}"
    );
    assert!(t.steps.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Child workflows over HTTP: the SDK sends and waits, the server's engine delivers
// ---------------------------------------------------------------------------------------------

/// Doubles the number, or fails for good on zero.
struct Doubler;

impl Workflow for Doubler {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "doubler";
    const VERSION: &'static str = "v1";

    async fn run(&self, _ctx: &mut Turn<Self>, runs: u64, n: u64) -> TurnResult<Self> {
        if n == 0 {
            return Err(WorkflowError::new("nothing to double").into());
        }
        Ok(Done::new(runs + 1).reply(n * 2))
    }
}

/// Asks its child `doubler-<n>` to double `n`; replies with the double, or the child's error.
struct Asker;

impl Workflow for Asker {
    type State = u64;
    type Message = u64;
    type Reply = String;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "asker";
    const VERSION: &'static str = "v1";

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, n: u64) -> TurnResult<Self> {
        let answer = ctx
            .call_child("double", &Doubler, format!("doubler-{n}"), n)
            .await;
        match answer {
            Ok(d) => Ok(Done::new(state + d).reply(d.to_string())),
            Err(ChildError::Failed { error, .. }) => Ok(Done::new(state).reply(error)),
            Err(e) => Err(e.into()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_workflow_over_http() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let w = worker(f.http(), f.clock())
        .register(Asker)
        .register(Doubler);
    let h = Asker.start(&f.http(), "asker-1").await.unwrap();
    h.send(21, "m1").await.unwrap();
    h.send(0, "m2").await.unwrap();
    // Turn 1 sends and waits; the child runs and its outcome is delivered by the server; turn
    // 1 replays and completes; the same again for turn 2.
    assert_eq!(w.run_until_idle().await.unwrap(), 6);
    assert_eq!(h.reply(1).await.unwrap().as_deref(), Some("42"));
    assert_eq!(
        h.reply(2).await.unwrap().as_deref(),
        Some("WorkflowError: nothing to double")
    );
    assert_eq!(h.state().await.unwrap(), 42);
    let child = Doubler.handle(&f.http(), "doubler-21");
    assert_eq!(child.reply(1).await.unwrap(), Some(42));
    let t = child.turn(1).await.unwrap();
    assert_eq!(t.origin.map(|o| o.kind).as_deref(), Some("workflow"));
}

// ---------------------------------------------------------------------------------------------
// A replay mismatch over HTTP: the worker suspends the turn, the handle restarts and forks it
// ---------------------------------------------------------------------------------------------

/// `order` as first deployed (charge, nap), or changed under the same version (charge, check,
/// nap), with a hand-written manifest naming each call's line.
#[derive(Clone, Default)]
struct Order {
    changed: bool,
    /// Real executions of the `check` step.
    checks: Arc<AtomicUsize>,
}

impl Workflow for Order {
    type State = u64;
    type Message = u64;
    type Reply = u64;
    type Codec = turnwise::codec::JsonCodec;
    const NAME: &'static str = "order";
    const VERSION: &'static str = "v1";

    fn manifest(&self) -> Option<turnwise::manifest::Manifest> {
        use turnwise::manifest::{Call, CallKind, Manifest, Node};
        let mut calls = vec![Node::Call(Call::new(
            CallKind::Step,
            "charge",
            "src/order.rs:12",
        ))];
        if self.changed {
            calls.push(Node::Call(Call::new(
                CallKind::Step,
                "check",
                "src/order.rs:13",
            )));
        }
        calls.push(Node::Call(Call::new(
            CallKind::Sleep,
            "nap",
            "src/order.rs:14",
        )));
        Some(Manifest::new(Self::NAME, Self::VERSION, Node::Seq(calls)))
    }

    async fn run(&self, ctx: &mut Turn<Self>, state: u64, amount: u64) -> TurnResult<Self> {
        ctx.step("charge", |_s| async move { Ok(amount) }).await?;
        if self.changed {
            let checks = self.checks.clone();
            ctx.step("check", |_s| async move {
                checks.fetch_add(1, SeqCst);
                Ok(true)
            })
            .await?;
        }
        ctx.sleep("nap", HOUR).await?;
        Ok(Done::new(state + amount).reply(state + amount))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_mismatch_suspends_over_http_and_the_handle_restarts_and_forks() {
    let f = HttpFixture::memory(EngineConfig::default()).await;
    let before = Order::default();
    let h = before.start(&f.http(), "order-1").await.unwrap();
    h.send(31_337, "m1").await.unwrap();
    h.send(2, "m2").await.unwrap();
    worker(f.http(), f.clock())
        .register(before.clone())
        .run_until_idle()
        .await
        .unwrap();
    let changed = Order {
        changed: true,
        ..Order::default()
    };
    let w = worker(f.http(), f.clock()).register(changed.clone());
    f.clock().advance(HOUR);
    assert_eq!(w.run_until_idle().await.unwrap(), 1);

    let t = h.turn(1).await.unwrap();
    assert_eq!((t.status, t.attempt), (TurnStatus::Suspended, 1), "{t:?}");
    let r = t.mismatch.expect("the report crossed the wire");
    assert_eq!((r.position, r.at.as_deref()), (1, Some("src/order.rs:13")));
    assert!(!serde_json::to_string(&r).unwrap().contains("31337"));
    assert_eq!(
        changed.checks.load(SeqCst),
        0,
        "nothing ran after the divergence"
    );
    assert!(matches!(
        tokio::time::timeout(GUARD, h.result(1)).await.unwrap(),
        Err(CallError::Suspended { turn: 1, .. })
    ));
    f.clock().advance(DAY);
    assert_eq!(w.run_until_idle().await.unwrap(), 0, "no retry spins");

    let ops = h.clone().acting_as("ops");
    let forked = ops.fork("order-2").await.unwrap();
    assert_eq!(forked.inbox().await.unwrap().messages.len(), 2);
    let done = ops
        .restart_turn(1, turnwise::protocol::RestartFrom::LastAccepted)
        .await
        .unwrap();
    let again = ops
        .restart_turn(1, turnwise::protocol::RestartFrom::LastAccepted)
        .await
        .unwrap();
    assert_eq!(again, done, "an exact repeat answers the same");
    assert!(matches!(
        ops.restart_turn(2, turnwise::protocol::RestartFrom::Scratch)
            .await,
        Err(turnwise::Error::NotSuspended { turn: Some(2), .. })
    ));
    w.run_until_idle().await.unwrap();
    f.clock().advance(HOUR);
    w.run_until_idle().await.unwrap();
    assert_eq!(h.reply(1).await.unwrap(), Some(31_337));
    let events: Vec<String> = h
        .instance()
        .await
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(events, ["suspend", "fork", "restart_turn"]);
}
