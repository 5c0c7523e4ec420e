//! Turns as Markdown text: what the archive keeps and what the summarizer reads.

use std::fmt::Write as _;

use cairn_core::chat::{ChatMessage, Role};
use chrono_tz::Tz;

use crate::session::{Turn, TurnKind};

/// The full text of some turns: a `## Turn N — time` heading per turn, then
/// the person's input, the assistant's text, tool calls and tool results.
pub fn render_turns<'a>(turns: impl IntoIterator<Item = &'a Turn>, tz: Tz) -> String {
    let mut out = String::new();
    for turn in turns {
        render_turn(&mut out, turn, tz);
    }
    out
}

fn render_turn(out: &mut String, turn: &Turn, tz: Tz) {
    let at = turn
        .started_at
        .with_timezone(&tz)
        .format("%Y-%m-%d %H:%M:%S %Z");
    // `write!` into a String cannot fail; the results are ignored on purpose.
    match turn.kind {
        TurnKind::Summary => {
            let _ = writeln!(out, "## Summary (turn {}) — {at}\n", turn.number);
        }
        TurnKind::Exchange => {
            let _ = writeln!(out, "## Turn {} — {at}\n", turn.number);
        }
    }
    if turn.messages.is_empty() {
        // A turn stored without messages still has its input and answer.
        if !turn.user_input.is_empty() {
            let _ = writeln!(out, "**User:**\n{}\n", turn.user_input);
        }
        if let Some(response) = &turn.response {
            let _ = writeln!(out, "**Assistant:**\n{response}\n");
        }
    }
    for message in &turn.messages {
        render_message(out, message);
    }
    if let Some(error) = &turn.error {
        let _ = writeln!(out, "*(turn ended with an error: {error})*\n");
    }
}

fn render_message(out: &mut String, message: &ChatMessage) {
    match message.role {
        Role::System => {
            let _ = writeln!(out, "**System:**\n{}\n", message.content);
        }
        Role::User => {
            let _ = writeln!(out, "**User:**\n{}\n", message.content);
        }
        Role::Assistant => {
            if !message.content.is_empty() {
                let _ = writeln!(out, "**Assistant:**\n{}\n", message.content);
            }
            for call in &message.tool_calls {
                let _ = writeln!(
                    out,
                    "**Tool call** `{}` ({}): `{}`\n",
                    call.name, call.id, call.arguments
                );
            }
        }
        Role::Tool => {
            let name = message.name.as_deref().unwrap_or("tool");
            let id = message.tool_call_id.as_deref().unwrap_or("?");
            let fence = fence_for(&message.content);
            let _ = writeln!(
                out,
                "**Tool result** `{name}` ({id}):\n{fence}\n{}\n{fence}\n",
                message.content
            );
        }
    }
}

/// A code fence longer than any run of backticks inside `text`, so tool
/// output containing its own fences cannot end the block early.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat(longest.max(2) + 1)
}

/// Shortens `text` to at most about `max_bytes` by cutting out its middle,
/// keeping the start (an earlier summary) and the end (the latest turns).
pub fn cut_middle(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let head_end = floor_char_boundary(text, max_bytes / 4);
    let tail_start = ceil_char_boundary(text, text.len() - (max_bytes - max_bytes / 4));
    let omitted = tail_start.saturating_sub(head_end);
    format!(
        "{}\n\n[… {omitted} bytes of the conversation omitted here …]\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::chat::ToolCall;
    use chrono::{TimeZone, Utc};
    use serde_json::json;

    fn turn_with_tool() -> Turn {
        let at = Utc.with_ymd_and_hms(2025, 3, 14, 9, 30, 0).unwrap();
        let mut turn = Turn::summary(7, "x", at);
        turn.kind = TurnKind::Exchange;
        turn.user_input = "list files".into();
        turn.messages = vec![
            ChatMessage::user("list files"),
            ChatMessage::assistant_tool_calls(
                "let me look",
                vec![ToolCall {
                    id: "c1".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                }],
            ),
            ChatMessage::tool_result("c1", "shell", "a.txt\n```\nb.txt"),
            ChatMessage::assistant("a.txt and b.txt"),
        ];
        turn
    }

    #[test]
    fn renders_every_part_of_a_turn() {
        let text = render_turns(&[turn_with_tool()], Tz::UTC);
        assert!(text.starts_with("## Turn 7 — 2025-03-14 09:30:00 UTC\n"));
        for part in [
            "**User:**\nlist files",
            "**Assistant:**\nlet me look",
            "**Tool call** `shell` (c1): `{\"command\":\"ls\"}`",
            "**Tool result** `shell` (c1):\n````\na.txt\n```\nb.txt\n````",
            "**Assistant:**\na.txt and b.txt",
        ] {
            assert!(text.contains(part), "missing {part:?} in\n{text}");
        }
    }

    #[test]
    fn renders_times_in_the_given_zone() {
        let text = render_turns(&[turn_with_tool()], chrono_tz::Europe::Paris);
        assert!(
            text.starts_with("## Turn 7 — 2025-03-14 10:30:00 CET\n"),
            "{text}"
        );
    }

    #[test]
    fn cutting_keeps_both_ends_and_char_boundaries() {
        let text = format!("HEAD{}TAIL", "é".repeat(1_000));
        let cut = cut_middle(&text, 100);
        assert!(cut.starts_with("HEAD") && cut.ends_with("TAIL"));
        assert!(cut.contains("omitted"));
        assert!(cut.len() < 200);
        assert_eq!(cut_middle("short", 100), "short");
    }
}
