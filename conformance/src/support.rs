//! Helpers the cases share: request builders, one-call worker steps, error assertions and
//! "nothing was written" snapshots.
//!
//! Every helper that expects success panics with the call and the error when the backend
//! refuses, so a failing case names the protocol call that broke.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;
use turnwise::protocol::*;
use turnwise::{Backend, Error, Result};

use crate::Fixture;

/// The workflow type every case uses unless it needs several.
pub const TYPE: &str = "conformance";
/// The version every case uses unless it needs several.
pub const VERSION: &str = "v1";
/// The default worker id.
pub const WORKER: &str = "worker-a";
/// A second worker id, for fencing cases.
pub const OTHER_WORKER: &str = "worker-b";
/// How long, in real time, a spawned claim may take to reach the backend and park there
/// ([`let_claim_park`]). A claim parks in milliseconds; this only bounds a case whose claim
/// never parks, so that it fails with a message instead of hanging.
pub const PARK_BOUND: Duration = Duration::from_secs(5);
/// How long, in real time, a claim may take to answer once the event that concerns it has
/// happened ([`finish_claim`]).
///
/// Whether the event *rang* the claim is checked without any clock: [`assert_rung`] reads the
/// backend's count of parked claims as soon as the event's own call has returned, and a claim
/// the event did not ring is still asleep then. So this bound does not have to tell a prompt
/// wake-up from a slow one; it only has to tell a woken claim (it answers in milliseconds)
/// from one that answers when its own 10 s wait runs out, or that a poll finds later. 2 s is
/// five times under that wait, so such a case fails in 2 s, and hundreds of times what a woken
/// claim takes, so a loaded 2-core CI machine (PostgreSQL over HTTP included) stays well
/// inside it.
pub const WAKE_BOUND: Duration = Duration::from_secs(2);
/// How long, in real time, a claim may take to answer once the clock reached the time it
/// sleeps until ([`finish_claim_within`]; the due-timer case).
///
/// No call rings such a claim, so there is nothing to check without a clock, and the bound
/// must be tight enough to catch a claim whose timer never fires: the turnwise server holds a
/// claim as a series of engine claims of at most 1 s each, scanning again between them, so
/// over HTTP such a claim still answers when its slice ends, 1 s after it parked (the case
/// advances the clock as soon as it sees the claim parked). 700 ms is under that, and still
/// far above the milliseconds a claim takes to wake, scan and commit on a loaded machine.
pub const TIMER_WAKE_BOUND: Duration = Duration::from_millis(700);

/// The `(TYPE, VERSION)` pair as a claim list.
pub fn workflows() -> Vec<WorkflowRef> {
    vec![WorkflowRef::new(TYPE, VERSION)]
}

// ---------------------------------------------------------------------------------------------
// Request builders
// ---------------------------------------------------------------------------------------------

/// A create request for `id` of `(TYPE, VERSION)` with state `{"count": 0}` and default options.
pub fn create_request(id: &str) -> CreateInstanceRequest {
    CreateInstanceRequest {
        id: id.into(),
        workflow_type: TYPE.into(),
        version: VERSION.into(),
        state: json!({"count": 0}),
        lease_ms: None,
        max_attempts: None,
        on_exhausted: None,
    }
}

/// A message request without an origin.
pub fn message_request(workflow_id: &str, id: &str, message: Value) -> MessageRequest {
    MessageRequest {
        workflow_id: workflow_id.into(),
        id: id.into(),
        message,
        origin: None,
    }
}

/// A claim of `workflows` by `worker` that does not wait.
pub fn claim_request(worker: &str, workflows: Vec<WorkflowRef>) -> ClaimRequest {
    ClaimRequest {
        worker: worker.into(),
        workflows,
        wait_ms: 0,
        include_execution_credential: None,
    }
}

/// The lease triple of a claimed task.
pub fn lease(task: &TurnTask) -> Lease {
    Lease {
        workflow_id: task.turn.workflow_id.clone(),
        turn: task.turn.number,
        token: task.token.clone(),
    }
}

/// An operation of kind `step` with the default timeout and no heartbeat timeout.
pub fn operation_request(lease: &Lease, position: u32, key: &str) -> OperationRequest {
    OperationRequest {
        lease: lease.clone(),
        position,
        key: key.into(),
        kind: OperationKind::Step,
        timeout_ms: 300_000,
        heartbeat_timeout_ms: None,
    }
}

/// A progress write.
pub fn progress_request(
    lease: &Lease,
    key: &str,
    sequence: u64,
    details: Value,
    checkpoint: Value,
) -> ProgressRequest {
    ProgressRequest {
        lease: lease.clone(),
        key: key.into(),
        sequence,
        details,
        checkpoint,
    }
}

/// A `step` checkpoint.
pub fn step_request(lease: &Lease, position: u32, key: &str, output: Value) -> CheckpointRequest {
    CheckpointRequest {
        lease: lease.clone(),
        position,
        key: key.into(),
        kind: CheckpointKind::Step,
        output,
        delay_ms: None,
    }
}

/// A `sleep` checkpoint.
pub fn sleep_request(lease: &Lease, position: u32, key: &str, delay_ms: u64) -> CheckpointRequest {
    CheckpointRequest {
        lease: lease.clone(),
        position,
        key: key.into(),
        kind: CheckpointKind::Sleep,
        output: Value::Null,
        delay_ms: Some(delay_ms),
    }
}

/// A signal wait.
pub fn wait_request(
    lease: &Lease,
    position: u32,
    key: &str,
    name: &str,
    timeout_ms: u64,
) -> WaitSignalRequest {
    WaitSignalRequest {
        lease: lease.clone(),
        position,
        key: key.into(),
        name: name.into(),
        timeout_ms,
    }
}

/// A signal to one turn.
pub fn signal_request(
    workflow_id: &str,
    turn: u64,
    id: &str,
    name: &str,
    value: Value,
) -> SignalRequest {
    SignalRequest {
        workflow_id: workflow_id.into(),
        turn,
        id: id.into(),
        name: name.into(),
        value,
    }
}

/// A completion without a continuation.
pub fn complete_request(lease: &Lease, state: Value, result: Value) -> CompleteRequest {
    CompleteRequest {
        lease: lease.clone(),
        state,
        result,
        continuation: None,
        usage: None,
        results: None,
    }
}

/// An ordinary (retryable) failure.
pub fn fail_request(lease: &Lease, error: &str) -> FailRequest {
    FailRequest {
        lease: lease.clone(),
        error: error.into(),
        non_retryable: false,
        retry_at_ms: None,
        usage: None,
        results: None,
        mismatch: None,
    }
}

/// A control action without a turn.
pub fn control_request(workflow_id: &str, action: ControlAction) -> ControlRequest {
    ControlRequest {
        workflow_id: workflow_id.into(),
        action,
        turn: None,
        by: None,
    }
}

/// A control action on one turn.
pub fn control_turn(workflow_id: &str, action: ControlAction, turn: u64) -> ControlRequest {
    ControlRequest {
        workflow_id: workflow_id.into(),
        action,
        turn: Some(turn),
        by: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Calls that must succeed
// ---------------------------------------------------------------------------------------------

/// Unwrap a result, panicking with `what` and the error.
#[track_caller]
pub fn ok<T>(res: Result<T>, what: &str) -> T {
    match res {
        Ok(v) => v,
        Err(e) => panic!(
            "{what}: expected success, got {} {}: {e}",
            e.status(),
            e.code()
        ),
    }
}

/// Create `id` with the default request.
pub async fn create<B: Backend + ?Sized>(b: &B, id: &str) -> WorkflowInstance {
    create_with(b, create_request(id)).await
}

/// Create an instance from a request.
pub async fn create_with<B: Backend + ?Sized>(
    b: &B,
    req: CreateInstanceRequest,
) -> WorkflowInstance {
    let what = format!("create instance `{}`", req.id);
    ok(b.create_instance(req).await, &what)
}

/// Admit a message.
pub async fn send<B: Backend + ?Sized>(
    b: &B,
    workflow_id: &str,
    id: &str,
    message: Value,
) -> WorkflowTurn {
    let what = format!("send message `{id}` to `{workflow_id}`");
    ok(
        b.send_message(message_request(workflow_id, id, message))
            .await,
        &what,
    )
}

/// Claim as [`WORKER`] without waiting; `None` when nothing is ready.
pub async fn try_claim<B: Backend + ?Sized>(b: &B) -> Option<TurnTask> {
    try_claim_as(b, WORKER, workflows()).await
}

/// Claim as `worker` for `workflows` without waiting.
pub async fn try_claim_as<B: Backend + ?Sized>(
    b: &B,
    worker: &str,
    workflows: Vec<WorkflowRef>,
) -> Option<TurnTask> {
    ok(
        b.claim(claim_request(worker, workflows)).await,
        "claim (wait_ms 0)",
    )
    .task
}

/// Claim as [`WORKER`]; panics with `why` when nothing is ready.
pub async fn claim<B: Backend + ?Sized>(b: &B, why: &str) -> TurnTask {
    match try_claim(b).await {
        Some(task) => task,
        None => panic!("claim returned no task, but {why}"),
    }
}

/// Claim as `worker`; panics with `why` when nothing is ready.
pub async fn claim_as<B: Backend + ?Sized>(b: &B, worker: &str, why: &str) -> TurnTask {
    match try_claim_as(b, worker, workflows()).await {
        Some(task) => task,
        None => panic!("claim by `{worker}` returned no task, but {why}"),
    }
}

/// Assert that a claim (as [`OTHER_WORKER`]) gets nothing; `why` says why it must not.
pub async fn assert_no_claim<B: Backend + ?Sized>(b: &B, why: &str) {
    if let Some(task) = try_claim_as(b, OTHER_WORKER, workflows()).await {
        panic!(
            "claim returned turn {} of `{}` (attempt {}), but nothing may be claimed: {why}",
            task.turn.number, task.turn.workflow_id, task.turn.attempt
        );
    }
}

/// Start an operation and save the step: the worker's path for one new `ctx.step`.
pub async fn step<B: Backend + ?Sized>(
    b: &B,
    lease: &Lease,
    position: u32,
    key: &str,
    output: Value,
) -> WorkflowTurn {
    ok(
        b.operation(operation_request(lease, position, key)).await,
        &format!("operation `{key}` at position {position}"),
    );
    checkpoint_step(b, lease, position, key, output).await
}

/// Save a step without an operation first.
pub async fn checkpoint_step<B: Backend + ?Sized>(
    b: &B,
    lease: &Lease,
    position: u32,
    key: &str,
    output: Value,
) -> WorkflowTurn {
    ok(
        b.checkpoint(step_request(lease, position, key, output))
            .await,
        &format!("checkpoint step `{key}` at position {position}"),
    )
}

/// Save a sleep (which releases the turn).
pub async fn sleep<B: Backend + ?Sized>(
    b: &B,
    lease: &Lease,
    position: u32,
    key: &str,
    delay_ms: u64,
) -> WorkflowTurn {
    ok(
        b.checkpoint(sleep_request(lease, position, key, delay_ms))
            .await,
        &format!("checkpoint sleep `{key}` at position {position}"),
    )
}

/// Complete a turn without a continuation.
pub async fn complete<B: Backend + ?Sized>(
    b: &B,
    lease: &Lease,
    state: Value,
    result: Value,
) -> WorkflowTurn {
    ok(
        b.complete(complete_request(lease, state, result)).await,
        &format!("complete turn {}", lease.turn),
    )
}

/// Fail an attempt (retryable).
pub async fn fail<B: Backend + ?Sized>(b: &B, lease: &Lease, error: &str) -> WorkflowTurn {
    ok(
        b.fail(fail_request(lease, error)).await,
        &format!("fail turn {}", lease.turn),
    )
}

/// Fail an attempt for good.
pub async fn fail_for_good<B: Backend + ?Sized>(b: &B, lease: &Lease, error: &str) -> WorkflowTurn {
    let mut req = fail_request(lease, error);
    req.non_retryable = true;
    ok(
        b.fail(req).await,
        &format!("fail turn {} (non_retryable)", lease.turn),
    )
}

/// Extend a lease.
pub async fn heartbeat<B: Backend + ?Sized>(b: &B, lease: &Lease) -> WorkflowTurn {
    ok(
        b.heartbeat(lease.clone()).await,
        &format!("heartbeat turn {}", lease.turn),
    )
}

/// Send a signal.
pub async fn signal<B: Backend + ?Sized>(
    b: &B,
    workflow_id: &str,
    turn: u64,
    id: &str,
    name: &str,
    value: Value,
) -> WorkflowTurn {
    ok(
        b.signal(signal_request(workflow_id, turn, id, name, value))
            .await,
        &format!("signal `{id}` ({name}) to turn {turn}"),
    )
}

/// Apply a control action.
pub async fn control<B: Backend + ?Sized>(b: &B, req: ControlRequest) -> WorkflowInstance {
    let what = format!("control {} (turn {:?})", req.action, req.turn);
    ok(b.control(req).await, &what)
}

/// Claim the inbox head and complete it with `state` and a `null` result.
pub async fn run_next<B: Backend + ?Sized>(b: &B, state: Value) -> WorkflowTurn {
    let task = claim(b, "the inbox head is ready").await;
    let lease = lease(&task);
    complete(b, &lease, state, Value::Null).await;
    turn(b, &lease.workflow_id, lease.turn).await
}

/// Read one instance.
pub async fn instance<B: Backend + ?Sized>(b: &B, id: &str) -> WorkflowInstance {
    ok(b.get_instance(id).await, &format!("get instance `{id}`"))
}

/// Read one turn.
pub async fn turn<B: Backend + ?Sized>(b: &B, id: &str, number: u64) -> WorkflowTurn {
    ok(
        b.turn(TurnQuery {
            id: id.into(),
            turn: number,
        })
        .await,
        &format!("read turn {number} of `{id}`"),
    )
}

/// Read an instance's whole inbox (every page), with payloads.
pub async fn inbox<B: Backend + ?Sized>(b: &B, id: &str) -> Vec<InboxMessage> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = ok(
            b.instance_inbox(InboxQuery {
                id: id.into(),
                after,
                limit: Some(100),
                payloads: true,
            })
            .await,
            &format!("read the inbox of `{id}`"),
        );
        let done = page.next_after.is_none() || page.messages.is_empty();
        after = page.next_after;
        out.extend(page.messages);
        if done {
            return out;
        }
    }
}

/// Read an instance's whole history (every page).
pub async fn history<B: Backend + ?Sized>(b: &B, id: &str) -> Vec<WorkflowTurn> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = ok(
            b.history(HistoryQuery {
                id: id.into(),
                after,
                limit: Some(50),
            })
            .await,
            &format!("read the history of `{id}`"),
        );
        let done = page.next_after.is_none() || page.turns.is_empty();
        after = page.next_after;
        out.extend(page.turns);
        if done {
            return out;
        }
    }
}

/// Turn numbers of a list of turns.
pub fn numbers(turns: &[WorkflowTurn]) -> Vec<u64> {
    turns.iter().map(|t| t.number).collect()
}

/// Turn numbers of inbox entries.
pub fn inbox_numbers(messages: &[InboxMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.turn).collect()
}

/// The engine time of a claim: the turn's last write, which the claim is. (Not the run's
/// start: a claim that resumes an attempt keeps the attempt's run.)
pub fn claimed_at(task: &TurnTask) -> Millis {
    task.turn.updated_at_ms
}

// ---------------------------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------------------------

/// Assert a refusal with this HTTP status and machine code; returns the error.
#[track_caller]
pub fn expect_err<T: Debug>(res: Result<T>, status: u16, code: &str, what: &str) -> Error {
    match res {
        Ok(v) => panic!("{what}: expected {status} {code}, but the call succeeded with {v:#?}"),
        Err(e) => {
            assert!(
                e.status() == status && e.code() == code,
                "{what}: expected {status} {code}, got {} {}: {e}",
                e.status(),
                e.code()
            );
            e
        }
    }
}

/// Assert `400 invalid_request` naming exactly `param`.
#[track_caller]
pub fn expect_invalid<T: Debug>(res: Result<T>, param: &str, what: &str) -> Error {
    let e = expect_err(res, 400, "invalid_request", what);
    match &e {
        Error::Invalid { param: p, .. } => assert_eq!(
            p, param,
            "{what}: the refusal must name the offending parameter `{param}` ({e})"
        ),
        other => panic!("{what}: expected Error::Invalid, got {other:?}"),
    }
    e
}

/// Assert `400 invalid_request` whose param mentions `fragment` (for nested fields).
#[track_caller]
pub fn expect_invalid_about<T: Debug>(res: Result<T>, fragment: &str, what: &str) -> Error {
    let e = expect_err(res, 400, "invalid_request", what);
    match &e {
        Error::Invalid { param, .. } => assert!(
            param.contains(fragment),
            "{what}: the refusal must name the offending parameter (containing `{fragment}`), \
             it named `{param}` ({e})"
        ),
        other => panic!("{what}: expected Error::Invalid, got {other:?}"),
    }
    e
}

/// Assert `400 invalid_request` without checking the parameter.
#[track_caller]
pub fn expect_bad_request<T: Debug>(res: Result<T>, what: &str) -> Error {
    expect_err(res, 400, "invalid_request", what)
}

/// Assert `409 turn_lease_lost`.
#[track_caller]
pub fn expect_lease_lost<T: Debug>(res: Result<T>, what: &str) -> Error {
    expect_err(res, 409, "turn_lease_lost", what)
}

/// Assert `409 conflict`.
#[track_caller]
pub fn expect_conflict<T: Debug>(res: Result<T>, what: &str) -> Error {
    expect_err(res, 409, "conflict", what)
}

/// Assert `404 not_found`.
#[track_caller]
pub fn expect_not_found<T: Debug>(res: Result<T>, what: &str) -> Error {
    expect_err(res, 404, "not_found", what)
}

/// Assert `413 payload_too_large`; when `what_field` is given, the error must name it.
#[track_caller]
pub fn expect_too_large<T: Debug>(res: Result<T>, what_field: Option<&str>, what: &str) -> Error {
    let e = expect_err(res, 413, "payload_too_large", what);
    if let Some(field) = what_field {
        match &e {
            Error::TooLarge { what: w, .. } => assert_eq!(
                w, field,
                "{what}: the size refusal must name `{field}` ({e})"
            ),
            other => panic!("{what}: expected Error::TooLarge, got {other:?}"),
        }
    }
    e
}

/// Assert a `409` count-limit refusal with this code (`inbox_full`, `signal_limit`).
#[track_caller]
pub fn expect_limit<T: Debug>(res: Result<T>, code: &str, what: &str) -> Error {
    expect_err(res, 409, code, what)
}

/// Assert the step-limit refusal: `422 step_limit`, an `Error::LimitReached` of `steps`
/// (not a 409, which LBB workers take for a lost turn).
#[track_caller]
pub fn expect_step_limit<T: Debug>(res: Result<T>, what: &str) -> Error {
    let e = expect_err(res, 422, "step_limit", what);
    assert!(
        matches!(e, Error::LimitReached { limit: "steps", .. }),
        "{what}: expected Error::LimitReached {{ limit: \"steps\" }}, got {e:?}"
    );
    e
}

/// Assert `403` with a reserved-name code.
#[track_caller]
pub fn expect_reserved<T: Debug>(res: Result<T>, code: &str, what: &str) -> Error {
    expect_err(res, 403, code, what)
}

// ---------------------------------------------------------------------------------------------
// Nothing written
// ---------------------------------------------------------------------------------------------

/// Everything readable about one instance: used to prove a refusal (or an exact repeat)
/// wrote nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The instance, or `None` when it does not exist.
    pub instance: Option<WorkflowInstance>,
    /// Its whole inbox, with payloads.
    pub inbox: Vec<InboxMessage>,
    /// Its whole kept history.
    pub history: Vec<WorkflowTurn>,
    /// Every unfinished turn as the single-turn read shows it (steps, signals, operation).
    pub pending: Vec<WorkflowTurn>,
}

/// Read a [`Snapshot`] of `id`.
pub async fn snapshot<B: Backend + ?Sized>(b: &B, id: &str) -> Snapshot {
    let instance = match b.get_instance(id).await {
        Ok(i) => i,
        Err(e) if e.status() == 404 => {
            return Snapshot {
                instance: None,
                inbox: vec![],
                history: vec![],
                pending: vec![],
            }
        }
        Err(e) => panic!("snapshot: get instance `{id}` failed: {e}"),
    };
    let inbox = inbox(b, id).await;
    let history = history(b, id).await;
    let mut pending = Vec::with_capacity(inbox.len());
    for m in &inbox {
        pending.push(turn(b, id, m.turn).await);
    }
    Snapshot {
        instance: Some(instance),
        inbox,
        history,
        pending,
    }
}

/// Assert that `id` reads exactly as `before`: `what` wrote nothing.
pub async fn assert_unchanged<B: Backend + ?Sized>(b: &B, id: &str, before: &Snapshot, what: &str) {
    let after = snapshot(b, id).await;
    if &after != before {
        panic!(
            "{what} must write nothing, but instance `{id}` changed.\n\
             before: {before:#?}\n\
             after: {after:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// A JSON string whose compact serialization is exactly `bytes` long (at least 2).
pub fn json_of_len(bytes: usize) -> Value {
    assert!(bytes >= 2, "a JSON string is at least 2 bytes");
    Value::String("x".repeat(bytes - 2))
}

/// The compact JSON length of a value, as limits count it.
pub fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).expect("serializable").len()
}

/// The keys a saved step has on the wire.
pub fn wire_keys(step: &StepCheckpoint) -> BTreeSet<String> {
    match serde_json::to_value(step).expect("a step serializes") {
        Value::Object(map) => map.keys().cloned().collect(),
        other => panic!("a step serializes to an object, got {other}"),
    }
}

/// A key set from a list.
pub fn keys(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Assert an ordinary step echoes exactly what was checkpointed: `{key, kind, output, at_ms}`
/// and nothing else (no `delay_ms`, no `signal_name`).
#[track_caller]
pub fn assert_plain_step(step: &StepCheckpoint, key: &str, output: &Value, what: &str) {
    assert_eq!(step.key, key, "{what}: step key");
    assert_eq!(step.kind, CheckpointKind::Step, "{what}: step kind");
    assert_eq!(&step.output, output, "{what}: step output");
    assert_eq!(
        wire_keys(step),
        keys(&["key", "kind", "output", "at_ms"]),
        "{what}: an ordinary step must serialize as exactly {{key, kind, output, at_ms}} \
         (a spurious delay_ms or signal_name fails the turn on replay): {step:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Long polls
// ---------------------------------------------------------------------------------------------

/// Start a claim that waits up to `wait_ms`, in the background.
pub fn spawn_claim<B>(b: &B, wait_ms: u64) -> JoinHandle<Result<ClaimResponse>>
where
    B: Backend + Clone + 'static,
{
    let b = b.clone();
    tokio::spawn(async move {
        let mut req = claim_request(WORKER, workflows());
        req.wait_ms = wait_ms;
        b.claim(req).await
    })
}

/// Wait until a spawned claim is parked in the backend's long poll: the fixture reports a
/// waiting claim ([`Fixture::waiting_claims`]) while the claim's task has not answered. Panics
/// when the claim answers first (it did not wait although nothing was ready: `why` says why
/// nothing was), or when nothing parks within [`PARK_BOUND`].
pub async fn let_claim_park<F: Fixture>(
    f: &F,
    handle: &JoinHandle<Result<ClaimResponse>>,
    why: &str,
) {
    let started = Instant::now();
    loop {
        if handle.is_finished() {
            panic!(
                "a claim with a long wait returned at once although nothing was ready ({why}); \
                 it must wait"
            );
        }
        if f.waiting_claims() >= 1 {
            assert!(
                !handle.is_finished(),
                "the claim answered while parked although nothing was ready ({why})"
            );
            return;
        }
        if started.elapsed() > PARK_BOUND {
            panic!(
                "the spawned claim did not park within {PARK_BOUND:?}: the backend reports no \
                 waiting claim, and the claim has not answered ({why})"
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Assert that the event whose call just returned rang the parked claim: the backend holds no
/// claim asleep any more. An event that did not ring it leaves it asleep until its own wait
/// runs out (or a poll), which this catches at once, without a clock. Call it right after the
/// call that made the claim's turn ready (an admission, a signal, a resume), before anything
/// else; the backend rings the claim before it answers that call.
#[track_caller]
pub fn assert_rung<F: Fixture>(f: &F, what: &str) {
    let asleep = f.waiting_claims();
    assert_eq!(
        asleep, 0,
        "{what}: the call returned with the waiting claim still asleep in the backend \
         ({asleep} waiting): the event did not ring it (claims must be woken at once, not by \
         polling or by their own timeout)"
    );
}

/// Wait (at most [`WAKE_BOUND`] of real time) for a spawned claim's answer.
pub async fn finish_claim(
    handle: JoinHandle<Result<ClaimResponse>>,
    what: &str,
) -> Option<TurnTask> {
    finish_claim_within(handle, WAKE_BOUND, what).await
}

/// Wait (at most `bound` of real time) for a spawned claim's answer.
pub async fn finish_claim_within(
    handle: JoinHandle<Result<ClaimResponse>>,
    bound: Duration,
    what: &str,
) -> Option<TurnTask> {
    match tokio::time::timeout(bound, handle).await {
        Err(_) => panic!(
            "{what}: the waiting claim did not answer within {bound:?} (claims must be woken \
             at once, not by polling or by their own timeout)"
        ),
        Ok(Err(join)) => panic!("{what}: the claim task panicked: {join}"),
        Ok(Ok(res)) => ok(res, what).task,
    }
}
