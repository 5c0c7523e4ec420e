//! The daily budget across processes: real `cairn` processes spending
//! concurrently on one database (a SQLite file, and PostgreSQL when
//! `CAIRN_TEST_POSTGRES_URL` is set) never exceed the budget by more than
//! one call, because spending is an atomic increment in the store and a
//! call in flight reserves its price from the others.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::path::Path;
use std::process::Command as StdCommand;
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use cairn_test_support::postgres::PgSchema;

/// Each call: 1,000 output tokens at $2 per million = 2,000 micro-dollars.
const CALL_MICROS: u64 = 2_000;
/// A 1-cent budget: five calls.
const BUDGET_MICROS: u64 = 10_000;

fn cairn(home: &Path, server: &FakeLlmServer, database: Option<&str>) -> StdCommand {
    let mut cmd = StdCommand::cargo_bin("cairn").unwrap();
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_LLM_PROVIDER", "openai")
        .env("CAIRN_LLM_BASE_URL", server.base_url_openai())
        .env("CAIRN_LLM_MODEL", "test-model")
        .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
        .env("CAIRN_LLM_MAX_RETRIES", "0");
    if let Some(url) = database {
        cmd.env("CAIRN_DATABASE_URL", url);
    }
    cmd
}

/// Two workers, each running `cairn chat -m` processes one after another
/// until refused; returns how many calls reached the provider.
fn spend_concurrently(database: Option<&str>) -> usize {
    let server = FakeLlmServer::start_on_thread().unwrap();
    for _ in 0..40 {
        // Slow answers, so the two processes' calls overlap.
        server.push(
            Scripted::text("ok")
                .with_usage(0, 1_000)
                .with_delay(Duration::from_millis(150)),
        );
    }
    let homes: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let shared_db = homes[0].path().join("shared.db");
    let sqlite_url = format!("sqlite://{}", shared_db.display());
    let url = database.map_or(sqlite_url, str::to_string);
    for home in &homes {
        std::fs::write(
            home.path().join("config.toml"),
            "[cost]\ndaily_budget_cents = 1\n\n[llm.prices.\"test-model\"]\ninput_micros_per_mtok = 0\noutput_micros_per_mtok = 2000000\n",
        )
        .unwrap();
    }
    std::thread::scope(|scope| {
        for (n, home) in homes.iter().enumerate() {
            let (server, url) = (&server, &url);
            scope.spawn(move || {
                for _ in 0..10 {
                    // One person each: two turns at once on one chat thread
                    // is another matter than the budget.
                    let out = cairn(home.path(), server, Some(url))
                        .env("CAIRN_USER", format!("user{n}"))
                        .args(["chat", "-m", "spend"])
                        .output()
                        .unwrap();
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    if stderr.contains("daily LLM budget") || stdout.contains("daily LLM budget") {
                        break;
                    }
                    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
                }
            });
        }
    });
    let calls = server.requests().len();
    // Every process sees the same total.
    let out = cairn(homes[1].path(), &server, Some(&url))
        .args(["cost", "--json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let spent = status["spent_micros"].as_u64().unwrap();
    assert_eq!(
        spent,
        calls as u64 * CALL_MICROS,
        "every call counted once: {status}"
    );
    assert!(spent >= BUDGET_MICROS, "the budget was reached: {status}");
    assert!(
        spent <= BUDGET_MICROS + CALL_MICROS,
        "over the budget by more than one call: {status}"
    );
    assert_eq!(status["exceeded"], true);
    calls
}

#[test]
fn two_processes_on_one_sqlite_file_share_the_daily_budget() {
    let calls = spend_concurrently(None);
    assert!((5..=6).contains(&calls), "{calls} calls");
}

#[test]
fn two_processes_on_postgresql_share_the_daily_budget() {
    let Some(pg) = PgSchema::create("two_processes_on_postgresql_share_the_daily_budget") else {
        return;
    };
    let calls = spend_concurrently(Some(&pg.url));
    assert!((5..=6).contains(&calls), "{calls} calls");
}
