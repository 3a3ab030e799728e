//! Quarantined instances: those with a stored record that cannot be decoded.
//!
//! One unreadable record must not take the store down. An instance whose record (or one of its
//! turns, or a journaled write of it) fails to decode is *quarantined*: every read of it
//! answers [`StoreError::Unreadable`] naming it and why, it leaves the schedule (so claims go
//! on with the other instances instead of tripping over it on every scan), listings leave it
//! out, and the problem is logged at error level once. Everything else is served as before.
//!
//! Journaled writes that cannot be decoded when the store opens are moved, as they were, into
//! the `quarantine` table rather than dropped, and the instance stays quarantined across
//! restarts until an operator deals with it (see `docs/architecture.md`). Records of the tables
//! that cannot be decoded stay where they are and are found again, and quarantined again, by
//! the first read after each open.

use super::*;
use turnwise_core::store::support::unreadable;

/// The quarantined instances and why each is.
///
/// Every read asks it first, so the common case (nothing quarantined) is one atomic load, not
/// a lock shared by every reading thread.
#[derive(Default)]
pub(super) struct Quarantine {
    held: Mutex<HashMap<Key, String>>,
    /// Whether `held` has any entry; written under its lock.
    any: std::sync::atomic::AtomicBool,
}

impl Quarantine {
    /// The instances the `quarantine` table holds writes of.
    pub(super) fn load(conn: &Connection) -> Result<Self, StoreError> {
        let mut held = HashMap::new();
        let mut stmt = conn
            .prepare("SELECT ns, id, reason FROM quarantine ORDER BY seq")
            .map_err(db("read the quarantine table"))?;
        let rows = stmt
            .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
            .map_err(db("read the quarantine table"))?;
        for row in rows {
            let (key, reason): (Key, String) = row.map_err(db("read the quarantine table"))?;
            tracing::error!(
                target: "turnwise::store",
                namespace = %key.0, instance = %key.1, %reason,
                "instance quarantined: a journaled write of it could not be decoded when the \
                 store was opened; it is kept in the `quarantine` table and the instance is \
                 refused until an operator deletes it or restores it from a backup"
            );
            held.entry(key).or_insert(reason);
        }
        Ok(Self {
            any: (!held.is_empty()).into(),
            held: Mutex::new(held),
        })
    }

    /// Take every quarantined instance off the schedule (after it was loaded from the tables).
    pub(super) fn unschedule(&self, schedule: &Schedule) {
        for key in lock(&self.held).keys() {
            schedule.remove(key);
        }
    }

    /// `Err(Unreadable)` if `key` is quarantined.
    pub(super) fn check(&self, ns: &str, id: &str) -> Result<(), StoreError> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let held = lock(&self.held);
        match held.get(&(ns.to_owned(), id.to_owned())) {
            Some(reason) => Err(unreadable(ns, id, reason.as_str())),
            None => Ok(()),
        }
    }

    /// Whether `key` is quarantined.
    pub(super) fn contains(&self, key: &Key) -> bool {
        self.any.load(Ordering::Acquire) && lock(&self.held).contains_key(key)
    }

    /// Lift the quarantine of `key` (its rows were deleted).
    pub(super) fn release(&self, key: &Key) {
        let mut held = lock(&self.held);
        held.remove(key);
        self.any.store(!held.is_empty(), Ordering::Release);
    }

    /// Quarantine `key` because `reason` (a record of it failed to decode), take it off the
    /// schedule, log it the first time, and answer the error its reads give.
    pub(super) fn hold(&self, key: &Key, reason: String, schedule: &Schedule) -> StoreError {
        let mut held = lock(&self.held);
        if !held.contains_key(key) {
            tracing::error!(
                target: "turnwise::store",
                namespace = %key.0, instance = %key.1, %reason,
                "instance quarantined: a stored record of it cannot be decoded; its reads are \
                 refused and claims skip it, every other instance is served"
            );
            held.insert(key.clone(), reason.clone());
            self.any.store(true, Ordering::Release);
        }
        schedule.remove(key);
        unreadable(&key.0, &key.1, &reason)
    }
}
