//! A reload of `[[agents]]` and their bindings while the daemon runs: the
//! new table is checked whole and every agent it names is built before
//! anything changes, then each place that knows the agents is given the
//! new set (the chats' routing, the gateway's `/v1` and `?agent=`, the
//! routine engine and the routine services, delegation, the cost lines).
//!
//! An agent whose entry did not change keeps its loop and chat service, so
//! its sessions and pending approvals go on; a changed one is built anew,
//! and a turn in progress finishes on the one it started with.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_agent::agents::{ChatSet, Chats};
use cairn_automation::routines::service::agent_ids;
use cairn_core::clock::{Clock, SystemClock};

use super::{AgentRun, Runtime, agent_chat, agent_profiles, agents, routine_agents, tools_config};
use crate::daemon::reload::Reloader;

/// Registers the reload of `[[agents]]` for a daemon's runtime and chats.
pub fn register_agent_reload(reloader: &mut Reloader, rt: &Runtime, chats: &Arc<Chats>) {
    let kit = rt.agent_kit();
    let (runs, ids, routine) = (
        rt.agents.clone(),
        rt.agent_ids.clone(),
        rt.routine_agents.clone(),
    );
    let (delegator, limits) = (Arc::clone(&rt.delegator), rt.tools.limits.clone());
    let chats = Arc::clone(chats);
    reloader.on(&["agents"], move |config| {
        let (kit, runs, ids, routine) = (kit.clone(), runs.clone(), ids.clone(), routine.clone());
        let (delegator, limits, chats) =
            (Arc::clone(&delegator), limits.clone(), Arc::clone(&chats));
        async move {
            let table = agents(&config)?;
            let mut tools = tools_config(&config)?;
            tools.limits = limits;
            let (old_runs, old_set) = (runs.get(), chats.set());
            let mut new_runs = Vec::new();
            let mut services = BTreeMap::new();
            for spec in table
                .all()
                .iter()
                .filter(|a| a.id != cairn_agent::agents::MAIN)
            {
                let kept = old_runs.iter().find(|r| r.spec == *spec).and_then(|run| {
                    let service = old_set.others().get(&spec.id)?;
                    Some((run.clone(), Arc::clone(service)))
                });
                let (run, service) = match kept {
                    Some(kept) => kept,
                    None => {
                        let run = super::agents::agent_run(spec, &kit, &tools).await?;
                        let main = chats.main().settings();
                        let service = agent_chat(&config, &kit, &tools, main, &run);
                        (run, service)
                    }
                };
                services.insert(spec.id.clone(), service);
                new_runs.push(run);
            }
            let set = ChatSet::new(table.clone(), services).map_err(anyhow::Error::msg)?;
            // Checked and built: from here on nothing fails.
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            kit.guard.set_agents(table.shares());
            routine.set(Arc::new(routine_agents(
                &config,
                &new_runs,
                &tools.limits,
                &clock,
            )));
            delegator.set_agents(agent_profiles(&config, &kit.main, &new_runs));
            ids.set(Arc::new(agent_ids(
                table.all().iter().map(|a| a.id.clone()),
            )));
            chats.replace(set);
            runs.set(Arc::new(new_runs));
            log_change(&old_runs, &runs.get());
            Ok(())
        }
    });
}

/// Says which agents a reload added, changed and removed.
fn log_change(before: &[AgentRun], after: &[AgentRun]) {
    let ids =
        |runs: &[AgentRun]| -> Vec<String> { runs.iter().map(|r| r.spec.id.clone()).collect() };
    let (old, new) = (ids(before), ids(after));
    let added: Vec<&String> = new.iter().filter(|id| !old.contains(id)).collect();
    let removed: Vec<&String> = old.iter().filter(|id| !new.contains(id)).collect();
    let changed: Vec<&String> = after
        .iter()
        .filter(|r| {
            before
                .iter()
                .any(|b| b.spec.id == r.spec.id && b.spec != r.spec)
        })
        .map(|r| &r.spec.id)
        .collect();
    tracing::info!(?added, ?changed, ?removed, "agents reloaded");
}
