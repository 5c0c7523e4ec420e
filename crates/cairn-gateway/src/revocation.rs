//! Ending the streams of a token that stopped being valid.
//!
//! A request is authenticated once, but a WebSocket or an event stream
//! lasts for hours: revoking its token (`cairn token revoke`, from any
//! process on the database) must end it too. Each open stream registers
//! its token here; while any stream is open, one task checks every
//! [`CHECK_EVERY`] which of their tokens are no longer live (revoked or
//! expired) and ends their streams. With no stream open, nothing runs.
//!
//! A timer, because the store has no change signal yet (issue 23 brings
//! one); it costs one small read every two seconds, only while streams
//! are open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_core::clock::Clock;
use cairn_store::{ApiToken, Store};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often the tokens of open streams are checked: a revoked token's
/// streams end within this (and the time one check takes).
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// The open streams, by the token that opened them.
pub struct TokenStreams {
    state: Mutex<State>,
    store: Store,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
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
    /// Per token: how many streams it has open, and what ends them.
    tokens: HashMap<Uuid, (usize, CancellationToken)>,
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
        if let Some((count, _)) = state.tokens.get_mut(&self.token) {
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
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a stream opened with `token`, starting the checks if none run.
    pub fn open(self: &Arc<Self>, token: &ApiToken) -> StreamGuard {
        let mut state = self.lock();
        let (count, ended) = state
            .tokens
            .entry(token.id)
            .or_insert_with(|| (0, self.shutdown.child_token()));
        *count += 1;
        let ended = ended.clone();
        if !state.checking {
            state.checking = true;
            tokio::spawn(Arc::clone(self).check());
        }
        StreamGuard {
            streams: Arc::clone(self),
            token: token.id,
            ended,
        }
    }

    /// Ends the streams of tokens no longer live, every [`CHECK_EVERY`],
    /// until no stream is open.
    async fn check(self: Arc<Self>) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                () = tokio::time::sleep(CHECK_EVERY) => {}
            }
            let open: Vec<Uuid> = {
                let mut state = self.lock();
                if state.tokens.is_empty() {
                    state.checking = false;
                    return;
                }
                state.tokens.keys().copied().collect()
            };
            let now = self.clock.now();
            let tokens = match self.store.list_api_tokens().await {
                Ok(tokens) => tokens,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot check the tokens of open streams");
                    continue;
                }
            };
            let live = |id: &Uuid| {
                tokens.iter().any(|t| {
                    t.id == *id && t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now)
                })
            };
            let state = self.lock();
            for id in open.iter().filter(|id| !live(id)) {
                if let Some((_, ended)) = state.tokens.get(id) {
                    tracing::info!(token = %id, "ending the streams of a token that was revoked or expired");
                    ended.cancel();
                }
            }
        }
        self.lock().checking = false;
    }
}
