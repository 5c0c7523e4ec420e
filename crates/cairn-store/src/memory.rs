//! Memory documents: what the agent remembers about the person, found again
//! by words (full-text: FTS5 on SQLite, a GIN-indexed tsvector on
//! PostgreSQL) or by meaning (embeddings stored here, compared by the agent).
//!
//! Both backends search the same folded text (`cairn_core::fold`), and a
//! hit's keyword score is the share of the query's terms the document holds,
//! computed here in Rust (its square root, see [`KeywordHit::score`]), so
//! the two backends rank alike.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::codec::{Cols, micros};
use crate::connect::Backend;
use crate::signal::Topic;
use crate::{Store, StoreError};

/// What kind of memory a document is; decides how long it is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryCategory {
    /// Lasting facts about the person; never archived or purged.
    Core,
    /// Daily summaries (the compactor's `daily/` notes); archived after a week.
    Daily,
    /// Auto-saved messages; purged after a month.
    Conversation,
    /// Anything else the person or agent files; kept like core.
    Custom,
    /// Daily notes past their time; not recalled, purged after a month.
    Archived,
}

impl MemoryCategory {
    /// Every category, in display order.
    pub const ALL: [MemoryCategory; 5] = [
        MemoryCategory::Core,
        MemoryCategory::Daily,
        MemoryCategory::Conversation,
        MemoryCategory::Custom,
        MemoryCategory::Archived,
    ];

    /// The stored name (`core`, `daily`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryCategory::Core => "core",
            MemoryCategory::Daily => "daily",
            MemoryCategory::Conversation => "conversation",
            MemoryCategory::Custom => "custom",
            MemoryCategory::Archived => "archived",
        }
    }

    /// Parses a stored or typed name (case-insensitive).
    pub fn parse(name: &str) -> Option<MemoryCategory> {
        MemoryCategory::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

impl std::fmt::Display for MemoryCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A document to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMemory {
    /// Whose memory it is.
    pub user_id: String,
    /// A stable name; storing again under the same key replaces the content.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Its category.
    pub category: MemoryCategory,
    /// Where it came from (`tool`, `cli`, `chat`, `compactor`, `snapshot`, …).
    pub source: String,
}

/// A stored memory document.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryDoc {
    /// Its id.
    pub id: Uuid,
    /// Whose memory it is.
    pub user_id: String,
    /// Its key, if it has one.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Its category.
    pub category: MemoryCategory,
    /// Where it came from.
    pub source: String,
    /// SHA-256 of the content (hex): the embedding cache's key.
    pub content_hash: String,
    /// When it was first stored.
    pub created_at: DateTime<Utc>,
    /// When its content or category last changed.
    pub updated_at: DateTime<Utc>,
    /// When recall last returned it.
    pub accessed_at: Option<DateTime<Utc>>,
    /// The model its stored embedding came from; `None` without one.
    pub embedding_model: Option<String>,
}

/// A full-text hit.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordHit {
    /// The document.
    pub doc: MemoryDoc,
    /// The square root of the share of the query's terms the document
    /// holds, in 0..=1 (1: every term).
    pub score: f64,
}

/// Counts over one person's memories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Documents in all.
    pub total: u64,
    /// Documents per category (categories with none are left out).
    pub by_category: Vec<(MemoryCategory, u64)>,
    /// Documents with a stored embedding.
    pub embedded: u64,
}

/// SHA-256 of `content`, hex: the key of the embedding cache.
pub fn content_hash(content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Unit vectors as stored: little-endian f32.
fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// The columns [`doc_of`] reads, for `concat!` into static SQL (sqlx takes no dynamic SQL).
macro_rules! doc_columns {
    () => {
        "d.id, d.user_id, d.doc_key, d.content, d.search_text, d.category, d.source, \
         d.content_hash, d.created_at, d.updated_at, d.accessed_at, d.embedding_model"
    };
}

fn doc_of(row: &AnyRow) -> Result<MemoryDoc, StoreError> {
    let c = Cols(row);
    let category = c.text("category")?;
    Ok(MemoryDoc {
        id: c.uuid("id")?,
        user_id: c.text("user_id")?,
        key: c.text_opt("doc_key")?,
        content: c.text("content")?,
        category: MemoryCategory::parse(&category).ok_or_else(|| StoreError::Corrupt {
            what: "memory category".to_string(),
            message: format!("unknown category {category:?}"),
        })?,
        source: c.text("source")?,
        content_hash: c.text("content_hash")?,
        created_at: c.time("created_at")?,
        updated_at: c.time("updated_at")?,
        accessed_at: c.time_opt("accessed_at")?,
        embedding_model: c.text_opt("embedding_model")?,
    })
}

/// The folded text a document is searched by: its key and its content.
fn searchable(key: Option<&str>, content: &str) -> String {
    match key {
        Some(key) => cairn_core::fold::search_text(&format!("{key} {content}")),
        None => cairn_core::fold::search_text(content),
    }
}

impl Store {
    /// Stores a document. With a key already used by this person, that
    /// document takes the new content, category and source (its embedding
    /// is dropped when the content changed) and is returned.
    pub async fn store_memory(
        &self,
        memory: &NewMemory,
        now: DateTime<Utc>,
    ) -> Result<MemoryDoc, StoreError> {
        self.on_runtime(async {
            let hash = content_hash(&memory.content);
            let search = searchable(memory.key.as_deref(), &memory.content);
            let mut tx = self.begin_write().await?;
            let existing = match &memory.key {
                Some(key) => sqlx::query(
                    "SELECT id, content_hash FROM memory_docs WHERE user_id = $1 AND doc_key = $2",
                )
                .bind(&memory.user_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| {
                    let c = Cols(&row);
                    Ok::<_, StoreError>((c.uuid("id")?, c.text("content_hash")?))
                })
                .transpose()?,
                None => None,
            };
            let id = match existing {
                Some((id, old_hash)) => {
                    let same = old_hash == hash;
                    sqlx::query(
                        "UPDATE memory_docs SET content = $1, search_text = $2, category = $3, source = $4,
                             content_hash = $5, updated_at = $6,
                             embedding = CASE WHEN $7 = 1 THEN embedding ELSE NULL END,
                             embedding_model = CASE WHEN $7 = 1 THEN embedding_model ELSE NULL END
                         WHERE id = $8",
                    )
                    .bind(&memory.content)
                    .bind(&search)
                    .bind(memory.category.as_str())
                    .bind(&memory.source)
                    .bind(&hash)
                    .bind(micros(now))
                    .bind(i64::from(same))
                    .bind(id.to_string())
                    .execute(&mut *tx)
                    .await?;
                    id
                }
                None => {
                    let id = Uuid::now_v7();
                    sqlx::query(
                        "INSERT INTO memory_docs (id, user_id, doc_key, content, search_text, category, source,
                             content_hash, created_at, updated_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
                    )
                    .bind(id.to_string())
                    .bind(&memory.user_id)
                    .bind(memory.key.as_deref())
                    .bind(&memory.content)
                    .bind(&search)
                    .bind(memory.category.as_str())
                    .bind(&memory.source)
                    .bind(&hash)
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await?;
                    id
                }
            };
            bump_generation(&mut *tx).await?;
            tx.publish(Topic::Memory).await?;
            tx.commit().await?;
            self.get_memory(id).await?.ok_or(StoreError::NotFound {
                what: "memory",
                id: id.to_string(),
            })
        })
        .await
    }

    /// A document by id.
    pub async fn get_memory(&self, id: Uuid) -> Result<Option<MemoryDoc>, StoreError> {
        self.on_runtime(async {
            sqlx::query(concat!(
                "SELECT ",
                doc_columns!(),
                " FROM memory_docs d WHERE d.id = $1"
            ))
            .bind(id.to_string())
            .fetch_optional(self.pool())
            .await?
            .as_ref()
            .map(doc_of)
            .transpose()
        })
        .await
    }

    /// A person's document by key.
    pub async fn get_memory_by_key(
        &self,
        user_id: &str,
        key: &str,
    ) -> Result<Option<MemoryDoc>, StoreError> {
        self.on_runtime(async {
            sqlx::query(concat!(
                "SELECT ",
                doc_columns!(),
                " FROM memory_docs d WHERE d.user_id = $1 AND d.doc_key = $2"
            ))
            .bind(user_id)
            .bind(key)
            .fetch_optional(self.pool())
            .await?
            .as_ref()
            .map(doc_of)
            .transpose()
        })
        .await
    }

    /// Replaces a document's content (its embedding goes with the old text).
    pub async fn update_memory(
        &self,
        id: Uuid,
        content: &str,
        now: DateTime<Utc>,
    ) -> Result<MemoryDoc, StoreError> {
        self.on_runtime(async {
            let not_found = || StoreError::NotFound {
                what: "memory",
                id: id.to_string(),
            };
            let doc = self.get_memory(id).await?.ok_or_else(not_found)?;
            let hash = content_hash(content);
            let done = sqlx::query(
                "UPDATE memory_docs SET content = $1, search_text = $2, content_hash = $3, updated_at = $4,
                     embedding = NULL, embedding_model = NULL
                 WHERE id = $5",
            )
            .bind(content)
            .bind(searchable(doc.key.as_deref(), content))
            .bind(&hash)
            .bind(micros(now))
            .bind(id.to_string())
            .execute(self.pool())
            .await?;
            if done.rows_affected() == 0 {
                return Err(not_found());
            }
            bump_generation(self.pool()).await?;
            self.publish(&[Topic::Memory]).await?;
            self.get_memory(id).await?.ok_or_else(not_found)
        })
        .await
    }

    /// Deletes a document; returns whether it existed.
    pub async fn forget_memory(&self, id: Uuid) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query("DELETE FROM memory_docs WHERE id = $1")
                .bind(id.to_string())
                .execute(self.pool())
                .await?;
            bump_if(self, done.rows_affected()).await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    /// Deletes a person's document by key; returns whether it existed.
    pub async fn forget_memory_by_key(&self, user_id: &str, key: &str) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query("DELETE FROM memory_docs WHERE user_id = $1 AND doc_key = $2")
                .bind(user_id)
                .bind(key)
                .execute(self.pool())
                .await?;
            bump_if(self, done.rows_affected()).await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    /// A person's documents, most recently updated first, optionally of one
    /// category, at most `limit`.
    pub async fn list_memories(
        &self,
        user_id: &str,
        category: Option<MemoryCategory>,
        limit: u32,
    ) -> Result<Vec<MemoryDoc>, StoreError> {
        self.on_runtime(async {
            let rows = sqlx::query(concat!(
                "SELECT ",
                doc_columns!(),
                " FROM memory_docs d
                 WHERE d.user_id = $1 AND ($2 = '' OR d.category = $2)
                 ORDER BY d.updated_at DESC, d.id DESC LIMIT $3"
            ))
            .bind(user_id)
            .bind(category.map(MemoryCategory::as_str).unwrap_or(""))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
            rows.iter().map(doc_of).collect()
        })
        .await
    }

    /// How many documents a person has (all categories).
    pub async fn count_memories(&self, user_id: &str) -> Result<u64, StoreError> {
        self.on_runtime(async {
            let row = sqlx::query("SELECT COUNT(*) AS n FROM memory_docs WHERE user_id = $1")
                .bind(user_id)
                .fetch_one(self.pool())
                .await?;
            Cols(&row).uint("n")
        })
        .await
    }

    /// Counts by category and of embedded documents.
    pub async fn memory_stats(&self, user_id: &str) -> Result<MemoryStats, StoreError> {
        self.on_runtime(async {
            let rows = sqlx::query(
                "SELECT category, COUNT(*) AS n, COUNT(embedding) AS embedded
                 FROM memory_docs WHERE user_id = $1 GROUP BY category",
            )
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
            let mut stats = MemoryStats::default();
            for row in &rows {
                let c = Cols(row);
                let name = c.text("category")?;
                let n = c.uint("n")?;
                let embedded = c.uint("embedded")?;
                stats.total += n;
                stats.embedded += embedded;
                if let Some(category) = MemoryCategory::parse(&name) {
                    stats.by_category.push((category, n));
                }
            }
            stats.by_category.sort();
            Ok(stats)
        })
        .await
    }

    /// Full-text search over a person's documents (archived ones left out):
    /// documents holding any of the query's meaningful terms, best first by
    /// [`KeywordHit::score`] (ties keep the backend's ranking), at most `limit`.
    /// A query of stop words only finds nothing.
    pub async fn search_memories(
        &self,
        user_id: &str,
        query: &str,
        limit: u32,
    ) -> Result<Vec<KeywordHit>, StoreError> {
        self.on_runtime(async {
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
                           AND d.category <> 'archived'
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
        })
        .await
    }

    /// Records that recall returned these documents.
    pub async fn touch_memories(&self, ids: &[Uuid], now: DateTime<Utc>) -> Result<(), StoreError> {
        self.on_runtime(async {
            for id in ids {
                sqlx::query("UPDATE memory_docs SET accessed_at = $1 WHERE id = $2")
                    .bind(micros(now))
                    .bind(id.to_string())
                    .execute(self.pool())
                    .await?;
            }
            Ok(())
        })
        .await
    }

    /// Stores a document's embedding, unless its content changed since
    /// `content_hash` was read (the vector would describe old text).
    /// Returns whether it was stored.
    pub async fn set_memory_embedding(
        &self,
        id: Uuid,
        content_hash: &str,
        model: &str,
        vector: &[f32],
    ) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query(
                "UPDATE memory_docs SET embedding = $1, embedding_model = $2
                 WHERE id = $3 AND content_hash = $4",
            )
            .bind(encode_vector(vector))
            .bind(model)
            .bind(id.to_string())
            .bind(content_hash)
            .execute(self.pool())
            .await?;
            bump_if(self, done.rows_affected()).await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    /// A document's stored embedding and the model it came from.
    pub async fn memory_embedding(
        &self,
        id: Uuid,
    ) -> Result<Option<(String, Vec<f32>)>, StoreError> {
        self.on_runtime(async {
            let row = sqlx::query(
                "SELECT embedding, embedding_model FROM memory_docs
                 WHERE id = $1 AND embedding IS NOT NULL",
            )
            .bind(id.to_string())
            .fetch_optional(self.pool())
            .await?;
            row.map(|row| {
                let bytes: Vec<u8> = sqlx::Row::try_get(&row, "embedding")?;
                let model = Cols(&row).text_opt("embedding_model")?.unwrap_or_default();
                Ok((model, vector_of(&bytes)?))
            })
            .transpose()
        })
        .await
    }

    /// Every recallable (not archived) document's embedding from `model`:
    /// what vector recall compares a query with.
    pub async fn memory_vectors(
        &self,
        user_id: &str,
        model: &str,
    ) -> Result<Vec<(Uuid, Vec<f32>)>, StoreError> {
        self.on_runtime(async {
            let rows = sqlx::query(
                "SELECT id, embedding FROM memory_docs
                 WHERE user_id = $1 AND embedding_model = $2 AND embedding IS NOT NULL
                   AND category <> 'archived'",
            )
            .bind(user_id)
            .bind(model)
            .fetch_all(self.pool())
            .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                let bytes: Vec<u8> = sqlx::Row::try_get(row, "embedding")?;
                out.push((Cols(row).uuid("id")?, vector_of(&bytes)?));
            }
            Ok(out)
        })
        .await
    }

    /// A number that changes after every write that may change what
    /// [`Store::memory_vectors`] returns (in any process): a reader may keep
    /// the vectors while it stays the same.
    pub async fn memory_generation(&self) -> Result<i64, StoreError> {
        self.on_runtime(async {
            let row = sqlx::query("SELECT n FROM memory_generation WHERE id = 1")
                .fetch_optional(self.pool())
                .await?;
            Ok(match row {
                Some(row) => Cols(&row).int("n")?,
                None => 0,
            })
        })
        .await
    }

    /// Documents by id, in the order given (missing ones left out).
    pub async fn memories_by_ids(&self, ids: &[Uuid]) -> Result<Vec<MemoryDoc>, StoreError> {
        self.on_runtime(async {
            let mut docs = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(doc) = self.get_memory(*id).await? {
                    docs.push(doc);
                }
            }
            Ok(docs)
        })
        .await
    }

    /// A cached embedding of content with this hash from `model`.
    pub async fn cached_embedding(
        &self,
        content_hash: &str,
        model: &str,
    ) -> Result<Option<Vec<f32>>, StoreError> {
        self.on_runtime(async {
            let row = sqlx::query(
                "SELECT vector FROM memory_embedding_cache WHERE content_hash = $1 AND model = $2",
            )
            .bind(content_hash)
            .bind(model)
            .fetch_optional(self.pool())
            .await?;
            row.map(|row| {
                let bytes: Vec<u8> = sqlx::Row::try_get(&row, "vector")?;
                vector_of(&bytes)
            })
            .transpose()
        })
        .await
    }

    /// Caches an embedding by content hash and model (the first one stays).
    pub async fn cache_embedding(
        &self,
        content_hash: &str,
        model: &str,
        vector: &[f32],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.on_runtime(async {
            sqlx::query(
                "INSERT INTO memory_embedding_cache (content_hash, model, vector, created_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (content_hash, model) DO NOTHING",
            )
            .bind(content_hash)
            .bind(model)
            .bind(encode_vector(vector))
            .bind(micros(now))
            .execute(self.pool())
            .await?;
            Ok(())
        })
        .await
    }

    /// Hygiene: moves a person's documents of `categories` last updated
    /// before `cutoff` to `archived`. Core documents are never archived,
    /// whatever is asked. Returns how many moved.
    pub async fn archive_memories_older_than(
        &self,
        user_id: &str,
        categories: &[MemoryCategory],
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.on_runtime(async {
            let mut moved = 0;
            for category in categories
                .iter()
                .filter(|c| !matches!(c, MemoryCategory::Core | MemoryCategory::Archived))
            {
                let done = sqlx::query(
                    "UPDATE memory_docs SET category = 'archived'
                     WHERE user_id = $1 AND category = $2 AND updated_at < $3",
                )
                .bind(user_id)
                .bind(category.as_str())
                .bind(micros(cutoff))
                .execute(self.pool())
                .await?;
                moved += done.rows_affected();
            }
            bump_if(self, moved).await?;
            Ok(moved)
        })
        .await
    }

    /// Hygiene: deletes a person's documents of `category` last updated
    /// before `cutoff`. Core documents are never purged: asking for them
    /// deletes nothing. Returns how many went.
    pub async fn purge_memories_older_than(
        &self,
        user_id: &str,
        category: MemoryCategory,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.on_runtime(async {
            if category == MemoryCategory::Core {
                return Ok(0);
            }
            let done = sqlx::query(
                "DELETE FROM memory_docs
                 WHERE user_id = $1 AND category = $2 AND category <> 'core' AND updated_at < $3",
            )
            .bind(user_id)
            .bind(category.as_str())
            .bind(micros(cutoff))
            .execute(self.pool())
            .await?;
            bump_if(self, done.rows_affected()).await?;
            Ok(done.rows_affected())
        })
        .await
    }
}

/// Marks the recallable vectors as changed (see [`Store::memory_generation`]).
async fn bump_generation<'e, E>(executor: E) -> Result<(), StoreError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    sqlx::query("UPDATE memory_generation SET n = n + 1 WHERE id = 1")
        .execute(executor)
        .await?;
    Ok(())
}

/// Bumps the generation when a write changed something.
async fn bump_if(store: &Store, changed: u64) -> Result<(), StoreError> {
    if changed > 0 {
        bump_generation(store.pool()).await?;
        store.publish(&[Topic::Memory]).await?;
    }
    Ok(())
}

fn vector_of(bytes: &[u8]) -> Result<Vec<f32>, StoreError> {
    decode_vector(bytes).ok_or_else(|| StoreError::Corrupt {
        what: "memory embedding".to_string(),
        message: format!("{} bytes is not a whole number of f32", bytes.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_as_bytes() {
        let v = vec![0.5_f32, -1.25, 3.0e-7];
        assert_eq!(decode_vector(&encode_vector(&v)), Some(v));
        assert_eq!(decode_vector(&[1, 2, 3]), None);
    }

    #[test]
    fn categories_parse_their_names() {
        for c in MemoryCategory::ALL {
            assert_eq!(MemoryCategory::parse(c.as_str()), Some(c));
        }
        assert_eq!(MemoryCategory::parse("CORE"), Some(MemoryCategory::Core));
        assert_eq!(MemoryCategory::parse("nope"), None);
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            content_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
