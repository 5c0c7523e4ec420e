//! `/api/watchers` over a real gateway: create (the policy decides what may
//! be watched), list, one with its history, pause, resume, delete.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::sync::Arc;
use std::sync::LazyLock;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{AutonomyLevel, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_automation::primitives::RunnerLink;
use cairn_automation::primitives::watch::Watchers;
use serde_json::{Value, json};
use support::{TestGateway, error_code, settings};

/// `probe`: read-only, so the supervised policy lets it run unattended.
struct Probe;

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> =
            LazyLock::new(|| ToolSpec::new("probe", RiskLevel::ReadOnly, "answers"));
        &SPEC
    }
    async fn execute(
        &self,
        _: Value,
        _: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok("{\"up\": true}"))
    }
}

/// A gateway whose watchers ask a policy that knows `probe` and `writer`.
async fn gateway() -> TestGateway {
    TestGateway::start_with(settings(), |g| {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Probe)).unwrap();
        registry
            .register(Arc::new(support::Writer(Default::default())))
            .unwrap();
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        let link = RunnerLink::new();
        link.attach(&runner);
        // The runner must outlive the gateway: the link holds it weakly.
        std::mem::forget(Arc::clone(&runner));
        let watchers = Watchers::new(g.routines(), link);
        g.with_watchers(watchers)
    })
    .await
}

#[tokio::test]
async fn watchers_are_created_listed_shown_paused_resumed_and_deleted() {
    let gw = gateway().await;
    let created = gw
        .post("/api/watchers")
        .json(&json!({"name": "probe", "interval": 60, "label": "up?", "notify_when": "on_error"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let id = created["watcher_id"].as_str().unwrap().to_string();
    assert_eq!(created["status"], "running");
    assert_eq!(created["interval"], 60);
    assert_eq!(created["notify_when"], "on_error");
    assert_eq!(created["routine"], format!("watch-{id}"));

    // It is a routine like any other.
    let routine: Value = gw
        .get(&format!("/api/routines/watch-{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(routine["action"], "watch");
    assert_eq!(routine["trigger"], "cron every 60s");

    let list: Value = gw
        .get("/api/watchers")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["watcher_id"], id.as_str());

    let shown: Value = gw
        .get(&format!("/api/watchers/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["check_count"], 0);
    assert_eq!(shown["history"], json!([]));

    let paused: Value = gw
        .post(&format!("/api/watchers/{id}/pause"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["next_check_at"], Value::Null);
    let resumed: Value = gw
        .post(&format!("/api/watchers/{id}/resume"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resumed["status"], "running");
    assert!(resumed["next_check_at"].is_string());

    let deleted = gw
        .http
        .delete(gw.url(&format!("/api/watchers/{id}")))
        .bearer_auth(&gw.token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let gone = gw.get(&format!("/api/watchers/{id}")).send().await.unwrap();
    assert_eq!(error_code(gone).await, (404, "not_found".to_string()));
    gw.stop().await;
}

#[tokio::test]
async fn what_needs_approval_or_is_malformed_is_refused() {
    let gw = gateway().await;
    let writer = gw
        .post("/api/watchers")
        .json(&json!({"name": "writer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(writer).await, (422, "not_watchable".to_string()));
    for body in [
        json!({"name": "probe", "interval": 2}),
        json!({"name": "probe", "notify_when": "sometimes"}),
        json!({"name": "probe", "notify_when": "on_threshold", "notify_config": {"expression": "x >"}}),
        json!({"name": "nope"}),
        json!({"interval": 30}),
    ] {
        let response = gw.post("/api/watchers").json(&body).send().await.unwrap();
        assert_eq!(error_code(response).await.0, 422, "{body}");
    }
    let list: Value = gw
        .get("/api/watchers")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list, json!([]));
    gw.stop().await;
}

#[tokio::test]
async fn without_its_own_service_the_gateway_asks_the_chat_agents_policy() {
    // The test gateway's agent knows only `writer`, which needs approval.
    let gw = TestGateway::start().await;
    let response = gw
        .post("/api/watchers")
        .json(&json!({"name": "writer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(response).await,
        (422, "not_watchable".to_string())
    );
    let doc: Value = gw
        .get("/api/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/api/watchers",
        "/api/watchers/{id}",
        "/api/watchers/{id}/pause",
        "/api/watchers/{id}/resume",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is documented");
    }
    gw.stop().await;
}
