//! The agent loop against the fake LLM server over real HTTP.
#![allow(clippy::unwrap_used)]
#![allow(clippy::disallowed_methods)] // test fixtures may use blocking std::fs

mod fixtures;
mod reuse;
mod scenarios;
mod tool_calls;
mod user_hooks;
