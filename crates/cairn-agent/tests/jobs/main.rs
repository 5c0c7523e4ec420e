//! The job scheduler end to end: real agent loops over a provider, tools gated
//! by the test, persistence in SQLite. Tests without real HTTP run on tokio's
//! paused clock (a store call takes no virtual time, so only the scheduler's
//! own timers move it).
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod fixtures;
mod lifecycle;
mod repair;
mod running;
