//! Recovery of tool calls that a model wrote into its text.
//!
//! Models without native tool calling (many local models behind Ollama,
//! llama.cpp or vLLM, or a server started without its tool parser) write
//! calls as markup. Each format family has its module:
//!
//! - [`deepseek`]: `<｜tool▁calls▁begin｜>…<｜tool▁call▁begin｜>…` markers (V3, R1, V3.1);
//! - [`invoke`]: `<function_calls><invoke name="…"><parameter name="…">…` XML;
//! - [`tagged`]: `<tool_call>…</tool_call>` holding JSON (Hermes, Qwen),
//!   `NAME\n{…}` (GLM-4), `NAME<arg_key>…<arg_value>…` (GLM-4.5) or a
//!   `<function=…>` block (Qwen3-Coder);
//! - [`llama`]: `<function=NAME>{…}</function>` and `<|python_tag|>{…}` (Llama 3.x);
//! - [`mistral`]: `[TOOL_CALLS] [{…}]` and `[TOOL_CALLS]NAME[ARGS]{…}`;
//! - [`fenced`]: ```` ```tool_call ```` and ```` ```json ```` code blocks;
//! - [`bare`]: a JSON call object (or array) starting a line.
//!
//! They run in that order, each removing the markup it read. Explicit
//! markup accepts any well-formed name, so an unknown name reaches the tool
//! registry and the model hears about it; the ambiguous formats (`json`
//! fence, bare JSON, a name alone in a tag) count only for offered tools,
//! so ordinary answers stay text. Malformed markup stays text. Every pass
//! is linear in the text, whatever it holds (see [`scan`]).

mod bare;
mod deepseek;
mod fenced;
mod invoke;
mod json;
mod llama;
mod mistral;
mod scan;
#[cfg(test)]
mod table;
mod tagged;

use cairn_core::chat::{ToolCall, ToolDefinition};
use rand::Rng;

pub use json::normalize_arguments;
use scan::Offered;

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
    let offered = Offered::new(tools);
    let mut calls = Vec::new();
    let text = deepseek::extract(text, &mut calls);
    let text = invoke::extract(&text, &offered, &mut calls);
    let text = tagged::extract(&text, &offered, &mut calls);
    let text = llama::extract(&text, &offered, &mut calls);
    let text = mistral::extract(&text, &mut calls);
    let text = fenced::extract(&text, offered.names(), &mut calls);
    let text = bare::extract(&text, offered.names(), &mut calls);
    let text = if calls.is_empty() { text } else { tidy(&text) };
    RecoveredToolCalls { text, calls }
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
    use super::table::{expect, hostile, tools};
    use super::*;

    #[test]
    fn plain_text_is_returned_as_is() {
        let r = extract_tool_calls("just an answer", &tools());
        assert_eq!(r.text, "just an answer");
        assert!(r.calls.is_empty());
    }

    #[test]
    fn generated_ids_are_distinct() {
        let r = extract_tool_calls(
            "<tool_call>{\"name\":\"shell\"}</tool_call><tool_call>{\"name\":\"shell\"}</tool_call>",
            &tools(),
        );
        assert!(r.calls[0].id.starts_with("call_") && r.calls[0].id.len() == 29);
        assert_ne!(r.calls[0].id, r.calls[1].id);
    }

    #[test]
    fn formats_mix_in_one_answer_in_pipeline_order() {
        expect(
            "First.\n[TOOL_CALLS]time_now[ARGS]{}\n<function=shell>{\"command\": \"ls\"}</function>\n\
             <tool_call>read_file\n{\"path\": \"a\"}</tool_call>\nLast.",
            &[
                ("read_file", r#"{"path": "a"}"#),
                ("shell", r#"{"command": "ls"}"#),
                ("time_now", "{}"),
            ],
            "First.\n\nLast.",
        );
    }

    #[test]
    fn long_runs_stay_linear() {
        // Many openings before one closing: each would otherwise search (and
        // parse) up to that closing.
        for (open, close) in [
            tagged::TAGS,
            llama::FUNCTION,
            invoke::BLOCK,
            deepseek::CALLS,
            deepseek::CALL,
        ] {
            let text = format!("{}{close}", format!("{open}{{").repeat(50_000));
            let r = extract_tool_calls(&text, &tools());
            assert!(r.calls.is_empty());
            assert_eq!(r.text, text);
        }
        let braces =
            "{".repeat(200_000) + &"<tool_call>[".repeat(20_000) + &"```json\n".repeat(1000);
        let r = extract_tool_calls(&braces, &tools());
        assert!(r.calls.is_empty());
        assert_eq!(r.text, braces);
    }

    /// The fuzz target's seeds (one per format) each hold calls, so the
    /// fuzzer starts from every format; new seeds are checked as they come.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "a sync test reading fixtures")]
    fn every_fuzz_seed_holds_calls_and_loses_its_markup() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds/text_tool_calls");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let r = extract_tool_calls(&text, &tools());
            assert!(!r.calls.is_empty(), "{}: no call", path.display());
            for marker in ["<", "[TOOL_CALLS]", "```", "{"] {
                assert!(
                    !r.text.contains(marker),
                    "{}: {:?} left",
                    path.display(),
                    r.text
                );
            }
            seen += 1;
        }
        assert!(seen >= 13, "{seen} seeds in {}", dir.display());
    }

    #[test]
    fn every_marker_at_once_is_handled_without_panicking() {
        hostile(
            &[
                deepseek::CALLS.0,
                deepseek::CALL.0,
                deepseek::SEP,
                invoke::BLOCK.0,
                tagged::TAGS.0,
                tagged::TAGS.1,
                llama::FUNCTION.0,
                llama::PYTHON_TAG,
                mistral::TOOL_CALLS,
                "```",
                "\n{",
                "é",
            ],
            "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}</tool_call>",
        );
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
            text in "(<tool_call>|</tool_call>|```json\n|```|\\{\"name\": \"shell\", \"arguments\": |\\}|\\[|\n| |é|[a-z\"{}:,]|\\[TOOL_CALLS\\]|\\[ARGS\\]|<function=|</function>|<\\|python_tag\\|>|<function_calls>|<invoke name=\"shell\">|<parameter name=\"command\">|</parameter>|</invoke>|<arg_key>|</arg_key>|<arg_value>|</arg_value>|<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>|<｜tool▁sep｜>|<｜tool▁call▁end｜>|shell|;){0,40}"
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
