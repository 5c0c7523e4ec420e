//! Routines of an agent other than `main` (`agent: family`): what a run
//! uses of that agent ([`RoutineAgent`]) and its `full_job` action, which
//! is one unattended turn of the agent ([`turn`]) rather than a job on
//! `main`'s scheduler.
//!
//! Every action of such a routine acts as its agent: `lightweight` calls
//! its model and reads its workspace; `tool_call` and `watch` run through
//! its tool runner (its policy) in its workspace; `full_job` is a turn of
//! its loop with its system prompt (its identity files), its tools and its
//! memory; `notification` needs nothing of it. A routine whose agent is not
//! configured is not run at all (never as `main`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::prompt::{PromptContext, build_system_prompt};
use cairn_agent::runner::{Approver, ToolStatus};
use cairn_agent::tools::ToolContext;
use cairn_agent::{AgentLoop, LoopConfig, LoopDelegate, LoopStatus};
use cairn_core::chat::ChatMessage;
use cairn_core::routine::{MAIN_AGENT, RoutineAction, RunStatus};

use super::action::{ActionOutcome, ActionRequest};
use super::actions::{
    AgentActions, Light, ROUTINE_OK, Unattended, is_routine_ok, needs_approval, notification,
    tool_call, with_detail,
};
use crate::inbound::desk::ApprovalDesk;

/// Appended to the agent's system prompt for a routine's turn.
const UNATTENDED_NOTE: &str = "You are running a routine on your own: nobody is watching, you \
cannot ask questions, and tool calls that need approval will be refused. Work until the task is \
done, then reply with the final result as plain text.";

/// What a routine of another agent runs with: that agent's loop, tools'
/// context and identity.
#[derive(Clone)]
pub struct RoutineAgent {
    /// Its loop: its provider at its model, its tool runner under its
    /// policy (its memory tools among them), the hooks.
    pub agent: AgentLoop,
    /// Its tools' base context: its workspace (where its file and shell
    /// tools are confined), the time zone, clock and limits.
    pub ctx: ToolContext,
    /// What its system prompt is built from (its name and workspace); the
    /// time, model and tools are filled in at each run.
    pub prompt: PromptContext,
}

impl std::fmt::Debug for RoutineAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutineAgent")
            .field("model", &self.agent.model())
            .field("workspace", &self.ctx.workspace)
            .finish_non_exhaustive()
    }
}

/// Runs `request`'s action as `agent`, with what `actions` shares (the
/// clock, the lightweight call).
pub(super) async fn execute(
    actions: &AgentActions,
    agent: &RoutineAgent,
    request: &ActionRequest,
) -> ActionOutcome {
    let runner = agent.agent.runner();
    match &request.routine.spec.action {
        RoutineAction::Lightweight {
            prompt,
            context_paths,
            max_tokens,
        } => {
            // Its own model: an agent has no cheap one besides.
            let light = Light {
                provider: agent.agent.provider(),
                model: agent.agent.config().model.clone(),
                workspace: &agent.ctx.workspace,
            };
            actions
                .light_call(request, &light, prompt, context_paths, *max_tokens)
                .await
        }
        RoutineAction::FullJob {
            title,
            description,
            max_iterations,
            allowed_tools,
        } => {
            let job = Job {
                title,
                instructions: actions.job_instructions(request, description),
                max_iterations: *max_iterations,
                allowed_tools,
            };
            turn(agent, request, job, actions.desk()).await
        }
        RoutineAction::ToolCall {
            tool,
            params,
            allowed_tools,
        } => {
            let desk = actions.desk();
            tool_call(
                runner,
                &agent.ctx,
                request,
                tool,
                params,
                allowed_tools,
                desk,
            )
            .await
        }
        RoutineAction::Watch { .. } => super::watch::check(runner, &agent.ctx, request).await,
        RoutineAction::Notification { message, title } => notification(message, title),
        RoutineAction::System { task } => ActionOutcome::failed(format!(
            "`system` task {task} is cairn's own upkeep and runs as {MAIN_AGENT} only"
        )),
    }
}

/// A `full_job` of the routine, as written.
struct Job<'a> {
    /// Its title.
    title: &'a str,
    /// Its instructions, with the routine's note and the fire appended.
    instructions: String,
    /// Model calls it may take (the agent's limit when `None`).
    max_iterations: Option<u32>,
    /// The tools approved for it.
    allowed_tools: &'a [String],
}

/// The loop's view of a routine's turn: approvals are answered by the
/// routine's `allowed_tools`, nothing is streamed or kept.
struct Unwatched<'a>(&'a Unattended);

#[async_trait]
impl LoopDelegate for Unwatched<'_> {
    fn approver(&self) -> &dyn Approver {
        self.0
    }
}

/// Runs `job` as one unattended turn of `agent`: a fresh context holding
/// its system prompt and the job, its tools under its policy, in its
/// workspace, within the job time limit (and the run's own `timeout`).
/// `ROUTINE_OK` as the answer is `ok`, another answer `attention`; a call
/// the policy denied fails the run, one that needed approval makes it
/// `attention`.
async fn turn(
    agent: &RoutineAgent,
    request: &ActionRequest,
    job: Job<'_>,
    desk: Option<&ApprovalDesk>,
) -> ActionOutcome {
    let name = &request.routine.spec.name;
    let runner = agent.agent.runner();
    let prompt = PromptContext {
        now: agent.ctx.now(),
        model: agent.agent.model().to_string(),
        tools: runner.definitions(),
        more_tools: runner.on_demand_listing(),
        ..agent.prompt.clone()
    };
    let system = format!(
        "{}\n\n{UNATTENDED_NOTE}",
        build_system_prompt(&prompt).await
    );
    let mut messages = vec![
        ChatMessage::system(system),
        ChatMessage::user(format!(
            "Routine `{name}`: {}\n\n{}",
            job.title, job.instructions
        )),
    ];
    let config = LoopConfig {
        max_iterations: job
            .max_iterations
            .unwrap_or(agent.agent.config().max_iterations),
        ..agent.agent.config().clone()
    };
    let looped = AgentLoop::new(
        Arc::clone(agent.agent.provider()),
        Arc::clone(runner),
        Arc::clone(agent.agent.hooks()),
        config,
    );
    let cancel = request.cancel.child_token();
    let mut ctx = agent.ctx.clone().with_cancel(cancel.clone());
    ctx.session_id = format!("routine:{name}");
    let approver = Unattended::new(runner, job.allowed_tools).asking(desk, name);
    let delegate = Unwatched(&approver);
    let limit = cairn_core::job::DEFAULT_TIMEOUT;
    let outcome = tokio::select! {
        outcome = looped.run(&delegate, &mut messages, &ctx) => outcome,
        () = tokio::time::sleep(limit) => {
            cancel.cancel();
            return ActionOutcome::failed(format!(
                "the agent's turn took longer than {}",
                cairn_core::duration::format(Duration::from_secs(limit.as_secs()))
            ));
        }
    };
    let mut result = match &outcome.status {
        LoopStatus::Answered if is_routine_ok(&outcome.text) => {
            ActionOutcome::new(RunStatus::Ok, ROUTINE_OK)
        }
        LoopStatus::Answered => ActionOutcome::new(RunStatus::Attention, outcome.text.trim()),
        LoopStatus::Interrupted => ActionOutcome::failed("cancelled before the agent finished"),
        LoopStatus::IterationLimit { limit } => ActionOutcome::failed(format!(
            "the agent made {limit} model calls without a final answer (max_iterations)"
        )),
        LoopStatus::Cancelled { reason } => ActionOutcome::failed(reason.clone()),
        LoopStatus::Failed { error } => ActionOutcome::failed(error.to_string()),
        LoopStatus::ClientTools { calls } => ActionOutcome::failed(format!(
            "the agent called tools nobody runs here: {}",
            calls
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    result.tokens_used = Some(
        outcome
            .usage
            .input_tokens
            .saturating_add(outcome.usage.output_tokens),
    );
    // Refusals outrank the answer: the agent could not do all it was asked.
    let refused = |status| outcome.tool_calls.iter().find(|c| c.status == status);
    if let Some(denied) = refused(ToolStatus::Denied) {
        result.status = RunStatus::Failed;
        result.summary = Some(with_detail(
            &format!(
                "the agent's call of `{}` was denied by its policy",
                denied.tool
            ),
            result.summary.as_deref(),
        ));
    } else if let Some(declined) = refused(ToolStatus::Declined) {
        if result.status != RunStatus::Failed {
            result.status = RunStatus::Attention;
        }
        result.summary = Some(with_detail(
            &needs_approval(&declined.tool),
            result.summary.as_deref(),
        ));
    }
    result
}
