//! The operator subcommands of `turnwise`: clients of a running server over the `Http`
//! backend (`turnwise::Http`), printing tables for people and the API's JSON for scripts.
//!
//! Each command is one or a few calls of the [`Backend`](turnwise::Backend) trait (plus the
//! schema reads of [`Http`]); nothing here talks HTTP itself. Failures become a [`Failure`]
//! whose [`Exit`] code tells scripts what kind of failure it was (see [`EXIT_CODES`]).

mod control;
mod inspect;
mod output;
mod schedules;
mod schemas;
mod suspend;
mod versions;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use turnwise::{Error, Http};

use self::output::Out;

/// The exit codes, as `turnwise --help` lists them (and `docs/operations.md`).
pub const EXIT_CODES: &str = "\
Exit codes of the client commands:
  0  done
  1  another failure (a server error, a watched turn that failed, was cancelled or was
     suspended)
  2  usage error or invalid input (a bad flag, JSON or id; a message or signal that does not
     match its schema; the server's 400, 413, 422)
  3  not found (no such instance, turn or schema)
  4  conflict (a reused id with other content, a finished turn, a full inbox, a turn that
     is not suspended)
  5  authentication (no token, or the wrong one: --token / TURNWISE_API_TOKEN)
  6  transport or unavailable (no server at --url, a timeout, 429, 502-504, a store that
     cannot write)
  7  `watch` timed out before the turn ended";

/// How a client command failed, as its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 1: anything the other codes do not name.
    Other = 1,
    /// 2: the command line or a value given on it is invalid.
    Invalid = 2,
    /// 3: the instance, turn or schema does not exist.
    NotFound = 3,
    /// 4: the request conflicts with what is stored.
    Conflict = 4,
    /// 5: the server refused the token.
    Auth = 5,
    /// 6: the server could not be reached, or cannot serve now.
    Unavailable = 6,
    /// 7: `watch` ran out of time.
    TimedOut = 7,
}

impl Exit {
    /// The name printed in `--json` errors.
    fn name(self) -> &'static str {
        match self {
            Exit::Other => "other",
            Exit::Invalid => "invalid",
            Exit::NotFound => "not_found",
            Exit::Conflict => "conflict",
            Exit::Auth => "auth",
            Exit::Unavailable => "unavailable",
            Exit::TimedOut => "timed_out",
        }
    }

    /// The exit code of a protocol error, by its variant (or its HTTP status when the
    /// protocol has no variant for it).
    fn of(e: &Error) -> Exit {
        match e {
            Error::Invalid { .. } | Error::TooLarge { .. } | Error::Reserved { .. } => {
                Exit::Invalid
            }
            Error::NotFound { .. } => Exit::NotFound,
            Error::Conflict { .. }
            | Error::NotSuspended { .. }
            | Error::LeaseLost { .. }
            | Error::LimitReached { .. } => Exit::Conflict,
            Error::Store { .. } | Error::Transport { .. } => Exit::Unavailable,
            Error::Http { status, .. } => match status {
                401 | 403 => Exit::Auth,
                404 => Exit::NotFound,
                409 => Exit::Conflict,
                408 | 429 | 502..=504 => Exit::Unavailable,
                400..=499 => Exit::Invalid,
                _ => Exit::Other,
            },
            _ => Exit::Other,
        }
    }
}

/// A failed client command: what to print and how to exit.
#[derive(Debug)]
pub struct Failure {
    exit: Exit,
    message: String,
    /// The server's machine code, when the server refused.
    code: Option<String>,
    /// The field at fault, when one is known (a JSON path for schema errors).
    param: Option<String>,
}

impl Failure {
    fn new(exit: Exit, message: impl Into<String>) -> Self {
        Failure {
            exit,
            message: message.into(),
            code: None,
            param: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Failure::new(Exit::Invalid, message)
    }

    fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// A protocol error of a call to the server at `url`, with what to do about it.
    fn from_error(e: Error, url: &str) -> Self {
        let exit = Exit::of(&e);
        let message = match exit {
            Exit::Auth => {
                format!("{e}; give the server's token with --token or TURNWISE_API_TOKEN")
            }
            _ if matches!(e, Error::Transport { .. }) => format!(
                "cannot reach a turnwise server at {url}: {e}; is `turnwise serve` running \
                 there? (--url or TURNWISE_URL)"
            ),
            _ => e.to_string(),
        };
        let code = (!matches!(e, Error::Transport { .. })).then(|| e.code().to_owned());
        Failure {
            exit,
            message,
            code,
            param: e.param().map(str::to_owned),
        }
    }
}

/// How to reach the server; global, so they go before or after the subcommand.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The server's base URL (client commands).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "TURNWISE_URL",
        default_value = "http://127.0.0.1:7400"
    )]
    url: String,
    /// The server's bearer token (client commands).
    #[arg(
        long,
        global = true,
        value_name = "TOKEN",
        env = "TURNWISE_API_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// The graph whose namespace to address (the `graph` query parameter; the server's
    /// `default` namespace when absent).
    #[arg(long, global = true, value_name = "GRAPH", env = "TURNWISE_GRAPH")]
    graph: Option<String>,
    /// The environment within the graph (the `stack` query parameter: namespace
    /// `<graph>@<stack>`).
    #[arg(long, global = true, value_name = "STACK", env = "TURNWISE_STACK")]
    stack: Option<String>,
    /// Print the API's JSON instead of tables (errors too, on stderr).
    #[arg(long, global = true)]
    json: bool,
    /// Retries of a read or idempotent write after a transport failure, 429 or 5xx.
    #[arg(long, global = true, value_name = "N", default_value_t = 2)]
    retries: u32,
}

/// The client flags, by their ids.
const CLIENT_FLAGS: [&str; 6] = ["url", "token", "graph", "stack", "json", "retries"];

/// A client flag given on the command line of `serve`, which does not take them (they are
/// global so that they go anywhere on a client command's line). Values from the environment
/// do not count: `TURNWISE_API_TOKEN` is the server's token too.
pub fn client_flag_given(matches: &clap::ArgMatches) -> Option<&'static str> {
    let serve = matches.subcommand_matches("serve")?;
    CLIENT_FLAGS.into_iter().find(|id| {
        [matches, serve]
            .iter()
            .any(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
    })
}

/// The client subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List, read or create instances.
    #[command(subcommand)]
    Instances(inspect::InstancesCommand),
    /// An instance's unfinished turns, oldest first.
    Inbox(inspect::InboxArgs),
    /// An instance's finished turns, oldest kept first.
    History(inspect::HistoryArgs),
    /// One turn, unfinished or in history, with its steps and signals.
    Turn(inspect::TurnArgs),
    /// Export a turn's saved record, to replay it against changed code in a test.
    #[command(subcommand)]
    Turns(inspect::TurnsCommand),
    /// The runs of an instance, newest first: one per attempt of a turn, with how it ended,
    /// how long it took, the inbox before and after, and its usage (the runs route, kept 30
    /// days by default). A run still going shows once it ends or is suspended.
    Runs(IdArg),
    /// Send a message to an instance, checked against its registered schema first.
    Send(control::SendArgs),
    /// Deliver a signal to a turn, checked against its registered schema first.
    Signal(control::SignalArgs),
    /// Pause an instance: no new claims; messages are still admitted.
    Pause(IdArg),
    /// Resume a paused instance; a turn in backoff becomes ready at once.
    Resume(IdArg),
    /// Make a turn that waits without an attempt (a retry wait) ready now.
    Wake(IdArg),
    /// Delete an instance with its inbox and history.
    Delete(IdArg),
    /// Run a turn that failed for good again.
    Retry(TurnArg),
    /// Move a turn that failed for good to history and go on with the next.
    Skip(TurnArg),
    /// Cancel an unfinished turn, leaving the state unchanged (a suspended turn's
    /// cancellation is recorded on the instance's events, by $TURNWISE_BY, else $USER).
    Cancel(TurnArg),
    /// Read the workflow schemas registered with the server.
    #[command(subcommand)]
    Schemas(schemas::SchemasCommand),
    /// Write the replay manifests workers registered with the server, as the files a crate
    /// commits under turnwise/manifests/ (see `turnwise compat`).
    Manifest(schemas::ManifestArgs),
    /// List, read, pause, resume or delete schedules (delayed messages and recurring firings).
    #[command(subcommand)]
    Schedules(schedules::SchedulesCommand),
    /// Follow a turn until it ends: its status and the running step's progress.
    ///
    /// The turn is by default the instance's current one (its inbox head). Its status and the
    /// running step's progress (the progress convention's phase, done, total and unit) are
    /// redrawn as they change: in place on a terminal, one line per change otherwise, one JSON
    /// turn per line with --json. Exits 0 when the turn completes, 1 when it fails, is
    /// cancelled or is suspended by a replay mismatch, 7 when --timeout passes first.
    Watch(watch::WatchArgs),
}

/// An instance id.
#[derive(Args, Debug)]
pub struct IdArg {
    /// The instance id.
    id: String,
}

/// An instance id and one of its turns.
#[derive(Args, Debug)]
pub struct TurnArg {
    /// The instance id.
    id: String,
    /// The turn number.
    #[arg(long, value_name = "N")]
    turn: u64,
}

/// What every command gets: the client and the printer.
struct Ctx {
    http: Http,
    out: Out,
    url: String,
}

impl Ctx {
    /// A protocol error of this server as a [`Failure`].
    fn fail(&self, e: Error) -> Failure {
        Failure::from_error(e, &self.url)
    }
}

/// Run one client command; print its result or its failure.
pub async fn run(args: ClientArgs, command: Command) -> ExitCode {
    let out = Out::new(args.json);
    let url = args.url.trim_end_matches('/').to_owned();
    let result = match connect(&args) {
        Ok(http) => {
            let ctx = Ctx { http, out, url };
            dispatch(&ctx, command).await
        }
        Err(failure) => Err(failure),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            out.failure(&failure);
            ExitCode::from(failure.exit as u8)
        }
    }
}

/// `turnwise compat --workflow NAME --to VERSION`: the live check of the server's instances
/// (`--json` given to `compat` or globally). Exits 0 when every instance checked can move, 2
/// when some are pinned, and as the client commands do when the check fails.
pub async fn run_compat_live(
    args: ClientArgs,
    workflow: String,
    to: String,
    json: bool,
) -> ExitCode {
    let out = Out::new(args.json || json);
    let url = args.url.trim_end_matches('/').to_owned();
    let result = match connect(&args) {
        Ok(http) => {
            let ctx = Ctx { http, out, url };
            versions::compat_live(&ctx, workflow, to).await
        }
        Err(failure) => Err(failure),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(failure) => {
            out.failure(&failure);
            ExitCode::from(failure.exit as u8)
        }
    }
}

/// The `Http` backend the flags describe.
fn connect(args: &ClientArgs) -> Result<Http, Failure> {
    let mut builder = Http::builder(args.url.clone())
        .token(args.token.clone().filter(|t| !t.trim().is_empty()))
        .max_retries(args.retries)
        .retry_budget(Duration::from_secs(20))
        .timeout(Duration::from_secs(30));
    if let Some(graph) = &args.graph {
        builder = builder.graph(graph);
    }
    if let Some(stack) = &args.stack {
        builder = builder.stack(stack);
    }
    builder.build().map_err(|e| {
        let flag = match e.param() {
            Some("base_url") => "--url",
            Some("token") => "--token",
            _ => "the client options",
        };
        Failure::invalid(format!("{flag}: {e}")).with_param(flag.trim_start_matches('-'))
    })
}

async fn dispatch(ctx: &Ctx, command: Command) -> Result<(), Failure> {
    use turnwise::protocol::ControlAction as A;
    match command {
        Command::Instances(c) => inspect::instances(ctx, c).await,
        Command::Inbox(a) => inspect::inbox(ctx, a).await,
        Command::History(a) => inspect::history(ctx, a).await,
        Command::Turn(a) => inspect::turn(ctx, a).await,
        Command::Turns(c) => inspect::turns(ctx, c).await,
        Command::Runs(a) => inspect::runs(ctx, a).await,
        Command::Send(a) => control::send(ctx, a).await,
        Command::Signal(a) => control::signal(ctx, a).await,
        Command::Pause(a) => control::control(ctx, a.id, A::Pause, None).await,
        Command::Resume(a) => control::control(ctx, a.id, A::Resume, None).await,
        Command::Wake(a) => control::control(ctx, a.id, A::Wake, None).await,
        Command::Delete(a) => control::delete(ctx, a.id).await,
        Command::Retry(a) => control::control(ctx, a.id, A::Retry, Some(a.turn)).await,
        Command::Skip(a) => control::control(ctx, a.id, A::Skip, Some(a.turn)).await,
        Command::Cancel(a) => control::control(ctx, a.id, A::CancelTurn, Some(a.turn)).await,
        Command::Schemas(c) => schemas::run(ctx, c).await,
        Command::Manifest(args) => schemas::manifest(ctx, args).await,
        Command::Schedules(c) => schedules::run(ctx, c).await,
        Command::Watch(a) => watch::watch(ctx, a).await,
    }
}
