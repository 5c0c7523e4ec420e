//! Background task notices reach the conversation that launched them: before
//! the next model call of a running turn, or as a turn of their own when the
//! session is idle. Chat service over SQLite and the fake LLM server.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::chat::{ChatService, ChatSink, Inbound, Reply};
use cairn_agent::runner::{Approver, Authorized, AutoApprove};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, LoopConfig, PolicyGate, ToolPolicyConfig, ToolRegistry,
    ToolRunner,
};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_core::clock::FixedClock;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::{Store, TaskStatus};
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Runs until released.
struct Gate(Arc<Notify>);

#[async_trait]
impl Tool for Gate {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("gate", RiskLevel::ReadOnly, "waits"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        self.0.notified().await;
        Ok(ToolOutput::ok("gate result 42"))
    }
}

/// Releases the gate and waits until the background task has ended: the
/// task finishes while the turn is between two model calls.
struct Release {
    gate: Arc<Notify>,
    tasks: Arc<BackgroundTasks>,
    store: Store,
}

#[async_trait]
impl Tool for Release {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("release", RiskLevel::ReadOnly, "releases"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        self.gate.notify_one();
        for task in self
            .store
            .list_background_tasks(&ctx.session_id)
            .await
            .unwrap()
        {
            assert!(self.tasks.wait(&task.id, Duration::from_secs(10)).await);
        }
        Ok(ToolOutput::ok("released"))
    }
}

struct Sink;

impl ChatSink for Sink {
    fn approver(&self) -> Option<&dyn Approver> {
        Some(&AutoApprove)
    }
}

struct Fx {
    server: FakeLlmServer,
    service: ChatService,
    store: Store,
    gate: Arc<Notify>,
    tasks: Arc<BackgroundTasks>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Fx {
    async fn new() -> Fx {
        let server = FakeLlmServer::start().await.unwrap();
        let provider: Arc<dyn LlmProvider> = build_provider(&server.openai_settings()).unwrap();
        let db = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
            .await
            .unwrap();
        let clock = Arc::new(FixedClock::new(
            Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap(),
        ));
        let link = RunnerLink::new();
        let tasks = BackgroundTasks::new(store.clone(), Arc::clone(&link), clock.clone(), "proc");
        let gate = Arc::new(Notify::new());
        let mut registry = ToolRegistry::new();
        registry
            .register(Arc::new(Gate(Arc::clone(&gate))))
            .unwrap();
        registry
            .register(Arc::new(Release {
                gate: Arc::clone(&gate),
                tasks: Arc::clone(&tasks),
                store: store.clone(),
            }))
            .unwrap();
        for tool in tasks.tools() {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        link.attach(&runner);
        let agent = AgentLoop::new(
            provider,
            runner,
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        );
        let workspace = tempfile::tempdir().unwrap();
        let service = cairn_test_support::agent::chat_service(
            &store,
            clock,
            agent,
            workspace.path(),
            Duration::from_secs(60),
        );
        Fx {
            server,
            service,
            store,
            gate,
            tasks,
            _dirs: (db, workspace),
        }
    }

    async fn say(&self, text: &str) -> Reply {
        let inbound = Inbound {
            user_id: "ada".into(),
            channel: "terminal".into(),
            thread: None,
            text: text.into(),
            images: Vec::new(),
        };
        self.service.handle(inbound, &Sink).await
    }

    fn sent(&self, n: usize) -> String {
        serde_json::to_string(&self.server.requests()[n].body["messages"]).unwrap()
    }
}

fn answer(reply: &Reply) -> &str {
    match reply {
        Reply::Answer(report) => &report.response,
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[tokio::test]
async fn a_task_finishing_mid_turn_is_announced_before_the_next_model_call() {
    let fx = Fx::new().await;
    fx.server.push_all([
        Scripted::tool_call("background_run", json!({"name": "gate"})),
        Scripted::tool_call("release", json!({})),
        Scripted::text("the gate said 42"),
    ]);
    assert_eq!(
        answer(&fx.say("run the gate in the background").await),
        "the gate said 42"
    );
    assert!(
        !fx.sent(1).contains("BACKGROUND TASK"),
        "nothing had finished yet"
    );
    let third = fx.sent(2);
    assert!(
        third.contains("[BACKGROUND TASK COMPLETED] task_id=bg-"),
        "{third}"
    );
    assert!(third.contains("tool=gate, elapsed=0.0s"), "{third}");
    assert!(third.contains("gate result 42"), "{third}");
    // Injected once: delivered, and stored with the turn.
    assert!(fx.store.list_sessions().await.unwrap().len() == 1);
    let session = &fx.store.list_sessions().await.unwrap()[0];
    assert!(
        !fx.store
            .has_undelivered_tasks(&session.id.to_string())
            .await
            .unwrap()
    );
    fx.server.push(Scripted::text("ok"));
    fx.say("and now?").await;
    let fourth = fx.sent(3);
    assert_eq!(
        fourth.matches("[BACKGROUND TASK COMPLETED]").count(),
        1,
        "{fourth}"
    );
}

#[tokio::test]
async fn a_notice_for_an_idle_session_waits_and_gets_a_turn_of_its_own() {
    let fx = Fx::new().await;
    fx.server.push_all([
        Scripted::tool_call("background_run", json!({"name": "gate"})),
        Scripted::text("launched"),
    ]);
    assert_eq!(answer(&fx.say("start it").await), "launched");
    assert!(!fx.service.notices_waiting("ada", "terminal").await);
    assert_eq!(fx.service.background_running("ada", "terminal").await, 1);
    // It finishes while nobody talks: the notice waits in the store.
    let session = fx.store.list_sessions().await.unwrap()[0].id.to_string();
    let task = fx
        .store
        .list_background_tasks(&session)
        .await
        .unwrap()
        .remove(0);
    fx.gate.notify_one();
    assert!(fx.tasks.wait(&task.id, Duration::from_secs(10)).await);
    assert_eq!(
        fx.store
            .get_background_task(&task.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        TaskStatus::Completed
    );
    assert!(fx.service.notices_waiting("ada", "terminal").await);
    fx.server.push(Scripted::text("Your gate finished: 42."));
    let reply = fx
        .service
        .deliver_notices("ada", "terminal", &Sink)
        .await
        .unwrap();
    assert_eq!(answer(&reply), "Your gate finished: 42.");
    let sent = fx.sent(2);
    assert!(
        sent.contains("automatic notice from cairn, not a message from the person"),
        "{sent}"
    );
    assert!(sent.contains("[BACKGROUND TASK COMPLETED]"), "{sent}");
    // Delivered once.
    assert!(!fx.service.notices_waiting("ada", "terminal").await);
    assert!(
        fx.service
            .deliver_notices("ada", "terminal", &Sink)
            .await
            .is_none()
    );
}

#[tokio::test]
async fn a_notification_addressed_to_the_conversation_reaches_it_once() {
    use cairn_automation::notify::{ChannelSet, Notifier};
    use cairn_core::notification::{NewNotification, conversation_channel};
    let fx = Fx::new().await;
    fx.server.push(Scripted::text("hello"));
    fx.say("hi").await;
    let session = fx.store.list_sessions().await.unwrap()[0].id.to_string();
    let notifier = Notifier::new(
        fx.store.clone(),
        Arc::new(ChannelSet::new()),
        Default::default(),
    );
    let new = NewNotification {
        user_id: "ada".into(),
        channel: Some(conversation_channel(&session)),
        title: "[REMINDER] check the deploy".into(),
        body: "You asked me to remind you.".into(),
        priority: Default::default(),
        tags: vec![],
        data: None,
        source: "routine:r".into(),
    };
    let n = notifier.send(new, Utc::now()).await.unwrap();
    assert!(
        n.in_inbox,
        "waits in the inbox until the conversation takes it"
    );
    assert!(fx.service.notices_waiting("ada", "terminal").await);

    fx.server.push(Scripted::text("Time to check the deploy."));
    let reply = fx
        .service
        .deliver_notices("ada", "terminal", &Sink)
        .await
        .unwrap();
    assert_eq!(answer(&reply), "Time to check the deploy.");
    let sent = fx.sent(1);
    assert!(
        sent.contains(r"[REMINDER] check the deploy\nYou asked me to remind you."),
        "{sent}"
    );
    assert!(!fx.service.notices_waiting("ada", "terminal").await);
    assert!(fx.store.inbox("ada", false, 10).await.unwrap().is_empty());
}
