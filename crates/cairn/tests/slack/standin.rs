//! A local Slack stand-in, written from Slack's documentation: the Web API
//! over real HTTP on 127.0.0.1 (axum; JSON bodies, bearer tokens, `ok`
//! answers, a 429 with `Retry-After` on demand) and a Socket Mode
//! WebSocket server (tokio-tungstenite) that says `hello`, delivers
//! `events_api` and `interactive` envelopes, records each
//! `{"envelope_id"}` acknowledgement, and can send `disconnect` or drop
//! the socket.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Frame;

pub const BOT_TOKEN: &str = "xoxb-test-bot-token";
pub const APP_TOKEN: &str = "xapp-test-app-token";
pub const BOT_USER: &str = "UBOT0001";
pub const TEAM: &str = "T0TEAM01";

/// A message the bot posted.
#[derive(Debug, Clone)]
pub struct Posted {
    pub channel: String,
    pub thread: Option<String>,
    pub text: String,
    pub blocks: Option<Value>,
}

#[derive(Default)]
pub struct World {
    /// Every Web API call: (method, body).
    pub calls: Vec<(String, Value)>,
    /// Messages posted by the bot, by `ts`.
    pub messages: BTreeMap<String, Posted>,
    next_ts: u64,
    /// Envelope ids sent over the socket, and those acknowledged.
    pub sent: Vec<String>,
    pub acked: BTreeSet<String>,
    /// Sockets that said hello.
    pub connections: usize,
    /// Methods to answer once with HTTP 429.
    limited: BTreeSet<String>,
    /// Files downloaded (with the bot token), by name.
    pub downloads: Vec<String>,
}

/// The bytes of a PNG (its signature is what cairn checks).
pub const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR tiny picture";

enum Command {
    Send(Value),
    Drop,
}

#[derive(Clone)]
struct Shared {
    world: Arc<Mutex<World>>,
    /// The open socket's outbox.
    socket: Arc<Mutex<Option<mpsc::UnboundedSender<Command>>>>,
    ws_url: Arc<Mutex<String>>,
}

pub struct StandIn {
    pub url: String,
    shared: Shared,
    next_envelope: Mutex<u64>,
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string()
}

async fn method(
    State(s): State<Shared>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let wanted = if method == "apps.connections.open" {
        APP_TOKEN
    } else {
        BOT_TOKEN
    };
    if bearer(&headers) != wanted {
        return Json(json!({"ok": false, "error": "invalid_auth"})).into_response();
    }
    let mut w = s.world.lock().unwrap();
    w.calls.push((method.clone(), body.clone()));
    if w.limited.remove(&method) {
        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "").into_response();
    }
    let answer = match method.as_str() {
        "auth.test" => json!({"ok": true, "url": "https://test.slack.com/", "team": "Test",
            "user": "cairn", "team_id": TEAM, "user_id": BOT_USER, "bot_id": "B0BOT001"}),
        "apps.connections.open" => json!({"ok": true, "url": *s.ws_url.lock().unwrap()}),
        "chat.postMessage" => {
            w.next_ts += 1;
            let ts = format!("1000.{:06}", w.next_ts);
            let posted = Posted {
                channel: body["channel"].as_str().unwrap().to_string(),
                thread: body["thread_ts"].as_str().map(str::to_string),
                text: body["text"].as_str().unwrap().to_string(),
                blocks: body.get("blocks").cloned(),
            };
            w.messages.insert(ts.clone(), posted);
            json!({"ok": true, "channel": body["channel"], "ts": ts})
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap();
            match w.messages.get_mut(ts) {
                Some(m) => {
                    m.text = body["text"].as_str().unwrap().to_string();
                    // Slack keeps the blocks unless given others; `[]` removes them.
                    match body.get("blocks") {
                        None => {}
                        Some(b) if b.as_array().is_some_and(|a| a.is_empty()) => m.blocks = None,
                        Some(b) => m.blocks = Some(b.clone()),
                    }
                    json!({"ok": true, "channel": body["channel"], "ts": ts})
                }
                None => json!({"ok": false, "error": "message_not_found"}),
            }
        }
        "reactions.add" | "chat.postEphemeral" => json!({"ok": true}),
        _ => json!({"ok": false, "error": "unknown_method"}),
    };
    Json(answer).into_response()
}

/// A file's `url_private`: the bot token is required, as Slack does.
async fn file(State(s): State<Shared>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    if bearer(&headers) != BOT_TOKEN {
        return StatusCode::FORBIDDEN.into_response();
    }
    s.world.lock().unwrap().downloads.push(name.clone());
    if name.ends_with(".png") {
        PNG.to_vec().into_response()
    } else {
        b"hello from a document".to_vec().into_response()
    }
}

/// One Socket Mode connection: hello, then envelopes out and acks in.
async fn connection(shared: Shared, stream: tokio::net::TcpStream) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let hello = json!({"type": "hello", "num_connections": 1,
        "debug_info": {"host": "standin"}, "connection_info": {"app_id": "A0APP001"}});
    if ws.send(Frame::text(hello.to_string())).await.is_err() {
        return;
    }
    *shared.socket.lock().unwrap() = Some(tx);
    shared.world.lock().unwrap().connections += 1;
    loop {
        tokio::select! {
            command = rx.recv() => match command {
                Some(Command::Send(v)) => {
                    if ws.send(Frame::text(v.to_string())).await.is_err() {
                        break;
                    }
                }
                // Gone without a close handshake, as a dropped network is.
                Some(Command::Drop) | None => break,
            },
            frame = ws.next() => match frame {
                Some(Ok(Frame::Text(text))) => {
                    let v: Value = serde_json::from_str(text.as_str()).unwrap();
                    let id = v["envelope_id"].as_str().unwrap().to_string();
                    shared.world.lock().unwrap().acked.insert(id);
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
}

impl StandIn {
    pub fn start() -> StandIn {
        let shared = Shared {
            world: Arc::default(),
            socket: Arc::default(),
            ws_url: Arc::default(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let state = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let sockets = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let ws_addr = sockets.local_addr().unwrap();
                *state.ws_url.lock().unwrap() = format!("ws://{ws_addr}/link/?ticket=t1");
                let for_sockets = state.clone();
                tokio::spawn(async move {
                    while let Ok((stream, _)) = sockets.accept().await {
                        tokio::spawn(connection(for_sockets.clone(), stream));
                    }
                });
                let app = axum::Router::new()
                    .route("/api/{method}", post(method))
                    .route("/files/{name}", get(file))
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        StandIn {
            url: format!("http://{addr}/api/"),
            shared,
            next_envelope: Mutex::new(0),
        }
    }

    /// Answers the next call of `method` with HTTP 429, `Retry-After: 1`.
    pub fn rate_limit_once(&self, method: &str) {
        self.shared
            .world
            .lock()
            .unwrap()
            .limited
            .insert(method.to_string());
    }

    fn send(&self, envelope: Value) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(tx) = self.shared.socket.lock().unwrap().as_ref()
                && tx.send(Command::Send(envelope.clone())).is_ok()
            {
                return;
            }
            assert!(Instant::now() < deadline, "no socket to send on");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn envelope(&self, kind: &str, payload: Value) -> String {
        let id = {
            let mut n = self.next_envelope.lock().unwrap();
            *n += 1;
            format!("env-{n}")
        };
        self.shared.world.lock().unwrap().sent.push(id.clone());
        self.send(json!({"envelope_id": id, "type": kind, "payload": payload,
            "accepts_response_payload": false, "retry_attempt": 0, "retry_reason": ""}));
        id
    }

    /// A message event from `user` in `channel` (`D…`: a direct
    /// message), in `thread` if any, of type `kind`; its `ts`.
    pub fn event(
        &self,
        kind: &str,
        user: &str,
        channel: &str,
        thread: Option<&str>,
        text: &str,
    ) -> String {
        let ts = {
            let mut w = self.shared.world.lock().unwrap();
            w.next_ts += 1;
            format!("2000.{:06}", w.next_ts)
        };
        self.event_at(kind, user, channel, thread, text, &ts);
        ts
    }

    /// A mention of the bot in `channel`: Slack sends it twice, as a
    /// `message` and as an `app_mention`, with one `ts`.
    pub fn mention(&self, user: &str, channel: &str, text: &str) -> String {
        let text = format!("<@{BOT_USER}> {text}");
        let ts = self.event("message", user, channel, None, &text);
        self.event_at("app_mention", user, channel, None, &text, &ts);
        ts
    }

    fn event_at(
        &self,
        kind: &str,
        user: &str,
        channel: &str,
        thread: Option<&str>,
        text: &str,
        ts: &str,
    ) {
        let mut event = json!({"type": kind, "user": user, "text": text, "ts": ts,
            "event_ts": ts, "channel": channel, "team": TEAM});
        if kind == "message" {
            event["channel_type"] = if channel.starts_with('D') {
                "im"
            } else {
                "channel"
            }
            .into();
        }
        if let Some(thread) = thread {
            event["thread_ts"] = thread.into();
        }
        self.envelope("events_api", json!({"token": "x", "team_id": TEAM, "api_app_id": "A0APP001",
            "type": "event_callback", "event_id": format!("Ev{kind}{ts}"), "event_time": 0, "event": event}));
    }

    /// A direct message from `user` (their DM channel is `D` + their id).
    pub fn dm(&self, user: &str, text: &str) -> String {
        self.event("message", user, &format!("D{user}"), None, text)
    }

    /// A direct message from `user` sharing files (`(name, mimetype)`).
    pub fn share(&self, user: &str, text: &str, files: &[(&str, &str)]) -> String {
        let base = self.url.trim_end_matches("/api/");
        let files: Vec<Value> = files
            .iter()
            .map(|(name, mime)| {
                json!({"id": format!("F{name}"), "name": name, "mimetype": mime,
                "size": 64, "url_private": format!("{base}/files/{name}")})
            })
            .collect();
        let ts = {
            let mut w = self.shared.world.lock().unwrap();
            w.next_ts += 1;
            format!("2000.{:06}", w.next_ts)
        };
        let event = json!({"type": "message", "subtype": "file_share", "user": user, "text": text,
            "ts": ts, "channel": format!("D{user}"), "channel_type": "im", "files": files});
        self.envelope(
            "events_api",
            json!({"team_id": TEAM, "type": "event_callback",
            "event_id": format!("Evf{ts}"), "event": event}),
        );
        ts
    }

    /// `user` types the app's slash command `/cairn text` in `channel`.
    pub fn slash(&self, user: &str, channel: &str, text: &str) {
        self.envelope(
            "slash_commands",
            json!({"token": "x", "team_id": TEAM,
            "channel_id": channel, "user_id": user, "command": "/cairn", "text": text,
            "api_app_id": "A0APP001", "response_url": "https://hooks.slack.invalid/commands/1",
            "trigger_id": "4.5.6"}),
        );
    }

    /// `user` presses the button with `value` on the message `ts`.
    pub fn press(&self, user: &str, channel: &str, ts: &str, value: &str) {
        self.envelope(
            "interactive",
            json!({"type": "block_actions",
            "user": {"id": user, "username": "p", "team_id": TEAM}, "team": {"id": TEAM},
            "container": {"type": "message", "message_ts": ts, "channel_id": channel},
            "channel": {"id": channel, "name": "directmessage"}, "message": {"ts": ts},
            "trigger_id": "1.2.3", "response_url": "https://hooks.slack.invalid/actions/1",
            "actions": [{"action_id": "approval", "block_id": "b", "type": "button",
                "value": value, "action_ts": "3000.1"}]}),
        );
    }

    /// Slack asks for a new connection (as it does every few hours).
    pub fn disconnect(&self) {
        let before = self.world(|w| w.connections);
        self.send(json!({"type": "disconnect", "reason": "refresh_requested",
            "debug_info": {"host": "standin"}}));
        self.until("a new connection", |w| w.connections > before);
    }

    /// The socket drops without a word.
    pub fn drop_socket(&self) {
        let before = self.world(|w| w.connections);
        if let Some(tx) = self.shared.socket.lock().unwrap().take() {
            let _ = tx.send(Command::Drop);
        }
        self.until("a new connection", |w| w.connections > before);
    }

    pub fn world<T>(&self, f: impl FnOnce(&World) -> T) -> T {
        f(&self.shared.world.lock().unwrap())
    }

    /// Waits (up to 60 s) until `f` holds.
    pub fn until(&self, what: &str, f: impl Fn(&World) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.world(&f) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The calls of `method`.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.world(|w| {
            w.calls
                .iter()
                .filter(|(m, _)| m == method)
                .map(|(_, b)| b.clone())
                .collect()
        })
    }

    /// The texts posted to `channel`, in order, as they are now.
    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.world(|w| {
            w.messages
                .values()
                .filter(|m| m.channel == channel)
                .map(|m| m.text.clone())
                .collect()
        })
    }

    /// The reactions set on the message `ts`, in order.
    pub fn reactions(&self, ts: &str) -> Vec<String> {
        self.calls("reactions.add")
            .iter()
            .filter(|c| c["timestamp"] == ts)
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Every envelope sent was acknowledged.
    pub fn all_acked(&self) -> bool {
        self.world(|w| w.sent.iter().all(|id| w.acked.contains(id)))
    }
}
