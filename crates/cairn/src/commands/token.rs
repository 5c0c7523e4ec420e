//! `cairn token create|list|revoke` and `cairn pair`: the gateway's
//! credentials, managed locally on the database (a running daemon sees the
//! change on its next request, as it looks tokens up per request).

use std::process::ExitCode;

use anyhow::Context;
use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::auth;
use cairn_gateway::pairing::{self, PairingKey};
use cairn_store::{ApiToken, NewApiToken, Store, StoreError};
use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;

use crate::cli::TokenCommand;
use crate::exit::BadInput;
use crate::settings;

/// Runs `cairn token …`.
pub fn run(command: &TokenCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    super::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let result = match command {
            TokenCommand::Create { name, ttl } => create(&store, name, ttl.as_deref()).await,
            TokenCommand::List => list(&store, as_json).await,
            TokenCommand::Revoke { name } => revoke(&store, name).await,
        };
        store.close().await;
        result
    })
}

/// Runs `cairn pair`: records a fresh pairing code (hashed with this
/// home's install key, so the daemons of this home accept it) and prints
/// it. A new code also lifts a lock left by wrong codes.
pub fn pair() -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    super::runtime()?.block_on(async {
        let key = PairingKey::load_or_create(config.home())
            .await
            .context("cannot read the install key")?;
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let code = pairing::issue_code(&store, &key, SystemClock.now()).await;
        store.close().await;
        let code = code.context("cannot record the pairing code")?;
        println!("{}", pairing_line(&code));
        Ok(ExitCode::SUCCESS)
    })
}

/// How a pairing code is shown, by `cairn pair` and `cairn daemon`.
pub fn pairing_line(code: &str) -> String {
    format!(
        "pairing code: {} (valid {} min; `cairn pair` makes another)",
        pairing::display(code),
        pairing::PAIRING_CODE_TTL.as_secs() / 60
    )
}

async fn create(store: &Store, name: &str, ttl: Option<&str>) -> anyhow::Result<ExitCode> {
    let name = name.trim();
    if name.is_empty() {
        return Err(BadInput("--name must not be empty".into()).into());
    }
    let now = SystemClock.now();
    let expires_at = match ttl {
        None => None,
        Some(text) => {
            let ttl =
                cairn_core::duration::parse(text).map_err(|e| BadInput(format!("--ttl: {e}")))?;
            if ttl.is_zero() {
                return Err(BadInput("--ttl must be longer than 0".into()).into());
            }
            let ttl = chrono::Duration::from_std(ttl)
                .map_err(|_| BadInput(format!("--ttl {text} is too long")))?;
            Some(
                now.checked_add_signed(ttl)
                    .ok_or_else(|| BadInput(format!("--ttl {text} is too long")))?,
            )
        }
    };
    let token = auth::new_token();
    let record = NewApiToken {
        name: name.to_string(),
        token_hash: auth::hash_secret(&token),
        origin: "cli".into(),
        expires_at,
    };
    match store.create_api_token(&record, now).await {
        Ok(_) => {}
        Err(StoreError::Conflict(message)) => return Err(BadInput(message).into()),
        Err(e) => return Err(e).context("cannot record the token"),
    }
    // Alone on stdout so `TOKEN=$(cairn token create --name x)` works;
    // the advice goes to stderr.
    println!("{token}");
    eprintln!(
        "token \"{name}\" created{}; it is shown only this once",
        expires_at.map_or_else(String::new, |t| format!(", expires {}", t.to_rfc3339()))
    );
    Ok(ExitCode::SUCCESS)
}

async fn list(store: &Store, as_json: bool) -> anyhow::Result<ExitCode> {
    let tokens = store.list_api_tokens().await?;
    if as_json {
        // `ApiToken` never serializes its hash.
        println!("{}", serde_json::to_string_pretty(&tokens)?);
        return Ok(ExitCode::SUCCESS);
    }
    if tokens.is_empty() {
        println!(
            "no tokens (make one with `cairn token create --name NAME`, or pair with `cairn pair`)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render(&tokens, SystemClock.now()));
    Ok(ExitCode::SUCCESS)
}

fn when(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".into(), |t| t.format("%Y-%m-%d %H:%M").to_string())
}

fn render(tokens: &[ApiToken], now: DateTime<Utc>) -> String {
    let rows: Vec<[String; 6]> = tokens
        .iter()
        .map(|t| {
            let expires = match t.expires_at {
                None => "never".to_string(),
                Some(e) if e <= now => format!("{} (expired)", when(Some(e))),
                Some(e) => when(Some(e)),
            };
            [
                t.name.clone(),
                t.origin.clone(),
                when(Some(t.created_at)),
                expires,
                when(t.last_used_at),
                when(t.revoked_at),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "ORIGIN",
        "CREATED",
        "EXPIRES",
        "LAST USED",
        "REVOKED",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(&header.map(String::from));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

async fn revoke(store: &Store, name: &str) -> anyhow::Result<ExitCode> {
    if store.revoke_api_token(name, SystemClock.now()).await? {
        println!("token \"{name}\" revoked");
        Ok(ExitCode::SUCCESS)
    } else {
        Err(BadInput(format!(
            "no live token named \"{name}\" (see `cairn token list`)"
        ))
        .into())
    }
}
