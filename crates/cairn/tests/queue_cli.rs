//! The global run limit queues, through the built binary: with the default
//! configuration every one-shot due at once runs, and a run that waits
//! for a place survives its daemon's SIGKILL and runs once after a restart,
//! on SQLite and on PostgreSQL.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::time::{Duration, Instant};

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::Value;

mod common;
use common::DaemonChild;

struct Env {
    home: tempfile::TempDir,
    llm: FakeLlmServer,
    database: Option<String>,
    /// Another LLM address than the fake server's.
    llm_url: Option<String>,
}

impl Env {
    fn new(database: Option<String>) -> Env {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), "").unwrap();
        Env {
            home,
            llm: FakeLlmServer::start_on_thread().unwrap(),
            database,
            llm_url: None,
        }
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_GATEWAY_PORT", "0")
            .env("CAIRN_LLM_PROVIDER", "openai")
            .env(
                "CAIRN_LLM_BASE_URL",
                self.llm_url
                    .clone()
                    .unwrap_or_else(|| self.llm.base_url_openai()),
            )
            .env("CAIRN_LLM_MODEL", "test-model")
            .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
            .env("CAIRN_LLM_MAX_RETRIES", "0");
        if let Some(url) = &self.database {
            cmd.env("CAIRN_DATABASE_URL", url);
        }
        cmd
    }

    fn cairn(&self) -> Command {
        Command::from_std(self.command())
    }

    /// Writes each routine into a folder of the home and applies the folder.
    fn apply(&self, routines: &[String]) {
        let dir = self.home.path().join("routines");
        std::fs::create_dir_all(&dir).unwrap();
        for (i, text) in routines.iter().enumerate() {
            std::fs::write(dir.join(format!("r{i:03}.yaml")), text).unwrap();
        }
        self.cairn()
            .args(["routine", "apply", "-f"])
            .arg(&dir)
            .assert()
            .success();
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.command().arg("--json").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn daemon(&self) -> DaemonChild {
        let daemon = DaemonChild::start(self.command());
        daemon.wait_running(|| self.command());
        daemon
    }

    /// Polls until `done` holds of `routine list --json`, for up to `limit`.
    fn wait_list(&self, limit: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let list = self.json(&["routine", "list"]);
            let list = list.as_array().unwrap().clone();
            if done(&list) {
                return list;
            }
            assert!(Instant::now() < deadline, "never settled: {list:#?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A time `secs` from now, to the second (one-shots due in the same second).
fn in_secs(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn status_of(routine: &Value) -> &str {
    routine["last_status"].as_str().unwrap_or("")
}

/// 40 reminders and 15 LLM checks (each answer takes 2 s) due in the same
/// second, under the default limit of 10 runs at once: all 55 run.
#[test]
fn fifty_five_one_shots_due_together_all_run_under_the_default_limit() {
    let env = Env::new(None);
    for _ in 0..15 {
        env.llm
            .push(Scripted::text("ROUTINE_OK").with_delay(Duration::from_secs(2)));
    }
    let at = in_secs(6);
    let mut routines = Vec::new();
    for i in 0..40 {
        routines.push(format!(
            "name: pill-{i}\ntrigger: {{type: once, at: '{at}'}}\naction: {{type: notification, message: take pill {i}}}\n"
        ));
    }
    for i in 0..15 {
        routines.push(format!(
            "name: check-{i}\ntrigger: {{type: once, at: '{at}'}}\naction: {{type: lightweight, prompt: Check {i}.}}\n"
        ));
    }
    env.apply(&routines);
    let daemon = env.daemon();
    let ours = |list: &[Value]| -> Vec<Value> {
        list.iter()
            .filter(|r| {
                let name = r["name"].as_str().unwrap();
                name.starts_with("pill-") || name.starts_with("check-")
            })
            .cloned()
            .collect()
    };
    let list = env.wait_list(Duration::from_secs(60), |list| {
        let ours = ours(list);
        ours.len() == 55
            && ours
                .iter()
                .all(|r| !matches!(status_of(r), "" | "running" | "waiting"))
    });
    daemon.stop();
    let list = ours(&list);
    assert_eq!(list.len(), 55);
    for r in &list {
        assert!(
            matches!(status_of(r), "ok" | "attention"),
            "{} ended {}",
            r["name"],
            status_of(r)
        );
    }
    assert_eq!(env.llm.requests().len(), 15, "each LLM check asked once");
    // Some runs really waited: the limit held, and their lateness shows it.
    let waited = (0..15)
        .map(|i| env.json(&["routine", "runs", &format!("check-{i}")]))
        .filter(|runs| {
            let run = &runs[0];
            let slot: chrono::DateTime<chrono::Utc> =
                run["scheduled_for"].as_str().unwrap().parse().unwrap();
            let started: chrono::DateTime<chrono::Utc> =
                run["started_at"].as_str().unwrap().parse().unwrap();
            started - slot >= chrono::Duration::milliseconds(1500)
        })
        .count();
    assert!(waited >= 1, "no LLM check waited for a place");
}

/// A run waiting for a place when its daemon is SIGKILLed starts after the
/// restart, once.
fn a_waiting_run_survives_a_sigkill(database: Option<String>) {
    let mut env = Env::new(database);
    // The one place is held by an LLM check whose answer never comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    env.llm_url = Some(format!("http://{}/v1", silent.local_addr().unwrap()));
    std::fs::write(
        env.home.path().join("config.toml"),
        "[routines]\nmax_concurrent = 1\nlease_secs = 600\n",
    )
    .unwrap();
    // `hold` takes the place first; not re-run after the crash, so that
    // its place goes to the waiting run.
    let (first_at, then) = (in_secs(3), in_secs(5));
    env.apply(&[
        format!("name: hold\ntrigger: {{type: once, at: '{first_at}'}}\naction: {{type: lightweight, prompt: Hold.}}\nguardrails: {{on_interrupt: skip}}\n"),
        format!("name: wait-me\ntrigger: {{type: once, at: '{then}'}}\naction: {{type: notification, message: still here}}\n"),
    ]);
    let mut first = env.daemon();
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiting = loop {
        let runs = env.json(&["routine", "runs", "wait-me"]);
        if let Some(run) = runs.as_array().unwrap().first().cloned() {
            break run;
        }
        assert!(Instant::now() < deadline, "wait-me never queued");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(waiting["status"], "waiting", "{waiting:#}");
    assert!(
        waiting["skip_reason"]
            .as_str()
            .unwrap()
            .starts_with("global limit: 1 running"),
        "{waiting:#}"
    );
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    drop(first);
    // Restarted with the LLM still silent: the held run is reaped (its
    // daemon is gone) and its place goes to the waiting run.
    let second = env.daemon();
    let list = env.wait_list(Duration::from_secs(30), |list| {
        list.iter()
            .any(|r| r["name"] == "wait-me" && status_of(r) == "ok")
    });
    second.stop();
    let runs = env.json(&["routine", "runs", "wait-me"]);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "ran once: {runs:#?}");
    assert_eq!(runs[0]["id"], waiting["id"]);
    assert_eq!(runs[0]["status"], "ok");
    assert!(
        list.iter()
            .any(|r| r["name"] == "wait-me" && r["enabled"] == false)
    );
}

#[test]
fn a_waiting_run_survives_a_sigkill_on_sqlite() {
    a_waiting_run_survives_a_sigkill(None);
}

#[test]
fn a_waiting_run_survives_a_sigkill_on_postgres() {
    let Some(pg) = cairn_test_support::postgres::PgSchema::create("queue_sigkill") else {
        return;
    };
    a_waiting_run_survives_a_sigkill(Some(pg.url.clone()));
}

/// The most runs that overlapped in time, from their recorded starts and ends.
fn most_at_once(runs: &[Value]) -> usize {
    let time =
        |v: &Value| -> chrono::DateTime<chrono::Utc> { v.as_str().unwrap().parse().unwrap() };
    let mut edges: Vec<(chrono::DateTime<chrono::Utc>, i32)> = Vec::new();
    for run in runs {
        edges.push((time(&run["started_at"]), 1));
        edges.push((time(&run["completed_at"]), -1));
    }
    // An end at the same instant as a start frees its place first.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    usize::try_from(most).unwrap()
}

/// Two daemons on one PostgreSQL database, each with a global limit of 5,
/// and 50 one-shots (an LLM check of a second each) due together: the limit
/// is global (counted in the database), so never more than 5 run at once
/// across both; all 50 run, none twice.
#[test]
fn two_daemons_share_one_global_limit_on_postgres() {
    let Some(pg) = cairn_test_support::postgres::PgSchema::create("queue_two_daemons") else {
        return;
    };
    let first = Env::new(Some(pg.url.clone()));
    let mut second = Env::new(Some(pg.url.clone()));
    // One LLM for both homes: each answer takes a second.
    second.llm_url = Some(first.llm.base_url_openai());
    for _ in 0..50 {
        first
            .llm
            .push(Scripted::text("ROUTINE_OK").with_delay(Duration::from_secs(1)));
    }
    for env in [&first, &second] {
        std::fs::write(
            env.home.path().join("config.toml"),
            "[routines]\nmax_concurrent = 5\n",
        )
        .unwrap();
    }
    let at = in_secs(8);
    let routines: Vec<String> = (0..50)
        .map(|i| {
            format!(
                "name: shared-{i}\ntrigger: {{type: once, at: '{at}'}}\naction: {{type: lightweight, prompt: Check {i}.}}\n"
            )
        })
        .collect();
    first.apply(&routines);
    let (a, b) = (first.daemon(), second.daemon());
    let done = |list: &[Value]| {
        list.iter()
            .filter(|r| r["name"].as_str().unwrap().starts_with("shared-"))
            .filter(|r| matches!(status_of(r), "ok" | "attention" | "failed"))
            .count()
            == 50
    };
    first.wait_list(Duration::from_secs(90), done);
    a.stop();
    b.stop();
    let mut runs = Vec::new();
    for i in 0..50 {
        let mine = first.json(&["routine", "runs", &format!("shared-{i}")]);
        let mine = mine.as_array().unwrap();
        assert_eq!(mine.len(), 1, "shared-{i} ran {} times", mine.len());
        assert_eq!(mine[0]["status"], "ok", "{:#}", mine[0]);
        runs.push(mine[0].clone());
    }
    // What the limit protects, measured where the work happens: the LLM's
    // requests in flight. (The runs' records only approximate it: a run's
    // `started_at` is read before its start waits for the admission lock.)
    let most = first.llm.most_in_flight();
    eprintln!(
        "most at once: {most} at the LLM, {} by the runs' records",
        most_at_once(&runs)
    );
    assert!(
        most <= 5,
        "{most} ran at once across both daemons (limit 5)"
    );
    assert_eq!(most, 5, "the five places were never all used");
    assert_eq!(
        first.llm.requests().len(),
        50,
        "each check asked the LLM once"
    );
}
