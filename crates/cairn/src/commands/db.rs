//! `cairn db copy --to URL`: every table of the configured database copied
//! into another (SQLite → PostgreSQL is the case that matters), in
//! dependency order and batches, in one transaction, row counts verified.

use std::process::ExitCode;

use anyhow::Context;
use cairn_store::portable::{Snapshot, TableCount};
use cairn_store::{Store, StoreError};
use clap::{Args, Subcommand};
use secrecy::ExposeSecret;

use crate::exit::BadInput;
use crate::settings;

/// `cairn db …`
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Copy every table of this database into another one, verifying row counts.
    Copy(CopyArgs),
}

/// Arguments of `cairn db copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The target: postgres://user@host/db or sqlite:///path/to/file.db.
    #[arg(long)]
    pub to: String,
    /// Replace the target's contents when it already holds data.
    #[arg(long)]
    pub force: bool,
}

/// Runs one `cairn db` subcommand.
pub fn run(command: &DbCommand, as_json: bool) -> anyhow::Result<ExitCode> {
    let DbCommand::Copy(args) = command;
    let config = settings::load()?;
    let from_url = config.database_url.expose_secret();
    if from_url.trim() == args.to.trim() {
        return Err(BadInput("--to names the database cairn already uses".to_string()).into());
    }
    let (counts, shown) = super::runtime()?.block_on(async {
        let (source, _) = Store::open(from_url)
            .await
            .context("cannot open this cairn's database")?;
        let (target, _) = Store::open(&args.to)
            .await
            .context("cannot open the target database")?;
        let snapshot = source.snapshot().await?;
        let counts = copy_snapshot(snapshot, &target, args.force).await;
        let shown = target.display_url().to_string();
        source.close().await;
        target.close().await;
        counts.map(|c| (c, shown))
    })?;
    if as_json {
        let out = serde_json::json!({ "target": shown, "tables": counts });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for c in &counts {
            println!("{:<24} {:>8} rows", c.table, c.rows);
        }
        let total: u64 = counts.iter().map(|c| c.rows).sum();
        println!(
            "copied {total} rows in {} tables to {shown}; every count verified.\n\
             To use it: set DATABASE_URL (or database.url in config.toml) to it and restart the daemon.",
            counts.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes every row of `snapshot` into `target` (an empty database unless
/// `force`), in one transaction, and checks each table's count.
pub(crate) async fn copy_snapshot(
    mut snapshot: Snapshot,
    target: &Store,
    force: bool,
) -> anyhow::Result<Vec<TableCount>> {
    let mut import = target
        .begin_import(&snapshot.headers(), force)
        .await
        .map_err(refusal)?;
    while let Some(batch) = snapshot.next_batch().await? {
        import.write(batch).await?;
    }
    Ok(import.finish(&snapshot.counts()).await?)
}

/// A non-empty target is the person's to decide about: bad input (exit 2).
pub(crate) fn refusal(err: StoreError) -> anyhow::Error {
    match err {
        StoreError::Conflict(message) => BadInput(message).into(),
        other => other.into(),
    }
}
