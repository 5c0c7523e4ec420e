//! `cairn secret set|list|rm|rotate-key`: the vault (issue 47). Values are
//! read from the terminal without echo or from stdin, never from the
//! command line; they are stored sealed (`cairn_store::vault`) and shown
//! nowhere: `list` gives names, dates and where each is used.

mod read;
mod usage;

use std::process::ExitCode;

use anyhow::Context;
use cairn_store::{Store, VaultEntry, VaultKey};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use secrecy::ExposeSecret;

use crate::exit::BadInput;
use crate::settings;
use crate::vault::{KeySource, open_key};

/// `cairn secret …` (more subcommands join this enum as they come).
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Store a secret: its value is read from the terminal (not echoed) or from stdin.
    Set(SetArgs),
    /// The stored secrets: name, created, last used, where used (never values).
    List,
    /// Remove a secret.
    Rm {
        /// The secret's name.
        name: String,
    },
    /// Re-encrypt every secret under a new key (a crash mid-way loses nothing).
    RotateKey,
    /// The secrets found on their way out (a tool call, a channel message, a
    /// hook's input, a request to the LLM), newest first: by name, never value.
    Leaks {
        /// Show at most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

/// Arguments of `cairn secret set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The secret's name (letters, digits, `_`), as `${secret:NAME}` refers to it.
    pub name: String,
    /// Refused: a value on the command line stays in the shell's history.
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub value: Vec<String>,
}

/// Runs `cairn secret …`.
pub fn run(command: &SecretCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    if let SecretCommand::Leaks { limit } = command {
        return super::secret_leaks::run(*limit, as_json);
    }
    // The vault itself is managed even when a reference to it is broken.
    let config = settings::load_without_vault()?;
    let value = match command {
        SecretCommand::Set(args) => {
            check_name(&args.name)?;
            if !args.value.is_empty() {
                return Err(BadInput(
                    "a secret's value is never taken from the command line (it would stay in \
                     the shell's history and the process list): type it at the prompt, or \
                     pipe it in: `printf %s \"$VALUE\" | cairn secret set NAME`"
                        .to_string(),
                )
                .into());
            }
            Some(read::value(&args.name)?)
        }
        _ => None,
    };
    let source = KeySource::of(&config);
    super::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let result = match command {
            SecretCommand::Set(args) => match &value {
                Some(value) => set(&store, &source, &args.name, value).await,
                None => Ok(ExitCode::SUCCESS),
            },
            SecretCommand::List => list(&store, &config, as_json).await,
            SecretCommand::Rm { name } => rm(&store, &config, name).await,
            SecretCommand::RotateKey => rotate(&store, &source).await,
            // Answered before the store is opened here.
            SecretCommand::Leaks { .. } => Ok(ExitCode::SUCCESS),
        };
        store.close().await;
        result
    })
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if cairn_store::vault::valid_name(name) {
        Ok(())
    } else {
        Err(BadInput(format!(
            "\"{name}\" cannot name a secret: use letters, digits and _ (not first a digit), \
             at most {} characters",
            cairn_store::vault::MAX_NAME_LEN
        ))
        .into())
    }
}

async fn set(
    store: &Store,
    source: &KeySource,
    name: &str,
    value: &secrecy::SecretString,
) -> anyhow::Result<ExitCode> {
    let key = open_key(source, store, true)
        .await?
        .context("no vault key could be made")?;
    let created = store.vault_set(&key, name, value, Utc::now()).await?;
    println!(
        "{} secret {name}; refer to it as ${{secret:{name}}} in config.toml",
        if created { "stored" } else { "replaced" }
    );
    Ok(ExitCode::SUCCESS)
}

async fn list(
    store: &Store,
    config: &cairn_core::config::Config,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let entries = store.vault_list().await?;
    let uses = usage::of(config);
    if as_json {
        let out: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                let used = uses.get(&e.name);
                serde_json::json!({
                    "name": e.name,
                    "created_at": e.created_at,
                    "updated_at": e.updated_at,
                    "last_used_at": e.last_used_at,
                    "hosts": used.map(|u| u.hosts.clone()).unwrap_or_default(),
                    "used_by": used.map(|u| u.keys.clone()).unwrap_or_default(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        println!("no secrets; add one with `cairn secret set NAME`");
        return Ok(ExitCode::SUCCESS);
    }
    for e in &entries {
        let used = uses.get(&e.name);
        let hosts = used.map(|u| u.hosts.join(", ")).unwrap_or_default();
        let keys = used.map(|u| u.keys.join(", ")).unwrap_or_default();
        println!(
            "{}  created {}  last used {}{}{}",
            e.name,
            day(e.created_at),
            e.last_used_at.map_or("never".to_string(), day),
            if hosts.is_empty() {
                String::new()
            } else {
                format!("  hosts {hosts}")
            },
            if keys.is_empty() {
                "  (not referred to in config.toml)".to_string()
            } else {
                format!("  used by {keys}")
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn day(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

async fn rm(
    store: &Store,
    config: &cairn_core::config::Config,
    name: &str,
) -> anyhow::Result<ExitCode> {
    if !store.vault_remove(name).await? {
        let names: Vec<String> = store
            .vault_list()
            .await?
            .into_iter()
            .map(|e: VaultEntry| e.name)
            .collect();
        let hint = cairn_core::text::closest(name, names.iter().map(String::as_str))
            .map(|n| format!("; did you mean {n}?"))
            .unwrap_or_default();
        return Err(BadInput(format!("no secret {name} in the vault{hint}")).into());
    }
    println!("removed secret {name}");
    if let Some(used) = usage::of(config).get(name) {
        eprintln!(
            "config.toml still refers to it ({}): those settings are unavailable until it is set again",
            used.keys.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A new key: written beside the current one, every value re-sealed in one
/// transaction, then the new key put in place. A crash before the
/// transaction leaves the old key in force; after it, the next start (any
/// command reading the vault) finds the rows under the new key and
/// finishes the swap. A vault whose key is in the home's other source
/// (`secrets.keyring` changed) is moved: the new key goes where the
/// configuration says, the old one is left where it was.
async fn rotate(store: &Store, source: &KeySource) -> anyhow::Result<ExitCode> {
    let (old, from) = match open_key(source, store, true).await {
        Ok(key) => (key.context("no vault key could be made")?, source.clone()),
        Err(e) => {
            let ids = store.vault_key_ids().await?;
            match crate::vault::key_in_other(source, &ids).await {
                Some(key) => (key, source.other()),
                None => return Err(e),
            }
        }
    };
    let master = cairn_store::install_key::random_key();
    let new = VaultKey::derive(&master);
    source.write_next(&master).await?;
    let moved = store
        .vault_rekey(&old, &new)
        .await
        .context("the vault was not re-encrypted; the old key stays in force")?;
    source.promote_next().await?;
    if from.describe() == source.describe() {
        println!(
            "re-encrypted {moved} secret(s): key {} replaces {} at {}",
            new.id(),
            old.id(),
            source.describe()
        );
    } else {
        println!(
            "re-encrypted {moved} secret(s): key {} at {} replaces {} at {} (left there; \
             nothing is sealed with it now)",
            new.id(),
            source.describe(),
            old.id(),
            from.describe()
        );
    }
    if let KeySource::File(_) = source {
        println!(
            "pairing codes made before are void; restart a running daemon so it uses the new key"
        );
    }
    Ok(ExitCode::SUCCESS)
}
