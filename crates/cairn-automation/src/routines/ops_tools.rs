//! The agent's schedule operations: `routine_pause`, `routine_resume`,
//! `routine_backfill` and `routine_next`, each a call on the
//! [`RoutineService`] as [`Actor::Agent`]. Pausing, resuming and
//! backfilling change what runs on the person's behalf, so they are `Write`
//! calls for the policy gate whatever the routine does, refused where nobody
//! can approve ([`cairn_agent::tools::CallPlan::needs_person`]) whatever the autonomy, and the
//! service refuses them on cairn's own routines (heartbeat, memory hygiene,
//! self-repair; [`super::system::builtin_refusal`]).

use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::args::{self, nonblank};
use cairn_agent::tools::{
    CallOutcome, Family, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, members,
};
use cairn_core::routine::Overlap;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::service::{Actor, BackfillRequest, MAX_NEXT, RoutineService, ServiceError};
use super::tools::{ROUTINE_FAMILY, name_schema};
use crate::tool_io::{rfc3339, store_error};

/// Next fires `routine_next` lists when the call does not say.
const DEFAULT_NEXT: u64 = 5;

/// A refusal of the routine service as the agent's tools report it.
pub(crate) fn tool_error(e: ServiceError) -> ToolError {
    match e {
        ServiceError::NotFound { .. } => {
            ToolError::InvalidArguments(format!("{e}; routine_list shows them"))
        }
        ServiceError::Invalid(_)
        | ServiceError::TooMany { .. }
        | ServiceError::Problems { .. }
        | ServiceError::Taken(_) => ToolError::InvalidArguments(e.to_string()),
        ServiceError::Conflict(_) => ToolError::Failed(e.to_string()),
        ServiceError::Forbidden(why) => ToolError::NotPermitted(why),
        ServiceError::Store(e) => store_error(e),
    }
}

fn instant_arg(args: &Value, key: &str) -> Result<DateTime<Utc>, ToolError> {
    let text = args.get(key).and_then(Value::as_str).ok_or_else(|| {
        ToolError::InvalidArguments(format!("missing required RFC 3339 time `{key}`"))
    })?;
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            ToolError::InvalidArguments(format!("`{key}`: \"{text}\" is not an RFC 3339 time: {e}"))
        })
}

/// Which schedule operation a call is for.
#[derive(Debug, Clone, Copy)]
enum Op {
    Pause,
    Resume,
    Backfill,
    Next,
}

/// The family the schedule-operation tools make: the routine service.
struct Ops(RoutineService);

/// The schedule-operation tools over `service`, for the binary to register.
pub fn routine_ops_tools(service: RoutineService) -> Vec<Arc<dyn Tool>> {
    // Changes to what runs on the person's behalf, whatever the routine does.
    let change =
        |name, description| ToolSpec::new(name, RiskLevel::Write, description).needs_person();
    members(&Arc::new(Ops(service)), ROUTINE_FAMILY, [
        (
            Op::Pause,
            change("routine_pause", "Pause a routine by name, with an optional note saying why: it keeps its schedule and \
                 history and fires nothing until routine_resume (which catches up the missed slots by its catch_up policy).")
                .params(name_schema(json!({"note": {"type": "string", "description": "why it is paused"}}), &[])),
        ),
        (
            Op::Resume,
            change("routine_resume", "Resume a paused routine by name; says what becomes of the slots it missed while paused.")
                .params(name_schema(json!({}), &[])),
        ),
        (
            Op::Backfill,
            change("routine_backfill", "Run a cron routine's past slots from `from` to `to` (RFC 3339), in order, as trigger `backfill`; \
                 a slot that already has a run is not run again. More than routines.max_backfill slots need `confirm: true`.")
                .params(name_schema(
                    json!({
                        "from": {"type": "string", "description": "start, RFC 3339 (included)"},
                        "to": {"type": "string", "description": "end, RFC 3339 (included, not in the future)"},
                        "overlap": {"type": "string", "enum": ["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"], "description": "what the slots do while a run goes (default buffer_all: they wait, in order)"},
                        "confirm": {"type": "boolean", "description": "run more than routines.max_backfill slots"}
                    }),
                    &["from", "to"],
                )),
        ),
        (
            Op::Next,
            ToolSpec::new("routine_next", RiskLevel::ReadOnly, "A routine's next fires (jitter applied; each with its slot), and whether it is paused.")
                .params(name_schema(
                    json!({"count": {"type": "integer", "minimum": 1, "maximum": MAX_NEXT, "description": "how many (default 5)"}}),
                    &[],
                ))
                // Slots advance by themselves.
                .not_reusable(),
        ),
    ])
}

#[async_trait]
impl Family for Ops {
    type Op = Op;

    async fn call(&self, op: Op, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let service = &self.0;
        let name = nonblank(&args, "name");
        let view = match op {
            Op::Pause => {
                let note = args.get("note").and_then(Value::as_str);
                let done = service
                    .pause(name?, note, &Actor::Agent)
                    .await
                    .map_err(tool_error)?;
                let pause = done.routine.runtime.paused.as_ref();
                json!({
                    "paused": done.routine.spec.name,
                    "already_paused": done.already,
                    "by": pause.map(|p| p.by.clone()),
                    "at": pause.map(|p| rfc3339(p.at)),
                    "note": pause.and_then(|p| p.note.clone()),
                })
            }
            Op::Resume => {
                let done = service
                    .resume(name?, &Actor::Agent)
                    .await
                    .map_err(tool_error)?;
                json!({
                    "resumed": done.routine.spec.name,
                    "was_paused": done.lifted.is_some(),
                    "catch_up": done.catch_up,
                })
            }
            Op::Backfill => self.backfill(&args).await?,
            Op::Next => {
                let max = u64::try_from(MAX_NEXT).unwrap_or(u64::MAX);
                let count = args::count(&args, "count", DEFAULT_NEXT, max)?;
                let routine = service.find(name?).await.map_err(tool_error)?;
                let fires = service.next_of(&routine, usize::try_from(count).unwrap_or(MAX_NEXT));
                json!({
                    "routine": routine.spec.name,
                    "paused": routine.runtime.paused.as_ref().map(|p| json!({"by": p.by, "at": rfc3339(p.at), "note": p.note})),
                    "next": fires.iter().map(|f| json!({"fires_at": rfc3339(f.fires_at), "slot": rfc3339(f.slot)})).collect::<Vec<_>>(),
                })
            }
        };
        ToolOutput::json(&view)
    }
}

impl Ops {
    /// `routine_backfill`.
    async fn backfill(&self, args: &Value) -> Result<Value, ToolError> {
        let overlap = match args.get("overlap").and_then(Value::as_str) {
            Some(text) => Some(
                text.parse::<Overlap>()
                    .map_err(|e| ToolError::InvalidArguments(format!("`overlap`: {e}")))?,
            ),
            None => None,
        };
        let request = BackfillRequest {
            from: instant_arg(args, "from")?,
            to: instant_arg(args, "to")?,
            overlap,
            confirmed: args
                .get("confirm")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        let done = self
            .0
            .backfill(nonblank(args, "name")?, &request, &Actor::Agent)
            .await
            .map_err(tool_error)?;
        Ok(json!({
            "routine": done.routine.spec.name,
            "overlap": done.overlap.as_str(),
            "queued": done.queued.iter().filter_map(|r| r.scheduled_for).map(rfc3339).collect::<Vec<_>>(),
            "already_run": done.already.iter().map(|(slot, status)| json!({"slot": rfc3339(*slot), "status": status.map(|s| s.as_str())})).collect::<Vec<_>>(),
            "skipped": done.skipped.iter().map(|(slot, why)| json!({"slot": rfc3339(*slot), "reason": why})).collect::<Vec<_>>(),
        }))
    }
}
