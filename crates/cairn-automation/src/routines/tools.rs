//! The agent's routine tools: `routine_create`, `routine_list`,
//! `routine_update`, `routine_delete`, `routine_fire`, `routine_runs`.
//!
//! Every write goes through the [routine service](super::service), which
//! judges specs exactly as `cairn routine apply` and the API do. Creating, changing or deleting a routine changes what
//! runs on the person's behalf later, so it is theirs to approve: a `Write`
//! call at least (the policy gate asks under supervised autonomy), a
//! `Dangerous` one when the action is `full_job` or `tool_call` (the person
//! approves once what the routine may later do unattended), and refused where
//! nobody can approve ([`Tool::needs_person`]: `/v1`, `/webhook`, routine
//! runs, jobs), whatever the autonomy. Built-in routines (action `system`)
//! are never changed here: their settings in config.toml rule them
//! ([`super::system::builtin_refusal`]). A literal webhook secret is never
//! shown, and `"***"` in its place keeps the stored one.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use cairn_core::routine::{Routine, RoutineSpec, Trigger};
use serde_json::{Value, json};
use uuid::Uuid;

use super::define::zone_of;
use super::ops_tools::tool_error;
use super::service::{Actor, RoutineService, ServiceError};
use crate::tool_io::{json_output, rfc3339, store_error};

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

pub(super) fn name_arg(args: &Value) -> Result<&str, ToolError> {
    match args.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(ToolError::InvalidArguments(
            "missing required string `name`".into(),
        )),
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

fn name_schema(extra: Value) -> Value {
    let mut properties = json!({"name": {"type": "string", "description": "the routine's name"}});
    if let (Some(props), Value::Object(more)) = (properties.as_object_mut(), extra) {
        props.extend(more);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["name"],
        "additionalProperties": false
    })
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

/// `routine_create`.
struct CreateTool(Shared);

#[async_trait]
impl Tool for CreateTool {
    fn name(&self) -> &str {
        "routine_create"
    }
    fn family(&self) -> Option<&str> {
        Some(ROUTINE_FAMILY)
    }
    fn description(&self) -> &str {
        "Create a routine (a task that fires on a schedule, an event, a webhook or by hand) from its spec, \
         the same JSON shape as a routine file. Every problem is reported with its field path."
    }
    fn parameters(&self) -> Value {
        spec_schema("the new routine's spec; its name must not be taken")
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    fn call_risk(&self, args: &Value) -> RiskLevel {
        spec_risk(args)
    }
    fn needs_person(&self, _: &Value) -> bool {
        true
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let routine = self
            .0
            .service
            .create(Shared::spec_in(&args)?, &Actor::Agent)
            .await
            .map_err(|e| match e {
                ServiceError::Taken(_) => {
                    ToolError::InvalidArguments(format!("{e}; routine_update replaces it"))
                }
                e => tool_error(e),
            })?;
        json_output(&json!({
            "created": routine.spec.name,
            "id": routine.id,
            "next_fire_at": routine.runtime.next_fire_at.map(rfc3339),
        }))
    }
}

/// `routine_update`.
struct UpdateTool(Shared);

#[async_trait]
impl Tool for UpdateTool {
    fn name(&self) -> &str {
        "routine_update"
    }
    fn family(&self) -> Option<&str> {
        Some(ROUTINE_FAMILY)
    }
    fn description(&self) -> &str {
        "Replace an existing routine's spec (found by its name) with a complete new spec, \
         the same JSON shape as routine_create; its run history and state are kept. \
         To rename it, give its current name in `name` and the new one in the spec. \
         A webhook secret written \"***\" keeps the stored one. Built-in routines cannot be changed."
    }
    fn parameters(&self) -> Value {
        let mut schema = spec_schema(
            "the complete new spec; its `name` says which routine it replaces, unless `name` is given",
        );
        schema["properties"]["name"] = json!({
            "type": "string",
            "description": "the routine's current name, when the spec renames it (default: the spec's name)"
        });
        schema
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    fn call_risk(&self, args: &Value) -> RiskLevel {
        spec_risk(args)
    }
    fn needs_person(&self, _: &Value) -> bool {
        true
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let spec = Shared::spec_in(&args)?;
        // `name` is the routine's current name when the spec renames it.
        let current = match args.get("name") {
            None | Some(Value::Null) => spec.name.clone(),
            Some(_) => name_arg(&args)?.to_string(),
        };
        let routine = s.find(&current).await?;
        let done = s
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
        json_output(&out)
    }
}

/// `routine_delete`.
struct DeleteTool(Shared);

#[async_trait]
impl Tool for DeleteTool {
    fn name(&self) -> &str {
        "routine_delete"
    }
    fn family(&self) -> Option<&str> {
        Some(ROUTINE_FAMILY)
    }
    fn description(&self) -> &str {
        "Delete a routine by name, with its run history. Built-in routines cannot be deleted."
    }
    fn parameters(&self) -> Value {
        name_schema(json!({}))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    fn needs_person(&self, _: &Value) -> bool {
        true
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let routine = s.find(name_arg(&args)?).await?;
        s.service
            .delete(&routine, &Actor::Agent)
            .await
            .map_err(tool_error)?;
        json_output(&json!({"deleted": routine.spec.name}))
    }
}

/// `routine_list`.
struct ListTool(Shared);

#[async_trait]
impl Tool for ListTool {
    fn name(&self) -> &str {
        "routine_list"
    }
    fn family(&self) -> Option<&str> {
        Some(ROUTINE_FAMILY)
    }
    fn description(&self) -> &str {
        "List the user's routines: name, enabled, trigger, next fire (UTC and the routine's local time), last run status."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        // Runs finish and slots advance by themselves.
        false
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let store = s.service.store();
        let routines = store
            .list_routines(Some(s.service.user_id()))
            .await
            .map_err(store_error)?;
        let mut rows = Vec::with_capacity(routines.len());
        for r in &routines {
            let last = store.list_runs(r.id, 1).await.map_err(store_error)?;
            let zone = zone_of(&r.spec, s.service.user_zone());
            let next = r.runtime.next_fire_at.filter(|_| r.spec.enabled);
            rows.push(json!({
                "name": r.spec.name,
                "enabled": r.spec.enabled,
                "trigger": trigger_short(&r.spec.trigger),
                "action": r.spec.action.kind(),
                "timezone": zone.name(),
                "next_fire_at": next.map(rfc3339),
                "next_fire_local": next.map(|t| t.with_timezone(&zone).format("%a %Y-%m-%d %H:%M %Z").to_string()),
                "last_status": last.first().map(|run| run.status.as_str()),
            }));
        }
        json_output(&Value::Array(rows))
    }
}

/// `routine_runs`.
struct RunsTool(Shared);

#[async_trait]
impl Tool for RunsTool {
    fn name(&self) -> &str {
        "routine_runs"
    }
    fn family(&self) -> Option<&str> {
        Some(ROUTINE_FAMILY)
    }
    fn description(&self) -> &str {
        "The latest runs of a routine, newest first: status, trigger, slot, times, summary, tokens, job, skip reason."
    }
    fn parameters(&self) -> Value {
        name_schema(json!({
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RUNS, "description": "how many runs (default 10)"}
        }))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn reusable(&self) -> bool {
        // Runs are added by the engine at any time.
        false
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let limit = match args.get("limit") {
            None | Some(Value::Null) => DEFAULT_RUNS,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_RUNS).contains(n))
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "`limit` must be an integer from 1 to {MAX_RUNS}"
                    ))
                })?,
        };
        let routine = s.find(name_arg(&args)?).await?;
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let runs = s
            .service
            .store()
            .list_runs(routine.id, limit)
            .await
            .map_err(store_error)?;
        let runs = serde_json::to_value(&runs).map_err(|e| ToolError::Failed(e.to_string()))?;
        json_output(&runs)
    }
}

/// `routine_fire`.
struct FireTool(Shared);

#[async_trait]
impl Tool for FireTool {
    fn name(&self) -> &str {
        "routine_fire"
    }
    fn family(&self) -> Option<&str> {
        Some(ROUTINE_FAMILY)
    }
    fn description(&self) -> &str {
        "Run a routine now (a manual fire, which skips its cooldown), optionally with a JSON payload \
         handed to its action; returns the run id (routine_runs shows the outcome)."
    }
    fn parameters(&self) -> Value {
        name_schema(json!({
            "payload": {"description": "any JSON value given to the action as the trigger's payload"}
        }))
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let routine = s.find(name_arg(&args)?).await?;
        let payload = args.get("payload").filter(|v| !v.is_null()).cloned();
        let run_id = s.firer.fire(&routine, payload).await.map_err(|e| {
            ToolError::Failed(format!(
                "routine \"{}\" did not fire: {e}",
                routine.spec.name
            ))
        })?;
        json_output(&json!({"fired": routine.spec.name, "run_id": run_id}))
    }
}

/// The six routine tools, writing through `service`, for the binary to register.
pub fn routine_tools(service: RoutineService, firer: Arc<dyn RoutineFirer>) -> Vec<Arc<dyn Tool>> {
    let shared = Shared { service, firer };
    vec![
        Arc::new(CreateTool(shared.clone())),
        Arc::new(ListTool(shared.clone())),
        Arc::new(UpdateTool(shared.clone())),
        Arc::new(DeleteTool(shared.clone())),
        Arc::new(FireTool(shared.clone())),
        Arc::new(RunsTool(shared)),
    ]
}
