//! Two reads `cairn mcp serve` offers that the agent's tools do not:
//! `routine_show` (one routine, spec and runtime) and `inbox_list` (what
//! waits in the person's inbox). Plain store reads, run through the runner
//! and its gate like every other tool.

use std::sync::LazyLock;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema,
};
use cairn_store::Store;
use serde_json::{Value, json};

/// `routine_show`: one routine by name.
pub struct RoutineShowTool {
    store: Store,
    user: String,
}

impl RoutineShowTool {
    /// Shows `user`'s routines.
    pub fn new(store: Store, user: impl Into<String>) -> Self {
        Self {
            store,
            user: user.into(),
        }
    }
}

static ROUTINE_SHOW: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "routine_show",
        RiskLevel::ReadOnly,
        "One routine by name: its spec (trigger, action, guardrails, notify; a webhook's secret hidden) and runtime (next fire, last run, failures).",
    )
    .params(schema::object(
        json!({"name": {"type": "string", "description": "the routine's name"}}),
        &["name"],
    ))
    .not_reusable()
});

#[async_trait]
impl Tool for RoutineShowTool {
    fn spec(&self) -> &ToolSpec {
        &ROUTINE_SHOW
    }

    async fn execute(&self, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let Some(name) = args.get("name").and_then(Value::as_str) else {
            return Err(ToolError::InvalidArguments(
                "missing required string `name`".into(),
            ));
        };
        let routine = self
            .store
            .find_routine(&self.user, name)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        match routine {
            // A literal webhook secret is never shown (as in `cairn routine show`).
            Some(routine) => ToolOutput::json(&routine.redacted()),
            None => Ok(ToolOutput::failed(format!(
                "no routine named \"{name}\"; routine_list lists them"
            ))),
        }
    }
}

/// `inbox_list`: the person's inbox, unread first.
pub struct InboxListTool {
    store: Store,
    user: String,
}

impl InboxListTool {
    /// Lists `user`'s inbox.
    pub fn new(store: Store, user: impl Into<String>) -> Self {
        Self {
            store,
            user: user.into(),
        }
    }
}

static INBOX_LIST: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "inbox_list",
        RiskLevel::ReadOnly,
        "The person's inbox (notifications kept there or not deliverable elsewhere), unread first, newest first.",
    )
    .params(schema::object(
        json!({
            "all": {"type": "boolean", "description": "include read ones (default false)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "default 20"}
        }),
        &[],
    ))
    .not_reusable()
});

#[async_trait]
impl Tool for InboxListTool {
    fn spec(&self) -> &ToolSpec {
        &INBOX_LIST
    }

    async fn execute(&self, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let all = args.get("all").and_then(Value::as_bool).unwrap_or(false);
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(20)
            .clamp(1, 200);
        let items = self
            .store
            .inbox(&self.user, all, u32::try_from(limit).unwrap_or(20))
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        ToolOutput::json(&items)
    }
}
