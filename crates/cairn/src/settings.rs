//! Loading the configuration: find `$CAIRN_HOME`, read config.toml, take
//! the environment ([`crate::environment`]), detect the machine's time zone, and resolve.

use std::path::{Path, PathBuf};

use anyhow::Context;
use cairn_core::config::{Config, ConfigErrors, ConfigInput};

/// `$CAIRN_HOME`, or `~/.cairn`.
pub fn home_dir() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("CAIRN_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let user_home = std::env::var_os("HOME").filter(|v| !v.is_empty()).context(
        "neither CAIRN_HOME nor HOME is set; set CAIRN_HOME to the directory cairn should use",
    )?;
    Ok(PathBuf::from(user_home).join(".cairn"))
}

/// The path of config.toml under a home directory.
pub fn config_path(home: &Path) -> PathBuf {
    home.join("config.toml")
}

/// Everything read from outside, ready to resolve.
#[expect(
    clippy::disallowed_methods,
    reason = "start-up, before the runtime has work: reads config.toml once"
)]
pub fn gather_input() -> anyhow::Result<ConfigInput> {
    let home = home_dir()?;
    let path = config_path(&home);
    let file = match std::fs::read_to_string(&path) {
        Ok(text) => Some((path, text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    Ok(ConfigInput {
        home,
        file,
        // Read once per process; a reload sees the same environment.
        env: crate::environment::get().vars().clone(),
        system_zone: system_zone(),
        secrets: Default::default(),
    })
}

/// Resolves the configuration; any problem is an error listing them all.
/// The vault's values config.toml refers to (`${secret:NAME}`) are read
/// from the store first.
pub fn load() -> anyhow::Result<Config> {
    load_reading_vault(false)
}

/// As [`load`], with every value of the vault at hand (the daemon: its
/// routines' webhook secrets may name any).
pub fn load_with_whole_vault() -> anyhow::Result<Config> {
    load_reading_vault(true)
}

/// Resolves the configuration without reading the vault: what manages the
/// vault itself must run when a reference is broken.
pub fn load_without_vault() -> anyhow::Result<Config> {
    resolve(&gather_input()?)
}

/// The configuration resolved without the vault, with what it was resolved
/// from: the daemon reads the vault from the store it opens anyway
/// ([`with_whole_vault`]) instead of opening the database twice.
pub fn load_before_vault() -> anyhow::Result<(ConfigInput, Config)> {
    let input = gather_input()?;
    let config = resolve(&input)?;
    Ok((input, config))
}

/// `config` resolved again with every value of the vault at hand, read
/// from the open `store` (as [`load_with_whole_vault`]).
pub async fn with_whole_vault(
    mut input: ConfigInput,
    config: Config,
    store: &cairn_store::Store,
) -> anyhow::Result<Config> {
    let source = crate::vault::KeySource::of(&config);
    let secrets = crate::vault::read_secrets(&source, store, referenced(&input), true)
        .await
        .context("cannot read the vault for config.toml's ${secret:NAME} references")?;
    if secrets.is_empty() {
        return Ok(config);
    }
    input.secrets = secrets;
    resolve(&input)
}

/// The secrets config.toml names (`${secret:NAME}`).
fn referenced(input: &ConfigInput) -> std::collections::BTreeSet<String> {
    input
        .file
        .as_ref()
        .map(|(_, text)| cairn_core::text::secret_references(text))
        .unwrap_or_default()
}

fn load_reading_vault(all: bool) -> anyhow::Result<Config> {
    let mut input = gather_input()?;
    let config = resolve(&input)?;
    let secrets = crate::vault::load_secrets(&config, referenced(&input), all)?;
    if secrets.is_empty() {
        return Ok(config);
    }
    input.secrets = secrets;
    resolve(&input)
}

fn resolve(input: &ConfigInput) -> anyhow::Result<Config> {
    Config::load(input)
        .map_err(|errors: ConfigErrors| anyhow::anyhow!("invalid configuration:\n{errors}"))
}

/// Resolves the configuration with `file` standing for config.toml: the
/// text `cairn init` or `cairn restore` is about to write, checked first.
pub fn load_with_file(file: Option<(PathBuf, String)>) -> anyhow::Result<Config> {
    let mut input = gather_input()?;
    input.file = file;
    Config::load(&input)
        .map_err(|errors: ConfigErrors| anyhow::anyhow!("invalid configuration:\n{errors}"))
}

/// The machine's IANA zone: `TZ`, then /etc/timezone, then the /etc/localtime link.
#[expect(
    clippy::disallowed_methods,
    reason = "start-up, before the runtime has work: two tiny reads once"
)]
pub fn system_zone() -> Option<String> {
    let valid = |name: &str| {
        let name = name.trim().trim_start_matches(':');
        name.parse::<chrono_tz::Tz>().ok().map(|_| name.to_string())
    };
    if let Some(zone) = std::env::var("TZ").ok().as_deref().and_then(valid) {
        return Some(zone);
    }
    if let Some(zone) = std::fs::read_to_string("/etc/timezone")
        .ok()
        .as_deref()
        .and_then(valid)
    {
        return Some(zone);
    }
    let target = std::fs::read_link("/etc/localtime").ok()?;
    let text = target.to_string_lossy();
    let (_, zone) = text.split_once("zoneinfo/")?;
    valid(zone)
}
