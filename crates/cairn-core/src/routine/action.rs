//! What a routine does when it fires.

use serde::{Deserialize, Serialize};

/// The work a routine does. Written in files as `action: { type: lightweight, prompt: "…" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RoutineAction {
    /// One LLM call without tools; a reply containing `ROUTINE_OK` means nothing to report.
    Lightweight {
        /// The instruction.
        prompt: String,
        /// Workspace files whose text is added to the prompt.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        context_paths: Vec<String>,
        /// Upper bound on the reply's tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
    },
    /// A full agent job with tools.
    FullJob {
        /// Short title of the job.
        title: String,
        /// What the job should achieve.
        description: String,
        /// Upper bound on LLM/tool rounds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_iterations: Option<u32>,
        /// Tools the policy would ask about that this routine may run
        /// unattended: the person approved them when they wrote the routine.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allowed_tools: Vec<String>,
    },
    /// One tool call, no LLM.
    ToolCall {
        /// The tool's name.
        tool: String,
        /// The tool's arguments (an object).
        #[serde(default = "empty_object")]
        #[cfg_attr(feature = "openapi", schema(value_type = Object, default = json!({})))]
        params: serde_json::Value,
        /// As for `full_job`: the tool may run unattended even if the policy asks.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allowed_tools: Vec<String>,
    },
    /// A reminder: the message is delivered as is.
    Notification {
        /// The text delivered.
        message: String,
        /// Its title (the routine's name when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// A watcher's check: one tool call, no LLM; the strategy decides from
    /// the routine's JSON state whether the result is worth telling.
    Watch {
        /// The tool called at each check.
        tool: String,
        /// Its arguments (an object).
        #[serde(default = "empty_object")]
        #[cfg_attr(feature = "openapi", schema(value_type = Object, default = json!({})))]
        params: serde_json::Value,
        /// When a check is worth a notification.
        #[serde(default)]
        #[cfg_attr(feature = "openapi", schema(default = json!(WatchStrategy::default())))]
        notify_when: WatchStrategy,
        /// The strategy's settings (`expression`, `batch_size`).
        #[serde(default = "empty_object")]
        #[cfg_attr(feature = "openapi", schema(value_type = Object, default = json!({})))]
        notify_config: serde_json::Value,
        /// What the watcher is for, in the person's words.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        label: String,
    },
    /// One of cairn's own upkeep tasks (`heartbeat`, `self-repair`,
    /// `memory-hygiene`), carried out by the task registered under that name.
    System {
        /// The registered task's name.
        task: String,
    },
}

/// When a watcher's check reaches the agent (the execution-primitives seed's strategies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WatchStrategy {
    /// The first check (the baseline), then each check whose result differs from the previous.
    #[default]
    OnChange,
    /// The first failing check of a run of failures, and the first success after them.
    OnError,
    /// Each check whose result makes `notify_config.expression` true.
    OnThreshold,
    /// Every `notify_config.batch_size` checks, with the batch.
    Summary,
    /// Every check.
    Always,
}

impl WatchStrategy {
    /// Every strategy, for listings and parsing.
    pub const ALL: [WatchStrategy; 5] = [
        WatchStrategy::OnChange,
        WatchStrategy::OnError,
        WatchStrategy::OnThreshold,
        WatchStrategy::Summary,
        WatchStrategy::Always,
    ];

    /// The name as written (`on_change`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            WatchStrategy::OnChange => "on_change",
            WatchStrategy::OnError => "on_error",
            WatchStrategy::OnThreshold => "on_threshold",
            WatchStrategy::Summary => "summary",
            WatchStrategy::Always => "always",
        }
    }

    /// The strategy named `name`, if any.
    pub fn parse(name: &str) -> Option<WatchStrategy> {
        WatchStrategy::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for WatchStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Checks a summary watcher keeps together when `batch_size` is not given.
pub const DEFAULT_BATCH_SIZE: u64 = 10;
/// Largest `batch_size` (the history ring holds 100 checks).
pub const MAX_BATCH_SIZE: u64 = 100;

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl RoutineAction {
    /// The action's type name as written in files.
    pub fn kind(&self) -> &'static str {
        match self {
            RoutineAction::Lightweight { .. } => "lightweight",
            RoutineAction::FullJob { .. } => "full_job",
            RoutineAction::ToolCall { .. } => "tool_call",
            RoutineAction::Notification { .. } => "notification",
            RoutineAction::Watch { .. } => "watch",
            RoutineAction::System { .. } => "system",
        }
    }

    /// Tools this routine may run without an approval prompt.
    pub fn allowed_tools(&self) -> &[String] {
        match self {
            RoutineAction::FullJob { allowed_tools, .. }
            | RoutineAction::ToolCall { allowed_tools, .. } => allowed_tools,
            _ => &[],
        }
    }
}
