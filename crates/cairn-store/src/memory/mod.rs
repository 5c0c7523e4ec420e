//! Memory documents: what the agent remembers about the person, found again
//! by words (full-text: FTS5 on SQLite, a GIN-indexed tsvector on
//! PostgreSQL) or by meaning (embeddings stored here, compared by the agent).
//!
//! Both backends search the same folded text (`cairn_core::fold`), and a
//! hit's keyword score is the share of the query's terms the document holds,
//! computed here in Rust (its square root, see [`KeywordHit::score`]), so
//! the two backends rank alike.
//!
//! Each document belongs to one agent (`main` unless told otherwise): every
//! read that lists or searches takes the agent and returns its documents and
//! the `shared` ones of every agent; only the owning agent replaces a key,
//! forgets by key, or has hygiene archive and purge its documents.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::codec::Cols;
use crate::signal::Topic;
use crate::{Store, StoreError};

/// The agent everything belongs to when no other is named (and every
/// document stored before there were agents).
pub const MAIN_AGENT: &str = "main";

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
    /// The agent that stores it (and owns it).
    pub agent: String,
    /// A stable name; storing again under the same key (by the same agent)
    /// replaces the content, category, source and `shared`.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Its category.
    pub category: MemoryCategory,
    /// Where it came from (`tool`, `cli`, `chat`, `compactor`, `snapshot`, …).
    pub source: String,
    /// Visible to every agent, not only its own.
    pub shared: bool,
}

/// A stored memory document.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryDoc {
    /// Its id.
    pub id: Uuid,
    /// Whose memory it is.
    pub user_id: String,
    /// The agent that owns it.
    pub agent: String,
    /// Visible to every agent, not only its own.
    pub shared: bool,
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
        "d.id, d.user_id, d.agent, d.shared, d.doc_key, d.content, d.search_text, d.category, \
         d.source, d.content_hash, d.created_at, d.updated_at, d.accessed_at, d.embedding_model"
    };
}

// Declared after `doc_columns!`, which they use.
mod documents;
mod embeddings;
mod hygiene;
mod search;

fn doc_of(row: &AnyRow) -> Result<MemoryDoc, StoreError> {
    let c = Cols(row);
    let category = c.text("category")?;
    Ok(MemoryDoc {
        id: c.uuid("id")?,
        user_id: c.text("user_id")?,
        agent: c.text("agent")?,
        shared: c.boolean("shared")?,
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
