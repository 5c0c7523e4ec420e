//! `/api/background`: tasks of every conversation listed newest first, one
//! with its result, and cancel: here for a task of this process, 409 for
//! one that ended or runs in another process.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{Authorized, DenyAll};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{AutonomyLevel, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::background::BackgroundTasks;
use cairn_core::chat::ToolCall;
use cairn_core::clock::{Clock, SystemClock};
use cairn_store::{BackgroundTask, TaskStatus};
use chrono::Duration as Span;
use serde_json::{Value, json};
use support::{TestGateway, error_code, settings};

/// A read-only tool that runs until its call is cancelled.
#[derive(Default)]
struct Hold {
    started: AtomicBool,
    cancelled: AtomicBool,
}

#[async_trait]
impl Tool for Hold {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("hold", RiskLevel::ReadOnly, "runs until cancelled"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        self.started.store(true, Ordering::SeqCst);
        // The runner stops a cancelled call by dropping it, or the call sees
        // its token: either way the guard records the stop.
        let _stopped = Stopped(&self.cancelled);
        ctx.cancel.cancelled().await;
        Err(ToolError::Cancelled)
    }
}

/// Marks the call stopped when it goes away unfinished.
struct Stopped<'a>(&'a AtomicBool);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn row(id: &str, owner: &str, status: TaskStatus, secs: i64) -> BackgroundTask {
    let started = SystemClock.now() - Span::seconds(100 - secs);
    let ended = status != TaskStatus::Running;
    BackgroundTask {
        id: id.into(),
        owner: owner.into(),
        lease_until: Some(started + Span::seconds(600)),
        session_id: "ada:terminal".into(),
        thread_id: None,
        tool: "http_get".into(),
        params: json!({"url": "https://example.com"}),
        status,
        result: ended.then(|| json!({"success": true, "data": "page"})),
        error: None,
        started_at: started,
        finished_at: ended.then_some(started + Span::seconds(1)),
        delivered_at: None,
    }
}

#[tokio::test]
async fn tasks_are_listed_shown_and_cancelled_only_where_they_run() {
    // This daemon's tasks run a `hold` tool through a runner of its own.
    let parts = std::cell::OnceCell::new();
    let link = RunnerLink::new();
    let hold = Arc::new(Hold::default());
    let gw = TestGateway::start_with(settings(), |g| {
        let tasks = BackgroundTasks::new(
            g.store().clone(),
            Arc::clone(&link),
            Arc::new(SystemClock),
            "gateway-proc",
        );
        let mut registry = ToolRegistry::new();
        registry.register(hold.clone()).unwrap();
        for tool in tasks.tools() {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Full,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        link.attach(&runner);
        let _ = parts.set((runner, Arc::clone(&tasks)));
        g.with_background(tasks)
    })
    .await;
    let (runner, tasks) = parts.get().unwrap();

    // Two tasks of another process, one of them ended.
    gw.store
        .create_background_task(&row("bg-00000001", "other-proc", TaskStatus::Completed, 1))
        .await
        .unwrap();
    gw.store
        .create_background_task(&row("bg-00000002", "other-proc", TaskStatus::Running, 2))
        .await
        .unwrap();
    // One launched here.
    let call = ToolCall {
        id: "c1".into(),
        name: "background_run".into(),
        arguments: json!({"name": "hold"}),
    };
    let ctx = ToolContext::new(gw.workspace.path(), "ada:ws").with_clock(Arc::new(SystemClock));
    let launched = runner.run(&call, &ctx, &DenyAll).await;
    let mine = launched
        .content
        .split('"')
        .find(|s| s.starts_with("bg-"))
        .unwrap()
        .to_string();
    while !hold.started.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }

    let listed: Vec<Value> = gw
        .get("/api/background")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = listed
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str(), "bg-00000002", "bg-00000001"]);
    let limited: Vec<Value> = gw
        .get("/api/background?limit=1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
    let (status, _) = error_code(gw.get("/api/background?limit=0").send().await.unwrap()).await;
    assert_eq!(status, 400);

    let one: Value = gw
        .get("/api/background/bg-00000001")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["status"], "completed");
    assert_eq!(one["result"]["data"], "page");
    assert_eq!(one["params"]["url"], "https://example.com");
    let (status, _) = error_code(gw.get("/api/background/bg-ffffffff").send().await.unwrap()).await;
    assert_eq!(status, 404);

    // Ended: 409. Running elsewhere: 409 naming the process. Unknown: 404.
    let cancel = |id: &str| gw.post(&format!("/api/background/{id}/cancel")).send();
    let response = cancel("bg-00000001").await.unwrap();
    assert_eq!(error_code(response).await, (409, "conflict".to_string()));
    let response = cancel("bg-00000002").await.unwrap();
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("other-proc"),
        "{body}"
    );
    assert_eq!(cancel("bg-ffffffff").await.unwrap().status(), 404);

    // Running here: cancelled, and the tool sees it.
    let response = cancel(&mine).await.unwrap();
    assert_eq!(response.status(), 200);
    let view: Value = response.json().await.unwrap();
    assert_eq!(view["status"], "cancelled");
    assert!(tasks.wait(&mine, Duration::from_secs(5)).await);
    assert!(hold.cancelled.load(Ordering::SeqCst));
    gw.stop().await;
}

#[tokio::test]
async fn cancel_without_background_tasks_here_is_503_and_the_token_is_needed() {
    let gw = TestGateway::start().await;
    gw.store
        .create_background_task(&row("bg-00000002", "other-proc", TaskStatus::Running, 2))
        .await
        .unwrap();
    let (status, _) = error_code(
        gw.post("/api/background/bg-00000002/cancel")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 503);
    let (status, _) =
        error_code(gw.http.get(gw.url("/api/background")).send().await.unwrap()).await;
    assert_eq!(status, 401);
    gw.stop().await;
}
