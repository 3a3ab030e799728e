//! Wake-ups of waiting claims: one waiting claim per event, not all of them.
//!
//! Waiting claims are grouped by namespace and by the workflows they list (a worker's slots
//! all list the same ones, so they form one group). Every commit reports when its instance is
//! next due ([`Wakeups::due`]), and that rings at most one member of each group listing the
//! instance's workflow:
//!
//! - **due now** (a message admitted to an idle instance, a turn completed with more queued, a
//!   signal delivered, a resume): the first member not already rung is rung; it scans, and the
//!   rest sleep on. Before, every commit woke every waiting claim, and with many slots on one
//!   workflow type each admission set off as many scans of the schedule as there were idle
//!   slots, all racing for the one turn.
//! - **due later** (a sleep, a backoff, a lease deadline): nobody is rung when some member
//!   already plans to look by then, or is rung and will look again; a member still scanning is
//!   told the time, so it cannot sleep past it; otherwise the first sleeping member is rung to
//!   plan again.
//!
//! A member rung while it was scanning looks again at once (a [`Notify`] permit), and a member
//! that leaves (it took a turn, or its claim ended) rings the next one: the turn it took may
//! not be the one it was rung for, so another member looks at what is left.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::protocol::{Millis, WorkflowRef};

/// The waiting claims of one engine, by group.
#[derive(Default)]
pub(super) struct Wakeups {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    groups: Vec<Group>,
    next_id: u64,
}

/// The claims waiting for the same workflows in one namespace.
struct Group {
    ns: Arc<str>,
    /// Sorted and without repeats.
    workflows: Vec<WorkflowRef>,
    /// Their [`workflow_key`](super::workflow_key)s.
    keys: Vec<u64>,
    /// Oldest first: the first eligible member is the one rung.
    members: Vec<Member>,
}

struct Member {
    id: u64,
    bell: Arc<Notify>,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Looking at the schedule; `missed` is the earliest due time committed since it began,
    /// which it may not have seen.
    Scanning { missed: Option<Millis> },
    /// Asleep until `until` (or until rung when `None`).
    Sleeping { until: Option<Millis> },
    /// Rung and not yet awake: it will look at the schedule again.
    Rung,
}

impl Group {
    fn lists(&self, workflow: u64) -> bool {
        self.keys.contains(&workflow)
    }

    /// Ring the first member not already rung, if any.
    fn ring_one(&mut self) {
        if let Some(m) = self.members.iter_mut().find(|m| m.state != State::Rung) {
            m.state = State::Rung;
            m.bell.notify_one();
        }
    }

    /// Something of this group is due at `at`, later than now.
    fn due_later(&mut self, at: Millis) {
        let covered = self.members.iter().any(|m| match m.state {
            State::Rung => true,
            State::Sleeping { until } => until.is_some_and(|u| u <= at),
            State::Scanning { .. } => false,
        });
        if covered {
            return;
        }
        if let Some(m) = self
            .members
            .iter_mut()
            .find(|m| matches!(m.state, State::Scanning { .. }))
        {
            if let State::Scanning { missed } = &mut m.state {
                *missed = Some(missed.map_or(at, |t| t.min(at)));
            }
            return;
        }
        self.ring_one();
    }
}

impl Wakeups {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A commit left an instance in `ns` of the workflow with key `workflow` (its
    /// [`workflow_key`](super::workflow_key)) due at `at` (the clock reads `now`): ring whom
    /// that concerns. Two workflows with one key only ring a claim that then finds nothing.
    pub(super) fn due(&self, ns: &str, workflow: u64, at: Millis, now: Millis) {
        let mut inner = self.lock();
        for g in inner
            .groups
            .iter_mut()
            .filter(|g| &*g.ns == ns && g.lists(workflow))
        {
            if at <= now {
                g.ring_one();
            } else {
                g.due_later(at);
            }
        }
    }

    /// Anything may have changed (a shared store lost change notices): ring every waiting
    /// claim, so that each looks at the schedule again.
    pub(super) fn ring_all(&self) {
        let mut inner = self.lock();
        for m in inner.groups.iter_mut().flat_map(|g| g.members.iter_mut()) {
            m.state = State::Rung;
            m.bell.notify_one();
        }
    }

    /// How many claims are asleep in their long poll now (every group): waiting to be rung
    /// or for the time they planned to look again. Members scanning, or rung and not yet
    /// looking again, are not counted.
    pub(super) fn sleeping(&self) -> usize {
        self.lock()
            .groups
            .iter()
            .flat_map(|g| g.members.iter())
            .filter(|m| matches!(m.state, State::Sleeping { .. }))
            .count()
    }

    /// Join the group of claims waiting for `workflows` in `ns`, scanning.
    pub(super) fn join(&self, ns: &Arc<str>, workflows: &[WorkflowRef]) -> Ticket<'_> {
        let mut key = workflows.to_vec();
        key.sort();
        key.dedup();
        let bell = Arc::new(Notify::new());
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        let member = Member {
            id,
            bell: bell.clone(),
            state: State::Scanning { missed: None },
        };
        match inner
            .groups
            .iter_mut()
            .find(|g| g.ns == *ns && g.workflows == key)
        {
            Some(g) => g.members.push(member),
            None => inner.groups.push(Group {
                ns: ns.clone(),
                keys: key
                    .iter()
                    .map(|w| super::workflow_key(&w.workflow_type, &w.version))
                    .collect(),
                workflows: key.clone(),
                members: vec![member],
            }),
        }
        Ticket {
            wakeups: self,
            ns: ns.clone(),
            workflows: key,
            id,
            bell,
        }
    }
}

/// One waiting claim's membership; dropping it leaves the group.
pub(super) struct Ticket<'a> {
    wakeups: &'a Wakeups,
    ns: Arc<str>,
    workflows: Vec<WorkflowRef>,
    id: u64,
    bell: Arc<Notify>,
}

impl Ticket<'_> {
    /// The bell to arm before each scan.
    pub(super) fn bell(&self) -> &Notify {
        &self.bell
    }

    fn with_member<T>(&self, f: impl FnOnce(&mut Member) -> T) -> Option<T> {
        let mut inner = self.wakeups.lock();
        let g = inner
            .groups
            .iter_mut()
            .find(|g| g.ns == self.ns && g.workflows == self.workflows)?;
        g.members.iter_mut().find(|m| m.id == self.id).map(f)
    }

    /// The scan found nothing and the schedule's earliest due time is `next_due`: go to
    /// sleep, and answer when to wake (earlier when a due time was committed during the scan).
    /// `None` means at no time, only when rung.
    pub(super) fn sleep(&self, next_due: Option<Millis>) -> Option<Millis> {
        self.with_member(|m| match m.state {
            State::Scanning { missed } => {
                let until = match (next_due, missed) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                m.state = State::Sleeping { until };
                until
            }
            // Rung during the scan: the armed bell fires at once.
            _ => next_due,
        })
        .flatten()
    }

    /// Awake again (rung, or a timer fired): scanning.
    pub(super) fn scanning(&self) {
        self.with_member(|m| m.state = State::Scanning { missed: None });
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut inner = self.wakeups.lock();
        let Some(gi) = inner
            .groups
            .iter()
            .position(|g| g.ns == self.ns && g.workflows == self.workflows)
        else {
            return;
        };
        let g = &mut inner.groups[gi];
        let Some(mi) = g.members.iter().position(|m| m.id == self.id) else {
            return;
        };
        g.members.remove(mi);
        // Whatever this member was counted on for (a ring, a due time it was told, a time it
        // planned to look at) it may not have acted on: it may have taken another turn than
        // the one it was rung for. Another member looks instead, and plans again.
        g.ring_one();
        if g.members.is_empty() {
            inner.groups.swap_remove(gi);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> Vec<WorkflowRef> {
        vec![WorkflowRef::new("job", "v1")]
    }

    fn job() -> u64 {
        super::super::workflow_key("job", "v1")
    }

    /// Whether `ticket`'s bell holds a ring (a stored permit).
    fn rung(ticket: &Ticket<'_>) -> bool {
        use std::future::Future;
        let n = ticket.bell().notified();
        let mut n = std::pin::pin!(n);
        let waker = std::task::Waker::noop();
        n.as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
            .is_ready()
    }

    #[test]
    fn due_now_rings_one_member_of_each_group_listing_the_workflow() {
        let w = Wakeups::default();
        let ns: Arc<str> = Arc::from("default");
        let (a, b) = (w.join(&ns, &refs()), w.join(&ns, &refs()));
        let other = w.join(&ns, &[WorkflowRef::new("mail", "v1")]);
        let elsewhere = w.join(&Arc::from("other"), &refs());
        for t in [&a, &b, &other, &elsewhere] {
            assert_eq!(t.sleep(None), None);
        }
        w.due("default", job(), 10, 10);
        assert!(rung(&a), "the oldest member is rung");
        assert!(!rung(&b) && !rung(&other) && !rung(&elsewhere));
        // A second event goes to the next member, not again to the one already rung.
        w.due("default", job(), 10, 10);
        assert!(rung(&b));
    }

    #[test]
    fn due_later_rings_only_when_nobody_looks_by_then() {
        let w = Wakeups::default();
        let ns: Arc<str> = Arc::from("default");
        let a = w.join(&ns, &refs());
        assert_eq!(a.sleep(Some(500)), Some(500));
        w.due("default", job(), 800, 100);
        assert!(!rung(&a), "a member wakes at 500 anyway, before 800");
        w.due("default", job(), 300, 100);
        assert!(rung(&a), "nobody looks by 300");
    }

    #[test]
    fn a_due_time_committed_during_a_scan_bounds_the_sleep() {
        let w = Wakeups::default();
        let ns: Arc<str> = Arc::from("default");
        let a = w.join(&ns, &refs());
        // Scanning: the scan may have missed this commit.
        w.due("default", job(), 300, 100);
        assert!(!rung(&a));
        assert_eq!(a.sleep(Some(900)), Some(300));
        a.scanning();
        assert_eq!(
            a.sleep(None),
            None,
            "what it was told is forgotten after a new scan"
        );
    }

    #[test]
    fn only_sleeping_members_count_as_waiting() {
        let w = Wakeups::default();
        let ns: Arc<str> = Arc::from("default");
        let a = w.join(&ns, &refs());
        let b = w.join(&Arc::from("other"), &refs());
        assert_eq!(w.sleeping(), 0, "members scanning are not asleep");
        a.sleep(None);
        b.sleep(Some(500));
        assert_eq!(w.sleeping(), 2, "asleep until rung, or until a time");
        w.due("default", job(), 10, 10);
        assert_eq!(w.sleeping(), 1, "a member rung is no longer asleep");
        a.scanning();
        assert_eq!(w.sleeping(), 1);
        drop(b);
        assert_eq!(w.sleeping(), 0, "a member that left is not counted");
    }

    #[test]
    fn a_member_leaving_rings_the_next_one() {
        let w = Wakeups::default();
        let ns: Arc<str> = Arc::from("default");
        let a = w.join(&ns, &refs());
        let b = w.join(&ns, &refs());
        a.sleep(None);
        b.sleep(None);
        w.due("default", job(), 10, 10);
        drop(a);
        assert!(rung(&b));
        drop(b);
        assert!(w.lock().groups.is_empty(), "an empty group is removed");
    }
}
