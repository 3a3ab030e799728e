//! The write-through cache of decoded instances, and the journaled records not yet in the
//! tables.

use std::collections::HashSet;

use super::*;

/// A bounded cache of decoded instances with two generations: entries are inserted into `hot`;
/// when `hot` is full it becomes `cold` and the old `cold` is dropped. A hit in `cold` moves the
/// entry back to `hot`. Approximates LRU at O(1) per operation, holding at most `cap` entries.
///
/// The writer updates it after each `COMMIT`. A reader may fill a miss from the file only if no
/// commit happened since it looked (`gen`), so a slow reader never puts back an older record.
///
/// An entry also keeps the *unfinished* turns that commits wrote while it was cached. Only the
/// writer adds them, after the commit that wrote them, so a cached turn is always the stored
/// one; a turn not in the entry is read from the file. This is what lets a worker's calls on a
/// running turn (operation, progress, checkpoint, heartbeat) go without any read at all.
///
/// **Dirty entries.** An instance whose latest writes went to the journal (see
/// [`SqliteStore`]) has rows in the tables older than what was committed, or none yet for its
/// newest turns. Its entry is kept in `dirty`, is never evicted, holds every journaled turn
/// (finished ones too), and is the truth for that instance until the writer has written the
/// rows and published that. Every read consults `dirty` first, whatever the cache's size.
///
/// **Tables changing under dirty entries.** `tables` is odd while the writer commits a
/// transaction that writes dirty instances' rows into the tables (a flush, or a direct write
/// on a dirty instance), until the cache shows the result. A reader that merges the tables
/// with dirty entries notes it before reading and keeps its result only if it is still the
/// same, even number afterwards.
pub(super) struct Cache {
    half: usize,
    inner: Mutex<CacheInner>,
}

/// A cached instance and its turns as the last `COMMIT` left them.
struct Entry {
    instance: InstanceRecord,
    /// Unfinished turns written while cached, and every journaled turn of a dirty entry.
    turns: HashMap<u64, TurnRecord>,
    /// Set while the entry is dirty.
    journal: Option<Journaled>,
}

/// What a dirty entry holds beyond the tables.
struct Journaled {
    /// Numbers of the turns journaled since the instance's rows were last written.
    turns: HashSet<u64>,
}

#[derive(Default)]
struct CacheInner {
    gen: u64,
    tables: u64,
    hot: HashMap<Key, Entry>,
    cold: HashMap<Key, Entry>,
    dirty: HashMap<Key, Entry>,
}

/// What an update of the cache replaced or evicted, dropped only once the lock is released:
/// freeing a record (its JSON trees, its turns' steps) takes long enough that readers waiting
/// on the lock would feel it, and it is mostly memory that another thread allocated.
#[derive(Default)]
struct Replaced {
    instances: Vec<InstanceRecord>,
    turns: Vec<TurnRecord>,
    entries: Vec<Entry>,
    generations: Vec<HashMap<Key, Entry>>,
}

impl Replaced {
    fn entry(&mut self, entry: Option<Entry>) {
        self.entries.extend(entry);
    }
}

/// What a committed write set did to one instance, for [`Cache::committed`].
pub(super) enum CacheUpdate {
    /// Written to the tables: the new record and the turns written.
    Clean(InstanceRecord, Vec<TurnRecord>),
    /// Appended to the journal: the tables are behind until the writer writes them.
    Dirty(InstanceRecord, Vec<TurnRecord>),
    /// Deleted.
    Deleted,
    /// Refused as a conflict: forget a clean entry (a dirty one stays the truth).
    Forget,
}

/// Whether a write set may go to the journal, decided from the cached record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It may, once the tables confirm what the cache cannot know: that the turns at these
    /// indexes of the write set are new (neither their number nor their message id is in the
    /// tables), and, with `Some(since)`, that no finished turn in the tables finished before
    /// `since` (so retention has nothing to delete).
    Journal {
        new_turns: Vec<usize>,
        retention_since: Option<Millis>,
    },
    /// The instance is dirty and its revision is not the expected one.
    Conflict,
    /// Apply it to the tables.
    Direct,
}

impl Cache {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            half: cap.div_ceil(2),
            inner: Mutex::default(),
        }
    }

    /// Whether the cache keeps clean entries (the journal needs it to).
    pub(super) fn enabled(&self) -> bool {
        self.half > 0
    }

    /// The cached record, or the generation to pass to [`Cache::fill`].
    pub(super) fn get(&self, key: &dyn KeyRef) -> Result<InstanceRecord, u64> {
        let mut replaced = Replaced::default();
        let mut c = lock(&self.inner);
        if let Some(e) = c.dirty.get(key).or_else(|| c.hot.get(key)) {
            return Ok(e.instance.clone());
        }
        let found = match c.cold.remove_entry(key) {
            Some((k, e)) => {
                let out = e.instance.clone();
                c.insert(self.half, k, e, &mut replaced);
                Ok(out)
            }
            None => Err(c.gen),
        };
        drop(c);
        drop(replaced);
        found
    }

    /// A cached turn of a cached instance (unfinished, or journaled).
    pub(super) fn turn(&self, key: &dyn KeyRef, number: u64) -> Option<TurnRecord> {
        let c = lock(&self.inner);
        c.find(key)?.turns.get(&number).cloned()
    }

    pub(super) fn fill(&self, key: Key, record: InstanceRecord, gen: u64) {
        if self.half == 0 {
            return;
        }
        let mut replaced = Replaced::default();
        let mut c = lock(&self.inner);
        if c.gen == gen {
            let entry = Entry {
                instance: record,
                turns: HashMap::new(),
                journal: None,
            };
            c.insert(self.half, key, entry, &mut replaced);
        }
        drop(c);
    }

    /// Whether `write` may be journaled, judged against the cached record (dirty or clean).
    /// Only for a write set whose instance no earlier write set of the same batch touched: the
    /// cache shows the instance as of the last `COMMIT`.
    ///
    /// A write set may be journaled when it changes no more than a running inbox does: the
    /// instance keeps its type, version and pruning mark, and every turn it writes is either
    /// one of the instance's unfinished turns (same message id; it may finish now) or a new
    /// turn. Retention must have nothing to delete. Anything else (creates, deletes, type
    /// changes, pruning, rewriting history) goes to the tables.
    pub(super) fn verdict(&self, key: &Key, write: &WriteSet) -> Verdict {
        let (Some(new), Some(expected)) = (&write.instance, write.expected_revision) else {
            return Verdict::Direct;
        };
        if !write.runs.is_empty() || write.prune_runs_before.is_some() {
            // Run summaries go to their table with the rest of the write set.
            return Verdict::Direct;
        }
        if self.half == 0 {
            return Verdict::Direct;
        }
        let c = lock(&self.inner);
        let Some(entry) = c.find(key) else {
            return Verdict::Direct;
        };
        let dirty = entry.journal.is_some();
        let old = &entry.instance;
        if old.revision != expected {
            // A dirty entry is the only up-to-date copy; a clean one lets the tables decide.
            return if dirty {
                Verdict::Conflict
            } else {
                Verdict::Direct
            };
        }
        let same_instance = new.revision == expected + 1
            && new.ns == write.ns
            && new.id == write.id
            && new.workflow_type == old.workflow_type
            && new.version == old.version
            && new.history_pruned_through == old.history_pruned_through;
        if !same_instance {
            return Verdict::Direct;
        }
        let mut new_turns = Vec::new();
        for (i, t) in write.turns.iter().enumerate() {
            let known = entry.turns.get(&t.number);
            if old.pending.contains(&t.number) {
                // A running or queued turn: the cache must know it, to see its message id.
                match known {
                    Some(o) if o.message_id == t.message_id && !o.is_finished() => {}
                    _ => return Verdict::Direct,
                }
            } else {
                // A new turn: not journaled before under that number or message id, and
                // born unfinished; the tables are asked about the rest.
                let clash = known.is_some()
                    || entry.turns.values().any(|o| o.message_id == t.message_id)
                    || write.turns[..i]
                        .iter()
                        .any(|o| o.number == t.number || o.message_id == t.message_id);
                if clash || t.is_finished() {
                    return Verdict::Direct;
                }
                new_turns.push(i);
            }
        }
        let retention_since = match write.retention {
            None => None,
            Some(r) => {
                let journaled_old = entry
                    .turns
                    .values()
                    .chain(&write.turns)
                    .any(|t| t.finished_at_ms.is_some_and(|at| at < r.keep_since_ms));
                if journaled_old {
                    return Verdict::Direct;
                }
                Some(r.keep_since_ms)
            }
        };
        Verdict::Journal {
            new_turns,
            retention_since,
        }
    }

    /// The writer is about to commit rows of dirty instances into the tables.
    pub(super) fn tables_changing(&self) {
        let mut c = lock(&self.inner);
        if c.tables.is_multiple_of(2) {
            c.tables = c.tables.wrapping_add(1);
        }
    }

    /// A reader's look at the dirty entries before it reads the tables: `None` while the
    /// writer commits rows of dirty instances (wait a moment and ask again), else the mark to
    /// pass to [`Cache::unchanged`] and what `take` copied.
    pub(super) fn before_read<S>(&self, take: impl FnOnce(&Dirty<'_>) -> S) -> Option<(u64, S)> {
        let c = lock(&self.inner);
        if !c.tables.is_multiple_of(2) {
            return None;
        }
        Some((c.tables, take(&Dirty(&c.dirty))))
    }

    /// After a reader's read of the tables: whether no rows of dirty instances were written
    /// since [`Cache::before_read`]; if so, `fix` runs on the dirty entries as they are now.
    pub(super) fn unchanged<T>(
        &self,
        mark: u64,
        out: &mut T,
        fix: impl FnOnce(&Dirty<'_>, &mut T),
    ) -> bool {
        let c = lock(&self.inner);
        if c.tables != mark {
            return false;
        }
        fix(&Dirty(&c.dirty), out);
        true
    }

    /// After a `COMMIT` that wrote every dirty entry into the tables (a flush).
    pub(super) fn flushed(&self) {
        let mut replaced = Replaced::default();
        let mut c = lock(&self.inner);
        c.gen = c.gen.wrapping_add(1);
        for (key, mut entry) in std::mem::take(&mut c.dirty) {
            entry.clean(&mut replaced);
            c.insert(self.half, key, entry, &mut replaced);
        }
        drop(c);
    }

    /// After a `COMMIT`: record what the batch's write sets did, in batch order, then end a
    /// [`Cache::tables_changing`] stretch.
    pub(super) fn committed(&self, changes: impl IntoIterator<Item = (Key, CacheUpdate)>) {
        let mut replaced = Replaced::default();
        let mut c = lock(&self.inner);
        c.gen = c.gen.wrapping_add(1);
        for (key, change) in changes {
            let (instance, turns, dirty) = match change {
                CacheUpdate::Clean(i, t) => (i, t, false),
                CacheUpdate::Dirty(i, t) => (i, t, true),
                CacheUpdate::Deleted => {
                    replaced.entry(c.dirty.remove(&key));
                    replaced.entry(c.hot.remove(&key));
                    replaced.entry(c.cold.remove(&key));
                    continue;
                }
                CacheUpdate::Forget => {
                    if !c.dirty.contains_key(&key) {
                        replaced.entry(c.hot.remove(&key));
                        replaced.entry(c.cold.remove(&key));
                    }
                    continue;
                }
            };
            let old = c
                .dirty
                .remove(&key)
                .or_else(|| c.hot.remove(&key))
                .or_else(|| c.cold.remove(&key));
            if !dirty && self.half == 0 {
                replaced.entry(old);
                replaced.instances.push(instance);
                replaced.turns.extend(turns);
                continue;
            }
            // (A clean entry judged for the journal may have been evicted since: then the
            // entry starts from this write set alone, and the tables have its other turns.)
            let mut entry = old.unwrap_or_else(|| Entry {
                instance: instance.clone(),
                turns: HashMap::new(),
                journal: None,
            });
            replaced
                .instances
                .push(std::mem::replace(&mut entry.instance, instance));
            if dirty && entry.journal.is_none() {
                entry.journal = Some(Journaled {
                    turns: HashSet::new(),
                });
            }
            for t in turns {
                let old = if let Some(j) = &mut entry.journal {
                    j.turns.insert(t.number);
                    entry.turns.insert(t.number, t)
                } else if t.is_finished() {
                    let number = t.number;
                    replaced.turns.push(t);
                    entry.turns.remove(&number)
                } else {
                    entry.turns.insert(t.number, t)
                };
                replaced.turns.extend(old);
            }
            if dirty {
                c.dirty.insert(key, entry);
            } else {
                entry.clean(&mut replaced);
                c.insert(self.half, key, entry, &mut replaced);
            }
        }
        if !c.tables.is_multiple_of(2) {
            c.tables = c.tables.wrapping_add(1);
        }
        drop(c);
    }

    /// End a [`Cache::tables_changing`] stretch that no [`Cache::committed`] ends: a `COMMIT`
    /// that failed, or a flush committed on its own (after [`Cache::flushed`]).
    pub(super) fn tables_settled(&self) {
        let mut c = lock(&self.inner);
        if !c.tables.is_multiple_of(2) {
            c.tables = c.tables.wrapping_add(1);
        }
    }
}

impl Entry {
    /// The tables caught up with this entry: keep only what a clean entry keeps.
    fn clean(&mut self, replaced: &mut Replaced) {
        self.journal = None;
        let pending = &self.instance.pending;
        replaced.turns.extend(
            self.turns
                .extract_if(|n, t| t.is_finished() || !pending.contains(n))
                .map(|(_, t)| t),
        );
    }
}

/// The dirty entries, as a merging reader sees them.
pub(super) struct Dirty<'a>(&'a HashMap<Key, Entry>);

impl Dirty<'_> {
    /// Whether any instance is dirty.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A dirty instance's record.
    pub(super) fn instance(&self, key: &Key) -> Option<&InstanceRecord> {
        self.0.get(key).map(|e| &e.instance)
    }

    /// A dirty instance's journaled turn with this message id.
    pub(super) fn turn_by_message(&self, key: &Key, message_id: &str) -> Option<&TurnRecord> {
        let e = self.0.get(key)?;
        let j = e.journal.as_ref()?;
        j.turns
            .iter()
            .filter_map(|n| e.turns.get(n))
            .find(|t| t.message_id == message_id)
    }

    /// Copies of a dirty instance's journaled turns (`None` when it is clean).
    pub(super) fn turns(&self, key: &Key) -> Option<Vec<TurnRecord>> {
        let e = self.0.get(key)?;
        let j = e.journal.as_ref()?;
        Some(
            j.turns
                .iter()
                .filter_map(|n| e.turns.get(n))
                .cloned()
                .collect(),
        )
    }

    /// The dirty instances of one workflow type (and version, if given) in `ns`: each id with
    /// whether it has unfinished turns now.
    pub(super) fn busy(
        &self,
        ns: &str,
        workflow_type: &str,
        version: Option<&str>,
    ) -> Vec<(String, bool)> {
        self.0
            .iter()
            .filter(|((n, _), e)| {
                n == ns
                    && e.instance.workflow_type == workflow_type
                    && version.is_none_or(|v| e.instance.version == v)
            })
            .filter(|(_, e)| e.journal.is_some())
            .map(|((_, id), e)| (id.clone(), !e.instance.pending.is_empty()))
            .collect()
    }
}

impl CacheInner {
    /// The entry for `key`, dirty first.
    fn find(&self, key: &dyn KeyRef) -> Option<&Entry> {
        self.dirty
            .get(key)
            .or_else(|| self.hot.get(key))
            .or_else(|| self.cold.get(key))
    }

    /// Cache `entry` as hot; what it replaces, and the cold generation it retires when the
    /// hot one is full, go to `replaced`.
    fn insert(&mut self, half: usize, key: Key, entry: Entry, replaced: &mut Replaced) {
        if half == 0 {
            replaced.entries.push(entry);
            return;
        }
        replaced.entry(self.cold.remove(&key));
        replaced.entry(self.hot.insert(key, entry));
        if self.hot.len() >= half {
            let retired = std::mem::replace(&mut self.cold, std::mem::take(&mut self.hot));
            replaced.generations.push(retired);
        }
    }
}
