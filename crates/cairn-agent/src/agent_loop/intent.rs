//! Noticing a model that says it will use a tool but calls none.

use std::sync::LazyLock;

use regex::Regex;

/// Phrases announcing an action the model would need a tool for.
static ANNOUNCES_TOOL_USE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:let me|i'll|i will|i am going to|i'm going to|i'll now|now i'll|allow me to)\s+(?:now\s+|first\s+|quickly\s+)?(?:use|run|call|execute|check|read|open|write|create|list|fetch|look up|search|query|inspect|download)\b",
    )
    .ok()
});

/// The text a model is sent when it announced a tool call without making one.
pub const NUDGE: &str = "You said you would use a tool, but you did not call one. If a tool is needed, call it now using the tool-calling interface; otherwise give your final answer.";

/// Whether `text` announces a tool use; only meaningful when tools were offered.
pub fn announces_tool_use(text: &str) -> bool {
    let tail: String = {
        // Only the end matters: an answer that merely mentions earlier checks is final.
        let chars: Vec<char> = text.chars().collect();
        chars[chars.len().saturating_sub(400)..].iter().collect()
    };
    ANNOUNCES_TOOL_USE
        .as_ref()
        .is_some_and(|re| re.is_match(&tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_announcements() {
        assert!(announces_tool_use("Sure! Let me check the file for you."));
        assert!(announces_tool_use("I'll run `ls` to see what's there."));
        assert!(announces_tool_use("I am going to read the config now."));
    }

    #[test]
    fn leaves_final_answers_alone() {
        assert!(!announces_tool_use("The file contains three lines."));
        assert!(!announces_tool_use("Paris is the capital of France."));
        assert!(!announces_tool_use(""));
    }
}
