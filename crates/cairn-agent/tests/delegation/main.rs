//! `agent_delegate` end to end: a parent loop and its sub-agents over the
//! fake LLM server (real HTTP, real time), their records in SQLite.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod fixtures;
mod limits;
mod running;
