//! System routines: cairn's own upkeep (`heartbeat`, `self-repair`,
//! `memory-hygiene`) run as ordinary routines through the engine, so they get
//! slots, run history and guardrails, and with several daemons on one
//! database each slot runs once.
//!
//! One mechanism, two halves:
//!
//! - a routine whose action is [`RoutineAction::System`] names a task; the
//!   executor ([`AgentActions`](super::actions::AgentActions)) looks the name
//!   up in its [`SystemTasks`] and runs that [`SystemTask`];
//! - at start the daemon calls [`ensure_system_routines`] with one
//!   [`SystemRoutine`] per task, which creates or corrects the stored
//!   routine by name.
//!
//! Registering a new one is two lines in the binary: `actions.with_system_task(NAME, task)`
//! and a `SystemRoutine::every(NAME, description, interval)` in the list given
//! to [`ensure_system_routines`].
//!
//! **Idempotent and quiet.** Ensuring reads the routine first and writes only
//! what differs, so daemons restarting (or starting together) do not bump
//! `routines.version`; a creation that loses the race to another daemon is
//! a unique-name conflict, taken as "already there". **Deleting one** (`cairn
//! routine delete heartbeat`) lasts until the next daemon start, which
//! recreates it; to turn one off for good, use its setting
//! (`heartbeat.enabled = false`), which the daemon writes as the routine's
//! `enabled` at start.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_core::routine::{
    CatchUp, NotifyConfig, Routine, RoutineAction, RoutineGuardrails, RoutineSpec, Trigger,
};
use cairn_store::{Store, StoreError};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::action::{ActionOutcome, ActionRequest};
use super::service::RoutineService;
use cairn_core::clock::FixedClock;

/// One of cairn's upkeep tasks, run when its system routine fires.
#[async_trait]
pub trait SystemTask: Send + Sync {
    /// Does the work once, never panicking. The request carries the routine
    /// (its JSON state is in `routine.runtime.state`; return a new one in
    /// [`ActionOutcome::state`]) and the cancel token.
    async fn run(&self, request: &ActionRequest) -> ActionOutcome;
}

/// The system tasks an executor knows, by name.
#[derive(Clone, Default)]
pub struct SystemTasks {
    tasks: BTreeMap<String, Arc<dyn SystemTask>>,
}

impl std::fmt::Debug for SystemTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tasks.keys()).finish()
    }
}

impl SystemTasks {
    /// Registers `task` under `name` (replacing one of the same name).
    pub fn register(&mut self, name: impl Into<String>, task: Arc<dyn SystemTask>) {
        self.tasks.insert(name.into(), task);
    }

    /// The task registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn SystemTask>> {
        self.tasks.get(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tasks.keys().map(String::as_str).collect()
    }

    /// Runs the task named `name`, or fails the run naming what is registered.
    pub async fn run(&self, name: &str, request: &ActionRequest) -> ActionOutcome {
        match self.get(name) {
            Some(task) => task.run(request).await,
            None => ActionOutcome::failed(format!(
                "no system task named \"{name}\" in this process (registered: {}); \
                 a daemon of another version may have created this routine",
                if self.tasks.is_empty() {
                    "none".to_string()
                } else {
                    self.names().join(", ")
                }
            )),
        }
    }
}

/// Why the agent may not change, disable, pause, resume, backfill or delete
/// `routine`, when it is a built-in one (action `system`): the person
/// controls those through their settings, which the daemon writes over the
/// stored routine at start anyway. `None` for every other routine.
pub fn builtin_refusal(routine: &Routine) -> Option<String> {
    let RoutineAction::System { task } = &routine.spec.action else {
        return None;
    };
    let setting = match task.as_str() {
        super::heartbeat::HEARTBEAT => {
            "[heartbeat] in config.toml (heartbeat.enabled, heartbeat.interval_secs, heartbeat.active_hours)"
        }
        super::upkeep::MEMORY_HYGIENE => {
            "memory.hygiene_enabled in config.toml (with memory.archive_after_days and memory.purge_after_days)"
        }
        super::upkeep::SELF_REPAIR => {
            "[repair] in config.toml (repair.stuck_after_secs, repair.max_attempts, repair.tool_failure_limit)"
        }
        _ => "its settings in config.toml",
    };
    Some(format!(
        "\"{}\" is a built-in routine (cairn's own {task}); the agent cannot change, disable, pause, resume, backfill or delete it. \
         The person controls it with {setting}.",
        routine.spec.name
    ))
}

/// A built-in routine as the daemon wants it stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemRoutine {
    /// The routine's name, which is also its task's name.
    pub name: String,
    /// What it is for (shown by `routine list`).
    pub description: String,
    /// Its interval.
    pub interval: Duration,
    /// Whether it runs (its setting; written over the stored flag at start).
    pub enabled: bool,
    /// Whom it tells; by default only a found problem (`attention`) is told.
    pub notify: NotifyConfig,
    /// A run taking longer than this is stopped and recorded failed.
    pub timeout: Option<Duration>,
}

impl SystemRoutine {
    /// A routine running task `name` every `interval`, enabled, telling
    /// only what needs attention.
    pub fn every(
        name: impl Into<String>,
        description: impl Into<String>,
        interval: Duration,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            interval,
            enabled: true,
            notify: NotifyConfig {
                on_failure: false,
                ..NotifyConfig::default()
            },
            timeout: Some(Duration::from_secs(600)),
        }
    }

    /// The spec it is stored as: an interval trigger, the system action,
    /// one run at a time, missed beats skipped (a heartbeat an hour late is
    /// no use, and several queued ones even less).
    pub fn spec(&self) -> RoutineSpec {
        RoutineSpec {
            name: self.name.clone(),
            description: format!(
                "{} (built in: recreated at each daemon start)",
                self.description
            ),
            enabled: self.enabled,
            agent: None,
            trigger: Trigger::Cron {
                schedule: format!("every {}s", self.interval.as_secs().max(1)),
            },
            action: RoutineAction::System {
                task: self.name.clone(),
            },
            guardrails: RoutineGuardrails {
                max_concurrent: 1,
                catch_up: CatchUp::Skip,
                timeout: self.timeout,
                ..RoutineGuardrails::default()
            },
            notify: self.notify.clone(),
            timezone: None,
        }
    }
}

/// What [`ensure_system_routines`] did for one routine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// It was missing and is now stored.
    Created,
    /// Its spec differed (a changed interval or setting) and was replaced;
    /// its run history and state are kept.
    Updated,
    /// It was as wanted: nothing written.
    Unchanged,
    /// Another process created it at the same moment.
    Raced,
}

/// Makes each of `wanted` exist for `user_id` as specified, writing only
/// what differs (see the module doc), through the routine service
/// ([`RoutineService::ensure_builtin`]). Returns what was done, in order.
pub async fn ensure_system_routines(
    store: &Store,
    user_id: &str,
    wanted: &[SystemRoutine],
    user_zone: Tz,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Ensured)>, StoreError> {
    RoutineService::new(
        store.clone(),
        Arc::new(FixedClock::new(now)),
        user_id,
        user_zone,
    )
    .ensure_builtin(wanted)
    .await
}
