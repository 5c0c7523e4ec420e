//! Merging defaults, the file and the environment into one set of settings with sources.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::file::{self, Section};
use super::redact::redact_value;
use super::registry::{self, DefaultValue, Kind, SettingDef};
use super::unavailable::{Environment, Unavailable};
use super::{ConfigError, ConfigErrors, Source, Value};

/// What the caller read from the outside world. Its `Debug` output shows
/// neither the file's text nor environment values (both may hold keys).
#[derive(Clone, Default)]
pub struct ConfigInput {
    /// `$CAIRN_HOME`.
    pub home: PathBuf,
    /// config.toml's path and text, if the file exists.
    pub file: Option<(PathBuf, String)>,
    /// The environment variables (all of them, or just the relevant ones).
    pub env: BTreeMap<String, String>,
    /// The machine's IANA zone, if it could be detected.
    pub system_zone: Option<String>,
    /// The vault's values `${secret:NAME}` references read, by name (read
    /// by the binary from the store before resolving).
    pub secrets: BTreeMap<String, secrecy::SecretString>,
}

impl std::fmt::Debug for ConfigInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigInput")
            .field("home", &self.home)
            .field(
                "file",
                &self
                    .file
                    .as_ref()
                    .map(|(path, text)| format!("{} ({} bytes)", path.display(), text.len())),
            )
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("system_zone", &self.system_zone)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One setting after resolution. Its `Debug` output hides secrets.
#[derive(Clone, PartialEq)]
pub struct Resolved {
    /// The setting's definition.
    pub def: &'static SettingDef,
    /// Its value; `None` when optional and unset.
    pub value: Option<Value>,
    /// Where the value came from.
    pub source: Source,
    /// Set when the file writes the value as `${VAR}` and `VAR` is not set
    /// (`value` is then `None`): what needs it fails saying so.
    pub unavailable: Option<Unavailable>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("key", &self.def.key)
            .field("value", &self.display_value())
            .field("source", &self.source)
            .field("unavailable", &self.unavailable)
            .finish()
    }
}

impl Resolved {
    /// The value as it may be shown to a person: secrets and URL passwords hidden.
    pub fn display_value(&self) -> Option<Value> {
        self.value.as_ref().map(|v| redact_value(self.def.key, v))
    }
}

/// Every setting, resolved, plus the free-form sections from the file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `$CAIRN_HOME`.
    pub home: PathBuf,
    /// config.toml, if it existed.
    pub file: Option<PathBuf>,
    /// Scalar settings in registry order.
    pub values: Vec<Resolved>,
    /// Free-form sections from the file.
    pub sections: BTreeMap<&'static str, Section>,
    /// Whether the machine's time zone was detected (if not, the default is UTC and doctor warns).
    pub system_zone_detected: bool,
    /// The environment the values were resolved with (read once by the
    /// caller), for the free-form tables that expand `${VAR}` when used.
    pub env: Environment,
}

impl Settings {
    /// The resolved setting for a key of the registry.
    pub fn get(&self, key: &str) -> Option<&Resolved> {
        self.values.iter().find(|r| r.def.key == key)
    }
}

/// Resolves every setting: default, then file, then environment; collects every problem.
pub fn resolve(input: &ConfigInput) -> Result<Settings, ConfigErrors> {
    let mut errors = Vec::new();
    let file_settings = match &input.file {
        Some((path, text)) => match file::parse(path, text) {
            Ok(parsed) => parsed,
            Err(mut errs) => {
                errors.append(&mut errs);
                Default::default()
            }
        },
        None => Default::default(),
    };
    let file_name = input
        .file
        .as_ref()
        .map(|(p, _)| p.display().to_string())
        .unwrap_or_default();

    let env = Environment::new(input.env.clone()).with_secrets(input.secrets.clone());
    let mut values = Vec::with_capacity(registry::SETTINGS.len());
    for def in registry::SETTINGS {
        let mut resolved = Resolved {
            def,
            value: default_value(def, input),
            source: Source::Default,
            unavailable: None,
        };
        if let Some(fv) = file_settings.values.get(def.key) {
            from_file(&mut resolved, fv, &env, &file_name);
        }
        from_env(&mut resolved, input, &mut errors);
        check_zone(&resolved, &file_name, &mut errors);
        values.push(resolved);
    }

    if errors.is_empty() {
        Ok(Settings {
            home: input.home.clone(),
            file: input.file.as_ref().map(|(p, _)| p.clone()),
            values,
            sections: file_settings.sections,
            system_zone_detected: input.system_zone.is_some(),
            env,
        })
    } else {
        Err(ConfigErrors(errors))
    }
}

/// The value the file sets; a secret written `${VAR}` is read from the
/// environment (`${secret:NAME}` from the vault), or unavailable when the
/// variable is unset (only what reads it then fails).
fn from_file(resolved: &mut Resolved, fv: &file::FileValue, env: &Environment, file_name: &str) {
    resolved.value = Some(fv.value.clone());
    resolved.source = Source::File { line: fv.line };
    // A secret may name the variable that holds it: `api_key = "${VAR}"`.
    // Unset, the value is unavailable: only what reads it fails.
    if resolved.def.secret
        && let Some(Value::Text(text)) = &resolved.value
    {
        match crate::text::expand_vars(text, env) {
            Ok(value) => resolved.value = Some(Value::Text(value)),
            Err(variable) => {
                resolved.value = None;
                resolved.unavailable = Some(Unavailable {
                    origin: format!("{file_name}:{}", fv.line),
                    key: resolved.def.key.to_string(),
                    variable,
                });
            }
        }
    }
}

/// The value the first non-empty variable of the setting sets, over the
/// file's; one that does not parse is a problem.
fn from_env(resolved: &mut Resolved, input: &ConfigInput, errors: &mut Vec<ConfigError>) {
    if let Some((var, raw)) = resolved.def.env.iter().find_map(|var| {
        input
            .env
            .get(*var)
            .filter(|v| !v.is_empty())
            .map(|v| (*var, v))
    }) {
        match parse_env(resolved.def.kind, raw) {
            Some(value) => {
                resolved.value = Some(value);
                resolved.source = Source::Env {
                    var: var.to_string(),
                };
                resolved.unavailable = None;
            }
            None => errors.push(ConfigError::BadEnv {
                var: var.to_string(),
                key: resolved.def.key.to_string(),
                expected: resolved.def.kind.expected(),
                found: if resolved.def.secret {
                    "********".to_string()
                } else {
                    raw.clone()
                },
            }),
        }
    }
}

/// A time zone must be one the IANA database names.
fn check_zone(resolved: &Resolved, file_name: &str, errors: &mut Vec<ConfigError>) {
    if resolved.def.kind == Kind::Zone
        && let Some(Value::Text(zone)) = &resolved.value
        && zone.parse::<chrono_tz::Tz>().is_err()
    {
        errors.push(ConfigError::BadValue {
            origin: origin(&resolved.source, file_name),
            key: resolved.def.key.to_string(),
            message: format!(
                "unknown time zone \"{zone}\"; expected an IANA name such as \"Europe/Paris\""
            ),
        });
    }
}

fn origin(source: &Source, file_name: &str) -> String {
    match source {
        Source::Default => "default".to_string(),
        Source::File { line } => format!("{file_name}:{line}"),
        Source::Env { var } => format!("environment variable {var}"),
    }
}

fn default_value(def: &SettingDef, input: &ConfigInput) -> Option<Value> {
    match def.default {
        DefaultValue::Unset => None,
        DefaultValue::Bool(b) => Some(Value::Bool(b)),
        DefaultValue::UInt(n) => Some(Value::UInt(n)),
        DefaultValue::Text(s) => Some(Value::Text(s.to_string())),
        DefaultValue::UnderHome(rel) => {
            Some(Value::Text(input.home.join(rel).display().to_string()))
        }
        DefaultValue::SqliteUnderHome(rel) => Some(Value::Text(format!(
            "sqlite://{}",
            input.home.join(rel).display()
        ))),
        DefaultValue::List(items) => Some(Value::List(
            items.iter().map(|item| (*item).to_string()).collect(),
        )),
        DefaultValue::SystemZone => Some(Value::Text(
            input
                .system_zone
                .clone()
                .unwrap_or_else(|| "UTC".to_string()),
        )),
    }
}

fn parse_env(kind: Kind, raw: &str) -> Option<Value> {
    let raw = raw.trim();
    match kind {
        Kind::Bool => match raw.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Some(Value::Bool(true)),
            "0" | "false" | "no" | "off" => Some(Value::Bool(false)),
            _ => None,
        },
        Kind::UInt => raw.parse().ok().map(Value::UInt),
        Kind::Text | Kind::Zone => Some(Value::Text(raw.to_string())),
        Kind::List => Some(Value::List(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(file: Option<&str>, env: &[(&str, &str)]) -> ConfigInput {
        ConfigInput {
            home: PathBuf::from("/home/ada/.cairn"),
            file: file.map(|t| (PathBuf::from("/home/ada/.cairn/config.toml"), t.to_string())),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            system_zone: Some("Europe/Paris".to_string()),
            secrets: BTreeMap::new(),
        }
    }

    #[test]
    fn secrets_in_the_file_may_name_their_variable() {
        let file = "[llm]\napi_key = \"${MY_KEY}\"\n";
        let s = resolve(&input(Some(file), &[("MY_KEY", "sk-from-env")])).unwrap();
        let key = s.get("llm.api_key").unwrap();
        assert_eq!(key.value, Some(Value::Text("sk-from-env".into())));
        assert_eq!(key.source, Source::File { line: 2 });
        // Unset, the value is unavailable, and says why; the rest resolves.
        let s = resolve(&input(Some(file), &[])).unwrap();
        let key = s.get("llm.api_key").unwrap();
        assert_eq!(key.value, None);
        assert_eq!(
            key.unavailable.as_ref().unwrap().to_string(),
            "/home/ada/.cairn/config.toml:2: llm.api_key: environment variable MY_KEY is not set"
        );
        // A value from the environment makes the file's unset variable moot.
        let s = resolve(&input(Some(file), &[("CAIRN_LLM_API_KEY", "sk-env")])).unwrap();
        let key = s.get("llm.api_key").unwrap();
        assert_eq!(key.value, Some(Value::Text("sk-env".into())));
        assert!(key.unavailable.is_none());
        // Other settings keep their text as written.
        let s = resolve(&input(Some("[agent]\nname = \"${X}\"\n"), &[])).unwrap();
        assert_eq!(
            s.get("agent.name").unwrap().value,
            Some(Value::Text("${X}".into()))
        );
    }

    #[test]
    fn defaults_then_file_then_env() {
        let s = resolve(&input(None, &[])).unwrap();
        let hb = s.get("heartbeat.interval_secs").unwrap();
        assert_eq!(
            (hb.value.clone(), hb.source.clone()),
            (Some(Value::UInt(1800)), Source::Default)
        );

        let s = resolve(&input(Some("[heartbeat]\ninterval_secs = 600\n"), &[])).unwrap();
        assert_eq!(
            s.get("heartbeat.interval_secs").unwrap().source,
            Source::File { line: 2 }
        );

        let s = resolve(&input(
            Some("[heartbeat]\ninterval_secs = 600\n"),
            &[("HEARTBEAT_INTERVAL_SECS", "60")],
        ))
        .unwrap();
        let hb = s.get("heartbeat.interval_secs").unwrap();
        assert_eq!(hb.value, Some(Value::UInt(60)));
        assert_eq!(
            hb.source,
            Source::Env {
                var: "HEARTBEAT_INTERVAL_SECS".into()
            }
        );
    }

    #[test]
    fn prefixed_names_win_over_seed_names() {
        let s = resolve(&input(
            None,
            &[("AGENT_NAME", "a"), ("CAIRN_AGENT_NAME", "b")],
        ))
        .unwrap();
        assert_eq!(
            s.get("agent.name").unwrap().value,
            Some(Value::Text("b".into()))
        );
    }

    #[test]
    fn home_relative_defaults() {
        let s = resolve(&input(None, &[])).unwrap();
        assert_eq!(
            s.get("database.url").unwrap().value,
            Some(Value::Text("sqlite:///home/ada/.cairn/cairn.db".into()))
        );
        assert_eq!(
            s.get("workspace.path").unwrap().value,
            Some(Value::Text("/home/ada/.cairn/workspace".into()))
        );
        assert_eq!(
            s.get("user.timezone").unwrap().value,
            Some(Value::Text("Europe/Paris".into()))
        );
    }

    #[test]
    fn bad_env_values_are_errors_naming_the_variable() {
        let err = resolve(&input(
            None,
            &[("HEARTBEAT_ENABLED", "maybe"), ("MAX_PARALLEL_JOBS", "-1")],
        ))
        .unwrap_err();
        assert_eq!(err.0.len(), 2);
        let text = err.to_string();
        assert!(
            text.contains("HEARTBEAT_ENABLED") && text.contains("true or false"),
            "{text}"
        );
        assert!(text.contains("MAX_PARALLEL_JOBS"), "{text}");
    }

    #[test]
    fn secret_env_values_never_echo() {
        let s = resolve(&input(None, &[("OPENAI_API_KEY", "sk-live-123")])).unwrap();
        let r = s.get("llm.openai_api_key").unwrap();
        assert_eq!(r.value, Some(Value::Text("sk-live-123".into())));
        assert_eq!(r.display_value(), Some(Value::Text("********".into())));
    }

    #[test]
    fn unknown_zone_is_an_error_with_origin() {
        let err = resolve(&input(Some("[user]\ntimezone = \"Mars/Olympus\"\n"), &[])).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("config.toml:2")
                && text.contains("user.timezone")
                && text.contains("Mars/Olympus"),
            "{text}"
        );
    }

    #[test]
    fn undetected_zone_defaults_to_utc_and_says_so() {
        let mut i = input(None, &[]);
        i.system_zone = None;
        let s = resolve(&i).unwrap();
        assert!(!s.system_zone_detected);
        assert_eq!(
            s.get("user.timezone").unwrap().value,
            Some(Value::Text("UTC".into()))
        );
    }

    #[test]
    fn database_url_password_is_hidden_on_display() {
        let s = resolve(&input(None, &[("DATABASE_URL", "postgres://u:pw@h/db")])).unwrap();
        assert_eq!(
            s.get("database.url").unwrap().display_value(),
            Some(Value::Text("postgres://u:****@h/db".into()))
        );
    }

    #[test]
    fn base_url_credentials_are_hidden_on_display() {
        let s = resolve(&input(
            None,
            &[(
                "CAIRN_LLM_BASE_URL",
                "https://u:pw@llm.example/v1?api_key=k1",
            )],
        ))
        .unwrap();
        assert_eq!(
            s.get("llm.base_url").unwrap().display_value(),
            // A web URL's user info is hidden whole (a token is often the user).
            Some(Value::Text(
                "https://****@llm.example/v1?api_key=****".into()
            ))
        );
    }
}
