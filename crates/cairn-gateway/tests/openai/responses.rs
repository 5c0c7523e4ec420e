//! `/v1/responses`: answered, streamed, continued.

use cairn_llm::testing::Scripted;
use serde_json::{Value, json};

use crate::support::TestGateway;

use crate::data_lines;

#[tokio::test]
async fn responses_answer_stream_and_continue_a_conversation() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("Hello Ada.").with_usage(9, 3));
    let first: Value = gw
        .post("/v1/responses")
        .json(&json!({"model": "cairn", "input": "My name is Ada.", "instructions": "Be brief."}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["object"], "response");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["output"][0]["content"][0]["text"], "Hello Ada.");
    assert_eq!(first["usage"]["total_tokens"], 12);

    gw.llm
        .push(Scripted::text("You are Ada.").with_chunk_bytes(4));
    let text = gw
        .post("/v1/responses")
        .json(
            &json!({"model": "cairn", "stream": true, "previous_response_id": first["id"],
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Who am I?"}]}]}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<Value> = data_lines(&text)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "You are Ada.");
    // The model saw the earlier exchange.
    let sent = gw.llm.last_request().unwrap().body;
    let contents: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        contents.contains(&"My name is Ada.") && contents.contains(&"Hello Ada."),
        "{contents:?}"
    );

    let missing = gw
        .post("/v1/responses")
        .json(&json!({"model": "cairn", "input": "x", "previous_response_id": "resp_gone"}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["param"], "previous_response_id");
    gw.stop().await;
}
