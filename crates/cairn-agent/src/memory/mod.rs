//! Memory: what the agent remembers about the person across conversations.
//!
//! [`MemoryService`] stores documents in the [`cairn_store::Store`], computes
//! their embeddings in the background (cached by content hash, so the same
//! text never costs two provider calls), and recalls them by words and by
//! meaning: hybrid recall scores each document `vector_weight × cosine +
//! keyword_weight × keyword score` (0.7 / 0.3 by default), keeps those at or
//! above the minimum relevance (0.4), best first, and says for each hit
//! whether it matched by keyword, vector or both. Without an embeddings
//! provider (or when it fails) recall is keyword-only and says so.
//!
//! - [`context`]: the bounded `[Memory context]` section a chat turn gets.
//! - [`hygiene`]: [`run_hygiene`] archives and purges on schedule (core never).
//! - [`snapshot`]: `MEMORY_SNAPSHOT.md` export, parsing and cold-boot hydration.
//! - [`tools`]: `memory_store`, `memory_recall`, `memory_forget`.
//! - `rank`: cosine similarity and the merge of keyword and vector hits.
//!
//! A service serves one agent ([`MemoryService::for_agent`]; `main` by
//! default): it recalls that agent's documents and the ones any agent
//! shared, stores documents as that agent's, and forgets only its own.
//!
//! Cosine similarity runs in Rust over every stored vector of the person
//! (vectors are unit length, so it is a dot product): fine for a personal
//! store, see `cargo bench -p cairn-agent --bench memory_recall`.

pub mod context;
pub mod hygiene;
pub mod json;
mod rank;
pub mod snapshot;
pub mod tools;

use std::sync::{Arc, Mutex};

use cairn_core::clock::Clock;
use cairn_llm::EmbeddingsClient;
use cairn_store::{
    MAIN_AGENT, MemoryCategory, MemoryDoc, MemoryStats, NewMemory, Store, StoreError,
};
use serde::Serialize;
use tokio::task::JoinSet;
use uuid::Uuid;

pub use hygiene::{HygieneReport, HygieneSettings, run_hygiene};
use rank::{Candidate, merge};
pub use rank::{normalized, top_similar};
pub use snapshot::{SNAPSHOT_FILE, SnapshotEntry, export_snapshot, hydrate, parse_snapshot};

/// How recall weighs and bounds its answers.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySettings {
    /// Weight of vector similarity (0.7).
    pub vector_weight: f64,
    /// Weight of the keyword score (0.3).
    pub keyword_weight: f64,
    /// Hits scoring below this are dropped (0.4).
    pub min_relevance: f64,
    /// Hits recalled before a turn (5).
    pub top_k: usize,
    /// Size bound of the `[Memory context]` section in characters; 0 turns it off.
    pub context_chars: usize,
    /// Saves each of the person's messages as a `conversation` memory.
    pub auto_save: bool,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            vector_weight: 0.7,
            keyword_weight: 0.3,
            min_relevance: 0.4,
            top_k: 5,
            context_chars: 2000,
            auto_save: false,
        }
    }
}

/// How a recall was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallMode {
    /// Vector and keyword scores combined.
    Hybrid,
    /// Full-text only: no embeddings provider, or it failed (see the note).
    KeywordOnly,
}

impl RecallMode {
    /// `hybrid` or `keyword_only`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecallMode::Hybrid => "hybrid",
            RecallMode::KeywordOnly => "keyword_only",
        }
    }
}

/// Why a hit was recalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// Its words.
    Keyword,
    /// Its meaning.
    Vector,
    /// Both.
    Both,
}

impl MatchedBy {
    /// `keyword`, `vector` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchedBy::Keyword => "keyword",
            MatchedBy::Vector => "vector",
            MatchedBy::Both => "both",
        }
    }
}

/// One recalled document.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallHit {
    /// The document.
    pub doc: MemoryDoc,
    /// The combined score, 0..=1.
    pub score: f64,
    /// Its keyword score (share of query terms it holds), if it matched by words.
    pub keyword_score: Option<f64>,
    /// Its cosine similarity with the query, if it matched by meaning.
    pub vector_score: Option<f64>,
    /// Why it matched.
    pub matched_by: MatchedBy,
}

/// The answer to a recall.
#[derive(Debug, Clone, PartialEq)]
pub struct Recall {
    /// How it was answered.
    pub mode: RecallMode,
    /// Why recall was keyword-only, when it was.
    pub note: Option<String>,
    /// Hits, best first.
    pub hits: Vec<RecallHit>,
}

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The embeddings provider failed.
    #[error("embeddings: {0}")]
    Embeddings(#[from] cairn_llm::LlmError),
    /// Reading or writing a workspace file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// How many candidates each side of hybrid recall contributes before merging.
const CANDIDATES: usize = 50;

/// One person's memory as one agent has it: storing, embedding and recalling.
#[derive(Clone)]
pub struct MemoryService {
    store: Store,
    user_id: String,
    /// The agent served: whose documents are stored and recalled (with the shared ones).
    agent: String,
    clock: Arc<dyn Clock>,
    settings: MemorySettings,
    embedder: Option<EmbeddingsClient>,
    /// Embeddings computed in the background, awaited by [`MemoryService::flush`].
    pending: Arc<Mutex<JoinSet<()>>>,
    /// The recallable vectors as last loaded, kept until the store's change
    /// signal says memory changed (in any process) or the model changes
    /// (reading them is most of a hybrid recall's time).
    vectors: Arc<tokio::sync::Mutex<Option<CachedVectors>>>,
}

/// Vectors loaded for one model, and the signal that they are out of date.
struct CachedVectors {
    changes: cairn_store::Watch,
    model: String,
    vectors: Arc<Vec<(Uuid, Vec<f32>)>>,
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService")
            .field("user_id", &self.user_id)
            .field("agent", &self.agent)
            .field("settings", &self.settings)
            .field("embedder", &self.embedder)
            .finish_non_exhaustive()
    }
}

impl MemoryService {
    /// Keyword-only memory for `user_id`, serving the `main` agent.
    pub fn new(
        store: Store,
        user_id: impl Into<String>,
        clock: Arc<dyn Clock>,
        settings: MemorySettings,
    ) -> Self {
        Self {
            store,
            user_id: user_id.into(),
            agent: MAIN_AGENT.to_string(),
            clock,
            settings,
            embedder: None,
            pending: Arc::new(Mutex::new(JoinSet::new())),
            vectors: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    /// Adds vector recall with this embeddings client.
    #[must_use]
    pub fn with_embeddings(mut self, client: EmbeddingsClient) -> Self {
        self.embedder = Some(client);
        self
    }

    /// The same memory (store, person, settings, embeddings client) serving
    /// `agent`: cheap, one per agent. Its background embeddings and its
    /// cached vectors are its own, since what an agent may recall differs.
    #[must_use]
    pub fn for_agent(&self, agent: &str) -> MemoryService {
        MemoryService {
            agent: agent.to_string(),
            pending: Arc::new(Mutex::new(JoinSet::new())),
            vectors: Arc::new(tokio::sync::Mutex::new(None)),
            ..self.clone()
        }
    }

    /// The agent served.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whose memory this is.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// The settings.
    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    /// The embedding model, when vector recall is configured.
    pub fn embedding_model(&self) -> Option<&str> {
        self.embedder.as_ref().map(EmbeddingsClient::model)
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Stores a document of this agent's, seen by it alone, and starts
    /// computing its embedding in the background.
    pub async fn store_memory(
        &self,
        key: Option<&str>,
        content: &str,
        category: MemoryCategory,
        source: &str,
    ) -> Result<MemoryDoc, MemoryError> {
        self.store_memory_shared(key, content, category, source, false)
            .await
    }

    /// Stores a document of this agent's; `shared` makes it visible to
    /// every agent (it stays this agent's to replace or forget). Storing
    /// a key again sets `shared` again: left out, the document is private.
    pub async fn store_memory_shared(
        &self,
        key: Option<&str>,
        content: &str,
        category: MemoryCategory,
        source: &str,
        shared: bool,
    ) -> Result<MemoryDoc, MemoryError> {
        let doc = self
            .store
            .store_memory(
                &NewMemory {
                    user_id: self.user_id.clone(),
                    agent: self.agent.clone(),
                    key: key.map(str::to_string),
                    content: content.to_string(),
                    category,
                    source: source.to_string(),
                    shared,
                },
                self.clock.now(),
            )
            .await?;
        self.embed_later(&doc);
        Ok(doc)
    }

    /// Computes `doc`'s embedding in the background, unless it has a current one.
    fn embed_later(&self, doc: &MemoryDoc) {
        let Some(model) = self.embedding_model() else {
            return;
        };
        if doc.embedding_model.as_deref() == Some(model) {
            return;
        }
        let this = self.clone();
        let doc = doc.clone();
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        // Finished tasks are reaped here so the set stays small in a long-lived process.
        while pending.try_join_next().is_some() {}
        pending.spawn(async move {
            if let Err(e) = this.embed_doc(&doc).await {
                tracing::warn!(error = %e, id = %doc.id, "embedding a memory failed; `cairn memory reindex` retries");
            }
        });
    }

    /// Waits for the embeddings started so far.
    pub async fn flush(&self) {
        let mut set = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *pending)
        };
        while set.join_next().await.is_some() {}
    }

    /// The embedding of `text` (hash `hash`) from the cache, or from the
    /// provider (then cached).
    async fn embedding_of(&self, text: &str, hash: &str) -> Result<Vec<f32>, MemoryError> {
        let Some(client) = &self.embedder else {
            return Ok(Vec::new());
        };
        let model = client.model();
        if let Some(vector) = self.store.cached_embedding(hash, model).await? {
            return Ok(vector);
        }
        let vector = normalized(client.embed_one(text).await?);
        self.store
            .cache_embedding(hash, model, &vector, self.clock.now())
            .await?;
        Ok(vector)
    }

    /// Computes (or takes from the cache) and stores `doc`'s embedding now.
    /// Returns whether it was stored (not when the content changed meanwhile).
    pub async fn embed_doc(&self, doc: &MemoryDoc) -> Result<bool, MemoryError> {
        let Some(model) = self.embedding_model().map(str::to_string) else {
            return Ok(false);
        };
        let text = embedding_text(doc);
        let hash = cairn_store::content_hash(&text);
        let vector = self.embedding_of(&text, &hash).await?;
        Ok(self
            .store
            .set_memory_embedding(doc.id, &doc.content_hash, &model, &vector)
            .await?)
    }

    /// Recomputes the embedding of every document of this agent's (after a
    /// model change; shared ones of other agents are theirs to reindex),
    /// calling `progress(done, total)` after each. Returns how many were stored.
    pub async fn reindex(
        &self,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<usize, MemoryError> {
        if self.embedder.is_none() {
            return Ok(0);
        }
        let docs: Vec<MemoryDoc> = self
            .store
            .list_memories(&self.user_id, &self.agent, None, u32::MAX)
            .await?
            .into_iter()
            .filter(|d| d.agent == self.agent)
            .collect();
        let mut stored = 0;
        for (i, doc) in docs.iter().enumerate() {
            if self.embed_doc(doc).await? {
                stored += 1;
            }
            progress(i + 1, docs.len());
        }
        Ok(stored)
    }

    /// Recalls up to `limit` documents relevant to `query`, best first:
    /// this agent's and the shared ones.
    pub async fn recall(&self, query: &str, limit: usize) -> Result<Recall, MemoryError> {
        let keyword = self
            .store
            .search_memories(
                &self.user_id,
                &self.agent,
                query,
                u32::try_from(limit.max(CANDIDATES)).unwrap_or(u32::MAX),
            )
            .await?;
        let (mode, note, vectors) = match &self.embedder {
            None => (
                RecallMode::KeywordOnly,
                Some("keyword-only recall: no embeddings provider is configured".to_string()),
                Vec::new(),
            ),
            Some(client) => match self.vector_scores(client, query).await {
                Ok(scores) => (RecallMode::Hybrid, None, scores),
                Err(e) => {
                    tracing::warn!(error = %e, "vector recall failed; keyword-only");
                    (
                        RecallMode::KeywordOnly,
                        Some(format!(
                            "keyword-only recall: the embeddings provider failed ({e})"
                        )),
                        Vec::new(),
                    )
                }
            },
        };

        let merged = merge(keyword, vectors);
        let (vw, kw) = self.weights();
        let mut scored: Vec<Candidate> = merged
            .into_values()
            .map(|mut c| {
                c.score = match mode {
                    RecallMode::KeywordOnly => c.keyword.unwrap_or(0.0),
                    RecallMode::Hybrid => {
                        vw * c.vector.unwrap_or(0.0) + kw * c.keyword.unwrap_or(0.0)
                    }
                };
                c
            })
            .filter(|c| c.score >= self.settings.min_relevance)
            .collect();
        // Best first; ties by id (time-ordered) so answers are stable.
        scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.id.cmp(&a.id)));
        scored.truncate(limit);

        let mut hits = Vec::with_capacity(scored.len());
        for c in scored {
            let doc = match c.doc {
                Some(doc) => doc,
                None => match self.store.get_memory(c.id).await? {
                    Some(doc) => doc,
                    None => continue,
                },
            };
            let matched_by = match (c.keyword, c.vector) {
                (Some(_), Some(_)) => MatchedBy::Both,
                (None, Some(_)) => MatchedBy::Vector,
                _ => MatchedBy::Keyword,
            };
            hits.push(RecallHit {
                doc,
                score: c.score,
                keyword_score: c.keyword,
                vector_score: c.vector,
                matched_by,
            });
        }
        let ids: Vec<Uuid> = hits.iter().map(|h| h.doc.id).collect();
        if !ids.is_empty() {
            self.store.touch_memories(&ids, self.clock.now()).await?;
        }
        Ok(Recall { mode, note, hits })
    }

    /// The configured weights, scaled to sum to 1 (so scores stay in 0..=1).
    fn weights(&self) -> (f64, f64) {
        let (v, k) = (
            self.settings.vector_weight.max(0.0),
            self.settings.keyword_weight.max(0.0),
        );
        let sum = v + k;
        if sum <= 0.0 {
            (0.7, 0.3)
        } else {
            (v / sum, k / sum)
        }
    }

    /// Cosine similarity of the query with every stored vector, the best
    /// [`CANDIDATES`] with a positive similarity.
    async fn vector_scores(
        &self,
        client: &EmbeddingsClient,
        query: &str,
    ) -> Result<Vec<(Uuid, f64)>, MemoryError> {
        let hash = cairn_store::content_hash(query);
        let q = self.embedding_of(query, &hash).await?;
        let stored = self.stored_vectors(client.model()).await?;
        Ok(top_similar(&q, &stored, CANDIDATES))
    }

    /// The person's recallable vectors from `model`, from memory unless the
    /// store changed since they were loaded (by this process or another).
    async fn stored_vectors(&self, model: &str) -> Result<Arc<Vec<(Uuid, Vec<f32>)>>, MemoryError> {
        let mut cached = self.vectors.lock().await;
        if let Some(c) = cached.as_ref()
            && !c.changes.has_changed()
            && c.model == model
        {
            return Ok(Arc::clone(&c.vectors));
        }
        // Watching before the read: a change committed meanwhile makes the
        // next recall read again.
        let changes = self.store.watch(cairn_store::Topic::Memory);
        let vectors = Arc::new(
            self.store
                .memory_vectors(&self.user_id, &self.agent, model)
                .await?,
        );
        *cached = Some(CachedVectors {
            changes,
            model: model.to_string(),
            vectors: Arc::clone(&vectors),
        });
        Ok(vectors)
    }

    /// Deletes one of this agent's documents by id; returns whether it
    /// existed. Another person's or agent's document (even a shared one) is
    /// left alone and reported as missing (ids are not secrets: recall
    /// shows them).
    pub async fn forget(&self, id: Uuid) -> Result<bool, MemoryError> {
        match self.store.get_memory(id).await? {
            Some(doc) if doc.user_id == self.user_id && doc.agent == self.agent => {
                Ok(self.store.forget_memory(id).await?)
            }
            _ => Ok(false),
        }
    }

    /// Deletes one of this agent's documents by key.
    pub async fn forget_key(&self, key: &str) -> Result<bool, MemoryError> {
        Ok(self
            .store
            .forget_memory_by_key(&self.user_id, &self.agent, key)
            .await?)
    }

    /// The documents this agent sees (its own and the shared ones), most
    /// recently updated first, optionally of one category, at most `limit`.
    pub async fn list(
        &self,
        category: Option<MemoryCategory>,
        limit: u32,
    ) -> Result<Vec<MemoryDoc>, MemoryError> {
        Ok(self
            .store
            .list_memories(&self.user_id, &self.agent, category, limit)
            .await?)
    }

    /// Counts over the documents this agent sees.
    pub async fn stats(&self) -> Result<MemoryStats, MemoryError> {
        Ok(self.store.memory_stats(&self.user_id, &self.agent).await?)
    }

    /// Saves the person's message as a `conversation` memory when auto-save is on.
    pub async fn auto_save(&self, message: &str) -> Result<Option<MemoryDoc>, MemoryError> {
        if !self.settings.auto_save || message.trim().is_empty() {
            return Ok(None);
        }
        self.store_memory(None, message.trim(), MemoryCategory::Conversation, "chat")
            .await
            .map(Some)
    }

    /// Indexes a daily summary (the compactor's `daily/` note) as a `daily` memory.
    pub async fn index_daily(
        &self,
        date: chrono::NaiveDate,
        summary: &str,
    ) -> Result<MemoryDoc, MemoryError> {
        let content = format!("Conversation summary of {date}:\n{}", summary.trim());
        self.store_memory(None, &content, MemoryCategory::Daily, "compactor")
            .await
    }
}

/// What a document's embedding is computed from: its key (a title) and content.
fn embedding_text(doc: &MemoryDoc) -> String {
    match &doc.key {
        Some(key) => format!("{key}: {}", doc.content),
        None => doc.content.clone(),
    }
}
