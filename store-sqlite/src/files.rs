//! The store's hold on its files: the lock that keeps one store per file, the checks that
//! notice a file deleted or replaced under a running store, and what health reports.
//!
//! **The lock.** Before it opens the database, a store takes an exclusive OS lock
//! (`flock(2)` through [`File::try_lock`]) on a sidecar file, `<db>.lock`, and writes its
//! process id into it. The lock is held by the open file description, so a second `open` of
//! the same file fails at once, in another process and in the same one; the kernel releases it
//! when the store closes the file or the process dies, even by SIGKILL. The pid in the file is
//! only informational (for the error message): a stale pid left by a dead process locks
//! nothing.
//!
//! **File identity.** When it opens, the store records the device and inode of the database
//! file, its write-ahead log and the lock file. Deleting or replacing one of them under a
//! running store leaves SQLite writing to a file that no longer has a name: every write would
//! be answered and then lost when the process stops. So the paths' identities are compared
//! with the recorded ones before every durable answer: by the syncer after each sync, or,
//! without a syncer, by the writer before each durable transaction. At the first difference
//! the store refuses every write from then on (sticky, and read without a system call by every
//! later transaction), with an error naming the file, logged once at error level.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::OnceLock;

use super::*;

/// The lock file of the database at `db`: `<db>.lock`, next to the file symbolic links lead
/// to, so that two names of one file share one lock.
pub(super) fn lock_path(db: &Path) -> PathBuf {
    let real = std::fs::canonicalize(db).ok().or_else(|| {
        // Not created yet: resolve the directory.
        let name = db.file_name()?;
        let dir = match db.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::canonicalize(dir).ok().map(|d| d.join(name))
    });
    let mut path = real.unwrap_or_else(|| db.to_path_buf()).into_os_string();
    path.push(".lock");
    PathBuf::from(path)
}

/// Take the exclusive lock on the store at `db` and write this process's id into the lock
/// file; the lock lasts as long as the returned file is open.
pub(super) fn take_lock(db: &Path) -> Result<(File, PathBuf), StoreError> {
    let path = lock_path(db);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| {
            StoreError::new(format!(
                "sqlite: open the lock file {} of {}: {e}",
                path.display(),
                db.display()
            ))
        })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(StoreError::Locked {
                path: db.to_path_buf(),
                lock: path.clone(),
                pid: holder(&mut file),
            })
        }
        Err(TryLockError::Error(e)) => {
            return Err(StoreError::new(format!(
                "sqlite: lock {} (the lock file of {}): {e}",
                path.display(),
                db.display()
            )))
        }
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| writeln!(file, "{}", std::process::id()));
    if let Err(e) = written {
        // The lock holds without the pid; only the message of a second open misses it.
        tracing::warn!(
            "turnwise sqlite store: writing the pid into {}: {e}",
            path.display()
        );
    }
    Ok((file, path))
}

/// The pid the holder of a lock wrote into its lock file, if it has written it yet.
fn holder(file: &mut File) -> Option<u32> {
    // The holder writes its pid right after it took the lock: give it a moment.
    for _ in 0..5 {
        let mut text = String::new();
        let read = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut text));
        if read.is_ok() {
            if let Ok(pid) = text.trim().parse() {
                return Some(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// A file's identity: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file at `path` now; `Ok(None)` when there is none.
    fn of(path: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::metadata(path) {
            Ok(meta) => Ok(Some(Self::from_meta(&meta))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[cfg(unix)]
    fn from_meta(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// Without inode numbers, only a deleted file is noticed.
    #[cfg(not(unix))]
    fn from_meta(_: &std::fs::Metadata) -> Self {
        Self { dev: 0, ino: 0 }
    }
}

/// One file the store watches.
struct Watched {
    /// What it is, for messages: "the database file", "the write-ahead log", "the lock file".
    what: &'static str,
    path: PathBuf,
    id: FileId,
}

/// Whether the store can write: its files are the ones it opened, and its last write
/// transaction did not fail. Shared by the store handles, the writer and the syncer.
pub(super) struct Health {
    files: Vec<Watched>,
    /// Set, once and for good, when a file is found deleted or replaced.
    lost: OnceLock<Arc<str>>,
    /// The error of the last write transaction, if it failed; cleared by the next one that
    /// commits.
    last_write: Mutex<Option<Arc<str>>>,
}

impl Health {
    /// Record the identities of the store's files; called once the write connection is open
    /// (so that the database file and its write-ahead log exist).
    pub(super) fn new(db: &Path, lock: &Path) -> Result<Self, StoreError> {
        // The names SQLite uses: it follows symbolic links and names the log after the target.
        let db = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        let mut files = Vec::new();
        for (what, path) in [
            ("the database file", db),
            ("the write-ahead log", PathBuf::from(wal)),
            ("the lock file", lock.to_path_buf()),
        ] {
            let id = FileId::of(&path).map_err(|e| {
                StoreError::new(format!(
                    "sqlite: read the metadata of {}: {e}",
                    path.display()
                ))
            })?;
            // A log SQLite has not created (yet) is not watched.
            if let Some(id) = id {
                files.push(Watched { what, path, id });
            }
        }
        Ok(Self {
            files,
            lost: OnceLock::new(),
            last_write: Mutex::new(None),
        })
    }

    /// Whether the store's files are still the ones it opened. The first difference found is
    /// logged and kept: from then on this fails with the same message.
    /// What [`Health::check_files`] found so far, without looking again: `Err` once a file
    /// was found deleted or replaced.
    pub(super) fn verdict(&self) -> Result<(), Arc<str>> {
        match self.lost.get() {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// Compare the paths' identities with the recorded ones (a `stat` each), and remember a
    /// difference for good.
    pub(super) fn check_files(&self) -> Result<(), Arc<str>> {
        if let Some(why) = self.lost.get() {
            return Err(why.clone());
        }
        for file in &self.files {
            let change = match FileId::of(&file.path) {
                Ok(Some(id)) if id == file.id => continue,
                Ok(Some(_)) => "was replaced by another file",
                Ok(None) => "was deleted",
                Err(_) => "can no longer be read",
            };
            let why: Arc<str> = Arc::from(format!(
                "sqlite: {} {} {change} while the store had it open; writes to it would be lost, \
                 so the store accepts no more writes: restore the file if you can, then restart \
                 the process (open the store again)",
                file.what,
                file.path.display(),
            ));
            if self.lost.set(why.clone()).is_ok() {
                tracing::error!("turnwise sqlite store: {why}");
            }
            return Err(self.lost.get().cloned().unwrap_or(why));
        }
        Ok(())
    }

    /// The writer: how its last write transaction ended.
    pub(super) fn wrote(&self, result: Result<(), &StoreError>) {
        let failed: Option<Arc<str>> = result.err().map(|e| Arc::from(e.to_string()));
        let mut last = lock(&self.last_write);
        match (&*last, &failed) {
            (None, None) => return,
            (None, Some(why)) => {
                tracing::error!("turnwise sqlite store: a write failed, unhealthy until a write succeeds: {why}");
            }
            (Some(_), None) => tracing::info!("turnwise sqlite store: a write succeeded again"),
            (Some(_), Some(_)) => {}
        }
        *last = failed;
    }

    /// Why the last write transaction failed, if it did.
    pub(super) fn last_write_failed(&self) -> Option<Arc<str>> {
        lock(&self.last_write).clone()
    }
}
