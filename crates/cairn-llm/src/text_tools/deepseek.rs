//! DeepSeek's tool-call markers (full-width bars `｜` and the `▁` word
//! separator are part of them):
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//! ```json
//! {…}
//! ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//! ```
//!
//! as V3 and R1 write them, and `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>`
//! as V3.1 does. A call block outside the outer markers counts too.

use cairn_core::chat::ToolCall;

use super::json::{arguments_object, strip_fence};
use super::scan::{call, is_tool_name, replace_delimited};

/// The outer markers around all calls.
pub(super) const CALLS: (&str, &str) = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>");
/// The markers around one call.
pub(super) const CALL: (&str, &str) = ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>");
/// Between the call's type (or name) and the rest.
pub(super) const SEP: &str = "<｜tool▁sep｜>";

/// Replaces the outer blocks, then lone call blocks, with nothing.
pub(super) fn extract(text: &str, calls: &mut Vec<ToolCall>) -> String {
    let text = replace_delimited(text, CALLS, true, calls, call_blocks);
    replace_delimited(&text, CALL, false, calls, |body| {
        one_call(body).map(|c| vec![c])
    })
}

/// Every call block inside the outer markers; anything else makes it text.
fn call_blocks(body: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let inner = rest.strip_prefix(CALL.0)?;
        // The last call's end marker may be missing when generation stopped there.
        let (content, after) = match inner.find(CALL.1) {
            Some(end) => (&inner[..end], &inner[end + CALL.1.len()..]),
            None => (inner, ""),
        };
        if content.contains(CALL.0) {
            return None;
        }
        calls.push(one_call(content)?);
        rest = after.trim();
    }
    Some(calls)
}

/// `function<sep>NAME\n{…}` or `NAME<sep>{…}`, the JSON possibly fenced.
fn one_call(content: &str) -> Option<ToolCall> {
    let (head, tail) = content.split_once(SEP)?;
    let head = head.trim();
    let (name, code) = if head == "function" {
        let tail = tail.trim_start();
        let end = tail.find(['\n', '`', '{']).unwrap_or(tail.len());
        (tail[..end].trim(), &tail[end..])
    } else {
        (head, tail)
    };
    if !is_tool_name(name) {
        return None;
    }
    Some(call(name, arguments_object(strip_fence(code))?))
}

#[cfg(test)]
mod tests {
    use super::super::table::{expect, hostile, stays_text};
    use super::{CALL, CALLS, SEP};

    fn v3(name: &str, args: &str) -> String {
        format!(
            "{}function{SEP}{name}\n```json\n{args}\n```{}",
            CALL.0, CALL.1
        )
    }

    fn v31(name: &str, args: &str) -> String {
        format!("{}{name}{SEP}{args}{}", CALL.0, CALL.1)
    }

    #[test]
    fn v3_and_r1_blocks() {
        expect(
            &format!(
                "Let me check.{}{}{}",
                CALLS.0,
                v3("shell", r#"{"command": "uptime"}"#),
                CALLS.1
            ),
            &[("shell", r#"{"command": "uptime"}"#)],
            "Let me check.",
        );
        expect(
            &format!(
                "{}{}\n{}{} and more",
                CALLS.0,
                v3("set_timer", r#"{"minutes": 2}"#),
                v3("time_now", "{}"),
                CALLS.1
            ),
            &[("set_timer", r#"{"minutes": 2}"#), ("time_now", "{}")],
            "and more",
        );
    }

    #[test]
    fn v31_blocks_and_lone_calls() {
        expect(
            &format!(
                "{}{}{}",
                CALLS.0,
                v31("read_file", r#"{"path": "a.txt"}"#),
                v31("time_now", "")
            ),
            &[("read_file", r#"{"path": "a.txt"}"#), ("time_now", "{}")],
            "",
        );
        expect(
            &format!("Before {} after", v31("shell", r#"{"command": "id"}"#)),
            &[("shell", r#"{"command": "id"}"#)],
            "Before  after",
        );
        // Stray text makes the outer block text, but its well-formed call still counts.
        expect(
            &format!("{}{}x{}", CALLS.0, v31("time_now", "{}"), CALLS.1),
            &[("time_now", "{}")],
            &format!("{}x{}", CALLS.0, CALLS.1),
        );
    }

    #[test]
    fn malformed_deepseek_markup_stays_text() {
        for text in [
            format!("{}{}", CALLS.0, CALLS.1),
            format!("{}{}{}", CALLS.0, v31("shell", "{\"command\": "), CALLS.1),
            format!("{}{}{}", CALLS.0, v31("two words", "{}"), CALLS.1),
            format!("{}{}shell{{}}{}", CALLS.0, CALL.0, CALL.1),
            format!("{}function{SEP}\n{{}}{}", CALL.0, CALL.1),
            format!("{}shell{SEP}[1]{}", CALL.0, CALL.1),
            format!("{}shell{SEP}{{}}", CALL.0),
        ] {
            stays_text(&text);
        }
    }

    #[test]
    fn hostile_deepseek_markup() {
        hostile(
            &[CALLS.0, CALL.0, SEP, CALL.1, "function", "```json\n"],
            &format!(
                "{}{}{}",
                CALLS.0,
                v3("shell", r#"{"command": "ls"}"#),
                CALLS.1
            ),
        );
    }
}
