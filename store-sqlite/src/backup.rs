//! [`SqliteStore::backup`]: a consistent copy of a store's file, taken with SQLite's online
//! backup API while a process may be running on it.
//!
//! The copy reads the database through a read-only connection of its own. It does not take the
//! store's lock (`<db>.lock`, held by the running process) and cannot write, checkpoint or
//! remove the write-ahead log, so the store goes on as if nothing happened. The pages are
//! copied in one step, inside one read transaction: the copy is the database as of one commit,
//! every write acknowledged before the backup began included. In WAL mode the reader blocks no
//! writer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup as Copying, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::SqliteStore;

/// What [`SqliteStore::backup`] copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The copy's pages.
    pub pages: u64,
    /// The copy's size in bytes.
    pub bytes: u64,
}

/// Why [`SqliteStore::backup`] made no copy. Nothing is left at the destination.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// There is no file at the source path.
    #[error("there is no database file at {}: nothing to back up", .0.display())]
    NoSource(PathBuf),
    /// The destination exists: a backup writes only a new file.
    #[error("{} exists already; the backup writes only a new file (remove it or choose another path)", .0.display())]
    Exists(PathBuf),
    /// The copy failed (I/O, a database locked for too long, a copy that fails its check).
    #[error("the backup of {} failed: {reason}", .db.display())]
    Failed {
        /// The source.
        db: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl SqliteStore {
    /// Copy the store file at `db` to a new file at `out`, consistently, while a process may be
    /// running on it; the copy is checked with SQLite's `quick_check`. It is written to
    /// `<out>.partial` and appears under `out` only once complete, checked and synced.
    ///
    /// ```no_run
    /// use std::path::Path;
    /// use turnwise::store::SqliteStore;
    ///
    /// # fn main() -> Result<(), turnwise::store::BackupError> {
    /// let copied = SqliteStore::backup(Path::new("turnwise.db"), Path::new("copy.db"))?;
    /// println!("{} pages, {} bytes", copied.pages, copied.bytes);
    /// # Ok(()) }
    /// ```
    pub fn backup(db: &Path, out: &Path) -> Result<Backup, BackupError> {
        if !db.is_file() {
            return Err(BackupError::NoSource(db.to_owned()));
        }
        if out.exists() {
            return Err(BackupError::Exists(out.to_owned()));
        }
        let failed = |reason: String| BackupError::Failed {
            db: db.to_owned(),
            reason,
        };
        let mut partial = out.to_owned().into_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        if partial.exists() {
            // Left by an earlier backup that did not finish: never a complete copy.
            std::fs::remove_file(&partial).map_err(|e| {
                failed(format!(
                    "cannot remove the unfinished copy {}: {e}",
                    partial.display()
                ))
            })?;
        }
        let copied = copy(db, &partial).and_then(|copied| {
            std::fs::File::open(&partial)
                .and_then(|f| f.sync_all())
                .map_err(|e| format!("cannot sync {}: {e}", partial.display()))?;
            std::fs::rename(&partial, out).map_err(|e| {
                format!(
                    "cannot rename {} to {}: {e}",
                    partial.display(),
                    out.display()
                )
            })?;
            sync_dir(out);
            Ok(copied)
        });
        copied.map_err(|reason| {
            let _ = std::fs::remove_file(&partial);
            failed(reason)
        })
    }
}

/// Copy `db` into a new file at `to` in one backup step, then check the copy.
fn copy(db: &Path, to: &Path) -> Result<Backup, String> {
    let source = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot open it read-only: {e}"))?;
    source
        .busy_timeout(Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let mut dest =
        Connection::open(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    {
        let backup = Copying::new(&source, &mut dest).map_err(|e| e.to_string())?;
        // -1: every page in one step, inside one read transaction, so the copy is one
        // snapshot and never restarts. Busy or locked (the source in recovery) is retried for
        // up to about ten seconds.
        let mut busy = 0;
        loop {
            match backup.step(-1) {
                Ok(StepResult::Done) => break,
                Ok(StepResult::More) => {}
                // Busy or locked.
                Ok(_) if busy < 200 => {
                    busy += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(_) => return Err("the database stayed locked for 10 s; try again".to_owned()),
                Err(e) => return Err(format!("copying the pages: {e}")),
            }
        }
    }
    drop(source);
    let check: String = dest
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(|e| format!("checking the copy: {e}"))?;
    if check != "ok" {
        return Err(format!("the copy fails SQLite's quick_check: {check}"));
    }
    let pages: i64 = dest
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .map_err(|e| e.to_string())?;
    let page_size: i64 = dest
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .map_err(|e| e.to_string())?;
    dest.close()
        .map_err(|(_, e)| format!("closing {}: {e}", to.display()))?;
    let pages = u64::try_from(pages).unwrap_or(0);
    Ok(Backup {
        pages,
        bytes: pages * u64::try_from(page_size).unwrap_or(0),
    })
}

/// Make the rename durable; a failure here leaves a complete copy, so it is only logged.
fn sync_dir(file: &Path) {
    #[cfg(unix)]
    {
        let dir = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
            tracing::warn!(dir = %dir.display(), "sqlite backup: cannot sync the directory: {e}");
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}
