//! A cheap token estimate, without a tokenizer.
//!
//! The heuristic: for each piece of text, the larger of `ceil(bytes / 4)` and
//! `ceil(words × 1.3)`, plus [`MESSAGE_OVERHEAD`] tokens per message for the
//! role framing providers add. Bytes rather than characters because scripts
//! outside ASCII (CJK, emoji) take more tokens per character, and UTF-8 bytes
//! track that better; the word count catches text of many short words. Both
//! err on the high side, which is the safe side for a context limit.

use cairn_core::chat::{ChatMessage, ToolCall};
use cairn_core::image::IMAGE_TOKENS;

/// Tokens each message costs beyond its text (role and separators).
pub const MESSAGE_OVERHEAD: usize = 4;

/// Estimated tokens per whitespace-separated word, as tenths (1.3).
const TENTHS_PER_WORD: usize = 13;

/// Estimated tokens of a piece of text.
pub fn estimate_text(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let by_bytes = text.len().div_ceil(4);
    let words = text.split_whitespace().count();
    let by_words = (words * TENTHS_PER_WORD).div_ceil(10);
    by_bytes.max(by_words)
}

/// Estimated tokens of one tool call as the model wrote it (name and arguments).
pub fn estimate_tool_call(call: &ToolCall) -> usize {
    // Arguments go over the wire as JSON text, so measure that text.
    estimate_text(&call.name) + estimate_text(&call.arguments.to_string())
}

/// Estimated tokens of one message: framing, text, images (a fixed
/// [`IMAGE_TOKENS`] each) and any tool calls it makes.
pub fn estimate_message(message: &ChatMessage) -> usize {
    MESSAGE_OVERHEAD
        + estimate_text(&message.content)
        + message.images.len() * IMAGE_TOKENS
        + message
            .tool_calls
            .iter()
            .map(estimate_tool_call)
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_text_is_free() {
        assert_eq!(estimate_text(""), 0);
    }

    #[test]
    fn takes_the_larger_of_bytes_and_words() {
        // 8 bytes, 1 word: bytes win (2 tokens).
        assert_eq!(estimate_text("abcdefgh"), 2);
        // "a b c d e f g h i j": 19 bytes -> 5, 10 words -> 13: words win.
        assert_eq!(estimate_text("a b c d e f g h i j"), 13);
        // One short word: 1 by bytes, ceil(1.3) = 2 by words.
        assert_eq!(estimate_text("a"), 2);
    }

    #[test]
    fn non_ascii_counts_bytes() {
        // Twelve CJK characters are 36 bytes: 9 tokens, not 3.
        assert_eq!(estimate_text("文字文字文字文字文字文字"), 9);
    }

    #[test]
    fn each_image_counts_a_fixed_estimate() {
        let part = cairn_core::image::ImagePart {
            media_type: "image/png".into(),
            sha256: "0".repeat(64),
            data: None,
        };
        let two = ChatMessage::user_with_images("hi", vec![part.clone(), part]);
        assert_eq!(
            estimate_message(&two),
            estimate_message(&ChatMessage::user("hi")) + 2 * IMAGE_TOKENS
        );
    }

    #[test]
    fn tool_calls_count_name_and_arguments() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "shell".into(),
            arguments: json!({"command": "ls -la /tmp"}),
        };
        let message = ChatMessage::assistant_tool_calls("", vec![call.clone()]);
        assert_eq!(
            estimate_message(&message),
            MESSAGE_OVERHEAD + estimate_tool_call(&call)
        );
        assert!(estimate_tool_call(&call) >= estimate_text(r#"{"command":"ls -la /tmp"}"#));
    }
}
