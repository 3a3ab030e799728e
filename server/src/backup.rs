//! `turnwise backup`: a consistent copy of a SQLite store, taken with SQLite's online backup
//! API while a server may be running on it.
//!
//! The copy reads the database through a read-only connection of its own. It does not take the
//! store's lock (`<db>.lock`, held by the running server) and cannot write, checkpoint or
//! remove the write-ahead log, so the server goes on as if nothing happened. The pages are
//! copied in one step, inside one read transaction: the copy is the database as of one commit,
//! every write acknowledged before the backup began included. In WAL mode the reader blocks no
//! writer.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// `turnwise backup --db FILE --out FILE`.
#[derive(clap::Args)]
pub struct BackupArgs {
    /// The SQLite file of the store to copy; a server may be running on it.
    #[arg(long, value_name = "FILE", env = "TURNWISE_DB", hide_env_values = true)]
    db: String,
    /// Where to write the copy. It must not exist yet; the copy appears under this name only
    /// once it is complete and checked.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Take the backup; print what was copied, or the error, and answer the exit code (2 for a
/// refused request, 1 for a failed copy).
pub fn run(args: BackupArgs) -> ExitCode {
    match backup(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(Failure::Refused(msg)) => {
            eprintln!("turnwise: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(msg)) => {
            eprintln!("turnwise: {msg}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    /// The arguments cannot work (a URL, a missing source, an existing destination).
    Refused(String),
    /// The copy failed.
    Failed(String),
}

fn backup(args: &BackupArgs) -> Result<String, Failure> {
    let lower = args.db.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return Err(Failure::Refused(
            "turnwise backup copies a SQLite file; back up a PostgreSQL database with its own \
             tools, e.g. `pg_dump --format=custom --file turnwise.dump \"$TURNWISE_DB\"` \
             (docs/operations.md, \"Backing up and restoring\")"
                .to_owned(),
        ));
    }
    let db = Path::new(&args.db);
    if !db.is_file() {
        return Err(Failure::Refused(format!(
            "there is no database file at {}: nothing to back up",
            db.display()
        )));
    }
    if args.out.exists() {
        return Err(Failure::Refused(format!(
            "{} exists already; the backup writes only a new file (remove it or choose another \
             --out)",
            args.out.display()
        )));
    }
    let mut partial = args.out.clone().into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    if partial.exists() {
        // Left by an earlier backup that did not finish: never a complete copy.
        std::fs::remove_file(&partial).map_err(|e| {
            Failure::Failed(format!(
                "cannot remove the unfinished copy {}: {e}",
                partial.display()
            ))
        })?;
    }
    let copied = copy(db, &partial).and_then(|pages| {
        std::fs::File::open(&partial)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("cannot sync {}: {e}", partial.display()))?;
        std::fs::rename(&partial, &args.out).map_err(|e| {
            format!(
                "cannot rename {} to {}: {e}",
                partial.display(),
                args.out.display()
            )
        })?;
        sync_dir(&args.out);
        Ok(pages)
    });
    match copied {
        Ok((pages, bytes)) => Ok(format!(
            "backed up {} to {}: {pages} pages, {bytes} bytes, integrity checked",
            db.display(),
            args.out.display()
        )),
        Err(msg) => {
            let _ = std::fs::remove_file(&partial);
            Err(Failure::Failed(format!(
                "the backup of {} failed: {msg}",
                db.display()
            )))
        }
    }
}

/// Copy `db` into a new file at `to` in one backup step, then check the copy; answers its
/// pages and bytes.
fn copy(db: &Path, to: &Path) -> Result<(u64, u64), String> {
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
        let backup = Backup::new(&source, &mut dest).map_err(|e| e.to_string())?;
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
    Ok((pages, pages * u64::try_from(page_size).unwrap_or(0)))
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
            eprintln!(
                "turnwise: warning: cannot sync the directory {}: {e}",
                dir.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}
