//! Turning the configuration into running parts: LLM providers, tools and
//! policy, the agent loop, sessions and the chat service. One place, so
//! `chat`, `job`, the daemon and `doctor` build things the same way.
//!
//! Split by part: [`llm`] (providers, embeddings), [`tools`] (tool policy,
//! sandbox, MCP, hooks), [`automation`] (notifications, routines, the
//! engine), [`channels`] (inbound chat channels), [`memory`]; this file assembles the runtime and chat service.

mod agents;
mod agents_reload;
mod automation;
mod channels;
mod leaks;
mod llm;
mod memory;
mod reload;
mod tools;

pub use agents::*;
pub use agents_reload::*;
pub use automation::*;
pub use channels::*;
pub use leaks::*;
pub use llm::*;
pub use memory::*;
pub use reload::*;
pub use tools::*;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_agent::chat::{ChatService, ChatSettings};
use cairn_agent::delegation::{DelegateTool, Delegator, SubtasksTool};
use cairn_agent::jobs::{JobScheduler, JobsConfig};
use cairn_agent::memory::MemoryService;
use cairn_agent::memory::tools::memory_tools;
use cairn_agent::prompt::{PromptContext, RuntimeInfo, build_system_prompt};
use cairn_agent::repair::{RepairNotifier, ToolHealth};
use cairn_agent::routing::ModelRouter;
use cairn_agent::session::SessionManager;
use cairn_agent::tools::{ToolContext, ToolsConfig};
use cairn_agent::{AgentLoop, Compactor, ContextMonitor, CostGuard, GuardedProvider, HookRegistry};
use cairn_automation::inbound::desk::ApprovalDesk;
use cairn_automation::notify::{Notifier, owner_id};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_automation::primitives::parallel::RunParallelTool;
use cairn_automation::primitives::schedule::schedule_tools;
use cairn_automation::primitives::send::SendNotificationTool;
use cairn_automation::primitives::watch::Watchers;
use cairn_automation::routines::actions::RoutineAgents;
use cairn_automation::routines::link::EngineLink;
use cairn_automation::routines::ops_tools::routine_ops_tools;
use cairn_automation::routines::tools::routine_tools;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::{Config, Section};
use cairn_core::live::Live;
use cairn_llm::{LlmSettings, Providers, ReloadableProvider, build_providers};
use cairn_mcp::McpClients;
use cairn_store::Store;

use crate::exit::BadInput;

/// How often idle sessions are looked for.
pub const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Deserializes a free-form config table, naming the file, line and key on error.
pub fn section<T: serde::de::DeserializeOwned>(
    config: &Config,
    key: &str,
    section: &Section,
) -> anyhow::Result<T> {
    serde_json::from_value(section.value.clone()).map_err(|e| {
        BadInput(format!(
            "{}:{}: {key}: {e}",
            config_file(config),
            section.line
        ))
        .into()
    })
}

/// The config file's path as errors name it (empty when there is none).
pub(super) fn config_file(config: &Config) -> String {
    config
        .settings
        .file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Problems of a free-form table as one bad-input error, each line
/// prefixed with the file and the table's line.
pub(super) fn located(
    config: &Config,
    section: Option<&Section>,
    problems: &[String],
) -> anyhow::Error {
    let file = config
        .settings
        .file
        .as_ref()
        .map(|p| format!("{}:{}: ", p.display(), section.map_or(0, |s| s.line)))
        .unwrap_or_default();
    let lines: Vec<String> = problems.iter().map(|e| format!("{file}{e}")).collect();
    BadInput(lines.join("\n")).into()
}

/// Why a free-form table's entry is unavailable: each unset variable with
/// the file, the table's line and the key (`config.toml:12:
/// channels.phone.bot_token: environment variable TG_TOKEN is not set`).
pub(super) fn unset_reason(
    config: &Config,
    section: Option<&Section>,
    unset: &[cairn_core::config::expand::UnsetVariable],
) -> String {
    let origin = format!("{}:{}", config_file(config), section.map_or(0, |s| s.line));
    let reasons: Vec<String> = unset
        .iter()
        .map(|u| {
            cairn_core::config::Unavailable {
                origin: origin.clone(),
                key: u.key.clone(),
                variable: u.variable.clone(),
            }
            .to_string()
        })
        .collect();
    reasons.join("; ")
}

/// Self-repair's notifications through the notifications router.
struct RouterNotifier(Notifier, Arc<dyn Clock>);

#[async_trait::async_trait]
impl RepairNotifier for RouterNotifier {
    async fn notify(&self, notification: cairn_core::notification::NewNotification) {
        if let Err(error) = self.0.send(notification, self.1.now()).await {
            tracing::warn!(%error, "could not record a self-repair notification");
        }
    }
}

/// The running parts shared by every front end of one process.
pub struct Runtime {
    /// The database.
    pub store: Store,
    /// The main and cheap providers, both behind the cost guard.
    pub providers: Providers,
    /// The `[tools]` configuration.
    pub tools: ToolsConfig,
    /// The agent loop over the main provider.
    pub agent: AgentLoop,
    /// Background jobs (started; shut it down before exit).
    pub jobs: Arc<JobScheduler>,
    /// Reaches the routine engine once attached: chat messages fire event
    /// routines, the `routine_fire` tool fires routines.
    pub link: Arc<EngineLink>,
    /// This process's background tasks (`background_run`); started.
    pub background: Arc<BackgroundTasks>,
    /// The notification router every part of this runtime sends through
    /// (one instance, so a reload reaches them all).
    pub notifier: Notifier,
    /// The owner's memory (recall before turns, the memory tools).
    pub memory: Arc<MemoryService>,
    /// The MCP servers whose tools the agent has (started as configured;
    /// a reload replaces the set).
    pub mcp: Live<McpClients>,
    /// Routes chat turns by the class of the message (`[routing]`; no
    /// rules: every turn to the main model).
    pub router: Live<ModelRouter>,
    /// What a configuration reload replaces while running ([`register_reloads`]).
    pub reloadable: Reloadable,
    /// The agents other than `main` (`[[agents]]`); a reload of the
    /// table replaces them ([`register_agent_reload`]), as it does the
    /// ids routines may name and the routine engine's agents.
    pub agents: Live<Vec<AgentRun>>,
    /// The agents routines may run as, `main` first (every routine
    /// service of this runtime reads them).
    pub agent_ids: Live<Vec<String>>,
    /// The agents other than `main` the routine engine runs routines as.
    pub routine_agents: Live<RoutineAgents>,
    /// Runs `agent_delegate`'s sub-agents, told the agents there are.
    pub delegator: Arc<Delegator>,
    /// Where turns nobody attends (`/v1`, webhooks, routines) ask the
    /// owner for approvals (`agent.approval_channel`; the daemon's inbound
    /// channels open it).
    pub desk: ApprovalDesk,
    /// Every agent's browser (`browser_*`); `None` when none is installed.
    pub browsers: Option<Arc<cairn_agent::tools::browser::Browsers>>,
    /// Leak detection, shared by the runners, providers, hooks and notifier.
    pub leaks: cairn_agent::safety::leak::LeakGuard,
}

impl Runtime {
    /// The parts building an agent other than `main` takes.
    pub fn agent_kit(&self) -> AgentKit {
        AgentKit {
            main: self.agent.clone(),
            providers: self.providers.clone(),
            guard: Arc::clone(&self.reloadable.guard),
            main_extra: self.reloadable.extra_tools.clone(),
            memory: Arc::clone(&self.memory),
            mcp: self.mcp.clone(),
            browsers: self.browsers.clone(),
            store: self.store.clone(),
            leaks: self.leaks.clone(),
        }
    }
}

/// The parts of a [`Runtime`] a configuration reload replaces.
#[derive(Clone)]
pub struct Reloadable {
    /// The main provider behind `providers.main`.
    pub main: ReloadableProvider,
    /// The cheap provider behind `providers.cheap`.
    pub cheap: ReloadableProvider,
    /// The cost guard every provider is behind.
    pub guard: Arc<CostGuard>,
    /// The tools registered besides the built-in and MCP ones (automation's,
    /// memory's), kept to build the registry again.
    pub extra_tools: Vec<Arc<dyn cairn_agent::tools::Tool>>,
}

/// Builds and starts everything over an open store.
pub async fn runtime(config: &Config, store: Store) -> anyhow::Result<Runtime> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let guard = Arc::new(
        CostGuard::load(store.clone(), &config.cost, Arc::clone(&clock))
            .await
            .context("cannot load the cost guard's state")?,
    );
    let (raw, llm) = guarded_providers(config, &guard)?;
    // Outermost, so a reload replaces the whole chain (guard included) at once.
    let main = ReloadableProvider::new(raw.main);
    let cheap = ReloadableProvider::new(raw.cheap);
    let providers = Providers {
        main: Arc::new(main.clone()),
        cheap: Arc::new(cheap.clone()),
    };
    let routes = match &llm {
        Some(llm) => crate::routing::router(config, llm, &providers.main, &guard)?,
        None => None,
    };
    let model_router = Live::new(Arc::new(routes.unwrap_or_default()));
    let tools = tools_config(config)?;
    let link = EngineLink::new();
    // One leak guard for every part of this process: a reload replaces its set.
    let leaks = leak_guard_with_vault(config, &store).await;
    guard.attach_leaks(leaks.clone());
    let hooks = hooks(config, &tools, &link, &leaks)?;
    // The execution primitives run other tools through the runner, which
    // holds them: they reach it through a link attached once it is built.
    let runner_link = RunnerLink::new();
    let background = BackgroundTasks::new(
        store.clone(),
        Arc::clone(&runner_link),
        Arc::clone(&clock),
        owner_id(),
    );
    let mut extra = extra_tools(
        config,
        &store,
        &clock,
        &link,
        &runner_link,
        &background,
        &leaks,
    )
    .await?;
    let browsers = tools::browsers(config, &tools)?;
    if let Some(browsers) = &browsers {
        extra
            .tools
            .extend(browsers.tools(cairn_agent::agents::MAIN, &config.workspace));
    }
    let mcp = Live::new(mcp_clients(config, Some(&store)).await?);
    let extra_tools = extra.tools.clone();
    let agent = agent_loop(
        config,
        &providers,
        &tools,
        hooks,
        extra.tools,
        Some(&mcp.get()),
    )?;
    runner_link.attach(agent.runner());
    agent
        .runner()
        .attach_leaks(leaks.for_agent(cairn_agent::agents::MAIN));
    let kit = AgentKit {
        main: agent.clone(),
        providers: providers.clone(),
        guard: Arc::clone(&guard),
        main_extra: extra_tools.clone(),
        memory: Arc::clone(&extra.memory),
        mcp: mcp.clone(),
        browsers: browsers.clone(),
        store: store.clone(),
        leaks: leaks.clone(),
    };
    let configured = agents(config)?;
    let agent_runs = agent_runs(&configured, &kit, &tools).await?;
    let repair_notifier = attach_health(config, &store, &agent, &extra.notifier, &clock);
    start_background(&background).await?;
    create_home_and_workspace(config).await?;
    // Stdio servers start in the workspace by default.
    mcp.get().start();
    let jobs = job_scheduler(
        config,
        &store,
        &providers,
        &agent,
        &tools,
        &clock,
        repair_notifier,
    )
    .await?;
    extra.delegator.attach(jobs.clone());
    extra
        .delegator
        .set_agents(agent_profiles(config, &agent, &agent_runs));
    jobs.start()
        .await
        .context("cannot start the job scheduler")?;
    Ok(Runtime {
        store,
        providers,
        tools,
        agent,
        jobs: Arc::new(jobs),
        link,
        background,
        notifier: extra.notifier,
        memory: extra.memory,
        mcp,
        router: model_router,
        reloadable: Reloadable {
            main,
            cheap,
            guard,
            extra_tools,
        },
        agents: Live::new(Arc::new(agent_runs)),
        agent_ids: extra.agent_ids,
        routine_agents: Live::new(Arc::new(RoutineAgents::new())),
        delegator: extra.delegator,
        desk: ApprovalDesk::new(config.agent.approval_timeout),
        browsers,
        leaks,
    })
}

/// The main and cheap providers behind the cost guard, with the LLM
/// settings they were built from. The guard wraps the outermost provider,
/// so one logical call counts once whatever retries and failover happen
/// inside. A key this process does not have makes stand-ins that fail every
/// call saying which variable (nothing is spent, so they are not guarded).
fn guarded_providers(
    config: &Config,
    guard: &Arc<CostGuard>,
) -> anyhow::Result<(Providers, Option<LlmSettings>)> {
    if let Some(why) = llm_unavailable(config) {
        return Ok((unavailable_providers(config, &why), None));
    }
    let llm = llm_settings(config)?;
    let raw = build_providers(&llm).map_err(|e| BadInput(e.to_string()))?;
    let guarded = |p| -> Arc<dyn cairn_llm::LlmProvider> {
        Arc::new(GuardedProvider::new(p, Arc::clone(guard)))
    };
    let raw = Providers {
        main: guarded(raw.main),
        cheap: guarded(raw.cheap),
    };
    Ok((raw, Some(llm)))
}

/// The agent's hooks: the routine engine's link, then the owner's hooks.
fn hooks(
    config: &Config,
    tools: &ToolsConfig,
    link: &Arc<EngineLink>,
    leaks: &cairn_agent::safety::leak::LeakGuard,
) -> anyhow::Result<HookRegistry> {
    let mut hooks = HookRegistry::new();
    hooks.register(link.clone());
    let user_hooks = user_hooks(config, tools)?.with_leaks(leaks.clone());
    if !user_hooks.is_empty() {
        hooks.register(Arc::new(user_hooks));
    }
    Ok(hooks)
}

/// The tools beside the built-in and MCP ones, with the parts they share
/// that the runtime keeps.
struct ExtraTools {
    tools: Vec<Arc<dyn cairn_agent::tools::Tool>>,
    notifier: Notifier,
    memory: Arc<MemoryService>,
    /// Runs `agent_delegate`'s and `job_subtasks`' sub-agents; attached to
    /// the job scheduler and told the agents once they are built.
    delegator: Arc<Delegator>,
    /// The agents the routine tools' service accepts.
    agent_ids: Live<Vec<String>>,
}

/// Routines', the execution primitives', notifications', watchers',
/// memory's and delegation's tools.
async fn extra_tools(
    config: &Config,
    store: &Store,
    clock: &Arc<dyn Clock>,
    link: &Arc<EngineLink>,
    runner_link: &Arc<RunnerLink>,
    background: &Arc<BackgroundTasks>,
    leaks: &cairn_agent::safety::leak::LeakGuard,
) -> anyhow::Result<ExtraTools> {
    // Every front end writes routines through this one service.
    let routines = routine_service(config, store, Arc::clone(clock)).with_wake(link.clone());
    let agent_ids = routines.agent_set();
    let mut extra = routine_tools(routines.clone(), link.clone());
    extra.extend(routine_ops_tools(routines.clone()));
    extra.push(Arc::new(RunParallelTool::new(Arc::clone(runner_link))));
    extra.extend(background.tools());
    let router = notifier_watching(config, store, leaks)?;
    extra.extend(schedule_tools(
        routines.clone(),
        Arc::clone(runner_link),
        router.clone(),
    ));
    extra.push(Arc::new(SendNotificationTool::new(
        router.clone(),
        config.user.id.clone(),
    )));
    // Watchers are routines: the engine runs their checks.
    extra.extend(Watchers::new(routines, Arc::clone(runner_link)).tools());
    let memory = memory_service(config, store).await?;
    extra.extend(memory_tools(Arc::clone(&memory)));
    // Sub-agents are recorded on the job scheduler, which holds the runner
    // holding these tools: the scheduler is attached once built.
    let delegator = delegator(config);
    extra.push(Arc::new(DelegateTool::new(Arc::clone(&delegator))));
    extra.push(Arc::new(SubtasksTool::new(Arc::clone(&delegator))));
    Ok(ExtraTools {
        tools: extra,
        notifier: router,
        memory,
        delegator,
        agent_ids,
    })
}

/// Self-repair (issue 13): tool health shared through the store, its
/// notifications through the router; answers that notifier for the jobs.
fn attach_health(
    config: &Config,
    store: &Store,
    agent: &AgentLoop,
    router: &Notifier,
    clock: &Arc<dyn Clock>,
) -> Arc<dyn RepairNotifier> {
    let repair_notifier: Arc<dyn RepairNotifier> =
        Arc::new(RouterNotifier(router.clone(), Arc::clone(clock)));
    agent.runner().attach_health(Arc::new(ToolHealth::new(
        store.clone(),
        config.repair.tool_failure_limit,
        Arc::clone(&repair_notifier),
        Arc::clone(clock),
        config.user.id.clone(),
    )));
    repair_notifier
}

/// Starts the background tasks, marking failed those a stopped process left.
async fn start_background(background: &Arc<BackgroundTasks>) -> anyhow::Result<()> {
    let reaped = background
        .start()
        .await
        .context("cannot reap the background tasks of stopped processes")?;
    if !reaped.is_empty() {
        tracing::info!(tasks = ?reaped, "background tasks of a stopped process marked failed (interrupted)");
    }
    Ok(())
}

/// The home first, private, when the workspace is its first content; then
/// the workspace.
async fn create_home_and_workspace(config: &Config) -> anyhow::Result<()> {
    let home = config.home().to_path_buf();
    tokio::task::spawn_blocking(move || crate::home::create(&home))
        .await
        .context("the home task failed")?
        .with_context(|| format!("cannot create {}", config.home().display()))?;
    tokio::fs::create_dir_all(&config.workspace)
        .await
        .with_context(|| format!("cannot create the workspace {}", config.workspace.display()))?;
    Ok(())
}

/// The job scheduler over the agent's runner, its system prompt built now
/// (not yet started).
async fn job_scheduler(
    config: &Config,
    store: &Store,
    providers: &Providers,
    agent: &AgentLoop,
    tools: &ToolsConfig,
    clock: &Arc<dyn Clock>,
    repair_notifier: Arc<dyn RepairNotifier>,
) -> anyhow::Result<JobScheduler> {
    let base_ctx = ToolContext::new(&config.workspace, "jobs")
        .with_timezone(config.user.timezone)
        .with_clock(Arc::clone(clock))
        .with_limits(tools.limits.clone());
    let mut jobs_config = JobsConfig::from_agent(&config.agent);
    jobs_config.stuck_after = config.repair.stuck_after;
    jobs_config.max_repair_attempts = config.repair.max_attempts;
    jobs_config.system_prompt = build_system_prompt(&PromptContext {
        agent_name: config.agent.name.clone(),
        workspace: config.workspace.clone(),
        timezone: config.user.timezone,
        now: clock.now(),
        model: providers.main.model().to_string(),
        tools: agent.runner().definitions(),
        more_tools: agent.runner().on_demand_listing(),
        runtime: RuntimeInfo::detect(),
        skill_paths: config.skills.paths.clone(),
    })
    .await;
    Ok(JobScheduler::builder(
        store.clone(),
        Arc::clone(&providers.main),
        Arc::clone(agent.runner()),
        base_ctx,
    )
    .config(jobs_config)
    .notifier(repair_notifier)
    .build())
}

/// Everything a chat channel needs; idle sessions are pruned every 10 minutes.
pub fn chat_service(config: &Config, rt: &Runtime) -> Arc<ChatService> {
    let service = chat_service_unpruned(config, rt);
    // Runs until the process ends; pruning skips a session that is busy.
    drop(service.spawn_pruner(PRUNE_EVERY));
    service
}

/// [`chat_service`] without its pruning task, for `cairn daemon`, whose
/// supervisor runs the pruning (every [`PRUNE_EVERY`]) as a component.
pub fn chat_service_unpruned(config: &Config, rt: &Runtime) -> Arc<ChatService> {
    let settings = ChatSettings {
        agent_name: config.agent.name.clone(),
        workspace: config.workspace.clone(),
        timezone: config.user.timezone,
        runtime: RuntimeInfo::detect(),
        tool_limits: rt.tools.limits.clone(),
        approval_timeout: config.agent.approval_timeout,
        skill_paths: config.skills.paths.clone(),
    };
    let (agent, cheap) = (rt.agent.clone(), &rt.providers.cheap);
    let parts = (&rt.store, &rt.providers.main, &rt.tools);
    let service = chat_service_of(config, parts, agent, cheap, settings, Some(&rt.memory))
        .with_jobs(Arc::clone(&rt.jobs))
        .with_memory(Arc::clone(&rt.memory))
        .with_router(rt.router.clone());
    Arc::new(service)
}

/// A chat service of `agent` with `settings` over the runtime's sessions,
/// compaction on `cheap` (its notes in the settings' workspace, and into
/// `memory` when given) and network rules; `main`'s adds jobs, memory and
/// model routing.
fn chat_service_of(
    config: &Config,
    (store, main, tools): (&Store, &Arc<dyn cairn_llm::LlmProvider>, &ToolsConfig),
    agent: AgentLoop,
    cheap: &Arc<dyn cairn_llm::LlmProvider>,
    settings: ChatSettings,
    memory: Option<&Arc<MemoryService>>,
) -> ChatService {
    let sessions = Arc::new(SessionManager::new(
        store.clone(),
        Arc::new(SystemClock),
        config.agent.undo_depth as usize,
        config.agent.session_idle,
    ));
    let monitor =
        ContextMonitor::for_model(config.llm.context_limit as usize, main.context_window());
    let mut compactor = Compactor::new(Arc::clone(cheap), settings.workspace.clone())
        .with_monitor(monitor)
        .with_time_zone(config.user.timezone);
    if let Some(memory) = memory {
        compactor = compactor.with_memory(Arc::clone(memory));
    }
    let service = ChatService::new(sessions, agent, settings)
        .with_compactor(Arc::new(compactor))
        .with_max_images(config.gateway.max_images);
    // Image URLs (`/v1`) are fetched under the model's network rules.
    match cairn_agent::tools::net::NetClient::new(tools.http.clone()) {
        Ok(net) => service.with_net(Arc::new(net)),
        Err(e) => {
            tracing::warn!(error = %e, "image URLs cannot be fetched");
            service
        }
    }
}
