//! Threads and turns: the state machines and the data a conversation keeps.

use cairn_core::chat::ChatMessage;
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
}

impl Turn {
    /// A synthetic turn carrying a summary of older turns.
    pub fn summary(number: u32, summary: &str, at: DateTime<Utc>) -> Turn {
        let text = format!("[Summary of the earlier conversation]\n{summary}");
        Turn {
            number,
            kind: TurnKind::Summary,
            user_input: String::new(),
            response: Some(text.clone()),
            messages: vec![ChatMessage::assistant(text)],
            tool_calls: Vec::new(),
            state: TurnState::Completed,
            started_at: at,
            completed_at: Some(at),
            error: None,
            usage: TurnUsage::default(),
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
            created_at: now,
            updated_at: now,
        }
    }

    /// The conversation so far, as messages for the model.
    pub fn history(&self) -> Vec<ChatMessage> {
        self.turns
            .iter()
            .flat_map(|t| t.messages.iter().cloned())
            .collect()
    }

    /// The number the next turn gets.
    pub fn next_turn_number(&self) -> u32 {
        self.turns.last().map_or(1, |t| t.number + 1)
    }
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
