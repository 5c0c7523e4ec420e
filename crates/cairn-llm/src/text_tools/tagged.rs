//! `<tool_call>…</tool_call>` tags, whatever they hold:
//!
//! - JSON, `{"name": …, "arguments": …}` or an array of them, bare or in a
//!   ```` ```json ```` fence (Hermes, Qwen 2.5);
//! - the name on its own, then a JSON object (GLM-4: `NAME\n{…}`);
//! - the name, then `<arg_key>K</arg_key><arg_value>V</arg_value>` pairs
//!   (GLM-4.5 and later);
//! - a `<function=NAME>` block (Qwen3-Coder; see [`super::llama`]).
//!
//! The tag is explicit, so any well-formed name counts, except a name alone
//! with no arguments, which must be an offered tool.

use cairn_core::chat::ToolCall;
use serde_json::{Map, Value};

use super::json::{Acceptance, arguments_object, parse_calls, strip_fence};
use super::llama;
use super::scan::{Offered, after_prefix, call, is_name_char, is_tool_name, replace_delimited};

/// The tag pair.
pub(super) const TAGS: (&str, &str) = ("<tool_call>", "</tool_call>");

/// Replaces every tag holding calls with nothing.
pub(super) fn extract(text: &str, offered: &Offered<'_>, calls: &mut Vec<ToolCall>) -> String {
    replace_delimited(text, TAGS, true, calls, |body| parse_body(body, offered))
}

fn parse_body(body: &str, offered: &Offered<'_>) -> Option<Vec<ToolCall>> {
    let inner = strip_fence(body);
    if inner.starts_with(['{', '[']) {
        return parse_calls(inner, Acceptance::Any);
    }
    if inner.starts_with(llama::FUNCTION.0) {
        return llama::function_block(inner, offered).map(|c| vec![c]);
    }
    glm(inner, offered).map(|c| vec![c])
}

/// `NAME`, then a JSON object, `<arg_key>` pairs, or nothing.
fn glm(inner: &str, offered: &Offered<'_>) -> Option<ToolCall> {
    let name_end = inner.find(|c| !is_name_char(c)).unwrap_or(inner.len());
    let name = &inner[..name_end];
    if !is_tool_name(name) {
        return None;
    }
    let rest = inner[name_end..].trim();
    let arguments = if rest.is_empty() {
        // A bare word is a call only when it names an offered tool.
        offered.knows(name).then(|| Value::Object(Map::new()))?
    } else if rest.starts_with(ARG_KEY.0) {
        Value::Object(arg_pairs(rest, name, offered)?)
    } else {
        arguments_object(rest)?
    };
    Some(call(name, arguments))
}

const ARG_KEY: (&str, &str) = ("<arg_key>", "</arg_key>");
const ARG_VALUE: (&str, &str) = ("<arg_value>", "</arg_value>");

/// `<arg_key>K</arg_key><arg_value>V</arg_value>…`, whitespace between;
/// anything else makes the whole call text.
fn arg_pairs(mut rest: &str, tool: &str, offered: &Offered<'_>) -> Option<Map<String, Value>> {
    let mut args = Map::new();
    while !rest.trim().is_empty() {
        let (key, after) = element(rest, ARG_KEY)?;
        let (value, after) = element(after, ARG_VALUE)?;
        let key = key.trim();
        if key.is_empty() {
            return None;
        }
        args.insert(key.to_owned(), offered.typed_value(tool, key, value));
        rest = after;
    }
    Some(args)
}

/// The content of the element `open…close` at the start of `text`
/// (whitespace before it skipped) and the text after it.
fn element<'t>(text: &'t str, (open, close): (&str, &str)) -> Option<(&'t str, &'t str)> {
    let inner = after_prefix(text, open)?;
    let end = inner.find(close)?;
    Some((&inner[..end], &inner[end + close.len()..]))
}

#[cfg(test)]
mod tests {
    use super::super::table::{expect, hostile, stays_text};

    #[test]
    fn json_in_tags() {
        let call = r#"{"name": "shell", "arguments": {"command": "ls"}}"#;
        expect(
            &format!("Let me look.\n<tool_call>\n{call}\n</tool_call>"),
            &[("shell", r#"{"command": "ls"}"#)],
            "Let me look.",
        );
        expect(
            "<tool_call>{\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":\\\"pwd\\\"}\"}</tool_call>\
             <tool_call>{\"name\":\"mystery\"}</tool_call>between<tool_call>[{\"name\":\"time_now\"}]</tool_call>\
             <tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}",
            &[
                ("shell", r#"{"command": "pwd"}"#),
                ("mystery", "{}"),
                ("time_now", "{}"),
                ("read_file", r#"{"path": "a"}"#),
            ],
            "between",
        );
        expect(
            "<tool_call>\n```json\n{\"name\":\"shell\",\"arguments\":\"ls -la\"}\n```\n</tool_call>",
            &[("shell", r#""ls -la""#)],
            "",
        );
    }

    #[test]
    fn glm_name_then_json_or_argument_pairs() {
        expect(
            "Checking.\n<tool_call>shell\n{\"command\": \"uptime\"}\n</tool_call>\nThen more.",
            &[("shell", r#"{"command": "uptime"}"#)],
            "Checking.\n\nThen more.",
        );
        expect(
            "<tool_call>set_timer\n<arg_key>minutes</arg_key>\n<arg_value>20</arg_value>\n\
             <arg_key>label</arg_key>\n<arg_value>20</arg_value>\n</tool_call>\
             <tool_call>read_file<arg_key>path</arg_key><arg_value>notes.md</arg_value></tool_call>\
             <tool_call>ls <arg_key>dirPath</arg_key> <arg_value>backend</arg_value> </tool_call>",
            &[
                ("set_timer", r#"{"minutes": 20, "label": "20"}"#),
                ("read_file", r#"{"path": "notes.md"}"#),
                ("ls", r#"{"dirPath": "backend"}"#),
            ],
            "",
        );
        expect(
            "<tool_call>time_now</tool_call> done",
            &[("time_now", "{}")],
            "done",
        );
    }

    #[test]
    fn qwen_coder_function_blocks_in_tags() {
        expect(
            "Sure.\n<tool_call>\n<function=shell>\n<parameter=command>\nls -la\n</parameter>\n</function>\n</tool_call>",
            &[("shell", r#"{"command": "ls -la"}"#)],
            "Sure.",
        );
    }

    #[test]
    fn malformed_tags_stay_text() {
        for text in [
            "<tool_call>not json</tool_call> done",
            "<tool_call>oops</tool_call>",
            "<tool_call>shell\n{\"command\": </tool_call>",
            "<tool_call>shell\n[1, 2]</tool_call>",
            "<tool_call>set_timer<arg_key>minutes</arg_key></tool_call>",
            "<tool_call>set_timer<arg_key></arg_key><arg_value>1</arg_value></tool_call>",
            "<tool_call>set_timer<arg_key>a</arg_key><arg_value>1</arg_value> trailing</tool_call>",
            "<tool_call>two words\n{}</tool_call>",
            "<tool_call><tool_call>{\"name\":",
        ] {
            stays_text(text);
        }
    }

    #[test]
    fn hostile_tags() {
        hostile(
            &["<tool_call>", "</tool_call>", "<arg_key>", "<arg_value>"],
            "<tool_call>set_timer\n<arg_key>minutes</arg_key><arg_value>5</arg_value></tool_call>",
        );
    }
}
