//! cairn-llm against the fake LLM server over real HTTP, both protocols.

mod common;

mod basic;
mod embeddings;
mod errors;
mod failover_cost;
mod images;
mod models;
mod offspec;
mod text_tools;
