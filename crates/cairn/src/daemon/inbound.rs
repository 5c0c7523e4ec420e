//! The daemon's inbound chat channels (`[channels.NAME]` with `inbound =
//! true`): one supervised component each, `channel.NAME`. A reload
//! ([`InboundChannels::apply`]) compares each channel's table as written
//! with the one its component runs: a changed channel is stopped and
//! started with its new settings (a Telegram channel's polling lease
//! handed over, its cursor in the store, so no update is repeated or
//! lost; a WhatsApp channel's endpoint registered again with its new
//! secrets), a removed one is stopped, an added one started. A channel
//! naming an unset `${VAR}` is recorded failed with the reason, never run.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_agent::agents::Chats;
use cairn_automation::inbound::InboundAdapter;
use cairn_automation::inbound::desk::ApprovalDesk;
use cairn_core::config::Config;
use cairn_store::Store;
use serde_json::Value;

use super::supervisor::{Stoppable, Supervisor};
use crate::wiring::{self, Inbound, InboundParts};

/// One channel as it runs now.
struct Running {
    /// Its table when it was started.
    table: Value,
    /// Its adapter and component (`None`: unavailable, not run).
    live: Option<(Arc<dyn InboundAdapter>, Stoppable)>,
}

/// The inbound channels of one daemon.
pub struct InboundChannels {
    sup: Supervisor,
    parts: InboundParts,
    running: tokio::sync::Mutex<BTreeMap<String, Running>>,
    /// The approval desk and the channel that keeps it
    /// (`agent.approval_channel`): pointed at that channel's adapter
    /// whenever the channels change.
    desk: Option<(ApprovalDesk, String)>,
}

/// The component name of a channel.
fn component(name: &str) -> String {
    format!("channel.{name}")
}

impl InboundChannels {
    /// Starts the channels `config` has, over `chat`.
    pub async fn start(
        config: &Config,
        store: &Store,
        chat: &Arc<Chats>,
        sup: &Supervisor,
        desk: Option<&ApprovalDesk>,
    ) -> anyhow::Result<Arc<Self>> {
        let channels = wiring::inbound_channels(config)?;
        let desk = match (desk, &config.agent.approval_channel) {
            (Some(desk), Some(name)) => Some((desk.clone(), name.clone())),
            _ => None,
        };
        let this = Arc::new(Self {
            sup: sup.clone(),
            parts: wiring::inbound_parts(config, store, chat).await,
            running: tokio::sync::Mutex::new(BTreeMap::new()),
            desk,
        });
        this.apply_checked(channels).await;
        Ok(this)
    }

    /// Brings the running channels to what `config` says; refuses (nothing
    /// changed) when its `[channels]` table has a problem.
    pub async fn apply(&self, config: &Config) -> anyhow::Result<()> {
        let channels = wiring::inbound_channels(config)?;
        self.apply_checked(channels).await;
        Ok(())
    }

    /// Where the gateway's `/whatsapp` hands the WhatsApp channels their
    /// webhooks (each running channel registers itself there).
    pub fn whatsapp_endpoints(&self) -> &cairn_automation::inbound::whatsapp::webhook::Endpoints {
        self.parts.whatsapp_endpoints()
    }

    async fn apply_checked(&self, channels: Vec<wiring::InboundChannel>) {
        let mut running = self.running.lock().await;
        let wanted: BTreeMap<&str, &wiring::InboundChannel> =
            channels.iter().map(|c| (c.name.as_str(), c)).collect();
        let names: Vec<String> = running.keys().cloned().collect();
        for name in names {
            let (changed, successor) = match wanted.get(name.as_str()) {
                Some(c) if running.get(&name).is_some_and(|r| r.table == c.table) => continue,
                Some(c) => (
                    true,
                    matches!(
                        c.inbound,
                        Inbound::Telegram(_) | Inbound::Slack(_) | Inbound::Discord(_)
                    ),
                ),
                None => (false, false),
            };
            if let Some(old) = running.remove(&name)
                && let Some((adapter, stoppable)) = old.live
            {
                // Its lease goes to the poller that replaces it, if one will.
                if successor {
                    adapter.hand_over();
                }
                stoppable.stop().await;
            }
            if changed {
                tracing::info!(channel = %name, "inbound channel changed: restarting it with its new settings");
            } else {
                tracing::info!(channel = %name, "inbound channel removed: stopped");
                self.sup.disabled(&component(&name));
            }
        }
        for channel in channels {
            if running.contains_key(&channel.name) {
                continue;
            }
            let adapter = match &channel.inbound {
                Inbound::Telegram(spec) => {
                    wiring::telegram_adapter(&self.parts, &channel.name, spec)
                        .map_err(|e| format!("{e:#}"))
                }
                Inbound::Slack(spec) => wiring::slack_adapter(&self.parts, &channel.name, spec)
                    .map_err(|e| format!("{e:#}")),
                Inbound::Discord(spec) => wiring::discord_adapter(&self.parts, &channel.name, spec)
                    .map_err(|e| format!("{e:#}")),
                Inbound::WhatsApp(spec) => {
                    wiring::whatsapp_adapter(&self.parts, &channel.name, spec)
                        .map_err(|e| format!("{e:#}"))
                }
                Inbound::Unavailable(why) => Err(why.clone()),
            };
            let live = match adapter {
                Err(why) => {
                    self.sup.unavailable(&component(&channel.name), why);
                    None
                }
                Ok(adapter) => {
                    let run = Arc::clone(&adapter);
                    let stoppable =
                        self.sup
                            .spawn_stoppable(&component(&channel.name), move |cancel| {
                                let adapter = Arc::clone(&run);
                                async move { adapter.run(cancel).await.map_err(anyhow::Error::msg) }
                            });
                    Some((adapter, stoppable))
                }
            };
            running.insert(
                channel.name,
                Running {
                    table: channel.table,
                    live,
                },
            );
        }
        self.point_desk(&running);
    }

    /// Points the approval desk at its channel's running adapter (nobody
    /// to ask while that channel is not running or cannot ask).
    fn point_desk(&self, running: &BTreeMap<String, Running>) {
        let Some((desk, name)) = &self.desk else {
            return;
        };
        let adapter = running.get(name).and_then(|r| r.live.as_ref());
        let open = adapter.and_then(|(adapter, _)| adapter.desk());
        if open.is_none() {
            tracing::warn!(
                channel = %name,
                "agent.approval_channel: no running inbound channel with an owner chat by this name; approvals of /v1, webhook and routine turns are declined as needing a person"
            );
        }
        desk.set(open);
    }
}
