//! Inbound WhatsApp (the Cloud API): a `[channels.NAME]` of `type =
//! "whatsapp"` receives Meta's webhooks through the gateway
//! ([`webhook::Endpoints`]) and answers through the Graph API ([`api`]).
//!
//! Each number is its own session (`whatsapp:<number>`). A delivery is
//! in the store before Meta is answered, and handled from there (first
//! what a stopped or dead daemon left); a message id taken once is
//! recorded before it is handled, so Meta's redeliveries, and those a
//! restart finds again, are answered once.
//! People not allowed (`allowed_users`, `cairn channel allow`, `/pair
//! <code>`) are told once how to be allowed and reach nothing else.
//! WhatsApp cannot edit a message: answers go whole, split at 4,096
//! characters; an approval is asked with reply buttons and its decision
//! follows as a reply; the turn's progress shows as reactions.

pub mod api;
pub mod format;
pub mod webhook;

use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::agents::Chats;
use cairn_agent::chat::{ChatService, Inbound};
use cairn_agent::runner::ApprovalRequest;
use cairn_core::clock::Clock;
use cairn_store::Store;
use secrecy::SecretString;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::api::GraphApi;
use self::webhook::{Endpoints, Keep, Message};
use super::in_order::InOrder;
use super::people::People;
use super::{
    Approvals, Conversation, InboundAdapter, MessageId, Pace, Progress, converse, inbox,
    parse_button,
};

/// The command the owner runs to allow a WhatsApp number.
pub const ALLOW_COMMAND: &str = "cairn channel allow";

/// How long a taken message id is remembered: past the 7 days Meta keeps
/// redelivering a webhook it doubts arrived.
const REMEMBER: chrono::Duration = chrono::Duration::days(8);

/// Kept deliveries read at a time.
const KEPT_BATCH: u32 = 32;

/// The most characters of an interactive message's body.
const BUTTON_BODY_LIMIT: usize = 1_024;

/// What the adapter needs.
pub struct WhatsAppInbound {
    /// The channel's name (`[channels.NAME]`).
    pub name: String,
    /// The Graph API, as the business number.
    pub api: GraphApi,
    /// Where the gateway hands verified deliveries over.
    pub endpoints: Endpoints,
    /// The token Meta's verification must bring.
    pub verify_token: SecretString,
    /// The app secret deliveries are signed with.
    pub app_secret: SecretString,
    /// The business number's id; deliveries for other numbers are left.
    pub phone_number_id: String,
    /// Who may talk to the agent (the gateway asks too, keeping nothing a
    /// stranger wrote).
    pub people: Arc<People>,
    /// The database (taken message ids).
    pub store: Store,
    /// Where messages go.
    pub chat: Arc<Chats>,
    /// The owner's cairn user id, whose sessions the chats are.
    pub user_id: String,
    /// Wall time.
    pub clock: Arc<dyn Clock>,
    /// How turns are shown.
    pub pace: Pace,
}

/// The adapter: cheap to share; one `run` at a time.
#[derive(Clone)]
pub struct WhatsAppAdapter(Arc<Inner>);

struct Inner {
    cfg: WhatsAppInbound,
    approvals: Approvals,
}

impl WhatsAppAdapter {
    /// An adapter over `cfg`.
    pub fn new(cfg: WhatsAppInbound) -> Self {
        Self(Arc::new(Inner {
            cfg,
            approvals: Approvals::default(),
        }))
    }

    /// Handles every delivery kept for the channel, oldest first, each
    /// forgotten once its messages are taken; `Err` when the store fails
    /// (what is left stays kept for the restart).
    async fn handle_kept(&self, turns: &mut JoinSet<()>) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let unreadable = |e: cairn_store::StoreError| {
            format!("cannot read or update the kept WhatsApp deliveries: {e}")
        };
        loop {
            let kept = cfg
                .store
                .kept_channel_deliveries(&cfg.name, KEPT_BATCH)
                .await
                .map_err(unreadable)?;
            if kept.is_empty() {
                return Ok(());
            }
            for (id, body) in kept {
                self.on_delivery(&body, turns).await?;
                cfg.store
                    .forget_channel_delivery(&id)
                    .await
                    .map_err(unreadable)?;
            }
        }
    }

    /// One kept delivery's messages: each new one handled, a chat's in
    /// order; `Err` when a message cannot be recorded as taken.
    async fn on_delivery(&self, kept: &str, turns: &mut JoinSet<()>) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let messages: Vec<Message> = match serde_json::from_str(kept) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(channel = %cfg.name, error = %e, "a kept WhatsApp delivery of an unexpected shape was left");
                return Ok(());
            }
        };
        let mut in_order = InOrder::default();
        for message in messages {
            // Recorded before it is handled: never handled twice.
            match cfg
                .store
                .first_channel_message(&cfg.name, &message.id, cfg.clock.now(), REMEMBER)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(channel = %cfg.name, id = %message.id, "a message delivered again was ignored");
                    continue;
                }
                Err(e) => return Err(format!("cannot record a WhatsApp message as taken: {e}")),
            }
            if message.kind == "interactive" {
                self.on_button(&message).await;
                continue;
            }
            let this = self.clone();
            in_order.spawn(turns, message.from.clone(), async move {
                this.on_message(message).await;
            });
        }
        Ok(())
    }

    async fn say(&self, to: &str, text: &str) {
        if let Err(e) = self.0.cfg.api.send_text(to, text, None).await {
            tracing::warn!(channel = %self.0.cfg.name, error = %e, "cannot answer on WhatsApp");
        }
    }

    async fn on_message(&self, message: Message) {
        let cfg = &self.0.cfg;
        let from = message.from.as_str();
        let text = message
            .text
            .as_ref()
            .map(|t| t.body.clone())
            .or_else(|| message.image.as_ref().and_then(|m| m.caption.clone()))
            .or_else(|| message.document.as_ref().and_then(|m| m.caption.clone()))
            .unwrap_or_default()
            .trim()
            .to_string();
        if !cfg.people.allowed(from).await {
            if let Some(answer) = cfg.people.stranger(from, &text).await {
                self.say(from, &answer).await;
            }
            return;
        }
        if text.starts_with("/pair") {
            self.say(from, "You are already allowed to talk to this agent.")
                .await;
            return;
        }
        // A person's reaction to an answer, or a notice from WhatsApp itself.
        if matches!(
            message.kind.as_str(),
            "reaction" | "system" | "request_welcome"
        ) {
            return;
        }
        if !matches!(message.kind.as_str(), "text" | "image" | "document") {
            let kind = &message.kind;
            self.say(
                from,
                &format!("⚠️ This agent reads text, images and documents, not {kind} messages."),
            )
            .await;
            return;
        }
        // The agent bound to this chat answers it (`[[agents]]`).
        let service = cfg.chat.pick(&cfg.name, from, from);
        let mut inbound = Inbound {
            user_id: cfg.user_id.clone(),
            channel: format!("whatsapp:{from}"),
            thread: None,
            text,
            images: Vec::new(),
        };
        if let Some(image) = &message.image {
            // Refused before the download (with `gateway.max_images = 0`).
            if let Some(refusal) = cairn_core::image::too_many_images(1, service.max_images()) {
                self.say(from, &format!("⚠️ The image could not be used: {refusal}"))
                    .await;
                return;
            }
            let added = match cfg.api.download(&image.id).await {
                Ok(bytes) => service
                    .attach_image(&mut inbound, bytes)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = added {
                tracing::warn!(channel = %cfg.name, error = %e, "an image could not be used");
                self.say(from, &format!("⚠️ The image could not be used: {e}"))
                    .await;
                return;
            }
        }
        if let Some(document) = &message.document {
            match self.save_document(&service, document).await {
                Ok(saved) => inbound.text = inbox::with_note(&inbound.text, &saved),
                Err(e) => {
                    tracing::warn!(channel = %cfg.name, error = %e, "a document could not be saved");
                    self.say(from, &format!("⚠️ The file could not be saved: {e}"))
                        .await;
                    return;
                }
            }
        }
        if inbound.text.trim().is_empty() && inbound.images.is_empty() {
            return;
        }
        let conversation = WhatsAppChat {
            api: &cfg.api,
            to: from,
        };
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

    /// Saves a document into the workspace's `inbox/`; returns its path.
    async fn save_document(
        &self,
        service: &ChatService,
        document: &webhook::Media,
    ) -> Result<String, String> {
        let cfg = &self.0.cfg;
        let bytes = cfg
            .api
            .download(&document.id)
            .await
            .map_err(|e| e.to_string())?;
        let workspace = service.settings().workspace.clone();
        let name = document.filename.as_deref().unwrap_or("file");
        inbox::save(&workspace, name, bytes).await
    }

    /// A reply button pressed: an approval's decision.
    async fn on_button(&self, message: &Message) {
        let cfg = &self.0.cfg;
        let from = message.from.as_str();
        let pressed = message
            .interactive
            .as_ref()
            .and_then(|i| i.button_reply.as_ref())
            .map(|b| b.id.as_str());
        if !cfg.people.allowed(from).await {
            tracing::info!(channel = %cfg.name, user = from, "a button pressed by someone not allowed was refused");
            self.say(from, "You are not allowed to answer this.").await;
            return;
        }
        match pressed.and_then(parse_button) {
            // The decision follows from the turn, as a reply to the request.
            Some((ticket, answer)) if self.0.approvals.decide(ticket, answer) => {}
            Some(_) => self.say(from, "This request is no longer waiting.").await,
            None => self.say(from, "Unknown button.").await,
        }
    }
}

#[async_trait]
impl InboundAdapter for WhatsAppAdapter {
    fn name(&self) -> &str {
        &self.0.cfg.name
    }

    async fn run(&self, cancel: CancellationToken) -> Result<(), String> {
        let cfg = &self.0.cfg;
        let wake = Arc::new(Notify::new());
        let keep = Keep {
            channel: cfg.name.clone(),
            phone_number_id: cfg.phone_number_id.clone(),
            people: Arc::clone(&cfg.people),
            store: cfg.store.clone(),
            clock: Arc::clone(&cfg.clock),
            wake: Arc::clone(&wake),
        };
        let registration =
            cfg.endpoints
                .register(cfg.verify_token.clone(), cfg.app_secret.clone(), keep);
        tracing::info!(channel = %cfg.name, "receiving WhatsApp webhooks through the gateway");
        let mut turns = JoinSet::new();
        // First what an earlier run kept and did not handle.
        wake.notify_one();
        let ended = loop {
            tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                () = wake.notified() => {
                    if let Err(e) = self.handle_kept(&mut turns).await {
                        break Err(e);
                    }
                }
            }
            while turns.try_join_next().is_some() {}
        };
        drop(registration);
        match ended {
            Ok(()) => turns.abort_all(),
            // The turns under way finish; the restart handles what is left.
            Err(_) => turns.detach_all(),
        }
        ended
    }
}

/// One WhatsApp chat as a [`Conversation`].
struct WhatsAppChat<'a> {
    api: &'a GraphApi,
    to: &'a str,
}

#[async_trait]
impl Conversation for WhatsAppChat<'_> {
    fn limit(&self) -> usize {
        format::MESSAGE_LIMIT
    }

    async fn send(&self, text: &str) -> Result<MessageId, String> {
        self.api
            .send_text(self.to, &format::whatsapp(text), None)
            .await
            .map_err(|e| e.to_string())
    }

    fn edits(&self) -> bool {
        false
    }

    /// WhatsApp cannot edit: the new text follows as a reply to `message`
    /// (an approval's decision under its request).
    async fn edit(&self, message: &MessageId, text: &str) -> Result<(), String> {
        self.api
            .send_text(self.to, &format::whatsapp(text), Some(message))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    async fn react(&self, message: &MessageId, progress: Progress) {
        if let Err(e) = self.api.react(self.to, message, progress.emoji()).await {
            tracing::debug!(error = %e, "a WhatsApp reaction failed");
        }
    }

    /// The Cloud API has no typing indicator to renew.
    async fn typing(&self) {}

    async fn ask(&self, request: &ApprovalRequest, ticket: &str) -> Result<MessageId, String> {
        let text = format!("Approve {}?\n{}", request.tool, request.summary);
        let text = super::split::head(&text, BUTTON_BODY_LIMIT);
        let buttons = [
            (super::approval_button(ticket, "y"), "Approve"),
            (super::approval_button(ticket, "n"), "Deny"),
            (super::approval_button(ticket, "a"), "Always"),
        ];
        self.api
            .send_buttons(self.to, text, &buttons)
            .await
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use cairn_agent::runner::ApprovalAnswer;

    use super::*;

    #[test]
    fn buttons_are_read_safely() {
        assert!(matches!(
            parse_button("ap:abc:n"),
            Some(("abc", ApprovalAnswer::No))
        ));
        assert!(parse_button("ap:abc:x").is_none());
        assert!(parse_button("approve").is_none());
    }
}
