//! Chat completions, model names, client tools, sampling, `/v1/models`.

use std::sync::atomic::Ordering;

use cairn_llm::testing::Scripted;
use serde_json::{Value, json};

use crate::support::TestGateway;

use crate::data_lines;

#[tokio::test]
async fn a_completion_answers_with_the_agent_and_reports_usage() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("Paris.").with_usage(12, 3));
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({
            "model": "fake-model",
            "temperature": 0.2,
            "max_tokens": 50,
            "messages": [
                {"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Capital of France?"},
            ],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "fake-model");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "Paris.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    );

    // The model saw the agent's system prompt with the client's instructions, then the question.
    let sent = gw.llm.last_request().unwrap().body;
    let messages = sent["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(system.contains("Answer in one word."), "{system}");
    assert!(
        system.len() > "Answer in one word.".len() + 50,
        "the agent's own prompt comes first"
    );
    assert_eq!(messages.last().unwrap()["content"], "Capital of France?");
    gw.stop().await;
}

#[tokio::test]
async fn a_streamed_completion_sends_chunks_then_usage_then_done() {
    let gw = TestGateway::start().await;
    gw.llm.push(
        Scripted::text("one two three")
            .with_usage(7, 4)
            .with_chunk_bytes(4),
    );
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({
            "model": "cairn",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "count"}]}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let lines = data_lines(&response.text().await.unwrap());
    assert_eq!(lines.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "one two three");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 11);
    let stop = &chunks[chunks.len() - 2];
    assert_eq!(stop["choices"][0]["finish_reason"], "stop");
    assert!(stop["usage"].is_null(), "only the last chunk has the usage");

    // Without include_usage there is no usage chunk.
    gw.llm.push(Scripted::text("hi"));
    let body = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines = data_lines(&body);
    let last: Value = serde_json::from_str(&lines[lines.len() - 2]).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(last.get("usage").is_none());
    gw.stop().await;
}

#[tokio::test]
async fn other_model_names_are_served_unless_strict_and_unsupported_requests_are_refused() {
    let gw = TestGateway::start().await;
    // LangChain's default name is served by the agent; `model` names who answered.
    gw.llm.push(Scripted::text("hi"));
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "gpt-3.5-turbo", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "fake-model");

    for (request, param) in [
        (
            json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"}],
               "functions": [{"name": "f"}]}),
            "functions",
        ),
        (
            json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"}], "n": 2}),
            "n",
        ),
        (
            json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"},
               {"role": "tool", "tool_call_id": "call_x", "content": "x"}]}),
            "messages[1].tool_call_id",
        ),
        (
            json!({"model": "cairn", "messages": [{"role": "system", "content": "only rules"}]}),
            "messages",
        ),
        (
            json!({"model": "cairn", "messages": [{"role": "user",
               "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"}],
               "tools": [{"type": "function", "function": {"name": "writer"}}]}),
            "tools[0].function.name",
        ),
        (
            json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"}],
               "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "tool_choice",
        ),
    ] {
        let response = gw
            .post("/v1/chat/completions")
            .json(&request)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{request}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert_eq!(body["error"]["param"], param, "{body}");
    }
    assert_eq!(
        gw.llm.requests().len(),
        1,
        "only the first reached the model"
    );
    gw.stop().await;

    let mut strict = crate::support::settings();
    strict.openai_strict_models = true;
    let gw = TestGateway::start_with(strict, |g| g).await;
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    assert_eq!(body["error"]["type"], "not_found_error");
    assert_eq!(body["error"]["param"], "model");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fake-model")
    );
    gw.stop().await;
}

#[tokio::test]
async fn client_tools_end_the_turn_and_their_results_continue_it() {
    let gw = TestGateway::start().await;
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "description": "weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    gw.llm
        .push(Scripted::tool_call("get_weather", json!({"city": "Oslo"})).with_usage(5, 2));
    let body: Value = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "tools": tools, "tool_choice": "auto", "parallel_tool_calls": false,
            "temperature": 0.5, "top_p": 0.25, "max_completion_tokens": 99, "stop": "END", "seed": 3,
            "presence_penalty": 0.5, "frequency_penalty": 0.25,
            "messages": [{"role": "user", "content": "weather in Oslo?"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Oslo"}));
    let sent = gw.llm.last_request().unwrap().body;
    let offered: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"writer") && offered.contains(&"get_weather"),
        "{offered:?}"
    );
    for (key, value) in [
        ("temperature", json!(0.5)),
        ("top_p", json!(0.25)),
        ("max_tokens", json!(99)),
        ("stop", json!(["END"])),
        ("seed", json!(3)),
        ("presence_penalty", json!(0.5)),
        ("frequency_penalty", json!(0.25)),
        ("tool_choice", json!("auto")),
        ("parallel_tool_calls", json!(false)),
    ] {
        assert_eq!(sent[key], value, "{key}");
    }

    // The client runs it and sends the result; the agent answers.
    gw.llm.push(Scripted::text("Sunny in Oslo."));
    let id = call["id"].as_str().unwrap();
    let body: Value = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "tools": tools, "messages": [
            {"role": "user", "content": "weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": id, "content": "sunny"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "Sunny in Oslo.");
    let sent = gw.llm.last_request().unwrap().body;
    let messages = sent["messages"].as_array().unwrap();
    let last = &messages[messages.len() - 1];
    assert_eq!(
        (&last["role"], &last["tool_call_id"], &last["content"]),
        (&json!("tool"), &json!(id), &json!("sunny"))
    );
    assert_eq!(messages[messages.len() - 2]["tool_calls"][0]["id"], id);

    // Streamed, the call arrives as tool_calls deltas with finish_reason tool_calls.
    gw.llm.push(Scripted::tool_call(
        "get_weather",
        json!({"city": "Bergen"}),
    ));
    let text = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "tools": tools, "stream": true,
            "messages": [{"role": "user", "content": "weather in Bergen?"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines = data_lines(&text);
    let chunks: Vec<Value> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = chunks
        .iter()
        .find_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .unwrap();
    assert_eq!(
        (&call["index"], &call["function"]["name"]),
        (&json!(0), &json!("get_weather"))
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    gw.stop().await;
}

/// The text of the number that follows `"key":` in a JSON text.
fn number_text<'a>(raw: &'a str, key: &str) -> &'a str {
    let start = raw.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
    let rest = &raw[start..];
    &rest[..rest.find([',', '}']).unwrap()]
}

/// Sampling numbers reach the provider as the client wrote them: 0.2 is
/// not 0.20000000298023224 (what it becomes through an f32).
#[tokio::test]
async fn sampling_numbers_reach_the_provider_exactly_as_sent() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("ok"));
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "temperature": 0.2, "top_p": 0.9,
            "presence_penalty": 0.1, "frequency_penalty": 0.7,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let raw = gw.llm.last_request().unwrap().raw_body;
    for (key, text) in [
        ("temperature", "0.2"),
        ("top_p", "0.9"),
        ("presence_penalty", "0.1"),
        ("frequency_penalty", "0.7"),
    ] {
        assert_eq!(number_text(&raw, key), text, "{key} in {raw}");
    }
    gw.llm.push(Scripted::text("ok"));
    let response = gw
        .post("/v1/responses")
        .json(&json!({"model": "cairn", "input": "hi", "temperature": 0.3, "top_p": 0.1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let raw = gw.llm.last_request().unwrap().raw_body;
    assert_eq!(number_text(&raw, "temperature"), "0.3", "{raw}");
    assert_eq!(number_text(&raw, "top_p"), "0.1", "{raw}");
    gw.stop().await;
}

#[tokio::test]
async fn tools_that_would_ask_are_declined_and_provider_errors_are_502() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::tool_call("writer", json!({})));
    gw.llm.push(Scripted::text("I could not write."));
    let body: Value = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "messages": [{"role": "user", "content": "write"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "I could not write."
    );
    assert_eq!(
        gw.writer.0.load(Ordering::SeqCst),
        0,
        "nobody could approve it"
    );

    gw.llm.push(Scripted::auth_error());
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "llm_error");
    gw.stop().await;
}

#[tokio::test]
async fn models_lists_the_agents_model_and_the_alias() {
    let gw = TestGateway::start().await;
    let body: Value = gw
        .get("/v1/models")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["fake-model", "cairn"]);
    assert_eq!(body["data"][0]["object"], "model");

    // The streams and this API are in the OpenAPI document, with their security.
    let doc: Value = gw
        .http
        .get(gw.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for (path, method) in [
        ("/v1/chat/completions", "post"),
        ("/v1/models", "get"),
        ("/api/events", "get"),
        ("/ws/chat", "get"),
    ] {
        let op = &doc["paths"][path][method];
        assert!(op["security"][0]["bearer"].is_array(), "{path}: {op}");
    }
    gw.stop().await;
}
