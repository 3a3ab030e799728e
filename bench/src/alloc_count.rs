//! A global allocator that counts, around the allocator the build uses.
//!
//! Counting is off until [`start`]: the throughput phases run with it off (one relaxed
//! load per allocation), and the allocation phase turns it on for a measured stretch of turns.
//! Every thread of the process is counted (clients, worker, engine, store, HTTP server), which
//! is the cost a turn has for the application as a whole.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Allocations and bytes requested while counting was on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allocations {
    /// Calls to `alloc`, `alloc_zeroed` and `realloc`.
    pub count: u64,
    /// Bytes they asked for (a `realloc` counts its new size).
    pub bytes: u64,
}

static ON: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// Wraps allocator `A`, counting between [`start`] and [`stop`].
pub struct Counting<A>(pub A);

/// Zero the counters and count from now.
pub fn start() {
    COUNT.store(0, Relaxed);
    BYTES.store(0, Relaxed);
    ON.store(true, Relaxed);
}

/// Stop counting and answer what was counted since [`start`].
pub fn stop() -> Allocations {
    ON.store(false, Relaxed);
    Allocations {
        count: COUNT.load(Relaxed),
        bytes: BYTES.load(Relaxed),
    }
}

#[inline]
fn note(size: usize) {
    if ON.load(Relaxed) {
        COUNT.fetch_add(1, Relaxed);
        BYTES.fetch_add(size as u64, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the wrapped allocator; the counters are atomics
// that never allocate.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is the wrapped one.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for `dealloc`; the caller guarantees `new_size` is valid for `layout`.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}
