//! Values config.toml writes as `${VAR}` while `VAR` is not set. Such a
//! value is unavailable, not an error of the whole configuration: the
//! commands and components that never read it run, and the one that reads
//! it fails with [`Unavailable`], which names the file, line, key and
//! variable. [`Config::unavailable`](super::Config::unavailable) lists them
//! all, for `doctor` and the daemon's start-up log.

use std::collections::BTreeMap;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

use super::expand::expand_env;
use super::{Section, Settings};
use crate::text::Vars;

/// A value written `${VAR}` in config.toml with `VAR` unset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {key}: {}", crate::text::missing_reference(.variable))]
pub struct Unavailable {
    /// `path/config.toml:LINE` (the line of the key, or of its table).
    pub origin: String,
    /// The dotted key (`llm.api_key`, `channels.phone.bot_token`).
    pub key: String,
    /// The variable that is not set (`secret:NAME` for a secret the vault
    /// does not hold).
    pub variable: String,
}

/// A secret setting as resolved: not set, set, or written `${VAR}` with
/// `VAR` unset. [`Secret::get`] is the one way to read it, so whatever
/// needs the value fails with the precise reason and nothing else does.
#[derive(Clone, Debug, Default)]
pub enum Secret {
    /// Not set anywhere.
    #[default]
    Unset,
    /// Set (from the file, expanded, or from the environment).
    Set(SecretString),
    /// Named a variable that is not set.
    Unavailable(Unavailable),
}

impl Secret {
    /// The value (`None` when not set), or why it is unavailable.
    pub fn get(&self) -> Result<Option<&SecretString>, Unavailable> {
        match self {
            Secret::Unset => Ok(None),
            Secret::Set(value) => Ok(Some(value)),
            Secret::Unavailable(why) => Err(why.clone()),
        }
    }

    /// Whether it is set or written in the file (even if unavailable).
    pub fn is_configured(&self) -> bool {
        !matches!(self, Secret::Unset)
    }

    /// This one, or `other` when this one is not set.
    #[must_use]
    pub fn or(self, other: Secret) -> Secret {
        match self {
            Secret::Unset => other,
            given => given,
        }
    }
}

/// The process's environment, read once at start-up and shared, and the
/// vault's values that `${secret:NAME}` references read (see
/// [`Vars`]). Its `Debug` output names the variables and secrets, never
/// their values.
#[derive(Clone, Default)]
pub struct Environment {
    vars: Arc<BTreeMap<String, String>>,
    secrets: Arc<BTreeMap<String, SecretString>>,
}

impl Environment {
    /// The environment `vars` (already read, UTF-8 only).
    pub fn new(vars: BTreeMap<String, String>) -> Self {
        Self {
            vars: Arc::new(vars),
            secrets: Arc::default(),
        }
    }

    /// This environment with `secrets` (by name) for `${secret:NAME}`.
    #[must_use]
    pub fn with_secrets(mut self, secrets: BTreeMap<String, SecretString>) -> Self {
        self.secrets = Arc::new(secrets);
        self
    }

    /// Every variable by name (never the vault's values).
    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    /// One variable's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The vault's values this environment holds, by name.
    pub fn secrets(&self) -> &BTreeMap<String, SecretString> {
        &self.secrets
    }
}

impl Vars for Environment {
    fn var(&self, name: &str) -> Option<&str> {
        match name.strip_prefix(crate::text::SECRET_PREFIX) {
            Some(secret) => self.secrets.get(secret).map(|v| v.expose_secret()),
            None => self.get(name),
        }
    }
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The free-form tables whose strings may be `${VAR}`, and which of their
/// fields: `None` for every string of the table (`[channels.NAME]`,
/// `[[mcp.servers]]`), else the one field of each entry that is a secret.
const EXPANDED: &[(&str, Option<&str>)] = &[
    ("channels", None),
    ("mcp.servers", None),
    ("llm.fallbacks", Some("api_key")),
    ("tools", Some("web_search.api_key")),
];

/// Every unavailable value of `settings`: the scalar secrets, then the
/// strings of the free-form tables that read the environment, in key order.
pub fn scan(settings: &Settings) -> Vec<Unavailable> {
    let mut out: Vec<Unavailable> = settings
        .values
        .iter()
        .filter_map(|r| r.unavailable.clone())
        .collect();
    let file = settings
        .file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    for (name, field) in EXPANDED {
        if let Some(section) = settings.sections.get(name) {
            out.extend(in_section(section, name, *field, &file, &settings.env));
        }
    }
    out
}

/// The unavailable strings of one table (every string, or `field` of it or
/// of each entry of an array).
fn in_section(
    section: &Section,
    name: &str,
    field: Option<&str>,
    file: &str,
    env: &Environment,
) -> Vec<Unavailable> {
    let mut unset = Vec::new();
    match field {
        None => expand_env(&mut section.value.clone(), name, env, &mut unset),
        Some(path) => {
            let mut visit = |value: &serde_json::Value, key: String| {
                let pointer = format!("/{}", path.replace('.', "/"));
                if let Some(v) = value.pointer(&pointer) {
                    expand_env(&mut v.clone(), &format!("{key}.{path}"), env, &mut unset);
                }
            };
            match &section.value {
                serde_json::Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        visit(item, format!("{name}[{i}]"));
                    }
                }
                value => visit(value, name.to_string()),
            }
        }
    }
    unset
        .into_iter()
        .map(|u| Unavailable {
            origin: format!("{file}:{}", section.line),
            key: u.key,
            variable: u.variable,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::{Config, ConfigInput};

    fn load(file: &str, env: &[(&str, &str)]) -> Config {
        Config::load(&ConfigInput {
            home: PathBuf::from("/h"),
            file: Some((PathBuf::from("/h/config.toml"), file.to_string())),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            system_zone: Some("UTC".into()),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn every_unset_variable_of_every_table_is_listed_with_file_line_and_key() {
        let config = load(
            "[llm]\nprovider = \"openai\"\napi_key = \"${MYKEY}\"\n\
             [[llm.fallbacks]]\nprovider = \"openai\"\nmodel = \"m\"\napi_key = \"${FB}\"\n\
             [channels.phone]\ntype = \"telegram\"\nbot_token = \"${TG}\"\nchat_id = \"${SET}\"\n\
             [tools.web_search]\nprovider = \"brave\"\napi_key = \"${BRAVE}\"\n\
             [[mcp.servers]]\nname = \"gh\"\ncommand = \"x\"\nenv = { T = \"${GH}\" }\n",
            &[("SET", "42")],
        );
        let shown: Vec<String> = config
            .unavailable()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            [
                "/h/config.toml:3: llm.api_key: environment variable MYKEY is not set",
                "/h/config.toml:8: channels.phone.bot_token: environment variable TG is not set",
                "/h/config.toml:15: mcp.servers[0].env.T: environment variable GH is not set",
                "/h/config.toml:4: llm.fallbacks[0].api_key: environment variable FB is not set",
                "/h/config.toml:12: tools.web_search.api_key: environment variable BRAVE is not set",
            ]
        );
        let config = load("[llm]\napi_key = \"${MYKEY}\"\n", &[("MYKEY", "sk")]);
        assert!(config.unavailable().is_empty());
    }

    #[test]
    fn the_environment_never_shows_its_values() {
        let env = super::Environment::new([("K".to_string(), "sk-secret".to_string())].into())
            .with_secrets([("GH".to_string(), "s3cr3t".into())].into());
        let shown = format!("{env:?}");
        assert!(
            shown.contains('K')
                && shown.contains("GH")
                && !shown.contains("sk-secret")
                && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }

    #[test]
    fn vault_references_resolve_everywhere_env_ones_do() {
        let file = "[llm]\nprovider = \"openai\"\napi_key = \"${secret:LLM}\"\n\
             [channels.phone]\ntype = \"telegram\"\nbot_token = \"${secret:TG}\"\nchat_id = \"1\"\n";
        let input = |secrets: &[(&str, &str)]| ConfigInput {
            home: PathBuf::from("/h"),
            file: Some((PathBuf::from("/h/config.toml"), file.to_string())),
            secrets: secrets
                .iter()
                .map(|(k, v)| (k.to_string(), secrecy::SecretString::from(v.to_string())))
                .collect(),
            ..Default::default()
        };
        let config = Config::load(&input(&[("LLM", "sk-vault"), ("TG", "123:abc")])).unwrap();
        assert!(config.unavailable().is_empty());
        let key = config.llm.api_key.get().unwrap().unwrap();
        assert_eq!(secrecy::ExposeSecret::expose_secret(key), "sk-vault");
        // A secret the vault does not hold: named with its key and line.
        let config = Config::load(&input(&[])).unwrap();
        let shown: Vec<String> = config
            .unavailable()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            [
                "/h/config.toml:3: llm.api_key: secret LLM is not in the vault (add it with `cairn secret set LLM`)",
                "/h/config.toml:4: channels.phone.bot_token: secret TG is not in the vault (add it with `cairn secret set TG`)",
            ]
        );
    }
}
