//! The tool registry, its policy and sandbox, MCP servers and user hooks.

use std::sync::Arc;

use anyhow::Context;
use cairn_agent::hooks::command::{UserHooks, parse_hooks};
use cairn_agent::policy::{AutonomyLevel, PolicyDecision};
use cairn_agent::sandbox::Sandbox;
use cairn_agent::tools::browser::Browsers;
use cairn_agent::tools::net::NetClient;
use cairn_agent::tools::{RiskLevel, Tool, ToolRegistry, ToolsConfig, builtin_registry};
use cairn_agent::{AgentLoop, HookRegistry, LoopConfig, PolicyGate, ToolPolicyConfig, ToolRunner};
use cairn_core::config::Config;
use cairn_llm::Providers;
use cairn_mcp::{McpClients, Places, ServerSpec, Supervision};
use cairn_store::Store;
use secrecy::{ExposeSecret, SecretString};

use super::{config_file, located, section};
use crate::exit::BadInput;

/// The `[[mcp.servers]]` entries, checked, `${VAR}` expanded (nothing started).
/// A server naming an unset variable is kept, unavailable (never started),
/// its reason naming the file and line.
pub fn mcp_specs(config: &Config) -> anyhow::Result<Vec<ServerSpec>> {
    let section = config.mcp_servers.as_ref();
    let mut specs =
        cairn_mcp::parse_servers(section.map(|s| &s.value), config.env()).map_err(|problems| {
            let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
            located(config, section, &lines)
        })?;
    let at = format!("{}:{}", config_file(config), section.map_or(0, |s| s.line));
    for spec in &mut specs {
        if let Some(why) = &mut spec.unavailable {
            let located: Vec<String> = why.split("; ").map(|w| format!("{at}: {w}")).collect();
            *why = located.join("; ");
        }
    }
    Ok(specs)
}

/// The configured MCP servers, not started, each with its tool list
/// remembered in `store` (when given). Those that set `sandbox = true` start
/// in the host sandbox, which the caller's start-up installed
/// ([`install_sandbox`]).
pub async fn mcp_clients(
    config: &Config,
    store: Option<&Store>,
) -> anyhow::Result<Arc<McpClients>> {
    let specs = mcp_specs(config)?;
    // Each stdio server runs from a folder of its own in the home, never the workspace.
    let places = Places {
        workspace: config.workspace.clone(),
        servers: config.home().join("mcp"),
    };
    Ok(Arc::new(
        McpClients::new(specs, places, store.cloned(), Supervision::default()).await,
    ))
}

/// The `[tools]` table, with cairn's own secrets added to the forbidden
/// paths and kept from sandboxed commands; refused when it lets `shell` run
/// unapproved where commands cannot be confined (see [`check_unattended_shell`]).
pub fn tools_config(config: &Config) -> anyhow::Result<ToolsConfig> {
    let tools = parse_tools(config)?;
    check_unattended_shell(config, &tools)?;
    Ok(tools)
}

/// `tools.web_search.api_key = "${VAR}"` read from the environment. With
/// the variable unset the key is unavailable: `web_search` is offered and
/// each search fails naming the file, line, key and variable; everything
/// else runs.
fn expand_search_key(config: &Config, tools: &mut ToolsConfig) {
    let Some(search) = tools.web_search.as_mut() else {
        return;
    };
    let Some(key) = &search.api_key else {
        return;
    };
    let line = config.tools.as_ref().map_or(0, |s| s.line);
    match expand_secret(config, key, "tools.web_search.api_key", line) {
        Ok(expanded) => search.api_key = Some(expanded),
        Err(e) => {
            search.api_key = None;
            search.unavailable = Some(format!("{e:#}"));
        }
    }
}

/// A secret of config.toml with its `${VAR}`s read from the environment, as
/// every secret there may be written; an unset variable is bad input naming
/// the file, line and key.
pub(super) fn expand_secret(
    config: &Config,
    key: &SecretString,
    field: &str,
    line: usize,
) -> anyhow::Result<SecretString> {
    let expanded =
        cairn_core::text::expand_vars(key.expose_secret(), config.env()).map_err(|var| {
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
    expand_search_key(config, &mut tools);
    super::leaks::expand_credentials(config, &mut tools)?;
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
/// sandbox (what routine checks and sandboxed MCP servers consult): once,
/// at the start of the daemon or of a command that needs it. Cheap: the
/// kernel is probed once.
pub fn install_sandbox(tools: &ToolsConfig) -> anyhow::Result<Arc<Sandbox>> {
    let sandbox = Arc::new(Sandbox::new(tools.shell.sandbox_settings()));
    cairn_agent::sandbox::install(Arc::clone(&sandbox))?;
    Ok(sandbox)
}

/// [`install_sandbox`] over `config`'s `[tools]`, for a command's start-up.
pub fn install_host_sandbox(config: &Config) -> anyhow::Result<Arc<Sandbox>> {
    install_sandbox(&parse_tools(config)?)
}

/// The host sandbox replaced by one over a reloaded `[tools]`.
pub fn reconfigure_sandbox(tools: &ToolsConfig) -> anyhow::Result<()> {
    let sandbox = Arc::new(Sandbox::new(tools.shell.sandbox_settings()));
    cairn_agent::sandbox::reconfigure(sandbox)?;
    Ok(())
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
    let (registry, policy) = tool_parts(tools, extra, mcp, &[])?;
    Ok(Arc::new(ToolRunner::new(
        Arc::new(registry),
        Arc::new(PolicyGate::new(&policy)),
    )))
}

/// What [`tool_runner`] runs: the registry and the policy with the MCP
/// servers' rules added (also what a reload puts in force). Tools matching
/// `hidden` (an agent's denied ones) are not registered at all, so never
/// offered.
pub fn tool_parts(
    tools: &ToolsConfig,
    extra: Vec<Arc<dyn Tool>>,
    mcp: Option<&McpClients>,
    hidden: &[String],
) -> anyhow::Result<(ToolRegistry, ToolPolicyConfig)> {
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
    if !hidden.is_empty() {
        let hidden: Vec<String> = hidden
            .iter()
            .map(|p| cairn_agent::names::normalize_name(p))
            .collect();
        registry.retain(|name| {
            !hidden
                .iter()
                .any(|p| cairn_agent::policy::glob_match(p, name))
        });
    }
    // Requests carry the built-ins' schemas; the others load on demand.
    registry
        .enable_schema_tool()
        .context("cannot register tool_schema")?;
    Ok((registry, policy))
}

/// The browser `tools.browser` names, or the first on `PATH`; `Err` says
/// what was looked for and how to install one (`doctor`'s advice).
pub fn browser_executable(
    config: &Config,
    tools: &ToolsConfig,
) -> Result<std::path::PathBuf, String> {
    let path = config.env().get("PATH").map(std::ffi::OsStr::new);
    tools.browser.find_executable(path)
}

/// Every agent's browser (`browser_*`), under `[tools.http]`'s rules and
/// the shell's sandbox, profiles in `CAIRN_HOME/browser`; `None` (and the
/// tools not offered) when no browser is found.
pub fn browsers(config: &Config, tools: &ToolsConfig) -> anyhow::Result<Option<Arc<Browsers>>> {
    let executable = match browser_executable(config, tools) {
        Ok(executable) => executable,
        Err(why) => {
            tracing::info!(%why, "the browser tools are not offered");
            return Ok(None);
        }
    };
    let net =
        NetClient::new(tools.http.clone()).map_err(|e| BadInput(format!("tools.http: {e}")))?;
    Ok(Some(Arc::new(Browsers::new(
        tools.browser.clone(),
        executable,
        config.home().join("browser"),
        Arc::new(net),
        Arc::new(Sandbox::new(tools.shell.sandbox_settings())),
    ))))
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
