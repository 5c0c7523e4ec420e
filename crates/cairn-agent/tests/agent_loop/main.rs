//! The agent loop against the fake LLM server over real HTTP.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod fixtures;
mod reuse;
mod scenarios;
mod tool_calls;
mod user_hooks;
