//! Schedule operations through the built binary: `routine pause` with a
//! note stops a daemon's runs and `routine show --json` carries the note,
//! `routine resume` restarts them; `routine backfill --from --to` records
//! past slots with trigger `backfill`, once.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use chrono::{DateTime, Utc};
use predicates::str::contains;
use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), "").unwrap();
        Env { home }
    }

    fn env(&self, cmd: &mut std::process::Command) {
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_GATEWAY_PORT", "0");
    }

    fn cairn(&self) -> Command {
        let mut std = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        self.env(&mut std);
        Command::from_std(std)
    }

    fn apply(&self, file: &str, text: &str) {
        let path = self.home.path().join(file);
        std::fs::write(&path, text).unwrap();
        self.cairn()
            .args(["routine", "apply", "-f"])
            .arg(&path)
            .assert()
            .success();
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.cairn().arg("--json").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn runs(&self, routine: &str) -> Vec<Value> {
        self.json(&["routine", "runs", routine, "--limit", "1000"])
            .as_array()
            .unwrap()
            .clone()
    }
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// Polls until `done` holds for the routine's runs, for up to 30 s.
fn wait_runs(env: &Env, routine: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs = env.runs(routine);
        if done(&runs) {
            return runs;
        }
        assert!(Instant::now() < deadline, "timed out: {runs:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pause_with_a_note_stops_the_runs_and_resume_restarts_them() {
    let env = Env::new();
    env.apply(
        "tick.yaml",
        "name: tick\ntrigger: {type: cron, schedule: 'every 1s'}\naction: {type: notification, message: tick}\nguardrails: {retention: 1000}\n",
    );
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    env.env(&mut cmd);
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _daemon = Daemon(cmd.spawn().unwrap());
    wait_runs(&env, "tick", |runs| runs.len() >= 2);

    env.cairn()
        .args(["routine", "pause", "tick", "--note", "moving the server"])
        .assert()
        .success()
        .stdout(contains("routine \"tick\" paused by "))
        .stdout(contains(": moving the server"));
    let paused_at = Utc::now();
    let shown = env.json(&["routine", "show", "tick"]);
    assert_eq!(shown["paused"]["note"], "moving the server", "{shown:#}");
    assert_eq!(
        shown["routine"]["runtime"]["paused"]["note"],
        "moving the server"
    );
    assert!(shown["paused"]["by"].as_str().unwrap().ends_with("(cli)"));
    env.cairn()
        .args(["routine", "list"])
        .assert()
        .success()
        .stdout(contains("paused"))
        .stdout(contains("tick is paused by "));
    // Whatever started before the pause may end; nothing starts after it.
    let before = wait_runs(&env, "tick", |runs| {
        runs.iter().all(|r| r["status"] != "running")
    })
    .len();
    std::thread::sleep(Duration::from_secs(3));
    let runs = env.runs("tick");
    assert_eq!(runs.len(), before, "a paused routine fired: {runs:#?}");
    assert!(runs.iter().all(|r| time(&r["started_at"]) < paused_at));
    // `cairn status` names it too (the daemon's state file exists by now).
    env.cairn()
        .arg("status")
        .assert()
        .stdout(contains("routine tick: paused by "))
        .stdout(contains("moving the server"));

    // Taken before the command: the daemon may fire the caught-up slot
    // while the command is still exiting, and nothing fires before it.
    let resumed_at = Utc::now();
    env.cairn()
        .args(["routine", "resume", "tick"])
        .assert()
        .success()
        .stdout(contains("resumed routine \"tick\"; "))
        .stdout(contains(
            "were missed while paused; catch_up: once runs the latest of them now",
        ));
    let runs = wait_runs(&env, "tick", |runs| {
        runs.iter()
            .filter(|r| time(&r["started_at"]) > resumed_at && r["status"] == "ok")
            .count()
            >= 2
    });
    let caught_up = runs
        .iter()
        .filter(|r| time(&r["started_at"]) > resumed_at)
        .filter_map(|r| r["result_summary"].as_str())
        .any(|s| s.contains("were missed while the routine was paused"));
    assert!(caught_up, "{runs:#?}");
    let shown = env.json(&["routine", "show", "tick"]);
    assert_eq!(shown["paused"], Value::Null);
}

#[test]
fn backfill_records_three_past_slots_with_trigger_backfill_once() {
    let env = Env::new();
    env.apply(
        "report.yaml",
        "name: report\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: daily report}\n",
    );
    let today = Utc::now().date_naive();
    let day = |back: i64| (today - chrono::Duration::days(back)).to_string();
    let (from, to) = (day(3), day(1));
    let args = [
        "routine", "backfill", "report", "--from", &from, "--to", &to,
    ];
    // Bounded by routines.max_backfill without --yes.
    env.cairn()
        .env("CAIRN_ROUTINES_MAX_BACKFILL", "2")
        .args(args)
        .assert()
        .code(2)
        .stderr(contains(
            "covers 3 slots, more than routines.max_backfill (2); pass --yes",
        ));
    assert!(env.runs("report").is_empty());
    env.cairn()
        .args(args)
        .assert()
        .success()
        .stdout(contains(
            "running 3 slot(s) of \"report\" in order (overlap: buffer_all)",
        ))
        .stdout(contains(": ok: "));
    let mut runs = env.runs("report");
    runs.sort_by_key(|r| time(&r["scheduled_for"]));
    let slots: Vec<String> = runs
        .iter()
        .map(|r| r["scheduled_for"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        slots,
        [3, 2, 1].map(|b| format!("{}T09:00:00Z", day(b))),
        "{runs:#?}"
    );
    for run in &runs {
        assert_eq!(run["trigger_type"], "backfill");
        assert_eq!(run["status"], "ok");
    }
    // The same range again runs nothing and says why.
    env.cairn()
        .args(args)
        .assert()
        .success()
        .stdout(contains("already has a run (ok); not run again"))
        .stdout(contains("nothing to run"));
    assert_eq!(env.runs("report").len(), 3);
    let next = env.json(&["routine", "next", "report", "--count", "2"]);
    let fires = next["next"].as_array().unwrap();
    assert_eq!(fires.len(), 2);
    assert_eq!(
        time(&fires[1]["fires_at"]) - time(&fires[0]["fires_at"]),
        chrono::Duration::days(1)
    );
}
