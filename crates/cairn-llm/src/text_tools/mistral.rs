//! Mistral's `[TOOL_CALLS]` marker, in both of its generations:
//!
//! - `[TOOL_CALLS] [{"name": …, "arguments": …, "id": …}, …]` (tokenizers
//!   up to v3: Mistral 7B v0.3, Nemo, Mixtral);
//! - `[TOOL_CALLS]NAME[ARGS]{…}`, one marker per call, optionally with
//!   `[CALL_ID]ID` before `[ARGS]`, or without `[ARGS]` when the server
//!   dropped special tokens (v11 and later: Mistral Small 3.x, Devstral,
//!   Magistral).
//!
//! Text after the calls stays text.

use cairn_core::chat::ToolCall;

use super::json::{Acceptance, calls_from_value, leading_value};
use super::scan::{call, is_name_char, is_tool_name, replace_introduced};

/// The marker before the calls.
pub(super) const TOOL_CALLS: &str = "[TOOL_CALLS]";
const CALL_ID: &str = "[CALL_ID]";
const ARGS: &str = "[ARGS]";

/// Replaces each marker and the calls after it with nothing.
pub(super) fn extract(text: &str, calls: &mut Vec<ToolCall>) -> String {
    replace_introduced(text, TOOL_CALLS, calls, after_marker)
}

fn after_marker(body: &str) -> Option<(Vec<ToolCall>, usize)> {
    let rest = body.trim_start();
    let lead = body.len() - rest.len();
    if rest.starts_with(['[', '{']) {
        let (value, len) = leading_value(rest)?;
        return Some((calls_from_value(&value, Acceptance::Any)?, lead + len));
    }
    let name_end = rest.find(|c| !is_name_char(c)).unwrap_or(rest.len());
    let name = &rest[..name_end];
    if !is_tool_name(name) {
        return None;
    }
    let mut at = name_end;
    let mut id = None;
    if let Some(after) = rest[at..].strip_prefix(CALL_ID) {
        let len = after.find(['[', '{']).unwrap_or(after.len());
        id = Some(after[..len].trim()).filter(|id| !id.is_empty());
        at += CALL_ID.len() + len;
    }
    if rest[at..].starts_with(ARGS) {
        at += ARGS.len();
    }
    let (arguments, len) = leading_value(&rest[at..])?;
    if !arguments.is_object() {
        return None;
    }
    let mut found = call(name, arguments);
    if let Some(id) = id {
        found.id = id.to_owned();
    }
    Some((vec![found], lead + at + len))
}

#[cfg(test)]
mod tests {
    use super::super::table::{expect, hostile, stays_text};
    use super::super::{extract_tool_calls, table::tools};

    #[test]
    fn json_array_after_the_marker() {
        expect(
            "[TOOL_CALLS] [{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}]",
            &[("shell", r#"{"command": "ls"}"#)],
            "",
        );
        expect(
            "Hello[TOOL_CALLS] [{\"arguments\": {\"minutes\": 3}, \"name\": \"set_timer\", \"id\": \"abcDEF123\"}, \
             {\"name\": \"time_now\", \"arguments\": {}}]\nextra trailing text",
            &[("set_timer", r#"{"minutes": 3}"#), ("time_now", "{}")],
            "Hello\nextra trailing text",
        );
        let found = extract_tool_calls(
            "[TOOL_CALLS][{\"name\": \"time_now\", \"arguments\": {}, \"id\": \"abcDEF123\"}]",
            &tools(),
        );
        assert_eq!(found.calls[0].id, "abcDEF123");
    }

    #[test]
    fn name_then_arguments_per_marker() {
        expect(
            "[TOOL_CALLS]shell[ARGS]{\"command\": \"uptime\"}",
            &[("shell", r#"{"command": "uptime"}"#)],
            "",
        );
        expect(
            "Let me do both.[TOOL_CALLS]set_timer[ARGS]{\"minutes\": 5}[TOOL_CALLS]read_file{\"path\": \"a\"} ok?",
            &[
                ("set_timer", r#"{"minutes": 5}"#),
                ("read_file", r#"{"path": "a"}"#),
            ],
            "Let me do both. ok?",
        );
        let found = extract_tool_calls("[TOOL_CALLS]time_now[CALL_ID]k3Xr9aBc0[ARGS]{}", &tools());
        assert_eq!(found.calls[0].id, "k3Xr9aBc0");
        assert_eq!(found.text, "");
    }

    #[test]
    fn malformed_mistral_calls_stay_text() {
        for text in [
            "[TOOL_CALLS] not json at all",
            "[TOOL_CALLS] [1, 2]",
            "[TOOL_CALLS] [{\"arguments\": {}}]",
            "[TOOL_CALLS]shell[ARGS]\"ls\"",
            "[TOOL_CALLS]shell[ARGS]{\"command\": ",
            "[TOOL_CALLS]two words{}",
            "[TOOL_CALLS]",
            "[TOOL_CALLS]shell[CALL_ID]",
        ] {
            stays_text(text);
        }
    }

    #[test]
    fn hostile_mistral_markup() {
        hostile(
            &["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "shell"],
            "[TOOL_CALLS]shell[CALL_ID]abc123def[ARGS]{\"command\": \"ls\"}[TOOL_CALLS] [{\"name\": \"time_now\"}]",
        );
    }
}
