//! `agent_delegate` end to end: a parent loop and its sub-agents over the
//! fake LLM server (real HTTP, real time), their records in SQLite.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod fixtures;
mod limits;
mod running;
