//! The database of a backup in its portable form: one JSON-lines file per
//! table (`cairn_store::portable::jsonl`), written from a snapshot and read
//! back into any database in batches.

use std::path::Path;

use anyhow::Context;
use cairn_store::Store;
use cairn_store::portable::{Batch, TableCount, TableHeader, jsonl};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};

use super::archive::Manifest;

/// Rows handed to the database at a time.
const BATCH_ROWS: usize = 500;

/// Opens `dir/<table>.jsonl` for writing (0600) and writes its header line.
async fn start_file(
    dir: &Path,
    header: &TableHeader,
) -> anyhow::Result<BufWriter<tokio::fs::File>> {
    let path = dir.join(format!("{}.jsonl", header.table));
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .await
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    out.write_all(jsonl::header_line(header).as_bytes()).await?;
    out.write_all(b"\n").await?;
    Ok(out)
}

/// Writes every copied table of `store`, from one snapshot, into `dir`.
pub async fn export(store: &Store, dir: &Path) -> anyhow::Result<Vec<TableCount>> {
    let owned = dir.to_path_buf();
    tokio::task::spawn_blocking(move || crate::home::create_dir(&owned)).await??;
    let mut snapshot = store.snapshot().await?;
    let headers = snapshot.headers();
    // Batches come table by table in header order; empty tables send none.
    let mut next = 0;
    let mut current: Option<(String, BufWriter<tokio::fs::File>)> = None;
    while let Some(batch) = snapshot.next_batch().await? {
        while current.as_ref().is_none_or(|(t, _)| *t != batch.table) {
            if let Some((_, mut out)) = current.take() {
                out.flush().await?;
            }
            let header = headers
                .get(next)
                .context("the snapshot sent a table it did not announce")?;
            next += 1;
            current = Some((header.table.clone(), start_file(dir, header).await?));
        }
        if let Some((_, out)) = current.as_mut() {
            for row in &batch.rows {
                out.write_all(jsonl::row_line(row).as_bytes()).await?;
                out.write_all(b"\n").await?;
            }
        }
    }
    if let Some((_, mut out)) = current.take() {
        out.flush().await?;
    }
    for header in &headers[next..] {
        start_file(dir, header).await?.flush().await?;
    }
    Ok(snapshot.counts())
}

/// Reads the tables the manifest lists from `dir` into `target` (empty
/// unless `replace`), in one transaction, checking the manifest's counts.
pub async fn import(
    target: &Store,
    dir: &Path,
    manifest: &Manifest,
    replace: bool,
) -> anyhow::Result<Vec<TableCount>> {
    let mut files = Vec::with_capacity(manifest.tables.len());
    for t in &manifest.tables {
        let path = dir.join(format!("{}.jsonl", t.table));
        let file = tokio::fs::File::open(&path)
            .await
            .with_context(|| format!("the archive has no {}", path.display()))?;
        let mut lines = BufReader::new(file).lines();
        let first = lines.next_line().await?.unwrap_or_default();
        let header = jsonl::parse_header(&first)
            .map_err(|e| anyhow::anyhow!("{}:1: {e}", path.display()))?;
        files.push((path, header, lines));
    }
    let headers: Vec<TableHeader> = files.iter().map(|(_, h, _)| h.clone()).collect();
    let mut import = target
        .begin_import(&headers, replace)
        .await
        .map_err(super::super::db::refusal)?;
    for (path, header, mut lines) in files {
        let mut rows = Vec::with_capacity(BATCH_ROWS);
        let mut line_no = 1;
        while let Some(line) = lines.next_line().await? {
            line_no += 1;
            let row = jsonl::parse_row(&header, &line)
                .map_err(|e| anyhow::anyhow!("{}:{line_no}: {e}", path.display()))?;
            rows.push(row);
            if rows.len() == BATCH_ROWS {
                let batch = Batch {
                    table: header.table.clone(),
                    rows: std::mem::take(&mut rows),
                };
                import.write(batch).await?;
            }
        }
        if !rows.is_empty() {
            let batch = Batch {
                table: header.table.clone(),
                rows,
            };
            import.write(batch).await?;
        }
    }
    Ok(import.finish(&manifest.tables).await?)
}
