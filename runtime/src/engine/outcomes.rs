//! Waiters for turn outcomes: what [`Backend::await_turn`](crate::Backend::await_turn) sleeps
//! on in-process.
//!
//! A waiter registers for one instance before it reads the turn; every commit that gives a turn
//! of that instance an outcome (or deletes the instance) wakes that instance's waiters, and
//! only them. Nothing is polled, and a commit with no waiter anywhere costs one atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

type ByInstance = HashMap<Arc<str>, HashMap<String, Arc<Notify>>>;

/// The waiters of every instance, by namespace and id.
#[derive(Default)]
pub(super) struct Outcomes {
    /// How many waiters are registered, so commits skip the lock when there are none.
    waiting: AtomicUsize,
    by_instance: Mutex<ByInstance>,
}

impl Outcomes {
    fn lock(&self) -> MutexGuard<'_, ByInstance> {
        self.by_instance
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Register for the outcomes of instance `id` in namespace `ns`, until the waiter drops.
    pub(super) fn watch(&self, ns: &Arc<str>, id: &str) -> Waiter<'_> {
        let mut map = self.lock();
        let notify = map
            .entry(ns.clone())
            .or_default()
            .entry(id.to_owned())
            .or_default()
            .clone();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Waiter {
            outcomes: self,
            ns: ns.clone(),
            id: id.to_owned(),
            notify,
        }
    }

    /// Wake the waiters of instance `id`: one of its turns has an outcome now, or it is gone.
    pub(super) fn settled(&self, ns: &str, id: &str) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        if let Some(notify) = self.lock().get(ns).and_then(|m| m.get(id)) {
            notify.notify_waiters();
        }
    }
}

/// One registration; dropping it unregisters.
pub(super) struct Waiter<'a> {
    outcomes: &'a Outcomes,
    ns: Arc<str>,
    id: String,
    notify: Arc<Notify>,
}

impl Waiter<'_> {
    /// The notification to arm before each read of the turn.
    pub(super) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut map = self.outcomes.lock();
        self.outcomes.waiting.fetch_sub(1, Ordering::SeqCst);
        // The map's reference and this one: the last waiter of the instance removes its entry.
        if Arc::strong_count(&self.notify) == 2 {
            if let Some(ids) = map.get_mut(&self.ns) {
                ids.remove(&self.id);
                if ids.is_empty() {
                    map.remove(&self.ns);
                }
            }
        }
    }
}
