//! The file's schema: its tables and indexes, its version, and the migrations of older
//! versions.

use super::*;

/// The schema version this code writes (`PRAGMA user_version`). Version 6 changed no table:
/// turn bodies may be `suspended` with a mismatch report and instance bodies carry events,
/// which a turnwise that knows only version 5 would not read or would drop when it rewrote a
/// record, so it refuses the file.
pub(super) const SCHEMA_VERSION: i64 = 6;

/// `PRAGMA application_id` of a turnwise store: `"turn"` in ASCII.
pub(super) const APPLICATION_ID: i64 = 0x7475_726e;

pub(super) const SCHEMA: &str = "
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

/// Inside a write transaction: refuse foreign or newer files, create the schema if missing.
pub(super) fn check_schema(conn: &Connection, path: &Path) -> Result<(), StoreError> {
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
