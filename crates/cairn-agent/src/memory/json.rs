//! Memories as JSON, the one shape every front end shows them in
//! (`cairn memory … --json`, the dashboard).

use cairn_store::MemoryDoc;
use serde_json::{Value, json};

use super::RecallHit;

/// A stored memory.
pub fn doc_json(doc: &MemoryDoc) -> Value {
    json!({
        "id": doc.id,
        "agent": doc.agent,
        "shared": doc.shared,
        "key": doc.key,
        "content": doc.content,
        "category": doc.category.as_str(),
        "source": doc.source,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
        "accessed_at": doc.accessed_at,
        "embedding_model": doc.embedding_model,
    })
}

/// A recalled memory: the memory, its score, and what found it.
pub fn hit_json(hit: &RecallHit) -> Value {
    let mut value = doc_json(&hit.doc);
    value["score"] = json!(hit.score);
    value["keyword_score"] = json!(hit.keyword_score);
    value["vector_score"] = json!(hit.vector_score);
    value["matched_by"] = json!(hit.matched_by.as_str());
    value
}
