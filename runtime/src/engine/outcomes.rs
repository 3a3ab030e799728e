//! Waiters for turn outcomes: what [`Backend::await_turn`](crate::Backend::await_turn) sleeps
//! on in-process.
//!
//! A waiter registers for one instance before it reads the turn; every commit that gives a turn
//! of that instance an outcome (or deletes the instance) wakes that instance's waiters, and
//! only them (instances are kept by a 64-bit key: two with one key only wake a waiter that
//! reads its turn and waits again). Nothing is polled, and a commit with no waiter anywhere costs one atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Waiters by [`instance_key`](super::instance_key).
type ByInstance = HashMap<u64, Arc<Notify>>;

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

    /// Register for the outcomes of the instance with key `instance` (its
    /// [`instance_key`](super::instance_key)), until the waiter drops.
    pub(super) fn watch(&self, instance: u64) -> Waiter<'_> {
        let notify = self.lock().entry(instance).or_default().clone();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Waiter {
            outcomes: self,
            instance,
            notify,
        }
    }

    /// Wake the waiters of the instance with key `instance`: one of its turns has an outcome
    /// now, or it is gone.
    pub(super) fn settled(&self, instance: u64) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        if let Some(notify) = self.lock().get(&instance) {
            notify.notify_waiters();
        }
    }
}

impl Outcomes {
    /// Wake every waiter: outcomes may have been missed (a shared store lost change notices).
    pub(super) fn settled_all(&self) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        for notify in self.lock().values() {
            notify.notify_waiters();
        }
    }
}

/// One registration; dropping it unregisters.
pub(super) struct Waiter<'a> {
    outcomes: &'a Outcomes,
    instance: u64,
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
            map.remove(&self.instance);
        }
    }
}
