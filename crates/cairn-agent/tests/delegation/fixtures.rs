//! A parent loop with `agent_delegate`, a few tools (`echo`, `writer` that
//! asks under supervised autonomy, a `shell` the policy denies, a `gate`
//! the test opens), a job scheduler over SQLite recording the sub-agents,
//! and readers of what the fake server received.

use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use cairn_agent::delegation::{AgentProfile, DelegateTool, DelegationConfig, Delegator};
use cairn_agent::jobs::JobRecord;
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver, Authorized};
use cairn_agent::tools::{CallOutcome, RiskLevel, Tool, ToolContext, ToolOutput, ToolSpec};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, JobScheduler, LoopConfig, LoopDelegate, LoopOutcome,
    PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner,
};
use cairn_core::chat::ChatMessage;
use cairn_llm::testing::FakeLlmServer;
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::{JobFilter, Store};
use cairn_test_support::agent::{Echo, Writer};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// The parent's system prompt: no sub-agent may see it.
pub const PARENT_PROMPT: &str = "You are the parent test agent.";

/// `shell` as far as the registry knows: the parent's policy denies it.
pub struct Shell;

#[async_trait]
impl Tool for Shell {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("shell", RiskLevel::Dangerous, "runs a command"));
        &SPEC
    }
    async fn execute(&self, _: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        panic!("a denied shell ran");
    }
}

/// `gate`: says it started, then waits until the test opens it; records
/// whether its call was stopped before that.
pub struct Gate {
    started: mpsc::UnboundedSender<()>,
    open: Notify,
    pub stopped: Mutex<bool>,
}

impl Gate {
    /// Lets one waiting call through.
    pub fn open_one(&self) {
        self.open.notify_one();
    }
}

struct Stopped<'a>(&'a Gate, bool);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        if self.1 {
            *self.0.stopped.lock().unwrap() = true;
        }
    }
}

#[async_trait]
impl Tool for Gate {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("gate", RiskLevel::ReadOnly, "waits").not_reusable());
        &SPEC
    }
    async fn execute(&self, _: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let mut guard = Stopped(self, true);
        let _ = self.started.send(());
        self.open.notified().await;
        guard.1 = false;
        Ok(ToolOutput::ok("opened"))
    }
}

/// The parent's approver: answers from a script (then no), recording what it was asked.
#[derive(Default)]
pub struct Person {
    pub answers: Mutex<Vec<ApprovalAnswer>>,
    pub asked: Mutex<Vec<ApprovalRequest>>,
}

#[async_trait]
impl Approver for Person {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop()
            .unwrap_or(ApprovalAnswer::No)
    }
    fn person_present(&self) -> bool {
        true
    }
}

#[async_trait]
impl LoopDelegate for Person {
    fn approver(&self) -> &dyn Approver {
        self
    }
}

pub struct Harness {
    pub server: FakeLlmServer,
    pub agent: AgentLoop,
    pub ctx: ToolContext,
    pub store: Store,
    pub scheduler: JobScheduler,
    pub delegator: Arc<Delegator>,
    pub writer: Arc<Writer>,
    pub gate: Arc<Gate>,
    pub gate_started: tokio::sync::Mutex<mpsc::UnboundedReceiver<()>>,
    _dir: tempfile::TempDir,
}

impl Harness {
    /// A parent under `autonomy` with `shell` denied, delegation at its defaults (depth 2, 4 at once).
    pub async fn new(autonomy: AutonomyLevel) -> Self {
        Self::with_parallel(autonomy, 4).await
    }

    /// [`Harness::new`] running at most `parallel` sub-agents of a turn at once.
    pub async fn with_parallel(autonomy: AutonomyLevel, parallel: u32) -> Self {
        let server = FakeLlmServer::start().await.unwrap();
        let provider: Arc<dyn LlmProvider> = build_provider(&server.openai_settings()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/cairn.db", dir.path().display());
        let (store, _) = Store::open(&url).await.unwrap();
        let limits = cairn_core::config::AgentConfig {
            max_parallel_delegations: parallel,
            ..agent_config()
        };
        let delegator = Arc::new(Delegator::new(DelegationConfig::from_agent(&limits, "ada")));
        let writer = Arc::new(Writer::default());
        let (started, gate_started) = mpsc::unbounded_channel();
        let gate = Arc::new(Gate {
            started,
            open: Notify::new(),
            stopped: Mutex::new(false),
        });
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Echo)).unwrap();
        registry.register(writer.clone()).unwrap();
        registry.register(Arc::new(Shell)).unwrap();
        registry.register(gate.clone()).unwrap();
        registry
            .register(Arc::new(DelegateTool::new(Arc::clone(&delegator))))
            .unwrap();
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy,
            deny: vec!["shell".into()],
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        let agent = AgentLoop::new(
            Arc::clone(&provider),
            Arc::clone(&runner),
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        );
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let ctx = ToolContext::new(&workspace, "session-1");
        let scheduler =
            JobScheduler::builder(store.clone(), Arc::clone(&provider), runner, ctx.clone())
                .build();
        delegator.attach(scheduler.clone());
        Self {
            server,
            agent,
            ctx,
            store,
            scheduler,
            delegator,
            writer,
            gate,
            gate_started: tokio::sync::Mutex::new(gate_started),
            _dir: dir,
        }
    }

    /// Makes `family` (named Pip, `USER.md` saying who it is, its own model,
    /// only `echo` and `agent_delegate`) the agent a sub-agent may be.
    pub fn with_family(&self) {
        let workspace = self._dir.path().join("agents/family");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(
            workspace.join("USER.md"),
            "The family's notes: Pip looks after the garden.",
        )
        .unwrap();
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Echo)).unwrap();
        registry
            .register(Arc::new(DelegateTool::new(Arc::clone(&self.delegator))))
            .unwrap();
        let runner = Arc::new(ToolRunner::new(
            Arc::new(registry),
            Arc::new(PolicyGate::new(&ToolPolicyConfig::default())),
        ));
        let agent = self
            .agent
            .with_runner(runner)
            .with_model(Some("family-model".into()));
        self.delegator.set_agents(vec![AgentProfile {
            id: "family".into(),
            name: "Pip".into(),
            workspace,
            agent,
        }]);
    }

    /// One parent turn on `user`, with `person` answering approvals.
    pub async fn turn(&self, person: &Person, user: &str) -> LoopOutcome {
        let mut messages = vec![ChatMessage::system(PARENT_PROMPT), ChatMessage::user(user)];
        self.agent.run(person, &mut messages, &self.ctx).await
    }

    /// The messages of request `i` as (role, content) pairs.
    pub fn messages(&self, i: usize) -> Vec<(String, String)> {
        messages_of(&self.server.requests()[i].body)
    }

    /// The content of the last message of request `i`.
    pub fn last(&self, i: usize) -> String {
        self.messages(i).pop().unwrap().1
    }

    /// The tools request `i` offered, by name.
    pub fn tools(&self, i: usize) -> Vec<String> {
        let body = &self.server.requests()[i].body;
        let mut names: Vec<String> = body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Every job recorded, oldest first.
    pub async fn jobs(&self) -> Vec<JobRecord> {
        let mut jobs = self.store.list_jobs(&JobFilter::default()).await.unwrap();
        jobs.reverse();
        jobs
    }
}

pub fn messages_of(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

pub fn agent_config() -> cairn_core::config::AgentConfig {
    cairn_core::config::AgentConfig {
        name: "cairn".into(),
        max_iterations: 50,
        max_parallel_jobs: 5,
        max_delegation_depth: 2,
        max_parallel_delegations: 4,
        undo_depth: 20,
        session_idle: std::time::Duration::from_secs(3600),
        approval_timeout: std::time::Duration::from_secs(120),
        approval_channel: None,
    }
}

/// `agent_delegate`'s arguments.
pub fn delegate(args: Value) -> (&'static str, Value) {
    ("agent_delegate", args)
}

pub fn task(text: &str) -> Value {
    json!({ "task": text })
}
