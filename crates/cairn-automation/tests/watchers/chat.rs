//! The whole path: the agent starts a watcher in a conversation, the
//! engine checks, and the `[WATCHER UPDATE]` reaches that conversation,
//! before its next model call or as a turn of its own.

use super::*;
use cairn_agent::chat::{ChatService, ChatSink, Inbound, Reply};
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use cairn_agent::{AgentLoop, HookRegistry, LoopConfig};
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_llm::{LlmProvider, build_provider};

/// The person at the terminal, approving what they are asked (starting a
/// watcher needs them there).
struct Person;

#[async_trait::async_trait]
impl Approver for Person {
    async fn approve(&self, _: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Yes
    }
    fn person_present(&self) -> bool {
        true
    }
}

struct Sink;

impl ChatSink for Sink {
    fn approver(&self) -> Option<&dyn Approver> {
        Some(&Person)
    }
}

/// A conversation on the fake LLM server whose tools include the
/// watcher tools of an engine over the same store.
struct Chat {
    server: FakeLlmServer,
    service: ChatService,
    engine: RoutineEngine,
    clock: Arc<FixedClock>,
    _dir: tempfile::TempDir,
}

impl Chat {
    async fn new(probe: impl Fn(u64) -> Result<String, String> + Send + Sync + 'static) -> Chat {
        let server = FakeLlmServer::start().await.unwrap();
        let provider: Arc<dyn LlmProvider> = build_provider(&server.openai_settings()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", dir.path().display()))
            .await
            .unwrap();
        let clock = Arc::new(FixedClock::new(t0()));
        let (engine, _watchers, runner) = process(
            &store,
            clock.clone(),
            Arc::new(probe),
            Arc::new(AtomicU64::new(0)),
            dir.path(),
            &[],
        );
        let agent = AgentLoop::new(
            provider,
            runner,
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        );
        let service = cairn_test_support::agent::chat_service(
            &store,
            clock.clone(),
            agent,
            dir.path(),
            Duration::from_secs(60),
        );
        Chat {
            server,
            service,
            engine,
            clock,
            _dir: dir,
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

    /// Moves the clock `secs` on and runs the engine's round.
    async fn check_after(&self, secs: i64) {
        self.clock
            .set(self.clock.now() + chrono::Duration::seconds(secs));
        self.engine.tick(self.clock.now()).await.unwrap();
        self.engine.idle().await;
    }
}

#[tokio::test]
async fn the_watcher_update_reaches_the_conversation_that_started_it() {
    let chat = Chat::new(|_| ok(json!({"status": "deploying"}))).await;
    let server = &chat.server;
    server.push_all([
        Scripted::tool_call(
            "watch_start",
            json!({"name": "probe", "interval": 5, "label": "deploy"}),
        ),
        Scripted::text("I'll tell you when the deploy changes."),
    ]);
    assert!(matches!(
        chat.say("watch the deploy").await,
        Reply::Answer(_)
    ));
    // The first check sets the baseline, which is told (on_change).
    chat.check_after(5).await;
    server.push(Scripted::text("The deploy is still deploying."));
    chat.say("anything new?").await;
    let requests = server.requests();
    let last = serde_json::to_string(&requests.last().unwrap().body["messages"]).unwrap();
    assert!(last.contains("[WATCHER UPDATE] watcher_id="), "{last}");
    assert!(last.contains("label=\\\"deploy\\\", tool=probe"), "{last}");
    assert!(
        last.contains("Check #1 (interval: 5s, 1 notification(s) so far, strategy: on_change)"),
        "{last}"
    );
    // The check itself made no model call: two turns, three requests.
    assert_eq!(requests.len(), 3);
}

/// The figure for the note: the LLM calls a watcher on a stable endpoint
/// causes, counted at the fake LLM server. The checks themselves call no
/// model; each update reaching the idle conversation is delivered as a
/// turn of its own (as `cairn chat` and the WebSocket poll do), one model
/// call each. `always` runs 200 checks, not 1,000: its conversation grows
/// a turn a check, and every later turn sends it all.
#[tokio::test]
async fn llm_calls_of_a_watcher_on_a_stable_endpoint() {
    let mut figures = Vec::new();
    for (strategy, checks) in [("on_change", 1000), ("on_error", 1000), ("always", 200)] {
        let chat = Chat::new(|_| ok(json!({"status_code": 200, "body": "OK"}))).await;
        chat.server.push_all([
            Scripted::tool_call(
                "watch_start",
                json!({"name": "probe", "interval": 5, "label": "API", "notify_when": strategy}),
            ),
            Scripted::text("Watching."),
        ]);
        assert!(matches!(chat.say("watch the API").await, Reply::Answer(_)));
        let before = chat.server.requests().len();
        assert_eq!(before, 2);
        for _ in 0..checks {
            chat.check_after(5).await;
            if chat.server.pending() == 0 {
                chat.server.push(Scripted::text("Noted."));
            }
            chat.service.deliver_notices("ada", "terminal", &Sink).await;
        }
        figures.push((strategy, checks, chat.server.requests().len() - before));
    }
    for (strategy, checks, calls) in &figures {
        println!("watcher figure: {strategy}: {calls} LLM call(s) over {checks} stable checks");
    }
    assert_eq!(figures.iter().map(|f| f.2).collect::<Vec<_>>(), [1, 0, 200]);
}
