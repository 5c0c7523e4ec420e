//! The test harness: a chat service over a real SQLite store and the fake LLM server.

use std::sync::LazyLock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::chat::{ChatService, ChatSink, Inbound, Reply};
use cairn_agent::runner::{ApprovalRequest, Approver, Authorized, AutoApprove};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{
    AgentLoop, AutonomyLevel, CompactionResult, Compactor, ContextMonitor, HookRegistry,
    LoopConfig, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner,
};
use cairn_core::clock::FixedClock;
use cairn_llm::testing::FakeLlmServer;
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::Store;
pub use cairn_test_support::agent::{Writer, chat_service};
use chrono::{TimeZone, Utc};
use serde_json::Value;
use tokio::sync::Notify;

/// A read-only tool that never finishes on its own (until the turn is cancelled).
pub struct Slow;

#[async_trait]
impl Tool for Slow {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("slow", RiskLevel::ReadOnly, "takes forever"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        ctx.cancel.cancelled().await;
        Err(ToolError::Cancelled)
    }
}

/// Records what the service tells the channel; optionally answers approvals itself.
#[derive(Default)]
pub struct Sink {
    pub auto_approve: bool,
    pub approval_needed: Notify,
    pub approvals: Mutex<Vec<ApprovalRequest>>,
    pub compactions: Mutex<Vec<CompactionResult>>,
}

impl ChatSink for Sink {
    fn approver(&self) -> Option<&dyn Approver> {
        self.auto_approve.then_some(&AutoApprove as &dyn Approver)
    }
    fn on_approval_needed(&self, request: &ApprovalRequest) {
        self.approvals.lock().unwrap().push(request.clone());
        self.approval_needed.notify_one();
    }
    fn on_compacted(&self, result: &CompactionResult) {
        self.compactions.lock().unwrap().push(result.clone());
    }
}

pub struct Harness {
    pub server: FakeLlmServer,
    pub service: Arc<ChatService>,
    pub store: Store,
    pub clock: Arc<FixedClock>,
    pub writer: Arc<Writer>,
    pub workspace: tempfile::TempDir,
    _db: tempfile::TempDir,
}

/// Which wire format the harness's provider speaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

impl Harness {
    pub async fn new() -> Harness {
        Harness::build(Wire::OpenAi, Duration::from_secs(120)).await
    }

    pub async fn build(wire: Wire, approval_timeout: Duration) -> Harness {
        let server = FakeLlmServer::start().await.unwrap();
        let settings = match wire {
            Wire::OpenAi => server.openai_settings(),
            Wire::Anthropic => server.anthropic_settings(),
        };
        let provider: Arc<dyn LlmProvider> = build_provider(&settings).unwrap();
        let db = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
            .await
            .unwrap();
        let clock = Arc::new(FixedClock::new(
            Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap(),
        ));
        let writer = Arc::new(Writer::default());
        let mut registry = ToolRegistry::new();
        registry.register(writer.clone()).unwrap();
        registry.register(Arc::new(Slow)).unwrap();
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        let agent = AgentLoop::new(
            provider.clone(),
            runner,
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        );
        let workspace = tempfile::tempdir().unwrap();
        let compactor = Compactor::new(provider, workspace.path().to_path_buf())
            .with_monitor(ContextMonitor::new(100_000));
        let service = chat_service(
            &store,
            clock.clone(),
            agent,
            workspace.path(),
            approval_timeout,
        )
        .with_compactor(Arc::new(compactor));
        Harness {
            server,
            service: Arc::new(service),
            store,
            clock,
            writer,
            workspace,
            _db: db,
        }
    }

    pub fn inbound(channel: &str, thread: Option<&str>, text: &str) -> Inbound {
        Inbound {
            user_id: "ada".into(),
            channel: channel.into(),
            thread: thread.map(str::to_string),
            text: text.into(),
            images: Vec::new(),
        }
    }

    pub async fn say(&self, text: &str) -> Reply {
        self.service
            .handle(
                Self::inbound("terminal", None, text),
                &Sink {
                    auto_approve: true,
                    ..Default::default()
                },
            )
            .await
    }

    /// Waits until the server has received `n` requests (a turn is then
    /// really waiting on the model, not about to call it).
    pub async fn wait_for_requests(&self, n: usize) {
        for _ in 0..2000 {
            if self.server.requests().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the server never received request {n}");
    }

    pub fn sent(&self, n: usize) -> String {
        serde_json::to_string(&self.server.requests()[n].body["messages"]).unwrap()
    }

    /// The active thread of ada's terminal session, as stored.
    pub async fn stored_turns(&self) -> Vec<Value> {
        let session = self
            .store
            .get_or_create_session("ada", "terminal", Utc::now())
            .await
            .unwrap();
        let thread = self
            .store
            .get_thread(session.active_thread_id.unwrap())
            .await
            .unwrap()
            .unwrap();
        let turns = self
            .store
            .load_turns(thread.id, &thread.view)
            .await
            .unwrap();
        turns
            .into_iter()
            .map(|t| {
                let mut data = t.data;
                data["messages"] = Value::Array(t.messages);
                data
            })
            .collect()
    }

    /// The request bodies' messages of request `n`.
    pub fn messages(&self, n: usize) -> Vec<Value> {
        self.server.requests()[n].body["messages"]
            .as_array()
            .unwrap()
            .clone()
    }
}

pub fn answer(reply: &Reply) -> &str {
    match reply {
        Reply::Answer(report) => &report.response,
        other => panic!("expected an answer, got {other:?}"),
    }
}

pub fn notice(reply: &Reply) -> &str {
    match reply {
        Reply::Notice { text } => text,
        other => panic!("expected a notice, got {other:?}"),
    }
}
