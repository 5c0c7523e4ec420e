//! `cairn notify test|list|show|deliver` and `cairn inbox`: notifications as
//! the database has them, and a way to check a channel's settings.

use std::process::ExitCode;

use anyhow::Context;
use cairn_automation::notify::{Dispatcher, Notifier, owner_id};
use cairn_core::notification::{DeliveryStatus, NewNotification, Notification};
use cairn_store::{NotificationFilter, Store};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use secrecy::ExposeSecret;
use serde_json::json;
use uuid::Uuid;

use crate::cli::{InboxArgs, InboxCommand, NotifyCommand};
use crate::exit::BadInput;
use crate::{settings, wiring};

/// Runs one `cairn notify` subcommand.
pub fn run(command: &NotifyCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let zone = config.user.timezone;
    crate::commands::runtime()?.block_on(async {
        let store = open(&config).await?;
        let result = match command {
            NotifyCommand::Test { channel, message } => {
                let notifier = wiring::notifier(&config, &store)?;
                test(
                    &config,
                    &notifier,
                    &config.user.id,
                    channel,
                    message,
                    as_json,
                )
                .await
            }
            NotifyCommand::List(args) => {
                let filter = NotificationFilter {
                    status: args.status,
                    limit: Some(args.limit),
                };
                let items = store.list_notifications(&filter).await?;
                print_list(&items, as_json, "no notifications")?;
                Ok(ExitCode::SUCCESS)
            }
            NotifyCommand::Show { id } => {
                let id = find(&store, id).await?;
                show(&store, id, as_json, zone).await
            }
            NotifyCommand::Deliver => {
                let notifier = wiring::notifier(&config, &store)?;
                deliver(notifier, as_json).await
            }
        };
        store.close().await;
        result
    })
}

/// Runs `cairn inbox`, `cairn inbox show` and `cairn inbox read`.
pub fn inbox(args: &InboxArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let user = config.user.id.clone();
    let zone = config.user.timezone;
    crate::commands::runtime()?.block_on(async {
        let store = open(&config).await?;
        let result = match &args.command {
            Some(InboxCommand::Show { id }) => {
                let id = find(&store, id).await?;
                show(&store, id, as_json, zone).await
            }
            None => {
                let items = store.inbox(&user, args.all, 100).await?;
                let empty = if args.all {
                    "the inbox is empty"
                } else {
                    "nothing unread in the inbox"
                };
                print_list(&items, as_json, empty)?;
                Ok(ExitCode::SUCCESS)
            }
            Some(InboxCommand::Read { id, all }) => {
                let id = match (id, all) {
                    (Some(id), false) => Some(find(&store, id).await?),
                    _ => None,
                };
                let marked = store.mark_read(&user, id, Utc::now()).await?;
                if as_json {
                    println!("{}", json!({ "marked_read": marked }));
                } else {
                    println!("marked {marked} notification(s) read");
                }
                Ok(ExitCode::SUCCESS)
            }
        };
        store.close().await;
        result
    })
}

async fn open(config: &cairn_core::config::Config) -> anyhow::Result<Store> {
    let (store, _) = Store::open(config.database_url.expose_secret())
        .await
        .context("cannot open the database")?;
    Ok(store)
}

/// The notification an id or id prefix names.
async fn find(store: &Store, text: &str) -> anyhow::Result<Uuid> {
    if let Ok(id) = Uuid::parse_str(text.trim()) {
        return Ok(id);
    }
    let text = text.trim();
    if text.len() < 4 || !text.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(BadInput(format!(
            "not a notification id: \"{text}\"; give the id shown by `cairn notify list` (at least 4 characters)"
        ))
        .into());
    }
    match store.notification_ids_like(text).await?.as_slice() {
        [one] => Ok(*one),
        [] => Err(anyhow::anyhow!("no notification {text}")),
        _ => Err(BadInput(format!(
            "\"{text}\" matches several notifications; give more of the id"
        ))
        .into()),
    }
}

async fn test(
    config: &cairn_core::config::Config,
    notifier: &Notifier,
    user: &str,
    channel: &str,
    message: &str,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    if !notifier.channels().contains(channel) {
        return Err(BadInput(format!(
            "no channel named \"{channel}\" (configured: {}); add a [channels.{channel}] table to config.toml",
            notifier.channels().names().join(", ")
        ))
        .into());
    }
    let now = Utc::now();
    notifier.keep_recorded();
    let sent = notifier
        .send(
            NewNotification {
                user_id: user.to_string(),
                channel: Some(channel.to_string()),
                title: "cairn test notification".to_string(),
                body: message.to_string(),
                priority: Default::default(),
                tags: vec!["test".to_string()],
                data: None,
                source: "cli:notify-test".to_string(),
            },
            now,
        )
        .await?;
    // Delivered here now, or handed to a running daemon.
    let settled = super::delivery::settle(notifier, config).await;
    let stored = notifier
        .store()
        .get_notification(sent.id)
        .await?
        .context("the test notification vanished from the store")?;
    if as_json {
        let out = json!({ "notification": stored, "delivery": settled });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if let Some(s) = settled.first() {
        println!("{} ({})", s.line, stored.id);
    } else if stored.in_inbox && stored.status == DeliveryStatus::Delivered {
        println!("kept in the inbox ({})", stored.id);
    } else {
        println!(
            "not delivered to {channel}: {}; kept in the inbox ({})",
            stored.last_error.as_deref().unwrap_or("-"),
            stored.id
        );
    }
    let handed = settled.iter().any(|s| s.outcome == "queued_for_daemon");
    Ok(if stored.status == DeliveryStatus::Delivered || handed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn deliver(notifier: Notifier, as_json: bool) -> anyhow::Result<ExitCode> {
    let dispatcher = Dispatcher::new(notifier, owner_id());
    let reports = dispatcher.deliver_due(Utc::now()).await?;
    let count = |s: DeliveryStatus| reports.iter().filter(|r| r.status == s).count();
    let (delivered, retrying, given_up) = (
        count(DeliveryStatus::Delivered),
        count(DeliveryStatus::Pending),
        count(DeliveryStatus::Failed),
    );
    if as_json {
        let out = json!({
            "attempts": reports.len(),
            "delivered": delivered,
            "retrying": retrying,
            "given_up": given_up,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} attempt(s): {delivered} delivered, {retrying} to retry later, {given_up} given up (kept in the inbox)",
            reports.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_list(items: &[Notification], as_json: bool, empty: &str) -> anyhow::Result<()> {
    if as_json {
        println!("{}", serde_json::to_string_pretty(items)?);
        return Ok(());
    }
    if items.is_empty() {
        println!("{empty}");
        return Ok(());
    }
    let now = Utc::now();
    println!(
        "{:<8}  {:<9}  {:<10}  {:>8}  {:>5}  TITLE",
        "ID", "STATUS", "CHANNEL", "ATTEMPTS", "AGE"
    );
    for n in items {
        let status = match (n.status, n.read_at) {
            (_, None) if n.in_inbox => format!("{}*", n.status.as_str()),
            _ => n.status.as_str().to_string(),
        };
        println!(
            "{:<8}  {:<9}  {:<10}  {:>8}  {:>5}  {}",
            &n.id.to_string()[..8],
            status,
            n.channel,
            n.attempts,
            cairn_core::duration::age(now, n.created_at),
            n.headline()
        );
    }
    if items.iter().any(|n| n.in_inbox && n.read_at.is_none()) {
        println!("(* unread in the inbox; `cairn inbox read ID` marks one read)");
    }
    Ok(())
}

async fn show(store: &Store, id: Uuid, as_json: bool, zone: Tz) -> anyhow::Result<ExitCode> {
    let n = store
        .get_notification(id)
        .await?
        .with_context(|| format!("no notification {id}"))?;
    let attempts = store.notification_attempts(id).await?;
    if as_json {
        let out = json!({ "notification": n, "attempts": attempts });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let local = |t: DateTime<Utc>| {
        t.with_timezone(&zone)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string()
    };
    println!("notification {}", n.id);
    println!("title      {}", n.headline());
    println!("channel    {}", n.channel);
    println!(
        "status     {}{}",
        n.status.as_str(),
        if n.in_inbox { " (in the inbox)" } else { "" }
    );
    if n.in_inbox {
        match n.read_at {
            Some(t) => println!("read       {}", local(t)),
            None => println!(
                "read       no (`cairn inbox read {}` marks it)",
                &n.id.to_string()[..8]
            ),
        }
    }
    println!("priority   {}", n.priority);
    println!("source     {}", n.source);
    println!("created    {}", local(n.created_at));
    if let Some(t) = n.delivered_at {
        println!("delivered  {}", local(t));
    }
    if let Some(t) = n.next_attempt_at {
        println!("next try   {}", local(t));
    }
    if let Some(e) = &n.last_error {
        println!("last error {e}");
    }
    println!("\n{}", n.body);
    if !attempts.is_empty() {
        println!("\nattempts:");
        for a in &attempts {
            let outcome = if a.delivered { "delivered" } else { "failed" };
            println!("  {}. {}  {outcome}: {}", a.attempt, local(a.at), a.detail);
        }
    }
    Ok(ExitCode::SUCCESS)
}
