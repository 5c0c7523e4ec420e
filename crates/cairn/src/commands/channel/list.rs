//! `cairn channel list`: every channel, what it does and how it fares.
//! A channel that receives messages is judged by its component in the
//! daemon's state file (`channel.NAME`); one that posts notifications by
//! its deliveries in the store.

use std::collections::BTreeMap;

use cairn_automation::notify::INBOX;
use cairn_core::config::Config;
use cairn_gateway::status::{ComponentHealth, ComponentState};
use cairn_store::{ChannelDeliveries, Store};
use chrono::Utc;
use serde::Serialize;

use crate::daemon::state_file::{self, DaemonState, Liveness};
use crate::wiring;

/// One channel as `cairn channel list` shows it.
#[derive(Debug, Serialize)]
pub struct Listed {
    /// `[channels.NAME]`.
    pub name: String,
    /// Its `type`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Whether it receives messages (`inbound = true`).
    pub receives: bool,
    /// Whether notifications can be posted to it.
    pub posts: bool,
    /// One word: `ok`, `idle` (never used), `starting`, `failing`,
    /// `stopped`, `daemon_not_running` or `unavailable`.
    pub health: &'static str,
    /// Why, when it is not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The receiving component's health in the running daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiving: Option<ComponentHealth>,
    /// How notifications to it fared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<ChannelDeliveries>,
}

/// Every configured channel (and the built-in inbox), by name.
pub async fn list(config: &Config, store: &Store) -> anyhow::Result<Vec<Listed>> {
    let parsed = wiring::parsed_channels(config)?;
    let home = crate::settings::home_dir()?;
    let daemon = state_file::read(&home)
        .await?
        .filter(|s| !s.stopping && state_file::liveness(s, Utc::now()) == Liveness::Running);
    let mut deliveries: BTreeMap<String, ChannelDeliveries> = store
        .channel_deliveries()
        .await?
        .into_iter()
        .map(|d| (d.channel.clone(), d))
        .collect();
    let mut out = Vec::new();
    for (name, spec) in &parsed.specs {
        let receiving = spec
            .inbound()
            .then(|| receiving(daemon.as_ref(), name))
            .flatten();
        let delivered = spec
            .posts()
            .then(|| deliveries.remove(name).unwrap_or_else(|| unused(name)));
        let (health, detail) = judge(
            spec.inbound(),
            daemon.is_some(),
            receiving.as_ref(),
            delivered.as_ref(),
        );
        out.push(Listed {
            name: name.clone(),
            kind: spec.kind(),
            receives: spec.inbound(),
            posts: spec.posts(),
            health,
            detail,
            receiving,
            deliveries: delivered,
        });
    }
    for (name, channel) in &parsed.unavailable {
        let unset: Vec<String> = channel.unset.iter().map(|u| u.to_string()).collect();
        out.push(Listed {
            name: name.clone(),
            kind: channel.kind,
            receives: channel.inbound,
            posts: false,
            health: "unavailable",
            detail: Some(unset.join("; ")),
            receiving: None,
            deliveries: None,
        });
    }
    if !out.iter().any(|c| c.name == INBOX) {
        let delivered = deliveries.remove(INBOX).unwrap_or_else(|| unused(INBOX));
        let (health, detail) = judge(false, daemon.is_some(), None, Some(&delivered));
        out.push(Listed {
            name: INBOX.to_string(),
            kind: "inbox",
            receives: false,
            posts: true,
            health,
            detail,
            receiving: None,
            deliveries: Some(delivered),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn unused(name: &str) -> ChannelDeliveries {
    ChannelDeliveries {
        channel: name.to_string(),
        ..ChannelDeliveries::default()
    }
}

fn receiving(daemon: Option<&DaemonState>, name: &str) -> Option<ComponentHealth> {
    daemon?.components.get(&format!("channel.{name}")).cloned()
}

/// The channel's one-word health and why: the worse of its receiving
/// and its posting.
fn judge(
    receives: bool,
    daemon_runs: bool,
    receiving: Option<&ComponentHealth>,
    deliveries: Option<&ChannelDeliveries>,
) -> (&'static str, Option<String>) {
    if receives {
        let judged = match receiving {
            None if !daemon_runs => Some((
                "daemon_not_running",
                "no daemon runs to receive its messages".to_string(),
            )),
            None => Some((
                "stopped",
                "the running daemon does not receive on it (restart it after changing the channel)"
                    .to_string(),
            )),
            Some(h) => match h.state {
                ComponentState::Running => None,
                ComponentState::Starting => Some(("starting", "connecting".to_string())),
                ComponentState::BackingOff | ComponentState::Failed => Some((
                    "failing",
                    h.last_error.clone().unwrap_or_else(|| "failed".to_string()),
                )),
                ComponentState::Disabled | ComponentState::Stopped => Some((
                    "stopped",
                    h.last_error
                        .clone()
                        .unwrap_or_else(|| "stopped".to_string()),
                )),
            },
        };
        if let Some((health, why)) = judged {
            return (health, Some(why));
        }
    }
    let Some(d) = deliveries else {
        return ("ok", None);
    };
    match (d.last_delivered_at, d.last_failed_at) {
        (_, Some(failed)) if d.last_delivered_at.is_none_or(|ok| failed > ok) => (
            "failing",
            Some(format!(
                "the last delivery failed at {}: {}",
                failed.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                d.last_error.as_deref().unwrap_or("-")
            )),
        ),
        (None, None) if !receives => ("idle", Some("nothing sent to it yet".to_string())),
        _ => ("ok", None),
    }
}

/// The list as text, one channel a line.
pub fn print(channels: &[Listed]) {
    println!(
        "{:<14} {:<9} {:<16} {:<18} DETAIL",
        "NAME", "TYPE", "DOES", "HEALTH"
    );
    for c in channels {
        let does = match (c.receives, c.posts) {
            (true, true) => "chats, notifies",
            (true, false) => "chats",
            (false, true) => "notifies",
            (false, false) => "-",
        };
        let mut detail = c.detail.clone().unwrap_or_default();
        if let Some(d) = &c.deliveries
            && d.delivered + d.pending + d.failed > 0
        {
            let counts = format!(
                "{} delivered, {} pending, {} failed",
                d.delivered, d.pending, d.failed
            );
            detail = if detail.is_empty() {
                counts
            } else {
                format!("{detail}; {counts}")
            };
        }
        if let Some(h) = &c.receiving
            && h.state == ComponentState::Running
        {
            let since = h.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let running = format!("receiving since {since}, {} restarts", h.restarts);
            detail = if detail.is_empty() {
                running
            } else {
                format!("{running}; {detail}")
            };
        }
        println!(
            "{:<14} {:<9} {:<16} {:<18} {detail}",
            c.name, c.kind, does, c.health
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(state: ComponentState, error: Option<&str>) -> ComponentHealth {
        ComponentHealth {
            state,
            since: Utc::now(),
            last_error: error.map(str::to_string),
            restarts: 0,
            started_at: None,
            last_success: None,
            retry_at: None,
        }
    }

    fn at(secs: i64) -> Option<chrono::DateTime<Utc>> {
        chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0)
    }

    #[test]
    fn a_receiving_channel_is_judged_by_its_component_then_its_deliveries() {
        assert_eq!(judge(true, false, None, None).0, "daemon_not_running");
        assert_eq!(judge(true, true, None, None).0, "stopped");
        let running = health(ComponentState::Running, None);
        assert_eq!(judge(true, true, Some(&running), None), ("ok", None));
        let backing = health(ComponentState::BackingOff, Some("invalid_auth"));
        assert_eq!(
            judge(true, true, Some(&backing), None),
            ("failing", Some("invalid_auth".to_string()))
        );
        let failing = ChannelDeliveries {
            last_delivered_at: at(1),
            last_failed_at: at(2),
            last_error: Some("HTTP 500".into()),
            ..ChannelDeliveries::default()
        };
        let (word, why) = judge(true, true, Some(&running), Some(&failing));
        assert_eq!(word, "failing");
        assert!(why.is_some_and(|w| w.ends_with(": HTTP 500")));
    }

    #[test]
    fn a_posting_channel_is_judged_by_its_last_attempt() {
        let recovered = ChannelDeliveries {
            last_delivered_at: at(3),
            last_failed_at: at(2),
            ..ChannelDeliveries::default()
        };
        assert_eq!(judge(false, false, None, Some(&recovered)).0, "ok");
        assert_eq!(judge(false, true, None, Some(&unused("x"))).0, "idle");
        let never_ok = ChannelDeliveries {
            last_failed_at: at(2),
            ..ChannelDeliveries::default()
        };
        assert_eq!(judge(false, true, None, Some(&never_ok)).0, "failing");
    }
}
