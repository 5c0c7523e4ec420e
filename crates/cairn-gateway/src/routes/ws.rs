//! `GET /ws/chat`: chat with the agent over a WebSocket.
//!
//! The token comes in `Authorization: Bearer …` or, for browsers (which
//! cannot set headers on a WebSocket), as the subprotocol `bearer.<token>`,
//! which the server echoes so the browser accepts the connection.
//!
//! Each connection is its own chat session: channel `ws:<conversation>`,
//! where the conversation is the `conversation` query parameter (to come
//! back to one after a reconnect) or a fresh id, announced in the first
//! frame (`ready`). Sessions are keyed by channel, so two open connections
//! never interrupt each other's turns; a connection that sends a message
//! while its own turn runs interrupts that turn, as every channel does.
//!
//! The `agent` query parameter picks the agent (`[[agents]]`; `main`
//! without it); an agent not configured is 404 `agent_not_found`. Another
//! agent's conversations are its own: their channel is
//! `ws:<agent>:<conversation>`, so the same conversation id under another
//! agent is another session, never this one continued.
//!
//! A text message longer than `gateway.body_limit_bytes` is refused with an
//! `error` frame (the connection stays open) and never reaches the agent,
//! unless its images' `data:` URLs make up the difference, within
//! `gateway.image_limit_bytes` (see [`crate::image_allowance`]); one longer
//! than four times the body limit (at least 1 MiB, at least both limits
//! together) closes the connection.
//!
//! Client frames: `{"type":"message","content":…}` (with optional
//! `"images":["data:image/png;base64,…",…]`: PNG, JPEG, WebP or GIF, at
//! most 5 MiB each, stored with the turn in the workspace's media folder) and
//! `{"type":"approval","id":…,"decision":"approve|deny|always"}` and
//! `{"type":"stop"}` (interrupts the turn in progress). Server
//! frames: `ready`, `chunk` (streamed text), `tool_call`, `tool_result`,
//! `approval_request` (with the id to answer), `notification` (the person's
//! notifications as they are recorded), `done` (the full response and
//! usage) and `error` (a bad frame or a failed turn; the connection stays
//! open). The server pings every 30 s and closes a connection that sent
//! nothing (not even a pong) for two intervals; an approval not answered within
//! `agent.approval_timeout_secs` (120 s) is declined. The connection closes
//! when the daemon stops. When a background task of the conversation ends
//! while no turn runs, the agent reacts on its own: that turn's frames end
//! with a `done` marked `"automatic": true`. Revoking the token (or its
//! expiry) closes the connection within seconds (close code 1008).
//!
//! docs/gateway.md, "WebSocket and SSE frames", shows each frame in an
//! example exchange; `tests/doc_frames.rs` plays it against the gateway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use cairn_agent::agent_loop::LoopEvent;
use cairn_agent::chat::{ChatService, ChatSink, Inbound, Reply};
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver, ToolStatus};
use cairn_store::ApiToken;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth;
use crate::dashboard::session;
use crate::error::{ApiError, ErrorBody};
use crate::events::{EventBus, NOTIFICATION_RECORDED};
use crate::image_allowance;
use crate::state::AppState;

/// How often the server pings an open connection.
pub const PING_EVERY: Duration = Duration::from_secs(30);

/// How often an idle connection looks for finished background tasks of its
/// conversation (one cheap read), so the agent's reaction arrives unasked.
const NOTICE_POLL: Duration = Duration::from_millis(500);

/// Subprotocol prefix carrying the token.
const BEARER_PROTOCOL: &str = "bearer.";

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(chat_socket))
}

/// Query parameters of `/ws/chat`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChatQuery {
    /// Continue this conversation (letters, digits, `-`, `_`; at most 64);
    /// without it the connection starts a new one.
    pub conversation: Option<String>,
    /// The agent to chat with (an `[[agents]]` id); `main` without it.
    pub agent: Option<String>,
}

/// A frame from the client.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientFrame {
    Message {
        content: String,
        #[serde(default)]
        images: Vec<String>,
    },
    Approval {
        id: String,
        decision: Decision,
    },
    /// Stops the turn in progress (the dashboard's Stop button).
    Stop,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Decision {
    Approve,
    Deny,
    Always,
}

/// Chat with the agent over a WebSocket. Every frame, with an example
/// exchange, is in docs/gateway.md, "WebSocket and SSE frames" (tested
/// against this server). The token may also come as the subprotocol `bearer.<token>`.
#[utoipa::path(get, path = "/ws/chat", tag = "chat",
    params(ChatQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket handshake, or a bad conversation id", body = ErrorBody),
        (status = 401, description = "Missing or bad token", body = ErrorBody),
        (status = 404, description = "No such agent (`agent_not_found`, naming the agents)", body = ErrorBody),
        (status = 503, description = "No LLM is configured", body = ErrorBody)),
    security(("bearer" = [])))]
async fn chat_socket(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ChatQuery>, axum::extract::rejection::QueryRejection>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    match accept(state, headers, query, upgrade).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn accept(
    state: AppState,
    headers: HeaderMap,
    query: Result<Query<ChatQuery>, axum::extract::rejection::QueryRejection>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let (token, protocol) = match token_of(&headers) {
        Some((token, protocol)) => (auth::authenticate(&state, &token).await?, protocol),
        // The dashboard's cookie: its handshake must come from its own origin.
        None => match session::session_token(&headers) {
            Some(token) => (
                session::authenticate(&state, &headers, &axum::http::Method::GET, token, true)
                    .await?,
                None,
            ),
            None => {
                return Err(ApiError::unauthorized(
                    "missing bearer token: send Authorization: Bearer <token> or the subprotocol bearer.<token>",
                ));
            }
        },
    };
    state.chat()?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let chat = state.chat_of(query.agent.as_deref())?;
    let agent = query.agent.filter(|a| a != cairn_agent::agents::MAIN);
    let conversation = match query.conversation {
        Some(id) if valid_conversation(&id) => id,
        Some(_) => {
            return Err(ApiError::bad_request(
                "conversation must be 1 to 64 letters, digits, '-' or '_'",
            ));
        }
        None => uuid::Uuid::new_v4().simple().to_string(),
    };
    let mut upgrade = upgrade.map_err(|e| {
        ApiError::bad_request(format!("expected a WebSocket handshake: {}", e.body_text()))
    })?;
    if let Some(protocol) = protocol {
        upgrade = upgrade.protocols([protocol]);
    }
    // Messages up to this are read and refused with an error frame when
    // past the body limit; a bigger one ends the connection unread.
    let hard_cap = state
        .settings()
        .body_limit
        .saturating_mul(4)
        .max(1 << 20)
        .max(image_allowance::read_limit(state.settings()));
    upgrade = upgrade.max_message_size(hard_cap).max_frame_size(hard_cap);
    let channel = channel_of(agent.as_deref(), &conversation);
    let talk = Talk {
        chat,
        agent: agent.unwrap_or_else(|| cairn_agent::agents::MAIN.to_string()),
        channel,
        conversation,
    };
    Ok(upgrade.on_upgrade(move |socket| serve(socket, state, token, talk)))
}

/// A client frame, or why it is refused. One within the body limit is
/// parsed as it is; a longer one only when its images' `data:` URLs make up
/// the difference (see [`crate::image_allowance`]), and refused unparsed
/// past the limits together.
fn parse_frame(
    settings: &cairn_core::config::GatewayConfig,
    text: &str,
) -> Result<Result<ClientFrame, serde_json::Error>, String> {
    if text.len() <= settings.body_limit {
        return Ok(serde_json::from_str(text));
    }
    // Parsed only within both limits together, to see what its images make up.
    let value = (text.len() <= image_allowance::read_limit(settings))
        .then(|| serde_json::from_str::<serde_json::Value>(text).ok())
        .flatten();
    let images = value.as_ref().map_or(0, image_allowance::in_frame);
    image_allowance::check(settings, "message", text.len(), images)
        .map_err(|why| format!("{why}; it was not sent to the agent"))?;
    Ok(value.map_or_else(|| serde_json::from_str(text), serde_json::from_value))
}

/// The chat session's channel of `conversation` with `agent` (`None`: main).
pub(crate) fn channel_of(agent: Option<&str>, conversation: &str) -> String {
    match agent.filter(|a| *a != cairn_agent::agents::MAIN) {
        Some(agent) => format!("ws:{agent}:{conversation}"),
        None => format!("ws:{conversation}"),
    }
}

pub(crate) fn valid_conversation(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The token, and the subprotocol to echo when it came as one.
fn token_of(headers: &HeaderMap) -> Option<(String, Option<String>)> {
    if let Some(value) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some((scheme, token)) = value.split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
        && !token.trim().is_empty()
    {
        return Some((token.trim().to_string(), None));
    }
    headers
        .get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find_map(|p| {
            p.strip_prefix(BEARER_PROTOCOL)
                .filter(|t| !t.is_empty())
                .map(|t| (t.to_string(), Some(p.to_string())))
        })
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<ApprovalAnswer>>>>;

/// The connection seen from a chat turn: frames out, approvals asked.
struct Sink {
    out: mpsc::UnboundedSender<Value>,
    pending: Pending,
    timeout: Duration,
    events: Arc<EventBus>,
    channel: String,
    conversation: String,
}

impl Sink {
    fn send(&self, frame: Value) {
        // The connection may be gone; the turn finishes regardless.
        let _ = self.out.send(frame);
    }
}

impl ChatSink for Sink {
    fn on_event(&self, event: LoopEvent) {
        self.events
            .publish_tool(&event, &self.channel, &self.conversation);
        match event {
            LoopEvent::TextDelta(text) => self.send(json!({"type": "chunk", "content": text})),
            LoopEvent::ToolStarted { call_id, tool } => {
                self.send(json!({"type": "tool_call", "call_id": call_id, "tool": tool}));
            }
            LoopEvent::ToolFinished {
                call_id,
                tool,
                status,
            } => self.send(json!({
                "type": "tool_result", "call_id": call_id, "tool": tool, "status": status.as_str(),
            })),
            _ => {}
        }
    }

    fn streaming(&self) -> bool {
        true
    }

    fn approver(&self) -> Option<&dyn Approver> {
        Some(self)
    }
}

#[async_trait]
impl Approver for Sink {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        // Removed however this ends, also when the turn is interrupted and
        // this future dropped, so a late answer is told nothing waits.
        let _waiting = Waiting(&self.pending, id.clone());
        self.send(json!({
            "type": "approval_request", "id": id, "call_id": request.call_id,
            "tool": request.tool, "risk": request.risk, "arguments": request.arguments,
            "summary": request.summary, "timeout_secs": self.timeout.as_secs(),
        }));
        let answer = tokio::select! {
            // A dropped sender (the connection went) is a no.
            answer = rx => answer.unwrap_or(ApprovalAnswer::No),
            () = tokio::time::sleep(self.timeout) => ApprovalAnswer::Expired(self.timeout),
        };
        if matches!(answer, ApprovalAnswer::No | ApprovalAnswer::Expired(_)) {
            // The loop reports only calls that run; say here that this one will not.
            let declined = LoopEvent::ToolFinished {
                call_id: request.call_id.clone(),
                tool: request.tool.clone(),
                status: ToolStatus::Declined,
            };
            self.on_event(declined);
        }
        answer
    }

    /// The client connected answers each request.
    fn person_present(&self) -> bool {
        true
    }
}

/// Takes an approval request off the waiting list when dropped.
struct Waiting<'a>(&'a Pending, String);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.1);
    }
}

/// Whom a connection talks to, and where: the agent's chat service, its
/// id, and the conversation's channel.
struct Talk {
    chat: Arc<ChatService>,
    agent: String,
    channel: String,
    conversation: String,
}

/// Runs one connection until the client leaves, its token is revoked or
/// expires, or the daemon stops.
async fn serve(socket: WebSocket, state: AppState, token: ApiToken, talk: Talk) {
    let stream = state.open_stream(&token);
    let (mut socket_tx, mut socket_rx) = socket.split();
    let (out, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let agent = talk.agent.clone();
    let mut conn = Connection::new(state, talk, out);
    let mut bus = conn.state.events().subscribe(None).live;
    let ping_every = conn.state.ws_ping();
    let mut ping = tokio::time::interval(ping_every);
    ping.tick().await;
    // Any frame from the client (a pong included) shows it is still there.
    let mut last_heard = tokio::time::Instant::now();
    let mut notices = tokio::time::interval(NOTICE_POLL);
    notices.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    conn.send(json!({
        "type": "ready", "conversation": conn.conversation, "channel": conn.channel, "agent": agent,
    }));
    loop {
        tokio::select! {
            () = stream.ended().cancelled() => {
                let _ = socket_tx.send(Message::Close(Some(conn.ended()))).await;
                break;
            }
            frame = socket_rx.next() => {
                if let Some(Ok(_)) = &frame {
                    last_heard = tokio::time::Instant::now();
                }
                match frame {
                    Some(Ok(Message::Text(text))) => conn.on_text(text.as_str()),
                    Some(Ok(Message::Binary(_))) => {
                        conn.send(error_frame("binary frames are not understood; send JSON text frames"));
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                    Some(Err(e)) => {
                        close_broken(&mut socket_tx, &e).await;
                        break;
                    }
                    Some(Ok(Message::Close(_))) | None => break,
                }
            }
            Some(frame) = out_rx.recv() => {
                if socket_tx.send(Message::Text(frame.to_string().into())).await.is_err() {
                    break;
                }
            }
            _ = ping.tick() => {
                if !keep_alive(&mut socket_tx, last_heard, ping_every, &conn.conversation).await {
                    break;
                }
            }
            received = bus.recv() => match received {
                Ok(event) => conn.on_event(&event),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    bus = conn.state.events().subscribe(None).live;
                }
            },
            _ = notices.tick(), if conn.turns.is_empty() => conn.deliver_notices().await,
            Some(_) = conn.turns.join_next() => {}
        }
    }
    // A turn whose client left stops; the chat service keeps what it did.
    conn.turns.abort_all();
}

type SocketTx = futures::stream::SplitSink<WebSocket, Message>;

/// Says why a message past the hard cap, or a broken frame, ends the
/// connection, then closes it.
async fn close_broken(socket_tx: &mut SocketTx, e: &axum::Error) {
    let reason = format!("closing the connection: {e}");
    let _ = socket_tx
        .send(Message::Text(error_frame(&reason).to_string().into()))
        .await;
    let close = CloseFrame {
        code: 1009,
        reason: "message too big or malformed".into(),
    };
    let _ = socket_tx.send(Message::Close(Some(close))).await;
}

/// Pings the client, or closes the connection when it answered nothing for
/// two intervals; false when the connection is done.
async fn keep_alive(
    socket_tx: &mut SocketTx,
    last_heard: tokio::time::Instant,
    ping_every: Duration,
    conversation: &str,
) -> bool {
    if last_heard.elapsed() > ping_every * 2 {
        // A vanished client (its TCP connection never closed):
        // free its task instead of polling for it for months.
        tracing::info!(%conversation, "closing a WebSocket that answered no ping");
        let close = CloseFrame {
            code: 1011,
            reason: "no answer to pings".into(),
        };
        let _ = tokio::time::timeout(ping_every, socket_tx.send(Message::Close(Some(close)))).await;
        return false;
    }
    socket_tx
        .send(Message::Ping(Default::default()))
        .await
        .is_ok()
}

/// What one connection's handlers share: its chat session and the turns it
/// runs.
struct Connection {
    state: AppState,
    chat: Arc<ChatService>,
    sink: Arc<Sink>,
    out: mpsc::UnboundedSender<Value>,
    pending: Pending,
    channel: String,
    conversation: String,
    turns: JoinSet<()>,
}

impl Connection {
    fn new(state: AppState, talk: Talk, out: mpsc::UnboundedSender<Value>) -> Self {
        let Talk {
            chat,
            channel,
            conversation,
            ..
        } = talk;
        let pending: Pending = Arc::default();
        let sink = Arc::new(Sink {
            out: out.clone(),
            pending: Arc::clone(&pending),
            timeout: state.approval_timeout(),
            events: Arc::clone(state.events()),
            channel: channel.clone(),
            conversation: conversation.clone(),
        });
        Connection {
            state,
            chat,
            sink,
            out,
            pending,
            channel,
            conversation,
            turns: JoinSet::new(),
        }
    }

    fn send(&self, frame: Value) {
        let _ = self.out.send(frame);
    }

    /// The close frame for a stream ended by the daemon or the token.
    fn ended(&self) -> CloseFrame {
        if self.state.shutdown().is_cancelled() {
            CloseFrame {
                code: 1001,
                reason: "the daemon is stopping".into(),
            }
        } else {
            CloseFrame {
                code: 1008,
                reason: "the token was revoked or expired".into(),
            }
        }
    }

    /// One text frame from the client.
    fn on_text(&mut self, text: &str) {
        let frame = match parse_frame(self.state.settings(), text) {
            Ok(frame) => frame,
            Err(refusal) => {
                // Never reaches the agent or the store.
                self.send(error_frame(&refusal));
                return;
            }
        };
        match frame {
            Ok(ClientFrame::Message { content, images }) => self.on_message(content, images),
            Ok(ClientFrame::Approval { id, decision }) => self.on_approval(&id, decision),
            Ok(ClientFrame::Stop) => {
                // The turn ends with its own `done` or `error` frame.
                if !self.chat.interrupt(self.state.user_id(), &self.channel) {
                    self.send(error_frame("no turn is running"));
                }
            }
            Err(e) => self.send(error_frame(&format!(
                "bad frame: {e}; expected {{\"type\":\"message\",\"content\":…}}, {{\"type\":\"approval\",\"id\":…,\"decision\":\"approve|deny|always\"}} or {{\"type\":\"stop\"}}"
            ))),
        }
    }

    /// Starts a turn for a message, its images decoded first.
    fn on_message(&mut self, content: String, images: Vec<String>) {
        // Counted before any is decoded or stored.
        if let Some(refusal) =
            cairn_core::image::too_many_images(images.len(), self.state.settings().max_images)
        {
            self.send(error_frame(&format!(
                "{refusal}; it was not sent to the agent"
            )));
            return;
        }
        let mut inbound = Inbound {
            user_id: self.state.user_id().to_string(),
            channel: self.channel.clone(),
            thread: None,
            text: content,
            images: Vec::new(),
        };
        let (chat, sink) = (Arc::clone(&self.chat), Arc::clone(&self.sink));
        self.turns.spawn(async move {
            for (i, url) in images.iter().enumerate() {
                if !url.trim_start().starts_with("data:") {
                    sink.send(error_frame(&format!(
                        "images[{i}]: send images as data: URLs"
                    )));
                    return;
                }
                match chat.image_from_url(url).await {
                    Ok(part) => inbound.images.push(part),
                    Err(e) => {
                        sink.send(error_frame(&format!("images[{i}]: {e}")));
                        return;
                    }
                }
            }
            let reply = chat.handle(inbound, sink.as_ref()).await;
            sink.send(reply_frame(reply));
        });
    }

    /// Hands the client's answer to the approval request waiting for it.
    fn on_approval(&self, id: &str, decision: Decision) {
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        match waiting {
            Some(reply_to) => {
                let _ = reply_to.send(match decision {
                    Decision::Approve => ApprovalAnswer::Yes,
                    Decision::Deny => ApprovalAnswer::No,
                    Decision::Always => ApprovalAnswer::Always,
                });
            }
            None => self.send(error_frame(&format!(
                "no approval request {id} is waiting (answered, expired or unknown)"
            ))),
        }
    }

    /// Forwards the person's notifications as they are recorded.
    fn on_event(&self, event: &crate::events::Event) {
        if event.kind != NOTIFICATION_RECORDED {
            return;
        }
        let mut frame = event.data();
        if frame.get("user_id").and_then(Value::as_str) != Some(self.state.user_id()) {
            return;
        }
        frame.remove("user_id");
        frame.insert("type".into(), "notification".into());
        frame.insert("event_id".into(), event.id.into());
        frame.insert("at".into(), json!(event.at));
        self.send(Value::Object(frame));
    }

    /// A running turn announces finished tasks before its next model call;
    /// an idle conversation gets a turn of its own.
    async fn deliver_notices(&mut self) {
        if !self
            .chat
            .notices_waiting(self.state.user_id(), &self.channel)
            .await
        {
            return;
        }
        let (chat, sink) = (Arc::clone(&self.chat), Arc::clone(&self.sink));
        let user = self.state.user_id().to_string();
        let channel = self.channel.clone();
        self.turns.spawn(async move {
            if let Some(reply) = chat.deliver_notices(&user, &channel, sink.as_ref()).await {
                let mut frame = reply_frame(reply);
                if let Some(map) = frame.as_object_mut() {
                    map.insert("automatic".into(), true.into());
                }
                sink.send(frame);
            }
        });
    }
}

fn error_frame(message: &str) -> Value {
    json!({"type": "error", "message": message})
}

/// The frame that ends a message's handling.
fn reply_frame(reply: Reply) -> Value {
    match reply {
        Reply::Answer(report) => json!({
            "type": "done", "response": report.response, "usage": report.usage,
            "thread_id": report.thread_id, "turn": report.turn, "tool_calls": report.tool_calls,
        }),
        Reply::Notice { text } => {
            json!({"type": "done", "response": text, "usage": null, "notice": true})
        }
        Reply::Error { text } => error_frame(&text),
        Reply::Dropped { reason } => error_frame(&format!("the message was dropped: {reason}")),
        Reply::Quit => {
            json!({"type": "done", "response": "Goodbye.", "usage": null, "notice": true})
        }
    }
}
