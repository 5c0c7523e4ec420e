//! The memory service and its hygiene settings.

use std::sync::Arc;

use super::llm::embeddings;
use anyhow::Context;
use cairn_agent::memory::{HygieneSettings, MemoryService, MemorySettings, hydrate};
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::Config;
use cairn_store::{MAIN_AGENT, Store};

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
    match embeddings(config) {
        Ok(Some(client)) => memory = memory.with_embeddings(client),
        Ok(None) => {}
        // An unset key's variable leaves recall keyword-only, as without
        // embeddings; the error names the variable.
        Err(e) if config.memory.embeddings_api_key.get().is_err() => {
            tracing::warn!(error = %format!("{e:#}"), "memory recall is keyword-only here");
        }
        Err(e) => return Err(e),
    }
    if config.memory.auto_hydrate {
        // Each agent from the snapshot in its own workspace.
        let mut places = vec![(MAIN_AGENT.to_string(), config.workspace.clone())];
        for agent in super::agents(config)?.all() {
            if let Some(workspace) = &agent.workspace {
                places.push((agent.id.clone(), workspace.clone()));
            }
        }
        for (agent, workspace) in places {
            let loaded = hydrate(store, &config.user.id, &agent, &workspace, clock.now())
                .await
                .with_context(|| {
                    format!("cannot hydrate {agent}'s memory from MEMORY_SNAPSHOT.md")
                })?;
            if loaded > 0 {
                tracing::info!(agent = %agent, memories = loaded, "memory hydrated from MEMORY_SNAPSHOT.md");
            }
        }
    }
    Ok(Arc::new(memory))
}
