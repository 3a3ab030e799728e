//! Time, as the engine sees it: the system clock, or a manual clock tests move by hand.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::protocol::Millis;

/// A boxed future that completes when a clock reaches a time.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time for the engine. Every due time (sleeps, leases, backoff, signal deadlines,
/// operation deadlines) is measured with it.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> Millis;
    /// A future that completes once `now_ms() >= at`.
    fn sleep_until(&self, at: Millis) -> Sleep;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as Millis)
    }

    fn sleep_until(&self, at: Millis) -> Sleep {
        let wait = at.saturating_sub(self.now_ms()).max(0) as u64;
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
}

/// A clock that only moves when told to, so tests skip through leases, backoff and sleeps
/// instantly. Cloning shares the same time.
///
/// ```
/// use std::time::Duration;
/// use turnwise::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(Duration::from_secs(60));
/// assert_eq!(clock.now_ms(), 61_000);
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<watch::Sender<Millis>>,
}

impl ManualClock {
    /// A clock standing at `start_ms`.
    pub fn new(start_ms: Millis) -> Self {
        Self {
            now: Arc::new(watch::Sender::new(start_ms)),
        }
    }

    /// Move the clock forward, waking everything waiting for a time now reached.
    pub fn advance(&self, by: Duration) {
        self.now
            .send_modify(|t| *t = t.saturating_add(by.as_millis() as Millis));
    }

    /// Set the clock to a time (it may not go backwards; an earlier time is ignored).
    pub fn set(&self, at_ms: Millis) {
        self.now.send_modify(|t| *t = (*t).max(at_ms));
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        // 2026-01-01T00:00:00Z: a realistic epoch keeps run ids at 13 digits.
        Self::new(1_767_225_600_000)
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        *self.now.borrow()
    }

    fn sleep_until(&self, at: Millis) -> Sleep {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // wait_for returns at once if the condition already holds; an error means the
            // clock was dropped, after which nothing can ever become due.
            if rx.wait_for(|now| *now >= at).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}
