//! The chat service over a real SQLite store and the fake LLM server:
//! sessions, interrupts, approvals by message, resume, isolation, pruning and
//! compaction when the provider reports an overflow.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::chat::{ChatService, ChatSettings, ChatSink, Inbound, Reply};
use cairn_agent::prompt::RuntimeInfo;
use cairn_agent::runner::{ApprovalRequest, Approver, AutoApprove};
use cairn_agent::session::SessionManager;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use cairn_agent::{
    AgentLoop, AutonomyLevel, CompactionResult, Compactor, ContextMonitor, HookRegistry,
    LoopConfig, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner,
};
use cairn_core::clock::{Clock, FixedClock};
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::Store;
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A write-risk tool that records its runs.
struct Writer(AtomicUsize);

#[async_trait]
impl Tool for Writer {
    fn name(&self) -> &str {
        "writer"
    }
    fn description(&self) -> &str {
        "writes"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Write
    }
    async fn execute(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok("written"))
    }
}

/// Records what the service tells the channel; optionally answers approvals itself.
#[derive(Default)]
struct Sink {
    auto_approve: bool,
    approval_needed: Notify,
    approvals: Mutex<Vec<ApprovalRequest>>,
    compactions: Mutex<Vec<CompactionResult>>,
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

struct Harness {
    server: FakeLlmServer,
    service: Arc<ChatService>,
    store: Store,
    clock: Arc<FixedClock>,
    writer: Arc<Writer>,
    workspace: tempfile::TempDir,
    _db: tempfile::TempDir,
}

impl Harness {
    async fn new() -> Harness {
        let server = FakeLlmServer::start().await.unwrap();
        let provider: Arc<dyn LlmProvider> = build_provider(&server.openai_settings()).unwrap();
        let db = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
            .await
            .unwrap();
        let clock = Arc::new(FixedClock::new(
            Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap(),
        ));
        let writer = Arc::new(Writer(AtomicUsize::new(0)));
        let mut registry = ToolRegistry::new();
        registry.register(writer.clone()).unwrap();
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
        let sessions = Arc::new(SessionManager::new(
            store.clone(),
            clock.clone(),
            20,
            Duration::from_secs(3600),
        ));
        let compactor = Compactor::new(provider, workspace.path().to_path_buf())
            .with_monitor(ContextMonitor::new(100_000));
        let service = ChatService::new(
            sessions,
            agent,
            ChatSettings {
                agent_name: "test".into(),
                workspace: workspace.path().to_path_buf(),
                timezone: chrono_tz::UTC,
                runtime: RuntimeInfo {
                    host: "h".into(),
                    os: "o".into(),
                },
                tool_limits: Default::default(),
            },
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

    fn inbound(channel: &str, thread: Option<&str>, text: &str) -> Inbound {
        Inbound {
            user_id: "ada".into(),
            channel: channel.into(),
            thread: thread.map(str::to_string),
            text: text.into(),
        }
    }

    async fn say(&self, text: &str) -> Reply {
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
    async fn wait_for_requests(&self, n: usize) {
        for _ in 0..2000 {
            if self.server.requests().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the server never received request {n}");
    }

    fn sent(&self, n: usize) -> String {
        serde_json::to_string(&self.server.requests()[n].body["messages"]).unwrap()
    }

    /// The active thread of ada's terminal session, as stored.
    async fn stored_turns(&self) -> Vec<Value> {
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
        thread.turns.as_array().unwrap().clone()
    }
}

fn answer(reply: &Reply) -> &str {
    match reply {
        Reply::Answer(report) => &report.response,
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn notice(reply: &Reply) -> &str {
    match reply {
        Reply::Notice { text } => text,
        other => panic!("expected a notice, got {other:?}"),
    }
}

#[tokio::test]
async fn concurrent_first_messages_create_one_session() {
    let h = Harness::new().await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let service = Arc::clone(&h.service);
        tasks.spawn(async move {
            service
                .handle(
                    Harness::inbound("terminal", None, "/ping"),
                    &Sink::default(),
                )
                .await
        });
    }
    for reply in tasks.join_all().await {
        assert_eq!(notice(&reply), "pong");
    }
    assert_eq!(h.store.list_sessions().await.unwrap().len(), 1);
    assert_eq!(h.service.sessions().len().await, 1);
}

#[tokio::test]
async fn a_new_message_interrupts_the_running_turn() {
    let h = Harness::new().await;
    h.server
        .push(Scripted::text("too slow").with_delay(Duration::from_secs(600)));
    h.server.push(Scripted::text("fast answer"));
    let sink = Arc::new(Sink {
        auto_approve: true,
        ..Default::default()
    });
    let first = {
        let (service, sink) = (Arc::clone(&h.service), Arc::clone(&sink));
        tokio::spawn(async move {
            service
                .handle(Harness::inbound("terminal", None, "first"), sink.as_ref())
                .await
        })
    };
    h.wait_for_requests(1).await;
    let second = h.say("second").await;
    assert_eq!(answer(&second), "fast answer");
    assert!(notice(&first.await.unwrap()).contains("Interrupted"));
    let turns = h.stored_turns().await;
    let states: Vec<&str> = turns.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["interrupted", "completed"]);
    assert!(
        h.sent(1).contains("first"),
        "the interrupted message stays in the history"
    );
}

#[tokio::test]
async fn approvals_can_come_as_later_messages() {
    let h = Harness::new().await;
    for _ in 0..2 {
        h.server
            .push(Scripted::tool_call("writer", json!({"text": "x"})));
        h.server.push(Scripted::text("finished"));
    }
    let sink = Arc::new(Sink::default());
    for (word, runs) in [("yes", 1), ("no", 1)] {
        let turn = {
            let (service, sink) = (Arc::clone(&h.service), Arc::clone(&sink));
            tokio::spawn(async move {
                service
                    .handle(
                        Harness::inbound("terminal", None, "write it"),
                        sink.as_ref(),
                    )
                    .await
            })
        };
        sink.approval_needed.notified().await;
        assert_eq!(
            sink.approvals.lock().unwrap().last().unwrap().tool,
            "writer"
        );
        let reply = h
            .service
            .handle(Harness::inbound("terminal", None, word), &Sink::default())
            .await;
        assert_eq!(
            notice(&reply),
            if word == "yes" {
                "Approved."
            } else {
                "Declined."
            }
        );
        assert_eq!(answer(&turn.await.unwrap()), "finished");
        assert_eq!(h.writer.0.load(Ordering::SeqCst), runs);
    }
    // "yes" with nothing pending is not an approval.
    assert_eq!(
        h.say("/ping").await,
        Reply::Notice {
            text: "pong".into()
        }
    );
}

#[tokio::test]
async fn resume_continues_an_interrupted_turn() {
    let h = Harness::new().await;
    h.server
        .push(Scripted::text("never arrives").with_delay(Duration::from_secs(600)));
    h.server.push(Scripted::text("resumed answer"));
    let sink = Arc::new(Sink {
        auto_approve: true,
        ..Default::default()
    });
    let turn = {
        let (service, sink) = (Arc::clone(&h.service), Arc::clone(&sink));
        tokio::spawn(async move {
            service
                .handle(
                    Harness::inbound("terminal", None, "long question"),
                    sink.as_ref(),
                )
                .await
        })
    };
    h.wait_for_requests(1).await;
    assert!(h.service.interrupt("ada", "terminal"));
    assert!(notice(&turn.await.unwrap()).contains("/resume"));
    assert_eq!(answer(&h.say("/resume").await), "resumed answer");
    let turns = h.stored_turns().await;
    assert_eq!(turns.len(), 1, "the resumed turn is the same turn");
    assert_eq!(turns[0]["state"], "completed");
    assert_eq!(turns[0]["user_input"], "long question");
    assert!(notice(&h.say("/resume").await).contains("Nothing to resume"));
}

#[tokio::test]
async fn clear_is_undoable() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("one"));
    h.server.push(Scripted::text("two"));
    h.say("first").await;
    h.say("second").await;
    assert!(notice(&h.say("/clear").await).contains("Cleared"));
    assert!(h.stored_turns().await.is_empty());
    assert!(notice(&h.say("/undo").await).contains("Undone"));
    assert_eq!(h.stored_turns().await.len(), 2);
    assert!(notice(&h.say("/redo").await).contains("Redone"));
    assert!(h.stored_turns().await.is_empty());
}

#[tokio::test]
async fn equal_thread_ids_on_two_channels_never_meet() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("noted on a"));
    h.server.push(Scripted::text("fresh on b"));
    let sink = Sink {
        auto_approve: true,
        ..Default::default()
    };
    h.service
        .handle(
            Harness::inbound("telegram", Some("42"), "secret plan on telegram"),
            &sink,
        )
        .await;
    h.service
        .handle(
            Harness::inbound("slack", Some("42"), "hello from slack"),
            &sink,
        )
        .await;
    assert!(!h.sent(1).contains("secret plan"), "{}", h.sent(1));
    assert_eq!(h.store.list_sessions().await.unwrap().len(), 2);
}

#[tokio::test]
async fn idle_sessions_are_pruned_and_reload_with_their_history() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("hi"));
    h.server.push(Scripted::text("welcome back"));
    h.say("remember the word pelican").await;
    assert_eq!(h.service.sessions().prune_idle().await, 0, "not idle yet");
    h.clock.set(h.clock.now() + chrono::Duration::hours(2));
    assert_eq!(h.service.sessions().prune_idle().await, 1);
    assert!(h.service.sessions().is_empty().await);
    assert_eq!(answer(&h.say("what was the word?").await), "welcome back");
    assert!(h.sent(1).contains("pelican"));
}

#[tokio::test]
async fn a_context_overflow_is_compacted_into_a_summary_and_retried_once() {
    let h = Harness::new().await;
    for n in 0..7 {
        h.server.push(Scripted::text(format!("answer {n}")));
    }
    for n in 0..7 {
        h.say(&format!("question {n}")).await;
    }
    h.server.push(Scripted::context_length_exceeded());
    h.server
        .push(Scripted::text("SUMMARY: questions 0 to 1 were asked."));
    h.server.push(Scripted::text("fits now"));
    let sink = Sink {
        auto_approve: true,
        ..Default::default()
    };
    let reply = h
        .service
        .handle(Harness::inbound("terminal", None, "question 7"), &sink)
        .await;
    assert_eq!(answer(&reply), "fits now");
    assert_eq!(sink.compactions.lock().unwrap().len(), 1);

    let requests = h.server.requests();
    let overflowed = requests.len() - 3;
    let retried = requests.len() - 1;
    let before = requests[overflowed].body["messages"]
        .as_array()
        .unwrap()
        .len();
    let after = requests[retried].body["messages"].as_array().unwrap().len();
    assert!(after < before, "retried with less: {after} vs {before}");
    assert!(
        h.sent(retried).contains("SUMMARY: questions 0 to 1"),
        "the summary is in the conversation"
    );
    assert!(h.sent(retried).contains("question 7"));

    let turns = h.stored_turns().await;
    assert_eq!(turns[0]["kind"], "summary");
    assert_eq!(turns.last().unwrap()["state"], "completed");
    let daily = std::fs::read_dir(h.workspace.path().join("daily"))
        .unwrap()
        .count();
    assert_eq!(daily, 1, "the summary is also in the daily log");
}

#[tokio::test]
async fn compact_by_hand_summarizes_older_turns() {
    let h = Harness::new().await;
    for n in 0..7 {
        h.server.push(Scripted::text(format!("answer {n}")));
        h.say(&format!("question {n}")).await;
    }
    h.server.push(Scripted::text("SUMMARY by hand"));
    let reply = h.say("/compact").await;
    assert!(
        notice(&reply).contains("Compacted (summarize)"),
        "{reply:?}"
    );
    let turns = h.stored_turns().await;
    assert_eq!(turns.len(), 6, "a summary and the 5 recent turns");
    assert_eq!(turns[0]["kind"], "summary");
    assert!(notice(&h.say("/undo").await).contains("Undone"));
    assert_eq!(h.stored_turns().await.len(), 7);
}
