//! Honest delivery from a command: what it recorded for delivery is either
//! handed to a daemon that will deliver it, or delivered here before the
//! command exits, and the person is told which, with the real outcome.
//! Never "sent" for something no receiver confirmed.
//!
//! A daemon runs when this home's state file says so (pid alive, fresh) or
//! when the database records one that is alive: on PostgreSQL its listening
//! connection is open (`pg_stat_activity`), on SQLite its pid lives on this
//! host ([`cairn_store::Store::daemons`]).

use cairn_automation::notify::{Dispatcher, Notifier, owner_id};
use cairn_core::config::Config;
use cairn_core::notification::DeliveryStatus;
use cairn_store::Store;
use chrono::Utc;
use uuid::Uuid;

use crate::daemon::state_file::{self, Liveness};

/// Who delivers what this command recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deliverer {
    /// A running daemon (its pid, and its host when not this one).
    Daemon {
        /// Its process id.
        pid: u32,
        /// Its machine, when another.
        host: Option<String>,
    },
    /// This command, before it exits.
    ThisProcess,
}

/// This machine's name, as daemons record it.
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Finds a running daemon for this home or database.
pub async fn deliverer(config: &Config, store: &Store) -> Deliverer {
    if let Ok(Some(state)) = state_file::read(config.home()).await
        && !state.stopping
        && state_file::liveness(&state, Utc::now()) == Liveness::Running
    {
        return Deliverer::Daemon {
            pid: state.pid,
            host: None,
        };
    }
    let daemons = match store.daemons().await {
        Ok(daemons) => daemons,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the daemons recorded on the database");
            return Deliverer::ThisProcess;
        }
    };
    let here = host_name();
    for d in daemons {
        let alive = match d.connected {
            Some(connected) => connected,
            None => d.host == here && d.pid != std::process::id() && state_file::pid_alive(d.pid),
        };
        if alive {
            return Deliverer::Daemon {
                pid: d.pid,
                host: (d.host != here).then_some(d.host),
            };
        }
    }
    Deliverer::ThisProcess
}

/// What became of one notification this command recorded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settled {
    /// The notification.
    pub id: Uuid,
    /// Its channel.
    pub channel: String,
    /// `delivered`, `queued_for_daemon`, `queued` (a retry is due) or `failed`.
    pub outcome: &'static str,
    /// One line for the person.
    pub line: String,
}

/// Settles the pending notifications `notifier` kept (see
/// [`Notifier::keep_recorded`]): hands them to a running daemon, or
/// delivers each here now (one attempt, within the channel's time limit).
pub async fn settle(notifier: &Notifier, config: &Config) -> Vec<Settled> {
    let ids = notifier.take_recorded();
    if ids.is_empty() {
        return Vec::new();
    }
    let store = notifier.store();
    let who = deliverer(config, store).await;
    let dispatcher = Dispatcher::new(notifier.clone(), owner_id());
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let short = &id.to_string()[..8];
        if let Deliverer::Daemon { pid, host } = &who {
            let channel = match store.get_notification(id).await {
                Ok(Some(n)) => n.channel,
                _ => String::new(),
            };
            let on = host
                .as_ref()
                .map(|h| format!(" on {h}"))
                .unwrap_or_default();
            out.push(Settled {
                id,
                channel,
                outcome: "queued_for_daemon",
                line: format!("notification {short} queued for the daemon (pid {pid}{on})"),
            });
            continue;
        }
        let attempt = dispatcher.deliver_now(id, Utc::now()).await;
        let stored = match store.get_notification(id).await {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                out.push(Settled {
                    id,
                    channel: String::new(),
                    outcome: "queued",
                    line: format!("notification {short}: cannot read its status: {e}"),
                });
                continue;
            }
        };
        let detail = match &attempt {
            Ok(Some(report)) => report.attempt.detail.clone(),
            Ok(None) => "another process is delivering it".to_string(),
            Err(e) => e.to_string(),
        };
        let channel = stored.channel.clone();
        let (outcome, line) = match stored.status {
            DeliveryStatus::Delivered if stored.in_inbox => (
                "delivered",
                format!("notification {short} kept in the inbox"),
            ),
            DeliveryStatus::Delivered => (
                "delivered",
                format!("notification {short} delivered to {channel}"),
            ),
            DeliveryStatus::Pending => (
                "queued",
                format!(
                    "notification {short} queued: {detail}; next attempt at {} (by a running daemon, or `cairn notify deliver`)",
                    stored
                        .next_attempt_at
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                        .unwrap_or_else(|| "-".into())
                ),
            ),
            DeliveryStatus::Failed => (
                "failed",
                format!(
                    "notification {short} not delivered to {channel}: {}; kept in the inbox",
                    stored.last_error.as_deref().unwrap_or(&detail)
                ),
            ),
        };
        out.push(Settled {
            id,
            channel,
            outcome,
            line,
        });
    }
    out
}
