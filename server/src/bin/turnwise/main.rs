//! `turnwise`: the command line of the turnwise server.
//!
//! ```text
//! turnwise serve [--config turnwise.toml] --db turnwise.db|postgres://… [--bind 127.0.0.1:7400]
//!                [--api-token TOKEN] [--log-format text|json] [--history-keep-turns N] ...
//! turnwise backup --db turnwise.db --out backup.db
//! ```
//!
//! and the operator commands, clients of a running server (`turnwise --help` lists them, and
//! `docs/operations.md` shows each):
//!
//! ```text
//! turnwise [--url URL] [--token TOKEN] [--graph G] [--stack S] [--json] <command> ...
//! ```
//!
//! Each `serve` setting comes from its flag, else its environment variable
//! (`TURNWISE_BIND`, …), else the `--config` file, else its default (the `config` module).
//! Without a token the server listens on loopback addresses only. Logs go to stderr (`RUST_LOG`
//! filters them, default `info`), as text or JSON lines; once listening, the server prints
//! `turnwise listening on http://<addr>` on stdout.

// One job per function: clippy.toml sets the limit at 100 lines; the few longer functions
// say why where they are.
#![warn(clippy::too_many_lines)]
use std::net::SocketAddr;
use std::process::ExitCode;

mod backup;
mod cli;
mod compat;
mod config;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use turnwise_server::{metrics_router, router, serve_with, ServerOptions, Shutdown};

/// jemalloc rather than the platform's allocator: the engine's records are allocated on the
/// runtime's threads and freed on the store's writer thread, a pattern glibc's malloc serves
/// with lock contention between its arenas (`docs/performance.md` has the figures).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "turnwise",
    version,
    about = "Typed durable workflows: the turnwise server and its operator commands",
    after_help = cli::EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten, next_help_heading = "Client options")]
    client: cli::ClientArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the message-workflow HTTP API over a SQLite file or a PostgreSQL database.
    Serve(Box<config::ServeArgs>),
    /// Copy a SQLite store into a new file, safely while a server runs on it.
    Backup(backup::BackupArgs),
    /// Check changed workflow code against the deployed replay manifests, for CI; or, with
    /// --workflow and --to, which instances on a server could move to another version now.
    Compat(compat::CompatArgs),
    #[command(flatten)]
    Client(cli::Command),
}

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(matches) => matches,
        Err(e) => {
            let _ = e.print();
            if let Some(note) = config::env_source_note(&Cli::command(), &e) {
                eprintln!("{note}");
            }
            std::process::exit(e.exit_code());
        }
    };
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // What to run, once the settings are known (their log format first of all).
    enum Job {
        Serve(Box<config::Settings>),
        Client(cli::Command),
    }
    let job = match cli.command {
        Command::Backup(args) => return backup::run(args),
        Command::Compat(args) => return compat::run(args, cli.client),
        Command::Serve(_) if cli::client_flag_given(&matches).is_some() => {
            let flag = cli::client_flag_given(&matches).unwrap_or_default();
            eprintln!(
                "turnwise: --{flag} is an option of the client commands, not of `serve` \
                 (the server's token is --api-token)"
            );
            return ExitCode::from(2);
        }
        Command::Serve(args) => match config::Settings::resolve(*args) {
            Ok(settings) => Job::Serve(Box::new(settings)),
            Err(msg) => {
                eprintln!("turnwise: {msg}");
                return ExitCode::from(2);
            }
        },
        Command::Client(command) => Job::Client(command),
    };
    let log_format = match &job {
        Job::Serve(settings) => settings.log_format,
        Job::Client(_) => config::LogFormat::Text,
    };
    // Kept to the end of `main`: dropping it flushes the span export (feature `otel`).
    let _exporting = init_logs(log_format);
    let runtime = match async_runtime(tokio::runtime::Builder::new_multi_thread()) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match job {
        Job::Client(command) => runtime.block_on(cli::run(cli.client, command)),
        Job::Serve(settings) => match runtime.block_on(run(*settings)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                eprintln!("turnwise: {msg}");
                ExitCode::from(2)
            }
        },
    }
}

/// The async runtime `builder` makes, with every driver on; when it cannot start, the message
/// is printed and the exit code answered.
pub(crate) fn async_runtime(
    mut builder: tokio::runtime::Builder,
) -> Result<tokio::runtime::Runtime, ExitCode> {
    builder.enable_all().build().map_err(|e| {
        eprintln!("turnwise: could not start the async runtime: {e}");
        ExitCode::FAILURE
    })
}

/// Log lines on stderr, filtered by `RUST_LOG` (default `info`), as text or JSON; with the
/// `otel` feature and `OTEL_EXPORTER_OTLP_ENDPOINT` set, the spans exported too (until the
/// answer is dropped, which flushes them).
fn init_logs(format: config::LogFormat) -> Option<otel::Exporting> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        config::LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter)
            .boxed(),
        config::LogFormat::Json => logs
            .json()
            .with_span_list(false)
            .with_ansi(false)
            .with_filter(filter)
            .boxed(),
    };
    // The export is not filtered by `RUST_LOG` (which is about the log lines): it takes the
    // spans at `info` and above.
    let (exporting, layer) = otel::layer();
    tracing_subscriber::registry()
        .with(logs)
        .with(layer.with_filter(tracing_subscriber::filter::LevelFilter::INFO))
        .init();
    exporting
}

/// The OpenTelemetry export (feature `otel`).
#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::Layer;

    /// Spans being exported; dropping it flushes and stops the export.
    pub struct Exporting(SdkTracerProvider);

    impl Drop for Exporting {
        fn drop(&mut self) {
            let _ = self.0.shutdown();
        }
    }

    /// The export layer, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its traces-only variant) names
    /// a collector; OTLP over HTTP with protobuf, configured by the standard `OTEL_*`
    /// variables.
    pub fn layer<S>() -> (Option<Exporting>, Option<Box<dyn Layer<S> + Send + Sync>>)
    where
        S: tracing::Subscriber + Send + Sync + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let configured = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        if !configured {
            return (None, None);
        }
        // The exporter's HTTP client needs a process-wide TLS provider; one installed already
        // is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
        {
            Ok(exporter) => exporter,
            Err(e) => {
                eprintln!("turnwise: the OpenTelemetry export is off: {e}");
                return (None, None);
            }
        };
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("turnwise")
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("turnwise");
        let layer = tracing_opentelemetry::layer().with_tracer(tracer).boxed();
        (Some(Exporting(provider)), Some(layer))
    }
}

/// Without the `otel` feature: no export.
#[cfg(not(feature = "otel"))]
mod otel {
    /// Never made.
    pub enum Exporting {}

    /// No layer.
    pub fn layer() -> (
        Option<Exporting>,
        Option<tracing_subscriber::layer::Identity>,
    ) {
        (None, None)
    }
}

async fn run(args: config::Settings) -> Result<(), String> {
    let token = args.api_token;
    let addrs = resolve("--bind", &args.bind).await?;
    if token.is_none() {
        if let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(format!(
                "refusing to listen on {open} without an API token: anyone who can reach that \
                 address could read and drive your workflows. Set --api-token or \
                 TURNWISE_API_TOKEN, or bind a loopback address such as 127.0.0.1:7400"
            ));
        }
    }
    let metrics_addrs = match &args.metrics_bind {
        Some(bind) => Some(resolve("--metrics-bind", bind).await?),
        None => None,
    };
    if let (None, Some(addrs)) = (&token, &metrics_addrs) {
        if let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(format!(
                "refusing to serve /metrics on {open} without an API token: the metrics \
                 listener takes no token, and without one this server is for loopback use \
                 only. Set --api-token, or bind a loopback address such as 127.0.0.1:9400"
            ));
        }
    }
    let metrics = turnwise_server::metrics::install().map_err(|e| e.to_string())?;
    let db = redacted(&args.db);
    let engine = turnwise::Engine::connect_with(&args.db, args.engine)
        .await
        .map_err(|e| format!("cannot open the database {db}: {e}"))?;
    let listener = tokio::net::TcpListener::bind(&addrs[..])
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.bind))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;

    let shutdown = Shutdown::new();
    let mut options = ServerOptions::default()
        .with_body_limit(args.body_limit)
        .with_header_read_timeout(args.header_read_timeout)
        .with_body_read_timeout(args.body_read_timeout)
        .with_idle_timeout(args.idle_timeout)
        .with_max_connections(args.max_connections)
        .with_metrics(metrics)
        .with_shutdown(shutdown.clone());
    if let Some(token) = token {
        options = options.with_token(token);
    }
    let metrics_listener = match &metrics_addrs {
        Some(addrs) => {
            let listener = tokio::net::TcpListener::bind(&addrs[..])
                .await
                .map_err(|e| format!("cannot listen on --metrics-bind {addrs:?}: {e}"))?;
            let local = listener
                .local_addr()
                .map_err(|e| format!("cannot read the bound metrics address: {e}"))?;
            Some((listener, local))
        }
        None => None,
    };
    let app = router(engine.clone(), options.clone());

    tracing::info!(addr = %local, db = %db, "turnwise listening");
    println!("turnwise listening on http://{local}");
    let mut metrics_server = None;
    if let Some((listener, at)) = metrics_listener {
        tracing::info!(addr = %at, "turnwise metrics listening");
        println!("turnwise metrics on http://{at}/metrics");
        let app = metrics_router(engine, options.clone());
        let options = options.clone();
        let stop = shutdown.clone();
        metrics_server = Some(tokio::spawn(async move {
            serve_with(listener, app, &options, stop.wait_owned()).await
        }));
    }

    let stop = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: no new connections; finishing the requests in flight");
        stop.trigger();
        // A second signal stops at once. Everything acknowledged is already committed.
        wait_for_signal().await;
        tracing::warn!("second signal: stopping now");
        std::process::exit(130);
    });
    serve_with(listener, app, &options, shutdown.wait_owned())
        .await
        .map_err(|e| format!("the server failed: {e}"))?;
    if let Some(metrics_server) = metrics_server {
        match metrics_server.await {
            Ok(served) => served.map_err(|e| format!("the metrics listener failed: {e}"))?,
            Err(e) => return Err(format!("the metrics listener failed: {e}")),
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The addresses `bind` (the value of `flag`) resolves to; at least one.
async fn resolve(flag: &str, bind: &str) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(bind)
        .await
        .map_err(|e| format!("cannot resolve {flag} {bind}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{flag} {bind} resolves to no address"));
    }
    Ok(addrs)
}

/// A `--db` value fit for logs: a URL's password replaced by `***`.
fn redacted(db: &str) -> String {
    let Some((scheme, rest)) = db.split_once("://") else {
        return db.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{scheme}://{name}:***@{host}{tail}"),
            None => db.to_owned(),
        },
        None => db.to_owned(),
    }
}

/// SIGTERM or SIGINT (Ctrl-C).
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
