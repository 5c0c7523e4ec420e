//! The context monitor: how full the model's context is, by role, and which
//! compaction (if any) that calls for.

use std::fmt;

use cairn_core::chat::{ChatMessage, Role};
use serde::{Deserialize, Serialize};

use super::estimate::{MESSAGE_OVERHEAD, estimate_message, estimate_text};
use crate::session::{Turn, TurnKind};

/// The context limit used when neither configuration nor provider gives one.
pub const DEFAULT_CONTEXT_LIMIT: usize = 100_000;

/// Usage (percent of the limit) above which the old turns move to the workspace.
pub const MOVE_THRESHOLD_PCT: usize = 80;
/// Usage (percent of the limit) above which the old turns are summarized.
pub const SUMMARIZE_THRESHOLD_PCT: usize = 85;
/// Usage (percent of the limit) above which the old turns are dropped.
pub const TRUNCATE_THRESHOLD_PCT: usize = 95;

/// How to shrink a conversation; every strategy keeps the `keep_recent` newest turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "strategy")]
pub enum CompactionStrategy {
    /// Archive the older turns' full text in the workspace and drop them.
    MoveToWorkspace {
        /// Newest turns kept in the conversation.
        keep_recent: usize,
    },
    /// Replace the older turns with a model-written summary turn.
    Summarize {
        /// Newest turns kept in the conversation.
        keep_recent: usize,
    },
    /// Archive the older turns and drop them, without calling a model.
    Truncate {
        /// Newest turns kept in the conversation.
        keep_recent: usize,
    },
}

impl CompactionStrategy {
    /// The number of newest turns the strategy keeps.
    pub fn keep_recent(self) -> usize {
        match self {
            Self::MoveToWorkspace { keep_recent }
            | Self::Summarize { keep_recent }
            | Self::Truncate { keep_recent } => keep_recent,
        }
    }

    /// The same strategy keeping a different number of turns.
    #[must_use]
    pub fn with_keep_recent(self, keep_recent: usize) -> Self {
        match self {
            Self::MoveToWorkspace { .. } => Self::MoveToWorkspace { keep_recent },
            Self::Summarize { .. } => Self::Summarize { keep_recent },
            Self::Truncate { .. } => Self::Truncate { keep_recent },
        }
    }

    /// How hard the strategy cuts: 1 (move) < 2 (summarize) < 3 (truncate).
    pub fn severity(self) -> u8 {
        match self {
            Self::MoveToWorkspace { .. } => 1,
            Self::Summarize { .. } => 2,
            Self::Truncate { .. } => 3,
        }
    }

    /// A short name for logs and messages (`move_to_workspace`, `summarize`, `truncate`).
    pub fn name(self) -> &'static str {
        match self {
            Self::MoveToWorkspace { .. } => "move_to_workspace",
            Self::Summarize { .. } => "summarize",
            Self::Truncate { .. } => "truncate",
        }
    }
}

impl fmt::Display for CompactionStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (keep {} recent turns)",
            self.name(),
            self.keep_recent()
        )
    }
}

/// Estimated tokens of a context, by role, against the model's limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextBreakdown {
    /// System prompt and other system messages.
    pub system_tokens: usize,
    /// The person's messages.
    pub user_tokens: usize,
    /// The model's messages, including the names and arguments of its tool calls.
    pub assistant_tokens: usize,
    /// Tool results.
    pub tool_tokens: usize,
    /// The sum of the above.
    pub total_tokens: usize,
    /// The model's context limit in tokens.
    pub limit: usize,
    /// `total_tokens` as a percentage of `limit` (0–100, more when over).
    pub usage_pct: f64,
}

impl ContextBreakdown {
    fn add(&mut self, message: &ChatMessage) {
        let tokens = estimate_message(message);
        match message.role {
            Role::System => self.system_tokens += tokens,
            Role::User => self.user_tokens += tokens,
            Role::Assistant => self.assistant_tokens += tokens,
            Role::Tool => self.tool_tokens += tokens,
        }
    }

    fn finish(mut self, limit: usize) -> Self {
        self.total_tokens =
            self.system_tokens + self.user_tokens + self.assistant_tokens + self.tool_tokens;
        self.limit = limit;
        // `limit` is at least 1 (see `ContextMonitor::new`), so this is finite.
        self.usage_pct = self.total_tokens as f64 * 100.0 / limit as f64;
        self
    }

    /// Whether the estimate exceeds `pct` percent of the limit (exact, in integers).
    pub fn above_pct(&self, pct: usize) -> bool {
        self.total_tokens.saturating_mul(100) > self.limit.saturating_mul(pct)
    }
}

/// The compaction a breakdown calls for: above 95% truncate to 3 turns,
/// above 85% summarize keeping 5, above 80% move to the workspace keeping 10.
pub fn suggest(breakdown: &ContextBreakdown) -> Option<CompactionStrategy> {
    // Thresholds compare integers so "just above 80%" is never lost to rounding.
    if breakdown.above_pct(TRUNCATE_THRESHOLD_PCT) {
        Some(CompactionStrategy::Truncate { keep_recent: 3 })
    } else if breakdown.above_pct(SUMMARIZE_THRESHOLD_PCT) {
        Some(CompactionStrategy::Summarize { keep_recent: 5 })
    } else if breakdown.above_pct(MOVE_THRESHOLD_PCT) {
        Some(CompactionStrategy::MoveToWorkspace { keep_recent: 10 })
    } else {
        None
    }
}

/// Measures contexts against one model's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextMonitor {
    limit: usize,
}

impl Default for ContextMonitor {
    fn default() -> Self {
        Self::new(DEFAULT_CONTEXT_LIMIT)
    }
}

impl ContextMonitor {
    /// A monitor for a model with this context limit in tokens (0 is read as 1).
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
        }
    }

    /// A monitor for the configured limit (`llm.context_limit`), or the
    /// provider's context window when that is smaller.
    pub fn for_model(configured: usize, provider_window: Option<u32>) -> Self {
        let window =
            provider_window.map_or(usize::MAX, |w| usize::try_from(w).unwrap_or(usize::MAX));
        Self::new(configured.min(window))
    }

    /// The context limit in tokens.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Breaks down a list of messages as sent to the model (system messages included).
    pub fn measure(&self, messages: &[ChatMessage]) -> ContextBreakdown {
        let mut breakdown = ContextBreakdown::default();
        for message in messages {
            breakdown.add(message);
        }
        breakdown.finish(self.limit)
    }

    /// Breaks down a system prompt followed by a thread's turns.
    pub fn measure_turns(&self, system_prompt: &str, turns: &[Turn]) -> ContextBreakdown {
        let mut breakdown = ContextBreakdown::default();
        if !system_prompt.is_empty() {
            breakdown.system_tokens = MESSAGE_OVERHEAD + estimate_text(system_prompt);
        }
        for turn in turns {
            each_context_message(turn, |m| breakdown.add(m));
        }
        breakdown.finish(self.limit)
    }

    /// The compaction a breakdown calls for (see [`suggest`]).
    pub fn suggest(&self, breakdown: &ContextBreakdown) -> Option<CompactionStrategy> {
        suggest(breakdown)
    }
}

/// Estimated tokens of a thread's turns (their messages, without a system prompt).
pub fn estimate_turns(turns: &[Turn]) -> usize {
    let mut total = 0;
    for turn in turns {
        each_context_message(turn, |m| total += estimate_message(m));
    }
    total
}

/// Calls `f` on what a turn puts in the model's context: its messages, or
/// for a summary turn the summary (which travels in the system prompt).
fn each_context_message(turn: &Turn, mut f: impl FnMut(&ChatMessage)) {
    match (turn.kind, &turn.response) {
        (TurnKind::Summary, Some(summary)) => f(&ChatMessage::system(summary.clone())),
        (TurnKind::Summary, None) => {}
        (TurnKind::Exchange, _) => turn.messages.iter().for_each(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::chat::ToolCall;
    use serde_json::json;

    fn breakdown(total: usize, limit: usize) -> ContextBreakdown {
        ContextBreakdown {
            user_tokens: total,
            ..ContextBreakdown::default()
        }
        .finish(limit)
    }

    #[test]
    fn tiers_fire_strictly_above_their_thresholds() {
        let limit = 100_000;
        assert_eq!(suggest(&breakdown(80_000, limit)), None);
        assert_eq!(
            suggest(&breakdown(80_001, limit)),
            Some(CompactionStrategy::MoveToWorkspace { keep_recent: 10 })
        );
        assert_eq!(
            suggest(&breakdown(85_000, limit)),
            Some(CompactionStrategy::MoveToWorkspace { keep_recent: 10 })
        );
        assert_eq!(
            suggest(&breakdown(85_001, limit)),
            Some(CompactionStrategy::Summarize { keep_recent: 5 })
        );
        assert_eq!(
            suggest(&breakdown(95_001, limit)),
            Some(CompactionStrategy::Truncate { keep_recent: 3 })
        );
        assert_eq!(
            suggest(&breakdown(250_000, limit)),
            Some(CompactionStrategy::Truncate { keep_recent: 3 })
        );
    }

    #[test]
    fn breakdown_splits_by_role() {
        let call = ToolCall {
            id: "c1".into(),
            name: "shell".into(),
            arguments: json!({"command": "ls"}),
        };
        let messages = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("list the files please"),
            ChatMessage::assistant_tool_calls("", vec![call]),
            ChatMessage::tool_result("c1", "shell", "a.txt b.txt"),
            ChatMessage::assistant("a.txt and b.txt"),
        ];
        let b = ContextMonitor::new(1_000).measure(&messages);
        assert_eq!(b.system_tokens, estimate_message(&messages[0]));
        assert_eq!(b.user_tokens, estimate_message(&messages[1]));
        assert_eq!(
            b.assistant_tokens,
            estimate_message(&messages[2]) + estimate_message(&messages[4])
        );
        assert_eq!(b.tool_tokens, estimate_message(&messages[3]));
        assert_eq!(
            b.total_tokens,
            messages.iter().map(estimate_message).sum::<usize>()
        );
        assert_eq!(b.limit, 1_000);
        assert!((b.usage_pct - b.total_tokens as f64 / 10.0).abs() < 1e-9);
    }

    #[test]
    fn limit_takes_the_smaller_of_config_and_provider() {
        assert_eq!(
            ContextMonitor::for_model(100_000, Some(32_000)).limit(),
            32_000
        );
        assert_eq!(
            ContextMonitor::for_model(100_000, Some(200_000)).limit(),
            100_000
        );
        assert_eq!(ContextMonitor::for_model(100_000, None).limit(), 100_000);
        assert_eq!(ContextMonitor::new(0).limit(), 1);
        assert_eq!(ContextMonitor::default().limit(), DEFAULT_CONTEXT_LIMIT);
    }

    #[test]
    fn strategies_report_their_shape() {
        let s = CompactionStrategy::Summarize { keep_recent: 5 };
        assert_eq!(s.keep_recent(), 5);
        assert_eq!(
            s.with_keep_recent(2),
            CompactionStrategy::Summarize { keep_recent: 2 }
        );
        assert_eq!(s.to_string(), "summarize (keep 5 recent turns)");
        assert!(CompactionStrategy::Truncate { keep_recent: 3 }.severity() > s.severity());
    }
}
