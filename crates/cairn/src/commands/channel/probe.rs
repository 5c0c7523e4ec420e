//! `cairn channel test NAME`: checks a channel's credentials with its app
//! and sends one test message, timing each step. The message goes
//! straight to the app (not through the outbox), so its timing is the
//! app's.

use std::future::Future;
use std::time::Instant;

use cairn_automation::notify::channels::discord::DiscordSpec;
use cairn_automation::notify::channels::slack::SlackSpec;
use cairn_automation::notify::channels::telegram::TelegramSpec;
use cairn_automation::notify::channels::whatsapp::WhatsAppSpec;
use cairn_automation::notify::{ChannelSpec, Notifier};
use cairn_core::config::Config;
use cairn_core::notification::NewNotification;
use chrono::Utc;
use serde::Serialize;

use crate::exit::BadInput;
use crate::wiring;

/// One step of a test.
#[derive(Debug, Serialize)]
pub struct Step {
    /// What was done (`auth.test`, `chat.postMessage to U1`).
    pub step: String,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// Whether it worked.
    pub ok: bool,
    /// What the app said (a bot's name, an error).
    pub detail: String,
    /// Whether the app refused (a wrong token): a failure of the
    /// configuration, not of the network.
    #[serde(skip)]
    pub refused: bool,
}

/// An error that may be the app refusing the credentials.
pub trait Refusal: std::fmt::Display {
    /// Whether the app answered with a refusal.
    fn refused(&self) -> bool;
}

impl Refusal for cairn_automation::inbound::telegram::api::ApiError {
    fn refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }
}

impl Refusal for cairn_automation::inbound::slack::api::ApiError {
    fn refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }
}

impl Refusal for cairn_automation::inbound::discord::api::ApiError {
    fn refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }
}

impl Refusal for cairn_automation::inbound::whatsapp::api::GraphError {
    fn refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }
}

impl Refusal for cairn_automation::notify::DeliveryError {
    fn refused(&self) -> bool {
        matches!(self, Self::Permanent(_))
    }
}

/// What `cairn channel test` asks.
pub struct Request<'a> {
    /// The channel's name.
    pub name: &'a str,
    /// The chat to send to, when given.
    pub to: Option<&'a str>,
    /// The text.
    pub message: &'a str,
}

/// Runs the test of one channel: its steps, in order; a failed check of
/// the credentials ends it.
pub async fn test(
    config: &Config,
    notifier: &Notifier,
    request: &Request<'_>,
) -> anyhow::Result<(&'static str, Vec<Step>)> {
    let parsed = wiring::parsed_channels(config)?;
    let name = request.name;
    if let Some(unavailable) = parsed.unavailable.get(name) {
        let unset: Vec<String> = unavailable.unset.iter().map(|u| u.to_string()).collect();
        return Err(BadInput(format!(
            "channels.{name} cannot be used here: {}",
            unset.join("; ")
        ))
        .into());
    }
    let spec = match parsed.specs.get(name) {
        Some(spec) => spec,
        None if name == cairn_automation::notify::INBOX => &ChannelSpec::Inbox {},
        None => {
            let mut known: Vec<&str> = parsed.specs.keys().map(String::as_str).collect();
            known.extend(parsed.unavailable.keys().map(String::as_str));
            known.sort_unstable();
            return Err(BadInput(format!(
                "no channel named \"{name}\" (configured: {}); add a [channels.{name}] table to config.toml",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ))
            .into());
        }
    };
    let mut steps = credentials(name, spec).await?;
    if steps.iter().any(|s| !s.ok) {
        return Ok((spec.kind(), steps));
    }
    match spec {
        ChannelSpec::Telegram(t) => telegram(t, request, &mut steps).await?,
        ChannelSpec::Slack(s) => slack(s, notifier, request, &mut steps).await?,
        ChannelSpec::WhatsApp(w) => whatsapp(w, request, &mut steps).await?,
        ChannelSpec::Discord(d) => discord(d, notifier, request, &mut steps).await?,
        ChannelSpec::Inbox {} => {
            return Err(BadInput(format!(
                "channels.{name} is the inbox: notifications are kept in the database (`cairn inbox`), there is nothing to reach"
            ))
            .into());
        }
        other => {
            no_chat(name, other.kind(), request.to)?;
            post(notifier, request, &mut steps).await;
        }
    }
    Ok((spec.kind(), steps))
}

/// Runs `call`, timing it, and records it as a step; `Some` of its value
/// when it worked.
async fn timed<T, E: Refusal>(
    steps: &mut Vec<Step>,
    step: String,
    call: impl Future<Output = Result<T, E>>,
    describe: impl FnOnce(&T) -> String,
) -> Option<T> {
    let started = Instant::now();
    let result = call.await;
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (ok, detail, refused, value) = match result {
        Ok(v) => (true, describe(&v), false, Some(v)),
        Err(e) => (false, e.to_string(), e.refused(), None),
    };
    steps.push(Step {
        step,
        ms,
        ok,
        detail,
        refused,
    });
    value
}

/// A notification channel delivers a test notification, as a routine's
/// would be.
async fn post(notifier: &Notifier, request: &Request<'_>, steps: &mut Vec<Step>) {
    let channels = notifier.channels();
    let Some(channel) = channels.get(request.name) else {
        steps.push(Step {
            step: "deliver".into(),
            ms: 0,
            ok: false,
            detail: format!("channels.{} posts nothing", request.name),
            refused: true,
        });
        return;
    };
    let notification = notifier.prepare(
        NewNotification {
            user_id: cairn_automation::notify::owner_id(),
            channel: Some(request.name.to_string()),
            title: "cairn test message".to_string(),
            body: request.message.to_string(),
            priority: Default::default(),
            tags: vec!["test".to_string()],
            data: None,
            source: "cli:channel-test".to_string(),
        },
        Utc::now(),
    );
    let step = format!("deliver through {}", channel.kind());
    timed(steps, step, channel.deliver(&notification), |r| {
        r.detail.clone()
    })
    .await;
}

/// `--to` names a chat, which only chat apps have.
fn no_chat(name: &str, kind: &str, to: Option<&str>) -> anyhow::Result<()> {
    match to {
        Some(_) => Err(BadInput(format!(
            "--to: channels.{name} is of type {kind}, which has no chats; it posts to its configured target"
        ))
        .into()),
        None => Ok(()),
    }
}

/// Who gets the test message in a chat app: `--to`, else the first
/// allowed user (a direct message).
fn recipient<'a>(
    name: &str,
    request: &Request<'a>,
    allowed: &'a [String],
) -> anyhow::Result<&'a str> {
    match (request.to, allowed.first()) {
        (Some(to), _) => Ok(to),
        (None, Some(first)) => Ok(first),
        (None, None) => Err(BadInput(format!(
            "channels.{name} has no target of its own: name a chat with --to"
        ))
        .into()),
    }
}

/// The checks of a chat app channel's credentials, in order, as `cairn
/// channel test` and `cairn doctor` run them; none for a channel without
/// any (a webhook alone, the other types). The first that fails ends them.
pub async fn credentials(name: &str, spec: &ChannelSpec) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    match spec {
        ChannelSpec::Telegram(t) => {
            let api = wiring::bot_api(t)?;
            timed(&mut steps, "getMe".into(), api.get_me(), |b| {
                match &b.username {
                    Some(user) => format!("the token works: bot {} (@{user})", b.first_name),
                    None => format!("the token works: bot {}", b.first_name),
                }
            })
            .await;
        }
        ChannelSpec::Slack(s) => {
            let Some(api) = wiring::slack_api(s)? else {
                return Ok(steps);
            };
            let me = timed(&mut steps, "auth.test".into(), api.auth_test(), |me| {
                let bot = me.user.as_deref().unwrap_or(&me.user_id);
                format!("the bot token works: {bot} in workspace {}", me.team_id)
            })
            .await;
            if me.is_some() && s.inbound {
                let step = "apps.connections.open".into();
                timed(&mut steps, step, api.open_connection(), |_| {
                    "the app token opens Socket Mode".to_string()
                })
                .await;
            }
        }
        ChannelSpec::Discord(d) => {
            let Some(api) = wiring::discord_api(name, d)? else {
                return Ok(steps);
            };
            timed(&mut steps, "GET /users/@me".into(), api.me(), |me| {
                format!("the bot token works: {} ({})", me.username, me.id)
            })
            .await;
        }
        ChannelSpec::WhatsApp(w) => {
            let api = wiring::graph_api(w)?;
            let step = format!("read phone number {}", w.phone_number_id);
            timed(&mut steps, step, api.phone_number(), |number| {
                format!("the access token works: {number}")
            })
            .await;
        }
        _ => {}
    }
    Ok(steps)
}

async fn telegram(
    spec: &TelegramSpec,
    request: &Request<'_>,
    steps: &mut Vec<Step>,
) -> anyhow::Result<()> {
    let api = wiring::bot_api(spec)?;
    let to = request.to.unwrap_or(&spec.chat_id);
    let chat: i64 = to.trim().parse().map_err(|_| {
        BadInput(format!(
            "--to: \"{to}\" is not a Telegram chat id (a number)"
        ))
    })?;
    let step = format!("sendMessage to {chat}");
    timed(
        steps,
        step,
        api.send_message(chat, request.message, false, None),
        |id| format!("message {id}"),
    )
    .await;
    Ok(())
}

async fn slack(
    spec: &SlackSpec,
    notifier: &Notifier,
    request: &Request<'_>,
    steps: &mut Vec<Step>,
) -> anyhow::Result<()> {
    let Some(api) = wiring::slack_api(spec)? else {
        // A webhook alone: the test is a notification through it.
        no_chat(request.name, "slack (webhook_url only)", request.to)?;
        post(notifier, request, steps).await;
        return Ok(());
    };
    if request.to.is_none() && spec.webhook_url.is_some() {
        post(notifier, request, steps).await;
        return Ok(());
    }
    let to = recipient(request.name, request, &spec.allowed_users)?;
    let step = format!("chat.postMessage to {to}");
    timed(
        steps,
        step,
        api.post_message(to, None, request.message, None),
        |ts| format!("message {ts}"),
    )
    .await;
    Ok(())
}

async fn whatsapp(
    spec: &WhatsAppSpec,
    request: &Request<'_>,
    steps: &mut Vec<Step>,
) -> anyhow::Result<()> {
    let api = wiring::graph_api(spec)?;
    let to = recipient(request.name, request, &spec.allowed_users)?;
    let step = format!("send text to {to}");
    timed(
        steps,
        step,
        api.send_text(to, request.message, None),
        |id| format!("message {id}"),
    )
    .await;
    Ok(())
}

async fn discord(
    spec: &DiscordSpec,
    notifier: &Notifier,
    request: &Request<'_>,
    steps: &mut Vec<Step>,
) -> anyhow::Result<()> {
    let Some(api) = wiring::discord_api(request.name, spec)? else {
        // A webhook alone: the test is a notification through it.
        no_chat(request.name, "discord (webhook_url only)", request.to)?;
        post(notifier, request, steps).await;
        return Ok(());
    };
    if request.to.is_none() && spec.webhook_url.is_some() {
        post(notifier, request, steps).await;
        return Ok(());
    }
    let channel = match request.to {
        Some(to) => to.to_string(),
        None => {
            let user = recipient(request.name, request, &spec.allowed_users)?;
            let step = format!("open a direct message with {user}");
            match timed(steps, step, api.open_dm(user), |id| format!("channel {id}")).await {
                Some(channel) => channel,
                None => return Ok(()),
            }
        }
    };
    let body = serde_json::json!({
        "content": request.message,
        "allowed_mentions": { "parse": [] },
    });
    let step = format!("POST /channels/{channel}/messages");
    timed(steps, step, api.post_message(&channel, body), |id| {
        format!("message {id}")
    })
    .await;
    Ok(())
}
