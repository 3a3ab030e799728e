//! The SQLite store: the store handle, its shared state and its writes (the writer thread
//! applies them, `writer.rs`); its design is summarized on [`SqliteStore`] and described in
//! `docs/architecture.md` §6.

#![warn(clippy::too_many_lines)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

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

use serde::Serialize;
use turnwise_core::protocol::*;
use turnwise_core::store::support::{clamp, decode, decode_run, Int64Columns};
use turnwise_core::store::*;

mod backup;
mod cache;
mod files;
mod open;
mod options;
mod quarantine;
mod reads;
mod replay;
mod rows;
mod schedule;
mod schema;
mod sync;
mod writer;

pub use backup::{Backup, BackupError};
use cache::{Cache, CacheUpdate, Verdict};
use files::Health;
use open::Opened;
pub use options::{SqliteOptions, Synchronous};
use quarantine::Quarantine;
use schedule::Schedule;
use sync::{SyncJob, Syncer, Unsynced};
use writer::{Bodies, Request, Writer, WriterConfig};

/// An instance's address: namespace and id.
type Key = (String, String);

/// An instance's address, borrowed or owned: the maps keyed by [`Key`] are searched with a
/// `&dyn KeyRef`, so that a lookup by `(&str, &str)` allocates no key. It hashes and compares
/// as the tuple does (each part in order), which `Borrow` requires.
pub(crate) trait KeyRef {
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

/// `PRAGMA wal_autocheckpoint` (SQLite's default) outside relaxed-only stretches.
const WAL_AUTOCHECKPOINT: u32 = 1000;
/// Relaxed write sets in a row after which the writer checkpoints at the configured level.
const RELAXED_CHECKPOINT_EVERY: usize = 4096;

/// A [`Store`] in one SQLite file (WAL mode), written by one thread with group commit.
///
/// Cloning gives another handle to the same store. When the last handle is dropped, the
/// writer thread finishes its batch and closes the file.
///
/// In short: one writer thread applies batches of write sets in one transaction each
/// ([`SqliteOptions::max_batch`]; [`SqliteStats::guarded_retries`] counts the batches sent
/// round again with savepoints), and answers a [`Durability::Durable`] write only once it is
/// synced, by the `COMMIT` or by a sync thread of its own ([`SqliteOptions::sync_thread`]).
/// The writes of a running turn are appended to a journal and written into the tables later
/// ([`SqliteOptions::journal_rows`]); a crash's journal is replayed when the store opens.
/// Reads run on a pool of read-only connections, served from a cache of decoded instances and
/// a schedule in memory where they can. A record that cannot be decoded quarantines its
/// instance ([`StoreError::Unreadable`], [`Store::delete_unreadable`]).
///
/// A file is served by one store at a time: [`SqliteStore::open`] takes a lock on
/// `<db>.lock` and fails with [`StoreError::Locked`] while another store holds it. After a
/// file of the store was deleted or replaced, or a sync failed, every write fails and
/// [`Store::health`] says why.
///
/// The design, with the file's layout, the journal, syncing, the lock and the storage
/// faults, is in `docs/architecture.md`, [§6 "Group commit in the SQLite store"] and §7
/// "Records that cannot be read".
///
/// [§6 "Group commit in the SQLite store"]: https://github.com/turnwise/turnwise/blob/main/docs/architecture.md#6-group-commit-in-the-sqlite-store
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
    /// Takes the file's lock, creates the file and its schema if missing, switches it to WAL
    /// mode and starts the writer thread. Fails with [`StoreError::Locked`] if another store
    /// has the file open (see *One store per file, enforced* in `docs/architecture.md` §6),
    /// and if the file is not a turnwise store or has a schema newer than this version of
    /// turnwise understands.
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
}

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

/// The writes of the [`Store`] implementation (in `reads.rs`, with the reads).
impl SqliteStore {
    /// Delete a quarantined instance with all its rows, by its revision column (its record is
    /// what cannot be read), and lift its quarantine; whether there was one to delete.
    async fn delete_quarantined(&self, ns: &str, id: &str) -> Result<bool, StoreError> {
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
        match self.commit_on_writer(write).await {
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
    async fn commit_on_writer(&self, write: WriteSet) -> Result<(), CommitError> {
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
    /// opened (see *Files that change under a running store* in `docs/architecture.md` §6),
    /// that no sync failed and that the last write transaction did not fail.
    fn files_health(&self) -> Result<(), StoreError> {
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
