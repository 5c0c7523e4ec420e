//! What a configuration reload changes in a running process: one hook per
//! part ([`register_reloads`]), each checking the whole new value before it
//! puts anything in force, so a refused value leaves the old one running.
//! The keys registered here are exactly
//! [`RELOADABLE`](cairn_core::config::reloadable::RELOADABLE), which the
//! configuration reference lists with every key that needs a restart.
//!
//! Turns in progress keep what they started with: the agent loop pins the
//! provider and the tool runner at the start of a turn
//! ([`cairn_agent::AgentLoop::run`]). The cost limits are the exception:
//! they judge every LLM call when it is made, so a lowered budget also
//! stops a turn in progress at its next call.

use std::sync::Arc;

use cairn_agent::GuardedProvider;
use cairn_core::config::reloadable::RELOADABLE;
use cairn_llm::{LlmProvider, build_providers};

use super::{Automation, Runtime, channel_set, heartbeat_settings, llm_settings, notify_settings};
use super::{
    agent_tools, ensure_system_routines, mcp_specs, reconfigure_sandbox, tool_parts, tools_config,
};
use crate::daemon::reload::Reloader;
use crate::exit::BadInput;

/// The reloadable keys under these prefixes (one list, `RELOADABLE`, says
/// what reloads: the LLM settings are all of `[llm]` but `context_limit`,
/// which sizes the chat's context monitor at start; the tools' all of
/// `[tools]` but `limits`, copied into every turn's context at start).
fn reloadable_under(prefixes: &[&str]) -> Vec<&'static str> {
    RELOADABLE
        .iter()
        .copied()
        .filter(|key| prefixes.iter().any(|p| key.starts_with(p)))
        .collect()
}

/// Registers every part of `automation` that takes new settings while
/// running.
pub fn register_reloads(reloader: &mut Reloader, automation: &Automation) {
    let notifier = automation.notifier.clone();
    reloader.on(&["notify", "channels"], move |config| {
        let notifier = notifier.clone();
        async move {
            let channels = channel_set(&config)?;
            notifier.reload(Arc::new(channels), notify_settings(&config));
            Ok(())
        }
    });
    let engine = automation.engine.clone();
    reloader.on(
        &["routines.max_concurrent", "routines.max_waiting"],
        move |config| {
            engine.set_max_concurrent(config.routines.max_concurrent);
            engine.set_max_waiting(config.routines.max_waiting);
            async { Ok(()) }
        },
    );
    // The heartbeat task reads its new settings at its next beat; its
    // routine (interval, enabled) is ensured again in the background.
    let heartbeat = Arc::clone(&automation.heartbeat);
    let store = automation.engine.store().clone();
    reloader.on(&["heartbeat"], move |config| {
        heartbeat.reload(heartbeat_settings(&config));
        let store = store.clone();
        tokio::spawn(async move {
            if let Err(e) = ensure_system_routines(&config, &store).await {
                tracing::warn!(error = %format!("{e:#}"), "cannot update the heartbeat routine after a reload");
            }
        });
        async { Ok(()) }
    });
    // A secret stored or removed in the vault by another process is
    // watched at once (the guard every part of the daemon shares).
    if let Some(leaks) = automation.notifier.leaks().cloned() {
        reloader.on_vault(move |config| {
            leaks.replace(&super::watched_secrets(&config, Vec::new()));
            async { Ok(()) }
        });
    }
    // Without an LLM at start there is no agent to reconfigure: its keys
    // then need a restart (reported so).
    if let Some(rt) = &automation.runtime {
        register_runtime_reloads(reloader, rt);
    }
}

/// The agent runtime's reloadable parts: cost limits, LLM settings and
/// routing, tools and MCP servers.
fn register_runtime_reloads(reloader: &mut Reloader, rt: &Runtime) {
    let guard = Arc::clone(&rt.reloadable.guard);
    reloader.on(&reloadable_under(&["cost."]), move |config| {
        guard.set_limits(&config.cost);
        async { Ok(()) }
    });
    let (parts, router) = (rt.reloadable.clone(), rt.router.clone());
    reloader.on(&reloadable_under(&["llm.", "routing"]), move |config| {
        let (parts, router) = (parts.clone(), router.clone());
        async move {
            let llm = llm_settings(&config)?;
            let raw = build_providers(&llm).map_err(|e| BadInput(e.to_string()))?;
            let guarded = |p| -> Arc<dyn LlmProvider> {
                Arc::new(GuardedProvider::new(p, Arc::clone(&parts.guard)))
            };
            let (main, cheap) = (guarded(raw.main), guarded(raw.cheap));
            // Routes on the main provider share the reloadable one.
            let main_handle: Arc<dyn LlmProvider> = Arc::new(parts.main.clone());
            let routes = crate::routing::router(&config, &llm, &main_handle, &parts.guard)?;
            parts.main.replace(main);
            parts.cheap.replace(cheap);
            router.set(Arc::new(routes.unwrap_or_default()));
            Ok(())
        }
    });
    // The secrets watched follow the configuration's (the vault's are added
    // where the vault changes).
    let leaks = rt.leaks.clone();
    reloader.on(
        &reloadable_under(&["llm.", "tools.", "mcp.", "channels"]),
        move |config| {
            leaks.replace(&super::watched_secrets(&config, Vec::new()));
            async { Ok(()) }
        },
    );
    let (runner, mcp) = (Arc::clone(rt.agent.runner()), rt.mcp.clone());
    let (extra, limits) = (rt.reloadable.extra_tools.clone(), rt.tools.limits.clone());
    let agents = rt.agents.clone();
    let browsers = rt.browsers.clone();
    reloader.on(&reloadable_under(&["tools.", "mcp."]), move |config| {
        let (runner, mcp, extra, limits, agents, browsers) = (
            Arc::clone(&runner),
            mcp.clone(),
            extra.clone(),
            limits.clone(),
            agents.clone(),
            browsers.clone(),
        );
        async move {
            let mut tools = tools_config(&config)?;
            tools.limits = limits;
            let specs = mcp_specs(&config)?;
            let next = mcp.get().reconfigured(specs).await;
            let (registry, policy) = tool_parts(&tools, extra.clone(), Some(&next.clients), &[])?;
            // Every agent follows the new global policy too (an agent never
            // keeps a tool the owner just denied).
            let agents = agents.get();
            let mut theirs = Vec::new();
            for run in agents.iter() {
                theirs.push(agent_tools(
                    &tools,
                    &run.spec,
                    &run.extra,
                    Some(&next.clients),
                )?);
            }
            // Fails only where start-up installed no host sandbox.
            reconfigure_sandbox(&tools)?;
            let net = cairn_agent::tools::net::NetClient::new(tools.http.clone())?;
            // Checked: from here on nothing fails.
            if let Some(browsers) = &browsers {
                // The browsers' pages follow the new network rules at once.
                browsers.set_network(net);
            }
            let policy = runner.policy().reconfigured(&policy);
            runner.replace(Arc::new(registry), Arc::new(policy));
            for (run, (registry, policy)) in agents.iter().zip(theirs) {
                let runner = run.agent.runner();
                let policy = runner.policy().reconfigured(&policy);
                runner.replace(Arc::new(registry), Arc::new(policy));
            }
            next.clients.start();
            mcp.set(Arc::new(next.clients));
            for server in next.retired {
                tokio::spawn(async move { server.stop().await });
            }
            Ok(())
        }
    });
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
