//! The scheduling primitives: `schedule_once`, `schedule_cron`,
//! `schedule_cancel`, `schedule_list`, `schedule_status` and `remember`.
//!
//! Each scheduled job is a routine (named `schedule-<job id>` or
//! `remind-<job id>`), so it has the engine's slots, exactly-once firing
//! across instances, run history and crash safety, and `cairn routine list`
//! shows it. A one-shot time is resolved when the job is created and stored
//! as an instant, so a restart never moves it.
//!
//! **Output.** By default the result goes back into the conversation that
//! asked (channel `conversation:<session id>`): it waits unread in the inbox
//! until that conversation takes it, before its next model call or as a turn
//! of its own when the person is there. `output_channel` names a configured
//! channel instead; an unknown name is refused when the job is created (the
//! error lists the channels), and a channel that keeps failing at delivery
//! ends in the inbox, as every notification does.
//!
//! **Actions.** `notification` (the default) delivers its text as is;
//! `tool_call` runs one tool unattended (the tool is checked against the
//! policy now: a denied or unknown tool is refused, and one the policy asks
//! about makes this call ask, so the person approves what will run later);
//! `llm_prompt` into the conversation is delivered there as a prompt the
//! agent acts on with the whole conversation and its tools, and to another
//! channel it is one model call whose reply is sent.
//!
//! **Recurring work needs a person.** `schedule_cron`, and `remember` with a
//! repeating `when`, set up work that runs on the person's behalf again and
//! again: a write they approve, refused where nobody can (`/v1`, `/webhook`,
//! routine runs, jobs: `CallPlan::needs_person`), as routine changes are. A
//! one-shot job is not (a `tool_call` one still asks as a dangerous call).
//!
//! **Cancelling** changes what the person set up: `schedule_cancel` is a
//! write they approve, refused where nobody can (`CallPlan::needs_person`).

use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, Check};
use cairn_agent::tools::args::{nonblank, object_or_empty};
use cairn_agent::tools::{
    CallOutcome, CallPlan, Family, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
    members, schema,
};
use cairn_core::notification::conversation_channel;
use cairn_core::routine::{NotifyConfig, Routine, RoutineAction, RoutineSpec, Trigger};
use cairn_core::schedule::{Schedule, ScheduleKind};
use serde_json::{Value, json};

use super::{RunnerLink, rfc3339, store_error};
use crate::notify::Notifier;
use crate::routines::ops_tools::tool_error;
use crate::routines::service::{Actor, RoutineService};

mod manage;

use manage::{is_job, job_id};

/// The one line naming these tools when schemas load on demand.
const SCHEDULE_FAMILY: &str =
    "do something later or on a schedule, or remind the person; the result comes back here";

/// Name prefix of jobs made by `schedule_once` and `schedule_cron`.
pub const SCHEDULE_PREFIX: &str = "schedule-";
/// Name prefix of jobs made by `remember`.
pub const REMIND_PREFIX: &str = "remind-";
/// Longest label kept (longer `what`s are cut for the label, kept whole in the text).
const LABEL_CHARS: usize = 80;
/// Runs `schedule_status` shows.
const STATUS_RUNS: u32 = 5;

/// What every scheduling tool shares.
#[derive(Clone)]
struct Shared {
    service: RoutineService,
    link: Arc<RunnerLink>,
    notifier: Notifier,
}

/// Which scheduling tool a call is for.
#[derive(Debug, Clone, Copy)]
enum Op {
    Once,
    Cron,
    Remember,
    Cancel,
    List,
    Status,
}

/// The six scheduling tools, writing through `service`, for the binary to register.
/// `notifier` knows the configured output channels (to check `output_channel`,
/// as they are after a reload).
pub fn schedule_tools(
    service: RoutineService,
    link: Arc<RunnerLink>,
    notifier: Notifier,
) -> Vec<Arc<dyn Tool>> {
    use RiskLevel::{ReadOnly, Write};
    let shared = Shared {
        service,
        link,
        notifier,
    };
    let job_id = || schema::object(json!({"job_id": {"type": "string"}}), &["job_id"]);
    members(&Arc::new(shared), SCHEDULE_FAMILY, [
        (
            Op::Once,
            ToolSpec::new("schedule_once", ReadOnly, "Do something once later (`when`: \"in 10m\", \"tomorrow at 9am\", \"demain à 9h\", ISO time); result back here by default.")
                .params(job_schema("when", "a one-shot time", json!({})))
                .not_reusable(),
        ),
        (
            Op::Cron,
            // Recurring work on the person's behalf: a write they approve, and
            // only where they can.
            ToolSpec::new("schedule_cron", Write, "Do something on a recurring schedule (5-field cron or \"every weekday at 9am\"); max_runs 0 = unlimited.")
                .params(job_schema(
                    "cron",
                    "cron expression or recurring phrase",
                    json!({"max_runs": {"type": "integer", "minimum": 0}}),
                ))
                .needs_person()
                .not_reusable(),
        ),
        (
            Op::Remember,
            ToolSpec::new("remember", ReadOnly, "Remind the person (or yourself, action=llm_prompt) of `what` at `when` (\"in 2h\", \"tomorrow at 9am\", \"every monday at 10\").")
                .params(schema::object(
                    json!({
                        "what": {"type": "string"},
                        "when": {"type": "string"},
                        "action": {"enum": ["notification", "llm_prompt"]}
                    }),
                    &["what", "when"],
                ))
                .not_reusable(),
        ),
        (
            Op::Cancel,
            // Cancelling changes what was set up to run: the person's to approve.
            ToolSpec::new("schedule_cancel", Write, "Cancel a scheduled job or reminder (removes it and its history).")
                .params(job_id())
                .needs_person()
                .not_reusable(),
        ),
        (
            Op::List,
            ToolSpec::new("schedule_list", ReadOnly, "List scheduled jobs and reminders, optionally by status.")
                .params(schema::object(json!({"status": {"enum": ["active", "paused", "completed", "failed"]}}), &[])),
        ),
        (
            Op::Status,
            ToolSpec::new("schedule_status", ReadOnly, "Details and recent runs of one scheduled job.")
                .params(job_id()),
        ),
    ])
}

/// What a job does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ActionType {
    Notification,
    ToolCall,
    LlmPrompt,
}

impl ActionType {
    fn parse(args: &Value, key: &str, allowed: &[ActionType]) -> Result<ActionType, ToolError> {
        let found = match args.get(key).and_then(Value::as_str) {
            None => ActionType::Notification,
            Some("notification") => ActionType::Notification,
            Some("tool_call") => ActionType::ToolCall,
            Some("llm_prompt") => ActionType::LlmPrompt,
            Some(other) => {
                return Err(ToolError::InvalidArguments(format!(
                    "`{key}` \"{other}\" is not one of {}",
                    names(allowed)
                )));
            }
        };
        if allowed.contains(&found) {
            Ok(found)
        } else {
            Err(ToolError::InvalidArguments(format!(
                "`{key}` \"{}\" is not one of {}",
                found.as_str(),
                names(allowed)
            )))
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ActionType::Notification => "notification",
            ActionType::ToolCall => "tool_call",
            ActionType::LlmPrompt => "llm_prompt",
        }
    }
}

fn names(types: &[ActionType]) -> String {
    types
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

const ALL_ACTIONS: &[ActionType] = &[
    ActionType::Notification,
    ActionType::ToolCall,
    ActionType::LlmPrompt,
];

/// What a job does: its type and its text or its tool call.
struct What {
    action_type: ActionType,
    text: Option<String>,
    tool: Option<(String, Value)>,
}

impl What {
    /// The text a label is made from when none is given.
    fn gist(&self) -> String {
        self.text
            .clone()
            .or_else(|| self.tool.as_ref().map(|(t, _)| t.clone()))
            .unwrap_or_default()
    }
}

/// A job about to be created, from a tool call's arguments.
struct Draft {
    prefix: &'static str,
    label: String,
    what: What,
    output_channel: Option<String>,
    trigger: Trigger,
    max_runs: Option<u64>,
}

fn optional_string(args: &Value, key: &str) -> Result<Option<String>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a string"
        ))),
    }
}

fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() > LABEL_CHARS {
        let cut: String = line.chars().take(LABEL_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

impl Shared {
    fn parse_when(&self, when: &str) -> Result<Schedule, ToolError> {
        Schedule::parse(when, self.service.user_zone(), self.service.now())
            .map_err(|e| ToolError::InvalidArguments(format!("`when`: {e}")))
    }

    /// A one-shot trigger at the instant `schedule` names, stored as that
    /// instant so a restart never moves it; an error when it is past.
    fn once_trigger(&self, when: &str, schedule: &Schedule) -> Result<Trigger, ToolError> {
        let at = schedule
            .next_after(self.service.now() - chrono::Duration::seconds(1))
            .ok_or_else(|| {
                ToolError::InvalidArguments(format!("`when` \"{when}\" is already past"))
            })?;
        Ok(Trigger::Once { at: rfc3339(at) })
    }

    /// The action part of a draft from `action_type`, `tool_name`, `tool_params`, `prompt`.
    fn action_of(
        &self,
        args: &Value,
        ctx: &ToolContext,
        prompt_key: &str,
    ) -> Result<What, ToolError> {
        let action_type = ActionType::parse(args, "action_type", ALL_ACTIONS)?;
        match action_type {
            ActionType::ToolCall => {
                let tool = nonblank(args, "tool_name")?.trim().to_string();
                let params = object_or_empty(args, "tool_params")?;
                let canonical = self.check_tool(&tool, &params, ctx)?;
                Ok(What {
                    action_type,
                    text: None,
                    tool: Some((canonical, params)),
                })
            }
            _ => Ok(What {
                action_type,
                text: Some(nonblank(args, prompt_key)?.trim().to_string()),
                tool: None,
            }),
        }
    }

    /// The tool's canonical name when the policy lets it run (now, or once
    /// approved by the person through this call's own approval).
    fn check_tool(
        &self,
        tool: &str,
        params: &Value,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        if super::is_primitive(tool) || is_scheduling(tool) {
            return Err(ToolError::InvalidArguments(format!(
                "`{tool}` cannot be scheduled: it only works inside a conversation's turn"
            )));
        }
        let runner = self.link.get()?;
        match runner.check(tool, params, &ctx.session_id) {
            Check::Allowed(name) | Check::NeedsApproval(name) => Ok(name),
            Check::Denied(name, reason) => Err(ToolError::InvalidArguments(format!(
                "`{name}` cannot be scheduled: denied by policy: {reason}"
            ))),
            Check::Unknown(text) => Err(ToolError::InvalidArguments(text)),
        }
    }

    fn output_of(&self, args: &Value) -> Result<Option<String>, ToolError> {
        let Some(name) = optional_string(args, "output_channel")? else {
            return Ok(None);
        };
        // The seed's name for "back into the conversation".
        if name == "llm_notification" || name == "conversation" {
            return Ok(None);
        }
        let channels = self.notifier.channels();
        if channels.contains(&name) {
            Ok(Some(name))
        } else {
            Err(ToolError::InvalidArguments(format!(
                "no output channel named \"{name}\"; configured: {} (leave output_channel out to answer in this conversation)",
                channels.names().join(", ")
            )))
        }
    }

    /// Creates the routine for `draft`, started from the conversation of `ctx`.
    async fn create(&self, draft: Draft, ctx: &ToolContext) -> Result<Value, ToolError> {
        let job_id = job_id();
        let to_conversation = draft.output_channel.is_none();
        let channel = draft
            .output_channel
            .clone()
            .unwrap_or_else(|| conversation_channel(&ctx.session_id));
        let title = |tag: &str| format!("[{tag}] {}", draft.label);
        let (action, on_success) =
            match (draft.what.action_type, &draft.what.tool, &draft.what.text) {
                (ActionType::ToolCall, Some((tool, params)), _) => (
                    RoutineAction::ToolCall {
                        tool: tool.clone(),
                        params: params.clone(),
                        allowed_tools: vec![tool.clone()],
                    },
                    true,
                ),
                (ActionType::LlmPrompt, _, Some(prompt)) if !to_conversation => (
                    RoutineAction::Lightweight {
                        prompt: prompt.clone(),
                        context_paths: Vec::new(),
                        max_tokens: None,
                    },
                    false,
                ),
                (ActionType::LlmPrompt, _, Some(prompt)) => (
                    RoutineAction::Notification {
                        message: prompt.clone(),
                        title: Some(title("SCHEDULED PROMPT")),
                    },
                    false,
                ),
                (_, _, Some(text)) => (
                    RoutineAction::Notification {
                        message: text.clone(),
                        title: Some(if draft.prefix == REMIND_PREFIX {
                            title("REMINDER")
                        } else {
                            title("SCHEDULED")
                        }),
                    },
                    false,
                ),
                _ => {
                    return Err(ToolError::Failed(
                        "the job has neither a text nor a tool to run".into(),
                    ));
                }
            };
        let mut spec = RoutineSpec {
            name: format!("{}{job_id}", draft.prefix),
            description: draft.label.clone(),
            enabled: true,
            agent: None,
            trigger: draft.trigger.clone(),
            action,
            guardrails: Default::default(),
            notify: NotifyConfig {
                channel: Some(channel.clone()),
                user: None,
                on_attention: true,
                on_failure: true,
                on_success,
            },
            timezone: None,
        };
        // A job fires when it is due, however close to the previous fire.
        spec.guardrails.cooldown = std::time::Duration::ZERO;
        spec.guardrails.max_runs = draft.max_runs;
        let routine = self
            .service
            .create(spec, &Actor::Agent)
            .await
            .map_err(tool_error)?;
        let next = routine.runtime.next_fire_at;
        let mut view = json!({
            "job_id": job_id,
            "schedule_type": draft.trigger.kind(),
            "action_type": draft.what.action_type.as_str(),
            "label": draft.label,
            "output_channel": if to_conversation { "conversation".to_string() } else { channel },
            "status": "active",
            "routine": routine.spec.name,
        });
        if let Trigger::Cron { schedule } = &draft.trigger {
            view["schedule"] = json!(schedule);
            view["next_run_at"] = json!(next.map(rfc3339));
        } else {
            view["run_at"] = json!(next.map(rfc3339));
        }
        if let Some((tool, _)) = &draft.what.tool {
            view["tool_name"] = json!(tool);
        }
        if let Some(max) = draft.max_runs {
            view["max_runs"] = json!(max);
        }
        Ok(view)
    }

    /// The job named by `args.job_id` (a routine of either prefix).
    async fn find(&self, args: &Value) -> Result<Routine, ToolError> {
        let id = nonblank(args, "job_id")?.trim();
        let id = id
            .strip_prefix(SCHEDULE_PREFIX)
            .or_else(|| id.strip_prefix(REMIND_PREFIX))
            .unwrap_or(id);
        for prefix in [SCHEDULE_PREFIX, REMIND_PREFIX] {
            if let Some(r) = self
                .service
                .store()
                .find_routine(self.service.user_id(), &format!("{prefix}{id}"))
                .await
                .map_err(store_error)?
            {
                return Ok(r);
            }
        }
        Err(ToolError::InvalidArguments(format!(
            "no scheduled job \"{id}\"; schedule_list shows them"
        )))
    }

    async fn jobs(&self) -> Result<Vec<Routine>, ToolError> {
        let all = self
            .service
            .store()
            .list_routines(Some(self.service.user_id()))
            .await
            .map_err(store_error)?;
        Ok(all.into_iter().filter(is_job).collect())
    }
}

fn is_scheduling(name: &str) -> bool {
    name.starts_with("schedule_") || name == "remember"
}

/// Whether a draft acts with a tool: the call is then a dangerous one, so
/// the person approves once what will run unattended later.
fn tool_risk(args: &Value) -> RiskLevel {
    if args.get("action_type").and_then(Value::as_str) == Some("tool_call") {
        RiskLevel::Dangerous
    } else {
        RiskLevel::ReadOnly
    }
}

fn max_runs_of(args: &Value) -> Result<Option<u64>, ToolError> {
    match args.get("max_runs") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(0) => Ok(None),
            Some(n) => Ok(Some(n)),
            None => Err(ToolError::InvalidArguments(
                "`max_runs` must be a whole number (0 = unlimited)".into(),
            )),
        },
    }
}

fn job_schema(when_key: &str, when_what: &str, extra: Value) -> Value {
    let properties = json!({
        when_key: {"type": "string", "description": when_what},
        "action_type": {"enum": ["notification", "tool_call", "llm_prompt"]},
        "prompt": {"type": "string", "description": "text of a notification or llm_prompt"},
        "tool_name": {"type": "string"},
        "tool_params": {"type": "object"},
        "label": {"type": "string"},
        "output_channel": {"type": "string", "description": "a configured channel; default: this conversation"}
    });
    schema::object(schema::with(properties, extra), &[when_key])
}

fn label_of(args: &Value, fallback: &str) -> Result<String, ToolError> {
    Ok(optional_string(args, "label")?.unwrap_or_else(|| short(fallback)))
}

#[async_trait]
impl Family for Shared {
    type Op = Op;

    fn plan(&self, op: Op, spec: &ToolSpec, args: &Value) -> CallPlan {
        let plan = spec.plan();
        match op {
            Op::Once => CallPlan {
                risk: tool_risk(args),
                ..plan
            },
            Op::Cron => CallPlan {
                risk: tool_risk(args).max(RiskLevel::Write),
                ..plan
            },
            // A one-shot reminder is read-only; a recurring one is recurring
            // work on the person's behalf, like `schedule_cron`.
            Op::Remember if self.repeats(args) => CallPlan {
                risk: RiskLevel::Write,
                needs_person: true,
                ..plan
            },
            _ => plan,
        }
    }

    async fn call(&self, op: Op, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let view = match op {
            Op::Once => self.once(&args, ctx).await?,
            Op::Cron => self.cron(&args, ctx).await?,
            Op::Remember => self.remember(&args, ctx).await?,
            Op::Cancel => self.cancel(&args).await?,
            Op::List => self.list(&args).await?,
            Op::Status => self.status(&args).await?,
        };
        ToolOutput::json(&view)
    }
}

impl Shared {
    /// Whether `remember`'s `when` repeats.
    fn repeats(&self, args: &Value) -> bool {
        args.get("when")
            .and_then(Value::as_str)
            .and_then(|when| self.parse_when(when.trim()).ok())
            .is_some_and(|schedule| schedule.kind() != ScheduleKind::Once)
    }

    /// `schedule_once`.
    async fn once(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let when = nonblank(args, "when")?;
        let schedule = self.parse_when(when)?;
        if schedule.kind() != ScheduleKind::Once {
            return Err(ToolError::InvalidArguments(format!(
                "`when` \"{when}\" repeats ({}); use schedule_cron for recurring jobs",
                schedule.describe()
            )));
        }
        let trigger = self.once_trigger(when, &schedule)?;
        self.schedule(args, ctx, trigger, false).await
    }

    /// `schedule_cron`.
    async fn cron(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let cron = nonblank(args, "cron")?.trim();
        let schedule = self.parse_when(cron)?;
        if schedule.kind() == ScheduleKind::Once {
            return Err(ToolError::InvalidArguments(format!(
                "`cron` \"{cron}\" happens once ({}); use schedule_once or remember",
                rfc3339(
                    schedule
                        .next_after(self.service.now())
                        .unwrap_or_else(|| self.service.now())
                )
            )));
        }
        let trigger = Trigger::Cron {
            schedule: cron.to_string(),
        };
        self.schedule(args, ctx, trigger, true).await
    }

    /// A `schedule_*` job firing on `trigger`, doing what `args` say; only a
    /// recurring one takes `max_runs`.
    async fn schedule(
        &self,
        args: &Value,
        ctx: &ToolContext,
        trigger: Trigger,
        recurring: bool,
    ) -> Result<Value, ToolError> {
        let what = self.action_of(args, ctx, "prompt")?;
        let draft = Draft {
            prefix: SCHEDULE_PREFIX,
            label: label_of(args, &what.gist())?,
            what,
            output_channel: self.output_of(args)?,
            trigger,
            max_runs: if recurring { max_runs_of(args)? } else { None },
        };
        self.create(draft, ctx).await
    }

    /// `remember`.
    async fn remember(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let what = nonblank(args, "what")?.trim().to_string();
        let when = nonblank(args, "when")?.trim();
        let action_type = ActionType::parse(
            args,
            "action",
            &[ActionType::Notification, ActionType::LlmPrompt],
        )?;
        let schedule = self.parse_when(when)?;
        let trigger = if schedule.kind() == ScheduleKind::Once {
            self.once_trigger(when, &schedule)?
        } else {
            Trigger::Cron {
                schedule: when.to_string(),
            }
        };
        let draft = Draft {
            prefix: REMIND_PREFIX,
            label: short(&what),
            what: What {
                action_type,
                text: Some(what),
                tool: None,
            },
            output_channel: None,
            trigger,
            max_runs: None,
        };
        self.create(draft, ctx).await
    }
}

#[cfg(test)]
mod tests;
