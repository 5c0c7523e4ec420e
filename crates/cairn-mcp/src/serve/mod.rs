//! `cairn mcp serve`: cairn as an MCP server over stdio, for other agents
//! and editors. It offers a fixed set of cairn's tools ([`SERVED`]): the
//! routines (list, show, fire, runs), notifications (send), memory (recall,
//! store) and the inbox.
//!
//! Every call goes through the [`ToolRunner`] and its policy gate with the
//! configured autonomy, exactly as the agent's calls do. Nobody can answer
//! an approval over stdio, so a call the gate would ask about is declined
//! (the answer says which setting allows it: an `allow` rule in
//! `[tools.policy]`, or autonomy `full`); read-only tools run, denied ones
//! stay denied. A client's `notifications/cancelled` cancels the call.
//! What a call records for delivery (a notification) is delivered, or
//! handed to a running daemon, before the answer, which says which
//! ([`AfterCall`], implemented by the binary).

pub mod tools;

use std::sync::Arc;

use cairn_agent::runner::{DenyAll, ToolRunner, ToolStatus};
use cairn_agent::tools::{RiskLevel, ToolContext};
use cairn_core::chat::ToolCall;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

/// The tools `cairn mcp serve` offers, by cairn's names (those the runner
/// does not have are left out).
pub const SERVED: &[&str] = &[
    "routine_list",
    "routine_show",
    "routine_fire",
    "routine_runs",
    "send_notification",
    "memory_recall",
    "memory_store",
    "inbox_list",
];

/// What runs after each served call: the binary delivers what the call
/// recorded for delivery (or hands it to a running daemon).
#[async_trait::async_trait]
pub trait AfterCall: Send + Sync {
    /// Lines for the caller, one per notification settled.
    async fn after_call(&self) -> Vec<String>;
}

/// The MCP server over cairn's runner.
#[derive(Clone)]
pub struct CairnServer {
    runner: Arc<ToolRunner>,
    base: ToolContext,
    after: Option<Arc<dyn AfterCall>>,
}

impl CairnServer {
    /// Serves [`SERVED`] tools of `runner`; calls run with `base` (its
    /// session names the MCP client, its cancel token is replaced per call).
    pub fn new(runner: Arc<ToolRunner>, base: ToolContext) -> Self {
        Self {
            runner,
            base,
            after: None,
        }
    }

    /// Runs `after` after each call, its lines added to the answer.
    pub fn with_after_call(mut self, after: Arc<dyn AfterCall>) -> Self {
        self.after = Some(after);
        self
    }

    /// The served tools the runner has, in [`SERVED`] order.
    pub fn tools(&self) -> Vec<Tool> {
        SERVED
            .iter()
            .filter_map(|name| self.runner.registry().get(name))
            .map(|tool| {
                let spec = tool.spec();
                let schema = match spec.parameters() {
                    serde_json::Value::Object(map) => map.clone(),
                    _ => serde_json::Map::new(),
                };
                Tool::new(
                    spec.name().to_string(),
                    spec.description().to_string(),
                    schema,
                )
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(spec.risk() == RiskLevel::ReadOnly)
                        .destructive(spec.risk() == RiskLevel::Dangerous),
                )
            })
            .collect()
    }

    /// Runs one call through the runner, nobody approving.
    pub async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> CallToolResult {
        if !SERVED.contains(&name) || self.runner.registry().get(name).is_none() {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "unknown tool `{name}`; cairn serves: {}",
                SERVED.join(", ")
            ))]);
        }
        let call = ToolCall {
            id: uuid_like(),
            name: name.to_string(),
            arguments,
        };
        let ctx = self.base.clone().with_cancel(cancel);
        let result = self.runner.run(&call, &ctx, &DenyAll).await;
        let mut text = match result.status {
            ToolStatus::Declined => format!(
                "`{name}` needs approval and nobody can approve over MCP: allow it in \
                 config.toml ([tools.policy] allow = [\"{name}\"], or autonomy = \"full\")"
            ),
            _ => result.content,
        };
        if let Some(after) = &self.after {
            for line in after.after_call().await {
                text.push('\n');
                text.push_str(&line);
            }
        }
        if result.status == ToolStatus::Success {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        }
    }

    /// Serves MCP on this process's standard input and output until the
    /// client closes it.
    pub async fn serve_stdio(self) -> Result<(), String> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| format!("MCP session: {e}"))?;
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| format!("MCP session: {e}"))
    }
}

/// A call id for the runner's logs (MCP request ids are per connection).
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("mcp-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl ServerHandler for CairnServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "cairn, a personal agent runtime: its routines, notifications, memory and inbox. \
                 Calls that would need a person's approval are declined unless cairn's policy allows them.",
            )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request
            .arguments
            .map(serde_json::Value::Object)
            .unwrap_or_else(|| serde_json::json!({}));
        Ok(self.call(&request.name, arguments, context.ct).await.into())
    }
}
