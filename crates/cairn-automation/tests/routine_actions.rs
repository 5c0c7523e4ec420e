//! The routine action executor over a real store, a fake LLM over HTTP, a
//! tool runner with a supervised policy and a job scheduler.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{
    AutonomyLevel, JobScheduler, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner,
};
use cairn_automation::routines::action::{
    ActionExecutor, ActionOutcome, ActionRequest, FireContext, Notice,
};
use cairn_automation::routines::actions::{AgentActions, split_state};
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat};
use cairn_llm::testing::{FakeLlmServer, InstantProvider, Scripted};
use cairn_llm::{LlmError, LlmProvider, build_provider};
use cairn_store::Store;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap()
}

/// `ping`: read-only, the policy allows it.
struct Ping;
/// `danger`: dangerous, the supervised policy asks about it.
struct Danger;
/// `forbidden`: denied by a policy rule.
struct Forbidden;

macro_rules! tool {
    ($ty:ident, $name:literal, $risk:expr, $out:expr) => {
        #[async_trait]
        impl Tool for $ty {
            fn spec(&self) -> &ToolSpec {
                static SPEC: LazyLock<ToolSpec> =
                    LazyLock::new(|| ToolSpec::new($name, $risk, "test tool"));
                &SPEC
            }
            async fn execute(
                &self,
                args: Value,
                _: &ToolContext,
                _: &Authorized,
            ) -> Result<ToolOutput, ToolError> {
                Ok(ToolOutput::ok(format!("{} {args}", $out)))
            }
        }
    };
}
tool!(Ping, "ping", RiskLevel::ReadOnly, "pong");
tool!(
    Danger,
    "danger",
    RiskLevel::Dangerous,
    "did the risky thing"
);
tool!(
    Forbidden,
    "forbidden",
    RiskLevel::ReadOnly,
    "should not run"
);

struct Env {
    store: Store,
    workspace: tempfile::TempDir,
    _db: tempfile::TempDir,
    clock: Arc<dyn Clock>,
    runner: Arc<ToolRunner>,
}

impl Env {
    async fn new() -> Env {
        let db = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/cairn.db", db.path().display());
        let (store, _) = Store::open(&url).await.unwrap();
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Ping)).unwrap();
        registry.register(Arc::new(Danger)).unwrap();
        registry.register(Arc::new(Forbidden)).unwrap();
        let clock: Arc<dyn Clock> = Arc::new(FixedClock::new(t0()));
        for tool in cairn_automation::routines::tools::routine_tools(
            cairn_automation::routines::service::RoutineService::new(
                store.clone(),
                clock.clone(),
                "ada",
                chrono_tz::UTC,
            ),
            cairn_automation::routines::link::EngineLink::new(),
        ) {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            deny: vec!["forbidden".into()],
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        Env {
            store,
            workspace: tempfile::tempdir().unwrap(),
            _db: db,
            clock,
            runner,
        }
    }

    fn ctx(&self) -> ToolContext {
        ToolContext::new(self.workspace.path(), "unused").with_clock(self.clock.clone())
    }

    fn bare(&self) -> AgentActions {
        AgentActions::new(
            self.store.clone(),
            self.workspace.path(),
            self.clock.clone(),
        )
    }

    fn with_llm(&self, provider: Arc<dyn LlmProvider>) -> AgentActions {
        self.bare()
            .with_llm(provider.clone(), provider)
            .with_tools(self.runner.clone(), self.ctx())
    }

    fn scheduler(&self, provider: Arc<dyn LlmProvider>) -> Arc<JobScheduler> {
        Arc::new(
            JobScheduler::builder(
                self.store.clone(),
                provider,
                self.runner.clone(),
                self.ctx(),
            )
            .build(),
        )
    }

    /// The routine stored with a `running` run, as the engine leaves them.
    async fn request(&self, action_yaml: &str, payload: Option<Value>) -> ActionRequest {
        let yaml = format!(
            "name: watcher\ndescription: test\ntrigger: {{type: manual}}\naction: {action_yaml}\n"
        );
        let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
        let mut routine = Routine::new(spec, "ada", t0());
        routine.runtime.state = json!({"seen": 3});
        // Each request carries its own action; the stored row only anchors the run.
        match self.store.find_routine("ada", "watcher").await.unwrap() {
            Some(stored) => routine.id = stored.id,
            None => self.store.create_routine(&routine).await.unwrap(),
        }
        let run = RoutineRun {
            id: Uuid::now_v7(),
            routine_id: routine.id,
            trigger_type: "webhook".into(),
            trigger_detail: Some("POST /hooks/watcher".into()),
            scheduled_for: None,
            started_at: t0(),
            completed_at: None,
            status: RunStatus::Running,
            result_summary: None,
            tokens_used: None,
            job_id: None,
            owner: Some("test".into()),
            lease_until: Some(t0() + chrono::Duration::seconds(60)),
            notification_id: None,
            skip_reason: None,
            dedup_key: None,
            attempt: 1,
        };
        self.store.start_run(&run).await.unwrap();
        ActionRequest {
            routine: routine.into(),
            run_id: run.id,
            fire: FireContext {
                trigger_type: "webhook".into(),
                detail: Some("POST /hooks/watcher".into()),
                payload,
                scheduled_for: None,
            },
            cancel: CancellationToken::new(),
        }
    }

    fn state_md(&self) -> Option<String> {
        std::fs::read_to_string(self.workspace.path().join("routines/watcher/state.md")).ok()
    }
}

async fn fake() -> (FakeLlmServer, Arc<dyn LlmProvider>) {
    let server = FakeLlmServer::start().await.unwrap();
    let provider = build_provider(&server.openai_settings()).unwrap();
    (server, provider)
}

fn sent_text(server: &FakeLlmServer) -> String {
    let body = &server.requests()[0].body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn lightweight_routine_ok_is_ok_and_the_call_carries_prompt_files_state_and_payload() {
    let env = Env::new().await;
    let ws = env.workspace.path();
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    std::fs::write(ws.join("notes/todo.md"), "buy milk").unwrap();
    std::fs::write(ws.join("big.md"), "x".repeat(50_000)).unwrap();
    std::fs::create_dir_all(ws.join("routines/watcher")).unwrap();
    std::fs::write(ws.join("routines/watcher/state.md"), "last seen: item 7").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOPSECRET").unwrap();
    let escape = format!("../{}/secret.txt", outside.path().display());

    let (server, provider) = fake().await;
    server.push(Scripted::text("  ROUTINE_OK\n").with_usage(100, 2));
    let actions = env.with_llm(provider);
    let request = env
        .request(
            &format!(
                "{{type: lightweight, prompt: 'check the inbox', max_tokens: 300, \
                 context_paths: [notes/todo.md, missing.md, big.md, '{escape}', /etc/passwd]}}"
            ),
            Some(json!({"from": "bob", "subject": "hello"})),
        )
        .await;
    let outcome = actions.execute(request).await;

    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.tokens_used, Some(102));
    assert_eq!(outcome.state, None, "no state block: the JSON state stays");
    assert_eq!(server.requests().len(), 1, "exactly one LLM call");
    assert_eq!(server.requests()[0].body["max_tokens"], 300);
    let sent = sent_text(&server);
    for expected in [
        "check the inbox",
        "buy milk",
        "missing.md",
        "(missing",
        "cut at 16000 characters",
        "last seen: item 7",
        r#"{"seen":3}"#,
        "webhook",
        "POST /hooks/watcher",
        r#""subject":"hello""#,
    ] {
        assert!(sent.contains(expected), "`{expected}` not in:\n{sent}");
    }
    assert!(!sent.contains("TOPSECRET"), "{sent}");
    assert!(!sent.contains("root:"), "{sent}");
    assert_eq!(sent.matches("(refused").count(), 2, "{sent}");
}

#[tokio::test]
async fn lightweight_other_replies_need_attention_and_a_state_block_replaces_the_state() {
    let env = Env::new().await;
    let (server, provider) = fake().await;
    server.push(Scripted::text(
        "Bob wrote twice.\n```state\n{\"seen\": 5}\n```\nCheck it.",
    ));
    server.push(Scripted::text("ROUTINE_OK\n```state\nplain notes\n```"));
    let actions = env.with_llm(provider);

    let outcome = actions
        .execute(env.request("{type: lightweight, prompt: p}", None).await)
        .await;
    assert_eq!(outcome.status, RunStatus::Attention);
    assert_eq!(
        outcome.summary.as_deref(),
        Some("Bob wrote twice.\nCheck it.")
    );
    assert_eq!(outcome.state, Some(json!({"seen": 5})));
    assert_eq!(env.state_md().as_deref(), Some("{\"seen\": 5}"));

    // ROUTINE_OK plus a (non-JSON) state block: still ok, the file changes,
    // the JSON state does not.
    let outcome = actions
        .execute(env.request("{type: lightweight, prompt: p}", None).await)
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.state, None);
    assert_eq!(env.state_md().as_deref(), Some("plain notes"));
}

#[test]
fn state_blocks_are_split_only_when_closed() {
    assert_eq!(
        split_state("a\n```state\nx\ny\n```\nb"),
        ("a\nb".to_string(), Some("x\ny".to_string()))
    );
    assert_eq!(
        split_state("a\n```state\nx"),
        ("a\n```state\nx".to_string(), None)
    );
    assert_eq!(split_state("ROUTINE_OK"), ("ROUTINE_OK".to_string(), None));
}

#[tokio::test]
async fn lightweight_without_an_llm_fails_saying_so() {
    let env = Env::new().await;
    let outcome = env
        .bare()
        .execute(env.request("{type: lightweight, prompt: p}", None).await)
        .await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let summary = outcome.summary.unwrap();
    assert!(
        summary.starts_with("no LLM provider is configured; this routine's `lightweight` action needs one (set CAIRN_LLM_PROVIDER"),
        "{summary}"
    );
}

#[tokio::test]
async fn lightweight_llm_errors_and_cost_guard_refusals_fail_the_run_with_the_reason() {
    let env = Env::new().await;
    let provider = Arc::new(InstantProvider::new());
    provider.push_error(LlmError::CostLimit {
        message: "daily budget of $1.00 reached ($1.02 spent)".into(),
    });
    let actions = env.with_llm(provider);
    let outcome = actions
        .execute(env.request("{type: lightweight, prompt: p}", None).await)
        .await;
    assert_eq!(
        outcome,
        ActionOutcome::failed("daily budget of $1.00 reached ($1.02 spent)")
    );

    let (server, provider) = fake().await;
    server.push(Scripted::auth_error());
    let outcome = env
        .with_llm(provider)
        .execute(env.request("{type: lightweight, prompt: p}", None).await)
        .await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let summary = outcome.summary.unwrap();
    assert!(summary.contains("rejected the credentials"), "{summary}");
}

#[tokio::test]
async fn tool_call_runs_through_the_policy_gate() {
    let env = Env::new().await;
    let actions = env.bare().with_tools(env.runner.clone(), env.ctx());

    let ok = actions
        .execute(
            env.request("{type: tool_call, tool: ping, params: {n: 1}}", None)
                .await,
        )
        .await;
    assert_eq!(ok.status, RunStatus::Ok, "{ok:?}");
    assert!(ok.summary.unwrap().contains(r#"pong {"n":1}"#));

    let asked = actions
        .execute(env.request("{type: tool_call, tool: danger}", None).await)
        .await;
    assert_eq!(asked.status, RunStatus::Attention);
    assert_eq!(
        asked.summary.as_deref(),
        Some(
            "`danger` needs approval and nobody is there to give it; add it to allowed_tools if this routine may run it"
        )
    );

    let allowed = actions
        .execute(
            env.request(
                "{type: tool_call, tool: danger, allowed_tools: [danger]}",
                None,
            )
            .await,
        )
        .await;
    assert_eq!(allowed.status, RunStatus::Ok, "{allowed:?}");
    assert!(allowed.summary.unwrap().contains("did the risky thing"));

    // Deny stays deny, listed or not.
    let denied = actions
        .execute(
            env.request(
                "{type: tool_call, tool: forbidden, allowed_tools: [forbidden]}",
                None,
            )
            .await,
        )
        .await;
    assert_eq!(denied.status, RunStatus::Failed);
    let summary = denied.summary.unwrap();
    assert!(
        summary.contains("`forbidden`") && summary.contains("denied"),
        "{summary}"
    );
    assert!(!summary.contains("should not run"), "{summary}");

    let unknown = actions
        .execute(env.request("{type: tool_call, tool: nope}", None).await)
        .await;
    assert_eq!(unknown.status, RunStatus::Failed);
}

#[tokio::test]
async fn an_unattended_run_cannot_change_routines_even_with_the_tool_allowed() {
    let env = Env::new().await;
    let actions = env.bare().with_tools(env.runner.clone(), env.ctx());
    let run = actions
        .execute(
            env.request(
                "{type: tool_call, tool: routine_delete, params: {name: watcher}, allowed_tools: [routine_delete]}",
                None,
            )
            .await,
        )
        .await;
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    let summary = run.summary.unwrap();
    assert!(summary.contains("nobody can approve"), "{summary}");
    assert!(
        env.store
            .find_routine("ada", "watcher")
            .await
            .unwrap()
            .is_some(),
        "the routine is still there"
    );
}

#[tokio::test]
async fn notification_is_ok_with_a_notice() {
    let env = Env::new().await;
    let actions = env.bare();
    let request = env
        .request("{type: notification, message: stretch, title: Break}", None)
        .await;
    let future = actions.execute(request);
    // Boxed per run and moved at its size: the other actions' futures are
    // boxed where they are awaited, not carried by a notification's run.
    let size = std::mem::size_of_val(&*future);
    assert!(
        size <= 512,
        "a notification's action future is {size} bytes"
    );
    let outcome = future.await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert_eq!(outcome.summary.as_deref(), Some("stretch"));
    assert_eq!(
        outcome.notice,
        Some(Notice {
            title: Some("Break".into()),
            body: "stretch".into()
        })
    );
}

#[tokio::test]
async fn full_job_runs_a_job_puts_it_on_the_run_and_judges_its_answer() {
    let env = Env::new().await;
    let (server, provider) = fake().await;
    server.push(Scripted::text("ROUTINE_OK").with_usage(10, 1));
    server.push(Scripted::text("Found 2 new issues.").with_usage(10, 4));
    let actions = env
        .with_llm(provider.clone())
        .with_jobs(env.scheduler(provider));

    let request = env
        .request(
            "{type: full_job, title: Triage, description: triage the issues, max_iterations: 4}",
            None,
        )
        .await;
    let run_id = request.run_id;
    let outcome = actions.execute(request).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.tokens_used, Some(11));
    let job_id = outcome.job_id.unwrap();
    assert_eq!(
        env.store.get_run(run_id).await.unwrap().unwrap().job_id,
        Some(job_id)
    );
    let job = env.store.get_job(job_id).await.unwrap().unwrap();
    assert_eq!(job.origin.as_deref(), Some("routine:watcher"));
    assert_eq!(job.max_iterations, 4);
    assert!(job.description.starts_with("triage the issues"));

    let outcome = actions
        .execute(
            env.request("{type: full_job, title: Triage, description: again}", None)
                .await,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Attention);
    assert_eq!(outcome.summary.as_deref(), Some("Found 2 new issues."));
}

#[tokio::test]
async fn full_job_declined_tools_need_attention_unless_allowed_and_denied_ones_fail() {
    let env = Env::new().await;
    let (server, provider) = fake().await;
    let actions = env
        .with_llm(provider.clone())
        .with_jobs(env.scheduler(provider));
    let job = |allowed: &str| format!("{{type: full_job, title: T, description: d{allowed}}}");

    server.push(Scripted::tool_call("danger", json!({})));
    server.push(Scripted::text("ROUTINE_OK"));
    let outcome = actions.execute(env.request(&job(""), None).await).await;
    assert_eq!(outcome.status, RunStatus::Attention, "{outcome:?}");
    assert!(outcome.summary.unwrap().starts_with(
        "`danger` needs approval and nobody is there to give it; add it to allowed_tools"
    ));
    assert!(outcome.job_id.is_some());

    server.push(Scripted::tool_call("danger", json!({})));
    server.push(Scripted::text("ROUTINE_OK"));
    let outcome = actions
        .execute(env.request(&job(", allowed_tools: [danger]"), None).await)
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");

    server.push(Scripted::tool_call("forbidden", json!({})));
    server.push(Scripted::text("ROUTINE_OK"));
    let outcome = actions
        .execute(
            env.request(&job(", allowed_tools: [forbidden]"), None)
                .await,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    assert!(outcome.summary.unwrap().contains("`forbidden`"));
}

#[tokio::test]
async fn full_job_is_cancelled_with_the_run() {
    let env = Env::new().await;
    let (server, provider) = fake().await;
    // The fake answers slowly enough for the cancel to land first.
    server.push(Scripted::text("late").with_delay(std::time::Duration::from_secs(30)));
    let actions = env
        .with_llm(provider.clone())
        .with_jobs(env.scheduler(provider));
    let request = env
        .request("{type: full_job, title: T, description: d}", None)
        .await;
    let cancel = request.cancel.clone();
    let run = tokio::spawn(async move { actions.execute(request).await });
    while server.requests().is_empty() {
        tokio::task::yield_now().await;
    }
    cancel.cancel();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    let job = env
        .store
        .get_job(outcome.job_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.state, cairn_agent::jobs::JobState::Cancelled);
}

#[tokio::test]
async fn lightweight_calls_the_cheap_provider_not_the_main_one() {
    let env = Env::new().await;
    let main = Arc::new(InstantProvider::new());
    let cheap = Arc::new(InstantProvider::new());
    cheap.push_text("ROUTINE_OK");
    let actions = env.bare().with_llm(main.clone(), cheap.clone());
    let outcome = actions
        .execute(env.request("{type: lightweight, prompt: p}", None).await)
        .await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert_eq!((main.calls(), cheap.calls()), (0, 1));
}
