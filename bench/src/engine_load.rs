//! Phase 2: the embedded engine under load, `c` workers at a time.
//!
//! Each of the `c` tokio tasks plays a worker that owns one instance, `bench-<i>`: it admits a
//! message, claims the turn (`wait_ms: 0`), runs three steps (`operation` then `checkpoint`
//! each) and completes the turn, then starts over. A turn's latency runs from the admission
//! call to the acknowledged completion.
//!
//! **Claims do not steal.** Every instance has workflow type `bench` and its own version
//! `v<i>`, and task `i` claims only `bench`/`v<i>`, so the turn a task claims is always the one
//! it just admitted. The load is therefore `c` independent instances, each with one turn in
//! flight: the shape of `c` workers each serving its own conversation, and what the store's
//! group commit has to batch across.
//!
//! **Over HTTP** ([`Transport::Http`]) the same workers call the same protocol through the
//! `Http` backend, which talks to the turnwise server's router serving the same engine
//! in-process on a loopback port: the figures then include JSON over HTTP/1.1 both ways, the
//! server's routing and validation, and the client's connection pool.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Barrier;
use turnwise::clock::SystemClock;
use turnwise::protocol::*;
use turnwise::store::{
    PostgresOptions, PostgresStats, PostgresStore, SqliteOptions, SqliteStats, SqliteStore,
    Synchronous,
};
use turnwise::testing::TestPostgres;
use turnwise::{Backend, Engine, EngineConfig, Error, Http, WorkerBackend};
use turnwise_server::{router, serve, ServerOptions, Shutdown};

/// The PostgreSQL stores' group-commit settings from the command line, set before the first
/// store connects (the store's defaults when not set).
pub(crate) static PG_OPTIONS: std::sync::OnceLock<PostgresOptions> = std::sync::OnceLock::new();

use crate::alloc_count::{self, Allocations};
use crate::stats::{mib, rss_bytes, Summary};

/// Steps per turn.
pub const STEPS: u64 = 3;

/// Turns each task runs before measuring starts (opens read connections, fills caches).
const WARMUP_TURNS: u64 = 2;

/// Which store the engine runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// `SqliteStore` with `synchronous=FULL`: the embedded default, durable, the WAL synced
    /// on the store's sync thread.
    Sqlite,
    /// The same, syncing the WAL in each `COMMIT` (`SqliteOptions::sync_thread` off).
    SqliteSyncInCommit,
    /// `MemoryStore`: no disk at all, the engine's CPU ceiling.
    Memory,
    /// `PostgresStore` on the database `TURNWISE_TEST_POSTGRES` names (default
    /// postgres://postgres@127.0.0.1:5432/test), a fresh schema per phase.
    Postgres,
}

impl StoreKind {
    /// Whether this is a SQLite store (with a file, a raw phase and its counters).
    pub fn is_sqlite(self) -> bool {
        matches!(self, StoreKind::Sqlite | StoreKind::SqliteSyncInCommit)
    }
}

/// How the workers reach the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// In-process calls on the [`Engine`].
    Embedded,
    /// The `Http` backend, through a turnwise server on 127.0.0.1 in this process.
    Http,
}

/// The store's cumulative write counters, or their change over a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Write transactions (group commits).
    pub batches: u64,
    /// Of those, transactions that synced to stable storage.
    pub durable_batches: u64,
    /// Write sets (engine commits) applied.
    pub write_sets: u64,
    /// Of those, write sets appended to the store's journal instead of the tables.
    pub journaled: u64,
    /// WAL syncs: the sync thread's, or without it one per durable transaction.
    pub syncs: u64,
}

impl From<SqliteStats> for Counters {
    fn from(s: SqliteStats) -> Self {
        Self {
            batches: s.batches,
            durable_batches: s.durable_batches,
            write_sets: s.write_sets,
            journaled: s.journaled,
            syncs: if s.syncs > 0 {
                s.syncs
            } else {
                s.durable_batches
            },
        }
    }
}

impl Counters {
    pub(crate) fn since(self, before: Counters) -> Counters {
        Counters {
            batches: self.batches - before.batches,
            durable_batches: self.durable_batches - before.durable_batches,
            write_sets: self.write_sets - before.write_sets,
            journaled: self.journaled - before.journaled,
            syncs: self.syncs - before.syncs,
        }
    }
}

/// An engine for one phase, with a handle on its SQLite store for the counters, and the
/// backend the workers call (the engine itself, or an `Http` client of a server over it).
pub struct Setup {
    pub(crate) engine: Engine,
    sqlite: Option<SqliteStore>,
    /// Every node's store (PostgreSQL only).
    postgres: Vec<PostgresStore>,
    pub(crate) backend: Arc<dyn WorkerBackend>,
    /// One backend per node: worker `i` uses node `i % nodes`.
    pub(crate) nodes: Vec<Arc<dyn WorkerBackend>>,
    /// Stops the loopback servers (HTTP only) when the phase ends.
    servers: Vec<Shutdown>,
    /// The phase's schema, dropped after the stores.
    _schema: Option<TestPostgres>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        for s in &self.servers {
            s.trigger();
        }
    }
}

impl Setup {
    /// An engine over a fresh store of `kind` (a SQLite file at `path`, created), reached
    /// through `transport`.
    pub async fn open(kind: StoreKind, path: &Path, transport: Transport) -> Result<Self, Error> {
        Self::open_nodes(kind, path, transport, 1).await
    }

    /// [`Setup::open`] with `nodes` engines, each over a store of its own on one database (as
    /// `nodes` processes would be; PostgreSQL only, 1 for the other stores), and over HTTP each
    /// behind a server of its own.
    pub async fn open_nodes(
        kind: StoreKind,
        path: &Path,
        transport: Transport,
        nodes: usize,
    ) -> Result<Self, Error> {
        if kind == StoreKind::Postgres {
            return Self::open_postgres(transport, nodes.max(1)).await;
        }
        let (engine, sqlite) = match kind {
            StoreKind::Sqlite | StoreKind::SqliteSyncInCommit => {
                let options = SqliteOptions::default()
                    .with_synchronous(Synchronous::Full)
                    .with_sync_thread(kind == StoreKind::Sqlite);
                let store = SqliteStore::open_with(path, options).await?;
                let engine = Engine::new(store.clone(), SystemClock, EngineConfig::default());
                (engine, Some(store))
            }
            StoreKind::Memory | StoreKind::Postgres => (Engine::in_memory(), None),
        };
        let (backend, servers) = reach(&engine, transport).await?;
        Ok(Self {
            engine,
            sqlite,
            postgres: Vec::new(),
            nodes: vec![backend.clone()],
            backend,
            servers: servers.into_iter().collect(),
            _schema: None,
        })
    }

    /// Connect `nodes` stores (and engines) to a fresh schema of the test database.
    async fn open_postgres(transport: Transport, nodes: usize) -> Result<Self, Error> {
        let schema = TestPostgres::start("bench")
            .await
            .ok_or_else(|| Error::store("no PostgreSQL to benchmark (see the line above)"))?;
        let mut stores = Vec::with_capacity(nodes);
        let mut engines = Vec::with_capacity(nodes);
        let mut backends = Vec::with_capacity(nodes);
        let mut servers = Vec::new();
        for _ in 0..nodes {
            let mut options = schema.options().with_pool_size(32);
            if let Some(given) = PG_OPTIONS.get() {
                options = options
                    .with_max_commit_batch(given.max_commit_batch)
                    .with_commit_pipelines(given.commit_pipelines);
            }
            let store = PostgresStore::connect_with(&schema.url(), options).await?;
            let engine = Engine::new(store.clone(), SystemClock, EngineConfig::default());
            let (backend, server) = reach(&engine, transport).await?;
            stores.push(store);
            engines.push(engine);
            backends.push(backend);
            servers.extend(server);
        }
        Ok(Self {
            engine: engines.swap_remove(0),
            sqlite: None,
            postgres: stores,
            backend: backends[0].clone(),
            nodes: backends,
            servers,
            _schema: Some(schema),
        })
    }

    pub(crate) fn counters(&self) -> Option<Counters> {
        if let Some(s) = &self.sqlite {
            return Some(s.stats().into());
        }
        if self.postgres.is_empty() {
            return None;
        }
        let mut sum = Counters::default();
        for s in &self.postgres {
            let c = Counters::from(s.stats());
            sum.batches += c.batches;
            sum.durable_batches += c.durable_batches;
            sum.write_sets += c.write_sets;
            sum.syncs += c.syncs;
        }
        Some(sum)
    }
}

/// The backend workers use to reach `engine`, and the server to stop (HTTP).
pub(crate) async fn reach(
    engine: &Engine,
    transport: Transport,
) -> Result<(Arc<dyn WorkerBackend>, Option<Shutdown>), Error> {
    Ok(match transport {
        Transport::Embedded => (Arc::new(engine.clone()), None),
        Transport::Http => {
            let (http, shutdown) = serve_loopback(engine.clone()).await?;
            (Arc::new(http), Some(shutdown))
        }
    })
}

/// PostgreSQL: a batch is a database transaction (one write set's, or a group commit's);
/// durable ones wait for the WAL flush (the server may flush several at once), so `syncs`
/// counts durable transactions.
impl From<PostgresStats> for Counters {
    fn from(s: PostgresStats) -> Self {
        Counters {
            batches: s.transactions,
            durable_batches: s.durable_transactions,
            write_sets: s.durable_commits + s.relaxed_commits,
            journaled: 0,
            syncs: s.durable_transactions,
        }
    }
}

/// Serve `engine` with the turnwise server's router on 127.0.0.1 (a free port), in this
/// process, and answer a client of it.
async fn serve_loopback(engine: Engine) -> Result<(Http, Shutdown), Error> {
    let io = |e: std::io::Error| Error::transport(format!("loopback server: {e}"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let shutdown = Shutdown::new();
    let options = ServerOptions::default().with_shutdown(shutdown.clone());
    let app = router(engine, options);
    let stop = shutdown.clone();
    tokio::spawn(async move { serve(listener, app, stop.wait_owned()).await });
    let http = Http::connect(format!("http://{addr}"), None)?;
    Ok((http, shutdown))
}

/// Print the process's RSS every `every` measured turns, and keep the samples.
pub struct RssProbe {
    every: u64,
    done: AtomicU64,
    samples: Mutex<Vec<(u64, u64)>>,
}

impl RssProbe {
    /// A probe sampling every `every` turns (at least 1).
    pub fn new(every: u64) -> Self {
        Self {
            every: every.max(1),
            done: AtomicU64::new(0),
            samples: Mutex::new(Vec::new()),
        }
    }

    fn turn_done(&self) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(self.every) {
            if let Some(rss) = rss_bytes() {
                println!("| {n:>9} | {:>10} |", mib(rss));
                self.samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((n, rss));
            }
        }
    }

    /// `(turns done, RSS bytes)` samples, in order.
    pub fn samples(&self) -> Vec<(u64, u64)> {
        let mut s = self
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        s.sort_unstable();
        s
    }
}

/// What one concurrency level measured.
#[derive(Clone, Debug)]
pub struct LevelResult {
    /// Concurrent workers.
    pub concurrency: usize,
    /// Measured turns (warm-up excluded).
    pub turns: u64,
    /// Wall time of the measured turns.
    pub elapsed: Duration,
    /// Turn latency, admission to acknowledged completion.
    pub latency: Summary,
    /// The store's counters over the measured turns (SQLite only).
    pub store: Option<Counters>,
    /// CPU time the store's writer thread used over the measured turns (SQLite on Linux only).
    /// Less sensitive to a noisy host than wall-clock rates, so it is the figure to compare
    /// when judging a change to the write path.
    pub writer_cpu: Option<Duration>,
    /// Allocations over the measured turns, when they were counted.
    pub allocations: Option<Allocations>,
}

/// Total CPU time so far of this process's threads named like the SQLite store's writer
/// (`/proc/self/task/*/schedstat`, nanoseconds on the CPU); `None` where that is unavailable.
fn writer_cpu() -> Option<Duration> {
    let mut total = 0u64;
    let mut found = false;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // Thread names are cut to 15 bytes: "turnwise-sqlite-writer" reads "turnwise-sqlite".
        if !comm.starts_with("turnwise-sqlite") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        found = true;
    }
    found.then(|| Duration::from_nanos(total))
}

/// One worker's identity.
struct Worker {
    name: String,
    instance: String,
    workflow: WorkflowRef,
}

/// Run `turns` turns spread over `concurrency` workers on a fresh engine reached through
/// `transport`, and measure them.
#[allow(clippy::too_many_arguments)]
pub async fn run_level(
    kind: StoreKind,
    transport: Transport,
    path: &Path,
    concurrency: usize,
    turns: u64,
    probe: Option<Arc<RssProbe>>,
    count_allocations: bool,
    nodes: usize,
) -> Result<LevelResult, Error> {
    let setup = Setup::open_nodes(kind, path, transport, nodes).await?;
    let engine = setup.engine.clone();
    let c = concurrency.max(1);
    let mut workers = Vec::with_capacity(c);
    for i in 0..c {
        let w = Worker {
            name: format!("worker-{i}"),
            instance: format!("bench-{i}"),
            workflow: WorkflowRef::new("bench", format!("v{i}")),
        };
        engine
            .create_instance(CreateInstanceRequest {
                id: w.instance.clone(),
                workflow_type: w.workflow.workflow_type.clone(),
                version: w.workflow.version.clone(),
                state: json!({"turns": 0}),
                lease_ms: None,
                max_attempts: None,
                on_exhausted: None,
            })
            .await?;
        workers.push(w);
    }

    // Two barriers: everyone warmed up → the counters are read → everyone starts.
    let warmed = Arc::new(Barrier::new(c + 1));
    let go = Arc::new(Barrier::new(c + 1));
    let mut tasks = Vec::with_capacity(c);
    for (i, w) in workers.into_iter().enumerate() {
        let share = turns / c as u64 + u64::from((i as u64) < turns % c as u64);
        let backend = setup.nodes[i % setup.nodes.len()].clone();
        let (warmed, go, probe) = (warmed.clone(), go.clone(), probe.clone());
        tasks.push(tokio::spawn(async move {
            let mut k = 0;
            let mut failure = None;
            for _ in 0..WARMUP_TURNS {
                k += 1;
                if let Err(e) = one_turn(&*backend, &w, k).await {
                    failure = Some(e);
                    break;
                }
            }
            warmed.wait().await;
            go.wait().await;
            if let Some(e) = failure {
                return Err(e);
            }
            let mut samples = Vec::with_capacity(share as usize);
            for _ in 0..share {
                k += 1;
                samples.push(one_turn(&*backend, &w, k).await?);
                if let Some(p) = &probe {
                    p.turn_done();
                }
            }
            Ok::<_, Error>(samples)
        }));
    }
    warmed.wait().await;
    let before = setup.counters();
    let cpu_before = writer_cpu();
    if count_allocations {
        alloc_count::start();
    }
    let started = Instant::now();
    go.wait().await;
    let (mut samples, failure) = crate::stats::gather(tasks, "worker").await;
    let elapsed = started.elapsed();
    let allocations = count_allocations.then(alloc_count::stop);
    let writer_cpu = writer_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    if let Some(e) = failure {
        return Err(e);
    }
    let store = setup.counters().zip(before).map(|(a, b)| a.since(b));
    Ok(LevelResult {
        concurrency: c,
        turns: samples.len() as u64,
        elapsed,
        latency: Summary::of(&mut samples),
        store,
        writer_cpu,
        allocations,
    })
}

/// One full turn on the worker's own instance: admit, claim, three steps, complete.
async fn one_turn(engine: &dyn Backend, w: &Worker, k: u64) -> Result<Duration, Error> {
    let started = Instant::now();
    engine
        .send_message(MessageRequest {
            workflow_id: w.instance.clone(),
            id: format!("m-{k}"),
            message: json!({"k": k}),
            origin: None,
        })
        .await?;
    let claim = ClaimRequest {
        worker: w.name.clone(),
        workflows: vec![w.workflow.clone()],
        wait_ms: 0,
        include_execution_credential: None,
    };
    // Only this task claims this version, so the turn just admitted is ready now; an empty
    // answer could only come from a clock step backwards, so ask again a few times.
    let mut task = None;
    for _ in 0..100 {
        task = engine.claim(claim.clone()).await?.task;
        if task.is_some() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let task = task.ok_or_else(|| {
        Error::store(format!(
            "turn m-{k} of `{}` was never claimable",
            w.instance
        ))
    })?;
    let lease = Lease {
        workflow_id: w.instance.clone(),
        turn: task.turn.number,
        token: task.token,
    };
    for position in 0..STEPS as u32 {
        let key = format!("s{position}");
        engine
            .operation(OperationRequest {
                lease: lease.clone(),
                position,
                key: key.clone(),
                kind: OperationKind::Step,
                timeout_ms: 300_000,
                heartbeat_timeout_ms: None,
            })
            .await?;
        engine
            .checkpoint(CheckpointRequest {
                lease: lease.clone(),
                position,
                key,
                kind: CheckpointKind::Step,
                output: json!({"step": position, "k": k}),
                delay_ms: None,
            })
            .await?;
    }
    engine
        .complete(CompleteRequest {
            lease,
            state: json!({"turns": k}),
            result: json!(k),
            continuation: None,
            usage: None,
            results: None,
        })
        .await?;
    Ok(started.elapsed())
}
