//! Children: turns started by another turn's tool call (a sub-agent of
//! `agent_delegate`, a subtask of `job_subtasks`), each recorded as a job
//! of its own ([`JobScheduler::run_child`]).
//!
//! A child is held here like a job while it runs — its lease is renewed,
//! `cairn job cancel` reaches it, its progress is published and its end is
//! a `job.finished` event — but it runs in its parent's task rather than in
//! one of the `max_parallel_jobs` slots: its parent already holds one (a
//! job) or is a person's turn, and waits for it. Its cancellation token is
//! a child of its parent's, so stopping the parent stops it. It is never
//! called stuck or restarted (its parent's turn waits on it, under the
//! child's own time limit), and its progress is its ancestors' too, so a
//! job waiting for children is not stuck either.

use std::sync::Arc;

use cairn_core::chat::ChatMessage;
use cairn_core::job::JobRecord;
use futures::FutureExt;
use uuid::Uuid;

use super::scheduler::{Inner, Running, lock};
use super::worker::{self, Ended, JobDelegate, JobShared, Spent};
use super::{JobError, JobScheduler, JobSpec, job_session_id};
use crate::agent_loop::{AgentLoop, LoopOutcome};
use crate::runner::Approver;
use crate::tools::ToolContext;

/// Why a declined call of a child did not run, when a person answers its
/// approvals (through its parent's channel).
const DECLINED_BY_A_PERSON: &str = "declined when approval was asked";

/// The turn a child runs.
pub struct ChildTurn {
    /// The loop it runs on (its parent's, with the child's tools and limits).
    pub agent: AgentLoop,
    /// Who answers its approval requests.
    pub approver: Arc<dyn Approver>,
    /// Its context: a system message and its task.
    pub messages: Vec<ChatMessage>,
    /// The context of the call that starts it; the child runs under a
    /// session of its own (`job:<id>`) and a cancellation token below this one's.
    pub ctx: ToolContext,
}

/// How a child ended.
#[derive(Debug)]
pub struct ChildEnd {
    /// Its record as stored now.
    pub record: JobRecord,
    /// The loop's outcome; `None` when the time limit stopped it first.
    pub outcome: Option<LoopOutcome>,
}

impl JobScheduler {
    /// Records `spec` as a child of `parent` (the job whose turn starts
    /// it, if any), runs `turn` to its end under the spec's limits and
    /// records how it ended. Fails, recording nothing, when the spec is
    /// invalid, `parent` is not a stored job or the scheduler is stopping.
    pub async fn run_child(
        &self,
        spec: JobSpec,
        parent: Option<Uuid>,
        turn: ChildTurn,
    ) -> Result<ChildEnd, JobError> {
        spec.validate()?;
        let inner = &self.inner;
        if let Some(parent) = parent
            && inner.store.get_job(parent).await?.is_none()
        {
            return Err(JobError::NotFound(parent));
        }
        if inner.shutdown.is_cancelled() {
            return Err(JobError::ShuttingDown);
        }
        let now = inner.clock.now();
        let mut record = inner.record_of(&spec, now);
        record.parent_id = parent;
        inner.store.create_job(&record).await?;
        let lease_until = inner.lease_until();
        let started = inner
            .store
            .start_job(record.id, &inner.config.lease_owner, lease_until, now)
            .await;
        let cancel = turn.ctx.cancel.child_token();
        let shared = Arc::new(JobShared::new(cancel, now, None));
        let ancestors = {
            let mut slots = lock(&inner.slots);
            let ancestors = ancestors(&slots.running, parent);
            // Registered even if it could not start, so it ends the one way.
            slots.running.insert(
                record.id,
                Running {
                    shared: Arc::clone(&shared),
                    parent,
                    child: true,
                },
            );
            ancestors
        };
        let end = match started {
            Ok(true) => {
                record.state = cairn_core::job::JobState::InProgress;
                record.started_at = Some(now);
                record.last_activity_at = Some(now);
                record.lease_until = Some(lease_until);
                run(inner, record, &shared, &ancestors, turn).await
            }
            Ok(false) => ChildEnd {
                record: worker::current(inner, record).await,
                outcome: None,
            },
            Err(error) => {
                let outcome = worker::failure(inner, &shared, &format!("could not start: {error}"));
                ChildEnd {
                    record: worker::finish(inner, record, outcome).await,
                    outcome: None,
                }
            }
        };
        inner.release(end.record.id);
        shared.done.send_replace(Some(end.record.clone()));
        Ok(end)
    }
}

/// The running jobs above `parent`, nearest first, as far as they run here.
fn ancestors(
    running: &std::collections::HashMap<Uuid, Running>,
    mut parent: Option<Uuid>,
) -> Vec<Arc<JobShared>> {
    let mut out = Vec::new();
    while let Some(id) = parent {
        let Some(above) = running.get(&id) else { break };
        out.push(Arc::clone(&above.shared));
        parent = above.parent;
    }
    out
}

/// Runs the child's loop under its time limit and records how it ended;
/// a panic inside is recorded as a failure.
async fn run(
    inner: &Inner,
    record: JobRecord,
    shared: &JobShared,
    ancestors: &[Arc<JobShared>],
    turn: ChildTurn,
) -> ChildEnd {
    let ChildTurn {
        agent,
        approver,
        mut messages,
        ctx,
    } = turn;
    let mut ctx = ctx.with_cancel(shared.cancel.clone());
    ctx.session_id = job_session_id(record.id);
    let delegate = JobDelegate {
        job_id: record.id,
        progress: &inner.progress,
        approver: approver.as_ref(),
        shared,
        ancestors,
        clock: inner.clock.as_ref(),
    };
    let work =
        std::panic::AssertUnwindSafe(agent.run(&delegate, &mut messages, &ctx)).catch_unwind();
    let ended = tokio::select! {
        biased;
        ended = work => Some(ended),
        () = tokio::time::sleep(record.timeout) => None,
    };
    let outcome = match ended {
        None => {
            // The work future is gone already; this stops anything it left behind.
            shared.cancel.cancel();
            None
        }
        Some(Ok(outcome)) => Some(outcome),
        Some(Err(_)) => {
            tracing::error!(job = %record.id, "a child's turn panicked");
            let outcome = worker::failure(inner, shared, "internal error: the turn crashed");
            return ChildEnd {
                record: worker::finish(inner, record, outcome).await,
                outcome: None,
            };
        }
    };
    let mut spent = Spent::default();
    if let Some(outcome) = &outcome {
        spent.add(&outcome.usage, outcome.cost_micros);
    }
    let declined = if approver.person_present() {
        DECLINED_BY_A_PERSON
    } else {
        worker::DECLINED_IN_A_JOB
    };
    let ended = outcome.clone().map(Ended::Loop);
    let stored = worker::outcome_of(inner, &record, shared, ended, &spent, declined);
    ChildEnd {
        record: worker::finish(inner, record, stored).await,
        outcome,
    }
}
