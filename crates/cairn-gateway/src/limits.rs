//! Per-client rate limits and the pairing lockout, kept in memory.
//!
//! Hand-written rather than `governor`: besides two plain per-minute
//! limits we need a lockout that counts *failures* and then refuses
//! everything for a fixed time, which governor's keyed limiters do not
//! model. One mutex-guarded map of small fixed-window counters does all
//! three, and its size is bounded: idle clients are evicted when it fills.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ApiError;

/// `POST /pair` attempts per client per minute.
pub const PAIR_PER_MINUTE: u32 = 10;
/// Wrong pairing codes before a client is locked out.
pub const WRONG_CODES_BEFORE_LOCKOUT: u32 = 5;
/// How long a lockout lasts.
pub const LOCKOUT: Duration = Duration::from_secs(300);
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
    wrong_codes: u32,
    locked_until: Option<Instant>,
    last_seen: Instant,
}

impl Client {
    fn new(now: Instant) -> Self {
        Self {
            pair: Window::new(now),
            auth_failures: Window::new(now),
            wrong_codes: 0,
            locked_until: None,
            last_seen: now,
        }
    }

    /// Nothing about this client matters any more: its windows ended, no
    /// lockout runs and no wrong codes are counted.
    fn idle(&self, now: Instant) -> bool {
        self.locked_until.is_none_or(|t| t <= now)
            && self.wrong_codes == 0
            && now.duration_since(self.last_seen) >= WINDOW
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
        if client.locked_until.is_some_and(|t| t <= now) {
            client.locked_until = None;
        }
        f(client, now)
    }

    /// Counts a `POST /pair` attempt: 429 while the client is locked out or
    /// past [`PAIR_PER_MINUTE`].
    pub fn pair_attempt(&self, ip: IpAddr) -> Result<(), ApiError> {
        self.with_client(ip, |c, now| {
            if let Some(until) = c.locked_until {
                return Err(ApiError::too_many(
                    "too many wrong pairing codes from this client; try again later",
                    secs_until(until, now),
                ));
            }
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

    /// Counts a wrong pairing code; the [`WRONG_CODES_BEFORE_LOCKOUT`]th
    /// locks the client out for [`LOCKOUT`]. Returns whether it is locked now.
    pub fn pair_failed(&self, ip: IpAddr) -> bool {
        self.with_client(ip, |c, now| {
            c.wrong_codes += 1;
            if c.wrong_codes >= WRONG_CODES_BEFORE_LOCKOUT {
                c.wrong_codes = 0;
                c.locked_until = Some(now + LOCKOUT);
                tracing::warn!(client = %ip, "pairing locked out after {WRONG_CODES_BEFORE_LOCKOUT} wrong codes");
                true
            } else {
                false
            }
        })
    }

    /// A pairing succeeded: earlier wrong codes no longer count.
    pub fn pair_succeeded(&self, ip: IpAddr) {
        self.with_client(ip, |c, _| c.wrong_codes = 0);
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
    #![allow(clippy::unwrap_used)]
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
    async fn five_wrong_codes_lock_out_for_five_minutes() {
        let limits = Limits::new();
        for i in 1..=WRONG_CODES_BEFORE_LOCKOUT {
            limits.pair_attempt(ip(1)).unwrap();
            assert_eq!(limits.pair_failed(ip(1)), i == WRONG_CODES_BEFORE_LOCKOUT);
        }
        tokio::time::advance(Duration::from_secs(100)).await;
        let err = limits.pair_attempt(ip(1)).unwrap_err();
        assert_eq!(err.retry_after, Some(200));
        tokio::time::advance(Duration::from_secs(200)).await;
        limits.pair_attempt(ip(1)).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_forgives_earlier_wrong_codes() {
        let limits = Limits::new();
        for _ in 0..WRONG_CODES_BEFORE_LOCKOUT - 1 {
            limits.pair_failed(ip(1));
        }
        limits.pair_succeeded(ip(1));
        assert!(!limits.pair_failed(ip(1)));
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
