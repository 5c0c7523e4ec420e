//! Threads and turns: the state machines and the data a conversation keeps.

use cairn_core::chat::{ChatMessage, Role};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::undo::UndoManager;
use crate::agent_loop::ToolCallRecord;

/// Where a thread is in its life.
///
/// `Idle → Processing → (AwaitingApproval → Processing)* → Completed | Interrupted`,
/// and back to `Processing` on the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadState {
    /// No turn has run yet.
    Idle,
    /// A turn is running.
    Processing,
    /// A turn waits for the person to approve a tool call.
    AwaitingApproval,
    /// The last turn finished.
    Completed,
    /// The last turn was interrupted (and may be resumed).
    Interrupted,
}

impl ThreadState {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadState::Idle => "idle",
            ThreadState::Processing => "processing",
            ThreadState::AwaitingApproval => "awaiting_approval",
            ThreadState::Completed => "completed",
            ThreadState::Interrupted => "interrupted",
        }
    }

    /// Reads a stored name; unknown names (from a newer version) read as `Idle`.
    pub fn parse(name: &str) -> ThreadState {
        match name {
            "processing" => ThreadState::Processing,
            "awaiting_approval" => ThreadState::AwaitingApproval,
            "completed" => ThreadState::Completed,
            "interrupted" => ThreadState::Interrupted,
            _ => ThreadState::Idle,
        }
    }
}

/// How a turn ended: `Processing → Completed | Failed | Interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Still running.
    Processing,
    /// The model answered.
    Completed,
    /// The turn failed (provider error, iteration limit, cost limit, a hook).
    Failed,
    /// The turn was interrupted.
    Interrupted,
}

/// Whether a turn is a real exchange or stands for compacted history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// A message and what followed it.
    #[default]
    Exchange,
    /// A summary of older turns, written by compaction.
    Summary,
}

/// Tokens and cost of a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnUsage {
    /// Prompt tokens over all the turn's model calls.
    pub input_tokens: u64,
    /// Generated tokens over all the turn's model calls.
    pub output_tokens: u64,
    /// Cost in micro-dollars.
    pub cost_micros: u64,
}

/// One exchange: the person's message, everything the agent did, and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Where the turn is stored in its thread; 0 until it is first saved.
    #[serde(skip)]
    pub position: i64,
    /// 1-based position in the thread (kept across compaction).
    pub number: u32,
    /// Exchange or summary.
    #[serde(default)]
    pub kind: TurnKind,
    /// What the person wrote.
    pub user_input: String,
    /// The agent's answer, when there was one.
    pub response: Option<String>,
    /// The messages this turn added to the conversation, in order
    /// (the user message, assistant and tool messages, the answer).
    pub messages: Vec<ChatMessage>,
    /// The tool calls made.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallRecord>,
    /// How it ended.
    pub state: TurnState,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// Why it failed or stopped.
    pub error: Option<String>,
    /// Tokens and cost.
    #[serde(default)]
    pub usage: TurnUsage,
    /// The model that answered, as the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The routing hint that chose the model (`[routing]`); `None` for the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
}

impl Turn {
    /// A turn starting now with the person's message.
    pub fn start(number: u32, user_input: String, at: DateTime<Utc>) -> Turn {
        Self::start_with_images(number, user_input, Vec::new(), at)
    }

    /// A turn starting now with the person's message and the images they attached.
    pub fn start_with_images(
        number: u32,
        user_input: String,
        images: Vec<cairn_core::image::ImagePart>,
        at: DateTime<Utc>,
    ) -> Turn {
        Turn {
            position: 0,
            number,
            kind: TurnKind::Exchange,
            messages: vec![ChatMessage::user_with_images(user_input.clone(), images)],
            user_input,
            response: None,
            tool_calls: Vec::new(),
            state: TurnState::Processing,
            started_at: at,
            completed_at: None,
            error: None,
            usage: TurnUsage::default(),
            model: None,
            route: None,
        }
    }

    /// A synthetic turn carrying a summary of older turns. It has no
    /// messages: the summary goes into the system prompt (see
    /// [`Thread::summary`]), because an assistant message at the head of the
    /// history breaks providers that require the user to speak first.
    pub fn summary(number: u32, summary: &str, at: DateTime<Utc>) -> Turn {
        Turn {
            position: 0,
            number,
            kind: TurnKind::Summary,
            user_input: String::new(),
            response: Some(summary.to_string()),
            messages: Vec::new(),
            tool_calls: Vec::new(),
            state: TurnState::Completed,
            started_at: at,
            completed_at: Some(at),
            error: None,
            usage: TurnUsage::default(),
            model: None,
            route: None,
        }
    }
}

/// A conversation within a session.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Unique id.
    pub id: Uuid,
    /// The session it belongs to.
    pub session_id: Uuid,
    /// The channel's own id for the thread, if any.
    pub external_id: Option<String>,
    /// A short title (the first message, shortened).
    pub title: Option<String>,
    /// Where it is in its life.
    pub state: ThreadState,
    /// Its turns, oldest first.
    pub turns: Vec<Turn>,
    /// Checkpoints for undo and redo.
    pub undo: UndoManager,
    /// The position the next stored turn gets (positions are never reused).
    pub next_position: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl Thread {
    /// A new, empty thread.
    pub fn new(
        session_id: Uuid,
        external_id: Option<String>,
        max_checkpoints: usize,
        now: DateTime<Utc>,
    ) -> Thread {
        Thread {
            // Random, not time-ordered: people type id prefixes, which must differ.
            id: Uuid::new_v4(),
            session_id,
            external_id,
            title: None,
            state: ThreadState::Idle,
            turns: Vec::new(),
            undo: UndoManager::new(max_checkpoints),
            next_position: 1,
            created_at: now,
            updated_at: now,
        }
    }

    /// The conversation so far, as messages for the model (summaries are
    /// not messages: see [`Thread::summary`]).
    pub fn history(&self) -> Vec<ChatMessage> {
        history_of(&self.turns)
    }

    /// What compaction summarized of the earlier conversation, if anything:
    /// the system prompt carries it.
    pub fn summary(&self) -> Option<String> {
        summary_of(&self.turns)
    }

    /// The number the next turn gets.
    pub fn next_turn_number(&self) -> u32 {
        self.turns.last().map_or(1, |t| t.number + 1)
    }

    /// The stored positions of the turns shown, in order.
    pub fn view(&self) -> Vec<cairn_store::TurnRange> {
        cairn_store::view_of(self.turns.iter().map(|t| t.position))
    }
}

/// The messages of `turns` for the model: summary turns left out, and every
/// tool call answered — a call whose result never came (the turn was
/// interrupted or the process died) gets a result saying so, since providers
/// reject a tool call without one.
pub fn history_of(turns: &[Turn]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for turn in turns.iter().filter(|t| t.kind == TurnKind::Exchange) {
        out.extend(answered(&turn.messages));
    }
    out
}

/// The text of the summary turns among `turns`, oldest first.
pub fn summary_of(turns: &[Turn]) -> Option<String> {
    let parts: Vec<&str> = turns
        .iter()
        .filter(|t| t.kind == TurnKind::Summary)
        .filter_map(|t| t.response.as_deref())
        .map(|s| s.strip_prefix(LEGACY_SUMMARY_HEADING).unwrap_or(s))
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// How summaries began when they were assistant messages (older threads).
const LEGACY_SUMMARY_HEADING: &str = "[Summary of the earlier conversation]\n";

/// What a tool call that never finished answers.
pub const UNFINISHED_CALL: &str = "this tool call did not finish: the turn was interrupted before its result arrived. Call it again if it is still needed.";

/// `messages` with a result added after each tool call that has none.
pub fn answered(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    let mut open: Vec<(String, String)> = Vec::new();
    let close = |out: &mut Vec<ChatMessage>, open: &mut Vec<(String, String)>| {
        for (id, name) in open.drain(..) {
            out.push(ChatMessage::tool_result(id, name, UNFINISHED_CALL));
        }
    };
    for message in messages {
        match message.role {
            Role::Tool => {
                if let Some(id) = &message.tool_call_id {
                    open.retain(|(open_id, _)| open_id != id);
                }
            }
            _ => close(&mut out, &mut open),
        }
        if message.role == Role::Assistant {
            open = message
                .tool_calls
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect();
        }
        out.push(message.clone());
    }
    close(&mut out, &mut open);
    out
}

/// The first line of a message, shortened, as a thread title.
pub fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    let mut title: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        title.push('…');
    }
    title
}
