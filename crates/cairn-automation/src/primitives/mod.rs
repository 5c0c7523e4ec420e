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

pub(crate) use crate::tool_io::{rfc3339, store_error};

use std::sync::{Arc, OnceLock, Weak};

use cairn_agent::ToolRunner;
use cairn_agent::tools::ToolError;

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
