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
use cairn_core::live::Live;
use cairn_core::routine::RunStatus;
use cairn_core::text::error_chain;
use cairn_store::Store;

use super::action::{ActionOutcome, ActionRequest};
use super::actions::RoutineAgents;
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

/// Archives and purges the owner's memories by age and writes the
/// snapshot, for each agent in its own workspace.
pub struct MemoryHygiene {
    store: Store,
    user_id: String,
    settings: HygieneSettings,
    /// Each agent and its workspace, `main` first.
    agents: Vec<(String, PathBuf)>,
    /// The agents routines run as, when a reload of `[[agents]]` may
    /// replace them ([`MemoryHygiene::with_agent_set`]).
    live: Option<Live<RoutineAgents>>,
    clock: Arc<dyn Clock>,
}

impl MemoryHygiene {
    /// For `user_id`'s memories of `main`, writing the snapshot into `workspace`.
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
            agents: vec![(cairn_store::MAIN_AGENT.to_string(), workspace.into())],
            live: None,
            clock,
        }
    }

    /// Also cleans the memories of every agent in `agents` when it runs,
    /// each in its workspace (the one its routines run in).
    #[must_use]
    pub fn with_agent_set(mut self, agents: Live<RoutineAgents>) -> Self {
        self.live = Some(agents);
        self
    }

    /// Every agent to clean now and its workspace, `main` first.
    fn agents(&self) -> Vec<(String, PathBuf)> {
        let mut all = self.agents.clone();
        if let Some(live) = &self.live {
            for (id, agent) in live.get().iter() {
                if !all.iter().any(|(a, _)| a == id) {
                    all.push((id.clone(), agent.ctx.workspace.clone()));
                }
            }
        }
        all
    }

    /// Also cleans `agent`'s memories, writing its snapshot into `workspace`.
    #[must_use]
    pub fn with_agent(mut self, agent: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
        self.agents.push((agent.into(), workspace.into()));
        self
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
        let mut lines = Vec::new();
        let agents = self.agents();
        for (agent, workspace) in &agents {
            let report = run_hygiene(
                &self.store,
                &self.user_id,
                agent,
                &self.settings,
                workspace,
                self.clock.now(),
            )
            .await;
            let report = match report {
                Ok(report) if !report.ran => {
                    return ActionOutcome::new(RunStatus::Ok, "hygiene is off");
                }
                Ok(report) => report,
                Err(e) => {
                    return ActionOutcome::failed(format!(
                        "memory hygiene of {agent} failed: {}",
                        error_chain(&e)
                    ));
                }
            };
            // Named by agent only when there are several.
            let who = if agents.len() > 1 {
                format!("{agent}: ")
            } else {
                String::new()
            };
            lines.push(format!(
                "{who}archived {}, purged {} archived and {} conversation memories{}",
                report.archived,
                report.purged,
                report.purged_conversation,
                report
                    .snapshot
                    .map(|p| format!("; snapshot written to {}", p.display()))
                    .unwrap_or_default()
            ));
        }
        ActionOutcome::new(RunStatus::Ok, lines.join("; "))
    }
}
