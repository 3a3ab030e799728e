//! Moving instances between versions of their workflow: `turnwise compat --workflow NAME --to
//! VERSION` (the live check, one call of `Backend::compat_live`) and `turnwise instances
//! upgrade` (one call of `Backend::upgrade_instances`).

use clap::Args;
use turnwise::protocol::{LiveCompat, LiveCompatQuery, UpgradeRequest, UpgradeResponse, Verdict};
use turnwise::Backend;

use super::output::{opt, Table};
use super::{Ctx, Exit, Failure};

/// `instances upgrade`.
#[derive(Args, Debug)]
pub struct UpgradeArgs {
    /// The instance to move (or every movable instance of `--workflow` with
    /// `--all-upgradable`).
    #[arg(required_unless_present = "workflow", conflicts_with = "workflow")]
    id: Option<String>,
    /// The version to move to.
    #[arg(long, value_name = "VERSION")]
    to: String,
    /// The workflow type whose instances to move, with `--all-upgradable`.
    #[arg(long, value_name = "NAME", requires = "all_upgradable")]
    workflow: Option<String>,
    /// Move every instance of `--workflow` that can move; the others are listed as refused.
    #[arg(long, requires = "workflow")]
    all_upgradable: bool,
    /// Who asks, recorded on each moved instance's event.
    #[arg(long, value_name = "WHO")]
    by: Option<String>,
}

/// The live check of `workflow`'s instances against version `to`: the table, or the API's
/// JSON. Answers whether every instance checked can move.
pub async fn compat_live(ctx: &Ctx, workflow: String, to: String) -> Result<bool, Failure> {
    let query = LiveCompatQuery {
        workflow_type: workflow,
        to_version: to,
    };
    let check = ctx.http.compat_live(query).await.map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&check);
    } else {
        print_check(&check);
    }
    Ok(check.all_movable())
}

/// The counts, one row per instance, then why each pinned one is pinned.
fn print_check(check: &LiveCompat) {
    println!(
        "{} → {}: {} instances checked, {} already on {}",
        check.workflow_type, check.to_version, check.checked, check.on_target, check.to_version
    );
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .map(|v| format!("{v} {}", check.counts.of(*v)))
        .collect();
    println!("{}", counts.join(", "));
    if check.instances.is_empty() {
        return;
    }
    println!();
    let mut table = Table::new(&["INSTANCE", "VERSION", "STATUS", "VERDICT", "TURN"]);
    for i in &check.instances {
        table.row(vec![
            i.workflow_id.clone(),
            i.version.clone(),
            i.status.to_string(),
            i.verdict.to_string(),
            opt(i.turn),
        ]);
    }
    table.print();
    let why: Vec<String> = check
        .instances
        .iter()
        .filter_map(|i| {
            let text = i
                .reason
                .as_ref()
                .map(|r| format!("{} ({})", r.message, r.code))
                .or_else(|| i.note.clone())?;
            Some(format!("  {}: {text}", i.workflow_id))
        })
        .collect();
    if !why.is_empty() {
        println!();
        println!("Why:");
        for line in why {
            println!("{line}");
        }
    }
}

/// `instances upgrade`: the answer as a table, or the API's JSON; exit 4 when any instance
/// was refused.
pub async fn upgrade(ctx: &Ctx, args: UpgradeArgs) -> Result<(), Failure> {
    let req = UpgradeRequest {
        workflow_id: args.id,
        workflow_type: args.workflow,
        to_version: args.to,
        all_upgradable: args.all_upgradable,
        by: args.by,
    };
    let answer = ctx
        .http
        .upgrade_instances(req)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.out.json {
        ctx.out.print_json(&answer);
    } else {
        print_upgrade(&answer);
    }
    match answer.refused.len() {
        0 => Ok(()),
        n => {
            let retry = if answer.refused.iter().all(|r| r.retryable) {
                "; retry once the attempts in flight end"
            } else {
                ""
            };
            Err(Failure::new(
                Exit::Conflict,
                format!(
                    "{n} instance{} stayed where {} (see why above){retry}",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "it was" } else { "they were" }
                ),
            ))
        }
    }
}

/// One row per instance named or moved: upgraded, unchanged or refused, with why.
fn print_upgrade(answer: &UpgradeResponse) {
    let mut table = Table::new(&["RESULT", "INSTANCE", "FROM", "TO", "DETAIL"]);
    for u in &answer.upgraded {
        let by =
            u.by.as_deref()
                .map(|b| format!(" by {b}"))
                .unwrap_or_default();
        table.row(vec![
            "upgraded".into(),
            u.workflow_id.clone(),
            u.from_version.clone(),
            u.to_version.clone(),
            format!("{} ({}){by}", u.action, u.verdict),
        ]);
    }
    for id in &answer.unchanged {
        table.row(vec![
            "unchanged".into(),
            id.clone(),
            answer.to_version.clone(),
            answer.to_version.clone(),
            "already on it".into(),
        ]);
    }
    for r in &answer.refused {
        table.row(vec![
            "refused".into(),
            r.workflow_id.clone(),
            r.version.clone(),
            "-".into(),
            format!("{}: {}", r.reason.code, r.reason.message),
        ]);
    }
    if table.is_empty() {
        println!("nothing to move to {}", answer.to_version);
    } else {
        table.print();
    }
}
