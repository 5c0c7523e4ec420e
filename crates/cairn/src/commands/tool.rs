//! `cairn tool list|enable`: the agent's tools and their health.
//!
//! A tool that failed `repair.tool_failure_limit` times in a row is disabled
//! for the agent in every process on the database (self-repair); `enable`
//! lifts that and clears its failures. Both talk to the store only, so they
//! work whether or not a daemon runs: a running agent sees the change at its
//! next model call.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use cairn_agent::tools::builtin_registry;
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_automation::primitives::parallel::RunParallelTool;
use cairn_automation::routines::link::EngineLink;
use cairn_automation::routines::ops_tools::routine_ops_tools;
use cairn_automation::routines::tools::routine_tools;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::Config;
use cairn_store::{Store, ToolHealthRow};
use secrecy::ExposeSecret;
use serde::Serialize;

use crate::cli::ToolCommand;
use crate::exit::BadInput;
use crate::settings;

/// One tool as `cairn tool list` shows it.
#[derive(Debug, Serialize)]
struct ToolState {
    name: String,
    enabled: bool,
    consecutive_failures: u64,
    last_error: Option<String>,
}

/// Runs one `cairn tool` subcommand.
pub fn run(command: &ToolCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    // The routine tools' checks (a `shell` in allowed_tools) judge by this
    // configuration, and so do sandboxed MCP servers.
    crate::wiring::install_host_sandbox(&config)?;
    crate::commands::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let result = match command {
            ToolCommand::List => list(&config, &store, as_json).await,
            ToolCommand::Enable { name } => enable(&config, &store, name, as_json).await,
        };
        store.close().await;
        result
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Every tool name the agent can have: the built-ins, the automation tools
/// and any tool with a health record (one registered elsewhere).
fn known_tools(
    config: &Config,
    store: &Store,
    health: &[ToolHealthRow],
) -> anyhow::Result<BTreeSet<String>> {
    let tools = crate::wiring::tools_config(config)?;
    let registry = builtin_registry(&tools).context("cannot set up the tools")?;
    let mut names: BTreeSet<String> = registry.names().into_iter().map(str::to_string).collect();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let service = crate::wiring::routine_service(config, store, Arc::clone(&clock));
    let mut extra = routine_tools(service.clone(), EngineLink::new());
    extra.extend(routine_ops_tools(service));
    let link = RunnerLink::new();
    extra.push(Arc::new(RunParallelTool::new(Arc::clone(&link))));
    extra.extend(BackgroundTasks::new(store.clone(), link, clock, "cli".to_string()).tools());
    names.extend(extra.iter().map(|t| t.spec().name().to_string()));
    names.insert("send_notification".to_string());
    // The browser's, when one is installed.
    if let Some(browsers) = crate::wiring::browsers(config, &tools)? {
        let browser_tools = browsers.tools(cairn_agent::agents::MAIN, &config.workspace);
        names.extend(browser_tools.iter().map(|t| t.spec().name().to_string()));
    }
    names.extend(health.iter().map(|h| h.name.clone()));
    Ok(names)
}

async fn list(config: &Config, store: &Store, as_json: bool) -> anyhow::Result<()> {
    let health = store.list_tool_health().await?;
    let names = known_tools(config, store, &health)?;
    let states: Vec<ToolState> = names
        .into_iter()
        .map(|name| {
            let row = health.iter().find(|h| h.name == name);
            ToolState {
                enabled: !row.is_some_and(|r| r.disabled),
                consecutive_failures: row.map_or(0, |r| r.consecutive_failures),
                last_error: row.and_then(|r| r.last_error.clone()),
                name,
            }
        })
        .collect();
    if as_json {
        println!("{}", serde_json::to_string_pretty(&states)?);
        return Ok(());
    }
    println!(
        "{:<20}  {:<8}  {:>8}  LAST ERROR",
        "TOOL", "STATE", "FAILURES"
    );
    for s in &states {
        let error: String = s
            .last_error
            .as_deref()
            .unwrap_or("-")
            .lines()
            .next()
            .unwrap_or("-")
            .chars()
            .take(80)
            .collect();
        println!(
            "{:<20}  {:<8}  {:>8}  {}",
            s.name,
            if s.enabled { "enabled" } else { "disabled" },
            s.consecutive_failures,
            error
        );
    }
    Ok(())
}

async fn enable(config: &Config, store: &Store, name: &str, as_json: bool) -> anyhow::Result<()> {
    let health = store.list_tool_health().await?;
    let names = known_tools(config, store, &health)?;
    let name = name.trim();
    if !names.contains(name) {
        let list: Vec<&str> = names.iter().map(String::as_str).collect();
        return Err(BadInput(format!(
            "no tool named \"{name}\"; known tools: {}",
            list.join(", ")
        ))
        .into());
    }
    let was_disabled = store.enable_tool(name, chrono::Utc::now()).await?;
    if as_json {
        let out =
            serde_json::json!({ "name": name, "enabled": true, "was_disabled": was_disabled });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if was_disabled {
        println!("enabled {name}; the agent can call it again");
    } else {
        println!("{name} was not disabled; its failure count is cleared");
    }
    Ok(())
}
