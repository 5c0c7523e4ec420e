//! The agent's routine tools over a real SQLite store, run the only way a
//! tool runs: through the policy gate and the runner.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_agent::policy::{AutonomyLevel, PolicyGate, ToolPolicyConfig};
use cairn_agent::runner::{
    ApprovalAnswer, ApprovalRequest, Approver, Check, ToolRunner, ToolStatus,
};
use cairn_agent::tools::{RiskLevel, ToolContext, ToolRegistry};
use cairn_automation::routines::service::RoutineService;
use cairn_automation::routines::tools::{RoutineFirer, routine_tools};
use cairn_core::chat::ToolCall;
use cairn_core::clock::ManualClock;
use cairn_core::routine::{Routine, RoutineRun, RunStatus};
use cairn_store::Store;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

/// Records fires and answers with a fixed run id.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(String, Option<Value>)>>,
}

#[async_trait]
impl RoutineFirer for Recorder {
    async fn fire(&self, routine: &Routine, payload: Option<Value>) -> Result<Uuid, String> {
        self.calls
            .lock()
            .unwrap()
            .push((routine.spec.name.clone(), payload));
        Ok(Uuid::from_u128(7))
    }
}

/// A person (or, with `present: false`, a rule) giving one answer, and
/// remembering every request.
struct Answers {
    answer: ApprovalAnswer,
    present: bool,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Answers {
    fn person(answer: ApprovalAnswer) -> Answers {
        Answers {
            answer,
            present: true,
            asked: Mutex::default(),
        }
    }
}

#[async_trait]
impl Approver for Answers {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        self.answer
    }
    fn person_present(&self) -> bool {
        self.present
    }
}

struct Setup {
    store: Store,
    runner: ToolRunner,
    firer: Arc<Recorder>,
    approver: Answers,
    _dir: tempfile::TempDir,
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}

/// Supervised autonomy (the default: write and dangerous calls ask), a
/// person answering yes.
async fn setup() -> Setup {
    setup_with(
        AutonomyLevel::Supervised,
        Answers::person(ApprovalAnswer::Yes),
    )
    .await
}

async fn setup_with(autonomy: AutonomyLevel, approver: Answers) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let firer = Arc::new(Recorder::default());
    let mut registry = ToolRegistry::new();
    for tool in routine_tools(
        RoutineService::new(
            store.clone(),
            Arc::new(ManualClock::new(now())),
            "alice",
            chrono_tz::Europe::Paris,
        ),
        firer.clone(),
    ) {
        registry.register(tool).unwrap();
    }
    let gate = PolicyGate::new(&ToolPolicyConfig {
        autonomy,
        ..ToolPolicyConfig::default()
    });
    Setup {
        store,
        runner: ToolRunner::new(Arc::new(registry), Arc::new(gate)),
        firer,
        approver,
        _dir: dir,
    }
}

impl Setup {
    /// The call's status and the tool's text (the runner's framing removed).
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

    fn asked(&self) -> Vec<(String, RiskLevel)> {
        self.approver
            .asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.tool.clone(), r.risk))
            .collect()
    }
}

fn reminder(name: &str, schedule: &str) -> Value {
    json!({"routine": {
        "name": name,
        "trigger": {"type": "cron", "schedule": schedule},
        "action": {"type": "notification", "message": "stand up"}
    }})
}

#[tokio::test]
async fn create_stores_the_routine_with_its_next_slot_once_approved() {
    let s = setup().await;
    let out = s
        .ok("routine_create", reminder("standup", "0 9 * * *"))
        .await;
    // 09:00 in Paris (the user's zone) on the next day is 08:00 UTC.
    assert_eq!(out["created"], "standup");
    assert_eq!(out["next_fire_at"], "2026-03-02T08:00:00Z");
    let stored = s
        .store
        .find_routine("alice", "standup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.runtime.next_fire_at,
        Some(Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap())
    );
    // Even a reminder acts on the person's behalf later: they approve it.
    assert_eq!(
        s.asked(),
        vec![("routine_create".to_string(), RiskLevel::Write)]
    );

    // The name is taken now.
    let (status, body) = s
        .call("routine_create", reminder("standup", "0 10 * * *"))
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments, "{body}");
    assert!(body.contains("already exists"), "{body}");
}

#[tokio::test]
async fn full_job_and_tool_call_routines_ask_for_approval() {
    let s = setup().await;
    let job = json!({"routine": {
        "name": "triage",
        "trigger": {"type": "manual"},
        "action": {"type": "full_job", "title": "triage", "description": "triage the inbox"}
    }});
    s.ok("routine_create", job.clone()).await;
    let tool = json!({"routine": {
        "name": "triage",
        "trigger": {"type": "manual"},
        "action": {"type": "tool_call", "tool": "shell", "params": {"command": "ls"}}
    }});
    s.ok("routine_update", tool).await;
    assert_eq!(
        s.asked(),
        vec![
            ("routine_create".to_string(), RiskLevel::Dangerous),
            ("routine_update".to_string(), RiskLevel::Dangerous)
        ]
    );
}

#[tokio::test]
async fn every_problem_is_listed_with_its_path_and_nothing_is_written() {
    let s = setup().await;
    let bad = json!({"routine": {
        "name": "bad name!",
        "trigger": {"type": "cron", "schedule": "0 9 * * *"},
        "action": {"type": "lightweight", "prompt": ""},
        "guardrails": {"max_concurrent": 0}
    }});
    let (status, body) = s.call("routine_create", bad).await;
    assert_eq!(status, ToolStatus::InvalidArguments, "{body}");
    for path in ["name:", "action.prompt:", "guardrails.max_concurrent:"] {
        assert!(body.contains(path), "{path} missing from {body}");
    }
    assert!(body.contains("nothing written"), "{body}");

    let (status, body) = s
        .call("routine_create", reminder("late", "every tuesdy"))
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert!(body.contains("trigger.schedule:"), "{body}");

    let past = json!({"routine": {
        "name": "past",
        "trigger": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "action": {"type": "notification", "message": "hi"}
    }});
    let (_, body) = s.call("routine_create", past).await;
    assert!(
        body.contains("trigger.at: ") && body.contains("not in the future"),
        "{body}"
    );

    let regex = json!({"routine": {
        "name": "rx",
        "trigger": {"type": "event", "pattern": "deploy("},
        "action": {"type": "notification", "message": "hi"}
    }});
    let (_, body) = s.call("routine_create", regex).await;
    assert!(
        body.contains("trigger.pattern") && body.contains("deploy("),
        "{body}"
    );

    assert!(
        s.store
            .list_routines(Some("alice"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn update_replaces_by_name_and_recomputes_the_slot() {
    let s = setup().await;
    s.ok("routine_create", reminder("standup", "0 9 * * *"))
        .await;
    let out = s
        .ok("routine_update", reminder("standup", "30 7 * * *"))
        .await;
    assert_eq!(out["changed"], true);
    assert_eq!(out["next_fire_at"], "2026-03-02T06:30:00Z");
    let stored = s
        .store
        .find_routine("alice", "standup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.runtime.next_fire_at,
        Some(Utc.with_ymd_and_hms(2026, 3, 2, 6, 30, 0).unwrap())
    );

    let (status, body) = s
        .call("routine_update", reminder("stanup", "0 9 * * *"))
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert!(body.contains("did you mean \"standup\"?"), "{body}");
}

#[tokio::test]
async fn list_runs_fire_and_delete() {
    let s = setup().await;
    s.ok("routine_create", reminder("standup", "0 9 * * *"))
        .await;
    let routine = s
        .store
        .find_routine("alice", "standup")
        .await
        .unwrap()
        .unwrap();
    for minute in 0..3 {
        let at = now() + chrono::Duration::minutes(minute);
        let run = RoutineRun {
            id: Uuid::now_v7(),
            routine_id: routine.id,
            trigger_type: "manual".into(),
            trigger_detail: None,
            scheduled_for: None,
            started_at: at,
            completed_at: Some(at),
            status: if minute == 2 {
                RunStatus::Attention
            } else {
                RunStatus::Ok
            },
            result_summary: Some(format!("run {minute}")),
            tokens_used: None,
            job_id: None,
            notification_id: None,
            skip_reason: None,
            dedup_key: None,
            attempt: 1,
            owner: None,
            lease_until: None,
        };
        s.store.start_run(&run).await.unwrap();
    }

    let list = s.ok("routine_list", json!({})).await;
    assert_eq!(list[0]["name"], "standup");
    assert_eq!(list[0]["enabled"], true);
    assert_eq!(list[0]["trigger"], "cron 0 9 * * *");
    assert_eq!(list[0]["next_fire_at"], "2026-03-02T08:00:00Z");
    assert_eq!(list[0]["next_fire_local"], "Mon 2026-03-02 09:00 CET");
    assert_eq!(list[0]["last_status"], "attention");

    let runs = s
        .ok("routine_runs", json!({"name": "standup", "limit": 2}))
        .await;
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["result_summary"], "run 2", "newest first");
    assert_eq!(runs[0]["status"], "attention");
    assert!(runs[0].get("scheduled_for").is_some() && runs[0].get("skip_reason").is_some());

    let fired = s
        .ok(
            "routine_fire",
            json!({"name": "standup", "payload": {"x": 1}}),
        )
        .await;
    assert_eq!(fired["run_id"], Uuid::from_u128(7).to_string());
    assert_eq!(
        *s.firer.calls.lock().unwrap(),
        vec![("standup".to_string(), Some(json!({"x": 1})))]
    );

    let (status, body) = s.call("routine_fire", json!({"name": "standpu"})).await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert!(body.contains("did you mean \"standup\"?"), "{body}");

    s.ok("routine_delete", json!({"name": "standup"})).await;
    assert!(
        s.store
            .find_routine("alice", "standup")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(s.ok("routine_list", json!({})).await, json!([]));
}

/// Stores `spec` (a routine-file JSON) for alice, as `cairn routine apply` would.
async fn stored(s: &Setup, spec: Value) -> Routine {
    let spec: cairn_core::routine::RoutineSpec = serde_json::from_value(spec).unwrap();
    let mut routine = Routine::new(spec, "alice", now());
    routine.runtime.next_fire_at =
        cairn_automation::routines::define::prepare(&routine.spec, chrono_tz::Europe::Paris, now())
            .unwrap();
    s.store.create_routine(&routine).await.unwrap();
    routine
}

async fn spec_now(s: &Setup, name: &str) -> cairn_core::routine::RoutineSpec {
    s.store
        .find_routine("alice", name)
        .await
        .unwrap()
        .unwrap()
        .spec
}

#[tokio::test]
async fn changing_a_reminder_or_a_light_check_asks_and_a_denial_changes_nothing() {
    let s = setup_with(
        AutonomyLevel::Supervised,
        Answers::person(ApprovalAnswer::No),
    )
    .await;
    let standup = stored(&s, reminder("standup", "0 9 * * *")["routine"].clone()).await;
    let check = stored(
        &s,
        json!({"name": "disk", "trigger": {"type": "cron", "schedule": "0 * * * *"},
               "action": {"type": "lightweight", "prompt": "Is the disk full?"}}),
    )
    .await;

    let (status, body) = s
        .call("routine_update", reminder("standup", "* * * * *"))
        .await;
    assert_eq!(status, ToolStatus::Declined, "{body}");
    let quiet = json!({"routine": {"name": "disk", "enabled": false,
        "trigger": {"type": "cron", "schedule": "0 * * * *"},
        "action": {"type": "lightweight", "prompt": "Say ROUTINE_OK."}}});
    let (status, body) = s.call("routine_update", quiet).await;
    assert_eq!(status, ToolStatus::Declined, "{body}");
    let (status, body) = s.call("routine_delete", json!({"name": "disk"})).await;
    assert_eq!(status, ToolStatus::Declined, "{body}");
    assert_eq!(
        s.asked(),
        vec![
            ("routine_update".to_string(), RiskLevel::Write),
            ("routine_update".to_string(), RiskLevel::Write),
            ("routine_delete".to_string(), RiskLevel::Write),
        ]
    );
    assert_eq!(spec_now(&s, "standup").await, standup.spec);
    assert_eq!(spec_now(&s, "disk").await, check.spec);
}

#[tokio::test]
async fn built_in_routines_cannot_be_rewritten_disabled_or_deleted_by_the_agent() {
    use cairn_automation::routines::system::{SystemRoutine, ensure_system_routines};
    let s = setup().await;
    ensure_system_routines(
        &s.store,
        "alice",
        &[
            SystemRoutine::every("heartbeat", "beat", std::time::Duration::from_secs(1800)),
            SystemRoutine::every(
                "memory-hygiene",
                "tidy",
                std::time::Duration::from_secs(86_400),
            ),
        ],
        chrono_tz::Europe::Paris,
        now(),
    )
    .await
    .unwrap();
    let heartbeat = spec_now(&s, "heartbeat").await;
    let hygiene = spec_now(&s, "memory-hygiene").await;

    let rewrite = json!({"routine": {"name": "heartbeat",
        "trigger": {"type": "cron", "schedule": "* * * * *"},
        "action": {"type": "tool_call", "tool": "shell", "params": {"command": "id"}}}});
    let mut disable = json!({"routine": serde_json::to_value(&heartbeat).unwrap()});
    disable["routine"]["enabled"] = json!(false);
    for args in [rewrite, disable] {
        let (status, body) = s.call("routine_update", args).await;
        assert_eq!(status, ToolStatus::Failed, "{body}");
        assert!(
            body.contains("built-in routine") && body.contains("heartbeat.enabled"),
            "the refusal names the setting: {body}"
        );
    }
    let (status, body) = s
        .call("routine_delete", json!({"name": "memory-hygiene"}))
        .await;
    assert_eq!(status, ToolStatus::Failed, "{body}");
    assert!(body.contains("memory.hygiene_enabled"), "{body}");

    // Nor can the agent make a routine of its own run a built-in task.
    let copy = json!({"routine": {"name": "beat2", "trigger": {"type": "manual"},
        "action": {"type": "system", "task": "heartbeat"}}});
    let (status, body) = s.call("routine_create", copy).await;
    assert_eq!(status, ToolStatus::Failed, "{body}");
    assert!(body.contains("system"), "{body}");

    assert_eq!(spec_now(&s, "heartbeat").await, heartbeat);
    assert_eq!(spec_now(&s, "memory-hygiene").await, hygiene);
    assert!(
        s.store
            .find_routine("alice", "beat2")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn where_nobody_can_approve_routines_are_not_changed_even_under_full_autonomy() {
    // A rule answering yes (a routine's allowed_tools, background work), not a person.
    let rule = Answers {
        answer: ApprovalAnswer::Yes,
        present: false,
        asked: Mutex::default(),
    };
    let s = setup_with(AutonomyLevel::Full, rule).await;
    let before = stored(&s, reminder("standup", "0 9 * * *")["routine"].clone()).await;
    for (tool, args) in [
        ("routine_update", reminder("standup", "* * * * *")),
        ("routine_delete", json!({"name": "standup"})),
        ("routine_create", reminder("other", "0 9 * * *")),
    ] {
        let (status, body) = s.call(tool, args.clone()).await;
        assert_eq!(status, ToolStatus::Denied, "{tool}: {body}");
        assert!(
            body.contains("nobody can approve") && body.contains(tool),
            "{body}"
        );
        // The gate's answer without asking (run_parallel, scheduled tool calls) agrees.
        assert!(
            matches!(s.runner.check(tool, &args, "s1"), Check::Denied(..)),
            "{tool}"
        );
    }
    assert!(s.asked().is_empty());
    assert_eq!(spec_now(&s, "standup").await, before.spec);
    assert!(
        s.store
            .find_routine("alice", "other")
            .await
            .unwrap()
            .is_none()
    );
    // Reading and firing are not changes.
    s.ok("routine_list", json!({})).await;
    s.ok("routine_fire", json!({"name": "standup"})).await;

    // With the person there, full autonomy runs it without asking.
    let s = setup_with(AutonomyLevel::Full, Answers::person(ApprovalAnswer::No)).await;
    stored(&s, reminder("standup", "0 9 * * *")["routine"].clone()).await;
    s.ok("routine_update", reminder("standup", "0 10 * * *"))
        .await;
    assert!(s.asked().is_empty());
}

#[tokio::test]
async fn webhook_secrets_never_reach_the_model_and_stars_keep_the_stored_one() {
    let s = setup().await;
    let hook = |name: &str, secret: &str| {
        json!({"routine": {"name": name,
            "trigger": {"type": "webhook", "path": name, "secret": secret},
            "action": {"type": "notification", "message": "deployed"}}})
    };
    let mut seen = Vec::new();
    seen.push(s.ok("routine_create", hook("deploys", "hook-S3CR")).await);
    seen.push(s.ok("routine_list", json!({})).await);
    seen.push(s.ok("routine_runs", json!({"name": "deploys"})).await);
    // The model does not know the secret: "***" keeps it.
    seen.push(s.ok("routine_update", hook("deploys", "***")).await);
    for output in &seen {
        assert!(!output.to_string().contains("S3CR"), "{output}");
    }
    match spec_now(&s, "deploys").await.trigger {
        cairn_core::routine::Trigger::Webhook { secret, .. } => {
            assert_eq!(secret.as_deref(), Some("hook-S3CR"));
        }
        other => panic!("{other:?}"),
    }
    let (status, body) = s.call("routine_create", hook("copy", "***")).await;
    assert_eq!(status, ToolStatus::InvalidArguments, "{body}");
    assert!(body.contains("trigger.secret"), "{body}");
}

/// The one rule `PUT /api/routines/{name}` follows: a new name in the spec
/// renames the routine (its history kept), unless that name is taken.
#[tokio::test]
async fn update_renames_when_given_the_current_name() {
    let s = setup().await;
    s.ok("routine_create", reminder("standup", "0 9 * * *"))
        .await;
    s.ok("routine_create", reminder("other", "0 9 * * *")).await;
    let id = s
        .store
        .find_routine("alice", "standup")
        .await
        .unwrap()
        .unwrap()
        .id;
    let mut args = reminder("daily-standup", "0 9 * * *");
    args["name"] = json!("standup");
    let out = s.ok("routine_update", args).await;
    assert_eq!(out["updated"], "daily-standup");
    assert_eq!(out["renamed_from"], "standup");
    let renamed = s
        .store
        .find_routine("alice", "daily-standup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.id, id, "the same routine, renamed");
    assert!(
        s.store
            .find_routine("alice", "standup")
            .await
            .unwrap()
            .is_none()
    );

    let mut taken = reminder("other", "0 9 * * *");
    taken["name"] = json!("daily-standup");
    let (status, body) = s.call("routine_update", taken).await;
    assert_eq!(status, ToolStatus::InvalidArguments, "{body}");
    assert!(body.contains("already exists"), "{body}");
}
