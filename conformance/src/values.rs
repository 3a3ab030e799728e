//! Every acknowledged write stays readable: generated JSON values through every
//! value-carrying call, for tests that restart or kill the store in between.
//!
//! [`values`] generates JSON values from a seed (deep up to the nesting limit, wide, long
//! strings, unicode, big and exotic numbers). [`climb`] puts one value through every call that
//! stores a user value — as an instance's state, a message and its origin, progress details
//! and cursor, a step output, a signal value, a consumed signal, a completion's state and reply
//! and a continuation message — and reports each acknowledged [`Stage`]. After a restart or a
//! SIGKILL, [`check`] reads the instance back through every read and asserts that each
//! acknowledged value is there, unchanged.
//!
//! Any error ends a value's climb: the property is about what was acknowledged. A value the
//! generator makes is within every limit, so the tests that do not kill anything assert that
//! every value gets to the top.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::validate::{depth, MAX_DEPTH};
use turnwise::{Backend, Error};

use crate::support::*;

/// How far a value got, each stage acknowledged by the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// The instance was created with the value as its state.
    Created,
    /// The value was admitted as turn 1's message.
    Sent,
    /// A signal carrying the value was delivered to turn 1 (buffered while it is queued).
    Signalled,
    /// Turn 1 was claimed and its first step's progress holds the value as details and cursor.
    Progressed,
    /// The first step's output is the value.
    Stepped,
    /// A signal wait consumed the buffered signal: the second step holds `{received, value}`.
    Waited,
    /// Turn 1 completed with the value as state and reply, and a continuation (turn 2) whose
    /// message is the value.
    Completed,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 7] = [
        Stage::Created,
        Stage::Sent,
        Stage::Signalled,
        Stage::Progressed,
        Stage::Stepped,
        Stage::Waited,
        Stage::Completed,
    ];

    /// The stage's name, as the crash tests print it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Created => "created",
            Stage::Sent => "sent",
            Stage::Signalled => "signalled",
            Stage::Progressed => "progressed",
            Stage::Stepped => "stepped",
            Stage::Waited => "waited",
            Stage::Completed => "completed",
        }
    }

    /// The stage of a name printed by [`Stage::name`].
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The seed in the environment variable `var` (to replay a run), or else one from the clock.
/// Tests print it, so a failure can be replayed.
pub fn seed_from_env(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// The instance id [`climb`] uses for value number `i`.
pub fn instance_id(i: usize) -> String {
    format!("value-{i}")
}

/// `n` JSON values generated from `seed`; the same seed always gives the same values.
pub fn values(seed: u64, n: usize) -> Vec<Value> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = json_value();
    (0..n)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .expect("the value strategy never rejects")
                .current()
        })
        .collect()
}

/// Any JSON value within the nesting limit and about 6 KiB: scalars of every kind, trees,
/// wide arrays and objects, and values wrapped in up to [`MAX_DEPTH`] levels. (The size keeps
/// a value inside every size limit of the calls [`climb`] makes, the smallest being 8 KiB of
/// progress details.)
pub fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        string().prop_map(Value::String),
    ];
    let small = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    let tree = leaf.prop_recursive(6, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(string(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let wide = prop_oneof![
        prop::collection::vec(small.clone(), 0..200).prop_map(Value::Array),
        prop::collection::btree_map("[a-z0-9_]{1,12}", small, 0..100)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ];
    let base = prop_oneof![3 => tree, 1 => wide];
    (base, 0..=MAX_DEPTH, any::<u64>())
        .prop_map(|(v, levels, pattern)| {
            let levels = levels.min(MAX_DEPTH - depth(&v).min(MAX_DEPTH));
            wrap(v, levels, pattern)
        })
        .prop_filter("about 6 KiB at most", |v| {
            turnwise::validate::json_len(v) <= 6 * 1024
        })
        .boxed()
}

/// Wrap `v` in `levels` arrays and objects, the kind of each chosen by a bit of `pattern`.
fn wrap(mut v: Value, levels: usize, pattern: u64) -> Value {
    for i in 0..levels {
        v = if pattern >> (i % 64) & 1 == 0 {
            Value::Array(vec![v])
        } else {
            Value::Object([(format!("k{i}"), v)].into_iter().collect())
        };
    }
    v
}

/// Numbers as JSON writes them: small and huge integers, floats, and the exotic spellings
/// that arbitrary-precision parsing keeps as they are (`1E400`, `-0`, `0.000e-0`, 40 digits)
/// when turnwise's `exact-numbers` feature is on.
fn number() -> BoxedStrategy<Value> {
    let text = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        "-?[1-9][0-9]{0,60}",
        "-?(0|[1-9][0-9]{0,5})\\.[0-9]{1,30}([eE][+-]?[0-9]{1,4})?",
        Just("-0".to_owned()),
        Just("1E400".to_owned()),
        Just("-1e-400".to_owned()),
        Just("0.000e-0".to_owned()),
    ];
    // Without turnwise's `exact-numbers` (serde_json's `arbitrary_precision`), `1E400` is out
    // of f64's range and is left out; everything else parses either way.
    text.prop_filter_map("a number serde_json can hold", |t| {
        serde_json::from_str(&t).ok()
    })
    .boxed()
}

/// Strings: any unicode (control characters, astral planes), escapes, and long ones.
fn string() -> BoxedStrategy<String> {
    prop_oneof![
        4 => any::<String>(),
        1 => "[\\\\\"/\\u{0}-\\u{1f}\\u{7f}\\u{2028}\\u{fffd}\\u{1f600}]{0,40}",
        1 => ".{200,1000}",
    ]
    .boxed()
}

/// The details a progress write carries for `v`: `v` itself unless it would be read as the
/// progress convention (an object with a `phase` key), which has rules of its own.
fn details(v: &Value) -> Value {
    match v {
        Value::Object(o) if o.contains_key("phase") => Value::Null,
        _ => v.clone(),
    }
}

/// How far [`climb`] got with a value.
#[derive(Debug)]
pub struct Climbed {
    /// The last stage acknowledged.
    pub reached: Option<Stage>,
    /// The error that stopped the climb before the top, if one did: a refusal of the value,
    /// or a failure of the backend (a test that kills the server expects those).
    pub error: Option<Error>,
}

/// The origin a message of `v` is sent with: a note holding the start of `v`'s JSON text (an
/// origin is at most 1 KiB).
fn origin(v: &Value) -> MessageOrigin {
    let text = v.to_string();
    let mut end = text.len().min(400);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut origin = MessageOrigin::new("app");
    origin
        .fields
        .insert("note".into(), Value::String(text[..end].to_owned()));
    origin
}

/// Put `v` through every value-carrying call on instance `id` (whose turns no other worker
/// claims: the claim lists a workflow type of its own), calling `ack` after each acknowledged
/// stage. The first error stops the climb.
pub async fn climb<B: Backend + ?Sized>(
    b: &B,
    id: &str,
    v: &Value,
    mut ack: impl FnMut(Stage),
) -> Climbed {
    let mut reached = None;
    let result = climb_inner(b, id, v, &mut |s| {
        reached = Some(s);
        ack(s)
    })
    .await;
    Climbed {
        reached,
        error: result.err(),
    }
}

async fn climb_inner<B: Backend + ?Sized>(
    b: &B,
    id: &str,
    v: &Value,
    ack: &mut dyn FnMut(Stage),
) -> Result<(), Error> {
    b.create_instance(CreateInstanceRequest {
        id: id.into(),
        workflow_type: id.into(),
        version: VERSION.into(),
        state: v.clone(),
        lease_ms: Some(600_000),
        max_attempts: None,
        on_exhausted: None,
    })
    .await?;
    ack(Stage::Created);
    b.send_message(MessageRequest {
        origin: Some(origin(v)),
        ..message_request(id, "m1", v.clone())
    })
    .await?;
    ack(Stage::Sent);
    b.signal(signal_request(id, 1, "sig-1", "value", v.clone()))
        .await?;
    ack(Stage::Signalled);
    let task = b
        .claim(claim_request("values", vec![WorkflowRef::new(id, VERSION)]))
        .await?
        .task
        .unwrap_or_else(|| panic!("`{id}`: turn 1 is ready but the claim found nothing"));
    let l = lease(&task);
    b.operation(operation_request(&l, 0, "s")).await?;
    b.progress(progress_request(&l, "s", 1, details(v), v.clone()))
        .await?;
    ack(Stage::Progressed);
    b.checkpoint(step_request(&l, 0, "s", v.clone())).await?;
    ack(Stage::Stepped);
    let waited = b
        .wait_signal(wait_request(&l, 1, "w", "value", 600_000))
        .await?;
    assert_eq!(
        waited.status,
        TurnStatus::Running,
        "`{id}`: the buffered signal must be consumed at once"
    );
    ack(Stage::Waited);
    b.complete(CompleteRequest {
        continuation: Some(Continuation { message: v.clone() }),
        ..complete_request(&l, v.clone(), v.clone())
    })
    .await?;
    ack(Stage::Completed);
    Ok(())
}

/// Read instance `id` back through every read and assert that what `reached` acknowledged is
/// there, unchanged (`None`: nothing was acknowledged, so the instance may or may not exist).
///
/// `reached` is a lower bound: a process killed after an acknowledgement may have gone on
/// without reporting it. Every check holds at the stage acknowledged and at every later one
/// (each place holds the same value), so a climb that went further passes too. Panics with
/// the instance, the stage and the read that failed.
pub async fn check<B: Backend + ?Sized>(b: &B, id: &str, v: &Value, reached: Option<Stage>) {
    let Some(reached) = reached else {
        return;
    };
    let at = |what: &str| format!("`{id}` acknowledged up to {reached:?}: {what}");
    let inst = ok(b.get_instance(id).await, &at("read the instance"));
    let inbox = ok(
        b.instance_inbox(InboxQuery {
            id: id.into(),
            after: None,
            limit: None,
            payloads: true,
        })
        .await,
        &at("read the inbox with payloads"),
    );
    let history = ok(
        b.history(HistoryQuery {
            id: id.into(),
            after: None,
            limit: None,
        })
        .await,
        &at("read the history"),
    );
    // The initial state and the state a completion leaves are both `v`.
    assert_eq!(inst.state, *v, "{}", at("the state"));
    if reached < Stage::Sent {
        return;
    }
    let t1 = ok(
        b.turn(TurnQuery {
            id: id.into(),
            turn: 1,
        })
        .await,
        &at("read turn 1"),
    );
    assert_eq!(t1.message, *v, "{}", at("turn 1's message"));
    assert_eq!(t1.origin, Some(origin(v)), "{}", at("turn 1's origin"));
    // Turn 1, or once it completed its continuation: both carry `v`.
    let head = inbox.messages.first().expect("a turn in the inbox");
    assert_eq!(
        head.message.as_ref(),
        Some(v),
        "{}",
        at("the inbox payload")
    );
    if reached >= Stage::Signalled {
        let signals = t1.signals.clone().unwrap_or_default();
        assert_eq!(
            signals.first().map(|s| &s.value),
            Some(v),
            "{}",
            at("the signal's value")
        );
    }
    if reached >= Stage::Progressed {
        match &t1.operation {
            Some(op) => assert_eq!(
                (&op.details, &op.checkpoint),
                (&details(v), v),
                "{}",
                at("the progress details and cursor")
            ),
            None => assert!(
                !t1.steps.is_empty(),
                "{}",
                at("neither the running step's progress nor its saved output")
            ),
        }
    }
    if reached >= Stage::Stepped {
        assert_eq!(t1.steps[0].output, *v, "{}", at("the step output"));
    }
    if reached >= Stage::Waited {
        assert_eq!(
            t1.steps.get(1).map(|s| &s.output),
            Some(&json!({"received": true, "value": v})),
            "{}",
            at("the consumed signal")
        );
    }
    if reached >= Stage::Completed {
        let done = history
            .turns
            .first()
            .unwrap_or_else(|| panic!("{}", at("turn 1 in history")));
        assert_eq!(
            (&done.result, &done.state_after),
            (v, v),
            "{}",
            at("the reply and the state after")
        );
        let t2 = ok(
            b.turn(TurnQuery {
                id: id.into(),
                turn: 2,
            })
            .await,
            &at("read the continuation"),
        );
        assert_eq!(t2.message, *v, "{}", at("the continuation's message"));
    }
}

/// Read the whole namespace through the listing reads: they must not fail whatever the
/// instances hold.
pub async fn check_listings<B: Backend + ?Sized>(b: &B, expect_at_least: usize) {
    let mut seen = 0;
    let mut after = None;
    loop {
        let page = ok(
            b.list_instances(ListInstancesQuery {
                after: after.clone(),
                limit: Some(100),
            })
            .await,
            "list the instances",
        );
        seen += page.instances.len();
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert!(
        seen >= expect_at_least,
        "the listing shows {seen} instances, fewer than the {expect_at_least} created"
    );
}
