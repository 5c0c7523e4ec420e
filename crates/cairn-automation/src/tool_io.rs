//! What every tool of this crate shares: its JSON output, instants as
//! tools show them, store failures as tool errors, string arguments. Its
//! own module so that `routines` and `primitives` both use it without one
//! depending on the other (the direction is `primitives` -> `routines`).

use cairn_agent::tools::{ToolError, ToolOutput};
use serde_json::Value;

/// A store failure as a tool error, with its causes.
pub(crate) fn store_error(e: cairn_store::StoreError) -> ToolError {
    ToolError::Failed(cairn_core::text::error_chain(&e))
}

/// An instant as tools show it: RFC 3339 in UTC, to the second.
pub(crate) fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(crate) fn json_output(value: &Value) -> Result<ToolOutput, ToolError> {
    serde_json::to_string_pretty(value)
        .map(ToolOutput::ok)
        .map_err(|e| ToolError::Failed(e.to_string()))
}

pub(crate) fn string_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(ToolError::InvalidArguments(format!(
            "missing required string `{key}`"
        ))),
    }
}
