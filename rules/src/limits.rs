//! The protocol's size and count limits (its defaults: an engine may be configured with
//! others, and tells workers its step limit in each claim).
//!
//! Sizes are bytes of the value as compact UTF-8 JSON.

const KIB: usize = 1024;

/// Durable calls (steps, sleeps and signal waits) per turn: positions `0..64`.
pub const STEPS_PER_TURN: usize = 64;
/// Signals delivered to one turn.
pub const SIGNALS_PER_TURN: usize = 64;
/// Unfinished turns per instance (continuations are not counted against it).
pub const PENDING_MESSAGES: usize = 128;

/// Instance state, at creation and at completion.
pub const STATE_BYTES: usize = 64 * KIB;
/// One step output.
pub const OUTPUT_BYTES: usize = 64 * KIB;
/// One reply.
pub const RESULT_BYTES: usize = 64 * KIB;
/// One message, and a continuation's message.
pub const MESSAGE_BYTES: usize = 32 * KIB;
/// One stored turn with its steps, signals and reply.
pub const TURN_BYTES: usize = 256 * KIB;
/// One signal value.
pub const SIGNAL_BYTES: usize = 32 * KIB;
/// Progress details.
pub const DETAILS_BYTES: usize = 8 * KIB;
/// A resume cursor (progress `checkpoint`).
pub const CHECKPOINT_BYTES: usize = 32 * KIB;
/// A message origin.
pub const ORIGIN_BYTES: usize = KIB;

/// How many arrays and objects a user value may nest inside one another.
pub const NESTING: usize = 64;

/// `max_attempts` of an instance: at least 1, at most 100.
pub const MAX_ATTEMPTS_MIN: u32 = 1;
/// The largest `max_attempts`.
pub const MAX_ATTEMPTS_MAX: u32 = 100;
/// `max_attempts` when a create request leaves it out.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The largest page of a list, inbox or history read.
pub const PAGE_MAX: u32 = 100;
/// The page size when a read leaves `limit` out.
pub const PAGE_DEFAULT: u32 = 50;

/// A failure's `error` text is cut to this many characters (never refused).
pub const ERROR_CHARS: usize = 1000;

/// Instance events (upgrades, resumes, restarts, forks) kept on an instance; older ones are
/// dropped first.
pub const INSTANCE_EVENTS: usize = 32;
