//! Several agents (`[[agents]]`, issue 45): each agent other than `main`
//! gets its own loop (its model, its tools under its policy) and chat
//! service (its name and workspace) over the runtime's shared parts (the
//! provider behind the cost guard, the hooks, the store, MCP).
//!
//! Costs: the main and cheap providers are shared, and each agent sees them
//! through an [`AgentProvider`] naming it, so its turns, its compaction and
//! anything it delegates on them are counted on its own line and held to
//! its share (`daily_budget_cents`). Model routing stays `main`'s, as do
//! jobs and the other automation (on `main`'s line).
//!
//! Each agent has its own memory (its documents, and those shared by any
//! agent). Until they learn about agents, the tools that act on `main`'s
//! behalf (routines, schedules, watchers, background runs, run_parallel
//! and jobs) are `main`'s alone: another agent has the built-in tools, the
//! MCP servers', `send_notification`, `agent_delegate` and its own memory
//! tools.

use std::sync::Arc;

use anyhow::Context;
use cairn_agent::agents::{AgentSpec, Agents, ChatSet, Chats, Limits, MAIN};
use cairn_agent::chat::{ChatService, ChatSettings};
use cairn_agent::delegation::{AgentProfile, DelegationConfig, Delegator};
use cairn_agent::memory::MemoryService;
use cairn_agent::memory::tools::memory_tools;
use cairn_agent::prompt::RuntimeInfo;
use cairn_agent::safety::leak::LeakGuard;
use cairn_agent::tools::browser::Browsers;
use cairn_agent::tools::{Tool, ToolRegistry, ToolsConfig};
use cairn_agent::{AgentLoop, AgentProvider, CostGuard, PolicyGate, ToolPolicyConfig, ToolRunner};
use cairn_core::config::Config;
use cairn_core::live::Live;
use cairn_llm::{LlmProvider, Providers};
use cairn_mcp::McpClients;
use cairn_store::Store;

use super::{Runtime, located, tool_parts, tools_config};

/// The extra (automation) tools an agent other than `main` has.
const SHARED_EXTRA: &[&str] = &["send_notification", "agent_delegate"];

/// The `[[agents]]` table, checked against the home, `main`'s workspace
/// and the global autonomy.
pub fn agents(config: &Config) -> anyhow::Result<Agents> {
    let autonomy = tools_config(config)?.policy.autonomy;
    let limits = Limits {
        home: config.home(),
        main_workspace: &config.workspace,
        autonomy,
        daily_budget_cents: config.cost.daily_budget_cents,
    };
    Agents::parse(config.agents.as_ref(), &limits)
        .map_err(|errors| located(config, config.agents.as_ref(), &errors))
}

/// The agent `id` of the `[[agents]]` table (`main` is always there), for
/// a command's `--agent`; bad input naming the configured ones otherwise.
pub fn agent_named(config: &Config, id: &str) -> anyhow::Result<AgentSpec> {
    let agents = agents(config)?;
    agents.get(id).cloned().ok_or_else(|| {
        let known: Vec<&str> = agents.all().iter().map(|a| a.id.as_str()).collect();
        crate::exit::BadInput(format!(
            "--agent {id}: no such agent; the agents are {} ([[agents]] in config.toml)",
            known.join(", ")
        ))
        .into()
    })
}

/// An agent's workspace: its own, or the top-level one for `main`.
pub fn workspace_of(config: &Config, spec: &AgentSpec) -> std::path::PathBuf {
    spec.workspace
        .clone()
        .unwrap_or_else(|| config.workspace.clone())
}

/// The delegator of `agent_delegate` and `job_subtasks`, with the
/// `[agent]` limits (`max_delegation_depth`, `max_parallel_delegations`).
pub fn delegator(config: &Config) -> Arc<Delegator> {
    Arc::new(Delegator::new(DelegationConfig {
        runtime: RuntimeInfo::detect(),
        skill_paths: config.skills.paths.clone(),
        ..DelegationConfig::from_agent(&config.agent, &config.user.id)
    }))
}

/// Every agent a sub-agent may be (`agent_delegate`'s `agent`): `main`
/// and the others, each with its name, workspace and loop.
pub fn agent_profiles(config: &Config, main: &AgentLoop, runs: &[AgentRun]) -> Vec<AgentProfile> {
    let mut profiles = vec![AgentProfile {
        id: MAIN.to_string(),
        name: config.agent.name.clone(),
        workspace: config.workspace.clone(),
        agent: main.clone(),
    }];
    profiles.extend(runs.iter().map(|run| {
        AgentProfile {
            id: run.spec.id.clone(),
            name: run
                .spec
                .name
                .clone()
                .unwrap_or_else(|| config.agent.name.clone()),
            workspace: workspace_of(config, &run.spec),
            agent: run.agent.clone(),
        }
    }));
    profiles
}

/// An agent other than `main`, running.
#[derive(Clone)]
pub struct AgentRun {
    /// What `[[agents]]` says of it.
    pub spec: AgentSpec,
    /// Its loop: the main provider at its model (counted on its cost
    /// line), its own tool runner.
    pub agent: AgentLoop,
    /// The cheap provider (its compaction), counted on its cost line.
    pub cheap: Arc<dyn LlmProvider>,
    /// Its memory.
    pub memory: Arc<MemoryService>,
    /// The automation tools it has (its memory's, `send_notification`),
    /// kept for a reload to build its tools again.
    pub extra: Vec<Arc<dyn Tool>>,
}

/// The tools of an agent other than `main` and their policy: the global
/// policy with the agent's `allow` and `deny` added (deny wins), at the
/// lower of the two autonomy levels. A tool either denies is not offered.
/// `extra` are the agent's own automation tools ([`AgentRun::extra`]).
pub fn agent_tools(
    tools: &ToolsConfig,
    spec: &AgentSpec,
    extra: &[Arc<dyn Tool>],
    mcp: Option<&McpClients>,
) -> anyhow::Result<(ToolRegistry, ToolPolicyConfig)> {
    let mut hidden = tools.policy.deny.clone();
    hidden.extend(spec.deny.iter().cloned());
    let (registry, mut policy) = tool_parts(tools, extra.to_vec(), mcp, &hidden)?;
    policy.allow.extend(spec.allow.iter().cloned());
    policy.deny.extend(spec.deny.iter().cloned());
    if let Some(level) = spec.autonomy {
        policy.autonomy = policy.autonomy.min(level);
    }
    Ok((registry, policy))
}

/// What building the agents other than `main` takes: the runtime's
/// shared parts ([`Runtime::agent_kit`]), kept by a reload of
/// `[[agents]]` to build them again.
#[derive(Clone)]
pub struct AgentKit {
    /// `main`'s loop: its hooks and limits are every agent's.
    pub main: AgentLoop,
    /// The shared providers, each agent seeing them as its own.
    pub providers: Providers,
    /// The cost guard, told every agent's share.
    pub guard: Arc<CostGuard>,
    /// `main`'s automation tools, of which the agents get [`SHARED_EXTRA`].
    pub main_extra: Vec<Arc<dyn Tool>>,
    /// `main`'s memory, of which each agent gets a view of its own.
    pub memory: Arc<MemoryService>,
    /// The MCP servers in force.
    pub mcp: Live<McpClients>,
    /// Every agent's browser, when there are browsers.
    pub browsers: Option<Arc<Browsers>>,
    /// The store (sessions).
    pub store: Store,
    /// Looks for secrets in every agent's tool calls.
    pub leaks: LeakGuard,
}

/// Each agent other than `main`, over the kit's parts; `guard` learns
/// every agent's share and their workspaces are created.
pub async fn agent_runs(
    agents: &Agents,
    kit: &AgentKit,
    tools: &ToolsConfig,
) -> anyhow::Result<Vec<AgentRun>> {
    kit.guard.set_agents(agents.shares());
    let mut out = Vec::new();
    for spec in agents.all().iter().filter(|a| a.id != MAIN) {
        out.push(agent_run(spec, kit, tools).await?);
    }
    Ok(out)
}

/// One agent other than `main`: its memory, its tools (the built-in and
/// MCP ones under its policy, its memory's, [`SHARED_EXTRA`], its own
/// browser), its loop over the shared providers seen as its own, and its
/// workspace, created.
pub(super) async fn agent_run(
    spec: &AgentSpec,
    kit: &AgentKit,
    tools: &ToolsConfig,
) -> anyhow::Result<AgentRun> {
    let memory = Arc::new(kit.memory.for_agent(&spec.id));
    let mut extra: Vec<Arc<dyn Tool>> = kit
        .main_extra
        .iter()
        .filter(|t| SHARED_EXTRA.contains(&t.spec().name()))
        .cloned()
        .collect();
    extra.extend(memory_tools(Arc::clone(&memory)));
    if let (Some(browsers), Some(workspace)) = (&kit.browsers, &spec.workspace) {
        extra.extend(browsers.tools(&spec.id, workspace));
    }
    let (registry, policy) = agent_tools(tools, spec, &extra, Some(&kit.mcp.get()))
        .with_context(|| format!("agent {}: cannot set up its tools", spec.id))?;
    let runner = Arc::new(ToolRunner::new(
        Arc::new(registry),
        Arc::new(PolicyGate::new(&policy)),
    ));
    runner.attach_leaks(kit.leaks.for_agent(&spec.id));
    let own = |shared: &Arc<dyn LlmProvider>| -> Arc<dyn LlmProvider> {
        Arc::new(AgentProvider::new(Arc::clone(shared), &spec.id))
    };
    let mut agent = AgentLoop::new(
        own(&kit.providers.main),
        runner,
        Arc::clone(kit.main.hooks()),
        kit.main.config().clone(),
    );
    if let Some(model) = &spec.model {
        agent = agent.with_model(Some(model.clone()));
    }
    if let Some(workspace) = &spec.workspace {
        tokio::fs::create_dir_all(workspace)
            .await
            .with_context(|| {
                format!(
                    "agent {}: cannot create its workspace {}",
                    spec.id,
                    workspace.display()
                )
            })?;
    }
    Ok(AgentRun {
        spec: spec.clone(),
        agent,
        cheap: own(&kit.providers.cheap),
        memory,
        extra,
    })
}

/// Every agent's chat service: `main`'s as given, the others' built over
/// the runtime with their own name, workspace and memory (without jobs or
/// model routing, which are `main`'s for now).
pub fn chats(config: &Config, rt: &Runtime, main: Arc<ChatService>) -> anyhow::Result<Arc<Chats>> {
    let agents = agents(config)?;
    let runs = rt.agents.get();
    let kit = rt.agent_kit();
    let others = runs
        .iter()
        .map(|run| {
            let service = agent_chat(config, &kit, &rt.tools, main.settings(), run);
            (run.spec.id.clone(), service)
        })
        .collect();
    let set = ChatSet::new(agents, others).map_err(anyhow::Error::msg)?;
    Ok(Arc::new(Chats::new(main, set)))
}

/// The chat service of `run`: `main`'s settings with its name and
/// workspace, its loop, compaction on its cheap provider, its memory.
pub fn agent_chat(
    config: &Config,
    kit: &AgentKit,
    tools: &ToolsConfig,
    main: &ChatSettings,
    run: &AgentRun,
) -> Arc<ChatService> {
    let mut settings = main.clone();
    if let Some(name) = &run.spec.name {
        settings.agent_name = name.clone();
    }
    if let Some(workspace) = &run.spec.workspace {
        settings.workspace = workspace.clone();
    }
    let service = super::chat_service_of(
        config,
        (&kit.store, &kit.providers.main, tools),
        run.agent.clone(),
        &run.cheap,
        settings,
        Some(&run.memory),
    )
    .with_memory(Arc::clone(&run.memory));
    Arc::new(service)
}
