//! [`Connection`] over `rmcp`, the one module that speaks the SDK's types.
//!
//! Stdio servers are started by [`crate::process`] and spoken to over their
//! pipes; HTTP servers through rmcp's streamable HTTP client on a reqwest
//! client with cairn's TLS (rustls over ring). Results are read as the JSON the
//! protocol defines (content blocks, `isError`, `structuredContent`), which
//! keeps this module independent of how the SDK models each variant.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientConfig,
    ClientRequest, Implementation, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, QuitReason, RoleClient, RunningService,
    RunningServiceCancellationToken,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use crate::content::{prompt_text, resource_text, result_text};
use crate::process::{self, Launch, ServerProcess};
use crate::remote::{
    CallLimits, CallOutcome, Connection, Notice, RemoteError, RemotePrompt, RemoteResource,
    RemoteTool,
};

/// Receives what a server announces and hands it to the supervisor.
struct Handler {
    server: String,
    notices: mpsc::UnboundedSender<Notice>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::ToolsChanged);
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::CatalogChanged);
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::CatalogChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        // rmcp itself pushes the call's idle timeout back (reset_timeout_on_progress).
        tracing::debug!(
            server = %self.server,
            progress = params.progress,
            total = ?params.total,
            message = params.message.as_deref().unwrap_or(""),
            "MCP progress"
        );
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("cairn", env!("CARGO_PKG_VERSION"));
        info
    }
}

/// A connection made through rmcp.
pub struct RmcpConnection {
    peer: Peer<RoleClient>,
    /// Ends the session (and so the process), once.
    stop: std::sync::Mutex<Option<RunningServiceCancellationToken>>,
    /// Why it ended, once it has.
    ended: watch::Receiver<Option<String>>,
}

/// What [`connect_stdio`] needs besides the launch.
pub struct Wiring {
    /// The server's name, for logs.
    pub server: String,
    /// Where its announcements go.
    pub notices: mpsc::UnboundedSender<Notice>,
    /// Most bytes of one message accepted from it.
    pub max_message_bytes: usize,
}

/// Starts a stdio server and opens a session with it.
pub async fn connect_stdio(
    launch: &Launch<'_>,
    wiring: Wiring,
) -> Result<RmcpConnection, RemoteError> {
    let mut proc = process::start(launch).await?;
    let (Some(stdin), Some(stdout)) = (proc.stdin.take(), proc.stdout.take()) else {
        return Err(RemoteError::Connect("the process has no pipes".into()));
    };
    let stderr = proc.stderr.clone();
    let transport =
        AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(wiring.max_message_bytes);
    let handler = Handler {
        server: wiring.server,
        notices: wiring.notices,
    };
    let service = match handler.serve(transport).await {
        Ok(service) => service,
        Err(e) => {
            proc.kill().await;
            // What the process said on its way out explains more than the handshake's error.
            let why = stderr.explain(&format!("the MCP handshake failed ({e})"));
            return Err(RemoteError::Connect(why));
        }
    };
    Ok(RmcpConnection::watch(service, Some(proc)))
}

/// Opens a session with a streamable HTTP server.
pub async fn connect_http(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    wiring: Wiring,
) -> Result<RmcpConnection, RemoteError> {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| RemoteError::Connect(format!("header {name}: {e}")))?;
        let value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| RemoteError::Connect(format!("header {name}: not a valid value")))?;
        custom.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .max_json_response_size(wiring.max_message_bytes)
        .max_sse_event_size(wiring.max_message_bytes)
        .reinit_on_expired_session(true);
    let transport = StreamableHttpClientTransport::with_client(http_client()?, config);
    let handler = Handler {
        server: wiring.server,
        notices: wiring.notices,
    };
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| RemoteError::Connect(tidy(&e.to_string())))?;
    Ok(RmcpConnection::watch(service, None))
}

/// An SDK error as people read it: without the transport's type names, and
/// with the endpoint's credentials (user info, query) hidden.
fn tidy(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find(" [rmcp::") {
        out.push_str(&rest[..start]);
        // The bracket holds generics with their own brackets: skip to its match.
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest[start + 1..].char_indices() {
            match c {
                '[' | '<' => depth += 1,
                ']' | '>' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && c == ']' {
                        end = start + 1 + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    // Every URL in it: the transport writes the endpoint its own way (without user info).
    cairn_core::config::redact_text(&out)
}

/// The HTTP client for MCP servers: cairn's TLS (`cairn_llm::tls`), no
/// redirects followed (a redirected POST can lose its body or carry headers
/// to another host), no idle pooling (rmcp's advice: a half-read body
/// stalls the next request).
fn http_client() -> Result<reqwest::Client, RemoteError> {
    cairn_llm::tls::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .connect_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| RemoteError::Connect(format!("HTTP client: {e}")))
}

impl RmcpConnection {
    /// Keeps the peer; one task owns the session (and process) and records
    /// why it ended: the process exiting, the transport closing, or [`Connection::close`].
    fn watch(service: RunningService<RoleClient, Handler>, process: Option<ServerProcess>) -> Self {
        let peer = service.peer().clone();
        let stop = service.cancellation_token();
        let (tx, ended) = watch::channel(None);
        tokio::spawn(async move {
            let session = service.waiting();
            let why = match process {
                Some(mut proc) => {
                    let why = tokio::select! {
                        why = proc.wait() => why,
                        quit = session => match quit {
                            Ok(QuitReason::Cancelled) => quit_text(quit),
                            // The process is likely exiting: how it exited says more.
                            _ => match tokio::time::timeout(Duration::from_secs(1), proc.wait()).await {
                                Ok(why) => why,
                                Err(_) => quit_text(quit),
                            },
                        },
                    };
                    proc.kill().await;
                    why
                }
                None => quit_text(session.await),
            };
            let _ = tx.send(Some(why));
        });
        Self {
            peer,
            stop: std::sync::Mutex::new(Some(stop)),
            ended,
        }
    }
}

/// Why a session loop ended, in words.
fn quit_text(quit: Result<QuitReason, tokio::task::JoinError>) -> String {
    match quit {
        Ok(QuitReason::Cancelled) => "closed by cairn".into(),
        Ok(QuitReason::Closed) => "the server closed the session".into(),
        Ok(other) => format!("the session ended ({other:?})"),
        Err(e) => format!("the session's task failed: {e}"),
    }
}

fn protocol(e: impl std::fmt::Display) -> RemoteError {
    RemoteError::Protocol(e.to_string())
}

/// A service error as cairn reports it.
fn service_error(e: rmcp::ServiceError) -> RemoteError {
    match e {
        rmcp::ServiceError::Timeout { timeout } => RemoteError::Timeout(timeout),
        rmcp::ServiceError::TransportClosed => RemoteError::Closed,
        // Nothing can be written to it: its process died (a broken pipe)
        // before the supervisor noticed, or its address does not answer.
        rmcp::ServiceError::TransportSend(e) => {
            RemoteError::Connect(format!("cannot reach it: {e}"))
        }
        rmcp::ServiceError::McpError(e) => RemoteError::Protocol(e.message.to_string()),
        other => protocol(other),
    }
}

/// Tells the server to stop a call this side no longer waits for.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let reason = "cairn stopped waiting (the turn was cancelled)".to_string();
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason)))
                    .await;
            });
        }
    }
}

#[async_trait]
impl Connection for RmcpConnection {
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, RemoteError> {
        let tools = self.peer.list_all_tools().await.map_err(service_error)?;
        tools
            .iter()
            .map(|tool| {
                let v = serde_json::to_value(tool).map_err(protocol)?;
                Ok(RemoteTool {
                    name: v["name"].as_str().unwrap_or_default().to_string(),
                    description: v["description"].as_str().unwrap_or_default().to_string(),
                    input_schema: v
                        .get("inputSchema")
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object"})),
                    read_only: v["annotations"]["readOnlyHint"].as_bool(),
                    destructive: v["annotations"]["destructiveHint"].as_bool(),
                })
            })
            .collect()
    }

    async fn call_tool(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        limits: CallLimits,
    ) -> Result<CallOutcome, RemoteError> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let options = PeerRequestOptions::with_timeout(limits.idle)
            .reset_timeout_on_progress()
            .with_max_total_timeout(limits.total);
        let handle = self
            .peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                options,
            )
            .await
            .map_err(service_error)?;
        let mut guard = CancelOnDrop {
            peer: self.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response().await;
        // Answered, or timed out (rmcp has told the server then): nothing to cancel.
        guard.id = None;
        match answer.map_err(service_error)? {
            ServerResult::CallToolResult(result) => {
                let v = serde_json::to_value(&result).map_err(protocol)?;
                Ok(CallOutcome {
                    text: result_text(&v),
                    is_error: v["isError"].as_bool().unwrap_or(false),
                })
            }
            other => Err(RemoteError::Protocol(format!(
                "unexpected answer to tools/call: {}",
                serde_json::to_string(&other).unwrap_or_default()
            ))),
        }
    }

    async fn list_resources(&self) -> Result<Vec<RemoteResource>, RemoteError> {
        if self.capability("resources").is_none() {
            return Ok(Vec::new());
        }
        let found = self
            .peer
            .list_all_resources()
            .await
            .map_err(service_error)?;
        let v = serde_json::to_value(&found).map_err(protocol)?;
        serde_json::from_value(v).map_err(protocol)
    }

    async fn read_resource(&self, uri: &str) -> Result<String, RemoteError> {
        let params = serde_json::from_value(json!({"uri": uri})).map_err(protocol)?;
        let read = self
            .peer
            .read_resource(params)
            .await
            .map_err(service_error)?;
        Ok(resource_text(
            &serde_json::to_value(&read).map_err(protocol)?,
        ))
    }

    async fn list_prompts(&self) -> Result<Vec<RemotePrompt>, RemoteError> {
        if self.capability("prompts").is_none() {
            return Ok(Vec::new());
        }
        let found = self.peer.list_all_prompts().await.map_err(service_error)?;
        let v = serde_json::to_value(&found).map_err(protocol)?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .map(|p| RemotePrompt {
                name: p["name"].as_str().unwrap_or_default().to_string(),
                description: p["description"].as_str().map(str::to_string),
                arguments: p["arguments"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        let name = a["name"].as_str().unwrap_or_default().to_string();
                        (name, a["required"].as_bool().unwrap_or(false))
                    })
                    .collect(),
            })
            .collect())
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<String, RemoteError> {
        // Prompt arguments are strings in the protocol.
        let arguments: Map<String, Value> = arguments
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, Value::String(s)),
                other => (k, Value::String(other.to_string())),
            })
            .collect();
        let params = serde_json::from_value(json!({"name": name, "arguments": arguments}))
            .map_err(protocol)?;
        let got = self.peer.get_prompt(params).await.map_err(service_error)?;
        Ok(prompt_text(&serde_json::to_value(&got).map_err(protocol)?))
    }

    async fn closed(&self) -> String {
        let mut ended = self.ended.clone();
        match ended.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            Err(_) => "the connection's watcher ended".to_string(),
        }
    }

    async fn close(&self) {
        let stop = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(stop) = stop {
            stop.cancel();
        }
        // The watcher kills the process; give it a moment to say so.
        let _ = tokio::time::timeout(Duration::from_secs(3), self.closed()).await;
    }
}

impl RmcpConnection {
    /// The server's declared capability `name` (`resources`, `prompts`), if any.
    fn capability(&self, name: &str) -> Option<Value> {
        let info = self.peer.peer_info()?;
        let v = serde_json::to_value(info.as_ref()).ok()?;
        v["capabilities"].get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_errors_lose_type_names_and_credentials() {
        // reqwest writes the URL without its user info: found all the same.
        let url = "https://example.org/mcp?token=abc";
        let raw = format!(
            "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::X<reqwest::Client>>] error: Client error: error sending request for url ({url})"
        );
        let shown = tidy(&raw);
        assert!(
            !shown.contains("rmcp::") && !shown.contains("pw") && !shown.contains("abc"),
            "{shown}"
        );
        assert!(
            shown.starts_with("Send message error Transport error: Client error"),
            "{shown}"
        );
    }
}
