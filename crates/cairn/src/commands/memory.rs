//! `cairn memory …`: the owner's memory from the command line, through the
//! same [`MemoryService`] the agent uses (so start-up hydration and the
//! embedding cache apply here too). `--agent ID` works on that agent's
//! memory (its documents and the shared ones) and its workspace.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use cairn_agent::memory::json::{doc_json, hit_json};
use cairn_agent::memory::{MemoryService, run_hygiene, snapshot::write_snapshot};
use cairn_core::config::Config;
use cairn_store::{MemoryCategory, Store};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::cli::{MemoryArgs, MemoryCommand};
use crate::exit::BadInput;
use crate::settings;

/// Whose memory a command works on: the service scoped to the agent, and
/// the agent's workspace (snapshots, hygiene).
struct Scope {
    memory: Arc<MemoryService>,
    workspace: std::path::PathBuf,
}

/// Runs one `cairn memory` subcommand.
pub fn run(args: &MemoryArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let agent = args
        .agent
        .as_deref()
        .map(|id| crate::wiring::agent_named(&config, id))
        .transpose()?;
    crate::commands::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret()).await?;
        let main = crate::wiring::memory_service(&config, &store).await?;
        let scope = match &agent {
            Some(spec) => Scope {
                memory: Arc::new(main.for_agent(&spec.id)),
                workspace: crate::wiring::workspace_of(&config, spec),
            },
            None => Scope {
                memory: main,
                workspace: config.workspace.clone(),
            },
        };
        let result = dispatch(&args.command, as_json, &config, &scope).await;
        store.close().await;
        result
    })
}

fn category_arg(name: &str) -> anyhow::Result<MemoryCategory> {
    MemoryCategory::parse(name).ok_or_else(|| {
        BadInput(format!(
            "unknown category {name:?}; use core, daily, conversation, custom or archived"
        ))
        .into()
    })
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        flat.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else {
        flat
    }
}

async fn dispatch(
    command: &MemoryCommand,
    as_json: bool,
    config: &Config,
    scope: &Scope,
) -> anyhow::Result<ExitCode> {
    let memory = &scope.memory;
    match command {
        MemoryCommand::Search { query, limit } => search(memory, query, *limit, as_json).await?,
        MemoryCommand::Add {
            text,
            category,
            key,
        } => add(memory, text, category, key.as_deref(), as_json).await?,
        MemoryCommand::Forget { id, key } => {
            return forget(memory, id.as_deref(), key.as_deref(), as_json).await;
        }
        MemoryCommand::List { category, limit } => {
            list(memory, category.as_deref(), *limit, as_json).await?;
        }
        MemoryCommand::Stats => stats(memory, as_json).await?,
        MemoryCommand::Export => export(&scope.workspace, memory, as_json).await?,
        MemoryCommand::Reindex => reindex(memory, as_json).await?,
        MemoryCommand::Hygiene => hygiene(config, scope, as_json).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn memory search`: the hits recall finds, with how it found them.
async fn search(
    memory: &MemoryService,
    query: &str,
    limit: usize,
    as_json: bool,
) -> anyhow::Result<()> {
    let recall = memory.recall(query, limit.max(1)).await?;
    if as_json {
        let out = json!({
            "mode": recall.mode.as_str(),
            "note": recall.note,
            "hits": recall.hits.iter().map(hit_json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "mode: {}{}",
            recall.mode.as_str(),
            recall.note.map(|n| format!(" ({n})")).unwrap_or_default()
        );
        if recall.hits.is_empty() {
            println!("nothing relevant");
        }
        for hit in &recall.hits {
            println!(
                "{:.2}  {:<7}  {}  {}{}",
                hit.score,
                hit.matched_by.as_str(),
                hit.doc.id,
                hit.doc
                    .key
                    .as_ref()
                    .map(|k| format!("{k}: "))
                    .unwrap_or_default(),
                one_line(&hit.doc.content, 100)
            );
        }
    }
    Ok(())
}

/// `cairn memory add`: stored, its embedding computed before exit.
async fn add(
    memory: &MemoryService,
    text: &str,
    category: &str,
    key: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    let category = category_arg(category)?;
    if text.trim().is_empty() {
        return Err(BadInput("the memory's text is empty".into()).into());
    }
    let doc = memory
        .store_memory(key, text.trim(), category, "cli")
        .await?;
    // The embedding is computed before the process exits.
    memory.flush().await;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&doc_json(&doc))?);
    } else {
        println!("{}", doc.id);
    }
    Ok(())
}

/// `cairn memory forget`, by id or key; exit 1 when there is no such memory.
async fn forget(
    memory: &MemoryService,
    id: Option<&str>,
    key: Option<&str>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let forgotten = match (id, key) {
        (Some(id), None) => {
            let id = uuid::Uuid::parse_str(id.trim())
                .map_err(|_| BadInput(format!("{id:?} is not a memory id")))?;
            memory.forget(id).await?
        }
        (None, Some(key)) => memory.forget_key(key).await?,
        _ => return Err(BadInput("give a memory id or --key".into()).into()),
    };
    if !forgotten {
        eprintln!("no such memory");
        return Ok(ExitCode::from(1));
    }
    if !as_json {
        println!("forgotten");
    } else {
        println!("{}", json!({"forgotten": true}));
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn memory list`: one line each (or JSON), of a category or all.
async fn list(
    memory: &MemoryService,
    category: Option<&str>,
    limit: u32,
    as_json: bool,
) -> anyhow::Result<()> {
    let category = category.map(category_arg).transpose()?;
    let docs = memory.list(category, limit).await?;
    if as_json {
        let out: Vec<Value> = docs.iter().map(doc_json).collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for doc in &docs {
            println!(
                "{}  {:<12}  {}  {}{}",
                doc.id,
                doc.category.as_str(),
                doc.updated_at.format("%Y-%m-%d"),
                doc.key
                    .as_ref()
                    .map(|k| format!("{k}: "))
                    .unwrap_or_default(),
                one_line(&doc.content, 80)
            );
        }
        if docs.is_empty() {
            println!("no memories");
        }
    }
    Ok(())
}

/// `cairn memory stats`: counts by category, and how recall works.
async fn stats(memory: &MemoryService, as_json: bool) -> anyhow::Result<()> {
    let stats = memory.stats().await?;
    let mode = match memory.embedding_model() {
        Some(_) => "hybrid",
        None => "keyword_only",
    };
    if as_json {
        let by: serde_json::Map<String, Value> = stats
            .by_category
            .iter()
            .map(|(c, n)| (c.as_str().to_string(), json!(n)))
            .collect();
        let out = json!({
            "total": stats.total,
            "embedded": stats.embedded,
            "by_category": by,
            "mode": mode,
            "embedding_model": memory.embedding_model(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("memories: {}", stats.total);
        for (c, n) in &stats.by_category {
            println!("  {:<12} {n}", c.as_str());
        }
        println!("embedded: {}", stats.embedded);
        match memory.embedding_model() {
            Some(model) => println!("recall:   hybrid ({model})"),
            None => println!("recall:   keyword-only (no memory.embeddings_provider)"),
        }
    }
    Ok(())
}

/// `cairn memory export`: a snapshot in the workspace; prints its path.
async fn export(
    workspace: &std::path::Path,
    memory: &MemoryService,
    as_json: bool,
) -> anyhow::Result<()> {
    let path = write_snapshot(
        memory.store(),
        memory.user_id(),
        memory.agent(),
        workspace,
        memory.clock().now(),
    )
    .await?;
    if as_json {
        println!("{}", json!({"path": path}));
    } else {
        println!("{}", path.display());
    }
    Ok(())
}

/// `cairn memory reindex`: every memory embedded again, with a bar.
async fn reindex(memory: &MemoryService, as_json: bool) -> anyhow::Result<()> {
    if memory.embedding_model().is_none() {
        return Err(BadInput(
            "no embeddings provider is configured (memory.embeddings_provider); nothing to reindex"
                .into(),
        )
        .into());
    }
    let stored = memory
        .reindex(|done, total| {
            // A bar on stderr, redrawn in place.
            let mut err = std::io::stderr();
            let _ = write!(err, "\r{}", progress_bar(done, total));
            if done == total {
                let _ = writeln!(err);
            }
            let _ = err.flush();
        })
        .await?;
    if as_json {
        println!("{}", json!({"embedded": stored}));
    } else {
        println!("embedded {stored} memories");
    }
    Ok(())
}

/// `cairn memory hygiene`: archiving and purging now, as the routine does.
async fn hygiene(config: &Config, scope: &Scope, as_json: bool) -> anyhow::Result<()> {
    let memory = &scope.memory;
    let report = run_hygiene(
        memory.store(),
        memory.user_id(),
        memory.agent(),
        &crate::wiring::hygiene_settings(config),
        &scope.workspace,
        memory.clock().now(),
    )
    .await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !report.ran {
        println!("memory hygiene is disabled (memory.hygiene_enabled = false)");
    } else {
        println!(
            "archived {}, purged {} archived and {} conversation memories",
            report.archived, report.purged, report.purged_conversation
        );
        if let Some(path) = &report.snapshot {
            println!("snapshot: {}", path.display());
        }
    }
    Ok(())
}

/// `reindexing [#########...........] 45/100`, 20 cells wide.
fn progress_bar(done: usize, total: usize) -> String {
    const WIDTH: usize = 20;
    let filled = (done * WIDTH)
        .checked_div(total)
        .unwrap_or(WIDTH)
        .min(WIDTH);
    format!(
        "reindexing [{}{}] {done}/{total}",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::progress_bar;

    #[test]
    fn the_bar_fills_with_progress() {
        assert_eq!(progress_bar(0, 4), "reindexing [....................] 0/4");
        assert_eq!(progress_bar(1, 4), "reindexing [#####...............] 1/4");
        assert_eq!(progress_bar(4, 4), "reindexing [####################] 4/4");
        assert_eq!(progress_bar(0, 0), "reindexing [####################] 0/0");
    }
}
