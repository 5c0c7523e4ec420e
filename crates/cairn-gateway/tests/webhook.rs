//! `POST /webhook`: an agent turn per message, idempotency keys honoured.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::sync::Arc;

use cairn_core::clock::{Clock, ManualClock, SystemClock};
use cairn_gateway::routes::webhook::CLAIM_LEASE;
use cairn_llm::testing::Scripted;
use cairn_store::IdempotencyClaim;
use serde_json::{Value, json};
use support::agents::{FAMILY_MODEL, with_family};
use support::{TestGateway, error_code, settings};

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
    let first = first.text().await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&first).unwrap(),
        json!({"response": "first answer", "model": "fake-model"})
    );

    let again = send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["content-type"], "application/json");
    // Byte for byte, key order included.
    assert_eq!(again.text().await.unwrap(), first);
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

#[tokio::test]
async fn a_key_left_claimed_by_a_dead_process_is_free_once_its_lease_lapses() {
    let gw = TestGateway::start().await;
    let now = SystemClock.now();
    let (day, lease) = (chrono::Duration::hours(24), chrono::Duration::seconds(60));
    // A daemon claimed "crashed" two minutes ago and was killed mid-turn:
    // its lease lapsed a minute ago.
    gw.store
        .claim_idempotency_key(
            "webhook",
            "crashed",
            "gateway-dead",
            now - chrono::Duration::minutes(2),
            day,
            lease,
        )
        .await
        .unwrap();
    // Another daemon holds "running" right now.
    gw.store
        .claim_idempotency_key("webhook", "running", "gateway-alive", now, day, lease)
        .await
        .unwrap();
    let send = |key: &'static str| {
        gw.post("/webhook")
            .header("X-Idempotency-Key", key)
            .json(&json!({"message": "hello"}))
            .send()
    };
    let (status, code) = error_code(send("running").await.unwrap()).await;
    assert_eq!((status, code.as_str()), (409, "conflict"));

    gw.llm.push(Scripted::text("done at last"));
    let retried = send("crashed").await.unwrap();
    assert_eq!(retried.status(), 200);
    assert_eq!(
        retried.json::<Value>().await.unwrap()["response"],
        "done at last"
    );
    // And it is now answered from the store.
    let again = send("crashed").await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(gw.llm.requests().len(), 1);
    gw.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_long_turn_keeps_renewing_its_claim() {
    let clock = Arc::new(ManualClock::new(SystemClock.now()));
    let options = support::Options {
        clock: clock.clone(),
        ..Default::default()
    };
    let gw = TestGateway::start_opts(options, |g| g).await;
    let lease = CLAIM_LEASE;
    // The turn takes five leases of (paused) time.
    gw.llm
        .push(Scripted::text("slow answer").with_delay(lease * 5));
    let request = gw
        .post("/webhook")
        .header("X-Idempotency-Key", "slow")
        .json(&json!({"message": "hello"}));
    let first = tokio::spawn(request.send());
    // What another process finds when it tries to claim the key now.
    let probe = || {
        gw.store.claim_idempotency_key(
            "webhook",
            "slow",
            "gateway-other",
            clock.now(),
            chrono::Duration::hours(24),
            chrono::Duration::from_std(lease).unwrap(),
        )
    };
    // Until the turn ends, the key is taken.
    for _ in 0..4 {
        tokio::time::sleep(lease).await;
        assert_eq!(probe().await.unwrap(), IdempotencyClaim::InFlight);
    }
    let response = first.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let probe = probe().await.unwrap();
    assert!(matches!(probe, IdempotencyClaim::Done(_)), "{probe:?}");
    gw.stop().await;
}

#[tokio::test]
async fn the_agent_parameter_asks_that_agent_whose_keys_are_its_own() {
    let family_home = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with(settings(), {
        let home = family_home.path().to_path_buf();
        move |g| with_family(g, &home)
    })
    .await;
    let ask = |query: &str| {
        gw.post(&format!("/webhook{query}"))
            .header("X-Idempotency-Key", "same-key")
            .json(&json!({"message": "who are you?"}))
            .send()
    };
    gw.llm.push(Scripted::text("Pip"));
    let family: Value = ask("?agent=family").await.unwrap().json().await.unwrap();
    assert_eq!(family, json!({"response": "Pip", "model": FAMILY_MODEL}));
    // The same key for main is main's: a turn of its own, not family's answer.
    gw.llm.push(Scripted::text("Cairn"));
    let main = ask("").await.unwrap();
    assert!(!main.headers().contains_key("idempotent-replayed"));
    let main: Value = main.json().await.unwrap();
    assert_eq!(main["response"], "Cairn");
    let again = ask("?agent=family").await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let models: Vec<Value> = gw
        .llm
        .requests()
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(models, [json!(FAMILY_MODEL), json!("fake-model")]);

    let response = ask("?agent=nobody").await.unwrap();
    let (status, code) = error_code(response).await;
    assert_eq!((status, code.as_str()), (404, "agent_not_found"));
    assert_eq!(gw.llm.requests().len(), 2);
    gw.stop().await;
}
