//! Parallel steps: a fixed group ([`Parallel`], `ctx.parallel()`) and a fan-out over a
//! collection ([`FanOut`], `ctx.fan_out(..)`).
//!
//! The members run concurrently inside the attempt, but each is an ordinary step on the wire,
//! saved at its own position in declaration order: as soon as the first unsaved member has
//! finished, the worker opens its operation and posts its checkpoint, then goes on with the
//! next one. Positions and replays are therefore the same as for the same steps awaited one
//! after the other, and an attempt that dies in the middle has saved a prefix of the group;
//! the next attempt replays that prefix and runs the rest again, with the same effect ids.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use super::Turn;
use crate::protocol::error::Error;
use crate::protocol::*;
use crate::sdk::codec;
use crate::sdk::context::{sleep_until_opt, Interrupt, StepCtx, StepOptions, TurnShared};
use crate::sdk::workflow::{TurnError, Workflow};

/// The future of one member, its output encoded.
type MemberFuture<'a> = Pin<Box<dyn Future<Output = MemberEnd> + Send + 'a>>;

/// A member of a fixed group, not started yet.
type MemberFn<'a> = Box<dyn FnOnce(StepCtx) -> MemberBody<'a> + Send + 'a>;

/// A member's body with its output encoded as the codec saves it.
type MemberBody<'a> = Pin<Box<dyn Future<Output = Result<Value, TurnError>> + Send + 'a>>;

/// How a member ended.
enum MemberEnd {
    /// Its body returned; the output is encoded.
    Done(Result<Value, TurnError>),
    /// It ran past its timeout or heartbeat timeout: the attempt is abandoned, as for a step.
    Abandoned(String),
}

/// The outputs of a fixed group, as a tuple in declaration order: `(A,)`, `(A, B)`, … up to
/// twelve members. Implemented for tuples; not meant to be implemented elsewhere.
pub trait GroupOutput: Sized {
    /// Decode the saved outputs, one per member, in order.
    #[doc(hidden)]
    fn decode_all<C: codec::Codec>(
        codec: &C,
        outputs: Vec<(String, Value)>,
    ) -> Result<Self, TurnError>;
}

/// A fixed group with one more member of output `T`: `(A, B)` + `T` is `(A, B, T)`.
/// Implemented for tuples of up to eleven members; not meant to be implemented elsewhere.
pub trait Push<T> {
    /// The tuple with `T` appended.
    type Output;
}

fn decode_one<C: codec::Codec, T: DeserializeOwned>(
    codec: &C,
    (key, value): (String, Value),
) -> Result<T, TurnError> {
    codec::decode(codec, &format!("step `{key}`"), &value)
        .map_err(|e| TurnError::Permanent(e.into()))
}

macro_rules! outputs {
    ($($t:ident)*) => {
        impl<$($t: DeserializeOwned,)*> GroupOutput for ($($t,)*) {
            #[allow(unused_variables, unused_mut, clippy::unused_unit)]
            fn decode_all<Co: codec::Codec>(
                codec: &Co,
                outputs: Vec<(String, Value)>,
            ) -> Result<Self, TurnError> {
                let mut it = outputs.into_iter();
                Ok(($(decode_one::<Co, $t>(codec, it.next().ok_or_else(missing)?)?,)*))
            }
        }
    };
}

macro_rules! push {
    ($($t:ident)*) => {
        impl<$($t,)* New> Push<New> for ($($t,)*) {
            type Output = ($($t,)* New,);
        }
    };
}

fn missing() -> TurnError {
    TurnError::permanent("a parallel group lost the output of one of its members")
}

outputs!();
outputs!(A);
outputs!(A B);
outputs!(A B C);
outputs!(A B C D);
outputs!(A B C D E);
outputs!(A B C D E F);
outputs!(A B C D E F G);
outputs!(A B C D E F G H);
outputs!(A B C D E F G H I);
outputs!(A B C D E F G H I J);
outputs!(A B C D E F G H I J K);
outputs!(A B C D E F G H I J K L);
push!();
push!(A);
push!(A B);
push!(A B C);
push!(A B C D);
push!(A B C D E);
push!(A B C D E F);
push!(A B C D E F G);
push!(A B C D E F G H);
push!(A B C D E F G H I);
push!(A B C D E F G H I J);
push!(A B C D E F G H I J K);

/// Encode a member's output with the workflow's codec, checking that it survives the trip.
fn encoded<'a, W: Workflow, T, Fut>(key: &str, fut: Fut) -> MemberBody<'a>
where
    T: Serialize + DeserializeOwned + Send + 'a,
    Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
{
    let what = format!("step `{key}`");
    Box::pin(async move {
        let value = fut.await?;
        codec::encode_verified(&W::Codec::default(), &what, &value)
            .map(|(encoded, _)| encoded)
            .map_err(|e| TurnError::Permanent(e.into()))
    })
}

/// A fixed group of steps run concurrently and saved in declaration order: made by
/// [`Turn::parallel`], given its members with [`step`](Self::step), and awaited for the tuple
/// of their outputs.
///
/// ```no_run
/// # use turnwise::prelude::*;
/// # #[allow(dead_code)]
/// # async fn quotes(ctx: &mut Turn<impl Workflow>) -> Result<u64, TurnError> {
/// let (a, b) = ctx
///     .parallel()
///     .step("quote-a", |_| async move { Ok(120_u64) })
///     .step("quote-b", |_| async move { Ok(95_u64) })
///     .await?;
/// # Ok(a.min(b)) }
/// ```
#[must_use = "a parallel group does nothing until it is awaited"]
pub struct Parallel<'a, W, Out> {
    turn: &'a mut Turn<W>,
    members: Vec<(String, StepOptions, MemberFn<'a>)>,
    limit: Option<usize>,
    _out: PhantomData<fn() -> Out>,
}

impl<W, Out> std::fmt::Debug for Parallel<'_, W, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.members.iter().map(|m| m.0.as_str()).collect();
        f.debug_struct("Parallel").field("keys", &keys).finish()
    }
}

impl<'a, W: Workflow, Out> Parallel<'a, W, Out> {
    /// Add a member: a step with `key` running `f`, as [`Turn::step`] would, with the default
    /// options. Its output is the next element of the group's tuple.
    pub fn step<T, F, Fut>(
        self,
        key: impl Into<String>,
        f: F,
    ) -> Parallel<'a, W, <Out as Push<T>>::Output>
    where
        Out: Push<T>,
        T: Serialize + DeserializeOwned + Send + 'a,
        F: FnOnce(StepCtx) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
    {
        self.step_with(key, StepOptions::default(), f)
    }

    /// Add a member with its own [`StepOptions`] (kind, timeout, heartbeat timeout).
    pub fn step_with<T, F, Fut>(
        self,
        key: impl Into<String>,
        options: StepOptions,
        f: F,
    ) -> Parallel<'a, W, <Out as Push<T>>::Output>
    where
        Out: Push<T>,
        T: Serialize + DeserializeOwned + Send + 'a,
        F: FnOnce(StepCtx) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
    {
        let key = key.into();
        let body_key = key.clone();
        let mut members = self.members;
        members.push((
            key,
            options,
            Box::new(move |s| encoded::<W, T, _>(&body_key, f(s))),
        ));
        Parallel {
            turn: self.turn,
            members,
            limit: self.limit,
            _out: PhantomData,
        }
    }

    /// Run at most `n` members at a time (at least one); by default all of them at once.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n.max(1));
        self
    }
}

impl<'a, W, Out> IntoFuture for Parallel<'a, W, Out>
where
    W: Workflow,
    Out: GroupOutput + Send + 'a,
{
    type Output = Result<Out, TurnError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Out, TurnError>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        let Parallel {
            turn,
            members,
            limit,
            ..
        } = self;
        let mut plan = Vec::with_capacity(members.len());
        let mut bodies = Vec::with_capacity(members.len());
        for (key, options, body) in members {
            plan.push((key, options));
            bodies.push(Some(body));
        }
        let label = match plan.first() {
            Some((key, _)) => format!("the parallel group from step `{key}`"),
            None => "an empty parallel group".to_owned(),
        };
        Box::pin(async move {
            let make = |i: usize, s: StepCtx| match bodies.get_mut(i).and_then(Option::take) {
                Some(body) => body(s),
                None => Box::pin(async { Err(missing()) }) as MemberBody<'a>,
            };
            let outputs = turn.run_group(&label, plan, limit, make).await?;
            Out::decode_all(&W::Codec::default(), outputs)
        })
    }
}

/// A fan-out: one step per item of a collection, under the keys `<key>.0`, `<key>.1`, …, run
/// concurrently (at most [`limit`](Self::limit) at a time) and saved in the collection's
/// order. Made by [`Turn::fan_out`]; awaited for the outputs in that order.
///
/// ```no_run
/// # use turnwise::prelude::*;
/// # #[allow(dead_code)]
/// # async fn sizes(ctx: &mut Turn<impl Workflow>, urls: Vec<String>) -> Result<Vec<u64>, TurnError> {
/// let sizes: Vec<u64> = ctx
///     .fan_out("fetch", urls, |s, url| async move {
///         // `<prefix>/fetch.<i>`: an idempotency key for this item, stable across attempts.
///         let idempotency_key = s.effect_id().to_owned();
///         Ok((url.len() + idempotency_key.len()) as u64)
///     })
///     .limit(4)
///     .await?;
/// # Ok(sizes) }
/// ```
#[must_use = "a fan-out does nothing until it is awaited"]
pub struct FanOut<'a, W, I, F> {
    turn: &'a mut Turn<W>,
    key: String,
    items: I,
    f: F,
    limit: Option<usize>,
    options: StepOptions,
}

impl<W, I, F> std::fmt::Debug for FanOut<'_, W, I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut")
            .field("key", &self.key)
            .field("limit", &self.limit)
            .finish()
    }
}

impl<W, I, F> FanOut<'_, W, I, F> {
    /// Run at most `n` items' steps at a time (at least one); by default all of them at once.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n.max(1));
        self
    }

    /// Record what kind of work each step does.
    pub fn kind(mut self, kind: OperationKind) -> Self {
        self.options.kind = kind;
        self
    }

    /// Set each step's per-attempt timeout (100 ms to 24 h; default 5 minutes).
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// Abandon the attempt when one of the steps reports no progress for this long.
    pub fn heartbeat_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.heartbeat_timeout = Some(timeout);
        self
    }

    /// Set all of each step's options at once.
    pub fn options(mut self, options: StepOptions) -> Self {
        self.options = options;
        self
    }
}

impl<'a, W, I, T, F, Fut> IntoFuture for FanOut<'a, W, I, F>
where
    W: Workflow,
    I: IntoIterator,
    I::Item: Send + 'a,
    T: Serialize + DeserializeOwned + Send + 'a,
    F: FnMut(StepCtx, I::Item) -> Fut + Send + 'a,
    Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
{
    type Output = Result<Vec<T>, TurnError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Vec<T>, TurnError>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        let FanOut {
            turn,
            key,
            items,
            mut f,
            limit,
            options,
        } = self;
        let mut items: Vec<Option<I::Item>> = items.into_iter().map(Some).collect();
        let plan: Vec<(String, StepOptions)> = (0..items.len())
            .map(|i| (format!("{key}.{i}"), options))
            .collect();
        let label = format!("fan-out `{key}`");
        Box::pin(async move {
            let keys: Vec<String> = plan.iter().map(|(k, _)| k.clone()).collect();
            let make = |i: usize, s: StepCtx| match items.get_mut(i).and_then(Option::take) {
                Some(item) => encoded::<W, T, _>(&keys[i], f(s, item)),
                None => Box::pin(async { Err(missing()) }) as MemberBody<'a>,
            };
            let outputs = turn.run_group(&label, plan, limit, make).await?;
            let codec = W::Codec::default();
            outputs
                .into_iter()
                .map(|out| decode_one(&codec, out))
                .collect()
        })
    }
}

impl<W: Workflow> Turn<W> {
    /// A fixed group of steps that run concurrently and are saved in declaration order, as if
    /// they had been awaited one after the other: add members with [`Parallel::step`], then
    /// `.await` the group for the tuple of their outputs (see [`Parallel`]).
    ///
    /// Each member is a step of its own: its own key (unique in the turn), position, effect
    /// id and checkpoint, and one entry of the turn budget. If a member fails, the members
    /// before it are still saved once they finish, the members after it are cancelled, and
    /// the group returns that member's error; the next attempt replays the saved members and
    /// runs the rest again.
    pub fn parallel(&mut self) -> Parallel<'_, W, ()> {
        Parallel {
            turn: self,
            members: Vec::new(),
            limit: None,
            _out: PhantomData,
        }
    }

    /// A fan-out: a step per item of `items`, keyed `<key>.0`, `<key>.1`, …, run concurrently
    /// (bound them with [`FanOut::limit`]) and saved in the items' order; `.await` it for the
    /// outputs in that order (see [`FanOut`]). `f` gets each step's context and its item.
    ///
    /// The items count against the turn budget, one step each: a fan-out over more items than
    /// the turn has room for fails the turn for good, naming the key and the count. Failure
    /// works as for [`parallel`](Self::parallel).
    pub fn fan_out<I, T, F, Fut>(
        &mut self,
        key: impl Into<String>,
        items: I,
        f: F,
    ) -> FanOut<'_, W, I, F>
    where
        I: IntoIterator,
        F: FnMut(StepCtx, I::Item) -> Fut + Send,
        Fut: Future<Output = Result<T, TurnError>> + Send,
    {
        FanOut {
            turn: self,
            key: key.into(),
            items,
            f,
            limit: None,
            options: StepOptions::default(),
        }
    }

    /// Run a group of steps: replay the saved ones, run the others concurrently (at most
    /// `limit` at a time), and save them in order as soon as each one's predecessors are saved.
    /// `make(i, ctx)` builds the body of member `i`; it is called, in order, only for members
    /// that were not saved before. Returns every member's key and encoded output, in order.
    async fn run_group<'a>(
        &mut self,
        label: &str,
        plan: Vec<(String, StepOptions)>,
        limit: Option<usize>,
        make: impl FnMut(usize, StepCtx) -> MemberBody<'a>,
    ) -> Result<Vec<(String, Value)>, TurnError> {
        let start = self.position;
        self.check_group_room(label, plan.len())?;
        let mut outputs = self.replay_group(&plan)?;
        let first_new = outputs
            .iter()
            .position(Option::is_none)
            .unwrap_or(plan.len());
        // The members save their own operations and checkpoints: a deferred step checkpoint goes first.
        self.shared.flush_deferred().await?;
        let mut group = Group::new(self.shared.clone(), start, &plan, first_new, limit, make);
        loop {
            group.start_running();
            group.start_saving(&plan);
            if group.all_saved() {
                break;
            }
            let (ended, saved) = group.progress().await;
            for (i, end) in ended {
                group.member_ended(i, end).await;
            }
            group.cancel_after_failure();
            if let Some(r) = saved {
                let Some((i, value)) = group.saving_done() else {
                    continue;
                };
                let key = plan[i].0.clone();
                if let Err((part, e)) = r {
                    let what = format!("step `{key}` of {label}: {part}");
                    return Err(self.shared.refused(&what, e).await);
                }
                self.remember_step(key, value.clone());
                outputs[i] = Some(value);
            }
        }
        if let Some((_, e)) = group.failed {
            return Err(e);
        }
        Ok(plan
            .into_iter()
            .zip(outputs)
            .map(|((key, _), out)| (key, out.unwrap_or(Value::Null)))
            .collect())
    }

    /// Fail the turn for good if a group of `n` steps does not fit in the turn's budget.
    fn check_group_room(&self, label: &str, n: usize) -> Result<(), TurnError> {
        let start = self.position;
        let max = self.shared.steps_max;
        if start + n > max {
            let room = max.saturating_sub(start);
            return Err(self.fail(
                start,
                format_args!(
                    "{label} has {n} steps, and the turn has room for {room} more (step_limit: a turn \
                     holds at most {max} steps, sleeps and signal waits); fan out over fewer items, \
                     or continue the work in a new turn with a continuation"
                ),
            ));
        }
        Ok(())
    }

    /// Take each member's place in the turn, in order: its saved output if an earlier attempt
    /// saved it, else `None`.
    fn replay_group(
        &mut self,
        plan: &[(String, StepOptions)],
    ) -> Result<Vec<Option<Value>>, TurnError> {
        let mut outputs: Vec<Option<Value>> = Vec::with_capacity(plan.len());
        for (key, _) in plan {
            let old = self.next(key, CheckpointKind::Step, None, None)?;
            outputs.push(old.map(|old| old.output));
        }
        Ok(outputs)
    }
}

/// A parallel group while it runs. Members start in order, at most `limit` at a time; they
/// finish in any order; they are saved one at a time, in order, each once its predecessors
/// are saved. A failed member stops the group at itself: the members before it still run and
/// are saved, the ones after it are cancelled.
struct Group<'a> {
    shared: Arc<TurnShared>,
    /// The turn position of member 0.
    start: usize,
    /// How many members may run at once.
    limit: usize,
    /// Each unsaved member's future, until it ends or is cancelled.
    bodies: Vec<Option<MemberFuture<'a>>>,
    /// The members running now.
    running: Vec<usize>,
    /// Outputs of members that ended but are not saved yet.
    finished: Vec<Option<Value>>,
    /// The next member to start.
    next_start: usize,
    /// The next member to save.
    next_save: usize,
    /// The first member that failed, with its error.
    failed: Option<(usize, TurnError)>,
    /// The member being saved, with its output.
    saving: Option<(usize, Value, SaveFuture)>,
}

impl<'a> Group<'a> {
    /// The group with a future for each member from `first_new` on (the ones before were
    /// saved by an earlier attempt); `make(i, ctx)` builds member `i`'s body, in order.
    fn new(
        shared: Arc<TurnShared>,
        start: usize,
        plan: &[(String, StepOptions)],
        first_new: usize,
        limit: Option<usize>,
        mut make: impl FnMut(usize, StepCtx) -> MemberBody<'a>,
    ) -> Self {
        let n = plan.len();
        let mut bodies: Vec<Option<MemberFuture<'a>>> = (0..n).map(|_| None).collect();
        for (i, (key, options)) in plan.iter().enumerate().skip(first_new) {
            let (ctx, writer) =
                StepCtx::start_detached(shared.clone(), key, options.heartbeat_timeout);
            let body = make(i, ctx.clone());
            let position = (start + i) as u32;
            bodies[i] = Some(member(
                shared.clone(),
                key,
                *options,
                position,
                ctx,
                writer,
                body,
            ));
        }
        Group {
            shared,
            start,
            limit: limit.unwrap_or(n).max(1),
            bodies,
            running: Vec::new(),
            finished: (0..n).map(|_| None).collect(),
            next_start: first_new,
            next_save: first_new,
            failed: None,
            saving: None,
        }
    }

    /// Where the group stops: at its first failed member, else after its last.
    fn stop_at(&self) -> usize {
        self.failed.as_ref().map_or(self.bodies.len(), |(i, _)| *i)
    }

    /// Start members, in order, while fewer than `limit` run.
    fn start_running(&mut self) {
        let stop_at = self.stop_at();
        while self.running.len() < self.limit && self.next_start < stop_at {
            self.running.push(self.next_start);
            self.next_start += 1;
        }
    }

    /// Start saving the next member in order if nothing is saving and it has finished.
    fn start_saving(&mut self, plan: &[(String, StepOptions)]) {
        if self.saving.is_some() || self.next_save >= self.stop_at() {
            return;
        }
        if let Some(value) = self.finished[self.next_save].take() {
            let (key, options) = &plan[self.next_save];
            let position = (self.start + self.next_save) as u32;
            let save = save(&self.shared, key, *options, position, value.clone());
            self.saving = Some((self.next_save, value, save));
        }
    }

    /// Whether every member before where the group stops is saved.
    fn all_saved(&self) -> bool {
        self.saving.is_none() && self.next_save >= self.stop_at()
    }

    /// Wait until a running member ends or the save in flight ends: the members that ended,
    /// and the save's result if it ended.
    async fn progress(
        &mut self,
    ) -> (
        Vec<(usize, MemberEnd)>,
        Option<Result<(), (&'static str, Error)>>,
    ) {
        std::future::poll_fn(|cx| {
            let mut ended = Vec::new();
            for &i in &self.running {
                if let Some(body) = self.bodies[i].as_mut() {
                    if let Poll::Ready(end) = body.as_mut().poll(cx) {
                        ended.push((i, end));
                    }
                }
            }
            let saved = match self.saving.as_mut() {
                Some((_, _, fut)) => match fut.as_mut().poll(cx) {
                    Poll::Ready(r) => Some(r),
                    Poll::Pending => None,
                },
                None => None,
            };
            if ended.is_empty() && saved.is_none() {
                Poll::Pending
            } else {
                Poll::Ready((ended, saved))
            }
        })
        .await
    }

    /// Member `i` ended: keep its output for saving, or remember it as the first failure;
    /// a member past its timeout abandons the attempt.
    async fn member_ended(&mut self, i: usize, end: MemberEnd) {
        self.running.retain(|r| *r != i);
        self.bodies[i] = None;
        match end {
            MemberEnd::Abandoned(why) => self.shared.stop(Interrupt::Abandoned(why)).await,
            MemberEnd::Done(Ok(value)) => self.finished[i] = Some(value),
            MemberEnd::Done(Err(e)) => {
                if self.failed.as_ref().is_none_or(|(f, _)| i < *f) {
                    self.failed = Some((i, e));
                }
            }
        }
    }

    /// Cancel the members after a failed one: their outputs would follow a gap.
    fn cancel_after_failure(&mut self) {
        let Some((f, _)) = &self.failed else {
            return;
        };
        let f = *f;
        let bodies = &mut self.bodies;
        self.running.retain(|&r| {
            if r > f {
                bodies[r] = None;
            }
            r < f
        });
    }

    /// The save in flight ended: the member it saved and its output; the next save is the
    /// member after it. Whether the save succeeded is the caller's to check.
    fn saving_done(&mut self) -> Option<(usize, Value)> {
        let (i, value, _) = self.saving.take()?;
        self.next_save += 1;
        Some((i, value))
    }
}

/// Saving one member: its operation, then its checkpoint; the error names which failed.
type SaveFuture = Pin<Box<dyn Future<Output = Result<(), (&'static str, Error)>> + Send>>;

/// Open member `key`'s operation at `position` and post its checkpoint with `output`.
fn save(
    shared: &Arc<TurnShared>,
    key: &str,
    options: StepOptions,
    position: u32,
    output: Value,
) -> SaveFuture {
    let backend = shared.backend.clone();
    let lease = shared.lease.clone();
    let key = key.to_owned();
    Box::pin(async move {
        backend
            .operation_cursor(OperationRequest {
                lease: lease.clone(),
                position,
                key: key.clone(),
                kind: options.kind,
                timeout_ms: options.timeout.as_millis() as u64,
                // The member has finished: only its checkpoint follows.
                heartbeat_timeout_ms: None,
            })
            .await
            .map_err(|e| ("the operation", e))?;
        backend
            .checkpoint_ack(CheckpointRequest {
                lease,
                position,
                key,
                kind: CheckpointKind::Step,
                output,
                delay_ms: None,
            })
            .await
            .map_err(|e| ("its checkpoint", e))?;
        Ok(())
    })
}

/// Run one member's body under its timeout and heartbeat timeout, as [`Turn::step`] runs a
/// step's.
fn member<'a>(
    shared: Arc<TurnShared>,
    key: &str,
    options: StepOptions,
    position: u32,
    ctx: StepCtx,
    writer: crate::sdk::context::step::Writer,
    body: MemberBody<'a>,
) -> MemberFuture<'a> {
    let what = format!("step `{key}`");
    let span =
        tracing::info_span!("step", key = %key, position, kind = %options.kind, parallel = true);
    Box::pin(async move {
        let timeout_ms = options.timeout.as_millis();
        let deadline = Instant::now() + options.timeout;
        let started = Instant::now();
        let mut fut = std::pin::pin!(tracing::Instrument::instrument(body, span));
        let mut last = ctx.watch_writes();
        let out = loop {
            let quiet = options
                .heartbeat_timeout
                .map(|d| *last.borrow_and_update() + d);
            tokio::select! {
                biased;
                out = &mut fut => break out,
                _ = last.changed() => {}
                () = tokio::time::sleep_until(deadline) => {
                    return MemberEnd::Abandoned(format!("{what} ran past its timeout of {timeout_ms} ms"));
                }
                () = sleep_until_opt(quiet) => {
                    return MemberEnd::Abandoned(format!(
                        "{what} reported no progress within its heartbeat timeout"
                    ));
                }
            }
        };
        crate::metrics::worker_step(&shared.workflow, out.is_ok(), started.elapsed());
        let flushed = writer.finish().await;
        let value = match out {
            Ok(value) => value,
            Err(e) => return MemberEnd::Done(Err(e)),
        };
        if let Err(e) = flushed {
            let what = format!("{what}: its progress");
            return MemberEnd::Done(Err(shared.refused(&what, e).await));
        }
        MemberEnd::Done(Ok(value))
    })
}
