//! Tool calls written into the text by models without native tool calling.

use cairn_llm::testing::{Protocol, Scripted};
use cairn_llm::{FinishReason, ProviderSettings, build_provider};
use serde_json::json;

use crate::common::*;

const FORMATS: [(&str, &str); 10] = [
    (
        "xml tag",
        "Let me check.\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"uptime\"}}\n</tool_call>",
    ),
    (
        "bare json",
        "Let me check.\n{\"name\": \"shell\", \"arguments\": {\"command\": \"uptime\"}}",
    ),
    (
        "fenced block",
        "Let me check.\n```json\n{\"name\": \"shell\", \"arguments\": \"{\\\"command\\\": \\\"uptime\\\"}\"}\n```",
    ),
    (
        "mistral",
        "Let me check.[TOOL_CALLS] [{\"name\": \"shell\", \"arguments\": {\"command\": \"uptime\"}}]",
    ),
    (
        "mistral v11",
        "Let me check.[TOOL_CALLS]shell[ARGS]{\"command\": \"uptime\"}",
    ),
    (
        "llama function",
        "Let me check.\n<function=shell>{\"command\": \"uptime\"}</function>",
    ),
    (
        "llama python tag",
        "Let me check.\n<|python_tag|>{\"name\": \"shell\", \"parameters\": {\"command\": \"uptime\"}}<|eom_id|>",
    ),
    (
        "invoke xml",
        "Let me check.\n<function_calls>\n<invoke name=\"shell\">\n<parameter name=\"command\">uptime</parameter>\n</invoke>\n</function_calls>",
    ),
    (
        "glm",
        "Let me check.\n<tool_call>shell\n<arg_key>command</arg_key>\n<arg_value>uptime</arg_value>\n</tool_call>",
    ),
    (
        "deepseek",
        "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>shell\n```json\n{\"command\": \"uptime\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ),
];

#[tokio::test]
async fn recovered_in_each_format_whole_and_streamed_both_protocols() {
    for protocol in BOTH {
        for (format, text) in FORMATS {
            let server = server().await;
            server.push(Scripted::text(text));
            server.push(Scripted::text(text));
            let llm = provider(&server, protocol);
            let whole = llm.complete(&ask_with_tools("uptime?")).await.unwrap();
            let (events, streamed) = collect(llm.as_ref(), &ask_with_tools("uptime?")).await;
            for response in [&whole, &streamed] {
                assert_eq!(response.tool_calls.len(), 1, "{protocol:?} {format}");
                assert_eq!(response.tool_calls[0].name, "shell");
                assert_eq!(
                    response.tool_calls[0].arguments,
                    json!({"command": "uptime"})
                );
                assert!(response.tool_calls[0].id.starts_with("call_"));
                assert_eq!(response.text, "Let me check.", "{format}: markup removed");
                assert_eq!(response.finish_reason, FinishReason::ToolCalls);
            }
            // The deltas are the raw text; only the final response is cleaned.
            assert_eq!(text_deltas(&events).concat(), text);
        }
    }
}

#[tokio::test]
async fn not_recovered_without_tools_or_when_disabled() {
    let text = FORMATS[0].1;
    let server = server().await;
    server.push(Scripted::text(text));
    let llm = provider(&server, Protocol::OpenAi);
    let response = llm.complete(&ask("no tools offered")).await.unwrap();
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.text, text);

    server.push(Scripted::text(text));
    let settings = ProviderSettings {
        text_tool_calls: false,
        ..settings(&server, Protocol::OpenAi)
    };
    let response = build_provider(&settings)
        .unwrap()
        .complete(&ask_with_tools("tools offered"))
        .await
        .unwrap();
    assert!(response.tool_calls.is_empty());
}

#[tokio::test]
async fn native_calls_win_over_text_markup() {
    let server = server().await;
    server.push(Scripted::text_with_tool_calls(
        "<tool_call>{\"name\":\"read_file\",\"arguments\":{}}</tool_call>",
        [("shell", json!({"command": "ls"}))],
    ));
    let response = provider(&server, Protocol::Anthropic)
        .complete(&ask_with_tools("x"))
        .await
        .unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "shell");
}
