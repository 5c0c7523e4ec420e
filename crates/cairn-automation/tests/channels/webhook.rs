//! `type = "webhook"`: the JSON payload, the headers, the HMAC signature
//! (checked with Python's `hmac`), the status mapping.

use std::process::Command;

use cairn_automation::notify::channels::webhook::{Webhook, WebhookSpec};
use serde_json::json;

use crate::server::FakeServer;
use crate::{
    ID, assert_status_mapping, channel, channel_with_env, closed_url, notification, retryable,
    with_outcome,
};
use cairn_test_support::python::python;

#[tokio::test]
async fn posts_the_notification_as_json_with_its_id_and_the_extra_headers() {
    let fake = FakeServer::answering(200, "thanks").await;
    let hook = channel(json!({
        "type": "webhook",
        "url": fake.url("/hooks/cairn?team=ops"),
        "headers": {"Authorization": "Token abc", "Content-Type": "text/plain"},
    }));
    let receipt = hook.deliver(&notification()).await.unwrap();
    assert_eq!(receipt.detail, "HTTP 200");

    let request = fake.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/hooks/cairn?team=ops");
    // The extra header cannot replace ours.
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(request.header("authorization"), "Token abc");
    assert_eq!(request.header("x-cairn-notification-id"), ID);
    assert!(request.headers.get("x-cairn-signature-256").is_none());
    assert_eq!(
        request.json(),
        json!({
            "id": ID,
            "title": "Disk almost full",
            "outcome": null,
            "body": "/var is at 93 %.\nClean up the caches.",
            "priority": "high",
            "tags": ["disk", "warning"],
            "data": {"mount": "/var", "used_pct": 93},
            "source": "routine:run-42",
            "created_at": "2026-11-23T12:00:00Z",
        })
    );
}

#[tokio::test]
async fn the_signature_verifies_with_pythons_hmac_over_the_received_body() {
    let Some(python) = python("webhook signature") else {
        return;
    };
    let fake = FakeServer::answering(204, "").await;
    let secret = "s3cret: ünïcödé & spaces";
    let hook = channel_with_env(
        json!({"type": "webhook", "url": fake.url("/signed"), "secret": "${HOOK_SECRET}"}),
        &[("HOOK_SECRET", secret)],
    );
    let mut n = notification();
    n.title = "Été — 🦀 \"quoted\"".into();
    assert_eq!(hook.deliver(&n).await.unwrap().detail, "HTTP 204");

    let request = fake.only_request();
    let dir = tempfile::tempdir().unwrap();
    let body_file = dir.path().join("body");
    std::fs::write(&body_file, &request.body).unwrap();
    let out = Command::new(python)
        .arg("-c")
        .arg(
            "import hashlib, hmac, sys\n\
             body = open(sys.argv[2], 'rb').read()\n\
             print('sha256=' + hmac.new(sys.argv[1].encode('utf-8'), body, hashlib.sha256).hexdigest())",
        )
        .arg(secret)
        .arg(&body_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = String::from_utf8(out.stdout).unwrap();
    assert_eq!(request.header("x-cairn-signature-256"), expected.trim());
    assert_eq!(request.json()["title"], "Été — 🦀 \"quoted\"");
}

#[tokio::test]
async fn statuses_map_to_delivered_retryable_and_permanent() {
    assert_status_mapping(
        |base| json!({"type": "webhook", "url": format!("{base}/hook")}),
        "",
    )
    .await;
}

#[tokio::test]
async fn errors_never_show_the_url() {
    let url = format!("{}/hook?key=hush-hush-123", closed_url());
    let error = retryable(
        channel(json!({"type": "webhook", "url": url}))
            .deliver(&notification())
            .await,
    );
    assert!(!error.contains("hush-hush-123"), "{error}");
}

#[test]
fn debug_shows_neither_the_path_nor_the_extra_headers_nor_the_secret() {
    let spec = WebhookSpec {
        url: "https://hooks.example.org/path-token-1?key=query-token-2".into(),
        headers: [(
            "Authorization".to_string(),
            "Token header-token-3".to_string(),
        )]
        .into(),
        secret: Some("secret-token-4".into()),
    };
    let debug = format!(
        "{:?}",
        Webhook::new(&spec, cairn_llm::tls::client().unwrap()).unwrap()
    );
    assert!(debug.contains("hooks.example.org"), "{debug}");
    for token in [
        "path-token-1",
        "query-token-2",
        "header-token-3",
        "secret-token-4",
    ] {
        assert!(!debug.contains(token), "{debug}");
    }
}

/// A 503 or 429 with `Retry-After: N` (seconds) asks the dispatcher to wait N s.
#[tokio::test]
async fn a_retry_after_header_is_honoured() {
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "120")],
            "busy",
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let hook = channel(json!({"type": "webhook", "url": url}));
    match hook.deliver(&notification()).await {
        Err(cairn_automation::notify::DeliveryError::RetryAfter(message, wait)) => {
            assert_eq!(wait, std::time::Duration::from_secs(120));
            assert!(message.starts_with("HTTP 503"), "{message}");
        }
        other => panic!("expected RetryAfter, got {other:?}"),
    }
    server.abort();
}

#[tokio::test]
async fn the_title_carries_the_outcome_marker_and_the_outcome_its_own_field() {
    let fake = FakeServer::answering(200, "").await;
    let hook = channel(json!({"type": "webhook", "url": fake.url("/h")}));
    hook.deliver(&with_outcome("attention")).await.unwrap();
    let body = fake.only_request().json();
    assert_eq!(body["title"], "🔔 Disk almost full");
    assert_eq!(body["outcome"], "attention");
}
