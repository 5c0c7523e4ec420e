//! Document embeddings, the generation that says when they changed, and the embedding cache.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{bump_if, encode_vector, vector_of};
use crate::codec::{Cols, micros};
use crate::{Store, StoreError};

#[cairn_store_macros::on_store_runtime]
impl Store {
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
    }

    /// A document's stored embedding and the model it came from.
    pub async fn memory_embedding(
        &self,
        id: Uuid,
    ) -> Result<Option<(String, Vec<f32>)>, StoreError> {
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
    }

    /// The embedding from `model` of every recallable (not archived)
    /// document `agent` sees (its own and the shared ones): what vector
    /// recall compares a query with.
    pub async fn memory_vectors(
        &self,
        user_id: &str,
        agent: &str,
        model: &str,
    ) -> Result<Vec<(Uuid, Vec<f32>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, embedding FROM memory_docs
                 WHERE user_id = $1 AND embedding_model = $2 AND embedding IS NOT NULL
                   AND category <> 'archived' AND (agent = $3 OR shared = 1)",
        )
        .bind(user_id)
        .bind(model)
        .bind(agent)
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let bytes: Vec<u8> = sqlx::Row::try_get(row, "embedding")?;
            out.push((Cols(row).uuid("id")?, vector_of(&bytes)?));
        }
        Ok(out)
    }

    /// A number that changes after every write that may change what
    /// [`Store::memory_vectors`] returns (in any process): a reader may keep
    /// the vectors while it stays the same.
    pub async fn memory_generation(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT n FROM memory_generation WHERE id = 1")
            .fetch_optional(self.pool())
            .await?;
        Ok(match row {
            Some(row) => Cols(&row).int("n")?,
            None => 0,
        })
    }

    /// A cached embedding of content with this hash from `model`.
    pub async fn cached_embedding(
        &self,
        content_hash: &str,
        model: &str,
    ) -> Result<Option<Vec<f32>>, StoreError> {
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
    }

    /// Caches an embedding by content hash and model (the first one stays).
    pub async fn cache_embedding(
        &self,
        content_hash: &str,
        model: &str,
        vector: &[f32],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
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
    }
}
