//! The writes: `instances create`, `send`, `signal`, the operator actions and `delete`.
//!
//! A message or signal is checked against the schema the server has registered for the
//! instance's workflow type and version before it is sent, and so is the initial state of an
//! instance to create, with the validator the server uses
//! ([`turnwise::protocol::schema_check`]): a value that does not match is refused here, naming
//! its JSON path, and nothing reaches the server.

use std::path::PathBuf;

use clap::Args;
use serde_json::Value;
use turnwise::protocol::schema_check::{violations, SchemaPart};
use turnwise::protocol::{
    ControlAction, ControlRequest, CreateInstanceRequest, DeleteRequest, MessageOrigin,
    MessageRequest, OnExhausted, SignalRequest, WorkflowTurn,
};
use turnwise::{Backend, Error};

use super::output::{compact, fields, time};
use super::{Ctx, Exit, Failure};

/// `send`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("body").required(true).args(["message", "message_file"])))]
pub struct SendArgs {
    /// The instance id.
    id: String,
    /// The message id: the idempotency key (sending the same id and message again answers the
    /// same turn).
    #[arg(long = "id", value_name = "MSG_ID")]
    message_id: String,
    /// The message, as JSON.
    #[arg(long, value_name = "JSON")]
    message: Option<String>,
    /// A file holding the message as JSON (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    message_file: Option<PathBuf>,
}

/// `instances create`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("initial").args(["state", "state_file"])))]
pub struct CreateArgs {
    /// The instance id.
    id: String,
    /// The workflow type.
    #[arg(long = "type", value_name = "TYPE")]
    workflow_type: String,
    /// The workflow version, pinned for this instance.
    #[arg(long, value_name = "VERSION")]
    version: String,
    /// The initial state, as JSON (`null` when neither this nor --state-file is given).
    #[arg(long, value_name = "JSON")]
    state: Option<String>,
    /// A file holding the initial state as JSON (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    state_file: Option<PathBuf>,
    /// The lease of a claimed turn, in milliseconds (the server's default when absent:
    /// 60000).
    #[arg(long, value_name = "MS")]
    lease_ms: Option<u64>,
    /// Attempts before a turn fails for good (the server's default when absent: 3).
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// What a turn out of attempts does: `block` the inbox until an operator retries or skips
    /// it, or `skip` to history and go on (`block` when absent).
    #[arg(long, value_name = "WHAT", value_parser = on_exhausted_parser())]
    on_exhausted: Option<OnExhausted>,
}

/// `--on-exhausted`: one of the protocol's wire values (listed in `--help`), as the protocol's
/// type.
fn on_exhausted_parser() -> impl clap::builder::TypedValueParser<Value = OnExhausted> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(OnExhausted::ALL)
        .try_map(|wire| serde_json::from_value(Value::from(wire)))
}

/// `signal`.
#[derive(Args, Debug)]
pub struct SignalArgs {
    /// The instance id.
    id: String,
    /// The turn the signal is for.
    #[arg(long, value_name = "N")]
    turn: u64,
    /// The signal name.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The event id: one id is delivered once.
    #[arg(long = "id", value_name = "EVENT_ID")]
    event_id: String,
    /// The value, as JSON.
    #[arg(long, value_name = "JSON")]
    value: String,
}

/// Create an instance, its initial state checked against the registered state schema first.
/// An identical repeat answers the existing instance (the route's idempotency); the same id
/// with another type or version is the server's conflict.
pub async fn create(ctx: &Ctx, args: CreateArgs) -> Result<(), Failure> {
    let state = match (&args.state, &args.state_file) {
        (Some(text), _) => parse_json("--state", text)?,
        (None, Some(path)) => parse_json("--state-file", &read_file("--state-file", path)?)?,
        (None, None) => Value::Null,
    };
    check_against(
        ctx,
        &args.workflow_type,
        &args.version,
        SchemaPart::State,
        &state,
    )
    .await?;
    let inst = ctx
        .http
        .create_instance(CreateInstanceRequest {
            id: args.id,
            workflow_type: args.workflow_type,
            version: args.version,
            state,
            lease_ms: args.lease_ms,
            max_attempts: args.max_attempts,
            on_exhausted: args.on_exhausted,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&inst);
    } else {
        println!(
            "done: create {} ({} {})",
            inst.id, inst.workflow_type, inst.version
        );
        fields(&[
            ("status", inst.status.to_string()),
            ("pending", inst.pending_messages.to_string()),
            ("created", time(inst.created_at_ms)),
            ("state", compact(&inst.state, 400)),
        ]);
    }
    Ok(())
}

pub async fn send(ctx: &Ctx, args: SendArgs) -> Result<(), Failure> {
    let message = match (&args.message, &args.message_file) {
        (Some(text), _) => parse_json("--message", text)?,
        (None, Some(path)) => parse_json("--message-file", &read_file("--message-file", path)?)?,
        // clap's group makes one of them required.
        (None, None) => return Err(Failure::invalid("give --message or --message-file")),
    };
    let id = args.id;
    let sent = match check(ctx, &id, SchemaPart::Message, &message).await {
        Ok(()) => ctx
            .http
            .send_message(MessageRequest {
                workflow_id: id.clone(),
                id: args.message_id,
                message,
                origin: Some(MessageOrigin::new("manual")),
            })
            .await
            .map_err(|e| ctx.fail(e)),
        Err(failure) => Err(failure),
    };
    let turn = sent.map_err(|mut failure| {
        if failure.exit == Exit::NotFound {
            failure.message = format!(
                "{}; create it first: turnwise instances create {id} --type TYPE --version \
                 VERSION --state JSON",
                failure.message
            );
        }
        failure
    })?;
    print_turn_receipt(ctx, &turn, "message");
    Ok(())
}

pub async fn signal(ctx: &Ctx, args: SignalArgs) -> Result<(), Failure> {
    let value = parse_json("--value", &args.value)?;
    check(ctx, &args.id, SchemaPart::Signal(&args.name), &value).await?;
    let turn = ctx
        .http
        .signal(SignalRequest {
            workflow_id: args.id,
            turn: args.turn,
            id: args.event_id,
            name: args.name,
            value,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    print_turn_receipt(ctx, &turn, "signal");
    Ok(())
}

fn print_turn_receipt(ctx: &Ctx, turn: &WorkflowTurn, what: &str) {
    if ctx.out.json {
        ctx.out.print_json(turn);
    } else {
        println!(
            "{what} admitted: turn {} of {} (message {}), {}",
            turn.number, turn.workflow_id, turn.message_id, turn.status
        );
    }
}

pub async fn control(
    ctx: &Ctx,
    id: String,
    action: ControlAction,
    turn: Option<u64>,
) -> Result<(), Failure> {
    let inst = ctx
        .http
        .control(ControlRequest {
            workflow_id: id,
            action,
            turn,
            by: Some(super::suspend::by_default()),
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&inst);
    } else {
        let what = match turn {
            Some(n) => format!("{action} turn {n} of {}", inst.id),
            None => format!("{action} {}", inst.id),
        };
        println!("done: {what}");
        fields(&[
            ("status", inst.status.to_string()),
            ("pending", inst.pending_messages.to_string()),
            ("updated", time(inst.updated_at_ms)),
        ]);
    }
    Ok(())
}

pub async fn delete(ctx: &Ctx, id: String) -> Result<(), Failure> {
    let answer = ctx
        .http
        .delete_instance(DeleteRequest {
            workflow_id: id.clone(),
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&answer);
    } else if answer.deleted {
        println!("deleted {id}");
    } else {
        println!("no instance {id}: nothing to delete");
    }
    Ok(())
}

/// `value` parsed as JSON, or a failure naming `flag`.
fn parse_json(flag: &str, text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| {
        Failure::invalid(format!("{flag} is not JSON: {e}"))
            .with_param(flag.trim_start_matches('-'))
    })
}

/// The text of the file `path` given to `flag` (`-` reads stdin), or a failure naming both.
fn read_file(flag: &str, path: &PathBuf) -> Result<String, Failure> {
    let read = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    };
    read.map_err(|e| {
        Failure::invalid(format!("cannot read {flag} {}: {e}", path.display()))
            .with_param(flag.trim_start_matches('-'))
    })
}

/// Check `value` against the registered schema of the instance's workflow type and version:
/// the message schema, or the schema of the named signal.
async fn check(ctx: &Ctx, id: &str, what: SchemaPart<'_>, value: &Value) -> Result<(), Failure> {
    let inst = ctx.http.get_instance(id).await.map_err(|e| ctx.fail(e))?;
    check_against(ctx, &inst.workflow_type, &inst.version, what, value).await
}

/// Check `value` against the schema registered for `workflow_type` and `version`: the message
/// schema, the schema of the named signal, or the state schema. Nothing registered (or no
/// schema for that signal name) passes, as it does on the server; a signal name the document
/// does not declare is left to the server, which refuses it listing the declared names.
async fn check_against(
    ctx: &Ctx,
    workflow_type: &str,
    version: &str,
    what: SchemaPart<'_>,
    value: &Value,
) -> Result<(), Failure> {
    let doc = match ctx.http.get_schema(workflow_type, version).await {
        Ok(doc) => doc,
        Err(Error::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(ctx.fail(e)),
    };
    let Some(schema) = what.of(&doc) else {
        return Ok(());
    };
    let found = violations(schema, value).map_err(|why| {
        Failure::new(
            Exit::Other,
            format!(
                "the server's {} of {workflow_type} {version} is not a usable JSON Schema: \
                 {why}",
                what.describe()
            ),
        )
    })?;
    let Some(first) = found.first() else {
        return Ok(());
    };
    Err(Failure::invalid(format!(
        "{}; nothing was sent (the value: {})",
        what.mismatch(workflow_type, version, &found),
        compact(value, 200)
    ))
    .with_param(what.failing_param(first)))
}
