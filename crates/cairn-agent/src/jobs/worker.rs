//! Running one job: claim it in the store, optionally plan, run the agent
//! loop under the job's time limit and cancellation token, and write back how
//! it ended.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use cairn_core::chat::ChatMessage;
use cairn_core::job::{JobOutcome, JobRecord, JobState};
use cairn_llm::{ChatRequest, LlmError};
use chrono::{DateTime, Utc};
use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::scheduler::{Inner, JobHandle, lock};
use super::{RefusedTool, job_session_id};
use crate::agent_loop::{AgentLoop, LoopConfig, LoopDelegate, LoopEvent, LoopOutcome, LoopStatus};
use crate::runner::{ApprovalAnswer, ApprovalRequest, Approver, ToolStatus};
use cairn_core::clock::Clock;

/// Appended to the system prompt of every job.
const JOB_NOTE: &str = "You are working on a background job. Nobody is watching: you cannot ask \
questions, and tool calls that need approval will be refused. Work until the task is done, then \
reply with the final result as plain text.";

/// The planning call's instructions.
const PLAN_PROMPT: &str = "Write a short numbered plan (at most 7 steps) for the task the user \
gives. Reply with the plan only; do not start the work.";

/// Why a job's token was cancelled; the first reason given wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    /// Someone cancelled it (here or from another process).
    User,
    /// The scheduler is shutting down.
    Shutdown,
    /// Self-repair gave up on it (the store already records why).
    Repair,
}

/// What the scheduler and a job's worker share while the job is known here.
#[derive(Debug)]
pub(super) struct JobShared {
    /// Fires when the job must stop; tool calls see it through their context.
    pub cancel: CancellationToken,
    stop: OnceLock<StopReason>,
    last_activity: AtomicI64,
    flushed_activity: AtomicI64,
    iterations: AtomicU32,
    /// Whether the store has it as `stuck`.
    pub stuck: AtomicBool,
    /// The final record, once the job has ended.
    pub done: watch::Sender<Option<JobRecord>>,
    /// The spec's `allowed_tools`: `Some` replaces the scheduler's approver.
    pub allowed_tools: Option<Vec<String>>,
    /// Tool calls that were declined or denied, filled when the loop ends.
    pub refused: Arc<Mutex<Vec<RefusedTool>>>,
    /// The current attempt's token (a child of `cancel`): self-repair
    /// cancels it to restart the job without stopping it.
    attempt: Mutex<CancellationToken>,
    /// Self-repair asked for a restart of the current attempt.
    restart: AtomicBool,
}

impl JobShared {
    pub(super) fn new(
        cancel: CancellationToken,
        now: DateTime<Utc>,
        allowed_tools: Option<Vec<String>>,
    ) -> Self {
        Self {
            allowed_tools,
            refused: Arc::default(),
            cancel,
            stop: OnceLock::new(),
            last_activity: AtomicI64::new(now.timestamp_micros()),
            flushed_activity: AtomicI64::new(now.timestamp_micros()),
            iterations: AtomicU32::new(0),
            stuck: AtomicBool::new(false),
            done: watch::channel(None).0,
            attempt: Mutex::new(CancellationToken::new()),
            restart: AtomicBool::new(false),
        }
    }

    /// Starts an attempt: a fresh token under the job's own.
    fn new_attempt(&self) -> CancellationToken {
        let token = self.cancel.child_token();
        *lock(&self.attempt) = token.clone();
        token
    }

    /// Stops the current attempt so the worker starts the job again.
    pub(super) fn request_restart(&self) {
        self.restart.store(true, Ordering::SeqCst);
        lock(&self.attempt).cancel();
    }

    /// A handle on this job for a waiter.
    pub(super) fn handle(&self, id: uuid::Uuid) -> JobHandle {
        JobHandle::new(id, self.done.subscribe(), Arc::clone(&self.refused))
    }

    /// Stops the job for `reason` (the first reason given is kept).
    pub(super) fn stop(&self, reason: StopReason) {
        let _ = self.stop.set(reason);
        self.cancel.cancel();
    }

    pub(super) fn touch(&self, at: DateTime<Utc>) {
        self.last_activity
            .fetch_max(at.timestamp_micros(), Ordering::Relaxed);
    }

    pub(super) fn last_activity(&self) -> DateTime<Utc> {
        let micros = self.last_activity.load(Ordering::Relaxed);
        DateTime::from_timestamp_micros(micros).unwrap_or_default()
    }

    /// The last activity if it changed since the previous call.
    pub(super) fn unflushed_activity(&self) -> Option<DateTime<Utc>> {
        let now = self.last_activity.load(Ordering::Relaxed);
        let before = self.flushed_activity.swap(now, Ordering::Relaxed);
        (now != before).then(|| DateTime::from_timestamp_micros(now).unwrap_or_default())
    }
}

/// The loop's view of a job: answers approvals with the scheduler's approver
/// and turns every event into a sign of activity (of a child's ancestors too).
pub(super) struct JobDelegate<'a> {
    pub(super) job_id: uuid::Uuid,
    pub(super) progress: &'a tokio::sync::broadcast::Sender<super::JobProgress>,
    pub(super) approver: &'a dyn Approver,
    pub(super) shared: &'a JobShared,
    pub(super) ancestors: &'a [Arc<JobShared>],
    pub(super) clock: &'a dyn Clock,
}

#[async_trait]
impl LoopDelegate for JobDelegate<'_> {
    fn approver(&self) -> &dyn Approver {
        self.approver
    }

    fn on_event(&self, event: LoopEvent) {
        let now = self.clock.now();
        self.shared.touch(now);
        for ancestor in self.ancestors {
            ancestor.touch(now);
        }
        if let LoopEvent::LlmCall { iteration } = event {
            self.shared.iterations.store(iteration, Ordering::Relaxed);
        }
        let step = match event {
            LoopEvent::LlmCall { iteration } => Some(format!("model call {iteration}")),
            LoopEvent::ToolStarted { tool, .. } => Some(format!("running {tool}")),
            LoopEvent::ToolFinished { tool, status, .. } => {
                Some(format!("{tool} ended: {}", status.as_str()))
            }
            _ => None,
        };
        if let Some(step) = step {
            // Nobody listening is fine.
            let _ = self.progress.send(super::JobProgress {
                job_id: self.job_id,
                iterations: self.shared.iterations.load(Ordering::Relaxed),
                step,
            });
        }
    }
}

/// A job's own approver when its spec lists `allowed_tools`: nobody is
/// there to ask, so the listed tools are approved and the rest declined.
struct AllowList<'a>(&'a [String]);

#[async_trait]
impl Approver for AllowList<'_> {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if self.0.contains(&request.tool) {
            ApprovalAnswer::Yes
        } else {
            ApprovalAnswer::No
        }
    }
}

/// Tokens and cost of every model call of the job so far.
#[derive(Debug, Default)]
pub(super) struct Spent {
    input_tokens: u64,
    output_tokens: u64,
    cost_micros: u64,
}

impl Spent {
    pub(super) fn add(&mut self, usage: &cairn_llm::Usage, cost_micros: u64) {
        self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        self.cost_micros = self.cost_micros.saturating_add(cost_micros);
    }
}

/// How the work ended, before the time limit is taken into account.
pub(super) enum Ended {
    Loop(LoopOutcome),
    PlanFailed(LlmError),
    PlanInterrupted,
}

/// Runs the job to its end and returns its final record. Never panics: a
/// panic inside the work is recorded as a failure.
pub(super) async fn run(inner: &Inner, record: JobRecord, shared: &JobShared) -> JobRecord {
    let fallback = record.clone();
    match std::panic::AssertUnwindSafe(execute(inner, record, shared))
        .catch_unwind()
        .await
    {
        Ok(record) => record,
        Err(_) => {
            tracing::error!(job = %fallback.id, "job worker panicked");
            let outcome = failure(inner, shared, "internal error: the job's worker crashed");
            finish(inner, fallback, outcome).await
        }
    }
}

async fn execute(inner: &Inner, mut record: JobRecord, shared: &JobShared) -> JobRecord {
    let now = inner.clock.now();
    let lease_until = now + inner.lease();
    let owner = &inner.config.lease_owner;
    match inner
        .store
        .start_job(record.id, owner, lease_until, now)
        .await
    {
        Ok(true) => {}
        // Cancelled (or reaped) while it waited: that verdict is the record.
        Ok(false) => return current(inner, record).await,
        Err(error) => {
            let outcome = failure(inner, shared, &format!("could not start: {error}"));
            return finish(inner, record, outcome).await;
        }
    }
    record.state = JobState::InProgress;
    record.started_at = Some(now);
    record.last_activity_at = Some(now);
    record.lease_owner = Some(owner.clone());
    record.lease_until = Some(lease_until);
    shared.touch(now);

    let mut spent = Spent::default();
    // Each pass is one attempt; self-repair ends an attempt to start the
    // job again from its instructions (a job keeps no checkpoint of its
    // conversation: tools it already ran may run again).
    let ended = loop {
        let attempt = shared.new_attempt();
        let ctx = {
            let mut ctx = inner.ctx.clone().with_cancel(attempt.clone());
            ctx.session_id = job_session_id(record.id);
            ctx
        };
        let ended = tokio::select! {
            biased;
            ended = crate::safety::leak::in_run(
                record.id.to_string(),
                None,
                work(inner, &record, shared, &ctx, &mut spent),
            ) => Some(ended),
            () = tokio::time::sleep(record.timeout) => None,
        };
        if shared.restart.swap(false, Ordering::SeqCst) && !shared.cancel.is_cancelled() {
            attempt.cancel();
            let now = inner.clock.now();
            shared.touch(now);
            shared.stuck.store(false, Ordering::Relaxed);
            tracing::info!(job = %record.id, "restarting a job that made no progress");
            continue;
        }
        break ended;
    };
    if ended.is_none() {
        // The work future is gone already; this stops anything it left behind.
        shared.cancel.cancel();
    }
    let outcome = outcome_of(inner, &record, shared, ended, &spent, DECLINED_IN_A_JOB);
    finish(inner, record, outcome).await
}

async fn work(
    inner: &Inner,
    record: &JobRecord,
    shared: &JobShared,
    ctx: &crate::tools::ToolContext,
    spent: &mut Spent,
) -> Ended {
    let mut instructions = record.description.clone();
    if record.use_planning {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(PLAN_PROMPT),
                ChatMessage::user(record.description.clone()),
            ],
            model: inner.config.loop_config.model.clone(),
            temperature: inner.config.loop_config.temperature,
            ..ChatRequest::default()
        };
        let answer = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Ended::PlanInterrupted,
            answer = inner.provider.complete(&request) => answer,
        };
        shared.touch(inner.clock.now());
        match answer {
            Ok(plan) => {
                spent.add(&plan.usage, plan.cost_micros);
                let plan = plan.text.trim();
                if !plan.is_empty() {
                    instructions = format!("Plan:\n{plan}\n\nTask:\n{}", record.description);
                }
            }
            Err(error) => return Ended::PlanFailed(error),
        }
    }
    let config = LoopConfig {
        max_iterations: record.max_iterations,
        ..inner.config.loop_config.clone()
    };
    let agent = AgentLoop::new(
        inner.provider.clone(),
        inner.runner.clone(),
        inner.hooks.clone(),
        config,
    );
    let allowed = shared.allowed_tools.as_deref().map(|tools| {
        // Names as written may be aliases; the approver sees canonical names.
        let registry = inner.runner.registry();
        let canonical: Vec<String> = tools
            .iter()
            .map(|t| registry.resolve(t).unwrap_or(t).to_string())
            .collect();
        canonical
    });
    let allow_list = allowed.as_deref().map(AllowList);
    let delegate = JobDelegate {
        job_id: record.id,
        progress: &inner.progress,
        approver: match &allow_list {
            Some(list) => list,
            None => inner.approver.as_ref(),
        },
        shared,
        ancestors: &[],
        clock: inner.clock.as_ref(),
    };
    let mut messages = vec![
        ChatMessage::system(format!("{}\n\n{JOB_NOTE}", inner.config.system_prompt)),
        ChatMessage::user(instructions),
    ];
    let outcome = agent.run(&delegate, &mut messages, ctx).await;
    spent.add(&outcome.usage, outcome.cost_micros);
    {
        let mut refused = lock(&shared.refused);
        for call in &outcome.tool_calls {
            if matches!(call.status, ToolStatus::Declined | ToolStatus::Denied)
                && !refused.iter().any(|r| r.tool == call.tool)
            {
                refused.push(RefusedTool {
                    tool: call.tool.clone(),
                    status: call.status,
                });
            }
        }
    }
    Ended::Loop(outcome)
}

/// Why a declined call did not run, as a job's result says: nobody can
/// approve a job's calls.
pub(super) const DECLINED_IN_A_JOB: &str = "needs approval, which a background job cannot get";

/// How the job ended, for the store; `declined` says why a declined call
/// did not run.
pub(super) fn outcome_of(
    inner: &Inner,
    record: &JobRecord,
    shared: &JobShared,
    ended: Option<Ended>,
    spent: &Spent,
    declined: &str,
) -> JobOutcome {
    let interrupted = || match shared.stop.get() {
        Some(StopReason::Shutdown) => (
            JobState::Failed,
            "interrupted: cairn shut down before the job finished".to_string(),
        ),
        Some(StopReason::Repair) => (
            JobState::Failed,
            "needs attention: no progress after repeated restarts".to_string(),
        ),
        Some(StopReason::User) | None => (JobState::Cancelled, "cancelled by request".to_string()),
    };
    let mut iterations = shared.iterations.load(Ordering::Relaxed);
    let (state, result, error) = match ended {
        None => {
            let limit = cairn_core::duration::format(record.timeout);
            (
                JobState::Failed,
                None,
                Some(format!("timed out after {limit}")),
            )
        }
        Some(Ended::PlanInterrupted) => {
            let (state, error) = interrupted();
            (state, None, Some(error))
        }
        Some(Ended::PlanFailed(error)) => (
            JobState::Failed,
            None,
            Some(format!("planning failed: {error}")),
        ),
        Some(Ended::Loop(outcome)) => {
            iterations = outcome.iterations;
            match &outcome.status {
                LoopStatus::Answered => (
                    JobState::Completed,
                    Some(with_refusals(&outcome.text, &outcome, declined)),
                    None,
                ),
                LoopStatus::Interrupted => {
                    let (state, error) = interrupted();
                    (state, None, Some(error))
                }
                LoopStatus::IterationLimit { limit } => (
                    JobState::Failed,
                    None,
                    Some(format!(
                        "stopped after {limit} model calls without a final answer (max_iterations)"
                    )),
                ),
                LoopStatus::Cancelled { reason } => (
                    JobState::Failed,
                    None,
                    Some(format!("stopped by a hook: {reason}")),
                ),
                LoopStatus::Failed { error } => (JobState::Failed, None, Some(error.to_string())),
                // Jobs offer no client tools; were it to happen, the job did not answer.
                LoopStatus::ClientTools { .. } => (
                    JobState::Failed,
                    None,
                    Some("the model called a tool jobs do not run".to_string()),
                ),
            }
        }
    };
    JobOutcome {
        state,
        result,
        error,
        iterations,
        input_tokens: spent.input_tokens,
        output_tokens: spent.output_tokens,
        cost_micros: spent.cost_micros,
        completed_at: inner.clock.now(),
    }
}

/// The answer, followed by a note naming the tool calls that were refused,
/// so whoever reads the result knows what the job could not do.
fn with_refusals(text: &str, outcome: &LoopOutcome, declined: &str) -> String {
    let mut refused: Vec<String> = Vec::new();
    for call in &outcome.tool_calls {
        let why = match call.status {
            ToolStatus::Declined => declined,
            ToolStatus::Denied => "denied by policy",
            _ => continue,
        };
        let line = format!("`{}` ({why})", call.tool);
        if !refused.contains(&line) {
            refused.push(line);
        }
    }
    if refused.is_empty() {
        text.to_string()
    } else {
        format!("{text}\n\n[Refused tool calls: {}.]", refused.join(", "))
    }
}

pub(super) fn failure(inner: &Inner, shared: &JobShared, error: &str) -> JobOutcome {
    JobOutcome {
        state: JobState::Failed,
        result: None,
        error: Some(error.to_string()),
        iterations: shared.iterations.load(Ordering::Relaxed),
        input_tokens: 0,
        output_tokens: 0,
        cost_micros: 0,
        completed_at: inner.clock.now(),
    }
}

/// Writes the outcome (compare-and-set) and returns the record as it now stands.
pub(super) async fn finish(inner: &Inner, mut record: JobRecord, outcome: JobOutcome) -> JobRecord {
    match inner.store.finish_job(record.id, &outcome).await {
        Ok(true) => {}
        // Someone else's verdict (cancelled while queued, reaped) stands.
        Ok(false) => return current(inner, record).await,
        Err(error) => {
            tracing::warn!(job = %record.id, %error, "could not record the job's end; will retry");
            inner.retry_finish(record.id, outcome.clone());
        }
    }
    record.apply_outcome(&outcome);
    // Nobody listening is fine.
    let _ = inner.finished.send(record.clone());
    record
}

/// The stored record, or the one in hand if the store cannot say.
pub(super) async fn current(inner: &Inner, record: JobRecord) -> JobRecord {
    match inner.store.get_job(record.id).await {
        Ok(Some(stored)) => stored,
        Ok(None) => record,
        Err(error) => {
            tracing::warn!(job = %record.id, %error, "could not read the job back");
            record
        }
    }
}
