//! Front ends that receive messages (Telegram, Slack and Discord bots,
//! WhatsApp; the next apps the same way), beside the output channels of
//! [`crate::notify`].
//!
//! One shape for all of them: an [`InboundAdapter`] runs under the
//! daemon's supervisor and turns what its service delivers into
//! [`Inbound`] messages (each chat its own session, channel
//! `<kind>:<chat id>`); [`converse`] hands one to the [`ChatService`] and
//! shows the turn through the adapter's [`Conversation`]: a typing
//! indicator while it runs, the answer streamed by editing one message at
//! a bounded rate, then sent whole in parts of the service's size, and
//! approvals asked with the service's buttons ([`Approvals`] matches the
//! press to the waiting call). The chat service offers every message to
//! the event matcher with its channel, so an event routine filtered on
//! `channel: telegram` fires on Telegram messages.
//!
//! Architecture invariant: nothing from a person the adapter does not
//! allow reaches the [`ChatService`] (nor the LLM or the event matcher).

pub mod desk;
pub mod discord;
pub mod in_order;
pub mod inbox;
pub mod markdown;
pub mod people;
pub mod slack;
pub mod split;
pub mod telegram;
pub mod whatsapp;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::agent_loop::LoopEvent;
use cairn_agent::chat::{ChatService, ChatSink, Inbound, Reply};
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A front end that receives messages, run by the daemon's supervisor.
#[async_trait]
pub trait InboundAdapter: Send + Sync {
    /// The configured channel's name (`[channels.NAME]`).
    fn name(&self) -> &str;

    /// Receives and answers messages until `cancel` fires; an `Err` (the
    /// service unreachable at start, say) is restarted with backoff.
    async fn run(&self, cancel: CancellationToken) -> Result<(), String>;

    /// Makes the next stop keep what this process holds on the service
    /// (a polling lease) for its successor in the same process: a reload
    /// that restarts the channel with new settings.
    fn hand_over(&self) {}

    /// The owner's chat here, where the approvals of unattended turns may
    /// be asked ([`desk`], `agent.approval_channel`); `None` where the
    /// channel cannot ask (no owner chat, no buttons).
    fn desk(&self) -> Option<desk::Desk> {
        None
    }
}

/// A message on a front end, by the service's id (Telegram's number,
/// Slack's `ts`, a Discord snowflake, WhatsApp's `wamid`), as text.
pub type MessageId = String;

/// How far a turn has come, shown as a reaction on the person's message
/// where the app has reactions (seed 003's inbound flow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The turn started.
    Working,
    /// The turn ended with an answer.
    Done,
    /// The turn failed.
    Failed,
}

impl Progress {
    /// The emoji that shows it where any emoji may be a reaction.
    pub fn emoji(self) -> &'static str {
        match self {
            Self::Working => "👀",
            Self::Done => "✅",
            Self::Failed => "❌",
        }
    }
}

/// One chat on a front end: how a turn is shown there. Texts are plain;
/// the conversation renders them in the service's markup.
#[async_trait]
pub trait Conversation: Send + Sync {
    /// The most characters one message may hold.
    fn limit(&self) -> usize;

    /// Sends a message.
    async fn send(&self, text: &str) -> Result<MessageId, String>;

    /// Whether [`Conversation::edit`] can change a sent message; when it
    /// cannot (WhatsApp), the answer is sent whole, never streamed.
    fn edits(&self) -> bool {
        true
    }

    /// Replaces a message's text (and any buttons on it).
    async fn edit(&self, message: &MessageId, text: &str) -> Result<(), String>;

    /// Shows `progress` as a reaction on the person's `message`; apps
    /// without reactions leave it.
    async fn react(&self, message: &MessageId, progress: Progress) {
        let _ = (message, progress);
    }

    /// Shows that the agent is working.
    async fn typing(&self);

    /// Asks for an approval with buttons carrying `ticket`.
    async fn ask(&self, request: &ApprovalRequest, ticket: &str) -> Result<MessageId, String>;
}

/// Approvals waiting for a button press, by ticket.
#[derive(Debug, Default, Clone)]
pub struct Approvals(Arc<Mutex<HashMap<String, oneshot::Sender<ApprovalAnswer>>>>);

impl Approvals {
    fn wait(&self) -> (String, oneshot::Receiver<ApprovalAnswer>) {
        let ticket = uuid::Uuid::new_v4().simple().to_string()[..16].to_string();
        let (tx, rx) = oneshot::channel();
        self.lock().insert(ticket.clone(), tx);
        (ticket, rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ApprovalAnswer>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answers the approval with `ticket`; `false` when none waits
    /// (answered, expired, or asked by another process).
    pub fn decide(&self, ticket: &str, answer: ApprovalAnswer) -> bool {
        match self.lock().remove(ticket) {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }
}

/// The data an approval button brings back when pressed (every app's
/// buttons carry it): the ticket and `y`, `n` or `a`.
pub fn approval_button(ticket: &str, choice: &str) -> String {
    format!("ap:{ticket}:{choice}")
}

/// A pressed approval button's data ([`approval_button`]) → the ticket
/// and the answer; `None` for anything else.
pub fn parse_button(data: &str) -> Option<(&str, ApprovalAnswer)> {
    let rest = data.strip_prefix("ap:")?;
    let (ticket, choice) = rest.rsplit_once(':')?;
    let answer = match choice {
        "y" => ApprovalAnswer::Yes,
        "n" => ApprovalAnswer::No,
        "a" => ApprovalAnswer::Always,
        _ => return None,
    };
    Some((ticket, answer))
}

/// How a turn is shown.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// At most one edit of the streamed answer this often.
    pub edit_every: Duration,
    /// The typing indicator is renewed this often.
    pub typing_every: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        // Telegram allows about one edit a second in a chat; its typing
        // indicator lasts five seconds.
        Self {
            edit_every: Duration::from_secs(1),
            typing_every: Duration::from_secs(4),
        }
    }
}

/// The turn as a [`ChatSink`]: streamed text collected for the preview,
/// approvals asked through the conversation.
struct TurnSink<'a> {
    conversation: &'a dyn Conversation,
    approvals: &'a Approvals,
    timeout: Duration,
    streamed: Mutex<String>,
}

impl ChatSink for TurnSink<'_> {
    fn on_event(&self, event: LoopEvent) {
        if let LoopEvent::TextDelta(text) = event {
            self.streamed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&text);
        }
    }

    fn streaming(&self) -> bool {
        true
    }

    fn approver(&self) -> Option<&dyn Approver> {
        Some(self)
    }
}

#[async_trait]
impl Approver for TurnSink<'_> {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        ask_with_buttons(self.conversation, self.approvals, request, self.timeout).await
    }

    fn person_present(&self) -> bool {
        true
    }
}

/// Asks for `request` in `conversation` with buttons and waits up to
/// `timeout` for a press ([`Approvals`]); the message then shows the
/// decision. A request that cannot be shown is declined.
pub async fn ask_with_buttons(
    conversation: &dyn Conversation,
    approvals: &Approvals,
    request: &ApprovalRequest,
    timeout: Duration,
) -> ApprovalAnswer {
    let (ticket, rx) = approvals.wait();
    let shown = match conversation.ask(request, &ticket).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(error = %e, tool = %request.tool, "cannot ask for an approval; declined");
            approvals.decide(&ticket, ApprovalAnswer::No);
            return ApprovalAnswer::No;
        }
    };
    let answer = tokio::select! {
        answer = rx => answer.unwrap_or(ApprovalAnswer::No),
        () = tokio::time::sleep(timeout) => {
            approvals.decide(&ticket, ApprovalAnswer::No);
            ApprovalAnswer::Expired(timeout)
        }
    };
    let text = format!("{}: {}", decision(answer), request.summary);
    if let Err(e) = conversation.edit(&shown, &text).await {
        tracing::debug!(error = %e, "cannot show the approval's decision");
    }
    answer
}

/// How a decision reads on the approval's message once made.
pub fn decision(answer: ApprovalAnswer) -> &'static str {
    match answer {
        ApprovalAnswer::Yes => "✅ Approved",
        ApprovalAnswer::Always => "✅ Approved (always for this tool)",
        ApprovalAnswer::No => "❌ Denied",
        ApprovalAnswer::Expired(_) => "⌛ Not answered in time: declined",
        ApprovalAnswer::Unavailable => "⌛ Nobody could be asked: declined",
    }
}

/// The text that shows a reply.
pub fn reply_text(reply: &Reply) -> String {
    match reply {
        Reply::Answer(report) => report.response.clone(),
        Reply::Notice { text } => text.clone(),
        Reply::Error { text } => format!("⚠️ {text}"),
        Reply::Dropped { reason } => format!("The message was dropped: {reason}"),
        Reply::Quit => "Goodbye.".into(),
    }
}

/// Hands `inbound` to `chat` and shows the turn in `conversation`;
/// `origin`, the person's message, carries the turn's progress as
/// reactions.
pub async fn converse(
    chat: &ChatService,
    inbound: Inbound,
    origin: Option<&MessageId>,
    conversation: &dyn Conversation,
    approvals: &Approvals,
    pace: Pace,
) {
    if let Some(origin) = origin {
        conversation.react(origin, Progress::Working).await;
    }
    let sink = TurnSink {
        conversation,
        approvals,
        timeout: chat.approval_timeout(),
        streamed: Mutex::new(String::new()),
    };
    let limit = conversation.limit();
    let mut preview: Option<(MessageId, String)> = None;
    let turn = chat.handle(inbound, &sink);
    tokio::pin!(turn);
    let mut typing = tokio::time::interval(pace.typing_every);
    let mut edits = tokio::time::interval(pace.edit_every);
    edits.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let reply = loop {
        tokio::select! {
            reply = &mut turn => break reply,
            _ = typing.tick() => conversation.typing().await,
            _ = edits.tick(), if conversation.edits() => {
                let text = sink.streamed.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let shown = split::head(text.trim(), limit).to_string();
                if shown.is_empty() || preview.as_ref().is_some_and(|(_, s)| *s == shown) {
                    continue;
                }
                match &preview {
                    Some((id, _)) => {
                        if conversation.edit(id, &shown).await.is_ok() {
                            preview = Some((id.clone(), shown));
                        }
                    }
                    None => {
                        if let Ok(id) = conversation.send(&shown).await {
                            preview = Some((id, shown));
                        }
                    }
                }
            }
        }
    };
    let parts = split::split(&reply_text(&reply), limit);
    let mut parts = parts.iter();
    if let Some((id, _)) = preview
        && let Some(first) = parts.next()
        && let Err(e) = conversation.edit(&id, first).await
    {
        tracing::warn!(error = %e, "cannot show the answer");
    }
    for part in parts {
        if let Err(e) = conversation.send(part).await {
            tracing::warn!(error = %e, "cannot send the answer");
        }
    }
    if let Some(origin) = origin {
        let progress = match reply {
            Reply::Error { .. } => Progress::Failed,
            _ => Progress::Done,
        };
        conversation.react(origin, progress).await;
    }
}
