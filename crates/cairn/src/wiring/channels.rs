//! Inbound chat channels: the `[channels.NAME]` entries with
//! `inbound = true` become adapters the daemon runs (and a reload
//! restarts, `crate::daemon::inbound`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_agent::agents::Chats;
use cairn_automation::inbound::discord::api::DiscordApi;
use cairn_automation::inbound::discord::{self, DiscordAdapter, DiscordInbound};
use cairn_automation::inbound::people::{PairingCodes, People};
use cairn_automation::inbound::slack::api::SlackApi;
use cairn_automation::inbound::slack::{self, SlackAdapter, SlackInbound};
use cairn_automation::inbound::telegram::api::BotApi;
use cairn_automation::inbound::telegram::{self, TelegramAdapter, TelegramInbound};
use cairn_automation::inbound::whatsapp::api::GraphApi;
use cairn_automation::inbound::whatsapp::webhook::Endpoints;
use cairn_automation::inbound::whatsapp::{self, WhatsAppAdapter, WhatsAppInbound};
use cairn_automation::inbound::{InboundAdapter, Pace};
use cairn_automation::notify::channels::discord::DiscordSpec;
use cairn_automation::notify::channels::slack::SlackSpec;
use cairn_automation::notify::channels::telegram::TelegramSpec;
use cairn_automation::notify::channels::whatsapp::WhatsAppSpec;
use cairn_automation::notify::{ChannelSpec, ParsedChannels, owner_id, parse_channels};
use cairn_core::clock::SystemClock;
use cairn_core::config::Config;
use cairn_gateway::pairing::{self, PairingKey, WRONG_CODES_LIMIT};
use cairn_store::Store;
use secrecy::SecretString;

use super::{located, unset_reason};

/// How long one `getUpdates` waits for a message.
const POLL_WAIT: Duration = Duration::from_secs(25);
/// How long a daemon's polling lease lasts unrenewed: past one poll, so a
/// live poller keeps it; a dead one's lapses within a minute.
const POLL_LEASE: Duration = Duration::from_secs(60);

/// A client of the Slack app a spec names; `None` for a webhook alone.
pub fn slack_api(spec: &SlackSpec) -> anyhow::Result<Option<SlackApi>> {
    let Some(bot_token) = &spec.bot_token else {
        return Ok(None);
    };
    // Without an app token (outbound only) the app token's calls are refused.
    let app_token = spec.app_token.clone().unwrap_or_default();
    let http = cairn_llm::tls::client().context("cannot build the HTTP client for Slack")?;
    Ok(Some(SlackApi::new(
        bot_token.clone(),
        app_token,
        &spec.api_url,
        http,
    )))
}

/// A client of the Discord bot a spec names; `None` for a webhook alone.
pub fn discord_api(name: &str, spec: &DiscordSpec) -> anyhow::Result<Option<DiscordApi>> {
    let Some(bot_token) = &spec.bot_token else {
        return Ok(None);
    };
    let http = cairn_llm::tls::client().context("cannot build the HTTP client for Discord")?;
    DiscordApi::new(bot_token.clone(), &spec.api_url, http)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("channels.{name}.{e}"))
}

/// The `[channels]` table, checked (`${VAR}` expanded); a bad table is an
/// error naming its file, line and key.
pub fn parsed_channels(config: &Config) -> anyhow::Result<ParsedChannels> {
    let section = config.notify.channels.as_ref();
    parse_channels(section.map(|s| &s.value), config.env()).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        located(config, section, &lines)
    })
}

/// A channel that receives messages, as configured.
pub enum Inbound {
    /// A Telegram bot, ready to poll.
    Telegram(TelegramSpec),
    /// A Slack app, ready to open its Socket Mode connection.
    Slack(SlackSpec),
    /// A Discord bot, ready to open its gateway connection.
    Discord(DiscordSpec),
    /// A WhatsApp number, fed by webhooks through the gateway.
    WhatsApp(WhatsAppSpec),
    /// Its table names an unset `${VAR}`: why (file, line, key, variable).
    Unavailable(String),
}

/// One channel with `inbound = true`: its name, its table as written (a
/// reload compares it), and what it is.
pub struct InboundChannel {
    /// `[channels.NAME]`.
    pub name: String,
    /// The table as written in config.toml.
    pub table: serde_json::Value,
    /// Ready, or why not.
    pub inbound: Inbound,
}

/// Every channel with `inbound = true`, checked (nothing started).
pub fn inbound_channels(config: &Config) -> anyhow::Result<Vec<InboundChannel>> {
    let section = config.notify.channels.as_ref();
    let table = |name: &str| {
        section
            .and_then(|s| s.value.get(name))
            .cloned()
            .unwrap_or_default()
    };
    let parsed = parsed_channels(config)?;
    let mut out: Vec<InboundChannel> = parsed
        .specs
        .into_iter()
        .filter_map(|(name, spec)| match spec {
            ChannelSpec::Telegram(t) if t.inbound => Some(InboundChannel {
                table: table(&name),
                name,
                inbound: Inbound::Telegram(t),
            }),
            ChannelSpec::Slack(s) if s.inbound => Some(InboundChannel {
                table: table(&name),
                name,
                inbound: Inbound::Slack(s),
            }),
            ChannelSpec::Discord(d) if d.inbound => Some(InboundChannel {
                table: table(&name),
                name,
                inbound: Inbound::Discord(d),
            }),
            ChannelSpec::WhatsApp(w) if w.inbound => Some(InboundChannel {
                table: table(&name),
                name,
                inbound: Inbound::WhatsApp(w),
            }),
            _ => None,
        })
        .collect();
    for (name, channel) in parsed.unavailable.into_iter().filter(|(_, c)| c.inbound) {
        out.push(InboundChannel {
            table: table(&name),
            inbound: Inbound::Unavailable(unset_reason(config, section, &channel.unset)),
            name,
        });
    }
    Ok(out)
}

/// A client of the bot a spec names.
pub fn bot_api(spec: &TelegramSpec) -> anyhow::Result<BotApi> {
    let http = cairn_llm::tls::client().context("cannot build the HTTP client for Telegram")?;
    Ok(BotApi::new(spec.bot_token.clone(), &spec.api_url, http))
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

/// What every inbound adapter of this process shares.
#[derive(Clone)]
pub struct InboundParts {
    store: Store,
    chat: Arc<Chats>,
    user_id: String,
    pairing: Option<Arc<dyn PairingCodes>>,
    owner: String,
    whatsapp: Endpoints,
}

impl InboundParts {
    /// Who may talk through the channel `name` of `app`: the configured
    /// `allowed` ids, the store's, and `/pair`; strangers are told to ask
    /// for `allow_command` (without the id).
    pub fn people(
        &self,
        name: &str,
        app: &'static str,
        allow_command: String,
        allowed: &[String],
    ) -> People {
        People {
            channel: name.to_string(),
            app,
            allow_command,
            allowed: allowed.iter().cloned().collect(),
            store: self.store.clone(),
            pairing: self.pairing.clone(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Where the gateway hands the WhatsApp channels their webhooks.
    pub fn whatsapp_endpoints(&self) -> &Endpoints {
        &self.whatsapp
    }
}

/// The shared parts of the inbound adapters over `chat` (reads the install
/// key `/pair` codes are checked with).
pub async fn inbound_parts(config: &Config, store: &Store, chat: &Arc<Chats>) -> InboundParts {
    let pairing: Option<Arc<dyn PairingCodes>> = match PairingKey::load_or_create(config.home())
        .await
    {
        Ok(key) => Some(Arc::new(GatewayCodes(key))),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the install key: /pair from chat channels is off");
            None
        }
    };
    InboundParts {
        store: store.clone(),
        chat: Arc::clone(chat),
        user_id: config.user.id.clone(),
        pairing,
        owner: owner_id(),
        whatsapp: Endpoints::default(),
    }
}

/// The adapter of the Telegram channel `name`.
pub fn telegram_adapter(
    parts: &InboundParts,
    name: &str,
    spec: &TelegramSpec,
) -> anyhow::Result<Arc<dyn InboundAdapter>> {
    Ok(Arc::new(TelegramAdapter::new(TelegramInbound {
        api: bot_api(spec)?,
        people: parts.people(
            name,
            "Telegram",
            telegram::ALLOW_COMMAND.to_string(),
            &spec.allowed_users,
        ),
        name: name.to_string(),
        store: parts.store.clone(),
        chat: Arc::clone(&parts.chat),
        user_id: parts.user_id.clone(),
        owner: parts.owner.clone(),
        clock: Arc::new(SystemClock),
        poll_wait: POLL_WAIT,
        lease: POLL_LEASE,
        pace: Pace::default(),
        owner_chat: spec.chat_id.trim().parse().ok(),
    })))
}

/// The adapter of the Slack channel `name` (its tokens checked present).
pub fn slack_adapter(
    parts: &InboundParts,
    name: &str,
    spec: &SlackSpec,
) -> anyhow::Result<Arc<dyn InboundAdapter>> {
    let (Some(api), true) = (slack_api(spec)?, spec.app_token.is_some()) else {
        anyhow::bail!("channels.{name}: inbound Slack needs bot_token and app_token");
    };
    Ok(Arc::new(SlackAdapter::new(SlackInbound {
        api,
        people: parts.people(
            name,
            "Slack",
            format!("{} {name}", slack::ALLOW_COMMAND),
            &spec.allowed_users,
        ),
        name: name.to_string(),
        store: parts.store.clone(),
        chat: Arc::clone(&parts.chat),
        user_id: parts.user_id.clone(),
        owner: parts.owner.clone(),
        clock: Arc::new(SystemClock),
        lease: POLL_LEASE,
        pace: Pace {
            typing_every: Duration::from_secs(3600),
            ..Pace::default()
        },
    })))
}

/// The adapter of the Discord channel `name` (its token checked present).
pub fn discord_adapter(
    parts: &InboundParts,
    name: &str,
    spec: &DiscordSpec,
) -> anyhow::Result<Arc<dyn InboundAdapter>> {
    let Some(api) = discord_api(name, spec)? else {
        anyhow::bail!("channels.{name}.bot_token: inbound Discord needs the bot's token");
    };
    Ok(Arc::new(DiscordAdapter::new(DiscordInbound {
        api,
        people: parts.people(
            name,
            "Discord",
            format!("{} {name}", discord::ALLOW_COMMAND),
            &spec.allowed_users,
        ),
        name: name.to_string(),
        store: parts.store.clone(),
        chat: Arc::clone(&parts.chat),
        user_id: parts.user_id.clone(),
        owner: parts.owner.clone(),
        clock: Arc::new(SystemClock),
        lease: POLL_LEASE,
        pace: discord::PACE,
    })))
}

/// A client of the Graph API for the number a spec names.
pub fn graph_api(spec: &WhatsAppSpec) -> anyhow::Result<GraphApi> {
    let http = cairn_llm::tls::client().context("cannot build the HTTP client for WhatsApp")?;
    Ok(GraphApi::new(
        spec.access_token.clone(),
        &spec.api_url,
        &spec.phone_number_id,
        http,
    ))
}

/// The adapter of the WhatsApp channel `name`.
pub fn whatsapp_adapter(
    parts: &InboundParts,
    name: &str,
    spec: &WhatsAppSpec,
) -> anyhow::Result<Arc<dyn InboundAdapter>> {
    // Checked present when the table was read; empty refuses everything.
    let secret = |s: &Option<SecretString>| s.clone().unwrap_or_else(|| SecretString::from(""));
    Ok(Arc::new(WhatsAppAdapter::new(WhatsAppInbound {
        api: graph_api(spec)?,
        endpoints: parts.whatsapp.clone(),
        verify_token: secret(&spec.verify_token),
        app_secret: secret(&spec.app_secret),
        phone_number_id: spec.phone_number_id.clone(),
        people: Arc::new(parts.people(
            name,
            "WhatsApp",
            format!("{} {name}", whatsapp::ALLOW_COMMAND),
            &spec.allowed_users,
        )),
        name: name.to_string(),
        store: parts.store.clone(),
        chat: Arc::clone(&parts.chat),
        user_id: parts.user_id.clone(),
        clock: Arc::new(SystemClock),
        pace: Pace::default(),
    })))
}
