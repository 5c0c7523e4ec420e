//! Delegation: a turn hands tasks to sub-agents (`agent_delegate`), and a
//! job's turn splits its work into subtasks (`job_subtasks`); both are the
//! one mechanism here, [`Delegator::delegate`].
//!
//! A sub-agent is a child turn:
//! - its context is fresh: a system message (what a sub-agent is, or the
//!   named agent's whole prompt: its name and identity files) and the task;
//! - it runs on its parent's loop (provider, hooks, model settings), so
//!   its spend is its parent's, on its parent's cost line; a named agent
//!   lends its identity and its model, not its provider;
//! - it works in its parent's workspace, under its parent's policy, with
//!   the tools asked for that its parent may use (and, for a named agent,
//!   that agent has too): never more than its parent;
//! - its approval requests go to its parent's approver (the same person,
//!   through the same channel), labelled with the sub-agent;
//! - its model calls stop at `max_iterations` and at its budget, which
//!   counts against every budget above it;
//! - it is cancelled with its parent, and is recorded as a job of its own
//!   ([`JobScheduler::run_child`]): `cairn job` and the dashboard show it,
//!   its parent job (if its parent is a job's turn) or its origin
//!   `delegate:<session>` linking it to the turn that started it.
//!
//! Depth is limited (`agent.max_delegation_depth`: a person's or a job's
//! own turn is depth 0, its sub-agents depth 1, theirs depth 2), and a
//! turn's sub-agents run at most `agent.max_parallel_delegations` at once.

mod subtasks;
mod tool;
mod toolset;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use cairn_core::chat::ChatMessage;
use cairn_core::job::JobState;
use cairn_core::live::Live;
use cairn_llm::GenerationOptions;

use crate::agent_loop::{AgentLoop, Budget, ParentTurn};
use crate::cost_guard::format_dollars;
use crate::jobs::{ChildEnd, ChildTurn, JobScheduler, JobSpec, job_id_from_session};
use crate::prompt::{PromptContext, RuntimeInfo, SUBAGENT_NOTE, build_system_prompt_as};
use crate::tools::{ToolContext, ToolError};

pub use subtasks::{MAX_SUBTASKS, SubtasksTool};
pub use tool::DelegateTool;

/// Model calls a sub-agent may make when the call does not say.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// Micro-dollars in a cent.
const MICROS_PER_CENT: f64 = 10_000.0;

/// Limits and settings of delegation (`[agent]`), and what a named agent's
/// prompt needs from the configuration.
#[derive(Debug, Clone)]
pub struct DelegationConfig {
    /// Levels of sub-agents below a turn (`agent.max_delegation_depth`).
    pub max_depth: u32,
    /// Sub-agents one turn runs at once (`agent.max_parallel_delegations`).
    pub max_parallel: usize,
    /// The user sub-agents of a person's turn work for (`user.id`).
    pub owner: String,
    /// Host and operating system, for a named agent's prompt.
    pub runtime: RuntimeInfo,
    /// Skill directories besides the workspace's (`skills.paths`).
    pub skill_paths: Vec<PathBuf>,
}

impl DelegationConfig {
    /// The limits of `agent` for `owner`.
    pub fn from_agent(agent: &cairn_core::config::AgentConfig, owner: &str) -> Self {
        Self {
            max_depth: agent.max_delegation_depth,
            max_parallel: usize::try_from(agent.max_parallel_delegations)
                .unwrap_or(usize::MAX)
                .max(1),
            owner: owner.to_string(),
            runtime: RuntimeInfo {
                host: "unknown".into(),
                os: std::env::consts::OS.into(),
            },
            skill_paths: Vec::new(),
        }
    }
}

/// A configured agent a sub-agent may be (`agent_delegate`'s `agent`).
#[derive(Debug, Clone)]
pub struct AgentProfile {
    /// Its id (`main`, `family`, …).
    pub id: String,
    /// The name it uses for itself.
    pub name: String,
    /// Its workspace, where its identity files are.
    pub workspace: PathBuf,
    /// Its loop: its model, and its tools (a sub-agent has only those of
    /// them its parent may use too).
    pub agent: AgentLoop,
}

/// One sub-agent to run.
#[derive(Debug, Clone)]
pub struct Delegation {
    /// What it is to do: its whole context besides its system message.
    pub task: String,
    /// Its title in job listings (default: the task's first line).
    pub title: Option<String>,
    /// The configured agent it is, if any.
    pub agent: Option<String>,
    /// The tools asked for (names or globs); `None`: all its parent's.
    pub tools: Option<Vec<String>>,
    /// Model calls it may make.
    pub max_iterations: u32,
    /// What it may spend, in micro-dollars (inside any budget above it).
    pub budget_micros: Option<u64>,
}

impl Delegation {
    /// A task with the defaults: any tool of the parent's, 10 model calls, no budget of its own.
    pub fn new(task: impl Into<String>) -> Self {
        Self {
            task: task.into(),
            title: None,
            agent: None,
            tools: None,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            budget_micros: None,
        }
    }

    /// Reads a budget given in cents (a positive number).
    pub fn budget_from_cents(cents: f64) -> Result<u64, ToolError> {
        if !cents.is_finite() || cents <= 0.0 {
            return Err(ToolError::InvalidArguments(
                "`budget_cents` must be a number above 0".into(),
            ));
        }
        let micros = (cents * MICROS_PER_CENT).round();
        // Saturates past u64::MAX, which no budget reaches.
        Ok(micros as u64)
    }
}

/// How a sub-agent ended, ready for its parent.
#[derive(Debug)]
pub struct Delegated {
    /// Its record and its loop's outcome.
    pub end: ChildEnd,
    /// The tools asked for that it was not given.
    pub withheld: Vec<String>,
    /// How it was labelled (approvals, the usage line).
    pub label: String,
}

impl Delegated {
    /// Whether it answered.
    pub fn answered(&self) -> bool {
        self.end.record.state == JobState::Completed
    }

    /// Its answer or why it has none, then a line of usage (and the tools
    /// it was not given): the parent's tool result.
    pub fn report(&self) -> String {
        let job = &self.end.record;
        let mut text = match (&job.result, &job.error) {
            (Some(result), _) if self.answered() => result.clone(),
            (_, Some(error)) => format!("The sub-agent did not finish ({}): {error}", job.state),
            _ => format!("The sub-agent did not finish ({}).", job.state),
        };
        text.push_str(&format!(
            "\n\n[{}: {} model call{}, {} tokens in / {} out, {}; job {}]",
            self.label,
            job.iterations,
            if job.iterations == 1 { "" } else { "s" },
            job.input_tokens,
            job.output_tokens,
            format_dollars(job.cost_micros),
            job.id
        ));
        if !self.withheld.is_empty() {
            text.push_str(&format!(
                "\n[Not given to the sub-agent (its parent may not use them, or no tool has that name): {}.]",
                self.withheld.join(", ")
            ));
        }
        text
    }
}

/// Runs sub-agents; shared by `agent_delegate` and `job_subtasks`.
///
/// Sub-agents are recorded on the job scheduler, which is built after the
/// tools (it holds their runner): it is attached once built
/// ([`Delegator::attach`]), as are the configured agents
/// ([`Delegator::set_agents`]).
#[derive(Debug)]
pub struct Delegator {
    config: DelegationConfig,
    scheduler: OnceLock<JobScheduler>,
    agents: Live<Vec<AgentProfile>>,
}

impl Delegator {
    /// A delegator with these limits, no scheduler yet (delegations fail
    /// as unavailable until [`Delegator::attach`]) and no named agents.
    pub fn new(config: DelegationConfig) -> Self {
        Self {
            config,
            scheduler: OnceLock::new(),
            agents: Live::new(Arc::new(Vec::new())),
        }
    }

    /// Gives it the scheduler sub-agents are recorded on; only the first counts.
    pub fn attach(&self, scheduler: JobScheduler) {
        let _ = self.scheduler.set(scheduler);
    }

    /// The agents a sub-agent may be; a reload of `[[agents]]` gives them
    /// again (a delegation in progress keeps the one it took).
    pub fn set_agents(&self, agents: Vec<AgentProfile>) {
        self.agents.set(Arc::new(agents));
    }

    /// The limits.
    pub fn config(&self) -> &DelegationConfig {
        &self.config
    }

    fn scheduler(&self) -> Result<&JobScheduler, ToolError> {
        self.scheduler.get().ok_or_else(|| {
            ToolError::Unavailable("the job scheduler is not running in this process".into())
        })
    }

    fn profile(&self, id: &str) -> Result<AgentProfile, ToolError> {
        let agents = self.agents.get();
        agents.iter().find(|a| a.id == id).cloned().ok_or_else(|| {
            let known: Vec<&str> = agents.iter().map(|a| a.id.as_str()).collect();
            ToolError::InvalidArguments(if known.is_empty() {
                format!("no agent `{id}` is configured; leave `agent` out")
            } else {
                format!(
                    "no agent `{id}` is configured; the agents are: {}",
                    known.join(", ")
                )
            })
        })
    }

    /// The turn a call runs in, if it may start a sub-agent: refused outside
    /// a turn and past the depth limit.
    pub fn parent_of<'a>(&self, ctx: &'a ToolContext) -> Result<&'a Arc<ParentTurn>, ToolError> {
        let parent = ctx.parent.as_ref().ok_or_else(|| {
            ToolError::NotPermitted(
                "sub-agents are started only from an agent's turn (a conversation, a job or a routine)"
                    .into(),
            )
        })?;
        let depth = parent.depth() + 1;
        let max = self.config.max_depth;
        if depth > max {
            return Err(ToolError::NotPermitted(if max == 0 {
                "delegation is off (agent.max_delegation_depth = 0); do the work here".into()
            } else {
                format!(
                    "a sub-agent here would be at depth {depth}, deeper than agent.max_delegation_depth = {max}; \
                     do the work here instead of delegating it"
                )
            }));
        }
        Ok(parent)
    }

    /// Runs one sub-agent of the turn `ctx` belongs to and returns how it
    /// ended; waits for one of the turn's sub-agent slots first.
    pub async fn delegate(
        &self,
        delegation: Delegation,
        ctx: &ToolContext,
    ) -> Result<Delegated, ToolError> {
        let parent = Arc::clone(self.parent_of(ctx)?);
        let scheduler = self.scheduler()?.clone();
        let profile = match &delegation.agent {
            Some(id) => Some(self.profile(id)?),
            None => None,
        };
        let (runner, withheld) = toolset::child_runner(
            parent.agent().runner(),
            &ctx.session_id,
            delegation.tools.as_deref(),
            profile.as_ref().map(|p| p.agent.runner().as_ref()),
        )?;
        let agent = child_loop(&parent, &delegation, profile.as_ref(), runner);
        // A slot first, before anything that waits: the turn's sub-agents
        // take the slots in the order they were asked for.
        let slots = parent.child_slots(self.config.max_parallel);
        let permit = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            permit = slots.acquire_owned() => permit
                .map_err(|_| ToolError::Failed("the sub-agent slots are closed".into()))?,
        };
        let system = match profile {
            Some(profile) => self.named_prompt(&profile, &agent, ctx).await,
            None => crate::prompt::subagent_prompt(
                &ctx.workspace,
                &agent.runner().on_demand_listing(),
                ctx.timezone,
                ctx.now(),
            ),
        };
        let label = label(&delegation);
        let parent_job = job_id_from_session(&ctx.session_id);
        let owner = match parent_job {
            Some(id) => match scheduler.get(id).await {
                Ok(Some(job)) => job.owner,
                _ => self.config.owner.clone(),
            },
            None => self.config.owner.clone(),
        };
        let mut spec = JobSpec::from_description(delegation.task.clone(), owner)
            .with_origin(format!("delegate:{}", ctx.session_id))
            .with_max_iterations(delegation.max_iterations);
        if let Some(title) = delegation.title.as_ref().filter(|t| !t.trim().is_empty()) {
            spec.title.clone_from(title);
        }
        if let Some(id) = &delegation.agent {
            spec.title = format!("{id}: {}", spec.title);
        }
        // Stopped when this call is dropped (its time limit), as when its turn is cancelled.
        let stop = ctx.cancel.child_token();
        let mut child_ctx = ctx.clone().with_cancel(stop.clone());
        child_ctx.parent = Some(Arc::clone(&parent));
        let turn = ChildTurn {
            agent,
            approver: parent.approver_for(&label),
            messages: vec![
                ChatMessage::system(system),
                ChatMessage::user(delegation.task),
            ],
            ctx: child_ctx,
        };
        let policy = parent.agent().runner().policy();
        let guard = stop.drop_guard();
        // Its own task: a dropped call must not leave its record running.
        let running = tokio::spawn(async move {
            let end = scheduler.run_child(spec, parent_job, turn).await;
            drop(permit);
            end
        });
        let end = running
            .await
            .map_err(|e| ToolError::Failed(format!("the sub-agent's task failed: {e}")))?
            .map_err(|e| ToolError::Failed(format!("cannot run the sub-agent: {e}")))?;
        drop(guard.disarm());
        // Its "always" answers end with it.
        policy.forget_session(&crate::jobs::job_session_id(end.record.id));
        Ok(Delegated {
            end,
            withheld,
            label,
        })
    }

    /// A named agent's system prompt, as it would have it in its parent's
    /// workspace with the sub-agent's tools.
    async fn named_prompt(
        &self,
        profile: &AgentProfile,
        agent: &AgentLoop,
        ctx: &ToolContext,
    ) -> String {
        let prompt = build_system_prompt_as(
            &PromptContext {
                agent_name: profile.name.clone(),
                workspace: ctx.workspace.clone(),
                timezone: ctx.timezone,
                now: ctx.now(),
                model: agent.model().to_string(),
                tools: agent.runner().definitions(),
                more_tools: agent.runner().on_demand_listing(),
                runtime: self.config.runtime.clone(),
                skill_paths: self.config.skill_paths.clone(),
            },
            &profile.workspace,
        )
        .await;
        format!("{prompt}\n## Sub-agent\n\n{SUBAGENT_NOTE}\n")
    }
}

/// The sub-agent's loop: its parent's provider, hooks and model settings,
/// with its own tools, limit and budget (and a named agent's model).
fn child_loop(
    parent: &ParentTurn,
    delegation: &Delegation,
    profile: Option<&AgentProfile>,
    runner: Arc<crate::runner::ToolRunner>,
) -> AgentLoop {
    let above = parent.agent();
    let mut config = above.config().clone();
    // Never more model calls than its parent may make.
    config.max_iterations = delegation.max_iterations.min(config.max_iterations).max(1);
    // A caller's per-request settings (forced tool choice, its own tools) were the parent's.
    config.options = GenerationOptions::default();
    config.client_tools = Vec::new();
    if let Some(model) = profile.and_then(|p| p.agent.config().model.clone()) {
        config.model = Some(model);
    }
    let budget = Budget::new(delegation.budget_micros, Some(Arc::clone(parent.budget())));
    above
        .with_config(config)
        .with_runner(runner)
        .with_budget(Arc::new(budget))
}

/// How approvals and the usage line name a sub-agent.
fn label(delegation: &Delegation) -> String {
    const SHOWN: usize = 40;
    let first = delegation.task.trim().lines().next().unwrap_or_default();
    let mut task: String = first.chars().take(SHOWN).collect();
    if first.chars().count() > SHOWN {
        task.push('…');
    }
    match &delegation.agent {
        Some(id) => format!("sub-agent {id} \u{b7} \"{task}\""),
        None => format!("sub-agent \u{b7} \"{task}\""),
    }
}
