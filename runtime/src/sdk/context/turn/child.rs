//! Child workflows from a turn: [`Turn::call_child`] starts another instance, sends it a
//! message and waits durably for that turn's typed reply.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Turn;
use crate::protocol::backend::Backend;
use crate::protocol::error::Error;
use crate::protocol::*;
use crate::sdk::codec::{self, CodecError};
use crate::sdk::workflow::{TurnError, Workflow, WorkflowOptions};
use turnwise_rules::names;

/// How long [`Turn::call_child`] waits for the child's outcome unless told otherwise: 30 days.
pub const DEFAULT_CHILD_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Why [`Turn::call_child`] has no reply to give.
///
/// With `?` in a workflow handler, [`Failed`](Self::Failed), [`Cancelled`](Self::Cancelled),
/// [`TimedOut`](Self::TimedOut) and [`Decode`](Self::Decode) fail the parent's turn for good
/// (the outcome is saved in the turn, so a retry would meet it again), and
/// [`Call`](Self::Call) fails it as the error inside says.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChildError {
    /// The child's turn failed for good (it ran out of attempts or its handler gave up).
    #[error("child turn {turn} of `{workflow_id}` failed: {error}")]
    Failed {
        /// The child instance.
        workflow_id: String,
        /// The child's turn.
        turn: u64,
        /// The child's last error.
        error: String,
    },
    /// An operator cancelled the child's turn.
    #[error("child turn {turn} of `{workflow_id}` was cancelled")]
    Cancelled {
        /// The child instance.
        workflow_id: String,
        /// The child's turn.
        turn: u64,
    },
    /// No outcome arrived within the call's timeout. The child's turn goes on; its outcome,
    /// when it comes, is not waited for any more.
    #[error(
        "child `{workflow_id}` gave no outcome within {timeout:?}; \
         give the call a longer `.timeout(..)` if it may take longer"
    )]
    TimedOut {
        /// The child instance.
        workflow_id: String,
        /// The call's timeout.
        timeout: Duration,
    },
    /// The child's reply does not decode as its workflow's reply type (the instance runs
    /// another version of the workflow, say).
    #[error("the reply of child turn {turn} of `{workflow_id}` does not decode: {message}")]
    Decode {
        /// The child instance.
        workflow_id: String,
        /// The child's turn.
        turn: u64,
        /// What the codec said.
        message: String,
    },
    /// Starting the child or waiting for it failed as any durable call can (a refusal, a
    /// store or transport failure).
    #[error("{0}")]
    Call(TurnError),
}

impl From<TurnError> for ChildError {
    fn from(e: TurnError) -> Self {
        ChildError::Call(e)
    }
}

/// The [`TurnError`] a handler's error stands for: a [`ChildError`] that came through `?`
/// (and so became a retryable [`TurnError::Retry`]) fails the turn for good, or as the
/// durable call inside it failed. Every other error is left as it is.
pub(crate) fn child_error(e: TurnError) -> TurnError {
    let TurnError::Retry(inner) = e else {
        return e;
    };
    match inner.downcast::<ChildError>() {
        Ok(child) => match *child {
            ChildError::Call(e) => e,
            other => TurnError::permanent(other.to_string()),
        },
        Err(inner) => TurnError::Retry(inner),
    }
}

/// A child call being configured; `.await` it to start the child and wait for its reply.
#[must_use = "a child call does nothing until it is awaited"]
pub struct ChildCall<'a, W, C: Workflow> {
    turn: &'a mut Turn<W>,
    key: String,
    id: String,
    message: C::Message,
    state: Result<Value, CodecError>,
    options: WorkflowOptions,
    timeout: Duration,
    _child: PhantomData<fn() -> C>,
}

impl<W, C: Workflow> ChildCall<'_, W, C> {
    /// Wait at most this long for the child's outcome (1 ms to 365 days; default 30 days).
    /// Past it the call answers [`ChildError::TimedOut`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Use `key` for this call instead of the one given to
    /// [`call_child`](Turn::call_child).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }
}

impl<W: Workflow> Turn<W> {
    /// Call a child workflow: start instance `id` of `child` (if it does not exist yet, with
    /// its initial state and options), send it `message`, and wait durably for that turn's
    /// reply, typed as `C::Reply`.
    ///
    /// The call is one durable call under `key`: unique in the turn, counted against the step
    /// limit, and replayed from the saved outcome, never sent again. The message id is made
    /// from the call's effect id, so an attempt that dies after sending and before saving
    /// sends the same message again, which the child admits once. While the child runs, this
    /// turn is released and its worker slot freed; the engine delivers the child turn's
    /// outcome to this turn when the child's turn ends, and the turn runs again from the top.
    ///
    /// A child turn that fails for good or is cancelled answers [`ChildError::Failed`] or
    /// [`ChildError::Cancelled`]; with `?` either fails this turn for good. The child instance
    /// is created as [`WorkflowExt::start`](crate::WorkflowExt::start) creates one, so its
    /// state type needs a `Default`; an id already taken by another workflow fails the turn
    /// for good, naming it.
    ///
    /// ```
    /// # use turnwise::prelude::*;
    /// #[workflow(name = "pricer", version = "v1")]
    /// async fn pricer(_ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    ///     Ok(Done::new(state + 1).reply(item.len() as u64 * 100))
    /// }
    ///
    /// #[workflow(name = "basket", version = "v1")]
    /// async fn basket(ctx: &mut Turn, total: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    ///     let price = ctx.call_child("price", &pricer, "pricer-1", item).await?;
    ///     Ok(Done::new(total + price).reply(total + price))
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let env = turnwise::testing::TestEnv::new().register(basket).register(pricer);
    /// let cart = env.start(&basket, "basket-1").await?;
    /// cart.send("pear".into(), "m1").await?;
    /// env.run_until_idle().await?;
    /// assert_eq!(cart.reply(1).await?, Some(400));
    /// # Ok(())
    /// # }
    /// ```
    pub fn call_child<'a, C>(
        &'a mut self,
        key: impl Into<String>,
        child: &C,
        id: impl Into<String>,
        message: C::Message,
    ) -> ChildCall<'a, W, C>
    where
        C: Workflow,
        C::State: Default,
    {
        let state = codec::encode_checked(
            &C::Codec::default(),
            "initial state",
            &child.initial_state(),
            C::state_eq(),
        )
        .map(|(state, _)| state);
        ChildCall {
            turn: self,
            key: key.into(),
            id: id.into(),
            message,
            state,
            options: child.options(),
            timeout: DEFAULT_CHILD_TIMEOUT,
            _child: PhantomData,
        }
    }

    async fn run_child<C: Workflow>(
        &mut self,
        call: ChildParts<C>,
    ) -> Result<C::Reply, ChildError> {
        let ChildParts {
            key,
            id,
            message,
            state,
            options,
            timeout,
        } = call;
        let what = format!("child call `{key}`");
        let signal = reply_signal(&key);
        let timeout_ms = timeout.as_millis() as u64;
        let position = self.position;
        // The key is checked (valid, unique, in order) before anything is sent.
        let saved = self.next(
            &key,
            CheckpointKind::Signal,
            Some(timeout_ms),
            Some(&signal),
        )?;
        let output = match saved {
            Some(old) => old.output,
            None => {
                // Not saved yet: make sure the child has the message, then wait. Both calls
                // are idempotent, so an attempt that died after them repeats them harmlessly.
                let state = match state {
                    Ok(state) => state,
                    Err(e) => return Err(ChildError::Call(self.fail(position, e))),
                };
                let encoded = codec::encode_checked(
                    &C::Codec::default(),
                    "message",
                    &message,
                    C::message_eq(),
                );
                let message = match encoded {
                    Ok((message, _)) => message,
                    Err(e) => return Err(ChildError::Call(self.fail(position, e))),
                };
                self.shared.flush_deferred().await?;
                let backend = self.shared.backend.clone();
                let sent = send_to_child::<C>(
                    &*backend,
                    ChildMessage {
                        id: id.clone(),
                        state,
                        options,
                        message,
                        message_id: child_message_id(&key, &self.effect_id(&key)),
                        origin: parent_origin(self.workflow_id(), self.turn_number(), &signal),
                    },
                )
                .await;
                let sending = format!("{what}: sending to `{id}`");
                self.shared.check(&sending, sent).await?;
                self.wait_signal_at(position, key, &signal, timeout_ms, &what)
                    .await?
            }
        };
        child_outcome::<C>(&output, &id, timeout)
    }
}

impl<W: Workflow> Turn<W> {
    /// Start a child without waiting for it: [`call_child`](Self::call_child)'s first half,
    /// as a step under `key`. It creates instance `id` of `child` if needed and sends it
    /// `message` (idempotently, as `call_child` does), and answers a [`StartedChild`] to
    /// await later with [`await_child`](Self::await_child) under a key of its own, so that
    /// several children run at once:
    ///
    /// ```
    /// # use turnwise::prelude::*;
    /// # #[workflow(name = "pricer", version = "v1")]
    /// # async fn pricer(_ctx: &mut Turn, state: u64, item: String) -> Result<Done<u64, u64>, TurnError> {
    /// #     Ok(Done::new(state + 1).reply(item.len() as u64 * 100))
    /// # }
    /// #[workflow(name = "pair", version = "v1")]
    /// async fn pair(ctx: &mut Turn, total: u64, items: (String, String)) -> Result<Done<u64, u64>, TurnError> {
    ///     let a = ctx.start_child("start-a", &pricer, "pricer-a", items.0).await?;
    ///     let b = ctx.start_child("start-b", &pricer, "pricer-b", items.1).await?;
    ///     let sum = ctx.await_child("a", &a).await? + ctx.await_child("b", &b).await?;
    ///     Ok(Done::new(total + sum).reply(sum))
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let env = turnwise::testing::TestEnv::new().register(pair).register(pricer);
    /// # let h = env.start(&pair, "pair-1").await?;
    /// # h.send(("ab".into(), "abc".into()), "m1").await?;
    /// # env.run_until_idle().await?;
    /// # assert_eq!(h.reply(1).await?, Some(500));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// A child whose outcome arrives before it is awaited keeps it on this turn until then. A
    /// started child that is never awaited runs all the same; its outcome is dropped when this
    /// turn ends.
    pub async fn start_child<C>(
        &mut self,
        key: impl Into<String>,
        child: &C,
        id: impl Into<String>,
        message: C::Message,
    ) -> Result<StartedChild<C>, TurnError>
    where
        C: Workflow,
        C::State: Default,
    {
        let key = key.into();
        let id = id.into();
        let what = format!("child start `{key}`");
        let state = codec::encode_checked(
            &C::Codec::default(),
            "initial state",
            &child.initial_state(),
            C::state_eq(),
        );
        let encoded =
            codec::encode_checked(&C::Codec::default(), "message", &message, C::message_eq());
        let signal = reply_signal(&key);
        let backend = self.shared.backend.clone();
        let m = ChildMessage {
            id: id.clone(),
            state: Value::Null,
            options: child.options(),
            message: Value::Null,
            message_id: child_message_id(&key, &self.effect_id(&key)),
            origin: parent_origin(self.workflow_id(), self.turn_number(), &signal),
        };
        self.step(key, move |_s| async move {
            let (state, message) = match (state, encoded) {
                (Ok((state, _)), Ok((message, _))) => (state, message),
                (Err(e), _) | (_, Err(e)) => {
                    return Err(TurnError::permanent(format!("{what}: {e}")))
                }
            };
            let sent = send_to_child::<C>(
                &*backend,
                ChildMessage {
                    state,
                    message,
                    ..m
                },
            )
            .await;
            match sent {
                Ok(()) => Ok(StartedChild {
                    workflow_id: id,
                    signal,
                    _child: PhantomData,
                }),
                Err(e) if e.is_refusal() => Err(TurnError::permanent(format!(
                    "{what}: sending to `{id}` was refused ({}): {e}",
                    e.code()
                ))),
                Err(e) => Err(TurnError::Retry(Box::new(e))),
            }
        })
        .await
    }

    /// Wait durably under `key` for the reply of a child started with
    /// [`start_child`](Self::start_child): the second half of
    /// [`call_child`](Self::call_child), with the same answers. Chain `.timeout(..)` to wait
    /// less than 30 days.
    pub fn await_child<'a, C: Workflow>(
        &'a mut self,
        key: impl Into<String>,
        started: &StartedChild<C>,
    ) -> ChildWait<'a, W, C> {
        ChildWait {
            turn: self,
            key: key.into(),
            workflow_id: started.workflow_id.clone(),
            signal: started.signal.clone(),
            timeout: DEFAULT_CHILD_TIMEOUT,
            _child: PhantomData,
        }
    }
}

/// A child started by [`Turn::start_child`]; [`Turn::await_child`] waits for its reply. It is
/// saved as the start's step output, so a replay answers the same child.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct StartedChild<C> {
    /// The child instance.
    pub workflow_id: String,
    /// The signal its outcome arrives as.
    signal: String,
    #[serde(skip)]
    _child: PhantomData<fn() -> C>,
}

impl<C> std::fmt::Debug for StartedChild<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartedChild")
            .field("workflow_id", &self.workflow_id)
            .field("signal", &self.signal)
            .finish()
    }
}

/// A wait for a started child being configured; `.await` it for the child's reply.
#[must_use = "a child wait does nothing until it is awaited"]
pub struct ChildWait<'a, W, C> {
    turn: &'a mut Turn<W>,
    key: String,
    workflow_id: String,
    signal: String,
    timeout: Duration,
    _child: PhantomData<fn() -> C>,
}

impl<W, C> ChildWait<'_, W, C> {
    /// Wait at most this long (1 ms to 365 days; default 30 days); past it the wait answers
    /// [`ChildError::TimedOut`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<'a, W: Workflow, C: Workflow> IntoFuture for ChildWait<'a, W, C> {
    type Output = Result<C::Reply, ChildError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let ChildWait {
                turn,
                key,
                workflow_id,
                signal,
                timeout,
                ..
            } = self;
            let what = format!("child wait `{key}`");
            let output = turn.signal_wait(key, &signal, timeout, &what).await?;
            child_outcome::<C>(&output, &workflow_id, timeout)
        })
    }
}

/// Where a child's message comes from and goes: what [`send_to_child`] needs.
struct ChildMessage {
    id: String,
    state: Value,
    options: WorkflowOptions,
    message: Value,
    message_id: String,
    origin: MessageOrigin,
}

/// Create the child instance (an existing one of the same workflow is kept as it is) and
/// admit the message under its id (a repeat answers the first admission).
async fn send_to_child<C: Workflow>(backend: &dyn Backend, m: ChildMessage) -> Result<(), Error> {
    backend
        .create_instance(CreateInstanceRequest {
            id: m.id.clone(),
            workflow_type: C::NAME.to_owned(),
            version: C::VERSION.to_owned(),
            state: m.state,
            lease_ms: Some(m.options.lease.as_millis() as u64),
            max_attempts: Some(m.options.max_attempts),
            on_exhausted: Some(m.options.on_exhausted),
        })
        .await?;
    backend
        .send_message(MessageRequest {
            workflow_id: m.id,
            id: m.message_id,
            message: m.message,
            origin: Some(m.origin),
        })
        .await?;
    Ok(())
}

/// The origin of a message from turn `turn` of `parent`, whose outcome goes to `signal`.
fn parent_origin(parent: &str, turn: u64, signal: &str) -> MessageOrigin {
    let mut origin = MessageOrigin::new(names::PARENT_ORIGIN_KIND);
    origin
        .fields
        .insert(names::PARENT_ID_FIELD.into(), json!(parent));
    origin
        .fields
        .insert(names::PARENT_TURN_FIELD.into(), json!(turn));
    origin
        .fields
        .insert(names::REPLY_SIGNAL_FIELD.into(), json!(signal));
    origin
}

/// The reply (or why there is none) that the saved output of a child's outcome wait,
/// `{"received", "value"}`, carries.
fn child_outcome<C: Workflow>(
    output: &Value,
    id: &str,
    timeout: Duration,
) -> Result<C::Reply, ChildError> {
    if output.get("received") != Some(&Value::Bool(true)) {
        return Err(ChildError::TimedOut {
            workflow_id: id.to_owned(),
            timeout,
        });
    }
    let value = output.get("value").cloned().unwrap_or(Value::Null);
    let workflow_id = value["workflow_id"].as_str().unwrap_or(id).to_owned();
    let turn = value["turn"].as_u64().unwrap_or(0);
    match value["status"].as_str() {
        Some("completed") => {
            let reply = value.get("reply").unwrap_or(&Value::Null);
            codec::decode(&C::Codec::default(), "reply", reply).map_err(|e| ChildError::Decode {
                workflow_id,
                turn,
                message: e.to_string(),
            })
        }
        Some("cancelled") => Err(ChildError::Cancelled { workflow_id, turn }),
        _ => Err(ChildError::Failed {
            workflow_id,
            turn,
            error: value["error"]
                .as_str()
                .unwrap_or("no error was recorded")
                .to_owned(),
        }),
    }
}

/// What a [`ChildCall`] carries into its future.
struct ChildParts<C: Workflow> {
    key: String,
    id: String,
    message: C::Message,
    state: Result<Value, CodecError>,
    options: WorkflowOptions,
    timeout: Duration,
}

impl<'a, W, C> IntoFuture for ChildCall<'a, W, C>
where
    W: Workflow,
    C: Workflow,
{
    type Output = Result<C::Reply, ChildError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        let parts = ChildParts::<C> {
            key: self.key,
            id: self.id,
            message: self.message,
            state: self.state,
            options: self.options,
            timeout: self.timeout,
        };
        Box::pin(self.turn.run_child(parts))
    }
}

/// The signal a child call's outcome arrives as: `child.<key>`, or for a key too long for
/// that, its start and a digest of it (signal names are identifiers of at most 128).
fn reply_signal(key: &str) -> String {
    let max = 128 - names::CHILD_SIGNAL_PREFIX.len();
    if key.len() <= max {
        return format!("{}{key}", names::CHILD_SIGNAL_PREFIX);
    }
    let digest = digest(key);
    let keep = max - 1 - digest.len();
    format!("{}{}.{digest}", names::CHILD_SIGNAL_PREFIX, &key[..keep])
}

/// The child's message id: the call's key (at most 80 characters of it, for reading) and a
/// digest of the call's effect id, which is unique to this parent turn and key.
fn child_message_id(key: &str, effect_id: &str) -> String {
    let start = &key[..key.len().min(80)];
    format!("{start}-{}", digest(effect_id))
}

/// 32 hex digits: two 64-bit FNV-1a hashes of `text` with different offset bases. Stable
/// across builds and platforms, unlike the standard library's hasher.
fn digest(text: &str) -> String {
    fn fnv(text: &str, basis: u64) -> u64 {
        text.bytes().fold(basis, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }
    format!(
        "{:016x}{:016x}",
        fnv(text, 0xcbf2_9ce4_8422_2325),
        fnv(text, 0x6c62_272e_07bb_0142)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_signals_are_identifiers_unique_per_key() {
        let long = "k".repeat(128);
        let long2 = format!("{}x", "k".repeat(127));
        for key in ["a", "review-1", long.as_str(), long2.as_str()] {
            let s = reply_signal(key);
            assert!(turnwise_rules::is_identifier(&s), "{s}");
        }
        assert_eq!(reply_signal("review-1"), "child.review-1");
        assert_ne!(reply_signal(&long), reply_signal(&long2));
    }

    #[test]
    fn message_ids_are_identifiers_and_stable() {
        let key = "k".repeat(128);
        let id = child_message_id(&key, "ns/inst/e1/7/m-7/kkk");
        assert!(turnwise_rules::is_identifier(&id), "{id}");
        assert_eq!(id, child_message_id(&key, "ns/inst/e1/7/m-7/kkk"));
        assert_ne!(id, child_message_id(&key, "ns/inst/e1/8/m-8/kkk"));
        assert_eq!(
            digest(""),
            "cbf29ce484222325".to_owned() + "6c62272e07bb0142"
        );
    }
}
