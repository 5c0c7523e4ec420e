//! Inbound chat channels: the `[channels.NAME]` entries with
//! `inbound = true` become adapters the daemon's supervisor runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_agent::chat::ChatService;
use cairn_automation::inbound::telegram::api::BotApi;
use cairn_automation::inbound::telegram::{PairingCodes, TelegramAdapter, TelegramInbound};
use cairn_automation::inbound::{InboundAdapter, Pace};
use cairn_automation::notify::channels::telegram::TelegramSpec;
use cairn_automation::notify::{ChannelSpec, owner_id, parse_channels};
use cairn_core::clock::SystemClock;
use cairn_core::config::Config;
use cairn_gateway::pairing::{self, PairingKey, WRONG_CODES_LIMIT};
use cairn_store::Store;

use super::located;

/// How long one `getUpdates` waits for a message.
const POLL_WAIT: Duration = Duration::from_secs(25);
/// How long a daemon's polling lease lasts unrenewed: past one poll, so a
/// live poller keeps it; a dead one's lapses within a minute.
const POLL_LEASE: Duration = Duration::from_secs(60);

/// The configured Telegram channels by name (checked, `${VAR}` expanded).
pub fn telegram_channels(config: &Config) -> anyhow::Result<BTreeMap<String, TelegramSpec>> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let section = config.notify.channels.as_ref();
    let specs = parse_channels(section.map(|s| &s.value), &env).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        located(config, section, &lines)
    })?;
    Ok(specs
        .into_iter()
        .filter_map(|(name, spec)| match spec {
            ChannelSpec::Telegram(t) => Some((name, t)),
            _ => None,
        })
        .collect())
}

/// A client of the bot a spec names.
pub fn bot_api(spec: &TelegramSpec) -> BotApi {
    BotApi::new(
        spec.bot_token.clone(),
        &spec.api_url,
        reqwest::Client::new(),
    )
}

/// `/pair` codes checked as the gateway checks them.
struct GatewayCodes(PairingKey);

impl PairingCodes for GatewayCodes {
    fn hash(&self, typed: &str) -> Option<String> {
        pairing::normalize(typed).map(|code| self.0.hash(&code))
    }

    fn wrong_codes_limit(&self) -> u32 {
        WRONG_CODES_LIMIT
    }
}

/// The adapters of the channels with `inbound = true`, over `chat`.
pub async fn inbound_adapters(
    config: &Config,
    store: &Store,
    chat: &Arc<ChatService>,
) -> anyhow::Result<Vec<Arc<dyn InboundAdapter>>> {
    let inbound: Vec<(String, TelegramSpec)> = telegram_channels(config)?
        .into_iter()
        .filter(|(_, spec)| spec.inbound)
        .collect();
    if inbound.is_empty() {
        return Ok(Vec::new());
    }
    let pairing: Option<Arc<dyn PairingCodes>> = match PairingKey::load_or_create(config.home())
        .await
    {
        Ok(key) => Some(Arc::new(GatewayCodes(key))),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the install key: /pair from chat channels is off");
            None
        }
    };
    let owner = owner_id();
    Ok(inbound
        .into_iter()
        .map(|(name, spec)| {
            let adapter = TelegramAdapter::new(TelegramInbound {
                api: bot_api(&spec),
                allowed: spec.allowed_users.iter().cloned().collect(),
                name,
                store: store.clone(),
                chat: Arc::clone(chat),
                user_id: config.user.id.clone(),
                pairing: pairing.clone(),
                owner: owner.clone(),
                clock: Arc::new(SystemClock),
                poll_wait: POLL_WAIT,
                lease: POLL_LEASE,
                pace: Pace::default(),
            });
            Arc::new(adapter) as Arc<dyn InboundAdapter>
        })
        .collect())
}
