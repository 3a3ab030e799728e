//! A counter workflow driven through the raw message-workflow protocol, on the embedded engine
//! over a SQLite file: what a worker does under the hood, one call at a time.
//!
//! Run with: `cargo run -p example-protocol-demo` (optionally with a database path argument).
//! Each run adds three messages to the same instance, so the count keeps growing across runs:
//! the state is durable.

use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::{Backend, Engine};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "turnwise-demo.db".into());
    let engine = Engine::open(&path).await?;
    println!("embedded engine over {path}");

    engine
        .create_instance(CreateInstanceRequest {
            id: "counter-1".into(),
            workflow_type: "counter".into(),
            version: "v1".into(),
            state: json!({"count": 0}),
            lease_ms: None,
            max_attempts: None,
            on_exhausted: None,
        })
        .await?;

    // Admit three messages. Ids make admission idempotent, so they embed this run's start.
    let run = engine.get_instance("counter-1").await?.completed_turns;
    for add in 1..=3u64 {
        let id = format!("request-{}", run + add);
        let turn = engine
            .send_message(MessageRequest {
                workflow_id: "counter-1".into(),
                id: id.clone(),
                message: json!({ "add": add }),
                origin: Some(MessageOrigin::new("app")),
            })
            .await?;
        println!("admitted {id} as turn {}", turn.number);
    }

    // Be the worker: claim each turn, save one step, sleep-free, and complete it.
    let workflows = vec![WorkflowRef::new("counter", "v1")];
    loop {
        let claim = ClaimRequest {
            worker: "demo-worker".into(),
            workflows: workflows.clone(),
            wait_ms: 0,
            include_execution_credential: None,
        };
        let Some(task) = engine.claim(claim).await?.task else {
            break;
        };
        let turn = &task.turn;
        let lease = Lease {
            workflow_id: turn.workflow_id.clone(),
            turn: turn.number,
            token: task.token.clone(),
        };
        let add = turn.message["add"].as_u64().unwrap_or(0);

        // A step: announce it, do the work, checkpoint its output.
        let op = OperationRequest {
            lease: lease.clone(),
            position: 0,
            key: "add".into(),
            kind: OperationKind::Step,
            timeout_ms: 300_000,
            heartbeat_timeout_ms: None,
        };
        engine.operation(op).await?;
        let checkpoint = CheckpointRequest {
            lease: lease.clone(),
            position: 0,
            key: "add".into(),
            kind: CheckpointKind::Step,
            output: json!(add),
            delay_ms: None,
        };
        engine.checkpoint(checkpoint).await?;

        let count = task.state["count"].as_u64().unwrap_or(0) + add;
        let done = CompleteRequest {
            lease,
            state: json!({ "count": count }),
            result: json!(count),
            continuation: None,
            usage: None,
            results: None,
        };
        engine.complete(done).await?;
        println!(
            "turn {} ({}): step `add` -> {add}, effect id {}/add, count is now {count}",
            turn.number, turn.message_id, task.effect_prefix
        );
    }

    let inst = engine.get_instance("counter-1").await?;
    let history = engine
        .history(HistoryQuery {
            id: "counter-1".into(),
            after: inst.history_through.checked_sub(3),
            limit: None,
        })
        .await?;
    println!(
        "instance counter-1: status {}, state {}, {} completed turns",
        inst.status, inst.state, inst.completed_turns
    );
    for t in history.turns {
        let reply: &Value = &t.result;
        println!(
            "  history turn {}: {} -> reply {reply}",
            t.number, t.message
        );
    }
    Ok(())
}
