//! docs/gateway.md's "WebSocket and SSE frames" cannot drift from the
//! gateway: every ```json example there is played against a running
//! gateway. The client frames (`→`) are sent as written (the approval's
//! `id` replaced by the one asked), so the gateway's own frame parser
//! reads them; each server frame (`←`) and event (`SSE`) must have the
//! fields, no more and no fewer, of one the gateway really sent of its type.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and reads the document with blocking std::fs"
)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::SystemClock;
use cairn_core::notification::{NewNotification, Priority};
use cairn_gateway::events::{EventBus, Sources};
use cairn_llm::testing::Scripted;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{TestGateway, settings};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The section's examples: (marker, JSON), in order.
fn examples() -> Vec<(String, Value)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/gateway.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("\n## WebSocket and SSE frames")
        .expect("docs/gateway.md has a \"WebSocket and SSE frames\" section");
    let section = &text[start + 1..];
    let section = match section[3..].find("\n## ") {
        Some(end) => &section[..end + 3],
        None => section,
    };
    let mut out = Vec::new();
    // The first word of the paragraph before each block.
    let mut marker = String::new();
    let mut after_blank = true;
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```json" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            let value: Value = serde_json::from_str(&block.join("\n"))
                .unwrap_or_else(|e| panic!("not JSON after {marker:?} ({e}): {block:?}"));
            assert!(
                ["→", "←", "SSE"].contains(&marker.as_str()),
                "the paragraph before a json block starts with → (client), ← (server) or SSE, not {marker:?}"
            );
            out.push((marker.clone(), value));
        } else if line.trim().is_empty() {
            after_blank = true;
            continue;
        } else if after_blank {
            marker = line
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
        after_blank = false;
    }
    out
}

/// The field names of a frame, with those of its objects (`usage.input_tokens`).
fn shape(value: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Value::Object(map) = value {
        for (key, v) in map {
            out.insert(key.clone());
            if let Value::Object(inner) = v {
                out.extend(inner.keys().map(|k| format!("{key}.{k}")));
            }
        }
    }
    out
}

async fn next_frame(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("the connection is open")
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

async fn until(socket: &mut Socket, kind: &str, seen: &mut Vec<Value>) -> Value {
    loop {
        let frame = next_frame(socket).await;
        seen.push(frame.clone());
        if frame["type"] == kind {
            return frame;
        }
    }
}

async fn send(socket: &mut Socket, frame: &Value) {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

#[tokio::test]
async fn every_documented_frame_is_one_the_gateway_reads_or_sends() {
    let documented = examples();
    let client = |kind: &str| {
        documented
            .iter()
            .find(|(m, v)| m == "→" && v["type"] == kind)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no documented client frame {kind}"))
    };
    let bus = Arc::new(EventBus::new(Arc::new(SystemClock)));
    let gw = TestGateway::start_with(settings(), {
        let bus = bus.clone();
        move |g| g.with_events(bus)
    })
    .await;
    bus.feed(
        Sources {
            notifier: Some(gw.notifier.clone()),
            ..Default::default()
        },
        gw.shutdown.clone(),
    );
    let url = format!("{}/ws/chat", gw.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Authorization",
        HeaderValue::from_str(&format!("Bearer {}", gw.token)).unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut seen = vec![next_frame(&mut socket).await];

    // The exchange the section shows: a message, a tool call approved, the answer.
    gw.llm
        .push(Scripted::tool_call("writer", json!({"path": "notes.md"})));
    gw.llm
        .push(Scripted::text("Done: notes.md is written.").with_chunk_bytes(12));
    send(&mut socket, &client("message")).await;
    let asked = until(&mut socket, "approval_request", &mut seen).await;
    let mut approval = client("approval");
    approval["id"] = asked["id"].clone();
    send(&mut socket, &approval).await;
    until(&mut socket, "done", &mut seen).await;
    // `stop` with no turn running is taken without a word: the next frame
    // answers what follows it.
    send(&mut socket, &client("stop")).await;
    socket.send(Message::Text("not json".into())).await.unwrap();
    until(&mut socket, "error", &mut seen).await;
    gw.notifier
        .send(
            NewNotification {
                user_id: "ada".into(),
                channel: None,
                title: "Laundry".into(),
                body: "The machine is done.".into(),
                priority: Priority::High,
                tags: vec![],
                data: None,
                source: "routine:laundry".into(),
            },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    until(&mut socket, "notification", &mut seen).await;

    let events: Vec<Value> = bus
        .subscribe(Some(0))
        .events
        .iter()
        .map(|e| serde_json::from_str(&e.to_json()).unwrap())
        .collect();
    let mut unmatched = Vec::new();
    for (marker, example) in documented.iter().filter(|(m, _)| m != "→") {
        let real = if marker == "←" { &seen } else { &events };
        let same_type: Vec<&Value> = real
            .iter()
            .filter(|f| f["type"] == example["type"])
            .collect();
        if !same_type.iter().any(|f| shape(f) == shape(example)) {
            unmatched.push(format!(
                "{marker} {example}\n  sent of its type: {}",
                same_type
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ));
        }
    }
    assert!(
        unmatched.is_empty(),
        "documented frames unlike the gateway's:\n{}\n\nall frames sent: {seen:#?}\nevents: {events:#?}",
        unmatched.join("\n")
    );
    // Every kind of server frame the exchange produced is documented.
    let kinds: BTreeSet<&str> = seen.iter().filter_map(|f| f["type"].as_str()).collect();
    for kind in kinds {
        assert!(
            documented
                .iter()
                .any(|(m, v)| m == "←" && v["type"] == kind),
            "the gateway sent a {kind} frame the section does not show"
        );
    }
    gw.stop().await;
}
