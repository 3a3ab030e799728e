//! The tables, and the migrations that bring a database to this version's schema.

use tokio_postgres::Client;

use super::pg;
use turnwise_core::store::StoreError;

/// The schema version this code writes, kept in `turnwise_meta`. Version 3 changed no table
/// (see `migrate`).
pub(super) const SCHEMA_VERSION: i64 = 3;

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

/// Version 2: run summaries (`WorkflowRun`, newest first by run id; pruned by end time) and
/// the registered schema documents. Instance bodies may also carry schedules and a child-outcome
/// outbox from then on, which a turnwise that knows only version 1 would drop when it rewrote a
/// record: it refuses the database.
const V2: &str = r#"
CREATE TABLE runs (
    ns text COLLATE "C" NOT NULL,
    run_id text COLLATE "C" NOT NULL,
    instance_id text COLLATE "C" NOT NULL,
    started_at_ms bigint NOT NULL,
    ended_at_ms bigint NOT NULL,
    outcome text NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (ns, run_id)
);
CREATE INDEX runs_by_instance ON runs (ns, instance_id, run_id);
CREATE INDEX runs_by_start ON runs (ns, started_at_ms);
CREATE INDEX runs_by_end ON runs (ended_at_ms);
CREATE TABLE schemas (
    ns text COLLATE "C" NOT NULL,
    workflow_type text COLLATE "C" NOT NULL,
    version text COLLATE "C" NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (ns, workflow_type, version)
);
"#;

/// The commit, as one statement: a write set in one round trip (see `PostgresStore::write`).
/// Replaced on every connect, so that it is always this version's; the name carries a version
/// of its own for the day its parameters change while older nodes still run.
///
/// It answers `ok` or `notified` (written, with a change notice), `conflict` (the revision is
/// not the expected one: nothing written), `taken:<message id>`, `history:<turn>` (a finished
/// turn would change) or `message-id:<turn>` (a turn's message id would change).
const COMMIT_FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION turnwise_commit_v3(
    p_ns text, p_id text, p_expected bigint, p_relaxed boolean, p_delete boolean,
    p_workflow_type text, p_version text, p_revision bigint, p_pending bigint, p_due bigint,
    p_body text, p_numbers bigint[], p_message_ids text[], p_finished boolean[],
    p_finished_at bigint[], p_bodies text[], p_keep_turns bigint, p_keep_since bigint,
    p_channel text, p_node text, p_settled boolean,
    p_run_ids text[], p_run_instances text[], p_run_started bigint[], p_run_ended bigint[],
    p_run_outcomes text[], p_run_bodies text[], p_prune_runs_before bigint, p_prune_limit bigint
) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    cur_revision bigint;
    cur_due bigint;
    pruned bigint := 0;
    i int;
    old record;
    notify boolean;
    payload text;
BEGIN
    IF p_relaxed THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT revision, due_at_ms INTO cur_revision, cur_due
        FROM instances WHERE ns = p_ns AND id = p_id FOR UPDATE;
    IF cur_revision IS DISTINCT FROM p_expected THEN
        RETURN 'conflict';
    END IF;
    notify := p_settled OR (p_due IS NOT NULL AND (cur_due IS NULL OR p_due < cur_due));
    IF p_delete THEN
        DELETE FROM turns WHERE ns = p_ns AND id = p_id;
        DELETE FROM instances WHERE ns = p_ns AND id = p_id;
    ELSE
        FOR i IN 1 .. coalesce(array_length(p_numbers, 1), 0) LOOP
            FOR old IN SELECT number, message_id, finished, body FROM turns
                WHERE ns = p_ns AND id = p_id
                  AND (number = p_numbers[i] OR message_id = p_message_ids[i])
            LOOP
                IF old.number = p_numbers[i] THEN
                    IF old.finished AND old.body IS DISTINCT FROM p_bodies[i] THEN
                        RETURN 'history:' || old.number;
                    END IF;
                    IF old.message_id <> p_message_ids[i] THEN
                        RETURN 'message-id:' || old.number;
                    END IF;
                ELSE
                    RETURN 'taken:' || p_message_ids[i];
                END IF;
            END LOOP;
        END LOOP;
        INSERT INTO turns (ns, id, number, message_id, finished, finished_at_ms, body)
            SELECT p_ns, p_id, * FROM unnest(p_numbers, p_message_ids, p_finished,
                p_finished_at, p_bodies)
            ON CONFLICT (ns, id, number) DO UPDATE SET finished = EXCLUDED.finished,
                finished_at_ms = EXCLUDED.finished_at_ms, body = EXCLUDED.body;
        INSERT INTO runs (ns, run_id, instance_id, started_at_ms, ended_at_ms, outcome, body)
            SELECT p_ns, * FROM unnest(p_run_ids, p_run_instances, p_run_started, p_run_ended,
                p_run_outcomes, p_run_bodies)
            ON CONFLICT (ns, run_id) DO UPDATE SET instance_id = EXCLUDED.instance_id,
                started_at_ms = EXCLUDED.started_at_ms, ended_at_ms = EXCLUDED.ended_at_ms,
                outcome = EXCLUDED.outcome, body = EXCLUDED.body;
        IF p_prune_runs_before IS NOT NULL THEN
            DELETE FROM runs WHERE ctid IN (
                SELECT ctid FROM runs WHERE ended_at_ms < p_prune_runs_before
                LIMIT p_prune_limit FOR UPDATE SKIP LOCKED);
        END IF;
        IF p_keep_turns IS NOT NULL THEN
            WITH kept AS (
                SELECT number FROM turns WHERE ns = p_ns AND id = p_id AND finished
                ORDER BY number DESC LIMIT p_keep_turns
            ), gone AS (
                DELETE FROM turns WHERE ns = p_ns AND id = p_id AND finished
                    AND finished_at_ms < p_keep_since
                    AND number NOT IN (SELECT number FROM kept)
                RETURNING number
            )
            SELECT coalesce(max(number), 0) INTO pruned FROM gone;
        END IF;
        IF cur_revision IS NULL THEN
            INSERT INTO instances (ns, id, workflow_type, version, revision, pending_count,
                due_at_ms, history_pruned_through, body)
            VALUES (p_ns, p_id, p_workflow_type, p_version, p_revision, p_pending, p_due,
                pruned, p_body);
        ELSE
            UPDATE instances SET workflow_type = p_workflow_type, version = p_version,
                revision = p_revision, pending_count = p_pending, due_at_ms = p_due,
                body = p_body,
                history_pruned_through = GREATEST(history_pruned_through, pruned)
            WHERE ns = p_ns AND id = p_id;
        END IF;
    END IF;
    IF notify THEN
        -- The payload `notices.rs` reads; `*` (look at everything) when too long for NOTIFY.
        payload := json_build_array(p_node, p_ns, p_id, coalesce(p_workflow_type, ''),
            coalesce(p_version, ''), p_due, p_settled)::text;
        IF octet_length(payload) > 7900 THEN
            payload := '*';
        END IF;
        PERFORM pg_notify(p_channel, payload);
        RETURN 'notified';
    END IF;
    RETURN 'ok';
END
$fn$
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
            tx.batch_execute(V2)
                .await
                .map_err(pg("create the tables of version 2"))?;
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
        Some(v @ (1 | 2)) => {
            if v == 1 {
                tx.batch_execute(V2)
                    .await
                    .map_err(pg("migrate to schema version 2 (runs, schemas)"))?;
            }
            // Version 3 changes no table: turn bodies may be `suspended` with a replay
            // mismatch report and instance bodies carry events, which a turnwise that knows
            // only version 2 would not read or would drop when it rewrote a record; it
            // refuses the database instead.
            tx.execute(
                "UPDATE turnwise_meta SET value = $1 WHERE name = 'schema_version'",
                &[&SCHEMA_VERSION],
            )
            .await
            .map_err(pg("record the schema version"))?;
        }
        // The current version; later versions add their steps here, from `v` up.
        Some(_) => {}
    }
    tx.batch_execute(COMMIT_FUNCTION)
        .await
        .map_err(pg("install the commit function"))?;
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
