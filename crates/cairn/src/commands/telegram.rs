//! `cairn telegram allow|list`: who may talk to the agent through the
//! Telegram channels that receive messages (besides `allowed_users`).

use std::process::ExitCode;

use anyhow::Context;
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::Config;
use cairn_store::Store;
use secrecy::ExposeSecret;

use crate::cli::TelegramCommand;
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Runs a `cairn telegram` command.
pub fn run(command: &TelegramCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    super::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let result = match command {
            TelegramCommand::Allow { user_id, channel } => {
                allow(&config, &store, user_id, channel.as_deref(), as_json).await
            }
            TelegramCommand::List => list(&store, as_json).await,
        };
        store.close().await;
        result
    })
}

async fn allow(
    config: &Config,
    store: &Store,
    user_id: &str,
    channel: Option<&str>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let user_id = user_id.trim();
    super::channel::check_user_id("telegram", user_id).map_err(BadInput)?;
    // A channel whose token is unavailable here still receives in a daemon
    // that has it: allowing someone on it is fine.
    let receiving: Vec<String> = wiring::inbound_channels(config)?
        .into_iter()
        .filter(|c| c.table["type"] == "telegram")
        .map(|c| c.name)
        .collect();
    let channel = match (channel, receiving.as_slice()) {
        (Some(c), _) if receiving.iter().any(|r| r == c) => c.to_string(),
        (Some(c), _) => {
            return Err(BadInput(format!(
                "--channel {c}: no Telegram channel of that name receives messages (inbound = true); receiving: {}",
                if receiving.is_empty() { "none".to_string() } else { receiving.join(", ") }
            ))
            .into());
        }
        (None, [only]) => only.clone(),
        (None, []) => {
            return Err(BadInput(
                "no Telegram channel receives messages: add inbound = true to a [channels.NAME] of type \"telegram\"".into(),
            )
            .into());
        }
        (None, _) => {
            return Err(BadInput(format!(
                "several Telegram channels receive messages ({}); name one with --channel",
                receiving.join(", ")
            ))
            .into());
        }
    };
    let added = store
        .allow_channel_user(&channel, user_id, "cli", SystemClock.now())
        .await?;
    if as_json {
        let out = serde_json::json!({"channel": channel, "user_id": user_id, "added": added});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if added {
        println!("Telegram user {user_id} may now talk to the agent through channel {channel}");
    } else {
        println!("Telegram user {user_id} was already allowed on channel {channel}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(store: &Store, as_json: bool) -> anyhow::Result<ExitCode> {
    let users = store.list_channel_users(None).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&users)?);
    } else if users.is_empty() {
        println!("no users allowed by `cairn telegram allow` or /pair (see also allowed_users)");
    } else {
        for u in &users {
            println!(
                "{:<12} {:<14} {:<8} {}",
                u.channel,
                u.user_id,
                u.origin,
                u.added_at.format("%Y-%m-%d %H:%M")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
