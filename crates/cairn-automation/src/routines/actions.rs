//! [`AgentActions`]: the [`ActionExecutor`] that carries out routine actions
//! with cairn's LLM providers, tool runner and job scheduler.
//!
//! - `lightweight`: one call on the cheap provider with the prompt, the
//!   `context_paths` files (relative to the workspace; paths leaving it,
//!   links, hard-linked and special files are refused, each file capped at
//!   [`CONTEXT_FILE_CHARS`]), the routine's
//!   state (`routines/{name}/state.md` and its JSON state) and the fire (trigger,
//!   detail, payload). A reply of only `ROUTINE_OK` is `ok`; anything else is
//!   `attention` with the reply as summary.
//! - `full_job`: a job under the [`JobScheduler`] (origin `routine:{name}`),
//!   whose id is put on the run as soon as it exists. A final answer of only
//!   `ROUTINE_OK` is `ok`, any other answer `attention`, a failed job `failed`.
//! - `tool_call`: one call through [`ToolRunner::run`] under session
//!   `routine:{name}`; success is `ok` with the (capped) output.
//! - `notification`: `ok`, with the message as a [`Notice`].
//! - `watch`: a watcher's check (see [`super::watch`]).
//! - `system`: the [`SystemTask`] registered under the task's name
//!   ([`with_system_task`](AgentActions::with_system_task)).
//!
//! A routine with `agent: ID` (not `main`) does each of these as that agent
//! ([`super::as_agent`]): its model, its tools under its policy, its
//! workspace; its `full_job` is one turn of its own loop. An agent this
//! executor was not given fails the run, naming it: it never runs as `main`.
//!
//! **Unattended approvals.** A tool the policy asks about runs if the action
//! lists it in `allowed_tools`; otherwise the owner is asked at the approval
//! desk (`agent.approval_channel`) when there is one, and a call nobody
//! approved is declined and the run is `attention`, naming the tool. A
//! policy denial stays a denial (`failed`, naming the tool) whatever the list.
//! A list naming `shell` fails the run where commands cannot be confined,
//! unless the owner allowed unconfined runs ([`super::define::unconfined_shell`]).
//!
//! **State convention.** A lightweight reply may carry a fenced block opened
//! by ```` ```state ```` and closed by ```` ``` ````. Its content replaces
//! `routines/{name}/state.md`, and it is removed from the reply before the
//! reply is judged, so `ROUTINE_OK` plus a state block is still `ok`. When the
//! content is a JSON object it also becomes the routine's JSON state; any other
//! text leaves the JSON state as it was (the file holds the text). A
//! `full_job` may write the file with its file tools; its path is in the job's
//! instructions.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cairn_agent::JobScheduler;
use cairn_agent::jobs::{JobSpec, JobState};
use cairn_agent::nofollow::{FsError, Tree};
use cairn_agent::runner::{ToolRunner, ToolStatus};
use cairn_agent::tools::ToolContext;
use cairn_core::chat::{ChatMessage, ToolCall};
use cairn_core::clock::Clock;
use cairn_core::live::Live;
use cairn_core::routine::{MAIN_AGENT, RoutineAction, RunStatus};
use cairn_llm::{ChatRequest, LlmProvider};
use cairn_store::Store;

use super::action::{ActionExecutor, ActionOutcome, ActionRequest, FireContext, Notice};
use super::as_agent::{self, RoutineAgent};
use super::system::{SystemTask, SystemTasks};
pub use super::unattended::Unattended;
use crate::inbound::desk::ApprovalDesk;

/// The reply that means "nothing to report".
pub const ROUTINE_OK: &str = "ROUTINE_OK";

/// Characters of one context file (or of the state file) given to the model.
pub const CONTEXT_FILE_CHARS: usize = 16_000;

/// Characters of a fire's payload given to the model.
const PAYLOAD_CHARS: usize = 8_000;

/// Characters of a tool's output kept as the run's summary.
const TOOL_SUMMARY_CHARS: usize = 2_000;

/// The system prompt of a lightweight call.
const LIGHTWEIGHT_SYSTEM: &str = "You are cairn, a personal AI agent, running a routine on your \
own: nobody is watching and you have no tools. Do what the routine asks with the context given. \
If nothing needs the person's attention, reply with exactly ROUTINE_OK and nothing else. \
Otherwise reply with a short message telling them what they need to know. To replace the \
routine's state (what you want to remember for the next run), add a block that starts with a \
line ```state and ends with a line ```; a JSON object there also becomes the routine's JSON state.";

/// Carries out routine actions with the providers, tools and jobs it was given.
pub struct AgentActions {
    store: Store,
    workspace: PathBuf,
    clock: Arc<dyn Clock>,
    llm: Option<Llm>,
    tools: Option<(Arc<ToolRunner>, ToolContext)>,
    jobs: Option<Arc<JobScheduler>>,
    system: SystemTasks,
    /// The agents other than `main` routines may run as, by id (a reload
    /// of `[[agents]]` replaces them).
    agents: Live<RoutineAgents>,
    desk: Option<ApprovalDesk>,
}

/// The agents other than `main` routines may run as, by id.
pub type RoutineAgents = BTreeMap<String, Arc<RoutineAgent>>;

struct Llm {
    main: Arc<dyn LlmProvider>,
    cheap: Arc<dyn LlmProvider>,
}

impl std::fmt::Debug for AgentActions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentActions")
            .field("workspace", &self.workspace)
            .field(
                "llm",
                &self
                    .llm
                    .as_ref()
                    .map(|l| (l.main.model().to_string(), l.cheap.model().to_string())),
            )
            .field("tools", &self.tools.is_some())
            .field("jobs", &self.jobs.is_some())
            .field("system", &self.system)
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

impl AgentActions {
    /// Actions over a store and a workspace with nothing else configured:
    /// `notification` works, the others fail saying what is missing.
    pub fn new(store: Store, workspace: impl Into<PathBuf>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            workspace: workspace.into(),
            clock,
            llm: None,
            tools: None,
            jobs: None,
            system: SystemTasks::default(),
            agents: Live::new(Arc::new(BTreeMap::new())),
            desk: None,
        }
    }

    /// The agent `id` (not `main`): routines with `agent: ID` run as it.
    #[must_use]
    pub fn with_agent(self, id: impl Into<String>, agent: RoutineAgent) -> Self {
        let mut agents = (*self.agents.get()).clone();
        agents.insert(id.into(), Arc::new(agent));
        self.agents.set(Arc::new(agents));
        self
    }

    /// Reads the agents from `agents`, which a reload of `[[agents]]`
    /// replaces (a run keeps the agent it started with).
    #[must_use]
    pub fn with_agent_set(mut self, agents: Live<RoutineAgents>) -> Self {
        self.agents = agents;
        self
    }

    /// Registers the system task `system` routines named `name` run.
    #[must_use]
    pub fn with_system_task(mut self, name: impl Into<String>, task: Arc<dyn SystemTask>) -> Self {
        self.system.register(name, task);
        self
    }

    /// The providers: `lightweight` calls `cheap` (pass `main` again when no
    /// cheap model is configured).
    #[must_use]
    pub fn with_llm(mut self, main: Arc<dyn LlmProvider>, cheap: Arc<dyn LlmProvider>) -> Self {
        self.llm = Some(Llm { main, cheap });
        self
    }

    /// The tool runner (registry + policy) and the base context `tool_call` uses.
    #[must_use]
    pub fn with_tools(mut self, runner: Arc<ToolRunner>, ctx: ToolContext) -> Self {
        self.tools = Some((runner, ctx));
        self
    }

    /// The scheduler `full_job` submits to.
    #[must_use]
    pub fn with_jobs(mut self, jobs: Arc<JobScheduler>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// `lightweight` as `main`: on the cheap model, in `main`'s workspace.
    async fn lightweight(
        &self,
        request: &ActionRequest,
        prompt: &str,
        context_paths: &[String],
        max_tokens: Option<u32>,
    ) -> ActionOutcome {
        let Some(llm) = &self.llm else {
            return ActionOutcome::failed(
                "no LLM provider is configured; this routine's `lightweight` action needs one \
                 (set CAIRN_LLM_PROVIDER, or `llm.provider` in the config)",
            );
        };
        let light = Light {
            provider: &llm.cheap,
            model: None,
            workspace: &self.workspace,
        };
        self.light_call(request, &light, prompt, context_paths, max_tokens)
            .await
    }

    /// One call with the prompt, the context files and the routine's state,
    /// as `light` says.
    pub(super) async fn light_call(
        &self,
        request: &ActionRequest,
        light: &Light<'_>,
        prompt: &str,
        context_paths: &[String],
        max_tokens: Option<u32>,
    ) -> ActionOutcome {
        let workspace = light.workspace;
        let routine = &request.routine;
        let name = &routine.spec.name;
        let mut user = format!("Routine `{name}`: {prompt}\n");
        for path in context_paths {
            let text = context_file(workspace, path).await;
            user.push_str(&format!("\n## Context file `{path}`\n{text}\n"));
        }
        let state_md = match read_capped(workspace, Path::new(&state_rel(name))).await {
            Ok(Some(text)) => text,
            Ok(None) => "(none yet)".to_string(),
            Err(e) => format!("(not read: {e})"),
        };
        user.push_str(&format!(
            "\n## Routine state (`{}`)\n{state_md}\n",
            state_rel(name),
        ));
        user.push_str(&format!(
            "\n## Routine JSON state\n{}\n",
            routine.runtime.state
        ));
        user.push_str(&fire_text(&request.fire, self.clock.now()));

        let chat = ChatRequest {
            max_tokens,
            model: light.model.clone(),
            ..ChatRequest::new(vec![
                ChatMessage::system(LIGHTWEIGHT_SYSTEM),
                ChatMessage::user(user),
            ])
        };
        let response = tokio::select! {
            biased;
            () = request.cancel.cancelled() => return ActionOutcome::failed("cancelled before the LLM answered"),
            response = light.provider.complete(&chat) => response,
        };
        let response = match response {
            Ok(response) => response,
            Err(error) => return ActionOutcome::failed(error.to_string()),
        };
        let tokens = response
            .usage
            .input_tokens
            .saturating_add(response.usage.output_tokens);
        let (reply, state_block) = split_state(&response.text);
        let mut state = None;
        let mut problem = None;
        if let Some(content) = state_block {
            if let Err(error) = write_state(workspace, name, &content).await {
                problem = Some(format!("(could not write {}: {error})", state_rel(name)));
            }
            state = serde_json::from_str::<serde_json::Value>(&content)
                .ok()
                .filter(serde_json::Value::is_object);
        }
        let mut outcome = if is_routine_ok(&reply) && problem.is_none() {
            ActionOutcome::new(RunStatus::Ok, ROUTINE_OK)
        } else {
            let mut summary = reply.trim().to_string();
            if let Some(problem) = problem {
                summary = format!("{summary}\n{problem}").trim().to_string();
            }
            ActionOutcome::new(RunStatus::Attention, summary)
        };
        outcome.tokens_used = Some(tokens);
        outcome.state = state;
        outcome
    }

    async fn full_job(
        &self,
        request: &ActionRequest,
        title: &str,
        description: &str,
        max_iterations: Option<u32>,
        allowed_tools: &[String],
    ) -> ActionOutcome {
        let Some(jobs) = &self.jobs else {
            return ActionOutcome::failed(
                "no job scheduler is configured (it needs an LLM provider: set CAIRN_LLM_PROVIDER); \
                 this routine's `full_job` action cannot run",
            );
        };
        let routine = &request.routine;
        let name = &routine.spec.name;
        let instructions = self.job_instructions(request, description);
        let mut spec = JobSpec::new(title, instructions, routine.user_id.clone())
            .with_origin(format!("routine:{name}"))
            .with_allowed_tools(allowed_tools.iter().cloned());
        if let Some(n) = max_iterations {
            spec = spec.with_max_iterations(n);
        }
        let handle = match jobs.submit(spec).await {
            Ok(handle) => handle,
            Err(error) => {
                return ActionOutcome::failed(format!("could not start the job: {error}"));
            }
        };
        let job_id = handle.id();
        if let Err(error) = self.store.set_run_job(request.run_id, job_id).await {
            tracing::warn!(run = %request.run_id, job = %job_id, %error, "could not put the job on the run");
        }
        let waiting = handle.clone().wait();
        tokio::pin!(waiting);
        let record = tokio::select! {
            record = &mut waiting => record,
            () = request.cancel.cancelled() => {
                if let Err(error) = jobs.cancel(job_id).await {
                    tracing::warn!(job = %job_id, %error, "could not cancel the routine's job");
                }
                waiting.await
            }
        };
        let mut outcome = match record {
            Err(error) => {
                ActionOutcome::failed(format!("the job {job_id} did not finish: {error}"))
            }
            Ok(record) => {
                let mut outcome = match record.state {
                    JobState::Completed => {
                        let answer = record.result.clone().unwrap_or_default();
                        if is_routine_ok(&answer) {
                            ActionOutcome::new(RunStatus::Ok, ROUTINE_OK)
                        } else {
                            ActionOutcome::new(RunStatus::Attention, answer.trim())
                        }
                    }
                    state => ActionOutcome::failed(format!(
                        "the job {}: {}",
                        state.as_str(),
                        record.error.as_deref().unwrap_or("no reason given")
                    )),
                };
                let tokens = record.input_tokens.saturating_add(record.output_tokens);
                outcome.tokens_used = Some(tokens);
                outcome
            }
        };
        // Refusals outrank the answer: the job could not do all it was asked.
        let refused = handle.refused_tools();
        if let Some(denied) = refused.iter().find(|r| r.status == ToolStatus::Denied) {
            outcome.status = RunStatus::Failed;
            outcome.summary = Some(with_detail(
                &format!(
                    "the job's call of `{}` was denied by the policy",
                    denied.tool
                ),
                outcome.summary.as_deref(),
            ));
        } else if let Some(declined) = refused.first() {
            if outcome.status != RunStatus::Failed {
                outcome.status = RunStatus::Attention;
            }
            outcome.summary = Some(with_detail(
                &needs_approval(&declined.tool),
                outcome.summary.as_deref(),
            ));
        }
        outcome.job_id = Some(job_id);
        outcome
    }

    /// A job's instructions: the description, the routine's note (its
    /// state file, `ROUTINE_OK`) and the fire.
    pub(super) fn job_instructions(&self, request: &ActionRequest, description: &str) -> String {
        let name = &request.routine.spec.name;
        format!(
            "{description}\n\n(This job runs for the routine `{name}`. Its state file is `{}` in \
             the workspace; update it if the next run should know something. If nothing needs \
             the person's attention, give exactly ROUTINE_OK as your final answer.)\n{}",
            state_rel(name),
            fire_text(&request.fire, self.clock.now())
        )
    }

    async fn tool_call(
        &self,
        request: &ActionRequest,
        tool: &str,
        params: &serde_json::Value,
        allowed_tools: &[String],
    ) -> ActionOutcome {
        let Some((runner, base)) = &self.tools else {
            return ActionOutcome::failed(format!(
                "no tools are configured; this routine's `tool_call` action cannot run `{tool}`"
            ));
        };
        let desk = self.desk.as_ref();
        tool_call(runner, base, request, tool, params, allowed_tools, desk).await
    }

    /// Where unattended approvals are asked (`agent.approval_channel`).
    #[must_use]
    pub fn with_desk(mut self, desk: ApprovalDesk) -> Self {
        self.desk = Some(desk);
        self
    }

    /// The approval desk, when there is one.
    pub(super) fn desk(&self) -> Option<&ApprovalDesk> {
        self.desk.as_ref()
    }

    /// Why a routine of `agent`, which this executor was not given, is not run.
    fn missing_agent(&self, agent: &str) -> String {
        let why = if self.llm.is_none() {
            "no LLM provider is configured, and agents other than main run only with one"
        } else {
            "it is not in [[agents]] (removed since the routine was written?)"
        };
        format!(
            "this routine runs as agent \"{agent}\", which is not here: {why}; not run (as \
             {MAIN_AGENT} or otherwise): configure the agent, or change the routine's `agent`"
        )
    }
}

/// The model a `lightweight` action calls, and the workspace its files are in.
pub(super) struct Light<'a> {
    pub(super) provider: &'a Arc<dyn LlmProvider>,
    /// The model to ask (`None`: the provider's own).
    pub(super) model: Option<String>,
    pub(super) workspace: &'a Path,
}

/// `tool_call`: one call of `tool` through `runner` in `base`'s workspace,
/// approved by the routine's `allowed_tools` only.
pub(super) async fn tool_call(
    runner: &Arc<ToolRunner>,
    base: &ToolContext,
    request: &ActionRequest,
    tool: &str,
    params: &serde_json::Value,
    allowed_tools: &[String],
    desk: Option<&ApprovalDesk>,
) -> ActionOutcome {
    let name = &request.routine.spec.name;
    let mut ctx = base.clone().with_cancel(request.cancel.clone());
    ctx.session_id = format!("routine:{name}");
    let approver = Unattended::new(runner, allowed_tools).asking(desk, name);
    let call = ToolCall {
        id: request.run_id.to_string(),
        name: tool.to_string(),
        arguments: params.clone(),
    };
    let result = runner.run(&call, &ctx, &approver).await;
    match result.status {
        ToolStatus::Success => {
            ActionOutcome::new(RunStatus::Ok, cap(&result.content, TOOL_SUMMARY_CHARS))
        }
        ToolStatus::Declined => {
            ActionOutcome::new(RunStatus::Attention, needs_approval(&result.tool))
        }
        ToolStatus::Denied => ActionOutcome::failed(format!(
            "`{}` was refused: {}",
            result.tool,
            cap(&result.content, TOOL_SUMMARY_CHARS)
        )),
        status => ActionOutcome::failed(format!(
            "`{}` {}: {}",
            result.tool,
            status.as_str().replace('_', " "),
            cap(&result.content, TOOL_SUMMARY_CHARS)
        )),
    }
}

/// `notification`: `ok`, the message delivered whatever `notify` says.
pub(super) fn notification(message: &str, title: &Option<String>) -> ActionOutcome {
    let mut outcome = ActionOutcome::new(RunStatus::Ok, message);
    outcome.notice = Some(Notice {
        title: title.clone(),
        body: message.to_string(),
    });
    outcome
}

/// Replaces `routines/{name}/state.md` in `workspace` (a link there is
/// replaced, never written through).
async fn write_state(workspace: &Path, name: &str, content: &str) -> Result<(), FsError> {
    let rel = PathBuf::from(state_rel(name));
    let content = content.to_string();
    // The workspace is opened only through the no-follow walk.
    Tree::new(workspace)
        .run(move |tree| tree.write(&rel, content.as_bytes()))
        .await
        .map(drop)
}

/// A context file's text, or a note saying why it is not there.
async fn context_file(workspace: &Path, path: &str) -> String {
    let relative = Path::new(path);
    let escapes = relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes || path.trim().is_empty() {
        return "(refused: context paths must be relative and stay inside the workspace)"
            .to_string();
    }
    // A link (which may lead outside), hard link or special file is refused.
    match read_capped(workspace, relative).await {
        Ok(Some(text)) => text,
        Ok(None) => "(missing: no such file in the workspace)".to_string(),
        Err(e) if e.is_refusal() => format!("(refused: {e})"),
        Err(e) => format!("(unreadable: {e})"),
    }
}

/// The text of the file `rel` of `workspace`, capped at [`CONTEXT_FILE_CHARS`].
async fn read_capped(workspace: &Path, rel: &Path) -> Result<Option<String>, FsError> {
    // Four bytes a character at most, and one more to know it goes on.
    let limit = u64::try_from(4 * CONTEXT_FILE_CHARS + 1).unwrap_or(u64::MAX);
    let rel = rel.to_path_buf();
    let bytes = Tree::new(workspace)
        .run(move |tree| tree.read(&rel, limit))
        .await?;
    Ok(bytes.map(|b| cap(&String::from_utf8_lossy(&b), CONTEXT_FILE_CHARS)))
}

#[async_trait]
impl ActionExecutor for AgentActions {
    /// Each action's future is boxed where it is awaited: this one is
    /// boxed whole per run (`async_trait`) and moved at its size, which
    /// was the largest action's (4,224 bytes a run of any kind; 312 now).
    async fn execute(&self, request: ActionRequest) -> ActionOutcome {
        if let Some(problem) = super::define::unconfined_shell(&request.routine.spec) {
            return ActionOutcome::failed(problem.to_string());
        }
        let agent = request.routine.spec.agent_id();
        if agent != MAIN_AGENT {
            let parts = self.agents.get().get(agent).cloned();
            return match parts {
                Some(parts) => Box::pin(as_agent::execute(self, &parts, &request)).await,
                None => ActionOutcome::failed(self.missing_agent(agent)),
            };
        }
        match &request.routine.spec.action {
            RoutineAction::Lightweight {
                prompt,
                context_paths,
                max_tokens,
            } => Box::pin(self.lightweight(&request, prompt, context_paths, *max_tokens)).await,
            RoutineAction::FullJob {
                title,
                description,
                max_iterations,
                allowed_tools,
            } => {
                Box::pin(self.full_job(
                    &request,
                    title,
                    description,
                    *max_iterations,
                    allowed_tools,
                ))
                .await
            }
            RoutineAction::ToolCall {
                tool,
                params,
                allowed_tools,
            } => Box::pin(self.tool_call(&request, tool, params, allowed_tools)).await,
            RoutineAction::Notification { message, title } => notification(message, title),
            RoutineAction::Watch { tool, .. } => match &self.tools {
                Some((runner, base)) => Box::pin(super::watch::check(runner, base, &request)).await,
                None => ActionOutcome::failed(format!(
                    "no tools are configured; this watcher cannot check `{tool}`"
                )),
            },
            RoutineAction::System { task } => Box::pin(self.system.run(task, &request)).await,
        }
    }
}

pub(super) fn needs_approval(tool: &str) -> String {
    format!(
        "`{tool}` needs approval and nobody is there to give it; add it to allowed_tools if this \
         routine may run it"
    )
}

pub(super) fn with_detail(head: &str, detail: Option<&str>) -> String {
    match detail.map(str::trim).filter(|d| !d.is_empty()) {
        Some(detail) => format!("{head}\n\n{detail}"),
        None => head.to_string(),
    }
}

fn state_rel(name: &str) -> String {
    format!("routines/{name}/state.md")
}

fn fire_text(fire: &FireContext, now: chrono::DateTime<chrono::Utc>) -> String {
    let mut text = format!(
        "\n## This run\nTrigger: {}\nNow: {}\n",
        fire.trigger_type,
        now.to_rfc3339()
    );
    if let Some(detail) = &fire.detail {
        text.push_str(&format!("Detail: {detail}\n"));
    }
    if let Some(slot) = fire.scheduled_for {
        text.push_str(&format!("Scheduled for: {}\n", slot.to_rfc3339()));
    }
    if let Some(payload) = &fire.payload {
        text.push_str(&format!(
            "Payload (JSON):\n{}\n",
            cap(&payload.to_string(), PAYLOAD_CHARS)
        ));
    }
    text
}

/// At most `limit` characters, saying so when cut.
fn cap(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_string()
    } else {
        let kept: String = text.chars().take(limit).collect();
        format!("{kept}\n[… cut at {limit} characters]")
    }
}

/// Whether a reply means "nothing to report": `ROUTINE_OK` alone, allowing
/// whitespace, backticks and a final period around it.
pub fn is_routine_ok(reply: &str) -> bool {
    reply.trim().trim_matches('`').trim_end_matches('.').trim() == ROUTINE_OK
}

/// Splits a reply into its text without the first ```` ```state ```` block,
/// and that block's content (see the module doc). An unclosed block is not
/// a state block: the reply is returned as it was.
pub fn split_state(reply: &str) -> (String, Option<String>) {
    let lines: Vec<&str> = reply.lines().collect();
    let Some(open) = lines.iter().position(|l| l.trim() == "```state") else {
        return (reply.to_string(), None);
    };
    let Some(close) = lines[open + 1..].iter().position(|l| l.trim() == "```") else {
        return (reply.to_string(), None);
    };
    let close = open + 1 + close;
    let content = lines[open + 1..close].join("\n");
    let text: Vec<&str> = lines[..open]
        .iter()
        .chain(&lines[close + 1..])
        .copied()
        .collect();
    (text.join("\n"), Some(content))
}
