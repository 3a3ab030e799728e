//! `schedules list|get|pause|resume|delete`: the schedules kept on instances (delayed messages
//! and recurring firings; a turnwise extension).

use clap::{Args, Subcommand};
use serde_json::json;
use turnwise::protocol::{
    ListSchedulesQuery, ScheduleAction, ScheduleControlRequest, ScheduleSpec, WorkflowSchedule,
};
use turnwise::Backend;

use super::output::{compact, duration, fields, opt, time, Table};
use super::{Ctx, Failure};

/// `schedules` subcommands.
#[derive(Subcommand, Debug)]
pub enum SchedulesCommand {
    /// List schedules: one instance's with --id, otherwise a page of instances' at a time.
    List(ListArgs),
    /// One schedule: its spec, message, next fire time and counts.
    Get(NameArgs),
    /// Stop a schedule admitting firings.
    Pause(NameArgs),
    /// Let a paused schedule admit firings again (missed ones by its catch-up policy).
    Resume(NameArgs),
    /// Delete a schedule, or cancel a delayed message not yet admitted.
    Delete(NameArgs),
}

/// `schedules list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only this instance's schedules.
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// Start after this instance id (a previous page's `next`).
    #[arg(long, value_name = "ID")]
    after: Option<String>,
    /// How many instances to look at (1-500, default 50).
    #[arg(long, value_name = "N")]
    limit: Option<u32>,
}

/// An instance id and a schedule name.
#[derive(Args, Debug)]
pub struct NameArgs {
    /// The instance id.
    id: String,
    /// The schedule's name (a delayed message's is its message id).
    name: String,
}

pub async fn run(ctx: &Ctx, command: SchedulesCommand) -> Result<(), Failure> {
    match command {
        SchedulesCommand::List(args) => list(ctx, args).await,
        SchedulesCommand::Get(args) => {
            let s = ctx
                .http
                .get_schedule(&args.id, &args.name)
                .await
                .map_err(|e| ctx.fail(e))?;
            show(ctx, &s);
            Ok(())
        }
        SchedulesCommand::Pause(args) => control(ctx, args, ScheduleAction::Pause).await,
        SchedulesCommand::Resume(args) => control(ctx, args, ScheduleAction::Resume).await,
        SchedulesCommand::Delete(args) => control(ctx, args, ScheduleAction::Delete).await,
    }
}

/// How a spec reads in a table: `every 60s`, `cron 0 3 * * *`, `once`.
fn spec(s: &ScheduleSpec) -> String {
    match s {
        ScheduleSpec::Every { every_ms, .. } => format!(
            "every {}",
            duration(i64::try_from(*every_ms).unwrap_or(i64::MAX))
        ),
        ScheduleSpec::Cron { expr } => format!("cron {expr}"),
        _ => "once".into(),
    }
}

fn catch_up(s: &WorkflowSchedule) -> String {
    serde_json::to_value(s.catch_up)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn list(ctx: &Ctx, args: ListArgs) -> Result<(), Failure> {
    let page = ctx
        .http
        .list_schedules(ListSchedulesQuery {
            workflow_id: args.id,
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
        "INSTANCE", "NAME", "SPEC", "CATCH-UP", "STATE", "NEXT", "FIRED", "SKIPPED",
    ]);
    for s in &page.schedules {
        table.row(vec![
            s.workflow_id.clone(),
            s.name.clone(),
            spec(&s.spec),
            catch_up(s),
            if s.paused { "paused" } else { "active" }.into(),
            s.next_fire_ms.map_or("-".into(), time),
            s.fired.to_string(),
            s.skipped.to_string(),
        ]);
    }
    if table.is_empty() {
        println!("no schedules");
    } else {
        table.print();
    }
    if let Some(next) = &page.next_after {
        println!("next page: --after {next}");
    }
    Ok(())
}

fn show(ctx: &Ctx, s: &WorkflowSchedule) {
    if ctx.out.json {
        ctx.out.print_json(s);
        return;
    }
    fields(&[
        ("instance", s.workflow_id.clone()),
        ("name", s.name.clone()),
        ("spec", spec(&s.spec)),
        ("catch-up", catch_up(s)),
        ("state", if s.paused { "paused" } else { "active" }.into()),
        ("next", s.next_fire_ms.map_or("-".into(), time)),
        ("last", opt(s.last_fire_ms.map(time))),
        ("fired", s.fired.to_string()),
        ("skipped", s.skipped.to_string()),
        ("message", compact(&s.message, 200)),
    ]);
}

async fn control(ctx: &Ctx, args: NameArgs, action: ScheduleAction) -> Result<(), Failure> {
    let answer = ctx
        .http
        .control_schedule(ScheduleControlRequest {
            workflow_id: args.id.clone(),
            name: args.name.clone(),
            action,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    match answer.schedule {
        Some(s) => show(ctx, &s),
        None if ctx.out.json => ctx.out.print_json(&json!({ "deleted": answer.deleted })),
        None if answer.deleted => println!("deleted schedule {} of {}", args.name, args.id),
        None => println!("no schedule {} on {} (nothing deleted)", args.name, args.id),
    }
    Ok(())
}
