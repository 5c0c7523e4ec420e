//! `/job`, `/status`, `/cancel` and `/jobs`: background jobs from the chat.

use cairn_core::job::{CancelOutcome, JobRecord, short_id as short};
use cairn_store::JobFilter;
use uuid::Uuid;

use super::{ChatService, Reply};
use crate::jobs::{JobScheduler, JobSpec};
use crate::session::LiveSession;

/// Jobs shown by `/jobs`.
const LIST_LIMIT: u32 = 20;

impl ChatService {
    pub(super) fn scheduler(&self) -> Result<&JobScheduler, Reply> {
        self.jobs
            .as_deref()
            .ok_or_else(|| Reply::error("Background jobs are not available in this session."))
    }

    /// `/job [--plan] <description>`: starts a job (planning its steps
    /// first with `--plan`) and says how to follow it.
    pub(super) async fn create_job(
        &self,
        session: &LiveSession,
        description: String,
        plan: bool,
    ) -> Reply {
        let jobs = match self.scheduler() {
            Ok(j) => j,
            Err(reply) => return reply,
        };
        let mut spec =
            JobSpec::from_description(description, session.row.user_id.clone()).with_planning(plan);
        if let Some(thread) = session.row.active_thread_id {
            spec = spec.with_origin(format!("thread:{thread}"));
        }
        match jobs.submit(spec).await {
            Ok(handle) => Reply::notice(format!(
                "Started job {}. /status {} shows its progress and result.",
                handle.id(),
                short(handle.id())
            )),
            Err(e) => Reply::error(format!("could not start the job: {e}")),
        }
    }

    /// `/status [id]`: one job in full, or the active ones.
    pub(super) async fn job_status(&self, session: &LiveSession, id: Option<String>) -> Reply {
        let jobs = match self.scheduler() {
            Ok(j) => j,
            Err(reply) => return reply,
        };
        match id {
            Some(prefix) => match self.find_job(jobs, session, &prefix).await {
                Ok(job) => Reply::notice(describe(&job)),
                Err(reply) => reply,
            },
            None => {
                let filter = JobFilter {
                    owner: Some(session.row.user_id.clone()),
                    limit: LIST_LIMIT,
                    ..JobFilter::default()
                };
                match jobs.list(&filter).await {
                    Ok(list) => {
                        let active: Vec<&JobRecord> =
                            list.iter().filter(|j| j.state.is_active()).collect();
                        if active.is_empty() {
                            Reply::notice("No active jobs. /jobs lists recent ones.")
                        } else {
                            Reply::notice(lines(&active))
                        }
                    }
                    Err(e) => Reply::error(e.to_string()),
                }
            }
        }
    }

    /// `/cancel <id>`.
    pub(super) async fn cancel_job(&self, session: &LiveSession, prefix: String) -> Reply {
        let jobs = match self.scheduler() {
            Ok(j) => j,
            Err(reply) => return reply,
        };
        let job = match self.find_job(jobs, session, &prefix).await {
            Ok(job) => job,
            Err(reply) => return reply,
        };
        match jobs.cancel(job.id).await {
            Ok(CancelOutcome::Cancelled) => {
                Reply::notice(format!("Cancelled job {}.", short(job.id)))
            }
            Ok(CancelOutcome::Requested) => {
                Reply::notice(format!("Stopping job {}…", short(job.id)))
            }
            Ok(CancelOutcome::AlreadyEnded(state)) => {
                Reply::error(format!("Job {} already ended ({state}).", short(job.id)))
            }
            Err(e) => Reply::error(e.to_string()),
        }
    }

    /// `/jobs`: the recent jobs of this user.
    pub(super) async fn list_jobs(&self, session: &LiveSession) -> Reply {
        let jobs = match self.scheduler() {
            Ok(j) => j,
            Err(reply) => return reply,
        };
        let filter = JobFilter {
            owner: Some(session.row.user_id.clone()),
            limit: LIST_LIMIT,
            ..JobFilter::default()
        };
        match jobs.list(&filter).await {
            Ok(list) if list.is_empty() => {
                Reply::notice("No jobs yet. /job <description> starts one.")
            }
            Ok(list) => Reply::notice(lines(&list.iter().collect::<Vec<_>>())),
            Err(e) => Reply::error(e.to_string()),
        }
    }

    /// The user's job `prefix` names: its id, the start of it, or the
    /// short form `/job` prints (its end).
    async fn find_job(
        &self,
        jobs: &JobScheduler,
        session: &LiveSession,
        prefix: &str,
    ) -> Result<JobRecord, Reply> {
        if let Ok(id) = Uuid::parse_str(prefix.trim()) {
            return match jobs.get(id).await {
                Ok(Some(job)) if job.owner == session.row.user_id => Ok(job),
                Ok(_) => Err(Reply::error(format!("No job {prefix}."))),
                Err(e) => Err(Reply::error(e.to_string())),
            };
        }
        let digits = cairn_core::job::id_digits(prefix).map_err(Reply::error)?;
        let ids = jobs
            .ids_like(&digits, &session.row.user_id)
            .await
            .map_err(|e| Reply::error(e.to_string()))?;
        match ids.as_slice() {
            [id] => match jobs.get(*id).await {
                Ok(Some(job)) => Ok(job),
                Ok(None) => Err(Reply::error(format!("No job {prefix}. /jobs lists them."))),
                Err(e) => Err(Reply::error(e.to_string())),
            },
            [] => Err(Reply::error(format!("No job {prefix}. /jobs lists them."))),
            _ => Err(Reply::error(format!(
                "\"{prefix}\" matches several jobs; give more of the id."
            ))),
        }
    }
}

fn lines(jobs: &[&JobRecord]) -> String {
    jobs.iter()
        .map(|j| format!("{}  {:<11} {}", j.id, j.state.to_string(), j.title))
        .collect::<Vec<_>>()
        .join("\n")
}

fn describe(job: &JobRecord) -> String {
    let mut out = format!("Job {}: {}\nstate: {}\n", job.id, job.title, job.state);
    if let Some(at) = job.started_at {
        out.push_str(&format!("started: {}\n", at.to_rfc3339()));
    }
    if let Some(at) = job.completed_at {
        out.push_str(&format!("ended: {}\n", at.to_rfc3339()));
    }
    out.push_str(&format!(
        "iterations: {}, tokens: {} in / {} out\n",
        job.iterations, job.input_tokens, job.output_tokens
    ));
    if let Some(result) = &job.result {
        out.push_str(&format!("result:\n{result}\n"));
    }
    if let Some(error) = &job.error {
        out.push_str(&format!("error: {error}\n"));
    }
    out.trim_end().to_string()
}
