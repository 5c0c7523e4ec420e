//! Black-box tests of the routine engine through the built binary:
//! `routine fire` against the fake LLM with a webhook receiver, and
//! `cairn daemon` picking up a routine applied by another process.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use cairn_llm::testing::{FakeLlmServer, Scripted};
use chrono::{DateTime, Utc};
use predicates::str::contains;
use serde_json::Value;

mod common;
use common::Receiver;

struct Env {
    home: tempfile::TempDir,
    llm: Option<FakeLlmServer>,
}

impl Env {
    fn new(config: &str, llm: bool) -> Env {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        Env {
            home,
            llm: llm.then(|| FakeLlmServer::start_on_thread().unwrap()),
        }
    }

    fn env(&self, cmd: &mut std::process::Command) {
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_TIMEZONE", "UTC")
            // Tests run side by side: each daemon's gateway takes a free port.
            .env("CAIRN_GATEWAY_PORT", "0");
        if let Some(llm) = &self.llm {
            cmd.env("CAIRN_LLM_PROVIDER", "openai")
                .env("CAIRN_LLM_BASE_URL", llm.base_url_openai())
                .env("CAIRN_LLM_MODEL", "test-model")
                .env("CAIRN_LLM_API_KEY", "sk-test-0123456789")
                .env("CAIRN_LLM_MAX_RETRIES", "0");
        }
    }

    fn cairn(&self) -> Command {
        let mut std = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        self.env(&mut std);
        Command::from_std(std)
    }

    /// Writes a routine file into the home and applies it.
    fn apply(&self, file: &str, text: &str) {
        let path = self.home.path().join(file);
        std::fs::write(&path, text).unwrap();
        self.cairn()
            .args(["routine", "apply", "-f"])
            .arg(&path)
            .assert()
            .success();
    }

    fn runs(&self, routine: &str) -> Vec<Value> {
        let out = self
            .cairn()
            .args(["--json", "routine", "runs", routine])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn a_fired_lightweight_routine_needing_attention_reaches_the_webhook() {
    let receiver = Receiver::start(vec![]);
    let env = Env::new(
        &format!(
            "[notify]\ndefault_channel = \"hook\"\n\n[channels.hook]\ntype = \"webhook\"\nurl = \"{}\"\n",
            receiver.url
        ),
        true,
    );
    env.llm.as_ref().unwrap().push(Scripted::text(
        "/var is 91% full; the logs grew 4 GB overnight.",
    ));
    env.apply("disk.yaml", "name: disk-check\ntrigger: {type: manual}\naction: {type: lightweight, prompt: Check the disk report., max_tokens: 200}\n");
    env.cairn()
        .args(["routine", "fire", "disk-check"])
        .assert()
        .success()
        .stdout(contains("attention: /var is 91% full"));
    let runs = env.runs("disk-check");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["status"], "attention");
    assert_eq!(run["trigger_type"], "manual");
    assert!(run["scheduled_for"].is_null());
    assert!(run["tokens_used"].as_u64().unwrap() > 0);
    // One LLM call, with the routine's prompt and max_tokens.
    let requests = env.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["max_tokens"], 200);
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("Check the disk report.")
    );
    // The receiver got the notification JSON, and the run knows its id.
    let id = run["notification_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.count() == 0 && Instant::now() < deadline {
        // `routine fire` recorded it; deliveries are the dispatcher's job.
        env.cairn().args(["notify", "deliver"]).assert().success();
    }
    let (headers, body) = receiver.requests.lock().unwrap()[0].clone();
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["title"], "🔔 disk-check needs attention");
    assert_eq!(body["outcome"], "attention");
    assert!(
        body["body"]
            .as_str()
            .unwrap()
            .starts_with("/var is 91% full")
    );
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "x-cairn-notification-id" && *v == id)
    );
    assert_eq!(
        env.runs("disk-check")[0]["notification_status"],
        "delivered"
    );
}

#[test]
fn a_routine_without_an_llm_fails_saying_so_and_bad_fires_are_refused() {
    let env = Env::new("", false);
    env.apply(
        "r.yaml",
        "name: summary\ntrigger: {type: manual}\naction: {type: lightweight, prompt: Summarise.}\n",
    );
    env.cairn()
        .args(["routine", "fire", "summary"])
        .assert()
        .code(1)
        .stdout(contains("failed: no LLM provider is configured"));
    env.cairn()
        .args(["routine", "fire", "sumary"])
        .assert()
        .code(2)
        .stderr(contains("did you mean \"summary\""));
    env.cairn()
        .args(["routine", "fire", "summary", "--payload", "{oops"])
        .assert()
        .code(2)
        .stderr(contains("--payload: not valid JSON"));
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

#[test]
fn the_daemon_fires_a_routine_applied_by_another_process_on_time() {
    // A fresh home with nothing configured: no LLM, no channels.
    let env = Env::new("", false);
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    env.env(&mut cmd);
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut daemon = Daemon(cmd.spawn().unwrap());
    // Started once the database exists and the runs table answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::sleep(Duration::from_millis(500));
    env.apply("soon.yaml", "name: soon\ntrigger: {type: once, at: 'in 3s'}\naction: {type: notification, message: hello}\n");
    let run = loop {
        let runs = env.runs("soon");
        if let Some(run) = runs.into_iter().find(|r| r["status"] == "ok") {
            break run;
        }
        assert!(Instant::now() < deadline, "the routine did not fire");
        std::thread::sleep(Duration::from_millis(200));
    };
    let late = time(&run["started_at"]) - time(&run["scheduled_for"]);
    assert!(
        late < chrono::Duration::seconds(2),
        "fired {late} after its slot"
    );
    // SIGTERM stops it gracefully.
    let pid = daemon.0.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let out = std::mem::replace(
        &mut daemon.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("SIGTERM: stopping"), "{stderr}");
    assert!(stderr.contains("cairn daemon stopped"), "{stderr}");
    assert!(stderr.contains("routine fired"), "{stderr}");
    assert!(
        stderr.contains("gateway listening on http://127.0.0.1:"),
        "{stderr}"
    );
}

#[test]
fn a_chat_message_fires_an_event_routine_and_is_still_answered() {
    let env = Env::new("", true);
    env.apply("deploys.yaml", "name: deploys\ntrigger: {type: event, pattern: 'deploy \\w+'}\naction: {type: notification, message: a deploy was mentioned}\n");
    env.llm.as_ref().unwrap().push(Scripted::text("Noted."));
    env.cairn()
        .args(["chat", "-m", "please deploy api tonight"])
        .assert()
        .success()
        .stdout(contains("Noted."));
    let runs = env.runs("deploys");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["trigger_type"], "event");
    assert_eq!(runs[0]["status"], "ok");
    assert!(
        runs[0]["trigger_detail"]
            .as_str()
            .unwrap()
            .contains("please deploy api tonight")
    );
    // A message that does not match fires nothing.
    env.llm.as_ref().unwrap().push(Scripted::text("Sure."));
    env.cairn().args(["chat", "-m", "hello"]).assert().success();
    assert_eq!(env.runs("deploys").len(), 1);
}

#[test]
fn the_agent_creates_and_fires_a_routine_with_its_tools() {
    let env = Env::new("", true);
    let llm = env.llm.as_ref().unwrap();
    llm.push(Scripted::tool_call(
        "routine_create",
        serde_json::json!({"routine": {
            "name": "stretch",
            "trigger": {"type": "manual"},
            "action": {"type": "notification", "message": "time to stretch"}
        }}),
    ));
    llm.push(Scripted::tool_call(
        "routine_fire",
        serde_json::json!({"name": "stretch"}),
    ));
    llm.push(Scripted::text("Created and fired."));
    env.cairn()
        .args(["chat", "--yes", "-m", "remind me to stretch, and do it now"])
        .assert()
        .success()
        .stdout(contains("Created and fired."));
    let runs = env.runs("stretch");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "ok");
    assert_eq!(runs[0]["trigger_type"], "manual");
    // Every tool result went back to the model; none was an error.
    let requests = llm.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(!last.contains("not running in this process"), "{last}");
}

#[test]
fn fire_no_wait_prints_the_run_id_and_the_run_happens_in_the_background() {
    let env = Env::new("", false);
    env.apply(
        "ping.yaml",
        "name: ping\ntrigger: {type: manual}\naction: {type: notification, message: pong}\n",
    );
    let out = env
        .cairn()
        .args([
            "--json",
            "routine",
            "fire",
            "ping",
            "--no-wait",
            "--payload",
            "{\"n\":1}",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = printed["run_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs = env.runs("ping");
        if runs
            .iter()
            .any(|r| r["id"] == id.as_str() && r["status"] == "ok")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "run {id} did not finish: {runs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `cairn daemon` on `env`'s home with `extra` environment.
fn start_daemon(env: &Env, extra: &[(&str, &str)]) -> Daemon {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    env.env(&mut cmd);
    cmd.envs(extra.iter().copied())
        .arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Daemon(cmd.spawn().unwrap())
}

/// Polls `routine runs` until `found` picks a run, for up to 30 s.
fn wait_run(env: &Env, routine: &str, found: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs = env.runs(routine);
        if let Some(run) = runs.iter().find(|r| found(r)) {
            return run.clone();
        }
        assert!(Instant::now() < deadline, "no such run: {runs:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_restarted_daemon_interrupts_what_its_killed_predecessor_left_at_once() {
    // An LLM that takes the request and never answers: the run lasts.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", silent.local_addr().unwrap());
    let extra = [
        ("CAIRN_LLM_PROVIDER", "openai"),
        ("CAIRN_LLM_BASE_URL", base.as_str()),
        ("CAIRN_LLM_MODEL", "test-model"),
        ("CAIRN_LLM_API_KEY", "sk-test-0123456789"),
        ("CAIRN_LLM_MAX_RETRIES", "0"),
        // Leases far longer than the test: only the restart can end the run.
        ("CAIRN_ROUTINES_LEASE_SECS", "600"),
    ];
    let env = Env::new("", false);
    env.apply(
        "slow.yaml",
        "name: slow-check\ntrigger: {type: cron, schedule: 'every 2s'}\naction: {type: lightweight, prompt: Check.}\nguardrails: {catch_up: skip}\n",
    );
    let mut first = start_daemon(&env, &extra);
    let cut = wait_run(&env, "slow-check", |r| r["status"] == "running");
    let owner = cut["owner"].as_str().unwrap().to_string();
    assert!(owner.starts_with("daemon-"), "{owner}");
    first.0.kill().unwrap();
    first.0.wait().unwrap();

    let _second = start_daemon(&env, &extra);
    let id = cut["id"].as_str().unwrap();
    let reaped = wait_run(&env, "slow-check", |r| {
        r["id"] == id && r["status"] != "running"
    });
    assert_eq!(reaped["status"], "interrupted");
    assert!(
        time(&reaped["completed_at"]) < time(&cut["lease_until"]),
        "interrupted only once its lease lapsed: {reaped:#}"
    );
    let summary = reaped["result_summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!(
            "interrupted by a crash of {owner}; re-run as attempt 2"
        )),
        "{summary}"
    );
    // The slot's second attempt runs under the new daemon, of the same home.
    let again = wait_run(&env, "slow-check", |r| r["attempt"] == 2);
    assert_eq!(again["scheduled_for"], cut["scheduled_for"]);
    assert_eq!(again["status"], "running");
    let prefix = &owner[..owner.find("-pid").unwrap() + 1];
    let new_owner = again["owner"].as_str().unwrap();
    assert!(
        new_owner.starts_with(prefix) && new_owner != owner,
        "{new_owner} vs {owner}"
    );
    env.cairn()
        .args(["routine", "runs", "slow-check"])
        .assert()
        .success()
        .stdout(contains("ATTEMPT"))
        .stdout(contains("re-run as attempt 2"));
}
