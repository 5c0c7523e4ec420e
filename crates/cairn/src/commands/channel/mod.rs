//! `cairn channel list|test|allow`: every channel, chat apps and
//! notification outputs alike.

mod list;
pub(super) mod probe;

use std::process::ExitCode;

use anyhow::Context;
use cairn_core::config::Config;
use cairn_store::Store;
use secrecy::ExposeSecret;

use crate::cli::ChannelCommand;
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Runs a `cairn channel` command.
pub fn run(command: &ChannelCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    super::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let result = match command {
            ChannelCommand::List => {
                let channels = list::list(&config, &store).await;
                channels.and_then(|channels| {
                    if as_json {
                        println!("{}", serde_json::to_string_pretty(&channels)?);
                    } else {
                        list::print(&channels);
                    }
                    Ok(ExitCode::SUCCESS)
                })
            }
            ChannelCommand::Test { name, to, message } => {
                let request = probe::Request {
                    name,
                    to: to.as_deref(),
                    message,
                };
                test(&config, &store, &request, as_json).await
            }
            ChannelCommand::Allow { name, user_id } => {
                allow(&config, &store, name, user_id, as_json).await
            }
        };
        store.close().await;
        result
    })
}

async fn test(
    config: &Config,
    store: &Store,
    request: &probe::Request<'_>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let notifier = wiring::notifier(config, store)?;
    let (kind, steps) = probe::test(config, &notifier, request).await?;
    let ok = steps.iter().all(|s| s.ok);
    let total: u64 = steps.iter().map(|s| s.ms).sum();
    if as_json {
        let out = serde_json::json!({
            "channel": request.name, "type": kind, "ok": ok, "total_ms": total, "steps": steps,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for s in &steps {
            let verdict = if s.ok { "ok" } else { "FAILED" };
            println!("{:<40} {:>6} ms  {verdict}: {}", s.step, s.ms, s.detail);
        }
        println!(
            "{}: {} in {total} ms",
            request.name,
            if ok { "works" } else { "does not work" }
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Allows `user_id` on the receiving channel `name`, checked against the
/// shape of its app's user ids.
async fn allow(
    config: &Config,
    store: &Store,
    name: &str,
    user_id: &str,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let user_id = user_id.trim();
    // A channel whose token is unavailable here still receives in a daemon
    // that has it: allowing someone on it is fine.
    let receiving = wiring::inbound_channels(config)?;
    let Some(channel) = receiving.iter().find(|c| c.name == name) else {
        let names: Vec<&str> = receiving.iter().map(|c| c.name.as_str()).collect();
        return Err(BadInput(format!(
            "no channel named \"{name}\" receives messages (inbound = true); receiving: {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ))
        .into());
    };
    let kind = channel.table["type"].as_str().unwrap_or_default();
    check_user_id(kind, user_id).map_err(BadInput)?;
    let added = store
        .allow_channel_user(name, user_id, "cli", chrono::Utc::now())
        .await?;
    if as_json {
        let out = serde_json::json!({"channel": name, "user_id": user_id, "added": added});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if added {
        println!("{user_id} may now talk to the agent through channel {name}");
    } else {
        println!("{user_id} was already allowed on channel {name}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `id` has the shape of a user id on the app `kind`, so a typo
/// (a name for an id) is refused rather than allowing no one.
pub fn check_user_id(kind: &str, id: &str) -> Result<(), String> {
    let digits = !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
    let (app, fits, shape) = match kind {
        "telegram" => ("Telegram", id.parse::<i64>().is_ok(), "a number"),
        "discord" => (
            "Discord",
            digits && (15..=20).contains(&id.len()),
            "a snowflake of 15 to 20 digits",
        ),
        "whatsapp" => (
            "WhatsApp",
            digits && (6..=15).contains(&id.len()),
            "the phone number: country code and digits only",
        ),
        "slack" => (
            "Slack",
            id.len() >= 5
                && (id.starts_with('U') || id.starts_with('W'))
                && id
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()),
            "U or W and capitals and digits, as U0123ABCD",
        ),
        _ => (kind, !id.is_empty(), "not empty"),
    };
    if fits {
        Ok(())
    } else {
        Err(format!(
            "\"{id}\" is not a {app} user id ({shape}; the bot's reply to them names it)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::check_user_id;

    #[test]
    fn user_ids_are_checked_by_their_apps_shape() {
        assert!(check_user_id("slack", "U0123ABCD").is_ok());
        assert!(check_user_id("slack", "W0123ABCD").is_ok());
        assert!(check_user_id("slack", "ada").is_err());
        assert!(check_user_id("discord", "123456789012345678").is_ok());
        assert!(check_user_id("discord", "12345").is_err());
        assert!(check_user_id("whatsapp", "15551234567").is_ok());
        assert!(check_user_id("whatsapp", "+1 555").is_err());
        assert!(check_user_id("telegram", "-100").is_ok());
        let refused = check_user_id("telegram", "ada").unwrap_err();
        assert!(
            refused.contains("\"ada\" is not a Telegram user id (a number"),
            "{refused}"
        );
    }
}
