//! The memory tools: `memory_store`, `memory_recall` and `memory_forget`.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_store::MemoryCategory;
use serde_json::json;

use super::MemoryService;
use crate::runner::Authorized;
use crate::tools::{
    RiskLevel, Tool, ToolContext, ToolError, ToolOutput, opt_str, opt_u64, req_str,
};

/// The one line naming these tools when schemas load on demand.
const MEMORY_FAMILY: &str =
    "long-term memory about the person: store, recall by meaning or words, forget";

/// The three memory tools over one service.
pub fn memory_tools(memory: Arc<MemoryService>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MemoryStoreTool(Arc::clone(&memory))),
        Arc::new(MemoryRecallTool(Arc::clone(&memory))),
        Arc::new(MemoryForgetTool(memory)),
    ]
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

/// `memory_store`: remembers a fact about the person.
#[derive(Debug)]
pub struct MemoryStoreTool(Arc<MemoryService>);

#[async_trait]
impl Tool for MemoryStoreTool {
    fn name(&self) -> &str {
        "memory_store"
    }
    fn family(&self) -> Option<&str> {
        Some(MEMORY_FAMILY)
    }

    fn description(&self) -> &str {
        "Remember something about the person for later conversations. Use a short `key` for facts that may change (storing the same key again replaces the old content). Category: core (lasting facts, the default), daily, conversation or custom."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "what to remember"},
                "key": {"type": "string", "description": "a short stable name, e.g. \"coffee preference\""},
                "category": {"type": "string", "enum": ["core", "daily", "conversation", "custom"]}
            },
            "required": ["content"],
            "additionalProperties": false
        })
    }

    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }

    /// Not `remember`: that is the reminder tool (`schedule`'s shortcut).
    fn aliases(&self) -> &[&str] {
        &["memory_save"]
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let content = req_str(&args, "content")?.trim();
        if content.is_empty() {
            return Err(ToolError::InvalidArguments("`content` is empty".into()));
        }
        let key = opt_str(&args, "key")?
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let category = match opt_str(&args, "category")? {
            None => MemoryCategory::Core,
            Some(name) => match MemoryCategory::parse(name) {
                Some(MemoryCategory::Archived) | None => {
                    return Err(ToolError::InvalidArguments(format!(
                        "unknown category `{name}`; use core, daily, conversation or custom"
                    )));
                }
                Some(c) => c,
            },
        };
        let doc = self
            .0
            .store_memory(key, content, category, "tool")
            .await
            .map_err(failed)?;
        Ok(ToolOutput::ok(format!(
            "Remembered ({}, id {}{}).",
            doc.category,
            doc.id,
            doc.key
                .map(|k| format!(", key \"{k}\""))
                .unwrap_or_default()
        )))
    }
}

/// `memory_recall`: finds memories by meaning and words.
#[derive(Debug)]
pub struct MemoryRecallTool(Arc<MemoryService>);

#[async_trait]
impl Tool for MemoryRecallTool {
    fn name(&self) -> &str {
        "memory_recall"
    }
    fn family(&self) -> Option<&str> {
        Some(MEMORY_FAMILY)
    }

    fn description(&self) -> &str {
        "Search what you remember about the person. Returns the best matches with their score and whether they matched by keyword, meaning (vector) or both."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "most results (default 5)"}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }

    fn aliases(&self) -> &[&str] {
        &["recall", "memory_search"]
    }

    fn reusable(&self) -> bool {
        false
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let query = req_str(&args, "query")?;
        let limit = opt_u64(&args, "limit")?.unwrap_or(5).clamp(1, 50) as usize;
        let recall = self.0.recall(query, limit).await.map_err(failed)?;
        let mut text = format!("mode: {}", recall.mode.as_str());
        if let Some(note) = &recall.note {
            text.push_str(&format!(" ({note})"));
        }
        if recall.hits.is_empty() {
            text.push_str("\nNothing relevant remembered.");
        }
        for hit in &recall.hits {
            text.push_str(&format!(
                "\n- [{:.2} {}] {}{} (id {}, {})",
                hit.score,
                hit.matched_by.as_str(),
                hit.doc
                    .key
                    .as_ref()
                    .map(|k| format!("{k}: "))
                    .unwrap_or_default(),
                hit.doc.content,
                hit.doc.id,
                hit.doc.category
            ));
        }
        Ok(ToolOutput::ok(text))
    }
}

/// `memory_forget`: deletes a memory by id or key.
#[derive(Debug)]
pub struct MemoryForgetTool(Arc<MemoryService>);

#[async_trait]
impl Tool for MemoryForgetTool {
    fn name(&self) -> &str {
        "memory_forget"
    }
    fn family(&self) -> Option<&str> {
        Some(MEMORY_FAMILY)
    }

    fn description(&self) -> &str {
        "Forget a memory, by its `id` (from memory_recall) or its `key`."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "key": {"type": "string"}
            },
            "additionalProperties": false
        })
    }

    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }

    fn aliases(&self) -> &[&str] {
        &["forget"]
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let forgotten = match (opt_str(&args, "id")?, opt_str(&args, "key")?) {
            (Some(id), None) => {
                let id = uuid::Uuid::parse_str(id.trim()).map_err(|_| {
                    ToolError::InvalidArguments(format!("`{id}` is not a memory id"))
                })?;
                self.0.forget(id).await.map_err(failed)?
            }
            (None, Some(key)) => self.0.forget_key(key.trim()).await.map_err(failed)?,
            _ => {
                return Err(ToolError::InvalidArguments(
                    "give exactly one of `id` or `key`".into(),
                ));
            }
        };
        Ok(if forgotten {
            ToolOutput::ok("Forgotten.")
        } else {
            ToolOutput::failed("No such memory.")
        })
    }
}
