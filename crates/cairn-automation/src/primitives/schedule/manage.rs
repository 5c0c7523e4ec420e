//! Managing scheduled jobs: how a job's routine is shown (`job_view`,
//! `job_status`) and the tools that cancel, list and inspect jobs
//! (`schedule_cancel`, `schedule_list`, `schedule_status`).

use super::*;

pub(super) fn is_job(r: &Routine) -> bool {
    r.spec.name.starts_with(SCHEDULE_PREFIX) || r.spec.name.starts_with(REMIND_PREFIX)
}

pub(super) fn job_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

pub(super) fn job_id_of(r: &Routine) -> &str {
    r.spec
        .name
        .strip_prefix(SCHEDULE_PREFIX)
        .or_else(|| r.spec.name.strip_prefix(REMIND_PREFIX))
        .unwrap_or(&r.spec.name)
}

/// `active`, `paused`, `completed` (a one-shot that fired, or `max_runs`
/// reached) or `failed` (stopped after a failed run).
pub(super) fn job_status(r: &Routine) -> &'static str {
    if r.spec.enabled {
        return "active";
    }
    let once = matches!(r.spec.trigger, Trigger::Once { .. });
    let spent = r
        .spec
        .guardrails
        .max_runs
        .is_some_and(|max| r.runtime.run_count >= max);
    if r.runtime.consecutive_failures > 0 && (once || spent) {
        "failed"
    } else if r.runtime.run_count > 0 && (once || spent) {
        "completed"
    } else {
        "paused"
    }
}

pub(super) fn job_view(r: &Routine) -> Value {
    let (schedule_type, when) = match &r.spec.trigger {
        Trigger::Once { at } => ("once", at.clone()),
        Trigger::Cron { schedule } => ("cron", schedule.clone()),
        other => (other.kind(), String::new()),
    };
    let channel = r.spec.notify.channel.clone().unwrap_or_default();
    let output = if cairn_core::notification::conversation_session(&channel).is_some() {
        "conversation".to_string()
    } else {
        channel
    };
    json!({
        "job_id": job_id_of(r),
        "schedule_type": schedule_type,
        "when": when,
        "label": r.spec.description,
        "action_type": match &r.spec.action {
            RoutineAction::ToolCall { .. } => "tool_call",
            RoutineAction::Lightweight { .. } => "llm_prompt",
            RoutineAction::Notification { title, .. }
                if title.as_deref().is_some_and(|t| t.starts_with("[SCHEDULED PROMPT]")) => "llm_prompt",
            _ => "notification",
        },
        "status": job_status(r),
        "run_count": r.runtime.run_count,
        "next_run_at": r.runtime.next_fire_at.map(rfc3339),
        "last_run_at": r.runtime.last_run_at.map(rfc3339),
        "max_runs": r.spec.guardrails.max_runs,
        "output_channel": output,
        "routine": r.spec.name,
    })
}

/// `schedule_cancel`.
pub(super) struct CancelTool(pub(super) Shared);

#[async_trait]
impl Tool for CancelTool {
    fn name(&self) -> &str {
        "schedule_cancel"
    }
    fn family(&self) -> Option<&str> {
        Some(SCHEDULE_FAMILY)
    }
    fn description(&self) -> &str {
        "Cancel a scheduled job or reminder (removes it and its history)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"]})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    /// Cancelling changes what was set up to run: the person's to approve.
    fn needs_person(&self, _: &Value) -> bool {
        true
    }
    fn reusable(&self) -> bool {
        false
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let job = s.find(&args).await?;
        let previous = job_status(&job);
        s.service
            .delete(&job, &Actor::Agent)
            .await
            .map_err(tool_error)?;
        json_output(&json!({
            "job_id": job_id_of(&job),
            "label": job.spec.description,
            "status": "cancelled",
            "previous_status": previous,
        }))
    }
}

/// `schedule_list`.
pub(super) struct ListTool(pub(super) Shared);

#[async_trait]
impl Tool for ListTool {
    fn name(&self) -> &str {
        "schedule_list"
    }
    fn family(&self) -> Option<&str> {
        Some(SCHEDULE_FAMILY)
    }
    fn description(&self) -> &str {
        "List scheduled jobs and reminders, optionally by status."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"status": {"enum": ["active", "paused", "completed", "failed"]}}})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let wanted = optional_string(&args, "status")?;
        let jobs = s.jobs().await?;
        let count = |status: &str| jobs.iter().filter(|r| job_status(r) == status).count();
        let (active, completed) = (count("active"), count("completed"));
        let total = jobs.len();
        let mut shown: Vec<&Routine> = jobs
            .iter()
            .filter(|r| wanted.as_deref().is_none_or(|w| job_status(r) == w))
            .collect();
        // Active first, soonest first; then the rest, newest first.
        shown.sort_by(|a, b| {
            (job_status(a) != "active")
                .cmp(&(job_status(b) != "active"))
                .then(a.runtime.next_fire_at.cmp(&b.runtime.next_fire_at))
                .then(b.created_at.cmp(&a.created_at))
        });
        json_output(&json!({
            "jobs": shown.into_iter().map(job_view).collect::<Vec<_>>(),
            "total": total,
            "active": active,
            "completed": completed,
        }))
    }
}

/// `schedule_status`.
pub(super) struct StatusTool(pub(super) Shared);

#[async_trait]
impl Tool for StatusTool {
    fn name(&self) -> &str {
        "schedule_status"
    }
    fn family(&self) -> Option<&str> {
        Some(SCHEDULE_FAMILY)
    }
    fn description(&self) -> &str {
        "Details and recent runs of one scheduled job."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"]})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let s = &self.0;
        let job = s.find(&args).await?;
        let runs = s
            .service
            .store()
            .list_runs(job.id, STATUS_RUNS)
            .await
            .map_err(store_error)?;
        let mut view = job_view(&job);
        view["runs"] = runs
            .iter()
            .map(|r| {
                json!({
                    "run_id": r.id,
                    "status": r.status,
                    "started_at": rfc3339(r.started_at),
                    "summary": r.result_summary.as_deref().or(r.skip_reason.as_deref()),
                })
            })
            .collect();
        view["last_status"] = json!(runs.first().map(|r| r.status));
        json_output(&view)
    }
}
