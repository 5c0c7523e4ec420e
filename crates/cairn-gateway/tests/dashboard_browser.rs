//! The dashboard in a real browser: Debian's chromium driven by selenium
//! (`tests/browser/dashboard.py`, from the test venv) against a live
//! gateway over the fake LLM, through every acceptance step of issue 26,
//! with axe-core (the pinned npm package) on every page and a screenshot
//! of each under `target/dashboard-screenshots/`.
//!
//! Skipped, saying why, without chromium and chromedriver, the venv or npm,
//! unless `CAIRN_REQUIRE_BROWSER=1` (CI) makes that a failure.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::{ComponentState, Components};
use cairn_llm::testing::Scripted;
use cairn_test_support::npm::node_path;
use cairn_test_support::python::python;
use cairn_test_support::{missing, required};
use serde_json::{Value, json};
use support::TestGateway;
use support::agents::{FAMILY_MODEL, with_family};
use support::clients::{run, text};

/// `CAIRN_TEST_<NAME>` or the Debian path, when the file is there.
fn program(var: &str, debian: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from(debian), PathBuf::from);
    path.exists().then_some(path)
}

/// chromium and chromedriver, or `None` (after saying so) when the test must skip.
fn browser(test: &str) -> Option<(PathBuf, PathBuf)> {
    let found = program("CAIRN_TEST_CHROMIUM", "/usr/bin/chromium")
        .zip(program("CAIRN_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"));
    if found.is_none() {
        missing(
            test,
            "CAIRN_REQUIRE_BROWSER",
            "chromium and chromedriver are needed (Debian: apt-get install -y chromium chromium-driver; or set CAIRN_TEST_CHROMIUM / CAIRN_TEST_CHROMEDRIVER)",
        );
    }
    found
}

/// Where the screenshots go: `target/dashboard-screenshots` of the workspace.
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_in_chromium() {
    const TEST: &str = "the_dashboard_works_in_chromium";
    let Some((chromium, driver)) = browser(TEST) else {
        return;
    };
    let browser_required = required("CAIRN_REQUIRE_BROWSER");
    let python = python(TEST);
    let modules = node_path(TEST);
    let (Some(python), Some(modules)) = (python, modules) else {
        assert!(
            !browser_required,
            "CAIRN_REQUIRE_BROWSER=1 needs the test venv and npm too"
        );
        return;
    };
    let axe = modules.join("axe-core/axe.min.js");
    assert!(
        axe.exists(),
        "{} is missing: run scripts/test-npm.sh gateway",
        axe.display()
    );

    let components = Arc::new(Components::new());
    let now = SystemClock.now();
    for name in ["gateway", "routine engine", "notifications"] {
        components.set(name, ComponentState::Running, now, None);
    }
    components.set(
        "mcp",
        ComponentState::Disabled,
        now,
        Some("no servers configured".into()),
    );
    // A second agent, for the chat's agent switcher.
    let family_home = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with(support::settings(), {
        let components = Arc::clone(&components);
        let family_home = family_home.path().to_path_buf();
        move |g| {
            // Two agents: the chat's switcher and the routine form offer them.
            let routines = g.routines().with_agents(["family".to_string()]);
            let g =
                with_family(g.with_components(components), &family_home).with_routines(routines);
            g.spawn_event_feeds();
            g
        }
    })
    .await;
    // A built-in routine, as the daemon stores the heartbeat.
    cairn_automation::routines::system::ensure_system_routines(
        &gw.store,
        "ada",
        &[cairn_automation::routines::system::SystemRoutine::every(
            "heartbeat",
            "checks HEARTBEAT.md",
            Duration::from_secs(1800),
        )],
        chrono_tz::UTC,
        now,
    )
    .await
    .unwrap();
    // Spend to chart: today, two models.
    gw.store.add_llm_spend(42_000, now).await.unwrap();
    gw.store
        .add_model_spend("fake-model", 30_000, now)
        .await
        .unwrap();
    gw.store
        .add_model_spend("fake-cheap", 12_000, now)
        .await
        .unwrap();
    gw.store
        .add_agent_spend("main", 30_000, true, now)
        .await
        .unwrap();
    gw.store
        .add_agent_spend("family", 12_000, true, now)
        .await
        .unwrap();
    // The chat: an answer streamed in pieces, then a tool that asks.
    gw.llm.push(
        Scripted::text(
            "Hello! This answer is **streamed** in small pieces, with `code`.\n\n\
             | a | b |\n|---|---|\n| 1 | 2 |\n\n\
             <img src=x onerror=\"window.__xss=1\"><b id=xss>bold</b>",
        )
        // Pieces of about five words: each takes a while through a debug build.
        .with_chunk_bytes(30)
        .with_chunk_delay(Duration::from_millis(25)),
    );
    gw.llm.push(Scripted::tool_call("writer", json!({})));
    gw.llm.push(Scripted::text("written it"));
    // Family's answer, on the chat switched to it.
    gw.llm.push(Scripted::text("Pip here"));

    let code = cairn_gateway::pairing::display(&gw.pairing_code().await);
    let shots = screenshots();
    // Only this run's pictures (and no stale failure.png).
    let _ = std::fs::remove_dir_all(&shots);
    let mut cmd = Command::new(python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.py"))
        .arg(&gw.base)
        .arg(&code)
        .arg(&axe)
        .arg(&shots)
        .env("CAIRN_TEST_CHROMIUM", chromium)
        .env("CAIRN_TEST_CHROMEDRIVER", driver)
        .env("SE_AVOID_STATS", "true");
    let output = run(cmd).await;
    assert!(
        output.status.success(),
        "the browser test failed: {}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    eprintln!("{summary}");
    assert!(
        summary["schedule_error"]
            .as_str()
            .is_some_and(|e| e.contains("blursday")),
        "{summary}"
    );

    // What the page did, seen from the daemon's side.
    assert_eq!(
        gw.writer.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the approved tool ran once"
    );
    let models: Vec<Value> = gw
        .llm
        .requests()
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        ["fake-model", "fake-model", "fake-model", FAMILY_MODEL],
        "family's message went to family's model, main's to main's"
    );
    // New thread and switching posted nothing: every stored turn is a message typed.
    for session in gw.store.list_sessions().await.unwrap() {
        for thread in gw.store.list_threads(session.id).await.unwrap() {
            let row = gw.store.get_thread(thread.id).await.unwrap().unwrap();
            for stored in gw.store.load_turns(row.id, &row.view).await.unwrap() {
                let turn = cairn_agent::session::turn_of(row.id, stored).unwrap();
                assert!(!turn.user_input.starts_with('/'), "{}", turn.user_input);
            }
        }
    }
    let routine = gw.store.list_routines(None).await.unwrap();
    let coffee = routine.iter().find(|r| r.spec.name == "coffee").unwrap();
    assert_eq!(
        coffee.spec.trigger,
        cairn_core::routine::Trigger::Cron {
            schedule: "every day at 9am".into()
        }
    );
    let runs = gw.store.list_runs(coffee.id, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    // The form left main's routine main's, and gave the chosen agent to the other.
    assert_eq!(coffee.spec.agent, None);
    let tea = routine.iter().find(|r| r.spec.name == "tea").unwrap();
    let beat = routine.iter().find(|r| r.spec.name == "heartbeat").unwrap();
    assert!(
        !beat.spec.enabled,
        "the built-in routine's Save was not kept"
    );
    assert_eq!(beat.spec.action.kind(), "system");
    assert_eq!(tea.spec.agent.as_deref(), Some("family"));
    let tokens = gw.store.list_api_tokens().await.unwrap();
    let session = tokens.iter().find(|t| t.origin == "dashboard").unwrap();
    assert!(
        session.revoked_at.is_some(),
        "signing out revokes the session"
    );
    let pages = summary["pages"].as_object().unwrap();
    for page in [
        "sign-in",
        "home",
        "chat",
        "routine-form",
        "routine",
        "routines",
        "inbox",
        "memory",
        "costs",
        "status",
        "tasks",
    ] {
        let header = pages[page]["header_390"].as_f64().unwrap();
        assert!(
            header <= 0.08 * 844.0,
            "{page}: header {header} px at 390 px"
        );
        assert!(pages.contains_key(page), "{page} was not checked");
        assert!(shots.join(format!("{page}.png")).exists());
        assert!(shots.join(format!("{page}-390px.png")).exists());
    }
}
