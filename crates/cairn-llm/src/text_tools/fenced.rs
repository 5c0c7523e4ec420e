//! Fenced code blocks: ```` ```tool_call ```` (and `tool_calls`, `tool_code`,
//! `tool`) hold calls for any name; ```` ```json ```` and unlabelled fences
//! count only for offered tools with arguments, so JSON answers stay text.

use cairn_core::chat::ToolCall;

use super::json::{Acceptance, parse_calls};

/// Replaces every fence holding calls with nothing.
pub(super) fn extract(text: &str, known: &[&str], calls: &mut Vec<ToolCall>) -> String {
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

#[cfg(test)]
mod tests {
    use super::super::table::{expect, hostile, stays_text};

    #[test]
    fn fenced_blocks() {
        expect(
            "I'll check.\n\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"uptime\"}}\n```\n\nOne moment.",
            &[("shell", r#"{"command": "uptime"}"#)],
            "I'll check.\n\nOne moment.",
        );
        expect(
            "```tool_call\n{\"function\": {\"name\": \"anything\", \"arguments\": \"{}\"}, \"id\": \"c9\"}\n```\
             \n```\n[{\"name\": \"time_now\", \"arguments\": {}}]\n```",
            &[("anything", "{}"), ("time_now", "{}")],
            "",
        );
    }

    #[test]
    fn other_fences_stay_text() {
        for text in [
            "```json\n{\"name\": \"Ada\", \"age\": 36}\n```",
            "```python\nprint({\"name\": \"shell\", \"arguments\": {}})\n```",
            "```json\n{\"name\": \"shell\"}\n```",
            "```tool_call\nnot json\n```",
        ] {
            stays_text(text);
        }
    }

    #[test]
    fn hostile_fences() {
        hostile(
            &["```", "```json\n", "```tool_call\n"],
            "```tool_call\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n```",
        );
    }
}
