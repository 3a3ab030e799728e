//! The SQLite store; its design is documented on [`SqliteStore`].

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use tokio::sync::oneshot;

use super::*;

/// The schema version this code writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 2;
/// `PRAGMA application_id` of a turnwise store: `"turn"` in ASCII.
const APPLICATION_ID: i64 = 0x7475_726e;
/// How long a connection waits for a lock held by another connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle read-only connections kept for reuse.
const MAX_IDLE_READERS: usize = 4;
/// `PRAGMA wal_autocheckpoint` (SQLite's default) outside relaxed-only stretches.
const WAL_AUTOCHECKPOINT: u32 = 1000;
/// Relaxed write sets in a row after which the writer checkpoints at the configured level.
const RELAXED_CHECKPOINT_EVERY: usize = 4096;
/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS instances (
    ns TEXT NOT NULL,
    id TEXT NOT NULL,
    workflow_type TEXT NOT NULL,
    version TEXT NOT NULL,
    revision INTEGER NOT NULL,
    pending_count INTEGER NOT NULL,
    due_at_ms INTEGER,
    history_pruned_through INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (ns, id)
);
CREATE INDEX IF NOT EXISTS instances_by_type
    ON instances (ns, workflow_type, version, id);
CREATE INDEX IF NOT EXISTS instances_by_due
    ON instances (ns, workflow_type, version, due_at_ms, id);
CREATE TABLE IF NOT EXISTS turns (
    ns TEXT NOT NULL,
    id TEXT NOT NULL,
    number INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    finished INTEGER NOT NULL,
    finished_at_ms INTEGER,
    body TEXT NOT NULL,
    PRIMARY KEY (ns, id, number)
);
CREATE UNIQUE INDEX IF NOT EXISTS turns_by_message
    ON turns (ns, id, message_id);
CREATE INDEX IF NOT EXISTS turns_unfinished
    ON turns (ns, id, number) WHERE finished = 0;
CREATE INDEX IF NOT EXISTS turns_finished_by_age
    ON turns (ns, id, finished_at_ms, number) WHERE finished = 1;
";

/// The `PRAGMA synchronous` level used for durable commits.
///
/// The store always runs in WAL mode, where the levels mean:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Synchronous {
    /// `FULL`: the WAL is synced on every commit, so an acknowledged
    /// [`Durability::Durable`] commit survives a power loss. The default.
    #[default]
    Full,
    /// `NORMAL`: the WAL is synced only at checkpoints. Commits survive the death of the
    /// process, but a power loss or operating-system crash may roll back the most recent ones.
    Normal,
    /// `OFF`: never synced. Commits survive the death of the process only; a power loss may
    /// roll back any of them or, at a checkpoint, corrupt the file. For tests and throwaway data.
    Off,
}

impl Synchronous {
    fn sql(self) -> &'static str {
        match self {
            Synchronous::Full => "PRAGMA synchronous = FULL",
            Synchronous::Normal => "PRAGMA synchronous = NORMAL",
            Synchronous::Off => "PRAGMA synchronous = OFF",
        }
    }
}

/// Settings for [`SqliteStore::open_with`]. Start from [`Default`] and adjust with the
/// `with_*` methods.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// The sync level for batches holding a [`Durability::Durable`] write set (default
    /// [`Synchronous::Full`]). Batches of only relaxed write sets always use `OFF`.
    pub synchronous: Synchronous,
    /// At most this many write sets are committed in one transaction (default 256; 0 counts
    /// as 1).
    pub max_batch: usize,
    /// About how many decoded instances the read cache keeps (default 10 000; 0 disables it).
    pub cache_instances: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            max_batch: 256,
            cache_instances: 10_000,
        }
    }
}

impl SqliteOptions {
    /// Sets [`synchronous`](Self::synchronous).
    pub fn with_synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Sets [`max_batch`](Self::max_batch).
    pub fn with_max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Sets [`cache_instances`](Self::cache_instances).
    pub fn with_cache_instances(mut self, cache_instances: usize) -> Self {
        self.cache_instances = cache_instances;
        self
    }
}

/// A [`Store`] in one SQLite file (WAL mode), written by one thread with group commit.
///
/// Cloning gives another handle to the same store. When the last handle is dropped, the
/// writer thread finishes its batch and closes the file.
///
/// # Layout
///
/// - `instances(ns, id, workflow_type, version, revision, pending_count, due_at_ms,
///   history_pruned_through, body)`: one row per instance; `body` is the [`InstanceRecord`] as
///   JSON, the other columns are copies the queries need (schedule index, filters, counts).
/// - `turns(ns, id, number, message_id, finished, finished_at_ms, body)`: one row per kept
///   turn, unique by `(ns, id, number)` and by `(ns, id, message_id)`, with two partial indexes:
///   unfinished turns by number (the inbox) and finished ones by age (retention). A turn enters
///   each of them once, so the writes of a running turn touch no index at all.
///
/// The schema version is kept in `PRAGMA user_version` (now 2); a version-1 file is migrated
/// when opened (its two full `finished` indexes are replaced by the partial ones).
///
/// Records are stored as `serde_json` text; with the `arbitrary_precision` feature numbers
/// round-trip exactly as written (`1.10` stays `1.10`).
///
/// # Writes
///
/// One dedicated thread owns the only write connection. [`Store::commit`] hands it the
/// [`WriteSet`] over a channel and waits for the answer. The thread takes the first request,
/// drains whatever else is queued (up to [`SqliteOptions::max_batch`]) and applies the whole
/// batch in one `BEGIN IMMEDIATE` transaction. A write set that conflicts is refused by its
/// first statement and leaves nothing behind; one refused after writing rows sends the batch
/// round again with a `SAVEPOINT` around each write set, so it is rolled back alone while its
/// neighbours commit ([`SqliteStats::guarded_retries`] counts those rounds). The transaction
/// is committed once, and every caller is answered only after that `COMMIT` returned: an
/// acknowledged [`Durability::Durable`] write is on stable storage. If the `COMMIT` fails,
/// every write set of the batch fails with [`CommitError::Store`].
///
/// A batch made only of [`Durability::Relaxed`] write sets is committed with
/// `PRAGMA synchronous=OFF`: in WAL mode it survives the death of the process, and the next
/// durable commit syncs it too. WAL checkpoints never run at `OFF` (an unsynced checkpoint
/// could lose earlier durable commits on power loss): they wait for the next durable batch, or
/// for the writer's own checkpoint at the configured level after a long relaxed-only run.
///
/// # Reads
///
/// Reads run on a small pool of read-only connections through
/// [`tokio::task::spawn_blocking`], so they never block the async runtime and never wait for
/// the writer (WAL readers see the last committed state). [`Store::load_instance`] is served
/// from a bounded write-through cache of decoded instances when possible.
///
/// # One writer per file
///
/// A file must be written by one [`SqliteStore`] at a time: one process, and one `open` per
/// file inside it (clone the handle to share it). The store keeps a cache that only its own
/// writer updates; a second writer on the same file would make that cache stale. SQLite's own
/// locking keeps the file consistent regardless, but such a setup is not supported.
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Open (or create) the store at `path` with the default [`SqliteOptions`].
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Open (or create) the store at `path`.
    ///
    /// Creates the file and its schema if missing, switches it to WAL mode and starts the
    /// writer thread. Fails if the file is not a turnwise store or has a schema newer than this
    /// version of turnwise understands.
    pub async fn open_with(path: &Path, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let opened = {
            let path = path.clone();
            let synchronous = options.synchronous;
            tokio::task::spawn_blocking(move || open_writer(&path, synchronous))
                .await
                .map_err(|e| StoreError(format!("sqlite: open task failed: {e}")))??
        };
        let cache = Arc::new(Cache::new(options.cache_instances));
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(StatsCounters::default());
        let writer = Writer {
            conn: opened,
            rx,
            cache: cache.clone(),
            stats: stats.clone(),
            configured: options.synchronous,
            current: options.synchronous,
            relaxed_writes: 0,
            max_batch: options.max_batch.max(1),
        };
        let thread = std::thread::Builder::new()
            .name("turnwise-sqlite-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| StoreError(format!("sqlite: start the writer thread: {e}")))?;
        Ok(Self {
            shared: Arc::new(Shared {
                path,
                tx: Some(tx),
                thread: Some(thread),
                readers: Mutex::new(Vec::new()),
                cache,
                stats,
            }),
        })
    }

    /// The writer's cumulative counters since this store was opened (shared by its clones).
    ///
    /// A commit is counted before its caller is answered, so a commit that has returned is
    /// always included.
    pub fn stats(&self) -> SqliteStats {
        let s = &self.shared.stats;
        SqliteStats {
            batches: s.batches.load(Ordering::Acquire),
            durable_batches: s.durable_batches.load(Ordering::Acquire),
            write_sets: s.write_sets.load(Ordering::Acquire),
            guarded_retries: s.guarded_retries.load(Ordering::Acquire),
        }
    }

    /// Run `f` on a read-only connection on the blocking pool.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.with_reader(f))
            .await
            .map_err(|e| StoreError(format!("sqlite: read task failed: {e}")))?
    }
}

struct Shared {
    path: PathBuf,
    // The writer's inbox; taken in `drop` to stop the writer.
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    readers: Mutex<Vec<Connection>>,
    cache: Arc<Cache>,
    stats: Arc<StatsCounters>,
}

/// Cumulative counters of a [`SqliteStore`]'s writer thread, from [`SqliteStore::stats`].
///
/// Compare two snapshots to see how the store worked over a stretch: for instance
/// `durable_batches` per unit of work is the number of syncs it cost, and `write_sets /
/// batches` is how much group commit shared each transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SqliteStats {
    /// Write transactions committed (one per group-commit batch).
    pub batches: u64,
    /// Of those, batches holding at least one [`Durability::Durable`] write set, committed at
    /// the configured [`Synchronous`] level: with [`Synchronous::Full`], one WAL sync each.
    /// The others held only relaxed write sets and were committed without a sync.
    pub durable_batches: u64,
    /// Write sets applied by committed batches (conflicting or refused ones are not counted).
    pub write_sets: u64,
    /// Batches applied a second time with a savepoint around each write set, because one of
    /// their write sets was refused after it had written rows (see [`SqliteStore`]). Rare:
    /// revision conflicts are refused before anything is written.
    pub guarded_retries: u64,
}

/// The writer's counters, shared with the store handles.
#[derive(Debug, Default)]
struct StatsCounters {
    batches: AtomicU64,
    durable_batches: AtomicU64,
    write_sets: AtomicU64,
    guarded_retries: AtomicU64,
}

impl Shared {
    fn with_reader<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let idle = lock(&self.readers).pop();
        let mut conn = match idle {
            Some(c) => c,
            None => open_reader(&self.path)?,
        };
        let out = f(&mut conn);
        // A failed multi-statement read may leave its transaction open; close it or drop the
        // connection.
        let healthy = conn.is_autocommit() || conn.execute_batch("ROLLBACK").is_ok();
        if healthy {
            let mut idle = lock(&self.readers);
            if idle.len() < MAX_IDLE_READERS {
                idle.push(conn);
            }
        }
        out
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Close the readers first so that the writer is the file's last connection and
        // checkpoints the WAL as it closes. (No read is running: each holds a handle.)
        lock(&self.readers).clear();
        // Closing the channel stops the writer after its current batch; wait for it so the
        // file is closed when the last handle is gone.
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Lock a mutex, ignoring poisoning: every critical section here leaves its data consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Map a rusqlite error to a [`StoreError`] saying what was being done.
fn db(what: impl fmt::Display) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |e| StoreError(format!("sqlite: {what}: {e}"))
}

/// A stored integer from a `u64`; the file keeps signed 64-bit integers.
fn int(n: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| StoreError(format!("sqlite: {what} {n} is out of range")))
}

/// A read cursor as a stored integer: nothing stored is above `i64::MAX`.
fn clamp_u64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count or `LIMIT` as a stored integer.
fn clamp_usize(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn uint(n: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| StoreError(format!("sqlite: stored {what} {n} is negative")))
}

fn encode<T: Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError(format!("sqlite: encode {what}: {e}")))
}

fn decode_instance(body: &str) -> Result<InstanceRecord, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError(format!("sqlite: decode an instance: {e}")))
}

fn decode_turn(body: &str) -> Result<TurnRecord, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError(format!("sqlite: decode a turn: {e}")))
}

fn configure(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(db(format_args!("set busy_timeout on {}", path.display())))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// Open the write connection: WAL mode, schema checked or created.
fn open_writer(path: &Path, synchronous: Synchronous) -> Result<Connection, StoreError> {
    let shown = path.display();
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db(format_args!("open {shown}")))?;
    configure(&conn, path)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(db(format_args!("switch {shown} to WAL mode")))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError(format!(
            "sqlite: {shown} cannot use WAL mode (journal_mode is `{mode}`)"
        )));
    }
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(db(format_args!("lock {shown}")))?;
    let checked = check_schema(&conn, path);
    let end = if checked.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    conn.execute_batch(end)
        .map_err(db(format_args!("create the schema of {shown}")))?;
    checked?;
    conn.execute_batch(synchronous.sql())
        .map_err(db("set synchronous"))?;
    Ok(conn)
}

/// Inside a write transaction: refuse foreign or newer files, create the schema if missing.
fn check_schema(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let shown = path.display();
    let read = |pragma: &str| -> Result<i64, StoreError> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .map_err(db(format_args!("read {pragma} of {shown}")))
    };
    let app = read("application_id")?;
    let version = read("user_version")?;
    if app != APPLICATION_ID && (app != 0 || version != 0) {
        return Err(StoreError(format!(
            "sqlite: {shown} is not a turnwise store (application_id {app}, user_version {version})"
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError(format!(
            "sqlite: {shown} has schema version {version}, newer than the version {SCHEMA_VERSION} \
             this turnwise understands; open it with a newer turnwise"
        )));
    }
    if version == 1 {
        // Version 1 indexed every turn twice by `finished`; version 2 keeps two partial
        // indexes instead (unfinished turns by number, finished ones by age), which a turn's
        // writes touch less often. Same tables, same rows.
        conn.execute_batch(
            "DROP INDEX IF EXISTS turns_by_finished; DROP INDEX IF EXISTS turns_by_age;",
        )
        .map_err(db(format_args!("migrate {shown} from schema version 1")))?;
    }
    conn.execute_batch(SCHEMA)
        .map_err(db(format_args!("create the schema of {shown}")))?;
    if version != SCHEMA_VERSION || app != APPLICATION_ID {
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
        ))
        .map_err(db(format_args!("stamp the schema version of {shown}")))?;
    }
    Ok(())
}

fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db(format_args!("open {} for reading", path.display())))?;
    configure(&conn, path)?;
    Ok(conn)
}

// ---------------------------------------------------------------------------------------------
// The instance cache

/// How long the writer polls for the next request before it sleeps.
const WRITER_SPIN: Duration = Duration::from_micros(200);

/// The most turns retention deletes in one commit.
const PRUNE_BATCH: i64 = 256;

type Key = (String, String);

/// A bounded cache of decoded instances with two generations: entries are inserted into `hot`;
/// when `hot` is full it becomes `cold` and the old `cold` is dropped. A hit in `cold` moves the
/// entry back to `hot`. Approximates LRU at O(1) per operation, holding at most `cap` entries.
///
/// The writer updates it after each `COMMIT`. A reader may fill a miss from the file only if no
/// commit happened since it looked (`gen`), so a slow reader never puts back an older record.
///
/// An entry also keeps the *unfinished* turns that commits wrote while it was cached. Only the
/// writer adds them, after the commit that wrote them, so a cached turn is always the stored
/// one; a turn not in the entry is read from the file. This is what lets a worker's calls on a
/// running turn (operation, progress, checkpoint, heartbeat) go without any read at all.
struct Cache {
    half: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Clone)]
struct Entry {
    instance: InstanceRecord,
    turns: HashMap<u64, TurnRecord>,
}

#[derive(Default)]
struct CacheInner {
    gen: u64,
    hot: HashMap<Key, Entry>,
    cold: HashMap<Key, Entry>,
}

impl Cache {
    fn new(cap: usize) -> Self {
        Self {
            half: cap.div_ceil(2),
            inner: Mutex::default(),
        }
    }

    /// The cached record, or the generation to pass to [`Cache::fill`].
    fn get(&self, key: &Key) -> Result<InstanceRecord, u64> {
        if self.half == 0 {
            return Err(0);
        }
        let mut c = lock(&self.inner);
        if let Some(e) = c.hot.get(key) {
            return Ok(e.instance.clone());
        }
        match c.cold.remove_entry(key) {
            Some((k, e)) => {
                let out = e.instance.clone();
                c.insert(self.half, k, e);
                Ok(out)
            }
            None => Err(c.gen),
        }
    }

    /// A cached unfinished turn of a cached instance.
    fn turn(&self, key: &Key, number: u64) -> Option<TurnRecord> {
        if self.half == 0 {
            return None;
        }
        let c = lock(&self.inner);
        let e = c.hot.get(key).or_else(|| c.cold.get(key))?;
        e.turns.get(&number).cloned()
    }

    fn fill(&self, key: Key, record: InstanceRecord, gen: u64) {
        if self.half == 0 {
            return;
        }
        let mut c = lock(&self.inner);
        if c.gen == gen {
            let entry = Entry {
                instance: record,
                turns: HashMap::new(),
            };
            c.insert(self.half, key, entry);
        }
    }

    /// After a `COMMIT`: record what the batch wrote (`None` = deleted or unknown).
    fn committed(
        &self,
        changes: impl IntoIterator<Item = (Key, Option<(InstanceRecord, Vec<TurnRecord>)>)>,
    ) {
        if self.half == 0 {
            return;
        }
        let mut c = lock(&self.inner);
        c.gen = c.gen.wrapping_add(1);
        for (key, change) in changes {
            match change {
                Some((instance, turns)) => {
                    let mut entry = match c.hot.remove(&key).or_else(|| c.cold.remove(&key)) {
                        Some(mut e) => {
                            e.instance = instance;
                            e
                        }
                        None => Entry {
                            instance,
                            turns: HashMap::new(),
                        },
                    };
                    for t in turns {
                        if t.is_finished() {
                            entry.turns.remove(&t.number);
                        } else {
                            entry.turns.insert(t.number, t);
                        }
                    }
                    // Only the instance's unfinished turns can be asked for hot.
                    let pending = &entry.instance.pending;
                    entry.turns.retain(|n, _| pending.contains(n));
                    c.insert(self.half, key, entry);
                }
                None => {
                    c.hot.remove(&key);
                    c.cold.remove(&key);
                }
            }
        }
    }
}

impl CacheInner {
    fn insert(&mut self, half: usize, key: Key, entry: Entry) {
        self.cold.remove(&key);
        self.hot.insert(key, entry);
        if self.hot.len() >= half {
            self.cold = std::mem::take(&mut self.hot);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The writer

struct Request {
    write: WriteSet,
    /// The instance's and turns' JSON, encoded on the caller's thread so the single writer
    /// thread spends its time on SQLite only.
    bodies: Bodies,
    reply: oneshot::Sender<Result<(), CommitError>>,
}

/// Pre-encoded bodies of a write set: the instance (absent for a delete) and each turn.
struct Bodies {
    instance: Option<String>,
    turns: Vec<String>,
}

impl Bodies {
    fn of(write: &WriteSet) -> Result<Self, StoreError> {
        Ok(Self {
            instance: write
                .instance
                .as_ref()
                .map(|i| encode(i, "an instance"))
                .transpose()?,
            turns: write
                .turns
                .iter()
                .map(|t| encode(t, "a turn"))
                .collect::<Result<_, _>>()?,
        })
    }
}

struct Writer {
    conn: Connection,
    rx: mpsc::Receiver<Request>,
    cache: Arc<Cache>,
    stats: Arc<StatsCounters>,
    configured: Synchronous,
    /// The level the connection is at now.
    current: Synchronous,
    /// Relaxed write sets committed since the last durable batch or checkpoint.
    relaxed_writes: usize,
    max_batch: usize,
}

/// What one write set did, before the batch's `COMMIT`: the instance's stored
/// `history_pruned_through` (0 for a delete), or why nothing of it was applied.
type Outcome = Result<u64, CommitError>;

impl Writer {
    fn run(mut self) {
        // Ends when every sender is gone (the last handle was dropped).
        while let Some(first) = self.next_request() {
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match self.rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            self.run_batch(batch);
        }
        // Closing the connection checkpoints the WAL: do it at the configured level.
        if let Err(e) = self.set_level(self.configured) {
            tracing::warn!("turnwise sqlite store: before closing: {e}");
        }
    }

    /// The next request: after a batch, poll briefly before sleeping. A worker's next call
    /// usually follows its previous answer within tens of microseconds, and waking a sleeping
    /// thread costs about as much again, on every call; a short spin saves that at the price
    /// of a little CPU right after each batch. `None` when every handle is gone.
    fn next_request(&self) -> Option<Request> {
        let spin_until = std::time::Instant::now() + WRITER_SPIN;
        loop {
            match self.rx.try_recv() {
                Ok(r) => return Some(r),
                Err(mpsc::TryRecvError::Disconnected) => return None,
                Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() < spin_until => {
                    std::thread::yield_now();
                }
                Err(mpsc::TryRecvError::Empty) => return self.rx.recv().ok(),
            }
        }
    }

    /// Switch `PRAGMA synchronous` if it differs from `want`.
    ///
    /// A checkpoint syncs the database file only at a level above `OFF`; a checkpoint left
    /// unsynced and followed by a WAL restart could lose earlier durable commits on power
    /// loss. So automatic checkpoints are suspended while relaxed batches run at `OFF`, and
    /// happen at the next durable commit (or in [`Writer::after_relaxed`]).
    fn set_level(&mut self, want: Synchronous) -> Result<(), StoreError> {
        if want == self.current {
            return Ok(());
        }
        let relaxed_only = want == Synchronous::Off && self.configured != Synchronous::Off;
        let checkpoints = if relaxed_only { 0 } else { WAL_AUTOCHECKPOINT };
        self.conn
            .execute_batch(&format!(
                "{}; PRAGMA wal_autocheckpoint = {checkpoints};",
                want.sql()
            ))
            .map_err(db("set synchronous"))?;
        self.current = want;
        Ok(())
    }

    /// After a batch: keep the WAL bounded when only relaxed batches come, by checkpointing
    /// at the configured level every so often.
    fn after_relaxed(&mut self, relaxed: bool, writes: usize) {
        if !relaxed || self.configured == Synchronous::Off {
            self.relaxed_writes = 0;
            return;
        }
        self.relaxed_writes += writes;
        if self.relaxed_writes < RELAXED_CHECKPOINT_EVERY {
            return;
        }
        self.relaxed_writes = 0;
        let done = self.set_level(self.configured).and_then(|()| {
            self.conn
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .map_err(db("checkpoint"))
        });
        if let Err(e) = done {
            tracing::warn!("turnwise sqlite store: {e}");
        }
    }

    fn run_batch(&mut self, batch: Vec<Request>) {
        let relaxed = batch
            .iter()
            .all(|r| r.write.durability == Durability::Relaxed);
        let count = batch.len();
        match self.transact(&batch, relaxed) {
            Ok(outcomes) => {
                let mut changes = Vec::with_capacity(outcomes.len());
                let mut answers = Vec::with_capacity(outcomes.len());
                let keep = self.cache.half > 0;
                for (request, outcome) in batch.into_iter().zip(outcomes) {
                    let Request { write, reply, .. } = request;
                    let key = (write.ns, write.id);
                    match outcome {
                        Ok(pruned_through) => {
                            // Move the records on to the cache rather than clone them.
                            let stored = write.instance.filter(|_| keep).map(|mut instance| {
                                instance.history_pruned_through = pruned_through;
                                (instance, write.turns)
                            });
                            changes.push((key, stored));
                            answers.push((reply, Ok(())));
                        }
                        Err(e) => {
                            if e == CommitError::Conflict {
                                // Someone else's write: forget whatever we believed.
                                changes.push((key, None));
                            }
                            answers.push((reply, Err(e)));
                        }
                    }
                }
                self.cache.committed(changes);
                // Count before answering, so a caller that saw its commit sees it counted.
                let applied = answers.iter().filter(|(_, a)| a.is_ok()).count() as u64;
                let stats = &self.stats;
                stats.write_sets.fetch_add(applied, Ordering::Release);
                if !relaxed {
                    stats.durable_batches.fetch_add(1, Ordering::Release);
                }
                stats.batches.fetch_add(1, Ordering::Release);
                for (reply, answer) in answers {
                    // The caller may have given up waiting; that is fine.
                    let _ = reply.send(answer);
                }
            }
            Err(e) => {
                for request in batch {
                    let _ = request.reply.send(Err(CommitError::Store(e.clone())));
                }
            }
        }
        self.after_relaxed(relaxed, count);
    }

    /// Apply the batch in one transaction. `Err` means nothing of it was written.
    ///
    /// Write sets are applied back to back without savepoints: almost every refusal (a revision
    /// conflict) happens at a write set's first statement and leaves nothing behind, and a
    /// savepoint per write set makes SQLite fill and free a statement journal every time. When
    /// a write set fails after writing rows (an invalid turn, a full disk), the transaction is
    /// rolled back and the batch applied again with a savepoint around each write set.
    fn transact(&mut self, batch: &[Request], relaxed: bool) -> Result<Vec<Outcome>, StoreError> {
        self.set_level(if relaxed {
            Synchronous::Off
        } else {
            self.configured
        })?;
        exec(&self.conn, "BEGIN IMMEDIATE").map_err(db("begin a transaction"))?;
        let result = match self.apply_all(batch, false) {
            Ok(None) => {
                self.stats.guarded_retries.fetch_add(1, Ordering::Relaxed);
                exec(&self.conn, "ROLLBACK")
                    .and_then(|_| exec(&self.conn, "BEGIN IMMEDIATE"))
                    .map_err(db("restart a transaction"))
                    .and_then(|_| self.apply_all(batch, true))
            }
            other => other,
        };
        let result = result.and_then(|outcomes| {
            // Guarded application always answers every write set.
            let outcomes = outcomes
                .ok_or_else(|| StoreError("sqlite: a batch was left half-applied".into()))?;
            exec(&self.conn, "COMMIT").map_err(db("commit"))?;
            Ok(outcomes)
        });
        if result.is_err() && !self.conn.is_autocommit() {
            // Best effort: if even ROLLBACK fails, SQLite rolls back when the connection or
            // the next BEGIN finds the transaction broken.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result
    }

    /// Apply every write set of the batch, each inside its own savepoint when `guarded`.
    /// `Ok(None)`: unguarded, a write set failed after changing rows, so the transaction must
    /// be rolled back and the batch applied again guarded.
    fn apply_all(
        &self,
        batch: &[Request],
        guarded: bool,
    ) -> Result<Option<Vec<Outcome>>, StoreError> {
        let conn = &self.conn;
        let mut outcomes = Vec::with_capacity(batch.len());
        for Request { write, bodies, .. } in batch {
            if guarded {
                exec(conn, "SAVEPOINT write_set").map_err(db("open a savepoint"))?;
            }
            let outcome = match apply(conn, write, bodies) {
                Err(refusal) if conn.is_autocommit() => {
                    // SQLite rolled back the whole transaction (I/O error, disk full…): the
                    // batch's earlier write sets are gone too.
                    return Err(match refusal.error {
                        CommitError::Store(e) => e,
                        CommitError::Conflict => {
                            StoreError("sqlite: the transaction was rolled back".into())
                        }
                    });
                }
                Err(refusal) if refusal.wrote && !guarded => return Ok(None),
                result => result.map_err(|refusal| refusal.error),
            };
            if guarded && outcome.is_err() {
                exec(conn, "ROLLBACK TO write_set").map_err(db("roll back a savepoint"))?;
            }
            if guarded {
                exec(conn, "RELEASE write_set").map_err(db("release a savepoint"))?;
            }
            outcomes.push(outcome);
        }
        Ok(Some(outcomes))
    }
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}

/// Why a write set was not applied, and whether it left changes in the open transaction.
struct Refusal {
    error: CommitError,
    /// Some of the write set's rows were written before the failure: only a savepoint (or
    /// rolling back the whole transaction) can take them back.
    wrote: bool,
}

/// Failures before anything was written.
impl From<CommitError> for Refusal {
    fn from(error: CommitError) -> Self {
        Self::before_writing(error)
    }
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        Self::before_writing(error)
    }
}

impl Refusal {
    fn before_writing(error: impl Into<CommitError>) -> Self {
        Self {
            error: error.into(),
            wrote: false,
        }
    }

    fn after_writing(error: impl Into<CommitError>) -> Self {
        Self {
            error: error.into(),
            wrote: true,
        }
    }
}

/// Apply one write set inside the batch's transaction; on success answer the instance's
/// `history_pruned_through` as stored (the caller's record is updated with it afterwards).
///
/// The fast path is one statement per row: the instance's `UPDATE` is conditional on the
/// expected revision (zero rows changed means another commit came first), and each turn's
/// upsert refuses to touch a finished turn or to change a message id (zero rows changed sends
/// it to the detailed checks, which accept an identical finished turn and name what is wrong
/// otherwise). A message id owned by another turn trips the unique index.
///
/// The instance row is written first, so the common refusals (a revision conflict, an id
/// already created) leave nothing behind; [`Refusal::wrote`] tells the caller when a later
/// statement failed after earlier ones had changed rows.
fn apply(conn: &Connection, write: &WriteSet, bodies: &Bodies) -> Result<u64, Refusal> {
    let (Some(instance), Some(body)) = (&write.instance, &bodies.instance) else {
        return delete(conn, write).map(|()| 0);
    };
    let stored_pruned = write_instance(conn, write, instance, body)?;
    finish_write(conn, write, bodies, instance, stored_pruned).map_err(Refusal::after_writing)
}

/// The instance row of a write set: a conditional update, or the insert of a new instance.
/// Answers the stored `history_pruned_through`. A refusal says whether rows were written.
fn write_instance(
    conn: &Connection,
    write: &WriteSet,
    instance: &InstanceRecord,
    body: &str,
) -> Result<u64, Refusal> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    let want = write.expected_revision.map_or(1, |r| r + 1);
    if instance.revision != want || instance.id != write.id || instance.ns != write.ns {
        return Err(StoreError(format!(
            "write set for `{id}` carries revision {} (expected {want}) or another id",
            instance.revision
        ))
        .into());
    }
    let revision = int(instance.revision, "revision")?;
    let pending = clamp_usize(instance.pending.len());
    // The store owns `history_pruned_through`: the caller's value is checked against the
    // stored one and replaced by it when they differ (the body is then re-encoded by
    // `finish_write`).
    let Some(expected) = write.expected_revision else {
        let inserted = conn
            .prepare_cached(
                "INSERT INTO instances \
                    (ns, id, workflow_type, version, revision, pending_count, due_at_ms, \
                     history_pruned_through, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    ns,
                    id,
                    instance.workflow_type,
                    instance.version,
                    revision,
                    pending,
                    instance.due_at_ms,
                    body
                ])
            });
        return match inserted {
            Ok(_) => Ok(0),
            Err(e) if is_constraint(&e) => Err(CommitError::Conflict.into()),
            Err(e) => Err(db(format_args!("create `{id}`"))(e).into()),
        };
    };
    let expected = int(expected, "revision")?;
    // No `RETURNING` here: SQLite runs it as a trigger, which makes the statement keep a
    // statement journal, allocated and freed on every write. Instead the `WHERE` clause also
    // checks what the store owns or never changes (the pruning mark, type and version); when
    // any of them differs the slow path below sorts it out. Type and version are not set:
    // naming them would make SQLite rewrite their index entry on every write.
    let update = |pruned_through: i64, workflow_type: &str, version: &str| {
        conn.prepare_cached(
            "UPDATE instances SET revision = ?3, pending_count = ?4, due_at_ms = ?5, body = ?6 \
             WHERE ns = ?1 AND id = ?2 AND revision = ?7 AND history_pruned_through = ?8 \
             AND workflow_type = ?9 AND version = ?10",
        )
        .and_then(|mut s| {
            s.execute(params![
                ns,
                id,
                revision,
                pending,
                instance.due_at_ms,
                body,
                expected,
                pruned_through,
                workflow_type,
                version,
            ])
        })
        .map_err(db(format_args!("write `{id}`")))
    };
    let pruned_through = clamp_u64(instance.history_pruned_through);
    if update(pruned_through, &instance.workflow_type, &instance.version)? == 1 {
        return Ok(instance.history_pruned_through);
    }
    let stored: Option<(i64, i64, String, String)> = conn
        .prepare_cached(
            "SELECT revision, history_pruned_through, workflow_type, version \
             FROM instances WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![ns, id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .map_err(db(format_args!("read `{id}`")))?;
    let Some((_, pruned, workflow_type, version)) = stored.filter(|s| s.0 == expected) else {
        return Err(CommitError::Conflict.into());
    };
    let stored_pruned = uint(pruned, "history_pruned_through")?;
    // The revision matches, so the caller's pruning mark was off, or (never done by the
    // engine, allowed by the contract) the type or version changes: the rare slow path.
    if update(pruned, &workflow_type, &version)? != 1 {
        return Err(CommitError::Conflict.into());
    }
    if workflow_type != instance.workflow_type || version != instance.version {
        conn.prepare_cached(
            "UPDATE instances SET workflow_type = ?3, version = ?4 WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| s.execute(params![ns, id, instance.workflow_type, instance.version]))
        .map_err(db(format_args!("write `{id}`")))
        .map_err(Refusal::after_writing)?;
    }
    Ok(stored_pruned)
}

/// The rest of a write set once its instance row is written: the turns, retention, and the
/// rare rewrite of the instance body when `history_pruned_through` moved.
fn finish_write(
    conn: &Connection,
    write: &WriteSet,
    bodies: &Bodies,
    instance: &InstanceRecord,
    stored_pruned: u64,
) -> Result<u64, CommitError> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    let mut pruned_through = stored_pruned;
    for (t, body) in write.turns.iter().zip(&bodies.turns) {
        write_turn(conn, ns, id, t, body)?;
    }
    if let Some(r) = write.retention {
        pruned_through = pruned_through.max(prune(conn, ns, id, r)?);
    }
    if pruned_through != instance.history_pruned_through {
        // Rare: the mark moved (retention) or the caller's copy was off.
        let mut stored = instance.clone();
        stored.history_pruned_through = pruned_through;
        let body = encode(&stored, "an instance")?;
        conn.prepare_cached(
            "UPDATE instances SET history_pruned_through = ?3, body = ?4 WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| s.execute(params![ns, id, clamp_u64(pruned_through), body]))
        .map_err(db(format_args!("write `{id}`")))?;
    }
    Ok(pruned_through)
}

/// Write one turn row: update the unfinished stored turn in place, or insert a new one.
fn write_turn(
    conn: &Connection,
    ns: &str,
    id: &str,
    t: &TurnRecord,
    body: &str,
) -> Result<(), CommitError> {
    let number = int(t.number, "turn number")?;
    // Update in place when the stored turn is unfinished with the same message id. Only a
    // finishing write names the indexed `finished` columns, so the common write (a step, a
    // claim, a heartbeat) touches the row alone and no index.
    let updated = if t.is_finished() {
        conn.prepare_cached(
            "UPDATE turns SET finished = 1, finished_at_ms = ?5, body = ?6 \
             WHERE ns = ?1 AND id = ?2 AND number = ?3 AND message_id = ?4 AND finished = 0",
        )
        .and_then(|mut s| {
            s.execute(params![
                ns,
                id,
                number,
                t.message_id,
                t.finished_at_ms,
                body
            ])
        })
    } else {
        conn.prepare_cached(
            "UPDATE turns SET body = ?5 \
             WHERE ns = ?1 AND id = ?2 AND number = ?3 AND message_id = ?4 AND finished = 0",
        )
        .and_then(|mut s| s.execute(params![ns, id, number, t.message_id, body]))
    }
    .map_err(db(format_args!("write turn {} of `{id}`", t.number)))?;
    if updated == 1 {
        return Ok(());
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO turns (ns, id, number, message_id, finished, finished_at_ms, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                ns,
                id,
                number,
                t.message_id,
                t.is_finished(),
                t.finished_at_ms,
                body
            ])
        });
    match inserted {
        Ok(_) => Ok(()),
        // The number is taken (finished, or another message id): the detailed checks decide.
        Err(e) if is_constraint(&e) && turn_exists(conn, ns, id, number)? => {
            refused_turn(conn, ns, id, t)
        }
        Err(e) if is_constraint(&e) => Err(StoreError(format!(
            "message id `{}` is already another turn of `{id}`",
            t.message_id
        ))
        .into()),
        Err(e) => Err(db(format_args!("write turn {} of `{id}`", t.number))(e).into()),
    }
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

/// Delete an instance with its turns, if its revision is the expected one.
fn delete(conn: &Connection, write: &WriteSet) -> Result<(), Refusal> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    let stored: Option<i64> = conn
        .prepare_cached("SELECT revision FROM instances WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.query_row(params![ns, id], |r| r.get(0)).optional())
        .map_err(db(format_args!("read the revision of `{id}`")))
        .map_err(Refusal::before_writing)?;
    let current = stored
        .map(|rev| uint(rev, "revision"))
        .transpose()
        .map_err(Refusal::before_writing)?;
    check_revision(current, write).map_err(Refusal::before_writing)?;
    conn.prepare_cached("DELETE FROM turns WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.execute(params![ns, id]))
        .map_err(db(format_args!("delete the turns of `{id}`")))
        .map_err(Refusal::after_writing)?;
    conn.prepare_cached("DELETE FROM instances WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.execute(params![ns, id]))
        .map_err(db(format_args!("delete `{id}`")))
        .map_err(Refusal::after_writing)?;
    Ok(())
}

/// Whether a turn row exists.
fn turn_exists(conn: &Connection, ns: &str, id: &str, number: i64) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT 1 FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3")
        .and_then(|mut s| s.exists(params![ns, id, number]))
        .map_err(db(format_args!("look up turn {number} of `{id}`")))
}

/// A turn upsert changed nothing: the stored turn is finished or has another message id.
/// An identical finished turn is fine (nothing to write); anything else is refused by name.
fn refused_turn(conn: &Connection, ns: &str, id: &str, t: &TurnRecord) -> Result<(), CommitError> {
    let number = int(t.number, "turn number")?;
    let old = load_turn_row(
        conn,
        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3",
        params![ns, id, number],
    )?;
    match old {
        Some(old) if old.message_id != t.message_id => {
            Err(StoreError(format!("turn {} changed its message id", t.number)).into())
        }
        Some(old) if old == *t => Ok(()),
        _ => Err(StoreError(format!(
            "turn {} of `{id}` is in history and cannot be rewritten",
            t.number
        ))
        .into()),
    }
}

/// Apply retention; answer the newest turn number it deleted (0 when none).
fn prune(conn: &Connection, ns: &str, id: &str, r: Retention) -> Result<u64, StoreError> {
    // Most commits find nothing old enough: one probe of the age index says so, before the
    // walk over the newest `keep_turns` turns below.
    let any_old = conn
        .prepare_cached(
            "SELECT 1 FROM turns INDEXED BY turns_finished_by_age \
             WHERE ns = ?1 AND id = ?2 AND finished = 1 AND finished_at_ms < ?3",
        )
        .and_then(|mut s| s.exists(params![ns, id, r.keep_since_ms]))
        .map_err(db(format_args!("look for old turns of `{id}`")))?;
    if !any_old {
        return Ok(0);
    }
    // The newest `keep_turns` finished turns stay whatever their age: find the newest
    // turn number past them (an index walk of `keep_turns` entries).
    let cutoff: Option<i64> = conn
        .prepare_cached(
            "SELECT number FROM turns WHERE ns = ?1 AND id = ?2 AND finished = 1 \
             ORDER BY number DESC LIMIT 1 OFFSET ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![ns, id, clamp_u64(r.keep_turns)], |row| row.get(0))
                .optional()
        })
        .map_err(db(format_args!("find the retention cutoff of `{id}`")))?;
    let Some(cutoff) = cutoff else { return Ok(0) };
    // Old turns come straight from the `turns_finished_by_age` index, so only turns past the age
    // limit are touched, never the whole history; those among the newest are skipped.
    // At most PRUNE_BATCH per commit; the rest goes with the next one.
    let doomed: Vec<i64> = conn
        .prepare_cached(
            "SELECT number FROM turns INDEXED BY turns_finished_by_age \
             WHERE ns = ?1 AND id = ?2 AND finished = 1 AND finished_at_ms < ?3 \
             AND number <= ?4 LIMIT ?5",
        )
        .and_then(|mut s| {
            s.query_map(
                params![ns, id, r.keep_since_ms, cutoff, PRUNE_BATCH],
                |row| row.get(0),
            )?
            .collect()
        })
        .map_err(db(format_args!("find turns of `{id}` to prune")))?;
    let mut through = 0;
    for n in doomed {
        conn.prepare_cached("DELETE FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3")
            .and_then(|mut s| s.execute(params![ns, id, n]))
            .map_err(db(format_args!("prune turn {n} of `{id}`")))?;
        through = through.max(uint(n, "turn number")?);
    }
    Ok(through)
}

// ---------------------------------------------------------------------------------------------
// Reads

fn load_turn_row(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<TurnRecord>, StoreError> {
    let body: Option<String> = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row(params, |r| r.get(0)).optional())
        .map_err(db("read a turn"))?;
    body.as_deref().map(decode_turn).transpose()
}

/// Deduplicated `(type, version)` pairs, so an instance is listed once.
fn distinct(workflows: &[WorkflowRef]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = workflows
        .iter()
        .map(|w| (w.workflow_type.clone(), w.version.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Run `f` in one read transaction, so several statements see one snapshot.
fn snapshot<T>(
    conn: &mut Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let tx = conn.transaction().map_err(db("begin a read"))?;
    let out = f(&tx)?;
    tx.commit().map_err(db("end a read"))?;
    Ok(out)
}

#[async_trait]
impl Store for SqliteStore {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        let key = (ns.to_owned(), id.to_owned());
        let gen = match self.shared.cache.get(&key) {
            Ok(record) => return Ok(Some(record)),
            Err(gen) => gen,
        };
        let shared = self.shared.clone();
        self.read(move |conn| {
            let body: Option<String> = conn
                .prepare_cached("SELECT body FROM instances WHERE ns = ?1 AND id = ?2")
                .and_then(|mut s| s.query_row(params![key.0, key.1], |r| r.get(0)).optional())
                .map_err(db(format_args!("read `{}`", key.1)))?;
            let Some(body) = body else {
                return Ok(None);
            };
            let record = decode_instance(&body)?;
            shared.cache.fill(key, record.clone(), gen);
            Ok(Some(record))
        })
        .await
    }

    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        // One owned key serves the cache lookup and, on a miss, moves into the read.
        let key = (ns.to_owned(), id.to_owned());
        if let Some(t) = self.shared.cache.turn(&key, number) {
            return Ok(Some(t));
        }
        let (ns, id) = key;
        let Ok(number) = i64::try_from(number) else {
            return Ok(None); // never stored
        };
        self.read(move |conn| {
            load_turn_row(
                conn,
                "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3",
                params![ns, id, number],
            )
        })
        .await
    }

    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let (ns, id, message_id) = (ns.to_owned(), id.to_owned(), message_id.to_owned());
        self.read(move |conn| {
            load_turn_row(
                conn,
                "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND message_id = ?3",
                params![ns, id, message_id],
            )
        })
        .await
    }

    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        range: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        if range.limit == 0 {
            return Ok(Vec::new());
        }
        let (ns, id) = (ns.to_owned(), id.to_owned());
        // Turn numbers are never negative, so -1 means "from the start".
        let after = range.after.map_or(-1, clamp_u64);
        self.read(move |conn| {
            // `finished` is spelled out, not bound, so that the planner can use the partial
            // index of unfinished turns.
            let sql = if range.finished {
                "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND finished = 1 \
                 AND number > ?3 ORDER BY number LIMIT ?4"
            } else {
                "SELECT body FROM turns INDEXED BY turns_unfinished \
                 WHERE ns = ?1 AND id = ?2 AND finished = 0 \
                 AND number > ?3 ORDER BY number LIMIT ?4"
            };
            let bodies: Vec<String> = conn
                .prepare_cached(sql)
                .and_then(|mut s| {
                    s.query_map(params![ns, id, after, clamp_usize(range.limit)], |r| {
                        r.get(0)
                    })?
                    .collect()
                })
                .map_err(db(format_args!("list the turns of `{id}`")))?;
            bodies.iter().map(|b| decode_turn(b)).collect()
        })
        .await
    }

    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        // Only the conditions in use, so the planner can seek on the cursor.
        let mut sql = String::from("SELECT body FROM instances WHERE ns = ?1");
        if filter.workflow_type.is_some() {
            sql.push_str(" AND workflow_type = ?2");
        }
        if filter.version.is_some() {
            sql.push_str(" AND version = ?3");
        }
        if filter.after.is_some() {
            sql.push_str(" AND id > ?4");
        }
        sql.push_str(" ORDER BY id LIMIT ?5");
        let ns = ns.to_owned();
        self.read(move |conn| {
            let bodies: Vec<String> = conn
                .prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_map(
                        params![
                            ns,
                            filter.workflow_type,
                            filter.version,
                            filter.after,
                            clamp_usize(filter.limit)
                        ],
                        |r| r.get(0),
                    )?
                    .collect()
                })
                .map_err(db("list instances"))?;
            bodies.iter().map(|b| decode_instance(b)).collect()
        })
        .await
    }

    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        let (ns, workflow_type) = (ns.to_owned(), workflow_type.to_owned());
        let version = version.map(str::to_owned);
        self.read(move |conn| {
            let sql = if version.is_some() {
                "SELECT COUNT(*), COALESCE(SUM(pending_count > 0), 0) FROM instances \
                 WHERE ns = ?1 AND workflow_type = ?2 AND version = ?3"
            } else {
                "SELECT COUNT(*), COALESCE(SUM(pending_count > 0), 0) FROM instances \
                 WHERE ns = ?1 AND workflow_type = ?2 AND ?3 IS NULL"
            };
            let (all, with): (i64, i64) = conn
                .prepare_cached(sql)
                .and_then(|mut s| {
                    s.query_row(params![ns, workflow_type, version], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                })
                .map_err(db("count instances"))?;
            Ok((uint(all, "count")?, uint(with, "count")?))
        })
        .await
    }

    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let workflows = distinct(workflows);
        if workflows.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let ns = ns.to_owned();
        let max = clamp_usize(limit);
        self.read(move |conn| {
            snapshot(conn, |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT due_at_ms, id FROM instances \
                         WHERE ns = ?1 AND workflow_type = ?2 AND version = ?3 \
                           AND due_at_ms <= ?4 \
                         ORDER BY due_at_ms, id LIMIT ?5",
                    )
                    .map_err(db("list due instances"))?;
                let mut due: Vec<(Millis, String)> = Vec::new();
                for (workflow_type, version) in &workflows {
                    let rows = stmt
                        .query_map(params![ns, workflow_type, version, now, max], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })
                        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                        .map_err(db("list due instances"))?;
                    due.extend(rows);
                }
                due.sort();
                due.truncate(limit);
                Ok(due.into_iter().map(|(_, id)| id).collect())
            })
        })
        .await
    }

    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        let workflows = distinct(workflows);
        if workflows.is_empty() {
            return Ok(None);
        }
        let ns = ns.to_owned();
        self.read(move |conn| {
            snapshot(conn, |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT due_at_ms FROM instances \
                         WHERE ns = ?1 AND workflow_type = ?2 AND version = ?3 \
                           AND due_at_ms IS NOT NULL \
                         ORDER BY due_at_ms LIMIT 1",
                    )
                    .map_err(db("find the next due time"))?;
                let mut next: Option<Millis> = None;
                for (workflow_type, version) in &workflows {
                    let t: Option<Millis> = stmt
                        .query_row(params![ns, workflow_type, version], |r| r.get(0))
                        .optional()
                        .map_err(db("find the next due time"))?;
                    next = match (next, t) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Ok(next)
            })
        })
        .await
    }

    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        let bodies = Bodies::of(&write)?;
        let (reply, answer) = oneshot::channel();
        let sent = match &self.shared.tx {
            Some(tx) => tx
                .send(Request {
                    write,
                    bodies,
                    reply,
                })
                .is_ok(),
            None => false,
        };
        let stopped = || StoreError("sqlite: the writer thread has stopped".into());
        if !sent {
            return Err(stopped().into());
        }
        answer.await.map_err(|_| stopped())?
    }
}
