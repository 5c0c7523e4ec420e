//! Ending the streams of a token that stopped being valid.
//!
//! A request is authenticated once, but a WebSocket or an event stream
//! lasts for hours: revoking its token (`cairn token revoke`, from any
//! process on the database) must end it too. Each open stream registers
//! its token here; while any stream is open, one task sleeps until a token
//! is revoked anywhere (the store's change signal, `Topic::Tokens`) or the
//! earliest expiry among the open streams' tokens comes, then ends the
//! streams of the tokens no longer live. With no stream open, nothing runs;
//! with streams open, nothing wakes until one of those happens.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_core::clock::Clock;
use cairn_store::{ApiToken, Store, Topic};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The open streams, by the token that opened them.
pub struct TokenStreams {
    state: Mutex<State>,
    store: Store,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
    /// A stream was opened: its token's expiry may be the earliest now.
    opened: tokio::sync::Notify,
}

impl std::fmt::Debug for TokenStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStreams")
            .field("tokens", &self.lock().tokens.len())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Per token: how many streams it has open, what ends them, and when
    /// the token expires.
    tokens: HashMap<Uuid, (usize, CancellationToken, Option<DateTime<Utc>>)>,
    /// Whether the checking task runs.
    checking: bool,
}

/// One open stream's registration; dropping it unregisters the stream.
#[derive(Debug)]
pub struct StreamGuard {
    streams: Arc<TokenStreams>,
    token: Uuid,
    ended: CancellationToken,
}

impl StreamGuard {
    /// Cancelled when the stream must end: its token is no longer live, or
    /// the daemon stops.
    pub fn ended(&self) -> &CancellationToken {
        &self.ended
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut state = self.streams.lock();
        if let Some((count, _, _)) = state.tokens.get_mut(&self.token) {
            *count -= 1;
            if *count == 0 {
                state.tokens.remove(&self.token);
            }
        }
    }
}

impl TokenStreams {
    /// No stream open yet; streams also end when `shutdown` is cancelled.
    pub fn new(store: Store, clock: Arc<dyn Clock>, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            store,
            clock,
            shutdown,
            opened: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a stream opened with `token`, starting the checks if none run.
    pub fn open(self: &Arc<Self>, token: &ApiToken) -> StreamGuard {
        let mut state = self.lock();
        let (count, ended, _) = state
            .tokens
            .entry(token.id)
            .or_insert_with(|| (0, self.shutdown.child_token(), token.expires_at));
        *count += 1;
        let ended = ended.clone();
        if state.checking {
            self.opened.notify_one();
        } else {
            state.checking = true;
            tokio::spawn(Arc::clone(self).check());
        }
        StreamGuard {
            streams: Arc::clone(self),
            token: token.id,
            ended,
        }
    }

    /// Ends the streams of tokens no longer live: at once, then whenever a
    /// token is revoked anywhere, an open stream's token expires or another
    /// stream opens (its token may have been revoked since it was
    /// authenticated), until no stream is open.
    async fn check(self: Arc<Self>) {
        let mut revoked = self.store.watch(Topic::Tokens);
        loop {
            if !self.end_dead_streams().await {
                // Not at once again: an expiry already due would spin.
                let retry = self.clock.now() + chrono::Duration::seconds(2);
                tokio::select! {
                    () = self.shutdown.cancelled() => break,
                    () = self.clock.sleep_until(retry) => continue,
                }
            }
            let expiry = {
                let mut state = self.lock();
                if state.tokens.is_empty() {
                    state.checking = false;
                    return;
                }
                state.tokens.values().filter_map(|(_, _, at)| *at).min()
            };
            let expired = async {
                match expiry {
                    Some(at) => self.clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                () = revoked.changed() => {}
                () = expired => {}
                () = self.opened.notified() => {}
            }
        }
        self.lock().checking = false;
    }

    /// Ends the streams of the open tokens that are revoked or expired (and
    /// forgets those tokens); `false` when the tokens cannot be read.
    async fn end_dead_streams(&self) -> bool {
        let open: Vec<Uuid> = self.lock().tokens.keys().copied().collect();
        let now = self.clock.now();
        let tokens = match self.store.list_api_tokens().await {
            Ok(tokens) => tokens,
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the tokens of open streams; trying again in 2 s");
                return false;
            }
        };
        let live = |id: &Uuid| {
            tokens.iter().any(|t| {
                t.id == *id && t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now)
            })
        };
        let mut state = self.lock();
        for id in open.iter().filter(|id| !live(id)) {
            if let Some((_, ended, _)) = state.tokens.remove(id) {
                tracing::info!(token = %id, "ending the streams of a token that was revoked or expired");
                ended.cancel();
            }
        }
        true
    }
}
