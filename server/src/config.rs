//! The settings of `turnwise serve`, from four places in this order of precedence: a flag, its
//! environment variable, the `--config` file (TOML, one key per flag, named as the flag without
//! its dashes: `body-limit = 1048576`), the default.
//!
//! History retention also reads Little Big Brain's variables,
//! `LBB_WORKFLOW_HISTORY_KEEP_TURNS` and `LBB_WORKFLOW_HISTORY_KEEP_MS`, ranked after turnwise's
//! own variables and before the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use turnwise::{EngineConfig, Limits};

/// The `--help` text that says where the settings come from.
pub const PRECEDENCE: &str = "\
Each option may also be set by its environment variable ([env: ...]) or by a key of the
--config file named after it (`bind = \"127.0.0.1:7400\"`, `history-keep-turns = 100`).
Precedence: flag > environment variable > config file > default. The history retention also
reads LBB_WORKFLOW_HISTORY_KEEP_TURNS and LBB_WORKFLOW_HISTORY_KEEP_MS, after turnwise's own
variables and before the file.";

/// The default `--bind`.
const DEFAULT_BIND: &str = "127.0.0.1:7400";

/// Little Big Brain's names for the history retention.
const LBB_KEEP_TURNS: &str = "LBB_WORKFLOW_HISTORY_KEEP_TURNS";
const LBB_KEEP_MS: &str = "LBB_WORKFLOW_HISTORY_KEEP_MS";

/// How the server writes its log lines on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`.
    Json,
}

/// The flags of `turnwise serve`. Each is optional here: what is missing comes from the
/// environment (clap reads the variables), then the file, then the default.
#[derive(clap::Args)]
#[command(after_help = PRECEDENCE)]
pub struct ServeArgs {
    /// Read settings from this TOML file; a flag or environment variable overrides each.
    #[arg(long, value_name = "FILE", env = "TURNWISE_CONFIG")]
    config: Option<PathBuf>,
    /// Where the workflows are kept: the path of a SQLite file (created if missing), or a
    /// PostgreSQL database, `postgres://user:password@host:port/database`, which any number of
    /// `turnwise serve` nodes and embedded engines may share. Required.
    #[arg(
        long,
        value_name = "FILE|URL",
        env = "TURNWISE_DB",
        hide_env_values = true
    )]
    db: Option<String>,
    /// The address to listen on [default: 127.0.0.1:7400]. A non-loopback address needs an
    /// API token.
    #[arg(long, value_name = "ADDR:PORT", env = "TURNWISE_BIND")]
    bind: Option<String>,
    /// Serve `GET /metrics` (Prometheus) on a listener of its own at this address, without the
    /// token; a non-loopback address needs an API token, as --bind does. Without it, /metrics
    /// is served beside the API (with the token when one is set).
    #[arg(long, value_name = "ADDR:PORT", env = "TURNWISE_METRICS_BIND")]
    metrics_bind: Option<String>,
    /// Require `Authorization: Bearer <TOKEN>` on every request.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "TURNWISE_API_TOKEN",
        hide_env_values = true
    )]
    api_token: Option<String>,
    /// The largest request body in bytes [default: 1048576].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_BODY_LIMIT",
          value_parser = clap::value_parser!(u64).range(1..))]
    body_limit: Option<u64>,
    /// Close a connection that takes longer than this to send a request head (seconds)
    /// [default: 10].
    #[arg(long, value_name = "SECS", env = "TURNWISE_HEADER_READ_TIMEOUT", value_parser = seconds)]
    header_read_timeout: Option<Duration>,
    /// Refuse with 408 a request body that takes longer than this to arrive (seconds)
    /// [default: 30].
    #[arg(long, value_name = "SECS", env = "TURNWISE_BODY_READ_TIMEOUT", value_parser = seconds)]
    body_read_timeout: Option<Duration>,
    /// Close a kept-alive connection idle for this long (seconds) [default: 60].
    #[arg(long, value_name = "SECS", env = "TURNWISE_IDLE_TIMEOUT", value_parser = seconds)]
    idle_timeout: Option<Duration>,
    /// Serve at most this many connections at once; more wait until one closes
    /// [default: 1024].
    #[arg(long, value_name = "N", env = "TURNWISE_MAX_CONNECTIONS",
          value_parser = clap::value_parser!(u64).range(1..u32::MAX as u64))]
    max_connections: Option<u64>,
    /// The log lines on stderr: `text`, or `json` (one JSON object a line) [default: text].
    #[arg(long, value_name = "FORMAT", env = "TURNWISE_LOG_FORMAT")]
    log_format: Option<LogFormat>,
    /// History retention: each instance keeps at least its newest N finished turns
    /// [default: 256]. 0 keeps every turn. Also read from LBB_WORKFLOW_HISTORY_KEEP_TURNS.
    #[arg(long, value_name = "N", env = "TURNWISE_HISTORY_KEEP_TURNS")]
    history_keep_turns: Option<u64>,
    /// History retention: turns finished within this many milliseconds are kept whatever
    /// their number [default: 86400000, a day]. 0 keeps every turn. Also read from
    /// LBB_WORKFLOW_HISTORY_KEEP_MS.
    #[arg(long, value_name = "MS", env = "TURNWISE_HISTORY_KEEP_MS")]
    history_keep_ms: Option<u64>,
    /// Run retention: run summaries (the runs routes) are kept this many milliseconds after
    /// their run ended [default: 2592000000, 30 days]. 0 keeps every run.
    #[arg(long, value_name = "MS", env = "TURNWISE_RUN_KEEP_MS")]
    run_keep_ms: Option<u64>,
    #[command(
        flatten,
        next_help_heading = "Limits (refused with a clear error before anything is written)"
    )]
    limits: LimitArgs,
}

/// The engine's size and count limits as flags; each default is the protocol's.
#[derive(clap::Args)]
struct LimitArgs {
    /// Steps (sleeps and signal waits included) per turn [default: 64].
    #[arg(long, value_name = "N", env = "TURNWISE_LIMIT_STEPS_PER_TURN", value_parser = positive)]
    limit_steps_per_turn: Option<usize>,
    /// Bytes of an instance's saved state, as compact JSON [default: 65536].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_STATE_BYTES", value_parser = positive)]
    limit_state_bytes: Option<usize>,
    /// Bytes of one step's output [default: 65536].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_OUTPUT_BYTES", value_parser = positive)]
    limit_output_bytes: Option<usize>,
    /// Bytes of one turn's reply [default: 65536].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_RESULT_BYTES", value_parser = positive)]
    limit_result_bytes: Option<usize>,
    /// Bytes of one message or continuation [default: 32768].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_MESSAGE_BYTES", value_parser = positive)]
    limit_message_bytes: Option<usize>,
    /// Bytes of one stored turn with its steps, signals and reply [default: 262144].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_TURN_BYTES", value_parser = positive)]
    limit_turn_bytes: Option<usize>,
    /// Unfinished turns per instance [default: 128].
    #[arg(long, value_name = "N", env = "TURNWISE_LIMIT_PENDING_MESSAGES", value_parser = positive)]
    limit_pending_messages: Option<usize>,
    /// Signals delivered to one turn [default: 64].
    #[arg(long, value_name = "N", env = "TURNWISE_LIMIT_SIGNALS_PER_TURN", value_parser = positive)]
    limit_signals_per_turn: Option<usize>,
    /// Bytes of one signal value [default: 32768].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_SIGNAL_BYTES", value_parser = positive)]
    limit_signal_bytes: Option<usize>,
    /// Bytes of a step's progress details [default: 8192].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_DETAILS_BYTES", value_parser = positive)]
    limit_details_bytes: Option<usize>,
    /// Bytes of a resume cursor [default: 32768].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_CHECKPOINT_BYTES", value_parser = positive)]
    limit_checkpoint_bytes: Option<usize>,
    /// Bytes of a message origin [default: 1024].
    #[arg(long, value_name = "BYTES", env = "TURNWISE_LIMIT_ORIGIN_BYTES", value_parser = positive)]
    limit_origin_bytes: Option<usize>,
}

/// The `--config` file: every key optional, named as its flag; any other key is an error.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    db: Option<String>,
    bind: Option<String>,
    api_token: Option<String>,
    #[serde(default, deserialize_with = "file_positive")]
    body_limit: Option<u64>,
    #[serde(default, deserialize_with = "file_seconds")]
    header_read_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "file_seconds")]
    body_read_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "file_seconds")]
    idle_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "file_connections")]
    max_connections: Option<u64>,
    log_format: Option<LogFormat>,
    metrics_bind: Option<String>,
    history_keep_turns: Option<u64>,
    history_keep_ms: Option<u64>,
    run_keep_ms: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_steps_per_turn: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_state_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_output_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_result_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_message_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_turn_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_pending_messages: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_signals_per_turn: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_signal_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_details_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_checkpoint_bytes: Option<u64>,
    #[serde(default, deserialize_with = "file_positive")]
    limit_origin_bytes: Option<u64>,
}

/// What `turnwise serve` runs with, every source taken into account.
pub struct Settings {
    /// The store's address (a SQLite path or a `postgres://` URL).
    pub db: String,
    /// The address to listen on.
    pub bind: String,
    /// The address of the `/metrics` listener, when it has its own.
    pub metrics_bind: Option<String>,
    /// The bearer token; `None` when unset or blank.
    pub api_token: Option<String>,
    /// The largest request body.
    pub body_limit: usize,
    /// See `ServerOptions::with_header_read_timeout`.
    pub header_read_timeout: Duration,
    /// See `ServerOptions::with_body_read_timeout`.
    pub body_read_timeout: Duration,
    /// See `ServerOptions::with_idle_timeout`.
    pub idle_timeout: Duration,
    /// See `ServerOptions::with_max_connections`.
    pub max_connections: usize,
    /// The log lines' format.
    pub log_format: LogFormat,
    /// The engine's limits and history retention.
    pub engine: EngineConfig,
}

impl Settings {
    /// Combine the flags and environment (in `args`), the file they name and the defaults.
    /// The error says which setting was wrong and where it came from.
    pub fn resolve(args: ServeArgs) -> Result<Self, String> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let in_file = |key: &str| match &args.config {
            Some(path) => format!("`{key}` in {}", path.display()),
            None => format!("`{key}`"),
        };

        let db = args.db.or(file.db).ok_or_else(|| {
            "no database: give --db FILE|URL, set TURNWISE_DB, or set `db` in the --config file"
                .to_owned()
        })?;
        let api_token = args
            .api_token
            .or(file.api_token)
            .filter(|t| !t.trim().is_empty());

        let defaults = EngineConfig::default();
        let mut engine = EngineConfig::default();
        engine.retention.keep_turns = args
            .history_keep_turns
            .or(lbb(LBB_KEEP_TURNS)?)
            .or(file.history_keep_turns)
            .unwrap_or(defaults.retention.keep_turns);
        engine.retention.keep_for = args
            .history_keep_ms
            .or(lbb(LBB_KEEP_MS)?)
            .or(file.history_keep_ms)
            .map_or(defaults.retention.keep_for, Duration::from_millis);
        engine.run_retention = args
            .run_keep_ms
            .or(file.run_keep_ms)
            .map_or(defaults.run_retention, Duration::from_millis);

        let l = args.limits;
        let size = |flag: Option<usize>, file: Option<u64>, key: &str, default: usize| match flag {
            Some(n) => Ok(n),
            None => file.map_or(Ok(default), |n| {
                usize::try_from(n)
                    .map_err(|_| format!("{}: {n} is too large for this machine", in_file(key)))
            }),
        };
        let d = Limits::default();
        let limits = &mut engine.limits;
        limits.steps_per_turn = size(
            l.limit_steps_per_turn,
            file.limit_steps_per_turn,
            "limit-steps-per-turn",
            d.steps_per_turn,
        )?;
        limits.state_bytes = size(
            l.limit_state_bytes,
            file.limit_state_bytes,
            "limit-state-bytes",
            d.state_bytes,
        )?;
        limits.output_bytes = size(
            l.limit_output_bytes,
            file.limit_output_bytes,
            "limit-output-bytes",
            d.output_bytes,
        )?;
        limits.result_bytes = size(
            l.limit_result_bytes,
            file.limit_result_bytes,
            "limit-result-bytes",
            d.result_bytes,
        )?;
        limits.message_bytes = size(
            l.limit_message_bytes,
            file.limit_message_bytes,
            "limit-message-bytes",
            d.message_bytes,
        )?;
        limits.turn_bytes = size(
            l.limit_turn_bytes,
            file.limit_turn_bytes,
            "limit-turn-bytes",
            d.turn_bytes,
        )?;
        limits.pending_messages = size(
            l.limit_pending_messages,
            file.limit_pending_messages,
            "limit-pending-messages",
            d.pending_messages,
        )?;
        limits.signals_per_turn = size(
            l.limit_signals_per_turn,
            file.limit_signals_per_turn,
            "limit-signals-per-turn",
            d.signals_per_turn,
        )?;
        limits.signal_bytes = size(
            l.limit_signal_bytes,
            file.limit_signal_bytes,
            "limit-signal-bytes",
            d.signal_bytes,
        )?;
        limits.details_bytes = size(
            l.limit_details_bytes,
            file.limit_details_bytes,
            "limit-details-bytes",
            d.details_bytes,
        )?;
        limits.checkpoint_bytes = size(
            l.limit_checkpoint_bytes,
            file.limit_checkpoint_bytes,
            "limit-checkpoint-bytes",
            d.checkpoint_bytes,
        )?;
        limits.origin_bytes = size(
            l.limit_origin_bytes,
            file.limit_origin_bytes,
            "limit-origin-bytes",
            d.origin_bytes,
        )?;

        let body_limit = args.body_limit.or(file.body_limit).map_or(
            Ok(turnwise_server::DEFAULT_BODY_LIMIT),
            |n| {
                usize::try_from(n).map_err(|_| {
                    format!(
                        "--body-limit or {}: {n} is too large",
                        in_file("body-limit")
                    )
                })
            },
        )?;
        Ok(Self {
            db,
            bind: args
                .bind
                .or(file.bind)
                .unwrap_or_else(|| DEFAULT_BIND.to_owned()),
            metrics_bind: args.metrics_bind.or(file.metrics_bind),
            api_token,
            body_limit,
            header_read_timeout: args
                .header_read_timeout
                .or(file.header_read_timeout)
                .unwrap_or(Duration::from_secs(10)),
            body_read_timeout: args
                .body_read_timeout
                .or(file.body_read_timeout)
                .unwrap_or(Duration::from_secs(30)),
            idle_timeout: args
                .idle_timeout
                .or(file.idle_timeout)
                .unwrap_or(Duration::from_secs(60)),
            // At most u32::MAX - 1 by both parsers.
            max_connections: args
                .max_connections
                .or(file.max_connections)
                .map_or(turnwise_server::DEFAULT_MAX_CONNECTIONS, |n| n as usize),
            log_format: args.log_format.or(file.log_format).unwrap_or_default(),
            engine,
        })
    }
}

/// For a refused flag value that came from an environment variable rather than the command
/// line (clap's message names only the flag): a line naming the variable.
pub fn env_source_note(cli: &clap::Command, e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    // `--body-limit <BYTES>`
    let flag = arg.split_whitespace().next()?;
    let long = flag.strip_prefix("--")?;
    let on_command_line = std::env::args_os().any(|a| {
        let a = a.to_string_lossy();
        a == flag || a.starts_with(&format!("{flag}="))
    });
    if on_command_line {
        return None;
    }
    let env = std::iter::once(cli)
        .chain(cli.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long))?
        .get_env()?;
    Some(format!(
        "note: {flag} is not on the command line; the value comes from the environment \
         variable {}",
        env.to_string_lossy()
    ))
}

/// Read and check the `--config` file. An error names the file, the line and the key.
fn read_file(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let message = e
            .message()
            .trim_end()
            .replacen("unknown field", "unknown key", 1);
        let Some(at) = e.span().map(|span| span.start.min(text.len())) else {
            return format!("the config file {}: {message}", path.display());
        };
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = text[line_start..].lines().next().unwrap_or("");
        let number = text[..at].matches('\n').count() + 1;
        match line.split_once('=') {
            Some((key, _)) => format!(
                "the config file {}, line {number}, key `{}`: {message}",
                path.display(),
                key.trim()
            ),
            None => format!(
                "the config file {}, line {number}: {message}",
                path.display()
            ),
        }
    })
}

/// One of Little Big Brain's retention variables, if set: a whole number.
fn lbb(name: &str) -> Result<Option<u64>, String> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().map(Some).map_err(|_| {
            format!("{name}={v:?} is not a whole number (it is read when turnwise's own variable is unset)")
        }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    }
}

/// A positive number of seconds, fractions allowed.
pub fn seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

fn secs_f64(secs: f64) -> Result<Duration, String> {
    if secs.is_nan() || secs <= 0.0 {
        return Err("the timeout must be more than 0 seconds".to_owned());
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

/// A whole number of at least 1.
fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number")),
    }
}

fn file_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let secs = f64::deserialize(d)?;
    secs_f64(secs).map(Some).map_err(serde::de::Error::custom)
}

fn file_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(Some(n)),
    }
}

fn file_connections<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        n if (1..u64::from(u32::MAX)).contains(&n) => Ok(Some(n)),
        n => Err(serde::de::Error::custom(format!(
            "{n} is out of range: 1 to {}",
            u32::MAX - 1
        ))),
    }
}
