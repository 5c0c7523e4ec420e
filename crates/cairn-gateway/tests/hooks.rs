//! `POST /hooks/routine/{path}`: signed routine webhooks, bearer for
//! routines without a secret, guardrail refusals and the body limit.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use cairn_automation::notify::channels::webhook::signature;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::routine::{Routine, RoutineSpec, SpecFormat};
use serde_json::Value;
use support::{TestGateway, error_code};
use uuid::Uuid;

async fn routine(gw: &TestGateway, yaml: &str) -> Routine {
    let spec = RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap();
    spec.validate().unwrap();
    let r = Routine::new(spec, "ada", SystemClock.now());
    gw.store.create_routine(&r).await.unwrap();
    r
}

fn signed(
    gw: &TestGateway,
    path: &str,
    secret: &str,
    body: &'static [u8],
) -> reqwest::RequestBuilder {
    gw.http
        .post(gw.url(path))
        .header("X-Signature-256", signature(secret, body))
        .body(body)
}

#[tokio::test]
async fn a_correct_signature_fires_and_a_wrong_or_missing_one_does_not() {
    let gw = TestGateway::start().await;
    let r = routine(
        &gw,
        "name: deploys\ntrigger: {type: webhook, path: ci-deploys.main, secret: s3cret}\naction: {type: notification, message: deployed}\nguardrails: {cooldown: 0s, max_concurrent: 50}\n",
    )
    .await;
    let body: &[u8] = br#"{"ref":"main"}"#;
    // The route is a wildcard, so a trailing slash (or any slash) reaches the engine.
    let response = signed(&gw, "/hooks/routine/ci-deploys.main/", "s3cret", body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let accepted: Value = response.json().await.unwrap();
    let run_id: Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    // The run is recorded before the 202.
    let runs = gw.store.list_runs(r.id, 10).await.unwrap();
    assert!(runs.iter().any(|run| run.id == run_id));

    let (status, _) = error_code(
        signed(&gw, "/hooks/routine/ci-deploys.main", "wrong", body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = error_code(
        gw.http
            .post(gw.url("/hooks/routine/ci-deploys.main"))
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    // A bearer token does not replace a routine's signature.
    let (status, _) = error_code(
        gw.post("/hooks/routine/ci-deploys.main")
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = error_code(
        signed(&gw, "/hooks/routine/no/such/path", "s3cret", body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(gw.store.list_runs(r.id, 10).await.unwrap().len(), 1);
    gw.engine.idle().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_routine_without_a_secret_takes_a_bearer_token_and_its_id_or_its_name() {
    let gw = TestGateway::start().await;
    let r = routine(
        &gw,
        "name: open\ntrigger: {type: webhook}\naction: {type: notification, message: hi}\nguardrails: {cooldown: 0s}\n",
    )
    .await;
    let path = format!("/hooks/routine/{}", r.id);
    let (status, _) = error_code(gw.http.post(gw.url(&path)).body("x").send().await.unwrap()).await;
    assert_eq!(status, 401);
    let response = gw.post(&path).body("x").send().await.unwrap();
    assert_eq!(response.status(), 202);
    // Its name (what the dashboard shows) reaches it too; another name does not.
    let response = gw
        .post("/hooks/routine/open")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let (status, _) = error_code(
        gw.post("/hooks/routine/opened")
            .body("x")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    gw.engine.idle().await;
    assert_eq!(gw.store.list_runs(r.id, 10).await.unwrap().len(), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_dedup_refusal_is_409_with_the_reason_and_the_run() {
    let gw = TestGateway::start().await;
    routine(
        &gw,
        "name: dedup\ntrigger: {type: webhook, path: d, secret: k}\naction: {type: notification, message: x}\nguardrails: {dedup_window: 10m, cooldown: 0s, max_concurrent: 5}\n",
    )
    .await;
    let body: &[u8] = br#"{"id":1}"#;
    assert_eq!(
        signed(&gw, "/hooks/routine/d", "k", body)
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let response = signed(&gw, "/hooks/routine/d", "k", body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "conflict");
    assert!(
        error["error"]["details"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("dedup_window"),
        "{error}"
    );
    assert!(error["error"]["details"]["run_id"].is_string(), "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("dedup_window")
    );
    gw.engine.idle().await;
    gw.stop().await;
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let gw = TestGateway::start().await;
    routine(
        &gw,
        "name: big\ntrigger: {type: webhook, path: big, secret: k}\naction: {type: notification, message: x}\n",
    )
    .await;
    let body = vec![b'a'; 64 * 1024 + 1];
    let (status, code) = error_code(
        gw.http
            .post(gw.url("/hooks/routine/big"))
            .header("X-Signature-256", signature("k", &body))
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (413, "payload_too_large"));
    gw.stop().await;
}

#[tokio::test]
async fn the_document_names_the_hook_path() {
    let gw = TestGateway::start().await;
    let doc: Value = gw
        .http
        .get(gw.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in ["/hooks/routine/{path}", "/pair", "/webhook", "/metrics"] {
        assert!(
            doc["paths"][path]["post"].is_object() || doc["paths"][path]["get"].is_object(),
            "{path}"
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn concurrent_duplicates_start_exactly_one_run() {
    // Simultaneous fires are admitted together in one transaction; the
    // guardrails must still see each other's runs.
    let gw = TestGateway::start().await;
    let r = routine(
        &gw,
        "name: burst\ntrigger: {type: webhook, path: burst, secret: k}\naction: {type: notification, message: x}\nguardrails: {dedup_window: 10m, cooldown: 0s, max_concurrent: 100}\n",
    )
    .await;
    let body: &'static [u8] = br#"{"same":true}"#;
    let sends = (0..24).map(|_| signed(&gw, "/hooks/routine/burst", "k", body).send());
    let statuses: Vec<u16> = futures::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 202).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        23,
        "{statuses:?}"
    );
    gw.engine.idle().await;
    // The run, and one skipped run for the 23 refusals with the same
    // reason (refusals are recorded once a minute per reason).
    let runs = gw.store.list_runs(r.id, 100).await.unwrap();
    assert_eq!(runs.len(), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_signed_timestamp_is_accepted_once_and_replays_are_recorded_once_a_minute() {
    let gw = TestGateway::start().await;
    let r = routine(
        &gw,
        "name: stamped\ntrigger: {type: webhook, path: stamped, secret: s3cret}\naction: {type: notification, message: hi}\nguardrails: {cooldown: 0s, max_concurrent: 50}\n",
    )
    .await;
    let body: &[u8] = br#"{"ref":"main"}"#;
    let ts = SystemClock.now().timestamp().to_string();
    let mut signed_bytes = format!("{ts}.").into_bytes();
    signed_bytes.extend_from_slice(body);
    let sig = signature("s3cret", &signed_bytes);
    let send = |ts: &str, sig: &str| {
        gw.http
            .post(gw.url("/hooks/routine/stamped"))
            .header("X-Signature-256", sig)
            .header("X-Cairn-Timestamp", ts)
            .body(body)
            .send()
    };
    assert_eq!(send(&ts, &sig).await.unwrap().status(), 202);
    // Replays: 409, the first recorded as a skipped run, the others not.
    let mut recorded = Vec::new();
    for _ in 0..30 {
        let response = send(&ts, &sig).await.unwrap();
        assert_eq!(response.status(), 409);
        let body: Value = response.json().await.unwrap();
        assert!(
            body["error"]["details"]["reason"]
                .as_str()
                .unwrap()
                .starts_with("replay:"),
            "{body}"
        );
        recorded.push(body["error"]["details"]["run_id"].clone());
    }
    assert!(recorded[0].is_string() && recorded[1..].iter().all(Value::is_null));
    assert_eq!(gw.store.list_runs(r.id, 100).await.unwrap().len(), 2);
    // The body's signature alone does not do with a timestamp, and a
    // timestamp out of the 5-minute window is refused.
    let (status, _) = error_code(send(&ts, &signature("s3cret", body)).await.unwrap()).await;
    assert_eq!(status, 401);
    let old = (SystemClock.now().timestamp() - 301).to_string();
    let mut old_bytes = format!("{old}.").into_bytes();
    old_bytes.extend_from_slice(body);
    let response = send(&old, &signature("s3cret", &old_bytes)).await.unwrap();
    assert_eq!(response.status(), 401);
    let text = response.text().await.unwrap();
    assert!(text.contains("X-Cairn-Timestamp"), "{text}");
    gw.stop().await;
}
