//! `type = "slack"`: Slack's incoming-webhook message.

use serde_json::json;

use crate::server::FakeServer;
use crate::{
    ID, assert_status_mapping, channel, closed_url, notification, retryable, with_outcome,
};

#[tokio::test]
async fn posts_a_text_message_with_the_title_in_bold() {
    let fake = FakeServer::answering(200, "ok").await;
    let slack = channel(json!({"type": "slack", "webhook_url": fake.url("/services/T1/B2/xyz")}));
    let mut n = notification();
    n.title = "Disk <almost> full".into();
    n.body = "/var & /home at 93 %".into();
    assert_eq!(slack.deliver(&n).await.unwrap().detail, "HTTP 200");

    let request = fake.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/services/T1/B2/xyz");
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(request.header("x-cairn-notification-id"), ID);
    // Slack reads & < > as markup: escaped as its docs ask.
    assert_eq!(
        request.json(),
        json!({"text": "*Disk &lt;almost&gt; full*\n/var &amp; /home at 93 %"})
    );
}

#[tokio::test]
async fn statuses_map_to_delivered_retryable_and_permanent() {
    assert_status_mapping(
        |base| json!({"type": "slack", "webhook_url": format!("{base}/services/x")}),
        "ok",
    )
    .await;
}

#[tokio::test]
async fn errors_never_show_the_webhook_url() {
    let url = format!("{}/services/T1/B2/secretpath", closed_url());
    let error = retryable(
        channel(json!({"type": "slack", "webhook_url": url}))
            .deliver(&notification())
            .await,
    );
    assert!(!error.contains("secretpath"), "{error}");
}

#[tokio::test]
async fn the_bold_title_starts_with_the_outcome_marker() {
    let fake = FakeServer::answering(200, "ok").await;
    let slack = channel(json!({"type": "slack", "webhook_url": fake.url("/s")}));
    slack.deliver(&with_outcome("failed")).await.unwrap();
    assert_eq!(
        fake.only_request().json()["text"],
        "*❌ Disk almost full*\n/var is at 93 %.\nClean up the caches."
    );
}
