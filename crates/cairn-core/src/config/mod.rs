//! Configuration: the known settings, their defaults, and resolution from
//! `$CAIRN_HOME/config.toml` and the environment.
//!
//! Precedence, lowest first: built-in default, config file, environment
//! variable. Every resolved value remembers where it came from so that
//! `cairn config show` can say so. The caller does the I/O (reads the file,
//! collects the environment, detects the system time zone) and passes the
//! results in; this module only decides.

pub mod credentials;
pub mod expand;
mod file;
mod redact;
pub mod reference;
pub mod registry;
pub mod reloadable;
mod resolve;
mod setting_kind;
mod typed;
mod unavailable;

use std::fmt;

pub use file::{FileSettings, FileValue, Section, line_col};
pub use redact::{
    is_secret_name, redact_args, redact_command, redact_json, redact_text, redact_url,
};
pub use resolve::{ConfigInput, Resolved, Settings, resolve};
pub use typed::{
    AgentConfig, Config, CostConfig, DaemonConfig, GatewayConfig, HeartbeatConfig, LlmConfig,
    MemoryConfig, NotifyConfig, RepairConfig, RoutinesConfig, SkillsConfig, UserConfig,
};
pub use unavailable::{Environment, Secret, Unavailable};

/// A scalar setting value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A non-negative integer.
    UInt(u64),
    /// Text (also zones and paths).
    Text(String),
    /// A list of strings.
    List(Vec<String>),
}

impl Value {
    /// The value as JSON, for `config show --json`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::UInt(n) => serde_json::Value::from(*n),
            Value::Text(s) => serde_json::Value::String(s.clone()),
            Value::List(items) => serde_json::Value::from(items.clone()),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::UInt(n) => write!(f, "{n}"),
            Value::Text(s) => write!(f, "{s}"),
            Value::List(items) => write!(f, "{}", items.join(", ")),
        }
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The built-in default (or, for the time zone, the machine's zone).
    Default,
    /// config.toml, at this line.
    File {
        /// 1-based line.
        line: usize,
    },
    /// An environment variable.
    Env {
        /// The variable's name.
        var: String,
    },
}

impl Source {
    /// `default`, `file` or `env`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File { .. } => "file",
            Source::Env { .. } => "env",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File { line } => write!(f, "file:{line}"),
            Source::Env { var } => write!(f, "env:{var}"),
        }
    }
}

/// One problem with the configuration, naming the file, line and key (or variable) at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid TOML.
    #[error("{file}:{line}:{column}: TOML syntax error: {message}")]
    Syntax {
        /// Path of the file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// A key cairn does not know.
    #[error("{file}:{line}: unknown key `{key}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        /// Path of the file.
        file: String,
        /// 1-based line.
        line: usize,
        /// The dotted key.
        key: String,
        /// The nearest known key, if any is close.
        suggestion: Option<String>,
    },
    /// A key cairn had and removed.
    #[error("{file}:{line}: `{key}` was removed: {advice}")]
    Removed {
        /// Path of the file.
        file: String,
        /// 1-based line.
        line: usize,
        /// The dotted key.
        key: String,
        /// What to do instead.
        advice: &'static str,
    },
    /// A known key with a value of the wrong type.
    #[error("{file}:{line}: {key}: expected {expected}, found {found}")]
    WrongType {
        /// Path of the file.
        file: String,
        /// 1-based line.
        line: usize,
        /// The dotted key.
        key: String,
        /// What the key takes.
        expected: &'static str,
        /// What was there.
        found: String,
    },
    /// A value of the right type that is still not acceptable (an unknown zone, say).
    #[error("{origin}: {key}: {message}")]
    BadValue {
        /// `file:line` or `env VAR`.
        origin: String,
        /// The dotted key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// An environment variable that could not be read as its setting's type.
    #[error("environment variable {var} (setting {key}): expected {expected}, found \"{found}\"")]
    BadEnv {
        /// The variable.
        var: String,
        /// The setting it overrides.
        key: String,
        /// What the setting takes.
        expected: &'static str,
        /// The value given (redacted for secrets).
        found: String,
    },
}

/// Every problem found in one configuration, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for ConfigErrors {}
