//! Execution primitives: agent tools that work with any other tool.
//!
//! - [`parallel`]: `run_parallel`, several calls at once, results in order;
//! - [`background`]: `background_run` and friends, calls that outlive the
//!   turn, recorded in the store and announced to the conversation when
//!   they end (see `cairn_agent::chat::notices`);
//! - [`send`]: `send_notification` through the notification router;
//! - [`schedule`]: `schedule_once`, `schedule_cron`, `remember` and their
//!   management, each job a routine whose result comes back into the
//!   conversation that asked;
//! - [`watch`]: watchers (`watch_start` and friends), routines that call a
//!   tool on an interval and tell the agent only what matters.
//!
//! Every call they make goes through the [`ToolRunner`] like any other: the
//! registry holds these tools and the runner holds the registry, so they
//! reach the runner through a [`RunnerLink`] attached once it is built.

pub mod background;
pub mod parallel;
pub mod schedule;
pub mod send;
pub mod watch;

use std::sync::{Arc, OnceLock, Weak};

use cairn_agent::ToolRunner;
use cairn_agent::tools::{ToolError, ToolOutput};
use serde_json::Value;

/// Names the primitives refuse to run inside themselves: `run_parallel`
/// cannot nest, and neither can launch background tasks (a launch must be
/// asked about in the turn, which `run_parallel` never does).
pub(crate) fn is_primitive(name: &str) -> bool {
    name == parallel::RUN_PARALLEL || name.starts_with("background_")
}

/// The tool runner, reached once the registry holding these tools is built.
/// Weak, so that runner → registry → tool → runner is not a cycle.
#[derive(Debug, Default)]
pub struct RunnerLink(OnceLock<Weak<ToolRunner>>);

impl RunnerLink {
    /// An empty link.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Points the link at `runner` (the first call wins).
    pub fn attach(&self, runner: &Arc<ToolRunner>) {
        let _ = self.0.set(Arc::downgrade(runner));
    }

    /// The runner, or an error while none is attached.
    pub fn get(&self) -> Result<Arc<ToolRunner>, ToolError> {
        self.0
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| ToolError::Failed("the tool runner is not available".into()))
    }
}

/// A store failure as a tool error, with its causes.
pub(crate) fn store_error(e: cairn_store::StoreError) -> ToolError {
    ToolError::Failed(cairn_core::text::error_chain(&e))
}

/// An instant as tools show it: RFC 3339 in UTC, to the second.
pub(crate) fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(crate) fn json_output(value: &Value) -> Result<ToolOutput, ToolError> {
    serde_json::to_string_pretty(value)
        .map(ToolOutput::ok)
        .map_err(|e| ToolError::Failed(e.to_string()))
}

pub(crate) fn string_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(ToolError::InvalidArguments(format!(
            "missing required string `{key}`"
        ))),
    }
}
