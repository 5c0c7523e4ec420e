//! A bare JSON call object (or array of them) starting a line, with
//! `arguments` (or `parameters`, as Llama 3.2 writes) and an offered name;
//! anything else is an ordinary JSON answer and stays text.

use cairn_core::chat::ToolCall;
use serde_json::Value;

use super::json::{Acceptance, calls_from_value};

/// At most this many candidate positions are tried, bounding the work on
/// adversarial text full of braces.
const MAX_ATTEMPTS: usize = 64;

/// Replaces every bare call with nothing.
pub(super) fn extract(text: &str, known: &[&str], calls: &mut Vec<ToolCall>) -> String {
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
        if attempts == MAX_ATTEMPTS {
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

#[cfg(test)]
mod tests {
    use super::super::extract_tool_calls;
    use super::super::table::{expect, hostile, stays_text};

    #[test]
    fn bare_objects_and_arrays() {
        expect(
            "{\"name\": \"shell\", \"arguments\": {\"command\": \"date\"}}",
            &[("shell", r#"{"command": "date"}"#)],
            "",
        );
        expect(
            "Running both:\n[{\"name\":\"shell\",\"parameters\":{}},{\"name\":\"read_file\",\"arguments\":{\"path\":\"x\"}}]\nthanks",
            &[("shell", "{}"), ("read_file", r#"{"path": "x"}"#)],
            "Running both:\n\nthanks",
        );
    }

    #[test]
    fn ordinary_json_answers_stay_text() {
        for text in [
            "{\"name\": \"Bob\", \"arguments\": {}}",
            "{\"name\": \"shell\"}",
            "The object is {\"name\": \"shell\", \"arguments\": {}} inline",
            "[1, 2, 3]",
        ] {
            stays_text(text);
        }
        assert!(
            extract_tool_calls("{\"name\":\"shell\",\"arguments\":{}}", &[])
                .calls
                .is_empty()
        );
    }

    #[test]
    fn hostile_braces() {
        hostile(
            &["\n{", "\n[", "{\"name\": \"shell\"}\n"],
            "{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}",
        );
    }
}
