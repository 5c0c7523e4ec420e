//! Turning the configuration into running parts: LLM providers, tools and
//! policy, the agent loop, sessions and the chat service. One place, so
//! `chat`, `job`, the daemon and `doctor` build things the same way.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_agent::chat::{ChatService, ChatSettings};
use cairn_agent::jobs::{JobScheduler, JobsConfig};
use cairn_agent::prompt::{PromptContext, RuntimeInfo, build_system_prompt};
use cairn_agent::session::SessionManager;
use cairn_agent::tools::{ToolContext, ToolsConfig, builtin_registry};
use cairn_agent::{
    AgentLoop, Compactor, ContextMonitor, CostGuard, GuardedProvider, HookRegistry, LoopConfig,
    PolicyGate, ToolRunner,
};
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::{Config, Section};
use cairn_llm::{LlmSettings, PriceTable, ProviderSettings, Providers, build_providers};
use cairn_store::Store;
use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::exit::BadInput;

/// How often idle sessions are looked for.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Deserializes a free-form config table, naming the file, line and key on error.
fn section<T: serde::de::DeserializeOwned>(
    config: &Config,
    key: &str,
    section: &Section,
) -> anyhow::Result<T> {
    serde_json::from_value(section.value.clone()).map_err(|e| {
        let file = config
            .settings
            .file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        BadInput(format!("{file}:{}: {key}: {e}", section.line)).into()
    })
}

/// One `[[llm.fallbacks]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fallback {
    provider: String,
    model: String,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
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
        for f in entries {
            let mut settings = base(&f.provider, &f.model)?;
            if let Some(url) = f.base_url {
                settings = settings.with_base_url(url);
            }
            if let Some(key) = f.api_key {
                settings = settings.with_api_key(key);
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

/// The `[tools]` table, with cairn's own secrets added to the forbidden paths.
pub fn tools_config(config: &Config) -> anyhow::Result<ToolsConfig> {
    let mut tools: ToolsConfig = match &config.tools {
        Some(sec) => section(config, "tools", sec)?,
        None => ToolsConfig::default(),
    };
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
    for path in private {
        if !tools.shell.forbidden_paths.contains(&path) {
            tools.shell.forbidden_paths.push(path.clone());
        }
        if !tools.files.forbidden_paths.contains(&path) {
            tools.files.forbidden_paths.push(path);
        }
    }
    Ok(tools)
}

/// The agent loop over the main provider and the configured tools.
pub fn agent_loop(
    config: &Config,
    providers: &Providers,
    tools: &ToolsConfig,
) -> anyhow::Result<AgentLoop> {
    let registry = builtin_registry(tools).context("cannot set up the tools")?;
    let policy = PolicyGate::new(&tools.policy);
    let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
    Ok(AgentLoop::new(
        Arc::clone(&providers.main),
        runner,
        Arc::new(HookRegistry::new()),
        LoopConfig {
            max_iterations: config.agent.max_iterations,
            ..LoopConfig::default()
        },
    ))
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
    let raw = providers(config)?;
    let providers = Providers {
        main: Arc::new(GuardedProvider::new(raw.main, Arc::clone(&guard))),
        cheap: Arc::new(GuardedProvider::new(raw.cheap, Arc::clone(&guard))),
    };
    let tools = tools_config(config)?;
    let agent = agent_loop(config, &providers, &tools)?;
    std::fs::create_dir_all(&config.workspace)
        .with_context(|| format!("cannot create the workspace {}", config.workspace.display()))?;

    let base_ctx = ToolContext::new(&config.workspace, "jobs")
        .with_timezone(config.user.timezone)
        .with_clock(Arc::clone(&clock))
        .with_limits(tools.limits.clone());
    let mut jobs_config = JobsConfig::from_agent(&config.agent);
    jobs_config.system_prompt = build_system_prompt(&PromptContext {
        agent_name: config.agent.name.clone(),
        workspace: config.workspace.clone(),
        timezone: config.user.timezone,
        now: clock.now(),
        model: providers.main.model().to_string(),
        tools: agent.runner().registry().definitions(),
        runtime: RuntimeInfo::detect(),
    })
    .await;
    let jobs = JobScheduler::builder(
        store.clone(),
        Arc::clone(&providers.main),
        Arc::clone(agent.runner()),
        base_ctx,
    )
    .config(jobs_config)
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
    })
}

/// Everything a chat channel needs; idle sessions are pruned every 10 minutes.
pub fn chat_service(config: &Config, rt: &Runtime) -> ChatService {
    let sessions = Arc::new(SessionManager::new(
        rt.store.clone(),
        Arc::new(SystemClock),
        config.agent.undo_depth as usize,
        config.agent.session_idle,
    ));
    // Runs until the process ends; pruning skips a session that is busy.
    drop(sessions.spawn_pruner(PRUNE_EVERY));
    let monitor = ContextMonitor::for_model(
        config.llm.context_limit as usize,
        rt.providers.main.context_window(),
    );
    let compactor = Compactor::new(Arc::clone(&rt.providers.cheap), config.workspace.clone())
        .with_monitor(monitor)
        .with_time_zone(config.user.timezone);
    ChatService::new(
        sessions,
        rt.agent.clone(),
        ChatSettings {
            agent_name: config.agent.name.clone(),
            workspace: config.workspace.clone(),
            timezone: config.user.timezone,
            runtime: RuntimeInfo::detect(),
            tool_limits: rt.tools.limits.clone(),
        },
    )
    .with_compactor(Arc::new(compactor))
    .with_jobs(Arc::clone(&rt.jobs))
}
