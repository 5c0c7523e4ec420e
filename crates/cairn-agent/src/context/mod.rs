//! Context monitor and compaction: keeping a conversation inside the model's window.
//!
//! - [`monitor`]: [`ContextMonitor`] estimates the tokens of a context by role
//!   ([`ContextBreakdown`]) against the model's limit, and [`suggest`] picks a
//!   [`CompactionStrategy`]: above 95% truncate to 3 turns, above 85% summarize
//!   keeping 5, above 80% move to the workspace keeping 10.
//! - [`estimate`]: the token heuristic (the larger of bytes / 4 and words × 1.3,
//!   plus 4 per message), cheap and deliberately on the high side.
//! - [`compactor`]: [`Compactor`] applies a strategy to a thread's turns. Whole
//!   turns move, so a tool call never loses its result. Whatever leaves the
//!   thread is first appended to `context/archive/YYYY-MM-DD.md`; a summary also
//!   goes to `daily/YYYY-MM-DD.md` and back into the thread as a summary turn.
//!
//! The chat layer calls [`Compactor::maybe_compact`] before each turn,
//! [`Compactor::compact_for_overflow`] when the provider reports a
//! context-length error (then retries), and [`Compactor::compact`] for `/compact`.
//!
//! Architecture invariant: compaction never loses turns silently. The archive
//! is written before the thread changes, and on any error the turns are left
//! as they were.

pub mod compactor;
pub mod estimate;
mod files;
pub mod monitor;
pub mod transcript;

pub use compactor::{CompactionError, CompactionResult, Compactor};
pub use estimate::{estimate_message, estimate_text};
pub use monitor::{
    CompactionStrategy, ContextBreakdown, ContextMonitor, DEFAULT_CONTEXT_LIMIT, estimate_turns,
    suggest,
};
