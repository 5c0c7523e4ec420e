//! The agent's schedule operations (`routine_pause`, `routine_resume`,
//! `routine_backfill`, `routine_next`) over a real SQLite store, through the
//! policy gate and the runner: writes ask, cairn's own routines are refused.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_agent::policy::{AutonomyLevel, PolicyGate, ToolPolicyConfig};
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver, ToolRunner, ToolStatus};
use cairn_agent::tools::{RiskLevel, ToolContext, ToolRegistry};
use cairn_automation::routines::ops_tools::routine_ops_tools;
use cairn_automation::routines::service::RoutineService;
use cairn_core::chat::ToolCall;
use cairn_core::clock::ManualClock;
use cairn_core::routine::{Routine, RoutineSpec, RunStatus, SpecFormat};
use cairn_store::Store;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

/// Says yes and remembers what it was asked: a person (`.1`), or a rule
/// answering where nobody is (a routine's allowed_tools, background work).
struct Yes(Mutex<Vec<(String, RiskLevel)>>, bool);

impl Default for Yes {
    fn default() -> Self {
        Yes(Mutex::default(), true)
    }
}

#[async_trait]
impl Approver for Yes {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.0
            .lock()
            .unwrap()
            .push((request.tool.clone(), request.risk));
        ApprovalAnswer::Yes
    }
    fn person_present(&self) -> bool {
        self.1
    }
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 7, 12, 0, 0).unwrap()
}

struct Setup {
    store: Store,
    runner: ToolRunner,
    approver: Yes,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    setup_with(&ToolPolicyConfig::default(), Yes::default()).await
}

async fn setup_with(policy: &ToolPolicyConfig, approver: Yes) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let service = RoutineService::new(
        store.clone(),
        Arc::new(ManualClock::new(now())),
        "alice",
        chrono_tz::UTC,
    );
    let mut registry = ToolRegistry::new();
    for tool in routine_ops_tools(service) {
        registry.register(tool).unwrap();
    }
    // Supervised autonomy by default: write calls ask.
    let gate = PolicyGate::new(policy);
    Setup {
        store,
        runner: ToolRunner::new(Arc::new(registry), Arc::new(gate)),
        approver,
        _dir: dir,
    }
}

impl Setup {
    async fn routine(&self, yaml: &str) -> Routine {
        let spec = RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap();
        spec.validate().unwrap();
        let mut r = Routine::new(spec, "alice", now());
        r.runtime.next_fire_at = Some(Utc.with_ymd_and_hms(2026, 3, 8, 9, 0, 0).unwrap());
        self.store.create_routine(&r).await.unwrap();
        r
    }

    async fn call(&self, name: &str, args: Value) -> (ToolStatus, String) {
        let call = ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: args,
        };
        let result = self
            .runner
            .run(&call, &ToolContext::new("/tmp", "s1"), &self.approver)
            .await;
        let body = result
            .content
            .split_once('\n')
            .and_then(|(_, rest)| rest.strip_suffix("\n</tool_output>"))
            .unwrap_or(&result.content)
            .to_string();
        (result.status, body)
    }

    async fn ok(&self, name: &str, args: Value) -> Value {
        let (status, body) = self.call(name, args).await;
        assert_eq!(status, ToolStatus::Success, "{body}");
        serde_json::from_str(&body).unwrap()
    }
}

#[tokio::test]
async fn pause_and_resume_ask_as_writes_and_record_the_agent() {
    let s = setup().await;
    let r = s
        .routine("name: report\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let out = s
        .ok(
            "routine_pause",
            json!({"name": "report", "note": "holiday"}),
        )
        .await;
    assert_eq!(out["paused"], "report");
    assert_eq!(out["by"], "the agent");
    assert_eq!(out["note"], "holiday");
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.paused.unwrap().by, "the agent");
    let out = s.ok("routine_resume", json!({"name": "report"})).await;
    assert_eq!(out["was_paused"], true);
    assert_eq!(
        out["catch_up"],
        "no slot was missed while paused; the next fires at 2026-03-08T09:00:00Z"
    );
    assert_eq!(
        *s.approver.0.lock().unwrap(),
        [
            ("routine_pause".to_string(), RiskLevel::Write),
            ("routine_resume".to_string(), RiskLevel::Write)
        ]
    );
    // Reading the next fires asks nothing.
    let out = s
        .ok("routine_next", json!({"name": "report", "count": 2}))
        .await;
    assert_eq!(out["next"][0]["fires_at"], "2026-03-08T09:00:00Z");
    assert_eq!(out["next"][1]["slot"], "2026-03-09T09:00:00Z");
    assert_eq!(s.approver.0.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn cairns_own_routines_are_off_limits_to_the_agent() {
    let s = setup().await;
    let r = s
        .routine("name: heartbeat\ntrigger: {type: cron, schedule: 'every 30m'}\naction: {type: system, task: heartbeat}\nguardrails: {catch_up: skip}\n")
        .await;
    for tool in ["routine_pause", "routine_resume"] {
        let (status, body) = s.call(tool, json!({"name": "heartbeat"})).await;
        assert_eq!(status, ToolStatus::Failed, "{tool}: {body}");
        assert!(
            body.contains("\"heartbeat\" is a built-in routine (cairn's own heartbeat)"),
            "{body}"
        );
    }
    assert!(
        s.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .runtime
            .paused
            .is_none()
    );
}

#[tokio::test]
async fn backfill_records_the_past_slots_once() {
    let s = setup().await;
    let r = s
        .routine("name: report\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let args =
        json!({"name": "report", "from": "2026-03-04T00:00:00Z", "to": "2026-03-06T12:00:00Z"});
    let out = s.ok("routine_backfill", args.clone()).await;
    assert_eq!(
        out["queued"],
        json!([
            "2026-03-04T09:00:00Z",
            "2026-03-05T09:00:00Z",
            "2026-03-06T09:00:00Z"
        ])
    );
    let runs = s.store.list_runs(r.id, 10).await.unwrap();
    assert!(
        runs.iter()
            .all(|r| r.status == RunStatus::Waiting && r.trigger_type == "backfill")
    );
    let out = s.ok("routine_backfill", args).await;
    assert_eq!(out["queued"], json!([]));
    assert_eq!(out["already_run"].as_array().unwrap().len(), 3);
    assert_eq!(out["already_run"][0]["status"], "waiting");
    let (status, body) = s
        .call(
            "routine_backfill",
            json!({"name": "report", "from": "yesterday", "to": "2026-03-06T12:00:00Z"}),
        )
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert!(body.contains("`from`"), "{body}");
}

#[tokio::test]
async fn where_nobody_can_approve_schedules_are_not_changed_even_under_full_autonomy() {
    let full = ToolPolicyConfig {
        autonomy: AutonomyLevel::Full,
        ..ToolPolicyConfig::default()
    };
    let s = setup_with(&full, Yes(Mutex::default(), false)).await;
    let r = s
        .routine("name: report\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: x}\n")
        .await;
    for (tool, args) in [
        ("routine_pause", json!({"name": "report", "note": "quiet"})),
        ("routine_resume", json!({"name": "report"})),
        (
            "routine_backfill",
            json!({"name": "report", "from": "2026-03-04T00:00:00Z", "to": "2026-03-06T12:00:00Z"}),
        ),
    ] {
        let (status, body) = s.call(tool, args).await;
        assert_eq!(status, ToolStatus::Denied, "{tool}: {body}");
        assert!(
            body.contains("nobody can approve") && body.contains(tool),
            "{body}"
        );
    }
    assert!(s.approver.0.lock().unwrap().is_empty());
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert!(stored.runtime.paused.is_none());
    assert!(s.store.list_runs(r.id, 10).await.unwrap().is_empty());
    // Reading the next fires changes nothing.
    s.ok("routine_next", json!({"name": "report"})).await;
}
