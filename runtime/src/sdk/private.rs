//! Support for the code that `#[workflow]`, `#[step]` and `#[derive(Signal)]` generate.
//!
//! Not public API: nothing here is covered by semver, and it changes in lockstep with
//! `turnwise-macros` (which `turnwise` pins exactly).

pub use std::boxed::Box;
pub use std::option::Option;
pub use std::string::String;
pub use std::vec;

pub use crate::manifest;
pub use std::time::Duration;

pub use serde_json::Value as JsonValue;

pub use crate::protocol::{Millis, OnExhausted, OperationKind};
pub use crate::sdk::codec::{EqFn, JsonCodec};
pub use crate::sdk::context::{BoxStepFn, Step, StepCtx, Turn};
pub use crate::sdk::schema::WorkflowSchema;
pub use crate::sdk::workflow::{
    Accepts, OnMismatch, Signal, TurnResult, Workflow, WorkflowOptions,
};

use std::future::Future;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::sdk::workflow::TurnError;

/// A workflow's state type, beyond what `Workflow` requires of it: a schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[workflow]`'s state: it must also implement `JsonSchema`",
    label = "listed in the workflow's schema",
    note = "derive it: `#[derive(schemars::JsonSchema)]`"
)]
pub trait WireState: JsonSchema {}
impl<T: JsonSchema> WireState for T {}

/// A workflow's message type, beyond what `Workflow` requires of it: a schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[workflow]`'s message: it must also implement `JsonSchema`",
    label = "listed in the workflow's schema",
    note = "derive it: `#[derive(schemars::JsonSchema)]`"
)]
pub trait WireMessage: JsonSchema {}
impl<T: JsonSchema> WireMessage for T {}

/// A workflow's reply type, beyond what `Workflow` requires of it: a schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[workflow]`'s reply: it must also implement `JsonSchema`",
    label = "listed in the workflow's schema",
    note = "derive it: `#[derive(schemars::JsonSchema)]`"
)]
pub trait WireReply: JsonSchema {}
impl<T: JsonSchema> WireReply for T {}

/// A signal type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a signal: it must implement `Serialize`, `Deserialize` and `JsonSchema`",
    label = "saved and sent as JSON",
    note = "derive them: `#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]`"
)]
pub trait WireSignal: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static> WireSignal for T {}

/// Assert that `T` can be a signal.
pub const fn assert_signal_data<T: WireSignal>() {}

/// A step's resume cursor type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a step's resume cursor: it must implement `Serialize`, `Deserialize` and `JsonSchema`",
    label = "saved and sent as JSON",
    note = "derive them: `#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]`"
)]
pub trait WireCursor: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static> WireCursor for T {}

/// Assert that `T` can be a step's resume cursor.
pub const fn assert_cursor<T: WireCursor>() {}

/// A type that a `#[workflow]` or `#[step]` function may fail with.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the error type of a workflow or step: it does not convert into `TurnError`",
    label = "not convertible into `TurnError`",
    note = "return `Result<_, TurnError>`: every `std::error::Error + Send + Sync + 'static` converts into it with `?`"
)]
pub trait IntoTurnError: Into<TurnError> {}
impl<E: Into<TurnError>> IntoTurnError for E {}

/// What a workflow's dependencies (its fourth parameter) must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a workflow's dependencies: it must be `Clone + Send + Sync + 'static`",
    label = "the workflow value holds this",
    note = "wrap shared services in an `Arc`"
)]
pub trait WorkflowDeps: Clone + Send + Sync + 'static {}
impl<D: Clone + Send + Sync + 'static> WorkflowDeps for D {}

/// Assert that `D` can be a workflow's dependencies.
pub const fn assert_deps<D: WorkflowDeps>() {}

/// Box a step body so that a `#[step]` function returns a nameable type.
pub fn box_step<'a, T, F, Fut>(f: F) -> BoxStepFn<'a, T>
where
    F: FnOnce(StepCtx) -> Fut + Send + 'a,
    Fut: Future<Output = Result<T, TurnError>> + Send + 'a,
{
    Box::new(move |s| Box::pin(f(s)))
}

/// Convert the error of a user function's result into a [`TurnError`].
pub fn into_turn_result<T, E: IntoTurnError>(r: Result<T, E>) -> Result<T, TurnError> {
    r.map_err(Into::into)
}

/// Whether two strings are equal, in a const context (for duplicate signal names).
pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The schema of a workflow's message.
pub fn message_schema<T: WireMessage>() -> serde_json::Value {
    crate::sdk::schema::schema_of::<T>()
}

/// The schema of a workflow's state.
pub fn state_schema<T: WireState>() -> serde_json::Value {
    crate::sdk::schema::schema_of::<T>()
}

/// The schema of a workflow's reply.
pub fn reply_schema<T: WireReply>() -> serde_json::Value {
    crate::sdk::schema::schema_of::<T>()
}

/// The schema of a signal.
pub fn signal_schema<T: WireSignal + Signal>() -> serde_json::Value {
    crate::sdk::schema::schema_of::<T>()
}

/// A `#[step]`'s output type, beyond what every step output is (see `StepOutput`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[step]` function's output: it must also implement `JsonSchema`",
    label = "listed in the workflow's schema",
    note = "derive it: `#[derive(schemars::JsonSchema)]`"
)]
pub trait StepSchema: JsonSchema {}
impl<T: JsonSchema> StepSchema for T {}

/// The schema of a step's output.
pub fn step_schema<T: StepSchema>() -> serde_json::Value {
    crate::sdk::schema::schema_of::<T>()
}

/// A `#[step]` function, seen through its value: `name(ctx, ..)` in a `#[workflow]` body calls
/// the function `#[step]` generates, which takes the context and the step's arguments and
/// returns a [`Step`]. The macro names the call's callee through this trait (in the value
/// namespace, where a plain helper function also lives) so that a helper called with the bare
/// context gets this message rather than rustc's "expected type, found function".
#[diagnostic::on_unimplemented(
    message = "a call in a `#[workflow]` body whose first argument is the bare context must be to a `#[step]` function",
    label = "not a `#[step]` function",
    note = "to call a helper that takes the context, pass it reborrowed: `helper(&mut *ctx, ..)`"
)]
pub trait StepCall<W, O, Args> {}

macro_rules! step_call_arities {
    ($(($($a:ident),*)),* $(,)?) => {$(
        impl<F, W, O, $($a),*> StepCall<W, O, ($($a,)*)> for F
        where
            W: Workflow,
            F: for<'t> Fn(&'t mut Turn<W>, $($a),*) -> Step<'t, W, O, BoxStepFn<'t, O>>,
        {
        }
    )*};
}

step_call_arities!(
    (),
    (A1),
    (A1, A2),
    (A1, A2, A3),
    (A1, A2, A3, A4),
    (A1, A2, A3, A4, A5),
    (A1, A2, A3, A4, A5, A6),
    (A1, A2, A3, A4, A5, A6, A7),
    (A1, A2, A3, A4, A5, A6, A7, A8),
    (A1, A2, A3, A4, A5, A6, A7, A8, A9),
    (A1, A2, A3, A4, A5, A6, A7, A8, A9, A10),
    (A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11),
    (A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12),
);

/// The output of the `#[step]` function `f`, for [`StepOutputOf`]'s schema probe.
pub fn step_output_of<W, O, Args, F: StepCall<W, O, Args>>(_: &F) -> StepOutputOf<O> {
    StepOutputOf(std::marker::PhantomData)
}

/// A `#[step]` function's output type, to list its schema. Autoref specialization:
/// `(&&step_output_of::<W, _, _, _>(&f)).output_schema()` is the output's schema when it
/// implements `JsonSchema`, and `null` otherwise: the step's own expansion reports a missing
/// `JsonSchema` at its definition, so the workflow's schema does not report it a second time.
pub struct StepOutputOf<O>(std::marker::PhantomData<fn() -> O>);

/// Picked when the output implements `JsonSchema`.
pub trait OutputSchemaKnown {
    /// The output's schema.
    fn output_schema(&self) -> serde_json::Value;
}

impl<O: JsonSchema> OutputSchemaKnown for &StepOutputOf<O> {
    fn output_schema(&self) -> serde_json::Value {
        crate::sdk::schema::schema_of::<O>()
    }
}

/// Picked otherwise (the step's own expansion has already failed to compile).
pub trait OutputSchemaUnknown {
    /// `null`.
    fn output_schema(&self) -> serde_json::Value;
}

impl<O> OutputSchemaUnknown for &&StepOutputOf<O> {
    fn output_schema(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// A value of any type that is never made: the context `#[workflow]` gives an `async` block it
/// has reported as holding a durable call in flight, so that the borrow checker does not
/// report the same mistake again. The code that holds it never compiles, so it never runs.
pub fn in_flight_placeholder<T>() -> T {
    unreachable!("`#[workflow]` reported this `async` block; the code does not compile")
}

/// Assemble a workflow's schema.
pub fn workflow_schema<const S: usize, const T: usize>(
    name: &str,
    version: &str,
    message: serde_json::Value,
    state: serde_json::Value,
    reply: serde_json::Value,
    signals: [(&str, serde_json::Value); S],
    steps: [(&str, serde_json::Value); T],
) -> WorkflowSchema {
    WorkflowSchema {
        name: name.to_owned(),
        version: version.to_owned(),
        message,
        state,
        reply,
        signals: signals
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        steps: steps.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }
}

/// Assemble a workflow's replay manifest from its `schema`, the grammar of its body and the
/// shape hash `#[workflow]` computed.
pub fn workflow_manifest<const P: usize>(
    schema: WorkflowSchema,
    shape_hash: &str,
    grammar: manifest::Node,
    patches: [&str; P],
) -> manifest::Manifest {
    let mut patches: Vec<String> = patches.iter().map(|p| (*p).to_owned()).collect();
    patches.sort();
    manifest::Manifest {
        format: manifest::FORMAT,
        name: schema.name,
        version: schema.version,
        shape_hash: shape_hash.to_owned(),
        grammar,
        patches,
        schemas: manifest::Schemas {
            state: schema.state,
            message: schema.message,
            reply: schema.reply,
            signals: schema.signals,
            steps: schema.steps,
        },
    }
}

/// Autoref specialization: `(&&EqProbe::<T>::NEW).eq_fn()` is `Some(T::eq)` when `T:
/// PartialEq` and `None` otherwise. It only works where `T` is a concrete type, which is where
/// `#[workflow]` uses it.
pub struct EqProbe<T: ?Sized>(std::marker::PhantomData<fn(&T)>);

impl<T: ?Sized> EqProbe<T> {
    /// The probe.
    pub const NEW: Self = EqProbe(std::marker::PhantomData);
}

/// Picked when `T: PartialEq`.
pub trait ViaPartialEq<T> {
    /// `Some(<T as PartialEq>::eq)`.
    fn eq_fn(&self) -> Option<crate::sdk::codec::EqFn<T>>;
}

impl<T: PartialEq> ViaPartialEq<T> for &EqProbe<T> {
    fn eq_fn(&self) -> Option<crate::sdk::codec::EqFn<T>> {
        Some(<T as PartialEq>::eq)
    }
}

/// Picked otherwise.
pub trait NoPartialEq<T> {
    /// `None`.
    fn eq_fn(&self) -> Option<crate::sdk::codec::EqFn<T>>;
}

impl<T> NoPartialEq<T> for &&EqProbe<T> {
    fn eq_fn(&self) -> Option<crate::sdk::codec::EqFn<T>> {
        None
    }
}
