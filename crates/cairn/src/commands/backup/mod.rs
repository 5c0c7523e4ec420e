//! `cairn backup FILE` and `cairn restore FILE`: one archive with a
//! consistent snapshot of the database (taken online: `VACUUM INTO` on
//! SQLite, a repeatable-read export on PostgreSQL), the workspace and
//! config.toml; restored into an empty home, into whichever database the
//! restored configuration names, with every table's row count checked.
//! The vault's secrets travel sealed, never with their key: a restore needs
//! the same key (`--key-file`, the one already in the home, or the OS
//! keyring's), checked before anything is written.

mod archive;
mod data;
mod keys;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use cairn_agent::nofollow::Tree;
use cairn_store::Store;
use cairn_store::portable::{self, TableCount};
use chrono::Utc;
use clap::Args;
use secrecy::ExposeSecret;

use self::archive::{DatabaseForm, Manifest};
use crate::exit::BadInput;
use crate::vault::KeySource;
use crate::{home, settings};

/// Arguments of `cairn backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The archive to write (a .tar.gz).
    pub file: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `cairn restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// An archive written by `cairn backup`.
    pub file: PathBuf,
    /// Restore into a home (and database) that is not empty, replacing
    /// config.toml, every table's rows and the archive's workspace files.
    #[arg(long)]
    pub force: bool,
    /// The key of the home the backup was taken from (its install.key): the
    /// vault's secrets are encrypted with it. Copied into the home as
    /// install.key, or into the OS keyring with `secrets.keyring = true`.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
}

/// A private scratch directory, removed when dropped.
struct Staging(PathBuf);

impl Staging {
    fn new(what: &str) -> anyhow::Result<Staging> {
        let nanos = Utc::now().timestamp_subsec_nanos();
        let dir = std::env::temp_dir().join(format!("cairn-{what}-{}-{nanos}", std::process::id()));
        home::create_dir(&dir)?;
        Ok(Staging(dir))
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Staging {
    #[expect(clippy::disallowed_methods, reason = "cleanup of a scratch directory")]
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command, outside async code"
)]
fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Whether `dir` is missing or holds nothing.
#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command, outside async code"
)]
pub(crate) fn is_empty_dir(dir: &Path) -> anyhow::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", dir.display())),
    }
}

/// Runs `cairn backup`.
pub fn backup(args: &BackupArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let staging = Staging::new("backup")?;
    let url = config.database_url.expose_secret();
    let (backend, form, tables, schema_version, vault_keys) =
        super::runtime()?.block_on(async {
            let (store, _) = Store::open(url).await.context("cannot open the database")?;
            let schema_version = store.applied_schema_version().await?;
            let vault_keys = store.vault_key_ids().await?;
            let taken = match store.backend() {
                cairn_store::Backend::Sqlite => {
                    let copy = staging.join("cairn.db");
                    store.vacuum_into(&copy).await?;
                    let copy_store = Store::connect(&sqlite_url(&copy)).await?;
                    let counts = copy_store.snapshot().await?.counts();
                    copy_store.close().await;
                    (DatabaseForm::SqliteFile, counts)
                }
                cairn_store::Backend::Postgres => {
                    let counts = data::export(&store, &staging.join("database")).await?;
                    (DatabaseForm::Jsonl, counts)
                }
            };
            let backend = store.backend().as_str();
            store.close().await;
            anyhow::Ok((backend, taken.0, taken.1, schema_version, vault_keys))
        })?;
    let config_path = settings::config_path(config.home());
    let config_text = read_optional(&config_path)?;
    let tree = Tree::new(&config.workspace);
    let (workspace, skipped) = archive::list_workspace(&tree)?;
    let manifest = Manifest {
        format: archive::FORMAT,
        cairn_version: env!("CARGO_PKG_VERSION").to_string(),
        schema_version,
        backend: backend.to_string(),
        created_at: Utc::now(),
        database: form,
        tables,
        config: config_text.is_some(),
        workspace_files: workspace.len() as u64,
        vault_keyring_entry: match KeySource::of(&config) {
            KeySource::Keyring(home) if !vault_keys.is_empty() => {
                Some(crate::vault::keyring::current_user(&home))
            }
            _ => None,
        },
        vault_keys,
    };
    let mut out = archive::Writer::create(&args.file, args.force, &manifest)?;
    if let Some(text) = &config_text {
        out.bytes("config.toml", text.as_bytes())?;
    }
    match form {
        DatabaseForm::SqliteFile => out.file("database/cairn.db", &staging.join("cairn.db"))?,
        DatabaseForm::Jsonl => {
            for t in &manifest.tables {
                let name = format!("database/{}.jsonl", t.table);
                out.file(&name, &staging.join(&name))?;
            }
        }
    }
    for (name, rel) in &workspace {
        out.workspace_file(name, &tree, rel)?;
    }
    out.finish()?;
    report(&args.file, &manifest, skipped, &[], as_json, "backed up")?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `cairn restore`.
pub fn restore(args: &RestoreArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let manifest = archive::read_manifest(&args.file)?;
    let known = portable::schema_version();
    if manifest.schema_version > known {
        return Err(BadInput(format!(
            "{} holds a database at schema version {}, newer than this cairn knows ({known}): \
             install cairn {} or later to restore it",
            args.file.display(),
            manifest.schema_version,
            manifest.cairn_version
        ))
        .into());
    }
    let home = settings::home_dir()?;
    if !args.force && !is_empty_dir(&home)? {
        return Err(BadInput(format!(
            "{} is not empty: restore into a new home (set CAIRN_HOME to an empty or missing \
             directory), or add --force to replace what is there",
            home.display()
        ))
        .into());
    }
    let staging = Staging::new("restore")?;
    archive::unpack(&args.file, &staging.0)?;
    let config_path = settings::config_path(&home);
    let config_text = read_optional(&staging.join("config.toml"))?;
    let config = settings::load_with_file(config_text.clone().map(|t| (config_path.clone(), t)))
        .context("the archive's config.toml does not load here")?;
    // The restored configuration says where the key goes (install.key or the keyring).
    let source = KeySource::of(&config);
    let key = super::runtime()?.block_on(keys::vault_key(args, &source, &manifest))?;
    if !args.force && !is_empty_dir(&config.workspace)? {
        return Err(BadInput(format!(
            "the workspace {} is not empty; add --force to replace its files",
            config.workspace.display()
        ))
        .into());
    }
    // The home is the owner's alone (0700) before the database creates files in it.
    home::create_dir(&home)?;
    let url = config.database_url.expose_secret();
    let counts = super::runtime()?.block_on(restore_database(
        &manifest, &staging, url, known, args.force,
    ))?;
    if let Some(bytes) = key {
        match &source {
            KeySource::File(dir) => {
                let path = dir.join(cairn_store::install_key::INSTALL_KEY_FILE);
                home::write(&path, &bytes, args.force)?;
            }
            KeySource::Keyring(dir) => super::runtime()?
                .block_on(crate::vault::keyring::put(dir, &bytes))
                .context("the database was restored, but its vault's key could not be put in the OS keyring")?,
        }
    }
    let replaced = restore_files(
        config_text.as_deref(),
        &config_path,
        &staging,
        &config.workspace,
        args.force,
    )?;
    let restored = Manifest {
        tables: counts,
        ..manifest
    };
    report(&args.file, &restored, 0, &replaced, as_json, "restored")?;
    Ok(ExitCode::SUCCESS)
}

/// Restores the archive's database into `url`: the SQLite file copied row
/// by row, or the JSONL tables loaded at their schema and migrated; the
/// rows each table holds.
async fn restore_database(
    manifest: &Manifest,
    staging: &Staging,
    url: &str,
    known: i64,
    force: bool,
) -> anyhow::Result<Vec<TableCount>> {
    match manifest.database {
        DatabaseForm::SqliteFile => {
            let file = staging.join("database").join("cairn.db");
            let (source, _) = Store::open(&sqlite_url(&file))
                .await
                .context("the archive's database does not open")?;
            let (target, _) = Store::open(url)
                .await
                .context("cannot open the database to restore into")?;
            let snapshot = source.snapshot().await?;
            if manifest.schema_version == known {
                same_counts(&manifest.tables, &snapshot.counts())?;
            }
            let counts = super::db::copy_snapshot(snapshot, &target, force).await;
            source.close().await;
            target.close().await;
            counts
        }
        DatabaseForm::Jsonl => {
            let target = Store::connect(url)
                .await
                .context("cannot open the database to restore into")?;
            // The rows fit the schema they were taken at: build that,
            // fill it, then bring it up to date (conversions included).
            target.migrate_up_to(manifest.schema_version).await?;
            let counts = data::import(&target, &staging.join("database"), manifest, force).await;
            if counts.is_ok() {
                target.migrate().await?;
            }
            target.close().await;
            counts
        }
    }
}

/// Writes the archive's config.toml and workspace files; the links found in
/// the way and replaced.
fn restore_files(
    config_text: Option<&str>,
    config_path: &Path,
    staging: &Staging,
    workspace: &Path,
    force: bool,
) -> anyhow::Result<Vec<String>> {
    // Every file is written under a fresh name and renamed into place, and a
    // link in the way is replaced (and reported), never written through: the
    // agent may have planted links in the workspace, and nothing outside the
    // home may be written or have its mode changed.
    let mut replaced = Vec::new();
    if let Some(text) = config_text {
        let (dir, name) = split(config_path)?;
        let tree = Tree::new(dir).private().replacing_links();
        let written = tree
            .write_from(name, &mut text.as_bytes(), force)
            .with_context(|| format!("cannot write {}", config_path.display()))?;
        replaced.extend(shown(dir, written.replaced_links));
    }
    let (files, _) = archive::list_tree("workspace", &staging.join("workspace"))?;
    home::create_dir(workspace)?;
    let tree = Tree::new(workspace).private().replacing_links();
    for (name, path) in &files {
        let relative = Path::new(name.trim_start_matches("workspace/"));
        let mut input = open_staged(path)?;
        let written = tree
            .write_from(relative, &mut input, force)
            .with_context(|| format!("cannot restore {}", workspace.join(relative).display()))?;
        replaced.extend(shown(workspace, written.replaced_links));
    }
    Ok(replaced)
}

/// A file's directory and name.
fn split(path: &Path) -> anyhow::Result<(&Path, &Path)> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, Path::new(name))),
        _ => anyhow::bail!("{} is not a file path", path.display()),
    }
}

/// The replaced links (`rel -> target`) as full paths below `root`.
fn shown(root: &Path, links: Vec<String>) -> impl Iterator<Item = String> + '_ {
    links
        .into_iter()
        .map(move |link| format!("{}/{link}", root.display()))
}

/// A file unpacked into the private staging directory.
#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command, outside async code"
)]
fn open_staged(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The archive's own database must hold what its manifest says.
fn same_counts(expected: &[TableCount], found: &[TableCount]) -> anyhow::Result<()> {
    for e in expected {
        let got = found.iter().find(|f| f.table == e.table).map(|f| f.rows);
        if got != Some(e.rows) {
            anyhow::bail!(
                "the archive is damaged: table {} should hold {} rows, its database has {}",
                e.table,
                e.rows,
                got.map_or("none".to_string(), |n| n.to_string())
            );
        }
    }
    Ok(())
}

fn report(
    file: &Path,
    manifest: &Manifest,
    skipped: u64,
    replaced: &[String],
    as_json: bool,
    verb: &str,
) -> anyhow::Result<()> {
    if as_json {
        let mut out = serde_json::to_value(manifest)?;
        out["file"] = serde_json::Value::String(file.display().to_string());
        out["skipped_links"] = serde_json::Value::from(skipped);
        out["replaced_links"] = serde_json::Value::from(replaced.to_vec());
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let rows: u64 = manifest.tables.iter().map(|t| t.rows).sum();
    println!(
        "{verb} {}: {rows} rows in {} tables ({}, schema {}), {} workspace files{}",
        file.display(),
        manifest.tables.len(),
        manifest.backend,
        manifest.schema_version,
        manifest.workspace_files,
        if manifest.config { ", config.toml" } else { "" }
    );
    if skipped > 0 {
        println!(
            "left out {skipped} symbolic link(s), special or hard-linked file(s) of the workspace"
        );
    }
    if !replaced.is_empty() {
        println!(
            "replaced {} symbolic link(s) with the archive's files (what they point to is unchanged):",
            replaced.len()
        );
        for link in replaced {
            println!("  {link}");
        }
    }
    Ok(())
}
