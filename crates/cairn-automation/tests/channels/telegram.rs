//! `type = "telegram"`: `sendMessage`, the Bot API's `"ok"`, the 4,096
//! limit, and a token that never leaks.

use cairn_automation::notify::channels::telegram::{Telegram, TelegramSpec};
use serde_json::{Value, json};

use crate::server::FakeServer;
use crate::{
    ID, assert_status_mapping, channel, closed_url, notification, permanent, retryable,
    with_outcome,
};

const TOKEN: &str = "123456:AAH-very-secret-token";
const OK: &str = r#"{"ok":true,"result":{"message_id":7}}"#;

fn telegram(api_url: &str) -> Value {
    json!({"type": "telegram", "bot_token": TOKEN, "chat_id": "-1001234", "api_url": api_url})
}

#[tokio::test]
async fn posts_send_message_with_chat_id_and_text() {
    let fake = FakeServer::answering(200, OK).await;
    let bot = channel(telegram(&fake.url("/")));
    assert_eq!(
        bot.deliver(&notification()).await.unwrap().detail,
        "HTTP 200"
    );

    let request = fake.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, format!("/bot{TOKEN}/sendMessage"));
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(request.header("x-cairn-notification-id"), ID);
    assert_eq!(
        request.json(),
        json!({
            "chat_id": "-1001234",
            "text": "Disk almost full\n\n/var is at 93 %.\nClean up the caches.",
        })
    );
}

#[tokio::test]
async fn ok_false_with_200_is_not_delivered() {
    let fake = FakeServer::answering(
        200,
        r#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#,
    )
    .await;
    let error = permanent(
        channel(telegram(&fake.url("")))
            .deliver(&notification())
            .await,
    );
    assert!(error.contains("chat not found"), "{error}");

    let fake = FakeServer::answering(200, r#"{"ok":false}"#).await;
    retryable(
        channel(telegram(&fake.url("")))
            .deliver(&notification())
            .await,
    );

    let fake = FakeServer::answering(200, "<html>proxy page</html>").await;
    retryable(
        channel(telegram(&fake.url("")))
            .deliver(&notification())
            .await,
    );
}

#[tokio::test]
async fn long_multibyte_text_is_cut_to_4096_with_an_ellipsis() {
    let fake = FakeServer::answering(200, OK).await;
    let bot = channel(telegram(&fake.url("")));
    let mut n = notification();
    n.body = "ж🦀€".repeat(2_000);
    bot.deliver(&n).await.unwrap();

    let text = fake.only_request().json()["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.encode_utf16().count() <= 4_096,
        "{}",
        text.encode_utf16().count()
    );
    assert!(text.encode_utf16().count() >= 4_094);
    let kept = text.strip_suffix('…').expect("ends with an ellipsis");
    assert!(format!("Disk almost full\n\n{}", n.body).starts_with(kept));
}

#[tokio::test]
async fn statuses_map_to_delivered_retryable_and_permanent() {
    assert_status_mapping(telegram, OK).await;
}

#[tokio::test]
async fn the_token_never_appears_in_errors_or_debug() {
    // A receiver that echoes the path, token included, in its answer.
    let fake = FakeServer::start(|r| {
        (
            404,
            format!("{{\"ok\":false,\"description\":\"no route {}\"}}", r.path),
        )
    })
    .await;
    let bot = channel(telegram(&fake.url("")));
    let echoed = bot.deliver(&notification()).await.unwrap_err();
    assert!(
        fake.only_request().path.contains(TOKEN),
        "the fake saw the token"
    );

    let refused = channel(telegram(&closed_url()))
        .deliver(&notification())
        .await
        .unwrap_err();
    for error in [echoed, refused] {
        for text in [error.to_string(), format!("{error:?}")] {
            assert!(!text.contains(TOKEN), "{text}");
            assert!(!text.contains("AAH-very-secret"), "{text}");
        }
    }
    let spec = TelegramSpec {
        bot_token: TOKEN.into(),
        chat_id: "-1001234".into(),
        api_url: fake.url(""),
        inbound: false,
        allowed_users: Vec::new(),
    };
    let debug = format!(
        "{:?}",
        Telegram::new(&spec, cairn_llm::tls::client().unwrap())
    );
    assert!(!debug.contains(TOKEN), "{debug}");
}

/// Flood control: a 429 says how long to wait, and the next attempt waits that.
#[tokio::test]
async fn a_429_with_retry_after_asks_the_dispatcher_to_wait() {
    let fake = FakeServer::answering(
        429,
        r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#,
    )
    .await;
    match channel(telegram(&fake.url("")))
        .deliver(&notification())
        .await
    {
        Err(cairn_automation::notify::DeliveryError::RetryAfter(message, wait)) => {
            assert_eq!(wait, std::time::Duration::from_secs(7));
            assert!(message.contains("429"), "{message}");
        }
        other => panic!("expected RetryAfter, got {other:?}"),
    }
}

#[tokio::test]
async fn the_first_line_starts_with_the_outcome_marker() {
    let fake = FakeServer::answering(200, OK).await;
    channel(telegram(&fake.url("/")))
        .deliver(&with_outcome("ok"))
        .await
        .unwrap();
    assert_eq!(
        fake.only_request().json()["text"],
        "✅ Disk almost full\n\n/var is at 93 %.\nClean up the caches."
    );
}
