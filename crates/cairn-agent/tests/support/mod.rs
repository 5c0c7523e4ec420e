//! Fake tools and helpers shared by the integration tests.
#![allow(
    dead_code,
    reason = "not in every build: each test binary uses part of the harness"
)]
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::policy::{AutonomyLevel, PolicyGate, ToolPolicyConfig};
use cairn_agent::runner::{
    ApprovalAnswer, ApprovalRequest, Approver, Authorized, AutoApprove, ToolResult, ToolRunner,
    ToolStatus,
};
use cairn_agent::tools::{
    RiskLevel, Tool, ToolContext, ToolError, ToolLimits, ToolOutput, ToolRegistry, ToolSpec,
};
use cairn_core::chat::ToolCall;

/// A tool with a fixed name and risk that returns a fixed text.
pub struct Fixed {
    pub spec: ToolSpec,
    pub text: String,
}

#[async_trait]
impl Tool for Fixed {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok(self.text.clone()))
    }
}

pub fn fixed(name: &'static str, risk: RiskLevel, text: &str) -> Arc<dyn Tool> {
    Arc::new(Fixed {
        spec: ToolSpec::new(name, risk, "returns a fixed text"),
        text: text.to_string(),
    })
}

/// Sleeps for the given time, then succeeds.
pub struct Sleeper(pub Duration);

#[async_trait]
impl Tool for Sleeper {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("sleeper", RiskLevel::ReadOnly, "sleeps"));
        &SPEC
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(self.0).await;
        Ok(ToolOutput::ok("woke up"))
    }
}

/// Panics when executed.
pub struct Panicker;

#[async_trait]
impl Tool for Panicker {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("panicker", RiskLevel::ReadOnly, "panics"));
        &SPEC
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        panic!("boom")
    }
}

/// Answers with a fixed answer and counts how often it was asked; a rule
/// unless made with [`Scripted::person`].
pub struct Scripted {
    pub answer: ApprovalAnswer,
    pub asked: AtomicUsize,
    pub last: std::sync::Mutex<Option<ApprovalRequest>>,
    pub present: bool,
}

impl Scripted {
    pub fn new(answer: ApprovalAnswer) -> Self {
        Self {
            answer,
            asked: AtomicUsize::new(0),
            last: std::sync::Mutex::new(None),
            present: false,
        }
    }
    /// A person giving `answer`.
    pub fn person(answer: ApprovalAnswer) -> Self {
        Self {
            present: true,
            ..Self::new(answer)
        }
    }
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Approver for Scripted {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.fetch_add(1, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some(request.clone());
        self.answer
    }
    fn person_present(&self) -> bool {
        self.present
    }
}

pub fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments,
    }
}

/// Runs a single tool the only way a tool can run: through a [`ToolRunner`]
/// (full autonomy, auto-approve, output uncapped), then decodes the framed result
/// back into the tool's own outcome, so tool tests can assert on `ToolError`s.
#[async_trait]
pub trait RunGated {
    /// The tool's outcome for `args`, run through the runner.
    async fn run_gated(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

#[async_trait]
impl<T: Tool + Clone + 'static> RunGated for T {
    async fn run_gated(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(self.clone())).unwrap();
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Full,
            ..ToolPolicyConfig::default()
        });
        let runner = ToolRunner::new(Arc::new(registry), Arc::new(policy));
        let limits = ToolLimits {
            max_output_chars: usize::MAX,
            ..ctx.limits.clone()
        };
        let ctx = ctx.clone().with_limits(limits);
        decode(
            &runner
                .run(&call(self.spec().name(), args), &ctx, &AutoApprove)
                .await,
        )
    }
}

/// The tool's outcome behind a framed [`ToolResult`]: the inverse of the
/// runner's status mapping and of `ToolError`'s messages.
pub fn decode(result: &ToolResult) -> Result<ToolOutput, ToolError> {
    let framed = result.content.as_str();
    let body = framed
        .split_once('\n')
        .and_then(|(_, rest)| rest.strip_suffix("\n</tool_output>"))
        .unwrap_or_else(|| panic!("not a framed result: {framed}"))
        .to_string();
    let error = body.strip_prefix("error: ").unwrap_or(&body).to_string();
    let after = |prefix: &str| error.strip_prefix(prefix).map(str::to_string);
    match result.status {
        ToolStatus::Success => Ok(ToolOutput::ok(body)),
        ToolStatus::Cancelled => Err(ToolError::Cancelled),
        ToolStatus::TimedOut => Err(ToolError::Timeout(parse_limit(
            &after("timed out after ").unwrap_or_else(|| panic!("{error}")),
        ))),
        ToolStatus::InvalidArguments => Err(ToolError::InvalidArguments(
            after("invalid arguments: ").unwrap_or_else(|| panic!("{error}")),
        )),
        ToolStatus::Failed if !body.starts_with("error: ") => Ok(ToolOutput::failed(body)),
        ToolStatus::Failed => Err(after("not permitted: ")
            .map(ToolError::NotPermitted)
            .or_else(|| after("i/o error: ").map(ToolError::Io))
            .or_else(|| after("http error: ").map(ToolError::Http))
            .unwrap_or(ToolError::Failed(error))),
        other => panic!("the runner refused the call ({other:?}): {body}"),
    }
}

/// `200ms` or `2s`, as `ToolError::Timeout` shows a limit.
fn parse_limit(text: &str) -> Duration {
    match text.strip_suffix("ms") {
        Some(ms) => Duration::from_millis(ms.parse().unwrap()),
        None => Duration::from_secs(text.strip_suffix('s').unwrap().parse().unwrap()),
    }
}

/// Reads a request's head, through the blank line, from a test server's
/// socket: the bytes read so far (the body may have begun) and where the
/// head ends; `None` when the client left first.
pub async fn read_head(socket: &mut tokio::net::TcpStream) -> Option<(Vec<u8>, usize)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some((buf, i + 4));
        }
    }
}
