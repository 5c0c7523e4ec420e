//! Test tools, a recording delegate and a harness wiring the loop to the fake server.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, LoopConfig, LoopDelegate, LoopEvent, LoopOutcome,
    PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner,
};
use cairn_core::chat::ChatMessage;
use cairn_llm::testing::FakeLlmServer;
use cairn_llm::{LlmProvider, build_provider};
use serde_json::{Value, json};

/// A tool that echoes its `text` argument and counts its runs.
pub struct Echo {
    pub spec: ToolSpec,
    pub runs: AtomicUsize,
}

impl Echo {
    pub fn new(name: &'static str, risk: RiskLevel) -> Arc<Self> {
        Arc::new(Self {
            spec: ToolSpec::new(name, risk, "echoes its text argument")
                .params(json!({"type": "object", "properties": {"text": {"type": "string"}}})),
            runs: AtomicUsize::new(0),
        })
    }
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok(format!(
            "echo: {}",
            args["text"].as_str().unwrap_or_default()
        )))
    }
}

/// Three of these complete only if all three run at the same time: each waits
/// at a shared barrier, then they finish in the reverse of call order.
pub struct Rendezvous {
    pub barrier: Arc<tokio::sync::Barrier>,
    pub finish_order: Arc<Mutex<Vec<u64>>>,
    pub gates: Arc<[tokio::sync::Notify; 3]>,
}

#[async_trait]
impl Tool for Rendezvous {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("rendezvous", RiskLevel::ReadOnly, "waits for its siblings")
                .params(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        });
        &SPEC
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let n = args["n"].as_u64().unwrap_or(0);
        self.barrier.wait().await;
        // Call n waits for call n+1 to finish, so completion order is 2, 1, 0.
        if n < 2 {
            self.gates[n as usize].notified().await;
        }
        self.finish_order.lock().unwrap().push(n);
        if n > 0 {
            self.gates[n as usize - 1].notify_one();
        }
        Ok(ToolOutput::ok(format!("rendezvous {n} done")))
    }
}

/// Records events and answers approvals from a script.
pub struct Recorder {
    pub answers: Mutex<Vec<ApprovalAnswer>>,
    pub asked: Mutex<Vec<ApprovalRequest>>,
    pub events: Mutex<Vec<LoopEvent>>,
    pub streaming: bool,
    /// When set, an overflowing context is shrunk to the system prompt and the last message.
    pub compacts: bool,
}

impl Recorder {
    pub fn new() -> Self {
        Self {
            answers: Mutex::new(Vec::new()),
            asked: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            streaming: false,
            compacts: false,
        }
    }
    pub fn answering(answers: &[ApprovalAnswer]) -> Self {
        let r = Self::new();
        *r.answers.lock().unwrap() = answers.iter().rev().copied().collect();
        r
    }
    pub fn events(&self) -> Vec<LoopEvent> {
        self.events.lock().unwrap().clone()
    }
    pub fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Approver for Recorder {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop()
            .unwrap_or(ApprovalAnswer::No)
    }
}

#[async_trait]
impl LoopDelegate for Recorder {
    fn approver(&self) -> &dyn Approver {
        self
    }
    fn streaming(&self) -> bool {
        self.streaming
    }
    fn on_event(&self, event: LoopEvent) {
        self.events.lock().unwrap().push(event);
    }
    async fn on_context_overflow(&self, messages: &mut Vec<ChatMessage>) -> bool {
        if !self.compacts {
            return false;
        }
        let last = messages.pop();
        messages.truncate(1);
        messages.extend(last);
        true
    }
}

/// A loop over the fake server's OpenAI endpoint with the given tools.
pub struct Harness {
    pub server: FakeLlmServer,
    pub agent: AgentLoop,
    pub ctx: ToolContext,
    _workspace: tempfile::TempDir,
}

impl Harness {
    pub async fn new(
        tools: Vec<Arc<dyn Tool>>,
        autonomy: AutonomyLevel,
        config: LoopConfig,
    ) -> Self {
        let server = FakeLlmServer::start().await.unwrap();
        let provider: Arc<dyn LlmProvider> = build_provider(&server.openai_settings()).unwrap();
        Self::with_provider(server, provider, tools, autonomy, config)
    }

    pub fn with_provider(
        server: FakeLlmServer,
        provider: Arc<dyn LlmProvider>,
        tools: Vec<Arc<dyn Tool>>,
        autonomy: AutonomyLevel,
        config: LoopConfig,
    ) -> Self {
        let mut registry = ToolRegistry::new();
        for tool in tools {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        let agent = AgentLoop::new(provider, runner, Arc::new(HookRegistry::new()), config);
        let workspace = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(workspace.path(), "session-1");
        Self {
            server,
            agent,
            ctx,
            _workspace: workspace,
        }
    }

    pub async fn turn(&self, delegate: &Recorder, user: &str) -> (LoopOutcome, Vec<ChatMessage>) {
        let mut messages = vec![
            ChatMessage::system("You are a test agent."),
            ChatMessage::user(user),
        ];
        let outcome = self.agent.run(delegate, &mut messages, &self.ctx).await;
        (outcome, messages)
    }

    /// The messages the model saw in request `index` (0-based), as JSON.
    pub fn sent_messages(&self, index: usize) -> Vec<Value> {
        self.server.requests()[index].body["messages"]
            .as_array()
            .unwrap()
            .clone()
    }
}
