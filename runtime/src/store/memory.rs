//! An in-memory store for tests and examples. Nothing survives the process.
//!
//! It is also the reference of the `Store` contract: one short function per clause, with no
//! cache, journal or batching, so that what it answers is obviously what the contract says.
//! The differential tests (`runtime/tests/it/store_differential.rs`) hold SQLite and
//! PostgreSQL to its answers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;

use turnwise_core::protocol::*;
use turnwise_core::store::support::{check_message_id, check_revision, check_rewrite};
use turnwise_core::store::*;

#[derive(Default)]
struct Entry {
    instance: Option<InstanceRecord>,
    turns: BTreeMap<u64, TurnRecord>,
    by_message: HashMap<String, u64>,
}

/// A [`Store`] kept in memory. Commits are atomic and isolated; durability is the process's
/// lifetime.
#[derive(Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
}

#[derive(Default)]
struct Data {
    // (ns, id) -> entry; BTreeMap so listings come out sorted by id.
    instances: BTreeMap<(String, String), Entry>,
    // (ns, run id) -> summary.
    runs: BTreeMap<(String, String), WorkflowRun>,
    // (ns, type, version) -> schema document.
    schemas: BTreeMap<(String, String, String), String>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<(String, String), Entry>) -> T) -> T {
        self.with_all(|d| f(&mut d.instances))
    }

    fn with_all<T>(&self, f: impl FnOnce(&mut Data) -> T) -> T {
        // A poisoned lock only means another thread panicked mid-read; commits validate
        // everything before mutating, so the data is consistent.
        let mut guard = self.data.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }
}

fn key(ns: &str, id: &str) -> (String, String) {
    (ns.to_owned(), id.to_owned())
}

fn matches(inst: &InstanceRecord, workflows: &[WorkflowRef]) -> bool {
    workflows
        .iter()
        .any(|w| w.workflow_type == inst.workflow_type && w.version == inst.version)
}

#[async_trait]
impl Store for MemoryStore {
    async fn load_instance(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Option<InstanceRecord>, StoreError> {
        Ok(self.with(|d| d.get(&key(ns, id)).and_then(|e| e.instance.clone())))
    }

    async fn load_turn(
        &self,
        ns: &str,
        id: &str,
        number: u64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        Ok(self.with(|d| {
            d.get(&key(ns, id))
                .and_then(|e| e.turns.get(&number).cloned())
        }))
    }

    async fn find_message(
        &self,
        ns: &str,
        id: &str,
        message_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        Ok(self.with(|d| {
            let e = d.get(&key(ns, id))?;
            let n = e.by_message.get(message_id)?;
            e.turns.get(n).cloned()
        }))
    }

    async fn list_turns(
        &self,
        ns: &str,
        id: &str,
        range: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        Ok(self.with(|d| {
            let Some(e) = d.get(&key(ns, id)) else {
                return Vec::new();
            };
            let start = range.after.map_or(0, |a| a.saturating_add(1));
            e.turns
                .range(start..)
                .map(|(_, t)| t)
                .filter(|t| t.is_finished() == range.finished)
                .take(range.limit)
                .cloned()
                .collect()
        }))
    }

    async fn list_instances(
        &self,
        ns: &str,
        filter: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        Ok(self.with(|d| {
            d.iter()
                .filter(|((n, id), _)| {
                    n == ns && filter.after.as_deref().is_none_or(|a| id.as_str() > a)
                })
                .filter_map(|(_, e)| e.instance.as_ref())
                .filter(|i| {
                    filter
                        .workflow_type
                        .as_deref()
                        .is_none_or(|t| t == i.workflow_type)
                })
                .filter(|i| filter.version.as_deref().is_none_or(|v| v == i.version))
                .take(filter.limit)
                .cloned()
                .collect()
        }))
    }

    async fn count_instances(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        Ok(self.with(|d| {
            let mut all = 0;
            let mut with = 0;
            for i in d
                .iter()
                .filter(|((n, _), _)| n == ns)
                .filter_map(|(_, e)| e.instance.as_ref())
            {
                if i.workflow_type == workflow_type && version.is_none_or(|v| v == i.version) {
                    all += 1;
                    if !i.pending.is_empty() {
                        with += 1;
                    }
                }
            }
            (all, with)
        }))
    }

    async fn due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(self.with(|d| {
            let mut due: Vec<(Millis, String)> = d
                .iter()
                .filter(|((n, _), _)| n == ns)
                .filter_map(|(_, e)| e.instance.as_ref())
                .filter(|i| matches(i, workflows))
                .filter_map(|i| i.due_at_ms.filter(|t| *t <= now).map(|t| (t, i.id.clone())))
                .collect();
            due.sort();
            due.into_iter().take(limit).map(|(_, id)| id).collect()
        }))
    }

    async fn next_due(
        &self,
        ns: &str,
        workflows: &[WorkflowRef],
    ) -> Result<Option<Millis>, StoreError> {
        Ok(self.with(|d| {
            d.iter()
                .filter(|((n, _), _)| n == ns)
                .filter_map(|(_, e)| e.instance.as_ref())
                .filter(|i| matches(i, workflows))
                .filter_map(|i| i.due_at_ms)
                .min()
        }))
    }

    async fn list_runs(&self, ns: &str, filter: RunFilter) -> Result<Vec<WorkflowRun>, StoreError> {
        Ok(self.with_all(|d| {
            d.runs
                .iter()
                .rev()
                .filter(|((n, id), _)| {
                    n == ns && filter.before.as_deref().is_none_or(|b| id.as_str() < b)
                })
                .map(|(_, r)| r)
                .filter(|r| {
                    filter
                        .instance
                        .as_deref()
                        .is_none_or(|i| i == r.workflow_id)
                })
                .take(filter.limit)
                .cloned()
                .collect()
        }))
    }

    async fn load_run(&self, ns: &str, run_id: &str) -> Result<Option<WorkflowRun>, StoreError> {
        Ok(self.with_all(|d| d.runs.get(&key(ns, run_id)).cloned()))
    }

    async fn count_runs(&self, ns: &str, since_ms: Millis) -> Result<Vec<RunCount>, StoreError> {
        Ok(self.with_all(|d| {
            let mut counts: BTreeMap<(Millis, String), u64> = BTreeMap::new();
            for r in d
                .runs
                .iter()
                .filter(|((n, _), r)| n == ns && r.started_at_ms >= since_ms)
                .map(|(_, r)| r)
            {
                let hour = r.started_at_ms.div_euclid(HOUR_MS) * HOUR_MS;
                *counts.entry((hour, r.outcome.to_string())).or_default() += 1;
            }
            counts
                .into_iter()
                .map(|((hour_ms, outcome), runs)| RunCount {
                    hour_ms,
                    outcome,
                    runs,
                })
                .collect()
        }))
    }

    async fn save_schema(
        &self,
        ns: &str,
        workflow_type: &str,
        version: &str,
        document: &str,
    ) -> Result<(), StoreError> {
        self.with_all(|d| {
            d.schemas.insert(
                (ns.to_owned(), workflow_type.to_owned(), version.to_owned()),
                document.to_owned(),
            )
        });
        Ok(())
    }

    async fn load_schemas(&self, ns: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.with_all(|d| {
            d.schemas
                .iter()
                .filter(|((n, _, _), _)| n == ns)
                .map(|(_, doc)| doc.clone())
                .collect()
        }))
    }

    async fn commit(&self, write: WriteSet) -> Result<(), CommitError> {
        self.with_all(|all| {
            let k = key(&write.ns, &write.id);
            let current = all
                .instances
                .get(&k)
                .and_then(|e| e.instance.as_ref())
                .map(|i| i.revision);
            check_revision(current, &write)?;
            let Some(mut instance) = write.instance else {
                all.instances.remove(&k);
                return Ok(());
            };
            let entry = all.instances.entry(k).or_default();
            // Every check before any change, so that a refused commit writes nothing.
            check_turns(entry, &write.id, &write.turns)?;
            for t in write.turns {
                entry.by_message.insert(t.message_id.clone(), t.number);
                entry.turns.insert(t.number, t);
            }
            instance.history_pruned_through = entry
                .instance
                .as_ref()
                .map_or(0, |i| i.history_pruned_through);
            if let Some(retention) = write.retention {
                apply_retention(entry, &mut instance, retention);
            }
            entry.instance = Some(instance);
            for run in write.runs {
                all.runs.insert(key(&write.ns, &run.id), run);
            }
            if let Some(before) = write.prune_runs_before {
                prune_runs(&mut all.runs, before);
            }
            Ok(())
        })
    }
}

/// The clauses on a write set's turns: a turn in history is never rewritten, a turn keeps its
/// message id, and the message-id index stays unique.
fn check_turns(entry: &Entry, id: &str, turns: &[TurnRecord]) -> Result<(), CommitError> {
    for (i, t) in turns.iter().enumerate() {
        if let Some(old) = entry.turns.get(&t.number) {
            check_rewrite(id, old, t)?;
        }
        let kept = entry.by_message.get(&t.message_id).copied();
        check_message_id(turns, i, kept)?;
    }
    Ok(())
}

/// Retention, which only deletes: of the finished turns, all but the last `keep_turns` that
/// finished before `keep_since_ms` go, and `history_pruned_through` rises to the last gone.
fn apply_retention(entry: &mut Entry, instance: &mut InstanceRecord, r: Retention) {
    let finished: Vec<u64> = entry
        .turns
        .values()
        .filter(|t| t.is_finished())
        .map(|t| t.number)
        .collect();
    let keep_from = finished.len().saturating_sub(r.keep_turns as usize);
    for n in &finished[..keep_from] {
        let old = entry.turns[n].finished_at_ms.unwrap_or(Millis::MAX) < r.keep_since_ms;
        if let Some(t) = old.then(|| entry.turns.remove(n)).flatten() {
            entry.by_message.remove(&t.message_id);
            instance.history_pruned_through = instance.history_pruned_through.max(*n);
        }
    }
}

/// Run summaries that ended before `before` go, at most [`RUN_PRUNE_BATCH`] per commit.
fn prune_runs(runs: &mut BTreeMap<(String, String), WorkflowRun>, before: Millis) {
    let old: Vec<(String, String)> = runs
        .iter()
        .filter(|(_, r)| r.ended_at_ms < before)
        .map(|(k, _)| k.clone())
        .take(RUN_PRUNE_BATCH)
        .collect();
    for k in &old {
        runs.remove(k);
    }
}
