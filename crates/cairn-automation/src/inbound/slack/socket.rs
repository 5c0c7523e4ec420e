//! The Socket Mode connection: held under the channel's lease in the
//! store, opened with `apps.connections.open`, each envelope
//! acknowledged (`{"envelope_id": …}`) before it is handled, and opened
//! again when Slack says so (`disconnect`, as it does every few hours) or
//! the socket drops. Failures back off, doubling to a minute; a rate
//! limit's `Retry-After` is waited out; a token Slack refuses ends the
//! run, so the supervisor shows it and retries later.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_util::sync::CancellationToken;

use super::SlackAdapter;
use super::api::{ApiError, Identity};
use super::events::Envelope;

/// How one connection ended.
enum Ended {
    /// The run is stopping.
    Cancelled,
    /// Slack asked for a new connection.
    Disconnect(String),
    /// The socket closed or failed.
    Dropped(String),
    /// Another process holds the lease now.
    LeaseLost,
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection Slack ends sooner than this is a failure, backed off.
const SETTLED: Duration = Duration::from_secs(10);
/// A ping this often keeps the socket's path awake and shows it alive.
const PING_EVERY: Duration = Duration::from_secs(30);
/// Nothing heard for this long (not even a pong): the socket is dead
/// though no one closed it (a network gone quiet).
const SILENT_FOR: Duration = Duration::from_secs(100);

impl SlackAdapter {
    fn lease(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.0.cfg.lease).unwrap_or(chrono::Duration::seconds(60))
    }

    /// Whether this process holds (or now took) the socket's lease.
    async fn claim(&self) -> Result<bool, String> {
        let cfg = &self.0.cfg;
        cfg.store
            .claim_channel_poll(&cfg.name, &cfg.owner, cfg.clock.now(), self.lease())
            .await
            .map(|c| c.is_some())
            .map_err(|e| format!("channels.{}: cannot claim the socket: {e}", cfg.name))
    }

    /// Keeps a connection while holding the lease, until `cancel`.
    pub(super) async fn serve(
        &self,
        me: &Identity,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let mut turns = JoinSet::new();
        let mut backoff = Duration::from_secs(1);
        let mut holding = false;
        let result = loop {
            match self.claim().await {
                Ok(true) => {}
                Ok(false) => {
                    holding = false;
                    // Another process has the socket; look again before its lease can lapse.
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(cfg.lease / 4) => continue,
                    }
                }
                Err(e) => break Err(e),
            }
            if !holding {
                holding = true;
                tracing::info!(channel = %cfg.name, bot = %me.user_id, team = %me.team_id, "connecting to Slack (Socket Mode)");
            }
            let opened = tokio::time::Instant::now();
            let ended = match self.connect().await {
                Ok(socket) => self.listen(socket, me, &mut turns, cancel).await,
                Err(ApiError::Refused { method, error }) => {
                    break Err(format!(
                        "channels.{}: Slack refused {method}: {error}",
                        cfg.name
                    ));
                }
                Err(ApiError::RetryAfter(wait)) => {
                    tracing::warn!(channel = %cfg.name, retry_in = ?wait, "apps.connections.open: rate limited");
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(wait) => continue,
                    }
                }
                Err(e) => Ended::Dropped(e.to_string()),
            };
            // A connection that lasted was a success: failures count afresh.
            if opened.elapsed() > SETTLED {
                backoff = Duration::from_secs(1);
            }
            match ended {
                Ended::Cancelled => break Ok(()),
                Ended::LeaseLost => {
                    holding = false;
                    tracing::info!(channel = %cfg.name, "another process holds the Slack socket now");
                }
                // Slack has a new connection ready: take it at once, unless
                // it keeps refusing them (`too_many_websockets`).
                Ended::Disconnect(reason) if opened.elapsed() > SETTLED => {
                    tracing::info!(channel = %cfg.name, reason, "Slack asked to reconnect");
                }
                Ended::Disconnect(why) | Ended::Dropped(why) => {
                    tracing::warn!(channel = %cfg.name, error = %why, retry_in = ?backoff, "the Slack connection failed");
                    let wait = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        };
        turns.abort_all();
        // Handed over, the lease stays this process's: its successor (same
        // owner) renews it, so no other daemon connects in between.
        if !self.0.hand_over.load(std::sync::atomic::Ordering::SeqCst)
            && let Err(e) = cfg.store.release_channel_poll(&cfg.name, &cfg.owner).await
        {
            tracing::warn!(channel = %cfg.name, error = %e, "cannot release the socket's lease");
        }
        result
    }

    /// A new WebSocket from a fresh URL.
    async fn connect(&self) -> Result<Socket, ApiError> {
        let url = self.0.cfg.api.open_connection().await?;
        let unreachable = |message: String| ApiError::Unreachable {
            method: "the Socket Mode WebSocket".into(),
            message,
        };
        let tls = cairn_llm::tls::websocket_config()
            .map_err(|e| unreachable(format!("cannot set up TLS: {e}")))?;
        let connector = tokio_tungstenite::Connector::Rustls(tls);
        let connecting = tokio_tungstenite::connect_async_tls_with_config(
            url.as_str(),
            None,
            false,
            Some(connector),
        );
        match tokio::time::timeout(Duration::from_secs(30), connecting).await {
            Ok(Ok((socket, _))) => Ok(socket),
            // The URL carries a one-time ticket: never shown.
            Ok(Err(e)) => Err(unreachable(e.to_string().replace(&url, "<socket url>"))),
            Err(_) => Err(unreachable("no answer in 30 s".into())),
        }
    }

    /// Reads envelopes until the connection ends; renews the lease.
    async fn listen(
        &self,
        mut socket: Socket,
        me: &Identity,
        turns: &mut JoinSet<()>,
        cancel: &CancellationToken,
    ) -> Ended {
        let cfg = &self.0.cfg;
        let mut renew = tokio::time::interval(cfg.lease / 4);
        renew.tick().await;
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        let mut heard = tokio::time::Instant::now();
        let ended = loop {
            let frame = tokio::select! {
                () = cancel.cancelled() => break Ended::Cancelled,
                _ = ping.tick() => {
                    if heard.elapsed() > SILENT_FOR {
                        break Ended::Dropped(format!("nothing heard for {SILENT_FOR:?}"));
                    }
                    if let Err(e) = socket.send(Frame::Ping(Default::default())).await {
                        break Ended::Dropped(format!("cannot ping: {e}"));
                    }
                    continue;
                }
                _ = renew.tick() => match self.claim().await {
                    Ok(true) => continue,
                    Ok(false) => break Ended::LeaseLost,
                    Err(e) => break Ended::Dropped(e),
                },
                Some(_) = turns.join_next(), if !turns.is_empty() => continue,
                frame = socket.next() => frame,
            };
            heard = tokio::time::Instant::now();
            let text = match frame {
                Some(Ok(Frame::Text(text))) => text,
                Some(Ok(Frame::Close(close))) => {
                    break Ended::Dropped(format!("closed by Slack: {close:?}"));
                }
                // Pings are answered by the socket itself.
                Some(Ok(_)) => continue,
                Some(Err(e)) => break Ended::Dropped(e.to_string()),
                None => break Ended::Dropped("the socket closed".into()),
            };
            let envelope: Envelope = match serde_json::from_str(text.as_str()) {
                Ok(e) => e,
                Err(e) => {
                    tracing::debug!(channel = %cfg.name, error = %e, "an unreadable Socket Mode frame");
                    continue;
                }
            };
            // Acknowledged first: Slack redelivers what is not acked in 3 s.
            if let Some(id) = &envelope.envelope_id {
                let ack = json!({ "envelope_id": id }).to_string();
                if let Err(e) = socket.send(Frame::text(ack)).await {
                    break Ended::Dropped(format!("cannot acknowledge: {e}"));
                }
            }
            match envelope.kind.as_str() {
                "hello" => {
                    tracing::info!(channel = %cfg.name, "Slack connected (Socket Mode)");
                }
                "disconnect" => {
                    break Ended::Disconnect(envelope.reason.unwrap_or_else(|| "unknown".into()));
                }
                "events_api" => {
                    let (this, me) = (self.clone(), me.clone());
                    turns.spawn(async move { this.on_event(&me, envelope.payload).await });
                }
                "slash_commands" => {
                    let (this, me) = (self.clone(), me.clone());
                    turns.spawn(async move { this.on_command(&me, envelope.payload).await });
                }
                "interactive" if envelope.payload["type"] == "block_actions" => {
                    let this = self.clone();
                    turns.spawn(async move { this.on_button(envelope.payload).await });
                }
                other => {
                    tracing::debug!(channel = %cfg.name, kind = other, "a Socket Mode envelope ignored");
                }
            }
        };
        if !matches!(ended, Ended::Dropped(_)) {
            let _ = socket.close(None).await;
        }
        ended
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;
