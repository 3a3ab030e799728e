//! Reading a success body into the type a call answers: strictly first, then as leniently as
//! the wire allows for the routes whose answers the protocol does not promise (a stand-in turn
//! from the lease, a claim that claimed nothing).

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use turnwise_core::protocol::error::{Error, Result};
use turnwise_core::protocol::*;

/// The success body of a call, read in one pass straight into the type the call answers.
///
/// Each reading first deserializes the bytes into its type directly. Only when that fails does
/// it take the slow way of earlier versions (the body as a JSON value, then the value read as
/// the type, or leniently): so the answer is the same, the errors are the same, and the common
/// case builds no intermediate [`Value`].
pub(super) struct Answer {
    pub(super) path: &'static str,
    pub(super) body: Bytes,
}

impl Answer {
    /// The body as JSON: `null` when empty.
    pub(super) fn value(&self) -> Result<Value> {
        parse_body(self.path, &self.body)
    }

    /// The body as a `T`.
    pub(super) fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        match turnwise_core::protocol::json::from_slice(&self.body) {
            Ok(v) => Ok(v),
            Err(_) => decode(self.path, self.value()?),
        }
    }

    /// The body as a turn, or leniently as a stand-in turn (see [`lenient_turn`]).
    pub(super) fn turn(&self, lease: &Lease, status: TurnStatus) -> Result<WorkflowTurn> {
        match turnwise_core::protocol::json::from_slice(&self.body) {
            Ok(turn) => Ok(turn),
            Err(_) => Ok(lenient_turn(self.value()?, lease, status)),
        }
    }

    /// The body as a claim answer (see [`parse_claim`]).
    pub(super) fn claim(&self) -> Result<ClaimResponse> {
        match turnwise_core::protocol::json::from_slice(&self.body) {
            Ok(claimed) => Ok(claimed),
            Err(_) => parse_claim(self.value()?),
        }
    }
}

/// A success body as JSON: `null` when empty.
fn parse_body(path: &str, body: &[u8]) -> Result<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    turnwise_core::protocol::json::from_slice(body).map_err(|e| {
        Error::transport_caused(format_args!("{path} answered a body that is not JSON"), e)
    })
}

fn decode<T: DeserializeOwned>(path: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| {
        Error::transport_caused(
            format_args!("{path} answered a body that cannot be read"),
            e,
        )
    })
}

/// The answer of a worker route whose body the protocol does not promise (operation,
/// progress, checkpoint, wait-signal, complete, fail, heartbeat): the turn when the server
/// sent one, as a turnwise server does; otherwise what can be read of it (`status`, `steps`,
/// `operation`) on a stand-in turn built from the lease, with `status` as the call implies.
fn lenient_turn(value: Value, lease: &Lease, status: TurnStatus) -> WorkflowTurn {
    if let Ok(turn) = serde_json::from_value::<WorkflowTurn>(value.clone()) {
        return turn;
    }
    let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
    let steps: Vec<StepCheckpoint> = serde_json::from_value(field("steps")).unwrap_or_default();
    let status = serde_json::from_value(field("status")).unwrap_or(status);
    let operation = match field("operation") {
        Value::Object(op) => serde_json::from_value(Value::Object(op.clone()))
            .ok()
            .or_else(|| {
                Some(TurnOperation {
                    key: op.get("key").and_then(Value::as_str).unwrap_or("").into(),
                    kind: OperationKind::Step,
                    attempt: 0,
                    started_at_ms: 0,
                    timeout_ms: 0,
                    deadline_ms: 0,
                    last_heartbeat_ms: 0,
                    sequence: 0,
                    details: op.get("details").cloned().unwrap_or(Value::Null),
                    checkpoint: op.get("checkpoint").cloned().unwrap_or(Value::Null),
                    heartbeat_timeout_ms: None,
                })
            }),
        _ => None,
    };
    WorkflowTurn {
        workflow_id: lease.workflow_id.clone(),
        number: lease.turn,
        message_id: String::new(),
        message: Value::Null,
        version: String::new(),
        status,
        attempt: 0,
        sequence: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
        ready_at_ms: 0,
        steps,
        result: Value::Null,
        state_after: Value::Null,
        continued_to: None,
        deadline_ms: None,
        error: None,
        finished_at_ms: None,
        operation,
        origin: None,
        progress: None,
        run: None,
        signals: None,
        wait: None,
        worker: None,
        traceparent: None,
        mismatch: None,
    }
}

/// A claim answer, read as leniently as the wire allows: a body that is not an object, or a
/// `task` that is not an object, means nothing was claimed.
fn parse_claim(value: Value) -> Result<ClaimResponse> {
    let task = match value {
        Value::Object(mut body) => body.remove("task").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    if !task.is_object() {
        return Ok(ClaimResponse { task: None });
    }
    // A task that cannot be read is an error, never a silent drop: the worker backs off and
    // the server gets the turn back when its lease expires.
    let task = serde_json::from_value(task).map_err(|e| {
        Error::transport(format!(
            "the claim answered a task that cannot be read: {e}"
        ))
    })?;
    Ok(ClaimResponse { task: Some(task) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_answers_read_leniently() {
        assert!(parse_claim(Value::Null).unwrap().task.is_none());
        assert!(parse_claim(serde_json::json!([1])).unwrap().task.is_none());
        assert!(parse_claim(serde_json::json!({"task": "x"}))
            .unwrap()
            .task
            .is_none());
        assert!(parse_claim(serde_json::json!({"task": {"token": 1}})).is_err());
    }
}
