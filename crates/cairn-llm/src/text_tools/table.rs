//! Helpers for the formats' table tests: the offered tools, one expectation
//! per row, and a battery of hostile inputs built from a format's markers.

use cairn_core::chat::ToolDefinition;
use serde_json::{Value, json};

use super::extract_tool_calls;

/// `shell(command: string)`, `read_file(path: string)`,
/// `set_timer(minutes: integer, label: string)`, `time_now()`.
pub(super) fn tools() -> Vec<ToolDefinition> {
    let tool = |name: &str, properties: Value| ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": properties}),
    };
    vec![
        tool("shell", json!({"command": {"type": "string"}})),
        tool("read_file", json!({"path": {"type": "string"}})),
        tool(
            "set_timer",
            json!({"minutes": {"type": "integer"}, "label": {"type": "string"}}),
        ),
        tool("time_now", json!({})),
    ]
}

/// `text` gives exactly `calls` (name, arguments as JSON text) and leaves `rest`.
pub(super) fn expect(text: &str, calls: &[(&str, &str)], rest: &str) {
    let found = extract_tool_calls(text, &tools());
    let got: Vec<(String, Value)> = found
        .calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    let want: Vec<(String, Value)> = calls
        .iter()
        .map(|(name, args)| {
            let args = serde_json::from_str(args).unwrap_or_else(|e| panic!("{args}: {e}"));
            ((*name).to_owned(), args)
        })
        .collect();
    assert_eq!(got, want, "calls of {text:?}");
    assert_eq!(found.text, rest, "text left of {text:?}");
    for call in &found.calls {
        assert!(call.id.starts_with("call_") || !call.id.is_empty());
    }
}

/// `text` is not a call: no calls, and the text comes back unchanged.
pub(super) fn stays_text(text: &str) {
    expect(text, &[], text);
}

/// Long runs of a format's markers (alone, unclosed, mixed with brace and
/// quote characters) finish quickly, find nothing and change nothing; every
/// prefix of `sample` is handled without panicking.
pub(super) fn hostile(markers: &[&str], sample: &str) {
    let tools = tools();
    let mut inputs = Vec::new();
    for marker in markers {
        inputs.push(marker.repeat(20_000));
        for tail in [
            "{",
            "[",
            "\"",
            "{\"name\": \"shell\", \"arguments\": ",
            "\n",
        ] {
            inputs.push(format!("{marker}{tail}").repeat(5_000));
        }
        inputs.push(format!("{marker}{}", "{".repeat(100_000)));
        inputs.push(format!("{}{marker}", "[".repeat(100_000)));
    }
    inputs.push(markers.concat().repeat(5_000));
    for text in &inputs {
        let found = extract_tool_calls(text, &tools);
        assert!(found.calls.is_empty(), "{:?}", &text[..80.min(text.len())]);
        assert_eq!(&found.text, text);
    }
    for (end, _) in sample.char_indices() {
        let prefix = &sample[..end];
        let found = extract_tool_calls(prefix, &tools);
        if found.calls.is_empty() {
            assert_eq!(found.text, prefix);
        } else {
            assert!(found.text.len() < prefix.len(), "{prefix:?}");
        }
    }
}
