//! The output channels against local fakes of their services: HTTP servers
//! on 127.0.0.1 that record each request (webhook, Slack, Discord,
//! Telegram, ntfy) and a real SMTP server from PyPI (aiosmtpd, through
//! `CAIRN_TEST_PYTHON`; see `scripts/test-venv.sh`). No network.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod discord;
mod email;
mod log;
mod ntfy;
mod server;
mod slack;
mod telegram;
mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_automation::notify::channels::build;
use cairn_automation::notify::{Channel, ChannelSpec, DeliveryError, parse_channels};
use cairn_core::notification::{DeliveryStatus, Notification, Priority};
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

/// The id every test notification carries.
pub const ID: &str = "0193a5f0-7c1e-7b3a-9d2e-4f5a6b7c8d9e";

/// A notification as the dispatcher would hand it over.
pub fn notification() -> Notification {
    Notification {
        id: Uuid::parse_str(ID).unwrap(),
        user_id: "alice".into(),
        channel: "ops".into(),
        title: "Disk almost full".into(),
        body: "/var is at 93 %.\nClean up the caches.".into(),
        priority: Priority::High,
        tags: vec!["disk".into(), "warning".into()],
        data: Some(json!({"mount": "/var", "used_pct": 93})),
        source: "routine:run-42".into(),
        created_at: Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap(),
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        delivered_at: None,
        last_error: None,
        in_inbox: false,
        read_at: None,
    }
}

/// [`notification`] tagged with an outcome (`ok`, `attention`, `failed`),
/// as a routine run's notification is.
pub fn with_outcome(outcome: &str) -> Notification {
    let mut n = notification();
    n.tags = vec!["routine".into(), outcome.into()];
    n
}

/// One `[channels.ops]` table through the real config path (`${VAR}`
/// expansion from `env`, field checks), then [`build`].
pub fn channel_with_env(table: Value, env: &[(&str, &str)]) -> Arc<dyn Channel> {
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let specs = parse_channels(Some(&json!({ "ops": table })), &env)
        .unwrap()
        .specs;
    let spec: &ChannelSpec = &specs["ops"];
    build(spec, &cairn_llm::tls::client().unwrap())
        .unwrap()
        .unwrap()
}

/// [`channel_with_env`] without variables.
pub fn channel(table: Value) -> Arc<dyn Channel> {
    channel_with_env(table, &[])
}

/// A 127.0.0.1 address nothing listens on (bound, then released).
pub fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// The text of a retryable error, failing otherwise.
pub fn retryable(result: Result<impl std::fmt::Debug, DeliveryError>) -> String {
    match result {
        Err(DeliveryError::Retryable(m)) => m,
        other => panic!("expected Retryable, got {other:?}"),
    }
}

/// The text of a permanent error, failing otherwise.
pub fn permanent(result: Result<impl std::fmt::Debug, DeliveryError>) -> String {
    match result {
        Err(DeliveryError::Permanent(m)) => m,
        other => panic!("expected Permanent, got {other:?}"),
    }
}

#[test]
fn inbox_is_left_to_the_router() {
    let specs = parse_channels(Some(&json!({"mine": {"type": "inbox"}})), &BTreeMap::new())
        .unwrap()
        .specs;
    assert!(
        build(&specs["mine"], &cairn_llm::tls::client().unwrap())
            .unwrap()
            .is_none()
    );
}

#[test]
fn every_other_type_builds_a_channel_of_its_kind() {
    for (table, kind) in [
        (json!({"type": "log"}), "log"),
        (
            json!({"type": "webhook", "url": "http://127.0.0.1:9/h"}),
            "webhook",
        ),
        (
            json!({"type": "slack", "webhook_url": "http://127.0.0.1:9/s"}),
            "slack",
        ),
        (
            json!({"type": "discord", "webhook_url": "http://127.0.0.1:9/d"}),
            "discord",
        ),
        (
            json!({"type": "telegram", "bot_token": "1:x", "chat_id": "5", "api_url": "http://127.0.0.1:9"}),
            "telegram",
        ),
        (
            json!({"type": "ntfy", "server": "http://127.0.0.1:9", "topic": "t"}),
            "ntfy",
        ),
        (
            json!({"type": "email", "host": "127.0.0.1", "security": "none", "from": "a@b.c", "to": "d@e.f"}),
            "email",
        ),
    ] {
        assert_eq!(channel(table).kind(), kind);
    }
}

/// 200 (answering `ok_body`) confirms; 500, 503, 429 and 408 retry; 404,
/// 401 and 400 are permanent, with the status and the receiver's words;
/// nobody listening retries. `table` makes the channel for a base URL.
pub async fn assert_status_mapping(table: impl Fn(&str) -> Value, ok_body: &str) {
    let ok = server::FakeServer::answering(200, ok_body).await;
    let receipt = channel(table(&ok.url(""))).deliver(&notification()).await;
    assert_eq!(receipt.unwrap().detail, "HTTP 200");
    for status in [500, 503, 429, 408] {
        let fake = server::FakeServer::answering(status, "try later").await;
        let error = retryable(channel(table(&fake.url(""))).deliver(&notification()).await);
        assert_eq!(error, format!("HTTP {status}: try later"));
    }
    for status in [404, 401, 400] {
        let fake = server::FakeServer::answering(status, "{\"error\": \"no such hook\"}").await;
        let error = permanent(channel(table(&fake.url(""))).deliver(&notification()).await);
        assert_eq!(
            error,
            format!("HTTP {status}: {{\"error\": \"no such hook\"}}")
        );
    }
    let error = retryable(channel(table(&closed_url())).deliver(&notification()).await);
    assert!(error.contains("onnect"), "{error}");
}
