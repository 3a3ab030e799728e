//! W3C trace context: one trace id from a message's `send` to the steps that handled it.
//!
//! A [`TraceContext`] is the `traceparent` header of the W3C Trace Context recommendation
//! (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`). turnwise carries it without any
//! tracing backend of its own:
//!
//! * the `Http` backend sends `traceparent` on every request: the [current](TraceContext::current) context's
//!   trace with a new parent id, or a new trace per call when there is none;
//! * the server continues the request's trace (its request span records `trace_id`) and runs
//!   the handler in that context, so a message admitted there keeps it with its turn;
//! * the engine stores the context current when a message is admitted with the turn, and a
//!   continuation inherits it; the turn shows it as `traceparent` (a turnwise extension field
//!   that other clients ignore);
//! * a worker runs the turn in that context: its `turn` and `step` spans record `trace_id`, and
//!   the calls its steps make (a `Handle::send` to another workflow, say) continue the trace.
//!
//! An application starts or continues a trace with [`TraceContext::scope`]:
//!
//! ```
//! use turnwise::trace::TraceContext;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
//! let ctx = TraceContext::parse(incoming).expect("a valid traceparent");
//! ctx.scope(async {
//!     let current = TraceContext::current().expect("inside the scope");
//!     assert_eq!(current.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
//! })
//! .await;
//! assert!(TraceContext::current().is_none());
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

tokio::task_local! {
    static CURRENT: TraceContext;
}

/// A position in a distributed trace: the trace id, the id of the span that is the parent of
/// what runs in it, and whether the trace is sampled.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: u128,
    span_id: u64,
    sampled: bool,
}

impl TraceContext {
    /// A new trace (random ids), sampled.
    pub fn new_root() -> Self {
        let trace_id = (u128::from(random()) << 64) | u128::from(random());
        Self {
            // All zeros is invalid; the chance is nil, but make it impossible.
            trace_id: trace_id.max(1),
            span_id: random().max(1),
            sampled: true,
        }
    }

    /// Read a `traceparent` header value; `None` when it is not one (the caller then starts a
    /// new trace, as the recommendation says). A version above `00` is read by its first four
    /// fields.
    pub fn parse(traceparent: &str) -> Option<Self> {
        let value = traceparent.trim();
        let mut parts = value.split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let parent = parts.next()?;
        let flags = parts.next()?;
        let rest = parts.next();
        let hex = |s: &str, len: usize| {
            s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(parent, 16) {
            return None;
        }
        if !hex(flags, 2) || (version == "00" && rest.is_some()) {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok()?;
        let span_id = u64::from_str_radix(parent, 16).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace_id == 0 || span_id == 0 {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The same trace under a new parent id: what a service sends on, or runs in, when it
    /// continues a trace.
    pub fn child(&self) -> Self {
        Self {
            span_id: random().max(1),
            ..*self
        }
    }

    /// The trace id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The parent id: 16 lowercase hex digits.
    pub fn span_id(&self) -> String {
        format!("{:016x}", self.span_id)
    }

    /// Whether the trace is sampled (the `01` flag).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// The `traceparent` header value, version `00`.
    pub fn traceparent(&self) -> String {
        self.to_string()
    }

    /// The context `f` runs in ([`TraceContext::current`] inside it), when one was set.
    pub fn current() -> Option<Self> {
        CURRENT.try_with(|c| *c).ok()
    }

    /// Run `f` in this context: [`TraceContext::current`] returns it inside `f` (across its
    /// awaits, not in tasks it spawns), and the turnwise calls made there carry its trace.
    pub async fn scope<F: Future>(self, f: F) -> F::Output {
        CURRENT.scope(self, f).await
    }

    /// The context to send on: the current one's trace under a new parent id, or a new trace.
    pub fn outgoing() -> Self {
        Self::current().map_or_else(Self::new_root, |c| c.child())
    }
}

impl fmt::Display for TraceContext {
    /// The `traceparent` header value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceContext({self})")
    }
}

/// 64 bits unlikely to repeat within or across processes (not for secrets).
fn random() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_written() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = TraceContext::parse(value).unwrap();
        assert_eq!(ctx.traceparent(), value);
        assert!(ctx.sampled());
        let child = ctx.child();
        assert_eq!(child.trace_id(), ctx.trace_id());
        assert_ne!(child.span_id(), ctx.span_id());
        let root = TraceContext::new_root();
        assert_eq!(TraceContext::parse(&root.traceparent()), Some(root));
        assert_ne!(TraceContext::new_root().trace_id(), root.trace_id());
    }

    #[test]
    fn what_is_not_a_traceparent_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
        // A later version with more fields is read by its first four.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        let ctx = TraceContext::parse(later).unwrap();
        assert!(!ctx.sampled());
    }
}
