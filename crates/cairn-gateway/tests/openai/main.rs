//! The OpenAI-compatible API over raw HTTP: completions whole and streamed
//! (with `include_usage`), model names, client tools, sampling forwarded,
//! the agent's tools declined without asking and `/v1/models`
//! (`completions.rs`); refused fields, the error shape of every layer,
//! request ids and CORS (`http.rs`); `/v1/responses` (`responses.rs`).
//! The real clients (SDKs, LangChain, a generated client) are in `openai_clients.rs`.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

#[path = "../support/mod.rs"]
mod support;

mod completions;
mod http;
mod responses;

/// The `data:` payloads of an SSE body, in order.
fn data_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.trim().to_string())
        .collect()
}
