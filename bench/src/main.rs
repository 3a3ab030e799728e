//! `turnwise-bench`: how fast the embedded engine makes turns durable, next to what the disk
//! allows.
//!
//! ```text
//! cargo run --release -p turnwise-bench -- [--turns N] [--concurrency 1,16,64] [--db-dir DIR]
//!                                          [--memory-check N] [--store sqlite|memory|postgres]
//!                                          [--http]
//! ```
//!
//! One run measures, on the same disk:
//!
//! 1. the raw SQLite ceiling: one thread committing one-row transactions (WAL,
//!    `synchronous=FULL`), see [`raw`];
//! 2. the embedded engine over `SqliteStore` (`synchronous=FULL`) at each concurrency, with
//!    `c` workers each running admit → claim → 3 × (operation + checkpoint) → complete on its own
//!    instance, see [`engine_load`];
//! 3. the ratios between them, against the targets;
//! 4. with `--memory-check N`, N turns at c=16 while sampling the RSS, to see that memory stays
//!    flat;
//! 5. with `--http`, the same workload at each concurrency over the `Http` backend, talking to
//!    the turnwise server's router on loopback in this process, over the same kind of store,
//!    printed beside the embedded figures;
//! 6. the SDK path (unless `--no-sdk`): a `#[workflow]` with three `#[step]`s, `c` clients each
//!    calling its own instance through a typed handle and awaiting the reply, one `Worker` with
//!    `c` slots on the one workflow type; and the same with `--queued N` messages per instance
//!    admitted before the worker starts, see [`sdk_load`]; embedded, and over HTTP with
//!    `--http`, with its ratios to the raw path of the same run;
//! 7. allocations per turn, raw and SDK, counted over `--alloc-turns N` turns at c=16 by a
//!    counting wrapper around the global allocator (off during the throughput phases);
//! 8. parallel steps (alone, with `--fan-out-only`): a turn fanning out 16 steps that each
//!    await a 5 ms sleep, against the same 16 steps awaited one after the other, at each
//!    concurrency, embedded and (with `--http`) over HTTP, see [`fan_out`];
//! 9. the live compatibility check (alone, with `--compat-only`): `--compat-instances N`
//!    (10,000) instances of a workflow in a SQLite file, idle, asleep, waiting for a signal,
//!    backing off or pinned, checked against another version, embedded and (with `--http`)
//!    over HTTP, then the bulk upgrade, see [`compat_live`].
//!
//! With `--store postgres` (the database `TURNWISE_TEST_POSTGRES` names, default
//! postgres://postgres@127.0.0.1:5432/test, a fresh schema per phase) phase 1 is the raw
//! PostgreSQL ceiling at one and at 16 clients (see [`raw_pg`]), and phase 2 adds the top
//! concurrency spread over three engines, each with a store of its own on the one database
//! (three nodes), beside one.
//!
//! The binary runs on the system allocator unless built with `--features jemalloc`.

mod alloc_count;
mod compat_live;
mod engine_load;
mod fan_out;
mod raw;
mod raw_pg;
mod sdk_load;
mod stats;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use engine_load::{LevelResult, RssProbe, StoreKind, Transport, STEPS};
use raw::RawResult;
use sdk_load::SdkResult;
use stats::{count, mib, ms, rate};

/// The system allocator, as an application gets unless it picks another, with allocations
/// counted on demand.
#[cfg(not(all(feature = "jemalloc", not(target_env = "msvc"))))]
#[global_allocator]
static ALLOCATOR: alloc_count::Counting<std::alloc::System> =
    alloc_count::Counting(std::alloc::System);

/// jemalloc, the `turnwise` server binary's allocator (`--features jemalloc`), with
/// allocations counted on demand.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: alloc_count::Counting<tikv_jemallocator::Jemalloc> =
    alloc_count::Counting(tikv_jemallocator::Jemalloc);

/// The allocator this build uses, for the report's header.
const ALLOCATOR_NAME: &str = if cfg!(all(feature = "jemalloc", not(target_env = "msvc"))) {
    "jemalloc (--features jemalloc)"
} else {
    "the system allocator (glibc malloc on Linux)"
};

/// The targets the ratios are held against.
mod targets {
    /// p50 turn latency at c=1 over 6 × the raw p50 commit latency: at most this.
    pub const LATENCY_RATIO: f64 = 1.5;
    /// Durable commits per turn at c=1: at most this.
    pub const DURABLE_PER_TURN: f64 = 6.0;
    /// Steps per second at c=64: at least this.
    pub const STEPS_PER_SEC: f64 = 15_000.0;
    /// RSS growth from after warm-up to the end of the memory check: at most this factor.
    pub const RSS_GROWTH: f64 = 1.10;
    /// SDK steps/s at c=64 over the raw path's steps/s in the same run: at least this.
    pub const SDK_OVER_RAW: f64 = 0.7;
    /// SDK p50 call at c=1 over the raw p50 turn: at most this.
    pub const SDK_CALL_OVER_TURN: f64 = 1.3;
    /// Queued-first steps/s over call-and-await steps/s at the same c: at least this.
    pub const QUEUED_OVER_CALL: f64 = 0.9;
    /// PostgreSQL: durable commits/s at c=1 over the raw single-client commits/s: at least this.
    pub const PG_SEQUENTIAL: f64 = 0.7;
    /// PostgreSQL: steps/s at c=16: at least this.
    pub const PG_STEPS_C16: f64 = 5_000.0;
    /// PostgreSQL: three nodes' steps/s over one node's at the top concurrency: at least this.
    pub const PG_THREE_NODES: f64 = 1.5;
    /// Restate 1.7.12 with its Rust SDK, same shape, c=64, on this machine kind (steps/s).
    pub const RESTATE_STEPS_PER_SEC: f64 = 2_180.0;
    /// SDK steps/s at c=64 over Restate's: at least this.
    pub const OVER_RESTATE: f64 = 6.0;
}

/// turnwise-bench: the embedded engine's durable throughput and latency next to raw SQLite.
#[derive(Debug, clap::Parser)]
#[command(name = "turnwise-bench", about, long_about = None)]
struct Args {
    /// Turns per concurrency level, and raw transactions.
    #[arg(long, value_name = "N", default_value = "2000", value_parser = positive)]
    turns: u64,
    /// Comma-separated worker counts.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1,16,64",
        value_parser = positive_usize
    )]
    concurrency: Vec<usize>,
    /// Where the database files go (default: a temp dir under target/); a fresh
    /// sub-directory is made per run and removed afterwards.
    #[arg(long, value_name = "DIR")]
    db_dir: Option<PathBuf>,
    /// Also run N turns at c=16 and print the RSS every N/10 turns.
    #[arg(long, value_name = "N", value_parser = positive)]
    memory_check: Option<u64>,
    /// The store: `sqlite`, `sqlite-sync-in-commit` (the WAL synced in each COMMIT instead of
    /// on the store's sync thread) or `memory` (the engine's CPU ceiling, no disk; the raw
    /// phase and the store counters are then skipped).
    #[arg(long, value_name = "KIND", value_enum, default_value_t = StoreKind::Sqlite, hide_possible_values = true)]
    store: StoreKind,
    /// Also run every level over HTTP: workers use the `Http` backend against a turnwise
    /// server on 127.0.0.1 in this process.
    #[arg(long)]
    http: bool,
    /// Skip the SDK path (phases 6 and 7).
    #[arg(long, conflicts_with = "sdk_only")]
    no_sdk: bool,
    /// Run only the SDK path (phase 6, no ratios to the raw path): for profiling it alone.
    #[arg(long)]
    sdk_only: bool,
    /// Run only the parallel-steps workload (phase 8): 16 fanned-out steps against 16
    /// sequential ones per turn, each step a 5 ms sleep.
    #[arg(long, conflicts_with_all = ["sdk_only", "no_sdk"])]
    fan_out_only: bool,
    /// Run only the live compatibility check (phase 9): `--compat-instances` instances of a
    /// workflow in a SQLite file, checked against another version, embedded and (with
    /// `--http`) over HTTP, then the bulk upgrade.
    #[arg(long, conflicts_with_all = ["sdk_only", "no_sdk", "fan_out_only"])]
    compat_only: bool,
    /// Instances in the live check's store.
    #[arg(long, value_name = "N", default_value = "10000", value_parser = positive_usize)]
    compat_instances: usize,
    /// Messages admitted to each instance before the worker starts, in the SDK path's
    /// queued-first variant.
    #[arg(long, value_name = "N", default_value = "100", value_parser = positive)]
    queued: u64,
    /// Turns at c=16 over which allocations are counted, per path.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = positive)]
    alloc_turns: u64,
    /// With `--store postgres`: at most N write sets share a transaction
    /// (`PostgresOptions::max_commit_batch`, the store's default unless given; 1 turns group
    /// commit off).
    #[arg(long, value_name = "N", value_parser = positive_usize)]
    pg_commit_batch: Option<usize>,
    /// With `--store postgres`: batched transactions in flight at once
    /// (`PostgresOptions::commit_pipelines`, the store's default unless given).
    #[arg(long, value_name = "N", value_parser = positive_usize)]
    pg_commit_pipelines: Option<usize>,
}

/// A whole number above zero.
fn positive(v: &str) -> Result<u64, String> {
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{v}` is not a positive whole number"))
}

/// A whole number above zero, as a count of workers.
fn positive_usize(v: &str) -> Result<usize, String> {
    positive(v).and_then(|n| usize::try_from(n).map_err(|_| format!("`{v}` is too large")))
}

/// The default place for database files: the workspace's target directory.
fn default_db_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("bench-tmp")
}

/// A fresh directory for this run's files, removed when dropped.
struct RunDir(PathBuf);

impl RunDir {
    fn create(parent: &Path) -> std::io::Result<Self> {
        let dir = parent.join(format!("turnwise-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir.canonicalize()?))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn run(args: &Args) -> Result<(), BoxError> {
    let parent = args.db_dir.clone().unwrap_or_else(default_db_dir);
    let dir = RunDir::create(&parent)
        .map_err(|e| format!("cannot create a run directory in {}: {e}", parent.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let store_name = match args.store {
        StoreKind::Sqlite => "SqliteStore (synchronous=FULL, WAL synced on the sync thread)",
        StoreKind::SqliteSyncInCommit => {
            "SqliteStore (synchronous=FULL, WAL synced in each COMMIT)"
        }
        StoreKind::Memory => "MemoryStore (no disk)",
        StoreKind::Postgres => "PostgresStore (a fresh schema per phase, 32 connections per node)",
    };
    println!("# turnwise-bench");
    println!();
    println!(
        "{} turns per level, concurrency {:?}, files in {}, allocator: {ALLOCATOR_NAME}",
        args.turns,
        args.concurrency,
        dir.0.display()
    );
    if args.store == StoreKind::Postgres {
        let mut options = turnwise::store::PostgresOptions::default();
        if let Some(n) = args.pg_commit_batch {
            options = options.with_max_commit_batch(n);
        }
        if let Some(n) = args.pg_commit_pipelines {
            options = options.with_commit_pipelines(n);
        }
        println!(
            "group commit: at most {} write sets per transaction, {} batched transactions in \
             flight per node",
            options.max_commit_batch, options.commit_pipelines
        );
        let _ = engine_load::PG_OPTIONS.set(options);
    }
    if let Some(load) = stats::load_average() {
        println!(
            "load average before the run: {load} (on {} cores; other work skews every figure)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    }

    if args.fan_out_only {
        return run_fan_out(&runtime, args, &dir.0, store_name);
    }
    if args.compat_only {
        return run_compat(&runtime, args, &dir.0);
    }
    if args.sdk_only {
        return run_sdk(&runtime, args, &dir.0, store_name, &[], None);
    }
    let mut raw_pg16 = None;
    let raw = if args.store == StoreKind::Postgres {
        println!();
        println!(
            "## 1. Raw PostgreSQL ceiling (1 row per transaction, each waiting for its COMMIT)"
        );
        println!();
        let schema = runtime
            .block_on(turnwise::testing::TestPostgres::start("bench_raw"))
            .ok_or("no PostgreSQL to benchmark (see the line above)")?;
        println!("| clients | transactions | commits/s | p50 commit | p99 commit | max commit |");
        println!("|--------:|-------------:|----------:|-----------:|-----------:|-----------:|");
        let mut both = Vec::new();
        for clients in [1usize, 16] {
            let r = runtime.block_on(raw_pg::run(&schema.url(), args.turns, clients))?;
            println!(
                "| {clients:>7} | {:>12} | {:>9} | {:>10} | {:>10} | {:>10} |",
                r.transactions,
                count(r.commits_per_sec()),
                ms(r.latency.p50),
                ms(r.latency.p99),
                ms(r.latency.max)
            );
            both.push(r);
        }
        raw_pg16 = both.pop();
        both.pop()
    } else if args.store.is_sqlite() {
        println!();
        println!(
            "## 1. Raw SQLite ceiling (WAL, synchronous=FULL, 1 row per transaction, 1 thread)"
        );
        println!();
        let r = raw::run(&dir.0.join("raw.db"), args.turns)?;
        println!("| transactions | commits/s | p50 commit | p99 commit | max commit |");
        println!("|-------------:|----------:|-----------:|-----------:|-----------:|");
        println!(
            "| {:>12} | {:>9} | {:>10} | {:>10} | {:>10} |",
            r.transactions,
            count(r.commits_per_sec()),
            ms(r.latency.p50),
            ms(r.latency.p99),
            ms(r.latency.max)
        );
        Some(r)
    } else {
        None
    };

    println!();
    println!(
        "## 2. Embedded engine over {store_name}: admit → claim → {STEPS} × (operation + checkpoint) → complete"
    );
    println!();
    println!("Each worker owns instance `bench-<i>` (type `bench`, version `v<i>`) and claims only its own version.");
    println!();
    let levels = run_levels(&runtime, args, &dir.0, Transport::Embedded)?;
    let three_nodes = if args.store == StoreKind::Postgres {
        run_three_nodes(&runtime, args, &dir.0, Transport::Embedded)?
    } else {
        None
    };
    println!();
    println!("## 3. Ratios");
    println!();
    if args.store == StoreKind::Postgres {
        print_pg_ratios(
            raw.as_ref(),
            raw_pg16.as_ref(),
            &levels,
            three_nodes.as_ref(),
        );
    } else {
        print_ratios(raw.as_ref(), &levels);
    }

    let mut over_http = None;
    if args.http {
        println!();
        println!(
            "## 3b. Over HTTP: `Http` backend → turnwise server on 127.0.0.1 → engine over {store_name}"
        );
        println!();
        println!(
            "The same workload; every call is a JSON request on a pooled HTTP/1.1 connection to \
             the server's router, in this process and on this runtime."
        );
        println!();
        let http_levels = run_levels(&runtime, args, &dir.0, Transport::Http)?;
        if args.store == StoreKind::Postgres {
            let three = run_three_nodes(&runtime, args, &dir.0, Transport::Http)?;
            println!();
            print_pg_ratios(
                raw.as_ref(),
                raw_pg16.as_ref(),
                &http_levels,
                three.as_ref(),
            );
        }
        println!();
        println!("HTTP beside embedded:");
        println!();
        print_beside(&levels, &http_levels);
        over_http = Some(http_levels);
    }

    if !args.no_sdk {
        run_sdk(
            &runtime,
            args,
            &dir.0,
            store_name,
            &levels,
            over_http.as_deref(),
        )?;
    }

    if let Some(n) = args.memory_check {
        println!();
        println!("## 4. Memory check: {n} turns at c=16 over {store_name}");
        println!();
        let every = (n / 10).max(1);
        let probe = Arc::new(RssProbe::new(every));
        println!("|     turns |        RSS |");
        println!("|----------:|-----------:|");
        let path = dir.0.join("memory-check.db");
        let r = runtime.block_on(engine_load::run_level(
            args.store,
            Transport::Embedded,
            &path,
            16,
            n,
            Some(probe.clone()),
            false,
            1,
        ))?;
        let samples = probe.samples();
        println!();
        println!(
            "{} turns in {:.1} s ({} turns/s, p50 {}, p99 {}).",
            r.turns,
            r.elapsed.as_secs_f64(),
            count(rate(r.turns, r.elapsed)),
            ms(r.latency.p50),
            ms(r.latency.p99)
        );
        match (samples.first(), samples.last()) {
            (Some(&(n0, first)), Some(&(n1, last))) if samples.len() >= 2 => {
                let growth = last as f64 / first as f64;
                let verdict = if growth <= targets::RSS_GROWTH {
                    "flat"
                } else {
                    "GROWING"
                };
                println!(
                    "RSS after warm-up ({n0} turns) {} → at the end ({n1} turns) {}: ratio {growth:.3} \
                     (flat means ≤ {:.2}): **{verdict}**.",
                    mib(first),
                    mib(last),
                    targets::RSS_GROWTH
                );
            }
            _ => println!("Too few RSS samples to judge (no /proc/self/statm, or N < 20)."),
        }
    }
    Ok(())
}

/// Phase 9: the live compatibility check over a store of `--compat-instances` instances.
fn run_compat(runtime: &tokio::runtime::Runtime, args: &Args, dir: &Path) -> Result<(), BoxError> {
    let n = args.compat_instances;
    println!();
    let store = match args.store {
        StoreKind::Postgres => "PostgresStore (a fresh schema)",
        StoreKind::Memory => "MemoryStore",
        _ => "SqliteStore (synchronous=FULL)",
    };
    println!("## 9. The live compatibility check: {n} instances of `order` v1 → v2, {store}");
    println!();
    let path = dir.join("compat.db");
    let r = runtime.block_on(compat_live::run(args.store, &path, n, args.http))?;
    let c = r.counts;
    println!(
        "Made in {:.1} s. Verdicts: {} upgradable, {} upgradable-after-turn, {} resumable, {} pinned.",
        r.populate.as_secs_f64(),
        c.upgradable,
        c.upgradable_after_turn,
        c.resumable,
        c.pinned
    );
    println!();
    println!("| transport | runs | fastest | slowest | instances/s (fastest) | target | verdict |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let target = std::time::Duration::from_secs(5);
    let cold = vec![r.cold];
    let rows = [
        ("embedded", &r.embedded),
        ("embedded, store opened again (cache empty)", &cold),
        ("HTTP", &r.http),
    ];
    for (name, times) in rows {
        let (Some(fast), Some(slow)) = (times.iter().min(), times.iter().max()) else {
            continue;
        };
        println!(
            "| {name} | {} | {} | {} | {} | < 5 s | {} |",
            times.len(),
            ms(*fast),
            ms(*slow),
            count(rate(r.instances as u64, *fast)),
            verdict(*slow < target)
        );
    }
    let (took, moved, refused) = r.upgrade;
    println!();
    println!(
        "Then `all_upgradable` moved {moved} and refused {refused} in {:.2} s ({} moved/s), each \
         checked again in its own durable commit.",
        took.as_secs_f64(),
        count(rate(moved as u64, took))
    );
    Ok(())
}

/// Run every concurrency level over `transport`, printing one table row per level.
fn run_levels(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    dir: &Path,
    transport: Transport,
) -> Result<Vec<LevelResult>, BoxError> {
    println!("|  c | turns | turns/s | steps/s | p50 turn | p99 turn | durable commits/turn | syncs/turn | write sets/turn | journaled/turn | batches/turn | writer CPU/write set |");
    println!("|---:|------:|--------:|--------:|---------:|---------:|---------------------:|-----------:|----------------:|---------------:|-------------:|---------------------:|");
    let mut levels = Vec::new();
    for &c in &args.concurrency {
        let name = match transport {
            Transport::Embedded => format!("engine-c{c}.db"),
            Transport::Http => format!("http-c{c}.db"),
        };
        let path = dir.join(name);
        let r = runtime.block_on(engine_load::run_level(
            args.store, transport, &path, c, args.turns, None, false, 1,
        ))?;
        let per_turn = |n: u64| format!("{:.2}", n as f64 / r.turns.max(1) as f64);
        let (durable, syncs, sets, journaled, batches) = match r.store {
            Some(s) => (
                per_turn(s.durable_batches),
                per_turn(s.syncs),
                per_turn(s.write_sets),
                per_turn(s.journaled),
                per_turn(s.batches),
            ),
            None => (
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
            ),
        };
        let writer = match (r.writer_cpu, r.store) {
            (Some(cpu), Some(s)) if s.write_sets > 0 => {
                format!("{:.1} µs", cpu.as_secs_f64() * 1e6 / s.write_sets as f64)
            }
            _ => "n/a".into(),
        };
        println!(
            "| {:>2} | {:>5} | {:>7} | {:>7} | {:>8} | {:>8} | {:>20} | {:>10} | {:>15} | {:>14} | {:>12} | {:>20} |",
            c,
            r.turns,
            count(rate(r.turns, r.elapsed)),
            count(rate(r.turns * STEPS, r.elapsed)),
            ms(r.latency.p50),
            ms(r.latency.p99),
            durable,
            syncs,
            sets,
            journaled,
            batches,
            writer
        );
        levels.push(r);
    }
    Ok(levels)
}

/// The top concurrency over three nodes (PostgreSQL): one table row, and the result.
fn run_three_nodes(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    dir: &Path,
    transport: Transport,
) -> Result<Option<LevelResult>, BoxError> {
    let Some(&c) = args.concurrency.iter().max() else {
        return Ok(None);
    };
    let r = runtime.block_on(engine_load::run_level(
        args.store,
        transport,
        &dir.join("three-nodes.db"),
        c,
        args.turns,
        None,
        false,
        3,
    ))?;
    println!();
    println!(
        "Three nodes (three engines, each with its own store and connections, one database), \
         c={c} spread over them: {} turns/s, {} steps/s, p50 turn {}, p99 turn {}.",
        count(rate(r.turns, r.elapsed)),
        count(rate(r.turns * STEPS, r.elapsed)),
        ms(r.latency.p50),
        ms(r.latency.p99)
    );
    Ok(Some(r))
}

/// The PostgreSQL targets against the raw ceiling and one node of the same run.
fn print_pg_ratios(
    raw1: Option<&RawResult>,
    raw16: Option<&RawResult>,
    levels: &[LevelResult],
    three: Option<&LevelResult>,
) {
    let at = |c: usize| levels.iter().find(|l| l.concurrency == c);
    println!("| measure | value | target | verdict |");
    println!("|---|---:|---:|---|");
    if let (Some(raw), Some(one)) = (raw1, at(1)) {
        if let Some(s) = one.store {
            let durable = rate(s.durable_batches, one.elapsed);
            let ratio = durable / raw.commits_per_sec();
            println!(
                "| durable commits/s c=1 / raw 1-client commits/s = {} / {} | {ratio:.2} | ≥ {} | {} |",
                count(durable),
                count(raw.commits_per_sec()),
                targets::PG_SEQUENTIAL,
                verdict(ratio >= targets::PG_SEQUENTIAL)
            );
        }
    }
    if let Some(l) = at(16) {
        let steps = rate(l.turns * STEPS, l.elapsed);
        println!(
            "| steps/s, c=16 | {} | ≥ {} | {} |",
            count(steps),
            count(targets::PG_STEPS_C16),
            verdict(steps >= targets::PG_STEPS_C16)
        );
        if let Some(raw) = raw16 {
            println!(
                "| steps/s c=16 / raw 16-client commits/s = {} / {} | {:.2} | (for reference) | |",
                count(steps),
                count(raw.commits_per_sec()),
                steps / raw.commits_per_sec()
            );
        }
    }
    if let Some(t) = three {
        if let Some(one) = at(t.concurrency) {
            let ratio = rate(t.turns, t.elapsed) / rate(one.turns, one.elapsed);
            println!(
                "| three nodes / one node, c={} | {ratio:.2} | ≥ {} | {} |",
                t.concurrency,
                targets::PG_THREE_NODES,
                verdict(ratio >= targets::PG_THREE_NODES)
            );
        }
    }
}

/// Steps/s and turn latency per level, embedded next to HTTP.
fn print_beside(embedded: &[LevelResult], http: &[LevelResult]) {
    println!("|  c | steps/s embedded | steps/s HTTP | HTTP/embedded | p50 embedded | p50 HTTP | p99 embedded | p99 HTTP |");
    println!("|---:|-----------------:|-------------:|--------------:|-------------:|---------:|-------------:|---------:|");
    for h in http {
        let Some(e) = embedded.iter().find(|e| e.concurrency == h.concurrency) else {
            continue;
        };
        let (se, sh) = (
            rate(e.turns * STEPS, e.elapsed),
            rate(h.turns * STEPS, h.elapsed),
        );
        println!(
            "| {:>2} | {:>16} | {:>12} | {:>13} | {:>12} | {:>8} | {:>12} | {:>8} |",
            h.concurrency,
            count(se),
            count(sh),
            format!("{:.2}", if se > 0.0 { sh / se } else { 0.0 }),
            ms(e.latency.p50),
            ms(h.latency.p50),
            ms(e.latency.p99),
            ms(h.latency.p99)
        );
    }
}

/// Phase 8: a turn fanning out 16 steps against 16 sequential steps, per transport and level.
fn run_fan_out(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    dir: &Path,
    store_name: &str,
) -> Result<(), BoxError> {
    let mut transports = vec![Transport::Embedded];
    if args.http {
        transports.push(Transport::Http);
    }
    for transport in transports {
        let (label, tag) = match transport {
            Transport::Embedded => ("embedded", "fan"),
            Transport::Http => ("over HTTP", "fan-http"),
        };
        println!();
        println!("## 8. Parallel steps, {label}, over {store_name}");
        println!();
        println!(
            "A turn of {w} steps, each awaiting a {io} ms sleep: `ctx.fan_out` (all {w} at once, \
             saved in order) against {w} `ctx.step`s awaited one after the other. c clients each \
             `Handle::call` their own instance; one `Worker` with c slots. Wall time per turn is \
             admission to decoded reply.",
            w = fan_out::WIDTH,
            io = fan_out::IO.as_millis()
        );
        println!();
        println!("|  c | turns | fan-out p50 | fan-out p99 | fan-out turns/s | sequential p50 | sequential p99 | sequential turns/s | p50 sequential/fan-out |");
        println!("|---:|------:|------------:|------------:|----------------:|---------------:|---------------:|-------------------:|-----------------------:|");
        for &c in &args.concurrency {
            // Each turn takes at least 5 ms: a tenth of the turns of the other phases.
            let turns = (args.turns / 10).max(c as u64);
            let fan = runtime.block_on(fan_out::level(
                fan_out::fan_out,
                args.store,
                transport,
                &dir.join(format!("{tag}-c{c}.db")),
                c,
                turns,
            ))?;
            let seq = runtime.block_on(fan_out::level(
                fan_out::sequential,
                args.store,
                transport,
                &dir.join(format!("{tag}-seq-c{c}.db")),
                c,
                turns,
            ))?;
            let ratio = seq.latency.p50.as_secs_f64() / fan.latency.p50.as_secs_f64().max(1e-9);
            println!(
                "| {:>2} | {:>5} | {:>11} | {:>11} | {:>15} | {:>14} | {:>14} | {:>18} | {:>22} |",
                fan.concurrency,
                fan.turns,
                ms(fan.latency.p50),
                ms(fan.latency.p99),
                count(rate(fan.turns, fan.elapsed)),
                ms(seq.latency.p50),
                ms(seq.latency.p99),
                count(rate(seq.turns, seq.elapsed)),
                format!("{ratio:.1}"),
            );
        }
    }
    Ok(())
}

/// Phases 6 and 7: the SDK path per transport beside the raw path of this run, its targets,
/// and allocations per turn.
fn run_sdk(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    dir: &Path,
    store_name: &str,
    raw_embedded: &[LevelResult],
    raw_http: Option<&[LevelResult]>,
) -> Result<(), BoxError> {
    let mut transports = vec![(Transport::Embedded, raw_embedded)];
    if let Some(h) = raw_http {
        transports.push((Transport::Http, h));
    }
    for (transport, raw) in &transports {
        let (section, label, tag) = match transport {
            Transport::Embedded => ("6", "embedded", "sdk"),
            Transport::Http => ("6b", "over HTTP", "sdk-http"),
        };
        println!();
        println!("## {section}. The SDK path, {label}, over {store_name}");
        println!();
        println!(
            "`#[workflow]` `checkout` with {STEPS} `#[step]`s; c clients each `Handle::call` on \
             its own instance (admit, then await the reply); one `Worker` with c slots on the one \
             type. Queued first: {} messages per instance admitted, then the worker starts; \
             timed until every reply is observed.",
            args.queued
        );
        println!();
        println!("|  c | calls | steps/s | p50 call | p99 call | raw steps/s | SDK/raw | raw p50 turn | p50 call/raw turn | write sets/turn SDK | raw | queued turns | queued steps/s | queued/call |");
        println!("|---:|------:|--------:|---------:|---------:|------------:|--------:|-------------:|------------------:|----:|----:|-------------:|---------------:|------------:|");
        let mut results = Vec::new();
        for &c in &args.concurrency {
            let call = runtime.block_on(sdk_load::call_level(
                args.store,
                *transport,
                &dir.join(format!("{tag}-call-c{c}.db")),
                c,
                args.turns,
                false,
            ))?;
            let queued = runtime.block_on(sdk_load::queued_level(
                args.store,
                *transport,
                &dir.join(format!("{tag}-queued-c{c}.db")),
                c,
                args.queued,
            ))?;
            let steps = rate(call.turns * STEPS, call.elapsed);
            let queued_steps = rate(queued.turns * STEPS, queued.elapsed);
            let raw_level = raw.iter().find(|l| l.concurrency == c);
            let raw_steps = raw_level.map(|l| rate(l.turns * STEPS, l.elapsed));
            let lat = call.latency.unwrap_or_default();
            println!(
                "| {:>2} | {:>5} | {:>7} | {:>8} | {:>8} | {:>11} | {:>7} | {:>12} | {:>17} | {} | {} | {:>12} | {:>14} | {:>11} |",
                c,
                call.turns,
                count(steps),
                ms(lat.p50),
                ms(lat.p99),
                raw_steps.map_or("n/a".into(), count),
                raw_steps.map_or("n/a".into(), |r| format!("{:.2}", steps / r)),
                raw_level.map_or("n/a".into(), |l| ms(l.latency.p50)),
                raw_level.map_or("n/a".into(), |l| format!(
                    "{:.2}",
                    lat.p50.as_secs_f64() / l.latency.p50.as_secs_f64()
                )),
                call.store.map_or("n/a".into(), |s| format!("{:.2}", s.write_sets as f64 / call.turns.max(1) as f64)),
                raw_level.and_then(|l| l.store).map_or("n/a".into(), |s| format!("{:.2}", s.write_sets as f64 / args.turns.max(1) as f64)),
                queued.turns,
                count(queued_steps),
                format!("{:.2}", queued_steps / steps),
            );
            results.push((call, queued));
        }
        println!();
        print_sdk_targets(raw, &results);
    }

    println!();
    println!(
        "## 7. Allocations per turn, c=16, {} turns per path, embedded over {store_name}",
        args.alloc_turns
    );
    println!();
    println!(
        "Every allocation of the process while the measured turns run (clients, worker, \
         engine, store), counted by a wrapper around the global allocator."
    );
    println!();
    println!("| path | turns | allocations/turn | bytes allocated/turn | bytes/step |");
    println!("|---|---:|---:|---:|---:|");
    let raw = runtime.block_on(engine_load::run_level(
        args.store,
        Transport::Embedded,
        &dir.join("alloc-raw.db"),
        16,
        args.alloc_turns,
        None,
        true,
        1,
    ))?;
    let sdk = runtime.block_on(sdk_load::call_level(
        args.store,
        Transport::Embedded,
        &dir.join("alloc-sdk.db"),
        16,
        args.alloc_turns,
        true,
    ))?;
    for (name, turns, a) in [
        ("raw protocol", raw.turns, raw.allocations),
        ("SDK (`Handle::call`, `Worker`)", sdk.turns, sdk.allocations),
    ] {
        let a = a.unwrap_or_default();
        let per = |n: u64| n as f64 / turns.max(1) as f64;
        println!(
            "| {name} | {turns} | {:.0} | {:.0} | {:.0} |",
            per(a.count),
            per(a.bytes),
            per(a.bytes) / STEPS as f64
        );
    }
    Ok(())
}

/// The SDK path's targets against the raw path of the same run.
fn print_sdk_targets(raw: &[LevelResult], results: &[(SdkResult, SdkResult)]) {
    let steps = |r: &SdkResult| rate(r.turns * STEPS, r.elapsed);
    println!("| measure | value | target | verdict |");
    println!("|---|---:|---:|---|");
    let top = results.iter().max_by_key(|(c, _)| c.concurrency);
    if let Some((call, queued)) = top {
        let c = call.concurrency;
        if let Some(r) = raw.iter().find(|l| l.concurrency == c) {
            let ratio = steps(call) / rate(r.turns * STEPS, r.elapsed);
            println!(
                "| SDK steps/s / raw steps/s, c={c} | {ratio:.2} | ≥ {} | {} |",
                targets::SDK_OVER_RAW,
                verdict(ratio >= targets::SDK_OVER_RAW)
            );
        }
        let ratio = steps(queued) / steps(call);
        println!(
            "| queued-first steps/s / call-and-await steps/s, c={c} | {ratio:.2} | ≥ {} | {} |",
            targets::QUEUED_OVER_CALL,
            verdict(ratio >= targets::QUEUED_OVER_CALL)
        );
        let over = steps(call) / targets::RESTATE_STEPS_PER_SEC;
        println!(
            "| SDK steps/s c={c} / Restate's {} (c=64, recorded) | {over:.1} | ≥ {} | {} |",
            count(targets::RESTATE_STEPS_PER_SEC),
            targets::OVER_RESTATE,
            verdict(over >= targets::OVER_RESTATE)
        );
    }
    let one = results.iter().find(|(c, _)| c.concurrency == 1);
    if let (Some((call, _)), Some(r)) = (one, raw.iter().find(|l| l.concurrency == 1)) {
        let p50 = call.latency.unwrap_or_default().p50;
        let ratio = p50.as_secs_f64() / r.latency.p50.as_secs_f64();
        println!(
            "| p50 call c=1 / raw p50 turn = {} / {} | {ratio:.2} | ≤ {} | {} |",
            ms(p50),
            ms(r.latency.p50),
            targets::SDK_CALL_OVER_TURN,
            verdict(ratio <= targets::SDK_CALL_OVER_TURN)
        );
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "MISSED"
    }
}

fn print_ratios(raw: Option<&RawResult>, levels: &[LevelResult]) {
    let at = |c: usize| levels.iter().find(|l| l.concurrency == c);
    let top = levels.iter().max_by_key(|l| l.concurrency);
    println!("| measure | value | target | verdict |");
    println!("|---|---:|---:|---|");
    let mut notes = Vec::new();

    if let (Some(raw), Some(one)) = (raw, at(1)) {
        let budget = raw.latency.p50 * 6;
        let ratio = one.latency.p50.as_secs_f64() / budget.as_secs_f64();
        println!(
            "| p50 turn latency c=1 / (6 × raw p50 commit) = {} / {} | {ratio:.2} | ≤ {} | {} |",
            ms(one.latency.p50),
            ms(budget),
            targets::LATENCY_RATIO,
            verdict(ratio <= targets::LATENCY_RATIO)
        );
        notes.push(
            "A turn is 9 engine commits: 5 durable (admit, 3 checkpoints, complete) and 4 relaxed \
             (claim, 3 operation starts, written without fsync). Alone on the disk it costs about \
             5 fsyncs plus the engine's reads and JSON work; 6 raw commits is that budget with one \
             commit to spare, and ≤ 1.5 leaves room for the relaxed writes and the reads.",
        );
    }
    if let Some(one) = at(1) {
        if let Some(s) = one.store {
            let per = s.durable_batches as f64 / one.turns.max(1) as f64;
            println!(
                "| durable commits per turn, c=1 | {per:.2} | ≤ {} | {} |",
                targets::DURABLE_PER_TURN,
                verdict(per <= targets::DURABLE_PER_TURN)
            );
            notes.push(
                "Durable commits per turn count the store's synced transactions (durable_batches) \
                 per measured turn. At c=1 nothing is batched, so it is the protocol's fsync count \
                 per turn; at higher c one transaction carries write sets of many workers and the \
                 figure falls below 1. The syncs/turn column counts the WAL syncs themselves: one \
                 sync of the store's sync thread covers every transaction committed before it.",
            );
        }
    }
    let (label, level) = match at(64) {
        Some(l) => ("c=64".to_string(), Some(l)),
        None => match top {
            Some(l) => (format!("c={} (c=64 not run)", l.concurrency), Some(l)),
            None => (String::new(), None),
        },
    };
    if let Some(l) = level {
        let steps = rate(l.turns * STEPS, l.elapsed);
        println!(
            "| steps/s, {label} | {} | ≥ {} | {} |",
            count(steps),
            count(targets::STEPS_PER_SEC),
            verdict(steps >= targets::STEPS_PER_SEC)
        );
        if let Some(raw) = raw {
            let ratio = steps / raw.commits_per_sec();
            println!(
                "| steps/s {label} / raw commits/s = {} / {} | {ratio:.2} | > 1 (group commit) | {} |",
                count(steps),
                count(raw.commits_per_sec()),
                verdict(ratio > 1.0)
            );
            notes.push(
                "Steps/s over raw commits/s: each step is a durable checkpoint, so above 1 the \
                 engine makes more steps durable per second than one writer can fsync \
                 transactions: the store's group commit shares one fsync among the commits of \
                 many workers.",
            );
        }
    }
    println!();
    for n in notes {
        println!("- {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::Parser;

    /// Parse as the command line would, without the program name.
    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("turnwise-bench").chain(args.iter().copied()))
    }

    #[test]
    fn parses_arguments() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.turns, a.concurrency.clone()), (2000, vec![1, 16, 64]));
        let a = parse(&[
            "--turns",
            "10",
            "--concurrency=2,4",
            "--db-dir",
            "/tmp/x",
            "--memory-check",
            "100",
            "--store",
            "memory",
            "--http",
            "--queued",
            "7",
            "--alloc-turns",
            "9",
        ])
        .unwrap();
        assert_eq!((a.queued, a.alloc_turns), (7, 9));
        assert!(a.http);
        assert_eq!(a.turns, 10);
        assert_eq!(a.concurrency, vec![2, 4]);
        assert_eq!(a.db_dir.as_deref(), Some(Path::new("/tmp/x")));
        assert_eq!(a.memory_check, Some(100));
        assert_eq!(a.store, StoreKind::Memory);
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        let help = help.to_string();
        for flag in [
            "--turns",
            "--concurrency",
            "--db-dir",
            "--memory-check",
            "--store",
            "--http",
            "--no-sdk",
            "--sdk-only",
            "--fan-out-only",
            "--queued",
            "--alloc-turns",
        ] {
            assert!(help.contains(flag), "{flag} missing from the help: {help}");
        }
        assert!(help.contains("[default: 2000]"), "{help}");
        assert!(parse(&["--turns"]).is_err());
        assert!(parse(&["--turns", "0"]).is_err());
        assert!(parse(&["--concurrency", "1,x"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
        let a = parse(&["--store", "sqlite-sync-in-commit"]).unwrap();
        assert_eq!(a.store, StoreKind::SqliteSyncInCommit);
        assert_eq!(
            parse(&["--store", "postgres"]).unwrap().store,
            StoreKind::Postgres
        );
        assert!(parse(&["--store", "mysql"]).is_err());
        assert!(parse(&["--no-sdk", "--sdk-only"]).is_err());
        assert!(parse(&["--fan-out-only"]).unwrap().fan_out_only);
        assert!(parse(&["--fan-out-only", "--sdk-only"]).is_err());
        assert!(parse(&["--queued", "0"]).is_err());
    }
}
