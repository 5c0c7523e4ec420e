//! OpenAI-compatible servers that bend the spec, and odd streams.

use cairn_llm::testing::{Protocol, Scripted};
use cairn_llm::{FinishReason, LlmError};
use futures::StreamExt;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn empty_finish_reason_missing_usage_null_content_extra_fields() {
    let server = server().await;
    server.push(Scripted::raw(
        200,
        r#"{"id":"x","object":"chat.completion","model":"llama3:8b","system_fingerprint":"fp","x_groq":{"id":"q"},
            "choices":[{"index":0,"logprobs":null,"message":{"role":"assistant","content":"plain","refusal":null},"finish_reason":""}]}"#,
    ));
    let response = provider(&server, Protocol::OpenAi)
        .complete(&ask("hello there"))
        .await
        .unwrap();
    assert_eq!(response.text, "plain");
    assert_eq!(response.finish_reason, FinishReason::Unknown);
    assert!(response.usage.estimated, "missing usage is estimated");
    assert!(response.usage.input_tokens > 0 && response.usage.output_tokens > 0);
    assert_eq!(response.model, "llama3:8b");
}

#[tokio::test]
async fn missing_finish_reason_and_null_content_with_tool_calls() {
    let server = server().await;
    server.push(Scripted::raw(
        200,
        r#"{"choices":[{"message":{"content":null,"tool_calls":[
            {"id":"a","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}},
            {"function":{"name":"read_file","arguments":{"path":"x.md"}}}
        ]}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
    ));
    let response = provider(&server, Protocol::OpenAi)
        .complete(&ask_with_tools("go"))
        .await
        .unwrap();
    assert_eq!(response.text, "");
    assert_eq!(response.tool_calls[0].arguments, json!({"command": "ls"}));
    assert_eq!(response.tool_calls[1].arguments, json!({"path": "x.md"}));
    assert!(
        !response.tool_calls[1].id.is_empty(),
        "missing ids are generated"
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (3, 4)
    );
}

#[tokio::test]
async fn arguments_as_string_or_object_whole_and_streamed() {
    let args = json!({"query": "weather", "days": 3});
    for as_object in [false, true] {
        let server = server().await;
        let mut scripted = Scripted::tool_call("web_search", args.clone());
        if as_object {
            scripted = scripted.with_arguments_as_object();
        }
        server.push(scripted.clone());
        server.push(scripted);
        let llm = provider(&server, Protocol::OpenAi);
        let whole = llm.complete(&ask_with_tools("go")).await.unwrap();
        let (_, streamed) = collect(llm.as_ref(), &ask_with_tools("go")).await;
        assert_eq!(whole.tool_calls[0].arguments, args, "object: {as_object}");
        assert_eq!(
            streamed.tool_calls[0].arguments, args,
            "object: {as_object}"
        );
    }
}

#[tokio::test]
async fn duplicate_and_empty_tool_call_ids_are_made_unique() {
    let server = server().await;
    server.push(Scripted::raw(
        200,
        r#"{"choices":[{"message":{"tool_calls":[
            {"id":"","function":{"name":"shell","arguments":"{}"}},
            {"id":"same","function":{"name":"shell","arguments":"{}"}},
            {"id":"same","function":{"name":"shell","arguments":"{}"}}
        ]},"finish_reason":"stop"}]}"#,
    ));
    let response = provider(&server, Protocol::OpenAi)
        .complete(&ask_with_tools("go"))
        .await
        .unwrap();
    let mut ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert!(ids.iter().all(|id| !id.is_empty()));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn hand_written_stream_crlf_comments_glued_lines_no_done() {
    let server = server().await;
    // CRLF line ends, a comment, two events glued without a blank line, no [DONE].
    server.push(
        Scripted::raw_stream(
            ": keep-alive\r\n\r\n\
         data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n\
         data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\
         data: {\"choices\":[{\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}]}\r\n\r\n",
        )
        .with_chunk_bytes(3),
    );
    let llm = provider(&server, Protocol::OpenAi);
    let (events, response) = collect(llm.as_ref(), &ask("hi")).await;
    assert_eq!(text_deltas(&events), ["Hel", "lo", "!"]);
    assert_eq!(response.text, "Hello!");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert!(response.usage.estimated);
}

#[tokio::test]
async fn server_ignoring_stream_flag_still_streams() {
    for protocol in BOTH {
        let server = server().await;
        let whole = match protocol {
            Protocol::OpenAi => {
                r#"{"choices":[{"message":{"content":"whole answer"},"finish_reason":"stop"}]}"#
            }
            Protocol::Anthropic => {
                r#"{"type":"message","content":[{"type":"text","text":"whole answer"}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":2}}"#
            }
        };
        server.push(Scripted::raw(200, whole));
        let llm = provider(&server, protocol);
        let (events, response) = collect(llm.as_ref(), &ask("hi")).await;
        assert_eq!(text_deltas(&events), ["whole answer"]);
        assert_eq!(response.text, "whole answer");
    }
}

#[tokio::test]
async fn unusable_bodies_are_bad_responses() {
    for (protocol, body) in [
        (Protocol::OpenAi, "<html>gateway</html>"),
        (Protocol::OpenAi, r#"{"choices":[]}"#),
        (Protocol::Anthropic, r#"{"id":"msg"}"#),
    ] {
        let server = server().await;
        server.push(Scripted::raw(200, body));
        let error = provider(&server, protocol)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::BadResponse { .. }),
            "{body}: {error:?}"
        );
    }
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::raw_stream(": nothing but a comment\n\n"));
        let llm = provider(&server, protocol);
        let results: Vec<_> = llm.stream(&ask("hi")).await.unwrap().collect().await;
        assert!(
            matches!(results.as_slice(), [Err(LlmError::BadResponse { .. })]),
            "{results:?}"
        );
    }
}

#[tokio::test]
async fn error_object_inside_a_200_body_is_classified() {
    let server = server().await;
    server.push(Scripted::raw(
        200,
        r#"{"error":{"message":"This endpoint's maximum context length is 8192 tokens","code":400}}"#,
    ));
    let error = provider(&server, Protocol::OpenAi)
        .complete(&ask("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::ContextLengthExceeded { .. }),
        "{error:?}"
    );
}
