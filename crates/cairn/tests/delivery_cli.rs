//! Honest delivery from the command line (issue 23), black-box: with a
//! daemon running, what `routine fire` records is the daemon's to deliver
//! (the command says so, and the daemon hears it through the store's change
//! signal at once); with none, the command delivers it itself before it
//! exits and says "delivered". A webhook receiver on 127.0.0.1 is the
//! person's phone.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;

mod common;
use common::Receiver;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new(receiver: &Receiver) -> Env {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            format!(
                "[channels.hook]\ntype = \"webhook\"\nurl = \"{}\"\n",
                receiver.url
            ),
        )
        .unwrap();
        let env = Env { home };
        let file = env.home.path().join("disk.yaml");
        std::fs::write(
            &file,
            "name: disk-check\ntrigger: {type: manual}\naction: {type: notification, message: disk at 91%}\nnotify: {channel: hook}\n",
        )
        .unwrap();
        env.cairn()
            .args(["routine", "apply", "-f"])
            .arg(&file)
            .assert()
            .success();
        env
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_TIMEZONE", "UTC")
            .env("CAIRN_GATEWAY_PORT", "0");
        cmd
    }

    fn cairn(&self) -> Command {
        Command::from_std(self.command())
    }

    fn status(&self) -> Value {
        let out = self.cairn().args(["--json", "status"]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }
}

/// Stops the daemon (SIGTERM) when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

#[test]
fn with_a_daemon_running_routine_fire_hands_it_over_and_the_daemon_delivers_within_a_second() {
    let receiver = Receiver::start(vec![]);
    let env = Env::new(&receiver);
    let mut cmd = env.command();
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let daemon = Daemon(cmd.spawn().unwrap());
    // Running once its state file says so (written when its parts start).
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.status()["status"] != "running" {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = daemon.0.id();
    env.cairn()
        .args(["routine", "fire", "disk-check"])
        .assert()
        .success()
        .stdout(contains(format!("queued for the daemon (pid {pid})")).and(contains("sent").not()));
    let fired = Instant::now();
    // Bounded: the daemon heard the change signal, no recheck timer.
    while receiver.count() == 0 {
        assert!(
            fired.elapsed() < Duration::from_secs(1),
            "the daemon did not deliver within 1 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let (_, body) = receiver.requests.lock().unwrap()[0].clone();
    assert!(body.contains("disk at 91%"), "{body}");
}

#[test]
fn without_a_daemon_routine_fire_delivers_before_it_exits_and_says_so() {
    let receiver = Receiver::start(vec![]);
    let env = Env::new(&receiver);
    env.cairn()
        .args(["routine", "fire", "disk-check"])
        .assert()
        .success()
        .stdout(contains("delivered to hook").and(contains("sent").not()));
    // Already there when the command returned.
    assert_eq!(receiver.count(), 1);
}

#[test]
fn without_a_daemon_a_refusing_receiver_is_reported_queued_with_the_next_attempt() {
    let receiver = Receiver::start(vec![common::Answer::Status(503)]);
    let env = Env::new(&receiver);
    env.cairn()
        .args(["routine", "fire", "disk-check"])
        .assert()
        .success()
        .stdout(
            contains("queued: HTTP 503: receiver trouble; next attempt at")
                .and(contains("delivered").not()),
        );
    assert_eq!(receiver.count(), 1);
}
