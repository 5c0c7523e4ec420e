//! cairn's own view of a connection to an MCP server: the [`Connection`]
//! trait and the plain types it speaks. The rest of the crate knows MCP only
//! through these; `rmcp` lives behind them in [`crate::rmcp_client`], so
//! replacing the SDK touches one module.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool as an MCP server describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteTool {
    /// The server's own name for it.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// `readOnlyHint`, as the server claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`, as the server claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
}

/// A resource a server offers to be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteResource {
    /// Its URI, what `mcp_resource_read` takes.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// What it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A prompt template a server offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePrompt {
    /// Its name.
    pub name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments: name and whether it is required.
    #[serde(default)]
    pub arguments: Vec<(String, bool)>,
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// The result as text (images and other binary content described, not included).
    pub text: String,
    /// The server says the tool failed (`isError`).
    pub is_error: bool,
}

/// How long a call may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Without an answer or a progress notification for this long, the call is cancelled.
    pub idle: Duration,
    /// The call is cancelled after this long whatever progress it reports.
    pub total: Duration,
}

/// What a server announces on its own.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `notifications/tools/list_changed`.
    ToolsChanged,
    /// `notifications/resources/list_changed` or `prompts/list_changed`.
    CatalogChanged,
    /// `notifications/progress` for a call in flight.
    Progress {
        /// Progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// The server's words.
        message: Option<String>,
    },
}

/// Why a request to a server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    /// Starting the process or opening the session failed.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The server answered with an error, or something cairn cannot read.
    #[error("{0}")]
    Protocol(String),
    /// No answer nor progress in time; the server was told to cancel.
    #[error("no answer within {}", cairn_core::duration::format(*.0))]
    Timeout(Duration),
    /// The connection ended (the process exited, the session closed).
    #[error("the connection closed")]
    Closed,
}

/// A live connection to one MCP server.
#[async_trait]
pub trait Connection: Send + Sync {
    /// Every tool it offers (all pages).
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, RemoteError>;

    /// Calls `tool`; dropping the future tells the server to cancel the call.
    async fn call_tool(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        limits: CallLimits,
    ) -> Result<CallOutcome, RemoteError>;

    /// Every resource it offers (empty when it has none).
    async fn list_resources(&self) -> Result<Vec<RemoteResource>, RemoteError>;

    /// The text of a resource (binary parts described).
    async fn read_resource(&self, uri: &str) -> Result<String, RemoteError>;

    /// Every prompt it offers (empty when it has none).
    async fn list_prompts(&self) -> Result<Vec<RemotePrompt>, RemoteError>;

    /// A prompt filled with `arguments`, as text (one `role: text` line per message).
    async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<String, RemoteError>;

    /// Resolves when the connection has ended, with why.
    async fn closed(&self) -> String;

    /// Ends the connection (and its process).
    async fn close(&self);
}
