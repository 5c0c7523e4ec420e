//! `type = "discord"`: Discord's webhook message and its 2,000-character limit.

use serde_json::json;

use crate::server::FakeServer;
use crate::{ID, assert_status_mapping, channel, notification, with_outcome};

#[tokio::test]
async fn posts_content_with_the_title_in_bold_and_no_mentions() {
    let fake = FakeServer::answering(204, "").await;
    let discord =
        channel(json!({"type": "discord", "webhook_url": fake.url("/api/webhooks/1/tok")}));
    assert_eq!(
        discord.deliver(&notification()).await.unwrap().detail,
        "HTTP 204"
    );

    let request = fake.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/api/webhooks/1/tok");
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(request.header("x-cairn-notification-id"), ID);
    assert_eq!(
        request.json(),
        json!({
            "content": "**Disk almost full**\n/var is at 93 %.\nClean up the caches.",
            "allowed_mentions": {"parse": []},
        })
    );
}

#[tokio::test]
async fn long_multibyte_content_is_cut_to_2000_with_an_ellipsis() {
    let fake = FakeServer::answering(204, "").await;
    let discord = channel(json!({"type": "discord", "webhook_url": fake.url("/hook")}));
    let mut n = notification();
    n.title = "Log".into();
    // 2-byte, 3-byte and 4-byte (two UTF-16 units) characters.
    n.body = "é€🦀".repeat(1_000);
    discord.deliver(&n).await.unwrap();

    let content = fake.only_request().json()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        content.encode_utf16().count() <= 2_000,
        "{}",
        content.encode_utf16().count()
    );
    assert!(content.encode_utf16().count() >= 1_998);
    let kept = content.strip_suffix('…').expect("ends with an ellipsis");
    assert!(format!("**Log**\n{}", n.body).starts_with(kept));

    // Exactly at the limit: sent whole.
    let exact = FakeServer::answering(204, "").await;
    let discord = channel(json!({"type": "discord", "webhook_url": exact.url("/hook")}));
    n.title = String::new();
    n.body = "é".repeat(2_000);
    discord.deliver(&n).await.unwrap();
    assert_eq!(exact.only_request().json()["content"], n.body.as_str());
}

#[tokio::test]
async fn statuses_map_to_delivered_retryable_and_permanent() {
    assert_status_mapping(
        |base| json!({"type": "discord", "webhook_url": format!("{base}/api/webhooks/1/t")}),
        "",
    )
    .await;
}

#[tokio::test]
async fn the_bold_title_starts_with_the_outcome_marker() {
    let fake = FakeServer::answering(204, "").await;
    let discord = channel(json!({"type": "discord", "webhook_url": fake.url("/d")}));
    discord.deliver(&with_outcome("attention")).await.unwrap();
    assert_eq!(
        fake.only_request().json()["content"],
        "**🔔 Disk almost full**\n/var is at 93 %.\nClean up the caches."
    );
}
