//! Managing scheduled jobs: how a job's routine is shown (`job_view`,
//! `job_status`) and the tools' calls that cancel, list and inspect jobs
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

impl Shared {
    /// `schedule_cancel`.
    pub(super) async fn cancel(&self, args: &Value) -> Result<Value, ToolError> {
        let job = self.find(args).await?;
        let previous = job_status(&job);
        self.service
            .delete(&job, &Actor::Agent)
            .await
            .map_err(tool_error)?;
        Ok(json!({
            "job_id": job_id_of(&job),
            "label": job.spec.description,
            "status": "cancelled",
            "previous_status": previous,
        }))
    }

    /// `schedule_list`.
    pub(super) async fn list(&self, args: &Value) -> Result<Value, ToolError> {
        let wanted = optional_string(args, "status")?;
        let jobs = self.jobs().await?;
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
        Ok(json!({
            "jobs": shown.into_iter().map(job_view).collect::<Vec<_>>(),
            "total": total,
            "active": active,
            "completed": completed,
        }))
    }

    /// `schedule_status`.
    pub(super) async fn status(&self, args: &Value) -> Result<Value, ToolError> {
        let job = self.find(args).await?;
        let runs = self
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
        Ok(view)
    }
}
