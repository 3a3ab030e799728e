//! The PostgreSQL store; its design is documented on [`PostgresStore`].

#![warn(clippy::too_many_lines)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, NoTls, Row};

use turnwise_core::store::support::{clamp, decode, decode_run, unreadable, Int64Columns};
use turnwise_core::store::*;

use turnwise_core::protocol::*;

mod commit;
mod notices;
mod schema;
mod testing;
mod transact;

pub use testing::TestPostgres;
pub use transact::{Joined, StepTransactions, Transaction, TransactionError};

use notices::Notices;

/// Settings of a [`PostgresStore`]; `PostgresOptions::default()` suits most deployments.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The schema (namespace of tables) the store keeps its tables in, created if missing.
    /// `None` (the default) uses the connection's `search_path`, normally `public`. Letters,
    /// digits and `_`, starting with a letter or `_`, at most 63 bytes. Stores in different
    /// schemas of one database are independent, and do not wake each other.
    pub schema: Option<String>,
    /// Connections kept open for commits and reads (one more listens for other processes'
    /// commits). Default 16.
    pub pool_size: usize,
    /// How long to wait for a connection, to the database or from a busy pool. Default 10 s.
    pub connect_timeout: Duration,
    /// Group commit: at most this many write sets waiting at the same moment share one
    /// database transaction (each keeps its own conditional check and its own answer; all are
    /// answered after the shared `COMMIT`). 1 gives every write set a transaction of its own.
    /// Default 64.
    pub max_commit_batch: usize,
    /// Group commit: at most this many transactions of batched commits in flight at once; write
    /// sets that arrive meanwhile wait for the next free one and go together. Default 2.
    pub commit_pipelines: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: None,
            pool_size: 16,
            connect_timeout: Duration::from_secs(10),
            max_commit_batch: 64,
            commit_pipelines: 2,
        }
    }
}

impl PostgresOptions {
    /// Keep the tables in `schema` (see [`PostgresOptions::schema`]).
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Keep `n` connections (at least 1).
    pub fn with_pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// Wait this long for a connection.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Let at most `n` waiting write sets share a transaction (at least 1; see
    /// [`PostgresOptions::max_commit_batch`]).
    pub fn with_max_commit_batch(mut self, n: usize) -> Self {
        self.max_commit_batch = n.max(1);
        self
    }

    /// Keep at most `n` transactions of batched commits in flight (at least 1; see
    /// [`PostgresOptions::commit_pipelines`]).
    pub fn with_commit_pipelines(mut self, n: usize) -> Self {
        self.commit_pipelines = n.max(1);
        self
    }
}

/// A [`Store`] in a PostgreSQL database, which any number of processes may share: `turnwise
/// serve` nodes and applications running embedded engines, all on one database.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn demo() -> Result<(), turnwise::store::StoreError> {
/// use turnwise::store::PostgresStore;
///
/// let store = PostgresStore::connect("postgres://turnwise@127.0.0.1/turnwise").await?;
/// // An engine that also offers transactional steps over this store.
/// let engine = turnwise::Engine::postgres(store, turnwise::clock::SystemClock, Default::default());
/// # let _ = engine; Ok(()) }
/// ```
///
/// (Or `Engine::connect("postgres://…")`, which picks the store from the address.)
///
/// How it keeps the contract across processes:
///
/// - **Conditional writes.** A commit locks its instance's row (`SELECT … FOR UPDATE`),
///   compares the revision with the one the engine read and writes the instance and its turns
///   in one transaction, or answers [`CommitError::Conflict`] and writes nothing. Every write to
///   an instance goes through that row, so two processes never both apply a decision on the same
///   revision: a turn is granted to one claimant, and lease tokens are checked against the
///   stored one whichever process checks them.
/// - **Round trips.** A write set is one call of the commit function the store installs (lock,
///   check, write, prune, notify). Commits that wait at the same moment share one transaction
///   (*group commit*: `BEGIN`, a call each, `COMMIT`, pipelined in one round trip), each with
///   its own check and answer, all answered after the `COMMIT`; a lone one is one statement.
///   See [`PostgresOptions::max_commit_batch`]. A worker route reads its instance and turn in
///   one query ([`Store::load_instance_turn`]).
/// - **Durability.** [`Durability::Durable`] commits wait for the database's `COMMIT` at its
///   `synchronous_commit` setting; [`Durability::Relaxed`] ones set it `off` for their own
///   transaction (they survive the death of any turnwise process, not of the database server).
/// - **Change notices.** A commit that makes an instance due sooner than before, or gives a
///   turn an outcome, sends a `NOTIFY` on the store's channel in its transaction; every store
///   keeps one connection that `LISTEN`s and reports what the other processes committed through
///   [`Store::watch`]. Engines ring their waiting claims and wake their waiting readers with
///   it, so work admitted on one node reaches a claim waiting on another within a round trip.
///   When that connection drops, the store reconnects and reports [`Notice::Missed`], and
///   [`Store::health`] answers why it is down meanwhile.
/// - **Timers** need nothing of their own: each instance's next due time is a column, which
///   every process's waiting claims consult, and the first claim to commit acts on it.
/// - **Records** are JSON text (the exact numbers and key order of the values written); an
///   instance whose record cannot be decoded answers [`StoreError::Unreadable`], leaves the
///   schedule and listings, and can be removed with [`Store::delete_unreadable`].
/// - **Schema.** The tables are created on first connect and carry a version
///   (`turnwise_meta`); a database of a newer version is refused. Nodes that start together
///   migrate once (an advisory lock).
///
/// TLS connections to the database are not offered yet: connect over a local socket
/// (`postgres://user@%2Fvar%2Frun%2Fpostgresql/db`), loopback or a private network.
///
/// Cloning is cheap; clones share the connections.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    stats: Counters,
    notices: Arc<Notices>,
    /// Write sets waiting to be committed (group commit).
    group: commit::Group,
    /// Where the database is, for messages (no password).
    target: String,
    listener: tokio::task::AbortHandle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.inner.target)
            .field("channel", &self.inner.notices.channel)
            .finish_non_exhaustive()
    }
}

/// What a [`PostgresStore`] has done since it connected ([`PostgresStore::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresStats {
    /// Commits at [`Durability::Durable`] (written; alone or in a group's transaction).
    pub durable_commits: u64,
    /// Commits at [`Durability::Relaxed`] (`synchronous_commit` off, unless their transaction
    /// carried a durable one too).
    pub relaxed_commits: u64,
    /// Commits made inside a transactional step's transaction.
    pub joined_commits: u64,
    /// Change notices sent (commits that made an instance due sooner or settled a turn).
    pub notices_sent: u64,
    /// Database transactions the store's own commits made (a lone write set's, or a group's),
    /// refusals included; a transactional step's are not counted.
    pub transactions: u64,
    /// Of those, the ones that waited for the WAL flush (a group waits if any of its write
    /// sets is durable).
    pub durable_transactions: u64,
    /// Group commit: database transactions that carried several write sets (each write set
    /// is also counted as durable or relaxed above).
    pub group_commits: u64,
    /// Group commit: the write sets those transactions carried, refused ones included.
    pub grouped_write_sets: u64,
    /// Group commit: batches the database refused as a whole (one of their statements
    /// failed), whose write sets were then committed one by one.
    pub group_retries: u64,
}

#[derive(Default)]
struct Counters {
    durable: std::sync::atomic::AtomicU64,
    relaxed: std::sync::atomic::AtomicU64,
    joined: std::sync::atomic::AtomicU64,
    notices: std::sync::atomic::AtomicU64,
    transactions: std::sync::atomic::AtomicU64,
    durable_transactions: std::sync::atomic::AtomicU64,
    group_commits: std::sync::atomic::AtomicU64,
    grouped: std::sync::atomic::AtomicU64,
    group_retries: std::sync::atomic::AtomicU64,
}

/// A `tokio_postgres` failure as a [`StoreError`] saying what was being done.
fn pg(what: impl fmt::Display) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |e| failed(what, e)
}

/// `what` failed because of `e`: the message names the database's error and code when there
/// is one, and otherwise every cause in `e`'s chain (`tokio_postgres` and the pool display
/// only their outermost layer: "db error", "error connecting to server").
fn failed(
    what: impl fmt::Display,
    e: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    let mut text = String::new();
    let mut layer: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = layer {
        if let Some(db) = err.downcast_ref::<tokio_postgres::error::DbError>() {
            text = format!("{} ({})", db.message(), db.code().code());
            break;
        }
        let shown = err.to_string();
        if !text.contains(&shown) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&shown);
        }
        layer = err.source();
    }
    StoreError::Failed {
        message: format!("postgres: {what}: {text}"),
        source: Some(turnwise_core::protocol::error::Source::new(e)),
    }
}

fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let mut chars = schema.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && schema.len() <= 63;
    if ok {
        Ok(())
    } else {
        Err(StoreError::new(format!(
            "postgres: `{schema}` is not a schema name turnwise accepts: use letters, digits and \
             `_`, starting with a letter or `_`, at most 63 bytes"
        )))
    }
}

/// Hosts, ports and database of a configuration, without its password.
fn describe(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match h {
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(",")
    };
    match (config.get_user(), config.get_dbname()) {
        (Some(u), Some(d)) => format!("{u}@{hosts}/{d}"),
        (None, Some(d)) => format!("{hosts}/{d}"),
        (Some(u), None) => format!("{u}@{hosts}"),
        (None, None) => hosts,
    }
}

impl PostgresStore {
    /// The capability to run transactional steps over this store: what an engine over it
    /// hands its workers (`turnwise::Engine::postgres` and `Engine::connect` take it from
    /// here), so that a step's SQL and its checkpoint commit in one transaction.
    pub fn step_transactions(&self) -> StepTransactions {
        StepTransactions::new(self.clone())
    }

    /// Connect with default options; see [`PostgresStore::connect_with`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connect to the database at `url` (`postgres://user:password@host:port/database`, or the
    /// `key=value` form libpq takes), create or check its tables, and start listening for
    /// other processes' commits. Fails with a [`StoreError`] naming the database when it
    /// cannot be reached, the address is not valid, or the tables are of a newer version.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let mut config: Config = url.parse().map_err(|e| {
            StoreError::caused(
                "postgres: the connection string is not valid (expected \
                 postgres://user:password@host:port/database)",
                e,
            )
        })?;
        if let Some(schema) = &options.schema {
            check_schema_name(schema)?;
            let given = config.get_options().unwrap_or_default();
            let with_path = format!("{given} -c search_path={schema}");
            config.options(with_path.trim());
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("turnwise");
        }
        // Find a dead peer (or a partition) within a minute rather than the system's two hours.
        config.keepalives_idle(Duration::from_secs(30));
        let target = describe(&config);

        let (mut client, connection) = config
            .connect(NoTls)
            .await
            .map_err(pg(format_args!("cannot connect to {target}")))?;
        let driver = tokio::spawn(connection);
        let migrated = schema::migrate(&mut client, options.schema.as_deref()).await;
        drop(client);
        let _ = driver.await;
        // The schema the tables are in, however it was chosen (the options, or a search_path
        // in the address): stores in other schemas of the database are not woken.
        let current_schema = migrated?;

        // Listen before answering, so that no commit made after `connect` returns is missed.
        let channel = notices::channel(&current_schema);
        let listening = notices::listen(&config, &channel).await?;
        let notices = Arc::new(Notices::new(notices::node_id(), channel));
        let listener = tokio::spawn(notices::run(
            Arc::downgrade(&notices),
            config.clone(),
            listening,
        ))
        .abort_handle();

        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::caused("postgres: build the connection pool", e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                stats: Counters::default(),
                notices,
                group: commit::Group::new(&options),
                target,
                listener,
            }),
        })
    }

    /// Counts of what the store has done since it connected.
    pub fn stats(&self) -> PostgresStats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.inner.stats;
        PostgresStats {
            durable_commits: c.durable.load(Relaxed),
            relaxed_commits: c.relaxed.load(Relaxed),
            joined_commits: c.joined.load(Relaxed),
            notices_sent: c.notices.load(Relaxed),
            transactions: c.transactions.load(Relaxed),
            durable_transactions: c.durable_transactions.load(Relaxed),
            group_commits: c.group_commits.load(Relaxed),
            grouped_write_sets: c.grouped.load(Relaxed),
            group_retries: c.group_retries.load(Relaxed),
        }
    }

    async fn client(&self) -> Result<Object, StoreError> {
        self.inner.pool.get().await.map_err(|e| {
            failed(
                format_args!("cannot get a connection to {}", self.inner.target),
                e,
            )
        })
    }

    /// A statement that answers at most one row (a lookup by key).
    async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        what: impl Fn() -> String + Send,
    ) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params, what).await?.into_iter().next())
    }

    /// One statement; `what` says what it does, for the error.
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        what: impl Fn() -> String + Send,
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| pg(what())(e))?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| pg(what())(e))
    }

    /// Decode an instance row (`body`, `history_pruned_through`); an undecodable one is taken
    /// off the schedule (best effort) and answered as unreadable.
    async fn instance(&self, ns: &str, id: &str, row: &Row) -> Result<InstanceRecord, StoreError> {
        let body: &str = row.get(0);
        match decode::<InstanceRecord>(body) {
            Ok(mut record) => {
                record.history_pruned_through = INTS.uint(row.get(1), "history_pruned_through")?;
                Ok(record)
            }
            Err(e) => Err(self
                .quarantine(ns, id, format!("its instance record: {e}"))
                .await),
        }
    }

    async fn turn(&self, ns: &str, id: &str, body: &str) -> Result<TurnRecord, StoreError> {
        match decode::<TurnRecord>(body) {
            Ok(t) => Ok(t),
            Err(e) => Err(self.quarantine(ns, id, format!("a turn record: {e}")).await),
        }
    }

    /// Log an unreadable instance, take it off the schedule so that claims stop tripping on
    /// it, and answer the error.
    async fn quarantine(&self, ns: &str, id: &str, reason: String) -> StoreError {
        tracing::error!(
            ns,
            id,
            reason,
            "postgres: an instance's stored record cannot be read"
        );
        let _ = self
            .query(
                "UPDATE instances SET due_at_ms = NULL WHERE ns = $1 AND id = $2",
                &[&ns, &id],
                || "take an unreadable instance off the schedule".into(),
            )
            .await;
        unreadable(ns, id, reason)
    }
}

// ---- statements ---------------------------------------------------------------------------

/// This store, as its messages name it.
const STORE: &str = "postgres";
/// The database keeps signed 64-bit integers.
const INTS: Int64Columns = Int64Columns(STORE);

const LOAD_INSTANCE: &str =
    "SELECT body, history_pruned_through FROM instances WHERE ns = $1 AND id = $2";
const LOAD_TURN: &str = "SELECT body FROM turns WHERE ns = $1 AND id = $2 AND number = $3";
const LOAD_INSTANCE_TURN: &str = "SELECT i.body, i.history_pruned_through, t.body \
     FROM instances i LEFT JOIN turns t ON t.ns = i.ns AND t.id = i.id AND t.number = $3 \
     WHERE i.ns = $1 AND i.id = $2";
const FIND_MESSAGE: &str = "SELECT body FROM turns WHERE ns = $1 AND id = $2 AND message_id = $3";
const LIST_TURNS: &str = "SELECT body FROM turns WHERE ns = $1 AND id = $2 AND finished = $3 \
     AND number > $4 ORDER BY number LIMIT $5";
const LIST_INSTANCES: &str = "SELECT body, history_pruned_through, id FROM instances \
     WHERE ns = $1 AND ($2::text IS NULL OR workflow_type = $2) \
     AND ($3::text IS NULL OR version = $3) AND ($4::text IS NULL OR id > $4) \
     ORDER BY id LIMIT $5";
const COUNT_INSTANCES: &str = "SELECT count(*), count(*) FILTER (WHERE pending_count > 0) \
     FROM instances WHERE ns = $1 AND workflow_type = $2 AND ($3::text IS NULL OR version = $3)";
const DUE: &str = "SELECT id FROM instances WHERE ns = $1 \
     AND (workflow_type, version) IN (SELECT * FROM unnest($2::text[], $3::text[])) \
     AND due_at_ms <= $4 ORDER BY due_at_ms, id LIMIT $5";
const NEXT_DUE: &str = "SELECT min(due_at_ms) FROM instances WHERE ns = $1 \
     AND (workflow_type, version) IN (SELECT * FROM unnest($2::text[], $3::text[])) \
     AND due_at_ms IS NOT NULL";

const LIST_RUNS: &str = "SELECT body FROM runs WHERE ns = $1 \
     AND ($2::text IS NULL OR instance_id = $2) AND ($3::text IS NULL OR run_id < $3) \
     ORDER BY run_id DESC LIMIT $4";
const LOAD_RUN: &str = "SELECT body FROM runs WHERE ns = $1 AND run_id = $2";
const COUNT_RUNS: &str = "SELECT (started_at_ms / $3) * $3 AS hour, outcome, count(*) FROM runs \
     WHERE ns = $1 AND started_at_ms >= $2 GROUP BY hour, outcome ORDER BY hour, outcome";
const DELETE_TURNS: &str = "DELETE FROM turns WHERE ns = $1 AND id = $2";
const DELETE_INSTANCE: &str = "DELETE FROM instances WHERE ns = $1 AND id = $2";

fn workflow_arrays(workflows: &[WorkflowRef]) -> (Vec<&str>, Vec<&str>) {
    workflows
        .iter()
        .map(|w| (w.workflow_type.as_str(), w.version.as_str()))
        .unzip()
}

#[async_trait]
impl Store for PostgresStore {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        let what = || format!("read instance `{id}`");
        match self.query_opt(LOAD_INSTANCE, &[&ns, &id], what).await? {
            Some(row) => Ok(Some(self.instance(ns, id, &row).await?)),
            None => Ok(None),
        }
    }

    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let what = || format!("read turn {number} of `{id}`");
        let n = clamp(number);
        match self.query_opt(LOAD_TURN, &[&ns, &id, &n], what).await? {
            Some(row) => Ok(Some(self.turn(ns, id, row.get(0)).await?)),
            None => Ok(None),
        }
    }

    async fn load_instance_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<(InstanceRecord, Option<TurnRecord>)>, StoreError> {
        let what = || format!("read instance `{id}` with turn {number}");
        let n = clamp(number);
        let Some(row) = self
            .query_opt(LOAD_INSTANCE_TURN, &[&ns, &id, &n], what)
            .await?
        else {
            return Ok(None);
        };
        let instance = self.instance(ns, id, &row).await?;
        let turn = match row.get::<_, Option<&str>>(2) {
            Some(body) => Some(self.turn(ns, id, body).await?),
            None => None,
        };
        Ok(Some((instance, turn)))
    }

    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let what = || format!("find message `{message_id}` of `{id}`");
        match self
            .query_opt(FIND_MESSAGE, &[&ns, &id, &message_id], what)
            .await?
        {
            Some(row) => Ok(Some(self.turn(ns, id, row.get(0)).await?)),
            None => Ok(None),
        }
    }

    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        range: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        let after = range.after.map_or(-1, clamp);
        let limit = clamp(range.limit);
        let what = || format!("list the turns of `{id}`");
        let rows = self
            .query(
                LIST_TURNS,
                &[&ns, &id, &range.finished, &after, &limit],
                what,
            )
            .await?;
        let mut turns = Vec::with_capacity(rows.len());
        for row in &rows {
            turns.push(self.turn(ns, id, row.get(0)).await?);
        }
        Ok(turns)
    }

    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        let limit = clamp(filter.limit);
        let rows = self
            .query(
                LIST_INSTANCES,
                &[
                    &ns,
                    &filter.workflow_type,
                    &filter.version,
                    &filter.after,
                    &limit,
                ],
                || "list instances".into(),
            )
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: &str = row.get(2);
            // Listings leave unreadable instances out (they are logged).
            if let Ok(record) = self.instance(ns, id, row).await {
                out.push(record);
            }
        }
        Ok(out)
    }

    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        let rows = self
            .query(COUNT_INSTANCES, &[&ns, &workflow_type, &version], || {
                "count instances".into()
            })
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::new("postgres: a count answered no row"))?;
        Ok((
            INTS.uint(row.get(0), "count")?,
            INTS.uint(row.get(1), "count")?,
        ))
    }

    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let (types, versions) = workflow_arrays(workflows);
        let limit = clamp(limit);
        let rows = self
            .query(DUE, &[&ns, &types, &versions, &now, &limit], || {
                "read the schedule".into()
            })
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        let (types, versions) = workflow_arrays(workflows);
        let rows = self
            .query(NEXT_DUE, &[&ns, &types, &versions], || {
                "read the schedule".into()
            })
            .await?;
        Ok(rows.first().and_then(|r| r.get(0)))
    }

    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        if let Some(joined) = transact::joined(&self.inner) {
            // A transactional step's checkpoint: written in the step's transaction.
            let conn = joined.lock().await;
            let Some(c) = conn.0.as_ref() else {
                return Err(StoreError::new("postgres: the step's transaction has ended").into());
            };
            return self.call(c, &commit::encode(write, true)?).await;
        }
        // Its own transaction, or one shared with the write sets waiting with it.
        self.commit_grouped(commit::encode(write, false)?).await
    }

    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError> {
        let limit = clamp(filter.limit);
        let rows = self
            .query(
                LIST_RUNS,
                &[&ns, &filter.instance, &filter.before, &limit],
                || "list runs".into(),
            )
            .await?;
        rows.iter()
            .map(|row| decode_run(STORE, row.get(0)))
            .collect()
    }

    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError> {
        let row = self
            .query_opt(LOAD_RUN, &[&ns, &run_id], || format!("read run `{run_id}`"))
            .await?;
        row.map(|row| decode_run(STORE, row.get(0))).transpose()
    }

    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError> {
        let rows = self
            .query(COUNT_RUNS, &[&ns, &since_ms, &HOUR_MS], || {
                "count runs".into()
            })
            .await?;
        rows.iter()
            .map(|row| {
                Ok(RunCount {
                    hour_ms: row.get(0),
                    outcome: row.get(1),
                    runs: INTS.uint(row.get(2), "count")?,
                })
            })
            .collect()
    }

    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError> {
        self.query(
            "INSERT INTO schemas (ns, workflow_type, version, body) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (ns, workflow_type, version) DO UPDATE SET body = EXCLUDED.body",
            &[&ns, &workflow_type, &version, &document],
            || format!("keep the schema of {workflow_type} {version}"),
        )
        .await?;
        Ok(())
    }

    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .query(
                "SELECT body FROM schemas WHERE ns = $1 ORDER BY workflow_type, version",
                &[&ns],
                || "read the schemas".into(),
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn delete_unreadable(&self, ns: &str, id: &str) -> Result<bool, StoreError> {
        let Some(row) = self
            .query_opt(
                "SELECT body FROM instances WHERE ns = $1 AND id = $2",
                &[&ns, &id],
                || format!("read instance `{id}`"),
            )
            .await?
        else {
            return Ok(false);
        };
        let mut readable = decode::<InstanceRecord>(row.get(0)).is_ok();
        if readable {
            let turns = self
                .query(
                    "SELECT body FROM turns WHERE ns = $1 AND id = $2",
                    &[&ns, &id],
                    || format!("read the turns of `{id}`"),
                )
                .await?;
            readable = turns.iter().all(|t| decode::<TurnRecord>(t.get(0)).is_ok());
        }
        if readable {
            return Ok(false);
        }
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(pg("begin a transaction"))?;
        let what = || format!("delete unreadable instance `{id}`");
        tx.execute(DELETE_TURNS, &[&ns, &id])
            .await
            .map_err(|e| pg(what())(e))?;
        tx.execute(DELETE_INSTANCE, &[&ns, &id])
            .await
            .map_err(|e| pg(what())(e))?;
        tx.commit().await.map_err(|e| pg(what())(e))?;
        tracing::warn!(ns, id, "postgres: deleted an unreadable instance");
        Ok(true)
    }

    async fn health(&self) -> Result<(), StoreError> {
        self.inner.notices.health()
    }

    fn watch(&self, watcher: Watcher) {
        self.inner.notices.watch(watcher);
    }
}
