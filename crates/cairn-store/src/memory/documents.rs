//! Storing, reading, updating, forgetting and counting memory documents.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    MemoryCategory, MemoryDoc, MemoryStats, NewMemory, bump_generation, bump_if, content_hash,
    doc_of, searchable,
};
use crate::codec::{Cols, micros};
use crate::signal::Topic;
use crate::{Store, StoreError};

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Stores a document for `memory.agent`. With a key that agent already
    /// uses for this person, that document takes the new content, category,
    /// source and `shared` (its embedding is dropped when the content
    /// changed) and is returned. Another agent's document under the same
    /// key, shared or not, is left alone: keys are the agent's own.
    pub async fn store_memory(
        &self,
        memory: &NewMemory,
        now: DateTime<Utc>,
    ) -> Result<MemoryDoc, StoreError> {
        let hash = content_hash(&memory.content);
        let search = searchable(memory.key.as_deref(), &memory.content);
        let mut tx = self.begin_write().await?;
        let existing = match &memory.key {
            Some(key) => sqlx::query(
                "SELECT id, content_hash FROM memory_docs
                     WHERE user_id = $1 AND agent = $2 AND doc_key = $3",
            )
            .bind(&memory.user_id)
            .bind(&memory.agent)
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
                             embedding_model = CASE WHEN $7 = 1 THEN embedding_model ELSE NULL END,
                             shared = $9
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
                .bind(i64::from(memory.shared))
                .execute(&mut *tx)
                .await?;
                id
            }
            None => {
                let id = Uuid::now_v7();
                sqlx::query(
                    "INSERT INTO memory_docs (id, user_id, doc_key, content, search_text, category, source,
                             content_hash, created_at, updated_at, agent, shared)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11)",
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
                .bind(&memory.agent)
                .bind(i64::from(memory.shared))
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
    }

    /// A document by id.
    pub async fn get_memory(&self, id: Uuid) -> Result<Option<MemoryDoc>, StoreError> {
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
    }

    /// A person's document by key, as `agent` sees it: its own under that
    /// key, else the oldest shared one of another agent.
    pub async fn get_memory_by_key(
        &self,
        user_id: &str,
        agent: &str,
        key: &str,
    ) -> Result<Option<MemoryDoc>, StoreError> {
        sqlx::query(concat!(
            "SELECT ",
            doc_columns!(),
            " FROM memory_docs d
                 WHERE d.user_id = $1 AND d.doc_key = $3 AND (d.agent = $2 OR d.shared = 1)
                 ORDER BY CASE WHEN d.agent = $2 THEN 0 ELSE 1 END, d.created_at, d.id
                 LIMIT 1"
        ))
        .bind(user_id)
        .bind(agent)
        .bind(key)
        .fetch_optional(self.pool())
        .await?
        .as_ref()
        .map(doc_of)
        .transpose()
    }

    /// Replaces a document's content (its embedding goes with the old text).
    pub async fn update_memory(
        &self,
        id: Uuid,
        content: &str,
        now: DateTime<Utc>,
    ) -> Result<MemoryDoc, StoreError> {
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
    }

    /// Deletes a document; returns whether it existed.
    pub async fn forget_memory(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM memory_docs WHERE id = $1")
            .bind(id.to_string())
            .execute(self.pool())
            .await?;
        bump_if(self, done.rows_affected()).await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes `agent`'s own document by key (never another agent's, shared
    /// or not); returns whether it existed.
    pub async fn forget_memory_by_key(
        &self,
        user_id: &str,
        agent: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM memory_docs WHERE user_id = $1 AND agent = $2 AND doc_key = $3",
        )
        .bind(user_id)
        .bind(agent)
        .bind(key)
        .execute(self.pool())
        .await?;
        bump_if(self, done.rows_affected()).await?;
        Ok(done.rows_affected() > 0)
    }

    /// The documents `agent` sees of a person (its own and the shared
    /// ones), most recently updated first, optionally of one category, at
    /// most `limit`.
    pub async fn list_memories(
        &self,
        user_id: &str,
        agent: &str,
        category: Option<MemoryCategory>,
        limit: u32,
    ) -> Result<Vec<MemoryDoc>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            doc_columns!(),
            " FROM memory_docs d
                 WHERE d.user_id = $1 AND (d.agent = $4 OR d.shared = 1)
                   AND ($2 = '' OR d.category = $2)
                 ORDER BY d.updated_at DESC, d.id DESC LIMIT $3"
        ))
        .bind(user_id)
        .bind(category.map(MemoryCategory::as_str).unwrap_or(""))
        .bind(i64::from(limit))
        .bind(agent)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(doc_of).collect()
    }

    /// How many documents of a person `agent` owns (all categories; the
    /// shared ones of other agents not counted).
    pub async fn count_memories(&self, user_id: &str, agent: &str) -> Result<u64, StoreError> {
        let row =
            sqlx::query("SELECT COUNT(*) AS n FROM memory_docs WHERE user_id = $1 AND agent = $2")
                .bind(user_id)
                .bind(agent)
                .fetch_one(self.pool())
                .await?;
        Cols(&row).uint("n")
    }

    /// Counts by category and of embedded documents, over what `agent`
    /// sees (its own and the shared ones).
    pub async fn memory_stats(
        &self,
        user_id: &str,
        agent: &str,
    ) -> Result<MemoryStats, StoreError> {
        let rows = sqlx::query(
            "SELECT category, COUNT(*) AS n, COUNT(embedding) AS embedded
                 FROM memory_docs WHERE user_id = $1 AND (agent = $2 OR shared = 1)
                 GROUP BY category",
        )
        .bind(user_id)
        .bind(agent)
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
    }

    /// Documents by id, in the order given (missing ones left out).
    pub async fn memories_by_ids(&self, ids: &[Uuid]) -> Result<Vec<MemoryDoc>, StoreError> {
        let mut docs = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(doc) = self.get_memory(*id).await? {
                docs.push(doc);
            }
        }
        Ok(docs)
    }
}
