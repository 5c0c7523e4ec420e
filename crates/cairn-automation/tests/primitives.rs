//! Execution primitives through the real runner and a SQLite store:
//! run_parallel (order, failures, approval, denial, nesting, per-tool
//! limit), the background task lifecycle, gating at launch, reaping after a
//! restart, and send_notification's fallback to the inbox.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, AutoApprove, DenyAll, ToolStatus};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{AutonomyLevel, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_automation::primitives::parallel::{MAX_SAME_TOOL, RunParallelTool};
use cairn_automation::primitives::send::SendNotificationTool;
use cairn_core::chat::ToolCall;
use cairn_core::clock::{Clock, FixedClock};
use cairn_store::{BackgroundTask, Store, TASK_INTERRUPTED, TaskStatus};
use cairn_test_support::agent::{Echo, Writer};
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use tokio::sync::Notify;

struct Boom;

#[async_trait]
impl Tool for Boom {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("boom", RiskLevel::ReadOnly, "fails"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed("boom".into()))
    }
}

/// Denied by the policy rule; counts runs (there must be none).
#[derive(Default)]
struct Forbidden(AtomicUsize);

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
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok("ran"))
    }
}

/// Runs until released (or cancelled); counts how many run at once.
#[derive(Default)]
struct Gate {
    release: Notify,
    now: AtomicUsize,
    max: AtomicUsize,
    cancelled: AtomicBool,
}

#[async_trait]
impl Tool for Gate {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("gate", RiskLevel::ReadOnly, "waits"));
        &SPEC
    }
    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        let running = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(running, Ordering::SeqCst);
        // Dropped unfinished = the runner stopped the call (cancellation).
        let mut guard = Running {
            gate: self,
            finished: false,
        };
        let outcome = if args["yield"].as_bool() == Some(true) {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            Ok(ToolOutput::ok("yielded"))
        } else {
            tokio::select! {
                () = self.release.notified() => Ok(ToolOutput::ok("released")),
                () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
            }
        };
        guard.finished = outcome.is_ok();
        outcome
    }
}

struct Running<'a> {
    gate: &'a Gate,
    finished: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.gate.now.fetch_sub(1, Ordering::SeqCst);
        if !self.finished {
            self.gate.cancelled.store(true, Ordering::SeqCst);
        }
    }
}

/// Approves, recording which tools it was asked about.
#[derive(Default)]
struct Recording(std::sync::Mutex<Vec<String>>);

#[async_trait]
impl cairn_agent::runner::Approver for Recording {
    async fn approve(
        &self,
        request: &cairn_agent::runner::ApprovalRequest,
    ) -> cairn_agent::runner::ApprovalAnswer {
        self.0.lock().unwrap().push(request.tool.clone());
        AutoApprove.approve(request).await
    }
}

struct Fx {
    store: Store,
    runner: Arc<ToolRunner>,
    tasks: Arc<BackgroundTasks>,
    writer: Arc<Writer>,
    forbidden: Arc<Forbidden>,
    gate: Arc<Gate>,
    notifier: Notifier,
    clock: Arc<FixedClock>,
    _db: tempfile::TempDir,
}

impl Fx {
    async fn new() -> Fx {
        let db = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
            .await
            .unwrap();
        Fx::over(store, db).await
    }

    async fn over(store: Store, db: tempfile::TempDir) -> Fx {
        let clock = Arc::new(FixedClock::new(
            Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap(),
        ));
        let link = RunnerLink::new();
        let tasks =
            BackgroundTasks::new(store.clone(), Arc::clone(&link), clock.clone(), "proc-test");
        let (writer, forbidden, gate) = (
            Arc::new(Writer::default()),
            Arc::new(Forbidden::default()),
            Arc::new(Gate::default()),
        );
        let mut channels = ChannelSet::new();
        channels.insert_inbox("inbox");
        let notifier = Notifier::new(store.clone(), Arc::new(channels), NotifySettings::default());
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Echo)).unwrap();
        registry.register(Arc::new(Boom)).unwrap();
        registry.register(writer.clone()).unwrap();
        registry.register(forbidden.clone()).unwrap();
        registry.register(gate.clone()).unwrap();
        registry
            .register(Arc::new(RunParallelTool::new(Arc::clone(&link))))
            .unwrap();
        registry
            .register(Arc::new(SendNotificationTool::new(notifier.clone(), "ada")))
            .unwrap();
        for tool in tasks.tools() {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            deny: vec!["forbidden".into()],
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        link.attach(&runner);
        Fx {
            store,
            runner,
            tasks,
            writer,
            forbidden,
            gate,
            notifier,
            clock,
            _db: db,
        }
    }

    fn ctx(&self) -> ToolContext {
        ToolContext::new(std::env::temp_dir(), "session-1")
            .with_thread("thread-1")
            .with_clock(self.clock.clone())
    }

    async fn call(&self, name: &str, args: Value) -> (ToolStatus, Value) {
        let call = ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: args,
        };
        let result = self.runner.run(&call, &self.ctx(), &DenyAll).await;
        (result.status, body(&result.content))
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
async fn run_parallel_keeps_order_reports_failures_and_runs_nothing_ungated() {
    let fx = Fx::new().await;
    let (status, out) = fx
        .call(
            "run_parallel",
            json!({"actions": [
                {"name": "echo", "params": {"text": "first"}},
                {"name": "boom"},
                {"name": "writer"},
                {"name": "forbidden"},
                {"name": "echo", "params": {"text": "last"}},
                {"name": "no_such_tool"},
            ]}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success);
    assert_eq!(out["total"], 6);
    assert_eq!(out["succeeded"], 2);
    assert_eq!(out["failed"], 4);
    let results = out["results"].as_array().unwrap();
    let indexes: Vec<u64> = results
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4, 5]);
    assert!(results[0]["data"].as_str().unwrap().contains("first"));
    assert_eq!(results[0]["success"], true);
    assert_eq!(results[1]["success"], false);
    assert!(results[1]["error"].as_str().unwrap().contains("boom"));
    assert_eq!(results[2]["status"], "requires_approval");
    assert_eq!(results[3]["status"], "denied");
    assert!(results[4]["data"].as_str().unwrap().contains("last"));
    assert_eq!(results[5]["status"], "unknown_tool");
    // Neither the approval-needing nor the denied action ran.
    assert_eq!(fx.writer.0.load(Ordering::SeqCst), 0);
    assert_eq!(fx.forbidden.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn run_parallel_cannot_nest_or_launch_background_tasks_and_checks_its_size() {
    let fx = Fx::new().await;
    let (_, out) = fx
        .call(
            "run_parallel",
            json!({"actions": [
                {"name": "run_parallel", "params": {"actions": [{"name": "echo"}]}},
                {"name": "background_run", "params": {"name": "echo"}},
            ]}),
        )
        .await;
    assert_eq!(out["succeeded"], 0);
    for r in out["results"].as_array().unwrap() {
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("cannot run inside run_parallel"),
            "{r}"
        );
    }
    let (status, _) = fx.call("run_parallel", json!({"actions": []})).await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    let many: Vec<Value> = (0..51).map(|_| json!({"name": "echo"})).collect();
    let (status, _) = fx.call("run_parallel", json!({"actions": many})).await;
    assert_eq!(status, ToolStatus::InvalidArguments);
}

#[tokio::test]
async fn run_parallel_respects_the_per_tool_limit() {
    let fx = Fx::new().await;
    let actions: Vec<Value> = (0..30)
        .map(|_| json!({"name": "gate", "params": {"yield": true}}))
        .collect();
    let (_, out) = fx.call("run_parallel", json!({"actions": actions})).await;
    assert_eq!(out["succeeded"], 30);
    let max = fx.gate.max.load(Ordering::SeqCst);
    assert!(max > 1, "actions ran one by one");
    assert!(max <= MAX_SAME_TOOL, "{max} ran at once");
}

#[tokio::test]
async fn a_background_task_runs_reports_and_waits() {
    let fx = Fx::new().await;
    let (status, run) = fx
        .call("background_run", json!({"name": "gate", "params": {}}))
        .await;
    assert_eq!(status, ToolStatus::Success, "{run}");
    let id = run["task_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("bg-") && id.len() == 11, "{id}");
    assert_eq!(run["tool_name"], "gate");
    assert_eq!(run["status"], "running");
    assert_eq!(run["started_at"], "2026-11-23T12:00:00Z");

    let stored = fx.store.get_background_task(&id).await.unwrap().unwrap();
    assert_eq!(stored.session_id, "session-1");
    assert_eq!(stored.thread_id.as_deref(), Some("thread-1"));

    let (_, st) = fx.call("background_status", json!({"task_id": id})).await;
    assert_eq!(st["status"], "running");
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 12).unwrap());
    let (_, st) = fx.call("background_status", json!({"task_id": id})).await;
    assert_eq!(st["elapsed_seconds"], 12.0);
    let (_, res) = fx.call("background_result", json!({"task_id": id})).await;
    assert_eq!(res["status"], "running");
    assert!(res["note"].as_str().unwrap().contains("still running"));
    let (_, list) = fx.call("background_list", json!({})).await;
    assert_eq!(
        (list["total"].as_u64(), list["running"].as_u64()),
        (Some(1), Some(1))
    );
    let (_, waited) = fx
        .call("background_wait", json!({"task_id": id, "timeout": 0}))
        .await;
    assert_eq!(waited["status"], "running");
    assert_eq!(waited["note"], "Timeout reached. Task is still running.");

    // Released: background_wait returns the result.
    let waiter = {
        let runner = Arc::clone(&fx.runner);
        let ctx = fx.ctx();
        let id = id.clone();
        tokio::spawn(async move {
            let call = ToolCall {
                id: "w".into(),
                name: "background_wait".into(),
                arguments: json!({"task_id": id}),
            };
            body(&runner.run(&call, &ctx, &DenyAll).await.content)
        })
    };
    // The waiter is parked before the release (notify_one keeps a permit anyway).
    fx.gate.release.notify_one();
    let waited = waiter.await.unwrap();
    assert_eq!(waited["status"], "completed", "{waited}");
    assert_eq!(waited["result"]["success"], true);
    assert!(
        waited["result"]["data"]
            .as_str()
            .unwrap()
            .contains("released")
    );
    let (_, res) = fx.call("background_result", json!({"task_id": id})).await;
    assert_eq!(res["status"], "completed");
    let (_, list) = fx.call("background_list", json!({})).await;
    assert_eq!(list["completed"], 1);
    // Its notice waits in the store for the conversation.
    assert!(fx.store.has_undelivered_tasks("session-1").await.unwrap());
    // Another conversation does not see it.
    let other = ToolContext::new(std::env::temp_dir(), "session-2");
    let call = ToolCall {
        id: "o".into(),
        name: "background_status".into(),
        arguments: json!({"task_id": id}),
    };
    assert_eq!(
        fx.runner.run(&call, &other, &DenyAll).await.status,
        ToolStatus::InvalidArguments
    );
}

#[tokio::test]
async fn cancel_really_cancels_and_sends_no_notice() {
    let fx = Fx::new().await;
    let (_, run) = fx.call("background_run", json!({"name": "gate"})).await;
    let id = run["task_id"].as_str().unwrap().to_string();
    // The task is running the tool before it is cancelled.
    while fx.gate.now.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let (_, out) = fx.call("background_cancel", json!({"task_id": id})).await;
    assert_eq!(out, json!({"task_id": id, "cancelled": true}));
    assert!(fx.tasks.wait(&id, Duration::from_secs(5)).await);
    assert!(
        fx.gate.cancelled.load(Ordering::SeqCst),
        "the tool saw its cancellation"
    );
    let (_, st) = fx.call("background_status", json!({"task_id": id})).await;
    assert_eq!(st["status"], "cancelled");
    let (_, again) = fx.call("background_cancel", json!({"task_id": id})).await;
    assert_eq!(again["cancelled"], false);
    assert!(!fx.store.has_undelivered_tasks("session-1").await.unwrap());
}

#[tokio::test]
async fn the_launched_call_is_gated_in_the_launching_turn() {
    let fx = Fx::new().await;
    // A tool that asks: declined now, nothing launched.
    let (status, _) = fx.call("background_run", json!({"name": "writer"})).await;
    assert_eq!(status, ToolStatus::Declined);
    // Denied: never launched.
    let (status, out) = fx
        .call("background_run", json!({"name": "forbidden"}))
        .await;
    assert_eq!(status, ToolStatus::Denied, "{out}");
    assert!(
        fx.store
            .list_background_tasks("session-1")
            .await
            .unwrap()
            .is_empty()
    );
    // Approved at launch (the person is asked about `writer` itself): it runs unattended.
    let call = ToolCall {
        id: "a".into(),
        name: "background_run".into(),
        arguments: json!({"name": "writer"}),
    };
    let asked = Recording::default();
    let result = fx.runner.run(&call, &fx.ctx(), &asked).await;
    assert_eq!(asked.0.lock().unwrap().as_slice(), ["writer"]);
    assert_eq!(result.status, ToolStatus::Success);
    let id = body(&result.content)["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fx.tasks.wait(&id, Duration::from_secs(5)).await);
    assert_eq!(fx.writer.0.load(Ordering::SeqCst), 1);
    assert_eq!(fx.forbidden.0.load(Ordering::SeqCst), 0);
    // Background tools cannot launch themselves.
    let (status, _) = fx
        .call("background_run", json!({"name": "background_list"}))
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
}

#[tokio::test]
async fn a_task_interrupted_by_a_restart_is_reported_failed() {
    let db = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", db.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    // The previous process launched a task and died; its lease ran out.
    let then = Utc.with_ymd_and_hms(2026, 11, 23, 11, 0, 0).unwrap();
    store
        .create_background_task(&BackgroundTask {
            id: "bg-deadbeef".into(),
            owner: "proc-dead".into(),
            lease_until: Some(then),
            session_id: "session-1".into(),
            thread_id: None,
            tool: "gate".into(),
            params: json!({}),
            status: TaskStatus::Running,
            result: None,
            error: None,
            started_at: then,
            finished_at: None,
            delivered_at: None,
        })
        .await
        .unwrap();
    store.close().await;
    let (store, _) = Store::open(&url).await.unwrap();
    let fx = Fx::over(store, db).await;
    assert_eq!(fx.tasks.start().await.unwrap(), ["bg-deadbeef"]);
    let (_, st) = fx
        .call("background_status", json!({"task_id": "bg-deadbeef"}))
        .await;
    assert_eq!(st["status"], "failed");
    assert_eq!(st["error"], TASK_INTERRUPTED);
    let notices = fx
        .store
        .take_undelivered_tasks("session-1", fx.clock.now())
        .await
        .unwrap();
    let text = cairn_agent::chat::notices::notices_text(&notices);
    assert!(
        text.starts_with("[BACKGROUND TASK FAILED] task_id=bg-deadbeef, tool=gate"),
        "{text}"
    );
    assert!(text.ends_with("Error: interrupted"), "{text}");
    fx.tasks.shutdown().await;
}

#[tokio::test]
async fn send_notification_falls_back_to_the_inbox_and_says_so() {
    let fx = Fx::new().await;
    let (status, out) = fx
        .call(
            "send_notification",
            json!({"channel": "slack_ops", "message": "deploy done", "title": "Deploy",
                   "priority": "critical", "tags": ["deploy"], "structured_data": {"v": "2.3.1"}}),
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["fallback"], "inbox");
    assert!(
        out["note"]
            .as_str()
            .unwrap()
            .contains("no channel named \"slack_ops\"")
    );
    let inbox = fx.store.inbox("ada", true, 10).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].body, "deploy done");
    assert_eq!(inbox[0].title, "Deploy");
    assert_eq!(inbox[0].tags, ["deploy"]);
    assert_eq!(inbox[0].data, Some(json!({"v": "2.3.1"})));
    let (_, out) = fx
        .call(
            "send_notification",
            json!({"channel": "inbox", "message": "hi"}),
        )
        .await;
    assert_eq!(out["status"], "delivered");
    let (status, _) = fx
        .call(
            "send_notification",
            json!({"channel": "inbox", "message": "hi", "priority": "meh"}),
        )
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    let _ = &fx.notifier;
}

#[tokio::test(start_paused = true)]
async fn background_wait_defaults_to_60_s_and_outlives_the_call_limit() {
    let fx = Fx::new().await;
    let (_, run) = fx.call("background_run", json!({"name": "gate"})).await;
    let id = run["task_id"].as_str().unwrap().to_string();
    let start = tokio::time::Instant::now();
    let (status, out) = fx.call("background_wait", json!({"task_id": id})).await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["status"], "running");
    assert_eq!(start.elapsed().as_secs(), 60);
    // A long wait outlives the runner's usual 120 s limit; here it ends when
    // the task reaches its own one-hour limit and fails as timed out.
    let start = tokio::time::Instant::now();
    let (status, out) = fx
        .call("background_wait", json!({"task_id": id, "timeout": 99999}))
        .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(start.elapsed().as_secs(), 3600 - 60);
    assert_eq!(out["status"], "failed", "{out}");
    assert_eq!(out["result"]["status"], "timed_out", "{out}");
}
