//! Routines of an agent other than `main` (`agent: family`): each action
//! runs as that agent (its model, its tools under its policy, its
//! workspace, its identity); an agent that is not configured is refused
//! when the routine is written and fails the run, never running as main.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::path::Path;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use cairn_agent::prompt::{PromptContext, RuntimeInfo};
use cairn_agent::runner::Authorized;
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, LoopConfig, PolicyGate, ToolPolicyConfig, ToolRegistry,
    ToolRunner,
};
use cairn_automation::routines::action::{ActionExecutor, ActionRequest, FireContext};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::as_agent::RoutineAgent;
use cairn_automation::routines::service::{Actor, RoutineService, ServiceError};
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat};
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::Store;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap()
}

/// `where`: says which workspace it ran in.
struct Where;
/// `danger`: main's only.
struct Danger;
/// `forbidden`: family has it, and its policy denies it.
struct Forbidden;

macro_rules! tool {
    ($ty:ident, $name:literal, $risk:expr) => {
        #[async_trait]
        impl Tool for $ty {
            fn spec(&self) -> &ToolSpec {
                static SPEC: LazyLock<ToolSpec> =
                    LazyLock::new(|| ToolSpec::new($name, $risk, "test tool"));
                &SPEC
            }
            async fn execute(
                &self,
                _: Value,
                ctx: &ToolContext,
                _: &Authorized,
            ) -> Result<ToolOutput, ToolError> {
                Ok(ToolOutput::ok(format!(
                    "{} ran in {}",
                    $name,
                    ctx.workspace.display()
                )))
            }
        }
    };
}
tool!(Where, "where", RiskLevel::ReadOnly);
tool!(Danger, "danger", RiskLevel::ReadOnly);
tool!(Forbidden, "forbidden", RiskLevel::ReadOnly);

fn runner(tools: Vec<Arc<dyn Tool>>, deny: &[&str]) -> Arc<ToolRunner> {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool).unwrap();
    }
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy: AutonomyLevel::Supervised,
        deny: deny.iter().map(ToString::to_string).collect(),
        ..Default::default()
    });
    Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)))
}

struct Env {
    store: Store,
    _db: tempfile::TempDir,
    main_ws: tempfile::TempDir,
    family_ws: tempfile::TempDir,
    clock: Arc<dyn Clock>,
    server: FakeLlmServer,
    provider: Arc<dyn LlmProvider>,
}

impl Env {
    async fn new() -> Env {
        let db = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/cairn.db", db.path().display());
        let (store, _) = Store::open(&url).await.unwrap();
        let server = FakeLlmServer::start().await.unwrap();
        let provider = build_provider(&server.openai_settings()).unwrap();
        let main_ws = tempfile::tempdir().unwrap();
        let family_ws = tempfile::tempdir().unwrap();
        std::fs::write(main_ws.path().join("notes.md"), "MAIN-NOTE-5521").unwrap();
        std::fs::write(family_ws.path().join("notes.md"), "FAMILY-NOTE-3318").unwrap();
        std::fs::write(family_ws.path().join("USER.md"), "FAMILY-IDENTITY-4410").unwrap();
        Env {
            store,
            _db: db,
            main_ws,
            family_ws,
            clock: Arc::new(FixedClock::new(t0())),
            server,
            provider,
        }
    }

    /// `family`: its model, `where` and `forbidden` (denied), its workspace.
    fn family(&self) -> RoutineAgent {
        let runner = runner(vec![Arc::new(Where), Arc::new(Forbidden)], &["forbidden"]);
        let agent = AgentLoop::new(
            Arc::clone(&self.provider),
            runner,
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        )
        .with_model(Some("family-model".into()));
        let workspace = self.family_ws.path().to_path_buf();
        RoutineAgent {
            agent,
            ctx: ToolContext::new(&workspace, "routines").with_clock(self.clock.clone()),
            prompt: PromptContext {
                agent_name: "Pip".into(),
                workspace,
                timezone: chrono_tz::UTC,
                now: t0(),
                model: String::new(),
                tools: Vec::new(),
                more_tools: Vec::new(),
                runtime: RuntimeInfo::detect(),
                skill_paths: Vec::new(),
            },
        }
    }

    /// Main's executor (its tools: `where`, `danger`), with `family` as given.
    fn actions(&self, family: Option<RoutineAgent>) -> AgentActions {
        let main = runner(vec![Arc::new(Where), Arc::new(Danger)], &[]);
        let ctx = ToolContext::new(self.main_ws.path(), "routines").with_clock(self.clock.clone());
        let actions = AgentActions::new(
            self.store.clone(),
            self.main_ws.path(),
            Arc::clone(&self.clock),
        )
        .with_llm(Arc::clone(&self.provider), Arc::clone(&self.provider))
        .with_tools(main, ctx);
        match family {
            Some(family) => actions.with_agent("family", family),
            None => actions,
        }
    }

    /// A routine of `agent` doing `action`, stored with a `running` run.
    async fn request(&self, agent: &str, action: &str) -> ActionRequest {
        let yaml =
            format!("name: chores\nagent: {agent}\ntrigger: {{type: manual}}\naction: {action}\n");
        let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
        let mut routine = Routine::new(spec, "ada", t0());
        match self.store.find_routine("ada", "chores").await.unwrap() {
            Some(stored) => routine.id = stored.id,
            None => self.store.create_routine(&routine).await.unwrap(),
        }
        let run = RoutineRun {
            id: Uuid::now_v7(),
            routine_id: routine.id,
            trigger_type: "manual".into(),
            trigger_detail: None,
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
                trigger_type: "manual".into(),
                detail: None,
                payload: None,
                scheduled_for: None,
            },
            cancel: CancellationToken::new(),
        }
    }

    /// The text of every message of request `i` the fake LLM received.
    fn sent(&self, i: usize) -> String {
        let body = &self.server.requests()[i].body;
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The tool names offered in request `i`.
    fn offered(&self, i: usize) -> Vec<String> {
        let body = &self.server.requests()[i].body;
        body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test]
async fn a_lightweight_routine_of_family_asks_its_model_and_reads_its_workspace() {
    let env = Env::new().await;
    let actions = env.actions(Some(env.family()));
    env.server
        .push(Scripted::text("ROUTINE_OK\n```state\nfamily notes\n```"));
    let request = env
        .request(
            "family",
            "{type: lightweight, prompt: p, context_paths: [notes.md]}",
        )
        .await;
    let outcome = actions.execute(request).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(env.server.requests()[0].body["model"], "family-model");
    let sent = env.sent(0);
    assert!(sent.contains("FAMILY-NOTE-3318"), "{sent}");
    assert!(!sent.contains("MAIN-NOTE-5521"), "{sent}");
    // Its state is kept in its own workspace.
    let state = |ws: &Path| std::fs::read_to_string(ws.join("routines/chores/state.md")).ok();
    assert_eq!(state(env.family_ws.path()).as_deref(), Some("family notes"));
    assert_eq!(state(env.main_ws.path()), None);

    // The same routine of main asks the provider's own model, in main's workspace.
    env.server.push(Scripted::text("ROUTINE_OK"));
    let request = env
        .request(
            "main",
            "{type: lightweight, prompt: p, context_paths: [notes.md]}",
        )
        .await;
    assert_eq!(actions.execute(request).await.status, RunStatus::Ok);
    assert_ne!(env.server.requests()[1].body["model"], "family-model");
    assert!(env.sent(1).contains("MAIN-NOTE-5521"));
}

#[tokio::test]
async fn a_tool_call_of_family_runs_its_tools_in_its_workspace() {
    let env = Env::new().await;
    let actions = env.actions(Some(env.family()));
    let outcome = actions
        .execute(
            env.request("family", "{type: tool_call, tool: where, params: {}}")
                .await,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    let summary = outcome.summary.unwrap();
    assert!(
        summary.contains(&format!("where ran in {}\n", display(env.family_ws.path()))),
        "{summary}"
    );
    // Main's tool is not family's; the one its policy denies is refused.
    let outcome = actions
        .execute(
            env.request("family", "{type: tool_call, tool: danger, params: {}}")
                .await,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    assert!(
        outcome
            .summary
            .unwrap()
            .starts_with("`danger` unknown tool")
    );
    let outcome = actions
        .execute(
            env.request("family", "{type: tool_call, tool: forbidden, params: {}}")
                .await,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    assert!(
        outcome
            .summary
            .unwrap()
            .starts_with("`forbidden` was refused")
    );
    // Main's routine runs main's tool, in main's workspace.
    let outcome = actions
        .execute(
            env.request("main", "{type: tool_call, tool: danger, params: {}}")
                .await,
        )
        .await;
    let summary = outcome.summary.unwrap();
    assert!(
        summary.contains(&format!("danger ran in {}\n", display(env.main_ws.path()))),
        "{summary}"
    );
}

#[tokio::test]
async fn a_full_job_of_family_is_a_turn_of_its_loop_with_its_identity_and_tools() {
    let env = Env::new().await;
    let actions = env.actions(Some(env.family()));
    env.server.push_all([
        Scripted::tool_call("where", serde_json::json!({})),
        Scripted::text("ROUTINE_OK"),
    ]);
    let request = env
        .request(
            "family",
            "{type: full_job, title: Tidy, description: 'tidy the family notes'}",
        )
        .await;
    let outcome = actions.execute(request).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.job_id, None, "no job on main's scheduler");
    assert!(outcome.tokens_used.is_some());
    assert_eq!(env.server.requests().len(), 2);
    let first = &env.server.requests()[0].body;
    assert_eq!(first["model"], "family-model");
    let sent = env.sent(0);
    for expected in [
        "FAMILY-IDENTITY-4410",
        "Pip",
        "tidy the family notes",
        "routines/chores/state.md",
    ] {
        assert!(sent.contains(expected), "`{expected}` not in {sent}");
    }
    let offered = env.offered(0);
    assert!(offered.contains(&"where".to_string()), "{offered:?}");
    assert!(!offered.contains(&"danger".to_string()), "{offered:?}");
    // The tool ran in family's workspace.
    let second = env.sent(1);
    assert!(
        second.contains(&format!("where ran in {}", display(env.family_ws.path()))),
        "{second}"
    );

    // A call its policy denies fails the run, naming the tool.
    env.server.push_all([
        Scripted::tool_call("forbidden", serde_json::json!({})),
        Scripted::text("done"),
    ]);
    let request = env
        .request("family", "{type: full_job, title: Tidy, description: d}")
        .await;
    let outcome = actions.execute(request).await;
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    assert!(
        outcome
            .summary
            .unwrap()
            .starts_with("the agent's call of `forbidden` was denied by its policy"),
    );
}

#[tokio::test]
async fn a_routine_of_an_agent_that_is_not_here_fails_and_never_runs_as_main() {
    let env = Env::new().await;
    let actions = env.actions(None);
    for action in [
        "{type: notification, message: hello}",
        "{type: lightweight, prompt: p}",
        "{type: tool_call, tool: where, params: {}}",
    ] {
        let outcome = actions.execute(env.request("family", action).await).await;
        assert_eq!(outcome.status, RunStatus::Failed, "{action}: {outcome:?}");
        assert_eq!(outcome.notice, None);
        let summary = outcome.summary.unwrap();
        assert!(
            summary.starts_with(
                "this routine runs as agent \"family\", which is not here: it is not in [[agents]]"
            ),
            "{summary}"
        );
        assert!(
            summary.contains("not run (as main or otherwise)"),
            "{summary}"
        );
    }
    assert!(
        env.server.requests().is_empty(),
        "nothing reached the model"
    );

    // Without an LLM, no agent but main runs: said so.
    let bare = AgentActions::new(env.store.clone(), env.main_ws.path(), env.clock.clone());
    let outcome = bare
        .execute(
            env.request("family", "{type: notification, message: hi}")
                .await,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        outcome
            .summary
            .unwrap()
            .contains("no LLM provider is configured")
    );
}

const FAMILY_ROUTINE: &str = "name: chores\nagent: famly\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n";

#[tokio::test]
async fn the_service_refuses_an_agent_that_is_not_configured_at_the_agent_field() {
    let env = Env::new().await;
    let person = Actor::Person {
        user: "ada".into(),
        via: "cli",
    };
    let service = RoutineService::new(env.store.clone(), env.clock.clone(), "ada", chrono_tz::UTC);
    let spec = RoutineSpec::parse(FAMILY_ROUTINE, SpecFormat::Yaml).unwrap();
    // Without agents, only main is there.
    let Err(ServiceError::Problems { problems, .. }) = service.create(spec.clone(), &person).await
    else {
        panic!("an unknown agent was accepted");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].path, "agent");
    assert_eq!(
        problems[0].message,
        "no agent \"famly\" in [[agents]]; (configured: main)"
    );

    let service = service.with_agents(["family".to_string()]);
    let err = service
        .create(spec.clone(), &Actor::Agent)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "routine \"chores\": 1 problem, nothing written: agent: no agent \"famly\" in [[agents]]; did you mean \"family\"? (configured: main, family)"
    );
    assert!(env.store.list_routines(None).await.unwrap().is_empty());

    // Named rightly, it is stored with its agent; writing it again as main
    // (the field left out) is a change.
    let mut spec = spec;
    spec.agent = Some("family".into());
    let created = service.create(spec.clone(), &person).await.unwrap();
    let stored = env.store.get_routine(created.id).await.unwrap().unwrap();
    assert_eq!(stored.spec.agent.as_deref(), Some("family"));
    assert_eq!(stored.spec.agent_id(), "family");
    spec.agent = None;
    let replaced = service.replace(stored, spec, &person).await.unwrap();
    assert!(replaced.changed);
    let stored = env.store.get_routine(created.id).await.unwrap().unwrap();
    assert_eq!(stored.spec.agent, None);
    assert_eq!(stored.spec.agent_id(), "main");
}
