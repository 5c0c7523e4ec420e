//! A local Discord stand-in, written from Discord's documentation: the
//! REST API v10 over real HTTP on 127.0.0.1 (axum; `Authorization: Bot`,
//! a `DiscordBot` User-Agent, rate limit headers on a bucket, a 429 with
//! `retry_after` on demand) and a gateway WebSocket (tokio-tungstenite)
//! that says Hello, answers Identify with READY, acknowledges heartbeats
//! (op 11), replays missed events on Resume (op 6) then says RESUMED, and
//! can drop the socket, invalidate the session (op 9) or close with a
//! code.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

pub const BOT_TOKEN: &str = "discord-test-bot-token";
pub const BOT_ID: &str = "900000000000000001";
pub const GUILD: &str = "700000000000000001";
/// The bucket of `POST /channels/{id}/messages`: this many calls a window.
const BUCKET_LIMIT: u32 = 2;
const BUCKET_WINDOW: Duration = Duration::from_millis(300);

/// A message the bot posted.
#[derive(Debug, Clone)]
pub struct Posted {
    pub channel: String,
    pub content: String,
    pub reply_to: Option<String>,
    pub components: Option<Value>,
}

#[derive(Default)]
pub struct World {
    /// Every REST call: ("METHOD /path", body).
    pub calls: Vec<(String, Value)>,
    /// Messages the bot posted, by id.
    pub messages: BTreeMap<u64, Posted>,
    next_id: u64,
    /// (message id, emoji) in the order set.
    pub reactions: Vec<(String, String)>,
    /// Channels the bot showed typing in.
    pub typing: Vec<String>,
    /// Interaction callbacks: (interaction id, body).
    pub callbacks: Vec<(String, Value)>,
    /// Identify's and Resume's `d`, heartbeats' `d`.
    pub identifies: Vec<Value>,
    pub resumes: Vec<Value>,
    pub heartbeats: Vec<Value>,
    /// The request paths of gateway connections.
    pub connections: Vec<String>,
    /// The session: its id, its last sequence number, its events.
    pub session: Option<String>,
    pub seq: u64,
    log: Vec<Value>,
    sessions: u64,
    /// Routes to answer once with a 429.
    limited: BTreeSet<String>,
    /// Calls made on the message bucket after it said none were left.
    pub violations: usize,
    /// Answers that said the bucket was empty.
    pub emptied: usize,
    bucket: BTreeMap<String, (Instant, u32)>,
    /// Files downloaded, by name.
    pub downloads: Vec<String>,
    /// Identify is closed with 4014.
    disallow_intents: bool,
    /// Heartbeats go unacknowledged (until the next Resume).
    silent: bool,
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
    /// The live session's socket.
    socket: Arc<Mutex<Option<mpsc::UnboundedSender<Command>>>>,
    ws_base: Arc<Mutex<String>>,
}

pub struct StandIn {
    pub url: String,
    base: String,
    shared: Shared,
    next_id: Mutex<u64>,
}

fn authorized(headers: &HeaderMap) -> bool {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    header("authorization") == format!("Bot {BOT_TOKEN}")
        && header("user-agent").starts_with("DiscordBot (")
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"message": "401: Unauthorized", "code": 0})),
    )
        .into_response()
}

/// Records a call; answers 429 when it was asked to, once.
fn record(s: &Shared, route: &str, body: &Value) -> Option<Response> {
    let mut w = s.world.lock().unwrap();
    w.calls.push((route.to_string(), body.clone()));
    if w.limited
        .remove(route.split(' ').next().unwrap_or_default())
        || w.limited.remove(route)
    {
        return Some(
            (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "1"), ("x-ratelimit-scope", "user")],
                Json(
                    json!({"message": "You are being rate limited.", "retry_after": 0.25,
                    "global": false}),
                ),
            )
                .into_response(),
        );
    }
    None
}

async fn gateway_bot(State(s): State<Shared>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    let url = s.ws_base.lock().unwrap().clone();
    Json(json!({"url": url, "shards": 1, "session_start_limit":
        {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}))
    .into_response()
}

async fn me(State(s): State<Shared>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    record(&s, "GET /users/@me", &Value::Null);
    Json(json!({"id": BOT_ID, "username": "cairn", "discriminator": "0", "bot": true}))
        .into_response()
}

async fn open_dm(State(s): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    record(&s, "POST /users/@me/channels", &body);
    let user = body["recipient_id"].as_str().unwrap_or_default();
    Json(json!({"id": StandIn::dm_channel(user), "type": 1})).into_response()
}

async fn create_message(
    State(s): State<Shared>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    if let Some(limited) = record(&s, &format!("POST /channels/{channel}/messages"), &body) {
        return limited;
    }
    let mut w = s.world.lock().unwrap();
    // A bucket of BUCKET_LIMIT calls a window per channel, as Discord's headers say.
    let now = Instant::now();
    let (start, used) = w.bucket.entry(channel.clone()).or_insert((now, 0));
    if now.duration_since(*start) >= BUCKET_WINDOW {
        (*start, *used) = (now, 0);
    }
    if *used >= BUCKET_LIMIT {
        let after = (BUCKET_WINDOW - now.duration_since(*start)).as_secs_f64();
        w.violations += 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"message": "You are being rate limited.", "retry_after": after, "global": false})),
        )
            .into_response();
    }
    *used += 1;
    let remaining = BUCKET_LIMIT - *used;
    let reset_after = (BUCKET_WINDOW - now.duration_since(*start)).as_secs_f64();
    if remaining == 0 {
        w.emptied += 1;
    }
    let content = body["content"].as_str().unwrap_or_default().to_string();
    assert!(
        content.chars().count() <= 2_000,
        "Discord refuses this: {content}"
    );
    w.next_id += 1;
    let id = 800_000_000_000_000_000 + w.next_id;
    let posted = Posted {
        channel: channel.clone(),
        content: content.clone(),
        reply_to: body["message_reference"]["message_id"]
            .as_str()
            .map(str::to_string),
        components: body.get("components").cloned(),
    };
    w.messages.insert(id, posted);
    (
        [
            ("x-ratelimit-bucket", "msgbucket0001".to_string()),
            ("x-ratelimit-limit", BUCKET_LIMIT.to_string()),
            ("x-ratelimit-remaining", remaining.to_string()),
            ("x-ratelimit-reset-after", format!("{reset_after:.3}")),
        ],
        Json(
            json!({"id": id.to_string(), "channel_id": channel, "content": content,
            "author": {"id": BOT_ID, "bot": true}}),
        ),
    )
        .into_response()
}

async fn edit_message(
    State(s): State<Shared>,
    Path((channel, id)): Path<(String, u64)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    if let Some(limited) = record(
        &s,
        &format!("PATCH /channels/{channel}/messages/{id}"),
        &body,
    ) {
        return limited;
    }
    let mut w = s.world.lock().unwrap();
    let Some(m) = w.messages.get_mut(&id) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Unknown Message", "code": 10008})),
        )
            .into_response();
    };
    if let Some(content) = body["content"].as_str() {
        assert!(content.chars().count() <= 2_000);
        m.content = content.to_string();
    }
    // Components stay unless given; `[]` removes them.
    match body.get("components") {
        Some(c) if c.as_array().is_some_and(|a| a.is_empty()) => m.components = None,
        Some(c) => m.components = Some(c.clone()),
        None => {}
    }
    Json(json!({"id": id.to_string(), "channel_id": channel})).into_response()
}

async fn react(
    State(s): State<Shared>,
    Path((channel, id, emoji)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    record(
        &s,
        &format!("PUT /channels/{channel}/reactions"),
        &Value::Null,
    );
    s.world.lock().unwrap().reactions.push((id, emoji));
    StatusCode::NO_CONTENT.into_response()
}

async fn typing(
    State(s): State<Shared>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    s.world.lock().unwrap().typing.push(channel);
    StatusCode::NO_CONTENT.into_response()
}

async fn callback(
    State(s): State<Shared>,
    Path((id, _token)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    s.world.lock().unwrap().callbacks.push((id, body));
    StatusCode::NO_CONTENT.into_response()
}

/// An attachment on the "CDN": signed URLs, no token needed.
async fn file(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    s.world.lock().unwrap().downloads.push(name.clone());
    if name.ends_with(".png") {
        PNG.to_vec().into_response()
    } else {
        b"hello from a document".to_vec().into_response()
    }
}

fn send(ws_tx: &mpsc::UnboundedSender<Command>, v: Value) {
    let _ = ws_tx.send(Command::Send(v));
}

/// One gateway connection: Hello, then Identify or Resume, heartbeats
/// acknowledged, events out.
async fn connection(shared: Shared, stream: tokio::net::TcpStream) {
    let path = Arc::new(Mutex::new(String::new()));
    let seen = Arc::clone(&path);
    #[expect(
        clippy::result_large_err,
        reason = "the error type is tungstenite's handshake callback's"
    )]
    let callback = move |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                         response| {
        *seen.lock().unwrap() = request.uri().to_string();
        Ok(response)
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let path = path.lock().unwrap().clone();
    shared.world.lock().unwrap().connections.push(path);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let hello = json!({"op": 10, "d": {"heartbeat_interval": 400}, "s": null, "t": null});
    if ws.send(Frame::text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        let frame = tokio::select! {
            command = rx.recv() => match command {
                Some(Command::Send(v)) => {
                    if let Some(code) = v["close"].as_u64() {
                        let frame = CloseFrame { code: (code as u16).into(), reason: "standin".into() };
                        let _ = ws.send(Frame::Close(Some(frame))).await;
                        break;
                    }
                    if ws.send(Frame::text(v.to_string())).await.is_err() {
                        break;
                    }
                    continue;
                }
                // Gone without a close handshake, as a dropped network is.
                Some(Command::Drop) | None => break,
            },
            frame = ws.next() => frame,
        };
        let text = match frame {
            Some(Ok(Frame::Text(text))) => text,
            Some(Ok(_)) => continue,
            _ => break,
        };
        let payload: Value = serde_json::from_str(text.as_str()).unwrap();
        let d = payload["d"].clone();
        match payload["op"].as_u64().unwrap() {
            1 => {
                let mut w = shared.world.lock().unwrap();
                w.heartbeats.push(d);
                if !w.silent {
                    send(&tx, json!({"op": 11}));
                }
            }
            2 => {
                let mut w = shared.world.lock().unwrap();
                w.identifies.push(d.clone());
                if d["token"] != BOT_TOKEN {
                    send(&tx, json!({"close": 4004}));
                    continue;
                }
                if w.disallow_intents {
                    send(&tx, json!({"close": 4014}));
                    continue;
                }
                w.sessions += 1;
                let session = format!("session-{}", w.sessions);
                w.session = Some(session.clone());
                w.seq = 1;
                w.log.clear();
                let resume = format!("{}/resume", shared.ws_base.lock().unwrap());
                send(
                    &tx,
                    json!({"op": 0, "t": "READY", "s": 1, "d": {"v": 10,
                    "user": {"id": BOT_ID, "username": "cairn", "bot": true},
                    "guilds": [{"id": GUILD, "unavailable": true}], "session_id": session,
                    "resume_gateway_url": resume, "application": {"id": BOT_ID, "flags": 0}}}),
                );
                *shared.socket.lock().unwrap() = Some(tx.clone());
            }
            6 => {
                let mut w = shared.world.lock().unwrap();
                w.resumes.push(d.clone());
                w.silent = false;
                let known = w.session.as_deref() == d["session_id"].as_str()
                    && d["seq"].as_u64().is_some_and(|s| s <= w.seq);
                if d["token"] != BOT_TOKEN || !known {
                    send(&tx, json!({"op": 9, "d": false}));
                    continue;
                }
                let after = d["seq"].as_u64().unwrap();
                for event in w.log.iter().filter(|e| e["s"].as_u64() > Some(after)) {
                    send(&tx, event.clone());
                }
                w.seq += 1;
                let seq = w.seq;
                send(&tx, json!({"op": 0, "t": "RESUMED", "s": seq, "d": null}));
                *shared.socket.lock().unwrap() = Some(tx.clone());
            }
            other => panic!("an unexpected gateway op {other}: {payload}"),
        }
    }
}

impl StandIn {
    pub fn start() -> StandIn {
        let shared = Shared {
            world: Arc::default(),
            socket: Arc::default(),
            ws_base: Arc::default(),
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
                *state.ws_base.lock().unwrap() = format!("ws://{}", sockets.local_addr().unwrap());
                let for_sockets = state.clone();
                tokio::spawn(async move {
                    while let Ok((stream, _)) = sockets.accept().await {
                        tokio::spawn(connection(for_sockets.clone(), stream));
                    }
                });
                let app = axum::Router::new()
                    .route("/api/v10/gateway/bot", get(gateway_bot))
                    .route("/api/v10/users/@me", get(me))
                    .route("/api/v10/users/@me/channels", post(open_dm))
                    .route("/api/v10/channels/{channel}/messages", post(create_message))
                    .route(
                        "/api/v10/channels/{channel}/messages/{id}",
                        patch(edit_message),
                    )
                    .route(
                        "/api/v10/channels/{channel}/messages/{id}/reactions/{emoji}/@me",
                        put(react),
                    )
                    .route("/api/v10/channels/{channel}/typing", post(typing))
                    .route(
                        "/api/v10/interactions/{id}/{token}/callback",
                        post(callback),
                    )
                    .route("/attachments/{name}", get(file))
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        StandIn {
            url: format!("http://{addr}/api/v10"),
            base: format!("http://{addr}"),
            shared,
            next_id: Mutex::new(0),
        }
    }

    /// Answers the next call of `route` (`POST`, or `POST /channels/1/messages`) with a 429.
    pub fn rate_limit_once(&self, route: &str) {
        let mut w = self.shared.world.lock().unwrap();
        w.limited.insert(route.to_string());
    }

    /// Identify is closed with 4014 (the Message Content intent is off).
    pub fn disallow_intents(&self) {
        self.shared.world.lock().unwrap().disallow_intents = true;
    }

    fn id(&self) -> String {
        let mut n = self.next_id.lock().unwrap();
        *n += 1;
        (100_000_000_000_000_000 + *n).to_string()
    }

    /// An event of the session: numbered, kept for a resume, and sent if
    /// a socket is live (else replayed when the session is resumed).
    pub fn dispatch(&self, t: &str, d: Value) {
        let event = {
            let mut w = self.shared.world.lock().unwrap();
            w.seq += 1;
            let event = json!({"op": 0, "t": t, "s": w.seq, "d": d});
            w.log.push(event.clone());
            event
        };
        if let Some(tx) = self.shared.socket.lock().unwrap().as_ref() {
            let _ = tx.send(Command::Send(event));
        }
    }

    /// The direct message channel of `user`.
    pub fn dm_channel(user: &str) -> String {
        format!("{user}9")
    }

    fn message(&self, user: &str, channel: &str, guild: bool, text: &str) -> Value {
        let id = self.id();
        let mut m = json!({"id": id, "channel_id": channel, "type": 0, "content": text,
            "author": {"id": user, "username": format!("u{user}"), "discriminator": "0"},
            "mentions": [], "attachments": [], "embeds": [], "tts": false, "pinned": false,
            "mention_everyone": false, "timestamp": "2025-01-01T00:00:00+00:00"});
        if guild {
            m["guild_id"] = GUILD.into();
            m["member"] = json!({"roles": []});
        }
        m
    }

    /// A direct message from `user`; its id.
    pub fn dm(&self, user: &str, text: &str) -> String {
        let m = self.message(user, &Self::dm_channel(user), false, text);
        let id = m["id"].as_str().unwrap().to_string();
        self.dispatch("MESSAGE_CREATE", m);
        id
    }

    /// A direct message from `user` with attachments `(name, content type)`.
    pub fn dm_with_files(&self, user: &str, text: &str, files: &[(&str, &str)]) -> String {
        let mut m = self.message(user, &Self::dm_channel(user), false, text);
        m["attachments"] = files
            .iter()
            .enumerate()
            .map(|(n, (name, kind))| {
                let url = format!("{}/attachments/{name}?ex=1&is=2&hm=3", self.base);
                json!({"id": format!("{n}"), "filename": name, "content_type": kind,
                    "size": 64, "url": url, "proxy_url": url})
            })
            .collect();
        let id = m["id"].as_str().unwrap().to_string();
        self.dispatch("MESSAGE_CREATE", m);
        id
    }

    /// A message in a server channel; `mention`: it mentions the bot;
    /// `reply_to`: it replies to (message id, its author).
    pub fn in_server(
        &self,
        user: &str,
        channel: &str,
        text: &str,
        mention: bool,
        reply_to: Option<(&str, &str)>,
    ) -> String {
        let text = if mention {
            format!("<@{BOT_ID}> {text}")
        } else {
            text.to_string()
        };
        let mut m = self.message(user, channel, true, &text);
        if mention {
            m["mentions"] = json!([{"id": BOT_ID, "username": "cairn", "bot": true}]);
        }
        if let Some((id, author)) = reply_to {
            m["type"] = 19.into();
            m["message_reference"] =
                json!({"message_id": id, "channel_id": channel, "guild_id": GUILD});
            m["referenced_message"] = json!({"id": id, "channel_id": channel, "content": "",
                "author": {"id": author, "bot": author == BOT_ID}});
        }
        if user == BOT_ID {
            m["author"]["bot"] = true.into();
        }
        let id = m["id"].as_str().unwrap().to_string();
        self.dispatch("MESSAGE_CREATE", m);
        id
    }

    /// `user` presses the button `custom_id` on the bot's message `id`;
    /// the interaction's id.
    pub fn press(&self, user: &str, channel: &str, message: u64, custom_id: &str) -> String {
        let id = self.id();
        let content = self.world(|w| w.messages[&message].content.clone());
        self.dispatch(
            "INTERACTION_CREATE",
            json!({"id": id, "application_id": BOT_ID, "type": 3, "token": format!("itok-{id}"),
            "version": 1, "channel_id": channel, "user": {"id": user, "username": "p"},
            "data": {"custom_id": custom_id, "component_type": 2},
            "message": {"id": message.to_string(), "channel_id": channel, "content": content}}),
        );
        id
    }

    /// The socket drops without a word, and stays down until the client
    /// resumes; events meanwhile are kept for the resume.
    pub fn drop_socket(&self) {
        if let Some(tx) = self.shared.socket.lock().unwrap().take() {
            let _ = tx.send(Command::Drop);
        }
    }

    /// Heartbeats go unacknowledged until the next Resume, as on a
    /// connection gone dead without closing.
    pub fn stop_acknowledging(&self) {
        self.shared.world.lock().unwrap().silent = true;
    }

    /// Op 9: the session is invalid and may not be resumed.
    pub fn invalidate_session(&self) {
        if let Some(tx) = self.shared.socket.lock().unwrap().take() {
            let _ = tx.send(Command::Send(json!({"op": 9, "d": false})));
        }
    }

    /// Whether a session is live on a socket.
    pub fn live(&self) -> bool {
        self.shared.socket.lock().unwrap().is_some()
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

    /// The contents posted to `channel`, in order, as they are now.
    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.world(|w| {
            w.messages
                .values()
                .filter(|m| m.channel == channel)
                .map(|m| m.content.clone())
                .collect()
        })
    }

    /// The reactions set on message `id`, in order.
    pub fn reactions(&self, id: &str) -> Vec<String> {
        self.world(|w| {
            w.reactions
                .iter()
                .filter(|(m, _)| m == id)
                .map(|(_, e)| e.clone())
                .collect()
        })
    }
}
