//! The tables, and the migrations that bring a database to this version's schema.

use tokio_postgres::Client;

use super::pg;
use crate::store::StoreError;

/// The schema version this code writes, kept in `turnwise_meta`.
pub(super) const SCHEMA_VERSION: i64 = 1;

/// The advisory lock that serializes migrations of one database: `"turn"` in ASCII.
const MIGRATION_LOCK: i64 = 0x7475_726e;

/// Version 1. Ids and namespaces are compared byte by byte (`COLLATE "C"`), so listings come
/// out in the same order on every store whatever the database's collation. Records are kept as
/// JSON text, not `jsonb`: `jsonb` rewrites numbers (`1E400`) and reorders keys, and the
/// protocol keeps values exactly as they were written.
const V1: &str = r#"
CREATE TABLE instances (
    ns text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    workflow_type text COLLATE "C" NOT NULL,
    version text COLLATE "C" NOT NULL,
    revision bigint NOT NULL,
    pending_count bigint NOT NULL,
    due_at_ms bigint,
    history_pruned_through bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (ns, id)
);
CREATE INDEX instances_by_type ON instances (ns, workflow_type, version, id);
CREATE INDEX instances_by_due ON instances (ns, workflow_type, version, due_at_ms)
    WHERE due_at_ms IS NOT NULL;
CREATE TABLE turns (
    ns text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    number bigint NOT NULL,
    message_id text COLLATE "C" NOT NULL,
    finished boolean NOT NULL,
    finished_at_ms bigint,
    body text NOT NULL,
    PRIMARY KEY (ns, id, number)
);
CREATE UNIQUE INDEX turns_by_message ON turns (ns, id, message_id);
"#;

/// Create the tables, or check and migrate the ones there, in one transaction that holds the
/// migration lock, so that nodes starting together migrate once. Answers the schema the
/// tables are in.
pub(super) async fn migrate(
    client: &mut Client,
    schema: Option<&str>,
) -> Result<String, StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(pg("begin the migration"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg("take the migration lock"))?;
    if let Some(schema) = schema {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
            .await
            .map_err(pg(format_args!("create the schema `{schema}`")))?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS turnwise_meta (name text PRIMARY KEY, value bigint NOT NULL)",
    )
    .await
    .map_err(pg("create the table turnwise_meta"))?;
    let found: Option<i64> = tx
        .query_opt(
            "SELECT value FROM turnwise_meta WHERE name = 'schema_version'",
            &[],
        )
        .await
        .map_err(pg("read the schema version"))?
        .map(|row| row.get(0));
    match found {
        None => {
            tx.batch_execute(V1)
                .await
                .map_err(pg("create the tables"))?;
            tx.execute(
                "INSERT INTO turnwise_meta (name, value) VALUES ('schema_version', $1)",
                &[&SCHEMA_VERSION],
            )
            .await
            .map_err(pg("record the schema version"))?;
        }
        Some(v) if v > SCHEMA_VERSION => {
            return Err(StoreError::new(format!(
                "postgres: the database has turnwise schema version {v}, newer than this \
                 version of turnwise understands ({SCHEMA_VERSION}); upgrade turnwise, or point \
                 it at another database or schema"
            )));
        }
        Some(v) if v < 1 => {
            return Err(StoreError::new(format!(
                "postgres: the table turnwise_meta holds schema version {v}, which no version of \
                 turnwise wrote; point turnwise at another database or schema"
            )));
        }
        // The current version; later versions add their steps here, from `v` up.
        Some(_) => {}
    }
    let current: Option<String> = tx
        .query_one("SELECT current_schema()", &[])
        .await
        .map_err(pg("read the current schema"))?
        .get(0);
    tx.commit().await.map_err(pg("commit the migration"))?;
    current.ok_or_else(|| {
        StoreError::new(
            "postgres: the connection has no current schema (its search_path names none that \
             exists); set one in the address or in PostgresOptions::schema",
        )
    })
}
