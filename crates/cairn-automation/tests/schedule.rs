//! The scheduling primitives through the real runner, the real routine
//! engine and a SQLite store, on a manual clock: `remember` delivers once at
//! its time, also across a restart; one-shot and recurring phrases; a
//! scheduled tool call; an `llm_prompt` (into the conversation, or one model
//! call of the fake LLM server for a channel); the output channel; cancel,
//! list and status.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::Arc;
use std::sync::LazyLock;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, AutoApprove, DenyAll, ToolStatus};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{AutonomyLevel, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::schedule::schedule_tools;
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_core::chat::ToolCall;
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::routine::RunStatus;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::Store;
use cairn_test_support::agent::Echo;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};

const SESSION: &str = "session-1";

struct Forbidden;

#[async_trait]
impl Tool for Forbidden {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("forbidden", RiskLevel::ReadOnly, "denied"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok("ran"))
    }
}

fn t0() -> DateTime<Utc> {
    // A Monday.
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

/// One process: the tools, the runner and an engine over the store at `url`.
struct Process {
    store: Store,
    runner: Arc<ToolRunner>,
    engine: RoutineEngine,
}

struct Fx {
    url: String,
    clock: Arc<FixedClock>,
    /// The provider routine actions call, when the test gives one.
    llm: Option<Arc<dyn LlmProvider>>,
    _dir: tempfile::TempDir,
}

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        Fx {
            url: format!("sqlite://{}/cairn.db", dir.path().display()),
            clock: Arc::new(FixedClock::new(t0())),
            llm: None,
            _dir: dir,
        }
    }

    /// Starts a process (again, after a "restart") over the same database.
    async fn start(&self, owner: &str) -> Process {
        let (store, _) = Store::open(&self.url).await.unwrap();
        let clock: Arc<dyn Clock> = self.clock.clone();
        let mut channels = ChannelSet::new();
        channels.insert_inbox("desk");
        let notifier = Notifier::new(store.clone(), Arc::new(channels), NotifySettings::default());
        let link = RunnerLink::new();
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Echo)).unwrap();
        registry.register(Arc::new(Forbidden)).unwrap();
        for tool in schedule_tools(
            cairn_automation::routines::service::RoutineService::new(
                store.clone(),
                Arc::clone(&clock),
                "ada",
                chrono_tz::Europe::Paris,
            ),
            Arc::clone(&link),
            notifier.clone(),
        ) {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            deny: vec!["forbidden".into()],
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        link.attach(&runner);
        let mut actions =
            AgentActions::new(store.clone(), std::env::temp_dir(), Arc::clone(&clock)).with_tools(
                Arc::clone(&runner),
                ToolContext::new(std::env::temp_dir(), "routines").with_clock(Arc::clone(&clock)),
            );
        if let Some(llm) = &self.llm {
            actions = actions.with_llm(Arc::clone(llm), Arc::clone(llm));
        }
        let settings = EngineSettings::new(owner, chrono_tz::Europe::Paris);
        let engine = RoutineEngine::new(
            store.clone(),
            clock,
            Arc::new(actions),
            Some(notifier),
            settings,
        );
        Process {
            store,
            runner,
            engine,
        }
    }

    /// Moves the clock to `at` and lets `p`'s engine fire what is due.
    async fn at(&self, p: &Process, at: DateTime<Utc>) {
        self.clock.set(at);
        p.engine.tick(at).await.unwrap();
        p.engine.idle().await;
    }
}

/// The person in the conversation, approving what they are asked.
struct Person;

#[async_trait::async_trait]
impl cairn_agent::runner::Approver for Person {
    async fn approve(
        &self,
        _: &cairn_agent::runner::ApprovalRequest,
    ) -> cairn_agent::runner::ApprovalAnswer {
        cairn_agent::runner::ApprovalAnswer::Yes
    }
    fn person_present(&self) -> bool {
        true
    }
}

impl Process {
    /// A call the person approves when asked.
    async fn call(&self, name: &str, args: Value) -> (ToolStatus, Value) {
        self.call_with(name, args, &Person).await
    }

    async fn call_with(
        &self,
        name: &str,
        args: Value,
        approver: &dyn cairn_agent::runner::Approver,
    ) -> (ToolStatus, Value) {
        // The scheduling tools read time from the clock they were built with.
        let ctx = ToolContext::new(std::env::temp_dir(), SESSION);
        let call = ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: args,
        };
        let result = self.runner.run(&call, &ctx, approver).await;
        (result.status, body(&result.content))
    }

    /// What the conversation gets next (and marks it taken).
    async fn conversation(&self, now: DateTime<Utc>) -> Vec<String> {
        self.store
            .take_conversation_notices(SESSION, now)
            .await
            .unwrap()
            .iter()
            .map(|n| n.conversation_text())
            .collect()
    }
}

/// The JSON inside the runner's frame (or the text as a string).
fn body(content: &str) -> Value {
    let start = content.find('{');
    let end = content.rfind('}');
    match (start, end) {
        (Some(s), Some(e)) if e > s => {
            serde_json::from_str(&content[s..=e]).unwrap_or(json!(content))
        }
        _ => json!(content),
    }
}

#[tokio::test]
async fn remember_in_10m_is_delivered_at_10_minutes_once_across_a_restart() {
    let fx = Fx::new();
    let first = fx.start("proc-a").await;
    let (status, out) = first
        .call(
            "remember",
            json!({"what": "check the deploy", "when": "in 10m"}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["schedule_type"], "once");
    assert_eq!(out["run_at"], "2026-11-23T12:10:00Z");
    assert_eq!(out["output_channel"], "conversation");
    assert!(out["routine"].as_str().unwrap().starts_with("remind-"));

    fx.at(&first, t0() + Duration::minutes(9)).await;
    assert!(
        first.conversation(fx.clock.now()).await.is_empty(),
        "not yet"
    );
    drop(first);

    // The process stops and another starts on the same database.
    let second = fx.start("proc-b").await;
    fx.at(&second, t0() + Duration::minutes(10)).await;
    fx.at(&second, t0() + Duration::minutes(30)).await;
    fx.at(&second, t0() + Duration::hours(5)).await;

    // While the person is away it waits, unread, in the inbox.
    let inbox = second.store.inbox("ada", false, 10).await.unwrap();
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0].title, "[REMINDER] check the deploy");
    assert_eq!(inbox[0].created_at, t0() + Duration::minutes(10));

    let notices = second.conversation(fx.clock.now()).await;
    assert_eq!(notices, ["[REMINDER] check the deploy\ncheck the deploy"]);
    assert!(second.conversation(fx.clock.now()).await.is_empty(), "once");
    let routines = second.store.list_routines(Some("ada")).await.unwrap();
    let runs = second.store.list_runs(routines[0].id, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Ok);
    assert!(
        !routines[0].spec.enabled,
        "a one-shot is done after its fire"
    );
}

#[tokio::test]
async fn phrases_in_english_and_french_become_once_or_recurring_jobs() {
    let fx = Fx::new();
    let p = fx.start("proc-a").await;
    // Europe/Paris is UTC+1 in November.
    for (when, tool, expected) in [
        ("tomorrow at 9am", "remember", "2026-11-24T08:00:00Z"),
        ("demain à 9h", "remember", "2026-11-24T08:00:00Z"),
        ("dans 1h30", "remember", "2026-11-23T13:30:00Z"),
        ("next monday at 10", "remember", "2026-11-30T09:00:00Z"),
        (
            "2026-12-01T09:00:00Z",
            "schedule_once",
            "2026-12-01T09:00:00Z",
        ),
    ] {
        let (status, out) = p
            .call(tool, json!({"what": "x", "prompt": "x", "when": when}))
            .await;
        assert_eq!(status, ToolStatus::Success, "{when}: {out}");
        assert_eq!(out["schedule_type"], "once", "{when}");
        assert_eq!(out["run_at"], expected, "{when}");
    }
    for (when, next) in [
        ("at 9am and 5pm", "2026-11-23T16:00:00Z"),
        ("every other day", "2026-11-23T23:00:00Z"),
        ("on the 1st of every month", "2026-11-30T23:00:00Z"),
        ("tous les jours à 9h", "2026-11-24T08:00:00Z"),
        ("0 9 * * 1-5", "2026-11-24T08:00:00Z"),
    ] {
        let (status, out) = p
            .call("schedule_cron", json!({"cron": when, "prompt": "tick"}))
            .await;
        assert_eq!(status, ToolStatus::Success, "{when}: {out}");
        assert_eq!(out["schedule_type"], "cron", "{when}");
        assert_eq!(out["next_run_at"], next, "{when}");
    }
    // Understood in part: the error says what was and was not understood.
    let (status, out) = p
        .call("remember", json!({"what": "x", "when": "tomorrow morning"}))
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    let text = out.to_string();
    assert!(text.contains("understood \\\"tomorrow\\\""), "{text}");
    assert!(text.contains("\\\"morning\\\""), "{text}");
    // The wrong tool for the phrase says which one to use.
    let (_, out) = p
        .call(
            "schedule_once",
            json!({"when": "every day at 9am", "prompt": "x"}),
        )
        .await;
    assert!(out.to_string().contains("schedule_cron"), "{out}");
    let (_, out) = p
        .call("schedule_cron", json!({"cron": "in 5m", "prompt": "x"}))
        .await;
    assert!(out.to_string().contains("schedule_once"), "{out}");
    // Every job is a routine.
    let listed = p.store.list_routines(Some("ada")).await.unwrap();
    assert_eq!(listed.len(), 10);
}

#[tokio::test]
async fn a_scheduled_tool_call_runs_unattended_and_reports_back_here() {
    let fx = Fx::new();
    let p = fx.start("proc-a").await;
    // What will run unattended is approved now, by the person, or not at all.
    let (status, _) = p
        .call_with(
            "schedule_once",
            json!({"when": "in 1h", "action_type": "tool_call", "tool_name": "echo"}),
            &DenyAll,
        )
        .await;
    assert_eq!(status, ToolStatus::Declined);
    assert!(p.store.list_routines(Some("ada")).await.unwrap().is_empty());
    let (status, out) = p
        .call(
            "schedule_cron",
            json!({"cron": "every 5 minutes", "action_type": "tool_call", "tool_name": "echo",
                   "tool_params": {"text": "pong"}, "label": "ping", "max_runs": 2}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["tool_name"], "echo");
    assert_eq!(out["max_runs"], 2);
    let job = out["job_id"].as_str().unwrap().to_string();
    for minutes in [5, 10, 15, 20] {
        fx.at(&p, t0() + Duration::minutes(minutes)).await;
    }
    let notices = p.conversation(fx.clock.now()).await;
    assert_eq!(notices.len(), 2, "max_runs = 2: {notices:?}");
    assert!(notices[0].contains("echo: pong"), "{notices:?}");
    let (_, status) = p.call("schedule_status", json!({"job_id": job})).await;
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(status["run_count"], 2);
    assert_eq!(status["runs"].as_array().unwrap().len(), 2);

    // A denied tool or an unknown one cannot be scheduled.
    let (s, out) = p
        .call(
            "schedule_once",
            json!({"when": "in 1h", "action_type": "tool_call", "tool_name": "forbidden"}),
        )
        .await;
    assert_eq!(s, ToolStatus::InvalidArguments);
    assert!(out.to_string().contains("denied by policy"), "{out}");
    let (s, out) = p
        .call(
            "schedule_once",
            json!({"when": "in 1h", "action_type": "tool_call", "tool_name": "ech"}),
        )
        .await;
    assert_eq!(s, ToolStatus::InvalidArguments);
    assert!(
        out.to_string().contains("echo"),
        "suggests the closest: {out}"
    );
}

/// Recurring work needs the person: `schedule_cron` and a repeating
/// `remember` are refused where nobody can approve (an API client, a rule
/// approving everything) and are writes the person is asked about; a
/// one-shot reminder is not.
#[tokio::test]
async fn recurring_work_is_refused_where_nobody_can_approve() {
    let fx = Fx::new();
    let p = fx.start("proc-a").await;
    let recurring = [
        (
            "schedule_cron",
            json!({"cron": "every 5 minutes", "prompt": "tick"}),
        ),
        (
            "schedule_cron",
            json!({"cron": "*/5 * * * *", "action_type": "llm_prompt", "prompt": "tick"}),
        ),
        (
            "remember",
            json!({"what": "stretch", "when": "every day at 9am", "action": "llm_prompt"}),
        ),
    ];
    for (tool, args) in recurring {
        for approver in [&DenyAll as &dyn cairn_agent::runner::Approver, &AutoApprove] {
            let (status, out) = p.call_with(tool, args.clone(), approver).await;
            assert_eq!(status, ToolStatus::Denied, "{tool}: {out}");
            assert!(out.to_string().contains("nobody can approve"), "{out}");
        }
    }
    assert!(p.store.list_routines(Some("ada")).await.unwrap().is_empty());
    let (status, out) = p
        .call_with(
            "remember",
            json!({"what": "tea", "when": "in 5m"}),
            &DenyAll,
        )
        .await;
    assert_eq!(
        status,
        ToolStatus::Success,
        "a one-shot needs nobody: {out}"
    );
}

#[tokio::test]
async fn an_output_channel_sends_there_and_an_unknown_one_is_refused() {
    let fx = Fx::new();
    let p = fx.start("proc-a").await;
    let (status, out) = p
        .call(
            "schedule_once",
            json!({"when": "in 1m", "prompt": "stand up", "output_channel": "desk"}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["output_channel"], "desk");
    fx.at(&p, t0() + Duration::minutes(1)).await;
    assert!(p.conversation(fx.clock.now()).await.is_empty());
    let inbox = p.store.inbox("ada", false, 10).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].channel, "desk");

    let (status, out) = p
        .call(
            "schedule_once",
            json!({"when": "in 1m", "prompt": "x", "output_channel": "slak"}),
        )
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert!(out.to_string().contains("no output channel named"), "{out}");
    assert!(
        out.to_string().contains("desk"),
        "lists the channels: {out}"
    );
}

#[tokio::test]
async fn jobs_are_listed_by_status_and_cancelled() {
    let fx = Fx::new();
    let p = fx.start("proc-a").await;
    let (_, soon) = p
        .call("remember", json!({"what": "tea", "when": "in 5m"}))
        .await;
    let (_, later) = p
        .call(
            "remember",
            json!({"what": "call mum", "when": "every sunday at 6pm"}),
        )
        .await;
    fx.at(&p, t0() + Duration::minutes(5)).await;
    let (_, list) = p.call("schedule_list", json!({})).await;
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(list["active"], 1);
    assert_eq!(list["completed"], 1);
    assert_eq!(list["jobs"][0]["job_id"], later["job_id"], "active first");
    let (_, done) = p
        .call("schedule_list", json!({"status": "completed"}))
        .await;
    assert_eq!(done["jobs"][0]["job_id"], soon["job_id"]);
    assert_eq!(done["jobs"][0]["run_count"], 1);

    // Cancelling is the person's to approve: a rule approving everything
    // (background work, a routine's allowed_tools) is not them.
    let (status, out) = p
        .call_with(
            "schedule_cancel",
            json!({"job_id": later["job_id"]}),
            &AutoApprove,
        )
        .await;
    assert_eq!(status, ToolStatus::Denied, "{out}");
    assert!(out.to_string().contains("nobody can approve"), "{out}");
    let (_, list) = p.call("schedule_list", json!({})).await;
    assert_eq!(list["total"], 2, "still there: {list}");

    let (status, out) = p
        .call("schedule_cancel", json!({"job_id": later["job_id"]}))
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["status"], "cancelled");
    let (status, out) = p
        .call("schedule_status", json!({"job_id": later["job_id"]}))
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert!(out.to_string().contains("no scheduled job"), "{out}");
    let (_, list) = p.call("schedule_list", json!({})).await;
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn an_llm_prompt_is_a_prompt_in_the_conversation_or_one_model_call_for_a_channel() {
    let server = FakeLlmServer::start().await.unwrap();
    let mut fx = Fx::new();
    fx.llm = Some(build_provider(&server.openai_settings()).unwrap());
    let p = fx.start("proc-a").await;

    // Into the conversation: the agent gets the prompt, with its tools, when it fires.
    let (status, out) = p
        .call(
            "schedule_once",
            json!({"when": "in 1m", "action_type": "llm_prompt",
                   "prompt": "summarize my unread mail", "label": "mail digest"}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["action_type"], "llm_prompt");
    assert_eq!(out["output_channel"], "conversation");
    fx.at(&p, t0() + Duration::minutes(1)).await;
    assert_eq!(
        p.conversation(fx.clock.now()).await,
        ["[SCHEDULED PROMPT] mail digest\nsummarize my unread mail"]
    );
    assert!(server.requests().is_empty(), "no model call of its own");

    // To a channel: one model call per fire; its reply is what is sent.
    let (status, out) = p
        .call(
            "schedule_cron",
            json!({"cron": "every day at 9am", "action_type": "llm_prompt",
                   "prompt": "check the weather in Lyon", "label": "weather",
                   "output_channel": "desk"}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["action_type"], "llm_prompt");
    assert_eq!(out["next_run_at"], "2026-11-24T08:00:00Z");
    server.push(Scripted::text("Rain at 5pm: take an umbrella."));
    server.push(Scripted::text("ROUTINE_OK"));
    fx.at(&p, t0() + Duration::hours(20)).await;
    fx.at(&p, t0() + Duration::hours(44)).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one call per fire");
    assert!(requests[0].raw_body.contains("check the weather in Lyon"));
    let inbox = p.store.inbox("ada", false, 10).await.unwrap();
    let desk: Vec<_> = inbox.iter().filter(|n| n.channel == "desk").collect();
    assert_eq!(desk.len(), 1, "ROUTINE_OK sends nothing: {inbox:?}");
    assert_eq!(desk[0].body, "Rain at 5pm: take an umbrella.");
    assert!(
        desk[0].title.ends_with(" needs attention"),
        "{}",
        desk[0].title
    );

    // Both are listed as what they were asked to be.
    let (_, list) = p.call("schedule_list", json!({})).await;
    let kinds: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["action_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["llm_prompt", "llm_prompt"], "{list}");
    let (_, job) = p
        .call("schedule_status", json!({"job_id": out["job_id"]}))
        .await;
    assert_eq!(job["run_count"], 2, "{job}");
}
