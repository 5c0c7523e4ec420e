//! What a routine does when it fires.

use serde::{Deserialize, Serialize};

/// The work a routine does. Written in files as `action: { type: lightweight, prompt: "…" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// One of cairn's own upkeep tasks (`heartbeat`, `self-repair`,
    /// `memory-hygiene`), carried out by the task registered under that name.
    System {
        /// The registered task's name.
        task: String,
    },
}

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
