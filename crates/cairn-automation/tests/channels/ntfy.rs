//! `type = "ntfy"`: the body, the ntfy headers, the priority scale.

use cairn_core::notification::Priority;
use serde_json::json;

use crate::server::FakeServer;
use crate::{ID, assert_status_mapping, channel, notification, with_outcome};

#[tokio::test]
async fn publishes_the_body_with_title_priority_tags_and_token_headers() {
    let fake = FakeServer::answering(200, r#"{"id":"x1","event":"message"}"#).await;
    let ntfy = channel(json!({
        "type": "ntfy",
        "server": fake.url("/"),
        "topic": "cairn-alerts",
        "token": "tk_abc123",
    }));
    assert_eq!(
        ntfy.deliver(&notification()).await.unwrap().detail,
        "HTTP 200"
    );

    let request = fake.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/cairn-alerts");
    assert_eq!(&request.body[..], b"/var is at 93 %.\nClean up the caches.");
    assert_eq!(request.header("title"), "Disk almost full");
    assert_eq!(request.header("priority"), "4");
    assert_eq!(request.header("tags"), "disk,warning");
    assert_eq!(request.header("authorization"), "Bearer tk_abc123");
    assert_eq!(request.header("x-cairn-notification-id"), ID);
}

#[tokio::test]
async fn priorities_map_to_ntfys_scale_and_optional_headers_stay_out() {
    let fake = FakeServer::answering(200, "{}").await;
    // A server under a path prefix keeps it.
    let ntfy = channel(json!({"type": "ntfy", "server": fake.url("/ntfy"), "topic": "t"}));
    let mut n = notification();
    n.tags.clear();
    for priority in [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Urgent,
    ] {
        n.priority = priority;
        ntfy.deliver(&n).await.unwrap();
    }
    let requests = fake.requests();
    let sent: Vec<&str> = requests.iter().map(|r| r.header("priority")).collect();
    assert_eq!(sent, ["2", "3", "4", "5"]);
    for request in &requests {
        assert_eq!(request.path, "/ntfy/t");
        assert!(request.headers.get("tags").is_none());
        assert!(request.headers.get("authorization").is_none());
    }
}

#[tokio::test]
async fn a_non_ascii_title_is_sent_as_an_encoded_word() {
    let fake = FakeServer::answering(200, "{}").await;
    let ntfy = channel(json!({"type": "ntfy", "server": fake.url(""), "topic": "t"}));
    let mut n = notification();
    n.title = "Été\nchaud".into();
    ntfy.deliver(&n).await.unwrap();
    // base64("Été chaud") = w4l0w6kgY2hhdWQ=
    assert_eq!(
        fake.only_request().header("title"),
        "=?UTF-8?B?w4l0w6kgY2hhdWQ=?="
    );
}

#[tokio::test]
async fn statuses_map_to_delivered_retryable_and_permanent() {
    assert_status_mapping(
        |base| json!({"type": "ntfy", "server": base, "topic": "t"}),
        "{}",
    )
    .await;
}

/// ntfy takes at most 4,096 bytes of message (more becomes an attachment,
/// or a 413 where attachments are off): a long body is cut there, on a
/// character boundary, with an ellipsis, so the person still gets a message.
#[tokio::test]
async fn a_body_over_4096_bytes_is_cut_to_fit() {
    let fake = FakeServer::answering(200, "{}").await;
    let ntfy = channel(json!({"type": "ntfy", "server": fake.url("/"), "topic": "t"}));
    let mut n = notification();
    n.body = "é".repeat(3_000); // 6,000 bytes
    ntfy.deliver(&n).await.unwrap();
    let body = String::from_utf8(fake.only_request().body.to_vec()).unwrap();
    assert!(body.len() <= 4_096, "{} bytes", body.len());
    assert!(
        body.len() > 4_000,
        "cut near the limit: {} bytes",
        body.len()
    );
    assert!(body.ends_with('…'));
    assert!(body.trim_end_matches('…').chars().all(|c| c == 'é'));
}

#[tokio::test]
async fn the_title_header_starts_with_the_outcome_marker() {
    let fake = FakeServer::answering(200, "{}").await;
    let ntfy = channel(json!({"type": "ntfy", "server": fake.url("/"), "topic": "t"}));
    ntfy.deliver(&with_outcome("failed")).await.unwrap();
    // base64 of "❌ Disk almost full", as Python's base64.b64encode gives it.
    assert_eq!(
        fake.only_request().header("title"),
        "=?UTF-8?B?4p2MIERpc2sgYWxtb3N0IGZ1bGw=?="
    );
}
