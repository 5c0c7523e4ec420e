//! Issue 42 through a real gateway on 127.0.0.1 and the fake LLM: at most
//! `gateway.max_images` images a message or request.
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
