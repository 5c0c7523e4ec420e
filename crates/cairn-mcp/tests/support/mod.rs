//! What cairn-mcp's tests share: the real MCP servers they start (the
//! Python SDK one from the test venv, server-everything from npm), clients
//! over them, and an agent loop on the fake LLM server.
#![allow(
    dead_code,
    reason = "not in every build: each test binary uses part of the harness"
)]
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{Approver, DenyAll, ToolResult};
use cairn_agent::tools::{ToolContext, ToolRegistry};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, LoopConfig, LoopDelegate, PolicyGate, ToolPolicyConfig,
    ToolRunner,
};
use cairn_core::chat::{ChatMessage, ToolCall};
use cairn_llm::testing::FakeLlmServer;
use cairn_mcp::{McpClients, Places, ServerSpec, Supervision};
use tokio::io::AsyncBufReadExt;

/// The Python SDK test server's script.
pub fn py_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/py_server.py")
}

/// A stdio spec for the Python server.
pub fn py_stdio(name: &str, python: &Path) -> ServerSpec {
    ServerSpec::stdio(
        name,
        python.to_str().unwrap(),
        &[py_script().to_str().unwrap(), "stdio"],
    )
}

/// Restarts fast, so the tests wait little.
pub fn fast() -> Supervision {
    Supervision {
        backoff_start: Duration::from_millis(200),
        backoff_max: Duration::from_secs(1),
        healthy_after: Duration::from_secs(60),
    }
}

/// The Python server over streamable HTTP on 127.0.0.1, killed when dropped.
pub struct HttpServer {
    child: tokio::process::Child,
    /// Its MCP endpoint.
    pub url: String,
}

impl HttpServer {
    pub async fn start(python: &Path) -> Self {
        let mut child = tokio::process::Command::new(python)
            .arg(py_script())
            .arg("http")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the HTTP server printed its port")
            .unwrap()
            .unwrap();
        let port = line.strip_prefix("PORT ").unwrap().trim().to_string();
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

/// Places over `workspace`, the servers' own folders in a directory of
/// their own outside it (kept: a test's servers may outlive the call).
pub fn places(workspace: &Path) -> Places {
    Places {
        workspace: workspace.to_path_buf(),
        servers: tempfile::tempdir().unwrap().keep(),
    }
}

/// Clients over `specs`, started (no store).
pub async fn clients(specs: Vec<ServerSpec>, workspace: &Path) -> Arc<McpClients> {
    let clients = McpClients::new(specs, places(workspace), None, fast()).await;
    clients.start();
    Arc::new(clients)
}

/// A runner over the clients' tools with this policy.
pub fn runner(clients: &McpClients, policy: ToolPolicyConfig) -> Arc<ToolRunner> {
    let mut registry = ToolRegistry::new();
    registry.register_source(clients.source());
    for tool in clients.tools() {
        registry.register(tool).unwrap();
    }
    registry.enable_schema_tool().unwrap();
    Arc::new(ToolRunner::new(
        Arc::new(registry),
        Arc::new(PolicyGate::new(&policy)),
    ))
}

/// Autonomy `full`: every call runs (the tests are about what happens then).
pub fn full() -> ToolPolicyConfig {
    ToolPolicyConfig {
        autonomy: AutonomyLevel::Full,
        ..Default::default()
    }
}

/// Runs one call through the runner, nobody approving.
pub async fn call(
    runner: &ToolRunner,
    ctx: &ToolContext,
    name: &str,
    args: serde_json::Value,
) -> ToolResult {
    let call = ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: args,
    };
    runner.run(&call, ctx, &DenyAll).await
}

/// A delegate that declines what asks.
pub struct Unattended;

#[async_trait]
impl LoopDelegate for Unattended {
    fn approver(&self) -> &dyn Approver {
        &DenyAll
    }
}

/// One agent turn for `user` on the fake LLM server with the runner's tools;
/// returns the messages of the turn.
pub async fn turn(
    llm: &FakeLlmServer,
    runner: Arc<ToolRunner>,
    ctx: &ToolContext,
    user: &str,
) -> Vec<ChatMessage> {
    let provider = cairn_llm::build_provider(&llm.openai_settings()).unwrap();
    let agent = AgentLoop::new(
        provider,
        runner,
        Arc::new(HookRegistry::new()),
        LoopConfig::default(),
    );
    let mut messages = vec![
        ChatMessage::system("You are a test agent."),
        ChatMessage::user(user),
    ];
    agent.run(&Unattended, &mut messages, ctx).await;
    messages
}

/// Waits (polling) until `path` exists, at most `limit`: for files an
/// outside process writes.
pub async fn wait_for_file(path: &Path, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if tokio::fs::try_exists(path).await.unwrap_or(false) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
