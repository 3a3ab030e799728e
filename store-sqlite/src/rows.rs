//! The SQL of a write set's rows, as the writer thread applies it: the journal row of a
//! running turn's write, the instances and turns tables (with the checks of a refused write),
//! run summaries, retention and deletes, and writing dirty rows into the tables.

use super::writer::DirtyRows;
use super::*;
use turnwise_core::store::support::{check_record, check_revision, check_rewrite, turn_in_history};

/// The most turns retention deletes in one commit.
const PRUNE_BATCH: i64 = 256;

/// Append a running turn's write set to the journal; answer its pruning mark (unchanged).
pub(super) fn journal(
    conn: &Connection,
    write: &WriteSet,
    bodies: &Bodies,
) -> Result<u64, StoreError> {
    let (Some(instance), Some(body)) = (&write.instance, &bodies.instance) else {
        return Err(StoreError::new("sqlite: a delete cannot be journaled"));
    };
    let mut turns =
        String::with_capacity(2 + bodies.turns.iter().map(|b| b.len() + 1).sum::<usize>());
    turns.push('[');
    for (i, b) in bodies.turns.iter().enumerate() {
        if i > 0 {
            turns.push(',');
        }
        turns.push_str(b);
    }
    turns.push(']');
    let revision = INTS.int(instance.revision, "revision")?;
    conn.prepare_cached(
        "INSERT INTO journal (ns, id, revision, instance, turns) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| s.execute(params![write.ns, write.id, revision, body, turns]))
    .map_err(db(format_args!("journal a write of `{}`", write.id)))?;
    Ok(instance.history_pruned_through)
}

/// Whether the tables confirm a journal verdict: the new turns' numbers and message ids are
/// free, and no finished turn is older than the retention limit.
pub(super) fn tables_agree(
    conn: &Connection,
    write: &WriteSet,
    new_turns: &[usize],
    retention_since: Option<Millis>,
) -> Result<bool, StoreError> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    for &i in new_turns {
        let t = &write.turns[i];
        let number = INTS.int(t.number, "turn number")?;
        let taken = conn
            .prepare_cached(
                "SELECT 1 FROM turns WHERE ns = ?1 AND id = ?2 AND (number = ?3 OR message_id = ?4)",
            )
            .and_then(|mut s| s.exists(params![ns, id, number, t.message_id]))
            .map_err(db(format_args!("look up turn {} of `{id}`", t.number)))?;
        if taken {
            return Ok(false);
        }
    }
    match retention_since {
        Some(since) => Ok(!any_older(conn, ns, id, since)?),
        None => Ok(true),
    }
}

/// Write a dirty instance's journaled rows into the tables.
pub(super) fn put_dirty(
    conn: &Connection,
    ns: &str,
    id: &str,
    rows: &DirtyRows,
) -> Result<(), StoreError> {
    put_rows(
        conn,
        ns,
        id,
        (
            rows.revision,
            rows.pending_count,
            rows.due_at_ms,
            &rows.instance,
        ),
        rows.turns.iter().map(|(n, r)| TurnRow {
            number: *n,
            message_id: &r.message_id,
            finished_at_ms: r.finished_at_ms,
            body: &r.body,
        }),
    )
}

/// Write the rows of a write set journaled earlier in the same batch into the tables.
pub(super) fn put_journaled(
    conn: &Connection,
    write: &WriteSet,
    bodies: &Bodies,
) -> Result<(), StoreError> {
    let (Some(instance), Some(body)) = (&write.instance, &bodies.instance) else {
        return Ok(());
    };
    put_rows(
        conn,
        &write.ns,
        &write.id,
        (
            instance.revision,
            clamp(instance.pending.len()),
            instance.due_at_ms,
            body,
        ),
        write
            .turns
            .iter()
            .zip(&bodies.turns)
            .map(|(t, b)| TurnRow::of(t, b)),
    )
}

/// Write an instance row and some of its turns with journaled versions. The instance row
/// exists and the turns can be written (the journal took only such writes): anything else is
/// an error.
pub(super) fn put_rows<'a>(
    conn: &Connection,
    ns: &str,
    id: &str,
    (revision, pending_count, due_at_ms, body): (u64, i64, Option<Millis>, &str),
    turns: impl Iterator<Item = TurnRow<'a>>,
) -> Result<(), StoreError> {
    let out_of_step = || {
        StoreError::new(format!(
            "sqlite: the journal of `{id}` is out of step with its rows"
        ))
    };
    let revision = INTS.int(revision, "revision")?;
    let changed = conn
        .prepare_cached(
            "UPDATE instances SET revision = ?3, pending_count = ?4, due_at_ms = ?5, body = ?6 \
             WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| s.execute(params![ns, id, revision, pending_count, due_at_ms, body]))
        .map_err(db(format_args!("write the journaled rows of `{id}`")))?;
    if changed != 1 {
        return Err(out_of_step());
    }
    for row in turns {
        match upsert_turn(conn, ns, id, &row)? {
            Upsert::Written => {}
            // Written before: a direct write set that brought these rows up to date failed
            // after that, and left them written.
            Upsert::NumberTaken if same_turn_row(conn, ns, id, &row)? => {}
            Upsert::NumberTaken | Upsert::MessageTaken => return Err(out_of_step()),
        }
    }
    Ok(())
}

/// Whether the stored turn row is exactly `row`.
fn same_turn_row(
    conn: &Connection,
    ns: &str,
    id: &str,
    row: &TurnRow<'_>,
) -> Result<bool, StoreError> {
    let number = INTS.int(row.number, "turn number")?;
    conn.prepare_cached(
        "SELECT 1 FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3 AND message_id = ?4 \
         AND finished_at_ms IS ?5 AND body = ?6",
    )
    .and_then(|mut s| {
        s.exists(params![
            ns,
            id,
            number,
            row.message_id,
            row.finished_at_ms,
            row.body
        ])
    })
    .map_err(db(format_args!("read turn {} of `{id}`", row.number)))
}

pub(super) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}

/// Why a write set was not applied, and whether it left changes in the open transaction.
pub(super) struct Refusal {
    pub(super) error: CommitError,
    /// Some of the write set's rows were written before the failure: only a savepoint (or
    /// rolling back the whole transaction) can take them back.
    pub(super) wrote: bool,
}

/// Failures before anything was written.
impl From<CommitError> for Refusal {
    fn from(error: CommitError) -> Self {
        Self::before_writing(error)
    }
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        Self::before_writing(error)
    }
}

impl Refusal {
    fn before_writing(error: impl Into<CommitError>) -> Self {
        Self {
            error: error.into(),
            wrote: false,
        }
    }

    fn after_writing(error: impl Into<CommitError>) -> Self {
        Self {
            error: error.into(),
            wrote: true,
        }
    }
}

/// Apply one write set inside the batch's transaction; on success answer the instance's
/// `history_pruned_through` as stored (the caller's record is updated with it afterwards).
///
/// The fast path is one statement per row: the instance's `UPDATE` is conditional on the
/// expected revision (zero rows changed means another commit came first), and each turn's
/// upsert refuses to touch a finished turn or to change a message id (zero rows changed sends
/// it to the detailed checks, which accept an identical finished turn and name what is wrong
/// otherwise). A message id owned by another turn trips the unique index.
///
/// The instance row is written first, so the common refusals (a revision conflict, an id
/// already created) leave nothing behind; [`Refusal::wrote`] tells the caller when a later
/// statement failed after earlier ones had changed rows.
pub(super) fn apply(conn: &Connection, write: &WriteSet, bodies: &Bodies) -> Result<u64, Refusal> {
    let (Some(instance), Some(body)) = (&write.instance, &bodies.instance) else {
        return delete(conn, write).map(|()| 0);
    };
    let stored_pruned = write_instance(conn, write, instance, body)?;
    finish_write(conn, write, bodies, instance, stored_pruned).map_err(Refusal::after_writing)
}

/// The instance row of a write set: a conditional update, or the insert of a new instance.
/// Answers the stored `history_pruned_through`. A refusal says whether rows were written.
fn write_instance(
    conn: &Connection,
    write: &WriteSet,
    instance: &InstanceRecord,
    body: &str,
) -> Result<u64, Refusal> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    check_record(write)?;
    let revision = INTS.int(instance.revision, "revision")?;
    let pending = clamp(instance.pending.len());
    // The store owns `history_pruned_through`: the caller's value is checked against the
    // stored one and replaced by it when they differ (the body is then re-encoded by
    // `finish_write`).
    let Some(expected) = write.expected_revision else {
        return insert_instance(conn, write, instance, (revision, pending, body));
    };
    let expected = INTS.int(expected, "revision")?;
    // No `RETURNING` here: SQLite runs it as a trigger, which makes the statement keep a
    // statement journal, allocated and freed on every write. Instead the `WHERE` clause also
    // checks what the store owns or never changes (the pruning mark, type and version); when
    // any of them differs the slow path below sorts it out. Type and version are not set:
    // naming them would make SQLite rewrite their index entry on every write.
    let update = |pruned_through: i64, workflow_type: &str, version: &str| {
        conn.prepare_cached(
            "UPDATE instances SET revision = ?3, pending_count = ?4, due_at_ms = ?5, body = ?6 \
             WHERE ns = ?1 AND id = ?2 AND revision = ?7 AND history_pruned_through = ?8 \
             AND workflow_type = ?9 AND version = ?10",
        )
        .and_then(|mut s| {
            s.execute(params![
                ns,
                id,
                revision,
                pending,
                instance.due_at_ms,
                body,
                expected,
                pruned_through,
                workflow_type,
                version,
            ])
        })
        .map_err(db(format_args!("write `{id}`")))
    };
    let pruned_through = clamp(instance.history_pruned_through);
    if update(pruned_through, &instance.workflow_type, &instance.version)? == 1 {
        return Ok(instance.history_pruned_through);
    }
    let stored: Option<(i64, i64, String, String)> = conn
        .prepare_cached(
            "SELECT revision, history_pruned_through, workflow_type, version \
             FROM instances WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![ns, id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .map_err(db(format_args!("read `{id}`")))?;
    let Some((_, pruned, workflow_type, version)) = stored.filter(|s| s.0 == expected) else {
        return Err(CommitError::Conflict.into());
    };
    let stored_pruned = INTS.uint(pruned, "history_pruned_through")?;
    // The revision matches, so the caller's pruning mark was off, or (never done by the
    // engine, allowed by the contract) the type or version changes: the rare slow path.
    if update(pruned, &workflow_type, &version)? != 1 {
        return Err(CommitError::Conflict.into());
    }
    if workflow_type != instance.workflow_type || version != instance.version {
        conn.prepare_cached(
            "UPDATE instances SET workflow_type = ?3, version = ?4 WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| s.execute(params![ns, id, instance.workflow_type, instance.version]))
        .map_err(db(format_args!("write `{id}`")))
        .map_err(Refusal::after_writing)?;
    }
    Ok(stored_pruned)
}

/// The instance row of a write set that creates its instance (`revision`, `pending_count` and
/// `body` as stored): refused with a conflict if the instance exists. Answers the new
/// instance's `history_pruned_through`, 0.
fn insert_instance(
    conn: &Connection,
    write: &WriteSet,
    instance: &InstanceRecord,
    (revision, pending, body): (i64, i64, &str),
) -> Result<u64, Refusal> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    let inserted = conn
        .prepare_cached(
            "INSERT INTO instances \
                (ns, id, workflow_type, version, revision, pending_count, due_at_ms, \
                 history_pruned_through, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
        )
        .and_then(|mut s| {
            s.execute(params![
                ns,
                id,
                instance.workflow_type,
                instance.version,
                revision,
                pending,
                instance.due_at_ms,
                body
            ])
        });
    match inserted {
        Ok(_) => Ok(0),
        Err(e) if is_constraint(&e) => Err(CommitError::Conflict.into()),
        Err(e) => Err(db(format_args!("create `{id}`"))(e).into()),
    }
}

/// The rest of a write set once its instance row is written: the turns, retention, and the
/// rare rewrite of the instance body when `history_pruned_through` moved.
fn finish_write(
    conn: &Connection,
    write: &WriteSet,
    bodies: &Bodies,
    instance: &InstanceRecord,
    stored_pruned: u64,
) -> Result<u64, CommitError> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    let mut pruned_through = stored_pruned;
    for (t, body) in write.turns.iter().zip(&bodies.turns) {
        write_turn(conn, ns, id, t, body)?;
    }
    for (run, body) in write.runs.iter().zip(&bodies.runs) {
        write_run(conn, ns, run, body)?;
    }
    if let Some(before) = write.prune_runs_before {
        // Almost always nothing has expired: one index probe then, instead of the `DELETE`
        // (which SQLite prepares again on every run, its subquery included).
        let expired = conn
            .prepare_cached("SELECT 1 FROM runs WHERE ended_at_ms < ?1 LIMIT 1")
            .and_then(|mut s| s.exists(params![before]))
            .map_err(db("look for expired run summaries"))?;
        if expired {
            conn.prepare_cached(
                "DELETE FROM runs WHERE rowid IN \
                 (SELECT rowid FROM runs WHERE ended_at_ms < ?1 LIMIT ?2)",
            )
            .and_then(|mut s| s.execute(params![before, clamp(RUN_PRUNE_BATCH)]))
            .map_err(db("delete expired run summaries"))?;
        }
    }
    if let Some(r) = write.retention {
        pruned_through = pruned_through.max(prune(conn, ns, id, r)?);
    }
    if pruned_through != instance.history_pruned_through {
        // Rare: the mark moved (retention) or the caller's copy was off.
        let mut stored = instance.clone();
        stored.history_pruned_through = pruned_through;
        let body = encode(&stored, "an instance")?;
        conn.prepare_cached(
            "UPDATE instances SET history_pruned_through = ?3, body = ?4 WHERE ns = ?1 AND id = ?2",
        )
        .and_then(|mut s| s.execute(params![ns, id, clamp(pruned_through), body]))
        .map_err(db(format_args!("write `{id}`")))?;
    }
    Ok(pruned_through)
}

/// Insert or replace one run summary.
fn write_run(conn: &Connection, ns: &str, run: &WorkflowRun, body: &str) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO runs (ns, run_id, instance_id, started_at_ms, ended_at_ms, outcome, body) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT (ns, run_id) DO UPDATE SET instance_id = excluded.instance_id, \
         started_at_ms = excluded.started_at_ms, ended_at_ms = excluded.ended_at_ms, \
         outcome = excluded.outcome, body = excluded.body",
    )
    .and_then(|mut s| {
        s.execute(params![
            ns,
            run.id,
            run.workflow_id,
            run.started_at_ms,
            run.ended_at_ms,
            run.outcome.as_str(),
            body
        ])
    })
    .map_err(db(format_args!("write run `{}`", run.id)))?;
    Ok(())
}

/// The columns of one turn row.
pub(super) struct TurnRow<'a> {
    pub(super) number: u64,
    pub(super) message_id: &'a str,
    pub(super) finished_at_ms: Option<Millis>,
    pub(super) body: &'a str,
}

impl<'a> TurnRow<'a> {
    pub(super) fn of(t: &'a TurnRecord, body: &'a str) -> Self {
        Self {
            number: t.number,
            message_id: &t.message_id,
            finished_at_ms: t.finished_at_ms,
            body,
        }
    }
}

/// How [`upsert_turn`] went.
enum Upsert {
    Written,
    /// The number is taken by a finished turn or one with another message id.
    NumberTaken,
    /// The message id belongs to another turn.
    MessageTaken,
}

/// Write one turn row: update the unfinished stored turn in place, or insert a new one.
fn upsert_turn(
    conn: &Connection,
    ns: &str,
    id: &str,
    t: &TurnRow<'_>,
) -> Result<Upsert, StoreError> {
    let number = INTS.int(t.number, "turn number")?;
    // Update in place when the stored turn is unfinished with the same message id. Only a
    // finishing write names the indexed `finished` columns, so the common write (a step, a
    // claim, a heartbeat) touches the row alone and no index.
    let updated = match t.finished_at_ms {
        Some(at) => conn
            .prepare_cached(
                "UPDATE turns SET finished = 1, finished_at_ms = ?5, body = ?6 \
                 WHERE ns = ?1 AND id = ?2 AND number = ?3 AND message_id = ?4 AND finished = 0",
            )
            .and_then(|mut s| s.execute(params![ns, id, number, t.message_id, at, t.body])),
        None => conn
            .prepare_cached(
                "UPDATE turns SET body = ?5 \
                 WHERE ns = ?1 AND id = ?2 AND number = ?3 AND message_id = ?4 AND finished = 0",
            )
            .and_then(|mut s| s.execute(params![ns, id, number, t.message_id, t.body])),
    }
    .map_err(db(format_args!("write turn {} of `{id}`", t.number)))?;
    if updated == 1 {
        return Ok(Upsert::Written);
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO turns (ns, id, number, message_id, finished, finished_at_ms, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                ns,
                id,
                number,
                t.message_id,
                t.finished_at_ms.is_some(),
                t.finished_at_ms,
                t.body
            ])
        });
    match inserted {
        Ok(_) => Ok(Upsert::Written),
        Err(e) if is_constraint(&e) && turn_exists(conn, ns, id, number)? => {
            Ok(Upsert::NumberTaken)
        }
        Err(e) if is_constraint(&e) => Ok(Upsert::MessageTaken),
        Err(e) => Err(db(format_args!("write turn {} of `{id}`", t.number))(e)),
    }
}

/// Write one turn of a write set; a refusal names what was wrong.
fn write_turn(
    conn: &Connection,
    ns: &str,
    id: &str,
    t: &TurnRecord,
    body: &str,
) -> Result<(), CommitError> {
    match upsert_turn(conn, ns, id, &TurnRow::of(t, body))? {
        Upsert::Written => Ok(()),
        // The number is taken (finished, or another message id): the detailed checks decide.
        Upsert::NumberTaken => refused_turn(conn, ns, id, t),
        Upsert::MessageTaken => Err(CommitError::MessageIdTaken {
            message_id: t.message_id.clone(),
        }),
    }
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

/// Delete an instance with its turns, if its revision is the expected one.
fn delete(conn: &Connection, write: &WriteSet) -> Result<(), Refusal> {
    let (ns, id) = (write.ns.as_str(), write.id.as_str());
    let stored: Option<i64> = conn
        .prepare_cached("SELECT revision FROM instances WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.query_row(params![ns, id], |r| r.get(0)).optional())
        .map_err(db(format_args!("read the revision of `{id}`")))
        .map_err(Refusal::before_writing)?;
    let current = stored
        .map(|rev| INTS.uint(rev, "revision"))
        .transpose()
        .map_err(Refusal::before_writing)?;
    check_revision(current, write).map_err(Refusal::before_writing)?;
    conn.prepare_cached("DELETE FROM turns WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.execute(params![ns, id]))
        .map_err(db(format_args!("delete the turns of `{id}`")))
        .map_err(Refusal::after_writing)?;
    conn.prepare_cached("DELETE FROM instances WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.execute(params![ns, id]))
        .map_err(db(format_args!("delete `{id}`")))
        .map_err(Refusal::after_writing)?;
    // The journaled writes of a quarantined instance, kept when they could not be decoded.
    conn.prepare_cached("DELETE FROM quarantine WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.execute(params![ns, id]))
        .map_err(db(format_args!("delete the quarantined rows of `{id}`")))
        .map_err(Refusal::after_writing)?;
    Ok(())
}

/// Whether a turn row exists.
fn turn_exists(conn: &Connection, ns: &str, id: &str, number: i64) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT 1 FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3")
        .and_then(|mut s| s.exists(params![ns, id, number]))
        .map_err(db(format_args!("look up turn {number} of `{id}`")))
}

/// A turn upsert changed nothing: the stored turn is finished or has another message id.
/// An identical finished turn is fine (nothing to write); anything else is refused by name.
fn refused_turn(conn: &Connection, ns: &str, id: &str, t: &TurnRecord) -> Result<(), CommitError> {
    let number = INTS.int(t.number, "turn number")?;
    let body: Option<String> = conn
        .prepare_cached("SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3")
        .and_then(|mut s| {
            s.query_row(params![ns, id, number], |r| r.get(0))
                .optional()
        })
        .map_err(db(format_args!("read turn {number} of `{id}`")))?;
    let old: Option<TurnRecord> = body
        .map(|b| decode(&b))
        .transpose()
        .map_err(|e| StoreError::new(format!("sqlite: decode turn {number} of `{id}`: {e}")))?;
    match old {
        Some(old) => check_rewrite(id, &old, t),
        None => Err(turn_in_history(id, t.number)),
    }
}

/// Whether a finished turn of the instance finished before `since` (one probe of the age
/// index).
fn any_older(conn: &Connection, ns: &str, id: &str, since: Millis) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "SELECT 1 FROM turns INDEXED BY turns_finished_by_age \
         WHERE ns = ?1 AND id = ?2 AND finished = 1 AND finished_at_ms < ?3",
    )
    .and_then(|mut s| s.exists(params![ns, id, since]))
    .map_err(db(format_args!("look for old turns of `{id}`")))
}

/// Apply retention; answer the newest turn number it deleted (0 when none).
fn prune(conn: &Connection, ns: &str, id: &str, r: Retention) -> Result<u64, StoreError> {
    // Most commits find nothing old enough: one probe of the age index says so, before the
    // walk over the newest `keep_turns` turns below.
    if !any_older(conn, ns, id, r.keep_since_ms)? {
        return Ok(0);
    }
    // The newest `keep_turns` finished turns stay whatever their age: find the newest
    // turn number past them (an index walk of `keep_turns` entries).
    let cutoff: Option<i64> = conn
        .prepare_cached(
            "SELECT number FROM turns WHERE ns = ?1 AND id = ?2 AND finished = 1 \
             ORDER BY number DESC LIMIT 1 OFFSET ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![ns, id, clamp(r.keep_turns)], |row| row.get(0))
                .optional()
        })
        .map_err(db(format_args!("find the retention cutoff of `{id}`")))?;
    let Some(cutoff) = cutoff else { return Ok(0) };
    // Old turns come straight from the `turns_finished_by_age` index, so only turns past the age
    // limit are touched, never the whole history; those among the newest are skipped.
    // At most PRUNE_BATCH per commit; the rest goes with the next one.
    let doomed: Vec<i64> = conn
        .prepare_cached(
            "SELECT number FROM turns INDEXED BY turns_finished_by_age \
             WHERE ns = ?1 AND id = ?2 AND finished = 1 AND finished_at_ms < ?3 \
             AND number <= ?4 LIMIT ?5",
        )
        .and_then(|mut s| {
            s.query_map(
                params![ns, id, r.keep_since_ms, cutoff, PRUNE_BATCH],
                |row| row.get(0),
            )?
            .collect()
        })
        .map_err(db(format_args!("find turns of `{id}` to prune")))?;
    let mut through = 0;
    for n in doomed {
        conn.prepare_cached("DELETE FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3")
            .and_then(|mut s| s.execute(params![ns, id, n]))
            .map_err(db(format_args!("prune turn {n} of `{id}`")))?;
        through = through.max(INTS.uint(n, "turn number")?);
    }
    Ok(through)
}
