//! The XML block some models (trained on Claude transcripts, or prompted
//! that way) write:
//!
//! ```text
//! <function_calls>
//! <invoke name="NAME">
//! <parameter name="KEY">VALUE</parameter>
//! </invoke>
//! </function_calls>
//! ```
//!
//! Several `<invoke>` elements may share a block. A value is text where the
//! tool's schema says string, otherwise its JSON reading when it has one.
//! Anything else in the block makes the whole block text.

use cairn_core::chat::ToolCall;
use serde_json::{Map, Value};

use super::scan::{Offered, after_prefix, attribute, call, is_tool_name, replace_delimited};

/// The block's markers.
pub(super) const BLOCK: (&str, &str) = ("<function_calls>", "</function_calls>");
const INVOKE: (&str, &str) = ("<invoke", "</invoke>");
const PARAMETER: (&str, &str) = ("<parameter", "</parameter>");

/// Replaces each block of invocations with nothing.
pub(super) fn extract(text: &str, offered: &Offered<'_>, calls: &mut Vec<ToolCall>) -> String {
    replace_delimited(text, BLOCK, true, calls, |body| invocations(body, offered))
}

fn invocations(mut rest: &str, offered: &Offered<'_>) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    while !rest.trim().is_empty() {
        let (name, content, after) = element(rest, INVOKE)?;
        if !is_tool_name(name) {
            return None;
        }
        calls.push(call(
            name,
            Value::Object(parameters(content, name, offered)?),
        ));
        rest = after;
    }
    Some(calls)
}

fn parameters(mut rest: &str, tool: &str, offered: &Offered<'_>) -> Option<Map<String, Value>> {
    let mut args = Map::new();
    while !rest.trim().is_empty() {
        let (key, value, after) = element(rest, PARAMETER)?;
        if key.is_empty() {
            return None;
        }
        args.insert(key.to_owned(), offered.typed_value(tool, key, value));
        rest = after;
    }
    Some(args)
}

/// `<TAG name="N">CONTENT</TAG>` at the start of `text` (whitespace before
/// it skipped): the name, the content and the text after the element.
fn element<'t>(text: &'t str, (open, close): (&str, &str)) -> Option<(&'t str, &'t str, &'t str)> {
    let inner = after_prefix(text, open)?;
    let tag_end = inner.find('>')?;
    let attrs = &inner[..tag_end];
    // `<invokeX …>` is another element.
    if !attrs.is_empty() && !attrs.starts_with(char::is_whitespace) {
        return None;
    }
    let name = attribute(attrs, "name")?.trim();
    let content = &inner[tag_end + 1..];
    let end = content.find(close)?;
    Some((name, &content[..end], &content[end + close.len()..]))
}

#[cfg(test)]
mod tests {
    use super::super::table::{expect, hostile, stays_text};

    #[test]
    fn invoke_blocks() {
        expect(
            "Let me check.\n<function_calls>\n<invoke name=\"shell\">\n<parameter name=\"command\">uptime</parameter>\n</invoke>\n</function_calls>",
            &[("shell", r#"{"command": "uptime"}"#)],
            "Let me check.",
        );
        expect(
            "<function_calls><invoke name='set_timer'><parameter name=\"minutes\">25</parameter>\
             <parameter name=\"label\">25</parameter></invoke><invoke name=\"time_now\"></invoke>\
             </function_calls>\nAfter.<function_calls><invoke name=\"read_file\">\
             <parameter name=\"path\">\n/etc/hosts\n</parameter></invoke></function_calls>",
            &[
                ("set_timer", r#"{"minutes": 25, "label": "25"}"#),
                ("time_now", "{}"),
                ("read_file", r#"{"path": "/etc/hosts"}"#),
            ],
            "After.",
        );
        expect(
            "<function_calls><invoke name=\"mcp_tool\"><parameter name=\"filters\">{\"a\": [1]}</parameter>\
             <parameter name=\"q\">free text</parameter></invoke>",
            &[("mcp_tool", r#"{"filters": {"a": [1]}, "q": "free text"}"#)],
            "",
        );
    }

    #[test]
    fn malformed_invoke_blocks_stay_text() {
        for text in [
            "<function_calls></function_calls>",
            "<function_calls><invoke>x</invoke></function_calls>",
            "<function_calls><invoke name=\"shell\"><parameter name=\"command\">ls</invoke></function_calls>",
            "<function_calls><invoke name=\"shell\">stray text</invoke></function_calls>",
            "<function_calls><invoke name=\"two words\"></invoke></function_calls>",
            "<function_calls><invokes name=\"shell\"></invokes></function_calls>",
            "<function_calls><invoke name=\"shell\"><parameter name=\"\">x</parameter></invoke>",
            "<function_calls><invoke name=\"shell\">",
        ] {
            stays_text(text);
        }
    }

    #[test]
    fn hostile_invoke_markup() {
        hostile(
            &[
                "<function_calls>",
                "</function_calls>",
                "<invoke name=\"shell\">",
                "<parameter name=\"a\">",
                "</invoke>",
            ],
            "<function_calls><invoke name=\"shell\"><parameter name=\"command\">ls</parameter></invoke></function_calls>",
        );
    }
}
