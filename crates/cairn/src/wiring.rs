//! Turning the configuration into running parts: LLM providers, tools and
//! policy, the agent loop, sessions and the chat service. One place, so
//! `chat`, `job`, the daemon and `doctor` build things the same way.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_agent::chat::{ChatService, ChatSettings};
use cairn_agent::hooks::command::{UserHooks, parse_hooks};
use cairn_agent::jobs::{JobScheduler, JobsConfig};
use cairn_agent::policy::{AutonomyLevel, PolicyDecision};
use cairn_agent::prompt::{PromptContext, RuntimeInfo, build_system_prompt};
use cairn_agent::repair::{RepairNotifier, ToolHealth};
use cairn_agent::sandbox::Sandbox;
use cairn_agent::session::SessionManager;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolsConfig, builtin_registry};
use cairn_agent::{
    AgentLoop, Compactor, ContextMonitor, CostGuard, GuardedProvider, HookRegistry, LoopConfig,
    PolicyGate, ToolRunner,
};
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings, owner_id, parse_channels};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_automation::primitives::parallel::RunParallelTool;
use cairn_automation::primitives::schedule::schedule_tools;
use cairn_automation::primitives::send::SendNotificationTool;
use cairn_automation::primitives::watch::Watchers;
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine, RunEvent};
use cairn_automation::routines::heartbeat::{HEARTBEAT, Heartbeat, HeartbeatSettings};
use cairn_automation::routines::link::EngineLink;
use cairn_automation::routines::ops_tools::routine_ops_tools;
use cairn_automation::routines::service::RoutineService;
use cairn_automation::routines::system::{Ensured, SystemRoutine, SystemTask};
use cairn_automation::routines::tools::routine_tools;
use cairn_automation::routines::upkeep::{MEMORY_HYGIENE, MemoryHygiene, SELF_REPAIR, SelfRepair};
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::{Config, Section};
use cairn_llm::{LlmSettings, PriceTable, ProviderSettings, Providers, build_providers};
use cairn_mcp::{McpClients, ServerSpec, Supervision};
use cairn_store::Store;
use secrecy::{ExposeSecret, SecretString};
// Memory.
use cairn_agent::memory::tools::memory_tools;
use cairn_agent::memory::{HygieneSettings, MemoryService, MemorySettings, hydrate};
use cairn_llm::{EmbeddingsClient, EmbeddingsSettings};
use serde::Deserialize;

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
fn config_file(config: &Config) -> String {
    config
        .settings
        .file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// One `[[llm.fallbacks]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fallback {
    provider: String,
    model: String,
    #[serde(default)]
    base_url: Option<String>,
    /// A secret, so that `Debug` (and any log of this entry) never shows it.
    #[serde(default)]
    api_key: Option<SecretString>,
}

/// The notification router with the configured channels and delivery
/// policy. Channel problems (unknown fields, an unset `${VAR}`, an email
/// channel without `to`) are bad input naming the file, line and key.
pub fn notifier(config: &Config, store: &Store) -> anyhow::Result<Notifier> {
    let channels = channel_set(config)?;
    let n = &config.notify;
    let settings = NotifySettings {
        default_channel: n.default_channel.clone(),
        max_attempts: n.max_attempts,
        max_age: n.max_age,
        retry_base: n.retry_base,
        retry_max: n.retry_max,
        lease: n.lease,
    };
    Ok(Notifier::new(store.clone(), Arc::new(channels), settings))
}

/// The configured output channels, checked (no network), with the default
/// channel among them.
pub fn channel_set(config: &Config) -> anyhow::Result<ChannelSet> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let section = config.notify.channels.as_ref();
    let bad = |errors: Vec<cairn_automation::notify::ChannelConfigError>| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        located(config, section, &lines)
    };
    let specs = parse_channels(section.map(|s| &s.value), &env).map_err(bad)?;
    // A receiver's redirect is reported as its answer, never followed (a
    // followed POST can turn into a GET that "succeeds" with nothing delivered).
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot build the HTTP client for notifications")?;
    let channels = ChannelSet::build(&specs, &http).map_err(bad)?;
    let default = &config.notify.default_channel;
    if !channels.contains(default) {
        return Err(BadInput(format!(
            "notify.default_channel: no channel named \"{default}\" (configured: {})",
            channels.names().join(", ")
        ))
        .into());
    }
    Ok(channels)
}

/// Problems of a free-form table as one bad-input error, each line
/// prefixed with the file and the table's line.
fn located(config: &Config, section: Option<&Section>, problems: &[String]) -> anyhow::Error {
    let file = config
        .settings
        .file
        .as_ref()
        .map(|p| format!("{}:{}: ", p.display(), section.map_or(0, |s| s.line)))
        .unwrap_or_default();
    let lines: Vec<String> = problems.iter().map(|e| format!("{file}{e}")).collect();
    BadInput(lines.join("\n")).into()
}

/// The `[[mcp.servers]]` entries, checked, `${VAR}` expanded (nothing started).
pub fn mcp_specs(config: &Config) -> anyhow::Result<Vec<ServerSpec>> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let section = config.mcp_servers.as_ref();
    cairn_mcp::parse_servers(section.map(|s| &s.value), &env).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
        located(config, section, &lines)
    })
}

/// The configured MCP servers, not started, each with its tool list
/// remembered in `store` (when given); installs the host sandbox, which
/// starts the servers that set `sandbox = true`.
pub async fn mcp_clients(
    config: &Config,
    store: Option<&Store>,
) -> anyhow::Result<Arc<McpClients>> {
    let specs = mcp_specs(config)?;
    install_sandbox(&parse_tools(config)?);
    let workspace = config.workspace.clone();
    Ok(Arc::new(
        McpClients::new(specs, workspace, store.cloned(), Supervision::default()).await,
    ))
}

/// What to tell a person who has not configured an LLM.
fn no_provider_help(config: &Config) -> String {
    format!(
        "no LLM provider is configured. Set CAIRN_LLM_PROVIDER (openai, anthropic, openrouter, ollama, vllm, \
         llamacpp or lmstudio), CAIRN_LLM_MODEL and CAIRN_LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY); \
         local servers also take CAIRN_LLM_BASE_URL. The same settings go in the [llm] section of {}",
        crate::settings::config_path(config.home()).display()
    )
}

/// The provider settings the configuration describes.
pub fn llm_settings(config: &Config) -> anyhow::Result<LlmSettings> {
    let llm = &config.llm;
    let Some(provider) = llm.provider.as_deref() else {
        return Err(BadInput(no_provider_help(config)).into());
    };
    let Some(model) = llm.model.as_deref().filter(|m| !m.trim().is_empty()) else {
        return Err(BadInput(format!(
            "llm.provider is {provider} but no model is set: set CAIRN_LLM_MODEL or llm.model"
        ))
        .into());
    };
    let mut prices = PriceTable::builtin();
    if let Some(sec) = &llm.prices {
        let extra: PriceTable = section(config, "llm.prices", sec)?;
        prices.merge(&extra);
    }
    let base = |name: &str, model: &str| -> anyhow::Result<ProviderSettings> {
        let settings = ProviderSettings::preset(name, model)
            .map_err(|e| BadInput(format!("llm.provider: {e}")))?;
        Ok(settings
            .with_timeout(Some(llm.timeout))
            .with_max_retries(llm.max_retries)
            .with_context_window(llm.context_limit)
            .with_vision(llm.vision)
            .with_prices(prices.clone()))
    };
    let mut primary = base(provider, model)?;
    if let Some(url) = &llm.base_url {
        primary = primary.with_base_url(url.clone());
    }
    primary.api_key = llm.api_key.clone();
    let cheap = match &llm.cheap_model {
        Some(cheap_model) => {
            let mut cheap = primary.clone();
            cheap.model = cheap_model.clone();
            Some(cheap)
        }
        None => None,
    };
    let mut fallbacks = Vec::new();
    if let Some(sec) = &llm.fallbacks {
        let entries: Vec<Fallback> = section(config, "llm.fallbacks", sec)?;
        for (i, f) in entries.into_iter().enumerate() {
            let mut settings = base(&f.provider, &f.model)?;
            if let Some(url) = f.base_url {
                settings = settings.with_base_url(url);
            }
            if let Some(key) = f.api_key {
                let field = format!("llm.fallbacks[{i}].api_key");
                settings.api_key = Some(expand_secret(config, &key, &field, sec.line)?);
            }
            fallbacks.push(settings);
        }
    }
    Ok(LlmSettings {
        primary,
        cheap,
        fallbacks,
    })
}

/// The main and cheap providers.
pub fn providers(config: &Config) -> anyhow::Result<Providers> {
    let settings = llm_settings(config)?;
    build_providers(&settings).map_err(|e| BadInput(e.to_string()).into())
}

/// The `[tools]` table, with cairn's own secrets added to the forbidden
/// paths and kept from sandboxed commands; refused when it lets `shell` run
/// unapproved where commands cannot be confined (see [`check_unattended_shell`]).
pub fn tools_config(config: &Config) -> anyhow::Result<ToolsConfig> {
    let tools = parse_tools(config)?;
    check_unattended_shell(config, &tools)?;
    Ok(tools)
}

/// `tools.web_search.api_key = "${VAR}"` read from the environment.
fn expand_search_key(config: &Config, tools: &mut ToolsConfig) -> anyhow::Result<()> {
    let Some(key) = tools.web_search.as_mut().and_then(|s| s.api_key.as_mut()) else {
        return Ok(());
    };
    let line = config.tools.as_ref().map_or(0, |s| s.line);
    *key = expand_secret(config, key, "tools.web_search.api_key", line)?;
    Ok(())
}

/// A secret of config.toml with its `${VAR}`s read from the environment, as
/// every secret there may be written; an unset variable is bad input naming
/// the file, line and key.
fn expand_secret(
    config: &Config,
    key: &SecretString,
    field: &str,
    line: usize,
) -> anyhow::Result<SecretString> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let expanded = cairn_core::text::expand_vars(key.expose_secret(), &env).map_err(|var| {
        BadInput(format!(
            "{}:{line}: {field}: environment variable {var} is not set",
            config_file(config)
        ))
    })?;
    Ok(SecretString::from(expanded))
}

/// The `[tools]` table as written, with cairn's own secrets added (no checks).
pub fn parse_tools(config: &Config) -> anyhow::Result<ToolsConfig> {
    let mut tools: ToolsConfig = match &config.tools {
        Some(sec) => section(config, "tools", sec)?,
        None => ToolsConfig::default(),
    };
    expand_search_key(config, &mut tools)?;
    let home = config.home();
    let mut private = vec![
        crate::settings::config_path(home).display().to_string(),
        home.join("history.txt").display().to_string(),
    ];
    let db = config.database_url.expose_secret();
    if let Some(path) = db.strip_prefix("sqlite://") {
        let path = path.split('?').next().unwrap_or(path);
        private.extend([
            path.to_string(),
            format!("{path}-wal"),
            format!("{path}-shm"),
        ]);
    }
    // The home as a whole is what a sandboxed command must never read (the
    // workspace inside it is granted on its own).
    tools.shell.protected_paths.push(home.to_path_buf());
    // Skills outside the workspace are read with file_read, never written.
    tools.files.read_only_roots.clone_from(&config.skills.paths);
    for path in private {
        tools.shell.protected_paths.push(path.clone().into());
        if !tools.shell.forbidden_paths.contains(&path) {
            tools.shell.forbidden_paths.push(path.clone());
        }
        if !tools.files.forbidden_paths.contains(&path) {
            tools.files.forbidden_paths.push(path);
        }
    }
    Ok(tools)
}

/// Refuses a policy that runs `shell` without asking (autonomy `full`, an
/// `allow` rule) where Landlock cannot confine it, unless the owner set
/// `tools.shell.allow_unconfined`. Checked when the configuration is loaded;
/// routines whose `allowed_tools` list `shell` are checked when defined and
/// when run (cairn-automation's `define::prepare` and `AgentActions`).
fn check_unattended_shell(config: &Config, tools: &ToolsConfig) -> anyhow::Result<()> {
    let gate = PolicyGate::new(&tools.policy);
    if gate.decide("shell", RiskLevel::Dangerous, "") != PolicyDecision::Allow {
        return Ok(());
    }
    let what = if tools.policy.autonomy == AutonomyLevel::Full {
        "tools.policy.autonomy = \"full\""
    } else {
        "a tools.policy.allow rule matching `shell`"
    };
    match Sandbox::new(tools.shell.sandbox_settings()).unattended_refusal(what) {
        None => Ok(()),
        Some(why) => {
            let at = match (&config.settings.file, &config.tools) {
                (Some(file), Some(sec)) => format!("{}:{}: ", file.display(), sec.line),
                (Some(file), None) => format!("{}: ", file.display()),
                _ => String::new(),
            };
            Err(BadInput(format!("{at}{why}")).into())
        }
    }
}

/// The sandbox the agent's processes start in, made this process's host
/// sandbox (what routine checks consult). Cheap: the kernel is probed once.
pub fn install_sandbox(tools: &ToolsConfig) -> Arc<Sandbox> {
    let sandbox = Arc::new(Sandbox::new(tools.shell.sandbox_settings()));
    cairn_agent::sandbox::install(Arc::clone(&sandbox));
    sandbox
}

/// The agent loop over the main provider and the configured tools.
pub fn agent_loop(
    config: &Config,
    providers: &Providers,
    tools: &ToolsConfig,
    hooks: HookRegistry,
    extra_tools: Vec<Arc<dyn Tool>>,
    mcp: Option<&McpClients>,
) -> anyhow::Result<AgentLoop> {
    Ok(AgentLoop::new(
        Arc::clone(&providers.main),
        tool_runner(tools, extra_tools, mcp)?,
        Arc::new(hooks),
        LoopConfig {
            max_iterations: config.agent.max_iterations,
            ..LoopConfig::default()
        },
    ))
}

/// The built-in tools, `extra` (automation's) and the MCP servers' behind
/// the configured policy (with the servers' `allow` and `deny` as rules).
pub fn tool_runner(
    tools: &ToolsConfig,
    extra: Vec<Arc<dyn Tool>>,
    mcp: Option<&McpClients>,
) -> anyhow::Result<Arc<ToolRunner>> {
    let mut registry = builtin_registry(tools).context("cannot set up the tools")?;
    let mut policy = tools.policy.clone();
    let mut extra = extra;
    if let Some(mcp) = mcp {
        registry.register_source(mcp.source());
        extra.extend(mcp.tools());
        let (allow, deny) = mcp.policy_rules();
        policy.allow.extend(allow);
        policy.deny.extend(deny);
    }
    for tool in extra {
        registry
            .register(tool)
            .context("cannot register the automation tools")?;
    }
    // Requests carry the built-ins' schemas; the others load on demand.
    registry
        .enable_schema_tool()
        .context("cannot register tool_schema")?;
    let policy = PolicyGate::new(&policy);
    Ok(Arc::new(ToolRunner::new(
        Arc::new(registry),
        Arc::new(policy),
    )))
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
    /// The MCP servers whose tools the agent has (started as configured).
    pub mcp: Arc<McpClients>,
    /// Routes chat turns by the class of the message (`[routing]`).
    pub router: Option<Arc<cairn_agent::routing::ModelRouter>>,
}

/// Builds and starts everything over an open store.
pub async fn runtime(config: &Config, store: Store) -> anyhow::Result<Runtime> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let guard = Arc::new(
        CostGuard::load(store.clone(), &config.cost, Arc::clone(&clock))
            .await
            .context("cannot load the cost guard's state")?,
    );
    // The guard wraps the outermost provider, so one logical call counts once
    // whatever retries and failover happen inside.
    let llm = llm_settings(config)?;
    let raw = build_providers(&llm).map_err(|e| BadInput(e.to_string()))?;
    let providers = Providers {
        main: Arc::new(GuardedProvider::new(raw.main, Arc::clone(&guard))),
        cheap: Arc::new(GuardedProvider::new(raw.cheap, Arc::clone(&guard))),
    };
    let model_router = crate::routing::router(config, &llm, &providers.main, &guard)?.map(Arc::new);
    let tools = tools_config(config)?;
    install_sandbox(&tools);
    let link = EngineLink::new();
    let mut hooks = HookRegistry::new();
    hooks.register(link.clone());
    let user_hooks = user_hooks(config, &tools)?;
    if !user_hooks.is_empty() {
        hooks.register(Arc::new(user_hooks));
    }
    let mut extra = routine_tools(
        store.clone(),
        link.clone(),
        config.user.id.clone(),
        config.user.timezone,
        Arc::clone(&clock),
    );
    extra.extend(routine_ops_tools(
        routine_service(config, &store, Arc::clone(&clock)).with_wake(link.clone()),
    ));
    // The execution primitives run other tools through the runner, which
    // holds them: they reach it through a link attached once it is built.
    let runner_link = RunnerLink::new();
    let background = BackgroundTasks::new(
        store.clone(),
        Arc::clone(&runner_link),
        Arc::clone(&clock),
        owner_id(),
    );
    extra.push(Arc::new(RunParallelTool::new(Arc::clone(&runner_link))));
    extra.extend(background.tools());
    let router = notifier(config, &store)?;
    extra.extend(schedule_tools(
        store.clone(),
        Arc::clone(&runner_link),
        router.clone(),
        config.user.id.clone(),
        config.user.timezone,
        Arc::clone(&clock),
    ));
    extra.push(Arc::new(SendNotificationTool::new(
        router.clone(),
        config.user.id.clone(),
    )));
    // Watchers are routines: the engine runs their checks.
    extra.extend(
        Watchers::new(
            store.clone(),
            Arc::clone(&clock),
            config.user.id.clone(),
            Arc::clone(&runner_link),
        )
        .tools(),
    );
    let memory = memory_service(config, &store).await?;
    extra.extend(memory_tools(Arc::clone(&memory)));
    let mcp = mcp_clients(config, Some(&store)).await?;
    let agent = agent_loop(config, &providers, &tools, hooks, extra, Some(&mcp))?;
    runner_link.attach(agent.runner());
    // Self-repair (issue 13): tool health shared through the store, its
    // notifications through the router.
    let repair_notifier: Arc<dyn RepairNotifier> =
        Arc::new(RouterNotifier(router.clone(), Arc::clone(&clock)));
    agent.runner().attach_health(Arc::new(ToolHealth::new(
        store.clone(),
        config.repair.tool_failure_limit,
        Arc::clone(&repair_notifier),
        Arc::clone(&clock),
        config.user.id.clone(),
    )));
    let reaped = background
        .start()
        .await
        .context("cannot reap the background tasks of stopped processes")?;
    if !reaped.is_empty() {
        tracing::info!(tasks = ?reaped, "background tasks of a stopped process marked failed (interrupted)");
    }
    // The home first, private, when the workspace is its first content.
    let home = config.home().to_path_buf();
    tokio::task::spawn_blocking(move || crate::home::create(&home))
        .await
        .context("the home task failed")?
        .with_context(|| format!("cannot create {}", config.home().display()))?;
    tokio::fs::create_dir_all(&config.workspace)
        .await
        .with_context(|| format!("cannot create the workspace {}", config.workspace.display()))?;
    // Stdio servers start in the workspace by default.
    mcp.start();

    let base_ctx = ToolContext::new(&config.workspace, "jobs")
        .with_timezone(config.user.timezone)
        .with_clock(Arc::clone(&clock))
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
    let jobs = JobScheduler::builder(
        store.clone(),
        Arc::clone(&providers.main),
        Arc::clone(agent.runner()),
        base_ctx,
    )
    .config(jobs_config)
    .notifier(repair_notifier)
    .build();
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
        notifier: router,
        memory,
        mcp,
        router: model_router,
    })
}

/// What runs routines in this process: the agent runtime when an LLM is
/// configured (`None` otherwise: routines that need one fail saying so), the
/// notifier, and the engine over them.
pub struct Automation {
    /// The agent runtime, when an LLM is configured.
    pub runtime: Option<Runtime>,
    /// The notification router.
    pub notifier: Notifier,
    /// The routine engine (not yet running).
    pub engine: RoutineEngine,
    /// The heartbeat task the engine runs (its settings reload live).
    pub heartbeat: Arc<Heartbeat>,
}

/// Builds [`Automation`] over an open store. `home_prefix` is given by a
/// daemon holding its home's lock ([`DaemonLock::owner_prefix`](crate::daemon::lock::DaemonLock::owner_prefix)):
/// its engine's owner id starts with it, and at start the engine reaps the
/// runs that earlier daemons of the home left.
pub async fn automation(
    config: &Config,
    store: &Store,
    home_prefix: Option<String>,
) -> anyhow::Result<Automation> {
    let runtime = match config.llm.provider {
        Some(_) => Some(runtime(config, store.clone()).await?),
        None => {
            // No agent here, but memory still hydrates from its snapshot at start-up.
            memory_service(config, store).await?;
            None
        }
    };
    // One router for the engine and the agent's tools, so a reload reaches both.
    let notifier = match &runtime {
        Some(rt) => rt.notifier.clone(),
        None => notifier(config, store)?,
    };
    let (engine, heartbeat) = routine_engine_with_heartbeat(
        config,
        store,
        Some(notifier.clone()),
        runtime.as_ref(),
        home_prefix,
    )?;
    if let Some(rt) = &runtime {
        forward_routine_runs(&engine, Arc::clone(rt.agent.hooks()));
    }
    Ok(Automation {
        runtime,
        notifier,
        engine,
        heartbeat,
    })
}

/// The `[[hooks]]` commands, run in the workspace under the shell's sandbox.
pub fn user_hooks(config: &Config, tools: &ToolsConfig) -> anyhow::Result<UserHooks> {
    let hooks = parse_hooks(config.hooks.as_ref()).map_err(|errors| {
        let file = config_file(config);
        let lines: Vec<String> = errors.iter().map(|e| format!("{file}: {e}")).collect();
        BadInput(lines.join("\n"))
    })?;
    Ok(UserHooks::new(
        hooks,
        config.workspace.clone(),
        tools.shell.sandbox_settings(),
    ))
}

/// Tells the hooks of every routine run that ends (`on_routine_run`).
fn forward_routine_runs(engine: &RoutineEngine, hooks: Arc<HookRegistry>) {
    let mut runs = engine.subscribe_runs();
    tokio::spawn(async move {
        loop {
            match runs.recv().await {
                Ok(RunEvent::Finished {
                    routine,
                    run_id,
                    status,
                    summary,
                }) => {
                    let run = serde_json::json!({
                        "run_id": run_id,
                        "status": status.to_string(),
                        "summary": summary,
                    });
                    hooks.on_routine_run(&routine, &run).await;
                }
                Ok(RunEvent::Started { .. }) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "on_routine_run hooks missed runs (too many at once)"
                    );
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
}

/// The routine engine with the real executor. With a runtime, routines get
/// the LLM, the agent's tools and the job scheduler, and chat messages reach
/// the event routines; without one (no LLM configured) they get the tools
/// only, and actions that need an LLM fail saying so.
pub fn routine_engine(
    config: &Config,
    store: &Store,
    notifier: Option<Notifier>,
    rt: Option<&Runtime>,
) -> anyhow::Result<RoutineEngine> {
    Ok(routine_engine_with_heartbeat(config, store, notifier, rt, None)?.0)
}

/// [`routine_engine`] and the heartbeat task it runs, whose settings a
/// configuration reload replaces; `home_prefix` as for [`automation`].
pub fn routine_engine_with_heartbeat(
    config: &Config,
    store: &Store,
    notifier: Option<Notifier>,
    rt: Option<&Runtime>,
    home_prefix: Option<String>,
) -> anyhow::Result<(RoutineEngine, Arc<Heartbeat>)> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut actions = AgentActions::new(store.clone(), &config.workspace, Arc::clone(&clock));
    let (runner, limits) = match rt {
        Some(rt) => {
            actions = actions
                .with_llm(
                    Arc::clone(&rt.providers.main),
                    Arc::clone(&rt.providers.cheap),
                )
                .with_jobs(Arc::clone(&rt.jobs));
            (Arc::clone(rt.agent.runner()), rt.tools.limits.clone())
        }
        None => {
            // No agent runs here (no LLM), so no routine tools are needed.
            let tools = tools_config(config)?;
            (tool_runner(&tools, Vec::new(), None)?, tools.limits)
        }
    };
    let ctx = ToolContext::new(&config.workspace, "routines")
        .with_timezone(config.user.timezone)
        .with_clock(Arc::clone(&clock))
        .with_limits(limits);
    actions = actions.with_tools(runner, ctx);
    // System routines' tasks (cairn_automation::routines::system); each
    // also needs its routine in `system_routines`.
    let cheap = rt.map(|rt| Arc::clone(&rt.providers.cheap));
    let heartbeat = Arc::new(Heartbeat::new(
        heartbeat_settings(config),
        &config.workspace,
        cheap,
        Arc::clone(&clock),
    ));
    actions = actions.with_system_task(HEARTBEAT, Arc::clone(&heartbeat) as Arc<dyn SystemTask>);
    let repair = SelfRepair::new(
        store.clone(),
        rt.map(|rt| Arc::clone(&rt.jobs)),
        Arc::clone(&clock),
    );
    actions = actions.with_system_task(SELF_REPAIR, Arc::new(repair));
    let hygiene = MemoryHygiene::new(
        store.clone(),
        config.user.id.clone(),
        hygiene_settings(config),
        &config.workspace,
        Arc::clone(&clock),
    );
    actions = actions.with_system_task(MEMORY_HYGIENE, Arc::new(hygiene));
    let owner = format!("{}{}", home_prefix.as_deref().unwrap_or(""), owner_id());
    let mut settings = EngineSettings::new(owner, config.user.timezone);
    settings.home_prefix = home_prefix;
    settings.max_concurrent = config.routines.max_concurrent;
    // Running runs are interrupted (and recorded so) well before the daemon's
    // own shutdown deadline gives up on waiting.
    settings.shutdown_grace = settings
        .shutdown_grace
        .min(config.daemon.shutdown_deadline / 2);
    settings.lease = config.routines.lease;
    let engine = RoutineEngine::new(store.clone(), clock, Arc::new(actions), notifier, settings);
    if let Some(rt) = rt {
        rt.link.attach(engine.clone());
    }
    Ok((engine, heartbeat))
}

/// The heartbeat's settings from `[heartbeat]` (empty notify settings
/// mean the default channel and the owner).
pub fn heartbeat_settings(config: &Config) -> HeartbeatSettings {
    let h = &config.heartbeat;
    let given = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    HeartbeatSettings {
        interval: h.interval,
        active_hours: h.active_hours,
        zone: config.user.timezone,
        max_failures: h.max_failures,
        enabled: h.enabled,
        notify_channel: given(&h.notify_channel),
        notify_user: given(&h.notify_user),
    }
}

/// The built-in routines the daemon keeps stored (see
/// [`ensure_system_routines`]): one per system task registered in
/// [`routine_engine`].
pub fn system_routines(config: &Config) -> Vec<SystemRoutine> {
    vec![
        heartbeat_settings(config).routine(),
        SelfRepair::routine(),
        MemoryHygiene::routine(&hygiene_settings(config)),
    ]
}

/// Creates or corrects the built-in routines for the configured user;
/// writes nothing when they are as configured.
pub async fn ensure_system_routines(config: &Config, store: &Store) -> anyhow::Result<()> {
    let done = cairn_automation::routines::system::ensure_system_routines(
        store,
        &config.user.id,
        &system_routines(config),
        config.user.timezone,
        SystemClock.now(),
    )
    .await
    .context("cannot store the built-in routines")?;
    for (name, what) in done {
        if what != Ensured::Unchanged {
            tracing::info!(routine = %name, action = ?what, "built-in routine");
        }
    }
    Ok(())
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
    let sessions = Arc::new(SessionManager::new(
        rt.store.clone(),
        Arc::new(SystemClock),
        config.agent.undo_depth as usize,
        config.agent.session_idle,
    ));
    let monitor = ContextMonitor::for_model(
        config.llm.context_limit as usize,
        rt.providers.main.context_window(),
    );
    let compactor = Compactor::new(Arc::clone(&rt.providers.cheap), config.workspace.clone())
        .with_monitor(monitor)
        .with_time_zone(config.user.timezone)
        .with_memory(Arc::clone(&rt.memory));
    let service = ChatService::new(
        sessions,
        rt.agent.clone(),
        ChatSettings {
            agent_name: config.agent.name.clone(),
            workspace: config.workspace.clone(),
            timezone: config.user.timezone,
            runtime: RuntimeInfo::detect(),
            tool_limits: rt.tools.limits.clone(),
            approval_timeout: config.agent.approval_timeout,
            skill_paths: config.skills.paths.clone(),
        },
    )
    .with_compactor(Arc::new(compactor))
    .with_jobs(Arc::clone(&rt.jobs))
    .with_memory(Arc::clone(&rt.memory));
    let service = match &rt.router {
        Some(router) => service.with_router(Arc::clone(router)),
        None => service,
    };
    // Image URLs (`/v1`) are fetched under the model's network rules.
    let service = match cairn_agent::tools::net::NetClient::new(rt.tools.http.clone()) {
        Ok(net) => service.with_net(Arc::new(net)),
        Err(e) => {
            tracing::warn!(error = %e, "image URLs cannot be fetched");
            service
        }
    };
    Arc::new(service)
}

/// Recall settings from `[memory]`.
pub fn memory_settings(config: &Config) -> MemorySettings {
    let m = &config.memory;
    MemorySettings {
        vector_weight: f64::from(m.vector_weight_pct) / 100.0,
        keyword_weight: f64::from(m.keyword_weight_pct) / 100.0,
        min_relevance: f64::from(m.min_relevance_pct) / 100.0,
        top_k: m.top_k as usize,
        context_chars: m.context_chars as usize,
        auto_save: m.auto_save,
    }
}

/// Hygiene settings from `[memory]`.
pub fn hygiene_settings(config: &Config) -> HygieneSettings {
    let m = &config.memory;
    HygieneSettings {
        enabled: m.hygiene_enabled,
        archive_after_days: m.archive_after_days,
        purge_after_days: m.purge_after_days,
        conversation_retention_days: m.conversation_retention_days,
        snapshot: m.snapshot_on_hygiene,
    }
}

/// The embeddings client of `[memory]`, `None` when no provider is set
/// (recall is then keyword-only).
pub fn embeddings(config: &Config) -> anyhow::Result<Option<EmbeddingsClient>> {
    let m = &config.memory;
    let Some(provider) = m.embeddings_provider.as_deref() else {
        return Ok(None);
    };
    let (base_url, model) = match provider {
        "openai" => ("https://api.openai.com/v1", "text-embedding-3-small"),
        "ollama" => ("http://localhost:11434/v1", "nomic-embed-text"),
        "openai-compatible" | "openai_compatible" => ("", ""),
        other => {
            return Err(BadInput(format!(
                "memory.embeddings_provider: unknown provider {other:?}; use openai, ollama or openai-compatible"
            ))
            .into());
        }
    };
    let base_url = m
        .embeddings_base_url
        .clone()
        .unwrap_or(base_url.to_string());
    let model = m.embeddings_model.clone().unwrap_or(model.to_string());
    if base_url.is_empty() || model.is_empty() {
        return Err(BadInput(
            "memory.embeddings_provider = \"openai-compatible\" needs memory.embeddings_base_url and memory.embeddings_model".to_string(),
        )
        .into());
    }
    if provider == "openai" && m.embeddings_api_key.is_none() {
        return Err(BadInput(
            "memory.embeddings_provider = \"openai\" needs memory.embeddings_api_key (or OPENAI_API_KEY)".to_string(),
        )
        .into());
    }
    let client = EmbeddingsClient::new(&EmbeddingsSettings {
        provider: provider.to_string(),
        base_url,
        model,
        dimensions: m.embeddings_dimensions,
        api_key: m.embeddings_api_key.clone(),
        timeout: Some(config.llm.timeout),
    })
    .map_err(|e| BadInput(format!("memory embeddings: {e}")))?;
    Ok(Some(client))
}

/// The owner's memory over `store`. At start-up (chat, daemon, `cairn
/// memory`), an empty memory store is hydrated from the workspace's
/// `MEMORY_SNAPSHOT.md` when `memory.auto_hydrate` is on.
pub async fn memory_service(config: &Config, store: &Store) -> anyhow::Result<Arc<MemoryService>> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut memory = MemoryService::new(
        store.clone(),
        config.user.id.clone(),
        Arc::clone(&clock),
        memory_settings(config),
    );
    if let Some(client) = embeddings(config)? {
        memory = memory.with_embeddings(client);
    }
    if config.memory.auto_hydrate {
        let loaded = hydrate(store, &config.user.id, &config.workspace, clock.now())
            .await
            .context("cannot hydrate memory from MEMORY_SNAPSHOT.md")?;
        if loaded > 0 {
            tracing::info!(memories = loaded, "memory hydrated from MEMORY_SNAPSHOT.md");
        }
    }
    Ok(Arc::new(memory))
}

/// The routine service for the configured user: the one writer of routine
/// operations for every front end (`routines.max_backfill` applied).
pub fn routine_service(config: &Config, store: &Store, clock: Arc<dyn Clock>) -> RoutineService {
    RoutineService::new(
        store.clone(),
        clock,
        config.user.id.clone(),
        config.user.timezone,
    )
    .with_max_backfill(config.routines.max_backfill)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fallback_api_key_never_shows_in_debug() {
        let f: Fallback = serde_json::from_value(serde_json::json!({
            "provider": "openai", "model": "m", "api_key": "sk-fallback-secret"
        }))
        .unwrap();
        let debug = format!("{f:?}");
        assert!(!debug.contains("sk-fallback-secret"), "{debug}");
    }
}
