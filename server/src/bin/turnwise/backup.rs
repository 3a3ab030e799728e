//! `turnwise backup`: a consistent copy of a SQLite store while a server may be running on it,
//! taken by the SQLite driver ([`SqliteStore::backup`]), which owns the file.

use std::path::PathBuf;
use std::process::ExitCode;

use turnwise::engine::Driver;
use turnwise::store::{Backup, BackupError, SqliteStore};

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
    match Driver::of(&args.db) {
        Ok(Driver::Postgres) => {
            return Err(Failure::Refused(
                "turnwise backup copies a SQLite file; back up a PostgreSQL database with its \
                 own tools, e.g. `pg_dump --format=custom --file turnwise.dump \"$TURNWISE_DB\"` \
                 (docs/operations.md, \"Backing up and restoring\")"
                    .to_owned(),
            ))
        }
        Ok(_) => {}
        Err(e) => return Err(Failure::Refused(e.to_string())),
    }
    let db = Driver::sqlite_file(&args.db);
    match SqliteStore::backup(db, &args.out) {
        Ok(Backup { pages, bytes }) => Ok(format!(
            "backed up {} to {}: {pages} pages, {bytes} bytes, integrity checked",
            db.display(),
            args.out.display()
        )),
        Err(e @ (BackupError::NoSource(_) | BackupError::Exists(_))) => {
            Err(Failure::Refused(e.to_string()))
        }
        Err(e) => Err(Failure::Failed(e.to_string())),
    }
}
