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
use turnwise_server::{
    DEFAULT_BODY_LIMIT, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};

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

impl LogFormat {
    /// The format's name, as `--log-format` takes it.
    fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }
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
    #[arg(long, value_name = "ADDR:PORT", env = "TURNWISE_BIND", help = format!(
        "The address to listen on [default: {DEFAULT_BIND}]. A non-loopback address needs an \
         API token"
    ))]
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
    #[arg(long, value_name = "BYTES", env = "TURNWISE_BODY_LIMIT",
          value_parser = clap::value_parser!(u64).range(1..),
          help = format!("The largest request body in bytes [default: {DEFAULT_BODY_LIMIT}]"))]
    body_limit: Option<u64>,
    #[arg(long, value_name = "SECS", env = "TURNWISE_HEADER_READ_TIMEOUT", value_parser = seconds,
          help = format!(
              "Close a connection that takes longer than this to send a request head (seconds) \
               [default: {}]",
              DEFAULT_HEADER_READ_TIMEOUT.as_secs()
          ))]
    header_read_timeout: Option<Duration>,
    #[arg(long, value_name = "SECS", env = "TURNWISE_BODY_READ_TIMEOUT", value_parser = seconds,
          help = format!(
              "Refuse with 408 a request body that takes longer than this to arrive (seconds) \
               [default: {}]",
              DEFAULT_BODY_READ_TIMEOUT.as_secs()
          ))]
    body_read_timeout: Option<Duration>,
    #[arg(long, value_name = "SECS", env = "TURNWISE_IDLE_TIMEOUT", value_parser = seconds,
          help = format!(
              "Close a kept-alive connection idle for this long (seconds) [default: {}]",
              DEFAULT_IDLE_TIMEOUT.as_secs()
          ))]
    idle_timeout: Option<Duration>,
    #[arg(long, value_name = "N", env = "TURNWISE_MAX_CONNECTIONS",
          value_parser = clap::value_parser!(u64).range(1..u32::MAX as u64),
          help = format!(
              "Serve at most this many connections at once; more wait until one closes \
               [default: {DEFAULT_MAX_CONNECTIONS}]"
          ))]
    max_connections: Option<u64>,
    #[arg(long, value_name = "FORMAT", env = "TURNWISE_LOG_FORMAT", help = format!(
        "The log lines on stderr: `text`, or `json` (one JSON object a line) [default: {}]",
        LogFormat::default().name()
    ))]
    log_format: Option<LogFormat>,
    #[arg(long, value_name = "N", env = "TURNWISE_HISTORY_KEEP_TURNS", help = format!(
        "History retention: each instance keeps at least its newest N finished turns \
         [default: {}]. 0 keeps every turn. Also read from {LBB_KEEP_TURNS}",
        EngineConfig::default().retention.keep_turns
    ))]
    history_keep_turns: Option<u64>,
    #[arg(long, value_name = "MS", env = "TURNWISE_HISTORY_KEEP_MS", help = format!(
        "History retention: turns finished within this many milliseconds are kept whatever \
         their number [default: {}, a day]. 0 keeps every turn. Also read from {LBB_KEEP_MS}",
        EngineConfig::default().retention.keep_for.as_millis()
    ))]
    history_keep_ms: Option<u64>,
    #[arg(long, value_name = "MS", env = "TURNWISE_RUN_KEEP_MS", help = format!(
        "Run retention: run summaries (the runs routes) are kept this many milliseconds after \
         their run ended [default: {}, 30 days]. 0 keeps every run",
        EngineConfig::default().run_retention.as_millis()
    ))]
    run_keep_ms: Option<u64>,
    #[command(
        flatten,
        next_help_heading = "Limits (refused with a clear error before anything is written)"
    )]
    limits: LimitArgs,
}

/// One of the engine's limits as a setting: its flag (also its `--config` key), its environment
/// variable, its help (to which the default is added, from [`Limits::default`]), and where its
/// value is read from the file and written in [`Limits`].
struct LimitSetting {
    key: &'static str,
    env: &'static str,
    value_name: &'static str,
    help: &'static str,
    file: fn(&FileConfig) -> Option<u64>,
    field: fn(&mut Limits) -> &mut usize,
}

/// The engine's size and count limits, in the order of `--help`; each default is the
/// protocol's.
const LIMIT_SETTINGS: [LimitSetting; 12] = [
    LimitSetting {
        key: "limit-steps-per-turn",
        env: "TURNWISE_LIMIT_STEPS_PER_TURN",
        value_name: "N",
        help: "Steps (sleeps and signal waits included) per turn",
        file: |f| f.limit_steps_per_turn,
        field: |l| &mut l.steps_per_turn,
    },
    LimitSetting {
        key: "limit-state-bytes",
        env: "TURNWISE_LIMIT_STATE_BYTES",
        value_name: "BYTES",
        help: "Bytes of an instance's saved state, as compact JSON",
        file: |f| f.limit_state_bytes,
        field: |l| &mut l.state_bytes,
    },
    LimitSetting {
        key: "limit-output-bytes",
        env: "TURNWISE_LIMIT_OUTPUT_BYTES",
        value_name: "BYTES",
        help: "Bytes of one step's output",
        file: |f| f.limit_output_bytes,
        field: |l| &mut l.output_bytes,
    },
    LimitSetting {
        key: "limit-result-bytes",
        env: "TURNWISE_LIMIT_RESULT_BYTES",
        value_name: "BYTES",
        help: "Bytes of one turn's reply",
        file: |f| f.limit_result_bytes,
        field: |l| &mut l.result_bytes,
    },
    LimitSetting {
        key: "limit-message-bytes",
        env: "TURNWISE_LIMIT_MESSAGE_BYTES",
        value_name: "BYTES",
        help: "Bytes of one message or continuation",
        file: |f| f.limit_message_bytes,
        field: |l| &mut l.message_bytes,
    },
    LimitSetting {
        key: "limit-turn-bytes",
        env: "TURNWISE_LIMIT_TURN_BYTES",
        value_name: "BYTES",
        help: "Bytes of one stored turn with its steps, signals and reply",
        file: |f| f.limit_turn_bytes,
        field: |l| &mut l.turn_bytes,
    },
    LimitSetting {
        key: "limit-pending-messages",
        env: "TURNWISE_LIMIT_PENDING_MESSAGES",
        value_name: "N",
        help: "Unfinished turns per instance",
        file: |f| f.limit_pending_messages,
        field: |l| &mut l.pending_messages,
    },
    LimitSetting {
        key: "limit-signals-per-turn",
        env: "TURNWISE_LIMIT_SIGNALS_PER_TURN",
        value_name: "N",
        help: "Signals delivered to one turn",
        file: |f| f.limit_signals_per_turn,
        field: |l| &mut l.signals_per_turn,
    },
    LimitSetting {
        key: "limit-signal-bytes",
        env: "TURNWISE_LIMIT_SIGNAL_BYTES",
        value_name: "BYTES",
        help: "Bytes of one signal value",
        file: |f| f.limit_signal_bytes,
        field: |l| &mut l.signal_bytes,
    },
    LimitSetting {
        key: "limit-details-bytes",
        env: "TURNWISE_LIMIT_DETAILS_BYTES",
        value_name: "BYTES",
        help: "Bytes of a step's progress details",
        file: |f| f.limit_details_bytes,
        field: |l| &mut l.details_bytes,
    },
    LimitSetting {
        key: "limit-checkpoint-bytes",
        env: "TURNWISE_LIMIT_CHECKPOINT_BYTES",
        value_name: "BYTES",
        help: "Bytes of a resume cursor",
        file: |f| f.limit_checkpoint_bytes,
        field: |l| &mut l.checkpoint_bytes,
    },
    LimitSetting {
        key: "limit-origin-bytes",
        env: "TURNWISE_LIMIT_ORIGIN_BYTES",
        value_name: "BYTES",
        help: "Bytes of a message origin",
        file: |f| f.limit_origin_bytes,
        field: |l| &mut l.origin_bytes,
    },
];

impl LimitSetting {
    /// The flag, with its environment variable and its default in the help.
    fn arg(&self, defaults: &mut Limits) -> clap::Arg {
        let default = *(self.field)(defaults);
        clap::Arg::new(self.key)
            .long(self.key)
            .value_name(self.value_name)
            .env(self.env)
            .value_parser(positive)
            .action(clap::ArgAction::Set)
            .help(format!("{} [default: {default}]", self.help))
    }
}

/// The limits given as flags (or their variables), in the order of [`LIMIT_SETTINGS`].
#[derive(Clone, Default)]
struct LimitArgs([Option<usize>; LIMIT_SETTINGS.len()]);

impl clap::FromArgMatches for LimitArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut args = Self::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (value, setting) in self.0.iter_mut().zip(&LIMIT_SETTINGS) {
            if let Some(n) = matches.get_one::<usize>(setting.key) {
                *value = Some(*n);
            }
        }
        Ok(())
    }
}

impl clap::Args for LimitArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let mut defaults = Limits::default();
        LIMIT_SETTINGS
            .iter()
            .fold(cmd, |cmd, setting| cmd.arg(setting.arg(&mut defaults)))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The limits, each from its flag (or variable), else the file, else its default.
fn resolve_limits(
    flags: &LimitArgs,
    file: &FileConfig,
    in_file: impl Fn(&str) -> String,
) -> Result<Limits, String> {
    let mut limits = Limits::default();
    for (setting, flag) in LIMIT_SETTINGS.iter().zip(flags.0) {
        let value = (setting.field)(&mut limits);
        match (flag, (setting.file)(file)) {
            (Some(n), _) => *value = n,
            (None, Some(n)) => {
                *value = usize::try_from(n).map_err(|_| {
                    format!(
                        "{}: {n} is too large for this machine",
                        in_file(setting.key)
                    )
                })?
            }
            (None, None) => {}
        }
    }
    Ok(limits)
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
        let mut file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let in_file = |key: &str| match &args.config {
            Some(path) => format!("`{key}` in {}", path.display()),
            None => format!("`{key}`"),
        };

        let db = args.db.or(file.db.take()).ok_or_else(|| {
            "no database: give --db FILE|URL, set TURNWISE_DB, or set `db` in the --config file"
                .to_owned()
        })?;
        let api_token = args
            .api_token
            .or(file.api_token.take())
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

        engine.limits = resolve_limits(&args.limits, &file, in_file)?;

        let body_limit =
            args.body_limit
                .or(file.body_limit)
                .map_or(Ok(DEFAULT_BODY_LIMIT), |n| {
                    usize::try_from(n).map_err(|_| {
                        format!(
                            "--body-limit or {}: {n} is too large",
                            in_file("body-limit")
                        )
                    })
                })?;
        Ok(Self {
            db,
            bind: args
                .bind
                .or(file.bind.take())
                .unwrap_or_else(|| DEFAULT_BIND.to_owned()),
            metrics_bind: args.metrics_bind.or(file.metrics_bind.take()),
            api_token,
            body_limit,
            header_read_timeout: args
                .header_read_timeout
                .or(file.header_read_timeout)
                .unwrap_or(DEFAULT_HEADER_READ_TIMEOUT),
            body_read_timeout: args
                .body_read_timeout
                .or(file.body_read_timeout)
                .unwrap_or(DEFAULT_BODY_READ_TIMEOUT),
            idle_timeout: args
                .idle_timeout
                .or(file.idle_timeout)
                .unwrap_or(DEFAULT_IDLE_TIMEOUT),
            // At most u32::MAX - 1 by both parsers.
            max_connections: args
                .max_connections
                .or(file.max_connections)
                .map_or(DEFAULT_MAX_CONNECTIONS, |n| n as usize),
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
