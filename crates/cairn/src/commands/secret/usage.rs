//! Where config.toml uses each secret: the keys whose strings refer to it
//! (`${secret:NAME}`), and the hosts it is bound to.
//!
//! Hosts come from `[[tools.http.credentials]]` entries (`host = "…"`,
//! a header or query `value` naming the secret); [`hosts_of`] is the one
//! place that reads them, so the credentials' own parser can take its
//! place when it lands.

use std::collections::BTreeMap;

use cairn_core::config::Config;
use cairn_core::text::secret_references;
use serde_json::Value;

/// One secret's uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Usage {
    /// Dotted keys whose value refers to it.
    pub keys: Vec<String>,
    /// Hosts a credential binds it to.
    pub hosts: Vec<String>,
}

/// Every referenced secret's uses, by name.
pub fn of(config: &Config) -> BTreeMap<String, Usage> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    if let Some(text) = config.settings.file.as_ref().and_then(read)
        && let Ok(table) = toml::from_str::<toml::Table>(&text)
    {
        let value = serde_json::to_value(table).unwrap_or(Value::Null);
        walk(&value, "", &mut |key, text| {
            for name in secret_references(text) {
                out.entry(name).or_default().keys.push(key.to_string());
            }
        });
        for (name, host) in hosts_of(&value) {
            let usage = out.entry(name).or_default();
            if !usage.hosts.contains(&host) {
                usage.hosts.push(host);
            }
        }
    }
    out
}

#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command, outside async code"
)]
fn read(path: &std::path::PathBuf) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Calls `each` with the dotted key and text of every string under `value`.
fn walk(value: &Value, key: &str, each: &mut impl FnMut(&str, &str)) {
    match value {
        Value::String(s) => each(key, s),
        Value::Object(map) => {
            for (field, v) in map {
                let sub = if key.is_empty() {
                    field.clone()
                } else {
                    format!("{key}.{field}")
                };
                walk(v, &sub, each);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, &format!("{key}[{i}]"), each);
            }
        }
        _ => {}
    }
}

/// `(secret, host)` for each `[[tools.http.credentials]]` entry whose
/// strings refer to a secret.
fn hosts_of(config: &Value) -> Vec<(String, String)> {
    let Some(entries) = config
        .pointer("/tools/http/credentials")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let Some(host) = entry.get("host").and_then(Value::as_str) else {
            continue;
        };
        walk(entry, "", &mut |_, text| {
            for name in secret_references(text) {
                out.push((name, host.to_string()));
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_hosts_of_each_secret() {
        let value = serde_json::json!({
            "llm": {"api_key": "${secret:LLM}"},
            "tools": {"http": {"credentials": [
                {"host": "api.github.com", "header": "Authorization", "value": "Bearer ${secret:GH}"},
                {"host": "127.0.0.1:8080", "query": "k", "value": "${secret:GH}"}
            ]}}
        });
        let mut keys = Vec::new();
        walk(&value, "", &mut |key, text| {
            for name in secret_references(text) {
                keys.push(format!("{name}@{key}"));
            }
        });
        assert_eq!(
            keys,
            [
                "LLM@llm.api_key",
                "GH@tools.http.credentials[0].value",
                "GH@tools.http.credentials[1].value"
            ]
        );
        assert_eq!(
            hosts_of(&value),
            [
                ("GH".to_string(), "api.github.com".to_string()),
                ("GH".to_string(), "127.0.0.1:8080".to_string())
            ]
        );
    }
}
