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

#[derive(Default)]
struct ScheduleInner {
    /// Due instances of each group, earliest first.
    groups: HashMap<Group, BTreeSet<(Millis, String)>>,
    /// Where each due instance is filed, to move it.
    filed: HashMap<Key, (Group, Millis)>,
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
        workflows: &[(String, String)],
        now: Millis,
        limit: usize,
    ) -> Vec<String> {
        let s = lock(&self.inner);
        let mut due: Vec<(Millis, &str)> = Vec::new();
        for (workflow_type, version) in workflows {
            let group = (ns.to_owned(), workflow_type.clone(), version.clone());
            if let Some(set) = s.groups.get(&group) {
                due.extend(
                    set.iter()
                        .take_while(|(at, _)| *at <= now)
                        .take(limit)
                        .map(|(at, id)| (*at, id.as_str())),
                );
            }
        }
        due.sort_unstable();
        due.truncate(limit);
        due.into_iter().map(|(_, id)| id.to_owned()).collect()
    }

    /// The earliest due time among the listed workflows' instances.
    pub(super) fn next_due(&self, ns: &str, workflows: &[(String, String)]) -> Option<Millis> {
        let s = lock(&self.inner);
        workflows
            .iter()
            .filter_map(|(workflow_type, version)| {
                let group = (ns.to_owned(), workflow_type.clone(), version.clone());
                s.groups.get(&group)?.first().map(|(at, _)| *at)
            })
            .min()
    }
}

impl ScheduleInner {
    /// File `key` under its workflow at `due` (`None`: not due at all).
    fn file(&mut self, key: &Key, workflow_type: &str, version: &str, due: Option<Millis>) {
        match self.filed.get(key) {
            Some((g, at)) if g.1 == workflow_type && g.2 == version && Some(*at) == due => return,
            Some(_) => self.unfile(key),
            None => {}
        }
        let Some(at) = due else { return };
        let group = (key.0.clone(), workflow_type.to_owned(), version.to_owned());
        self.groups
            .entry(group.clone())
            .or_default()
            .insert((at, key.1.clone()));
        self.filed.insert(key.clone(), (group, at));
    }

    fn unfile(&mut self, key: &Key) {
        let Some((group, at)) = self.filed.remove(key) else {
            return;
        };
        if let Some(set) = self.groups.get_mut(&group) {
            set.remove(&(at, key.1.clone()));
            if set.is_empty() {
                self.groups.remove(&group);
            }
        }
    }
}
