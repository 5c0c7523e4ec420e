//! Per-client rate limits, kept in memory: pairing attempts a minute, and
//! failed bearer authentications a minute. The limit on wrong pairing
//! codes is not here: it counts every client and daemon together, in the
//! store (see [`crate::pairing`]), since a client that changes its address
//! (every 127.x.y.z reaches a loopback listener) is a new client here.
//!
//! Hand-written rather than `governor`: the failure limit counts only
//! failures and must never refuse a request that authenticates, which
//! governor's keyed limiters (counting every request) do not model. One
//! mutex-guarded map of small fixed-window counters does both, and its size
//! is bounded: idle clients are evicted when it fills.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ApiError;

/// `POST /pair` attempts per client per minute.
pub const PAIR_PER_MINUTE: u32 = 10;
/// Failed bearer authentications per client per minute before 429.
pub const AUTH_FAILURES_PER_MINUTE: u32 = 30;
/// Clients remembered at most; idle ones are evicted past this.
pub const MAX_CLIENTS: usize = 10_000;

const WINDOW: Duration = Duration::from_secs(60);

/// A fixed one-minute window counter.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    count: u32,
}

impl Window {
    fn new(now: Instant) -> Self {
        Self {
            start: now,
            count: 0,
        }
    }

    /// Restarts the window when a minute has passed since it began.
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.start) >= WINDOW {
            *self = Window::new(now);
        }
    }

    /// Seconds until the window ends (at least 1).
    fn retry_after(&self, now: Instant) -> u64 {
        secs_until(self.start + WINDOW, now)
    }
}

fn secs_until(when: Instant, now: Instant) -> u64 {
    when.saturating_duration_since(now)
        .as_secs_f64()
        .ceil()
        .max(1.0) as u64
}

#[derive(Debug, Clone, Copy)]
struct Client {
    pair: Window,
    auth_failures: Window,
    last_seen: Instant,
}

impl Client {
    fn new(now: Instant) -> Self {
        Self {
            pair: Window::new(now),
            auth_failures: Window::new(now),
            last_seen: now,
        }
    }

    /// Nothing about this client matters any more: its windows ended.
    fn idle(&self, now: Instant) -> bool {
        now.duration_since(self.last_seen) >= WINDOW
    }
}

/// The limits of every client the gateway has seen lately.
#[derive(Debug, Default)]
pub struct Limits {
    clients: Mutex<HashMap<IpAddr, Client>>,
}

impl Limits {
    /// No client seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_client<T>(&self, ip: IpAddr, f: impl FnOnce(&mut Client, Instant) -> T) -> T {
        let now = Instant::now();
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&ip) {
            clients.retain(|_, c| !c.idle(now));
            if clients.len() >= MAX_CLIENTS {
                // Still full of active clients: forget the one seen longest ago.
                if let Some(oldest) = clients
                    .iter()
                    .min_by_key(|(_, c)| c.last_seen)
                    .map(|(k, _)| *k)
                {
                    clients.remove(&oldest);
                }
            }
        }
        let client = clients.entry(ip).or_insert_with(|| Client::new(now));
        client.last_seen = now;
        client.pair.roll(now);
        client.auth_failures.roll(now);
        f(client, now)
    }

    /// Counts a `POST /pair` attempt: 429 past [`PAIR_PER_MINUTE`].
    pub fn pair_attempt(&self, ip: IpAddr) -> Result<(), ApiError> {
        self.with_client(ip, |c, now| {
            if c.pair.count >= PAIR_PER_MINUTE {
                return Err(ApiError::too_many(
                    format!("at most {PAIR_PER_MINUTE} pairing attempts a minute"),
                    c.pair.retry_after(now),
                ));
            }
            c.pair.count += 1;
            Ok(())
        })
    }

    /// 429 when the client failed bearer authentication too often this minute.
    pub fn auth_allowed(&self, ip: IpAddr) -> Result<(), ApiError> {
        self.with_client(ip, |c, now| {
            if c.auth_failures.count >= AUTH_FAILURES_PER_MINUTE {
                Err(ApiError::too_many(
                    "too many failed authentications from this client",
                    c.auth_failures.retry_after(now),
                ))
            } else {
                Ok(())
            }
        })
    }

    /// Counts a failed bearer authentication.
    pub fn auth_failed(&self, ip: IpAddr) {
        self.with_client(ip, |c, _| {
            c.auth_failures.count = c.auth_failures.count.saturating_add(1);
        });
    }

    /// How many clients are remembered (for tests of the bound).
    pub fn len(&self) -> usize {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no client is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(n))
    }

    #[tokio::test(start_paused = true)]
    async fn pairing_is_limited_per_minute_and_per_client() {
        let limits = Limits::new();
        for _ in 0..PAIR_PER_MINUTE {
            limits.pair_attempt(ip(1)).unwrap();
        }
        let err = limits.pair_attempt(ip(1)).unwrap_err();
        assert_eq!(err.status, 429);
        assert_eq!(err.retry_after, Some(60));
        limits.pair_attempt(ip(2)).unwrap();
        tokio::time::advance(WINDOW).await;
        limits.pair_attempt(ip(1)).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn auth_failures_are_limited() {
        let limits = Limits::new();
        for _ in 0..AUTH_FAILURES_PER_MINUTE {
            limits.auth_allowed(ip(1)).unwrap();
            limits.auth_failed(ip(1));
        }
        assert_eq!(limits.auth_allowed(ip(1)).unwrap_err().status, 429);
        limits.auth_allowed(ip(2)).unwrap();
        tokio::time::advance(WINDOW).await;
        limits.auth_allowed(ip(1)).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_bounded() {
        let limits = Limits::new();
        for n in 0..(MAX_CLIENTS as u32 + 50) {
            limits.pair_attempt(ip(n)).unwrap();
        }
        assert!(limits.len() <= MAX_CLIENTS);
        tokio::time::advance(WINDOW).await;
        limits.pair_attempt(ip(u32::MAX)).unwrap();
        // Everyone else went idle, so the fill swept them away.
        assert_eq!(limits.len(), 1);
    }
}
