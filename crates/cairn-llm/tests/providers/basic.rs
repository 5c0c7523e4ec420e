//! Plain, streamed and tool-calling answers, and the request wire shapes.

use cairn_llm::testing::{FAKE_API_KEY, FAKE_MODEL, Protocol, Scripted};
use cairn_llm::{ANTHROPIC_VERSION, ChatMessage, ChatRequest, FinishReason, StreamEvent, ToolCall};
use serde_json::{Value, json};

use crate::common::*;

#[tokio::test]
async fn plain_answer() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::text("Hello there, world"));
        let response = provider(&server, protocol)
            .complete(&ask("hi"))
            .await
            .unwrap();
        assert_eq!(response.text, "Hello there, world", "{protocol:?}");
        assert!(response.tool_calls.is_empty());
        assert_eq!(response.finish_reason, FinishReason::Stop);
        assert_eq!(
            (response.usage.input_tokens, response.usage.output_tokens),
            (10, 5)
        );
        assert!(!response.usage.estimated);
        assert_eq!(response.model, FAKE_MODEL);
        assert_eq!(response.cost_micros, 20);

        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.path, path(protocol));
        assert!(!request.is_stream());
        assert_eq!(request.body["model"], FAKE_MODEL);
        match protocol {
            Protocol::OpenAi => {
                let expected = format!("Bearer {FAKE_API_KEY}");
                assert_eq!(request.header("authorization"), Some(expected.as_str()));
                assert_eq!(
                    request.body["messages"],
                    json!([{"role": "user", "content": "hi"}])
                );
            }
            Protocol::Anthropic => {
                assert_eq!(request.header("x-api-key"), Some(FAKE_API_KEY));
                assert_eq!(request.header("anthropic-version"), Some(ANTHROPIC_VERSION));
                assert_eq!(request.body["max_tokens"], 4096);
                assert_eq!(
                    request.body["messages"],
                    json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
                );
            }
        }
    }
}

#[tokio::test]
async fn streamed_answer_deltas_in_order_and_final_matches() {
    let text = "The quick brown fox jumps over the lazy dog";
    for protocol in BOTH {
        for chunk_bytes in [None, Some(1), Some(7)] {
            let server = server().await;
            let mut scripted = Scripted::text(text);
            if let Some(n) = chunk_bytes {
                scripted = scripted.with_chunk_bytes(n);
            }
            server.push(scripted.clone());
            server.push(scripted);
            let llm = provider(&server, protocol);
            let (events, streamed) = collect(llm.as_ref(), &ask("go")).await;
            let deltas = text_deltas(&events);
            assert_eq!(deltas.len(), 9, "{protocol:?} {chunk_bytes:?}: {deltas:?}");
            assert_eq!(deltas.concat(), text);
            assert_eq!(deltas[0], "The ");
            let whole = llm.complete(&ask("go")).await.unwrap();
            assert_eq!(streamed, whole, "{protocol:?} {chunk_bytes:?}");
            assert!(server.requests()[0].is_stream());
            if protocol == Protocol::OpenAi {
                assert_eq!(
                    server.requests()[0].body["stream_options"]["include_usage"],
                    true
                );
            }
        }
    }
}

#[tokio::test]
async fn one_tool_call_whole_and_streamed() {
    for protocol in BOTH {
        let server = server().await;
        let args = json!({"command": "ls -la", "cwd": "/tmp"});
        server.push(Scripted::tool_call("shell", args.clone()));
        server.push(Scripted::tool_call("shell", args.clone()));
        let llm = provider(&server, protocol);
        let whole = llm.complete(&ask_with_tools("list")).await.unwrap();
        assert_eq!(whole.tool_calls.len(), 1, "{protocol:?}");
        assert_eq!(whole.tool_calls[0].name, "shell");
        assert_eq!(whole.tool_calls[0].arguments, args);
        assert!(!whole.tool_calls[0].id.is_empty());
        assert_eq!(whole.finish_reason, FinishReason::ToolCalls);
        assert_eq!(whole.text, "");

        let (events, streamed) = collect(llm.as_ref(), &ask_with_tools("list")).await;
        assert_eq!(streamed.tool_calls[0].arguments, args);
        assert_eq!(streamed.finish_reason, FinishReason::ToolCalls);
        let mut started = None;
        let mut argument_text = String::new();
        for event in &events {
            match event {
                StreamEvent::ToolCallStart { index, id, name } => {
                    started = Some((*index, id.clone(), name.clone()));
                }
                StreamEvent::ToolCallDelta { index, arguments } => {
                    assert_eq!(*index, 0);
                    argument_text.push_str(arguments);
                }
                _ => {}
            }
        }
        let (index, id, name) = started.expect("a ToolCallStart event");
        assert_eq!((index, name.as_str()), (0, "shell"));
        assert_eq!(id, streamed.tool_calls[0].id);
        assert_eq!(serde_json::from_str::<Value>(&argument_text).unwrap(), args);
    }
}

#[tokio::test]
async fn several_tool_calls_in_one_response() {
    for protocol in BOTH {
        let server = server().await;
        let calls = [
            ("shell", json!({"command": "date"})),
            ("read_file", json!({"path": "notes.md"})),
            ("web_search", json!({"query": "rust sse", "limit": 3})),
        ];
        let scripted = Scripted::text_with_tool_calls("Doing three things.", calls.clone());
        server.push(scripted.clone());
        server.push(scripted);
        let llm = provider(&server, protocol);
        let whole = llm.complete(&ask_with_tools("go")).await.unwrap();
        let (_, streamed) = collect(llm.as_ref(), &ask_with_tools("go")).await;
        for response in [&whole, &streamed] {
            assert_eq!(response.text, "Doing three things.", "{protocol:?}");
            let got: Vec<(&str, &Value)> = response
                .tool_calls
                .iter()
                .map(|c| (c.name.as_str(), &c.arguments))
                .collect();
            let want: Vec<(&str, &Value)> = calls.iter().map(|(n, a)| (*n, a)).collect();
            assert_eq!(got, want);
            let mut ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
            ids.dedup();
            assert_eq!(ids.len(), 3);
        }
        assert_eq!(whole.tool_calls.len(), streamed.tool_calls.len());
    }
}

fn conversation() -> ChatRequest {
    let call = |id: &str, command: &str| ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments: json!({"command": command}),
    };
    ChatRequest::new(vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("what's here?"),
        ChatMessage::assistant_tool_calls("Checking.", vec![call("c1", "ls"), call("c2", "pwd")]),
        ChatMessage::tool_result("c1", "shell", "a.txt"),
        ChatMessage::tool_result("c2", "shell", "/home"),
    ])
    .with_tools(tools())
    .with_temperature(0.25)
    .with_max_tokens(300)
}

#[tokio::test]
async fn anthropic_wire_shape_system_tool_use_and_tool_results() {
    let server = server().await;
    server.push(Scripted::text("a.txt in /home"));
    provider(&server, Protocol::Anthropic)
        .complete(&conversation())
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(body["max_tokens"], 300);
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(
        body["tools"][0],
        json!({"name": "shell", "description": "the shell tool", "input_schema": {"type": "object", "properties": {}}})
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "what's here?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "c1", "name": "shell", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "c2", "name": "shell", "input": {"command": "pwd"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "/home"}
            ]}
        ])
    );
}

#[tokio::test]
async fn openai_wire_shape_tool_role_messages() {
    let server = server().await;
    server.push(Scripted::text("a.txt in /home"));
    provider(&server, Protocol::OpenAi)
        .complete(&conversation())
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 300);
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "shell", "description": "the shell tool",
               "parameters": {"type": "object", "properties": {}}}})
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "what's here?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"pwd\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
            {"role": "tool", "tool_call_id": "c2", "content": "/home"}
        ])
    );
}

#[tokio::test]
async fn model_override_is_sent() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::text("ok"));
        let response = provider(&server, protocol)
            .complete(&ask("x").with_model("other-model"))
            .await
            .unwrap();
        assert_eq!(server.requests()[0].body["model"], "other-model");
        assert_eq!(response.model, "other-model");
    }
}

#[test]
fn server_on_its_own_thread_serves_blocking_callers() {
    let server = cairn_llm::testing::FakeLlmServer::start_on_thread().unwrap();
    server.push(Scripted::text("from a thread"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let response = runtime
        .block_on(provider(&server, Protocol::OpenAi).complete(&ask("hi")))
        .unwrap();
    assert_eq!(response.text, "from a thread");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn held_answers_wait_until_their_group_has_arrived() {
    let server = server().await;
    server.push_all([
        Scripted::text("first").held_until(2),
        Scripted::text("second").held_until(2),
    ]);
    let one = provider(&server, Protocol::OpenAi);
    let other = provider(&server, Protocol::OpenAi);
    // The second answer's request arrives while the first waits; the
    // first is answered only then, though the second is quick to leave.
    let (a_request, b_request) = (ask("a"), ask("b"));
    let (a, b) = tokio::join!(one.complete(&a_request), other.complete(&b_request));
    let mut answers = vec![a.unwrap().text, b.unwrap().text];
    answers.sort();
    assert_eq!(answers, ["first", "second"]);
    assert_eq!(server.requests().len(), 2, "no retries");
    assert_eq!(server.most_in_flight(), 2);
}

#[tokio::test]
async fn anthropic_structured_output_comes_back_as_the_answer_text() {
    let server = server().await;
    let provider = provider(&server, Protocol::Anthropic);
    let mut request = ask("the capital of France, as JSON");
    request.options.response_format = Some(cairn_llm::ResponseFormat::JsonObject);
    for streamed in [false, true] {
        server.push(Scripted::tool_call(
            cairn_llm::STRUCTURED_OUTPUT_TOOL,
            json!({"city": "Paris"}),
        ));
        let response = if streamed {
            collect(provider.as_ref(), &request).await.1
        } else {
            provider.complete(&request).await.unwrap()
        };
        let answer: serde_json::Value = serde_json::from_str(&response.text).unwrap();
        assert_eq!(answer, json!({"city": "Paris"}), "streamed: {streamed}");
        assert!(response.tool_calls.is_empty());
        assert_eq!(response.finish_reason, cairn_llm::FinishReason::Stop);
        let sent = server.last_request().unwrap().body;
        assert_eq!(
            sent["tool_choice"]["name"],
            cairn_llm::STRUCTURED_OUTPUT_TOOL
        );
    }
}
