//! Fuzzes the recovery of tool calls written as text, in every format
//! (`<tool_call>` tags, GLM, Qwen3-Coder, Llama, Mistral, `<function_calls>`
//! XML, DeepSeek markers, fences, bare JSON): nothing may panic, text without
//! a recovered call is returned unchanged, recovery only removes text, every
//! call has a name and an id, and the same text always gives the same calls.
//!
//! Run (seeds: one sample per format in `seeds/text_tool_calls/`):
//! `mkdir -p corpus/text_tool_calls && cp seeds/text_tool_calls/* corpus/text_tool_calls/`
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run text_tool_calls -- -dict=text_tools.dict -max_total_time=240`

#![no_main]

use cairn_core::chat::ToolDefinition;
use cairn_llm::text_tools::extract_tool_calls;
use libfuzzer_sys::fuzz_target;

fn tool(name: &str, properties: serde_json::Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_string(),
        description: String::new(),
        parameters: serde_json::json!({"type": "object", "properties": properties}),
    }
}

fuzz_target!(|text: &str| {
    let tools = [
        tool("shell", serde_json::json!({"command": {"type": "string"}})),
        tool("read_file", serde_json::json!({"path": {"type": "string"}})),
        tool("set_timer", serde_json::json!({"minutes": {"type": "integer"}})),
        tool("time_now", serde_json::json!({})),
    ];
    let found = extract_tool_calls(text, &tools);
    if found.calls.is_empty() {
        assert_eq!(found.text, text, "text changed although no call was found");
    } else {
        assert!(
            found.text.len() <= text.len(),
            "recovery added text: {text:?} -> {:?}",
            found.text
        );
    }
    for call in &found.calls {
        assert!(!call.id.is_empty(), "{text:?}: a call without an id");
        assert!(!call.name.trim().is_empty(), "{text:?}: a call without a name");
    }
    // The same text gives the same calls (ids aside, which may be generated).
    let again = extract_tool_calls(text, &tools);
    assert_eq!(
        again.text, found.text,
        "{text:?}: recovery is not deterministic"
    );
    let names = |r: &cairn_llm::text_tools::RecoveredToolCalls| {
        r.calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&again),
        names(&found),
        "{text:?}: recovery is not deterministic"
    );
});
