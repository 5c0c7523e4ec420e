//! Black-box tests of the supervised daemon through the built binary: a
//! panicking component restarted and reported by `cairn status`, one daemon
//! per home (and no stale lock after SIGKILL), SIGTERM within the deadline,
//! SIGHUP reloads with JSON logs, and `cairn service`.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;

struct Home(tempfile::TempDir);

impl Home {
    fn new(config: &str) -> Home {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        Home(home)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", self.path())
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_GATEWAY_PORT", "0");
        cmd
    }

    fn cairn(&self) -> Command {
        Command::from_std(self.command())
    }

    /// Starts `cairn daemon` with `extra` environment and arguments.
    fn daemon(&self, env: &[(&str, &str)], args: &[&str]) -> Daemon {
        let mut cmd = self.command();
        cmd.envs(env.iter().copied())
            .args(args)
            .arg("daemon")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let seen = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                seen.lock().unwrap().push(line);
            }
        });
        Daemon { child, lines }
    }

    /// `cairn --json status`: its exit code and output.
    fn status(&self) -> (i32, Value) {
        let out = self.cairn().args(["--json", "status"]).output().unwrap();
        (
            out.status.code().unwrap(),
            serde_json::from_slice(&out.stdout).unwrap(),
        )
    }

    /// Waits until `cairn status` says a daemon runs with `pid` and `ready` holds.
    fn wait_status(&self, pid: u32, ready: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, status) = self.status();
            if code == 0 && status["daemon"]["pid"] == pid && ready(&status) {
                return status;
            }
            assert!(Instant::now() < deadline, "never got there: {status:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

struct Daemon {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, name: &str) {
        let ok = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    /// Waits for the process to end, up to `limit`.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "still running after {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until a stderr line satisfies `found`; returns it.
    fn wait_line(&self, found: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) = self.lines.lock().unwrap().iter().find(|l| found(l)) {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no such line in:\n{}",
                self.lines.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET; the JSON body.
fn http_get(addr: &str, path: &str) -> Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(body).unwrap()
}

#[test]
fn a_panicking_component_is_restarted_and_reported_by_status() {
    let home = Home::new("");
    // With an LLM, every component runs (sessions and jobs included).
    let llm = cairn_llm::testing::FakeLlmServer::start_on_thread().unwrap();
    let base_url = llm.base_url_openai();
    let daemon = home.daemon(
        &[
            ("CAIRN_TEST_PANIC_COMPONENT", "notification_dispatcher"),
            ("CAIRN_LLM_PROVIDER", "openai"),
            ("CAIRN_LLM_BASE_URL", &base_url),
            ("CAIRN_LLM_MODEL", "test-model"),
            ("CAIRN_LLM_API_KEY", "sk-test-0123456789"),
        ],
        &[],
    );
    // It panics once, backs off 1 s, then runs again.
    let status = home.wait_status(daemon.pid(), |s| {
        let d = &s["daemon"]["components"]["notification_dispatcher"];
        d["restarts"] == 1 && d["state"] == "running"
    });
    assert_eq!(status["status"], "running");
    let dispatcher = &status["daemon"]["components"]["notification_dispatcher"];
    assert!(
        dispatcher["last_error"]
            .as_str()
            .unwrap()
            .contains("panicked: CAIRN_TEST_PANIC_COMPONENT"),
        "{dispatcher}"
    );
    // The others are untouched.
    let components = status["daemon"]["components"].as_object().unwrap();
    for name in [
        "gateway",
        "routine_engine",
        "state_writer",
        "event_forwarding",
        "session_pruning",
        "job_upkeep",
    ] {
        assert_eq!(components[name]["state"], "running", "{name}: {status:#}");
        assert_eq!(components[name]["restarts"], 0, "{name}");
    }
    assert!(
        status["daemon"]["gateway"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    // /readyz reports the same record.
    let ready = http_get(status["daemon"]["gateway"].as_str().unwrap(), "/readyz");
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(
        ready["components"]["notification_dispatcher"]["restarts"],
        1
    );
    assert_eq!(
        ready["components"]["notification_dispatcher"]["last_error"],
        dispatcher["last_error"]
    );
    // The human form names the restart and the error.
    home.cairn()
        .arg("status")
        .assert()
        .success()
        .stdout(contains(format!("running (pid {})", daemon.pid())))
        .stdout(contains("notification_dispatcher"))
        .stdout(contains("restarts 1, last error: panicked"));
    daemon.wait_line(|l| l.contains("component stopped; restarting it"));
}

#[test]
fn a_second_daemon_on_the_same_home_refuses_naming_the_first() {
    let home = Home::new("");
    let first = home.daemon(&[], &[]);
    let status = home.wait_status(first.pid(), |_| true);
    // No LLM configured: these are off, and say so.
    for name in ["session_pruning", "job_upkeep"] {
        assert_eq!(
            status["daemon"]["components"][name]["state"], "disabled",
            "{name}"
        );
    }
    home.cairn()
        .arg("daemon")
        .timeout(Duration::from_secs(30))
        .assert()
        .code(1)
        .stderr(contains(format!(
            "another cairn daemon (pid {}) is already running",
            first.pid()
        )));
    // Another home on the same database is welcome.
    let other = Home::new(&format!(
        "[database]\nurl = \"sqlite://{}\"\n",
        home.path().join("cairn.db").display()
    ));
    let second = other.daemon(&[], &[]);
    other.wait_status(second.pid(), |_| true);
}

#[test]
fn a_sigkilled_daemon_leaves_no_stuck_lock() {
    let home = Home::new("");
    let mut first = home.daemon(&[], &[]);
    home.wait_status(first.pid(), |_| true);
    first.signal("KILL");
    first.wait(Duration::from_secs(10));
    let (code, status) = home.status();
    assert_eq!(code, 3);
    assert_eq!(status["status"], "not_running", "{status:#}");
    home.cairn()
        .arg("status")
        .assert()
        .code(3)
        .stdout(contains(format!(
            "not running (pid {} is gone",
            first.pid()
        )));
    // The lock file is still there, but no longer held.
    assert!(home.path().join("daemon.lock").exists());
    let second = home.daemon(&[], &[]);
    home.wait_status(second.pid(), |_| true);
}

#[test]
fn sigterm_stops_the_daemon_within_its_deadline_and_status_says_so() {
    let home = Home::new("[daemon]\nshutdown_deadline_secs = 5\n");
    let mut daemon = home.daemon(&[], &[]);
    home.wait_status(daemon.pid(), |_| true);
    let asked = Instant::now();
    daemon.signal("TERM");
    let exit = daemon.wait(Duration::from_secs(10));
    assert!(exit.success(), "{exit:?}\n{}", daemon.stderr());
    assert!(asked.elapsed() < Duration::from_secs(6));
    daemon.wait_line(|l| l.contains("SIGTERM: stopping"));
    daemon.wait_line(|l| l == "cairn daemon stopped");
    let (code, status) = home.status();
    assert_eq!(code, 3);
    assert_eq!(status["status"], "not_running");
    assert_eq!(status["daemon"]["stopping"], true);
    assert_eq!(
        status["daemon"]["components"]["routine_engine"]["state"],
        "stopped"
    );
}

#[test]
fn sighup_reloads_what_it_can_and_names_what_needs_a_restart_in_json_logs() {
    let home = Home::new("[routines]\nmax_concurrent = 3\n");
    let daemon = home.daemon(&[], &["--log-format", "json"]);
    home.wait_status(daemon.pid(), |_| true);
    std::fs::write(
        home.path().join("config.toml"),
        "[routines]\nmax_concurrent = 5\n\n[gateway]\nbody_limit_bytes = 100000\n\n[notify]\ndefault_channel = \"log\"\n\n[channels.log]\ntype = \"log\"\n\n[heartbeat]\ninterval_secs = 900\n",
    )
    .unwrap();
    daemon.signal("HUP");
    let parse = |l: &str| serde_json::from_str::<Value>(l).ok();
    let message = |v: &Value| v["fields"]["message"].as_str().unwrap_or("").to_string();
    let applied = daemon.wait_line(|l| {
        parse(l).is_some_and(|v| message(&v) == "configuration reloaded: now in force")
    });
    let applied = parse(&applied).unwrap();
    let mut keys: Vec<&str> = applied["fields"]["keys"]
        .as_str()
        .unwrap()
        .split(", ")
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "channels.log",
            "heartbeat.interval_secs",
            "notify.default_channel",
            "routines.max_concurrent"
        ]
    );
    // The heartbeat's routine follows its new interval.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = home
            .cairn()
            .args(["routine", "list", "--json"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains("every 900s") {
            break;
        }
        assert!(Instant::now() < deadline, "heartbeat interval not reloaded");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(applied["level"], "INFO");
    let restart = daemon.wait_line(|l| {
        parse(l).is_some_and(|v| {
            message(&v) == "configuration reloaded: these changes need a restart of the daemon"
        })
    });
    assert_eq!(
        parse(&restart).unwrap()["fields"]["keys"],
        "gateway.body_limit_bytes"
    );
    // A broken file changes nothing and says why.
    std::fs::write(
        home.path().join("config.toml"),
        "[routines]\nmax_concurent = 5\n",
    )
    .unwrap();
    daemon.signal("HUP");
    daemon.wait_line(|l| l.contains("configuration not reloaded: the new one is invalid"));
    // Saving the file is enough: its modification time is watched.
    std::fs::write(
        home.path().join("config.toml"),
        "[routines]\nmax_concurrent = 7\n\n[gateway]\nbody_limit_bytes = 100000\n\n[notify]\ndefault_channel = \"log\"\n\n[channels.log]\ntype = \"log\"\n\n[heartbeat]\ninterval_secs = 900\n",
    )
    .unwrap();
    daemon.wait_line(|l| {
        parse(l).is_some_and(|v| {
            message(&v) == "configuration reloaded: now in force"
                && v["fields"]["cause"] == "config.toml changed"
                && v["fields"]["keys"] == "routines.max_concurrent"
        })
    });
    home.wait_status(daemon.pid(), |s| {
        s["daemon"]["components"]["routine_engine"]["state"] == "running"
    });
}

#[test]
fn service_install_writes_a_user_unit_and_uninstall_removes_it() {
    let home = Home::new("");
    let xdg = tempfile::tempdir().unwrap();
    let cairn = |args: &[&str]| {
        let mut cmd = home.cairn();
        cmd.env("XDG_CONFIG_HOME", xdg.path()).args(args);
        cmd
    };
    let unit = xdg.path().join("systemd/user/cairn.service");
    let env_file = xdg.path().join("systemd/user/cairn.env");
    cairn(&["service", "install"])
        .env("OPENAI_API_KEY", "sk-secret-value")
        .env("CAIRN_LLM_MODEL", "gpt-test")
        .assert()
        .success()
        .stdout(contains(format!("wrote {}", unit.display())))
        // Names only (the harness sets the port and zone too).
        .stdout(contains(
            "with CAIRN_GATEWAY_PORT, CAIRN_LLM_MODEL, CAIRN_TIMEZONE, OPENAI_API_KEY;",
        ))
        .stdout(contains("sk-secret-value").not())
        .stdout(contains("systemctl --user enable --now cairn"))
        .stdout(contains("journalctl --user -u cairn -f"));
    // The variables reach the service through a private file the unit names.
    use std::os::unix::fs::PermissionsExt;
    let env_text = std::fs::read_to_string(&env_file).unwrap();
    assert!(
        env_text.contains("OPENAI_API_KEY=\"sk-secret-value\"\n"),
        "{env_text}"
    );
    assert!(
        env_text.contains("CAIRN_LLM_MODEL=\"gpt-test\"\n"),
        "{env_text}"
    );
    let mode = std::fs::metadata(&env_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&unit).unwrap();
    let exe = assert_cmd::cargo::cargo_bin("cairn");
    assert!(
        text.contains(&format!("ExecStart=\"{}\" daemon\n", exe.display())),
        "{text}"
    );
    assert!(text.contains(&format!(
        "Environment=\"CAIRN_HOME={}\"\n",
        home.path().display()
    )));
    assert!(text.contains("Restart=on-failure\n"));
    assert!(
        text.contains(&format!("EnvironmentFile=-\"{}\"\n", env_file.display())),
        "{text}"
    );
    cairn(&["service", "install"])
        .assert()
        .code(2)
        .stderr(contains("add --force to replace it"));
    cairn(&["service", "install", "--force"]).assert().success();
    // No PATH here, so systemctl is never run.
    cairn(&["service", "status"])
        .assert()
        .success()
        .stdout(contains("(installed)"))
        .stdout(contains("systemctl: not found on PATH"));
    cairn(&["service", "uninstall"])
        .assert()
        .success()
        .stdout(contains(format!("removed {}", unit.display())));
    assert!(!unit.exists() && !env_file.exists());
    cairn(&["service", "uninstall"])
        .assert()
        .code(2)
        .stderr(contains("does not exist"));
    cairn(&["service", "status"])
        .assert()
        .success()
        .stdout(contains("not installed"));
}

/// A key variable of any name that config.toml names reaches the service;
/// one it names but the shell does not set is said to be missing.
#[test]
fn service_install_keeps_every_variable_config_toml_names() {
    let home = Home::new(
        "[llm]\nprovider = \"openai\"\nmodel = \"m\"\napi_key = \"${MY_LLM_TOKEN}\"\n\n\
         [channels.phone]\ntype = \"telegram\"\nbot_token = \"${PHONE_BOT}\"\nchat_id = \"1\"\n",
    );
    let xdg = tempfile::tempdir().unwrap();
    home.cairn()
        .env("XDG_CONFIG_HOME", xdg.path())
        .env("MY_LLM_TOKEN", "sk-custom-name")
        .env("UNRELATED_SECRET", "not-for-the-service")
        .args(["service", "install"])
        .assert()
        .success()
        .stdout(contains(
            "with CAIRN_GATEWAY_PORT, CAIRN_TIMEZONE, MY_LLM_TOKEN;",
        ))
        .stdout(contains(
            "missing: config.toml names PHONE_BOT, not set in this shell",
        ))
        .stdout(contains("sk-custom-name").not());
    let env_text = std::fs::read_to_string(xdg.path().join("systemd/user/cairn.env")).unwrap();
    assert!(
        env_text.contains("MY_LLM_TOKEN=\"sk-custom-name\"\n"),
        "{env_text}"
    );
    assert!(!env_text.contains("UNRELATED_SECRET"), "{env_text}");
    assert!(!env_text.contains("PHONE_BOT"), "{env_text}");
}

#[test]
fn status_without_any_daemon_says_it_never_ran() {
    let home = Home::new("");
    let (code, status) = home.status();
    assert_eq!(code, 3);
    assert_eq!(status["status"], "never_started");
    home.cairn()
        .arg("status")
        .assert()
        .code(3)
        .stdout(contains("has never run on this home"));
}
