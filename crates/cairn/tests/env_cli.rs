//! Black-box tests of the environment as the binary reads it: a
//! `${VAR}` whose variable is not set fails only what needs it (file, line,
//! key and variable named), the rest runs and `doctor` and the daemon warn;
//! a variable that is not valid UTF-8 is left out with a warning, never a
//! panic.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_llm::testing::{FakeLlmServer, Scripted};
use common::DaemonChild;

const KEY: &str = "sk-env-test-0123456789";

/// A home made by `cairn init --api-key-env MYKEY` (with MYKEY set), plus
/// a Telegram channel whose token is `${TG_TOKEN}`.
struct Home {
    dir: tempfile::TempDir,
    _llm: FakeLlmServer,
}

impl Home {
    fn new() -> Home {
        let llm = FakeLlmServer::start_on_thread().unwrap();
        llm.push(Scripted::text("ok"));
        let dir = tempfile::tempdir().unwrap();
        let home = Home { dir, _llm: llm };
        let out = home
            .cmd()
            .env("MYKEY", KEY)
            .args(["init", "--yes", "--provider", "compatible", "--base-url"])
            .arg(home._llm.base_url_openai())
            .args(["--model", "test-model", "--api-key-env", "MYKEY"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let config = home.path().join("config.toml");
        let mut written = std::fs::read_to_string(&config).unwrap();
        assert!(written.contains("api_key = \"${MYKEY}\""), "{written}");
        written.push_str(
            "\n[channels.phone]\ntype = \"telegram\"\nbot_token = \"${TG_TOKEN}\"\nchat_id = \"42\"\n",
        );
        std::fs::write(&config, written).unwrap();
        home
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `cairn` in a shell without MYKEY (nor TG_TOKEN).
    fn cmd(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", self.path())
            .env("CAIRN_GATEWAY_PORT", "0")
            .env("CAIRN_LLM_MAX_RETRIES", "0")
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_unset_key_variable_fails_only_the_commands_that_need_the_llm() {
    let home = Home::new();
    let file = home.path().join("morning.yaml");
    std::fs::write(
        &file,
        "name: morning\ntrigger:\n  type: cron\n  schedule: \"0 9 * * *\"\naction:\n  type: notification\n  message: good morning\n",
    )
    .unwrap();
    let archive = home.path().join("backup.tar.gz");
    for args in [
        vec!["routine", "apply", "--file", file.to_str().unwrap()],
        vec!["routine", "list"],
        vec!["token", "create", "--name", "laptop"],
        vec!["backup", archive.to_str().unwrap()],
        vec!["inbox"],
    ] {
        let out = home.run(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
    }
    assert!(archive.exists());

    // The chat needs the key: it stops at once, naming file, line, key and variable.
    let out = home.run(&["chat", "-m", "hi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let config = home.path().join("config.toml");
    assert!(
        err.contains(&format!("{}:", config.display()))
            && err.contains("llm.api_key: environment variable MYKEY is not set"),
        "{err}"
    );

    // The channel's deliveries fail saying why; the notification waits in the inbox.
    let out = home.run(&["notify", "test", "phone"]);
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains("channels.phone.bot_token: environment variable TG_TOKEN is not set"),
        "{shown}"
    );

    // doctor warns (and fails nothing for it); config show marks the key.
    let out = home.run(&["doctor"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    let warning = |name: &str| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains(name))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert!(warning("environment").starts_with("warn"), "{shown}");
    assert!(
        shown.contains("llm.api_key: environment variable MYKEY is not set"),
        "{shown}"
    );
    assert!(
        shown.contains("channels.phone.bot_token: environment variable TG_TOKEN"),
        "{shown}"
    );
    assert!(warning(" llm ").starts_with("warn"), "{shown}");
    let out = home.run(&["config", "show"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("(unavailable: environment variable MYKEY is not set)"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains(KEY));
}

/// Starts `cmd` as `cairn daemon` with its log in a file; the daemon and
/// the log's path.
fn daemon_logging(cmd: Command, dir: &Path) -> (DaemonChild, PathBuf) {
    let log = dir.join("daemon.log");
    let mut cmd = cmd;
    cmd.arg("daemon")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    (DaemonChild(cmd.spawn().unwrap()), log)
}

/// Waits until `log` holds `what` (the daemon printed it).
fn wait_for(log: &Path, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(what) {
            return text;
        }
        assert!(Instant::now() < deadline, "never logged {what:?}:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_daemon_runs_without_the_key_and_warns_once() {
    let home = Home::new();
    let (daemon, log) = daemon_logging(home.cmd(), home.path());
    let text = wait_for(&log, "cairn daemon running");
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("llm.api_key: environment variable MYKEY is not set"))
        .collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(warned[0].contains("WARN"), "{text}");
    daemon.stop();
}

/// `text` without its terminal colours (the log's fields are coloured).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = rest.find('m').map_or("", |end| &rest[end + 1..]);
    }
    out.push_str(rest);
    out
}

/// A variable whose value, and one whose name, is not valid UTF-8.
fn with_bad_variables(mut cmd: Command) -> Command {
    cmd.env(OsStr::from_bytes(b"BAD"), OsStr::from_bytes(b"\xff\xfe"))
        .env(OsStr::from_bytes(b"N\xffME"), "v");
    cmd
}

#[test]
fn a_variable_that_is_not_utf8_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "[gateway]\nport = 0\n").unwrap();
    let cmd = || {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env_clear()
            .env("CAIRN_HOME", dir.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        with_bad_variables(cmd)
    };
    let out = cmd().args(["mcp", "list"]).output().unwrap();
    let shown = plain(&text(&out));
    assert!(out.status.success(), "{shown}");
    assert!(!shown.contains("panicked"), "{shown}");
    let warnings: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("not valid UTF-8"))
        .collect();
    assert_eq!(warnings.len(), 2, "{shown}");
    assert!(
        warnings.iter().any(|l| l.contains("variable=BAD")),
        "{shown}"
    );
    assert!(
        warnings.iter().any(|l| l.contains("variable=N\u{FFFD}ME")),
        "{shown}"
    );

    let (daemon, log) = daemon_logging(cmd(), dir.path());
    let text = plain(&wait_for(&log, "cairn daemon running"));
    assert!(text.contains("variable=BAD"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    daemon.stop();
}
