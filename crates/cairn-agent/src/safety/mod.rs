//! Safety of tool output: scrub credentials, cap the size, frame it.
//!
//! [`sanitize_output`] is what the runner applies to every result, success or
//! error, in that order — scrubbing first so a cut can never leave half a secret.

pub mod frame;
pub mod leak;
pub mod scrub;

use std::borrow::Cow;

pub use frame::{frame, neutralize};
pub use scrub::{REDACTED, scrub};

/// Cuts `text` to at most `max_chars` characters (plus a marker), keeping the head
/// and the tail, where errors and summaries usually are.
pub fn cap(text: &str, max_chars: usize) -> Cow<'_, str> {
    let total = text.chars().count();
    if total <= max_chars {
        return Cow::Borrowed(text);
    }
    let head_chars = max_chars - max_chars / 3;
    let tail_chars = max_chars / 3;
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail_chars)
        .map_or(text.len(), |(i, _)| i);
    Cow::Owned(format!(
        "{}\n\n[... output truncated: showing {} of {} characters ...]\n\n{}",
        &text[..head_end],
        head_chars + tail_chars,
        total,
        &text[tail_start..]
    ))
}

/// Scrubs, caps and frames one tool's output for the model.
pub fn sanitize_output(tool: &str, status: Option<&str>, text: &str, max_chars: usize) -> String {
    let scrubbed = scrub(text);
    let capped = cap(&scrubbed, max_chars);
    frame(tool, status, &capped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_keeps_head_and_tail_on_char_boundaries() {
        assert_eq!(cap("short", 10), "short");
        let text = "é".repeat(100) + &"z".repeat(100);
        let out = cap(&text, 30);
        assert!(out.starts_with(&"é".repeat(20)));
        assert!(out.ends_with(&"z".repeat(10)));
        assert!(out.contains("showing 30 of 200 characters"));
        assert_eq!(
            cap("abc", 0),
            "\n\n[... output truncated: showing 0 of 3 characters ...]\n\n"
        );
    }

    #[test]
    fn sanitize_scrubs_before_capping() {
        let secret = format!("{}password=hunter2", "x".repeat(50));
        let out = sanitize_output("t", None, &secret, 1000);
        assert!(!out.contains("hunter2"));
        assert!(out.contains("password=[REDACTED]"));
    }
}
