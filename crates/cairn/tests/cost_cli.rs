//! Black-box tests of `cairn cost`: a fresh home, configured limits, and
//! counters seeded by a cost guard running in-process on the same database.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use std::path::Path;
use std::sync::Arc;

use assert_cmd::Command;
use cairn_agent::CostGuard;
use cairn_core::clock::SystemClock;
use cairn_core::config::CostConfig;
use cairn_store::Store;
use chrono::Utc;
use predicates::str::contains;

/// The built binary with a clean environment and the given home.
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

/// Records calls costing `costs` (micro-dollars) today, through a guard on
/// the home's database file, as the daemon would.
fn seed(home: &Path, costs: &[u64]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = format!("sqlite://{}", home.join("cairn.db").display());
        let (store, _) = Store::open(&url).await.unwrap();
        let config = CostConfig {
            daily_budget_cents: None,
            hourly_action_limit: None,
        };
        let guard = CostGuard::load(store.clone(), &config, Arc::new(SystemClock))
            .await
            .unwrap();
        for cost in costs {
            guard.admit().await.unwrap();
            guard.record(*cost).await;
        }
        store.close().await;
    });
}

#[test]
fn a_fresh_home_has_spent_nothing_and_no_limits() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .arg("cost")
        .assert()
        .success()
        .stdout(contains("spent today   $0.00\n"))
        .stdout(contains("daily budget  unlimited\n"))
        .stdout(contains("hourly limit  unlimited\n"))
        .stdout(contains("last hour     0 calls\n"))
        .stdout(contains("status        ok\n"));

    let before = Utc::now().date_naive().to_string();
    let status = json_of(cairn(home.path()).args(["cost", "--json"]));
    let after = Utc::now().date_naive().to_string();
    let date = status["date"].as_str().unwrap();
    assert!(date == before || date == after, "{status}");
    assert_eq!(status["spent_micros"], 0);
    assert_eq!(status["daily_budget_cents"], serde_json::Value::Null);
    assert_eq!(status["hourly_limit"], serde_json::Value::Null);
    assert_eq!(status["hourly_calls"], 0);
    assert_eq!(status["warning"], false);
    assert_eq!(status["exceeded"], false);
}

#[test]
fn configured_limits_are_shown() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .arg("cost")
        .env("CAIRN_DAILY_BUDGET_CENTS", "500")
        .env("CAIRN_HOURLY_ACTION_LIMIT", "100")
        .assert()
        .success()
        .stdout(contains("daily budget  $5.00 (0% used)\n"))
        .stdout(contains("hourly limit  100 calls per hour\n"));
    let status = json_of(
        cairn(home.path())
            .args(["cost", "--json"])
            .env("CAIRN_DAILY_BUDGET_CENTS", "500"),
    );
    assert_eq!(status["daily_budget_cents"], 500);
    assert_eq!(status["hourly_limit"], serde_json::Value::Null);
}

#[test]
fn recorded_spend_is_shown_with_the_warning_and_the_limit() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), &[4_000_000, 200_000]);
    cairn(home.path())
        .arg("cost")
        .env("CAIRN_DAILY_BUDGET_CENTS", "500")
        .assert()
        .success()
        .stdout(contains("spent today   $4.20\n"))
        .stdout(contains("daily budget  $5.00 (84% used)\n"))
        .stdout(contains("last hour     2 calls\n"))
        .stdout(contains(
            "status        warning: 80% of the daily budget is spent\n",
        ));

    seed(home.path(), &[820_000]);
    let status = json_of(
        cairn(home.path())
            .args(["cost", "--json"])
            .env("CAIRN_DAILY_BUDGET_CENTS", "500"),
    );
    assert_eq!(status["spent_micros"], 5_020_000);
    assert_eq!(status["hourly_calls"], 3);
    assert_eq!(status["warning"], true);
    assert_eq!(status["exceeded"], true);
    cairn(home.path())
        .arg("cost")
        .env("CAIRN_DAILY_BUDGET_CENTS", "500")
        .env("CAIRN_HOURLY_ACTION_LIMIT", "3")
        .assert()
        .success()
        .stdout(contains("spent today   $5.02\n"))
        .stdout(contains("status        daily budget reached"));
}

#[test]
fn a_reached_hourly_limit_is_named() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), &[0, 0]);
    cairn(home.path())
        .arg("cost")
        .env("CAIRN_HOURLY_ACTION_LIMIT", "2")
        .assert()
        .success()
        .stdout(contains("status        hourly limit reached"));
}
