//! `cairn export DIR` / `cairn import DIR`: what a person wrote, in files
//! they can read and edit. Routines are `routines/NAME.yaml` in the form
//! `cairn routine apply` reads (import applies them the same way, all or
//! nothing); memories are `memories.jsonl`, one JSON object a line (with
//! its `agent` when not `main`, and `shared`). The
//! built-in upkeep routines and spent one-shots are left out.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use cairn_core::routine::{RoutineAction, Trigger};
use cairn_store::{MAIN_AGENT, MemoryCategory, NewMemory, Store};
use chrono::{DateTime, Utc};
use clap::Args;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::routine::{self, Ctx};
use super::routine_files;
use crate::exit::BadInput;
use crate::{home, settings};

/// Arguments of `cairn export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The directory to write (created; must be empty unless --force).
    pub dir: PathBuf,
    /// Write into a directory that is not empty, replacing files of the same name.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `cairn import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A directory written by `cairn export`.
    pub dir: PathBuf,
}

/// One line of memories.jsonl.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    category: String,
    content: String,
    source: String,
    /// The agent that owns it (absent: `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    /// Visible to every agent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    shared: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<DateTime<Utc>>,
}

/// A file name for a routine name (names are short; anything odd becomes `_`).
fn file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.yaml", safe.trim_start_matches('.'))
}

/// Runs `cairn export`.
pub fn export(args: &ExportArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    if !args.force && !super::backup::is_empty_dir(&args.dir)? {
        return Err(BadInput(format!(
            "{} is not empty; add --force to write into it",
            args.dir.display()
        ))
        .into());
    }
    let (routines, memories) = super::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let routines = store.list_routines(Some(&config.user.id)).await?;
        // Every configured agent's own memories (each listing also holds the
        // shared ones of others, kept once under their owner).
        let mut memories = Vec::new();
        for agent in crate::wiring::agents(&config)?.all() {
            let docs = store
                .list_memories(&config.user.id, &agent.id, None, u32::MAX)
                .await?;
            memories.extend(docs.into_iter().filter(|d| d.agent == agent.id));
        }
        // Newest first, as one listing gives them.
        memories.sort_by_key(|d| std::cmp::Reverse(d.updated_at));
        store.close().await;
        anyhow::Ok((routines, memories))
    })?;
    let routines_dir = args.dir.join("routines");
    home::create_dir(&routines_dir)?;
    let mut written = Vec::new();
    let mut skipped = Vec::new();
    for r in &routines {
        let spent =
            matches!(r.spec.trigger, Trigger::Once { .. }) && r.runtime.next_fire_at.is_none();
        if matches!(r.spec.action, RoutineAction::System { .. }) || spent {
            skipped.push(r.spec.name.clone());
            continue;
        }
        let text = r
            .spec
            .to_yaml()
            .map_err(|e| anyhow::anyhow!("routine \"{}\": {}", r.spec.name, e.message))?;
        let path = routines_dir.join(file_name(&r.spec.name));
        home::write(&path, text.as_bytes(), args.force)?;
        written.push(r.spec.name.clone());
    }
    let memories_path = args.dir.join("memories.jsonl");
    let mut out = std::io::BufWriter::new(home::create_file(&memories_path, args.force)?);
    // Oldest first, so an import stores them in the order they were made.
    for doc in memories.iter().rev() {
        let line = MemoryLine {
            key: doc.key.clone(),
            category: doc.category.as_str().to_string(),
            content: doc.content.clone(),
            source: doc.source.clone(),
            agent: (doc.agent != MAIN_AGENT).then(|| doc.agent.clone()),
            shared: doc.shared,
            created_at: Some(doc.created_at),
            updated_at: Some(doc.updated_at),
        };
        writeln!(out, "{}", serde_json::to_string(&line)?)?;
    }
    out.flush()?;
    if as_json {
        let summary = serde_json::json!({
            "dir": args.dir, "routines": written, "skipped_routines": skipped,
            "memories": memories.len(),
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "exported {} routine(s) to {} and {} memories to {}",
            written.len(),
            routines_dir.display(),
            memories.len(),
            memories_path.display()
        );
        if !skipped.is_empty() {
            println!(
                "left out (built-in or spent one-shot): {}",
                skipped.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads memories.jsonl; every bad line is reported with its number.
#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command, before the runtime starts"
)]
fn read_memories(path: &Path) -> anyhow::Result<Vec<MemoryLine>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<MemoryLine>(&line) {
            Ok(m) if MemoryCategory::parse(&m.category).is_none() => problems.push(format!(
                "{}:{}: unknown category \"{}\"",
                path.display(),
                i + 1,
                m.category
            )),
            Ok(m) => out.push(m),
            Err(e) => problems.push(format!("{}:{}: {e}", path.display(), i + 1)),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(BadInput(format!("nothing imported:\n  {}", problems.join("\n  "))).into())
    }
}

/// Runs `cairn import`.
#[expect(
    clippy::disallowed_methods,
    reason = "one-shot command, before the runtime starts"
)]
pub fn import(args: &ImportArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    // Routine checks (a `shell` in allowed_tools) judge by this configuration.
    crate::wiring::install_host_sandbox(&config)?;
    let now = Utc::now();
    let routines_dir = args.dir.join("routines");
    let checked = if routines_dir.is_dir() && !super::backup::is_empty_dir(&routines_dir)? {
        let agents = routine_files::AgentChoice {
            known: &routine_files::configured_agents(&config)?,
            default: None,
        };
        routine_files::check(&routines_dir, config.user.timezone, now, &agents)?
    } else {
        Vec::new()
    };
    let memories = read_memories(&args.dir.join("memories.jsonl"))?;
    let routine_count = checked.len();
    super::runtime()?.block_on(async {
        let ctx = Ctx::open(&config, as_json).await?;
        if !checked.is_empty() {
            routine::apply(&ctx, checked).await?;
        }
        let (added, known) = add_memories(&ctx.store, &config.user.id, memories).await?;
        if as_json {
            let summary =
                serde_json::json!({"memories_added": added, "memories_already_there": known});
            println!("{summary}");
        } else {
            println!(
                "{routine_count} routine(s) applied; {added} memories added, {known} already there"
            );
        }
        ctx.store.close().await;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Stores each memory under its agent (an agent not configured here
/// keeps its memories for when it is): a keyed one replaces the text under
/// its key; a keyless one is skipped when its agent already remembers the
/// same text.
async fn add_memories(
    store: &Store,
    user: &str,
    memories: Vec<MemoryLine>,
) -> anyhow::Result<(usize, usize)> {
    let mut existing: std::collections::HashMap<String, Vec<String>> = Default::default();
    let (mut added, mut known) = (0, 0);
    for m in memories {
        let agent = m.agent.unwrap_or_else(|| MAIN_AGENT.to_string());
        if !existing.contains_key(&agent) {
            let docs = store.list_memories(user, &agent, None, u32::MAX).await?;
            let own = docs.into_iter().filter(|d| d.agent == agent);
            existing.insert(agent.clone(), own.map(|d| d.content).collect());
        }
        let known_texts = existing.get(&agent).map(Vec::as_slice).unwrap_or_default();
        if m.key.is_none() && known_texts.contains(&m.content) {
            known += 1;
            continue;
        }
        let category = MemoryCategory::parse(&m.category).unwrap_or(MemoryCategory::Custom);
        let new = NewMemory {
            user_id: user.to_string(),
            agent,
            key: m.key,
            content: m.content,
            category,
            source: m.source,
            shared: m.shared,
        };
        store
            .store_memory(&new, m.updated_at.unwrap_or_else(Utc::now))
            .await?;
        added += 1;
    }
    Ok((added, known))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routine_names_become_plain_file_names() {
        assert_eq!(file_name("disk-check"), "disk-check.yaml");
        assert_eq!(file_name("a/b c"), "a_b_c.yaml");
        assert_eq!(file_name("../x"), "_x.yaml");
    }
}
