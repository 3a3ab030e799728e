//! The settings a store is opened with.

#[cfg(doc)]
use super::{Durability, SqliteStore};

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
    pub(super) fn sql(self) -> &'static str {
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
    /// *The sync on a thread of its own* in `docs/architecture.md` §6.
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
