//! Turns suspended by a replay mismatch: `instances restart` and `instances fork` (the ways out
//! besides `cancel`), and the report `instances get` and `turn` print for a suspended turn.

use clap::{Args, ValueEnum};
use turnwise::protocol::{
    ForkInstanceRequest, InstanceEvent, MismatchReport, RestartFrom, RestartTurnRequest,
};
use turnwise::Backend;

use super::output::{fields, time, Table};
use super::{Ctx, Failure};

/// Where `instances restart` starts the turn again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Start {
    /// Keep the saved steps before the divergence and run on from there.
    LastAccepted,
    /// Drop every saved step and run the turn from the top.
    Scratch,
}

impl Start {
    fn wire(self) -> RestartFrom {
        match self {
            Start::LastAccepted => RestartFrom::LastAccepted,
            Start::Scratch => RestartFrom::Scratch,
        }
    }
}

/// Who asks, recorded on the instance's events.
#[derive(Args, Debug)]
pub struct ByArg {
    /// Who asks, recorded on the instance's events (default: $TURNWISE_BY, else $USER, else
    /// `cli`).
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
}

impl ByArg {
    /// The name given, else the environment's.
    pub fn name(self) -> String {
        self.by.unwrap_or_else(by_default)
    }
}

/// Who asks when no `--by` is given: `$TURNWISE_BY`, else `$USER`, else `cli`.
pub fn by_default() -> String {
    ["TURNWISE_BY", "USER"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "cli".to_owned())
}

/// `instances restart`.
#[derive(Args, Debug)]
pub struct RestartArgs {
    /// The instance id.
    id: String,
    /// The suspended turn's number.
    turn: u64,
    /// Where the turn starts again.
    #[arg(long, value_enum, value_name = "WHERE")]
    from: Start,
    #[command(flatten)]
    by: ByArg,
}

/// `instances fork`.
#[derive(Args, Debug)]
pub struct ForkArgs {
    /// The instance whose head turn is suspended.
    id: String,
    /// The new instance's id.
    new_id: String,
    #[command(flatten)]
    by: ByArg,
}

pub async fn restart(ctx: &Ctx, args: RestartArgs) -> Result<(), Failure> {
    let answer = ctx
        .http
        .restart_turn(RestartTurnRequest {
            workflow_id: args.id,
            turn: args.turn,
            from: args.from.wire(),
            by: Some(args.by.name()),
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&answer);
    } else {
        println!(
            "done: restart turn {} of {} from {}",
            answer.turn, answer.workflow_id, answer.from
        );
        print_event(&answer.event);
    }
    Ok(())
}

pub async fn fork(ctx: &Ctx, args: ForkArgs) -> Result<(), Failure> {
    let answer = ctx
        .http
        .fork_instance(ForkInstanceRequest {
            workflow_id: args.id,
            new_id: args.new_id,
            by: Some(args.by.name()),
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&answer);
    } else {
        println!(
            "done: fork {} (turn {}) to {}",
            answer.forked_from, answer.turn, answer.workflow_id
        );
        print_event(&answer.event);
    }
    Ok(())
}

fn print_event(e: &InstanceEvent) {
    let mut pairs = vec![("event", e.action.clone()), ("at", time(e.at_ms))];
    if let Some(by) = &e.by {
        pairs.push(("by", by.clone()));
    }
    if let Some(d) = &e.detail {
        pairs.push(("detail", d.clone()));
    }
    fields(&pairs);
}

/// A suspended turn's report: the version, the saved steps (those before the divergence
/// replayed), what the code called instead and where, and the ways out.
pub fn print_report(id: &str, turn: u64, r: &MismatchReport) {
    println!();
    println!("turn {turn} is suspended by a replay mismatch");
    let found = r.found.as_ref().map_or_else(
        || "nothing: the handler returned".to_owned(),
        |f| f.describe(),
    );
    fields(&[
        ("version", r.version.clone()),
        ("diverged at", format!("position {}", r.position)),
        ("code called", found),
        (
            "at",
            r.at.clone()
                .unwrap_or_else(|| "not known (the version has no manifest)".to_owned()),
        ),
        ("why", r.message.clone()),
    ]);
    let mut table = Table::new(&["#", "SAVED", ""]);
    for (i, entry) in r.saved.iter().enumerate() {
        let note = match i.cmp(&(r.position as usize)) {
            std::cmp::Ordering::Less => "replayed",
            std::cmp::Ordering::Equal => "diverged here",
            std::cmp::Ordering::Greater => "",
        };
        table.row(vec![i.to_string(), entry.describe(), note.to_owned()]);
    }
    if !table.is_empty() {
        println!();
        table.print();
    }
    println!();
    println!(
        "ways out: turnwise instances restart {id} {turn} --from last-accepted|scratch; \
         turnwise instances fork {id} NEW_ID; turnwise cancel {id} --turn {turn}"
    );
}

/// The instance's events, oldest first, for `instances get`.
pub fn print_events(events: &[InstanceEvent]) {
    if events.is_empty() {
        return;
    }
    println!();
    let mut table = Table::new(&["WHEN", "EVENT", "TURN", "BY", "DETAIL"]);
    for e in events {
        table.row(vec![
            time(e.at_ms),
            e.action.clone(),
            e.turn.map(|n| n.to_string()).unwrap_or_default(),
            e.by.clone().unwrap_or_default(),
            e.detail.clone().unwrap_or_default(),
        ]);
    }
    table.print();
}
