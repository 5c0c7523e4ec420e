//! Leak detection's wiring (issue 47): which secrets a configuration
//! watches ([`watched_secrets`]), the credentials bound to hosts (checked
//! and expanded), and the one [`LeakGuard`] a process's parts share.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_agent::safety::leak::{LeakGuard, StoreLeakRecorder, WatchedSecret};
use cairn_agent::tools::ToolsConfig;
use cairn_automation::notify::Notifier;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::credentials::credential_problems;
use cairn_core::config::{Config, is_secret_name};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::{RouterNotifier, config_file, expand_secret};
use crate::exit::BadInput;

/// Every secret this configuration holds, plus `extra` (the vault's pairs,
/// which name a value first when it is also configured): the resolved
/// secret settings (`llm.api_key`, `memory.embeddings_api_key`,
/// `gateway.webhook_secret`), and in the free-form tables (`[channels]`,
/// `[[mcp.servers]]`, `[tools]`, `[[llm.fallbacks]]`) every string under a
/// secret-sounding key (token, key, secret, password, auth, credential,
/// cookie; MCP `env` and `headers` entries so named, host credentials).
/// A string written `${VAR}` is watched as `VAR`'s value, named `VAR`; one
/// written in the file as it is, named by its key. `${VAR}`s whose own name
/// sounds secret are watched wherever they are written.
pub fn watched_secrets(config: &Config, extra: Vec<WatchedSecret>) -> Vec<WatchedSecret> {
    let mut out = extra;
    // The vault's values this process read (a daemon reads them all).
    out.extend(
        config
            .env()
            .secrets()
            .iter()
            .map(|(name, value)| WatchedSecret::new(name.clone(), value.clone())),
    );
    let env = config.env().vars();
    let typed = [
        ("llm.api_key", config.llm.api_key.get()),
        (
            "memory.embeddings_api_key",
            config.memory.embeddings_api_key.get(),
        ),
    ];
    for (name, value) in typed {
        if let Ok(Some(value)) = value {
            out.push(WatchedSecret::new(name, value.clone()));
        }
    }
    if let Some(secret) = &config.gateway.webhook_secret {
        walk(
            &Value::String(secret.expose_secret().to_string()),
            "gateway.webhook_secret",
            true,
            env,
            &mut out,
        );
    }
    let sections = [
        ("channels", &config.notify.channels),
        ("mcp.servers", &config.mcp_servers),
        ("tools", &config.tools),
        ("llm.fallbacks", &config.llm.fallbacks),
    ];
    for (key, section) in sections {
        if let Some(section) = section {
            walk(&section.value, key, false, env, &mut out);
        }
    }
    out
}

/// Collects the secrets of one value at `path` (`secret`: under a
/// secret-sounding key).
fn walk(
    value: &Value,
    path: &str,
    secret: bool,
    env: &BTreeMap<String, String>,
    out: &mut Vec<WatchedSecret>,
) {
    match value {
        Value::String(text) => {
            let vars = referenced_vars(text);
            for var in &vars {
                if (secret || is_secret_name(var))
                    && let Some(value) = env.get(*var)
                {
                    out.push(WatchedSecret::new(*var, SecretString::from(value.clone())));
                }
            }
            // A `${secret:…}` reference is the vault's, watched through `extra`.
            if secret && vars.is_empty() && !text.contains("${") {
                out.push(WatchedSecret::new(path, SecretString::from(text.clone())));
            }
        }
        Value::Object(map) => {
            for (key, v) in map {
                let inner = format!("{path}.{key}");
                if inner == "tools.http.credentials" {
                    credentials(v, &inner, env, out);
                    continue;
                }
                walk(v, &inner, secret || is_secret_name(key), env, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, &format!("{path}[{i}]"), secret, env, out);
            }
        }
        _ => {}
    }
}

/// Host credentials: each one's `value` (its `host`, `header` and `query`
/// name things, not secrets).
fn credentials(
    list: &Value,
    path: &str,
    env: &BTreeMap<String, String>,
    out: &mut Vec<WatchedSecret>,
) {
    for (i, entry) in list.as_array().into_iter().flatten().enumerate() {
        if let Some(value) = entry.get("value") {
            walk(value, &format!("{path}[{i}].value"), true, env, out);
        }
    }
}

/// The names of the `${NAME}` environment references in `text` (not the
/// vault's `${secret:NAME}`).
fn referenced_vars(text: &str) -> Vec<&str> {
    cairn_core::text::var_names(text)
        .into_iter()
        .filter(|name| !name.contains(':') && !name.is_empty())
        .collect()
}

/// A guard watching `config`'s secrets; nothing recorded until
/// [`attach_recorder`] gives it the store.
pub fn leak_guard(config: &Config) -> LeakGuard {
    LeakGuard::new(&watched_secrets(config, Vec::new()))
}

/// [`leak_guard`] watching every value of the vault too, not only those
/// config.toml refers to: a command that runs tools (`chat`, `routine
/// fire`) guards what the daemon guards. A vault that cannot be read
/// leaves the configuration's secrets watched, and says so.
pub async fn leak_guard_with_vault(config: &Config, store: &cairn_store::Store) -> LeakGuard {
    let source = crate::vault::KeySource::of(config);
    let values = match crate::vault::open_key(&source, store, false).await {
        Ok(Some(key)) => store.vault_values(&key).await.map_err(anyhow::Error::from),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let vault = match values {
        Ok(values) => values
            .into_iter()
            .map(|(name, value)| WatchedSecret::new(name, value))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "cannot read the vault: leak detection watches only the secrets config.toml names");
            Vec::new()
        }
    };
    LeakGuard::new(&watched_secrets(config, vault))
}

/// Records `leaks`' findings in `store`, telling the owner through `notifier`.
pub fn attach_recorder(
    leaks: &LeakGuard,
    config: &Config,
    store: &cairn_store::Store,
    notifier: &Notifier,
) {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let tell = Arc::new(RouterNotifier(notifier.clone(), Arc::clone(&clock)));
    leaks.attach_recorder(Arc::new(StoreLeakRecorder::new(
        store.clone(),
        tell,
        clock,
        config.user.id.clone(),
    )));
}

/// `[[tools.http.credentials]]` checked (every problem named by file, line
/// and field) and their values' `${VAR}`s expanded.
pub(super) fn expand_credentials(config: &Config, tools: &mut ToolsConfig) -> anyhow::Result<()> {
    let line = config.tools.as_ref().map_or(0, |s| s.line);
    let problems = credential_problems(&tools.http.credentials);
    if !problems.is_empty() {
        let file = config_file(config);
        let lines: Vec<String> = problems
            .iter()
            .map(|p| format!("{file}:{line}: {p}"))
            .collect();
        return Err(BadInput(lines.join("\n")).into());
    }
    for (i, credential) in tools.http.credentials.iter_mut().enumerate() {
        let field = format!("tools.http.credentials[{i}].value");
        credential.value = expand_secret(config, &credential.value, &field, line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_read_but_not_the_vaults() {
        assert_eq!(
            referenced_vars("Bearer ${GH_TOKEN} and ${B} ${secret:V} ${"),
            ["GH_TOKEN", "B"]
        );
    }

    #[test]
    fn secrets_are_found_under_secret_keys_and_by_variable() {
        let env: BTreeMap<String, String> = [
            ("GH_TOKEN".to_string(), "ghtoken-value-1".to_string()),
            ("HOME_DIR".to_string(), "/home/someone".to_string()),
            ("PLAIN".to_string(), "plain-value-22".to_string()),
        ]
        .into();
        let table = serde_json::json!({
            "phone": {"bot_token": "literal-token-1", "chat_id": "123456789"},
            "srv": {"env": {"HOME": "${HOME_DIR}", "API_KEY": "${PLAIN}"}, "args": ["${GH_TOKEN}"]},
            "vaulted": {"token": "${secret:V}"},
            "http": {"credentials": [{"host": "api.example.com:8443", "header": "X-Key", "value": "Bearer ${PLAIN}"}]}
        });
        let mut out = Vec::new();
        walk(&table, "tools", false, &env, &mut out);
        let mut found: Vec<(String, String)> = out
            .iter()
            .map(|w| (w.name.clone(), w.value.expose_secret().to_string()))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [
                ("GH_TOKEN".to_string(), "ghtoken-value-1".to_string()),
                ("PLAIN".to_string(), "plain-value-22".to_string()),
                ("PLAIN".to_string(), "plain-value-22".to_string()),
                (
                    "tools.phone.bot_token".to_string(),
                    "literal-token-1".to_string()
                ),
            ]
        );
    }
}
