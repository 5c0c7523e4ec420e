//! The agent side tests build again and again: fake tools (`echo`, a
//! write-risk `writer` that counts its runs) and a chat service over a
//! store with the tests' settings.

use std::path::Path;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::AgentLoop;
use cairn_agent::chat::{ChatService, ChatSettings};
use cairn_agent::prompt::RuntimeInfo;
use cairn_agent::runner::Authorized;
use cairn_agent::session::SessionManager;
use cairn_agent::tools::{CallOutcome, RiskLevel, Tool, ToolContext, ToolOutput, ToolSpec};
use cairn_core::clock::Clock;
use cairn_store::Store;
use serde_json::{Value, json};

/// `writer`: a write-risk tool (supervised autonomy asks before each call)
/// that counts its runs.
#[derive(Default)]
pub struct Writer(pub AtomicUsize);

impl Writer {
    /// How many times it ran.
    pub fn runs(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Writer {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("writer", RiskLevel::Write, "writes something"));
        &SPEC
    }
    async fn execute(&self, _: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok("written"))
    }
}

/// `echo`: read-only, answers `echo: <its text argument>`.
pub struct Echo;

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("echo", RiskLevel::ReadOnly, "echoes its text argument")
                .params(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        });
        &SPEC
    }
    async fn execute(&self, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        Ok(ToolOutput::ok(format!(
            "echo: {}",
            args["text"].as_str().unwrap_or_default()
        )))
    }
}

/// The tests' chat settings: agent `test`, UTC, host `h` on `o`, default
/// tool limits, no skills.
pub fn chat_settings(workspace: &Path, approval_timeout: Duration) -> ChatSettings {
    ChatSettings {
        agent_name: "test".into(),
        workspace: workspace.to_path_buf(),
        timezone: chrono_tz::UTC,
        runtime: RuntimeInfo {
            host: "h".into(),
            os: "o".into(),
        },
        tool_limits: Default::default(),
        approval_timeout,
        skill_paths: Vec::new(),
    }
}

/// A chat service running `agent` over `store`'s sessions (20 checkpoints,
/// idle after an hour) with [`chat_settings`].
pub fn chat_service(
    store: &Store,
    clock: Arc<dyn Clock>,
    agent: AgentLoop,
    workspace: &Path,
    approval_timeout: Duration,
) -> ChatService {
    let sessions = Arc::new(SessionManager::new(
        store.clone(),
        clock,
        20,
        Duration::from_secs(3600),
    ));
    ChatService::new(sessions, agent, chat_settings(workspace, approval_timeout))
}

/// Makes a sandbox over `settings` this test process's host sandbox (what
/// routine checks and sandboxed MCP servers consult), as a start-up would:
/// installed by the first call, replaced by later ones, since the tests of
/// one binary share its process.
pub fn host_sandbox(
    settings: cairn_agent::sandbox::SandboxSettings,
) -> Arc<cairn_agent::sandbox::Sandbox> {
    use cairn_agent::sandbox::{self, Sandbox};
    let sandbox = Arc::new(Sandbox::new(settings));
    if sandbox::install(Arc::clone(&sandbox)).is_err() {
        // Installed by an earlier test: it can no longer be missing.
        if let Err(e) = sandbox::reconfigure(Arc::clone(&sandbox)) {
            panic!("the host sandbox an earlier test installed takes no new settings: {e}");
        }
    }
    sandbox
}
