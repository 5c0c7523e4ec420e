//! Issue 42 through a real gateway on 127.0.0.1 and the fake LLM: at most
//! `gateway.max_images` images a message or request, the dashboard and
//! pairing only for the gateway's own host names (DNS rebinding gets 421
//! and counts toward nothing), and `/webhook` signatures with
//! `gateway.webhook_secret`.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use cairn_core::clock::{Clock, SystemClock};
use cairn_llm::testing::Scripted;
use futures::{SinkExt, StreamExt};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use support::TestGateway;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A 1×1 GIF as a data URL.
const GIF_URL: &str = "data:image/gif;base64,R0lGODlhAQABAAAAADs=";

/// A `/v1` request whose one user message carries `n` images.
fn with_images(n: usize) -> Value {
    let mut content = vec![json!({"type": "text", "text": "What is in these?"})];
    content.extend((0..n).map(|_| json!({"type": "image_url", "image_url": {"url": GIF_URL}})));
    json!({"model": "cairn", "messages": [{"role": "user", "content": content}]})
}

/// The image parts of the last request the model received.
fn images_sent(gw: &TestGateway) -> usize {
    let body = gw.llm.last_request().unwrap().body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|p| p["type"] == "image_url")
        .count()
}

#[tokio::test]
async fn seventeen_images_are_refused_on_v1_naming_the_setting_and_sixteen_go() {
    let gw = TestGateway::start().await;
    let response = gw
        .post("/v1/chat/completions")
        .json(&with_images(17))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("gateway.max_images") && message.contains("17"),
        "{body}"
    );
    assert!(gw.llm.requests().is_empty(), "nothing reached the model");

    // Over several messages of one request, all of which go to the model.
    let mut split = with_images(9);
    let second = split["messages"][0].clone();
    split["messages"] = json!([second.clone(), {"role": "assistant", "content": "ok"}, second]);
    let response = gw
        .post("/v1/chat/completions")
        .json(&split)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(gw.llm.requests().is_empty());

    gw.llm.push(Scripted::text("Sixteen pixels."));
    let response = gw
        .post("/v1/chat/completions")
        .json(&with_images(16))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(images_sent(&gw), 16);
    gw.stop().await;
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next frame that is not a streamed chunk.
async fn next_frame(socket: &mut Socket) -> Value {
    loop {
        let m = socket.next().await.unwrap().unwrap();
        let f: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        if f["type"] != "chunk" {
            return f;
        }
    }
}

#[tokio::test]
async fn the_limit_is_the_setting_and_a_websocket_message_over_it_is_refused() {
    let settings = cairn_core::config::GatewayConfig {
        max_images: 2,
        ..support::settings()
    };
    let gw = TestGateway::start_with(settings, |g| g).await;
    let response = gw
        .post("/v1/chat/completions")
        .json(&with_images(3))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    let mut request = format!("{}/ws/chat", gw.base.replacen("http://", "ws://", 1))
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", gw.token).parse().unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let ready = socket.next().await.unwrap().unwrap();
    assert!(ready.to_text().unwrap().contains("\"ready\""));
    let too_many =
        json!({"type": "message", "content": "look", "images": [GIF_URL, GIF_URL, GIF_URL]});
    socket
        .send(Message::Text(too_many.to_string().into()))
        .await
        .unwrap();
    let f = next_frame(&mut socket).await;
    assert_eq!(f["type"], "error", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("gateway.max_images"),
        "{f}"
    );
    assert!(gw.llm.requests().is_empty(), "nothing reached the model");

    gw.llm.push(Scripted::text("Two pixels."));
    let two = json!({"type": "message", "content": "look", "images": [GIF_URL, GIF_URL]});
    socket
        .send(Message::Text(two.to_string().into()))
        .await
        .unwrap();
    let done = loop {
        let f = next_frame(&mut socket).await;
        assert_ne!(f["type"], "error", "{f}");
        if f["type"] == "done" {
            break f;
        }
    };
    assert_eq!(done["response"], "Two pixels.");
    assert_eq!(images_sent(&gw), 2);
    drop(socket);
    gw.stop().await;
}

#[tokio::test]
async fn a_foreign_host_is_misdirected_and_counts_toward_nothing() {
    let settings = cairn_core::config::GatewayConfig {
        allowed_hosts: vec!["cairn.example.org".into()],
        ..support::settings()
    };
    let gw = TestGateway::start_with(settings, |g| g).await;
    let port = gw.base.rsplit(':').next().unwrap().to_string();
    let evil = format!("evil-rebind.test:{port}");
    let evil_origin = format!("http://{evil}");
    let before = gw.store.pairing_state().await.unwrap().wrong_codes;
    // More than both the 10 wrong codes that lock pairing and the 10
    // attempts a minute one client may make.
    for _ in 0..12 {
        let signed = gw
            .http
            .post(gw.url("/ui/session"))
            .header("Host", &evil)
            .header("Origin", &evil_origin)
            .json(&json!({"code": "ABCDE-FGHJK"}))
            .send()
            .await
            .unwrap();
        assert_eq!(signed.status(), 421);
        let body: Value = signed.json().await.unwrap();
        assert_eq!(body["error"]["code"], "misdirected_request", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("gateway.allowed_hosts"),
            "{body}"
        );
        let paired = gw
            .http
            .post(gw.url("/pair"))
            .header("Host", &evil)
            .header("X-Pairing-Code", "ABCDE-FGHJK")
            .send()
            .await
            .unwrap();
        assert_eq!(paired.status(), 421);
    }
    for path in ["/", "/ui/assets/js/app.js", "/ui/session"] {
        let page = gw
            .http
            .get(gw.url(path))
            .header("Host", &evil)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 421, "{path}");
    }
    assert_eq!(gw.store.pairing_state().await.unwrap().wrong_codes, before);

    // The right code from the gateway's own host still signs in.
    let code = gw.pairing_code().await;
    let signed = gw
        .http
        .post(gw.url("/ui/session"))
        .header("Origin", &gw.base)
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), 200);
    // So do the other names: `localhost`, `[::1]` (by name only: the
    // socket is IPv4) and the listed one, each with its own origin.
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("cairn.example.org:{port}"),
        "cairn.example.org".to_string(),
    ] {
        let code = gw.pairing_code().await;
        let signed = gw
            .http
            .post(gw.url("/ui/session"))
            .header("Host", &host)
            .header("Origin", format!("http://{host}"))
            .json(&json!({"code": code}))
            .send()
            .await
            .unwrap();
        assert_eq!(signed.status(), 200, "{host}");
    }
    // The bearer-token API is not the dashboard's: any Host reaches it.
    let status = gw
        .get("/api/status")
        .header("Host", &evil)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    gw.stop().await;
}

/// `sha256=<hex HMAC-SHA256 of message under secret>`.
fn sign(secret: &str, message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

#[tokio::test]
async fn with_a_webhook_secret_only_signed_messages_reach_the_agent() {
    let settings = cairn_core::config::GatewayConfig {
        webhook_secret: Some("s3cret".into()),
        ..support::settings()
    };
    let gw = TestGateway::start_with(settings, |g| g).await;
    let body = br#"{"message":"hello"}"#;
    let send = |signature: Option<String>, timestamp: Option<String>| {
        let mut request = gw
            .post("/webhook")
            .header("Content-Type", "application/json")
            .body(body.to_vec());
        if let Some(s) = signature {
            request = request.header("X-Webhook-Signature", s);
        }
        if let Some(t) = timestamp {
            request = request.header("X-Cairn-Timestamp", t);
        }
        request.send()
    };
    let refused = [
        (None, "missing X-Webhook-Signature"),
        (Some(sign("other", body)), "does not match"),
        (
            Some(sign("s3cret", b"{\"message\":\"bye\"}")),
            "does not match",
        ),
        (Some("sha256=beef".into()), "malformed"),
        (
            Some(sign("s3cret", body).replacen("sha256=", "", 1)),
            "malformed",
        ),
    ];
    for (signature, why) in refused {
        let response = send(signature.clone(), None).await.unwrap();
        assert_eq!(response.status(), 403, "{signature:?}");
        let answer: Value = response.json().await.unwrap();
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(why),
            "{answer}"
        );
    }
    assert!(gw.llm.requests().is_empty(), "nothing reached the agent");

    gw.llm.push(Scripted::text("signed and answered"));
    let response = send(Some(sign("s3cret", body)), None).await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["response"], "signed and answered");

    // The bearer token is still needed.
    let unauthenticated = gw
        .http
        .post(gw.url("/webhook"))
        .header("Content-Type", "application/json")
        .header("X-Webhook-Signature", sign("s3cret", body))
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);

    // The timestamped form: `<timestamp>.<body>` signed, accepted once, fresh only.
    let now = SystemClock.now().timestamp();
    let stamped = |ts: i64| {
        let mut signed = format!("{ts}.").into_bytes();
        signed.extend_from_slice(body);
        sign("s3cret", &signed)
    };
    gw.llm.push(Scripted::text("stamped and answered"));
    let response = send(Some(stamped(now)), Some(now.to_string()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let replayed = send(Some(stamped(now)), Some(now.to_string()))
        .await
        .unwrap();
    assert_eq!(replayed.status(), 403);
    let stale = send(Some(stamped(now - 600)), Some((now - 600).to_string()))
        .await
        .unwrap();
    assert_eq!(stale.status(), 403);
    // A body signature does not stand for a timestamped one.
    let mixed = send(Some(sign("s3cret", body)), Some((now + 1).to_string()))
        .await
        .unwrap();
    assert_eq!(mixed.status(), 403);
    assert_eq!(
        gw.llm.requests().len(),
        2,
        "only the two signed messages ran"
    );
    gw.stop().await;
}

#[tokio::test]
async fn without_a_webhook_secret_a_signature_is_refused_not_taken_as_checked() {
    let gw = TestGateway::start().await;
    let response = gw
        .post("/webhook")
        .header("X-Webhook-Signature", "sha256=bogus")
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gateway.webhook_secret"),
        "{answer}"
    );
    assert!(gw.llm.requests().is_empty());

    // Unsigned, as before.
    gw.llm.push(Scripted::text("unsigned answer"));
    let response = gw
        .post("/webhook")
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    gw.stop().await;
}
