//! Black-box tests of `cairn tool`: a tool disabled by five failures in a
//! row (recorded through the agent's tool health on the home's database) is
//! listed as disabled, hidden from the agent, and re-enabled by the CLI.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::path::Path;
use std::sync::Arc;

use assert_cmd::Command;
use cairn_agent::policy::{PolicyGate, ToolPolicyConfig};
use cairn_agent::repair::{InboxNotifier, ToolHealth};
use cairn_agent::runner::{ToolRunner, ToolStatus};
use cairn_agent::tools::{ToolsConfig, builtin_registry};
use cairn_core::clock::{Clock, SystemClock};
use cairn_store::Store;
use predicates::str::contains;

fn cairn(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear().env("CAIRN_HOME", home);
    cmd
}

fn json_of(cmd: &mut Command) -> serde_json::Value {
    let output = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&output)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&output)))
}

fn block_on<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// A runner over the built-ins with health on the home's database.
async fn runner(home: &Path) -> (Store, ToolRunner) {
    let url = format!("sqlite://{}", home.join("cairn.db").display());
    let (store, _) = Store::open(&url).await.unwrap();
    let registry = builtin_registry(&ToolsConfig::default()).unwrap();
    let runner = ToolRunner::new(
        Arc::new(registry),
        Arc::new(PolicyGate::new(&ToolPolicyConfig::default())),
    );
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    runner.attach_health(Arc::new(ToolHealth::new(
        store.clone(),
        Some(5),
        Arc::new(InboxNotifier::new(store.clone(), Arc::clone(&clock))),
        clock,
        "ada",
    )));
    runner.refresh_health().await;
    (store, runner)
}

fn tool<'a>(list: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {list}"))
}

#[test]
fn a_tool_disabled_by_failures_is_listed_and_enabled_again() {
    let home = tempfile::tempdir().unwrap();
    let list = json_of(cairn(home.path()).args(["tool", "list", "--json"]));
    assert_eq!(tool(&list, "time_now")["enabled"], true);
    assert!(
        tool(&list, "routine_create").is_object(),
        "automation tools too"
    );

    block_on(async {
        let (store, runner) = runner(home.path()).await;
        let health = runner.health().unwrap();
        for i in 0..5 {
            health
                .observe(
                    "time_now",
                    ToolStatus::Failed,
                    &format!("error: clock broke {i}"),
                )
                .await;
        }
        assert!(!runner.definitions().iter().any(|d| d.name == "time_now"));
        store.close().await;
    });

    let list = json_of(cairn(home.path()).args(["tool", "list", "--json"]));
    let time = tool(&list, "time_now");
    assert_eq!(time["enabled"], false);
    assert_eq!(time["consecutive_failures"], 5);
    assert_eq!(time["last_error"], "error: clock broke 4");
    cairn(home.path())
        .args(["tool", "list"])
        .assert()
        .success()
        .stdout(contains("time_now"))
        .stdout(contains("disabled"));

    cairn(home.path())
        .args(["tool", "enable", "time_now"])
        .assert()
        .success()
        .stdout(contains("enabled time_now"));
    let list = json_of(cairn(home.path()).args(["tool", "list", "--json"]));
    assert_eq!(tool(&list, "time_now")["enabled"], true);
    assert_eq!(tool(&list, "time_now")["consecutive_failures"], 0);
    block_on(async {
        let (store, runner) = runner(home.path()).await;
        assert!(runner.definitions().iter().any(|d| d.name == "time_now"));
        assert_eq!(store.inbox("ada", true, 10).await.unwrap().len(), 1);
        store.close().await;
    });
}

#[test]
fn enabling_an_unknown_tool_is_bad_input() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .args(["tool", "enable", "nope"])
        .assert()
        .code(2)
        .stderr(contains("no tool named \"nope\""));
}
