//! Inbound Telegram: a `[channels.NAME]` of `type = "telegram"` with
//! `inbound = true` receives messages by long polling `getUpdates`.
//!
//! Of several daemons on one database, the one holding the channel's lease
//! in the store polls (the others look again every quarter lease and take
//! over when it lapses); the next update to ask for is kept in the store,
//! moved past each update as it is taken, so a restart neither repeats nor
//! loses one. Each chat is its own session (`telegram:<chat id>`). People
//! not allowed (`allowed_users`, `cairn telegram allow`, `/pair <code>`)
//! are told once how to be allowed and reach nothing else; in groups the
//! bot listens only when mentioned or replied to.

pub mod api;
pub mod format;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::agents::Chats;
use cairn_agent::chat::{ChatService, Inbound};
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest};
use cairn_core::clock::Clock;
use cairn_store::Store;
use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::api::{ApiError, Bot, BotApi, CallbackQuery, Message};
use super::desk::Desk;
use super::in_order::InOrder;
use super::people::People;
use super::{
    Approvals, Conversation, InboundAdapter, MessageId, Pace, Progress, converse, inbox,
    parse_button,
};

/// The commands registered with `setMyCommands`, as the chat service reads them.
pub const COMMANDS: &[(&str, &str)] = &[
    ("new", "Start a new thread"),
    ("undo", "Go back one turn"),
    ("status", "What the last turn did, and job status"),
    ("jobs", "List recent jobs"),
    ("cancel", "Cancel a job: /cancel <id>"),
    ("help", "What you can type"),
];

/// What the adapter needs besides the bot.
pub struct TelegramInbound {
    /// The channel's name (`[channels.NAME]`), which keys its lease and
    /// cursor in the store.
    pub name: String,
    /// The bot.
    pub api: BotApi,
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
    /// How long one `getUpdates` waits.
    pub poll_wait: Duration,
    /// How long the polling lease lasts unrenewed.
    pub lease: Duration,
    /// How turns are shown.
    pub pace: Pace,
    /// The owner's chat (the channel's `chat_id`): where approvals of
    /// unattended turns are asked when this is the approval channel.
    pub owner_chat: Option<i64>,
}

/// The adapter: cheap to share; one `run` at a time.
#[derive(Clone)]
pub struct TelegramAdapter(Arc<Inner>);

struct Inner {
    cfg: TelegramInbound,
    approvals: Approvals,
    /// Set by [`InboundAdapter::hand_over`]: the lease outlives this run.
    hand_over: AtomicBool,
}

/// The command the owner runs to allow a Telegram user.
pub const ALLOW_COMMAND: &str = "cairn telegram allow";

impl TelegramAdapter {
    /// An adapter over `cfg`.
    pub fn new(cfg: TelegramInbound) -> Self {
        Self(Arc::new(Inner {
            cfg,
            approvals: Approvals::default(),
            hand_over: AtomicBool::new(false),
        }))
    }

    fn lease(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.0.cfg.lease).unwrap_or(chrono::Duration::seconds(60))
    }

    /// Polls while holding the lease, until `cancel`.
    async fn poll(&self, bot: &Bot, cancel: &CancellationToken) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let store = &cfg.store;
        let mut turns = JoinSet::new();
        let mut holding = false;
        let mut backoff = Duration::from_secs(1);
        let result = loop {
            let claimed = store
                .claim_channel_poll(&cfg.name, &cfg.owner, cfg.clock.now(), self.lease())
                .await;
            let offset = match claimed {
                Ok(Some(offset)) => offset,
                Ok(None) => {
                    holding = false;
                    // Another process polls; look again before its lease can lapse.
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(cfg.lease / 4) => continue,
                    }
                }
                Err(e) => break Err(format!("channels.{}: cannot claim polling: {e}", cfg.name)),
            };
            if !holding {
                holding = true;
                tracing::info!(channel = %cfg.name, bot = %bot.first_name, "polling Telegram for messages");
                // A webhook would keep getUpdates from answering.
                if let Err(e) = cfg.api.delete_webhook().await {
                    tracing::warn!(channel = %cfg.name, error = %e, "deleteWebhook failed");
                }
                if let Err(e) = cfg.api.set_my_commands(COMMANDS).await {
                    tracing::warn!(channel = %cfg.name, error = %e, "setMyCommands failed");
                }
            }
            let updates = tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                got = cfg.api.get_updates(offset, cfg.poll_wait) => got,
            };
            let updates = match updates {
                Ok(updates) => {
                    backoff = Duration::from_secs(1);
                    updates
                }
                Err(e) => {
                    let wait = match &e {
                        ApiError::RetryAfter(wait) => *wait,
                        _ => {
                            let wait = backoff;
                            backoff = (backoff * 2).min(Duration::from_secs(60));
                            wait
                        }
                    };
                    tracing::warn!(channel = %cfg.name, error = %e, retry_in = ?wait, "getUpdates failed");
                    tokio::select! {
                        () = cancel.cancelled() => break Ok(()),
                        () = tokio::time::sleep(wait) => continue,
                    }
                }
            };
            // A chat's messages of one batch reach the agent in the order sent.
            let mut in_order = InOrder::default();
            for update in updates {
                // Taken before it is handled: never handled twice.
                match store
                    .advance_channel_cursor(&cfg.name, &cfg.owner, update.update_id + 1)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        tracing::warn!(channel = %cfg.name, error = %e, "cannot record the update as taken");
                        break;
                    }
                }
                if let Some(query) = update.callback_query {
                    self.on_button(&query).await;
                } else if let Some(message) = update.message {
                    let (this, bot) = (self.clone(), bot.clone());
                    let chat = message.chat.id;
                    in_order.spawn(&mut turns, chat, async move {
                        this.on_message(&bot, message).await;
                    });
                }
            }
            while turns.try_join_next().is_some() {}
        };
        turns.abort_all();
        // Handed over, the lease stays this process's: its successor (same
        // owner) renews it, so no other daemon polls in between.
        if !self.0.hand_over.load(Ordering::SeqCst)
            && let Err(e) = store.release_channel_poll(&cfg.name, &cfg.owner).await
        {
            tracing::warn!(channel = %cfg.name, error = %e, "cannot release the polling lease");
        }
        result
    }

    async fn say(&self, chat: i64, text: &str) {
        if let Err(e) = self.0.cfg.api.send_message(chat, text, false, None).await {
            tracing::warn!(channel = %self.0.cfg.name, error = %e, "cannot answer on Telegram");
        }
    }

    async fn on_message(&self, bot: &Bot, message: Message) {
        let cfg = &self.0.cfg;
        let Some(from) = message.from.as_ref().filter(|u| !u.is_bot) else {
            return;
        };
        let chat = message.chat.id;
        let raw = message
            .text
            .clone()
            .or_else(|| message.caption.clone())
            .unwrap_or_default();
        let Some(mut text) = addressed(bot, &message, &raw) else {
            return;
        };
        let user = from.id.to_string();
        if !cfg.people.allowed(&user).await {
            if let Some(answer) = cfg.people.stranger(&user, &text).await {
                self.say(chat, &answer).await;
            }
            return;
        }
        if text.starts_with("/pair") {
            self.say(chat, "You are already allowed to talk to this agent.")
                .await;
            return;
        }
        if text == "/start" {
            text = "/help".into();
        }
        // The agent bound to this chat answers it (`[[agents]]`).
        let service = cfg
            .chat
            .pick(&cfg.name, &chat.to_string(), &from.id.to_string());
        let mut inbound = Inbound {
            user_id: cfg.user_id.clone(),
            channel: format!("telegram:{chat}"),
            thread: None,
            text,
            images: Vec::new(),
        };
        if let Some(photo) = message.photo.last() {
            // Refused before the download (with `gateway.max_images = 0`).
            if let Some(refusal) = cairn_core::image::too_many_images(1, service.max_images()) {
                self.say(chat, &format!("⚠️ The photo could not be used: {refusal}"))
                    .await;
                return;
            }
            let added = match cfg.api.download(&photo.file_id).await {
                Ok(bytes) => service
                    .attach_image(&mut inbound, bytes)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = added {
                self.say(chat, &format!("⚠️ The photo could not be used: {e}"))
                    .await;
                return;
            }
        }
        if let Some(document) = &message.document {
            match self.save_document(&service, document).await {
                Ok(saved) => inbound.text = inbox::with_note(&inbound.text, &saved),
                Err(e) => {
                    self.say(chat, &format!("⚠️ The file could not be saved: {e}"))
                        .await;
                    return;
                }
            }
        }
        if inbound.text.trim().is_empty() && inbound.images.is_empty() {
            return;
        }
        let conversation = TelegramChat {
            api: cfg.api.clone(),
            chat,
        };
        converse(
            &service,
            inbound,
            Some(&message.message_id.to_string()),
            &conversation,
            &self.0.approvals,
            cfg.pace,
        )
        .await;
    }

    /// Saves a document into the workspace's `inbox/`, under its own name
    /// (made safe, and numbered when taken); returns the relative path.
    async fn save_document(
        &self,
        service: &ChatService,
        document: &api::Document,
    ) -> Result<String, String> {
        let cfg = &self.0.cfg;
        if document.file_size.is_some_and(|n| n > api::DOWNLOAD_LIMIT) {
            return Err(format!("it is over {} MiB", api::DOWNLOAD_LIMIT >> 20));
        }
        let bytes = cfg
            .api
            .download(&document.file_id)
            .await
            .map_err(|e| e.to_string())?;
        let workspace = service.settings().workspace.clone();
        inbox::save(
            &workspace,
            document.file_name.as_deref().unwrap_or("file"),
            bytes,
        )
        .await
    }

    /// A button press: an approval's decision.
    async fn on_button(&self, query: &CallbackQuery) {
        let cfg = &self.0.cfg;
        let toast = if !cfg.people.allowed(&query.from.id.to_string()).await {
            "You are not allowed to answer this."
        } else {
            match query.data.as_deref().and_then(parse_button) {
                Some((ticket, answer)) if self.0.approvals.decide(ticket, answer) => match answer {
                    ApprovalAnswer::No => "Denied",
                    _ => "Approved",
                },
                Some(_) => "This request is no longer waiting.",
                None => "Unknown button.",
            }
        };
        if let Err(e) = cfg.api.answer_callback(&query.id, toast).await {
            tracing::debug!(channel = %cfg.name, error = %e, "answerCallbackQuery failed");
        }
    }
}

/// The text for the agent when the message is for the bot: always in a
/// private chat; in a group only when it mentions the bot or replies to
/// it (the mention removed). Commands lose their `@bot` suffix.
fn addressed(bot: &Bot, message: &Message, text: &str) -> Option<String> {
    let mention = bot.username.as_deref().map(|u| format!("@{u}"));
    let mut text = text.trim().to_string();
    if message.chat.kind != "private" {
        let mentioned = mention.as_deref().is_some_and(|m| text.contains(m));
        let replied = message
            .reply_to_message
            .as_ref()
            .and_then(|r| r.from.as_ref())
            .is_some_and(|u| u.id == bot.id);
        if !mentioned && !replied {
            return None;
        }
    }
    if let Some(m) = mention {
        text = text.replace(&m, "").trim().to_string();
    }
    Some(text)
}

#[async_trait]
impl InboundAdapter for TelegramAdapter {
    fn name(&self) -> &str {
        &self.0.cfg.name
    }

    fn desk(&self) -> Option<Desk> {
        let cfg = &self.0.cfg;
        let conversation = TelegramChat {
            api: cfg.api.clone(),
            chat: cfg.owner_chat?,
        };
        Some(Desk {
            conversation: Arc::new(conversation),
            approvals: self.0.approvals.clone(),
        })
    }

    async fn run(&self, cancel: CancellationToken) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let bot = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            me = cfg.api.get_me() => me.map_err(|e| format!("channels.{}: {e}", cfg.name))?,
        };
        self.poll(&bot, &cancel).await
    }

    fn hand_over(&self) {
        self.0.hand_over.store(true, Ordering::SeqCst);
    }
}

/// One Telegram chat as a [`Conversation`]: HTML, falling back to plain
/// text when Telegram cannot parse what was made of the answer.
struct TelegramChat {
    api: BotApi,
    chat: i64,
}

fn show(e: ApiError) -> String {
    e.to_string()
}

/// A message id this conversation gave out, as Telegram's number.
fn id(message: &MessageId) -> Result<i64, String> {
    message
        .parse()
        .map_err(|_| format!("not a Telegram message id: {message}"))
}

fn unparsable(e: &ApiError) -> bool {
    matches!(e, ApiError::Refused { description, .. } if description.contains("parse entities"))
}

#[async_trait]
impl Conversation for TelegramChat {
    fn limit(&self) -> usize {
        format::MESSAGE_LIMIT
    }

    async fn send(&self, text: &str) -> Result<MessageId, String> {
        match self
            .api
            .send_message(self.chat, &format::html(text), true, None)
            .await
        {
            Err(e) if unparsable(&e) => self.api.send_message(self.chat, text, false, None).await,
            other => other,
        }
        .map(|id| id.to_string())
        .map_err(show)
    }

    async fn edit(&self, message: &MessageId, text: &str) -> Result<(), String> {
        let message = id(message)?;
        match self
            .api
            .edit_message(self.chat, message, &format::html(text), true)
            .await
        {
            Err(e) if unparsable(&e) => {
                self.api.edit_message(self.chat, message, text, false).await
            }
            other => other,
        }
        .map_err(show)
    }

    async fn typing(&self) {
        if let Err(e) = self.api.typing(self.chat).await {
            tracing::debug!(error = %e, "sendChatAction failed");
        }
    }

    async fn react(&self, message: &MessageId, progress: Progress) {
        let Ok(message) = id(message) else { return };
        // Telegram takes reactions from a fixed set, without ✅ or ❌.
        let emoji = match progress {
            Progress::Working => "👀",
            Progress::Done => "👌",
            Progress::Failed => "👎",
        };
        if let Err(e) = self.api.react(self.chat, message, emoji).await {
            tracing::debug!(error = %e, "setMessageReaction failed");
        }
    }

    async fn ask(&self, request: &ApprovalRequest, ticket: &str) -> Result<MessageId, String> {
        let keyboard = json!({"inline_keyboard": [[
            {"text": "Approve", "callback_data": super::approval_button(ticket, "y")},
            {"text": "Deny", "callback_data": super::approval_button(ticket, "n")},
            {"text": "Always", "callback_data": super::approval_button(ticket, "a")},
        ]]});
        let text = format!("Approve {}?\n{}", request.tool, request.summary);
        self.api
            .send_message(self.chat, &text, false, Some(keyboard))
            .await
            .map(|id| id.to_string())
            .map_err(show)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: &str, reply_to_bot: bool) -> Message {
        serde_json::from_value(json!({
            "message_id": 1,
            "from": {"id": 5},
            "chat": {"id": -100, "type": kind},
            "reply_to_message": if reply_to_bot {
                json!({"message_id": 0, "from": {"id": 9, "is_bot": true}, "chat": {"id": -100, "type": kind}})
            } else { serde_json::Value::Null },
        }))
        .unwrap()
    }

    #[test]
    fn groups_are_heard_only_when_the_bot_is_mentioned_or_replied_to() {
        let bot = Bot {
            id: 9,
            first_name: "Cairn".into(),
            username: Some("cairn_bot".into()),
        };
        let private = message("private", false);
        assert_eq!(addressed(&bot, &private, "hi").as_deref(), Some("hi"));
        assert_eq!(
            addressed(&bot, &private, "/new@cairn_bot").as_deref(),
            Some("/new")
        );
        let group = message("group", false);
        assert_eq!(addressed(&bot, &group, "hello all"), None);
        assert_eq!(
            addressed(&bot, &group, "@cairn_bot what time").as_deref(),
            Some("what time")
        );
        let reply = message("supergroup", true);
        assert_eq!(
            addressed(&bot, &reply, "and then?").as_deref(),
            Some("and then?")
        );
    }

    #[test]
    fn buttons_are_read_safely() {
        assert!(matches!(
            parse_button("ap:abc:y"),
            Some(("abc", ApprovalAnswer::Yes))
        ));
        assert!(matches!(
            parse_button("ap:abc:a"),
            Some(("abc", ApprovalAnswer::Always))
        ));
        assert!(parse_button("ap:abc:x").is_none());
        assert!(parse_button("other").is_none());
    }
}
