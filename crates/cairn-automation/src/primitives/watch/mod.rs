//! Watchers: `watch_start`, `watch_stop`, `watch_pause`, `watch_resume`,
//! `watch_status`, `watch_list`, `watch_history`, and [`Watchers`], the
//! service behind them and `/api/watchers`.
//!
//! A watcher is a routine on the routine engine, not a loop beside it:
//! named `watch-<watcher_id>`, triggered `every Ns` (5-3600 s), with
//! `max_concurrent: 1`, `catch_up: skip` and `retention: 100` (its run
//! history is the 100-entry ring `watch_history` reads), and a `watch`
//! action (see [`crate::routines::watch`]). So it gets slots, exactly-once
//! across engines, crash safety and persistence from the engine; pausing
//! disables the routine (the engine skips it, counts and history stay).
//! Its escalations go to `conversation:<session that started it>`, or to
//! the `output_channel` given.
//!
//! A tool the policy would ask about, or denies, cannot be watched: a
//! watcher runs unattended. The policy is asked without asking the person
//! ([`ToolRunner::check`]), here and again at every check. Starting,
//! stopping, pausing or resuming one is a write the person approves,
//! refused where nobody can (`CallPlan::needs_person`): a watcher is recurring
//! work on their behalf.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, Check};
use cairn_agent::tools::args::nonblank;
use cairn_agent::tools::{Tool, ToolError};
use cairn_core::notification::conversation_channel;
use cairn_core::routine::{
    CatchUp, NotifyConfig, Routine, RoutineAction, RoutineGuardrails, RoutineSpec, RunStatus,
    Trigger, WatchStrategy,
};
use cairn_core::text::error_chain;
use cairn_store::StoreError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::{RunnerLink, is_primitive};
use crate::routines::service::{Actor, RoutineService, ServiceError};
use crate::routines::watch::{
    check_session, interval_of, interval_schedule, parse_summary, routine_name, watcher_id,
};

mod tools;

/// The one line naming these tools when schemas load on demand.
const WATCH_FAMILY: &str =
    "watch a tool's result on an interval; you are told only when it matters";

/// Shortest interval between checks, in seconds.
pub const MIN_INTERVAL: u64 = 5;
/// Longest interval between checks, in seconds.
pub const MAX_INTERVAL: u64 = 3600;
/// Interval when none is given, in seconds.
pub const DEFAULT_INTERVAL: u64 = 30;
/// Checks a watcher's history keeps.
pub const HISTORY: u32 = 100;
/// Entries `watch_history` gives when the call does not say.
pub const DEFAULT_HISTORY: u32 = 10;

/// What a new watcher watches and how.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchRequest {
    /// The tool called at each check.
    pub tool: String,
    /// Its arguments.
    pub params: Value,
    /// Seconds between checks.
    pub interval: u64,
    /// What it is for.
    pub label: String,
    /// When a check is told.
    pub notify_when: WatchStrategy,
    /// The strategy's settings.
    pub notify_config: Value,
    /// Where escalations go instead of the conversation.
    pub output_channel: Option<String>,
}

impl WatchRequest {
    /// Reads `watch_start`'s arguments (`name`, `params`, `interval`,
    /// `label`, `notify_when`, `notify_config`, `output_channel`).
    pub fn from_args(args: &Value) -> Result<WatchRequest, WatchError> {
        // Stored as text: PostgreSQL refuses NUL in text columns.
        if args.to_string().contains("\\u0000") {
            return Err(WatchError::Invalid(
                "the arguments hold a NUL character".into(),
            ));
        }
        let tool = nonblank(args, "name")
            .map_err(|_| WatchError::Invalid("missing required string `name` (the tool)".into()))?
            .to_string();
        let params = object_or_empty(args.get("params"), "params")?;
        let interval = match args.get("interval") {
            None | Some(Value::Null) => DEFAULT_INTERVAL,
            Some(v) => interval_secs(v.as_f64())?,
        };
        let label = match args.get("label") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(WatchError::Invalid("`label` must be a string".into())),
        };
        let notify_when = match args.get("notify_when") {
            None | Some(Value::Null) => WatchStrategy::default(),
            Some(Value::String(s)) => strategy(s)?,
            Some(_) => return Err(WatchError::Invalid("`notify_when` must be a string".into())),
        };
        let notify_config = object_or_empty(args.get("notify_config"), "notify_config")?;
        let output_channel = match args.get("output_channel") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(_) => {
                return Err(WatchError::Invalid(
                    "`output_channel` must be a non-empty string".into(),
                ));
            }
        };
        Ok(WatchRequest {
            tool,
            params,
            interval,
            label,
            notify_when,
            notify_config,
            output_channel,
        })
    }
}

/// The strategy named `name`, or an error listing the five.
pub fn strategy(name: &str) -> Result<WatchStrategy, WatchError> {
    WatchStrategy::parse(name).ok_or_else(|| {
        WatchError::Invalid(format!(
            "unknown notify_when \"{name}\"; expected on_change, on_error, on_threshold, summary or always"
        ))
    })
}

/// A number of seconds from 5 to 3600 (fractions rounded to whole seconds).
pub fn interval_secs(value: Option<f64>) -> Result<u64, WatchError> {
    match value {
        Some(v) if v.is_finite() && (MIN_INTERVAL as f64..=MAX_INTERVAL as f64).contains(&v) => {
            Ok(v.round() as u64)
        }
        _ => Err(interval_error()),
    }
}

fn interval_error() -> WatchError {
    WatchError::Invalid(format!(
        "`interval` must be a number of seconds from {MIN_INTERVAL} to {MAX_INTERVAL}"
    ))
}

fn object_or_empty(value: Option<&Value>, key: &str) -> Result<Value, WatchError> {
    match value {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(WatchError::Invalid(format!("`{key}` must be an object"))),
    }
}

/// Why a watcher operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The request is malformed.
    #[error("{0}")]
    Invalid(String),
    /// No such watcher.
    #[error("no watcher with id \"{0}\"; watch_list shows them")]
    NotFound(String),
    /// The policy does not let the tool run unattended.
    #[error("{0}")]
    Refused(String),
    /// What the operation needs is not there (no tool runner).
    #[error("{0}")]
    Unavailable(String),
    /// The store failed.
    #[error("{}", error_chain(.0))]
    Store(#[from] StoreError),
}

impl From<ServiceError> for WatchError {
    fn from(e: ServiceError) -> WatchError {
        match e {
            ServiceError::Store(e) => WatchError::Store(e),
            ServiceError::Forbidden(_) | ServiceError::Conflict(_) => {
                WatchError::Refused(e.to_string())
            }
            e => WatchError::Invalid(e.to_string()),
        }
    }
}

impl From<WatchError> for ToolError {
    fn from(e: WatchError) -> ToolError {
        match e {
            WatchError::Invalid(_) | WatchError::NotFound(_) | WatchError::Refused(_) => {
                ToolError::InvalidArguments(e.to_string())
            }
            WatchError::Unavailable(_) | WatchError::Store(_) => ToolError::Failed(e.to_string()),
        }
    }
}

/// A watcher as listed and shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatcherView {
    /// Its id (12 hex digits).
    pub watcher_id: String,
    /// The watched tool.
    pub tool_name: String,
    /// Its arguments.
    pub params: Value,
    /// What it is for.
    pub label: String,
    /// `running` or `paused`.
    pub status: String,
    /// Seconds between checks.
    pub interval: u64,
    /// The strategy.
    pub notify_when: String,
    /// The strategy's settings.
    pub notify_config: Value,
    /// Where escalations go (`conversation:<session>` or a channel).
    pub output_channel: Option<String>,
    /// Checks so far.
    pub check_count: u64,
    /// Notifications so far.
    pub notification_count: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last checked.
    pub last_check_at: Option<DateTime<Utc>>,
    /// When it checks next (none while paused).
    pub next_check_at: Option<DateTime<Utc>>,
    /// The routine behind it.
    pub routine: String,
}

/// One check, from the history ring.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    /// The check's number.
    pub check: u64,
    /// When it ran.
    pub at: DateTime<Utc>,
    /// `ok` or `error`.
    pub status: String,
    /// Whether it was told.
    pub notified: bool,
    /// The result, or the error (capped).
    pub result: String,
}

/// The watchers of one person, over the store; the tools and the gateway use it.
pub struct Watchers {
    service: RoutineService,
    link: Arc<RunnerLink>,
}

/// Who changes a watcher's routine: the stricter actor, whoever asks (a
/// watcher's id never names one of cairn's built-in routines).
const ACTOR: Actor = Actor::Agent;

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchers")
            .field("user_id", &self.service.user_id())
            .finish_non_exhaustive()
    }
}

fn state_u64(routine: &Routine, key: &str) -> u64 {
    routine
        .runtime
        .state
        .get(key)
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn view(routine: &Routine) -> Option<WatcherView> {
    let id = watcher_id(routine)?.to_string();
    let RoutineAction::Watch {
        tool,
        params,
        notify_when,
        notify_config,
        label,
    } = &routine.spec.action
    else {
        return None;
    };
    Some(WatcherView {
        watcher_id: id,
        tool_name: tool.clone(),
        params: params.clone(),
        label: label.clone(),
        status: if routine.spec.enabled {
            "running"
        } else {
            "paused"
        }
        .to_string(),
        interval: interval_of(routine).unwrap_or(0),
        notify_when: notify_when.to_string(),
        notify_config: notify_config.clone(),
        output_channel: routine.spec.notify.channel.clone(),
        check_count: state_u64(routine, "checks"),
        notification_count: state_u64(routine, "notifications"),
        created_at: routine.created_at,
        last_check_at: routine.runtime.last_run_at,
        next_check_at: routine
            .runtime
            .next_fire_at
            .filter(|_| routine.spec.enabled),
        routine: routine.spec.name.clone(),
    })
}

impl Watchers {
    /// The watchers of the service's person, written through `service`;
    /// the policy is reached through `link`.
    pub fn new(service: RoutineService, link: Arc<RunnerLink>) -> Arc<Self> {
        Arc::new(Self { service, link })
    }

    /// The seven tools.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        tools::tools(self)
    }

    /// Starts a watcher; escalations go to `request.output_channel`, else to
    /// the conversation of `session_id`, else to the person's default channel.
    pub async fn start(
        &self,
        request: WatchRequest,
        session_id: Option<&str>,
    ) -> Result<WatcherView, WatchError> {
        if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&request.interval) {
            return Err(interval_error());
        }
        let runner = self.link.get().map_err(|_| {
            WatchError::Unavailable("no tool runner here, so no watcher can start".into())
        })?;
        let hex = uuid::Uuid::new_v4().simple().to_string();
        let id = hex[..12].to_string();
        let name = routine_name(&id);
        let canonical = match runner.check(&request.tool, &request.params, &check_session(&name)) {
            Check::Allowed(canonical) => canonical,
            Check::NeedsApproval(canonical) => {
                return Err(WatchError::Refused(format!(
                    "`{canonical}` needs the person's approval, so it cannot be watched: a \
                     watcher runs unattended"
                )));
            }
            Check::Denied(canonical, reason) => {
                return Err(WatchError::Refused(format!(
                    "`{canonical}` is denied by policy, so it cannot be watched: {reason}"
                )));
            }
            Check::Unknown(text) => return Err(WatchError::Invalid(text)),
        };
        if is_primitive(&canonical) || canonical.starts_with("watch_") {
            return Err(WatchError::Invalid(format!(
                "`{canonical}` cannot be watched"
            )));
        }
        let channel = request
            .output_channel
            .clone()
            .or_else(|| session_id.map(conversation_channel));
        let spec = RoutineSpec {
            name,
            description: if request.label.is_empty() {
                format!("watcher on {canonical}")
            } else {
                format!("watcher: {}", request.label)
            },
            enabled: true,
            agent: None,
            trigger: Trigger::Cron {
                schedule: interval_schedule(request.interval),
            },
            action: RoutineAction::Watch {
                tool: canonical,
                params: request.params,
                notify_when: request.notify_when,
                notify_config: request.notify_config,
                label: request.label,
            },
            guardrails: RoutineGuardrails {
                cooldown: Duration::ZERO,
                max_concurrent: 1,
                catch_up: CatchUp::Skip,
                retention: HISTORY,
                ..RoutineGuardrails::default()
            },
            notify: NotifyConfig {
                channel,
                ..NotifyConfig::default()
            },
            timezone: None,
        };
        let routine = self
            .service
            .create_with_state(spec, json!({"checks": 0, "notifications": 0}), &ACTOR)
            .await?;
        view(&routine).ok_or_else(|| WatchError::Invalid("not a watcher".into()))
    }

    async fn find(&self, id: &str) -> Result<Routine, WatchError> {
        let id = id.trim();
        let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric());
        let found = if valid {
            self.service
                .store()
                .find_routine(self.service.user_id(), &routine_name(id))
                .await?
        } else {
            None
        };
        found
            .filter(|r| watcher_id(r).is_some())
            .ok_or_else(|| WatchError::NotFound(id.to_string()))
    }

    /// One watcher.
    pub async fn get(&self, id: &str) -> Result<WatcherView, WatchError> {
        let routine = self.find(id).await?;
        view(&routine).ok_or_else(|| WatchError::NotFound(id.to_string()))
    }

    /// Every watcher, running ones first, then oldest first.
    pub async fn list(&self) -> Result<Vec<WatcherView>, WatchError> {
        let mut all: Vec<WatcherView> = self
            .service
            .store()
            .list_routines(Some(self.service.user_id()))
            .await?
            .iter()
            .filter_map(view)
            .collect();
        all.sort_by(|a, b| {
            (a.status != "running", a.created_at, &a.watcher_id).cmp(&(
                b.status != "running",
                b.created_at,
                &b.watcher_id,
            ))
        });
        Ok(all)
    }

    /// Stops a watcher for good: the routine and its history are deleted.
    pub async fn stop(&self, id: &str) -> Result<WatcherView, WatchError> {
        let routine = self.find(id).await?;
        let mut shown = view(&routine).ok_or_else(|| WatchError::NotFound(id.to_string()))?;
        self.service.delete(&routine, &ACTOR).await?;
        shown.status = "stopped".into();
        shown.next_check_at = None;
        Ok(shown)
    }

    /// Pauses a watcher: its checks are skipped, its counts and history kept,
    /// also across restarts.
    pub async fn pause(&self, id: &str) -> Result<WatcherView, WatchError> {
        let routine = self.find(id).await?;
        self.service
            .set_enabled(&routine.spec.name, false, &ACTOR)
            .await?;
        self.get(id).await
    }

    /// Resumes a paused watcher: the next check is one interval from now.
    pub async fn resume(&self, id: &str) -> Result<WatcherView, WatchError> {
        let routine = self.find(id).await?;
        self.service
            .set_enabled(&routine.spec.name, true, &ACTOR)
            .await?;
        self.get(id).await
    }

    /// The last `last_n` checks (1-100), oldest first.
    pub async fn history(&self, id: &str, last_n: u32) -> Result<Vec<HistoryEntry>, WatchError> {
        if !(1..=HISTORY).contains(&last_n) {
            return Err(WatchError::Invalid(format!(
                "`last_n` must be from 1 to {HISTORY}"
            )));
        }
        let routine = self.find(id).await?;
        let runs = self.service.store().list_runs(routine.id, HISTORY).await?;
        let mut entries: Vec<HistoryEntry> = runs
            .iter()
            .filter(|r| matches!(r.status, RunStatus::Ok | RunStatus::Attention))
            .filter_map(|r| {
                let (check, ok, notified, result) = parse_summary(r.result_summary.as_deref()?)?;
                Some(HistoryEntry {
                    check,
                    at: r.started_at,
                    status: if ok { "ok" } else { "error" }.to_string(),
                    notified,
                    result,
                })
            })
            .take(last_n as usize)
            .collect();
        entries.reverse();
        Ok(entries)
    }
}
