//! The memory tools: `memory_store`, `memory_recall` and `memory_forget`.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_store::MemoryCategory;
use serde_json::{Value, json};

use super::MemoryService;
use crate::runner::Authorized;
use crate::tools::args::{opt_bool, opt_str, opt_u64, req_str};
use crate::tools::{
    CallOutcome, Family, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, members,
    schema,
};

/// The one line naming these tools when schemas load on demand.
const MEMORY_FAMILY: &str =
    "long-term memory about the person: store, recall by meaning or words, forget";

/// Which memory tool a call is for.
#[derive(Debug, Clone, Copy)]
enum Op {
    Store,
    Recall,
    Forget,
}

/// The family the memory tools make: the service they read and write.
struct Memory(Arc<MemoryService>);

/// The three memory tools over one service.
pub fn memory_tools(memory: Arc<MemoryService>) -> Vec<Arc<dyn Tool>> {
    members(&Arc::new(Memory(memory)), MEMORY_FAMILY, [
        (
            Op::Store,
            ToolSpec::new("memory_store", RiskLevel::Write, "Remember something about the person for later conversations. Use a short `key` for facts that may change (storing the same key again replaces the old content). Category: core (lasting facts, the default), daily, conversation or custom. What you store is yours alone; set `shared` to true only for what every agent of this person should know.")
                .params(schema::closed(
                    json!({
                        "content": {"type": "string", "description": "what to remember"},
                        "key": {"type": "string", "description": "a short stable name, e.g. \"coffee preference\""},
                        "category": {"type": "string", "enum": ["core", "daily", "conversation", "custom"]},
                        "shared": {"type": "boolean", "description": "visible to every agent, not only you (default false; storing a key again without it makes it private)"}
                    }),
                    &["content"],
                ))
                // Not `remember`: that is the reminder tool (`schedule`'s shortcut).
                .aliased(&["memory_save"]),
        ),
        (
            Op::Recall,
            ToolSpec::new("memory_recall", RiskLevel::ReadOnly, "Search what you remember about the person. Returns the best matches with their score and whether they matched by keyword, meaning (vector) or both.")
                .params(schema::closed(
                    json!({
                        "query": {"type": "string", "description": "what to look for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "most results (default 5)"}
                    }),
                    &["query"],
                ))
                .aliased(&["recall", "memory_search"])
                .not_reusable(),
        ),
        (
            Op::Forget,
            ToolSpec::new("memory_forget", RiskLevel::Write, "Forget one of your memories, by its `id` (from memory_recall) or its `key`. A memory another agent shared is theirs to forget.")
                .params(schema::closed(
                    json!({"id": {"type": "string"}, "key": {"type": "string"}}),
                    &[],
                ))
                .aliased(&["forget"]),
        ),
    ])
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

#[async_trait]
impl Family for Memory {
    type Op = Op;

    async fn call(&self, op: Op, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        match op {
            Op::Store => self.store_tool(&args).await,
            Op::Recall => self.recall_tool(&args).await,
            Op::Forget => self.forget_tool(&args).await,
        }
    }
}

impl Memory {
    /// `memory_store`: remembers a fact about the person.
    async fn store_tool(&self, args: &Value) -> CallOutcome {
        let content = req_str(args, "content")?.trim();
        if content.is_empty() {
            return Err(ToolError::InvalidArguments("`content` is empty".into()));
        }
        let key = opt_str(args, "key")?
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let category = match opt_str(args, "category")? {
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
        let shared = opt_bool(args, "shared")?.unwrap_or(false);
        let doc = self
            .0
            .store_memory_shared(key, content, category, "tool", shared)
            .await
            .map_err(failed)?;
        Ok(ToolOutput::ok(format!(
            "Remembered ({}, id {}{}{}).",
            doc.category,
            doc.id,
            doc.key
                .map(|k| format!(", key \"{k}\""))
                .unwrap_or_default(),
            if doc.shared {
                ", shared with every agent"
            } else {
                ""
            }
        )))
    }

    /// `memory_recall`: finds memories by meaning and words.
    async fn recall_tool(&self, args: &Value) -> CallOutcome {
        let query = req_str(args, "query")?;
        let limit = opt_u64(args, "limit")?.unwrap_or(5).clamp(1, 50) as usize;
        let recall = self.0.recall(query, limit).await.map_err(failed)?;
        let mut text = format!("mode: {}", recall.mode.as_str());
        if let Some(note) = &recall.note {
            text.push_str(&format!(" ({note})"));
        }
        if recall.hits.is_empty() {
            text.push_str("\nNothing relevant remembered.");
        }
        for hit in &recall.hits {
            // Another agent's memory cannot be forgotten from here: say whose it is.
            let whose = if hit.doc.agent != self.0.agent() {
                format!(", shared by agent {}", hit.doc.agent)
            } else if hit.doc.shared {
                ", shared".to_string()
            } else {
                String::new()
            };
            text.push_str(&format!(
                "\n- [{:.2} {}] {}{} (id {}, {}{whose})",
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

    /// `memory_forget`: deletes a memory by id or key.
    async fn forget_tool(&self, args: &Value) -> CallOutcome {
        let forgotten = match (opt_str(args, "id")?, opt_str(args, "key")?) {
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
