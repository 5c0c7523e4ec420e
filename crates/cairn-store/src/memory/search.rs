//! Full-text search over memory documents, ranked alike on both backends.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{KeywordHit, doc_of};
use crate::codec::{Cols, micros};
use crate::connect::Backend;
use crate::{Store, StoreError};

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Full-text search over the documents `agent` sees of a person (its
    /// own and the shared ones; archived ones left out):
    /// documents holding any of the query's meaningful terms, best first by
    /// [`KeywordHit::score`] (ties keep the backend's ranking), at most `limit`.
    /// A query of stop words only finds nothing.
    pub async fn search_memories(
        &self,
        user_id: &str,
        agent: &str,
        query: &str,
        limit: u32,
    ) -> Result<Vec<KeywordHit>, StoreError> {
        let terms = cairn_core::fold::query_terms(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        // Terms are letters and digits only (see fold::words), so quoting
        // them is all either query language needs.
        let (sql, expr) = match self.backend() {
            Backend::Sqlite => (
                concat!(
                    "SELECT ",
                    doc_columns!(),
                    // CROSS JOIN keeps the full-text match as the outer loop:
                    // driven by the user index instead, SQLite re-runs MATCH per row.
                    " FROM memory_fts f CROSS JOIN memory_docs d ON d.seq = f.rowid
                         WHERE memory_fts MATCH $1 AND d.user_id = $2 AND d.category <> 'archived'
                           AND (d.agent = $4 OR d.shared = 1)
                         ORDER BY bm25(memory_fts) LIMIT $3"
                ),
                terms
                    .iter()
                    .map(|t| format!("\"{t}\""))
                    .collect::<Vec<_>>()
                    .join(" OR "),
            ),
            Backend::Postgres => (
                concat!(
                    "SELECT ",
                    doc_columns!(),
                    " FROM memory_docs d
                         WHERE d.search_tsv @@ to_tsquery('simple', $1) AND d.user_id = $2
                           AND d.category <> 'archived' AND (d.agent = $4 OR d.shared = 1)
                         ORDER BY ts_rank(d.search_tsv, to_tsquery('simple', $1)) DESC LIMIT $3"
                ),
                terms
                    .iter()
                    .map(|t| format!("'{t}'"))
                    .collect::<Vec<_>>()
                    .join(" | "),
            ),
        };
        // More candidates than asked for: the backend's rank and ours differ a little.
        let candidates = i64::from(limit.saturating_mul(4).max(50));
        let rows = sqlx::query(sql)
            .bind(&expr)
            .bind(user_id)
            .bind(candidates)
            .bind(agent)
            .fetch_all(self.pool())
            .await?;
        let mut hits = Vec::with_capacity(rows.len());
        for row in &rows {
            let search: String = Cols(row).text("search_text")?;
            hits.push(KeywordHit {
                doc: doc_of(row)?,
                // The square root lets one word of a longer question
                // still count (1 of 3 terms: 0.58) while a full match is 1.
                score: cairn_core::fold::coverage(&terms, &search).sqrt(),
            });
        }
        // Stable, so equal scores keep the backend's order.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit as usize);
        Ok(hits)
    }

    /// Records that recall returned these documents.
    pub async fn touch_memories(&self, ids: &[Uuid], now: DateTime<Utc>) -> Result<(), StoreError> {
        for id in ids {
            sqlx::query("UPDATE memory_docs SET accessed_at = $1 WHERE id = $2")
                .bind(micros(now))
                .bind(id.to_string())
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }
}
