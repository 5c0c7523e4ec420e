//! Delivering pending notifications: claimed in the store under a lease (so
//! of several processes on one database one delivers each), one attempt at
//! a time, every attempt recorded, retries with exponential backoff and
//! jitter, and the inbox (with the reason) when delivery is given up.

use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::Clock;
use tokio_util::sync::CancellationToken;

use cairn_core::notification::{DeliveryAttempt, DeliveryStatus, Notification};
use cairn_store::{AttemptOutcome, StoreError, Topic};
use chrono::{DateTime, Utc};
use rand::Rng;
use tokio::task::JoinSet;

use super::channel::DeliveryError;
use super::router::{Activity, GivenUp, Notifier, NotifySettings, unknown_channel};

/// Notifications claimed per store round-trip.
const BATCH: u32 = 16;

/// How soon the dispatcher tries again after the store failed.
const STORE_RETRY: chrono::Duration = chrono::Duration::seconds(5);

/// What one delivery attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptReport {
    /// The notification.
    pub id: uuid::Uuid,
    /// The attempt as recorded.
    pub attempt: DeliveryAttempt,
    /// Its status afterwards.
    pub status: DeliveryStatus,
    /// When the next attempt is due, if one is.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Delivers notifications for one process.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    notifier: Notifier,
    owner: String,
}

impl Dispatcher {
    /// A dispatcher identified by `owner` in the store's leases (unique per
    /// process: host, pid and a random part).
    pub fn new(notifier: Notifier, owner: impl Into<String>) -> Dispatcher {
        Dispatcher {
            notifier,
            owner: owner.into(),
        }
    }

    /// The notifier it delivers for.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// Delivers everything due at `now`, a batch at a time, attempts of a
    /// batch in parallel. Returns what was attempted.
    pub async fn deliver_due(&self, now: DateTime<Utc>) -> Result<Vec<AttemptReport>, StoreError> {
        let store = self.notifier.store();
        let lease = self.notifier.settings().lease;
        let mut reports = Vec::new();
        loop {
            let claimed = store
                .claim_notifications(&self.owner, now, lease, BATCH)
                .await?;
            if claimed.is_empty() {
                return Ok(reports);
            }
            let mut attempts = JoinSet::new();
            for n in claimed {
                let me = self.clone();
                attempts.spawn(async move { me.attempt(n, now).await });
            }
            while let Some(done) = attempts.join_next().await {
                match done {
                    Ok(Ok(Some(report))) => reports.push(report),
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => return Err(e),
                    // A channel that panicked: its lease lapses and another attempt follows.
                    Err(e) => tracing::error!(error = %e, "a delivery task failed"),
                }
            }
        }
    }

    /// Delivers until `cancel` fires: what is due, then sleeps until the
    /// next notification is due (a retry, or a lease another process holds
    /// lapsing), or until one is recorded: by this process (the notifier
    /// wakes it) or any other (the store's change signal,
    /// [`Topic::Notifications`]). Nothing polls.
    pub async fn run(&self, clock: Arc<dyn Clock>, cancel: CancellationToken) {
        let mut recorded = self.notifier.store().watch(Topic::Notifications);
        loop {
            let now = clock.now();
            // Whatever is recorded from here on wakes the next sleep.
            recorded.mark_seen();
            let wake = match self.deliver_due(now).await {
                Ok(_) => match self.notifier.store().next_notification_due().await {
                    Ok(due) => due,
                    Err(e) => {
                        tracing::warn!(error = %e, "notification dispatcher: cannot read the next due time");
                        Some(now + STORE_RETRY)
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "notification dispatcher: delivery round failed");
                    Some(now + STORE_RETRY)
                }
            };
            if wake.is_some_and(|w| w <= now) {
                continue;
            }
            let due = async {
                match wake {
                    Some(at) => clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.notifier.wake().notified() => {}
                () = recorded.changed() => {}
                () = due => {}
            }
        }
    }

    /// Delivers one notification now, due or not (`cairn notify test`).
    /// `None` when it is not pending or another process holds it.
    pub async fn deliver_now(
        &self,
        id: uuid::Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<AttemptReport>, StoreError> {
        let lease = self.notifier.settings().lease;
        match self
            .notifier
            .store()
            .claim_notification(id, &self.owner, now, lease)
            .await?
        {
            Some(n) => self.attempt(n, now).await,
            None => Ok(None),
        }
    }

    /// One attempt at a notification this dispatcher holds. `None` when
    /// nothing was recorded (the lease was lost, or the channel is unknown
    /// and the notification went to the inbox).
    async fn attempt(
        &self,
        n: Notification,
        now: DateTime<Utc>,
    ) -> Result<Option<AttemptReport>, StoreError> {
        let store = self.notifier.store();
        let channels = self.notifier.channels();
        let Some(channel) = channels.get(&n.channel).cloned() else {
            let reason = unknown_channel(&n.channel, &channels);
            store.fail_to_inbox(n.id, &reason).await?;
            self.notifier.announce_given_up(GivenUp {
                id: n.id,
                channel: n.channel.clone(),
                error: reason,
            });
            return Ok(None);
        };
        let settings = self.notifier.settings();
        // Finish well inside the lease, so no other process starts a second delivery.
        let limit = settings.lease.mul_f64(0.75);
        let result = match tokio::time::timeout(limit, channel.deliver(&n)).await {
            Ok(result) => result,
            Err(_) => Err(DeliveryError::Retryable(format!(
                "no answer within {}s",
                limit.as_secs()
            ))),
        };
        let number = n.attempts + 1;
        let (attempt, outcome) = match result {
            Ok(receipt) => (
                attempt(number, now, true, receipt.detail),
                AttemptOutcome::Delivered,
            ),
            Err(DeliveryError::Permanent(e)) => {
                (attempt(number, now, false, e), AttemptOutcome::GiveUp)
            }
            Err(DeliveryError::Retryable(e)) => {
                let outcome = retry_or_give_up(&n, number, now, &settings, None);
                (attempt(number, now, false, e), outcome)
            }
            Err(DeliveryError::RetryAfter(e, wait)) => {
                let outcome = retry_or_give_up(&n, number, now, &settings, Some(wait));
                let detail = format!("{e} (asked to wait {}s)", wait.as_secs());
                (attempt(number, now, false, detail), outcome)
            }
        };
        if !store
            .record_attempt(n.id, &self.owner, &attempt, &outcome)
            .await?
        {
            tracing::warn!(id = %n.id, "a delivery outlived its lease; another process owns it now");
            return Ok(None);
        }
        let (status, next_attempt_at) = match outcome {
            AttemptOutcome::Delivered => (DeliveryStatus::Delivered, None),
            AttemptOutcome::Retry { next_at } => (DeliveryStatus::Pending, Some(next_at)),
            AttemptOutcome::GiveUp => (DeliveryStatus::Failed, None),
        };
        let outcome = match status {
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Pending => "retry",
            DeliveryStatus::Failed => "failed",
        };
        metrics::counter!("cairn_notifications_total", "channel" => n.channel.clone(), "outcome" => outcome)
            .increment(1);
        match status {
            DeliveryStatus::Delivered => {
                tracing::info!(id = %n.id, channel = %n.channel, attempt = number, "notification delivered");
                self.notifier.announce(Activity::Delivered {
                    id: n.id,
                    channel: n.channel.clone(),
                });
            }
            DeliveryStatus::Pending => {
                tracing::warn!(id = %n.id, channel = %n.channel, attempt = number, error = %attempt.detail, "notification delivery failed; will retry");
            }
            DeliveryStatus::Failed => {
                tracing::warn!(id = %n.id, channel = %n.channel, attempt = number, error = %attempt.detail, "notification given up; kept in the inbox");
                self.notifier.announce_given_up(GivenUp {
                    id: n.id,
                    channel: n.channel.clone(),
                    error: attempt.detail.clone(),
                });
            }
        }
        Ok(Some(AttemptReport {
            id: n.id,
            attempt,
            status,
            next_attempt_at,
        }))
    }
}

/// After failed attempt `number`: give up when the attempts or the age are
/// spent (or the receiver's wait would outlast the age), else retry after
/// the backoff, and never before a wait the receiver asked for.
fn retry_or_give_up(
    n: &Notification,
    number: u32,
    now: DateTime<Utc>,
    settings: &NotifySettings,
    asked: Option<Duration>,
) -> AttemptOutcome {
    let age = (now - n.created_at).to_std().unwrap_or_default();
    let backoff = retry_delay(number, settings.retry_base, settings.retry_max);
    let wait = asked
        .and_then(|w| chrono::Duration::from_std(w).ok())
        .map_or(backoff, |w| w.max(backoff));
    let too_old = age + wait.to_std().unwrap_or_default() > settings.max_age;
    if number >= settings.max_attempts || age >= settings.max_age || (asked.is_some() && too_old) {
        AttemptOutcome::GiveUp
    } else {
        AttemptOutcome::Retry {
            next_at: now + wait,
        }
    }
}

fn attempt(number: u32, at: DateTime<Utc>, delivered: bool, detail: String) -> DeliveryAttempt {
    DeliveryAttempt {
        attempt: number,
        at,
        delivered,
        detail,
    }
}

/// The wait after failed attempt `number`: `base` doubling each time, at
/// most `max`, spread by ±20 % so that retries of many notifications (or
/// of several processes) do not arrive together.
pub fn retry_delay(number: u32, base: Duration, max: Duration) -> chrono::Duration {
    let doubled = base.saturating_mul(1u32 << number.saturating_sub(1).min(20));
    let capped = doubled.min(max);
    let spread = rand::rng().random_range(0.8..=1.2);
    chrono::Duration::from_std(capped.mul_f64(spread)).unwrap_or(chrono::Duration::MAX)
}

/// A dispatcher's owner id: unique per process, readable in the store.
pub fn owner_id() -> String {
    format!(
        "pid{}-{:08x}",
        std::process::id(),
        rand::rng().random::<u32>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_within_bounds() {
        let base = Duration::from_secs(5);
        let max = Duration::from_secs(300);
        for (n, nominal) in [(1, 5.0), (2, 10.0), (3, 20.0), (7, 300.0), (40, 300.0)] {
            for _ in 0..50 {
                let d = retry_delay(n, base, max).num_milliseconds() as f64 / 1000.0;
                assert!(
                    d >= nominal * 0.8 - 0.001 && d <= nominal * 1.2 + 0.001,
                    "attempt {n}: {d}s"
                );
            }
        }
        assert_eq!(
            retry_delay(3, Duration::ZERO, max),
            chrono::Duration::zero()
        );
    }
}
