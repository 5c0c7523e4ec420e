//! `cairn mcp list|tools|test|serve`: the configured MCP servers, and cairn
//! as an MCP server.
//!
//! `list`, `tools` and `test` connect to the servers from this process (as
//! Claude Code's `mcp list` does): what they show is the server's answer
//! now, not a daemon's view. `serve` speaks MCP on standard input and
//! output, so it never prints anything else there (logs go to stderr).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use cairn_agent::PolicyGate;
use cairn_agent::ToolRunner;
use cairn_agent::memory::tools::memory_tools;
use cairn_agent::policy::PolicyDecision;
use cairn_agent::tools::offer::summary;
use cairn_agent::tools::{Tool, ToolContext, ToolRegistry};
use cairn_automation::notify::Notifier;
use cairn_automation::primitives::send::SendNotificationTool;
use cairn_automation::routines::link::EngineLink;
use cairn_automation::routines::tools::routine_tools;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::Config;
use cairn_mcp::resource::catalog;
use cairn_mcp::serve::tools::{InboxListTool, RoutineShowTool};
use cairn_mcp::serve::{AfterCall, CairnServer};
use cairn_mcp::{McpClients, Server, State, Status};
use cairn_store::Store;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::cli::McpCommand;
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Runs one `cairn mcp` subcommand.
pub fn run(command: &McpCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    // Servers with `sandbox = true` start in it; routine checks consult it.
    wiring::install_host_sandbox(&config)?;
    crate::commands::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        tokio::fs::create_dir_all(&config.workspace)
            .await
            .with_context(|| {
                format!("cannot create the workspace {}", config.workspace.display())
            })?;
        let result = match command {
            McpCommand::Serve => serve(&config, &store).await,
            McpCommand::List => list(&config, &store, as_json).await,
            McpCommand::Tools { server } => tools(&config, &store, server, as_json).await,
            McpCommand::Test { server } => test(&config, &store, server, as_json).await,
        };
        store.close().await;
        result
    })
}

/// A status as the commands show it: a server that could not be reached
/// here is `failed` (in a daemon it would be retried).
fn shown(mut status: Status) -> serde_json::Value {
    let state = match status.state {
        State::Restarting => "failed",
        other => other.as_str(),
    };
    if status.state == State::Restarting {
        status.restarts = 0;
    }
    let mut value = serde_json::to_value(&status).unwrap_or_default();
    value["state"] = json!(state);
    value
}

async fn list(config: &Config, store: &Store, as_json: bool) -> anyhow::Result<ExitCode> {
    let clients = wiring::mcp_clients(config, Some(store)).await?;
    clients.connect_all().await;
    let statuses: Vec<serde_json::Value> = clients.statuses().into_iter().map(shown).collect();
    clients.shutdown().await;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&statuses)?);
        return Ok(ExitCode::SUCCESS);
    }
    if statuses.is_empty() {
        println!("no MCP servers configured ([[mcp.servers]] in config.toml)");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<20} {:<9} {:>5}  {:<7} ENDPOINT",
        "NAME", "STATE", "TOOLS", "START"
    );
    for s in &statuses {
        println!(
            "{:<20} {:<9} {:>5}  {:<7} {}",
            s["name"].as_str().unwrap_or_default(),
            s["state"].as_str().unwrap_or_default(),
            s["tools"].as_u64().unwrap_or_default(),
            s["start"].as_str().unwrap_or_default(),
            s["endpoint"].as_str().unwrap_or_default(),
        );
        if let Some(error) = s["last_error"].as_str() {
            println!("{:<20} last error: {error}", "");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The named server, connected, or a bad-input error naming the configured ones.
async fn connected(clients: &McpClients, name: &str) -> anyhow::Result<Arc<Server>> {
    let Some(server) = clients.server(name) else {
        let known: Vec<&str> = clients.servers().iter().map(|s| s.name()).collect();
        return Err(BadInput(format!(
            "no MCP server named \"{name}\"; configured: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
        .into());
    };
    if server.state() == State::Disabled {
        return Err(BadInput(format!(
            "MCP server \"{name}\" is disabled (enabled = false)"
        ))
        .into());
    }
    if server.state() == State::Unavailable {
        let why = server.status().last_error.unwrap_or_default();
        return Err(BadInput(format!("MCP server \"{name}\" is unavailable: {why}")).into());
    }
    if let Err(e) = server.connection().await {
        // Here there is no "later": say why it failed.
        let why = server.status().last_error.unwrap_or_else(|| e.to_string());
        anyhow::bail!("MCP server \"{name}\": {why}");
    }
    Ok(Arc::clone(server))
}

async fn tools(
    config: &Config,
    store: &Store,
    name: &str,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let clients = wiring::mcp_clients(config, Some(store)).await?;
    let server = connected(&clients, name).await?;
    let mut policy = wiring::tools_config(config)?.policy;
    let (allow, deny) = clients.policy_rules();
    policy.allow.extend(allow);
    policy.deny.extend(deny);
    let gate = PolicyGate::new(&policy);
    let mut rows = Vec::new();
    for exposed in server.tools().iter() {
        let risk = server.risk_of(&exposed.remote);
        let policy = match gate.decide(&exposed.name, risk, "") {
            PolicyDecision::Allow => "allow",
            PolicyDecision::Ask => "ask",
            PolicyDecision::Deny { .. } => "deny",
        };
        rows.push(json!({
            "name": exposed.name,
            "server_name": exposed.remote.name,
            "risk": risk.as_str(),
            "policy": policy,
            "read_only_hint": exposed.remote.read_only,
            "destructive_hint": exposed.remote.destructive,
            "description": exposed.remote.description,
        }));
    }
    let offered = catalog(&server).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    clients.shutdown().await;
    if as_json {
        let out =
            json!({"tools": rows, "resources": offered.resources, "prompts": offered.prompts});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("tools ({}):", rows.len());
    for row in &rows {
        println!(
            "  {:<40} {:<9} {:<5} {}",
            row["name"].as_str().unwrap_or_default(),
            row["risk"].as_str().unwrap_or_default(),
            row["policy"].as_str().unwrap_or_default(),
            summary(row["description"].as_str().unwrap_or_default())
        );
    }
    println!("resources ({}):", offered.resources.len());
    for r in &offered.resources {
        println!("  {:<40} {}", r.uri, r.name);
    }
    println!("prompts ({}):", offered.prompts.len());
    for p in &offered.prompts {
        let args: Vec<String> = p
            .arguments
            .iter()
            .map(|(a, required)| {
                if *required {
                    a.clone()
                } else {
                    format!("[{a}]")
                }
            })
            .collect();
        println!("  {} {}", p.name, args.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

async fn test(
    config: &Config,
    store: &Store,
    name: &str,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let clients = wiring::mcp_clients(config, Some(store)).await?;
    let started = Instant::now();
    let server = connected(&clients, name).await?;
    let connected_ms = started.elapsed().as_millis();
    let listed = Instant::now();
    let offered = catalog(&server).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let catalog_ms = listed.elapsed().as_millis();
    let status = server.status();
    clients.shutdown().await;
    let out = json!({
        "server": status.name,
        "endpoint": status.endpoint,
        "tools": status.tools,
        "resources": offered.resources.len(),
        "prompts": offered.prompts.len(),
        "connect_ms": status.connect_ms,
        "tools_list_ms": status.list_ms,
        "resources_prompts_ms": catalog_ms,
        "total_ms": connected_ms + catalog_ms,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "ok: \"{}\" ({}) offers {} tools, {} resources, {} prompts",
            status.name,
            status.endpoint,
            status.tools,
            offered.resources.len(),
            offered.prompts.len()
        );
        println!(
            "connect {} ms, tools/list {} ms, resources+prompts {} ms, total {} ms",
            status.connect_ms.unwrap_or_default(),
            status.list_ms.unwrap_or_default(),
            catalog_ms,
            connected_ms + catalog_ms
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The tools `cairn mcp serve` offers, over this process's routine engine,
/// notifier and memory, behind the configured policy.
fn served_runner(
    config: &Config,
    store: &Store,
    automation: &wiring::Automation,
    memory: Arc<cairn_agent::memory::MemoryService>,
) -> anyhow::Result<Arc<ToolRunner>> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let link = EngineLink::new();
    link.attach(automation.engine.clone());
    let user = &config.user.id;
    let service = wiring::routine_service(config, store, clock).with_wake(link.clone());
    let mut tools: Vec<Arc<dyn Tool>> = routine_tools(service, link);
    tools.push(Arc::new(SendNotificationTool::new(
        automation.notifier.clone(),
        user.clone(),
    )));
    tools.extend(memory_tools(memory));
    tools.push(Arc::new(RoutineShowTool::new(store.clone(), user.clone())));
    tools.push(Arc::new(InboxListTool::new(store.clone(), user.clone())));
    let mut registry = ToolRegistry::new();
    for tool in tools {
        if cairn_mcp::serve::SERVED.contains(&tool.spec().name()) {
            registry
                .register(tool)
                .context("cannot register the served tools")?;
        }
    }
    let policy = PolicyGate::new(&wiring::tools_config(config)?.policy);
    Ok(Arc::new(ToolRunner::new(
        Arc::new(registry),
        Arc::new(policy),
    )))
}

/// Delivers what a served call recorded for delivery, or hands it to a
/// running daemon ([`super::delivery::settle`]).
struct Settle {
    config: Config,
    notifier: Notifier,
}

#[async_trait::async_trait]
impl AfterCall for Settle {
    async fn after_call(&self) -> Vec<String> {
        let settled = super::delivery::settle(&self.notifier, &self.config).await;
        settled.into_iter().map(|s| s.line).collect()
    }
}

async fn serve(config: &Config, store: &Store) -> anyhow::Result<ExitCode> {
    let automation = wiring::automation(config, store, None).await?;
    let memory = match &automation.runtime {
        Some(rt) => Arc::clone(&rt.memory),
        None => wiring::memory_service(config, store).await?,
    };
    // What calls and fired runs record for delivery (one router for the
    // engine and the tools) is delivered before the answer or the exit, or
    // handed to a running daemon.
    automation.notifier.keep_recorded();
    let settle = Arc::new(Settle {
        config: config.clone(),
        notifier: automation.notifier.clone(),
    });
    let runner = served_runner(config, store, &automation, memory)?;
    let tools = wiring::tools_config(config)?;
    let ctx = ToolContext::new(&config.workspace, "mcp")
        .with_timezone(config.user.timezone)
        .with_limits(tools.limits);
    let served = CairnServer::new(runner, ctx)
        .with_after_call(settle.clone())
        .serve_stdio()
        .await;
    // Runs fired over MCP finish (or are recorded interrupted) before exit.
    automation.engine.shutdown().await;
    if let Some(rt) = &automation.runtime {
        rt.jobs.shutdown().await;
        rt.background.shutdown().await;
        rt.mcp.get().shutdown().await;
    }
    // On stderr: standard output carries MCP only.
    for line in settle.after_call().await {
        eprintln!("{line}");
    }
    served.map_err(|e| anyhow::anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}
