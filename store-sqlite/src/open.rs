//! Opening a store: the file's lock, the write connection (WAL mode, schema checked), the
//! journal's replay, the indexes loaded into memory, and the threads started.

use super::replay::replay_journal;
use super::schema::check_schema;
use super::*;

/// How long a connection waits for a lock held by another connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

/// A store's files, opened and read, before its threads start.
pub(super) struct Opened {
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
    pub(super) async fn open(path: &Path, options: SqliteOptions) -> Result<Self, StoreError> {
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
    pub(super) fn syncer(&self) -> Option<(mpsc::Sender<SyncJob>, Syncer)> {
        if !self.threaded {
            return None;
        }
        let (jobs, rx) = mpsc::channel();
        let syncer = Syncer::new(rx, &self.path, self.unsynced.clone(), self.stats.clone())
            .watching(self.health.clone());
        Some((jobs, syncer))
    }

    /// Start the syncer (if any) and the writer, and hand out the store.
    pub(super) fn start(
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

pub(super) fn configure(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(db(format_args!("set busy_timeout on {}", path.display())))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// Open the write connection: WAL mode, schema checked or created.
pub(super) fn open_writer(path: &Path, synchronous: Synchronous) -> Result<Connection, StoreError> {
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

pub(super) fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db(format_args!("open {} for reading", path.display())))?;
    configure(&conn, path)?;
    Ok(conn)
}
