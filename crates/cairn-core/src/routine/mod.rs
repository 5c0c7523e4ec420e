//! Routines: named, persistent tasks that fire on a trigger, do an action under
//! guardrails, and tell the person when it matters.
//!
//! A [`RoutineSpec`] is what a person writes (YAML or JSON, the seed's shape);
//! a [`Routine`] is a spec with its identity, owner and runtime state, as the
//! store keeps it.

mod action;
mod diagnose;
mod file;
mod guardrails;
pub mod jitter;
mod locate;
#[cfg(feature = "openapi")]
pub mod openapi;
mod overlap;
mod run;
mod secret;
mod trigger;
mod validate;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use action::{DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, RoutineAction, WatchStrategy};
pub use diagnose::SpecProblems;
pub use file::{RoutineFileError, SpecFormat};
pub use guardrails::{
    CatchUp, DEFAULT_CATCH_UP_LIMIT, DEFAULT_RETENTION, NotifyConfig, OnInterrupt, Retry,
    RoutineGuardrails,
};
pub use locate::line_of;
pub use overlap::{Fate, Going, Overlap, RoundPlan, decide as decide_overlap};
pub use run::{FIRST_ATTEMPT, RoutineRun, RunStatus, RunTry, UnknownStatus};
pub use secret::{REDACTED_SECRET, env_reference};
pub use trigger::Trigger;
pub use validate::{ValidationError, ValidationErrors};

/// Most memory one event pattern may compile to (bytes of regex program):
/// far above any pattern people write for chat messages (`deploy\s+\w+` is
/// a few KiB), far below what `(a{1000}){1000}` needs. Checked when a
/// routine is validated and again when the event matcher is built.
pub const EVENT_PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// A routine as a person writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "name": "morning-brief",
    "description": "what is on today",
    "trigger": {"type": "cron", "schedule": "0 8 * * 1-5"},
    "action": {"type": "lightweight", "prompt": "Summarise my day"},
    "guardrails": {"cooldown": "5m", "max_concurrent": 1},
    "timezone": "Europe/Paris"
})))]
#[serde(deny_unknown_fields)]
pub struct RoutineSpec {
    /// Unique, file-name-safe name (`daily-pr-summary`): letters, digits,
    /// `-`, `_`, `.`, starting with a letter or digit.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$",
            min_length = 1,
            max_length = 64
        )
    )]
    pub name: String,
    /// What the routine is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Disabled routines never fire.
    #[serde(default = "enabled_default", skip_serializing_if = "is_true")]
    #[cfg_attr(feature = "openapi", schema(default = enabled_default))]
    pub enabled: bool,
    /// The agent that runs it: an `id` of `[[agents]]` (its model, tools,
    /// workspace and memory); `main` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// When it fires.
    #[cfg_attr(feature = "openapi", schema(value_type = openapi::TriggerSchema))]
    pub trigger: Trigger,
    /// What it does.
    #[cfg_attr(feature = "openapi", schema(value_type = openapi::RoutineActionSchema))]
    pub action: RoutineAction,
    /// Limits on firing.
    #[serde(default)]
    pub guardrails: RoutineGuardrails,
    /// Whom to tell.
    #[serde(default)]
    pub notify: NotifyConfig,
    /// IANA zone its schedule is read in (the user's zone when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// The agent a routine without `agent` runs as.
pub const MAIN_AGENT: &str = "main";

impl RoutineSpec {
    /// The id of the agent that runs it: its `agent`, else [`MAIN_AGENT`].
    pub fn agent_id(&self) -> &str {
        self.agent.as_deref().unwrap_or(MAIN_AGENT)
    }

    /// What happens to a slot of this routine whose run was interrupted: as
    /// written, else `rerun` for actions safe to repeat (`notification`,
    /// `lightweight`, `system`, or any marked `idempotent`) and `skip` for
    /// those that act on the world (`tool_call`, `full_job`, `watch`).
    pub fn on_interrupt(&self) -> OnInterrupt {
        if let Some(chosen) = self.guardrails.on_interrupt {
            return chosen;
        }
        let repeatable = matches!(
            self.action,
            RoutineAction::Notification { .. }
                | RoutineAction::Lightweight { .. }
                | RoutineAction::System { .. }
        );
        if repeatable || self.guardrails.idempotent {
            OnInterrupt::Rerun
        } else {
            OnInterrupt::Skip
        }
    }

    /// What a slot does while a run of this routine is going: as written,
    /// else `allow_all` when `max_concurrent` allows several runs (as before
    /// `overlap` existed), else `skip`.
    pub fn overlap(&self) -> Overlap {
        match self.guardrails.overlap {
            Some(chosen) => chosen,
            None if self.guardrails.max_concurrent > 1 => Overlap::AllowAll,
            None => Overlap::Skip,
        }
    }
}

fn enabled_default() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// What changes as a routine runs: kept by the store, never written by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineRuntime {
    /// Start of the latest run.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The next scheduled slot, for timed triggers.
    pub next_fire_at: Option<DateTime<Utc>>,
    /// Runs so far.
    pub run_count: u64,
    /// Failed runs in a row (reset by a successful one).
    pub consecutive_failures: u32,
    /// Free-form state the routine carries between runs.
    pub state: serde_json::Value,
    /// Set while the routine is paused: it keeps its schedule and fires nothing.
    #[serde(default)]
    pub paused: Option<Pause>,
    /// When it was last resumed (slots older than this were missed while paused).
    #[serde(default)]
    pub resumed_at: Option<DateTime<Utc>>,
}

/// Who paused a routine, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// When.
    pub at: DateTime<Utc>,
    /// Who: a person through a front end (`ada (cli)`), the agent, or cairn itself.
    pub by: String,
    /// Why, as they wrote it.
    pub note: Option<String>,
}

impl Default for RoutineRuntime {
    fn default() -> Self {
        Self {
            last_run_at: None,
            next_fire_at: None,
            run_count: 0,
            consecutive_failures: 0,
            state: serde_json::Value::Object(serde_json::Map::new()),
            paused: None,
            resumed_at: None,
        }
    }
}

/// A stored routine: identity, owner, spec and runtime state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routine {
    /// Unique id.
    pub id: Uuid,
    /// Owner.
    pub user_id: String,
    /// The part a person writes.
    pub spec: RoutineSpec,
    /// The part the engine keeps.
    pub runtime: RoutineRuntime,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change to the spec or runtime.
    pub updated_at: DateTime<Utc>,
}

impl Routine {
    /// A new routine for `user_id` from a validated spec, created at `now`.
    pub fn new(spec: RoutineSpec, user_id: impl Into<String>, now: DateTime<Utc>) -> Self {
        Self {
            id: Uuid::now_v7(),
            user_id: user_id.into(),
            spec,
            runtime: RoutineRuntime::default(),
            created_at: now,
            updated_at: now,
        }
    }

    /// This routine's fixed `jitter` offset (zero without `jitter`).
    pub fn jitter(&self) -> chrono::Duration {
        let bound = self.spec.guardrails.jitter.unwrap_or_default();
        chrono::Duration::from_std(jitter::offset(self.id, bound)).unwrap_or_default()
    }

    /// When the slot `slot` fires: the slot plus the routine's jitter.
    pub fn fires_at(&self, slot: DateTime<Utc>) -> DateTime<Utc> {
        slot + self.jitter()
    }

    /// When its next slot fires (jitter applied), if it has one.
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.runtime.next_fire_at.map(|s| self.fires_at(s))
    }
}
