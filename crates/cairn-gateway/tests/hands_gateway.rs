//! Issue 42 through a real gateway on 127.0.0.1 and the fake LLM: at most
//! `gateway.max_images` images a message or request, the dashboard and
//! pairing only for the gateway's own host names (DNS rebinding gets 421
//! and counts toward nothing).
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use cairn_llm::testing::Scripted;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
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
