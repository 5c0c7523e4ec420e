//! The sandbox through the built binary: `doctor` and the daemon's start-up
//! log say whether commands are confined; where they cannot be (here
//! `tools.shell.landlock = false` stands in for an old kernel), a policy or a
//! routine that runs `shell` unapproved is refused unless
//! `tools.shell.allow_unconfined = true`.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use predicates::str::contains;

fn cairn(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear()
        .env("CAIRN_HOME", home)
        .env("CAIRN_GATEWAY_PORT", "0");
    cmd
}

fn home_with(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

fn sandbox_check(home: &Path) -> serde_json::Value {
    let out = cairn(home).args(["doctor", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sandbox")
        .unwrap()
        .clone()
}

const UNCONFINED: &str = "[tools.shell]\nlandlock = false\n";

/// `doctor` prints whether Landlock confines commands on this machine (the
/// line CI shows), and fails here when it does not unless
/// `CAIRN_TEST_NO_LANDLOCK=1` says the kernel lacks it.
#[test]
fn doctor_says_whether_commands_are_confined() {
    let home = tempfile::tempdir().unwrap();
    let check = sandbox_check(home.path());
    println!("doctor sandbox: {} {}", check["status"], check["message"]);
    let message = check["message"].as_str().unwrap();
    if std::env::var_os("CAIRN_TEST_NO_LANDLOCK").is_none() {
        assert_eq!(check["status"], "ok", "{message}");
        assert!(message.starts_with("Landlock (ABI "), "{message}");
    }
    let home = home_with(UNCONFINED);
    let check = sandbox_check(home.path());
    assert_eq!(check["status"], "warn");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains("turned off by tools.shell.landlock = false")
            && message.contains("shell commands run unconfined")
            && message.contains("tools.shell.allow_unconfined = true"),
        "{message}"
    );
}

/// Autonomy `full` without confinement: refused at load (doctor's tools
/// check, the daemon), accepted once the owner allows unconfined commands.
#[test]
fn unconfined_full_autonomy_is_refused_at_load_unless_allowed() {
    let config = format!("{UNCONFINED}\n[tools.policy]\nautonomy = \"full\"\n");
    let home = home_with(&config);
    cairn(home.path())
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(contains("FAIL  tools"))
        .stdout(contains("config.toml:"))
        .stdout(contains("tools.policy.autonomy = \"full\""))
        .stdout(contains("tools.shell.allow_unconfined = true"));
    cairn(home.path())
        .arg("daemon")
        .timeout(Duration::from_secs(30))
        .assert()
        .code(2)
        .stderr(contains("cannot be confined here"));
    // An allow rule is the same hole; an ask rule for shell closes it.
    let home = home_with(&format!(
        "{UNCONFINED}\n[tools.policy]\nallow = [\"sh*\"]\n"
    ));
    cairn(home.path())
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(contains("a tools.policy.allow rule matching `shell`"));
    let home = home_with(&format!("{config}ask = [\"shell\"]\n"));
    cairn(home.path())
        .arg("doctor")
        .assert()
        .stdout(contains("ok    tools"));
    let home = home_with(
        "[tools.shell]\nlandlock = false\nallow_unconfined = true\n\n[tools.policy]\nautonomy = \"full\"\n",
    );
    cairn(home.path())
        .arg("doctor")
        .assert()
        .stdout(contains("ok    tools"))
        .stdout(contains("unapproved ones too"));
}

/// `routine apply` refuses `shell` in `allowed_tools` without confinement,
/// naming the file and field; accepted once allowed.
#[test]
fn routine_apply_refuses_unconfined_shell_in_allowed_tools() {
    let routine = "name: sweep\ntrigger: {type: manual}\naction:\n  type: tool_call\n  tool: shell\n  params: {command: ls}\n  allowed_tools: [shell]\n";
    let home = home_with(UNCONFINED);
    let file = home.path().join("sweep.yaml");
    std::fs::write(&file, routine).unwrap();
    cairn(home.path())
        .args(["routine", "apply", "-f"])
        .arg(&file)
        .assert()
        .failure()
        .stderr(contains("sweep.yaml:7"))
        .stderr(contains("action.allowed_tools"))
        .stderr(contains("tools.shell.allow_unconfined = true"));
    std::fs::write(
        home.path().join("config.toml"),
        "[tools.shell]\nlandlock = false\nallow_unconfined = true\n",
    )
    .unwrap();
    cairn(home.path())
        .args(["routine", "apply", "-f"])
        .arg(&file)
        .assert()
        .success();
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The daemon's start-up log says whether commands are confined.
#[test]
fn the_daemon_logs_its_confinement_at_start() {
    let home = home_with(UNCONFINED);
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.env_clear()
        .env("CAIRN_HOME", home.path())
        .env("CAIRN_GATEWAY_PORT", "0")
        .arg("daemon")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut daemon = Daemon(cmd.spawn().unwrap());
    let stderr = daemon.0.stderr.take().unwrap();
    // Lines until the sandbox's: it is installed once the vault is read,
    // before any part that runs commands starts, so it precedes "cairn
    // daemon running".
    let mut seen = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if line.contains("shell commands run unconfined") {
            assert!(
                line.contains("turned off by tools.shell.landlock = false"),
                "{line}"
            );
            return;
        }
        assert!(!line.contains("cairn daemon running"), "{seen:?}");
        seen.push(line);
    }
    panic!("the daemon ended without logging its confinement: {seen:?}");
}
