//! The job scheduler end to end: real agent loops over a provider, tools gated
//! by the test, persistence in SQLite (or in memory on tokio's paused clock,
//! where SQLite's driver timers would fire early).
#![allow(clippy::unwrap_used)]

mod fixtures;
mod lifecycle;
mod running;
