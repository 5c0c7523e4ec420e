//! Where commands cannot be confined (Landlock unavailable, here turned off),
//! a routine whose `allowed_tools` lists `shell` is refused when it is
//! defined and when it runs, unless the owner set `allow_unconfined`.
//!
//! Its own test binary: it installs this process's host sandbox.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::sync::Arc;

use cairn_agent::sandbox::SandboxSettings;
use cairn_agent::tools::ToolContext;
use cairn_agent::tools::shell::{ShellConfig, ShellTool};
use cairn_agent::{AutonomyLevel, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_automation::routines::action::{ActionExecutor, ActionRequest, FireContext};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::define::prepare;
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::routine::{Routine, RoutineSpec, RunStatus, SpecFormat};
use cairn_store::Store;
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

fn spec(allowed: &str) -> RoutineSpec {
    let yaml = format!(
        "name: sweep\ntrigger: {{type: manual}}\naction: {{type: tool_call, tool: shell, \
         params: {{command: \"touch ran.txt\"}}, allowed_tools: [{allowed}]}}\n"
    );
    RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap()
}

fn unconfined(allow: bool) {
    cairn_test_support::agent::host_sandbox(SandboxSettings {
        landlock: false,
        allow_unconfined: allow,
        ..SandboxSettings::default()
    });
}

async fn run_once(workspace: &std::path::Path) -> (RunStatus, String) {
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(ShellTool::new(ShellConfig {
            allowed_programs: vec!["touch".into()],
            landlock: false,
            allow_unconfined: true,
            ..ShellConfig::default()
        })))
        .unwrap();
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy: AutonomyLevel::Supervised,
        ..Default::default()
    });
    let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
    let clock: Arc<dyn Clock> = Arc::new(FixedClock::new(now));
    let actions = AgentActions::new(store.clone(), workspace, Arc::clone(&clock))
        .with_tools(runner, ToolContext::new(workspace, "unused"));
    // Defined before the host lost confinement: only the run-time check stands.
    let routine = Routine::new(spec("shell"), "ada", now);
    let outcome = actions
        .execute(ActionRequest {
            routine: routine.into(),
            run_id: Uuid::now_v7(),
            fire: FireContext {
                trigger_type: "manual".into(),
                detail: None,
                payload: None,
                scheduled_for: None,
            },
            cancel: CancellationToken::new(),
        })
        .await;
    (outcome.status, outcome.summary.unwrap_or_default())
}

#[tokio::test]
async fn allowed_tools_with_shell_need_confinement_or_consent() {
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap();
    unconfined(false);
    for allowed in ["shell", "bash", "file_read, Run-Command"] {
        let problems = prepare(&spec(allowed), Tz::UTC, now).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "action.allowed_tools");
        assert!(
            problems[0]
                .message
                .contains("tools.shell.allow_unconfined = true"),
            "{}",
            problems[0].message
        );
    }
    assert!(prepare(&spec("file_read"), Tz::UTC, now).is_ok());
    let workspace = tempfile::tempdir().unwrap();
    let (status, summary) = run_once(workspace.path()).await;
    assert_eq!(status, RunStatus::Failed, "{summary}");
    assert!(summary.contains("cannot be confined"), "{summary}");
    assert!(!workspace.path().join("ran.txt").exists());

    // The owner accepted unconfined commands: defined and run.
    unconfined(true);
    assert!(prepare(&spec("shell"), Tz::UTC, now).is_ok());
    let (status, summary) = run_once(workspace.path()).await;
    assert_eq!(status, RunStatus::Ok, "{summary}");
    assert!(workspace.path().join("ran.txt").exists());
}
