//! Inbound Discord: a `[channels.NAME]` of `type = "discord"` with
//! `inbound = true` receives messages over the gateway (a WebSocket the
//! daemon opens: no public URL) and answers through the REST API.
//!
//! Of several daemons on one database, the one holding the channel's
//! lease in the store keeps the gateway connection (the others look
//! again every quarter lease); Discord would otherwise deliver each event
//! to every session. Each chat (a direct message, a server channel) is
//! its own session, `discord:<channel id>`. People not allowed
//! (`allowed_users`, `cairn channel allow`, `/pair <code>`) are told once
//! how to be allowed and reach nothing else; in server channels the bot
//! listens only when mentioned or replied to, and its own messages (and
//! other bots') are never heard.

pub mod api;
pub mod events;
pub mod format;
mod gateway;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::agents::Chats;
use cairn_agent::chat::{ChatService, Inbound};
use cairn_agent::runner::ApprovalRequest;
use cairn_core::clock::Clock;
use cairn_store::Store;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::api::DiscordApi;
use self::events::{Interaction, MESSAGE_COMPONENT, Message, addressed};
use super::in_order::Baton;
use super::parse_button;
use super::people::People;
use super::{
    Approvals, Conversation, InboundAdapter, MessageId, Pace, Progress, converse, decision, inbox,
};

/// The command the owner runs to allow a Discord user.
pub const ALLOW_COMMAND: &str = "cairn channel allow";

/// Discord's typing indicator lasts ten seconds: renewed before it ends.
pub const PACE: Pace = Pace {
    edit_every: Duration::from_secs(1),
    typing_every: Duration::from_secs(8),
};

/// What the adapter needs besides the bot.
pub struct DiscordInbound {
    /// The channel's name (`[channels.NAME]`), which keys its lease in
    /// the store.
    pub name: String,
    /// The bot's REST API.
    pub api: DiscordApi,
    /// Who may talk to the agent.
    pub people: People,
    /// The database.
    pub store: Store,
    /// Where messages go.
    pub chat: Arc<Chats>,
    /// The owner's cairn user id, whose sessions the chats are.
    pub user_id: String,
    /// This process's lease owner id.
    pub owner: String,
    /// Wall time for the lease.
    pub clock: Arc<dyn Clock>,
    /// How long the gateway's lease lasts unrenewed.
    pub lease: Duration,
    /// How turns are shown.
    pub pace: Pace,
}

/// The adapter: cheap to share; one `run` at a time.
#[derive(Clone)]
pub struct DiscordAdapter(Arc<Inner>);

struct Inner {
    cfg: DiscordInbound,
    approvals: Approvals,
    /// Set by [`InboundAdapter::hand_over`]: the lease outlives this run.
    hand_over: AtomicBool,
    /// The bot's own user id (`GET /users/@me`, then READY).
    bot: Mutex<String>,
}

impl DiscordAdapter {
    /// An adapter over `cfg`.
    pub fn new(cfg: DiscordInbound) -> Self {
        Self(Arc::new(Inner {
            cfg,
            approvals: Approvals::default(),
            hand_over: AtomicBool::new(false),
            bot: Mutex::default(),
        }))
    }

    fn bot(&self) -> String {
        self.0.bot.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_bot(&self, id: &str) {
        *self.0.bot.lock().unwrap_or_else(|p| p.into_inner()) = id.to_string();
    }

    /// Says `text` in the message's channel (as a reply in a server).
    async fn say(&self, message: &Message, text: &str) {
        let reply_to = (!message.direct()).then_some(message.id.as_str());
        let body = message_body(&format::markdown(text), reply_to);
        if let Err(e) = self.0.cfg.api.post_message(&message.channel_id, body).await {
            tracing::warn!(channel = %self.0.cfg.name, error = %e, "cannot answer on Discord");
        }
    }

    /// A MESSAGE_CREATE: a message for the agent, maybe. `baton` is
    /// passed on once the message is handed to the chat service (or
    /// dropped), so the chat's next message may follow.
    async fn on_message(&self, message: Message, baton: Baton) {
        let cfg = &self.0.cfg;
        let Some(text) = addressed(&self.bot(), &message) else {
            return;
        };
        let user = message.author.id.clone();
        if !cfg.people.allowed(&user).await {
            if let Some(answer) = cfg.people.stranger(&user, &text).await {
                self.say(&message, &answer).await;
            }
            return;
        }
        if text.starts_with("/pair") {
            self.say(&message, "You are already allowed to talk to this agent.")
                .await;
            return;
        }
        // The agent bound to this chat answers it (`[[agents]]`).
        let service = cfg.chat.pick(&cfg.name, &message.channel_id, &user);
        let mut inbound = Inbound {
            user_id: cfg.user_id.clone(),
            channel: format!("discord:{}", message.channel_id),
            thread: None,
            text,
            images: Vec::new(),
        };
        if let Err(e) = self.take_files(&service, &message, &mut inbound).await {
            self.say(&message, &format!("⚠️ {e}")).await;
            return;
        }
        if inbound.text.trim().is_empty() && inbound.images.is_empty() {
            return;
        }
        let conversation = DiscordChat {
            api: &cfg.api,
            channel: &message.channel_id,
            reply_to: (!message.direct()).then_some(message.id.as_str()),
        };
        baton.pass();
        converse(
            &service,
            inbound,
            Some(&message.id),
            &conversation,
            &self.0.approvals,
            cfg.pace,
        )
        .await;
    }

    /// The message's attachments: pictures as image input, the rest
    /// saved in the workspace's `inbox/` and named in the text.
    async fn take_files(
        &self,
        service: &ChatService,
        message: &Message,
        inbound: &mut Inbound,
    ) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let images = message.attachments.iter().filter(|a| a.is_image()).count();
        // Refused before any download (with `gateway.max_images = 0`).
        if let Some(refusal) = cairn_core::image::too_many_images(images, service.max_images()) {
            return Err(format!("The pictures could not be used: {refusal}"));
        }
        for file in &message.attachments {
            let name = if file.filename.is_empty() {
                "file"
            } else {
                &file.filename
            };
            if file.size.is_some_and(|n| n > api::DOWNLOAD_LIMIT) {
                return Err(format!(
                    "{name} could not be downloaded: it is over {} MiB",
                    api::DOWNLOAD_LIMIT >> 20
                ));
            }
            let bytes = cfg
                .api
                .download(&file.url)
                .await
                .map_err(|e| format!("{name} could not be downloaded: {e}"))?;
            if file.is_image() {
                service
                    .attach_image(inbound, bytes)
                    .await
                    .map_err(|e| format!("{name} could not be used: {e}"))?;
            } else {
                let workspace = service.settings().workspace.clone();
                let saved = inbox::save(&workspace, name, bytes)
                    .await
                    .map_err(|e| format!("{name} could not be saved: {e}"))?;
                inbound.text = inbox::with_note(&inbound.text, &saved);
            }
        }
        Ok(())
    }

    /// An INTERACTION_CREATE: an approval's button, answered at once
    /// (Discord waits three seconds): the request's message edited to
    /// show the decision, or a refusal only the presser sees.
    async fn on_button(&self, interaction: Interaction) {
        let cfg = &self.0.cfg;
        if interaction.kind != MESSAGE_COMPONENT {
            return;
        }
        let presser = interaction.presser().unwrap_or_default();
        let pressed = interaction.custom_id().and_then(parse_button);
        let refusal = if !cfg.people.allowed(presser).await {
            tracing::info!(channel = %cfg.name, user = %presser, "a button pressed by someone not allowed was refused");
            Some("You are not allowed to answer this.")
        } else {
            match pressed {
                Some((ticket, answer)) if self.0.approvals.decide(ticket, answer) => None,
                Some(_) => Some("This request is no longer waiting."),
                None => Some("Unknown button."),
            }
        };
        let body = match (refusal, pressed) {
            (None, Some((_, answer))) => {
                let asked = interaction
                    .message
                    .as_ref()
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default();
                // The request reads "Approve TOOL?\nSUMMARY" (`ask`).
                let summary = asked.split_once('\n').map_or(asked, |(_, s)| s);
                let content = format!("{}: {summary}", decision(answer));
                json!({"type": 7, "data": {"content": content, "components": []}})
            }
            (refusal, _) => json!({"type": 4, "data": {
                "content": refusal.unwrap_or("Unknown button."),
                "flags": EPHEMERAL,
            }}),
        };
        if let Err(e) = cfg
            .api
            .interaction_callback(&interaction.id, &interaction.token, body)
            .await
        {
            tracing::debug!(channel = %cfg.name, error = %e, "cannot answer a button press");
        }
    }
}

/// Message flag 64: only the person who pressed sees it.
const EPHEMERAL: u64 = 64;

/// A message's body: no mention in an answer pings anyone; in a server
/// channel it replies to the person's message.
fn message_body(content: &str, reply_to: Option<&str>) -> Value {
    let mut body = json!({"content": content, "allowed_mentions": {"parse": []}});
    if let Some(id) = reply_to {
        body["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
    }
    body
}

#[async_trait]
impl InboundAdapter for DiscordAdapter {
    fn name(&self) -> &str {
        &self.0.cfg.name
    }

    async fn run(&self, cancel: CancellationToken) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let me = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            me = cfg.api.me() => me.map_err(|e| format!("channels.{}: {e}", cfg.name))?,
        };
        self.set_bot(&me.id);
        self.serve(&cancel).await
    }

    fn hand_over(&self) {
        self.0.hand_over.store(true, Ordering::SeqCst);
    }
}

/// One Discord chat (a direct message or a server channel) as a
/// [`Conversation`].
struct DiscordChat<'a> {
    api: &'a DiscordApi,
    channel: &'a str,
    /// In a server channel, the person's message the answer replies to.
    reply_to: Option<&'a str>,
}

#[async_trait]
impl Conversation for DiscordChat<'_> {
    fn limit(&self) -> usize {
        format::PART_LIMIT
    }

    async fn send(&self, text: &str) -> Result<MessageId, String> {
        let body = message_body(&format::markdown(text), self.reply_to);
        self.api
            .post_message(self.channel, body)
            .await
            .map_err(|e| e.to_string())
    }

    async fn edit(&self, message: &MessageId, text: &str) -> Result<(), String> {
        self.api
            .edit_message(self.channel, message, &format::markdown(text))
            .await
            .map_err(|e| e.to_string())
    }

    async fn react(&self, message: &MessageId, progress: Progress) {
        if let Err(e) = self
            .api
            .react(self.channel, message, progress.emoji())
            .await
        {
            tracing::debug!(error = %e, "cannot add a reaction");
        }
    }

    async fn typing(&self) {
        if let Err(e) = self.api.typing(self.channel).await {
            tracing::debug!(error = %e, "cannot show typing");
        }
    }

    async fn ask(&self, request: &ApprovalRequest, ticket: &str) -> Result<MessageId, String> {
        let text = format!("Approve {}?\n{}", request.tool, request.summary);
        let button = |label: &str, choice: &str, style: u8| {
            json!({"type": 2, "style": style, "label": label,
                   "custom_id": format!("ap:{ticket}:{choice}")})
        };
        let mut body = message_body(&format::markdown(&text), self.reply_to);
        // An action row (1) of buttons (2): success (3), danger (4), secondary (2).
        body["components"] = json!([{"type": 1, "components": [
            button("Approve", "y", 3),
            button("Deny", "n", 4),
            button("Always", "a", 2),
        ]}]);
        self.api
            .post_message(self.channel, body)
            .await
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_agent::runner::ApprovalAnswer;

    #[test]
    fn answers_ping_no_one_and_reply_in_servers() {
        let dm = message_body("hi @everyone", None);
        assert_eq!(dm["allowed_mentions"]["parse"], json!([]));
        assert!(dm.get("message_reference").is_none());
        let reply = message_body("hi", Some("77"));
        assert_eq!(reply["message_reference"]["message_id"], "77");
        assert_eq!(decision(ApprovalAnswer::No), "❌ Denied");
    }
}
