//! Llama 3.x's two ways of writing a call, and the `<function=…>` block
//! Qwen3-Coder puts inside `<tool_call>` tags:
//!
//! - `<function=NAME>{"arg": …}</function>` (Llama 3.1's custom tool format),
//!   or with `<parameter=KEY>VALUE</parameter>` elements in place of the JSON
//!   (Qwen3-Coder);
//! - `<|python_tag|>{"name": …, "parameters": …}`, several separated by `;`,
//!   ending at `<|eom_id|>` / `<|eot_id|>` or with the text. Llama's built-in
//!   `brave_search.call(…)` form is Python, not JSON, and stays text.

use cairn_core::chat::ToolCall;
use serde_json::{Map, Value};

use super::json::{Acceptance, arguments_object, calls_from_value, leading_value};
use super::scan::{
    Offered, after_prefix, call, is_tool_name, replace_delimited, replace_introduced,
};

/// The `<function=NAME>` block's markers.
pub(super) const FUNCTION: (&str, &str) = ("<function=", "</function>");
/// Llama's marker before JSON calls.
pub(super) const PYTHON_TAG: &str = "<|python_tag|>";
/// The end-of-message markers that may follow the calls.
const ENDS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];

/// Replaces `<function=…>` blocks and `<|python_tag|>` calls with nothing.
pub(super) fn extract(text: &str, offered: &Offered<'_>, calls: &mut Vec<ToolCall>) -> String {
    let text = replace_delimited(text, FUNCTION, true, calls, |body| {
        function_body(body, offered).map(|c| vec![c])
    });
    replace_introduced(&text, PYTHON_TAG, calls, python_calls)
}

/// A whole `<function=NAME>…</function>` block (the closing marker optional).
pub(super) fn function_block(block: &str, offered: &Offered<'_>) -> Option<ToolCall> {
    let body = block.trim().strip_prefix(FUNCTION.0)?;
    let body = body.strip_suffix(FUNCTION.1).unwrap_or(body);
    function_body(body, offered)
}

/// `NAME>` then a JSON object, `<parameter=…>` elements, or nothing.
fn function_body(body: &str, offered: &Offered<'_>) -> Option<ToolCall> {
    let (name, rest) = body.split_once('>')?;
    let name = name.trim();
    if !is_tool_name(name) {
        return None;
    }
    let rest = rest.trim();
    let arguments = if rest.starts_with(PARAMETER.0) {
        Value::Object(parameters(rest, name, offered)?)
    } else {
        arguments_object(rest)?
    };
    Some(call(name, arguments))
}

const PARAMETER: (&str, &str) = ("<parameter=", "</parameter>");

/// `<parameter=KEY>VALUE</parameter>…`, whitespace between.
fn parameters(mut rest: &str, tool: &str, offered: &Offered<'_>) -> Option<Map<String, Value>> {
    let mut args = Map::new();
    while !rest.trim().is_empty() {
        let inner = after_prefix(rest, PARAMETER.0)?;
        let (key, inner) = inner.split_once('>')?;
        let end = inner.find(PARAMETER.1)?;
        let key = key.trim();
        if key.is_empty() {
            return None;
        }
        args.insert(
            key.to_owned(),
            offered.typed_value(tool, key, &inner[..end]),
        );
        rest = &inner[end + PARAMETER.1.len()..];
    }
    Some(args)
}

/// JSON calls after the python tag, `;` between them, and an end marker.
fn python_calls(body: &str) -> Option<(Vec<ToolCall>, usize)> {
    let mut calls = Vec::new();
    let mut used = 0;
    loop {
        let rest = &body[used..];
        let rest = match (calls.is_empty(), rest.trim_start().strip_prefix(';')) {
            (false, Some(after)) => after,
            (false, None) => break,
            (true, _) => rest,
        };
        let skipped = body.len() - used - rest.len();
        let Some((value, len)) = leading_value(rest) else {
            break;
        };
        let Some(found) = value
            .is_object()
            .then(|| calls_from_value(&value, Acceptance::Any))
            .flatten()
        else {
            break;
        };
        calls.extend(found);
        used += skipped + len;
    }
    if calls.is_empty() {
        return None;
    }
    let rest = &body[used..];
    let trimmed = rest.trim_start();
    if let Some(end) = ENDS.iter().find(|end| trimmed.starts_with(**end)) {
        used += rest.len() - trimmed.len() + end.len();
    }
    Some((calls, used))
}

#[cfg(test)]
mod tests {
    use super::super::table::{expect, hostile, stays_text};

    #[test]
    fn function_blocks() {
        expect(
            "I'll run it.\n<function=shell>{\"command\": \"df -h\"}</function>",
            &[("shell", r#"{"command": "df -h"}"#)],
            "I'll run it.",
        );
        expect(
            "<function=set_timer>{\"minutes\": 5}</function>\n<function=time_now>{}</function>\
             \n<function=read_file><parameter=path>\na.md\n</parameter></function> and then",
            &[
                ("set_timer", r#"{"minutes": 5}"#),
                ("time_now", "{}"),
                ("read_file", r#"{"path": "a.md"}"#),
            ],
            "and then",
        );
        expect(
            "<function=set_timer>\n<parameter=minutes>\n15\n</parameter>\n<parameter=label>\ntea\n</parameter>\n</function>",
            &[("set_timer", r#"{"minutes": 15, "label": "tea"}"#)],
            "",
        );
    }

    #[test]
    fn python_tag_json() {
        expect(
            "<|python_tag|>{\"name\": \"shell\", \"parameters\": {\"command\": \"ls\"}}<|eom_id|>",
            &[("shell", r#"{"command": "ls"}"#)],
            "",
        );
        expect(
            "Two things.<|python_tag|>{\"name\": \"time_now\", \"parameters\": {}}; \
             {\"name\": \"read_file\", \"parameters\": {\"path\": \"x\"}} then text",
            &[("time_now", "{}"), ("read_file", r#"{"path": "x"}"#)],
            "Two things. then text",
        );
        expect(
            "<|python_tag|>{\"name\": \"time_now\", \"parameters\": {}}<|python_tag|>{\"name\": \"shell\", \"parameters\": {\"command\": \"id\"}}",
            &[("time_now", "{}"), ("shell", r#"{"command": "id"}"#)],
            "",
        );
    }

    #[test]
    fn malformed_llama_calls_stay_text() {
        for text in [
            "<function=shell>{\"command\": </function>",
            "<function=two words>{}</function>",
            "<function=shell>[1]</function>",
            "<function=shell><parameter=command>ls</function>",
            "<function=shell",
            "<|python_tag|>brave_search.call(query=\"weather\")",
            "<|python_tag|>[1, 2]",
            "<|python_tag|>{\"parameters\": {}}",
            "<|python_tag|>",
        ] {
            stays_text(text);
        }
    }

    #[test]
    fn hostile_llama_markup() {
        hostile(
            &[
                "<function=",
                "</function>",
                "<parameter=",
                "<|python_tag|>",
                ";",
            ],
            "<function=shell><parameter=command>ls</parameter></function><|python_tag|>{\"name\": \"time_now\", \"parameters\": {}}",
        );
    }
}
