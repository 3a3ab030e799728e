//! Reads: the pool of read-only connections, the reads that merge the tables with journaled
//! records, and the [`Store`] implementation (whose writes go to the writer thread, see the
//! parent module).

use super::open::{configure, open_reader};
use super::*;

/// Idle read-only connections kept for reuse.
const MAX_IDLE_READERS: usize = 4;

/// How long a merging read keeps trying (see [`SqliteStore::read_merged`]).
const MERGE_PATIENCE: Duration = Duration::from_secs(5);

fn load_turn_row(
    shared: &Shared,
    key: &Key,
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<TurnRecord>, StoreError> {
    let body: Option<String> = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row(params, |r| r.get(0)).optional())
        .map_err(db("read a turn"))?;
    body.map(|b| shared.decode_turn(key, &b)).transpose()
}

/// Deduplicated `(type, version)` pairs, so an instance is listed once.
fn distinct(workflows: &[WorkflowRef]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = workflows
        .iter()
        .map(|w| (w.workflow_type.as_str(), w.version.as_str()))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[async_trait]
impl Store for SqliteStore {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        self.shared.quarantine.check(ns, id)?;
        let gen = match self.shared.cache.get(&(ns, id)) {
            Ok(record) => {
                self.shared.unsynced.settle_instance(ns, id).await?;
                return Ok(Some(record));
            }
            Err(gen) => gen,
        };
        let key = (ns.to_owned(), id.to_owned());
        let shared = self.shared.clone();
        let read = self
            .read(move |conn| {
                let body: Option<String> = conn
                    .prepare_cached("SELECT body FROM instances WHERE ns = ?1 AND id = ?2")
                    .and_then(|mut s| s.query_row(params![key.0, key.1], |r| r.get(0)).optional())
                    .map_err(db(format_args!("read `{}`", key.1)))?;
                let Some(body) = body else {
                    return Ok(None);
                };
                let record = shared.decode_instance(&key, &body)?;
                shared.cache.fill(key, record.clone(), gen);
                Ok(Some(record))
            })
            .await?;
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(read)
    }

    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.shared.quarantine.check(ns, id)?;
        let read = match self.shared.cache.turn(&(ns, id), number) {
            Some(t) => Some(t),
            None => {
                let key = (ns.to_owned(), id.to_owned());
                let Ok(number) = i64::try_from(number) else {
                    return Ok(None); // never stored
                };
                let shared = self.shared.clone();
                self.read(move |conn| {
                    load_turn_row(
                        &shared,
                        &key,
                        conn,
                        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND number = ?3",
                        params![key.0, key.1, number],
                    )
                })
                .await?
            }
        };
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(read)
    }

    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.shared.quarantine.check(ns, id)?;
        let key = (ns.to_owned(), id.to_owned());
        let message_id = message_id.to_owned();
        let at = message_id.clone();
        let shared = self.shared.clone();
        // A journaled turn is found in the cache; any other is in the tables, whose row for it
        // no flush changes (message ids never change, and the journal takes no deletes).
        let found = self
            .read_merged(
                move |dirty| dirty.turn_by_message(&key, &at).cloned().ok_or(key.clone()),
                move |conn, taken| match taken {
                    Ok(journaled) => Ok(Some(journaled)),
                    Err(key) => load_turn_row(
                        &shared,
                        &key,
                        conn,
                        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND message_id = ?3",
                        params![key.0, key.1, message_id],
                    ),
                },
                |_, _| {},
            )
            .await?;
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(found)
    }

    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        range: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        if range.limit == 0 {
            return Ok(Vec::new());
        }
        self.shared.quarantine.check(ns, id)?;
        let key = (ns.to_owned(), id.to_owned());
        let (at_ns, at_id) = key.clone();
        let shared = self.shared.clone();
        let at_key = key.clone();
        // Turn numbers are never negative, so -1 means "from the start".
        let after = range.after.map_or(-1, clamp);
        let listed = self
            .read_merged(
                move |dirty| dirty.turns(&key),
                move |conn, journaled: Option<Vec<TurnRecord>>| {
                    // `finished` is spelled out, not bound, so that the planner can use the
                    // partial index of unfinished turns. Journaled turns come from the cache, in
                    // place of whatever the tables hold for their numbers.
                    let sql = if range.finished {
                        "SELECT body FROM turns WHERE ns = ?1 AND id = ?2 AND finished = 1 \
                     AND number > ?3 AND number NOT IN (SELECT value FROM json_each(?5)) \
                     ORDER BY number LIMIT ?4"
                    } else {
                        "SELECT body FROM turns INDEXED BY turns_unfinished \
                     WHERE ns = ?1 AND id = ?2 AND finished = 0 \
                     AND number > ?3 AND number NOT IN (SELECT value FROM json_each(?5)) \
                     ORDER BY number LIMIT ?4"
                    };
                    let journaled = journaled.unwrap_or_default();
                    let numbers: Vec<u64> = journaled.iter().map(|t| t.number).collect();
                    let numbers = encode(&numbers, "turn numbers")?;
                    let bodies: Vec<String> = conn
                        .prepare_cached(sql)
                        .and_then(|mut s| {
                            s.query_map(
                                params![at_ns, at_id, after, clamp(range.limit), numbers],
                                |r| r.get(0),
                            )?
                            .collect()
                        })
                        .map_err(db(format_args!("list the turns of `{at_id}`")))?;
                    let mut listed = bodies
                        .iter()
                        .map(|b| shared.decode_turn(&at_key, b))
                        .collect::<Result<Vec<_>, _>>()?;
                    listed.extend(
                        journaled.into_iter().filter(|t| {
                            t.is_finished() == range.finished && clamp(t.number) > after
                        }),
                    );
                    listed.sort_unstable_by_key(|t| t.number);
                    listed.truncate(range.limit);
                    Ok(listed)
                },
                |_, _| {},
            )
            .await?;
        self.shared.unsynced.settle_instance(ns, id).await?;
        Ok(listed)
    }

    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        // Only the conditions in use, so the planner can seek on the cursor.
        let mut sql = String::from("SELECT id, body FROM instances WHERE ns = ?1");
        if filter.workflow_type.is_some() {
            sql.push_str(" AND workflow_type = ?2");
        }
        if filter.version.is_some() {
            sql.push_str(" AND version = ?3");
        }
        if filter.after.is_some() {
            sql.push_str(" AND id > ?4");
        }
        sql.push_str(" ORDER BY id LIMIT ?5");
        let ns = ns.to_owned();
        let at = ns.clone();
        let shared = self.shared.clone();
        let listed = self
            .read_merged(
                |_| (),
                move |conn, ()| {
                    let rows: Vec<(String, String)> = conn
                        .prepare_cached(&sql)
                        .and_then(|mut s| {
                            s.query_map(
                                params![
                                    at,
                                    filter.workflow_type,
                                    filter.version,
                                    filter.after,
                                    clamp(filter.limit)
                                ],
                                |r| Ok((r.get(0)?, r.get(1)?)),
                            )?
                            .collect()
                        })
                        .map_err(db("list instances"))?;
                    // A quarantined instance is left out (and logged once when it is found),
                    // so one unreadable record does not hide the rest of the namespace.
                    Ok(rows
                        .into_iter()
                        .filter_map(|(id, body)| {
                            let key = (at.clone(), id);
                            if shared.quarantine.contains(&key) {
                                return None;
                            }
                            shared.decode_instance(&key, &body).ok()
                        })
                        .collect())
                },
                move |dirty, listed: &mut Vec<InstanceRecord>| {
                    if dirty.is_empty() {
                        return;
                    }
                    for r in listed {
                        match dirty.instance(&(ns.clone(), r.id.clone())) {
                            Some(newer) if newer.revision > r.revision => r.clone_from(newer),
                            _ => {}
                        }
                    }
                },
            )
            .await?;
        self.shared.unsynced.settle_all().await?;
        Ok(listed)
    }

    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        let (ns, workflow_type) = (ns.to_owned(), workflow_type.to_owned());
        let version = version.map(str::to_owned);
        let (n, w, v) = (ns.clone(), workflow_type.clone(), version.clone());
        let counted = self
            .read_merged(
                move |dirty| dirty.busy(&n, &w, v.as_deref()),
                move |conn, dirty| {
                    // Dirty instances are counted from the cache, the rest from the tables.
                    let sql = if version.is_some() {
                        "SELECT COUNT(*), COALESCE(SUM(pending_count > 0), 0) FROM instances \
                     WHERE ns = ?1 AND workflow_type = ?2 AND version = ?3 \
                     AND id NOT IN (SELECT value FROM json_each(?4))"
                    } else {
                        "SELECT COUNT(*), COALESCE(SUM(pending_count > 0), 0) FROM instances \
                     WHERE ns = ?1 AND workflow_type = ?2 AND ?3 IS NULL \
                     AND id NOT IN (SELECT value FROM json_each(?4))"
                    };
                    let ids: Vec<&str> = dirty.iter().map(|(id, _)| id.as_str()).collect();
                    let ids = encode(&ids, "instance ids")?;
                    let (all, with): (i64, i64) = conn
                        .prepare_cached(sql)
                        .and_then(|mut s| {
                            s.query_row(params![ns, workflow_type, version, ids], |r| {
                                Ok((r.get(0)?, r.get(1)?))
                            })
                        })
                        .map_err(db("count instances"))?;
                    let busy = dirty.iter().filter(|(_, busy)| *busy).count() as u64;
                    Ok((
                        INTS.uint(all, "count")? + dirty.len() as u64,
                        INTS.uint(with, "count")? + busy,
                    ))
                },
                |_, _| {},
            )
            .await?;
        self.shared.unsynced.settle_all().await?;
        Ok(counted)
    }

    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let workflows = distinct(workflows);
        if workflows.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        Ok(self.shared.schedule.due(ns, &workflows, now, limit))
    }

    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        let workflows = distinct(workflows);
        Ok(self.shared.schedule.next_due(ns, &workflows))
    }

    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        let mut sql = String::from("SELECT body FROM runs WHERE ns = ?1");
        if filter.instance.is_some() {
            sql.push_str(" AND instance_id = ?2");
        }
        if filter.before.is_some() {
            sql.push_str(" AND run_id < ?3");
        }
        sql.push_str(" ORDER BY run_id DESC LIMIT ?4");
        let ns = ns.to_owned();
        self.read(move |conn| {
            let bodies: Vec<String> = conn
                .prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_map(
                        params![ns, filter.instance, filter.before, clamp(filter.limit)],
                        |r| r.get(0),
                    )?
                    .collect()
                })
                .map_err(db("list runs"))?;
            bodies.iter().map(|b| decode_run(STORE, b)).collect()
        })
        .await
    }

    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError> {
        let (ns, run_id) = (ns.to_owned(), run_id.to_owned());
        self.read(move |conn| {
            let body: Option<String> = conn
                .prepare_cached("SELECT body FROM runs WHERE ns = ?1 AND run_id = ?2")
                .and_then(|mut s| s.query_row(params![ns, run_id], |r| r.get(0)).optional())
                .map_err(db(format_args!("read run `{run_id}`")))?;
            body.as_deref().map(|b| decode_run(STORE, b)).transpose()
        })
        .await
    }

    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError> {
        let ns = ns.to_owned();
        self.read(move |conn| {
            let rows: Vec<(i64, String, i64)> = conn
                .prepare_cached(
                    "SELECT (started_at_ms / ?3) * ?3 AS hour, outcome, COUNT(*) FROM runs \
                     WHERE ns = ?1 AND started_at_ms >= ?2 GROUP BY hour, outcome \
                     ORDER BY hour, outcome",
                )
                .and_then(|mut s| {
                    s.query_map(params![ns, since_ms, HOUR_MS], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?
                    .collect()
                })
                .map_err(db("count runs"))?;
            rows.into_iter()
                .map(|(hour_ms, outcome, runs)| {
                    Ok(RunCount {
                        hour_ms,
                        outcome,
                        runs: INTS.uint(runs, "count")?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError> {
        // Rare (workers register when they start): a short-lived connection of its own, which
        // waits for the writer's lock like any other SQLite connection, and syncs its commit.
        let path = self.shared.path.clone();
        let row = (
            ns.to_owned(),
            workflow_type.to_owned(),
            version.to_owned(),
            document.to_owned(),
        );
        tokio::task::spawn_blocking(move || {
            let conn = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(db(format_args!("open {}", path.display())))?;
            configure(&conn, &path)?;
            conn.execute_batch("PRAGMA synchronous = FULL")
                .map_err(db("set synchronous"))?;
            conn.execute(
                "INSERT INTO schemas (ns, workflow_type, version, body) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (ns, workflow_type, version) DO UPDATE SET body = excluded.body",
                params![row.0, row.1, row.2, row.3],
            )
            .map_err(db(format_args!("keep the schema of {} {}", row.1, row.2)))?;
            Ok(())
        })
        .await
        .map_err(|e| StoreError::caused("sqlite: schema write task failed", e))?
    }

    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError> {
        let ns = ns.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT body FROM schemas WHERE ns = ?1 ORDER BY workflow_type, version",
            )
            .and_then(|mut s| s.query_map(params![ns], |r| r.get(0))?.collect())
            .map_err(db("read the schemas"))
        })
        .await
    }

    async fn delete_unreadable(&self, ns: &str, id: &str) -> Result<bool, StoreError> {
        self.delete_quarantined(ns, id).await
    }

    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        self.commit_on_writer(write).await
    }

    async fn health(&self) -> Result<(), StoreError> {
        self.files_health()
    }
}

impl SqliteStore {
    /// Run `f` on a read-only connection on the blocking pool.
    pub(super) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.with_reader(f))
            .await
            .map_err(|e| StoreError::caused("sqlite: read task failed", e))?
    }

    /// Like [`SqliteStore::read`], for reads that merge rows of the tables with the dirty
    /// (journaled) records of [`Cache`]: `take` copies what the read needs of the dirty
    /// entries, then `f` reads the tables with it, then `fix` may touch the result up with the
    /// dirty entries as they are by then. The result is kept only if no dirty instance's rows
    /// were written into the tables in between; otherwise it is all done again (such commits
    /// are rare and short).
    async fn read_merged<S, T, A, F, G>(&self, take: A, f: F, fix: G) -> Result<T, StoreError>
    where
        T: Send + 'static,
        A: Fn(&cache::Dirty<'_>) -> S + Send + 'static,
        F: Fn(&Connection, S) -> Result<T, StoreError> + Send + 'static,
        G: Fn(&cache::Dirty<'_>, &mut T) + Send + 'static,
    {
        let shared = self.shared.clone();
        self.read(move |conn| {
            let give_up = std::time::Instant::now() + MERGE_PATIENCE;
            while std::time::Instant::now() < give_up {
                let Some((mark, taken)) = shared.cache.before_read(&take) else {
                    // The writer is committing dirty rows into the tables: a moment.
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                };
                let mut out = f(conn, taken)?;
                if shared.cache.unchanged(mark, &mut out, &fix) {
                    return Ok(out);
                }
            }
            Err(StoreError::new(
                "sqlite: the journal was being written into the tables during every attempt \
                 at a read for 5 s; try again",
            ))
        })
        .await
    }
}

impl Shared {
    pub(super) fn with_reader<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let idle = lock(&self.readers).pop();
        let mut conn = match idle {
            Some(c) => c,
            None => open_reader(&self.path)?,
        };
        let out = f(&mut conn);
        // A failed multi-statement read may leave its transaction open; close it or drop the
        // connection.
        let healthy = conn.is_autocommit() || conn.execute_batch("ROLLBACK").is_ok();
        if healthy {
            let mut idle = lock(&self.readers);
            if idle.len() < MAX_IDLE_READERS {
                idle.push(conn);
            }
        }
        out
    }
}

impl Shared {
    /// Decode the stored record of instance `key`, quarantining the instance if it cannot be.
    pub(super) fn decode_instance(
        &self,
        key: &Key,
        body: &str,
    ) -> Result<InstanceRecord, StoreError> {
        decode(body).map_err(|e| {
            self.quarantine
                .hold(key, format!("its instance record: {e}"), &self.schedule)
        })
    }

    /// Decode a stored turn of instance `key`, quarantining the instance if it cannot be.
    pub(super) fn decode_turn(&self, key: &Key, body: &str) -> Result<TurnRecord, StoreError> {
        decode(body).map_err(|e| {
            self.quarantine
                .hold(key, format!("a turn record: {e}"), &self.schedule)
        })
    }
}
