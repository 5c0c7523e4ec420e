//! Fixtures: a provider that answers by task, a `gate` tool the test opens,
//! the `job_subtasks` tool, a tool that needs approval, and a harness wiring
//! them to a scheduler.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_agent::delegation::{DelegationConfig, Delegator, SubtasksTool};
use cairn_agent::jobs::JobRecord;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{
    AutonomyLevel, JobScheduler, JobSpec, JobsConfig, PolicyGate, ToolPolicyConfig, ToolRegistry,
    ToolRunner,
};
use cairn_core::chat::Role;
use cairn_core::clock::Clock;
use cairn_llm::testing::InstantProvider;
use cairn_llm::{ChatRequest, ChatResponse, LlmError, LlmProvider};
use cairn_store::Store;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

/// Answers by task, whatever order concurrent jobs call in. The task is the
/// user message (after "Task:" when planned): `key` waits once at gate `key`,
/// `key*n` at gates `key/1`..`key/n`, `batch:a,b,c` runs subtasks a, b, c
/// through `job_subtasks`.
#[derive(Debug, Default)]
pub struct TaskProvider {
    pub requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl LlmProvider for TaskProvider {
    fn name(&self) -> &str {
        "task"
    }
    fn model(&self) -> &str {
        "task-model"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        let user = &request
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .unwrap()
            .content;
        let task = user.rsplit("Task:\n").next().unwrap().trim().to_string();
        let done = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count();
        let call = |name: &str, args: Value| {
            Ok(InstantProvider::tool_call_response(
                &format!("call-{done}"),
                name,
                args,
            ))
        };
        if let Some(subtasks) = task.strip_prefix("batch:") {
            let tasks: Vec<&str> = subtasks.split(',').collect();
            return if done == 0 {
                call("job_subtasks", json!({ "tasks": tasks }))
            } else {
                Ok(InstantProvider::text_response("batch done"))
            };
        }
        let (key, n) = match task.split_once('*') {
            Some((key, n)) => (key.to_string(), n.parse::<usize>().unwrap()),
            None => (task.clone(), 1),
        };
        if done < n {
            let gate = if n > 1 {
                format!("{key}/{}", done + 1)
            } else {
                key.clone()
            };
            return call("gate", json!({ "key": gate }));
        }
        Ok(InstantProvider::text_response(format!("done {key}")))
    }
}

/// `gate`: reports that it started, then waits until the test opens it.
#[derive(Default)]
pub struct Gate {
    started: Mutex<Option<mpsc::UnboundedSender<String>>>,
    notifies: Mutex<HashMap<String, Arc<Notify>>>,
    finished: Mutex<Vec<String>>,
    stopped: Mutex<Vec<String>>,
}

impl Gate {
    pub fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let gate = Self::default();
        *gate.started.lock().unwrap() = Some(tx);
        (Arc::new(gate), rx)
    }
    fn notify(&self, key: &str) -> Arc<Notify> {
        self.notifies
            .lock()
            .unwrap()
            .entry(key.to_string())
            .or_default()
            .clone()
    }
    pub fn open(&self, key: &str) {
        self.notify(key).notify_one();
    }
    pub fn finished(&self) -> Vec<String> {
        self.finished.lock().unwrap().clone()
    }
    pub fn stopped(&self) -> Vec<String> {
        self.stopped.lock().unwrap().clone()
    }
}

/// Records a gate call whose future was dropped before it finished (stopped).
struct StopGuard<'a>(&'a Gate, Option<String>);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.1.take() {
            self.0.stopped.lock().unwrap().push(key);
        }
    }
}

#[async_trait]
impl Tool for Gate {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("gate", RiskLevel::ReadOnly, "waits until the test opens it")
                .params(json!({"type": "object", "properties": {"key": {"type": "string"}}}))
        });
        &SPEC
    }
    async fn execute(
        &self,
        args: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let key = args["key"].as_str().unwrap().to_string();
        let mut guard = StopGuard(self, Some(key.clone()));
        let notify = self.notify(&key);
        if let Some(tx) = &*self.started.lock().unwrap() {
            let _ = tx.send(key.clone());
        }
        notify.notified().await;
        guard.1 = None;
        self.finished.lock().unwrap().push(key.clone());
        Ok(ToolOutput::ok(format!("opened {key}")))
    }
}

/// A tool that needs approval under `supervised` autonomy.
pub struct Danger;

#[async_trait]
impl Tool for Danger {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("danger", RiskLevel::Dangerous, "does something risky"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        panic!("a job ran a tool that needed approval");
    }
}

pub struct Harness {
    pub scheduler: JobScheduler,
    /// The jobs' provider and tools, for a loop of the test's own.
    pub provider: Arc<dyn LlmProvider>,
    pub runner: Arc<ToolRunner>,
    pub gate: Arc<Gate>,
    pub started: mpsc::UnboundedReceiver<String>,
    _workspace: tempfile::TempDir,
}

impl Harness {
    pub fn new(
        store: Store,
        provider: Arc<dyn LlmProvider>,
        config: JobsConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let (gate, started) = Gate::new();
        // Subtasks run two at a time, like the jobs of `config(2)`.
        let delegator = Arc::new(Delegator::new(DelegationConfig {
            max_depth: 2,
            max_parallel: 2,
            ..DelegationConfig::from_agent(
                &cairn_core::config::AgentConfig {
                    name: "cairn".into(),
                    max_iterations: 50,
                    max_parallel_jobs: 2,
                    max_delegation_depth: 2,
                    max_parallel_delegations: 2,
                    undo_depth: 1,
                    session_idle: std::time::Duration::from_secs(3600),
                    approval_timeout: std::time::Duration::from_secs(60),
                    approval_channel: None,
                },
                "ada",
            )
        }));
        let subtasks = Arc::new(SubtasksTool::new(Arc::clone(&delegator)));
        let mut registry = ToolRegistry::new();
        registry.register(gate.clone()).unwrap();
        registry.register(subtasks.clone()).unwrap();
        registry.register(Arc::new(Danger)).unwrap();
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        let workspace = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(workspace.path(), "unused").with_clock(clock);
        let scheduler =
            JobScheduler::builder(store, Arc::clone(&provider), Arc::clone(&runner), ctx)
                .config(config)
                .build();
        delegator.attach(scheduler.clone());
        Self {
            scheduler,
            provider,
            runner,
            gate,
            started,
            _workspace: workspace,
        }
    }

    pub async fn next_started(&mut self) -> String {
        self.started.recv().await.unwrap()
    }

    pub async fn submit(&self, task: &str) -> cairn_agent::JobHandle {
        self.scheduler
            .submit(JobSpec::new(task, task, "ada").with_origin("thread:1"))
            .await
            .unwrap()
    }
}

/// A migrated SQLite store in a temporary directory; works under paused time too.
pub async fn sqlite() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    (store, dir)
}

pub fn config(max_parallel_jobs: usize) -> JobsConfig {
    JobsConfig {
        max_parallel_jobs,
        ..JobsConfig::default()
    }
}

pub fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_790_000_000 + secs, 0).unwrap()
}

pub async fn stored(store: &Store, id: Uuid) -> JobRecord {
    store.get_job(id).await.unwrap().unwrap()
}
