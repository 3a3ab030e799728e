//! `turnwise compat --baseline`: the compatibility check for CI. It compares the replay
//! manifests of the current code (`turnwise/manifests/`, written by a test with
//! `turnwise::manifest::files::check`) with a baseline (what is deployed: a directory, or the
//! same directory at a git revision) and exits with the worst class found.
//!
//! `turnwise compat --workflow NAME --to VERSION`: the live check, against the instances of a
//! running server (`--url`): which of them could move to that version now (the client command
//! is `cli::run_compat_live`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use turnwise::manifest::compat::{compare_sets, Report};
use turnwise::manifest::{files, Manifest};

/// The exit codes of `turnwise compat`, as `--help` lists them.
pub const EXIT_CODES: &str = "\
Exit codes of `turnwise compat`:
  0  safe: nothing in flight can break
  1  review: replay still works, but a condition, a step input or a schema the check cannot
     compare changed
  2  needs-patch: some saved prefix is no longer accepted; a patch, a rename or a new version
     fixes it
  3  breaks: saved data cannot be read, or a key is reused with another kind
  4  the check could not run (a manifest that cannot be read, a git revision that does not
     exist)
With --workflow NAME --to VERSION (the live check of a server's instances):
  0  every instance checked can move (upgradable, upgradable-after-turn or resumable)
  2  some are pinned (the table says why)
  other codes as the client commands (3 not found, 5 authentication, 6 unreachable, ...)";

/// `turnwise compat --baseline DIR|REV [--dir DIR] [--json]`, or `turnwise compat [--live]
/// --url URL --workflow NAME --to VERSION [--json]`.
#[derive(clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct CompatArgs {
    /// What is deployed: a directory of manifests, or a git revision (a branch, a tag, a
    /// commit) at which `--dir` is read, e.g. `origin/main`.
    #[arg(
        long,
        value_name = "DIR|REV",
        required_unless_present = "workflow",
        conflicts_with = "workflow"
    )]
    baseline: Option<String>,
    /// The live check of the server's instances (`--url`), as `--workflow` and `--to` ask for
    /// it anyway; say it to be explicit.
    #[arg(long, requires = "workflow", conflicts_with = "baseline")]
    live: bool,
    /// The live check: the workflow type whose instances on the server (`--url`) to check.
    #[arg(long, value_name = "NAME", requires = "to")]
    workflow: Option<String>,
    /// The live check: the version the instances would move to.
    #[arg(long, value_name = "VERSION", requires = "workflow")]
    to: Option<String>,
    /// The current code's manifests.
    #[arg(long, value_name = "DIR", default_value = turnwise::manifest::DIR)]
    dir: PathBuf,
    /// Print the report as JSON, for tools.
    #[arg(long)]
    json: bool,
}

/// Run the check; print the report and answer its class's exit code (4 when it cannot run).
/// With `--workflow` and `--to`, run the live check against the server `client` names.
pub fn run(args: CompatArgs, client: crate::cli::ClientArgs) -> ExitCode {
    if let (Some(workflow), Some(to)) = (args.workflow.clone(), args.to.clone()) {
        let runtime = match crate::async_runtime(tokio::runtime::Builder::new_current_thread()) {
            Ok(rt) => rt,
            Err(code) => return code,
        };
        let live = crate::cli::run_compat_live(client, workflow, to, args.json);
        return runtime.block_on(live);
    }
    match report(&args) {
        Ok(report) => {
            if args.json {
                print!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            ExitCode::from(report.class.exit_code() as u8)
        }
        Err(msg) => {
            eprintln!("turnwise: {msg}");
            ExitCode::from(4)
        }
    }
}

fn report(args: &CompatArgs) -> Result<Report, String> {
    let current = files::read_dir(&args.dir).map_err(|e| e.to_string())?;
    if current.is_empty() {
        return Err(format!(
            "no manifests in {}: write them with a test that calls `turnwise::manifest::files::check` (run it with TURNWISE_MANIFESTS=write), or name the directory with --dir",
            args.dir.display()
        ));
    }
    let rev = args.baseline.as_deref().ok_or(
        "name what is deployed with --baseline DIR|REV (or check a server's instances with \
         --workflow NAME --to VERSION)",
    )?;
    let baseline_dir = Path::new(rev);
    let baseline = if baseline_dir.is_dir() {
        files::read_dir(baseline_dir).map_err(|e| e.to_string())?
    } else {
        at_revision(rev, &args.dir)?
    };
    Ok(compare_sets(&baseline, &current))
}

/// The manifests in `dir` at git revision `rev` (none when the directory did not exist there).
fn at_revision(rev: &str, dir: &Path) -> Result<Vec<Manifest>, String> {
    let listing = git(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{rev}^{{commit}}"),
    ])
    .map_err(|_| format!("--baseline {rev:?} is neither a directory nor a git revision here"))?;
    let commit = listing.trim().to_owned();
    let names = git(&[
        "ls-tree",
        "--name-only",
        &commit,
        "--",
        &format!("{}/", dir.display()),
    ])?;
    let mut out = Vec::new();
    for path in names.lines().filter(|p| p.ends_with(".json")) {
        let text = git(&["show", &format!("{commit}:./{path}")])?;
        let manifest = Manifest::from_json(&text).map_err(|e| format!("{path} at {rev}: {e}"))?;
        out.push(manifest);
    }
    Ok(out)
}

/// Run `git args`, answering its standard output.
fn git(args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("git printed non-UTF-8 output: {e}"))
}
