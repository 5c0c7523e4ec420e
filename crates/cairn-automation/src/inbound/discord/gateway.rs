//! The gateway connection (v10, JSON): held under the channel's lease in
//! the store. Its address comes from `GET /gateway/bot`; Discord says
//! Hello with a heartbeat interval, cairn beats (op 1 with the last
//! sequence number) and expects each beat acknowledged (op 11): one that
//! is not means a dead ("zombie") connection, closed and resumed. A new
//! session starts with Identify (op 2) and READY (its id, the address to
//! resume at, the bot's own user); after a drop, a Reconnect (op 7) or
//! any close Discord does not call final, the session is resumed (op 6,
//! at READY's `resume_gateway_url`), so the events missed are replayed.
//! An Invalid Session (op 9) that may not be resumed, or a close 4007 or
//! 4009, starts a new session. Closes 4004 (the token) and 4010 to 4014
//! (shards, version, intents) end the run with the reason, for the
//! supervisor to show and retry slowly; every other failure backs off,
//! doubling to a minute.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

use super::DiscordAdapter;
use super::api::ApiError;
use super::events::{self, Interaction, Message, Payload, Ready, op};
use crate::inbound::in_order::InOrder;

/// A session to resume.
struct Session {
    id: String,
    /// The last event's sequence number.
    seq: Option<u64>,
    resume_url: String,
}

/// How one connection ended.
enum Ended {
    /// The run is stopping.
    Cancelled,
    /// Another process holds the lease now.
    LeaseLost,
    /// Resume on a new connection; `failed` when it is a failure (backed
    /// off), not Discord's request.
    Resume { why: String, failed: bool },
    /// The session is over: start a new one.
    Identify(String),
    /// Discord will not take this bot as configured.
    Fatal(String),
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that ends sooner than this is a failure, backed off.
const SETTLED: Duration = Duration::from_secs(10);
/// How long Discord has to say Hello, or the socket to open.
const OPENING: Duration = Duration::from_secs(30);
/// A close code other than 1000 and 1001, which would end the session.
const CLOSE_TO_RESUME: u16 = 4_900;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What a close code means (Discord's gateway close event codes).
fn closed(code: u16, reason: &str) -> Ended {
    let fatal = |what: &str| Ended::Fatal(format!("Discord closed the gateway: {code} {what}"));
    match code {
        4004 => fatal("authentication failed: check bot_token"),
        4010 => fatal("invalid shard"),
        4011 => fatal("sharding required (the bot is in too many servers for one connection)"),
        4012 => fatal("invalid API version"),
        4013 => fatal("invalid intents"),
        4014 => fatal(
            "disallowed intents: switch on the Message Content intent \
             (Developer Portal → the application → Bot → Privileged Gateway Intents)",
        ),
        4007 | 4009 => Ended::Identify(format!("closed by Discord: {code} {reason}")),
        _ => Ended::Resume {
            why: format!("closed by Discord: {code} {reason}"),
            failed: true,
        },
    }
}

/// `base` with the version and encoding cairn speaks.
fn gateway_address(base: &str) -> Result<String, String> {
    let mut url = reqwest::Url::parse(base).map_err(|e| format!("a bad gateway URL: {e}"))?;
    url.set_query(Some("v=10&encoding=json"));
    Ok(url.to_string())
}

impl DiscordAdapter {
    fn lease(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.0.cfg.lease).unwrap_or(chrono::Duration::seconds(60))
    }

    /// Whether this process holds (or now took) the gateway's lease.
    async fn claim(&self) -> Result<bool, String> {
        let cfg = &self.0.cfg;
        cfg.store
            .claim_channel_poll(&cfg.name, &cfg.owner, cfg.clock.now(), self.lease())
            .await
            .map(|c| c.is_some())
            .map_err(|e| format!("channels.{}: cannot claim the gateway: {e}", cfg.name))
    }

    /// Keeps a gateway session while holding the lease, until `cancel`.
    pub(super) async fn serve(&self, cancel: &CancellationToken) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let mut turns = JoinSet::new();
        let mut order = InOrder::default();
        let mut session: Option<Session> = None;
        let mut backoff = Duration::from_secs(1);
        let mut holding = false;
        let result = loop {
            match self.claim().await {
                Ok(true) => {}
                Ok(false) => {
                    holding = false;
                    session = None;
                    // Another process has the gateway; look again before its lease can lapse.
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(cfg.lease / 4) => continue,
                    }
                }
                Err(e) => break Err(e),
            }
            if !holding {
                holding = true;
                tracing::info!(channel = %cfg.name, bot = %self.bot(), "connecting to the Discord gateway");
            }
            let opened = Instant::now();
            let ended = match self.connect(session.as_ref()).await {
                Ok(socket) => {
                    self.listen(socket, &mut session, &mut turns, &mut order, cancel)
                        .await
                }
                Err(ApiError::Refused {
                    what,
                    status: 401,
                    message,
                }) => {
                    break Err(format!(
                        "channels.{}: Discord refused {what}: HTTP 401: {message} (check bot_token)",
                        cfg.name
                    ));
                }
                Err(ApiError::RetryAfter(wait)) => {
                    tracing::warn!(channel = %cfg.name, retry_in = ?wait, "GET /gateway/bot: rate limited");
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(wait) => continue,
                    }
                }
                Err(e) => Ended::Resume {
                    why: e.to_string(),
                    failed: true,
                },
            };
            // A connection that lasted was a success: failures count afresh.
            if opened.elapsed() > SETTLED {
                backoff = Duration::from_secs(1);
            }
            let why = match ended {
                Ended::Cancelled => break Ok(()),
                Ended::Fatal(why) => break Err(format!("channels.{}: {why}", cfg.name)),
                Ended::LeaseLost => {
                    holding = false;
                    session = None;
                    tracing::info!(channel = %cfg.name, "another process holds the Discord gateway now");
                    continue;
                }
                Ended::Resume { why, failed: false } => {
                    tracing::info!(channel = %cfg.name, reason = %why, "reconnecting to resume the Discord session");
                    continue;
                }
                Ended::Resume { why, failed: true } => why,
                Ended::Identify(why) => {
                    session = None;
                    why
                }
            };
            tracing::warn!(channel = %cfg.name, error = %why, retry_in = ?backoff, "the Discord gateway connection failed");
            let wait = backoff;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                () = tokio::time::sleep(wait) => {}
            }
        };
        turns.abort_all();
        // Handed over, the lease stays this process's: its successor (same
        // owner) renews it, so no other daemon connects in between.
        if !self.0.hand_over.load(std::sync::atomic::Ordering::SeqCst)
            && let Err(e) = cfg.store.release_channel_poll(&cfg.name, &cfg.owner).await
        {
            tracing::warn!(channel = %cfg.name, error = %e, "cannot release the gateway's lease");
        }
        result
    }

    /// A WebSocket to the session's resume address, or to a fresh gateway.
    async fn connect(&self, session: Option<&Session>) -> Result<Socket, ApiError> {
        let base = match session {
            Some(s) => s.resume_url.clone(),
            None => self.0.cfg.api.gateway_url().await?,
        };
        let unreachable = |message: String| ApiError::Unreachable {
            what: "the gateway".into(),
            message,
        };
        let url = gateway_address(&base).map_err(unreachable)?;
        let tls = cairn_llm::tls::websocket_config()
            .map_err(|e| unreachable(format!("cannot set up TLS: {e}")))?;
        let connecting = tokio_tungstenite::connect_async_tls_with_config(
            url.as_str(),
            None,
            false,
            Some(tokio_tungstenite::Connector::Rustls(tls)),
        );
        match tokio::time::timeout(OPENING, connecting).await {
            Ok(Ok((socket, _))) => Ok(socket),
            Ok(Err(e)) => Err(unreachable(e.to_string())),
            Err(_) => Err(unreachable(format!("no answer in {OPENING:?}"))),
        }
    }

    /// Runs one connection: Hello, Identify or Resume, then events and
    /// heartbeats until it ends; renews the lease.
    async fn listen(
        &self,
        mut socket: Socket,
        session: &mut Option<Session>,
        turns: &mut JoinSet<()>,
        order: &mut InOrder<String>,
        cancel: &CancellationToken,
    ) -> Ended {
        let every = match tokio::time::timeout(OPENING, hello(&mut socket)).await {
            Ok(Ok(every)) => every,
            Ok(Err(ended)) => return ended,
            Err(_) => return dropped("no Hello from the gateway"),
        };
        let token = self.0.cfg.api.token();
        let opening = match session.as_ref() {
            Some(s) => events::resume(token, &s.id, s.seq),
            None => events::identify(token),
        };
        if let Err(e) = socket.send(Frame::text(opening.to_string())).await {
            return dropped(&format!("cannot identify: {e}"));
        }
        let ended = self
            .events(&mut socket, every, session, turns, order, cancel)
            .await;
        let code = match &ended {
            Ended::Resume { .. } => Some(CLOSE_TO_RESUME),
            Ended::Cancelled | Ended::LeaseLost | Ended::Identify(_) => Some(1000),
            Ended::Fatal(_) => None,
        };
        if let Some(code) = code {
            let frame = CloseFrame {
                code: CloseCode::from(code),
                reason: "".into(),
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), socket.close(Some(frame))).await;
        }
        ended
    }

    /// Reads payloads and beats until the connection ends.
    async fn events(
        &self,
        socket: &mut Socket,
        every: Duration,
        session: &mut Option<Session>,
        turns: &mut JoinSet<()>,
        order: &mut InOrder<String>,
        cancel: &CancellationToken,
    ) -> Ended {
        let cfg = &self.0.cfg;
        let mut renew = tokio::time::interval(cfg.lease / 4);
        renew.tick().await;
        // The first beat after a random part of the interval, so bots
        // restarted together do not beat together.
        let jitter: f64 = rand::random();
        let mut beat_at = Instant::now() + every.mul_f64(jitter);
        let mut acked = true;
        loop {
            let frame = tokio::select! {
                () = cancel.cancelled() => return Ended::Cancelled,
                () = tokio::time::sleep_until(beat_at) => {
                    if !acked {
                        return dropped("no heartbeat ACK: the connection is dead");
                    }
                    acked = false;
                    beat_at = Instant::now() + every;
                    let seq = session.as_ref().and_then(|s| s.seq);
                    if let Err(e) = socket.send(Frame::text(events::heartbeat(seq).to_string())).await {
                        return dropped(&format!("cannot send a heartbeat: {e}"));
                    }
                    continue;
                }
                _ = renew.tick() => match self.claim().await {
                    Ok(true) => continue,
                    Ok(false) => return Ended::LeaseLost,
                    Err(e) => return dropped(&e),
                },
                Some(_) = turns.join_next(), if !turns.is_empty() => continue,
                frame = socket.next() => frame,
            };
            let payload = match read(frame) {
                Ok(Some(payload)) => payload,
                Ok(None) => continue,
                Err(ended) => return ended,
            };
            match payload.op {
                op::DISPATCH => {
                    if let (Some(s), Some(session)) = (payload.s, session.as_mut()) {
                        session.seq = Some(s);
                    }
                    let name = payload.t.unwrap_or_default();
                    if name == "READY" {
                        match serde_json::from_value::<Ready>(payload.d) {
                            Ok(ready) => {
                                tracing::info!(channel = %cfg.name, bot = %ready.user.id, "Discord session ready");
                                self.set_bot(&ready.user.id);
                                *session = Some(Session {
                                    id: ready.session_id,
                                    seq: payload.s,
                                    resume_url: ready.resume_gateway_url,
                                });
                            }
                            Err(e) => return dropped(&format!("an unreadable READY: {e}")),
                        }
                    } else {
                        self.dispatch(&name, payload.d, turns, order);
                    }
                }
                // Discord asks for a beat now.
                op::HEARTBEAT => {
                    let seq = session.as_ref().and_then(|s| s.seq);
                    if let Err(e) = socket
                        .send(Frame::text(events::heartbeat(seq).to_string()))
                        .await
                    {
                        return dropped(&format!("cannot send a heartbeat: {e}"));
                    }
                }
                op::HEARTBEAT_ACK => acked = true,
                op::RECONNECT => {
                    return Ended::Resume {
                        why: "Discord asked to reconnect".into(),
                        failed: false,
                    };
                }
                op::INVALID_SESSION if payload.d == Value::Bool(true) && session.is_some() => {
                    return Ended::Resume {
                        why: "Discord invalidated the session (resumable)".into(),
                        failed: true,
                    };
                }
                op::INVALID_SESSION => {
                    return Ended::Identify("Discord invalidated the session".into());
                }
                other => {
                    tracing::debug!(channel = %cfg.name, op = other, "a gateway payload ignored");
                }
            }
        }
    }

    /// Hands an event to its own task.
    fn dispatch(
        &self,
        name: &str,
        data: Value,
        turns: &mut JoinSet<()>,
        order: &mut InOrder<String>,
    ) {
        let cfg = &self.0.cfg;
        match name {
            "MESSAGE_CREATE" => match serde_json::from_value::<Message>(data) {
                Ok(message) => {
                    let this = self.clone();
                    // A chat's messages reach the agent in the order sent.
                    order.spawn_passing(
                        turns,
                        message.channel_id.clone(),
                        move |baton| async move {
                            this.on_message(message, baton).await;
                        },
                    );
                }
                Err(e) => {
                    tracing::debug!(channel = %cfg.name, error = %e, "an unreadable MESSAGE_CREATE");
                }
            },
            "INTERACTION_CREATE" => match serde_json::from_value::<Interaction>(data) {
                Ok(interaction) => {
                    let this = self.clone();
                    turns.spawn(async move { this.on_button(interaction).await });
                }
                Err(e) => {
                    tracing::debug!(channel = %cfg.name, error = %e, "an unreadable INTERACTION_CREATE");
                }
            },
            "RESUMED" => tracing::info!(channel = %cfg.name, "Discord session resumed"),
            _ => {}
        }
    }
}

fn dropped(why: &str) -> Ended {
    Ended::Resume {
        why: why.to_string(),
        failed: true,
    }
}

/// A frame as a payload; `None` for frames that carry none (pings).
fn read(
    frame: Option<Result<Frame, tokio_tungstenite::tungstenite::Error>>,
) -> Result<Option<Payload>, Ended> {
    match frame {
        Some(Ok(Frame::Text(text))) => match serde_json::from_str(text.as_str()) {
            Ok(payload) => Ok(Some(payload)),
            Err(e) => {
                tracing::debug!(error = %e, "an unreadable gateway payload");
                Ok(None)
            }
        },
        Some(Ok(Frame::Close(Some(close)))) => {
            Err(closed(u16::from(close.code), close.reason.as_str()))
        }
        Some(Ok(Frame::Close(None))) => Err(dropped("closed by Discord")),
        // Pings are answered by the socket itself; no compression was asked for.
        Some(Ok(_)) => Ok(None),
        Some(Err(e)) => Err(dropped(&e.to_string())),
        None => Err(dropped("the socket closed")),
    }
}

/// Waits for Hello; its heartbeat interval.
async fn hello(socket: &mut Socket) -> Result<Duration, Ended> {
    loop {
        let Some(payload) = read(socket.next().await)? else {
            continue;
        };
        if payload.op == op::HELLO {
            let ms = payload.d["heartbeat_interval"].as_u64().unwrap_or(41_250);
            // Bounded, so a stand-in's or a bad value cannot spin.
            return Ok(Duration::from_millis(ms.clamp(100, 600_000)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_are_final_or_not_as_discord_documents() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            assert!(matches!(closed(code, ""), Ended::Fatal(_)), "{code}");
        }
        assert!(matches!(closed(4007, ""), Ended::Identify(_)));
        assert!(matches!(closed(4009, ""), Ended::Identify(_)));
        for code in [1000, 1001, 1006, 4000, 4001, 4008] {
            assert!(
                matches!(closed(code, ""), Ended::Resume { failed: true, .. }),
                "{code}"
            );
        }
        let Ended::Fatal(why) = closed(4014, "Disallowed intent(s).") else {
            unreachable!()
        };
        assert!(why.contains("Message Content"), "{why}");
    }

    #[test]
    fn the_gateway_address_names_the_version_and_encoding() {
        assert_eq!(
            gateway_address("wss://gateway.discord.gg").unwrap(),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_address("ws://127.0.0.1:9/resume?v=9").unwrap(),
            "ws://127.0.0.1:9/resume?v=10&encoding=json"
        );
        assert!(gateway_address("not a url").is_err());
    }
}
