//! `POST /webhook`: an agent turn per message, idempotency keys honoured.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use cairn_llm::testing::Scripted;
use serde_json::{Value, json};
use support::{TestGateway, error_code};

#[tokio::test]
async fn a_repeated_idempotency_key_returns_the_first_response() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("first answer"));
    let send = || {
        gw.post("/webhook")
            .header("X-Idempotency-Key", "abc-1")
            .json(&json!({"message": "hello"}))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(!first.headers().contains_key("idempotent-replayed"));
    let first: Value = first.json().await.unwrap();
    assert_eq!(
        first,
        json!({"response": "first answer", "model": "fake-model"})
    );

    let again = send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    assert_eq!(gw.llm.requests().len(), 1, "the agent ran once");
    gw.stop().await;
}

#[tokio::test]
async fn without_a_key_every_message_runs_and_a_bearer_is_needed() {
    let gw = TestGateway::start().await;
    gw.llm
        .push(Scripted::text("one"))
        .push(Scripted::text("two"));
    for expected in ["one", "two"] {
        let body: Value = gw
            .post("/webhook")
            .json(&json!({"message": "hi"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(body["response"], expected);
    }
    let (status, _) = error_code(
        gw.http
            .post(gw.url("/webhook"))
            .json(&json!({"message": "hi"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = error_code(
        gw.post("/webhook")
            .json(&json!({"text": "wrong field"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422);
    // A blank message is refused before any turn (found by schemathesis: it was a 502).
    let requests = gw.llm.requests().len();
    for blank in ["", "  \n"] {
        let (status, code) = error_code(
            gw.post("/webhook")
                .json(&json!({"message": blank}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!((status, code.as_str()), (422, "invalid"));
    }
    assert_eq!(gw.llm.requests().len(), requests);
    gw.stop().await;
}

#[tokio::test]
async fn a_failed_turn_is_sanitized_and_releases_its_key() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::error(
        400,
        r#"{"error":{"message":"bad request at /secret/path/key.txt"}}"#,
    ));
    let send = || {
        gw.post("/webhook")
            .header("X-Idempotency-Key", "retry-me")
            .json(&json!({"message": "hello"}))
            .send()
    };
    let failed = send().await.unwrap();
    assert_eq!(failed.status(), 502);
    let body = failed.text().await.unwrap();
    assert!(!body.contains("/secret/path"), "{body}");
    assert!(body.contains("agent_failed"), "{body}");

    gw.llm.push(Scripted::text("now it works"));
    let retried = send().await.unwrap();
    assert_eq!(retried.status(), 200);
    assert!(!retried.headers().contains_key("idempotent-replayed"));
    assert_eq!(
        retried.json::<Value>().await.unwrap()["response"],
        "now it works"
    );
    gw.stop().await;
}
