//! What a running daemon applies when its configuration is reloaded, by
//! key: the daemon's reload hooks register exactly these, and the reference
//! (`docs/configuration.md`) names every other key as needing a restart.

/// What a running daemon applies when its configuration is reloaded
/// (SIGHUP, or config.toml changed): keys, tables, and prefixes (`notify`
/// stands for every `notify.*`). Everything else needs a restart. The
/// daemon's reload hooks cover exactly these (a test in the binary checks).
pub static RELOADABLE: &[&str] = &[
    "notify",
    "channels",
    "routines.max_concurrent",
    "routines.max_waiting",
    "heartbeat",
    "cost.daily_budget_cents",
    "cost.hourly_action_limit",
    "llm.provider",
    "llm.base_url",
    "llm.api_key",
    "llm.openai_api_key",
    "llm.anthropic_api_key",
    "llm.model",
    "llm.cheap_model",
    "llm.timeout_secs",
    "llm.max_retries",
    "llm.vision",
    "llm.prices",
    "llm.fallbacks",
    "routing",
    "tools.policy",
    "tools.shell",
    "tools.files",
    "tools.http",
    "tools.web_search",
    "mcp.servers",
    "agents",
];

/// Tables of a partly reloadable free-form table that need a restart.
pub static RESTART_TABLES: &[&str] = &["tools.limits", "tools.browser"];

/// Whether a reload applies `key` (a setting or a table).
pub fn reloadable(key: &str) -> bool {
    RELOADABLE.iter().any(|p| {
        key == *p
            || key
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}
