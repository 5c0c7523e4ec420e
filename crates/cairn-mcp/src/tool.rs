//! An MCP server's tool as a cairn [`Tool`]: called through the runner and
//! its policy gate like every other tool, with the server's limits.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use serde_json::{Value, json};

use crate::content::bounded;
use crate::remote::{CallLimits, RemoteError};
use crate::server::{Exposed, Server};

/// Most characters of a tool's description kept for the model.
const DESCRIPTION_CHARS: usize = 1_024;

/// One tool of one server.
pub struct McpTool {
    server: Arc<Server>,
    exposed: Exposed,
    /// Its name, description and schema as the server gave them, under its
    /// exposed name, judged by the server's configured risk.
    spec: ToolSpec,
    /// Named before the server's tools were known (it was starting): the
    /// call waits for the server, then finds the tool by this name.
    pending: bool,
}

impl McpTool {
    /// A tool called `name` of a server whose tools are not known yet.
    pub fn pending(server: Arc<Server>, name: &str) -> Self {
        let remote = crate::remote::RemoteTool {
            name: String::new(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            read_only: None,
            destructive: None,
        };
        let exposed = Exposed {
            name: name.to_string(),
            remote: Arc::new(remote),
        };
        let description = format!(
            "A tool of MCP server \"{}\", which is starting.",
            server.name()
        );
        // Its annotations are not known yet: never judged read-only.
        let risk = server.risk_of(&exposed.remote).max(RiskLevel::Write);
        Self {
            spec: spec_of(&server, &exposed, risk, description),
            server,
            exposed,
            pending: true,
        }
    }

    /// `exposed` of `server`.
    pub fn new(server: Arc<Server>, exposed: Exposed) -> Self {
        let text = exposed.remote.description.trim();
        let description = if text.is_empty() {
            format!(
                "Tool `{}` of MCP server \"{}\".",
                exposed.remote.name,
                server.name()
            )
        } else {
            text.chars().take(DESCRIPTION_CHARS).collect()
        };
        let risk = server.risk_of(&exposed.remote);
        Self {
            spec: spec_of(&server, &exposed, risk, description),
            server,
            exposed,
            pending: false,
        }
    }
}

/// The spec of `exposed`: the call's own limits (idle, total) are enforced
/// by the call and tell the server to stop; the runner's time limit is a
/// backstop just beyond them.
fn spec_of(server: &Server, exposed: &Exposed, risk: RiskLevel, description: String) -> ToolSpec {
    let parameters = match &exposed.remote.input_schema {
        schema @ Value::Object(map) if map.get("type") == Some(&json!("object")) => schema.clone(),
        // The model's APIs want an object schema; the server's own checks still apply.
        _ => json!({"type": "object"}),
    };
    ToolSpec::new(exposed.name.clone(), risk, description)
        .params(parameters)
        .time_limit(server.spec().max_call + Duration::from_secs(5))
}

/// The call failed on the server's side, in words that name it.
fn call_error(server: &str, error: RemoteError) -> ToolError {
    match error {
        RemoteError::Timeout(limit) => ToolError::Timeout(limit),
        RemoteError::Closed => ToolError::Unavailable(format!(
            "MCP server \"{server}\" closed the connection during the call; cairn restarts it"
        )),
        RemoteError::Connect(why) => {
            ToolError::Unavailable(format!("MCP server \"{server}\": {why}"))
        }
        RemoteError::Protocol(why) => ToolError::Failed(format!("MCP server \"{server}\": {why}")),
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let spec = self.server.spec();
        let Value::Object(arguments) = args else {
            return Err(ToolError::InvalidArguments("expected an object".into()));
        };
        let conn = self.server.connection().await?;
        let remote = if self.pending {
            let tools = self.server.tools();
            let Some(found) = tools.iter().find(|e| e.name == self.exposed.name) else {
                let known: Vec<&str> = tools.iter().map(|e| e.name.as_str()).collect();
                return Err(ToolError::InvalidArguments(format!(
                    "MCP server \"{}\" has no tool `{}`; it has: {}",
                    spec.name,
                    self.exposed.name,
                    known.join(", ")
                )));
            };
            Arc::clone(&found.remote)
        } else {
            Arc::clone(&self.exposed.remote)
        };
        let limits = CallLimits {
            idle: spec.timeout,
            total: spec.max_call,
        };
        // Dropping this future (the turn was cancelled, the runner's limit
        // passed) tells the server to cancel the call.
        let outcome = conn
            .call_tool(&remote.name, arguments, limits)
            .await
            .map_err(|e| call_error(&spec.name, e))?;
        let text = bounded(outcome.text, spec.max_output_chars);
        Ok(if outcome.is_error {
            ToolOutput::failed(text)
        } else {
            ToolOutput::ok(text)
        })
    }
}
