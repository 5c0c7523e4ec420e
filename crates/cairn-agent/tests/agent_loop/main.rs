//! The agent loop against the fake LLM server over real HTTP.
#![allow(clippy::unwrap_used)]

mod fixtures;
mod reuse;
mod scenarios;
mod tool_calls;
