//! The live compatibility check (`Backend::compat_live`) over a store of many instances, and
//! the bulk upgrade after it.
//!
//! The store: `n` instances of `order` v1 in a SQLite file (synchronous=FULL; or with `--store`
//! a fresh PostgreSQL schema, or memory), made through
//! the protocol by 32 tasks, with the engine's clock stopped so that nothing they leave waiting
//! becomes due (and no lease runs out). By `i % 20`: 8 in 20 idle, 1 with a message queued and never claimed, 5 asleep
//! mid-turn (`reserve`, `settle`), 3 waiting for a signal (`reserve`, `approval`), 2 backing
//! off after a failed attempt (`reserve`), 1 past a step v2 does not make (`reserve`, `wrap`,
//! `settle`: pinned). The check of `order` → v2 is timed three times embedded, once on the store
//! opened again (as after a restart: its cache of decoded instances empty), three times over
//! HTTP with `--http`; then `all_upgradable` moves the movable ones, timed once.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use turnwise::clock::ManualClock;
use turnwise::manifest::{Alt, Call, CallKind, Manifest, Node};
use turnwise::protocol::*;
use turnwise::store::{MemoryStore, PostgresStore, SqliteOptions, SqliteStore, Store, Synchronous};
use turnwise::testing::TestPostgres;
use turnwise::{Backend, Engine, EngineConfig, Error};

use crate::engine_load::{reach, StoreKind, Transport};

/// Tasks that make the instances.
const MAKERS: usize = 32;
/// Timed runs of the check per transport.
pub const RUNS: usize = 3;

/// What the phase measured.
pub struct CompatResult {
    /// Instances in the store.
    pub instances: usize,
    /// How long making them took.
    pub populate: Duration,
    /// Each timed run of the check, embedded.
    pub embedded: Vec<Duration>,
    /// The first check after the store was opened again (its cache empty), embedded.
    pub cold: Duration,
    /// Each timed run of the check over HTTP (with `--http`).
    pub http: Vec<Duration>,
    /// The check's counts.
    pub counts: VerdictCounts,
    /// The bulk upgrade's wall time, and how many it moved and refused.
    pub upgrade: (Duration, usize, usize),
}

/// The class of instance `i`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Idle,
    Queued,
    Asleep,
    Signal,
    Backoff,
    Gift,
}

fn class(i: usize) -> Class {
    match i % 20 {
        0..=7 => Class::Idle,
        8 => Class::Queued,
        9..=13 => Class::Asleep,
        14..=16 => Class::Signal,
        17..=18 => Class::Backoff,
        _ => Class::Gift,
    }
}

fn id(i: usize) -> String {
    format!("order-{i:06}")
}

/// `order`'s manifest of `version`: `reserve`, an optional `wrap` (v1), an optional wait for
/// `approval`, `settle`, then `last`.
fn manifest(version: &str, wrap: bool, last: &str) -> Manifest {
    let call = |kind, key: &str| Node::Call(Call::new(kind, key, "src/order.rs:1"));
    let optional = |node| {
        Node::Alt(Alt {
            cond: String::new(),
            arms: vec![node, Node::Seq(Vec::new())],
        })
    };
    let mut parts = vec![call(CallKind::Step, "reserve")];
    if wrap {
        parts.push(optional(call(CallKind::Step, "wrap")));
    }
    let wait = Call::new(CallKind::Signal, "approval", "src/order.rs:2").signal("approval");
    parts.push(optional(Node::Call(wait)));
    parts.push(call(CallKind::Sleep, "settle"));
    parts.push(call(CallKind::Step, last));
    let mut m = Manifest::new("order", version, Node::Seq(parts));
    m.schemas.state = json!({"type": "object", "properties": {"charged": {"type": "integer"}}});
    m.schemas.message = json!({"type": "object", "properties": {"amount": {"type": "integer"}}});
    m
}

async fn register(engine: &Engine) -> Result<(), Error> {
    for m in [
        manifest("v1", true, "charge"),
        manifest("v2", false, "charge_with_tax"),
    ] {
        let doc = SchemaDocument {
            workflow_type: "order".into(),
            version: m.version.clone(),
            message: m.schemas.message.clone(),
            signals: [("approval".to_owned(), Value::Null)].into(),
            state: m.schemas.state.clone(),
            reply: Value::Null,
            manifest: Some(m),
        };
        engine.register_schema(&doc).await?;
    }
    Ok(())
}

/// Create instances `t`, `t + MAKERS`, … below `n`, and admit their messages.
async fn create(engine: Engine, t: usize, n: usize) -> Result<(), Error> {
    for i in (t..n).step_by(MAKERS) {
        engine
            .create_instance(CreateInstanceRequest {
                id: id(i),
                workflow_type: "order".into(),
                version: "v1".into(),
                state: json!({"charged": 0}),
                lease_ms: None,
                max_attempts: None,
                on_exhausted: None,
            })
            .await?;
        if class(i) != Class::Idle && class(i) != Class::Queued {
            let msg = MessageRequest {
                workflow_id: id(i),
                id: "m-1".into(),
                message: json!({"amount": 100}),
                origin: None,
            };
            engine.send_message(msg).await?;
        }
    }
    Ok(())
}

/// Admit the messages of the instances whose turn stays queued, never claimed: `t`, `t +
/// MAKERS`, … below `n`.
async fn queue(engine: Engine, t: usize, n: usize) -> Result<(), Error> {
    for i in (t..n)
        .step_by(MAKERS)
        .filter(|i| class(*i) == Class::Queued)
    {
        let msg = MessageRequest {
            workflow_id: id(i),
            id: "m-1".into(),
            message: json!({"amount": 100}),
            origin: None,
        };
        engine.send_message(msg).await?;
    }
    Ok(())
}

/// Claim ready turns until none is left, leaving each in its instance's class's state.
async fn drive(engine: Engine) -> Result<(), Error> {
    let claim = ClaimRequest {
        worker: "bench".into(),
        workflows: vec![WorkflowRef::new("order", "v1")],
        wait_ms: 0,
        include_execution_credential: None,
    };
    while let Some(task) = engine.claim(claim.clone()).await?.task {
        let i: usize = task.turn.workflow_id[6..].parse().unwrap_or_default();
        let lease = Lease {
            workflow_id: task.turn.workflow_id.clone(),
            turn: task.turn.number,
            token: task.token.clone(),
        };
        let save = |position: u32, key: &str, kind: CheckpointKind| CheckpointRequest {
            lease: lease.clone(),
            position,
            key: key.into(),
            kind,
            output: if kind == CheckpointKind::Step {
                json!(100)
            } else {
                Value::Null
            },
            delay_ms: (kind == CheckpointKind::Sleep).then_some(3_600_000),
        };
        engine
            .checkpoint(save(0, "reserve", CheckpointKind::Step))
            .await?;
        match class(i) {
            Class::Asleep => {
                engine
                    .checkpoint(save(1, "settle", CheckpointKind::Sleep))
                    .await?;
            }
            Class::Gift => {
                engine
                    .checkpoint(save(1, "wrap", CheckpointKind::Step))
                    .await?;
                engine
                    .checkpoint(save(2, "settle", CheckpointKind::Sleep))
                    .await?;
            }
            Class::Signal => {
                let wait = WaitSignalRequest {
                    lease: lease.clone(),
                    position: 1,
                    key: "approval".into(),
                    name: "approval".into(),
                    timeout_ms: 86_400_000,
                };
                engine.wait_signal(wait).await?;
            }
            _ => {
                let fail = FailRequest {
                    lease: lease.clone(),
                    error: "the payment provider timed out".into(),
                    non_retryable: false,
                    retry_at_ms: None,
                    usage: None,
                    results: None,
                    mismatch: None,
                };
                engine.fail(fail).await?;
            }
        }
    }
    Ok(())
}

/// Run `f` on `MAKERS` tasks, each with an engine clone and its index.
async fn on_tasks<F, Fut>(engine: &Engine, f: F) -> Result<(), Error>
where
    F: Fn(Engine, usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..MAKERS {
        tasks.spawn(f(engine.clone(), t));
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| Error::store(format!("a task failed: {e}")))??;
    }
    Ok(())
}

/// Time the check `RUNS` times through `backend`; answer the times and the last answer.
async fn time_checks(backend: &dyn Backend) -> Result<(Vec<Duration>, LiveCompat), Error> {
    let mut times = Vec::with_capacity(RUNS);
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let check = backend
            .compat_live(LiveCompatQuery {
                workflow_type: "order".into(),
                to_version: "v2".into(),
            })
            .await?;
        times.push(started.elapsed());
        last = Some(check);
    }
    last.map(|c| (times, c))
        .ok_or_else(|| Error::store("no run of the check"))
}

/// Where the phase's instances are kept: a SQLite file, a fresh PostgreSQL schema (kept until
/// the phase ends), or memory.
struct Place {
    kind: StoreKind,
    path: std::path::PathBuf,
    postgres: Option<TestPostgres>,
    memory: Option<Arc<MemoryStore>>,
}

impl Place {
    async fn new(kind: StoreKind, path: &Path) -> Result<Self, Error> {
        let postgres = match kind {
            StoreKind::Postgres => Some(
                TestPostgres::start("bench_compat")
                    .await
                    .ok_or_else(|| Error::store("no PostgreSQL to benchmark (see above)"))?,
            ),
            _ => None,
        };
        let memory = (kind == StoreKind::Memory).then(|| Arc::new(MemoryStore::new()));
        Ok(Place {
            kind,
            path: path.to_owned(),
            postgres,
            memory,
        })
    }

    /// The store, opened (again): a new handle, with an empty cache, on the same data.
    async fn open(&self) -> Result<Arc<dyn Store>, Error> {
        if let Some(schema) = &self.postgres {
            let options = schema.options().with_pool_size(16);
            return Ok(Arc::new(
                PostgresStore::connect_with(&schema.url(), options).await?,
            ));
        }
        if let Some(memory) = &self.memory {
            return Ok(memory.clone());
        }
        let options = SqliteOptions::default()
            .with_synchronous(Synchronous::Full)
            .with_sync_thread(self.kind == StoreKind::Sqlite);
        Ok(Arc::new(SqliteStore::open_with(&self.path, options).await?))
    }
}

/// The phase: make `n` instances in a store of `kind` (a SQLite file at `path`), time the
/// check (and over HTTP when `http`), then the bulk upgrade.
pub async fn run(
    kind: StoreKind,
    path: &Path,
    n: usize,
    http: bool,
) -> Result<CompatResult, Error> {
    let place = Place::new(kind, path).await?;
    let clock = ManualClock::default();
    let open = |store: Arc<dyn Store>| {
        Engine::from_parts(store, Arc::new(clock.clone()), EngineConfig::default())
    };
    let engine = open(place.open().await?);
    register(&engine).await?;
    let started = Instant::now();
    on_tasks(&engine, move |e, t| create(e, t, n)).await?;
    on_tasks(&engine, |e, _| drive(e)).await?;
    on_tasks(&engine, move |e, t| queue(e, t, n)).await?;
    let populate = started.elapsed();
    let (embedded, check) = time_checks(&engine).await?;
    if check.checked as usize != n {
        return Err(Error::store(format!(
            "the check saw {} instances of {n}",
            check.checked
        )));
    }
    // A restarted process: the store opened again, its cache of decoded instances empty.
    drop(engine);
    let engine = open(place.open().await?);
    let started = Instant::now();
    let reopened = engine
        .compat_live(LiveCompatQuery {
            workflow_type: "order".into(),
            to_version: "v2".into(),
        })
        .await?;
    let cold = started.elapsed();
    if reopened.counts != check.counts {
        return Err(Error::store("the reopened store's check differs"));
    }
    let mut over_http = Vec::new();
    if http {
        let (backend, server) = reach(&engine, Transport::Http).await?;
        let backend: Arc<dyn Backend> = backend;
        over_http = time_checks(&*backend).await?.0;
        if let Some(server) = server {
            server.trigger();
        }
    }
    let started = Instant::now();
    let moved = engine
        .upgrade_instances(UpgradeRequest::all_upgradable("order", "v2").by("bench"))
        .await?;
    let upgrade = (started.elapsed(), moved.upgraded.len(), moved.refused.len());
    Ok(CompatResult {
        instances: n,
        populate,
        embedded,
        cold,
        http: over_http,
        counts: check.counts,
        upgrade,
    })
}
