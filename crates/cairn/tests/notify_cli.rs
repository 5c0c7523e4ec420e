//! Black-box tests of `cairn notify`, `cairn inbox` and the `channels`
//! doctor check, against a webhook receiver on 127.0.0.1.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::time::Duration;

mod common;
use common::{Answer, Receiver};

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new(config: &str) -> Env {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        Env { home }
    }

    fn with_hook(receiver: &Receiver) -> Env {
        Env::new(&format!(
            "[channels.hook]\ntype = \"webhook\"\nurl = \"{}\"\n",
            receiver.url
        ))
    }

    fn cairn(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").unwrap();
        cmd.env_clear()
            .env("CAIRN_HOME", self.home.path())
            .env("CAIRN_TIMEZONE", "UTC");
        cmd
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
}

#[test]
fn a_receiver_failing_twice_is_delivered_on_the_third_attempt() {
    let receiver = Receiver::start(vec![Answer::Status(500), Answer::Status(500)]);
    let env = Env::with_hook(&receiver);
    env.cairn()
        .env("CAIRN_NOTIFY_RETRY_BASE_SECS", "0")
        .args(["notify", "test", "hook", "--message", "hello"])
        .assert()
        .code(1)
        .stdout(contains(
            "queued: HTTP 500: receiver trouble; next attempt at",
        ));
    // Retries are due at once with a zero base delay.
    env.cairn()
        .env("CAIRN_NOTIFY_RETRY_BASE_SECS", "0")
        .args(["notify", "deliver"])
        .assert()
        .success()
        .stdout(contains("2 attempt(s): 1 delivered"));
    let list = env.json(&["notify", "list"]);
    let id = list[0]["id"].as_str().unwrap().to_string();
    assert_eq!(list[0]["status"], "delivered");
    let shown = env.json(&["notify", "show", &id[..8]]);
    let attempts: Vec<(bool, String)> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["delivered"].as_bool().unwrap(),
                a["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (false, "HTTP 500: receiver trouble".to_string()),
            (false, "HTTP 500: receiver trouble".to_string()),
            (true, "HTTP 200".to_string())
        ]
    );
    env.cairn()
        .args(["notify", "show", &id])
        .assert()
        .success()
        .stdout(contains("3. ").and(contains("delivered: HTTP 200")));
    assert_eq!(receiver.ids(), vec![id.clone(), id.clone(), id]);
}

#[test]
fn a_receiver_that_always_fails_leaves_the_notification_in_the_inbox() {
    let receiver = Receiver::start(vec![Answer::Status(503); 10]);
    let env = Env::with_hook(&receiver);
    env.cairn()
        .env("CAIRN_NOTIFY_RETRY_BASE_SECS", "0")
        .env("CAIRN_NOTIFY_MAX_ATTEMPTS", "3")
        .args(["notify", "test", "hook"])
        .assert()
        .code(1);
    env.cairn()
        .env("CAIRN_NOTIFY_RETRY_BASE_SECS", "0")
        .env("CAIRN_NOTIFY_MAX_ATTEMPTS", "3")
        .args(["notify", "deliver"])
        .assert()
        .success()
        .stdout(contains("1 given up"));
    let inbox = env.json(&["inbox"]);
    assert_eq!(inbox[0]["status"], "failed");
    assert_eq!(inbox[0]["last_error"], "HTTP 503: receiver trouble");
    assert_eq!(receiver.count(), 3);
    env.cairn()
        .args(["inbox"])
        .assert()
        .success()
        .stdout(contains("failed*").and(contains("cairn test notification")));
    env.cairn()
        .args(["inbox", "read", "--all"])
        .assert()
        .success()
        .stdout("marked 1 notification(s) read\n");
    env.cairn()
        .args(["inbox"])
        .assert()
        .success()
        .stdout("nothing unread in the inbox\n");
}

#[test]
fn a_delivery_cut_short_by_sigkill_is_made_after_the_restart_exactly_once() {
    let receiver = Receiver::start(vec![Answer::Hold]);
    let env = Env::with_hook(&receiver);
    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    first
        .env_clear()
        .env("CAIRN_HOME", env.home.path())
        .env("CAIRN_TIMEZONE", "UTC")
        .env("CAIRN_NOTIFY_LEASE_SECS", "1")
        .args(["notify", "test", "hook"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = first.spawn().unwrap();
    for _ in 0..1000 {
        if receiver.count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(receiver.count(), 1, "the delivery never started");
    child.kill().unwrap(); // SIGKILL while the receiver holds the request
    child.wait().unwrap();
    receiver.release.send(()).unwrap();
    let pending = env.json(&["notify", "list"]);
    assert_eq!(
        pending[0]["status"], "pending",
        "recorded before the delivery"
    );
    assert_eq!(pending[0]["attempts"], 0);

    // The dead process's lease (1 s here) lapses; the next dispatcher takes over.
    let mut delivered = false;
    for _ in 0..100 {
        let out = env.json(&["notify", "deliver"]);
        if out["delivered"] == 1 {
            delivered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(delivered, "never delivered after the restart");
    let id = pending[0]["id"].as_str().unwrap();
    let shown = env.json(&["notify", "show", id]);
    let attempts = shown["attempts"].as_array().unwrap();
    assert_eq!(
        attempts.len(),
        1,
        "exactly one recorded attempt: {attempts:?}"
    );
    assert_eq!(attempts[0]["delivered"], true);
    assert_eq!(
        receiver.ids(),
        vec![id.to_string(), id.to_string()],
        "at-least-once, same id"
    );
    assert_eq!(env.json(&["notify", "deliver"])["attempts"], 0);
}

#[test]
fn bad_channel_settings_fail_doctor_naming_the_key() {
    let env = Env::new(
        "[channels.mail]\ntype = \"email\"\nhost = \"smtp.example.org\"\nfrom = \"c@example.org\"\n\n\
         [channels.phone]\ntype = \"telegram\"\nbot_token = \"${TG_TOKEN}\"\nchat_id = \"42\"\n",
    );
    env.cairn().args(["doctor"]).assert().code(1).stdout(
        contains("channels.mail.to: missing field `to`").and(contains(
            "channels.phone.bot_token: environment variable TG_TOKEN is not set",
        )),
    );
    let env = Env::new("[notify]\ndefault_channel = \"pager\"\n");
    env.cairn()
        .args(["doctor"])
        .assert()
        .code(1)
        .stdout(contains(
            "notify.default_channel: no channel named \"pager\"",
        ));
    env.cairn()
        .env("CAIRN_NOTIFY_DEFAULT_CHANNEL", "inbox")
        .args(["notify", "test", "nowhere"])
        .assert()
        .code(2)
        .stderr(contains("no channel named \"nowhere\" (configured: inbox)"));
}

#[test]
fn the_inbox_channel_keeps_notifications_for_the_chat() {
    let env = Env::new("");
    env.cairn()
        .args(["notify", "test", "inbox", "--message", "water the tomatoes"])
        .assert()
        .success()
        .stdout(contains("kept in the inbox"));
    let inbox = env.json(&["inbox"]);
    assert_eq!(inbox[0]["body"], "water the tomatoes");
    assert_eq!(inbox[0]["status"], "delivered");

    // `inbox show` takes the id as the list prints it (its first 8 characters).
    let listed = env
        .cairn()
        .args(["inbox"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listed = String::from_utf8(listed).unwrap();
    let short = listed
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(short.len(), 8, "{listed}");
    env.cairn()
        .args(["inbox", "show", &short])
        .assert()
        .success()
        .stdout(contains(format!(
            "notification {}",
            inbox[0]["id"].as_str().unwrap()
        )))
        .stdout(contains("read       no"))
        .stdout(contains("water the tomatoes"));
    let shown = env.json(&["inbox", "show", &short]);
    assert_eq!(shown["notification"]["body"], "water the tomatoes");
    env.cairn()
        .args(["inbox", "show", "zz-not-an-id"])
        .assert()
        .code(2)
        .stderr(contains("not a notification id"));
}

#[test]
fn cairn_channel_lists_every_channel_with_its_health_and_tests_one() {
    let ok = Receiver::start(vec![]);
    let down = Receiver::start(vec![Answer::Status(500); 8]);
    let env = Env::new(&format!(
        "[channels.hook]\ntype = \"webhook\"\nurl = \"{}\"\n\n\
         [channels.down]\ntype = \"webhook\"\nurl = \"{}\"\n\n\
         [channels.chat]\ntype = \"slack\"\nbot_token = \"${{CHAT_BOT_TOKEN}}\"\n\
         app_token = \"${{CHAT_APP_TOKEN}}\"\ninbound = true\n",
        ok.url, down.url
    ));
    env.cairn()
        .args(["notify", "test", "hook"])
        .assert()
        .success();
    env.cairn()
        .args(["notify", "test", "down"])
        .assert()
        .code(1);

    let listed = env.json(&["channel", "list"]);
    let by_name = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {listed}"))
            .clone()
    };
    let hook = by_name("hook");
    assert_eq!(
        (&hook["health"], &hook["posts"]),
        (&"ok".into(), &true.into()),
        "{hook}"
    );
    assert_eq!(hook["deliveries"]["delivered"], 1, "{hook}");
    let failing = by_name("down");
    assert_eq!(failing["health"], "failing", "{failing}");
    assert!(
        failing["detail"].as_str().unwrap().contains("HTTP 500"),
        "{failing}"
    );
    assert_eq!(failing["deliveries"]["pending"], 1, "{failing}");
    let chat = by_name("chat");
    assert_eq!(
        (&chat["health"], &chat["receives"]),
        (&"unavailable".into(), &true.into())
    );
    assert!(
        chat["detail"].as_str().unwrap().contains("CHAT_BOT_TOKEN"),
        "{chat}"
    );
    assert_eq!(by_name("inbox")["health"], "idle");
    env.cairn()
        .args(["channel", "list"])
        .assert()
        .success()
        .stdout(
            contains("down")
                .and(contains("failing"))
                .and(contains("1 pending")),
        );

    let tested = env.json(&["channel", "test", "hook", "--message", "ping from the test"]);
    assert_eq!(tested["ok"], true, "{tested}");
    assert_eq!(tested["steps"][0]["step"], "deliver through webhook");
    assert!(
        ok.requests
            .lock()
            .unwrap()
            .last()
            .unwrap()
            .1
            .contains("ping from the test")
    );
    env.cairn()
        .args(["channel", "test", "down"])
        .assert()
        .code(1)
        .stdout(contains("FAILED").and(contains("HTTP 500")));
    env.cairn()
        .args(["channel", "test", "nope"])
        .assert()
        .code(2)
        .stderr(contains(
            "no channel named \"nope\" (configured: chat, down, hook)",
        ));
    env.cairn()
        .args(["channel", "test", "hook", "--to", "C1"])
        .assert()
        .code(2)
        .stderr(contains(
            "--to: channels.hook is of type webhook, which has no chats",
        ));
    env.cairn()
        .args(["channel", "allow", "hook", "U0123ABCD"])
        .assert()
        .code(2)
        .stderr(contains("no channel named \"hook\" receives messages"));
}
