//! Hygiene: archiving and purging old documents, never `core` ones.

use chrono::{DateTime, Utc};

use super::{MemoryCategory, bump_if};
use crate::codec::micros;
use crate::{Store, StoreError};

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Hygiene: moves `agent`'s own documents (of a person) of `categories` last updated
    /// before `cutoff` to `archived`. Core documents are never archived,
    /// whatever is asked. Returns how many moved.
    pub async fn archive_memories_older_than(
        &self,
        user_id: &str,
        agent: &str,
        categories: &[MemoryCategory],
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let mut moved = 0;
        for category in categories
            .iter()
            .filter(|c| !matches!(c, MemoryCategory::Core | MemoryCategory::Archived))
        {
            let done = sqlx::query(
                "UPDATE memory_docs SET category = 'archived'
                     WHERE user_id = $1 AND category = $2 AND updated_at < $3 AND agent = $4",
            )
            .bind(user_id)
            .bind(category.as_str())
            .bind(micros(cutoff))
            .bind(agent)
            .execute(self.pool())
            .await?;
            moved += done.rows_affected();
        }
        bump_if(self, moved).await?;
        Ok(moved)
    }

    /// Hygiene: deletes `agent`'s own documents (of a person) of `category` last updated
    /// before `cutoff`. Core documents are never purged: asking for them
    /// deletes nothing. Returns how many went.
    pub async fn purge_memories_older_than(
        &self,
        user_id: &str,
        agent: &str,
        category: MemoryCategory,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        if category == MemoryCategory::Core {
            return Ok(0);
        }
        let done = sqlx::query(
            "DELETE FROM memory_docs
                 WHERE user_id = $1 AND category = $2 AND category <> 'core' AND updated_at < $3
                   AND agent = $4",
        )
        .bind(user_id)
        .bind(category.as_str())
        .bind(micros(cutoff))
        .bind(agent)
        .execute(self.pool())
        .await?;
        bump_if(self, done.rows_affected()).await?;
        Ok(done.rows_affected())
    }
}
