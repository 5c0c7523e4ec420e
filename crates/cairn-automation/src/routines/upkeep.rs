//! The two upkeep tasks besides the heartbeat, run as system routines
//! ([`super::system`]): `self-repair` every hour, and at once when a job
//! stops making progress ([`super::upkeep_watch`]), and `memory-hygiene`
//! once a day. Each does its work through cairn-agent's functions and
//! leaves what it did as the run's summary, so `cairn routine runs
//! self-repair` is its log; the people concerned were already told by those
//! functions (one notification per job given up or tool disabled).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::JobScheduler;
use cairn_agent::memory::hygiene::{HygieneSettings, run_hygiene};
use cairn_agent::repair::repair_tools;
use cairn_core::clock::Clock;
use cairn_core::routine::RunStatus;
use cairn_core::text::error_chain;
use cairn_store::Store;

use super::action::{ActionOutcome, ActionRequest};
use super::system::{SystemRoutine, SystemTask};

/// The self-repair routine's (and task's) name.
pub const SELF_REPAIR: &str = "self-repair";
/// The memory hygiene routine's (and task's) name.
pub const MEMORY_HYGIENE: &str = "memory-hygiene";

/// Self-repair's own cadence: an idle daemon records no run a minute; a
/// job that stops making progress fires it sooner ([`super::upkeep_watch`]).
pub const SELF_REPAIR_EVERY: Duration = Duration::from_secs(3600);
/// How often memory hygiene runs.
pub const HYGIENE_EVERY: Duration = Duration::from_secs(24 * 3600);

/// Restarts jobs without progress (then gives up on them) and reports the
/// tools disabled for failing.
pub struct SelfRepair {
    store: Store,
    jobs: Option<Arc<JobScheduler>>,
    clock: Arc<dyn Clock>,
}

impl SelfRepair {
    /// Over `store`; without `jobs` (no LLM configured) only tools are looked at.
    pub fn new(store: Store, jobs: Option<Arc<JobScheduler>>, clock: Arc<dyn Clock>) -> Self {
        Self { store, jobs, clock }
    }

    /// Its system routine.
    pub fn routine() -> SystemRoutine {
        SystemRoutine::every(
            SELF_REPAIR,
            "restarts jobs that stopped making progress and reports tools disabled for failing",
            SELF_REPAIR_EVERY,
        )
    }
}

#[async_trait]
impl SystemTask for SelfRepair {
    async fn run(&self, _: &ActionRequest) -> ActionOutcome {
        let mut lines = Vec::new();
        let mut errors = Vec::new();
        if let Some(jobs) = &self.jobs {
            let report = jobs.repair_stuck(self.clock.now()).await;
            let summary = report.summary();
            if !summary.trim().is_empty() {
                lines.push(summary);
            }
            errors.extend(report.errors);
        }
        match repair_tools(&self.store).await {
            Ok(disabled) => {
                for tool in disabled {
                    lines.push(format!(
                        "tool {} disabled after {} failures in a row ({}); `cairn tool enable {}` turns it back on",
                        tool.name,
                        tool.consecutive_failures,
                        tool.last_error.as_deref().unwrap_or("no error kept"),
                        tool.name
                    ));
                }
            }
            Err(e) => errors.push(format!("cannot read tool health: {}", error_chain(&e))),
        }
        if !errors.is_empty() {
            return ActionOutcome::failed(errors.join("\n"));
        }
        if lines.is_empty() {
            lines.push("nothing to repair".into());
        }
        ActionOutcome::new(RunStatus::Ok, lines.join("\n"))
    }
}

/// Archives and purges the owner's memories by age and writes the snapshot.
pub struct MemoryHygiene {
    store: Store,
    user_id: String,
    settings: HygieneSettings,
    workspace: PathBuf,
    clock: Arc<dyn Clock>,
}

impl MemoryHygiene {
    /// For `user_id`'s memories, writing the snapshot into `workspace`.
    pub fn new(
        store: Store,
        user_id: impl Into<String>,
        settings: HygieneSettings,
        workspace: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            user_id: user_id.into(),
            settings,
            workspace: workspace.into(),
            clock,
        }
    }

    /// Its system routine (off when hygiene is).
    pub fn routine(settings: &HygieneSettings) -> SystemRoutine {
        let mut routine = SystemRoutine::every(
            MEMORY_HYGIENE,
            "archives and purges old memories (core ones never) and writes MEMORY_SNAPSHOT.md",
            HYGIENE_EVERY,
        );
        routine.enabled = settings.enabled;
        routine
    }
}

#[async_trait]
impl SystemTask for MemoryHygiene {
    async fn run(&self, _: &ActionRequest) -> ActionOutcome {
        match run_hygiene(
            &self.store,
            &self.user_id,
            // The main agent's memories, in the main workspace; other agents' are not cleaned yet.
            cairn_store::MAIN_AGENT,
            &self.settings,
            &self.workspace,
            self.clock.now(),
        )
        .await
        {
            Ok(report) if !report.ran => ActionOutcome::new(RunStatus::Ok, "hygiene is off"),
            Ok(report) => ActionOutcome::new(
                RunStatus::Ok,
                format!(
                    "archived {}, purged {} archived and {} conversation memories{}",
                    report.archived,
                    report.purged,
                    report.purged_conversation,
                    report
                        .snapshot
                        .map(|p| format!("; snapshot written to {}", p.display()))
                        .unwrap_or_default()
                ),
            ),
            Err(e) => ActionOutcome::failed(format!("memory hygiene failed: {}", error_chain(&e))),
        }
    }
}
