//! The SQLite store; its design is documented on [`SqliteStore`].

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use tokio::sync::{oneshot, watch};

use super::support::{clamp, decode, decode_run, Int64Columns};
use super::*;

mod cache;
mod files;
mod quarantine;
mod schedule;
mod sync;
mod writer;

use cache::{Cache, Change, Verdict};
use files::Health;
use quarantine::Quarantine;
use schedule::Schedule;
use sync::{SyncJob, Syncer, Unsynced};
use writer::{Bodies, Request, Writer, WriterConfig};

/// An instance's address: namespace and id.
type Key = (String, String);

/// An instance's address, borrowed or owned: the maps keyed by [`Key`] are searched with a
/// `&dyn KeyRef`, so that a lookup by `(&str, &str)` allocates no key. It hashes and compares
/// as the tuple does (each part in order), which `Borrow` requires.
pub(super) trait KeyRef {
    /// The namespace.
    fn ns(&self) -> &str;
    /// The instance id.
    fn id(&self) -> &str;
}

impl KeyRef for Key {
    fn ns(&self) -> &str {
        &self.0
    }
    fn id(&self) -> &str {
        &self.1
    }
}

impl KeyRef for (&str, &str) {
    fn ns(&self) -> &str {
        self.0
    }
    fn id(&self) -> &str {
        self.1
    }
}

impl<'a> std::borrow::Borrow<dyn KeyRef + 'a> for Key {
    fn borrow(&self) -> &(dyn KeyRef + 'a) {
        self
    }
}

impl std::hash::Hash for dyn KeyRef + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.ns().hash(state);
        self.id().hash(state);
    }
}

impl PartialEq for dyn KeyRef + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.ns() == other.ns() && self.id() == other.id()
    }
}

impl Eq for dyn KeyRef + '_ {}

/// This store, as its messages name it.
const STORE: &str = "sqlite";
/// The file keeps signed 64-bit integers.
const INTS: Int64Columns = Int64Columns(STORE);

/// The schema version this code writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 5;
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
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY,
    ns TEXT NOT NULL,
    id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    instance TEXT NOT NULL,
    turns TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    ns TEXT NOT NULL,
    run_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (ns, run_id)
);
CREATE INDEX IF NOT EXISTS runs_by_instance ON runs (ns, instance_id, run_id);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (ns, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_by_end ON runs (ended_at_ms);
CREATE TABLE IF NOT EXISTS schemas (
    ns TEXT NOT NULL,
    workflow_type TEXT NOT NULL,
    version TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (ns, workflow_type, version)
);
CREATE TABLE IF NOT EXISTS quarantine (
    seq INTEGER PRIMARY KEY,
    ns TEXT NOT NULL,
    id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    instance TEXT NOT NULL,
    turns TEXT NOT NULL,
    reason TEXT NOT NULL
);
";

/// The `PRAGMA synchronous` level used for durable commits.
///
/// The store always runs in WAL mode, where the levels mean:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Synchronous {
    /// `FULL`: the WAL is synced before a durable commit is answered (on the sync thread,
    /// see [`SqliteOptions::sync_thread`], or in the `COMMIT`), so an acknowledged
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
    /// [`Synchronous::Full`]). Without the sync thread, batches of only relaxed write sets
    /// use `OFF`.
    pub synchronous: Synchronous,
    /// With [`Synchronous::Full`]: sync the write-ahead log on a thread of its own, while the
    /// writer goes on with the next batch, instead of in each `COMMIT` (default `true`; no
    /// effect at the other levels). Durability is the same either way: a durable commit is
    /// answered only once the log holding it is synced, and no read returns it before. See
    /// *Syncing* on [`SqliteStore`].
    pub sync_thread: bool,
    /// At most this many write sets are committed in one transaction (default 256; 0 counts
    /// as 1).
    pub max_batch: usize,
    /// About how many decoded instances the read cache keeps (default 10 000; 0 disables it,
    /// and with it the journal).
    pub cache_instances: usize,
    /// A running turn's writes are appended to a journal and written into the tables later,
    /// at the latest once this many were journaled (default 4096; 0 disables the journal and
    /// writes every write set into the tables at once). See [`SqliteStore`].
    pub journal_rows: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            sync_thread: true,
            max_batch: 256,
            cache_instances: 10_000,
            journal_rows: 4096,
        }
    }
}

impl SqliteOptions {
    /// Sets [`synchronous`](Self::synchronous).
    pub fn with_synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Sets [`sync_thread`](Self::sync_thread).
    pub fn with_sync_thread(mut self, sync_thread: bool) -> Self {
        self.sync_thread = sync_thread;
        self
    }

    /// Sets [`max_batch`](Self::max_batch).
    pub fn with_max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Sets [`journal_rows`](Self::journal_rows).
    pub fn with_journal_rows(mut self, journal_rows: usize) -> Self {
        self.journal_rows = journal_rows;
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
/// - `journal(seq, ns, id, revision, instance, turns)`: write sets not yet written into the
///   two tables above (see *The journal* below); empty whenever the store is closed cleanly.
/// - `quarantine(seq, ns, id, revision, instance, turns, reason)`: journaled write sets that
///   could not be decoded when the store opened, kept as they were; their instances are
///   quarantined (see *Records that cannot be read* below).
///
/// - `runs(ns, run_id, instance_id, started_at_ms, ended_at_ms, outcome, body)`: one row per
///   run summary ([`WorkflowRun`]), written in the write set that ends the run.
/// - `schemas(ns, workflow_type, version, body)`: the registered schema documents.
///
/// The schema version is kept in `PRAGMA user_version` (now 5); files of versions 1 to 4 are
/// migrated when opened (version 1's two full `finished` indexes are replaced by the partial
/// ones; the journal, quarantine, runs and schemas tables are added). Version 5 also lets
/// instance bodies carry schedules and a child-outcome outbox, which a turnwise of version 4
/// would drop when it rewrote the record. A file of a newer version is refused.
///
/// Records are stored as `serde_json` text; with the crate's `exact-numbers` feature numbers
/// round-trip exactly as written (`1.10` stays `1.10`). Open a store written with that
/// feature (the server's) from builds with it too: without it, numbers are rounded to `f64`
/// when read and one beyond `f64`'s range makes its record unreadable.
///
/// # Records that cannot be read
///
/// A record that serde_json's default decoder refuses for its depth is decoded again without
/// the recursion limit, after a scan of how deeply it nests (at most 256 levels are decoded;
/// the engine writes at most about 72). An instance with
/// a record that still cannot be decoded is *quarantined*: its reads answer
/// [`StoreError::Unreadable`], it leaves the schedule and listings, the problem is logged once,
/// and every other instance is served. [`Store::delete_unreadable`] deletes it with all its
/// rows. `docs/architecture.md` §7 has the whole story.
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
/// is committed once, and every caller is answered only after that `COMMIT` returned, and a
/// durable one only once the WAL holding it is synced: an acknowledged
/// [`Durability::Durable`] write is on stable storage. If the `COMMIT` fails,
/// every write set of the batch fails with [`CommitError::Store`].
///
/// Without the sync thread (below), a batch made only of [`Durability::Relaxed`] write sets is
/// committed with `PRAGMA synchronous=OFF`: in WAL mode it survives the death of the process,
/// and the next durable commit syncs it too. WAL checkpoints never run at `OFF` (an unsynced
/// checkpoint could lose earlier durable commits on power loss): they wait for the next durable
/// batch, or for the writer's own checkpoint at the configured level after a long relaxed-only
/// run.
///
/// # Syncing
///
/// With [`Synchronous::Full`] and [`SqliteOptions::sync_thread`] (both the default), the
/// `COMMIT` does not sync: the writer commits every batch at `synchronous=NORMAL`, which writes
/// the batch to the WAL, and passes the answers of its durable write sets to a second thread.
/// That thread syncs the WAL (`fdatasync`; one sync covers every batch written before it) and
/// then answers them, while the writer is already applying the next batch. Relaxed write sets
/// and refusals are answered right after the `COMMIT`. Checkpoints stay at `NORMAL`, where
/// SQLite syncs the WAL before it copies it into the database file and the file afterwards.
///
/// A batch is visible to reads once it is committed, which is now before it is synced. So no
/// read returns a durable write a power loss could still take back: every read of an instance
/// first waits until the durable batches that last wrote that instance are synced (at once,
/// when they are), and listing or counting instances waits for every durable batch committed
/// so far. If a sync fails, its durable callers get [`CommitError::Store`], and so does every
/// later durable commit and every read that would have to wait for an unsynced write: the
/// kernel may have dropped what it failed to write, so the store must be reopened.
///
/// # The journal
///
/// Most write sets of a busy store belong to an inbox at work: an admission, a claim, an
/// operation start, a checkpoint, a completion. Written into the tables, each would rewrite an
/// instance row and a turn row of about a kilobyte each, plus index entries, on pages of their
/// own: a few 4 KiB pages per write set, every one of them written to the WAL and copied again
/// by the next checkpoint. So such a write set is instead appended to `journal` as one row
/// (the instance and its changed turns as JSON), which packs several write sets into one page.
/// The decoded records stay in memory as *dirty* cache entries, which every read consults
/// first or merges with what it reads from the tables. Later the writer *flushes*: it writes
/// each dirty instance's newest rows into the tables once, however many journal rows it had,
/// and empties the journal, in one transaction. It flushes after
/// [`SqliteOptions::journal_rows`] journaled write sets, when more than a thousand instances are
/// dirty, when it has been idle for 50 ms, and when the store closes. When the store opens, it
/// replays whatever a crash left in the journal before anything else.
///
/// A write set goes to the journal only when the cache holds the instance it changes and it
/// keeps the instance's type, version and pruning mark; every turn it writes is then one of
/// the instance's unfinished turns (same message id) or a new one (a number and message id the
/// store has never kept), and its retention has nothing to delete. Anything else, such as a
/// create, a delete, pruning or an attempt to rewrite history, is applied to the tables, after
/// the instance's dirty rows were written there. A journaled write set is as durable as any
/// other: the journal row is part of the same batch transaction.
///
/// The schedule index lives in memory, loaded when the store opens and updated by the writer
/// after every `COMMIT`, so that claims find due instances without a query and journaled due
/// times count at once. The `due_at_ms` column and its index are kept for that load.
///
/// # Reads
///
/// Reads run on a small pool of read-only connections through
/// [`tokio::task::spawn_blocking`], so they never block the async runtime and never wait for
/// the writer (WAL readers see the last committed state). [`Store::load_instance`] and
/// [`Store::load_turn`] are served from a bounded write-through cache of decoded instances
/// when possible, [`Store::due`] and [`Store::next_due`] from the schedule in memory. Reads
/// that may meet rows a journaled write has made stale take the dirty records in their place;
/// such a read is done again if a flush wrote dirty rows into the tables while it ran.
///
/// # One store per file
///
/// A file is written by one [`SqliteStore`] at a time: one process, and one `open` per file
/// inside it (clone the handle to share it). The store keeps a cache and a schedule that only
/// its own writer updates; a second writer on the same file would hand out turns twice. So
/// `open` first takes an exclusive lock (`flock`) on `<db>.lock`, next to the database, and
/// writes its process id into it; if another store holds it, in this process or another, `open`
/// fails at once with [`StoreError::Locked`] naming the file and that pid. The lock is held
/// until the last handle is dropped (after the database is closed), and the kernel releases it
/// when the process dies, even by SIGKILL; the pid in the file is only for the message.
///
/// # Storage faults
///
/// The store records the device and inode of the database file, its write-ahead log and the
/// lock file when it opens, and compares them with what the paths name before every durable
/// answer (after every sync, or before every durable transaction without the sync thread) and
/// in [`Store::health`]. If one was deleted or replaced, the
/// writes would go to a file that no longer has a name and be lost when the process stops: so
/// from then on every write fails with a [`StoreError`] naming the file (logged once at error
/// level). [`Store::health`] also fails after a failed sync (for good) and after a failed write
/// transaction (until one commits again).
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

/// A store's files, opened and read, before its threads start.
struct Opened {
    path: PathBuf,
    options: SqliteOptions,
    /// Whether a syncer thread makes commits durable.
    threaded: bool,
    /// The writer's `synchronous` level.
    level: Synchronous,
    locked: std::fs::File,
    conn: Connection,
    schedule: Arc<Schedule>,
    quarantine: Quarantine,
    health: Arc<Health>,
    stats: Arc<StatsCounters>,
    unsynced: Arc<Unsynced>,
}

impl Opened {
    /// Take the file's lock, open it, replay its journal and load its indexes.
    async fn open(path: &Path, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        // With a sync thread, commits only write the log; the syncer makes them durable.
        let threaded = options.synchronous == Synchronous::Full && options.sync_thread;
        let level = if threaded {
            Synchronous::Normal
        } else {
            options.synchronous
        };
        let opened = {
            let path = path.clone();
            let synchronous = level;
            tokio::task::spawn_blocking(move || {
                // First the lock, so that nothing of the file is touched while another store
                // has it; released when `locked` is dropped, here on failure.
                let (locked, lock_path) = files::take_lock(&path)?;
                let conn = open_writer(&path, synchronous)?;
                replay_journal(&conn, &path)?;
                let schedule = Schedule::load(&conn)?;
                let quarantine = Quarantine::load(&conn)?;
                quarantine.unschedule(&schedule);
                let health = Health::new(&path, &lock_path)?;
                Ok::<_, StoreError>((locked, conn, schedule, quarantine, health))
            })
            .await
            .map_err(|e| StoreError::caused("sqlite: open task failed", e))??
        };
        let (locked, conn, schedule, quarantine, health) = opened;
        Ok(Self {
            path,
            options,
            threaded,
            level,
            locked,
            conn,
            schedule: Arc::new(schedule),
            quarantine,
            health: Arc::new(health),
            stats: Arc::new(StatsCounters::default()),
            unsynced: Arc::new(Unsynced::new()),
        })
    }

    /// The syncer with the sender of its jobs, when commits are synced on a thread of their own.
    fn syncer(&self) -> Option<(mpsc::Sender<SyncJob>, Syncer)> {
        if !self.threaded {
            return None;
        }
        let (jobs, rx) = mpsc::channel();
        let syncer = Syncer::new(rx, &self.path, self.unsynced.clone(), self.stats.clone())
            .watching(self.health.clone());
        Some((jobs, syncer))
    }

    /// Start the syncer (if any) and the writer, and hand out the store.
    fn start(
        self,
        syncer: Option<(mpsc::Sender<SyncJob>, Syncer)>,
    ) -> Result<SqliteStore, StoreError> {
        let Self {
            path,
            options,
            threaded: _,
            level,
            locked,
            conn,
            schedule,
            quarantine,
            health,
            stats,
            unsynced,
        } = self;
        let cache = Arc::new(Cache::new(options.cache_instances));
        let (tx, rx) = mpsc::channel();
        let syncer = match syncer {
            Some((jobs, syncer)) => {
                let thread = std::thread::Builder::new()
                    .name("turnwise-sqlite-syncer".into())
                    .spawn(move || syncer.run())
                    .map_err(|e| StoreError::caused("sqlite: start the syncer thread", e))?;
                Some((jobs, thread))
            }
            None => None,
        };
        let writer = Writer::new(
            conn,
            rx,
            cache.clone(),
            schedule.clone(),
            stats.clone(),
            WriterConfig {
                synchronous: level,
                max_batch: options.max_batch,
                journal_rows: options.journal_rows,
                syncer,
                unsynced: unsynced.clone(),
                health: health.clone(),
            },
        );
        let thread = std::thread::Builder::new()
            .name("turnwise-sqlite-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| StoreError::caused("sqlite: start the writer thread", e))?;
        Ok(SqliteStore {
            shared: Arc::new(Shared {
                path,
                tx: Some(tx),
                thread: Some(thread),
                readers: Mutex::new(Vec::new()),
                cache,
                schedule,
                stats,
                unsynced,
                health,
                in_flight: AtomicUsize::new(0),
                quarantine,
                _lock: locked,
            }),
        })
    }
}

impl SqliteStore {
    /// Open (or create) the store at `path` with the default [`SqliteOptions`].
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Open (or create) the store at `path`.
    ///
    /// Takes the file's lock, creates the file and its schema if missing, switches it to WAL
    /// mode and starts the writer thread. Fails with [`StoreError::Locked`] if another store
    /// has the file open (see *One store per file* on [`SqliteStore`]), and if the file is not
    /// a turnwise store or has a schema newer than this version of turnwise understands.
    pub async fn open_with(path: &Path, options: SqliteOptions) -> Result<Self, StoreError> {
        let opened = Opened::open(path, options).await?;
        let syncer = opened.syncer();
        opened.start(syncer)
    }

    /// [`SqliteStore::open_with`], with a syncer that takes one message from `gate` before each
    /// sync: how tests hold syncs back.
    #[cfg(test)]
    async fn open_gated(
        path: &Path,
        options: SqliteOptions,
        gate: mpsc::Receiver<()>,
    ) -> Result<Self, StoreError> {
        let opened = Opened::open(path, options).await?;
        let syncer = opened
            .syncer()
            .map(|(jobs, syncer)| (jobs, syncer.gated(gate)));
        opened.start(syncer)
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
            journaled: s.journaled.load(Ordering::Acquire),
            flushes: s.flushes.load(Ordering::Acquire),
            syncs: s.syncs.load(Ordering::Acquire),
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
            .map_err(|e| StoreError::caused("sqlite: read task failed", e))?
    }

    /// Like [`SqliteStore::read`], for reads that merge rows of the tables with the dirty
    /// (journaled) records of [`Cache`]: `take` copies what the read needs of the dirty
    /// entries, then `f` reads the tables with it, then `fix` may touch the result up with the
    /// dirty entries as they are by then. The result is kept only if no dirty instance's rows
    /// were written into the tables in between; otherwise it is all done again (such commits
    /// are rare and short).
    async fn read_merged<S, T, A, F, G>(&self, take: A, f: F, fix: G) -> Result<T, StoreError>
    where
        T: Send + 'static,
        A: Fn(&cache::Dirty<'_>) -> S + Send + 'static,
        F: Fn(&Connection, S) -> Result<T, StoreError> + Send + 'static,
        G: Fn(&cache::Dirty<'_>, &mut T) + Send + 'static,
    {
        let shared = self.shared.clone();
        self.read(move |conn| {
            let give_up = std::time::Instant::now() + MERGE_PATIENCE;
            while std::time::Instant::now() < give_up {
                let Some((mark, taken)) = shared.cache.before_read(&take) else {
                    // The writer is committing dirty rows into the tables: a moment.
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                };
                let mut out = f(conn, taken)?;
                if shared.cache.unchanged(mark, &mut out, &fix) {
                    return Ok(out);
                }
            }
            Err(StoreError::new(
                "sqlite: the journal was being written into the tables during every attempt \
                 at a read for 5 s; try again",
            ))
        })
        .await
    }
}

/// How long a merging read keeps trying (see [`SqliteStore::read_merged`]).
const MERGE_PATIENCE: Duration = Duration::from_secs(5);

struct Shared {
    path: PathBuf,
    // The writer's inbox; taken in `drop` to stop the writer.
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
    readers: Mutex<Vec<Connection>>,
    cache: Arc<Cache>,
    schedule: Arc<Schedule>,
    stats: Arc<StatsCounters>,
    /// Which durable commits are not synced yet, for the reads that must wait for them.
    unsynced: Arc<Unsynced>,
    /// Whether the files are still the ones opened, and how the last write ended.
    health: Arc<Health>,
    /// Commits sent to the writer and not yet answered.
    in_flight: AtomicUsize,
    /// Instances with a record that cannot be decoded.
    quarantine: Quarantine,
    /// The open lock file, whose lock keeps other stores off the file. Dropped after
    /// [`Shared::drop`] has closed the database.
    _lock: std::fs::File,
}

/// How long a commit that is the only one in flight polls for its answer before it lets its
/// task sleep (see [`SqliteStore::commit`]): about one synced commit on a fast disk.
const ALONE_SPIN: Duration = Duration::from_micros(300);

/// Counts a commit in flight while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    /// Count one more commit in flight; whether it is the only one.
    fn start(count: &'a AtomicUsize) -> (Self, bool) {
        let before = count.fetch_add(1, Ordering::AcqRel);
        (Self(count), before == 0)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
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
    /// Of those, batches holding at least one [`Durability::Durable`] write set: with
    /// [`Synchronous::Full`], one WAL sync each in its `COMMIT`, or at most one each on the
    /// sync thread (see [`syncs`](Self::syncs)). The others held only relaxed write sets, and
    /// no answer of theirs waited for a sync.
    pub durable_batches: u64,
    /// Write sets applied by committed batches (conflicting or refused ones are not counted).
    pub write_sets: u64,
    /// Batches applied a second time with a savepoint around each write set, because one of
    /// their write sets was refused after it had written rows (see [`SqliteStore`]). Rare:
    /// revision conflicts are refused before anything is written.
    pub guarded_retries: u64,
    /// Of the applied write sets, those appended to the journal instead of written into the
    /// tables (a running turn's writes, see [`SqliteStore`]).
    pub journaled: u64,
    /// Times the journal was emptied by writing its rows into the tables.
    pub flushes: u64,
    /// Syncs of the write-ahead log by the sync thread (see [`SqliteOptions::sync_thread`]);
    /// each makes every commit before it durable, so one may serve several durable batches.
    /// Zero without the sync thread, where each durable batch syncs in its `COMMIT`.
    pub syncs: u64,
}

/// The writer's counters, shared with the store handles.
#[derive(Debug, Default)]
struct StatsCounters {
    batches: AtomicU64,
    durable_batches: AtomicU64,
    write_sets: AtomicU64,
    guarded_retries: AtomicU64,
    journaled: AtomicU64,
    flushes: AtomicU64,
    syncs: AtomicU64,
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

/// Poll `rx` for up to `spin`, yielding the thread between polls: what it received, or why
/// nothing (`Empty` once the time is up). A thread that is handed work every few tens of
/// microseconds saves its wake-up this way, at the price of a little CPU after each piece.
fn poll_for<T>(rx: &mpsc::Receiver<T>, spin: Duration) -> Result<T, mpsc::TryRecvError> {
    let until = std::time::Instant::now() + spin;
    loop {
        match rx.try_recv() {
            Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() < until => {
                std::thread::yield_now();
            }
            other => return other,
        }
    }
}

/// Lock a mutex, ignoring poisoning: every critical section here leaves its data consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Map a rusqlite error to a [`StoreError`] saying what was being done.
fn db(what: impl fmt::Display) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |e| StoreError::caused(format_args!("sqlite: {what}"), e)
}

fn encode<T: Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::caused(format_args!("sqlite: encode {what}"), e))
}

impl Shared {
    /// Decode the stored record of instance `key`, quarantining the instance if it cannot be.
    fn decode_instance(&self, key: &Key, body: &str) -> Result<InstanceRecord, StoreError> {
        decode(body).map_err(|e| {
            self.quarantine
                .hold(key, format!("its instance record: {e}"), &self.schedule)
        })
    }

    /// Decode a stored turn of instance `key`, quarantining the instance if it cannot be.
    fn decode_turn(&self, key: &Key, body: &str) -> Result<TurnRecord, StoreError> {
        decode(body).map_err(|e| {
            self.quarantine
                .hold(key, format!("a turn record: {e}"), &self.schedule)
        })
    }
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
        return Err(StoreError::new(format!(
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
        return Err(StoreError::new(format!(
            "sqlite: {shown} is not a turnwise store (application_id {app}, user_version {version})"
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::new(format!(
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

/// On open: write what the journal holds into the tables and empty it.
///
/// The journal holds the running turns' writes committed since its last flush, oldest first
/// (see [`SqliteStore`]). A row whose revision is not above its instance's stored one was
/// already written into the tables (a later direct write carried it along) and is skipped;
/// of the rest, the newest instance row and the newest version of each turn are written.
fn replay_journal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let shown = path.display();
    writer::exec(conn, "BEGIN IMMEDIATE").map_err(db(format_args!("lock {shown}")))?;
    let replayed = (|| {
        let rows: Vec<(String, String, i64, String, String)> = conn
            .prepare("SELECT ns, id, revision, instance, turns FROM journal ORDER BY seq")
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?
                .collect()
            })
            .map_err(db(format_args!("read the journal of {shown}")))?;
        if rows.is_empty() {
            return Ok(());
        }
        // Per instance: the stored revision, the newest journaled instance row, and the newest
        // version of each journaled turn (decoded and encoded once each, at the end).
        struct Newest {
            stored: u64,
            instance: Option<String>,
            turns: HashMap<u64, TurnRecord>,
        }
        let mut newest: HashMap<Key, Option<Newest>> = HashMap::new();
        // Instances with a journaled write that cannot be decoded, and why.
        let mut bad: HashMap<Key, String> = HashMap::new();
        for (ns, id, revision, instance, turns) in rows {
            let revision = INTS.uint(revision, "journal revision")?;
            let key = (ns, id);
            if bad.contains_key(&key) {
                continue;
            }
            if !newest.contains_key(&key) {
                let stored: Option<i64> = conn
                    .prepare_cached("SELECT revision FROM instances WHERE ns = ?1 AND id = ?2")
                    .and_then(|mut s| s.query_row(params![key.0, key.1], |r| r.get(0)).optional())
                    .map_err(db(format_args!("read `{}`", key.1)))?;
                // `None`: deleted since, nothing to write.
                let entry = stored
                    .map(|s| INTS.uint(s, "revision"))
                    .transpose()?
                    .map(|stored| Newest {
                        stored,
                        instance: None,
                        turns: HashMap::new(),
                    });
                newest.insert(key.clone(), entry);
            }
            let Some(Some(entry)) = newest.get_mut(&key) else {
                continue;
            };
            if revision <= entry.stored {
                continue;
            }
            let turns: Vec<TurnRecord> = match decode(&turns) {
                Ok(turns) => turns,
                Err(e) => {
                    bad.insert(key.clone(), format!("a journaled write of its turns: {e}"));
                    newest.insert(key, None);
                    continue;
                }
            };
            entry.turns.extend(turns.into_iter().map(|t| (t.number, t)));
            entry.instance = Some(instance);
        }
        for ((ns, id), entry) in newest {
            let Some(Newest {
                instance: Some(body),
                turns,
                ..
            }) = entry
            else {
                continue;
            };
            let record: InstanceRecord = match decode(&body) {
                Ok(record) => record,
                Err(e) => {
                    bad.insert((ns, id), format!("a journaled write of its record: {e}"));
                    continue;
                }
            };
            let bodies = turns
                .values()
                .map(|t| Ok((t, encode(t, "a turn")?)))
                .collect::<Result<Vec<_>, StoreError>>()?;
            writer::put_rows(
                conn,
                &ns,
                &id,
                (
                    record.revision,
                    clamp(record.pending.len()),
                    record.due_at_ms,
                    &body,
                ),
                bodies.iter().map(|(t, b)| writer::TurnRow::of(t, b)),
            )?;
        }
        // What cannot be decoded is kept, as it was, in the quarantine table, never dropped.
        for ((ns, id), reason) in &bad {
            conn.execute(
                "INSERT INTO quarantine (ns, id, revision, instance, turns, reason) \
                 SELECT ns, id, revision, instance, turns, ?3 FROM journal \
                 WHERE ns = ?1 AND id = ?2 ORDER BY seq",
                params![ns, id, reason],
            )
            .map_err(db(format_args!(
                "quarantine the journal rows of `{id}` in {shown}"
            )))?;
        }
        writer::exec(conn, "DELETE FROM journal")
            .map_err(db(format_args!("empty the journal of {shown}")))?;
        Ok(())
    })();
    let end = if replayed.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    writer::exec(conn, end).map_err(db(format_args!("replay the journal of {shown}")))?;
    replayed
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
// Reads

fn load_turn_row(
    shared: &Shared,
    key: &Key,
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<TurnRecord>, StoreError> {
    let body: Option<String> = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row(params, |r| r.get(0)).optional())
        .map_err(db("read a turn"))?;
    body.map(|b| shared.decode_turn(key, &b)).transpose()
}

/// Deduplicated `(type, version)` pairs, so an instance is listed once.
fn distinct(workflows: &[WorkflowRef]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = workflows
        .iter()
        .map(|w| (w.workflow_type.as_str(), w.version.as_str()))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[async_trait]
impl Store for SqliteStore {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        self.shared.quarantine.check(ns, id)?;
        let gen = match self.shared.cache.get(&(ns, id)) {
            Ok(record) => {
                self.shared.unsynced.settle_instance(ns, id).await?;
                return Ok(Some(record));
            }
            Err(gen) => gen,
        };
        let key = (ns.to_owned(), id.to_owned());
        let shared = self.shared.clone();
        let read = self
            .read(move |conn| {
                let body: Option<String> = conn
                    .prepare_cached("SELECT body FROM instances WHERE ns = ?1 AND id = ?2")
                    .and_then(|mut s| s.query_row(params![key.0, key.1], |r| r.get(0)).optional())
                    .map_err(db(format_args!("read `{}`", key.1)))?;
                let Some(body) = body else {
                    return Ok(None);
                };
                let record = shared.decode_instance(&key, &body)?;
                shared.cache.fill(key, record.clone(), gen);
                Ok(Some(record))
            })
            .await?;
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(read)
    }

    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.shared.quarantine.check(ns, id)?;
        let read = match self.shared.cache.turn(&(ns, id), number) {
            Some(t) => Some(t),
            None => {
                let key = (ns.to_owned(), id.to_owned());
                let Ok(number) = i64::try_from(number) else {
                    return Ok(None); // never stored
                };
                let shared = self.shared.clone();
                self.read(move |conn| {
                    load_turn_row(
                        &shared,
                        &key,
                        conn,
                        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3",
                        params![key.0, key.1, number],
                    )
                })
                .await?
            }
        };
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(read)
    }

    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.shared.quarantine.check(ns, id)?;
        let key = (ns.to_owned(), id.to_owned());
        let message_id = message_id.to_owned();
        let at = message_id.clone();
        let shared = self.shared.clone();
        // A journaled turn is found in the cache; any other is in the tables, whose row for it
        // no flush changes (message ids never change, and the journal takes no deletes).
        let found = self
            .read_merged(
                move |dirty| dirty.turn_by_message(&key, &at).cloned().ok_or(key.clone()),
                move |conn, taken| match taken {
                    Ok(journaled) => Ok(Some(journaled)),
                    Err(key) => load_turn_row(
                        &shared,
                        &key,
                        conn,
                        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND message_id = ?3",
                        params![key.0, key.1, message_id],
                    ),
                },
                |_, _| {},
            )
            .await?;
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(found)
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
        self.shared.quarantine.check(ns, id)?;
        let key = (ns.to_owned(), id.to_owned());
        let (at_ns, at_id) = key.clone();
        let shared = self.shared.clone();
        let at_key = key.clone();
        // Turn numbers are never negative, so -1 means "from the start".
        let after = range.after.map_or(-1, clamp);
        let listed = self
            .read_merged(
                move |dirty| dirty.turns(&key),
                move |conn, journaled: Option<Vec<TurnRecord>>| {
                    // `finished` is spelled out, not bound, so that the planner can use the
                    // partial index of unfinished turns. Journaled turns come from the cache, in
                    // place of whatever the tables hold for their numbers.
                    let sql = if range.finished {
                        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND finished = 1 \
                     AND number > ?3 AND number NOT IN (SELECT value FROM json_each(?5)) \
                     ORDER BY number LIMIT ?4"
                    } else {
                        "SELECT body FROM turns INDEXED BY turns_unfinished \
                     WHERE ns = ?1 AND id = ?2 AND finished = 0 \
                     AND number > ?3 AND number NOT IN (SELECT value FROM json_each(?5)) \
                     ORDER BY number LIMIT ?4"
                    };
                    let journaled = journaled.unwrap_or_default();
                    let numbers: Vec<u64> = journaled.iter().map(|t| t.number).collect();
                    let numbers = encode(&numbers, "turn numbers")?;
                    let bodies: Vec<String> = conn
                        .prepare_cached(sql)
                        .and_then(|mut s| {
                            s.query_map(
                                params![at_ns, at_id, after, clamp(range.limit), numbers],
                                |r| r.get(0),
                            )?
                            .collect()
                        })
                        .map_err(db(format_args!("list the turns of `{at_id}`")))?;
                    let mut listed = bodies
                        .iter()
                        .map(|b| shared.decode_turn(&at_key, b))
                        .collect::<Result<Vec<_>, _>>()?;
                    listed.extend(
                        journaled.into_iter().filter(|t| {
                            t.is_finished() == range.finished && clamp(t.number) > after
                        }),
                    );
                    listed.sort_unstable_by_key(|t| t.number);
                    listed.truncate(range.limit);
                    Ok(listed)
                },
                |_, _| {},
            )
            .await?;
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(listed)
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
        let mut sql = String::from("SELECT id, body FROM instances WHERE ns = ?1");
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
        let at = ns.clone();
        let shared = self.shared.clone();
        let listed = self
            .read_merged(
                |_| (),
                move |conn, ()| {
                    let rows: Vec<(String, String)> = conn
                        .prepare_cached(&sql)
                        .and_then(|mut s| {
                            s.query_map(
                                params![
                                    at,
                                    filter.workflow_type,
                                    filter.version,
                                    filter.after,
                                    clamp(filter.limit)
                                ],
                                |r| Ok((r.get(0)?, r.get(1)?)),
                            )?
                            .collect()
                        })
                        .map_err(db("list instances"))?;
                    // A quarantined instance is left out (and logged once when it is found),
                    // so one unreadable record does not hide the rest of the namespace.
                    Ok(rows
                        .into_iter()
                        .filter_map(|(id, body)| {
                            let key = (at.clone(), id);
                            if shared.quarantine.contains(&key) {
                                return None;
                            }
                            shared.decode_instance(&key, &body).ok()
                        })
                        .collect())
                },
                move |dirty, listed: &mut Vec<InstanceRecord>| {
                    if dirty.is_empty() {
                        return;
                    }
                    for r in listed {
                        match dirty.instance(&(ns.clone(), r.id.clone())) {
                            Some(newer) if newer.revision > r.revision => r.clone_from(newer),
                            _ => {}
                        }
                    }
                },
            )
            .await?;
        self.shared.unsynced.settle_all().await?;
        Ok(listed)
    }

    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        let (ns, workflow_type) = (ns.to_owned(), workflow_type.to_owned());
        let version = version.map(str::to_owned);
        let (n, w, v) = (ns.clone(), workflow_type.clone(), version.clone());
        let counted = self
            .read_merged(
                move |dirty| dirty.busy(&n, &w, v.as_deref()),
                move |conn, dirty| {
                    // Dirty instances are counted from the cache, the rest from the tables.
                    let sql = if version.is_some() {
                        "SELECT COUNT(*), COALESCE(SUM(pending_count > 0), 0) FROM instances \
                     WHERE ns = ?1 AND workflow_type = ?2 AND version = ?3 \
                     AND id NOT IN (SELECT value FROM json_each(?4))"
                    } else {
                        "SELECT COUNT(*), COALESCE(SUM(pending_count > 0), 0) FROM instances \
                     WHERE ns = ?1 AND workflow_type = ?2 AND ?3 IS NULL \
                     AND id NOT IN (SELECT value FROM json_each(?4))"
                    };
                    let ids: Vec<&str> = dirty.iter().map(|(id, _)| id.as_str()).collect();
                    let ids = encode(&ids, "instance ids")?;
                    let (all, with): (i64, i64) = conn
                        .prepare_cached(sql)
                        .and_then(|mut s| {
                            s.query_row(params![ns, workflow_type, version, ids], |r| {
                                Ok((r.get(0)?, r.get(1)?))
                            })
                        })
                        .map_err(db("count instances"))?;
                    let busy = dirty.iter().filter(|(_, busy)| *busy).count() as u64;
                    Ok((
                        INTS.uint(all, "count")? + dirty.len() as u64,
                        INTS.uint(with, "count")? + busy,
                    ))
                },
                |_, _| {},
            )
            .await?;
        self.shared.unsynced.settle_all().await?;
        Ok(counted)
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
        Ok(self.shared.schedule.due(ns, &workflows, now, limit))
    }

    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        let workflows = distinct(workflows);
        Ok(self.shared.schedule.next_due(ns, &workflows))
    }

    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        let mut sql = String::from("SELECT body FROM runs WHERE ns = ?1");
        if filter.instance.is_some() {
            sql.push_str(" AND instance_id = ?2");
        }
        if filter.before.is_some() {
            sql.push_str(" AND run_id < ?3");
        }
        sql.push_str(" ORDER BY run_id DESC LIMIT ?4");
        let ns = ns.to_owned();
        self.read(move |conn| {
            let bodies: Vec<String> = conn
                .prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_map(
                        params![ns, filter.instance, filter.before, clamp(filter.limit)],
                        |r| r.get(0),
                    )?
                    .collect()
                })
                .map_err(db("list runs"))?;
            bodies.iter().map(|b| decode_run(STORE, b)).collect()
        })
        .await
    }

    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError> {
        let (ns, run_id) = (ns.to_owned(), run_id.to_owned());
        self.read(move |conn| {
            let body: Option<String> = conn
                .prepare_cached("SELECT body FROM runs WHERE ns = ?1 AND run_id = ?2")
                .and_then(|mut s| s.query_row(params![ns, run_id], |r| r.get(0)).optional())
                .map_err(db(format_args!("read run `{run_id}`")))?;
            body.as_deref().map(|b| decode_run(STORE, b)).transpose()
        })
        .await
    }

    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError> {
        let ns = ns.to_owned();
        self.read(move |conn| {
            let rows: Vec<(i64, String, i64)> = conn
                .prepare_cached(
                    "SELECT (started_at_ms / ?3) * ?3 AS hour, outcome, COUNT(*) FROM runs \
                     WHERE ns = ?1 AND started_at_ms >= ?2 GROUP BY hour, outcome \
                     ORDER BY hour, outcome",
                )
                .and_then(|mut s| {
                    s.query_map(params![ns, since_ms, HOUR_MS], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?
                    .collect()
                })
                .map_err(db("count runs"))?;
            rows.into_iter()
                .map(|(hour_ms, outcome, runs)| {
                    Ok(RunCount {
                        hour_ms,
                        outcome,
                        runs: INTS.uint(runs, "count")?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError> {
        // Rare (workers register when they start): a short-lived connection of its own, which
        // waits for the writer's lock like any other SQLite connection, and syncs its commit.
        let path = self.shared.path.clone();
        let row = (
            ns.to_owned(),
            workflow_type.to_owned(),
            version.to_owned(),
            document.to_owned(),
        );
        tokio::task::spawn_blocking(move || {
            let conn = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(db(format_args!("open {}", path.display())))?;
            configure(&conn, &path)?;
            conn.execute_batch("PRAGMA synchronous = FULL")
                .map_err(db("set synchronous"))?;
            conn.execute(
                "INSERT INTO schemas (ns, workflow_type, version, body) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (ns, workflow_type, version) DO UPDATE SET body = excluded.body",
                params![row.0, row.1, row.2, row.3],
            )
            .map_err(db(format_args!("keep the schema of {} {}", row.1, row.2)))?;
            Ok(())
        })
        .await
        .map_err(|e| StoreError::caused("sqlite: schema write task failed", e))?
    }

    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError> {
        let ns = ns.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT body FROM schemas WHERE ns = ?1 ORDER BY workflow_type, version",
            )
            .and_then(|mut s| s.query_map(params![ns], |r| r.get(0))?.collect())
            .map_err(db("read the schemas"))
        })
        .await
    }

    async fn delete_unreadable(&self, ns: &str, id: &str) -> Result<bool, StoreError> {
        let key = (ns.to_owned(), id.to_owned());
        if !self.shared.quarantine.contains(&key) {
            return Ok(false);
        }
        let at = key.clone();
        // The revision column, not the record: the record is what cannot be read.
        let revision: Option<i64> = self
            .read(move |conn| {
                conn.prepare_cached("SELECT revision FROM instances WHERE ns = ?1 AND id = ?2")
                    .and_then(|mut s| s.query_row(params![at.0, at.1], |r| r.get(0)).optional())
                    .map_err(db(format_args!("read the revision of `{}`", at.1)))
            })
            .await?;
        let Some(revision) = revision else {
            self.shared.quarantine.release(&key);
            return Ok(false);
        };
        let write = WriteSet {
            ns: key.0.clone(),
            id: key.1.clone(),
            expected_revision: Some(INTS.uint(revision, "revision")?),
            instance: None,
            turns: Vec::new(),
            retention: None,
            runs: Vec::new(),
            prune_runs_before: None,
            durability: Durability::Durable,
        };
        match self.commit(write).await {
            Ok(()) => {}
            Err(CommitError::Store(e)) => return Err(e),
            Err(e) => {
                return Err(StoreError::new(format!(
                    "sqlite: delete the quarantined instance `{id}`: {e}; try again"
                )))
            }
        }
        self.shared.quarantine.release(&key);
        tracing::warn!(
            target: "turnwise::store",
            namespace = %ns, instance = %id,
            "a quarantined instance was deleted with all its rows"
        );
        Ok(true)
    }

    /// Hands the write set to the writer thread and waits for its answer.
    ///
    /// A commit that is the only one in flight (one worker, or a quiet moment) polls for its
    /// answer for up to 300 µs, yielding to the runtime between polls, before it lets
    /// its task sleep: the answer of a lone commit usually comes within that, and a runtime
    /// thread that went to sleep costs tens of microseconds to wake, on every call. With other
    /// commits in flight the writer is busy anyway and the task sleeps at once.
    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        let bodies = Bodies::of(&write)?;
        let (reply, mut answer) = oneshot::channel();
        let (_counted, alone) = InFlight::start(&self.shared.in_flight);
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
        let stopped = || StoreError::new("sqlite: the writer thread has stopped");
        if !sent {
            return Err(stopped().into());
        }
        if alone {
            let until = std::time::Instant::now() + ALONE_SPIN;
            loop {
                match answer.try_recv() {
                    Ok(result) => return result,
                    Err(oneshot::error::TryRecvError::Closed) => return Err(stopped().into()),
                    Err(oneshot::error::TryRecvError::Empty) => {}
                }
                if std::time::Instant::now() >= until {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        answer.await.map_err(|_| stopped())?
    }

    /// Checks, with a few `stat` calls and no query, that the files are the ones the store
    /// opened (see *Storage faults* on [`SqliteStore`]), that no sync failed and that the last
    /// write transaction did not fail.
    async fn health(&self) -> Result<(), StoreError> {
        let shared = &self.shared;
        shared
            .health
            .check_files()
            .map_err(|why| StoreError::new(why.to_string()))?;
        if let Some(why) = shared.unsynced.failure() {
            return Err(StoreError::new(why.to_string()));
        }
        if let Some(why) = shared.health.last_write_failed() {
            return Err(StoreError::new(format!(
                "sqlite: the last write failed ({why}); the store reports healthy again once a \
                 write succeeds"
            )));
        }
        Ok(())
    }
}
