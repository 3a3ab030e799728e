//! Helpers shared by the runtime's test files.

#![allow(dead_code)]

use std::process::Child;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use turnwise::protocol::OnExhausted;
use turnwise::store::InstanceRecord;

/// Bounds every real-time wait of these tests.
pub const GUARD: Duration = Duration::from_secs(10);

/// Poll `check` until it returns `Some`, for at most [`GUARD`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let give_up = tokio::time::Instant::now() + GUARD;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The instance record the store tests start from: type `order` version `v1`, at `revision`,
/// with no turns yet.
pub fn instance_record(ns: &str, id: &str, revision: u64) -> InstanceRecord {
    InstanceRecord {
        ns: ns.into(),
        id: id.into(),
        workflow_type: "order".into(),
        version: "v1".into(),
        state: serde_json::json!({"revision": revision}),
        lease_ms: 60_000,
        max_attempts: 3,
        on_exhausted: OnExhausted::Block,
        paused: false,
        created_at_ms: 1_000,
        updated_at_ms: 1_000 + revision as i64,
        revision,
        next_turn: 1,
        pending: Vec::new(),
        completed_turns: 0,
        history_through: 0,
        history_pruned_through: 0,
        due_at_ms: None,
        epoch: "e1".into(),
        outbox: Vec::new(),
        schedules: Vec::new(),
        events: Vec::new(),
    }
}

/// The name the test harness lists test `name` of the module at `module` (its
/// `module_path!()`) under: the path without the binary's crate name, e.g. `crash::crash_child`.
/// A test that re-runs this binary as a child selects the child with
/// `--exact <this name> --ignored`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// A backend of the test's own that forwards every route to an engine and counts the reads of
/// a turn, as a user's wrapper would. The wrapper may add fields (each starting at its
/// default), [`Backend`](turnwise::Backend) methods (the second block) and
/// [`WorkerBackend`](turnwise::WorkerBackend) methods (an optional third block; without it the
/// wrapper keeps the defaults, made of the routes).
macro_rules! forwarding_backend {
    ($name:ident { $($field:ident: $ty:ty),* } { $($extra:tt)* } $({ $($worker:tt)* })?) => {
        #[derive(Clone)]
        struct $name {
            engine: turnwise::Engine,
            /// Calls of `Backend::turn`.
            reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
            $($field: $ty,)*
        }

        impl $name {
            fn new(engine: turnwise::Engine) -> Self {
                Self {
                    engine,
                    reads: std::sync::Arc::default(),
                    $($field: Default::default(),)*
                }
            }
        }

        #[async_trait::async_trait]
        impl turnwise::Backend for $name {
            async fn create_instance(
                &self,
                req: CreateInstanceRequest,
            ) -> turnwise::Result<WorkflowInstance> {
                self.engine.create_instance(req).await
            }
            async fn send_message(&self, req: MessageRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.send_message(req).await
            }
            async fn get_instance(&self, id: &str) -> turnwise::Result<WorkflowInstance> {
                self.engine.get_instance(id).await
            }
            async fn runs(&self, query: RunsQuery) -> turnwise::Result<RunPage> {
                self.engine.runs(query).await
            }
            async fn run(&self, run_id: &str) -> turnwise::Result<WorkflowRun> {
                self.engine.run(run_id).await
            }
            async fn run_stats(&self, hours: u32) -> turnwise::Result<RunStats> {
                self.engine.run_stats(hours).await
            }
            async fn list_instances(
                &self,
                query: ListInstancesQuery,
            ) -> turnwise::Result<InstanceList> {
                self.engine.list_instances(query).await
            }
            async fn instance_inbox(&self, query: InboxQuery) -> turnwise::Result<InboxResponse> {
                self.engine.instance_inbox(query).await
            }
            async fn type_inbox(
                &self,
                query: TypeInboxQuery,
            ) -> turnwise::Result<TypeInboxResponse> {
                self.engine.type_inbox(query).await
            }
            async fn history(&self, query: HistoryQuery) -> turnwise::Result<HistoryResponse> {
                self.engine.history(query).await
            }
            async fn turn(&self, query: TurnQuery) -> turnwise::Result<WorkflowTurn> {
                self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.engine.turn(query).await
            }
            async fn control(&self, req: ControlRequest) -> turnwise::Result<WorkflowInstance> {
                self.engine.control(req).await
            }
            async fn delete_instance(
                &self,
                req: DeleteRequest,
            ) -> turnwise::Result<DeleteResponse> {
                self.engine.delete_instance(req).await
            }
            async fn claim(&self, req: ClaimRequest) -> turnwise::Result<ClaimResponse> {
                self.engine.claim(req).await
            }
            async fn operation(&self, req: OperationRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.operation(req).await
            }
            async fn progress(&self, req: ProgressRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.progress(req).await
            }
            async fn checkpoint(&self, req: CheckpointRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.checkpoint(req).await
            }
            async fn wait_signal(&self, req: WaitSignalRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.wait_signal(req).await
            }
            async fn signal(&self, req: SignalRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.signal(req).await
            }
            async fn complete(&self, req: CompleteRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.complete(req).await
            }
            async fn fail(&self, req: FailRequest) -> turnwise::Result<WorkflowTurn> {
                self.engine.fail(req).await
            }
            async fn heartbeat(&self, lease: Lease) -> turnwise::Result<WorkflowTurn> {
                self.engine.heartbeat(lease).await
            }
            $($extra)*
        }

        #[async_trait::async_trait]
        impl turnwise::WorkerBackend for $name {
            $($($worker)*)?
        }
    };
}
pub(crate) use forwarding_backend;

/// xorshift64*: random enough for kill delays and jitter, and reproducible from its seed.
pub struct Rng {
    seed: u64,
    state: u64,
}

impl Rng {
    /// A generator from `seed` (xorshift never leaves zero: a zero seed counts as one).
    pub fn new(seed: u64) -> Self {
        let seed = seed.max(1);
        Self { seed, state: seed }
    }

    /// The seed it started from, to name in a failure.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A generator seeded from the environment variable `env`, else from the clock, with the
    /// seed printed so that a failure of `test` can be replayed.
    pub fn seeded(test: &str, env: &str) -> Self {
        let seed = std::env::var(env)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(clock_seed);
        println!("{test}: seed {seed} (rerun with {env}={seed})");
        Self::new(seed)
    }

    /// Where the generator stands: a seed that goes on from here.
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `lo..=hi`, uniform enough.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// A seed from the clock and the process id.
pub fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id())
}

/// A child process, killed and reaped when this drops (the parent unwound, say), so that no
/// test leaves one running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
