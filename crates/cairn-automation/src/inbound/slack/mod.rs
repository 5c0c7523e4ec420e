//! Inbound Slack: a `[channels.NAME]` of `type = "slack"` with `inbound =
//! true` receives messages over Socket Mode (no public URL): the app
//! token opens a WebSocket (`apps.connections.open`), every envelope on
//! it is acknowledged before it is handled, and the bot token answers
//! through the Web API.
//!
//! Of several daemons on one database, the one holding the channel's
//! lease in the store keeps the socket (the others look again every
//! quarter lease); Slack would otherwise spread the events over every
//! open connection. Each chat is its own session: a direct message
//! `slack:<team>:<channel>`, a channel thread
//! `slack:<team>:<channel>:<thread ts>`, since each thread in a channel
//! is its own conversation. People not allowed (`allowed_users`, `cairn
//! channel allow`, `/pair <code>`) are told once how to be allowed and
//! reach nothing else; in channels the bot listens only when mentioned
//! or in a thread it answered in (before a restart too: the thread's
//! session is in the store).

pub mod api;
pub mod events;
pub mod format;
mod socket;

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

use self::api::{Identity, SlackApi};
use self::events::{BlockActions, MessageEvent, Recent, Threads, addressed};
use super::parse_button;
use super::people::People;
use super::{Approvals, Conversation, InboundAdapter, MessageId, Pace, Progress, converse, inbox};

/// The command the owner runs to allow a Slack user.
pub const ALLOW_COMMAND: &str = "cairn channel allow";

/// What the adapter needs besides the app.
pub struct SlackInbound {
    /// The channel's name (`[channels.NAME]`), which keys its lease in
    /// the store.
    pub name: String,
    /// The app's Web API.
    pub api: SlackApi,
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
    /// How long the socket's lease lasts unrenewed.
    pub lease: Duration,
    /// How turns are shown.
    pub pace: Pace,
}

/// The adapter: cheap to share; one `run` at a time.
#[derive(Clone)]
pub struct SlackAdapter(Arc<Inner>);

struct Inner {
    cfg: SlackInbound,
    approvals: Approvals,
    /// Set by [`InboundAdapter::hand_over`]: the lease outlives this run.
    hand_over: AtomicBool,
    /// Messages taken, by channel and `ts`: a mention arrives both as a
    /// `message` and an `app_mention`, and Slack redelivers what it
    /// thinks was not acknowledged.
    seen: Mutex<Recent>,
    /// Channel threads the bot answered in.
    threads: Mutex<Threads>,
}

impl SlackAdapter {
    /// An adapter over `cfg`.
    pub fn new(cfg: SlackInbound) -> Self {
        Self(Arc::new(Inner {
            cfg,
            approvals: Approvals::default(),
            hand_over: AtomicBool::new(false),
            seen: Mutex::default(),
            threads: Mutex::default(),
        }))
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says `text` to `user` in `channel`: in a direct message as a
    /// message, in a channel as one only they see.
    async fn say(&self, event: &MessageEvent, user: &str, text: &str) {
        let api = &self.0.cfg.api;
        let sent = if event.direct() {
            api.post_message(
                &event.channel,
                event.thread_ts.as_deref(),
                &format::mrkdwn(text),
                None,
            )
            .await
            .map(drop)
        } else {
            api.post_ephemeral(&event.channel, user, &format::mrkdwn(text))
                .await
        };
        if let Err(e) = sent {
            tracing::warn!(channel = %self.0.cfg.name, error = %e, "cannot answer on Slack");
        }
    }

    /// An `events_api` payload: a message for the agent, maybe.
    async fn on_event(&self, me: &Identity, payload: Value) {
        let Ok(callback) = serde_json::from_value::<events::EventCallback>(payload) else {
            return;
        };
        let kind = callback.event["type"].as_str().unwrap_or_default();
        if kind != "message" && kind != "app_mention" {
            return;
        }
        let event: MessageEvent = match serde_json::from_value(callback.event) {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(channel = %self.0.cfg.name, error = %e, "an unreadable message event");
                return;
            }
        };
        if !event.from_a_person(me) {
            return;
        }
        let team = callback.team_id.unwrap_or_else(|| me.team_id.clone());
        let mut text = addressed(me, &event, &Self::lock(&self.0.threads));
        if text.is_none() && self.answered_before(&team, &event).await {
            text = Some(format::plain(&event.text, &me.user_id));
        }
        let Some(text) = text else {
            return;
        };
        if !Self::lock(&self.0.seen).insert(format!("{}/{}", event.channel, event.ts)) {
            return;
        }
        let thread = event.reply_thread();
        let origin = event.ts.clone();
        self.on_message(&team, event, text, thread, Some(origin))
            .await;
    }

    /// Whether the bot answered in `event`'s channel thread before this
    /// process started (the thread's session is in the store): it listens
    /// there again without a mention.
    async fn answered_before(&self, team: &str, event: &MessageEvent) -> bool {
        let (Some(root), false) = (event.thread_ts.as_deref(), event.direct()) else {
            return false;
        };
        let cfg = &self.0.cfg;
        let session = format!("slack:{team}:{}:{root}", event.channel);
        match cfg.store.session_exists(&cfg.user_id, &session).await {
            Ok(true) => {
                Self::lock(&self.0.threads).join(&event.channel, root);
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!(channel = %cfg.name, error = %e, "cannot tell whether the bot answered in a thread");
                false
            }
        }
    }

    /// A `slash_commands` payload: the chat command it carries, from the
    /// channel it was typed in, answered there.
    async fn on_command(&self, me: &Identity, payload: Value) {
        let Ok(command) = serde_json::from_value::<events::SlashCommand>(payload) else {
            return;
        };
        let team = command
            .team_id
            .clone()
            .unwrap_or_else(|| me.team_id.clone());
        let (event, text) = command.as_message();
        self.on_message(&team, event, text, None, None).await;
    }

    /// A message for the agent from `event`'s user, answered in `thread`
    /// (a channel thread, or none), its progress shown on `origin`.
    async fn on_message(
        &self,
        team: &str,
        event: MessageEvent,
        text: String,
        thread: Option<String>,
        origin: Option<String>,
    ) {
        let cfg = &self.0.cfg;
        let Some(user) = event.user.clone() else {
            return;
        };
        if !cfg.people.allowed(&user).await {
            // Slack keeps `/pair` for its own commands: `pair <code>` does too.
            let text = match text.strip_prefix("pair ") {
                Some(code) => format!("/pair {code}"),
                None => text,
            };
            if let Some(answer) = cfg.people.stranger(&user, &text).await {
                self.say(&event, &user, &answer).await;
            }
            return;
        }
        if text.starts_with("/pair") {
            self.say(
                &event,
                &user,
                "You are already allowed to talk to this agent.",
            )
            .await;
            return;
        }
        let channel = match (&thread, event.direct()) {
            (Some(root), false) => {
                Self::lock(&self.0.threads).join(&event.channel, root);
                format!("slack:{team}:{}:{root}", event.channel)
            }
            _ => format!("slack:{team}:{}", event.channel),
        };
        // The agent bound to this chat answers it (`[[agents]]`).
        let service = cfg.chat.pick(&cfg.name, &event.channel, &user);
        let mut inbound = Inbound {
            user_id: cfg.user_id.clone(),
            channel,
            thread: None,
            text,
            images: Vec::new(),
        };
        if let Err(e) = self.take_files(&service, &event, &mut inbound).await {
            self.say(&event, &user, &format!("⚠️ {e}")).await;
            return;
        }
        if inbound.text.trim().is_empty() && inbound.images.is_empty() {
            return;
        }
        let conversation = SlackChat {
            api: &cfg.api,
            channel: &event.channel,
            thread: thread.as_deref(),
        };
        converse(
            &service,
            inbound,
            origin.as_ref(),
            &conversation,
            &self.0.approvals,
            cfg.pace,
        )
        .await;
    }

    /// The message's files: pictures as image input, the rest saved in
    /// the workspace's `inbox/` and named in the text.
    async fn take_files(
        &self,
        service: &ChatService,
        event: &MessageEvent,
        inbound: &mut Inbound,
    ) -> Result<(), String> {
        let images = event.files.iter().filter(|f| f.is_image()).count();
        // Refused before any download (with `gateway.max_images = 0`).
        if let Some(refusal) = cairn_core::image::too_many_images(images, service.max_images()) {
            return Err(format!("The pictures could not be used: {refusal}"));
        }
        for file in &event.files {
            let name = file.name.as_deref().unwrap_or("file");
            let bytes = self
                .download(file)
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

    async fn download(&self, file: &events::File) -> Result<Vec<u8>, String> {
        if file.size.is_some_and(|n| n > api::DOWNLOAD_LIMIT) {
            return Err(format!("it is over {} MiB", api::DOWNLOAD_LIMIT >> 20));
        }
        let url = file.url_private.as_deref().ok_or("Slack gave no address")?;
        self.0
            .cfg
            .api
            .download(url)
            .await
            .map_err(|e| e.to_string())
    }

    /// A `block_actions` payload: an approval's decision.
    async fn on_button(&self, payload: Value) {
        let cfg = &self.0.cfg;
        let Ok(actions) = serde_json::from_value::<BlockActions>(payload) else {
            return;
        };
        let Some(value) = actions.actions.iter().find_map(|a| a.value.as_deref()) else {
            return;
        };
        let Some((ticket, answer)) = parse_button(value) else {
            return;
        };
        let refusal = if !cfg.people.allowed(&actions.user.id).await {
            tracing::info!(channel = %cfg.name, user = %actions.user.id, "a button pressed by someone not allowed was refused");
            Some("You are not allowed to answer this.")
        } else if !self.0.approvals.decide(ticket, answer) {
            Some("This request is no longer waiting.")
        } else {
            None
        };
        // A decision shows on the request's message itself (`converse`).
        if let (Some(text), Some(channel)) = (refusal, &actions.channel)
            && let Err(e) = cfg
                .api
                .post_ephemeral(&channel.id, &actions.user.id, text)
                .await
        {
            tracing::debug!(channel = %cfg.name, error = %e, "cannot answer a button press");
        }
    }
}

#[async_trait]
impl InboundAdapter for SlackAdapter {
    fn name(&self) -> &str {
        &self.0.cfg.name
    }

    async fn run(&self, cancel: CancellationToken) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let me = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            me = cfg.api.auth_test() => me.map_err(|e| format!("channels.{}: {e}", cfg.name))?,
        };
        self.serve(&me, &cancel).await
    }

    fn hand_over(&self) {
        self.0.hand_over.store(true, Ordering::SeqCst);
    }
}

/// One Slack chat (a direct message, or a thread of a channel) as a
/// [`Conversation`].
struct SlackChat<'a> {
    api: &'a SlackApi,
    channel: &'a str,
    thread: Option<&'a str>,
}

#[async_trait]
impl Conversation for SlackChat<'_> {
    fn limit(&self) -> usize {
        format::MESSAGE_LIMIT
    }

    async fn send(&self, text: &str) -> Result<MessageId, String> {
        self.api
            .post_message(self.channel, self.thread, &format::mrkdwn(text), None)
            .await
            .map_err(|e| e.to_string())
    }

    async fn edit(&self, message: &MessageId, text: &str) -> Result<(), String> {
        self.api
            .update(self.channel, message, &format::mrkdwn(text))
            .await
            .map_err(|e| e.to_string())
    }

    async fn react(&self, message: &MessageId, progress: Progress) {
        let name = match progress {
            Progress::Working => "eyes",
            Progress::Done => "white_check_mark",
            Progress::Failed => "x",
        };
        if let Err(e) = self.api.react(self.channel, message, name).await {
            tracing::debug!(error = %e, "reactions.add failed");
        }
    }

    /// Slack shows bots no typing indicator outside the legacy RTM API;
    /// the 👀 reaction says the turn is under way.
    async fn typing(&self) {}

    async fn ask(&self, request: &ApprovalRequest, ticket: &str) -> Result<MessageId, String> {
        let text = format!("Approve {}?\n{}", request.tool, request.summary);
        let button = |label: &str, choice: &str, style: Option<&str>| {
            let mut b = json!({
                "type": "button",
                "text": {"type": "plain_text", "text": label},
                "action_id": format!("approval_{choice}"),
                "value": format!("ap:{ticket}:{choice}"),
            });
            if let Some(style) = style {
                b["style"] = style.into();
            }
            b
        };
        let blocks = json!([
            {"type": "section", "text": {"type": "mrkdwn", "text": format::mrkdwn(&text)}},
            {"type": "actions", "block_id": format!("approval_{ticket}"), "elements": [
                button("Approve", "y", Some("primary")),
                button("Deny", "n", Some("danger")),
                button("Always", "a", None),
            ]},
        ]);
        self.api
            .post_message(
                self.channel,
                self.thread,
                &format::mrkdwn(&text),
                Some(blocks),
            )
            .await
            .map_err(|e| e.to_string())
    }
}
