//! What every tool of this crate shares besides `cairn_agent::tools`'
//! helpers: instants as tools show them, store failures as tool errors. Its
//! own module so that `routines` and `primitives` both use it without one
//! depending on the other (the direction is `primitives` -> `routines`).

use cairn_agent::tools::ToolError;

/// A store failure as a tool error, with its causes.
pub(crate) fn store_error(e: cairn_store::StoreError) -> ToolError {
    ToolError::Failed(cairn_core::text::error_chain(&e))
}

/// An instant as tools show it: RFC 3339 in UTC, to the second.
pub(crate) fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
