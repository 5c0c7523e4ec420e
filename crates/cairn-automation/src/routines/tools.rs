//! The agent's routine tools: `routine_create`, `routine_list`,
//! `routine_update`, `routine_delete`, `routine_fire`, `routine_runs`.
//!
//! Every write goes through the [routine service](super::service), which
//! judges specs exactly as `cairn routine apply` and the API do. Creating, changing or deleting a routine changes what
//! runs on the person's behalf later, so it is theirs to approve: a `Write`
//! call at least (the policy gate asks under supervised autonomy), a
//! `Dangerous` one when the action is `full_job` or `tool_call` (the person
//! approves once what the routine may later do unattended), and refused where
//! nobody can approve ([`cairn_agent::tools::CallPlan::needs_person`]: `/v1`, `/webhook`, routine
//! runs, jobs), whatever the autonomy. Built-in routines (action `system`)
//! are never changed here: their settings in config.toml rule them
//! ([`super::system::builtin_refusal`]). A literal webhook secret is never
//! shown, and `"***"` in its place keeps the stored one.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::args::{self, nonblank};
use cairn_agent::tools::{
    CallOutcome, CallPlan, Family, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
    members, schema,
};
use cairn_core::routine::{Routine, RoutineSpec, Trigger};
use serde_json::{Value, json};
use uuid::Uuid;

use super::define::zone_of;
use super::ops_tools::tool_error;
use super::service::{Actor, RoutineService, ServiceError};
use crate::tool_io::{rfc3339, store_error};

/// The one line naming these tools when schemas load on demand.
pub(super) const ROUTINE_FAMILY: &str =
    "routines: tasks fired by a schedule, an event, a webhook or by hand";

/// Most runs `routine_runs` returns.
const MAX_RUNS: u64 = 100;
/// Runs `routine_runs` returns when the call does not say.
const DEFAULT_RUNS: u64 = 10;

/// Starts a manual run of a routine; the engine implements it.
#[async_trait]
pub trait RoutineFirer: Send + Sync {
    /// Fires `routine` now with an optional payload; the id of the run it started.
    async fn fire(&self, routine: &Routine, payload: Option<Value>) -> Result<Uuid, String>;
}

/// What every routine tool shares: the routine service decides and writes.
#[derive(Clone)]
struct Shared {
    service: RoutineService,
    firer: Arc<dyn RoutineFirer>,
}

impl Shared {
    /// The user's routine named `name`, or an error suggesting the closest name.
    async fn find(&self, name: &str) -> Result<Routine, ToolError> {
        self.service.find(name).await.map_err(tool_error)
    }

    /// The spec in `args.routine`, as written.
    fn spec_in(args: &Value) -> Result<RoutineSpec, ToolError> {
        let Some(value) = args.get("routine").filter(|v| v.is_object()) else {
            return Err(ToolError::InvalidArguments(
                "`routine` must be an object: the routine spec (name, trigger, action, ...)".into(),
            ));
        };
        serde_json::from_value(value.clone())
            .map_err(|e| ToolError::InvalidArguments(format!("routine: {e}")))
    }
}

/// `Dangerous` when the spec's action runs tools unattended, `Write` for
/// any other: every routine acts on the person's behalf later.
fn spec_risk(args: &Value) -> RiskLevel {
    match args.pointer("/routine/action/type").and_then(Value::as_str) {
        Some("full_job" | "tool_call") => RiskLevel::Dangerous,
        _ => RiskLevel::Write,
    }
}

fn spec_schema(what: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "routine": {
                "type": "object",
                "description": what,
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "enabled": {"type": "boolean"},
                    "agent": {"type": "string", "description": "the agent that runs it (an id of [[agents]]; default main)"},
                    "trigger": {"type": "object", "description": "{type: cron, schedule} | {type: once, at} | {type: event, pattern, channel?} | {type: system_event, ...} | {type: webhook, ...} | {type: manual}"},
                    "action": {"type": "object", "description": "{type: lightweight, prompt} | {type: notification, message, title?} | {type: full_job, title, description} | {type: tool_call, tool, params}"},
                    "guardrails": {"type": "object"},
                    "notify": {"type": "object"},
                    "timezone": {"type": "string"}
                },
                "required": ["name", "trigger", "action"]
            }
        },
        "required": ["routine"],
        "additionalProperties": false
    })
}

/// The arguments of a tool about one routine: its `name`, the `extra`
/// properties, and which of them are `required` besides the name.
pub(super) fn name_schema(extra: Value, required: &[&str]) -> Value {
    let name = json!({"name": {"type": "string", "description": "the routine's name"}});
    let mut need = vec!["name"];
    need.extend_from_slice(required);
    schema::closed(schema::with(name, extra), &need)
}

/// The trigger in a few words: `cron 0 9 * * *`, `event /deploy/`, `webhook`.
fn trigger_short(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Cron { schedule } => format!("cron {schedule}"),
        Trigger::Once { at } => format!("once {at}"),
        Trigger::Event { pattern, .. } => format!("event /{pattern}/"),
        other => other.kind().to_string(),
    }
}

/// Which routine tool a call is for.
#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    List,
    Update,
    Delete,
    Fire,
    Runs,
}

/// The six routine tools, writing through `service`, for the binary to register.
pub fn routine_tools(service: RoutineService, firer: Arc<dyn RoutineFirer>) -> Vec<Arc<dyn Tool>> {
    use RiskLevel::{ReadOnly, Write};
    let mut update = spec_schema(
        "the complete new spec; its `name` says which routine it replaces, unless `name` is given",
    );
    update["properties"]["name"] = json!({
        "type": "string",
        "description": "the routine's current name, when the spec renames it (default: the spec's name)"
    });
    members(&Arc::new(Shared { service, firer }), ROUTINE_FAMILY, [
        (
            Op::Create,
            ToolSpec::new("routine_create", Write, "Create a routine (a task that fires on a schedule, an event, a webhook or by hand) from its spec, \
                 the same JSON shape as a routine file. Every problem is reported with its field path.")
                .params(spec_schema("the new routine's spec; its name must not be taken"))
                .needs_person(),
        ),
        (
            Op::List,
            ToolSpec::new("routine_list", ReadOnly, "List the user's routines: name, enabled, trigger, action, agent, next fire (UTC and the routine's local time), last run status.")
                .params(schema::closed(json!({}), &[]))
                // Runs finish and slots advance by themselves.
                .not_reusable(),
        ),
        (
            Op::Update,
            ToolSpec::new("routine_update", Write, "Replace an existing routine's spec (found by its name) with a complete new spec, \
                 the same JSON shape as routine_create; its run history and state are kept. \
                 To rename it, give its current name in `name` and the new one in the spec. \
                 A webhook secret written \"***\" keeps the stored one. Built-in routines cannot be changed.")
                .params(update)
                .needs_person(),
        ),
        (
            Op::Delete,
            ToolSpec::new("routine_delete", Write, "Delete a routine by name, with its run history. Built-in routines cannot be deleted.")
                .params(name_schema(json!({}), &[]))
                .needs_person(),
        ),
        (
            Op::Fire,
            ToolSpec::new("routine_fire", Write, "Run a routine now (a manual fire, which skips its cooldown), optionally with a JSON payload \
                 handed to its action; returns the run id (routine_runs shows the outcome).")
                .params(name_schema(json!({
                    "payload": {"description": "any JSON value given to the action as the trigger's payload"}
                }), &[])),
        ),
        (
            Op::Runs,
            ToolSpec::new("routine_runs", ReadOnly, "The latest runs of a routine, newest first: status, trigger, slot, times, summary, tokens, job, skip reason.")
                .params(name_schema(json!({
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RUNS, "description": "how many runs (default 10)"}
                }), &[]))
                // Runs are added by the engine at any time.
                .not_reusable(),
        ),
    ])
}

#[async_trait]
impl Family for Shared {
    type Op = Op;

    fn plan(&self, op: Op, spec: &ToolSpec, args: &Value) -> CallPlan {
        match op {
            Op::Create | Op::Update => CallPlan {
                risk: spec_risk(args),
                ..spec.plan()
            },
            _ => spec.plan(),
        }
    }

    async fn call(&self, op: Op, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let view = match op {
            Op::Create => self.create(&args).await?,
            Op::List => self.list().await?,
            Op::Update => self.update(&args).await?,
            Op::Delete => {
                let routine = self.find(nonblank(&args, "name")?).await?;
                self.service
                    .delete(&routine, &Actor::Agent)
                    .await
                    .map_err(tool_error)?;
                json!({"deleted": routine.spec.name})
            }
            Op::Fire => self.fire(&args).await?,
            Op::Runs => {
                let limit = args::count(&args, "limit", DEFAULT_RUNS, MAX_RUNS)?;
                let routine = self.find(nonblank(&args, "name")?).await?;
                let limit = u32::try_from(limit).unwrap_or(u32::MAX);
                let runs = self
                    .service
                    .store()
                    .list_runs(routine.id, limit)
                    .await
                    .map_err(store_error)?;
                serde_json::to_value(&runs).map_err(|e| ToolError::Failed(e.to_string()))?
            }
        };
        ToolOutput::json(&view)
    }
}

impl Shared {
    /// `routine_create`.
    async fn create(&self, args: &Value) -> Result<Value, ToolError> {
        let routine = self
            .service
            .create(Shared::spec_in(args)?, &Actor::Agent)
            .await
            .map_err(|e| match e {
                ServiceError::Taken(_) => {
                    ToolError::InvalidArguments(format!("{e}; routine_update replaces it"))
                }
                e => tool_error(e),
            })?;
        Ok(json!({
            "created": routine.spec.name,
            "id": routine.id,
            "next_fire_at": routine.runtime.next_fire_at.map(rfc3339),
        }))
    }

    /// `routine_update`.
    async fn update(&self, args: &Value) -> Result<Value, ToolError> {
        let spec = Shared::spec_in(args)?;
        // `name` is the routine's current name when the spec renames it.
        let current = match args.get("name") {
            None | Some(Value::Null) => spec.name.clone(),
            Some(_) => nonblank(args, "name")?.to_string(),
        };
        let routine = self.find(&current).await?;
        let done = self
            .service
            .replace(routine, spec, &Actor::Agent)
            .await
            .map_err(tool_error)?;
        let mut out = json!({
            "updated": done.routine.spec.name,
            "changed": done.changed,
            "next_fire_at": done.routine.runtime.next_fire_at.map(rfc3339),
        });
        if let Some(from) = done.renamed_from {
            out["renamed_from"] = json!(from);
        }
        Ok(out)
    }

    /// `routine_list`.
    async fn list(&self) -> Result<Value, ToolError> {
        let store = self.service.store();
        let routines = store
            .list_routines(Some(self.service.user_id()))
            .await
            .map_err(store_error)?;
        let mut rows = Vec::with_capacity(routines.len());
        for r in &routines {
            let last = store.list_runs(r.id, 1).await.map_err(store_error)?;
            let zone = zone_of(&r.spec, self.service.user_zone());
            let next = r.runtime.next_fire_at.filter(|_| r.spec.enabled);
            rows.push(json!({
                "name": r.spec.name,
                "enabled": r.spec.enabled,
                "trigger": trigger_short(&r.spec.trigger),
                "action": r.spec.action.kind(),
                "agent": r.spec.agent_id(),
                "timezone": zone.name(),
                "next_fire_at": next.map(rfc3339),
                "next_fire_local": next.map(|t| t.with_timezone(&zone).format("%a %Y-%m-%d %H:%M %Z").to_string()),
                "last_status": last.first().map(|run| run.status.as_str()),
            }));
        }
        Ok(Value::Array(rows))
    }

    /// `routine_fire`.
    async fn fire(&self, args: &Value) -> Result<Value, ToolError> {
        let routine = self.find(nonblank(args, "name")?).await?;
        let payload = args.get("payload").filter(|v| !v.is_null()).cloned();
        let run_id = self.firer.fire(&routine, payload).await.map_err(|e| {
            ToolError::Failed(format!(
                "routine \"{}\" did not fire: {e}",
                routine.spec.name
            ))
        })?;
        Ok(json!({"fired": routine.spec.name, "run_id": run_id}))
    }
}
