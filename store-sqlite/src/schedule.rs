//! The schedule index in memory: each instance's `due_at_ms`, as last committed.

use std::collections::BTreeSet;

use super::*;

/// Instances with a due time, by namespace, workflow type and version.
///
/// Loaded from the `instances` table when the store opens, then kept by the writer after every
/// `COMMIT` (before any caller is answered), so [`Store::due`] and [`Store::next_due`] (asked on
/// every claim scan) are answered without touching the file, and a journaled write (whose row
/// in the table is not rewritten yet) is due on time.
#[derive(Default)]
pub(super) struct Schedule {
    inner: Mutex<ScheduleInner>,
}

/// `(namespace, workflow type, version)`.
type Group = (String, String, String);

/// A [`Group`] borrowed or owned, to look one up without allocating it (as [`KeyRef`] does for
/// instance keys): hashed and compared as the tuple is, part by part.
trait GroupRef {
    fn parts(&self) -> (&str, &str, &str);
}

impl GroupRef for Group {
    fn parts(&self) -> (&str, &str, &str) {
        (&self.0, &self.1, &self.2)
    }
}

impl GroupRef for (&str, &str, &str) {
    fn parts(&self) -> (&str, &str, &str) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn GroupRef + 'a> for Group {
    fn borrow(&self) -> &(dyn GroupRef + 'a) {
        self
    }
}

impl std::hash::Hash for dyn GroupRef + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (ns, workflow_type, version) = self.parts();
        ns.hash(state);
        workflow_type.hash(state);
        version.hash(state);
    }
}

impl PartialEq for dyn GroupRef + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn GroupRef + '_ {}

#[derive(Default)]
struct ScheduleInner {
    /// Due instances of each group, earliest first. An id is shared with its [`Filed`] entry,
    /// so that moving an instance to another time copies no string.
    groups: HashMap<Group, BTreeSet<(Millis, Arc<str>)>>,
    /// Where each due instance is filed, to move it.
    filed: HashMap<Key, Filed>,
}

/// Where an instance is filed.
struct Filed {
    group: Group,
    at: Millis,
    id: Arc<str>,
}

impl Schedule {
    /// Read every due instance from the tables (the index over `due_at_ms` is ordered with
    /// `NULL` first, so only the due ones are visited).
    pub(super) fn load(conn: &Connection) -> Result<Self, StoreError> {
        let mut inner = ScheduleInner::default();
        let mut stmt = conn
            .prepare(
                "SELECT ns, id, workflow_type, version, due_at_ms FROM instances \
                 WHERE due_at_ms IS NOT NULL",
            )
            .map_err(db("read the schedule"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(db("read the schedule"))?;
        for row in rows {
            let (ns, id, workflow_type, version, due): (String, String, String, String, Millis) =
                row.map_err(db("read the schedule"))?;
            inner.file(&(ns, id), &workflow_type, &version, Some(due));
        }
        Ok(Self {
            inner: Mutex::new(inner),
        })
    }

    /// Record the committed due times: `None` for a deleted instance.
    pub(super) fn committed<'a>(
        &self,
        changes: impl IntoIterator<Item = (&'a Key, Option<&'a InstanceRecord>)>,
    ) {
        let mut s = lock(&self.inner);
        for (key, record) in changes {
            match record {
                Some(r) => s.file(key, &r.workflow_type, &r.version, r.due_at_ms),
                None => s.unfile(key),
            }
        }
    }

    /// Take an instance off the schedule until its next commit (a quarantined one).
    pub(super) fn remove(&self, key: &Key) {
        lock(&self.inner).unfile(key);
    }

    /// Ids of the listed workflows' instances due at `now`, earliest first, at most `limit`.
    pub(super) fn due(
        &self,
        ns: &str,
        workflows: &[(&str, &str)],
        now: Millis,
        limit: usize,
    ) -> Vec<String> {
        let s = lock(&self.inner);
        let mut due: Vec<(Millis, &str)> = Vec::new();
        for &(workflow_type, version) in workflows {
            let group: &dyn GroupRef = &(ns, workflow_type, version);
            if let Some(set) = s.groups.get(group) {
                due.extend(
                    set.iter()
                        .take_while(|(at, _)| *at <= now)
                        .take(limit)
                        .map(|(at, id)| (*at, &**id)),
                );
            }
        }
        due.sort_unstable();
        due.truncate(limit);
        due.into_iter().map(|(_, id)| id.to_owned()).collect()
    }

    /// The earliest due time among the listed workflows' instances.
    pub(super) fn next_due(&self, ns: &str, workflows: &[(&str, &str)]) -> Option<Millis> {
        let s = lock(&self.inner);
        workflows
            .iter()
            .filter_map(|&(workflow_type, version)| {
                let group: &dyn GroupRef = &(ns, workflow_type, version);
                s.groups.get(group)?.first().map(|(at, _)| *at)
            })
            .min()
    }
}

impl ScheduleInner {
    /// File `key` under its workflow at `due` (`None`: not due at all).
    fn file(&mut self, key: &Key, workflow_type: &str, version: &str, due: Option<Millis>) {
        let filed = self.filed.get_mut(key);
        match (filed, due) {
            (Some(f), Some(at)) if f.group.1 == workflow_type && f.group.2 == version => {
                // The usual move: the same group, another time (or the same: nothing to do).
                if f.at != at {
                    if let Some(set) = self.groups.get_mut(&f.group) {
                        set.remove(&(f.at, f.id.clone()));
                        set.insert((at, f.id.clone()));
                    }
                    f.at = at;
                }
                return;
            }
            (Some(_), _) => self.unfile(key),
            (None, _) => {}
        }
        let Some(at) = due else { return };
        let group = (key.0.clone(), workflow_type.to_owned(), version.to_owned());
        let id: Arc<str> = Arc::from(key.1.as_str());
        self.groups
            .entry(group.clone())
            .or_default()
            .insert((at, id.clone()));
        self.filed.insert(key.clone(), Filed { group, at, id });
    }

    fn unfile(&mut self, key: &dyn KeyRef) {
        let Some(f) = self.filed.remove(key) else {
            return;
        };
        if let Some(set) = self.groups.get_mut(&f.group) {
            set.remove(&(f.at, f.id));
            if set.is_empty() {
                self.groups.remove(&f.group);
            }
        }
    }
}
