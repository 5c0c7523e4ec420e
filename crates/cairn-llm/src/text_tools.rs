//! Recovery of tool calls that a model wrote into its text.
//!
//! Models without native tool calling (many local models behind Ollama,
//! llama.cpp or vLLM) write calls as markup. Three formats are recognised:
//!
//! - `<tool_call>{"name": …, "arguments": …}</tool_call>` tags (Hermes/Qwen style),
//! - fenced code blocks tagged ```` ```tool_call ```` or ```` ```json ````,
//! - a bare JSON object (or array of them) with `name` and `arguments`,
//!   starting on its own line.
//!
//! Explicit formats (the tag, a `tool_call` fence) accept any tool name, so an
//! unknown name reaches the tool registry and the model hears about it. The
//! ambiguous formats (`json` fence, bare JSON) only count when the name is one
//! of the offered tools, so ordinary JSON answers stay text.

use cairn_core::chat::{ToolCall, ToolDefinition};
use rand::Rng;
use serde_json::{Map, Value};

/// The text with recovered markup removed, and the calls found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredToolCalls {
    /// The remaining text, trimmed.
    pub text: String,
    /// The calls, in the order found, each with a generated id unless the markup had one.
    pub calls: Vec<ToolCall>,
}

/// A fresh tool call id (`call_` and 24 hex digits).
pub fn new_call_id() -> String {
    let n: u128 = rand::rng().random();
    format!("call_{:024x}", n & ((1u128 << 96) - 1))
}

/// Finds tool calls written in `text`; `tools` are the tools offered in the request.
pub fn extract_tool_calls(text: &str, tools: &[ToolDefinition]) -> RecoveredToolCalls {
    let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let mut calls = Vec::new();
    let text = extract_tags(text, &mut calls);
    let text = extract_fences(&text, &known, &mut calls);
    let text = extract_bare_json(&text, &known, &mut calls);
    let text = if calls.is_empty() { text } else { tidy(&text) };
    RecoveredToolCalls { text, calls }
}

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

fn extract_tags(text: &str, calls: &mut Vec<ToolCall>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Once no closing tag is left, later searches are skipped (keeps hostile input linear).
    let mut closes_left = true;
    while let Some(start) = rest.find(OPEN_TAG) {
        let body_start = start + OPEN_TAG.len();
        let close = if closes_left {
            rest[body_start..].find(CLOSE_TAG)
        } else {
            None
        };
        closes_left = close.is_some();
        // An unclosed last tag is common when the server stops at `</tool_call>`.
        let (body, after) = match close {
            Some(end) => (
                &rest[body_start..body_start + end],
                &rest[body_start + end + CLOSE_TAG.len()..],
            ),
            None => (&rest[body_start..], ""),
        };
        match parse_calls(strip_fence(body), Acceptance::Any) {
            Some(found) => {
                out.push_str(&rest[..start]);
                calls.extend(found);
                rest = after;
            }
            None => {
                out.push_str(&rest[..body_start]);
                rest = &rest[body_start..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Removes a ```json fence some models put inside the tag.
fn strip_fence(body: &str) -> &str {
    let trimmed = body.trim();
    let Some(inner) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    match inner.split_once('\n') {
        Some((_lang, code)) => code,
        None => inner,
    }
}

fn extract_fences(text: &str, known: &[&str], calls: &mut Vec<ToolCall>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after_ticks = &rest[start + 3..];
        let Some(newline) = after_ticks.find('\n') else {
            break;
        };
        let lang = after_ticks[..newline].trim().to_ascii_lowercase();
        let code_start = newline + 1;
        let Some(code_len) = after_ticks[code_start..].find("```") else {
            break;
        };
        let code = &after_ticks[code_start..code_start + code_len];
        let block_end = start + 3 + code_start + code_len + 3;
        let acceptance = match lang.as_str() {
            "tool_call" | "tool_calls" | "tool_code" | "tool" => Some(Acceptance::Any),
            "json" | "" => Some(Acceptance::Known(known)),
            _ => None,
        };
        match acceptance.and_then(|a| parse_calls(code, a)) {
            Some(found) => {
                out.push_str(&rest[..start]);
                calls.extend(found);
            }
            None => out.push_str(&rest[..block_end]),
        }
        rest = &rest[block_end..];
    }
    out.push_str(rest);
    out
}

/// At most this many candidate positions are tried, bounding the work on
/// adversarial text full of braces.
const MAX_BARE_ATTEMPTS: usize = 64;

fn extract_bare_json(text: &str, known: &[&str], calls: &mut Vec<ToolCall>) -> String {
    if known.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut attempts = 0;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let start = line_start;
        line_start += line.len();
        // Lines inside a call already taken are skipped; the rest of such a line stays text.
        if start < copied {
            continue;
        }
        let trimmed = line.trim_start();
        if !trimmed.starts_with(['{', '[']) {
            continue;
        }
        if attempts == MAX_BARE_ATTEMPTS {
            break;
        }
        attempts += 1;
        let at = start + (line.len() - trimmed.len());
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else {
            continue;
        };
        if let Some(found) = calls_from_value(&value, Acceptance::Known(known)) {
            out.push_str(&text[copied..at]);
            calls.extend(found);
            copied = at + values.byte_offset();
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[derive(Clone, Copy)]
enum Acceptance<'a> {
    /// Explicit tool-call markup: any name, arguments optional.
    Any,
    /// Ambiguous markup: only offered names, arguments required.
    Known(&'a [&'a str]),
}

fn parse_calls(code: &str, acceptance: Acceptance<'_>) -> Option<Vec<ToolCall>> {
    let value: Value = serde_json::from_str(code.trim()).ok()?;
    calls_from_value(&value, acceptance)
}

fn calls_from_value(value: &Value, acceptance: Acceptance<'_>) -> Option<Vec<ToolCall>> {
    match value {
        Value::Object(obj) => Some(vec![call_from_object(obj, acceptance)?]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| call_from_object(item.as_object()?, acceptance))
            .collect(),
        _ => None,
    }
}

const ARGUMENT_KEYS: [&str; 4] = ["arguments", "parameters", "args", "input"];

fn call_from_object(obj: &Map<String, Value>, acceptance: Acceptance<'_>) -> Option<ToolCall> {
    // OpenAI-shaped `{"function": {"name": …, "arguments": …}}` written as text.
    if let Some(Value::Object(function)) = obj.get("function") {
        let mut call = call_from_object(function, acceptance)?;
        if let Some(Value::String(id)) = obj.get("id") {
            call.id = id.clone();
        }
        return Some(call);
    }
    let name = ["name", "tool", "tool_name"]
        .iter()
        .find_map(|key| obj.get(*key)?.as_str())
        .map(str::trim)
        .filter(|name| !name.is_empty())?;
    let raw_args = ARGUMENT_KEYS.iter().find_map(|key| obj.get(*key));
    match acceptance {
        Acceptance::Any => {}
        Acceptance::Known(known) => {
            if raw_args.is_none() || !known.contains(&name) {
                return None;
            }
        }
    }
    let id = match obj.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => new_call_id(),
    };
    Some(ToolCall {
        id,
        name: name.to_owned(),
        arguments: normalize_arguments(raw_args.cloned()),
    })
}

/// Arguments as a JSON value: strings holding JSON are decoded, absent or
/// null become `{}`, and undecodable strings stay strings so the tool can
/// report them.
pub fn normalize_arguments(raw: Option<Value>) -> Value {
    match raw {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(s)) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Some(other) => other,
    }
}

/// Trims the ends and collapses the blank-line runs left by removed markup.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.trim().lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolDefinition> {
        ["shell", "read_file"]
            .iter()
            .map(|name| ToolDefinition {
                name: (*name).into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }

    fn names(r: &RecoveredToolCalls) -> Vec<&str> {
        r.calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn xml_tag_is_recovered_and_removed() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(r.text, "Let me look.");
        assert_eq!(names(&r), ["shell"]);
        assert_eq!(r.calls[0].arguments, json!({"command": "ls"}));
        assert!(r.calls[0].id.starts_with("call_") && r.calls[0].id.len() == 29);
    }

    #[test]
    fn several_tags_unknown_names_unclosed_tail_and_string_arguments() {
        let text = "<tool_call>{\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":\\\"pwd\\\"}\"}</tool_call>\
                    <tool_call>{\"name\":\"mystery\"}</tool_call><tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(names(&r), ["shell", "mystery", "read_file"]);
        assert_eq!(r.calls[0].arguments, json!({"command": "pwd"}));
        assert_eq!(r.calls[1].arguments, json!({}));
        assert_eq!(r.text, "");
        assert_ne!(r.calls[0].id, r.calls[1].id);
    }

    #[test]
    fn malformed_tag_stays_text() {
        let text = "<tool_call>not json</tool_call> done";
        let r = extract_tool_calls(text, &tools());
        assert!(r.calls.is_empty());
        assert_eq!(r.text, text);
    }

    #[test]
    fn bare_json_object_and_array() {
        let text = "{\"name\": \"shell\", \"arguments\": {\"command\": \"date\"}}";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(names(&r), ["shell"]);
        assert_eq!(r.text, "");
        let text = "Running both:\n[{\"name\":\"shell\",\"parameters\":{}},{\"name\":\"read_file\",\"arguments\":{\"path\":\"x\"}}]\nthanks";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(names(&r), ["shell", "read_file"]);
        assert_eq!(r.text, "Running both:\n\nthanks");
    }

    #[test]
    fn ordinary_json_answers_are_left_alone() {
        for text in [
            "{\"name\": \"Bob\", \"arguments\": {}}", // not an offered tool
            "{\"name\": \"shell\"}",                  // no arguments key
            "The object is {\"name\": \"shell\", \"arguments\": {}} inline", // not at line start
            "```json\n{\"name\": \"Ada\", \"age\": 36}\n```",
            "```python\nprint({\"name\": \"shell\", \"arguments\": {}})\n```",
        ] {
            let r = extract_tool_calls(text, &tools());
            assert!(r.calls.is_empty(), "{text}");
            assert_eq!(r.text, text);
        }
        assert!(
            extract_tool_calls("{\"name\":\"shell\",\"arguments\":{}}", &[])
                .calls
                .is_empty()
        );
    }

    #[test]
    fn fenced_json_and_tool_call_blocks() {
        let text = "I'll check.\n\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"uptime\"}}\n```\n\nOne moment.";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(names(&r), ["shell"]);
        assert_eq!(r.text, "I'll check.\n\nOne moment.");
        let text = "```tool_call\n{\"function\": {\"name\": \"anything\", \"arguments\": \"{}\"}, \"id\": \"c9\"}\n```";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(names(&r), ["anything"]);
        assert_eq!(r.calls[0].id, "c9");
        assert_eq!(r.calls[0].arguments, json!({}));
    }

    #[test]
    fn fence_inside_tag_and_undecodable_string_arguments() {
        let text = "<tool_call>\n```json\n{\"name\":\"shell\",\"arguments\":\"ls -la\"}\n```\n</tool_call>";
        let r = extract_tool_calls(text, &tools());
        assert_eq!(r.calls[0].arguments, json!("ls -la"));
    }

    #[test]
    fn plain_text_and_hostile_input_do_not_panic() {
        let r = extract_tool_calls("just an answer", &tools());
        assert_eq!(r.text, "just an answer");
        let hostile = "\n{".repeat(10_000) + "```" + &"<tool_call>".repeat(100) + "é";
        let r = extract_tool_calls(&hostile, &tools());
        assert!(r.calls.is_empty());
        // Long single lines of braces and many unclosed tags stay linear.
        let braces =
            "{".repeat(200_000) + &"<tool_call>[".repeat(20_000) + &"```json\n".repeat(1000);
        let r = extract_tool_calls(&braces, &tools());
        assert!(r.calls.is_empty());
        assert_eq!(r.text, braces);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any text is handled without panicking, and text without calls is returned unchanged.
        #[test]
        fn never_panics_and_keeps_call_free_text(
            text in "(<tool_call>|</tool_call>|```json\n|```|\\{\"name\": \"shell\", \"arguments\": |\\}|\\[|\n| |é|[a-z\"{}:,]){0,40}"
        ) {
            let tools = [ToolDefinition {
                name: "shell".into(),
                description: String::new(),
                parameters: serde_json::json!({}),
            }];
            let recovered = extract_tool_calls(&text, &tools);
            if recovered.calls.is_empty() {
                prop_assert_eq!(recovered.text, text);
            } else {
                prop_assert!(recovered.text.len() < text.len());
            }
        }
    }
}
