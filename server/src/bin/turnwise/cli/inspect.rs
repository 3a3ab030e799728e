//! The reads: `instances list|get`, `inbox`, `history`, `turn` and `runs` (and the
//! `instances` group's one write, `instances create`, which `control` runs).

use clap::{Args, Subcommand};
use serde_json::json;
use turnwise::protocol::{
    HistoryQuery, InboxQuery, InstanceStatus, ListInstancesQuery, RunsQuery, TurnQuery, TurnStatus,
    WorkflowInstance, WorkflowRun, WorkflowTurn,
};
use turnwise::Backend;

use super::output::{self, compact, fields, opt, time, Table};
use super::{Ctx, Failure, IdArg};

/// `instances list`, `instances get`, `instances create` and `instances upgrade`.
#[derive(Subcommand, Debug)]
pub enum InstancesCommand {
    /// List instances by id, optionally only those of one workflow type or status.
    List(ListArgs),
    /// Read one instance: its state, status and current turn (with the report of a turn
    /// suspended by a replay mismatch), and its events.
    Get(IdArg),
    /// Create an instance of a workflow type and version with an initial state, checked
    /// against its registered state schema first. An identical repeat answers the existing
    /// instance; the same id with another type or version is a conflict (exit 4).
    Create(super::control::CreateArgs),
    /// Run a turn suspended by a replay mismatch again on the instance's version: from its
    /// last accepted step (the saved steps before the divergence are kept) or from scratch.
    /// A turn that is not suspended is refused (exit 4); an exact repeat answers the same.
    Restart(super::suspend::RestartArgs),
    /// Fork an instance whose head turn is suspended into a new instance of the same version,
    /// with its state and its unfinished messages in order (the suspended turn's from
    /// scratch); the original stays suspended. An exact repeat answers the same fork.
    Fork(super::suspend::ForkArgs),
    /// Move an instance to another version of its workflow, or with `--workflow NAME
    /// --all-upgradable` every instance of the type that can move (`turnwise compat --workflow
    /// NAME --to VERSION` tells which). Each is checked again, and moved, in its own commit; a
    /// suspended turn the new version accepts is resumed. Exits 4 when any was refused.
    Upgrade(super::versions::UpgradeArgs),
}

/// `instances list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only instances of this workflow type.
    #[arg(long = "type", value_name = "TYPE")]
    workflow_type: Option<String>,
    /// Only instances with this status.
    #[arg(long, value_name = "STATUS",
          value_parser = clap::builder::PossibleValuesParser::new(InstanceStatus::ALL))]
    status: Option<String>,
    /// At most this many instances.
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
    /// Start after this instance id (the `next_after` of an earlier page).
    #[arg(long, value_name = "ID")]
    after: Option<String>,
}

/// `inbox`.
#[derive(Args, Debug)]
pub struct InboxArgs {
    /// The instance id.
    id: String,
    /// Start after this turn number.
    #[arg(long, value_name = "N")]
    after: Option<u64>,
    /// At most this many turns (1-100).
    #[arg(long, value_name = "N")]
    limit: Option<u32>,
    /// Include each turn's message.
    #[arg(long)]
    payloads: bool,
}

/// `history`.
#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The instance id.
    id: String,
    /// Start after this turn number (the `next_after` of an earlier page).
    #[arg(long, value_name = "N")]
    after: Option<u64>,
    /// At most this many turns (1-50).
    #[arg(long, value_name = "N")]
    limit: Option<u32>,
}

/// `turn`.
#[derive(Args, Debug)]
pub struct TurnArgs {
    /// The instance id.
    id: String,
    /// The turn number.
    number: u64,
}

/// `turns` subcommands.
#[derive(Subcommand, Debug)]
pub enum TurnsCommand {
    /// Write one turn's saved record (the state before it, its message and its saved steps,
    /// with their values) as JSON, to replay against changed code in a test
    /// (`turnwise::replay`, `TestEnv::replay`). It holds payloads: keep it where the data may
    /// go.
    Export(ExportTurnArgs),
}

/// `turns export`.
#[derive(Args, Debug)]
pub struct ExportTurnArgs {
    #[command(flatten)]
    turn: TurnArgs,
    /// Write it to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

/// `turns export`: the saved record of a turn, on stdout or into `--out`.
pub async fn turns(ctx: &Ctx, command: TurnsCommand) -> Result<(), Failure> {
    let TurnsCommand::Export(args) = command;
    let saved = turnwise::replay::export_turn(&ctx.http, &args.turn.id, args.turn.number)
        .await
        .map_err(|e| ctx.fail(e))?;
    let text = serde_json::to_string_pretty(&saved).unwrap_or_default() + "\n";
    match args.out {
        None => print!("{text}"),
        Some(file) => {
            std::fs::write(&file, text).map_err(|e| {
                Failure::new(
                    super::Exit::Other,
                    format!("cannot write {}: {e}", file.display()),
                )
            })?;
            if !ctx.out.json {
                println!(
                    "wrote turn {} of {} ({} saved steps) to {}",
                    args.turn.number,
                    args.turn.id,
                    saved.turn.steps.len(),
                    file.display()
                );
            }
        }
    }
    Ok(())
}

/// Instances are read in pages of this many while filtering.
const PAGE: u32 = 100;

pub async fn instances(ctx: &Ctx, command: InstancesCommand) -> Result<(), Failure> {
    match command {
        InstancesCommand::List(args) => list(ctx, args).await,
        InstancesCommand::Get(IdArg { id }) => {
            let inst = ctx.http.get_instance(&id).await.map_err(|e| ctx.fail(e))?;
            if ctx.out.json {
                ctx.out.print_json(&inst);
            } else {
                print_instance(&inst);
            }
            Ok(())
        }
        InstancesCommand::Create(args) => super::control::create(ctx, args).await,
        InstancesCommand::Restart(args) => super::suspend::restart(ctx, args).await,
        InstancesCommand::Fork(args) => super::suspend::fork(ctx, args).await,
        InstancesCommand::Upgrade(args) => super::versions::upgrade(ctx, args).await,
    }
}

/// Pages through the list route, keeping the instances that pass the filters, until `limit`
/// are kept or the list ends. The answer has the list route's shape; its `next_after` is the
/// id to pass as `--after` for more.
async fn list(ctx: &Ctx, args: ListArgs) -> Result<(), Failure> {
    let filtered = args.workflow_type.is_some() || args.status.is_some();
    let want = args.limit as usize;
    let mut kept: Vec<WorkflowInstance> = Vec::new();
    let mut after = args.after;
    let mut next_after = None;
    'pages: loop {
        let page_size = if filtered {
            PAGE
        } else {
            PAGE.min((want - kept.len()) as u32)
        };
        let page = ctx
            .http
            .list_instances(ListInstancesQuery {
                after: after.take(),
                limit: Some(page_size),
            })
            .await
            .map_err(|e| ctx.fail(e))?;
        let on_page = page.instances.len();
        for (i, inst) in page.instances.into_iter().enumerate() {
            let pass = args
                .workflow_type
                .as_deref()
                .is_none_or(|t| t == inst.workflow_type)
                && args
                    .status
                    .as_deref()
                    .is_none_or(|s| s == inst.status.as_str());
            if !pass {
                continue;
            }
            let id = inst.id.clone();
            kept.push(inst);
            if kept.len() == want {
                // More may follow this one: the cursor resumes after it.
                let more = i + 1 < on_page || page.next_after.is_some();
                next_after = more.then_some(id);
                break 'pages;
            }
        }
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    if ctx.out.json {
        let mut body = json!({ "instances": kept });
        if let Some(next) = next_after {
            body["next_after"] = json!(next);
        }
        ctx.out.print_json(&body);
        return Ok(());
    }
    let mut table = Table::new(&[
        "ID", "TYPE", "VERSION", "STATUS", "PENDING", "DONE", "UPDATED",
    ]);
    for inst in &kept {
        table.row(vec![
            inst.id.clone(),
            inst.workflow_type.clone(),
            inst.version.clone(),
            inst.status.to_string(),
            inst.pending_messages.to_string(),
            inst.completed_turns.to_string(),
            time(inst.updated_at_ms),
        ]);
    }
    if table.is_empty() {
        println!("no instances");
    } else {
        table.print();
    }
    if let Some(next) = next_after {
        println!("more: --after {next}");
    }
    Ok(())
}

fn print_instance(inst: &WorkflowInstance) {
    let mut pairs = vec![
        ("id", inst.id.clone()),
        ("type", format!("{} {}", inst.workflow_type, inst.version)),
        ("status", inst.status.to_string()),
        ("pending", inst.pending_messages.to_string()),
        ("completed turns", inst.completed_turns.to_string()),
        ("history through", inst.history_through.to_string()),
        ("created", time(inst.created_at_ms)),
        ("updated", time(inst.updated_at_ms)),
    ];
    if let Some(turn) = &inst.current_turn {
        pairs.push((
            "current turn",
            format!(
                "{} ({}, attempt {}, message {})",
                turn.number, turn.status, turn.attempt, turn.message_id
            ),
        ));
    }
    if let Some(p) = &inst.progress {
        pairs.push(("progress", output::progress(p)));
    }
    pairs.push(("state", compact(&inst.state, 400)));
    fields(&pairs);
    if let Some(t) = inst.current_turn.as_deref() {
        if let Some(report) = &t.mismatch {
            super::suspend::print_report(&inst.id, t.number, report);
        }
    }
    super::suspend::print_events(&inst.events);
}

pub async fn inbox(ctx: &Ctx, args: InboxArgs) -> Result<(), Failure> {
    let inbox = ctx
        .http
        .instance_inbox(InboxQuery {
            id: args.id,
            after: args.after,
            limit: args.limit,
            payloads: args.payloads,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&inbox);
        return Ok(());
    }
    println!(
        "{} ({} {}): {}, {} pending",
        inbox.workflow_id, inbox.workflow_type, inbox.version, inbox.status, inbox.pending_messages
    );
    let mut header = vec![
        "TURN",
        "MESSAGE ID",
        "STATUS",
        "ATTEMPT",
        "RECEIVED",
        "READY",
        "BYTES",
        "NOTE",
    ];
    if args.payloads {
        header.push("MESSAGE");
    }
    let mut table = Table::new(&header);
    for m in &inbox.messages {
        let note = match (&m.progress, &m.error) {
            (Some(p), _) => output::progress(p),
            (None, Some(e)) => format!("error: {}", one_line(e, 80)),
            (None, None) => String::new(),
        };
        let mut row = vec![
            m.turn.to_string(),
            m.message_id.clone(),
            m.status.to_string(),
            m.attempt.to_string(),
            time(m.received_at_ms),
            time(m.ready_at_ms),
            m.message_bytes.to_string(),
            note,
        ];
        if args.payloads {
            row.push(
                m.message
                    .as_ref()
                    .map_or_else(String::new, |v| compact(v, 60)),
            );
        }
        table.row(row);
    }
    if !table.is_empty() {
        table.print();
    }
    if let Some(next) = inbox.next_after {
        println!("more: --after {next}");
    }
    Ok(())
}

pub async fn history(ctx: &Ctx, args: HistoryArgs) -> Result<(), Failure> {
    let page = ctx
        .http
        .history(HistoryQuery {
            id: args.id,
            after: args.after,
            limit: args.limit,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&page);
        return Ok(());
    }
    let mut table = Table::new(&[
        "TURN",
        "MESSAGE ID",
        "STATUS",
        "ATTEMPT",
        "STEPS",
        "FINISHED",
        "RESULT",
    ]);
    for t in &page.turns {
        let result = match (&t.error, t.status) {
            (Some(e), TurnStatus::Failed) => format!("error: {}", one_line(e, 60)),
            _ => compact(&t.result, 60),
        };
        table.row(vec![
            t.number.to_string(),
            t.message_id.clone(),
            t.status.to_string(),
            t.attempt.to_string(),
            t.steps.len().to_string(),
            opt(t.finished_at_ms.map(time)),
            result,
        ]);
    }
    if table.is_empty() {
        println!("no finished turns");
    } else {
        table.print();
    }
    if let Some(next) = page.next_after {
        println!("more: --after {next}");
    }
    Ok(())
}

pub async fn turn(ctx: &Ctx, args: TurnArgs) -> Result<(), Failure> {
    let turn = ctx
        .http
        .turn(TurnQuery {
            id: args.id,
            turn: args.number,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&turn);
    } else {
        print_turn(&turn);
    }
    Ok(())
}

fn print_turn(t: &WorkflowTurn) {
    let mut pairs = vec![
        ("turn", format!("{} of {}", t.number, t.workflow_id)),
        ("message id", t.message_id.clone()),
        ("status", t.status.to_string()),
        ("attempt", t.attempt.to_string()),
        ("version", t.version.clone()),
        ("created", time(t.created_at_ms)),
        ("updated", time(t.updated_at_ms)),
        ("ready at", time(t.ready_at_ms)),
    ];
    if let Some(f) = t.finished_at_ms {
        pairs.push(("finished", time(f)));
    }
    if let Some(w) = &t.worker {
        pairs.push(("worker", w.clone()));
    }
    if let Some(op) = &t.operation {
        pairs.push((
            "running step",
            format!(
                "{} ({}, attempt {}, deadline {})",
                op.key,
                op.kind,
                op.attempt,
                time(op.deadline_ms)
            ),
        ));
    }
    if let Some(p) = &t.progress {
        pairs.push(("progress", output::progress(p)));
    }
    if let Some(e) = &t.error {
        pairs.push(("error", one_line(e, 200)));
    }
    if let Some(n) = t.continued_to {
        pairs.push(("continued to", n.to_string()));
    }
    pairs.push(("message", compact(&t.message, 400)));
    if t.status.is_outcome() {
        pairs.push(("result", compact(&t.result, 400)));
        pairs.push(("state after", compact(&t.state_after, 400)));
    }
    fields(&pairs);
    if let Some(report) = &t.mismatch {
        super::suspend::print_report(&t.workflow_id, t.number, report);
    }
    if !t.steps.is_empty() {
        println!();
        let mut table = Table::new(&["#", "STEP", "KIND", "AT", "OUTPUT"]);
        for (i, s) in t.steps.iter().enumerate() {
            table.row(vec![
                i.to_string(),
                s.key.clone(),
                s.kind.to_string(),
                time(s.at_ms),
                compact(&s.output, 60),
            ]);
        }
        table.print();
    }
    if let Some(signals) = t.signals.as_ref().filter(|s| !s.is_empty()) {
        println!();
        let mut table = Table::new(&["SIGNAL ID", "NAME", "AT", "CONSUMED BY", "VALUE"]);
        for s in signals {
            table.row(vec![
                s.id.clone(),
                s.name.clone(),
                time(s.at_ms),
                opt(s.consumed_by.as_ref()),
                compact(&s.value, 60),
            ]);
        }
        table.print();
    }
}

/// The runs of an instance, newest first: every page of the runs route.
pub async fn runs(ctx: &Ctx, IdArg { id }: IdArg) -> Result<(), Failure> {
    let mut runs: Vec<WorkflowRun> = Vec::new();
    let mut cursor = None;
    loop {
        let page = ctx
            .http
            .runs(RunsQuery {
                id: Some(id.clone()),
                cursor,
                limit: Some(100),
            })
            .await
            .map_err(|e| ctx.fail(e))?;
        runs.extend(page.runs);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    if ctx.out.json {
        ctx.out
            .print_json(&json!({ "workflow_id": id, "runs": runs }));
        return Ok(());
    }
    let mut table = Table::new(&[
        "RUN", "TURN", "ATTEMPT", "OUTCOME", "STARTED", "TOOK", "QUEUE", "USAGE",
    ]);
    for run in &runs {
        let usage = run.usage.as_ref().map_or_else(String::new, |u| {
            let mut parts = Vec::new();
            if let Some(c) = u.calls {
                parts.push(format!("{c} calls"));
            }
            if let (Some(i), Some(o)) = (u.tokens_in, u.tokens_out) {
                parts.push(format!("{i}/{o} tokens"));
            }
            if let Some(c) = u.cost_micro_usd {
                parts.push(format!("${:.6}", c as f64 / 1e6));
            }
            parts.join(", ")
        });
        table.row(vec![
            run.id.clone(),
            run.turn.to_string(),
            run.attempt.to_string(),
            run.outcome.to_string(),
            time(run.started_at_ms),
            output::duration(run.ended_at_ms - run.started_at_ms),
            format!("{} -> {}", run.queue_before, run.queue_after),
            usage,
        ]);
    }
    if table.is_empty() {
        println!("no runs");
    } else {
        table.print();
    }
    Ok(())
}

/// The first line of `text`, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max && !text.contains('\n') {
        line.to_owned()
    } else {
        let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}
