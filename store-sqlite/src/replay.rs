//! The journal's replay when a store opens: what a crash left in `journal` is written into
//! the tables, and what of it cannot be decoded is quarantined.

use super::*;

/// A journal row: namespace, id, revision, the instance's body and its turns' bodies.
type JournalRow = (String, String, i64, String, String);

/// Per instance: the stored revision, the newest journaled instance row, and the newest
/// version of each journaled turn (decoded and encoded once each, at the end).
struct Newest {
    stored: u64,
    instance: Option<String>,
    turns: HashMap<u64, TurnRecord>,
}

/// Per instance, what to write (`None`: nothing, it was deleted since or cannot be decoded).
type NewestRows = HashMap<Key, Option<Newest>>;

/// Instances with a journaled write that cannot be decoded, and why.
type Undecodable = HashMap<Key, String>;

/// On open: write what the journal holds into the tables and empty it.
///
/// The journal holds the running turns' writes committed since its last flush, oldest first
/// (see [`SqliteStore`]). A row whose revision is not above its instance's stored one was
/// already written into the tables (a later direct write carried it along) and is skipped;
/// of the rest, the newest instance row and the newest version of each turn are written.
pub(super) fn replay_journal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let shown = path.display();
    rows::exec(conn, "BEGIN IMMEDIATE").map_err(db(format_args!("lock {shown}")))?;
    let replayed = replay_rows(conn, path);
    let end = if replayed.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    rows::exec(conn, end).map_err(db(format_args!("replay the journal of {shown}")))?;
    replayed
}

/// Inside the replay's transaction: write the journal's newest rows, quarantine what cannot be
/// decoded, empty the journal.
fn replay_rows(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let shown = path.display();
    let rows: Vec<JournalRow> = conn
        .prepare("SELECT ns, id, revision, instance, turns FROM journal ORDER BY seq")
        .and_then(|mut s| {
            s.query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect()
        })
        .map_err(db(format_args!("read the journal of {shown}")))?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut bad = Undecodable::new();
    let newest = newest_rows(conn, rows, &mut bad)?;
    write_newest(conn, newest, &mut bad)?;
    // What cannot be decoded is kept, as it was, in the quarantine table, never dropped.
    for ((ns, id), reason) in &bad {
        conn.execute(
            "INSERT INTO quarantine (ns, id, revision, instance, turns, reason) \
             SELECT ns, id, revision, instance, turns, ?3 FROM journal \
             WHERE ns = ?1 AND id = ?2 ORDER BY seq",
            params![ns, id, reason],
        )
        .map_err(db(format_args!(
            "quarantine the journal rows of `{id}` in {shown}"
        )))?;
    }
    rows::exec(conn, "DELETE FROM journal")
        .map_err(db(format_args!("empty the journal of {shown}")))?;
    Ok(())
}

/// Fold the journal's rows, oldest first, into the newest rows of each instance; the
/// instances whose journaled turns cannot be decoded go to `bad`.
fn newest_rows(
    conn: &Connection,
    rows: Vec<JournalRow>,
    bad: &mut Undecodable,
) -> Result<NewestRows, StoreError> {
    let mut newest = NewestRows::new();
    for (ns, id, revision, instance, turns) in rows {
        let revision = INTS.uint(revision, "journal revision")?;
        let key = (ns, id);
        if bad.contains_key(&key) {
            continue;
        }
        if !newest.contains_key(&key) {
            newest.insert(key.clone(), stored_revision(conn, &key)?);
        }
        let Some(Some(entry)) = newest.get_mut(&key) else {
            continue;
        };
        if revision <= entry.stored {
            continue;
        }
        let turns: Vec<TurnRecord> = match decode(&turns) {
            Ok(turns) => turns,
            Err(e) => {
                bad.insert(key.clone(), format!("a journaled write of its turns: {e}"));
                newest.insert(key, None);
                continue;
            }
        };
        entry.turns.extend(turns.into_iter().map(|t| (t.number, t)));
        entry.instance = Some(instance);
    }
    Ok(newest)
}

/// An instance's entry before its journal rows are folded in: its stored revision, or `None`
/// when it was deleted since (nothing to write).
fn stored_revision(conn: &Connection, key: &Key) -> Result<Option<Newest>, StoreError> {
    let stored: Option<i64> = conn
        .prepare_cached("SELECT revision FROM instances WHERE ns = ?1 AND id = ?2")
        .and_then(|mut s| s.query_row(params![key.0, key.1], |r| r.get(0)).optional())
        .map_err(db(format_args!("read `{}`", key.1)))?;
    Ok(stored
        .map(|s| INTS.uint(s, "revision"))
        .transpose()?
        .map(|stored| Newest {
            stored,
            instance: None,
            turns: HashMap::new(),
        }))
}

/// Write each instance's newest rows into the tables; the instances whose journaled record
/// cannot be decoded go to `bad`.
fn write_newest(
    conn: &Connection,
    newest: NewestRows,
    bad: &mut Undecodable,
) -> Result<(), StoreError> {
    for ((ns, id), entry) in newest {
        let Some(Newest {
            instance: Some(body),
            turns,
            ..
        }) = entry
        else {
            continue;
        };
        let record: InstanceRecord = match decode(&body) {
            Ok(record) => record,
            Err(e) => {
                bad.insert((ns, id), format!("a journaled write of its record: {e}"));
                continue;
            }
        };
        let bodies = turns
            .values()
            .map(|t| Ok((t, encode(t, "a turn")?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        rows::put_rows(
            conn,
            &ns,
            &id,
            (
                record.revision,
                clamp(record.pending.len()),
                record.due_at_ms,
                &body,
            ),
            bodies.iter().map(|(t, b)| rows::TurnRow::of(t, b)),
        )?;
    }
    Ok(())
}
