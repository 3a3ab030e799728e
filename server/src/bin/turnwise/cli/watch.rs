//! `watch`: follow one turn until it ends, redrawing its status and the running step's
//! progress (the progress convention's `{phase, done, total, unit}`, as the server's `progress`
//! view of the turn shows it).
//!
//! The turn is read with the turn route's `wait_ms` extension ([`Backend::await_turn`]) in
//! slices of a second: the read returns at once when the turn ends, and at least every second
//! otherwise, so progress is redrawn about once a second without polling faster.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use turnwise::protocol::{TurnQuery, TurnStatus, WorkflowTurn};
use turnwise::Backend;

use super::output::{self, compact, duration};
use super::{Ctx, Exit, Failure};

/// How long one read may wait for the turn to end before the view is redrawn.
const SLICE: Duration = Duration::from_secs(1);

/// `watch`.
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The instance id.
    id: String,
    /// The turn to follow; the instance's current turn (its inbox head) when absent.
    #[arg(long, value_name = "N")]
    turn: Option<u64>,
    /// Give up after this many seconds (exit code 7).
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    timeout: u64,
}

pub async fn watch(ctx: &Ctx, args: WatchArgs) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let number = match args.turn {
        Some(n) => n,
        None => {
            let inst = ctx
                .http
                .get_instance(&args.id)
                .await
                .map_err(|e| ctx.fail(e))?;
            match inst.current_turn {
                Some(turn) => turn.number,
                None => {
                    if ctx.out.json {
                        ctx.out
                            .print_json_line(&json!({"workflow_id": inst.id, "turn": null,
                                                     "status": inst.status}));
                    } else {
                        println!(
                            "{} is {}: no unfinished turn to watch",
                            inst.id, inst.status
                        );
                    }
                    return Ok(());
                }
            }
        }
    };
    let tty = !ctx.out.json && std::io::stdout().is_terminal();
    let mut shown = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let turn = ctx
            .http
            .await_turn(
                TurnQuery {
                    id: args.id.clone(),
                    turn: number,
                },
                left.min(SLICE),
            )
            .await
            .map_err(|e| ctx.fail(e))?;
        let line = if ctx.out.json {
            serde_json::to_string(&turn).unwrap_or_default()
        } else {
            describe(&turn)
        };
        if line != shown {
            draw(ctx, tty, &turn, &line);
            shown = line;
        }
        if turn.status.is_settled() {
            if tty {
                println!();
            }
            if !ctx.out.json {
                print_outcome(&turn);
            }
            return match turn.status {
                TurnStatus::Completed => Ok(()),
                other => Err(Failure::new(
                    Exit::Other,
                    format!(
                        "turn {number} of {} {other}{}",
                        args.id,
                        turn.error
                            .as_deref()
                            .map(|e| format!(": {e}"))
                            .unwrap_or_default()
                    ),
                )),
            };
        }
        if Instant::now() >= deadline {
            if tty {
                println!();
            }
            return Err(Failure::new(
                Exit::TimedOut,
                format!(
                    "turn {number} of {} did not end within {} s (--timeout): it is {}",
                    args.id, args.timeout, turn.status
                ),
            ));
        }
    }
}

/// A new state of the turn: a JSON line, a line of text, or on a terminal the status line
/// redrawn in place.
fn draw(ctx: &Ctx, tty: bool, turn: &WorkflowTurn, line: &str) {
    if ctx.out.json {
        ctx.out.print_json_line(turn);
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if tty {
        // Back to the start of the line and clear it.
        let _ = write!(stdout, "\r\x1b[2K{line}");
    } else {
        let _ = writeln!(stdout, "{line}");
    }
    let _ = stdout.flush();
}

/// One line: the turn's status, its running step and progress.
fn describe(turn: &WorkflowTurn) -> String {
    let mut line = format!(
        "turn {} of {}: {}",
        turn.number, turn.workflow_id, turn.status
    );
    if turn.attempt > 0 {
        line.push_str(&format!(" (attempt {})", turn.attempt));
    }
    if turn.status == TurnStatus::Running || turn.status == TurnStatus::Waiting {
        if let Some(op) = &turn.operation {
            line.push_str(&format!("  step {}", op.key));
        }
        if let Some(p) = &turn.progress {
            line.push_str(&format!("  {}", output::progress(p)));
        }
        if let Some(w) = &turn.wait {
            line.push_str(&format!("  waiting until {}", output::time(w.until_ms)));
        }
    }
    line
}

fn print_outcome(turn: &WorkflowTurn) {
    let took = turn
        .finished_at_ms
        .map(|f| format!(" in {}", duration(f - turn.created_at_ms)))
        .unwrap_or_default();
    match turn.status {
        TurnStatus::Completed => println!("completed{took}: result {}", compact(&turn.result, 200)),
        other => println!(
            "{other}{took}{}",
            turn.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ),
    }
}
