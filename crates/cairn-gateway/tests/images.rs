//! Images through the gateway: `/v1` `image_url` parts (data URLs, and
//! http URLs fetched under the network rules) and WebSocket message frames
//! with images, all reaching the model as `image_url` data parts.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use cairn_llm::testing::Scripted;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::TestGateway;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A 1×1 GIF and its data URL.
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";
const GIF_URL: &str = "data:image/gif;base64,R0lGODlhAQABAAAAADs=";

/// The last user message the model received.
fn last_user(gw: &TestGateway) -> Value {
    let body = gw.llm.last_request().unwrap().body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone()
}

fn asks_about(url: &str) -> Value {
    json!({"model": "cairn", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in the picture?"},
        {"type": "image_url", "image_url": {"url": url}}
    ]}]})
}

/// Serves `GIF` at any path on 127.0.0.1, once per connection.
async fn picture_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 2048];
            let _ = socket.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: image/gif\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                GIF.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(GIF).await;
        }
    });
    base
}

#[tokio::test]
async fn v1_accepts_image_url_parts_as_data_urls() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("A pixel."));
    let response = gw
        .post("/v1/chat/completions")
        .json(&asks_about(GIF_URL))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "A pixel.");
    let user = last_user(&gw);
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "What is in the picture?"},
            {"type": "image_url", "image_url": {"url": GIF_URL}}
        ])
    );
    gw.stop().await;
}

#[tokio::test]
async fn v1_fetches_http_image_urls_under_the_network_rules() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("Fetched."));
    let base = picture_server().await;
    let response = gw
        .post("/v1/chat/completions")
        .json(&asks_about(&format!("{base}/pixel.gif")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(last_user(&gw)["content"][1]["image_url"]["url"], GIF_URL);

    // A private address stays refused (only loopback is allowed here), and so does junk.
    for (url, why) in [
        ("http://10.11.12.13/x.png", "private or local"),
        (
            "data:image/png;base64,aGVsbG8=",
            "not a PNG, JPEG, WebP or GIF",
        ),
    ] {
        let response = gw
            .post("/v1/chat/completions")
            .json(&asks_about(url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{url}");
        let body: Value = response.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("messages[0].content[1]"), "{message}");
        assert!(message.contains(why), "{message}");
    }
    assert_eq!(
        gw.llm.requests().len(),
        1,
        "refused requests never reached the model"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_websocket_message_may_carry_images() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("Nice pixel."));
    let mut socket = ws_connect(&gw).await;
    let frame = |m: Message| serde_json::from_str::<Value>(m.to_text().unwrap()).unwrap();
    let message = json!({"type": "message", "content": "look", "images": [GIF_URL]});
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
    loop {
        let f = frame(socket.next().await.unwrap().unwrap());
        if f["type"] == "done" {
            assert_eq!(f["response"], "Nice pixel.");
            break;
        }
        assert_ne!(f["type"], "error", "{f}");
    }
    assert_eq!(last_user(&gw)["content"][1]["image_url"]["url"], GIF_URL);

    let bad =
        json!({"type": "message", "content": "look", "images": ["https://example.com/x.png"]});
    socket
        .send(Message::Text(bad.to_string().into()))
        .await
        .unwrap();
    let f = frame(socket.next().await.unwrap().unwrap());
    assert_eq!(f["type"], "error");
    assert!(
        f.to_string()
            .contains("images[0]: send images as data: URLs"),
        "{f}"
    );
    gw.stop().await;
}

/// A GIF of about `size` bytes (the header, then padding), as a data URL:
/// past the test gateway's 64 KiB body limit once encoded.
fn big_gif_url(size: usize) -> String {
    use base64::Engine;
    let mut bytes = GIF.to_vec();
    bytes.resize(size, 0);
    format!(
        "data:image/gif;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

async fn ws_connect(gw: &TestGateway) -> Socket {
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
    socket
}

/// The next frame that is not a streamed chunk.
async fn ws_frame(socket: &mut Socket) -> Value {
    loop {
        let m = socket.next().await.unwrap().unwrap();
        let f: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        if f["type"] != "chunk" {
            return f;
        }
    }
}

#[tokio::test]
async fn images_may_take_a_websocket_message_past_the_body_limit_text_may_not() {
    let gw = TestGateway::start().await;
    let limit = support::settings().body_limit;
    let picture = big_gif_url(200_000);
    assert!(picture.len() > 3 * limit);
    let mut socket = ws_connect(&gw).await;

    gw.llm.push(Scripted::text("A big pixel."));
    let message = json!({"type": "message", "content": "look", "images": [picture]});
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
    let done = loop {
        let f = ws_frame(&mut socket).await;
        assert_ne!(f["type"], "error", "{f}");
        if f["type"] == "done" {
            break f;
        }
    };
    assert_eq!(done["response"], "A big pixel.");
    assert_eq!(last_user(&gw)["content"][1]["image_url"]["url"], picture);

    // The text beside the images still has to fit the body limit.
    let wordy = json!({"type": "message", "content": "x".repeat(limit), "images": [GIF_URL]});
    socket
        .send(Message::Text(wordy.to_string().into()))
        .await
        .unwrap();
    let f = ws_frame(&mut socket).await;
    assert_eq!(f["type"], "error", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("gateway.body_limit_bytes"),
        "{f}"
    );
    assert_eq!(gw.llm.requests().len(), 1, "the wordy message never ran");
    gw.stop().await;
}

#[tokio::test]
async fn images_may_take_a_v1_request_past_the_body_limit_text_may_not() {
    let gw = TestGateway::start().await;
    let limit = support::settings().body_limit;
    gw.llm.push(Scripted::text("Large."));
    let picture = big_gif_url(200_000);
    let response = gw
        .post("/v1/chat/completions")
        .json(&asks_about(&picture))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(last_user(&gw)["content"][1]["image_url"]["url"], picture);

    let wordy = json!({"model": "cairn", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x".repeat(limit)},
        {"type": "image_url", "image_url": {"url": GIF_URL}}
    ]}]});
    let (status, code) = support::error_code(
        gw.post("/v1/chat/completions")
            .json(&wordy)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (413, "payload_too_large"));

    // Past the body limit and the images' allowance together, nothing is read.
    let image_limit = support::settings().image_limit;
    let huge = asks_about(&big_gif_url(image_limit));
    let (status, _) = support::error_code(
        gw.post("/v1/chat/completions")
            .json(&huge)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 413);
    assert_eq!(gw.llm.requests().len(), 1);
    gw.stop().await;
}
